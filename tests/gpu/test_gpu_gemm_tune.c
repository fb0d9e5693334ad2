/* GPU test: cuBLASLt autotuning (kernels/cuda/gemm_lt.h, gemm_select.h).
 *  - a tuned handle's results equal an untuned handle's within the GEMM
 *    tolerance (bf16 rtol 1.6e-2; FP8 inputs exact) on the MLP block's
 *    shapes at 16 tokens and on training-like layouts and epilogues;
 *  - tuning happens once per key: later calls query and time nothing;
 *  - an in-place accumulation (C == D, beta = 1) is not repeated for
 *    timing: D holds C + AB exactly once;
 *  - during stream capture the first heuristic answer is used and the key
 *    is tuned by the next uncaptured call; the captured graph replays right;
 *  - tuning off: no timed launch, the same choice and bytes in two handles;
 *  - the timing table: each MLP GEMM (16 and 8192 tokens, h=4096,
 *    ffn=16384), untuned vs tuned, with the chosen algorithm (stdout and
 *    $TEEXEC_GPU_RESULTS_DIR). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "base/numfmt.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/gemm_select.h"
#include "tests/gpu/gpu_harness.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F32 TEEXEC_DTYPE_FLOAT
#define E4 TEEXEC_DTYPE_FLOAT8E4M3FN

#define WS_BYTES ((size_t)32 * 1024 * 1024 + 1024)

static void *g_ws;
/* A pool of random small integers (bf16 and e4m3) that every GEMM reads
 * its A and B from: products sum exactly in FP32 in any order. */
#define POOL_ELEMS ((size_t)16384 * 16384)
static uint16_t *g_pool_bf16;
static uint8_t *g_pool_e4;

static uint64_t rng_state = 12345;
static uint32_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static void make_pools(void)
{
    /* one random 1 Mi-element block repeated: fills 256 Mi elements quickly */
    const size_t blk = (size_t)1 << 20;
    uint16_t *hb = malloc(blk * sizeof *hb);
    uint8_t *he = malloc(blk);
    assert_non_null(hb);
    assert_non_null(he);
    for (size_t i = 0; i < blk; i++) {
        const int v = (int)(rnd() % 9) - 4; /* [-4, 4] */
        hb[i] = tx_f32_to_bf16((float)v);
        he[i] = tx_f32_to_fp8(E4, (float)v, 1);
    }
    g_pool_bf16 = tg_dev_alloc(POOL_ELEMS * 2);
    g_pool_e4 = tg_dev_alloc(POOL_ELEMS);
    for (size_t off = 0; off < POOL_ELEMS; off += blk) {
        tg_upload_to(g_pool_bf16 + off, hb, blk * 2);
        tg_upload_to(g_pool_e4 + off, he, blk);
    }
    free(hb);
    free(he);
}

static tx_gemm_lt *new_handle(bool tune)
{
    tx_gemm_lt *h = NULL;
    TG_OK(tx_gemm_lt_create(WS_BYTES, &h));
    if (tune) {
        tx_gemm_tune_config c = tx_gemm_tune_from_env(NULL, false);
        tx_gemm_lt_set_tune(h, &c);
        assert_true(tx_gemm_lt_tuning(h));
    } else {
        assert_false(tx_gemm_lt_tuning(h));
    }
    return h;
}

/* ---- one GEMM case, its buffers ------------------------------------------------ */

typedef struct tcase {
    const char *name;
    int64_t m, n, k;
    int transa, transb;
    teexec_dtype ab, d;
    tx_gemm_epilogue epi;
    int residual; /* beta = 1 with C in its own buffer */
} tcase;

typedef struct bufs {
    void *A, *B, *C, *D, *bias, *aux, *scale_a, *scale_b;
    size_t d_bytes, aux_bytes, bias_bytes;
} bufs;

static size_t esz(teexec_dtype t) { return t == F32 ? 4 : t == E4 ? 1 : 2; }

