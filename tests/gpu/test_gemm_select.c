/* Unit test (no GPU needed): the host half of GEMM algorithm selection
 * (kernels/cuda/gemm_select.h): which description fields make two GEMMs
 * distinct cache keys, the key -> slot table through growth, the
 * TEEXEC_GEMM_AUTOTUNE settings, the repeat count, the rule that picks a
 * timed candidate, and the check that a GEMM may be repeated for timing.
 * Pointers here are made-up addresses, compared and never dereferenced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "kernels/cuda/gemm_select.h"

#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F32 TEEXEC_DTYPE_FLOAT
#define E4 TEEXEC_DTYPE_FLOAT8E4M3FN

static void *addr(uintptr_t a) { return (void *)a; }

/* fprop of a 16-token Linear 4096 -> 16384, as the executor describes it */
static tx_gemm_desc base_desc(void)
{
    tx_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = 16384;
    d.n = 16;
    d.k = 4096;
    d.transa = 1;
    d.a_type = d.b_type = d.d_type = BF16;
    d.alpha = 1.0f;
    return d;
}

#define PA addr(0x100000000ull)
#define PB addr(0x200000000ull)
#define PD addr(0x300000000ull)

static tx_gemm_key key_of(const tx_gemm_desc *d, const void *A, const void *B, const void *C,
                          const void *D)
{
    tx_gemm_key k;
    tx_gemm_key_make(d, A, B, C, D, &k);
    return k;
}

static void test_key_fields(void **state)
{
    (void)state;
    const tx_gemm_desc d0 = base_desc();
    const tx_gemm_key k0 = key_of(&d0, PA, PB, PD, PD);
    /* the same call twice, and a packed ld spelled out, are one key */
    tx_gemm_key k = key_of(&d0, PA, PB, PD, PD);
    assert_true(tx_gemm_key_equal(&k0, &k));
    assert_int_equal(tx_gemm_key_hash(&k0), tx_gemm_key_hash(&k));
    tx_gemm_desc d = d0;
    d.lda = 4096; /* A stored k x m (transa) */
    d.ldb = 4096;
    d.ldc = d.ldd = 16384;
    k = key_of(&d, PA, PB, PD, PD);
    assert_true(tx_gemm_key_equal(&k0, &k));
    /* values that do not change the algorithm: beta's size, alpha, the
     * bias pointer without an epilogue, other buffers of the same alignment */
    d = d0;
    d.alpha = 0.5f;
    d.bias = addr(0x123);
    k = key_of(&d, addr(0x400000000ull), PB, PD, PD);
    assert_true(tx_gemm_key_equal(&k0, &k));
    tx_gemm_desc b1 = d0, b2 = d0;
    b1.beta = 1.0f;
    b2.beta = 0.25f;
    tx_gemm_key kb1 = key_of(&b1, PA, PB, PD, PD), kb2 = key_of(&b2, PA, PB, PD, PD);
    assert_true(tx_gemm_key_equal(&kb1, &kb2));
    assert_false(tx_gemm_key_equal(&k0, &kb1));

    /* each of these makes a different key */
    tx_gemm_desc v[14];
    for (int i = 0; i < 14; i++) v[i] = d0;
    v[0].m = 4096;
    v[1].n = 32;
    v[2].k = 8192;
    v[3].transa = 0;
    v[4].transb = 1;
    v[5].ldb = 8192;
    v[6].d_type = F32;
    v[7].epilogue = TX_GEMM_EPI_BIAS, v[7].bias = addr(0x500000000ull);
    v[8].epilogue = TX_GEMM_EPI_GELU_AUX_BIAS, v[8].bias = addr(0x500000000ull),
    v[8].aux = addr(0x600000000ull);
    v[9] = v[7], v[9].bias_type = F32;
    v[10].a_type = v[10].b_type = E4, v[10].a_scale_mode = v[10].b_scale_mode = TX_GEMM_SCALE_TENSOR;
    v[11] = v[10], v[11].fast_accum = 1;
    v[12].alpha_dev = (const float *)addr(0x700000000ull);
    v[13] = v[8], v[13].aux_ld = 16392;
    tx_gemm_key ks[14];
    for (int i = 0; i < 14; i++) {
        ks[i] = key_of(&v[i], PA, PB, PD, PD);
        assert_false(tx_gemm_key_equal(&k0, &ks[i]));
        for (int j = 0; j < i; j++) assert_false(tx_gemm_key_equal(&ks[j], &ks[i]));
    }
    /* alignment classes: 16 bytes and 256 bytes are different algorithms' worlds */
    k = key_of(&d0, addr(0x100000010ull), PB, PD, PD);
    assert_false(tx_gemm_key_equal(&k0, &k));
    k = key_of(&d0, PA, PB, PD, addr(0x300000008ull));
    assert_false(tx_gemm_key_equal(&k0, &k));
    assert_int_equal(tx_gemm_align_of(NULL), 256);
    assert_int_equal(tx_gemm_align_of(addr(0x1000)), 256);
    assert_int_equal(tx_gemm_align_of(addr(0x1010)), 16);
    assert_int_equal(tx_gemm_align_of(addr(0x1002)), 2);
    assert_int_equal(tx_gemm_align_of(addr(0x1001)), 1);
}

