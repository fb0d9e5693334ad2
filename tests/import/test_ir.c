/* Tests for the IR: building from a ModelProto (packed, then loaded with
 * the real loader), validation errors naming their node, subgraphs reading
 * outer values, model-local functions, attribute accessors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "format/onnx_load.h"
#include "import/ir.h"
#include "model_builder.h"

enum { FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT };

typedef struct loaded {
    tx_onnx_file *file;
    tx_ir_model *ir;
} loaded;

/* Packs m, loads the bytes with the loader, builds and validates the IR.
 * Returns the first failing status (build or validate), NULL on success. */
static teexec_status *load(const Onnx__ModelProto *m, loaded *out)
{
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    memset(out, 0, sizeof *out);
    teexec_status *st = tx_onnx_load_memory(bytes, size, NULL, NULL, &out->file);
    free(bytes);
    assert_null(st); /* these models are well-formed protobuf */
    st = tx_ir_build(out->file, &out->ir);
    if (!st) st = tx_ir_validate(out->ir);
    return st;
}

static void unload(loaded *l)
{
    tx_ir_model_free(l->ir);
    tx_onnx_file_free(l->file);
    mb_free_all();
}

/* Asserts st is BAD_MODEL naming `node` (NULL: no node) with `needle` in
 * its message, then frees it. */
static void expect_bad(teexec_status *st, const char *node, const char *needle)
{
    assert_non_null(st);
    if (teexec_status_code(st) != TEEXEC_ERR_BAD_MODEL || !strstr(teexec_status_message(st), needle))
        fprintf(stderr, "unexpected status: %s: %s\n", teexec_code_name(teexec_status_code(st)),
                teexec_status_message(st));
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
    assert_non_null(strstr(teexec_status_message(st), needle));
    if (node) {
        assert_non_null(teexec_status_node(st));
        assert_string_equal(teexec_status_node(st), node);
    } else {
        assert_null(teexec_status_node(st));
    }
    teexec_status_destroy(st);
}

static Onnx__ModelProto *base_model(Onnx__GraphProto **g)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 13);
    *g = mb_graph("main");
    m->graph = *g;
    return m;
}

static void valid_model_with_symbolic_dims(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "batch,3,?");
    mb_input(g, "w", FLOAT, "3,4"); /* an input that is also an initializer */
    int64_t wd[] = {3, 4};
    mb_init(g, "w", wd, 2);
    int64_t bd[] = {4};
    mb_init(g, "b", bd, 1);
    mb_node(g, "mm", "MatMul", "ai.onnx", "x,w", "t");
    mb_node(g, "add", "Add", NULL, "t,b", "y");
    mb_output(g, "y", FLOAT, "batch,3,4");
    mb_value_info_add(g, "t", FLOAT, "batch,3,4");

    loaded l;
    assert_null(load(m, &l));
    const tx_ir_graph *ig = l.ir->graph;
    assert_int_equal(ig->n_nodes, 2);
    assert_int_equal(ig->n_inputs, 2);
    assert_int_equal(ig->n_initializers, 2);
    assert_int_equal(l.ir->ir_version, 8);
    assert_string_equal(l.ir->producer_name, "teexec-tests");

    int32_t x = tx_ir_graph_find_value(ig, "x");
    assert_true(x >= 0);
    const tx_ir_value *vx = &ig->values[x];
    assert_int_equal(vx->kind, TX_IR_KIND_TENSOR);
    assert_int_equal(vx->dtype, TEEXEC_DTYPE_FLOAT);
    assert_int_equal(vx->rank, 3);
    assert_int_equal(vx->dims[0], -1);
    assert_string_equal(vx->dim_params[0], "batch");
    assert_int_equal(vx->dims[1], 3);
    assert_null(vx->dim_params[1]);
    assert_int_equal(vx->dims[2], -1);
    assert_null(vx->dim_params[2]);
    assert_int_equal(vx->flags, TX_IR_VALUE_GRAPH_INPUT);
    assert_int_equal(vx->producer, -1);
    assert_int_equal(vx->n_consumers, 1);
    assert_int_equal(vx->consumers[0].node, 0);
    assert_int_equal(vx->consumers[0].slot, 0);

    const tx_ir_value *vw = &ig->values[tx_ir_graph_find_value(ig, "w")];
    assert_int_equal(vw->flags, TX_IR_VALUE_GRAPH_INPUT | TX_IR_VALUE_INITIALIZER);
    assert_non_null(vw->initializer);
    assert_string_equal(vw->initializer->name, "w");

    const tx_ir_value *vb = &ig->values[tx_ir_graph_find_value(ig, "b")];
    assert_int_equal(vb->flags, TX_IR_VALUE_INITIALIZER);
    assert_int_equal(vb->rank, 1);
    assert_int_equal(vb->dims[0], 4);

    /* value_info types the intermediate. */
    const tx_ir_value *vt = &ig->values[tx_ir_graph_find_value(ig, "t")];
    assert_int_equal(vt->producer, 0);
    assert_int_equal(vt->producer_slot, 0);
    assert_int_equal(vt->kind, TX_IR_KIND_TENSOR);
    assert_int_equal(vt->rank, 3);
    assert_string_equal(vt->dim_params[0], "batch");
    assert_int_equal(vt->dims[2], 4);

    const tx_ir_value *vy = &ig->values[tx_ir_graph_find_value(ig, "y")];
    assert_true(vy->flags & TX_IR_VALUE_GRAPH_OUTPUT);
    assert_int_equal(vy->producer, 1);
    assert_int_equal(ig->outputs[0], tx_ir_graph_find_value(ig, "y"));

    /* "ai.onnx" is normalized to "", and both nodes resolve opset 13. */
    assert_string_equal(ig->nodes[0].domain, "");
    assert_int_equal(ig->nodes[0].opset, 13);
    assert_int_equal(ig->nodes[1].opset, 13);
    assert_int_equal(ig->nodes[1].inputs[0], tx_ir_graph_find_value(ig, "t"));
    assert_int_equal(ig->nodes[0].function, -1);
    assert_int_equal(tx_ir_graph_find_value(ig, "nope"), -1);
    unload(&l);
}

