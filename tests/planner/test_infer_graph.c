/* Tests for import/infer_graph.c (tx_infer_graph): symbolic input dims from
 * the caller's names (1 when not named), initializer types and folded
 * integer values, te.ops and standard nodes in one pass, errors naming the
 * node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan_fixture.h"

static void int64_init(Onnx__GraphProto *g, const char *name, const int64_t *v, size_t n)
{
    Onnx__TensorProto *t = mb_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(name);
    t->has_data_type = 1;
    t->data_type = FX_INT64;
    t->dims = mb_alloc(sizeof(int64_t));
    t->dims[0] = (int64_t)n;
    t->n_dims = 1;
    t->int64_data = mb_alloc(n * sizeof(int64_t));
    memcpy(t->int64_data, v, n * sizeof(int64_t));
    t->n_int64_data = n;
    g->initializer[g->n_initializer++] = t;
}

static Onnx__ModelProto *model(const char *w_dims)
{
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "infer");
    mb_input(g, "x", FX_FLOAT, "batch,seq,32");
    mb_output(g, "y", FX_FLOAT, NULL);
    fx_param(g, "w", w_dims);
    const int64_t shape[2] = {-1, 64};
    int64_init(g, "shape", shape, 2);
    fx_te(g, "fc", "Linear", "x,w", "h");
    mb_node(g, "flat", "Reshape", "", "h,shape", "y");
    return m;
}

static const tx_infer_value *val(const tx_ir_graph *g, const tx_infer_value *v, const char *name)
{
    int32_t i = tx_ir_graph_find_value(g, name);
    assert_true(i >= 0);
    return &v[i];
}

static void types_every_value(void **state)
{
    (void)state;
    size_t size;
    uint8_t *bytes = mb_pack(model("64,32"), &size);
    tx_onnx_file *file = NULL;
    tx_ir_model *ir = NULL;
    assert_null(tx_onnx_load_memory(bytes, size, NULL, NULL, &file));
    free(bytes);
    assert_null(tx_ir_build(file, &ir));
    const tx_ir_graph *g = ir->graph;

    const char *names[1] = {"batch"};
    const int64_t values[1] = {4};
    tx_infer_value *v = NULL;
    assert_null(tx_infer_graph(g, file, names, values, 1, &v));
    const tx_infer_value *x = val(g, v, "x"), *h = val(g, v, "h"), *y = val(g, v, "y");
    assert_true(x->shape_known);
    assert_int_equal(x->shape.rank, 3);
    assert_int_equal(x->shape.dims[0], 4); /* named */
    assert_int_equal(x->shape.dims[1], 1); /* not named: 1 */
    assert_int_equal(x->shape.dims[2], 32);
    const tx_infer_value *s = val(g, v, "shape");
    assert_non_null(s->value); /* small integer initializer: decoded */
    assert_int_equal(((const int64_t *)s->value->data)[1], 64);
    assert_null(val(g, v, "w")->value); /* 2048 floats: type only */
    assert_int_equal(h->dtype, TEEXEC_DTYPE_FLOAT);
    assert_int_equal(h->shape.rank, 3);
    assert_int_equal(h->shape.dims[2], 64);
    assert_true(y->shape_known);
    assert_int_equal(y->shape.rank, 2);
    assert_int_equal(y->shape.dims[0], 4);
    assert_int_equal(y->shape.dims[1], 64);
    tx_infer_values_free(v, g->n_values);
    tx_infer_values_free(NULL, 3);

    /* a weight of the wrong shape: the error names the node */
    tx_ir_model_free(ir);
    tx_onnx_file_free(file);
    bytes = mb_pack(model("64,16"), &size);
    assert_null(tx_onnx_load_memory(bytes, size, NULL, NULL, &file));
    free(bytes);
    assert_null(tx_ir_build(file, &ir));
    v = (tx_infer_value *)1;
    teexec_status *st = tx_infer_graph(ir->graph, file, NULL, NULL, 0, &v);
    assert_non_null(st);
    assert_null(v);
    const char *msg = teexec_status_message(st);
    const char *node = teexec_status_node(st);
    if (!(strstr(msg, "fc") || (node && strcmp(node, "fc") == 0)))
        fail_msg("error does not name node fc: %s", msg);
    teexec_status_destroy(st);
    tx_ir_model_free(ir);
    tx_onnx_file_free(file);
    mb_free_all();
}

/* Inputs typed by the caller (a session's bound shapes) instead of their
 * declarations; a bound id past the table is refused. */
static void types_bound_inputs(void **state)
{
    (void)state;
    size_t size;
    uint8_t *bytes = mb_pack(model("64,32"), &size);
    tx_onnx_file *file = NULL;
    tx_ir_model *ir = NULL;
    assert_null(tx_onnx_load_memory(bytes, size, NULL, NULL, &file));
    free(bytes);
    assert_null(tx_ir_build(file, &ir));
    const tx_ir_graph *g = ir->graph;
    int32_t x = tx_ir_graph_find_value(g, "x");
    tx_infer_value t = {.dtype = TEEXEC_DTYPE_FLOAT, .shape_known = true,
                        .shape = {.rank = 3, .dims = {4, 5, 32}}};
    tx_infer_value *v = NULL;
    assert_null(tx_infer_graph_inputs(g, file, 1, &x, &t, &v));
    const tx_infer_value *y = val(g, v, "y");
    assert_true(y->shape_known);
    assert_int_equal(y->shape.rank, 2);
    assert_int_equal(y->shape.dims[0], 20);
    assert_int_equal(y->shape.dims[1], 64);
    tx_infer_values_free(v, g->n_values);
    int32_t bad = (int32_t)g->n_values;
    teexec_status *st = tx_infer_graph_inputs(g, file, 1, &bad, &t, &v);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_null(v);
    teexec_status_destroy(st);
    tx_ir_model_free(ir);
    tx_onnx_file_free(file);
    mb_free_all();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(types_every_value),
        cmocka_unit_test(types_bound_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
