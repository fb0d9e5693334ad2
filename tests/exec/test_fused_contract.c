/*
 * The saved-context contract of the fusion catalog (exec/cpu_fused.h,
 * exec/group_exec.h): for hand-built fuser groups that exercise every
 * catalog fusion, every combination of joint fusions x forward layout x
 * backward layout that the catalog's patterns can produce (all-unfused
 * included) runs forward + backward on the CPU, and the output, the saved
 * contexts, the input grad, the parameter grads and the extra-input grads
 * must be byte-identical to the all-unfused run - under recipes none,
 * fp8-current, mxfp8 and nvfp4 (RHT, stochastic rounding and 2-D weights
 * on), so quantized hand-off is bit-exact too.
 *
 * The layouts come from this file's own enumerator over plan.h's fusion
 * patterns (the planner's matchers work on IR graphs, these groups are
 * built by hand); a layout the executor refuses fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../planner/plan_fixture.h"

#include "exec/group_exec.h"
#include "format/te_schema.h"

/* ---- deterministic data ---------------------------------------------------- */

static uint64_t rng_state;

static float urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xFFFFFF) / 16777216.0f;
}

static tx_tensor *new_tensor(int rank, const int64_t *dims, float lo, float hi)
{
    tx_tensor *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_null(tx_tensor_alloc(t, TEEXEC_DTYPE_FLOAT, rank, dims));
    float *p = t->data;
    for (uint64_t i = 0; i < t->numel; i++) p[i] = lo + (hi - lo) * urand();
    return t;
}

static tx_tensor *t2(int64_t a, int64_t b, float lo, float hi)
{
    int64_t d[2] = {a, b};
    return new_tensor(2, d, lo, hi);
}

static tx_tensor *t1(int64_t a, float lo, float hi)
{
    int64_t d[1] = {a};
    return new_tensor(1, d, lo, hi);
}

static void free_tensor(tx_tensor *t)
{
    if (!t) return;
    tx_tensor_release(t);
    free(t);
}

/* ---- hand-built groups ------------------------------------------------------- */

#define MAXOPS 24
#define MAXP 8

typedef struct built_group {
    tx_group_op ops[MAXOPS];
    tx_te_attr_value attrs[MAXOPS][TX_TE_MAX_ATTRS];
    const tx_tensor *params[MAXOPS][MAXP];
    const tx_tensor *extras[MAXOPS][TX_TE_MAX_EXTRA];
    tx_tensor *owned[256];
    int n_owned;
    tx_group_desc g;
    tx_tensor *x, *dy;
    const char *name;
} built_group;

static tx_tensor *keep(built_group *b, tx_tensor *t)
{
    b->owned[b->n_owned++] = t;
    return t;
}

static int add_op(built_group *b, tx_te_op_id op)
{
    int i = b->g.n_ops++;
    tx_group_op *o = &b->ops[i];
    memset(o, 0, sizeof *o);
    o->op = op;
    o->node = 100 + i;
    o->name = tx_te_schema(op)->name;
    tx_te_attr_defaults(tx_te_schema(op), b->attrs[i]);
    o->attrs = b->attrs[i];
    o->params = b->params[i];
    o->extra_inputs = b->extras[i];
    o->n_extra_inputs = tx_te_schema(op)->n_extra_inputs;
    for (int s = 0; s < TX_TE_MAX_EXTRA; s++) o->channel_from[s] = -1;
    o->params_need_grad = true;
    return i;
}

static void add_param(built_group *b, int i, tx_tensor *t)
{
    b->params[i][b->ops[i].n_params++] = keep(b, t);
}

static void init_group(built_group *b, const char *name)
{
    memset(b, 0, sizeof *b);
    b->name = name;
    b->g.ops = b->ops;
    b->g.input_needs_grad = true;
}

static void free_group(built_group *b)
{
    for (int i = 0; i < b->n_owned; i++) free_tensor(b->owned[i]);
    free_tensor(b->x);
    free_tensor(b->dy);
}

enum { M = 64, H = 64, F = 128 };

static void linear(built_group *b, int64_t n, int64_t k)
{
    int i = add_op(b, TX_TE_LINEAR);
    add_param(b, i, t2(n, k, -0.15f, 0.15f));
}

static void bias(built_group *b, int64_t n)
{
    int i = add_op(b, TX_TE_BIAS);
    add_param(b, i, t1(n, -0.5f, 0.5f));
}

static void norm(built_group *b, tx_te_op_id op, int64_t h)
{
    int i = add_op(b, op);
    add_param(b, i, t1(h, 0.5f, 1.5f));
    if (op == TX_TE_LAYER_NORM) add_param(b, i, t1(h, -0.2f, 0.2f));
}

/* MEO, LayerNorm, Linear, Bias, GELU, Linear, Bias, AddExtraInput(MEO) */
static void group_te_mlp(built_group *b)
{
    init_group(b, "ln_mlp_residual");
    add_op(b, TX_TE_MAKE_EXTRA_OUTPUT);
    norm(b, TX_TE_LAYER_NORM, H);
    linear(b, F, H);
    bias(b, F);
    add_op(b, TX_TE_GELU);
    linear(b, H, F);
    bias(b, H);
    int a = add_op(b, TX_TE_ADD_EXTRA_INPUT);
    b->ops[a].channel_from[0] = 0;
    b->x = t2(M, H, -2.0f, 2.0f);
    b->dy = t2(M, H, -1.0f, 1.0f);
}

/* RMSNorm, MEO, Linear, ConstantScale, AddExtraInput(MEO), RMSNorm, Linear,
 * ReLU, Linear, Bias, AddExtraInput(external) */
static void group_scale_add(built_group *b)
{
    init_group(b, "rms_scale_add");
    norm(b, TX_TE_RMS_NORM, H);
    add_op(b, TX_TE_MAKE_EXTRA_OUTPUT);
    linear(b, H, H);
    int s = add_op(b, TX_TE_CONSTANT_SCALE);
    b->attrs[s][TX_TE_A_SCALE].f = 0.7;
    int a = add_op(b, TX_TE_ADD_EXTRA_INPUT);
    b->ops[a].channel_from[0] = 1;
    linear(b, F, H);
    add_op(b, TX_TE_RELU);
    linear(b, H, F);
    int e = add_op(b, TX_TE_ADD_EXTRA_INPUT);
    b->extras[e][0] = keep(b, t2(M, H, -1.0f, 1.0f));
    b->x = t2(M, H, -2.0f, 2.0f);
    b->dy = t2(M, H, -1.0f, 1.0f);
}

