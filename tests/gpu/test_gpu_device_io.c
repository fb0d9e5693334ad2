/* test_gpu_device_io.c - device-resident inputs and outputs of a CUDA
 * session (teexec_tensor_create_device*, run options set_device_outputs,
 * set_cuda_stream, set_no_sync, teexec_session_wait):
 *   - device inputs and outputs give the host run's outputs bit for bit
 *     and make no host<->device copy (the session's copy counter: 2 for a
 *     host run, 0 for a device run), library-allocated and borrowed;
 *   - queued on a caller's stream without a host wait: the caller fills
 *     the input and reads the output on its stream only;
 *   - an output asked twice comes back as two device buffers;
 *   - outputs written into bound device (and host) tensors
 *     (teexec_session_run_into), queued or not, and its refusals;
 *   - refusals, each leaving the session usable: no_sync with host
 *     outputs, a device input of the wrong dtype or shape;
 *   - timing: the host-tensor loop against the device loops (new device
 *     outputs per run, and one bound device output) on a 16-token MLP
 *     (printed and recorded; not asserted, the lead records it);
 *   - shape buckets: 30 random batch sizes through at most 4 executors,
 *     each against a fresh session at that size; and variable traffic in
 *     two dims, 50 random (batch, sequence) shapes through 4 bucket pairs,
 *     with one executor (one CUDA graph capture) per pair met;
 *   - a per-run profile (run options set_profile) on a captured session:
 *     launched kernel by kernel, outputs bit-identical to the replays.
 * The model is built here: x [N, 1024] -> 2 x (MatMul 1024x1024, Relu). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec/session_cuda.h"
#include "exec/session_internal.h"
#include "teexec/teexec.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/import/model_builder.h"
#include "tests/gpu/mlp_model.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <time.h>

enum { D = 1024, LAYERS = 2, N = 16 };

static teexec_model *g_model;

static void ok(teexec_status *st, const char *what)
{
    if (st) {
        fprintf(stderr, "%s: %s: %s\n", what, teexec_code_name(teexec_status_code(st)),
                teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static void expect(teexec_status *st, teexec_code code, const char *part)
{
    if (!st) fail_msg("expected %s, got success", teexec_code_name(code));
    fprintf(stderr, "refused as expected: %s\n", teexec_status_message(st));
    if (teexec_status_code(st) != code || (part && !strstr(teexec_status_message(st), part)))
        fail_msg("expected %s with \"%s\", got %s: %s", teexec_code_name(code), part ? part : "",
                 teexec_code_name(teexec_status_code(st)), teexec_status_message(st));
    teexec_status_destroy(st);
}

static teexec_model *build_model(void)
{
    return tg_mlp_model("device_io_mlp", D, LAYERS, 31u, 3e-5f);
}

static float *host_x(size_t rows)
{
    float *x = malloc(rows * D * sizeof(float));
    assert_non_null(x);
    for (size_t i = 0; i < rows * D; i++) x[i] = (float)((int)(i % 13u) - 6) * 0.25f;
    return x;
}

static teexec_session *session(void)
{
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o), "options");
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CUDA), "device");
    ok(teexec_session_options_set_dim(o, "N", N), "dim");
    /* the GEMM heuristic's first answer, not a timed choice: outputs of
     * separate sessions and runs are then comparable byte for byte */
    ok(teexec_session_options_set_deterministic(o, 1), "deterministic");
    teexec_session *s = NULL;
    ok(teexec_session_create(g_model, o, &s), "creating a CUDA session");
    teexec_session_options_destroy(o);
    return s;
}

static const char *kIn[1] = {"x"}, *kOut[1] = {"y"};
static const int64_t kDims[2] = {N, D};
#define BYTES ((size_t)N * D * sizeof(float))

/* The host run's output (the reference). */
static teexec_tensor *host_run(teexec_session *s, const float *x)
{
    teexec_tensor *xt = NULL, *y = NULL;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, kDims, x, BYTES, &xt), "x");
    const teexec_tensor *ins[1] = {xt};
    ok(teexec_session_run(s, 1, kIn, ins, 1, kOut, &y), "host run");
    teexec_tensor_destroy(xt);
    assert_int_equal(teexec_tensor_device(y), TEEXEC_DEVICE_CPU);
    return y;
}

static int setup(void **state)
{
    (void)state;
    g_model = build_model();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    teexec_model_destroy(g_model);
    return 0;
}

