/* gemm_rate.c - TFLOP/s of the cuBLASLt GEMM layer (kernels/cuda/gemm_lt.h)
 * at training-size shapes: BF16 (FP32 accumulation), FP8 E4M3 per-tensor
 * with fast accumulation (fprop) and split accumulation (dgrad/wgrad), FP8
 * block scaling (1x128 x 128x128, where native), and the MXFP8 emulation
 * (dequantize + convert + BF16 GEMM, gemm_emulate.h) as the CUDA backend
 * would run it on Hopper.
 *
 * Shapes are row-major M x N x K (Y[M,N] = X[M,K] W[N,K]^T, the "TN" GEMM
 * with m = N, n = M, k = K); FLOPs = 2MNK. Inputs are random finite values
 * (not constants, which flatter the tensor cores' power draw). Each entry:
 * 3 warm-up calls, then the median of 20 calls timed with CUDA events.
 *
 * Usage: gemm_rate [--quick] [--shape MxNxK]...   (--quick: the first shape
 * only; --shape, up to 8 times: these shapes instead of the defaults)
 * Prints one line per entry; exit 1 on any CUDA or library error. */
#include "kernels/cuda/gemm_emulate.h"
#include "kernels/cuda/gemm_lt.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 20
#define WARMUP 3

#define BENCH_NAME "gemm_rate"
#include "bench/gpu/bench_die.h"

static uint64_t rng = 12345;
static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

/* Random finite bytes for the dtype: bf16 in (-2, 2), FP8 with the top
 * exponent bit cleared (no NaN, |x| < 1), E8M0 scales near 2^0. */
