/*
 * vec8_io.cuh - eight consecutive elements of a FLOAT, BFLOAT16 or FLOAT16
 * tensor moved as one 16-byte access (two for FLOAT), converted to and from
 * float; for the memory-bound kernels (norms, activations, bias grads, loss,
 * copies) whose speed is set by how many bytes each load moves.
 *
 * tx_vec8<T> keeps the raw bits (fewer registers than eight floats while a
 * row waits in registers); to_float/from_float convert, the stores round to
 * nearest even exactly as tx_st in elem_io.cuh (cuda_bf16 / cuda_fp16
 * conversions), so a vectorized kernel stores the same bits as a scalar one.
 * Callers check that pointers are 16-byte aligned and that element counts
 * are multiples of 8 before taking these paths. Header-only, no state.
 */
#ifndef TEEXEC_KERNELS_CUDA_VEC8_IO_CUH
#define TEEXEC_KERNELS_CUDA_VEC8_IO_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "teexec/teexec.h"

template <typename T> struct tx_vec8;

template <> struct tx_vec8<float> {
    float4 a, b;
    static __device__ __forceinline__ tx_vec8 load(const float *p, size_t i8)
    {
        const float4 *q = (const float4 *)p + 2 * i8;
        tx_vec8 v;
        v.a = q[0];
        v.b = q[1];
        return v;
    }
    __device__ __forceinline__ void store(float *p, size_t i8) const
    {
        float4 *q = (float4 *)p + 2 * i8;
        q[0] = a;
        q[1] = b;
    }
    __device__ __forceinline__ void to_float(float *o) const
    {
        o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w;
        o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
    }
    static __device__ __forceinline__ tx_vec8 from_float(const float *f)
    {
        tx_vec8 v;
        v.a = make_float4(f[0], f[1], f[2], f[3]);
        v.b = make_float4(f[4], f[5], f[6], f[7]);
        return v;
    }
};

template <> struct tx_vec8<__nv_bfloat16> {
    uint4 u;
    static __device__ __forceinline__ tx_vec8 load(const __nv_bfloat16 *p, size_t i8)
    {
        tx_vec8 v;
        v.u = ((const uint4 *)p)[i8];
        return v;
    }
    __device__ __forceinline__ void store(__nv_bfloat16 *p, size_t i8) const
    {
        ((uint4 *)p)[i8] = u;
    }
    __device__ __forceinline__ void to_float(float *o) const
    {
        const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float2 f = __bfloat1622float2(h[k]);
            o[2 * k] = f.x;
            o[2 * k + 1] = f.y;
        }
    }
    static __device__ __forceinline__ tx_vec8 from_float(const float *f)
    {
        tx_vec8 v;
        __nv_bfloat162 *h = (__nv_bfloat162 *)&v.u;
#pragma unroll
        for (int k = 0; k < 4; k++) h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
        return v;
    }
};

template <> struct tx_vec8<__half> {
    uint4 u;
    static __device__ __forceinline__ tx_vec8 load(const __half *p, size_t i8)
    {
        tx_vec8 v;
        v.u = ((const uint4 *)p)[i8];
        return v;
    }
    __device__ __forceinline__ void store(__half *p, size_t i8) const { ((uint4 *)p)[i8] = u; }
    __device__ __forceinline__ void to_float(float *o) const
    {
        const __half2 *h = (const __half2 *)&u;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float2 f = __half22float2(h[k]);
            o[2 * k] = f.x;
            o[2 * k + 1] = f.y;
        }
    }
    static __device__ __forceinline__ tx_vec8 from_float(const float *f)
    {
        tx_vec8 v;
        __half2 *h = (__half2 *)&v.u;
#pragma unroll
        for (int k = 0; k < 4; k++) h[k] = __floats2half2_rn(f[2 * k], f[2 * k + 1]);
        return v;
    }
};

/* Eight floats of a small operand (gamma, beta) whose dtype is only known
 * at run time; the branch is uniform across the launch. */
static __device__ __forceinline__ void tx_ld8_any(const void *p, size_t i8, int dt, float *o)
{
    if (dt == TEEXEC_DTYPE_BFLOAT16) tx_vec8<__nv_bfloat16>::load((const __nv_bfloat16 *)p, i8).to_float(o);
    else if (dt == TEEXEC_DTYPE_FLOAT16) tx_vec8<__half>::load((const __half *)p, i8).to_float(o);
    else tx_vec8<float>::load((const float *)p, i8).to_float(o);
}

static inline bool tx_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Runs the statements with T typedef'd to the element type of dt (FLOAT,
 * BFLOAT16 or FLOAT16): the one switch where a launcher picks its template
 * instance. */
#define TX_VEC8_DISPATCH(dt, T, ...)                                                       \
    do {                                                                                   \
        if ((dt) == TEEXEC_DTYPE_BFLOAT16) { typedef __nv_bfloat16 T; __VA_ARGS__; }       \
        else if ((dt) == TEEXEC_DTYPE_FLOAT16) { typedef __half T; __VA_ARGS__; }          \
        else { typedef float T; __VA_ARGS__; }                                             \
    } while (0)

#endif
