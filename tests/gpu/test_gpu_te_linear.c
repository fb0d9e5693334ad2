/* GPU test: te.ops Linear on the GPU (exec/cuda/te_cuda_linear.c) and the
 * Linear fusions (te_cuda_linear_fused.c).
 *  - recipe none, fp32 and bf16: forward and backward against the CPU
 *    kernel (tx_te_cpu_forward / _backward) on the same inputs, and a
 *    second forward + backward giving the same bits;
 *  - fp8-current (E4M3 and hybrid), fp8-delayed, fp8-block, mxfp8, nvfp4:
 *    against the CPU group executor (exec/group_exec.h) with a hand-made
 *    quantization plan, within DESIGN.md's FP8 / NVFP4 tolerances; the
 *    columnwise copies of x and w the node keeps in its state equal the CPU
 *    quantizer's bytes, and fp8-delayed records the CPU's amaxes;
 *  - each fusion (FWD_LINEAR_BIAS_ACT with GELU tanh / erf, ReLU, none,
 *    FWD_LINEAR_BIAS_ADD with and without Bias, FWD_LINEAR_SCALE_ADD,
 *    BWD_LINEAR_ADD with and without the extra grad, BWD_LINEAR_SCALE)
 *    against the unfused CPU ops, in fp32 and bf16, including the tensors
 *    the unfused backward reads (the activation's input);
 *  - FWD_LINEAR_BIAS_ADD and BWD_LINEAR_ADD under fp8-current, mxfp8 and
 *    nvfp4, and Linear + Bias + GELU (FWD_LINEAR_BIAS_ACT) under
 *    fp8-current, fp8-block, mxfp8 and nvfp4, against the group executor
 *    running the same fused layouts (the Linear's state bytes included);
 *  - inference (no grads): rowwise-only state, forward as the CPU's;
 *  - forward + backward captured in a CUDA graph on a stream of its own and
 *    replayed (no host synchronization, no allocation): the eager bits.
 * fp32 here compares two fp32 GEMMs summing in different orders (rtol and
 * atol 1e-5 of the largest value, TF32 off; 1e-4 after cuBLASLt's GELU
 * epilogue, whose tanh is its own); bf16 uses DESIGN.md's 1.6e-2 with an
 * atol of 1e-4 of the largest value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "exec/quant_operand.h"
#include "exec/cuda/te_cuda_linear.h"
#include "exec/group_exec.h"
#include "exec/recipe_delayed.h"
#include "kernels/cpu/te_args.h"
#include "kernels/cuda/gemm_lt.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

#define WS_BYTES (((size_t)32 << 20) + 1024)

static tx_cuda_env g_env;
static tx_gemm_lt *g_h;

/* ---- tensors ---------------------------------------------------------------- */

static tx_tensor dev_new(teexec_dtype dt, int rank, const int64_t *dims)
{
    tx_tensor h = {0};
    TG_OK(tx_tensor_alloc(&h, dt, rank, dims));
    tx_tensor d = h;
    d.data = tg_dev_alloc(h.nbytes ? h.nbytes : 1);
    d.owns_data = false;
    tx_tensor_release(&h);
    return d;
}

static tx_tensor dev_copy(const tx_tensor *h)
{
    tx_tensor d = *h;
    d.data = tg_dev_upload(h->data, h->nbytes);
    d.owns_data = false;
    return d;
}

static void dev_free(tx_tensor *d)
{
    if (d->data) tg_dev_free(d->data);
    d->data = NULL;
}

static tx_tensor host_like(const tx_tensor *t)
{
    tx_tensor h = {0};
    TG_OK(tx_tensor_alloc(&h, t->dtype, t->rank, t->dims));
    return h;
}

static double max_abs(const tx_tensor *t)
{
    double m = 0;
    for (uint64_t i = 0; i < t->numel; i++) m = fmax(m, fabs(ku_get(t, i)));
    return m;
}

/* recipe none: see the top */
static void expect_none(const char *what, const tx_tensor *ref, const tx_tensor *dev)
{
    assert_int_equal(ref->numel, dev->numel);
    assert_int_equal(ref->dtype, dev->dtype);
    bool f32 = ref->dtype == KU_F32, f16 = ref->dtype == KU_F16;
    double m = max_abs(ref);
    /* 16-bit outputs: one rounding of the FP32 sum on either side (2^-8
     * relative in bf16, 2^-11 in fp16) */
    ku_expect_close(what, ref, dev->data, f32 ? 1e-5 : f16 ? 2e-3 : 1.6e-2,
                    (f32 ? 1e-5 : 1e-4) * m);
}

/* A fused kernel against the unfused CPU ops: in bf16 the unfused path
 * rounds each intermediate (the Linear's output before the bias or the
 * residual is added) to bf16, which costs up to one bf16 ulp of the
 * intermediate where the sum cancels: an atol of a quarter of the
 * tolerance at the tensor's scale (as test_gpu_chain's floor). */
static void expect_fused(const char *what, const tx_tensor *ref, const tx_tensor *dev)
{
    if (ref->dtype == KU_F32) {
        expect_none(what, ref, dev);
        return;
    }
    ku_expect_close(what, ref, dev->data, 1.6e-2, 0.25 * 1.6e-2 * max_abs(ref));
}

static void *dev_opt(size_t bytes) { return bytes ? tg_dev_alloc(bytes) : NULL; }

static tx_cuda_te_desc desc_of(tx_te_op_id op, const char *name, const tx_te_attr_value *attrs,
                               const tx_tensor *in, const tx_tensor *const *extra, int n_extra,
                               const tx_tensor *const *params, int n_params,
                               const tx_tensor *out)
{
    tx_cuda_te_desc d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.name = name;
    d.attrs = attrs;
    d.input = in;
    d.extra_inputs = extra;
    d.n_extra_inputs = n_extra;
    d.params = params;
    d.n_params = n_params;
    d.output = out;
    d.training = true;
    d.needs = TX_TE_FOR_ALL;
    d.sm = g_env.sm;
    return d;
}

static void cpu_fwd(tx_te_op_id op, const tx_te_attr_value *attrs, const tx_tensor *in,
                    const tx_tensor *extra, const tx_tensor *param, tx_tensor *out)
{
    const tx_tensor *ext[1] = {extra}, *par[1] = {param};
    tx_te_fwd_args a;
    memset(&a, 0, sizeof a);
    a.op = op;
    a.attrs = attrs;
    a.input = in;
    a.extra_inputs = ext;
    a.n_extra_inputs = extra ? 1 : 0;
    a.params = par;
    a.n_params = param ? 1 : 0;
    a.output = out;
    TG_OK(tx_te_cpu_forward(&a));
}

static void cpu_linear_bwd(const tx_tensor *x, const tx_tensor *w, const tx_tensor *dy,
                           tx_tensor *dx, tx_tensor *dw)
{
    const tx_tensor *saved[2] = {x, w};
    tx_tensor *gp[1] = {dw};
    tx_te_bwd_args b;
    memset(&b, 0, sizeof b);
    b.op = TX_TE_LINEAR;
    b.grad_output = dy;
    b.saved = saved;
    b.n_saved = 2;
    b.grad_input = dx;
    b.grad_params = gp;
    b.n_grad_params = 1;
    TG_OK(tx_te_cpu_backward(&b));
}

/* A prepared unfused Linear node with its device regions. */
typedef struct gpu_lin {
    const tx_cuda_te_impl *impl;
    void *priv;
    size_t state_bytes, scratch_bytes;
    void *state, *scratch;
} gpu_lin;

static void gpu_lin_prepare(gpu_lin *g, const tx_cuda_te_desc *d)
{
    memset(g, 0, sizeof *g);
    g->impl = tx_cuda_te_linear_impl(TX_TE_LINEAR);
    assert_non_null(g->impl);
    TG_OK(g->impl->prepare(d, &g->priv, &g->state_bytes, &g->scratch_bytes));
    g->state = dev_opt(g->state_bytes);
    g->scratch = dev_opt(g->scratch_bytes);
}

static void gpu_lin_free(gpu_lin *g)
{
    g->impl->free_priv(g->priv);
    if (g->state) tg_dev_free(g->state);
    if (g->scratch) tg_dev_free(g->scratch);
}

static void gpu_lin_call(gpu_lin *g, const tx_cuda_env *env, tx_tensor *x, tx_tensor *w,
                         tx_tensor *y, tx_tensor *dy, tx_tensor *dx, tx_tensor *dw)
{
    const tx_tensor *par[1] = {w};
    tx_te_fwd_args a;
    memset(&a, 0, sizeof a);
    a.op = TX_TE_LINEAR;
    a.input = x;
    a.params = par;
    a.n_params = 1;
    a.output = y;
    a.training = true;
    TG_OK(g->impl->forward(g->priv, &a, g->state, g->scratch, env));
    const tx_tensor *saved[2] = {x, w};
    tx_tensor *gp[1] = {dw};
    tx_te_bwd_args b;
    memset(&b, 0, sizeof b);
    b.op = TX_TE_LINEAR;
    b.grad_output = dy;
    b.saved = saved;
    b.n_saved = 2;
    b.grad_input = dx;
    b.grad_params = gp;
    b.n_grad_params = 1;
    TG_OK(g->impl->backward(g->priv, &b, g->state, g->scratch, env));
}

