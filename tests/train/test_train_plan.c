/* test_train_plan.c - the CPU trainer runs its training fuser plan (issue 16):
 *  - recipe none: one SGD step's loss, every parameter's gradient and the
 *    updated parameters match the node-by-node trainer
 *    (tx_trainer_debug_node_by_node) within fp32 accumulation order (the
 *    group executor's grads are float32, the rules' double);
 *  - the kernels a step ran for the CHAIN groups are exactly the plan's
 *    forward layouts (node order) then its backward layouts as they run
 *    (tx_trainer_last_kernels);
 *  - every recipe trains models/gpt2_block: 5 steps on one batch reduce the
 *    loss, the first loss differs from recipe none's (quantization
 *    happened) but stays near it, and two trainers agree bit for bit.
 * Models: models/mlp, models/gpt2_block, models/llama_block on the first
 * two rows of their train.npz. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/session_internal.h"
#include "teexec/teexec.h"
#include "tests/train/train_fixtures.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 2

static const char *const models[] = {"mlp", "gpt2_block", "llama_block"};
static const char *const recipes[] = {"fp8-delayed", "fp8-current", "fp8-block", "mxfp8",
                                      "nvfp4"};

typedef struct fixture {
    teexec_model *m;
    teexec_dataset *d;
} fixture;

static void fixture_open(fixture *f, const char *model)
{
    ok(teexec_model_load_file(model_path(model, "model.onnx"), NULL, &f->m));
    ok(teexec_dataset_load_npz(model_path(model, "train.npz"), &f->d));
}

static void fixture_close(fixture *f)
{
    teexec_dataset_destroy(f->d);
    teexec_model_destroy(f->m);
}

static teexec_trainer *trainer_with(const fixture *f, const char *recipe, bool sgd)
{
    teexec_train_options o;
    teexec_train_options_init(&o);
    if (sgd) o.optimizer = TEEXEC_OPTIMIZER_SGD;
    o.device = TEEXEC_DEVICE_CPU;
    o.recipe = recipe;
    o.seed = 7;
    teexec_trainer *t = NULL;
    teexec_status *st = teexec_trainer_create(f->m, &o, &t);
    if (st) fail_msg("trainer (%s): %s", recipe ? recipe : "none", teexec_status_message(st));
    return t;
}

static teexec_trainer *trainer(const fixture *f, const char *recipe)
{
    return trainer_with(f, recipe, false);
}

static double step(teexec_trainer *t, const fixture *f)
{
    teexec_tensor *x = rows_of(ds_find(f->d, "x"), 0, BATCH);
    teexec_tensor *y = rows_of(ds_find(f->d, "target"), 0, BATCH);
    const char *names[2] = {"x", "target"};
    const teexec_tensor *ts[2] = {x, y};
    double loss = NAN;
    ok(teexec_trainer_step(t, 2, names, ts, &loss));
    teexec_tensor_destroy(x);
    teexec_tensor_destroy(y);
    return loss;
}

static double rel_l2(const teexec_tensor *a, const teexec_tensor *b)
{
    assert_int_equal(teexec_tensor_dtype(a), TEEXEC_DTYPE_FLOAT);
    assert_int_equal(teexec_tensor_element_count(a), teexec_tensor_element_count(b));
    const float *x = teexec_tensor_data_const(a), *y = teexec_tensor_data_const(b);
    double num = 0, den = 0;
    for (uint64_t i = 0; i < teexec_tensor_element_count(a); i++) {
        num += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        den += (double)y[i] * y[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-300));
}

/* (1) recipe none: the planned step equals the node-by-node one */
static void test_none_matches_node_by_node(void **state)
{
    (void)state;
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        fixture f;
        fixture_open(&f, models[m]);
        /* SGD: the update is proportional to the grad (AdamW's first step
         * is lr * sign(g), which amplifies noise on zero grads) */
        teexec_trainer *a = trainer_with(&f, NULL, true), *b = trainer_with(&f, NULL, true);
        ok(tx_trainer_debug_node_by_node(b));
        double la = step(a, &f), lb = step(b, &f);
        size_t nk = 0;
        (void)tx_trainer_last_kernels(a, &nk, NULL);
        assert_true(nk > 0); /* the planned trainer ran groups */
        (void)tx_trainer_last_kernels(b, &nk, NULL);
        assert_int_equal(nk, 0);
        if (!(fabs(la - lb) <= 1e-6 * fabs(lb))) fail_msg("%s: loss %.9g vs %.9g", models[m], la, lb);
        size_t np = teexec_trainer_param_count(a);
        assert_int_equal(np, teexec_trainer_param_count(b));
        assert_true(np > 0);
        for (size_t i = 0; i < np; i++) {
            const char *name = teexec_trainer_param_name(a, i);
            teexec_tensor *ga, *gb, *pa, *pb;
            ok(teexec_trainer_grad(a, name, &ga));
            ok(teexec_trainer_grad(b, name, &gb));
            ok(teexec_trainer_param(a, name, &pa));
            ok(teexec_trainer_param(b, name, &pb));
            double eg = rel_l2(ga, gb), ep = rel_l2(pa, pb);
            if (!(eg < 1e-5) || !(ep < 1e-6))
                fail_msg("%s: %s grad rel-L2 %g, param rel-L2 %g", models[m], name, eg, ep);
            teexec_tensor_destroy(ga);
            teexec_tensor_destroy(gb);
            teexec_tensor_destroy(pa);
            teexec_tensor_destroy(pb);
        }
        teexec_trainer_destroy(a);
        teexec_trainer_destroy(b);
        fixture_close(&f);
    }
}