static void test_device_run_matches_and_copies_nothing(void **state)
{
    (void)state;
    teexec_session *s = session();
    float *x = host_x(N);
    uint64_t c0 = tx_session_cuda_host_copies(s);
    teexec_tensor *ref = host_run(s, x);
    uint64_t c1 = tx_session_cuda_host_copies(s);
    /* library-allocated device input */
    teexec_tensor *xd = NULL;
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, kDims, &xd), "device x");
    assert_int_equal(teexec_tensor_device(xd), TEEXEC_DEVICE_CUDA);
    assert_int_equal(teexec_tensor_byte_size(xd), BYTES);
    assert_int_equal(cudaMemcpy(teexec_tensor_data(xd), x, BYTES, cudaMemcpyHostToDevice),
                     cudaSuccess);
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro), "run options");
    ok(teexec_run_options_set_device_outputs(ro, 1), "device outputs");
    const teexec_tensor *ins[1] = {xd};
    teexec_tensor *yd = NULL;
    ok(teexec_session_run_with(s, ro, 1, kIn, ins, 1, kOut, &yd), "device run");
    uint64_t c2 = tx_session_cuda_host_copies(s);
    assert_int_equal(teexec_tensor_device(yd), TEEXEC_DEVICE_CUDA);
    teexec_tensor *yh = NULL;
    ok(teexec_tensor_to_host(yd, &yh), "to host");
    fprintf(stderr, "host<->device copies: host run %llu, device run %llu\n",
            (unsigned long long)(c1 - c0), (unsigned long long)(c2 - c1));
    assert_int_equal(c1 - c0, 2); /* x up, y down */
    assert_int_equal(c2 - c1, 0);
    assert_memory_equal(teexec_tensor_data_const(yh), teexec_tensor_data_const(ref), BYTES);
    teexec_tensor_destroy(yh);
    teexec_tensor_destroy(yd);
    /* a caller's buffer, borrowed */
    void *mine = NULL;
    assert_int_equal(cudaMalloc(&mine, BYTES), cudaSuccess);
    assert_int_equal(cudaMemcpy(mine, x, BYTES, cudaMemcpyHostToDevice), cudaSuccess);
    teexec_tensor *xb = NULL;
    ok(teexec_tensor_create_device_borrowed(TEEXEC_DTYPE_FLOAT, 2, kDims, mine, BYTES, &xb),
       "borrowed x");
    ins[0] = xb;
    /* host outputs from device inputs: only the output comes down */
    teexec_tensor *y2 = NULL;
    ok(teexec_session_run(s, 1, kIn, ins, 1, kOut, &y2), "device in, host out");
    assert_int_equal(tx_session_cuda_host_copies(s) - c2, 1);
    assert_memory_equal(teexec_tensor_data_const(y2), teexec_tensor_data_const(ref), BYTES);
    teexec_tensor_destroy(y2);
    teexec_tensor_destroy(xb);
    /* borrowed: still ours */
    assert_int_equal(cudaFree(mine), cudaSuccess);
    /* an output asked twice: two device buffers, same bytes */
    const char *twice[2] = {"y", "y"};
    teexec_tensor *pair[2] = {0};
    ins[0] = xd;
    ok(teexec_session_run_with(s, ro, 1, kIn, ins, 2, twice, pair), "output twice");
    assert_ptr_not_equal(teexec_tensor_data_const(pair[0]), teexec_tensor_data_const(pair[1]));
    for (int k = 0; k < 2; k++) {
        ok(teexec_tensor_to_host(pair[k], &yh), "to host");
        assert_memory_equal(teexec_tensor_data_const(yh), teexec_tensor_data_const(ref), BYTES);
        teexec_tensor_destroy(yh);
        teexec_tensor_destroy(pair[k]);
    }
    /* host-only paths refuse a device tensor */
    teexec_tensor *cast = NULL;
    expect(teexec_tensor_cast(xd, TEEXEC_DTYPE_FLOAT16, &cast), TEEXEC_ERR_INVALID_ARGUMENT,
           "CUDA device tensor");
    tg_record("device_io_no_host_copies", 1, NULL);
    teexec_run_options_destroy(ro);
    teexec_tensor_destroy(xd);
    teexec_tensor_destroy(ref);
    free(x);
    teexec_session_destroy(s);
}

/* teexec_session_run_into on the device: y written into the caller's
 * device tensor (library-allocated and borrowed) equals the host run bit
 * for bit with no host copy and no allocation; a host tensor bound on a
 * CUDA session works too; a queued run into a bound device tensor
 * completes by teexec_session_wait; wrong bindings are refused by name and
 * the session keeps working. */
