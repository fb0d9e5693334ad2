/*
 * handoff_common.cuh - device helpers shared by the FP8 per-tensor
 * hand-off kernels (handoff_fp8.cu: norms, Bias backward; handoff_act.cu:
 * activations, dact+dbias): the hand-off target, the rounding store that
 * hands back the values as stored (the quantizer must see exactly what the
 * consumer would read), the per-8-values fold (amax, delayed cast) and the
 * per-block amax commit.
 *
 * Header-only device code; no state, no allocation, thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_HANDOFF_COMMON_CUH
#define TEEXEC_KERNELS_CUDA_HANDOFF_COMMON_CUH

#include "kernels/cuda/quant_common.cuh"
#include "kernels/cuda/vec8_io.cuh"

extern "C" {
#include "kernels/cuda/handoff_fp8.h"
}

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace txh {

struct HQ {
    float *amax;
    const float *scale;
    uint8_t *row_data;
    int e5m2;
};

/* 8 elements at a 16-byte aligned address as floats, through the
 * read-only path. */
__device__ __forceinline__ void ld8(const __nv_bfloat16 *p, float v[8]) { txq::load8(p, v); }
__device__ __forceinline__ void ld8(const float *p, float v[8]) { txq::load8(p, v); }
__device__ __forceinline__ void ld8(const __half *p, float v[8])
{
    tx_vec8<__half> t;
    t.u = __ldg(reinterpret_cast<const uint4 *>(p));
    t.to_float(v);
}

/* Rounds 8 values to T (nearest even, as tx_st), stores them at the
 * 16-byte aligned p and leaves the stored values in v: amax and cast are
 * taken over what the consumer reads back. */
template <typename T> __device__ __forceinline__ void st8(T *p, float v[8])
{
    tx_vec8<T> w = tx_vec8<T>::from_float(v);
    w.store(p, 0);
    w.to_float(v);
}

/* The hand-off of 8 stored values at element offset i: amax (NaN dropped
 * by fmaxf), and with a known scale the cast with the quantizer's exact
 * encoder (NaN sign kept) into the rowwise bytes. */
__device__ __forceinline__ void fold8(const HQ &q, const float v[8], size_t i, float &amax)
{
#pragma unroll
    for (int j = 0; j < 8; j++) amax = fmaxf(amax, fabsf(v[j]));
    if (q.scale) {
        const float s = __ldg(q.scale);
        uint2 w;
        w.x = txq::quant_fp8x4(q.e5m2 != 0, v, s);
        w.y = txq::quant_fp8x4(q.e5m2 != 0, v + 4, s);
        *reinterpret_cast<uint2 *>(q.row_data + i) = w;
    }
}

/* One atomic per block; every thread of the block must call it. Amaxes
 * are >= 0, so their bits order as unsigned integers. */
__device__ __forceinline__ void commit_amax(float a, float *amax)
{
    __shared__ float red[32];
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = a;
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = red[0];
        for (int w = 1; w < nw; w++) b = fmaxf(b, red[w]);
        if (b > 0.0f) atomicMax(reinterpret_cast<unsigned int *>(amax), __float_as_uint(b));
    }
}

/* Host side: the target's checks, and its device form. */
static inline teexec_status *check_q(const tx_cuda_handoff_q *q, const char *what)
{
    if (!q || !q->amax)
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "%s: no amax target", what);
    if (q->scale && (!q->row_data || (uintptr_t)q->row_data % 16))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                             "%s: a cast needs 16-byte aligned rowwise data", what);
    if (q->scale && q->fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && q->fmt != TEEXEC_DTYPE_FLOAT8E5M2)
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                             "%s: the format is not E4M3FN or E5M2", what);
    return NULL;
}

static inline HQ hq_of(const tx_cuda_handoff_q *q)
{
    HQ h;
    h.amax = q->amax;
    h.scale = q->scale;
    h.row_data = q->row_data;
    h.e5m2 = q->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    return h;
}

} // namespace txh

#endif