static void gpu_lin_run(gpu_lin *g, tx_tensor *x, tx_tensor *w, tx_tensor *y, tx_tensor *dy,
                        tx_tensor *dx, tx_tensor *dw)
{
    gpu_lin_call(g, &g_env, x, w, y, dy, dx, dw);
    tg_sync("linear forward + backward");
}

/* ---- recipe none ------------------------------------------------------------ */

static void run_none(teexec_dtype dt)
{
    const char *tag = dt == KU_F32 ? "fp32" : dt == KU_F16 ? "fp16" : "bf16";
    int64_t xd[3] = {2, 24, 64}, wd[2] = {96, 64}, yd[3] = {2, 24, 96};
    ku_seed(dt == KU_F32 ? 11 : dt == KU_F16 ? 13 : 12);
    tx_tensor x, w, dy;
    ku_make(&x, dt, 3, xd, -2.0, 2.0);
    ku_make(&w, dt, 2, wd, -0.2, 0.2);
    ku_make(&dy, dt, 3, yd, -1.0, 1.0);
    tx_tensor y_ref = host_like(&dy), dx_ref = host_like(&x), dw_ref = host_like(&w);
    cpu_fwd(TX_TE_LINEAR, NULL, &x, NULL, &w, &y_ref);
    cpu_linear_bwd(&x, &w, &dy, &dx_ref, &dw_ref);

    const tx_tensor *par[1] = {&w};
    tx_cuda_te_desc d = desc_of(TX_TE_LINEAR, "fc", NULL, &x, NULL, 0, par, 1, &y_ref);
    gpu_lin g;
    gpu_lin_prepare(&g, &d);
    assert_int_equal(g.state_bytes, 0); /* nothing quantized: nothing kept */
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gdy = dev_copy(&dy);
    tx_tensor gy = dev_new(dt, 3, yd), gdx = dev_new(dt, 3, xd), gdw = dev_new(dt, 2, wd);
    gpu_lin_run(&g, &gx, &gw, &gy, &gdy, &gdx, &gdw);
    char what[96];
    snprintf(what, sizeof what, "linear_none_%s y", tag);
    expect_none(what, &y_ref, &gy);
    snprintf(what, sizeof what, "linear_none_%s dx", tag);
    expect_none(what, &dx_ref, &gdx);
    snprintf(what, sizeof what, "linear_none_%s dw", tag);
    expect_none(what, &dw_ref, &gdw);
    /* determinism: the same call again gives the same bits */
    tx_tensor y1 = host_like(&y_ref), dw1 = host_like(&w);
    tg_download(y1.data, gy.data, y1.nbytes);
    tg_download(dw1.data, gdw.data, dw1.nbytes);
    gpu_lin_run(&g, &gx, &gw, &gy, &gdy, &gdx, &gdw);
    snprintf(what, sizeof what, "linear_none_%s y rerun", tag);
    ku_expect_bits(what, &y1, gy.data);
    snprintf(what, sizeof what, "linear_none_%s dw rerun", tag);
    ku_expect_bits(what, &dw1, gdw.data);

    gpu_lin_free(&g);
    tx_tensor *dev[] = {&gx, &gw, &gdy, &gy, &gdx, &gdw};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &dy, &y_ref, &dx_ref, &dw_ref, &y1, &dw1};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

static void test_none_fp32(void **s) { (void)s; run_none(KU_F32); }
static void test_none_bf16(void **s) { (void)s; run_none(KU_BF16); }
static void test_none_fp16(void **s) { (void)s; run_none(KU_F16); }

/* ---- recipes ---------------------------------------------------------------- */

typedef struct qcase {
    const char *name;
    tx_recipe_kind kind;
    bool hybrid;
} qcase;

enum { SEED = 99, STEP = 5 };

/* The quantization plan of one Linear (node `node`): x, w, dy. */
static void make_plan(tx_plan_quant q[3], tx_recipe_kind kind, bool hybrid, int32_t node)
{
    memset(q, 0, 3 * sizeof q[0]);
    for (int o = 0; o < 3; o++) {
        tx_plan_quant *e = &q[o];
        e->node = node;
        e->operand = (tx_qoperand)o;
        e->quantized = true;
        e->producer = -1;
        e->delayed_slot = -1;
        e->block_rows = e->block_cols = 1;
        bool grad = o == TX_QOP_GRAD_OUTPUT, wt = o == TX_QOP_WEIGHT;
        teexec_dtype fp8 = grad && hybrid ? TEEXEC_DTYPE_FLOAT8E5M2 : TEEXEC_DTYPE_FLOAT8E4M3FN;
        switch (kind) {
        case TX_RECIPE_FP8_DELAYED:
            e->delayed_slot = o;
            /* fall through */
        case TX_RECIPE_FP8_CURRENT:
            e->kind = TX_QKIND_FP8_TENSOR;
            e->data_dtype = fp8;
            break;
        case TX_RECIPE_FP8_BLOCK:
            e->kind = TX_QKIND_FP8_BLOCK;
            e->data_dtype = TEEXEC_DTYPE_FLOAT8E4M3FN;
            e->block_rows = wt ? 128 : 1;
            e->block_cols = 128;
            break;
        case TX_RECIPE_MXFP8:
            e->kind = TX_QKIND_MXFP8;
            e->data_dtype = fp8;
            e->block_cols = 32;
            break;
        default:
            e->kind = TX_QKIND_NVFP4;
            e->data_dtype = TEEXEC_DTYPE_FLOAT4E2M1;
            e->block_rows = wt ? 16 : 1;
            e->block_cols = 16;
            break;
        }
    }
}

static void make_cfg(tx_group_config *cfg, tx_recipe_kind kind, bool hybrid, const tx_plan_quant *q)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->recipe.kind = kind;
    cfg->recipe.hybrid = hybrid;
    cfg->recipe.nvfp4_rht = true;
    cfg->recipe.nvfp4_stochastic = true;
    cfg->recipe.nvfp4_2d_weights = true;
    cfg->recipe.compute_dtype = KU_BF16;
    cfg->quant = q;
    cfg->n_quant = 3;
    cfg->seed = SEED;
    cfg->step = STEP;
    cfg->training = true;
}

/* The GPU quantizer of a plan entry, by the CPU group executor's rule
 * (exec/group_exec.c, quantizer()); the native GEMM as the planner picks
 * it on an H200 (FP8 per-tensor and block; MXFP8 / NVFP4 emulated). */
static tx_cuda_operand_q gpu_q(const tx_plan_quant *e, const tx_group_config *cfg, float *dscale,
                               float *damax)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    /* the executor's mapping from a plan entry (exec/quant_operand.h) */
    q.on = tx_quant_operand_config(e, 1, &cfg->recipe, e->node, e->operand, true, true,
                                   cfg->seed, cfg->step, &q.cfg) != NULL;
    assert_true(q.on);
    q.native = (e->kind == TX_QKIND_FP8_TENSOR || e->kind == TX_QKIND_FP8_BLOCK) && g_env.sm >= 89;
    if (e->delayed_slot >= 0) {
        q.delayed_scale = dscale;
        q.delayed_amax = damax;
    }
    return q;
}

static void tol_of(tx_recipe_kind kind, double *rtol, double *atol)
{
    bool fp4 = kind == TX_RECIPE_NVFP4;
    *rtol = fp4 ? 0.25 : 0.125;
    *atol = fp4 ? 0.125 : 0.0675;
}

/* Device floats of fp8-delayed: scale 1 (the first step) and amax. */
typedef struct delayed_dev {
    float *scale[3], *amax[3];
} delayed_dev;

static void delayed_dev_init(delayed_dev *d)
{
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < 3; i++) {
        d->scale[i] = tg_dev_upload(&one, sizeof one);
        d->amax[i] = tg_dev_upload(&zero, sizeof zero);
    }
}

static void delayed_dev_free(delayed_dev *d)
{
    for (int i = 0; i < 3; i++) {
        tg_dev_free(d->scale[i]);
        tg_dev_free(d->amax[i]);
    }
}

/* The bytes of one columnwise copy in the node's state against the CPU
 * quantizer's on the same source. */