static void test_bound_device_outputs(void **state)
{
    (void)state;
    teexec_session *s = session();
    float *x = host_x(N);
    teexec_tensor *ref = host_run(s, x);
    teexec_tensor *xd = NULL, *yd = NULL, *yh = NULL, *back = NULL;
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, kDims, &xd), "device x");
    assert_int_equal(cudaMemcpy(teexec_tensor_data(xd), x, BYTES, cudaMemcpyHostToDevice),
                     cudaSuccess);
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, kDims, &yd), "device y");
    assert_int_equal(cudaMemset(teexec_tensor_data(yd), 0xff, BYTES), cudaSuccess);
    const teexec_tensor *ins[1] = {xd};
    teexec_tensor *bind[1] = {yd};
    uint64_t c0 = tx_session_cuda_host_copies(s);
    ok(teexec_session_run_into(s, NULL, 1, kIn, ins, 1, kOut, bind), "run into device y");
    assert_int_equal(tx_session_cuda_host_copies(s) - c0, 0);
    ok(teexec_tensor_to_host(yd, &back), "to host");
    assert_memory_equal(teexec_tensor_data_const(back), teexec_tensor_data_const(ref), BYTES);
    teexec_tensor_destroy(back);
    /* a caller's cudaMalloc'd buffer, queued without a host wait */
    void *mine = NULL;
    assert_int_equal(cudaMalloc(&mine, BYTES), cudaSuccess);
    assert_int_equal(cudaMemset(mine, 0, BYTES), cudaSuccess);
    teexec_tensor *yb = NULL;
    ok(teexec_tensor_create_device_borrowed(TEEXEC_DTYPE_FLOAT, 2, kDims, mine, BYTES, &yb),
       "borrowed y");
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro), "run options");
    ok(teexec_run_options_set_no_sync(ro, 1), "no sync");
    bind[0] = yb;
    ok(teexec_session_run_into(s, ro, 1, kIn, ins, 1, kOut, bind), "queued run into borrowed y");
    ok(teexec_session_wait(s), "wait");
    float *h = malloc(BYTES);
    assert_non_null(h);
    assert_int_equal(cudaMemcpy(h, mine, BYTES, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(h, teexec_tensor_data_const(ref), BYTES);
    /* no_sync cannot leave a host output to copy in */
    ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 2, kDims, &yh), "host y");
    bind[0] = yh;
    expect(teexec_session_run_into(s, ro, 1, kIn, ins, 1, kOut, bind),
           TEEXEC_ERR_INVALID_ARGUMENT, "outputs bound to device tensors");
    ok(teexec_run_options_set_no_sync(ro, 0), "sync again");
    /* a host tensor bound on a CUDA session */
    ok(teexec_session_run_into(s, ro, 1, kIn, ins, 1, kOut, bind), "run into host y");
    assert_memory_equal(teexec_tensor_data_const(yh), teexec_tensor_data_const(ref), BYTES);
    /* wrong bindings */
    const int64_t wide[2] = {N, D + 1};
    teexec_tensor *ywide = NULL, *yhalf = NULL;
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, wide, &ywide), "wide y");
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT16, 2, kDims, &yhalf), "fp16 y");
    bind[0] = ywide;
    expect(teexec_session_run_into(s, NULL, 1, kIn, ins, 1, kOut, bind),
           TEEXEC_ERR_INVALID_ARGUMENT, "its bound tensor is [16,1025]");
    bind[0] = yhalf;
    expect(teexec_session_run_into(s, NULL, 1, kIn, ins, 1, kOut, bind),
           TEEXEC_ERR_INVALID_ARGUMENT, "its bound tensor is float16");
    /* the session still writes the right tensor */
    assert_int_equal(cudaMemset(mine, 0, BYTES), cudaSuccess);
    bind[0] = yb;
    ok(teexec_session_run_into(s, NULL, 1, kIn, ins, 1, kOut, bind), "run into borrowed y again");
    assert_int_equal(cudaMemcpy(h, mine, BYTES, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(h, teexec_tensor_data_const(ref), BYTES);
    tg_record("device_io_bound_outputs", 1, NULL);
    free(h);
    teexec_run_options_destroy(ro);
    teexec_tensor_destroy(ywide);
    teexec_tensor_destroy(yhalf);
    teexec_tensor_destroy(yb);
    assert_int_equal(cudaFree(mine), cudaSuccess);
    teexec_tensor_destroy(yh);
    teexec_tensor_destroy(yd);
    teexec_tensor_destroy(xd);
    teexec_tensor_destroy(ref);
    free(x);
    teexec_session_destroy(s);
}

/* The caller fills x and reads y on its own stream; teexec never waits on
 * the host. */
static void test_caller_stream_without_a_host_wait(void **state)
{
    (void)state;
    teexec_session *s = session();
    float *x = host_x(N);
    teexec_tensor *ref = host_run(s, x);
    cudaStream_t cs;
    assert_int_equal(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking), cudaSuccess);
    float *xpinned = NULL, *ypinned = NULL;
    assert_int_equal(cudaMallocHost((void **)&xpinned, BYTES), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&ypinned, BYTES), cudaSuccess);
    memcpy(xpinned, x, BYTES);
    teexec_tensor *xd = NULL;
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, kDims, &xd), "device x");
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro), "run options");
    ok(teexec_run_options_set_device_outputs(ro, 1), "device outputs");
    ok(teexec_run_options_set_no_sync(ro, 1), "no sync");
    ok(teexec_run_options_set_cuda_stream(ro, cs), "stream");
    for (int iter = 0; iter < 3; iter++) {
        memset(ypinned, 0, BYTES);
        assert_int_equal(cudaMemcpyAsync(teexec_tensor_data(xd), xpinned, BYTES,
                                         cudaMemcpyHostToDevice, cs),
                         cudaSuccess);
        const teexec_tensor *ins[1] = {xd};
        teexec_tensor *yd = NULL;
        ok(teexec_session_run_with(s, ro, 1, kIn, ins, 1, kOut, &yd), "queued run");
        assert_int_equal(cudaMemcpyAsync(ypinned, teexec_tensor_data_const(yd), BYTES,
                                         cudaMemcpyDeviceToHost, cs),
                         cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(cs), cudaSuccess);
        assert_memory_equal(ypinned, teexec_tensor_data_const(ref), BYTES);
        teexec_tensor_destroy(yd);
    }
    /* and without a caller stream: teexec_session_wait */
    ok(teexec_run_options_set_cuda_stream(ro, NULL), "no stream");
    assert_int_equal(cudaMemcpy(teexec_tensor_data(xd), x, BYTES, cudaMemcpyHostToDevice),
                     cudaSuccess);
    const teexec_tensor *ins[1] = {xd};
    teexec_tensor *yd = NULL, *yh = NULL;
    ok(teexec_session_run_with(s, ro, 1, kIn, ins, 1, kOut, &yd), "queued run");
    ok(teexec_session_wait(s), "wait");
    ok(teexec_tensor_to_host(yd, &yh), "to host");
    assert_memory_equal(teexec_tensor_data_const(yh), teexec_tensor_data_const(ref), BYTES);
    teexec_tensor_destroy(yh);
    teexec_tensor_destroy(yd);
    tg_record("device_io_caller_stream", 1, NULL);
    teexec_run_options_destroy(ro);
    teexec_tensor_destroy(xd);
    cudaFreeHost(xpinned);
    cudaFreeHost(ypinned);
    assert_int_equal(cudaStreamDestroy(cs), cudaSuccess);
    teexec_tensor_destroy(ref);
    free(x);
    teexec_session_destroy(s);
}

