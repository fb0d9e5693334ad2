/*
 * quant_fp8.h - per-tensor FP8 quantization on the GPU (delayed and
 * current scaling, te-ops.md 4.3 / 4.4).
 *
 * q = sat_rn(x * scale) in E4M3FN or E5M2; rowwise data [rows, cols] and
 * columnwise data transposed [cols, rows] (the per-tensor columnwise copy
 * is the transpose with the same scale), written by one kernel in one pass
 * over x. Bit-identical to the CPU quantizer (kernels/cpu/quant_fp8.c).
 *
 * All pointers are device pointers owned by the caller; `stream` is a
 * cudaStream_t (NULL: default stream); calls are asynchronous. No shared
 * state: thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_QUANT_FP8_H
#define TEEXEC_KERNELS_CUDA_QUANT_FP8_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_fp8_args {
    const void *x;          /* [rows, cols], 16-byte aligned */
    teexec_dtype x_dtype;   /* BFLOAT16, FLOAT16 or FLOAT */
    size_t rows, cols;      /* cols % 8 == 0; rows % 16 == 0 if col_data */
    teexec_dtype fmt;       /* FLOAT8E4M3FN or FLOAT8E5M2 */
    float *scale;           /* device: 1 float; read (delayed) or written (current) */
    float *scale_inv;       /* device: 1 float, written 1/scale; may be NULL */
    float *amax;            /* device: 1 float; delayed: max-reduced |x| (may be
                             * NULL); current: overwritten with the tensor amax */
    uint8_t *row_data;      /* [rows, cols] or NULL */
    uint8_t *col_data;      /* [cols, rows] or NULL */
} tx_cuda_fp8_args;

/* Delayed scaling: quantizes with the given *scale and max-reduces the
 * tensor's amax into *amax (which the caller zeroes per step, like TE's
 * amax-history slot). NaN elements do not take part in the amax. */
teexec_status *tx_cuda_fp8_quantize_delayed(const tx_cuda_fp8_args *a, void *stream);

/* Current scaling: *amax = max|x| (NaN ignored), then amax = max(amax,
 * amax_eps); scale = fp8_max / amax (1 for amax 0, Inf or NaN; FLT_MAX if
 * that overflows; mantissa cleared if pow2), *scale_inv = 1/scale; then the
 * cast. Two passes over x (the scale needs the whole tensor's amax). */
teexec_status *tx_cuda_fp8_quantize_current(const tx_cuda_fp8_args *a, float amax_eps, int pow2,
                                            void *stream);

/* Current scaling when *a->amax already holds max|x| (a producer kernel
 * measured it while writing x, kernels/cuda/handoff_fp8.h): the scale and
 * scale_inv from it as tx_cuda_fp8_quantize_current does, then the cast.
 * One pass over x; the same bytes as tx_cuda_fp8_quantize_current. */
teexec_status *tx_cuda_fp8_quantize_from_amax(const tx_cuda_fp8_args *a, float amax_eps, int pow2,
                                              void *stream);

/* *amax = max(*amax, max|x|) over n elements (NaN ignored). */
teexec_status *tx_cuda_amax(const void *x, teexec_dtype x_dtype, size_t n, float *amax,
                            void *stream);

#ifdef __cplusplus
}
#endif

#endif
