/*
 * kt_util.h - helpers shared by the CPU kernel tests: seeded random
 * tensors, element access as double, index arithmetic for the naive
 * references, and tolerance checks. Test-only; every helper fails the
 * current cmocka test on error.
 */
#ifndef TEEXEC_TESTS_KERNELS_KT_UTIL_H
#define TEEXEC_TESTS_KERNELS_KT_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/shape.h"
#include "base/tensor.h"
#include "kernels/cpu/kcommon.h"
#include "kernels/cpu/ops.h"

static uint64_t kt_rng = 0x9e3779b97f4a7c15ull;

static inline void kt_seed(uint64_t s)
{
    kt_rng = s * 0x9e3779b97f4a7c15ull + 1;
}

static inline uint64_t kt_next(void)
{
    /* xorshift64* */
    kt_rng ^= kt_rng >> 12;
    kt_rng ^= kt_rng << 25;
    kt_rng ^= kt_rng >> 27;
    return kt_rng * 0x2545f4914f6cdd1dull;
}

/* uniform in [lo, hi) */
static inline double kt_uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(kt_next() >> 11) / 9007199254740992.0;
}

static inline bool kt_is_float(teexec_dtype dt)
{
    return tx_kc_is_float(tx_kclass_of(dt));
}

static inline double kt_get(const tx_tensor *t, size_t i)
{
    double v;
    tx_load_f64(t->dtype, t->data, i, 1, &v);
    return v;
}

static inline int64_t kt_geti(const tx_tensor *t, size_t i)
{
    int64_t v;
    tx_load_i64(t->dtype, t->data, i, 1, &v);
    return v;
}

/* Stores v (rounded to the dtype: floats round to nearest, ints truncate). */
static inline void kt_set(tx_tensor *t, size_t i, double v)
{
    if (t->dtype == TEEXEC_DTYPE_FLOAT16 || t->dtype == TEEXEC_DTYPE_BFLOAT16) {
        float f = (float)v;
        tx_store_f32(t->dtype, t->data, i, 1, &f);
    } else {
        tx_store_f64(t->dtype, t->data, i, 1, &v);
    }
}

static inline tx_tensor kt_alloc(teexec_dtype dt, int32_t rank, const int64_t *dims)
{
    tx_tensor t;
    teexec_status *st = tx_tensor_alloc(&t, dt, rank, dims);
    if (st) fail_msg("alloc: %s", teexec_status_message(st));
    return t;
}

/* Random values: floats uniform in [lo, hi) (then rounded to the dtype),
 * integers uniform in [lo, hi] rounded down, bool 0/1. */
static inline tx_tensor kt_random(teexec_dtype dt, int32_t rank, const int64_t *dims, double lo,
                                  double hi)
{
    tx_tensor t = kt_alloc(dt, rank, dims);
    for (size_t i = 0; i < t.numel; i++) {
        double v;
        if (dt == TEEXEC_DTYPE_BOOL)
            v = (double)(kt_next() & 1);
        else if (kt_is_float(dt))
            v = kt_uniform(lo, hi);
        else
            v = floor(kt_uniform(lo, hi + 1));
        kt_set(&t, i, v);
    }
    return t;
}

static inline tx_tensor kt_from(teexec_dtype dt, int32_t rank, const int64_t *dims,
                                const double *vals)
{
    tx_tensor t = kt_alloc(dt, rank, dims);
    for (size_t i = 0; i < t.numel; i++) kt_set(&t, i, vals[i]);
    return t;
}

static inline tx_tensor kt_scalar(teexec_dtype dt, double v)
{
    return kt_from(dt, 0, NULL, &v);
}

/* Relative tolerance for comparing a kernel's output with an FP64 reference. */
static inline double kt_rtol(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: return 2e-6;
    case TEEXEC_DTYPE_FLOAT16: return 2e-3;
    case TEEXEC_DTYPE_BFLOAT16: return 1.6e-2;
    case TEEXEC_DTYPE_DOUBLE: return 1e-12;
    default: return 0.0;
    }
}

