/*
 * grouped_gemm_mma.h - the fast path of tx_cuda_grouped_gemm_run
 * (grouped_gemm.h): bf16 / fp16 tensor-core GEMMs with mma.sync m16n8k16,
 * ldmatrix and a 4-stage cp.async shared-memory pipeline, 128x128 tiles.
 *
 * Internal to kernels/cuda: grouped_gemm.cu validates the descriptor and
 * calls tx_cuda_grouped_mma_run only when tx_cuda_grouped_mma_covers says
 * yes; everything else goes to the general (WMMA / FP32-FMA) kernels.
 * Covered: a and b of one dtype, bfloat16 or float16; n and k multiples of
 * 8 (every 16-byte vector of a row lies wholly inside or outside the
 * matrix); a, every b and every out 16-byte aligned. Out and bias may be
 * any of float / bfloat16 / float16.
 *
 * Same contract as grouped_gemm.h: split sizes read on the device and
 * clamped the same way, rows past the groups never written, 0-row groups
 * get dW = 0, the per-group device alpha applied before the bias, FP32
 * accumulation in a fixed order (deterministic, no atomics), one rounding
 * per output.
 *
 * Ownership: all pointers are the caller's device memory; nothing is
 * allocated. Asynchronous on `stream`. Thread-safety: no shared state.
 */
#ifndef TEEXEC_KERNELS_CUDA_GROUPED_GEMM_MMA_H
#define TEEXEC_KERNELS_CUDA_GROUPED_GEMM_MMA_H

#include "kernels/cuda/grouped_gemm.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

bool tx_cuda_grouped_mma_covers(const tx_cuda_grouped_gemm *g);

/* g must have passed tx_cuda_grouped_gemm_run's checks and
 * tx_cuda_grouped_mma_covers. */
teexec_status *tx_cuda_grouped_mma_run(const tx_cuda_grouped_gemm *g, void *stream);

#ifdef __cplusplus
}
#endif

#endif
