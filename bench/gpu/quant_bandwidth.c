/* quant_bandwidth.c - achieved memory bandwidth of the CUDA quantizers on a
 * 256 MiB bf16 input, next to a plain device-to-device copy measured in the
 * same run.
 *
 * Each entry is timed with CUDA events around one call, after 3 warm-up
 * calls; the figure is the median of 20. GB/s counts the bytes a single
 * ideal pass must move: the input read once plus every output written once
 * (data, scales); the copy counts its read plus its write. Passes that a
 * quantizer needs beyond that (current scaling's amax pass, NVFP4's global
 * amax pass) show up as lower GB/s, which is the point of comparing; the
 * "cast only" rows time the same kernels with the amax given, which is what
 * a producer that reduces the amax in its own epilogue leaves to them.
 *
 * Usage: quant_bandwidth [--rows M --cols K]   (default 16384 x 8192)
 * Prints one line per entry and a table; exit 1 on any CUDA or library
 * error. */
#include "kernels/cuda/quant_block.h"
#include "kernels/cuda/quant_fp8.h"
#include "kernels/cuda/quant_mxfp8.h"
#include "kernels/cuda/quant_nvfp4.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 20
#define WARMUP 3

#define BENCH_NAME "quant_bandwidth"
#include "bench/gpu/bench_die.h"

