/* GPU test: the cuBLASLt GEMM layer (kernels/cuda/gemm_lt.h) and the exact
 * block-scaled emulation (gemm_emulate.h) against a host FP64 reference,
 * on exactly representable inputs (small integers times powers of two),
 * with DESIGN.md section 3's tolerances: every mode, every epilogue, ragged
 * shapes, FP8 scales, the refusals, and the heuristic cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "base/numfmt.h"
#include "kernels/cpu/qtensor.h"
#include "kernels/cuda/gemm_emulate.h"
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

#define WS_BYTES ((size_t)32 * 1024 * 1024 + 1024)

static tx_gemm_lt *g_h;
static void *g_ws;

/* ---- host values -------------------------------------------------------- */

static size_t esize(teexec_dtype t)
{
    return t == F32 ? 4 : (t == F16 || t == BF16) ? 2 : 1;
}

static double get_val(teexec_dtype t, const void *p, size_t i)
{
    switch (t) {
    case F32: return ((const float *)p)[i];
    case F16: return tx_f16_to_f32(((const uint16_t *)p)[i]);
    case BF16: return tx_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return tx_fp8_to_f32(t, ((const uint8_t *)p)[i]);
    }
}

static void put_val(teexec_dtype t, void *p, size_t i, double v)
{
    switch (t) {
    case F32: ((float *)p)[i] = (float)v; break;
    case F16: ((uint16_t *)p)[i] = tx_f32_to_f16((float)v); break;
    case BF16: ((uint16_t *)p)[i] = tx_f32_to_bf16((float)v); break;
    default: ((uint8_t *)p)[i] = tx_f32_to_fp8(t, (float)v, 1); break;
    }
}

static uint64_t rng_state;
static uint32_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* Integer in [-r, r] times 2^e: exact in every dtype used here. */
static double small_int(int r, int e)
{
    return ldexp((double)((int)(rnd() % (uint32_t)(2 * r + 1)) - r), e);
}

/* A host matrix of `count` values in dtype t, plus its exact doubles. */
typedef struct hmat {
    teexec_dtype t;
    size_t count;
    void *raw;
    double *val;
    void *dev;
} hmat;

static hmat make_mat(teexec_dtype t, size_t count, int r, int e)
{
    hmat m = {t, count, calloc(count * esize(t) + 8, 1), calloc(count + 1, sizeof(double)), NULL};
    assert_non_null(m.raw);
    assert_non_null(m.val);
    for (size_t i = 0; i < count; i++) {
        put_val(t, m.raw, i, small_int(r, e));
        m.val[i] = get_val(t, m.raw, i);
    }
    m.dev = tg_dev_upload(m.raw, count * esize(t));
    return m;
}

static void free_mat(hmat *m)
{
    free(m->raw);
    free(m->val);
    tg_dev_free(m->dev);
}

/* ---- FP64 reference (column-major, cuBLAS terms) ------------------------- */

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

static int64_t lda_of(const tx_gemm_desc *d) { return d->lda ? d->lda : (d->transa ? d->k : d->m); }
static int64_t ldb_of(const tx_gemm_desc *d) { return d->ldb ? d->ldb : (d->transb ? d->n : d->k); }

static double op_a(const tx_gemm_desc *d, const double *a, int64_t i, int64_t kk)
{
    return d->transa ? a[i * lda_of(d) + kk] : a[kk * lda_of(d) + i];
}

static double op_b(const tx_gemm_desc *d, const double *b, int64_t kk, int64_t j)
{
    return d->transb ? b[kk * ldb_of(d) + j] : b[j * ldb_of(d) + kk];
}

/* out: D [m x n] (ld m) before any output rounding; aux_out: GELU input;
 * bias_out: bias gradients. sa/sb: scale per element of op(A)/op(B) or
 * NULL (1). */
typedef struct ref_out {
    double *d, *aux, *bgrad;
} ref_out;

static ref_out reference(const tx_gemm_desc *d, const double *a, const double *b, const double *c,
                         const double *bias, const double *aux_in)
{
    const int64_t m = d->m, n = d->n, k = d->k;
    ref_out r = {calloc((size_t)(m * n) + 1, sizeof(double)), calloc((size_t)(m * n) + 1, sizeof(double)),
                 calloc((size_t)(m > n ? m : n) + 1, sizeof(double))};
    assert_non_null(r.d);
    assert_non_null(r.aux);
    assert_non_null(r.bgrad);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            double s = 0;
            for (int64_t kk = 0; kk < k; kk++) s += op_a(d, a, i, kk) * op_b(d, b, kk, j);
            double v = d->alpha * s + (d->beta != 0.0f ? d->beta * c[j * m + i] : 0.0);
            switch (d->epilogue) {
            case TX_GEMM_EPI_BIAS: v += bias[i]; break;
            case TX_GEMM_EPI_GELU_AUX_BIAS:
                v += bias[i];
                r.aux[j * m + i] = v;
                v = gelu(v);
                break;
            case TX_GEMM_EPI_DGELU_BGRAD:
                v *= dgelu(aux_in[j * m + i]);
                r.bgrad[i] += v;
                break;
            default: break;
            }
            r.d[j * m + i] = v;
        }
    if (d->epilogue == TX_GEMM_EPI_BGRADB)
        for (int64_t j = 0; j < n; j++)
            for (int64_t kk = 0; kk < k; kk++) r.bgrad[j] += op_b(d, b, kk, j);
    return r;
}