static void omitted_optional_inputs_are_minus_one(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "clip", "Clip", "", "x,,", "y,");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    assert_null(load(m, &l));
    const tx_ir_node *n = &l.ir->graph->nodes[0];
    assert_int_equal(n->n_inputs, 3);
    assert_true(n->inputs[0] >= 0);
    assert_int_equal(n->inputs[1], -1);
    assert_int_equal(n->inputs[2], -1);
    assert_int_equal(n->n_outputs, 2);
    assert_int_equal(n->outputs[1], -1);
    unload(&l);
}

static void node_output_defined_twice(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "n1", "Relu", "", "x", "y");
    mb_node(g, "n2", "Neg", "", "x", "y");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    expect_bad(load(m, &l), "n2", "node \"n2\" (Neg) writes \"y\", which is already defined by "
                                  "node \"n1\" (Relu)");
    unload(&l);
}

static void node_output_shadows_initializer(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    int64_t d[] = {4};
    mb_init(g, "w", d, 1);
    mb_node(g, "n1", "Relu", "", "x", "w");
    mb_output(g, "w", FLOAT, "4");
    loaded l;
    expect_bad(load(m, &l), "n1", "already defined by an initializer");
    unload(&l);
}

static void initializer_defined_twice(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    int64_t d[] = {2};
    mb_init(g, "w", d, 1);
    mb_init(g, "w", d, 1);
    mb_node(g, "n1", "Relu", "", "w", "y");
    mb_output(g, "y", FLOAT, "2");
    loaded l;
    expect_bad(load(m, &l), NULL, "initializer \"w\" is defined twice");
    unload(&l);
}

static void duplicate_graph_input(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "n1", "Relu", "", "x", "y");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    expect_bad(load(m, &l), NULL, "graph input \"x\" is listed twice");
    unload(&l);
}

static void undefined_input(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4,4");
    mb_node(g, "n1", "Relu", "", "x", "x2");
    mb_node(g, "n3", "MatMul", "", "x2,x7", "y");
    mb_output(g, "y", FLOAT, "4,4");
    loaded l;
    expect_bad(load(m, &l), "n3", "node \"n3\" (MatMul) reads \"x7\", which nothing defines");
    unload(&l);
}

static void unnamed_node_gets_a_label(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "", "Relu", "", "x", "a");
    mb_node(g, "", "Relu", "", "missing", "y");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    expect_bad(load(m, &l), "#1", "node \"#1\" (Relu) reads \"missing\"");
    unload(&l);
}

