/*
 * std_conv.h - ONNX Conv on the GPU as direct summation (no im2col, no
 * GEMM library): X [N, C, D1..Dk], W [M, C/group, K1..Kk], optional B [M],
 * Y [N, M, O1..Ok] with strides, dilations, begin pads (the caller has
 * resolved auto_pad; kernels/cpu/conv.c and import/shape_infer.h's
 * tx_conv_geometry are the CPU's). One thread per output element, FP64
 * accumulation, one rounding; the backward (the CPU trainer's rule: dX by
 * transposed summation, dW and dB by summation over images and positions)
 * likewise, one thread per gradient element: deterministic. Meant for the
 * small convolutions standard-op graphs keep (patch-embedding Convs are
 * lowered to Linears); float dtypes, X, W, B and Y of one dtype.
 *
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_CONV_H
#define TEEXEC_KERNELS_CUDA_STD_CONV_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TX_CUDA_CONV_SPATIAL 6

typedef struct tx_cuda_conv {
    int nsp;
    int64_t n, c, m, group;
    int64_t in[TX_CUDA_CONV_SPATIAL], k[TX_CUDA_CONV_SPATIAL], out[TX_CUDA_CONV_SPATIAL];
    int64_t stride[TX_CUDA_CONV_SPATIAL], dilation[TX_CUDA_CONV_SPATIAL];
    int64_t pad[TX_CUDA_CONV_SPATIAL]; /* begin pads */
} tx_cuda_conv;

teexec_status *tx_cuda_conv_forward(const tx_cuda_conv *p, const void *x, const void *w,
                                    const void *b, void *y, teexec_dtype dt, void *stream);

/* Overwrites gx, gw, gb (each may be NULL); gy of dtype dt. */
teexec_status *tx_cuda_conv_backward(const tx_cuda_conv *p, const void *x, const void *w,
                                     const void *gy, void *gx, void *gw, void *gb,
                                     teexec_dtype dt, void *stream);

#ifdef __cplusplus
}
#endif

#endif