/* MEO, RMSNorm, Linear, SwiGLU, Linear, AddExtraInput(MEO): llama's MLP */
static void group_swiglu(built_group *b)
{
    init_group(b, "rms_swiglu_mlp");
    add_op(b, TX_TE_MAKE_EXTRA_OUTPUT);
    norm(b, TX_TE_RMS_NORM, H);
    linear(b, 2 * F, H);
    add_op(b, TX_TE_SWIGLU);
    linear(b, H, F);
    int a = add_op(b, TX_TE_ADD_EXTRA_INPUT);
    b->ops[a].channel_from[0] = 0;
    b->x = t2(M, H, -2.0f, 2.0f);
    b->dy = t2(M, H, -1.0f, 1.0f);
}

/* GroupedLinear, ScaledSwiGLU, GroupedLinear: the MoE experts */
static void group_moe(built_group *b)
{
    init_group(b, "grouped_mlp");
    enum { G = 3 };
    int64_t gd[1] = {G};
    tx_tensor *ss = calloc(1, sizeof *ss);
    assert_non_null(ss);
    assert_null(tx_tensor_alloc(ss, TEEXEC_DTYPE_INT64, 1, gd));
    int64_t *sp = ss->data;
    sp[0] = 24;
    sp[1] = 0;
    sp[2] = 32; /* rows 56..63 belong to no expert */
    keep(b, ss);
    int f1 = add_op(b, TX_TE_GROUPED_LINEAR);
    b->attrs[f1][TX_TE_A_GL_NUM_GROUPS].i = G;
    b->extras[f1][0] = ss;
    for (int g = 0; g < G; g++) add_param(b, f1, t2(2 * F, H, -0.15f, 0.15f));
    for (int g = 0; g < G; g++) add_param(b, f1, t1(2 * F, -0.3f, 0.3f));
    int a = add_op(b, TX_TE_SCALED_SWIGLU);
    b->extras[a][0] = keep(b, t1(M, 0.1f, 1.0f));
    int f2 = add_op(b, TX_TE_GROUPED_LINEAR);
    b->attrs[f2][TX_TE_A_GL_NUM_GROUPS].i = G;
    b->extras[f2][0] = ss;
    for (int g = 0; g < G; g++) add_param(b, f2, t2(H, F, -0.15f, 0.15f));
    for (int g = 0; g < G; g++) add_param(b, f2, t1(H, -0.3f, 0.3f));
    b->x = t2(M, H, -2.0f, 2.0f);
    b->dy = t2(M, H, -1.0f, 1.0f);
}

/* ---- recipe and quantization plan ----------------------------------------------- */

typedef struct qsetup {
    tx_group_config cfg;
    tx_plan_quant quant[3 * MAXOPS];
} qsetup;

static void make_quant(qsetup *q, const built_group *b, tx_recipe_kind kind, bool hybrid)
{
    memset(q, 0, sizeof *q);
    q->cfg.recipe.kind = kind;
    q->cfg.recipe.hybrid = hybrid;
    q->cfg.recipe.nvfp4_rht = true;
    q->cfg.recipe.nvfp4_stochastic = true;
    q->cfg.recipe.nvfp4_2d_weights = true;
    q->cfg.training = true;
    q->cfg.seed = 1234;
    q->cfg.step = 3;
    q->cfg.quant = q->quant;
    if (kind == TX_RECIPE_NONE) return;
    size_t n = 0;
    for (int i = 0; i < b->g.n_ops; i++) {
        if (b->ops[i].op != TX_TE_LINEAR && b->ops[i].op != TX_TE_GROUPED_LINEAR) continue;
        for (int o = 0; o < 3; o++) {
            tx_plan_quant *e = &q->quant[n++];
            e->node = b->ops[i].node;
            e->operand = (tx_qoperand)o;
            e->quantized = true;
            e->producer = -1;
            e->delayed_slot = -1;
            e->block_rows = e->block_cols = 1;
            bool grad = o == TX_QOP_GRAD_OUTPUT, w = o == TX_QOP_WEIGHT;
            switch (kind) {
            case TX_RECIPE_FP8_DELAYED:
                e->delayed_slot = (int32_t)(n - 1);
                /* fall through */
            case TX_RECIPE_FP8_CURRENT:
                e->kind = TX_QKIND_FP8_TENSOR;
                e->data_dtype = grad && hybrid ? TEEXEC_DTYPE_FLOAT8E5M2 : TEEXEC_DTYPE_FLOAT8E4M3FN;
                break;
            case TX_RECIPE_MXFP8:
                e->kind = TX_QKIND_MXFP8;
                e->data_dtype = grad && hybrid ? TEEXEC_DTYPE_FLOAT8E5M2 : TEEXEC_DTYPE_FLOAT8E4M3FN;
                e->block_cols = 32;
                break;
            default:
                e->kind = TX_QKIND_NVFP4;
                e->data_dtype = TEEXEC_DTYPE_FLOAT4E2M1;
                e->block_rows = w ? 16 : 1;
                e->block_cols = 16;
                break;
            }
        }
    }
    q->cfg.n_quant = n;
}

/* ---- layout enumeration ------------------------------------------------------ */

/* Op families from the schema's class bits. */
static bool is_act(tx_te_op_id op) { return tx_te_op_is(op, TX_TE_CLASS_ACTIVATION); }
static bool is_norm(tx_te_op_id op) { return tx_te_op_is(op, TX_TE_CLASS_NORM); }
static bool plain_act(tx_te_op_id op) { return tx_te_op_is_elementwise_act(op); }
/* DenseMLP's middle: unscaled, uncapped (no clamp, no soft cap). */
static bool dense_act(tx_te_op_id op)
{
    return tx_te_op_is_unscaled_act(op) && tx_te_schema(op)->act_cap == TX_TE_CAP_NONE;
}

/* The config being swept: hand-off fusions need the operand quantized. */
static const tx_group_config *g_cfg;

static bool operand_quantized(const built_group *b, int i, tx_qoperand operand)
{
    if (!g_cfg || i < 0 || i >= b->g.n_ops || g_cfg->recipe.kind == TX_RECIPE_NONE) return false;
    for (size_t k = 0; k < g_cfg->n_quant; k++)
        if (g_cfg->quant[k].node == b->ops[i].node && g_cfg->quant[k].operand == operand)
            return g_cfg->quant[k].quantized;
    return false;
}

