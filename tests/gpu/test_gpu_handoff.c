/*
 * test_gpu_handoff.c - the FP8 per-tensor quantized hand-offs on the GPU
 * (exec/cuda/te_cuda_handoff.c over kernels/cuda/handoff_fp8.h):
 * ForwardNormQuantize, ForwardActivationQuantize, BackwardBiasQuantize,
 * each under fp8-current and fp8-delayed, bf16 and fp32.
 *
 * Each case prepares two identical Linears: L1 told that its operand
 * arrives quantized (the producer's fused kernel writes it), L2 quantizing
 * its own. Checks:
 *  - the operand region L1 received equals, byte for byte, what L2's own
 *    quantizer wrote from the same tensor (data, transposed copy, scale,
 *    scale_inv, amax), and L1's GEMM outputs equal L2's bit for bit;
 *  - those bytes equal the CPU quantizer's (kernels/cpu/qtensor.h) on the
 *    same tensor;
 *  - the producer's high-precision outputs (and norm statistics) are within
 *    DESIGN.md's tolerance of the unfused GPU op and of the CPU fused kernel
 *    (exec/cpu_fused.h); dbias likewise, dx = dy exactly.
 * Plus the declines (fp8-block, MXFP8, an unsupported activation) and one
 * timing line per hand-off at the MLP benchmark's shapes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/cpu_fused.h"
#include "exec/cuda/te_cuda.h"
#include "exec/cuda/te_cuda_handoff.h"
#include "exec/cuda/te_cuda_linear.h"
#include "kernels/cpu/qtensor.h"
#include "kernels/cpu/te_args.h"
#include "kernels/cuda/gemm_lt.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

#include <cuda_runtime_api.h>

#define E4M3 TEEXEC_DTYPE_FLOAT8E4M3FN
#define E5M2 TEEXEC_DTYPE_FLOAT8E5M2

typedef struct hcase {
    const char *name;
    tx_fusion_id fusion;
    tx_te_op_id op;       /* the producer */
    int gelu_erf;
    teexec_dtype dt;
    int delayed;
} hcase;

#define WS_BYTES (((size_t)32 << 20) + 1024)

/* The Linears' GEMMs need a cuBLASLt handle and workspace (main makes them). */
static tx_cuda_env g_env;

static tx_cuda_env env0(void) { return g_env; }

static tx_tensor dwrap(teexec_dtype dt, int rank, const int64_t *dims, void *data)
{
    tx_tensor t;
    memset(&t, 0, sizeof t);
    TG_OK(tx_tensor_wrap(&t, dt, rank, dims, data));
    return t;
}

static tx_tensor dalloc(teexec_dtype dt, int rank, const int64_t *dims)
{
    tx_tensor t = dwrap(dt, rank, dims, NULL);
    t.data = tg_dev_alloc(t.nbytes);
    return t;
}

static tx_tensor dup_dev(const tx_tensor *host)
{
    tx_tensor t = *host;
    t.owns_data = false;
    t.data = tg_dev_upload(host->data, host->nbytes);
    return t;
}

static void host_of(tx_tensor *h, const tx_tensor *dev)
{
    TG_OK(tx_tensor_alloc(h, dev->dtype, dev->rank, dev->dims));
    tg_download(h->data, dev->data, dev->nbytes);
}

static tx_cuda_operand_q fp8_q(teexec_dtype fmt, float *dscale, float *damax)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = true;
    q.native = true;
    q.cfg.kind = TX_QKIND_FP8_TENSOR;
    q.cfg.fmt = fmt;
    if (dscale) {
        q.cfg.use_given_scale = true;
        q.delayed_scale = dscale;
        q.delayed_amax = damax;
    }
    return q;
}

/* ---- a Linear node ---------------------------------------------------- */

typedef struct lin {
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_cuda_linear_quant q;
    tx_tensor x, w, y;       /* device */
    const tx_tensor *wp[1];
    tx_cuda_te_node *node;
    const tx_cuda_linear *l;
    void *state, *scratch;
} lin;

static void lin_make(lin *L, const tx_cuda_linear_quant *q, void *x, void *w, teexec_dtype dt,
                     int64_t T, int64_t K, int64_t N)
{
    memset(L, 0, sizeof *L);
    tx_te_attr_defaults(tx_te_schema(TX_TE_LINEAR), L->attrs);
    L->q = *q;
    int64_t xd[2] = {T, K}, wd[2] = {N, K}, yd[2] = {T, N};
    L->x = dwrap(dt, 2, xd, x);
    L->w = dwrap(dt, 2, wd, w);
    L->y = dalloc(dt, 2, yd);
    L->wp[0] = &L->w;
    tx_cuda_te_desc d = {.op = TX_TE_LINEAR, .name = "lin", .attrs = L->attrs, .input = &L->x,
                         .params = L->wp, .n_params = 1, .output = &L->y, .training = true,
                         .needs = TX_TE_FOR_DX | TX_TE_FOR_DPARAMS, .quant = &L->q, .sm = 90,
                         .deterministic = true};
    TG_OK(tx_cuda_te_prepare(&d, &L->node));
    L->l = tx_cuda_te_node_priv(L->node);
    size_t sb = tx_cuda_te_state_bytes(L->node), cb = tx_cuda_te_scratch_bytes(L->node);
    L->state = tg_dev_alloc(sb ? sb : 256);
    L->scratch = tg_dev_alloc(cb ? cb : 256);
}

