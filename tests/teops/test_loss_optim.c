/*
 * test_loss_optim.c - CPU training pieces against closed forms: MSE and
 * softmax cross-entropy values and gradients (plus finite differences),
 * ignore index and bad labels; SGD with momentum, Nesterov and AdamW
 * trajectories under constant gradients; FP32 master weights for bf16.
 */
#include "te_case.h"

#include "kernels/cpu/loss.h"
#include "kernels/cpu/optim.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#define D TEEXEC_DTYPE_DOUBLE

static void fill(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims, const double *v)
{
    assert_null(tx_tensor_alloc(t, dt, rank, dims));
    for (uint64_t i = 0; i < t->numel; i++) tc_set(t, i, v[i]);
}

static void mse_closed_form(void **state)
{
    (void)state;
    tx_tensor y = {0}, t = {0}, g = {0};
    fill(&y, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    fill(&t, TEEXEC_DTYPE_BFLOAT16, 1, (int64_t[]){3}, (double[]){0, 2, 5});
    assert_null(tx_tensor_alloc(&g, D, 1, (int64_t[]){3}));
    double loss;
    assert_null(tx_loss_mse(&y, &t, TX_LOSS_MEAN, &loss, &g));
    assert_true(fabs(loss - 5.0 / 3.0) < 1e-15);
    const double want[3] = {2.0 / 3.0, 0.0, -4.0 / 3.0};
    for (int i = 0; i < 3; i++) assert_true(fabs(tc_get(&g, (uint64_t)i) - want[i]) < 1e-15);
    assert_null(tx_loss_mse(&y, &t, TX_LOSS_SUM, &loss, NULL));
    assert_true(loss == 5.0);
    tx_tensor bad = {0};
    fill(&bad, D, 1, (int64_t[]){2}, (double[]){0, 0});
    teexec_status *st = tx_loss_mse(&y, &bad, TX_LOSS_MEAN, &loss, NULL);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "shape"));
    teexec_status_destroy(st);
    tx_tensor_release(&y);
    tx_tensor_release(&t);
    tx_tensor_release(&g);
    tx_tensor_release(&bad);
}

static void cross_entropy_closed_form(void **state)
{
    (void)state;
    tx_tensor z = {0}, lab = {0}, g = {0};
    /* rows: [0, 0] label 1 -> ln 2; [ln 3, 0] label 0 -> ln(4/3); row 2 ignored */
    fill(&z, D, 2, (int64_t[]){3, 2}, (double[]){0, 0, log(3.0), 0, 7, -7});
    assert_null(tx_tensor_alloc(&lab, TEEXEC_DTYPE_INT64, 1, (int64_t[]){3}));
    int64_t labels[3] = {1, 0, -100};
    memcpy(lab.data, labels, sizeof labels);
    assert_null(tx_tensor_alloc(&g, D, 2, (int64_t[]){3, 2}));
    double loss;
    uint64_t counted;
    assert_null(tx_loss_cross_entropy(&z, &lab, -100, TX_LOSS_MEAN, &loss, &g, &counted));
    assert_int_equal(counted, 2);
    assert_true(fabs(loss - log(8.0 / 3.0) / 2.0) < 1e-15);
    const double want[6] = {0.25, -0.25, -0.125, 0.125, 0, 0};
    for (int i = 0; i < 6; i++) assert_true(fabs(tc_get(&g, (uint64_t)i) - want[i]) < 1e-15);

    /* a label outside the classes (and not ignored) is an error naming it */
    ((int64_t *)lab.data)[2] = 2;
    teexec_status *st = tx_loss_cross_entropy(&z, &lab, -100, TX_LOSS_MEAN, &loss, NULL, NULL);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "label 2 at position 2"));
    teexec_status_destroy(st);
    /* everything ignored: NaN like PyTorch, zero gradient */
    for (int i = 0; i < 3; i++) ((int64_t *)lab.data)[i] = 5;
    assert_null(tx_loss_cross_entropy(&z, &lab, 5, TX_LOSS_MEAN, &loss, &g, &counted));
    assert_true(isnan(loss) && counted == 0);
    for (int i = 0; i < 6; i++) assert_true(tc_get(&g, (uint64_t)i) == 0.0);
    tx_tensor_release(&z);
    tx_tensor_release(&lab);
    tx_tensor_release(&g);
}

static void cross_entropy_gradient_matches_differences(void **state)
{
    (void)state;
    tx_tensor z = {0}, lab = {0}, g = {0};
    tc_fill(&z, D, 3, (int64_t[]){2, 3, 5}, 42, -3, 3);
    assert_null(tx_tensor_alloc(&lab, TEEXEC_DTYPE_INT32, 2, (int64_t[]){2, 3}));
    int32_t labels[6] = {4, 0, -1, 2, 3, 1};
    memcpy(lab.data, labels, sizeof labels);
    assert_null(tx_tensor_alloc(&g, D, 3, (int64_t[]){2, 3, 5}));
    double loss, lp, lm;
    assert_null(tx_loss_cross_entropy(&z, &lab, -1, TX_LOSS_MEAN, &loss, &g, NULL));
    double num = 0, den = 0;
    for (uint64_t i = 0; i < z.numel; i++) {
        double v = tc_get(&z, i);
        tc_set(&z, i, v + 1e-6);
        assert_null(tx_loss_cross_entropy(&z, &lab, -1, TX_LOSS_MEAN, &lp, NULL, NULL));
        tc_set(&z, i, v - 1e-6);
        assert_null(tx_loss_cross_entropy(&z, &lab, -1, TX_LOSS_MEAN, &lm, NULL, NULL));
        tc_set(&z, i, v);
        double fd = (lp - lm) / 2e-6, an = tc_get(&g, i);
        num += (fd - an) * (fd - an);
        den += fd * fd;
    }
    assert_true(sqrt(num) / sqrt(den) < 1e-6);
    tx_tensor_release(&z);
    tx_tensor_release(&lab);
    tx_tensor_release(&g);
}

