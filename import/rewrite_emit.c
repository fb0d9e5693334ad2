/* rewrite_emit.c - tx_rw_emit: the rewrite graph as a serialized ModelProto
 * (built with format/model_write.h), live nodes in a stable topological
 * order. */
#include "import/rewrite_internal.h"

#include "format/external_data.h"
#include "format/model_write.h"
#include "format/tensor_proto.h"

#include <stdlib.h>
#include <string.h>

/* ---- a name -> index map (open addressing), private to emission --------- */

typedef struct name_map {
    const char **keys;
    int64_t *vals;
    size_t cap;
} name_map;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static teexec_status *map_init(name_map *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2 + 1) {
        if (cap > SIZE_MAX / 4) return tx_oom();
        cap *= 2;
    }
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = calloc(cap, sizeof *m->vals);
    m->cap = cap;
    if (!m->keys || !m->vals) return tx_oom();
    return NULL;
}

static void map_free(name_map *m)
{
    free(m->keys);
    free(m->vals);
}

/* Slot of key (its own or the empty one where it would go). */
static size_t map_slot(const name_map *m, const char *key)
{
    size_t i = (size_t)hash_str(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
    return i;
}

static int64_t map_get(const name_map *m, const char *key)
{
    size_t i = map_slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

static bool map_has(const name_map *m, const char *key)
{
    return m->keys[map_slot(m, key)] != NULL;
}

/* Returns false when the key was already present (value unchanged). The
 * caller sized the map for every key it inserts. */
static bool map_put(name_map *m, const char *key, int64_t val)
{
    size_t i = map_slot(m, key);
    if (m->keys[i]) return false;
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

/* ---- a min-heap of node indices: ready nodes leave in original order ---- */

static void heap_push(size_t *h, size_t *n, size_t v)
{
    size_t i = (*n)++;
    h[i] = v;
    while (i && h[(i - 1) / 2] > h[i]) {
        size_t p = (i - 1) / 2, t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

static size_t heap_pop(size_t *h, size_t *n)
{
    size_t top = h[0];
    h[0] = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l] < h[m]) m = l;
        if (r < *n && h[r] < h[m]) m = r;
        if (m == i) break;
        size_t t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
    return top;
}

/* ---- emission ---------------------------------------------------------- */

typedef struct emit_ctx {
    const tx_rw_graph *g;
    tx_mw *w;
    name_map producer;   /* value -> live node index */
    name_map available;  /* graph inputs and kept initializers */
    bool keep_external;  /* external initializers stay references */
    tx_side_data *side;  /* big initializers go here (NULL: inline) */
    const char *side_location; /* the location their references name */
    bool side_all;       /* every big initializer, not only the graph's own */
} emit_ctx;

/* Owned initializers from this size on go to the side data, when given. */
#define SIDE_MIN_BYTES ((size_t)64 << 10)

static teexec_status *emit_attr(emit_ctx *c, const tx_rw_attr *a, Onnx__AttributeProto **out)
{
    if (a->opaque) {
        *out = (Onnx__AttributeProto *)a->opaque;
        return NULL;
    }
    Onnx__AttributeProto *p = tx_mw_attr(c->w);
    if (!p || !(p->name = tx_mw_strdup(c->w, a->name))) return tx_oom();
    p->has_type = 1;
    p->type = (Onnx__AttributeProto__AttributeType)a->type;
    switch (a->type) {
    case TX_IR_ATTR_INT: p->has_i = 1; p->i = a->i; break;
    case TX_IR_ATTR_FLOAT: p->has_f = 1; p->f = a->f; break;
    case TX_IR_ATTR_STRING:
        p->has_s = 1;
        p->s.data = (uint8_t *)(a->s ? a->s : "");
        p->s.len = a->s ? strlen(a->s) : 0;
        break;
    case TX_IR_ATTR_INTS: p->n_ints = a->n_ints; p->ints = a->ints; break;
    case TX_IR_ATTR_FLOATS: p->n_floats = a->n_floats; p->floats = a->floats; break;
    case TX_IR_ATTR_STRINGS:
        p->n_strings = a->n_strings;
        p->strings = tx_mw_array(c->w, a->n_strings, sizeof *p->strings);
        if (!p->strings) return tx_oom();
        for (size_t i = 0; i < a->n_strings; i++) {
            p->strings[i].data = (uint8_t *)a->strings[i];
            p->strings[i].len = strlen(a->strings[i]);
        }
        break;
    case TX_IR_ATTR_TENSOR:
        if (a->t_owned.data) TX_TRY(tx_mw_tensor(c->w, "", &a->t_owned, &p->t));
        else p->t = (Onnx__TensorProto *)a->t_borrowed;
        if (!p->t)
            return tx_error(TEEXEC_ERR_INTERNAL, "tensor attribute \"%s\" has no value", a->name);
        break;
    default:
        return tx_error(TEEXEC_ERR_INTERNAL, "attribute \"%s\" of type %d has no source",
                        a->name, (int)a->type);
    }
    *out = p;
    return NULL;
}

static teexec_status *emit_node(emit_ctx *c, const tx_rw_node *n, Onnx__NodeProto **out)
{
    Onnx__NodeProto *p = tx_mw_node(c->w);
    if (!p) return tx_oom();
    p->name = n->name;
    p->op_type = n->op_type;
    p->domain = n->domain[0] ? n->domain : NULL;
    p->n_input = n->n_inputs;
    p->input = n->inputs;
    p->n_output = n->n_outputs;
    p->output = n->outputs;
    p->n_attribute = n->n_attrs;
    p->attribute = tx_mw_array(c->w, n->n_attrs, sizeof *p->attribute);
    if (!p->attribute) return tx_oom();
    for (size_t i = 0; i < n->n_attrs; i++) {
        teexec_status *st = emit_attr(c, &n->attrs[i], &p->attribute[i]);
        if (st) return tx_status_prefix(st, "node \"%s\" (%s)", n->name, n->op_type);
    }
    *out = p;
    return NULL;
}

static teexec_status *emit_io(emit_ctx *c, const tx_rw_io *io, Onnx__ValueInfoProto **out)
{
    if (io->src && !io->retyped) {
        *out = (Onnx__ValueInfoProto *)io->src;
        return NULL;
    }
    if (!io->has_type) {
        Onnx__ValueInfoProto *v = tx_mw_alloc(c->w, sizeof *v);
        if (!v) return tx_oom();
        onnx__value_info_proto__init(v);
        v->name = io->name;
        *out = v;
        return NULL;
    }
    return tx_mw_value_info(c->w, io->name, io->type.dtype, io->type.rank, io->type.dims,
                            io->type.dim_params, out);
}

static bool init_read(const tx_rw_graph *g, const char *name)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        const tx_rw_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (size_t s = 0; s < n->n_inputs; s++)
            if (strcmp(n->inputs[s], name) == 0) return true;
    }
    return tx_rw_is_graph_output(g, name);
}

/* Whether a proto's external data is its file's side data (a derived
 * model's, in memory only: it cannot stay a reference in another model). */
static bool in_side_data(const Onnx__TensorProto *t)
{
    if (!t->has_data_location || t->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return false;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (e && e->key && e->value && strcmp(e->key, "location") == 0)
            return strcmp(e->value, TX_SIDE_LOCATION) == 0;
    }
    return false;
}

/* The initializer as written: borrowed protos go out as they are, except
 * external data, which is read now so the bytes stand on their own. */
static teexec_status *emit_init(emit_ctx *c, const tx_rw_init *in, Onnx__TensorProto **out)
{
    if (in->borrowed && c->keep_external && c->side && in_side_data(in->borrowed)) {
        /* the source's side data goes into this model's own */
        tx_tensor t;
        TX_TRY(tx_tensor_from_proto(in->borrowed, c->g->src ? c->g->src->file : NULL, &t));
        teexec_status *st = tx_mw_tensor_side(c->w, in->name, &t, c->side, c->side_location, out);
        tx_tensor_release(&t);
        return st;
    }
    if (in->borrowed && (c->keep_external ||
                         !(in->borrowed->has_data_location &&
                           in->borrowed->data_location ==
                               ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))) {
        *out = (Onnx__TensorProto *)in->borrowed;
        return NULL;
    }
    if (in->borrowed) {
        tx_tensor t;
        TX_TRY(tx_tensor_from_proto(in->borrowed, c->g->src ? c->g->src->file : NULL, &t));
        teexec_status *st =
            c->side && c->side_all && t.nbytes >= SIDE_MIN_BYTES
                ? tx_mw_tensor_side(c->w, in->name, &t, c->side, c->side_location, out)
                : tx_mw_tensor(c->w, in->name, &t, out);
        tx_tensor_release(&t);
        return st;
    }
    if (c->side && in->owned.nbytes >= SIDE_MIN_BYTES)
        return tx_mw_tensor_side(c->w, in->name, &in->owned, c->side, c->side_location, out);
    return tx_mw_tensor(c->w, in->name, &in->owned, out);
}

/* Nodes in a topological order that keeps the current order where it can. */
static teexec_status *order_nodes(emit_ctx *c, size_t **order_out, size_t *n_order)
{
    const tx_rw_graph *g = c->g;
    size_t N = g->n_nodes;
    size_t *indeg = calloc(N ? N : 1, sizeof *indeg);
    size_t *start = calloc(N + 1, sizeof *start);
    size_t *heap = calloc(N ? N : 1, sizeof *heap);
    size_t *order = calloc(N ? N : 1, sizeof *order);
    size_t *edges = NULL;
    teexec_status *st = NULL;
    if (!indeg || !start || !heap || !order) {
        st = tx_oom();
        goto done;
    }
    /* Edges producer -> consumer, one per input slot, as CSR. */
    size_t n_edges = 0;
    for (size_t i = 0; i < N; i++) {
        const tx_rw_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (size_t s = 0; s < n->n_inputs; s++) {
            const char *in = n->inputs[s];
            if (!in[0]) continue;
            int64_t p = map_get(&c->producer, in);
            if (p >= 0) {
                start[p + 1]++;
                indeg[i]++;
                n_edges++;
            } else if (!map_has(&c->available, in)) {
                st = tx_status_new(TEEXEC_ERR_INTERNAL, NULL, n->name,
                                   "rewrite: node \"%s\" (%s) reads \"%s\", which no live node, "
                                   "graph input or initializer defines",
                                   n->name, n->op_type, in);
                goto done;
            }
        }
    }
    for (size_t i = 0; i < N; i++) start[i + 1] += start[i];
    edges = calloc(n_edges ? n_edges : 1, sizeof *edges);
    size_t *fill = calloc(N ? N : 1, sizeof *fill);
    if (!edges || !fill) {
        free(fill);
        st = tx_oom();
        goto done;
    }
    for (size_t i = 0; i < N; i++) {
        const tx_rw_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (size_t s = 0; s < n->n_inputs; s++) {
            if (!n->inputs[s][0]) continue;
            int64_t p = map_get(&c->producer, n->inputs[s]);
            if (p >= 0) edges[start[p] + fill[p]++] = i;
        }
    }
    free(fill);
    size_t hn = 0, k = 0, live = 0;
    for (size_t i = 0; i < N; i++) {
        if (g->nodes[i].dead) continue;
        live++;
        if (!indeg[i]) heap_push(heap, &hn, i);
    }
    while (hn) {
        size_t i = heap_pop(heap, &hn);
        order[k++] = i;
        for (size_t e = start[i]; e < start[i + 1]; e++)
            if (--indeg[edges[e]] == 0) heap_push(heap, &hn, edges[e]);
    }
    if (k != live) {
        for (size_t i = 0; i < N; i++) {
            if (!g->nodes[i].dead && indeg[i]) {
                st = tx_status_new(TEEXEC_ERR_INTERNAL, NULL, g->nodes[i].name,
                                   "rewrite: node \"%s\" (%s) is on a cycle", g->nodes[i].name,
                                   g->nodes[i].op_type);
                break;
            }
        }
        goto done;
    }
    *order_out = order;
    *n_order = k;
    order = NULL;
done:
    free(indeg);
    free(start);
    free(heap);
    free(order);
    free(edges);
    return st;
}

static teexec_status *emit_function(emit_ctx *c, const tx_rw_function *fn,
                                    Onnx__FunctionProto **out)
{
    Onnx__FunctionProto *f = tx_mw_function(c->w);
    if (!f) return tx_oom();
    f->name = fn->name;
    f->domain = fn->domain;
    f->n_input = fn->n_inputs;
    f->input = fn->inputs;
    f->n_output = fn->n_outputs;
    f->output = fn->outputs;
    f->n_node = fn->n_nodes;
    f->node = tx_mw_array(c->w, fn->n_nodes, sizeof *f->node);
    f->n_opset_import = 0;
    f->opset_import = tx_mw_array(c->w, c->g->n_opsets + 1, sizeof *f->opset_import);
    if (!f->node || !f->opset_import) return tx_oom();
    for (size_t i = 0; i < fn->n_nodes; i++) TX_TRY(emit_node(c, &fn->nodes[i], &f->node[i]));
    /* The model's imports, except the function's own domain: a body never
     * calls its siblings, and leaving it out keeps a re-converted model's
     * functions identical to the first conversion's. */
    for (size_t i = 0; i < c->g->n_opsets; i++) {
        if (strcmp(c->g->opsets[i].domain, fn->domain) == 0) continue;
        if (!(f->opset_import[f->n_opset_import++] =
                  tx_mw_opset(c->w, c->g->opsets[i].domain, c->g->opsets[i].version)))
            return tx_oom();
    }
    /* Bodies of outlined groups may hold te.ops nodes. */
    bool has_te = false, imported = false;
    for (size_t i = 0; i < fn->n_nodes; i++) has_te |= strcmp(fn->nodes[i].domain, "te.ops") == 0;
    for (size_t i = 0; i < c->g->n_opsets; i++) imported |= strcmp(c->g->opsets[i].domain, "te.ops") == 0;
    if (has_te && !imported) {
        if (!(f->opset_import[f->n_opset_import++] = tx_mw_opset(c->w, "te.ops", 1))) return tx_oom();
    }
    *out = f;
    return NULL;
}

static teexec_status *emit_model(emit_ctx *c, Onnx__ModelProto **out)
{
    const tx_rw_graph *g = c->g;
    const Onnx__ModelProto *sm = g->src && g->src->file ? g->src->file->model : NULL;
    const Onnx__GraphProto *sg = sm ? sm->graph : NULL;
    tx_mw *w = c->w;
    Onnx__ModelProto *m = tx_mw_model(w);
    Onnx__GraphProto *gp = tx_mw_graph(w);
    if (!m || !gp) return tx_oom();
    m->graph = gp;
    gp->name = g->graph_name;
    if (sg) gp->doc_string = sg->doc_string;

    /* Values that need no producer: graph inputs and kept initializers. */
    size_t n_values = g->n_inputs + g->n_inits;
    for (size_t i = 0; i < g->n_nodes; i++) n_values += g->nodes[i].n_outputs;
    TX_TRY(map_init(&c->producer, n_values));
    TX_TRY(map_init(&c->available, n_values));
    bool *keep = calloc(g->n_inits ? g->n_inits : 1, sizeof *keep);
    if (!keep) return tx_oom();
    for (size_t i = 0; i < g->n_inits; i++) {
        keep[i] = init_read(g, g->inits[i].name);
        if (keep[i]) map_put(&c->available, g->inits[i].name, (int64_t)i);
    }
    teexec_status *st = NULL;
    for (size_t i = 0; i < g->n_inputs; i++) map_put(&c->available, g->inputs[i].name, -2);
    if (sg)
        for (size_t i = 0; i < sg->n_sparse_initializer; i++) {
            const Onnx__SparseTensorProto *sp = sg->sparse_initializer[i];
            if (sp && sp->values && sp->values->name) map_put(&c->available, sp->values->name, -3);
        }
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        const tx_rw_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (size_t o = 0; o < n->n_outputs; o++) {
            const char *v = n->outputs[o];
            if (!v[0]) continue;
            if (map_has(&c->available, v)) {
                st = tx_status_new(TEEXEC_ERR_INTERNAL, NULL, n->name,
                                   "rewrite: node \"%s\" (%s) defines \"%s\", which is also a "
                                   "graph input or initializer",
                                   n->name, n->op_type, v);
            } else if (!map_put(&c->producer, v, (int64_t)i)) {
                st = tx_status_new(TEEXEC_ERR_INTERNAL, NULL, n->name,
                                   "rewrite: node \"%s\" (%s) defines \"%s\", which node \"%s\" "
                                   "defines too",
                                   n->name, n->op_type, v,
                                   g->nodes[map_get(&c->producer, v)].name);
            }
            if (st) break;
        }
    }
    size_t *order = NULL, n_order = 0;
    if (!st) st = order_nodes(c, &order, &n_order);
    if (!st) {
        gp->n_node = n_order;
        gp->node = tx_mw_array(w, n_order, sizeof *gp->node);
        if (!gp->node) st = tx_oom();
    }
    bool has_te = false;
    for (size_t k = 0; k < n_order && !st; k++) {
        const tx_rw_node *n = &g->nodes[order[k]];
        has_te |= strcmp(n->domain, "te.ops") == 0;
        st = emit_node(c, n, &gp->node[k]);
    }
    free(order);

    /* Initializers; a graph input that doubles as a dropped initializer goes too. */
    if (!st) {
        gp->initializer = tx_mw_array(w, g->n_inits, sizeof *gp->initializer);
        if (!gp->initializer) st = tx_oom();
    }
    for (size_t i = 0; i < g->n_inits && !st; i++)
        if (keep[i]) st = emit_init(c, &g->inits[i], &gp->initializer[gp->n_initializer++]);
    if (!st && sg) {
        gp->n_sparse_initializer = sg->n_sparse_initializer;
        gp->sparse_initializer = sg->sparse_initializer;
    }
    if (!st) {
        gp->input = tx_mw_array(w, g->n_inputs, sizeof *gp->input);
        gp->output = tx_mw_array(w, g->n_outputs, sizeof *gp->output);
        gp->value_info = tx_mw_array(w, g->n_vinfo, sizeof *gp->value_info);
        if (!gp->input || !gp->output || !gp->value_info) st = tx_oom();
    }
    for (size_t i = 0; i < g->n_inputs && !st; i++) {
        int64_t k = tx_rw_init_find(g, g->inputs[i].name);
        if (k >= 0 && !keep[k]) continue;
        st = emit_io(c, &g->inputs[i], &gp->input[gp->n_input++]);
    }
    for (size_t i = 0; i < g->n_outputs && !st; i++)
        st = emit_io(c, &g->outputs[i], &gp->output[gp->n_output++]);
    for (size_t i = 0; i < g->n_vinfo && !st; i++) {
        /* value_info of a value no live node defines any more would describe nothing. */
        if (!map_has(&c->producer, g->vinfo[i].name)) continue;
        if (tx_rw_is_graph_output(g, g->vinfo[i].name)) continue;
        st = emit_io(c, &g->vinfo[i], &gp->value_info[gp->n_value_info++]);
    }
    free(keep);
    if (st) return st;

    /* Model fields. */
    size_t n_src_funcs = sm ? sm->n_functions : 0;
    m->n_functions = 0;
    m->functions = tx_mw_array(w, n_src_funcs + g->n_funcs, sizeof *m->functions);
    m->opset_import = tx_mw_array(w, g->n_opsets + 1 + g->n_funcs, sizeof *m->opset_import);
    if (!m->functions || !m->opset_import) return tx_oom();
    for (size_t i = 0; i < n_src_funcs; i++) {
        const char *fd = tx_ir_normalize_domain(sm->functions[i]->domain);
        if (g->drop_domain && strcmp(fd, g->drop_domain) == 0) continue;
        m->functions[m->n_functions++] = sm->functions[i];
    }
    for (size_t i = 0; i < g->n_funcs; i++)
        TX_TRY(emit_function(c, &g->funcs[i], &m->functions[m->n_functions++]));
    bool te_imported = false;
    for (size_t i = 0; i < g->n_opsets; i++) {
        te_imported |= strcmp(g->opsets[i].domain, "te.ops") == 0;
        if (!(m->opset_import[m->n_opset_import++] = tx_mw_opset(w, g->opsets[i].domain,
                                                                 g->opsets[i].version)))
            return tx_oom();
    }
    if (has_te && !te_imported)
        if (!(m->opset_import[m->n_opset_import++] = tx_mw_opset(w, "te.ops", 1))) return tx_oom();
    /* Calls of outlined functions name their domain; import it so checkers
     * that insist on it (onnx.checker) accept the model. */
    for (size_t f = 0; f < g->n_funcs; f++) {
        bool seen = false;
        for (size_t i = 0; i < m->n_opset_import; i++)
            seen |= strcmp(m->opset_import[i]->domain, g->funcs[f].domain) == 0;
        if (!seen && !(m->opset_import[m->n_opset_import++] = tx_mw_opset(w, g->funcs[f].domain, 1)))
            return tx_oom();
    }
    m->has_ir_version = 1;
    m->ir_version = g->src ? g->src->ir_version : 8;
    if (m->n_functions && m->ir_version < 8) m->ir_version = 8; /* functions need IR 8 */
    if (sm) {
        m->producer_name = sm->producer_name;
        m->producer_version = sm->producer_version;
        m->domain = sm->domain;
        m->has_model_version = sm->has_model_version;
        m->model_version = sm->model_version;
        m->doc_string = sm->doc_string;
        m->n_metadata_props = sm->n_metadata_props;
        m->metadata_props = sm->metadata_props;
    }
    *out = m;
    return NULL;
}