/* Counts with which fusion f fits at op `at` (0-terminated list). */
static int fits(const built_group *b, tx_fusion_id f, int at, bool quantized, int *counts)
{
    int n = b->g.n_ops, nc = 0;
#define OPX(j) (at + (j) < n ? b->ops[at + (j)].op : TX_TE_OP_COUNT)
    switch (f) {
    case TX_FUSION_GROUPED_MLP:
        if (OPX(0) == TX_TE_GROUPED_LINEAR && OPX(2) == TX_TE_GROUPED_LINEAR &&
            (OPX(1) == TX_TE_SCALED_SWIGLU || OPX(1) == TX_TE_SCALED_SRELU))
            counts[nc++] = 3;
        break;
    case TX_FUSION_DENSE_MLP:
        if (OPX(0) == TX_TE_LINEAR && OPX(1) == TX_TE_BIAS && dense_act(OPX(2)) &&
            OPX(3) == TX_TE_LINEAR)
            counts[nc++] = 4;
        if (OPX(0) == TX_TE_LINEAR && dense_act(OPX(1)) && OPX(2) == TX_TE_LINEAR)
            counts[nc++] = 3;
        break;
    case TX_FUSION_FWD_NORM_QUANTIZE:
        if (quantized && is_norm(OPX(0)) && OPX(1) == TX_TE_LINEAR &&
            operand_quantized(b, at + 1, TX_QOP_INPUT))
            counts[nc++] = 1;
        break;
    case TX_FUSION_FWD_ACT_QUANTIZE:
        if (quantized && is_act(OPX(0)) && OPX(1) == TX_TE_LINEAR &&
            operand_quantized(b, at + 1, TX_QOP_INPUT))
            counts[nc++] = 1;
        break;
    case TX_FUSION_FWD_LINEAR_BIAS_ACT:
        if (OPX(0) == TX_TE_LINEAR && OPX(1) == TX_TE_BIAS) {
            if (OPX(2) == TX_TE_GELU || OPX(2) == TX_TE_RELU) counts[nc++] = 3;
            counts[nc++] = 2;
        }
        break;
    case TX_FUSION_FWD_LINEAR_BIAS_ADD:
        if (OPX(0) == TX_TE_LINEAR && OPX(1) == TX_TE_BIAS && OPX(2) == TX_TE_ADD_EXTRA_INPUT)
            counts[nc++] = 3;
        if (OPX(0) == TX_TE_LINEAR && OPX(1) == TX_TE_ADD_EXTRA_INPUT) counts[nc++] = 2;
        break;
    case TX_FUSION_FWD_LINEAR_SCALE_ADD:
        if (OPX(0) == TX_TE_LINEAR && OPX(1) == TX_TE_CONSTANT_SCALE &&
            OPX(2) == TX_TE_ADD_EXTRA_INPUT)
            counts[nc++] = 3;
        break;
    case TX_FUSION_BWD_LINEAR_ADD:
        if (OPX(0) == TX_TE_MAKE_EXTRA_OUTPUT && OPX(1) == TX_TE_LINEAR) counts[nc++] = 2;
        break;
    case TX_FUSION_BWD_LINEAR_SCALE:
        if (OPX(0) == TX_TE_LINEAR && OPX(1) == TX_TE_CONSTANT_SCALE) counts[nc++] = 2;
        break;
    case TX_FUSION_BWD_ACT_BIAS:
        /* TE: needs a recipe and a Linear before (its grad quantizer) */
        if (quantized && at > 0 && b->ops[at - 1].op == TX_TE_LINEAR && OPX(0) == TX_TE_BIAS &&
            plain_act(OPX(1)) && operand_quantized(b, at - 1, TX_QOP_GRAD_OUTPUT))
            counts[nc++] = 2;
        break;
    case TX_FUSION_BWD_ADD_NORM:
        if (OPX(0) == TX_TE_MAKE_EXTRA_OUTPUT && is_norm(OPX(1))) counts[nc++] = 2;
        break;
    case TX_FUSION_BWD_BIAS_QUANTIZE:
        if (quantized && at > 0 && b->ops[at - 1].op == TX_TE_LINEAR && OPX(0) == TX_TE_BIAS &&
            operand_quantized(b, at - 1, TX_QOP_GRAD_OUTPUT))
            counts[nc++] = 1;
        break;
    case TX_FUSION_BWD_DACT_DBIAS:
        if (OPX(0) == TX_TE_BIAS && plain_act(OPX(1))) counts[nc++] = 2;
        break;
    default: break;
    }
#undef OPX
    counts[nc] = 0;
    return nc;
}

#define MAXK MAXOPS
typedef struct layout {
    tx_plan_kernel k[MAXK];
    int n;
} layout;

typedef struct layout_list {
    layout *v;
    int n, cap;
} layout_list;

static void push(layout_list *l, const layout *x)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
        assert_non_null(l->v);
    }
    l->v[l->n++] = *x;
}

/* All layouts of ops [at, n) with the joint kernels `joint` fixed. */
static void enumerate(const built_group *b, bool forward, bool quantized, const layout *joint,
                      int at, layout *cur, layout_list *out)
{
    if (at == b->g.n_ops) {
        push(out, cur);
        return;
    }
    for (int j = 0; j < joint->n; j++)
        if (joint->k[j].first == at) {
            cur->k[cur->n++] = joint->k[j];
            enumerate(b, forward, quantized, joint, at + joint->k[j].count, cur, out);
            cur->n--;
            return;
        }
    cur->k[cur->n++] = (tx_plan_kernel){TX_FUSION_NONE, at, 1};
    enumerate(b, forward, quantized, joint, at + 1, cur, out);
    cur->n--;
    static const tx_fusion_id fwd[] = {TX_FUSION_FWD_NORM_QUANTIZE, TX_FUSION_FWD_LINEAR_BIAS_ACT,
                                       TX_FUSION_FWD_LINEAR_BIAS_ADD,
                                       TX_FUSION_FWD_LINEAR_SCALE_ADD, TX_FUSION_FWD_ACT_QUANTIZE};
    static const tx_fusion_id bwd[] = {TX_FUSION_BWD_LINEAR_ADD, TX_FUSION_BWD_LINEAR_SCALE,
                                       TX_FUSION_BWD_ACT_BIAS, TX_FUSION_BWD_ADD_NORM,
                                       TX_FUSION_BWD_BIAS_QUANTIZE, TX_FUSION_BWD_DACT_DBIAS};
    const tx_fusion_id *list = forward ? fwd : bwd;
    const int n_list = forward ? (int)(sizeof fwd / sizeof *fwd) : (int)(sizeof bwd / sizeof *bwd);
    for (int f = 0; f < n_list; f++) {
        int counts[4];
        fits(b, list[f], at, quantized, counts);
        for (int c = 0; counts[c]; c++) {
            bool clash = false; /* may not overlap a joint kernel */
            for (int j = 0; j < joint->n; j++)
                if (joint->k[j].first < at + counts[c] &&
                    joint->k[j].first + joint->k[j].count > at)
                    clash = true;
            if (clash) continue;
            cur->k[cur->n++] = (tx_plan_kernel){list[f], at, counts[c]};
            enumerate(b, forward, quantized, joint, at + counts[c], cur, out);
            cur->n--;
        }
    }
}

