/*
 * quant_block.h - FP8 block-scaling quantization on the GPU (DeepSeek-style
 * 1x128 / 128x128 blocks with FP32 scales, te-ops.md 4.5).
 *
 * Per block: scale = compute_scale_from_amax(block amax) with value_for_inf
 * = the input dtype's largest finite value, q = sat_rn(x * scale), stored
 * scale_inv = 1/scale. Rowwise data [rows, cols]; columnwise data
 * transposed [cols, rows]. Scale_inv arrays (FP32, row-major):
 *   1-D rowwise    [ceil(cols/128)][roundup(rows,4)]
 *   1-D columnwise [ceil(rows/128)][roundup(cols,4)]
 *   2-D rowwise    [ceil(rows/128)][roundup(ceil(cols/128),4)]
 *   2-D columnwise [ceil(cols/128)][roundup(ceil(rows/128),4)]
 * (the leading dimension is passed; every float of the buffer that holds no
 * scale is zeroed, so padding is 0). Rowwise and columnwise 1-D forms are
 * each quantized from x in the same pass.
 * Bit-identical to kernels/cpu/quant_block.c.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t); no shared state: thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_QUANT_BLOCK_H
#define TEEXEC_KERNELS_CUDA_QUANT_BLOCK_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_block_args {
    const void *x;           /* [rows, cols], 16-byte aligned */
    teexec_dtype x_dtype;    /* BFLOAT16 or FLOAT */
    size_t rows, cols;       /* cols % 8 == 0; rows % 16 == 0 if col_data */
    teexec_dtype fmt;        /* FLOAT8E4M3FN or FLOAT8E5M2 */
    int two_d;               /* 128x128 blocks (else 1x128 / 128x1) */
    float amax_eps;
    int pow2;                /* power-of-two scales */
    uint8_t *row_data;       /* [rows, cols] or NULL */
    float *row_scale_inv;
    size_t row_ld, row_scale_count; /* leading dim; total floats (padding zeroed) */
    uint8_t *col_data;       /* [cols, rows] or NULL */
    float *col_scale_inv;
    size_t col_ld, col_scale_count;
} tx_cuda_block_args;

teexec_status *tx_cuda_block_quantize(const tx_cuda_block_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
