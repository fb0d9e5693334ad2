/*
 * plan_schedule.h - the order in which a plan's kernels run: every group's
 * forward kernels, groups in plan order; then, when training, the backward
 * kernels, groups in reverse order and each group's backward layout run
 * back to front. One kernel is one schedule step. The memory plan sizes
 * lifetimes in these steps and the quantization plan looks up which kernel
 * writes an operand (hand-off) through the per-node step tables.
 *
 * A group without forward kernels (a standard op the fusion pass did not
 * visit) counts as one kernel over all its nodes; likewise its backward
 * when first_op_requiring_backward says it needs one.
 *
 * Ownership: tx_plan_schedule_build fills *out with malloc'd arrays, freed by
 * tx_plan_schedule_free. Thread-safety: pure over its arguments.
 */
#ifndef TEEXEC_PLANNER_PLAN_SCHEDULE_H
#define TEEXEC_PLANNER_PLAN_SCHEDULE_H

#include "planner/plan.h"

typedef struct tx_plan_step {
    int32_t group;
    bool backward;
    tx_fusion_id fusion;
    int32_t first, count; /* ops of the group it covers */
} tx_plan_step;

typedef struct tx_plan_schedule {
    tx_plan_step *steps;
    int32_t n_steps;
    int32_t n_forward; /* steps 0..n_forward-1 are forward */
    int32_t *fwd_step; /* per graph node: the forward step running it */
    int32_t *bwd_step; /* per graph node: its backward step, -1 when none runs */
} tx_plan_schedule;

/* Builds the schedule of p's groups over g (backward steps only when
 * `training`). Checks that the groups cover every node exactly once, that
 * kernels stay inside their group and that no node runs before the nodes
 * producing its inputs (TEEXEC_ERR_INTERNAL naming the node otherwise). */
teexec_status *tx_plan_schedule_build(const tx_ir_graph *g, const tx_fuser_plan *p, bool training,
                                      tx_plan_schedule *out) TX_NODISCARD;
void tx_plan_schedule_free(tx_plan_schedule *s);

#endif