static void make_desc(const tcase *c, bufs *b, tx_gemm_desc *d)
{
    memset(d, 0, sizeof *d);
    d->m = c->m;
    d->n = c->n;
    d->k = c->k;
    d->transa = c->transa;
    d->transb = c->transb;
    d->a_type = d->b_type = c->ab;
    d->d_type = c->d;
    d->alpha = 1.0f;
    d->epilogue = c->epi;
    const size_t mn = (size_t)(c->m * c->n);
    b->d_bytes = mn * esz(c->d);
    b->aux_bytes = b->d_bytes;
    b->bias_bytes = (size_t)(c->epi == TX_GEMM_EPI_BGRADB ? c->n : c->m) * esz(c->d);
    b->A = c->ab == E4 ? (void *)g_pool_e4 : (void *)g_pool_bf16;
    /* B starts elsewhere in the pool; reads may overlap */
    b->B = c->ab == E4 ? (void *)(g_pool_e4 + 4096) : (void *)(g_pool_bf16 + 4096);
    if (c->ab == E4) {
        const float one = 1.0f;
        b->scale_a = tg_dev_upload(&one, sizeof one);
        b->scale_b = tg_dev_upload(&one, sizeof one);
        d->a_scale_mode = d->b_scale_mode = TX_GEMM_SCALE_TENSOR;
        d->a_scale_inv = b->scale_a;
        d->b_scale_inv = b->scale_b;
        d->fast_accum = 1;
    }
    b->D = tg_dev_alloc(b->d_bytes);
    if (c->residual) {
        d->beta = 1.0f;
        b->C = g_pool_bf16 + 8192; /* read only: random small integers */
    }
    if (c->epi != TX_GEMM_EPI_NONE) {
        b->bias = tg_dev_alloc(b->bias_bytes);
        d->bias = b->bias;
    }
    if (c->epi == TX_GEMM_EPI_BIAS || c->epi == TX_GEMM_EPI_GELU_AUX_BIAS) {
        /* the bias: the pool's first values */
        cudaMemcpy(b->bias, g_pool_bf16 + 100, b->bias_bytes, cudaMemcpyDeviceToDevice);
    }
    if (c->epi == TX_GEMM_EPI_GELU_AUX_BIAS || c->epi == TX_GEMM_EPI_DGELU_BGRAD) {
        b->aux = tg_dev_alloc(b->aux_bytes);
        if (c->epi == TX_GEMM_EPI_DGELU_BGRAD)
            cudaMemcpy(b->aux, g_pool_bf16 + 300, b->aux_bytes, cudaMemcpyDeviceToDevice);
        d->aux = b->aux;
        d->aux_ld = c->m;
    }
    tg_sync("buffers");
}

static void free_bufs(bufs *b)
{
    tg_dev_free(b->D);
    tg_dev_free(b->bias);
    tg_dev_free(b->aux);
    tg_dev_free(b->scale_a);
    tg_dev_free(b->scale_b);
    memset(b, 0, sizeof *b);
}

static void *download(const void *dev, size_t bytes)
{
    void *h = malloc(bytes + 1);
    assert_non_null(h);
    tg_download(h, dev, bytes);
    return h;
}

/* Values outside rtol 1.6e-2 (atol 1e-2) of each other, as bf16 / fp32. */
static size_t count_far(teexec_dtype t, const void *a, const void *b, size_t bytes, size_t *equal)
{
    const size_t n = bytes / esz(t);
    size_t far = 0;
    *equal = 0;
    for (size_t i = 0; i < n; i++) {
        double x, y;
        if (t == F32) {
            x = ((const float *)a)[i];
            y = ((const float *)b)[i];
        } else {
            x = tx_bf16_to_f32(((const uint16_t *)a)[i]);
            y = tx_bf16_to_f32(((const uint16_t *)b)[i]);
        }
        if (x == y || (isnan(x) && isnan(y))) {
            (*equal)++;
            continue;
        }
        if (!(fabs(x - y) <= 1e-2 + 1.6e-2 * fabs(y))) {
            if (!far)
                fprintf(stderr, "  first difference at %zu: tuned %.9g untuned %.9g\n", i, x, y);
            far++;
        }
    }
    return far;
}

/* ---- tuned vs untuned ------------------------------------------------------- */