/* Every non-overlapping set of joint fusions (the empty one first). */
static void enumerate_joint(const built_group *b, int at, layout *cur, layout_list *out)
{
    if (at >= b->g.n_ops) {
        push(out, cur);
        return;
    }
    enumerate_joint(b, at + 1, cur, out);
    static const tx_fusion_id joint[] = {TX_FUSION_GROUPED_MLP, TX_FUSION_DENSE_MLP};
    for (int f = 0; f < 2; f++) {
        int counts[4];
        fits(b, joint[f], at, false, counts);
        for (int c = 0; counts[c]; c++) {
            cur->k[cur->n++] = (tx_plan_kernel){joint[f], at, counts[c]};
            enumerate_joint(b, at + counts[c], cur, out);
            cur->n--;
        }
    }
}

/* ---- running and comparing ----------------------------------------------------- */

static bool same_tensor(const tx_tensor *a, const tx_tensor *b)
{
    if (!a || !b) return a == b;
    return a->dtype == b->dtype && a->numel == b->numel && a->nbytes == b->nbytes &&
           (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

static void describe(char *buf, size_t size, const layout *l)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < l->n && o + 16 < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%d@%d+%d ", (int)l->k[i].fusion,
                              (int)l->k[i].first, (int)l->k[i].count);
}

static tx_group_run *run_both(const built_group *b, const tx_group_config *cfg, const layout *fw,
                           const layout *bw)
{
    tx_group_run *r = NULL;
    teexec_status *st = tx_group_forward(&b->g, cfg, fw->k, fw->n, b->x, &r);
    if (!st) st = tx_group_backward(r, bw->k, bw->n, b->dy, NULL);
    if (st) {
        char f[256], g[256];
        describe(f, sizeof f, fw);
        describe(g, sizeof g, bw);
        fail_msg("%s: forward [%s] backward [%s]: %s", b->name, f, g, teexec_status_message(st));
    }
    return r;
}

/* Byte-compares every result of r with the reference; saved contexts only
 * where both runs left the unfused layout (no joint fusion). */
static int compare(const built_group *b, const tx_group_run *ref, const tx_group_run *r, bool saved)
{
    int bad = 0;
    bad += !same_tensor(tx_group_output(ref), tx_group_output(r));
    bad += !same_tensor(tx_group_grad_input(ref), tx_group_grad_input(r));
    for (int i = 0; i < b->g.n_ops; i++) {
        for (int p = 0; p < b->ops[i].n_params; p++)
            bad += !same_tensor(tx_group_grad_param(ref, i, p), tx_group_grad_param(r, i, p));
        for (int s = 0; s < TX_TE_MAX_EXTRA; s++)
            bad += !same_tensor(tx_group_grad_extra_input(ref, i, s), tx_group_grad_extra_input(r, i, s));
        bad += !same_tensor(tx_group_extra_output(ref, i), tx_group_extra_output(r, i));
        if (!saved) continue;
        int na, nb;
        const tx_tensor *const *sa = tx_group_saved(ref, i, &na);
        const tx_tensor *const *sb = tx_group_saved(r, i, &nb);
        if (na != nb) {
            bad++;
            continue;
        }
        for (int s = 0; s < na; s++) bad += !same_tensor(sa[s], sb[s]);
    }
    return bad;
}

typedef struct sweep_stats {
    long runs;
    int fusions_seen[TX_FUSION_COUNT];
} sweep_stats;

static void sweep(const built_group *b, tx_recipe_kind kind, bool hybrid, sweep_stats *stats,
                  const tx_group_config *given)
{
    qsetup q;
    make_quant(&q, b, kind, hybrid);
    if (given) q.cfg = *given;
    g_cfg = &q.cfg;
    bool quantized = kind != TX_RECIPE_NONE;
    layout all_unfused = {.n = 0};
    for (int i = 0; i < b->g.n_ops; i++) all_unfused.k[all_unfused.n++] = (tx_plan_kernel){0, i, 1};
    tx_group_run *ref = run_both(b, &q.cfg, &all_unfused, &all_unfused);
    assert_non_null(tx_group_output(ref));
    assert_non_null(tx_group_grad_input(ref));
    layout_list joints = {0}, cur_j = {0};
    layout cur = {.n = 0};
    enumerate_joint(b, 0, &cur, &joints);
    (void)cur_j;
    for (int j = 0; j < joints.n; j++) {
        layout_list fw = {0}, bw = {0};
        cur.n = 0;
        enumerate(b, true, quantized, &joints.v[j], 0, &cur, &fw);
        cur.n = 0;
        enumerate(b, false, quantized, &joints.v[j], 0, &cur, &bw);
        for (int f = 0; f < fw.n; f++)
            for (int k = 0; k < bw.n; k++) {
                tx_group_run *r = run_both(b, &q.cfg, &fw.v[f], &bw.v[k]);
                int bad = compare(b, ref, r, joints.v[j].n == 0);
                if (bad) {
                    char s1[256], s2[256];
                    describe(s1, sizeof s1, &fw.v[f]);
                    describe(s2, sizeof s2, &bw.v[k]);
                    fail_msg("%s recipe %d: forward [%s] backward [%s]: %d results differ from "
                             "the unfused plan", b->name, (int)kind, s1, s2, bad);
                }
                stats->runs++;
                for (int t = 0; t < fw.v[f].n; t++) stats->fusions_seen[fw.v[f].k[t].fusion]++;
                for (int t = 0; t < bw.v[k].n; t++) stats->fusions_seen[bw.v[k].k[t].fusion]++;
                tx_group_run_free(r);
            }
        free(fw.v);
        free(bw.v);
    }
    free(joints.v);
    tx_group_run_free(ref);
    g_cfg = NULL;
}

static void all_groups_all_layouts(tx_recipe_kind kind, bool hybrid)
{
    rng_state = 0x5eed0000u + (uint64_t)kind;
    void (*makers[])(built_group *) = {group_te_mlp, group_scale_add, group_swiglu, group_moe};
    sweep_stats stats;
    memset(&stats, 0, sizeof stats);
    for (size_t m = 0; m < sizeof makers / sizeof *makers; m++) {
        built_group b;
        makers[m](&b);
        sweep(&b, kind, hybrid, &stats, NULL);
        free_group(&b);
    }
    print_message("recipe %d%s: %ld forward x backward combinations byte-identical\n", (int)kind,
                  hybrid ? " (HYBRID: E5M2 grads)" : "", stats.runs);
    /* every catalog fusion the CPU runs was exercised (the quantize ones
     * need a recipe) */
    for (int f = 1; f < TX_FUSION_COUNT; f++) {
        if (tx_fusion_info_of((tx_fusion_id)f)->cuda_only) continue;
        bool needs_recipe = f == TX_FUSION_FWD_NORM_QUANTIZE || f == TX_FUSION_FWD_ACT_QUANTIZE ||
                            f == TX_FUSION_BWD_ACT_BIAS || f == TX_FUSION_BWD_BIAS_QUANTIZE;
        if (kind == TX_RECIPE_NONE && needs_recipe) continue;
        if (stats.fusions_seen[f] == 0) fail_msg("fusion %d was never exercised", f);
    }
}

