/* Tests for the fusion passes and the catalog (planner/fuse_*.c): each
 * fusion matching, each declining with its specific reason, forward and
 * backward layouts chosen independently over overlapping ops, joint fusions
 * in both layouts, HYBRID refused by the E4M3-only BackwardActivationBias,
 * and the text/JSON outputs being deterministic. Graphs are built in memory
 * (plan_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "plan_fixture.h"

#include <stdlib.h>

/* fork, ln, fc1 (H->FF), b1, act, fc2 (FF->H), b2, add(res): x [B, S, H]. */
static void mlp_model(fx *f, int B, int S, int H, int FF, const char *act, const char *approx)
{
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "mlp");
    char dims[64];
    snprintf(dims, sizeof dims, "%d,%d,%d", B, S, H);
    mb_input(g, "x", FX_FLOAT, dims);
    mb_output(g, "y", FX_FLOAT, dims);
    char d[32];
    snprintf(d, sizeof d, "%d", H);
    fx_param(g, "ln_w", d);
    fx_param(g, "ln_b", d);
    snprintf(d, sizeof d, "%d,%d", FF, H);
    fx_param(g, "fc1_w", d);
    snprintf(d, sizeof d, "%d", FF);
    fx_param(g, "fc1_b", d);
    snprintf(d, sizeof d, "%d,%d", H, FF);
    fx_param(g, "fc2_w", d);
    snprintf(d, sizeof d, "%d", H);
    fx_param(g, "fc2_b", d);
    fx_te(g, "fork", "MakeExtraOutput", "x", "h0,res");
    fx_te(g, "ln", "LayerNorm", "h0,ln_w,ln_b", "h1");
    fx_te(g, "fc1", "Linear", "h1,fc1_w", "h2");
    fx_te(g, "b1", "Bias", "h2,fc1_b", "h3");
    Onnx__NodeProto *a = fx_te(g, "act", act, "h3", "h4");
    if (approx) mb_attr_string(a, "approximate", approx);
    fx_te(g, "fc2", "Linear", "h4,fc2_w", "h5");
    fx_te(g, "b2", "Bias", "h5,fc2_b", "h6");
    fx_te(g, "add", "AddExtraInput", "h6,res", "y");
    fx_open_model(f, m);
}

static char lbuf[1024];

static const char *fwd(const fx *f)
{
    const tx_plan_group *grp = fx_group_of(f, "fc1");
    return fx_layout(f, grp, grp->forward, grp->n_forward, lbuf, sizeof lbuf);
}

static const char *bwd(const fx *f)
{
    const tx_plan_group *grp = fx_group_of(f, "fc1");
    return fx_layout(f, grp, grp->backward, grp->n_backward, lbuf, sizeof lbuf);
}

static void expect_reason(const fx *f, tx_fusion_id id, const char *node, const char *needle)
{
    const char *r = fx_decline(f, id, node);
    if (!r) fail_msg("no decline of %s at %s", tx_fusion_info_of(id)->name, node);
    if (!strstr(r, needle)) fail_msg("reason at %s lacks \"%s\": %s", node, needle, r);
}

static void bf16_inference_fuses_gemm_epilogues(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 32, 64, 256, "GELU", NULL);
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16"});
    assert_int_equal(f.plan->n_groups, 1);
    assert_string_equal(fwd(&f), "unfused(fork) unfused(ln) ForwardLinearBiasActivation(fc1 b1 act) "
                                 "ForwardLinearBiasAdd(fc2 b2 add)");
    assert_int_equal(fx_group_of(&f, "fc1")->n_backward, 0);
    expect_reason(&f, TX_FUSION_FWD_NORM_QUANTIZE, "ln", "recipe none: no quantized output to write");
    fx_free(&f);
    mb_free_all();
}

