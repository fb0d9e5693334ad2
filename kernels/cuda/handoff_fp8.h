/*
 * handoff_fp8.h - producer kernels of the FP8 per-tensor quantized
 * hand-off (DESIGN.md section 2): a LayerNorm / RMSNorm forward, a plain
 * activation forward, or a Bias backward that also measures what the next
 * (previous, for the grad) Linear's quantizer needs in the same pass over
 * the data, so that the Linear does not read the tensor again for it.
 *
 * Each kernel writes its high-precision output exactly as the unfused op
 * defines it (norm.h / act.h: the same formulas in FP32, one rounding to
 * the output dtype) and, in the same pass, max-reduces |value as stored|
 * into *q->amax (NaN ignored; amaxes are >= 0, reduced with an atomic max
 * on their bits, so the order of blocks does not change the result). With
 * q->scale (fp8-delayed: the scale is known before the pass) it also casts
 * each stored value with it into q->row_data: the bytes the per-tensor
 * quantizer (quant_fp8.h) writes for the same input, bit for bit. The
 * columnwise (transposed) copy and current scaling's cast need the whole
 * tensor or its amax and run after, in quant_fp8.h's cast+transpose kernel.
 *
 * Shapes: cols (h) a multiple of 8 and every buffer 16-byte aligned (the
 * kernels move 16 bytes per load); the quantized tensor (norm output,
 * bias-grad input) is FLOAT, BFLOAT16 or FLOAT16 (the norm: x and y of one
 * dtype, or bfloat16 and float32 either way).
 * The norm kernel keeps a row in registers: h <= TX_HANDOFF_NORM_MAX_H.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t; NULL = default); statuses owned by the caller. Stateless:
 * thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_HANDOFF_FP8_H
#define TEEXEC_KERNELS_CUDA_HANDOFF_FP8_H

#include "kernels/cuda/norm.h"
#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TX_HANDOFF_NORM_MAX_H ((size_t)16384)

typedef struct tx_cuda_handoff_q {
    teexec_dtype fmt;     /* FLOAT8E4M3FN or FLOAT8E5M2 (with scale) */
    float *amax;          /* max-reduced |stored value|; required */
    const float *scale;   /* device scale to cast with, or NULL: amax only */
    uint8_t *row_data;    /* [rows, cols] FP8, written when scale is given */
} tx_cuda_handoff_q;

/* LayerNorm / RMSNorm forward as tx_cuda_norm_forward (mu / rsigma
 * included) plus the hand-off of y. */
teexec_status *tx_cuda_handoff_norm_forward(const tx_cuda_norm_fwd *a, const tx_cuda_handoff_q *q,
                                            void *stream);

/* Bias backward: dbias[j] = sum over rows of dy[r, j] (FP32: 64-row
 * chunks, then the chunks summed in order: deterministic) through the FP32
 * workspace of tx_cuda_handoff_bias_workspace_floats(rows, cols) floats,
 * stored in dbias_dtype (FLOAT, BFLOAT16 or FLOAT16; dbias may be NULL);
 * dx = dy (copied unless dx == dy; may be NULL); and the hand-off of dy. */
size_t tx_cuda_handoff_bias_workspace_floats(size_t rows, size_t cols);
teexec_status *tx_cuda_handoff_bias_backward(const void *dy, teexec_dtype dy_dtype, size_t rows,
                                             size_t cols, void *dx, void *dbias,
                                             teexec_dtype dbias_dtype, float *workspace,
                                             const tx_cuda_handoff_q *q, void *stream);

#ifdef __cplusplus
}
#endif

#endif
