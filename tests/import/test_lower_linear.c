/* Tests for the Linear pass (import/lower_linear.c) and the parameter map
 * (import/param_map.c): MatMul + Add and Gemm lowered to te.ops Linear +
 * Bias with the right weight layout, the declined forms with their
 * reasons, shared weights, and mapping lowered weights back. */
#include "rw_util.h"

#include "import/lower.h"
#include "model_builder.h"

enum { FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT };

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

static Onnx__GraphProto *new_model(Onnx__ModelProto **pm)
{
    *pm = mb_model(8);
    mb_opset(*pm, "", 17);
    Onnx__GraphProto *g = mb_graph("lin");
    (*pm)->graph = g;
    return g;
}

/* Counts live nodes of (domain, op). */
static size_t count_ops(tx_rw_graph *g, const char *domain, const char *op)
{
    size_t n = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (!nd->dead && strcmp(nd->domain, domain) == 0 && strcmp(nd->op_type, op) == 0) n++;
    }
    return n;
}

static int64_t find_op(tx_rw_graph *g, const char *op, size_t nth)
{
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (!nd->dead && strcmp(nd->op_type, op) == 0 && nth-- == 0) return (int64_t)i;
    }
    return -1;
}

static const tx_lower_note *find_note(const tx_lower_report *r, const char *pattern,
                                      const char *node)
{
    for (size_t i = 0; i < r->n_notes; i++)
        if (strcmp(r->notes[i].pattern, pattern) == 0 && strcmp(r->notes[i].node, node) == 0)
            return &r->notes[i];
    return NULL;
}

/* One float input x of the given shape, values a fixed ramp. */
static void make_x(rw_inputs *in, int32_t rank, const int64_t *dims)
{
    memset(in, 0, sizeof *in);
    size_t n = 1;
    for (int32_t d = 0; d < rank; d++) n *= (size_t)dims[d];
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) v[i] = (float)((int)(i * 7 % 11) - 5) * 0.25f;
    in->names[0] = "x";
    rw_ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, rank, dims, v, n * sizeof *v, &in->t[0]),
          "x");
    in->n = 1;
    free(v);
}

/* Runs both models on `in` and compares output 0 (rel-L2 < 1e-6). */
static void same_result(const teexec_model *a, const teexec_model *b, const rw_inputs *in)
{
    teexec_tensor *oa[RW_MAX_IO], *ob[RW_MAX_IO];
    size_t na = 0, nb = 0;
    rw_ok(rw_run(a, in, oa, &na), "original");
    rw_ok(rw_run(b, in, ob, &nb), "lowered");
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        double e = rw_rel_l2(ob[i], oa[i]);
        if (!(e < 1e-6)) fail_msg("output %zu: rel-L2 %g", i, e);
    }
    rw_outputs_free(oa, na);
    rw_outputs_free(ob, nb);
}

static void lower_linear_only(tx_rw_graph *g, tx_lower_report **r)
{
    tx_lower_options o;
    memset(&o, 0, sizeof o);
    o.linear = true;
    rw_ok(tx_lower(g, &o, r), "tx_lower (linear)");
}

/* y = x[2,3,4] @ W[4,5] + b[5] -> Linear(KN) + Bias. */
static void test_matmul_add(void **state)
{
    (void)state;
    Onnx__ModelProto *pm;
    Onnx__GraphProto *gp = new_model(&pm);
    mb_input(gp, "x", FLOAT, "2,3,4");
    mb_output(gp, "y", FLOAT, "2,3,5");
    int64_t wd[2] = {4, 5}, bd[1] = {5};
    mb_init(gp, "W", wd, 2);
    mb_init(gp, "b", bd, 1);
    mb_node(gp, "mm", "MatMul", NULL, "x,W", "h");
    mb_node(gp, "add", "Add", NULL, "b,h", "y"); /* bias first: either order */
    teexec_model *m = load_builder(pm);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "from_ir");
    tx_lower_report *r = NULL;
    lower_linear_only(g, &r);
    assert_int_equal(count_ops(g, "te.ops", "Linear"), 1);
    assert_int_equal(count_ops(g, "te.ops", "Bias"), 1);
    assert_int_equal(count_ops(g, "", "MatMul") + count_ops(g, "", "Add"), 0);
    int64_t li = find_op(g, "Linear", 0);
    assert_string_equal(tx_rw_node_at(g, (size_t)li)->name, "mm");
    assert_string_equal(tx_rw_get_attr(g, (size_t)li, "weight_source")->s, "W");
    assert_string_equal(tx_rw_get_attr(g, (size_t)li, "weight_layout")->s, "KN");
    assert_string_equal(tx_rw_node_at(g, (size_t)li)->inputs[1], "W");
    int64_t bi = find_op(g, "Bias", 0);
    assert_string_equal(tx_rw_get_attr(g, (size_t)bi, "bias_source")->s, "b");
    assert_string_equal(tx_rw_node_at(g, (size_t)bi)->outputs[0], "y");
    assert_non_null(find_note(r, "Linear", "mm"));
    assert_true(find_note(r, "Linear", "mm")->lowered);
    /* W is stored [5, 4] under its own name: W'[n][k] = W[k][n] = k*5 + n. */
    tx_tensor t;
    assert_true(tx_rw_constant(g, "W", &t));
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.dims[0], 5);
    assert_int_equal(t.dims[1], 4);
    assert_true(((float *)t.data)[1 * 4 + 2] == (float)(2 * 5 + 1));
    tx_tensor_release(&t);

    teexec_model *m2 = rw_emit_load(g);
    int64_t xd[3] = {2, 3, 4};
    rw_inputs in;
    make_x(&in, 3, xd);
    same_result(m, m2, &in);
    rw_inputs_free(&in);

    /* The map back: W is the transpose of the lowered W; b is itself. */
    tx_param_source *src = NULL;
    size_t n = 0;
    rw_ok(tx_param_sources(m2->ir->graph, &src, &n), "param_sources");
    assert_int_equal(n, 2);
    const tx_param_source *sw = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(src[i].original, "W") == 0) sw = &src[i];
    assert_non_null(sw);
    assert_string_equal(sw->lowered, "W");
    assert_true(sw->transposed);
    tx_tensor lowered, back;
    assert_true(tx_rw_constant(g, "W", &lowered));
    rw_ok(tx_param_to_original(sw, &lowered, &back), "to_original");
    assert_int_equal(back.dims[0], 4);
    assert_int_equal(back.dims[1], 5);
    for (int i = 0; i < 20; i++) assert_true(((float *)back.data)[i] == (float)i);
    tx_tensor_release(&back);
    tx_tensor_release(&lowered);
    tx_param_sources_free(src, n);

    /* Lowering again changes nothing. */
    size_t before = tx_rw_node_count(g);
    tx_lower_report *r2 = NULL;
    rw_ok(tx_lower(g, NULL, &r2), "lower again");
    assert_int_equal(tx_rw_node_count(g), before);
    tx_lower_report_free(r2);

    tx_lower_report_free(r);
    teexec_model_destroy(m2);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* Gemm(x, B[N,K], C[N], transB=1) keeps B as is; Gemm transB=0 transposes. */
static void test_gemm(void **state)
{
    (void)state;
    Onnx__ModelProto *pm;
    Onnx__GraphProto *gp = new_model(&pm);
    mb_input(gp, "x", FLOAT, "3,4");
    mb_output(gp, "y", FLOAT, "3,6");
    int64_t bd[2] = {5, 4}, cd[1] = {5}, b2d[2] = {5, 6};
    mb_init(gp, "B", bd, 2);
    mb_init(gp, "C", cd, 1);
    mb_init(gp, "B2", b2d, 2);
    Onnx__NodeProto *g1 = mb_node(gp, "g1", "Gemm", NULL, "x,B,C", "h");
    mb_attr_int(g1, "transB", 1);
    mb_node(gp, "g2", "Gemm", NULL, "h,B2", "y");
    teexec_model *m = load_builder(pm);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "from_ir");
    tx_lower_report *r = NULL;
    lower_linear_only(g, &r);
    assert_int_equal(count_ops(g, "te.ops", "Linear"), 2);
    assert_int_equal(count_ops(g, "te.ops", "Bias"), 1);
    int64_t l1 = find_op(g, "Linear", 0), l2 = find_op(g, "Linear", 1);
    assert_string_equal(tx_rw_get_attr(g, (size_t)l1, "weight_layout")->s, "NK");
    assert_string_equal(tx_rw_get_attr(g, (size_t)l2, "weight_layout")->s, "KN");
    tx_rw_value_type vt;
    assert_true(tx_rw_value_type_of(g, "B", &vt));
    assert_int_equal(vt.dims[0], 5); /* untouched */
    assert_true(tx_rw_value_type_of(g, "B2", &vt));
    assert_int_equal(vt.dims[0], 6); /* transposed */
    teexec_model *m2 = rw_emit_load(g);
    int64_t xd[2] = {3, 4};
    rw_inputs in;
    make_x(&in, 2, xd);
    same_result(m, m2, &in);
    rw_inputs_free(&in);
    tx_lower_report_free(r);
    teexec_model_destroy(m2);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* Declined forms keep their standard ops and say why. */