static void fp32_declines_bias_epilogue(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 32, 64, 256, "GELU", NULL);
    fx_plan(&f, &(fx_req){.recipe = "none"});
    assert_string_equal(fwd(&f), "unfused(fork) unfused(ln) unfused(fc1) unfused(b1) unfused(act) "
                                 "ForwardLinearBiasAdd(fc2 b2 add)");
    expect_reason(&f, TX_FUSION_FWD_LINEAR_BIAS_ACT, "fc1", "compute dtype float");
    expect_reason(&f, TX_FUSION_FWD_LINEAR_BIAS_ACT, "fc1", "bias epilogue");
    fx_free(&f);
    mb_free_all();
}

static void erf_gelu_stays_out_of_the_epilogue(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 32, 64, 256, "GELU", "none");
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16"});
    assert_string_equal(fwd(&f), "unfused(fork) unfused(ln) ForwardLinearBiasActivation(fc1 b1) "
                                 "unfused(act) ForwardLinearBiasAdd(fc2 b2 add)");
    fx_free(&f);
    mb_free_all();
}

/* mxfp8 on sm_100: forward and backward layouts differ over the same ops
 * (b1 is in ForwardLinearBiasActivation forward and in
 * BackwardActivationBias backward). */
static void mxfp8_layouts_are_independent(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 32, 64, 256, "GELU", NULL);
    bool grad_x = true;
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_100", .training = true,
                          .input_needs_grad = &grad_x, .n_inputs = 1});
    assert_string_equal(fwd(&f), "unfused(fork) ForwardNormQuantize(ln) "
                                 "ForwardLinearBiasActivation(fc1 b1) ForwardActivationQuantize(act) "
                                 "ForwardLinearBiasAdd(fc2 b2 add)");
    expect_reason(&f, TX_FUSION_FWD_LINEAR_BIAS_ACT, "fc1",
                  "recipe mxfp8: GELU act must hand Linear fc2 its input in MXFP8, which the GEMM "
                  "epilogue cannot write");
    assert_int_equal(fx_group_of(&f, "fc1")->first_op_requiring_backward, 0);
    assert_string_equal(bwd(&f), "BackwardAddNorm(fork ln) unfused(fc1) BackwardActivationBias(b1 act) "
                                 "unfused(fc2) BackwardBiasQuantize(b2) unfused(add)");
    fx_free(&f);
    mb_free_all();
}

static void hybrid_refuses_e4m3_only_backward_activation_bias(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 32, 64, 256, "GELU", NULL);
    fx_plan(&f, &(fx_req){.recipe = "mxfp8:hybrid", .device = "sm_100", .training = true});
    expect_reason(&f, TX_FUSION_BWD_ACT_BIAS, "b1",
                  "recipe mxfp8:hybrid: Linear fc1's grad_output is E5M2 (HYBRID) and the fused "
                  "dact+dbias kernel writes MXFP8 grads in E4M3 only");
    /* never reinterpreted: the bias falls back to the general quantizer,
     * which writes E5M2 */
    assert_string_equal(bwd(&f), "unfused(ln) unfused(fc1) BackwardBiasQuantize(b1) unfused(act) "
                                 "unfused(fc2) BackwardBiasQuantize(b2) unfused(add)");
    for (size_t i = 0; i < f.plan->n_groups; i++)
        for (int32_t k = 0; k < f.plan->groups[i].n_backward; k++)
            assert_int_not_equal(f.plan->groups[i].backward[k].fusion, TX_FUSION_BWD_ACT_BIAS);
    /* per-tensor FP8 on Hopper (native FP8): the fused kernel writes
     * either grad format, so fp8-current (HYBRID, TE's default) and
     * fp8-current:e4m3 both fuse it */
    const char *fp8[] = {"fp8-current", "fp8-current:hybrid", "fp8-current:e4m3", "fp8-delayed"};
    for (size_t i = 0; i < sizeof fp8 / sizeof fp8[0]; i++) {
        fx_plan(&f, &(fx_req){.recipe = fp8[i], .device = "sm_90", .training = true});
        assert_null(fx_decline(&f, TX_FUSION_BWD_ACT_BIAS, "b1"));
        if (!strstr(bwd(&f), "BackwardActivationBias(b1 act)"))
            fail_msg("%s: backward layout %s", fp8[i], bwd(&f));
    }
    fx_free(&f);
    mb_free_all();
}

static void no_native_gemm_declines_handoffs(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 32, 64, 256, "GELU", NULL);
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_90", .training = true});
    expect_reason(&f, TX_FUSION_FWD_NORM_QUANTIZE, "ln",
                  "device sm_90 has no native MXFP8 GEMM: the exact emulation quantizes the operands itself");
    expect_reason(&f, TX_FUSION_BWD_ACT_BIAS, "b1", "device sm_90 has no native MXFP8 GEMM");
    assert_string_equal(fwd(&f), "unfused(fork) unfused(ln) ForwardLinearBiasActivation(fc1 b1) "
                                 "unfused(act) ForwardLinearBiasAdd(fc2 b2 add)");
    fx_free(&f);
    mb_free_all();
}

static void shape_divisibility_is_named(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 8, 64, 256, "GELU", NULL); /* 16 rows */
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_100", .training = true});
    expect_reason(&f, TX_FUSION_FWD_NORM_QUANTIZE, "ln",
                  "MXFP8 needs the rows (16) and columns (64) of Linear fc1's input to be "
                  "multiples of 32: rows=16");
    expect_reason(&f, TX_FUSION_BWD_ACT_BIAS, "b1", "Linear fc1's grad_output");
    /* 16 rows are fine for NVFP4's 16-blocks; its RHT needs its own kernel */
    fx_plan(&f, &(fx_req){.recipe = "nvfp4", .device = "sm_100", .training = true});
    expect_reason(&f, TX_FUSION_FWD_NORM_QUANTIZE, "ln", "nvfp4 with RHT");
    expect_reason(&f, TX_FUSION_BWD_ACT_BIAS, "b1", "not NVFP4");
    fx_plan(&f, &(fx_req){.recipe = "nvfp4,rht=0", .device = "sm_100", .training = true});
    assert_null(fx_decline(&f, TX_FUSION_FWD_NORM_QUANTIZE, "ln"));
    fx_free(&f);
    mb_free_all();
}

/* teexec's own backward fusions under recipe none: the dgrad's dGELU+dbias
 * epilogue where the device has it (CUDA, bf16/fp16, not deterministic,
 * 8..8192 in features in multiples of 8), dact+dbias everywhere else. */
static void dgelu_epilogue_or_dact_dbias(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 32, 64, 256, "GELU", NULL);
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .device = "sm_90", .training = true});
    assert_string_equal(bwd(&f), "unfused(ln) unfused(fc1) BackwardLinearDGeluBias(b1 act fc2) "
                                 "unfused(b2) unfused(add)");
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .device = "cpu", .training = true});
    expect_reason(&f, TX_FUSION_BWD_LINEAR_DGELU_BIAS, "b1", "device cpu");
    assert_string_equal(bwd(&f), "unfused(ln) unfused(fc1) BackwardDactDbias(b1 act) unfused(fc2) "
                                 "unfused(b2) unfused(add)");
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .device = "sm_90", .training = true,
                          .deterministic = true});
    expect_reason(&f, TX_FUSION_BWD_LINEAR_DGELU_BIAS, "b1", "deterministic mode");
    assert_string_equal(bwd(&f), "unfused(ln) unfused(fc1) BackwardDactDbias(b1 act) unfused(fc2) "
                                 "unfused(b2) unfused(add)");
    fx_plan(&f, &(fx_req){.recipe = "none", .device = "sm_90", .training = true});
    expect_reason(&f, TX_FUSION_BWD_LINEAR_DGELU_BIAS, "b1", "compute dtype float");
    /* a quantized recipe hands fc1 its grad from BackwardActivationBias */
    fx_plan(&f, &(fx_req){.recipe = "fp8-current", .device = "sm_90", .training = true});
    assert_string_equal(bwd(&f), "unfused(ln) unfused(fc1) BackwardActivationBias(b1 act) "
                                 "unfused(fc2) BackwardBiasQuantize(b2) unfused(add)");
    /* ... or, where that declines (no native MXFP8 on sm_90), dact+dbias */
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_90", .training = true});
    expect_reason(&f, TX_FUSION_BWD_LINEAR_DGELU_BIAS, "b1", "recipe mxfp8");
    assert_string_equal(bwd(&f), "unfused(ln) unfused(fc1) BackwardDactDbias(b1 act) unfused(fc2) "
                                 "unfused(b2) unfused(add)");
    fx_free(&f);
    mlp_model(&f, 2, 32, 64, 8200, "GELU", NULL);
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .device = "sm_90", .training = true});
    expect_reason(&f, TX_FUSION_BWD_LINEAR_DGELU_BIAS, "b1", "above 8192");
    fx_free(&f);
    mlp_model(&f, 2, 32, 64, 260, "GELU", NULL);
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .device = "sm_90", .training = true});
    expect_reason(&f, TX_FUSION_BWD_LINEAR_DGELU_BIAS, "b1", "multiple of 8");
    fx_free(&f);
    /* erf GELU: no epilogue, dact+dbias */
    mlp_model(&f, 2, 32, 64, 256, "GELU", "none");
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .device = "sm_90", .training = true});
    assert_string_equal(bwd(&f), "unfused(ln) unfused(fc1) BackwardDactDbias(b1 act) unfused(fc2) "
                                 "unfused(b2) unfused(add)");
    fx_free(&f);
    mb_free_all();
}

