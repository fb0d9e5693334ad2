/*
 * comm.h - the communicator behind teexec_comm (include/teexec/teexec.h):
 * one rank of a group that runs collectives (all-reduce sum, all-gather,
 * reduce-scatter, barrier) over FLOAT, DOUBLE and BFLOAT16 buffers.
 *
 * Two backends implement the vtable:
 *   - threads (exec/comm_thread.c): world_size ranks in one process, one
 *     thread each, buffers in host memory. Sums go in rank order 0..W-1 on
 *     every rank, so every rank gets the same bits and so does every run.
 *   - NCCL (exec/comm_nccl.c, CUDA builds): libnccl.so.2 loaded at run
 *     time, buffers in device memory of the rank's GPU; one process per GPU
 *     (unique id through a rendezvous file) or one thread per GPU
 *     (ncclCommInitAll).
 *
 * Failure: a collective that waits longer than the group's timeout, or any
 * rank calling tx_comm_abort, fails the group: that call and every later
 * call on any rank return TEEXEC_ERR_COMM with the first failure's reason,
 * so one failed rank makes every rank fail instead of hanging.
 *
 * Ownership: teexec_comm_destroy releases one rank; the thread backend's
 * shared state lives until its last rank is destroyed.
 * Thread-safety: each rank is used by one thread at a time; distinct ranks
 * of a group are meant to be used from distinct threads concurrently.
 */
#ifndef TEEXEC_EXEC_COMM_H
#define TEEXEC_EXEC_COMM_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tx_comm_vtable {
    const char *name; /* "threads", "nccl" */
    teexec_status *(*all_reduce_sum)(teexec_comm *c, teexec_dtype dt, const void *send,
                                     void *recv, size_t count);
    teexec_status *(*all_gather)(teexec_comm *c, teexec_dtype dt, const void *send, void *recv,
                                 size_t count);
    teexec_status *(*reduce_scatter)(teexec_comm *c, teexec_dtype dt, const void *send,
                                     void *recv, size_t count);
    teexec_status *(*barrier)(teexec_comm *c);
    void (*fail_group)(teexec_comm *c, const char *reason);
    void (*destroy)(teexec_comm *c);
} tx_comm_vtable;

struct teexec_comm {
    const tx_comm_vtable *vt;
    int rank, world_size;
    bool device_memory; /* buffers live on the GPU (NCCL) rather than the host */
    void *state;        /* the backend's */
};

/* Bytes of one element of a dtype the collectives take; 0 for others. */
size_t tx_comm_dtype_size(teexec_dtype dt);

/* The communicator the calling thread's current run uses (NULL = none, a
 * world of one). Sessions and trainers bind theirs for the length of a run
 * (tx_comm_bind returns the previous one for tx_comm_bind to restore): the
 * kernel call (exec/backend.h's tx_op_call) is shared by every op and has
 * no context pointer, and a run stays on its caller's thread. */
teexec_comm *tx_comm_current(void);
teexec_comm *tx_comm_bind(teexec_comm *c);

/* NULL when a session (CUDA or not) can use c as its tensor-parallel
 * group; TEEXEC_ERR_UNSUPPORTED saying why not. */
teexec_status *tx_comm_check_session(const teexec_comm *c, bool cuda) TX_NODISCARD;

/* The thread backend, and the NCCL backend (exec/comm_nccl.c, or the stubs
 * of comm_nccl_none.c in a build without CUDA). */
teexec_status *tx_comm_threads_create(int world_size, int timeout_ms,
                                      teexec_comm **out) TX_NODISCARD;
teexec_status *tx_comm_nccl_create(int world_size, int rank, int device, const char *rendezvous,
                                   int timeout_ms, teexec_comm **out) TX_NODISCARD;
teexec_status *tx_comm_nccl_create_threads(int world_size, const int *devices, int timeout_ms,
                                           teexec_comm **out) TX_NODISCARD;
int tx_comm_gpu_count(void);

/* Data parallel on the GPU (exec/train_dp.h): replaces the n device
 * buffers bufs[i] (numel[i] elements of FLOAT, BFLOAT16 or FLOAT16) by
 * their average over the ranks, once the work queued on `stream` (a
 * cudaStream_t) is done. NCCL: ncclAllReduce(ncclAvg) on the rank's
 * stream, made to wait for `stream` by an event, grouped into one NCCL
 * launch per bucket_bytes; threads: copied to the host, all-reduced there,
 * scaled and copied back (two trainers on one GPU, or a test without NCCL).
 * Returns when the averages are in place. */
teexec_status *tx_comm_average_device(teexec_comm *c, void *stream, size_t n, void *const *bufs,
                                      const uint64_t *numel, const teexec_dtype *dtypes,
                                      size_t bucket_bytes) TX_NODISCARD;
/* te.ops AllReduce on the GPU (exec/cuda/te_cuda_basic.c): buf (count
 * elements of FLOAT, BFLOAT16 or FLOAT16 in device memory) summed over c's
 * ranks in place, queued on `stream` (a cudaStream_t) and not waited for:
 * the executor's end-of-run synchronisation waits for it, and a peer that
 * never joins is not caught by the group's timeout there. NULL c or a
 * world of one: nothing. A host group: TEEXEC_ERR_UNSUPPORTED. */
teexec_status *tx_comm_enqueue_all_reduce(teexec_comm *c, teexec_dtype dt, void *buf,
                                          size_t count, void *stream) TX_NODISCARD;
/* An NCCL rank makes its GPU the calling thread's current CUDA device (the
 * CUDA executor plans and runs on the current device); NULL and nothing
 * done for a host group. */
teexec_status *tx_comm_use_device(const teexec_comm *c) TX_NODISCARD;
/* vals[0..n) (host doubles) = their sum over the ranks, for any backend
 * (NCCL through a device scratch buffer of the rank's). */
teexec_status *tx_comm_all_reduce_host(teexec_comm *c, double *vals, size_t n) TX_NODISCARD;

#endif