static void recipe_none(void **state) { (void)state; all_groups_all_layouts(TX_RECIPE_NONE, false); }
static void recipe_fp8_current(void **state) { (void)state; all_groups_all_layouts(TX_RECIPE_FP8_CURRENT, false); }
/* fp8-current's default: E5M2 grads through every hand-off, the fused
 * dact+dbias's included */
static void recipe_fp8_current_hybrid(void **state)
{
    (void)state;
    all_groups_all_layouts(TX_RECIPE_FP8_CURRENT, true);
}
static void recipe_mxfp8(void **state) { (void)state; all_groups_all_layouts(TX_RECIPE_MXFP8, false); }
static void recipe_nvfp4(void **state) { (void)state; all_groups_all_layouts(TX_RECIPE_NVFP4, false); }

/* The comparisons can fail: a quantized run differs from an unquantized
 * one, and a changed weight changes the grads. */
static void comparison_detects_differences(void **state)
{
    (void)state;
    rng_state = 99;
    built_group b;
    group_te_mlp(&b);
    layout u = {.n = 0};
    for (int i = 0; i < b.g.n_ops; i++) u.k[u.n++] = (tx_plan_kernel){0, i, 1};
    qsetup q0, q1;
    make_quant(&q0, &b, TX_RECIPE_NONE, false);
    make_quant(&q1, &b, TX_RECIPE_MXFP8, false);
    tx_group_run *a = run_both(&b, &q0.cfg, &u, &u), *c = run_both(&b, &q1.cfg, &u, &u);
    assert_true(compare(&b, a, c, true) > 0);
    tx_group_run_free(c);
    ((float *)b.params[2][0]->data)[5] += 0.25f;
    c = run_both(&b, &q0.cfg, &u, &u);
    assert_true(compare(&b, a, c, true) > 0);
    tx_group_run_free(a);
    tx_group_run_free(c);
    free_group(&b);
}

/* fp8-delayed: two training steps (scales 1, then from the first step's
 * amax) with a fully fused layout and the unfused one, each with its own
 * state: byte-identical at both steps, and the state equal after them. */
static void fp8_delayed_two_steps(void **state)
{
    (void)state;
    rng_state = 31;
    built_group b;
    group_te_mlp(&b);
    qsetup qa, qb;
    make_quant(&qa, &b, TX_RECIPE_FP8_DELAYED, true);
    make_quant(&qb, &b, TX_RECIPE_FP8_DELAYED, true);
    tx_delayed_state sa, sb;
    teexec_dtype fmts[3 * MAXOPS];
    for (size_t i = 0; i < qa.cfg.n_quant; i++) fmts[i] = qa.quant[i].data_dtype;
    assert_null(tx_delayed_init(&sa, 4, (uint32_t)qa.cfg.n_quant, 0, TX_AMAX_MAX, fmts));
    assert_null(tx_delayed_init(&sb, 4, (uint32_t)qa.cfg.n_quant, 0, TX_AMAX_MAX, fmts));
    qa.cfg.delayed = &sa;
    qb.cfg.delayed = &sb;
    layout u = {.n = 0};
    for (int i = 0; i < b.g.n_ops; i++) u.k[u.n++] = (tx_plan_kernel){0, i, 1};
    /* MEO|LN: ADD_NORM bwd; LN: NORM_QUANTIZE; Linear,Bias,GELU: LBA; Linear,Bias,Add: LBADD */
    layout fw = {.n = 4, .k = {{0, 0, 1}, {TX_FUSION_FWD_NORM_QUANTIZE, 1, 1},
                               {TX_FUSION_FWD_LINEAR_BIAS_ACT, 2, 3},
                               {TX_FUSION_FWD_LINEAR_BIAS_ADD, 5, 3}}};
    layout bw = {.n = 6, .k = {{TX_FUSION_BWD_ADD_NORM, 0, 2}, {0, 2, 1},
                               {TX_FUSION_BWD_ACT_BIAS, 3, 2}, {0, 5, 1},
                               {TX_FUSION_BWD_BIAS_QUANTIZE, 6, 1}, {0, 7, 1}}};
    for (int step = 0; step < 2; step++) {
        qa.cfg.step = qb.cfg.step = (uint64_t)step;
        tx_group_run *ra = run_both(&b, &qa.cfg, &u, &u), *rb = run_both(&b, &qb.cfg, &fw, &bw);
        assert_int_equal(compare(&b, ra, rb, true), 0);
        tx_group_run_free(ra);
        tx_group_run_free(rb);
        tx_group_update_recipe_state(&qa.cfg);
        tx_group_update_recipe_state(&qb.cfg);
        assert_memory_equal(sa.scale, sb.scale, qa.cfg.n_quant * sizeof(float));
        assert_memory_equal(sa.history, sb.history, 4 * qa.cfg.n_quant * sizeof(float));
    }
    bool moved = false;
    for (size_t i = 0; i < qa.cfg.n_quant; i++) moved |= sa.scale[i] != 1.0f;
    assert_true(moved);
    tx_delayed_free(&sa);
    tx_delayed_free(&sb);
    free_group(&b);
}

/* Layouts that break the rules are refused with a reason, never run. */
static void bad_layouts_refused(void **state)
{
    (void)state;
    rng_state = 7;
    built_group b;
    group_te_mlp(&b);
    qsetup q;
    make_quant(&q, &b, TX_RECIPE_NONE, false);
    tx_group_run *r = NULL;
    /* a backward fusion in the forward layout */
    layout l = {.n = 0};
    for (int i = 0; i < b.g.n_ops; i++) l.k[l.n++] = (tx_plan_kernel){0, i, 1};
    l.k[0] = (tx_plan_kernel){TX_FUSION_BWD_ADD_NORM, 0, 2};
    memmove(&l.k[1], &l.k[2], (size_t)(l.n - 2) * sizeof l.k[0]);
    l.n--;
    teexec_status *st = tx_group_forward(&b.g, &q.cfg, l.k, l.n, b.x, &r);
    assert_non_null(st);
    assert_null(r);
    assert_non_null(strstr(teexec_status_message(st), "backward pass"));
    teexec_status_destroy(st);
    /* norm-quantize without a recipe: nothing to hand off to */
    layout h = {.n = 0};
    for (int i = 0; i < b.g.n_ops; i++) h.k[h.n++] = (tx_plan_kernel){0, i, 1};
    h.k[1].fusion = TX_FUSION_FWD_NORM_QUANTIZE;
    st = tx_group_forward(&b.g, &q.cfg, h.k, h.n, b.x, &r);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "no quantized Linear input"));
    teexec_status_destroy(st);
    /* a gap */
    h.k[1] = (tx_plan_kernel){0, 2, 1};
    st = tx_group_forward(&b.g, &q.cfg, h.k, h.n, b.x, &r);
    assert_non_null(st);
    teexec_status_destroy(st);
    free_group(&b);
}

