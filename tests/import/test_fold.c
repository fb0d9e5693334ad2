/*
 * test_fold.c - the load-time folding pass (import/fold.h), the node
 * evaluator behind it (import/const_eval.h) and the value-typing pass over
 * the folded and lowered zoo exports (import/infer_graph.h).
 *
 * The zoo tests read the committed exports (models/zoo/<name>/model.onnx):
 * each checks a pattern a real exporter wrote (GPT-2's causal mask built
 * with LessOrEqual/And/Expand, Llama's rotary tables from inv_freq through
 * MatMul/Cos/Sin, nanoGPT's Shape -> Slice -> Sqrt scale and Trilu mask,
 * OPT's CumSum position ids) against values computed here from the
 * model's own constants. The small graphs check the rules at their edges:
 * the size bound, exact integer arithmetic, ONNX's Range and Cast rules,
 * and refusals that must stay refusals.
 */
#include "rw_util.h"

#include "exec/model_lower.h"
#include "exec/prepare.h"
#include "format/tensor_proto.h"
#include "import/const_eval.h"
#include "import/fold.h"
#include "import/infer_graph.h"
#include "model_builder.h"

#include <unistd.h>

#define ONNX_FLOAT 1
#define ONNX_INT32 6
#define ONNX_INT64 7
#define ONNX_BOOL 9

/* ---- helpers ------------------------------------------------------------ */

static teexec_model *load_zoo(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/models/zoo/%s/model.onnx", rw_source_root(), name);
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_file(path, NULL, &m), path);
    return m;
}

static size_t live_ops(tx_rw_graph *g, const char *op)
{
    size_t n = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (!nd->dead && !nd->domain[0] && strcmp(nd->op_type, op) == 0) n++;
    }
    return n;
}

static void report_free(tx_lower_report *r)
{
    for (size_t i = 0; i < r->n_notes; i++) {
        free(r->notes[i].pattern);
        free(r->notes[i].node);
        free(r->notes[i].reason);
    }
    free(r->notes);
    memset(r, 0, sizeof *r);
}

/* The note the folding pass left at node `node`, or NULL. */
static const tx_lower_note *note_at(const tx_lower_report *r, const char *node)
{
    for (size_t i = 0; i < r->n_notes; i++)
        if (strcmp(r->notes[i].node, node) == 0) return &r->notes[i];
    return NULL;
}

/* Every value of the loaded model typed: a dtype and a known shape. */
static void assert_all_typed(const teexec_model *m, const char *what)
{
    const tx_ir_graph *g = m->ir->graph;
    tx_infer_value *v = NULL;
    rw_ok(tx_infer_graph(g, m->file, NULL, NULL, 0, &v), what);
    for (size_t i = 0; i < g->n_values; i++) {
        const tx_ir_value *val = &g->values[i];
        if (val->producer < 0 && !(val->flags & (TX_IR_VALUE_GRAPH_INPUT | TX_IR_VALUE_INITIALIZER)))
            continue; /* names of the table no node defines (none in these models) */
        if (v[i].dtype == TEEXEC_DTYPE_UNDEFINED || !v[i].shape_known)
            fail_msg("%s: value \"%s\" is not typed", what, val->name);
    }
    tx_infer_values_free(v, g->n_values);
}

/* A Constant node writing `out`, with a raw-data tensor of dtype elem. */
static void const_node(Onnx__GraphProto *g, const char *out, int32_t elem, const int64_t *dims,
                       size_t rank, const void *data, size_t elem_size)
{
    Onnx__TensorProto *t = mb_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->has_data_type = 1;
    t->data_type = elem;
    t->dims = mb_alloc((rank ? rank : 1) * sizeof(int64_t));
    t->n_dims = rank;
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        n *= (size_t)dims[i];
    }
    t->has_raw_data = 1;
    t->raw_data.len = n * elem_size;
    size_t bytes = n * elem_size;
    t->raw_data.data = mb_alloc(bytes ? bytes : 1);
    if (bytes) memcpy(t->raw_data.data, data, bytes);
    char name[128];
    snprintf(name, sizeof name, "c_%s", out);
    Onnx__NodeProto *nd = mb_node(g, name, "Constant", NULL, NULL, out);
    Onnx__AttributeProto *a = mb_attr(nd, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
}

static void const_i64(Onnx__GraphProto *g, const char *out, const int64_t *dims, size_t rank,
                      const int64_t *v)
{
    const_node(g, out, ONNX_INT64, dims, rank, v, sizeof(int64_t));
}

static teexec_model *load_built(Onnx__ModelProto *mp)
{
    size_t size;
    uint8_t *bytes = mb_pack(mp, &size);
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m), "loading the built model");
    free(bytes);
    return m;
}

static Onnx__ModelProto *new_model(Onnx__GraphProto **g)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    *g = mb_graph("fold");
    m->graph = *g;
    return m;
}

/* Folds m's graph; *g owned by the caller. */
static void fold(const teexec_model *m, tx_rw_graph **g, tx_lower_report *r, size_t *n)
{
    rw_ok(tx_rw_from_ir(m->ir, g), "tx_rw_from_ir");
    rw_ok(tx_fold(*g, r, n), "tx_fold");
}

/* The folded constant `value` (an initializer or a Constant node). */
static void folded_value(tx_rw_graph *g, const char *value, tx_tensor *t)
{
    if (!tx_rw_constant(g, value, t)) fail_msg("\"%s\" is not a constant after folding", value);
}

/* ---- real exports --------------------------------------------------------- */

/* GPT-2 (TorchScript): the causal mask from LessOrEqual of two position
 * grids, And-ed with the all-ones attention mask (Flatten/Gather/Reshape),
 * Expand-ed to [b, 1, s, s] with a Where-computed shape, then
 * Where(mask, 0, -inf) in each block. */
