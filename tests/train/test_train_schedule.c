/* test_train_schedule.c - the trainer's learning-rate schedule and gradient
 * clipping (exec/train_schedule.h, teexec_train_options):
 *  - tx_train_lr_at: linear warmup, nanoGPT's cosine to min_lr, min_lr held
 *    after the decay, lr without a schedule; the options' checks;
 *  - tx_train_clip_coef: PyTorch's min(1, max / (norm + 1e-6));
 *  - a CPU trainer with SGD (no momentum, no decay) moves every parameter
 *    by exactly lr_at(step) * coef * g, where g is what teexec_trainer_grad
 *    returns (the gradient before clipping) and coef comes from the norm
 *    over ALL parameters' gradients, in FP64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "exec/train_schedule.h"
#include "../import/model_builder.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static void refused(teexec_status *st, const char *needle)
{
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    if (!strstr(teexec_status_message(st), needle)) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", teexec_status_message(st), needle);
        fail();
    }
    teexec_status_destroy(st);
}

static void test_lr_schedule(void **state)
{
    (void)state;
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0.5;
    /* no schedule: lr at every step */
    assert_true(tx_train_lr_at(&o, 0) == 0.5);
    assert_true(tx_train_lr_at(&o, 1000) == 0.5);
    /* warmup of 4: 1/4, 2/4, 3/4, 4/4 of lr (all exact in binary) */
    o.warmup_steps = 4;
    assert_true(tx_train_lr_at(&o, 0) == 0.125);
    assert_true(tx_train_lr_at(&o, 2) == 0.375);
    assert_true(tx_train_lr_at(&o, 3) == 0.5);
    assert_true(tx_train_lr_at(&o, 4) == 0.5);
    /* cosine from lr at the end of the warmup to min_lr at decay_steps */
    o.decay_steps = 12;
    o.min_lr = 0.1;
    assert_true(tx_train_lr_at(&o, 4) == 0.5);
    assert_true(fabs(tx_train_lr_at(&o, 8) - 0.3) < 1e-15); /* half way: the mean */
    assert_true(fabs(tx_train_lr_at(&o, 6) - (0.1 + 0.4 * 0.5 * (1.0 + cos(M_PI / 4)))) < 1e-15);
    assert_true(tx_train_lr_at(&o, 12) == 0.1);
    assert_true(tx_train_lr_at(&o, 99) == 0.1);
    assert_true(tx_train_lr_at(&o, 3) == 0.5); /* the warmup still rules its steps */
    ok(tx_train_schedule_check(&o));
}

static void test_schedule_refusals(void **state)
{
    (void)state;
    teexec_train_options o;
    teexec_train_options_init(&o);
    ok(tx_train_schedule_check(&o));
    o.warmup_steps = -1;
    refused(tx_train_schedule_check(&o), "warmup_steps");
    teexec_train_options_init(&o);
    o.warmup_steps = 10;
    o.decay_steps = 10;
    refused(tx_train_schedule_check(&o), "past the warmup");
    teexec_train_options_init(&o);
    o.decay_steps = 10;
    o.min_lr = 2 * o.lr;
    refused(tx_train_schedule_check(&o), "min_lr");
    teexec_train_options_init(&o);
    o.min_lr = 1e-5;
    refused(tx_train_schedule_check(&o), "needs decay_steps");
    teexec_train_options_init(&o);
    o.clip_grad_norm = -1.0;
    refused(tx_train_schedule_check(&o), "clip_grad_norm");
    o.clip_grad_norm = INFINITY;
    refused(tx_train_schedule_check(&o), "clip_grad_norm");
}

static void test_clip_coef(void **state)
{
    (void)state;
    assert_true(tx_train_clip_coef(0.0, 123.0) == 1.0);   /* off */
    assert_true(tx_train_clip_coef(1.0, 0.5) == 1.0);     /* under the bound */
    assert_true(tx_train_clip_coef(1.0, 4.0) == 1.0 / (4.0 + 1e-6));
    assert_true(isnan(tx_train_clip_coef(1.0, INFINITY)));
    assert_true(isnan(tx_train_clip_coef(1.0, NAN)));
}

/* y = x * w + b, x [2,3], w and b [3]. */
static teexec_model *affine_model(void)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("affine");
    m->graph = g;
    mb_input(g, "x", F32, "2,3");
    mb_output(g, "y", F32, "2,3");
    static const int64_t d3[1] = {3};
    const float w[3] = {0.5f, -1.0f, 2.0f}, b[3] = {0.25f, 0.0f, -0.5f};
    mb_init(g, "w", d3, 1);
    memcpy(g->initializer[g->n_initializer - 1]->raw_data.data, w, sizeof w);
    mb_init(g, "b", d3, 1);
    memcpy(g->initializer[g->n_initializer - 1]->raw_data.data, b, sizeof b);
    mb_node(g, "mul", "Mul", NULL, "x,w", "xw");
    mb_node(g, "add", "Add", NULL, "xw,b", "y");
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_model *model;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &model));
    free(bytes);
    mb_free_all();
    return model;
}

