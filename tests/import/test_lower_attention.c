/* test_lower_attention.c - the attention lowering pass (import/lower_attention.c)
 * on PyTorch 1.13 exports: tests/import/data/attn_*.onnx (made by
 * make_attn_models.py with PyTorch's outputs) and models/gpt2_block,
 * models/llama_block.
 *
 * Each positive case: exactly one te.ops DotProductAttention with the
 * expected attributes, no Softmax/Transpose/mask nodes left behind; the
 * lowered model (emitted and loaded again) gives the original's outputs and
 * PyTorch's (rel-L2 < 1e-6), and one training step gives the same gradients
 * for every parameter and the input (rel-L2 < 1e-6). Negative cases: one
 * note with a specific reason and the graph unchanged.
 *
 * Symbolic dims (models/kv/gpt2_kv, a dynamo export with a KV cache):
 * both layers lower; with one layer's value batch declared under another
 * name, that layer is declined, since its dims can no longer be shown to
 * be one attention's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/model_internal.h"
#include "import/lower.h"
#include "import/rewrite.h"
#include "import/rewrite_internal.h"
#include "teexec/teexec.h"

static void ok_(teexec_status *st, const char *what, int line)
{
    if (st) {
        fprintf(stderr, "line %d: %s: %s\n", line, what, teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}
#define ok(x) ok_((x), #x, __LINE__)

static void path_of(char *buf, size_t n, const char *rel)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    snprintf(buf, n, "%s/%s", root ? root : ".", rel);
}

static bool exists(const char *rel)
{
    char p[1024];
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static teexec_model *load(const char *rel)
{
    char p[1024];
    path_of(p, sizeof p, rel);
    teexec_model *m = NULL;
    ok(teexec_model_load_file(p, NULL, &m));
    return m;
}

static teexec_tensor *load_tensor(const char *rel)
{
    char p[1024];
    path_of(p, sizeof p, rel);
    teexec_tensor *t = NULL;
    ok(teexec_tensor_load_file(p, &t));
    return t;
}

/* rel-L2 of float or double tensors of the same element count. */
static double rel_l2(const teexec_tensor *a, const teexec_tensor *b)
{
    uint64_t n = teexec_tensor_element_count(a);
    assert_int_equal(n, teexec_tensor_element_count(b));
    assert_int_equal(teexec_tensor_dtype(a), teexec_tensor_dtype(b));
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        double x, y;
        if (teexec_tensor_dtype(a) == TEEXEC_DTYPE_DOUBLE) {
            x = ((const double *)teexec_tensor_data_const(a))[i];
            y = ((const double *)teexec_tensor_data_const(b))[i];
        } else {
            x = ((const float *)teexec_tensor_data_const(a))[i];
            y = ((const float *)teexec_tensor_data_const(b))[i];
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    assert_true(den > 0); /* an all-zero reference would prove nothing */
    return sqrt(num / den);
}

typedef struct lowered {
    teexec_model *orig, *low;
    tx_rw_graph *g;
    tx_lower_report rep;
} lowered;

static size_t live_count(tx_rw_graph *g, const char *domain, const char *op)
{
    size_t c = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *n = tx_rw_node_at(g, i);
        if (!n->dead && !strcmp(n->op_type, op) && !strcmp(n->domain, domain)) c++;
    }
    return c;
}

static size_t live_total(tx_rw_graph *g)
{
    size_t c = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++)
        if (!tx_rw_node_at(g, i)->dead) c++;
    return c;
}

static void lower_model(const char *rel, lowered *L)
{
    memset(L, 0, sizeof *L);
    L->orig = load(rel);
    ok(tx_rw_from_ir(L->orig->ir, &L->g));
    ok(tx_lower_attention(L->g, &L->rep));
    for (size_t i = 0; i < L->rep.n_notes; i++)
        fprintf(stderr, "  note: %s at %s: %s%s\n", L->rep.notes[i].pattern,
                L->rep.notes[i].node, L->rep.notes[i].lowered ? "lowered" : "not lowered: ",
                L->rep.notes[i].reason ? L->rep.notes[i].reason : "");
    uint8_t *bytes = NULL;
    size_t len = 0;
    ok(tx_rw_emit(L->g, &bytes, &len));
    ok(teexec_model_load_memory(bytes, len, NULL, NULL, &L->low));
    free(bytes);
}