static void test_declined(void **state)
{
    (void)state;
    Onnx__ModelProto *pm;
    Onnx__GraphProto *gp = new_model(&pm);
    mb_input(gp, "x", FLOAT, "4,4");
    mb_input(gp, "Win", FLOAT, "4,4");
    mb_output(gp, "y", FLOAT, "4,4");
    int64_t wd[2] = {4, 4}, cd[2] = {1, 4};
    mb_init(gp, "W", wd, 2);
    mb_init(gp, "C2", cd, 2);
    Onnx__NodeProto *ta = mb_node(gp, "transA", "Gemm", NULL, "x,W", "a");
    mb_attr_int(ta, "transA", 1);
    Onnx__NodeProto *al = mb_node(gp, "alpha", "Gemm", NULL, "a,W", "b");
    mb_attr_float(al, "alpha", 2.0f);
    mb_node(gp, "bycall", "MatMul", NULL, "b,Win", "c");   /* weight is a graph input */
    mb_node(gp, "act", "MatMul", NULL, "c,c", "d");        /* two activations: no note */
    mb_node(gp, "c2gemm", "Gemm", NULL, "d,W,C2", "y");   /* C is [1, N] */
    teexec_model *m = load_builder(pm);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "from_ir");
    tx_lower_report *r = NULL;
    lower_linear_only(g, &r);
    assert_int_equal(count_ops(g, "te.ops", "Linear"), 0);
    const tx_lower_note *n;
    assert_non_null(n = find_note(r, "Linear", "transA"));
    assert_false(n->lowered);
    assert_non_null(strstr(n->reason, "transA"));
    assert_non_null(n = find_note(r, "Linear", "alpha"));
    assert_non_null(strstr(n->reason, "alpha"));
    assert_non_null(n = find_note(r, "Linear", "bycall"));
    assert_non_null(strstr(n->reason, "graph input"));
    assert_null(find_note(r, "Linear", "act"));
    assert_non_null(n = find_note(r, "Linear", "c2gemm"));
    assert_non_null(strstr(n->reason, "C2"));
    tx_lower_report_free(r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* A weight read by two MatMuls is transposed once for both; a weight also
 * read by an Add stays as it is. An Add of a [1, N] constant is no Bias. */
static void test_shared_weights(void **state)
{
    (void)state;
    Onnx__ModelProto *pm;
    Onnx__GraphProto *gp = new_model(&pm);
    mb_input(gp, "x", FLOAT, "2,4");
    mb_output(gp, "y", FLOAT, "2,4");
    mb_output(gp, "z", FLOAT, "4,4");
    int64_t wd[2] = {4, 4}, vd[2] = {4, 4}, cd[2] = {1, 4};
    mb_init(gp, "W", wd, 2);
    mb_init(gp, "V", vd, 2);
    mb_init(gp, "C", cd, 2);
    mb_node(gp, "m1", "MatMul", NULL, "x,W", "h1");
    mb_node(gp, "m2", "MatMul", NULL, "h1,W", "h2");
    mb_node(gp, "addc", "Add", NULL, "h2,C", "h3");
    mb_node(gp, "m3", "MatMul", NULL, "h3,V", "y");
    mb_node(gp, "vv", "Add", NULL, "V,V", "z");
    teexec_model *m = load_builder(pm);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "from_ir");
    tx_lower_report *r = NULL;
    lower_linear_only(g, &r);
    assert_int_equal(count_ops(g, "te.ops", "Linear"), 2);
    assert_int_equal(count_ops(g, "te.ops", "Bias"), 0);
    assert_int_equal(count_ops(g, "", "MatMul"), 1);
    assert_int_equal(count_ops(g, "", "Add"), 2);
    const tx_lower_note *n = find_note(r, "Linear", "m3");
    assert_non_null(n);
    assert_false(n->lowered);
    assert_non_null(strstr(n->reason, "vv"));
    teexec_model *m2 = rw_emit_load(g);
    int64_t xd[2] = {2, 4};
    rw_inputs in;
    make_x(&in, 2, xd);
    same_result(m, m2, &in);
    rw_inputs_free(&in);
    /* Both Linears name W; the map lists it once. */
    tx_param_source *src = NULL;
    size_t cnt = 0, w_entries = 0;
    rw_ok(tx_param_sources(m2->ir->graph, &src, &cnt), "param_sources");
    for (size_t i = 0; i < cnt; i++) w_entries += strcmp(src[i].original, "W") == 0;
    assert_int_equal(w_entries, 1);
    tx_param_sources_free(src, cnt);
    tx_lower_report_free(r);
    teexec_model_destroy(m2);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* Merged weights (as the SwiGLU pass writes them): rows picked, transposed back. */
static void test_param_to_original_split(void **state)
{
    (void)state;
    tx_param_source s = {"b", "merged", true, 2, 3, 0, {0}, 1};
    float v[5 * 2];
    for (int i = 0; i < 10; i++) v[i] = (float)i;
    int64_t d[2] = {5, 2};
    tx_tensor t, out;
    rw_ok(tx_tensor_wrap(&t, TEEXEC_DTYPE_FLOAT, 2, d, v), "wrap");
    rw_ok(tx_param_to_original(&s, &t, &out), "to_original");
    assert_int_equal(out.dims[0], 2);
    assert_int_equal(out.dims[1], 3);
    /* rows 2..4 of [5,2] are {4,5},{6,7},{8,9}; transposed: {4,6,8},{5,7,9} */
    const float want[6] = {4, 6, 8, 5, 7, 9};
    assert_memory_equal(out.data, want, sizeof want);
    tx_tensor_release(&out);
    s.row_offset = 4;
    teexec_status *st = tx_param_to_original(&s, &t, &out);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
}

/* Quantized exports (models/quant_*): fake-quantized float weights become
 * annotated Linears, their Q/DQ pairs gone; stored-quantized weights stay. */
static void lower_quant_model(const char *name, tx_rw_graph **gout, teexec_model **mout,
                              tx_lower_report **rout)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", rw_source_root(), name);
    rw_ok(teexec_model_load_file(path, NULL, mout), path);
    rw_ok(tx_rw_from_ir((*mout)->ir, gout), "from_ir");
    tx_lower_options o;
    memset(&o, 0, sizeof o);
    o.linear = o.quant = true;
    rw_ok(tx_lower(*gout, &o, rout), "tx_lower (linear, quant)");
    printf("%s:", name);
    for (size_t i = 0; i < (*rout)->n_notes; i++)
        printf(" [%s %s: %s]", (*rout)->notes[i].pattern, (*rout)->notes[i].node,
               (*rout)->notes[i].lowered ? "lowered" : (*rout)->notes[i].reason);
    printf("\n");
}

