/* GPU test: scaled-dot-product attention on the GPU - the cuDNN graphs
 * (kernels/cuda/sdpa_cudnn.h) and the plain CUDA fallback
 * (kernels/cuda/attention_fallback.h) - forward (O, softmax_lse) and
 * backward (dQ, dK, dV) against the CPU te.ops DotProductAttention
 * (kernels/cpu/te_attention.c) on the same bf16/fp16/fp32-rounded inputs.
 *
 * Tolerances (DESIGN.md): bf16 rtol 1.6e-2, fp16 1e-3, and for the FP32
 * fallback 2e-5 (FP32 sums vs the CPU's double sums); each with an absolute
 * floor of rtol * max|reference| because attention sums many terms and
 * gradients cancel. LSE (FP32): 1e-3 absolute + 1e-4 relative. The backward
 * runs from the CPU's O and LSE so it is compared on its own. A timing line
 * per config (forward and backward ms, TFLOP/s) goes to stderr and to the
 * results file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/tensor.h"
#include "kernels/cpu/te_args.h"
#include "kernels/cuda/attention_fallback.h"
#include "kernels/cuda/sdpa_cudnn.h"
#include "tests/gpu/gpu_harness.h"

#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F16 TEEXEC_DTYPE_FLOAT16
#define F32 TEEXEC_DTYPE_FLOAT

static tx_sdpa_cudnn *g_cudnn;
static char g_cudnn_why[512];

static uint64_t rng_state;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void put(tx_tensor *t, uint64_t i, float v)
{
    if (t->dtype == BF16) ((uint16_t *)t->data)[i] = tx_f32_to_bf16(v);
    else if (t->dtype == F16) ((uint16_t *)t->data)[i] = tx_f32_to_f16(v);
    else ((float *)t->data)[i] = v;
}

static double get(const tx_tensor *t, const void *data, uint64_t i)
{
    if (t->dtype == BF16) return tx_bf16_to_f32(((const uint16_t *)data)[i]);
    if (t->dtype == F16) return tx_f16_to_f32(((const uint16_t *)data)[i]);
    return ((const float *)data)[i];
}

static void make(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims, double lo,
                 double hi)
{
    TG_OK(tx_tensor_alloc(t, dt, rank, dims));
    for (uint64_t i = 0; i < t->numel; i++) put(t, i, (float)(lo + (hi - lo) * urand()));
}

static double rtol_of(teexec_dtype dt) { return dt == BF16 ? 1.6e-2 : dt == F16 ? 1e-3 : 2e-5; }

/* Compares a device buffer with the CPU tensor: |gpu - cpu| <= atol +
 * rtol * |cpu|, atol = atol_abs when > 0, else rtol * max|cpu|; an
 * infinite reference (the LSE of a fully masked row) must match exactly. */