static void lowered_free(lowered *L)
{
    for (size_t i = 0; i < L->rep.n_notes; i++) {
        free(L->rep.notes[i].pattern);
        free(L->rep.notes[i].node);
        free(L->rep.notes[i].reason);
    }
    free(L->rep.notes);
    tx_rw_free(L->g);
    teexec_model_destroy(L->low);
    teexec_model_destroy(L->orig);
}

static teexec_tensor *run1(teexec_model *m, size_t n_in, const char **names,
                           teexec_tensor **ins)
{
    teexec_session_options *so;
    teexec_session *s;
    ok(teexec_session_options_create(&so));
    ok(teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU));
    ok(teexec_session_create(m, so, &s));
    teexec_session_options_destroy(so);
    teexec_tensor *out = NULL;
    ok(teexec_session_run(s, n_in, names, (const teexec_tensor *const *)ins, 1, NULL, &out));
    teexec_session_destroy(s);
    return out;
}

/* Gradients of every trainable parameter and of x after one lr-0 step. */
typedef struct grads {
    size_t n;
    char *names[16];
    teexec_tensor *t[16];
} grads;

static void train1(teexec_model *m, size_t n_in, const char **names, teexec_tensor **ins,
                   grads *out)
{
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0;
    o.weight_decay = 0;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    double loss;
    ok(teexec_trainer_step(tr, n_in, names, (const teexec_tensor *const *)ins, &loss));
    assert_true(loss > 0);
    out->n = 0;
    size_t np = teexec_trainer_param_count(tr);
    assert_true(np >= 1 && np < 15);
    for (size_t i = 0; i <= np; i++) {
        const char *nm = i < np ? teexec_trainer_param_name(tr, i) : "x";
        out->names[out->n] = strdup(nm);
        ok(teexec_trainer_grad(tr, nm, &out->t[out->n]));
        out->n++;
    }
    teexec_trainer_destroy(tr);
}

static void grads_free(grads *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->names[i]);
        teexec_tensor_destroy(g->t[i]);
    }
}

/* Outputs (original vs lowered vs PyTorch) and gradients. `prefix` is the
 * data path without extension ("tests/import/data/attn_x"); expected is
 * the PyTorch output file. */
