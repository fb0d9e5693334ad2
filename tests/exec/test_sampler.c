/* Tests for exec/sampler.c: the counter-based RNG (pure in its three
 * words, uniform enough), greedy ties, temperature, top-k and top-p on
 * small inputs whose kept sets and probabilities are known exactly, draws
 * by the inverse CDF, and the refusals (NaN, +inf, all -inf, bad options). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/sampler.h"
#include "teexec/teexec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static tx_sampling sampling(double t, uint32_t k, double p)
{
    tx_sampling s = {.temperature = t, .top_k = k, .top_p = p, .seed = 7};
    return s;
}

static void expect_code(teexec_status *st, teexec_code code)
{
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), code);
    teexec_status_destroy(st);
}

static void rng_is_pure_and_spread(void **state)
{
    (void)state;
    /* the same words give the same bits; changing any one word changes them */
    assert_true(tx_rng_bits(1, 2, 3) == tx_rng_bits(1, 2, 3));
    assert_true(tx_rng_bits(1, 2, 3) != tx_rng_bits(2, 2, 3));
    assert_true(tx_rng_bits(1, 2, 3) != tx_rng_bits(1, 3, 3));
    assert_true(tx_rng_bits(1, 2, 3) != tx_rng_bits(1, 2, 4));
    /* swapping stream and counter is not the same draw */
    assert_true(tx_rng_bits(0, 5, 9) != tx_rng_bits(0, 9, 5));
    /* the values are part of the reproducibility promise: pinned */
    assert_true(tx_rng_bits(0, 0, 0) == 0xd9dfee5d0039b834ull);
    assert_true(tx_rng_bits(1, 2, 3) == 0x5ddff0791e77cf58ull);
    double sum = 0, lo = 1, hi = 0;
    int buckets[10] = {0};
    for (uint64_t c = 0; c < 20000; c++) {
        double u = tx_rng_uniform(42, c % 7, c);
        assert_true(u >= 0 && u < 1);
        sum += u;
        lo = fmin(lo, u);
        hi = fmax(hi, u);
        buckets[(int)(u * 10)]++;
    }
    assert_true(fabs(sum / 20000 - 0.5) < 0.01);
    assert_true(lo < 0.001 && hi > 0.999);
    for (int b = 0; b < 10; b++) assert_true(buckets[b] > 1800 && buckets[b] < 2200);
}

static void greedy_takes_lowest_id_on_ties(void **state)
{
    (void)state;
    tx_sampler_ws ws = {0};
    tx_sampling s = sampling(0, 0, 1);
    float l[] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    int64_t id = -1;
    for (double u = 0; u < 1; u += 0.25) {
        assert_null(tx_sample_with(&s, l, 5, u, &ws, &id));
        assert_int_equal(id, 1);
    }
    /* top_k = 1 is greedy at any temperature */
    s = sampling(5.0, 1, 1);
    assert_null(tx_sample_with(&s, l, 5, 0.99, &ws, &id));
    assert_int_equal(id, 1);
    /* -inf tokens are skipped, not refused */
    float m[] = {-INFINITY, -1.0f, -INFINITY};
    s = sampling(0, 0, 1);
    assert_null(tx_sample_with(&s, m, 3, 0.5, &ws, &id));
    assert_int_equal(id, 1);
    tx_sampler_ws_free(&ws);
}

/* logits = log(probs): at temperature 1 the distribution is probs itself. */
static void temperature_one_is_softmax(void **state)
{
    (void)state;
    tx_sampler_ws ws = {0};
    float l[] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    double p[4];
    tx_sampling s = sampling(1.0, 0, 1);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    assert_float_equal(p[0], 0.5, 1e-6);
    assert_float_equal(p[1], 0.3, 1e-6);
    assert_float_equal(p[2], 0.15, 1e-6);
    assert_float_equal(p[3], 0.05, 1e-6);
    /* temperature 2 on log-probs: probs^(1/2), renormalized */
    s = sampling(2.0, 0, 1);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    double r[] = {sqrt(0.5), sqrt(0.3), sqrt(0.15), sqrt(0.05)}, z = r[0] + r[1] + r[2] + r[3];
    for (int i = 0; i < 4; i++) assert_float_equal(p[i], r[i] / z, 1e-6);
    tx_sampler_ws_free(&ws);
}

static void top_k_keeps_the_k_largest(void **state)
{
    (void)state;
    tx_sampler_ws ws = {0};
    /* in token order: 0.15, 0.5, 0.05, 0.3 */
    float l[] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    double p[4];
    tx_sampling s = sampling(1.0, 2, 1);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    assert_float_equal(p[1], 0.5 / 0.8, 1e-6);
    assert_float_equal(p[3], 0.3 / 0.8, 1e-6);
    assert_true(p[0] == 0 && p[2] == 0);
    s = sampling(1.0, 3, 1);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    assert_float_equal(p[0], 0.15 / 0.95, 1e-6);
    assert_true(p[2] == 0);
    /* k larger than the vocabulary keeps everything */
    s = sampling(1.0, 100, 1);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    assert_float_equal(p[2], 0.05, 1e-6);
    tx_sampler_ws_free(&ws);
}

