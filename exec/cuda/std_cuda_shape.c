/* std_cuda_shape.c - the data-movement and value ops of the CUDA standard
 * node (std_cuda_internal.h): copies and casts, Transpose, Slice, Split,
 * Concat, Gather, GatherElements, Expand, Tile, Trilu, Range, Dropout,
 * Shape / Size / Constant and ConstantOfShape.
 *
 * The reshape family (Identity, Reshape, Flatten, Squeeze, Unsqueeze) needs
 * only the output shape the executor inferred, not the value of a shape or
 * axes input: the data is the same bytes. Values the executor knows before
 * running (Shape's, Size's, a Constant's) are written by a kernel carrying
 * them, never copied from the host during a run. */
#include "exec/cuda/std_cuda_internal.h"

#include "base/numfmt.h"
#include "base/shape.h"
#include "format/tensor_proto.h"
#include "import/shape_infer.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/std_cast.h"
#include "kernels/cuda/std_shape.h"

#include <stdlib.h>
#include <string.h>

#define IN(n, i) tx_std_in(n, i)

/* ---- prepare ------------------------------------------------------------------------- */

static teexec_status *prep_copy_like(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    if (x->numel != y->numel) return UNSUP("input and output element counts differ");
    if (n->kind == TX_SK_CAST) {
        if (!tx_cuda_cast_dtype_ok(x->dtype) || !tx_cuda_cast_dtype_ok(y->dtype))
            return UNSUP("cast %s -> %s is not supported on the GPU",
                         teexec_dtype_name(x->dtype), teexec_dtype_name(y->dtype));
        int64_t sat;
        const char *rm;
        TX_TRY(tx_ir_attr_int(n->node, "saturate", 1, &sat));
        TX_TRY(tx_ir_attr_string(n->node, "round_mode", "up", &rm, NULL));
        int mode = tx_e8m0_round_from_name(rm);
        if (mode < 0) return UNSUP("round_mode must be up, down or nearest");
        n->flag_a = sat != 0;
        n->flag_b = mode;
    } else if (x->dtype != y->dtype) {
        return UNSUP("input and output dtypes differ");
    }
    if (n->kind == TX_SK_DROPOUT) {
        /* inference-mode only, as the CPU: training_mode must be known false,
         * or the ratio 0 */
        if (n->node->opset >= 12 && IN(n, 2)) {
            double training = 0, ratio = 0.5;
            TX_TRY(tx_std_host_scalar(n, 2, &training));
            if (IN(n, 1)) TX_TRY(tx_std_host_scalar(n, 1, &ratio));
            if (training != 0 && ratio != 0)
                return UNSUP("Dropout in training mode (ratio %g) is not supported; te.ops "
                             "Dropout is the dropping one", ratio);
        }
        if (n->n_out > 1 && tx_std_present(&n->out[1]) && n->out[1].dtype != TEEXEC_DTYPE_BOOL)
            return UNSUP("the mask must be bool");
    }
    return NULL;
}

static teexec_status *prep_transpose(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    TX_TRY(tx_std_need_rank(n, x->rank));
    const int64_t *perm;
    size_t np;
    TX_TRY(tx_ir_attr_ints(n->node, "perm", &perm, &np));
    if (np && np != (size_t)x->rank) return UNSUP("perm has %zu entries for rank %d", np, (int)x->rank);
    int64_t xst[TX_MAX_RANK];
    tx_std_contig_strides(x->rank, x->dims, xst);
    TX_TRY(tx_std_alloc_cp(n, 1));
    tx_cuda_strided *c = &n->cp[0];
    c->rank = y->rank;
    bool seen[TX_MAX_RANK] = {false};
    for (int32_t k = 0; k < x->rank; k++) {
        int64_t p = np ? perm[k] : x->rank - 1 - k;
        if (p < 0) p += x->rank;
        if (p < 0 || p >= x->rank || seen[p]) return UNSUP("perm is not a permutation");
        seen[p] = true;
        if (y->dims[k] != x->dims[p]) return UNSUP("output shape does not match perm");
        c->dims[k] = y->dims[k];
        c->src_st[k] = xst[p];
    }
    tx_std_contig_strides(y->rank, y->dims, c->dst_st);
    return NULL;
}