static void compare(const lowered *L, const char *x_rel, const char *mask_rel,
                    const char *y_rel, const char *target_rel, const char *train_rel)
{
    teexec_tensor *ins[4];
    const char *names[4];
    size_t n_in = 0;
    names[n_in] = "x";
    ins[n_in++] = load_tensor(x_rel);
    if (mask_rel) {
        names[n_in] = "mask";
        ins[n_in++] = load_tensor(mask_rel);
    }
    teexec_tensor *a = run1(L->orig, n_in, names, ins);
    teexec_tensor *b = run1(L->low, n_in, names, ins);
    teexec_tensor *ref = load_tensor(y_rel);
    double e_low = rel_l2(b, a), e_ref = rel_l2(b, ref), e_orig = rel_l2(a, ref);
    fprintf(stderr, "  rel-L2 lowered vs original %.3g, vs PyTorch %.3g (original vs PyTorch "
                    "%.3g)\n", e_low, e_ref, e_orig);
    assert_true(e_low < 1e-6);
    assert_true(e_ref < 1e-6);
    teexec_tensor_destroy(a);
    teexec_tensor_destroy(b);
    teexec_tensor_destroy(ref);

    teexec_dataset *ds = NULL;
    if (train_rel) {
        /* models/: the first batch of train.npz (x and target) */
        char p[1024];
        path_of(p, sizeof p, train_rel);
        ok(teexec_dataset_load_npz(p, &ds));
        for (size_t i = 0; i < n_in; i++) teexec_tensor_destroy(ins[i]);
        n_in = 0;
        for (size_t i = 0; i < teexec_dataset_count(ds); i++) {
            const teexec_tensor *t = teexec_dataset_tensor(ds, i);
            const int64_t *d = teexec_tensor_dims(t);
            int64_t bd[8];
            int32_t r = teexec_tensor_rank(t);
            memcpy(bd, d, (size_t)r * sizeof *d);
            uint64_t per = teexec_tensor_element_count(t) / (uint64_t)d[0];
            bd[0] = 2;
            ok(teexec_tensor_create_copy(teexec_tensor_dtype(t), r, bd,
                                         teexec_tensor_data_const(t), 2 * per * sizeof(float),
                                         &ins[n_in]));
            names[n_in] = strcmp(teexec_dataset_name(ds, i), "x") == 0 ? "x" : "target";
            n_in++;
        }
        teexec_dataset_destroy(ds);
    } else {
        names[n_in] = "target";
        ins[n_in++] = load_tensor(target_rel);
    }
    grads ga, gb;
    train1(L->orig, n_in, names, ins, &ga);
    train1(L->low, n_in, names, ins, &gb);
    /* every parameter of the lowered model (and x) is one of the original's;
     * the original may have more: a float mask initializer is trainable to
     * the trainer, and the lowering folds it into the attention */
    assert_true(gb.n >= 2 && gb.n <= ga.n);
    for (size_t i = 0; i < gb.n; i++) {
        size_t j = 0;
        while (j < ga.n && strcmp(ga.names[j], gb.names[i]) != 0) j++;
        assert_true(j < ga.n);
        double e = rel_l2(gb.t[i], ga.t[j]);
        if (e >= 1e-6) fprintf(stderr, "  grad %s: rel-L2 %.3g\n", gb.names[i], e);
        assert_true(e < 1e-6);
    }
    fprintf(stderr, "  %zu gradients equal (rel-L2 < 1e-6)\n", gb.n);
    grads_free(&ga);
    grads_free(&gb);
    for (size_t i = 0; i < n_in; i++) teexec_tensor_destroy(ins[i]);
}

static const tx_rw_node *the_dpa(tx_rw_graph *g)
{
    const tx_rw_node *found = NULL;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *n = tx_rw_node_at(g, i);
        if (!n->dead && !strcmp(n->op_type, "DotProductAttention") &&
            !strcmp(n->domain, "te.ops")) {
            assert_null(found);
            found = n;
        }
    }
    assert_non_null(found);
    return found;
}

static const tx_rw_attr *attr(const tx_rw_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
    return NULL;
}

static int64_t attr_i(const tx_rw_node *n, const char *name)
{
    const tx_rw_attr *a = attr(n, name);
    assert_non_null(a);
    return a->i;
}

typedef struct expect {
    const char *name;
    int64_t heads, kv_heads, causal;
    double scale;
    size_t n_inputs; /* 3, or 4 with a mask */
    bool mask_input; /* the mask is the model's "mask" input */
    const char *out;  /* the attention's output name; NULL = "y" */
    bool mask_not;    /* the mask input reaches the attention through a Not */
} expect;

/* What must be gone after lowering: in the tiny attn_* models everything
 * but the projections and their Reshapes (strict); in a whole block the
 * attention's own ops (its Transposes too unless `rope`: a rotary
 * embedding in [b,h,s,d] keeps them, and new ones feed the attention). */
typedef enum scope { STRICT, BLOCK, BLOCK_ROPE } scope;