static void free_ref(ref_out *r)
{
    free(r->d);
    free(r->aux);
    free(r->bgrad);
}

typedef struct tol {
    double rtol, atol;
} tol;

static tol tol_of(teexec_dtype t)
{
    switch (t) {
    case F32: return (tol){1.3e-6, 1e-5};
    case F16: return (tol){1e-3, 1e-5};
    case BF16: return (tol){1.6e-2, 1e-5};
    default: return (tol){0.125, 0.0675};
    }
}

/* Downloads n values of dtype t and counts those outside the tolerance. */
static size_t compare(const char *what, teexec_dtype t, const void *dev, const double *ref, size_t n,
                      tol tl)
{
    void *h = malloc(n * esize(t) + 8);
    assert_non_null(h);
    tg_download(h, dev, n * esize(t));
    size_t bad = 0;
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = get_val(t, h, i), err = fabs(g - ref[i]);
        const double lim = tl.atol + tl.rtol * fabs(ref[i]);
        if (!(err <= lim)) {
            if (!bad || err / lim > worst) {
                worst = err / lim;
                wi = i;
            }
            bad++;
        }
    }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu outside rtol %g atol %g; worst at %zu: got %.9g want %.9g\n",
                what, bad, n, tl.rtol, tl.atol, wi, get_val(t, h, wi), ref[wi]);
    else if (getenv("TG_GEMM_VERBOSE")) {
        double maxerr = 0, maxref = 0;
        for (size_t i = 0; i < n; i++) {
            maxerr = fmax(maxerr, fabs(get_val(t, h, i) - ref[i]));
            maxref = fmax(maxref, fabs(ref[i]));
        }
        fprintf(stderr, "  %s: max |err| %.3g (max |ref| %.3g)\n", what, maxerr, maxref);
    }
    free(h);
    return bad;
}

static void finish(const char *name, size_t bad, const char *detail)
{
    tg_record(name, bad == 0, detail);
    if (bad) fail_msg("%s: %zu values outside the tolerance", name, bad);
}

/* ---- plain / FP8 per-tensor cases --------------------------------------- */

typedef struct gcase {
    const char *name;
    int64_t m, n, k;
    int transa, transb;
    teexec_dtype a, b, d;
    float alpha, beta;
    tx_gemm_epilogue epi;
    int fp8_scaled; /* per-tensor scale_inv a = 0.5, b = 4 */
    int fast_accum;
    int amax_d;     /* FP8 output: d_scale 0.25 and amax */
    int r, e;       /* input range: integers in [-r, r] times 2^e */
} gcase;

