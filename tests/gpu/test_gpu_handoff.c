/*
 * test_gpu_handoff.c - the FP8 per-tensor quantized hand-offs on the GPU
 * (exec/cuda/te_cuda_handoff.c over kernels/cuda/handoff_fp8.h and
 * handoff_act.h): ForwardNormQuantize, ForwardActivationQuantize (every
 * activation it covers, the GLU family included), BackwardBiasQuantize and
 * BackwardActivationBias's quantize, each under fp8-current and
 * fp8-delayed, bf16 and fp32; float16 through the kernels and the
 * operand's cast directly (the Linear itself takes no float16 FP8 operand).
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
 * BackwardActivationBias: dx and dbias bit for bit against the unquantized
 * dact+dbias kernel (te_cuda_basic_fused.c), the region and the Linear's
 * grads against the Linear quantizing that dx itself, dx / dbias within
 * tolerance of the CPU fused kernel. Activations: the output bit for bit
 * against the unfused GPU op.
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
#include "kernels/cuda/handoff_act.h"
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
    int direct; /* the kernels and the operand's cast without Linears (float16) */
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
    void *dy_region; /* a handed-off dy's region (the executor's is backward-only) */
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
    size_t rb = tx_cuda_linear_dy_region_bytes(L->l);
    L->dy_region = rb ? tg_dev_alloc(rb) : NULL;
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
                        .n_saved = 2, .grad_input = dx, .grad_params = dwp, .n_grad_params = 1,
                        .handoff_region = L->dy_region};
    TG_OK(tx_cuda_te_backward(L->node, &a, L->state, L->scratch, env));
}