static void *dev_random(size_t n, int kind)
{
    const size_t chunk = (size_t)1 << 24;
    unsigned char *h = malloc(chunk);
    void *d = NULL;
    if (!h) {
        fprintf(stderr, "gemm_rate: out of host memory\n");
        exit(1);
    }
    die_cuda(cudaMalloc(&d, n ? n : 16), "cudaMalloc");
    for (size_t off = 0; off < n; off += chunk) {
        const size_t len = n - off < chunk ? n - off : chunk;
        for (size_t i = 0; i < len; i++) {
            uint32_t r = rnd();
            switch (kind) {
            case 0: h[i] = (i & 1) ? (unsigned char)((r & 0x80) | 0x3c | ((r >> 8) & 3))
                                   : (unsigned char)(r >> 16); break; /* bf16 hi/lo bytes */
            case 1: h[i] = (unsigned char)(r & 0xb7); break; /* FP8, |x| < 1 */
            default: h[i] = (unsigned char)(124 + (r % 5)); break; /* E8M0 */
            }
        }
        die_cuda(cudaMemcpy((char *)d + off, h, len, cudaMemcpyHostToDevice), "upload");
    }
    free(h);
    return d;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct job {
    tx_gemm_lt *h;
    tx_gemm_desc d;
    const void *A, *B;
    void *D, *ws;
    /* emulation */
    int emulate;
    tx_cuda_dequant_args qa, qb;
    void *scratch;
    size_t scratch_bytes;
} job;

static void run_job(job *j)
{
    if (j->emulate)
        die_status(tx_gemm_emulate(j->h, &j->d, &j->qa, &j->qb, TEEXEC_DTYPE_BFLOAT16, j->scratch,
                                   j->scratch_bytes, NULL, j->D, j->ws, NULL),
                   "tx_gemm_emulate");
    else
        die_status(tx_gemm_lt_run(j->h, &j->d, j->A, j->B, NULL, j->D, j->ws, NULL), "tx_gemm_lt_run");
}

static float time_median(job *j)
{
    cudaEvent_t a, b;
    die_cuda(cudaEventCreate(&a), "cudaEventCreate");
    die_cuda(cudaEventCreate(&b), "cudaEventCreate");
    for (int i = 0; i < WARMUP; i++) run_job(j);
    die_cuda(cudaDeviceSynchronize(), "warm-up");
    float t[REPS];
    for (int i = 0; i < REPS; i++) {
        die_cuda(cudaEventRecord(a, 0), "cudaEventRecord");
        run_job(j);
        die_cuda(cudaEventRecord(b, 0), "cudaEventRecord");
        die_cuda(cudaEventSynchronize(b), "cudaEventSynchronize");
        die_cuda(cudaEventElapsedTime(&t[i], a, b), "cudaEventElapsedTime");
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    qsort(t, REPS, sizeof t[0], cmp_float);
    return t[REPS / 2];
}

static void report(const char *name, long M, long N, long K, float ms)
{
    const double tflops = 2.0 * (double)M * (double)N * (double)K / ((double)ms * 1e-3) / 1e12;
    printf("%-34s %5ldx%5ldx%5ld  %8.3f ms  %7.1f TFLOP/s\n", name, M, N, K, (double)ms, tflops);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static const long defaults[][3] = {{8192, 16384, 4096}, {8192, 4096, 16384}, {8192, 8192, 8192}};
    long given[8][3];
    int ngiven = 0, quick = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[a], "--shape") && a + 1 < argc && ngiven < 8 &&
                   sscanf(argv[a + 1], "%ldx%ldx%ld", &given[ngiven][0], &given[ngiven][1],
                          &given[ngiven][2]) == 3 &&
                   given[ngiven][0] > 0 && given[ngiven][1] > 0 && given[ngiven][2] > 0 &&
                   /* the FP8 block and MXFP8 scale layouts assume whole blocks */
                   given[ngiven][0] % 128 == 0 && given[ngiven][1] % 128 == 0 &&
                   given[ngiven][2] % 128 == 0) {
            ngiven++;
            a++;
        } else {
            fprintf(stderr, "usage: gemm_rate [--quick] [--shape MxNxK]... (at most 8 shapes, "
                            "each dim a positive multiple of 128)\n");
            return 2;
        }
    }
    const long(*shapes)[3] = ngiven ? (const long(*)[3])given : defaults;
    const int nshapes = quick ? 1 : ngiven ? ngiven : 3;
    const size_t ws_bytes = (size_t)32 * 1024 * 1024 + 1024;
    tx_gemm_lt *h = NULL;
    die_status(tx_gemm_lt_create(ws_bytes, &h), "tx_gemm_lt_create");
    struct cudaDeviceProp prop;
    die_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("gemm_rate: %s (sm_%d), cuBLASLt %zu, median of %d after %d warm-up\n", prop.name,
           tx_gemm_lt_sm(h), tx_gemm_lt_cublas_version(h), REPS, WARMUP);
    void *ws = NULL;
    die_cuda(cudaMalloc(&ws, ws_bytes), "cudaMalloc workspace");
    float *ones = NULL; /* [0] and [4]: 16-byte aligned scale_inv values */
    const float one[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    die_cuda(cudaMalloc((void **)&ones, sizeof one), "cudaMalloc");
    die_cuda(cudaMemcpy(ones, one, sizeof one, cudaMemcpyHostToDevice), "upload");

    for (int s = 0; s < nshapes; s++) {
        const long M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        void *Wb = dev_random((size_t)N * K * 2, 0), *Xb = dev_random((size_t)M * K * 2, 0);
        void *W8 = dev_random((size_t)N * K, 1), *X8 = dev_random((size_t)M * K, 1);
        void *D = NULL;
        die_cuda(cudaMalloc(&D, (size_t)M * N * 2), "cudaMalloc D");
        job j;
        memset(&j, 0, sizeof j);
        j.h = h;
        j.ws = ws;
        j.D = D;
        j.d.m = N;
        j.d.n = M;
        j.d.k = K;
        j.d.transa = 1;
        j.d.alpha = 1.0f;
        j.d.d_type = TEEXEC_DTYPE_BFLOAT16;

        j.d.a_type = j.d.b_type = TEEXEC_DTYPE_BFLOAT16;
        j.A = Wb;
        j.B = Xb;
        report("bf16 TN fp32-accumulate", M, N, K, time_median(&j));

        j.d.a_type = j.d.b_type = TEEXEC_DTYPE_FLOAT8E4M3FN;
        j.d.a_scale_mode = j.d.b_scale_mode = TX_GEMM_SCALE_TENSOR;
        j.d.a_scale_inv = ones;
        j.d.b_scale_inv = ones + 4;
        j.A = W8;
        j.B = X8;
        j.d.fast_accum = 1;
        report("fp8 e4m3 per-tensor fast-accum", M, N, K, time_median(&j));
        j.d.fast_accum = 0;
        report("fp8 e4m3 per-tensor split-accum", M, N, K, time_median(&j));

        /* FP8 block: A = W with 128x128 tiles, B = X with 1x128 blocks */
        const size_t kb = (size_t)(K + 127) / 128;
        const size_t sa = ((size_t)(N + 127) / 128) * ((kb + 3) / 4 * 4), sb = kb * ((size_t)(M + 3) / 4 * 4);
        float *sca = NULL, *scb = NULL;
        float *hs = malloc(sizeof(float) * (sa > sb ? sa : sb));
        if (!hs) return 1;
        for (size_t i = 0; i < (sa > sb ? sa : sb); i++) hs[i] = 1.0f / (float)(1 + (i % 3));
        die_cuda(cudaMalloc((void **)&sca, sa * sizeof(float)), "cudaMalloc");
        die_cuda(cudaMalloc((void **)&scb, sb * sizeof(float)), "cudaMalloc");
        die_cuda(cudaMemcpy(sca, hs, sa * sizeof(float), cudaMemcpyHostToDevice), "upload");
        die_cuda(cudaMemcpy(scb, hs, sb * sizeof(float), cudaMemcpyHostToDevice), "upload");
        free(hs);
        j.d.a_scale_mode = TX_GEMM_SCALE_BLOCK_2D;
        j.d.b_scale_mode = TX_GEMM_SCALE_BLOCK_1D;
        j.d.a_scale_inv = sca;
        j.d.b_scale_inv = scb;
        teexec_status *st = tx_gemm_lt_check(h, &j.d);
        if (st) {
            printf("%-34s %5ldx%5ldx%5ld  not native: %s\n", "fp8 block 128x128 x 1x128", M, N, K,
                   teexec_status_message(st));
            teexec_status_destroy(st);
        } else {
            report("fp8 block 128x128 x 1x128", M, N, K, time_median(&j));
        }
        cudaFree(sca);
        cudaFree(scb);

        /* MXFP8: native where offered, else the emulation */
        void *sw = dev_random((size_t)N * K / 32 + (size_t)M * K / 32 + 4096, 2);
        j.d.a_scale_mode = j.d.b_scale_mode = TX_GEMM_SCALE_MXFP8;
        j.d.a_scale_inv = sw;
        j.d.b_scale_inv = (char *)sw + (size_t)N * K / 32;
        st = tx_gemm_lt_check(h, &j.d);
        if (!st) {
            report("mxfp8 native", M, N, K, time_median(&j));
        } else {
            teexec_status_destroy(st);
            tx_cuda_dequant_args qa, qb;
            memset(&qa, 0, sizeof qa);
            qa.kind = TX_CUDA_Q_MXFP8;
            qa.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
            qb = qa;
            qa.rows = (size_t)N;
            qa.cols = (size_t)K;
            qa.data = W8;
            qa.scales = sw;
            qa.scale_cols = (size_t)K / 32;
            qb.rows = (size_t)M;
            qb.cols = (size_t)K;
            qb.data = X8;
            qb.scales = (char *)sw + (size_t)N * K / 32;
            qb.scale_cols = (size_t)K / 32;
            j.emulate = 1;
            j.qa = qa;
            j.qb = qb;
            j.d.a_scale_mode = j.d.b_scale_mode = TX_GEMM_SCALE_NONE;
            j.d.a_scale_inv = j.d.b_scale_inv = NULL;
            j.scratch_bytes = tx_gemm_emu_scratch_bytes(&qa, &qb, TEEXEC_DTYPE_BFLOAT16);
            die_cuda(cudaMalloc(&j.scratch, j.scratch_bytes), "cudaMalloc scratch");
            report("mxfp8 emulated (dequant+bf16 GEMM)", M, N, K, time_median(&j));
            cudaFree(j.scratch);
            j.emulate = 0;
        }
        cudaFree(sw);
        cudaFree(Wb);
        cudaFree(Xb);
        cudaFree(W8);
        cudaFree(X8);
        cudaFree(D);
    }
    tx_gemm_lt_stats st = tx_gemm_lt_get_stats(h);
    printf("gemm_rate: %llu runs, %llu heuristic queries\n", (unsigned long long)st.runs,
           (unsigned long long)st.heuristic_queries);
    cudaFree(ones);
    cudaFree(ws);
    tx_gemm_lt_destroy(h);
    return 0;
}