static void expect_col_bytes(const char *what, const tx_cuda_lin_operand *o, const void *state,
                             size_t offset, const tx_tensor *src)
{
    tx_quant_config c = o->q.cfg;
    c.usage = TX_QUSAGE_COLUMNWISE;
    if (o->q.delayed_scale) {
        c.use_given_scale = true;
        c.given_scale = 1.0f;
    }
    tx_qtensor q;
    TG_OK(tx_quantize(src->data, src->dtype, o->rows, o->cols, &c, &q));
    assert_true(o->col_data != SIZE_MAX);
    uint8_t *got = malloc(q.col.data_bytes + 1);
    assert_non_null(got);
    tg_download(got, (const char *)state + offset + o->col_data, q.col.data_bytes);
    size_t diff = tg_cmp_bytes(what, q.col.data, got, q.col.data_bytes);
    char detail[96];
    snprintf(detail, sizeof detail, "%zu of %zu bytes differ", diff, q.col.data_bytes);
    tg_record(what, diff == 0, detail);
    free(got);
    tx_qtensor_free(&q);
    if (diff) fail_msg("%s: %s", what, detail);
}

static void run_recipe(void **state)
{
    const qcase *c = *state;
    int64_t xd[3] = {2, 32, 128}, wd[2] = {96, 128}, yd[3] = {2, 32, 96};
    ku_seed(1000 + (uint64_t)c->kind * 7 + c->hybrid);
    tx_tensor x, w, dy;
    ku_make(&x, KU_BF16, 3, xd, -2.0, 2.0);
    ku_make(&w, KU_BF16, 2, wd, -0.2, 0.2);
    ku_make(&dy, KU_BF16, 3, yd, -1.0, 1.0);

    /* CPU: the group executor on a group of one Linear */
    tx_plan_quant plan[3];
    make_plan(plan, c->kind, c->hybrid, 0);
    tx_group_config cfg;
    make_cfg(&cfg, c->kind, c->hybrid, plan);
    tx_delayed_state ds;
    memset(&ds, 0, sizeof ds);
    bool delayed = c->kind == TX_RECIPE_FP8_DELAYED;
    if (delayed) {
        teexec_dtype fmts[3] = {plan[0].data_dtype, plan[1].data_dtype, plan[2].data_dtype};
        TG_OK(tx_delayed_init(&ds, 4, 3, 0, TX_AMAX_MAX, fmts));
        cfg.delayed = &ds;
    }
    const tx_tensor *par[1] = {&w};
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_LINEAR), attrs);
    tx_group_op op;
    memset(&op, 0, sizeof op);
    op.op = TX_TE_LINEAR;
    op.node = 0;
    op.name = "fc";
    op.attrs = attrs;
    op.params = par;
    op.n_params = 1;
    op.params_need_grad = true;
    for (int k = 0; k < TX_TE_MAX_EXTRA; k++) op.channel_from[k] = -1;
    tx_group_desc grp = {.ops = &op, .n_ops = 1, .input_needs_grad = true};
    tx_plan_kernel layout[1] = {{TX_FUSION_NONE, 0, 1}};
    tx_group_run *run = NULL;
    TG_OK(tx_group_forward(&grp, &cfg, layout, 1, &x, &run));
    TG_OK(tx_group_backward(run, layout, 1, &dy, NULL));

    /* GPU */
    delayed_dev dd;
    delayed_dev_init(&dd);
    tx_cuda_linear_quant lq;
    lq.x = gpu_q(&plan[0], &cfg, dd.scale[0], dd.amax[0]);
    lq.w = gpu_q(&plan[1], &cfg, dd.scale[1], dd.amax[1]);
    lq.dy = gpu_q(&plan[2], &cfg, dd.scale[2], dd.amax[2]);
    tx_tensor y_like = host_like(&dy);
    tx_cuda_te_desc d = desc_of(TX_TE_LINEAR, "fc", attrs, &x, NULL, 0, par, 1, &y_like);
    d.quant = &lq;
    gpu_lin g;
    gpu_lin_prepare(&g, &d);
    g_env.step = STEP;
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gdy = dev_copy(&dy);
    tx_tensor gy = dev_new(KU_BF16, 3, yd), gdx = dev_new(KU_BF16, 3, xd),
              gdw = dev_new(KU_BF16, 2, wd);
    gpu_lin_run(&g, &gx, &gw, &gy, &gdy, &gdx, &gdw);

    double rtol, atol;
    tol_of(c->kind, &rtol, &atol);
    char what[96];
    snprintf(what, sizeof what, "linear_%s y", c->name);
    ku_expect_close(what, tx_group_output(run), gy.data, rtol, atol);
    snprintf(what, sizeof what, "linear_%s dx", c->name);
    ku_expect_close(what, tx_group_grad_input(run), gdx.data, rtol, atol);
    snprintf(what, sizeof what, "linear_%s dw", c->name);
    ku_expect_close(what, tx_group_grad_param(run, 0, 0), gdw.data, rtol, atol);
    /* the state keeps the columnwise copies the backward read */
    const tx_cuda_linear *l = g.priv;
    snprintf(what, sizeof what, "linear_%s state x columnwise", c->name);
    expect_col_bytes(what, &l->ox, g.state, l->st_x, &x);
    snprintf(what, sizeof what, "linear_%s state w columnwise", c->name);
    expect_col_bytes(what, &l->ow, g.state, l->st_w, &w);
    if (delayed) {
        /* the amaxes measured on x, w and dy: the CPU's history row 0 */
        float amax[3];
        for (int i = 0; i < 3; i++) tg_download(&amax[i], dd.amax[i], sizeof(float));
        size_t diff = tg_cmp_floats("fp8-delayed amax", ds.history, amax, 3);
        snprintf(what, sizeof what, "linear_%s recorded amax", c->name);
        tg_record(what, diff == 0, diff ? "differ from the CPU's" : "x, w, dy equal the CPU's");
        if (diff) fail_msg("%s differ", what);
    }

    gpu_lin_free(&g);
    delayed_dev_free(&dd);
    tx_group_run_free(run);
    if (delayed) tx_delayed_free(&ds);
    tx_tensor *dev[] = {&gx, &gw, &gdy, &gy, &gdx, &gdw};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &dy, &y_like};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

static const qcase qcases[] = {
    {"fp8_current", TX_RECIPE_FP8_CURRENT, false}, {"fp8_current_hybrid", TX_RECIPE_FP8_CURRENT, true},
    {"fp8_delayed", TX_RECIPE_FP8_DELAYED, false}, {"fp8_block", TX_RECIPE_FP8_BLOCK, false},
    {"mxfp8", TX_RECIPE_MXFP8, false},             {"nvfp4", TX_RECIPE_NVFP4, false},
};

/* ---- fusions, recipe none ------------------------------------------------------ */

/* Shapes of every fusion case: x [2, 24, 64], w [96, 64]. */
static const int64_t FX[3] = {2, 24, 64}, FW[2] = {96, 64}, FY[3] = {2, 24, 96}, FB[1] = {96};

typedef struct fused_run {
    const tx_cuda_fused_impl *impl;
    void *priv;
    size_t scratch_bytes;
    void *scratch;
} fused_run;

static void fused_prepare(fused_run *f, tx_fusion_id id, bool backward,
                          const tx_cuda_te_desc *const *descs, int n)
{
    memset(f, 0, sizeof *f);
    TG_OK(tx_cuda_fused_linear_prepare(id, backward, descs, NULL, n, &f->impl, &f->priv,
                                       &f->scratch_bytes));
    assert_non_null(f->impl);
    f->scratch = dev_opt(f->scratch_bytes);
}

static void fused_free(fused_run *f)
{
    f->impl->free_priv(f->priv);
    if (f->scratch) tg_dev_free(f->scratch);
}

static tx_te_fwd_args fargs(tx_te_op_id op, const tx_te_attr_value *attrs, const tx_tensor *in,
                            const tx_tensor *const *ext, int n_ext, const tx_tensor *const *par,
                            int n_par, tx_tensor *out)
{
    tx_te_fwd_args a;
    memset(&a, 0, sizeof a);
    a.op = op;
    a.attrs = attrs;
    a.input = in;
    a.extra_inputs = ext;
    a.n_extra_inputs = n_ext;
    a.params = par;
    a.n_params = n_par;
    a.output = out;
    a.training = true;
    return a;
}

/* Linear, Bias[, act]: act TX_TE_OP_COUNT = none; gelu_erf picks GELU's
 * exact form (no cuBLASLt epilogue: bias epilogue + the kernel). */
