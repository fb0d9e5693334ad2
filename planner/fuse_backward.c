/*
 * fuse_backward.c - the backward pass: per group of a training plan, the
 * backward layout over the ops from first_op_requiring_backward on (listed
 * in forward order, run in reverse). It starts from the joint kernels, as
 * the forward pass does, but never looks at the forward layout: backward-only
 * fusions (TE's register_backward_fusion) read exactly the saved context of
 * the unfused forwards, so any forward layout can precede any backward one.
 * Not training: every group's backward layout is empty.
 */
#include "planner/plan_internal.h"

#include <stdlib.h>
#include <string.h>

teexec_status *tx_plan_backward_pass(const tx_ir_graph *g, const tx_plan_request *req,
                                     tx_fuser_plan *p)
{
    for (size_t gi = 0; gi < p->n_groups; gi++) {
        tx_plan_group *grp = &p->groups[gi];
        free(grp->backward);
        grp->backward = NULL;
        grp->n_backward = 0;
        int32_t lo = grp->first_op_requiring_backward, n = grp->n_nodes;
        if (!req->training || lo >= n) continue;
        bool *taken = calloc((size_t)n, sizeof *taken);
        tx_plan_kernel *k = NULL;
        int32_t nk = 0;
        if (!taken) return tx_oom();
        teexec_status *st = NULL;
        if (grp->n_joint) {
            k = malloc((size_t)grp->n_joint * sizeof *k);
            if (!k) st = tx_oom();
            else {
                memcpy(k, grp->joint, (size_t)grp->n_joint * sizeof *k);
                nk = grp->n_joint;
                for (int32_t j = 0; j < grp->n_joint; j++)
                    for (int32_t o = 0; o < grp->joint[j].count; o++) taken[grp->joint[j].first + o] = true;
            }
        }
        if (!st) st = tx_fuse_run_pass(g, req, p, (int32_t)gi, TX_PASS_BACKWARD, taken, &k, &nk);
        if (!st) st = tx_fuse_complete_layout(lo, n, &k, &nk);
        free(taken);
        if (st) {
            free(k);
            return st;
        }
        grp->backward = k;
        grp->n_backward = nk;
    }
    return NULL;
}
