/* test_lower_forms.c - the new lowering forms on small built graphs, where
 * the zoo exports have no example: a patch Conv whose layout is rebuilt
 * (against an FP64 convolution on exactly representable values) and the
 * Convs that are not patch embeddings; tied and untied LM heads (a copy
 * that differs in one bit is not tied); tables and Attention ops that are
 * declined; quick GELU; a weight written as the Transpose of an
 * initializer; the weight_shape annotation read back by tx_param_sources /
 * tx_param_to_original, and its malformed forms. */
#include "rw_util.h"

#include "exec/tensor_internal.h"
#include "import/lower.h"
#include "model_builder.h"

enum { FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, INT64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };

static teexec_model *load_builder(const Onnx__ModelProto *pm)
{
    size_t size;
    uint8_t *bytes = mb_pack(pm, &size);
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m), "loading a built model");
    free(bytes);
    mb_free_all();
    return m;
}

static Onnx__GraphProto *new_model(Onnx__ModelProto **pm, int64_t opset)
{
    *pm = mb_model(8);
    mb_opset(*pm, "", opset);
    Onnx__GraphProto *g = mb_graph("forms");
    (*pm)->graph = g;
    return g;
}

static size_t count_ops(tx_rw_graph *g, const char *domain, const char *op)
{
    size_t n = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (!nd->dead && !strcmp(nd->domain, domain) && !strcmp(nd->op_type, op)) n++;
    }
    return n;
}

static const tx_rw_node *first_op(tx_rw_graph *g, const char *op)
{
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (!nd->dead && !strcmp(nd->op_type, op)) return nd;
    }
    fail_msg("no %s", op);
    return NULL;
}

static const char *str_attr(const tx_rw_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name) && n->attrs[i].type == TX_IR_ATTR_STRING)
            return n->attrs[i].s;
    return NULL;
}

/* The single note of `pattern` (fails when there is none or several). */
static const tx_lower_note *the_note(const tx_lower_report *r, const char *pattern)
{
    const tx_lower_note *found = NULL;
    for (size_t i = 0; i < r->n_notes; i++)
        if (!strcmp(r->notes[i].pattern, pattern)) {
            assert_null(found);
            found = &r->notes[i];
        }
    assert_non_null(found);
    if (found->reason) printf("  %s: %s\n", pattern, found->reason);
    return found;
}

/* Lowers m (all passes) into *g, *r. */
static void lower(teexec_model *m, tx_rw_graph **g, tx_lower_report **r)
{
    rw_ok(tx_rw_from_ir(m->ir, g), "from_ir");
    rw_ok(tx_lower(*g, NULL, r), "tx_lower");
}

/* ---- patch Conv ---------------------------------------------------------- */

/* x [1, 2, H, W] -> Conv(w [3, 2, 2, 2], b [3], strides, pads) -> y. */
static teexec_model *conv_model(int64_t h, const int64_t *strides, const int64_t *pads)
{
    Onnx__ModelProto *pm;
    Onnx__GraphProto *g = new_model(&pm, 17);
    char xd[64];
    snprintf(xd, sizeof xd, "1,2,%lld,4", (long long)h);
    mb_input(g, "x", FLOAT, xd);
    const int64_t wd[4] = {3, 2, 2, 2}, bd[1] = {3};
    mb_init(g, "w", wd, 4);
    mb_init(g, "b", bd, 1);
    Onnx__NodeProto *c = mb_node(g, "conv", "Conv", NULL, "x,w,b", "y");
    mb_attr_ints(c, "strides", strides, 2);
    const int64_t k[2] = {2, 2};
    mb_attr_ints(c, "kernel_shape", k, 2);
    if (pads) mb_attr_ints(c, "pads", pads, 4);
    mb_output(g, "y", FLOAT, NULL);
    return load_builder(pm);
}

/* stride = kernel, the output read as it is (no flatten/transpose after):
 * the Linear's [b, P, o] goes back to [b, o, H/2, W/2] through a Transpose
 * and a Reshape; the values equal an FP64 convolution exactly (small
 * integers: every product and sum is a float32 number). */