static void run_bias_act(teexec_dtype dt, tx_te_op_id act, bool gelu_erf)
{
    const char *tag = dt == KU_F32 ? "fp32" : "bf16";
    const char *an = act == TX_TE_GELU ? (gelu_erf ? "gelu_erf" : "gelu") :
                     act == TX_TE_RELU ? "relu" : "none";
    ku_seed(31 + (uint64_t)act + gelu_erf);
    tx_tensor x, w, b;
    ku_make(&x, dt, 3, FX, -2.0, 2.0);
    ku_make(&w, dt, 2, FW, -0.2, 0.2);
    ku_make(&b, dt, 1, FB, -0.5, 0.5);
    tx_te_attr_value aattr[TX_TE_MAX_ATTRS];
    bool has_act = act != TX_TE_OP_COUNT;
    if (has_act) {
        tx_te_attr_defaults(tx_te_schema(act), aattr);
        if (act == TX_TE_GELU) aattr[TX_TE_A_GELU_APPROX].i = gelu_erf ? TX_TE_GELU_ERF : TX_TE_GELU_TANH;
    }
    tx_tensor y1, y2, y3 = {0};
    TG_OK(tx_tensor_alloc(&y1, dt, 3, FY));
    TG_OK(tx_tensor_alloc(&y2, dt, 3, FY));
    cpu_fwd(TX_TE_LINEAR, NULL, &x, NULL, &w, &y1);
    cpu_fwd(TX_TE_BIAS, NULL, &y1, NULL, &b, &y2);
    if (has_act) {
        TG_OK(tx_tensor_alloc(&y3, dt, 3, FY));
        cpu_fwd(act, aattr, &y2, NULL, NULL, &y3);
    }
    const tx_tensor *pw[1] = {&w}, *pb[1] = {&b};
    tx_cuda_te_desc d0 = desc_of(TX_TE_LINEAR, "fc", NULL, &x, NULL, 0, pw, 1, &y1);
    tx_cuda_te_desc d1 = desc_of(TX_TE_BIAS, "bias", NULL, &y1, NULL, 0, pb, 1, &y2);
    tx_cuda_te_desc d2 = desc_of(has_act ? act : TX_TE_GELU, "act", aattr, &y2, NULL, 0, NULL, 0,
                                 &y2);
    const tx_cuda_te_desc *descs[3] = {&d0, &d1, &d2};
    int n = has_act ? 3 : 2;
    fused_run f;
    fused_prepare(&f, TX_FUSION_FWD_LINEAR_BIAS_ACT, false, descs, n);
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gb = dev_copy(&b);
    tx_tensor g1 = dev_new(dt, 3, FY), g2 = dev_new(dt, 3, FY), g3 = dev_new(dt, 3, FY);
    const tx_tensor *gpw[1] = {&gw}, *gpb[1] = {&gb};
    tx_te_fwd_args a0 = fargs(TX_TE_LINEAR, NULL, &gx, NULL, 0, gpw, 1, &g1);
    tx_te_fwd_args a1 = fargs(TX_TE_BIAS, NULL, &g1, NULL, 0, gpb, 1, &g2);
    tx_te_fwd_args a2 = fargs(act, aattr, &g2, NULL, 0, NULL, 0, &g3);
    const tx_te_fwd_args *aa[3] = {&a0, &a1, &a2};
    void *states[3] = {NULL, NULL, NULL};
    TG_OK(f.impl->forward(f.priv, aa, states, f.scratch, &g_env));
    tg_sync("fused linear bias act");
    char what[96];
    snprintf(what, sizeof what, "fwd_linear_bias_%s_%s bias output (act input)", an, tag);
    expect_fused(what, &y2, &g2);
    if (has_act) {
        snprintf(what, sizeof what, "fwd_linear_bias_%s_%s output", an, tag);
        if (dt == KU_F32) /* cuBLASLt's own tanh in the GELU epilogue */
            ku_expect_close(what, &y3, g3.data, 1e-4, 1e-4 * max_abs(&y3));
        else
            expect_fused(what, &y3, &g3);
    }
    fused_free(&f);
    tx_tensor *dev[] = {&gx, &gw, &gb, &g1, &g2, &g3};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &b, &y1, &y2, &y3};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

/* Linear[, Bias | ConstantScale], AddExtraInput. */
static void run_add(teexec_dtype dt, tx_te_op_id mid /* BIAS, CONSTANT_SCALE or OP_COUNT */)
{
    const char *tag = dt == KU_F32 ? "fp32" : "bf16";
    ku_seed(41 + (uint64_t)mid);
    tx_tensor x, w, b, r;
    ku_make(&x, dt, 3, FX, -2.0, 2.0);
    ku_make(&w, dt, 2, FW, -0.2, 0.2);
    ku_make(&b, dt, 1, FB, -0.5, 0.5);
    ku_make(&r, dt, 3, FY, -3.0, 3.0);
    tx_te_attr_value sattr[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_CONSTANT_SCALE), sattr);
    sattr[TX_TE_A_SCALE].f = 0.75;
    bool has_mid = mid != TX_TE_OP_COUNT;
    tx_tensor y1, y2, y3;
    TG_OK(tx_tensor_alloc(&y1, dt, 3, FY));
    TG_OK(tx_tensor_alloc(&y2, dt, 3, FY));
    TG_OK(tx_tensor_alloc(&y3, dt, 3, FY));
    cpu_fwd(TX_TE_LINEAR, NULL, &x, NULL, &w, &y1);
    const tx_tensor *pre = &y1;
    if (mid == TX_TE_BIAS) cpu_fwd(TX_TE_BIAS, NULL, &y1, NULL, &b, &y2);
    if (mid == TX_TE_CONSTANT_SCALE) cpu_fwd(mid, sattr, &y1, NULL, NULL, &y2);
    if (has_mid) pre = &y2;
    cpu_fwd(TX_TE_ADD_EXTRA_INPUT, NULL, pre, &r, NULL, &y3);

    const tx_tensor *pw[1] = {&w}, *pb[1] = {&b}, *er[1] = {&r};
    tx_cuda_te_desc dl = desc_of(TX_TE_LINEAR, "fc", NULL, &x, NULL, 0, pw, 1, &y1);
    tx_cuda_te_desc dm = mid == TX_TE_BIAS
                             ? desc_of(TX_TE_BIAS, "bias", NULL, &y1, NULL, 0, pb, 1, &y2)
                             : desc_of(TX_TE_CONSTANT_SCALE, "scale", sattr, &y1, NULL, 0, NULL,
                                       0, &y2);
    tx_cuda_te_desc da = desc_of(TX_TE_ADD_EXTRA_INPUT, "add", NULL, pre, er, 1, NULL, 0, &y3);
    const tx_cuda_te_desc *descs[3] = {&dl, has_mid ? &dm : &da, &da};
    int n = has_mid ? 3 : 2;
    tx_fusion_id id = mid == TX_TE_CONSTANT_SCALE ? TX_FUSION_FWD_LINEAR_SCALE_ADD
                                                  : TX_FUSION_FWD_LINEAR_BIAS_ADD;
    fused_run f;
    fused_prepare(&f, id, false, descs, n);
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gb = dev_copy(&b), gr = dev_copy(&r);
    tx_tensor g1 = dev_new(dt, 3, FY), g2 = dev_new(dt, 3, FY), g3 = dev_new(dt, 3, FY);
    const tx_tensor *gpw[1] = {&gw}, *gpb[1] = {&gb}, *ger[1] = {&gr};
    tx_te_fwd_args a0 = fargs(TX_TE_LINEAR, NULL, &gx, NULL, 0, gpw, 1, &g1);
    tx_te_fwd_args am = mid == TX_TE_BIAS ? fargs(TX_TE_BIAS, NULL, &g1, NULL, 0, gpb, 1, &g2)
                                          : fargs(TX_TE_CONSTANT_SCALE, sattr, &g1, NULL, 0,
                                                  NULL, 0, &g2);
    tx_te_fwd_args aa_ = fargs(TX_TE_ADD_EXTRA_INPUT, NULL, has_mid ? &g2 : &g1, ger, 1, NULL, 0,
                               &g3);
    const tx_te_fwd_args *aa[3] = {&a0, has_mid ? &am : &aa_, &aa_};
    void *states[3] = {NULL, NULL, NULL};
    TG_OK(f.impl->forward(f.priv, aa, states, f.scratch, &g_env));
    tg_sync("fused linear add");
    char what[96];
    snprintf(what, sizeof what, "%s_%s%s output",
             id == TX_FUSION_FWD_LINEAR_SCALE_ADD ? "fwd_linear_scale_add" : "fwd_linear_bias_add",
             mid == TX_TE_OP_COUNT ? "nobias_" : "", tag);
    expect_fused(what, &y3, &g3);
    fused_free(&f);
    tx_tensor *dev[] = {&gx, &gw, &gb, &gr, &g1, &g2, &g3};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &b, &r, &y1, &y2, &y3};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

