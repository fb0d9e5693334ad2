/*
 * test_te_schema.c - the te.ops registry: the table is complete and
 * consistent with the CPU implementations, attribute index constants match
 * the names, shape rules refuse bad shapes with messages naming the op,
 * setup_context drops what is not needed, and docs/te-ops.md is exactly
 * what the registry prints (so the spec cannot drift).
 */
#include "te_case.h"

#include "teexec/teexec.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

static void table_is_complete(void **state)
{
    (void)state;
    static const char *const names[] = {
        "Linear", "Bias", "LayerNorm", "RMSNorm", "L2Normalization", "GELU", "QGELU", "ReLU",
        "SReLU", "SiLU", "GLU", "GEGLU", "QGEGLU", "ReGLU", "SReGLU", "SwiGLU", "ClampedSwiGLU",
        "ScaledSwiGLU", "ScaledSReLU", "SiTUGLU", "ScaledSiTUGLU", "ScaledClampedQGeGLU", "Dropout", "Quantize", "Reshape", "Identity",
        "ConstantScale", "AddExtraInput", "MakeExtraOutput", "GroupedLinear",
        "DotProductAttention", "RotaryEmbedding", "Embedding", "AllGather", "AllReduce",
        "ReduceScatter"};
    assert_int_equal(sizeof names / sizeof names[0], TX_TE_OP_COUNT);
    for (int i = 0; i < TX_TE_OP_COUNT; i++) {
        const tx_te_op_schema *s = tx_te_schema((tx_te_op_id)i);
        assert_non_null(s);
        assert_int_equal(s->id, i);
        assert_string_equal(s->name, names[i]);
        assert_ptr_equal(tx_te_schema_find(names[i]), s);
        assert_non_null(s->summary);
        assert_non_null(s->forward);
        assert_non_null(s->backward);
        assert_non_null(s->shape_rule);
        assert_non_null(s->infer);
        assert_true(s->n_extra_inputs <= TX_TE_MAX_EXTRA && s->n_extra_outputs <= TX_TE_MAX_EXTRA);
        assert_true(s->n_aux <= TX_TE_MAX_EXTRA && s->n_attrs <= TX_TE_MAX_ATTRS);
        assert_true(s->n_saved <= TX_TE_MAX_SAVED);
        const tx_te_cpu_impl *impl = tx_te_cpu_impl_of((tx_te_op_id)i);
        assert_non_null(impl);
        assert_non_null(impl->forward);
        assert_non_null(impl->backward);
        /* every saved entry points at something that exists */
        for (int j = 0; j < s->n_saved; j++) {
            const tx_te_saved_schema *e = &s->saved[j];
            if (e->src == TX_TE_SRC_EXTRA_INPUT) assert_true(e->index < s->n_extra_inputs);
            if (e->src == TX_TE_SRC_PARAM) assert_true(e->index < s->n_params);
            if (e->src == TX_TE_SRC_AUX) {
                assert_true(e->index < s->n_aux);
                assert_string_equal(e->name, s->aux[e->index].name);
            }
            assert_true(e->needed_for != 0);
        }
    }
    assert_null(tx_te_schema(TX_TE_OP_COUNT));
    assert_null(tx_te_schema_find("Linear2"));
    assert_null(tx_te_schema_find(NULL));
}

