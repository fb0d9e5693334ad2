/*
 * optim.h - optimizers on the CPU: SGD with momentum (PyTorch's torch.optim.SGD:
 * coupled L2 weight decay, dampening, optional Nesterov) and AdamW
 * (torch.optim.AdamW: decoupled weight decay, bias-corrected moments).
 *
 * Each parameter has a tx_optim_slot holding its optimizer state. For
 * float16/bfloat16 parameters the slot keeps an FP32 master copy: the
 * update is applied to the master and the parameter is rounded from it, so
 * updates smaller than the parameter's precision are not lost. Float32 and
 * float64 parameters are updated in place (their moments use their own
 * precision). The update arithmetic is done in double per element and
 * rounded once into each stored tensor.
 *
 * Ownership: a slot owns its tensors; release it with tx_optim_slot_release.
 * Thread-safety: distinct slots/parameters may be stepped concurrently.
 */
#ifndef TEEXEC_KERNELS_CPU_OPTIM_H
#define TEEXEC_KERNELS_CPU_OPTIM_H

#include "base/tensor.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum tx_optim_kind { TX_OPTIM_SGD = 0, TX_OPTIM_ADAMW = 1 } tx_optim_kind;

typedef struct tx_optim_config {
    tx_optim_kind kind;
    double lr;
    double weight_decay; /* SGD: added to the gradient (L2); AdamW: p *= 1 - lr·wd */
    /* SGD */
    double momentum;     /* 0: plain SGD */
    double dampening;
    bool nesterov;
    /* AdamW */
    double beta1, beta2, eps;
    /* Every gradient element is multiplied by this before the update (the
     * trainers' gradient-norm clipping); 1 leaves the arithmetic exactly
     * as without it. */
    double grad_scale;
} tx_optim_config;

/* PyTorch's defaults: SGD momentum 0, AdamW betas (0.9, 0.999), eps 1e-8,
 * weight_decay 0.01; grad_scale 1. */
tx_optim_config tx_optim_default(tx_optim_kind kind, double lr);

/* Checks lr, betas, eps, momentum, dampening, weight decay and grad_scale
 * ranges (grad_scale: finite and >= 0, or NaN: a non-finite clipping
 * norm, which PyTorch lets through too). */
teexec_status *tx_optim_config_check(const tx_optim_config *c) TX_NODISCARD;

typedef struct tx_optim_slot {
    tx_tensor master;  /* float32 copy of a float16/bfloat16 parameter; empty otherwise */
    tx_tensor m;       /* SGD momentum buffer / AdamW first moment */
    tx_tensor v;       /* AdamW second moment */
    int64_t step;      /* steps taken */
} tx_optim_slot;

/* Prepares a slot for `param` (a float tensor) under config c. */
teexec_status *tx_optim_slot_init(tx_optim_slot *s, const tx_optim_config *c,
                                  const tx_tensor *param) TX_NODISCARD;

/* One step: updates param (and the slot) from grad (param's shape, any
 * float dtype). */
teexec_status *tx_optim_step(tx_optim_slot *s, const tx_optim_config *c, tx_tensor *param,
                             const tx_tensor *grad) TX_NODISCARD;

void tx_optim_slot_release(tx_optim_slot *s);

#endif