static void test_gpt2_causal_mask(void **state)
{
    (void)state;
    teexec_model *m = load_zoo("gpt2_torchscript");
    tx_rw_graph *g = NULL;
    tx_lower_report r = {0};
    size_t n = 0;
    rw_ok(tx_rw_from_ir(m->ir, &g), "from_ir");
    assert_true(live_ops(g, "ConstantOfShape") > 0 && live_ops(g, "Expand") > 0 &&
                live_ops(g, "LessOrEqual") > 0);
    rw_ok(tx_fold(g, &r, &n), "fold");
    printf("  gpt2_torchscript: %zu nodes folded\n", n);
    assert_true(n >= 15);
    assert_int_equal(r.n_notes, 0); /* every constant node folded */
    const char *gone[] = {"ConstantOfShape", "Expand", "LessOrEqual", "And", "Flatten",
                          "Equal", "Trilu", "Range"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++)
        if (live_ops(g, gone[i])) fail_msg("%s left after folding", gone[i]);
    /* the Wheres left are the IsNaN guards after each Softmax */
    assert_int_equal(live_ops(g, "Where"), 2);
    assert_int_equal(live_ops(g, "IsNaN"), 2);
    /* the additive mask of block 0: 0 on and below the diagonal, -inf above */
    tx_tensor t;
    folded_value(g, "/m/transformer/h.0/attn/Where_output_0", &t);
    assert_int_equal(t.dtype, TEEXEC_DTYPE_FLOAT);
    assert_int_equal(t.rank, 4);
    assert_true(t.dims[0] == 2 && t.dims[1] == 1 && t.dims[2] == 16 && t.dims[3] == 16);
    const float *f = t.data;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                float x = f[(b * 16 + i) * 16 + j];
                if (j <= i) assert_true(x == 0.0f);
                else assert_true(isinf(x) && x < 0);
            }
    tx_tensor_release(&t);
    /* a float result is a Constant node, not an initializer (which the
     * trainer would take for a parameter) */
    assert_false(tx_rw_is_initializer(g, "/m/transformer/h.0/attn/Where_output_0"));
    teexec_model *folded = rw_emit_load(g);
    assert_all_typed(folded, "gpt2_torchscript folded");
    /* folding the folded model changes nothing */
    tx_rw_graph *g2 = NULL;
    size_t n2 = 1;
    fold(folded, &g2, NULL, &n2);
    assert_int_equal(n2, 0);
    tx_rw_free(g2);
    teexec_model_destroy(folded);
    report_free(&r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* Llama (TorchScript): cos/sin tables from inv_freq [1, 4, 1] (a Constant)
 * Expand-ed, Cast, MatMul-ed with the positions [1, 1, 16], Transposed,
 * Concat-ed with themselves, Cos / Sin, Mul 1.0, Cast, Unsqueeze. None of
 * those ops is left, and the tables are what float32 arithmetic gives:
 * the angle is one float product (K = 1), cos/sin of it rounded once. */
static void test_llama_rope_tables(void **state)
{
    (void)state;
    teexec_model *m = load_zoo("llama_torchscript");
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "from_ir");
    tx_tensor inv;
    assert_true(tx_rw_constant(g, "onnx::Expand_75", &inv));
    assert_int_equal(inv.numel, 4);
    assert_int_equal(live_ops(g, "Cos"), 1);
    tx_lower_report r = {0};
    size_t n = 0;
    rw_ok(tx_fold(g, &r, &n), "fold");
    assert_int_equal(r.n_notes, 0);
    assert_int_equal(live_ops(g, "Cos"), 0);
    assert_int_equal(live_ops(g, "Sin"), 0);
    assert_int_equal(live_ops(g, "ConstantOfShape"), 0);
    /* the whole rotary_emb subgraph is gone (the GQA Expands of k and v,
     * on activations, stay) */
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (!nd->dead && strstr(nd->name, "rotary_emb") && strcmp(nd->op_type, "Constant"))
            fail_msg("%s (%s) is left", nd->name, nd->op_type);
    }
    const char *tables[2] = {"/m/model/layers.0/self_attn/Unsqueeze_output_0",
                             "/m/model/layers.0/self_attn/Unsqueeze_1_output_0"};
    for (int s = 0; s < 2; s++) {
        tx_tensor t;
        folded_value(g, tables[s], &t);
        assert_int_equal(t.dtype, TEEXEC_DTYPE_FLOAT);
        assert_int_equal(t.numel, 16 * 8);
        assert_int_equal(t.dims[2], 16);
        assert_int_equal(t.dims[3], 8);
        const float *f = t.data, *w = inv.data;
        for (int p = 0; p < 16; p++)
            for (int k = 0; k < 8; k++) {
                float angle = (float)((double)p * (double)w[k % 4]);
                double exact = s == 0 ? cos((double)p * (double)w[k % 4]) : sin((double)p * (double)w[k % 4]);
                float want = (float)(s == 0 ? cos((double)angle) : sin((double)angle));
                float got = f[p * 8 + k];
                if (got != want || fabs(got - exact) > 2e-6)
                    fail_msg("table %d [%d,%d]: %.9g, want %.9g (exact %.9g)", s, p, k, got, want,
                             exact);
            }
        tx_tensor_release(&t);
    }
    tx_tensor_release(&inv);
    teexec_model *folded = rw_emit_load(g);
    assert_all_typed(folded, "llama_torchscript folded");
    teexec_model_destroy(folded);
    report_free(&r);
    tx_rw_free(g);
    /* lowering after folding sees the tables: RotaryEmbedding for q and k
     * of both layers */
    teexec_model *low = NULL;
    tx_lower_report *lr = NULL;
    rw_ok(tx_model_lower(m, &lr, &low), "tx_model_lower");
    size_t ropes = 0;
    for (size_t i = 0; i < lr->n_notes; i++)
        ropes += lr->notes[i].lowered && strcmp(lr->notes[i].pattern, "RotaryEmbedding") == 0;
    assert_int_equal(ropes, 4);
    assert_all_typed(low, "llama_torchscript lowered");
    tx_lower_report_free(lr);
    teexec_model_destroy(low);
    teexec_model_destroy(m);
}

