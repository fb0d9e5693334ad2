/* std_cuda_quant.c - QuantizeLinear / DequantizeLinear and the `trt`
 * domain Q/DQ ops of the CUDA standard node (std_cuda_internal.h), over
 * kernels/cuda/std_qdq.h, with exec/cpu_ops_quant.c's attribute rules and
 * kernels/cpu/qdq.c's shape checks. Scales and zero points stay on the
 * device: they may be computed by the graph. */
#include "exec/cuda/std_cuda_internal.h"

#include <string.h>

#define IN(n, i) tx_std_in(n, i)

/* qdq.c's make_map: per-tensor, per-axis or blocked. */
static teexec_status *make_map(tx_cuda_std_node *n, const tx_tensor *x, const tx_tensor *scale,
                               int64_t axis, int64_t block, tx_cuda_qmap *m)
{
    memset(m, 0, sizeof *m);
    m->inner = m->d = m->s = m->block = 1;
    if (scale->numel == 1 && (scale->rank == 0 || block == 0)) return NULL;
    if (x->rank == 0) return UNSUP("a scalar input needs a scalar scale");
    int64_t a = axis < 0 ? axis + x->rank : axis;
    if (a < 0 || a >= x->rank) return UNSUP("axis %lld is out of range", (long long)axis);
    for (int32_t i = (int32_t)a + 1; i < x->rank; i++) m->inner *= (uint64_t)x->dims[i];
    m->d = (uint64_t)x->dims[a];
    if (block <= 0) {
        if (scale->rank != 1 || scale->dims[0] != x->dims[a])
            return UNSUP("a per-axis scale must be 1-D of length %lld", (long long)x->dims[a]);
        m->mode = 1;
        return NULL;
    }
    if (scale->rank != x->rank) return UNSUP("a blocked scale must have the input's rank");
    for (int32_t i = 0; i < x->rank; i++)
        if (i != a && scale->dims[i] != x->dims[i]) return UNSUP("blocked scale dim %d differs", (int)i);
    uint64_t want = (m->d + (uint64_t)block - 1) / (uint64_t)block;
    if ((uint64_t)scale->dims[a] != want) return UNSUP("blocked scale dim %lld differs", (long long)a);
    m->mode = 2;
    m->s = want;
    m->block = (uint64_t)block;
    return NULL;
}

static teexec_status *axis_block(tx_cuda_std_node *n, int64_t *axis, int64_t *block)
{
    *axis = 1;
    *block = 0;
    if (n->node->opset >= 13) TX_TRY(tx_ir_attr_int(n->node, "axis", 1, axis));
    if (n->node->opset >= 21) TX_TRY(tx_ir_attr_int(n->node, "block_size", 0, block));
    if (*block < 0) return UNSUP("block_size must be >= 0");
    return NULL;
}

static bool byte_fmt(teexec_dtype dt, teexec_dtype alt)
{
    return dt == TEEXEC_DTYPE_UINT8 || dt == alt;
}

/* [M, K] of a tensor of rank >= 1. */
static teexec_status *rows_cols(tx_cuda_std_node *n, const tx_tensor *t, uint64_t *M, uint64_t *K)
{
    if (t->rank < 1) return UNSUP("the input must have rank >= 1");
    *M = 1;
    for (int32_t i = 0; i + 1 < t->rank; i++) *M *= (uint64_t)t->dims[i];
    *K = (uint64_t)t->dims[t->rank - 1];
    return NULL;
}