static void lin_free(lin *L)
{
    tx_cuda_te_node_free(L->node);
    tg_dev_free(L->y.data);
    tg_dev_free(L->state);
    tg_dev_free(L->scratch);
    if (L->dy_region) tg_dev_free(L->dy_region);
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

/* A region (downloaded) against the CPU quantizer on `src` (host). */
static void compare_cpu(const char *cname, const tx_cuda_lin_operand *o1, const region_host *r,
                        const tx_tensor *src, int delayed, float dscale, float am1)
{
    const region_host a = *r;
    bool row = o1->usage & TX_QUSAGE_ROWWISE, col = o1->usage & TX_QUSAGE_COLUMNWISE;
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
    compare_cpu(cname, o1, &a, src, delayed, dscale, am1);
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

static double atol_of(teexec_dtype dt) { return dt == KU_BF16 ? 1.6e-2 : dt == KU_F16 ? 1e-3 : 1e-5; }
static double rtol_of(teexec_dtype dt) { return dt == KU_BF16 ? 1.6e-2 : dt == KU_F16 ? 1e-3 : 1e-5; }

static bool gated_op(tx_te_op_id op)
{
    return op == TX_TE_GLU || op == TX_TE_GEGLU || op == TX_TE_QGEGLU || op == TX_TE_REGLU ||
           op == TX_TE_SREGLU || op == TX_TE_SWIGLU || op == TX_TE_CLAMPED_SWIGLU;
}

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
    /* the GLU family's x has twice the output's (the Linear's x) columns */
    int64_t xin[2] = {T_, gated_op(c->op) ? 2 * K_ : K_};
    tx_tensor hx = {0}, hg = {0}, hb = {0}, hw = {0};
    ku_make(&hx, c->dt, 2, xin, norm ? -3.0 : -5.0, norm ? 5.0 : 5.0);
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
    /* an activation's output: the unfused kernel's formulas, the same bits */
    if (norm) {
        snprintf(label, sizeof label, "%s hp output vs the unfused GPU op", c->name);
        ku_expect_close(label, &hyu, yf.data, rtol_of(c->dt), atol_of(c->dt));
    } else {
        expect_dev_equal(c->name, "hp output vs the unfused GPU op (bits)", &yu, &yf);
    }
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

/* Two identical FP8 Linears [T_, K_] -> [T_, N_] over x and w, run forward:
 * L1 expects its grad_output handed off (the producer under test writes
 * it), L2 quantizes dy itself. With d_scale (fp8-delayed) dy has that known
 * scale and each Linear its own amax slot. */
static void dy_pair_make(lin *L1, lin *L2, const hcase *c, const tx_tensor *x, const tx_tensor *w,
                         float *d_scale, float *d_amax1, float *d_amax2, const tx_cuda_env *env)
{
    tx_cuda_linear_quant q1, q2;
    memset(&q1, 0, sizeof q1);
    q1.x = fp8_q(E4M3, NULL, NULL);
    q1.w = fp8_q(E4M3, NULL, NULL);
    q1.dy = fp8_q(E5M2, d_scale, d_amax1);
    q2 = q1;
    q2.dy.delayed_amax = d_amax2;
    q1.dy.handed_off = true;
    lin_make(L1, &q1, x->data, w->data, c->dt, T_, K_, N_);
    lin_make(L2, &q2, x->data, w->data, c->dt, T_, K_, N_);
    lin_forward(L1, x->data, env);
    lin_forward(L2, x->data, env);
}

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
    tx_cuda_env env = env0();
    lin L1, L2;
    dy_pair_make(&L1, &L2, c, &x, &w, d_scale, d_amax1, d_amax2, &env);
    assert_true(L1.l->st_dy != SIZE_MAX);

    tx_te_attr_value battrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_BIAS), battrs);
    const tx_tensor *bp[1] = {&bias};
    tx_cuda_te_desc bdesc = {.op = TX_TE_BIAS, .name = "bias", .attrs = battrs, .input = &L1.y,
                             .params = bp, .n_params = 1, .output = &dxb, .training = true,
                             .needs = TX_TE_FOR_ALL, .sm = 90, .deterministic = true,
                             .handoff_to = L1.node, .handoff_state = &L1.dy_region};
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

    compare_regions(c->name, &L1.l->ody, (char *)L1.dy_region + L1.l->st_dy, &L2.l->ody,
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


/* ---- backward hand-off: BackwardActivationBias (Linear, Bias, act) -------- */

/* The fused kernel's args: a[0] the Bias (dx, dbias), a[1] the activation
 * (saved x, dy). */
typedef struct ab_args {
    tx_te_attr_value battrs[TX_TE_MAX_ATTRS], aattrs[TX_TE_MAX_ATTRS];
    const tx_tensor *saved[1];
    tx_tensor *dbp[1];
    tx_te_bwd_args b, a;
    const tx_te_bwd_args *as[2];
} ab_args;

static void ab_setup(ab_args *s, tx_te_op_id act, const tx_tensor *x, tx_tensor *dy,
                     tx_tensor *dx, tx_tensor *db)
{
    memset(s, 0, sizeof *s);
    tx_te_attr_defaults(tx_te_schema(TX_TE_BIAS), s->battrs);
    tx_te_attr_defaults(tx_te_schema(act), s->aattrs);
    s->saved[0] = x;
    s->dbp[0] = db;
    s->b = (tx_te_bwd_args){.op = TX_TE_BIAS, .attrs = s->battrs, .grad_input = dx,
                            .grad_params = s->dbp, .n_grad_params = 1};
    s->a = (tx_te_bwd_args){.op = act, .attrs = s->aattrs, .grad_output = dy, .saved = s->saved,
                            .n_saved = 1};
    s->as[0] = &s->b;
    s->as[1] = &s->a;
}

/* The fused kernel over Bias + act: bound to `consumer` (hand-off) or not
 * (te_cuda_basic_fused.c's unquantized dact+dbias). */
static tx_cuda_fused *ab_prepare(ab_args *s, tx_te_op_id act, tx_tensor *lin_y, tx_tensor *h,
                                 const tx_tensor *bias, const lin *consumer, void **scratch)
{
    static const tx_tensor *bp[1];
    bp[0] = bias;
    tx_cuda_te_desc bd = {.op = TX_TE_BIAS, .name = "bias", .attrs = s->battrs, .input = lin_y,
                          .params = bp, .n_params = 1, .output = h, .training = true,
                          .needs = TX_TE_FOR_ALL, .sm = 90, .deterministic = true};
    if (consumer) {
        bd.handoff_to = consumer->node;
        bd.handoff_state = &consumer->dy_region; /* a grad_output: the dy region */
    }
    tx_cuda_te_desc ad = {.op = act, .name = "act", .attrs = s->aattrs, .input = h, .output = h,
                          .training = true, .needs = TX_TE_FOR_ALL, .sm = 90,
                          .deterministic = true};
    const tx_cuda_te_desc *descs[2] = {&bd, &ad};
    tx_cuda_fused *f = NULL;
    TG_OK(tx_cuda_fused_prepare(TX_FUSION_BWD_ACT_BIAS, true, descs, NULL, 2, &f));
    *scratch = tg_dev_alloc(tx_cuda_fused_scratch_bytes(f) + 256);
    return f;
}

static void run_act_bias(const hcase *c)
{
    ku_seed(4242u + (uint64_t)c->op * 13u + (uint64_t)c->dt + (uint64_t)c->delayed * 1000u);
    char label[160];
    int64_t xd[2] = {T_, K_}, wd[2] = {N_, K_}, yd[2] = {T_, N_}, bd[1] = {N_};
    tx_tensor hx = {0}, hw = {0}, hh = {0}, hdy = {0}, hbias = {0};
    ku_make(&hx, c->dt, 2, xd, -2.0, 2.0);
    ku_make(&hw, c->dt, 2, wd, -0.2, 0.2);
    ku_make(&hh, c->dt, 2, yd, -4.0, 4.0);  /* the activation's input */
    ku_make(&hdy, c->dt, 2, yd, -1e-2, 1e-2);
    ku_make(&hbias, c->dt, 1, bd, -0.5, 0.5);
    ku_set(&hdy, 7 * N_ + 5, 0.5f);
    ku_set(&hh, 7 * N_ + 5, 1.5f); /* f' > 0 there: one dx decides the amax */
    tx_tensor x = dup_dev(&hx), w = dup_dev(&hw), h = dup_dev(&hh), dy = dup_dev(&hdy);
    tx_tensor bias = dup_dev(&hbias);
    tx_tensor dxf = dalloc(c->dt, 2, yd), dbf = dalloc(c->dt, 1, bd);
    tx_tensor dxu = dalloc(c->dt, 2, yd), dbu = dalloc(c->dt, 1, bd);
    tx_tensor dx1 = dalloc(c->dt, 2, xd), dx2 = dalloc(c->dt, 2, xd);
    tx_tensor dw1 = dalloc(c->dt, 2, wd), dw2 = dalloc(c->dt, 2, wd);
    float dscale = 57344.0f / 0.5f;
    float *d_scale = c->delayed ? dev_float(dscale) : NULL;
    float *d_amax1 = c->delayed ? dev_float(0.0f) : NULL, *d_amax2 = c->delayed ? dev_float(0.0f) : NULL;
    tx_cuda_env env = env0();
    lin L1, L2;
    dy_pair_make(&L1, &L2, c, &x, &w, d_scale, d_amax1, d_amax2, &env);

    ab_args sf, su;
    ab_setup(&sf, c->op, &h, &dy, &dxf, &dbf);
    ab_setup(&su, c->op, &h, &dy, &dxu, &dbu);
    if (c->gelu_erf) sf.aattrs[TX_TE_A_GELU_APPROX].i = su.aattrs[TX_TE_A_GELU_APPROX].i = TX_TE_GELU_ERF;
    void *fs = NULL, *us = NULL;
    tx_cuda_fused *f = ab_prepare(&sf, c->op, &L1.y, &h, &bias, &L1, &fs);
    tx_cuda_fused *u = ab_prepare(&su, c->op, &L2.y, &h, &bias, NULL, &us);
    void *states[2] = {NULL, NULL};
    TG_OK(tx_cuda_fused_backward(f, sf.as, states, fs, &env));
    TG_OK(tx_cuda_fused_backward(u, su.as, states, us, &env));
    lin_backward(&L1, &dxf, &dx1, &dw1, &env);
    lin_backward(&L2, &dxu, &dx2, &dw2, &env);
    tg_sync(c->name);

    expect_dev_equal(c->name, "dx vs the unquantized dact+dbias kernel", &dxf, &dxu);
    expect_dev_equal(c->name, "dbias vs the unquantized dact+dbias kernel", &dbf, &dbu);
    tx_tensor hdx;
    host_of(&hdx, &dxf);
    compare_regions(c->name, &L1.l->ody, (char *)L1.dy_region + L1.l->st_dy, &L2.l->ody,
                    (char *)L2.scratch + L2.l->sc_dy, &hdx, c->delayed, dscale, d_amax1, d_amax2);
    expect_dev_equal(c->name, "dgrad with the hand-off vs without", &dx1, &dx2);
    expect_dev_equal(c->name, "wgrad with the hand-off vs without", &dw1, &dw2);

    /* the CPU fused kernel (same formulas in float, its own libm) */
    tx_tensor cdx = {0}, cdb = {0};
    TG_OK(tx_tensor_alloc(&cdx, c->dt, 2, yd));
    TG_OK(tx_tensor_alloc(&cdb, c->dt, 1, bd));
    TG_OK(tx_fused_dact_dbias(c->op, sf.aattrs, &hdy, &hh, c->dt, &cdx, &cdb, NULL, NULL));
    snprintf(label, sizeof label, "%s dx vs the CPU fused kernel", c->name);
    ku_expect_close(label, &cdx, dxf.data, rtol_of(c->dt), c->dt == KU_BF16 ? 1e-4 : 1e-7);
    snprintf(label, sizeof label, "%s dbias vs the CPU fused kernel", c->name);
    ku_expect_close(label, &cdb, dbf.data, rtol_of(c->dt), c->dt == KU_BF16 ? 1e-3 : 1e-6);

    tx_cuda_fused_free(f);
    tx_cuda_fused_free(u);
    lin_free(&L1);
    lin_free(&L2);
    void *bufs[] = {x.data, w.data, h.data, dy.data, bias.data, dxf.data, dbf.data, dxu.data,
                    dbu.data, dx1.data, dx2.data, dw1.data, dw2.data, fs, us, d_scale, d_amax1,
                    d_amax2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) tg_dev_free(bufs[i]);
    tx_tensor *hs[] = {&hx, &hw, &hh, &hdy, &hbias, &hdx, &cdx, &cdb};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) tx_tensor_release(hs[i]);
}