static void expect_close(const char *what, const tx_tensor *ref, const void *dev, double rtol,
                         double atol_abs)
{
    void *host = malloc(ref->nbytes);
    assert_non_null(host);
    tg_download(host, dev, ref->nbytes);
    double maxref = 0.0;
    for (uint64_t i = 0; i < ref->numel; i++) {
        double a = get(ref, ref->data, i);
        if (isfinite(a) && fabs(a) > maxref) maxref = fabs(a);
    }
    double atol = atol_abs > 0 ? atol_abs : rtol * maxref;
    size_t bad = 0;
    double worst = 0.0;
    for (uint64_t i = 0; i < ref->numel; i++) {
        double a = get(ref, ref->data, i), b = get(ref, host, i);
        bool ok;
        if (isinf(a)) ok = a == b;
        else ok = !isnan(b) && fabs(a - b) <= atol + rtol * fabs(a);
        if (!ok) {
            if (!bad) fprintf(stderr, "%s: element %llu cpu %.9g gpu %.9g\n", what,
                              (unsigned long long)i, a, b);
            bad++;
        }
        if (isfinite(a) && isfinite(b) && fabs(a - b) / (atol + rtol * fabs(a)) > worst)
            worst = fabs(a - b) / (atol + rtol * fabs(a));
    }
    free(host);
    char detail[200];
    snprintf(detail, sizeof detail, "%zu of %llu outside tolerance (rtol %.2g, atol %.3g), worst "
             "err/limit %.3f", bad, (unsigned long long)ref->numel, rtol, atol, worst);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

enum { PATH_CUDNN = 1, PATH_FALLBACK = 2 };
enum { M_NONE = 0, M_BOOL = 1, M_PAD = 2 };

typedef struct attn_case {
    const char *name;
    teexec_dtype dt;
    int64_t b, h, hk, sq, skv, d;
    int sbhd, causal, mask;
    int paths;
} attn_case;

typedef struct ref_run {
    tx_tensor q, k, v, mask, y, lse, dy, dq, dk, dv;
    int32_t *lq, *lk; /* padding lengths (host) */
} ref_run;

/* Inputs and the CPU forward + backward. */
static void cpu_reference(const attn_case *c, ref_run *r)
{
    memset(r, 0, sizeof *r);
    rng_state = (uint64_t)c->sq * 7919u + (uint64_t)c->d * 31u + (uint64_t)c->h + (uint64_t)c->dt;
    int64_t qd[4], kd[4], yd[3], ld[3] = {c->b, c->h, c->sq};
    int64_t s0q = c->sbhd ? c->sq : c->b, s1q = c->sbhd ? c->b : c->sq;
    int64_t s0k = c->sbhd ? c->skv : c->b, s1k = c->sbhd ? c->b : c->skv;
    qd[0] = s0q, qd[1] = s1q, qd[2] = c->h, qd[3] = c->d;
    kd[0] = s0k, kd[1] = s1k, kd[2] = c->hk, kd[3] = c->d;
    yd[0] = s0q, yd[1] = s1q, yd[2] = c->h * c->d;
    make(&r->q, c->dt, 4, qd, -2.0, 2.0);
    make(&r->k, c->dt, 4, kd, -2.0, 2.0);
    make(&r->v, c->dt, 4, kd, -1.0, 1.0);
    make(&r->dy, c->dt, 3, yd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&r->y, c->dt, 3, yd));
    TG_OK(tx_tensor_alloc(&r->lse, tx_dtype_stat(c->dt), 3, ld));
    TG_OK(tx_tensor_alloc(&r->dq, c->dt, 4, qd));
    TG_OK(tx_tensor_alloc(&r->dk, c->dt, 4, kd));
    TG_OK(tx_tensor_alloc(&r->dv, c->dt, 4, kd));
    assert_int_equal(r->lse.dtype, F32);
    if (c->mask != M_NONE) {
        int64_t md[4] = {c->b, 1, c->sq, c->skv};
        TG_OK(tx_tensor_alloc(&r->mask, TEEXEC_DTYPE_BOOL, 4, md));
        uint8_t *m = r->mask.data;
        r->lq = calloc((size_t)c->b, sizeof(int32_t));
        r->lk = calloc((size_t)c->b, sizeof(int32_t));
        assert_non_null(r->lq);
        assert_non_null(r->lk);
        for (int64_t bi = 0; bi < c->b; bi++) {
            /* batch 0 full length; the others shorter (padding) */
            r->lq[bi] = (int32_t)(bi == 0 ? c->sq : c->sq - 37 * bi);
            r->lk[bi] = (int32_t)(bi == 0 ? c->skv : c->skv - 53 * bi);
            for (int64_t i = 0; i < c->sq; i++)
                for (int64_t j = 0; j < c->skv; j++) {
                    uint8_t hide;
                    if (c->mask == M_PAD) hide = i >= r->lq[bi] || j >= r->lk[bi];
                    else hide = urand() < 0.2 || (bi == c->b - 1 && i == 3); /* a fully masked row */
                    m[(bi * c->sq + i) * c->skv + j] = hide;
                }
        }
    }
    const tx_te_op_schema *s = tx_te_schema(TX_TE_DOT_PRODUCT_ATTENTION);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    attrs[TX_TE_A_DPA_CAUSAL].i = c->causal;
    attrs[TX_TE_A_DPA_LAYOUT].i = c->sbhd ? TX_TE_LAYOUT_SBHD : TX_TE_LAYOUT_BSHD;
    const tx_tensor *extra[TX_TE_DPA_N_IN] = {&r->k, &r->v, c->mask ? &r->mask : NULL};
    tx_tensor *aux[1] = {&r->lse};
    tx_te_fwd_args fa = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = attrs, .input = &r->q,
                         .extra_inputs = extra, .n_extra_inputs = TX_TE_DPA_N_IN,
                         .output = &r->y, .aux = aux,
                         .n_aux = 1, .training = true};
    TG_OK(tx_te_cpu_forward(&fa));
    const tx_tensor *saved[TX_TE_SAVED_CAP(0)];
    int n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(0), &n_saved));
    tx_tensor *gx[TX_TE_DPA_N_IN] = {&r->dk, &r->dv, NULL};
    tx_te_bwd_args ba = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = attrs, .grad_output = &r->dy,
                         .saved = saved, .n_saved = n_saved, .grad_input = &r->dq,
                         .grad_extra_inputs = gx, .n_grad_extra_inputs = TX_TE_DPA_N_IN};
    TG_OK(tx_te_cpu_backward(&ba));
}

