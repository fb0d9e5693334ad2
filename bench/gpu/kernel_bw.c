/* kernel_bw.c - achieved memory bandwidth of the executor's memory-bound
 * CUDA kernels at the benchmark models' shapes (MLP h=4096 ffn=16384, GPT-2
 * h=2048; 8192 tokens), called exactly as the executor calls them (bf16
 * activations, FP32 norm weights and statistics, FP32 optimizer masters).
 *
 * Each entry is timed with CUDA events around one call, after 3 warm-up
 * calls, with the L2 cache flushed (a 256 MiB memset outside the events)
 * before every timed call; the figure is the median of 20. GB/s counts the
 * bytes one ideal pass must move: every input read once, every output
 * written once (a kernel that reads something twice shows up as lower GB/s);
 * "%" is of 4.0 TB/s, what a good copy kernel reaches on the H200.
 *
 * Before timing, every entry's result is checked once against a host
 * computation in double (bf16 outputs within 1.6e-2 relative, FP32
 * reductions within 1e-3, copies and the optimizer's masters exact); a
 * failing check is printed and makes the exit status 1.
 *
 * Usage: kernel_bw [--reps N] [--no-check] [--handoff-only]   Prints CHECK lines (unless
 * --no-check), TIME lines, then a markdown table. */
#include "base/half.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/handoff_act.h"
#include "kernels/cuda/loss_mse.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/quant_fp8.h"
#include "kernels/cuda/std_ops.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 3
#define MAX_REPS 100
#define PEAK_GBS 4000.0

static int reps = 20;
static int failures;
static int no_check; /* --no-check: timings only */
static int handoff_only; /* --handoff-only: only bench_handoff */
static void *flush_buf;
static const size_t flush_bytes = (size_t)256 << 20;

#define BENCH_NAME "kernel_bw"
#include "bench/gpu/bench_die.h"

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "kernel_bw: out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static void *dalloc(size_t n)
{
    void *p = NULL;
    die_cuda(cudaMalloc(&p, n ? n : 1), "cudaMalloc");
    die_cuda(cudaMemset(p, 0, n ? n : 1), "cudaMemset");
    return p;
}

static void *upload(const void *h, size_t n)
{
    void *d = dalloc(n);
    die_cuda(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice), "upload");
    return d;
}

static void *download(const void *d, size_t n)
{
    void *h = xmalloc(n);
    die_cuda(cudaDeviceSynchronize(), "before download");
    die_cuda(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost), "download");
    return h;
}

/* ---- deterministic host data ------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(double lo, double hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

static uint16_t *host_bf16(size_t n, double lo, double hi)
{
    uint16_t *h = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = tx_f32_to_bf16((float)urand(lo, hi));
    return h;
}

static float *host_f32(size_t n, double lo, double hi)
{
    float *h = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = (float)urand(lo, hi);
    return h;
}

static double bf(const uint16_t *p, size_t i) { return tx_bf16_to_f32(p[i]); }

/* ---- checks --------------------------------------------------------------- */

/* Max over i of |got - ref| / max(1, |ref|); reports and counts failures. */
typedef struct check {
    const char *name;
    double tol, worst;
    size_t at;
} check;

static void check_val(check *c, size_t i, double got, double ref)
{
    double e = fabs(got - ref) / (fabs(ref) > 1.0 ? fabs(ref) : 1.0);
    if (!(e <= c->worst)) { /* NaN counts as worst */
        c->worst = isnan(e) ? INFINITY : e;
        c->at = i;
    }
}

static void check_done(const check *c)
{
    int ok = c->worst <= c->tol;
    printf("CHECK %-44s %s  max rel err %.3g at %zu (tol %.3g)\n", c->name, ok ? "PASS" : "FAIL",
           c->worst, c->at, c->tol);
    if (!ok) failures++;
}

/* ---- timing --------------------------------------------------------------- */

typedef void (*run_fn)(void *ctx);

typedef struct entry {
    char name[96], shape[48];
    double bytes;
    float ms;
    int target; /* % of PEAK_GBS asked for */
} entry;

static entry entries[64];
static int n_entries;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void timed(const char *name, const char *shape, double bytes, int target, run_fn fn,
                  void *ctx)
{
    cudaEvent_t a, b;
    die_cuda(cudaEventCreate(&a), "cudaEventCreate");
    die_cuda(cudaEventCreate(&b), "cudaEventCreate");
    for (int i = 0; i < WARMUP; i++) fn(ctx);
    die_cuda(cudaDeviceSynchronize(), name);
    float t[MAX_REPS];
    for (int i = 0; i < reps; i++) {
        die_cuda(cudaMemsetAsync(flush_buf, i & 0xff, flush_bytes, 0), "L2 flush");
        die_cuda(cudaEventRecord(a, 0), "cudaEventRecord");
        fn(ctx);
        die_cuda(cudaEventRecord(b, 0), "cudaEventRecord");
        die_cuda(cudaEventSynchronize(b), name);
        die_cuda(cudaEventElapsedTime(&t[i], a, b), "cudaEventElapsedTime");
    }
    die_cuda(cudaGetLastError(), name);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    qsort(t, (size_t)reps, sizeof t[0], cmp_float);
    entry *e = &entries[n_entries++];
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->shape, sizeof e->shape, "%s", shape);
    e->bytes = bytes;
    e->ms = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2.0f;
    e->target = target;
    double gbs = bytes / (e->ms * 1e-3) / 1e9;
    printf("TIME %-40s %-22s %8.4f ms %7.0f GB/s %5.1f%%\n", name, shape, e->ms, gbs,
           100.0 * gbs / PEAK_GBS);
    fflush(stdout);
}