/* nanoGPT (TorchScript): 1/sqrt(d) from Shape(q) -> Slice -> Cast -> Sqrt
 * -> Div -> Sqrt on both operands, and masked_fill(~tril) written as
 * Expand(1.0, Concat(Slice(Shape(q)), Slice(Shape(k)))) -> Trilu -> Equal
 * -> Where(-inf, 0), twelve times. Folded, the attention of every block
 * lowers to DotProductAttention. */
static void test_nanogpt_scale_and_mask(void **state)
{
    (void)state;
    teexec_model *m = load_zoo("nanogpt12_torchscript");
    tx_rw_graph *g = NULL;
    tx_lower_report r = {0};
    size_t n = 0;
    fold(m, &g, &r, &n);
    assert_int_equal(r.n_notes, 0);
    const char *gone[] = {"Shape", "Slice", "Sqrt", "Div", "Trilu", "Equal", "Where", "Expand"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++)
        if (live_ops(g, gone[i])) fail_msg("%s left after folding", gone[i]);
    /* the scale: sqrt(1 / sqrt(8)) in float32 steps */
    tx_tensor t;
    folded_value(g, "/m/h.0/Sqrt_1_output_0", &t);
    assert_int_equal(t.numel, 1);
    float want = (float)sqrt((double)(float)(1.0 / (double)(float)sqrt(8.0)));
    assert_true(((const float *)t.data)[0] == want);
    tx_tensor_release(&t);
    /* the mask: -inf strictly above the diagonal */
    folded_value(g, "/m/h.0/Where_output_0", &t);
    assert_int_equal(t.numel, 256);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float x = ((const float *)t.data)[i * 16 + j];
            assert_true(j <= i ? x == 0.0f : (isinf(x) && x < 0));
        }
    tx_tensor_release(&t);
    report_free(&r);
    tx_rw_free(g);
    teexec_model *low = NULL;
    tx_lower_report *lr = NULL;
    rw_ok(tx_model_lower(m, &lr, &low), "tx_model_lower");
    size_t dpa = 0;
    for (size_t i = 0; i < lr->n_notes; i++)
        dpa += lr->notes[i].lowered && strcmp(lr->notes[i].pattern, "DotProductAttention") == 0;
    assert_int_equal(dpa, 12);
    assert_all_typed(low, "nanogpt12_torchscript lowered");
    tx_lower_report_free(lr);
    teexec_model_destroy(low);
    teexec_model_destroy(m);
}

/* OPT (TorchScript): positions = CumSum(mask) * mask - 1, + 2, from the
 * all-ones mask built in the graph: 2..17 in every row. */
