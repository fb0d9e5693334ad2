/*
 * fuse_catalog.c - the fusion catalog: one tx_fusion_info per fusion, and
 * per fusion a matcher over a group's op list and an unsupported_reason.
 * The passes (fuse_joint.c, fuse_forward.c, fuse_backward.c) walk the rules
 * in the order of tx_fusion_rules, which is TE's registration order
 * (reference te-ops.md 3.4), with teexec's hand-off fusions last.
 *
 * What our fused kernels support (the CPU ones now, the CUDA ones to come;
 * both must honour this table, and a plan never asks more of them):
 *
 *   GroupedMLP (joint)  GroupedLinear, ScaledSwiGLU|ScaledSReLU, GroupedLinear.
 *       MXFP8 or NVFP4 (NVFP4 with RHT), block-scaled tensor cores (sm_100
 *       up to sm_120), the same num_groups and the same split_sizes value,
 *       fc1/fc2 in and out features multiples of 64, fc1 out = 2 x fc2 in
 *       (SwiGLU) or fc2 in (SReLU), tokens a multiple of 128. Its backward
 *       sums dscales and fc1's dbias with float atomics: not deterministic.
 *   DenseMLP (joint)  Linear, [Bias,] SwiGLU|SReLU, Linear: the single-group
 *       form of the same kernels, same recipe/device/shape conditions; with
 *       a Bias its dbias uses float atomics (not deterministic).
 *   ForwardLinearBiasAdd  Linear, [Bias,] AddExtraInput: the GEMM accumulates
 *       into (a copy of) the extra tensor, beta = 1. Any recipe; the extra
 *       tensor must have the GEMM output's dtype. Deterministic.
 *   ForwardLinearBiasActivation  Linear, Bias[, GELU(tanh)|ReLU]: cuBLASLt
 *       BIAS / GELU_AUX_BIAS / RELU_AUX_BIAS epilogues, so compute dtype
 *       float16 or bfloat16 only, and the epilogue writes high precision: the
 *       activation is left out when its output must be quantized for a
 *       following Linear (recipe not none). Deterministic.
 *   ForwardLinearScaleAdd  Linear, ConstantScale, AddExtraInput: alpha = s,
 *       beta = 1. Any recipe; same dtype rule as ForwardLinearBiasAdd.
 *   ForwardNormQuantize / ForwardActivationQuantize  a norm or an
 *       (unscaled) activation writing the next Linear's input already
 *       quantized: FP8 per-tensor (E4M3), FP8 block (1x128), MXFP8 (1x32 and
 *       32x1), NVFP4 without RHT on the wgrad copy. Needs a recipe, a native
 *       GEMM for it (the exact emulation on other devices quantizes its
 *       operands itself) and a quantizable [rows, cols].
 *   BackwardLinearAdd  MakeExtraOutput, Linear: dgrad accumulates into the
 *       fork's grad (beta = 1). Any recipe, deterministic.
 *   BackwardLinearScale  Linear, ConstantScale: alpha = s. Any recipe.
 *   BackwardActivationBias  (Linear,) Bias, GELU|QGELU|ReLU|SReLU|SiLU: one
 *       kernel for dact, dbias (two-pass column sum: deterministic) and the
 *       quantized grad for the Linear before: per-tensor FP8 in E4M3 or
 *       E5M2 (HYBRID), MXFP8 in E4M3 only (mxfp8:hybrid, fp8-block and nvfp4
 *       are declined); needs a recipe and a native GEMM, like TE's.
 *   BackwardAddNorm  MakeExtraOutput, RMSNorm|LayerNorm: norm backward plus
 *       the fork's grad in one kernel. Any recipe, deterministic.
 *   BackwardBiasQuantize  (Linear,) Bias: dbias and the Linear's quantized
 *       grad_output in one pass; uses the general quantizers, so every recipe
 *       and both FP8 grad formats (E4M3, E5M2). Needs a native GEMM.
 *   BackwardLinearDGeluBias  Bias, GELU(tanh), Linear: the Linear's dgrad
 *       with cuBLASLt's DGELU_BGRAD epilogue writes the Bias's input grad
 *       and dbias, as TE's LayerNormMLP does. CUDA only, recipe none,
 *       compute dtype bf16/fp16, the Linear's in features a multiple of 8
 *       and at most 8192; not in deterministic mode (cuBLASLt's bias
 *       reduction order).
 *   BackwardDactDbias  Bias, an elementwise activation: dact and dbias
 *       (two-pass column sum: deterministic) in one pass, the same bits as
 *       the two unfused kernels; where no quantized grad is handed over.
 *       Any recipe, both devices.
 *
 * Ownership: all tables are static. Thread-safety: immutable, pure.
 */
#include "planner/plan_internal.h"

#include <stdio.h>
#include <string.h>