static teexec_status *prep_slice(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    TX_TRY(tx_std_need_rank(n, x->rank));
    const tx_tensor *vals[4] = {NULL, NULL, NULL, NULL};
    if (n->node->opset >= 10)
        for (size_t k = 1; k < 5 && k < n->n_in; k++) {
            if (!IN(n, k)) continue;
            if (!n->in[k].data) return UNSUP("input %zu is not known before running", k);
            vals[k - 1] = &n->in[k];
        }
    tx_shape xs = tx_shape_of(x), ys;
    int64_t start[TX_MAX_RANK], step[TX_MAX_RANK], xst[TX_MAX_RANK];
    TX_TRY(tx_slice_params(n->node, vals, &xs, start, step, &ys));
    if (!tx_tensor_has_shape(y, &ys)) return UNSUP("output shape differs from the slice's");
    tx_std_contig_strides(x->rank, x->dims, xst);
    TX_TRY(tx_std_alloc_cp(n, 1));
    tx_cuda_strided *c = &n->cp[0];
    c->rank = y->rank;
    for (int32_t k = 0; k < y->rank; k++) {
        c->dims[k] = y->dims[k];
        c->src_st[k] = xst[k] * step[k];
        c->src_base += start[k] * xst[k];
    }
    tx_std_contig_strides(y->rank, y->dims, c->dst_st);
    return NULL;
}

/* Split (outputs are chunks of the input) and Concat (the reverse): one
 * copy per chunk, written in the "whole <- chunk" direction for Concat and
 * "chunk <- whole" for Split. */
static teexec_status *prep_chunks(tx_cuda_std_node *n)
{
    bool split = n->kind == TX_SK_SPLIT;
    const tx_tensor *whole = split ? IN(n, 0) : &n->out[0];
    if (!whole) return UNSUP("input 0 is missing");
    TX_TRY(tx_std_need_rank(n, whole->rank));
    size_t count = split ? n->n_out : n->n_in;
    int32_t ax;
    int64_t *sizes = calloc(count ? count : 1, sizeof *sizes);
    if (!sizes) return tx_oom();
    teexec_status *st = NULL;
    if (split) {
        const tx_tensor *split_in = NULL;
        if (n->node->opset >= 13 && IN(n, 1)) {
            if (!n->in[1].data) st = UNSUP("input split is not known before running");
            split_in = &n->in[1];
        }
        tx_shape xs = tx_shape_of(whole);
        if (!st) st = tx_split_sizes(n->node, split_in, &xs, &ax, sizes);
    } else {
        int64_t axis;
        st = tx_ir_attr_int(n->node, "axis", 0, &axis);
        if (!st) st = tx_shape_normalize_axis(axis, whole->rank, &ax);
        for (size_t j = 0; j < count && !st; j++) {
            if (!IN(n, j)) st = UNSUP("input %zu is missing", j);
            else if (n->in[j].dtype != whole->dtype) st = UNSUP("input %zu has another dtype", j);
            else sizes[j] = n->in[j].rank > ax ? n->in[j].dims[ax] : 0;
        }
    }
    if (!st) st = tx_std_alloc_cp(n, count);
    int64_t wst[TX_MAX_RANK];
    if (!st) tx_std_contig_strides(whole->rank, whole->dims, wst);
    int64_t off = 0;
    for (size_t j = 0; j < count && !st; j++) {
        const tx_tensor *part = split ? &n->out[j] : &n->in[j];
        if (!tx_std_present(part) || part->rank != whole->rank) {
            st = UNSUP("chunk %zu is missing or of another rank", j);
            break;
        }
        for (int32_t k = 0; k < whole->rank && !st; k++)
            if (part->dims[k] != (k == ax ? sizes[j] : whole->dims[k]))
                st = UNSUP("chunk %zu does not fit the %s", j, split ? "split" : "output");
        if (st) break;
        tx_cuda_strided *c = &n->cp[j];
        c->rank = whole->rank;
        memcpy(c->dims, part->dims, sizeof(int64_t) * (size_t)part->rank);
        int64_t *w = split ? c->src_st : c->dst_st, *p = split ? c->dst_st : c->src_st;
        memcpy(w, wst, sizeof(int64_t) * (size_t)whole->rank);
        tx_std_contig_strides(part->rank, part->dims, p);
        if (split) c->src_base = off * wst[ax];
        else c->dst_base = off * wst[ax];
        off += sizes[j];
    }
    if (!st && off != whole->dims[ax]) st = UNSUP("chunks do not cover the axis");
    free(sizes);
    return tx_std_at(n, st);
}

