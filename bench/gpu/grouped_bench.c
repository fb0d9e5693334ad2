/* grouped_bench.c - TFLOP/s of GroupedLinear's grouped GEMMs
 * (kernels/cuda/grouped_gemm.h) at MoE shapes, next to cuBLASLt's rate for
 * one dense GEMM of the same total FLOPs (M = all tokens, one weight).
 *
 * Shapes: 8 experts over 8192 tokens, hidden 4096, ffn 14336: the expert
 * fc1 (4096 -> 14336) and fc2 (14336 -> 4096), each FPROP (y = x W^T),
 * DGRAD (dx = dy W) and WGRAD (dW = dy^T x), with balanced splits (1024
 * each) and uneven ones (including an empty expert). The mma.sync path
 * (the default) is timed everywhere; the general WMMA kernel on fc1
 * balanced for comparison, and its outputs are checked against the mma
 * path's (max |difference| / max |value|, which bf16 rounding keeps near
 * 2^-8). Each entry: 2 warm-up calls, then the mean of N calls between two
 * CUDA events (N = 10, 3 for the slow kernel).
 *
 * Usage: grouped_bench [--quick]   (--quick: fc1 balanced only)
 *        grouped_bench --recipe fp8-current|mxfp8
 * Prints a markdown table; exit 1 on any CUDA or library error, 2 when the
 * two kernels disagree by more than 2^-6 of the largest value.
 *
 * --recipe: the quantized GroupedLinear's GEMMs as exec/cuda/te_cuda_grouped.c
 * issues them, balanced splits, fc1 and fc2: each GEMM with the
 * dequantization of its operands (FPROP x rowwise + every weight rowwise,
 * DGRAD dy rowwise + every weight columnwise, WGRAD dy and x columnwise),
 * "before" = FP32 dequantization (tx_cuda_dequantize) + the FP32-FMA
 * kernel (the node until this change), "after" = dequantization into bf16
 * (tx_cuda_dequantize_to; FP8 per-tensor with scale_inv 1, the scales in the
 * GEMM's device alpha) + the mma.sync kernel; also the after-GEMM alone.
 * The quantized bytes are random codes (no NaN) with random scales: the
 * time does not depend on the values. The two outputs are compared (max
 * |difference| / max |value|; both round to bf16 once, so near 2^-8). */
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/grouped_gemm.h"
#include "base/half.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { G = 8 };

#define BENCH_NAME "grouped_bench"
#include "bench/gpu/bench_die.h"

static uint64_t rng = 2026;
static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

/* n bf16 values uniform in (-1, 1): one random block of 2^22 values,
 * uploaded again and again from a different start each tensor (host time
 * would otherwise dominate the run). */
static void *dev_random_bf16(size_t n)
{
    enum { CHUNK = 1 << 22 };
    static uint16_t *h;
    static size_t shift;
    if (!h) {
        h = malloc((size_t)CHUNK * 2 * 2);
        if (!h) {
            fprintf(stderr, "grouped_bench: out of host memory\n");
            exit(1);
        }
        for (size_t i = 0; i < CHUNK; i++)
            h[i] = h[i + CHUNK] = tx_f32_to_bf16(((float)(rnd() & 0xffffff) / 8388608.0f) - 1.0f);
    }
    shift = (shift + 77777) % CHUNK;
    void *d = NULL;
    die_cuda(cudaMalloc(&d, n * 2), "cudaMalloc");
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t c = n - at < CHUNK ? n - at : CHUNK;
        die_cuda(cudaMemcpy((uint16_t *)d + at, h + shift, c * 2, cudaMemcpyHostToDevice), "upload");
    }
    return d;
}

static void *dev_zero(size_t bytes)
{
    void *d = NULL;
    die_cuda(cudaMalloc(&d, bytes), "cudaMalloc");
    die_cuda(cudaMemset(d, 0, bytes), "cudaMemset");
    return d;
}

static cudaEvent_t e0, e1;