static void use_before_definition(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "late_reader", "Relu", "", "t", "y");
    mb_node(g, "producer", "Neg", "", "x", "t");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    teexec_status *st = load(m, &l);
    assert_non_null(st);
    assert_null(strstr(teexec_status_message(st), "cycle"));
    expect_bad(st, "late_reader",
               "node \"late_reader\" (Relu) reads \"t\", which node \"producer\" (Neg) produces "
               "later");
    unload(&l);
}

static void cycle_is_reported_as_cycle(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "a", "Add", "", "x,c_out", "a_out");
    mb_node(g, "b", "Relu", "", "a_out", "b_out");
    mb_node(g, "c", "Neg", "", "b_out", "c_out");
    mb_output(g, "c_out", FLOAT, "4");
    loaded l;
    teexec_status *st = load(m, &l);
    assert_non_null(st);
    const char *msg = teexec_status_message(st);
    assert_non_null(strstr(msg, "cycle"));
    /* The loop in data-flow order, closed by its first node. */
    assert_non_null(strstr(msg, "\"a\" -> \"b\" -> \"c\" -> \"a\" (through \"a_out\", "
                                "\"b_out\", \"c_out\")"));
    expect_bad(st, "a", "is part of a cycle");
    unload(&l);
}

static void self_loop_is_a_cycle(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "loop", "Add", "", "x,y", "y");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    expect_bad(load(m, &l), "loop", "cycle: \"loop\" -> \"loop\" (through \"y\")");
    unload(&l);
}

static void missing_opset_import(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "custom", "Frob", "com.example", "x", "y");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    expect_bad(load(m, &l), "custom",
               "node \"custom\" (Frob) uses domain \"com.example\", which the model does not "
               "import");
    unload(&l);
}

static void graph_output_undefined(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "n", "Relu", "", "x", "y");
    mb_output(g, "z", FLOAT, "4");
    loaded l;
    expect_bad(load(m, &l), NULL, "graph output \"z\" is not defined");
    unload(&l);
}

static void ops_teexec_cannot_run_still_load(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_opset(m, "ai.onnx.ml", 3);
    mb_opset(m, "ai.onnx.preview.training", 1);
    mb_opset(m, "com.unknown", 7);
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "ml", "Scaler", "ai.onnx.ml", "x", "a");
    mb_node(g, "tr", "Momentum", "ai.onnx.preview.training", "a", "b");
    mb_node(g, "u", "Whatever", "com.unknown", "b", "y");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    assert_null(load(m, &l));
    assert_int_equal(l.ir->graph->nodes[0].opset, 3);
    assert_int_equal(l.ir->graph->nodes[2].opset, 7);
    assert_string_equal(l.ir->graph->nodes[2].domain, "com.unknown");
    assert_int_equal(tx_ir_model_opset(l.ir, "ai.onnx"), 13);
    assert_int_equal(tx_ir_model_opset(l.ir, "ai.onnx.ml"), 3);
    assert_int_equal(tx_ir_model_opset(l.ir, "nope"), -1);
    unload(&l);
}

/* If(cond) { then: Identity(outer_x) } else { Neg(outer_x) } */
static Onnx__ModelProto *if_model(const char *then_reads)
{
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
    mb_input(g, "x", FLOAT, "n");
    mb_node(g, "pre", "Relu", "", "x", "outer_x");
    Onnx__NodeProto *iff = mb_node(g, "if1", "If", "", "cond", "y");
    Onnx__GraphProto *then_g = mb_graph("then");
    mb_node(then_g, "then_id", "Identity", "", then_reads, "then_y");
    mb_output(then_g, "then_y", FLOAT, NULL);
    Onnx__GraphProto *else_g = mb_graph("else");
    mb_node(else_g, "else_neg", "Neg", "", "outer_x", "else_y");
    mb_output(else_g, "else_y", FLOAT, NULL);
    mb_attr_graph(iff, "then_branch", then_g);
    mb_attr_graph(iff, "else_branch", else_g);
    mb_output(g, "y", FLOAT, "n");
    return m;
}

