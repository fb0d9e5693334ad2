/*
 * dropout.h - the te.ops Dropout on the GPU, training forward and backward,
 * drawing the very mask of the CPU reference (kernels/cpu/te_dropout.c):
 * element i belongs to chunk i / 16, Philox4x32-10 with counter
 * {lo(chunk), hi(chunk), lo(offset), hi(offset)} and key {lo(seed),
 * hi(seed)} gives 16 bytes, byte (i mod 16) < floor(p * 256) drops element
 * i; kept values are multiplied by (float)(1 / (1 - p)) in FP32 and
 * rounded once to the output dtype. The mask is one bit per element, bit
 * (i mod 8) of byte i / 8, 1 = kept, unused high bits of the last byte 0.
 * Inference Dropout is the identity: use the elementwise convert.
 *
 * x / y / dy / dx: FLOAT, BFLOAT16 or FLOAT16, n elements (any shape,
 * contiguous). Device pointers owned by the caller; asynchronous on
 * `stream` (cudaStream_t, NULL = default). Statuses owned by the caller.
 * Stateless, thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_DROPOUT_H
#define TEEXEC_KERNELS_CUDA_DROPOUT_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the mask for n elements: ceil(n / 8). */
size_t tx_cuda_dropout_mask_bytes(size_t n);

/* y = dropout(x); mask (tx_cuda_dropout_mask_bytes(n) bytes) receives the
 * kept bits, or is NULL when the backward will not need it.
 * p in [0, 1). */
teexec_status *tx_cuda_dropout_forward(const void *x, teexec_dtype x_dtype, void *y,
                                       teexec_dtype y_dtype, uint8_t *mask, size_t n, double p,
                                       uint64_t seed, uint64_t offset, void *stream);

/* dx = mask ? dy * (float)(1 / (1 - p)) : 0, from the forward's mask. */
teexec_status *tx_cuda_dropout_backward(const void *dy, teexec_dtype dy_dtype, void *dx,
                                        teexec_dtype dx_dtype, const uint8_t *mask, size_t n,
                                        double p, void *stream);

#ifdef __cplusplus
}
#endif

#endif