static double time_grouped(const tx_cuda_grouped_gemm *p, int iters)
{
    for (int i = 0; i < 2; i++) die_status(tx_cuda_grouped_gemm_run(p, NULL), "grouped GEMM");
    die_cuda(cudaEventRecord(e0, NULL), "event");
    for (int i = 0; i < iters; i++) die_status(tx_cuda_grouped_gemm_run(p, NULL), "grouped GEMM");
    die_cuda(cudaEventRecord(e1, NULL), "event");
    die_cuda(cudaEventSynchronize(e1), "grouped GEMM run");
    float ms = 0;
    die_cuda(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    return ms / iters;
}

static double time_dense(tx_gemm_lt *h, const tx_gemm_desc *d, const void *A, const void *B,
                         void *D, void *ws)
{
    for (int i = 0; i < 2; i++) die_status(tx_gemm_lt_run(h, d, A, B, NULL, D, ws, NULL), "cuBLASLt");
    die_cuda(cudaEventRecord(e0, NULL), "event");
    for (int i = 0; i < 10; i++) die_status(tx_gemm_lt_run(h, d, A, B, NULL, D, ws, NULL), "cuBLASLt");
    die_cuda(cudaEventRecord(e1, NULL), "event");
    die_cuda(cudaEventSynchronize(e1), "cuBLASLt run");
    float ms = 0;
    die_cuda(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    return ms / 10;
}

/* max |a - b| / max |b| over n bf16 values */
static double rel_diff(const void *a, const void *b, size_t n)
{
    uint16_t *ha = malloc(n * 2), *hb = malloc(n * 2);
    if (!ha || !hb) {
        fprintf(stderr, "grouped_bench: out of host memory\n");
        exit(1);
    }
    die_cuda(cudaMemcpy(ha, a, n * 2, cudaMemcpyDeviceToHost), "download");
    die_cuda(cudaMemcpy(hb, b, n * 2, cudaMemcpyDeviceToHost), "download");
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double x = tx_bf16_to_f32(ha[i]), y = tx_bf16_to_f32(hb[i]);
        double d = fabs(x - y);
        if (!(d <= md)) md = d; /* NaN propagates */
        if (fabs(y) > mb) mb = fabs(y);
    }
    free(ha);
    free(hb);
    return mb > 0 ? md / mb : md;
}

/* ---- --recipe ------------------------------------------------------------ */

/* n random FP8 E4M3 codes (no NaN) or E8M0 scales (2^-5 .. 2^4): one
 * random block per kind, uploaded again and again from a shifting start
 * (as dev_random_bf16: host time would dominate). */
static void *dev_random_bytes(size_t n, int e8m0)
{
    enum { CHUNK = 1 << 24 };
    static uint8_t *h[2];
    static size_t shift;
    if (!h[e8m0]) {
        h[e8m0] = malloc((size_t)CHUNK * 2);
        if (!h[e8m0]) {
            fprintf(stderr, "grouped_bench: out of host memory\n");
            exit(1);
        }
        for (size_t i = 0; i < CHUNK; i++) {
            uint8_t b = (uint8_t)(rnd() >> 8);
            if (e8m0) b = (uint8_t)(122 + b % 10);
            else if ((b & 0x7f) == 0x7f) b ^= 1;
            h[e8m0][i] = h[e8m0][i + CHUNK] = b;
        }
    }
    shift = (shift + 77777) % CHUNK;
    void *d = NULL;
    die_cuda(cudaMalloc(&d, n ? n : 1), "cudaMalloc");
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t c = n - at < CHUNK ? n - at : CHUNK;
        die_cuda(cudaMemcpy((uint8_t *)d + at, h[e8m0] + shift, c, cudaMemcpyHostToDevice),
                 "upload");
    }
    return d;
}

/* One quantized tensor [rows, cols], both usages (FP8 per-tensor: the
 * columnwise data stored transposed; MXFP8: in place, scales per 32 rows). */
typedef struct qt {
    tx_cuda_dequant_args row, col;
} qt;

