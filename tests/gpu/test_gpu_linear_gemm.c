/* GPU test: a Linear's three GEMMs under every recipe (exec/cuda/
 * linear_gemm.h). Per case: x[T,K], w[N,K], dy[T,N] are quantized on the
 * GPU (both usages) and by the CPU quantizers (kernels/cpu/qtensor.h);
 * every quantized byte, scale and per-tensor scalar must be equal. Then
 * FPROP, DGRAD and WGRAD run through tx_cuda_lin_gemm and are compared
 * with an FP64 GEMM of the CPU-dequantized operands (the operand a GEMM
 * reads is exactly that): |got - ref| <= acc * sum|a||b| + out_rtol |ref|,
 * acc = 1e-5 (FP32 accumulation: the exact emulation, high precision) or
 * 2e-3 (native FP8 GEMMs: Hopper's tensor cores accumulate a k-chunk at
 * reduced precision, fast or split); the worst error seen is logged per
 * GEMM, and out_rtol is one unit in the last place of the output dtype
 * (with a residual, cuBLASLt rounds alpha * AB to the output dtype before
 * adding it: one more rounding). Epilogues:
 * bias, bias + GELU with
 * the pre-activation, residual with alpha (in place), dGELU + dbias. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "exec/cuda/linear_gemm.h"
#include "kernels/cpu/qtensor.h"
#include "kernels/cuda/gemm_lt.h"
#include "tests/gpu/gpu_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 TEEXEC_DTYPE_FLOAT
#define F16 TEEXEC_DTYPE_FLOAT16
#define BF16 TEEXEC_DTYPE_BFLOAT16
#define E4 TEEXEC_DTYPE_FLOAT8E4M3FN
#define E5 TEEXEC_DTYPE_FLOAT8E5M2
#define FP4 TEEXEC_DTYPE_FLOAT4E2M1
#define ROW TX_QUSAGE_ROWWISE
#define COL TX_QUSAGE_COLUMNWISE

#define WS_BYTES ((size_t)32 * 1024 * 1024 + 1024)

static tx_cuda_env g_env;

/* ---- host values -------------------------------------------------------- */

static size_t esize(teexec_dtype t) { return t == F32 ? 4 : 2; }

static double get_val(teexec_dtype t, const void *p, size_t i)
{
    if (t == F32) return ((const float *)p)[i];
    if (t == F16) return tx_f16_to_f32(((const uint16_t *)p)[i]);
    return tx_bf16_to_f32(((const uint16_t *)p)[i]);
}

static void put_val(teexec_dtype t, void *p, size_t i, double v)
{
    if (t == F32) ((float *)p)[i] = (float)v;
    else if (t == F16) ((uint16_t *)p)[i] = tx_f32_to_f16((float)v);
    else ((uint16_t *)p)[i] = tx_f32_to_bf16((float)v);
}

/* v rounded to dtype t */
static double round_to(teexec_dtype t, double v)
{
    uint32_t buf[1];
    put_val(t, buf, 0, v);
    return get_val(t, buf, 0);
}