static void test_cache(void **state)
{
    (void)state;
    tx_gemm_cache *c = NULL;
    assert_null(tx_gemm_cache_create(&c));
    assert_non_null(c);
    tx_gemm_desc d = base_desc();
    enum { N = 1000 }; /* many times the initial capacity: several growths */
    for (int i = 0; i < N; i++) {
        d.m = 16 * (i + 1);
        tx_gemm_key k = key_of(&d, PA, PB, PD, PD);
        assert_int_equal(tx_gemm_cache_find(c, &k), -1);
        assert_null(tx_gemm_cache_insert(c, &k, (uint32_t)(N - i)));
    }
    assert_int_equal(tx_gemm_cache_count(c), N);
    for (int i = 0; i < N; i++) {
        d.m = 16 * (i + 1);
        tx_gemm_key k = key_of(&d, PA, PB, PD, PD);
        assert_int_equal(tx_gemm_cache_find(c, &k), N - i);
    }
    d.m = 16 * (N + 1);
    tx_gemm_key missing = key_of(&d, PA, PB, PD, PD);
    assert_int_equal(tx_gemm_cache_find(c, &missing), -1);
    d.m = 16;
    tx_gemm_key dup = key_of(&d, PA, PB, PD, PD);
    teexec_status *st = tx_gemm_cache_insert(c, &dup, 7);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    assert_int_equal(tx_gemm_cache_find(c, &dup), N); /* unchanged */
    assert_int_equal(tx_gemm_cache_count(c), N);
    tx_gemm_cache_destroy(c);
    tx_gemm_cache_destroy(NULL);
    assert_int_equal(tx_gemm_cache_find(NULL, &dup), -1);
}

static void test_env(void **state)
{
    (void)state;
    tx_gemm_tune_config c = tx_gemm_tune_from_env(NULL, false);
    assert_int_equal(c.candidates, TX_GEMM_TUNE_DEFAULT_CANDIDATES);
    assert_true(tx_gemm_tune_enabled(&c));
    const char *off[] = {"0", "off", "OFF", "false", "No"};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
        c = tx_gemm_tune_from_env(off[i], false);
        assert_false(tx_gemm_tune_enabled(&c));
    }
    const char *on[] = {"", "1", "on", "yes", "fast", "-3", "12x"};
    for (size_t i = 0; i < sizeof on / sizeof *on; i++) {
        c = tx_gemm_tune_from_env(on[i], false);
        assert_int_equal(c.candidates, TX_GEMM_TUNE_DEFAULT_CANDIDATES);
    }
    assert_int_equal(tx_gemm_tune_from_env("16", false).candidates, 16);
    assert_int_equal(tx_gemm_tune_from_env("2", false).candidates, 2);
    assert_int_equal(tx_gemm_tune_from_env("100000", false).candidates, TX_GEMM_TUNE_MAX_CANDIDATES);
    /* determinism wins over the variable */
    c = tx_gemm_tune_from_env("16", true);
    assert_false(tx_gemm_tune_enabled(&c));
    c = tx_gemm_tune_from_env(NULL, true);
    assert_false(tx_gemm_tune_enabled(&c));
    c = tx_gemm_tune_off();
    assert_false(tx_gemm_tune_enabled(&c));
    assert_false(tx_gemm_tune_enabled(NULL));
}