static void test_refusals_leave_the_session_usable(void **state)
{
    (void)state;
    teexec_session *s = session();
    float *x = host_x(N);
    teexec_tensor *ref = host_run(s, x);
    teexec_tensor *xd = NULL, *bad = NULL, *wide = NULL;
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, kDims, &xd), "device x");
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT16, 2, kDims, &bad), "device fp16 x");
    const int64_t wdims[2] = {N, D + 1};
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, wdims, &wide), "device wide x");
    assert_int_equal(cudaMemcpy(teexec_tensor_data(xd), x, BYTES, cudaMemcpyHostToDevice),
                     cudaSuccess);
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro), "run options");
    ok(teexec_run_options_set_no_sync(ro, 1), "no sync");
    const teexec_tensor *ins[1] = {xd};
    teexec_tensor *y = (teexec_tensor *)1;
    expect(teexec_session_run_with(s, ro, 1, kIn, ins, 1, kOut, &y), TEEXEC_ERR_INVALID_ARGUMENT,
           "leave its outputs on the device");
    assert_null(y);
    ins[0] = bad;
    expect(teexec_session_run(s, 1, kIn, ins, 1, kOut, &y), TEEXEC_ERR_INVALID_ARGUMENT,
           "float16");
    ins[0] = wide;
    expect(teexec_session_run(s, 1, kIn, ins, 1, kOut, &y), TEEXEC_ERR_INVALID_ARGUMENT, "1025");
    /* still runs, from the device input, to the same outputs */
    ins[0] = xd;
    ok(teexec_session_run(s, 1, kIn, ins, 1, kOut, &y), "run after the refusals");
    assert_memory_equal(teexec_tensor_data_const(y), teexec_tensor_data_const(ref), BYTES);
    teexec_tensor_destroy(y);
    tg_record("device_io_refusals", 1, NULL);
    teexec_run_options_destroy(ro);
    teexec_tensor_destroy(xd);
    teexec_tensor_destroy(bad);
    teexec_tensor_destroy(wide);
    teexec_tensor_destroy(ref);
    free(x);
    teexec_session_destroy(s);
}

