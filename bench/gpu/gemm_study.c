/* gemm_study.c - the GEMMs of one MLP training step (h=4096, ffn=16384,
 * 8192 tokens by default), described exactly as the CUDA backend issues
 * them (exec/cuda/te_cuda_linear.c for bf16, exec/cuda/linear_gemm.c's TN
 * copies for FP8 per-tensor), studied on the device:
 *
 *  1. per GEMM, cuBLASLt's first answers (up to --want, default 24) timed
 *     with tx_gemm_lt_sweep in three interleaved passes, with their
 *     algorithm, tile, stages, split-K and workspace; the heuristic's first
 *     answer under workspace limits 0 / 4 MiB / 32 MiB (the executor's) /
 *     256 MiB; and the same m x n x k as a plain TN GEMM (the layout's cost);
 *  2. the whole step's GEMM sequence back to back (bf16: fc1 fprop, fc2
 *     fprop, fc2 dgrad, fc2 wgrad, fc1 dgrad, fc1 wgrad), per tuning setting
 *     of the handle (off, the former one pass of 8, and the settings named
 *     by --tune), so that the clock and power state of a real step apply.
 *
 * Operands are random finite values (bf16 in (-2, 2), FP8 |x| < 1): constant
 * or integer data flatters the tensor cores' power draw. Prints one line per
 * measurement; exit 1 on a CUDA or library error.
 *
 * Usage: gemm_study [--tokens T] [--hidden H] [--ffn F] [--want N]
 *                   [--tune NxR]... [--no-sweep] [--no-fp8] */
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/gemm_select.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((size_t)1 << 20)

#define BENCH_NAME "gemm_study"
#include "bench/gpu/bench_die.h"

static uint64_t rng = 987654321;
static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

/* kind 0: bf16 in (-2, 2); 1: FP8 bytes with |x| < 1 (no NaN). One 16 MiB
 * random pattern per kind, repeated at a shifting offset: the tensor cores'
 * power draw depends on the bits toggling, not on the values being unique,
 * and drawing gigabytes of random bytes on the host would take seconds. */
static void *dev_random(size_t bytes, int kind)
{
    enum { CHUNK = 1 << 24 };
    static unsigned char *pat[2];
    static size_t shift;
    if (!pat[kind]) {
        pat[kind] = malloc(2 * (size_t)CHUNK);
        if (!pat[kind]) {
            fprintf(stderr, "gemm_study: out of host memory\n");
            exit(1);
        }
        for (size_t i = 0; i < 2 * (size_t)CHUNK; i += 2) {
            const uint32_t r = rnd();
            if (kind == 0) {
                pat[kind][i] = (unsigned char)(r >> 16);
                pat[kind][i + 1] = (unsigned char)((r & 0x80) | 0x3c | ((r >> 8) & 3));
            } else {
                pat[kind][i] = (unsigned char)(r & 0xb7);
                pat[kind][i + 1] = (unsigned char)((r >> 8) & 0xb7);
            }
        }
    }
    void *d = NULL;
    die_cuda(cudaMalloc(&d, bytes ? bytes : 16), "cudaMalloc");
    for (size_t off = 0; off < bytes; off += CHUNK) {
        const size_t len = bytes - off < CHUNK ? bytes - off : CHUNK;
        shift = (shift + 4096) % CHUNK; /* even: keeps bf16 byte pairs */
        die_cuda(cudaMemcpy((char *)d + off, pat[kind] + shift, len, cudaMemcpyHostToDevice), "upload");
    }
    return d;
}

typedef struct gemm {
    const char *name;
    tx_gemm_desc d;
    const void *A, *B, *C;
    void *D;
} gemm;

static double flops(const gemm *g) { return 2.0 * (double)g->d.m * (double)g->d.n * (double)g->d.k; }

static const char *epi_str(tx_gemm_epilogue e)
{
    switch (e) {
    case TX_GEMM_EPI_BIAS: return "bias";
    case TX_GEMM_EPI_GELU_AUX_BIAS: return "gelu_aux_bias";
    case TX_GEMM_EPI_DGELU_BGRAD: return "dgelu_bgrad";
    case TX_GEMM_EPI_BGRADB: return "bgradb";
    default: return "none";
    }
}