/* ---- float16: the kernels and the operand's cast, no Linear --------------- */

/* An unfused te.ops node's forward on the GPU (no quantization). */
static void unfused_forward(tx_te_op_id op, const tx_te_attr_value *attrs, tx_tensor *x,
                            const tx_tensor *const *params, int np, tx_tensor *y,
                            tx_tensor *const *aux, int naux)
{
    tx_cuda_te_desc d = {.op = op, .name = "unfused", .attrs = attrs, .input = x,
                         .params = params, .n_params = np, .output = y, .training = true,
                         .needs = TX_TE_FOR_ALL, .sm = 90, .deterministic = true};
    tx_cuda_te_node *n = NULL;
    TG_OK(tx_cuda_te_prepare(&d, &n));
    void *scr = tg_dev_alloc(tx_cuda_te_scratch_bytes(n) + 256);
    tx_cuda_env env = env0();
    tx_te_fwd_args a = {.op = op, .attrs = attrs, .input = x, .params = params, .n_params = np,
                        .output = y, .aux = (tx_tensor **)aux, .n_aux = naux, .training = true};
    TG_OK(tx_cuda_te_forward(n, &a, NULL, scr, &env));
    tg_sync("unfused forward");
    tx_cuda_te_node_free(n);
    tg_dev_free(scr);
}

