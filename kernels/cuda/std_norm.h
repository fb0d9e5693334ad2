/*
 * std_norm.h - the row normalizations of the standard ONNX ops in DOUBLE,
 * which kernels/cuda/norm.h (LayerNorm) and std_ops.h (Softmax) run only
 * in FLOAT / FLOAT16 / BFLOAT16. The CPU's FP64 forms (kernels/cpu/
 * layernorm.c, softmax.c): statistics and sums in FP64, one block per row
 * with a fixed reduction tree (deterministic; equal to the CPU's sequential
 * sums up to FP64 rounding).
 *
 *   - LayerNormalization: x [rows, h], scale and bias [h] (bias may be
 *     NULL), y [rows, h]; mean and inv_std_dev [rows] (each may be NULL),
 *     all DOUBLE;
 *   - RMSNormalization: x [rows, h], scale [h], y = x / sqrt(mean(x^2) + eps)
 *     * scale, all DOUBLE;
 *   - Softmax / LogSoftmax over the middle dim of [outer, len, inner].
 *
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_NORM_H
#define TEEXEC_KERNELS_CUDA_STD_NORM_H

#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

teexec_status *tx_cuda_layernorm_f64(const double *x, const double *scale, const double *bias,
                                     double eps, double *y, double *mean, double *inv_std,
                                     size_t rows, size_t h, void *stream);

teexec_status *tx_cuda_rmsnorm_f64(const double *x, const double *scale, double eps, double *y,
                                   size_t rows, size_t h, void *stream);

teexec_status *tx_cuda_softmax_f64(const double *x, double *y, size_t outer, size_t len,
                                   size_t inner, int log_mode, void *stream);

#ifdef __cplusplus
}
#endif

#endif
