/*
 * test_lower_norm_act.c - the norm, activation and residual lowering passes
 * (import/lower_norm.c, lower_act.c, lower_residual.c) on the tiny graphs
 * of tests/import/data/normact_*.onnx (made by make_normact_models.py):
 * each form is lowered, the op histogram checked, and the lowered model run
 * on the CPU against the original (rel-L2 < 1e-6); near misses must stay
 * standard ops with a note saying why; a second run changes nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "format/onnx_load.h"
#include "import/ir.h"
#include "import/lower.h"
#include "import/rewrite.h"
#include "teexec/teexec.h"
#include "teexec_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef teexec_status *(*pass_fn)(tx_rw_graph *, tx_lower_report *);

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "unexpected error: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static void data_path(char *buf, size_t size, const char *name)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    if (!root) root = TEEXEC_SOURCE_ROOT;
    snprintf(buf, size, "%s/tests/import/data/%s.onnx", root, name);
}

/* A model file, its IR and a rewrite graph over it, with one pass run. */
typedef struct lowered {
    tx_onnx_file *file;
    tx_ir_model *ir;
    tx_rw_graph *g;
    tx_lower_report report;
    teexec_model *orig, *low;
} lowered;

static void emit_and_load(lowered *l)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    ok(tx_rw_emit(l->g, &bytes, &len));
    teexec_model_destroy(l->low);
    l->low = NULL;
    ok(teexec_model_load_memory(bytes, len, NULL, NULL, &l->low));
    free(bytes);
}

static void lower_open(lowered *l, const char *name, pass_fn pass)
{
    memset(l, 0, sizeof(*l));
    char path[1024];
    data_path(path, sizeof(path), name);
    ok(tx_onnx_load_file(path, NULL, &l->file));
    ok(tx_ir_build(l->file, &l->ir));
    ok(tx_rw_from_ir(l->ir, &l->g));
    ok(pass(l->g, &l->report));
    ok(teexec_model_load_file(path, NULL, &l->orig));
    emit_and_load(l);
}

static void notes_clear(tx_lower_report *r)
{
    for (size_t i = 0; i < r->n_notes; i++) {
        free(r->notes[i].pattern);
        free(r->notes[i].node);
        free(r->notes[i].reason);
    }
    free(r->notes);
    memset(r, 0, sizeof(*r));
}

static void lower_close(lowered *l)
{
    teexec_model_destroy(l->low);
    teexec_model_destroy(l->orig);
    tx_rw_free(l->g);
    tx_ir_model_free(l->ir);
    tx_onnx_file_free(l->file);
    notes_clear(&l->report);
}

static bool domain_is(const char *d, const char *want)
{
    if (!d || strcmp(d, "ai.onnx") == 0) d = "";
    return strcmp(d, want) == 0;
}

static uint64_t op_count(const teexec_model *m, const char *domain, const char *op)
{
    for (size_t i = 0; i < teexec_model_op_count(m); i++) {
        const teexec_op_count *c = teexec_model_op(m, i);
        if (domain_is(c->domain, domain) && strcmp(c->op_type, op) == 0) return c->count;
    }
    return 0;
}

/* The note for `pattern`: exactly one must exist. */
static const tx_lower_note *the_note(const tx_lower_report *r, const char *pattern)
{
    const tx_lower_note *found = NULL;
    for (size_t i = 0; i < r->n_notes; i++) {
        if (strcmp(r->notes[i].pattern, pattern) != 0) continue;
        assert_null(found);
        found = &r->notes[i];
    }
    assert_non_null(found);
    return found;
}

static void expect_lowered(const lowered *l, const char *pattern)
{
    const tx_lower_note *n = the_note(&l->report, pattern);
    if (!n->lowered) fprintf(stderr, "%s declined: %s\n", pattern, n->reason);
    assert_true(n->lowered);
    assert_null(n->reason);
}

static void expect_declined(const lowered *l, const char *pattern, const char *reason_part)
{
    const tx_lower_note *n = the_note(&l->report, pattern);
    assert_false(n->lowered);
    assert_non_null(n->reason);
    if (!strstr(n->reason, reason_part))
        fprintf(stderr, "reason \"%s\" lacks \"%s\"\n", n->reason, reason_part);
    assert_non_null(strstr(n->reason, reason_part));
}