static qt make_qt(int mx, size_t rows, size_t cols, const float *scale_inv)
{
    qt t;
    memset(&t, 0, sizeof t);
    tx_cuda_dequant_args a;
    memset(&a, 0, sizeof a);
    a.kind = mx ? TX_CUDA_Q_MXFP8 : TX_CUDA_Q_FP8_TENSOR;
    a.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
    a.rows = rows, a.cols = cols;
    a.scale_inv = mx ? NULL : scale_inv;
    t.row = t.col = a;
    t.row.data = dev_random_bytes(rows * cols, 0);
    t.col.data = dev_random_bytes(rows * cols, 0);
    t.col.columnwise = 1;
    if (mx) {
        t.row.scales = dev_random_bytes(rows * cols / 32, 1);
        t.row.scale_cols = cols / 32;
        t.col.scales = dev_random_bytes(rows / 32 * cols, 1);
        t.col.scale_cols = cols;
    }
    return t;
}

static void free_qt(qt *t)
{
    cudaFree((void *)t->row.data);
    cudaFree((void *)t->col.data);
    cudaFree((void *)t->row.scales);
    cudaFree((void *)t->col.scales);
}

/* One GEMM as the node runs it: its operands' dequantizations, then the
 * grouped GEMM. after: bf16 + mma; else FP32 + FMA. */
typedef struct qgemm {
    tx_cuda_grouped_gemm gg;
    const tx_cuda_dequant_args *src[1 + G]; /* A, then B (one for WGRAD, G otherwise) */
    void *dst[1 + G];
    int n_src;
    int after;
    const float *one; /* device 1.0: FP8 per-tensor scale_inv with the scale factored out */
} qgemm;

static void run_qgemm(const qgemm *q)
{
    for (int i = 0; i < q->n_src; i++) {
        tx_cuda_dequant_args a = *q->src[i];
        if (q->after) {
            if (a.kind == TX_CUDA_Q_FP8_TENSOR) a.scale_inv = q->one;
            die_status(tx_cuda_dequantize_to(&a, 0, TEEXEC_DTYPE_BFLOAT16, q->dst[i], NULL),
                       "dequantize_to");
        } else {
            a.out = q->dst[i];
            die_status(tx_cuda_dequantize(&a, NULL), "dequantize");
        }
    }
    die_status(tx_cuda_grouped_gemm_run(&q->gg, NULL), "grouped GEMM");
}