/* fork, fc, b, add(res): forward ForwardLinearBiasAdd(fc b add), backward
 * BackwardLinearAdd(fork fc): the two share fc. */
static void linear_add_forward_and_backward_overlap(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "residual");
    mb_input(g, "x", FX_FLOAT, "4,32,64");
    mb_output(g, "y", FX_FLOAT, "4,32,64");
    fx_param(g, "w", "64,64");
    fx_param(g, "bias", "64");
    fx_te(g, "fork", "MakeExtraOutput", "x", "h0,res");
    fx_te(g, "fc", "Linear", "h0,w", "h1");
    fx_te(g, "b", "Bias", "h1,bias", "h2");
    fx_te(g, "add", "AddExtraInput", "h2,res", "y");
    fx f;
    fx_open_model(&f, m);
    bool grad_x = true;
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .training = true, .input_needs_grad = &grad_x,
                          .n_inputs = 1});
    const tx_plan_group *grp = fx_group_of(&f, "fc");
    char b2[256];
    assert_string_equal(fx_layout(&f, grp, grp->forward, grp->n_forward, lbuf, sizeof lbuf),
                        "unfused(fork) ForwardLinearBiasAdd(fc b add)");
    assert_string_equal(fx_layout(&f, grp, grp->backward, grp->n_backward, b2, sizeof b2),
                        "BackwardLinearAdd(fork fc) unfused(b) unfused(add)");
    /* fp8-current on Hopper: the bias also quantizes fc's grad */
    fx_plan(&f, &(fx_req){.recipe = "fp8-current", .device = "sm_90", .training = true,
                          .input_needs_grad = &grad_x, .n_inputs = 1});
    grp = fx_group_of(&f, "fc");
    assert_string_equal(fx_layout(&f, grp, grp->backward, grp->n_backward, b2, sizeof b2),
                        "BackwardLinearAdd(fork fc) BackwardBiasQuantize(b) unfused(add)");
    fx_free(&f);
    mb_free_all();
}

/* fc1 (frozen, x needs no grad), scale, add(r needs grad), fc2, b2:
 * backward starts at add; the Linear-scale window before it is declined. */
