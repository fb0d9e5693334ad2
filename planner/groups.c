/*
 * groups.c - fuser groups (tx_plan_groups): chains of te.ops basic ops, as
 * TE's Sequential makes one OperationFuser per run of fusible ops.
 *
 * A node joins the chain of the node producing its main input when that
 * value is the producer's main output, the producer ends its chain, the
 * value has exactly one reader (this node's main input) and is no graph
 * output: so every value inside a chain is private to it and a fused kernel
 * may keep it in registers. Every other input of the node (extra inputs,
 * parameters, values its subgraphs capture) must come from the chain
 * itself, from a graph input or initializer, or from an ancestor of the
 * chain's first node (a node the first node depends on, through any path);
 * otherwise the node starts a new chain.
 *
 * Why ancestors, and not "a node before the chain's first node" in the
 * graph's node list: the executors run a group's fused kernel where its
 * first node stands in the node order (and the groups in the order of their
 * first nodes), so every input a chain reads from outside must be ready
 * before the first node in that order; and the groups must be the same for
 * every valid node order of one graph, or converting a model (which writes
 * each group as one function call, moving nodes) and converting the result
 * again would group, fuse and write it differently. An ancestor of the
 * first node precedes it in every topological order, and a node that is no
 * ancestor follows it in some order: so this is the widest rule that holds
 * in all of them. It also keeps the group graph acyclic: an edge from group
 * A to group B means a node of A is an ancestor of B's first node, so A's
 * first node is one too, and "is an ancestor of" is a strict partial order
 * (TE forbids channels across fusers for the same reason). A side input
 * made by a parallel branch (GPT-NeoX's parallel residual: the attention
 * output plus the MLP output) therefore starts a new chain at the add,
 * whatever order the exporter wrote the branches in.
 *
 * The groups are numbered in the order of their first nodes: a
 * topological order of the group graph, in which the numbering of a given
 * graph changes only with the relative order of the first nodes.
 *
 * DotProductAttention and Embedding are groups of their own: in TE they are
 * modules outside te.ops (cuDNN attention, torch embedding) that break a
 * Sequential's chain, and nothing in the fusion catalog reaches across them.
 * GroupedLinear chains like any basic op (its split_sizes and scales are
 * extra inputs), which is what lets the grouped-MLP joint fusion see
 * GroupedLinear, scaled activation, GroupedLinear in one group. Standard
 * ONNX nodes are STANDARD groups of one node.
 *
 * first_op_requiring_backward follows TE's OperationFuser: the group's size
 * when not training; 0 when the chain's main input needs a gradient; else
 * the first op with a parameter or an extra input that needs one.
 */
#include "planner/plan_internal.h"

#include <stdlib.h>
#include <string.h>

const tx_te_op_schema *tx_plan_node_schema(const tx_ir_node *n)
{
    if (!n || strcmp(n->domain, TX_TE_DOMAIN) != 0) return NULL;
    return tx_te_schema_find(n->op_type);
}

size_t tx_plan_param_start(const tx_te_op_schema *s)
{
    return 1 + (size_t)s->n_extra_inputs;
}

const tx_infer_value *tx_plan_val(const tx_plan_request *req, int32_t v)
{
    if (!req || !req->vals || v < 0 || (size_t)v >= req->n_vals) return NULL;
    return &req->vals[v];
}

static bool is_float(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_FLOAT16 || dt == TEEXEC_DTYPE_BFLOAT16
        || dt == TEEXEC_DTYPE_DOUBLE;
}

static teexec_dtype value_dtype(const tx_ir_graph *g, const tx_plan_request *req, int32_t v)
{
    const tx_infer_value *iv = tx_plan_val(req, v);
    if (iv && iv->dtype != TEEXEC_DTYPE_UNDEFINED) return iv->dtype;
    return g->values[v].dtype;
}

/* Can input `slot` of node n carry a gradient? */
static bool slot_differentiable(const tx_ir_node *n, size_t slot)
{
    const tx_te_op_schema *s = tx_plan_node_schema(n);
    if (!s) return true; /* standard ops: decided by dtype */
    if (slot == 0) return !(s->input.flags & TX_TE_PORT_NO_GRAD);
    if (slot < tx_plan_param_start(s)) {
        const tx_te_port *p = &s->extra_inputs[slot - 1];
        return !(p->flags & TX_TE_PORT_NO_GRAD);
    }
    return true;
}