/* ---- norms ---------------------------------------------------------------- */

typedef struct norm_ctx {
    size_t rows, h;
    int rms, resid;
    uint16_t *hx, *hdy, *hres;
    float *hg, *hb;
    void *x, *dy, *y, *dx, *res;
    float *g, *b, *mu, *rs, *dg, *db, *ws;
} norm_ctx;

static void run_norm_fwd(void *p)
{
    norm_ctx *c = p;
    tx_cuda_norm_fwd a = {.rms = c->rms, .rows = c->rows, .h = c->h, .eps = 1e-5f,
                          .x = c->x, .x_dtype = TEEXEC_DTYPE_BFLOAT16, .gamma = c->g,
                          .beta = c->rms ? NULL : c->b, .w_dtype = TEEXEC_DTYPE_FLOAT,
                          .y = c->y, .y_dtype = TEEXEC_DTYPE_BFLOAT16,
                          .mu = c->rms ? NULL : c->mu, .rsigma = c->rs};
    die_status(tx_cuda_norm_forward(&a, NULL), "norm forward");
}

static void run_norm_bwd(void *p)
{
    norm_ctx *c = p;
    tx_cuda_norm_bwd a = {.rms = c->rms, .rows = c->rows, .h = c->h, .x = c->x,
                          .x_dtype = TEEXEC_DTYPE_BFLOAT16, .dy = c->dy,
                          .dy_dtype = TEEXEC_DTYPE_BFLOAT16, .gamma = c->g,
                          .w_dtype = TEEXEC_DTYPE_FLOAT, .mu = c->rms ? NULL : c->mu,
                          .rsigma = c->rs, .dx = c->dx, .dx_dtype = TEEXEC_DTYPE_BFLOAT16,
                          .dresid = c->resid ? c->res : NULL, .dgamma = c->dg,
                          .dbeta = c->rms ? NULL : c->db, .workspace = c->ws};
    die_status(tx_cuda_norm_backward(&a, NULL), "norm backward");
}

/* Host reference of one row: statistics as the CPU (two passes). */
static void norm_row_ref(const norm_ctx *c, size_t r, double *mu, double *rs)
{
    double s = 0.0, ss = 0.0;
    const size_t h = c->h;
    if (!c->rms)
        for (size_t j = 0; j < h; j++) s += bf(c->hx, r * h + j);
    double m = c->rms ? 0.0 : s / (double)h;
    for (size_t j = 0; j < h; j++) {
        double d = bf(c->hx, r * h + j) - m;
        ss += d * d;
    }
    *mu = m;
    *rs = 1.0 / sqrt(ss / (double)h + 1e-5);
}

static void check_norm(norm_ctx *c, const char *label)
{
    const size_t rows = c->rows, h = c->h, n = rows * h;
    run_norm_fwd(c);
    run_norm_bwd(c);
    uint16_t *y = download(c->y, n * 2), *dx = download(c->dx, n * 2);
    float *dg = download(c->dg, h * 4), *db = download(c->db, h * 4);
    double *rdg = calloc(h, sizeof(double)), *rdb = calloc(h, sizeof(double));
    if (!rdg || !rdb) exit(1);
    char nm[3][96];
    snprintf(nm[0], sizeof nm[0], "%s y", label);
    snprintf(nm[1], sizeof nm[1], "%s dx", label);
    snprintf(nm[2], sizeof nm[2], "%s dgamma/dbeta", label);
    check cy = {nm[0], 1.6e-2, 0, 0}, cdx = {nm[1], 1.6e-2, 0, 0}, cp = {nm[2], 1e-3, 0, 0};
    for (size_t r = 0; r < rows; r++) {
        double mu, rs, s1 = 0.0, s2 = 0.0;
        norm_row_ref(c, r, &mu, &rs);
        for (size_t j = 0; j < h; j++) {
            double xh = (bf(c->hx, r * h + j) - mu) * rs, d = bf(c->hdy, r * h + j);
            double yv = xh * c->hg[j] + (c->rms ? 0.0 : c->hb[j]);
            check_val(&cy, r * h + j, tx_bf16_to_f32(y[r * h + j]), yv);
            s1 += c->hg[j] * d;
            s2 += c->hg[j] * d * xh;
            rdg[j] += d * xh;
            rdb[j] += d;
        }
        double m1 = c->rms ? 0.0 : s1 / (double)h, m2 = s2 / (double)h;
        for (size_t j = 0; j < h; j++) {
            double xh = (bf(c->hx, r * h + j) - mu) * rs, d = bf(c->hdy, r * h + j);
            double v = rs * (c->hg[j] * d - m1 - xh * m2);
            if (c->resid) v += bf(c->hres, r * h + j);
            check_val(&cdx, r * h + j, tx_bf16_to_f32(dx[r * h + j]), v);
        }
    }
    /* column sums of 8192 terms: compare against the sum of magnitudes'
     * scale, which is what FP32 partial sums can promise */
    for (size_t j = 0; j < h; j++) {
        check_val(&cp, j, dg[j] / sqrt((double)rows), rdg[j] / sqrt((double)rows));
        if (!c->rms) check_val(&cp, h + j, db[j] / sqrt((double)rows), rdb[j] / sqrt((double)rows));
    }
    check_done(&cy);
    check_done(&cdx);
    check_done(&cp);
    /* determinism: a second backward gives the same dgamma bits */
    run_norm_bwd(c);
    float *dg2 = download(c->dg, h * 4);
    int same = memcmp(dg, dg2, h * 4) == 0;
    printf("CHECK %-44s %s\n", "norm dgamma repeat (bitwise)", same ? "PASS" : "FAIL");
    if (!same) failures++;
    free(y);
    free(dx);
    free(dg);
    free(dg2);
    free(db);
    free(rdg);
    free(rdb);
}

