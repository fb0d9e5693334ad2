/*
 * handoff_block.h - producer kernels of the fp8-block quantized hand-off
 * (DESIGN.md section 2, te-ops.md 4.5): a LayerNorm / RMSNorm forward, a
 * plain activation forward, or a Bias backward that writes its
 * high-precision output and, from the values as stored, the next
 * (previous, for the grad) Linear's 1x128 / 128x1 block-scaled FP8
 * operand: the bytes and FP32 scale_inv arrays kernels/cuda/quant_block.h
 * writes for that output, bit for bit, in the layout its args describe.
 *
 * `q` is a tx_cuda_block_args naming only the destination: fmt, amax_eps,
 * pow2, row_* and col_* (either usage may be absent); its x, x_dtype,
 * rows, cols are ignored (the producer's output is the source) and two_d
 * must be 0 (128x128 tiles are a weight format). The scale arrays' padding
 * entries are written as zeros, as the quantizer's memset leaves them.
 *
 * Why these passes: a 1x128 block lies inside one row, so the rowwise
 * bytes and scales need no global amax and are written in the producer's
 * own pass. The columnwise copy (128 rows of one column per scale) is the
 * transpose: the activation and Bias kernels own 128x128 tiles, stage the
 * stored values in shared memory and write it from there (one pass over
 * the data); the norm keeps whole rows in registers, so its columnwise
 * copy is a second pass (quant_block.h's, over y). TX_HANDOFF_BLOCK_SPLIT
 * makes the activation work like the norm (for measuring the choice).
 *
 * Value formulas: the norm as handoff_fp8.h's (norm.cu's math, FP32, one
 * rounding), the activations as act.h's, the Bias's dbias as
 * tx_cuda_bias_grad's (64-row chunks summed in row order, then
 * colsum_parts.cuh's fixed order: the same bits), dx = dy.
 *
 * Shapes: cols a multiple of 8, rows a multiple of 16 with a columnwise
 * copy; every tensor 16-byte aligned; the quantized tensor (norm / act
 * output, dy) FLOAT or BFLOAT16; the norm keeps a row in registers:
 * h <= TX_HANDOFF_BLOCK_NORM_MAX_H.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t; NULL = default); statuses owned by the caller. Stateless:
 * thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_HANDOFF_BLOCK_H
#define TEEXEC_KERNELS_CUDA_HANDOFF_BLOCK_H

#include "kernels/cuda/act.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/quant_block.h"
#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TX_HANDOFF_BLOCK_NORM_MAX_H ((size_t)16384)

typedef enum tx_handoff_block_mode {
    TX_HANDOFF_BLOCK_TILED = 0, /* one pass: tiles, columnwise from shared memory */
    TX_HANDOFF_BLOCK_SPLIT = 1  /* the op + rowwise, then the columnwise pass */
} tx_handoff_block_mode;

/* LayerNorm / RMSNorm forward as tx_cuda_norm_fwd (mu / rsigma included)
 * plus the hand-off of y. */
teexec_status *tx_cuda_handoff_block_norm_forward(const tx_cuda_norm_fwd *a,
                                                  const tx_cuda_block_args *q, void *stream);

/* y = act(x) (GELU_TANH, GELU_ERF, RELU or SILU; x, y FLOAT or BFLOAT16)
 * viewed as rows x cols, plus the hand-off of y. */
teexec_status *tx_cuda_handoff_block_act_forward(tx_cuda_act act, size_t rows, size_t cols,
                                                 const void *x, teexec_dtype x_dtype, void *y,
                                                 teexec_dtype y_dtype,
                                                 const tx_cuda_block_args *q,
                                                 tx_handoff_block_mode mode, void *stream);

/* Bias backward: dbias (dbias_dtype FLOAT, BFLOAT16 or FLOAT16; may be
 * NULL) through the FP32 workspace of
 * tx_cuda_handoff_block_bias_workspace_floats(rows, cols) floats; dx = dy
 * (copied unless dx == dy; may be NULL); the hand-off of dy. */
size_t tx_cuda_handoff_block_bias_workspace_floats(size_t rows, size_t cols);
teexec_status *tx_cuda_handoff_block_bias_backward(const void *dy, teexec_dtype dy_dtype,
                                                   size_t rows, size_t cols, void *dx,
                                                   void *dbias, teexec_dtype dbias_dtype,
                                                   float *workspace,
                                                   const tx_cuda_block_args *q, void *stream);

#ifdef __cplusplus
}
#endif

#endif
