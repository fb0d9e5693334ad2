/* comm_nccl.c - the NCCL backend of teexec_comm (comm.h), CUDA builds only.
 *
 * Each rank owns an NCCL communicator on its device and a stream of its
 * own; a collective is queued on that stream and waited for by polling the
 * stream and ncclCommGetAsyncError against the group's timeout, so a peer
 * that died or never arrives ends in ncclCommAbort and TEEXEC_ERR_COMM
 * instead of a hang. Communicators are created non-blocking
 * (ncclConfig_t.blocking = 0) for the same reason: a rank missing at
 * initialisation times out too.
 *
 * Rendezvous (one process per rank): rank 0 asks NCCL for a unique id and
 * writes its 128 bytes to <file>.tmp.<pid>, fsyncs, renames it to <file>;
 * the others poll for the file (its full size) until the timeout. Once
 * rank 0's communicator is up every rank has joined, so every rank has read
 * the id: rank 0 removes the file then, and a later run cannot pick up a
 * dead id. A file left by a run that failed before that is the launcher's
 * to remove (docs/multi-gpu.md); its file time cannot tell, since rank 0
 * may well have written the live one before a slower rank started.
 */
#include "exec/comm.h"

#include "kernels/cuda/nccl_dl.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct nccl_state {
    const tx_nccl_api *api;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready;   /* the caller's stream reached the data (tx_comm_average_device) */
    double *scratch;     /* tx_comm_all_reduce_host's device copy */
    size_t scratch_n;
    int device, timeout_ms;
    bool failed;
    char reason[256];
} nccl_state;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(void)
{
    struct timespec ts = {0, 200000}; /* 0.2 ms */
    nanosleep(&ts, NULL);
}

static teexec_status *fail(teexec_comm *c, const char *what, const char *why)
{
    nccl_state *s = c->state;
    if (!s->failed) {
        s->failed = true;
        snprintf(s->reason, sizeof s->reason, "%s: %s", what, why);
        /* aborting frees NCCL's peers from waiting on this rank */
        if (s->comm) s->api->CommAbort(s->comm);
        s->comm = NULL;
    }
    return tx_error(TEEXEC_ERR_COMM, "rank %d (nccl, device %d): %s", c->rank, s->device,
                    s->reason);
}

/* Waits for NCCL's pending work on the communicator (and, with
 * stream_too, the stream) until the timeout. */
static teexec_status *wait_done(teexec_comm *c, const char *what, bool stream_too)
{
    nccl_state *s = c->state;
    double end = now_s() + s->timeout_ms / 1000.0;
    for (;;) {
        ncclResult_t ar = ncclSuccess;
        ncclResult_t r = s->api->CommGetAsyncError(s->comm, &ar);
        if (r != ncclSuccess) return fail(c, what, s->api->GetErrorString(r));
        if (ar != ncclSuccess && ar != ncclInProgress)
            return fail(c, what, s->api->GetErrorString(ar));
        bool done = ar == ncclSuccess;
        if (done && stream_too) {
            cudaError_t ce = cudaStreamQuery(s->stream);
            if (ce != cudaSuccess && ce != cudaErrorNotReady)
                return fail(c, what, cudaGetErrorString(ce));
            done = ce == cudaSuccess;
        }
        if (done) return NULL;
        if (now_s() > end) {
            char why[96];
            snprintf(why, sizeof why, "timed out after %d ms (a rank failed or hangs)",
                     s->timeout_ms);
            return fail(c, what, why);
        }
        nap();
    }
}

static ncclDataType_t nccl_type(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_DOUBLE ? ncclFloat64
           : dt == TEEXEC_DTYPE_BFLOAT16 ? ncclBfloat16
                                          : ncclFloat32;
}

static teexec_status *enter(teexec_comm *c, const char *what)
{
    nccl_state *s = c->state;
    if (s->failed)
        return tx_error(TEEXEC_ERR_COMM, "rank %d (nccl): %s refused: %s", c->rank, what,
                        s->reason);
    cudaError_t ce = cudaSetDevice(s->device);
    return ce == cudaSuccess ? NULL : fail(c, what, cudaGetErrorString(ce));
}

static teexec_status *issued(teexec_comm *c, const char *what, ncclResult_t r)
{
    nccl_state *s = c->state;
    if (r != ncclSuccess && r != ncclInProgress) return fail(c, what, s->api->GetErrorString(r));
    return wait_done(c, what, true);
}

