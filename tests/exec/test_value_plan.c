/* test_value_plan.c - the value planner (exec/value_plan.h) on its own, as
 * the CUDA executor uses it (no session): every value typed per input
 * signature, Shape outputs known, a small integer subgraph folded, nothing
 * folded through a float initializer, two signatures planned from one
 * planner, and a model with ops the CPU has no kernel for still planned
 * (those nodes are never folded; the executor that runs them resolves
 * them), and with TX_VP_DEFER_WEIGHTS a big float weight typed but not
 * decoded until tx_value_planner_load, which gives the eager bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/prepare.h"
#include "exec/value_plan.h"
#include "teexec/teexec.h"
#include "tests/import/model_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "unexpected: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

/* Packs a model built with model_builder.h, frees the builder's memory and
 * loads the bytes. */
static teexec_model *load_built(Onnx__ModelProto *m)
{
    size_t size = 0;
    uint8_t *buf = mb_pack(m, &size);
    mb_free_all();
    teexec_model *model = NULL;
    ok(teexec_model_load_memory(buf, size, NULL, NULL, &model));
    free(buf);
    return model;
}

/* x FLOAT [N, 4], w FLOAT [4] = 0..3:
 *   shp  = Shape(x)               known from the shape: skipped
 *   n1   = Gather(shp, 0) + 1     (int64, all known, small): folded
 *   w2   = Mul(w, w)              all known, but w may be a parameter: runs
 *   y    = Add(x, w2)             reads the input: runs
 * outputs y [N, 4] and n1 (a scalar). */
static teexec_model *fold_model(void)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("folds");
    m->graph = g;
    mb_input(g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "N,4");
    mb_output(g, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "N,4");
    mb_output(g, "n1", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "");
    const int64_t wd[1] = {4};
    mb_init(g, "w", wd, 1);
    Onnx__TensorProto *zero = mb_alloc(sizeof *zero), *one = mb_alloc(sizeof *one);
    int64_t *vals = mb_alloc(2 * sizeof(int64_t));
    vals[0] = 0;
    vals[1] = 1;
    Onnx__TensorProto *ts[2] = {zero, one};
    const char *names[2] = {"i0", "i1"};
    for (int k = 0; k < 2; k++) {
        onnx__tensor_proto__init(ts[k]);
        ts[k]->name = mb_str(names[k]);
        ts[k]->has_data_type = 1;
        ts[k]->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        ts[k]->has_raw_data = 1;
        ts[k]->raw_data.data = (uint8_t *)&vals[k];
        ts[k]->raw_data.len = sizeof(int64_t);
        g->initializer[g->n_initializer++] = ts[k];
    }
    mb_node(g, "shape", "Shape", NULL, "x", "shp");
    Onnx__NodeProto *ga = mb_node(g, "gather", "Gather", NULL, "shp,i0", "n");
    mb_attr_int(ga, "axis", 0);
    mb_node(g, "inc", "Add", NULL, "n,i1", "n1");
    mb_node(g, "wsq", "Mul", NULL, "w,w", "w2");
    mb_node(g, "add", "Add", NULL, "x,w2", "y");
    return load_built(m);
}

static int32_t value(const tx_value_planner *vp, const char *name)
{
    int32_t v = tx_ir_graph_find_value(vp->g, name);
    if (v < 0) fail_msg("no value \"%s\" in the lowered graph", name);
    return v;
}

static bool producer_skipped(const tx_value_planner *vp, const tx_value_plan *p, const char *name)
{
    int32_t prod = vp->g->values[value(vp, name)].producer;
    if (prod < 0) fail_msg("value \"%s\" has no producer", name);
    return p->skip[prod];
}

static void plan_rows(tx_value_planner *vp, int64_t n, tx_value_plan *p)
{
    assert_int_equal(vp->n_in, 1);
    teexec_dtype dt = TEEXEC_DTYPE_FLOAT;
    tx_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.rank = 2;
    sh.dims[0] = n;
    sh.dims[1] = 4;
    ok(tx_value_plan_build(vp, &dt, &sh, p));
    assert_int_equal(p->n_vals, vp->g->n_values);
}

static void test_types_and_folding(void **state)
{
    (void)state;
    teexec_model *m = fold_model();
    const teexec_model *run = NULL;
    ok(tx_model_runnable(m, &run, NULL));
    tx_value_planner *vp = NULL;
    ok(tx_value_planner_create(run, m, 0, &vp));
    assert_int_equal(vp->in_vals[0], value(vp, "x"));

    tx_value_plan p3, p5;
    plan_rows(vp, 3, &p3);
    plan_rows(vp, 5, &p5); /* a second signature from the same planner */

    /* every value typed; y's shape from the input's */
    const tx_infer_value *y = &p3.vals[value(vp, "y")];
    assert_true(y->shape_known);
    assert_int_equal(y->dtype, TEEXEC_DTYPE_FLOAT);
    assert_int_equal(y->shape.rank, 2);
    assert_int_equal(y->shape.dims[0], 3);
    assert_int_equal(p5.vals[value(vp, "y")].shape.dims[0], 5);
    assert_null(y->value);
    assert_false(producer_skipped(vp, &p3, "y"));

    /* Shape: its value from the shape; the int64 chain after it folded */
    assert_true(producer_skipped(vp, &p3, "shp"));
    const tx_infer_value *n1 = &p3.vals[value(vp, "n1")];
    assert_true(producer_skipped(vp, &p3, "n1"));
    assert_non_null(n1->value);
    assert_int_equal(n1->dtype, TEEXEC_DTYPE_INT64);
    assert_int_equal(((const int64_t *)n1->value->data)[0], 4);
    assert_int_equal(((const int64_t *)p5.vals[value(vp, "n1")].value->data)[0], 6);

    /* the float initializer is known (the planner's decoded copy), and
     * nothing is folded through it */
    int32_t w = value(vp, "w");
    assert_ptr_equal(p3.vals[w].value, &vp->init[w]);
    assert_false(producer_skipped(vp, &p3, "w2"));
    assert_null(p3.vals[value(vp, "w2")].value);
    assert_true(p3.vals[value(vp, "w2")].shape_known);

    tx_value_plan_clear(&p3);
    assert_null(p3.vals);
    tx_value_plan_clear(&p3); /* a cleared plan clears again */
    tx_value_plan_clear(&p5);
    tx_value_planner_destroy(vp);
    tx_value_planner_destroy(NULL);
    teexec_model_destroy(m);
}

/* tests/exec/data/unsupported.onnx: FooOp, BarOp (domain ""), Baz
 * ("com.example") and a Relu. A CPU session refuses it, listing them
 * (test_session.c); the planner alone is made, with no CPU kernel for
 * exactly those four nodes. */
static void test_nodes_without_cpu_kernels(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof(path), "%.3000s/tests/exec/data/unsupported.onnx", root ? root : ".");
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m));
    const teexec_model *run = NULL;
    ok(tx_model_runnable(m, &run, NULL));
    tx_value_planner *vp = NULL;
    ok(tx_value_planner_create(run, m, 0, &vp));
    size_t without = 0;
    for (size_t i = 0; i < vp->g->n_nodes; i++) {
        const tx_ir_node *n = &vp->g->nodes[i];
        /* the Relu, as lowered, is the one node the CPU runs */
        bool unknown = !strcmp(n->op_type, "FooOp") || !strcmp(n->op_type, "BarOp") ||
                       !strcmp(n->op_type, "Baz");
        if (unknown) {
            assert_null(vp->fold_fns[i]);
            without++;
        } else {
            assert_non_null(vp->fold_fns[i]);
        }
    }
    assert_int_equal(without, 4);
    assert_int_equal(vp->g->n_nodes, 5);
    tx_value_planner_destroy(vp);
    teexec_model_destroy(m);
}

/* x FLOAT [N, 70000]: y = Mul(x, big) with big [70000] (over
 * TX_FOLD_MAX_ELEMENTS), z = Mul(y, w) with w [1]. */
static teexec_model *big_weight_model(void)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("big");
    m->graph = g;
    mb_input(g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "N,70000");
    mb_output(g, "z", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "N,70000");
    const int64_t bd[1] = {70000}, wd[1] = {1};
    mb_init(g, "big", bd, 1);
    mb_init(g, "w", wd, 1);
    mb_node(g, "mul_big", "Mul", NULL, "x,big", "y");
    mb_node(g, "mul_w", "Mul", NULL, "y,w", "z");
    return load_built(m);
}

static void test_deferred_weights(void **state)
{
    (void)state;
    teexec_model *m = big_weight_model();
    const teexec_model *run = NULL;
    ok(tx_model_runnable(m, &run, NULL));
    tx_value_planner *eager = NULL, *lazy = NULL;
    ok(tx_value_planner_create(run, m, 0, &eager));
    ok(tx_value_planner_create(run, m, TX_VP_DEFER_WEIGHTS, &lazy));
    int32_t big = value(lazy, "big"), w = value(lazy, "w");
    /* the big weight: a header only; the small one decoded as before */
    assert_true(tx_value_planner_is_deferred(lazy, big));
    assert_null(lazy->init[big].data);
    assert_int_equal(lazy->init[big].dtype, TEEXEC_DTYPE_FLOAT);
    assert_int_equal(lazy->init[big].rank, 1);
    assert_int_equal(lazy->init[big].dims[0], 70000);
    assert_false(tx_value_planner_is_deferred(lazy, w));
    assert_non_null(lazy->init[w].data);
    assert_false(tx_value_planner_is_deferred(eager, big));

    /* a plan types it and leaves its value unknown; nothing is folded */
    tx_value_plan p;
    teexec_dtype dt = TEEXEC_DTYPE_FLOAT;
    tx_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.rank = 2;
    sh.dims[0] = 2;
    sh.dims[1] = 70000;
    ok(tx_value_plan_build(lazy, &dt, &sh, &p));
    assert_true(p.vals[big].shape_known);
    assert_int_equal(p.vals[big].dtype, TEEXEC_DTYPE_FLOAT);
    assert_int_equal(p.vals[big].shape.dims[0], 70000);
    assert_null(p.vals[big].value);
    assert_ptr_equal(p.vals[w].value, &lazy->init[w]);
    assert_false(producer_skipped(lazy, &p, "y"));
    assert_int_equal(p.vals[value(lazy, "z")].shape.dims[1], 70000);

    /* loading decodes in place: the eager bytes, at the same address */
    const tx_tensor *at = &lazy->init[big];
    ok(tx_value_planner_load(lazy, big));
    assert_ptr_equal(at, &lazy->init[big]);
    assert_false(tx_value_planner_is_deferred(lazy, big));
    assert_int_equal(lazy->init[big].nbytes, eager->init[big].nbytes);
    assert_memory_equal(lazy->init[big].data, eager->init[big].data, eager->init[big].nbytes);
    ok(tx_value_planner_load(lazy, big)); /* loaded: nothing more */
    ok(tx_value_planner_load(lazy, w));   /* never deferred: nothing */
    tx_value_plan_clear(&p);
    tx_value_planner_destroy(lazy);
    tx_value_planner_destroy(eager);
    teexec_model_destroy(m);
}

/* x FLOAT [2, 256] · W [256, 300] (W[k][n] = k*300 + n): the lowering
 * stores W transposed, a new 300 KiB initializer that the lowered copy
 * keeps as side data beside its proto (format/onnx_load.h) rather than
 * inline, so copies over 2 GiB load too; the run reads it from there. */
static void test_lowered_weights_as_side_data(void **state)
{
    (void)state;
    Onnx__ModelProto *mp = mb_model(8);
    mb_opset(mp, "", 17);
    Onnx__GraphProto *g = mb_graph("side");
    mp->graph = g;
    mb_input(g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,256");
    mb_output(g, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2,300");
    const int64_t wd[2] = {256, 300};
    mb_init(g, "W", wd, 2);
    mb_node(g, "mm", "MatMul", NULL, "x,W", "y");
    teexec_model *m = load_built(mp);
    const teexec_model *run = NULL;
    ok(tx_model_runnable(m, &run, NULL));
    assert_true(run != m);
    assert_true(run->file->side.size >= 256u * 300u * sizeof(float));

    teexec_session *s = NULL;
    ok(teexec_session_create(m, NULL, &s));
    const int64_t xd[2] = {2, 256};
    teexec_tensor *x = NULL, *y = NULL;
    ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 2, xd, &x));
    float *xv = teexec_tensor_data(x);
    for (size_t i = 0; i < 512; i++) xv[i] = 1.0f;
    const char *in_names[1] = {"x"};
    ok(teexec_session_run(s, 1, in_names, (const teexec_tensor *const *)&x, 1, NULL, &y));
    /* y[r][n] = sum_k (300 k + n) = 300 * 32640 + 256 n: integers below
     * 2^24, exact in any summation order */
    const float *yv = teexec_tensor_data_const(y);
    for (size_t r = 0; r < 2; r++)
        for (size_t n = 0; n < 300; n++)
            assert_true(yv[r * 300 + n] == (float)(300.0 * 32640.0 + 256.0 * (double)n));
    teexec_tensor_destroy(x);
    teexec_tensor_destroy(y);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types_and_folding),
        cmocka_unit_test(test_nodes_without_cpu_kernels),
        cmocka_unit_test(test_deferred_weights),
        cmocka_unit_test(test_lowered_weights_as_side_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