static void ref_free(ref_run *r)
{
    tx_tensor *ts[] = {&r->q, &r->k, &r->v, &r->mask, &r->y, &r->lse, &r->dy, &r->dq, &r->dk,
                       &r->dv};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tx_tensor_release(ts[i]);
    free(r->lq);
    free(r->lk);
}

typedef struct dev_bufs {
    void *q, *k, *v, *mask, *y, *lse, *dy, *dq, *dk, *dv, *ws;
    int32_t *lq, *lk;
    size_t ws_bytes;
} dev_bufs;

static double flops_fwd(const attn_case *c)
{
    /* two GEMMs of b*h*sq*skv*d multiply-adds; causal (sq == skv) halves them */
    double f = 4.0 * (double)c->b * (double)c->h * (double)c->sq * (double)c->skv * (double)c->d;
    return c->causal ? f * 0.5 : f;
}

static void zero_outputs(const ref_run *r, dev_bufs *g)
{
    assert_int_equal(cudaMemset(g->y, 0, r->y.nbytes), cudaSuccess);
    assert_int_equal(cudaMemset(g->dq, 0, r->dq.nbytes), cudaSuccess);
    assert_int_equal(cudaMemset(g->dk, 0, r->dk.nbytes), cudaSuccess);
    assert_int_equal(cudaMemset(g->dv, 0, r->dv.nbytes), cudaSuccess);
}


static teexec_status *run_fwd(int path, const tx_attn_desc *a, dev_bufs *g)
{
    tx_attn_fwd_io io = {.q = g->q, .k = g->k, .v = g->v, .mask = g->mask, .seq_q = g->lq,
                         .seq_kv = g->lk, .o = g->y, .lse = g->lse};
    if (path == PATH_CUDNN)
        return tx_sdpa_cudnn_forward(g_cudnn, a, &io, g->ws, g->ws_bytes, NULL);
    return tx_attn_fallback_forward(a, &io, NULL);
}

static teexec_status *run_bwd(int path, const tx_attn_desc *a, dev_bufs *g)
{
    tx_attn_bwd_io io = {.q = g->q, .k = g->k, .v = g->v, .o = g->y, .d_o = g->dy, .lse = g->lse,
                         .mask = g->mask, .seq_q = g->lq, .seq_kv = g->lk, .dq = g->dq,
                         .dk = g->dk, .dv = g->dv};
    if (path == PATH_CUDNN)
        return tx_sdpa_cudnn_backward(g_cudnn, a, &io, g->ws, g->ws_bytes, NULL);
    return tx_attn_fallback_backward(a, &io, g->ws, g->ws_bytes, NULL);
}

static float time_ms(int path, const tx_attn_desc *a, dev_bufs *g, int bwd)
{
    cudaEvent_t e0, e1;
    assert_int_equal(cudaEventCreate(&e0), cudaSuccess);
    assert_int_equal(cudaEventCreate(&e1), cudaSuccess);
    const int reps = 5;
    TG_OK(bwd ? run_bwd(path, a, g) : run_fwd(path, a, g)); /* warm-up */
    cudaEventRecord(e0, NULL);
    for (int i = 0; i < reps; i++) TG_OK(bwd ? run_bwd(path, a, g) : run_fwd(path, a, g));
    cudaEventRecord(e1, NULL);
    tg_sync("timing");
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms / reps;
}