static void *dalloc(size_t n)
{
    void *p = NULL;
    die_cuda(cudaMalloc(&p, n), "cudaMalloc");
    die_cuda(cudaMemset(p, 0, n), "cudaMemset");
    return p;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct entry {
    const char *name;
    double bytes;
    float ms;
} entry;

typedef void (*run_fn)(void *ctx);

static float time_median(run_fn fn, void *ctx)
{
    cudaEvent_t a, b;
    die_cuda(cudaEventCreate(&a), "cudaEventCreate");
    die_cuda(cudaEventCreate(&b), "cudaEventCreate");
    for (int i = 0; i < WARMUP; i++) fn(ctx);
    die_cuda(cudaDeviceSynchronize(), "warm-up");
    float t[REPS];
    for (int i = 0; i < REPS; i++) {
        die_cuda(cudaEventRecord(a, 0), "cudaEventRecord");
        fn(ctx);
        die_cuda(cudaEventRecord(b, 0), "cudaEventRecord");
        die_cuda(cudaEventSynchronize(b), "cudaEventSynchronize");
        die_cuda(cudaEventElapsedTime(&t[i], a, b), "cudaEventElapsedTime");
    }
    die_cuda(cudaGetLastError(), "timed runs");
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    qsort(t, REPS, sizeof t[0], cmp_float);
    return (t[REPS / 2 - 1] + t[REPS / 2]) / 2.0f;
}

typedef struct bufs {
    size_t M, K, n;
    void *x, *copy_dst;
    uint8_t *row, *col, *rs, *cs;
    float *f; /* scale, scale_inv, amax[2] */
    size_t rs_bytes, cs_bytes;
} bufs;

static bufs B;

static void run_copy(void *ctx)
{
    (void)ctx;
    die_cuda(cudaMemcpyAsync(B.copy_dst, B.x, B.n * 2, cudaMemcpyDeviceToDevice, 0), "copy");
}

static tx_cuda_fp8_args fp8_args(int row, int col)
{
    tx_cuda_fp8_args a;
    memset(&a, 0, sizeof a);
    a.x = B.x;
    a.x_dtype = TEEXEC_DTYPE_BFLOAT16;
    a.rows = B.M;
    a.cols = B.K;
    a.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
    a.scale = B.f;
    a.scale_inv = B.f + 1;
    a.amax = B.f + 2;
    a.row_data = row ? B.row : NULL;
    a.col_data = col ? B.col : NULL;
    return a;
}

static void run_fp8_current(void *ctx)
{
    (void)ctx;
    tx_cuda_fp8_args a = fp8_args(1, 1);
    die_status(tx_cuda_fp8_quantize_current(&a, 0.0f, 0, NULL), "fp8 current");
}

static void run_fp8_delayed(void *ctx)
{
    (void)ctx;
    tx_cuda_fp8_args a = fp8_args(1, 1);
    die_status(tx_cuda_fp8_quantize_delayed(&a, NULL), "fp8 delayed");
}

/* diagnostic: the delayed cast without its amax reduction */
static void run_fp8_delayed_noamax(void *ctx)
{
    (void)ctx;
    tx_cuda_fp8_args a = fp8_args(1, 1);
    a.amax = NULL;
    die_status(tx_cuda_fp8_quantize_delayed(&a, NULL), "fp8 delayed, no amax");
}

/* current scaling's first pass on its own: max |x| of the whole tensor */
static void run_amax(void *ctx)
{
    (void)ctx;
    die_status(tx_cuda_amax(B.x, TEEXEC_DTYPE_BFLOAT16, B.n, B.f + 4, NULL), "amax");
}

static void run_fp8_delayed_row(void *ctx)
{
    (void)ctx;
    tx_cuda_fp8_args a = fp8_args(1, 0);
    die_status(tx_cuda_fp8_quantize_delayed(&a, NULL), "fp8 delayed rowwise");
}

static void run_mxfp8(void *ctx)
{
    const int *two_d = ctx;
    tx_cuda_mxfp8_args a;
    memset(&a, 0, sizeof a);
    a.x = B.x;
    a.x_dtype = TEEXEC_DTYPE_BFLOAT16;
    a.rows = B.M;
    a.cols = B.K;
    a.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
    a.two_d = *two_d;
    a.swizzled = 1;
    a.row_data = B.row;
    a.row_scales = B.rs;
    a.row_scale_ld = B.K / 32;
    a.row_scale_bytes = B.M * B.K / 32;
    a.col_data = B.col;
    a.col_scales = B.cs;
    a.col_scale_ld = B.K;
    a.col_scale_bytes = B.M * B.K / 32;
    die_status(tx_cuda_mxfp8_quantize(&a, NULL), "mxfp8");
}

static void run_block(void *ctx)
{
    const int *two_d = ctx;
    tx_cuda_block_args a;
    memset(&a, 0, sizeof a);
    a.x = B.x;
    a.x_dtype = TEEXEC_DTYPE_BFLOAT16;
    a.rows = B.M;
    a.cols = B.K;
    a.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
    a.two_d = *two_d;
    a.pow2 = 1;
    a.row_data = B.row;
    a.row_scale_inv = (float *)B.rs;
    a.col_data = B.col;
    a.col_scale_inv = (float *)B.cs;
    if (*two_d) {
        a.row_ld = (B.K / 128 + 3) / 4 * 4;
        a.row_scale_count = B.M / 128 * a.row_ld;
        a.col_ld = (B.M / 128 + 3) / 4 * 4;
        a.col_scale_count = B.K / 128 * a.col_ld;
    } else {
        a.row_ld = B.M;
        a.row_scale_count = B.K / 128 * B.M;
        a.col_ld = B.K;
        a.col_scale_count = B.M / 128 * B.K;
    }
    die_status(tx_cuda_block_quantize(&a, NULL), "fp8 block");
}

static void run_nvfp4(void *ctx)
{
    /* 0: RN 1-D, 1: RHT + SR, 2: 2-D; +3: the same cast with the global
     * amaxes given (no amax pass: what a producer that computes them in its
     * epilogue leaves to the quantizer) */
    const int given = *(const int *)ctx >= 3, mode = *(const int *)ctx % 3;
    tx_cuda_nvfp4_args a;
    memset(&a, 0, sizeof a);
    a.x = B.x;
    a.x_dtype = TEEXEC_DTYPE_BFLOAT16;
    a.rows = B.M;
    a.cols = B.K;
    a.two_d = mode == 2;
    a.rht = mode == 1;
    a.stochastic = mode == 1;
    a.seed = 42;
    a.swizzled = 1;
    a.row_data = B.row;
    a.row_scales = B.rs;
    a.row_scale_ld = B.K / 16;
    a.row_scale_bytes = B.M * B.K / 16;
    a.col_data = B.col;
    a.col_scales = B.cs;
    a.col_scale_ld = B.M / 16;
    a.col_scale_bytes = B.M * B.K / 16;
    a.amax = B.f + 2;
    a.use_given_amax = given;
    a.given_amax_row = 256.0f; /* the input's range: 2^-7 .. 2^8 */
    a.given_amax_col = 256.0f;
    die_status(tx_cuda_nvfp4_quantize(&a, NULL), "nvfp4");
}

int main(int argc, char **argv)
{
    size_t M = 16384, K = 8192;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows")) M = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--cols")) K = strtoull(argv[i + 1], NULL, 10);
    }
    if (M % 128 || K % 128) {
        fprintf(stderr, "quant_bandwidth: rows and cols must be multiples of 128\n");
        return 2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "quant_bandwidth: no CUDA device\n");
        return 1;
    }
    struct cudaDeviceProp prop;
    die_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    B.M = M;
    B.K = K;
    B.n = M * K;
    printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount);
    printf("input: bf16 [%zu, %zu] = %.1f MiB; median of %d after %d warm-up\n", M, K,
           B.n * 2 / 1048576.0, REPS, WARMUP);

    /* random bf16 in a few binades (not zeros: see METHOD.md) */
    uint16_t *h = malloc(B.n * 2);
    if (!h) return 1;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < B.n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint16_t e = (uint16_t)(120 + (s >> 60)); /* 2^-7 .. 2^8 */
        h[i] = (uint16_t)(((s >> 8) & 0x8000u) | (e << 7) | ((s >> 20) & 0x7fu));
    }
    B.x = dalloc(B.n * 2);
    die_cuda(cudaMemcpy(B.x, h, B.n * 2, cudaMemcpyHostToDevice), "upload");
    free(h);
    B.copy_dst = dalloc(B.n * 2);
    B.row = dalloc(B.n);
    B.col = dalloc(B.n);
    B.rs = dalloc(B.n / 8); /* big enough for every scale layout */
    B.cs = dalloc(B.n / 8);
    B.f = dalloc(32); /* scale, scale_inv, amax (NVFP4: [2], [3]), the amax pass [4] */
    const float one = 1.0f;
    die_cuda(cudaMemcpy(B.f, &one, 4, cudaMemcpyHostToDevice), "scale");

    const double n = (double)B.n;
    int zero = 0, one_i = 1, two = 2, three = 3, four = 4, five = 5;
    entry e[20];
    int ne = 0;