static double time_qgemm(const qgemm *q, int iters, int gemm_only)
{
    run_qgemm(q); /* one warm-up call */
    die_cuda(cudaEventRecord(e0, NULL), "event");
    for (int i = 0; i < iters; i++) {
        if (gemm_only) die_status(tx_cuda_grouped_gemm_run(&q->gg, NULL), "grouped GEMM");
        else run_qgemm(q);
    }
    die_cuda(cudaEventRecord(e1, NULL), "event");
    die_cuda(cudaEventSynchronize(e1), "grouped GEMM run");
    float ms = 0;
    die_cuda(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    return ms / iters;
}

static int bench_recipe(const char *recipe)
{
    const int mx = !strcmp(recipe, "mxfp8");
    if (!mx && strcmp(recipe, "fp8-current")) {
        fprintf(stderr, "grouped_bench: --recipe takes fp8-current or mxfp8\n");
        return 1;
    }
    const size_t M = 8192, H = 4096, F = 14336;
    const int64_t balanced[G] = {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024};
    int64_t *ds = NULL;
    die_cuda(cudaMalloc((void **)&ds, sizeof balanced), "cudaMalloc");
    die_cuda(cudaMemcpy(ds, balanced, sizeof balanced, cudaMemcpyHostToDevice), "upload");
    /* scale_inv of x, every weight, dy (FP8 per-tensor), then 1.0 */
    float hs[G + 3];
    hs[0] = 0.0123f, hs[G + 1] = 0.00071f, hs[G + 2] = 1.0f;
    for (int g = 0; g < G; g++) hs[1 + g] = 0.0021f * (float)(g + 1);
    float *dsc = NULL;
    die_cuda(cudaMalloc((void **)&dsc, sizeof hs), "cudaMalloc");
    die_cuda(cudaMemcpy(dsc, hs, sizeof hs, cudaMemcpyHostToDevice), "upload");
    printf("recipe %s, 8 experts x 1024 tokens; ms per GEMM including its operands' "
           "dequantization\n\n", recipe);
    printf("| shape | GEMM | before: FP32 dequant + FMA ms | TFLOP/s | "
           "after: bf16 dequant + mma ms "
           "| TFLOP/s | speed-up | after GEMM alone ms | TFLOP/s | max rel diff |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (int shape = 0; shape < 2; shape++) {
        const size_t K = shape ? F : H, N = shape ? H : F;
        qt x = make_qt(mx, M, K, dsc), dy = make_qt(mx, M, N, dsc + G + 1), w[G];
        for (int g = 0; g < G; g++) w[g] = make_qt(mx, N, K, dsc + 1 + g);
        /* dequantized operands: FP32 sized (bf16 uses the first half) */
        void *xd = dev_zero(M * K * 4), *dyd = dev_zero(M * N * 4), *wd[G];
        for (int g = 0; g < G; g++) wd[g] = dev_zero(N * K * 4);
        void *out[2][G];
        size_t out_n[3] = {M * N, M * K, N * K};
        const char *names[3] = {"FPROP", "DGRAD", "WGRAD"};
        double flops = 2.0 * (double)M * (double)N * (double)K;
        for (int r = 0; r < 3; r++) {
            int n_out = r == 2 ? G : 1;
            for (int v = 0; v < 2; v++)
                for (int i = 0; i < n_out; i++) out[v][i] = dev_zero(out_n[r] * 2);
            qgemm q[2];
            for (int v = 0; v < 2; v++) {
                qgemm *p = &q[v];
                memset(p, 0, sizeof *p);
                p->after = v;
                p->one = dsc + G + 2;
                tx_cuda_grouped_gemm *gg = &p->gg;
                gg->kind = r == 0 ? TX_GG_FPROP : r == 1 ? TX_GG_DGRAD : TX_GG_WGRAD;
                gg->groups = G;
                gg->split_sizes = ds;
                gg->m = M, gg->n = N, gg->k = K;
                gg->a_dt = gg->b_dt = v ? TEEXEC_DTYPE_BFLOAT16 : TEEXEC_DTYPE_FLOAT;
                gg->out_dt = TEEXEC_DTYPE_BFLOAT16;
                for (int i = 0; i < n_out; i++) gg->out[i] = out[v][i];
                const qt *A = r == 0 ? &x : &dy;
                p->src[0] = r == 2 ? &A->col : &A->row;
                p->dst[0] = r == 0 ? xd : dyd;
                gg->a = p->dst[0];
                if (v && !mx) gg->alpha_a = A->row.scale_inv;
                if (r == 2) {
                    p->src[1] = &x.col;
                    p->dst[1] = xd;
                    gg->b[0] = xd;
                    if (v && !mx) gg->alpha_b[0] = x.row.scale_inv;
                    p->n_src = 2;
                } else {
                    for (int g = 0; g < G; g++) {
                        p->src[1 + g] = r == 0 ? &w[g].row : &w[g].col;
                        p->dst[1 + g] = wd[g];
                        gg->b[g] = wd[g];
                        if (v && !mx) gg->alpha_b[g] = w[g].row.scale_inv;
                    }
                    p->n_src = 1 + G;
                }
            }
            if (tx_cuda_grouped_gemm_uses_mma(&q[0].gg) ||
                !tx_cuda_grouped_gemm_uses_mma(&q[1].gg)) {
                fprintf(stderr, "grouped_bench: unexpected kernel selection\n");
                return 1;
            }
            /* before (the FP32 path is slow: few calls), then after */
            double ms0 = time_qgemm(&q[0], 2, 0);
            double rd = 0;
            {
                /* the before output is in out[0]; after's run fills out[1] */
                run_qgemm(&q[1]);
                die_cuda(cudaDeviceSynchronize(), "sync");
                for (int i = 0; i < n_out; i++) {
                    double e = rel_diff(out[1][i], out[0][i], out_n[r]);
                    if (!(e <= rd)) rd = e;
                }
                if (!(rd <= 1.0 / 64)) bad = 1;
            }
            double ms1 = time_qgemm(&q[1], 10, 0);
            double msg = time_qgemm(&q[1], 10, 1);
            printf("| %s %zux%zu->%zu | %s | %.3f | %.1f | %.3f | %.1f | %.1fx | %.3f | %.1f "
                   "| %.2e |\n",
                   shape ? "fc2" : "fc1", M, K, N, names[r], ms0, flops / (ms0 * 1e-3) / 1e12, ms1,
                   flops / (ms1 * 1e-3) / 1e12, ms0 / ms1, msg, flops / (msg * 1e-3) / 1e12, rd);
            fflush(stdout);
            for (int v = 0; v < 2; v++)
                for (int i = 0; i < n_out; i++) cudaFree(out[v][i]);
        }
        free_qt(&x);
        free_qt(&dy);
        for (int g = 0; g < G; g++) {
            free_qt(&w[g]);
            cudaFree(wd[g]);
        }
        cudaFree(xd);
        cudaFree(dyd);
    }
    cudaFree(ds);
    cudaFree(dsc);
    if (bad) fprintf(stderr, "grouped_bench: before and after disagree\n");
    return bad ? 2 : 0;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 2 && !strcmp(argv[1], "--recipe")) {
        die_cuda(cudaEventCreate(&e0), "event");
        die_cuda(cudaEventCreate(&e1), "event");
        return bench_recipe(argv[2]);
    }
    const size_t M = 8192, H = 4096, F = 14336;
    const int64_t balanced[G] = {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024};
    const int64_t uneven[G] = {1536, 512, 1024, 0, 2048, 1024, 777, 1271};
    die_cuda(cudaEventCreate(&e0), "event");
    die_cuda(cudaEventCreate(&e1), "event");
    int64_t *ds_bal = NULL, *ds_unev = NULL;
    die_cuda(cudaMalloc((void **)&ds_bal, sizeof balanced), "cudaMalloc");
    die_cuda(cudaMalloc((void **)&ds_unev, sizeof uneven), "cudaMalloc");
    die_cuda(cudaMemcpy(ds_bal, balanced, sizeof balanced, cudaMemcpyHostToDevice), "upload");
    die_cuda(cudaMemcpy(ds_unev, uneven, sizeof uneven, cudaMemcpyHostToDevice), "upload");
    tx_gemm_lt *lt = NULL;
    die_status(tx_gemm_lt_create((size_t)32 << 20, &lt), "cuBLASLt handle");
    void *ws = dev_zero((size_t)32 << 20);
    struct cudaDeviceProp prop;
    die_cuda(cudaGetDeviceProperties(&prop, 0), "device properties");
    printf("device: %s (sm_%d%d, %d SMs)\n\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount);
    printf("| shape | splits | GEMM | grouped mma ms | TFLOP/s | cuBLASLt dense ms | TFLOP/s | "
           "ratio | general kernel TFLOP/s | max rel diff vs general |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (int shape = 0; shape < 2; shape++) {
        const size_t K = shape ? F : H, N = shape ? H : F; /* fc1: H -> F; fc2: F -> H */
        void *x = dev_random_bf16(M * K), *dy = dev_random_bf16(M * N);
        void *w[G], *dw[G];
        for (int g = 0; g < G; g++) {
            w[g] = dev_random_bf16(N * K);
            dw[g] = dev_zero(N * K * 2);
        }
        void *y = dev_zero(M * N * 2), *dx = dev_zero(M * K * 2);
        for (int sp = 0; sp < 2; sp++) {
            if (quick && (shape || sp)) continue;
            tx_cuda_grouped_gemm base;
            memset(&base, 0, sizeof base);
            base.groups = G;
            base.split_sizes = sp ? ds_unev : ds_bal;
            base.m = M, base.n = N, base.k = K;
            base.a_dt = base.b_dt = base.out_dt = TEEXEC_DTYPE_BFLOAT16;
            tx_cuda_grouped_gemm run[3] = {base, base, base};
            run[0].kind = TX_GG_FPROP, run[0].a = x, run[0].out[0] = y;
            run[1].kind = TX_GG_DGRAD, run[1].a = dy, run[1].out[0] = dx;
            run[2].kind = TX_GG_WGRAD, run[2].a = dy, run[2].b[0] = x;
            for (int g = 0; g < G; g++) {
                run[0].b[g] = run[1].b[g] = w[g];
                run[2].out[g] = dw[g];
            }
            /* the dense GEMM of the same FLOPs, cuBLAS column-major terms */
            tx_gemm_desc dd[3];
            memset(dd, 0, sizeof dd);
            for (int r = 0; r < 3; r++) {
                dd[r].a_type = dd[r].b_type = dd[r].d_type = TEEXEC_DTYPE_BFLOAT16;
                dd[r].alpha = 1.0f;
            }
            dd[0].m = (int64_t)N, dd[0].n = (int64_t)M, dd[0].k = (int64_t)K, dd[0].transa = 1;
            dd[1].m = (int64_t)K, dd[1].n = (int64_t)M, dd[1].k = (int64_t)N;
            dd[2].m = (int64_t)K, dd[2].n = (int64_t)N, dd[2].k = (int64_t)M, dd[2].transb = 1;
            const void *dA[3] = {w[0], w[0], x}, *dB[3] = {x, dy, dy};
            void *dD[3] = {y, dx, dw[0]};
            const char *names[3] = {"FPROP", "DGRAD", "WGRAD"};
            double flops = 2.0 * (double)M * (double)N * (double)K;
            for (int r = 0; r < 3; r++) {
                double ms = time_grouped(&run[r], 10);
                double dms = time_dense(lt, &dd[r], dA[r], dB[r], dD[r], ws);
                char gen[64] = "-", diff[64] = "-";
                if (!shape && !sp) {
                    /* the general kernel into separate outputs, then compare */
                    tx_cuda_grouped_gemm gp = run[r];
                    gp.force_general = 1;
                    size_t n_out = r == 0 ? M * N : r == 1 ? M * K : N * K;
                    void *o2[G] = {0};
                    int n_o = r == 2 ? G : 1;
                    for (int i = 0; i < n_o; i++) gp.out[i] = o2[i] = dev_zero(n_out * 2);
                    double gms = time_grouped(&gp, 3);
                    snprintf(gen, sizeof gen, "%.1f", flops / (gms * 1e-3) / 1e12);
                    die_status(tx_cuda_grouped_gemm_run(&run[r], NULL), "grouped GEMM");
                    die_cuda(cudaDeviceSynchronize(), "sync");
                    double worst = 0;
                    for (int i = 0; i < n_o; i++) {
                        double e = rel_diff(run[r].out[i], o2[i], n_out);
                        if (!(e <= worst)) worst = e;
                        cudaFree(o2[i]);
                    }
                    snprintf(diff, sizeof diff, "%.2e", worst);
                    if (!(worst <= 1.0 / 64)) bad = 1;
                }
                printf("| %s %zux%zu->%zu | %s | %s | %.3f | %.1f | %.3f | %.1f | %.2f | %s | %s |\n",
                       shape ? "fc2" : "fc1", M, K, N, sp ? "uneven" : "8x1024", names[r], ms,
                       flops / (ms * 1e-3) / 1e12, dms, flops / (dms * 1e-3) / 1e12, dms / ms, gen,
                       diff);
                fflush(stdout);
            }
        }
        for (int g = 0; g < G; g++) {
            cudaFree(w[g]);
            cudaFree(dw[g]);
        }
        cudaFree(x);
        cudaFree(dy);
        cudaFree(y);
        cudaFree(dx);
    }
    printf("\nuneven splits: 1536 512 1024 0 2048 1024 777 1271 (FLOPs counted over all 8192 "
           "rows; ratio = cuBLASLt ms / grouped ms)\n");
    tx_gemm_lt_destroy(lt);
    cudaFree(ws);
    cudaFree(ds_bal);
    cudaFree(ds_unev);
    if (bad) fprintf(stderr, "grouped_bench: the mma and general kernels disagree\n");
    return bad ? 2 : 0;
}
