/* cuda_executor_trace.c - what a CUDA executor runs, in the fuser plan's terms
 * (tx_cuda_executor_kernels, cuda_executor.h): the debug record that tests compare
 * with the plan's forward and backward layouts, so that `teexec plan
 * --explain` is shown to be what the GPU runs.
 *
 * It reads the executor as prepared (cuda_executor_build.c), walking the nodes
 * the way cuda_executor_run.c does: the forward in node order, a fused kernel
 * at its first node and the others it covers skipped; the backward in
 * reverse node order, a fused kernel at its last node, a Linear carrying
 * the dGELU epilogue in place of itself and the GELU and Bias before it.
 *
 * tx_cuda_executor_memory reports how place_memory set the arena's lifetimes.
 *
 * Ownership: the returned array is the caller's. Thread-safety: reads the
 * executor only; not while it is being created or destroyed. */
#include "exec/cuda/cuda_executor_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct trace {
    tx_run_kernel *k;
    size_t n, cap;
} trace;

static teexec_status *push(trace *t, int32_t group, tx_fusion_id fusion, int32_t first,
                           int32_t count)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        tx_run_kernel *nk = realloc(t->k, cap * sizeof *nk);
        if (!nk) return tx_oom();
        t->k = nk;
        t->cap = cap;
    }
    t->k[t->n++] = (tx_run_kernel){group, {fusion, first, count}};
    return NULL;
}

teexec_status *tx_cuda_executor_kernels(const tx_cuda_executor *g, tx_run_kernel **out, size_t *n,
                                    size_t *n_forward, const tx_fuser_plan **plan)
{
    if (!g || !out || !n || !n_forward)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "kernels: NULL argument");
    *out = NULL;
    *n = *n_forward = 0;
    if (plan) *plan = g->fplan;
    if (!g->fplan) return tx_error(TEEXEC_ERR_INTERNAL, "kernels: the executor has no fuser plan");
    /* each node's CHAIN group and op index in it (-1: none) */
    int32_t *grp = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *grp);
    int32_t *op = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *op);
    trace t = {0};
    teexec_status *st = grp && op ? NULL : tx_oom();
    for (size_t i = 0; !st && i < g->n_nodes; i++) grp[i] = op[i] = -1;
    for (size_t gi = 0; !st && gi < g->fplan->n_groups; gi++) {
        const tx_plan_group *pg = &g->fplan->groups[gi];
        if (pg->kind != TX_GROUP_CHAIN) continue;
        for (int32_t j = 0; j < pg->n_nodes; j++) {
            int32_t nd = pg->nodes[j];
            if (nd < 0 || (size_t)nd >= g->n_nodes) {
                st = tx_error(TEEXEC_ERR_INTERNAL, "kernels: group %zu names node %d", gi, (int)nd);
                break;
            }
            grp[nd] = (int32_t)gi;
            op[nd] = j;
        }
    }
    /* forward */
    for (size_t i = 0; !st && i < g->n_nodes; i++) {
        const cx_node *nd = &g->nodes[i];
        if (grp[i] < 0) continue;
        if (nd->kind == GN_FOLDED) {
            /* known when the executor was made (or unused): computed then,
             * once, as the op's own kernel */
            st = push(&t, grp[i], TX_FUSION_NONE, op[i], 1);
            continue;
        }
        if (nd->kind != GN_TE) continue;
        if (nd->fwd_fused >= 0) {
            const cx_fused *f = &g->fused[nd->fwd_fused];
            st = push(&t, grp[i], f->fusion, op[i], f->n);
        } else if (!nd->fwd_covered) {
            st = push(&t, grp[i], TX_FUSION_NONE, op[i], 1);
        }
    }
    size_t forward = t.n;
    /* backward */
    for (size_t r = g->n_nodes; !st && g->cfg.training && r-- > 0;) {
        const cx_node *nd = &g->nodes[r];
        if (nd->kind != GN_TE || grp[r] < 0 || !nd->needs_bwd) continue;
        if (nd->bwd_fused >= 0) {
            const cx_fused *f = &g->fused[nd->bwd_fused];
            int32_t lead = f->nodes[0];
            st = push(&t, grp[r], f->fusion, op[lead], f->n);
        } else if (nd->dgelu_act >= 0) {
            st = push(&t, grp[r], TX_FUSION_BWD_LINEAR_DGELU_BIAS, op[nd->dgelu_bias], 3);
        } else if (!nd->bwd_covered) {
            st = push(&t, grp[r], TX_FUSION_NONE, op[r], 1);
        }
    }
    free(grp);
    free(op);
    if (st) {
        free(t.k);
        return st;
    }
    *out = t.k;
    *n = t.n;
    *n_forward = forward;
    return NULL;
}

teexec_status *tx_cuda_executor_memory(const tx_cuda_executor *g, tx_cuda_memory_report *out)
{
    if (!g || !out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "memory: NULL argument");
    *out = g->mem;
    out->arena_bytes = g->arena_bytes;
    out->plan_arena_bytes = g->fplan ? g->fplan->memory.arena_bytes : 0;
    out->poisoned = g->poison_dead;
    return NULL;
}