teexec_status *tx_plan_value_grads(const tx_ir_graph *g, const tx_plan_request *req, bool **out)
{
    *out = NULL;
    bool *ng = calloc(g->n_values ? g->n_values : 1, sizeof *ng);
    if (!ng) return tx_oom();
    if (req->training) {
        size_t k = 0; /* position among fed inputs (graph inputs that are not initializers) */
        for (size_t i = 0; i < g->n_inputs; i++) {
            int32_t v = g->inputs[i];
            if (g->values[v].flags & TX_IR_VALUE_INITIALIZER) continue;
            if (req->input_needs_grad && k < req->n_inputs && req->input_needs_grad[k]
                && is_float(value_dtype(g, req, v)))
                ng[v] = true;
            k++;
        }
        if (!req->params_frozen)
            for (size_t i = 0; i < g->n_initializers; i++) {
                int32_t v = g->initializers[i];
                if (is_float(value_dtype(g, req, v))) ng[v] = true;
            }
        for (size_t i = 0; i < g->n_nodes; i++) {
            const tx_ir_node *n = &g->nodes[i];
            bool any = false;
            for (size_t s = 0; s < n->n_inputs && !any; s++) {
                int32_t v = n->inputs[s];
                if (v >= 0 && ng[v] && slot_differentiable(n, s)) any = true;
            }
            if (!any) continue;
            for (size_t o = 0; o < n->n_outputs; o++) {
                int32_t v = n->outputs[o];
                if (v >= 0 && is_float(value_dtype(g, req, v))) ng[v] = true;
            }
        }
    }
    *out = ng;
    return NULL;
}

/* ---- chain building ------------------------------------------------------ */

typedef struct chain_build {
    int32_t *nodes;
    int32_t n, cap;
} chain_build;

static bool standalone_op(tx_te_op_id id)
{
    return id == TX_TE_DOT_PRODUCT_ATTENTION || id == TX_TE_EMBEDDING;
}