static void run_path(const attn_case *c, const ref_run *r, int path)
{
    const char *pn = path == PATH_CUDNN ? "cudnn" : "fallback";
    tx_attn_desc a = {.b = c->b, .h = c->h, .h_kv = c->hk, .s_q = c->sq, .s_kv = c->skv,
                      .d = c->d, .d_v = c->d, .dtype = c->dt, .sbhd = c->sbhd,
                      .causal = c->causal, .mask_b = c->b, .mask_h = 1,
                      .mask_kind = c->mask == M_BOOL  ? TX_ATTN_MASK_BOOL
                                   : c->mask == M_PAD ? TX_ATTN_MASK_PADDING
                                                      : TX_ATTN_MASK_NONE};
    char what[200];
    dev_bufs g = {0};
    if (path == PATH_CUDNN) {
        size_t wf = 0, wb = 0;
        TG_OK(tx_sdpa_cudnn_prepare(g_cudnn, &a, TX_SDPA_FORWARD, &wf));
        TG_OK(tx_sdpa_cudnn_prepare(g_cudnn, &a, TX_SDPA_BACKWARD, &wb));
        int plans = tx_sdpa_cudnn_plan_count(g_cudnn);
        TG_OK(tx_sdpa_cudnn_prepare(g_cudnn, &a, TX_SDPA_FORWARD, &wf));
        assert_int_equal(tx_sdpa_cudnn_plan_count(g_cudnn), plans); /* cached */
        g.ws_bytes = wf > wb ? wf : wb;
    } else {
        TG_OK(tx_attn_fallback_check(&a));
        g.ws_bytes = tx_attn_fallback_bwd_workspace(&a);
    }
    g.q = tg_dev_upload(r->q.data, r->q.nbytes);
    g.k = tg_dev_upload(r->k.data, r->k.nbytes);
    g.v = tg_dev_upload(r->v.data, r->v.nbytes);
    g.dy = tg_dev_upload(r->dy.data, r->dy.nbytes);
    if (c->mask == M_BOOL) g.mask = tg_dev_upload(r->mask.data, r->mask.nbytes);
    if (c->mask == M_PAD) {
        g.lq = tg_dev_upload(r->lq, (size_t)c->b * sizeof(int32_t));
        g.lk = tg_dev_upload(r->lk, (size_t)c->b * sizeof(int32_t));
    }
    g.y = tg_dev_alloc(r->y.nbytes);
    g.lse = tg_dev_alloc(r->lse.nbytes);
    g.dq = tg_dev_alloc(r->dq.nbytes);
    g.dk = tg_dev_alloc(r->dk.nbytes);
    g.dv = tg_dev_alloc(r->dv.nbytes);
    g.ws = tg_dev_alloc(g.ws_bytes ? g.ws_bytes : 16);
    /* cuDNN leaves padded rows alone; the CPU writes 0 there */
    if (c->mask == M_PAD) zero_outputs(r, &g);
    if (c->mask == M_PAD) {
        /* LSE of hidden rows: the CPU says -inf; cuDNN does not write them */
        float *l = malloc(r->lse.nbytes);
        assert_non_null(l);
        for (uint64_t i = 0; i < r->lse.numel; i++) l[i] = -INFINITY;
        tg_upload_to(g.lse, l, r->lse.nbytes);
        free(l);
    }

    TG_OK(run_fwd(path, &a, &g));
    tg_sync("attention forward");
    double rt = rtol_of(c->dt);
    snprintf(what, sizeof what, "%s %s y", c->name, pn);
    expect_close(what, &r->y, g.y, rt, 0);
    snprintf(what, sizeof what, "%s %s softmax_lse", c->name, pn);
    expect_close(what, &r->lse, g.lse, 1e-4, 1e-3);

    /* backward from the CPU's O and LSE */
    tg_upload_to(g.y, r->y.data, r->y.nbytes);
    tg_upload_to(g.lse, r->lse.data, r->lse.nbytes);
    TG_OK(run_bwd(path, &a, &g));
    tg_sync("attention backward");
    snprintf(what, sizeof what, "%s %s dq", c->name, pn);
    expect_close(what, &r->dq, g.dq, rt, 0);
    snprintf(what, sizeof what, "%s %s dk", c->name, pn);
    expect_close(what, &r->dk, g.dk, rt, 0);
    snprintf(what, sizeof what, "%s %s dv", c->name, pn);
    expect_close(what, &r->dv, g.dv, rt, 0);

    if (path == PATH_FALLBACK) {
        /* deterministic: a second backward gives the same bits (GQA sums too) */
        uint8_t *first = malloc(r->dk.nbytes), *second = malloc(r->dk.nbytes);
        assert_non_null(first);
        assert_non_null(second);
        tg_download(first, g.dk, r->dk.nbytes);
        TG_OK(run_bwd(path, &a, &g));
        tg_sync("attention backward again");
        tg_download(second, g.dk, r->dk.nbytes);
        assert_int_equal(tg_cmp_bytes("fallback dk repeat", first, second, r->dk.nbytes), 0);
        free(first);
        free(second);
    }

    float fms = time_ms(path, &a, &g, 0), bms = time_ms(path, &a, &g, 1);
    double ff = flops_fwd(c);
    char line[240];
    snprintf(line, sizeof line, "fwd %.3f ms %.1f TFLOP/s, bwd %.3f ms %.1f TFLOP/s", fms,
             ff / (fms * 1e9), bms, 2.5 * ff / (bms * 1e9));
    fprintf(stderr, "TIMING %s %s: %s\n", c->name, pn, line);
    snprintf(what, sizeof what, "%s %s timing", c->name, pn);
    tg_record(what, 1, line);

    void *bufs[] = {g.q, g.k, g.v, g.mask, g.y, g.lse, g.dy, g.dq, g.dk, g.dv, g.ws, g.lq, g.lk};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) tg_dev_free(bufs[i]);
}

