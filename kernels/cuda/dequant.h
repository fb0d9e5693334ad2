/*
 * dequant.h - dequantization on the GPU of one usage (rowwise or
 * columnwise) of a quantized tensor, bit-identical to the CPU's
 * tx_dequantize (kernels/cpu/qtensor.h): the result is always the [rows,
 * cols] matrix in FP32 (columnwise data stored transposed is transposed
 * back). Formulas: FP8 per-tensor q * scale_inv; FP8 block q * block
 * scale_inv; MXFP8 q * 2^(e-127); NVFP4 fl32(fl32(q * S_dec_b) * S_dec)
 * with S_dec from the usage's global amax.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t); no shared state: thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_DEQUANT_H
#define TEEXEC_KERNELS_CUDA_DEQUANT_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tx_cuda_qkind {
    TX_CUDA_Q_FP8_TENSOR = 1, /* same values as kernels/cpu/qtensor.h tx_qkind */
    TX_CUDA_Q_FP8_BLOCK = 2,
    TX_CUDA_Q_MXFP8 = 3,
    TX_CUDA_Q_NVFP4 = 4
} tx_cuda_qkind;

typedef struct tx_cuda_dequant_args {
    tx_cuda_qkind kind;
    teexec_dtype fmt;       /* FLOAT8E4M3FN / FLOAT8E5M2 / FLOAT4E2M1 */
    int columnwise;         /* which usage `data` holds */
    int block_2d;
    int swizzled;           /* MXFP8 / NVFP4 scale layout */
    size_t rows, cols;      /* M, K of the source */
    const uint8_t *data;
    const void *scales;     /* FP8 block: float; MXFP8 / NVFP4: bytes */
    size_t scale_cols;      /* padded compact column count of the scale array */
    const float *scale_inv; /* FP8 per-tensor: device float */
    const float *amax;      /* NVFP4: device float, that usage's global amax */
    float *out;             /* [rows, cols] */
} tx_cuda_dequant_args;

teexec_status *tx_cuda_dequantize(const tx_cuda_dequant_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
