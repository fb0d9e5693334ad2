/* GPU test: te.ops GroupedLinear on the GPU (exec/cuda/te_cuda_grouped.c
 * over kernels/cuda/grouped_gemm.h).
 *  - the grouped GEMM kernels alone (fp32 FMA path, the bf16 / fp16
 *    mma.sync path, the WMMA path for dims that are not multiples of 8)
 *    against an FP64 reference: FPROP / DGRAD rows past sum(split_sizes)
 *    keep a sentinel (no group writes them); a 0-row group gets dW = 0;
 *    groups of 1, 127 and 129 rows and a last group past the end; split
 *    sizes the CPU refuses (negative, past the rows) are clamped: the result
 *    equals the clamped sizes' result and nothing outside the matrices is
 *    touched (guard bytes after every output keep their poison); a second
 *    run of every case gives identical bytes (determinism);
 *  - the node, recipe none, fp32 and bf16: forward and backward (y, dx, every
 *    dW_g and dbias_g) against the CPU kernel (tx_te_cpu_forward /
 *    _backward) on the same inputs, uneven groups with a 0-row group and a
 *    sum smaller than the rows (the CPU's zeros there);
 *  - the node under fp8-current, fp8-delayed, fp8-block, mxfp8 and nvfp4
 *    against the CPU group executor (exec/group_exec.h) with a hand-made
 *    quantization plan, within DESIGN.md's FP8 / NVFP4 tolerances and, since
 *    both sides multiply the same dequantized operands, within bf16's;
 *  - models/te_moe_block through the public API: a CUDA session against the
 *    CPU session (inference), and three SGD steps of a CUDA trainer against
 *    the CPU trainer;
 *  - the per-group device alpha (grouped_gemm.h; the quantized recipes'
 *    factored scales) on the mma.sync, WMMA and FP32-FMA kernels against
 *    FP64 on exactly representable inputs (bit-exact), with the
 *    kernel-selection query; under each recipe, the node's scratch size
 *    says its GEMMs read bf16 dequantized operands (the tensor-core kernel)
 *    except fp8-block without power-of-two scales (FP32);
 *  - timing: the bf16 grouped GEMMs at 8 groups, 8192 rows, 2048 -> 8192,
 *    and the node's forward / forward + backward under none, fp8-current
 *    and mxfp8 (TFLOP/s printed and recorded; nothing asserted on speed).
 * fp32 tolerances: two fp32 GEMMs summing in different orders (rtol and atol
 * 1e-5 of the largest value, as test_gpu_te_linear); bf16: 1.6e-2 with an
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
#include "exec/cuda/te_cuda.h"
#include "exec/group_exec.h"
#include "exec/recipe_delayed.h"
#include "kernels/cpu/te_args.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/grouped_gemm.h"
#include "teexec/teexec.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

static tx_cuda_env g_env;

/* ---- tensors ------------------------------------------------------------------ */

static tx_tensor dev_copy(const tx_tensor *h)
{
    tx_tensor d = *h;
    d.data = tg_dev_upload(h->data, h->nbytes);
    d.owns_data = false;
    return d;
}

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

static tx_tensor splits_of(const int64_t *s, int g)
{
    int64_t d[1] = {g};
    tx_tensor t = {0};
    TG_OK(tx_tensor_alloc(&t, TEEXEC_DTYPE_INT64, 1, d));
    memcpy(t.data, s, sizeof(int64_t) * (size_t)g);
    return t;
}

static double max_abs(const tx_tensor *t)
{
    double m = 0;
    for (uint64_t i = 0; i < t->numel; i++) m = fmax(m, fabs(ku_get(t, i)));
    return m;
}

static void expect_none(const char *what, const tx_tensor *ref, const void *dev)
{
    bool f32 = ref->dtype == KU_F32;
    double m = max_abs(ref);
    ku_expect_close(what, ref, dev, f32 ? 1e-5 : 1.6e-2, (f32 ? 1e-5 : 1e-4) * m + 1e-30);
}

/* ---- the kernels alone ------------------------------------------------------- */

enum { GUARD = 256 };

/* Device buffer of `bytes` + GUARD poison bytes (tg_dev_alloc fills 0xA5). */
static void *dev_guarded(size_t bytes) { return tg_dev_alloc(bytes + GUARD); }

