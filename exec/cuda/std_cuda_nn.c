/* std_cuda_nn.c - Conv, GatherND, RMSNormalization and Attention on the
 * CUDA standard node (std_cuda_internal.h), with exec/cpu_ops_nn.c's
 * attribute rules, over kernels/cuda/std_conv.h, std_shape.h (GatherND),
 * norm.h / std_norm.h (RMSNormalization) and std_attn.h; backwards as the
 * CPU trainer's rules (exec/backward_std.c). */
#include "exec/cuda/std_cuda_internal.h"

#include "base/shape.h"
#include "exec/cpu_ops.h"
#include "import/shape_infer.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/std_norm.h"
#include "kernels/cuda/std_shape.h"

#include <math.h>
#include <string.h>

#define IN(n, i) tx_std_in(n, i)

static void *at_off(void *base, size_t off) { return (char *)base + off; }

/* ---- Conv ----------------------------------------------------------------------- */

static teexec_status *prep_conv(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *w = IN(n, 1), *b = IN(n, 2), *y = &n->out[0];
    if (!x || !w) return UNSUP("X or W is missing");
    if (w->dtype != x->dtype || y->dtype != x->dtype || (b && b->dtype != x->dtype))
        return UNSUP("X, W, B and Y must share a dtype");
    tx_shape xs = tx_shape_of(x), ws = tx_shape_of(w);
    tx_conv_geom g;
    TX_TRY(tx_std_at(n, tx_conv_geometry(n->node, &xs, &ws, &g)));
    if (!tx_tensor_has_shape(y, &g.out)) return UNSUP("output shape differs from the convolution's");
    if (g.nsp > TX_CUDA_CONV_SPATIAL)
        return UNSUP("%d spatial dims (the GPU takes %d)", (int)g.nsp, TX_CUDA_CONV_SPATIAL);
    if (b && (b->rank != 1 || b->dims[0] != w->dims[0])) return UNSUP("B must be [M]");
    tx_cuda_conv *c = &n->cv;
    memset(c, 0, sizeof *c);
    c->nsp = g.nsp;
    c->n = x->dims[0];
    c->c = x->dims[1];
    c->m = w->dims[0];
    c->group = g.group;
    for (int d = 0; d < g.nsp; d++) {
        c->in[d] = x->dims[2 + d];
        c->k[d] = w->dims[2 + d];
        c->out[d] = y->dims[2 + d];
        c->stride[d] = g.strides[d];
        c->dilation[d] = g.dilations[d];
        c->pad[d] = g.pads[d];
    }
    return NULL;
}

/* ---- GatherND --------------------------------------------------------------------- */

static teexec_status *prep_gather_nd(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *idx = IN(n, 1), *y = &n->out[0];
    if (!x || !idx) return UNSUP("inputs are missing");
    if (idx->dtype != TEEXEC_DTYPE_INT64) return UNSUP("indices must be int64");
    if (y->dtype != x->dtype) return UNSUP("the output's dtype differs from the data's");
    TX_TRY(tx_std_need_rank(n, x->rank));
    TX_TRY(tx_std_need_rank(n, idx->rank));
    int64_t bd = 0;
    if (n->node->opset >= 12) TX_TRY(tx_ir_attr_int(n->node, "batch_dims", 0, &bd));
    if (bd < 0 || bd >= x->rank || bd >= idx->rank) return UNSUP("batch_dims %lld is out of range", (long long)bd);
    int64_t k = idx->dims[idx->rank - 1];
    if (k < 1 || k > x->rank - bd) return UNSUP("the last indices dim must be in [1, %d]", (int)(x->rank - bd));
    uint64_t want = 1;
    for (int32_t i = 0; i + 1 < idx->rank; i++) want *= (uint64_t)idx->dims[i];
    for (int32_t i = (int32_t)(bd + k); i < x->rank; i++) want *= (uint64_t)x->dims[i];
    if (want != y->numel) return UNSUP("the output's size differs from the gather's");
    n->axis = (int)bd;
    n->scratch = tx_std_align(tx_cuda_gather_nd_backward_scratch(idx->rank, idx->dims));
    return NULL;
}

