/*
 * optim.h - AdamW and SGD with momentum on the GPU over a list of tensors
 * in one launch, the arithmetic of kernels/cpu/optim.c (PyTorch's
 * torch.optim.AdamW / SGD) in the same operation order, in double per
 * element, rounded once into each stored FP32 tensor; optim.cu is compiled
 * without FMA contraction (-fmad=false) and the step-dependent constants
 * (bias corrections, pow) are computed on the host as the CPU does, so the
 * results equal the CPU's bit for bit.
 *
 * Each tensor is described by a tx_cuda_optim_tensor: its gradient, its
 * FP32 master weights (updated), its model copy (rounded from the master
 * when it is BFLOAT16/FLOAT16, or the master itself for FLOAT), and its
 * FP32 moments. The caller builds the array once (tx_cuda_optim_layout
 * fills the block map), copies it to device memory and passes that device
 * array to every step; the step's scalars travel by value, so a step is
 * one launch and can be captured in a CUDA graph.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t, NULL = default). Statuses owned by the caller. Stateless:
 * thread-safe (buffers in flight belong to their stream).
 */
#ifndef TEEXEC_KERNELS_CUDA_OPTIM_H
#define TEEXEC_KERNELS_CUDA_OPTIM_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Elements handled by one block; a tensor occupies ceil(n / chunk) blocks. */
#define TX_CUDA_OPTIM_CHUNK 4096u

/* The blocks a tensor of n elements occupies (what tx_cuda_optim_layout
 * counts; callers sizing buffers by the block count use the same). */
static inline uint64_t tx_cuda_optim_blocks(uint64_t n)
{
    return n / TX_CUDA_OPTIM_CHUNK + (n % TX_CUDA_OPTIM_CHUNK != 0);
}

/* Same layout on host and device (plain data). */
typedef struct tx_cuda_optim_tensor {
    float *master;          /* FP32 weights, updated in place */
    void *model;            /* BFLOAT16/FLOAT16 copy rounded from master, or NULL */
    const void *grad;       /* FLOAT, BFLOAT16 or FLOAT16 */
    float *m;               /* SGD momentum buffer / AdamW first moment (NULL: SGD, momentum 0) */
    float *v;               /* AdamW second moment */
    uint64_t n;             /* elements */
    uint64_t first_block;   /* filled by tx_cuda_optim_layout */
    int32_t model_dtype;    /* teexec_dtype of model */
    int32_t grad_dtype;     /* teexec_dtype of grad */
} tx_cuda_optim_tensor;

typedef enum tx_cuda_optim_kind { TX_CUDA_OPTIM_SGD = 0, TX_CUDA_OPTIM_ADAMW = 1 } tx_cuda_optim_kind;

typedef struct tx_cuda_optim_step_args {
    tx_cuda_optim_kind kind;
    double lr, weight_decay;
    double momentum, dampening;  /* SGD */
    int nesterov;
    double beta1, beta2, eps;    /* AdamW */
    int64_t step;                /* 1 for the first step (as the CPU slot's count after ++) */
    /* Device pointer: every gradient element is multiplied by *grad_scale
     * (in double, as the CPU's tx_optim_config.grad_scale) before the
     * update; NULL = 1, the arithmetic exactly as without it. */
    const double *grad_scale;
} tx_cuda_optim_step_args;

/* Fills first_block of each entry (host array) and *total_blocks; checks
 * dtypes, required pointers and that the block count fits a launch. */
teexec_status *tx_cuda_optim_layout(tx_cuda_optim_tensor *tensors, size_t n_tensors,
                                    uint64_t *total_blocks);

/* One step over n_tensors entries of dev_tensors (a device copy of the
 * array tx_cuda_optim_layout filled); total_blocks as it returned. The
 * step's settings are checked like tx_optim_config_check. */
teexec_status *tx_cuda_optim_step(const tx_cuda_optim_step_args *args,
                                  const tx_cuda_optim_tensor *dev_tensors, size_t n_tensors,
                                  uint64_t total_blocks, void *stream);

/* Doubles of scratch tx_cuda_grad_clip_coef needs for total_blocks blocks. */
uint64_t tx_cuda_grad_clip_partials(uint64_t total_blocks);

/* Gradient-norm clipping's factor over every gradient of the array (the
 * layout tx_cuda_optim_layout made): dev_coef[0] = min(1, max_norm / (N +
 * 1e-6)) and dev_coef[1] = N, N the 2-norm of all gradient elements summed
 * in double (per block, then the blocks in order: the same bits every run);
 * NaN for a non-finite N. dev_partials holds tx_cuda_grad_clip_partials
 * doubles. max_norm > 0 and finite. Pass dev_coef as the step's grad_scale. */
teexec_status *tx_cuda_grad_clip_coef(const tx_cuda_optim_tensor *dev_tensors, size_t n_tensors,
                                      uint64_t total_blocks, double max_norm,
                                      double *dev_partials, double *dev_coef, void *stream);

#ifdef __cplusplus
}
#endif

#endif