static void run_direct(const hcase *c)
{
    ku_seed(515u + (uint64_t)c->op * 3u + (uint64_t)c->delayed * 1000u);
    const teexec_dtype dt = c->dt;
    bool bwd = c->fusion == TX_FUSION_BWD_BIAS_QUANTIZE || c->fusion == TX_FUSION_BWD_ACT_BIAS;
    bool gated = gated_op(c->op);
    int64_t od[2] = {T_, K_}, xd[2] = {T_, gated ? 2 * K_ : K_}, cd[1] = {K_}, sd[1] = {T_};
    float dscale = bwd ? 57344.0f / 0.5f : 448.0f / 16.0f;
    float *d_scale = c->delayed ? dev_float(dscale) : NULL;
    float *d_amax = c->delayed ? dev_float(0.0f) : NULL;
    tx_cuda_operand_q oq = fp8_q(bwd ? E5M2 : E4M3, d_scale, d_amax);
    tx_cuda_lin_operand o;
    TG_OK(tx_cuda_lin_operand_init(&o, &oq, T_, K_, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE, 90));
    void *region = tg_dev_alloc(o.bytes + 256);
    tx_cuda_lin_handoff t;
    TG_OK(tx_cuda_lin_handoff_begin(&o, region, &t, NULL));
    tx_cuda_handoff_q q = {t.fmt, t.amax, t.scale, t.row_data};
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(c->op), attrs);

    tx_tensor hx = {0}, hg = {0}, hb = {0}, hdy = {0};
    ku_make(&hx, dt, 2, xd, -4.0, 4.0);
    ku_make(&hg, dt, 1, cd, 0.5, 1.5);
    ku_make(&hb, dt, 1, cd, -0.5, 0.5);
    ku_make(&hdy, dt, 2, od, -1e-2, 1e-2);
    ku_set(&hx, 3 * (uint64_t)xd[1] + 9, 6.0f);
    tx_tensor x = dup_dev(&hx), g = dup_dev(&hg), b = dup_dev(&hb), dy = dup_dev(&hdy);
    tx_tensor out = dalloc(dt, 2, od), ref = dalloc(dt, 2, od);
    tx_tensor db = dalloc(dt, 1, cd), dbr = dalloc(dt, 1, cd);
    tx_tensor mu = dalloc(KU_F32, 1, sd), rs = dalloc(KU_F32, 1, sd);
    tx_tensor mur = dalloc(KU_F32, 1, sd), rsr = dalloc(KU_F32, 1, sd);
    size_t wsb = tx_cuda_handoff_dact_bias_workspace_floats(T_, K_) * sizeof(float) + 256;
    float *ws = tg_dev_alloc(wsb);
    const tx_tensor *hp = &out; /* what was quantized */
    switch (c->fusion) {
    case TX_FUSION_FWD_NORM_QUANTIZE: {
        tx_cuda_norm_fwd k = {.rms = c->op == TX_TE_RMS_NORM, .rows = T_, .h = K_,
                              .eps = (float)attrs[TX_TE_A_NORM_EPS].f, .x = x.data,
                              .x_dtype = dt, .gamma = g.data, .beta = b.data, .w_dtype = dt,
                              .y = out.data, .y_dtype = dt, .mu = mu.data, .rsigma = rs.data};
        TG_OK(tx_cuda_handoff_norm_forward(&k, &q, NULL));
        const tx_tensor *pp[2] = {&g, &b};
        tx_tensor *aux[2] = {&mur, &rsr};
        unfused_forward(c->op, attrs, &x, pp, 2, &ref, aux, 2);
        char label[160];
        tx_tensor hr;
        host_of(&hr, &ref);
        snprintf(label, sizeof label, "%s hp output vs the unfused GPU op", c->name);
        ku_expect_close(label, &hr, out.data, rtol_of(dt), atol_of(dt));
        tx_tensor_release(&hr);
        break;
    }
    case TX_FUSION_FWD_ACT_QUANTIZE: {
        tx_cuda_actx_args k;
        memset(&k, 0, sizeof k);
        k.fn = c->op == TX_TE_SWIGLU ? TX_CUDA_ACTX_SILU : TX_CUDA_ACTX_GELU_TANH;
        k.gated = gated;
        k.rows = T_;
        k.cols = K_;
        k.x = x.data;
        k.x_dtype = dt;
        k.y = out.data;
        k.y_dtype = dt;
        TG_OK(tx_cuda_handoff_act_forward(&k, &q, NULL));
        unfused_forward(c->op, attrs, &x, NULL, 0, &ref, NULL, 0);
        expect_dev_equal(c->name, "hp output vs the unfused GPU op (bits)", &ref, &out);
        break;
    }
    case TX_FUSION_BWD_BIAS_QUANTIZE:
        TG_OK(tx_cuda_handoff_bias_backward(dy.data, dt, T_, K_, out.data, db.data, dt, ws, &q,
                                            NULL));
        hp = &dy;
        tg_sync(c->name);
        expect_dev_equal(c->name, "Bias dx = dy", &out, &dy);
        break;
    default: { /* BWD_ACT_BIAS: x is the activation's input [T_, K_] */
        TG_OK(tx_cuda_handoff_dact_bias_backward(TX_CUDA_ACTX_GELU_TANH, T_, K_, x.data, dy.data,
                                                 out.data, dt, db.data, dt, ws, &q, NULL));
        ab_args su;
        ab_setup(&su, TX_TE_GELU, &x, &dy, &ref, &dbr);
        void *us = NULL;
        tx_tensor by = dalloc(dt, 2, od);
        tx_cuda_fused *u = ab_prepare(&su, TX_TE_GELU, &by, &x, &b, NULL, &us);
        void *states[2] = {NULL, NULL};
        tx_cuda_env env = env0();
        TG_OK(tx_cuda_fused_backward(u, su.as, states, us, &env));
        tg_sync(c->name);
        expect_dev_equal(c->name, "dx vs the unquantized dact+dbias kernel", &out, &ref);
        expect_dev_equal(c->name, "dbias vs the unquantized dact+dbias kernel", &db, &dbr);
        tx_cuda_fused_free(u);
        tg_dev_free(us);
        tg_dev_free(by.data);
        break;
    }
    }
    TG_OK(tx_cuda_lin_handoff_finish(&o, hp->data, dt, region, NULL));
    tg_sync(c->name);
    tx_tensor hsrc;
    host_of(&hsrc, hp);
    region_host r;
    region_get(&r, &o, region);
    float am = 0;
    if (c->delayed) tg_download(&am, d_amax, 4);
    compare_cpu(c->name, &o, &r, &hsrc, c->delayed, dscale, am);
    region_free(&r);
    tx_tensor_release(&hsrc);
    void *bufs[] = {region, x.data, g.data, b.data, dy.data, out.data, ref.data, db.data, dbr.data,
                    mu.data, rs.data, mur.data, rsr.data, ws, d_scale, d_amax};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) tg_dev_free(bufs[i]);
    tx_tensor *hs[] = {&hx, &hg, &hb, &hdy};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) tx_tensor_release(hs[i]);
}

