/*
 * plan_internal.h - helpers the planner's own files share (not for other
 * layers): the te.ops schema of a node, where its parameters start, which
 * values need a gradient, and the fusion-rule table the three fusion passes
 * walk (entries defined in fuse_catalog.c).
 *
 * Ownership: tx_plan_value_grads returns a malloc'd array the caller frees.
 * Everything else returns static data or borrows from its arguments.
 * Thread-safety: pure functions over their arguments; the rule table is
 * immutable.
 */
#ifndef TEEXEC_PLANNER_PLAN_INTERNAL_H
#define TEEXEC_PLANNER_PLAN_INTERNAL_H

#include "planner/plan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The te.ops schema of node n, NULL for a node of any other domain (or an
 * op_type the registry lacks: groups.c refuses those). */
const tx_te_op_schema *tx_plan_node_schema(const tx_ir_node *n);

/* Index of n's first parameter input: 1 + the schema's extra inputs. */
size_t tx_plan_param_start(const tx_te_op_schema *s);

/* Per value of g: does it carry a gradient in a training step for req
 * (graph inputs as req->input_needs_grad says, float initializers unless
 * params_frozen, node outputs of float type fed by a differentiable input
 * that needs one)? All false when not training. *out is malloc'd (at least
 * one entry). */
teexec_status *tx_plan_value_grads(const tx_ir_graph *g, const tx_plan_request *req,
                                   bool **out) TX_NODISCARD;

/* dtype/shape of value v from the request (NULL when not known). */
const tx_infer_value *tx_plan_val(const tx_plan_request *req, int32_t v);

/* ---- fusion rules ------------------------------------------------------ */

/* What a rule sees: the group, the graph and request, and which ops of the
 * group are still free in the pass (not covered by a kernel yet). */
typedef struct tx_fuse_ctx {
    const tx_ir_graph *g;
    const tx_plan_request *req;
    const tx_plan_group *grp;
    const bool *taken; /* per op of the group: already covered in this pass */
} tx_fuse_ctx;

/* The node of op i of the group. */
static inline const tx_ir_node *tx_fuse_node(const tx_fuse_ctx *c, int32_t i)
{
    return &c->g->nodes[c->grp->nodes[i]];
}

#define TX_REASON_MAX 320

typedef struct tx_fusion_rule {
    tx_fusion_id id;
    /* Number of ops the pattern covers at op `at` using at most `max` ops
     * (0: no match). Called again with a smaller max after a decline, so a
     * pattern with optional members can fall back to a shorter form. Ops
     * already taken never match. */
    int32_t (*match)(const tx_fuse_ctx *c, int32_t at, int32_t max);
    /* false when the fusion applies to ops [at, at + count); otherwise true
     * with one sentence saying why not written into why[TX_REASON_MAX]. */
    bool (*unsupported_reason)(const tx_fuse_ctx *c, int32_t at, int32_t count, char *why);
} tx_fusion_rule;

/* The rules of one pass, in application order (TE's registration order). */
const tx_fusion_rule *tx_fusion_rules(tx_fusion_pass pass, size_t *count);

/* Runs the rules of `pass` over the ops of group gi, rule by rule, each
 * greedily left to right, never overlapping `taken` (updated), appending
 * every applied fusion to *kernels and every decline to p. In the backward
 * pass a match starting below the group's first_op_requiring_backward is
 * declined (no backward runs there); in the joint pass of a training plan,
 * a match that straddles it is declined (the joint backward covers all its
 * ops). */
teexec_status *tx_fuse_run_pass(const tx_ir_graph *g, const tx_plan_request *req,
                                tx_fuser_plan *p, int32_t gi, tx_fusion_pass pass,
                                bool *taken, tx_plan_kernel **kernels, int32_t *n_kernels)
    TX_NODISCARD;

/* The three passes (fuse_joint.c, fuse_forward.c, fuse_backward.c), each
 * over every group of p; tx_plan_fusions (fuse_pass.c) runs them in order. */
teexec_status *tx_plan_joint_pass(const tx_ir_graph *g, const tx_plan_request *req,
                                  tx_fuser_plan *p) TX_NODISCARD;
teexec_status *tx_plan_forward_pass(const tx_ir_graph *g, const tx_plan_request *req,
                                    tx_fuser_plan *p) TX_NODISCARD;
teexec_status *tx_plan_backward_pass(const tx_ir_graph *g, const tx_plan_request *req,
                                     tx_fuser_plan *p) TX_NODISCARD;

/* Builds a layout: the fused kernels given (any order, non-overlapping)
 * plus one unfused kernel for every other op in [lo, hi), sorted by first
 * op. Replaces *kernels (freed) with the result. */
teexec_status *tx_fuse_complete_layout(int32_t lo, int32_t hi, tx_plan_kernel **kernels,
                                       int32_t *n_kernels) TX_NODISCARD;

#endif