/* ---- HYBRID: the planner declines E4M3-only grad hand-off -------------------- */

/* A group of the plan as the executor's ops: node order, default
 * attributes (the model sets none), params given by the test, channels
 * from the graph's value producers. */
static void group_from_plan(const fx *f, const tx_plan_group *grp, built_group *b,
                            tx_tensor *const *params_by_node)
{
    init_group(b, "planned");
    const tx_ir_graph *g = f->ir->graph;
    for (int32_t j = 0; j < grp->n_nodes; j++) {
        const tx_ir_node *nd = &g->nodes[grp->nodes[j]];
        int i = add_op(b, grp->ops[j]);
        b->ops[i].node = grp->nodes[j];
        b->ops[i].name = nd->name;
        const tx_te_op_schema *s = tx_te_schema(grp->ops[j]);
        for (int e = 0; e < s->n_extra_inputs; e++) {
            int32_t v = nd->inputs[1 + e];
            int32_t prod = g->values[v].producer;
            for (int32_t q = 0; q < j; q++)
                if (grp->nodes[q] == prod) b->ops[i].channel_from[e] = q;
        }
        if (params_by_node[grp->nodes[j]]) add_param(b, i, params_by_node[grp->nodes[j]]);
    }
}

/* Overwrites t with values of `bits` significant bits, ±m·2^-e with m in
 * [2^(bits-1), 2^bits) and e in [e_lo, e_hi]: 4 bits are exact in E4M3, 3
 * in E5M2, under any block scale (TE's test_fusible_ops makes its data
 * representable the same way). */
static void representable(tx_tensor *t, int e_lo, int e_hi, int bits)
{
    float *p = t->data;
    int lo = 1 << (bits - 1);
    for (uint64_t i = 0; i < t->numel; i++) {
        float m = (float)(lo + (int)(urand() * (float)lo));
        int e = e_lo + (int)(urand() * (float)(e_hi - e_lo + 1));
        p[i] = (urand() < 0.5f ? -m : m) * ldexpf(1.0f, -e);
    }
}

/* The same computation in float64, unfused: the reference. */
static tx_tensor *to_f64(const tx_tensor *t)
{
    tx_tensor *d = calloc(1, sizeof *d);
    assert_non_null(d);
    assert_null(tx_tensor_alloc(d, TEEXEC_DTYPE_DOUBLE, t->rank, t->dims));
    for (uint64_t i = 0; i < t->numel; i++) ((double *)d->data)[i] = ((const float *)t->data)[i];
    return d;
}

static void within(const char *what, const tx_tensor *got, const tx_tensor *ref, double rtol,
                   double atol)
{
    assert_non_null(got);
    assert_non_null(ref);
    assert_int_equal(got->numel, ref->numel);
    double worst = 0.0;
    uint64_t at = 0;
    for (uint64_t i = 0; i < got->numel; i++) {
        double a = ((const float *)got->data)[i], r = ((const double *)ref->data)[i];
        double excess = fabs(a - r) - (atol + rtol * fabs(r));
        if (excess > worst) {
            worst = excess;
            at = i;
        }
    }
    if (worst > 0.0)
        fail_msg("%s: outside rtol %g atol %g by %g at %llu (%g vs %g)", what, rtol, atol, worst,
                 (unsigned long long)at, ((const float *)got->data)[at],
                 ((const double *)ref->data)[at]);
}

/* ||got - ref|| / ||ref|| <= rtol. */
static void within_norm(const char *what, const tx_tensor *got, const tx_tensor *ref, double rtol)
{
    assert_non_null(got);
    assert_non_null(ref);
    assert_int_equal(got->numel, ref->numel);
    double num = 0.0, den = 0.0;
    for (uint64_t i = 0; i < got->numel; i++) {
        double r = ((const double *)ref->data)[i], d = ((const float *)got->data)[i] - r;
        num += d * d;
        den += r * r;
    }
    double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
    print_message("%s: normwise relative error %.4f\n", what, rel);
    if (rel > rtol) fail_msg("%s: normwise relative error %g > %g", what, rel, rtol);
}