static void attr_indices_match_names(void **state)
{
    (void)state;
    struct { tx_te_op_id op; const char *name; int idx; } m[] = {
        {TX_TE_LAYER_NORM, "eps", TX_TE_A_NORM_EPS},
        {TX_TE_LAYER_NORM, "zero_centered_gamma", TX_TE_A_NORM_ZCG},
        {TX_TE_RMS_NORM, "eps", TX_TE_A_NORM_EPS},
        {TX_TE_RMS_NORM, "zero_centered_gamma", TX_TE_A_NORM_ZCG},
        {TX_TE_L2_NORMALIZATION, "eps", TX_TE_A_L2_EPS},
        {TX_TE_GELU, "approximate", TX_TE_A_GELU_APPROX},
        {TX_TE_GEGLU, "approximate", TX_TE_A_GELU_APPROX},
        {TX_TE_CLAMPED_SWIGLU, "limit", TX_TE_A_CLAMP_LIMIT},
        {TX_TE_CLAMPED_SWIGLU, "alpha", TX_TE_A_CLAMP_ALPHA},
        {TX_TE_CLAMPED_SWIGLU, "offset", TX_TE_A_CLAMP_OFFSET},
        {TX_TE_DROPOUT, "p", TX_TE_A_DROPOUT_P},
        {TX_TE_DROPOUT, "seed", TX_TE_A_DROPOUT_SEED},
        {TX_TE_QUANTIZE, "forward", TX_TE_A_QUANTIZE_FORWARD},
        {TX_TE_QUANTIZE, "backward", TX_TE_A_QUANTIZE_BACKWARD},
        {TX_TE_RESHAPE, "shape", TX_TE_A_RESHAPE_SHAPE},
        {TX_TE_CONSTANT_SCALE, "scale", TX_TE_A_SCALE},
        {TX_TE_GROUPED_LINEAR, "num_groups", TX_TE_A_GL_NUM_GROUPS},
        {TX_TE_GROUPED_LINEAR, "bias", TX_TE_A_GL_BIAS},
        {TX_TE_DOT_PRODUCT_ATTENTION, "num_attention_heads", TX_TE_A_DPA_HEADS},
        {TX_TE_DOT_PRODUCT_ATTENTION, "num_gqa_groups", TX_TE_A_DPA_KV_HEADS},
        {TX_TE_DOT_PRODUCT_ATTENTION, "causal", TX_TE_A_DPA_CAUSAL},
        {TX_TE_DOT_PRODUCT_ATTENTION, "scale", TX_TE_A_DPA_SCALE},
        {TX_TE_DOT_PRODUCT_ATTENTION, "qkv_format", TX_TE_A_DPA_LAYOUT},
        {TX_TE_ROTARY_EMBEDDING, "qkv_format", TX_TE_A_ROPE_LAYOUT},
        {TX_TE_ROTARY_EMBEDDING, "interleaved", TX_TE_A_ROPE_INTERLEAVED},
        {TX_TE_ROTARY_EMBEDDING, "base", TX_TE_A_ROPE_BASE},
        {TX_TE_ROTARY_EMBEDDING, "rotary_dim", TX_TE_A_ROPE_DIM},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        assert_int_equal(tx_te_attr_index(tx_te_schema(m[i].op), m[i].name), m[i].idx);
}

static void attribute_defaults_and_enums(void **state)
{
    (void)state;
    const tx_te_op_schema *ln = tx_te_schema(TX_TE_LAYER_NORM);
    tx_te_attr_value v[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(ln, v);
    assert_true(v[TX_TE_A_NORM_EPS].f == 1e-5);
    assert_int_equal(v[TX_TE_A_NORM_ZCG].i, 0);
    const tx_te_op_schema *gelu = tx_te_schema(TX_TE_GELU);
    tx_te_attr_defaults(gelu, v);
    assert_int_equal(v[0].i, TX_TE_GELU_TANH);
    assert_int_equal(tx_te_attr_enum_index(&gelu->attrs[0], "none"), TX_TE_GELU_ERF);
    assert_int_equal(tx_te_attr_enum_index(&gelu->attrs[0], "tanh"), TX_TE_GELU_TANH);
    assert_int_equal(tx_te_attr_enum_index(&gelu->attrs[0], "tan"), -1);
    char buf[16];
    assert_string_equal(tx_te_attr_enum_name(&gelu->attrs[0], 1, buf, sizeof buf), "none");
    assert_string_equal(tx_te_attr_enum_name(&gelu->attrs[0], 2, buf, sizeof buf), "");
    const tx_te_op_schema *cs = tx_te_schema(TX_TE_CLAMPED_SWIGLU);
    tx_te_attr_defaults(cs, v);
    assert_true(v[TX_TE_A_CLAMP_LIMIT].f == 7.0 && v[TX_TE_A_CLAMP_ALPHA].f == 1.702 &&
                v[TX_TE_A_CLAMP_OFFSET].f == 1.0);
    assert_true(tx_te_schema(TX_TE_DROPOUT)->attrs[TX_TE_A_DROPOUT_P].required);
}

static void expect_infer_error(te_case *c, const char *needle)
{
    teexec_status *st = tc_forward(c);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    if (!strstr(teexec_status_message(st), needle))
        fail_msg("message '%s' lacks '%s'", teexec_status_message(st), needle);
    teexec_status_destroy(st);
}

static void shape_rules_refuse_bad_shapes(void **state)
{
    (void)state;
    te_case c;
    tc_init(&c, TX_TE_LINEAR);
    tc_fill(&c.in, TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){2, 4}, 1, -1, 1);
    tc_fill(&c.par[0], TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){3, 5}, 2, -1, 1);
    c.n_par = 1;
    expect_infer_error(&c, "Linear");
    tc_free(&c);

    tc_init(&c, TX_TE_SWIGLU);
    tc_fill(&c.in, TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){2, 5}, 1, -1, 1);
    expect_infer_error(&c, "even");
    tc_free(&c);

    tc_init(&c, TX_TE_DROPOUT);
    c.attrs[TX_TE_A_DROPOUT_P].f = 1.0;
    tc_fill(&c.in, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){4}, 1, -1, 1);
    expect_infer_error(&c, "p must be");
    tc_free(&c);

    tc_init(&c, TX_TE_GROUPED_LINEAR);
    c.attrs[TX_TE_A_GL_NUM_GROUPS].i = 2;
    tc_fill(&c.in, TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){4, 3}, 1, -1, 1);
    assert_null(tx_tensor_alloc(&c.ex[0], TEEXEC_DTYPE_INT64, 1, (int64_t[]){2}));
    c.ex_present[0] = true;
    tc_fill(&c.par[0], TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, 1, -1, 1);
    c.n_par = 1; /* needs 4: two weights, two biases */
    expect_infer_error(&c, "expected 4 parameter");
    tc_free(&c);

    tc_init(&c, TX_TE_DOT_PRODUCT_ATTENTION);
    tc_fill(&c.in, TEEXEC_DTYPE_FLOAT, 4, (int64_t[]){1, 2, 3, 4}, 1, -1, 1);
    tc_fill(&c.ex[0], TEEXEC_DTYPE_FLOAT, 4, (int64_t[]){1, 2, 2, 4}, 1, -1, 1); /* 3 % 2 != 0 */
    tc_fill(&c.ex[1], TEEXEC_DTYPE_FLOAT, 4, (int64_t[]){1, 2, 2, 4}, 1, -1, 1);
    c.ex_present[0] = c.ex_present[1] = true;
    expect_infer_error(&c, "multiple");
    tc_free(&c);

    tc_init(&c, TX_TE_EMBEDDING);
    tc_fill(&c.in, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){2}, 1, 0, 1); /* indices must be ints */
    tc_fill(&c.par[0], TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){3, 2}, 1, -1, 1);
    c.n_par = 1;
    expect_infer_error(&c, "int64|int32");
    tc_free(&c);
}

/* The class bits the passes query agree with the ports they imply: an
 * activation has a function, a gated one a cap only if it is gated, a
 * row-scaled one its "scales" extra input, a norm its weight. */
static void op_classes_are_consistent(void **state)
{
    (void)state;
    int acts = 0;
    for (int i = 0; i < TX_TE_OP_COUNT; i++) {
        const tx_te_op_schema *s = tx_te_schema((tx_te_op_id)i);
        bool act = tx_te_op_is(s->id, TX_TE_CLASS_ACTIVATION);
        acts += act;
        assert_int_equal(act, s->act_fn != TX_TE_ACT_NONE);
        if (!act) assert_false(s->op_class & (TX_TE_CLASS_GATED | TX_TE_CLASS_ROW_SCALED));
        if (s->act_cap != TX_TE_CAP_NONE) assert_true(tx_te_op_is(s->id, TX_TE_CLASS_GATED));
        if (tx_te_op_is(s->id, TX_TE_CLASS_ROW_SCALED)) {
            assert_int_equal(s->n_extra_inputs, 1);
            assert_string_equal(s->extra_inputs[0].name, "scales");
        }
        if (tx_te_op_is(s->id, TX_TE_CLASS_NORM)) assert_true(s->n_params >= 1 && s->n_aux >= 1);
    }
    assert_int_equal(acts, 17);
    assert_false(tx_te_op_is(TX_TE_OP_COUNT, 0));
    assert_true(tx_te_op_is_elementwise_act(TX_TE_SRELU));
    assert_false(tx_te_op_is_elementwise_act(TX_TE_SCALED_SRELU));
    assert_false(tx_te_op_is_unscaled_act(TX_TE_SCALED_SITUGLU));
    assert_true(tx_te_op_is_unscaled_act(TX_TE_SITUGLU));
}

/* Found by tests/fuzz/fuzz_graph: a rank-0 x passed the plain activations'
 * shape rule (so a session was created) and was refused only by the
 * kernel on the first run. */
static void activation_rules_need_rank_1(void **state)
{
    (void)state;
    static const tx_te_op_id ops[] = {TX_TE_GELU, TX_TE_QGELU, TX_TE_RELU, TX_TE_SRELU,
                                      TX_TE_SILU};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const tx_te_op_schema *s = tx_te_schema(ops[i]);
        tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
        tx_te_attr_defaults(s, attrs);
        tx_te_tinfo x = {TEEXEC_DTYPE_FLOAT, {0, {0}}};
        tx_te_infer_in in = {attrs, &x, NULL, 0, NULL, 0};
        tx_te_infer_out out;
        teexec_status *st = tx_te_infer(s, &in, &out);
        if (!st) fail_msg("%s accepted a rank-0 x", s->name);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
        teexec_status_destroy(st);
        x.shape.rank = 1;
        x.shape.dims[0] = 3;
        assert_null(tx_te_infer(s, &in, &out));
        assert_int_equal(out.output.shape.rank, 1);
    }
}

