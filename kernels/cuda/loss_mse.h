/*
 * loss_mse.h - the mean-squared-error loss and its gradient on the GPU, as
 * kernels/cpu/loss.h's tx_loss_mse with MEAN reduction: loss = mean((y -
 * t)^2), dy = 2 (y - t) / n. Deterministic: per-block partial sums in
 * double, then one block sums the partials in a fixed order (no atomics).
 *
 * y and dy FLOAT / BFLOAT16 / FLOAT16, the target FLOAT. `partials` holds
 * tx_cuda_mse_partials() doubles; the loss lands in loss_out[0] (device).
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Stateless; statuses owned by the caller.
 */
#ifndef TEEXEC_KERNELS_CUDA_LOSS_MSE_H
#define TEEXEC_KERNELS_CUDA_LOSS_MSE_H

#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

size_t tx_cuda_mse_partials(size_t n);

teexec_status *tx_cuda_mse(const void *y, teexec_dtype y_dtype, const float *target, size_t n,
                           void *dy, teexec_dtype dy_dtype, double *partials, double *loss_out,
                           void *stream);

#ifdef __cplusplus
}
#endif

#endif