static void lin_forward(lin *L, void *x, const tx_cuda_env *env)
{
    L->x.data = x;
    tx_te_fwd_args a = {.op = TX_TE_LINEAR, .attrs = L->attrs, .input = &L->x, .params = L->wp,
                        .n_params = 1, .output = &L->y, .training = true};
    TG_OK(tx_cuda_te_forward(L->node, &a, L->state, L->scratch, env));
}

static void lin_backward(lin *L, tx_tensor *dy, tx_tensor *dx, tx_tensor *dw,
                         const tx_cuda_env *env)
{
    const tx_tensor *saved[2] = {&L->x, &L->w};
    tx_tensor *dwp[1] = {dw};
    tx_te_bwd_args a = {.op = TX_TE_LINEAR, .attrs = L->attrs, .grad_output = dy, .saved = saved,
                        .n_saved = 2, .grad_input = dx, .grad_params = dwp, .n_grad_params = 1};
    TG_OK(tx_cuda_te_backward(L->node, &a, L->state, L->scratch, env));
}

static void lin_free(lin *L)
{
    tx_cuda_te_node_free(L->node);
    tg_dev_free(L->y.data);
    tg_dev_free(L->state);
    tg_dev_free(L->scratch);
}

/* ---- operand regions ---------------------------------------------------- */

typedef struct region_host {
    uint8_t *row, *col;
    float scalars[16];
    size_t n;
} region_host;

static void region_get(region_host *r, const tx_cuda_lin_operand *o, const void *mem)
{
    r->n = o->rows * o->cols;
    r->row = calloc(1, r->n);
    r->col = calloc(1, r->n);
    assert_non_null(r->row);
    assert_non_null(r->col);
    const char *m = mem;
    if (o->row_data != SIZE_MAX) tg_download(r->row, m + o->row_data, r->n);
    if (o->col_data != SIZE_MAX) tg_download(r->col, m + o->col_data, r->n);
    tg_download(r->scalars, m + o->scalars, sizeof r->scalars);
}

static void region_free(region_host *r)
{
    free(r->row);
    free(r->col);
}

static void expect_same(const char *cname, const char *what, const void *a, const void *b,
                        size_t n)
{
    char label[160];
    snprintf(label, sizeof label, "%s %s", cname, what);
    size_t d = tg_cmp_bytes(label, a, b, n);
    char detail[96];
    snprintf(detail, sizeof detail, "%zu of %zu bytes differ", d, n);
    tg_record(label, d == 0, detail);
    if (d) fail_msg("%s: %s", label, detail);
}

/* L1's handed-off region against L2's own quantization, and both against
 * the CPU quantizer on `src` (host, the tensor that was quantized). */
static void compare_regions(const char *cname, const tx_cuda_lin_operand *o1, const void *m1,
                            const tx_cuda_lin_operand *o2, const void *m2, const tx_tensor *src,
                            int delayed, float dscale, const float *damax1, const float *damax2)
{
    region_host a, b;
    region_get(&a, o1, m1);
    region_get(&b, o2, m2);
    bool row = o1->usage & TX_QUSAGE_ROWWISE, col = o1->usage & TX_QUSAGE_COLUMNWISE;
    if (row) expect_same(cname, "rowwise bytes vs the Linear's own", a.row, b.row, a.n);
    if (col) expect_same(cname, "columnwise bytes vs the Linear's own", a.col, b.col, a.n);
    /* scale, scale_inv (and current scaling's amax) at floats 0, 4, 8 */
    expect_same(cname, "scale_inv vs the Linear's own", &a.scalars[4], &b.scalars[4], 4);
    if (!delayed) {
        expect_same(cname, "scale vs the Linear's own", &a.scalars[0], &b.scalars[0], 4);
        expect_same(cname, "amax vs the Linear's own", &a.scalars[8], &b.scalars[8], 4);
    }
    float am1 = 0, am2 = 0;
    if (delayed) {
        tg_download(&am1, damax1, 4);
        tg_download(&am2, damax2, 4);
        expect_same(cname, "delayed amax vs the Linear's own", &am1, &am2, 4);
    }
    /* the CPU quantizer on the same tensor */
    tx_quant_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.kind = TX_QKIND_FP8_TENSOR;
    cfg.fmt = o1->q.cfg.fmt;
    cfg.usage = TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE;
    if (delayed) {
        cfg.use_given_scale = true;
        cfg.given_scale = dscale;
    }
    tx_qtensor q;
    memset(&q, 0, sizeof q);
    TG_OK(tx_quantize(src->data, src->dtype, o1->rows, o1->cols, &cfg, &q));
    if (row) expect_same(cname, "rowwise bytes vs the CPU quantizer", q.row.data, a.row, a.n);
    if (col) expect_same(cname, "columnwise bytes vs the CPU quantizer", q.col.data, a.col, a.n);
    expect_same(cname, "scale_inv vs the CPU quantizer", &q.scale_inv, &a.scalars[4], 4);
    if (!delayed) {
        expect_same(cname, "scale vs the CPU quantizer", &q.scale, &a.scalars[0], 4);
        expect_same(cname, "amax vs the CPU quantizer", &q.amax, &a.scalars[8], 4);
    } else {
        expect_same(cname, "delayed amax vs the CPU quantizer", &q.amax, &am1, 4);
    }
    tx_qtensor_free(&q);
    region_free(&a);
    region_free(&b);
}