static void test_opt_positions(void **state)
{
    (void)state;
    teexec_model *m = load_zoo("opt_torchscript");
    tx_rw_graph *g = NULL;
    tx_lower_report r = {0};
    fold(m, &g, &r, NULL);
    assert_int_equal(r.n_notes, 0);
    assert_int_equal(live_ops(g, "CumSum"), 0);
    /* the position ids feed the Gather of the position table */
    bool found = false;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (nd->dead || strcmp(nd->op_type, "Gather") || !tx_rw_is_initializer(g, nd->inputs[0]) ||
            !strstr(nd->inputs[0], "embed_positions"))
            continue;
        tx_tensor t;
        folded_value(g, nd->inputs[1], &t);
        assert_int_equal(t.dtype, TEEXEC_DTYPE_INT64);
        assert_int_equal(t.numel, 32);
        for (uint64_t k = 0; k < 32; k++) assert_int_equal(((const int64_t *)t.data)[k], (int64_t)(k % 16) + 2);
        tx_tensor_release(&t);
        found = true;
    }
    assert_true(found);
    report_free(&r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

/* Every export: after folding no node but a Constant has only constant
 * inputs (initializers of integer/bool types, Constant outputs), no Shape
 * is left (every input shape is static), and the folded and the lowered
 * models type every value. Exports with an op the typing pass does not
 * know yet say which. */
static void test_zoo_nothing_constant_left(void **state)
{
    (void)state;
    static const char *const names[] = {
        "bert_dynamo", "bert_torchscript", "distilbert_dynamo", "distilbert_torchscript",
        "electra_dynamo", "electra_torchscript", "gemma_dynamo", "gemma_torchscript",
        "gpt2_dynamo", "gpt2_torchscript", "gpt_neox_dynamo", "gpt_neox_torchscript",
        "llama_dynamo", "llama_dynamo_op23", "llama_torchscript", "mistral_dynamo",
        "mistral_torchscript", "nanogpt12_dynamo", "nanogpt12_torchscript", "opt_dynamo",
        "opt_torchscript", "phi_dynamo", "phi_torchscript", "qwen2_dynamo", "qwen2_torchscript",
        "roberta_dynamo", "roberta_torchscript", "vit_dynamo", "vit_torchscript"};
    size_t typed = 0;
    for (size_t e = 0; e < sizeof names / sizeof *names; e++) {
        teexec_model *m = load_zoo(names[e]);
        tx_rw_graph *g = NULL;
        fold(m, &g, NULL, NULL);
        /* with every op known, every shape is static: no Shape is left */
        tx_infer_value *v0 = NULL;
        teexec_status *st0 = tx_infer_graph(m->ir->graph, m->file, NULL, NULL, 0, &v0);
        bool knows_all = !st0;
        teexec_status_destroy(st0);
        tx_infer_values_free(v0, m->ir->graph->n_values);
        for (size_t i = 0; i < tx_rw_node_count(g); i++) {
            const tx_rw_node *nd = tx_rw_node_at(g, i);
            if (nd->dead || !strcmp(nd->op_type, "Constant")) continue;
            if (knows_all && (!strcmp(nd->op_type, "Shape") || !strcmp(nd->op_type, "Size")))
                fail_msg("%s: %s \"%s\" is left", names[e], nd->op_type, nd->name);
            bool all_const = nd->n_inputs > 0;
            for (size_t k = 0; all_const && k < nd->n_inputs; k++) {
                const char *in = nd->inputs[k];
                if (!in[0]) continue;
                tx_tensor t;
                bool c = tx_rw_constant(g, in, &t);
                if (!c) {
                    all_const = false;
                    continue;
                }
                /* float initializers are parameters, not constants */
                if (tx_rw_is_initializer(g, in) && (t.dtype == TEEXEC_DTYPE_FLOAT ||
                                                    t.dtype == TEEXEC_DTYPE_FLOAT16 ||
                                                    t.dtype == TEEXEC_DTYPE_BFLOAT16))
                    c = false;
                tx_tensor_release(&t);
                all_const = c;
            }
            if (all_const)
                fail_msg("%s: node \"%s\" (%s) reads only constants after folding", names[e],
                         nd->name, nd->op_type);
        }
        teexec_model *folded = rw_emit_load(g);
        tx_rw_free(g);
        tx_infer_value *v = NULL;
        teexec_status *st = tx_infer_graph(folded->ir->graph, folded->file, NULL, NULL, 0, &v);
        if (st && teexec_status_code(st) == TEEXEC_ERR_UNSUPPORTED) {
            printf("  %s: not typed yet: %s\n", names[e], teexec_status_message(st));
            teexec_status_destroy(st);
            /* the TorchScript exports all type, but for ViT's Conv */
            if (strstr(names[e], "torchscript") && strcmp(names[e], "vit_torchscript"))
                fail_msg("%s does not type", names[e]);
        } else {
            rw_ok(st, names[e]);
            tx_infer_values_free(v, folded->ir->graph->n_values);
            assert_all_typed(folded, names[e]);
            teexec_model *low = NULL;
            rw_ok(tx_model_lower(m, NULL, &low), "tx_model_lower");
            assert_all_typed(low, names[e]);
            teexec_model_destroy(low);
            typed++;
        }
        teexec_model_destroy(folded);
        teexec_model_destroy(m);
    }
    printf("  %zu of %zu exports typed in full\n", typed, sizeof names / sizeof *names);
    assert_true(typed >= 22);
}

/* ---- the size bound -------------------------------------------------------- */

/* Expand of one float to [2048, 2048]: 4M elements from 4 bytes stays,
 * with the reason. */
static void test_big_expand_stays(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *mp = new_model(&g);
    mb_input(g, "x", ONNX_FLOAT, "2048,2048");
    mb_output(g, "y", ONNX_FLOAT, "2048,2048");
    float one = 1.0f;
    const_node(g, "one", ONNX_FLOAT, (int64_t[]){1}, 1, &one, sizeof one);
    const_i64(g, "shape", (int64_t[]){2}, 1, (int64_t[]){2048, 2048});
    mb_node(g, "big", "Expand", NULL, "one,shape", "ones");
    mb_node(g, "add", "Add", NULL, "x,ones", "y");
    teexec_model *m = load_built(mp);
    tx_rw_graph *rg = NULL;
    tx_lower_report r = {0};
    size_t n = 9;
    fold(m, &rg, &r, &n);
    assert_int_equal(n, 0);
    assert_int_equal(live_ops(rg, "Expand"), 1);
    const tx_lower_note *x = note_at(&r, "big");
    assert_non_null(x);
    assert_string_equal(x->pattern, "ConstantFold");
    assert_false(x->lowered);
    assert_non_null(strstr(x->reason, "larger than the constant inputs it replaces"));
    report_free(&r);
    tx_rw_free(rg);
    teexec_model_destroy(m);
    mb_free_all();
}

/* A Transpose of a [512, 256] float Constant (131072 elements, over the
 * small bound) folds when it is the Constant's only reader (the result
 * replaces it), and stays when another node reads the Constant too. */
static void build_transpose(bool shared, teexec_model **out)
{
    Onnx__GraphProto *g;
    Onnx__ModelProto *mp = new_model(&g);
    mb_input(g, "x", ONNX_FLOAT, "256,512");
    mb_output(g, "y", ONNX_FLOAT, "256,512");
    if (shared) mb_output(g, "z", ONNX_FLOAT, "512,256");
    float *w = mb_alloc(512 * 256 * sizeof(float));
    for (int i = 0; i < 512 * 256; i++) w[i] = (float)i;
    const_node(g, "w", ONNX_FLOAT, (int64_t[]){512, 256}, 2, w, sizeof(float));
    Onnx__NodeProto *t = mb_node(g, "tr", "Transpose", NULL, "w", "wt");
    mb_attr_ints(t, "perm", (int64_t[]){1, 0}, 2);
    mb_node(g, "add", "Add", NULL, "x,wt", "y");
    if (shared) mb_node(g, "neg", "Neg", NULL, "w", "z");
    *out = load_built(mp);
}

static void test_big_transpose(void **state)
{
    (void)state;
    teexec_model *m;
    build_transpose(false, &m);
    tx_rw_graph *g = NULL;
    tx_lower_report r = {0};
    size_t n = 0;
    fold(m, &g, &r, &n);
    assert_int_equal(n, 1);
    assert_int_equal(r.n_notes, 0);
    assert_int_equal(live_ops(g, "Transpose"), 0);
    assert_int_equal(live_ops(g, "Constant"), 1); /* the transposed one, in the Transpose's place */
    tx_tensor t;
    folded_value(g, "wt", &t);
    assert_true(t.dims[0] == 256 && t.dims[1] == 512);
    const float *f = t.data;
    for (int i = 0; i < 256; i += 17)
        for (int j = 0; j < 512; j += 31) assert_true(f[i * 512 + j] == (float)(j * 256 + i));
    tx_tensor_release(&t);
    report_free(&r);
    tx_rw_free(g);
    teexec_model_destroy(m);
    mb_free_all();

    build_transpose(true, &m);
    fold(m, &g, &r, &n);
    assert_int_equal(n, 0);
    assert_int_equal(live_ops(g, "Transpose"), 1);
    const tx_lower_note *x = note_at(&r, "tr");
    assert_non_null(x);
    assert_non_null(strstr(x->reason, "over the folding bound of 65536 elements"));
    report_free(&r);
    tx_rw_free(g);
    teexec_model_destroy(m);
    mb_free_all();
}

/* ---- exact arithmetic and ONNX's rules ------------------------------------- */

/* Each op's result feeds an Add with a graph input, so it folds into a
 * constant the test reads back by name. */
static void add_sink(Onnx__GraphProto *g, const char *value, int32_t elem, const char *dims)
{
    char in[64], out[64], nm[64];
    snprintf(in, sizeof in, "in_%s", value);
    snprintf(out, sizeof out, "out_%s", value);
    snprintf(nm, sizeof nm, "sink_%s", value);
    char ins[160];
    snprintf(ins, sizeof ins, "%s,%s", in, value);
    mb_input(g, in, elem, dims);
    mb_output(g, out, elem, dims);
    mb_node(g, nm, elem == ONNX_BOOL ? "Or" : "Add", NULL, ins, out);
}

static int64_t i64_at(const tx_tensor *t, uint64_t k)
{
    assert_int_equal(t->dtype, TEEXEC_DTYPE_INT64);
    return ((const int64_t *)t->data)[k];
}

static void test_exact_integers(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *mp = new_model(&g);
    const int64_t big = ((int64_t)1 << 53) + 1;
    /* Slice of an int64 vector to INT64_MAX keeps every bit of its entries */
    const_i64(g, "v", (int64_t[]){3}, 1, (int64_t[]){big, INT64_MAX, -7});
    const_i64(g, "s0", (int64_t[]){1}, 1, (int64_t[]){1});
    const_i64(g, "s1", (int64_t[]){1}, 1, (int64_t[]){INT64_MAX});
    mb_node(g, "slice", "Slice", NULL, "v,s0,s1", "sliced");
    add_sink(g, "sliced", ONNX_INT64, "2");
    /* Cast int64 2^53 + 1 -> float32 rounds once: 2^53 */
    mb_node(g, "cast_f", "Cast", NULL, "v", "as_float");
    mb_attr_int(g->node[g->n_node - 1], "to", ONNX_FLOAT);
    add_sink(g, "as_float", ONNX_FLOAT, "3");
    /* integer Div truncates toward zero, Mod (fmod=0) takes the divisor's sign */
    const_i64(g, "num", (int64_t[]){4}, 1, (int64_t[]){-7, 7, -7, 7});
    const_i64(g, "den", (int64_t[]){4}, 1, (int64_t[]){2, -2, -2, 2});
    mb_node(g, "div", "Div", NULL, "num,den", "quot");
    add_sink(g, "quot", ONNX_INT64, "4");
    mb_node(g, "mod", "Mod", NULL, "num,den", "rem");
    add_sink(g, "rem", ONNX_INT64, "4");
    /* Cast float -> int32 truncates; int64 -> int32 wraps */
    float fl[4] = {2.7f, -2.7f, 0.5f, -0.5f};
    const_node(g, "fl", ONNX_FLOAT, (int64_t[]){4}, 1, fl, sizeof(float));
    mb_node(g, "cast_i", "Cast", NULL, "fl", "trunc");
    mb_attr_int(g->node[g->n_node - 1], "to", ONNX_INT32);
    add_sink(g, "trunc", ONNX_INT32, "4");
    const_i64(g, "wide", (int64_t[]){2}, 1, (int64_t[]){((int64_t)1 << 32) + 5, -1});
    mb_node(g, "cast_w", "Cast", NULL, "wide", "wrapped");
    mb_attr_int(g->node[g->n_node - 1], "to", ONNX_INT32);
    add_sink(g, "wrapped", ONNX_INT32, "2");
    /* CumSum, exclusive and reversed */
    const_i64(g, "cs", (int64_t[]){3}, 1, (int64_t[]){1, 2, 3});
    const_i64(g, "ax", NULL, 0, (int64_t[]){0});
    Onnx__NodeProto *c = mb_node(g, "cumsum", "CumSum", NULL, "cs,ax", "csum");
    mb_attr_int(c, "exclusive", 1);
    mb_attr_int(c, "reverse", 1);
    add_sink(g, "csum", ONNX_INT64, "3");
    /* Range with a negative count is empty (ONNX: max(ceil(..), 0)) */
    const_i64(g, "r5", NULL, 0, (int64_t[]){5});
    const_i64(g, "r0", NULL, 0, (int64_t[]){0});
    const_i64(g, "r1", NULL, 0, (int64_t[]){1});
    mb_node(g, "range", "Range", NULL, "r5,r0,r1", "empty");
    const_i64(g, "three", (int64_t[]){1}, 1, (int64_t[]){3});
    mb_node(g, "cat", "Concat", NULL, "empty,three", "target");
    mb_attr_int(g->node[g->n_node - 1], "axis", 0);
    mb_input(g, "x3", ONNX_FLOAT, "1,3");
    mb_output(g, "y3", ONNX_FLOAT, "3");
    mb_node(g, "reshape", "Reshape", NULL, "x3,target", "y3");
    /* Trilu (upper, k = 1) of a bool matrix, Where with broadcasting */
    uint8_t ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const_node(g, "m", ONNX_BOOL, (int64_t[]){3, 3}, 2, ones, 1);
    const_i64(g, "k1", NULL, 0, (int64_t[]){1});
    mb_node(g, "tri", "Trilu", NULL, "m,k1", "upper");
    add_sink(g, "upper", ONNX_BOOL, "3,3");
    const_i64(g, "yes", (int64_t[]){1}, 1, (int64_t[]){10});
    const_i64(g, "no", (int64_t[]){3, 1}, 2, (int64_t[]){-1, -2, -3});
    mb_node(g, "where", "Where", NULL, "upper,yes,no", "picked");
    add_sink(g, "picked", ONNX_INT64, "3,3");

    teexec_model *m = load_built(mp);
    tx_rw_graph *rg = NULL;
    tx_lower_report r = {0};
    size_t n = 0;
    fold(m, &rg, &r, &n);
    if (r.n_notes) fail_msg("note at %s: %s", r.notes[0].node, r.notes[0].reason);
    assert_int_equal(live_ops(rg, "Slice") + live_ops(rg, "Cast") + live_ops(rg, "Div") +
                         live_ops(rg, "Mod") + live_ops(rg, "CumSum") + live_ops(rg, "Range") +
                         live_ops(rg, "Concat") + live_ops(rg, "Trilu") + live_ops(rg, "Where"),
                     0);
    tx_tensor t;
    folded_value(rg, "sliced", &t);
    assert_int_equal(t.numel, 2);
    assert_true(i64_at(&t, 0) == INT64_MAX && i64_at(&t, 1) == -7);
    tx_tensor_release(&t);
    folded_value(rg, "as_float", &t);
    assert_true(((const float *)t.data)[0] == 9007199254740992.0f);
    assert_true(((const float *)t.data)[1] == 9223372036854775808.0f);
    tx_tensor_release(&t);
    folded_value(rg, "quot", &t);
    assert_true(i64_at(&t, 0) == -3 && i64_at(&t, 1) == -3 && i64_at(&t, 2) == 3 && i64_at(&t, 3) == 3);
    tx_tensor_release(&t);
    folded_value(rg, "rem", &t);
    assert_true(i64_at(&t, 0) == 1 && i64_at(&t, 1) == -1 && i64_at(&t, 2) == -1 && i64_at(&t, 3) == 1);
    tx_tensor_release(&t);
    folded_value(rg, "trunc", &t);
    assert_int_equal(t.dtype, TEEXEC_DTYPE_INT32);
    const int32_t *i32 = t.data;
    assert_true(i32[0] == 2 && i32[1] == -2 && i32[2] == 0 && i32[3] == 0);
    tx_tensor_release(&t);
    folded_value(rg, "wrapped", &t);
    i32 = t.data;
    assert_true(i32[0] == 5 && i32[1] == -1);
    tx_tensor_release(&t);
    folded_value(rg, "csum", &t);
    assert_true(i64_at(&t, 0) == 5 && i64_at(&t, 1) == 3 && i64_at(&t, 2) == 0);
    tx_tensor_release(&t);
    folded_value(rg, "target", &t);
    assert_true(t.numel == 1 && i64_at(&t, 0) == 3);
    tx_tensor_release(&t);
    folded_value(rg, "upper", &t);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) assert_int_equal(((const uint8_t *)t.data)[i * 3 + j], j - i >= 1);
    tx_tensor_release(&t);
    folded_value(rg, "picked", &t);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) assert_true(i64_at(&t, (uint64_t)(i * 3 + j)) == (j - i >= 1 ? 10 : -(i + 1)));
    tx_tensor_release(&t);
    /* integer results are initializers */
    assert_true(tx_rw_is_initializer(rg, "quot"));
    teexec_model *folded = rw_emit_load(rg);
    assert_all_typed(folded, "folded");
    teexec_model_destroy(folded);
    report_free(&r);
    tx_rw_free(rg);
    teexec_model_destroy(m);
    mb_free_all();
}

