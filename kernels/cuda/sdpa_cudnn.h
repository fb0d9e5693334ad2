/*
 * sdpa_cudnn.h - fused scaled-dot-product attention through cuDNN 9's C
 * backend graph API (forward and backward), for the te.ops
 * DotProductAttention op described by attention_desc.h.
 *
 * The graphs are the decomposed ("composite") SDPA graphs that cuDNN's
 * fused-attention engines pattern-match (MATMUL / POINTWISE / REDUCTION /
 * RESHAPE), because the runtime cuDNN of the target (9.14) has no
 * single-op SDPA backward and no causal / padding single-op forward.
 * Features are gated on cudnnGetVersion() at run time, not on the headers
 * it was compiled with.
 *
 * Supported: BFLOAT16 / FLOAT16; bshd or sbhd; GQA (h % h_kv == 0, cuDNN
 * broadcasts the kv heads in the forward and sums dK/dV over each group in
 * the backward); causal, bottom-right aligned (s_q <= s_kv; a by-value
 * diagonal shift s_kv - s_q when they differ; s_q == s_kv with padding);
 * PADDING masks (device INT32 seq lengths; rows and keys past them are not
 * written by cuDNN: O, dQ, dK, dV there stay as they were, and their LSE
 * entries too). Everything else (FLOAT, head dims > 256 or not a multiple
 * of 8, bool/float masks, causal with s_q > s_kv or with padding and s_q !=
 * s_kv, cuDNN < 9, an old GPU, a graph no engine takes) is refused with
 * TEEXEC_ERR_UNSUPPORTED and a sentence saying why, for the
 * planner to print before it picks attention_fallback.h.
 *
 * softmax stats: cuDNN's Stats output is max + ln(sum exp) of the scaled,
 * masked scores in FP32 [b, h, s_q, 1] packed, i.e. exactly te.ops'
 * softmax_lse [b, h, s_q] (natural log, no conversion needed).
 *
 * Plans: built on first use of a (direction, shape, dtype, layout, causal,
 * mask) key and cached in the handle; call tx_sdpa_cudnn_prepare at
 * session creation so no build happens during a run, and allocate the
 * workspace it reports once (the maximum over the plans). The softmax
 * scale is a run-time value, not part of the key. Where cuDNN <= 9.15.0
 * would run s_kv % 128 != 0 without a padding mask (NaNs, illegal accesses
 * under graph replay), the plan adds a full-length padding mask, as cuDNN
 * frontend does, and owns the small device buffer of those lengths
 * (allocated and filled once, in prepare).
 *
 * Ownership: the handle owns its cuDNN handle, plans and descriptors;
 * tensors and workspace are device memory owned by the caller, 16-byte
 * aligned, alive until the stream passes the call. Returned statuses are
 * owned by the caller. Thread-safety: one handle per thread at a time
 * (as a session); distinct handles are independent.
 */
#ifndef TEEXEC_KERNELS_CUDA_SDPA_CUDNN_H
#define TEEXEC_KERNELS_CUDA_SDPA_CUDNN_H

#include "kernels/cuda/attention_desc.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_sdpa_cudnn tx_sdpa_cudnn;

enum { TX_SDPA_FORWARD = 0, TX_SDPA_BACKWARD = 1 };

/* Creates the cuDNN handle on the current device. UNSUPPORTED when cuDNN
 * cannot be loaded or is older than 9.0; DEVICE for other failures. */
teexec_status *tx_sdpa_cudnn_create(tx_sdpa_cudnn **out);
void tx_sdpa_cudnn_destroy(tx_sdpa_cudnn *s);

/* cudnnGetVersion() of the loaded library, e.g. 91400. */
size_t tx_sdpa_cudnn_version(const tx_sdpa_cudnn *s);

/* NULL when the configuration passes the static rules above (no graph is
 * built; the engine may still refuse it in prepare); else UNSUPPORTED or
 * INVALID_ARGUMENT with the reason. */
teexec_status *tx_sdpa_cudnn_check(const tx_sdpa_cudnn *s, const tx_attn_desc *a, int direction);

/* Builds (or finds) the plan for `a` and `direction` and sets
 * *workspace_bytes to the device workspace the call needs. */
teexec_status *tx_sdpa_cudnn_prepare(tx_sdpa_cudnn *s, const tx_attn_desc *a, int direction,
                                     size_t *workspace_bytes);

/* Number of cached plans (tests: a second prepare must not build). */
int tx_sdpa_cudnn_plan_count(const tx_sdpa_cudnn *s);

/* Forward: O and (when io->lse != NULL) softmax_lse. Prepares first when
 * needed. Asynchronous on `stream` (cudaStream_t; NULL = default). */
teexec_status *tx_sdpa_cudnn_forward(tx_sdpa_cudnn *s, const tx_attn_desc *a,
                                     const tx_attn_fwd_io *io, void *workspace,
                                     size_t workspace_bytes, void *stream);

/* Backward: dQ, dK, dV from Q, K, V, O, dO and the forward's LSE. dQ goes
 * through cuDNN's FP32 dQ accumulator (cuDNN frontend's default,
 * non-deterministic graph): not guaranteed bitwise reproducible run to
 * run; the fallback is. */
teexec_status *tx_sdpa_cudnn_backward(tx_sdpa_cudnn *s, const tx_attn_desc *a,
                                      const tx_attn_bwd_io *io, void *workspace,
                                      size_t workspace_bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif
