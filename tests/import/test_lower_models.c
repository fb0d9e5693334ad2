/* End to end: each PyTorch-exported model in models/ is lowered with every
 * pass (tx_lower), emitted and loaded back; its CPU outputs must match the
 * original's (rel-L2 < 1e-6), and one training step's gradients of every
 * original initializer, mapped back through tx_param_sources /
 * tx_param_to_original, must match the original model's (rel-L2 < 1e-6).
 * Prints the te.ops each lowered model ends up with and checks the counts
 * in the table below. */
#include "rw_util.h"

#include <sys/stat.h>

#include "exec/tensor_internal.h"
#include "import/lower.h"

/* ---- what each model must lower to ------------------------------------------
 * One row per (model, te.ops op, count). Each pass's owner keeps the rows of
 * the ops their pass makes; a model's te.ops that no row mentions are only
 * printed. Rows of a model whose folder does not exist are skipped.
 * To add your ops: append rows in your section. */
static const struct {
    const char *model, *op;
    size_t count;
} expected_ops[] = {
    /* lower_linear.c (MatMul/Gemm + Add -> Linear + Bias) */
    {"mlp", "Linear", 2},
    {"mlp", "Bias", 2},
    {"mlp_tanh", "Linear", 2},
    {"mlp_tanh", "Bias", 2},
    {"mlp_opset14", "Linear", 2},
    {"mlp_opset14", "Bias", 2},
    {"gpt2_block", "Linear", 4},
    {"gpt2_block", "Bias", 4},
    /* lower_norm.c, lower_act.c, lower_residual.c: add rows here */
    {"mlp", "LayerNorm", 1},
    {"mlp", "GELU", 1},
    {"mlp", "AddExtraInput", 1},
    {"mlp_tanh", "LayerNorm", 1},
    {"mlp_tanh", "GELU", 1},
    {"mlp_tanh", "AddExtraInput", 1},
    {"mlp_opset14", "LayerNorm", 1},
    {"mlp_opset14", "GELU", 1},
    {"mlp_opset14", "AddExtraInput", 1},
    {"gpt2_block", "LayerNorm", 2},
    {"gpt2_block", "GELU", 1},
    {"gpt2_block", "AddExtraInput", 2},
    {"gpt2_block", "MakeExtraOutput", 1},
    {"llama_block", "RMSNorm", 2},
    {"llama_block", "Linear", 6}, /* q, k, v, o, gate|up merged, down */
    {"llama_block", "SwiGLU", 1},
    {"llama_block", "SiLU", 0},
    {"llama_block", "AddExtraInput", 2},
    {"llama_block", "MakeExtraOutput", 1},
    /* lower_attention.c: add rows here */
    {"gpt2_block", "DotProductAttention", 1},
    {"llama_block", "DotProductAttention", 1},
    /* lower_rope.c */
    {"llama_block", "RotaryEmbedding", 2},
};

static bool model_dir(const char *name, char *dir, size_t size)
{
    snprintf(dir, size, "%s/models/%s", rw_source_root(), name);
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    struct stat sb;
    return stat(path, &sb) == 0;
}

static size_t count_live(tx_rw_graph *g, const char *domain, const char *op)
{
    size_t n = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (!nd->dead && strcmp(nd->domain, domain) == 0 && strcmp(nd->op_type, op) == 0) n++;
    }
    return n;
}

static void print_te_ops(const char *name, tx_rw_graph *g, const tx_lower_report *r)
{
    printf("%s lowers to:", name);
    /* Each distinct te.ops op once, with its count, in first-seen order. */
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        if (nd->dead || strcmp(nd->domain, "te.ops") != 0) continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const tx_rw_node *o = tx_rw_node_at(g, j);
            seen = !o->dead && strcmp(o->domain, "te.ops") == 0 && strcmp(o->op_type, nd->op_type) == 0;
        }
        if (!seen) printf(" %s x%zu", nd->op_type, count_live(g, "te.ops", nd->op_type));
    }
    size_t std = 0;
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        const tx_rw_node *nd = tx_rw_node_at(g, i);
        std += !nd->dead && nd->domain[0] == '\0';
    }
    printf("; %zu standard nodes left\n", std);
    for (size_t i = 0; i < r->n_notes; i++)
        if (!r->notes[i].lowered)
            printf("  not lowered: %s at \"%s\": %s\n", r->notes[i].pattern, r->notes[i].node,
                   r->notes[i].reason);
}

/* Gradients of every trainable initializer after one MSE step towards
 * target = original output * 0.5 (deterministic, nonzero). */
static teexec_trainer *train_step(const teexec_model *m, const rw_inputs *in,
                                  const teexec_tensor *target)
{
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.loss = TEEXEC_LOSS_MSE;
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    teexec_trainer *tr = NULL;
    rw_ok(teexec_trainer_create(m, &o, &tr), "trainer_create");
    const char *names[RW_MAX_IO + 1];
    const teexec_tensor *ts[RW_MAX_IO + 1];
    for (size_t i = 0; i < in->n; i++) {
        names[i] = in->names[i];
        ts[i] = in->t[i];
    }
    names[in->n] = "target";
    ts[in->n] = target;
    rw_ok(teexec_trainer_step(tr, in->n + 1, names, ts, NULL), "trainer_step");
    return tr;
}

