/* Tests for the quantization plan (tx_plan_quantization): formats and block
 * shapes per recipe, usages per gradient need, divisibility, native vs
 * emulated and scale layout per device, hand-off producers, delayed-scaling
 * slots, annotations and the first/last policy. Plans are made by hand
 * (plan_test_util.h) over small te.ops chains built in memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../import/model_builder.h"
#include "plan_test_util.h"

/* x[M,K] -> [LayerNorm] -> Linear(w1 [N,K]) -> Bias -> GELU -> Linear(w2 [K,N])
 * -> Bias [-> Linear(w3 [K,K])] -> y. Node names: ln, fc1, b1, act, fc2, b2,
 * fc3. ann_node/ann_attr/ann_val: one string attribute on that node. */
typedef struct chain_opts {
    int64_t m, k, n;
    bool with_ln, third;
    const char *ann_node, *ann_attr, *ann_val;
} chain_opts;

static void load_chain(const chain_opts *o, pt_model *pm)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    mb_opset(m, "te.ops", 1);
    Onnx__GraphProto *g = mb_graph("chain");
    m->graph = g;
    char dims[64];
    snprintf(dims, sizeof dims, "%lld,%lld", (long long)o->m, (long long)o->k);
    mb_input(g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims);
    int64_t kv[1] = {o->k}, w1[2] = {o->n, o->k}, nv[1] = {o->n}, w2[2] = {o->k, o->n}, w3[2] = {o->k, o->k};
    const char *x = "x";
    if (o->with_ln) {
        mb_init(g, "ln_w", kv, 1);
        mb_init(g, "ln_b", kv, 1);
        mb_node(g, "ln", "LayerNorm", "te.ops", "x,ln_w,ln_b", "h0");
        x = "h0";
    }
    char in[64];
    snprintf(in, sizeof in, "%s,w1", x);
    mb_init(g, "w1", w1, 2);
    mb_init(g, "bias1", nv, 1);
    mb_init(g, "w2", w2, 2);
    mb_init(g, "bias2", kv, 1);
    mb_node(g, "fc1", "Linear", "te.ops", in, "h1");
    mb_node(g, "b1", "Bias", "te.ops", "h1,bias1", "h2");
    mb_node(g, "act", "GELU", "te.ops", "h2", "h3");
    mb_node(g, "fc2", "Linear", "te.ops", "h3,w2", "h4");
    mb_node(g, "b2", "Bias", "te.ops", "h4,bias2", o->third ? "h5" : "y");
    if (o->third) {
        mb_init(g, "w3", w3, 2);
        mb_node(g, "fc3", "Linear", "te.ops", "h5,w3", "y");
    }
    mb_output(g, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims);
    if (o->ann_node)
        for (size_t i = 0; i < g->n_node; i++)
            if (!strcmp(g->node[i]->name, o->ann_node)) mb_attr_string(g->node[i], o->ann_attr, o->ann_val);
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    memset(pm, 0, sizeof(*pm));
    teexec_status *st = teexec_model_load_memory(bytes, size, NULL, NULL, &pm->model);
    free(bytes);
    mb_free_all();
    assert_null(st);
    pm->g = pm->model->ir->graph;
    pm->file = pm->model->file;
    st = pt_infer(pm);
    if (st) fprintf(stderr, "%s\n", teexec_status_message(st));
    assert_null(st);
}

static const chain_opts base_chain = {32, 64, 128, true, false, NULL, NULL, NULL};

/* One chain group over all nodes, unfused (fob 0 when training). */
static tx_fuser_plan *chain_plan(const pt_model *m, bool training)
{
    tx_fuser_plan *p = pt_plan_new(m->g, training, NULL);
    assert_non_null(p);
    int32_t nodes[16];
    int32_t n = (int32_t)m->g->n_nodes;
    for (int32_t i = 0; i < n; i++) nodes[i] = i;
    pt_group_add(p, m->g, TX_GROUP_CHAIN, nodes, n, training ? 0 : n, NULL, 0, NULL, 0);
    return p;
}

