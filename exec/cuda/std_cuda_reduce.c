/* std_cuda_reduce.c - the ops of the CUDA standard node that reduce or
 * select along axes (std_cuda_internal.h): ReduceSum / Mean / Max / Min /
 * Prod (and the Sum / Mean backward), ArgMax / ArgMin, TopK, CumSum,
 * Softmax / LogSoftmax and LayerNormalization. Axes, k and the like must
 * be known before running (attributes, or inputs the executor folded). */
#include "exec/cuda/std_cuda_internal.h"

#include "base/shape.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/std_cast.h"
#include "kernels/cuda/std_norm.h"
#include "kernels/cuda/std_shape.h"

#include <stdlib.h>
#include <string.h>

#define IN(n, i) tx_std_in(n, i)

/* [outer, n, inner] around axis ax of x. */
static void split_axis(tx_cuda_std_node *n, const tx_tensor *x, int32_t ax)
{
    n->outer = n->inner = 1;
    for (int32_t k = 0; k < ax; k++) n->outer *= (size_t)x->dims[k];
    for (int32_t k = ax + 1; k < x->rank; k++) n->inner *= (size_t)x->dims[k];
    n->len = x->rank ? (size_t)x->dims[ax] : 1;
}

/* The single integer value of input i (known before running). */
static teexec_status *host_int(tx_cuda_std_node *n, size_t i, const char *what, int64_t *v)
{
    int64_t *vals;
    size_t nv;
    TX_TRY(tx_std_host_ints(n, i, &vals, &nv));
    teexec_status *st = nv == 1 ? NULL : UNSUP("%s must have one element", what);
    if (!st) *v = vals[0];
    free(vals);
    return st;
}

/* ---- prepare ------------------------------------------------------------------------- */

static teexec_status *prep_reduce(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    TX_TRY(tx_std_need_rank(n, x->rank));
    n->red = (tx_reduce_op)n->op->sub;
    if (y->dtype != x->dtype) return UNSUP("the output's dtype differs from the input's");
    if (!tx_cuda_reduce_dtype_ok(n->red, x->dtype))
        return UNSUP("%s is not supported for this reduction", teexec_dtype_name(x->dtype));
    bool axes_input = n->red == TX_REDUCE_SUM ? n->node->opset >= 13 : n->node->opset >= 18;
    int64_t keep, noop;
    TX_TRY(tx_ir_attr_int(n->node, "keepdims", 1, &keep));
    TX_TRY(tx_ir_attr_int(n->node, "noop_with_empty_axes", 0, &noop));
    const int64_t *axes = NULL;
    int64_t *owned = NULL;
    size_t naxes = 0;
    if (axes_input) {
        if (IN(n, 1)) TX_TRY(tx_std_host_ints(n, 1, &owned, &naxes));
        axes = owned;
    } else {
        TX_TRY(tx_ir_attr_ints(n->node, "axes", &axes, &naxes));
    }
    tx_shape xs = tx_shape_of(x), ys;
    bool red[TX_MAX_RANK] = {false};
    teexec_status *st = tx_std_at(n, tx_shape_reduce(&xs, axes, naxes, keep != 0, noop != 0,
                                                      &ys, red));
    free(owned);
    TX_TRY(st);
    if (!tx_tensor_has_shape(y, &ys)) return UNSUP("output shape differs from the reduction's");
    memset(&n->rp, 0, sizeof n->rp);
    n->rp.rank = x->rank;
    uint64_t count = 1;
    for (int32_t k = 0; k < x->rank; k++) {
        n->rp.dims[k] = x->dims[k];
        n->rp.red[k] = red[k];
        if (red[k]) count *= (uint64_t)x->dims[k];
    }
    n->red_scale = n->red == TX_REDUCE_MEAN && count ? 1.0 / (double)count : 1.0;
    if (n->red == TX_REDUCE_MAX || n->red == TX_REDUCE_MIN || n->red == TX_REDUCE_PROD)
        n->scratch = tx_std_align(tx_cuda_reduce_backward_scratch(&n->rp));
    return NULL;
}