static void subgraph_reads_outer_value(void **state)
{
    (void)state;
    loaded l;
    assert_null(load(if_model("outer_x"), &l));
    const tx_ir_graph *ig = l.ir->graph;
    const tx_ir_node *iff = &ig->nodes[1];
    int32_t outer_x = tx_ir_graph_find_value(ig, "outer_x");
    assert_int_equal(iff->n_implicit_inputs, 1); /* both branches read it: listed once */
    assert_int_equal(iff->implicit_inputs[0], outer_x);

    const tx_ir_graph *then_g;
    assert_null(tx_ir_attr_graph(iff, "then_branch", &then_g));
    assert_non_null(then_g);
    assert_ptr_equal(then_g->parent, ig);
    assert_int_equal(then_g->parent_node, 1);
    int32_t local = tx_ir_graph_find_value(then_g, "outer_x");
    assert_true(local >= 0);
    assert_true(then_g->values[local].flags & TX_IR_VALUE_OUTER);
    assert_int_equal(then_g->values[local].outer, outer_x);
    assert_int_equal(then_g->nodes[0].inputs[0], local);
    const tx_ir_graph *owner = NULL;
    const tx_ir_value *def = tx_ir_value_resolve(then_g, local, &owner);
    assert_ptr_equal(owner, ig);
    assert_int_equal(def->producer, 0);
    /* Outer values carry their type into the subgraph's table. */
    assert_int_equal(then_g->values[local].kind, ig->values[outer_x].kind);
    assert_int_equal(then_g->nodes[0].opset, 13);
    unload(&l);
}

static void subgraph_undefined_read_names_inner_node(void **state)
{
    (void)state;
    loaded l;
    teexec_status *st = load(if_model("ghost"), &l);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "node \"if1\" (If)"));
    expect_bad(st, "then_id", "node \"then_id\" (Identity) reads \"ghost\", which nothing defines");
    unload(&l);
}

static void subgraph_reading_later_outer_value(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
    mb_input(g, "x", FLOAT, "n");
    Onnx__NodeProto *iff = mb_node(g, "if1", "If", "", "cond", "y");
    Onnx__GraphProto *then_g = mb_graph("then");
    mb_node(then_g, "then_id", "Identity", "", "late", "then_y");
    mb_output(then_g, "then_y", FLOAT, NULL);
    mb_attr_graph(iff, "then_branch", then_g);
    mb_node(g, "producer", "Relu", "", "x", "late");
    mb_output(g, "y", FLOAT, "n");
    loaded l;
    expect_bad(load(m, &l), "if1", "has a subgraph that reads \"late\"");
    unload(&l);
}

static void nested_subgraph_reads_grandparent_value(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, "");
    mb_input(g, "x", FLOAT, "n");
    mb_node(g, "pre", "Relu", "", "x", "outer_x");
    Onnx__NodeProto *if1 = mb_node(g, "if1", "If", "", "cond", "y");
    Onnx__GraphProto *mid = mb_graph("mid");
    Onnx__NodeProto *if2 = mb_node(mid, "if2", "If", "", "cond", "mid_y");
    mb_output(mid, "mid_y", FLOAT, NULL);
    Onnx__GraphProto *inner = mb_graph("inner");
    mb_node(inner, "deep", "Neg", "", "outer_x", "inner_y");
    mb_output(inner, "inner_y", FLOAT, NULL);
    mb_attr_graph(if2, "then_branch", inner);
    mb_attr_graph(if1, "then_branch", mid);
    mb_output(g, "y", FLOAT, "n");
    loaded l;
    assert_null(load(m, &l));
    const tx_ir_graph *ig = l.ir->graph;
    int32_t ox = tx_ir_graph_find_value(ig, "outer_x");
    int32_t cond = tx_ir_graph_find_value(ig, "cond");
    const tx_ir_node *n1 = &ig->nodes[1];
    /* if1's subgraph reads cond (if2's input) and, through if2, outer_x. */
    assert_int_equal(n1->n_implicit_inputs, 2);
    assert_true((n1->implicit_inputs[0] == ox && n1->implicit_inputs[1] == cond) ||
                (n1->implicit_inputs[0] == cond && n1->implicit_inputs[1] == ox));

    const tx_ir_graph *mg = n1->attrs[0].g;
    int32_t mid_ox = tx_ir_graph_find_value(mg, "outer_x");
    assert_true(mid_ox >= 0);
    assert_true(mg->values[mid_ox].flags & TX_IR_VALUE_OUTER);
    assert_int_equal(mg->values[mid_ox].outer, ox);
    assert_int_equal(mg->values[mid_ox].n_consumers, 0); /* only if2's subgraph reads it */
    const tx_ir_node *n2 = &mg->nodes[0];
    assert_int_equal(n2->n_implicit_inputs, 1);
    assert_int_equal(n2->implicit_inputs[0], mid_ox);

    const tx_ir_graph *deep = n2->attrs[0].g;
    assert_ptr_equal(deep->parent, mg);
    int32_t deep_ox = tx_ir_graph_find_value(deep, "outer_x");
    assert_int_equal(deep->values[deep_ox].outer, mid_ox);
    const tx_ir_graph *owner;
    const tx_ir_value *def = tx_ir_value_resolve(deep, deep_ox, &owner);
    assert_ptr_equal(owner, ig);
    assert_ptr_equal(def, &ig->values[ox]);
    unload(&l);
}

