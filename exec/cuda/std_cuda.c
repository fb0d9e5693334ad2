/* std_cuda.c - standard ONNX ops on the GPU (std_cuda.h): the entry points.
 * Each node is turned at prepare time into launch plans over the
 * kernels/cuda/std_*.h kernels (and cuBLASLt for MatMul / Gemm), so
 * forward and backward only fill in pointers. Which op runs, on which
 * dtypes and with which backward is the registry's (std_cuda_ops.h); the
 * families' files (std_cuda_internal.h lists them) do the rest. */
#include "exec/cuda/std_cuda_internal.h"

#include "base/checked.h"
#include "base/shape.h"
#include "exec/train_internal.h"
#include "import/shape_infer.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/gemm_lt.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared helpers -------------------------------------------------------------- */

teexec_status *tx_std_node_err(const tx_ir_node *node, teexec_code code, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tx_status_with_node(tx_error(code, "node %s (%s): %s", node->label, node->op_type, msg),
                               node->label);
}

teexec_status *tx_std_at(const tx_cuda_std_node *n, teexec_status *st)
{
    if (!st) return NULL;
    if (teexec_status_node(st)) return st;
    st = tx_status_prefix(st, "node %s (%s)", n->node->label, n->node->op_type);
    return tx_status_with_node(st, n->node->label);
}

static teexec_status *cuda_err(const tx_cuda_std_node *n, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return NULL;
    return tx_std_node_err(n->node, TEEXEC_ERR_DEVICE, "%s failed: %s", what, cudaGetErrorString(e));
}

teexec_status *tx_std_memset0(const tx_cuda_std_node *n, void *p, size_t bytes, void *stream)
{
    if (!bytes) return NULL;
    return cuda_err(n, cudaMemsetAsync(p, 0, bytes, (cudaStream_t)stream), "cudaMemsetAsync");
}

teexec_status *tx_std_copy(const tx_cuda_std_node *n, void *dst, const void *src, size_t bytes,
                           void *stream)
{
    if (!bytes || dst == src) return NULL;
    return cuda_err(n, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                       (cudaStream_t)stream),
                    "cudaMemcpyAsync");
}

void tx_std_contig_strides(int32_t rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int32_t k = rank - 1; k >= 0; k--) {
        st[k] = s;
        s *= dims[k];
    }
}

void tx_std_bcast_strides(const tx_tensor *t, int32_t r, const int64_t *odims, int64_t *st)
{
    int64_t s = 1;
    for (int32_t k = r - 1; k >= 0; k--) {
        int32_t tk = k - (r - t->rank);
        if (tk < 0) {
            st[k] = 0;
            continue;
        }
        int64_t d = t->dims[tk];
        st[k] = (d == 1 && odims[k] != 1) ? 0 : s;
        s *= d;
    }
}

void tx_std_bgrad_init(tx_cuda_bgrad *g, const tx_tensor *y, const int64_t *st_x)
{
    memset(g, 0, sizeof *g);
    g->rank = y->rank;
    for (int32_t k = 0; k < y->rank; k++) {
        g->dims[k] = y->dims[k];
        g->red[k] = st_x[k] == 0 && y->dims[k] != 1;
    }
}

teexec_status *tx_std_need_rank(const tx_cuda_std_node *n, int32_t rank)
{
    if (rank < 0) return UNSUP("a tensor has no shape");
    if (rank > TX_STD_MAX_RANK)
        return UNSUP("rank %d is above the GPU kernels' %d", (int)rank, TX_STD_MAX_RANK);
    return NULL;
}

teexec_status *tx_std_alloc_cp(tx_cuda_std_node *n, size_t count)
{
    n->cp = calloc(count ? count : 1, sizeof *n->cp);
    if (!n->cp) return tx_oom();
    n->n_cp = count;
    return NULL;
}

teexec_status *tx_std_host_ints(const tx_cuda_std_node *n, size_t i, int64_t **v, size_t *nv)
{
    const tx_tensor *t = tx_std_in(n, i);
    if (!t) return UNSUP("input %zu is missing", i);
    if (!t->data) return UNSUP("input %zu is not known before running", i);
    return tx_std_at(n, tx_tensor_read_ints(t, v, nv));
}

teexec_status *tx_std_host_scalar(const tx_cuda_std_node *n, size_t i, double *v)
{
    const tx_tensor *t = tx_std_in(n, i);
    if (!t) return UNSUP("input %zu is missing", i);
    if (!t->data) return UNSUP("input %zu is not known before running", i);
    return tx_std_at(n, tx_tensor_read_scalar(t, v));
}