static const tcase cases[] = {
    /* the MLP block at 16 tokens: fc1 (+bias+GELU, aux), fc2 (+bias, +residual) */
    {"mlp16_fc1_gelu", 16384, 16, 4096, 1, 0, BF16, BF16, TX_GEMM_EPI_GELU_AUX_BIAS, 0},
    {"mlp16_fc2_bias_residual", 4096, 16, 16384, 1, 0, BF16, BF16, TX_GEMM_EPI_BIAS, 1},
    /* training-like layouts at a moderate size */
    {"fprop_tn_bias", 2048, 512, 1024, 1, 0, BF16, BF16, TX_GEMM_EPI_BIAS, 0},
    {"dgrad_nn_dgelu_bgrad", 1024, 512, 2048, 0, 0, BF16, BF16, TX_GEMM_EPI_DGELU_BGRAD, 0},
    {"wgrad_nt_fp32_bgradb", 1024, 2048, 512, 0, 1, BF16, F32, TX_GEMM_EPI_BGRADB, 0},
    {"wgrad_nt_residual", 1024, 2048, 512, 0, 1, BF16, BF16, TX_GEMM_EPI_NONE, 1},
    {"fp8_tn_bf16_out", 4096, 256, 4096, 1, 0, E4, BF16, TX_GEMM_EPI_NONE, 0},
};

static void test_tuned_equals_untuned(void **state)
{
    const tcase *c = *state;
    tx_gemm_lt *hu = new_handle(false), *ht = new_handle(true);
    bufs bu, bt;
    memset(&bu, 0, sizeof bu);
    memset(&bt, 0, sizeof bt);
    tx_gemm_desc du, dt;
    make_desc(c, &bu, &du);
    make_desc(c, &bt, &dt);
    TG_OK(tx_gemm_lt_run(hu, &du, bu.A, bu.B, bu.C, bu.D, g_ws, NULL));
    tg_sync(c->name);
    TG_OK(tx_gemm_lt_run(ht, &dt, bt.A, bt.B, bt.C, bt.D, g_ws, NULL));
    tg_sync(c->name);
    const tx_gemm_lt_stats s1 = tx_gemm_lt_get_stats(ht);
    assert_int_equal(s1.cache_entries, 1);
    assert_int_equal(s1.tuned, 1);
    assert_true(s1.timed_runs >= 4); /* at least one candidate: warm-up + 3 */
    /* the same call again: cached, nothing queried or timed */
    TG_OK(tx_gemm_lt_run(ht, &dt, bt.A, bt.B, bt.C, bt.D, g_ws, NULL));
    tg_sync(c->name);
    const tx_gemm_lt_stats s2 = tx_gemm_lt_get_stats(ht);
    assert_int_equal(s2.heuristic_queries, s1.heuristic_queries);
    assert_int_equal(s2.timed_runs, s1.timed_runs);
    assert_int_equal(s2.runs, s1.runs + 1);
    tx_gemm_lt_choice ch;
    TG_OK(tx_gemm_lt_choice_at(ht, 0, &ch));
    assert_true(ch.tuned);
    assert_true(ch.chosen >= 0 && ch.chosen < ch.candidates);
    assert_true(ch.chosen_ms > 0.0);
    if (ch.first_ms >= 0.0) assert_true(ch.chosen_ms <= ch.first_ms);

    size_t bad = 0, eq = 0, eq2 = 0;
    void *xu = download(bu.D, bu.d_bytes), *xt = download(bt.D, bt.d_bytes);
    bad += count_far(c->d, xt, xu, bu.d_bytes, &eq);
    free(xu);
    free(xt);
    if (c->epi == TX_GEMM_EPI_GELU_AUX_BIAS) {
        xu = download(bu.aux, bu.aux_bytes);
        xt = download(bt.aux, bt.aux_bytes);
        bad += count_far(c->d, xt, xu, bu.aux_bytes, &eq2);
        free(xu);
        free(xt);
    }
    if (c->epi == TX_GEMM_EPI_DGELU_BGRAD || c->epi == TX_GEMM_EPI_BGRADB) {
        xu = download(bu.bias, bu.bias_bytes);
        xt = download(bt.bias, bt.bias_bytes);
        bad += count_far(c->d, xt, xu, bu.bias_bytes, &eq2);
        free(xu);
        free(xt);
    }
    char detail[320];
    snprintf(detail, sizeof detail,
             "m=%lld n=%lld k=%lld: kept answer %d of %d (%.4f ms, first answer %.4f ms; algo %d "
             "tile %d splitK %d reduction %d); D bytes equal %zu of %zu; %zu outside tolerance",
             (long long)c->m, (long long)c->n, (long long)c->k, ch.chosen, ch.candidates,
             ch.chosen_ms, ch.first_ms, ch.algo_id, ch.tile_id, ch.splitk, ch.reduction_scheme, eq,
             bu.d_bytes / esz(c->d), bad);
    printf("tune %s: %s\n", c->name, detail);
    tg_record(c->name, bad == 0, detail);
    free_bufs(&bu);
    free_bufs(&bt);
    tx_gemm_lt_destroy(hu);
    tx_gemm_lt_destroy(ht);
    if (bad) fail_msg("%s: %zu values differ beyond the tolerance", c->name, bad);
}