/* Deterministic input in [-2, 2): the same for both models. */
static teexec_tensor *make_input(const teexec_value_info *vi, uint32_t seed)
{
    teexec_tensor *t = NULL;
    assert_true(vi->dtype == TEEXEC_DTYPE_FLOAT || vi->dtype == TEEXEC_DTYPE_FLOAT16);
    ok(teexec_tensor_create(vi->dtype, vi->rank, vi->dims, &t));
    uint32_t s = seed * 2654435761u + 12345u;
    for (uint64_t i = 0; i < teexec_tensor_element_count(t); i++) {
        s = s * 1664525u + 1013904223u;
        float v = (float)((double)(s >> 8) / (double)(1u << 24) * 4.0 - 2.0);
        if (vi->dtype == TEEXEC_DTYPE_FLOAT) ((float *)teexec_tensor_data(t))[i] = v;
        else ((uint16_t *)teexec_tensor_data(t))[i] = tx_f32_to_f16(v);
    }
    return t;
}

#define MAX_IO 4

static void run(const teexec_model *m, teexec_tensor **outs)
{
    size_t ni = teexec_model_input_count(m), no = teexec_model_output_count(m);
    assert_true(ni <= MAX_IO && no <= MAX_IO);
    const char *names[MAX_IO];
    teexec_tensor *ins[MAX_IO];
    for (size_t i = 0; i < ni; i++) {
        names[i] = teexec_model_input(m, i)->name;
        ins[i] = make_input(teexec_model_input(m, i), (uint32_t)i + 1);
    }
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    teexec_session *s = NULL;
    ok(teexec_session_create(m, o, &s));
    teexec_session_options_destroy(o);
    ok(teexec_session_run(s, ni, names, (const teexec_tensor *const *)ins, no, NULL, outs));
    teexec_session_destroy(s);
    for (size_t i = 0; i < ni; i++) teexec_tensor_destroy(ins[i]);
}

static double elem(const teexec_tensor *t, uint64_t i)
{
    if (teexec_tensor_dtype(t) == TEEXEC_DTYPE_FLOAT16)
        return tx_f16_to_f32(((const uint16_t *)teexec_tensor_data_const(t))[i]);
    assert_int_equal(teexec_tensor_dtype(t), TEEXEC_DTYPE_FLOAT);
    return ((const float *)teexec_tensor_data_const(t))[i];
}

/* The lowered model computes what the original does (rel-L2 < tol). */
static void expect_close_numbers(const lowered *l, double tol)
{
    size_t no = teexec_model_output_count(l->orig);
    assert_int_equal(no, teexec_model_output_count(l->low));
    teexec_tensor *a[MAX_IO] = {0}, *b[MAX_IO] = {0};
    run(l->orig, a);
    run(l->low, b);
    for (size_t k = 0; k < no; k++) {
        assert_int_equal(teexec_tensor_element_count(a[k]), teexec_tensor_element_count(b[k]));
        assert_int_equal(teexec_tensor_dtype(a[k]), teexec_tensor_dtype(b[k]));
        double num = 0, den = 0;
        for (uint64_t i = 0; i < teexec_tensor_element_count(a[k]); i++) {
            double x = elem(a[k], i), y = elem(b[k], i);
            num += (x - y) * (x - y);
            den += x * x;
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        if (!(rel < tol)) fprintf(stderr, "output %zu: rel-L2 %g\n", k, rel);
        assert_true(rel < tol);
        teexec_tensor_destroy(a[k]);
        teexec_tensor_destroy(b[k]);
    }
}

static void expect_same_numbers(const lowered *l)
{
    expect_close_numbers(l, 1e-6);
}

static size_t live_nodes(tx_rw_graph *g)
{
    size_t n = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) n += !tx_rw_node_at(g, i)->dead;
    return n;
}

/* A second run of the pass lowers nothing and edits nothing. */
static void expect_idempotent(lowered *l, pass_fn pass)
{
    size_t before = live_nodes(l->g), count = tx_rw_node_count(l->g);
    tx_lower_report again = {0};
    ok(pass(l->g, &again));
    for (size_t i = 0; i < again.n_notes; i++) assert_false(again.notes[i].lowered);
    assert_int_equal(live_nodes(l->g), before);
    assert_int_equal(tx_rw_node_count(l->g), count);
    notes_clear(&again);
}