tx_std_family tx_std_family_of(tx_std_kind k)
{
    switch (k) {
    case TX_SK_ARITH:
    case TX_SK_COMPARE:
    case TX_SK_UNARY:
    case TX_SK_NOT:
    case TX_SK_ISNAN:
    case TX_SK_ISINF:
    case TX_SK_CLIP:
    case TX_SK_VARIADIC:
    case TX_SK_WHERE: return TX_SF_MATH;
    case TX_SK_SOFTMAX:
    case TX_SK_LAYERNORM:
    case TX_SK_REDUCE:
    case TX_SK_ARG:
    case TX_SK_TOPK:
    case TX_SK_CUMSUM: return TX_SF_REDUCE;
    case TX_SK_MATMUL:
    case TX_SK_GEMM:
    case TX_SK_EINSUM: return TX_SF_LINALG;
    case TX_SK_QUANTIZE:
    case TX_SK_DEQUANTIZE:
    case TX_SK_TRT_FP8_Q:
    case TX_SK_TRT_FP8_DQ:
    case TX_SK_TRT_MXFP8_Q:
    case TX_SK_TRT_MXFP8_DQ:
    case TX_SK_TRT_FP4_Q: return TX_SF_QUANT;
    case TX_SK_CONV:
    case TX_SK_GATHER_ND:
    case TX_SK_RMSNORM:
    case TX_SK_ATTENTION: return TX_SF_NN;
    default: return TX_SF_SHAPE;
    }
}

/* ---- the entry points ---------------------------------------------------------------- */

bool tx_cuda_std_supported(const char *domain, const char *op_type)
{
    return tx_cuda_std_op_find(domain, op_type) != NULL;
}

/* Keeps each input's and output's dtype and shape; a value known now
 * (small enough to hold: attribute-like inputs, scalars) keeps its data. */
static teexec_status *copy_meta(const tx_tensor *const *src, size_t count, tx_tensor **dst,
                                const tx_tensor *const *host, tx_cuda_std_node *n)
{
    *dst = calloc(count ? count : 1, sizeof **dst);
    if (!*dst) return tx_oom();
    for (size_t i = 0; i < count; i++) {
        tx_tensor *t = &(*dst)[i];
        if (!src || !src[i]) {
            t->rank = -1;
            continue;
        }
        const tx_tensor *h = host ? host[i] : NULL;
        if (h && h->dtype != TEEXEC_DTYPE_STRING && h->numel <= 4096 && h->numel == src[i]->numel) {
            memset(t, 0, sizeof *t);
            if (h->dtype == src[i]->dtype) {
                TX_TRY(tx_std_at(n, tx_tensor_clone(h, t)));
            } else {
                /* the executor uploads it converted to the compute dtype:
                 * the node sees the same value */
                TX_TRY(tx_std_at(n, tx_tensor_alloc(t, src[i]->dtype, src[i]->rank, src[i]->dims)));
                teexec_status *st = tx_convert(h->data, h->dtype, t->data, t->dtype, h->numel, NULL);
                if (st) {
                    tx_tensor_release(t);
                    return tx_std_at(n, st);
                }
            }
            continue;
        }
        *t = *src[i];
        t->data = NULL;
        t->owns_data = false;
    }
    return NULL;
}

void tx_cuda_std_node_free(tx_cuda_std_node *n)
{
    if (!n) return;
    if (n->in)
        for (size_t i = 0; i < n->n_in; i++) tx_tensor_release(&n->in[i]);
    free(n->in);
    free(n->out);
    free(n->cp);
    free(n->vst);
    free(n->vbg);
    free(n->lit);
    free(n->steps);
    if (n->own_gemm) tx_gemm_lt_destroy(n->gemm);
    free(n);
}

/* Outputs past the first that a kind writes. */
static size_t extra_outputs(tx_std_kind k)
{
    switch (k) {
    case TX_SK_SPLIT: return SIZE_MAX;
    case TX_SK_TOPK:
    case TX_SK_DROPOUT:
    case TX_SK_TRT_MXFP8_Q:
    case TX_SK_TRT_FP4_Q: return 1;
    case TX_SK_LAYERNORM: return 2;
    case TX_SK_ATTENTION: return 3;
    default: return 0;
    }
}