static teexec_status *n_all_reduce(teexec_comm *c, teexec_dtype dt, const void *send, void *recv,
                                   size_t count)
{
    nccl_state *s = c->state;
    TX_TRY(enter(c, "all_reduce_sum"));
    return issued(c, "all_reduce_sum",
                  s->api->AllReduce(send, recv, count, nccl_type(dt), ncclSum, s->comm,
                                    s->stream));
}

static teexec_status *n_all_gather(teexec_comm *c, teexec_dtype dt, const void *send, void *recv,
                                   size_t count)
{
    nccl_state *s = c->state;
    TX_TRY(enter(c, "all_gather"));
    return issued(c, "all_gather",
                  s->api->AllGather(send, recv, count, nccl_type(dt), s->comm, s->stream));
}

static teexec_status *n_reduce_scatter(teexec_comm *c, teexec_dtype dt, const void *send,
                                       void *recv, size_t count)
{
    nccl_state *s = c->state;
    TX_TRY(enter(c, "reduce_scatter"));
    return issued(c, "reduce_scatter",
                  s->api->ReduceScatter(send, recv, count, nccl_type(dt), ncclSum, s->comm,
                                        s->stream));
}

/* NCCL has no barrier: a one-element all-reduce is one (every rank must
 * reach it before any finishes). */
static teexec_status *n_barrier(teexec_comm *c)
{
    nccl_state *s = c->state;
    TX_TRY(enter(c, "barrier"));
    void *d = NULL;
    cudaError_t ce = cudaMallocAsync(&d, sizeof(float), s->stream);
    if (ce != cudaSuccess) return fail(c, "barrier", cudaGetErrorString(ce));
    ce = cudaMemsetAsync(d, 0, sizeof(float), s->stream);
    teexec_status *st =
        ce != cudaSuccess
            ? fail(c, "barrier", cudaGetErrorString(ce))
            : issued(c, "barrier",
                     s->api->AllReduce(d, d, 1, ncclFloat32, ncclSum, s->comm, s->stream));
    /* on failure the stream may be wedged: leak the 4 bytes rather than
     * queue a free behind a collective that will never finish */
    if (!st) {
        ce = cudaFreeAsync(d, s->stream);
        if (ce == cudaSuccess) ce = cudaStreamSynchronize(s->stream);
        if (ce != cudaSuccess) st = fail(c, "barrier", cudaGetErrorString(ce));
    }
    return st;
}

static void n_abort(teexec_comm *c, const char *reason)
{
    teexec_status_destroy(fail(c, "aborted", reason));
}

static void n_destroy(teexec_comm *c)
{
    nccl_state *s = c->state;
    (void)cudaSetDevice(s->device); /* best effort: destroy cannot fail */
    if (s->comm) {
        /* a healthy communicator finishes its work; a failed one was aborted */
        s->api->CommDestroy(s->comm);
    }
    if (s->scratch) cudaFree(s->scratch);
    if (s->ready) cudaEventDestroy(s->ready);
    if (s->stream) cudaStreamDestroy(s->stream);
    free(s);
    free(c);
}

static const tx_comm_vtable nccl_vt = {
    .name = "nccl",
    .all_reduce_sum = n_all_reduce,
    .all_gather = n_all_gather,
    .reduce_scatter = n_reduce_scatter,
    .barrier = n_barrier,
    .fail_group = n_abort,
    .destroy = n_destroy,
};

int tx_comm_gpu_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static teexec_status *rank_new(const tx_nccl_api *api, int world, int rank, int device,
                               int timeout_ms, teexec_comm **out)
{
    *out = NULL;
    int n = tx_comm_gpu_count();
    if (device >= n)
        return tx_error(TEEXEC_ERR_DEVICE, "rank %d: CUDA device %d asked, %d visible", rank,
                        device, n);
    teexec_comm *c = calloc(1, sizeof *c);
    nccl_state *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return tx_oom();
    }
    s->api = api;
    s->device = device;
    s->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
    c->vt = &nccl_vt;
    c->rank = rank;
    c->world_size = world;
    c->device_memory = true;
    c->state = s;
    cudaError_t ce = cudaSetDevice(device);
    if (ce == cudaSuccess) ce = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess) {
        teexec_status *st = tx_error(TEEXEC_ERR_DEVICE, "rank %d: device %d: %s", rank, device,
                                     cudaGetErrorString(ce));
        n_destroy(c);
        return st;
    }
    *out = c;
    return NULL;
}

