/*
 * mlp_bench.c - times a model that lowers to one te.ops chain (the MLP
 * block of bench/gpu/run_mlp_bench.sh) on the GPU with teexec's CUDA chain
 * executor: inference (forward) and a training step (forward + backward,
 * no optimizer: the figure PyTorch's side measures too), CUDA events,
 * median of --iters after warm-up; with --graph the step is captured once
 * as a CUDA graph and replayed.
 *
 *   mlp_bench MODEL.onnx --rows N [--recipe none|fp8-current[:hybrid]]
 *             [--dtype bf16|fp16|fp32] [--iters N] [--graph] [--infer-only]
 *
 * Prints one line per measurement: "teexec <what> <recipe> ms=<median> tflops=<x>".
 * Benchmark code: prints and exits on errors.
 */
#include "exec/cuda/chain_from_model.h"
#include "base/half.h"
#include "exec/model_lower.h"

#include <math.h>

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die_st(teexec_status *st, const char *what)
{
    if (!st) return;
    fprintf(stderr, "mlp_bench: %s: %s\n", what, teexec_status_message(st));
    exit(1);
}

static void die_cuda(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "mlp_bench: %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef teexec_status *(*step_fn)(tx_cuda_chain *c);

static teexec_status *fwd(tx_cuda_chain *c) { return tx_cuda_chain_forward(c); }
static teexec_status *fwd_bwd(tx_cuda_chain *c)
{
    TX_TRY(tx_cuda_chain_forward(c));
    return tx_cuda_chain_backward(c);
}

/* Median ms of `iters` timed runs of fn (or of its CUDA graph). */
static float time_step(tx_cuda_chain *c, step_fn fn, cudaStream_t s, int iters, int graph)
{
    cudaGraphExec_t exec = NULL;
    for (int w = 0; w < 3; w++) die_st(fn(c), "warm-up");
    if (graph) {
        cudaGraph_t gr;
        die_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "capture");
        die_st(fn(c), "captured step");
        die_cuda(cudaStreamEndCapture(s, &gr), "end capture");
        die_cuda(cudaGraphInstantiate(&exec, gr, 0), "instantiate");
        cudaGraphDestroy(gr);
        die_cuda(cudaGraphLaunch(exec, s), "graph warm-up");
    }
    die_cuda(cudaStreamSynchronize(s), "sync");
    float *ms = calloc((size_t)iters, sizeof(float));
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < iters; i++) {
        cudaEventRecord(a, s);
        if (graph) die_cuda(cudaGraphLaunch(exec, s), "graph launch");
        else die_st(fn(c), "step");
        cudaEventRecord(b, s);
        die_cuda(cudaEventSynchronize(b), "event");
        cudaEventElapsedTime(&ms[i], a, b);
    }
    qsort(ms, (size_t)iters, sizeof(float), cmp_float);
    float med = ms[iters / 2];
    free(ms);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (exec) cudaGraphExecDestroy(exec);
    return med;
}

static void fill_random(void *dev, size_t n, teexec_dtype dt, cudaStream_t s)
{
    /* small values: a plausible activation range for every dtype */
    size_t esz = dt == TEEXEC_DTYPE_FLOAT ? 4 : 2;
    uint16_t *h16 = NULL;
    float *h32 = NULL;
    if (esz == 2) h16 = malloc(n * 2);
    else h32 = malloc(n * 4);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float v = ((float)(x >> 40) / (float)(1u << 24) - 0.5f);
        if (h32) h32[i] = v;
        else {
            uint32_t u;
            memcpy(&u, &v, 4);
            h16[i] = dt == TEEXEC_DTYPE_BFLOAT16 ? (uint16_t)(u >> 16) : 0x3800; /* fp16: 0.5 */
        }
    }
    die_cuda(cudaMemcpyAsync(dev, h16 ? (void *)h16 : (void *)h32, n * esz,
                             cudaMemcpyHostToDevice, s), "upload");
    die_cuda(cudaStreamSynchronize(s), "upload sync");
    free(h16);
    free(h32);
}

/* Runs the inference chain on X (float32 .npy, [rows, width]) and prints
 * the rel-L2 difference of its output from Y (PyTorch's float32 output). */
