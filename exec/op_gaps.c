/* op_gaps.c - one status for every op a model needs and an executor lacks
 * (op_gaps.h). */
#include "exec/op_gaps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

teexec_status *tx_op_gaps_add(tx_op_gaps *g, const char *what, const char *node)
{
    size_t k = 0;
    while (k < g->n && strcmp(g->v[k].what, what) != 0) k++;
    if (k == g->n) {
        if (g->n == g->cap) {
            size_t cap = g->cap ? 2 * g->cap : 8;
            tx_op_gap *nv = realloc(g->v, cap * sizeof *nv);
            if (!nv) return tx_oom();
            g->v = nv;
            g->cap = cap;
        }
        memset(&g->v[k], 0, sizeof g->v[k]);
        g->v[k].what = strdup(what);
        if (!g->v[k].what) return tx_oom();
        g->n++;
    }
    tx_op_gap *x = &g->v[k];
    if (x->n_nodes < TX_OP_GAP_NODES_SHOWN) x->nodes[x->n_nodes] = node ? node : "?";
    x->n_nodes++;
    return NULL;
}

teexec_status *tx_op_gaps_status(const tx_op_gaps *g, teexec_code code, const char *file)
{
    if (!g || g->n == 0) return NULL;
    size_t cap = 256, len = 0;
    for (size_t k = 0; k < g->n; k++) cap += strlen(g->v[k].what) + 64 + 256 * TX_OP_GAP_NODES_SHOWN;
    char *msg = malloc(cap);
    if (!msg) return tx_oom();
    msg[0] = '\0';
    for (size_t k = 0; k < g->n; k++) {
        const tx_op_gap *x = &g->v[k];
        size_t shown = x->n_nodes < TX_OP_GAP_NODES_SHOWN ? x->n_nodes : TX_OP_GAP_NODES_SHOWN;
        len += (size_t)snprintf(msg + len, cap - len, "%s%s at node%s ", k ? "; " : "", x->what,
                                x->n_nodes == 1 ? "" : "s");
        for (size_t j = 0; j < shown && len < cap; j++)
            len += (size_t)snprintf(msg + len, cap - len, "%s%.250s", j ? ", " : "", x->nodes[j]);
        if (x->n_nodes > shown && len < cap)
            len += (size_t)snprintf(msg + len, cap - len, " and %zu more", x->n_nodes - shown);
        if (len >= cap) break;
    }
    const char *node = g->n == 1 && g->v[0].n_nodes == 1 ? g->v[0].nodes[0] : NULL;
    teexec_status *st = tx_status_new(code, file, node, "%s", msg);
    free(msg);
    return st;
}

void tx_op_gaps_free(tx_op_gaps *g)
{
    if (!g) return;
    for (size_t k = 0; k < g->n; k++) free(g->v[k].what);
    free(g->v);
    memset(g, 0, sizeof *g);
}