static void test_quant_fake_quantized(void **state)
{
    (void)state;
    static const char *const names[] = {"quant_fp8_trt", "quant_mxfp8_trt"};
    static const char *const formats[] = {"fp8-tensor", "mxfp8"};
    for (size_t k = 0; k < 2; k++) {
        tx_rw_graph *g;
        teexec_model *m;
        tx_lower_report *r;
        lower_quant_model(names[k], &g, &m, &r);
        assert_int_equal(count_ops(g, "te.ops", "Linear"), 1);
        int64_t li = find_op(g, "Linear", 0);
        const tx_rw_attr *qi = tx_rw_get_attr(g, (size_t)li, "quant_input");
        const tx_rw_attr *qw = tx_rw_get_attr(g, (size_t)li, "quant_weight");
        assert_non_null(qi);
        assert_non_null(qw);
        assert_string_equal(qi->s, formats[k]);
        assert_string_equal(qw->s, formats[k]);
        /* The dequantizers went; quantizers stay only where the model
         * lists their bytes as graph outputs (these test models do). */
        size_t dq = 0;
        for (size_t i = 0; i < tx_rw_node_count(g); i++) {
            const tx_rw_node *nd = tx_rw_node_at(g, i);
            if (nd->dead || !strstr(nd->op_type, "Quantize")) continue;
            if (strstr(nd->op_type, "Dequantize")) dq++;
            else {
                bool listed = false;
                for (size_t o = 0; o < nd->n_outputs; o++)
                    listed |= tx_rw_is_graph_output(g, nd->outputs[o]);
                assert_true(listed);
            }
        }
        assert_int_equal(dq, 0);
        /* The Linear reads the float weight itself: a trainable parameter. */
        tx_rw_value_type wt;
        assert_true(tx_rw_value_type_of(g, tx_rw_node_at(g, (size_t)li)->inputs[1], &wt));
        assert_int_equal(wt.dtype, TEEXEC_DTYPE_FLOAT);
        const tx_lower_note *n = find_note(r, "Linear(quantized)", tx_rw_node_at(g, (size_t)li)->name);
        assert_non_null(n);
        assert_true(n->lowered);
        /* The lowered model computes in high precision: close to the
         * quantized original within FP8's tolerance, not equal to it. */
        teexec_model *m2 = rw_emit_load(g);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/models/%s/inputs", rw_source_root(), names[k]);
        rw_inputs in;
        rw_inputs_npy(m, dir, &in);
        teexec_tensor *oa[RW_MAX_IO], *ob[RW_MAX_IO];
        size_t na = 0, nb = 0;
        rw_ok(rw_run(m, &in, oa, &na), "original");
        rw_ok(rw_run(m2, &in, ob, &nb), "lowered");
        double e = rw_rel_l2(ob[0], oa[0]);
        printf("  %s: rel-L2 to the quantized original %.3g\n", names[k], e);
        assert_true(e > 0); /* the inputs include outliers FP8 saturates */
        if (k == 0) {
            /* y = x W^T + b in float, from the lowered graph's own parameters. */
            tx_tensor w, b;
            assert_true(tx_rw_constant(g, "w", &w));
            assert_true(tx_rw_constant(g, "b", &b));
            const float *x = teexec_tensor_data_const(in.t[0]);
            const float *y = teexec_tensor_data_const(ob[0]);
            size_t N = (size_t)w.dims[0], K = (size_t)w.dims[1];
            size_t M = (size_t)(teexec_tensor_element_count(in.t[0]) / K);
            double num = 0, den = 0;
            for (size_t row = 0; row < M; row++)
                for (size_t c = 0; c < N; c++) {
                    double acc = ((const float *)b.data)[c];
                    for (size_t kk = 0; kk < K; kk++)
                        acc += (double)x[row * K + kk] * ((const float *)w.data)[c * K + kk];
                    num += (y[row * N + c] - acc) * (y[row * N + c] - acc);
                    den += acc * acc;
                }
            printf("  %s: rel-L2 to x W^T + b in float %.3g\n", names[k], sqrt(num / den));
            assert_true(sqrt(num / den) < 1e-6);
            tx_tensor_release(&w);
            tx_tensor_release(&b);
        }
        rw_outputs_free(oa, na);
        rw_outputs_free(ob, nb);
        rw_inputs_free(&in);
        teexec_model_destroy(m2);
        tx_lower_report_free(r);
        tx_rw_free(g);
        teexec_model_destroy(m);
    }
}

