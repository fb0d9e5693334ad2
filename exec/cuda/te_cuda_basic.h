/*
 * te_cuda_basic.h - what the CUDA basic ops (te_cuda_basic.c) share with
 * their fused kernels (te_cuda_basic_fused.c): the activation backward
 * (with the Bias grad folded in), the row view of a tensor and the
 * scratch-region arithmetic. Internal to exec/cuda/te_cuda_basic*.c; the
 * public face of these ops is tx_cuda_te_basic_impl (te_cuda.h).
 *
 * Tensors are device tensors as in te_cuda.h. Statuses returned are owned
 * by the caller. Stateless: thread-safe on distinct buffers.
 */
#ifndef TEEXEC_EXEC_CUDA_TE_CUDA_BASIC_H
#define TEEXEC_EXEC_CUDA_TE_CUDA_BASIC_H

#include "base/status.h"
#include "base/tensor.h"
#include "format/te_schema.h"
#include "kernels/cpu/te_args.h"
#include "kernels/cuda/act_ext.h"
#include "kernels/cuda/norm.h"

#include <stdbool.h>
#include <stddef.h>

/* Scratch sub-regions start on this boundary. */
#define TX_CUDA_BASIC_ALIGN ((size_t)256)

/* rows = product of all dims but the last `inner_rank`, cols = the rest
 * (rank 0: one row of one column). */
void tx_cuda_basic_rows(const tx_tensor *t, int inner_rank, size_t *rows, size_t *cols);

/* *total += bytes rounded up to TX_CUDA_BASIC_ALIGN; false on overflow. */
bool tx_cuda_basic_add_region(size_t *total, size_t bytes);

/* True for the non-gated, unscaled activations that BackwardActivationBias
 * covers (GELU, QGELU, ReLU, SReLU, SiLU). */
bool tx_cuda_basic_act_plain(tx_te_op_id op);

/* True for the activations with a per-row scales input (ScaledSwiGLU,
 * ScaledSReLU). */
bool tx_cuda_basic_act_scaled(tx_te_op_id op);

/* The act_ext.h description (function, gated, ClampedSwiGLU's clamp) of
 * activation `op` with its decoded attributes (NULL: defaults), shape and
 * tensor fields left 0, into *out (may be NULL). False for an op that is
 * no activation, and for ClampedSwiGLU without attributes. The hand-off
 * kernels (te_cuda_handoff.c) use it too, so both compute the same f. */
bool tx_cuda_basic_actx_of(tx_te_op_id op, const tx_te_attr_value *attrs, tx_cuda_actx_args *out);

/* The norm_fwd.h arguments of a LayerNorm / RMSNorm forward: x, gamma
 * (beta), y = a->output, and in training the saved statistics (checked:
 * float32, one per row). The hand-off kernels fill the same struct. */
teexec_status *tx_cuda_basic_norm_fwd_args(const tx_te_fwd_args *a, const char *label,
                                           tx_cuda_norm_fwd *out) TX_NODISCARD;

/* The backward of activation `op` (any of GELU .. ScaledSReLU): dx (NULL:
 * not wanted) from dy and the saved x (and for the scaled ops the saved
 * scales, dscales NULL: not wanted). With `dbias` (plain activations only)
 * also dbias = column sums of dx as stored (the unfused Bias backward's
 * input), using `colsum_ws` (tx_cuda_colsum_workspace_floats floats);
 * dbias needs dx. Asynchronous on stream. */
teexec_status *tx_cuda_basic_act_backward(tx_te_op_id op, const tx_te_attr_value *attrs,
                                          const tx_tensor *x, const tx_tensor *scales,
                                          const tx_tensor *dy, tx_tensor *dx, tx_tensor *dscales,
                                          tx_tensor *dbias, float *colsum_ws,
                                          void *stream) TX_NODISCARD;

/* The norm backward of a prepared LayerNorm / RMSNorm node (`priv` from
 * its prepare), writing dx (NULL: not wanted) = the norm's dx + dresid
 * (NULL: nothing added; dx's dtype and size) in one pass, and the
 * parameter grads of a->grad_params: the BackwardAddNorm kernel. scratch:
 * the node's scratch. Asynchronous on stream. */
teexec_status *tx_cuda_basic_norm_backward_add(void *priv, const tx_te_bwd_args *a, tx_tensor *dx,
                                               const tx_tensor *dresid, void *scratch,
                                               void *stream) TX_NODISCARD;

#endif