static void function_is_kept(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    m->ir_version = 10;
    Onnx__FunctionProto *f = mb_function(m, "local.fn", "ScaledRelu", "X", "Y");
    Onnx__OperatorSetIdProto *o = mb_alloc(sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = mb_str("");
    o->has_version = 1;
    o->version = 18;
    f->opset_import[f->n_opset_import++] = o;
    f->attribute[f->n_attribute++] = mb_str("alpha");
    f->node[f->n_node++] = mb_node_new("f_relu", "Relu", "", "X", "R");
    f->node[f->n_node++] = mb_node_new("f_mul", "Mul", "", "R,R", "Y");
    mb_unknown_string(&f->base, 13, "fast");
    mb_input(g, "x", FLOAT, "4");
    /* The function's domain is deliberately not imported: local function
     * domains count as declared. */
    Onnx__NodeProto *call = mb_node(g, "call", "ScaledRelu", "local.fn", "x", "y");
    mb_unknown_string(&call->base, 8, "fast");
    mb_output(g, "y", FLOAT, "4");

    loaded l;
    assert_null(load(m, &l));
    assert_int_equal(l.ir->n_functions, 1);
    const tx_ir_function *fn = &l.ir->functions[0];
    assert_string_equal(fn->domain, "local.fn");
    assert_string_equal(fn->name, "ScaledRelu");
    assert_string_equal(fn->overload, "fast");
    assert_int_equal(fn->n_inputs, 1);
    assert_string_equal(fn->inputs[0], "X");
    assert_string_equal(fn->outputs[0], "Y");
    assert_int_equal(fn->n_attributes, 1);
    assert_string_equal(fn->attributes[0], "alpha");
    assert_int_equal(fn->n_opsets, 1);
    assert_non_null(fn->body);
    assert_int_equal(fn->body->n_nodes, 2);
    assert_int_equal(fn->body->function, 0);
    assert_int_equal(fn->body->nodes[0].opset, 18); /* the function's own import */
    int32_t X = tx_ir_graph_find_value(fn->body, "X");
    assert_true(fn->body->values[X].flags & TX_IR_VALUE_GRAPH_INPUT);
    assert_int_equal(fn->body->values[X].kind, TX_IR_KIND_UNKNOWN);
    assert_int_equal(fn->body->values[X].n_consumers, 1);
    int32_t R = tx_ir_graph_find_value(fn->body, "R");
    assert_int_equal(fn->body->values[R].n_consumers, 2); /* Mul reads it twice */

    const tx_ir_node *c = &l.ir->graph->nodes[0];
    assert_string_equal(c->overload, "fast");
    assert_int_equal(c->function, 0);
    assert_int_equal(c->opset, -1);
    assert_int_equal(tx_ir_model_find_function(l.ir, "local.fn", "ScaledRelu", "fast"), 0);
    assert_int_equal(tx_ir_model_find_function(l.ir, "local.fn", "ScaledRelu", NULL), -1);
    unload(&l);
}

static void function_body_error_is_reported(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    Onnx__FunctionProto *f = mb_function(m, "local.fn", "Bad", "X", "Y");
    f->node[f->n_node++] = mb_node_new("f_relu", "Relu", "", "Q", "Y");
    mb_input(g, "x", FLOAT, "4");
    mb_node(g, "call", "Bad", "local.fn", "x", "y");
    mb_output(g, "y", FLOAT, "4");
    loaded l;
    teexec_status *st = load(m, &l);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "in function \"local.fn.Bad\""));
    expect_bad(st, "f_relu", "reads \"Q\", which nothing defines");
    unload(&l);
}

