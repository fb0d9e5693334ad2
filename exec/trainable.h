/*
 * trainable.h - which initializers of the model that runs are parameters
 * the trainers update: one rule for the CPU trainer (exec/train.c) and the
 * CUDA one (exec/cuda/cuda_executor_build.c).
 *
 * An exported graph stores its constants as initializers just like its
 * weights: the causal mask, the attention scale, the epsilon of a norm,
 * Gemma's embedding scale. ONNX has no flag that tells them apart, and
 * training a mask or a scale changes the model. A float initializer is a
 * parameter when it reaches the loss through slots that carry a gradient
 * (each trainer checks that) and, here:
 *   - it has more than one element (a scalar is a constant of the formula:
 *     a scale, an epsilon, an exponent);
 *   - every element is finite and below 1e30 in magnitude (additive masks
 *     hold -inf or the dtype's lowest value);
 *   - the caller's freeze list does not name it.
 * Constants that the lowering turned into te.ops attributes or non-grad
 * ports (a RoPE table, a DotProductAttention mask) never reach this test.
 *
 * Ownership: pure functions over borrowed arguments. Thread-safety: safe.
 */
#ifndef TEEXEC_EXEC_TRAINABLE_H
#define TEEXEC_EXEC_TRAINABLE_H

#include "base/tensor.h"
#include "exec/prepare.h"

#include <stdbool.h>

/* Values of this magnitude or more mark a mask, not a weight. */
#define TX_MASK_MAGNITUDE 1e30

/* True when the float initializer `t`, named `name` in the model that
 * runs, may be a parameter. `freeze` (NULL = none) is a comma-separated
 * list of names or shell patterns (fnmatch); it is matched against `name`
 * and against every user initializer that `prep` (may be NULL) maps onto
 * it, so a merged or transposed weight freezes by the user's name too. */
bool tx_trainable_initializer(const tx_tensor *t, const char *name, const tx_prepared *prep,
                              const char *freeze);

/* Logs a warning (tx_log) when the parameter `v` of `g` is the gain or
 * bias of more than one norm: both PyTorch exporters merge initializers of
 * equal value, so the freshly initialized LayerNorms of a model (all gains
 * one, all biases zero) arrive as ONE shared initializer, and training the
 * file ties them -- a different model from the one exported. Returns how
 * many norm nodes read it. */
size_t tx_trainable_note_shared_norm(const tx_ir_graph *g, int32_t v);

/* True when `freeze` names `name` (exactly or by pattern). */
bool tx_freeze_matches(const char *freeze, const char *name);

#endif