static void setup_context_drops_unneeded(void **state)
{
    (void)state;
    te_case c;
    tc_init(&c, TX_TE_LINEAR);
    tc_fill(&c.in, TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){2, 4}, 1, -1, 1);
    tc_fill(&c.par[0], TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){3, 4}, 2, -1, 1);
    c.n_par = 1;
    assert_null(tc_forward(&c));
    const tx_tensor *pv[1] = {&c.par[0]};
    tx_te_fwd_args a = {TX_TE_LINEAR, c.attrs, &c.in, NULL, 0, pv, 1, &c.out, NULL, 0, NULL, 0,
                        true, 0};
    const tx_tensor *saved[TX_TE_SAVED_CAP(1)];
    int n = -1;
    assert_null(tx_te_setup_context(&a, TX_TE_FOR_DX, saved, TX_TE_SAVED_CAP(1), &n));
    assert_int_equal(n, 2);
    assert_null(saved[0]);              /* x: only for dweight */
    assert_ptr_equal(saved[1], &c.par[0]);
    assert_null(tx_te_setup_context(&a, TX_TE_FOR_DPARAMS, saved, TX_TE_SAVED_CAP(1), &n));
    assert_ptr_equal(saved[0], &c.in);
    assert_null(saved[1]);
    tc_free(&c);

    /* LayerNorm without its aux tensors cannot be saved for training */
    tc_init(&c, TX_TE_LAYER_NORM);
    tc_fill(&c.in, TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){2, 4}, 1, -1, 1);
    const tx_tensor *lp[2] = {&c.in, &c.in};
    tx_te_fwd_args b = {TX_TE_LAYER_NORM, c.attrs, &c.in, NULL, 0, lp, 2, &c.in, NULL, 0, NULL,
                        0, true, 0};
    teexec_status *st = tx_te_setup_context(&b, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(2), &n);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "mu"));
    teexec_status_destroy(st);
    tc_free(&c);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void docs_match_registry(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    assert_non_null(root);
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/te-ops.md", root);
    size_t len = 0;
    char *doc = read_file(path, &len);
    if (!doc) fail_msg("cannot read %s (regenerate it: teexec ops --markdown > docs/te-ops.md)", path);
    const char *md = teexec_te_ops_text(TEEXEC_TE_OPS_MARKDOWN);
    assert_non_null(md);
    if (strcmp(doc, md) != 0) {
        size_t i = 0;
        while (doc[i] && doc[i] == md[i]) i++;
        fail_msg("docs/te-ops.md differs from the registry at byte %zu: regenerate it with "
                 "`teexec ops --markdown > docs/te-ops.md`", i);
    }
    free(doc);
    /* every op has a section, and the same pointer comes back each time */
    for (int i = 0; i < TX_TE_OP_COUNT; i++) {
        char h[64];
        snprintf(h, sizeof h, "\n## %s\n", tx_te_schema((tx_te_op_id)i)->name);
        assert_non_null(strstr(md, h));
    }
    assert_ptr_equal(md, teexec_te_ops_text(TEEXEC_TE_OPS_MARKDOWN));
    const char *table = teexec_te_ops_text(TEEXEC_TE_OPS_TABLE);
    assert_non_null(table);
    assert_non_null(strstr(table, "DotProductAttention"));
    assert_null(teexec_te_ops_text((teexec_te_ops_format)7));
}

/* `teexec ops --markdown` prints the same text (the CLI is a thin client). */
static void cli_prints_the_spec(void **state)
{
    (void)state;
    const char *build = getenv("TEEXEC_BUILD_ROOT");
    assert_non_null(build);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s/tools/teexec' ops --markdown", build);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    buf[n] = '\0';
    assert_int_equal(pclose(f), 0);
    assert_string_equal(buf, teexec_te_ops_text(TEEXEC_TE_OPS_MARKDOWN));
    free(buf);
    snprintf(cmd, sizeof cmd, "'%s/tools/teexec' ops --bogus 2>/dev/null", build);
    f = popen(cmd, "r");
    assert_non_null(f);
    int status = pclose(f);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_is_complete),
        cmocka_unit_test(attr_indices_match_names),
        cmocka_unit_test(attribute_defaults_and_enums),
        cmocka_unit_test(shape_rules_refuse_bad_shapes),
        cmocka_unit_test(activation_rules_need_rank_1),
        cmocka_unit_test(op_classes_are_consistent),
        cmocka_unit_test(setup_context_drops_unneeded),
        cmocka_unit_test(docs_match_registry),
        cmocka_unit_test(cli_prints_the_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
