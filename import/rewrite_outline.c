/* rewrite_outline.c - tx_rw_outline: a set of nodes moved into a new
 * model-local function, with one call left in their place. */
#include "import/rewrite_internal.h"

#include <stdlib.h>
#include <string.h>

static teexec_status *node_copy(const tx_rw_node *src, tx_rw_node *dst)
{
    memset(dst, 0, sizeof *dst);
    dst->name = tx_rw_strdup(src->name);
    dst->op_type = tx_rw_strdup(src->op_type);
    dst->domain = tx_rw_strdup(src->domain);
    if (!dst->name || !dst->op_type || !dst->domain) goto oom;
    if (src->n_inputs && !(dst->inputs = calloc(src->n_inputs, sizeof(char *)))) goto oom;
    dst->n_inputs = src->n_inputs;
    for (size_t i = 0; i < src->n_inputs; i++)
        if (!(dst->inputs[i] = tx_rw_strdup(src->inputs[i]))) goto oom;
    if (src->n_outputs && !(dst->outputs = calloc(src->n_outputs, sizeof(char *)))) goto oom;
    dst->n_outputs = src->n_outputs;
    for (size_t i = 0; i < src->n_outputs; i++)
        if (!(dst->outputs[i] = tx_rw_strdup(src->outputs[i]))) goto oom;
    for (size_t i = 0; i < src->n_attrs; i++) {
        tx_rw_attr a;
        teexec_status *st = tx_rw_attr_copy(&src->attrs[i], &a);
        if (!st && (st = tx_rw_node_push_attr(dst, &a))) tx_rw_attr_clear(&a);
        if (st) {
            tx_rw_node_clear(dst);
            return st;
        }
    }
    return NULL;
oom:
    tx_rw_node_clear(dst);
    return tx_oom();
}

static bool defined_in(const tx_rw_graph *g, const size_t *set, size_t n, const char *v)
{
    for (size_t k = 0; k < n; k++) {
        const tx_rw_node *nd = &g->nodes[set[k]];
        for (size_t o = 0; o < nd->n_outputs; o++)
            if (strcmp(nd->outputs[o], v) == 0) return true;
    }
    return false;
}

static bool listed(char *const *list, size_t n, const char *v)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], v) == 0) return true;
    return false;
}

static teexec_status *push_name(char ***list, size_t *n, const char *v)
{
    char **p = realloc(*list, (*n + 1) * sizeof *p);
    if (!p) return tx_oom();
    *list = p;
    if (!(p[*n] = tx_rw_strdup(v))) return tx_oom();
    (*n)++;
    return NULL;
}

/* Orders the set so every node comes after the set nodes it reads from
 * (passes append nodes, so index order need not be topological). */
static teexec_status *order_set(const tx_rw_graph *g, const size_t *nodes, size_t n, size_t *out)
{
    bool *done = calloc(n, sizeof *done);
    if (!done) return tx_oom();
    size_t k = 0;
    while (k < n) {
        size_t before = k;
        for (size_t a = 0; a < n; a++) {
            if (done[a]) continue;
            const tx_rw_node *nd = &g->nodes[nodes[a]];
            bool ready = true;
            for (size_t s = 0; s < nd->n_inputs && ready; s++) {
                const char *v = nd->inputs[s];
                if (!v[0]) continue;
                for (size_t b = 0; b < n && ready; b++) {
                    if (done[b] || b == a) continue;
                    const tx_rw_node *pb = &g->nodes[nodes[b]];
                    for (size_t o = 0; o < pb->n_outputs; o++)
                        if (strcmp(pb->outputs[o], v) == 0) ready = false;
                }
            }
            if (ready) {
                done[a] = true;
                out[k++] = nodes[a];
            }
        }
        if (k == before) {
            free(done);
            return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                                 "tx_rw_outline: the nodes form a cycle");
        }
    }
    free(done);
    return NULL;
}