static void test_patch_conv_layout(void **state)
{
    (void)state;
    const int64_t s2[2] = {2, 2};
    teexec_model *m = conv_model(4, s2, NULL);
    tx_rw_graph *g;
    tx_lower_report *r;
    lower(m, &g, &r);
    assert_true(the_note(r, "Linear(patch Conv)")->lowered);
    assert_int_equal(count_ops(g, "", "Conv"), 0);
    assert_int_equal(count_ops(g, "te.ops", "Linear"), 1);
    assert_int_equal(count_ops(g, "te.ops", "Bias"), 1);
    const tx_rw_node *lin = first_op(g, "Linear");
    assert_string_equal(lin->inputs[1], "w");
    assert_string_equal(str_attr(lin, "weight_layout"), "NK");
    tx_rw_value_type wt;
    assert_true(tx_rw_value_type_of(g, "w", &wt));
    assert_int_equal(wt.rank, 2);
    assert_int_equal(wt.dims[0], 3);
    assert_int_equal(wt.dims[1], 8);
    teexec_model *low = rw_emit_load(g);

    float xv[32];
    for (int i = 0; i < 32; i++) xv[i] = (float)(i % 7 - 3);
    const int64_t xd[4] = {1, 2, 4, 4};
    rw_inputs in = {0};
    in.names[0] = "x";
    rw_ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 4, xd, xv, sizeof xv, &in.t[0]), "x");
    in.n = 1;
    teexec_tensor *out[RW_MAX_IO];
    size_t n = 0;
    rw_ok(rw_run(low, &in, out, &n), "lowered run");
    assert_int_equal(teexec_tensor_rank(out[0]), 4);
    const int64_t *od = teexec_tensor_dims(out[0]);
    assert_true(od[0] == 1 && od[1] == 3 && od[2] == 2 && od[3] == 2);
    const float *y = teexec_tensor_data_const(out[0]);
    /* the builder's initializers hold 0, 1, 2, ... */
    for (int o = 0; o < 3; o++)
        for (int py = 0; py < 2; py++)
            for (int px = 0; px < 2; px++) {
                double acc = o; /* bias */
                for (int c = 0; c < 2; c++)
                    for (int ky = 0; ky < 2; ky++)
                        for (int kx = 0; kx < 2; kx++)
                            acc += (double)((((o * 2 + c) * 2 + ky) * 2) + kx) *
                                   xv[(c * 4 + py * 2 + ky) * 4 + px * 2 + kx];
                assert_true(y[(o * 2 + py) * 2 + px] == (float)acc);
            }
    rw_outputs_free(out, n);
    rw_inputs_free(&in);

    /* the weight's gradient (or value) comes back in the Conv's shape */
    tx_param_source *src = NULL;
    size_t ns = 0;
    rw_ok(tx_param_sources(low->ir->graph, &src, &ns), "param_sources");
    const tx_param_source *sw = NULL;
    for (size_t k = 0; k < ns; k++)
        if (!strcmp(src[k].original, "w")) sw = &src[k];
    assert_non_null(sw);
    assert_int_equal(sw->orig_rank, 4);
    tx_tensor flat, back;
    const int64_t fd[2] = {3, 8};
    rw_ok(tx_tensor_alloc(&flat, TEEXEC_DTYPE_FLOAT, 2, fd), "alloc");
    for (int i = 0; i < 24; i++) ((float *)flat.data)[i] = (float)i;
    rw_ok(tx_param_to_original(sw, &flat, &back), "to_original");
    assert_int_equal(back.rank, 4);
    assert_true(back.dims[0] == 3 && back.dims[1] == 2 && back.dims[2] == 2 && back.dims[3] == 2);
    assert_memory_equal(back.data, flat.data, 24 * sizeof(float));
    tx_tensor_release(&flat);
    tx_tensor_release(&back);
    tx_param_sources_free(src, ns);

    teexec_model_destroy(low);
    tx_lower_report_free(r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* Convs that are not patch embeddings stay, each with its reason. */
static void check_conv_declined(int64_t h, const int64_t *strides, const int64_t *pads,
                                const char *why)
{
    teexec_model *m = conv_model(h, strides, pads);
    tx_rw_graph *g;
    tx_lower_report *r;
    lower(m, &g, &r);
    const tx_lower_note *n = the_note(r, "Linear(patch Conv)");
    assert_false(n->lowered);
    assert_non_null(strstr(n->reason, why));
    assert_int_equal(count_ops(g, "", "Conv"), 1);
    assert_int_equal(count_ops(g, "te.ops", "Linear"), 0);
    tx_lower_report_free(r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

static void test_conv_declined(void **state)
{
    (void)state;
    const int64_t s1[2] = {1, 1}, s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
    check_conv_declined(4, s1, NULL, "strides [1, 1] are not the kernel");
    check_conv_declined(4, s2, p1, "pads");
    check_conv_declined(5, s2, NULL, "not a whole number of");
}

/* ---- tied heads -------------------------------------------------------- */

/* ids [1, 3] -> Gather(table [5, 4]) -> MatMul(head [4, 5]) -> logits,
 * head = table's transpose, with one element off when `differ`. */
static teexec_model *tied_model(bool differ)
{
    Onnx__ModelProto *pm;
    Onnx__GraphProto *g = new_model(&pm, 17);
    mb_input(g, "ids", INT64, "1,3");
    const int64_t td[2] = {5, 4}, hd[2] = {4, 5};
    mb_init(g, "table", td, 2);
    mb_init(g, "head", hd, 2);
    float *t = (float *)g->initializer[0]->raw_data.data, *h = (float *)g->initializer[1]->raw_data.data;
    for (int v = 0; v < 5; v++)
        for (int k = 0; k < 4; k++) {
            t[v * 4 + k] = (float)(v * 4 + k) * 0.125f - 1.0f;
            h[k * 5 + v] = t[v * 4 + k];
        }
    if (differ) h[7] = nextafterf(h[7], 10.0f);
    mb_node(g, "embed", "Gather", NULL, "table,ids", "e");
    mb_node(g, "lm_head", "MatMul", NULL, "e,head", "logits");
    mb_output(g, "logits", FLOAT, NULL);
    return load_builder(pm);
}

static void run_same(const teexec_model *a, const teexec_model *b)
{
    const int64_t ids[3] = {4, 0, 2}, d[2] = {1, 3};
    rw_inputs in = {0};
    in.names[0] = "ids";
    rw_ok(teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 2, d, ids, sizeof ids, &in.t[0]), "ids");
    in.n = 1;
    teexec_tensor *oa[RW_MAX_IO], *ob[RW_MAX_IO];
    size_t na = 0, nb = 0;
    rw_ok(rw_run(a, &in, oa, &na), "original");
    rw_ok(rw_run(b, &in, ob, &nb), "lowered");
    assert_true(rw_bit_equal(oa[0], ob[0]));
    rw_outputs_free(oa, na);
    rw_outputs_free(ob, nb);
    rw_inputs_free(&in);
}

/* The head's Linear reads the table; the copy is dropped and maps to the
 * table, transposed; the table maps to itself. */
static void test_tied_head(void **state)
{
    (void)state;
    teexec_model *m = tied_model(false);
    tx_rw_graph *g;
    tx_lower_report *r;
    lower(m, &g, &r);
    assert_int_equal(count_ops(g, "te.ops", "Embedding"), 1);
    const tx_rw_node *lin = first_op(g, "Linear");
    assert_string_equal(lin->inputs[1], "table");
    assert_string_equal(str_attr(lin, "weight_source"), "head");
    assert_string_equal(str_attr(lin, "weight_layout"), "KN");
    teexec_model *low = rw_emit_load(g);
    assert_int_equal(low->ir->graph->n_initializers, 1); /* the copy is gone */
    run_same(m, low);
    tx_param_source *src = NULL;
    size_t ns = 0;
    rw_ok(tx_param_sources(low->ir->graph, &src, &ns), "param_sources");
    assert_int_equal(ns, 2);
    bool head = false, table = false;
    for (size_t k = 0; k < ns; k++) {
        assert_string_equal(src[k].lowered, "table");
        if (!strcmp(src[k].original, "head")) head = src[k].transposed;
        if (!strcmp(src[k].original, "table")) table = !src[k].transposed;
    }
    assert_true(head && table);
    tx_param_sources_free(src, ns);
    teexec_model_destroy(low);
    tx_lower_report_free(r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* A head weight one ulp away from the table's transpose is its own weight:
 * transposed in place under its own name. */
static void test_untied_head(void **state)
{
    (void)state;
    teexec_model *m = tied_model(true);
    tx_rw_graph *g;
    tx_lower_report *r;
    lower(m, &g, &r);
    const tx_rw_node *lin = first_op(g, "Linear");
    assert_string_equal(lin->inputs[1], "head");
    assert_string_equal(str_attr(lin, "weight_source"), "head");
    teexec_model *low = rw_emit_load(g);
    assert_int_equal(low->ir->graph->n_initializers, 2);
    run_same(m, low);
    teexec_model_destroy(low);
    tx_lower_report_free(r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* ---- declined tables and Attention ops ---------------------------------- */

/* A table callers pass in is not a parameter: the Gather stays. */
static void test_embedding_table_input(void **state)
{
    (void)state;
    Onnx__ModelProto *pm;
    Onnx__GraphProto *g = new_model(&pm, 17);
    mb_input(g, "table", FLOAT, "5,4");
    mb_input(g, "ids", INT64, "1,3");
    mb_node(g, "embed", "Gather", NULL, "table,ids", "e");
    mb_output(g, "e", FLOAT, NULL);
    teexec_model *m = load_builder(pm);
    tx_rw_graph *rg;
    tx_lower_report *r;
    lower(m, &rg, &r);
    const tx_lower_note *n = the_note(r, "Embedding");
    assert_false(n->lowered);
    assert_non_null(strstr(n->reason, "graph input"));
    assert_int_equal(count_ops(rg, "", "Gather"), 1);
    tx_lower_report_free(r);
    tx_rw_free(rg);
    teexec_model_destroy(m);
}

/* Attention (opset 23) with past key/value inputs keeps a KV cache
 * DotProductAttention does not have: declined. */
static void test_attention_op_past(void **state)
{
    (void)state;
    Onnx__ModelProto *pm;
    Onnx__GraphProto *g = new_model(&pm, 23);
    mb_input(g, "q", FLOAT, "1,2,4,8");
    mb_input(g, "k", FLOAT, "1,2,4,8");
    mb_input(g, "v", FLOAT, "1,2,4,8");
    mb_input(g, "pk", FLOAT, "1,2,3,8");
    mb_input(g, "pv", FLOAT, "1,2,3,8");
    mb_node(g, "attn", "Attention", NULL, "q,k,v,,pk,pv", "y");
    mb_output(g, "y", FLOAT, NULL);
    teexec_model *m = load_builder(pm);
    tx_rw_graph *rg;
    tx_lower_report *r;
    lower(m, &rg, &r);
    const tx_lower_note *n = the_note(r, "DotProductAttention");
    assert_false(n->lowered);
    assert_non_null(strstr(n->reason, "past key/value"));
    assert_int_equal(count_ops(rg, "", "Attention"), 1);
    tx_lower_report_free(r);
    tx_rw_free(rg);
    teexec_model_destroy(m);
}

/* ---- QGELU and a transposed weight ------------------------------------------ */

/* One float input x [2, 4] with small integer values, outputs of a and b
 * bit for bit equal (or rel-L2 < tol when tol > 0). */
static void same_outputs(const teexec_model *a, const teexec_model *b, double tol)
{
    float xv[8];
    for (int i = 0; i < 8; i++) xv[i] = (float)(i % 5 - 2);
    const int64_t d[2] = {2, 4};
    rw_inputs in = {0};
    in.names[0] = "x";
    rw_ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, d, xv, sizeof xv, &in.t[0]), "x");
    in.n = 1;
    teexec_tensor *oa[RW_MAX_IO], *ob[RW_MAX_IO];
    size_t na = 0, nb = 0;
    rw_ok(rw_run(a, &in, oa, &na), "original");
    rw_ok(rw_run(b, &in, ob, &nb), "lowered");
    if (tol > 0) {
        double e = rw_rel_l2(ob[0], oa[0]);
        printf("  rel-L2 %.3g\n", e);
        assert_true(e < tol);
    } else {
        assert_true(rw_bit_equal(oa[0], ob[0]));
    }
    rw_outputs_free(oa, na);
    rw_outputs_free(ob, nb);
    rw_inputs_free(&in);
}

/* y = x * sigmoid(c * x) */
static teexec_model *qgelu_model(float c)
{
    Onnx__ModelProto *pm;
    Onnx__GraphProto *g = new_model(&pm, 17);
    mb_input(g, "x", FLOAT, "2,4");
    const int64_t one[1] = {1};
    mb_init(g, "c", one, 0);
    *(float *)g->initializer[0]->raw_data.data = c;
    mb_node(g, "scale", "Mul", NULL, "x,c", "xs");
    mb_node(g, "sig", "Sigmoid", NULL, "xs", "s");
    mb_node(g, "gate", "Mul", NULL, "x,s", "y");
    mb_output(g, "y", FLOAT, "2,4");
    return load_builder(pm);
}

static void test_qgelu(void **state)
{
    (void)state;
    teexec_model *m = qgelu_model(1.702f);
    tx_rw_graph *g;
    tx_lower_report *r;
    lower(m, &g, &r);
    assert_true(the_note(r, "QGELU")->lowered);
    assert_int_equal(count_ops(g, "te.ops", "QGELU"), 1);
    assert_int_equal(count_ops(g, "", "Sigmoid"), 0);
    teexec_model *low = rw_emit_load(g);
    same_outputs(m, low, 1e-6);
    teexec_model_destroy(low);
    tx_lower_report_free(r);
    tx_rw_free(g);
    teexec_model_destroy(m);

    /* another constant is another function: declined, named */
    m = qgelu_model(1.5f);
    lower(m, &g, &r);
    const tx_lower_note *n = the_note(r, "QGELU");
    assert_false(n->lowered);
    assert_non_null(strstr(n->reason, "1.5"));
    assert_int_equal(count_ops(g, "", "Sigmoid"), 1);
    tx_lower_report_free(r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* MatMul(x, Transpose(W)) with W [3, 4]: the Linear reads W as it is. */
static void test_transposed_weight(void **state)
{
    (void)state;
    Onnx__ModelProto *pm;
    Onnx__GraphProto *g = new_model(&pm, 17);
    mb_input(g, "x", FLOAT, "2,4");
    const int64_t wd[2] = {3, 4};
    mb_init(g, "W", wd, 2);
    Onnx__NodeProto *t = mb_node(g, "wt", "Transpose", NULL, "W", "Wt");
    const int64_t perm[2] = {1, 0};
    mb_attr_ints(t, "perm", perm, 2);
    mb_node(g, "mm", "MatMul", NULL, "x,Wt", "y");
    mb_output(g, "y", FLOAT, "2,3");
    teexec_model *m = load_builder(pm);
    tx_rw_graph *rg;
    tx_lower_report *r;
    lower(m, &rg, &r);
    const tx_rw_node *lin = first_op(rg, "Linear");
    assert_string_equal(lin->inputs[1], "W");
    assert_string_equal(str_attr(lin, "weight_source"), "W");
    assert_string_equal(str_attr(lin, "weight_layout"), "NK");
    assert_int_equal(count_ops(rg, "", "Transpose"), 0);
    teexec_model *low = rw_emit_load(rg);
    same_outputs(m, low, 0);
    teexec_model_destroy(low);
    tx_lower_report_free(r);
    tx_rw_free(rg);
    teexec_model_destroy(m);
}

/* ---- weight_shape ---------------------------------------------------------- */

/* A te.ops Linear annotated with weight_shape `shape` (n entries). */
static teexec_model *annotated(const int64_t *shape, size_t n)
{
    Onnx__ModelProto *pm = mb_model(8);
    mb_opset(pm, "", 17);
    mb_opset(pm, "te.ops", 1);
    Onnx__GraphProto *g = mb_graph("annotated");
    pm->graph = g;
    mb_input(g, "x", FLOAT, "2,4");
    const int64_t wd[2] = {3, 4};
    mb_init(g, "w", wd, 2);
    Onnx__NodeProto *l = mb_node(g, "lin", "Linear", "te.ops", "x,w", "y");
    mb_attr_string(l, "weight_source", "w");
    mb_attr_string(l, "weight_layout", "NK");
    mb_attr_ints(l, "weight_shape", shape, n);
    mb_output(g, "y", FLOAT, "2,3");
    return load_builder(pm);
}

static void test_weight_shape_malformed(void **state)
{
    (void)state;
    const int64_t neg[2] = {3, -4};
    teexec_model *m = annotated(neg, 2);
    tx_param_source *src = NULL;
    size_t n = 0;
    teexec_status *st = tx_param_sources(m->ir->graph, &src, &n);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
    printf("  %s\n", teexec_status_message(st));
    assert_non_null(strstr(teexec_status_message(st), "weight_shape"));
    teexec_status_destroy(st);
    teexec_model_destroy(m);

    /* well formed, but not the weight's 12 elements: refused when mapped */
    const int64_t wrong[3] = {3, 2, 3};
    m = annotated(wrong, 3);
    rw_ok(tx_param_sources(m->ir->graph, &src, &n), "param_sources");
    const tx_param_source *s = NULL;
    for (size_t k = 0; k < n; k++)
        if (!strcmp(src[k].original, "w")) s = &src[k];
    assert_non_null(s);
    tx_tensor t, back;
    const int64_t d[2] = {3, 4};
    rw_ok(tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT, 2, d), "alloc");
    st = tx_param_to_original(s, &t, &back);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    printf("  %s\n", teexec_status_message(st));
    teexec_status_destroy(st);
    assert_null(back.data);
    tx_tensor_release(&t);
    tx_param_sources_free(src, n);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patch_conv_layout),   cmocka_unit_test(test_conv_declined),
        cmocka_unit_test(test_tied_head),           cmocka_unit_test(test_untied_head),
        cmocka_unit_test(test_embedding_table_input), cmocka_unit_test(test_attention_op_past),
        cmocka_unit_test(test_qgelu),               cmocka_unit_test(test_transposed_weight),
        cmocka_unit_test(test_weight_shape_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
