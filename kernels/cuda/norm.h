/*
 * norm.h - LayerNorm and RMSNorm on the GPU, forward and backward (the
 * te.ops ops of the same names; CPU reference kernels/cpu/te_norm.c).
 *
 * x, y, dy, dx: [rows, h] row-major in FLOAT, BFLOAT16 or FLOAT16 (each its
 * own dtype); gamma/beta and their grads [h] in FLOAT, BFLOAT16 or FLOAT16;
 * statistics mu and rsigma [rows] FLOAT (what the te.ops forward saves as
 * aux). Math in FP32: row statistics by a per-row block reduction (two
 * passes over the row: mean, then the centred sum of squares, as the CPU
 * does), so results match the CPU's double-accumulated ones within FP32
 * rounding, not bit for bit.
 *
 * Backward: dx = rs * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat)) for
 * LayerNorm (without the mean(g*dy) term for RMSNorm), g = gamma or
 * 1 + gamma (zero_centered_gamma); `dresid` (optional, dx's dtype) is added
 * into dx - the BackwardAddNorm fusion (the grad of a fork's other branch).
 * dgamma = sum over rows of dy*xhat, dbeta = sum of dy: a deterministic
 * two-stage reduction (rows dealt to a fixed number of partial sums that
 * depends only on rows and h, each summed in row order, then the partials
 * summed in a fixed order; no atomics), so repeated runs give identical
 * bits. Where h is a multiple of 8, the row tensors share a dtype and the
 * pointers are 16-byte aligned, the kernels keep a row in registers and
 * move it with 16-byte accesses, and the backward computes dx and the
 * partials in one pass over x and dy.
 *
 * Pointers are device pointers owned by the caller; the workspace (FP32,
 * tx_cuda_norm_bwd_workspace_floats(rows, h) floats) too. Calls are
 * asynchronous on `stream` (cudaStream_t; NULL = default). Returned
 * statuses (TEEXEC_ERR_DEVICE naming the kernel, or INVALID_ARGUMENT) are
 * owned by the caller. Stateless: thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_NORM_H
#define TEEXEC_KERNELS_CUDA_NORM_H

#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_norm_fwd {
    int rms;                 /* 0: LayerNorm, 1: RMSNorm */
    size_t rows, h;
    float eps;
    int zero_centered_gamma;
    const void *x;     teexec_dtype x_dtype;
    const void *gamma; const void *beta; teexec_dtype w_dtype; /* beta: LayerNorm only */
    void *y;           teexec_dtype y_dtype;
    float *mu;               /* LayerNorm, may be NULL (inference) */
    float *rsigma;           /* may be NULL (inference) */
} tx_cuda_norm_fwd;

typedef struct tx_cuda_norm_bwd {
    int rms;
    size_t rows, h;
    int zero_centered_gamma;
    const void *x;     teexec_dtype x_dtype;
    const void *dy;    teexec_dtype dy_dtype;
    const void *gamma; teexec_dtype w_dtype;
    const float *mu;         /* LayerNorm */
    const float *rsigma;
    void *dx;          teexec_dtype dx_dtype;   /* may be NULL */
    const void *dresid;      /* may be NULL; dx_dtype */
    void *dgamma, *dbeta;    /* w_dtype; may be NULL (frozen) */
    float *workspace;        /* tx_cuda_norm_bwd_workspace_floats() floats */
} tx_cuda_norm_bwd;

teexec_status *tx_cuda_norm_forward(const tx_cuda_norm_fwd *a, void *stream);
size_t tx_cuda_norm_bwd_workspace_floats(size_t rows, size_t h);
teexec_status *tx_cuda_norm_backward(const tx_cuda_norm_bwd *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