static void expect_dev_equal(const char *cname, const char *what, const tx_tensor *a,
                             const tx_tensor *b)
{
    assert_int_equal(a->nbytes, b->nbytes);
    uint8_t *ha = malloc(a->nbytes), *hb = malloc(b->nbytes);
    assert_non_null(ha);
    assert_non_null(hb);
    tg_download(ha, a->data, a->nbytes);
    tg_download(hb, b->data, b->nbytes);
    expect_same(cname, what, ha, hb, a->nbytes);
    free(ha);
    free(hb);
}

static double atol_of(teexec_dtype dt) { return dt == KU_BF16 ? 1.6e-2 : 1e-5; }
static double rtol_of(teexec_dtype dt) { return dt == KU_BF16 ? 1.6e-2 : 1e-5; }

static float *dev_float(float v)
{
    return tg_dev_upload(&v, sizeof v);
}

/* ---- forward hand-offs ---------------------------------------------------- */

enum { T_ = 256, K_ = 256, N_ = 128 };

static void run_forward(const hcase *c)
{
    ku_seed(77u + (uint64_t)c->op * 7u + (uint64_t)c->dt + (uint64_t)c->delayed * 1000u);
    char label[160];
    bool norm = c->fusion == TX_FUSION_FWD_NORM_QUANTIZE;
    bool rms = c->op == TX_TE_RMS_NORM;
    const tx_te_op_schema *ps = tx_te_schema(c->op);
    tx_te_attr_value pattrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(ps, pattrs);
    if (c->gelu_erf) pattrs[TX_TE_A_GELU_APPROX].i = TX_TE_GELU_ERF;
    int64_t xd[2] = {T_, K_}, gd[1] = {K_}, wd[2] = {N_, K_}, sd[1] = {T_};
    tx_tensor hx = {0}, hg = {0}, hb = {0}, hw = {0};
    ku_make(&hx, c->dt, 2, xd, norm ? -3.0 : -5.0, norm ? 5.0 : 5.0);
    ku_make(&hg, c->dt, 1, gd, 0.5, 1.5);
    ku_make(&hb, c->dt, 1, gd, -0.5, 0.5);
    ku_make(&hw, c->dt, 2, wd, -0.1, 0.1);
    /* a few rows with a large range, so that amax is decided by one element */
    for (int j = 0; j < 4; j++) ku_set(&hx, (uint64_t)j * 37 * K_ + 11 * (uint64_t)j, 40.0f + (float)j);
    tx_tensor x = dup_dev(&hx), g = dup_dev(&hg), b = dup_dev(&hb), w = dup_dev(&hw);
    tx_tensor yf = dalloc(c->dt, 2, xd), yu = dalloc(c->dt, 2, xd);
    tx_tensor muf = dalloc(KU_F32, 1, sd), rsf = dalloc(KU_F32, 1, sd);
    tx_tensor muu = dalloc(KU_F32, 1, sd), rsu = dalloc(KU_F32, 1, sd);

    /* delayed: a scale below fp8_max / amax so nothing saturates but the
     * largest values */
    float dscale = 448.0f / 64.0f;
    float *d_scale = c->delayed ? dev_float(dscale) : NULL;
    float *d_amax1 = c->delayed ? dev_float(0.0f) : NULL, *d_amax2 = c->delayed ? dev_float(0.0f) : NULL;
    tx_cuda_linear_quant q1, q2;
    memset(&q1, 0, sizeof q1);
    q1.x = fp8_q(E4M3, d_scale, d_amax1);
    q1.w = fp8_q(E4M3, NULL, NULL);
    q1.dy = fp8_q(E5M2, NULL, NULL);
    q2 = q1;
    q2.x.delayed_amax = d_amax2;
    q1.x.handed_off = true;
    lin L1, L2;
    lin_make(&L1, &q1, yf.data, w.data, c->dt, T_, K_, N_);
    lin_make(&L2, &q2, yf.data, w.data, c->dt, T_, K_, N_);
    assert_true(L1.l->ox.q.handed_off);

    /* the producer, fused */
    const tx_tensor *pp[2] = {&g, &b};
    tx_tensor *auxf[2] = {rms ? &rsf : &muf, &rsf}, *auxu[2] = {rms ? &rsu : &muu, &rsu};
    int n_params = norm ? (rms ? 1 : 2) : 0, n_aux = norm ? (rms ? 1 : 2) : 0;
    tx_cuda_te_desc pd = {.op = c->op, .name = "producer", .attrs = pattrs, .input = &x,
                          .params = pp, .n_params = n_params, .output = &yf, .training = true,
                          .needs = TX_TE_FOR_ALL, .sm = 90, .deterministic = true,
                          .handoff_to = L1.node, .handoff_state = &L1.state};
    const tx_cuda_te_desc *descs[1] = {&pd};
    tx_cuda_fused *f = NULL;
    TG_OK(tx_cuda_fused_prepare(c->fusion, false, descs, NULL, 1, &f));
    tx_cuda_env env = env0();
    tx_te_fwd_args fa = {.op = c->op, .attrs = pattrs, .input = &x, .params = pp,
                         .n_params = n_params, .output = &yf, .aux = auxf, .n_aux = n_aux,
                         .training = true};
    const tx_te_fwd_args *fas[1] = {&fa};
    void *states[1] = {NULL};
    void *fscratch = tg_dev_alloc(tx_cuda_fused_scratch_bytes(f) + 256);
    TG_OK(tx_cuda_fused_forward(f, fas, states, fscratch, &env));
    lin_forward(&L1, yf.data, &env);
    lin_forward(&L2, yf.data, &env);
    tg_sync(c->name);

    /* the Linear's input region and its output */
    tx_tensor hyf;
    host_of(&hyf, &yf);
    compare_regions(c->name, &L1.l->ox, (char *)L1.state + L1.l->st_x, &L2.l->ox,
                    (char *)L2.state + L2.l->st_x, &hyf, c->delayed, dscale, d_amax1, d_amax2);
    expect_dev_equal(c->name, "Linear output with the hand-off vs without", &L1.y, &L2.y);

    /* the producer unfused on the GPU */
    tx_cuda_te_desc ud = pd;
    ud.output = &yu;
    ud.handoff_to = NULL;
    ud.handoff_state = NULL;
    tx_cuda_te_node *un = NULL;
    TG_OK(tx_cuda_te_prepare(&ud, &un));
    void *uscratch = tg_dev_alloc(tx_cuda_te_scratch_bytes(un) + 256);
    tx_te_fwd_args ua = fa;
    ua.output = &yu;
    ua.aux = auxu;
    TG_OK(tx_cuda_te_forward(un, &ua, NULL, uscratch, &env));
    tg_sync(c->name);
    tx_tensor hyu;
    host_of(&hyu, &yu);
    snprintf(label, sizeof label, "%s hp output vs the unfused GPU op", c->name);
    ku_expect_close(label, &hyu, yf.data, rtol_of(c->dt), atol_of(c->dt));
    if (norm) {
        tx_tensor hrs;
        host_of(&hrs, &rsu);
        snprintf(label, sizeof label, "%s rsigma vs the unfused GPU op", c->name);
        ku_expect_close(label, &hrs, rsf.data, 1e-5, 1e-6);
        tx_tensor_release(&hrs);
        if (!rms) {
            tx_tensor hmu;
            host_of(&hmu, &muu);
            snprintf(label, sizeof label, "%s mu vs the unfused GPU op", c->name);
            ku_expect_close(label, &hmu, muf.data, 1e-5, 1e-6);
            tx_tensor_release(&hmu);
        }
    }

    /* the CPU fused kernel on the same inputs */
    tx_tensor hyc = {0};
    TG_OK(tx_tensor_alloc(&hyc, c->dt, 2, xd));
    const tx_tensor *hpp[2] = {&hg, &hb};
    tx_te_fwd_args ca = {.op = c->op, .attrs = pattrs, .input = &hx, .params = hpp,
                         .n_params = n_params, .output = &hyc, .training = false};
    tx_fused_q fq;
    memset(&fq, 0, sizeof fq);
    fq.on = true;
    fq.cfg.kind = TX_QKIND_FP8_TENSOR;
    fq.cfg.fmt = E4M3;
    fq.cfg.usage = TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE;
    if (c->delayed) {
        fq.cfg.use_given_scale = true;
        fq.cfg.given_scale = dscale;
    }
    tx_qtensor cq;
    memset(&cq, 0, sizeof cq);
    TG_OK(tx_fused_fwd_quantize(&ca, &fq, &cq));
    snprintf(label, sizeof label, "%s hp output vs the CPU fused kernel", c->name);
    ku_expect_close(label, &hyc, yf.data, rtol_of(c->dt), atol_of(c->dt));
    tx_qtensor_free(&cq);

    tx_cuda_fused_free(f);
    tx_cuda_te_node_free(un);
    lin_free(&L1);
    lin_free(&L2);
    void *bufs[] = {x.data, g.data, b.data, w.data, yf.data, yu.data, muf.data, rsf.data,
                    muu.data, rsu.data, fscratch, uscratch, d_scale, d_amax1, d_amax2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) tg_dev_free(bufs[i]);
    tx_tensor *hs[] = {&hx, &hg, &hb, &hw, &hyf, &hyu, &hyc};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) tx_tensor_release(hs[i]);
}

/* ---- backward hand-off: Bias after a Linear ------------------------------- */

static void run_backward(const hcase *c)
{
    ku_seed(991u + (uint64_t)c->dt + (uint64_t)c->delayed * 1000u);
    char label[160];
    int64_t xd[2] = {T_, K_}, wd[2] = {N_, K_}, yd[2] = {T_, N_}, bd[1] = {N_};
    tx_tensor hx = {0}, hw = {0}, hdy = {0}, hbias = {0};
    ku_make(&hx, c->dt, 2, xd, -2.0, 2.0);
    ku_make(&hw, c->dt, 2, wd, -0.2, 0.2);
    ku_make(&hdy, c->dt, 2, yd, -1e-3, 1e-3);
    ku_make(&hbias, c->dt, 1, bd, -0.5, 0.5);
    ku_set(&hdy, 5 * N_ + 3, 0.02f);
    tx_tensor x = dup_dev(&hx), w = dup_dev(&hw), dy = dup_dev(&hdy), bias = dup_dev(&hbias);
    tx_tensor dxb = dalloc(c->dt, 2, yd), db = dalloc(c->dt, 1, bd);
    tx_tensor dx1 = dalloc(c->dt, 2, xd), dx2 = dalloc(c->dt, 2, xd);
    tx_tensor dw1 = dalloc(c->dt, 2, wd), dw2 = dalloc(c->dt, 2, wd);
    float dscale = 57344.0f / 0.05f;
    float *d_scale = c->delayed ? dev_float(dscale) : NULL;
    float *d_amax1 = c->delayed ? dev_float(0.0f) : NULL, *d_amax2 = c->delayed ? dev_float(0.0f) : NULL;
    tx_cuda_linear_quant q1, q2;
    memset(&q1, 0, sizeof q1);
    q1.x = fp8_q(E4M3, NULL, NULL);
    q1.w = fp8_q(E4M3, NULL, NULL);
    q1.dy = fp8_q(E5M2, d_scale, d_amax1);
    q2 = q1;
    q2.dy.delayed_amax = d_amax2;
    q1.dy.handed_off = true;
    lin L1, L2;
    lin_make(&L1, &q1, x.data, w.data, c->dt, T_, K_, N_);
    lin_make(&L2, &q2, x.data, w.data, c->dt, T_, K_, N_);
    assert_true(L1.l->st_dy != SIZE_MAX);
    tx_cuda_env env = env0();
    lin_forward(&L1, x.data, &env);
    lin_forward(&L2, x.data, &env);

    tx_te_attr_value battrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_BIAS), battrs);
    const tx_tensor *bp[1] = {&bias};
    tx_cuda_te_desc bdesc = {.op = TX_TE_BIAS, .name = "bias", .attrs = battrs, .input = &L1.y,
                             .params = bp, .n_params = 1, .output = &dxb, .training = true,
                             .needs = TX_TE_FOR_ALL, .sm = 90, .deterministic = true,
                             .handoff_to = L1.node, .handoff_state = &L1.state};
    const tx_cuda_te_desc *descs[1] = {&bdesc};
    tx_cuda_fused *f = NULL;
    TG_OK(tx_cuda_fused_prepare(TX_FUSION_BWD_BIAS_QUANTIZE, true, descs, NULL, 1, &f));
    void *fscratch = tg_dev_alloc(tx_cuda_fused_scratch_bytes(f) + 256);
    tx_tensor *dbp[1] = {&db};
    tx_te_bwd_args ba = {.op = TX_TE_BIAS, .attrs = battrs, .grad_output = &dy, .grad_input = &dxb,
                         .grad_params = dbp, .n_grad_params = 1};
    const tx_te_bwd_args *bas[1] = {&ba};
    void *states[1] = {NULL};
    TG_OK(tx_cuda_fused_backward(f, bas, states, fscratch, &env));
    lin_backward(&L1, &dxb, &dx1, &dw1, &env);
    lin_backward(&L2, &dy, &dx2, &dw2, &env);
    tg_sync(c->name);

    compare_regions(c->name, &L1.l->ody, (char *)L1.state + L1.l->st_dy, &L2.l->ody,
                    (char *)L2.scratch + L2.l->sc_dy, &hdy, c->delayed, dscale, d_amax1, d_amax2);
    expect_dev_equal(c->name, "dgrad with the hand-off vs without", &dx1, &dx2);
    expect_dev_equal(c->name, "wgrad with the hand-off vs without", &dw1, &dw2);
    expect_dev_equal(c->name, "Bias dx = dy", &dxb, &dy);

    /* dbias against the CPU fused kernel */
    tx_tensor hdx = {0}, hdb = {0};
    TG_OK(tx_tensor_alloc(&hdx, c->dt, 2, yd));
    TG_OK(tx_tensor_alloc(&hdb, c->dt, 1, bd));
    tx_fused_q fq;
    memset(&fq, 0, sizeof fq);
    fq.on = true;
    fq.cfg.kind = TX_QKIND_FP8_TENSOR;
    fq.cfg.fmt = E5M2;
    fq.cfg.usage = TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE;
    if (c->delayed) {
        fq.cfg.use_given_scale = true;
        fq.cfg.given_scale = dscale;
    }
    tx_qtensor cq;
    memset(&cq, 0, sizeof cq);
    TG_OK(tx_fused_dbias_quantize(&hdy, &hdx, &hdb, &fq, &cq));
    snprintf(label, sizeof label, "%s dbias vs the CPU fused kernel", c->name);
    ku_expect_close(label, &hdb, db.data, rtol_of(c->dt), c->dt == KU_BF16 ? 1e-3 : 1e-6);
    tx_qtensor_free(&cq);

    tx_cuda_fused_free(f);
    lin_free(&L1);
    lin_free(&L2);
    void *bufs[] = {x.data, w.data, dy.data, bias.data, dxb.data, db.data, dx1.data, dx2.data,
                    dw1.data, dw2.data, fscratch, d_scale, d_amax1, d_amax2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) tg_dev_free(bufs[i]);
    tx_tensor *hs[] = {&hx, &hw, &hdy, &hbias, &hdx, &hdb};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) tx_tensor_release(hs[i]);
}

