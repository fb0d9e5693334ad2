/*
 * act.h - the vectorized kernels of the common activations, forward and
 * backward (the te.ops GELU, ReLU, SiLU, SwiGLU, GEGLU, ReGLU; CPU
 * reference kernels/cpu/te_activation.c, same formulas and constants, FP32
 * math), the fused dact + dbias of a Bias followed by an activation, and
 * the plain bias gradient (column sums of dy). The te.ops nodes reach
 * these through act_ext.h, the one entry point for every activation, which
 * hands them what they cover; the Linear epilogues use them directly.
 *
 * Tensors [rows, cols] row-major, FLOAT / BFLOAT16 / FLOAT16 each. Gated
 * ops read x = [a | b] with 2*cols_out columns and write cols_out.
 * Column sums are deterministic: fixed row chunks summed per column, then
 * the chunks summed in a fixed order (no atomics), into an FP32 workspace of
 * tx_cuda_colsum_workspace_floats(rows, cols) floats. With 16-byte aligned
 * tensors of one dtype and cols a multiple of 8, the kernels move 8
 * elements per access and dact + dbias is one pass over x and dy (dx
 * summed as stored, in the same order as tx_cuda_bias_grad sums it).
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t, NULL = default). Statuses owned by the caller. Stateless.
 */
#ifndef TEEXEC_KERNELS_CUDA_ACT_H
#define TEEXEC_KERNELS_CUDA_ACT_H

#include "teexec/teexec.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tx_cuda_act {
    TX_CUDA_ACT_GELU_TANH = 0,
    TX_CUDA_ACT_GELU_ERF,
    TX_CUDA_ACT_RELU,
    TX_CUDA_ACT_SILU,
    TX_CUDA_ACT_SWIGLU,    /* silu(a) * b */
    TX_CUDA_ACT_GEGLU,     /* gelu_tanh(a) * b */
    TX_CUDA_ACT_REGLU      /* relu(a) * b */
} tx_cuda_act;

/* True for the gated (GLU) kinds. */
int tx_cuda_act_gated(tx_cuda_act act);

typedef struct tx_cuda_act_args {
    tx_cuda_act act;
    size_t rows, cols;       /* cols of the OUTPUT (x has 2*cols when gated) */
    const void *x;  teexec_dtype x_dtype;
    void *y;        teexec_dtype y_dtype;      /* forward */
    const void *dy; teexec_dtype dy_dtype;     /* backward */
    void *dx;       teexec_dtype dx_dtype;     /* backward */
    /* Backward, non-gated only: also the bias grad of the Bias before the
     * activation, = column sums of dx (may be NULL). */
    void *dbias;    teexec_dtype dbias_dtype;
    float *workspace;        /* for dbias */
} tx_cuda_act_args;

teexec_status *tx_cuda_act_forward(const tx_cuda_act_args *a, void *stream);
teexec_status *tx_cuda_act_backward(const tx_cuda_act_args *a, void *stream);

size_t tx_cuda_colsum_workspace_floats(size_t rows, size_t cols);
/* dbias[j] = sum over rows of dy[r, j]. */
teexec_status *tx_cuda_bias_grad(const void *dy, teexec_dtype dy_dtype, size_t rows, size_t cols,
                                 void *dbias, teexec_dtype dbias_dtype, float *workspace,
                                 void *stream);

#ifdef __cplusplus
}
#endif

#endif
