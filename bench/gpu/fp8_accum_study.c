/* fp8_accum_study.c - how exactly the H200's native FP8 GEMM sums, and what
 * that does to the next per-tensor FP8 quantization.
 *
 * The CPU runs an FP8 recipe as FP32 GEMMs on the dequantized operands; the
 * CUDA backend runs per-tensor FP8 (fp8-delayed, fp8-current) natively
 * through cuBLASLt, fprop with fast accumulation as Transformer Engine does,
 * dgrad and wgrad with split accumulation. This program measures, for random
 * E4M3 operands (every finite byte equally likely, so the products are not
 * small integers that any accumulator sums exactly) and K from 64 to 4096:
 *
 *  - the rel-L2 and the largest relative error (|err| / sum |a||b|) of the
 *    native result against an FP64 sum, with fast accumulation on and off,
 *    next to a plain FP32 sum in k order (what an FP32 GEMM on dequantized
 *    operands gives, up to its order);
 *  - the share of output elements whose E4M3 byte under current scaling
 *    (scale 448 / amax of the FP64 result) differs from the FP64 result's:
 *    each such flip moves that element of the next GEMM's input by one E4M3
 *    step (6-12 %), which is how a small accumulation difference grows
 *    through a deep model's re-quantizations.
 *
 * Prints one line per (K, mode); exit 1 on a CUDA or library error.
 * Usage: fp8_accum_study [M N] (default 256 256) */
#include "base/numfmt.h"
#include "kernels/cuda/gemm_lt.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "fp8_accum_study"
#include "bench/gpu/bench_die.h"

static uint64_t rng = 12345;
static uint8_t random_e4m3(void)
{
    for (;;) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        const uint8_t b = (uint8_t)(rng >> 56);
        if ((b & 0x7f) != 0x7f) return b; /* not NaN */
    }
}

static void *upload(const void *h, size_t bytes)
{
    void *d = NULL;
    die_cuda(cudaMalloc(&d, bytes), "cudaMalloc");
    die_cuda(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "upload");
    return d;
}

int main(int argc, char **argv)
{
    const int64_t m = argc > 2 ? atoll(argv[1]) : 256, n = argc > 2 ? atoll(argv[2]) : 256;
    static const int64_t ks[] = {64, 256, 768, 1024, 3072, 4096};
    tx_gemm_lt *h = NULL;
    die_status(tx_gemm_lt_create(32u << 20, &h), "tx_gemm_lt_create");
    void *ws = NULL;
    die_cuda(cudaMalloc(&ws, tx_gemm_lt_workspace_bytes(h)), "workspace");
    const float one = 1.0f;
    float *d_one = upload(&one, sizeof one);
    printf("M=%lld N=%lld, E4M3 x E4M3 -> FP32, TN, scale_inv 1\n", (long long)m, (long long)n);
    printf("%6s %-14s %12s %14s %12s\n", "K", "sum", "rel-L2", "max rel err", "E4M3 flips");
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int64_t k = ks[ki];
        uint8_t *a = malloc((size_t)(m * k)), *b = malloc((size_t)(n * k));
        double *ref = malloc(sizeof(double) * (size_t)(m * n));
        double *mag = malloc(sizeof(double) * (size_t)(m * n));
        float *f32 = malloc(sizeof(float) * (size_t)(m * n));
        float *got = malloc(sizeof(float) * (size_t)(m * n));
        if (!a || !b || !ref || !mag || !f32 || !got) {
            fprintf(stderr, "fp8_accum_study: out of host memory\n");
            return 1;
        }
        for (int64_t i = 0; i < m * k; i++) a[i] = random_e4m3();
        for (int64_t i = 0; i < n * k; i++) b[i] = random_e4m3();
        /* column-major D[j*m + i] = sum_kk A[i*k + kk] * B[j*k + kk] (TN) */
        double amax = 0;
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < m; i++) {
                double s = 0, s_abs = 0;
                float s32 = 0;
                for (int64_t kk = 0; kk < k; kk++) {
                    const double p = (double)tx_e4m3fn_to_f32(a[i * k + kk]) *
                                     (double)tx_e4m3fn_to_f32(b[j * k + kk]);
                    s += p;
                    s_abs += fabs(p);
                    s32 += (float)p; /* products of two E4M3 are exact in FP32 */
                }
                ref[j * m + i] = s;
                mag[j * m + i] = s_abs;
                f32[j * m + i] = s32;
                amax = fmax(amax, fabs(s));
            }
        const float scale = (float)(448.0 / amax);
        void *da = upload(a, (size_t)(m * k)), *db = upload(b, (size_t)(n * k));
        float *dd = NULL;
        die_cuda(cudaMalloc((void **)&dd, sizeof(float) * (size_t)(m * n)), "cudaMalloc");
        for (int mode = 0; mode < 3; mode++) {
            const char *name = mode == 0 ? "fp32 k-order" : mode == 1 ? "native split" : "native fast";
            const float *res = f32;
            if (mode > 0) {
                tx_gemm_desc g;
                memset(&g, 0, sizeof g);
                g.m = m;
                g.n = n;
                g.k = k;
                g.transa = 1;
                g.a_type = g.b_type = TEEXEC_DTYPE_FLOAT8E4M3FN;
                g.d_type = TEEXEC_DTYPE_FLOAT;
                g.alpha = 1.0f;
                g.a_scale_mode = g.b_scale_mode = TX_GEMM_SCALE_TENSOR;
                g.a_scale_inv = d_one;
                g.b_scale_inv = d_one;
                g.fast_accum = mode == 2;
                die_status(tx_gemm_lt_run(h, &g, da, db, NULL, dd, ws, NULL), name);
                die_cuda(cudaMemcpy(got, dd, sizeof(float) * (size_t)(m * n), cudaMemcpyDeviceToHost),
                         "download");
                res = got;
            }
            double e2 = 0, r2 = 0, worst = 0;
            size_t flips = 0;
            for (int64_t i = 0; i < m * n; i++) {
                const double e = (double)res[i] - ref[i];
                e2 += e * e;
                r2 += ref[i] * ref[i];
                if (mag[i] > 0) worst = fmax(worst, fabs(e) / mag[i]);
                flips += tx_f32_to_e4m3fn((float)ref[i] * scale, 1) !=
                         tx_f32_to_e4m3fn(res[i] * scale, 1);
            }
            printf("%6lld %-14s %12.3g %14.3g %11.4f%%\n", (long long)k, name, sqrt(e2 / r2), worst,
                   100.0 * (double)flips / (double)(m * n));
        }
        cudaFree(da);
        cudaFree(db);
        cudaFree(dd);
        free(a);
        free(b);
        free(ref);
        free(mag);
        free(f32);
        free(got);
    }
    cudaFree(ws);
    cudaFree(d_one);
    tx_gemm_lt_destroy(h);
    return 0;
}