static void sweep(tx_gemm_lt *h, const gemm *g, void *ws, int want)
{
    static tx_gemm_lt_candidate c[TX_GEMM_TUNE_MAX_CANDIDATES];
    int n = 0;
    die_status(tx_gemm_lt_sweep(h, &g->d, g->A, g->B, g->C, g->D, ws, 32 * MIB + 1024, NULL, want, 3,
                                c, &n),
               g->name);
    int best = -1;
    for (int i = 0; i < n; i++)
        if (c[i].ms >= 0.0 && (best < 0 || c[i].ms < c[best].ms)) best = i;
    printf("sweep %-22s m=%lld n=%lld k=%lld %s%s epi=%s beta=%g: %d answers; first %.4f ms "
           "(%.0f TF/s), best #%d %.4f ms (%.0f TF/s)\n",
           g->name, (long long)g->d.m, (long long)g->d.n, (long long)g->d.k, g->d.transa ? "T" : "N",
           g->d.transb ? "T" : "N", epi_str(g->d.epilogue), (double)g->d.beta, n, c[0].ms,
           c[0].ms > 0 ? flops(g) / (c[0].ms * 1e9) : 0.0, best, best >= 0 ? c[best].ms : -1.0,
           best >= 0 && c[best].ms > 0 ? flops(g) / (c[best].ms * 1e9) : 0.0);
    for (int i = 0; i < n; i++)
        printf("  #%-2d %8.4f ms %6.0f TF/s algo=%d tile=%d stages=%d splitk=%d red=%d swz=%d "
               "custom=%d inner=%d cluster=%d ws=%zu waves=%.2f\n",
               i, c[i].ms, c[i].ms > 0 ? flops(g) / (c[i].ms * 1e9) : 0.0, c[i].algo_id, c[i].tile_id,
               c[i].stages_id, c[i].splitk, c[i].reduction_scheme, c[i].swizzle, c[i].custom,
               c[i].inner_shape_id, c[i].cluster_shape_id, c[i].workspace, (double)c[i].waves);
    const size_t lim[4] = {0, 4 * MIB, 32 * MIB + 1024, 256 * MIB};
    printf("  first answer by workspace limit:");
    for (int w = 0; w < 4; w++) {
        int m = 0;
        teexec_status *st =
            tx_gemm_lt_sweep(h, &g->d, g->A, g->B, g->C, g->D, ws, lim[w], NULL, 1, 3, c, &m);
        if (st) {
            printf(" %zuMiB: %s;", lim[w] / MIB, teexec_status_message(st));
            teexec_status_destroy(st);
        } else {
            printf(" %zuMiB %.4f ms (ws %zu);", lim[w] / MIB, m ? c[0].ms : -1.0, m ? c[0].workspace : 0);
        }
    }
    printf("\n");
    fflush(stdout);
}

/* Median ms of `reps` back-to-back passes over the list (3 warm-up passes). */
static double time_list(tx_gemm_lt *h, gemm *list, int n, void *ws, int reps, double *per)
{
    cudaEvent_t ev[2];
    die_cuda(cudaEventCreate(&ev[0]), "event");
    die_cuda(cudaEventCreate(&ev[1]), "event");
    for (int w = 0; w < 3; w++)
        for (int i = 0; i < n; i++)
            die_status(tx_gemm_lt_run(h, &list[i].d, list[i].A, list[i].B, list[i].C, list[i].D, ws,
                                      NULL),
                       list[i].name);
    die_cuda(cudaDeviceSynchronize(), "warm-up");
    double t[64];
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; r++) {
        die_cuda(cudaEventRecord(ev[0], 0), "event");
        for (int i = 0; i < n; i++)
            die_status(tx_gemm_lt_run(h, &list[i].d, list[i].A, list[i].B, list[i].C, list[i].D, ws,
                                      NULL),
                       list[i].name);
        die_cuda(cudaEventRecord(ev[1], 0), "event");
        die_cuda(cudaEventSynchronize(ev[1]), "event");
        float ms = 0.0f;
        die_cuda(cudaEventElapsedTime(&ms, ev[0], ev[1]), "event");
        t[r] = ms;
    }
    /* per GEMM (one pass, events around each): where the sequence's time goes */
    for (int i = 0; i < n && per; i++) {
        float best = 1e30f;
        for (int r = 0; r < 3; r++) {
            die_cuda(cudaEventRecord(ev[0], 0), "event");
            die_status(tx_gemm_lt_run(h, &list[i].d, list[i].A, list[i].B, list[i].C, list[i].D, ws,
                                      NULL),
                       list[i].name);
            die_cuda(cudaEventRecord(ev[1], 0), "event");
            die_cuda(cudaEventSynchronize(ev[1]), "event");
            float ms = 0.0f;
            die_cuda(cudaEventElapsedTime(&ms, ev[0], ev[1]), "event");
            if (ms < best) best = ms;
        }
        per[i] = best;
    }
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[reps / 2];
}

