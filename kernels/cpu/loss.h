/*
 * loss.h - training losses on the CPU: mean squared error against a target
 * and softmax cross-entropy over logits with integer labels (and an ignore
 * index), each returning the loss value and, optionally, its gradient with
 * respect to the prediction / logits. Semantics follow PyTorch's
 * mse_loss and cross_entropy (reduction "mean" by default).
 *
 * Numbers: inputs may be float32, float16, bfloat16 or float64; sums and the
 * softmax are computed in double; the gradient is rounded once to its
 * tensor's dtype. The caller allocates `grad` with the prediction's shape
 * (any float dtype) or passes NULL for the value only.
 *
 * Errors: TEEXEC_ERR_INVALID_ARGUMENT for mismatched shapes/dtypes or a
 * label outside [0, classes) that is not the ignore index (the message
 * names the position); TEEXEC_ERR_NO_MEMORY. Pure functions, thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_LOSS_H
#define TEEXEC_KERNELS_CPU_LOSS_H

#include "base/tensor.h"

#include <stdint.h>

typedef enum tx_loss_reduction {
    TX_LOSS_MEAN = 0, /* PyTorch's default */
    TX_LOSS_SUM = 1
} tx_loss_reduction;

/* loss = reduce((pred - target)²) over all elements; grad = d loss / d pred. */
teexec_status *tx_loss_mse(const tx_tensor *pred, const tx_tensor *target,
                           tx_loss_reduction reduction, double *loss,
                           tx_tensor *grad) TX_NODISCARD;

/* logits [..., C] (classes on the last dim), labels int64 or int32 with the
 * leading dims of logits. Positions whose label equals ignore_index add
 * nothing and get a zero gradient; MEAN divides by the number of the
 * others. With no such position the MEAN loss is NaN (as PyTorch) and the
 * gradient is zero. *n_counted (may be NULL) receives that number. */
teexec_status *tx_loss_cross_entropy(const tx_tensor *logits, const tx_tensor *labels,
                                     int64_t ignore_index, tx_loss_reduction reduction,
                                     double *loss, tx_tensor *grad,
                                     uint64_t *n_counted) TX_NODISCARD;

#endif