static teexec_status *write_id(const char *path, const ncclUniqueId *id)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "rendezvous path too long");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return tx_error(TEEXEC_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    bool ok = write(fd, id, sizeof *id) == (ssize_t)sizeof *id && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return tx_error(TEEXEC_ERR_IO, "cannot write the rendezvous file %s: %s", path,
                        strerror(e));
    }
    return NULL;
}

static teexec_status *read_id(const char *path, int rank, int timeout_ms, ncclUniqueId *id)
{
    double end = now_s() + (timeout_ms > 0 ? timeout_ms : 60000) / 1000.0;
    for (;;) {
        struct stat sb;
        /* a whole file: rank 0 renames it into place */
        if (stat(path, &sb) == 0 && sb.st_size == (off_t)sizeof *id) {
            FILE *f = fopen(path, "rb");
            if (f) {
                size_t got = fread(id, 1, sizeof *id, f);
                fclose(f);
                if (got == sizeof *id) return NULL;
            }
        }
        if (now_s() > end)
            return tx_error(TEEXEC_ERR_COMM,
                            "rank %d: no NCCL id from rank 0 in %s after %d ms (did rank 0 start?)",
                            rank, path, timeout_ms > 0 ? timeout_ms : 60000);
        struct timespec ts = {0, 20000000}; /* 20 ms */
        nanosleep(&ts, NULL);
    }
}

teexec_status *tx_comm_nccl_create(int world, int rank, int device, const char *rendezvous,
                                   int timeout_ms, teexec_comm **out)
{
    const tx_nccl_api *api;
    TX_TRY(tx_nccl_load(&api));
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) {
        ncclResult_t r = api->GetUniqueId(&id);
        if (r != ncclSuccess)
            return tx_error(TEEXEC_ERR_DEVICE, "ncclGetUniqueId: %s", api->GetErrorString(r));
        if (world > 1) TX_TRY(write_id(rendezvous, &id));
    } else {
        TX_TRY(read_id(rendezvous, rank, timeout_ms, &id));
    }
    teexec_comm *c;
    TX_TRY(rank_new(api, world, rank, device, timeout_ms, &c));
    nccl_state *s = c->state;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = api->CommInitRankConfig(&s->comm, world, id, rank, &cfg);
    teexec_status *st = NULL;
    if (r != ncclSuccess && r != ncclInProgress)
        st = fail(c, "ncclCommInitRank", api->GetErrorString(r));
    else
        st = wait_done(c, "ncclCommInitRank", false);
    if (st) {
        n_destroy(c);
        return st;
    }
    if (rank == 0 && world > 1) unlink(rendezvous); /* every rank has read it */
    *out = c;
    return NULL;
}

teexec_status *tx_comm_nccl_create_threads(int world, const int *devices, int timeout_ms,
                                           teexec_comm **out)
{
    const tx_nccl_api *api;
    TX_TRY(tx_nccl_load(&api));
    int n = tx_comm_gpu_count();
    if (n < world && !devices)
        return tx_error(TEEXEC_ERR_DEVICE, "%d ranks need %d GPUs, %d visible", world, world, n);
    int *dev = malloc(sizeof(int) * (size_t)world);
    ncclComm_t *comms = calloc((size_t)world, sizeof *comms);
    teexec_status *st = dev && comms ? NULL : tx_oom();
    for (int i = 0; i < world && !st; i++) {
        dev[i] = devices ? devices[i] : i;
        st = rank_new(api, world, i, dev[i], timeout_ms, &out[i]);
    }
    if (!st) {
        /* ncclCommInitAll is blocking: it cannot time out, but every rank is
         * in this process, so no peer can be missing */
        ncclResult_t r = api->CommInitAll(comms, world, dev);
        if (r != ncclSuccess)
            st = tx_error(TEEXEC_ERR_DEVICE, "ncclCommInitAll over %d GPUs: %s", world,
                          api->GetErrorString(r));
    }
    for (int i = 0; i < world && out[i]; i++) {
        if (!st) ((nccl_state *)out[i]->state)->comm = comms[i];
    }
    if (st) {
        for (int i = 0; i < world; i++) {
            if (out[i]) n_destroy(out[i]);
            out[i] = NULL;
        }
    }
    free(dev);
    free(comms);
    return st;
}

