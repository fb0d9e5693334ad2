/* rewrite_inline.c - tx_rw_from_ir: copying the IR's main graph into a
 * rewrite graph, with every call of a model-local function replaced by the
 * function's body (recursively). */
#include "import/rewrite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Functions calling each other deeper than this are taken as recursion
 * (which ONNX forbids) rather than followed until the stack runs out. */
#define INLINE_MAX_DEPTH 32

typedef struct inline_ctx {
    tx_rw_graph *g;
    const tx_ir_model *model;
} inline_ctx;

static const Onnx__AttributeProto *proto_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t i = 0; np && i < np->n_attribute; i++)
        if (np->attribute[i] && np->attribute[i]->name && strcmp(np->attribute[i]->name, name) == 0)
            return np->attribute[i];
    return NULL;
}

/* Converts one IR attribute. Strings holding NUL bytes cannot be NUL-terminated
 * copies, so they travel opaque like the types the rewrite layer does not model. */
static teexec_status *attr_from_ir(const tx_ir_attr *ia, const Onnx__NodeProto *np, tx_rw_attr *out)
{
    memset(out, 0, sizeof *out);
    out->name = tx_rw_strdup(ia->name);
    if (!out->name) return tx_oom();
    out->type = ia->type;
    bool opaque = false;
    switch (ia->type) {
    case TX_IR_ATTR_INT: out->i = ia->i; break;
    case TX_IR_ATTR_FLOAT: out->f = ia->f; break;
    case TX_IR_ATTR_STRING:
        if (ia->s && strlen(ia->s) != ia->s_len) opaque = true;
        else if (!(out->s = tx_rw_strdup(ia->s))) goto oom;
        break;
    case TX_IR_ATTR_INTS:
        if (ia->n_ints) {
            if (!(out->ints = malloc(ia->n_ints * sizeof(int64_t)))) goto oom;
            memcpy(out->ints, ia->ints, ia->n_ints * sizeof(int64_t));
        }
        out->n_ints = ia->n_ints;
        break;
    case TX_IR_ATTR_FLOATS:
        if (ia->n_floats) {
            if (!(out->floats = malloc(ia->n_floats * sizeof(float)))) goto oom;
            memcpy(out->floats, ia->floats, ia->n_floats * sizeof(float));
        }
        out->n_floats = ia->n_floats;
        break;
    case TX_IR_ATTR_STRINGS:
        for (size_t i = 0; i < ia->n_strings; i++)
            if (strlen(ia->strings[i]) != ia->string_lens[i]) opaque = true;
        if (opaque || !ia->n_strings) break;
        if (!(out->strings = calloc(ia->n_strings, sizeof(char *)))) goto oom;
        out->n_strings = ia->n_strings;
        for (size_t i = 0; i < ia->n_strings; i++)
            if (!(out->strings[i] = tx_rw_strdup(ia->strings[i]))) goto oom;
        break;
    case TX_IR_ATTR_TENSOR: out->t_borrowed = ia->t; break;
    default: opaque = true; break;
    }
    if (opaque) {
        out->opaque = proto_attr(np, ia->name);
        if (!out->opaque) {
            teexec_status *st = tx_error(TEEXEC_ERR_INTERNAL,
                                         "attribute \"%s\" is not in its NodeProto", ia->name);
            tx_rw_attr_clear(out);
            return st;
        }
    }
    return NULL;
oom:
    tx_rw_attr_clear(out);
    return tx_oom();
}

static const tx_rw_attr *call_attr(const tx_rw_node *call, const char *name)
{
    for (size_t i = 0; call && i < call->n_attrs; i++)
        if (strcmp(call->attrs[i].name, name) == 0) return &call->attrs[i];
    return NULL;
}

static teexec_status *inline_call(inline_ctx *c, const tx_rw_node *call, int32_t fidx, int depth);

/* Is `name` the name of a node of g (dead ones too, as tx_rw_name_used
 * counts them), of one of g's functions, of a node of the source's main
 * graph (copied later)? Names tx_rw_fresh_name handed out are not asked:
 * those not on a node yet are the names of values. */
