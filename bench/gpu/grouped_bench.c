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
 * Prints a markdown table; exit 1 on any CUDA or library error, 2 when the
 * two kernels disagree by more than 2^-6 of the largest value. */
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/grouped_gemm.h"
#include "base/half.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { G = 8 };

static void die_cuda(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "grouped_bench: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static void die_status(teexec_status *st, const char *what)
{
    if (st) {
        fprintf(stderr, "grouped_bench: %s: %s\n", what, teexec_status_message(st));
        teexec_status_destroy(st);
        exit(1);
    }
}

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

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
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