/* ---- data parallel helpers (comm.h) --------------------------------------- */

static ncclDataType_t grad_type(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_BFLOAT16 ? ncclBfloat16
           : dt == TEEXEC_DTYPE_FLOAT16 ? ncclFloat16
                                         : ncclFloat32;
}

static teexec_status *average_nccl(teexec_comm *c, cudaStream_t stream, size_t n,
                                   void *const *bufs, const uint64_t *numel,
                                   const teexec_dtype *dts, size_t bucket_bytes)
{
    nccl_state *s = c->state;
    TX_TRY(enter(c, "gradient all-reduce"));
    cudaError_t ce = s->ready ? cudaSuccess
                              : cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
    /* the rank's stream waits for the backward on the caller's: no host sync */
    if (ce == cudaSuccess) ce = cudaEventRecord(s->ready, stream);
    if (ce == cudaSuccess) ce = cudaStreamWaitEvent(s->stream, s->ready, 0);
    if (ce != cudaSuccess) return fail(c, "gradient all-reduce", cudaGetErrorString(ce));
    size_t i = 0;
    while (i < n) {
        /* one bucket: consecutive buffers up to bucket_bytes, one NCCL launch */
        size_t bytes = 0;
        ncclResult_t r = s->api->GroupStart();
        for (; i < n && r == ncclSuccess; i++) {
            size_t b = (size_t)numel[i] * (dts[i] == TEEXEC_DTYPE_FLOAT ? 4 : 2);
            if (bytes && bytes + b > bucket_bytes) break;
            bytes += b;
            if (numel[i])
                r = s->api->AllReduce(bufs[i], bufs[i], (size_t)numel[i], grad_type(dts[i]),
                                      ncclAvg, s->comm, s->stream);
        }
        ncclResult_t e = s->api->GroupEnd();
        if (r == ncclSuccess || r == ncclInProgress) r = e;
        TX_TRY(issued(c, "gradient all-reduce", r));
    }
    return NULL;
}

static float bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Host staging for a "threads" group: FLOAT buffers all-reduced as they
 * are, BFLOAT16 ones summed in fp32 by the group; scaled by 1/W. */
static teexec_status *average_host(teexec_comm *c, cudaStream_t stream, size_t n,
                                   void *const *bufs, const uint64_t *numel,
                                   const teexec_dtype *dts)
{
    cudaError_t ce = cudaStreamSynchronize(stream);
    if (ce != cudaSuccess)
        return tx_error(TEEXEC_ERR_DEVICE, "gradient all-reduce: %s", cudaGetErrorString(ce));
    float inv = 1.0f / (float)c->world_size;
    teexec_status *st = NULL;
    for (size_t i = 0; i < n && !st; i++) {
        if (!numel[i]) continue;
        if (dts[i] != TEEXEC_DTYPE_FLOAT && dts[i] != TEEXEC_DTYPE_BFLOAT16) {
            st = tx_error(TEEXEC_ERR_UNSUPPORTED,
                          "data parallel over a \"threads\" group: %s gradients (float or "
                          "bfloat16 only)",
                          teexec_dtype_name(dts[i]));
            break;
        }
        size_t es = dts[i] == TEEXEC_DTYPE_FLOAT ? 4 : 2, m = (size_t)numel[i];
        void *h = malloc(m * es);
        if (!h) return tx_oom();
        /* on the trainer's own stream, waited for: the stream is non-blocking,
         * so a cudaMemcpy (the legacy stream) would not be ordered with it */
        ce = cudaMemcpyAsync(h, bufs[i], m * es, cudaMemcpyDeviceToHost, stream);
        if (ce == cudaSuccess) ce = cudaStreamSynchronize(stream);
        if (ce != cudaSuccess)
            st = tx_error(TEEXEC_ERR_DEVICE, "gradient all-reduce: %s", cudaGetErrorString(ce));
        if (!st) st = teexec_comm_all_reduce_sum(c, dts[i], h, h, m);
        if (!st) {
            if (es == 4)
                for (size_t e = 0; e < m; e++) ((float *)h)[e] *= inv;
            else
                for (size_t e = 0; e < m; e++)
                    ((uint16_t *)h)[e] =
                        float_to_bf16(bf16_to_float(((uint16_t *)h)[e]) * inv);
            /* a cudaMemcpy from pageable memory may return before its DMA
             * lands, and the optimizer's kernels on the non-blocking stream
             * would not wait for it: they read stale gradients when the GPU
             * is busy (seen as a 0.2% loss drift in test_gpu_nccl under
             * load). On the stream, and waited for before h is freed. */
            ce = cudaMemcpyAsync(bufs[i], h, m * es, cudaMemcpyHostToDevice, stream);
            if (ce == cudaSuccess) ce = cudaStreamSynchronize(stream);
            if (ce != cudaSuccess)
                st = tx_error(TEEXEC_ERR_DEVICE, "gradient all-reduce: %s",
                              cudaGetErrorString(ce));
        }
        free(h);
    }
    return st;
}

