/* Tests for the rewrite graph (import/rewrite.h): round trips of real
 * models through tx_rw_from_ir -> tx_rw_emit -> load with bit-identical
 * CPU outputs, function inlining (ref_attr_name included), outlining and
 * inlining back, edits and lookups, graph inputs/outputs added and
 * removed with dead nodes swept, and the writer's errors. */
#include "rw_util.h"

#include <dirent.h>
#include <sys/stat.h>

#include "model_builder.h"
#include "teexec_config.h"

enum { FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT };

static teexec_model *load_file(const char *path)
{
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_file(path, NULL, &m), path);
    return m;
}

static tx_rw_graph *rw_of(const teexec_model *m)
{
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "tx_rw_from_ir");
    return g;
}

/* Runs a and b on the same inputs; every output must be bit-identical.
 * Returns false (and prints why) when `a` itself cannot run on the CPU. */
static bool same_outputs(const teexec_model *a, const teexec_model *b, const rw_inputs *in,
                         const char *what)
{
    teexec_tensor *oa[RW_MAX_IO], *ob[RW_MAX_IO];
    size_t na = 0, nb = 0;
    teexec_status *st = rw_run(a, in, oa, &na);
    if (st) {
        teexec_status_destroy(st);
        return false;
    }
    rw_ok(rw_run(b, in, ob, &nb), what);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        if (!rw_bit_equal(oa[i], ob[i])) fail_msg("%s: output %zu differs after the round trip", what, i);
    }
    rw_outputs_free(oa, na);
    rw_outputs_free(ob, nb);
    return true;
}

/* ---- round trips ---------------------------------------------------------- */

static void test_roundtrip_models(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/models", rw_source_root());
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    size_t checked = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096 + 512], inputs[4096 + 512];
        snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
        snprintf(inputs, sizeof inputs, "%s/%s/inputs", dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || stat(inputs, &sb) != 0) continue;
        teexec_model *m = load_file(path);
        tx_rw_graph *g = rw_of(m);
        teexec_model *m2 = rw_emit_load(g);
        assert_int_equal(teexec_model_node_count(m), teexec_model_node_count(m2));
        rw_inputs in;
        rw_inputs_npy(m, inputs, &in);
        bool ran = same_outputs(m, m2, &in, path);
        printf("round trip %-24s %s\n", e->d_name, ran ? "bit-identical" : "(not runnable on CPU)");
        checked += ran;
        rw_inputs_free(&in);
        teexec_model_destroy(m2);
        tx_rw_free(g);
        teexec_model_destroy(m);
    }
    closedir(d);
    assert_true(checked >= 8); /* mlp, gpt2_block, te_* and quant_* all run */
}

static bool read_file(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    assert_non_null(*out);
    size_t got = fread(*out, 1, (size_t)n, f);
    (*out)[got] = '\0';
    fclose(f);
    return true;
}

/* Every node test model that loads survives the round trip; a sample of the
 * claimed ones (which the CPU runs) gives bit-identical outputs. */
