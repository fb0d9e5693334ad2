/* test_lower_zoo.c - lowering on the real exports of models/zoo (PyTorch 2.11,
 * both exporters): each form the exporters write, checked on the export that
 * has it.
 *
 * Every case lowers models/zoo/<export>/model.onnx with all passes
 * (tx_lower), checks the te.ops it must end with (and what must be gone),
 * emits and loads the lowered graph and runs it on the CPU against
 * PyTorch's expected/ output (rel-L2 <= 1e-5); where the planner plans the
 * export, teexec_model_convert's model (what `teexec convert` writes) is run
 * too; where named, one training step of the lowered graph gives PyTorch's
 * gradients (expected/grads.npz, rel-L2 <= 1e-5) for every initializer
 * holding a parameter, mapped back through tx_param_sources /
 * tx_param_to_original (tied weights, merged gate|up weights, a patch
 * Conv's weight). */
#include "rw_util.h"

#include <unistd.h>

#include "exec/tensor_internal.h"
#include "import/fold.h"
#include "import/lower.h"

#define TOL 1e-5

typedef struct zoo {
    char dir[4096];
    teexec_model *orig, *low;
    tx_rw_graph *g;
    tx_lower_report *rep;
} zoo;

static size_t count_op(tx_rw_graph *g, const char *domain, const char *op)
{
    size_t c = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *n = tx_rw_node_at(g, i);
        if (!n->dead && !strcmp(n->domain, domain) && !strcmp(n->op_type, op)) c++;
    }
    return c;
}

static size_t te(const zoo *z, const char *op) { return count_op(z->g, "te.ops", op); }
static size_t std_op(const zoo *z, const char *op) { return count_op(z->g, "", op); }

static const tx_rw_node *nth_te(const zoo *z, const char *op, size_t k)
{
    for (size_t i = 0; i < tx_rw_node_count(z->g); i++) {
        const tx_rw_node *n = tx_rw_node_at(z->g, i);
        if (!n->dead && !strcmp(n->domain, "te.ops") && !strcmp(n->op_type, op) && k-- == 0)
            return n;
    }
    fail_msg("no te.ops %s number %zu", op, k);
    return NULL;
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
    if (!a) fail_msg("%s has no attribute %s", n->name, name);
    return a->i;
}

static const char *attr_s(const tx_rw_node *n, const char *name)
{
    const tx_rw_attr *a = attr(n, name);
    if (!a || a->type != TX_IR_ATTR_STRING)
        fail_msg("%s has no string attribute %s", n->name, name);
    return a->s;
}

/* Notes of `pattern` that were declined (printed). */
static size_t declined(const zoo *z, const char *pattern)
{
    size_t c = 0;
    for (size_t i = 0; i < z->rep->n_notes; i++)
        if (!z->rep->notes[i].lowered && !strcmp(z->rep->notes[i].pattern, pattern)) c++;
    return c;
}

static void zoo_lower(const char *name, zoo *z)
{
    memset(z, 0, sizeof *z);
    snprintf(z->dir, sizeof z->dir, "%s/models/zoo/%s", rw_source_root(), name);
    char path[4200];
    snprintf(path, sizeof path, "%s/model.onnx", z->dir);
    rw_ok(teexec_model_load_file(path, NULL, &z->orig), path);
    rw_ok(tx_rw_from_ir(z->orig->ir, &z->g), "from_ir");
    /* as tx_model_lower does: constants folded first (import/fold.h) */
    rw_ok(tx_fold(z->g, NULL, NULL), "tx_fold");
    rw_ok(tx_lower(z->g, NULL, &z->rep), "tx_lower");
    printf("%s:", name);
    for (size_t i = 0; i < tx_rw_node_count(z->g); i++) {
        const tx_rw_node *n = tx_rw_node_at(z->g, i);
        if (n->dead || strcmp(n->domain, "te.ops")) continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const tx_rw_node *o = tx_rw_node_at(z->g, j);
            seen = !o->dead && !strcmp(o->domain, "te.ops") && !strcmp(o->op_type, n->op_type);
        }
        if (!seen) printf(" %s x%zu", n->op_type, te(z, n->op_type));
    }
    printf("\n");
    for (size_t i = 0; i < z->rep->n_notes; i++)
        if (!z->rep->notes[i].lowered)
            printf("  not lowered: %s at %s: %s\n", z->rep->notes[i].pattern,
                   z->rep->notes[i].node, z->rep->notes[i].reason);
    z->low = rw_emit_load(z->g);
}