/* MakeExtraOutput, Linear (backward); extra: the fork's extra grad given. */
static void run_bwd_add(teexec_dtype dt, bool extra)
{
    const char *tag = dt == KU_F32 ? "fp32" : "bf16";
    ku_seed(51 + extra);
    tx_tensor x, w, dy, de;
    ku_make(&x, dt, 3, FX, -2.0, 2.0);
    ku_make(&w, dt, 2, FW, -0.2, 0.2);
    ku_make(&dy, dt, 3, FY, -1.0, 1.0);
    ku_make(&de, dt, 3, FX, -0.5, 0.5);
    tx_tensor dxl = host_like(&x), dx = host_like(&x), dw = host_like(&w);
    cpu_linear_bwd(&x, &w, &dy, &dxl, &dw);
    {
        const tx_tensor *ge[1] = {extra ? &de : NULL};
        tx_te_bwd_args b;
        memset(&b, 0, sizeof b);
        b.op = TX_TE_MAKE_EXTRA_OUTPUT;
        b.grad_output = &dxl;
        b.grad_extra_outputs = ge;
        b.n_grad_extra_outputs = 1;
        b.grad_input = &dx;
        TG_OK(tx_te_cpu_backward(&b));
    }
    tx_tensor y = host_like(&dy);
    const tx_tensor *pw[1] = {&w};
    tx_tensor *xo[1] = {&x};
    tx_cuda_te_desc dm = desc_of(TX_TE_MAKE_EXTRA_OUTPUT, "fork", NULL, &x, NULL, 0, NULL, 0, &x);
    dm.extra_outputs = (const tx_tensor *const *)xo;
    dm.n_extra_outputs = 1;
    tx_cuda_te_desc dl = desc_of(TX_TE_LINEAR, "fc", NULL, &x, NULL, 0, pw, 1, &y);
    const tx_cuda_te_desc *descs[2] = {&dm, &dl};
    fused_run f;
    fused_prepare(&f, TX_FUSION_BWD_LINEAR_ADD, true, descs, 2);
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gdy = dev_copy(&dy), gde = dev_copy(&de);
    tx_tensor gdxl = dev_new(dt, 3, FX), gdx = dev_new(dt, 3, FX), gdw = dev_new(dt, 2, FW);
    const tx_tensor *ge[1] = {extra ? &gde : NULL}, *saved[2] = {&gx, &gw};
    tx_tensor *gp[1] = {&gdw};
    tx_te_bwd_args bm, bl;
    memset(&bm, 0, sizeof bm);
    memset(&bl, 0, sizeof bl);
    bm.op = TX_TE_MAKE_EXTRA_OUTPUT;
    bm.grad_output = &gdxl;
    bm.grad_extra_outputs = ge;
    bm.n_grad_extra_outputs = 1;
    bm.grad_input = &gdx;
    bl.op = TX_TE_LINEAR;
    bl.grad_output = &gdy;
    bl.saved = saved;
    bl.n_saved = 2;
    bl.grad_input = &gdxl;
    bl.grad_params = gp;
    bl.n_grad_params = 1;
    const tx_te_bwd_args *bb[2] = {&bm, &bl};
    void *states[2] = {NULL, NULL};
    TG_OK(f.impl->backward(f.priv, bb, states, f.scratch, &g_env));
    tg_sync("fused dgrad add");
    char what[96];
    snprintf(what, sizeof what, "bwd_linear_add_%s%s dx", extra ? "" : "noextra_", tag);
    expect_fused(what, &dx, &gdx);
    snprintf(what, sizeof what, "bwd_linear_add_%s%s dw", extra ? "" : "noextra_", tag);
    expect_fused(what, &dw, &gdw);
    fused_free(&f);
    tx_tensor *dev[] = {&gx, &gw, &gdy, &gde, &gdxl, &gdx, &gdw};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &dy, &de, &dxl, &dx, &dw, &y};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

/* Linear, ConstantScale (backward). */
static void run_bwd_scale(teexec_dtype dt)
{
    const char *tag = dt == KU_F32 ? "fp32" : "bf16";
    ku_seed(61);
    tx_tensor x, w, dy;
    ku_make(&x, dt, 3, FX, -2.0, 2.0);
    ku_make(&w, dt, 2, FW, -0.2, 0.2);
    ku_make(&dy, dt, 3, FY, -1.0, 1.0);
    tx_te_attr_value sattr[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_CONSTANT_SCALE), sattr);
    sattr[TX_TE_A_SCALE].f = 0.75;
    tx_tensor ds = host_like(&dy), dx = host_like(&x), dw = host_like(&w);
    {
        tx_te_bwd_args b;
        memset(&b, 0, sizeof b);
        b.op = TX_TE_CONSTANT_SCALE;
        b.attrs = sattr;
        b.grad_output = &dy;
        b.grad_input = &ds;
        TG_OK(tx_te_cpu_backward(&b));
    }
    cpu_linear_bwd(&x, &w, &ds, &dx, &dw);
    tx_tensor y = host_like(&dy);
    const tx_tensor *pw[1] = {&w};
    tx_cuda_te_desc dl = desc_of(TX_TE_LINEAR, "fc", NULL, &x, NULL, 0, pw, 1, &y);
    tx_cuda_te_desc dsc = desc_of(TX_TE_CONSTANT_SCALE, "scale", sattr, &y, NULL, 0, NULL, 0, &y);
    const tx_cuda_te_desc *descs[2] = {&dl, &dsc};
    fused_run f;
    fused_prepare(&f, TX_FUSION_BWD_LINEAR_SCALE, true, descs, 2);
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gdy = dev_copy(&dy);
    tx_tensor gds = dev_new(dt, 3, FY), gdx = dev_new(dt, 3, FX), gdw = dev_new(dt, 2, FW);
    const tx_tensor *saved[2] = {&gx, &gw};
    tx_tensor *gp[1] = {&gdw};
    tx_te_bwd_args bl, bs;
    memset(&bl, 0, sizeof bl);
    memset(&bs, 0, sizeof bs);
    bl.op = TX_TE_LINEAR;
    bl.grad_output = &gds;
    bl.saved = saved;
    bl.n_saved = 2;
    bl.grad_input = &gdx;
    bl.grad_params = gp;
    bl.n_grad_params = 1;
    bs.op = TX_TE_CONSTANT_SCALE;
    bs.attrs = sattr;
    bs.grad_output = &gdy;
    bs.grad_input = &gds;
    const tx_te_bwd_args *bb[2] = {&bl, &bs};
    void *states[2] = {NULL, NULL};
    TG_OK(f.impl->backward(f.priv, bb, states, f.scratch, &g_env));
    tg_sync("fused linear scale backward");
    char what[96];
    snprintf(what, sizeof what, "bwd_linear_scale_%s dx", tag);
    expect_fused(what, &dx, &gdx);
    snprintf(what, sizeof what, "bwd_linear_scale_%s dw", tag);
    expect_fused(what, &dw, &gdw);
    fused_free(&f);
    tx_tensor *dev[] = {&gx, &gw, &gdy, &gds, &gdx, &gdw};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &dy, &ds, &dx, &dw, &y};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

typedef enum fkind { F_GELU, F_GELU_ERF, F_RELU, F_BIAS, F_ADD_BIAS, F_ADD, F_SCALE_ADD,
                     F_BWD_ADD, F_BWD_ADD_NOEXTRA, F_BWD_SCALE } fkind;

typedef struct fcase {
    const char *name;
    fkind kind;
    teexec_dtype dt;
} fcase;

static void run_fusion(void **state)
{
    const fcase *c = *state;
    switch (c->kind) {
    case F_GELU: run_bias_act(c->dt, TX_TE_GELU, false); break;
    case F_GELU_ERF: run_bias_act(c->dt, TX_TE_GELU, true); break;
    case F_RELU: run_bias_act(c->dt, TX_TE_RELU, false); break;
    case F_BIAS: run_bias_act(c->dt, TX_TE_OP_COUNT, false); break;
    case F_ADD_BIAS: run_add(c->dt, TX_TE_BIAS); break;
    case F_ADD: run_add(c->dt, TX_TE_OP_COUNT); break;
    case F_SCALE_ADD: run_add(c->dt, TX_TE_CONSTANT_SCALE); break;
    case F_BWD_ADD: run_bwd_add(c->dt, true); break;
    case F_BWD_ADD_NOEXTRA: run_bwd_add(c->dt, false); break;
    case F_BWD_SCALE: run_bwd_scale(c->dt); break;
    }
}

#define FC(n, k) {n "_fp32", k, KU_F32}, {n "_bf16", k, KU_BF16}
static const fcase fusion_cases[] = {
    FC("fwd_linear_bias_gelu", F_GELU),   FC("fwd_linear_bias_gelu_erf", F_GELU_ERF),
    FC("fwd_linear_bias_relu", F_RELU),   FC("fwd_linear_bias", F_BIAS),
    FC("fwd_linear_bias_add", F_ADD_BIAS), FC("fwd_linear_add", F_ADD),
    FC("fwd_linear_scale_add", F_SCALE_ADD), FC("bwd_linear_add", F_BWD_ADD),
    FC("bwd_linear_add_noextra", F_BWD_ADD_NOEXTRA), FC("bwd_linear_scale", F_BWD_SCALE),
};

