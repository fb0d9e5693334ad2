/*
 * train_schedule.h - what the trainers (CPU, exec/train.c; CUDA,
 * exec/cuda/cuda_executor_run.c) take from teexec_train_options per step:
 * the learning rate of a step (warmup, cosine decay) and the checks of the
 * schedule and clipping options. One definition, so both devices step with
 * the same rates.
 *
 * Pure functions of their arguments: thread-safe, no allocation.
 */
#ifndef TEEXEC_EXEC_TRAIN_SCHEDULE_H
#define TEEXEC_EXEC_TRAIN_SCHEDULE_H

#include "teexec/teexec.h"

#include <stdint.h>

/* The learning rate of the step with index `step` (0 = the trainer's
 * first), by the rule in teexec.h's teexec_train_options. */
double tx_train_lr_at(const teexec_train_options *o, int64_t step);

/* TEEXEC_ERR_INVALID_ARGUMENT naming the option for negative step counts,
 * a min_lr outside [0, lr], a decay that ends inside the warmup, or a
 * negative or non-finite clip_grad_norm. */
teexec_status *tx_train_schedule_check(const teexec_train_options *o);

/* The factor clipping multiplies every gradient by, for a gradient 2-norm
 * `norm`: min(1, max_norm / (norm + 1e-6)) (PyTorch's expression), 1 when
 * max_norm is 0. NaN for a NaN or infinite norm. */
double tx_train_clip_coef(double max_norm, double norm);

#endif