typedef struct qcase {
    pt_model m;
    tx_fuser_plan *p;
    tx_plan_request req;
    bool needs[1];
} qcase;

static void run_case(qcase *c, const chain_opts *o, const char *recipe, const char *device, bool training)
{
    load_chain(o, &c->m);
    c->req = pt_request(&c->m, recipe, device, training);
    c->needs[0] = true;
    c->req.input_needs_grad = c->needs;
    c->req.n_inputs = 1;
    c->p = chain_plan(&c->m, training);
    teexec_status *st = tx_plan_quantization(c->m.g, &c->req, c->p);
    if (st) fprintf(stderr, "%s\n", teexec_status_message(st));
    assert_null(st);
}

static void end_case(qcase *c)
{
    pt_plan_free(c->p);
    pt_model_free(&c->m);
}

static const tx_plan_quant *q_of(const qcase *c, const char *node, tx_qoperand op)
{
    int32_t n = pt_node(c->m.g, node);
    assert_true(n >= 0);
    const tx_plan_quant *q = tx_plan_quant_find(c->p, n, op);
    assert_non_null(q);
    return q;
}

static bool why_has(const tx_plan_quant *q, const char *text)
{
    return q->why && strstr(q->why, text);
}

/* ---- usages ------------------------------------------------------------------- */

static void training_needs_every_usage(void **state)
{
    (void)state;
    qcase c;
    run_case(&c, &base_chain, "fp8-current:hybrid", "sm_90", true);
    assert_int_equal(c.p->n_quant, 6);
    const tx_plan_quant *x = q_of(&c, "fc1", TX_QOP_INPUT), *w = q_of(&c, "fc1", TX_QOP_WEIGHT),
                        *dy = q_of(&c, "fc1", TX_QOP_GRAD_OUTPUT);
    assert_true(x->quantized && w->quantized && dy->quantized);
    unsigned both = TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE;
    assert_int_equal(x->usage, both);
    assert_int_equal(w->usage, both);
    assert_int_equal(dy->usage, both);
    assert_int_equal(x->kind, TX_QKIND_FP8_TENSOR);
    assert_int_equal(x->data_dtype, TEEXEC_DTYPE_FLOAT8E4M3FN);
    assert_int_equal(w->data_dtype, TEEXEC_DTYPE_FLOAT8E4M3FN);
    assert_int_equal(dy->data_dtype, TEEXEC_DTYPE_FLOAT8E5M2); /* HYBRID: grads E5M2 */
    assert_int_equal(x->block_rows, 1);
    assert_int_equal(x->block_cols, 1);
    assert_int_equal(x->delayed_slot, -1);
    assert_true(x->native); /* sm_90 has FP8 GEMMs */
    assert_int_equal(x->scale_layout, TX_SCALE_COMPACT);
    assert_int_equal(x->producer, -1);
    end_case(&c);
}