/* Weights stored quantized have no float parameter; current scaling's
 * amax subgraph reads the weight too, so its pair cannot go alone. */
static void test_quant_kept(void **state)
{
    (void)state;
    static const char *const names[] = {"quant_std_fp8_int4", "quant_nvfp4", "quant_fp8_current_trt"};
    static const char *const why[] = {"stored quantized", "stored quantized", "other readers"};
    for (size_t k = 0; k < 3; k++) {
        tx_rw_graph *g;
        teexec_model *m;
        tx_lower_report *r;
        lower_quant_model(names[k], &g, &m, &r);
        assert_int_equal(count_ops(g, "te.ops", "Linear"), 0);
        bool noted = false;
        for (size_t i = 0; i < r->n_notes; i++)
            noted |= !r->notes[i].lowered && strstr(r->notes[i].reason, why[k]) != NULL;
        assert_true(noted);
        teexec_model *m2 = rw_emit_load(g);
        assert_int_equal(teexec_model_node_count(m2), teexec_model_node_count(m));
        teexec_model_destroy(m2);
        tx_lower_report_free(r);
        tx_rw_free(g);
        teexec_model_destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_add),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_declined),
        cmocka_unit_test(test_shared_weights),
        cmocka_unit_test(test_param_to_original_split),
        cmocka_unit_test(test_quant_fake_quantized),
        cmocka_unit_test(test_quant_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