static void check_positive(const expect *e, scope sc, const char *out_name, lowered *L)
{
    assert_int_equal(L->rep.n_notes, 1);
    assert_true(L->rep.notes[0].lowered);
    assert_string_equal(L->rep.notes[0].pattern, "DotProductAttention");
    const tx_rw_node *d = the_dpa(L->g);
    assert_int_equal(d->n_outputs, 1);
    assert_string_equal(d->outputs[0], out_name);
    assert_int_equal(d->n_inputs, e->n_inputs);
    assert_int_equal(attr_i(d, "num_attention_heads"), e->heads);
    assert_int_equal(attr_i(d, "num_gqa_groups"), e->kv_heads);
    assert_int_equal(attr_i(d, "causal"), e->causal);
    const tx_rw_attr *sa = attr(d, "scale");
    assert_non_null(sa);
    assert_true(fabs(sa->f - e->scale) <= 1e-6 * fabs(e->scale));
    const tx_rw_attr *fmt = attr(d, "qkv_format");
    assert_non_null(fmt);
    assert_string_equal(fmt->s, "bshd");
    if (e->mask_input) assert_string_equal(d->inputs[3], "mask");
    assert_int_equal(live_count(L->g, "", "Not"), e->mask_not ? 1 : 0);
    static const char *const gone[] = {"Softmax", "Where", "Trilu", "Equal", "Expand",
                                       "ConstantOfShape", "Unsqueeze", "Transpose", "Split",
                                       "Concat", "Div", "Mul", "Add", "Cast"};
    size_t n_gone = sc == STRICT ? sizeof gone / sizeof *gone : 7;
    for (size_t i = 0; i < n_gone; i++) {
        if (sc == BLOCK_ROPE && !strcmp(gone[i], "Transpose")) continue;
        if (live_count(L->g, "", gone[i])) fprintf(stderr, "  left behind: %s\n", gone[i]);
        assert_int_equal(live_count(L->g, "", gone[i]), 0);
    }
    if (sc == BLOCK) assert_int_equal(live_count(L->g, "", "Transpose"), 0);
}

static void run_variant(const expect *e)
{
    char model[256], x[256], y[256], t[256], mk[256];
    snprintf(model, sizeof model, "tests/import/data/attn_%s.onnx", e->name);
    snprintf(x, sizeof x, "tests/import/data/attn_%s.x.npy", e->name);
    snprintf(y, sizeof y, "tests/import/data/attn_%s.y.npy", e->name);
    snprintf(t, sizeof t, "tests/import/data/attn_%s.target.npy", e->name);
    snprintf(mk, sizeof mk, "tests/import/data/attn_%s.mask.npy", e->name);
    fprintf(stderr, "%s\n", model);
    lowered L;
    lower_model(model, &L);
    check_positive(e, STRICT, e->out ? e->out : "y", &L);
    /* 3 projections + 3 shape Reshapes (+ the output projection) and their
     * shape constants at most */
    assert_true(live_total(L.g) <= 12);
    compare(&L, x, e->mask_input || e->mask_not ? mk : NULL, y, t, NULL);
    lowered_free(&L);
}

#define F32(v) ((double)(float)(v))

static void causal_mul(void **s)
{
    (void)s;
    expect e = {"causal_mul", 2, 2, 1, F32(1 / sqrt(8.0)), 3, false, NULL, false};
    run_variant(&e);
}
static void nomask_div(void **s)
{
    (void)s;
    expect e = {"nomask_div", 2, 2, 0, 1 / F32(sqrt(8.0)), 3, false, NULL, false};
    e.out = "/Reshape_3_output_0"; /* an output projection follows */
    run_variant(&e);
}
static void qscale_where1e4(void **s)
{
    (void)s;
    expect e = {"qscale_where1e4", 2, 2, 1, F32(1 / sqrt(8.0)), 3, false, NULL, false};
    run_variant(&e);
}
static void qkscale_addinf(void **s)
{
    (void)s;
    double s4 = F32(pow(8.0, -0.25)); /* q and k each scaled by d^-1/4 */
    expect e = {"qkscale_addinf", 2, 2, 1, s4 * s4, 3, false, NULL, false};
    run_variant(&e);
}
static void divshape_addbig(void **s)
{
    (void)s;
    expect e = {"divshape_addbig", 2, 2, 1, 1 / F32(sqrt(8.0)), 3, false, NULL, false};
    run_variant(&e);
}
static void noscale(void **s)
{
    (void)s;
    expect e = {"noscale", 2, 2, 0, 1.0, 3, false, NULL, false};
    run_variant(&e);
}
static void gqa_expand(void **s)
{
    (void)s;
    expect e = {"gqa_expand", 4, 2, 1, 0.5, 3, false, NULL, false};
    run_variant(&e);
}
static void gqa_interleave(void **s)
{
    (void)s;
    expect e = {"gqa_interleave", 4, 2, 1, 0.5, 3, false, NULL, false};
    run_variant(&e);
}
static void mask_const(void **s)
{
    (void)s;
    expect e = {"mask_const", 2, 2, 0, F32(1 / sqrt(8.0)), 4, false, NULL, false};
    run_variant(&e);
}
static void trilu_k1(void **s)
{
    (void)s;
    expect e = {"trilu_k1", 2, 2, 0, F32(1 / sqrt(8.0)), 4, false, NULL, false};
    run_variant(&e);
}
static void mask_input(void **s)
{
    (void)s;
    expect e = {"mask_input", 2, 2, 0, F32(1 / sqrt(8.0)), 4, true, NULL, false};
    run_variant(&e);
}
static void mask_input_keep(void **s)
{
    (void)s;
    expect e = {"mask_input_keep", 2, 2, 0, F32(1 / sqrt(8.0)), 4, false, NULL, true};
    run_variant(&e);
}