#define ALL TX_RECIPES_ALL
#define QUANTIZED (ALL & ~TX_RECIPE_BIT(TX_RECIPE_NONE))
#define MX_NV (TX_RECIPE_BIT(TX_RECIPE_MXFP8) | TX_RECIPE_BIT(TX_RECIPE_NVFP4))
/* the recipes BackwardActivationBias's kernel writes grads for */
#define FP8_MX_GRADS (TX_RECIPE_BIT(TX_RECIPE_FP8_DELAYED) | TX_RECIPE_BIT(TX_RECIPE_FP8_CURRENT) \
                      | TX_RECIPE_BIT(TX_RECIPE_MXFP8))

static const tx_fusion_info infos[TX_FUSION_COUNT] = {
    {TX_FUSION_NONE, "unfused", TX_PASS_FORWARD, "any one basic op", "the op's own kernel", ALL,
     true, false, false, false},
    {TX_FUSION_GROUPED_MLP, "GroupedMLP", TX_PASS_JOINT,
     "GroupedLinear ScaledSwiGLU|ScaledSReLU GroupedLinear",
     "grouped FC1 GEMM + bias + scaled activation + quantize, grouped FC2 GEMM; backward "
     "FC2 dgrad + dactivation + dscales in one kernel (private saved layout)", MX_NV, false, false,
     true, false},
    {TX_FUSION_DENSE_MLP, "DenseMLP", TX_PASS_JOINT, "Linear [Bias] SwiGLU|SReLU Linear",
     "single-group form of GroupedMLP: FC1 GEMM + bias + activation + quantize, FC2 GEMM", MX_NV,
     false, false, true, false},
    {TX_FUSION_FWD_NORM_QUANTIZE, "ForwardNormQuantize", TX_PASS_FORWARD,
     "LayerNorm|RMSNorm (Linear)", "normalisation writing the next Linear's quantized input",
     QUANTIZED, true, false, true, false},
    {TX_FUSION_FWD_LINEAR_BIAS_ACT, "ForwardLinearBiasActivation", TX_PASS_FORWARD,
     "Linear Bias [GELU|ReLU]", "GEMM with bias (and activation) epilogue", ALL, true, false, false, false},
    {TX_FUSION_FWD_LINEAR_BIAS_ADD, "ForwardLinearBiasAdd", TX_PASS_FORWARD,
     "Linear [Bias] AddExtraInput", "GEMM (+ bias) accumulating into the extra input", ALL, true,
     false, false, false},
    {TX_FUSION_FWD_LINEAR_SCALE_ADD, "ForwardLinearScaleAdd", TX_PASS_FORWARD,
     "Linear ConstantScale AddExtraInput", "GEMM with alpha = scale accumulating into the extra input",
     ALL, true, false, false, false},
    {TX_FUSION_FWD_ACT_QUANTIZE, "ForwardActivationQuantize", TX_PASS_FORWARD,
     "activation (Linear)", "activation writing the next Linear's quantized input", QUANTIZED, true,
     false, true, false},
    {TX_FUSION_BWD_LINEAR_ADD, "BackwardLinearAdd", TX_PASS_BACKWARD, "MakeExtraOutput Linear",
     "dgrad GEMM accumulating into the fork's grad", ALL, true, false, false, false},
    {TX_FUSION_BWD_LINEAR_SCALE, "BackwardLinearScale", TX_PASS_BACKWARD, "Linear ConstantScale",
     "dgrad and wgrad GEMMs with alpha = scale", ALL, true, false, false, false},
    {TX_FUSION_BWD_ACT_BIAS, "BackwardActivationBias", TX_PASS_BACKWARD,
     "(Linear) Bias GELU|QGELU|ReLU|SReLU|SiLU",
     "dactivation + dbias + quantize the Linear's grad_output in one kernel", FP8_MX_GRADS,
     true, true, true, false},
    {TX_FUSION_BWD_ADD_NORM, "BackwardAddNorm", TX_PASS_BACKWARD, "MakeExtraOutput RMSNorm|LayerNorm",
     "norm backward adding the fork's grad", ALL, true, false, false, false},
    {TX_FUSION_BWD_BIAS_QUANTIZE, "BackwardBiasQuantize", TX_PASS_BACKWARD, "(Linear) Bias",
     "dbias + quantize the Linear's grad_output in one pass", QUANTIZED, true, false, true, false},
    {TX_FUSION_BWD_LINEAR_DGELU_BIAS, "BackwardLinearDGeluBias", TX_PASS_BACKWARD,
     "Bias GELU(tanh) Linear",
     "the Linear's dgrad GEMM writes the GELU's and the Bias's grads (cuBLASLt DGELU_BGRAD "
     "epilogue)", TX_RECIPE_BIT(TX_RECIPE_NONE), false, false, false, true},
    {TX_FUSION_BWD_DACT_DBIAS, "BackwardDactDbias", TX_PASS_BACKWARD,
     "Bias GELU|QGELU|ReLU|SReLU|SiLU|...", "dactivation + dbias in one pass, grads in high precision",
     ALL, true, false, false, false},
};

const tx_fusion_info *tx_fusion_info_of(tx_fusion_id id)
{
    if ((int)id < 0 || id >= TX_FUSION_COUNT) return NULL;
    return &infos[id];
}