static void frozen_prefix_runs_no_backward(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "frozen");
    mb_input(g, "x", FX_FLOAT, "2,16,32");
    mb_input(g, "r", FX_FLOAT, "2,16,32");
    mb_output(g, "y", FX_FLOAT, "2,16,32");
    fx_param(g, "w1", "32,32");
    fx_param(g, "w2", "32,32");
    fx_param(g, "bias", "32");
    Onnx__NodeProto *s = fx_te(g, "sc", "ConstantScale", "h1", "h2");
    fx_te(g, "fc1", "Linear", "x,w1", "h1");
    /* keep node order topological: fc1 first */
    g->node[0] = g->node[1];
    g->node[1] = s;
    mb_attr_float(s, "scale", 0.5f);
    fx_te(g, "add", "AddExtraInput", "h2,r", "h3");
    fx_te(g, "fc2", "Linear", "h3,w2", "h4");
    fx_te(g, "b2", "Bias", "h4,bias", "y");
    fx f;
    fx_open_model(&f, m);
    bool grads[2] = {false, true};
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .training = true, .params_frozen = true,
                          .input_needs_grad = grads, .n_inputs = 2});
    const tx_plan_group *grp = fx_group_of(&f, "fc1");
    assert_int_equal(grp->n_nodes, 5);
    assert_int_equal(grp->first_op_requiring_backward, 2);
    expect_reason(&f, TX_FUSION_BWD_LINEAR_SCALE, "fc1",
                  "Linear fc1 weight is frozen and x needs no grad: no backward runs");
    assert_string_equal(fx_layout(&f, grp, grp->backward, grp->n_backward, lbuf, sizeof lbuf),
                        "unfused(add) unfused(fc2) unfused(b2)");
    /* the forward is unaffected: Linear, scale, add accumulate */
    assert_string_equal(fx_layout(&f, grp, grp->forward, grp->n_forward, lbuf, sizeof lbuf),
                        "ForwardLinearScaleAdd(fc1 sc add) ForwardLinearBiasActivation(fc2 b2)");
    /* trainable weights: everything runs backward, and Linear+scale fuses */
    fx_plan(&f, &(fx_req){.recipe = "none,dtype=bf16", .training = true});
    grp = fx_group_of(&f, "fc1");
    assert_int_equal(grp->first_op_requiring_backward, 0);
    assert_string_equal(fx_layout(&f, grp, grp->backward, grp->n_backward, lbuf, sizeof lbuf),
                        "BackwardLinearScale(fc1 sc) unfused(add) unfused(fc2) unfused(b2)");
    fx_free(&f);
    mb_free_all();
}

/* fc1 (64 -> 256), swiglu, fc2 (128 -> 64) on 128 tokens. */
static void dense_mlp_joint(void **state)
{
    (void)state;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "dense");
    mb_input(g, "x", FX_FLOAT, "2,64,64");
    mb_output(g, "y", FX_FLOAT, "2,64,64");
    fx_param(g, "w1", "256,64");
    fx_param(g, "w2", "64,128");
    fx_te(g, "fc1", "Linear", "x,w1", "h1");
    fx_te(g, "swiglu", "SwiGLU", "h1", "h2");
    fx_te(g, "fc2", "Linear", "h2,w2", "y");
    fx f;
    fx_open_model(&f, m);
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_100", .training = true,
                          .deterministic = true});
    const tx_plan_group *grp = fx_group_of(&f, "fc1");
    assert_int_equal(grp->n_joint, 1);
    assert_string_equal(fwd(&f), "DenseMLP(fc1 swiglu fc2)");
    assert_string_equal(bwd(&f), "DenseMLP(fc1 swiglu fc2)");
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_90", .training = true});
    expect_reason(&f, TX_FUSION_DENSE_MLP, "fc1", "device sm_90 has no block-scaled");
    assert_string_equal(fwd(&f), "unfused(fc1) unfused(swiglu) unfused(fc2)");
    expect_reason(&f, TX_FUSION_FWD_ACT_QUANTIZE, "swiglu", "device sm_90 has no native MXFP8 GEMM");
    fx_plan(&f, &(fx_req){.recipe = "fp8-current", .device = "sm_100"});
    expect_reason(&f, TX_FUSION_DENSE_MLP, "fc1", "recipe fp8-current: the fused dense MLP runs in "
                                                  "MXFP8 or NVFP4 only");
    fx_free(&f);
    mb_free_all();
}

