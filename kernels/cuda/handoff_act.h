/*
 * handoff_act.h - activation producer kernels of the FP8 per-tensor
 * quantized hand-off (handoff_fp8.h has the norm's and the Bias's):
 *
 *  - the forward of any non-scaled activation act_ext.h describes (GELU
 *    tanh/erf, QGELU, ReLU, SReLU, SiLU and the gated GLU, GEGLU, QGEGLU,
 *    ReGLU, SReGLU, SwiGLU, ClampedSwiGLU), writing y and, in the same
 *    pass, the hand-off of y for the next Linear's x;
 *  - BackwardActivationBias's dact + dbias (the Bias before a non-gated
 *    activation) writing dx and dbias and, in the same pass, the hand-off
 *    of dx for the grad_output of the Linear before the Bias.
 *
 * Numerics: the formulas of act.cu / act_ext.cu (the CPU's te_activation.c
 * in float), one rounding to the tensor's dtype; dbias sums dx as stored in
 * 64-row chunks and adds the chunks as colsum_parts.cuh does, so y, dx and
 * dbias are the bits the unfused kernels write. The hand-off (amax of the
 * stored values; with a known scale the rowwise FP8 bytes) is as
 * handoff_fp8.h describes.
 *
 * Shapes and dtypes: x, y (dy, dx) of one dtype, FLOAT, BFLOAT16 or FLOAT16;
 * the output's cols a multiple of 8; every buffer 16-byte aligned.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t; NULL = default); statuses owned by the caller. Stateless:
 * thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_HANDOFF_ACT_H
#define TEEXEC_KERNELS_CUDA_HANDOFF_ACT_H

#include "kernels/cuda/act_ext.h"
#include "kernels/cuda/handoff_fp8.h"
#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y = act(x) as tx_cuda_actx_forward with a's fn, gated, clamped, limit,
 * alpha, offset, rows, cols (of y), x, y and their dtypes (scales must be
 * NULL; x_dtype == y_dtype), plus the hand-off of y. */
teexec_status *tx_cuda_handoff_act_forward(const tx_cuda_actx_args *a, const tx_cuda_handoff_q *q,
                                           void *stream);

/* dx = dy * f'(x) for a non-gated fn (x, dy, dx: rows x cols of `dtype`;
 * dx required), dbias = column sums of dx as stored (dbias may be NULL;
 * dbias_dtype FLOAT, BFLOAT16 or FLOAT16) through the FP32 workspace of
 * tx_cuda_handoff_dact_bias_workspace_floats(rows, cols) floats (16-byte
 * aligned), plus the hand-off of dx. */
size_t tx_cuda_handoff_dact_bias_workspace_floats(size_t rows, size_t cols);
teexec_status *tx_cuda_handoff_dact_bias_backward(tx_cuda_actx_fn fn, size_t rows, size_t cols,
                                                  const void *x, const void *dy, void *dx,
                                                  teexec_dtype dtype, void *dbias,
                                                  teexec_dtype dbias_dtype, float *workspace,
                                                  const tx_cuda_handoff_q *q, void *stream);

#ifdef __cplusplus
}
#endif

#endif