/* ---- small helpers ------------------------------------------------------ */

static tx_te_op_id op_at(const tx_fuse_ctx *c, int32_t i)
{
    return c->grp->ops[i];
}

static bool free_at(const tx_fuse_ctx *c, int32_t i)
{
    return i >= 0 && i < c->grp->n_nodes && !c->taken[i];
}

static bool is_op(const tx_fuse_ctx *c, int32_t i, tx_te_op_id id)
{
    return i >= 0 && i < c->grp->n_nodes && c->grp->ops[i] == id;
}

static const char *opname(const tx_fuse_ctx *c, int32_t i)
{
    return tx_te_schema(op_at(c, i))->name;
}

static const char *label(const tx_fuse_ctx *c, int32_t i)
{
    return tx_fuse_node(c, i)->label;
}

static bool is_linear(tx_te_op_id id)
{
    return id == TX_TE_LINEAR || id == TX_TE_GROUPED_LINEAR;
}

/* Op families come from the schema's class bits (te_schema.h). */
static bool is_norm(tx_te_op_id id) { return tx_te_op_is(id, TX_TE_CLASS_NORM); }

/* The activations a forward hand-off (activation + quantize for the next
 * Linear) covers: every unscaled one but the soft-capped SiTU family, which
 * the hand-off kernels do not evaluate. */
static bool is_plain_activation(tx_te_op_id id)
{
    return tx_te_op_is_unscaled_act(id) && tx_te_schema(id)->act_cap != TX_TE_CAP_SOFTCAP;
}

static const char *recipe_str(const tx_fuse_ctx *c, char *buf, size_t size)
{
    return tx_recipe_name(&c->req->recipe, buf, size);
}

static const char *format_name(tx_recipe_kind k)
{
    switch (k) {
    case TX_RECIPE_FP8_DELAYED:
    case TX_RECIPE_FP8_CURRENT: return "FP8";
    case TX_RECIPE_FP8_BLOCK: return "FP8 block-scaled";
    case TX_RECIPE_MXFP8: return "MXFP8";
    case TX_RECIPE_NVFP4: return "NVFP4";
    default: return "unquantized";
    }
}

/* The value's shape when known: rows = product of all but the last dim. */
static bool rows_cols(const tx_fuse_ctx *c, int32_t v, int64_t *rows, int64_t *cols)
{
    const tx_infer_value *iv = tx_plan_val(c->req, v);
    if (!iv || !iv->shape_known || iv->shape.rank < 1) return false;
    int64_t r = 1;
    for (int32_t d = 0; d + 1 < iv->shape.rank; d++) {
        if (iv->shape.dims[d] < 0) return false;
        if (__builtin_mul_overflow(r, iv->shape.dims[d], &r)) return false;
    }
    *rows = r;
    *cols = iv->shape.dims[iv->shape.rank - 1];
    return *cols >= 0;
}

static int32_t main_in(const tx_fuse_ctx *c, int32_t i)
{
    const tx_ir_node *n = tx_fuse_node(c, i);
    return n->n_inputs ? n->inputs[0] : -1;
}

static int32_t main_out(const tx_fuse_ctx *c, int32_t i)
{
    const tx_ir_node *n = tx_fuse_node(c, i);
    return n->n_outputs ? n->outputs[0] : -1;
}

/* The first weight of a Linear/GroupedLinear op: [N, K]. */
static int32_t weight_value(const tx_fuse_ctx *c, int32_t i)
{
    const tx_ir_node *n = tx_fuse_node(c, i);
    size_t ps = tx_plan_param_start(tx_te_schema(op_at(c, i)));
    return ps < n->n_inputs ? n->inputs[ps] : -1;
}

/* The dtype the kernels compute in: the recipe's, else the op's output's. */
static teexec_dtype compute_dtype(const tx_fuse_ctx *c, int32_t i)
{
    if (c->req->recipe.compute_dtype != TEEXEC_DTYPE_UNDEFINED) return c->req->recipe.compute_dtype;
    const tx_infer_value *iv = tx_plan_val(c->req, main_out(c, i));
    if (iv && iv->dtype != TEEXEC_DTYPE_UNDEFINED) return iv->dtype;
    return c->g->values[main_out(c, i)].dtype;
}

/* Does the device run the recipe's GEMMs natively? */
static bool native_gemm(const tx_plan_request *req)
{
    const tx_device_caps *d = &req->device;
    switch (req->recipe.kind) {
    case TX_RECIPE_FP8_DELAYED:
    case TX_RECIPE_FP8_CURRENT: return d->fp8_gemm;
    case TX_RECIPE_FP8_BLOCK: return d->fp8_block_gemm || d->mx_gemm;
    case TX_RECIPE_MXFP8:
    case TX_RECIPE_NVFP4: return d->mx_gemm;
    default: return true;
    }
}

/* Multiple both dims of a quantized GEMM operand must be (TE's
 * is_quantizable / test gating): FP8 16 (cuBLAS leading dims), block 128,
 * MXFP8 32, NVFP4 16. */
static int64_t quant_multiple(tx_recipe_kind k)
{
    switch (k) {
    case TX_RECIPE_FP8_BLOCK: return 128;
    case TX_RECIPE_MXFP8: return 32;
    case TX_RECIPE_FP8_DELAYED:
    case TX_RECIPE_FP8_CURRENT:
    case TX_RECIPE_NVFP4: return 16;
    default: return 1;
    }
}

/* Writes why value v ("what") cannot be quantized in the recipe, or
 * returns false. */
static bool not_quantizable(const tx_fuse_ctx *c, int32_t v, const char *what, char *why)
{
    tx_recipe_kind k = c->req->recipe.kind;
    int64_t m = quant_multiple(k), rows, cols;
    if (!rows_cols(c, v, &rows, &cols)) {
        snprintf(why, TX_REASON_MAX, "the shape of %s is not known at plan time: %s needs its rows "
                 "and columns to be multiples of %lld", what, format_name(k), (long long)m);
        return true;
    }
    if (rows % m == 0 && cols % m == 0) return false;
    snprintf(why, TX_REASON_MAX, "%s needs the rows (%lld) and columns (%lld) of %s to be multiples "
             "of %lld: %s=%lld", format_name(k), (long long)rows, (long long)cols, what,
             (long long)m, rows % m ? "rows" : "columns", (long long)(rows % m ? rows : cols));
    return true;
}

static bool no_native_gemm(const tx_fuse_ctx *c, char *why)
{
    if (native_gemm(c->req)) return false;
    snprintf(why, TX_REASON_MAX, "device %s has no native %s GEMM: the exact emulation quantizes "
             "the operands itself", c->req->device.name, format_name(c->req->recipe.kind));
    return true;
}

static bool no_recipe(const tx_fuse_ctx *c, char *why)
{
    if (c->req->recipe.kind != TX_RECIPE_NONE) return false;
    snprintf(why, TX_REASON_MAX, "recipe none: no quantized output to write");
    return true;
}

/* Does op i run its backward and need its parameters' grads? */
static bool runs_backward(const tx_fuse_ctx *c, int32_t i)
{
    return c->req->training && i >= c->grp->first_op_requiring_backward;
}

/* ---- joint: GroupedMLP, DenseMLP ----------------------------------------- */

static int32_t match_grouped_mlp(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 3 || !free_at(c, at) || !free_at(c, at + 1) || !free_at(c, at + 2)) return 0;
    if (!is_op(c, at, TX_TE_GROUPED_LINEAR) || !is_op(c, at + 2, TX_TE_GROUPED_LINEAR)) return 0;
    if (!is_op(c, at + 1, TX_TE_SCALED_SWIGLU) && !is_op(c, at + 1, TX_TE_SCALED_SRELU)) return 0;
    return 3;
}

static int32_t match_dense_mlp(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (!is_op(c, at, TX_TE_LINEAR)) return 0;
    int32_t j = at + 1;
    if (is_op(c, j, TX_TE_BIAS)) j++;
    if (!is_op(c, j, TX_TE_SWIGLU) && !is_op(c, j, TX_TE_SRELU)) return 0;
    if (!is_op(c, j + 1, TX_TE_LINEAR)) return 0;
    int32_t n = j + 2 - at;
    if (n > max) return 0;
    for (int32_t k = at; k < at + n; k++)
        if (!free_at(c, k)) return 0;
    return n;
}

/* Shared by both MLP fusions: recipe, device, determinism, dims. fc1 at
 * `a`, activation at `act`, fc2 at `b`. */