/* ---- refusals ---------------------------------------------------------------- */

/* Constant nodes whose values break a rule or overflow stay, each with its
 * reason; the rule's own error surfaces where the model is typed, naming
 * the node, rather than a crash or a wrong number. */
static teexec_model *build_one(const char *op, const int64_t *a, size_t na, const int64_t *b,
                               size_t nb, const int64_t *c, size_t nc, bool scalars)
{
    Onnx__GraphProto *g;
    Onnx__ModelProto *mp = new_model(&g);
    const_i64(g, "a", scalars ? NULL : (int64_t[]){(int64_t)na}, scalars ? 0 : 1, a);
    const_i64(g, "b", scalars ? NULL : (int64_t[]){(int64_t)nb}, scalars ? 0 : 1, b);
    if (c) const_i64(g, "c", scalars ? NULL : (int64_t[]){(int64_t)nc}, scalars ? 0 : 1, c);
    mb_node(g, "op", op, NULL, c ? "a,b,c" : "a,b", "r");
    mb_input(g, "x", ONNX_INT64, NULL);
    mb_output(g, "y", ONNX_INT64, NULL);
    mb_node(g, "use", "Sum", NULL, "x,r", "y");
    return load_built(mp);
}

static void expect_refusal(teexec_model *m, const char *op, const char *reason,
                           bool type_error)
{
    tx_rw_graph *g = NULL;
    tx_lower_report r = {0};
    size_t n = 9;
    fold(m, &g, &r, &n);
    assert_int_equal(n, 0);
    assert_int_equal(live_ops(g, op), 1);
    const tx_lower_note *x = note_at(&r, "op");
    assert_non_null(x);
    if (!strstr(x->reason, reason)) fail_msg("%s: reason \"%s\" does not say \"%s\"", op, x->reason, reason);
    report_free(&r);
    tx_rw_free(g);
    if (type_error) {
        tx_infer_value *v = NULL;
        teexec_status *st = tx_infer_graph(m->ir->graph, m->file, NULL, NULL, 0, &v);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
        assert_non_null(teexec_status_node(st));
        assert_string_equal(teexec_status_node(st), "op");
        teexec_status_destroy(st);
    }
    teexec_model_destroy(m);
    mb_free_all();
}

