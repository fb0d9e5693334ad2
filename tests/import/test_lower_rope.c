/* test_lower_rope.c - the RoPE lowering pass (import/lower_rope.c) on
 * PyTorch 1.13 exports: tests/import/data/rope_*.onnx (made by
 * make_rope_models.py, with PyTorch's outputs) and models/llama_block.
 *
 * Positive cases: the expected number of te.ops RotaryEmbedding with the
 * right layout, no Slice / Neg / Concat (nor the Muls and Add of the
 * formula) left; the lowered model (emitted, loaded again) gives the
 * original's and PyTorch's outputs, and one training step the original's
 * gradients for every parameter and for x (rel-L2 < 1e-6). Negative cases:
 * one note with a specific reason and the graph unchanged. llama_block,
 * lowered with every pass: two RotaryEmbedding reading one freqs table
 * whose angles are Llama's pos·10000^(-2i/d), nothing of rotate_half left
 * (its outputs and gradients are checked by test_lower_models). */
#include "rw_util.h"

#include "import/lower.h"

#define TABLE_ROWS 12 /* rows of the models' cos/sin buffers (MAXPOS) */

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
    for (size_t i = 0; i < tx_rw_node_count(g); i++) c += !tx_rw_node_at(g, i)->dead;
    return c;
}

static const tx_rw_node *nth_op(tx_rw_graph *g, const char *op, size_t k)
{
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *n = tx_rw_node_at(g, i);
        if (!n->dead && !strcmp(n->op_type, op) && !strcmp(n->domain, "te.ops") && k-- == 0)
            return n;
    }
    return NULL;
}

static const char *attr_s(const tx_rw_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name) && n->attrs[i].type == TX_IR_ATTR_STRING)
            return n->attrs[i].s;
    return NULL;
}

static void data_path(char *buf, size_t n, const char *name, const char *suffix)
{
    snprintf(buf, n, "%s/tests/import/data/rope_%s%s", rw_source_root(), name, suffix);
}

static teexec_model *load(const char *path)
{
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_file(path, NULL, &m), path);
    return m;
}

static void print_notes(const tx_lower_report *r)
{
    for (size_t i = 0; i < r->n_notes; i++)
        printf("  note: %s at %s: %s%s\n", r->notes[i].pattern, r->notes[i].node,
               r->notes[i].lowered ? "lowered" : "not lowered: ",
               r->notes[i].reason ? r->notes[i].reason : "");
}

static void report_clear(tx_lower_report *r)
{
    for (size_t i = 0; i < r->n_notes; i++) {
        free(r->notes[i].pattern);
        free(r->notes[i].node);
        free(r->notes[i].reason);
    }
    free(r->notes);
    memset(r, 0, sizeof *r);
}

/* One output of m for input x (CPU). */
static teexec_tensor *run1(const teexec_model *m, teexec_tensor *x)
{
    rw_inputs in = {1, {"x"}, {x}};
    teexec_tensor *out[RW_MAX_IO];
    size_t n = 0;
    rw_ok(rw_run(m, &in, out, &n), "run");
    assert_int_equal(n, 1);
    return out[0];
}

/* Gradients (lr 0, MSE towards 0.5·y) of every parameter and of x. */
typedef struct grads {
    size_t n;
    char *names[8];
    teexec_tensor *t[8];
} grads;

static void train1(const teexec_model *m, teexec_tensor *x, const teexec_tensor *y, grads *g)
{
    teexec_tensor *target = NULL;
    rw_ok(teexec_tensor_cast(y, TEEXEC_DTYPE_FLOAT, &target), "target");
    float *tv = teexec_tensor_data(target);
    for (uint64_t i = 0; i < teexec_tensor_element_count(target); i++) tv[i] *= 0.5f;
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.loss = TEEXEC_LOSS_MSE;
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    o.lr = 0;
    o.weight_decay = 0;
    teexec_trainer *tr = NULL;
    rw_ok(teexec_trainer_create(m, &o, &tr), "trainer_create");
    const char *names[2] = {"x", "target"};
    const teexec_tensor *ts[2] = {x, target};
    double loss = 0;
    rw_ok(teexec_trainer_step(tr, 2, names, ts, &loss), "trainer_step");
    assert_true(loss > 0);
    size_t np = teexec_trainer_param_count(tr);
    assert_true(np >= 1 && np < 8);
    g->n = 0;
    for (size_t i = 0; i <= np; i++) {
        const char *nm = i < np ? teexec_trainer_param_name(tr, i) : "x";
        g->names[g->n] = strdup(nm);
        assert_non_null(g->names[g->n]);
        rw_ok(teexec_trainer_grad(tr, nm, &g->t[g->n]), nm);
        g->n++;
    }
    teexec_trainer_destroy(tr);
    teexec_tensor_destroy(target);
}