static void run_case(void **state)
{
    const hcase *c = *state;
    if (c->direct) run_direct(c);
    else if (c->fusion == TX_FUSION_BWD_BIAS_QUANTIZE) run_backward(c);
    else if (c->fusion == TX_FUSION_BWD_ACT_BIAS) run_act_bias(c);
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
        {TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, KU_BF16, 4096, TX_QKIND_NVFP4, "NVFP4"},
        {TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, KU_BF16, 4096, TX_QKIND_MXFP8, "MXFP8"},
        {TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SCALED_SWIGLU, KU_BF16, 4096, TX_QKIND_FP8_TENSOR, "unscaled"},
        {TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, KU_BF16, 4096, TX_QKIND_MXFP8, "MXFP8"},
        {TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, KU_BF16, 4096, TX_QKIND_FP8_BLOCK, "fp8-block"},
        {TX_FUSION_BWD_ACT_BIAS, TX_TE_SWIGLU, KU_BF16, 4096, TX_QKIND_FP8_TENSOR, "after the Bias"},
        {TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, TEEXEC_DTYPE_DOUBLE, 4096, TX_QKIND_FP8_TENSOR, "float16"},
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
                              .handoff_state = bwd ? &L.dy_region : &L.state};
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

/* BackwardActivationBias at the MLP's fc1 shape (8192 x 16384 bf16, the
 * GELU's input; fc1's grad_output): the unquantized dact+dbias kernel plus
 * the Linear's own quantize of dx, against the fused dact+dbias+quantize
 * (both fp8-current, rowwise + columnwise). */