teexec_status *tx_comm_average_device(teexec_comm *c, void *stream, size_t n, void *const *bufs,
                                      const uint64_t *numel, const teexec_dtype *dtypes,
                                      size_t bucket_bytes)
{
    if (!c || c->world_size == 1) return NULL;
    if (c->device_memory)
        return average_nccl(c, (cudaStream_t)stream, n, bufs, numel, dtypes,
                            bucket_bytes ? bucket_bytes : ((size_t)25 << 20));
    return average_host(c, (cudaStream_t)stream, n, bufs, numel, dtypes);
}

teexec_status *tx_comm_enqueue_all_reduce(teexec_comm *c, teexec_dtype dt, void *buf,
                                          size_t count, void *stream)
{
    if (!c || c->world_size == 1) return NULL;
    if (!c->device_memory)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "a CUDA session's AllReduce needs an \"nccl\" communicator, not \"%s\"",
                        c->vt->name);
    if (dt != TEEXEC_DTYPE_FLOAT && dt != TEEXEC_DTYPE_BFLOAT16 && dt != TEEXEC_DTYPE_FLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "AllReduce over NCCL: dtype %s",
                        teexec_dtype_name(dt));
    nccl_state *s = c->state;
    if (s->failed)
        return tx_error(TEEXEC_ERR_COMM, "rank %d (nccl): AllReduce refused: %s", c->rank,
                        s->reason);
    ncclResult_t r = s->api->AllReduce(buf, buf, count, grad_type(dt), ncclSum, s->comm,
                                       (cudaStream_t)stream);
    if (r != ncclSuccess && r != ncclInProgress)
        return fail(c, "AllReduce", s->api->GetErrorString(r));
    return NULL;
}

teexec_status *tx_comm_use_device(const teexec_comm *c)
{
    if (!c || !c->device_memory) return NULL;
    const nccl_state *s = c->state;
    cudaError_t ce = cudaSetDevice(s->device);
    return ce == cudaSuccess ? NULL
                             : tx_error(TEEXEC_ERR_DEVICE, "rank %d: selecting device %d: %s",
                                        c->rank, s->device, cudaGetErrorString(ce));
}

teexec_status *tx_comm_all_reduce_host(teexec_comm *c, double *vals, size_t n)
{
    if (!c->device_memory) return teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_DOUBLE, vals, vals, n);
    nccl_state *s = c->state;
    TX_TRY(enter(c, "all_reduce_sum"));
    if (s->scratch_n < n) {
        if (s->scratch) cudaFree(s->scratch);
        s->scratch = NULL;
        s->scratch_n = 0;
        cudaError_t ce = cudaMalloc((void **)&s->scratch, n * sizeof(double));
        if (ce != cudaSuccess) return fail(c, "all_reduce_sum", cudaGetErrorString(ce));
        s->scratch_n = n;
    }
    cudaError_t ce = cudaMemcpyAsync(s->scratch, vals, n * sizeof(double), cudaMemcpyHostToDevice,
                                     s->stream);
    if (ce != cudaSuccess) return fail(c, "all_reduce_sum", cudaGetErrorString(ce));
    TX_TRY(n_all_reduce(c, TEEXEC_DTYPE_DOUBLE, s->scratch, s->scratch, n));
    ce = cudaMemcpyAsync(vals, s->scratch, n * sizeof(double), cudaMemcpyDeviceToHost, s->stream);
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(s->stream);
    return ce == cudaSuccess ? NULL : fail(c, "all_reduce_sum", cudaGetErrorString(ce));
}