/* ---- fusions under a recipe ------------------------------------------------------ */

/* Group MakeExtraOutput, Linear, Bias, AddExtraInput; forward layout
 * [MakeExtraOutput][FWD_LINEAR_BIAS_ADD], backward [BWD_LINEAR_ADD][Bias]
 * [AddExtraInput]. Bias and AddExtraInput pass dy through unchanged, so the
 * GPU's fused backward gets the group's dy as the Linear's. */
static void run_fused_recipe(void **state)
{
    const qcase *c = *state;
    int64_t xd[3] = {2, 32, 128}, wd[2] = {96, 128}, yd[3] = {2, 32, 96}, bd[1] = {96};
    ku_seed(2000 + (uint64_t)c->kind);
    tx_tensor x, w, b, r, dy, de;
    ku_make(&x, KU_BF16, 3, xd, -2.0, 2.0);
    ku_make(&w, KU_BF16, 2, wd, -0.2, 0.2);
    ku_make(&b, KU_BF16, 1, bd, -0.5, 0.5);
    ku_make(&r, KU_BF16, 3, yd, -3.0, 3.0);
    ku_make(&dy, KU_BF16, 3, yd, -1.0, 1.0);
    ku_make(&de, KU_BF16, 3, xd, -0.5, 0.5);

    tx_plan_quant plan[3];
    make_plan(plan, c->kind, c->hybrid, 1);
    tx_group_config cfg;
    make_cfg(&cfg, c->kind, c->hybrid, plan);
    enum { NOPS = 4 };
    static const tx_te_op_id ops[NOPS] = {TX_TE_MAKE_EXTRA_OUTPUT, TX_TE_LINEAR, TX_TE_BIAS,
                                          TX_TE_ADD_EXTRA_INPUT};
    tx_te_attr_value attrs[NOPS][TX_TE_MAX_ATTRS];
    const tx_tensor *pw[1] = {&w}, *pb[1] = {&b}, *er[1] = {&r};
    tx_group_op gops[NOPS];
    memset(gops, 0, sizeof gops);
    for (int i = 0; i < NOPS; i++) {
        tx_te_attr_defaults(tx_te_schema(ops[i]), attrs[i]);
        gops[i].op = ops[i];
        gops[i].node = i;
        gops[i].name = tx_te_schema(ops[i])->name;
        gops[i].attrs = attrs[i];
        for (int k = 0; k < TX_TE_MAX_EXTRA; k++) gops[i].channel_from[k] = -1;
    }
    gops[1].params = pw;
    gops[1].n_params = 1;
    gops[1].params_need_grad = true;
    gops[2].params = pb;
    gops[2].n_params = 1;
    gops[2].params_need_grad = true;
    gops[3].extra_inputs = er;
    gops[3].n_extra_inputs = 1;
    tx_group_desc grp = {.ops = gops, .n_ops = NOPS, .input_needs_grad = true};
    tx_plan_kernel fl[2] = {{TX_FUSION_NONE, 0, 1}, {TX_FUSION_FWD_LINEAR_BIAS_ADD, 1, 3}};
    tx_plan_kernel bl[3] = {{TX_FUSION_BWD_LINEAR_ADD, 0, 2}, {TX_FUSION_NONE, 2, 1},
                            {TX_FUSION_NONE, 3, 1}};
    const tx_tensor *gxo[NOPS] = {&de, NULL, NULL, NULL};
    tx_group_run *run = NULL;
    TG_OK(tx_group_forward(&grp, &cfg, fl, 2, &x, &run));
    TG_OK(tx_group_backward(run, bl, 3, &dy, gxo));

    /* GPU: one Linear layout shared by both fused kernels */
    tx_cuda_linear_quant lq;
    lq.x = gpu_q(&plan[0], &cfg, NULL, NULL);
    lq.w = gpu_q(&plan[1], &cfg, NULL, NULL);
    lq.dy = gpu_q(&plan[2], &cfg, NULL, NULL);
    tx_tensor y1 = host_like(&dy);
    tx_cuda_te_desc dl = desc_of(TX_TE_LINEAR, "fc", attrs[1], &x, NULL, 0, pw, 1, &y1);
    dl.quant = &lq;
    tx_cuda_te_desc dbias = desc_of(TX_TE_BIAS, "bias", attrs[2], &y1, NULL, 0, pb, 1, &y1);
    tx_cuda_te_desc dadd = desc_of(TX_TE_ADD_EXTRA_INPUT, "add", attrs[3], &y1, er, 1, NULL, 0,
                                   &y1);
    tx_tensor *xo[1] = {&x};
    tx_cuda_te_desc dm = desc_of(TX_TE_MAKE_EXTRA_OUTPUT, "fork", attrs[0], &x, NULL, 0, NULL, 0,
                                 &x);
    dm.extra_outputs = (const tx_tensor *const *)xo;
    dm.n_extra_outputs = 1;
    gpu_lin node;
    gpu_lin_prepare(&node, &dl); /* the Linear's node: its state region */
    const tx_cuda_te_desc *fd[3] = {&dl, &dbias, &dadd}, *bdsc[2] = {&dm, &dl};
    fused_run ff, fb;
    fused_prepare(&ff, TX_FUSION_FWD_LINEAR_BIAS_ADD, false, fd, 3);
    fused_prepare(&fb, TX_FUSION_BWD_LINEAR_ADD, true, bdsc, 2);
    assert_int_equal(ff.scratch_bytes, node.scratch_bytes);
    g_env.step = STEP;
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gb = dev_copy(&b), gr = dev_copy(&r),
              gdy = dev_copy(&dy), gde = dev_copy(&de);
    tx_tensor g1 = dev_new(KU_BF16, 3, yd), g2 = dev_new(KU_BF16, 3, yd),
              g3 = dev_new(KU_BF16, 3, yd), gdxl = dev_new(KU_BF16, 3, xd),
              gdx = dev_new(KU_BF16, 3, xd), gdw = dev_new(KU_BF16, 2, wd);
    const tx_tensor *gpw[1] = {&gw}, *gpb[1] = {&gb}, *ger[1] = {&gr};
    tx_te_fwd_args a0 = fargs(TX_TE_LINEAR, attrs[1], &gx, NULL, 0, gpw, 1, &g1);
    tx_te_fwd_args a1 = fargs(TX_TE_BIAS, attrs[2], &g1, NULL, 0, gpb, 1, &g2);
    tx_te_fwd_args a2 = fargs(TX_TE_ADD_EXTRA_INPUT, attrs[3], &g2, ger, 1, NULL, 0, &g3);
    const tx_te_fwd_args *aa[3] = {&a0, &a1, &a2};
    void *fstates[3] = {node.state, NULL, NULL};
    TG_OK(ff.impl->forward(ff.priv, aa, fstates, ff.scratch, &g_env));
    const tx_tensor *ge[1] = {&gde}, *saved[2] = {&gx, &gw};
    tx_tensor *gp[1] = {&gdw};
    tx_te_bwd_args bm, blin;
    memset(&bm, 0, sizeof bm);
    memset(&blin, 0, sizeof blin);
    bm.op = TX_TE_MAKE_EXTRA_OUTPUT;
    bm.attrs = attrs[0];
    bm.grad_output = &gdxl;
    bm.grad_extra_outputs = ge;
    bm.n_grad_extra_outputs = 1;
    bm.grad_input = &gdx;
    blin.op = TX_TE_LINEAR;
    blin.attrs = attrs[1];
    blin.grad_output = &gdy;
    blin.saved = saved;
    blin.n_saved = 2;
    blin.grad_input = &gdxl;
    blin.grad_params = gp;
    blin.n_grad_params = 1;
    const tx_te_bwd_args *bb[2] = {&bm, &blin};
    void *bstates[2] = {NULL, node.state};
    TG_OK(fb.impl->backward(fb.priv, bb, bstates, fb.scratch, &g_env));
    tg_sync("fused recipe");

    double rtol, atol;
    tol_of(c->kind, &rtol, &atol);
    char what[96];
    snprintf(what, sizeof what, "fused_%s fwd_linear_bias_add output", c->name);
    ku_expect_close(what, tx_group_output(run), g3.data, rtol, atol);
    snprintf(what, sizeof what, "fused_%s bwd_linear_add dx", c->name);
    ku_expect_close(what, tx_group_grad_input(run), gdx.data, rtol, atol);
    snprintf(what, sizeof what, "fused_%s bwd_linear_add dw", c->name);
    ku_expect_close(what, tx_group_grad_param(run, 1, 0), gdw.data, rtol, atol);

    fused_free(&ff);
    fused_free(&fb);
    gpu_lin_free(&node);
    tx_group_run_free(run);
    tx_tensor *dev[] = {&gx, &gw, &gb, &gr, &gdy, &gde, &g1, &g2, &g3, &gdxl, &gdx, &gdw};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &b, &r, &dy, &de, &y1};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