/* "NxR": N candidates timed in R interleaved passes */
static void test_env_rounds(void **state)
{
    (void)state;
    tx_gemm_tune_config c = tx_gemm_tune_from_env(NULL, false);
    assert_int_equal(c.rounds, TX_GEMM_TUNE_DEFAULT_ROUNDS);
    assert_int_equal(tx_gemm_tune_off().rounds, 1);
    c = tx_gemm_tune_from_env("16x5", false);
    assert_int_equal(c.candidates, 16);
    assert_int_equal(c.rounds, 5);
    c = tx_gemm_tune_from_env("8X1", false);
    assert_int_equal(c.candidates, 8);
    assert_int_equal(c.rounds, 1);
    c = tx_gemm_tune_from_env("32", false);
    assert_int_equal(c.candidates, 32);
    assert_int_equal(c.rounds, TX_GEMM_TUNE_DEFAULT_ROUNDS);
    c = tx_gemm_tune_from_env("4x1000", false);
    assert_int_equal(c.rounds, TX_GEMM_TUNE_MAX_ROUNDS);
    /* malformed: the defaults, both fields */
    const char *bad[] = {"8x0", "8x-2", "8x2y", "x3", "1x3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c = tx_gemm_tune_from_env(bad[i], false);
        assert_int_equal(c.candidates, TX_GEMM_TUNE_DEFAULT_CANDIDATES);
        assert_int_equal(c.rounds, TX_GEMM_TUNE_DEFAULT_ROUNDS);
    }
    assert_false(tx_gemm_tune_enabled(&(tx_gemm_tune_config){0}));
    c = tx_gemm_tune_from_env("16x2", true);
    assert_false(tx_gemm_tune_enabled(&c));
}

static void test_reps(void **state)
{
    (void)state;
    tx_gemm_tune_config c = tx_gemm_tune_from_env(NULL, false);
    c.target_ms = 2.0;
    c.min_reps = 3;
    c.max_reps = 200;
    assert_int_equal(tx_gemm_tune_reps(&c, 1.4), 3);   /* a big GEMM: the minimum */
    assert_int_equal(tx_gemm_tune_reps(&c, 0.05), 40);  /* a 16-token GEMM */
    assert_int_equal(tx_gemm_tune_reps(&c, 0.001), 200); /* capped */
    assert_int_equal(tx_gemm_tune_reps(&c, 0.0), 3);
    assert_int_equal(tx_gemm_tune_reps(&c, -1.0), 3);
    assert_int_equal(tx_gemm_tune_reps(&c, NAN), 3);
    c.max_reps = 0; /* a bad maximum never goes under the minimum */
    assert_int_equal(tx_gemm_tune_reps(&c, 0.001), 3);
}

static void test_candidates(void **state)
{
    (void)state;
    tx_gemm_tune_config c = tx_gemm_tune_from_env(NULL, false);
    /* 16 tokens through 4096 -> 16384: 2^30 multiply-adds, small */
    assert_int_equal(tx_gemm_tune_candidates(&c, 16384, 16, 4096), 4 * TX_GEMM_TUNE_DEFAULT_CANDIDATES);
    assert_int_equal(tx_gemm_tune_candidates(&c, 4096, 16, 16384), 4 * TX_GEMM_TUNE_DEFAULT_CANDIDATES);
    /* 8192 tokens: the configured count */
    assert_int_equal(tx_gemm_tune_candidates(&c, 16384, 8192, 4096), TX_GEMM_TUNE_DEFAULT_CANDIDATES);
    assert_int_equal(tx_gemm_tune_candidates(&c, 2048, 1024, 1025), TX_GEMM_TUNE_DEFAULT_CANDIDATES);
    assert_int_equal(tx_gemm_tune_candidates(&c, 2048, 1024, 1024), 4 * TX_GEMM_TUNE_DEFAULT_CANDIDATES);
    /* huge dims do not overflow into "small" */
    assert_int_equal(tx_gemm_tune_candidates(&c, INT64_MAX, INT64_MAX, INT64_MAX),
                     TX_GEMM_TUNE_DEFAULT_CANDIDATES);
    c.candidates = 40;
    assert_int_equal(tx_gemm_tune_candidates(&c, 16, 16, 16), TX_GEMM_TUNE_MAX_CANDIDATES);
    c.candidates = 1000;
    assert_int_equal(tx_gemm_tune_candidates(&c, 16384, 8192, 4096), TX_GEMM_TUNE_MAX_CANDIDATES);
    c = tx_gemm_tune_off();
    assert_int_equal(tx_gemm_tune_candidates(&c, 16, 16, 16), 1);
}