static void bench_norms(size_t rows, size_t h)
{
    norm_ctx c = {.rows = rows, .h = h};
    size_t n = rows * h;
    c.hx = host_bf16(n, -3.0, 5.0);
    c.hdy = host_bf16(n, -1.0, 1.0);
    c.hres = host_bf16(n, -1.0, 1.0);
    c.hg = host_f32(h, 0.5, 1.5);
    c.hb = host_f32(h, -0.5, 0.5);
    c.x = upload(c.hx, n * 2);
    c.dy = upload(c.hdy, n * 2);
    c.res = upload(c.hres, n * 2);
    c.g = upload(c.hg, h * 4);
    c.b = upload(c.hb, h * 4);
    c.y = dalloc(n * 2);
    c.dx = dalloc(n * 2);
    c.mu = dalloc(rows * 4);
    c.rs = dalloc(rows * 4);
    c.dg = dalloc(h * 4);
    c.db = dalloc(h * 4);
    c.ws = dalloc(tx_cuda_norm_bwd_workspace_floats(rows, h) * 4);
    char shape[48], label[96];
    snprintf(shape, sizeof shape, "%zux%zu", rows, h);
    double act = (double)n * 2;
    for (int rms = 0; rms <= 1; rms++) {
        c.rms = rms;
        c.resid = 0;
        const char *nm = rms ? "RMSNorm" : "LayerNorm";
        snprintf(label, sizeof label, "%s %s", nm, shape);
        if (!no_check) check_norm(&c, label);
        double stats = (double)rows * 4 * (rms ? 1 : 2), w = (double)h * 4 * (rms ? 1 : 2);
        snprintf(label, sizeof label, "%s fwd", nm);
        timed(label, shape, 2 * act + stats + w, 70, run_norm_fwd, &c);
        snprintf(label, sizeof label, "%s bwd (dx, dgamma%s)", nm, rms ? "" : ", dbeta");
        timed(label, shape, 3 * act + stats + w + (double)h * 4, 70, run_norm_bwd, &c);
    }
    /* BackwardAddNorm: LayerNorm backward with the fork's grad added */
    c.rms = 0;
    c.resid = 1;
    snprintf(label, sizeof label, "BackwardAddNorm %s", shape);
    if (!no_check) check_norm(&c, label);
    timed("BackwardAddNorm (LN bwd + dresid)", shape, 4 * act + rows * 8.0 + h * 16.0, 70,
          run_norm_bwd, &c);
    void *bufs[] = {c.x, c.dy, c.res, c.g, c.b, c.y, c.dx, c.mu, c.rs, c.dg, c.db, c.ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    free(c.hx);
    free(c.hdy);
    free(c.hres);
    free(c.hg);
    free(c.hb);
}

/* ---- activations and bias grads ----------------------------------------- */

typedef struct act_ctx {
    size_t rows, cols;
    void *x, *dy, *y, *dx;
    float *db, *ws;
} act_ctx;

static tx_cuda_act_args act_args(const act_ctx *c, int with_db)
{
    tx_cuda_act_args a = {.act = TX_CUDA_ACT_GELU_TANH, .rows = c->rows, .cols = c->cols,
                          .x = c->x, .x_dtype = TEEXEC_DTYPE_BFLOAT16, .y = c->y,
                          .y_dtype = TEEXEC_DTYPE_BFLOAT16, .dy = c->dy,
                          .dy_dtype = TEEXEC_DTYPE_BFLOAT16, .dx = c->dx,
                          .dx_dtype = TEEXEC_DTYPE_BFLOAT16, .dbias = with_db ? c->db : NULL,
                          .dbias_dtype = TEEXEC_DTYPE_FLOAT, .workspace = c->ws};
    return a;
}

static void run_gelu_fwd(void *p)
{
    tx_cuda_act_args a = act_args(p, 0);
    die_status(tx_cuda_act_forward(&a, NULL), "gelu forward");
}

static void run_gelu_bwd(void *p)
{
    tx_cuda_act_args a = act_args(p, 0);
    die_status(tx_cuda_act_backward(&a, NULL), "gelu backward");
}

static void run_gelu_bwd_db(void *p)
{
    tx_cuda_act_args a = act_args(p, 1);
    die_status(tx_cuda_act_backward(&a, NULL), "gelu backward + dbias");
}

static void run_bias_grad(void *p)
{
    act_ctx *c = p;
    die_status(tx_cuda_bias_grad(c->dy, TEEXEC_DTYPE_BFLOAT16, c->rows, c->cols, c->db,
                                 TEEXEC_DTYPE_FLOAT, c->ws, NULL),
               "bias grad");
}

static void gelu_ref(double x, double *f, double *df)
{
    double t = tanh(0.79788456 * x * (1.0 + 0.044715 * x * x));
    *f = 0.5 * x * (1.0 + t);
    *df = 0.5 * x * ((1.0 - t * t) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1.0 + t);
}

static void check_act(act_ctx *c, const uint16_t *hx, const uint16_t *hdy, int gelu)
{
    const size_t rows = c->rows, cols = c->cols, n = rows * cols;
    char nm[4][96];
    double *ref = calloc(cols, sizeof(double));
    if (!ref) exit(1);
    /* bias grad of dy: column sums in double */
    run_bias_grad(c);
    float *db = download(c->db, cols * 4);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++) ref[j] += bf(hdy, r * cols + j);
    snprintf(nm[0], sizeof nm[0], "bias grad %zux%zu", rows, cols);
    check cb = {nm[0], 1e-3, 0, 0};
    for (size_t j = 0; j < cols; j++)
        check_val(&cb, j, db[j] / sqrt((double)rows), ref[j] / sqrt((double)rows));
    check_done(&cb);
    free(db);
    if (gelu) {
        run_gelu_fwd(c);
        run_gelu_bwd_db(c);
        uint16_t *y = download(c->y, n * 2), *dx = download(c->dx, n * 2);
        db = download(c->db, cols * 4);
        snprintf(nm[1], sizeof nm[1], "gelu fwd %zux%zu", rows, cols);
        snprintf(nm[2], sizeof nm[2], "gelu bwd dx %zux%zu", rows, cols);
        snprintf(nm[3], sizeof nm[3], "gelu bwd dbias (sum of stored dx)");
        check cy = {nm[1], 1.6e-2, 0, 0}, cdx = {nm[2], 1.6e-2, 0, 0}, cdb = {nm[3], 1e-3, 0, 0};
        memset(ref, 0, cols * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            double f, df;
            gelu_ref(bf(hx, i), &f, &df);
            check_val(&cy, i, tx_bf16_to_f32(y[i]), f);
            check_val(&cdx, i, tx_bf16_to_f32(dx[i]), bf(hdy, i) * df);
            ref[i % cols] += tx_bf16_to_f32(dx[i]);
        }
        for (size_t j = 0; j < cols; j++)
            check_val(&cdb, j, db[j] / sqrt((double)rows), ref[j] / sqrt((double)rows));
        check_done(&cy);
        check_done(&cdx);
        check_done(&cdb);
        free(y);
        free(dx);
        free(db);
    }
    free(ref);
}