/* Negative: one note containing `why`, nothing changed. */
static void run_negative(const char *name, const char *why)
{
    char model[256];
    snprintf(model, sizeof model, "tests/import/data/attn_%s.onnx", name);
    fprintf(stderr, "%s\n", model);
    lowered L;
    memset(&L, 0, sizeof L);
    L.orig = load(model);
    ok(tx_rw_from_ir(L.orig->ir, &L.g));
    size_t before = live_total(L.g);
    ok(tx_lower_attention(L.g, &L.rep));
    assert_int_equal(L.rep.n_notes, 1);
    fprintf(stderr, "  note: %s\n", L.rep.notes[0].reason ? L.rep.notes[0].reason : "(none)");
    assert_false(L.rep.notes[0].lowered);
    assert_non_null(L.rep.notes[0].reason);
    assert_non_null(strstr(L.rep.notes[0].reason, why));
    assert_int_equal(live_count(L.g, "te.ops", "DotProductAttention"), 0);
    assert_int_equal(live_total(L.g), before);
    assert_int_equal(live_count(L.g, "", "Softmax"), 1);
    lowered_free(&L);
}

static void neg_probs_out(void **s)
{
    (void)s;
    run_negative("neg_probs_out", "probabilities");
}
static void neg_dropout(void **s)
{
    (void)s;
    run_negative("neg_dropout", "dropout");
}
static void neg_mask_computed(void **s)
{
    (void)s;
    run_negative("neg_mask_computed", "not a graph input");
}
static void neg_row_masked(void **s)
{
    (void)s;
    run_negative("neg_row_masked", "every key of some query row");
}

/* A graph with no attention: a plain Softmax classifier stays silent. */
static void no_attention_no_note(void **s)
{
    (void)s;
    lowered L;
    memset(&L, 0, sizeof L);
    L.orig = load("models/mlp/model.onnx");
    ok(tx_rw_from_ir(L.orig->ir, &L.g));
    size_t before = live_total(L.g);
    ok(tx_lower_attention(L.g, &L.rep));
    assert_int_equal(L.rep.n_notes, 0);
    assert_int_equal(live_total(L.g), before);
    lowered_free(&L);
}

static void gpt2_block(void **s)
{
    (void)s;
    fprintf(stderr, "models/gpt2_block\n");
    lowered L;
    lower_model("models/gpt2_block/model.onnx", &L);
    expect e = {"gpt2_block", 4, 4, 1, 0.25, 3, false, NULL, false};
    const tx_rw_node *d = the_dpa(L.g);
    char out[256];
    snprintf(out, sizeof out, "%s", d->outputs[0]);
    check_positive(&e, BLOCK, out, &L);
    assert_string_equal(out, "/Reshape_3_output_0");
    compare(&L, "models/gpt2_block/inputs/x.npy", NULL, "models/gpt2_block/expected/y.npy", NULL,
            "models/gpt2_block/train.npz");
    /* lowering twice changes nothing */
    size_t n = live_total(L.g);
    tx_lower_report r2 = {0};
    ok(tx_lower_attention(L.g, &r2));
    assert_int_equal(r2.n_notes, 0);
    assert_int_equal(live_total(L.g), n);
    free(r2.notes);
    lowered_free(&L);
}