/* ---- C == D, beta = 1: accumulated once ------------------------------------- */

static void test_in_place_accumulation(void **state)
{
    (void)state;
    tx_gemm_lt *ht = new_handle(true), *hu = new_handle(false);
    tx_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = 512;
    d.n = 256;
    d.k = 1024;
    d.transa = 1;
    d.a_type = d.b_type = BF16;
    d.d_type = F32;
    d.alpha = 1.0f;
    d.beta = 1.0f;
    const size_t bytes = (size_t)(d.m * d.n) * 4;
    float *h0 = malloc(bytes);
    assert_non_null(h0);
    for (size_t i = 0; i < (size_t)(d.m * d.n); i++) h0[i] = (float)((int)(rnd() % 64) - 32);
    void *Dt = tg_dev_upload(h0, bytes), *Du = tg_dev_upload(h0, bytes);
    TG_OK(tx_gemm_lt_run(ht, &d, g_pool_bf16, g_pool_bf16 + 777, Dt, Dt, g_ws, NULL));
    TG_OK(tx_gemm_lt_run(hu, &d, g_pool_bf16, g_pool_bf16 + 777, Du, Du, g_ws, NULL));
    tg_sync("in place");
    const tx_gemm_lt_stats s = tx_gemm_lt_get_stats(ht);
    assert_int_equal(s.tuned, 0);
    assert_int_equal(s.timed_runs, 0);
    assert_true(s.tune_deferred >= 1);
    /* FP32 sums of small integers are exact: the two must be identical */
    float *xt = download(Dt, bytes), *xu = download(Du, bytes);
    const size_t diff = tg_cmp_floats("in-place accumulation", xu, xt, (size_t)(d.m * d.n));
    /* and D changed: C + AB, not C */
    size_t changed = 0;
    for (size_t i = 0; i < (size_t)(d.m * d.n); i++) changed += xt[i] != h0[i];
    char detail[160];
    snprintf(detail, sizeof detail, "C == D beta=1: not timed (deferred %llu); %zu of %zu differ "
             "from the untuned handle; %zu changed",
             (unsigned long long)s.tune_deferred, diff, (size_t)(d.m * d.n), changed);
    tg_record("gemm_tune_in_place", diff == 0 && changed > 0, detail);
    free(h0);
    free(xt);
    free(xu);
    tg_dev_free(Dt);
    tg_dev_free(Du);
    tx_gemm_lt_destroy(ht);
    tx_gemm_lt_destroy(hu);
    assert_int_equal(diff, 0);
    assert_true(changed > 0);
}

/* ---- capture ------------------------------------------------------------------- */