static teexec_status *prep_gather(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *idx = IN(n, 1);
    if (!x || !idx) return UNSUP("inputs are missing");
    if (idx->dtype != TEEXEC_DTYPE_INT64 && idx->dtype != TEEXEC_DTYPE_INT32)
        return UNSUP("indices must be int64 or int32");
    int64_t axis;
    int32_t ax;
    TX_TRY(tx_ir_attr_int(n->node, "axis", 0, &axis));
    TX_TRY(tx_std_at(n, tx_shape_normalize_axis(axis, x->rank, &ax)));
    n->axis = ax;
    if (n->kind == TX_SK_GATHER_ELEMENTS) {
        const tx_tensor *y = &n->out[0];
        TX_TRY(tx_std_need_rank(n, x->rank));
        if (idx->rank != x->rank) return UNSUP("indices and data ranks differ");
        for (int32_t k = 0; k < x->rank; k++)
            if (y->dims[k] != idx->dims[k] || (k != ax && idx->dims[k] > x->dims[k]))
                return UNSUP("indices do not fit the data");
        return NULL;
    }
    n->outer = 1;
    n->inner = 1;
    for (int32_t k = 0; k < ax; k++) n->outer *= (size_t)x->dims[k];
    for (int32_t k = ax + 1; k < x->rank; k++) n->inner *= (size_t)x->dims[k];
    n->len = (size_t)x->dims[ax];
    n->n_idx = (size_t)idx->numel;
    if ((uint64_t)n->outer * n->n_idx * n->inner != n->out[0].numel)
        return UNSUP("output size does not match the gather");
    return NULL;
}

static teexec_status *prep_expand(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    TX_TRY(tx_std_need_rank(n, y->rank));
    if (x->rank > y->rank || x->dtype != y->dtype) return UNSUP("output does not fit the input");
    tx_shape xs = tx_shape_of(x), ys = tx_shape_of(y);
    if (!tx_shape_broadcastable_to(&xs, &ys)) return UNSUP("input does not broadcast to the output");
    TX_TRY(tx_std_alloc_cp(n, 1));
    tx_cuda_strided *c = &n->cp[0];
    c->rank = y->rank;
    memcpy(c->dims, y->dims, sizeof(int64_t) * (size_t)y->rank);
    tx_std_bcast_strides(x, y->rank, y->dims, c->src_st);
    tx_std_contig_strides(y->rank, y->dims, c->dst_st);
    tx_std_bgrad_init(&n->bg[0], y, c->src_st);
    return NULL;
}

static teexec_status *prep_tile(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    TX_TRY(tx_std_need_rank(n, x->rank));
    if (y->rank != x->rank || y->dtype != x->dtype) return UNSUP("output does not fit the input");
    for (int32_t k = 0; k < x->rank; k++)
        if (x->dims[k] == 0 ? y->dims[k] != 0 : y->dims[k] % x->dims[k] != 0)
            return UNSUP("output dim %d is not a multiple of the input's", (int)k);
    return NULL;
}