static void test_refusals(void **state)
{
    (void)state;
    /* a Range of 2^63 - 1 elements, one with delta 0, one from INT64_MIN */
    expect_refusal(build_one("Range", (int64_t[]){0}, 1, (int64_t[]){INT64_MAX}, 1, (int64_t[]){1}, 1,
                             true),
                   "Range", "shape rule rejects", true);
    expect_refusal(build_one("Range", (int64_t[]){0}, 1, (int64_t[]){4}, 1, (int64_t[]){0}, 1, true),
                   "Range", "shape rule rejects", true);
    expect_refusal(build_one("Range", (int64_t[]){INT64_MIN}, 1, (int64_t[]){INT64_MAX}, 1,
                             (int64_t[]){1}, 1, true),
                   "Range", "shape rule rejects", true);
    /* int64 overflow is not wrapped silently */
    expect_refusal(build_one("Mul", (int64_t[]){INT64_MAX}, 1, (int64_t[]){2}, 1, NULL, 0, false),
                   "Mul", "overflows", false);
    expect_refusal(build_one("Add", (int64_t[]){INT64_MAX}, 1, (int64_t[]){1}, 1, NULL, 0, false),
                   "Add", "overflows", false);
    /* integer division by zero */
    expect_refusal(build_one("Div", (int64_t[]){1}, 1, (int64_t[]){0}, 1, NULL, 0, false), "Div",
                   "divides an integer by zero", false);
    /* a Gather index past the end: left for the kernel to report */
    expect_refusal(build_one("Gather", (int64_t[]){1, 2, 3}, 3, (int64_t[]){3}, 1, NULL, 0, false),
                   "Gather", "index is out of range", false);
}

