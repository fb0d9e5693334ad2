/* Tests for when a CPU session plans (issue 16): creating a session plans
 * its declared input shapes, so runs with them plan nothing; a new shape
 * plans once; past the bound (TX_MAX_PLANS) the plan made longest ago is
 * dropped whatever was used since (planner/plan_cache.h), and running its
 * shape again plans it anew. Plans are counted by the session's plan cache
 * (tx_session_plans_built). Model: tests/exec/data/add_relu.onnx, X [N, 3]. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/session_internal.h"
#include "teexec/teexec.h"

#include <stdio.h>
#include <stdlib.h>

static teexec_model *load(const char *name)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/exec/data/%s", root ? root : ".", name);
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) fail_msg("loading %s: %s", path, teexec_status_message(st));
    return m;
}

/* Runs the session on X = zeros [n, 3] and checks the output's rows. */
static void run_rows(teexec_session *s, int64_t n)
{
    static float zeros[3 * 64];
    assert_true(n <= 64);
    int64_t dims[] = {n, 3};
    teexec_tensor *x = NULL;
    assert_null(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, dims, zeros,
                                          (size_t)n * 3 * sizeof(float), &x));
    const char *names[] = {"X"};
    teexec_tensor *y = NULL;
    teexec_status *st = teexec_session_run(s, 1, names, (const teexec_tensor *const *)&x, 1, NULL, &y);
    if (st) fail_msg("run with N = %lld: %s", (long long)n, teexec_status_message(st));
    assert_int_equal(teexec_tensor_dims(y)[0], n);
    /* Relu(0 + B), B = {1, -2, 0.5} */
    const float *v = teexec_tensor_data_const(y);
    assert_float_equal(v[0], 1.0f, 0);
    assert_float_equal(v[1], 0.0f, 0);
    assert_float_equal(v[2], 0.5f, 0);
    teexec_tensor_destroy(y);
    teexec_tensor_destroy(x);
}

static teexec_session *session_for_n(const teexec_model *m, int64_t n)
{
    teexec_session_options *o = NULL;
    assert_null(teexec_session_options_create(&o));
    assert_null(teexec_session_options_set_dim(o, "N", n));
    teexec_session *s = NULL;
    assert_null(teexec_session_create(m, o, &s));
    teexec_session_options_destroy(o);
    return s;
}

static void declared_shapes_planned_at_creation(void **state)
{
    (void)state;
    teexec_model *m = load("add_relu.onnx");
    teexec_session *s = session_for_n(m, 4);
    /* the declared shape (N = 4 from the options) is planned by create */
    assert_int_equal(tx_session_plans_built(s), 1);
    assert_int_equal(teexec_session_plan_count(s), 1);
    for (int i = 0; i < 5; i++) run_rows(s, 4);
    assert_int_equal(tx_session_plans_built(s), 1); /* the runs planned nothing */
    run_rows(s, 7);
    assert_int_equal(tx_session_plans_built(s), 2); /* a new shape: one plan */
    run_rows(s, 7);
    run_rows(s, 4);
    assert_int_equal(tx_session_plans_built(s), 2);
    assert_int_equal(teexec_session_plan_count(s), 2);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

static void oldest_plan_evicted_past_the_bound(void **state)
{
    (void)state;
    teexec_model *m = load("add_relu.onnx");
    teexec_session *s = session_for_n(m, 1); /* plan 1: N = 1 */
    run_rows(s, 2);                           /* plan 2: N = 2 */
    /* N = 3 .. 32 fill the cache (32 plans), N = 33 drops the oldest: N = 1 */
    for (int64_t n = 3; n <= (int64_t)TX_MAX_PLANS; n++) run_rows(s, n);
    assert_int_equal(tx_session_plans_built(s), TX_MAX_PLANS);
    assert_int_equal(teexec_session_plan_count(s), TX_MAX_PLANS);
    run_rows(s, 2); /* a hit: does not refresh N = 2's place */
    run_rows(s, (int64_t)TX_MAX_PLANS + 1);
    assert_int_equal(tx_session_plans_built(s), TX_MAX_PLANS + 1);
    assert_int_equal(teexec_session_plan_count(s), TX_MAX_PLANS);
    run_rows(s, 3); /* still cached */
    assert_int_equal(tx_session_plans_built(s), TX_MAX_PLANS + 1);
    run_rows(s, 1); /* N = 1 was dropped: planned again (dropping N = 2) */
    assert_int_equal(tx_session_plans_built(s), TX_MAX_PLANS + 2);
    run_rows(s, 2); /* N = 2, inserted before N = 3, went next */
    assert_int_equal(tx_session_plans_built(s), TX_MAX_PLANS + 3);
    run_rows(s, 1);
    assert_int_equal(tx_session_plans_built(s), TX_MAX_PLANS + 3);
    assert_int_equal(teexec_session_plan_count(s), TX_MAX_PLANS);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(declared_shapes_planned_at_creation),
        cmocka_unit_test(oldest_plan_evicted_past_the_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
