/*
 * device_stream.c - the loop a serving stack runs on a GPU: inputs and
 * outputs in the caller's device memory, every copy and every run queued on
 * the caller's CUDA stream, the host waiting once at the end.
 *
 *   device_stream MODEL.onnx NAME=FILE.npy [RUNS]
 *   device_stream models/mlp/model.onnx x=models/mlp/inputs/x.npy 16
 *
 * The model must have one float32 input (NAME) and its first output is
 * read. Run k feeds the input scaled by (1 + k/8), so every run has its
 * own answer; after the one wait, each is held against a plain host-tensor
 * run of the same session on the same input, bit for bit (one CUDA session
 * runs one executor per shape, whichever way its tensors come and go).
 * Exits 77 (a skip, to the test harness) when there is no CUDA device.
 *
 * What it relies on (docs/api.md, "Device tensors" and "Run options"):
 *  - teexec_tensor_create_device_borrowed wraps the caller's cudaMalloc'd
 *    memory; teexec never frees it, and it must outlive every run using it;
 *  - run options set_cuda_stream(stream): the run starts after the work
 *    queued on `stream` so far, and work queued there afterwards waits for
 *    it. So one input buffer can be refilled by the next run's copy while
 *    nothing on the host waits: stream order keeps them apart;
 *  - set_no_sync(1): teexec_session_run_into returns once the run is
 *    queued; every output must then stay on the device, here bound to the
 *    caller's buffer (no allocation, no host transfer inside the run).
 *
 * Build it against an installed libteexec and the CUDA runtime:
 *   cc device_stream.c $(pkg-config --cflags --libs teexec) \
 *      -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -o device_stream
 * A cudaStream_t is the driver's stream handle, so a stream made by the
 * program's CUDA runtime is valid for the one inside libteexec.
 */
#include <teexec/teexec.h>

#include <cuda_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RUNS 256

static int failed(teexec_status *st, const char *what)
{
    if (!st) return 0;
    fprintf(stderr, "device_stream: %s: %s [%s]\n", what, teexec_status_message(st),
            teexec_code_name(teexec_status_code(st)));
    teexec_status_destroy(st);
    return 1;
}

