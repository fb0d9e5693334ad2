/*
 * group_exec.h - runs one CHAIN fuser group (planner/plan.h) on the CPU:
 * forward with a given forward layout, backward with a given backward
 * layout (each an array of tx_plan_kernel covering the group's ops), under
 * a recipe, as Transformer Engine's OperationFuser does (te-ops.md 3.5-3.7).
 *
 *  - Unfused kernels (TX_FUSION_NONE) are the ops' own CPU kernels
 *    (kernels/cpu/te_*.c through tx_te_cpu_forward / _backward); fused ones
 *    are exec/cpu_fused.h's.
 *  - Saved contexts: per basic op, the tensors its backward reads, in the
 *    schema's order (tx_te_setup_context), whichever forward kernel ran;
 *    joint fusions keep their private layout instead.
 *  - Quantization (DESIGN.md section 3, exact emulation): a Linear /
 *    GroupedLinear operand that the quantization plan (tx_plan_quant, by
 *    node and operand) marks quantized is quantized with the CPU quantizers
 *    and dequantized to float32 for the GEMM: rowwise x and w for fprop,
 *    rowwise dy with columnwise w for dgrad, columnwise dy with columnwise
 *    x for wgrad. The saved x and w of a quantized Linear are the
 *    columnwise-dequantized tensors. Biases' grads come from the
 *    high-precision dy. Usages: x rowwise (+ columnwise when the weight
 *    needs a grad), w rowwise (+ columnwise when dx is needed), dy rowwise
 *    when dx is needed + columnwise when the weight needs a grad.
 *    GroupedLinear quantizes its whole input (all rows) as one tensor with
 *    its input quantizer and each weight with the weight quantizer.
 *  - Hand-off: FWD_NORM_QUANTIZE / FWD_ACT_QUANTIZE write the next Linear's
 *    input quantized, BWD_ACT_BIAS / BWD_BIAS_QUANTIZE write the previous
 *    Linear's grad_output quantized; the Linear then skips its own
 *    quantize. The bytes are the same by construction (same tensor, same
 *    config), which the contract test checks.
 *  - fp8-delayed: quantizers read the state's scale for their plan slot and
 *    record their amax; tx_group_update_recipe_state rolls the state after the
 *    step. NVFP4 stochastic rounding: seed from the config, plus the node
 *    and operand; sr_offset = the step.
 *
 * Extra tensors: an op's extra input is either external (given in
 * tx_group_op.extra_inputs) or a channel from an earlier op's extra output 0
 * (channel_from). Every extra output is kept in the run and readable; the
 * grad of an extra output is the sum of the caller's (may be NULL) and the
 * channel consumers'.
 *
 * Ownership: a tx_group_run owns every tensor it made (values, saved copies,
 * grads) and borrows the group, the config and the caller's tensors until
 * tx_group_run_free. Not thread-safe: one run per thread.
 */
#ifndef TEEXEC_EXEC_GROUP_EXEC_H
#define TEEXEC_EXEC_GROUP_EXEC_H

#include "base/status.h"
#include "base/tensor.h"
#include "exec/recipe_delayed.h"
#include "planner/plan.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tx_group_op {
    tx_te_op_id op;
    int32_t node;                     /* graph node (the quant plan's key) */
    const char *name;                 /* for messages */
    const tx_te_attr_value *attrs;    /* schema order, defaults filled */
    const tx_tensor *const *params;
    int n_params;
    const tx_tensor *const *extra_inputs; /* schema order; NULL: absent or channel */
    int n_extra_inputs;
    int32_t channel_from[TX_TE_MAX_EXTRA]; /* -1, or the op whose extra output 0 feeds slot s */
    bool params_need_grad;
    /* Random stream of the op's kernel (Dropout) when has_rng_offset, so a
     * caller keeps its own numbering (the trainer's per-node offsets);
     * else step * (n_ops + 1) + op. */
    bool has_rng_offset;
    uint64_t rng_offset;
} tx_group_op;

typedef struct tx_group_desc {
    const tx_group_op *ops;
    int32_t n_ops;
    bool input_needs_grad;
    /* When set, the first op whose backward runs is first_backward (the
     * plan's first_op_requiring_backward, which also counts external extra
     * inputs needing a grad) instead of tx_group_first_op_requiring_backward. */
    bool has_first_backward;
    int32_t first_backward;
} tx_group_desc;

typedef struct tx_group_config {
    tx_recipe recipe;
    const tx_plan_quant *quant;   /* may be NULL: nothing quantized */
    size_t n_quant;
    tx_delayed_state *delayed;    /* fp8-delayed state (quant[i].delayed_slot) */
    uint64_t seed, step;          /* NVFP4 stochastic rounding */
    bool training;
} tx_group_config;

typedef struct tx_group_run tx_group_run;

/* TE's first_op_requiring_backward for the group: 0 when the input needs a
 * grad, else the first op whose parameters need one (n_ops: none). */
int32_t tx_group_first_op_requiring_backward(const tx_group_desc *g);

/* Checks that a layout covers ops [from, n_ops) with consecutive kernels
 * (NONE kernels have count 1). */
teexec_status *tx_group_check_layout(const tx_group_desc *g, const tx_plan_kernel *k, int32_t n,
                                  int32_t from) TX_NODISCARD;

teexec_status *tx_group_forward(const tx_group_desc *g, const tx_group_config *cfg,
                             const tx_plan_kernel *layout, int32_t n_layout,
                             const tx_tensor *input, tx_group_run **out) TX_NODISCARD;

/* dy: grad of the group's output; grad_extra_outputs: per op (n_ops
 * entries) the caller's grad of its extra output 0, or NULL (the array
 * itself may be NULL). */
teexec_status *tx_group_backward(tx_group_run *r, const tx_plan_kernel *layout, int32_t n_layout,
                              const tx_tensor *dy,
                              const tx_tensor *const *grad_extra_outputs) TX_NODISCARD;

/* Results (NULL when not produced). */
const tx_tensor *tx_group_output(const tx_group_run *r);
const tx_tensor *tx_group_extra_output(const tx_group_run *r, int32_t op);
/* The saved context of op `op` (schema order); *n entries. Ops covered by
 * a joint fusion report 0 entries. */
const tx_tensor *const *tx_group_saved(const tx_group_run *r, int32_t op, int *n);
const tx_tensor *tx_group_grad_input(const tx_group_run *r);
const tx_tensor *tx_group_grad_param(const tx_group_run *r, int32_t op, int param);
/* Grad of an external extra input (channels report NULL). */
const tx_tensor *tx_group_grad_extra_input(const tx_group_run *r, int32_t op, int slot);
void tx_group_run_free(tx_group_run *r);

/* fp8-delayed: roll the amax histories and recompute the scales (after a
 * step's forward and backward). No-op for other recipes. */
void tx_group_update_recipe_state(const tx_group_config *cfg);

#endif