static void test_roundtrip_node_tests(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_TESTDATA");
    if (!root || !*root) root = TEEXEC_ONNX_TESTDATA;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/node", root);
    DIR *d = opendir(dir);
    if (!d) skip();
    char claimed_path[4096], *claimed = NULL;
    snprintf(claimed_path, sizeof claimed_path, "%s/tests/conformance/claimed.txt", rw_source_root());
    assert_true(read_file(claimed_path, &claimed));
    struct dirent *e;
    size_t loaded = 0, compared = 0, claimed_seen = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096 + 512];
        snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
        teexec_model *m = NULL;
        teexec_status *st = teexec_model_load_file(path, NULL, &m);
        if (st) { /* models the loader refuses are the loader's tests */
            teexec_status_destroy(st);
            continue;
        }
        tx_rw_graph *g = NULL;
        st = tx_rw_from_ir(m->ir, &g);
        if (st) fprintf(stderr, "%s: %s\n", path, teexec_status_message(st));
        rw_ok(st, path);
        uint8_t *bytes = NULL;
        size_t len = 0;
        st = tx_rw_emit(g, &bytes, &len);
        if (st) fprintf(stderr, "%s: emit: %s\n", path, teexec_status_message(st));
        rw_ok(st, path);
        teexec_model *m2 = NULL;
        st = teexec_model_load_memory(bytes, len, NULL, NULL, &m2);
        if (st) fprintf(stderr, "%s: reload: %s\n", path, teexec_status_message(st));
        rw_ok(st, path);
        free(bytes);
        loaded++;
        /* Claimed tests: every third one is run (keeps the test fast under ASan). */
        char key[600];
        snprintf(key, sizeof key, "\n%s\n", e->d_name);
        if (strstr(claimed, key) && (claimed_seen++ % 3) == 0) {
            rw_inputs in;
            memset(&in, 0, sizeof in);
            size_t ni = teexec_model_input_count(m);
            bool ok = ni <= RW_MAX_IO;
            for (size_t i = 0; ok && i < ni; i++) {
                char ip[4096 + 600];
                snprintf(ip, sizeof ip, "%s/%s/test_data_set_0/input_%zu.pb", dir, e->d_name, i);
                in.names[i] = teexec_model_input(m, i)->name;
                st = teexec_tensor_load_file(ip, &in.t[i]);
                if (st) {
                    teexec_status_destroy(st);
                    ok = false;
                    break;
                }
                in.n++;
            }
            if (ok && same_outputs(m, m2, &in, path)) compared++;
            rw_inputs_free(&in);
        }
        teexec_model_destroy(m2);
        tx_rw_free(g);
        teexec_model_destroy(m);
    }
    closedir(d);
    free(claimed);
    printf("node tests: %zu round-tripped, %zu compared bit for bit\n", loaded, compared);
    assert_true(loaded > 500);
    assert_true(compared > 100);
}

/* ---- inlining ------------------------------------------------------------- */

/* custom.Scaled(a, b) = LeakyRelu(a + b, alpha = @slope) * b, called twice
 * (so intermediate names must be made unique), once inside another
 * function. */
static Onnx__ModelProto *function_model(bool set_slope)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    mb_opset(m, "custom", 1);
    Onnx__FunctionProto *f = mb_function(m, "custom", "Scaled", "a,b", "y");
    f->opset_import[f->n_opset_import] = m->opset_import[0];
    f->n_opset_import = 1;
    f->attribute[f->n_attribute++] = mb_str("slope");
    f->node[f->n_node++] = mb_node_new("add", "Add", NULL, "a,b", "t");
    Onnx__NodeProto *lr = mb_node_new("lrelu", "LeakyRelu", NULL, "t", "u");
    Onnx__AttributeProto *ref = mb_attr(lr, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    ref->ref_attr_name = mb_str("slope");
    f->node[f->n_node++] = lr;
    f->node[f->n_node++] = mb_node_new("mul", "Mul", NULL, "u,b", "y");
    /* custom.Twice(a, b) = Scaled(Scaled(a, b), b), slope passed through. */
    Onnx__FunctionProto *f2 = mb_function(m, "custom", "Twice", "a,b", "y");
    f2->opset_import[f2->n_opset_import++] = m->opset_import[0];
    f2->opset_import[f2->n_opset_import++] = m->opset_import[1];
    f2->attribute[f2->n_attribute++] = mb_str("slope");
    Onnx__NodeProto *c1 = mb_node_new("s1", "Scaled", "custom", "a,b", "t");
    Onnx__AttributeProto *r1 = mb_attr(c1, "slope", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    r1->ref_attr_name = mb_str("slope");
    f2->node[f2->n_node++] = c1;
    Onnx__NodeProto *c2 = mb_node_new("s2", "Scaled", "custom", "t,b", "y");
    Onnx__AttributeProto *r2 = mb_attr(c2, "slope", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    r2->ref_attr_name = mb_str("slope");
    f2->node[f2->n_node++] = c2;

    Onnx__GraphProto *g = mb_graph("fn");
    m->graph = g;
    mb_input(g, "x", FLOAT, "4");
    mb_input(g, "w", FLOAT, "4");
    mb_output(g, "z", FLOAT, "4");
    Onnx__NodeProto *call1 = mb_node(g, "call1", "Scaled", "custom", "x,w", "t");
    if (set_slope) mb_attr_float(call1, "slope", 0.5f);
    Onnx__NodeProto *call2 = mb_node(g, "call2", "Twice", "custom", "t,w", "z");
    mb_attr_float(call2, "slope", 0.25f);
    return m;
}

static float scaled(float a, float b, float slope)
{
    float t = a + b;
    float u = t >= 0 ? t : t * slope;
    return u * b;
}

static teexec_model *load_builder(const Onnx__ModelProto *pm)
{
    size_t size;
    uint8_t *bytes = mb_pack(pm, &size);
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m), "loading a built model");
    free(bytes);
    return m;
}