static int cuda_failed(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "device_stream: %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 3 || !strchr(argv[2], '=')) {
        fprintf(stderr, "usage: device_stream MODEL.onnx NAME=FILE.npy [RUNS]\n");
        return 2;
    }
    int runs = argc > 3 ? atoi(argv[3]) : 16;
    if (runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "device_stream: RUNS must be 1 to %d\n", MAX_RUNS);
        return 2;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        printf("device_stream: no CUDA device here: nothing to show (skipped)\n");
        return 77;
    }

    int rc = 1;
    char *name = strdup(argv[2]);
    teexec_model *model = NULL;
    teexec_session_options *so = NULL;
    teexec_session *session = NULL;
    teexec_run_options *ro = NULL;
    teexec_tensor *x = NULL, *x_run = NULL, *y_ref = NULL, *x_dev = NULL, *y_dev = NULL;
    cudaStream_t stream = NULL;
    void *x_mem = NULL, *y_mem = NULL;
    float *x_pinned = NULL;
    unsigned char *y_pinned = NULL;
    if (!name) goto done;
    char *path = strchr(name, '=');
    *path++ = '\0';

    if (failed(teexec_model_load_file(argv[1], NULL, &model), "loading the model")) goto done;
    if (failed(teexec_tensor_load_file(path, &x), "reading the input")) goto done;
    if (teexec_tensor_dtype(x) != TEEXEC_DTYPE_FLOAT) {
        fprintf(stderr, "device_stream: %s must be float32\n", path);
        goto done;
    }
    const int32_t rank = teexec_tensor_rank(x);
    const int64_t *dims = teexec_tensor_dims(x);
    const size_t x_bytes = teexec_tensor_byte_size(x), n_x = x_bytes / sizeof(float);

    /* A CUDA session planned for the input's shape (its symbolic dims
     * bound by the first run); deterministic so a rerun is bit-equal. */
    if (failed(teexec_session_options_create(&so), "options")) goto done;
    if (failed(teexec_session_options_set_device(so, TEEXEC_DEVICE_CUDA), "device")) goto done;
    if (failed(teexec_session_options_set_deterministic(so, 1), "deterministic")) goto done;
    if (failed(teexec_session_create(model, so, &session), "creating a CUDA session")) goto done;

    /* One host run tells the output's dtype and shape, so the caller can
     * allocate the buffer the device runs write into. */
    const char *in_names[1] = {name};
    const char *out_name[1] = {teexec_model_output(model, 0)->name};
    const teexec_tensor *ins[1] = {x};
    if (failed(teexec_session_run(session, 1, in_names, ins, 1, out_name, &y_ref), "host run"))
        goto done;
    const size_t y_bytes = teexec_tensor_byte_size(y_ref);

    /* The caller's resources: a stream, device buffers, pinned host
     * memory (asynchronous copies need it), one output slot per run. */
    if (cuda_failed(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream") ||
        cuda_failed(cudaMalloc(&x_mem, x_bytes), "input buffer") ||
        cuda_failed(cudaMalloc(&y_mem, y_bytes), "output buffer") ||
        cuda_failed(cudaMallocHost((void **)&x_pinned, x_bytes * (size_t)runs), "pinned input") ||
        cuda_failed(cudaMallocHost((void **)&y_pinned, y_bytes * (size_t)runs), "pinned output"))
        goto done;
    if (failed(teexec_tensor_create_device_borrowed(TEEXEC_DTYPE_FLOAT, rank, dims, x_mem, x_bytes,
                                                    &x_dev),
               "wrapping the input buffer") ||
        failed(teexec_tensor_create_device_borrowed(teexec_tensor_dtype(y_ref),
                                                    teexec_tensor_rank(y_ref),
                                                    teexec_tensor_dims(y_ref), y_mem, y_bytes,
                                                    &y_dev),
               "wrapping the output buffer"))
        goto done;
    const float *x0 = teexec_tensor_data_const(x);
    for (int k = 0; k < runs; k++)
        for (size_t i = 0; i < n_x; i++)
            x_pinned[(size_t)k * n_x + i] = x0[i] * (1.0f + (float)k / 8.0f);

    if (failed(teexec_run_options_create(&ro), "run options") ||
        failed(teexec_run_options_set_cuda_stream(ro, stream), "run stream") ||
        failed(teexec_run_options_set_no_sync(ro, 1), "no host wait"))
        goto done;

    /* The loop: copy in, run, copy out, all on `stream`; nothing here
     * waits for the device until the one synchronize after it. */
    const teexec_tensor *dev_ins[1] = {x_dev};
    double t0 = now_ms();
    for (int k = 0; k < runs; k++) {
        if (cuda_failed(cudaMemcpyAsync(x_mem, x_pinned + (size_t)k * n_x, x_bytes,
                                        cudaMemcpyHostToDevice, stream),
                        "queuing the input copy"))
            goto done;
        teexec_tensor *outs[1] = {y_dev};
        if (failed(teexec_session_run_into(session, ro, 1, in_names, dev_ins, 1, out_name, outs),
                   "queuing a run"))
            goto done;
        if (cuda_failed(cudaMemcpyAsync(y_pinned + (size_t)k * y_bytes, y_mem, y_bytes,
                                        cudaMemcpyDeviceToHost, stream),
                        "queuing the output copy"))
            goto done;
    }
    double queued = now_ms() - t0;
    if (cuda_failed(cudaStreamSynchronize(stream), "waiting for the stream")) goto done;
    double total = now_ms() - t0;

    /* Each run against a plain host run on the same input. */
    int64_t *x_dims = malloc((size_t)rank * sizeof *x_dims);
    if (!x_dims) goto done;
    memcpy(x_dims, dims, (size_t)rank * sizeof *x_dims);
    int mismatches = 0;
    for (int k = 0; k < runs && !mismatches; k++) {
        teexec_tensor *want = NULL;
        teexec_tensor_destroy(x_run);
        x_run = NULL;
        if (failed(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, rank, x_dims,
                                             x_pinned + (size_t)k * n_x, x_bytes, &x_run),
                   "input copy")) {
            free(x_dims);
            goto done;
        }
        const teexec_tensor *host_ins[1] = {x_run};
        if (failed(teexec_session_run(session, 1, in_names, host_ins, 1, out_name, &want),
                   "host check run")) {
            free(x_dims);
            goto done;
        }
        if (memcmp(teexec_tensor_data_const(want), y_pinned + (size_t)k * y_bytes, y_bytes)) {
            fprintf(stderr, "device_stream: run %d differs from the host run\n", k);
            mismatches++;
        }
        teexec_tensor_destroy(want);
    }
    free(x_dims);
    if (mismatches) goto done;
    printf("device_stream: %d runs queued on the caller's stream in %.3f ms (the host waited "
           "once; %.3f ms in all, %.4f ms a run); every output equals a host run bit for bit\n",
           runs, queued, total, total / runs);
    rc = 0;

done:
    teexec_run_options_destroy(ro);
    teexec_tensor_destroy(x_dev);
    teexec_tensor_destroy(y_dev);
    teexec_tensor_destroy(x_run);
    teexec_tensor_destroy(y_ref);
    teexec_tensor_destroy(x);
    /* the session first: it may still hold work ordered on the stream */
    teexec_session_destroy(session);
    teexec_session_options_destroy(so);
    teexec_model_destroy(model);
    if (x_pinned) cudaFreeHost(x_pinned);
    if (y_pinned) cudaFreeHost(y_pinned);
    if (x_mem) cudaFree(x_mem);
    if (y_mem) cudaFree(y_mem);
    if (stream) cudaStreamDestroy(stream);
    free(name);
    return rc;
}
