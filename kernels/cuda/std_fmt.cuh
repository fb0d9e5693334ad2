/*
 * std_fmt.cuh - device copies of base/numfmt.h's scalar codecs (FP8 E4M3FN,
 * E4M3FNUZ, E5M2, E5M2FNUZ; E8M0 with its three round modes; FP4 E2M1;
 * round-to-nearest-even saturating integers; packed sub-byte fields), in
 * the same integer arithmetic, so GPU casts and quantizers produce the
 * CPU's bytes for every input, NaN, Inf, subnormals and ties included.
 * base/numfmt_fp8.c, numfmt_e8m0.c, numfmt_fp4.c and numfmt_int.c are the
 * references; keep them in step.
 *
 * Header-only device code; no state; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_FMT_CUH
#define TEEXEC_KERNELS_CUDA_STD_FMT_CUH

#include <stdint.h>

#include "teexec/teexec.h"
#include "kernels/cuda/quant_common.cuh"

namespace txf {

struct fp8_fmt {
    unsigned man_bits;
    int bias;
    unsigned max_code;
    bool fnuz;
    bool has_inf;
};

__device__ __forceinline__ fp8_fmt fmt_of(int dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT8E4M3FN: return {3, 7, 0x7E, false, false};
    case TEEXEC_DTYPE_FLOAT8E4M3FNUZ: return {3, 8, 0x7F, true, false};
    case TEEXEC_DTYPE_FLOAT8E5M2: return {2, 15, 0x7B, false, true};
    default: return {2, 16, 0x7F, true, false}; /* E5M2FNUZ */
    }
}

__device__ __forceinline__ uint32_t round_magnitude(uint32_t a, const fp8_fmt &f)
{
    int exp_field = (int)(a >> 23);
    if (exp_field == 0) return 0;
    int e = exp_field - 127;
    if (e > 20) return 0xFFFFu;
    uint32_t sig = (a & 0x7fffffu) | 0x800000u;
    int emin = 1 - f.bias;
    int ep = e < emin ? emin : e;
    int shift = 23 - (int)f.man_bits + (ep - e);
    if (shift >= 25) return 0;
    uint32_t q = sig >> shift;
    uint32_t rem = sig & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return ((uint32_t)(ep - emin) << f.man_bits) + q;
}

__device__ __forceinline__ uint8_t fp8_encode(int dt, float x, int saturate)
{
    fp8_fmt f = fmt_of(dt);
    uint32_t u = __float_as_uint(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    uint8_t nan = f.fnuz ? 0x80 : (uint8_t)(sign | 0x7F);
    uint8_t ovf = f.has_inf ? (uint8_t)(sign | 0x7C) : nan;
    if (a > 0x7f800000u) return nan;
    if (a == 0x7f800000u) return saturate ? (uint8_t)(sign | f.max_code) : ovf;
    uint32_t code = a ? round_magnitude(a, f) : 0;
    if (code > f.max_code) return saturate ? (uint8_t)(sign | f.max_code) : ovf;
    if (code == 0 && f.fnuz) return 0;
    return (uint8_t)(sign | code);
}

__device__ __forceinline__ float fp8_decode(int dt, uint8_t b)
{
    fp8_fmt f = fmt_of(dt);
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    unsigned m = f.man_bits;
    unsigned e = (b & 0x7Fu) >> m;
    unsigned man = b & ((1u << m) - 1u);
    if (f.fnuz && b == 0x80) return __uint_as_float(0x7fc00000u);
    if (f.has_inf && e == 31u) return __uint_as_float(sign | (man ? 0x7fc00000u : 0x7f800000u));
    if (!f.fnuz && !f.has_inf && (b & 0x7Fu) == 0x7Fu) return __uint_as_float(sign | 0x7fc00000u);
    if (e == 0) {
        float quantum = __uint_as_float((uint32_t)(1 - f.bias - (int)m + 127) << 23);
        return __uint_as_float(sign | __float_as_uint(__fmul_rn((float)man, quantum)));
    }
    uint32_t exp32 = (uint32_t)((int)e - f.bias + 127);
    return __uint_as_float(sign | (exp32 << 23) | (man << (23u - m)));
}

/* E8M0: round 0 up, 1 down, 2 nearest (tx_e8m0_round). */
__device__ __forceinline__ uint8_t e8m0_encode(float x, int saturate, int mode)
{
    uint32_t a = __float_as_uint(x) & 0x7fffffffu;
    if (a > 0x7f800000u) return 0xFF;
    if (a == 0x7f800000u) return saturate ? 0xFE : 0xFF;
    if (a == 0) return saturate ? 0x00 : 0xFF;
    uint32_t e = a >> 23, m = a & 0x7fffffu;
    int code;
    if (e == 0) {
        if (mode == 0) code = m <= 0x400000u ? 0 : 1;
        else if (mode == 1) code = m >= 0x400000u ? 0 : -1;
        else code = m >= 0x600000u ? 1 : m >= 0x200000u ? 0 : -1;
    } else {
        if (mode == 0) code = (int)e + (m != 0);
        else if (mode == 1) code = (int)e;
        else code = (int)e + (m >= 0x400000u);
    }
    if (code > 254) return saturate ? 0xFE : 0xFF;
    if (code < 0) return saturate ? 0x00 : 0xFF;
    return (uint8_t)code;
}

__device__ __forceinline__ float e8m0_decode(uint8_t b)
{
    if (b == 0xFF) return __uint_as_float(0x7fc00000u);
    if (b == 0) return __uint_as_float(0x00400000u);
    return __uint_as_float((uint32_t)b << 23);
}

/* E2M1 is the quantizers' codec (quant_common.cuh), one copy for both:
 * nearest, ties to even, saturating, NaN -> 0x7, the sign of zero kept. */
__device__ __forceinline__ uint8_t e2m1_encode(float x) { return (uint8_t)txq::enc_e2m1(x); }

__device__ __forceinline__ float e2m1_decode(uint8_t nib) { return txq::dec_e2m1(nib); }

/* QuantizeLinear's float -> integer: RNE, saturated to [lo, hi], NaN 0. */
__device__ __forceinline__ int64_t f64_to_int_rne_sat(double x, int64_t lo, int64_t hi)
{
    if (x != x) return 0;
    if (x <= (double)lo) return lo;
    if (x >= (double)hi) return hi;
    int64_t v = (int64_t)rint(x);
    return v < lo ? lo : v > hi ? hi : v;
}

__device__ __forceinline__ unsigned subbyte_get(const uint8_t *buf, uint64_t i, unsigned bits)
{
    unsigned per = 8u / bits;
    unsigned shift = (unsigned)(i % per) * bits;
    return (unsigned)(buf[i / per] >> shift) & ((1u << bits) - 1u);
}

__device__ __forceinline__ int subbyte_sext(unsigned v, unsigned bits)
{
    unsigned sign = 1u << (bits - 1u);
    v &= (1u << bits) - 1u;
    return (int)(v ^ sign) - (int)sign;
}

} // namespace txf

#endif