/* The one live node (domain, op) of the rewrite graph. */
static tx_rw_node *the_node(tx_rw_graph *g, const char *domain, const char *op, size_t *index)
{
    tx_rw_node *found = NULL;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        tx_rw_node *n = tx_rw_node_at(g, i);
        if (n->dead || !domain_is(n->domain, domain) || strcmp(n->op_type, op) != 0) continue;
        assert_null(found);
        found = n;
        if (index) *index = i;
    }
    assert_non_null(found);
    return found;
}

/* ---- norms ------------------------------------------------------------------ */

static void check_norm(const char *file, const char *te_op, const char *pattern, float eps)
{
    lowered l;
    lower_open(&l, file, tx_lower_norms);
    expect_lowered(&l, pattern);
    assert_int_equal(op_count(l.low, "te.ops", te_op), 1);
    assert_int_equal(op_count(l.low, "", "ReduceMean"), 0);
    assert_int_equal(op_count(l.low, "", "LayerNormalization"), 0);
    assert_int_equal(op_count(l.low, "", "Sqrt"), 0);
    assert_int_equal(op_count(l.low, "", "Cast"), 0);
    size_t idx;
    the_node(l.g, "te.ops", te_op, &idx);
    const tx_rw_attr *a = tx_rw_get_attr(l.g, idx, "eps");
    assert_non_null(a);
    assert_true(a->f == eps);
    expect_same_numbers(&l);
    expect_idempotent(&l, tx_lower_norms);
    lower_close(&l);
}

static void test_layernorm17(void **s)
{
    (void)s;
    check_norm("normact_ln17", "LayerNorm", "LayerNorm", 1e-5f);
}

static void test_layernorm_decomposed(void **s)
{
    (void)s;
    check_norm("normact_ln_decomposed", "LayerNorm", "LayerNorm", 1e-5f);
}

static void test_rmsnorm_pow_div(void **s)
{
    (void)s;
    check_norm("normact_rms", "RMSNorm", "RMSNorm", 1e-6f);
}

static void test_rmsnorm_mul_reciprocal(void **s)
{
    (void)s;
    check_norm("normact_rms_mul_recip", "RMSNorm", "RMSNorm", 1e-6f);
}

static void test_rmsnorm_div_cast(void **s)
{
    (void)s;
    check_norm("normact_rms_div_cast", "RMSNorm", "RMSNorm", 1e-6f);
}

/* x.float() ... .to(float16) * w: the Casts fold into RMSNorm, which
 * computes in float32 and rounds once to float16 (the original rounds the
 * normalized value before the weight: fp16-level differences only). */
static void test_rmsnorm_fp16_casts(void **s)
{
    (void)s;
    lowered l;
    lower_open(&l, "normact_rms_fp16", tx_lower_norms);
    expect_lowered(&l, "RMSNorm");
    assert_int_equal(op_count(l.low, "te.ops", "RMSNorm"), 1);
    assert_int_equal(op_count(l.low, "", "Cast"), 0);
    tx_rw_node *n = the_node(l.g, "te.ops", "RMSNorm", NULL);
    assert_string_equal(n->inputs[0], "x");
    expect_close_numbers(&l, 2e-3);
    expect_idempotent(&l, tx_lower_norms);
    lower_close(&l);
}

static void check_norm_declined(const char *file, const char *pattern, const char *std_op,
                                uint64_t std_count, const char *reason_part)
{
    lowered l;
    lower_open(&l, file, tx_lower_norms);
    expect_declined(&l, pattern, reason_part);
    assert_int_equal(op_count(l.low, "te.ops", "LayerNorm"), 0);
    assert_int_equal(op_count(l.low, "te.ops", "RMSNorm"), 0);
    assert_int_equal(op_count(l.low, "", std_op), std_count);
    expect_same_numbers(&l);
    lower_close(&l);
}

static void test_neg_layernorm_axis(void **s)
{
    (void)s;
    check_norm_declined("normact_neg_ln17_axis1", "LayerNorm", "LayerNormalization", 1, "axis");
}

