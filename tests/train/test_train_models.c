/* test_train_models.c - training the PyTorch-exported models/ through the
 * public trainer API against PyTorch's own numbers:
 *   - one step at lr 0 reproduces models/<m>/expected/grads.npz (the grads of
 *     F.mse_loss(model(x[0:2]), target[0:2]) for every parameter and x);
 *   - 200 AdamW steps (lr 1e-3, betas 0.9/0.999, eps 1e-8, wd 0.01, step s on
 *     samples 2*(s%4), 2*(s%4)+1) follow expected/adamw_loss.npy;
 *   - --save writes a model whose initializers are the trained ones.
 * The fixtures are committed (models/make_models.py made them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "tests/train/train_fixtures.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 2

static double step_on(teexec_trainer *tr, const teexec_dataset *d, int64_t start)
{
    teexec_tensor *x = rows_of(ds_find(d, "x"), start, BATCH);
    teexec_tensor *y = rows_of(ds_find(d, "target"), start, BATCH);
    const char *names[2] = {"x", "target"};
    const teexec_tensor *ts[2] = {x, y};
    double loss = NAN;
    ok(teexec_trainer_step(tr, 2, names, ts, &loss));
    teexec_tensor_destroy(x);
    teexec_tensor_destroy(y);
    return loss;
}

static double rel_l2(const float *a, const float *b, uint64_t n)
{
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-300));
}

static void check_grads(const char *model)
{
    teexec_model *m;
    teexec_dataset *data, *ref;
    ok(teexec_model_load_file(model_path(model, "model.onnx"), NULL, &m));
    ok(teexec_dataset_load_npz(model_path(model, "train.npz"), &data));
    ok(teexec_dataset_load_npz(model_path(model, "expected/grads.npz"), &ref));
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    step_on(tr, data, 0);
    /* every reference gradient exists and matches; every parameter has one */
    size_t n_params_ref = 0;
    for (size_t i = 0; i < teexec_dataset_count(ref); i++) {
        const char *name = teexec_dataset_name(ref, i);
        const teexec_tensor *want = teexec_dataset_tensor(ref, i);
        char gname[256];
        snprintf(gname, sizeof gname, "%s", name);
        size_t len = strlen(gname);
        bool input = len > 5 && !strcmp(gname + len - 5, ".grad");
        if (input) gname[len - 5] = 0;
        else n_params_ref++;
        teexec_tensor *got;
        ok(teexec_trainer_grad(tr, gname, &got));
        assert_int_equal(teexec_tensor_dtype(got), TEEXEC_DTYPE_FLOAT);
        assert_int_equal(teexec_tensor_rank(got), teexec_tensor_rank(want));
        assert_memory_equal(teexec_tensor_dims(got), teexec_tensor_dims(want),
                            sizeof(int64_t) * (size_t)teexec_tensor_rank(want));
        double e = rel_l2(teexec_tensor_data_const(got), teexec_tensor_data_const(want),
                          teexec_tensor_element_count(want));
        if (!(e < 1e-4)) fprintf(stderr, "%s: %s rel-L2 %g\n", model, name, e);
        assert_true(e < 1e-4);
        teexec_tensor_destroy(got);
    }
    assert_int_equal(teexec_trainer_param_count(tr), n_params_ref);
    teexec_trainer_destroy(tr);
    teexec_dataset_destroy(ref);
    teexec_dataset_destroy(data);
    teexec_model_destroy(m);
}

static void test_grads_mlp(void **state) { (void)state; check_grads("mlp"); }
static void test_grads_gpt2(void **state) { (void)state; check_grads("gpt2_block"); }

static void check_adamw(const char *model, double min_ratio)
{
    teexec_model *m;
    teexec_dataset *data;
    teexec_tensor *curve;
    ok(teexec_model_load_file(model_path(model, "model.onnx"), NULL, &m));
    ok(teexec_dataset_load_npz(model_path(model, "train.npz"), &data));
    ok(teexec_tensor_load_file(model_path(model, "expected/adamw_loss.npy"), &curve));
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 1e-3;
    o.weight_decay = 0.01;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    const float *want = teexec_tensor_data_const(curve);
    uint64_t steps = teexec_tensor_element_count(curve);
    assert_int_equal(steps, 200);
    double first = 0, last = 0, worst = 0;
    for (uint64_t s = 0; s < steps; s++) {
        double l = step_on(tr, data, (int64_t)(BATCH * (s % 4)));
        double rel = fabs(l - want[s]) / fabs((double)want[s]);
        if (rel > worst) worst = rel;
        if (s == 0) first = l;
        last = l;
    }
    fprintf(stderr, "%s: AdamW loss %g -> %g (%.1fx), worst rel diff to PyTorch %.3g\n", model,
            first, last, first / last, worst);
    assert_true(worst < 1e-3);
    assert_true(first / last >= min_ratio);

    /* save: the written model carries the trained initializers */
    char dir[] = "/tmp/teexec_train_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[256];
    snprintf(out, sizeof out, "%s/trained.onnx", dir);
    ok(teexec_trainer_save_model(tr, out));
    teexec_model *m2;
    ok(teexec_model_load_file(out, NULL, &m2));
    teexec_train_options o2;
    teexec_train_options_init(&o2);
    teexec_trainer *tr2;
    ok(teexec_trainer_create(m2, &o2, &tr2));
    assert_int_equal(teexec_trainer_param_count(tr2), teexec_trainer_param_count(tr));
    for (size_t i = 0; i < teexec_trainer_param_count(tr); i++) {
        const char *name = teexec_trainer_param_name(tr, i);
        teexec_tensor *a, *b;
        ok(teexec_trainer_param(tr, name, &a));
        ok(teexec_trainer_param(tr2, name, &b));
        assert_int_equal(teexec_tensor_byte_size(a), teexec_tensor_byte_size(b));
        assert_memory_equal(teexec_tensor_data_const(a), teexec_tensor_data_const(b),
                            teexec_tensor_byte_size(a));
        teexec_tensor_destroy(a);
        teexec_tensor_destroy(b);
    }
    /* and they did move away from the original weights */
    teexec_tensor *p0, *p1;
    ok(teexec_trainer_param(tr, teexec_trainer_param_name(tr, 0), &p1));
    teexec_trainer *fresh;
    ok(teexec_trainer_create(m, &o2, &fresh));
    ok(teexec_trainer_param(fresh, teexec_trainer_param_name(tr, 0), &p0));
    assert_memory_not_equal(teexec_tensor_data_const(p0), teexec_tensor_data_const(p1),
                            teexec_tensor_byte_size(p0));
    teexec_tensor_destroy(p0);
    teexec_tensor_destroy(p1);
    teexec_trainer_destroy(fresh);
    teexec_trainer_destroy(tr2);
    teexec_model_destroy(m2);
    unlink(out);
    rmdir(dir);

    teexec_trainer_destroy(tr);
    teexec_tensor_destroy(curve);
    teexec_dataset_destroy(data);
    teexec_model_destroy(m);
}

static void test_adamw_mlp(void **state) { (void)state; check_adamw("mlp", 10.0); }
static void test_adamw_gpt2(void **state) { (void)state; check_adamw("gpt2_block", 10.0); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grads_mlp),
        cmocka_unit_test(test_grads_gpt2),
        cmocka_unit_test(test_adamw_mlp),
        cmocka_unit_test(test_adamw_gpt2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