/* A device failure mid-run (the session's test seam: the real thing would
 * break the CUDA context of the whole process) poisons that session only:
 * it refuses every later run and says why; another session over the same
 * model and shared weights keeps giving the same outputs. */
static void test_device_fault_poisons_only_its_session(void **state)
{
    (void)state;
    teexec_session *a = session(), *b = session();
    float *x = host_x(N);
    teexec_tensor *ref = host_run(b, x), *ya = host_run(a, x);
    assert_memory_equal(teexec_tensor_data_const(ya), teexec_tensor_data_const(ref), BYTES);
    teexec_tensor_destroy(ya);
    teexec_tensor *xt = NULL, *y = NULL;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, kDims, x, BYTES, &xt), "x");
    const teexec_tensor *ins[1] = {xt};
    tx_session_cuda_inject_device_fault(a);
    expect(teexec_session_run(a, 1, kIn, ins, 1, kOut, &y), TEEXEC_ERR_DEVICE,
           "this session is unusable now");
    assert_true(tx_session_cuda_poisoned(a));
    expect(teexec_session_run(a, 1, kIn, ins, 1, kOut, &y), TEEXEC_ERR_DEVICE,
           "an earlier run failed on the device (cuda kernel failed: injected fault");
    assert_false(tx_session_cuda_poisoned(b));
    ok(teexec_session_run(b, 1, kIn, ins, 1, kOut, &y), "the other session after the fault");
    assert_memory_equal(teexec_tensor_data_const(y), teexec_tensor_data_const(ref), BYTES);
    teexec_tensor_destroy(y);
    /* destroying the poisoned session frees what it held; a new one runs */
    teexec_session_destroy(a);
    a = session();
    ok(teexec_session_run(a, 1, kIn, ins, 1, kOut, &y), "a new session after the fault");
    assert_memory_equal(teexec_tensor_data_const(y), teexec_tensor_data_const(ref), BYTES);
    tg_record("device_fault_poisons_one_session", 1, NULL);
    teexec_tensor_destroy(y);
    teexec_tensor_destroy(xt);
    teexec_tensor_destroy(ref);
    free(x);
    teexec_session_destroy(a);
    teexec_session_destroy(b);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_timing_host_against_device(void **state)
{
    (void)state;
    enum { ITERS = 500 };
    teexec_session *s = session();
    float *x = host_x(N);
    teexec_tensor *xt = NULL, *xd = NULL;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, kDims, x, BYTES, &xt), "x");
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, kDims, &xd), "device x");
    assert_int_equal(cudaMemcpy(teexec_tensor_data(xd), x, BYTES, cudaMemcpyHostToDevice),
                     cudaSuccess);
    const teexec_tensor *hin[1] = {xt}, *din[1] = {xd};
    teexec_tensor *y = NULL;
    for (int i = 0; i < 20; i++) { /* warm both paths */
        ok(teexec_session_run(s, 1, kIn, hin, 1, kOut, &y), "warm");
        teexec_tensor_destroy(y);
    }
    double t0 = now_ms();
    for (int i = 0; i < ITERS; i++) {
        ok(teexec_session_run(s, 1, kIn, hin, 1, kOut, &y), "host loop");
        teexec_tensor_destroy(y);
    }
    double host_ms = (now_ms() - t0) / ITERS;
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro), "run options");
    ok(teexec_run_options_set_device_outputs(ro, 1), "device outputs");
    /* synchronous device runs (each returns finished) */
    t0 = now_ms();
    for (int i = 0; i < ITERS; i++) {
        ok(teexec_session_run_with(s, ro, 1, kIn, din, 1, kOut, &y), "device loop");
        teexec_tensor_destroy(y);
    }
    double dev_ms = (now_ms() - t0) / ITERS;
    /* queued: outputs kept until one wait at the end */
    ok(teexec_run_options_set_no_sync(ro, 1), "no sync");
    teexec_tensor **ys = calloc(ITERS, sizeof(*ys));
    assert_non_null(ys);
    t0 = now_ms();
    for (int i = 0; i < ITERS; i++)
        ok(teexec_session_run_with(s, ro, 1, kIn, din, 1, kOut, &ys[i]), "queued loop");
    ok(teexec_session_wait(s), "wait");
    double queued_ms = (now_ms() - t0) / ITERS;
    for (int i = 0; i < ITERS; i++) teexec_tensor_destroy(ys[i]);
    free(ys);
    /* the serving loop: device inputs into one bound device output, no
     * allocation per run; synchronous, then queued */
    teexec_tensor *yb = NULL;
    ok(teexec_tensor_create_device(TEEXEC_DTYPE_FLOAT, 2, kDims, &yb), "bound y");
    teexec_tensor *bind[1] = {yb};
    ok(teexec_run_options_set_no_sync(ro, 0), "sync");
    t0 = now_ms();
    for (int i = 0; i < ITERS; i++)
        ok(teexec_session_run_into(s, ro, 1, kIn, din, 1, kOut, bind), "bound loop");
    double bound_ms = (now_ms() - t0) / ITERS;
    ok(teexec_run_options_set_no_sync(ro, 1), "no sync");
    t0 = now_ms();
    for (int i = 0; i < ITERS; i++)
        ok(teexec_session_run_into(s, ro, 1, kIn, din, 1, kOut, bind), "queued bound loop");
    ok(teexec_session_wait(s), "wait");
    double bound_queued_ms = (now_ms() - t0) / ITERS;
    teexec_tensor_destroy(yb);
    char detail[300];
    snprintf(detail, sizeof detail, "per run: host tensors %.4f ms, device tensors (new outputs) "
             "%.4f ms, queued %.4f ms; bound device output %.4f ms, queued %.4f ms (N=%d, D=%d)",
             host_ms, dev_ms, queued_ms, bound_ms, bound_queued_ms, N, D);
    fprintf(stderr, "timing: %s\n", detail);
    tg_record("device_io_timing", bound_ms <= host_ms, detail);
    teexec_run_options_destroy(ro);
    teexec_tensor_destroy(xt);
    teexec_tensor_destroy(xd);
    free(x);
    teexec_session_destroy(s);
}

