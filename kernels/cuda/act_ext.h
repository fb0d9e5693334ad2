/*
 * act_ext.h - every te.ops activation on the GPU, forward and backward: the
 * one entry point the te.ops nodes call. The general kernels here cover
 * what act.h does not (QGELU, SReLU, GLU with its sigmoid gate, GEGLU with
 * the erf GELU, QGEGLU, SReGLU, ClampedSwiGLU, SiTU, and the row-scaled
 * ScaledSwiGLU / ScaledSReLU with the grad of their scales); where act.h
 * has a vectorized kernel for the description (GELU tanh or erf, ReLU,
 * SiLU, SwiGLU, GEGLU with tanh, ReGLU; unscaled, no caps) that kernel
 * runs instead, the way a per-arch override replaces a C reference. Both
 * follow the CPU reference's formulas, constants and operation order
 * (kernels/cpu/te_activation.c, float path).
 *
 * Tensors [rows, cols] row-major, FLOAT / BFLOAT16 / FLOAT16 each (its own
 * dtype); gated kinds read x = [a | b] with 2*cols columns (a = gate) and
 * write cols. scales / dscales: [rows]. dscales[r] = sum_j dy*f(a)*b̃ (the
 * un-scaled output) is summed by one block per row in a fixed order: no
 * atomics, same bits run to run.
 *
 * Device pointers owned by the caller; calls are asynchronous on `stream`
 * (cudaStream_t, NULL = default). Returned statuses (INVALID_ARGUMENT, or
 * DEVICE naming the kernel) are owned by the caller. Stateless: thread-safe
 * on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_ACT_EXT_H
#define TEEXEC_KERNELS_CUDA_ACT_EXT_H

#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The scalar function f (of the gate, for gated kinds). */
typedef enum tx_cuda_actx_fn {
    TX_CUDA_ACTX_GELU_TANH = 0,
    TX_CUDA_ACTX_GELU_ERF,
    TX_CUDA_ACTX_QGELU,      /* x·σ(alpha·x), alpha 1.702 (ClampedSwiGLU: its attribute) */
    TX_CUDA_ACTX_RELU,
    TX_CUDA_ACTX_SRELU,
    TX_CUDA_ACTX_SILU,
    TX_CUDA_ACTX_SIGMOID,    /* GLU's gate */
    TX_CUDA_ACTX_SITU,       /* β1·tanh(x/β1)·σ(x) (SiTUGLU's gate; gated, softcap only) */
    TX_CUDA_ACTX_COUNT
} tx_cuda_actx_fn;

typedef struct tx_cuda_actx_args {
    tx_cuda_actx_fn fn;
    int gated;               /* y = f(a)·b̃ */
    int clamped;             /* ClampedSwiGLU (gated, fn QGELU) */
    float limit, alpha, offset; /* clamped only */
    int softcap;             /* SiTU (gated, fn SITU): b̃ = β2·tanh(b/β2) */
    float beta1, beta2;      /* softcap only; both > 0 */
    size_t rows, cols;       /* cols of the OUTPUT */
    const void *x;      teexec_dtype x_dtype;
    const void *scales; teexec_dtype scales_dtype; /* NULL: not scaled */
    void *y;            teexec_dtype y_dtype;      /* forward */
    const void *dy;     teexec_dtype dy_dtype;     /* backward */
    void *dx;           teexec_dtype dx_dtype;     /* backward; may be NULL */
    void *dscales;      teexec_dtype dscales_dtype; /* backward; may be NULL */
    /* backward, plain activations only (not gated, not scaled): also the
     * grad of the Bias before, the column sums of dx as stored (act.h's
     * deterministic order); workspace: tx_cuda_colsum_workspace_floats */
    void *dbias;        teexec_dtype dbias_dtype;   /* may be NULL */
    float *workspace;
} tx_cuda_actx_args;

teexec_status *tx_cuda_actx_forward(const tx_cuda_actx_args *a, void *stream);
teexec_status *tx_cuda_actx_backward(const tx_cuda_actx_args *a, void *stream);

#ifdef __cplusplus
}
#endif

#endif
