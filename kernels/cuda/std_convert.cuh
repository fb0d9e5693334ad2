/*
 * std_convert.cuh - one element of any dtype converted with ONNX Cast's
 * rules, as kernels/cpu/convert.c does it (load into an integer or FP64
 * value, store with round-to-odd intermediates so narrow float targets
 * round once, truncating saturated float -> integer, wrapping integer ->
 * integer, x86's NaN for double -> float). std_cast.cu runs it over
 * tensors; the Q/DQ kernels (std_qdq.cu) read scales and zero points
 * through it, as the CPU's tx_convert_to_f32 does. Sub-byte destinations
 * are the caller's (subbyte_code gives a field's code).
 *
 * Header-only device code; no state; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_CONVERT_CUH
#define TEEXEC_KERNELS_CUDA_STD_CONVERT_CUH

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/std_fmt.cuh"
#include "kernels/cuda/std_num.cuh"

namespace txc {

using namespace txs;

enum { V_FLOAT, V_INT, V_UINT };

struct val {
    int kind;
    double d;
    int64_t i;
    uint64_t u;
};

__device__ __forceinline__ unsigned bits_of(int t)
{
    switch (t) {
    case TEEXEC_DTYPE_INT4:
    case TEEXEC_DTYPE_UINT4:
    case TEEXEC_DTYPE_FLOAT4E2M1: return 4;
    case TEEXEC_DTYPE_INT2:
    case TEEXEC_DTYPE_UINT2: return 2;
    default: return 8;
    }
}

__device__ __forceinline__ bool is_byte_float(int t)
{
    return t == TEEXEC_DTYPE_FLOAT8E4M3FN || t == TEEXEC_DTYPE_FLOAT8E4M3FNUZ ||
           t == TEEXEC_DTYPE_FLOAT8E5M2 || t == TEEXEC_DTYPE_FLOAT8E5M2FNUZ;
}

__device__ __forceinline__ val load(const void *src, int t, uint64_t k)
{
    val v = {V_FLOAT, 0.0, 0, 0};
    const uint8_t *b = (const uint8_t *)src;
    switch (t) {
    case TEEXEC_DTYPE_FLOAT: v.d = ((const float *)src)[k]; break;
    case TEEXEC_DTYPE_DOUBLE: v.d = ((const double *)src)[k]; break;
    case TEEXEC_DTYPE_FLOAT16: v.d = f16_to_f32(((const uint16_t *)src)[k]); break;
    case TEEXEC_DTYPE_BFLOAT16: v.d = bf16_to_f32(((const uint16_t *)src)[k]); break;
    case TEEXEC_DTYPE_FLOAT8E8M0: v.d = txf::e8m0_decode(b[k]); break;
    case TEEXEC_DTYPE_FLOAT4E2M1: v.d = txf::e2m1_decode((uint8_t)txf::subbyte_get(b, k, 4)); break;
    case TEEXEC_DTYPE_INT8: v.kind = V_INT; v.i = ((const int8_t *)src)[k]; break;
    case TEEXEC_DTYPE_INT16: v.kind = V_INT; v.i = ((const int16_t *)src)[k]; break;
    case TEEXEC_DTYPE_INT32: v.kind = V_INT; v.i = ((const int32_t *)src)[k]; break;
    case TEEXEC_DTYPE_INT64: v.kind = V_INT; v.i = ((const int64_t *)src)[k]; break;
    case TEEXEC_DTYPE_INT4: v.kind = V_INT; v.i = txf::subbyte_sext(txf::subbyte_get(b, k, 4), 4); break;
    case TEEXEC_DTYPE_INT2: v.kind = V_INT; v.i = txf::subbyte_sext(txf::subbyte_get(b, k, 2), 2); break;
    case TEEXEC_DTYPE_UINT8: v.kind = V_UINT; v.u = b[k]; break;
    case TEEXEC_DTYPE_UINT16: v.kind = V_UINT; v.u = ((const uint16_t *)src)[k]; break;
    case TEEXEC_DTYPE_UINT32: v.kind = V_UINT; v.u = ((const uint32_t *)src)[k]; break;
    case TEEXEC_DTYPE_UINT64: v.kind = V_UINT; v.u = ((const uint64_t *)src)[k]; break;
    case TEEXEC_DTYPE_UINT4: v.kind = V_UINT; v.u = txf::subbyte_get(b, k, 4); break;
    case TEEXEC_DTYPE_UINT2: v.kind = V_UINT; v.u = txf::subbyte_get(b, k, 2); break;
    case TEEXEC_DTYPE_BOOL: v.kind = V_UINT; v.u = b[k] != 0; break;
    default:
        if (is_byte_float(t)) v.d = txf::fp8_decode(t, b[k]);
        break;
    }
    return v;
}

/* Round-to-odd integer magnitudes to double: 53 bits kept, the dropped
 * ones folded into the lowest kept bit. */
