/*
 * dequant.h - dequantization on the GPU of one usage (rowwise or
 * columnwise) of a quantized tensor, bit-identical to the CPU's
 * tx_dequantize (kernels/cpu/qtensor.h): the result is always the [rows,
 * cols] matrix in FP32 (columnwise data stored transposed is transposed
 * back). Formulas: FP8 per-tensor q * scale_inv; FP8 block q * block
 * scale_inv; MXFP8 q * 2^(e-127); NVFP4 fl32(fl32(q * S_dec_b) * S_dec)
 * with S_dec from the usage's global amax. tx_cuda_dequantize_to writes
 * the same values as BF16 or FP32, as is or transposed, for the emulated
 * GEMMs.
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

/* The same values in the layout a GEMM operand wants: the [rows, cols]
 * matrix, or with `transposed` its transpose [cols, rows], in out_dtype
 * BFLOAT16 (each value rounded to nearest even from the FP32 value above:
 * exact for MXFP8 / NVFP4 / power-of-two FP8 block data, see
 * gemm_emulate.h) or FLOAT (bit-identical to tx_cuda_dequantize). One pass
 * over the stored bytes, no FP32 staging: where the stored orientation
 * (columnwise FP8 / FP8 block / NVFP4 data is stored transposed, MXFP8's
 * is not) differs from the wanted one, 64x64 tiles go through shared
 * memory. a->out is ignored; `out` has rows * cols elements, 16-byte
 * aligned. */
teexec_status *tx_cuda_dequantize_to(const tx_cuda_dequant_args *a, int transposed,
                                     teexec_dtype out_dtype, void *out, void *stream);

#ifdef __cplusplus
}
#endif

#endif