/* GroupedLinear (3 experts, 128 -> 256), ScaledSwiGLU, GroupedLinear (128 -> 128). */
static void grouped_mlp(fx *f, int tokens_per_batch)
{
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "moe");
    char d[64];
    snprintf(d, sizeof d, "2,%d,128", tokens_per_batch);
    mb_input(g, "x", FX_FLOAT, d);
    mb_input(g, "split", FX_INT64, "3");
    snprintf(d, sizeof d, "2,%d", tokens_per_batch);
    mb_input(g, "scales", FX_FLOAT, d);
    snprintf(d, sizeof d, "2,%d,128", tokens_per_batch);
    mb_output(g, "y", FX_FLOAT, d);
    const char *p1[] = {"w0", "w1", "w2"}, *pb[] = {"b0", "b1", "b2"}, *p2[] = {"v0", "v1", "v2"};
    for (int e = 0; e < 3; e++) {
        fx_param(g, p1[e], "256,128");
        fx_param(g, pb[e], "256");
        fx_param(g, p2[e], "128,128");
    }
    Onnx__NodeProto *n = fx_te(g, "gl1", "GroupedLinear", "x,split,w0,w1,w2,b0,b1,b2", "h1");
    mb_attr_int(n, "num_groups", 3);
    fx_te(g, "act", "ScaledSwiGLU", "h1,scales", "h2");
    n = fx_te(g, "gl2", "GroupedLinear", "h2,split,v0,v1,v2", "y");
    mb_attr_int(n, "num_groups", 3);
    mb_attr_int(n, "bias", 0);
    fx_open_model(f, m);
}

static void grouped_mlp_joint(void **state)
{
    (void)state;
    fx f;
    grouped_mlp(&f, 64);
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_100", .training = true});
    const tx_plan_group *grp = fx_group_of(&f, "gl1");
    assert_int_equal(f.plan->n_groups, 1);
    assert_int_equal(grp->n_extra_inputs, 2); /* split, scales */
    char b2[256];
    assert_string_equal(fx_layout(&f, grp, grp->forward, grp->n_forward, lbuf, sizeof lbuf),
                        "GroupedMLP(gl1 act gl2)");
    assert_string_equal(fx_layout(&f, grp, grp->backward, grp->n_backward, b2, sizeof b2),
                        "GroupedMLP(gl1 act gl2)");
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_100", .training = true,
                          .deterministic = true});
    expect_reason(&f, TX_FUSION_GROUPED_MLP, "gl1", "deterministic mode: the fused grouped MLP's "
                                                    "backward sums dscales and dbias with float atomics");
    /* inference has no atomics */
    fx_plan(&f, &(fx_req){.recipe = "nvfp4", .device = "sm_100", .deterministic = true});
    assert_int_equal(fx_group_of(&f, "gl1")->n_joint, 1);
    fx_plan(&f, &(fx_req){.recipe = "nvfp4,rht=0", .device = "sm_100"});
    expect_reason(&f, TX_FUSION_GROUPED_MLP, "gl1", "rht=0");
    fx_free(&f);

    grouped_mlp(&f, 40); /* 80 tokens */
    fx_plan(&f, &(fx_req){.recipe = "mxfp8", .device = "sm_100"});
    expect_reason(&f, TX_FUSION_GROUPED_MLP, "gl1", "token count to be a multiple of 128: tokens=80");
    fx_free(&f);
    mb_free_all();
}

static void outputs_are_deterministic(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 8, 64, 256, "GELU", NULL);
    fx_req r = {.recipe = "mxfp8:hybrid", .device = "sm_100", .training = true};
    fx_plan(&f, &r);
    char *t1 = NULL, *t2 = NULL, *j1 = NULL, *j2 = NULL, *plain = NULL;
    assert_null(tx_fuser_plan_text(f.plan, f.ir->graph, true, &t1));
    assert_null(tx_fuser_plan_json(f.plan, f.ir->graph, &j1));
    assert_null(tx_fuser_plan_text(f.plan, f.ir->graph, false, &plain));
    fx_plan(&f, &r);
    assert_null(tx_fuser_plan_text(f.plan, f.ir->graph, true, &t2));
    assert_null(tx_fuser_plan_json(f.plan, f.ir->graph, &j2));
    assert_string_equal(t1, t2);
    assert_string_equal(j1, j2);
    assert_non_null(strstr(t1, "E5M2 (HYBRID)"));
    assert_non_null(strstr(j1, "\"reason\": \"recipe mxfp8:hybrid: Linear fc1's grad_output is E5M2"));
    assert_non_null(strstr(t1, "plan: recipe mxfp8:hybrid, device sm_100, training"));
    assert_null(strstr(plain, "E5M2 (HYBRID)")); /* declines only with explain */
    assert_non_null(strstr(plain, "forward:"));
    free(t1);
    free(t2);
    free(j1);
    free(j2);
    free(plain);
    fx_free(&f);
    mb_free_all();
}