static void test_pick(void **state)
{
    (void)state;
    const double a[] = {1.0, 0.5, 0.7};
    assert_int_equal(tx_gemm_tune_pick(a, 3), 1);
    const double within[] = {1.0, 0.995, 1.2}; /* inside the margin: keep the first answer */
    assert_int_equal(tx_gemm_tune_pick(within, 3), 0);
    const double beyond[] = {1.0, 1.1, 0.98};
    assert_int_equal(tx_gemm_tune_pick(beyond, 3), 2);
    const double first_failed[] = {-1.0, 2.0, 1.0};
    assert_int_equal(tx_gemm_tune_pick(first_failed, 3), 2);
    const double none[] = {-1.0, NAN};
    assert_int_equal(tx_gemm_tune_pick(none, 2), -1);
    assert_int_equal(tx_gemm_tune_pick(none, 0), -1);
    const double nan_mid[] = {0.3, NAN, 0.2};
    assert_int_equal(tx_gemm_tune_pick(nan_mid, 3), 2);
    const double tie[] = {0.5, 0.4, 0.4}; /* equal times: the earlier answer */
    assert_int_equal(tx_gemm_tune_pick(tie, 3), 1);
}

static void test_repeatable(void **state)
{
    (void)state;
    const char *why = NULL;
    tx_gemm_desc d = base_desc();
    /* A: 4096 x 16384 bf16 = 128 MiB from PA; B: 4096 x 16 from PB; D: 16384 x 16 */
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, PD, PD, &why));
    assert_null(why);
    /* beta = 0: C aliased to D is not read */
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, PD, PD, NULL));
    /* a residual in another buffer: fine; accumulating in place: not */
    d.beta = 1.0f;
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, addr(0x380000000ull), PD, NULL));
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, PD, PD, &why));
    assert_non_null(why);
    /* C partly overlapping D (the last column of C is D's first) */
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, addr(0x300000000ull - 15 * 16384 * 2), PD, NULL));
    /* ... and ending right where D starts: no overlap */
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, addr(0x300000000ull - 16 * 16384 * 2), PD, NULL));
    d.beta = 0.0f;
    /* D inside A's last bytes */
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, addr(0x100000000ull + 128ull * 1024 * 1024 - 2), NULL));
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, NULL, addr(0x100000000ull + 128ull * 1024 * 1024), NULL));
    /* GELU aux written over D (outputs only: each run rewrites both), or
     * over its own input */
    d.epilogue = TX_GEMM_EPI_GELU_AUX_BIAS;
    d.bias = addr(0x500000000ull);
    d.aux = addr(0x600000000ull);
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.aux = PD;
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.bias = addr(0x300000000ull + 64); /* the bias it reads inside D */
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.bias = addr(0x500000000ull);
    d.aux = PB;
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    /* dGELU reads aux and writes the bias gradient */
    d.epilogue = TX_GEMM_EPI_DGELU_BGRAD;
    d.aux = addr(0x600000000ull);
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.aux = PD; /* dGELU in place over its pre-activation */
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.aux = addr(0x600000000ull);
    d.bias = addr(0x600000000ull + 16); /* the bias grad written into aux */
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    /* BGRADB writes n bias values */
    d = base_desc();
    d.epilogue = TX_GEMM_EPI_BGRADB;
    d.bias = addr(0x200000000ull + 8); /* inside B */
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.bias = addr(0x500000000ull);
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    /* FP8: a scale read from inside D; amax written inside D (outputs
     * only) or inside A */
    d = base_desc();
    d.a_type = d.b_type = E4;
    d.d_type = BF16;
    d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_TENSOR;
    d.a_scale_inv = addr(0x700000000ull);
    d.b_scale_inv = addr(0x700000010ull);
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.b_scale_inv = addr(0x300000000ull + 64);
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.b_scale_inv = addr(0x700000010ull);
    d.amax_d = (float *)addr(0x300000000ull + 32);
    assert_true(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    d.amax_d = (float *)addr(0x100000000ull + 32);
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, NULL));
    /* extents that overflow the address space count as overlapping */
    d = base_desc();
    d.ldd = INT64_MAX / 2;
    assert_false(tx_gemm_tune_repeatable(&d, PA, PB, NULL, PD, &why));
    assert_non_null(why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_fields), cmocka_unit_test(test_cache),
        cmocka_unit_test(test_env),        cmocka_unit_test(test_env_rounds),
        cmocka_unit_test(test_reps),
        cmocka_unit_test(test_pick),       cmocka_unit_test(test_repeatable),
        cmocka_unit_test(test_candidates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