static teexec_status *push_node(chain_build *c, int32_t node)
{
    if (c->n == c->cap) {
        int32_t cap = c->cap ? c->cap * 2 : 4;
        int32_t *nn = realloc(c->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return tx_oom();
        c->nodes = nn;
        c->cap = cap;
    }
    c->nodes[c->n++] = node;
    return NULL;
}

/* Reachability queries over the node graph (see the file comment): a
 * stamp per node for "seen in the current query" and a stack, both sized
 * for every node, so a query allocates nothing. */
typedef struct reach {
    uint32_t *seen;
    int32_t *stack;
    uint32_t stamp;
} reach;

static void reach_push(const tx_ir_graph *g, reach *r, int32_t v, int32_t *top)
{
    if (v < 0) return;
    int32_t pr = g->values[v].producer;
    if (pr < 0 || r->seen[pr] == r->stamp) return;
    r->seen[pr] = r->stamp;
    r->stack[(*top)++] = pr;
}

/* Does node `to` depend on node `from` (a path from -> ... -> to, through
 * explicit or captured inputs)? Walks backward from `to`. The node list is
 * in a topological order, so a node before `from` cannot depend on it and
 * is not walked past: that bounds the walk and does not change the answer. */
static bool is_ancestor(const tx_ir_graph *g, reach *r, int32_t from, int32_t to)
{
    if (from == to) return true;
    if (from > to) return false;
    if (++r->stamp == 0) { /* wrapped: forget every old mark */
        memset(r->seen, 0, g->n_nodes * sizeof *r->seen);
        r->stamp = 1;
    }
    int32_t top = 0;
    r->seen[to] = r->stamp;
    r->stack[top++] = to;
    while (top > 0) {
        int32_t ni = r->stack[--top];
        if (ni == from) return true;
        if (ni < from) continue;
        const tx_ir_node *n = &g->nodes[ni];
        for (size_t s = 0; s < n->n_inputs; s++) reach_push(g, r, n->inputs[s], &top);
        for (size_t s = 0; s < n->n_implicit_inputs; s++)
            reach_push(g, r, n->implicit_inputs[s], &top);
    }
    return false;
}

/* May chain ch, whose first node is chain_first, read value v from outside
 * its main line: made inside the chain, outside the graph's nodes, or by an
 * ancestor of the first node? */
static bool side_value_ok(const tx_ir_graph *g, reach *r, const int32_t *chain_of, int32_t ch,
                          int32_t chain_first, int32_t v)
{
    if (v < 0) return true;
    int32_t pr = g->values[v].producer;
    return pr < 0 || chain_of[pr] == ch || is_ancestor(g, r, pr, chain_first);
}

/* Every input of node ni other than its main input passes side_value_ok. */
static bool side_inputs_ok(const tx_ir_graph *g, reach *r, const int32_t *chain_of, int32_t ch,
                           int32_t chain_first, int32_t ni)
{
    const tx_ir_node *n = &g->nodes[ni];
    for (size_t s = 1; s < n->n_inputs; s++)
        if (!side_value_ok(g, r, chain_of, ch, chain_first, n->inputs[s])) return false;
    for (size_t s = 0; s < n->n_implicit_inputs; s++)
        if (!side_value_ok(g, r, chain_of, ch, chain_first, n->implicit_inputs[s])) return false;
    return true;
}

static teexec_status *add_value_once(int32_t **arr, int32_t *n, int32_t v)
{
    for (int32_t i = 0; i < *n; i++)
        if ((*arr)[i] == v) return NULL;
    int32_t *na = realloc(*arr, (size_t)(*n + 1) * sizeof *na);
    if (!na) return tx_oom();
    na[(*n)++] = v;
    *arr = na;
    return NULL;
}

/* main input/output, extra inputs and outputs of a finished chain. */
static teexec_status *chain_tensors(const tx_ir_graph *g, const int32_t *group_of, tx_plan_group *grp)
{
    grp->main_input = -1;
    grp->main_output = -1;
    if (grp->kind != TX_GROUP_CHAIN) return NULL;
    const tx_ir_node *first = &g->nodes[grp->nodes[0]];
    const tx_ir_node *last = &g->nodes[grp->nodes[grp->n_nodes - 1]];
    grp->main_input = first->n_inputs ? first->inputs[0] : -1;
    grp->main_output = last->n_outputs ? last->outputs[0] : -1;
    for (int32_t i = 0; i < grp->n_nodes; i++) {
        const tx_ir_node *n = &g->nodes[grp->nodes[i]];
        const tx_te_op_schema *s = tx_plan_node_schema(n);
        size_t pstart = tx_plan_param_start(s);
        for (size_t k = 1; k < n->n_inputs && k < pstart; k++) {
            int32_t v = n->inputs[k];
            if (v < 0) continue;
            int32_t pr = g->values[v].producer;
            if (pr >= 0 && group_of[pr] == grp->id) continue;
            TX_TRY(add_value_once(&grp->extra_inputs, &grp->n_extra_inputs, v));
        }
        for (size_t o = 0; o < n->n_outputs; o++) {
            int32_t v = n->outputs[o];
            if (v < 0 || v == grp->main_output) continue;
            const tx_ir_value *val = &g->values[v];
            bool outside = (val->flags & TX_IR_VALUE_GRAPH_OUTPUT) != 0;
            for (size_t u = 0; u < val->n_consumers && !outside; u++)
                if (group_of[val->consumers[u].node] != grp->id) outside = true;
            if (outside) TX_TRY(add_value_once(&grp->extra_outputs, &grp->n_extra_outputs, v));
        }
    }
    return NULL;
}

static int32_t first_requiring_backward(const tx_ir_graph *g, const tx_plan_request *req,
                                        const bool *ng, const tx_plan_group *grp)
{
    if (!req->training) return grp->n_nodes;
    for (int32_t i = 0; i < grp->n_nodes; i++) {
        const tx_ir_node *n = &g->nodes[grp->nodes[i]];
        for (size_t s = 0; s < n->n_inputs; s++) {
            int32_t v = n->inputs[s];
            if (v < 0 || !ng[v] || !slot_differentiable(n, s)) continue;
            if (s == 0 && i > 0) continue; /* made by the previous op: it decides */
            int32_t pr = g->values[v].producer;
            if (s > 0 && pr >= 0 && grp->kind == TX_GROUP_CHAIN) {
                /* an internal channel (fork inside the chain) needs a grad only
                 * when an earlier op does, which the loop found already */
                bool inside = false;
                for (int32_t j = 0; j < i; j++)
                    if (grp->nodes[j] == pr) inside = true;
                if (inside) continue;
            }
            return i;
        }
    }
    return grp->n_nodes;
}

teexec_status *tx_plan_groups(const tx_ir_graph *g, const tx_plan_request *req, tx_fuser_plan *p)
{
    size_t nn = g->n_nodes;
    int32_t *chain_of = malloc((nn ? nn : 1) * sizeof *chain_of);
    p->group_of_node = malloc((nn ? nn : 1) * sizeof *p->group_of_node);
    chain_build *cb = calloc(nn ? nn : 1, sizeof *cb);
    reach r = {calloc(nn ? nn : 1, sizeof *r.seen), malloc((nn ? nn : 1) * sizeof *r.stack), 0};
    bool *ng = NULL;
    teexec_status *st = NULL;
    size_t n_groups = 0;
    if (!chain_of || !p->group_of_node || !cb || !r.seen || !r.stack) {
        st = tx_oom();
        goto done;
    }
    for (size_t i = 0; i < nn; i++) chain_of[i] = -1;

    for (size_t i = 0; i < nn && !st; i++) {
        const tx_ir_node *n = &g->nodes[i];
        const tx_te_op_schema *s = tx_plan_node_schema(n);
        if (!s && strcmp(n->domain, TX_TE_DOMAIN) == 0) {
            st = tx_status_new(TEEXEC_ERR_UNSUPPORTED, NULL, n->label,
                               "node \"%s\": te.ops has no op \"%s\" (see docs/te-ops.md)",
                               n->label, n->op_type);
            break;
        }
        int32_t join = -1;
        if (s && !standalone_op(s->id) && n->n_inputs > 0 && n->inputs[0] >= 0) {
            const tx_ir_value *v = &g->values[n->inputs[0]];
            int32_t pr = v->producer;
            if (pr >= 0 && chain_of[pr] >= 0 && v->producer_slot == 0 && v->n_consumers == 1
                && v->consumers[0].slot == 0 && !(v->flags & TX_IR_VALUE_GRAPH_OUTPUT)) {
                int32_t ch = chain_of[pr];
                const chain_build *c = &cb[ch];
                const tx_te_op_schema *ps = tx_plan_node_schema(&g->nodes[pr]);
                if (ps && !standalone_op(ps->id) && c->nodes[c->n - 1] == pr
                    && side_inputs_ok(g, &r, chain_of, ch, c->nodes[0], (int32_t)i))
                    join = ch;
            }
        }
        if (join < 0) join = (int32_t)n_groups++;
        st = push_node(&cb[join], (int32_t)i);
        chain_of[i] = join;
        /* standard nodes are never joined: nothing chains onto them because
         * their schema is NULL, and they join nothing (join = new group). */
        if (!s && cb[join].n > 1) st = tx_error(TEEXEC_ERR_INTERNAL, "planner: standard node chained");
    }
    if (st) goto done;

    p->groups = calloc(n_groups ? n_groups : 1, sizeof *p->groups);
    if (!p->groups) {
        st = tx_oom();
        goto done;
    }
    p->n_groups = n_groups;
    for (size_t i = 0; i < nn; i++) p->group_of_node[i] = chain_of[i];
    st = tx_plan_value_grads(g, req, &ng);
    for (size_t gi = 0; gi < n_groups && !st; gi++) {
        tx_plan_group *grp = &p->groups[gi];
        grp->id = (int32_t)gi;
        grp->nodes = cb[gi].nodes;
        grp->n_nodes = cb[gi].n;
        cb[gi].nodes = NULL;
        const tx_ir_node *n0 = &g->nodes[grp->nodes[0]];
        grp->kind = tx_plan_node_schema(n0) ? TX_GROUP_CHAIN : TX_GROUP_STANDARD;
        if (grp->kind == TX_GROUP_CHAIN) {
            grp->ops = malloc((size_t)grp->n_nodes * sizeof *grp->ops);
            if (!grp->ops) {
                st = tx_oom();
                break;
            }
            for (int32_t k = 0; k < grp->n_nodes; k++)
                grp->ops[k] = tx_plan_node_schema(&g->nodes[grp->nodes[k]])->id;
        }
        st = chain_tensors(g, chain_of, grp);
        if (!st) grp->first_op_requiring_backward = first_requiring_backward(g, req, ng, grp);
    }
done:
    if (cb)
        for (size_t i = 0; i < nn; i++) free(cb[i].nodes);
    free(cb);
    free(chain_of);
    free(r.seen);
    free(r.stack);
    free(ng);
    return st;
}