static bool mlp_reason(const tx_fuse_ctx *c, tx_fusion_id id, int32_t a, int32_t act, int32_t b,
                       bool uses_atomics, const char *what, char *why)
{
    char rb[96];
    const tx_recipe *r = &c->req->recipe;
    if (!(infos[id].recipes & TX_RECIPE_BIT(r->kind))) {
        snprintf(why, TX_REASON_MAX, "recipe %s: the fused %s runs in MXFP8 or NVFP4 only",
                 recipe_str(c, rb, sizeof rb), what);
        return true;
    }
    if (r->kind == TX_RECIPE_NVFP4 && !r->nvfp4_rht) {
        snprintf(why, TX_REASON_MAX, "nvfp4 with rht=0: the fused %s needs the random Hadamard "
                 "transform on its wgrad operands", what);
        return true;
    }
    if (!c->req->device.mx_gemm) {
        snprintf(why, TX_REASON_MAX, "device %s has no block-scaled (MXFP8/NVFP4) tensor cores: "
                 "the fused %s needs sm_100 to sm_110", c->req->device.name, what);
        return true;
    }
    if (c->req->deterministic && c->req->training && uses_atomics && !infos[id].deterministic) {
        snprintf(why, TX_REASON_MAX, "deterministic mode: the fused %s's backward sums %s with "
                 "float atomics", what, tx_te_op_is(c->grp->ops[act], TX_TE_CLASS_ROW_SCALED)
                 ? "dscales and dbias" : "fc1's dbias");
        return true;
    }
    int64_t m1, k1, n1, m2, k2, n2, nw;
    if (!rows_cols(c, main_in(c, a), &m1, &k1) || !rows_cols(c, weight_value(c, a), &n1, &nw)
        || !rows_cols(c, main_in(c, b), &m2, &k2) || !rows_cols(c, weight_value(c, b), &n2, &nw)) {
        snprintf(why, TX_REASON_MAX, "the shapes of %s %s and %s %s are not known at plan time",
                 opname(c, a), label(c, a), opname(c, b), label(c, b));
        return true;
    }
    int64_t dims[4] = {k1, n1, k2, n2};
    const char *dn[4] = {"fc1 in", "fc1 out", "fc2 in", "fc2 out"};
    for (int d = 0; d < 4; d++)
        if (dims[d] % 64) {
            snprintf(why, TX_REASON_MAX, "the fused %s needs fc1's and fc2's in and out features "
                     "to be multiples of 64: %s_features=%lld (%s %s)", what, dn[d],
                     (long long)dims[d], opname(c, d < 2 ? a : b), label(c, d < 2 ? a : b));
            return true;
        }
    bool glu = c->grp->ops[act] == TX_TE_SWIGLU || c->grp->ops[act] == TX_TE_SCALED_SWIGLU;
    if ((glu && n1 != 2 * k2) || (!glu && n1 != k2)) {
        snprintf(why, TX_REASON_MAX, "the fused %s needs fc1's out features (%lld) to be %s fc2's "
                 "in features (%lld)", what, (long long)n1, glu ? "twice" : "equal to", (long long)k2);
        return true;
    }
    if (m1 % 128) {
        snprintf(why, TX_REASON_MAX, "the fused %s needs the token count to be a multiple of 128: "
                 "tokens=%lld", what, (long long)m1);
        return true;
    }
    return false;
}

static bool reason_grouped_mlp(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    const tx_ir_node *a = tx_fuse_node(c, at), *b = tx_fuse_node(c, at + 2);
    int64_t ga = 0, gb = 0;
    teexec_status *st = tx_ir_attr_int(a, "num_groups", 0, &ga);
    if (!st) st = tx_ir_attr_int(b, "num_groups", 0, &gb);
    if (st) {
        snprintf(why, TX_REASON_MAX, "%s", teexec_status_message(st));
        teexec_status_destroy(st);
        return true;
    }
    if (ga != gb) {
        snprintf(why, TX_REASON_MAX, "GroupedLinear %s has %lld groups and %s has %lld: the fused "
                 "grouped MLP needs the same experts", a->label, (long long)ga, b->label, (long long)gb);
        return true;
    }
    int32_t sa = a->n_inputs > 1 ? a->inputs[1] : -1, sb = b->n_inputs > 1 ? b->inputs[1] : -1;
    if (sa != sb) {
        snprintf(why, TX_REASON_MAX, "GroupedLinear %s and %s read different split_sizes: the "
                 "fused grouped MLP needs one tensor for both", a->label, b->label);
        return true;
    }
    /* dscales always goes through atomics, bias or not */
    return mlp_reason(c, TX_FUSION_GROUPED_MLP, at, at + 1, at + 2, true, "grouped MLP", why);
}

static bool reason_dense_mlp(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    bool bias = is_op(c, at + 1, TX_TE_BIAS);
    return mlp_reason(c, TX_FUSION_DENSE_MLP, at, at + count - 2, at + count - 1, bias, "dense MLP",
                      why);
}

/* ---- forward ------------------------------------------------------------ */

static int32_t match_linear_bias_add(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (!is_op(c, at, TX_TE_LINEAR) || !free_at(c, at)) return 0;
    int32_t j = at + 1;
    if (is_op(c, j, TX_TE_BIAS)) j++;
    if (!is_op(c, j, TX_TE_ADD_EXTRA_INPUT)) return 0;
    int32_t n = j + 1 - at;
    for (int32_t k = at; k < at + n; k++)
        if (!free_at(c, k)) return 0;
    return n <= max ? n : 0;
}

static int32_t match_linear_scale_add(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 3 || !is_op(c, at, TX_TE_LINEAR) || !is_op(c, at + 1, TX_TE_CONSTANT_SCALE)
        || !is_op(c, at + 2, TX_TE_ADD_EXTRA_INPUT))
        return 0;
    return free_at(c, at) && free_at(c, at + 1) && free_at(c, at + 2) ? 3 : 0;
}