#define RUN(label, nbytes_, fn, ctx)                                                        \
    do {                                                                                   \
        e[ne].name = label;                                                                \
        e[ne].bytes = nbytes_;                                                             \
        e[ne].ms = time_median(fn, ctx);                                                   \
        printf("%-44s %8.4f ms %8.1f GB/s\n", e[ne].name, e[ne].ms,                        \
               e[ne].bytes / (e[ne].ms * 1e-3) / 1e9);                                     \
        fflush(stdout);                                                                    \
        ne++;                                                                              \
    } while (0)
    RUN("copy (device to device)", 2 * 2 * n, run_copy, NULL);
    RUN("fp8 delayed rowwise", 2 * n + n, run_fp8_delayed_row, NULL);
    RUN("fp8 delayed rowwise+columnwise", 2 * n + 2 * n, run_fp8_delayed, NULL);
    RUN("fp8 current rowwise+columnwise (2 passes)", 2 * n + 2 * n, run_fp8_current, NULL);
    RUN("fp8 delayed rowwise+columnwise, no amax (diag.)", 2 * n + 2 * n, run_fp8_delayed_noamax, NULL);
    RUN("fp8 current: amax pass alone (reads only)", 2 * n, run_amax, NULL);
    RUN("mxfp8 rowwise+columnwise (1x32, 32x1)", 2 * n + 2 * n + 2 * n / 32, run_mxfp8, &zero);
    RUN("mxfp8 rowwise+columnwise 32x32", 2 * n + 2 * n + 2 * n / 32, run_mxfp8, &one_i);
    RUN("fp8 block 1x128 rowwise+columnwise", 2 * n + 2 * n + 2 * 4 * n / 128, run_block, &zero);
    RUN("fp8 block 128x128 rowwise+columnwise", 2 * n + 2 * n + 2 * 4 * n / 16384, run_block, &one_i);
    RUN("nvfp4 rowwise+columnwise RN", 2 * n + n + 2 * n / 16, run_nvfp4, &zero);
    RUN("nvfp4 rowwise+columnwise RHT+SR", 2 * n + n + 2 * n / 16, run_nvfp4, &one_i);
    RUN("nvfp4 16x16 rowwise+columnwise", 2 * n + n + 2 * n / 16, run_nvfp4, &two);
    RUN("nvfp4 RN, amax given (cast only)", 2 * n + n + 2 * n / 16, run_nvfp4, &three);
    RUN("nvfp4 RHT+SR, amax given (cast only)", 2 * n + n + 2 * n / 16, run_nvfp4, &four);
    RUN("nvfp4 16x16, amax given (cast only)", 2 * n + n + 2 * n / 16, run_nvfp4, &five);
#undef RUN
    const double copy_gbs = e[0].bytes / (e[0].ms * 1e-3) / 1e9;
    printf("\n| quantizer | ms | GB/s | vs copy |\n|---|---:|---:|---:|\n");
    for (int i = 0; i < ne; i++) {
        double gbs = e[i].bytes / (e[i].ms * 1e-3) / 1e9;
        printf("| %s | %.4f | %.0f | %.0f%% |\n", e[i].name, e[i].ms, gbs, 100.0 * gbs / copy_gbs);
    }
    cudaFree(B.x);
    cudaFree(B.copy_dst);
    cudaFree(B.row);
    cudaFree(B.col);
    cudaFree(B.rs);
    cudaFree(B.cs);
    cudaFree(B.f);
    return 0;
}
