/*
 * train_internal.h - the CPU training engine's internal interfaces: backward
 * rules for standard ONNX ops (exec/backward_std.c) and the trainer that
 * runs forward keeping every value, a loss, the backward walk and an
 * optimizer step (exec/train.c).
 *
 * Backward rules work in double: the trainer hands each rule its node's
 * forward inputs and outputs (the tensors and, for numeric ones, a double
 * copy), the gradient of each output (double, NULL = zero) and a double
 * buffer per input that needs a gradient (NULL = not needed), into which the
 * rule ADDS its contribution, so fan-out sums without extra passes. Doing
 * the backward math in double makes finite-difference checks in FP64 exact
 * enough and costs little at the sizes the CPU path trains.
 *
 * Ownership: a call borrows everything it points at. Rules allocate only
 * scratch they free before returning.
 * Thread-safety: rules are pure over their call; the table is immutable.
 */
#ifndef TEEXEC_EXEC_TRAIN_INTERNAL_H
#define TEEXEC_EXEC_TRAIN_INTERNAL_H

#include "base/tensor.h"
#include "import/ir.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tx_bwd_call {
    const tx_ir_node *node;
    const tx_onnx_file *file;
    size_t n_in;
    const tx_tensor *const *in;   /* forward inputs; NULL = omitted */
    const double *const *in64;    /* numeric inputs as double; NULL otherwise */
    size_t n_out;
    const tx_tensor *const *out;  /* forward outputs; NULL = omitted */
    const double *const *out64;   /* as double; NULL where not numeric */
    const double *const *gout;    /* d loss / d output; NULL = zero */
    double *const *gin;           /* accumulate d loss / d input; NULL = not wanted */
    /* te.ops nodes only (standard rules ignore these): the aux tensors the
     * training forward wrote (NULL = none kept, recompute) and the Philox
     * offset that forward used (exec/train.c says how it is chosen). */
    const tx_tensor *const *aux;
    int n_aux;
    uint64_t rng_offset;
} tx_bwd_call;

typedef teexec_status *(*tx_bwd_fn)(const tx_bwd_call *c);

/* The Philox counter offset a training step gives te.ops node `node` (its
 * index in the graph, of n_nodes) in step `step` (0 = the trainer's first
 * teexec_trainer_step): Dropout keys Philox with its `seed` attribute and
 * puts this offset in the high half of the counter
 * (kernels/cpu/te_dropout.c), so distinct offsets draw disjoint streams.
 *   offset = mix64(options.seed) + step * n_nodes + node   (mod 2^64)
 * with mix64 splitmix64's finalizer. Within one trainer (step, node) ->
 * offset is one-to-one, so every step and every Dropout node draws its own
 * mask; the same options.seed reproduces the masks exactly, and a
 * different one moves the whole sequence to an unrelated base.
 *
 * Standard ONNX Dropout is not drawn from this: the trainer runs it as the
 * CPU kernel does (exec/cpu_ops_shape.c), the identity unless its
 * training_mode input is true, which is refused as unsupported; its
 * backward rule (exec/backward_std.c) is therefore the identity too. */
uint64_t tx_train_rng_offset(uint64_t seed, uint64_t step, uint64_t n_nodes, uint64_t node);

/* Test query: executors a CUDA trainer planned through its plan cache
 * (planner/plan_cache.h; 1 after creation when the inputs' shapes are
 * declared, else after the first step; 0 for a CPU trainer, which runs its
 * graph node by node and keeps no per-shape plan). */
uint64_t tx_trainer_plans_built(const teexec_trainer *t);

/* The backward rule for a standard-domain op, or NULL when there is none. */
tx_bwd_fn tx_bwd_find(const char *domain, const char *op_type);

/* True when input slot `slot` of op_type can carry a gradient at all
 * (Reshape's shape, Gather's indices, Where's condition cannot). */
bool tx_bwd_slot_differentiable(const char *op_type, size_t slot);
/* The standard ops with a backward rule, entry i in table order (for the
 * per-device op table); NULL past the end. */
const char *tx_bwd_op_at(size_t i);

#endif