static void test_inline_functions(void **state)
{
    (void)state;
    teexec_model *m = load_builder(function_model(true));
    tx_rw_graph *g = rw_of(m);
    size_t live = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *n = tx_rw_node_at(g, i);
        if (n->dead) continue;
        live++;
        assert_string_equal(n->domain, ""); /* no call left */
        if (strcmp(n->op_type, "LeakyRelu") == 0) {
            const tx_rw_attr *a = tx_rw_get_attr(g, i, "alpha");
            assert_non_null(a);
            assert_int_equal(a->type, TX_IR_ATTR_FLOAT);
            assert_true(a->f == 0.5f || a->f == 0.25f);
        }
    }
    assert_int_equal(live, 9); /* three inlined bodies of three nodes */
    teexec_model *m2 = rw_emit_load(g);
    assert_int_equal(teexec_model_function_count(m2), 2); /* kept, no longer called */

    float x[4] = {-2.0f, -0.5f, 0.75f, 3.0f}, w[4] = {0.5f, 1.5f, -1.0f, 2.0f};
    int64_t dims[1] = {4};
    rw_inputs in;
    memset(&in, 0, sizeof in);
    in.names[0] = "x";
    in.names[1] = "w";
    rw_ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 1, dims, x, sizeof x, &in.t[0]), "x");
    rw_ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 1, dims, w, sizeof w, &in.t[1]), "w");
    in.n = 2;
    teexec_tensor *out[RW_MAX_IO];
    size_t n_out = 0;
    rw_ok(rw_run(m2, &in, out, &n_out), "running the inlined model");
    const float *z = teexec_tensor_data_const(out[0]);
    for (int i = 0; i < 4; i++) {
        float t = scaled(x[i], w[i], 0.5f);
        float want = scaled(scaled(t, w[i], 0.25f), w[i], 0.25f);
        assert_true(z[i] == want);
    }
    rw_outputs_free(out, n_out);
    rw_inputs_free(&in);
    teexec_model_destroy(m2);
    tx_rw_free(g);
    teexec_model_destroy(m);
    mb_free_all();
}

static void test_inline_missing_attribute(void **state)
{
    (void)state;
    teexec_model *m = load_builder(function_model(false));
    tx_rw_graph *g = NULL;
    teexec_status *st = tx_rw_from_ir(m->ir, &g);
    assert_non_null(st);
    assert_null(g);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
    assert_non_null(teexec_status_node(st));
    assert_string_equal(teexec_status_node(st), "call1");
    assert_non_null(strstr(teexec_status_message(st), "slope"));
    teexec_status_destroy(st);
    teexec_model_destroy(m);
    mb_free_all();
}

/* ---- outlining --------------------------------------------------------------- */

