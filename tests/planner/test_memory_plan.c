/* Tests for the memory plan (tx_plan_memory) and its offset assignment:
 * peaks of hand-made plans computed by hand, no two tensors with
 * overlapping lifetimes overlapping in the arena (every pair, every te.ops
 * sample model and the GPT-2 block, lowered), the GPT-2 block's training
 * peak well under the no-reuse sum, quantized saved copies, and the
 * allocator itself on hand-made lifetimes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan_test_util.h"

static const tx_mem_tensor *find_tensor(const tx_memory_plan *mp, const char *name)
{
    for (size_t i = 0; i < mp->n_tensors; i++)
        if (!strcmp(mp->tensors[i].name, name)) return &mp->tensors[i];
    return NULL;
}

/* Every pair of tensors live at a common step occupies disjoint bytes;
 * offsets aligned; everything inside the arena. */
static void check_no_overlap(const tx_memory_plan *mp)
{
    assert_true(mp->alignment >= 256);
    for (size_t i = 0; i < mp->n_tensors; i++) {
        const tx_mem_tensor *a = &mp->tensors[i];
        assert_int_equal(a->offset % mp->alignment, 0);
        assert_true(a->start <= a->end);
        assert_true(a->offset + a->bytes <= mp->arena_bytes);
        for (size_t j = i + 1; j < mp->n_tensors; j++) {
            const tx_mem_tensor *b = &mp->tensors[j];
            if (!a->bytes || !b->bytes) continue;
            bool time = a->start <= b->end && b->start <= a->end;
            bool space = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
            if (time && space)
                fail_msg("\"%s\" [%d,%d] @%zu+%zu overlaps \"%s\" [%d,%d] @%zu+%zu", a->name, a->start, a->end,
                         a->offset, a->bytes, b->name, b->start, b->end, b->offset, b->bytes);
        }
    }
    /* the arena holds at least the peak, never more than the sum */
    assert_true(mp->arena_bytes >= mp->peak_training);
    assert_true(mp->peak_training <= mp->sum_bytes);
}

/* te_mlp: 0 MakeExtraOutput, 1 LayerNorm, 2 Linear, 3 Bias, 4 GELU,
 * 5 Linear, 6 Bias, 7 AddExtraInput; x [2,8,32] float (16 rows). */
static tx_fuser_plan *mlp_chain(const pt_model *m, bool training, const tx_plan_kernel *fwd, int32_t nf)
{
    tx_fuser_plan *p = pt_plan_new(m->g, training, NULL);
    assert_non_null(p);
    int32_t nodes[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    /* x needs no gradient: the first op needing backward is the LayerNorm
     * (its parameters) */
    pt_group_add(p, m->g, TX_GROUP_CHAIN, nodes, 8, training ? 1 : 8, fwd, nf, NULL, 0);
    return p;
}

static void hand_made_inference_peak(void **state)
{
    (void)state;
    pt_model m;
    assert_null(pt_model_load("models/te_mlp/model.onnx", false, &m));
    tx_plan_request r = pt_request(&m, "none", "cpu", false);
    tx_fuser_plan *p = mlp_chain(&m, false, NULL, 0);
    assert_null(tx_plan_memory(m.g, &r, p));
    const tx_memory_plan *mp = &p->memory;
    /* 9 activations: 6 of [16,32] (2048 B), 3 of [16,128] (8192 B); steps
     * 0..7 one per op. Live at step 3 (Bias 1): the residual fork (2048),
     * linear_3 and bias_4 (8192 each) = 18432, the most. */
    assert_int_equal(mp->n_tensors, 9);
    assert_int_equal(mp->sum_bytes, 6 * 2048 + 3 * 8192);
    assert_int_equal(mp->peak_inference, 18432);
    assert_int_equal(mp->peak_training, 18432);
    /* largest-first, lowest offset reaches the peak exactly here (worked
     * through by hand: linear_3 @0, bias_4 @8192, gelu_5 @0, the fork
     * @16384, ...) */
    assert_int_equal(mp->arena_bytes, 18432);
    assert_int_equal(find_tensor(mp, "makeextraoutput_1_extra")->offset, 16384);
    assert_int_equal(find_tensor(mp, "bias_4")->offset, 8192);
    assert_int_equal(mp->param_bytes, 33664); /* parameters only, no grads */
    check_no_overlap(mp);
    pt_plan_free(p);
    pt_model_free(&m);
}

static void fused_values_do_not_exist(void **state)
{
    (void)state;
    pt_model m;
    assert_null(pt_model_load("models/te_mlp/model.onnx", false, &m));
    tx_plan_request r = pt_request(&m, "none", "cpu", false);
    tx_plan_kernel fwd[6] = {{TX_FUSION_NONE, 0, 1}, {TX_FUSION_NONE, 1, 1},
                             {TX_FUSION_FWD_LINEAR_BIAS_ACT, 2, 2}, {TX_FUSION_NONE, 4, 1},
                             {TX_FUSION_FWD_LINEAR_BIAS_ACT, 5, 2}, {TX_FUSION_NONE, 7, 1}};
    tx_fuser_plan *p = mlp_chain(&m, false, fwd, 6);
    assert_null(tx_plan_memory(m.g, &r, p));
    const tx_memory_plan *mp = &p->memory;
    assert_int_equal(mp->n_tensors, 7);
    assert_null(find_tensor(mp, "linear_3"));
    assert_null(find_tensor(mp, "linear_6"));
    assert_non_null(find_tensor(mp, "bias_4"));
    /* step 3 (GELU): fork 2048 + bias_4 8192 + gelu_5 8192 */
    assert_int_equal(mp->peak_inference, 18432);
    assert_int_equal(mp->sum_bytes, 5 * 2048 + 2 * 8192);
    check_no_overlap(mp);
    pt_plan_free(p);
    pt_model_free(&m);
}

static void hand_made_training_peak(void **state)
{
    (void)state;
    pt_model m;
    assert_null(pt_model_load("models/te_mlp/model.onnx", false, &m));
    tx_plan_request r = pt_request(&m, "none", "cpu", true);
    tx_fuser_plan *p = mlp_chain(&m, true, NULL, 0);
    assert_null(tx_plan_memory(m.g, &r, p));
    const tx_memory_plan *mp = &p->memory;
    /* Forward steps 0..7, backward 8 (Add) .. 14 (LayerNorm); the fork
     * needs no backward. Saved: LayerNorm keeps its input (the fork's main
     * output) to step 14 plus mu and rsigma (16 floats each); Linear 1 keeps
     * layernorm_2 to 13, GELU bias_4 to 11, Linear 2 gelu_5 to 10. Grads:
     * y [8,8], bias_7 [8,9], linear_6 [9,10], gelu_5 [10,11], bias_4
     * [11,12], linear_3 [12,13], layernorm_2 [13,14]. At step 10: fork y
     * 2048, layernorm_2 2048, bias_4 8192, gelu_5 8192, mu+rsigma 128,
     * grad linear_6 2048, grad gelu_5 8192 = 30848. */
    assert_int_equal(mp->peak_training, 30848);
    assert_int_equal(mp->peak_inference, 18432);
    assert_int_equal(mp->n_tensors, 9 + 2 + 7);
    assert_int_equal(mp->sum_bytes, 36864 + 128 + 32768);
    assert_int_equal(mp->param_bytes, 2 * 33664);
    const tx_mem_tensor *ln = find_tensor(mp, "layernorm_2");
    assert_non_null(ln);
    assert_int_equal(ln->start, 1);
    assert_int_equal(ln->end, 13);
    const tx_mem_tensor *mu = find_tensor(mp, "layernorm_2.mu");
    assert_non_null(mu);
    assert_int_equal(mu->kind, TX_MEM_SAVED);
    assert_int_equal(mu->bytes, 64);
    assert_int_equal(mu->end, 14);
    const tx_mem_tensor *g5 = find_tensor(mp, "grad:gelu_5");
    assert_non_null(g5);
    assert_int_equal(g5->kind, TX_MEM_GRAD);
    assert_int_equal(g5->start, 10);
    assert_int_equal(g5->end, 11);
    assert_null(find_tensor(mp, "grad:makeextraoutput_1_y")); /* x needs no grad */
    /* what each tensor holds, for executors placing their buffers by it */
    int32_t v_ln = -1, v_gelu = -1;
    for (size_t v = 0; v < m.g->n_values; v++) {
        if (!strcmp(m.g->values[v].name, "layernorm_2")) v_ln = (int32_t)v;
        if (!strcmp(m.g->values[v].name, "gelu_5")) v_gelu = (int32_t)v;
    }
    assert_int_equal(ln->value, v_ln);
    assert_int_equal(ln->node, -1);
    assert_int_equal(g5->value, v_gelu);
    assert_int_equal(mu->value, -1);
    assert_int_equal(mu->node, m.g->values[v_ln].producer);
    assert_int_equal(mu->aux, 0); /* LayerNorm's aux: mu, rsigma */
    assert_int_equal(find_tensor(mp, "layernorm_2.rsigma")->aux, 1);
    /* the residual fork is not saved by anyone: forward lifetime only */
    assert_int_equal(find_tensor(mp, "makeextraoutput_1_extra")->end, 7);
    check_no_overlap(mp);
    pt_plan_free(p);
    pt_model_free(&m);
}

static void quantized_saved_copies(void **state)
{
    (void)state;
    pt_model m;
    assert_null(pt_model_load("models/te_mlp/model.onnx", false, &m));
    tx_plan_request r = pt_request(&m, "fp8-current", "sm_90", true);
    tx_fuser_plan *p = mlp_chain(&m, true, NULL, 0);
    assert_null(tx_plan_quantization(m.g, &r, p));
    assert_null(tx_plan_memory(m.g, &r, p));
    const tx_memory_plan *mp = &p->memory;
    /* Linear 1 saves x columnwise in FP8: 16 x 32 bytes + one scale_inv,
     * from its forward (2) to its backward (13); layernorm_2 itself is no
     * longer kept for it. */
    const tx_mem_tensor *qx = find_tensor(mp, "linear_3.x (quantized, columnwise)");
    assert_non_null(qx);
    assert_int_equal(qx->bytes, 16 * 32 + 4);
    assert_int_equal(qx->start, 2);
    assert_int_equal(qx->end, 13);
    const tx_mem_tensor *qw = find_tensor(mp, "linear_3.weight (quantized, columnwise)");
    assert_non_null(qw);
    assert_int_equal(qw->bytes, 128 * 32 + 4);
    assert_int_equal(qw->value, -1);
    assert_true(qw->node >= 0 && !strcmp(m.g->nodes[qw->node].label, "linear_3"));
    assert_int_equal(qw->aux, -1);
    assert_int_equal(find_tensor(mp, "layernorm_2")->end, 2);
    /* sm_90: a GEMM workspace per GEMM kernel, one step each */
    const tx_mem_tensor *ws = find_tensor(mp, "linear_3:forward GEMM workspace");
    assert_non_null(ws);
    assert_int_equal(ws->bytes, TX_GEMM_WORKSPACE_SM90);
    assert_int_equal(ws->start, ws->end);
    assert_non_null(find_tensor(mp, "linear_3:forward quantized operands"));
    assert_non_null(find_tensor(mp, "linear_3:backward quantized operands"));
    check_no_overlap(mp);
    pt_plan_free(p);
    pt_model_free(&m);
}

/* ---- every sample model ------------------------------------------------------ */

static const char *te_models[] = {"models/te_mlp/model.onnx", "models/te_gpt2_block/model.onnx",
                                  "models/te_llama_block/model.onnx", "models/te_moe_block/model.onnx"};

static void plan_and_check(const pt_model *m, const char *recipe, const char *device, bool training,
                           bool full_build)
{
    tx_plan_request r = pt_request(m, recipe, device, training);
    bool needs[8] = {true, false, false, false, false, false, false, false};
    r.input_needs_grad = needs;
    r.n_inputs = 1;
    if (full_build) {
        tx_fuser_plan *fp = NULL;
        teexec_status *st = tx_fuser_plan_build(m->g, &r, &fp);
        if (st) fail_msg("%s %s: %s", recipe, device, teexec_status_message(st));
        check_no_overlap(&fp->memory);
        assert_true(fp->memory.n_tensors > 0);
        tx_fuser_plan_free(fp);
        return;
    }
    tx_fuser_plan *p = pt_plan_each_node(m->g, training, device);
    assert_non_null(p);
    teexec_status *st = tx_plan_quantization(m->g, &r, p);
    if (!st) st = tx_plan_memory(m->g, &r, p);
    if (st) fail_msg("%s %s: %s", recipe, device, teexec_status_message(st));
    check_no_overlap(&p->memory);
    assert_true(p->memory.n_tensors > 0);
    if (!training) assert_int_equal(p->memory.peak_inference, p->memory.peak_training);
    pt_plan_free(p);
}

static void no_overlap_on_every_model(void **state)
{
    (void)state;
    static const char *recipes[] = {"none", "fp8-delayed", "fp8-current:hybrid", "fp8-block", "mxfp8",
                                    "nvfp4"};
    static const char *devices[] = {"cpu", "sm_90", "sm_100"};
    for (size_t i = 0; i < sizeof te_models / sizeof te_models[0]; i++) {
        pt_model m;
        teexec_status *st = pt_model_load(te_models[i], false, &m);
        if (st) fail_msg("%s: %s", te_models[i], teexec_status_message(st));
        for (size_t rc = 0; rc < sizeof recipes / sizeof recipes[0]; rc++)
            for (size_t d = 0; d < 3; d++)
                for (int t = 0; t < 2; t++) {
                    plan_and_check(&m, recipes[rc], devices[d], t, false);
                    plan_and_check(&m, recipes[rc], devices[d], t, true);
                }
        pt_model_free(&m);
    }
}

static void lowered_gpt2_block_plans(void **state)
{
    (void)state;
    pt_model m;
    teexec_status *st = pt_model_load("models/gpt2_block/model.onnx", true, &m);
    if (st) fail_msg("gpt2_block: %s", teexec_status_message(st));
    plan_and_check(&m, "none", "cpu", true, false);
    plan_and_check(&m, "none", "cpu", true, true);
    plan_and_check(&m, "mxfp8", "sm_100", true, true);
    plan_and_check(&m, "none", "cpu", false, true);
    pt_model_free(&m);
}

/* Training peak against the no-reuse sum, with the planner's own groups and
 * fusions. */
static void gpt2_training_peak_under_60_percent(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        bool lower;
    } models[] = {{"models/te_gpt2_block/model.onnx", false}, {"models/gpt2_block/model.onnx", true}};
    for (size_t i = 0; i < 2; i++) {
        pt_model m;
        teexec_status *st = pt_model_load(models[i].path, models[i].lower, &m);
        if (st) fail_msg("%s: %s", models[i].path, teexec_status_message(st));
        tx_plan_request r = pt_request(&m, "none", "cpu", true);
        bool needs[1] = {true};
        r.input_needs_grad = needs;
        r.n_inputs = 1;
        tx_fuser_plan *fp = NULL;
        st = tx_fuser_plan_build(m.g, &r, &fp);
        if (st) fail_msg("%s: %s", models[i].path, teexec_status_message(st));
        const tx_memory_plan *mp = &fp->memory;
        if (!(mp->peak_training * 10 < mp->sum_bytes * 6))
            fail_msg("%s: training peak %zu is not under 60%% of %zu", models[i].path, mp->peak_training,
                     mp->sum_bytes);
        assert_true(mp->arena_bytes * 10 < mp->sum_bytes * 6);
        assert_true(mp->peak_inference < mp->peak_training);
        check_no_overlap(mp);
        tx_fuser_plan_free(fp);
        pt_model_free(&m);
    }
}