teexec_status *tx_cuda_std_prepare(const tx_cuda_std_desc *d, tx_cuda_std_node **out)
{
    *out = NULL;
    if (!d || !d->node) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "std_cuda: no node");
    const tx_ir_node *node = d->node;
    const tx_cuda_std_op *op = tx_cuda_std_op_find(node->domain, node->op_type);
    if (!op) return tx_std_node_err(node, TEEXEC_ERR_UNSUPPORTED, "this op has no GPU kernel");
    if (d->n_out < 1 || !d->out || !d->out[0])
        return tx_std_node_err(node, TEEXEC_ERR_UNSUPPORTED, "output 0 is missing");
    tx_cuda_std_node *n = calloc(1, sizeof *n);
    if (!n) return tx_oom();
    n->node = node;
    n->op = op;
    n->kind = op->kind;
    n->n_in = d->n_in;
    n->n_out = d->n_out;
    teexec_status *st = copy_meta(d->in, d->n_in, &n->in, d->in_host, n);
    if (!st) st = copy_meta(d->out, d->n_out, &n->out, NULL, n);
    if (!st && n->out[0].rank < 0) st = UNSUP("output 0 has no shape");
    size_t extra = extra_outputs(n->kind);
    for (size_t j = 1; !st && j < n->n_out; j++)
        if (tx_std_present(&n->out[j]) && j > extra)
            st = UNSUP("output %zu is not produced on the GPU", j);
    if (!st) {
        /* the registry's dtypes for the data input (or Constant's output) */
        const tx_tensor *t = op->slot < 0 ? &n->out[0] : tx_std_in(n, (size_t)op->slot);
        if (t && ((unsigned)t->dtype >= 32 || !(op->dtypes & (UINT32_C(1) << t->dtype))))
            st = UNSUP("%s is not supported on the GPU for this op",
                       teexec_dtype_name(t->dtype));
    }
    if (!st) {
        switch (tx_std_family_of(n->kind)) {
        case TX_SF_SHAPE: st = tx_std_prep_shape(n, d); break;
        case TX_SF_MATH: st = tx_std_prep_math(n, d); break;
        case TX_SF_REDUCE: st = tx_std_prep_reduce(n, d); break;
        case TX_SF_LINALG: st = tx_std_prep_linalg(n, d); break;
        case TX_SF_QUANT: st = tx_std_prep_quant(n, d); break;
        case TX_SF_NN: st = tx_std_prep_nn(n, d); break;
        }
    }
    if (st) {
        st = tx_std_at(n, st);
        tx_cuda_std_node_free(n);
        return st;
    }
    *out = n;
    return NULL;
}

bool tx_cuda_std_is_alias(const tx_cuda_std_node *n)
{
    if (!n) return false;
    if (n->kind == TX_SK_COPY) return true;
    if (n->kind == TX_SK_DROPOUT) return n->n_out < 2 || !tx_std_present(&n->out[1]);
    return n->kind == TX_SK_CAST && n->in[0].dtype == n->out[0].dtype;
}

bool tx_cuda_std_differentiable(const tx_cuda_std_node *n, size_t slot)
{
    if (!n || !n->op->backward || slot >= n->n_in || !tx_std_present(&n->in[slot]) ||
        !tx_std_is_f16(n->in[slot].dtype))
        return false;
    if (n->kind == TX_SK_CAST && !tx_std_is_f16(n->out[0].dtype)) return false;
    if (n->kind == TX_SK_SPLIT || n->kind == TX_SK_SLICE) return slot == 0;
    /* float arithmetic with grads runs through the broadcast-grad path only */
    if (n->kind == TX_SK_ARITH && !n->ew_path) return false;
    if ((n->kind == TX_SK_MATMUL || n->kind == TX_SK_GEMM) && n->naive) return false;
    return tx_bwd_slot_differentiable(n->node->op_type, slot);
}

size_t tx_cuda_std_scratch_bytes(const tx_cuda_std_node *n) { return n ? n->scratch : 0; }

teexec_status *tx_cuda_std_forward(tx_cuda_std_node *n, const tx_tensor *const *in,
                                   tx_tensor *const *out, void *scratch, void *stream)
{
    switch (tx_std_family_of(n->kind)) {
    case TX_SF_SHAPE: return tx_std_fwd_shape(n, in, out, scratch, stream);
    case TX_SF_MATH: return tx_std_fwd_math(n, in, out, scratch, stream);
    case TX_SF_REDUCE: return tx_std_fwd_reduce(n, in, out, scratch, stream);
    case TX_SF_LINALG: return tx_std_fwd_linalg(n, in, out, scratch, stream);
    case TX_SF_QUANT: return tx_std_fwd_quant(n, in, out, scratch, stream);
    case TX_SF_NN: return tx_std_fwd_nn(n, in, out, scratch, stream);
    }
    return tx_std_node_err(n->node, TEEXEC_ERR_INTERNAL, "unknown kind");
}

teexec_status *tx_cuda_std_backward(tx_cuda_std_node *n, const tx_tensor *const *in,
                                    const tx_tensor *const *out,
                                    const tx_tensor *const *gout, tx_tensor *const *gin,
                                    void *scratch, void *stream)
{
    if (!n->op->backward)
        return tx_std_node_err(n->node, TEEXEC_ERR_UNSUPPORTED, "this op has no backward");
    switch (tx_std_family_of(n->kind)) {
    case TX_SF_SHAPE: return tx_std_bwd_shape(n, in, out, gout, gin, scratch, stream);
    case TX_SF_MATH: return tx_std_bwd_math(n, in, out, gout, gin, scratch, stream);
    case TX_SF_REDUCE: return tx_std_bwd_reduce(n, in, out, gout, gin, scratch, stream);
    case TX_SF_LINALG: return tx_std_bwd_linalg(n, in, out, gout, gin, scratch, stream);
    case TX_SF_QUANT: break;
    case TX_SF_NN: return tx_std_bwd_nn(n, in, out, gout, gin, scratch, stream);
    }
    return tx_std_node_err(n->node, TEEXEC_ERR_INTERNAL, "unknown kind");
}