static void check(tx_cuda_chain *c, const char *xpath, const char *ypath, int64_t rows,
                  teexec_dtype dt, cudaStream_t s)
{
    teexec_tensor *x = NULL, *y = NULL;
    die_st(teexec_tensor_load_file(xpath, &x), "loading the check input");
    die_st(teexec_tensor_load_file(ypath, &y), "loading the check output");
    size_t n = teexec_tensor_element_count(x);
    if (teexec_tensor_dtype(x) != TEEXEC_DTYPE_FLOAT || n != teexec_tensor_element_count(y) ||
        dt != TEEXEC_DTYPE_BFLOAT16 || n % (size_t)rows) {
        fprintf(stderr, "mlp_bench: --check wants float32 x/y of the same size and bf16\n");
        exit(1);
    }
    const float *xf = teexec_tensor_data_const(x), *yf = teexec_tensor_data_const(y);
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = tx_f32_to_bf16(xf[i]);
    die_cuda(cudaMemcpyAsync(tx_cuda_chain_input(c), h, n * 2, cudaMemcpyHostToDevice, s), "x");
    die_st(tx_cuda_chain_forward(c), "check forward");
    die_cuda(cudaMemcpyAsync(h, tx_cuda_chain_output(c), n * 2, cudaMemcpyDeviceToHost, s), "y");
    die_cuda(cudaStreamSynchronize(s), "check sync");
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)tx_bf16_to_f32(h[i]) - (double)yf[i];
        num += d * d;
        den += (double)yf[i] * (double)yf[i];
    }
    printf("teexec check vs torch fp32: rel_l2=%.3e (%zu elements)\n", sqrt(num / (den ? den : 1)), n);
    free(h);
    teexec_tensor_destroy(x);
    teexec_tensor_destroy(y);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *recipe = "none", *dtype = "bf16", *cx = NULL, *cy = NULL;
    int64_t rows = 0;
    int iters = 30, graph = 0, infer_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--recipe") && i + 1 < argc) recipe = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dtype = argv[++i];
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--graph")) graph = 1;
        else if (!strcmp(argv[i], "--check") && i + 2 < argc) {
            cx = argv[++i];
            cy = argv[++i];
        }
        else if (!strcmp(argv[i], "--infer-only")) infer_only = 1;
        else if (!path) path = argv[i];
        else {
            fprintf(stderr, "mlp_bench: unexpected argument %s\n", argv[i]);
            return 2;
        }
    }
    if (!path || iters < 1 || rows <= 0) {
        fprintf(stderr, "usage: mlp_bench MODEL.onnx --rows N [--recipe R] [--dtype D] "
                        "[--iters N] [--graph] [--infer-only]\n");
        return 2;
    }
    teexec_model *m = NULL, *low = NULL;
    die_st(teexec_model_load_file(path, NULL, &m), "load");
    die_st(tx_model_lower(m, NULL, &low), "lower");
    tx_cuda_chain_config cfg = {.rows = rows, .input_needs_grad = true};
    die_st(tx_recipe_parse(recipe, &cfg.recipe), "recipe");
    cfg.dtype = !strcmp(dtype, "fp32") ? TEEXEC_DTYPE_FLOAT
                : !strcmp(dtype, "fp16") ? TEEXEC_DTYPE_FLOAT16 : TEEXEC_DTYPE_BFLOAT16;
    cudaStream_t s;
    die_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    for (int train = 0; train <= (infer_only ? 0 : 1); train++) {
        cfg.training = train;
        tx_cuda_chain *c = NULL;
        die_st(tx_cuda_chain_from_model(low, &cfg, s, &c), "chain");
        if (!train && cx) check(c, cx, cy, rows, cfg.dtype, s);
        double flops = tx_cuda_chain_forward_flops(c);
        /* a residual block: the output width equals the input width */
        size_t n_io = (size_t)rows * (size_t)tx_cuda_chain_out_width(c);
        fill_random(tx_cuda_chain_input(c), n_io, cfg.dtype, s);
        if (train) fill_random(tx_cuda_chain_grad_output(c), n_io, cfg.dtype, s);
        float ms = time_step(c, train ? fwd_bwd : fwd, s, iters, graph);
        double f = train ? 3.0 * flops : flops;
        printf("teexec %s %s%s ms=%.4f tflops=%.1f device_mib=%.0f\n",
               train ? "train_step" : "inference", recipe, graph ? " graph" : "", ms,
               f / (ms * 1e-3) / 1e12, (double)tx_cuda_chain_device_bytes(c) / 1048576.0);
        fflush(stdout);
        tx_cuda_chain_destroy(c);
    }
    teexec_model_destroy(low);
    teexec_model_destroy(m);
    cudaStreamDestroy(s);
    return 0;
}