static void run_attention(void **state)
{
    const attn_case *c = *state;
    ref_run r;
    cpu_reference(c, &r);
    if ((c->paths & PATH_CUDNN) && g_cudnn) run_path(c, &r, PATH_CUDNN);
    if (c->paths & PATH_FALLBACK) run_path(c, &r, PATH_FALLBACK);
    ref_free(&r);
    if ((c->paths & PATH_CUDNN) && !g_cudnn) {
        fprintf(stderr, "%s: cuDNN path skipped: %s\n", c->name, g_cudnn_why);
        skip();
    }
}

/* Configurations cuDNN must refuse with UNSUPPORTED and a reason (the
 * planner prints it and uses the fallback). */
static void test_cudnn_refusals(void **state)
{
    (void)state;
    if (!g_cudnn) skip();
    tx_attn_desc base = {.b = 1, .h = 4, .h_kv = 4, .s_q = 128, .s_kv = 128, .d = 64, .d_v = 64,
                         .dtype = BF16};
    TG_OK(tx_sdpa_cudnn_check(g_cudnn, &base, TX_SDPA_FORWARD));
    TG_OK(tx_sdpa_cudnn_check(g_cudnn, &base, TX_SDPA_BACKWARD));
    tx_attn_desc v[4] = {base, base, base, base};
    v[0].dtype = F32;
    v[1].d = v[1].d_v = 320;
    v[2].mask_kind = TX_ATTN_MASK_FLOAT;
    v[2].mask_b = v[2].mask_h = 1;
    v[2].mask_dtype = F32;
    v[3].causal = 1;
    v[3].s_kv = 64; /* s_q > s_kv: rows wholly hidden */
    const char *expect[4] = {"dtype", "head dims", "float mask", "s_q 128 > s_kv 64"};
    for (int i = 0; i < 4; i++) {
        teexec_status *st = tx_sdpa_cudnn_check(g_cudnn, &v[i], TX_SDPA_FORWARD);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
        const char *msg = teexec_status_message(st);
        fprintf(stderr, "refused as expected: %s\n", msg);
        assert_non_null(strstr(msg, expect[i]));
        teexec_status_destroy(st);
        /* and the fallback takes them, except a head dim it has no room for */
        if (i != 1) TG_OK(tx_attn_fallback_check(&v[i]));
    }
    char detail[64];
    snprintf(detail, sizeof detail, "cuDNN %zu", tx_sdpa_cudnn_version(g_cudnn));
    tg_record("attention cudnn refusals", 1, detail);
}