__device__ __forceinline__ double u64_to_f64_odd(uint64_t u)
{
    if (u < (1ull << 53)) return (double)u;
    int s = 64 - __clzll((long long)u) - 53;
    uint64_t t = u >> s;
    if (u & ((1ull << s) - 1u)) t |= 1u;
    return ldexp((double)t, s);
}

__device__ __forceinline__ double i64_to_f64_odd(int64_t i)
{
    if (i >= 0) return u64_to_f64_odd((uint64_t)i);
    return -u64_to_f64_odd(0u - (uint64_t)i);
}

__device__ __forceinline__ float f64_to_f32_odd(double d)
{
    if (d != d) return __uint_as_float((signbit(d) ? 0x80000000u : 0u) | 0x7fc00000u);
    if (fabs(d) > (double)FLT_MAX) return signbit(d) ? -INFINITY : INFINITY;
    float f = __double2float_rn(d);
    if ((double)f != d) {
        uint32_t b = __float_as_uint(f);
        if (!(b & 1u)) {
            if (fabs((double)f) > fabs(d)) b--;
            else b++;
            f = __uint_as_float(b);
        }
    }
    return f;
}

/* double -> float RNE, with x86's NaN (sign, quiet bit, the payload's top
 * bits), which the CPU's (float) conversion gives. */
__device__ __forceinline__ float f64_to_f32_rne(double d)
{
    if (d != d) {
        uint64_t b = (uint64_t)__double_as_longlong(d);
        return __uint_as_float((uint32_t)(b >> 32 & 0x80000000u) | 0x7fc00000u |
                               (uint32_t)((b >> 29) & 0x3fffffu));
    }
    return __double2float_rn(d);
}

__device__ __forceinline__ double as_f64_odd(const val &v)
{
    if (v.kind == V_INT) return i64_to_f64_odd(v.i);
    if (v.kind == V_UINT) return u64_to_f64_odd(v.u);
    return v.d;
}

__device__ __forceinline__ void int_range(int t, int64_t *lo, uint64_t *hi, bool *sgn)
{
    *sgn = true;
    switch (t) {
    case TEEXEC_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case TEEXEC_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case TEEXEC_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    case TEEXEC_DTYPE_INT64: *lo = INT64_MIN; *hi = INT64_MAX; break;
    case TEEXEC_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; *sgn = false; break;
    case TEEXEC_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; *sgn = false; break;
    case TEEXEC_DTYPE_UINT32: *lo = 0; *hi = UINT32_MAX; *sgn = false; break;
    default: *lo = 0; *hi = UINT64_MAX; *sgn = false; break;
    }
}

__device__ __forceinline__ uint64_t to_int_bits(int t, const val &v)
{
    if (v.kind != V_FLOAT) return v.kind == V_INT ? (uint64_t)v.i : v.u; /* wrap */
    int64_t lo;
    uint64_t hi;
    bool sgn;
    int_range(t, &lo, &hi, &sgn);
    if (v.d != v.d) return 0;
    double tr = trunc(v.d);
    if (sgn) {
        if (tr <= (double)lo) return (uint64_t)lo;
        if (tr >= (double)(int64_t)hi) return hi;
        return (uint64_t)(int64_t)tr;
    }
    if (tr <= 0.0) return 0;
    if (tr >= (double)hi) return hi;
    return (uint64_t)tr;
}

