/*
 * elem_io.cuh - reading and writing one element of a FLOAT, BFLOAT16 or
 * FLOAT16 tensor as float, with the dtype chosen at run time.
 *
 * The branch is uniform across a launch (every thread sees the same dtype),
 * so it costs a few instructions, while one kernel serves every dtype mix
 * (x in bf16, y in fp32, ...) without a template instance per combination:
 * that keeps nvcc time and binary size small. Kernels where the memory
 * pattern matters more use their own vectorized paths.
 * Stores round to nearest even (cuda_bf16 / cuda_fp16 conversions), the
 * CPU's rounding (base/half.h).
 */
#ifndef TEEXEC_KERNELS_CUDA_ELEM_IO_CUH
#define TEEXEC_KERNELS_CUDA_ELEM_IO_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "teexec/teexec.h"

static __device__ __forceinline__ float tx_ld(const void *p, size_t i, int dt)
{
    if (dt == TEEXEC_DTYPE_BFLOAT16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (dt == TEEXEC_DTYPE_FLOAT16) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

static __device__ __forceinline__ void tx_st(void *p, size_t i, int dt, float v)
{
    if (dt == TEEXEC_DTYPE_BFLOAT16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else if (dt == TEEXEC_DTYPE_FLOAT16) ((__half *)p)[i] = __float2half_rn(v);
    else ((float *)p)[i] = v;
}

static inline bool tx_io_dtype_ok(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_BFLOAT16 || dt == TEEXEC_DTYPE_FLOAT16;
}

/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread
 * gets the result. `red` is __shared__ float[32]. Fixed order: results do
 * not depend on scheduling. */
static __device__ __forceinline__ float tx_block_sum(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads(); /* red may still be read from a previous call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = lane < nw ? red[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}

#endif
