/*
 * quant_mxfp8.h - MXFP8 quantization on the GPU (E8M0 scale per 32).
 *
 * Rowwise (1x32 blocks along the last dim) and columnwise (32x1 blocks
 * along the rows) data are both quantized from the high-precision source in
 * one pass over it; with two_d, one scale per 32x32 block serves both (the
 * two data arrays are then identical). Data arrays are [rows, cols] bytes
 * for both usages (MXFP8 columnwise data is not transposed). Scales are
 * written compact (row-major with the given leading dimension) or in the
 * cuBLAS 128x4-tile swizzled layout; every byte of the scale buffer that
 * holds no scale (padding, gaps, the rest of the buffer) is zeroed, so
 * padding is 0. Numerics: te-ops.md 4.6, bit-identical to the CPU
 * quantizer.
 *
 * All pointers are device pointers owned by the caller; `stream` is a
 * cudaStream_t (NULL: the default stream); the call is asynchronous.
 * Thread-safety: no shared state; concurrent calls on different buffers
 * are fine.
 */
#ifndef TEEXEC_KERNELS_CUDA_QUANT_MXFP8_H
#define TEEXEC_KERNELS_CUDA_QUANT_MXFP8_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_mxfp8_args {
    const void *x;          /* [rows, cols], 16-byte aligned */
    teexec_dtype x_dtype;   /* BFLOAT16 or FLOAT */
    size_t rows, cols;      /* both multiples of 32 */
    teexec_dtype fmt;       /* FLOAT8E4M3FN or FLOAT8E5M2 */
    int two_d;              /* 32x32 blocks */
    int swizzled;           /* scale layout: 0 compact, 1 128x4 swizzled */
    /* rowwise: scales [rows, cols/32] padded to (roundup(rows,128),
     * roundup(cols/32,4)); row_data NULL skips rowwise. */
    uint8_t *row_data;
    uint8_t *row_scales;
    size_t row_scale_ld;    /* compact leading dimension (>= cols/32) */
    size_t row_scale_bytes; /* whole buffer; bytes holding no scale are zeroed */
    /* columnwise: scales [rows/32, cols] padded to (roundup(rows/32,4),
     * roundup(cols,128)); col_data NULL skips columnwise. */
    uint8_t *col_data;
    uint8_t *col_scales;
    size_t col_scale_ld;
    size_t col_scale_bytes;
} tx_cuda_mxfp8_args;

teexec_status *tx_cuda_mxfp8_quantize(const tx_cuda_mxfp8_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
