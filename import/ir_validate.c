/*
 * ir_validate.c - the graph rules of ONNX's IR.md over a built IR: inputs
 * defined in scope, topological order (cycles reported as such), graph
 * outputs defined, domains imported. Single assignment and duplicate graph
 * inputs are enforced while building (ir_build.c), since the IR cannot
 * represent a violation of them.
 *
 * Errors are TEEXEC_ERR_BAD_MODEL with the node's label as the status node.
 */
#include "import/ir_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Names in a cycle message beyond this many are elided: the first few are
 * enough to find the loop in a viewer. */
#define TX_IR_CYCLE_NAMES 12

static int is_function_domain(const tx_ir_model *m, const char *domain)
{
    for (size_t i = 0; i < m->n_functions; i++)
        if (strcmp(m->functions[i].domain, domain) == 0) return 1;
    return 0;
}

/* Iterates the values node `n` depends on: explicit then implicit inputs. */
static int32_t dep_value(const tx_ir_node *n, size_t k)
{
    if (k < n->n_inputs) return n->inputs[k];
    return n->implicit_inputs[k - n->n_inputs];
}

/* Looks for a cycle among g's nodes through "reads a value produced by"
 * edges. On finding one, returns the error describing it; NULL when the
 * graph is acyclic (or memory ran out: the caller then reports the plain
 * ordering error, which is still correct). */
static teexec_status *find_cycle(const tx_ir_graph *g)
{
    size_t n = g->n_nodes;
    unsigned char *color = calloc(n ? n : 1, 1); /* 0 white, 1 on stack, 2 done */
    int32_t *stack = malloc((n ? n : 1) * sizeof *stack);
    size_t *edge = malloc((n ? n : 1) * sizeof *edge);
    teexec_status *st = NULL;
    if (!color || !stack || !edge) goto done;

    for (size_t root = 0; root < n && !st; root++) {
        if (color[root]) continue;
        size_t sp = 0;
        stack[sp] = (int32_t)root;
        edge[sp] = 0;
        sp++;
        color[root] = 1;
        while (sp && !st) {
            int32_t u = stack[sp - 1];
            const tx_ir_node *nu = &g->nodes[u];
            size_t ndeps = nu->n_inputs + nu->n_implicit_inputs;
            if (edge[sp - 1] >= ndeps) {
                color[u] = 2;
                sp--;
                continue;
            }
            int32_t v = dep_value(nu, edge[sp - 1]++);
            if (v < 0) continue;
            int32_t w = g->values[v].producer;
            if (w < 0 || color[w] == 2) continue;
            if (color[w] == 0) {
                color[w] = 1;
                stack[sp] = w;
                edge[sp] = 0;
                sp++;
                continue;
            }
            /* Back edge: u reads w's output, and each node on the stack
             * between w and u reads the output of the one above it. In
             * data-flow order the loop is w -> u -> (down the stack) -> w. */
            size_t start = sp - 1;
            while (stack[start] != w) start--;
            size_t len = sp - start;
            char msg[2048];
            size_t at = 0;
            msg[0] = '\0';
            for (size_t k = 0; k <= len && at < sizeof msg; k++) {
                if (k == TX_IR_CYCLE_NAMES && len > TX_IR_CYCLE_NAMES) {
                    at += (size_t)snprintf(msg + at, sizeof msg - at, " -> ...");
                    k = len; /* close the loop with its first node */
                }
                size_t at_k = (k == 0 || k == len) ? start : sp - k;
                const tx_ir_node *x = &g->nodes[stack[at_k]];
                if (at < sizeof msg)
                    at += (size_t)snprintf(msg + at, sizeof msg - at, "%s\"%s\"",
                                           k ? " -> " : "", x->label);
            }
            /* The values carrying the loop, in the same order: u reads v
             * from w, then each stack node reads the one above it. */
            at += (size_t)snprintf(msg + at, at < sizeof msg ? sizeof msg - at : 0,
                                   " (through");
            for (size_t k = 0; k < len && at < sizeof msg; k++) {
                if (k == TX_IR_CYCLE_NAMES) {
                    at += (size_t)snprintf(msg + at, sizeof msg - at, " ...");
                    break;
                }
                int32_t via = v;
                if (k > 0) {
                    size_t i = sp - 1 - k;
                    via = dep_value(&g->nodes[stack[i]], edge[i] - 1);
                }
                if (at < sizeof msg)
                    at += (size_t)snprintf(msg + at, sizeof msg - at, "%s \"%s\"",
                                           k ? "," : "", g->values[via].name);
            }
            if (at < sizeof msg) snprintf(msg + at, sizeof msg - at, ")");
            st = tx_ir_node_error(&g->nodes[w], "is part of a cycle: %s", msg);
        }
    }
done:
    free(color);
    free(stack);
    free(edge);
    return st;
}

