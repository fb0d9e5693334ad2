/*
 * quant_common.cuh - device helpers shared by the CUDA quantizers.
 *
 * Loads of 8 input elements as floats (16-byte vector loads), the scalar
 * encoders (FP8 via the hardware cvt with NaN fixed up, or without that
 * look-up where no NaN can occur; E8M0 and E2M1 in integer arithmetic)
 * written to give exactly the bytes of base/numfmt*.c, a NaN-propagating
 * max for noticing NaN inputs, and the 128x4 GEMM scale-swizzle offset. Header-only device code for
 * kernels/cuda/*.cu; no state, no allocation, thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_QUANT_COMMON_CUH
#define TEEXEC_KERNELS_CUDA_QUANT_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace txq {

/* ---- loads ------------------------------------------------------------ */

/* 8 consecutive elements starting at a 16-byte aligned address. */
__device__ __forceinline__ void load8(const __nv_bfloat16 *p, float v[8])
{
    uint4 r = __ldg(reinterpret_cast<const uint4 *>(p));
    uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

__device__ __forceinline__ void load8(const float *p, float v[8])
{
    float4 a = __ldg(reinterpret_cast<const float4 *>(p));
    float4 b = __ldg(reinterpret_cast<const float4 *>(p) + 1);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

/* float16 sources (the FP8 per-tensor quantizer reads them for fp16
 * models' hand-offs) */
__device__ __forceinline__ void load8(const __half *p, float v[8])
{
    uint4 r = __ldg(reinterpret_cast<const uint4 *>(p));
    const __half2 *h = reinterpret_cast<const __half2 *>(&r);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __half22float2(h[i]);
        v[2 * i] = f.x;
        v[2 * i + 1] = f.y;
    }
}

/* Raw 16 bytes of bf16 (8 elements) or 2x16 bytes of fp32 for staging in
 * shared memory without conversion. */
__device__ __forceinline__ float to_f32(__nv_bfloat16 h)
{
    return __uint_as_float((uint32_t)__bfloat16_as_ushort(h) << 16);
}
__device__ __forceinline__ float to_f32(float f) { return f; }
__device__ __forceinline__ float to_f32(__half h) { return __half2float(h); }

/* x * s rounded on its own; a NaN x stays x (sign included), as the CPU's
 * x * s keeps its NaN operand while the GPU would return a positive
 * canonical NaN. */
__device__ __forceinline__ float mulq(float x, float s)
{
    const float p = __fmul_rn(x, s);
    return x != x ? x : p;
}

/* 8 elements kept as raw bits between a prefetch and their use. */
template <typename T> struct Raw8;
template <> struct Raw8<__nv_bfloat16> {
    uint4 r;
    __device__ __forceinline__ void load(const __nv_bfloat16 *p) { r = __ldg(reinterpret_cast<const uint4 *>(p)); }
    __device__ __forceinline__ void zero() { r = make_uint4(0, 0, 0, 0); }
    __device__ __forceinline__ void get(float v[8]) const
    {
        const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
    /* staged copy in shared memory: the same 16 bytes */
    __device__ __forceinline__ void stage(void *dst) const { *reinterpret_cast<uint4 *>(dst) = r; }
};
template <> struct Raw8<__half> {
    uint4 r;
    __device__ __forceinline__ void load(const __half *p) { r = __ldg(reinterpret_cast<const uint4 *>(p)); }
    __device__ __forceinline__ void zero() { r = make_uint4(0, 0, 0, 0); }
    __device__ __forceinline__ void get(float v[8]) const
    {
        const __half2 *h = reinterpret_cast<const __half2 *>(&r);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = __half22float2(h[i]);
            v[2 * i] = f.x;
            v[2 * i + 1] = f.y;
        }
    }
    __device__ __forceinline__ void stage(void *dst) const { *reinterpret_cast<uint4 *>(dst) = r; }
};
template <> struct Raw8<float> {
    uint4 r[2];
    __device__ __forceinline__ void load(const float *p)
    {
        r[0] = __ldg(reinterpret_cast<const uint4 *>(p));
        r[1] = __ldg(reinterpret_cast<const uint4 *>(p) + 1);
    }
    __device__ __forceinline__ void zero() { r[0] = r[1] = make_uint4(0, 0, 0, 0); }
    __device__ __forceinline__ void get(float v[8]) const
    {
        v[0] = __uint_as_float(r[0].x); v[1] = __uint_as_float(r[0].y);
        v[2] = __uint_as_float(r[0].z); v[3] = __uint_as_float(r[0].w);
        v[4] = __uint_as_float(r[1].x); v[5] = __uint_as_float(r[1].y);
        v[6] = __uint_as_float(r[1].z); v[7] = __uint_as_float(r[1].w);
    }
    __device__ __forceinline__ void stage(void *dst) const
    {
        reinterpret_cast<uint4 *>(dst)[0] = r[0];
        reinterpret_cast<uint4 *>(dst)[1] = r[1];
    }
};

/* ---- FP8 -------------------------------------------------------------- */

/* RN, saturating to +-max, like tx_f32_to_e4m3fn/e5m2(x, 1). The hardware
 * cvt.rn.satfinite matches that for every non-NaN input (Inf and values
 * past max give +-max). NaN differs: the CPU keeps the NaN's sign
 * (0x7F|sign) while the GPU's arithmetic and cvt give a positive NaN.
 * So the fast path converts without looking, then checks the packed
 * result for NaN codes (E4M3: x1111111; E5M2 after satfinite: x11111xx, as
 * no finite input reaches the Inf codes) and only then patches each NaN
 * byte with the sign of the original input `x` (not of the product). */
__device__ __forceinline__ uint32_t cvt_fp8x2(bool e5m2, float lo, float hi)
{
    unsigned short r;
    if (e5m2)
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ bool has_nan_code(bool e5m2, uint32_t w)
{
    const uint32_t m = e5m2 ? 0x7C7C7C7Cu : 0x7F7F7F7Fu;
    const uint32_t t = (w & m) ^ m; /* zero byte <=> NaN code */
    return ((t - 0x01010101u) & ~t & 0x80808080u) != 0;
}

/* Scalar arguments (not an array) so that nothing goes through local
 * memory: an earlier array-taking, non-inlined version put the four inputs
 * on the stack on every call and halved the bandwidth. */
__device__ __forceinline__ uint32_t patch_nan1(uint32_t w, float x, int i)
{
    if (x != x)
        w = (w & ~(0xFFu << (8 * i))) | ((((__float_as_uint(x) >> 24) & 0x80u) | 0x7Fu) << (8 * i));
    return w;
}

/* q = fp8(x[i] * s) for 4 values, element 0 in the low byte. */
__device__ __forceinline__ uint32_t quant_fp8x4(bool e5m2, const float x[4], float s)
{
    uint32_t w = cvt_fp8x2(e5m2, __fmul_rn(x[0], s), __fmul_rn(x[1], s)) |
                 (cvt_fp8x2(e5m2, __fmul_rn(x[2], s), __fmul_rn(x[3], s)) << 16);
    if (__builtin_expect(has_nan_code(e5m2, w), 0)) {
        w = patch_nan1(w, x[0], 0);
        w = patch_nan1(w, x[1], 1);
        w = patch_nan1(w, x[2], 2);
        w = patch_nan1(w, x[3], 3);
    }
    return w;
}

/* The same without the NaN look-up, for callers that know no product is
 * NaN (no NaN input and a finite nonzero multiplier): saves the ~5 integer
 * instructions per 4 elements that dominate an otherwise memory-bound
 * kernel's issue slots. */
__device__ __forceinline__ uint32_t quant_fp8x4_fast(bool e5m2, const float x[4], float s)
{
    return cvt_fp8x2(e5m2, __fmul_rn(x[0], s), __fmul_rn(x[1], s)) |
           (cvt_fp8x2(e5m2, __fmul_rn(x[2], s), __fmul_rn(x[3], s)) << 16);
}

/* 8 values with one multiplier, as two words (elements 0-3, 4-7). */
__device__ __forceinline__ uint2 quant_fp8x8_fast(bool e5m2, const float x[8], float s)
{
    return make_uint2(quant_fp8x4_fast(e5m2, x, s), quant_fp8x4_fast(e5m2, x + 4, s));
}

/* fp8(x[j] * m[j]) for 4 values with their own multipliers (columnwise
 * blocks of adjacent columns), without the NaN look-up. */
__device__ __forceinline__ uint32_t quant_fp8x4_v_fast(bool e5m2, const float x[4], const float m[4])
{
    return cvt_fp8x2(e5m2, __fmul_rn(x[0], m[0]), __fmul_rn(x[1], m[1])) |
           (cvt_fp8x2(e5m2, __fmul_rn(x[2], m[2]), __fmul_rn(x[3], m[3])) << 16);
}

/* max(a, b) that is NaN when either is (PTX max.NaN, sm_80+). Reducing an
 * amax with it tells for free whether a NaN was among the inputs; callers
 * then redo the reduction with fmaxf, which ignores NaN as the CPU does. */
__device__ __forceinline__ float fmax_nan(float a, float b)
{
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

/* Exact decode of FP8 bytes (E4M3FN or E5M2) to float. */
template <bool E5M2>
__device__ __forceinline__ float dec_fp8(uint32_t b)
{
    uint32_t sign = (b & 0x80u) << 24;
    uint32_t mag = b & 0x7Fu;
    if (E5M2) {
        uint32_t e = mag >> 2, m = mag & 3u;
        if (e == 31u) return __uint_as_float(sign | (m ? 0x7fc00000u : 0x7f800000u));
        if (e == 0) return __uint_as_float(sign | __float_as_uint((float)m * 1.52587890625e-05f)); /* 2^-16 */
        return __uint_as_float(sign | ((e - 15u + 127u) << 23) | (m << 21));
    } else {
        uint32_t e = mag >> 3, m = mag & 7u;
        if (mag == 0x7Fu) return __uint_as_float(sign | 0x7fc00000u);
        if (e == 0) return __uint_as_float(sign | __float_as_uint((float)m * 0.001953125f)); /* 2^-9 */
        return __uint_as_float(sign | ((e - 7u + 127u) << 23) | (m << 20));
    }
}

/* ---- E8M0 ------------------------------------------------------------- */

/* tx_f32_to_e8m0(x, saturate=1, ROUND_UP): Transformer Engine's MXFP8
 * scale rounding (smallest power of two >= |x|, saturating). */
__device__ __forceinline__ uint32_t e8m0_up(float x)
{
    uint32_t a = __float_as_uint(x) & 0x7fffffffu;
    if (a > 0x7f800000u) return 0xFFu;
    if (a == 0x7f800000u) return 0xFEu;
    if (a == 0) return 0u;
    uint32_t e = a >> 23, m = a & 0x7fffffu;
    uint32_t code = e == 0 ? (m <= 0x400000u ? 0u : 1u) : e + (m != 0);
    return code > 254u ? 0xFEu : code;
}

/* 2^(127-e) as the element multiplier: e=255 NaN, e=254 2^-127 (a float
 * subnormal), else the exponent field 254-e. */
__device__ __forceinline__ float e8m0_rcp(uint32_t e)
{
    if (e == 255u) return __uint_as_float(0x7fc00000u);
    if (e == 254u) return __uint_as_float(0x00400000u);
    return __uint_as_float((254u - e) << 23);
}

/* e8m0_up for x >= 0 and not NaN (a scaled amax reduced with fmaxf), in
 * five branch-free instructions: adding 2^23-1 to the bits carries into
 * the exponent exactly when the mantissa is nonzero; for subnormals the
 * threshold is 2^22 (mantissa <= 0x400000 rounds to code 0); Inf and
 * everything above 2^127 saturate to 254. Checked against e8m0_up for
 * every such bit pattern. */
__device__ __forceinline__ uint32_t e8m0_up_fin(float x)
{
    const uint32_t a = __float_as_uint(x);
    const uint32_t c = (a + (a >= 0x800000u ? 0x7fffffu : 0x3fffffu)) >> 23;
    return c < 254u ? c : 254u;
}

/* e8m0_rcp for the codes e8m0_up_fin gives (never 255). */
__device__ __forceinline__ float e8m0_rcp_fin(uint32_t e)
{
    return __uint_as_float(e == 254u ? 0x00400000u : (254u - e) << 23);
}

/* 2^(e-127); e=0 is 2^-127, e=255 NaN. */
__device__ __forceinline__ float e8m0_val(uint32_t e)
{
    if (e == 255u) return __uint_as_float(0x7fc00000u);
    if (e == 0u) return __uint_as_float(0x00400000u);
    return __uint_as_float(e << 23);
}

/* ---- E2M1 ------------------------------------------------------------- */

/* tx_f32_to_e2m1: RN-even onto {0,.5,1,1.5,2,3,4,6}, saturating; NaN -> +6
 * (0x7); the sign of zero results is kept. The grid's step is 0.5 below 2,
 * then 1, then 2: adding 2^22 times the step (a float whose ulp is the
 * step) rounds |x| onto it in the hardware's RN-even, and the ulps added
 * count the code from the start of the binade. About 13 instructions
 * against a threshold chain's 19, in a kernel bound by instruction issue;
 * equal to the chain for all 2^32 inputs (checked on the CPU). */
__device__ __forceinline__ uint32_t enc_e2m1(float x)
{
    const uint32_t u = __float_as_uint(x), a = u & 0x7fffffffu;
    const uint32_t sign = a > 0x7f800000u ? 0u : (u >> 28) & 8u;
    const uint32_t am = a < 0x40C00000u ? a : 0x40C00000u; /* min(|x|, 6): NaN, Inf -> 6 */
    const uint32_t e = (am >> 23) > 127u ? (am >> 23) : 127u;
    const uint32_t mb = (e + 22u) << 23;                   /* 2^22 * step */
    const uint32_t n = __float_as_uint(__fadd_rn(__uint_as_float(am), __uint_as_float(mb))) - mb;
    return sign | (n + 2u * e - 254u);
}

__device__ __forceinline__ float dec_e2m1(uint32_t nib)
{
    const float mag = (nib & 4u) ? ((nib & 2u) ? ((nib & 1u) ? 6.0f : 4.0f) : ((nib & 1u) ? 3.0f : 2.0f))
                                 : ((nib & 2u) ? ((nib & 1u) ? 1.5f : 1.0f) : ((nib & 1u) ? 0.5f : 0.0f));
    return (nib & 8u) ? -mag : mag;
}

/* ---- E4M3 scale (NVFP4 block decode scale) ------------------------------ */
__device__ __forceinline__ float f32_from_e4m3(uint32_t b) { return dec_fp8<false>(b); }

/* The same for codes 0..0x7E (non-negative, not NaN: what a saturating
 * encode of a non-negative finite value gives): the code's bits moved into
 * a float's exponent and mantissa fields are the value times 2^-120 (E4M3's
 * subnormals land on float subnormals), so one exact multiply scales them. */
__device__ __forceinline__ float f32_from_e4m3_pos(uint32_t b)
{
    return __fmul_rn(__uint_as_float(b << 20), 0x1p120f);
}

/* ---- scale layouts ------------------------------------------------------ */

/* Offset of scale (r, c) in the cuBLAS 128x4-tile layout of a scale matrix
 * with `cols_padded` (multiple of 4) columns: 512-byte tiles of 128 rows x 4
 * columns, tiles row-major, (r%32)*16 + ((r%128)/32)*4 + c%4 inside. */
__device__ __forceinline__ size_t swizzle128x4(size_t r, size_t c, size_t cols_padded)
{
    size_t tile = (r / 128) * (cols_padded / 4) + c / 4;
    return tile * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (c % 4);
}

__device__ __forceinline__ float warp_max_xor(float v, int width)
{
#pragma unroll
    for (int o = 1; o < 32; o <<= 1)
        if (o < width) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

} /* namespace txq */

#endif