static void bench_act(size_t rows, size_t cols, int gelu)
{
    act_ctx c = {.rows = rows, .cols = cols};
    size_t n = rows * cols;
    uint16_t *hx = host_bf16(n, -4.0, 4.0), *hdy = host_bf16(n, -1.0, 1.0);
    c.x = upload(hx, n * 2);
    c.dy = upload(hdy, n * 2);
    c.y = dalloc(n * 2);
    c.dx = dalloc(n * 2);
    c.db = dalloc(cols * 4);
    c.ws = dalloc(tx_cuda_colsum_workspace_floats(rows, cols) * 4);
    char shape[48];
    snprintf(shape, sizeof shape, "%zux%zu", rows, cols);
    double t = (double)n * 2;
    if (!no_check) check_act(&c, hx, hdy, gelu);
    timed("bias grad (tx_cuda_bias_grad)", shape, t + cols * 4.0, 60, run_bias_grad, &c);
    if (gelu) {
        timed("GELU(tanh) fwd", shape, 2 * t, 70, run_gelu_fwd, &c);
        timed("GELU(tanh) bwd", shape, 3 * t, 70, run_gelu_bwd, &c);
        timed("GELU(tanh) bwd + dbias (fused)", shape, 3 * t + cols * 4.0, 60, run_gelu_bwd_db,
              &c);
    }
    free(hx);
    free(hdy);
    void *bufs[] = {c.x, c.dy, c.y, c.dx, c.db, c.ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
}

/* ---- FP8 hand-offs of an activation (fp8-current) -------------------------
 * The MLP's GELU -> fc2 x (ForwardActivationQuantize) and fc1's grad_output
 * (BackwardActivationBias) as te_cuda_handoff.c runs them: the producer
 * (activation forward, or dact + dbias) measuring the amax of what it
 * stores, then linear_gemm.c's cast(+transpose) from that amax
 * (tx_cuda_fp8_quantize_from_amax: scale kernel + rowwise and columnwise
 * FP8). Each piece is timed alone and the whole chain once, beside a plain
 * copy of the same bytes. The producers are checked here; the cast's bytes
 * are test_gpu_fp8's and test_gpu_handoff's to check. */

typedef struct hk_ctx {
    size_t rows, cols;
    tx_cuda_actx_fn fn;
    void *x, *dy, *y, *dx, *db;
    float *ws, *amax, *scale, *scale_inv;
    uint8_t *row, *col;
} hk_ctx;

static tx_cuda_handoff_q hk_q(hk_ctx *c)
{
    tx_cuda_handoff_q q = {.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN, .amax = c->amax};
    return q;
}

static void run_hk_fwd(void *p)
{
    hk_ctx *c = p;
    tx_cuda_actx_args a = {.fn = c->fn, .rows = c->rows, .cols = c->cols, .x = c->x,
                           .x_dtype = TEEXEC_DTYPE_BFLOAT16, .y = c->y,
                           .y_dtype = TEEXEC_DTYPE_BFLOAT16};
    tx_cuda_handoff_q q = hk_q(c);
    die_status(tx_cuda_handoff_act_forward(&a, &q, NULL), "hand-off act forward");
}

static void run_hk_dact(void *p)
{
    hk_ctx *c = p;
    tx_cuda_handoff_q q = hk_q(c);
    die_status(tx_cuda_handoff_dact_bias_backward(c->fn, c->rows, c->cols, c->x, c->dy, c->dx,
                                                  TEEXEC_DTYPE_BFLOAT16, c->db,
                                                  TEEXEC_DTYPE_FLOAT, c->ws, &q, NULL),
               "hand-off dact+dbias");
}

static void hk_cast_of(hk_ctx *c, const void *src)
{
    tx_cuda_fp8_args a = {.x = src, .x_dtype = TEEXEC_DTYPE_BFLOAT16, .rows = c->rows,
                          .cols = c->cols, .fmt = TEEXEC_DTYPE_FLOAT8E4M3FN, .scale = c->scale,
                          .scale_inv = c->scale_inv, .amax = c->amax, .row_data = c->row,
                          .col_data = c->col};
    die_status(tx_cuda_fp8_quantize_from_amax(&a, 0.0f, 0, NULL), "cast from amax");
}

static void run_hk_cast(void *p) { hk_cast_of(p, ((hk_ctx *)p)->y); }

static void run_hk_fwd_chain(void *p)
{
    hk_ctx *c = p;
    die_cuda(cudaMemsetAsync(c->amax, 0, 4, 0), "amax clear");
    run_hk_fwd(c);
    hk_cast_of(c, c->y);
}

static void run_hk_bwd_chain(void *p)
{
    hk_ctx *c = p;
    die_cuda(cudaMemsetAsync(c->amax, 0, 4, 0), "amax clear");
    run_hk_dact(c);
    hk_cast_of(c, c->dx);
}

static void run_hk_copy(void *p)
{
    hk_ctx *c = p;
    die_cuda(cudaMemcpyAsync(c->y, c->x, c->rows * c->cols * 2, cudaMemcpyDeviceToDevice, 0),
             "memcpy");
}

static void run_gelu_erf_bwd_db(void *p)
{
    hk_ctx *c = p;
    tx_cuda_act_args a = {.act = TX_CUDA_ACT_GELU_ERF, .rows = c->rows, .cols = c->cols,
                          .x = c->x, .x_dtype = TEEXEC_DTYPE_BFLOAT16, .y = c->y,
                          .y_dtype = TEEXEC_DTYPE_BFLOAT16, .dy = c->dy,
                          .dy_dtype = TEEXEC_DTYPE_BFLOAT16, .dx = c->dx,
                          .dx_dtype = TEEXEC_DTYPE_BFLOAT16, .dbias = c->db,
                          .dbias_dtype = TEEXEC_DTYPE_FLOAT, .workspace = c->ws};
    die_status(tx_cuda_act_backward(&a, NULL), "gelu erf backward + dbias");
}

static void gelu_erf_ref(double x, double *f, double *df)
{
    double c = 0.5 * (1.0 + erf(x * 0.70710678118654752440));
    *f = x * c;
    *df = c + x * 0.39894228040143267794 * exp(-0.5 * x * x);
}

/* Max |v| over n stored bf16 values, NaN dropped (the hand-off's amax). */
static float bf16_amax(const uint16_t *v, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(tx_bf16_to_f32(v[i]));
        if (a > m) m = a;
    }
    return m;
}

/* The producers against double references: y and dx on every 61st element
 * (the erf in double over 134M elements would take seconds), the amax
 * exactly over every stored value, dbias over every stored dx. */
static void check_handoff(hk_ctx *c, const uint16_t *hx, const uint16_t *hdy)
{
    const int erf_form = c->fn == TX_CUDA_ACTX_GELU_ERF;
    const char *fname = erf_form ? "GELU(erf)" : "GELU(tanh)";
    const size_t rows = c->rows, cols = c->cols, n = rows * cols;
    char nm[5][96];
    snprintf(nm[3], sizeof nm[3], "hand-off %s fwd amax (exact)", fname);
    snprintf(nm[4], sizeof nm[4], "hand-off d%s amax (exact)", fname);
    die_cuda(cudaMemset(c->amax, 0, 4), "amax clear");
    run_hk_fwd(c);
    uint16_t *y = download(c->y, n * 2);
    float *am = download(c->amax, 4);
    snprintf(nm[0], sizeof nm[0], "hand-off %s fwd y %zux%zu", fname, rows, cols);
    check cy = {nm[0], 1.6e-2, 0, 0};
    for (size_t i = 0; i < n; i += 61) {
        double f, df;
        (erf_form ? gelu_erf_ref : gelu_ref)(bf(hx, i), &f, &df);
        check_val(&cy, i, tx_bf16_to_f32(y[i]), f);
    }
    check_done(&cy);
    float want = bf16_amax(y, n);
    printf("CHECK %-44s %s  %g vs %g\n", nm[3],
           *am == want ? "PASS" : "FAIL", *am, want);
    if (*am != want) failures++;
    free(y);
    free(am);

    die_cuda(cudaMemset(c->amax, 0, 4), "amax clear");
    run_hk_dact(c);
    uint16_t *dx = download(c->dx, n * 2);
    float *db = download(c->db, cols * 4);
    am = download(c->amax, 4);
    snprintf(nm[1], sizeof nm[1], "hand-off d%s dx %zux%zu", fname, rows, cols);
    snprintf(nm[2], sizeof nm[2], "hand-off dbias (sum of stored dx)");
    check cdx = {nm[1], 1.6e-2, 0, 0}, cdb = {nm[2], 1e-3, 0, 0};
    double *ref = calloc(cols, sizeof(double));
    if (!ref) exit(1);
    for (size_t i = 0; i < n; i++) {
        if (i % 61 == 0) {
            double f, df;
            (erf_form ? gelu_erf_ref : gelu_ref)(bf(hx, i), &f, &df);
            check_val(&cdx, i, tx_bf16_to_f32(dx[i]), bf(hdy, i) * df);
        }
        ref[i % cols] += tx_bf16_to_f32(dx[i]);
    }
    for (size_t j = 0; j < cols; j++)
        check_val(&cdb, j, db[j] / sqrt((double)rows), ref[j] / sqrt((double)rows));
    check_done(&cdx);
    check_done(&cdb);
    want = bf16_amax(dx, n);
    printf("CHECK %-44s %s  %g vs %g\n", nm[4],
           *am == want ? "PASS" : "FAIL", *am, want);
    if (*am != want) failures++;
    free(ref);
    free(dx);
    free(db);
    free(am);
}

static void bench_handoff(size_t rows, size_t cols)
{
    hk_ctx c = {.rows = rows, .cols = cols, .fn = TX_CUDA_ACTX_GELU_ERF};
    size_t n = rows * cols;
    uint16_t *hx = host_bf16(n, -4.0, 4.0), *hdy = host_bf16(n, -1.0, 1.0);
    c.x = upload(hx, n * 2);
    c.dy = upload(hdy, n * 2);
    c.y = dalloc(n * 2);
    c.dx = dalloc(n * 2);
    c.db = dalloc(cols * 4);
    c.ws = dalloc(tx_cuda_handoff_dact_bias_workspace_floats(rows, cols) * 4);
    c.amax = dalloc(16);
    c.scale = c.amax + 1;
    c.scale_inv = c.amax + 2;
    c.row = dalloc(n);
    c.col = dalloc(n);
    char shape[48];
    snprintf(shape, sizeof shape, "%zux%zu bf16", rows, cols);
    const double t = (double)n * 2;
    if (!no_check) {
        check_handoff(&c, hx, hdy);
        c.fn = TX_CUDA_ACTX_GELU_TANH;
        check_handoff(&c, hx, hdy);
        c.fn = TX_CUDA_ACTX_GELU_ERF;
    }
    free(hx);
    free(hdy);
    timed("reference: copy of x (cudaMemcpyAsync)", shape, 2 * t, 0, run_hk_copy, &c);
    timed("hand-off GELU(erf) fwd + amax", shape, 2 * t, 70, run_hk_fwd, &c);
    timed("cast from amax (scale + FP8 row + col)", shape, 2 * t, 80, run_hk_cast, &c);
    timed("hand-off dGELU(erf) + dbias + amax", shape, 3 * t + cols * 4.0, 65, run_hk_dact, &c);
    timed("GELU(erf) bwd + dbias (act.cu, unquantized)", shape, 3 * t + cols * 4.0, 0,
          run_gelu_erf_bwd_db, &c);
    /* the chains' bytes: the producer's pass plus the cast's (2 + 1 + 1) */
    timed("fwd chain GELU(erf): clear + act + cast", shape, 4 * t, 0, run_hk_fwd_chain, &c);
    timed("bwd chain GELU(erf): clear + dact + cast", shape, 5 * t, 0, run_hk_bwd_chain, &c);
    /* torch_mlp.py's block uses the tanh form */
    c.fn = TX_CUDA_ACTX_GELU_TANH;
    timed("hand-off GELU(tanh) fwd + amax", shape, 2 * t, 70, run_hk_fwd, &c);
    timed("hand-off dGELU(tanh) + dbias + amax", shape, 3 * t + cols * 4.0, 65, run_hk_dact, &c);
    timed("fwd chain GELU(tanh): clear + act + cast", shape, 4 * t, 0, run_hk_fwd_chain, &c);
    timed("bwd chain GELU(tanh): clear + dact + cast", shape, 5 * t, 0, run_hk_bwd_chain, &c);
    void *bufs[] = {c.x, c.dy, c.y, c.dx, c.db, c.ws, c.amax, c.row, c.col};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
}

/* ---- MSE loss ------------------------------------------------------------- */

typedef struct mse_ctx {
    size_t n;
    void *y, *dy;
    float *t;
    double *partials, *loss;
} mse_ctx;

static void run_mse(void *p)
{
    mse_ctx *c = p;
    die_status(tx_cuda_mse(c->y, TEEXEC_DTYPE_BFLOAT16, c->t, c->n, c->dy, TEEXEC_DTYPE_BFLOAT16,
                           c->partials, c->loss, NULL),
               "mse");
}

static void bench_mse(size_t rows, size_t cols)
{
    mse_ctx c = {.n = rows * cols};
    uint16_t *hy = host_bf16(c.n, -2.0, 2.0);
    float *ht = host_f32(c.n, -2.0, 2.0);
    c.y = upload(hy, c.n * 2);
    c.t = upload(ht, c.n * 4);
    c.dy = dalloc(c.n * 2);
    c.partials = dalloc(tx_cuda_mse_partials(c.n) * sizeof(double));
    c.loss = dalloc(sizeof(double));
    if (!no_check) {
        run_mse(&c);
        double *loss = download(c.loss, sizeof(double));
        uint16_t *dy = download(c.dy, c.n * 2);
        double ref = 0.0;
        check cl = {"mse loss", 1e-6, 0, 0}, cd = {"mse dy", 1.6e-2, 0, 0};
        for (size_t i = 0; i < c.n; i++) {
            double d = (double)(float)(tx_bf16_to_f32(hy[i]) - ht[i]);
            ref += d * d;
            check_val(&cd, i, tx_bf16_to_f32(dy[i]) * (double)c.n, 2.0 * d);
        }
        check_val(&cl, 0, *loss, ref / (double)c.n);
        check_done(&cl);
        check_done(&cd);
        free(loss);
        free(dy);
    }
    char shape[48];
    snprintf(shape, sizeof shape, "%zux%zu", rows, cols);
    timed("MSE loss + grad", shape, (double)c.n * (2 + 4 + 2), 70, run_mse, &c);
    free(hy);
    free(ht);
    void *bufs[] = {c.y, c.t, c.dy, c.partials, c.loss};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
}

/* ---- AdamW ---------------------------------------------------------------- */

typedef struct opt_ctx {
    tx_cuda_optim_tensor *dev;
    size_t n_t;
    uint64_t blocks;
} opt_ctx;

static tx_cuda_optim_step_args adamw_args(void)
{
    tx_cuda_optim_step_args a = {.kind = TX_CUDA_OPTIM_ADAMW, .lr = 1e-3, .weight_decay = 0.01,
                                 .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step = 1};
    return a;
}

static void run_adamw(void *p)
{
    opt_ctx *c = p;
    tx_cuda_optim_step_args a = adamw_args();
    die_status(tx_cuda_optim_step(&a, c->dev, c->n_t, c->blocks, NULL), "adamw");
}

static void bench_adamw(size_t rows, size_t cols)
{
    enum { NT = 2 };
    size_t n = rows * cols;
    tx_cuda_optim_tensor ts[NT];
    float *hm[NT];
    uint16_t *hg[NT];
    for (int t = 0; t < NT; t++) {
        hm[t] = host_f32(n, -1.0, 1.0);
        hg[t] = host_bf16(n, -1e-2, 1e-2);
        ts[t] = (tx_cuda_optim_tensor){.master = upload(hm[t], n * 4), .model = dalloc(n * 2),
                                       .grad = upload(hg[t], n * 2), .m = dalloc(n * 4),
                                       .v = dalloc(n * 4), .n = n,
                                       .model_dtype = TEEXEC_DTYPE_BFLOAT16,
                                       .grad_dtype = TEEXEC_DTYPE_BFLOAT16};
    }
    opt_ctx c = {.n_t = NT};
    die_status(tx_cuda_optim_layout(ts, NT, &c.blocks), "optim layout");
    c.dev = upload(ts, sizeof ts);
    if (!no_check) {
        run_adamw(&c);
        /* the first step from zero moments, evaluated as optim.h promises (the
         * CPU's double expressions, no contraction): exact */
        tx_cuda_optim_step_args a = adamw_args();
        double bc1 = 1.0 - pow(a.beta1, 1.0), bc2 = 1.0 - pow(a.beta2, 1.0);
        double decay = 1.0 - a.lr * a.weight_decay, step_size = a.lr / bc1, sq = sqrt(bc2);
        size_t bad = 0, checked = 0;
        for (int t = 0; t < NT; t++) {
            float *got = download(ts[t].master, n * 4);
            uint16_t *model = download(ts[t].model, n * 2);
            for (size_t i = 0; i < n; i += 7) {
                double p = hm[t][i], g = bf(hg[t], i);
                /* the host is compiled with -ffp-contract=off, as optim.c */
                p *= decay;
                double m = a.beta1 * 0.0 + (1.0 - a.beta1) * g;
                double v = a.beta2 * 0.0 + (1.0 - a.beta2) * g * g;
                p -= step_size * m / (sqrt(v) / sq + a.eps);
                float pf = (float)p;
                checked++;
                if (memcmp(&pf, &got[i], 4) != 0 || model[i] != tx_f32_to_bf16(pf)) bad++;
            }
            free(got);
            free(model);
        }
        printf("CHECK %-44s %s  %zu of %zu sampled masters differ\n", "adamw step 1 (bitwise)",
               bad ? "FAIL" : "PASS", bad, checked);
        if (bad) failures++;
    }
    char shape[48];
    snprintf(shape, sizeof shape, "2 x %zux%zu", rows, cols);
    /* per element: master, m, v read + written (FP32), grad read, model written (bf16) */
    timed("AdamW step (FP32 masters, bf16 grad/model)", shape, (double)NT * n * 28, 70, run_adamw,
          &c);
    for (int t = 0; t < NT; t++) {
        cudaFree(ts[t].master);
        cudaFree(ts[t].model);
        cudaFree((void *)ts[t].grad);
        cudaFree(ts[t].m);
        cudaFree(ts[t].v);
        free(hm[t]);
        free(hg[t]);
    }
    cudaFree(c.dev);
}

