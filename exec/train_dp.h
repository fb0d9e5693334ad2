/*
 * train_dp.h - data parallelism for the CPU trainer (exec/train.c): a
 * trainer given a communicator (teexec_train_options.comm) of world size
 * W > 1 is one of W ranks that train one model on one global batch.
 *
 * Per step:
 *   1. tx_dp_shard: every bound input whose dim 0 equals the label's dim 0
 *      (the global batch B) and the label are cut to this rank's rows
 *      [r*B/W, (r+1)*B/W); B must split evenly. Inputs of another dim 0
 *      (position tables, masks) are replicated. With dp_local_batch the
 *      tensors are already this rank's share and nothing is cut.
 *   2. forward, loss (the mean over the rank's n_r counted elements),
 *      backward, as with one rank.
 *   3. tx_dp_reduce: one 2-element all-reduce gives N = sum n_r and the
 *      global loss sum_r n_r*loss_r / N; each rank scales its gradients by
 *      n_r / N and they are all-reduced (summed, double, rank order) in
 *      buckets of dp_bucket_mb, in reverse parameter order (the order a
 *      backward produces them). The result is the gradient of the global
 *      batch's mean loss on every rank, with the same bits on every rank.
 *      Overlap: none on the CPU -- the backward walk is serial, buckets go
 *      after it; overlapping them with the backward is the GPU goal.
 *   On the CUDA trainer (one launch for forward and backward on the
 *   device) the step hands its gradient buffers to tx_dp_gpu_grads between
 *   the backward and the optimizer (exec/cuda/cuda_executor.h's hook): they
 *   are averaged over the ranks (NCCL's ncclAvg on device buffers, grouped
 *   into one NCCL launch per bucket, the rank's stream waiting for the
 *   backward by an event; or through the host for a "threads" group), and
 *   the reported loss is the ranks' average (tx_dp_average_loss): the
 *   global batch's mean when every rank counts as many elements, as
 *   PyTorch DDP. No overlap with the backward there either yet: the
 *   backward is one launch (a captured CUDA graph), the buckets follow it.
 *   4. optimizer: every rank updates every parameter identically; with
 *      zero1 (ZeRO stage 1) each rank keeps optimizer state only for the
 *      parameters it owns (contiguous ranges of the parameter list of about
 *      total/W bytes each), updates those, and tx_dp_gather_params
 *      all-gathers the updated values (a byte copy: exact).
 *
 * Ownership: a tx_dp is owned by its trainer; the communicator is borrowed.
 * Thread-safety: as the trainer (one thread at a time).
 */
#ifndef TEEXEC_EXEC_TRAIN_DP_H
#define TEEXEC_EXEC_TRAIN_DP_H

#include "base/tensor.h"
#include "exec/comm.h"

typedef struct tx_dp {
    teexec_comm *comm;
    int rank, world;
    bool local_batch, zero1;
    size_t bucket_bytes;
    double *bucket;        /* owned, bucket_bytes (made at the first reduce, capped by
                            * the gradients' total size) */
    tx_tensor label;       /* this step's share of the label (owned) */
    int *owner;            /* zero1: per parameter, the rank that updates it */
    size_t n_params;
    unsigned char *gather; /* zero1 scratch: send block then W blocks */
    size_t block_bytes;    /* zero1: the largest rank's owned bytes, 4-aligned */
} tx_dp;

/* NULL *out for no communicator or a world of one (the identity). */
teexec_status *tx_dp_create(teexec_comm *comm, int local_batch, double bucket_mb, int zero1,
                            tx_dp **out) TX_NODISCARD;
void tx_dp_destroy(tx_dp *dp);

/* Cuts vals[0..n) (the bound inputs, replaced in place) and *label to this
 * rank's rows; *label then points at dp->label. */
teexec_status *tx_dp_shard(tx_dp *dp, tx_tensor *const *vals, size_t n,
                           const tx_tensor **label) TX_NODISCARD;

/* Step 3 above: *loss in (the rank's), out (the global batch's);
 * grads[i] has numel[i] doubles. */
teexec_status *tx_dp_reduce(tx_dp *dp, double n_local, double *loss, double *const *grads,
                            const uint64_t *numel, size_t n) TX_NODISCARD;

/* The CUDA trainer's gradient hook (cuda_executor.h's tx_gpu_grad_hook; ctx =
 * the tx_dp), and its loss: *loss = the ranks' average. */
teexec_status *tx_dp_gpu_grads(void *ctx, void *stream, size_t n, void *const *grads,
                               const uint64_t *numel, const teexec_dtype *dtypes) TX_NODISCARD;
teexec_status *tx_dp_average_loss(tx_dp *dp, double *loss) TX_NODISCARD;

/* zero1: assigns owners to n parameters of the given byte sizes. */
teexec_status *tx_dp_partition(tx_dp *dp, const size_t *bytes, size_t n) TX_NODISCARD;
/* zero1: true when this rank updates parameter i (always true without). */
bool tx_dp_owns(const tx_dp *dp, size_t i);
/* zero1: every rank gets the owners' updated values of params[0..n). */
teexec_status *tx_dp_gather_params(tx_dp *dp, tx_tensor *const *params, size_t n) TX_NODISCARD;

#endif
