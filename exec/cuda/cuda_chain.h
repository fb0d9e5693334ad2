/*
 * cuda_chain.h - runs one fuser group (a chain of te.ops basic ops, each
 * [rows, width] -> [rows, width']) on the GPU, forward and backward, in
 * BF16 / FP16 / FP32 or with the fp8-current recipe on the GEMMs - the first
 * piece of the CUDA backend (issue 7): what the MLP block of the benchmark
 * is made of.
 *
 * Ops supported: Linear, Bias, LayerNorm, RMSNorm, GELU (tanh, erf), ReLU,
 * SiLU, SwiGLU, GEGLU, ReGLU, AddExtraInput (its extra from a
 * MakeExtraOutput earlier in the chain, or the chain's input), MakeExtraOutput, Identity,
 * Dropout with p = 0 or in inference. Anything else is refused at creation
 * with TEEXEC_ERR_UNSUPPORTED naming the op.
 *
 * Kernels chosen (the forward and backward layouts are independent):
 *   forward   Linear+Bias as one cuBLASLt GEMM with the BIAS epilogue
 *             (ForwardLinearBiasActivation), with a following tanh-GELU
 *             in the same GEMM (GELU_AUX_BIAS) for recipe none in 16-bit;
 *             other ops their own kernels (kernels/cuda/norm.h, act.h,
 *             elementwise.h).
 *   backward  Bias+activation as one kernel: dact and dbias together
 *             (BackwardActivationBias, deterministic column sums), or, after
 *             a GELU_AUX_BIAS forward, inside the next Linear's dgrad GEMM
 *             (DGELU_BGRAD); a Bias alone by its column-sum kernel; Linear
 *             dgrad and wgrad GEMMs.
 *   fp8-current  each Linear quantizes x and W (rowwise for fprop,
 *             columnwise - the transposed copy Hopper's FP8 GEMM needs - for
 *             dgrad/wgrad) with current scaling, E4M3 (E5M2 grads under
 *             :hybrid), FP8 GEMMs with fast accumulation in fprop only.
 *
 * Memory: every activation, saved tensor, gradient, quantized copy and the
 * GEMM workspace live in one device allocation made at creation; forward
 * and backward make no allocation and no host synchronization, so the
 * caller may capture them in a CUDA graph.
 *
 * Ownership: the chain owns its device memory and copies of the
 * parameters (converted to the compute dtype at creation); ops, attrs and
 * host tensors are read during creation only. Thread-safety: one host
 * thread at a time per chain.
 */
#ifndef TEEXEC_EXEC_CUDA_CUDA_CHAIN_H
#define TEEXEC_EXEC_CUDA_CUDA_CHAIN_H

#include "base/tensor.h"
#include "format/te_schema.h"
#include "planner/plan.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tx_cuda_chain tx_cuda_chain;

typedef struct tx_cuda_chain_op {
    tx_te_op_id op;
    const char *name;                 /* for messages */
    const tx_te_attr_value *attrs;    /* schema order, defaults filled */
    const tx_tensor *const *params;   /* host tensors, schema order */
    int n_params;
    /* AddExtraInput: the MakeExtraOutput op whose extra output it adds, or
     * -1 for the chain's input (a block's residual). */
    int32_t extra_from;
} tx_cuda_chain_op;

typedef struct tx_cuda_chain_config {
    int64_t rows;              /* tokens */
    int64_t in_width;          /* the chain input's last dim */
    teexec_dtype dtype;        /* compute dtype: BFLOAT16, FLOAT16 or FLOAT */
    tx_recipe recipe;          /* NONE or FP8_CURRENT */
    bool training;             /* keep what backward needs; allocate grads */
    bool input_needs_grad;
} tx_cuda_chain_config;

teexec_status *tx_cuda_chain_create(const tx_cuda_chain_op *ops, int32_t n_ops,
                                    const tx_cuda_chain_config *cfg, void *stream,
                                    tx_cuda_chain **out) TX_NODISCARD;
void tx_cuda_chain_destroy(tx_cuda_chain *c);

/* Device buffers the caller fills / reads ([rows, width] in the compute
 * dtype): the input, the output, the output's grad (for backward) and the
 * input's grad (NULL unless input_needs_grad). */
void *tx_cuda_chain_input(tx_cuda_chain *c);
void *tx_cuda_chain_output(tx_cuda_chain *c);
void *tx_cuda_chain_grad_output(tx_cuda_chain *c);
void *tx_cuda_chain_grad_input(tx_cuda_chain *c);
int64_t tx_cuda_chain_out_width(const tx_cuda_chain *c);
/* Device grad of parameter p of op i (compute dtype), NULL when none. */
void *tx_cuda_chain_grad_param(tx_cuda_chain *c, int32_t op, int p);
/* FLOPs of one forward (2*m*n*k summed over the GEMMs). */
double tx_cuda_chain_forward_flops(const tx_cuda_chain *c);
size_t tx_cuda_chain_device_bytes(const tx_cuda_chain *c);

/* Asynchronous on the creation stream. */
teexec_status *tx_cuda_chain_forward(tx_cuda_chain *c) TX_NODISCARD;
teexec_status *tx_cuda_chain_backward(tx_cuda_chain *c) TX_NODISCARD;

#endif