static void hybrid_declines_e4m3_grad_handoff(void **state)
{
    (void)state;
    rng_state = 4242;
    Onnx__GraphProto *g;
    Onnx__ModelProto *m = fx_model(&g, "hybrid_mlp");
    /* small K on purpose: the quantization noise of fc2's input grows
     * with sqrt(K), and the tolerance is the per-op one */
    enum { H2 = 32, F2 = 64 };
    mb_input(g, "x", FX_FLOAT, "64,32");
    mb_output(g, "y", FX_FLOAT, "64,32");
    fx_param(g, "w1", "64,32");
    fx_param(g, "b1", "64");
    fx_param(g, "w2", "32,64");
    fx_param(g, "b2", "32");
    fx_te(g, "fc1", "Linear", "x,w1", "h1");
    fx_te(g, "bias1", "Bias", "h1,b1", "h2");
    fx_te(g, "gelu", "GELU", "h2", "h3");
    fx_te(g, "fc2", "Linear", "h3,w2", "h4");
    fx_te(g, "bias2", "Bias", "h4,b2", "y");
    fx f;
    fx_open_model(&f, m);
    bool needs[1] = {true};
    fx_req req = {.recipe = "mxfp8:hybrid", .device = "sm_100", .training = true,
                  .input_needs_grad = needs, .n_inputs = 1};
    fx_plan(&f, &req);
    const char *why = fx_decline(&f, TX_FUSION_BWD_ACT_BIAS, "bias1");
    assert_non_null(why);
    assert_non_null(strstr(why, "E5M2"));
    const tx_plan_group *grp = fx_group_of(&f, "fc1");
    assert_int_equal(grp->kind, TX_GROUP_CHAIN);
    for (int32_t k = 0; k < grp->n_backward; k++)
        assert_int_not_equal(grp->backward[k].fusion, TX_FUSION_BWD_ACT_BIAS);

    /* parameters by node index; the planner only saw their shapes */
    size_t nn = f.ir->graph->n_nodes;
    tx_tensor **pn = calloc(nn, sizeof *pn), **pn2 = calloc(nn, sizeof *pn2);
    assert_non_null(pn);
    assert_non_null(pn2);
    built_group b;
    for (int32_t j = 0; j < grp->n_nodes; j++) {
        tx_te_op_id op = grp->ops[j];
        int32_t nd = grp->nodes[j];
        bool first = f.ir->graph->nodes[nd].name[2] == '1';
        if (op == TX_TE_LINEAR) pn[nd] = t2(first ? F2 : H2, first ? H2 : F2, -0.15f, 0.15f);
        if (op == TX_TE_BIAS) pn[nd] = t1(j == 1 ? F2 : H2, -0.5f, 0.5f);
    }
    group_from_plan(&f, grp, &b, pn);
    b.x = t2(M, H2, -2.0f, 2.0f);
    b.dy = t2(M, H2, -1.0f, 1.0f);
    representable(b.x, 3, 4, 4);
    representable(b.dy, 3, 4, 3); /* HYBRID grads are E5M2 */
    for (int32_t j = 0; j < grp->n_nodes; j++)
        if (pn[grp->nodes[j]] && grp->ops[j] == TX_TE_LINEAR)
            representable(pn[grp->nodes[j]], j == 0 ? 6 : 7, j == 0 ? 7 : 8, 4);

    tx_group_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.recipe = f.plan->recipe;
    cfg.quant = f.plan->quant;
    cfg.n_quant = f.plan->n_quant;
    cfg.training = true;
    cfg.seed = 5;
    int n_grad_q = 0;
    for (size_t i = 0; i < f.plan->n_quant; i++)
        if (f.plan->quant[i].operand == TX_QOP_GRAD_OUTPUT && f.plan->quant[i].quantized) {
            assert_int_equal(f.plan->quant[i].data_dtype, TEEXEC_DTYPE_FLOAT8E5M2);
            n_grad_q++;
        }
    assert_int_equal(n_grad_q, 2);

    layout pf = {.n = 0}, pb = {.n = 0}, u = {.n = 0};
    for (int32_t k = 0; k < grp->n_forward; k++) pf.k[pf.n++] = grp->forward[k];
    for (int32_t k = 0; k < grp->n_backward; k++) pb.k[pb.n++] = grp->backward[k];
    for (int i = 0; i < b.g.n_ops; i++) u.k[u.n++] = (tx_plan_kernel){0, i, 1};
    tx_group_run *planned = run_both(&b, &cfg, &pf, &pb);
    tx_group_run *unfused = run_both(&b, &cfg, &u, &u);
    assert_int_equal(compare(&b, unfused, planned, true), 0);

    /* forcing the declined fusion on anyway must not reinterpret E5M2
     * bytes: the executor quantizes with the Linear's own (E5M2) config, so
     * the result still equals the unfused one */
    layout forced = {.n = 0};
    for (int i = 0; i < b.g.n_ops; i++) {
        if (i == 1) {
            forced.k[forced.n++] = (tx_plan_kernel){TX_FUSION_BWD_ACT_BIAS, 1, 2};
            i++;
            continue;
        }
        forced.k[forced.n++] = (tx_plan_kernel){0, i, 1};
    }
    tx_group_run *fr = run_both(&b, &cfg, &u, &forced);
    assert_int_equal(compare(&b, unfused, fr, true), 0);
    tx_group_run_free(fr);

    /* FP64 reference of the same model (unquantized, float64 tensors) */
    built_group d;
    for (int32_t j = 0; j < grp->n_nodes; j++)
        if (pn[grp->nodes[j]]) pn2[grp->nodes[j]] = to_f64(pn[grp->nodes[j]]);
    group_from_plan(&f, grp, &d, pn2);
    d.x = to_f64(b.x);
    d.dy = to_f64(b.dy);
    tx_group_config c64;
    memset(&c64, 0, sizeof c64);
    c64.training = true;
    tx_group_run *ref = run_both(&d, &c64, &u, &u);
    {
        /* the harness itself: unquantized fp32 equals FP64 to fp32 tolerance */
        tx_group_config c32 = c64;
        tx_group_run *r32 = run_both(&b, &c32, &u, &u);
        within("fp32 output", tx_group_output(r32), tx_group_output(ref), 1e-5, 1e-5);
        within("fp32 dx", tx_group_grad_input(r32), tx_group_grad_input(ref), 1e-5, 1e-5);
        within("fp32 dw1", tx_group_grad_param(r32, 0, 0), tx_group_grad_param(ref, 0, 0), 1e-5, 1e-5);
        tx_group_run_free(r32);
    }
    /* forward: E4M3 operands, FP8 tolerance; grads: HYBRID's E5M2 grad
     * operands, TE's E5M2 tolerance (te-ops.md section 6) */
    within("output", tx_group_output(planned), tx_group_output(ref), 0.125, 0.0675);
    within("dx", tx_group_grad_input(planned), tx_group_grad_input(ref), 0.25, 0.125);
    within("db1", tx_group_grad_param(planned, 1, 0), tx_group_grad_param(ref, 1, 0), 0.25, 0.125);
    within("db2", tx_group_grad_param(planned, 4, 0), tx_group_grad_param(ref, 4, 0), 0.25, 0.125);
    /* weight grads sum 64 token products of two quantized operands and
     * cancel to near zero in places (an element 0.5 of a matrix reaching
     * 30), so they are held to the FP8 rtol normwise */
    within_norm("dw1", tx_group_grad_param(planned, 0, 0), tx_group_grad_param(ref, 0, 0), 0.125);
    within_norm("dw2", tx_group_grad_param(planned, 3, 0), tx_group_grad_param(ref, 3, 0), 0.125);
    tx_group_run_free(ref);
    tx_group_run_free(planned);
    tx_group_run_free(unfused);
    free_group(&b);
    free_group(&d);
    free(pn);
    free(pn2);
    fx_free(&f);
    mb_free_all();
}

/* ---- the te.ops sample models ------------------------------------------------- */

/* A random tensor of a value's type from shape inference. */
static tx_tensor *random_like_value(const fx *f, int32_t v, int64_t rows_hint)
{
    const tx_infer_value *iv = &f->vals[v];
    assert_true(iv->shape_known);
    tx_tensor *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_null(tx_tensor_alloc(t, iv->dtype, iv->shape.rank, iv->shape.dims));
    if (iv->dtype == TEEXEC_DTYPE_INT64) {
        /* split sizes: uneven, one empty group, rows past the end */
        int64_t *p = t->data, left = rows_hint;
        for (uint64_t i = 0; i < t->numel; i++) {
            int64_t s = i == 1 ? 0 : left / 2;
            p[i] = s;
            left -= s;
        }
    } else {
        assert_int_equal(iv->dtype, TEEXEC_DTYPE_FLOAT);
        float *p = t->data;
        for (uint64_t i = 0; i < t->numel; i++) p[i] = -1.0f + 2.0f * urand();
    }
    return t;
}

static void read_attrs(const tx_ir_node *nd, const tx_te_op_schema *s, tx_te_attr_value *out)
{
    tx_te_attr_defaults(s, out);
    for (int i = 0; i < s->n_attrs; i++) {
        const tx_te_attr_schema *a = &s->attrs[i];
        if (!tx_ir_attr_find(nd, a->name)) continue;
        if (a->type == TX_TE_ATTR_INT) {
            assert_null(tx_ir_attr_int(nd, a->name, a->def_i, &out[i].i));
        } else if (a->type == TX_TE_ATTR_FLOAT) {
            float v;
            assert_null(tx_ir_attr_float(nd, a->name, (float)a->def_f, &v));
            out[i].f = v;
        } else if (a->type == TX_TE_ATTR_ENUM) {
            const char *str;
            assert_null(tx_ir_attr_string(nd, a->name, "", &str, NULL));
            out[i].i = tx_te_attr_enum_index(a, str);
        } else {
            const int64_t *v;
            size_t cnt;
            assert_null(tx_ir_attr_ints(nd, a->name, &v, &cnt));
            out[i].ints = v;
            out[i].n_ints = (int32_t)cnt;
        }
    }
}

