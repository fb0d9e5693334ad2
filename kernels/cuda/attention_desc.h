/*
 * attention_desc.h - the description of one te.ops DotProductAttention call
 * on the GPU, shared by the cuDNN path (sdpa_cudnn.h) and the plain CUDA
 * fallback (attention_fallback.h), so a caller fills it once and tries one
 * then the other.
 *
 * Shapes follow docs/te-ops.md: q [b,s_q,h,d] (bshd) or [s_q,b,h,d] (sbhd);
 * k [.., s_kv, h_kv, d], v [.., s_kv, h_kv, d_v]; y (= O) [b,s_q,h*d_v] or
 * [s_q,b,h*d_v], which is the bshd/sbhd layout of a [.., h, d_v] tensor;
 * softmax_lse [b,h,s_q] FLOAT, natural-log log-sum-exp of the scaled,
 * masked scores (-inf for a fully masked row). Query head i reads kv head
 * i / (h / h_kv). dq, dk, dv, dO have the layouts of q, k, v, O.
 *
 * Masks: causal is bottom-right aligned (query i sees keys j <= i + s_kv -
 * s_q). mask_kind BOOL (uint8, nonzero = masked out) or FLOAT (mask_dtype,
 * added to the scores) is a [mask_b, mask_h, s_q, s_kv] tensor with mask_b
 * in {1, b}, mask_h in {1, h}. PADDING is a pair of device INT32 [b] arrays
 * of valid lengths (query rows i >= seq_q[bi] and keys j >= seq_kv[bi] are
 * masked): cuDNN's native form. Pointers are device pointers owned by the
 * caller. Plain data: no thread-safety concerns of its own.
 */
#ifndef TEEXEC_KERNELS_CUDA_ATTENTION_DESC_H
#define TEEXEC_KERNELS_CUDA_ATTENTION_DESC_H

#include "teexec/teexec.h"

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { TX_ATTN_MASK_NONE = 0, TX_ATTN_MASK_BOOL = 1, TX_ATTN_MASK_FLOAT = 2,
       TX_ATTN_MASK_PADDING = 3 };

typedef struct tx_attn_desc {
    int64_t b, h, h_kv, s_q, s_kv, d, d_v;
    teexec_dtype dtype;   /* q, k, v, O, dO, dq, dk, dv */
    int sbhd;             /* 0: bshd, 1: sbhd */
    int causal;
    float scale;          /* 0: 1/sqrt(d) */
    int mask_kind;        /* TX_ATTN_MASK_* */
    int64_t mask_b, mask_h;   /* BOOL / FLOAT */
    teexec_dtype mask_dtype;  /* FLOAT masks: FLOAT, BFLOAT16 or FLOAT16 */
    /* te.ops cache mode (docs/te-ops.md): k and v are the caches, s_kv
     * their capacity, bshd, no mask; row bi's keys are bounded by the
     * device INT64 cache_len[bi] of the io: query i sees keys j <= cache_len
     * + i (causal) or j < cache_len + s_q. Forward only; the fallback alone. */
    int kv_cache;
} tx_attn_desc;

typedef struct tx_attn_fwd_io {
    const void *q, *k, *v;
    const void *mask;                     /* BOOL / FLOAT */
    const int32_t *seq_q, *seq_kv;        /* PADDING */
    const int64_t *cache_len;             /* kv_cache: [b] on the device */
    void *o;
    float *lse;                           /* NULL: inference, not written */
} tx_attn_fwd_io;

typedef struct tx_attn_bwd_io {
    const void *q, *k, *v, *o, *d_o;
    const float *lse;
    const void *mask;
    const int32_t *seq_q, *seq_kv;
    void *dq, *dk, *dv;
} tx_attn_bwd_io;

/* The effective softmax scale. */
static inline float tx_attn_scale(const tx_attn_desc *a)
{
    if (a->scale != 0.0f) return a->scale;
    double r = 1.0 / sqrt(a->d > 0 ? (double)a->d : 1.0);
    return (float)r;
}

#ifdef __cplusplus
}
#endif

#endif
