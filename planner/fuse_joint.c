/*
 * fuse_joint.c - the joint pass: fusions that replace both the forward and
 * the backward of their ops (GroupedMLP, DenseMLP), with a private saved
 * layout, chosen first on each group's basic-op list as TE's
 * register_forward_backward_fusion does. The forward and backward passes
 * then start from what this pass took.
 */
#include "planner/plan_internal.h"

#include <stdlib.h>

teexec_status *tx_plan_joint_pass(const tx_ir_graph *g, const tx_plan_request *req,
                                  tx_fuser_plan *p)
{
    for (size_t gi = 0; gi < p->n_groups; gi++) {
        tx_plan_group *grp = &p->groups[gi];
        if (grp->kind != TX_GROUP_CHAIN) continue;
        bool *taken = calloc((size_t)grp->n_nodes, sizeof *taken);
        if (!taken) return tx_oom();
        teexec_status *st = tx_fuse_run_pass(g, req, p, (int32_t)gi, TX_PASS_JOINT, taken,
                                             &grp->joint, &grp->n_joint);
        free(taken);
        TX_TRY(st);
    }
    return NULL;
}