/* ---- Split and copies ----------------------------------------------------- */

typedef struct split_ctx {
    size_t rows, cols, parts;
    void *x, *out[8];
} split_ctx;

static void run_split(void *p)
{
    split_ctx *c = p;
    size_t w = c->cols / c->parts;
    for (size_t k = 0; k < c->parts; k++) {
        /* what exec/cuda/std_cuda.c builds for Split along the last axis */
        tx_cuda_strided s = {.rank = 2,
                             .dims = {(int64_t)c->rows, (int64_t)w},
                             .src_st = {(int64_t)c->cols, 1},
                             .dst_st = {(int64_t)w, 1},
                             .src_base = (int64_t)(k * w),
                             .dst_base = 0};
        die_status(tx_cuda_strided_copy(&s, c->x, c->out[k], 2, NULL), "split");
    }
}

typedef struct copy_ctx {
    void *a, *b, *out;
    size_t n;
} copy_ctx;

static void run_memcpy(void *p)
{
    copy_ctx *c = p;
    die_cuda(cudaMemcpyAsync(c->out, c->a, c->n * 2, cudaMemcpyDeviceToDevice, 0), "memcpy");
}

static void run_add(void *p)
{
    copy_ctx *c = p;
    die_status(tx_cuda_add(c->a, TEEXEC_DTYPE_BFLOAT16, c->b, TEEXEC_DTYPE_BFLOAT16, c->out,
                           TEEXEC_DTYPE_BFLOAT16, c->n, NULL),
               "add");
}

static void bench_split(size_t rows, size_t cols, size_t parts)
{
    split_ctx c = {.rows = rows, .cols = cols, .parts = parts};
    size_t n = rows * cols, w = cols / parts;
    uint16_t *hx = host_bf16(n, -1.0, 1.0);
    c.x = upload(hx, n * 2);
    for (size_t k = 0; k < parts; k++) c.out[k] = dalloc(rows * w * 2);
    if (!no_check) {
        run_split(&c);
        size_t bad = 0;
        for (size_t k = 0; k < parts; k++) {
            uint16_t *o = download(c.out[k], rows * w * 2);
            for (size_t r = 0; r < rows; r++)
                if (memcmp(o + r * w, hx + r * cols + k * w, w * 2) != 0) bad++;
            free(o);
        }
        printf("CHECK %-44s %s  %zu rows differ\n", "split (bytes)", bad ? "FAIL" : "PASS", bad);
        if (bad) failures++;
    }
    char shape[48];
    snprintf(shape, sizeof shape, "%zux%zu -> %zu x %zux%zu", rows, cols, parts, rows, w);
    timed("Split (tx_cuda_strided_copy per output)", shape, (double)n * 2 * 2, 70, run_split, &c);
    cudaFree(c.x);
    for (size_t k = 0; k < parts; k++) cudaFree(c.out[k]);
    free(hx);

    copy_ctx cc = {.n = (size_t)rows * 4096};
    cc.a = dalloc(cc.n * 2);
    cc.b = dalloc(cc.n * 2);
    cc.out = dalloc(cc.n * 2);
    snprintf(shape, sizeof shape, "%zux4096", rows);
    timed("reference: cudaMemcpyAsync D2D", shape, (double)cc.n * 2 * 2, 0, run_memcpy, &cc);
    timed("residual add (tx_cuda_add bf16)", shape, (double)cc.n * 2 * 3, 70, run_add, &cc);
    cudaFree(cc.a);
    cudaFree(cc.b);
    cudaFree(cc.out);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > MAX_REPS) reps = 20;
        } else if (!strcmp(argv[i], "--no-check")) {
            no_check = 1;
        } else if (!strcmp(argv[i], "--handoff-only")) {
            handoff_only = 1;
        } else {
            fprintf(stderr, "usage: kernel_bw [--reps N] [--no-check] [--handoff-only]\n");
            return 2;
        }
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "kernel_bw: no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    die_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    flush_buf = dalloc(flush_bytes);
    const size_t T = 8192;
    if (!handoff_only) {
        bench_norms(T, 4096);
        bench_norms(T, 2048);
        bench_act(T, 16384, 1);
        bench_act(T, 4096, 0);
        bench_mse(T, 4096);
        bench_adamw(4096, 16384);
        bench_split(T, 6144, 3);
    }
    bench_handoff(T, 16384);
    cudaFree(flush_buf);

    printf("\n| kernel | shape | ms (median of %d) | GB/s | %% of 4.0 TB/s | target |\n", reps);
    printf("|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_entries; i++) {
        const entry *e = &entries[i];
        double gbs = e->bytes / (e->ms * 1e-3) / 1e9;
        char tgt[16] = "-";
        if (e->target)
            snprintf(tgt, sizeof tgt, "%s >= %d%%",
                     100.0 * gbs / PEAK_GBS >= e->target ? "met" : "MISSED", e->target);
        printf("| %s | %s | %.4f | %.0f | %.1f | %s |\n", e->name, e->shape, e->ms, gbs,
               100.0 * gbs / PEAK_GBS, tgt);
    }
    printf("\n%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