static void test_neg_layernorm_extra_reader(void **s)
{
    (void)s;
    check_norm_declined("normact_neg_ln_extra_reader", "LayerNorm", "ReduceMean", 2,
                        "read outside the pattern");
}

static void test_neg_rmsnorm_pow4(void **s)
{
    (void)s;
    check_norm_declined("normact_neg_rms_pow4", "RMSNorm", "Pow", 1, "exponent 4");
}

static void test_neg_rmsnorm_axis(void **s)
{
    (void)s;
    check_norm_declined("normact_neg_rms_axis1", "RMSNorm", "ReduceMean", 1, "last axis");
}

/* ---- activations ---------------------------------------------------------- */

static void check_act(const char *file, const char *te_op, const char *pattern,
                      const char *approximate)
{
    lowered l;
    lower_open(&l, file, tx_lower_activations);
    expect_lowered(&l, pattern);
    assert_int_equal(op_count(l.low, "te.ops", te_op), 1);
    assert_int_equal(op_count(l.low, "", "Mul"), 0);
    assert_int_equal(op_count(l.low, "", "Erf"), 0);
    assert_int_equal(op_count(l.low, "", "Tanh"), 0);
    assert_int_equal(op_count(l.low, "", "Sigmoid"), 0);
    if (approximate) {
        size_t idx;
        the_node(l.g, "te.ops", te_op, &idx);
        const tx_rw_attr *a = tx_rw_get_attr(l.g, idx, "approximate");
        assert_non_null(a);
        assert_string_equal(a->s, approximate);
    }
    expect_same_numbers(&l);
    expect_idempotent(&l, tx_lower_activations);
    lower_close(&l);
}

static void test_gelu_erf(void **s)
{
    (void)s;
    check_act("normact_gelu_erf", "GELU", "GELU(none)", "none");
}

static void test_gelu_erf_mul_half_x(void **s)
{
    (void)s;
    check_act("normact_gelu_erf_mul_halfx", "GELU", "GELU(none)", "none");
}

static void test_gelu_erf_half_a(void **s)
{
    (void)s;
    check_act("normact_gelu_erf_halfa", "GELU", "GELU(none)", "none");
}

static void test_gelu_tanh(void **s)
{
    (void)s;
    check_act("normact_gelu_tanh", "GELU", "GELU(tanh)", "tanh");
}

static void test_gelu_tanh_pow(void **s)
{
    (void)s;
    check_act("normact_gelu_tanh_pow", "GELU", "GELU(tanh)", "tanh");
}

static void test_silu(void **s)
{
    (void)s;
    check_act("normact_silu", "SiLU", "SiLU", NULL);
}

static void check_act_declined(const char *file, const char *pattern, const char *std_op,
                               const char *reason_part)
{
    lowered l;
    lower_open(&l, file, tx_lower_activations);
    expect_declined(&l, pattern, reason_part);
    assert_int_equal(op_count(l.low, "te.ops", "GELU"), 0);
    assert_int_equal(op_count(l.low, "te.ops", "SiLU"), 0);
    assert_int_equal(op_count(l.low, "", std_op), 1);
    expect_same_numbers(&l);
    lower_close(&l);
}

static void test_neg_gelu_erf_constant(void **s)
{
    (void)s;
    check_act_declined("normact_neg_gelu_erf_const", "GELU(none)", "Erf", "not x / sqrt(2)");
}

static void test_neg_gelu_erf_reader(void **s)
{
    (void)s;
    check_act_declined("normact_neg_gelu_erf_reader", "GELU(none)", "Erf",
                       "read outside the pattern");
}

static void test_neg_gelu_tanh_constant(void **s)
{
    (void)s;
    check_act_declined("normact_neg_gelu_tanh_const", "GELU(tanh)", "Tanh", "0.044715");
}

static void test_neg_silu_reader(void **s)
{
    (void)s;
    check_act_declined("normact_neg_silu_reader", "SiLU", "Sigmoid", "also read");
}