static void zoo_free(zoo *z)
{
    teexec_model_destroy(z->low);
    tx_lower_report_free(z->rep);
    tx_rw_free(z->g);
    teexec_model_destroy(z->orig);
}

/* m's first output on the export's inputs against expected/<output>.npy. */
static void check_output(const zoo *z, const teexec_model *m, const char *what)
{
    char dir[4200], path[4400];
    snprintf(dir, sizeof dir, "%s/inputs", z->dir);
    rw_inputs in;
    rw_inputs_npy(m, dir, &in);
    teexec_tensor *out[RW_MAX_IO];
    size_t n = 0;
    rw_ok(rw_run(m, &in, out, &n), what);
    snprintf(path, sizeof path, "%s/expected/%s.npy", z->dir, teexec_model_output(m, 0)->name);
    teexec_tensor *ref = NULL;
    rw_ok(teexec_tensor_load_file(path, &ref), path);
    double e = rw_rel_l2(out[0], ref);
    printf("  %s: rel-L2 %.3g vs PyTorch\n", what, e);
    if (!(e <= TOL)) fail_msg("%s: rel-L2 %g", what, e);
    teexec_tensor_destroy(ref);
    rw_outputs_free(out, n);
    rw_inputs_free(&in);
}

/* teexec_model_convert (the converter's model: lowered, planned, fuser
 * groups outlined), loaded and run. */
static void check_converted(const zoo *z)
{
    char path[] = "/tmp/teexec_zoo_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char *summary = NULL;
    rw_ok(teexec_model_convert(z->orig, NULL, path, &summary), "teexec_model_convert");
    teexec_string_free(summary);
    teexec_model *c = NULL;
    rw_ok(teexec_model_load_file(path, NULL, &c), path);
    unlink(path);
    check_output(z, c, "converted");
    teexec_model_destroy(c);
}

/* Rows [0, 2) of train.npz (the first batch of `teexec train --batch 2`). */
static size_t first_batch(const zoo *z, const char **names, teexec_tensor **ts,
                          teexec_loss_kind *loss)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/train.npz", z->dir);
    teexec_dataset *ds = NULL;
    rw_ok(teexec_dataset_load_npz(path, &ds), path);
    size_t n = teexec_dataset_count(ds);
    assert_true(n <= RW_MAX_IO);
    *loss = TEEXEC_LOSS_MSE;
    for (size_t i = 0; i < n; i++) {
        const teexec_tensor *t = teexec_dataset_tensor(ds, i);
        int32_t r = teexec_tensor_rank(t);
        int64_t d[8];
        memcpy(d, teexec_tensor_dims(t), (size_t)r * sizeof *d);
        size_t row = teexec_tensor_byte_size(t) / (size_t)d[0];
        d[0] = 2;
        rw_ok(teexec_tensor_create_copy(teexec_tensor_dtype(t), r, d, teexec_tensor_data_const(t),
                                        2 * row, &ts[i]),
              "batch");
        names[i] = strdup(teexec_dataset_name(ds, i));
        if (!strcmp(names[i], "labels")) *loss = TEEXEC_LOSS_CROSS_ENTROPY;
    }
    teexec_dataset_destroy(ds);
    return n;
}

/* ||a - b||, and ||b||. */
static double abs_l2(const teexec_tensor *a, const teexec_tensor *b, double *norm_b)
{
    double num = 0, den = 0;
    for (uint64_t i = 0; i < teexec_tensor_element_count(a); i++) {
        double x = rw_elem(a, i), y = rw_elem(b, i);
        num += (x - y) * (x - y);
        den += y * y;
    }
    *norm_b = sqrt(den);
    return sqrt(num);
}

/* One lr-0 step of the lowered graph; every gradient of expected/grads.npz
 * (PyTorch's, keyed by the export's initializers) from the lowered
 * parameter holding it. A "broadcast" parameter (a class token repeated
 * over the batch) is compared summed over the copies, as meta.json says.
 * A gradient that is zero in exact arithmetic (the key projection's bias:
 * softmax ignores a shift every key shares) is rounding noise on both
 * sides, 1e-8 against gradients near 1: those (norm below 1e-6 of the
 * largest) are compared absolutely, to TOL times the largest norm. */
