/* Tests for the public model API (exec/api_model.c): load from memory,
 * introspection tables, errors carrying node and file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "teexec/teexec.h"
#include "model_builder.h"

enum { FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT };

static teexec_status *load(const Onnx__ModelProto *m, teexec_model **out)
{
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_status *st = teexec_model_load_memory(bytes, size, NULL, NULL, out);
    free(bytes);
    return st;
}

/* x[batch,8] -> MatMul(w) -> Add(b) -> Relu -> y, plus an If whose branch
 * holds a Relu, plus a function with two nodes. */
static Onnx__ModelProto *sample(void)
{
    Onnx__ModelProto *m = mb_model(9);
    mb_opset(m, "", 17);
    mb_opset(m, "com.te", 1);
    Onnx__GraphProto *g = mb_graph("main");
    m->graph = g;
    mb_input(g, "x", FLOAT, "batch,8");
    mb_input(g, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
    mb_input(g, "w", FLOAT, "8,4"); /* also an initializer: not listed as an input */
    int64_t wd[] = {8, 4}, bd[] = {4};
    mb_init(g, "w", wd, 2);
    mb_init(g, "b", bd, 1);
    mb_node(g, "mm", "MatMul", "", "x,w", "t0");
    mb_node(g, "add", "Add", "", "t0,b", "t1");
    mb_node(g, "relu", "Relu", "", "t1", "t2");
    Onnx__NodeProto *iff = mb_node(g, "if", "If", "", "cond", "t3");
    Onnx__GraphProto *br = mb_graph("branch");
    mb_node(br, "inner", "Relu", "", "t2", "bo");
    mb_output(br, "bo", FLOAT, NULL);
    mb_attr_graph(iff, "then_branch", br);
    Onnx__GraphProto *br2 = mb_graph("branch2");
    mb_node(br2, "inner2", "Identity", "", "t2", "bo2");
    mb_output(br2, "bo2", FLOAT, NULL);
    mb_attr_graph(iff, "else_branch", br2);
    mb_node(g, "te", "Fused", "com.te", "t3", "y");
    mb_output(g, "y", FLOAT, "batch,?");

    Onnx__FunctionProto *f = mb_function(m, "com.te", "Fused", "A", "B");
    f->node[f->n_node++] = mb_node_new("f1", "Relu", "", "A", "C");
    f->node[f->n_node++] = mb_node_new("f2", "Neg", "", "C", "B");
    return m;
}

static void introspection(void **state)
{
    (void)state;
    teexec_model *model = NULL;
    teexec_status *st = load(sample(), &model);
    if (st) fprintf(stderr, "%s\n", teexec_status_message(st));
    assert_null(st);
    assert_non_null(model);
    mb_free_all(); /* the model keeps nothing of the caller's bytes */

    assert_string_equal(teexec_model_producer_name(model), "teexec-tests");
    assert_string_equal(teexec_model_producer_version(model), "1.0");
    assert_int_equal(teexec_model_ir_version(model), 9);
    assert_null(teexec_model_path(model));

    assert_int_equal(teexec_model_opset_count(model), 2);
    assert_string_equal(teexec_model_opset(model, 0)->domain, "");
    assert_int_equal(teexec_model_opset(model, 0)->version, 17);
    assert_string_equal(teexec_model_opset(model, 1)->domain, "com.te");
    assert_null(teexec_model_opset(model, 2));

    assert_int_equal(teexec_model_input_count(model), 2);
    const teexec_value_info *x = teexec_model_input(model, 0);
    assert_string_equal(x->name, "x");
    assert_int_equal(x->kind, TEEXEC_VALUE_TENSOR);
    assert_int_equal(x->dtype, TEEXEC_DTYPE_FLOAT);
    assert_int_equal(x->rank, 2);
    assert_int_equal(x->dims[0], -1);
    assert_string_equal(x->dim_params[0], "batch");
    assert_int_equal(x->dims[1], 8);
    assert_string_equal(teexec_model_input(model, 1)->name, "cond");
    assert_int_equal(teexec_model_input(model, 1)->rank, 0);
    assert_null(teexec_model_input(model, 2));

    assert_int_equal(teexec_model_output_count(model), 1);
    const teexec_value_info *y = teexec_model_output(model, 0);
    assert_string_equal(y->name, "y");
    assert_int_equal(y->dims[1], -1);
    assert_null(y->dim_params[1]);

    /* Histogram over the main graph, both branches and the function body,
     * sorted by domain then op. */
    static const struct { const char *d, *op; uint64_t n; } want[] = {
        {"", "Add", 1}, {"", "Identity", 1}, {"", "If", 1}, {"", "MatMul", 1},
        {"", "Neg", 1}, {"", "Relu", 3}, {"com.te", "Fused", 1},
    };
    assert_int_equal(teexec_model_op_count(model), sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const teexec_op_count *o = teexec_model_op(model, i);
        assert_string_equal(o->domain, want[i].d);
        assert_string_equal(o->op_type, want[i].op);
        assert_int_equal(o->count, want[i].n);
    }
    assert_null(teexec_model_op(model, 99));
    assert_int_equal(teexec_model_node_count(model), 5);

    teexec_param_stats ps;
    teexec_model_param_stats(model, &ps);
    assert_int_equal(ps.count, 2);
    assert_int_equal(ps.elements, 36);
    assert_int_equal(ps.bytes, 144);
    assert_int_equal(ps.count_by_dtype[TEEXEC_DTYPE_FLOAT], 2);
    assert_int_equal(ps.bytes_by_dtype[TEEXEC_DTYPE_FLOAT], 144);
    assert_int_equal(ps.count_by_dtype[TEEXEC_DTYPE_BFLOAT16], 0);

    assert_int_equal(teexec_model_external_file_count(model), 0);
    assert_null(teexec_model_external_file(model, 0));

    assert_int_equal(teexec_model_function_count(model), 1);
    const teexec_function_info *fi = teexec_model_function(model, 0);
    assert_string_equal(fi->domain, "com.te");
    assert_string_equal(fi->name, "Fused");
    assert_string_equal(fi->overload, "");
    assert_int_equal(fi->node_count, 2);
    assert_int_equal(fi->input_count, 1);
    assert_int_equal(fi->output_count, 1);
    teexec_model_destroy(model);
}

static void validation_error_carries_node(void **state)
{
    (void)state;
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 13);
    Onnx__GraphProto *g = mb_graph("main");
    m->graph = g;
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "n3", "MatMul", "", "x,x7", "y");
    mb_output(g, "y", FLOAT, "4");
    teexec_model *model = (teexec_model *)&model; /* must be reset to NULL */
    teexec_status *st = load(m, &model);
    mb_free_all();
    assert_null(model);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
    assert_string_equal(teexec_status_node(st), "n3");
    assert_string_equal(teexec_status_message(st),
                        "node \"n3\" (MatMul) reads \"x7\", which nothing defines");
    assert_null(teexec_status_file(st));
    teexec_status_destroy(st);
}