static void grads_free(grads *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->names[i]);
        teexec_tensor_destroy(g->t[i]);
    }
}

/* Lowers rope_<name> with the RoPE pass alone and checks it end to end.
 * `partial`: each rotation covers part of the head, so the Slices and the
 * Concat that split and rejoin the head go too. */
static tx_rw_graph *lower_and_check(const char *name, size_t want_ropes, const char *format,
                                    int64_t rotated, bool partial, teexec_model **orig_out)
{
    char path[4096];
    data_path(path, sizeof path, name, ".onnx");
    teexec_model *orig = load(path);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(orig->ir, &g), "from_ir");
    /* each rotate_half has two Slices and a Concat; the model may have more */
    size_t slices = live_count(g, "", "Slice"), concats = live_count(g, "", "Concat");
    assert_true(slices >= 2 * want_ropes && concats >= want_ropes);
    tx_lower_report r = {0};
    rw_ok(tx_lower_rope(g, &r), "tx_lower_rope");
    print_notes(&r);
    assert_int_equal(r.n_notes, want_ropes);
    for (size_t i = 0; i < r.n_notes; i++) assert_true(r.notes[i].lowered);
    report_clear(&r);

    assert_int_equal(live_count(g, "te.ops", "RotaryEmbedding"), want_ropes);
    size_t per = partial ? 2 : 1;
    assert_int_equal(live_count(g, "", "Slice"), slices - 2 * per * want_ropes);
    assert_int_equal(live_count(g, "", "Neg"), 0);
    assert_int_equal(live_count(g, "", "Concat"), concats - per * want_ropes);
    assert_int_equal(live_count(g, "", "Add"), 0);
    assert_int_equal(live_count(g, "", "Gather"), 0);
    const tx_rw_node *first = nth_op(g, "RotaryEmbedding", 0);
    assert_non_null(first);
    assert_string_equal(attr_s(first, "qkv_format"), format);
    assert_int_equal(first->n_inputs, 2);
    /* q and k read the same table: one freqs initializer */
    for (size_t k = 1; k < want_ropes; k++)
        assert_string_equal(nth_op(g, "RotaryEmbedding", k)->inputs[1], first->inputs[1]);
    tx_tensor f;
    assert_true(tx_rw_constant(g, first->inputs[1], &f));
    assert_int_equal(f.rank, 2);
    assert_int_equal(f.dims[0], 8);  /* the sequence, not the 12 rows of the buffer */
    assert_int_equal(f.dims[1], rotated); /* the rotated width */
    assert_int_equal(f.dtype, TEEXEC_DTYPE_FLOAT);
    tx_tensor_release(&f);

    teexec_model *low = rw_emit_load(g);
    teexec_tensor *x = NULL, *y_torch = NULL;
    data_path(path, sizeof path, name, ".x.npy");
    rw_ok(teexec_tensor_load_file(path, &x), path);
    data_path(path, sizeof path, name, ".y.npy");
    rw_ok(teexec_tensor_load_file(path, &y_torch), path);
    teexec_tensor *ya = run1(orig, x), *yb = run1(low, x);
    double e_orig = rw_rel_l2(yb, ya), e_torch = rw_rel_l2(yb, y_torch);
    printf("  %s: rel-L2 vs original %.3g, vs PyTorch %.3g\n", name, e_orig, e_torch);
    assert_true(e_orig < 1e-6);
    assert_true(e_torch < 1e-6);

    grads ga, gb;
    train1(orig, x, ya, &ga);
    train1(low, x, ya, &gb);
    assert_int_equal(ga.n, gb.n);
    for (size_t i = 0; i < ga.n; i++) {
        size_t j = 0;
        while (j < gb.n && strcmp(gb.names[j], ga.names[i]) != 0) j++;
        if (j == gb.n) fail_msg("%s: no gradient for %s in the lowered model", name, ga.names[i]);
        double e = rw_rel_l2(gb.t[j], ga.t[i]);
        printf("  grad %s: rel-L2 %.3g\n", ga.names[i], e);
        if (!(e < 1e-6)) fail_msg("%s: gradient of %s rel-L2 %g", name, ga.names[i], e);
    }
    grads_free(&ga);
    grads_free(&gb);
    teexec_tensor_destroy(ya);
    teexec_tensor_destroy(yb);
    teexec_tensor_destroy(x);
    teexec_tensor_destroy(y_torch);
    teexec_model_destroy(low);
    *orig_out = orig;
    return g;
}

