/*
 * quant_nvfp4.h - NVFP4 quantization on the GPU (E2M1 data, E4M3 scale per
 * 16, FP32 global scale; te-ops.md 4.7), bit-identical to
 * kernels/cpu/quant_nvfp4.c: same global-amax rule, same block-scale and
 * multiplier arithmetic, same Philox4x32-10 counter layout for stochastic
 * rounding (element p of the stored matrix uses byte p%16 of the draw for
 * counter {p/16 + sr_offset, stream 0 rowwise / 1 columnwise}, key seed),
 * same Hadamard transform (double sums in order, one rounding to the source
 * dtype) for the columnwise operand.
 *
 * Rowwise data [rows, cols/2] (element 2i in the low nibble), columnwise
 * data transposed [cols, rows/2]. Scales E4M3: rowwise
 * (roundup(rows,128), roundup(cols/16,4)) [m][j], columnwise
 * (roundup(cols,128), roundup(rows/16,4)) [k][i], compact (given leading
 * dim) or 128x4-swizzled; every scale byte that holds no scale is zeroed.
 * The GPU kernel needs cols % 16 == 0, and rows % 16 == 0 where a
 * columnwise or 2-D copy is made (tx_cuda_nvfp4_quantize checks both).
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t); no shared state: thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_QUANT_NVFP4_H
#define TEEXEC_KERNELS_CUDA_QUANT_NVFP4_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_nvfp4_args {
    const void *x;          /* [rows, cols], 16-byte aligned */
    teexec_dtype x_dtype;   /* BFLOAT16 or FLOAT */
    size_t rows, cols;      /* multiples of 32 */
    int two_d;              /* 16x16 tiles; columnwise = transpose of rowwise */
    int rht;                /* Hadamard transform on the columnwise operand */
    int stochastic;         /* stochastic rounding */
    uint64_t seed, sr_offset;
    int swizzled;           /* scale layout: 0 compact, 1 128x4 swizzled */
    int use_given_amax;
    float given_amax_row, given_amax_col;
    uint8_t *row_data;      /* [rows, cols/2] or NULL */
    uint8_t *row_scales;
    size_t row_scale_ld, row_scale_bytes;
    uint8_t *col_data;      /* [cols, rows/2] or NULL */
    uint8_t *col_scales;
    size_t col_scale_ld, col_scale_bytes;
    float *amax;            /* device float[2], written: global amax used for
                             * rowwise [0] and columnwise [1] */
} tx_cuda_nvfp4_args;

teexec_status *tx_cuda_nvfp4_quantize(const tx_cuda_nvfp4_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
