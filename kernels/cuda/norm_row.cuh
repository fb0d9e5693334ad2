/*
 * norm_row.cuh - the LayerNorm / RMSNorm forward statistics of one row held
 * in registers, as the hand-off norm kernels compute them (handoff_fp8.cu:
 * FP8 per-tensor; handoff_block.cu: FP8 block): norm.cu's math, two passes
 * in FP32 over the row's values, rs = 1 / sqrt(var + eps). One definition,
 * so both hand-offs keep producing the bits of norm.cu's forward.
 *
 * Header-only device code; no state; thread-safe. Every thread of the
 * block must call it (it reduces over the block).
 */
#ifndef TEEXEC_KERNELS_CUDA_NORM_ROW_CUH
#define TEEXEC_KERNELS_CUDA_NORM_ROW_CUH

#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/quant_common.cuh"

extern "C" {
#include "kernels/cuda/norm.h"
}

#include <math.h>
#include <stddef.h>

namespace txn {

/* Loads row elements base .. base + 8 * nvec - 1 of x into v (thread t
 * holds vectors c = t + NT * k, k < NV; vectors past the row are left
 * unset) and returns the mean (0 for RMSNorm) and 1 / sqrt(var + eps),
 * var over h elements (about mu; RMSNorm: the mean square). red: 32
 * floats of shared memory. */
template <typename TX, int NV, int NT>
__device__ __forceinline__ void row_stats(const TX *x, size_t base, size_t nvec, size_t h, bool rms,
                                          float eps, float (&v)[NV][8], float *red, float &mu,
                                          float &rs)
{
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const size_t c = threadIdx.x + (size_t)k * NT;
        if (c < nvec) {
            txq::load8(x + base + c * 8, v[k]);
#pragma unroll
            for (int j = 0; j < 8; j++) s += v[k][j];
        }
    }
    mu = 0.0f;
    if (!rms) mu = tx_block_sum(s, red) / (float)h;
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const size_t c = threadIdx.x + (size_t)k * NT;
        if (c < nvec) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float d = v[k][j] - mu;
                ss += d * d;
            }
        }
    }
    const float var = tx_block_sum(ss, red) / (float)h;
    rs = 1.0f / sqrtf(var + eps);
}

/* Output vector c of the row (elements 8c .. 8c+7) from its values v:
 * (v - mu) * rs * gamma (+ 1 when zero-centred) + beta (LayerNorm), in
 * norm.cu's order, before any rounding to the output dtype. */
__device__ __forceinline__ void apply8(const tx_cuda_norm_fwd &a, size_t c, const float v[8],
                                       float mu, float rs, float o[8])
{
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const size_t col = c * 8 + j;
        float g = tx_ld(a.gamma, col, a.w_dtype);
        if (a.zero_centered_gamma) g += 1.0f;
        float t = (v[j] - mu) * rs * g;
        if (!a.rms) t += tx_ld(a.beta, col, a.w_dtype);
        o[j] = t;
    }
}

} // namespace txn

#endif