static uint64_t rng_state;
static double urand(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* A source matrix on host and device: values in (-1, 1) times 2^e with e
 * in [-3, 3] per run of 16 elements (so block scales differ), a few zeros. */
typedef struct mat {
    size_t rows, cols;
    teexec_dtype t;
    void *raw;
    double *val;
    void *dev;
} mat;

static mat make_mat(teexec_dtype t, size_t rows, size_t cols, uint64_t seed)
{
    mat m = {rows, cols, t, calloc(rows * cols, esize(t)), calloc(rows * cols, sizeof(double)), NULL};
    assert_non_null(m.raw);
    assert_non_null(m.val);
    rng_state = seed;
    int e = 0;
    for (size_t i = 0; i < rows * cols; i++) {
        if (i % 16 == 0) e = (int)(urand() * 7.0) - 3;
        double v = urand() < 0.02 ? 0.0 : ldexp(2.0 * urand() - 1.0, e);
        put_val(t, m.raw, i, v);
        m.val[i] = get_val(t, m.raw, i);
    }
    m.dev = tg_dev_upload(m.raw, rows * cols * esize(t));
    return m;
}

static void free_mat(mat *m)
{
    free(m->raw);
    free(m->val);
    tg_dev_free(m->dev);
}

/* ---- operands ------------------------------------------------------------ */

typedef struct qspec {
    bool on;
    tx_quant_config cfg;
    bool native;
    float delayed_scale; /* fp8-delayed: the scale the executor would pass (0: current) */
} qspec;

typedef struct operand {
    const char *name;
    mat m;
    tx_cuda_lin_operand op;
    void *region;
    float *d_scale, *d_amax; /* fp8-delayed device floats */
    double *deq_row, *deq_col; /* CPU dequantized usages (quantized operands) */
} operand;

static size_t cmp_region(const char *what, const void *dev, const void *cpu, size_t n)
{
    uint8_t *h = malloc(n + 1);
    assert_non_null(h);
    tg_download(h, dev, n);
    size_t d = tg_cmp_bytes(what, cpu, h, n);
    free(h);
    return d;
}

static float dev_float(const void *p)
{
    float f;
    tg_download(&f, p, sizeof f);
    return f;
}

/* Quantizes on the GPU and the CPU and compares every byte; returns the
 * number of differences. */
static size_t make_operand(operand *o, const char *name, teexec_dtype t, size_t rows, size_t cols,
                           const qspec *s, unsigned usage, uint64_t seed, uint64_t sr_offset)
{
    memset(o, 0, sizeof *o);
    o->name = name;
    o->m = make_mat(t, rows, cols, seed);
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = s->on;
    q.cfg = s->cfg;
    q.native = s->native;
    if (s->on && s->delayed_scale != 0.0f) {
        const float zero = 0.0f;
        o->d_scale = tg_dev_upload(&s->delayed_scale, sizeof(float));
        o->d_amax = tg_dev_upload(&zero, sizeof(float));
        q.delayed_scale = o->d_scale;
        q.delayed_amax = o->d_amax;
    }
    TG_OK(tx_cuda_lin_operand_init(&o->op, &q, rows, cols, usage, g_env.sm));
    if (!s->on) return 0;
    assert_true(o->op.bytes > 0);
    o->region = tg_dev_alloc(o->op.bytes);
    TG_OK(tx_cuda_lin_quantize(&o->op, o->m.dev, t, o->region, sr_offset, g_env.stream));
    tg_sync(name);

    tx_quant_config c = s->cfg;
    c.usage = usage;
    c.scale_layout = o->op.swizzled ? TX_SCALE_SWIZZLED : TX_SCALE_COMPACT;
    c.sr_offset = sr_offset;
    if (s->delayed_scale != 0.0f) {
        c.use_given_scale = true;
        c.given_scale = s->delayed_scale;
    }
    tx_qtensor cq;
    TG_OK(tx_quantize(o->m.raw, t, rows, cols, &c, &cq));
    size_t diff = 0;
    char w[160];
    const unsigned char *base = o->region;
    for (int u = 0; u < 2; u++) {
        const unsigned us = u ? COL : ROW;
        if (!(usage & us)) continue;
        const tx_qdata *qd = u ? &cq.col : &cq.row;
        const size_t doff = u ? o->op.col_data : o->op.row_data;
        const size_t soff = u ? o->op.col_scales : o->op.row_scales;
        snprintf(w, sizeof w, "%s %s data", name, u ? "columnwise" : "rowwise");
        diff += cmp_region(w, base + doff, qd->data, qd->data_bytes);
        if (qd->scale) {
            snprintf(w, sizeof w, "%s %s scales", name, u ? "columnwise" : "rowwise");
            if (soff == SIZE_MAX) fail_msg("%s: no scale array in the region", w);
            diff += cmp_region(w, base + soff, qd->scale, qd->scale_bytes);
            if ((u ? o->op.col_scale_cols : o->op.row_scale_cols) != qd->scale_cols) {
                fprintf(stderr, "%s: scale columns %zu, CPU %llu\n", w,
                        u ? o->op.col_scale_cols : o->op.row_scale_cols,
                        (unsigned long long)qd->scale_cols);
                diff++;
            }
        }
        if (cq.kind == TX_QKIND_NVFP4) {
            const float got = dev_float(base + o->op.scalars + 32 + 4 * (size_t)u);
            if (memcmp(&got, &qd->amax, 4)) {
                fprintf(stderr, "%s %s amax: gpu %g cpu %g\n", name, u ? "col" : "row",
                        (double)got, (double)qd->amax);
                diff++;
            }
        }
        double **deq = u ? &o->deq_col : &o->deq_row;
        float *f = malloc(sizeof(float) * rows * cols);
        assert_non_null(f);
        TG_OK(tx_dequantize(&cq, us, f));
        *deq = malloc(sizeof(double) * rows * cols);
        assert_non_null(*deq);
        for (size_t i = 0; i < rows * cols; i++) (*deq)[i] = f[i];
        free(f);
    }
    if (cq.kind == TX_QKIND_FP8_TENSOR) {
        const float si = dev_float(base + o->op.scalars + 16);
        const float am = dev_float(o->d_amax ? (const void *)o->d_amax : base + o->op.scalars + 32);
        if (memcmp(&si, &cq.scale_inv, 4) || memcmp(&am, &cq.amax, 4)) {
            fprintf(stderr, "%s: scale_inv gpu %g cpu %g, amax gpu %g cpu %g\n", name, (double)si,
                    (double)cq.scale_inv, (double)am, (double)cq.amax);
            diff++;
        }
    }
    tx_qtensor_free(&cq);
    return diff;
}

static void free_operand(operand *o)
{
    free_mat(&o->m);
    tg_dev_free(o->region);
    tg_dev_free(o->d_scale);
    tg_dev_free(o->d_amax);
    free(o->deq_row);
    free(o->deq_col);
}

/* The matrix a GEMM reads from operand o in usage u; `other` is the dtype a
 * mixed GEMM converts the dequantized operand to (0: none). */
static const double *gemm_view(const operand *o, unsigned u, teexec_dtype other, double **owned)
{
    *owned = NULL;
    if (!o->op.q.on) return o->m.val;
    const double *d = u == COL ? o->deq_col : o->deq_row;
    if (!other) return d;
    const size_t n = o->m.rows * o->m.cols;
    *owned = malloc(sizeof(double) * n);
    assert_non_null(*owned);
    for (size_t i = 0; i < n; i++) (*owned)[i] = round_to(other, d[i]);
    return *owned;
}

/* ---- the GEMMs ------------------------------------------------------------ */

typedef enum epi_kind { EPI_NONE, EPI_BIAS, EPI_GELU, EPI_RESIDUAL, EPI_DGELU } epi_kind;

typedef struct lcase {
    const char *name;
    size_t T, N, K;
    teexec_dtype src, out;
    qspec x, w, dy;
    bool fast_fprop;      /* native FP8 per-tensor: fast accumulation in fprop */
    unsigned kinds;       /* bit per tx_lin_gemm; 0 = all three */
    unsigned usage_x, usage_w; /* 0 = both */
    bool epilogues;
    /* an epilogue that may be answered UNSUPPORTED (native paths whose
     * cuBLASLt support varies); anything else must run */
    unsigned epi_may_refuse; /* bit per epi_kind */
    unsigned epi_must_refuse;
} lcase;

static double gelu(double x)
{
    const double c = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}

static double dgelu(double x)
{
    const double c = sqrt(2.0 / M_PI);
    const double t = tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

static double out_rtol(teexec_dtype t)
{
    return t == F32 ? 0.0 : t == F16 ? ldexp(1.0, -9) : ldexp(1.0, -7);
}

typedef struct result {
    size_t bad;
    double worst; /* max err / sum|a||b| */
} result;

static void check_close(const char *what, teexec_dtype t, const void *dev, const double *ref,
                        const double *lim, size_t n, result *r)
{
    void *h = malloc(n * esize(t));
    assert_non_null(h);
    tg_download(h, dev, n * esize(t));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = get_val(t, h, i), err = fabs(g - ref[i]);
        if (!(err <= lim[i])) {
            if (!bad)
                fprintf(stderr, "  %s: element %zu got %.9g want %.9g (limit %.3g)\n", what, i, g,
                        ref[i], lim[i]);
            bad++;
        }
    }
    if (bad) fprintf(stderr, "  %s: %zu of %zu outside the tolerance\n", what, bad, n);
    r->bad += bad;
    free(h);
}

/* Runs one GEMM (with an optional epilogue) and checks it. */
static void run_gemm(const lcase *c, tx_lin_gemm kind, operand *x, operand *w, operand *dy,
                     epi_kind ek, result *res, char *log, size_t log_size)
{
    static const char *const kn[] = {"fprop", "dgrad", "wgrad"};
    static const char *const en[] = {"", "+bias", "+bias+gelu", "+residual*alpha", "+dgelu+dbias"};
    operand *a = kind == TX_LIN_FPROP ? x : dy, *b = kind == TX_LIN_WGRAD ? x : w;
    const unsigned ua = kind == TX_LIN_WGRAD ? COL : ROW, ub = kind == TX_LIN_FPROP ? ROW : COL;
    const size_t T = c->T, N = c->N, K = c->K;
    size_t orow, ocol, red;
    if (kind == TX_LIN_FPROP) orow = T, ocol = N, red = K;
    else if (kind == TX_LIN_DGRAD) orow = T, ocol = K, red = N;
    else orow = N, ocol = K, red = T;
    const size_t n = orow * ocol;
    const bool qa = a->op.q.on, qb = b->op.q.on;
    double *own_a, *own_b;
    const double *A = gemm_view(a, ua, qa && !qb ? b->m.t : 0, &own_a);
    const double *B = gemm_view(b, ub, qb && !qa ? a->m.t : 0, &own_b);

    double *acc = calloc(n, sizeof(double)), *sabs = calloc(n, sizeof(double));
    assert_non_null(acc);
    assert_non_null(sabs);
    for (size_t i = 0; i < orow; i++)
        for (size_t j = 0; j < ocol; j++) {
            double s = 0, sa = 0;
            for (size_t r = 0; r < red; r++) {
                double p;
                if (kind == TX_LIN_FPROP) p = A[i * K + r] * B[j * K + r];
                else if (kind == TX_LIN_DGRAD) p = A[i * N + r] * B[r * K + j];
                else p = A[r * N + i] * B[r * K + j];
                s += p;
                sa += fabs(p);
            }
            acc[i * ocol + j] = s;
            sabs[i * ocol + j] = sa;
        }
    const bool fast = kind == TX_LIN_FPROP && c->fast_fprop;
    /* Hopper's FP8 tensor cores add within a k-chunk at reduced precision
     * before the FP32 promotion: the H200 showed up to 8e-4 of sum|a||b|
     * at K = 256..384, split or fast accumulation alike, so native
     * low-precision GEMMs get 2e-3; the emulation and high precision
     * accumulate in FP32 throughout (seen: <= 7e-7) */
    const tx_qkind qk = qa && qb ? a->op.q.cfg.kind : (tx_qkind)0;
    const bool native_like = qk == TX_QKIND_FP8_TENSOR || qk == TX_QKIND_FP8_BLOCK ||
                             (qk && g_env.sm >= 100);
    const double acc_tol = fast || native_like ? 2e-3 : 1e-5;

    /* epilogue inputs */
    tx_cuda_lin_epi epi;
    memset(&epi, 0, sizeof epi);
    mat bias = {0}, resid = {0}, pre = {0};
    void *gelu_pre_dev = NULL, *dbias_dev = NULL;
    const teexec_dtype bt = c->out;
    void *out;
    if (ek == EPI_RESIDUAL) {
        resid = make_mat(c->out, orow, ocol, 99);
        out = resid.dev; /* in place */
        epi.residual = resid.dev;
        epi.alpha = 0.5f;
    } else {
        out = tg_dev_alloc(n * esize(c->out));
    }
    if (ek == EPI_BIAS || ek == EPI_GELU) {
        bias = make_mat(bt, 1, ocol, 77);
        epi.bias = bias.dev;
        epi.bias_dtype = bt;
    }
    if (ek == EPI_GELU) {
        gelu_pre_dev = tg_dev_alloc(n * esize(c->out));
        epi.gelu_pre = gelu_pre_dev;
    }
    if (ek == EPI_DGELU) {
        pre = make_mat(c->out, orow, ocol, 55);
        epi.dgelu_pre = pre.dev;
        dbias_dev = tg_dev_alloc(ocol * esize(bt));
        epi.dbias = dbias_dev;
        epi.bias_dtype = bt;
    }
    tx_cuda_lin_ref ra = {&a->op, a->m.dev, a->m.t, a->region};
    tx_cuda_lin_ref rb = {&b->op, b->m.dev, b->m.t, b->region};
    const size_t sb = tx_cuda_lin_gemm_scratch(kind, &ra, &rb);
    void *scratch = sb ? tg_dev_alloc(sb) : NULL;
    char what[200];
    snprintf(what, sizeof what, "%s %s%s", c->name, kn[kind], en[ek]);
    teexec_status *st = tx_cuda_lin_gemm(kind, &ra, &rb, T, N, K, out, c->out,
                                         ek == EPI_NONE ? NULL : &epi, scratch, sb, &g_env);
    const unsigned ebit = 1u << ek;
    if (st) {
        const teexec_code code = teexec_status_code(st);
        fprintf(stderr, "  %s: %s\n", what, teexec_status_message(st));
        teexec_status_destroy(st);
        if (code != TEEXEC_ERR_UNSUPPORTED || !((c->epi_may_refuse | c->epi_must_refuse) & ebit))
            fail_msg("%s failed (code %d)", what, (int)code);
        size_t len = strlen(log);
        snprintf(log + len, log_size - len, " %s%s:unsupported", kn[kind], en[ek]);
        goto done;
    }
    if (c->epi_must_refuse & ebit) fail_msg("%s: ran, but should have been refused", what);
    tg_sync(what);
    {
        double *ref = malloc(sizeof(double) * n), *lim = malloc(sizeof(double) * n);
        double *aux = malloc(sizeof(double) * n), *alim = malloc(sizeof(double) * n);
        assert_non_null(ref);
        assert_non_null(lim);
        assert_non_null(aux);
        assert_non_null(alim);
        const double rt = out_rtol(c->out);
        for (size_t i = 0; i < n; i++) {
            const size_t j = i % ocol;
            double v = acc[i], l = acc_tol * sabs[i];
            if (ek == EPI_BIAS || ek == EPI_GELU) v += bias.val[j];
            if (ek == EPI_RESIDUAL) {
                /* cuBLASLt rounds alpha * AB to a 16-bit output dtype
                 * before it adds C (seen on the H200: -0.625 for
                 * round(4.0488) - 4.6875), as an unfused GEMM + add does */
                l = 0.5 * l + rt * fabs(0.5 * v);
                v = 0.5 * v + resid.val[i];
            }
            aux[i] = v;
            alim[i] = l + rt * fabs(v) + 1e-30;
            if (ek == EPI_GELU) {
                v = gelu(v);
                /* cuBLASLt's GELU uses an approximate tanh */
                l = l * 1.2 + 1e-3 * fabs(aux[i]) + 1e-4;
            }
            if (ek == EPI_DGELU) {
                const double dg = dgelu(pre.val[i]), prod = v;
                v *= dg;
                /* cuBLASLt's gelu' is approximate too: absolute errors near
                 * its zero (seen: 0 for 2.5e-5) */
                l = l * fabs(dg) + 1e-3 * fabs(prod) + 1e-6;
            }
            ref[i] = v;
            lim[i] = l + rt * fabs(v) + 1e-30;
        }
        check_close(what, c->out, out, ref, lim, n, res);
        if (ek == EPI_GELU) {
            char w2[240];
            snprintf(w2, sizeof w2, "%s pre-activation", what);
            check_close(w2, c->out, gelu_pre_dev, aux, alim, n, res);
        }
        if (ek == EPI_DGELU) {
            double *db = calloc(ocol, sizeof(double)), *dl = calloc(ocol, sizeof(double));
            assert_non_null(db);
            assert_non_null(dl);
            for (size_t i = 0; i < n; i++) {
                db[i % ocol] += ref[i];
                dl[i % ocol] += lim[i] + 1e-3 * fabs(ref[i]);
            }
            for (size_t j = 0; j < ocol; j++) dl[j] += out_rtol(bt) * fabs(db[j]) + 1e-5;
            char w2[240];
            snprintf(w2, sizeof w2, "%s dbias", what);
            check_close(w2, bt, dbias_dev, db, dl, ocol, res);
            free(db);
            free(dl);
        }
        if (ek == EPI_NONE) {
            /* the accumulation error actually seen */
            void *h = malloc(n * esize(c->out));
            assert_non_null(h);
            tg_download(h, out, n * esize(c->out));
            double worst = 0;
            for (size_t i = 0; i < n; i++)
                if (sabs[i] > 0) {
                    const double e = fabs(get_val(c->out, h, i) - acc[i]) - rt * fabs(acc[i]);
                    if (e / sabs[i] > worst) worst = e / sabs[i];
                }
            free(h);
            if (worst > res->worst) res->worst = worst;
            size_t len = strlen(log);
            snprintf(log + len, log_size - len, " %s:%.2g", kn[kind], worst);
        } else {
            size_t len = strlen(log);
            snprintf(log + len, log_size - len, " %s%s:ok", kn[kind], en[ek]);
        }
        free(ref);
        free(lim);
        free(aux);
        free(alim);
    }
done:
    tg_dev_free(scratch);
    if (ek != EPI_RESIDUAL) tg_dev_free(out);
    if (bias.raw) free_mat(&bias);
    if (resid.raw) free_mat(&resid);
    if (pre.raw) free_mat(&pre);
    tg_dev_free(gelu_pre_dev);
    tg_dev_free(dbias_dev);
    free(acc);
    free(sabs);
    free(own_a);
    free(own_b);
}

static void run_case(void **state)
{
    const lcase *c = *state;
    operand x, w, dy;
    const unsigned ux = c->usage_x ? c->usage_x : ROW | COL, uw = c->usage_w ? c->usage_w : ROW | COL;
    size_t qdiff = make_operand(&x, "x", c->src, c->T, c->K, &c->x, ux, 11, 0);
    qdiff += make_operand(&w, "w", c->src, c->N, c->K, &c->w, uw, 22, 0);
    qdiff += make_operand(&dy, "dy", c->src, c->T, c->N, &c->dy, ROW | COL, 33, 5);
    char log[1024];
    snprintf(log, sizeof log, "T=%zu N=%zu K=%zu quantized bytes %s;", c->T, c->N, c->K,
             qdiff ? "DIFFER" : "equal");
    result res = {0, 0};
    const unsigned kinds = c->kinds ? c->kinds : 7u;
    for (int k = 0; k < 3; k++)
        if (kinds & (1u << k)) run_gemm(c, (tx_lin_gemm)k, &x, &w, &dy, EPI_NONE, &res, log, sizeof log);
    if (c->epilogues) {
        run_gemm(c, TX_LIN_FPROP, &x, &w, &dy, EPI_BIAS, &res, log, sizeof log);
        run_gemm(c, TX_LIN_FPROP, &x, &w, &dy, EPI_GELU, &res, log, sizeof log);
        run_gemm(c, TX_LIN_FPROP, &x, &w, &dy, EPI_RESIDUAL, &res, log, sizeof log);
        run_gemm(c, TX_LIN_DGRAD, &x, &w, &dy, EPI_DGELU, &res, log, sizeof log);
    }
    fprintf(stderr, "%s: %s\n", c->name, log);
    free_operand(&x);
    free_operand(&w);
    free_operand(&dy);
    const int pass = qdiff == 0 && res.bad == 0;
    tg_record(c->name, pass, log);
    if (!pass) fail_msg("%s: %zu quantized bytes differ, %zu values outside the tolerance", c->name,
                        qdiff, res.bad);
}

/* ---- cases ----------------------------------------------------------------- */

#define OFF {0}
#define TENSOR(fmt_) {.on = true, .cfg = {.kind = TX_QKIND_FP8_TENSOR, .fmt = fmt_}}
#define TENSOR_P2(fmt_) \
    {.on = true, .cfg = {.kind = TX_QKIND_FP8_TENSOR, .fmt = fmt_, .power_2_scale = true, .amax_epsilon = 1e-3f}}
#define DELAYED(fmt_, s) {.on = true, .cfg = {.kind = TX_QKIND_FP8_TENSOR, .fmt = fmt_}, .delayed_scale = s}
#define BLOCK(two_d_, pow2_) \
    {.on = true, .cfg = {.kind = TX_QKIND_FP8_BLOCK, .fmt = E4, .block_2d = two_d_, .power_2_scale = pow2_}, .native = true}
#define MX(fmt_, two_d_) {.on = true, .cfg = {.kind = TX_QKIND_MXFP8, .fmt = fmt_, .block_2d = two_d_}, .native = true}
#define NV(two_d_, rht_, sr_) \
    {.on = true, .cfg = {.kind = TX_QKIND_NVFP4, .fmt = FP4, .block_2d = two_d_, .rht = rht_, .stochastic_rounding = sr_, .seed = 1234}, .native = true}

#define B_GELU (1u << EPI_GELU)
#define B_BIAS (1u << EPI_BIAS)
#define B_DGELU (1u << EPI_DGELU)
#define B_RES (1u << EPI_RESIDUAL)

static const lcase cases[] = {
    /* high precision */
    {.name = "none_bf16", .T = 96, .N = 64, .K = 160, .src = BF16, .out = BF16, .x = OFF, .w = OFF,
     .dy = OFF, .epilogues = true},
    {.name = "none_fp32", .T = 40, .N = 24, .K = 72, .src = F32, .out = F32, .x = OFF, .w = OFF,
     .dy = OFF, .epilogues = true},
    /* FP8 per-tensor: native TN over the columnwise copies */
    {.name = "fp8_current_hybrid_bf16", .T = 128, .N = 96, .K = 128, .src = BF16, .out = BF16,
     .x = TENSOR(E4), .w = TENSOR(E4), .dy = TENSOR(E5), .fast_fprop = true, .epilogues = true,
     .epi_may_refuse = B_GELU | B_DGELU},
    {.name = "fp8_current_fp32_out", .T = 64, .N = 48, .K = 256, .src = F32, .out = F32,
     .x = TENSOR(E4), .w = TENSOR(E4), .dy = TENSOR(E4), .fast_fprop = true},
    {.name = "fp8_current_pow2_eps", .T = 48, .N = 64, .K = 96, .src = BF16, .out = F32,
     .x = TENSOR_P2(E4), .w = TENSOR_P2(E4), .dy = TENSOR_P2(E5), .fast_fprop = true},
    {.name = "fp8_delayed", .T = 64, .N = 32, .K = 128, .src = BF16, .out = F32,
     .x = DELAYED(E4, 96.0f), .w = DELAYED(E4, 300.5f), .dy = DELAYED(E5, 4096.0f), .fast_fprop = true},
    /* inference-shaped: w rows (N = 40) not a multiple of 16, rowwise only:
     * FPROP runs the FP32 emulation into a bf16 output */
    {.name = "fp8_current_emulated_fprop_n40", .T = 24, .N = 40, .K = 64, .src = BF16, .out = BF16,
     .x = TENSOR(E4), .w = TENSOR(E4), .dy = OFF, .kinds = 1, .usage_x = ROW, .usage_w = ROW},
    /* FP8 block: natively on sm_90 (x, dy 1x128; w 128x128) */
    {.name = "fp8_block_native", .T = 256, .N = 128, .K = 384, .src = BF16, .out = F32,
     .x = BLOCK(false, false), .w = BLOCK(true, false), .dy = BLOCK(false, false)},
    /* pow2 scales, bf16 output: bias native; GELU / dGELU emulated (bf16 operands) */
    {.name = "fp8_block_pow2_epilogues", .T = 128, .N = 128, .K = 256, .src = F32, .out = BF16,
     .x = BLOCK(false, true), .w = BLOCK(true, true), .dy = BLOCK(false, true), .epilogues = true},
    /* 2-D x 2-D is never native: emulated in FP32 */
    {.name = "fp8_block_2dx2d_emulated", .T = 128, .N = 128, .K = 128, .src = BF16, .out = F32,
     .x = BLOCK(true, false), .w = BLOCK(true, false), .dy = BLOCK(true, false)},
    /* non-pow2 scales, bf16 output: GELU cannot be fused (FP32 emulation) */
    {.name = "fp8_block_bf16_out_refusals", .T = 128, .N = 128, .K = 128, .src = BF16, .out = BF16,
     .x = BLOCK(false, false), .w = BLOCK(true, false), .dy = BLOCK(false, false), .kinds = 1,
     .epilogues = true, .epi_may_refuse = B_BIAS | B_DGELU, .epi_must_refuse = B_GELU},
    /* MXFP8: emulated on sm_90, native with swizzled scales on sm_100+ */
    {.name = "mxfp8_hybrid", .T = 96, .N = 64, .K = 128, .src = BF16, .out = F32, .x = MX(E4, false),
     .w = MX(E4, false), .dy = MX(E5, false)},
    {.name = "mxfp8_2d_weight_epilogues", .T = 64, .N = 96, .K = 64, .src = F32, .out = BF16,
     .x = MX(E4, false), .w = MX(E4, true), .dy = MX(E4, false), .epilogues = true},
    /* NVFP4: 16x16 weight tiles, RHT on the wgrad operands, SR on dy */
    {.name = "nvfp4_rht_sr", .T = 128, .N = 64, .K = 96, .src = BF16, .out = F32,
     .x = NV(false, true, false), .w = NV(true, false, false), .dy = NV(false, true, true)},
    {.name = "nvfp4_fp16_out", .T = 64, .N = 64, .K = 64, .src = F32, .out = F16,
     .x = NV(false, false, false), .w = NV(true, false, false), .dy = NV(false, true, true),
     .epilogues = true, .epi_may_refuse = B_BIAS | B_GELU | B_DGELU},
    /* one operand quantized: it is dequantized into the other's dtype */
    {.name = "mixed_mxfp8_weight_bf16", .T = 64, .N = 64, .K = 96, .src = BF16, .out = BF16, .x = OFF,
     .w = MX(E4, false), .dy = OFF, .epilogues = true},
    {.name = "mixed_fp8_activations_fp32", .T = 32, .N = 48, .K = 64, .src = F32, .out = F32,
     .x = TENSOR(E4), .w = OFF, .dy = TENSOR(E5)},
};

/* ---- refusals (host only) ------------------------------------------------ */

static void expect_code(const char *what, teexec_status *st, teexec_code code)
{
    if (!st) fail_msg("%s: expected code %d, got success", what, (int)code);
    fprintf(stderr, "  %s -> %s\n", what, teexec_status_message(st));
    const teexec_code got = teexec_status_code(st);
    teexec_status_destroy(st);
    if (got != code) fail_msg("%s: expected code %d, got %d", what, (int)code, (int)got);
}

static void test_refusals(void **state)
{
    (void)state;
    tx_cuda_lin_operand o;
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = true;
    q.cfg.kind = TX_QKIND_MXFP8;
    q.cfg.fmt = E4;
    expect_code("mxfp8 48 cols", tx_cuda_lin_operand_init(&o, &q, 64, 48, ROW | COL, 90),
                TEEXEC_ERR_UNSUPPORTED);
    q.cfg.kind = TX_QKIND_NVFP4;
    q.cfg.fmt = FP4;
    /* the planner's rule: cols % 16, and rows % 16 for a columnwise copy */
    TG_OK(tx_cuda_lin_operand_init(&o, &q, 48, 64, ROW | COL, 90));
    expect_code("nvfp4 40 cols", tx_cuda_lin_operand_init(&o, &q, 48, 40, ROW, 90),
                TEEXEC_ERR_UNSUPPORTED);
    expect_code("nvfp4 columnwise 24 rows", tx_cuda_lin_operand_init(&o, &q, 24, 64, COL, 90),
                TEEXEC_ERR_UNSUPPORTED);
    q.cfg.kind = TX_QKIND_FP8_TENSOR;
    q.cfg.fmt = E4;
    expect_code("fp8 24 cols", tx_cuda_lin_operand_init(&o, &q, 32, 24, ROW, 90),
                TEEXEC_ERR_UNSUPPORTED);
    expect_code("fp8 columnwise 24 rows", tx_cuda_lin_operand_init(&o, &q, 24, 32, COL, 90),
                TEEXEC_ERR_UNSUPPORTED);
    q.cfg.fmt = FP4;
    expect_code("fp8 with an FP4 format", tx_cuda_lin_operand_init(&o, &q, 32, 32, ROW, 90),
                TEEXEC_ERR_INVALID_ARGUMENT);
    /* the layout: 256-byte aligned parts, swizzled only for native sm_100 */
    q.cfg.kind = TX_QKIND_MXFP8;
    q.cfg.fmt = E4;
    q.native = true;
    TG_OK(tx_cuda_lin_operand_init(&o, &q, 64, 96, ROW | COL, 90));
    assert_false(o.swizzled);
    assert_int_equal(o.row_data % 256, 0);
    assert_int_equal(o.col_scales % 256, 0);
    assert_int_equal(o.row_scale_cols, 4);
    assert_int_equal(o.col_scale_cols, 128);
    TG_OK(tx_cuda_lin_operand_init(&o, &q, 64, 96, ROW, 100));
    assert_true(o.swizzled);
    assert_int_equal(o.col_data, SIZE_MAX);
    /* epilogues a GEMM kind does not have; a missing usage */
    tx_cuda_lin_operand hp;
    memset(&q, 0, sizeof q);
    TG_OK(tx_cuda_lin_operand_init(&hp, &q, 32, 32, ROW, g_env.sm));
    assert_int_equal(hp.bytes, 0);
    void *buf = tg_dev_alloc(32 * 32 * 4);
    tx_cuda_lin_ref r = {&hp, buf, F32, NULL};
    tx_cuda_lin_epi e;
    memset(&e, 0, sizeof e);
    e.bias = buf;
    e.bias_dtype = F32;
    expect_code("bias on wgrad",
                tx_cuda_lin_gemm(TX_LIN_WGRAD, &r, &r, 32, 32, 32, buf, F32, &e, NULL, 0, &g_env),
                TEEXEC_ERR_UNSUPPORTED);
    memset(&e, 0, sizeof e);
    e.gelu_pre = buf;
    expect_code("gelu without bias",
                tx_cuda_lin_gemm(TX_LIN_FPROP, &r, &r, 32, 32, 32, buf, F32, &e, NULL, 0, &g_env),
                TEEXEC_ERR_UNSUPPORTED);
    expect_code("shape mismatch",
                tx_cuda_lin_gemm(TX_LIN_FPROP, &r, &r, 32, 16, 32, buf, F32, NULL, NULL, 0, &g_env),
                TEEXEC_ERR_INVALID_ARGUMENT);
    q.on = true;
    q.cfg.kind = TX_QKIND_FP8_TENSOR;
    q.cfg.fmt = E4;
    tx_cuda_lin_operand rowonly;
    TG_OK(tx_cuda_lin_operand_init(&rowonly, &q, 32, 32, ROW, g_env.sm));
    tx_cuda_lin_ref rq = {&rowonly, NULL, BF16, buf};
    expect_code("wgrad on a rowwise-only operand",
                tx_cuda_lin_gemm(TX_LIN_WGRAD, &rq, &rq, 32, 32, 32, buf, F32, NULL, NULL, 0, &g_env),
                TEEXEC_ERR_INVALID_ARGUMENT);
    expect_code("fp16 source", tx_cuda_lin_quantize(&rowonly, buf, F16, buf, 0, NULL),
                TEEXEC_ERR_UNSUPPORTED);
    tg_dev_free(buf);
    tg_record("linear_gemm_refusals", 1, "");
}

int main(void)
{
    tg_require_gpu("test_gpu_linear_gemm");
    teexec_status *st = tx_gemm_lt_create(WS_BYTES, &g_env.gemm);
    if (st) {
        fprintf(stderr, "test_gpu_linear_gemm: tx_gemm_lt_create: %s\n", teexec_status_message(st));
        return 1;
    }
    g_env.sm = tx_gemm_lt_sm(g_env.gemm);
    g_env.gemm_ws = tg_dev_alloc(WS_BYTES);
    g_env.gemm_ws_bytes = WS_BYTES;
    fprintf(stderr, "test_gpu_linear_gemm: sm_%d, cuBLASLt %zu\n", g_env.sm,
            tx_gemm_lt_cublas_version(g_env.gemm));
    enum { N = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[N + 1];
    for (size_t i = 0; i < N; i++) {
        struct CMUnitTest t = {cases[i].name, run_case, NULL, NULL, (void *)&cases[i]};
        tests[i] = t;
    }
    struct CMUnitTest r = cmocka_unit_test(test_refusals);
    tests[N] = r;
    const int rc = _cmocka_run_group_tests("test_gpu_linear_gemm", tests, N + 1, NULL, NULL);
    tg_dev_free(g_env.gemm_ws);
    tx_gemm_lt_destroy(g_env.gemm);
    return rc;
}
