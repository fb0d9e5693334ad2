/*
 * value_plan.h - the values of a plan: for one input signature (a dtype
 * and a shape per fed input), every graph value's inferred dtype and
 * shape, the values known before running -- initializers, the outputs of
 * Constant / Shape / Size and of the small all-constant subgraphs around
 * them, folded on the host with the CPU kernels -- and which nodes are
 * therefore not run.
 *
 * The one place values are typed and folded: the CPU session
 * (exec/session.c, which adds its arena and fuser groups to each such
 * plan) and the CUDA executor (exec/cuda/cuda_executor_build.c) each make a
 * planner over the model they run (its lowered copy, exec/prepare.h) and
 * read its plans; neither goes through the other.
 *
 * A planner is made once per model and executor: the graph inputs' value
 * indices in the caller's input order, the decoded initializers, the CPU
 * kernel of every node (for folding) and the per-node scratch. Making it
 * refuses what no executor runs: a graph input or output that is not a
 * tensor, a sparse or string initializer.
 *
 * Folding rule (a plan, node by node in graph order): a node whose outputs'
 * values inference gives (Shape, Size, Constant, ...) is skipped; one whose
 * every input value is known, whose outputs' shapes are all known and hold
 * at most TX_FOLD_MAX_ELEMENTS elements together, that reads no float
 * initializer and has a CPU kernel is run on the host now and skipped. A
 * float initializer may be a trainable parameter (the CUDA trainer plans
 * through this too), so nothing is folded through one, as import/fold.c. A
 * node the CPU has no kernel for is typed but never folded: the executor
 * that runs it resolves it.
 *
 * Deferred weights (TX_VP_DEFER_WEIGHTS): an executor that reads the big
 * float weights from copies shared between executors (exec/weight_share.h)
 * needs their host bytes only when it is the first to upload them, while
 * decoding them (reading a 500 MB external-data file for GPT-2 124M) is
 * most of what a new input shape costs. With the flag, every float
 * initializer over TX_FOLD_MAX_ELEMENTS elements that is not also a graph
 * input gets only its dtype and shape in init (data NULL; those come from
 * the initializer itself); a plan types it and leaves its value unknown
 * (it is never folded through anyway), and tx_value_planner_load decodes
 * it in place when the executor needs the bytes.
 *
 * Ownership: the planner owns its decoded initializers (init; an executor
 * may release single ones it no longer needs, tx_tensor_release, once no
 * plan it builds later needs them), its kernel table and scratch; it
 * borrows the models it was made from, which must outlive it. A plan owns
 * its arrays and its folded tensors; its known values may point at the
 * planner's initializers, so a plan must be cleared before its planner is
 * destroyed (and read only while the initializers it points at are held).
 * Thread-safety: building a plan uses the planner's scratch: one thread at
 * a time per planner. A built plan is only read.
 */
#ifndef TEEXEC_EXEC_VALUE_PLAN_H
#define TEEXEC_EXEC_VALUE_PLAN_H

#include "base/shape.h"
#include "base/status.h"
#include "base/tensor.h"
#include "exec/backend.h"
#include "exec/model_internal.h"
#include "import/shape_infer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Folding at plan time is for the small integer subgraphs around shapes;
 * bigger constant subgraphs run with the graph rather than doubling the
 * weights' memory. */
#define TX_FOLD_MAX_ELEMENTS 65536u

typedef struct tx_value_planner {
    const teexec_model *model;   /* the model that runs (borrowed): g, Constant attributes */
    const tx_ir_graph *g;        /* model's graph */
    const char *file;            /* the file messages name (borrowed; may be NULL) */
    int32_t *in_vals;            /* graph inputs the caller feeds, in its input order */
    size_t n_in;
    tx_tensor *init;             /* per value: decoded initializer (data NULL otherwise) */
    bool *deferred;              /* per value: a deferred weight (init holds its header) */
    tx_op_fn *fold_fns;          /* per node: its CPU kernel, NULL where the CPU has none */
    /* per-node scratch sized for the widest node, kept off the stack */
    const tx_infer_value **sc_pins;
    const tx_tensor **sc_ins;
    tx_infer_value *sc_outs;
    tx_tensor **sc_fold_outs;
} tx_value_planner;

typedef struct tx_value_plan {
    tx_infer_value *vals;        /* per graph value: dtype, shape, value when known */
    size_t n_vals;
    bool *skip;                  /* per node: its outputs are known before running */
} tx_value_plan;

/* tx_value_planner_create flags */
#define TX_VP_DEFER_WEIGHTS 1u /* decode big float weights only on demand (above) */

/* A planner for `model` (a runnable model: a lowered copy, exec/prepare.h).
 * `inputs_of` names the inputs the caller feeds, in its order (its graph
 * inputs, looked up by name in model's graph; may be `model` itself), and
 * the file that messages name. Both must outlive the planner. `flags`:
 * 0 or TX_VP_DEFER_WEIGHTS. */
teexec_status *tx_value_planner_create(const teexec_model *model, const teexec_model *inputs_of,
                                       unsigned flags, tx_value_planner **out) TX_NODISCARD;

/* Whether value v is a deferred weight whose bytes are not decoded yet. */
bool tx_value_planner_is_deferred(const tx_value_planner *vp, int32_t v);

/* Decodes deferred weight v into vp->init[v] in place (the tensor's
 * address stays, so pointers to it see the data); nothing for any other
 * value. An initializer whose decoded dtype or shape differs from the
 * header is a BAD_MODEL error. */
teexec_status *tx_value_planner_load(tx_value_planner *vp, int32_t v) TX_NODISCARD;
/* Releases the planner and its initializers; accepts NULL. */
void tx_value_planner_destroy(tx_value_planner *vp);

/* The plan for one input signature: dts[i] and shapes[i] for fed input i
 * (vp->in_vals order). *out is filled (cleared on failure); release it
 * with tx_value_plan_clear. Errors name the model's file. */
teexec_status *tx_value_plan_build(tx_value_planner *vp, const teexec_dtype *dts,
                                   const tx_shape *shapes, tx_value_plan *out) TX_NODISCARD;
/* Releases a plan's arrays and folded tensors and zeroes it; accepts NULL
 * and a zeroed plan. */
void tx_value_plan_clear(tx_value_plan *p);

#endif