static bool node_name_taken(const tx_rw_graph *g, const char *name)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].name && strcmp(g->nodes[i].name, name) == 0) return true;
    for (size_t f = 0; f < g->n_funcs; f++)
        for (size_t i = 0; i < g->funcs[f].n_nodes; i++)
            if (g->funcs[f].nodes[i].name && strcmp(g->funcs[f].nodes[i].name, name) == 0)
                return true;
    const tx_ir_graph *main = g->src ? g->src->graph : NULL;
    for (size_t i = 0; main && i < main->n_nodes; i++)
        if (strcmp(main->nodes[i].name, name) == 0) return true;
    return false;
}

/* Adds IR node n of graph gr to c->g. `names` maps gr's value indices to
 * names in c->g (NULL: gr is the main graph, names as they are); `call`
 * is the call being inlined (NULL at top level), whose attributes resolve
 * ref_attr_name. */
static teexec_status *add_ir_node(inline_ctx *c, const tx_ir_graph *gr, const tx_ir_node *n,
                                  char *const *names, const tx_rw_node *call, int depth)
{
    tx_rw_node t;
    memset(&t, 0, sizeof t);
    teexec_status *st = NULL;
    if (call && n->name[0]) {
        /* The body's own name while no other node has it (so converting a
         * converted model writes the same names again), else a fresh
         * variant. Node names and value names are separate namespaces in
         * ONNX: a body node named like its output (or any value) keeps its
         * name, which the body's values, mapped before its nodes, would
         * otherwise have taken from it. */
        const char *nm = node_name_taken(c->g, n->name) ? tx_rw_fresh_name(c->g, n->name) : n->name;
        t.name = tx_rw_strdup(nm ? nm : NULL);
        if (!nm) free(t.name), t.name = NULL;
    } else {
        t.name = tx_rw_strdup(n->name);
    }
    t.op_type = tx_rw_strdup(n->op_type);
    t.domain = tx_rw_strdup(n->domain);
    if (!t.name || !t.op_type || !t.domain) goto oom;
    if (n->n_inputs && !(t.inputs = calloc(n->n_inputs, sizeof(char *)))) goto oom;
    t.n_inputs = n->n_inputs;
    for (size_t i = 0; i < n->n_inputs; i++) {
        int32_t v = n->inputs[i];
        const char *nm = v < 0 ? "" : names ? names[v] : gr->values[v].name;
        if (!(t.inputs[i] = tx_rw_strdup(nm))) goto oom;
    }
    if (n->n_outputs && !(t.outputs = calloc(n->n_outputs, sizeof(char *)))) goto oom;
    t.n_outputs = n->n_outputs;
    for (size_t i = 0; i < n->n_outputs; i++) {
        int32_t v = n->outputs[i];
        const char *nm = v < 0 ? "" : names ? names[v] : gr->values[v].name;
        if (!(t.outputs[i] = tx_rw_strdup(nm))) goto oom;
    }
    for (size_t i = 0; i < n->n_attrs; i++) {
        const tx_ir_attr *ia = &n->attrs[i];
        tx_rw_attr a;
        if (ia->ref_attr_name) {
            const tx_rw_attr *src = call_attr(call, ia->ref_attr_name);
            if (!src) {
                st = tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, call ? call->name : n->label,
                                   "call \"%s\" (%s%s%s): attribute \"%s\" of body node \"%s\" "
                                   "refers to \"%s\", which the call does not set",
                                   call ? call->name : "?", call ? call->domain : "",
                                   call && call->domain[0] ? "." : "", call ? call->op_type : "?",
                                   ia->name, n->label, ia->ref_attr_name);
                goto fail;
            }
            if ((st = tx_rw_attr_copy(src, &a))) goto fail;
            char *nm = tx_rw_strdup(ia->name);
            if (!nm) {
                tx_rw_attr_clear(&a);
                goto oom;
            }
            free(a.name);
            a.name = nm;
        } else if ((st = attr_from_ir(ia, n->proto, &a))) {
            goto fail;
        }
        if ((st = tx_rw_node_push_attr(&t, &a))) {
            tx_rw_attr_clear(&a);
            goto fail;
        }
    }
    if (n->function >= 0) {
        st = inline_call(c, &t, n->function, depth + 1);
        tx_rw_node_clear(&t);
        return st;
    }
    if ((st = tx_rw_grow((void **)&c->g->nodes, &c->g->cap_nodes, c->g->n_nodes + 1,
                         sizeof *c->g->nodes)))
        goto fail;
    c->g->nodes[c->g->n_nodes++] = t;
    return NULL;