/* q and k in [b, h, s, d] after transpose(1, 2): the op reads the bshd
 * projections, and a Transpose(0,2,1,3) after each gives the bhsd value. */
static void test_bhsd_qk(void **state)
{
    (void)state;
    teexec_model *orig = NULL;
    tx_rw_graph *g = lower_and_check("bhsd_qk", 2, "bshd", 8, false, &orig);
    /* q's and k's Transposes now follow the RotaryEmbedding; the output's stays */
    assert_int_equal(live_count(g, "", "Transpose"), 3);
    for (size_t k = 0; k < 2; k++) {
        const tx_rw_node *rn = nth_op(g, "RotaryEmbedding", k);
        int64_t p = tx_rw_producer(g, rn->inputs[0], NULL);
        assert_true(p >= 0);
        assert_string_equal(tx_rw_node_at(g, (size_t)p)->op_type, "Reshape");
    }
    assert_int_equal(live_count(g, "", "Mul"), 1); /* q_rot * k_rot */
    tx_rw_free(g);
    teexec_model_destroy(orig);
}

/* bshd (tables [s, 1, d]) and -x2 written as x2 * -1. */
static void test_bshd_mulneg(void **state)
{
    (void)state;
    teexec_model *orig = NULL;
    tx_rw_graph *g = lower_and_check("bshd_mulneg", 1, "bshd", 8, false, &orig);
    assert_int_equal(live_count(g, "", "Transpose"), 0);
    assert_int_equal(live_count(g, "", "Mul"), 0);
    tx_rw_free(g);
    teexec_model_destroy(orig);
}

/* Tables indexed by a position-id buffer (Gather, Unsqueeze; exported
 * without constant folding): the pass folds the chain itself and removes it. */
static void test_gather(void **state)
{
    (void)state;
    teexec_model *orig = NULL;
    tx_rw_graph *g = lower_and_check("gather", 1, "bshd", 8, false, &orig);
    tx_rw_free(g);
    teexec_model_destroy(orig);
}

/* A rotation of the first half of each head, concatenated with the rest
 * (GPT-NeoX's and Phi's partial rotary): one RotaryEmbedding of the whole
 * head with [s, d/2] angles, which passes the other half through; the outer
 * Slices and the Concat go, and the op reads the bshd projection that the
 * head was transposed from (one Transpose back after it). */
static void test_partial(void **state)
{
    (void)state;
    teexec_model *orig = NULL;
    tx_rw_graph *g = lower_and_check("partial", 1, "bshd", 4, true, &orig);
    assert_int_equal(live_count(g, "", "Slice"), 0);
    assert_int_equal(live_count(g, "", "Concat"), 0);
    const tx_rw_node *rn = nth_op(g, "RotaryEmbedding", 0);
    int64_t p = tx_rw_producer(g, rn->inputs[0], NULL);
    assert_true(p >= 0);
    assert_string_equal(tx_rw_node_at(g, (size_t)p)->op_type, "Reshape");
    tx_rw_free(g);
    teexec_model_destroy(orig);
}