/* A MatMul of constants over the evaluator's work bound stays (the bound
 * is on multiply-adds: a [256, 512] x [512, 256] product is 2^25). */
static void test_matmul_bound(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *mp = new_model(&g);
    float *a = mb_alloc(256 * 512 * sizeof(float));
    for (int i = 0; i < 256 * 512; i++) a[i] = (float)(i % 7);
    const_node(g, "a", ONNX_FLOAT, (int64_t[]){256, 512}, 2, a, sizeof(float));
    const_node(g, "b", ONNX_FLOAT, (int64_t[]){512, 256}, 2, a, sizeof(float));
    mb_node(g, "op", "MatMul", NULL, "a,b", "r");
    mb_input(g, "x", ONNX_FLOAT, "256,256");
    mb_output(g, "y", ONNX_FLOAT, "256,256");
    mb_node(g, "use", "Add", NULL, "x,r", "y");
    expect_refusal(load_built(mp), "MatMul", "too large", false);
}

/* ---- external data ---------------------------------------------------------- */

/* y = x @ w + Cast(ConstantOfShape([4])) with w [4, 4] in an external file:
 * the model a session runs (tx_model_runnable) has the constant folded and
 * w still a reference to the file (not read and copied into a second
 * serialized model), and runs to the right numbers. */