teexec_status *tx_rw_outline(tx_rw_graph *g, const size_t *nodes, size_t n, const char *domain,
                             const char *name, size_t *call)
{
    if (!n || !nodes || !name || !*name || !domain || !*domain)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "tx_rw_outline: needs nodes, a domain and a function name");
    for (size_t k = 0; k < n; k++) {
        if (nodes[k] >= g->n_nodes || g->nodes[nodes[k]].dead)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "tx_rw_outline: node %zu is not a live node", nodes[k]);
        for (size_t j = 0; j < k; j++)
            if (nodes[j] == nodes[k])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "tx_rw_outline: node %zu listed twice", nodes[k]);
    }
    for (size_t f = 0; f < g->n_funcs; f++)
        if (strcmp(g->funcs[f].domain, domain) == 0 && strcmp(g->funcs[f].name, name) == 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "function %s.%s exists already",
                            domain, name);
    if (g->src && !(g->drop_domain && strcmp(g->drop_domain, domain) == 0) &&
        tx_ir_model_find_function(g->src, domain, name, NULL) >= 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "function %s.%s exists already", domain,
                        name);

    size_t *set = malloc(n * sizeof *set);
    bool *in_set = calloc(g->n_nodes, sizeof *in_set);
    tx_rw_function fn;
    memset(&fn, 0, sizeof fn);
    teexec_status *st = NULL;
    if (!set || !in_set) {
        st = tx_oom();
        goto fail;
    }
    if ((st = order_set(g, nodes, n, set))) goto fail;
    for (size_t k = 0; k < n; k++) in_set[set[k]] = true;

    for (size_t k = 0; k < n && !st; k++) {
        const tx_rw_node *nd = &g->nodes[set[k]];
        for (size_t s = 0; s < nd->n_inputs && !st; s++) {
            const char *v = nd->inputs[s];
            if (v[0] && !defined_in(g, set, n, v) && !listed(fn.inputs, fn.n_inputs, v))
                st = push_name(&fn.inputs, &fn.n_inputs, v);
        }
    }
    for (size_t k = 0; k < n && !st; k++) {
        const tx_rw_node *nd = &g->nodes[set[k]];
        for (size_t o = 0; o < nd->n_outputs && !st; o++) {
            const char *v = nd->outputs[o];
            if (!v[0]) continue;
            bool outside = tx_rw_is_graph_output(g, v);
            for (size_t i = 0; i < g->n_nodes && !outside; i++) {
                if (in_set[i] || g->nodes[i].dead) continue;
                outside = listed(g->nodes[i].inputs, g->nodes[i].n_inputs, v);
            }
            if (outside) st = push_name(&fn.outputs, &fn.n_outputs, v);
        }
    }
    if (st) goto fail;
    if (!(fn.nodes = calloc(n, sizeof *fn.nodes))) {
        st = tx_oom();
        goto fail;
    }
    for (size_t k = 0; k < n && !st; k++) {
        st = node_copy(&g->nodes[set[k]], &fn.nodes[k]);
        if (!st) fn.n_nodes++;
    }
    fn.domain = tx_rw_strdup(domain);
    fn.name = tx_rw_strdup(name);
    if (!st && (!fn.domain || !fn.name)) st = tx_oom();
    if (!st) st = tx_rw_grow((void **)&g->funcs, &g->cap_funcs, g->n_funcs + 1, sizeof *g->funcs);
    if (st) goto fail;

    const char *call_name = tx_rw_fresh_name(g, name);
    size_t idx = 0;
    if (!call_name) st = tx_oom();
    if (!st)
        st = tx_rw_add_node(g, name, domain, call_name, (const char *const *)fn.inputs,
                            fn.n_inputs, (const char *const *)fn.outputs, fn.n_outputs, &idx);
    if (st) goto fail;
    for (size_t k = 0; k < n; k++) tx_rw_remove_node(g, set[k]);
    /* The call takes the slot of the set's first node (in graph order), so
     * the writer, which keeps the graph's order where it can, puts it where
     * the group was: inlining the written model and outlining the same
     * group again then writes the same bytes. The dead node moves to the
     * end; no other index changes. */
    size_t first = set[0];
    for (size_t k = 1; k < n; k++)
        if (set[k] < first) first = set[k];
    tx_rw_node moved = g->nodes[first];
    g->nodes[first] = g->nodes[idx];
    g->nodes[idx] = moved;
    idx = first;
    g->funcs[g->n_funcs++] = fn;
    if (call) *call = idx;
    free(set);
    free(in_set);
    return NULL;
fail:
    free(set);
    free(in_set);
    free(fn.domain);
    free(fn.name);
    for (size_t i = 0; i < fn.n_inputs; i++) free(fn.inputs[i]);
    free(fn.inputs);
    for (size_t i = 0; i < fn.n_outputs; i++) free(fn.outputs[i]);
    free(fn.outputs);
    for (size_t i = 0; i < fn.n_nodes; i++) tx_rw_node_clear(&fn.nodes[i]);
    free(fn.nodes);
    return st;
}