/* The code of one element for a destination of >= 8 bits (stored), or the
 * nibble / 2-bit field of a sub-byte destination (returned). */
__device__ __forceinline__ unsigned subbyte_code(int t, const val &v)
{
    if (t == TEEXEC_DTYPE_FLOAT4E2M1) return txf::e2m1_encode(f64_to_f32_odd(as_f64_odd(v)));
    int lo = 0, hi = 0;
    switch (t) {
    case TEEXEC_DTYPE_INT4: lo = -8; hi = 7; break;
    case TEEXEC_DTYPE_UINT4: lo = 0; hi = 15; break;
    case TEEXEC_DTYPE_INT2: lo = -2; hi = 1; break;
    default: lo = 0; hi = 3; break;
    }
    int64_t r;
    if (v.kind == V_FLOAT) r = txf::f64_to_int_rne_sat(v.d, lo, hi);
    else if (v.kind == V_INT) r = v.i < lo ? lo : v.i > hi ? hi : v.i;
    else r = v.u > (uint64_t)hi ? hi : (int64_t)v.u;
    return (unsigned)r & ((1u << bits_of(t)) - 1u);
}

__device__ __forceinline__ void store(void *dst, int t, uint64_t k, const val &v, int sat,
                                      int e8m0_mode)
{
    switch (t) {
    case TEEXEC_DTYPE_BOOL:
        ((uint8_t *)dst)[k] = v.kind == V_FLOAT ? (v.d != 0.0) : v.kind == V_INT ? (v.i != 0) : (v.u != 0);
        return;
    case TEEXEC_DTYPE_DOUBLE:
        ((double *)dst)[k] = v.kind == V_FLOAT ? v.d : v.kind == V_INT ? __ll2double_rn(v.i)
                                                                        : __ull2double_rn(v.u);
        return;
    case TEEXEC_DTYPE_FLOAT:
        ((float *)dst)[k] = v.kind == V_FLOAT ? f64_to_f32_rne(v.d)
                            : v.kind == V_INT ? __ll2float_rn(v.i) : __ull2float_rn(v.u);
        return;
    case TEEXEC_DTYPE_INT8: case TEEXEC_DTYPE_INT16: case TEEXEC_DTYPE_INT32: case TEEXEC_DTYPE_INT64:
    case TEEXEC_DTYPE_UINT8: case TEEXEC_DTYPE_UINT16: case TEEXEC_DTYPE_UINT32: case TEEXEC_DTYPE_UINT64:
        st_bits(dst, k, t, to_int_bits(t, v));
        return;
    default: break;
    }
    float f = f64_to_f32_odd(as_f64_odd(v));
    switch (t) {
    case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)dst)[k] = f32_to_f16(f); break;
    case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)dst)[k] = f32_to_bf16(f); break;
    case TEEXEC_DTYPE_FLOAT8E8M0: ((uint8_t *)dst)[k] = txf::e8m0_encode(f, sat, e8m0_mode); break;
    default: ((uint8_t *)dst)[k] = txf::fp8_encode(t, f, sat); break;
    }
}

/* The element as a FLOAT, as tx_convert_to_f32 gives it. */
__device__ __forceinline__ float to_f32(const void *src, int t, uint64_t k)
{
    float f;
    store(&f, TEEXEC_DTYPE_FLOAT, 0, load(src, t, k), 1, 0);
    return f;
}

/* A FLOAT stored into dtype t (>= 8 bits), as tx_convert_from_f32. */
__device__ __forceinline__ void from_f32(void *dst, int t, uint64_t k, float v)
{
    val x = {V_FLOAT, (double)v, 0, 0};
    store(dst, t, k, x, 1, 0);
}

} // namespace txc

#endif