static void read3(const teexec_trainer *t, bool grad, const char *name, double *out)
{
    teexec_tensor *v;
    ok(grad ? teexec_trainer_grad(t, name, &v) : teexec_trainer_param(t, name, &v));
    assert_int_equal(teexec_tensor_element_count(v), 3);
    const float *f = teexec_tensor_data_const(v);
    for (int i = 0; i < 3; i++) out[i] = f[i];
    teexec_tensor_destroy(v);
}

/* Steps an SGD trainer under (warmup, clip) and checks each step's move
 * against lr_at(step) * coef * g from the returned gradients. */
static void run_sgd(int64_t warmup, double clip, bool expect_clipped)
{
    teexec_model *model = affine_model();
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    o.weight_decay = 0.0;
    o.lr = 0.25;
    o.warmup_steps = warmup;
    o.clip_grad_norm = clip;
    teexec_trainer *t;
    ok(teexec_trainer_create(model, &o, &t));
    static const int64_t d23[2] = {2, 3};
    const float x[6] = {1.0f, 2.0f, -1.0f, 0.5f, -2.0f, 4.0f};
    const float y[6] = {3.0f, -1.0f, 2.0f, 0.0f, 1.0f, -4.0f};
    teexec_tensor *tx, *ty;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, d23, x, sizeof x, &tx));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, d23, y, sizeof y, &ty));
    const char *names[2] = {"x", "target"};
    const teexec_tensor *ts[2] = {tx, ty};
    bool clipped = false;
    for (int64_t s = 0; s < 3; s++) {
        double w0[3], b0[3], w1[3], b1[3], gw[3], gb[3];
        read3(t, false, "w", w0);
        read3(t, false, "b", b0);
        double loss;
        ok(teexec_trainer_step(t, 2, names, ts, &loss));
        read3(t, false, "w", w1);
        read3(t, false, "b", b1);
        read3(t, true, "w", gw);
        read3(t, true, "b", gb);
        double ss = 0.0;
        for (int i = 0; i < 3; i++) ss += gw[i] * gw[i] + gb[i] * gb[i];
        double coef = tx_train_clip_coef(clip, sqrt(ss));
        if (coef < 1.0) clipped = true;
        double lr = tx_train_lr_at(&o, s);
        for (int i = 0; i < 3; i++) {
            /* the parameters are float32: one rounding of the new value;
             * the returned gradient is float32 too (rounded from FP64) */
            double ew = w0[i] - lr * coef * gw[i], eb = b0[i] - lr * coef * gb[i];
            double tol_w = 2e-7 * (fabs(w0[i]) + fabs(lr * coef * gw[i])) + 1e-12;
            double tol_b = 2e-7 * (fabs(b0[i]) + fabs(lr * coef * gb[i])) + 1e-12;
            if (fabs(w1[i] - ew) > tol_w || fabs(b1[i] - eb) > tol_b) {
                fprintf(stderr, "step %lld elem %d: w %.9g (want %.9g) b %.9g (want %.9g)\n",
                        (long long)s, i, w1[i], ew, b1[i], eb);
                fail();
            }
        }
    }
    assert_int_equal(clipped, expect_clipped);
    teexec_tensor_destroy(tx);
    teexec_tensor_destroy(ty);
    teexec_trainer_destroy(t);
    teexec_model_destroy(model);
}

static void test_trainer_warmup(void **state)
{
    (void)state;
    run_sgd(4, 0.0, false);
}

static void test_trainer_clip(void **state)
{
    (void)state;
    run_sgd(0, 0.05, true);     /* far under this model's gradient norm */
    run_sgd(2, 0.05, true);     /* both at once */
    run_sgd(0, 1e6, false);     /* a bound never reached changes nothing */
}

static void test_trainer_refuses_bad_schedule(void **state)
{
    (void)state;
    teexec_model *model = affine_model();
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.warmup_steps = 5;
    o.decay_steps = 3;
    teexec_trainer *t = NULL;
    refused(teexec_trainer_create(model, &o, &t), "decay_steps");
    assert_null(t);
    teexec_model_destroy(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_schedule_refusals),
        cmocka_unit_test(test_clip_coef),
        cmocka_unit_test(test_trainer_warmup),
        cmocka_unit_test(test_trainer_clip),
        cmocka_unit_test(test_trainer_refuses_bad_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