static void bad_initializer_payload_fails_at_load(void **state)
{
    (void)state;
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 13);
    Onnx__GraphProto *g = mb_graph("main");
    m->graph = g;
    int64_t d[] = {4};
    mb_init(g, "short_w", d, 1);
    g->initializer[0]->raw_data.len = 12; /* 3 floats for 4 elements */
    mb_node(g, "n", "Relu", "", "short_w", "y");
    mb_output(g, "y", FLOAT, "4");
    teexec_model *model = NULL;
    teexec_status *st = load(m, &model);
    mb_free_all();
    assert_null(model);
    assert_non_null(st);
    assert_true(teexec_status_code(st) == TEEXEC_ERR_BAD_MODEL);
    assert_non_null(strstr(teexec_status_message(st), "short_w"));
    teexec_status_destroy(st);
}

static void file_errors_carry_the_path(void **state)
{
    (void)state;
    teexec_model *model = NULL;
    teexec_status *st = teexec_model_load_file("/nonexistent/dir/m.onnx", NULL, &model);
    assert_null(model);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_IO);
    assert_string_equal(teexec_status_file(st), "/nonexistent/dir/m.onnx");
    teexec_status_destroy(st);

    st = teexec_model_load_file(NULL, NULL, &model);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    st = teexec_model_load_memory(NULL, 10, NULL, NULL, &model);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
}

static void getters_accept_null(void **state)
{
    (void)state;
    assert_string_equal(teexec_model_producer_name(NULL), "");
    assert_int_equal(teexec_model_input_count(NULL), 0);
    assert_null(teexec_model_input(NULL, 0));
    assert_int_equal(teexec_model_node_count(NULL), 0);
    teexec_param_stats ps;
    memset(&ps, 0xff, sizeof ps);
    teexec_model_param_stats(NULL, &ps);
    assert_int_equal(ps.count, 0);
    teexec_model_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(introspection),
        cmocka_unit_test(validation_error_carries_node),
        cmocka_unit_test(bad_initializer_payload_fails_at_load),
        cmocka_unit_test(file_errors_carry_the_path),
        cmocka_unit_test(getters_accept_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