/* A RoPE-looking subgraph the pass must leave alone, with its reason. */
static void check_negative(const char *name, const char *reason_part)
{
    char path[4096];
    data_path(path, sizeof path, name, ".onnx");
    teexec_model *orig = load(path);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(orig->ir, &g), "from_ir");
    size_t before = live_total(g);
    tx_lower_report r = {0};
    rw_ok(tx_lower_rope(g, &r), "tx_lower_rope");
    print_notes(&r);
    assert_int_equal(r.n_notes, 1);
    assert_false(r.notes[0].lowered);
    assert_non_null(r.notes[0].reason);
    if (!strstr(r.notes[0].reason, reason_part))
        fail_msg("%s: reason \"%s\" does not say \"%s\"", name, r.notes[0].reason, reason_part);
    assert_int_equal(live_total(g), before);
    assert_int_equal(live_count(g, "te.ops", "RotaryEmbedding"), 0);
    report_clear(&r);
    tx_rw_free(g);
    teexec_model_destroy(orig);
}

static void test_neg_scaled(void **state)
{
    (void)state;
    check_negative("neg_scaled", "not cos and sin of one angle");
}

static void test_neg_swapped(void **state)
{
    (void)state;
    check_negative("neg_swapped", "the slices are not x[..., 4:] and x[..., :4]");
}

static void test_neg_sin_input(void **state)
{
    (void)state;
    check_negative("neg_sin_input", "is not a constant");
}

/* The whole llama_block with every pass: RoPE on q and k, one freqs table
 * equal (as angles) to Llama's, nothing of rotate_half left. */
static void test_llama_block(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/models/llama_block/model.onnx", rw_source_root());
    teexec_model *m = load(path);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "from_ir");
    tx_lower_report *r = NULL;
    rw_ok(tx_lower(g, NULL, &r), "tx_lower");
    size_t ropes = 0;
    print_notes(r);
    for (size_t i = 0; i < r->n_notes; i++)
        ropes += r->notes[i].lowered && !strcmp(r->notes[i].pattern, "RotaryEmbedding");
    assert_int_equal(ropes, 2);
    assert_int_equal(live_count(g, "te.ops", "RotaryEmbedding"), 2);
    assert_int_equal(live_count(g, "te.ops", "DotProductAttention"), 1);
    static const char *const gone[] = {"Slice", "Neg", "Concat", "Transpose"};
    for (size_t k = 0; k < sizeof gone / sizeof *gone; k++)
        if (live_count(g, "", gone[k]) != 0)
            fail_msg("llama_block: %zu %s left", live_count(g, "", gone[k]), gone[k]);
    const tx_rw_node *q = nth_op(g, "RotaryEmbedding", 0), *k = nth_op(g, "RotaryEmbedding", 1);
    assert_string_equal(q->inputs[1], k->inputs[1]);
    assert_string_equal(attr_s(q, "qkv_format"), "bshd");
    /* each RotaryEmbedding feeds the attention directly (q, then k) */
    size_t nc = 0;
    const tx_ir_use *u = tx_rw_consumers(g, q->outputs[0], &nc);
    assert_int_equal(nc, 1);
    assert_string_equal(tx_rw_node_at(g, (size_t)u[0].node)->op_type, "DotProductAttention");
    assert_int_equal(u[0].slot, 0);
    u = tx_rw_consumers(g, k->outputs[0], &nc);
    assert_int_equal(nc, 1);
    assert_int_equal(u[0].slot, 1);

    /* the angles: cos/sin of freqs equal those of pos·10000^(-2i/16) */
    tx_tensor f;
    assert_true(tx_rw_constant(g, q->inputs[1], &f));
    assert_int_equal(f.rank, 2);
    assert_int_equal(f.dims[0], 16);
    assert_int_equal(f.dims[1], 16);
    const float *fv = f.data;
    double worst = 0;
    for (int p = 0; p < 16; p++)
        for (int j = 0; j < 16; j++) {
            double a = p * pow(10000.0, -2.0 * (j % 8) / 16.0), v = fv[p * 16 + j];
            worst = fmax(worst, fmax(fabs(cos(v) - cos(a)), fabs(sin(v) - sin(a))));
        }
    printf("  llama_block freqs: max |cos/sin difference| to Llama's angles %.3g\n", worst);
    assert_true(worst < 2e-6);
    tx_tensor_release(&f);
    tx_lower_report_free(r);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bhsd_qk),     cmocka_unit_test(test_bshd_mulneg),
        cmocka_unit_test(test_gather),      cmocka_unit_test(test_partial),
        cmocka_unit_test(test_neg_scaled),  cmocka_unit_test(test_neg_swapped),
        cmocka_unit_test(test_neg_sin_input),
        cmocka_unit_test(test_llama_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
