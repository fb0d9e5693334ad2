/* emu_bench.c - where the time of the exact MXFP8 / NVFP4 GEMM emulation
 * goes on a GPU without the native block-scaled units (sm_90), for a
 * Linear's three GEMMs at training-size shapes.
 *
 * For each shape (T tokens, K in, N out) and recipe it times, as medians of
 * CUDA-event-timed calls on random bf16 sources:
 *  - quantize: tx_cuda_lin_quantize of x, w and dy (rowwise + columnwise);
 *  - per GEMM operand: the former preparation (tx_cuda_dequantize to FP32 +
 *    tx_cuda_f32_to_bf16, source layout) and the current one
 *    (tx_cuda_dequantize_to, BF16, K-contiguous), and checks that both give
 *    the same bf16 values (bytes, after undoing the transpose on the host);
 *  - the bf16 GEMM alone in the source layout (TN / NN / NT, what the
 *    former emulation and a bf16 Linear run) and as TN (what the emulation
 *    runs now);
 *  - the former emulated GEMM end to end (both preparations + the GEMM);
 *  - tx_cuda_lin_gemm end to end (the current emulation).
 *
 * Usage: emu_bench [--reps N] [--shape TxKxN]... (default shapes
 * 8192x4096x16384 and 8192x16384x4096, the MLP block's fc1 and fc2).
 * Prints one line per entry; exit 1 on any CUDA or library error or a
 * mismatch. Tool code: prints and exits. */
#include "exec/cuda/linear_gemm.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/gemm_emu_prep.h"
#include "kernels/cuda/gemm_lt.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WS_BYTES ((size_t)32 * 1024 * 1024 + 1024)
#define WARMUP 3

static int g_reps = 20;
static int g_failed;

#define BENCH_NAME "emu_bench"
#include "bench/gpu/bench_die.h"