static void check_grads(const zoo *z)
{
    const char *names[RW_MAX_IO];
    teexec_tensor *ts[RW_MAX_IO];
    teexec_train_options o;
    teexec_train_options_init(&o);
    size_t n = first_batch(z, names, ts, &o.loss);
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    o.lr = 0;
    o.weight_decay = 0;
    o.device = TEEXEC_DEVICE_CPU;
    teexec_trainer *tr = NULL;
    rw_ok(teexec_trainer_create(z->low, &o, &tr), "trainer_create");
    rw_ok(teexec_trainer_step(tr, n, names, (const teexec_tensor *const *)ts, NULL), "step");
    tx_param_source *src = NULL;
    size_t n_src = 0;
    rw_ok(tx_param_sources(z->low->ir->graph, &src, &n_src), "param_sources");
    char path[4200];
    snprintf(path, sizeof path, "%s/expected/grads.npz", z->dir);
    teexec_dataset *ref = NULL;
    rw_ok(teexec_dataset_load_npz(path, &ref), path);
    double worst = 0, largest = 0;
    const char *worst_name = "";
    for (size_t i = 0; i < teexec_dataset_count(ref); i++) {
        const teexec_tensor *t = teexec_dataset_tensor(ref, i);
        double nrm, e = abs_l2(t, t, &nrm);
        (void)e;
        if (nrm > largest) largest = nrm;
    }
    for (size_t i = 0; i < teexec_dataset_count(ref); i++) {
        const char *pname = teexec_dataset_name(ref, i);
        const teexec_tensor *want = teexec_dataset_tensor(ref, i);
        const tx_param_source *s = NULL;
        for (size_t k = 0; k < n_src && !s; k++)
            if (!strcmp(src[k].original, pname)) s = &src[k];
        if (!s) fail_msg("%s: no lowered parameter holds %s", z->dir, pname);
        teexec_tensor *gl = NULL;
        rw_ok(teexec_trainer_grad(tr, s->lowered, &gl), s->lowered);
        tx_tensor back;
        rw_ok(tx_param_to_original(s, &gl->t, &back), "param_to_original");
        teexec_tensor *got = NULL;
        rw_ok(tx_tensor_to_public(&back, &got), "to_public");
        int32_t r = teexec_tensor_rank(got);
        assert_int_equal(r, teexec_tensor_rank(want));
        const int64_t *gd = teexec_tensor_dims(got), *wd = teexec_tensor_dims(want);
        if (r >= 1 && gd[0] > 1 && wd[0] == 1) {
            /* broadcast: the sum over the copies */
            uint64_t per = teexec_tensor_element_count(got) / (uint64_t)gd[0];
            float *v = teexec_tensor_data(got);
            for (int64_t b = 1; b < gd[0]; b++)
                for (uint64_t e = 0; e < per; e++) v[e] += v[(uint64_t)b * per + e];
            teexec_tensor *summed = NULL;
            rw_ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, r, wd, v, per * sizeof(float),
                                            &summed),
                  "sum");
            teexec_tensor_destroy(got);
            got = summed;
            gd = teexec_tensor_dims(got);
        }
        for (int32_t d = 0; d < r; d++) assert_int_equal(gd[d], wd[d]);
        double nw, diff = abs_l2(got, want, &nw);
        double e = nw < 1e-6 * largest ? diff / largest : rw_rel_l2(got, want);
        if (e > worst) {
            worst = e;
            worst_name = pname;
        }
        if (!(e <= TOL)) printf("  gradient of %s (lowered %s): rel-L2 %g\n", pname, s->lowered, e);
        teexec_tensor_destroy(got);
        teexec_tensor_destroy(gl);
    }
    printf("  %zu gradients vs PyTorch: worst rel-L2 %.3g (%s)\n", teexec_dataset_count(ref),
           worst, worst_name);
    if (!(worst <= TOL)) fail_msg("gradient of %s: rel-L2 %g", worst_name, worst);
    teexec_dataset_destroy(ref);
    tx_param_sources_free(src, n_src);
    teexec_trainer_destroy(tr);
    for (size_t i = 0; i < n; i++) {
        free((char *)names[i]);
        teexec_tensor_destroy(ts[i]);
    }
}

/* Every attention lowered: `layers` DotProductAttention nodes with these
 * attributes and nothing of the decomposed form left. */