static teexec_status *prep_qdq(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *scale = IN(n, 1), *zp = IN(n, 2), *y = &n->out[0];
    if (!x || !scale) return UNSUP("inputs are missing");
    if (y->numel != x->numel) return UNSUP("the output has the wrong size");
    if (zp && zp->numel != scale->numel) return UNSUP("zero point and scale sizes differ");
    int64_t axis, block;
    TX_TRY(axis_block(n, &axis, &block));
    tx_cuda_qmap m;
    TX_TRY(make_map(n, x, scale, axis, block, &m));
    n->qm = m;
    if (n->kind == TX_SK_QUANTIZE) {
        int64_t sat = 1, prec = 0;
        if (n->node->opset >= 19) TX_TRY(tx_ir_attr_int(n->node, "saturate", 1, &sat));
        if (n->node->opset >= 23) TX_TRY(tx_ir_attr_int(n->node, "precision", 0, &prec));
        if (prec < 0 || prec >= TEEXEC_DTYPE_COUNT) return UNSUP("bad precision %lld", (long long)prec);
        n->flag_a = sat != 0;
        n->flag_b = prec ? (int)prec : (int)scale->dtype; /* "the scale's type" */
    } else if (!tx_std_dom_float(tx_std_dom_of(y->dtype))) {
        return UNSUP("the output must be a float");
    }
    return NULL;
}

static teexec_status *prep_trt(tx_cuda_std_node *n)
{
    const tx_tensor *x = IN(n, 0), *y = &n->out[0];
    if (!x) return UNSUP("input 0 is missing");
    uint64_t M = 0, K = 0;
    switch (n->kind) {
    case TX_SK_TRT_FP8_Q:
        if (!IN(n, 1) || n->in[1].numel != 1) return UNSUP("scale_inv must have one element");
        if (!byte_fmt(y->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN) || y->numel != x->numel)
            return UNSUP("the output must be uint8 of the input's size");
        return NULL;
    case TX_SK_TRT_FP8_DQ:
        if (!IN(n, 1) || n->in[1].numel != 1) return UNSUP("scale_inv must have one element");
        if (!byte_fmt(x->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN)) return UNSUP("input must be E4M3 bits");
        if (y->numel != x->numel || !tx_std_dom_float(tx_std_dom_of(y->dtype)))
            return UNSUP("the output must be a float of the input's size");
        return NULL;
    case TX_SK_TRT_MXFP8_Q: {
        TX_TRY(rows_cols(n, x, &M, &K));
        if (K % 32) return UNSUP("the last dim is not a multiple of 32");
        if (!byte_fmt(y->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN) || y->numel != x->numel)
            return UNSUP("the data output does not fit");
        n->M = (int64_t)M;
        n->K = (int64_t)K;
        /* TE's padded scale shape */
        n->rows = (size_t)((M + 127) / 128 * 128);
        n->h = (size_t)((K / 32 + 3) / 4 * 4);
        if (n->n_out > 1 && tx_std_present(&n->out[1])) {
            const tx_tensor *s = &n->out[1];
            if (!byte_fmt(s->dtype, TEEXEC_DTYPE_FLOAT8E8M0) || s->numel != n->rows * n->h)
                return UNSUP("the scale output does not fit");
        } else {
            n->scratch = tx_std_align(n->rows * n->h);
        }
        return NULL;
    }
    case TX_SK_TRT_MXFP8_DQ: {
        const tx_tensor *s = IN(n, 1);
        if (!s) return UNSUP("the scale is missing");
        TX_TRY(rows_cols(n, x, &M, &K));
        if (!byte_fmt(x->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN) ||
            !byte_fmt(s->dtype, TEEXEC_DTYPE_FLOAT8E8M0))
            return UNSUP("data and scale must be E4M3 / E8M0 bits");
        if (K % 32) return UNSUP("the last dim is not a multiple of 32");
        if (y->numel != x->numel || !tx_std_dom_float(tx_std_dom_of(y->dtype)))
            return UNSUP("the output must be a float of the input's size");
        /* TE's padded 2-D scale, or the ONNX blocked form */
        if (s->rank == 2 && (uint64_t)s->dims[0] >= M && (uint64_t)s->dims[1] >= K / 32)
            n->len = (size_t)s->dims[1];
        else if (s->rank == x->rank && (uint64_t)s->dims[s->rank - 1] == K / 32 &&
                 s->numel == M * (K / 32))
            n->len = (size_t)(K / 32);
        else
            return UNSUP("the scale's shape fits neither TE's padded form nor [..., K/32]");
        n->M = (int64_t)M;
        n->K = (int64_t)K;
        return NULL;
    }
    default: { /* TRT_FP4DynamicQuantize */
        const tx_tensor *g = IN(n, 1);
        if (!g || g->numel != 1) return UNSUP("the global scale must have one element");
        TX_TRY(rows_cols(n, x, &M, &K));
        if (K % 16) return UNSUP("the last dim is not a multiple of 16");
        if (y->dtype != TEEXEC_DTYPE_FLOAT4E2M1 || y->numel != x->numel)
            return UNSUP("the data output does not fit");
        if (n->n_out < 2 || !tx_std_present(&n->out[1])) return UNSUP("the scale output is missing");
        const tx_tensor *s = &n->out[1];
        if (!byte_fmt(s->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN) || s->numel != M * (K / 16))
            return UNSUP("the scale output does not fit");
        n->M = (int64_t)M;
        n->K = (int64_t)K;
        return NULL;
    }
    }
}

