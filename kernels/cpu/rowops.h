/*
 * rowops.h - reductions over one contiguous float row, for the hot
 * kernels (softmax, layernorm); internal to kernels/cpu.
 *
 * A floating-point sum cannot be vectorized as written (the compiler may
 * not reorder additions), so these keep TX_LANES independent partial
 * results - each lane is an ordinary sequential sum the vectorizer can map
 * onto one SIMD lane - and combine them at the end. Sums accumulate in
 * double. Pure functions; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_ROWOPS_H
#define TEEXEC_KERNELS_CPU_ROWOPS_H

#include <math.h>
#include <stddef.h>

#define TX_LANES 8

/* max of v[0..n) ignoring NaN (-inf for an empty or all-NaN row). */
static inline float tx_row_max(const float *v, size_t n)
{
    float m[TX_LANES];
    for (int l = 0; l < TX_LANES; l++) m[l] = -INFINITY;
    size_t i = 0;
    for (; i + TX_LANES <= n; i += TX_LANES)
        for (int l = 0; l < TX_LANES; l++) m[l] = v[i + l] > m[l] ? v[i + l] : m[l];
    for (; i < n; i++) m[0] = v[i] > m[0] ? v[i] : m[0];
    float r = m[0];
    for (int l = 1; l < TX_LANES; l++) r = m[l] > r ? m[l] : r;
    return r;
}

/* sum of v[0..n) in double. */
static inline double tx_row_sum(const float *v, size_t n)
{
    double s[TX_LANES] = {0};
    size_t i = 0;
    for (; i + TX_LANES <= n; i += TX_LANES)
        for (int l = 0; l < TX_LANES; l++) s[l] += v[i + l];
    for (; i < n; i++) s[0] += v[i];
    double r = 0;
    for (int l = 0; l < TX_LANES; l++) r += s[l];
    return r;
}

/* sum of (v - mu)^2 over v[0..n) in double. */
static inline double tx_row_sqdev(const float *v, size_t n, double mu)
{
    double s[TX_LANES] = {0};
    size_t i = 0;
    for (; i + TX_LANES <= n; i += TX_LANES)
        for (int l = 0; l < TX_LANES; l++) {
            double d = v[i + l] - mu;
            s[l] += d * d;
        }
    for (; i < n; i++) s[0] += (v[i] - mu) * (v[i] - mu);
    double r = 0;
    for (int l = 0; l < TX_LANES; l++) r += s[l];
    return r;
}

#endif