static void sequence(const char *label, gemm *list, int n, size_t ws_bytes, void *ws,
                     const tx_gemm_tune_config *cfg)
{
    tx_gemm_lt *h = NULL;
    die_status(tx_gemm_lt_create(ws_bytes, &h), "tx_gemm_lt_create");
    tx_gemm_lt_set_tune(h, cfg);
    double per[16] = {0}, fl = 0.0;
    for (int i = 0; i < n; i++) fl += flops(&list[i]);
    const double ms = time_list(h, list, n, ws, 15, per);
    printf("sequence %-28s %8.4f ms  %6.0f TF/s |", label, ms, fl / (ms * 1e9));
    for (int i = 0; i < n; i++) printf(" %s %.4f", list[i].name, per[i]);
    printf("\n");
    for (size_t i = 0; i < tx_gemm_lt_get_stats(h).cache_entries; i++) {
        tx_gemm_lt_choice c;
        if (tx_gemm_lt_choice_at(h, i, &c)) continue;
        if (c.tuned)
            printf("  chose m=%lld n=%lld k=%lld %s%s: answer %d of %d, %.4f ms (first %.4f) algo=%d "
                   "tile=%d splitk=%d\n",
                   (long long)c.m, (long long)c.n, (long long)c.k, c.transa ? "T" : "N",
                   c.transb ? "T" : "N", c.chosen, c.candidates, c.chosen_ms, c.first_ms, c.algo_id,
                   c.tile_id, c.splitk);
    }
    fflush(stdout);
    tx_gemm_lt_destroy(h);
}