oom:
    st = tx_oom();
fail:
    tx_rw_node_clear(&t);
    return st;
}

static teexec_status *inline_call(inline_ctx *c, const tx_rw_node *call, int32_t fidx, int depth)
{
    if (depth > INLINE_MAX_DEPTH)
        return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, call->name,
                             "call \"%s\" (%s): functions nest deeper than %d calls "
                             "(a function calling itself?)",
                             call->name, call->op_type, INLINE_MAX_DEPTH);
    const tx_ir_function *f = &c->model->functions[fidx];
    const tx_ir_graph *body = f->body;
    if (call->n_inputs > f->n_inputs || call->n_outputs > f->n_outputs)
        return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, call->name,
                             "call \"%s\" passes %zu inputs and %zu outputs to function \"%s\", "
                             "which has %zu and %zu",
                             call->name, call->n_inputs, call->n_outputs, f->name, f->n_inputs,
                             f->n_outputs);
    for (size_t i = 0; i < f->n_opsets; i++)
        TX_TRY(tx_rw_add_opset(c->g, f->opsets[i].domain, f->opsets[i].version));

    char **names = calloc(body->n_values ? body->n_values : 1, sizeof *names);
    if (!names) return tx_oom();
    teexec_status *st = NULL;
    for (size_t v = 0; v < body->n_values && !st; v++) {
        const char *vn = body->values[v].name;
        const char *mapped = NULL;
        /* Formal parameters bind to the call's arguments; an argument the
         * call leaves out is an omitted optional ("") inside the body. */
        for (size_t i = 0; i < f->n_inputs && !mapped; i++)
            if (strcmp(f->inputs[i], vn) == 0) mapped = i < call->n_inputs ? call->inputs[i] : "";
        for (size_t i = 0; i < f->n_outputs && !mapped; i++)
            if (strcmp(f->outputs[i], vn) == 0) mapped = i < call->n_outputs ? call->outputs[i] : "";
        if (!mapped) {
            /* as for node names: the body's name while it is free */
            mapped = tx_rw_fresh_name(c->g, vn);
            if (!mapped) st = tx_oom();
        }
        if (!st && !(names[v] = tx_rw_strdup(mapped))) st = tx_oom();
    }
    for (size_t k = 0; k < body->n_nodes && !st; k++)
        st = add_ir_node(c, body, &body->nodes[k], names, call, depth);
    for (size_t v = 0; v < body->n_values; v++) free(names[v]);
    free(names);
    return st;
}

static teexec_status *io_from_value(const tx_ir_graph *gr, int32_t vi,
                                    const Onnx__ValueInfoProto *src, tx_rw_io *io)
{
    memset(io, 0, sizeof *io);
    const tx_ir_value *v = &gr->values[vi];
    io->name = tx_rw_strdup(v->name);
    if (!io->name) return tx_oom();
    io->src = src;
    io->type.rank = -1;
    if (v->kind == TX_IR_KIND_TENSOR || (v->kind == TX_IR_KIND_UNKNOWN && v->rank >= 0)) {
        io->has_type = true;
        io->type.dtype = v->dtype;
        io->type.rank = v->rank;
        for (int32_t d = 0; d < v->rank; d++) {
            io->type.dims[d] = v->dims[d];
            if (v->dim_params && v->dim_params[d]) {
                io->type.dim_params[d] = tx_rw_strdup(v->dim_params[d]);
                if (!io->type.dim_params[d]) return tx_oom();
            }
        }
    }
    return NULL;
}