static void test_capture_defers(void **state)
{
    (void)state;
    tx_gemm_lt *ht = new_handle(true);
    const tcase c = {"capture", 4096, 16, 16384, 1, 0, BF16, BF16, TX_GEMM_EPI_BIAS, 1};
    bufs b;
    memset(&b, 0, sizeof b);
    tx_gemm_desc d;
    make_desc(&c, &b, &d);
    cudaStream_t s = NULL;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    teexec_status *st = tx_gemm_lt_run(ht, &d, b.A, b.B, b.C, b.D, g_ws, s);
    assert_int_equal(cudaStreamEndCapture(s, &graph), cudaSuccess);
    TG_OK(st);
    tx_gemm_lt_stats s1 = tx_gemm_lt_get_stats(ht);
    assert_int_equal(s1.tuned, 0);
    assert_int_equal(s1.timed_runs, 0);
    assert_true(s1.tune_deferred >= 1);
    assert_int_equal(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(b.D, 0, b.d_bytes, s), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    void *from_graph = download(b.D, b.d_bytes);
    /* the next uncaptured call tunes the key */
    assert_int_equal(cudaMemsetAsync(b.D, 0, b.d_bytes, s), cudaSuccess);
    TG_OK(tx_gemm_lt_run(ht, &d, b.A, b.B, b.C, b.D, g_ws, s));
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    tx_gemm_lt_stats s2 = tx_gemm_lt_get_stats(ht);
    assert_int_equal(s2.tuned, 1);
    assert_int_equal(s2.cache_entries, 1);
    void *tuned = download(b.D, b.d_bytes);
    size_t eq = 0;
    const size_t far = count_far(BF16, tuned, from_graph, b.d_bytes, &eq);
    char detail[200];
    snprintf(detail, sizeof detail, "captured call untuned (deferred %llu), graph replayed, then "
             "tuned uncaptured: %zu of %zu outside tolerance, %zu equal",
             (unsigned long long)s1.tune_deferred, far, b.d_bytes / 2, eq);
    tg_record("gemm_tune_capture", far == 0, detail);
    free(from_graph);
    free(tuned);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    free_bufs(&b);
    tx_gemm_lt_destroy(ht);
    assert_int_equal(far, 0);
}

/* ---- tuning off: reproducible --------------------------------------------------- */

static void test_off_is_reproducible(void **state)
{
    (void)state;
    const tcase c = {"off", 4096, 16, 16384, 1, 0, BF16, BF16, TX_GEMM_EPI_BIAS, 1};
    tx_gemm_lt *h1 = new_handle(false), *h2 = NULL;
    TG_OK(tx_gemm_lt_create(WS_BYTES, &h2));
    /* the executor's deterministic setting, with the variable asking for tuning */
    tx_gemm_tune_config det = tx_gemm_tune_from_env("16", true);
    tx_gemm_lt_set_tune(h2, &det);
    assert_false(tx_gemm_lt_tuning(h2));
    bufs b1, b2;
    memset(&b1, 0, sizeof b1);
    memset(&b2, 0, sizeof b2);
    tx_gemm_desc d1, d2;
    make_desc(&c, &b1, &d1);
    make_desc(&c, &b2, &d2);
    TG_OK(tx_gemm_lt_run(h1, &d1, b1.A, b1.B, b1.C, b1.D, g_ws, NULL));
    tg_sync("off");
    TG_OK(tx_gemm_lt_run(h2, &d2, b2.A, b2.B, b2.C, b2.D, g_ws, NULL));
    tg_sync("off");
    assert_int_equal(tx_gemm_lt_get_stats(h1).timed_runs, 0);
    assert_int_equal(tx_gemm_lt_get_stats(h2).timed_runs, 0);
    tx_gemm_lt_choice c1, c2;
    TG_OK(tx_gemm_lt_choice_at(h1, 0, &c1));
    TG_OK(tx_gemm_lt_choice_at(h2, 0, &c2));
    assert_false(c1.tuned);
    assert_int_equal(c1.algo_id, c2.algo_id);
    assert_int_equal(c1.tile_id, c2.tile_id);
    assert_int_equal(c1.splitk, c2.splitk);
    uint8_t *x1 = download(b1.D, b1.d_bytes), *x2 = download(b2.D, b2.d_bytes);
    const size_t diff = tg_cmp_bytes("tuning off", x1, x2, b1.d_bytes);
    teexec_status *st = tx_gemm_lt_choice_at(h1, 1, &c1);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    char detail[160];
    snprintf(detail, sizeof detail, "heuristic answer algo %d tile %d splitK %d in both; %zu bytes differ",
             c2.algo_id, c2.tile_id, c2.splitk, diff);
    tg_record("gemm_tune_off", diff == 0, detail);
    free(x1);
    free(x2);
    free_bufs(&b1);
    free_bufs(&b2);
    tx_gemm_lt_destroy(h1);
    tx_gemm_lt_destroy(h2);
    assert_int_equal(diff, 0);
}

/* ---- the timing table ------------------------------------------------------------ */

static double time_calls(tx_gemm_lt *h, const tx_gemm_desc *d, const bufs *b, int iters)
{
    cudaEvent_t e0, e1;
    assert_int_equal(cudaEventCreate(&e0), cudaSuccess);
    assert_int_equal(cudaEventCreate(&e1), cudaSuccess);
    TG_OK(tx_gemm_lt_run(h, d, b->A, b->B, b->C, b->D, g_ws, NULL)); /* caches (and tunes) */
    tg_sync("warm-up");
    assert_int_equal(cudaEventRecord(e0, NULL), cudaSuccess);
    for (int i = 0; i < iters; i++) TG_OK(tx_gemm_lt_run(h, d, b->A, b->B, b->C, b->D, g_ws, NULL));
    assert_int_equal(cudaEventRecord(e1, NULL), cudaSuccess);
    assert_int_equal(cudaEventSynchronize(e1), cudaSuccess);
    float ms = 0;
    assert_int_equal(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return (double)ms / iters;
}

static const tcase timed[] = {
    {"T16 fc1 fprop +bias+GELU", 16384, 16, 4096, 1, 0, BF16, BF16, TX_GEMM_EPI_GELU_AUX_BIAS, 0},
    {"T16 fc2 fprop +bias+residual", 4096, 16, 16384, 1, 0, BF16, BF16, TX_GEMM_EPI_BIAS, 1},
    {"T16 fc1 fprop plain", 16384, 16, 4096, 1, 0, BF16, BF16, TX_GEMM_EPI_NONE, 0},
    {"T16 fc2 fprop plain", 4096, 16, 16384, 1, 0, BF16, BF16, TX_GEMM_EPI_NONE, 0},
    {"T8192 fc1 fprop +bias+GELU", 16384, 8192, 4096, 1, 0, BF16, BF16, TX_GEMM_EPI_GELU_AUX_BIAS, 0},
    {"T8192 fc2 fprop +bias+residual", 4096, 8192, 16384, 1, 0, BF16, BF16, TX_GEMM_EPI_BIAS, 1},
    {"T8192 fc2 dgrad +dGELU+dbias", 16384, 8192, 4096, 0, 0, BF16, BF16, TX_GEMM_EPI_DGELU_BGRAD, 0},
    {"T8192 fc1 dgrad", 4096, 8192, 16384, 0, 0, BF16, BF16, TX_GEMM_EPI_NONE, 0},
    {"T8192 fc1 wgrad", 4096, 16384, 8192, 0, 1, BF16, BF16, TX_GEMM_EPI_NONE, 0},
    {"T8192 fc2 wgrad", 16384, 4096, 8192, 0, 1, BF16, BF16, TX_GEMM_EPI_NONE, 0},
    {"T8192 fc1 fprop fp8", 16384, 8192, 4096, 1, 0, E4, BF16, TX_GEMM_EPI_NONE, 0},
};

static void test_timing_table(void **state)
{
    (void)state;
    printf("%-32s %7s %6s %6s %10s %10s %7s %8s %s\n", "GEMM (h=4096 ffn=16384)", "m", "n", "k",
           "untuned ms", "tuned ms", "speedup", "TFLOP/s", "choice");
    double sum_u16 = 0, sum_t16 = 0;
    for (size_t i = 0; i < sizeof timed / sizeof timed[0]; i++) {
        const tcase *c = &timed[i];
        tx_gemm_lt *hu = new_handle(false), *ht = new_handle(true);
        bufs b;
        memset(&b, 0, sizeof b);
        tx_gemm_desc d;
        make_desc(c, &b, &d);
        const int iters = c->n <= 16 ? 200 : 20;
        const double tu = time_calls(hu, &d, &b, iters);
        const double tt = time_calls(ht, &d, &b, iters);
        /* again untuned: the order must not favour one side */
        const double tu2 = time_calls(hu, &d, &b, iters);
        const double u = tu < tu2 ? tu : tu2;
        tx_gemm_lt_choice ch;
        TG_OK(tx_gemm_lt_choice_at(ht, 0, &ch));
        tx_gemm_lt_choice cu;
        TG_OK(tx_gemm_lt_choice_at(hu, 0, &cu));
        const double tflops = 2.0 * (double)c->m * (double)c->n * (double)c->k / (tt * 1e-3) / 1e12;
        char detail[400];
        snprintf(detail, sizeof detail,
                 "%7lld %6lld %6lld %10.4f %10.4f %6.3fx %8.1f tuned: answer %d of %d (algo %d tile %d "
                 "splitK %d red %d, %.2f s tuning); untuned: algo %d tile %d splitK %d",
                 (long long)c->m, (long long)c->n, (long long)c->k, u, tt, u / tt, tflops, ch.chosen,
                 ch.candidates, ch.algo_id, ch.tile_id, ch.splitk, ch.reduction_scheme,
                 tx_gemm_lt_get_stats(ht).tune_ms * 1e-3, cu.algo_id, cu.tile_id, cu.splitk);
        printf("%-32s %s\n", c->name, detail);
        char name[96];
        snprintf(name, sizeof name, "gemm_tune_timing %s", c->name);
        tg_record(name, 1, detail);
        if (i < 2) {
            sum_u16 += u;
            sum_t16 += tt;
        }
        free_bufs(&b);
        tx_gemm_lt_destroy(hu);
        tx_gemm_lt_destroy(ht);
    }
    printf("MLP block GEMMs at 16 tokens (fc1+GELU, fc2+residual): untuned %.4f ms, tuned %.4f ms\n",
           sum_u16, sum_t16);
    fflush(stdout);
}

/* tx_gemm_lt_sweep: every answer timed in the heuristic's order, the
 * workspace limit respected, the cache untouched, and a GEMM that cannot be
 * repeated (C == D, beta = 1) refused. */
static void test_sweep(void **state)
{
    (void)state;
    tx_gemm_lt *h = new_handle(false);
    tx_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.m = 1024;
    d.n = 512;
    d.k = 2048;
    d.transb = 1; /* NT, as a wgrad */
    d.a_type = d.b_type = d.d_type = BF16;
    d.alpha = 1.0f;
    void *D = tg_dev_alloc((size_t)(d.m * d.n) * 2);
    tx_gemm_lt_candidate c[TX_GEMM_TUNE_MAX_CANDIDATES];
    int n = 0;
    TG_OK(tx_gemm_lt_sweep(h, &d, g_pool_bf16, g_pool_bf16 + 4096, NULL, D, g_ws, WS_BYTES, NULL, 6,
                           2, c, &n));
    assert_true(n >= 1 && n <= 6);
    int n_timed = 0;
    for (int i = 0; i < n; i++) {
        n_timed += c[i].ms > 0.0;
        assert_true(c[i].workspace <= WS_BYTES);
        assert_true(c[i].algo_id >= 0);
    }
    assert_true(c[0].ms > 0.0); /* the heuristic's first answer always runs */
    const double first_ms = c[0].ms;
    const int n1 = n;
    int n0 = 0;
    TG_OK(tx_gemm_lt_sweep(h, &d, g_pool_bf16, g_pool_bf16 + 4096, NULL, D, g_ws, 0, NULL, 4, 1, c,
                           &n0));
    for (int i = 0; i < n0; i++) assert_int_equal(c[i].workspace, 0);
    assert_int_equal(tx_gemm_lt_get_stats(h).cache_entries, 0);
    assert_int_equal(tx_gemm_lt_get_stats(h).runs, 0);
    d.beta = 1.0f;
    teexec_status *st =
        tx_gemm_lt_sweep(h, &d, g_pool_bf16, g_pool_bf16 + 4096, D, D, g_ws, WS_BYTES, NULL, 4, 1, c, &n);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_int_equal(n, 0);
    teexec_status_destroy(st);
    char detail[128];
    snprintf(detail, sizeof detail, "NT 1024x512x2048: %d answers (%d timed, first %.4f ms); %d with "
             "no workspace", n1, n_timed, first_ms, n0);
    tg_record("gemm_sweep", n_timed >= 1, detail);
    tg_dev_free(D);
    tx_gemm_lt_destroy(h);
}

int main(void)
{
    tg_require_gpu("test_gpu_gemm_tune");
    g_ws = tg_dev_alloc(WS_BYTES);
    make_pools();
    enum { NC = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[NC + 5];
    size_t n = 0;
    for (size_t i = 0; i < NC; i++) {
        struct CMUnitTest t = {cases[i].name, test_tuned_equals_untuned, NULL, NULL, (void *)&cases[i]};
        tests[n++] = t;
    }
    const struct CMUnitTest extra[] = {
        cmocka_unit_test(test_in_place_accumulation),
        cmocka_unit_test(test_capture_defers),
        cmocka_unit_test(test_off_is_reproducible),
        cmocka_unit_test(test_timing_table),
        cmocka_unit_test(test_sweep),
    };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) tests[n++] = extra[i];
    const int rc = _cmocka_run_group_tests("test_gpu_gemm_tune", tests, n, NULL, NULL);
    tg_dev_free(g_pool_bf16);
    tg_dev_free(g_pool_e4);
    tg_dev_free(g_ws);
    return rc;
}