int main(int argc, char **argv)
{
    long T = 8192, H = 4096, F = 16384;
    int want = 24, do_sweep = 1, do_fp8 = 1, ntune = 0;
    const char *tunes[8];
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--tokens") && a + 1 < argc) T = atol(argv[++a]);
        else if (!strcmp(argv[a], "--hidden") && a + 1 < argc) H = atol(argv[++a]);
        else if (!strcmp(argv[a], "--ffn") && a + 1 < argc) F = atol(argv[++a]);
        else if (!strcmp(argv[a], "--want") && a + 1 < argc) want = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--tune") && a + 1 < argc && ntune < 8) tunes[ntune++] = argv[++a];
        else if (!strcmp(argv[a], "--no-sweep")) do_sweep = 0;
        else if (!strcmp(argv[a], "--no-fp8")) do_fp8 = 0;
        else {
            fprintf(stderr, "usage: gemm_study [--tokens T] [--hidden H] [--ffn F] [--want N] "
                            "[--tune NxR]... [--no-sweep] [--no-fp8]\n");
            return 2;
        }
    }
    if (T <= 0 || H <= 0 || F <= 0 || T % 16 || H % 16 || F % 16) {
        fprintf(stderr, "gemm_study: tokens, hidden and ffn must be positive multiples of 16\n");
        return 2;
    }
    const size_t ws_bytes = 256 * MIB;
    tx_gemm_lt *h = NULL;
    die_status(tx_gemm_lt_create(ws_bytes, &h), "tx_gemm_lt_create");
    struct cudaDeviceProp prop;
    die_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("gemm_study: %s (sm_%d), cuBLASLt %zu; MLP T=%ld H=%ld F=%ld\n", prop.name, tx_gemm_lt_sm(h),
           tx_gemm_lt_cublas_version(h), T, H, F);
    void *ws = NULL;
    die_cuda(cudaMalloc(&ws, ws_bytes), "cudaMalloc workspace");

    const size_t e = 2;
    /* forward: x -> fc1 (+bias, GELU; pre-activation aux) -> h -> fc2 (+bias, +residual x) -> y */
    void *x = dev_random((size_t)T * H * e, 0), *w1 = dev_random((size_t)F * H * e, 0);
    void *b1 = dev_random((size_t)F * e, 0), *w2 = dev_random((size_t)H * F * e, 0);
    void *b2 = dev_random((size_t)H * e, 0), *hh = dev_random((size_t)T * F * e, 0);
    void *aux = dev_random((size_t)T * F * e, 0), *y = dev_random((size_t)T * H * e, 0);
    /* backward: dy (of y) -> fc2 dgrad dh, wgrad dw2; dh1 (of fc1's output) -> dx, dw1 */
    void *dy = dev_random((size_t)T * H * e, 0), *dh = dev_random((size_t)T * F * e, 0);
    void *dh1 = dev_random((size_t)T * F * e, 0), *dx = dev_random((size_t)T * H * e, 0);
    void *dw1 = dev_random((size_t)F * H * e, 0), *dw2 = dev_random((size_t)H * F * e, 0);
    void *db = dev_random((size_t)F * e, 0);

    gemm g[10];
    memset(g, 0, sizeof g);
    for (int i = 0; i < 10; i++) {
        g[i].d.a_type = g[i].d.b_type = g[i].d.d_type = TEEXEC_DTYPE_BFLOAT16;
        g[i].d.alpha = 1.0f;
    }
    /* te_cuda_linear.c's hp_gemm: FPROP TN (A = w, B = x), DGRAD NN (A = w,
     * B = dy), WGRAD NT (A = x, B = dy) */
    g[0] = (gemm){"fc1_fprop", g[0].d, w1, x, NULL, hh};
    g[0].d.m = F, g[0].d.n = T, g[0].d.k = H, g[0].d.transa = 1;
    g[0].d.epilogue = TX_GEMM_EPI_GELU_AUX_BIAS, g[0].d.bias = b1, g[0].d.aux = aux, g[0].d.aux_ld = F;
    g[1] = (gemm){"fc2_fprop", g[1].d, w2, hh, x, y};
    g[1].d.m = H, g[1].d.n = T, g[1].d.k = F, g[1].d.transa = 1, g[1].d.beta = 1.0f;
    g[1].d.epilogue = TX_GEMM_EPI_BIAS, g[1].d.bias = b2;
    g[2] = (gemm){"fc2_dgrad", g[2].d, w2, dy, NULL, dh};
    g[2].d.m = F, g[2].d.n = T, g[2].d.k = H;
    g[3] = (gemm){"fc2_wgrad", g[3].d, hh, dy, NULL, dw2};
    g[3].d.m = F, g[3].d.n = H, g[3].d.k = T, g[3].d.transb = 1;
    g[4] = (gemm){"fc1_dgrad", g[4].d, w1, dh1, NULL, dx};
    g[4].d.m = H, g[4].d.n = T, g[4].d.k = F;
    g[5] = (gemm){"fc1_wgrad", g[5].d, x, dh1, NULL, dw1};
    g[5].d.m = H, g[5].d.n = F, g[5].d.k = T, g[5].d.transb = 1;
    /* the dGELU + dbias epilogue variant of fc2's dgrad (not used at ffn 16384) */
    g[6] = g[2];
    g[6].name = "fc2_dgrad_dgelu";
    g[6].d.epilogue = TX_GEMM_EPI_DGELU_BGRAD, g[6].d.aux = aux, g[6].d.aux_ld = F, g[6].d.bias = db;

    /* what the forward epilogues cost: fc1 without GELU (bias only), fc2
     * without the residual (beta = 0) */
    g[7] = g[0];
    g[7].name = "fc1_fprop_bias_only";
    g[7].d.epilogue = TX_GEMM_EPI_BIAS, g[7].d.aux = NULL, g[7].d.aux_ld = 0;
    g[8] = g[1];
    g[8].name = "fc2_fprop_no_residual";
    g[8].d.beta = 0.0f, g[8].C = NULL;

    if (do_sweep) {
        for (int i = 0; i < 9; i++) {
            sweep(h, &g[i], ws, want);
            if (i >= 2 && i <= 5) {
                /* the same m x n x k as a TN GEMM over K-major operands (the
                 * buffers hold the same element counts; only the layout differs) */
                gemm tn = g[i];
                tn.name = "(same mnk as TN)";
                tn.d.transa = 1, tn.d.transb = 0, tn.d.epilogue = TX_GEMM_EPI_NONE;
                sweep(h, &tn, ws, 4);
            }
        }
    }

    tx_gemm_tune_config off = tx_gemm_tune_off(), old = tx_gemm_tune_from_env("8x1", false);
    sequence("bf16 step, heuristic", g, 6, 32 * MIB + 1024, ws, &off);
    sequence("bf16 step, tune 8x1 (former)", g, 6, 32 * MIB + 1024, ws, &old);
    for (int t = 0; t < ntune; t++) {
        tx_gemm_tune_config c = tx_gemm_tune_from_env(tunes[t], false);
        char label[64];
        snprintf(label, sizeof label, "bf16 step, tune %s", tunes[t]);
        sequence(label, g, 6, 32 * MIB + 1024, ws, &c);
        snprintf(label, sizeof label, "bf16 step, tune %s ws256", tunes[t]);
        sequence(label, g, 6, 256 * MIB, ws, &c);
    }

    if (do_fp8) {
        /* fp8-current (HYBRID: E4M3 forward, E5M2 grads), linear_gemm.c's TN
         * copies: FPROP (A = w row, B = x row, fast accumulation), DGRAD
         * (A = w col [K,N], B = dy row), WGRAD (A = x col [K,T], B = dy col
         * [N,T]), split accumulation for the grads; bf16 out */
        float *ones = NULL;
        const float one[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        die_cuda(cudaMalloc((void **)&ones, sizeof one), "cudaMalloc");
        die_cuda(cudaMemcpy(ones, one, sizeof one, cudaMemcpyHostToDevice), "upload");
        void *x8 = dev_random((size_t)T * H, 1), *w18 = dev_random((size_t)F * H, 1);
        void *h8 = dev_random((size_t)T * F, 1), *w28 = dev_random((size_t)H * F, 1);
        void *dy8 = dev_random((size_t)T * H, 1), *dh8 = dev_random((size_t)T * F, 1);
        gemm q[6];
        memset(q, 0, sizeof q);
        const long mnk[6][3] = {{F, T, H}, {H, T, F}, {F, T, H}, {F, H, T}, {H, T, F}, {H, F, T}};
        const char *names[6] = {"fp8_fc1_fprop", "fp8_fc2_fprop", "fp8_fc2_dgrad",
                                "fp8_fc2_wgrad", "fp8_fc1_dgrad", "fp8_fc1_wgrad"};
        const void *qa[6] = {w18, w28, w28, h8, w18, x8}, *qb[6] = {x8, h8, dy8, dy8, dh8, dh8};
        void *qd[6] = {hh, y, dh, dw2, dx, dw1};
        for (int i = 0; i < 6; i++) {
            q[i].name = names[i];
            q[i].d.m = mnk[i][0], q[i].d.n = mnk[i][1], q[i].d.k = mnk[i][2];
            q[i].d.transa = 1;
            q[i].d.alpha = 1.0f;
            q[i].d.a_type = TEEXEC_DTYPE_FLOAT8E4M3FN;
            q[i].d.b_type = i < 2 ? TEEXEC_DTYPE_FLOAT8E4M3FN : TEEXEC_DTYPE_FLOAT8E5M2;
            q[i].d.d_type = TEEXEC_DTYPE_BFLOAT16;
            q[i].d.a_scale_mode = q[i].d.b_scale_mode = TX_GEMM_SCALE_TENSOR;
            q[i].d.a_scale_inv = ones, q[i].d.b_scale_inv = ones + 4;
            q[i].d.fast_accum = i < 2;
            q[i].A = qa[i], q[i].B = qb[i], q[i].D = qd[i];
        }
        q[0].d.epilogue = TX_GEMM_EPI_BIAS, q[0].d.bias = b1;
        q[1].d.epilogue = TX_GEMM_EPI_BIAS, q[1].d.bias = b2, q[1].d.beta = 1.0f, q[1].C = x;
        q[1].d.c_type = TEEXEC_DTYPE_BFLOAT16;
        if (do_sweep)
            for (int i = 0; i < 6; i++) sweep(h, &q[i], ws, want);
        sequence("fp8 step, heuristic", q, 6, 32 * MIB + 1024, ws, &off);
        sequence("fp8 step, tune 8x1 (former)", q, 6, 32 * MIB + 1024, ws, &old);
        for (int t = 0; t < ntune; t++) {
            tx_gemm_tune_config c = tx_gemm_tune_from_env(tunes[t], false);
            char label[64];
            snprintf(label, sizeof label, "fp8 step, tune %s", tunes[t]);
            sequence(label, q, 6, 32 * MIB + 1024, ws, &c);
        }
    }
    tx_gemm_lt_destroy(h);
    return 0;
}