/* ---- the allocator alone -------------------------------------------------------- */

static void allocator_reuses_and_aligns(void **state)
{
    (void)state;
    /* a [0,1] 1000 B, b [1,2] 300 B, c [2,3] 1000 B, d [0,3] 10 B */
    tx_mem_tensor t[4] = {{"a", TX_MEM_ACTIVATION, 1000, 0, 1, 0, -1, -1, -1},
                          {"b", TX_MEM_ACTIVATION, 300, 1, 2, 0, -1, -1, -1},
                          {"c", TX_MEM_ACTIVATION, 1000, 2, 3, 0, -1, -1, -1},
                          {"d", TX_MEM_WORKSPACE, 10, 0, 3, 0, -1, -1, -1}};
    tx_memory_plan mp;
    memset(&mp, 0, sizeof mp);
    mp.tensors = t;
    mp.n_tensors = 4;
    assert_null(tx_memory_assign_offsets(&mp));
    /* a @0; c (no overlap with a) @0; b overlaps both -> @1024; d -> @1536 */
    assert_int_equal(t[0].offset, 0);
    assert_int_equal(t[2].offset, 0);
    assert_int_equal(t[1].offset, 1024);
    assert_int_equal(t[3].offset, 1536);
    assert_int_equal(mp.arena_bytes, 1792);
    assert_int_equal(mp.alignment, 256);
    assert_int_equal(tx_memory_peak(t, 4, 0, 3), 1310);
    /* a gap between two placed tensors is used when it fits */
    tx_mem_tensor u[3] = {{"big1", TX_MEM_ACTIVATION, 512, 0, 5, 0, -1, -1, -1},
                          {"big2", TX_MEM_ACTIVATION, 512, 0, 1, 0, -1, -1, -1},
                          {"late", TX_MEM_ACTIVATION, 256, 2, 3, 0, -1, -1, -1}};
    mp.tensors = u;
    mp.n_tensors = 3;
    mp.alignment = 0;
    assert_null(tx_memory_assign_offsets(&mp));
    assert_int_equal(u[0].offset, 0);
    assert_int_equal(u[1].offset, 512);
    assert_int_equal(u[2].offset, 512); /* big2 is dead by step 2 */
    assert_int_equal(mp.arena_bytes, 1024);
}

static void unknown_shapes_are_an_error(void **state)
{
    (void)state;
    pt_model m;
    assert_null(pt_model_load("models/te_mlp/model.onnx", false, &m));
    tx_plan_request r = pt_request(&m, "none", "cpu", false);
    m.vals[m.g->nodes[3].outputs[0]].shape_known = false;
    tx_fuser_plan *p = mlp_chain(&m, false, NULL, 0);
    teexec_status *st = tx_plan_memory(m.g, &r, p);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "bias_4"));
    teexec_status_destroy(st);
    assert_int_equal(p->memory.n_tensors, 0);
    pt_plan_free(p);
    pt_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_made_inference_peak),
        cmocka_unit_test(fused_values_do_not_exist),
        cmocka_unit_test(hand_made_training_peak),
        cmocka_unit_test(quantized_saved_copies),
        cmocka_unit_test(allocator_reuses_and_aligns),
        cmocka_unit_test(unknown_shapes_are_an_error),
        cmocka_unit_test(no_overlap_on_every_model),
        cmocka_unit_test(lowered_gpt2_block_plans),
        cmocka_unit_test(gpt2_training_peak_under_60_percent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