static void check_model(const char *name)
{
    char dir[4096];
    if (!model_dir(name, dir, sizeof dir)) {
        printf("%s: no model folder, skipped\n", name);
        return;
    }
    char path[4096 + 64], inputs[4096 + 64];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    snprintf(inputs, sizeof inputs, "%s/inputs", dir);
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_file(path, NULL, &m), path);
    tx_rw_graph *g = NULL;
    rw_ok(tx_rw_from_ir(m->ir, &g), "from_ir");
    tx_lower_report *r = NULL;
    rw_ok(tx_lower(g, NULL, &r), "tx_lower");
    print_te_ops(name, g, r);
    for (size_t k = 0; k < sizeof expected_ops / sizeof expected_ops[0]; k++) {
        if (strcmp(expected_ops[k].model, name) != 0) continue;
        size_t got = count_live(g, "te.ops", expected_ops[k].op);
        if (got != expected_ops[k].count)
            fail_msg("%s: %zu te.ops %s, expected %zu", name, got, expected_ops[k].op,
                     expected_ops[k].count);
    }
    teexec_model *lm = rw_emit_load(g);

    /* Forward. */
    rw_inputs in;
    rw_inputs_npy(m, inputs, &in);
    teexec_tensor *oa[RW_MAX_IO], *ob[RW_MAX_IO];
    size_t na = 0, nb = 0;
    rw_ok(rw_run(m, &in, oa, &na), "original run");
    rw_ok(rw_run(lm, &in, ob, &nb), "lowered run");
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        double e = rw_rel_l2(ob[i], oa[i]);
        printf("  output %zu: rel-L2 %.3g\n", i, e);
        if (!(e < 1e-6)) fail_msg("%s: output %zu rel-L2 %g", name, i, e);
    }

    /* Gradients. */
    teexec_tensor *target = NULL;
    rw_ok(teexec_tensor_cast(oa[0], teexec_tensor_dtype(oa[0]), &target), "target copy");
    float *tv = teexec_tensor_data(target);
    assert_int_equal(teexec_tensor_dtype(target), TEEXEC_DTYPE_FLOAT);
    for (uint64_t i = 0; i < teexec_tensor_element_count(target); i++) tv[i] *= 0.5f;
    teexec_trainer *ta = train_step(m, &in, target);
    teexec_trainer *tb = train_step(lm, &in, target);
    tx_param_source *src = NULL;
    size_t n_src = 0;
    rw_ok(tx_param_sources(lm->ir->graph, &src, &n_src), "param_sources");
    size_t compared = 0, bad = 0;
    for (size_t p = 0; p < teexec_trainer_param_count(ta); p++) {
        const char *pname = teexec_trainer_param_name(ta, p);
        teexec_tensor *ga = NULL;
        rw_ok(teexec_trainer_grad(ta, pname, &ga), pname);
        const tx_param_source *s = NULL;
        for (size_t k = 0; k < n_src && !s; k++)
            if (strcmp(src[k].original, pname) == 0) s = &src[k];
        if (!s) {
            /* A constant the patterns folded into an op's formula. */
            printf("  %s (%llu elements) is not a parameter of the lowered model\n", pname,
                   (unsigned long long)teexec_tensor_element_count(ga));
            assert_true(teexec_tensor_element_count(ga) <= 1);
            teexec_tensor_destroy(ga);
            continue;
        }
        teexec_tensor *gb = NULL;
        rw_ok(teexec_trainer_grad(tb, s->lowered, &gb), s->lowered);
        tx_tensor back;
        rw_ok(tx_param_to_original(s, &gb->t, &back), "param_to_original");
        teexec_tensor *bt = NULL;
        rw_ok(tx_tensor_to_public(&back, &bt), "to_public");
        assert_int_equal(teexec_tensor_rank(bt), teexec_tensor_rank(ga));
        for (int32_t d = 0; d < teexec_tensor_rank(ga); d++)
            assert_int_equal(teexec_tensor_dims(bt)[d], teexec_tensor_dims(ga)[d]);
        double e = rw_rel_l2(bt, ga);
        if (!(e < 1e-6)) {
            double za = 0, zb = 0;
            for (uint64_t i = 0; i < teexec_tensor_element_count(ga); i++) {
                za += rw_elem(ga, i) * rw_elem(ga, i);
                zb += rw_elem(bt, i) * rw_elem(bt, i);
            }
            printf("  gradient of %s (lowered %s): rel-L2 %g (|original| %g, |lowered| %g)\n",
                   pname, s->lowered, e, sqrt(za), sqrt(zb));
            bad++;
        }
        compared++;
        teexec_tensor_destroy(bt);
        teexec_tensor_destroy(gb);
        teexec_tensor_destroy(ga);
    }
    printf("  %zu of %zu parameter gradients match\n", compared - bad, compared);
    if (bad) fail_msg("%s: %zu gradients differ", name, bad);
    assert_true(compared >= 4);
    tx_param_sources_free(src, n_src);
    teexec_trainer_destroy(ta);
    teexec_trainer_destroy(tb);
    teexec_tensor_destroy(target);
    rw_outputs_free(oa, na);
    rw_outputs_free(ob, nb);
    rw_inputs_free(&in);
    tx_lower_report_free(r);
    teexec_model_destroy(lm);
    tx_rw_free(g);
    teexec_model_destroy(m);
}

#define MODEL_TEST(fn, name)      \
    static void fn(void **state) \
    {                            \
        (void)state;             \
        check_model(name);       \
    }
MODEL_TEST(test_mlp, "mlp")
MODEL_TEST(test_mlp_tanh, "mlp_tanh")
MODEL_TEST(test_mlp_opset14, "mlp_opset14")
MODEL_TEST(test_gpt2_block, "gpt2_block")
MODEL_TEST(test_llama_block, "llama_block")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_mlp_tanh),
        cmocka_unit_test(test_mlp_opset14),
        cmocka_unit_test(test_gpt2_block),
        cmocka_unit_test(test_llama_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