static void check_attention(const zoo *z, size_t layers, int64_t heads, int64_t kv_heads,
                            int64_t causal, double scale, size_t n_inputs)
{
    assert_int_equal(declined(z, "DotProductAttention"), 0);
    assert_int_equal(te(z, "DotProductAttention"), layers);
    for (size_t k = 0; k < layers; k++) {
        const tx_rw_node *d = nth_te(z, "DotProductAttention", k);
        assert_int_equal(attr_i(d, "num_attention_heads"), heads);
        assert_int_equal(attr_i(d, "num_gqa_groups"), kv_heads);
        assert_int_equal(attr_i(d, "causal"), causal);
        assert_string_equal(attr_s(d, "qkv_format"), "bshd");
        const tx_rw_attr *s = attr(d, "scale");
        assert_non_null(s);
        if (!(fabs(s->f - scale) <= 1e-6 * scale)) fail_msg("scale %g, want %g", s->f, scale);
        assert_int_equal(d->n_inputs, n_inputs);
    }
    static const char *const gone[] = {"Softmax", "IsNaN", "Attention", "Trilu"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++) assert_int_equal(std_op(z, gone[i]), 0);
}

/* No product left outside te.ops: every FLOP of the export is in a te.ops
 * op (MatMul/Gemm/Conv between constants only, folded shape arithmetic,
 * would not count; none is left in these exports). */
static void check_no_products(const zoo *z)
{
    assert_int_equal(std_op(z, "MatMul"), 0);
    assert_int_equal(std_op(z, "Gemm"), 0);
    assert_int_equal(std_op(z, "Conv"), 0);
    assert_int_equal(declined(z, "Linear"), 0);
}

#define F32(v) ((double)(float)(v))
static const double SCALE8 = 0.35355339059327373; /* 1/sqrt(8): head dim 8 everywhere */

/* ---- decoders, dynamo exporter ------------------------------------------ */

/* Llama: q·s and kᵀ·s with s = 8^-1/4, kᵀ through Reshape [b*h, s, d] /
 * Transpose(0,2,1) / Reshape of the 5-D GQA repeat, the [b,1,s,s] causal
 * mask initializer, the IsNaN guard; RoPE, RMSNorm, SwiGLU, untied head. */
static void test_llama_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("llama_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 2, 1, s4 * s4, 3);
    check_no_products(&z);
    assert_int_equal(te(&z, "RotaryEmbedding"), 4);
    assert_int_equal(te(&z, "RMSNorm"), 5);
    assert_int_equal(te(&z, "SwiGLU"), 2);
    assert_int_equal(te(&z, "Embedding"), 1);
    assert_int_equal(te(&z, "Linear"), 13); /* q k v o gate|up down x2 + head */
    assert_int_equal(std_op(&z, "Transpose"), 0);
    assert_int_equal(std_op(&z, "Expand"), 0);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    check_grads(&z);
    zoo_free(&z);
}

/* Qwen2: q/k/v biases before the heads split, GQA, tied head. */
static void test_qwen2_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("qwen2_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 2, 1, s4 * s4, 3);
    check_no_products(&z);
    assert_int_equal(te(&z, "Bias"), 6);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    check_grads(&z);
    zoo_free(&z);
}

/* GPT-2: Conv1D's Gemm transB=0 on [b*s, K] views (dropped: the Linears
 * read [b, s, K]), decomposed tanh GELU (Pow/Mul/Tanh), the attention
 * output viewed as [b*s, h*d], and the tied head: the Linear reads the
 * embedding table, the head's transposed copy val_278 is gone and its
 * gradient is the table's, transposed. */
static void test_gpt2_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("gpt2_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 4, 1, s4 * s4, 3);
    check_no_products(&z);
    assert_int_equal(te(&z, "GELU"), 2);
    assert_string_equal(attr_s(nth_te(&z, "GELU", 0), "approximate"), "tanh");
    assert_int_equal(std_op(&z, "Tanh"), 0);
    assert_int_equal(te(&z, "AddExtraInput"), 4);
    const tx_rw_node *emb = nth_te(&z, "Embedding", 0);
    const tx_rw_node *head = NULL;
    for (size_t k = 0; k < te(&z, "Linear"); k++) {
        const tx_rw_node *l = nth_te(&z, "Linear", k);
        if (!strcmp(attr_s(l, "weight_source"), "val_278")) head = l;
    }
    assert_non_null(head);
    assert_string_equal(head->inputs[1], emb->inputs[1]);
    assert_string_equal(head->inputs[1], "m.lm_head.weight");
    assert_string_equal(attr_s(head, "weight_layout"), "KN");
    size_t readers = 9;
    (void)tx_rw_consumers(z.g, "val_278", &readers);
    assert_int_equal(readers, 0); /* dropped when the model is written */
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    check_grads(&z); /* m.lm_head.weight and val_278: the whole tied gradient */
    zoo_free(&z);
}