static void test_outline_then_inline(void **state)
{
    (void)state;
    char path[4096], inputs[4096];
    snprintf(path, sizeof path, "%s/models/mlp/model.onnx", rw_source_root());
    snprintf(inputs, sizeof inputs, "%s/models/mlp/inputs", rw_source_root());
    teexec_model *m = load_file(path);
    tx_rw_graph *g = rw_of(m);
    /* The first half of the nodes, whatever they are, go into a function. */
    size_t nodes[64], n = 0;
    for (size_t i = 0; i < tx_rw_node_count(g) / 2; i++) nodes[n++] = i;
    size_t call = 0;
    rw_ok(tx_rw_outline(g, nodes, n, "teexec.test", "FirstHalf", &call), "outline");
    const tx_rw_node *c = tx_rw_node_at(g, call);
    assert_string_equal(c->op_type, "FirstHalf");
    assert_string_equal(c->domain, "teexec.test");
    assert_true(c->n_inputs >= 1 && c->n_outputs >= 1);
    /* the call takes the first node's slot, the others are dead */
    assert_int_equal(call, nodes[0]);
    for (size_t i = 1; i < n; i++) assert_true(tx_rw_node_at(g, nodes[i])->dead);
    assert_true(tx_rw_node_at(g, tx_rw_node_count(g) - 1)->dead);
    /* The same name again is refused. */
    size_t one = tx_rw_node_count(g) - 2;
    teexec_status *st = tx_rw_outline(g, &one, 1, "teexec.test", "FirstHalf", NULL);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);

    teexec_model *mo = rw_emit_load(g); /* the outlined model loads ... */
    assert_int_equal(teexec_model_function_count(mo), 1);
    tx_rw_graph *g2 = rw_of(mo); /* ... and inlining it gives the original back */
    teexec_model *m2 = rw_emit_load(g2);
    assert_int_equal(teexec_model_node_count(m2), teexec_model_node_count(m));
    rw_inputs in;
    rw_inputs_npy(m, inputs, &in);
    assert_true(same_outputs(m, m2, &in, "outline + inline"));
    rw_inputs_free(&in);
    teexec_model_destroy(m2);
    tx_rw_free(g2);
    teexec_model_destroy(mo);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* ---- edits and lookups -------------------------------------------------------- */

/* y = Relu(x + b) * c, c a Constant node (scalar 2), b an initializer [3]. */
static teexec_model *small_model(void)
{
    Onnx__ModelProto *pm = mb_model(8);
    mb_opset(pm, "", 17);
    Onnx__GraphProto *g = mb_graph("small");
    pm->graph = g;
    mb_input(g, "x", FLOAT, "2,3");
    mb_output(g, "y", FLOAT, "2,3");
    int64_t bd[1] = {3};
    mb_init(g, "b", bd, 1);
    mb_value_info_add(g, "s", FLOAT, "2,3");
    mb_node(g, "add", "Add", NULL, "x,b", "s");
    mb_node(g, "relu", "Relu", NULL, "s", "r");
    Onnx__NodeProto *k = mb_node(g, "two", "Constant", NULL, "", "c");
    mb_attr_float(k, "value_float", 2.0f);
    k->n_input = 0;
    mb_node(g, "mul", "Mul", NULL, "r,c", "y");
    teexec_model *m = load_builder(pm);
    mb_free_all();
    return m;
}

static void run_small(const teexec_model *m, float *y)
{
    float x[6] = {-3, -1, 0, 1, 2, 5};
    int64_t dims[2] = {2, 3};
    rw_inputs in;
    memset(&in, 0, sizeof in);
    in.names[0] = "x";
    rw_ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, dims, x, sizeof x, &in.t[0]), "x");
    in.n = 1;
    teexec_tensor *out[RW_MAX_IO];
    size_t n = 0;
    rw_ok(rw_run(m, &in, out, &n), "run");
    memcpy(y, teexec_tensor_data_const(out[0]), 6 * sizeof(float));
    rw_outputs_free(out, n);
    rw_inputs_free(&in);
}

