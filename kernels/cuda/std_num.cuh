/*
 * std_num.cuh - device loads and stores of one element of any numeric
 * dtype (and BOOL) in a compute type, with the CPU kernels' conversion
 * rules (kernels/cpu/kcommon.c), so a GPU op computes on the same values
 * and rounds its results the same way:
 *   - loads are exact, except integers into float (RNE, as C's conversion)
 *     and floats into integers (truncation toward zero, NaN -> 0, values
 *     beyond int64 saturated: tx_f64_to_i64);
 *   - float stores round to nearest even; FLOAT16 / BFLOAT16 NaN get the
 *     CPU's bit patterns (base/half.c: sign | 0x7e00, quiet bf16), which
 *     CUDA's own conversions do not;
 *   - a store of a double into FLOAT16 / BFLOAT16 goes through float (the
 *     CPU's tx_store_f64 does the same);
 *   - integer stores keep the low bits (two's complement wrap); floats go
 *     through tx_f64_to_i64 first; BOOL stores value != 0.
 * The dtype is a run-time argument: the switch is uniform across a launch.
 *
 * Also: the element-offset walk shared by the broadcasting kernels.
 *
 * Header-only device code; no state; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_NUM_CUH
#define TEEXEC_KERNELS_CUDA_STD_NUM_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/cuda/std_num.h"

namespace txs {

__device__ __forceinline__ int64_t f64_to_i64(double v)
{
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + rounding) >> 16);
}

__device__ __forceinline__ float f16_to_f32(uint16_t h)
{
    return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ uint16_t f32_to_f16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u);
    return __half_as_ushort(__float2half_rn(f));
}

/* ---- loads ------------------------------------------------------------------ */

__device__ __forceinline__ int64_t ld_raw_int(const void *p, size_t i, int dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_INT8: return ((const int8_t *)p)[i];
    case TEEXEC_DTYPE_INT16: return ((const int16_t *)p)[i];
    case TEEXEC_DTYPE_INT32: return ((const int32_t *)p)[i];
    case TEEXEC_DTYPE_INT64: return ((const int64_t *)p)[i];
    case TEEXEC_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case TEEXEC_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case TEEXEC_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[i];
    default: return ((const uint8_t *)p)[i]; /* UINT8, BOOL */
    }
}

__device__ __forceinline__ bool is_float_dt(int dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_DOUBLE || dt == TEEXEC_DTYPE_FLOAT16 ||
           dt == TEEXEC_DTYPE_BFLOAT16;
}

__device__ __forceinline__ double ld_f64(const void *p, size_t i, int dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: return ((const float *)p)[i];
    case TEEXEC_DTYPE_DOUBLE: return ((const double *)p)[i];
    case TEEXEC_DTYPE_FLOAT16: return f16_to_f32(((const uint16_t *)p)[i]);
    case TEEXEC_DTYPE_BFLOAT16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case TEEXEC_DTYPE_UINT64: return __ull2double_rn(((const uint64_t *)p)[i]);
    default: return __ll2double_rn(ld_raw_int(p, i, dt));
    }
}

__device__ __forceinline__ float ld_f32(const void *p, size_t i, int dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: return ((const float *)p)[i];
    case TEEXEC_DTYPE_DOUBLE: return __double2float_rn(((const double *)p)[i]);
    case TEEXEC_DTYPE_FLOAT16: return f16_to_f32(((const uint16_t *)p)[i]);
    case TEEXEC_DTYPE_BFLOAT16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case TEEXEC_DTYPE_UINT64: return __ull2float_rn(((const uint64_t *)p)[i]);
    default: return __ll2float_rn(ld_raw_int(p, i, dt));
    }
}

__device__ __forceinline__ int64_t ld_i64(const void *p, size_t i, int dt)
{
    if (is_float_dt(dt)) return f64_to_i64(ld_f64(p, i, dt));
    return ld_raw_int(p, i, dt);
}