/* p_T under a constant gradient g: SGD momentum, buf_1 = g, buf_t = μ buf + g. */
static void sgd_momentum_closed_form(void **state)
{
    (void)state;
    tx_optim_config c = tx_optim_default(TX_OPTIM_SGD, 0.1);
    c.momentum = 0.9;
    tx_tensor p = {0}, g = {0};
    fill(&p, D, 1, (int64_t[]){2}, (double[]){1.0, -2.0});
    fill(&g, D, 1, (int64_t[]){2}, (double[]){0.5, -0.25});
    tx_optim_slot s;
    assert_null(tx_optim_slot_init(&s, &c, &p));
    for (int t = 0; t < 3; t++) assert_null(tx_optim_step(&s, &c, &p, &g));
    /* Σ_{t=1..3} (1 - μ^t)/(1 - μ) = 1 + 1.9 + 2.71 = 5.61 */
    assert_true(fabs(tc_get(&p, 0) - (1.0 - 0.1 * 0.5 * 5.61)) < 1e-14);
    assert_true(fabs(tc_get(&p, 1) - (-2.0 + 0.1 * 0.25 * 5.61)) < 1e-14);
    tx_optim_slot_release(&s);

    /* Nesterov with L2 weight decay, one step by hand: d = g + wd·p; buf = d; d += μ·buf */
    c.nesterov = true;
    c.weight_decay = 0.1;
    tx_tensor_release(&p);
    fill(&p, D, 1, (int64_t[]){2}, (double[]){1.0, -2.0});
    assert_null(tx_optim_slot_init(&s, &c, &p));
    assert_null(tx_optim_step(&s, &c, &p, &g));
    assert_true(fabs(tc_get(&p, 0) - (1.0 - 0.1 * 1.9 * (0.5 + 0.1))) < 1e-14);
    tx_optim_slot_release(&s);
    /* bad config */
    c.dampening = 0.5;
    teexec_status *st = tx_optim_slot_init(&s, &c, &p);
    assert_non_null(st);
    teexec_status_destroy(st);
    tx_tensor_release(&p);
    tx_tensor_release(&g);
}

/* AdamW with a constant gradient: m̂ = g and v̂ = g², so each step is
 * p <- p·(1 - lr·wd) - lr·g/(|g| + eps). */
static void adamw_closed_form(void **state)
{
    (void)state;
    tx_optim_config c = tx_optim_default(TX_OPTIM_ADAMW, 0.01);
    c.weight_decay = 0.1;
    c.eps = 1e-3;
    tx_tensor p = {0}, g = {0};
    fill(&p, D, 1, (int64_t[]){3}, (double[]){1.0, -0.5, 0.25});
    fill(&g, D, 1, (int64_t[]){3}, (double[]){0.2, -0.01, 0.0});
    double want[3] = {1.0, -0.5, 0.25};
    tx_optim_slot s;
    assert_null(tx_optim_slot_init(&s, &c, &p));
    for (int t = 0; t < 5; t++) {
        assert_null(tx_optim_step(&s, &c, &p, &g));
        for (int i = 0; i < 3; i++) {
            double gi = tc_get(&g, (uint64_t)i);
            want[i] = want[i] * (1 - 0.01 * 0.1) - 0.01 * gi / (fabs(gi) + 1e-3);
        }
    }
    for (int i = 0; i < 3; i++)
        if (fabs(tc_get(&p, (uint64_t)i) - want[i]) > 1e-13)
            fail_msg("AdamW p[%d] = %.17g, closed form %.17g", i, tc_get(&p, (uint64_t)i), want[i]);
    assert_int_equal(s.step, 5);
    tx_optim_slot_release(&s);
    tx_tensor_release(&p);
    tx_tensor_release(&g);
}

/* 100 SGD steps of 1e-4 on a bf16 1.0: each alone rounds away in bf16, the
 * FP32 master keeps them. */
static void bf16_master_weights(void **state)
{
    (void)state;
    tx_optim_config c = tx_optim_default(TX_OPTIM_SGD, 1e-4);
    tx_tensor p = {0}, g = {0};
    fill(&p, TEEXEC_DTYPE_BFLOAT16, 1, (int64_t[]){1}, (double[]){1.0});
    fill(&g, TEEXEC_DTYPE_BFLOAT16, 1, (int64_t[]){1}, (double[]){1.0});
    tx_optim_slot s;
    assert_null(tx_optim_slot_init(&s, &c, &p));
    assert_int_equal(s.master.dtype, TEEXEC_DTYPE_FLOAT);
    assert_null(tx_optim_step(&s, &c, &p, &g));
    assert_true(tc_get(&p, 0) == 1.0); /* 0.9999 rounds to 1 in bf16 */
    for (int t = 1; t < 100; t++) assert_null(tx_optim_step(&s, &c, &p, &g));
    assert_true(fabs(tc_get(&s.master, 0) - 0.99) < 1e-5); /* 100 fp32 roundings */
    assert_true(tc_get(&p, 0) == 0.98828125); /* bf16 nearest to 0.99 */
    tx_optim_slot_release(&s);
    tx_tensor_release(&p);
    tx_tensor_release(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mse_closed_form),
        cmocka_unit_test(cross_entropy_closed_form),
        cmocka_unit_test(cross_entropy_gradient_matches_differences),
        cmocka_unit_test(sgd_momentum_closed_form),
        cmocka_unit_test(adamw_closed_form),
        cmocka_unit_test(bf16_master_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