static void test_lookups(void **state)
{
    (void)state;
    teexec_model *m = small_model();
    tx_rw_graph *g = rw_of(m);
    size_t slot = 9;
    int64_t p = tx_rw_producer(g, "s", &slot);
    assert_true(p >= 0);
    assert_string_equal(tx_rw_node_at(g, (size_t)p)->op_type, "Add");
    assert_int_equal(slot, 0);
    assert_int_equal(tx_rw_producer(g, "x", NULL), -1);
    size_t n = 0;
    const tx_ir_use *u = tx_rw_consumers(g, "s", &n);
    assert_int_equal(n, 1);
    assert_string_equal(tx_rw_node_at(g, (size_t)u[0].node)->op_type, "Relu");
    assert_int_equal(u[0].slot, 0);
    assert_true(tx_rw_is_graph_input(g, "x"));
    assert_false(tx_rw_is_graph_input(g, "b"));
    assert_true(tx_rw_is_graph_output(g, "y"));
    assert_true(tx_rw_is_initializer(g, "b"));
    double v = 0;
    assert_true(tx_rw_scalar(g, "c", &v));
    assert_true(v == 2.0);
    assert_false(tx_rw_scalar(g, "b", &v)); /* three elements */
    assert_false(tx_rw_scalar(g, "x", &v));
    tx_tensor t;
    assert_true(tx_rw_constant(g, "b", &t));
    assert_int_equal(t.numel, 3);
    assert_true(((float *)t.data)[2] == 2.0f); /* model_builder fills value i = i */
    tx_tensor_release(&t);
    tx_rw_value_type vt;
    assert_true(tx_rw_value_type_of(g, "s", &vt));
    assert_int_equal(vt.rank, 2);
    assert_int_equal(vt.dims[1], 3);
    assert_true(tx_rw_value_type_of(g, "b", &vt));
    assert_int_equal(vt.rank, 1);
    assert_false(tx_rw_value_type_of(g, "r", &vt)); /* no value_info */
    const char *f1 = tx_rw_fresh_name(g, "s");
    const char *f2 = tx_rw_fresh_name(g, "s");
    assert_string_not_equal(f1, "s");
    assert_string_not_equal(f1, f2);
    assert_string_equal(tx_rw_fresh_name(g, "brand_new"), "brand_new");
    assert_string_not_equal(tx_rw_fresh_name(g, "brand_new"), "brand_new");
    tx_rw_free(g);
    teexec_model_destroy(m);
}

static void test_edits(void **state)
{
    (void)state;
    teexec_model *m = small_model();
    tx_rw_graph *g = rw_of(m);
    float y[6], y2[6];
    run_small(m, y);

    /* Relu -> Sigmoid-free rewrite: replace Relu(s) by Max(s, 0) through a
     * new node appended at the end (the writer must reorder it). */
    int64_t relu = tx_rw_producer(g, "r", NULL);
    tx_rw_remove_node(g, (size_t)relu);
    assert_int_equal(tx_rw_producer(g, "r", NULL), -1);
    float zero = 0;
    tx_tensor z;
    rw_ok(tx_tensor_wrap(&z, TEEXEC_DTYPE_FLOAT, 0, NULL, &zero), "wrap");
    rw_ok(tx_rw_set_initializer(g, "zero", &z), "set_initializer");
    const char *in[2] = {"s", "zero"}, *out[1] = {"r"};
    size_t idx = 0;
    rw_ok(tx_rw_add_node(g, "Max", "", "max", in, 2, out, 1, &idx), "add_node");
    assert_int_equal(tx_rw_producer(g, "r", NULL), (int64_t)idx);
    teexec_model *m2 = rw_emit_load(g);
    run_small(m2, y2);
    assert_memory_equal(y, y2, sizeof y);
    teexec_model_destroy(m2);

    /* Attribute setters replace by name. */
    rw_ok(tx_rw_set_int(g, idx, "k", 1), "set_int");
    rw_ok(tx_rw_set_int(g, idx, "k", 7), "set_int again");
    rw_ok(tx_rw_set_string(g, idx, "why", "test"), "set_string");
    int64_t ints[2] = {4, 5};
    rw_ok(tx_rw_set_ints(g, idx, "list", ints, 2), "set_ints");
    rw_ok(tx_rw_set_float(g, idx, "f", 1.5f), "set_float");
    assert_int_equal(tx_rw_node_at(g, idx)->n_attrs, 4);
    assert_int_equal(tx_rw_get_attr(g, idx, "k")->i, 7);
    assert_string_equal(tx_rw_get_attr(g, idx, "why")->s, "test");
    assert_int_equal(tx_rw_get_attr(g, idx, "list")->ints[1], 5);
    assert_null(tx_rw_get_attr(g, idx, "nope"));

    /* replace_uses on a graph output keeps the output's name: y := r. */
    int64_t mul = tx_rw_producer(g, "y", NULL);
    rw_ok(tx_rw_replace_uses(g, "y", "r"), "replace_uses");
    tx_rw_remove_node(g, (size_t)mul);
    assert_int_equal(tx_rw_producer(g, "y", NULL), (int64_t)idx);
    m2 = rw_emit_load(g);
    run_small(m2, y2);
    for (int i = 0; i < 6; i++) assert_true(y2[i] * 2.0f == y[i]);
    assert_int_equal(teexec_model_op_count(m2), 3); /* Add, Max and the Constant: nodes stay until removed */
    teexec_model_destroy(m2);

    /* An ordinary replace: reads of s now read x (so y = max(x, 0)). */
    rw_ok(tx_rw_replace_uses(g, "s", "x"), "replace_uses s->x");
    size_t n = 0;
    tx_rw_consumers(g, "s", &n);
    assert_int_equal(n, 0);
    m2 = rw_emit_load(g);
    run_small(m2, y2);
    assert_true(y2[0] == 0.0f && y2[5] == 5.0f);
    teexec_model_destroy(m2);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

static void expect_internal(const tx_rw_graph *g, const char *node, const char *needle)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    teexec_status *st = tx_rw_emit(g, &bytes, &len);
    assert_non_null(st);
    assert_null(bytes);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INTERNAL);
    assert_string_equal(teexec_status_node(st), node);
    if (!strstr(teexec_status_message(st), needle)) fail_msg("message: %s", teexec_status_message(st));
    teexec_status_destroy(st);
}