/* Rounds a reference value to what the dtype can hold, the way a kernel's
 * final rounding does. */
static inline double kt_round_to(teexec_dtype dt, double v)
{
    tx_tensor t = kt_alloc(dt, 0, NULL);
    kt_set(&t, 0, v);
    double r = kt_get(&t, 0);
    tx_tensor_release(&t);
    return r;
}

/* Every element of got against ref[] with |g - r| <= atol + rtol |r|;
 * NaN must match NaN, infinities must match exactly. */
static inline void kt_expect_close(const tx_tensor *got, const double *ref, double rtol,
                                   double atol)
{
    for (size_t i = 0; i < got->numel; i++) {
        double g = kt_get(got, i), r = ref[i];
        if (r != r) {
            if (g == g) fail_msg("element %zu: got %.9g, expected NaN", i, g);
            continue;
        }
        if (isinf(r)) {
            if (g != r) fail_msg("element %zu: got %.9g, expected %g", i, g, r);
            continue;
        }
        if (!(fabs(g - r) <= atol + rtol * fabs(r)))
            fail_msg("element %zu: got %.9g, expected %.9g (rtol %g atol %g)", i, g, r, rtol,
                     atol);
    }
}

/* For integer outputs: exact. */
static inline void kt_expect_exact_i(const tx_tensor *got, const int64_t *ref)
{
    for (size_t i = 0; i < got->numel; i++) {
        int64_t g = kt_geti(got, i);
        if (g != ref[i])
            fail_msg("element %zu: got %lld, expected %lld", i, (long long)g, (long long)ref[i]);
    }
}

static inline void kt_ok(teexec_status *st)
{
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", teexec_status_message(st));
        teexec_status_destroy(st);
        fail_msg("unexpected error: %s", msg);
    }
}

/* Expects an error with the code and (if non-NULL) a message containing
 * `needle`. */
static inline void kt_err(teexec_status *st, teexec_code code, const char *needle)
{
    if (!st) fail_msg("expected error code %d, got success", (int)code);
    teexec_code c = teexec_status_code(st);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", teexec_status_message(st));
    teexec_status_destroy(st);
    if (c != code) fail_msg("expected code %d, got %d (%s)", (int)code, (int)c, msg);
    if (needle && !strstr(msg, needle)) fail_msg("message \"%s\" lacks \"%s\"", msg, needle);
}

/* Flat index -> multi-index (row-major). */
static inline void kt_unravel(size_t flat, int32_t rank, const int64_t *dims, int64_t *idx)
{
    for (int32_t i = rank - 1; i >= 0; i--) {
        idx[i] = dims[i] ? (int64_t)(flat % (size_t)dims[i]) : 0;
        flat = dims[i] ? flat / (size_t)dims[i] : 0;
    }
}

/* Multi-index of an output -> flat index into a tensor broadcast to it. */
static inline size_t kt_bcast_index(const tx_tensor *t, int32_t out_rank, const int64_t *idx)
{
    size_t flat = 0;
    int32_t off = out_rank - t->rank;
    for (int32_t i = 0; i < t->rank; i++) {
        int64_t v = t->dims[i] == 1 ? 0 : idx[i + off];
        flat = flat * (size_t)t->dims[i] + (size_t)v;
    }
    return flat;
}

static inline size_t kt_ravel(int32_t rank, const int64_t *dims, const int64_t *idx)
{
    size_t flat = 0;
    for (int32_t i = 0; i < rank; i++) flat = flat * (size_t)dims[i] + (size_t)idx[i];
    return flat;
}

#define KT_FLOAT_DTYPES                                                            \
    {                                                                              \
        TEEXEC_DTYPE_FLOAT, TEEXEC_DTYPE_FLOAT16, TEEXEC_DTYPE_BFLOAT16,           \
            TEEXEC_DTYPE_DOUBLE                                                    \
    }

#endif
