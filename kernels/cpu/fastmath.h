/*
 * fastmath.h - branch-free float32 exp, erf and tanh for the CPU kernels'
 * hot loops (internal to kernels/cpu).
 *
 * libm's expf/erff/tanhf are scalar calls, so loops over them never
 * vectorize; these are straight-line code the compiler can vectorize.
 * Accuracy (checked against double libm over the whole float range in
 * tests/kernels/test_unary.c): relative error below 4e-7 (about 3 ulp),
 * NaN in -> NaN out, correct limits (exp: 0 / +inf; erf, tanh: +-1).
 *
 * The polynomial coefficients were fitted for teexec by weighted least
 * squares on Chebyshev-distributed points (numpy.polynomial.polyfit,
 * weight 1/f for relative error), then rounded to float:
 *   erf(z)/z            as a degree-5 polynomial in z^2 on [0, 1];
 *   erfc(z) exp(z^2)    as a degree-7 polynomial in t = 1/(1+z) on [1, 4];
 *   tanh(x)/x           as a degree-5 polynomial in x^2 on [0, 0.625].
 * exp uses the Taylor series to degree 7 after reducing by n ln 2.
 *
 * Pure functions; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_FASTMATH_H
#define TEEXEC_KERNELS_CPU_FASTMATH_H

#include <stdint.h>
#include <string.h>

/* Always inlined: a call inside a hot loop would stop its vectorization. */
#if defined(__GNUC__)
#define TX_FM_INLINE static inline __attribute__((always_inline))
#else
#define TX_FM_INLINE static inline
#endif

TX_FM_INLINE float tx_fm_bits_to_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

TX_FM_INLINE uint32_t tx_fm_f_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* e^x. */
TX_FM_INLINE float tx_expf_fast(float x)
{
    /* below -104 the result underflows to 0; above 88.73 it is +inf */
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 88.75f ? 88.75f : xc;
    xc = xc == xc ? xc : 0.0f; /* NaN: computed as 0, patched below */
    /* n = round(x / ln2) via the 1.5 * 2^23 shifter: no float->int cast */
    float t = xc * 1.44269504088896341f + 12582912.0f;
    int32_t n = (int32_t)tx_fm_f_to_bits(t) - 0x4B400000;
    float nf = t - 12582912.0f;
    /* r = x - n ln2 in two steps (Cody-Waite) keeps r exact enough */
    float r = xc - nf * 0.693145751953125f;
    r = r - nf * 1.428606765330187e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n as two factors so that n in [-150, 128] stays representable */
    int32_t n1 = n / 2, n2 = n - n1;
    float s1 = tx_fm_bits_to_f((uint32_t)(n1 + 127) << 23);
    float s2 = tx_fm_bits_to_f((uint32_t)(n2 + 127) << 23);
    float y = p * s1 * s2;
    y = x > 88.7228f ? __builtin_inff() : y;
    return x == x ? y : x;
}

/* erf(x). */
TX_FM_INLINE float tx_erff_fast(float x)
{
    float z = x < 0 ? -x : x;
    z = z > 4.0f ? 4.0f : z; /* erf(4) rounds to 1 in float */
    /* small: z P(z^2) */
    float z2 = z * z;
    float a = -5.667873193e-04f;
    a = a * z2 + 4.927389789e-03f;
    a = a * z2 - 2.672086656e-02f;
    a = a * z2 + 1.128057763e-01f;
    a = a * z2 - 3.761239052e-01f;
    a = a * z2 + 1.128379107e+00f;
    a = a * z;
    /* large: 1 - exp(-z^2) Q(1/(1+z)) */
    float t = 1.0f / (1.0f + z);
    float q = -6.626639366e-01f;
    q = q * t + 1.446592450e+00f;
    q = q * t - 7.637408376e-01f;
    q = q * t - 5.491948128e-01f;
    q = q * t + 4.008430839e-01f;
    q = q * t + 5.400549173e-01f;
    q = q * t + 5.666685700e-01f;
    q = q * t - 1.041848809e-04f;
    float b = 1.0f - tx_expf_fast(-z2) * q;
    float r = z <= 1.0f ? a : b;
    r = x < 0 ? -r : r;
    return x == x ? r : x;
}

/* tanh(x). */
TX_FM_INLINE float tx_tanhf_fast(float x)
{
    float z = x < 0 ? -x : x;
    float z2 = z * z;
    float a = -5.697370972e-03f;
    a = a * z2 + 2.063016035e-02f;
    a = a * z2 - 5.373581499e-02f;
    a = a * z2 + 1.333136410e-01f;
    a = a * z2 - 3.333327472e-01f;
    a = a * z2 + 1.0f;
    a = a * z;
    /* 1 - 2 / (e^{2z} + 1); for large z e^{2z} = inf gives exactly 1 */
    float zc = z > 20.0f ? 20.0f : z;
    float b = 1.0f - 2.0f / (tx_expf_fast(2.0f * zc) + 1.0f);
    float r = z < 0.625f ? a : b;
    r = x < 0 ? -r : r;
    return x == x ? r : x;
}

#endif