static void run_gcase(const gcase *c)
{
    rng_state = (uint64_t)c->m * 1000003u + (uint64_t)c->n * 7919u + (uint64_t)c->k;
    tx_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = c->m;
    d.n = c->n;
    d.k = c->k;
    d.transa = c->transa;
    d.transb = c->transb;
    d.a_type = c->a;
    d.b_type = c->b;
    d.d_type = c->d;
    d.alpha = c->alpha;
    d.beta = c->beta;
    d.epilogue = c->epi;
    d.fast_accum = c->fast_accum;
    const size_t mn = (size_t)(c->m * c->n);
    hmat A = make_mat(c->a, (size_t)(c->m * c->k), c->r, c->e);
    hmat B = make_mat(c->b, (size_t)(c->k * c->n), c->r, c->e);
    const teexec_dtype ct = (c->d == E4 || c->d == E5) ? BF16 : c->d;
    hmat C = make_mat(ct, mn, 4, 0);
    const teexec_dtype bt = (c->a == E4 || c->a == E5) ? BF16 : c->d;
    const int64_t blen = c->epi == TX_GEMM_EPI_BGRADB ? c->n : c->m;
    hmat bias = make_mat(bt, (size_t)blen, 8, -2);
    const int64_t ald = (c->m + 7) / 8 * 8;
    hmat aux = make_mat(c->d, (size_t)(ald * c->n), 8, -2);
    if (c->epi != TX_GEMM_EPI_NONE) d.bias = bias.dev;
    if (c->epi == TX_GEMM_EPI_GELU_AUX_BIAS || c->epi == TX_GEMM_EPI_DGELU_BGRAD) {
        d.aux = aux.dev;
        d.aux_ld = ald;
    }
    /* scales: exact powers of two so the reference stays exact; each in
     * its own (aligned) allocation, as cuBLASLt wants */
    const float scales[4] = {0.5f, 4.0f, 0.25f, 0.0f};
    float *dscal[4];
    for (int i = 0; i < 4; i++) dscal[i] = tg_dev_upload(&scales[i], sizeof(float));
    double *a_ref = A.val, *b_ref = B.val;
    if (c->fp8_scaled) {
        d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_TENSOR;
        d.a_scale_inv = dscal[0];
        d.b_scale_inv = dscal[1];
        for (size_t i = 0; i < A.count; i++) a_ref[i] *= 0.5;
        for (size_t i = 0; i < B.count; i++) b_ref[i] *= 4.0;
    }
    if (c->amax_d) {
        d.d_scale = dscal[2];
        d.amax_d = dscal[3];
    }
    void *D = tg_dev_alloc(mn * esize(c->d));
    /* the aux input of DGELU, as stored (ld = ald) */
    double *aux_in = calloc(mn + 1, sizeof(double));
    assert_non_null(aux_in);
    for (int64_t j = 0; j < c->n; j++)
        for (int64_t i = 0; i < c->m; i++) aux_in[j * c->m + i] = aux.val[j * ald + i];

    TG_OK(tx_gemm_lt_run(g_h, &d, A.dev, B.dev, c->beta != 0.0f ? C.dev : NULL, D, g_ws, NULL));
    tg_sync(c->name);

    ref_out r = reference(&d, a_ref, b_ref, C.val, bias.val, aux_in);
    size_t bad = 0;
    tol tl = tol_of(c->d);
    if (c->a == E4 || c->a == E5) {
        tol f8 = tol_of(E4);
        /* FP8 inputs are exact; the result is only rounded to D */
        if (c->d != E4 && c->d != E5) f8 = tl;
        tl = f8;
    }
    if (c->epi == TX_GEMM_EPI_GELU_AUX_BIAS || c->epi == TX_GEMM_EPI_DGELU_BGRAD) {
        /* cuBLASLt's GELU is the tanh form in fp32: bf16-level agreement */
        if (tl.rtol < 1.6e-2) tl = (tol){1.6e-2, 1e-4};
    }
    if (c->amax_d) {
        double amax = 0;
        for (size_t i = 0; i < mn; i++) {
            amax = fmax(amax, fabs(r.d[i]));
            r.d[i] *= 0.25;
        }
        float got = 0;
        tg_download(&got, dscal[3], sizeof got);
        if (fabs(got - amax) > 1e-6 * amax) {
            fprintf(stderr, "  amax_d: got %g want %g\n", (double)got, amax);
            bad++;
        }
    }
    bad += compare(c->name, c->d, D, r.d, mn, tl);
    if (c->epi == TX_GEMM_EPI_GELU_AUX_BIAS) {
        /* aux holds the pre-activation at ld = ald: compare column by column */
        for (int64_t j = 0; j < c->n; j++) {
            char w[128];
            snprintf(w, sizeof w, "%s aux column %lld", c->name, (long long)j);
            bad += compare(w, c->d, (const char *)aux.dev + (size_t)(j * ald) * esize(c->d),
                           r.aux + j * c->m, (size_t)c->m, tol_of(c->d));
        }
    }
    if (c->epi == TX_GEMM_EPI_DGELU_BGRAD || c->epi == TX_GEMM_EPI_BGRADB) {
        tol bg = tl;
        bg.atol = 1e-3; /* sums of rounded terms */
        bad += compare("bias gradient", bt, bias.dev, r.bgrad, (size_t)blen, bg);
    }
    char detail[200];
    snprintf(detail, sizeof detail, "m=%lld n=%lld k=%lld %s%s", (long long)c->m, (long long)c->n,
             (long long)c->k, c->transa ? "T" : "N", c->transb ? "T" : "N");
    free_ref(&r);
    free(aux_in);
    tg_dev_free(D);
    for (int i = 0; i < 4; i++) tg_dev_free(dscal[i]);
    free_mat(&A);
    free_mat(&B);
    free_mat(&C);
    free_mat(&bias);
    free_mat(&aux);
    finish(c->name, bad, detail);
}

static const gcase gcases[] = {
    /* name, m, n, k, ta, tb, A, B, D, alpha, beta, epi, scaled, fast, amax, r, e */
    {"bf16_tn_ragged", 67, 45, 83, 1, 0, BF16, BF16, BF16, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 0, 0, 0, 8, 0},
    {"bf16_nn_alpha_beta", 128, 96, 64, 0, 0, BF16, BF16, BF16, 0.5f, 2.0f, TX_GEMM_EPI_NONE, 0, 0, 0, 8, -1},
    {"bf16_nt_fp32_out", 33, 17, 100, 0, 1, BF16, BF16, F32, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 0, 0, 0, 8, 0},
    {"bf16_tt_ragged", 19, 23, 31, 1, 1, BF16, BF16, BF16, 1.0f, 1.0f, TX_GEMM_EPI_NONE, 0, 0, 0, 4, 0},
    {"fp16_tn", 80, 48, 40, 1, 0, F16, F16, F16, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 0, 0, 0, 8, -3},
    {"fp16_nn_ragged_fp32_out", 21, 13, 9, 0, 0, F16, F16, F32, 2.0f, 0.0f, TX_GEMM_EPI_NONE, 0, 0, 0, 8, 0},
    {"fp32_tn", 64, 32, 48, 1, 0, F32, F32, F32, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 0, 0, 0, 100, 0},
    {"bf16_epi_bias", 64, 48, 32, 1, 0, BF16, BF16, BF16, 1.0f, 0.0f, TX_GEMM_EPI_BIAS, 0, 0, 0, 4, -1},
    {"bf16_epi_bias_ragged", 37, 29, 40, 1, 0, BF16, BF16, BF16, 1.0f, 0.0f, TX_GEMM_EPI_BIAS, 0, 0, 0, 4, -1},
    {"fp32_epi_bias", 40, 24, 16, 1, 0, F32, F32, F32, 1.0f, 0.0f, TX_GEMM_EPI_BIAS, 0, 0, 0, 4, -1},
    {"bf16_epi_gelu_aux_bias", 64, 40, 32, 1, 0, BF16, BF16, BF16, 1.0f, 0.0f, TX_GEMM_EPI_GELU_AUX_BIAS, 0, 0, 0, 4, -3},
    {"bf16_epi_gelu_aux_bias_ragged", 50, 21, 24, 1, 0, BF16, BF16, BF16, 1.0f, 0.0f, TX_GEMM_EPI_GELU_AUX_BIAS, 0, 0, 0, 4, -3},
    {"bf16_epi_dgelu_bgrad", 64, 48, 32, 0, 0, BF16, BF16, BF16, 1.0f, 0.0f, TX_GEMM_EPI_DGELU_BGRAD, 0, 0, 0, 4, -3},
    {"bf16_epi_bgradb", 48, 64, 96, 0, 1, BF16, BF16, BF16, 1.0f, 0.0f, TX_GEMM_EPI_BGRADB, 0, 0, 0, 4, -2},
    {"bf16_epi_bgradb_fp32_out", 40, 24, 64, 0, 1, BF16, BF16, F32, 1.0f, 0.0f, TX_GEMM_EPI_BGRADB, 0, 0, 0, 4, -2},
    {"fp8_e4m3_e4m3_scaled_fast", 64, 48, 64, 1, 0, E4, E4, BF16, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 1, 1, 0, 8, 0},
    {"fp8_e4m3_e5m2_split_fp32_out", 48, 24, 32, 1, 0, E4, E5, F32, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 1, 0, 0, 8, 0},
    {"fp8_e5m2_e4m3_ragged_n", 48, 13, 48, 1, 0, E5, E4, BF16, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 1, 0, 0, 8, -2},
    {"fp8_e4m3_unscaled_beta", 32, 32, 32, 1, 0, E4, E4, BF16, 1.0f, 1.0f, TX_GEMM_EPI_NONE, 0, 1, 0, 8, 0},
    {"fp8_e4m3_bias", 64, 32, 64, 1, 0, E4, E4, BF16, 1.0f, 0.0f, TX_GEMM_EPI_BIAS, 1, 1, 0, 8, 0},
    {"fp8_e4m3_out_dscale_amax", 64, 64, 32, 1, 0, E4, E4, E4, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 1, 1, 1, 4, -1},
    {"fp8_e4m3_e5m2_out_e5m2", 32, 48, 64, 1, 0, E4, E5, E5, 1.0f, 0.0f, TX_GEMM_EPI_NONE, 0, 0, 1, 4, -1},
};