static void llama_block(void **s)
{
    (void)s;
    if (!exists("models/llama_block/model.onnx")) {
        fprintf(stderr, "models/llama_block not present yet\n");
        skip();
    }
    fprintf(stderr, "models/llama_block\n");
    lowered L;
    lower_model("models/llama_block/model.onnx", &L);
    const tx_rw_node *d = the_dpa(L.g);
    char out[256];
    snprintf(out, sizeof out, "%s", d->outputs[0]);
    expect e = {"llama_block", 4, 2, 1, 1 / F32(sqrt(16.0)), 3, false, NULL, false};
    check_positive(&e, BLOCK_ROPE, out, &L);
    compare(&L, "models/llama_block/inputs/x.npy", NULL, "models/llama_block/expected/y.npy",
            NULL, "models/llama_block/train.npz");
    lowered_free(&L);
}

/* Renames dim `d` of the declared type of graph output `name`. */
static void rename_output_dim(tx_rw_graph *g, const char *name, int d, const char *param)
{
    for (size_t i = 0; i < g->n_outputs; i++) {
        if (strcmp(g->outputs[i].name, name) != 0) continue;
        assert_true(g->outputs[i].has_type && g->outputs[i].type.rank > d);
        assert_non_null(g->outputs[i].type.dim_params[d]);
        free(g->outputs[i].type.dim_params[d]);
        g->outputs[i].type.dim_params[d] = strdup(param);
        assert_non_null(g->outputs[i].type.dim_params[d]);
        return;
    }
    fail_msg("no graph output %s", name);
}

static void kv_symbolic_dims(void **s)
{
    (void)s;
    const char *rel = "models/kv/gpt2_kv/model.onnx";
    if (!exists(rel)) skip();
    lowered L;
    lower_model(rel, &L);
    assert_int_equal(live_count(L.g, "te.ops", "DotProductAttention"), 2);
    assert_int_equal(live_count(L.g, "", "Softmax"), 0);
    lowered_free(&L);

    memset(&L, 0, sizeof L);
    L.orig = load(rel);
    ok(tx_rw_from_ir(L.orig->ir, &L.g));
    rename_output_dim(L.g, "present.0.value", 0, "another_batch");
    ok(tx_lower_attention(L.g, &L.rep));
    assert_int_equal(live_count(L.g, "te.ops", "DotProductAttention"), 1);
    assert_int_equal(live_count(L.g, "", "Softmax"), 1);
    size_t declined = 0;
    for (size_t i = 0; i < L.rep.n_notes; i++) {
        if (L.rep.notes[i].lowered) continue;
        declined++;
        fprintf(stderr, "  note: %s\n", L.rep.notes[i].reason);
        assert_non_null(strstr(L.rep.notes[i].reason, "do not fit one attention"));
    }
    assert_int_equal(declined, 1);
    lowered_free(&L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(causal_mul),        cmocka_unit_test(nomask_div),
        cmocka_unit_test(qscale_where1e4),   cmocka_unit_test(qkscale_addinf),
        cmocka_unit_test(divshape_addbig),   cmocka_unit_test(noscale),
        cmocka_unit_test(gqa_expand),        cmocka_unit_test(gqa_interleave),
        cmocka_unit_test(mask_const),        cmocka_unit_test(trilu_k1),
        cmocka_unit_test(mask_input),        cmocka_unit_test(mask_input_keep),
        cmocka_unit_test(neg_probs_out),
        cmocka_unit_test(neg_dropout),       cmocka_unit_test(neg_mask_computed),
        cmocka_unit_test(neg_row_masked),    cmocka_unit_test(no_attention_no_note),
        cmocka_unit_test(gpt2_block),        cmocka_unit_test(llama_block),
        cmocka_unit_test(kv_symbolic_dims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