teexec_status *tx_std_prep_quant(tx_cuda_std_node *n, const tx_cuda_std_desc *d)
{
    (void)d;
    if (n->kind == TX_SK_QUANTIZE || n->kind == TX_SK_DEQUANTIZE) return prep_qdq(n);
    return prep_trt(n);
}

teexec_status *tx_std_fwd_quant(tx_cuda_std_node *n, const tx_tensor *const *in,
                                tx_tensor *const *out, void *scratch, void *stream)
{
    const tx_tensor *x = &n->in[0], *y = &n->out[0];
    const tx_cuda_qmap m = n->qm;
    const void *zp = IN(n, 2) ? in[2]->data : NULL;
    teexec_dtype zt = IN(n, 2) ? n->in[2].dtype : TEEXEC_DTYPE_UNDEFINED;
    switch (n->kind) {
    case TX_SK_QUANTIZE:
        return tx_std_at(n, tx_cuda_qdq_quantize(&m, in[0]->data, x->dtype, in[1]->data,
                                             n->in[1].dtype, zp, zt, n->flag_a,
                                             (teexec_dtype)n->flag_b, out[0]->data, y->dtype,
                                             (size_t)x->numel, stream));
    case TX_SK_DEQUANTIZE:
        return tx_std_at(n, tx_cuda_qdq_dequantize(&m, in[0]->data, x->dtype, in[1]->data,
                                               n->in[1].dtype, zp, zt, out[0]->data, y->dtype,
                                               (size_t)x->numel, stream));
    case TX_SK_TRT_FP8_Q:
        return tx_std_at(n, tx_cuda_qdq_trt_fp8_quantize(in[0]->data, x->dtype, in[1]->data,
                                                     n->in[1].dtype, out[0]->data,
                                                     (size_t)x->numel, stream));
    case TX_SK_TRT_FP8_DQ:
        return tx_std_at(n, tx_cuda_qdq_trt_fp8_dequantize(in[0]->data, in[1]->data, n->in[1].dtype,
                                                       out[0]->data, y->dtype, (size_t)x->numel,
                                                       stream));
    case TX_SK_TRT_MXFP8_Q: {
        uint8_t *sc = n->n_out > 1 && out[1] ? out[1]->data : scratch;
        return tx_std_at(n, tx_cuda_qdq_trt_mxfp8_quantize(in[0]->data, x->dtype, (uint64_t)n->M,
                                                       (uint64_t)n->K, out[0]->data, sc,
                                                       n->rows, n->h, stream));
    }
    case TX_SK_TRT_MXFP8_DQ:
        return tx_std_at(n, tx_cuda_qdq_trt_mxfp8_dequantize(in[0]->data, in[1]->data, n->len,
                                                         (uint64_t)n->M, (uint64_t)n->K,
                                                         out[0]->data, y->dtype, stream));
    default:
        return tx_std_at(n, tx_cuda_qdq_trt_fp4_quantize(in[0]->data, x->dtype, in[1]->data,
                                                     n->in[1].dtype, (uint64_t)n->M,
                                                     (uint64_t)n->K, out[0]->data, out[1]->data,
                                                     stream));
    }
}