static void test_gcase(void **state) { run_gcase((const gcase *)*state); }

/* ---- FP32: TF32 only when allowed --------------------------------------- */

static void test_fp32_no_tf32(void **state)
{
    (void)state;
    /* A needs 14 significant bits (TF32 keeps 11): multiples of 2^-12 in
     * [-2, 2]; B small integers; every sum exact in FP32. */
    const int64_t m = 48, n = 40, k = 32;
    rng_state = 77;
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
    double *ad = malloc(sizeof(double) * m * k), *bd = malloc(sizeof(double) * k * n);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(ad);
    assert_non_null(bd);
    for (int64_t i = 0; i < m * k; i++) ad[i] = a[i] = (float)ldexp((double)((int)(rnd() % 16385u) - 8192), -12);
    for (int64_t i = 0; i < k * n; i++) bd[i] = b[i] = (float)((int)(rnd() % 5u) - 2);
    void *dA = tg_dev_upload(a, sizeof(float) * m * k), *dB = tg_dev_upload(b, sizeof(float) * k * n);
    void *dD = tg_dev_alloc(sizeof(float) * m * n);
    tx_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = m;
    d.n = n;
    d.k = k;
    d.transa = 1;
    d.a_type = d.b_type = d.d_type = F32;
    d.alpha = 1.0f;
    TG_OK(tx_gemm_lt_run(g_h, &d, dA, dB, NULL, dD, g_ws, NULL));
    tg_sync("fp32");
    ref_out r = reference(&d, ad, bd, NULL, NULL, NULL);
    size_t bad = compare("fp32 without TF32 (exact)", F32, dD, r.d, (size_t)(m * n), (tol){0.0, 0.0});
    /* with TF32 allowed the same GEMM still runs (TF32 tolerance) */
    d.allow_tf32 = 1;
    TG_OK(tx_gemm_lt_run(g_h, &d, dA, dB, NULL, dD, g_ws, NULL));
    tg_sync("tf32");
    bad += compare("fp32 with TF32 allowed", F32, dD, r.d, (size_t)(m * n), (tol){2e-3, 2e-2});
    free_ref(&r);
    tg_dev_free(dA);
    tg_dev_free(dB);
    tg_dev_free(dD);
    free(a);
    free(b);
    free(ad);
    free(bd);
    finish("fp32_no_tf32_exact", bad, "48x40x32 with 14-bit A values");
}

/* ---- refusals and argument errors --------------------------------------- */