static void top_p_keeps_the_smallest_prefix_reaching_p(void **state)
{
    (void)state;
    tx_sampler_ws ws = {0};
    float l[] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    double p[4];
    /* 0.5 < 0.7, so 0.3 is kept; 0.8 >= 0.7, so 0.15 is not */
    tx_sampling s = sampling(1.0, 0, 0.7);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    assert_float_equal(p[1], 0.625, 1e-6);
    assert_float_equal(p[3], 0.375, 1e-6);
    assert_true(p[0] == 0 && p[2] == 0);
    /* p below the largest probability keeps only the largest */
    s = sampling(1.0, 0, 0.4);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    assert_float_equal(p[1], 1.0, 0);
    /* top-k applies first: k = 3 renormalizes to 0.5/0.95 ...; p = 0.9 then
     * keeps 0.526 + 0.316 = 0.842 < 0.9, so all three */
    s = sampling(1.0, 3, 0.9);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    assert_float_equal(p[0], 0.15 / 0.95, 1e-6);
    assert_true(p[2] == 0);
    /* ... and p = 0.8 stops after two */
    s = sampling(1.0, 3, 0.8);
    assert_null(tx_sample_probs(&s, l, 4, &ws, p));
    assert_float_equal(p[1], 0.625, 1e-6);
    assert_true(p[0] == 0);
    tx_sampler_ws_free(&ws);
}

static void draw_follows_the_sorted_cdf(void **state)
{
    (void)state;
    tx_sampler_ws ws = {0};
    float l[] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    tx_sampling s = sampling(1.0, 0, 1);
    /* order: 1 (0.5), 3 (0.3), 0 (0.15), 2 (0.05) */
    struct { double u; int64_t id; } cases[] = {
        {0.0, 1}, {0.49, 1}, {0.51, 3}, {0.79, 3}, {0.81, 0}, {0.94, 0}, {0.96, 2}, {0.999999, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t id = -1;
        assert_null(tx_sample_with(&s, l, 4, cases[i].u, &ws, &id));
        assert_int_equal(id, cases[i].id);
    }
    /* seeded draws: frequencies match the distribution */
    int count[4] = {0};
    for (uint64_t c = 0; c < 20000; c++) {
        int64_t id = -1;
        assert_null(tx_sample(&s, l, 4, 0, c, &ws, &id));
        count[id]++;
    }
    assert_true(abs(count[1] - 10000) < 400);
    assert_true(abs(count[3] - 6000) < 400);
    assert_true(abs(count[0] - 3000) < 300);
    assert_true(abs(count[2] - 1000) < 200);
    /* the same (seed, stream, counter) gives the same token */
    int64_t a = -1, b = -2;
    assert_null(tx_sample(&s, l, 4, 3, 11, &ws, &a));
    assert_null(tx_sample(&s, l, 4, 3, 11, &ws, &b));
    assert_int_equal(a, b);
    tx_sampler_ws_free(&ws);
}

static void bad_logits_and_options_refused(void **state)
{
    (void)state;
    tx_sampler_ws ws = {0};
    int64_t id = 0;
    tx_sampling s = sampling(1.0, 0, 1);
    float nan_l[] = {0.0f, NAN};
    expect_code(tx_sample_with(&s, nan_l, 2, 0.5, &ws, &id), TEEXEC_ERR_INVALID_ARGUMENT);
    float inf_l[] = {INFINITY, 0.0f};
    expect_code(tx_sample_with(&s, inf_l, 2, 0.5, &ws, &id), TEEXEC_ERR_INVALID_ARGUMENT);
    float ninf[] = {-INFINITY, -INFINITY};
    expect_code(tx_sample_with(&s, ninf, 2, 0.5, &ws, &id), TEEXEC_ERR_INVALID_ARGUMENT);
    expect_code(tx_sample_with(&s, ninf, 0, 0.5, &ws, &id), TEEXEC_ERR_INVALID_ARGUMENT);
    s = sampling(-1.0, 0, 1);
    expect_code(tx_sampling_check(&s), TEEXEC_ERR_INVALID_ARGUMENT);
    s = sampling(1.0, 0, 0);
    expect_code(tx_sampling_check(&s), TEEXEC_ERR_INVALID_ARGUMENT);
    s = sampling(1.0, 0, 1.5);
    expect_code(tx_sampling_check(&s), TEEXEC_ERR_INVALID_ARGUMENT);
    s = sampling(INFINITY, 0, 1);
    expect_code(tx_sampling_check(&s), TEEXEC_ERR_INVALID_ARGUMENT);
    tx_sampler_ws_free(&ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rng_is_pure_and_spread),
        cmocka_unit_test(greedy_takes_lowest_id_on_ties),
        cmocka_unit_test(temperature_one_is_softmax),
        cmocka_unit_test(top_k_keeps_the_k_largest),
        cmocka_unit_test(top_p_keeps_the_smallest_prefix_reaching_p),
        cmocka_unit_test(draw_follows_the_sorted_cdf),
        cmocka_unit_test(bad_logits_and_options_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