static void timing_act_bias(void **state)
{
    (void)state;
    enum { ITERS = 20 };
    const int64_t T = 8192, C = 16384;
    int64_t yd[2] = {T, C}, bd[1] = {C}, xd[2] = {T, 128}, wd[2] = {C, 128};
    tx_tensor h = dalloc(KU_BF16, 2, yd), dy = dalloc(KU_BF16, 2, yd), dx = dalloc(KU_BF16, 2, yd);
    tx_tensor ly = dalloc(KU_BF16, 2, yd), bias = dalloc(KU_BF16, 1, bd), db = dalloc(KU_BF16, 1, bd);
    tx_tensor x2 = dalloc(KU_BF16, 2, xd), w2 = dalloc(KU_BF16, 2, wd);
    assert_int_equal(cudaMemset(h.data, 0x3c, h.nbytes), cudaSuccess);
    assert_int_equal(cudaMemset(dy.data, 0x3a, dy.nbytes), cudaSuccess);
    tx_cuda_linear_quant q;
    memset(&q, 0, sizeof q);
    q.x = fp8_q(E4M3, NULL, NULL);
    q.w = fp8_q(E4M3, NULL, NULL);
    q.dy = fp8_q(E5M2, NULL, NULL);
    q.dy.handed_off = true;
    lin L; /* fc1: y [T, C] = x [T, 128] w^T: its grad_output is dx */
    lin_make(&L, &q, x2.data, w2.data, KU_BF16, T, 128, C);
    ab_args sf, su;
    ab_setup(&sf, TX_TE_GELU, &h, &dy, &dx, &db);
    ab_setup(&su, TX_TE_GELU, &h, &dy, &dx, &db);
    void *fs = NULL, *us = NULL;
    tx_cuda_fused *f = ab_prepare(&sf, TX_TE_GELU, &ly, &h, &bias, &L, &fs);
    tx_cuda_fused *u = ab_prepare(&su, TX_TE_GELU, &ly, &h, &bias, NULL, &us);
    const tx_cuda_lin_operand *o = &L.l->ody;
    tx_cuda_lin_operand o2 = *o;
    o2.q.handed_off = false;
    void *region2 = tg_dev_alloc(o->bytes + 256);
    tx_cuda_env env = env0();
    void *states[2] = {NULL, NULL};
    cudaEvent_t ev[3];
    for (int i = 0; i < 3; i++) assert_int_equal(cudaEventCreate(&ev[i]), cudaSuccess);
    double ms[2] = {0, 0};
    for (int rep = 0; rep < 2; rep++) { /* the first round warms up */
        assert_int_equal(cudaEventRecord(ev[0], NULL), cudaSuccess);
        for (int it = 0; it < ITERS; it++) {
            TG_OK(tx_cuda_fused_backward(u, su.as, states, us, &env));
            TG_OK(tx_cuda_lin_quantize(&o2, dx.data, KU_BF16, region2, 0, NULL));
        }
        assert_int_equal(cudaEventRecord(ev[1], NULL), cudaSuccess);
        for (int it = 0; it < ITERS; it++) TG_OK(tx_cuda_fused_backward(f, sf.as, states, fs, &env));
        assert_int_equal(cudaEventRecord(ev[2], NULL), cudaSuccess);
        ms[0] = time_ms(ev[0], ev[1]) / ITERS;
        ms[1] = time_ms(ev[1], ev[2]) / ITERS;
    }
    tg_sync("timing act-bias");
    /* fused: read x, dy (2 + 2), write dx (2) + fp8 row, col (1 + 1); the
     * cast re-reads dx (2) */
    double gb = (double)T * (double)C * 10.0 / 1e9;
    char detail[200];
    snprintf(detail, sizeof detail,
             "unquantized dact+dbias + quantize %.3f ms, fused dact+dbias+quantize %.3f ms "
             "(%.2fx; %.0f GB/s effective over %.2f GB)",
             ms[0], ms[1], ms[0] / ms[1], gb / (ms[1] * 1e-3), gb);
    fprintf(stderr, "timing dGELU+dbias -> fc1 dy (8192x16384): %s\n", detail);
    tg_record("dGELU+dbias -> fc1 dy (8192x16384)", 1, detail);
    for (int i = 0; i < 3; i++) cudaEventDestroy(ev[i]);
    tx_cuda_fused_free(f);
    tx_cuda_fused_free(u);
    lin_free(&L);
    void *bufs[] = {h.data, dy.data, dx.data, ly.data, bias.data, db.data, x2.data, w2.data, fs,
                    us, region2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
}

#define F32 KU_F32
#define BF16 KU_BF16
#define F16 KU_F16

static const hcase cases[] = {
    {"norm-quantize layernorm bf16 current", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 0, BF16, 0, 0},
    {"norm-quantize layernorm bf16 delayed", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 0, BF16, 1, 0},
    {"norm-quantize rmsnorm bf16 current", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, 0, BF16, 0, 0},
    {"norm-quantize layernorm f32 current", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 0, F32, 0, 0},
    {"norm-quantize rmsnorm f32 delayed", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, 0, F32, 1, 0},
    {"act-quantize gelu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 0, BF16, 0, 0},
    {"act-quantize gelu bf16 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 0, BF16, 1, 0},
    {"act-quantize gelu-erf f32 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 1, F32, 0, 0},
    {"act-quantize relu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_RELU, 0, BF16, 0, 0},
    {"act-quantize silu f32 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SILU, 0, F32, 1, 0},
    {"bias-quantize bf16 current", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 0, BF16, 0, 0},
    {"bias-quantize bf16 delayed", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 0, BF16, 1, 0},
    {"bias-quantize f32 current", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 0, F32, 0, 0},
    /* every other activation ForwardActivationQuantize covers */
    {"act-quantize qgelu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_QGELU, 0, BF16, 0, 0},
    {"act-quantize qgelu f32 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_QGELU, 0, F32, 1, 0},
    {"act-quantize srelu bf16 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SRELU, 0, BF16, 1, 0},
    {"act-quantize srelu f32 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SRELU, 0, F32, 0, 0},
    {"act-quantize relu f32 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_RELU, 0, F32, 1, 0},
    {"act-quantize silu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SILU, 0, BF16, 0, 0},
    {"act-quantize gelu-erf bf16 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 1, BF16, 1, 0},
    {"act-quantize glu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GLU, 0, BF16, 0, 0},
    {"act-quantize glu f32 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GLU, 0, F32, 1, 0},
    {"act-quantize geglu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GEGLU, 0, BF16, 0, 0},
    {"act-quantize geglu-erf f32 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GEGLU, 1, F32, 1, 0},
    {"act-quantize qgeglu bf16 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_QGEGLU, 0, BF16, 1, 0},
    {"act-quantize qgeglu f32 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_QGEGLU, 0, F32, 0, 0},
    {"act-quantize reglu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_REGLU, 0, BF16, 0, 0},
    {"act-quantize reglu f32 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_REGLU, 0, F32, 1, 0},
    {"act-quantize sreglu bf16 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SREGLU, 0, BF16, 1, 0},
    {"act-quantize sreglu f32 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SREGLU, 0, F32, 0, 0},
    {"act-quantize swiglu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SWIGLU, 0, BF16, 0, 0},
    {"act-quantize swiglu bf16 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SWIGLU, 0, BF16, 1, 0},
    {"act-quantize swiglu f32 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SWIGLU, 0, F32, 0, 0},
    {"act-quantize clamped-swiglu bf16 current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_CLAMPED_SWIGLU, 0, BF16, 0, 0},
    {"act-quantize clamped-swiglu f32 delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_CLAMPED_SWIGLU, 0, F32, 1, 0},
    /* BackwardActivationBias's quantize */
    {"act-bias-quantize gelu bf16 current", TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, 0, BF16, 0, 0},
    {"act-bias-quantize gelu bf16 delayed", TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, 0, BF16, 1, 0},
    {"act-bias-quantize gelu-erf f32 current", TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, 1, F32, 0, 0},
    {"act-bias-quantize qgelu bf16 current", TX_FUSION_BWD_ACT_BIAS, TX_TE_QGELU, 0, BF16, 0, 0},
    {"act-bias-quantize relu f32 delayed", TX_FUSION_BWD_ACT_BIAS, TX_TE_RELU, 0, F32, 1, 0},
    {"act-bias-quantize srelu bf16 delayed", TX_FUSION_BWD_ACT_BIAS, TX_TE_SRELU, 0, BF16, 1, 0},
    {"act-bias-quantize silu bf16 current", TX_FUSION_BWD_ACT_BIAS, TX_TE_SILU, 0, BF16, 0, 0},
    {"act-bias-quantize silu f32 current", TX_FUSION_BWD_ACT_BIAS, TX_TE_SILU, 0, F32, 0, 0},
    /* float16: kernels + the operand's cast, against the CPU quantizer */
    {"fp16 norm-quantize layernorm current", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 0, F16, 0, 1},
    {"fp16 norm-quantize layernorm delayed", TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, 0, F16, 1, 1},
    {"fp16 act-quantize gelu current", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, 0, F16, 0, 1},
    {"fp16 act-quantize swiglu delayed", TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SWIGLU, 0, F16, 1, 1},
    {"fp16 bias-quantize current", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 0, F16, 0, 1},
    {"fp16 bias-quantize delayed", TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, 0, F16, 1, 1},
    {"fp16 act-bias-quantize gelu current", TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, 0, F16, 0, 1},
    {"fp16 act-bias-quantize gelu delayed", TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, 0, F16, 1, 1},
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
    struct CMUnitTest tests[NC + 3];
    size_t n = 0;
    for (size_t i = 0; i < NC; i++) {
        struct CMUnitTest t = {cases[i].name, run_case, NULL, NULL, (void *)&cases[i]};
        tests[n++] = t;
    }
    struct CMUnitTest d = cmocka_unit_test(declines), t = cmocka_unit_test(timing),
                      t2 = cmocka_unit_test(timing_act_bias);
    tests[n++] = d;
    tests[n++] = t;
    tests[n++] = t2;
    int rc = _cmocka_run_group_tests("test_gpu_handoff", tests, n, NULL, NULL);
    tg_dev_free(g_env.gemm_ws);
    tx_gemm_lt_destroy(h);
    return rc;
}