/* Shape buckets on the device: 30 random batch sizes in [1, 32] padded to
 * multiples of 8 give a fresh session's outputs at each size (rel. error
 * <= 1e-5: the padded GEMM may take another cuBLASLt algorithm) with at
 * most 4 executors (one capture each). */
static void test_buckets_on_cuda(void **state)
{
    (void)state;
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o), "options");
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CUDA), "device");
    ok(teexec_session_options_set_deterministic(o, 1), "deterministic");
    ok(teexec_session_options_set_dim_multiple(o, "N", 8), "buckets");
    teexec_session *s = NULL;
    ok(teexec_session_create(g_model, o, &s), "bucketed session");
    teexec_session_options_destroy(o);
    uint64_t seed = 12345;
    double worst = 0;
    for (int it = 0; it < 30; it++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int64_t n = (int64_t)((seed >> 33) % 32) + 1;
        float *x = host_x((size_t)n);
        int64_t dims[2] = {n, D};
        teexec_tensor *xt = NULL, *y = NULL, *ref = NULL;
        ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, dims, x, (size_t)n * D * sizeof(float),
                                     &xt),
           "x");
        const teexec_tensor *ins[1] = {xt};
        ok(teexec_session_run(s, 1, kIn, ins, 1, kOut, &y), "bucketed run");
        assert_int_equal(teexec_tensor_dims(y)[0], n);
        teexec_session_options *fo = NULL;
        teexec_session *fresh = NULL;
        ok(teexec_session_options_create(&fo), "options");
        ok(teexec_session_options_set_device(fo, TEEXEC_DEVICE_CUDA), "device");
        ok(teexec_session_options_set_deterministic(fo, 1), "deterministic");
        ok(teexec_session_options_set_dim(fo, "N", n), "dim");
        ok(teexec_session_create(g_model, fo, &fresh), "fresh session");
        teexec_session_options_destroy(fo);
        ok(teexec_session_run(fresh, 1, kIn, ins, 1, kOut, &ref), "fresh run");
        const float *a = teexec_tensor_data_const(y), *b = teexec_tensor_data_const(ref);
        double num = 0, den = 0;
        for (size_t i = 0; i < (size_t)n * D; i++) {
            num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
            den += (double)b[i] * b[i];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (rel > worst) worst = rel;
        assert_true(rel <= 1e-5);
        assert_true(teexec_session_plan_count(s) <= 4);
        teexec_session_destroy(fresh);
        teexec_tensor_destroy(ref);
        teexec_tensor_destroy(y);
        teexec_tensor_destroy(xt);
        free(x);
    }
    char detail[128];
    snprintf(detail, sizeof detail, "30 sizes in [1,32], %zu executors, worst rel-L2 %.3g",
             teexec_session_plan_count(s), worst);
    fprintf(stderr, "buckets: %s\n", detail);
    tg_record("shape_buckets_cuda", 1, detail);
    teexec_session_destroy(s);
}