static void frozen_weights_drop_x_columnwise(void **state)
{
    (void)state;
    qcase c;
    load_chain(&base_chain, &c.m);
    c.req = pt_request(&c.m, "fp8-current", "sm_90", true);
    c.needs[0] = true;
    c.req.input_needs_grad = c.needs;
    c.req.n_inputs = 1;
    c.req.params_frozen = true;
    c.p = chain_plan(&c.m, true);
    assert_null(tx_plan_quantization(c.m.g, &c.req, c.p));
    const tx_plan_quant *x = q_of(&c, "fc2", TX_QOP_INPUT), *w = q_of(&c, "fc2", TX_QOP_WEIGHT),
                        *dy = q_of(&c, "fc2", TX_QOP_GRAD_OUTPUT);
    assert_int_equal(x->usage, TX_QUSAGE_ROWWISE);
    assert_true(why_has(x, "no weight gradient"));
    assert_int_equal(w->usage, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    assert_int_equal(dy->usage, TX_QUSAGE_ROWWISE);
    end_case(&c);
}

static void input_without_grad_drops_w_columnwise(void **state)
{
    (void)state;
    chain_opts o = base_chain;
    o.with_ln = false; /* fc1 reads x directly */
    qcase c;
    load_chain(&o, &c.m);
    c.req = pt_request(&c.m, "mxfp8", "sm_100", true);
    c.needs[0] = false;
    c.req.input_needs_grad = c.needs;
    c.req.n_inputs = 1;
    c.p = chain_plan(&c.m, true);
    assert_null(tx_plan_quantization(c.m.g, &c.req, c.p));
    const tx_plan_quant *w = q_of(&c, "fc1", TX_QOP_WEIGHT), *dy = q_of(&c, "fc1", TX_QOP_GRAD_OUTPUT),
                        *x = q_of(&c, "fc1", TX_QOP_INPUT);
    assert_int_equal(w->usage, TX_QUSAGE_ROWWISE);
    assert_true(why_has(w, "no dgrad"));
    assert_int_equal(dy->usage, TX_QUSAGE_COLUMNWISE);
    assert_int_equal(x->usage, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    /* fc2's input comes from fc1, which has trainable weights: dgrad runs */
    assert_int_equal(q_of(&c, "fc2", TX_QOP_WEIGHT)->usage, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    end_case(&c);
}

static void inference_is_rowwise_only(void **state)
{
    (void)state;
    qcase c;
    run_case(&c, &base_chain, "mxfp8", "sm_100", false);
    const tx_plan_quant *x = q_of(&c, "fc1", TX_QOP_INPUT), *w = q_of(&c, "fc1", TX_QOP_WEIGHT),
                        *dy = q_of(&c, "fc1", TX_QOP_GRAD_OUTPUT);
    assert_int_equal(x->usage, TX_QUSAGE_ROWWISE);
    assert_int_equal(w->usage, TX_QUSAGE_ROWWISE);
    assert_int_equal(dy->usage, 0);
    assert_false(dy->quantized);
    assert_true(why_has(dy, "inference"));
    end_case(&c);
}

/* ---- formats per recipe --------------------------------------------------------- */

static void block_shapes_per_recipe(void **state)
{
    (void)state;
    static const struct {
        const char *recipe;
        tx_qkind kind;
        teexec_dtype dt, dy_dt;
        int xr, xc, wr, wc;
    } cases[] = {
        {"fp8-block", TX_QKIND_FP8_BLOCK, TEEXEC_DTYPE_FLOAT8E4M3FN, TEEXEC_DTYPE_FLOAT8E4M3FN, 1,
         128, 128, 128},
        {"mxfp8", TX_QKIND_MXFP8, TEEXEC_DTYPE_FLOAT8E4M3FN, TEEXEC_DTYPE_FLOAT8E4M3FN, 1, 32, 1,
         32},
        {"mxfp8,2d=1", TX_QKIND_MXFP8, TEEXEC_DTYPE_FLOAT8E4M3FN, TEEXEC_DTYPE_FLOAT8E4M3FN, 1, 32,
         32, 32},
        {"nvfp4", TX_QKIND_NVFP4, TEEXEC_DTYPE_FLOAT4E2M1, TEEXEC_DTYPE_FLOAT4E2M1, 1, 16, 16, 16},
        {"nvfp4,2d=0", TX_QKIND_NVFP4, TEEXEC_DTYPE_FLOAT4E2M1, TEEXEC_DTYPE_FLOAT4E2M1, 1, 16, 1,
         16},
        /* TE's DelayedScaling / Float8CurrentScaling default: HYBRID */
        {"fp8-delayed", TX_QKIND_FP8_TENSOR, TEEXEC_DTYPE_FLOAT8E4M3FN, TEEXEC_DTYPE_FLOAT8E5M2, 1,
         1, 1, 1},
        {"fp8-current", TX_QKIND_FP8_TENSOR, TEEXEC_DTYPE_FLOAT8E4M3FN, TEEXEC_DTYPE_FLOAT8E5M2, 1,
         1, 1, 1},
        {"fp8-current:e4m3", TX_QKIND_FP8_TENSOR, TEEXEC_DTYPE_FLOAT8E4M3FN,
         TEEXEC_DTYPE_FLOAT8E4M3FN, 1, 1, 1, 1},
    };
    chain_opts o = base_chain;
    o.m = 128; /* fp8-block: a native size */
    o.k = 128;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qcase c;
        run_case(&c, &o, cases[i].recipe, "sm_100", true);
        const tx_plan_quant *x = q_of(&c, "fc1", TX_QOP_INPUT), *w = q_of(&c, "fc1", TX_QOP_WEIGHT),
                            *dy = q_of(&c, "fc1", TX_QOP_GRAD_OUTPUT);
        assert_true(x->quantized && w->quantized && dy->quantized);
        assert_int_equal(x->kind, cases[i].kind);
        assert_int_equal(w->kind, cases[i].kind);
        assert_int_equal(x->data_dtype, cases[i].dt);
        assert_int_equal(dy->data_dtype, cases[i].dy_dt);
        assert_int_equal(x->block_rows, cases[i].xr);
        assert_int_equal(x->block_cols, cases[i].xc);
        assert_int_equal(dy->block_rows, cases[i].xr);
        assert_int_equal(dy->block_cols, cases[i].xc);
        assert_int_equal(w->block_rows, cases[i].wr);
        assert_int_equal(w->block_cols, cases[i].wc);
        end_case(&c);
    }
}

static void mxfp8_hybrid_grads_e5m2(void **state)
{
    (void)state;
    qcase c;
    run_case(&c, &base_chain, "mxfp8:hybrid", "sm_100", true);
    assert_int_equal(q_of(&c, "fc2", TX_QOP_GRAD_OUTPUT)->data_dtype, TEEXEC_DTYPE_FLOAT8E5M2);
    assert_int_equal(q_of(&c, "fc2", TX_QOP_INPUT)->data_dtype, TEEXEC_DTYPE_FLOAT8E4M3FN);
    end_case(&c);
}

static void delayed_slots_in_node_order(void **state)
{
    (void)state;
    qcase c;
    run_case(&c, &base_chain, "fp8-delayed", "sm_90", true);
    static const char *nodes[2] = {"fc1", "fc2"};
    int slot = 0;
    for (int n = 0; n < 2; n++)
        for (int op = 0; op < 3; op++) assert_int_equal(q_of(&c, nodes[n], (tx_qoperand)op)->delayed_slot, slot++);
    end_case(&c);
    /* inference: no grad_output quantizer, so fc2's input is slot 2 */
    run_case(&c, &base_chain, "fp8-delayed", "sm_90", false);
    assert_int_equal(q_of(&c, "fc2", TX_QOP_INPUT)->delayed_slot, 2);
    assert_int_equal(q_of(&c, "fc2", TX_QOP_GRAD_OUTPUT)->delayed_slot, -1);
    end_case(&c);
}

/* ---- divisibility, device ------------------------------------------------------- */

static void divisibility_decides(void **state)
{
    (void)state;
    chain_opts o = base_chain;
    o.m = 16; /* MXFP8 needs 32 */
    qcase c;
    run_case(&c, &o, "mxfp8", "sm_100", true);
    const tx_plan_quant *x = q_of(&c, "fc1", TX_QOP_INPUT);
    assert_false(x->quantized);
    assert_true(why_has(x, "multiples of 32"));
    assert_false(q_of(&c, "fc1", TX_QOP_WEIGHT)->quantized); /* all or nothing per GEMM */
    end_case(&c);
    /* the same M is fine for NVFP4 (16) and FP8 (16) */
    run_case(&c, &o, "nvfp4", "sm_100", true);
    assert_true(q_of(&c, "fc1", TX_QOP_INPUT)->quantized);
    end_case(&c);
    o.k = 24; /* not a multiple of 16 */
    run_case(&c, &o, "nvfp4", "sm_100", true);
    assert_false(q_of(&c, "fc1", TX_QOP_INPUT)->quantized);
    assert_true(why_has(q_of(&c, "fc1", TX_QOP_INPUT), "K=24"));
    end_case(&c);
}

static void fp8_block_partial_blocks_are_emulated(void **state)
{
    (void)state;
    qcase c;
    run_case(&c, &base_chain, "fp8-block", "sm_90", true); /* M=32, K=64: padded 128-blocks */
    const tx_plan_quant *x = q_of(&c, "fc1", TX_QOP_INPUT);
    assert_true(x->quantized);
    assert_false(x->native);
    assert_true(why_has(x, "not multiples of 128"));
    end_case(&c);
}

static void native_and_scale_layout_follow_device(void **state)
{
    (void)state;
    qcase c;
    run_case(&c, &base_chain, "mxfp8", "sm_100", true);
    const tx_plan_quant *x = q_of(&c, "fc1", TX_QOP_INPUT);
    assert_true(x->native);
    assert_int_equal(x->scale_layout, TX_SCALE_SWIZZLED);
    end_case(&c);
    run_case(&c, &base_chain, "mxfp8", "sm_90", true);
    x = q_of(&c, "fc1", TX_QOP_INPUT);
    assert_false(x->native);
    assert_int_equal(x->scale_layout, TX_SCALE_COMPACT);
    assert_true(why_has(x, "exact emulation"));
    end_case(&c);
    run_case(&c, &base_chain, "nvfp4", "cpu", false);
    x = q_of(&c, "fc1", TX_QOP_INPUT);
    assert_true(x->quantized);
    assert_false(x->native);
    assert_int_equal(x->scale_layout, TX_SCALE_COMPACT);
    end_case(&c);
}

/* ---- overrides ------------------------------------------------------------------- */

static void annotation_none_keeps_high_precision(void **state)
{
    (void)state;
    chain_opts o = base_chain;
    o.ann_node = "fc2";
    o.ann_attr = "quant_weight";
    o.ann_val = "none";
    qcase c;
    run_case(&c, &o, "mxfp8", "sm_100", true);
    const tx_plan_quant *w = q_of(&c, "fc2", TX_QOP_WEIGHT);
    assert_false(w->quantized);
    assert_true(why_has(w, "quant_weight=none"));
    assert_true(q_of(&c, "fc2", TX_QOP_INPUT)->quantized);
    assert_true(q_of(&c, "fc1", TX_QOP_WEIGHT)->quantized);
    end_case(&c);
}

static void annotation_format_is_recorded(void **state)
{
    (void)state;
    chain_opts o = base_chain;
    o.ann_node = "fc1";
    o.ann_attr = "quant_input";
    o.ann_val = "nvfp4";
    qcase c;
    run_case(&c, &o, "fp8-current", "sm_90", true);
    const tx_plan_quant *x = q_of(&c, "fc1", TX_QOP_INPUT);
    assert_true(x->quantized);
    assert_int_equal(x->kind, TX_QKIND_FP8_TENSOR);
    assert_true(why_has(x, "quant_input=nvfp4"));
    end_case(&c);
    /* recipe none: only the annotated operand gets an entry, unapplied */
    run_case(&c, &o, "none", "cpu", true);
    assert_int_equal(c.p->n_quant, 1);
    assert_false(c.p->quant[0].quantized);
    assert_true(why_has(&c.p->quant[0], "not applied"));
    end_case(&c);
    o.ann_node = NULL;
    run_case(&c, &o, "none", "cpu", true);
    assert_int_equal(c.p->n_quant, 0);
    end_case(&c);
}

static void first_and_last_gemm_policy(void **state)
{
    (void)state;
    chain_opts o = base_chain;
    o.third = true;
    qcase c;
    load_chain(&o, &c.m);
    c.req = pt_request(&c.m, "mxfp8,first_last_hp=1", "sm_100", true);
    assert_true(c.req.recipe.keep_first_last_hp);
    c.p = chain_plan(&c.m, true);
    assert_null(tx_plan_quantization(c.m.g, &c.req, c.p));
    for (int op = 0; op < 3; op++) {
        assert_false(q_of(&c, "fc1", (tx_qoperand)op)->quantized);
        assert_true(why_has(q_of(&c, "fc1", (tx_qoperand)op), "keep_first_last_hp"));
        assert_true(q_of(&c, "fc2", (tx_qoperand)op)->quantized);
        assert_false(q_of(&c, "fc3", (tx_qoperand)op)->quantized);
    }
    end_case(&c);
    /* off by default */
    run_case(&c, &o, "mxfp8", "sm_100", true);
    assert_true(q_of(&c, "fc1", TX_QOP_INPUT)->quantized);
    assert_true(q_of(&c, "fc3", TX_QOP_INPUT)->quantized);
    end_case(&c);
}

/* ---- hand-off -------------------------------------------------------------------- */

static void handoff_producers_follow_fusions(void **state)
{
    (void)state;
    qcase c;
    load_chain(&base_chain, &c.m);
    c.req = pt_request(&c.m, "mxfp8", "sm_100", true);
    c.needs[0] = true;
    c.req.input_needs_grad = c.needs;
    c.req.n_inputs = 1;
    /* ops: 0 ln, 1 fc1, 2 b1, 3 act, 4 fc2, 5 b2 */
    tx_fuser_plan *p = pt_plan_new(c.m.g, true, NULL);
    int32_t nodes[6] = {0, 1, 2, 3, 4, 5};
    tx_plan_kernel fwd[6] = {{TX_FUSION_FWD_NORM_QUANTIZE, 0, 1}, {TX_FUSION_NONE, 1, 1},
                             {TX_FUSION_NONE, 2, 1},              {TX_FUSION_FWD_ACT_QUANTIZE, 3, 1},
                             {TX_FUSION_NONE, 4, 1},              {TX_FUSION_NONE, 5, 1}};
    tx_plan_kernel bwd[5] = {{TX_FUSION_NONE, 0, 1}, {TX_FUSION_NONE, 1, 1}, {TX_FUSION_BWD_ACT_BIAS, 2, 2},
                             {TX_FUSION_NONE, 4, 1}, {TX_FUSION_BWD_BIAS_QUANTIZE, 5, 1}};
    pt_group_add(p, c.m.g, TX_GROUP_CHAIN, nodes, 6, 0, fwd, 6, bwd, 5);
    c.p = p;
    assert_null(tx_plan_quantization(c.m.g, &c.req, c.p));
    assert_int_equal(q_of(&c, "fc1", TX_QOP_INPUT)->producer, pt_node(c.m.g, "ln"));
    assert_int_equal(q_of(&c, "fc2", TX_QOP_INPUT)->producer, pt_node(c.m.g, "act"));
    assert_int_equal(q_of(&c, "fc1", TX_QOP_GRAD_OUTPUT)->producer, pt_node(c.m.g, "b1"));
    assert_int_equal(q_of(&c, "fc2", TX_QOP_GRAD_OUTPUT)->producer, pt_node(c.m.g, "b2"));
    assert_int_equal(q_of(&c, "fc1", TX_QOP_WEIGHT)->producer, -1);
    end_case(&c);
    /* unfused: every operand is quantized by its own kernel */
    run_case(&c, &base_chain, "mxfp8", "sm_100", true);
    for (size_t i = 0; i < c.p->n_quant; i++) assert_int_equal(c.p->quant[i].producer, -1);
    end_case(&c);
}

/* ---- GroupedLinear (te_moe_block) --------------------------------------------- */

static void grouped_linear_slots_per_group(void **state)
{
    (void)state;
    pt_model m;
    assert_null(pt_model_load("models/te_moe_block/model.onnx", false, &m));
    tx_plan_request r = pt_request(&m, "fp8-delayed", "sm_90", true);
    tx_fuser_plan *p = pt_plan_each_node(m.g, true, NULL);
    assert_null(tx_plan_quantization(m.g, &r, p));
    assert_int_equal(p->n_quant, 6); /* two GroupedLinear nodes */
    /* G = 3: each operand takes 3 consecutive slots */
    for (size_t i = 0; i < 6; i++) {
        assert_true(p->quant[i].quantized);
        assert_int_equal(p->quant[i].delayed_slot, (int)(3 * i));
    }
    assert_true(why_has(&p->quant[0], "each group's rows"));
    pt_plan_free(p);
    pt_model_free(&m);
}

/* ---- sizes of quantized copies ------------------------------------------------------- */

static void quantized_copy_bytes(void **state)
{
    (void)state;
    tx_plan_quant q;
    memset(&q, 0, sizeof q);
    q.quantized = true;
    uint64_t b;
    q.kind = TX_QKIND_MXFP8;
    q.block_rows = 1;
    /* 64 x 96: data 6144; rowwise scales 128 x roundup(3,4)=4 -> 512;
     * columnwise scales roundup(2,4)=4 x roundup(96,128)=128 -> 512 */
    assert_null(tx_plan_quant_bytes(&q, 64, 96, TX_QUSAGE_ROWWISE, &b));
    assert_int_equal(b, 6144 + 512);
    assert_null(tx_plan_quant_bytes(&q, 64, 96, TX_QUSAGE_COLUMNWISE, &b));
    assert_int_equal(b, 6144 + 512);
    q.kind = TX_QKIND_NVFP4; /* 32 x 48: data 768; scales 128 x 4; + amax 4 */
    assert_null(tx_plan_quant_bytes(&q, 32, 48, TX_QUSAGE_ROWWISE, &b));
    assert_int_equal(b, 768 + 512 + 4);
    q.kind = TX_QKIND_FP8_BLOCK; /* 1-D 200 x 300: data 60000; scales ceil(300/128)=3 x 200 floats */
    assert_null(tx_plan_quant_bytes(&q, 200, 300, TX_QUSAGE_ROWWISE, &b));
    assert_int_equal(b, 60000 + 3 * 200 * 4);
    q.kind = TX_QKIND_FP8_TENSOR; /* both usages + one scale_inv */
    assert_null(tx_plan_quant_bytes(&q, 10, 10, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE, &b));
    assert_int_equal(b, 204);
    q.quantized = false;
    assert_null(tx_plan_quant_bytes(&q, 10, 10, TX_QUSAGE_ROWWISE, &b));
    assert_int_equal(b, 0);
    q.quantized = true;
    teexec_status *st = tx_plan_quant_bytes(&q, UINT64_C(1) << 60, 16, TX_QUSAGE_ROWWISE, &b);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_LIMIT);
    teexec_status_destroy(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(training_needs_every_usage),
        cmocka_unit_test(frozen_weights_drop_x_columnwise),
        cmocka_unit_test(input_without_grad_drops_w_columnwise),
        cmocka_unit_test(inference_is_rowwise_only),
        cmocka_unit_test(block_shapes_per_recipe),
        cmocka_unit_test(mxfp8_hybrid_grads_e5m2),
        cmocka_unit_test(delayed_slots_in_node_order),
        cmocka_unit_test(divisibility_decides),
        cmocka_unit_test(fp8_block_partial_blocks_are_emulated),
        cmocka_unit_test(native_and_scale_layout_follow_device),
        cmocka_unit_test(annotation_none_keeps_high_precision),
        cmocka_unit_test(annotation_format_is_recorded),
        cmocka_unit_test(first_and_last_gemm_policy),
        cmocka_unit_test(handoff_producers_follow_fusions),
        cmocka_unit_test(grouped_linear_slots_per_group),
        cmocka_unit_test(quantized_copy_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