static void run_case(void **state)
{
    const hcase *c = *state;
    if (c->fusion == TX_FUSION_BWD_BIAS_QUANTIZE) run_backward(c);
    else run_forward(c);
}

/* ---- declines ------------------------------------------------------------------ */

static void declines(void **state)
{
    (void)state;
    tx_cuda_operand_q q = fp8_q(E4M3, NULL, NULL);
    TG_OK(tx_cuda_handoff_accepts(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, NULL, KU_BF16,
                                  KU_BF16, 4096, &q));
    struct {
        tx_fusion_id f;
        tx_te_op_id op;
        teexec_dtype dt;
        size_t cols;
        tx_qkind kind;
        const char *needle;
    } no[] = {
        {TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, KU_BF16, 4096, TX_QKIND_FP8_BLOCK, "fp8-block"},
        {TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, KU_BF16, 4096, TX_QKIND_MXFP8, "MXFP8"},
        {TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SWIGLU, KU_BF16, 4096, TX_QKIND_FP8_TENSOR, "GELU, ReLU and SiLU"},
        {TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, KU_F16, 4096, TX_QKIND_FP8_TENSOR, "float32 or bfloat16"},
        {TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, KU_BF16, 32768, TX_QKIND_FP8_TENSOR, "registers"},
        {TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, KU_BF16, 40, TX_QKIND_FP8_TENSOR, "multiple of 16"},
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        tx_cuda_operand_q qq = q;
        qq.cfg.kind = no[i].kind;
        teexec_status *st = tx_cuda_handoff_accepts(no[i].f, no[i].op, NULL, no[i].dt, no[i].dt,
                                                    no[i].cols, &qq);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
        if (!strstr(teexec_status_message(st), no[i].needle))
            fail_msg("decline %zu: \"%s\" lacks \"%s\"", i, teexec_status_message(st), no[i].needle);
        teexec_status_destroy(st);
    }
    /* no consumer bound: the fused prepare declines, no error */
    int64_t xd[2] = {32, 64};
    tx_tensor x = dwrap(KU_BF16, 2, xd, NULL);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_GELU), attrs);
    tx_cuda_te_desc d = {.op = TX_TE_GELU, .name = "g", .attrs = attrs, .input = &x, .output = &x};
    const tx_cuda_te_desc *descs[1] = {&d};
    tx_cuda_fused *f = NULL;
    teexec_status *st = tx_cuda_fused_prepare(TX_FUSION_FWD_ACT_QUANTIZE, false, descs, NULL, 1, &f);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "consumer Linear"));
    assert_null(f);
    tg_record("handoff declines", 1, teexec_status_message(st));
    teexec_status_destroy(st);
}

