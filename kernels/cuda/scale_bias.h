/*
 * scale_bias.h - two elementwise kernels of the te.ops basic ops on the
 * GPU: ConstantScale's y = s·x (s rounded to FP32 first, as the CPU's
 * float path does) and Bias's y = x + bias[j] broadcast over the rows of a
 * [rows, cols] view. FLOAT / BFLOAT16 / FLOAT16, each tensor its own dtype;
 * one FP32 operation per element and one rounding at the store, so the
 * results equal the CPU reference's (kernels/cpu/te_misc.c, te_linear.c)
 * bit for bit. `y` may alias `x`.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t, NULL = default). Statuses owned by the caller. Stateless.
 */
#ifndef TEEXEC_KERNELS_CUDA_SCALE_BIAS_H
#define TEEXEC_KERNELS_CUDA_SCALE_BIAS_H

#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

teexec_status *tx_cuda_scale(const void *x, teexec_dtype x_dtype, float s, void *y,
                             teexec_dtype y_dtype, size_t n, void *stream);

teexec_status *tx_cuda_bias_add(const void *x, teexec_dtype x_dtype, const void *bias,
                                teexec_dtype b_dtype, void *y, teexec_dtype y_dtype, size_t rows,
                                size_t cols, void *stream);

#ifdef __cplusplus
}
#endif

#endif