#define C_ (PATH_CUDNN | PATH_FALLBACK)
static const attn_case cases[] = {
    {"bf16 bshd mha s128 d64", BF16, 2, 16, 16, 128, 128, 64, 0, 0, M_NONE, C_},
    {"bf16 sbhd gqa causal s256 d128", BF16, 2, 16, 4, 256, 256, 128, 1, 1, M_NONE, C_},
    {"bf16 bshd gqa causal s1024 d128", BF16, 1, 16, 4, 1024, 1024, 128, 0, 1, M_NONE, C_},
    {"fp16 bshd gqa causal s512 d64", F16, 1, 16, 4, 512, 512, 64, 0, 1, M_NONE, C_},
    {"fp16 sbhd mha s256 d128", F16, 1, 16, 16, 256, 256, 128, 1, 0, M_NONE, C_},
    {"bf16 bshd mha s320 d64 (s_kv%128=64)", BF16, 1, 8, 8, 320, 320, 64, 0, 0, M_NONE, C_},
    {"bf16 bshd mha padding s256 d64", BF16, 2, 8, 8, 256, 256, 64, 0, 0, M_PAD, C_},
    {"bf16 sbhd gqa causal padding s384 d128", BF16, 2, 16, 4, 384, 384, 128, 1, 1, M_PAD, C_},
    {"fp32 bshd gqa causal s128 d64", F32, 2, 16, 4, 128, 128, 64, 0, 1, M_NONE, PATH_FALLBACK},
    {"fp32 sbhd gqa boolmask s256 d128", F32, 2, 16, 4, 256, 256, 128, 1, 0, M_BOOL,
     PATH_FALLBACK},
    {"bf16 bshd gqa causal sq128 skv384 d64", BF16, 2, 16, 4, 128, 384, 64, 0, 1, M_NONE, C_},
    {"fp16 bshd mha boolmask s128 d64", F16, 2, 8, 8, 128, 128, 64, 0, 0, M_BOOL, PATH_FALLBACK},
    /* decode shapes: the fallback's per-row kernel */
    {"fp32 bshd gqa decode sq1 skv137 d64", F32, 2, 16, 4, 1, 137, 64, 0, 0, M_NONE, PATH_FALLBACK},
    {"bf16 sbhd mha causal decode sq4 skv300 d128", BF16, 1, 8, 8, 4, 300, 128, 1, 1, M_NONE, C_},
    {"bf16 bshd gqa boolmask decode sq1 skv256 d256", BF16, 2, 8, 2, 1, 256, 256, 0, 0, M_BOOL,
     PATH_FALLBACK},
};

/* An optional argument is a cmocka test-name filter (wildcards * and ?). */
int main(int argc, char **argv)
{
    tg_require_gpu("test_gpu_attention");
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    teexec_status *st = tx_sdpa_cudnn_create(&g_cudnn);
    if (st) {
        snprintf(g_cudnn_why, sizeof g_cudnn_why, "%s", teexec_status_message(st));
        teexec_status_destroy(st);
        g_cudnn = NULL;
    } else {
        fprintf(stderr, "test_gpu_attention: cuDNN %zu\n", tx_sdpa_cudnn_version(g_cudnn));
    }
    enum { N = sizeof(cases) / sizeof(cases[0]) };
    struct CMUnitTest tests[N + 1];
    for (size_t i = 0; i < N; i++) {
        struct CMUnitTest t = {cases[i].name, run_attention, NULL, NULL, (void *)&cases[i]};
        tests[i] = t;
    }
    struct CMUnitTest refusals = cmocka_unit_test(test_cudnn_refusals);
    tests[N] = refusals;
    int rc = _cmocka_run_group_tests("test_gpu_attention", tests, N + 1, NULL, NULL);
    tx_sdpa_cudnn_destroy(g_cudnn);
    return rc;
}