static void check_swiglu(const char *file, bool bias)
{
    lowered l;
    lower_open(&l, file, tx_lower_activations);
    expect_lowered(&l, "SiLU");
    expect_lowered(&l, "SwiGLU");
    assert_int_equal(op_count(l.low, "te.ops", "SwiGLU"), 1);
    assert_int_equal(op_count(l.low, "te.ops", "SiLU"), 0);
    assert_int_equal(op_count(l.low, "te.ops", "Linear"), 2); /* merged gate|up, down */
    assert_int_equal(op_count(l.low, "te.ops", "Bias"), bias ? 1 : 0);
    assert_int_equal(op_count(l.low, "", "Mul"), 0);

    /* The merged Linear reads x and says where its rows came from. */
    tx_rw_node *sw = the_node(l.g, "te.ops", "SwiGLU", NULL);
    const char *in = sw->inputs[0];
    size_t p = 0;
    int64_t k = tx_rw_producer(l.g, in, &p);
    assert_true(k >= 0);
    if (bias) {
        tx_rw_node *bn = tx_rw_node_at(l.g, (size_t)k);
        assert_string_equal(bn->op_type, "Bias");
        const tx_rw_attr *bs = tx_rw_get_attr(l.g, (size_t)k, "bias_source");
        assert_non_null(bs);
        assert_string_equal(bs->s, "gate.bias,up.bias");
        k = tx_rw_producer(l.g, bn->inputs[0], &p);
    }
    tx_rw_node *lin = tx_rw_node_at(l.g, (size_t)k);
    assert_string_equal(lin->op_type, "Linear");
    assert_string_equal(lin->inputs[0], "x");
    const tx_rw_attr *ws = tx_rw_get_attr(l.g, (size_t)k, "weight_source");
    assert_non_null(ws);
    assert_string_equal(ws->s, "gate.weight,up.weight");
    const tx_rw_attr *split = tx_rw_get_attr(l.g, (size_t)k, "weight_split");
    assert_non_null(split);
    assert_int_equal(split->n_ints, 2);
    assert_int_equal(split->ints[0], 6);
    assert_int_equal(split->ints[1], 6);
    tx_tensor w;
    assert_true(tx_rw_constant(l.g, lin->inputs[1], &w));
    assert_int_equal(w.rank, 2);
    assert_int_equal(w.dims[0], 12);
    assert_int_equal(w.dims[1], 8);
    tx_tensor_release(&w);

    expect_same_numbers(&l);
    expect_idempotent(&l, tx_lower_activations);
    lower_close(&l);
}

static void test_swiglu(void **s)
{
    (void)s;
    check_swiglu("normact_swiglu", false);
}

static void test_swiglu_bias(void **s)
{
    (void)s;
    check_swiglu("normact_swiglu_bias", true);
}

static void test_neg_swiglu_different_inputs(void **s)
{
    (void)s;
    lowered l;
    lower_open(&l, "normact_neg_swiglu_inputs", tx_lower_activations);
    expect_lowered(&l, "SiLU");
    expect_declined(&l, "SwiGLU", "different inputs");
    assert_int_equal(op_count(l.low, "te.ops", "SwiGLU"), 0);
    assert_int_equal(op_count(l.low, "te.ops", "Linear"), 3);
    expect_same_numbers(&l);
    lower_close(&l);
}

/* ---- residual ---------------------------------------------------------------- */

static void test_residual_join_and_fork(void **s)
{
    (void)s;
    lowered l;
    lower_open(&l, "normact_residual", tx_lower_residual);
    assert_int_equal(op_count(l.low, "te.ops", "AddExtraInput"), 2);
    assert_int_equal(op_count(l.low, "te.ops", "MakeExtraOutput"), 1);
    assert_int_equal(op_count(l.low, "", "Add"), 0);
    expect_lowered(&l, "MakeExtraOutput");

    /* The chain continues through the fork's main output into the RMSNorm;
     * the second join takes the fork's extra output as its residual, and
     * the Linear (the branch end) as its main input. */
    tx_rw_node *fork = the_node(l.g, "te.ops", "MakeExtraOutput", NULL);
    assert_int_equal(fork->n_outputs, 2);
    tx_rw_node *rms = the_node(l.g, "te.ops", "RMSNorm", NULL);
    assert_string_equal(rms->inputs[0], fork->outputs[0]);
    size_t joins = 0;
    for (size_t i = 0; i < tx_rw_node_count(l.g); i++) {
        tx_rw_node *n = tx_rw_node_at(l.g, i);
        if (n->dead || strcmp(n->op_type, "AddExtraInput") != 0) continue;
        joins++;
        size_t slot;
        int64_t p = tx_rw_producer(l.g, n->inputs[0], &slot);
        assert_true(p >= 0);
        assert_string_equal(tx_rw_node_at(l.g, (size_t)p)->op_type, "Linear");
        if (strcmp(n->inputs[1], "x") != 0) assert_string_equal(n->inputs[1], fork->outputs[1]);
    }
    assert_int_equal(joins, 2);
    expect_same_numbers(&l);
    expect_idempotent(&l, tx_lower_residual);
    lower_close(&l);
}