/* x [B, S, 64] -> MatMul 64x64 -> Add bias -> Relu -> MatMul 64x64: every
 * position on its own, so padding B or S changes no real output. */
enum { TD = 64 };

static teexec_model *token_model(void)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("tokens_cuda");
    m->graph = g;
    mb_input(g, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "B,S,64");
    mb_output(g, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "B,S,64");
    const int64_t wd[2] = {TD, TD}, bd[1] = {TD};
    const char *names[3] = {"w0", "b0", "w1"};
    for (int k = 0; k < 3; k++) {
        mb_init(g, names[k], k == 1 ? bd : wd, k == 1 ? 1 : 2);
        Onnx__TensorProto *t = g->initializer[g->n_initializer - 1];
        float *v = (float *)t->raw_data.data;
        size_t n = k == 1 ? TD : (size_t)TD * TD;
        for (size_t i = 0; i < n; i++)
            v[i] = (float)((int)((i * 2654435761u + (size_t)k * 977u) % 257u) - 128) / 1024.0f;
    }
    mb_node(g, "mm0", "MatMul", NULL, "x,w0", "h0");
    mb_node(g, "add", "Add", NULL, "h0,b0", "h1");
    mb_node(g, "relu", "Relu", NULL, "h1", "h2");
    mb_node(g, "mm1", "MatMul", NULL, "h2,w1", "y");
    size_t size = 0;
    uint8_t *buf = mb_pack(m, &size);
    mb_free_all();
    teexec_model *model = NULL;
    ok(teexec_model_load_memory(buf, size, NULL, NULL, &model), "loading the token model");
    free(buf);
    return model;
}

static teexec_session *cuda_token_session(teexec_model *m, bool bucketed, int64_t b, int64_t sq)
{
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o), "options");
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CUDA), "device");
    ok(teexec_session_options_set_deterministic(o, 1), "deterministic");
    if (bucketed) {
        ok(teexec_session_options_set_dim_multiple(o, "B", 8), "B buckets");
        const int64_t seq_sizes[2] = {32, 16};
        ok(teexec_session_options_set_dim_buckets(o, "S", seq_sizes, 2), "S buckets");
    } else {
        ok(teexec_session_options_set_dim(o, "B", b), "B");
        ok(teexec_session_options_set_dim(o, "S", sq), "S");
    }
    teexec_session *s = NULL;
    ok(teexec_session_create(m, o, &s), "token session");
    teexec_session_options_destroy(o);
    return s;
}

/* Variable traffic in two dims on the device: 50 seeded random (B, S)
 * shapes, B in [1, 16] padded to a multiple of 8, S in [1, 32] to the
 * listed 16 or 32, so 4 bucket pairs, which a CUDA session's 4 executors
 * hold without eviction. Each output equals a fresh unbucketed session's
 * at that exact shape (rel-L2 <= 1e-5: the padded GEMM may take another
 * cuBLASLt algorithm), and the session built exactly one executor per
 * bucket pair met: each executor captures its CUDA graph once
 * (cuda_executor_run.c launch), so that is also the number of captures. */