static bool same_kernel(tx_plan_kernel a, tx_plan_kernel b)
{
    return a.fusion == b.fusion && a.first == b.first && a.count == b.count;
}

/* The kernels of a step = the plan's layouts: forward groups in the order
 * of their first nodes, then backward groups in reverse, each backward
 * layout last kernel first. */
static void check_kernels(teexec_trainer *t, const char *what)
{
    size_t n = 0;
    const tx_fuser_plan *fp = NULL;
    const tx_run_kernel *k = tx_trainer_last_kernels(t, &n, &fp);
    assert_non_null(fp);
    size_t at = 0;
    int32_t *order = calloc(fp->n_groups + 1, sizeof *order);
    assert_non_null(order);
    size_t no = 0;
    for (size_t g = 0; g < fp->n_groups; g++)
        if (fp->groups[g].kind == TX_GROUP_CHAIN) order[no++] = (int32_t)g;
    /* groups are numbered in node order of their first node */
    for (size_t i = 1; i < no; i++)
        assert_true(fp->groups[order[i]].nodes[0] > fp->groups[order[i - 1]].nodes[0]);
    for (size_t i = 0; i < no; i++) {
        const tx_plan_group *pg = &fp->groups[order[i]];
        for (int32_t j = 0; j < pg->n_forward; j++, at++) {
            if (at >= n) fail_msg("%s: the run stopped at forward group %d", what, (int)pg->id);
            assert_int_equal(k[at].group, order[i]);
            if (!same_kernel(k[at].k, pg->forward[j]))
                fail_msg("%s: group %d forward kernel %d differs", what, (int)pg->id, (int)j);
        }
    }
    size_t n_bwd = 0;
    for (size_t i = no; i-- > 0;) {
        const tx_plan_group *pg = &fp->groups[order[i]];
        if (pg->first_op_requiring_backward >= pg->n_nodes) continue;
        for (int32_t j = pg->n_backward; j-- > 0; at++, n_bwd++) {
            if (at >= n) fail_msg("%s: the run stopped at backward group %d", what, (int)pg->id);
            assert_int_equal(k[at].group, order[i]);
            if (!same_kernel(k[at].k, pg->backward[j]))
                fail_msg("%s: group %d backward kernel %d differs", what, (int)pg->id, (int)j);
        }
    }
    assert_true(n_bwd > 0);
    assert_int_equal(at, n);
    free(order);
}

/* (2) what ran is the plan, under recipe none and under each recipe */
static void test_kernels_are_the_plan(void **state)
{
    (void)state;
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        fixture f;
        fixture_open(&f, models[m]);
        for (size_t r = 0; r <= sizeof recipes / sizeof *recipes; r++) {
            const char *rc = r == 0 ? NULL : recipes[r - 1];
            teexec_trainer *t = trainer(&f, rc);
            (void)step(t, &f);
            char what[128];
            snprintf(what, sizeof what, "%s/%s", models[m], rc ? rc : "none");
            check_kernels(t, what);
            teexec_trainer_destroy(t);
        }
        fixture_close(&f);
    }
}

/* (3) every recipe trains gpt2_block on the CPU */
static void test_recipes_train(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, "gpt2_block");
    teexec_trainer *n = trainer(&f, NULL);
    double none0 = step(n, &f);
    teexec_trainer_destroy(n);
    for (size_t r = 0; r < sizeof recipes / sizeof *recipes; r++) {
        teexec_trainer *a = trainer(&f, recipes[r]), *b = trainer(&f, recipes[r]);
        double la[5];
        for (int s = 0; s < 5; s++) {
            la[s] = step(a, &f);
            double lb = step(b, &f);
            if (!(la[s] == lb)) fail_msg("%s step %d: %.17g vs %.17g", recipes[r], s, la[s], lb);
        }
        fprintf(stderr, "%-12s loss %.6f -> %.6f (none %.6f)\n", recipes[r], la[0], la[4], none0);
        if (!(la[0] != none0)) fail_msg("%s: the loss equals recipe none's", recipes[r]);
        if (!(fabs(la[0] - none0) < 0.25 * fabs(none0)))
            fail_msg("%s: loss %g far from none's %g", recipes[r], la[0], none0);
        if (!(la[4] < la[0])) fail_msg("%s: loss %g -> %g", recipes[r], la[0], la[4]);
        teexec_trainer_destroy(a);
        teexec_trainer_destroy(b);
    }
    fixture_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_matches_node_by_node),
        cmocka_unit_test(test_kernels_are_the_plan),
        cmocka_unit_test(test_recipes_train),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