/* OPT: q scaled by 1/sqrt(d) before its head Reshape (folded into the
 * attention), Gemm transB=1 Linears, ReLU, tied head. */
static void test_opt_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("opt_dynamo", &z);
    check_attention(&z, 2, 4, 4, 1, F32(SCALE8), 3);
    check_no_products(&z);
    assert_int_equal(std_op(&z, "Mul"), 0);
    assert_int_equal(te(&z, "ReLU"), 2);
    assert_int_equal(std_op(&z, "Relu"), 0);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    check_grads(&z);
    zoo_free(&z);
}

/* Gemma: one kv head, GeGLU (gelu_tanh(gate) * up: gate and up merged into
 * one Linear feeding GEGLU), the embedding times sqrt(h) (ConstantScale),
 * the (1 + w) RMSNorm gains folded by the exporters into initializers
 * (plain RMSNorm of those), tied head. */
static void test_gemma_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("gemma_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 1, 1, s4 * s4, 3);
    check_no_products(&z);
    assert_int_equal(te(&z, "GEGLU"), 2);
    assert_string_equal(attr_s(nth_te(&z, "GEGLU", 0), "approximate"), "tanh");
    assert_int_equal(std_op(&z, "Gelu"), 0);
    assert_int_equal(te(&z, "ConstantScale"), 1);
    const tx_rw_attr *sc = attr(nth_te(&z, "ConstantScale", 0), "scale");
    assert_non_null(sc);
    assert_true(fabs(sc->f - sqrt(32.0)) < 1e-6);
    assert_int_equal(te(&z, "RMSNorm"), 5);
    /* the first norm's gain is the folded 1 + w ("plus_one" in meta.json) */
    assert_string_equal(nth_te(&z, "RMSNorm", 0)->inputs[1], "add_4");
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    check_grads(&z);
    zoo_free(&z);
}

/* GPT-NeoX: the fused qkv Linear reshaped to [b, s, h, 3d] and split per
 * head (the Split now reads the bshd view: no Transpose left), partial
 * rotary (the first 4 of 8 channels: one RotaryEmbedding of the whole head
 * with [s, 4] angles, no Slice or Concat left), the parallel residual
 * x + attn(ln1(x)) + mlp(ln2(x)). */
static void test_gpt_neox_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("gpt_neox_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 4, 1, s4 * s4, 3);
    check_no_products(&z);
    assert_int_equal(std_op(&z, "Transpose"), 0);
    assert_int_equal(std_op(&z, "Slice"), 0);
    assert_int_equal(std_op(&z, "Concat"), 0);
    assert_int_equal(te(&z, "RotaryEmbedding"), 4);
    tx_tensor f;
    assert_true(tx_rw_constant(z.g, nth_te(&z, "RotaryEmbedding", 0)->inputs[1], &f));
    assert_int_equal(f.dims[0], 16);
    assert_int_equal(f.dims[1], 4);
    tx_tensor_release(&f);
    assert_int_equal(te(&z, "AddExtraInput"), 4);
    assert_int_equal(te(&z, "GELU"), 2);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    check_grads(&z);
    zoo_free(&z);
}

/* Phi: partial rotary on q/k in [b, h, s, d] (the op reads the bshd
 * projections), parallel attention and MLP, decomposed tanh GELU. */
static void test_phi_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("phi_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 4, 1, s4 * s4, 3);
    check_no_products(&z);
    assert_int_equal(std_op(&z, "Transpose"), 0);
    assert_int_equal(std_op(&z, "Slice"), 0);
    assert_int_equal(te(&z, "RotaryEmbedding"), 4);
    assert_int_equal(te(&z, "GELU"), 2);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    check_grads(&z);
    zoo_free(&z);
}

/* nanoGPT (SDPA with is_causal): an [s, s] causal mask initializer and no
 * IsNaN guard; 12 blocks. */
static void test_nanogpt12_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("nanogpt12_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 12, 4, 4, 1, s4 * s4, 3);
    check_no_products(&z);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    zoo_free(&z);
}