/* ---- RMSNormalization --------------------------------------------------------------- */

static teexec_status *prep_rms(tx_cuda_std_node *n, bool training)
{
    const tx_tensor *x = IN(n, 0), *s = IN(n, 1), *y = &n->out[0];
    if (!x || !s) return UNSUP("X or scale is missing");
    if (!tx_std_dom_float(tx_std_dom_of(s->dtype))) return UNSUP("scale must be a float");
    if (y->dtype != s->dtype || y->numel != x->numel) return UNSUP("Y must have scale's dtype and X's size");
    bool f64 = x->dtype == TEEXEC_DTYPE_DOUBLE || s->dtype == TEEXEC_DTYPE_DOUBLE;
    if (f64 && (x->dtype != s->dtype))
        return UNSUP("a DOUBLE input with a %s one is not run on the GPU",
                     teexec_dtype_name(x->dtype == TEEXEC_DTYPE_DOUBLE ? s->dtype : x->dtype));
    int64_t axis, stash;
    TX_TRY(tx_ir_attr_int(n->node, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_int(n->node, "stash_type", 1, &stash));
    TX_TRY(tx_ir_attr_float(n->node, "epsilon", 1e-5f, &n->eps));
    if (stash != TEEXEC_DTYPE_FLOAT && stash != TEEXEC_DTYPE_DOUBLE &&
        stash != TEEXEC_DTYPE_FLOAT16 && stash != TEEXEC_DTYPE_BFLOAT16)
        return UNSUP("stash_type %d is not supported", (int)stash);
    int32_t ax;
    TX_TRY(tx_std_at(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    n->rows = n->h = 1;
    for (int32_t k = 0; k < ax; k++) n->rows *= (size_t)x->dims[k];
    for (int32_t k = ax; k < x->rank; k++) n->h *= (size_t)x->dims[k];
    tx_shape norm = {.rank = x->rank - ax};
    memcpy(norm.dims, x->dims + ax, sizeof(int64_t) * (size_t)norm.rank);
    tx_shape ss = tx_shape_of(s);
    if (!tx_shape_broadcastable_to(&ss, &norm)) return UNSUP("scale does not broadcast to the normalized dims");
    size_t scratch = 0, ws = tx_dtype_elem_size(s->dtype);
    n->ln_expand_w = s->numel != n->h;
    if (n->ln_expand_w) {
        if (training) return UNSUP("a scale that broadcasts is not trained on the GPU");
        TX_TRY(tx_std_need_rank(n, norm.rank));
        TX_TRY(tx_std_alloc_cp(n, 1));
        tx_cuda_strided *c = &n->cp[0];
        c->rank = norm.rank;
        memcpy(c->dims, norm.dims, sizeof(int64_t) * (size_t)norm.rank);
        tx_std_bcast_strides(s, norm.rank, norm.dims, c->src_st);
        tx_std_contig_strides(norm.rank, norm.dims, c->dst_st);
        n->ln_w_off = scratch;
        scratch += tx_std_align(n->h * ws);
    }
    if (training && !f64) {
        /* the backward's statistics: the forward's kernel again */
        n->ln_y_off = scratch;
        scratch += tx_std_align(n->rows * n->h * ws);
        n->ln_rs_off = scratch;
        scratch += tx_std_align(n->rows * sizeof(float));
        n->ln_ws_off = scratch;
        scratch += tx_std_align(tx_cuda_norm_bwd_workspace_floats(n->rows, n->h) * sizeof(float));
    }
    n->scratch = scratch;
    return NULL;
}

static teexec_status *rms_gamma(tx_cuda_std_node *n, const tx_tensor *const *in, void *scratch,
                                const void **w, void *stream)
{
    *w = in[1]->data;
    if (!n->ln_expand_w) return NULL;
    *w = at_off(scratch, n->ln_w_off);
    return tx_std_at(n, tx_cuda_strided_copy(&n->cp[0], in[1]->data, (void *)*w,
                                             tx_dtype_elem_size(n->in[1].dtype), stream));
}

static tx_cuda_norm_fwd rms_fwd_args(const tx_cuda_std_node *n, const void *x, const void *w,
                                     void *y, float *rs)
{
    tx_cuda_norm_fwd a = {.rms = 1, .rows = n->rows, .h = n->h, .eps = n->eps, .x = x,
                          .x_dtype = n->in[0].dtype, .gamma = w, .beta = NULL,
                          .w_dtype = n->in[1].dtype, .y = y, .y_dtype = n->out[0].dtype,
                          .mu = NULL, .rsigma = rs};
    return a;
}

/* ---- Attention -------------------------------------------------------------------- */

static teexec_status *prep_attention(tx_cuda_std_node *n, bool training)
{
    const tx_tensor *q = IN(n, 0), *k = IN(n, 1), *v = IN(n, 2), *m = IN(n, 3);
    const tx_tensor *pk = IN(n, 4), *pv = IN(n, 5);
    if (!q || !k || !v) return UNSUP("Q, K or V is missing");
    if (IN(n, 6)) return UNSUP("the nonpad_kv_seqlen input is not supported");
    tx_attention_params ap;
    TX_TRY(tx_std_at(n, tx_cpu_attention_params_of(n->node, &ap)));
    if (k->dtype != q->dtype || v->dtype != q->dtype || (pk && pk->dtype != q->dtype) ||
        (pv && pv->dtype != q->dtype))
        return UNSUP("Q, K, V and the caches must share a dtype");
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return UNSUP("Q, K and V must all be rank 3 or all rank 4");
    if (!pk != !pv) return UNSUP("past_key and past_value must be given together");
    tx_cuda_attn *a = &n->at;
    memset(a, 0, sizeof *a);
    a->dt = q->dtype;
    a->rank3 = q->rank == 3;
    a->b = q->dims[0];
    if (a->rank3) {
        if (ap.q_num_heads < 1 || ap.kv_num_heads < 1)
            return UNSUP("rank-3 Q/K/V need q_num_heads and kv_num_heads");
        a->hq = ap.q_num_heads;
        a->hkv = ap.kv_num_heads;
        a->lq = q->dims[1];
        a->lk = k->dims[1];
        if (q->dims[2] % a->hq || k->dims[2] % a->hkv || v->dims[2] % a->hkv)
            return UNSUP("hidden sizes do not divide by the head counts");
        a->d = q->dims[2] / a->hq;
        a->dv = v->dims[2] / a->hkv;
        if (k->dims[2] / a->hkv != a->d || v->dims[1] != a->lk) return UNSUP("K or V does not fit Q");
    } else {
        a->hq = q->dims[1];
        a->hkv = k->dims[1];
        a->lq = q->dims[2];
        a->lk = k->dims[2];
        a->d = q->dims[3];
        a->dv = v->dims[3];
        if (k->dims[3] != a->d || v->dims[1] != a->hkv || v->dims[2] != a->lk)
            return UNSUP("K or V does not fit Q");
    }
    if (k->dims[0] != a->b || v->dims[0] != a->b) return UNSUP("batch sizes differ");
    if (a->hkv < 1 || a->hq % a->hkv) return UNSUP("query heads cannot share the kv heads");
    a->reps = a->hq / a->hkv;
    if (pk) {
        if (pk->rank != 4 || pk->dims[0] != a->b || pk->dims[1] != a->hkv || pk->dims[3] != a->d ||
            pv->rank != 4 || pv->dims[0] != a->b || pv->dims[1] != a->hkv ||
            pv->dims[2] != pk->dims[2] || pv->dims[3] != a->dv)
            return UNSUP("past_key / past_value do not fit");
        a->past = pk->dims[2];
    }
    a->t = a->past + a->lk;
    a->scale = ap.has_scale ? (double)ap.scale : 1.0 / sqrt((double)a->d);
    a->softcap = ap.softcap;
    if (!(a->softcap >= 0)) return UNSUP("softcap must be >= 0");
    a->causal = ap.is_causal;
    for (int i = 0; i < 4; i++) a->mdims[i] = 1;
    if (m) {
        if (m->dtype != TEEXEC_DTYPE_BOOL && m->dtype != q->dtype)
            return UNSUP("attn_mask must be bool or Q's dtype");
        if (m->rank < 1 || m->rank > 4) return UNSUP("attn_mask must have rank 1 to 4");
        a->mask = m->dtype == TEEXEC_DTYPE_BOOL ? 1 : 2;
        int64_t full[4] = {a->b, a->hq, a->lq, a->t}, s = 1;
        for (int32_t i = 3; i >= 0; i--) {
            int32_t mi = i - (4 - m->rank);
            if (mi < 0) {
                a->mst[i] = 0;
                continue;
            }
            int64_t dm = m->dims[mi];
            a->mdims[i] = dm;
            bool fits = i == 3 ? (dm >= 1 && dm <= a->t) : (dm == 1 || dm == full[i]);
            if (!fits) return UNSUP("attn_mask does not broadcast to the scores");
            a->mst[i] = (dm == 1 && i < 3) ? 0 : s;
            if (i == 3) a->mask_t = dm;
            s *= dm;
        }
    }
    n->scratch = tx_std_align(tx_cuda_attention_scratch(a, training));
    return NULL;
}

teexec_status *tx_std_prep_nn(tx_cuda_std_node *n, const tx_cuda_std_desc *d)
{
    switch (n->kind) {
    case TX_SK_CONV: return prep_conv(n);
    case TX_SK_GATHER_ND: return prep_gather_nd(n);
    case TX_SK_RMSNORM: return prep_rms(n, d->training);
    default: return prep_attention(n, d->training);
    }
}

/* ---- forward ------------------------------------------------------------------------ */

static tx_cuda_attn_io attn_io(const tx_cuda_std_node *n, const tx_tensor *const *in,
                               tx_tensor *const *out)
{
    tx_cuda_attn_io io;
    memset(&io, 0, sizeof io);
    io.q = in[0]->data;
    io.k = in[1]->data;
    io.v = in[2]->data;
    if (IN(n, 3)) io.mask = in[3]->data;
    if (IN(n, 4)) io.past_k = in[4]->data;
    if (IN(n, 5)) io.past_v = in[5]->data;
    if (out) {
        io.y = out[0]->data;
        for (size_t j = 1; j < 4 && j < n->n_out; j++) {
            void *p = out[j] ? out[j]->data : NULL;
            if (j == 1) io.present_k = p;
            else if (j == 2) io.present_v = p;
            else io.qk = p;
        }
    }
    return io;
}

teexec_status *tx_std_fwd_nn(tx_cuda_std_node *n, const tx_tensor *const *in,
                             tx_tensor *const *out, void *scratch, void *stream)
{
    switch (n->kind) {
    case TX_SK_CONV:
        return tx_std_at(n, tx_cuda_conv_forward(&n->cv, in[0]->data, in[1]->data,
                                                 IN(n, 2) ? in[2]->data : NULL, out[0]->data,
                                                 n->in[0].dtype, stream));
    case TX_SK_GATHER_ND:
        return tx_std_at(n, tx_cuda_gather_nd(n->in[0].rank, n->in[0].dims, n->in[1].rank,
                                              n->in[1].dims, n->axis, in[0]->data,
                                              tx_dtype_elem_size(n->in[0].dtype), in[1]->data,
                                              out[0]->data, stream));
    case TX_SK_RMSNORM: {
        const void *w;
        TX_TRY(rms_gamma(n, in, scratch, &w, stream));
        if (n->in[0].dtype == TEEXEC_DTYPE_DOUBLE)
            return tx_std_at(n, tx_cuda_rmsnorm_f64(in[0]->data, w, (double)n->eps, out[0]->data,
                                                    n->rows, n->h, stream));
        tx_cuda_norm_fwd a = rms_fwd_args(n, in[0]->data, w, out[0]->data, NULL);
        return tx_std_at(n, tx_cuda_norm_forward(&a, stream));
    }
    default: {
        tx_cuda_attn_io io = attn_io(n, in, out);
        return tx_std_at(n, tx_cuda_attention_forward(&n->at, &io, scratch, stream));
    }
    }
}

/* ---- backward ----------------------------------------------------------------------- */

teexec_status *tx_std_bwd_nn(tx_cuda_std_node *n, const tx_tensor *const *in,
                             const tx_tensor *const *out, const tx_tensor *const *gout,
                             tx_tensor *const *gin, void *scratch, void *stream)
{
    bool any_gout = false;
    for (size_t j = 0; j < n->n_out; j++) any_gout = any_gout || gout[j];
    if (!any_gout) {
        for (size_t i = 0; i < n->n_in; i++)
            if (gin[i]) TX_TRY(tx_std_memset0(n, gin[i]->data, n->in[i].nbytes, stream));
        return NULL;
    }
    switch (n->kind) {
    case TX_SK_CONV:
        return tx_std_at(n, tx_cuda_conv_backward(&n->cv, in[0]->data, in[1]->data, gout[0]->data,
                                                  gin[0] ? gin[0]->data : NULL,
                                                  n->n_in > 1 && gin[1] ? gin[1]->data : NULL,
                                                  n->n_in > 2 && gin[2] ? gin[2]->data : NULL,
                                                  n->in[0].dtype, stream));
    case TX_SK_GATHER_ND:
        if (!gin[0]) return NULL;
        return tx_std_at(n, tx_cuda_gather_nd_backward(n->in[0].rank, n->in[0].dims,
                                                       n->in[1].rank, n->in[1].dims, n->axis,
                                                       in[1]->data, gout[0]->data,
                                                       n->in[0].dtype, gin[0]->data, scratch,
                                                       stream));
    case TX_SK_RMSNORM: {
        tx_tensor *gx = gin[0], *gw = n->n_in > 1 ? gin[1] : NULL;
        if (!gx && !gw) return NULL;
        const void *w = in[1]->data;
        float *rs = at_off(scratch, n->ln_rs_off);
        tx_cuda_norm_fwd f = rms_fwd_args(n, in[0]->data, w, at_off(scratch, n->ln_y_off), rs);
        TX_TRY(tx_std_at(n, tx_cuda_norm_forward(&f, stream)));
        tx_cuda_norm_bwd a = {.rms = 1, .rows = n->rows, .h = n->h, .x = in[0]->data,
                              .x_dtype = n->in[0].dtype, .dy = gout[0]->data,
                              .dy_dtype = n->out[0].dtype, .gamma = w,
                              .w_dtype = n->in[1].dtype, .mu = NULL, .rsigma = rs,
                              .dx = gx ? gx->data : NULL, .dx_dtype = n->in[0].dtype,
                              .dgamma = gw ? gw->data : NULL, .dbeta = NULL,
                              .workspace = at_off(scratch, n->ln_ws_off)};
        return tx_std_at(n, tx_cuda_norm_backward(&a, stream));
    }
    default: {
        tx_cuda_attn_io io = attn_io(n, in, NULL);
        tx_cuda_attn_grads g;
        memset(&g, 0, sizeof g);
        g.gy = gout[0] ? gout[0]->data : NULL;
        if (n->n_out > 1 && gout[1]) g.g_present_k = gout[1]->data;
        if (n->n_out > 2 && gout[2]) g.g_present_v = gout[2]->data;
        if (n->n_out > 3 && gout[3]) g.g_qk = gout[3]->data;
        void **dst[6] = {&g.gq, &g.gk, &g.gv, &g.gmask, &g.gpast_k, &g.gpast_v};
        for (size_t i = 0; i < 6 && i < n->n_in; i++)
            if (gin[i]) *dst[i] = gin[i]->data;
        return tx_std_at(n, tx_cuda_attention_backward(&n->at, &io, &g, scratch, stream));
    }
    }
}