__device__ __forceinline__ uint64_t ld_u64(const void *p, size_t i, int dt)
{
    if (is_float_dt(dt)) return (uint64_t)f64_to_i64(ld_f64(p, i, dt));
    if (dt == TEEXEC_DTYPE_UINT64) return ((const uint64_t *)p)[i];
    return (uint64_t)ld_raw_int(p, i, dt);
}

/* ---- stores ------------------------------------------------------------------ */

__device__ __forceinline__ void st_bits(void *p, size_t i, int dt, uint64_t b)
{
    switch (dt) {
    case TEEXEC_DTYPE_INT8:
    case TEEXEC_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)b; break;
    case TEEXEC_DTYPE_INT16:
    case TEEXEC_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)b; break;
    case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)b; break;
    case TEEXEC_DTYPE_BOOL: ((uint8_t *)p)[i] = b != 0; break;
    default: ((uint64_t *)p)[i] = b; break;
    }
}

__device__ __forceinline__ void st_f32(void *p, size_t i, int dt, float v)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: ((float *)p)[i] = v; break;
    case TEEXEC_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)p)[i] = f32_to_f16(v); break;
    case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = f32_to_bf16(v); break;
    case TEEXEC_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0.0f; break;
    default: st_bits(p, i, dt, (uint64_t)f64_to_i64(v)); break;
    }
}

__device__ __forceinline__ void st_f64(void *p, size_t i, int dt, double v)
{
    switch (dt) {
    case TEEXEC_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case TEEXEC_DTYPE_FLOAT: ((float *)p)[i] = __double2float_rn(v); break;
    case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)p)[i] = f32_to_f16(__double2float_rn(v)); break;
    case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = f32_to_bf16(__double2float_rn(v)); break;
    case TEEXEC_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    default: st_bits(p, i, dt, (uint64_t)f64_to_i64(v)); break;
    }
}

__device__ __forceinline__ void st_i64(void *p, size_t i, int dt, int64_t v)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: ((float *)p)[i] = __ll2float_rn(v); break;
    case TEEXEC_DTYPE_DOUBLE: ((double *)p)[i] = __ll2double_rn(v); break;
    case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)p)[i] = f32_to_f16(__ll2float_rn(v)); break;
    case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = f32_to_bf16(__ll2float_rn(v)); break;
    default: st_bits(p, i, dt, (uint64_t)v); break;
    }
}

__device__ __forceinline__ void st_u64(void *p, size_t i, int dt, uint64_t v)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: ((float *)p)[i] = __ull2float_rn(v); break;
    case TEEXEC_DTYPE_DOUBLE: ((double *)p)[i] = __ull2double_rn(v); break;
    case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)p)[i] = f32_to_f16(__ull2float_rn(v)); break;
    case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = f32_to_bf16(__ull2float_rn(v)); break;
    default: st_bits(p, i, dt, v); break;
    }
}

/* Copies one element of esz bytes (1, 2, 4 or 8). */
__device__ __forceinline__ void mv(void *dst, size_t di, const void *src, size_t si, int esz)
{
    switch (esz) {
    case 1: ((uint8_t *)dst)[di] = ((const uint8_t *)src)[si]; break;
    case 2: ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si]; break;
    case 4: ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si]; break;
    default: ((uint64_t *)dst)[di] = ((const uint64_t *)src)[si]; break;
    }
}

__device__ __forceinline__ void zero_elem(void *dst, size_t di, int esz)
{
    switch (esz) {
    case 1: ((uint8_t *)dst)[di] = 0; break;
    case 2: ((uint16_t *)dst)[di] = 0; break;
    case 4: ((uint32_t *)dst)[di] = 0; break;
    default: ((uint64_t *)dst)[di] = 0; break;
    }
}

/* Grid-stride loop bound helper. */
__host__ __forceinline__ unsigned grid_for(uint64_t n, unsigned threads)
{
    uint64_t b = (n + threads - 1) / threads;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

} // namespace txs

#endif