static void attribute_accessors(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    mb_input(g, "x", FLOAT, "2,3");
    Onnx__NodeProto *n = mb_node(g, "t", "Transpose", "", "x", "y");
    int64_t perm[] = {1, 0};
    mb_attr_ints(n, "perm", perm, 2);
    mb_attr_int(n, "axis", -1);
    mb_attr_float(n, "alpha", 0.5f);
    mb_attr_string(n, "mode", "fast");
    mb_output(g, "y", FLOAT, "3,2");
    loaded l;
    assert_null(load(m, &l));
    const tx_ir_node *node = &l.ir->graph->nodes[0];

    const int64_t *ints;
    size_t count;
    assert_null(tx_ir_attr_ints(node, "perm", &ints, &count));
    assert_int_equal(count, 2);
    assert_int_equal(ints[0], 1);
    assert_int_equal(ints[1], 0);

    int64_t axis;
    assert_null(tx_ir_attr_int(node, "axis", 7, &axis));
    assert_int_equal(axis, -1);
    assert_null(tx_ir_attr_int(node, "absent", 7, &axis));
    assert_int_equal(axis, 7);

    float alpha;
    assert_null(tx_ir_attr_float(node, "alpha", 1.0f, &alpha));
    assert_true(alpha == 0.5f);

    const char *mode;
    size_t len;
    assert_null(tx_ir_attr_string(node, "mode", "slow", &mode, &len));
    assert_string_equal(mode, "fast");
    assert_int_equal(len, 4);
    assert_null(tx_ir_attr_string(node, "nothing", "slow", &mode, NULL));
    assert_string_equal(mode, "slow");

    /* Wrong type: an error naming node and attribute; out keeps the default. */
    teexec_status *st = tx_ir_attr_int(node, "alpha", 3, &axis);
    assert_int_equal(axis, 3);
    expect_bad(st, "t", "attribute \"alpha\" of type float where int is expected");
    const float *fl;
    expect_bad(tx_ir_attr_floats(node, "perm", &fl, &count), "t", "\"perm\"");
    assert_null(fl);
    assert_int_equal(count, 0);
    const Onnx__TensorProto *tp;
    assert_null(tx_ir_attr_tensor(node, "value", &tp));
    assert_null(tp);
    expect_bad(tx_ir_attr_missing(node, "value"), "t", "needs attribute \"value\"");
    assert_non_null(tx_ir_attr_find(node, "perm"));
    assert_null(tx_ir_attr_find(node, "Perm"));
    unload(&l);
}

static void many_values_grow_the_index(void **state)
{
    (void)state;
    /* A chain long enough to regrow the value table and its hash index
     * several times (MB_MAX bounds the builder; use nested arrays). */
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = base_model(&g);
    g->node = mb_alloc(600 * sizeof(void *));
    mb_input(g, "v0", FLOAT, "1");
    char in[16], out[16];
    for (int i = 0; i < 600; i++) {
        snprintf(in, sizeof in, "v%d", i);
        snprintf(out, sizeof out, "v%d", i + 1);
        mb_node(g, "", "Relu", "", in, out);
    }
    mb_output(g, "v600", FLOAT, "1");
    loaded l;
    assert_null(load(m, &l));
    const tx_ir_graph *ig = l.ir->graph;
    assert_int_equal(ig->n_values, 601);
    for (int i = 0; i <= 600; i++) {
        snprintf(in, sizeof in, "v%d", i);
        int32_t v = tx_ir_graph_find_value(ig, in);
        assert_int_equal(v, i);
        assert_int_equal(ig->values[v].producer, i - 1);
    }
    unload(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_model_with_symbolic_dims),
        cmocka_unit_test(omitted_optional_inputs_are_minus_one),
        cmocka_unit_test(node_output_defined_twice),
        cmocka_unit_test(node_output_shadows_initializer),
        cmocka_unit_test(initializer_defined_twice),
        cmocka_unit_test(duplicate_graph_input),
        cmocka_unit_test(undefined_input),
        cmocka_unit_test(unnamed_node_gets_a_label),
        cmocka_unit_test(use_before_definition),
        cmocka_unit_test(cycle_is_reported_as_cycle),
        cmocka_unit_test(self_loop_is_a_cycle),
        cmocka_unit_test(missing_opset_import),
        cmocka_unit_test(graph_output_undefined),
        cmocka_unit_test(ops_teexec_cannot_run_still_load),
        cmocka_unit_test(subgraph_reads_outer_value),
        cmocka_unit_test(subgraph_undefined_read_names_inner_node),
        cmocka_unit_test(subgraph_reading_later_outer_value),
        cmocka_unit_test(nested_subgraph_reads_grandparent_value),
        cmocka_unit_test(function_is_kept),
        cmocka_unit_test(function_body_error_is_reported),
        cmocka_unit_test(attribute_accessors),
        cmocka_unit_test(many_values_grow_the_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