/* Group grp of a planned model as executor ops, with random parameters and
 * external tensors of the model's shapes (the contract needs only shapes). */
static bool group_from_model(const fx *f, const tx_plan_group *grp, built_group *b)
{
    const tx_ir_graph *g = f->ir->graph;
    init_group(b, g->nodes[grp->nodes[0]].name);
    for (int32_t j = 0; j < grp->n_nodes; j++)
        if (grp->ops[j] == TX_TE_DOT_PRODUCT_ATTENTION || grp->ops[j] == TX_TE_EMBEDDING ||
            grp->ops[j] == TX_TE_DROPOUT)
            return false; /* no fusion touches them; their own tests cover them */
    int64_t rows = 0;
    for (int32_t j = 0; j < grp->n_nodes; j++) {
        const tx_ir_node *nd = &g->nodes[grp->nodes[j]];
        const tx_te_op_schema *s = tx_te_schema(grp->ops[j]);
        int i = add_op(b, grp->ops[j]);
        b->ops[i].node = grp->nodes[j];
        b->ops[i].name = nd->name;
        read_attrs(nd, s, b->attrs[i]);
        if (j == 0) {
            const tx_infer_value *iv = &f->vals[nd->inputs[0]];
            rows = iv->shape.rank ? (int64_t)(iv->shape.rank > 1 ? iv->shape.dims[0] * (iv->shape.rank > 2 ? iv->shape.dims[1] : 1) : 1) : 1;
            b->x = random_like_value(f, nd->inputs[0], rows);
        }
        for (int e = 0; e < s->n_extra_inputs; e++) {
            if ((size_t)(1 + e) >= nd->n_inputs || nd->inputs[1 + e] < 0) continue;
            int32_t v = nd->inputs[1 + e], prod = g->values[v].producer;
            bool chan = false;
            for (int32_t q = 0; q < j; q++)
                if (grp->nodes[q] == prod) {
                    b->ops[i].channel_from[e] = q;
                    chan = true;
                }
            if (!chan) b->extras[i][e] = keep(b, random_like_value(f, v, rows));
        }
        int np = 0;
        assert_null(tx_te_param_count(s, b->attrs[i], &np));
        for (int p = 0; p < np; p++)
            add_param(b, i, random_like_value(f, nd->inputs[1 + s->n_extra_inputs + p], rows));
        if (j == grp->n_nodes - 1) b->dy = random_like_value(f, nd->outputs[0], rows);
    }
    return true;
}

static void te_models_all_layouts(void **state)
{
    (void)state;
    static const char *models[] = {"te_mlp", "te_gpt2_block", "te_llama_block", "te_moe_block"};
    static const char *recipes[] = {"none", "fp8-current", "mxfp8", "nvfp4"};
    static const tx_recipe_kind kinds[] = {TX_RECIPE_NONE, TX_RECIPE_FP8_CURRENT, TX_RECIPE_MXFP8,
                                           TX_RECIPE_NVFP4};
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    if (!root) root = ".";
    sweep_stats stats;
    memset(&stats, 0, sizeof stats);
    int groups = 0;
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s/model.onnx", root, models[mi]);
        for (size_t ri = 0; ri < 4; ri++) {
            fx f;
            fx_open_file(&f, path);
            size_t n_in = 0;
            for (size_t v = 0; v < f.ir->graph->n_values; v++)
                if ((f.ir->graph->values[v].flags & TX_IR_VALUE_GRAPH_INPUT) &&
                    !(f.ir->graph->values[v].flags & TX_IR_VALUE_INITIALIZER))
                    n_in++;
            bool needs[8] = {true, false, false, false, false, false, false, false};
            fx_req req = {.recipe = recipes[ri], .device = "sm_90", .training = true,
                          .input_needs_grad = needs, .n_inputs = n_in};
            fx_plan(&f, &req);
            for (size_t gi = 0; gi < f.plan->n_groups; gi++) {
                const tx_plan_group *grp = &f.plan->groups[gi];
                if (grp->kind != TX_GROUP_CHAIN) continue;
                built_group b;
                rng_state = 77 + gi;
                if (!group_from_model(&f, grp, &b)) {
                    free_group(&b);
                    continue;
                }
                tx_group_config cfg;
                memset(&cfg, 0, sizeof cfg);
                cfg.recipe = f.plan->recipe;
                cfg.quant = f.plan->quant;
                cfg.n_quant = f.plan->n_quant;
                cfg.training = true;
                cfg.seed = 11;
                cfg.step = 2;
                /* the planner's own layouts first: they must run and match */
                layout pf = {.n = 0}, pb = {.n = 0}, u = {.n = 0};
                for (int32_t k = 0; k < grp->n_forward; k++) pf.k[pf.n++] = grp->forward[k];
                for (int32_t k = 0; k < grp->n_backward; k++)
                    pb.k[pb.n++] = grp->backward[k];
                for (int i = 0; i < b.g.n_ops; i++) u.k[u.n++] = (tx_plan_kernel){0, i, 1};
                if (grp->first_op_requiring_backward == 0 && grp->n_joint == 0) {
                    tx_group_run *p = run_both(&b, &cfg, &pf, &pb);
                    tx_group_run *q = run_both(&b, &cfg, &u, &u);
                    if (compare(&b, q, p, true))
                        fail_msg("%s %s group %zu: the planner's layouts differ from unfused",
                                 models[mi], recipes[ri], gi);
                    tx_group_run_free(p);
                    tx_group_run_free(q);
                }
                sweep(&b, kinds[ri], f.plan->recipe.hybrid, &stats, &cfg);
                groups++;
                free_group(&b);
            }
            fx_free(&f);
        }
    }
    print_message("models: %d groups x recipes, %ld layout combinations byte-identical\n", groups,
                  stats.runs);
    assert_true(groups >= 8);
}

int main(void)
{
    (void)fx_layout; /* the shared fixture's; unused here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(comparison_detects_differences),
        cmocka_unit_test(bad_layouts_refused),
        cmocka_unit_test(fp8_delayed_two_steps),
        cmocka_unit_test(hybrid_declines_e4m3_grad_handoff),
        cmocka_unit_test(te_models_all_layouts),
        cmocka_unit_test(recipe_none),
        cmocka_unit_test(recipe_fp8_current),
        cmocka_unit_test(recipe_fp8_current_hybrid),
        cmocka_unit_test(recipe_mxfp8),
        cmocka_unit_test(recipe_nvfp4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