static void test_emit_errors(void **state)
{
    (void)state;
    teexec_model *m = small_model();
    tx_rw_graph *g = rw_of(m);
    const char *in1[1] = {"nowhere"}, *out1[1] = {"q"};
    size_t bad = 0;
    rw_ok(tx_rw_add_node(g, "Relu", "", "dangling", in1, 1, out1, 1, &bad), "add");
    expect_internal(g, "dangling", "nowhere");
    tx_rw_remove_node(g, bad);

    /* A cycle: p1 reads p2's output and p2 reads p1's. */
    const char *a_in[1] = {"c2"}, *a_out[1] = {"c1"}, *b_in[1] = {"c1"}, *b_out[1] = {"c2"};
    size_t c1 = 0, c2 = 0;
    rw_ok(tx_rw_add_node(g, "Relu", "", "p1", a_in, 1, a_out, 1, &c1), "add p1");
    rw_ok(tx_rw_add_node(g, "Relu", "", "p2", b_in, 1, b_out, 1, &c2), "add p2");
    expect_internal(g, "p1", "cycle");
    tx_rw_remove_node(g, c1);
    tx_rw_remove_node(g, c2);

    /* Two definitions of one value. */
    const char *d_in[1] = {"x"}, *d_out[1] = {"s"};
    rw_ok(tx_rw_add_node(g, "Relu", "", "twice", d_in, 1, d_out, 1, NULL), "add twice");
    expect_internal(g, "twice", "defines \"s\"");

    teexec_status *st = tx_rw_add_node(g, "", "", "x", NULL, 0, NULL, 0, NULL);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    st = tx_rw_set_int(g, 9999, "a", 1);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    assert_null(tx_rw_node_at(g, 9999));
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* Dropped initializers leave the file; a graph input doubling as one goes with it. */
static void test_unused_initializers_dropped(void **state)
{
    (void)state;
    Onnx__ModelProto *pm = mb_model(8);
    mb_opset(pm, "", 17);
    Onnx__GraphProto *gp = mb_graph("u");
    pm->graph = gp;
    mb_input(gp, "x", FLOAT, "3");
    mb_input(gp, "w", FLOAT, "3"); /* also an initializer: a parameter with a default */
    mb_output(gp, "y", FLOAT, "3");
    int64_t d[1] = {3};
    mb_init(gp, "w", d, 1);
    mb_init(gp, "unused", d, 1);
    mb_node(gp, "mul", "Mul", NULL, "x,w", "y");
    teexec_model *m = load_builder(pm);
    mb_free_all();
    tx_rw_graph *g = rw_of(m);
    teexec_model *m2 = rw_emit_load(g);
    teexec_param_stats ps;
    teexec_model_param_stats(m2, &ps);
    assert_int_equal(ps.count, 1); /* "unused" dropped */
    teexec_model_destroy(m2);
    /* Mul now reads x twice: w is read by nobody and leaves with its input. */
    tx_rw_node *n = tx_rw_node_at(g, 0);
    free(n->inputs[1]);
    n->inputs[1] = strdup("x");
    m2 = rw_emit_load(g);
    teexec_model_param_stats(m2, &ps);
    assert_int_equal(ps.count, 0);
    assert_int_equal(teexec_model_input_count(m2), 1);
    teexec_model_destroy(m2);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* Graph inputs and outputs added and removed, and dead nodes swept: a
 * removed output leaves its cone unread, tx_rw_remove_unused_nodes takes
 * that cone and a dead chain (until none is left) but nothing that reaches
 * an output; an added input comes out with its dtype and symbolic dim. */
static void test_io_edits_and_dead_nodes(void **state)
{
    (void)state;
    Onnx__ModelProto *pm = mb_model(8);
    mb_opset(pm, "", 17);
    Onnx__GraphProto *gp = mb_graph("io");
    pm->graph = gp;
    mb_input(gp, "x", FLOAT, "3");
    mb_output(gp, "y", FLOAT, "3");
    mb_output(gp, "z", FLOAT, "3");
    mb_node(gp, "relu", "Relu", NULL, "x", "a");
    mb_node(gp, "neg", "Neg", NULL, "a", "dead1");  /* a chain nobody reads */
    mb_node(gp, "abs", "Abs", NULL, "dead1", "dead2");
    mb_node(gp, "mul", "Mul", NULL, "a,a", "y");
    mb_node(gp, "sig", "Sigmoid", NULL, "x", "z");
    teexec_model *m = load_builder(pm);
    mb_free_all();
    tx_rw_graph *g = rw_of(m);

    assert_true(tx_rw_remove_output(g, "z"));
    assert_false(tx_rw_remove_output(g, "z"));
    assert_false(tx_rw_is_graph_output(g, "z"));
    size_t removed = 0;
    tx_rw_remove_unused_nodes(g, &removed);
    assert_int_equal(removed, 3); /* Sigmoid, then Abs, then Neg */
    assert_true(tx_rw_producer(g, "y", NULL) >= 0);
    assert_true(tx_rw_producer(g, "a", NULL) >= 0);
    assert_int_equal(tx_rw_producer(g, "dead1", NULL), -1);

    tx_rw_value_type t;
    memset(&t, 0, sizeof t);
    t.dtype = TEEXEC_DTYPE_INT64;
    t.rank = 2;
    t.dims[0] = 4;
    t.dims[1] = -1;
    char param[] = "batch";
    t.dim_params[1] = param;
    rw_ok(tx_rw_add_input(g, "lens", &t), "add_input");
    param[0] = 'X'; /* the graph keeps its own copy */
    assert_true(tx_rw_is_graph_input(g, "lens"));
    teexec_model *m2 = rw_emit_load(g);
    assert_int_equal(teexec_model_input_count(m2), 2);
    assert_int_equal(teexec_model_output_count(m2), 1);
    const teexec_value_info *vi = teexec_model_input(m2, 1);
    assert_string_equal(vi->name, "lens");
    assert_int_equal(vi->dtype, TEEXEC_DTYPE_INT64);
    assert_int_equal(vi->rank, 2);
    assert_int_equal(vi->dims[0], 4);
    assert_string_equal(vi->dim_params[1], "batch");
    teexec_model_destroy(m2);
    assert_true(tx_rw_remove_input(g, "lens"));
    assert_false(tx_rw_remove_input(g, "lens"));
    m2 = rw_emit_load(g);
    assert_int_equal(teexec_model_input_count(m2), 1);
    assert_int_equal(teexec_model_op_count(m2), 2); /* Relu, Mul */
    teexec_model_destroy(m2);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_models),
        cmocka_unit_test(test_roundtrip_node_tests),
        cmocka_unit_test(test_inline_functions),
        cmocka_unit_test(test_inline_missing_attribute),
        cmocka_unit_test(test_outline_then_inline),
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_edits),
        cmocka_unit_test(test_emit_errors),
        cmocka_unit_test(test_unused_initializers_dropped),
        cmocka_unit_test(test_io_edits_and_dead_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