static const Onnx__ValueInfoProto *find_vi(Onnx__ValueInfoProto *const *list, size_t n,
                                           const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && list[i]->name && strcmp(list[i]->name, name) == 0) return list[i];
    return NULL;
}

static teexec_status *push_io(tx_rw_io **arr, size_t *n, size_t *cap, const tx_ir_graph *gr,
                              int32_t vi, const Onnx__ValueInfoProto *src)
{
    TX_TRY(tx_rw_grow((void **)arr, cap, *n + 1, sizeof **arr));
    tx_rw_io *io = &(*arr)[*n];
    (*n)++; /* counted first so tx_rw_free releases a half-built entry */
    return io_from_value(gr, vi, src, io);
}

static teexec_status *build(const tx_ir_model *model, tx_rw_graph *g)
{
    const tx_ir_graph *gr = model->graph;
    const Onnx__GraphProto *gp = gr->proto;
    g->src = model;
    g->graph_name = tx_rw_strdup(gr->name);
    if (!g->graph_name) return tx_oom();
    for (size_t i = 0; i < model->n_opsets; i++)
        TX_TRY(tx_rw_add_opset(g, model->opsets[i].domain, model->opsets[i].version));

    for (size_t i = 0; i < gr->n_inputs; i++) {
        int32_t vi = gr->inputs[i];
        TX_TRY(push_io(&g->inputs, &g->n_inputs, &g->cap_inputs, gr, vi,
                       gp ? find_vi(gp->input, gp->n_input, gr->values[vi].name) : NULL));
    }
    for (size_t i = 0; i < gr->n_outputs; i++) {
        int32_t vi = gr->outputs[i];
        TX_TRY(push_io(&g->outputs, &g->n_outputs, &g->cap_outputs, gr, vi,
                       gp ? find_vi(gp->output, gp->n_output, gr->values[vi].name) : NULL));
    }
    for (size_t i = 0; gp && i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vp = gp->value_info[i];
        if (!vp || !vp->name) continue;
        int32_t vi = tx_ir_graph_find_value(gr, vp->name);
        if (vi < 0) continue;
        TX_TRY(push_io(&g->vinfo, &g->n_vinfo, &g->cap_vinfo, gr, vi, vp));
    }
    for (size_t i = 0; i < gr->n_initializers; i++) {
        const tx_ir_value *v = &gr->values[gr->initializers[i]];
        if (!(v->flags & TX_IR_VALUE_INITIALIZER) || !v->initializer) continue;
        TX_TRY(tx_rw_grow((void **)&g->inits, &g->cap_inits, g->n_inits + 1, sizeof *g->inits));
        tx_rw_init *in = &g->inits[g->n_inits];
        if (!(in->name = tx_rw_strdup(v->name))) return tx_oom();
        in->borrowed = v->initializer;
        g->n_inits++;
    }
    /* Reserve every name of the main graph before inlining, so names made
     * for function bodies cannot collide with values defined further on. */
    for (size_t v = 0; v < gr->n_values; v++) {
        TX_TRY(tx_rw_grow((void **)&g->fresh, &g->cap_fresh, g->n_fresh + 1, sizeof *g->fresh));
        if (!(g->fresh[g->n_fresh] = tx_rw_strdup(gr->values[v].name))) return tx_oom();
        g->n_fresh++;
    }
    inline_ctx c = {g, model};
    for (size_t k = 0; k < gr->n_nodes; k++) TX_TRY(add_ir_node(&c, gr, &gr->nodes[k], NULL, NULL, 0));
    return NULL;
}

teexec_status *tx_rw_from_ir(const tx_ir_model *model, tx_rw_graph **out)
{
    *out = NULL;
    if (!model || !model->graph)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_from_ir: no model");
    tx_rw_graph *g = calloc(1, sizeof *g);
    if (!g) return tx_oom();
    teexec_status *st = build(model, g);
    if (st) {
        tx_rw_free(g);
        return st;
    }
    *out = g;
    return NULL;
}