/* ---- timing at the MLP benchmark's shapes (8192 tokens, h 4096, ffn 16384) ---- */

static double time_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    return ms;
}

static void timing(void **state)
{
    (void)state;
    enum { ITERS = 20 };
    const int64_t T = 8192;
    struct {
        const char *name;
        tx_fusion_id f;
        tx_te_op_id op;
        int64_t cols;
    } cases[] = {{"LayerNorm -> fc1 (8192x4096)", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 4096},
                 {"GELU -> fc2 (8192x16384)", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 16384},
                 {"Bias bwd -> fc2 dy (8192x4096)", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 4096}};
    cudaEvent_t ev[3];
    for (int i = 0; i < 3; i++) assert_int_equal(cudaEventCreate(&ev[i]), cudaSuccess);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        bool bwd = cases[ci].f == TX_FUSION_BWD_BIAS_QUANTIZE;
        int64_t C = cases[ci].cols, N = 128;
        int64_t xd[2] = {T, C}, gd[1] = {C}, wd[2] = {N, C};
        tx_tensor x = dalloc(KU_BF16, 2, xd), y = dalloc(KU_BF16, 2, xd);
        tx_tensor g = dalloc(KU_BF16, 1, gd), b = dalloc(KU_BF16, 1, gd), w = dalloc(KU_BF16, 2, wd);
        assert_int_equal(cudaMemset(x.data, 0x3c, x.nbytes), cudaSuccess);
        assert_int_equal(cudaMemset(g.data, 0x3c, g.nbytes), cudaSuccess);
        assert_int_equal(cudaMemset(b.data, 0, b.nbytes), cudaSuccess);
        int64_t sd[1] = {T};
        tx_tensor mu = dalloc(KU_F32, 1, sd), rs = dalloc(KU_F32, 1, sd);
        tx_cuda_linear_quant q;
        memset(&q, 0, sizeof q);
        q.x = fp8_q(E4M3, NULL, NULL);
        q.w = fp8_q(E4M3, NULL, NULL);
        q.dy = fp8_q(E5M2, NULL, NULL);
        if (bwd) q.dy.handed_off = true;
        else q.x.handed_off = true;
        /* bwd: the Linear's y is [T, N] = the Bias's tensor: K = 128, N = C */
        lin L;
        int64_t xd2[2] = {T, 128}, wd2[2] = {C, 128};
        tx_tensor x2 = dalloc(KU_BF16, 2, xd2), w2 = dalloc(KU_BF16, 2, wd2);
        if (bwd) {
            lin_make(&L, &q, x2.data, w2.data, KU_BF16, T, 128, C);
        } else {
            lin_make(&L, &q, y.data, w.data, KU_BF16, T, C, N);
        }
        const tx_cuda_lin_operand *o = bwd ? &L.l->ody : &L.l->ox;
        tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
        tx_te_attr_defaults(tx_te_schema(cases[ci].op), attrs);
        const tx_tensor *pp[2] = {&g, &b};
        int np = cases[ci].op == TX_TE_LAYER_NORM ? 2 : bwd ? 1 : 0;
        tx_cuda_te_desc pd = {.op = cases[ci].op, .name = "p", .attrs = attrs, .input = &x,
                              .params = pp, .n_params = np, .output = &y, .training = true,
                              .needs = TX_TE_FOR_ALL, .sm = 90, .handoff_to = L.node,
                              .handoff_state = &L.state};
        const tx_cuda_te_desc *descs[1] = {&pd};
        tx_cuda_fused *f = NULL;
        TG_OK(tx_cuda_fused_prepare(cases[ci].f, bwd, descs, NULL, 1, &f));
        tx_cuda_te_node *un = NULL;
        tx_cuda_te_desc ud = pd;
        ud.handoff_to = NULL;
        TG_OK(tx_cuda_te_prepare(&ud, &un));
        size_t sb = tx_cuda_fused_scratch_bytes(f), ub = tx_cuda_te_scratch_bytes(un);
        void *scratch = tg_dev_alloc((sb > ub ? sb : ub) + 256);
        void *region2 = tg_dev_alloc(o->bytes + 256);
        tx_cuda_lin_operand o2 = *o;
        o2.q.handed_off = false;
        tx_cuda_env env = env0();
        tx_tensor *aux[2] = {&mu, &rs};
        tx_te_fwd_args fa = {.op = cases[ci].op, .attrs = attrs, .input = &x, .params = pp,
                             .n_params = np, .output = &y, .aux = aux,
                             .n_aux = cases[ci].op == TX_TE_LAYER_NORM ? 2 : 0, .training = true};
        tx_tensor *dbp[1] = {&g};
        tx_te_bwd_args ba = {.op = TX_TE_BIAS, .attrs = attrs, .grad_output = &x, .grad_input = &y,
                             .grad_params = dbp, .n_grad_params = 1};
        const tx_te_fwd_args *fas[1] = {&fa};
        const tx_te_bwd_args *bas[1] = {&ba};
        void *states[1] = {NULL};
        double ms[2] = {0, 0};
        for (int rep = 0; rep < 2; rep++) { /* first round warms up */
            assert_int_equal(cudaEventRecord(ev[0], NULL), cudaSuccess);
            for (int it = 0; it < ITERS; it++) {
                if (bwd) TG_OK(tx_cuda_te_backward(un, &ba, NULL, scratch, &env));
                else TG_OK(tx_cuda_te_forward(un, &fa, NULL, scratch, &env));
                TG_OK(tx_cuda_lin_quantize(&o2, bwd ? x.data : y.data, KU_BF16, region2, 0, NULL));
            }
            assert_int_equal(cudaEventRecord(ev[1], NULL), cudaSuccess);
            for (int it = 0; it < ITERS; it++) {
                if (bwd) TG_OK(tx_cuda_fused_backward(f, bas, states, scratch, &env));
                else TG_OK(tx_cuda_fused_forward(f, fas, states, scratch, &env));
            }
            assert_int_equal(cudaEventRecord(ev[2], NULL), cudaSuccess);
            ms[0] = time_ms(ev[0], ev[1]) / ITERS;
            ms[1] = time_ms(ev[1], ev[2]) / ITERS;
        }
        tg_sync("timing");
        /* the fused pass's bytes: read 2, write 2 (hp) + 1 + 1 (fp8 row, col);
         * the cast re-reads 2 */
        double gb = (double)T * (double)C * (bwd ? 8.0 : 8.0) / 1e9;
        char detail[200];
        snprintf(detail, sizeof detail,
                 "unfused op + quantize %.3f ms, fused hand-off %.3f ms (%.2fx; %.0f GB/s "
                 "effective over %.2f GB)", ms[0], ms[1], ms[0] / ms[1], gb / (ms[1] * 1e-3), gb);
        fprintf(stderr, "timing %s: %s\n", cases[ci].name, detail);
        tg_record(cases[ci].name, 1, detail);
        tx_cuda_fused_free(f);
        tx_cuda_te_node_free(un);
        lin_free(&L);
        void *bufs[] = {x.data, y.data, g.data, b.data, w.data, mu.data, rs.data, scratch, region2,
                        x2.data, w2.data};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
    }
    for (int i = 0; i < 3; i++) cudaEventDestroy(ev[i]);
}