/* The opset-23 Attention op (bool mask, true = attend: causal) with its
 * GQA repeat of k and v, and RMSNormalization. The original does not run
 * on the CPU (neither op is a CPU standard op); the lowered graph does. */
static void test_llama_dynamo_op23(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("llama_dynamo_op23", &z);
    check_attention(&z, 2, 4, 2, 1, F32(SCALE8), 3);
    check_no_products(&z);
    assert_int_equal(te(&z, "RMSNorm"), 5);
    assert_int_equal(std_op(&z, "RMSNormalization"), 0);
    assert_int_equal(std_op(&z, "Expand"), 0);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    zoo_free(&z);
}

/* ---- encoders ------------------------------------------------------------ */

/* ViT: the patch-embedding Conv (stride = kernel) as a Linear over the
 * patches (its weight keeps its name, flattened, with weight_shape), no
 * mask (the exporter's all-zero [b,1,s,s] initializer). The original does
 * not run on the CPU (no Conv there); the lowered graph does, and the
 * patch weight's gradient comes back in the Conv's shape. */
static void test_vit_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("vit_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 4, 0, s4 * s4, 3);
    check_no_products(&z);
    const tx_rw_node *p = NULL;
    for (size_t k = 0; k < te(&z, "Linear"); k++) {
        const tx_rw_node *l = nth_te(&z, "Linear", k);
        if (attr(l, "weight_shape")) p = l;
    }
    assert_non_null(p);
    assert_string_equal(p->inputs[1], "m.embeddings.patch_embeddings.projection.weight");
    const tx_rw_attr *ws = attr(p, "weight_shape");
    assert_int_equal(ws->n_ints, 4);
    assert_int_equal(ws->ints[0], 32);
    assert_int_equal(ws->ints[1], 3);
    assert_int_equal(ws->ints[2], 4);
    assert_int_equal(ws->ints[3], 4);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    check_grads(&z);
    zoo_free(&z);
}

/* The value `v` is computed from the graph input `input` (through at most
 * `depth` producers). */
static bool reaches(tx_rw_graph *g, const char *v, const char *input, int depth)
{
    if (!strcmp(v, input)) return true;
    if (depth == 0) return false;
    int64_t p = tx_rw_producer(g, v, NULL);
    if (p < 0) return false;
    const tx_rw_node *n = tx_rw_node_at(g, (size_t)p);
    for (size_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i][0] && reaches(g, n->inputs[i], input, depth - 1)) return true;
    return false;
}

/* BERT (dynamo): the padding mask, written as Where(And(a constant
 * [1, 1, s, 1] bool, GatherND(Cast(attention_mask))), 0, finfo.min) of
 * shape [b, 1, s, s]: the DotProductAttention's float mask input. The CPU
 * backend has no GatherND, so neither the export nor its lowered graph runs
 * here (bert_torchscript checks the numbers of the same mask). */
static void test_bert_dynamo(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("bert_dynamo", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 4, 0, s4 * s4, 4);
    check_no_products(&z);
    for (size_t k = 0; k < 2; k++)
        assert_true(reaches(z.g, nth_te(&z, "DotProductAttention", k)->inputs[3],
                            "attention_mask", 8));
    assert_int_equal(te(&z, "Embedding"), 2); /* word and token-type tables */
    zoo_free(&z);
}

/* BERT (TorchScript): the padding mask Where(Expand(bool), 0, -inf) built
 * in the graph from attention_mask (its shape arithmetic unfolded: Shape,
 * Gather, Concat, ...); the lowered graph runs and matches PyTorch. The
 * planner does not type that unfolded arithmetic yet, so there is no
 * converted model to run. */
static void test_bert_torchscript(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("bert_torchscript", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 4, 0, s4 * s4, 4);
    check_no_products(&z);
    for (size_t k = 0; k < 2; k++)
        assert_true(reaches(z.g, nth_te(&z, "DotProductAttention", k)->inputs[3],
                            "attention_mask", 16));
    check_output(&z, z.low, "lowered");
    zoo_free(&z);
}

/* ---- TorchScript decoders -------------------------------------------------- */

/* nanoGPT (TorchScript): masked_fill(tril == 0, -inf) with the Trilu built
 * from Shape(q), and the scale (1/sqrt(d))^0.5 on q and kᵀ as Sqrt/Div/Cast
 * of Shape(q): the Shape readers become constants, the mask the causal
 * attribute. */