static void *dalloc(size_t n)
{
    void *p = NULL;
    die_cuda(cudaMalloc(&p, n ? n : 256), "cudaMalloc");
    return p;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

/* bf16 values in +-[2^-8, 4) with a random binade per 32 elements, so the
 * block scales differ. */
static void *dev_bf16_random(size_t n)
{
    uint16_t *h = malloc(n * 2);
    if (!h) {
        fprintf(stderr, "emu_bench: out of host memory\n");
        exit(1);
    }
    uint32_t e = 127;
    for (size_t i = 0; i < n; i++) {
        if (i % 32 == 0) e = 119 + rnd() % 10;
        const uint32_t r = rnd();
        h[i] = (uint16_t)(((r >> 16) & 0x8000u) | (e << 7) | (r & 0x7fu));
    }
    void *d = dalloc(n * 2);
    die_cuda(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice), "upload");
    free(h);
    return d;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef void (*job_fn)(void *ctx);

static float time_median(job_fn f, void *ctx)
{
    cudaEvent_t a, b;
    die_cuda(cudaEventCreate(&a), "cudaEventCreate");
    die_cuda(cudaEventCreate(&b), "cudaEventCreate");
    for (int i = 0; i < WARMUP; i++) f(ctx);
    die_cuda(cudaDeviceSynchronize(), "warm-up");
    float *t = malloc(sizeof(float) * (size_t)g_reps);
    if (!t) exit(1);
    for (int i = 0; i < g_reps; i++) {
        die_cuda(cudaEventRecord(a, 0), "cudaEventRecord");
        f(ctx);
        die_cuda(cudaEventRecord(b, 0), "cudaEventRecord");
        die_cuda(cudaEventSynchronize(b), "cudaEventSynchronize");
        die_cuda(cudaEventElapsedTime(&t[i], a, b), "cudaEventElapsedTime");
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    qsort(t, (size_t)g_reps, sizeof t[0], cmp_float);
    const float m = t[g_reps / 2];
    free(t);
    return m;
}

/* ---- the jobs ------------------------------------------------------------ */

typedef struct bench {
    tx_cuda_env env;
    size_t T, K, N;
    const char *recipe;
    void *x, *w, *dy;                  /* bf16 sources */
    tx_cuda_lin_operand ox, ow, ody;
    void *mx, *mw, *mdy;               /* quantized regions */
    void *out;                         /* bf16 result, max size */
    void *scratch;                     /* tx_cuda_lin_gemm's */
    size_t scratch_bytes;
    void *staging, *op_old[2], *op_new[2]; /* per-operand buffers (largest size) */
    float *unit_amax;                  /* device 2688 (NVFP4 operands without S_dec) */
    /* the job being timed */
    const tx_cuda_lin_operand *qo;
    const void *qsrc;
    void *qmem;
    tx_cuda_dequant_args da[2];        /* cuBLAS A, B */
    int transposed[2];
    tx_gemm_desc g;
    const void *A, *B;
    tx_lin_gemm kind;
    tx_cuda_lin_ref ra, rb;
} bench;

static void job_quantize(void *c)
{
    bench *b = c;
    die_status(tx_cuda_lin_quantize(b->qo, b->qsrc, TEEXEC_DTYPE_BFLOAT16, b->qmem, 0, NULL),
               "tx_cuda_lin_quantize");
}

static void old_prep(bench *b, int i)
{
    tx_cuda_dequant_args a = b->da[i];
    a.out = b->staging;
    die_status(tx_cuda_dequantize(&a, NULL), "tx_cuda_dequantize");
    die_status(tx_cuda_f32_to_bf16(b->staging, b->op_old[i], a.rows * a.cols, NULL),
               "tx_cuda_f32_to_bf16");
}

static void new_prep(bench *b, int i)
{
    die_status(tx_cuda_dequantize_to(&b->da[i], b->transposed[i], TEEXEC_DTYPE_BFLOAT16,
                                      b->op_new[i], NULL),
               "tx_cuda_dequantize_to");
}

static int g_op;
static void job_old_prep(void *c) { old_prep(c, g_op); }
static void job_new_prep(void *c) { new_prep(c, g_op); }

static void job_gemm(void *c)
{
    bench *b = c;
    die_status(tx_gemm_lt_run(b->env.gemm, &b->g, b->A, b->B, NULL, b->out, b->env.gemm_ws, NULL),
               "tx_gemm_lt_run");
}

static void job_old_emulation(void *c)
{
    bench *b = c;
    old_prep(b, 0);
    old_prep(b, 1);
    job_gemm(c);
}

static void job_lin_gemm(void *c)
{
    bench *b = c;
    const size_t sb = tx_cuda_lin_gemm_scratch(b->kind, &b->ra, &b->rb);
    die_status(tx_cuda_lin_gemm(b->kind, &b->ra, &b->rb, b->T, b->N, b->K, b->out,
                                TEEXEC_DTYPE_BFLOAT16, NULL, b->scratch, sb, &b->env),
               "tx_cuda_lin_gemm");
}

/* ---- helpers --------------------------------------------------------------- */

static const uint8_t *cat(const void *mem, size_t off) { return (const uint8_t *)mem + off; }

/* As linear_gemm.c's deq_args (its layout fields are public). */
static void deq_args(const tx_cuda_lin_operand *o, const void *mem, int col, tx_cuda_dequant_args *d)
{
    memset(d, 0, sizeof *d);
    d->kind = (tx_cuda_qkind)o->q.cfg.kind;
    d->fmt = o->q.cfg.kind == TX_QKIND_NVFP4 ? TEEXEC_DTYPE_FLOAT4E2M1 : o->q.cfg.fmt;
    d->columnwise = col;
    d->block_2d = o->q.cfg.block_2d;
    d->swizzled = o->swizzled;
    d->rows = o->rows;
    d->cols = o->cols;
    d->data = cat(mem, col ? o->col_data : o->row_data);
    d->scales = cat(mem, col ? o->col_scales : o->row_scales);
    d->scale_cols = col ? o->col_scale_cols : o->row_scale_cols;
}

static void line(const bench *b, const char *what, float ms, double flops)
{
    if (flops > 0)
        printf("%-6s T=%zu K=%zu N=%zu  %-44s %8.3f ms %7.1f TFLOP/s\n", b->recipe, b->T, b->K,
               b->N, what, (double)ms, flops / ((double)ms * 1e-3) / 1e12);
    else
        printf("%-6s T=%zu K=%zu N=%zu  %-44s %8.3f ms\n", b->recipe, b->T, b->K, b->N, what,
               (double)ms);
    fflush(stdout);
}

/* The former and the current preparation give the same bf16 values. */
static void check_same(bench *b, int i, const char *what)
{
    const tx_cuda_dequant_args *a = &b->da[i];
    const size_t n = a->rows * a->cols;
    uint16_t *o = malloc(n * 2), *p = malloc(n * 2);
    if (!o || !p) exit(1);
    old_prep(b, i);
    new_prep(b, i);
    die_cuda(cudaMemcpy(o, b->op_old[i], n * 2, cudaMemcpyDeviceToHost), "download");
    die_cuda(cudaMemcpy(p, b->op_new[i], n * 2, cudaMemcpyDeviceToHost), "download");
    size_t bad = 0, seen = 0;
    /* every 8th row (and the last): a wrong tile shows in any of them, and
     * the host loop over the transposed reads stays short */
    for (size_t k = 0; k <= (a->rows - 1) / 8 + 1; k++) {
        const size_t r = k * 8 < a->rows ? k * 8 : a->rows - 1;
        for (size_t c = 0; c < a->cols; c++, seen++) {
            const uint16_t got = b->transposed[i] ? p[c * a->rows + r] : p[r * a->cols + c];
            bad += got != o[r * a->cols + c];
        }
    }
    printf("%-6s T=%zu K=%zu N=%zu  %-44s %s (%zu of %zu checked differ)\n", b->recipe, b->T, b->K,
           b->N, what, bad ? "MISMATCH" : "exact", bad, seen);
    if (bad) g_failed = 1;
    free(o);
    free(p);
}

static const char *kname(tx_lin_gemm k)
{
    return k == TX_LIN_FPROP ? "fprop" : k == TX_LIN_DGRAD ? "dgrad" : "wgrad";
}

static void run_kind(bench *b, tx_lin_gemm kind)
{
    char what[96];
    const size_t T = b->T, K = b->K, N = b->N;
    const double flops = 2.0 * (double)T * (double)K * (double)N;
    /* a, b of linear_gemm.h; cuBLAS A = b, B = a */
    const tx_cuda_lin_operand *oa = kind == TX_LIN_FPROP ? &b->ox : &b->ody;
    const tx_cuda_lin_operand *ob = kind == TX_LIN_WGRAD ? &b->ox : &b->ow;
    void *ma = kind == TX_LIN_FPROP ? b->mx : b->mdy, *mb = kind == TX_LIN_WGRAD ? b->mx : b->mw;
    const int col_a = kind == TX_LIN_WGRAD, col_b = kind != TX_LIN_FPROP;
    memset(&b->g, 0, sizeof b->g);
    switch (kind) {
    case TX_LIN_FPROP: b->g.m = (int64_t)N, b->g.n = (int64_t)T, b->g.k = (int64_t)K; break;
    case TX_LIN_DGRAD: b->g.m = (int64_t)K, b->g.n = (int64_t)T, b->g.k = (int64_t)N; break;
    default: b->g.m = (int64_t)K, b->g.n = (int64_t)N, b->g.k = (int64_t)T; break;
    }
    b->g.transa = kind == TX_LIN_FPROP;
    b->g.transb = kind == TX_LIN_WGRAD;
    deq_args(ob, mb, col_b, &b->da[0]);
    deq_args(oa, ma, col_a, &b->da[1]);
    for (int i = 0; i < 2; i++)
        if (b->da[i].kind == TX_CUDA_Q_NVFP4) b->da[i].amax = b->unit_amax;
    b->transposed[0] = !b->g.transa;
    b->transposed[1] = b->g.transb;
    static const char *const opname[2][3] = {{"w row", "w col", "x col"}, {"x row", "dy row", "dy col"}};
    for (int i = 0; i < 2; i++) {
        g_op = i;
        snprintf(what, sizeof what, "%s %s: old dequant+convert", kname(kind), opname[i][kind]);
        line(b, what, time_median(job_old_prep, b), 0);
        snprintf(what, sizeof what, "%s %s: dequantize_to (%s)", kname(kind), opname[i][kind],
                 b->transposed[i] ? "transposed" : "as stored");
        line(b, what, time_median(job_new_prep, b), 0);
        snprintf(what, sizeof what, "%s %s: old vs new bf16", kname(kind), opname[i][kind]);
        check_same(b, i, what);
    }
    /* the bf16 GEMM alone: source layout (old operands) and TN (new) */
    b->g.a_type = b->g.b_type = b->g.d_type = TEEXEC_DTYPE_BFLOAT16;
    b->g.alpha = 1.0f;
    b->g.lda = (int64_t)b->da[0].cols;
    b->g.ldb = (int64_t)b->da[1].cols;
    b->A = b->op_old[0];
    b->B = b->op_old[1];
    snprintf(what, sizeof what, "%s: bf16 GEMM %s (source layout)", kname(kind),
             kind == TX_LIN_FPROP ? "TN" : kind == TX_LIN_DGRAD ? "NN" : "NT");
    line(b, what, time_median(job_gemm, b), flops);
    snprintf(what, sizeof what, "%s: old emulation (2x dequant+convert, GEMM)", kname(kind));
    line(b, what, time_median(job_old_emulation, b), flops);
    tx_gemm_desc keep = b->g;
    b->g.transa = 1;
    b->g.transb = 0;
    b->g.lda = b->g.ldb = b->g.k;
    b->A = b->op_new[0];
    b->B = b->op_new[1];
    snprintf(what, sizeof what, "%s: bf16 GEMM TN (K-major operands)", kname(kind));
    line(b, what, time_median(job_gemm, b), flops);
    b->g = keep;
    b->kind = kind;
    b->ra = (tx_cuda_lin_ref){oa, NULL, TEEXEC_DTYPE_BFLOAT16, ma};
    b->rb = (tx_cuda_lin_ref){ob, NULL, TEEXEC_DTYPE_BFLOAT16, mb};
    snprintf(what, sizeof what, "%s: tx_cuda_lin_gemm (emulation now)", kname(kind));
    line(b, what, time_median(job_lin_gemm, b), flops);
}

static void run_recipe(bench *b, int nvfp4)
{
    tx_cuda_operand_q qx, qw, qdy;
    memset(&qx, 0, sizeof qx);
    qx.on = true;
    qx.native = true;
    qw = qdy = qx;
    if (nvfp4) {
        b->recipe = "nvfp4";
        qx.cfg.kind = qw.cfg.kind = qdy.cfg.kind = TX_QKIND_NVFP4;
        qx.cfg.fmt = qw.cfg.fmt = qdy.cfg.fmt = TEEXEC_DTYPE_FLOAT4E2M1;
        qw.cfg.block_2d = true;
        qx.cfg.rht = qdy.cfg.rht = true;
        qdy.cfg.stochastic_rounding = true;
        qdy.cfg.seed = 1234;
    } else {
        b->recipe = "mxfp8";
        qx.cfg.kind = qw.cfg.kind = qdy.cfg.kind = TX_QKIND_MXFP8;
        qx.cfg.fmt = qw.cfg.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
        qdy.cfg.fmt = TEEXEC_DTYPE_FLOAT8E5M2;
    }
    const unsigned both = TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE;
    die_status(tx_cuda_lin_operand_init(&b->ox, &qx, b->T, b->K, both, b->env.sm), "operand x");
    die_status(tx_cuda_lin_operand_init(&b->ow, &qw, b->N, b->K, both, b->env.sm), "operand w");
    die_status(tx_cuda_lin_operand_init(&b->ody, &qdy, b->T, b->N, both, b->env.sm), "operand dy");
    b->mx = dalloc(b->ox.bytes);
    b->mw = dalloc(b->ow.bytes);
    b->mdy = dalloc(b->ody.bytes);
    const struct { const tx_cuda_lin_operand *o; const void *src; void *mem; const char *n; } qs[3] = {
        {&b->ox, b->x, b->mx, "quantize x (row+col)"},
        {&b->ow, b->w, b->mw, "quantize w (row+col)"},
        {&b->ody, b->dy, b->mdy, "quantize dy (row+col)"}};
    for (int i = 0; i < 3; i++) {
        b->qo = qs[i].o;
        b->qsrc = qs[i].src;
        b->qmem = qs[i].mem;
        line(b, qs[i].n, time_median(job_quantize, b), 0);
    }
    size_t sc = 0;
    for (int k = 0; k < 3; k++) {
        const tx_lin_gemm kind = (tx_lin_gemm)k;
        tx_cuda_lin_ref ra = {kind == TX_LIN_FPROP ? &b->ox : &b->ody, NULL, TEEXEC_DTYPE_BFLOAT16, NULL};
        tx_cuda_lin_ref rb = {kind == TX_LIN_WGRAD ? &b->ox : &b->ow, NULL, TEEXEC_DTYPE_BFLOAT16, NULL};
        const size_t s = tx_cuda_lin_gemm_scratch(kind, &ra, &rb);
        if (s > sc) sc = s;
    }
    b->scratch = dalloc(sc);
    b->scratch_bytes = sc;
    run_kind(b, TX_LIN_FPROP);
    run_kind(b, TX_LIN_DGRAD);
    run_kind(b, TX_LIN_WGRAD);
    cudaFree(b->mx);
    cudaFree(b->mw);
    cudaFree(b->mdy);
    cudaFree(b->scratch);
}

int main(int argc, char **argv)
{
    size_t shapes[8][3] = {{8192, 4096, 16384}, {8192, 16384, 4096}};
    int nshapes = 2, given = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            g_reps = atoi(argv[++i]);
            if (g_reps < 1) g_reps = 1;
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc && given < 8) {
            if (sscanf(argv[++i], "%zux%zux%zu", &shapes[given][0], &shapes[given][1],
                       &shapes[given][2]) != 3) {
                fprintf(stderr, "emu_bench: --shape wants TxKxN\n");
                return 2;
            }
            nshapes = ++given;
        } else {
            fprintf(stderr, "usage: emu_bench [--reps N] [--shape TxKxN]...\n");
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "emu_bench: no CUDA device\n");
        return 1;
    }
    bench b;
    memset(&b, 0, sizeof b);
    die_status(tx_gemm_lt_create(WS_BYTES, &b.env.gemm), "tx_gemm_lt_create");
    b.env.sm = tx_gemm_lt_sm(b.env.gemm);
    b.env.gemm_ws = dalloc(WS_BYTES);
    b.env.gemm_ws_bytes = WS_BYTES;
    struct cudaDeviceProp prop;
    die_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("emu_bench: %s, sm_%d, median of %d calls after %d warm-up\n", prop.name, b.env.sm,
           g_reps, WARMUP);
    const float unit = 2688.0f;
    b.unit_amax = dalloc(sizeof unit);
    die_cuda(cudaMemcpy(b.unit_amax, &unit, sizeof unit, cudaMemcpyHostToDevice), "upload");
    for (int s = 0; s < nshapes; s++) {
        b.T = shapes[s][0];
        b.K = shapes[s][1];
        b.N = shapes[s][2];
        b.x = dev_bf16_random(b.T * b.K);
        b.w = dev_bf16_random(b.N * b.K);
        b.dy = dev_bf16_random(b.T * b.N);
        size_t big = b.T * b.K;
        if (b.N * b.K > big) big = b.N * b.K;
        if (b.T * b.N > big) big = b.T * b.N;
        b.out = dalloc(big * 2);
        b.staging = dalloc(big * 4);
        for (int i = 0; i < 2; i++) {
            b.op_old[i] = dalloc(big * 2);
            b.op_new[i] = dalloc(big * 2);
        }
        /* the bf16 Linear's own GEMMs, for scale */
        bench *p = &b;
        const double flops = 2.0 * (double)b.T * (double)b.K * (double)b.N;
        b.recipe = "bf16";
        for (int k = 0; k < 3; k++) {
            memset(&b.g, 0, sizeof b.g);
            b.g.a_type = b.g.b_type = b.g.d_type = TEEXEC_DTYPE_BFLOAT16;
            b.g.alpha = 1.0f;
            const char *name = k == 0 ? "fprop: bf16 Linear GEMM TN" : k == 1 ? "dgrad: bf16 Linear GEMM NN" : "wgrad: bf16 Linear GEMM NT";
            if (k == 0) {
                b.g.m = (int64_t)b.N, b.g.n = (int64_t)b.T, b.g.k = (int64_t)b.K;
                b.g.transa = 1;
                b.A = b.w, b.B = b.x;
            } else if (k == 1) {
                b.g.m = (int64_t)b.K, b.g.n = (int64_t)b.T, b.g.k = (int64_t)b.N;
                b.A = b.w, b.B = b.dy;
            } else {
                b.g.m = (int64_t)b.K, b.g.n = (int64_t)b.N, b.g.k = (int64_t)b.T;
                b.g.transb = 1;
                b.A = b.x, b.B = b.dy;
            }
            line(p, name, time_median(job_gemm, p), flops);
        }
        run_recipe(&b, 0);
        run_recipe(&b, 1);
        cudaFree(b.x);
        cudaFree(b.w);
        cudaFree(b.dy);
        cudaFree(b.out);
        cudaFree(b.staging);
        for (int i = 0; i < 2; i++) {
            cudaFree(b.op_old[i]);
            cudaFree(b.op_new[i]);
        }
    }
    cudaFree(b.env.gemm_ws);
    cudaFree(b.unit_amax);
    tx_gemm_lt_destroy(b.env.gemm);
    printf("emu_bench: %s\n", g_failed ? "MISMATCH (see above)" : "all preparations exact");
    return g_failed ? 1 : 0;
}