static teexec_status *emit(const tx_rw_graph *g, bool keep_external, tx_side_data *side,
                           const char *side_location, bool side_all, uint8_t **bytes,
                           size_t *len)
{
    *bytes = NULL;
    *len = 0;
    emit_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.keep_external = keep_external;
    c.side = side;
    c.side_location = side_location;
    c.side_all = side_all;
    TX_TRY(tx_mw_create(&c.w));
    Onnx__ModelProto *m = NULL;
    teexec_status *st = emit_model(&c, &m);
    if (!st) st = tx_mw_pack(m, bytes, len);
    map_free(&c.producer);
    map_free(&c.available);
    tx_mw_free(c.w);
    return st;
}

teexec_status *tx_rw_emit(const tx_rw_graph *g, uint8_t **bytes, size_t *len)
{
    return emit(g, false, NULL, NULL, false, bytes, len);
}

teexec_status *tx_rw_emit_keep_external(const tx_rw_graph *g, tx_side_data *side,
                                        uint8_t **bytes, size_t *len)
{
    teexec_status *st = emit(g, true, side, TX_SIDE_LOCATION, false, bytes, len);
    if (st && side) tx_side_free(side);
    return st;
}

teexec_status *tx_rw_emit_external_data(const tx_rw_graph *g, const char *location,
                                        tx_side_data *data, uint8_t **bytes, size_t *len)
{
    teexec_status *st = tx_external_check_location(location);
    if (!st) st = emit(g, false, data, location, true, bytes, len);
    if (st) tx_side_free(data);
    return st;
}