static void test_neg_residual_broadcast(void **s)
{
    (void)s;
    lowered l;
    lower_open(&l, "normact_neg_residual_broadcast", tx_lower_residual);
    expect_declined(&l, "AddExtraInput", "shapes differ");
    assert_int_equal(op_count(l.low, "te.ops", "AddExtraInput"), 0);
    assert_int_equal(op_count(l.low, "", "Add"), 1);
    expect_same_numbers(&l);
    lower_close(&l);
}

/* ---- models already in te.ops --------------------------------------------- */

/* The three passes leave TE's own models (models/te_*) as they are. */
static void test_te_models_unchanged(void **s)
{
    (void)s;
    const char *names[] = {"te_mlp", "te_gpt2_block", "te_llama_block", "te_moe_block"};
    const pass_fn passes[] = {tx_lower_norms, tx_lower_activations, tx_lower_residual};
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    if (!root) root = TEEXEC_SOURCE_ROOT;
    for (size_t m = 0; m < sizeof(names) / sizeof(names[0]); m++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/models/%s/model.onnx", root, names[m]);
        tx_onnx_file *f = NULL;
        tx_ir_model *ir = NULL;
        tx_rw_graph *g = NULL;
        ok(tx_onnx_load_file(path, NULL, &f));
        ok(tx_ir_build(f, &ir));
        ok(tx_rw_from_ir(ir, &g));
        size_t live = live_nodes(g), count = tx_rw_node_count(g);
        assert_true(live >= 3); /* te_moe_block is the smallest */
        tx_lower_report r = {0};
        for (size_t p = 0; p < sizeof(passes) / sizeof(passes[0]); p++) ok(passes[p](g, &r));
        for (size_t i = 0; i < r.n_notes; i++) {
            if (r.notes[i].lowered) fprintf(stderr, "%s: lowered %s\n", names[m], r.notes[i].pattern);
            assert_false(r.notes[i].lowered);
        }
        assert_int_equal(live_nodes(g), live);
        assert_int_equal(tx_rw_node_count(g), count);
        notes_clear(&r);
        tx_rw_free(g);
        tx_ir_model_free(ir);
        tx_onnx_file_free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm17),
        cmocka_unit_test(test_layernorm_decomposed),
        cmocka_unit_test(test_rmsnorm_pow_div),
        cmocka_unit_test(test_rmsnorm_mul_reciprocal),
        cmocka_unit_test(test_rmsnorm_div_cast),
        cmocka_unit_test(test_rmsnorm_fp16_casts),
        cmocka_unit_test(test_neg_layernorm_axis),
        cmocka_unit_test(test_neg_layernorm_extra_reader),
        cmocka_unit_test(test_neg_rmsnorm_pow4),
        cmocka_unit_test(test_neg_rmsnorm_axis),
        cmocka_unit_test(test_gelu_erf),
        cmocka_unit_test(test_gelu_erf_mul_half_x),
        cmocka_unit_test(test_gelu_erf_half_a),
        cmocka_unit_test(test_gelu_tanh),
        cmocka_unit_test(test_gelu_tanh_pow),
        cmocka_unit_test(test_silu),
        cmocka_unit_test(test_neg_gelu_erf_constant),
        cmocka_unit_test(test_neg_gelu_erf_reader),
        cmocka_unit_test(test_neg_gelu_tanh_constant),
        cmocka_unit_test(test_neg_silu_reader),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_swiglu_bias),
        cmocka_unit_test(test_neg_swiglu_different_inputs),
        cmocka_unit_test(test_residual_join_and_fork),
        cmocka_unit_test(test_neg_residual_broadcast),
        cmocka_unit_test(test_te_models_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
