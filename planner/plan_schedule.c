/* plan_schedule.c - forward steps then backward steps of a plan's kernels
 * (see plan_schedule.h). */
#include "planner/plan_schedule.h"

#include <stdlib.h>
#include <string.h>

void tx_plan_schedule_free(tx_plan_schedule *s)
{
    if (!s) return;
    free(s->steps);
    free(s->fwd_step);
    free(s->bwd_step);
    memset(s, 0, sizeof(*s));
}

static teexec_status *bad_plan(const tx_ir_graph *g, int32_t node, const char *what)
{
    const char *label = node >= 0 && (size_t)node < g->n_nodes ? g->nodes[node].label : "?";
    return tx_status_with_node(tx_error(TEEXEC_ERR_INTERNAL, "plan schedule: node \"%s\": %s", label, what),
                               label);
}

/* Kernels a group runs in one direction; a group without a layout runs one
 * kernel over all its ops (from `first`). */
static int32_t n_kernels(const tx_plan_group *grp, bool backward)
{
    if (backward) {
        if (grp->first_op_requiring_backward >= grp->n_nodes) return 0;
        return grp->n_backward > 0 ? grp->n_backward : 1;
    }
    return grp->n_forward > 0 ? grp->n_forward : 1;
}

static tx_plan_kernel kernel_at(const tx_plan_group *grp, bool backward, int32_t k)
{
    tx_plan_kernel kr = {TX_FUSION_NONE, 0, grp->n_nodes};
    if (backward) {
        if (grp->n_backward > 0) return grp->backward[k];
        kr.first = grp->first_op_requiring_backward < 0 ? 0 : grp->first_op_requiring_backward;
        kr.count = grp->n_nodes - kr.first;
        return kr;
    }
    if (grp->n_forward > 0) return grp->forward[k];
    return kr;
}

teexec_status *tx_plan_schedule_build(const tx_ir_graph *g, const tx_fuser_plan *p, bool training,
                                      tx_plan_schedule *out)
{
    memset(out, 0, sizeof(*out));
    size_t total = 0;
    for (size_t gi = 0; gi < p->n_groups; gi++) {
        total += (size_t)n_kernels(&p->groups[gi], false);
        if (training) total += (size_t)n_kernels(&p->groups[gi], true);
    }
    if (total > INT32_MAX || g->n_nodes > INT32_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "plan schedule: too many kernels");
    out->steps = calloc(total ? total : 1, sizeof(*out->steps));
    out->fwd_step = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof(int32_t));
    out->bwd_step = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof(int32_t));
    if (!out->steps || !out->fwd_step || !out->bwd_step) {
        tx_plan_schedule_free(out);
        return tx_oom();
    }
    for (size_t n = 0; n < g->n_nodes; n++) out->fwd_step[n] = out->bwd_step[n] = -1;

    teexec_status *st = NULL;
    int32_t s = 0;
    for (int pass = 0; pass < (training ? 2 : 1) && !st; pass++) {
        bool bwd = pass == 1;
        for (size_t i = 0; i < p->n_groups && !st; i++) {
            size_t gi = bwd ? p->n_groups - 1 - i : i;
            const tx_plan_group *grp = &p->groups[gi];
            int32_t nk = n_kernels(grp, bwd);
            for (int32_t j = 0; j < nk && !st; j++) {
                int32_t k = bwd ? nk - 1 - j : j;
                tx_plan_kernel kr = kernel_at(grp, bwd, k);
                if (kr.first < 0 || kr.count < 1 || kr.first > grp->n_nodes - kr.count) {
                    st = tx_error(TEEXEC_ERR_INTERNAL, "plan schedule: group %zu has a %s kernel over ops "
                                  "%d..%d of %d", gi, bwd ? "backward" : "forward", (int)kr.first,
                                  (int)(kr.first + kr.count - 1), (int)grp->n_nodes);
                    break;
                }
                out->steps[s] = (tx_plan_step){(int32_t)gi, bwd, kr.fusion, kr.first, kr.count};
                for (int32_t o = kr.first; o < kr.first + kr.count; o++) {
                    int32_t node = grp->nodes[o];
                    if (node < 0 || (size_t)node >= g->n_nodes) {
                        st = tx_error(TEEXEC_ERR_INTERNAL, "plan schedule: group %zu names node %d of %zu",
                                      gi, (int)node, g->n_nodes);
                        break;
                    }
                    int32_t *slot = bwd ? &out->bwd_step[node] : &out->fwd_step[node];
                    if (*slot >= 0) {
                        st = bad_plan(g, node, bwd ? "covered by two backward kernels"
                                                   : "covered by two forward kernels");
                        break;
                    }
                    *slot = s;
                }
                s++;
            }
        }
        if (!bwd) out->n_forward = s;
    }
    out->n_steps = s;

    /* Every node runs, and after whatever produces its inputs. */
    for (size_t n = 0; n < g->n_nodes && !st; n++) {
        if (out->fwd_step[n] < 0) {
            st = bad_plan(g, (int32_t)n, "in no group's forward layout");
            break;
        }
        const tx_ir_node *nd = &g->nodes[n];
        for (size_t i = 0; i < nd->n_inputs; i++) {
            int32_t v = nd->inputs[i];
            if (v < 0 || (size_t)v >= g->n_values) continue;
            int32_t pr = g->values[v].producer;
            if (pr < 0 || (size_t)pr >= g->n_nodes) continue;
            if (out->fwd_step[pr] > out->fwd_step[n]) {
                st = bad_plan(g, (int32_t)n, "runs before the node producing one of its inputs");
                break;
            }
        }
    }
    if (st) tx_plan_schedule_free(out);
    return st;
}
