/*
 * fuse_forward.c - the forward pass: per group, the forward layout. Ops the
 * joint pass took stay with their joint kernels; forward-only fusions
 * (TE's register_forward_fusion) are matched over the rest; every op left
 * runs its own kernel. Forward-only kernels write exactly the saved
 * context each basic op's unfused backward reads, so this choice never
 * constrains the backward layout.
 */
#include "planner/plan_internal.h"

#include <stdlib.h>
#include <string.h>

teexec_status *tx_plan_forward_pass(const tx_ir_graph *g, const tx_plan_request *req,
                                    tx_fuser_plan *p)
{
    for (size_t gi = 0; gi < p->n_groups; gi++) {
        tx_plan_group *grp = &p->groups[gi];
        int32_t n = grp->n_nodes;
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
        if (!st) st = tx_fuse_run_pass(g, req, p, (int32_t)gi, TX_PASS_FORWARD, taken, &k, &nk);
        if (!st) st = tx_fuse_complete_layout(0, n, &k, &nk);
        free(taken);
        if (st) {
            free(k);
            return st;
        }
        free(grp->forward);
        grp->forward = k;
        grp->n_forward = nk;
    }
    return NULL;
}