/* The GEMM writes into the extra tensor: its dtype must be the output's. */
static bool reason_accumulate(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    int32_t add = at + count - 1;
    const tx_ir_node *n = tx_fuse_node(c, add);
    int32_t e = n->n_inputs > 1 ? n->inputs[1] : -1;
    const tx_infer_value *ev = tx_plan_val(c->req, e), *ov = tx_plan_val(c->req, main_out(c, at));
    if (e < 0) {
        snprintf(why, TX_REASON_MAX, "AddExtraInput %s has no extra input to accumulate into", n->label);
        return true;
    }
    if (ev && ov && ev->dtype != TEEXEC_DTYPE_UNDEFINED && ov->dtype != TEEXEC_DTYPE_UNDEFINED
        && ev->dtype != ov->dtype) {
        snprintf(why, TX_REASON_MAX, "AddExtraInput %s adds a %s tensor to the %s output of "
                 "Linear %s: the GEMM accumulates only into its own output type", n->label,
                 teexec_dtype_name(ev->dtype), teexec_dtype_name(ov->dtype), label(c, at));
        return true;
    }
    return false;
}

static bool gelu_tanh(const tx_fuse_ctx *c, int32_t i)
{
    const char *s = NULL;
    teexec_status *st = tx_ir_attr_string(tx_fuse_node(c, i), "approximate", "tanh", &s, NULL);
    bool ok = !st && s && strcmp(s, "tanh") == 0;
    teexec_status_destroy(st);
    return ok;
}

static int32_t match_linear_bias_act(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 2 || !is_op(c, at, TX_TE_LINEAR) || !is_op(c, at + 1, TX_TE_BIAS) || !free_at(c, at)
        || !free_at(c, at + 1))
        return 0;
    if (max >= 3 && free_at(c, at + 2)
        && ((is_op(c, at + 2, TX_TE_GELU) && gelu_tanh(c, at + 2)) || is_op(c, at + 2, TX_TE_RELU)))
        return 3;
    return 2;
}

/* cuBLASLt's bias / GELU epilogues take 16-bit operands: writes why the
 * compute dtype of Linear `lin` does not fit `epilogue`, or returns false. */
static bool not_16bit(const tx_fuse_ctx *c, int32_t lin, const char *epilogue, char *why)
{
    teexec_dtype dt = compute_dtype(c, lin);
    if (dt == TEEXEC_DTYPE_FLOAT16 || dt == TEEXEC_DTYPE_BFLOAT16) return false;
    snprintf(why, TX_REASON_MAX, "compute dtype %s: the %s takes float16 or bfloat16 only "
             "(Linear %s; a recipe option dtype=bf16 casts)", teexec_dtype_name(dt), epilogue,
             label(c, lin));
    return true;
}

static bool reason_linear_bias_act(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    if (not_16bit(c, at, "GEMM's bias epilogue", why)) return true;
    if (count == 3 && c->req->recipe.kind != TX_RECIPE_NONE && at + 3 < c->grp->n_nodes
        && is_linear(op_at(c, at + 3))) {
        char rb[96];
        snprintf(why, TX_REASON_MAX, "recipe %s: %s %s must hand %s %s its input in %s, which the "
                 "GEMM epilogue cannot write", recipe_str(c, rb, sizeof rb), opname(c, at + 2),
                 label(c, at + 2), opname(c, at + 3), label(c, at + 3),
                 format_name(c->req->recipe.kind));
        return true;
    }
    return false;
}

static int32_t match_handoff(const tx_fuse_ctx *c, int32_t at, int32_t max, bool norm)
{
    if (max < 1 || !free_at(c, at) || !is_op(c, at + 1, TX_TE_LINEAR))
        return 0;
    tx_te_op_id id = op_at(c, at);
    return (norm ? is_norm(id) : is_plain_activation(id)) ? 1 : 0;
}

static int32_t match_norm_quantize(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    return match_handoff(c, at, max, true);
}

static int32_t match_act_quantize(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    return match_handoff(c, at, max, false);
}

static bool reason_handoff(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    if (no_recipe(c, why) || no_native_gemm(c, why)) return true;
    char what[160];
    snprintf(what, sizeof what, "%s %s's input", opname(c, at + 1), label(c, at + 1));
    if (not_quantizable(c, main_out(c, at), what, why)) return true;
    if (c->req->recipe.kind == TX_RECIPE_NVFP4 && c->req->recipe.nvfp4_rht && runs_backward(c, at + 1)
        && !c->req->params_frozen) {
        snprintf(why, TX_REASON_MAX, "nvfp4 with RHT: the wgrad copy of %s %s's input needs a "
                 "16-point Hadamard transform over tokens, which the fused %s %s kernel does not do",
                 opname(c, at + 1), label(c, at + 1), opname(c, at), label(c, at));
        return true;
    }
    return false;
}

/* ---- backward ----------------------------------------------------------- */

static int32_t match_linear_add(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 2 || !is_op(c, at, TX_TE_MAKE_EXTRA_OUTPUT) || !is_op(c, at + 1, TX_TE_LINEAR)) return 0;
    return free_at(c, at) && free_at(c, at + 1) ? 2 : 0;
}

static int32_t match_linear_scale(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 2 || !is_op(c, at, TX_TE_LINEAR) || !is_op(c, at + 1, TX_TE_CONSTANT_SCALE)) return 0;
    return free_at(c, at) && free_at(c, at + 1) ? 2 : 0;
}

