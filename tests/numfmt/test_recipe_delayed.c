/* Tests for exec/recipe_delayed: amax history roll and scale update. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/recipe_delayed.h"

#include <float.h>
#include <math.h>

static const teexec_dtype fmts2[2] = {TEEXEC_DTYPE_FLOAT8E4M3FN, TEEXEC_DTYPE_FLOAT8E5M2};

static void first_step_and_zero_amax(void **state)
{
    (void)state;
    tx_delayed_state st;
    assert_null(tx_delayed_init(&st, 4, 2, 0, TX_AMAX_MAX, fmts2));
    assert_true(tx_delayed_scale(&st, 0) == 1.0f && tx_delayed_scale(&st, 1) == 1.0f);
    tx_delayed_record_amax(&st, 0, 2.0f);
    tx_delayed_record_amax(&st, 0, 1.0f); /* max into slot 0 */
    tx_delayed_update(&st, NULL);
    assert_true(tx_delayed_scale(&st, 0) == 224.0f);
    assert_true(tx_delayed_scale(&st, 1) == 1.0f); /* amax 0: unchanged */
    for (uint32_t j = 0; j < 4; j++) assert_true(st.history[j * 2 + 1] == 0.0f); /* no roll */
    assert_true(st.history[0] == 0.0f && st.history[3 * 2] == 2.0f);
    tx_delayed_record_amax(&st, 1, 57344.0f / 4.0f);
    tx_delayed_update(&st, NULL);
    assert_true(tx_delayed_scale(&st, 1) == 4.0f);
    assert_true(tx_delayed_scale(&st, 0) == 224.0f); /* q0 saw 0 this step */
    tx_delayed_free(&st);
}

/* The evicted slot still counts: with L = 4, an amax stays in the max for
 * four updates. */
static void history_window(void **state)
{
    (void)state;
    tx_delayed_state st;
    assert_null(tx_delayed_init(&st, 4, 1, 0, TX_AMAX_MAX, fmts2));
    const float amax[6] = {2.0f, 8.0f, 1.0f, 0.5f, 0.25f, 0.25f};
    const float want[6] = {224.0f, 56.0f, 56.0f, 56.0f, 56.0f, 448.0f};
    for (int t = 0; t < 6; t++) {
        tx_delayed_record_amax(&st, 0, amax[t]);
        tx_delayed_update(&st, NULL);
        if (tx_delayed_scale(&st, 0) != want[t])
            fail_msg("step %d: scale %g, want %g", t, (double)tx_delayed_scale(&st, 0), (double)want[t]);
    }
    tx_delayed_free(&st);
}

static void margin_algo_inf(void **state)
{
    (void)state;
    tx_delayed_state st;
    assert_null(tx_delayed_init(&st, 3, 1, 2, TX_AMAX_MOST_RECENT, fmts2));
    tx_delayed_record_amax(&st, 0, 8.0f);
    tx_delayed_update(&st, NULL);
    assert_true(tx_delayed_scale(&st, 0) == 14.0f); /* 448 / 4 / 8 */
    tx_delayed_record_amax(&st, 0, 1.0f);
    tx_delayed_update(&st, NULL);
    assert_true(tx_delayed_scale(&st, 0) == 112.0f); /* most recent only */
    tx_delayed_record_amax(&st, 0, INFINITY);
    tx_delayed_update(&st, NULL);
    assert_true(tx_delayed_scale(&st, 0) == 112.0f); /* Inf amax: keep */
    tx_delayed_record_amax(&st, 0, 1e-45f);
    tx_delayed_update(&st, NULL);
    assert_true(tx_delayed_scale(&st, 0) == FLT_MAX); /* 112 / 1e-45 overflows */
    /* a reduced amax replaces slot 0 when non-zero */
    const float red[1] = {448.0f};
    tx_delayed_record_amax(&st, 0, 3.0f);
    tx_delayed_update(&st, red);
    assert_true(tx_delayed_scale(&st, 0) == 0.25f);
    tx_delayed_free(&st);
    assert_int_equal(tx_amax_algo_from_name("most_recent"), TX_AMAX_MOST_RECENT);
    assert_int_equal(tx_amax_algo_from_name("median"), -1);
    teexec_status *s = tx_delayed_init(&st, 0, 1, 0, TX_AMAX_MAX, fmts2);
    assert_int_equal(teexec_status_code(s), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(s);
    const teexec_dtype bad[1] = {TEEXEC_DTYPE_FLOAT4E2M1};
    s = tx_delayed_init(&st, 2, 1, 0, TX_AMAX_MAX, bad);
    assert_int_equal(teexec_status_code(s), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(s);
}

/* Closed form: after each update with a non-zero amax, scale =
 * (fmt_max * 2^-margin) / max(last L non-zero amaxes). */
static void closed_form_random(void **state)
{
    (void)state;
    enum { L = 5, STEPS = 200 };
    for (int margin = 0; margin <= 3; margin++) {
        tx_delayed_state st;
        assert_null(tx_delayed_init(&st, L, 2, margin, TX_AMAX_MAX, fmts2));
        float seen[2][STEPS];
        int nseen[2] = {0, 0};
        uint32_t r = 12345u + (uint32_t)margin;
        for (int t = 0; t < STEPS; t++) {
            float a[2];
            for (int i = 0; i < 2; i++) {
                r = r * 1664525u + 1013904223u;
                a[i] = (r >> 28) == 0 ? 0.0f : ldexpf((float)(r >> 8) / 16777216.0f + 0.5f, (int)(r % 20) - 10);
                tx_delayed_record_amax(&st, (uint32_t)i, a[i]);
            }
            tx_delayed_update(&st, NULL);
            for (int i = 0; i < 2; i++) {
                if (a[i] == 0.0f) continue;
                seen[i][nseen[i]++] = a[i];
                float m = 0.0f;
                for (int j = nseen[i] - 1; j >= 0 && j >= nseen[i] - L; j--) m = fmaxf(m, seen[i][j]);
                float fmax = i == 0 ? 448.0f : 57344.0f;
                float want = (fmax / m) / ldexpf(1.0f, margin);
                if (tx_delayed_scale(&st, (uint32_t)i) != want)
                    fail_msg("margin %d step %d q%d: %g vs %g", margin, t, i,
                             (double)tx_delayed_scale(&st, (uint32_t)i), (double)want);
            }
        }
        tx_delayed_free(&st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_step_and_zero_amax),
        cmocka_unit_test(history_window),
        cmocka_unit_test(margin_algo_inf),
        cmocka_unit_test(closed_form_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
