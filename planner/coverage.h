/*
 * coverage.h - how much of a planned model runs inside te.ops groups: the
 * share of its forward FLOPs and of its nodes (`teexec plan` prints it,
 * `--json` records it as "coverage"), and every standard op left, by type.
 *
 * FLOPs of one forward run, from the plan request's value shapes:
 *   Linear, GroupedLinear, MatMul, Gemm   2 x (output elements) x K
 *   DotProductAttention, ONNX Attention   4 x (query elements) x s_kv
 *                                         (QKᵀ and P·V; a causal mask is not
 *                                         discounted)
 *   Conv                                  2 x (output elements) x C_in/groups x kernel
 *   data movement (Reshape, Transpose, Concat, Gather, Cast, Expand, ...)  0
 *   everything else                       1 per element of output 0
 * A node whose shapes are unknown counts 0 and is listed in `unknown`.
 *
 * Ownership: tx_plan_coverage owns its `left` rows and their strings
 * (tx_plan_coverage_free). Thread-safety: pure over its arguments.
 */
#ifndef TEEXEC_PLANNER_COVERAGE_H
#define TEEXEC_PLANNER_COVERAGE_H

#include "planner/plan.h"

typedef struct tx_coverage_row {
    char *op;          /* "Softmax", or "ai.onnx.ml:Foo" for other domains */
    size_t count;      /* nodes of that op left as standard groups */
    double flops;
    int32_t first_node;/* graph index of the first of them */
    bool data_movement;/* an op with no arithmetic (counted 0 FLOPs) */
} tx_coverage_row;

typedef struct tx_plan_coverage {
    double flops_total, flops_te;
    size_t nodes_total, nodes_te;
    size_t unknown;    /* nodes whose FLOPs could not be counted */
    tx_coverage_row *left; size_t n_left; /* standard ops, most FLOPs first */
} tx_plan_coverage;

teexec_status *tx_plan_coverage_compute(const tx_fuser_plan *p, const tx_ir_graph *g,
                                        const tx_infer_value *vals, size_t n_vals,
                                        tx_plan_coverage *out) TX_NODISCARD;
void tx_plan_coverage_free(tx_plan_coverage *c);

/* FLOPs of one node (the rules above); false when its shapes are unknown. */
bool tx_node_flops(const tx_ir_node *n, const tx_infer_value *vals, size_t n_vals, double *out);

/* True for ops that only move or reinterpret data. */
bool tx_op_is_data_movement(const char *domain, const char *op_type);

#endif