static void test_two_dims_of_random_traffic_on_cuda(void **state)
{
    (void)state;
    teexec_model *m = token_model();
    teexec_session *s = cuda_token_session(m, true, 0, 0);
    bool seen[2][2] = {{false}};
    seen[0][0] = true; /* created at B = S = 1: bucket (8, 16) */
    uint32_t rng = 2024u;
    double worst = 0;
    for (int i = 0; i < 50; i++) {
        rng = rng * 1664525u + 1013904223u;
        int64_t b = 1 + (int64_t)((rng >> 8) % 16u);
        rng = rng * 1664525u + 1013904223u;
        int64_t sq = 1 + (int64_t)((rng >> 8) % 32u);
        seen[b > 8][sq > 16] = true;
        int64_t dims[3] = {b, sq, TD};
        size_t n = (size_t)(b * sq * TD);
        teexec_tensor *x = NULL, *want = NULL, *got = NULL;
        ok(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 3, dims, &x), "x");
        float *v = teexec_tensor_data(x);
        for (size_t k = 0; k < n; k++) v[k] = (float)((int)((k * 13 + (size_t)i) % 17u) - 8) * 0.125f;
        const teexec_tensor *ins[1] = {x};
        teexec_session *fresh = cuda_token_session(m, false, b, sq);
        ok(teexec_session_run(fresh, 1, kIn, ins, 1, kOut, &want), "fresh run");
        ok(teexec_session_run(s, 1, kIn, ins, 1, kOut, &got), "bucketed run");
        assert_int_equal(teexec_tensor_rank(got), 3);
        assert_int_equal(teexec_tensor_dims(got)[0], b);
        assert_int_equal(teexec_tensor_dims(got)[1], sq);
        assert_int_equal(teexec_tensor_byte_size(got), teexec_tensor_byte_size(want));
        const float *a = teexec_tensor_data_const(got), *r = teexec_tensor_data_const(want);
        double num = 0, den = 0;
        for (size_t k = 0; k < n; k++) {
            num += ((double)a[k] - r[k]) * ((double)a[k] - r[k]);
            den += (double)r[k] * r[k];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (rel > worst) worst = rel;
        assert_true(rel <= 1e-5);
        teexec_tensor_destroy(want);
        teexec_tensor_destroy(got);
        teexec_tensor_destroy(x);
        teexec_session_destroy(fresh);
    }
    size_t pairs = (size_t)seen[0][0] + seen[0][1] + seen[1][0] + seen[1][1];
    uint64_t built = tx_session_plans_built(s);
    char detail[160];
    snprintf(detail, sizeof detail,
             "50 (B, S) shapes, %zu bucket pairs met, %llu executors built (one capture each), "
             "worst rel-L2 %.3g",
             pairs, (unsigned long long)built, worst);
    fprintf(stderr, "two-dim buckets: %s\n", detail);
    tg_record("shape_buckets_cuda_2d", 1, detail);
    assert_int_equal(built, pairs);
    assert_int_equal(teexec_session_plan_count(s), pairs);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

/* A per-run profile on a CUDA session made without profiling (its
 * executor captures a CUDA graph): the profiled run is launched kernel by
 * kernel and timed, its outputs bit-identical to the replayed runs before
 * and after it; every row ran once; the session-wide profile stays
 * refused (the session was not created with it). */
static void test_run_profile_on_cuda(void **state)
{
    (void)state;
    teexec_session *s = session();
    float *x = host_x(N);
    teexec_tensor *y0 = host_run(s, x), *y1 = NULL, *y2 = NULL, *xt = NULL;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, kDims, x, BYTES, &xt), "x");
    const teexec_tensor *ins[1] = {xt};
    teexec_run_options *ro = NULL;
    ok(teexec_run_options_create(&ro), "run options");
    ok(teexec_run_options_set_profile(ro, 1), "profile");
    ok(teexec_session_run_with(s, ro, 1, kIn, ins, 1, kOut, &y1), "profiled run");
    ok(teexec_session_run(s, 1, kIn, ins, 1, kOut, &y2), "replayed run");
    assert_memory_equal(teexec_tensor_data_const(y1), teexec_tensor_data_const(y0), BYTES);
    assert_memory_equal(teexec_tensor_data_const(y2), teexec_tensor_data_const(y0), BYTES);
    char *text = NULL;
    ok(teexec_session_run_profile(s, &text), "reading the run profile");
    fprintf(stderr, "%s", text);
    assert_non_null(strstr(text, "run profile (cuda, event time of each kernel"));
    int rows = 0;
    for (const char *p = strstr(text, "\ngroup  pass"); p && (p = strchr(p + 1, '\n'));) {
        if (!p[1] || !strncmp(p + 1, "rows: ", 6)) break;
        unsigned long long calls = 0;
        assert_int_equal(sscanf(p + 1 + 6 + 1 + 4 + 1 + 60, "%llu", &calls), 1);
        assert_int_equal(calls, 1);
        rows++;
    }
    assert_true(rows >= LAYERS);
    char detail[96];
    snprintf(detail, sizeof detail, "%d kernel rows, outputs bit-identical to replays", rows);
    tg_record("run_profile_cuda", 1, detail);
    teexec_string_free(text);
    expect(teexec_session_profile(s, &text), TEEXEC_ERR_INVALID_ARGUMENT,
           "not created with profiling");
    teexec_run_options_destroy(ro);
    teexec_tensor_destroy(y0);
    teexec_tensor_destroy(y1);
    teexec_tensor_destroy(y2);
    teexec_tensor_destroy(xt);
    free(x);
    teexec_session_destroy(s);
}

int main(void)
{
    tg_require_gpu("test_gpu_device_io");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_run_matches_and_copies_nothing),
        cmocka_unit_test(test_bound_device_outputs),
        cmocka_unit_test(test_caller_stream_without_a_host_wait),
        cmocka_unit_test(test_refusals_leave_the_session_usable),
        cmocka_unit_test(test_device_fault_poisons_only_its_session),
        cmocka_unit_test(test_timing_host_against_device),
        cmocka_unit_test(test_buckets_on_cuda),
        cmocka_unit_test(test_two_dims_of_random_traffic_on_cuda),
        cmocka_unit_test(test_run_profile_on_cuda),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