static void test_external_weights_stay_external(void **state)
{
    (void)state;
    char dir[] = "/tmp/teexec_fold_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], bin[256];
    snprintf(bin, sizeof bin, "%s/w.bin", dir);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    float w[16];
    for (int i = 0; i < 16; i++) w[i] = (float)(i + 1) * 0.25f;
    FILE *f = fopen(bin, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(w, sizeof w, 1, f), 1);
    fclose(f);

    Onnx__GraphProto *g;
    Onnx__ModelProto *mp = new_model(&g);
    mb_input(g, "x", ONNX_FLOAT, "2,4");
    mb_output(g, "y", ONNX_FLOAT, "2,4");
    Onnx__TensorProto *t = mb_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str("w");
    t->has_data_type = 1;
    t->data_type = ONNX_FLOAT;
    t->dims = mb_alloc(2 * sizeof(int64_t));
    t->dims[0] = t->dims[1] = 4;
    t->n_dims = 2;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    Onnx__StringStringEntryProto *e = mb_alloc(sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = mb_str("location");
    e->value = mb_str("w.bin");
    t->external_data = mb_alloc(sizeof(void *));
    t->external_data[0] = e;
    t->n_external_data = 1;
    g->initializer[g->n_initializer++] = t;
    const_i64(g, "shape", (int64_t[]){1}, 1, (int64_t[]){4});
    Onnx__NodeProto *cs = mb_node(g, "cos", "ConstantOfShape", NULL, "shape", "ones_i");
    Onnx__TensorProto *one = mb_alloc(sizeof *one);
    onnx__tensor_proto__init(one);
    one->has_data_type = 1;
    one->data_type = ONNX_INT64;
    one->dims = mb_alloc(sizeof(int64_t));
    one->dims[0] = 1;
    one->n_dims = 1;
    int64_t *ov = mb_alloc(sizeof(int64_t));
    *ov = 3;
    one->has_raw_data = 1;
    one->raw_data.data = (uint8_t *)ov;
    one->raw_data.len = sizeof(int64_t);
    mb_attr(cs, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t = one;
    Onnx__NodeProto *c = mb_node(g, "cast", "Cast", NULL, "ones_i", "threes");
    mb_attr_int(c, "to", ONNX_FLOAT);
    /* Gemm(transB=1) reads w as a Linear does ([out, in]): lowering keeps
     * the tensor as it is, so it can stay a reference */
    Onnx__NodeProto *mm = mb_node(g, "mm", "Gemm", NULL, "x,w", "xw");
    mb_attr_int(mm, "transB", 1);
    mb_node(g, "add", "Add", NULL, "xw,threes", "y");
    size_t size;
    uint8_t *bytes = mb_pack(mp, &size);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, size, 1, f), 1);
    fclose(f);
    free(bytes);
    mb_free_all();

    teexec_model *m = NULL;
    rw_ok(teexec_model_load_file(path, NULL, &m), path);
    const teexec_model *prep = NULL;
    rw_ok(tx_model_runnable(m, &prep, NULL), "tx_model_runnable");
    assert_true(prep != m); /* the lowered, folded copy */
    const tx_ir_graph *pg = prep->ir->graph;
    bool w_external = false, cast_left = false;
    for (size_t i = 0; i < pg->n_initializers; i++) {
        const tx_ir_value *val = &pg->values[pg->initializers[i]];
        if (strcmp(val->name, "w") == 0)
            w_external = val->initializer->has_data_location &&
                         val->initializer->data_location ==
                             ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    }
    for (size_t i = 0; i < pg->n_nodes; i++) cast_left |= strcmp(pg->nodes[i].op_type, "Cast") == 0;
    assert_true(w_external);
    assert_false(cast_left);

    float xv[8] = {1, 0, 0, 0, 0, 1, 2, 0};
    teexec_tensor *x = NULL;
    rw_ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){2, 4}, &x), "tensor");
    memcpy(teexec_tensor_data(x), xv, sizeof xv);
    rw_inputs in = {.n = 1, .names = {"x"}, .t = {x}};
    teexec_tensor *out[RW_MAX_IO];
    size_t n_out = 0;
    rw_ok(rw_run(m, &in, out, &n_out), "run");
    const float *y = teexec_tensor_data_const(out[0]);
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < 4; j++) {
            double want = 3;
            for (int k = 0; k < 4; k++) want += (double)xv[r * 4 + k] * w[j * 4 + k];
            assert_true(y[r * 4 + j] == (float)want);
        }
    rw_outputs_free(out, n_out);
    teexec_tensor_destroy(x);
    teexec_model_destroy(m);
    unlink(bin);
    unlink(path);
    rmdir(dir);
}

/* A trainer (and a session) of a model whose prepared (folded) copy they
 * cannot run fails with the caller's file named: the prepared copy is
 * gone by the time the error is made. */
static void test_prepared_model_errors_name_the_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/teexec_fold_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    Onnx__GraphProto *g;
    Onnx__ModelProto *mp = new_model(&g);
    mb_input(g, "x", ONNX_FLOAT, "2,2");
    mb_output(g, "y", ONNX_FLOAT, "");
    const_i64(g, "shape", (int64_t[]){1}, 1, (int64_t[]){2});
    mb_node(g, "cos", "ConstantOfShape", NULL, "shape", "zeros");
    mb_node(g, "add", "Add", NULL, "x,zeros", "x2");
    mb_node(g, "det", "Det", NULL, "x2", "y"); /* no kernel for it */
    size_t size;
    uint8_t *bytes = mb_pack(mp, &size);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, size, 1, f), 1);
    fclose(f);
    free(bytes);
    mb_free_all();
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_file(path, NULL, &m), path);
    const teexec_model *prep = NULL;
    rw_ok(tx_model_runnable(m, &prep, NULL), "prepare");
    bool cos_left = false; /* the ConstantOfShape folded */
    for (size_t i = 0; i < prep->ir->graph->n_nodes; i++)
        cos_left |= strcmp(prep->ir->graph->nodes[i].op_type, "ConstantOfShape") == 0;
    assert_false(cos_left);
    teexec_train_options o;
    teexec_train_options_init(&o);
    teexec_trainer *t = NULL;
    teexec_status *st = teexec_trainer_create(m, &o, &t);
    assert_non_null(st);
    assert_null(t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "Det"));
    assert_non_null(teexec_status_file(st));
    assert_string_equal(teexec_status_file(st), path);
    teexec_status_destroy(st);
    teexec_session_options *so = NULL;
    rw_ok(teexec_session_options_create(&so), "options");
    rw_ok(teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU), "device");
    teexec_session *s = NULL;
    st = teexec_session_create(m, so, &s);
    teexec_session_options_destroy(so);
    assert_non_null(st);
    assert_null(s);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    teexec_model_destroy(m);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_causal_mask),
        cmocka_unit_test(test_llama_rope_tables),
        cmocka_unit_test(test_nanogpt_scale_and_mask),
        cmocka_unit_test(test_opt_positions),
        cmocka_unit_test(test_zoo_nothing_constant_left),
        cmocka_unit_test(test_big_expand_stays),
        cmocka_unit_test(test_big_transpose),
        cmocka_unit_test(test_exact_integers),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_matmul_bound),
        cmocka_unit_test(test_external_weights_stay_external),
        cmocka_unit_test(test_prepared_model_errors_name_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