static int32_t match_add_norm(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 2 || !is_op(c, at, TX_TE_MAKE_EXTRA_OUTPUT) || at + 1 >= c->grp->n_nodes
        || !is_norm(op_at(c, at + 1)))
        return 0;
    return free_at(c, at) && free_at(c, at + 1) ? 2 : 0;
}

static bool never_declined(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    return false;
}

/* dact+dbias takes the elementwise activations y = f(x) (not gated, not
 * row-scaled). */
static bool dact_bias_act(tx_te_op_id id) { return tx_te_op_is_elementwise_act(id); }

/* (Linear,) Bias, act: covers Bias and act; the Linear before gives the
 * grad format. */
static int32_t match_act_bias(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 2 || !is_op(c, at - 1, TX_TE_LINEAR) || !is_op(c, at, TX_TE_BIAS)
        || at + 1 >= c->grp->n_nodes || !dact_bias_act(op_at(c, at + 1)))
        return 0;
    return free_at(c, at) && free_at(c, at + 1) ? 2 : 0;
}

static int32_t match_bias_quantize(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 1 || !is_op(c, at - 1, TX_TE_LINEAR) || !is_op(c, at, TX_TE_BIAS)) return 0;
    return free_at(c, at) ? 1 : 0;
}

/* The Linear before op `at` must run its backward to read the grad. */
static bool linear_before_idle(const tx_fuse_ctx *c, int32_t at, char *why)
{
    if (runs_backward(c, at - 1)) return false;
    snprintf(why, TX_REASON_MAX, "Linear %s runs no backward (weight frozen or needs no grad, and "
             "its input needs none): nothing reads a quantized grad", label(c, at - 1));
    return true;
}

static bool reason_act_bias(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    char rb[96];
    const tx_recipe *r = &c->req->recipe;
    const tx_fusion_info *fi = &infos[TX_FUSION_BWD_ACT_BIAS];
    if (no_recipe(c, why)) return true;
    if (r->hybrid && r->kind == TX_RECIPE_MXFP8 && fi->grad_e4m3_only) {
        snprintf(why, TX_REASON_MAX, "recipe %s: Linear %s's grad_output is E5M2 (HYBRID) and the "
                 "fused dact+dbias kernel writes MXFP8 grads in E4M3 only",
                 recipe_str(c, rb, sizeof rb), label(c, at - 1));
        return true;
    }
    if (!(fi->recipes & TX_RECIPE_BIT(r->kind))) {
        snprintf(why, TX_REASON_MAX, "recipe %s: the fused dact+dbias kernel writes per-tensor FP8 or "
                 "MXFP8 E4M3 grads, not %s", recipe_str(c, rb, sizeof rb), format_name(r->kind));
        return true;
    }
    if (no_native_gemm(c, why)) return true;
    char what[160];
    snprintf(what, sizeof what, "Linear %s's grad_output", label(c, at - 1));
    if (not_quantizable(c, main_out(c, at - 1), what, why)) return true;
    return linear_before_idle(c, at, why);
}

static bool reason_bias_quantize(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    if (no_recipe(c, why) || no_native_gemm(c, why)) return true;
    char what[160];
    snprintf(what, sizeof what, "Linear %s's grad_output", label(c, at - 1));
    if (not_quantizable(c, main_out(c, at - 1), what, why)) return true;
    return linear_before_idle(c, at, why);
}

/* Bias, GELU(tanh), Linear: the Linear's dgrad GEMM computes the GELU's
 * and the Bias's grads in its epilogue. */
static int32_t match_linear_dgelu_bias(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 3 || !is_op(c, at, TX_TE_BIAS) || !is_op(c, at + 1, TX_TE_GELU) ||
        !is_op(c, at + 2, TX_TE_LINEAR) || !gelu_tanh(c, at + 1))
        return 0;
    return free_at(c, at) && free_at(c, at + 1) && free_at(c, at + 2) ? 3 : 0;
}

/* Measured on the H200 (2026-11-30): with 8192 output columns (GPT-2 block,
 * h 2048) the epilogue saved the GELU and bias-grad kernels (0.43 ms a
 * step); with 16384 (MLP block, ffn 16384) the dgrad with DGELU_BGRAD ran
 * about 1 ms slower than dgrad + GELU + bias grad. */
#define DGELU_EPILOGUE_MAX_COLS 8192

