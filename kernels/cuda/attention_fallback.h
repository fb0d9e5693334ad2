/*
 * attention_fallback.h - plain CUDA scaled-dot-product attention, forward
 * and backward, for every configuration cuDNN refuses (FLOAT, head dims
 * over 256, bool or float masks, causal with s_q != s_kv, old cuDNN).
 * Semantics are those of attention_desc.h and the CPU te.ops kernel
 * (kernels/cpu/te_attention.c).
 *
 * Correctness over speed: tiles in shared memory, FP32 math, FP32 inputs
 * read as they are, bf16/fp16 ones widened. Deterministic: the backward
 * computes dQ per query tile looping over keys, and dK/dV per kv tile
 * looping over the query heads of its group and all queries, so no float
 * atomics; repeated runs give identical bits, GQA sums included.
 *
 * Backward workspace: tx_attn_fallback_bwd_workspace(desc) bytes of device
 * memory (D = rowsum(dO * O)), owned by the caller. Calls are asynchronous
 * on `stream` (cudaStream_t; NULL = default). Returned statuses
 * (INVALID_ARGUMENT for a desc that does not fit, UNSUPPORTED when a head
 * dim needs more shared memory than the device has, DEVICE for CUDA
 * errors) are owned by the caller. Stateless apart from a once-per-process
 * shared-memory opt-in: thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_ATTENTION_FALLBACK_H
#define TEEXEC_KERNELS_CUDA_ATTENTION_FALLBACK_H

#include "kernels/cuda/attention_desc.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* NULL when the fallback can run `a` (shape checks, dtypes, shared memory). */
teexec_status *tx_attn_fallback_check(const tx_attn_desc *a);

size_t tx_attn_fallback_bwd_workspace(const tx_attn_desc *a);

teexec_status *tx_attn_fallback_forward(const tx_attn_desc *a, const tx_attn_fwd_io *io,
                                        void *stream);

/* The cache mode's append (attention_desc.h kv_cache): the new k [b,
 * s_q, h_kv, d] and v [b, s_q, h_kv, d_v] (bshd, a->dtype) into the caches
 * [>= b, s_kv, h_kv, .] at cache_len[bi] + i, in place. A position at or
 * past the capacity is not written (the host checks cache_len before the
 * run; on the device an out-of-range length must not write out of
 * bounds). */
teexec_status *tx_attn_cache_append(const tx_attn_desc *a, const void *k_new, const void *v_new,
                                    void *k_cache, void *v_cache, const int64_t *cache_len,
                                    void *stream);
teexec_status *tx_attn_fallback_backward(const tx_attn_desc *a, const tx_attn_bwd_io *io,
                                         void *workspace, size_t workspace_bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif
