/* test_coverage.c - planner/coverage.h: the FLOPs and nodes a plan runs
 * inside te.ops groups, counted exactly on sample models whose shapes are
 * known, and the standard ops left, by type. */
#include "planner/coverage.h"
#include "plan_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static void ok(teexec_status *st)
{
    if (st) fail_msg("%s", teexec_status_message(st));
}

/* models/mlp, lowered: LayerNorm [16 x 64] -> Linear 64->256 -> Bias ->
 * GELU -> Linear 256->64 -> Bias -> residual add, on 2 x 8 tokens. */
static void test_mlp_counts_every_flop(void **state)
{
    (void)state;
    pt_model m;
    ok(pt_model_load("models/mlp/model.onnx", true, &m));
    tx_fuser_plan *p = pt_plan_each_node(m.g, false, "cpu");
    assert_non_null(p);
    tx_plan_coverage c;
    ok(tx_plan_coverage_compute(p, m.g, m.vals, m.n_vals, &c));
    const double rows = 16, h = 64, ffn = 256;
    double want = rows * h                  /* LayerNorm: one per output element */
                  + 2 * rows * ffn * h + rows * ffn /* Linear + Bias */
                  + rows * ffn              /* GELU */
                  + 2 * rows * h * ffn + rows * h  /* Linear + Bias */
                  + rows * h;               /* AddExtraInput */
    assert_true(c.flops_total == want);
    assert_true(c.flops_te == want);
    assert_int_equal(c.unknown, 0);
    size_t left = 0;
    for (size_t i = 0; i < c.n_left; i++) left += c.left[i].count;
    assert_int_equal(c.nodes_te + left, c.nodes_total);
    for (size_t i = 0; i < c.n_left; i++) assert_true(c.left[i].data_movement);
    tx_plan_coverage_free(&c);
    tx_fuser_plan_free(p);
    pt_model_free(&m);
}

/* The same model unlowered: every node is a standard group; the two
 * MatMuls carry 2*M*N*K each and the coverage is 0. */
static void test_unlowered_model_has_no_coverage(void **state)
{
    (void)state;
    pt_model m;
    ok(pt_model_load("models/mlp/model.onnx", false, &m));
    tx_fuser_plan *p = pt_plan_each_node(m.g, false, "cpu");
    assert_non_null(p);
    tx_plan_coverage c;
    ok(tx_plan_coverage_compute(p, m.g, m.vals, m.n_vals, &c));
    assert_true(c.flops_te == 0);
    assert_int_equal(c.nodes_te, 0);
    assert_int_equal(c.nodes_total, m.g->n_nodes);
    /* rows sorted by FLOPs: MatMul first, two of them */
    assert_true(c.n_left > 0);
    assert_string_equal(c.left[0].op, "MatMul");
    assert_int_equal(c.left[0].count, 2);
    assert_true(c.left[0].flops == 2.0 * (2 * 16 * 256 * 64));
    assert_false(c.left[0].data_movement);
    tx_plan_coverage_free(&c);
    tx_fuser_plan_free(p);
    pt_model_free(&m);
}

/* DotProductAttention: 4 x (query elements) x s_kv, from te_gpt2_block
 * (b 2, s 16, 4 heads of 8). */
static void test_attention_flops(void **state)
{
    (void)state;
    pt_model m;
    ok(pt_model_load("models/te_gpt2_block/model.onnx", false, &m));
    bool found = false;
    for (size_t i = 0; i < m.g->n_nodes; i++) {
        const tx_ir_node *n = &m.g->nodes[i];
        if (strcmp(n->op_type, "DotProductAttention") != 0) continue;
        double f;
        assert_true(tx_node_flops(n, m.vals, m.n_vals, &f));
        assert_true(f == 4.0 * (2 * 16 * 32) * 16);
        found = true;
    }
    assert_true(found);
    pt_model_free(&m);
}

static void test_data_movement(void **state)
{
    (void)state;
    assert_true(tx_op_is_data_movement("", "Reshape"));
    assert_true(tx_op_is_data_movement("te.ops", "MakeExtraOutput"));
    assert_false(tx_op_is_data_movement("", "Softmax"));
    assert_false(tx_op_is_data_movement("te.ops", "Linear"));
    assert_false(tx_op_is_data_movement("com.example", "Reshape"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_counts_every_flop),
        cmocka_unit_test(test_unlowered_model_has_no_coverage),
        cmocka_unit_test(test_attention_flops),
        cmocka_unit_test(test_data_movement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