static teexec_status *prep_trilu(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    if (x->rank < 2) return UNSUP("input rank %d is below 2", (int)x->rank);
    if (y->dtype != x->dtype || y->numel != x->numel) return UNSUP("output does not fit the input");
    int64_t upper;
    TX_TRY(tx_ir_attr_int(n->node, "upper", 1, &upper));
    n->flag_a = upper != 0;
    n->k = 0;
    const tx_tensor *k = IN(n, 1);
    if (k) {
        if (k->numel != 1) return UNSUP("k must have one element");
        if (k->data) {
            int64_t *v;
            size_t nv;
            TX_TRY(tx_std_host_ints(n, 1, &v, &nv));
            n->k = v[0];
            free(v);
        } else if (k->dtype != TEEXEC_DTYPE_INT64) {
            return UNSUP("k must be int64");
        }
    }
    return NULL;
}

static teexec_status *prep_range(tx_cuda_std_node *n)
{
    const tx_tensor *s = IN(n, 0), *l = IN(n, 1), *d = IN(n, 2), *y = &n->out[0];
    if (!s || !l || !d) return UNSUP("inputs are missing");
    if (s->numel != 1 || d->numel != 1 || l->numel != 1) return UNSUP("start, limit and delta must be scalars");
    if (l->dtype != s->dtype || d->dtype != s->dtype || y->dtype != s->dtype || y->rank != 1)
        return UNSUP("start, limit, delta and the output must share a dtype (1-D output)");
    return NULL;
}

/* Shape, Size and Constant: inference computes the value (as the CPU's
 * from_inference); the node keeps its bytes. */
static teexec_status *prep_literal(tx_cuda_std_node *n, const tx_cuda_std_desc *d)
{
    tx_infer_value ins[8], outv;
    const tx_infer_value *pins[8];
    if (n->n_in > 8) return UNSUP("too many inputs");
    for (size_t i = 0; i < n->n_in; i++) {
        memset(&ins[i], 0, sizeof ins[i]);
        pins[i] = NULL;
        if (!IN(n, i)) continue;
        ins[i].dtype = n->in[i].dtype;
        ins[i].shape_known = true;
        ins[i].shape = tx_shape_of(&n->in[i]);
        ins[i].value = n->in[i].data ? &n->in[i] : NULL;
        pins[i] = &ins[i];
    }
    memset(&outv, 0, sizeof outv);
    teexec_status *st = tx_infer_node(n->node, d->file, pins, &outv);
    if (!st && !outv.value) st = UNSUP("the value is not known before running");
    if (!st && outv.value->numel != n->out[0].numel)
        st = UNSUP("the output does not match its inferred value");
    if (!st && n->out[0].nbytes > TX_CUDA_LITERAL_MAX)
        st = UNSUP("a known value of %zu bytes is folded before running, not run (at most %d)",
                   n->out[0].nbytes, TX_CUDA_LITERAL_MAX);
    if (!st) {
        n->lit_bytes = n->out[0].nbytes;
        n->lit = malloc(n->lit_bytes ? n->lit_bytes : 1);
        if (!n->lit) st = tx_oom();
        else if (outv.value->dtype == n->out[0].dtype) memcpy(n->lit, outv.value->data, n->lit_bytes);
        else /* the executor's compute dtype */
            st = tx_convert(outv.value->data, outv.value->dtype, n->lit, n->out[0].dtype,
                            outv.value->numel, NULL);
    }
    tx_infer_value_clear(&outv);
    return st;
}