/* Linear, Bias, GELU under a recipe, forward: the fused kernel against the
 * group executor's FWD_LINEAR_BIAS_ACT (output and the GELU's saved
 * input), and the Linear's state after the fused forward holds the same
 * columnwise bytes the unfused forward leaves. */
static void run_bias_gelu_recipe(void **state)
{
    const qcase *c = *state;
    int64_t xd[3] = {2, 32, 128}, wd[2] = {96, 128}, yd[3] = {2, 32, 96}, bd[1] = {96};
    ku_seed(3000 + (uint64_t)c->kind);
    tx_tensor x, w, b;
    ku_make(&x, KU_BF16, 3, xd, -2.0, 2.0);
    ku_make(&w, KU_BF16, 2, wd, -0.2, 0.2);
    ku_make(&b, KU_BF16, 1, bd, -0.5, 0.5);
    tx_plan_quant plan[3];
    make_plan(plan, c->kind, c->hybrid, 0);
    tx_group_config cfg;
    make_cfg(&cfg, c->kind, c->hybrid, plan);
    enum { NOPS = 3 };
    static const tx_te_op_id ops[NOPS] = {TX_TE_LINEAR, TX_TE_BIAS, TX_TE_GELU};
    tx_te_attr_value attrs[NOPS][TX_TE_MAX_ATTRS];
    const tx_tensor *pw[1] = {&w}, *pb[1] = {&b};
    tx_group_op gops[NOPS];
    memset(gops, 0, sizeof gops);
    for (int i = 0; i < NOPS; i++) {
        tx_te_attr_defaults(tx_te_schema(ops[i]), attrs[i]);
        gops[i].op = ops[i];
        gops[i].node = i;
        gops[i].name = tx_te_schema(ops[i])->name;
        gops[i].attrs = attrs[i];
        for (int k = 0; k < TX_TE_MAX_EXTRA; k++) gops[i].channel_from[k] = -1;
    }
    gops[0].params = pw;
    gops[0].n_params = 1;
    gops[0].params_need_grad = true;
    gops[1].params = pb;
    gops[1].n_params = 1;
    gops[1].params_need_grad = true;
    tx_group_desc grp = {.ops = gops, .n_ops = NOPS, .input_needs_grad = true};
    tx_plan_kernel fl[1] = {{TX_FUSION_FWD_LINEAR_BIAS_ACT, 0, 3}};
    tx_group_run *run = NULL;
    TG_OK(tx_group_forward(&grp, &cfg, fl, 1, &x, &run));
    int n_saved = 0;
    const tx_tensor *const *gelu_saved = tx_group_saved(run, 2, &n_saved);
    assert_int_equal(n_saved, 1);
    assert_non_null(gelu_saved[0]);

    tx_cuda_linear_quant lq;
    lq.x = gpu_q(&plan[0], &cfg, NULL, NULL);
    lq.w = gpu_q(&plan[1], &cfg, NULL, NULL);
    lq.dy = gpu_q(&plan[2], &cfg, NULL, NULL);
    tx_tensor y1;
    TG_OK(tx_tensor_alloc(&y1, KU_BF16, 3, yd));
    tx_cuda_te_desc dl = desc_of(TX_TE_LINEAR, "fc", attrs[0], &x, NULL, 0, pw, 1, &y1);
    dl.quant = &lq;
    tx_cuda_te_desc dbias = desc_of(TX_TE_BIAS, "bias", attrs[1], &y1, NULL, 0, pb, 1, &y1);
    tx_cuda_te_desc dgelu = desc_of(TX_TE_GELU, "gelu", attrs[2], &y1, NULL, 0, NULL, 0, &y1);
    gpu_lin node;
    gpu_lin_prepare(&node, &dl);
    const tx_cuda_te_desc *fd[3] = {&dl, &dbias, &dgelu};
    fused_run ff;
    fused_prepare(&ff, TX_FUSION_FWD_LINEAR_BIAS_ACT, false, fd, 3);
    g_env.step = STEP;
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gb = dev_copy(&b);
    tx_tensor g1 = dev_new(KU_BF16, 3, yd), g2 = dev_new(KU_BF16, 3, yd),
              g3 = dev_new(KU_BF16, 3, yd);
    const tx_tensor *gpw[1] = {&gw}, *gpb[1] = {&gb};
    tx_te_fwd_args a0 = fargs(TX_TE_LINEAR, attrs[0], &gx, NULL, 0, gpw, 1, &g1);
    tx_te_fwd_args a1 = fargs(TX_TE_BIAS, attrs[1], &g1, NULL, 0, gpb, 1, &g2);
    tx_te_fwd_args a2 = fargs(TX_TE_GELU, attrs[2], &g2, NULL, 0, NULL, 0, &g3);
    const tx_te_fwd_args *aa[3] = {&a0, &a1, &a2};
    void *fstates[3] = {node.state, NULL, NULL};
    TG_OK(ff.impl->forward(ff.priv, aa, fstates, ff.scratch, &g_env));
    tg_sync("fused linear bias gelu under a recipe");
    double rtol, atol;
    tol_of(c->kind, &rtol, &atol);
    char what[96];
    snprintf(what, sizeof what, "fused_%s fwd_linear_bias_gelu output", c->name);
    ku_expect_close(what, tx_group_output(run), g3.data, rtol, atol);
    snprintf(what, sizeof what, "fused_%s fwd_linear_bias_gelu gelu input", c->name);
    ku_expect_close(what, gelu_saved[0], g2.data, rtol, atol);
    const tx_cuda_linear *l = node.priv;
    snprintf(what, sizeof what, "fused_%s fwd_linear_bias_gelu state x columnwise", c->name);
    expect_col_bytes(what, &l->ox, node.state, l->st_x, &x);
    snprintf(what, sizeof what, "fused_%s fwd_linear_bias_gelu state w columnwise", c->name);
    expect_col_bytes(what, &l->ow, node.state, l->st_w, &w);

    fused_free(&ff);
    gpu_lin_free(&node);
    tx_group_run_free(run);
    tx_tensor *dev[] = {&gx, &gw, &gb, &g1, &g2, &g3};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &b, &y1};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

/* Inference under a recipe: a node prepared without grads keeps only the
 * rowwise copies (a smaller state) and its forward equals the group
 * executor's with training off. */
static void run_infer(void **state)
{
    const qcase *c = *state;
    int64_t xd[3] = {2, 32, 128}, wd[2] = {96, 128}, yd[3] = {2, 32, 96};
    ku_seed(4000 + (uint64_t)c->kind);
    tx_tensor x, w;
    ku_make(&x, KU_BF16, 3, xd, -2.0, 2.0);
    ku_make(&w, KU_BF16, 2, wd, -0.2, 0.2);
    tx_plan_quant plan[3];
    make_plan(plan, c->kind, c->hybrid, 0);
    tx_group_config cfg;
    make_cfg(&cfg, c->kind, c->hybrid, plan);
    cfg.training = false;
    const tx_tensor *par[1] = {&w};
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_LINEAR), attrs);
    tx_group_op op;
    memset(&op, 0, sizeof op);
    op.op = TX_TE_LINEAR;
    op.name = "fc";
    op.attrs = attrs;
    op.params = par;
    op.n_params = 1;
    for (int k = 0; k < TX_TE_MAX_EXTRA; k++) op.channel_from[k] = -1;
    tx_group_desc grp = {.ops = &op, .n_ops = 1, .input_needs_grad = false};
    tx_plan_kernel layout[1] = {{TX_FUSION_NONE, 0, 1}};
    tx_group_run *run = NULL;
    TG_OK(tx_group_forward(&grp, &cfg, layout, 1, &x, &run));

    tx_cuda_linear_quant lq;
    lq.x = gpu_q(&plan[0], &cfg, NULL, NULL);
    lq.w = gpu_q(&plan[1], &cfg, NULL, NULL);
    lq.dy = gpu_q(&plan[2], &cfg, NULL, NULL);
    tx_tensor y_like;
    TG_OK(tx_tensor_alloc(&y_like, KU_BF16, 3, yd));
    tx_cuda_te_desc d = desc_of(TX_TE_LINEAR, "fc", attrs, &x, NULL, 0, par, 1, &y_like);
    d.quant = &lq;
    d.training = false;
    d.needs = 0;
    gpu_lin g;
    gpu_lin_prepare(&g, &d);
    const tx_cuda_linear *l = g.priv;
    assert_int_equal(l->ox.usage, TX_QUSAGE_ROWWISE);
    assert_int_equal(l->ow.usage, TX_QUSAGE_ROWWISE);
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gy = dev_new(KU_BF16, 3, yd);
    const tx_tensor *gpar[1] = {&gw};
    tx_te_fwd_args a = fargs(TX_TE_LINEAR, attrs, &gx, NULL, 0, gpar, 1, &gy);
    a.training = false;
    TG_OK(g.impl->forward(g.priv, &a, g.state, g.scratch, &g_env));
    tg_sync("inference forward");
    double rtol, atol;
    tol_of(c->kind, &rtol, &atol);
    char what[96];
    snprintf(what, sizeof what, "linear_infer_%s y", c->name);
    ku_expect_close(what, tx_group_output(run), gy.data, rtol, atol);
    gpu_lin_free(&g);
    tx_group_run_free(run);
    dev_free(&gx);
    dev_free(&gw);
    dev_free(&gy);
    tx_tensor_release(&x);
    tx_tensor_release(&w);
    tx_tensor_release(&y_like);
}