static void test_nanogpt12_torchscript(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("nanogpt12_torchscript", &z);
    double s4 = F32(sqrt(F32(1.0 / sqrt(8.0))));
    check_attention(&z, 12, 4, 4, 1, s4 * s4, 3);
    check_no_products(&z);
    assert_int_equal(std_op(&z, "Shape"), 0);
    assert_int_equal(std_op(&z, "Sqrt"), 0);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    zoo_free(&z);
}

/* GPT-2 (TorchScript): the decoder's all-ones attention mask built in the
 * graph (Flatten, Gather, And, Expand of constants) folds into the causal
 * attribute; tied head as a separate transposed initializer. */
static void test_gpt2_torchscript(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("gpt2_torchscript", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 4, 1, s4 * s4, 3);
    check_no_products(&z);
    assert_int_equal(std_op(&z, "Where"), 0);
    assert_int_equal(std_op(&z, "Expand"), 0);
    size_t readers = 9;
    (void)tx_rw_consumers(z.g, "onnx::MatMul_555", &readers);
    assert_int_equal(readers, 0);
    check_output(&z, z.low, "lowered");
    check_converted(&z);
    zoo_free(&z);
}

/* Llama (TorchScript): GQA as Unsqueeze/Expand/Reshape then
 * Transpose(0,1,3,2), the mask Where(Expand(bool), 0, -inf) of constants.
 * The rotary tables are computed in the graph (MatMul, Cos, Sin), which
 * the CPU backend does not run and the lowering does not fold: the RoPE
 * stays standard ops and nothing runs here until they fold at load. */
static void test_llama_torchscript(void **state)
{
    (void)state;
    zoo z;
    zoo_lower("llama_torchscript", &z);
    double s4 = F32(pow(8.0, -0.25));
    check_attention(&z, 2, 4, 2, 1, s4 * s4, 3);
    zoo_free(&z);
}

/* ---- every export ------------------------------------------------------------ */

/* Every export of the zoo ends with all its attention lowered (the other
 * tests check each form's details). */
static void test_every_export(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t layers;
    } all[] = {
        {"bert_dynamo", 2},          {"bert_torchscript", 2},     {"distilbert_dynamo", 2},
        {"distilbert_torchscript", 2}, {"electra_dynamo", 2},     {"electra_torchscript", 2},
        {"gemma_dynamo", 2},         {"gemma_torchscript", 2},    {"gpt2_dynamo", 2},
        {"gpt2_torchscript", 2},     {"gpt_neox_dynamo", 2},      {"gpt_neox_torchscript", 2},
        {"llama_dynamo", 2},         {"llama_dynamo_op23", 2},    {"llama_torchscript", 2},
        {"mistral_dynamo", 2},       {"mistral_torchscript", 2},  {"nanogpt12_dynamo", 12},
        {"nanogpt12_torchscript", 12}, {"opt_dynamo", 2},         {"opt_torchscript", 2},
        {"phi_dynamo", 2},           {"phi_torchscript", 2},      {"qwen2_dynamo", 2},
        {"qwen2_torchscript", 2},    {"roberta_dynamo", 2},       {"roberta_torchscript", 2},
        {"vit_dynamo", 2},           {"vit_torchscript", 2},
    };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        zoo z;
        zoo_lower(all[i].name, &z);
        if (declined(&z, "DotProductAttention") || te(&z, "DotProductAttention") != all[i].layers)
            fail_msg("%s: %zu attention blocks lowered of %zu", all[i].name,
                     te(&z, "DotProductAttention"), all[i].layers);
        zoo_free(&z);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_dynamo),      cmocka_unit_test(test_qwen2_dynamo),
        cmocka_unit_test(test_gpt2_dynamo),       cmocka_unit_test(test_opt_dynamo),
        cmocka_unit_test(test_gemma_dynamo),      cmocka_unit_test(test_gpt_neox_dynamo),
        cmocka_unit_test(test_phi_dynamo),        cmocka_unit_test(test_nanogpt12_dynamo),
        cmocka_unit_test(test_llama_dynamo_op23), cmocka_unit_test(test_vit_dynamo),
        cmocka_unit_test(test_bert_dynamo),       cmocka_unit_test(test_bert_torchscript),
        cmocka_unit_test(test_nanogpt12_torchscript), cmocka_unit_test(test_gpt2_torchscript),
        cmocka_unit_test(test_llama_torchscript), cmocka_unit_test(test_every_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
