/*
 * xent.h - softmax cross-entropy fused with its gradient on the GPU, the
 * semantics of kernels/cpu/loss.c's tx_loss_cross_entropy (PyTorch's
 * cross_entropy): logits [rows, classes], labels int64 [rows]; a row whose
 * label equals ignore_index adds nothing and gets a zero gradient; MEAN
 * divides the loss and the gradient by the number of counted rows (no
 * counted row: loss NaN, gradient zero).
 *
 * Numbers: the CPU works in double, this kernel in FP32 (max, sum of exp,
 * log) per row, with the rows' losses summed by one block in a fixed
 * order: the loss is deterministic run to run, within FP32 rounding of the
 * CPU's value. dlogits = (softmax - onehot) / count, rounded once into its
 * dtype.
 *
 * Labels outside [0, classes) that are not the ignore index cannot be
 * reported synchronously: such rows are treated as ignored and counted in
 * *n_bad (device int64, may be NULL); the caller checks it after the
 * stream synchronizes and reports the error (the CPU path's message).
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t, NULL = default). Statuses owned by the caller. Stateless:
 * thread-safe (buffers in flight belong to their stream).
 */
#ifndef TEEXEC_KERNELS_CUDA_XENT_H
#define TEEXEC_KERNELS_CUDA_XENT_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_xent_args {
    size_t rows, classes;
    const void *logits;  teexec_dtype logits_dtype;  /* FLOAT, BFLOAT16, FLOAT16 */
    const int64_t *labels;
    int64_t ignore_index;
    int sum_reduction;          /* 0: mean over counted rows (PyTorch's default), 1: sum */
    void *dlogits;       teexec_dtype dlogits_dtype; /* NULL: loss only */
    float *loss;                /* 1 float */
    int64_t *n_counted;         /* 1 int64, may be NULL */
    int64_t *n_bad;             /* 1 int64, may be NULL */
    float *workspace;           /* tx_cuda_xent_workspace_floats(rows) floats */
} tx_cuda_xent_args;

size_t tx_cuda_xent_workspace_floats(size_t rows);

teexec_status *tx_cuda_xent(const tx_cuda_xent_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
