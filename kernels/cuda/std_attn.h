/*
 * std_attn.h - the ONNX Attention op (opset 23) on the GPU, forward and
 * backward, as plain kernels with kernels/cpu/attention.c's math (its
 * header comment states it: GQA, scale, softcap, bool / additive masks
 * shorter than the keys padded with -inf, is_causal with a past cache,
 * present_key / present_value, qk_matmul_output mode 0, fully masked rows
 * NaN). For what lowering leaves standard (te.ops DotProductAttention runs
 * through cuDNN); one thread per score or output element, FP64 dot
 * products and sums, the softmax in the CPU's precision (FP32 for float
 * dtypes with an FP64 sum, FP64 for DOUBLE). The probabilities live in
 * scratch ([rows, T] FP64, rows = B * Hq * Lq; tx_cuda_attention_scratch).
 * The backward (FLOAT / FLOAT16 / BFLOAT16) recomputes them; each gradient
 * element is summed by one thread: deterministic.
 *
 * Layouts: Q/K/V rank 3 [B, L, H * D] or rank 4 [B, H, L, D]; past and
 * present caches [B, Hkv, P or T, D]; qk [B, Hq, Lq, T]; the mask indexed
 * by (b, h, i, j) through its strides (0 where it broadcasts).
 *
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_ATTN_H
#define TEEXEC_KERNELS_CUDA_STD_ATTN_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_attn {
    int64_t b, hq, hkv, lq, lk, past, t, d, dv, reps;
    int rank3;
    double scale, softcap;
    int causal;
    int mask;                /* 0 none, 1 bool, 2 additive (Q's dtype) */
    int64_t mask_t, mst[4];  /* the mask's last dim (<= t) and strides over (b, h, i, j) */
    int64_t mdims[4];        /* the mask's dims right-aligned to 4 (1 where absent) */
    teexec_dtype dt;         /* Q, K, V, the outputs, an additive mask */
} tx_cuda_attn;

typedef struct tx_cuda_attn_io {
    const void *q, *k, *v, *mask, *past_k, *past_v;
    void *y, *present_k, *present_v, *qk;           /* y required; the rest may be NULL */
} tx_cuda_attn_io;

typedef struct tx_cuda_attn_grads {
    const void *gy, *g_present_k, *g_present_v, *g_qk; /* NULL = zero */
    void *gq, *gk, *gv, *gmask, *gpast_k, *gpast_v;    /* NULL = not wanted; overwritten */
} tx_cuda_attn_grads;

size_t tx_cuda_attention_scratch(const tx_cuda_attn *p, int backward);

teexec_status *tx_cuda_attention_forward(const tx_cuda_attn *p, const tx_cuda_attn_io *io,
                                         void *scratch, void *stream);
teexec_status *tx_cuda_attention_backward(const tx_cuda_attn *p, const tx_cuda_attn_io *io,
                                          const tx_cuda_attn_grads *g, void *scratch,
                                          void *stream);

#ifdef __cplusplus
}
#endif

#endif
