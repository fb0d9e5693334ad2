/*
 * elementwise.h - small elementwise kernels the CUDA executor needs between
 * the big ones: out = a + b (residual add, AddExtraInput; gradient
 * accumulation at a fork, MakeExtraOutput's backward) and a dtype-converting
 * copy. FLOAT / BFLOAT16 / FLOAT16, each operand its own dtype; math in
 * FP32, one rounding on store. `out` may alias `a` or `b`.
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Stateless; statuses owned by the caller.
 */
#ifndef TEEXEC_KERNELS_CUDA_ELEMENTWISE_H
#define TEEXEC_KERNELS_CUDA_ELEMENTWISE_H

#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

teexec_status *tx_cuda_add(const void *a, teexec_dtype a_dtype, const void *b,
                           teexec_dtype b_dtype, void *out, teexec_dtype out_dtype, size_t n,
                           void *stream);
teexec_status *tx_cuda_convert(const void *x, teexec_dtype x_dtype, void *out,
                               teexec_dtype out_dtype, size_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif
