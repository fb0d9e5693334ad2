/*
 * kern_util.h - helpers shared by the GPU kernel tests that compare a
 * kernels/cuda kernel with its CPU te.ops reference (test_gpu_dropout,
 * test_gpu_xent, test_gpu_optim, test_gpu_rope_embed): a seeded generator,
 * host tensors of random values in FLOAT / BFLOAT16 / FLOAT16, and
 * comparisons of a device buffer with a host tensor, bit-exact or within a
 * tolerance, each recorded with tg_record. Test code: static functions,
 * include after cmocka.h and gpu_harness.h; not thread-safe.
 */
#ifndef TEEXEC_TESTS_GPU_KERN_UTIL_H
#define TEEXEC_TESTS_GPU_KERN_UTIL_H

#include "base/half.h"
#include "base/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KU_BF16 TEEXEC_DTYPE_BFLOAT16
#define KU_F16 TEEXEC_DTYPE_FLOAT16
#define KU_F32 TEEXEC_DTYPE_FLOAT

static uint64_t ku_rng;

static inline void ku_seed(uint64_t s) { ku_rng = s * 0x9E3779B97F4A7C15ull + 1; }

static inline double ku_urand(void)
{
    ku_rng = ku_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(ku_rng >> 11) / 9007199254740992.0;
}

static inline uint64_t ku_below(uint64_t n)
{
    ku_rng = ku_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (ku_rng >> 17) % n;
}

static inline float ku_get(const tx_tensor *t, uint64_t i)
{
    if (t->dtype == KU_BF16) return tx_bf16_to_f32(((const uint16_t *)t->data)[i]);
    if (t->dtype == KU_F16) return tx_f16_to_f32(((const uint16_t *)t->data)[i]);
    return ((const float *)t->data)[i];
}

static inline void ku_set(tx_tensor *t, uint64_t i, float v)
{
    if (t->dtype == KU_BF16) ((uint16_t *)t->data)[i] = tx_f32_to_bf16(v);
    else if (t->dtype == KU_F16) ((uint16_t *)t->data)[i] = tx_f32_to_f16(v);
    else ((float *)t->data)[i] = v;
}

/* Host tensor of dtype dt, values uniform in [lo, hi) rounded to dt. */
static inline void ku_make(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims, double lo,
                    double hi)
{
    TG_OK(tx_tensor_alloc(t, dt, rank, dims));
    for (uint64_t i = 0; i < t->numel; i++) ku_set(t, i, (float)(lo + (hi - lo) * ku_urand()));
}

static inline void *ku_upload(const tx_tensor *t) { return tg_dev_upload(t->data, t->nbytes); }

/* The device buffer dev (ref's dtype and size) must equal ref bit for bit. */
static inline void ku_expect_bits(const char *what, const tx_tensor *ref, const void *dev)
{
    uint8_t *host = malloc(ref->nbytes + 1);
    assert_non_null(host);
    tg_download(host, dev, ref->nbytes);
    size_t diff = tg_cmp_bytes(what, ref->data, host, ref->nbytes);
    free(host);
    char detail[96];
    snprintf(detail, sizeof detail, "%zu of %zu bytes differ", diff, ref->nbytes);
    tg_record(what, diff == 0, detail);
    if (diff) fail_msg("%s: %s", what, detail);
}

/* |gpu - cpu| <= atol + rtol |cpu| elementwise (NaN only where the CPU has
 * NaN). Also reports how many elements are bit-identical. */
static inline void ku_expect_close(const char *what, const tx_tensor *ref, const void *dev, double rtol,
                            double atol)
{
    void *host = malloc(ref->nbytes + 1);
    assert_non_null(host);
    tg_download(host, dev, ref->nbytes);
    tx_tensor got = *ref;
    got.data = host;
    got.owns_data = false;
    size_t bad = 0, same = 0;
    double worst = 0.0;
    size_t es = tx_dtype_elem_size(ref->dtype);
    for (uint64_t i = 0; i < ref->numel; i++) {
        double a = ku_get(ref, i), b = ku_get(&got, i);
        if (!memcmp((const char *)ref->data + i * es, (const char *)host + i * es, es)) same++;
        double err = fabs(a - b), lim = atol + rtol * fabs(a);
        if (err > lim || isnan(b) != isnan(a)) {
            if (!bad)
                fprintf(stderr, "%s: element %llu cpu %.9g gpu %.9g\n", what,
                        (unsigned long long)i, a, b);
            bad++;
        }
        if (fabs(a) > 1e-3 && err / fabs(a) > worst) worst = err / fabs(a);
    }
    free(host);
    char detail[160];
    snprintf(detail, sizeof detail, "%zu of %llu outside tolerance, %zu bit-identical, worst rel %.3g",
             bad, (unsigned long long)ref->numel, same, worst);
    fprintf(stderr, "%s: %s\n", what, detail);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

/* DESIGN.md's tolerances by dtype. */
static inline double ku_rtol(teexec_dtype dt)
{
    return dt == KU_BF16 ? 1.6e-2 : dt == KU_F16 ? 1e-3 : 1.3e-6;
}

#endif