static bool reason_linear_dgelu_bias(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    char rb[96];
    int32_t lin = at + 2;
    if (c->req->device.sm == 0) {
        snprintf(why, TX_REASON_MAX, "device %s: the dGELU + dbias epilogue is cuBLASLt's; the CPU "
                 "runs the Bias and GELU backward as one dact+dbias kernel (BackwardDactDbias)",
                 c->req->device.name);
        return true;
    }
    if (c->req->recipe.kind != TX_RECIPE_NONE) {
        snprintf(why, TX_REASON_MAX, "recipe %s: Linear %s's dgrad runs on quantized operands, and "
                 "the epilogue takes bf16/fp16 ones", recipe_str(c, rb, sizeof rb), label(c, lin));
        return true;
    }
    if (c->req->deterministic) {
        snprintf(why, TX_REASON_MAX, "deterministic mode: cuBLASLt does not promise the order of "
                 "the epilogue's bias reduction");
        return true;
    }
    if (not_16bit(c, lin, "DGELU_BGRAD epilogue", why)) return true;
    int64_t rows, cols;
    if (!rows_cols(c, main_in(c, lin), &rows, &cols)) {
        snprintf(why, TX_REASON_MAX, "the shape of Linear %s's input is not known at plan time",
                 label(c, lin));
        return true;
    }
    if (cols % 8) {
        snprintf(why, TX_REASON_MAX, "Linear %s has %lld input features: the epilogue's aux "
                 "tensor needs a multiple of 8", label(c, lin), (long long)cols);
        return true;
    }
    if (cols > DGELU_EPILOGUE_MAX_COLS) {
        snprintf(why, TX_REASON_MAX, "Linear %s has %lld input features: above %d the epilogue "
                 "measured slower than dgrad + dact+dbias on the H200", label(c, lin),
                 (long long)cols, DGELU_EPILOGUE_MAX_COLS);
        return true;
    }
    return false;
}

/* Bias, elementwise activation: dact and dbias in one pass, where no
 * quantized grad is to be handed over (BackwardActivationBias and
 * BackwardBiasQuantize come first). */
static int32_t match_dact_dbias(const tx_fuse_ctx *c, int32_t at, int32_t max)
{
    if (max < 2 || !is_op(c, at, TX_TE_BIAS) || at + 1 >= c->grp->n_nodes ||
        !dact_bias_act(op_at(c, at + 1)))
        return 0;
    return free_at(c, at) && free_at(c, at + 1) ? 2 : 0;
}

static bool reason_dact_dbias(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why)
{
    teexec_dtype dt = compute_dtype(c, at + 1);
    if (dt == TEEXEC_DTYPE_DOUBLE) {
        snprintf(why, TX_REASON_MAX, "compute dtype double: the fused dact+dbias kernels compute in "
                 "FP32 (the unfused FP64 kernels run)");
        return true;
    }
    return false;
}

/* ---- the rule lists ------------------------------------------------------ */

static const tx_fusion_rule joint_rules[] = {
    {TX_FUSION_GROUPED_MLP, match_grouped_mlp, reason_grouped_mlp},
    {TX_FUSION_DENSE_MLP, match_dense_mlp, reason_dense_mlp},
};

/* TE's order (bias-add before bias-activation, so a Linear, Bias followed
 * by AddExtraInput accumulates), then the hand-offs, which cover one op and
 * so never take a GEMM away from the GEMM fusions. */
static const tx_fusion_rule forward_rules[] = {
    {TX_FUSION_FWD_LINEAR_BIAS_ADD, match_linear_bias_add, reason_accumulate},
    {TX_FUSION_FWD_LINEAR_BIAS_ACT, match_linear_bias_act, reason_linear_bias_act},
    {TX_FUSION_FWD_LINEAR_SCALE_ADD, match_linear_scale_add, reason_accumulate},
    {TX_FUSION_FWD_NORM_QUANTIZE, match_norm_quantize, reason_handoff},
    {TX_FUSION_FWD_ACT_QUANTIZE, match_act_quantize, reason_handoff},
};

static const tx_fusion_rule backward_rules[] = {
    {TX_FUSION_BWD_LINEAR_ADD, match_linear_add, never_declined},
    {TX_FUSION_BWD_LINEAR_SCALE, match_linear_scale, never_declined},
    {TX_FUSION_BWD_ACT_BIAS, match_act_bias, reason_act_bias},
    {TX_FUSION_BWD_ADD_NORM, match_add_norm, never_declined},
    {TX_FUSION_BWD_BIAS_QUANTIZE, match_bias_quantize, reason_bias_quantize},
    /* teexec's own, on what the quantized hand-offs left: the dgrad
     * epilogue first (it takes the Linear too), then dact+dbias */
    {TX_FUSION_BWD_LINEAR_DGELU_BIAS, match_linear_dgelu_bias, reason_linear_dgelu_bias},
    {TX_FUSION_BWD_DACT_DBIAS, match_dact_dbias, reason_dact_dbias},
};

const tx_fusion_rule *tx_fusion_rules(tx_fusion_pass pass, size_t *count)
{
    switch (pass) {
    case TX_PASS_JOINT:
        *count = sizeof joint_rules / sizeof joint_rules[0];
        return joint_rules;
    case TX_PASS_FORWARD:
        *count = sizeof forward_rules / sizeof forward_rules[0];
        return forward_rules;
    case TX_PASS_BACKWARD:
        *count = sizeof backward_rules / sizeof backward_rules[0];
        return backward_rules;
    }
    *count = 0;
    return NULL;
}