static teexec_status *validate_graph(const tx_ir_model *m, const tx_ir_graph *g);

static teexec_status *check_read(const tx_ir_graph *g, const tx_ir_node *node, int32_t v,
                                 int implicit)
{
    const tx_ir_value *val = &g->values[v];
    if (val->flags & TX_IR_VALUE_UNDEFINED)
        return tx_ir_node_error(node, "reads \"%s\", which nothing defines", val->name);
    if (val->producer >= node->index) {
        teexec_status *cycle = find_cycle(g);
        if (cycle) return cycle;
        const tx_ir_node *p = &g->nodes[val->producer];
        return tx_ir_node_error(node,
                                "%s \"%s\", which node \"%s\" (%s) produces later: nodes are "
                                "not in topological order",
                                implicit ? "has a subgraph that reads" : "reads", val->name,
                                p->label, p->op_type);
    }
    return NULL;
}

static teexec_status *validate_node(const tx_ir_model *m, const tx_ir_graph *g,
                                    const tx_ir_node *node)
{
    if (!node->op_type[0]) return tx_ir_node_error(node, "has no op_type");
    if (node->opset < 0 && !is_function_domain(m, node->domain)) {
        const char *d = node->domain[0] ? node->domain : "ai.onnx";
        if (g->function >= 0)
            return tx_ir_node_error(node,
                                    "uses domain \"%s\", which neither its function nor the "
                                    "model imports (opset_import)",
                                    d);
        return tx_ir_node_error(node, "uses domain \"%s\", which the model does not import "
                                      "(opset_import)", d);
    }
    for (size_t k = 0; k < node->n_inputs; k++)
        if (node->inputs[k] >= 0) TX_TRY(check_read(g, node, node->inputs[k], 0));
    for (size_t k = 0; k < node->n_implicit_inputs; k++)
        TX_TRY(check_read(g, node, node->implicit_inputs[k], 1));
    for (size_t a = 0; a < node->n_attrs; a++) {
        const tx_ir_attr *at = &node->attrs[a];
        teexec_status *st = NULL;
        if (at->g) st = validate_graph(m, at->g);
        for (size_t s = 0; !st && s < at->n_graphs; s++)
            if (at->graphs[s]) st = validate_graph(m, at->graphs[s]);
        if (st)
            return tx_status_prefix(st, "in graph attribute \"%s\" of node \"%s\" (%s)",
                                    at->name, node->label, node->op_type);
    }
    return NULL;
}

static teexec_status *validate_graph(const tx_ir_model *m, const tx_ir_graph *g)
{
    for (size_t i = 0; i < g->n_nodes; i++) TX_TRY(validate_node(m, g, &g->nodes[i]));
    for (size_t i = 0; i < g->n_outputs; i++) {
        const tx_ir_value *v = &g->values[g->outputs[i]];
        if (v->flags & TX_IR_VALUE_UNDEFINED)
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "graph output \"%s\" is not defined by any node, input or "
                            "initializer",
                            v->name);
    }
    return NULL;
}

teexec_status *tx_ir_validate(const tx_ir_model *model)
{
    if (!model || !model->graph)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_ir_validate: no model");
    TX_TRY(validate_graph(model, model->graph));
    for (size_t i = 0; i < model->n_functions; i++) {
        const tx_ir_function *f = &model->functions[i];
        if (!f->body) continue;
        teexec_status *st = validate_graph(model, f->body);
        if (st)
            return tx_status_prefix(st, "in function \"%s%s%s\"", f->domain,
                                    f->domain[0] ? "." : "", f->name);
    }
    return NULL;
}