static void expect_poison(const char *what, const void *dev, size_t from, size_t n)
{
    uint8_t *h = malloc(n + 1);
    assert_non_null(h);
    tg_download(h, (const char *)dev + from, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += h[i] != 0xA5;
    free(h);
    char detail[96];
    snprintf(detail, sizeof detail, "%zu of %zu sentinel bytes changed", bad, n);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

/* The CPU reference of all three GEMMs (grouped_gemm.h's definitions) in
 * double over the CLAMPED sizes; rows outside every group left 0. */
static void ref_gemms(const tx_tensor *x, const tx_tensor *const *w, const tx_tensor *dy,
                      const int64_t *split, int G, size_t M, size_t N, size_t K, double *y,
                      double *dx, double *dw)
{
    int64_t off = 0;
    memset(y, 0, sizeof(double) * M * N);
    memset(dx, 0, sizeof(double) * M * K);
    memset(dw, 0, sizeof(double) * (size_t)G * N * K);
    for (int g = 0; g < G; g++) {
        int64_t s = split[g], left = (int64_t)M - off;
        s = s < 0 ? 0 : s > left ? left : s;
        for (int64_t r = off; r < off + s; r++) {
            for (size_t n = 0; n < N; n++) {
                double acc = 0;
                for (size_t k = 0; k < K; k++)
                    acc += (double)ku_get(x, (uint64_t)r * K + k) * ku_get(w[g], n * K + k);
                y[r * N + n] = acc;
            }
            for (size_t k = 0; k < K; k++) {
                double acc = 0;
                for (size_t n = 0; n < N; n++)
                    acc += (double)ku_get(dy, (uint64_t)r * N + n) * ku_get(w[g], n * K + k);
                dx[r * K + k] = acc;
            }
        }
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) {
                double acc = 0;
                for (int64_t r = off; r < off + s; r++)
                    acc += (double)ku_get(dy, (uint64_t)r * N + n) * ku_get(x, (uint64_t)r * K + k);
                dw[((size_t)g * N + n) * K + k] = acc;
            }
        off += s;
    }
}

static void expect_vs_double(const char *what, const double *ref, const void *dev, teexec_dtype dt,
                             size_t n, size_t rows_valid_elems)
{
    tx_tensor got = {0};
    int64_t d[1] = {(int64_t)n};
    TG_OK(tx_tensor_alloc(&got, dt, 1, d));
    tg_download(got.data, dev, got.nbytes);
    double m = 0;
    for (size_t i = 0; i < rows_valid_elems; i++) m = fmax(m, fabs(ref[i]));
    double rtol = dt == KU_F32 ? 1e-5 : 1.6e-2, atol = (dt == KU_F32 ? 1e-5 : 4e-3) * m + 1e-30;
    size_t bad = 0;
    for (size_t i = 0; i < rows_valid_elems; i++) {
        double e = fabs(ku_get(&got, i) - ref[i]);
        if (e > atol + rtol * fabs(ref[i]) || isnan(e)) {
            if (!bad) fprintf(stderr, "%s: element %zu ref %.9g gpu %.9g\n", what, i, ref[i],
                              (double)ku_get(&got, i));
            bad++;
        }
    }
    tx_tensor_release(&got);
    char detail[96];
    snprintf(detail, sizeof detail, "%zu of %zu outside tolerance", bad, rows_valid_elems);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

typedef struct kcase {
    const char *name;
    teexec_dtype dt;
    int64_t split[5];
    int groups;
    size_t m, n, k; /* multiples of 8: the tensor-core path's 16-byte loads; else its scalar loads */
} kcase;

static void run_kernel_case(void **state)
{
    const kcase *c = *state;
    const size_t M = c->m, N = c->n, K = c->k; /* not tile multiples */
    const int G = c->groups;
    ku_seed(7 + (uint64_t)c->dt);
    int64_t xd[2] = {(int64_t)M, (int64_t)K}, wd[2] = {(int64_t)N, (int64_t)K},
            yd[2] = {(int64_t)M, (int64_t)N};
    tx_tensor x, dy, w[5];
    ku_make(&x, c->dt, 2, xd, -1.0, 1.0);
    ku_make(&dy, c->dt, 2, yd, -1.0, 1.0);
    for (int g = 0; g < G; g++) ku_make(&w[g], c->dt, 2, wd, -0.5, 0.5);
    const tx_tensor *wp[5] = {&w[0], &w[1], &w[2], &w[3], &w[4]};
    double *ry = malloc(sizeof(double) * M * N), *rdx = malloc(sizeof(double) * M * K),
           *rdw = malloc(sizeof(double) * (size_t)G * N * K);
    assert_true(ry && rdx && rdw);
    ref_gemms(&x, wp, &dy, c->split, G, M, N, K, ry, rdx, rdw);
    int64_t total = 0;
    for (int g = 0; g < G; g++) {
        int64_t s = c->split[g] < 0 ? 0 : c->split[g];
        total = total + s > (int64_t)M ? (int64_t)M : total + s;
    }
    size_t es = tx_dtype_elem_size(c->dt);
    int64_t *dsplit = tg_dev_upload(c->split, sizeof(int64_t) * (size_t)G);
    void *gx = tg_dev_upload(x.data, x.nbytes), *gdy = tg_dev_upload(dy.data, dy.nbytes);
    void *gw[5], *gdw[5];
    void *gy = dev_guarded(M * N * es), *gdx = dev_guarded(M * K * es);
    tx_cuda_grouped_gemm f;
    memset(&f, 0, sizeof f);
    f.groups = G;
    f.split_sizes = dsplit;
    f.m = M, f.n = N, f.k = K;
    f.a_dt = f.b_dt = f.out_dt = c->dt;
    for (int g = 0; g < G; g++) {
        gw[g] = tg_dev_upload(w[g].data, w[g].nbytes);
        gdw[g] = dev_guarded(N * K * es);
    }
    tx_cuda_grouped_gemm d = f, wg = f;
    f.kind = TX_GG_FPROP;
    f.a = gx;
    for (int g = 0; g < G; g++) f.b[g] = gw[g];
    f.out[0] = gy;
    d.kind = TX_GG_DGRAD;
    d.a = gdy;
    for (int g = 0; g < G; g++) d.b[g] = gw[g];
    d.out[0] = gdx;
    wg.kind = TX_GG_WGRAD;
    wg.a = gdy;
    wg.b[0] = gx;
    for (int g = 0; g < G; g++) wg.out[g] = gdw[g];
    TG_OK(tx_cuda_grouped_gemm_run(&f, NULL));
    TG_OK(tx_cuda_grouped_gemm_run(&d, NULL));
    TG_OK(tx_cuda_grouped_gemm_run(&wg, NULL));
    tg_sync("grouped GEMMs");
    char what[96];
    snprintf(what, sizeof what, "kernel_%s y", c->name);
    expect_vs_double(what, ry, gy, c->dt, M * N, (size_t)total * N);
    snprintf(what, sizeof what, "kernel_%s y rows past the groups + guard", c->name);
    expect_poison(what, gy, (size_t)total * N * es, (M - (size_t)total) * N * es + GUARD);
    snprintf(what, sizeof what, "kernel_%s dx", c->name);
    expect_vs_double(what, rdx, gdx, c->dt, M * K, (size_t)total * K);
    snprintf(what, sizeof what, "kernel_%s dx rows past the groups + guard", c->name);
    expect_poison(what, gdx, (size_t)total * K * es, (M - (size_t)total) * K * es + GUARD);
    for (int g = 0; g < G; g++) {
        snprintf(what, sizeof what, "kernel_%s dW_%d", c->name, g);
        expect_vs_double(what, rdw + (size_t)g * N * K, gdw[g], c->dt, N * K, N * K);
        snprintf(what, sizeof what, "kernel_%s dW_%d guard", c->name, g);
        expect_poison(what, gdw[g], N * K * es, GUARD);
    }
    /* determinism: the same three launches into fresh (poisoned) buffers
     * give the same bytes, guards and untouched tails included */
    void *gy2 = dev_guarded(M * N * es), *gdx2 = dev_guarded(M * K * es), *gdw2[5];
    f.out[0] = gy2;
    d.out[0] = gdx2;
    for (int g = 0; g < G; g++) wg.out[g] = gdw2[g] = dev_guarded(N * K * es);
    TG_OK(tx_cuda_grouped_gemm_run(&f, NULL));
    TG_OK(tx_cuda_grouped_gemm_run(&d, NULL));
    TG_OK(tx_cuda_grouped_gemm_run(&wg, NULL));
    tg_sync("grouped GEMMs again");
    size_t diff = 0;
    {
        const void *p1[12] = {gy, gdx}, *p2[12] = {gy2, gdx2};
        size_t nb[12] = {M * N * es + GUARD, M * K * es + GUARD};
        for (int g = 0; g < G; g++) p1[2 + g] = gdw[g], p2[2 + g] = gdw2[g], nb[2 + g] = N * K * es + GUARD;
        for (int i = 0; i < 2 + G; i++) {
            uint8_t *h1 = malloc(nb[i]), *h2 = malloc(nb[i]);
            assert_true(h1 && h2);
            tg_download(h1, p1[i], nb[i]);
            tg_download(h2, p2[i], nb[i]);
            diff += tg_cmp_bytes(c->name, h1, h2, nb[i]);
            free(h1);
            free(h2);
        }
    }
    snprintf(what, sizeof what, "kernel_%s deterministic (two runs)", c->name);
    char det[64];
    snprintf(det, sizeof det, "%zu bytes differ", diff);
    tg_record(what, diff == 0, det);
    if (diff) fail_msg("%s: %s", what, det);
    tg_dev_free(gy2);
    tg_dev_free(gdx2);
    for (int g = 0; g < G; g++) tg_dev_free(gdw2[g]);
    for (int g = 0; g < G; g++) {
        tg_dev_free(gw[g]);
        tg_dev_free(gdw[g]);
        tx_tensor_release(&w[g]);
    }
    tg_dev_free(gx);
    tg_dev_free(gdy);
    tg_dev_free(gy);
    tg_dev_free(gdx);
    tg_dev_free(dsplit);
    tx_tensor_release(&x);
    tx_tensor_release(&dy);
    free(ry);
    free(rdx);
    free(rdw);
}

static const kcase kcases[] = {
    {"fp32_uneven", KU_F32, {40, 0, 77, 9}, 4, 150, 136, 72},    /* sum 126 < 150, a 0-row group */
    {"bf16_uneven", KU_BF16, {40, 0, 77, 9}, 4, 150, 136, 72},
    {"bf16_odd_dims", KU_BF16, {40, 0, 77, 9}, 4, 150, 50, 37},
    {"fp16_uneven", KU_F16, {1, 129, 0, 3, 2}, 5, 150, 136, 72},
    {"fp32_clamped", KU_F32, {-5, 100, 90, 7}, 4, 150, 136, 72}, /* -5 -> 0, 90 -> 50, 7 -> 0 */
    {"bf16_clamped", KU_BF16, {150, 3, -1, 4}, 4, 150, 136, 72}, /* everything in group 0 */
    /* the mma.sync path's edges: groups of 0, 1, 127 and 129 rows (one
     * under and one over a 128-row tile) and a last group running past the
     * end (300 -> 127); N and K multiples of 8 but not of the 128 tile; K
     * over several 32-wide pipeline steps with a partial last one */
    {"bf16_moe_edges", KU_BF16, {0, 1, 127, 129, 300}, 5, 384, 200, 136},
    {"fp16_moe_edges_long_k", KU_F16, {1, 0, 129, 127, 7}, 5, 300, 264, 520}, /* sum 264 < 300 */
    {"bf16_one_group", KU_BF16, {260}, 1, 260, 392, 264},
};

/* ---- the per-group alpha against FP64 on exact inputs ---------------------------- */

/* Operands k/8 (|k| <= 8, exact in bf16), biases k/8, alpha_a 3/8 and
 * alpha_b[g] of few bits: every product, partial sum, alpha and biased
 * output is exact in FP32, so every kernel (mma.sync, WMMA, FP32-FMA) must
 * give the FP64 reference bit for bit, whatever its summation order:
 * out = alpha_a * alpha_b[g] * sum + bias (grouped_gemm.h), WGRAD with
 * alpha_b[0]. The first variant also checks the kernel-selection query. */
typedef struct acase {
    const char *name;
    teexec_dtype dt;
    int force_general, want_mma;
} acase;

static void make_exact(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims)
{
    TG_OK(tx_tensor_alloc(t, dt, rank, dims));
    for (uint64_t i = 0; i < t->numel; i++) ku_set(t, i, (float)((int)ku_below(17) - 8) / 8.0f);
}

static void run_alpha_case(void **state)
{
    const acase *c = *state;
    enum { G = 4 };
    const size_t M = 150, N = 136, K = 72;
    static const int64_t split[G] = {40, 0, 77, 9}; /* 126 of 150 rows */
    const float ha[1 + G] = {0.375f, 1.25f, 0.5f, 3.0f, 0.75f};
    ku_seed(4242);
    int64_t xd[2] = {(int64_t)M, (int64_t)K}, wd[2] = {(int64_t)N, (int64_t)K},
            yd[2] = {(int64_t)M, (int64_t)N}, bd[1] = {(int64_t)N};
    tx_tensor x, dy, w[G], b[G];
    make_exact(&x, c->dt, 2, xd);
    make_exact(&dy, c->dt, 2, yd);
    for (int g = 0; g < G; g++) {
        make_exact(&w[g], c->dt, 2, wd);
        make_exact(&b[g], KU_F32, 1, bd);
    }
    const tx_tensor *wp[G] = {&w[0], &w[1], &w[2], &w[3]};
    double *ry = malloc(sizeof(double) * M * N), *rdx = malloc(sizeof(double) * M * K),
           *rdw = malloc(sizeof(double) * G * N * K);
    assert_true(ry && rdx && rdw);
    ref_gemms(&x, wp, &dy, split, G, M, N, K, ry, rdx, rdw);
    size_t row = 0;
    for (int g = 0; g < G; g++) {
        double al = (double)ha[0] * ha[1 + g];
        for (size_t r = row; r < row + (size_t)split[g]; r++) {
            for (size_t n = 0; n < N; n++) ry[r * N + n] = ry[r * N + n] * al + ku_get(&b[g], n);
            for (size_t k = 0; k < K; k++) rdx[r * K + k] *= al;
        }
        row += (size_t)split[g];
        for (size_t i = 0; i < N * K; i++) rdw[(size_t)g * N * K + i] *= (double)ha[0] * ha[1];
    }
    int64_t *dsplit = tg_dev_upload(split, sizeof split);
    float *dal = tg_dev_upload(ha, sizeof ha);
    void *gx = ku_upload(&x), *gdy = ku_upload(&dy), *gw[G], *gb[G], *gdw[G];
    void *gy = tg_dev_alloc(M * N * 4), *gdx = tg_dev_alloc(M * K * 4);
    tx_cuda_grouped_gemm base;
    memset(&base, 0, sizeof base);
    base.groups = G;
    base.split_sizes = dsplit;
    base.m = M, base.n = N, base.k = K;
    base.a_dt = base.b_dt = c->dt;
    base.out_dt = KU_F32;
    base.force_general = c->force_general;
    base.alpha_a = dal;
    tx_cuda_grouped_gemm f = base, d = base, wg = base;
    f.kind = TX_GG_FPROP, f.a = gx, f.out[0] = gy, f.bias_dt = KU_F32;
    d.kind = TX_GG_DGRAD, d.a = gdy, d.out[0] = gdx;
    wg.kind = TX_GG_WGRAD, wg.a = gdy, wg.b[0] = gx, wg.alpha_b[0] = dal + 1;
    for (int g = 0; g < G; g++) {
        gw[g] = ku_upload(&w[g]);
        gb[g] = ku_upload(&b[g]);
        gdw[g] = tg_dev_alloc(N * K * 4);
        f.b[g] = d.b[g] = gw[g];
        f.bias[g] = gb[g];
        f.alpha_b[g] = d.alpha_b[g] = dal + 1 + g;
        wg.out[g] = gdw[g];
    }
    char what[96];
    snprintf(what, sizeof what, "alpha_%s kernel selection", c->name);
    int sel = tx_cuda_grouped_gemm_uses_mma(&f) && tx_cuda_grouped_gemm_uses_mma(&d) &&
              tx_cuda_grouped_gemm_uses_mma(&wg);
    tg_record(what, sel == c->want_mma, sel ? "mma.sync" : "general");
    assert_int_equal(sel, c->want_mma);
    TG_OK(tx_cuda_grouped_gemm_run(&f, NULL));
    TG_OK(tx_cuda_grouped_gemm_run(&d, NULL));
    TG_OK(tx_cuda_grouped_gemm_run(&wg, NULL));
    tg_sync("alpha GEMMs");
    const struct { const char *n; const double *ref; const void *dev; size_t count; } chk[3] = {
        {"y", ry, gy, row * N}, {"dx", rdx, gdx, row * K}, {"dW", rdw, NULL, N * K}};
    for (int i = 0; i < 3; i++)
        for (int g = 0; g < (i == 2 ? G : 1); g++) {
            size_t n = chk[i].count;
            float *h = malloc(n * 4);
            assert_true(h != NULL);
            tg_download(h, i == 2 ? gdw[g] : chk[i].dev, n * 4);
            const double *ref = chk[i].ref + (i == 2 ? (size_t)g * N * K : 0);
            size_t bad = 0;
            for (size_t e = 0; e < n; e++)
                if ((double)h[e] != ref[e]) {
                    if (!bad) fprintf(stderr, "alpha_%s %s[%d] %zu: ref %.9g gpu %.9g\n", c->name,
                                      chk[i].n, g, e, ref[e], (double)h[e]);
                    bad++;
                }
            free(h);
            snprintf(what, sizeof what, "alpha_%s %s_%d exact vs fp64", c->name, chk[i].n, g);
            char det[64];
            snprintf(det, sizeof det, "%zu of %zu differ", bad, n);
            tg_record(what, bad == 0, det);
            if (bad) fail_msg("%s: %s", what, det);
        }
    for (int g = 0; g < G; g++) {
        tg_dev_free(gw[g]);
        tg_dev_free(gb[g]);
        tg_dev_free(gdw[g]);
        tx_tensor_release(&w[g]);
        tx_tensor_release(&b[g]);
    }
    tg_dev_free(gx);
    tg_dev_free(gdy);
    tg_dev_free(gy);
    tg_dev_free(gdx);
    tg_dev_free(dal);
    tg_dev_free(dsplit);
    tx_tensor_release(&x);
    tx_tensor_release(&dy);
    free(ry);
    free(rdx);
    free(rdw);
}

static const acase acases[] = {
    {"mma_bf16", KU_BF16, 0, 1},
    {"wmma_bf16", KU_BF16, 1, 0},
    {"fma_fp32", KU_F32, 0, 0},
};

/* ---- the node: recipe none ----------------------------------------------------- */

typedef struct node {
    const tx_cuda_te_impl *impl;
    void *priv;
    size_t state_bytes, scratch_bytes;
    void *state, *scratch;
} node;

static void node_prepare(node *n, const tx_cuda_te_desc *d)
{
    memset(n, 0, sizeof *n);
    n->impl = tx_cuda_te_linear_impl(TX_TE_GROUPED_LINEAR);
    assert_non_null(n->impl);
    assert_non_null(n->impl->forward);
    TG_OK(n->impl->prepare(d, &n->priv, &n->state_bytes, &n->scratch_bytes));
    n->state = n->state_bytes ? tg_dev_alloc(n->state_bytes) : NULL;
    n->scratch = n->scratch_bytes ? tg_dev_alloc(n->scratch_bytes) : NULL;
}

static void node_free(node *n)
{
    n->impl->free_priv(n->priv);
    if (n->state) tg_dev_free(n->state);
    if (n->scratch) tg_dev_free(n->scratch);
}

enum { G4 = 4, NP = 2 * G4 };
/* x [3, 16, 64] = 48 rows, split 5 + 0 + 19 + 9 = 33: 15 rows in no group */
static const int64_t SPLIT_NONE[G4] = {5, 0, 19, 9};

/* Host tensors of one GroupedLinear case. */
typedef struct gl_case {
    tx_tensor x, dy, ss, p[NP], y_like;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
} gl_case;

static void gl_make(gl_case *c, teexec_dtype dt, const int64_t *xd, const int64_t *yd, int64_t n,
                    int64_t k, const int64_t *split)
{
    int64_t wd[2] = {n, k}, bd[1] = {n};
    ku_make(&c->x, dt, 3, xd, -2.0, 2.0);
    ku_make(&c->dy, dt, 3, yd, -1.0, 1.0);
    for (int g = 0; g < G4; g++) ku_make(&c->p[g], dt, 2, wd, -0.2, 0.2);
    for (int g = 0; g < G4; g++) ku_make(&c->p[G4 + g], dt, 1, bd, -0.5, 0.5);
    c->ss = splits_of(split, G4);
    c->y_like = host_like(&c->dy);
    tx_te_attr_defaults(tx_te_schema(TX_TE_GROUPED_LINEAR), c->attrs);
    c->attrs[TX_TE_A_GL_NUM_GROUPS].i = G4;
    c->attrs[TX_TE_A_GL_BIAS].i = 1;
}

static void gl_free(gl_case *c)
{
    tx_tensor_release(&c->x);
    tx_tensor_release(&c->dy);
    tx_tensor_release(&c->ss);
    tx_tensor_release(&c->y_like);
    for (int i = 0; i < NP; i++) tx_tensor_release(&c->p[i]);
}

static tx_cuda_te_desc desc_of(gl_case *c, const tx_tensor *const *ext, const tx_tensor *const *par,
                               const tx_cuda_linear_quant *q)
{
    tx_cuda_te_desc d;
    memset(&d, 0, sizeof d);
    d.op = TX_TE_GROUPED_LINEAR;
    d.name = "experts";
    d.attrs = c->attrs;
    d.input = &c->x;
    d.extra_inputs = ext;
    d.n_extra_inputs = 1;
    d.params = par;
    d.n_params = NP;
    d.output = &c->y_like;
    d.training = true;
    d.needs = TX_TE_FOR_ALL;
    d.quant = q;
    d.sm = g_env.sm;
    return d;
}

/* Device copies and grads of one case, and the node's forward + backward. */
typedef struct gl_dev {
    tx_tensor x, dy, ss, p[NP], y, dx, dp[NP];
} gl_dev;

/* One forward + backward of the node on g's tensors (asynchronous). */
static void gl_dev_step(gl_dev *g, const gl_case *c, node *nd)
{
    const tx_tensor *ext[1] = {&g->ss}, *par[NP];
    for (int i = 0; i < NP; i++) par[i] = &g->p[i];
    tx_te_fwd_args a;
    memset(&a, 0, sizeof a);
    a.op = TX_TE_GROUPED_LINEAR;
    a.attrs = c->attrs;
    a.input = &g->x;
    a.extra_inputs = ext;
    a.n_extra_inputs = 1;
    a.params = par;
    a.n_params = NP;
    a.output = &g->y;
    a.training = true;
    TG_OK(nd->impl->forward(nd->priv, &a, nd->state, nd->scratch, &g_env));
    const tx_tensor *saved[2 + NP] = {&g->ss, &g->x};
    for (int i = 0; i < NP; i++) saved[2 + i] = &g->p[i];
    tx_tensor *gp[NP];
    for (int i = 0; i < NP; i++) gp[i] = &g->dp[i];
    tx_te_bwd_args b;
    memset(&b, 0, sizeof b);
    b.op = TX_TE_GROUPED_LINEAR;
    b.attrs = c->attrs;
    b.grad_output = &g->dy;
    b.saved = saved;
    b.n_saved = 2 + NP;
    b.grad_input = &g->dx;
    b.grad_params = gp;
    b.n_grad_params = NP;
    TG_OK(nd->impl->backward(nd->priv, &b, nd->state, nd->scratch, &g_env));
}

static void gl_dev_run(gl_dev *g, const gl_case *c, node *nd)
{
    g->x = dev_copy(&c->x);
    g->dy = dev_copy(&c->dy);
    g->ss = dev_copy(&c->ss);
    for (int i = 0; i < NP; i++) {
        g->p[i] = dev_copy(&c->p[i]);
        g->dp[i] = dev_new(c->p[i].dtype, c->p[i].rank, c->p[i].dims);
    }
    g->y = dev_new(c->dy.dtype, c->dy.rank, c->dy.dims);
    g->dx = dev_new(c->x.dtype, c->x.rank, c->x.dims);
    gl_dev_step(g, c, nd);
    tg_sync("grouped linear forward + backward");
}

static void gl_dev_free(gl_dev *g)
{
    tx_tensor *t[] = {&g->x, &g->dy, &g->ss, &g->y, &g->dx};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) dev_free(t[i]);
    for (int i = 0; i < NP; i++) {
        dev_free(&g->p[i]);
        dev_free(&g->dp[i]);
    }
}

static void run_none(teexec_dtype dt)
{
    const char *tag = dt == KU_F32 ? "fp32" : "bf16";
    int64_t xd[3] = {3, 16, 64}, yd[3] = {3, 16, 96};
    ku_seed(dt == KU_F32 ? 11 : 12);
    gl_case c;
    gl_make(&c, dt, xd, yd, 96, 64, SPLIT_NONE);
    /* CPU */
    const tx_tensor *ext[1] = {&c.ss}, *par[NP];
    for (int i = 0; i < NP; i++) par[i] = &c.p[i];
    tx_tensor y = host_like(&c.dy), dx = host_like(&c.x), dp[NP];
    for (int i = 0; i < NP; i++) dp[i] = host_like(&c.p[i]);
    tx_te_fwd_args a;
    memset(&a, 0, sizeof a);
    a.op = TX_TE_GROUPED_LINEAR;
    a.attrs = c.attrs;
    a.input = &c.x;
    a.extra_inputs = ext;
    a.n_extra_inputs = 1;
    a.params = par;
    a.n_params = NP;
    a.output = &y;
    TG_OK(tx_te_cpu_forward(&a));
    const tx_tensor *saved[2 + NP] = {&c.ss, &c.x};
    for (int i = 0; i < NP; i++) saved[2 + i] = &c.p[i];
    tx_tensor *gp[NP];
    for (int i = 0; i < NP; i++) gp[i] = &dp[i];
    tx_te_bwd_args b;
    memset(&b, 0, sizeof b);
    b.op = TX_TE_GROUPED_LINEAR;
    b.attrs = c.attrs;
    b.grad_output = &c.dy;
    b.saved = saved;
    b.n_saved = 2 + NP;
    b.grad_input = &dx;
    b.grad_params = gp;
    b.n_grad_params = NP;
    TG_OK(tx_te_cpu_backward(&b));
    /* GPU */
    tx_cuda_te_desc d = desc_of(&c, ext, par, NULL);
    node nd;
    node_prepare(&nd, &d);
    assert_int_equal(nd.state_bytes, 0); /* nothing quantized: nothing kept */
    gl_dev g;
    gl_dev_run(&g, &c, &nd);
    char what[96];
    snprintf(what, sizeof what, "grouped_none_%s y", tag);
    expect_none(what, &y, g.y.data);
    snprintf(what, sizeof what, "grouped_none_%s dx", tag);
    expect_none(what, &dx, g.dx.data);
    for (int i = 0; i < NP; i++) {
        snprintf(what, sizeof what, "grouped_none_%s %s_%d", tag, i < G4 ? "dW" : "dbias", i % G4);
        expect_none(what, &dp[i], g.dp[i].data);
    }
    /* a second call gives the same bits (deterministic) */
    void *y1 = malloc(y.nbytes), *dw1 = malloc(dp[2].nbytes);
    assert_true(y1 && dw1);
    tg_download(y1, g.y.data, y.nbytes);
    tg_download(dw1, g.dp[2].data, dp[2].nbytes);
    gl_dev g2;
    gl_dev_run(&g2, &c, &nd);
    tx_tensor r1 = y, r2 = dp[2];
    r1.data = y1;
    r2.data = dw1;
    snprintf(what, sizeof what, "grouped_none_%s y repeat", tag);
    ku_expect_bits(what, &r1, g2.y.data);
    snprintf(what, sizeof what, "grouped_none_%s dW_2 repeat", tag);
    ku_expect_bits(what, &r2, g2.dp[2].data);
    free(y1);
    free(dw1);
    gl_dev_free(&g2);
    gl_dev_free(&g);
    node_free(&nd);
    tx_tensor_release(&y);
    tx_tensor_release(&dx);
    for (int i = 0; i < NP; i++) tx_tensor_release(&dp[i]);
    gl_free(&c);
}

static void test_none_fp32(void **s) { (void)s; run_none(KU_F32); }
static void test_none_bf16(void **s) { (void)s; run_none(KU_BF16); }

/* ---- the node under every recipe ------------------------------------------------ */

typedef struct qcase {
    const char *name;
    tx_recipe_kind kind;
} qcase;

enum { SEED = 99, STEP = 5 };

/* The plan of one GroupedLinear (node 0): x, weight, dy (test_gpu_te_linear's
 * rules: fp8-block 1x128 activations and 128x128 weights, NVFP4 16x16
 * weights). */
static void make_plan(tx_plan_quant q[3], tx_recipe_kind kind)
{
    memset(q, 0, 3 * sizeof q[0]);
    for (int o = 0; o < 3; o++) {
        tx_plan_quant *e = &q[o];
        e->node = 0;
        e->operand = (tx_qoperand)o;
        e->quantized = true;
        e->producer = -1;
        e->delayed_slot = -1;
        e->block_rows = e->block_cols = 1;
        bool wt = o == TX_QOP_WEIGHT;
        switch (kind) {
        case TX_RECIPE_FP8_DELAYED:
            e->delayed_slot = o;
            /* fall through */
        case TX_RECIPE_FP8_CURRENT:
            e->kind = TX_QKIND_FP8_TENSOR;
            e->data_dtype = TEEXEC_DTYPE_FLOAT8E4M3FN;
            break;
        case TX_RECIPE_FP8_BLOCK:
            e->kind = TX_QKIND_FP8_BLOCK;
            e->data_dtype = TEEXEC_DTYPE_FLOAT8E4M3FN;
            e->block_rows = wt ? 128 : 1;
            e->block_cols = 128;
            break;
        case TX_RECIPE_MXFP8:
            e->kind = TX_QKIND_MXFP8;
            e->data_dtype = TEEXEC_DTYPE_FLOAT8E4M3FN;
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

static tx_cuda_operand_q gpu_q(const tx_plan_quant *e, const tx_group_config *cfg, float *dscale,
                               float *damax)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    /* the executor's mapping from a plan entry (exec/quant_operand.h) */
    q.on = tx_quant_operand_config(e, 1, &cfg->recipe, e->node, e->operand, true, true,
                                   cfg->seed, cfg->step, &q.cfg) != NULL;
    assert_true(q.on);
    if (e->delayed_slot >= 0) {
        q.delayed_scale = dscale;
        q.delayed_amax = damax;
    }
    return q;
}

/* The node's scratch holds the dequantized operands (x, every weight, dy
 * rowwise and columnwise: dq elements) in the dtype its GEMMs read:
 * bf16 for the recipes whose dequantized values are exact in bf16 (FP8
 * per-tensor with its scale factored into the GEMM alpha, MXFP8, NVFP4:
 * the tensor-core kernel), FP32 for fp8-block without power-of-two scales
 * (the planner's fp8-block; the FP32-FMA kernel). Beside them the scratch
 * has only dy's quantized bytes (at most 1 byte an element plus scales) and
 * a few floats, so the size tells which dtype was planned. */
static void check_dequant_scratch(const qcase *qc, const node *nd, size_t M, size_t N, size_t K,
                                  int G)
{
    const size_t dq = M * K + (size_t)G * N * K + 2 * M * N;
    const bool fp32 = qc->kind == TX_RECIPE_FP8_BLOCK;
    const bool ok = fp32 ? nd->scratch_bytes >= 4 * dq
                         : nd->scratch_bytes >= 2 * dq && nd->scratch_bytes < 4 * dq;
    char what[96], det[128];
    snprintf(what, sizeof what, "grouped_%s dequantized operands in %s", qc->name,
             fp32 ? "fp32" : "bf16");
    snprintf(det, sizeof det, "scratch %zu bytes for %zu dequantized elements", nd->scratch_bytes,
             dq);
    tg_record(what, ok, det);
    if (!ok) fail_msg("%s: %s", what, det);
}

static void run_recipe(void **state)
{
    const qcase *qc = *state;
    int64_t xd[3] = {2, 32, 128}, yd[3] = {2, 32, 96};
    static const int64_t split[G4] = {20, 0, 37, 5}; /* 62 of 64 rows */
    ku_seed(1000 + (uint64_t)qc->kind);
    gl_case c;
    gl_make(&c, KU_BF16, xd, yd, 96, 128, split);
    tx_plan_quant plan[3];
    make_plan(plan, qc->kind);
    tx_group_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.recipe.kind = qc->kind;
    cfg.recipe.nvfp4_rht = true;
    cfg.recipe.nvfp4_stochastic = true;
    cfg.recipe.nvfp4_2d_weights = true;
    cfg.recipe.compute_dtype = KU_BF16;
    cfg.quant = plan;
    cfg.n_quant = 3;
    cfg.seed = SEED;
    cfg.step = STEP;
    cfg.training = true;
    tx_delayed_state ds;
    memset(&ds, 0, sizeof ds);
    bool delayed = qc->kind == TX_RECIPE_FP8_DELAYED;
    if (delayed) {
        teexec_dtype fmts[3] = {plan[0].data_dtype, plan[1].data_dtype, plan[2].data_dtype};
        TG_OK(tx_delayed_init(&ds, 4, 3, 0, TX_AMAX_MAX, fmts));
        cfg.delayed = &ds;
    }
    /* CPU: the group executor on a group of one GroupedLinear */
    const tx_tensor *ext[1] = {&c.ss}, *par[NP];
    for (int i = 0; i < NP; i++) par[i] = &c.p[i];
    tx_group_op op;
    memset(&op, 0, sizeof op);
    op.op = TX_TE_GROUPED_LINEAR;
    op.node = 0;
    op.name = "experts";
    op.attrs = c.attrs;
    op.params = par;
    op.n_params = NP;
    op.extra_inputs = ext;
    op.n_extra_inputs = 1;
    op.params_need_grad = true;
    for (int k = 0; k < TX_TE_MAX_EXTRA; k++) op.channel_from[k] = -1;
    tx_group_desc grp = {.ops = &op, .n_ops = 1, .input_needs_grad = true};
    tx_plan_kernel layout[1] = {{TX_FUSION_NONE, 0, 1}};
    tx_group_run *run = NULL;
    TG_OK(tx_group_forward(&grp, &cfg, layout, 1, &c.x, &run));
    TG_OK(tx_group_backward(run, layout, 1, &c.dy, NULL));
    /* GPU */
    const float one = 1.0f, zero = 0.0f;
    float *dscale[3], *damax[3];
    for (int i = 0; i < 3; i++) {
        dscale[i] = tg_dev_upload(&one, sizeof one);
        damax[i] = tg_dev_upload(&zero, sizeof zero);
    }
    tx_cuda_linear_quant lq;
    lq.x = gpu_q(&plan[0], &cfg, dscale[0], damax[0]);
    lq.w = gpu_q(&plan[1], &cfg, dscale[1], damax[1]);
    lq.dy = gpu_q(&plan[2], &cfg, dscale[2], damax[2]);
    tx_cuda_te_desc d = desc_of(&c, ext, par, &lq);
    node nd;
    node_prepare(&nd, &d);
    assert_true(nd.state_bytes > 0); /* the quantized x and weights are kept */
    check_dequant_scratch(qc, &nd, 64, 96, 128, G4);
    g_env.step = STEP;
    gl_dev g;
    gl_dev_run(&g, &c, &nd);
    bool fp4 = qc->kind == TX_RECIPE_NVFP4;
    double rtol = fp4 ? 0.25 : 0.125, atol = fp4 ? 0.125 : 0.0675;
    char what[96];
    snprintf(what, sizeof what, "grouped_%s y", qc->name);
    ku_expect_close(what, tx_group_output(run), g.y.data, rtol, atol);
    snprintf(what, sizeof what, "grouped_%s dx", qc->name);
    ku_expect_close(what, tx_group_grad_input(run), g.dx.data, rtol, atol);
    for (int i = 0; i < NP; i++) {
        snprintf(what, sizeof what, "grouped_%s %s_%d", qc->name, i < G4 ? "dW" : "dbias", i % G4);
        ku_expect_close(what, tx_group_grad_param(run, 0, i), g.dp[i].data, rtol, atol);
    }
    /* The recipe's tolerance alone would pass a GPU that skipped the
     * quantization; both sides GEMM the same dequantized operands, so they
     * must also agree as two bf16 results of one product do. */
    snprintf(what, sizeof what, "grouped_%s y same operands", qc->name);
    expect_none(what, tx_group_output(run), g.y.data);
    snprintf(what, sizeof what, "grouped_%s dx same operands", qc->name);
    expect_none(what, tx_group_grad_input(run), g.dx.data);
    for (int i = 0; i < G4; i++) {
        snprintf(what, sizeof what, "grouped_%s dW_%d same operands", qc->name, i);
        expect_none(what, tx_group_grad_param(run, 0, i), g.dp[i].data);
    }
    gl_dev_free(&g);
    node_free(&nd);
    for (int i = 0; i < 3; i++) {
        tg_dev_free(dscale[i]);
        tg_dev_free(damax[i]);
    }
    tx_group_run_free(run);
    if (delayed) tx_delayed_free(&ds);
    gl_free(&c);
}

static const qcase qcases[] = {
    {"fp8_current", TX_RECIPE_FP8_CURRENT}, {"fp8_delayed", TX_RECIPE_FP8_DELAYED},
    {"fp8_block", TX_RECIPE_FP8_BLOCK},     {"mxfp8", TX_RECIPE_MXFP8},
    {"nvfp4", TX_RECIPE_NVFP4},
};

/* ---- models/te_moe_block through the public API ---------------------------------- */

static void ok(teexec_status *st, const char *what)
{
    if (st) {
        fprintf(stderr, "%s: %s\n", what, teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static const char *model_path(const char *file)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 1024, "%s/models/te_moe_block/%s", root ? root : ".", file);
    return b;
}

static double rel_l2(const teexec_tensor *a, const teexec_tensor *b)
{
    assert_int_equal(teexec_tensor_dtype(a), TEEXEC_DTYPE_FLOAT);
    assert_int_equal(teexec_tensor_dtype(b), TEEXEC_DTYPE_FLOAT);
    assert_int_equal(teexec_tensor_element_count(a), teexec_tensor_element_count(b));
    const float *x = teexec_tensor_data_const(a), *y = teexec_tensor_data_const(b);
    double num = 0, den = 0;
    for (uint64_t i = 0; i < teexec_tensor_element_count(a); i++) {
        double d = (double)x[i] - (double)y[i];
        num += d * d;
        den += (double)y[i] * (double)y[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static const char *const kInputs[3] = {"x", "split_sizes", "scales"};

static void moe_session(teexec_model *m, teexec_device dev, teexec_tensor *const *in,
                        teexec_tensor **out)
{
    teexec_session_options *o;
    ok(teexec_session_options_create(&o), "options");
    ok(teexec_session_options_set_device(o, dev), "device");
    teexec_session *s;
    ok(teexec_session_create(m, o, &s), "session");
    teexec_session_options_destroy(o);
    const teexec_tensor *xs[3] = {in[0], in[1], in[2]};
    ok(teexec_session_run(s, 3, kInputs, xs, 1, NULL, out), "run");
    teexec_tensor_destroy(*out);
    ok(teexec_session_run(s, 3, kInputs, xs, 1, NULL, out), "run again"); /* graph replay */
    teexec_session_destroy(s);
}

static void test_moe_inference(void **state)
{
    (void)state;
    teexec_model *m;
    ok(teexec_model_load_file(model_path("model.onnx"), NULL, &m), "te_moe_block");
    teexec_tensor *in[3];
    char f[64];
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "inputs/%s.npy", kInputs[i]);
        ok(teexec_tensor_load_file(model_path(f), &in[i]), f);
    }
    teexec_tensor *cpu, *gpu, *want;
    moe_session(m, TEEXEC_DEVICE_CPU, in, &cpu);
    moe_session(m, TEEXEC_DEVICE_CUDA, in, &gpu);
    ok(teexec_tensor_load_file(model_path("expected/y.npy"), &want), "expected y");
    double e = rel_l2(gpu, cpu), ew = rel_l2(gpu, want);
    char detail[160];
    snprintf(detail, sizeof detail, "te_moe_block fp32 inference rel-L2 %.2e vs CPU, %.2e vs expected",
             e, ew);
    fprintf(stderr, "%s\n", detail);
    tg_record("grouped_moe_inference", e <= 1e-5 && ew <= 1e-5, detail);
    assert_true(e <= 1e-5);
    assert_true(ew <= 1e-5);
    teexec_tensor_destroy(cpu);
    teexec_tensor_destroy(gpu);
    teexec_tensor_destroy(want);
    for (int i = 0; i < 3; i++) teexec_tensor_destroy(in[i]);
    teexec_model_destroy(m);
}

static teexec_trainer *moe_trainer(teexec_model *m, teexec_device dev)
{
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    o.lr = 1e-2;
    o.momentum = 0.9;
    o.device = dev;
    teexec_trainer *t;
    ok(teexec_trainer_create(m, &o, &t), "trainer");
    return t;
}

static const teexec_tensor *ds_find(const teexec_dataset *d, const char *name)
{
    for (size_t i = 0; i < teexec_dataset_count(d); i++)
        if (!strcmp(teexec_dataset_name(d, i), name)) return teexec_dataset_tensor(d, i);
    return NULL;
}

static void test_moe_training(void **state)
{
    (void)state;
    teexec_model *m;
    ok(teexec_model_load_file(model_path("model.onnx"), NULL, &m), "te_moe_block");
    teexec_dataset *ds;
    ok(teexec_dataset_load_npz(model_path("train.npz"), &ds), "train.npz");
    const char *names[4] = {"x", "split_sizes", "scales", "target"};
    const teexec_tensor *ts[4];
    for (int i = 0; i < 4; i++) {
        ts[i] = ds_find(ds, names[i]);
        assert_non_null(ts[i]);
    }
    teexec_trainer *cpu = moe_trainer(m, TEEXEC_DEVICE_CPU), *gpu = moe_trainer(m, TEEXEC_DEVICE_CUDA);
    double lerr = 0;
    for (int s = 0; s < 3; s++) {
        double lc = NAN, lg = NAN;
        ok(teexec_trainer_step(cpu, 4, names, ts, &lc), "cpu step");
        ok(teexec_trainer_step(gpu, 4, names, ts, &lg), "gpu step");
        double e = fabs(lg - lc) / fabs(lc);
        if (!(e <= lerr)) lerr = e;
    }
    double eg = 0, ep = 0;
    const char *wg = "-", *wp = "-";
    for (size_t p = 0; p < teexec_trainer_param_count(cpu); p++) {
        const char *name = teexec_trainer_param_name(cpu, p);
        for (int k = 0; k < 2; k++) {
            teexec_tensor *ta, *tb;
            if (k == 0) {
                ok(teexec_trainer_grad(gpu, name, &ta), name);
                ok(teexec_trainer_grad(cpu, name, &tb), name);
            } else {
                ok(teexec_trainer_param(gpu, name, &ta), name);
                ok(teexec_trainer_param(cpu, name, &tb), name);
            }
            double e = rel_l2(ta, tb);
            double *w = k == 0 ? &eg : &ep;
            if (!(e <= *w)) {
                *w = e;
                if (k == 0) wg = name;
                else wp = name;
            }
            teexec_tensor_destroy(ta);
            teexec_tensor_destroy(tb);
        }
    }
    char detail[300];
    snprintf(detail, sizeof detail,
             "te_moe_block 3 SGD steps fp32: loss rel %.1e, grads rel-L2 %.1e (%s), params %.1e (%s)",
             lerr, eg, wg, ep, wp);
    fprintf(stderr, "%s\n", detail);
    bool pass = lerr <= 1e-4 && eg <= 1e-4 && ep <= 1e-4;
    tg_record("grouped_moe_training", pass, detail);
    teexec_trainer_destroy(cpu);
    teexec_trainer_destroy(gpu);
    teexec_dataset_destroy(ds);
    teexec_model_destroy(m);
    assert_true(pass);
}

/* ---- timing ------------------------------------------------------------------- */

static void test_timing(void **state)
{
    (void)state;
    enum { G = 8 };
    const size_t M = 8192, K = 2048, N = 8192;
    int64_t split[G];
    for (int g = 0; g < G; g++) split[g] = (int64_t)M / G;
    int64_t *ds = tg_dev_upload(split, sizeof split);
    size_t mk = M * K * 2, nk = N * K * 2, mn = M * N * 2;
    void *x = tg_dev_alloc(mk), *dy = tg_dev_alloc(mn), *y = tg_dev_alloc(mn), *dx = tg_dev_alloc(mk);
    void *w[G], *dw[G];
    /* 0xA5A5 as bf16 is a small negative number: fine operands for timing */
    for (int g = 0; g < G; g++) {
        w[g] = tg_dev_alloc(nk);
        dw[g] = tg_dev_alloc(nk);
    }
    tx_cuda_grouped_gemm p;
    memset(&p, 0, sizeof p);
    p.groups = G;
    p.split_sizes = ds;
    p.m = M, p.n = N, p.k = K;
    p.a_dt = p.b_dt = p.out_dt = KU_BF16;
    tx_cuda_grouped_gemm f = p, d = p, wg = p;
    f.kind = TX_GG_FPROP, f.a = x, f.out[0] = y;
    d.kind = TX_GG_DGRAD, d.a = dy, d.out[0] = dx;
    wg.kind = TX_GG_WGRAD, wg.a = dy, wg.b[0] = x;
    for (int g = 0; g < G; g++) {
        f.b[g] = d.b[g] = w[g];
        wg.out[g] = dw[g];
    }
    const tx_cuda_grouped_gemm *runs[3] = {&f, &d, &wg};
    const char *names[3] = {"FPROP", "DGRAD", "WGRAD"};
    double flops = 2.0 * (double)M * (double)N * (double)K;
    char detail[400];
    size_t len = 0;
    cudaEvent_t e0, e1;
    assert_int_equal(cudaEventCreate(&e0), cudaSuccess);
    assert_int_equal(cudaEventCreate(&e1), cudaSuccess);
    for (int r = 0; r < 3; r++) {
        TG_OK(tx_cuda_grouped_gemm_run(runs[r], NULL)); /* warm-up */
        enum { ITERS = 5 };
        cudaEventRecord(e0, NULL);
        for (int i = 0; i < ITERS; i++) TG_OK(tx_cuda_grouped_gemm_run(runs[r], NULL));
        cudaEventRecord(e1, NULL);
        tg_sync("timing");
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        ms /= ITERS;
        double tf = flops / (ms * 1e-3) / 1e12;
        len += (size_t)snprintf(detail + len, sizeof detail - len, "%s%s %.3f ms %.1f TFLOP/s",
                                r ? ", " : "", names[r], ms, tf);
    }
    /* for scale: cuBLASLt's dense FPROP of the same FLOPs (one group) */
    tx_gemm_lt *h = NULL;
    void *ws = tg_dev_alloc((size_t)32 << 20);
    if (!tx_gemm_lt_create((size_t)32 << 20, &h)) {
        tx_gemm_desc gd;
        memset(&gd, 0, sizeof gd);
        gd.m = (int64_t)N, gd.n = (int64_t)M, gd.k = (int64_t)K;
        gd.transa = 1;
        gd.a_type = gd.b_type = gd.d_type = KU_BF16;
        gd.alpha = 1.0f;
        teexec_status *st = tx_gemm_lt_run(h, &gd, w[0], x, NULL, y, ws, NULL);
        if (!st) {
            cudaEventRecord(e0, NULL);
            for (int i = 0; i < 5 && !st; i++) st = tx_gemm_lt_run(h, &gd, w[0], x, NULL, y, ws, NULL);
            cudaEventRecord(e1, NULL);
            tg_sync("cublaslt timing");
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            ms /= 5;
            if (!st)
                len += (size_t)snprintf(detail + len, sizeof detail - len,
                                        "; cuBLASLt dense %.3f ms %.1f TFLOP/s", ms,
                                        flops / (ms * 1e-3) / 1e12);
        }
        if (st) teexec_status_destroy(st);
        tx_gemm_lt_destroy(h);
    }
    tg_dev_free(ws);
    fprintf(stderr, "grouped GEMM bf16, 8 groups, 8192 rows, 2048 -> 8192: %s\n", detail);
    tg_record("grouped_gemm_timing_bf16_g8_8192x2048x8192", 1, detail);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    for (int g = 0; g < G; g++) {
        tg_dev_free(w[g]);
        tg_dev_free(dw[g]);
    }
    tg_dev_free(x);
    tg_dev_free(dy);
    tg_dev_free(y);
    tg_dev_free(dx);
    tg_dev_free(ds);
}

/* The node's forward + backward under recipe none (bf16), fp8-current and
 * mxfp8 at 4 experts x 1024 tokens, 2048 -> 2048: each quantized recipe's
 * GEMMs read bf16 dequantized operands on the tensor-core kernel (the
 * scratch check above; before this, FP32 operands on the FP32-FMA kernel
 * took ~10x the bf16 time). Printed and recorded, nothing asserted on
 * speed: TFLOP/s counts the GEMMs only (1 forward, 2 backward), the time
 * includes quantization and dequantization. */
static void test_timing_node_recipes(void **state)
{
    (void)state;
    int64_t xd[3] = {4, 1024, 2048}, yd[3] = {4, 1024, 2048};
    static const int64_t split[G4] = {1024, 1024, 1024, 1024};
    const double flops = 2.0 * 4096.0 * 2048.0 * 2048.0;
    ku_seed(77);
    gl_case c;
    gl_make(&c, KU_BF16, xd, yd, 2048, 2048, split);
    const tx_tensor *ext[1] = {&c.ss}, *par[NP];
    for (int i = 0; i < NP; i++) par[i] = &c.p[i];
    const struct { const char *name; tx_recipe_kind kind; } rs[3] = {
        {"none", TX_RECIPE_NONE},
        {"fp8-current", TX_RECIPE_FP8_CURRENT},
        {"mxfp8", TX_RECIPE_MXFP8}};
    char detail[400];
    size_t len = 0;
    cudaEvent_t e[3];
    for (int i = 0; i < 3; i++) assert_int_equal(cudaEventCreate(&e[i]), cudaSuccess);
    for (int r = 0; r < 3; r++) {
        tx_plan_quant plan[3];
        tx_group_config cfg;
        memset(&cfg, 0, sizeof cfg);
        tx_cuda_linear_quant lq;
        memset(&lq, 0, sizeof lq);
        if (rs[r].kind != TX_RECIPE_NONE) {
            make_plan(plan, rs[r].kind);
            cfg.recipe.kind = rs[r].kind;
            cfg.recipe.compute_dtype = KU_BF16;
            cfg.quant = plan;
            cfg.n_quant = 3;
            cfg.seed = SEED;
            cfg.step = STEP;
            cfg.training = true;
            lq.x = gpu_q(&plan[0], &cfg, NULL, NULL);
            lq.w = gpu_q(&plan[1], &cfg, NULL, NULL);
            lq.dy = gpu_q(&plan[2], &cfg, NULL, NULL);
        }
        tx_cuda_te_desc d = desc_of(&c, ext, par, rs[r].kind != TX_RECIPE_NONE ? &lq : NULL);
        node nd;
        node_prepare(&nd, &d);
        gl_dev g;
        gl_dev_run(&g, &c, &nd); /* warm-up */
        enum { ITERS = 5 };
        float fwd = 0, step = 0;
        /* forward + backward, then the forward alone */
        cudaEventRecord(e[0], NULL);
        for (int it = 0; it < ITERS; it++) gl_dev_step(&g, &c, &nd);
        cudaEventRecord(e[2], NULL);
        tg_sync("node timing");
        cudaEventElapsedTime(&step, e[0], e[2]);
        /* forward alone */
        {
            const tx_tensor *gext[1] = {&g.ss}, *gpar[NP];
            for (int i = 0; i < NP; i++) gpar[i] = &g.p[i];
            tx_te_fwd_args a;
            memset(&a, 0, sizeof a);
            a.op = TX_TE_GROUPED_LINEAR;
            a.attrs = c.attrs;
            a.input = &g.x;
            a.extra_inputs = gext;
            a.n_extra_inputs = 1;
            a.params = gpar;
            a.n_params = NP;
            a.output = &g.y;
            a.training = true;
            cudaEventRecord(e[0], NULL);
            for (int it = 0; it < ITERS; it++)
                TG_OK(nd.impl->forward(nd.priv, &a, nd.state, nd.scratch, &g_env));
            cudaEventRecord(e[1], NULL);
            tg_sync("node forward timing");
            cudaEventElapsedTime(&fwd, e[0], e[1]);
        }
        fwd /= ITERS;
        step /= ITERS;
        len += (size_t)snprintf(detail + len, sizeof detail - len,
                                "%s%s fwd %.3f ms %.0f TFLOP/s, fwd+bwd %.3f ms %.0f TFLOP/s",
                                r ? "; " : "", rs[r].name, fwd, flops / (fwd * 1e-3) / 1e12, step,
                                3 * flops / (step * 1e-3) / 1e12);
        gl_dev_free(&g);
        node_free(&nd);
    }
    for (int i = 0; i < 3; i++) cudaEventDestroy(e[i]);
    fprintf(stderr, "GroupedLinear node, 4 x 1024 tokens, 2048 -> 2048: %s\n", detail);
    tg_record("grouped_node_timing_recipes", 1, detail);
    gl_free(&c);
}

int main(void)
{
    tg_require_gpu("test_gpu_grouped");
    memset(&g_env, 0, sizeof g_env);
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    g_env.sm = major * 10 + minor;
    g_env.deterministic = true;
    enum { NK = sizeof kcases / sizeof kcases[0], NQ = sizeof qcases / sizeof qcases[0] };
    enum { NA = sizeof acases / sizeof acases[0] };
    struct CMUnitTest tests[NK + NA + NQ + 6];
    static char names[NK + NA + NQ][64];
    int n = 0, k = 0;
    for (int i = 0; i < NK; i++, k++) {
        snprintf(names[k], sizeof names[k], "kernel_%s", kcases[i].name);
        tests[n++] = (struct CMUnitTest){names[k], run_kernel_case, NULL, NULL, (void *)&kcases[i]};
    }
    for (int i = 0; i < NA; i++, k++) {
        snprintf(names[k], sizeof names[k], "alpha_%s", acases[i].name);
        tests[n++] = (struct CMUnitTest){names[k], run_alpha_case, NULL, NULL, (void *)&acases[i]};
    }
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_none_fp32);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_none_bf16);
    for (int i = 0; i < NQ; i++, k++) {
        snprintf(names[k], sizeof names[k], "grouped_%s", qcases[i].name);
        tests[n++] = (struct CMUnitTest){names[k], run_recipe, NULL, NULL, (void *)&qcases[i]};
    }
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_moe_inference);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_moe_training);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_timing);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_timing_node_recipes);
    /* one case at a time (a device fault is sticky for the process) */
    const char *only = getenv("TG_GROUPED_FILTER");
    if (only && *only) cmocka_set_test_filter(only);
    return _cmocka_run_group_tests("test_gpu_grouped", tests, (size_t)n, NULL, NULL);
}
