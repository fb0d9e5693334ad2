/*
 * test_te_grad.c - every te.ops op's backward against central finite
 * differences in FP64 (relative error < 1e-6), on the shared random cases:
 * main input, extra inputs that take gradients, parameters, and the
 * gradients flowing in through extra outputs.
 */
#include "te_cases.h"

#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void every_op_has_a_case(void **state)
{
    (void)state;
    bool seen[TX_TE_OP_COUNT] = {false};
    for (int i = 0; i < tc_case_count(); i++) {
        te_case c;
        tc_case_build(i, &c);
        seen[c.op] = true;
        tc_free(&c);
    }
    for (int op = 0; op < TX_TE_OP_COUNT; op++)
        if (!seen[op]) fail_msg("no gradient case for %s", tx_te_schema((tx_te_op_id)op)->name);
}

static void backward_matches_finite_differences(void **state)
{
    (void)state;
    for (int i = 0; i < tc_case_count(); i++) {
        te_case c;
        tc_case_build(i, &c);
        tc_gradcheck(&c, 1e-6);
        tc_free(&c);
    }
}

/* The check must be able to fail: a wrong backward (here: a dy scaled by 2
 * through ConstantScale's attribute changing between forward and backward)
 * is caught. */
static void gradcheck_detects_a_wrong_gradient(void **state)
{
    (void)state;
    te_case c;
    tc_init(&c, TX_TE_CONSTANT_SCALE);
    c.attrs[TX_TE_A_SCALE].f = 2.0;
    tc_fill(&c.in, TEEXEC_DTYPE_DOUBLE, 1, (int64_t[]){4}, 5, -1, 1);
    (void)tc_loss(&c);
    tx_tensor dy = {0}, dx = {0};
    assert_null(tx_tensor_alloc(&dy, TEEXEC_DTYPE_DOUBLE, 1, (int64_t[]){4}));
    assert_null(tx_tensor_alloc(&dx, TEEXEC_DTYPE_DOUBLE, 1, (int64_t[]){4}));
    for (int i = 0; i < 4; i++) tc_set(&dy, (uint64_t)i, c.wy[i]);
    tx_te_attr_value wrong = {.f = 3.0};
    tx_te_bwd_args ba = {TX_TE_CONSTANT_SCALE, &wrong, &dy, NULL, 0, NULL, 0, &dx, NULL, 0, NULL, 0, NULL};
    assert_null(tx_te_cpu_backward(&ba));
    for (int i = 0; i < 4; i++) {
        double v = tc_get(&c.in, (uint64_t)i);
        tc_set(&c.in, (uint64_t)i, v + 1e-6);
        double lp = tc_loss(&c);
        tc_set(&c.in, (uint64_t)i, v - 1e-6);
        double lm = tc_loss(&c);
        tc_set(&c.in, (uint64_t)i, v);
        double fd = (lp - lm) / 2e-6;
        assert_true(fabs(tc_get(&dx, (uint64_t)i) - fd) > 0.1 * fabs(fd));
    }
    tx_tensor_release(&dy);
    tx_tensor_release(&dx);
    tc_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_op_has_a_case),
        cmocka_unit_test(backward_matches_finite_differences),
        cmocka_unit_test(gradcheck_detects_a_wrong_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