static const qcase gcases[] = {
    {"fp8_current", TX_RECIPE_FP8_CURRENT, false},
    {"fp8_block", TX_RECIPE_FP8_BLOCK, false},
    {"mxfp8", TX_RECIPE_MXFP8, false},
    {"nvfp4", TX_RECIPE_NVFP4, false},
};

static const qcase icases[] = {
    {"fp8_current", TX_RECIPE_FP8_CURRENT, false},
    {"mxfp8", TX_RECIPE_MXFP8, false},
};

/* A node's forward + backward captured in a CUDA graph on a stream of its
 * own (nothing synchronizes the host or allocates) and replayed: the same
 * bits as the eager calls. kind NONE: bf16 without a recipe. */
static void cuda_ok(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) fail_msg("%s: %s", what, cudaGetErrorString(e));
}

static void run_graph(void **state)
{
    const qcase *c = *state;
    int64_t xd[3] = {2, 32, 128}, wd[2] = {96, 128}, yd[3] = {2, 32, 96};
    ku_seed(5000 + (uint64_t)c->kind);
    tx_tensor x, w, dy;
    ku_make(&x, KU_BF16, 3, xd, -2.0, 2.0);
    ku_make(&w, KU_BF16, 2, wd, -0.2, 0.2);
    ku_make(&dy, KU_BF16, 3, yd, -1.0, 1.0);
    tx_plan_quant plan[3];
    tx_group_config cfg;
    tx_cuda_linear_quant lq;
    bool quant = c->kind != TX_RECIPE_NONE;
    if (quant) {
        make_plan(plan, c->kind, c->hybrid, 0);
        make_cfg(&cfg, c->kind, c->hybrid, plan);
        lq.x = gpu_q(&plan[0], &cfg, NULL, NULL);
        lq.w = gpu_q(&plan[1], &cfg, NULL, NULL);
        lq.dy = gpu_q(&plan[2], &cfg, NULL, NULL);
    }
    tx_tensor y_like = host_like(&dy);
    const tx_tensor *par[1] = {&w};
    tx_cuda_te_desc d = desc_of(TX_TE_LINEAR, "fc", NULL, &x, NULL, 0, par, 1, &y_like);
    d.quant = quant ? &lq : NULL;
    gpu_lin g;
    gpu_lin_prepare(&g, &d);
    cudaStream_t s;
    cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    tx_cuda_env env = g_env;
    env.stream = s;
    env.step = STEP;
    tx_tensor gx = dev_copy(&x), gw = dev_copy(&w), gdy = dev_copy(&dy);
    tx_tensor gy = dev_new(KU_BF16, 3, yd), gdx = dev_new(KU_BF16, 3, xd),
              gdw = dev_new(KU_BF16, 2, wd);
    /* eager (also fills the GEMM handle's heuristic cache) */
    gpu_lin_call(&g, &env, &gx, &gw, &gy, &gdy, &gdx, &gdw);
    cuda_ok(cudaStreamSynchronize(s), "eager run");
    tx_tensor ry = host_like(&dy), rdx = host_like(&x), rdw = host_like(&w);
    tg_download(ry.data, gy.data, ry.nbytes);
    tg_download(rdx.data, gdx.data, rdx.nbytes);
    tg_download(rdw.data, gdw.data, rdw.nbytes);
    cuda_ok(cudaMemsetAsync(gy.data, 0, gy.nbytes, s), "clear");
    cuda_ok(cudaMemsetAsync(gdx.data, 0, gdx.nbytes, s), "clear");
    cuda_ok(cudaMemsetAsync(gdw.data, 0, gdw.nbytes, s), "clear");
    cuda_ok(cudaStreamSynchronize(s), "clear");
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cuda_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
    gpu_lin_call(&g, &env, &gx, &gw, &gy, &gdy, &gdx, &gdw);
    cuda_ok(cudaStreamEndCapture(s, &graph), "end capture");
    cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    cuda_ok(cudaGraphLaunch(exec, s), "launch");
    cuda_ok(cudaStreamSynchronize(s), "replay");
    char what[96];
    snprintf(what, sizeof what, "graph_%s y replay", c->name);
    ku_expect_bits(what, &ry, gy.data);
    snprintf(what, sizeof what, "graph_%s dx replay", c->name);
    ku_expect_bits(what, &rdx, gdx.data);
    snprintf(what, sizeof what, "graph_%s dw replay", c->name);
    ku_expect_bits(what, &rdw, gdw.data);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    gpu_lin_free(&g);
    tx_tensor *dev[] = {&gx, &gw, &gdy, &gy, &gdx, &gdw};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) dev_free(dev[i]);
    tx_tensor *host[] = {&x, &w, &dy, &y_like, &ry, &rdx, &rdw};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) tx_tensor_release(host[i]);
}

static const qcase rcases[] = {
    {"none_bf16", TX_RECIPE_NONE, false},
    {"fp8_current", TX_RECIPE_FP8_CURRENT, false},
    {"mxfp8", TX_RECIPE_MXFP8, false},
    {"nvfp4", TX_RECIPE_NVFP4, false},
};

static const qcase fcases[] = {
    {"fp8_current", TX_RECIPE_FP8_CURRENT, false},
    {"mxfp8", TX_RECIPE_MXFP8, false},
    {"nvfp4", TX_RECIPE_NVFP4, false},
};

int main(void)
{
    tg_require_gpu("test_gpu_te_linear");
    teexec_status *st = tx_gemm_lt_create(WS_BYTES, &g_h);
    if (st) {
        fprintf(stderr, "test_gpu_te_linear: tx_gemm_lt_create: %s\n", teexec_status_message(st));
        return 1;
    }
    memset(&g_env, 0, sizeof g_env);
    g_env.stream = NULL;
    g_env.gemm = g_h;
    g_env.gemm_ws = tg_dev_alloc(WS_BYTES);
    g_env.gemm_ws_bytes = WS_BYTES;
    g_env.sm = tx_gemm_lt_sm(g_h);
    g_env.deterministic = true;
    fprintf(stderr, "test_gpu_te_linear: sm_%d, cuBLASLt %zu\n", g_env.sm,
            tx_gemm_lt_cublas_version(g_h));
    enum { NQ = sizeof qcases / sizeof qcases[0], NF = sizeof fcases / sizeof fcases[0],
           NU = sizeof fusion_cases / sizeof fusion_cases[0],
           NG = sizeof gcases / sizeof gcases[0], NI = sizeof icases / sizeof icases[0],
           NR = sizeof rcases / sizeof rcases[0] };
    struct CMUnitTest tests[3 + NU + NQ + NF + NG + NI + NR];
    int n = 0;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_none_fp32);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_none_bf16);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_none_fp16);
    for (int i = 0; i < NU; i++)
        tests[n++] = (struct CMUnitTest){fusion_cases[i].name, run_fusion, NULL, NULL,
                                         (void *)&fusion_cases[i]};
    static char names[NQ + NF + NG + NI + NR][64];
    int k = 0;
#define ADD_CASES(table, count, prefix, fn)                                                   \
    for (int i = 0; i < (count); i++, k++) {                                                \
        snprintf(names[k], sizeof names[k], "%s%s", prefix, table[i].name);                 \
        tests[n++] = (struct CMUnitTest){names[k], fn, NULL, NULL, (void *)&table[i]};      \
    }
    ADD_CASES(qcases, NQ, "linear_", run_recipe)
    ADD_CASES(fcases, NF, "fused_bias_add_", run_fused_recipe)
    ADD_CASES(gcases, NG, "fused_bias_gelu_", run_bias_gelu_recipe)
    ADD_CASES(icases, NI, "infer_", run_infer)
    ADD_CASES(rcases, NR, "graph_", run_graph) /* last: a failed capture leaves its stream */
#undef ADD_CASES
    int rc = _cmocka_run_group_tests("test_gpu_te_linear", tests, (size_t)n, NULL, NULL);
    tg_dev_free(g_env.gemm_ws);
    tx_gemm_lt_destroy(g_h);
    return rc;
}
