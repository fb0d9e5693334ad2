/*
 * fuse_pass.c - the matcher driver the three fusion passes share, and
 * tx_plan_fusions, which runs the passes in TE's order: joint fusions first
 * on the basic-op list, then forward-only and backward-only fusions, each
 * independently over what the joint pass left (reference te-ops.md 3.3).
 *
 * Matching is TE's: for each rule in order, a window slides left to right;
 * where the pattern matches on ops no earlier kernel took, the rule's
 * unsupported_reason decides; applied windows are skipped over (greedy,
 * non-overlapping); a declined one is recorded and, for patterns with an
 * optional tail, retried shorter at the same place.
 */
#include "planner/plan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static teexec_status *push_kernel(tx_plan_kernel **k, int32_t *n, tx_fusion_id f, int32_t first,
                                  int32_t count)
{
    tx_plan_kernel *nk = realloc(*k, (size_t)(*n + 1) * sizeof *nk);
    if (!nk) return tx_oom();
    nk[*n] = (tx_plan_kernel){f, first, count};
    (*n)++;
    *k = nk;
    return NULL;
}

/* Why op `at` runs no backward (it is below first_op_requiring_backward). */
static void no_backward_reason(const tx_ir_graph *g, const tx_plan_request *req,
                               const tx_plan_group *grp, int32_t at, char *why)
{
    const tx_ir_node *n = &g->nodes[grp->nodes[at]];
    const tx_te_op_schema *s = tx_te_schema(grp->ops[at]);
    if (s->n_params > 0 && req->params_frozen)
        snprintf(why, TX_REASON_MAX, "%s %s %s is frozen and %s needs no grad: no backward runs",
                 s->name, n->label, s->params[0].name, s->input.name);
    else if (s->n_params > 0)
        snprintf(why, TX_REASON_MAX, "%s %s: neither %s nor its %s needs a grad: no backward runs",
                 s->name, n->label, s->input.name, s->params[0].name);
    else
        snprintf(why, TX_REASON_MAX, "%s %s has no parameters and %s needs no grad: no backward runs",
                 s->name, n->label, s->input.name);
}

teexec_status *tx_fuse_run_pass(const tx_ir_graph *g, const tx_plan_request *req,
                                tx_fuser_plan *p, int32_t gi, tx_fusion_pass pass,
                                bool *taken, tx_plan_kernel **kernels, int32_t *n_kernels)
{
    const tx_plan_group *grp = &p->groups[gi];
    if (grp->kind != TX_GROUP_CHAIN) return NULL;
    size_t n_rules = 0;
    const tx_fusion_rule *rules = tx_fusion_rules(pass, &n_rules);
    tx_fuse_ctx c = {g, req, grp, taken};
    int32_t fb = grp->first_op_requiring_backward;
    char why[TX_REASON_MAX];
    for (size_t r = 0; r < n_rules; r++) {
        for (int32_t at = 0; at < grp->n_nodes;) {
            int32_t count = taken[at] ? 0 : rules[r].match(&c, at, grp->n_nodes - at);
            bool applied = false;
            while (count > 0) {
                why[0] = '\0';
                bool declined;
                if (pass == TX_PASS_BACKWARD && at < fb) {
                    no_backward_reason(g, req, grp, at, why);
                    declined = true;
                } else if (pass == TX_PASS_JOINT && req->training && at < fb && fb < at + count) {
                    snprintf(why, TX_REASON_MAX, "%s %s needs no backward but %s %s does: the "
                             "joint kernel's backward covers every op it fuses",
                             tx_te_schema(grp->ops[at])->name, g->nodes[grp->nodes[at]].label,
                             tx_te_schema(grp->ops[fb])->name, g->nodes[grp->nodes[fb]].label);
                    declined = true;
                } else {
                    declined = rules[r].unsupported_reason(&c, at, count, why);
                }
                if (!declined) {
                    TX_TRY(push_kernel(kernels, n_kernels, rules[r].id, at, count));
                    for (int32_t k = at; k < at + count; k++) taken[k] = true;
                    applied = true;
                    break;
                }
                /* A shorter form declined for the same reason says nothing new. */
                const tx_plan_decline *last = p->n_declines ? &p->declines[p->n_declines - 1] : NULL;
                if (!(last && last->group == gi && last->first_op == at && last->fusion == rules[r].id
                      && strcmp(last->reason, why) == 0))
                    TX_TRY(tx_plan_add_decline(p, gi, at, rules[r].id, why[0] ? why : "not supported"));
                /* A decline for a reason outside the pattern (no backward)
                 * holds for its shorter forms too. */
                if (pass == TX_PASS_BACKWARD && at < fb) break;
                count = count > 1 ? rules[r].match(&c, at, count - 1) : 0;
            }
            at += applied ? count : 1;
        }
    }
    return NULL;
}

static int cmp_kernel(const void *a, const void *b)
{
    const tx_plan_kernel *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

teexec_status *tx_fuse_complete_layout(int32_t lo, int32_t hi, tx_plan_kernel **kernels,
                                       int32_t *n_kernels)
{
    int32_t span = hi > lo ? hi - lo : 0;
    bool *covered = calloc((size_t)span + 1, sizeof *covered);
    if (!covered) return tx_oom();
    tx_plan_kernel *out = NULL;
    int32_t n_out = 0;
    teexec_status *st = NULL;
    for (int32_t i = 0; i < *n_kernels && !st; i++) {
        const tx_plan_kernel *k = &(*kernels)[i];
        if (k->first < lo || k->first + k->count > hi) continue;
        for (int32_t j = k->first; j < k->first + k->count; j++) covered[j - lo] = true;
        st = push_kernel(&out, &n_out, k->fusion, k->first, k->count);
    }
    for (int32_t j = lo; j < hi && !st; j++)
        if (!covered[j - lo]) st = push_kernel(&out, &n_out, TX_FUSION_NONE, j, 1);
    free(covered);
    if (st) {
        free(out);
        return st;
    }
    if (n_out > 1) qsort(out, (size_t)n_out, sizeof *out, cmp_kernel);
    free(*kernels);
    *kernels = out;
    *n_kernels = n_out;
    return NULL;
}

teexec_status *tx_plan_fusions(const tx_ir_graph *g, const tx_plan_request *req, tx_fuser_plan *p)
{
    TX_TRY(tx_plan_joint_pass(g, req, p));
    TX_TRY(tx_plan_forward_pass(g, req, p));
    TX_TRY(tx_plan_backward_pass(g, req, p));
    return NULL;
}