static tx_gemm_desc fp8_desc(int64_t m, int64_t n, int64_t k)
{
    tx_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = m;
    d.n = n;
    d.k = k;
    d.transa = 1;
    d.a_type = d.b_type = E4;
    d.d_type = BF16;
    d.alpha = 1.0f;
    return d;
}

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
    const int sm = tx_gemm_lt_sm(g_h);
    tx_gemm_desc d = fp8_desc(64, 64, 64);
    TG_OK(tx_gemm_lt_check(g_h, &d));
    d.k = 24;
    expect_code("fp8 k=24", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    d = fp8_desc(40, 64, 64);
    expect_code("fp8 m=40", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    d = fp8_desc(64, 64, 64);
    d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_TENSOR;
    d.a_scale_inv = (const char *)g_ws + 4;
    d.b_scale_inv = g_ws;
    expect_code("fp8 scale pointer 4-byte aligned", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_INVALID_ARGUMENT);
    d = fp8_desc(64, 64, 64);
    expect_code("fp8 A 8-byte aligned",
                tx_gemm_lt_run(g_h, &d, (char *)g_ws + 8, g_ws, NULL, g_ws, g_ws, NULL),
                TEEXEC_ERR_INVALID_ARGUMENT);
    d = fp8_desc(64, 64, 64);
    d.d_type = E4;
    d.beta = 1.0f;
    expect_code("fp8 output with beta", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    d = fp8_desc(64, 64, 64);
    d.a_type = d.b_type = E5;
    expect_code("fp8 e5m2 x e5m2", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    d = fp8_desc(64, 64, 64);
    d.transa = 0;
    if (sm == 90) expect_code("fp8 NN on sm_90", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    /* MXFP8 / NVFP4 natively only on sm_100+ */
    d = fp8_desc(128, 128, 128);
    d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_MXFP8;
    d.a_scale_inv = d.b_scale_inv = g_ws;
    if (sm < 100) expect_code("mxfp8 native", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    else TG_OK(tx_gemm_lt_check(g_h, &d));
    d.a_type = d.b_type = TEEXEC_DTYPE_FLOAT4E2M1;
    d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_NVFP4;
    if (sm < 100) expect_code("nvfp4 native", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    else TG_OK(tx_gemm_lt_check(g_h, &d));
    /* FP8 block: 2-D x 2-D never; natively on sm_90 only */
    d = fp8_desc(128, 128, 128);
    d.a_scale_mode = d.b_scale_mode = TX_GEMM_SCALE_BLOCK_2D;
    d.a_scale_inv = d.b_scale_inv = g_ws;
    expect_code("block 2d x 2d", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    d.b_scale_mode = TX_GEMM_SCALE_BLOCK_1D;
    if (sm != 90) expect_code("block off sm_90", tx_gemm_lt_check(g_h, &d), TEEXEC_ERR_UNSUPPORTED);
    /* argument errors */
    tx_gemm_desc b;
    memset(&b, 0, sizeof b);
    b.m = b.n = b.k = 16;
    b.a_type = b.b_type = b.d_type = BF16;
    b.alpha = 1.0f;
    expect_code("NULL description", tx_gemm_lt_check(g_h, NULL), TEEXEC_ERR_INVALID_ARGUMENT);
    b.epilogue = TX_GEMM_EPI_GELU_AUX_BIAS;
    b.bias = b.aux = g_ws;
    b.aux_ld = 20;
    expect_code("aux_ld 20", tx_gemm_lt_check(g_h, &b), TEEXEC_ERR_INVALID_ARGUMENT);
    b.epilogue = TX_GEMM_EPI_NONE;
    b.b_type = F16;
    expect_code("mixed bf16 x fp16", tx_gemm_lt_check(g_h, &b), TEEXEC_ERR_INVALID_ARGUMENT);
    b.b_type = BF16;
    b.beta = 1.0f;
    expect_code("beta without C", tx_gemm_lt_run(g_h, &b, g_ws, g_ws, NULL, g_ws, g_ws, NULL),
                TEEXEC_ERR_INVALID_ARGUMENT);
    b.beta = 0.0f;
    b.allow_tf32 = 1;
    expect_code("tf32 on bf16", tx_gemm_lt_check(g_h, &b), TEEXEC_ERR_INVALID_ARGUMENT);
    tg_record("gemm_refusals", 1, "");
}

/* ---- heuristic cache ---------------------------------------------------- */

static void test_cache(void **state)
{
    (void)state;
    tx_gemm_lt *h = NULL;
    TG_OK(tx_gemm_lt_create(WS_BYTES, &h));
    tx_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = 96;
    d.n = 64;
    d.k = 32;
    d.transa = 1;
    d.a_type = d.b_type = d.d_type = BF16;
    d.alpha = 1.0f;
    char *buf = tg_dev_alloc(1 << 20);
    TG_OK(tx_gemm_lt_run(h, &d, buf, buf + 65536, NULL, buf + 131072, g_ws, NULL));
    tx_gemm_lt_stats s1 = tx_gemm_lt_get_stats(h);
    TG_OK(tx_gemm_lt_run(h, &d, buf, buf + 65536, NULL, buf + 131072, g_ws, NULL));
    TG_OK(tx_gemm_lt_run(h, &d, buf + 262144, buf + 65536, NULL, buf + 131072, g_ws, NULL));
    tx_gemm_lt_stats s2 = tx_gemm_lt_get_stats(h);
    d.n = 80; /* a new shape queries once */
    TG_OK(tx_gemm_lt_run(h, &d, buf, buf + 65536, NULL, buf + 131072, g_ws, NULL));
    TG_OK(tx_gemm_lt_run(h, &d, buf, buf + 65536, NULL, buf + 131072, g_ws, NULL));
    tx_gemm_lt_stats s3 = tx_gemm_lt_get_stats(h);
    /* a less aligned pointer is a different key (the algorithm may rely on alignment) */
    TG_OK(tx_gemm_lt_run(h, &d, buf + 2, buf + 65536, NULL, buf + 131072, g_ws, NULL));
    tx_gemm_lt_stats s4 = tx_gemm_lt_get_stats(h);
    /* many shapes: the table grows past its first capacity and keeps them all */
    for (int i = 1; i <= 80; i++) {
        d.n = 8 * i;
        TG_OK(tx_gemm_lt_run(h, &d, buf, buf + 65536, NULL, buf + 131072, g_ws, NULL));
    }
    tx_gemm_lt_stats s5 = tx_gemm_lt_get_stats(h);
    for (int i = 1; i <= 80; i++) {
        d.n = 8 * i;
        TG_OK(tx_gemm_lt_run(h, &d, buf, buf + 65536, NULL, buf + 131072, g_ws, NULL));
    }
    tx_gemm_lt_stats s6 = tx_gemm_lt_get_stats(h);
    tg_sync("cache");
    tg_dev_free(buf);
    tx_gemm_lt_destroy(h);
    char detail[256];
    snprintf(detail, sizeof detail, "queries %llu %llu %llu %llu %llu %llu, entries %llu",
             (unsigned long long)s1.heuristic_queries, (unsigned long long)s2.heuristic_queries,
             (unsigned long long)s3.heuristic_queries, (unsigned long long)s4.heuristic_queries,
             (unsigned long long)s5.heuristic_queries, (unsigned long long)s6.heuristic_queries,
             (unsigned long long)s6.cache_entries);
    const int ok = s1.heuristic_queries == 1 && s2.heuristic_queries == 1 && s2.runs == 3 &&
                   s3.heuristic_queries == 2 && s4.heuristic_queries == 3 &&
                   /* n = 64 and n = 80 (aligned) are cached already: 78 new */
                   s5.heuristic_queries == 3 + 78 && s6.heuristic_queries == s5.heuristic_queries &&
                   s6.cache_entries == 81 && s6.runs == 6 + 160;
    tg_record("gemm_heuristic_cache", ok, detail);
    if (!ok) fail_msg("heuristic cache: %s", detail);
}

/* ---- block-scaled: native FP8 block and the emulation -------------------- */

/* A quantized operand on the device: one usage of a CPU-quantized tensor. */
typedef struct qop {
    tx_qtensor q;
    unsigned usage;
    double *deq;          /* tx_dequantize of that usage, [rows, cols] */
    tx_cuda_dequant_args a;
    void *d_data, *d_scales;
    float *d_f;           /* scale_inv or amax */
} qop;

static void make_qop(qop *o, uint64_t rows, uint64_t cols, const tx_quant_config *cfg, unsigned usage,
                     uint64_t seed)
{
    memset(o, 0, sizeof *o);
    rng_state = seed;
    float *x = malloc(sizeof(float) * rows * cols + 4);
    float *deq = malloc(sizeof(float) * rows * cols + 4);
    assert_non_null(x);
    assert_non_null(deq);
    /* values spread over a few binades so block scales differ */
    for (uint64_t i = 0; i < rows * cols; i++)
        x[i] = (float)ldexp((double)((int)(rnd() % 2001u) - 1000) / 1000.0, (int)((i / 64) % 7) - 3);
    tx_quant_config c = *cfg;
    c.usage = usage;
    TG_OK(tx_quantize(x, F32, rows, cols, &c, &o->q));
    TG_OK(tx_dequantize(&o->q, usage, deq));
    o->usage = usage;
    o->deq = malloc(sizeof(double) * rows * cols + 8);
    assert_non_null(o->deq);
    for (uint64_t i = 0; i < rows * cols; i++) o->deq[i] = deq[i];
    const tx_qdata *qd = usage == TX_QUSAGE_COLUMNWISE ? &o->q.col : &o->q.row;
    o->d_data = tg_dev_upload(qd->data, qd->data_bytes);
    if (qd->scale) o->d_scales = tg_dev_upload(qd->scale, qd->scale_bytes);
    const float f[2] = {o->q.scale_inv, qd->amax};
    o->d_f = tg_dev_upload(f, sizeof f);
    tx_cuda_dequant_args *a = &o->a;
    a->kind = (tx_cuda_qkind)o->q.kind;
    a->fmt = o->q.fmt;
    a->columnwise = usage == TX_QUSAGE_COLUMNWISE;
    a->block_2d = o->q.block_2d;
    a->swizzled = o->q.scale_layout == TX_SCALE_SWIZZLED;
    a->rows = rows;
    a->cols = cols;
    a->data = o->d_data;
    a->scales = o->d_scales;
    a->scale_cols = qd->scale_cols;
    a->scale_inv = o->d_f;
    a->amax = o->d_f + 1;
    free(x);
    free(deq);
}

static void free_qop(qop *o)
{
    tg_dev_free(o->d_data);
    tg_dev_free(o->d_scales);
    tg_dev_free(o->d_f);
    free(o->deq);
    tx_qtensor_free(&o->q);
}

/* The reference of an emulated or native block-scaled GEMM from the two
 * dequantized operands ([rows, cols] row-major = the column-major cols x
 * rows matrix cuBLAS sees, ld = cols). */
static ref_out block_reference(tx_gemm_desc *g, const qop *A, const qop *B)
{
    tx_gemm_desc r = *g;
    r.lda = (int64_t)A->a.cols;
    r.ldb = (int64_t)B->a.cols;
    return reference(&r, A->deq, B->deq, NULL, NULL, NULL);
}

typedef struct ecase {
    const char *name;
    tx_qkind kind;
    teexec_dtype fmt_a, fmt_b;
    int a2d, b2d;          /* block_2d per operand */
    int pow2;
    int transa, transb;
    unsigned usage_a, usage_b;
    int64_t m, n, k;
    teexec_dtype operand;  /* emulation operand dtype */
    int native;            /* run the native cuBLASLt path instead */
} ecase;

static void run_ecase(const ecase *c)
{
    tx_quant_config ca, cb;
    memset(&ca, 0, sizeof ca);
    ca.kind = c->kind;
    ca.fmt = c->fmt_a;
    ca.block_2d = c->a2d;
    ca.power_2_scale = c->pow2;
    cb = ca;
    cb.fmt = c->fmt_b;
    cb.block_2d = c->b2d;
    /* A [rows, cols]: transa ? [m, k] : [k, m]; B: transb ? [k, n] : [n, k] */
    const uint64_t ar = (uint64_t)(c->transa ? c->m : c->k), ac = (uint64_t)(c->transa ? c->k : c->m);
    const uint64_t br = (uint64_t)(c->transb ? c->k : c->n), bc = (uint64_t)(c->transb ? c->n : c->k);
    qop A, B;
    make_qop(&A, ar, ac, &ca, c->usage_a, 1000 + (uint64_t)c->m);
    make_qop(&B, br, bc, &cb, c->usage_b, 2000 + (uint64_t)c->n);
    tx_gemm_desc g;
    memset(&g, 0, sizeof g);
    g.m = c->m;
    g.n = c->n;
    g.k = c->k;
    g.transa = c->transa;
    g.transb = c->transb;
    g.d_type = F32;
    g.alpha = 1.0f;
    const size_t mn = (size_t)(c->m * c->n);
    void *D = tg_dev_alloc(mn * 4);
    char detail[200];
    snprintf(detail, sizeof detail, "m=%lld n=%lld k=%lld %s", (long long)c->m, (long long)c->n,
             (long long)c->k, c->native ? "native" : c->operand == F32 ? "emulated fp32" : "emulated bf16");
    if (c->native) {
        /* native FP8 block: TN, rowwise data = the stored operand */
        g.a_type = c->fmt_a;
        g.b_type = c->fmt_b;
        g.a_scale_mode = c->a2d ? TX_GEMM_SCALE_BLOCK_2D : TX_GEMM_SCALE_BLOCK_1D;
        g.b_scale_mode = c->b2d ? TX_GEMM_SCALE_BLOCK_2D : TX_GEMM_SCALE_BLOCK_1D;
        g.a_scale_inv = A.d_scales;
        g.b_scale_inv = B.d_scales;
        teexec_status *st = tx_gemm_lt_check(g_h, &g);
        if (st) {
            const teexec_code code = teexec_status_code(st);
            fprintf(stderr, "  %s: refused: %s\n", c->name, teexec_status_message(st));
            teexec_status_destroy(st);
            const int expected = tx_gemm_lt_sm(g_h) != 90;
            tg_record(c->name, expected && code == TEEXEC_ERR_UNSUPPORTED, "refused");
            if (!expected || code != TEEXEC_ERR_UNSUPPORTED) fail_msg("%s: unexpected refusal", c->name);
            goto out;
        }
        TG_OK(tx_gemm_lt_run(g_h, &g, A.d_data, B.d_data, NULL, D, g_ws, NULL));
    } else {
        const size_t sb = tx_gemm_emu_scratch_bytes(&A.a, &B.a, c->operand);
        assert_true(sb > 0);
        void *scratch = tg_dev_alloc(sb);
        TG_OK(tx_gemm_emulate(g_h, &g, &A.a, &B.a, c->operand, scratch, sb, NULL, D, g_ws, NULL));
        tg_sync(c->name);
        tg_dev_free(scratch);
    }
    tg_sync(c->name);
    {
        ref_out r = block_reference(&g, &A, &B);
        double big = 0;
        for (size_t i = 0; i < mn; i++) big = fmax(big, fabs(r.d[i]));
        /* exact products, FP32 accumulation (NVFP4: the global scales are
         * applied once through alpha instead of per element) */
        tol tl = {1e-4, 1e-5 * big};
        if (c->native) tl = (tol){tol_of(E4).rtol, tol_of(E4).atol}; /* TE's FP8 tolerance */
        size_t bad = compare(c->name, F32, D, r.d, mn, tl);
        free_ref(&r);
        tg_record(c->name, bad == 0, detail);
        if (bad) fail_msg("%s: %zu values outside the tolerance", c->name, bad);
    }
out:
    tg_dev_free(D);
    free_qop(&A);
    free_qop(&B);
}

#define ROW TX_QUSAGE_ROWWISE
#define COL TX_QUSAGE_COLUMNWISE
static const ecase ecases[] = {
    /* name, kind, fmt a, fmt b, a2d, b2d, pow2, ta, tb, usage a, usage b, m, n, k, operand, native */
    {"emu_mxfp8_tn_bf16", TX_QKIND_MXFP8, E4, E4, 0, 0, 0, 1, 0, ROW, ROW, 96, 64, 128, BF16, 0},
    {"emu_mxfp8_nn_e5m2_grad_bf16", TX_QKIND_MXFP8, E4, E5, 0, 0, 0, 0, 0, COL, ROW, 64, 96, 64, BF16, 0},
    {"emu_mxfp8_nt_wgrad_bf16", TX_QKIND_MXFP8, E4, E5, 0, 0, 0, 0, 1, COL, COL, 64, 32, 96, BF16, 0},
    {"emu_mxfp8_2d_tn_fp32", TX_QKIND_MXFP8, E4, E4, 1, 0, 0, 1, 0, ROW, ROW, 64, 64, 64, F32, 0},
    {"emu_nvfp4_tn_bf16", TX_QKIND_NVFP4, TEEXEC_DTYPE_FLOAT4E2M1, TEEXEC_DTYPE_FLOAT4E2M1, 0, 0, 0, 1, 0, ROW, ROW, 64, 48, 128, BF16, 0},
    {"emu_nvfp4_2d_weight_tn_bf16", TX_QKIND_NVFP4, TEEXEC_DTYPE_FLOAT4E2M1, TEEXEC_DTYPE_FLOAT4E2M1, 1, 0, 0, 1, 0, ROW, ROW, 48, 32, 64, BF16, 0},
    {"emu_fp8_block_1d_2d_pow2_bf16", TX_QKIND_FP8_BLOCK, E4, E4, 0, 1, 1, 1, 0, ROW, ROW, 128, 256, 256, BF16, 0},
    {"emu_fp8_block_2d_1d_fp32", TX_QKIND_FP8_BLOCK, E4, E4, 1, 0, 0, 1, 0, ROW, ROW, 256, 128, 384, F32, 0},
    {"emu_fp8_block_nn_columnwise_fp32", TX_QKIND_FP8_BLOCK, E4, E4, 0, 0, 0, 0, 0, COL, ROW, 128, 128, 256, F32, 0},
    {"native_fp8_block_1d_2d", TX_QKIND_FP8_BLOCK, E4, E4, 0, 1, 0, 1, 0, ROW, ROW, 256, 128, 384, 0, 1},
    {"native_fp8_block_2d_1d", TX_QKIND_FP8_BLOCK, E4, E4, 1, 0, 0, 1, 0, ROW, ROW, 128, 256, 256, 0, 1},
    {"native_fp8_block_1d_1d", TX_QKIND_FP8_BLOCK, E4, E4, 0, 0, 1, 1, 0, ROW, ROW, 128, 384, 512, 0, 1},
};

static void test_ecase(void **state) { run_ecase((const ecase *)*state); }

/* Emulation argument checks: shapes must match, scratch must suffice. */
static void test_emulate_errors(void **state)
{
    (void)state;
    tx_quant_config c;
    memset(&c, 0, sizeof c);
    c.kind = TX_QKIND_MXFP8;
    c.fmt = E4;
    qop A, B;
    make_qop(&A, 64, 64, &c, ROW, 5);
    make_qop(&B, 32, 64, &c, ROW, 6);
    tx_gemm_desc g;
    memset(&g, 0, sizeof g);
    g.m = 64;
    g.n = 32;
    g.k = 32; /* wrong: the operands have k = 64 */
    g.transa = 1;
    g.d_type = F32;
    g.alpha = 1.0f;
    const size_t sb = tx_gemm_emu_scratch_bytes(&A.a, &B.a, BF16);
    void *scratch = tg_dev_alloc(sb);
    expect_code("emulation shape mismatch",
                tx_gemm_emulate(g_h, &g, &A.a, &B.a, BF16, scratch, sb, NULL, g_ws, g_ws, NULL),
                TEEXEC_ERR_INVALID_ARGUMENT);
    g.k = 64;
    expect_code("emulation scratch too small",
                tx_gemm_emulate(g_h, &g, &A.a, &B.a, BF16, scratch, sb - 256, NULL, g_ws, g_ws, NULL),
                TEEXEC_ERR_INVALID_ARGUMENT);
    expect_code("emulation operand fp16",
                tx_gemm_emulate(g_h, &g, &A.a, &B.a, F16, scratch, sb, NULL, g_ws, g_ws, NULL),
                TEEXEC_ERR_INVALID_ARGUMENT);
    tg_dev_free(scratch);
    free_qop(&A);
    free_qop(&B);
    tg_record("gemm_emulate_errors", 1, "");
}

int main(void)
{
    tg_require_gpu("test_gpu_gemm");
    teexec_status *st = tx_gemm_lt_create(WS_BYTES, &g_h);
    if (st) {
        fprintf(stderr, "test_gpu_gemm: tx_gemm_lt_create: %s\n", teexec_status_message(st));
        return 1;
    }
    fprintf(stderr, "test_gpu_gemm: sm_%d, cuBLASLt %zu\n", tx_gemm_lt_sm(g_h),
            tx_gemm_lt_cublas_version(g_h));
    g_ws = tg_dev_alloc(WS_BYTES);
    enum { NG = sizeof gcases / sizeof gcases[0], NE = sizeof ecases / sizeof ecases[0] };
    struct CMUnitTest tests[NG + NE + 4];
    size_t n = 0;
    for (size_t i = 0; i < NG; i++) {
        struct CMUnitTest t = {gcases[i].name, test_gcase, NULL, NULL, (void *)&gcases[i]};
        tests[n++] = t;
    }
    for (size_t i = 0; i < NE; i++) {
        struct CMUnitTest t = {ecases[i].name, test_ecase, NULL, NULL, (void *)&ecases[i]};
        tests[n++] = t;
    }
    const struct CMUnitTest extra[] = {
        cmocka_unit_test(test_fp32_no_tf32),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_emulate_errors),
    };
    for (size_t i = 0; i < 4; i++) tests[n++] = extra[i];
    const int rc = _cmocka_run_group_tests("test_gpu_gemm", tests, n, NULL, NULL);
    tg_dev_free(g_ws);
    tx_gemm_lt_destroy(g_h);
    return rc;
}