/* The catalog: one entry per id, in id order, each rule in its pass, and
 * the E4M3-only grad of BackwardActivationBias declared. */
static void catalog_is_consistent(void **state)
{
    (void)state;
    for (int i = 0; i < TX_FUSION_COUNT; i++) {
        const tx_fusion_info *fi = tx_fusion_info_of((tx_fusion_id)i);
        assert_non_null(fi);
        assert_int_equal(fi->id, i);
        assert_non_null(fi->name);
        assert_non_null(fi->pattern);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(fi->name, tx_fusion_info_of((tx_fusion_id)j)->name);
    }
    assert_null(tx_fusion_info_of(TX_FUSION_COUNT));
    const tx_fusion_info *bab = tx_fusion_info_of(TX_FUSION_BWD_ACT_BIAS);
    assert_true(bab->grad_e4m3_only);
    assert_false(bab->recipes & TX_RECIPE_BIT(TX_RECIPE_NONE));
    assert_false(bab->recipes & TX_RECIPE_BIT(TX_RECIPE_NVFP4));
    assert_false(tx_fusion_info_of(TX_FUSION_BWD_BIAS_QUANTIZE)->grad_e4m3_only);
    assert_false(tx_fusion_info_of(TX_FUSION_GROUPED_MLP)->deterministic);
    assert_int_equal(tx_fusion_info_of(TX_FUSION_BWD_LINEAR_ADD)->pass, TX_PASS_BACKWARD);
    assert_int_equal(tx_fusion_info_of(TX_FUSION_FWD_LINEAR_BIAS_ADD)->pass, TX_PASS_FORWARD);
    assert_int_equal(tx_fusion_info_of(TX_FUSION_DENSE_MLP)->pass, TX_PASS_JOINT);
}

/* fp32 declines ForwardLinearBiasActivation once, not once per shorter form. */
static void declines_are_not_repeated(void **state)
{
    (void)state;
    fx f;
    mlp_model(&f, 2, 32, 64, 256, "GELU", NULL);
    fx_plan(&f, &(fx_req){.recipe = "none"});
    int n = 0;
    for (size_t i = 0; i < f.plan->n_declines; i++)
        if (f.plan->declines[i].fusion == TX_FUSION_FWD_LINEAR_BIAS_ACT) n++;
    assert_int_equal(n, 1);
    fx_free(&f);
    mb_free_all();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bf16_inference_fuses_gemm_epilogues),
        cmocka_unit_test(fp32_declines_bias_epilogue),
        cmocka_unit_test(erf_gelu_stays_out_of_the_epilogue),
        cmocka_unit_test(mxfp8_layouts_are_independent),
        cmocka_unit_test(hybrid_refuses_e4m3_only_backward_activation_bias),
        cmocka_unit_test(no_native_gemm_declines_handoffs),
        cmocka_unit_test(shape_divisibility_is_named),
        cmocka_unit_test(dgelu_epilogue_or_dact_dbias),
        cmocka_unit_test(linear_add_forward_and_backward_overlap),
        cmocka_unit_test(frozen_prefix_runs_no_backward),
        cmocka_unit_test(dense_mlp_joint),
        cmocka_unit_test(grouped_mlp_joint),
        cmocka_unit_test(outputs_are_deterministic),
        cmocka_unit_test(catalog_is_consistent),
        cmocka_unit_test(declines_are_not_repeated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