static teexec_status *prep_constant_of_shape(tx_cuda_std_node *n, const tx_cuda_std_desc *d)
{
    const tx_tensor *y = &n->out[0];
    size_t es = tx_dtype_elem_size(y->dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return UNSUP("cannot fill %s", teexec_dtype_name(y->dtype));
    memset(n->fill, 0, sizeof n->fill);
    tx_tensor v;
    bool found;
    TX_TRY(tx_std_at(n, tx_ir_attr_tensor_value(n->node, "value", d->file, &v, &found)));
    if (!found) return NULL; /* float zeros */
    teexec_status *st = NULL;
    if (v.numel != 1)
        st = UNSUP("value must be a one-element %s tensor", teexec_dtype_name(y->dtype));
    else if (v.dtype == y->dtype) memcpy(n->fill, v.data, es);
    else /* the executor's compute dtype */
        st = tx_std_at(n, tx_convert(v.data, v.dtype, n->fill, y->dtype, 1, NULL));
    tx_tensor_release(&v);
    return st;
}

teexec_status *tx_std_prep_shape(tx_cuda_std_node *n, const tx_cuda_std_desc *d)
{
    switch (n->kind) {
    case TX_SK_COPY:
    case TX_SK_CAST:
    case TX_SK_DROPOUT: return prep_copy_like(n);
    case TX_SK_TRANSPOSE: return prep_transpose(n);
    case TX_SK_SLICE: return prep_slice(n);
    case TX_SK_SPLIT:
    case TX_SK_CONCAT: return prep_chunks(n);
    case TX_SK_GATHER:
    case TX_SK_GATHER_ELEMENTS: return prep_gather(n);
    case TX_SK_EXPAND: return prep_expand(n);
    case TX_SK_TILE: return prep_tile(n);
    case TX_SK_TRILU: return prep_trilu(n);
    case TX_SK_RANGE: return prep_range(n);
    case TX_SK_LITERAL: return prep_literal(n, d);
    case TX_SK_CONSTANT_OF_SHAPE: return prep_constant_of_shape(n, d);
    default: return UNSUP("not a shape op");
    }
}

/* ---- forward ---------------------------------------------------------------------------- */

teexec_status *tx_std_fwd_shape(tx_cuda_std_node *n, const tx_tensor *const *in,
                                tx_tensor *const *out, void *scratch, void *stream)
{
    (void)scratch;
    const tx_tensor *y0 = &n->out[0];
    size_t esz = tx_dtype_elem_size(y0->dtype);
    switch (n->kind) {
    case TX_SK_COPY: return tx_std_copy(n, out[0]->data, in[0]->data, y0->nbytes, stream);
    case TX_SK_DROPOUT:
        TX_TRY(tx_std_copy(n, out[0]->data, in[0]->data, y0->nbytes, stream));
        if (n->n_out > 1 && out[1]) {
            uint8_t one = 1;
            return tx_std_at(n, tx_cuda_fill(out[1]->data, 1, &one, (size_t)n->out[1].numel,
                                             stream));
        }
        return NULL;
    case TX_SK_CAST:
        if (n->in[0].dtype == y0->dtype)
            return tx_std_copy(n, out[0]->data, in[0]->data, y0->nbytes, stream);
        return tx_std_at(n, tx_cuda_cast_ex(in[0]->data, n->in[0].dtype, out[0]->data, y0->dtype,
                                            (size_t)y0->numel, n->flag_a, n->flag_b, stream));
    case TX_SK_TRANSPOSE:
    case TX_SK_SLICE:
    case TX_SK_EXPAND:
        return tx_std_at(n, tx_cuda_strided_copy(&n->cp[0], in[0]->data, out[0]->data, esz, stream));
    case TX_SK_SPLIT:
        for (size_t j = 0; j < n->n_cp; j++)
            TX_TRY(tx_std_at(n, tx_cuda_strided_copy(&n->cp[j], in[0]->data, out[j]->data,
                                                     tx_dtype_elem_size(n->in[0].dtype), stream)));
        return NULL;
    case TX_SK_CONCAT:
        for (size_t j = 0; j < n->n_cp; j++)
            TX_TRY(tx_std_at(n, tx_cuda_strided_copy(&n->cp[j], in[j]->data, out[0]->data, esz,
                                                     stream)));
        return NULL;
    case TX_SK_GATHER:
        return tx_std_at(n, tx_cuda_gather_forward(in[0]->data, esz, in[1]->data, n->in[1].dtype,
                                                   n->n_idx, n->outer, n->len, n->inner,
                                                   out[0]->data, stream));
    case TX_SK_GATHER_ELEMENTS:
        return tx_std_at(n, tx_cuda_gather_elements(n->in[0].rank, n->in[0].dims, n->in[1].dims,
                                                    n->axis, in[0]->data, esz, in[1]->data,
                                                    n->in[1].dtype, out[0]->data, stream));
    case TX_SK_TILE:
        return tx_std_at(n, tx_cuda_tile(n->in[0].rank, n->in[0].dims, y0->dims, in[0]->data,
                                         out[0]->data, esz, stream));
    case TX_SK_TRILU: {
        const tx_tensor *k = IN(n, 1);
        const int64_t *kd = k && !k->data ? (const int64_t *)in[1]->data : NULL;
        int64_t rows = y0->dims[y0->rank - 2], cols = y0->dims[y0->rank - 1];
        size_t mats = rows && cols ? (size_t)(y0->numel / (uint64_t)(rows * cols)) : 0;
        return tx_std_at(n, tx_cuda_trilu(n->flag_a, kd, n->k, in[0]->data, out[0]->data, esz,
                                          mats, rows, cols, stream));
    }
    case TX_SK_RANGE:
        return tx_std_at(n, tx_cuda_range(in[0]->data, in[2]->data, out[0]->data, y0->dtype,
                                          (size_t)y0->numel, stream));
    case TX_SK_LITERAL:
        return tx_std_at(n, tx_cuda_literal(out[0]->data, n->lit, n->lit_bytes, stream));
    case TX_SK_CONSTANT_OF_SHAPE:
        return tx_std_at(n, tx_cuda_fill(out[0]->data, esz, n->fill, (size_t)y0->numel, stream));
    default: return tx_std_node_err(n->node, TEEXEC_ERR_INTERNAL, "not a shape op");
    }
}

/* ---- backward ---------------------------------------------------------------------------- */

static tx_cuda_strided swapped(const tx_cuda_strided *c)
{
    tx_cuda_strided s = *c;
    memcpy(s.src_st, c->dst_st, sizeof s.src_st);
    memcpy(s.dst_st, c->src_st, sizeof s.dst_st);
    s.src_base = c->dst_base;
    s.dst_base = c->src_base;
    return s;
}

teexec_status *tx_std_bwd_shape(tx_cuda_std_node *n, const tx_tensor *const *in,
                                const tx_tensor *const *out, const tx_tensor *const *gout,
                                tx_tensor *const *gin, void *scratch, void *stream)
{
    (void)out;
    (void)scratch;
    const tx_tensor *x0 = &n->in[0];
    tx_tensor *g0 = gin[0];
    size_t esz = tx_dtype_elem_size(x0->dtype);
    switch (n->kind) {
    case TX_SK_COPY:
    case TX_SK_CAST:
    case TX_SK_DROPOUT:
        if (!g0) return NULL;
        if (!gout[0]) return tx_std_memset0(n, g0->data, x0->nbytes, stream);
        if (n->out[0].dtype == x0->dtype)
            return tx_std_copy(n, g0->data, gout[0]->data, x0->nbytes, stream);
        if (!tx_std_is_f16(x0->dtype) || !tx_std_is_f16(n->out[0].dtype))
            return tx_std_node_err(n->node, TEEXEC_ERR_UNSUPPORTED, "no gradient through this cast");
        return tx_std_at(n, tx_cuda_convert(gout[0]->data, n->out[0].dtype, g0->data, x0->dtype,
                                            (size_t)x0->numel, stream));
    case TX_SK_TRANSPOSE:
    case TX_SK_SLICE: {
        if (!g0) return NULL;
        if (n->kind == TX_SK_SLICE || !gout[0])
            TX_TRY(tx_std_memset0(n, g0->data, x0->nbytes, stream));
        if (!gout[0]) return NULL;
        tx_cuda_strided s = swapped(&n->cp[0]);
        return tx_std_at(n, tx_cuda_strided_copy(&s, gout[0]->data, g0->data, esz, stream));
    }
    case TX_SK_SPLIT: {
        if (!g0) return NULL;
        bool all = true;
        for (size_t j = 0; j < n->n_cp; j++) all = all && gout[j];
        if (!all) TX_TRY(tx_std_memset0(n, g0->data, x0->nbytes, stream));
        for (size_t j = 0; j < n->n_cp; j++) {
            if (!gout[j]) continue;
            tx_cuda_strided s = swapped(&n->cp[j]);
            TX_TRY(tx_std_at(n, tx_cuda_strided_copy(&s, gout[j]->data, g0->data, esz, stream)));
        }
        return NULL;
    }
    case TX_SK_CONCAT:
        for (size_t j = 0; j < n->n_cp; j++) {
            if (!gin[j]) continue;
            if (!gout[0]) {
                TX_TRY(tx_std_memset0(n, gin[j]->data, n->in[j].nbytes, stream));
                continue;
            }
            tx_cuda_strided s = swapped(&n->cp[j]);
            TX_TRY(tx_std_at(n, tx_cuda_strided_copy(&s, gout[0]->data, gin[j]->data,
                                                     tx_dtype_elem_size(n->in[j].dtype), stream)));
        }
        return NULL;
    case TX_SK_GATHER:
        if (!g0) return NULL;
        if (!gout[0]) return tx_std_memset0(n, g0->data, x0->nbytes, stream);
        return tx_std_at(n, tx_cuda_gather_backward(gout[0]->data, n->out[0].dtype, in[1]->data,
                                                    n->in[1].dtype, n->n_idx, n->outer, n->len,
                                                    n->inner, g0->data, x0->dtype, stream));
    case TX_SK_EXPAND: {
        if (!g0) return NULL;
        if (!gout[0]) return tx_std_memset0(n, g0->data, x0->nbytes, stream);
        tx_cuda_bgrad_ops o = {.g = gout[0]->data, .g_dtype = n->out[0].dtype};
        return tx_std_at(n, tx_cuda_bcast_grad(TX_STD_GT_G, &n->bg[0], &o, g0->data, x0->dtype,
                                               stream));
    }
    case TX_SK_TILE:
        if (!g0) return NULL;
        if (!gout[0]) return tx_std_memset0(n, g0->data, x0->nbytes, stream);
        return tx_std_at(n, tx_cuda_tile_backward(x0->rank, x0->dims, n->out[0].dims,
                                                  gout[0]->data, x0->dtype, g0->data, stream));
    case TX_SK_GATHER_ELEMENTS:
        if (!g0) return NULL;
        if (!gout[0]) return tx_std_memset0(n, g0->data, x0->nbytes, stream);
        return tx_std_at(n, tx_cuda_gather_elements_backward(x0->rank, x0->dims, n->in[1].dims,
                                                             n->axis, in[1]->data,
                                                             n->in[1].dtype, gout[0]->data,
                                                             x0->dtype, g0->data, stream));
    case TX_SK_TRILU: {
        /* the gradient passes where the forward kept the element */
        if (!g0) return NULL;
        if (!gout[0]) return tx_std_memset0(n, g0->data, x0->nbytes, stream);
        const tx_tensor *k = IN(n, 1);
        const int64_t *kd = k && !k->data ? (const int64_t *)in[1]->data : NULL;
        int64_t rows = x0->dims[x0->rank - 2], cols = x0->dims[x0->rank - 1];
        size_t mats = rows && cols ? (size_t)(x0->numel / (uint64_t)(rows * cols)) : 0;
        return tx_std_at(n, tx_cuda_trilu(n->flag_a, kd, n->k, gout[0]->data, g0->data, esz,
                                          mats, rows, cols, stream));
    }
    default: return tx_std_node_err(n->node, TEEXEC_ERR_UNSUPPORTED, "no backward on the GPU");
    }
}