static teexec_status *prep_arg(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    if (y->dtype != TEEXEC_DTYPE_INT64) return UNSUP("the output must be int64");
    int64_t axis, keep, last;
    TX_TRY(tx_ir_attr_int(n->node, "axis", 0, &axis));
    TX_TRY(tx_ir_attr_int(n->node, "keepdims", 1, &keep));
    TX_TRY(tx_ir_attr_int(n->node, "select_last_index", 0, &last));
    int32_t ax;
    TX_TRY(tx_std_at(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    tx_shape xs = tx_shape_of(x), ys;
    TX_TRY(tx_std_at(n, tx_shape_reduce(&xs, &axis, 1, keep != 0, false, &ys, NULL)));
    if (!tx_tensor_has_shape(y, &ys)) return UNSUP("output shape differs from the reduction's");
    split_axis(n, x, ax);
    if (y->numel && !n->len) return UNSUP("the axis has size 0");
    n->flag_a = last != 0;
    return NULL;
}

static teexec_status *prep_topk(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    int64_t axis, largest, sorted, k;
    TX_TRY(tx_ir_attr_int(n->node, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_int(n->node, "largest", 1, &largest));
    TX_TRY(tx_ir_attr_int(n->node, "sorted", 1, &sorted));
    if (n->node->opset < 10) TX_TRY(tx_ir_attr_int(n->node, "k", 0, &k));
    else TX_TRY(host_int(n, 1, "K", &k));
    int32_t ax;
    TX_TRY(tx_std_at(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    if (k < 0 || k > x->dims[ax])
        return UNSUP("k = %lld for an axis of size %lld", (long long)k, (long long)x->dims[ax]);
    tx_shape ys = tx_shape_of(x);
    ys.dims[ax] = k;
    if (y->dtype != x->dtype || !tx_tensor_has_shape(y, &ys))
        return UNSUP("the values output does not fit");
    if (n->n_out > 1 && tx_std_present(&n->out[1]) &&
        (n->out[1].dtype != TEEXEC_DTYPE_INT64 || !tx_tensor_has_shape(&n->out[1], &ys)))
        return UNSUP("the indices output does not fit");
    split_axis(n, x, ax);
    n->k = k;
    n->flag_a = largest != 0; /* sorted or not, the result is sorted (as the CPU) */
    /* the indices when the node has no indices output; the backward's
     * values of a TopK made again */
    n->idx_off = 0;
    n->val_off = tx_std_align((size_t)y->numel * sizeof(int64_t));
    n->scratch = n->val_off + tx_std_align(y->nbytes);
    return NULL;
}

static teexec_status *prep_cumsum(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    if (y->dtype != x->dtype || y->numel != x->numel) return UNSUP("output does not fit the input");
    int64_t excl, rev, axis;
    TX_TRY(tx_ir_attr_int(n->node, "exclusive", 0, &excl));
    TX_TRY(tx_ir_attr_int(n->node, "reverse", 0, &rev));
    TX_TRY(host_int(n, 1, "axis", &axis));
    int32_t ax;
    TX_TRY(tx_std_at(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    split_axis(n, x, ax);
    n->flag_a = excl != 0;
    n->flag_b = rev != 0;
    return NULL;
}

static teexec_status *prep_softmax(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0);
    if (!x) return UNSUP("input 0 is missing");
    if (n->out[0].dtype != x->dtype) return UNSUP("%s is not supported", teexec_dtype_name(x->dtype));
    bool legacy = n->node->opset < 13;
    int64_t axis;
    TX_TRY(tx_ir_attr_int(n->node, "axis", legacy ? 1 : -1, &axis));
    n->log_mode = n->op->sub == 1;
    n->outer = n->len = n->inner = 1;
    if (x->rank == 0) {
        if (axis != 0 && axis != -1) return UNSUP("axis %lld for a scalar", (long long)axis);
        return NULL;
    }
    int32_t ax;
    TX_TRY(tx_std_at(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    for (int32_t k = 0; k < ax; k++) n->outer *= (size_t)x->dims[k];
    if (legacy) {
        for (int32_t k = ax; k < x->rank; k++) n->len *= (size_t)x->dims[k];
    } else {
        n->len = (size_t)x->dims[ax];
        for (int32_t k = ax + 1; k < x->rank; k++) n->inner *= (size_t)x->dims[k];
    }
    return NULL;
}

/* A parameter of LayerNormalization that broadcasts to the normalized dims
 * is expanded into scratch (one strided copy) before the kernel. */
static teexec_status *ln_param(tx_cuda_std_node *n, size_t slot, const tx_tensor *x, int32_t ax,
                               bool *expand, size_t *off, size_t *scratch)
{
    const tx_tensor *p = IN(n, slot);
    *expand = false;
    if (!p) return NULL;
    if (p->dtype != x->dtype) return UNSUP("input %zu has another dtype than X", slot);
    tx_shape norm = {.rank = x->rank - ax};
    memcpy(norm.dims, x->dims + ax, sizeof(int64_t) * (size_t)norm.rank);
    tx_shape ps = tx_shape_of(p);
    if (!tx_shape_broadcastable_to(&ps, &norm))
        return UNSUP("input %zu does not broadcast to the normalized dims", slot);
    if (p->numel == n->h) return NULL;
    TX_TRY(tx_std_need_rank(n, norm.rank));
    tx_cuda_strided *c = &n->cp[slot - 1];
    c->rank = norm.rank;
    memcpy(c->dims, norm.dims, sizeof(int64_t) * (size_t)norm.rank);
    tx_std_bcast_strides(p, norm.rank, norm.dims, c->src_st);
    tx_std_contig_strides(norm.rank, norm.dims, c->dst_st);
    *expand = true;
    *off = *scratch;
    *scratch += tx_std_align(n->h * tx_dtype_elem_size(x->dtype));
    return NULL;
}

static teexec_status *prep_layernorm(tx_cuda_std_node *n, bool training)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x || !IN(n, 1)) return UNSUP("X or Scale is missing");
    if (y->dtype != x->dtype || y->numel != x->numel) return UNSUP("output does not fit the input");
    int64_t axis, stash;
    TX_TRY(tx_ir_attr_int(n->node, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_int(n->node, "stash_type", 1, &stash));
    TX_TRY(tx_ir_attr_float(n->node, "epsilon", 1e-5f, &n->eps));
    if (stash != TEEXEC_DTYPE_FLOAT && stash != TEEXEC_DTYPE_DOUBLE &&
        stash != TEEXEC_DTYPE_FLOAT16 && stash != TEEXEC_DTYPE_BFLOAT16)
        return UNSUP("stash_type %d is not supported", (int)stash);
    int32_t ax;
    TX_TRY(tx_std_at(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    n->rows = 1;
    n->h = 1;
    for (int32_t k = 0; k < ax; k++) n->rows *= (size_t)x->dims[k];
    for (int32_t k = ax; k < x->rank; k++) n->h *= (size_t)x->dims[k];
    bool f64 = x->dtype == TEEXEC_DTYPE_DOUBLE;
    /* the kernels' statistics are FLOAT (FP32 path) or DOUBLE; other
     * stash types are converted from a copy in scratch */
    teexec_dtype native = f64 ? TEEXEC_DTYPE_DOUBLE : TEEXEC_DTYPE_FLOAT;
    size_t scratch = 0;
    for (size_t j = 1; j < 3; j++) {
        n->ln_stat_off[j - 1] = SIZE_MAX;
        if (j >= n->n_out || !tx_std_present(&n->out[j])) continue;
        const tx_tensor *s = &n->out[j];
        if (s->numel != n->rows) return UNSUP("output %zu must have one value per row", j);
        if (s->dtype == native) continue;
        if (!f64 && s->dtype == TEEXEC_DTYPE_DOUBLE)
            return UNSUP("statistics in double (stash_type 11) of a %s input",
                         teexec_dtype_name(x->dtype));
        if (!tx_std_dom_float(tx_std_dom_of(s->dtype))) return UNSUP("output %zu must be a float", j);
        n->ln_stat_off[j - 1] = scratch;
        scratch += tx_std_align(n->rows * tx_dtype_elem_size(native));
    }
    TX_TRY(tx_std_alloc_cp(n, 2));
    TX_TRY(ln_param(n, 1, x, ax, &n->ln_expand_w, &n->ln_w_off, &scratch));
    TX_TRY(ln_param(n, 2, x, ax, &n->ln_expand_b, &n->ln_b_off, &scratch));
    if (training && !f64 && (n->ln_expand_w || n->ln_expand_b))
        return UNSUP("a Scale or B that broadcasts is not trained on the GPU");
    size_t esz = tx_dtype_elem_size(x->dtype);
    if (!f64 && !IN(n, 2)) {
        /* the kernel adds a beta: zeros */
        n->ln_b_off = scratch;
        scratch += tx_std_align(n->h * esz);
    }
    if (training && !f64) {
        /* backward: the statistics again (the forward's kernel, its output
         * thrown away) unless the node outputs them, and the parameter-grad
         * workspace */
        n->ln_y_off = scratch;
        scratch += tx_std_align(n->rows * n->h * esz);
        n->ln_mu_off = scratch;
        scratch += tx_std_align(n->rows * sizeof(float));
        n->ln_rs_off = scratch;
        scratch += tx_std_align(n->rows * sizeof(float));
        n->ln_ws_off = scratch;
        scratch += tx_std_align(tx_cuda_norm_bwd_workspace_floats(n->rows, n->h) * sizeof(float));
    }
    n->scratch = scratch;
    return NULL;
}

teexec_status *tx_std_prep_reduce(tx_cuda_std_node *n, const tx_cuda_std_desc *d)
{
    switch (n->kind) {
    case TX_SK_REDUCE: return prep_reduce(n);
    case TX_SK_ARG: return prep_arg(n);
    case TX_SK_TOPK: return prep_topk(n);
    case TX_SK_CUMSUM: return prep_cumsum(n);
    case TX_SK_SOFTMAX: return prep_softmax(n);
    case TX_SK_LAYERNORM: return prep_layernorm(n, d->training);
    default: return UNSUP("not a reduction");
    }
}

/* ---- forward ---------------------------------------------------------------------------- */

static void *at_off(void *base, size_t off) { return (char *)base + off; }

/* The normalization's gamma / beta pointers: the inputs, their broadcast
 * copies in scratch, or zeros. */
static teexec_status *ln_params(tx_cuda_std_node *n, const tx_tensor *const *in, void *scratch,
                                const void **w, const void **b, void *stream)
{
    size_t esz = tx_dtype_elem_size(n->in[0].dtype);
    *w = in[1]->data;
    *b = IN(n, 2) ? in[2]->data : NULL;
    if (n->ln_expand_w) {
        *w = at_off(scratch, n->ln_w_off);
        TX_TRY(tx_std_at(n, tx_cuda_strided_copy(&n->cp[0], in[1]->data, (void *)*w, esz, stream)));
    }
    if (n->ln_expand_b) {
        *b = at_off(scratch, n->ln_b_off);
        TX_TRY(tx_std_at(n, tx_cuda_strided_copy(&n->cp[1], in[2]->data, (void *)*b, esz, stream)));
    } else if (!*b && n->in[0].dtype != TEEXEC_DTYPE_DOUBLE) {
        *b = at_off(scratch, n->ln_b_off);
        TX_TRY(tx_std_memset0(n, (void *)*b, n->h * esz, stream));
    }
    return NULL;
}

static teexec_status *fwd_layernorm(tx_cuda_std_node *n, const tx_tensor *const *in,
                                    tx_tensor *const *out, void *scratch, void *stream)
{
    const void *w, *b;
    TX_TRY(ln_params(n, in, scratch, &w, &b, stream));
    void *stat[2] = {NULL, NULL};
    for (size_t j = 1; j < 3; j++) {
        if (j >= n->n_out || !out[j]) continue;
        stat[j - 1] = n->ln_stat_off[j - 1] == SIZE_MAX ? out[j]->data
                                                        : at_off(scratch, n->ln_stat_off[j - 1]);
    }
    bool f64 = n->in[0].dtype == TEEXEC_DTYPE_DOUBLE;
    if (f64) {
        TX_TRY(tx_std_at(n, tx_cuda_layernorm_f64(in[0]->data, w, b, (double)n->eps,
                                                  out[0]->data, stat[0], stat[1], n->rows, n->h,
                                                  stream)));
    } else {
        tx_cuda_norm_fwd a = {.rms = 0, .rows = n->rows, .h = n->h, .eps = n->eps,
                              .x = in[0]->data, .x_dtype = n->in[0].dtype, .gamma = w, .beta = b,
                              .w_dtype = n->in[0].dtype, .y = out[0]->data,
                              .y_dtype = n->out[0].dtype, .mu = stat[0], .rsigma = stat[1]};
        TX_TRY(tx_std_at(n, tx_cuda_norm_forward(&a, stream)));
    }
    for (size_t j = 1; j < 3; j++)
        if (stat[j - 1] && n->ln_stat_off[j - 1] != SIZE_MAX)
            TX_TRY(tx_std_at(n, tx_cuda_cast(stat[j - 1], f64 ? TEEXEC_DTYPE_DOUBLE : TEEXEC_DTYPE_FLOAT,
                                             out[j]->data, n->out[j].dtype, n->rows, stream)));
    return NULL;
}

teexec_status *tx_std_fwd_reduce(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 tx_tensor *const *out, void *scratch, void *stream)
{
    const tx_tensor *y0 = &n->out[0];
    switch (n->kind) {
    case TX_SK_REDUCE:
        return tx_std_at(n, tx_cuda_reduce(n->red, &n->rp, in[0]->data, out[0]->data, y0->dtype,
                                           stream));
    case TX_SK_ARG:
        return tx_std_at(n, tx_cuda_argmax(n->op->sub, n->flag_a, in[0]->data, n->in[0].dtype,
                                           n->outer, n->len, n->inner, out[0]->data, stream));
    case TX_SK_TOPK: {
        int64_t *idx = n->n_out > 1 && out[1] ? out[1]->data : at_off(scratch, n->idx_off);
        return tx_std_at(n, tx_cuda_topk(n->flag_a, (size_t)n->k, in[0]->data, n->in[0].dtype,
                                         n->outer, n->len, n->inner, out[0]->data, idx, stream));
    }
    case TX_SK_CUMSUM:
        return tx_std_at(n, tx_cuda_cumsum(n->flag_a, n->flag_b, in[0]->data, out[0]->data,
                                           y0->dtype, n->outer, n->len, n->inner, stream));
    case TX_SK_SOFTMAX:
        if (y0->dtype == TEEXEC_DTYPE_DOUBLE)
            return tx_std_at(n, tx_cuda_softmax_f64(in[0]->data, out[0]->data, n->outer, n->len,
                                                    n->inner, n->log_mode, stream));
        return tx_std_at(n, tx_cuda_softmax_forward(in[0]->data, out[0]->data, y0->dtype,
                                                    n->outer, n->len, n->inner, n->log_mode,
                                                    stream));
    case TX_SK_LAYERNORM: return fwd_layernorm(n, in, out, scratch, stream);
    default: return tx_std_node_err(n->node, TEEXEC_ERR_INTERNAL, "not a reduction");
    }
}

/* ---- backward ------------------------------------------------------------------------ */

static teexec_status *bwd_layernorm(tx_cuda_std_node *n, const tx_tensor *const *in,
                                    const tx_tensor *const *out, const tx_tensor *const *gout,
                                    tx_tensor *const *gin, void *scratch, void *stream)
{
    tx_tensor *gx = gin[0], *gw = n->n_in > 1 ? gin[1] : NULL, *gb = n->n_in > 2 ? gin[2] : NULL;
    if (!gout[0]) {
        for (size_t i = 0; i < 3 && i < n->n_in; i++)
            if (gin[i]) TX_TRY(tx_std_memset0(n, gin[i]->data, n->in[i].nbytes, stream));
        return NULL;
    }
    if (!gx && !gw && !gb) return NULL;
    const void *w, *b;
    TX_TRY(ln_params(n, in, scratch, &w, &b, stream));
    /* the node's own statistics outputs when they are FLOAT */
    const float *mu = n->n_out > 1 && out[1] && n->ln_stat_off[0] == SIZE_MAX ? out[1]->data : NULL;
    const float *rs = n->n_out > 2 && out[2] && n->ln_stat_off[1] == SIZE_MAX ? out[2]->data : NULL;
    if (!mu || !rs) {
        /* the forward's statistics, by the forward's kernel */
        float *m = at_off(scratch, n->ln_mu_off), *r = at_off(scratch, n->ln_rs_off);
        tx_cuda_norm_fwd a = {.rms = 0, .rows = n->rows, .h = n->h, .eps = n->eps,
                              .x = in[0]->data, .x_dtype = n->in[0].dtype, .gamma = w, .beta = b,
                              .w_dtype = n->in[0].dtype, .y = at_off(scratch, n->ln_y_off),
                              .y_dtype = n->out[0].dtype, .mu = m, .rsigma = r};
        TX_TRY(tx_std_at(n, tx_cuda_norm_forward(&a, stream)));
        mu = m;
        rs = r;
    }
    tx_cuda_norm_bwd a = {.rms = 0, .rows = n->rows, .h = n->h, .x = in[0]->data,
                          .x_dtype = n->in[0].dtype, .dy = gout[0]->data,
                          .dy_dtype = n->out[0].dtype, .gamma = w, .w_dtype = n->in[0].dtype,
                          .mu = mu, .rsigma = rs, .dx = gx ? gx->data : NULL,
                          .dx_dtype = n->in[0].dtype, .dgamma = gw ? gw->data : NULL,
                          .dbeta = gb ? gb->data : NULL,
                          .workspace = at_off(scratch, n->ln_ws_off)};
    return tx_std_at(n, tx_cuda_norm_backward(&a, stream));
}

teexec_status *tx_std_bwd_reduce(tx_cuda_std_node *n, const tx_tensor *const *in,
                                 const tx_tensor *const *out, const tx_tensor *const *gout,
                                 tx_tensor *const *gin, void *scratch, void *stream)
{
    const tx_tensor *x0 = &n->in[0];
    tx_tensor *g0 = gin[0];
    if ((n->kind == TX_SK_REDUCE || n->kind == TX_SK_CUMSUM || n->kind == TX_SK_TOPK) && g0 &&
        !gout[0])
        return tx_std_memset0(n, g0->data, x0->nbytes, stream);
    switch (n->kind) {
    case TX_SK_REDUCE:
        if (!g0) return NULL;
        if (n->red == TX_REDUCE_SUM || n->red == TX_REDUCE_MEAN)
            return tx_std_at(n, tx_cuda_reduce_backward(&n->rp, gout[0]->data, n->out[0].dtype,
                                                        n->red_scale, g0->data, x0->dtype,
                                                        stream));
        return tx_std_at(n, tx_cuda_reduce_backward_select(n->red, &n->rp, in[0]->data, x0->dtype,
                                                           out[0]->data, n->out[0].dtype,
                                                           gout[0]->data, n->out[0].dtype,
                                                           g0->data, scratch, stream));
    case TX_SK_CUMSUM:
        /* the adjoint of a running sum: the running sum the other way */
        if (!g0) return NULL;
        return tx_std_at(n, tx_cuda_cumsum(n->flag_a, !n->flag_b, gout[0]->data, g0->data,
                                           x0->dtype, n->outer, n->len, n->inner, stream));
    case TX_SK_TOPK: {
        if (!g0) return NULL;
        const int64_t *idx;
        if (n->n_out > 1 && out[1]) {
            idx = out[1]->data;
        } else {
            /* the same selection again */
            int64_t *ix = at_off(scratch, n->idx_off);
            TX_TRY(tx_std_at(n, tx_cuda_topk(n->flag_a, (size_t)n->k, in[0]->data, x0->dtype,
                                             n->outer, n->len, n->inner,
                                             at_off(scratch, n->val_off), ix, stream)));
            idx = ix;
        }
        return tx_std_at(n, tx_cuda_topk_backward(gout[0]->data, n->out[0].dtype, idx, n->outer,
                                                  (size_t)n->k, n->len, n->inner, g0->data,
                                                  stream));
    }
    case TX_SK_SOFTMAX:
        if (!g0) return NULL;
        if (!gout[0]) return tx_std_memset0(n, g0->data, x0->nbytes, stream);
        return tx_std_at(n, tx_cuda_softmax_backward(out[0]->data, gout[0]->data, g0->data,
                                                     x0->dtype, n->outer, n->len, n->inner,
                                                     n->log_mode, stream));
    case TX_SK_LAYERNORM: return bwd_layernorm(n, in, out, gout, gin, scratch, stream);
    default: break;
    }
    return tx_std_node_err(n->node, TEEXEC_ERR_UNSUPPORTED, "no backward on the GPU");
}