#define F32 KU_F32
#define BF16 KU_BF16

static const hcase cases[] = {
    {"norm-quantize layernorm bf16 current", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 0, BF16, 0},
    {"norm-quantize layernorm bf16 delayed", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 0, BF16, 1},
    {"norm-quantize rmsnorm bf16 current", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, 0, BF16, 0},
    {"norm-quantize layernorm f32 current", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 0, F32, 0},
    {"norm-quantize rmsnorm f32 delayed", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, 0, F32, 1},
    {"act-quantize gelu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 0, BF16, 0},
    {"act-quantize gelu bf16 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 0, BF16, 1},
    {"act-quantize gelu-erf f32 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 1, F32, 0},
    {"act-quantize relu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_RELU, 0, BF16, 0},
    {"act-quantize silu f32 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SILU, 0, F32, 1},
    {"bias-quantize bf16 current", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 0, BF16, 0},
    {"bias-quantize bf16 delayed", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 0, BF16, 1},
    {"bias-quantize f32 current", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 0, F32, 0},
};

int main(void)
{
    tg_require_gpu("test_gpu_handoff");
    tx_gemm_lt *h = NULL;
    teexec_status *st = tx_gemm_lt_create(WS_BYTES, &h);
    if (st) {
        fprintf(stderr, "test_gpu_handoff: tx_gemm_lt_create: %s\n", teexec_status_message(st));
        return 1;
    }
    memset(&g_env, 0, sizeof g_env);
    g_env.gemm = h;
    g_env.gemm_ws = tg_dev_alloc(WS_BYTES);
    g_env.gemm_ws_bytes = WS_BYTES;
    g_env.sm = tx_gemm_lt_sm(h);
    g_env.deterministic = true;
    enum { NC = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[NC + 2];
    size_t n = 0;
    for (size_t i = 0; i < NC; i++) {
        struct CMUnitTest t = {cases[i].name, run_case, NULL, NULL, (void *)&cases[i]};
        tests[n++] = t;
    }
    struct CMUnitTest d = cmocka_unit_test(declines), t = cmocka_unit_test(timing);
    tests[n++] = d;
    tests[n++] = t;
    int rc = _cmocka_run_group_tests("test_gpu_handoff", tests, n, NULL, NULL);
    tg_dev_free(g_env.gemm_ws);
    tx_gemm_lt_destroy(h);
    return rc;
}
