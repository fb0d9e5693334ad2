/*
 * rewrite_view.c - IR-node views of a rewrite graph (rewrite_view.h): a
 * name index over the graph's values, a topological order of its live
 * nodes, each node converted to a tx_ir_node that borrows the graph's
 * strings, and the typing seeds.
 */
#include "import/rewrite_view.h"

#include "base/dtype.h"
#include "format/tensor_proto.h"
#include "import/rewrite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tx_rw_view_storage {
    int32_t *slots; /* name index: open addressing, -1 = empty */
    size_t cap;
    tx_ir_attr *attrs;      /* every node's attributes, node by node */
    int32_t *ports;         /* every node's input and output ids */
    size_t **string_lens;   /* per STRINGS attribute */
    size_t n_string_lens;
    char **labels;          /* "#k" labels of unnamed nodes */
    size_t n_labels;
    Onnx__TensorProto **protos; /* attributes a pass set (owned tensors) */
    size_t n_protos;
    tx_infer_value *hints;  /* declared static types, per value */
    bool *has_hint;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int32_t tx_rw_view_find(const tx_rw_view *v, const char *name)
{
    if (!v || !name || !name[0] || !v->st->cap) return -1;
    size_t mask = v->st->cap - 1;
    for (size_t i = (size_t)hash_str(name) & mask;; i = (i + 1) & mask) {
        int32_t id = v->st->slots[i];
        if (id < 0) return -1;
        if (strcmp(v->names[id], name) == 0) return id;
    }
}

/* Adds `name` (borrowed) unless known; its id in *id. */
static teexec_status *intern(tx_rw_view *v, size_t cap_values, const char *name, int32_t *id)
{
    *id = -1;
    if (!name || !name[0]) return NULL;
    size_t mask = v->st->cap - 1;
    size_t i = (size_t)hash_str(name) & mask;
    for (;; i = (i + 1) & mask) {
        int32_t k = v->st->slots[i];
        if (k < 0) break;
        if (strcmp(v->names[k], name) == 0) {
            *id = k;
            return NULL;
        }
    }
    if (v->n_values >= cap_values || v->n_values >= INT32_MAX)
        return tx_error(TEEXEC_ERR_INTERNAL, "rewrite view: more names than counted");
    *id = (int32_t)v->n_values;
    v->names[v->n_values++] = name;
    v->st->slots[i] = *id;
    return NULL;
}

void tx_rw_view_free(tx_rw_view *v)
{
    if (!v) return;
    tx_rw_view_storage *s = v->st;
    if (v->vals)
        for (size_t i = 0; i < v->n_values; i++) tx_infer_value_clear(&v->vals[i]);
    free(v->vals);
    free(v->names);
    free(v->nodes);
    free(v->rw_node);
    if (s) {
        free(s->slots);
        free(s->attrs);
        free(s->ports);
        for (size_t i = 0; i < s->n_string_lens; i++) free(s->string_lens[i]);
        free(s->string_lens);
        for (size_t i = 0; i < s->n_labels; i++) free(s->labels[i]);
        free(s->labels);
        for (size_t i = 0; i < s->n_protos; i++) tx_tensor_proto_free(s->protos[i]);
        free(s->protos);
        free(s->hints);
        free(s->has_hint);
        free(s);
    }
    free(v);
}

static int64_t opset_of(const tx_rw_graph *g, const char *domain)
{
    const char *d = tx_ir_normalize_domain(domain);
    for (size_t i = 0; i < g->n_opsets; i++)
        if (strcmp(tx_ir_normalize_domain(g->opsets[i].domain), d) == 0) return g->opsets[i].version;
    return -1;
}

/* Converts one attribute; strings and arrays are borrowed. */
static teexec_status *convert_attr(tx_rw_view *v, const tx_rw_attr *a, tx_ir_attr *o)
{
    tx_rw_view_storage *s = v->st;
    memset(o, 0, sizeof *o);
    o->name = a->name;
    o->type = a->type;
    switch (a->type) {
    case TX_IR_ATTR_INT: o->i = a->i; break;
    case TX_IR_ATTR_FLOAT: o->f = a->f; break;
    case TX_IR_ATTR_STRING:
        o->s = a->s;
        o->s_len = a->s ? strlen(a->s) : 0;
        break;
    case TX_IR_ATTR_INTS: o->ints = a->ints; o->n_ints = a->n_ints; break;
    case TX_IR_ATTR_FLOATS: o->floats = a->floats; o->n_floats = a->n_floats; break;
    case TX_IR_ATTR_STRINGS: {
        o->strings = a->strings;
        o->n_strings = a->n_strings;
        size_t *lens = calloc(a->n_strings ? a->n_strings : 1, sizeof *lens);
        if (!lens) return tx_oom();
        for (size_t i = 0; i < a->n_strings; i++) lens[i] = strlen(a->strings[i]);
        s->string_lens[s->n_string_lens++] = lens;
        o->string_lens = lens;
        break;
    }
    case TX_IR_ATTR_TENSOR:
        if (a->t_borrowed) {
            o->t = a->t_borrowed;
        } else if (a->t_owned.data) {
            /* a pass's own tensor: encoded so IR readers see a TensorProto */
            uint8_t *bytes = NULL;
            size_t len = 0;
            TX_TRY(tx_tensor_to_proto_bytes(&a->t_owned, NULL, &bytes, &len));
            Onnx__TensorProto *tp = NULL;
            teexec_status *st = tx_tensor_proto_parse(bytes, len, NULL, &tp);
            free(bytes);
            TX_TRY(st);
            s->protos[s->n_protos++] = tp;
            o->t = tp;
        }
        break;
    default:
        /* GRAPH and the rest travel opaque: the type alone, no contents,
         * so a rule needing them fails (leniently) instead of misreading */
        break;
    }
    return NULL;
}

/* Node k of the view from rw node `ri`; ports[] holds its input then
 * output ids. */
static teexec_status *convert_node(tx_rw_view *v, size_t k, size_t ri, int32_t *ports,
                                   tx_ir_attr *attrs)
{
    const tx_rw_node *rn = &v->g->nodes[ri];
    tx_ir_node *n = &v->nodes[k];
    memset(n, 0, sizeof *n);
    n->name = rn->name ? rn->name : "";
    n->op_type = rn->op_type;
    n->domain = (char *)tx_ir_normalize_domain(rn->domain);
    n->overload = "";
    n->opset = opset_of(v->g, rn->domain);
    n->index = (int32_t)k;
    n->function = -1;
    n->inputs = ports;
    n->n_inputs = rn->n_inputs;
    n->outputs = ports + rn->n_inputs;
    n->n_outputs = rn->n_outputs;
    n->attrs = attrs;
    n->n_attrs = rn->n_attrs;
    if (n->name[0]) {
        n->label = n->name;
    } else {
        char *lab = malloc(32);
        if (!lab) return tx_oom();
        snprintf(lab, 32, "#%zu", ri);
        v->st->labels[v->st->n_labels++] = lab;
        n->label = lab;
    }
    for (size_t a = 0; a < rn->n_attrs; a++) TX_TRY(convert_attr(v, &rn->attrs[a], &attrs[a]));
    return NULL;
}

/* Allocates the view and its storage for the given counts. */
static teexec_status *view_alloc(tx_rw_graph *g, size_t names, size_t nodes, size_t ports,
                                 size_t attrs, tx_rw_view **out)
{
    *out = NULL;
    tx_rw_view *v = calloc(1, sizeof *v);
    if (!v) return tx_oom();
    v->st = calloc(1, sizeof *v->st);
    v->g = g;
    v->file = g->src ? g->src->file : NULL;
    size_t cap = 16;
    while (cap < names * 2) cap *= 2;
    if (v->st) {
        v->st->cap = cap;
        v->st->slots = malloc(cap * sizeof *v->st->slots);
        v->st->attrs = calloc(attrs ? attrs : 1, sizeof *v->st->attrs);
        v->st->ports = calloc(ports ? ports : 1, sizeof *v->st->ports);
        v->st->string_lens = calloc(attrs ? attrs : 1, sizeof *v->st->string_lens);
        v->st->labels = calloc(nodes ? nodes : 1, sizeof *v->st->labels);
        v->st->protos = calloc(attrs ? attrs : 1, sizeof *v->st->protos);
    }
    v->names = calloc(names ? names : 1, sizeof *v->names);
    v->vals = calloc(names ? names : 1, sizeof *v->vals);
    v->nodes = calloc(nodes ? nodes : 1, sizeof *v->nodes);
    v->rw_node = calloc(nodes ? nodes : 1, sizeof *v->rw_node);
    if (!v->st || !v->st->slots || !v->st->attrs || !v->st->ports || !v->st->string_lens ||
        !v->st->labels || !v->st->protos || !v->names || !v->vals || !v->nodes || !v->rw_node) {
        tx_rw_view_free(v);
        return tx_oom();
    }
    for (size_t i = 0; i < cap; i++) v->st->slots[i] = -1;
    *out = v;
    return NULL;
}

static bool small_enough(teexec_dtype dt, uint64_t numel)
{
    bool integral = (tx_dtype_is_integer(dt) || dt == TEEXEC_DTYPE_BOOL) && !tx_dtype_is_subbyte(dt);
    return numel <= TX_INFER_DECODE_ANY_MAX || (integral && numel <= TX_INFER_DECODE_INT_MAX);
}

static void type_from(const tx_rw_value_type *t, tx_infer_value *iv)
{
    iv->dtype = t->dtype;
    if (t->rank < 0 || t->rank > TX_MAX_RANK) return;
    for (int32_t d = 0; d < t->rank; d++)
        if (t->dims[d] < 0) return;
    iv->shape.rank = t->rank;
    memcpy(iv->shape.dims, t->dims, (size_t)t->rank * sizeof *t->dims);
    iv->shape_known = true;
}

/* Graph inputs and initializers. */
static teexec_status *seed(tx_rw_view *v)
{
    tx_rw_graph *g = v->g;
    for (size_t i = 0; i < g->n_inputs; i++) {
        int32_t id = tx_rw_view_find(v, g->inputs[i].name);
        if (id < 0) continue;
        if (g->inputs[i].has_type) type_from(&g->inputs[i].type, &v->vals[id]);
        tx_rw_value_type t;
        /* an input that is also an initializer is typed by it */
        if (tx_rw_init_find(g, g->inputs[i].name) >= 0 &&
            tx_rw_value_type_of(g, g->inputs[i].name, &t))
            type_from(&t, &v->vals[id]);
    }
    for (size_t i = 0; i < g->n_inits; i++) {
        const tx_rw_init *in = &g->inits[i];
        int32_t id = tx_rw_view_find(v, in->name);
        if (id < 0 || tx_rw_is_graph_input(g, in->name)) continue;
        tx_infer_value *iv = &v->vals[id];
        tx_rw_value_type t;
        if (!tx_rw_value_type_of(g, in->name, &t)) continue;
        type_from(&t, iv);
        if (!iv->shape_known) continue;
        uint64_t numel = 1;
        for (int32_t d = 0; d < iv->shape.rank; d++) numel *= (uint64_t)iv->shape.dims[d];
        if (!small_enough(iv->dtype, numel)) continue;
        if (!in->borrowed) {
            iv->value = &in->owned; /* borrowed until the graph's next edit */
            continue;
        }
        teexec_status *st = tx_tensor_from_proto(in->borrowed, v->file, &iv->owned);
        if (st) {
            /* a payload that does not decode: typed, not valued (the
             * loader reports it when the model is run) */
            if (teexec_status_code(st) == TEEXEC_ERR_NO_MEMORY) return st;
            teexec_status_destroy(st);
            continue;
        }
        iv->value = &iv->owned;
    }
    /* declared static types of intermediates and outputs, as hints */
    v->st->hints = calloc(v->n_values ? v->n_values : 1, sizeof *v->st->hints);
    v->st->has_hint = calloc(v->n_values ? v->n_values : 1, sizeof *v->st->has_hint);
    if (!v->st->hints || !v->st->has_hint) return tx_oom();
    const tx_rw_io *lists[2] = {g->vinfo, g->outputs};
    size_t counts[2] = {g->n_vinfo, g->n_outputs};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < counts[l]; i++) {
            const tx_rw_io *io = &lists[l][i];
            int32_t id = tx_rw_view_find(v, io->name);
            if (id < 0 || !io->has_type) continue;
            tx_infer_value h = {0};
            type_from(&io->type, &h);
            if (!h.shape_known) continue;
            v->st->hints[id] = h;
            v->st->has_hint[id] = true;
        }
    return NULL;
}

/* A small binary min-heap of node indices (graph order among the ready). */
static void heap_push(size_t *h, size_t *n, size_t x)
{
    size_t i = (*n)++;
    h[i] = x;
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

teexec_status *tx_rw_view_build(tx_rw_graph *g, tx_rw_view **out)
{
    *out = NULL;
    size_t names = g->n_inputs + g->n_inits, live = 0, ports = 0, attrs = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const tx_rw_node *n = &g->nodes[i];
        if (n->dead) continue;
        live++;
        names += n->n_inputs + n->n_outputs;
        ports += n->n_inputs + n->n_outputs;
        attrs += n->n_attrs;
    }
    tx_rw_view *v;
    TX_TRY(view_alloc(g, names, live, ports, attrs, &v));
    teexec_status *st = NULL;
    int32_t id;
    for (size_t i = 0; i < g->n_inputs && !st; i++) st = intern(v, names, g->inputs[i].name, &id);
    for (size_t i = 0; i < g->n_inits && !st; i++) st = intern(v, names, g->inits[i].name, &id);
    /* producers first, so a value's producer is known for the order */
    int32_t *producer = NULL;
    size_t *indeg = NULL, *heap = NULL, *start = NULL, *edges = NULL, *fill = NULL, *ports_at = NULL;
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        const tx_rw_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (size_t o = 0; o < n->n_outputs && !st; o++) st = intern(v, names, n->outputs[o], &id);
    }
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        const tx_rw_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (size_t k = 0; k < n->n_inputs && !st; k++) st = intern(v, names, n->inputs[k], &id);
    }
    size_t N = g->n_nodes;
    if (!st) {
        producer = malloc((v->n_values ? v->n_values : 1) * sizeof *producer);
        indeg = calloc(N ? N : 1, sizeof *indeg);
        heap = calloc(N ? N : 1, sizeof *heap);
        start = calloc(N + 1, sizeof *start);
        fill = calloc(N ? N : 1, sizeof *fill);
        ports_at = calloc(N ? N : 1, sizeof *ports_at);
        if (!producer || !indeg || !heap || !start || !fill || !ports_at) st = tx_oom();
    }
    if (!st) {
        for (size_t i = 0; i < v->n_values; i++) producer[i] = -1;
        for (size_t i = 0; i < N; i++) {
            const tx_rw_node *n = &g->nodes[i];
            if (n->dead) continue;
            for (size_t o = 0; o < n->n_outputs; o++) {
                int32_t vid = tx_rw_view_find(v, n->outputs[o]);
                if (vid >= 0 && producer[vid] < 0) producer[vid] = (int32_t)i;
            }
        }
        /* a name neither an input, an initializer nor any node's output:
         * its readers wait forever (left out of the order) */
        bool *defined = calloc(v->n_values ? v->n_values : 1, sizeof *defined);
        if (!defined) st = tx_oom();
        for (size_t i = 0; !st && i < g->n_inputs; i++) {
            int32_t vid = tx_rw_view_find(v, g->inputs[i].name);
            if (vid >= 0) defined[vid] = true;
        }
        for (size_t i = 0; !st && i < g->n_inits; i++) {
            int32_t vid = tx_rw_view_find(v, g->inits[i].name);
            if (vid >= 0) defined[vid] = true;
        }
        size_t n_edges = 0;
        for (size_t i = 0; !st && i < N; i++) {
            const tx_rw_node *n = &g->nodes[i];
            if (n->dead) continue;
            for (size_t k = 0; k < n->n_inputs; k++) {
                int32_t vid = tx_rw_view_find(v, n->inputs[k]);
                if (vid < 0) continue;
                if (producer[vid] >= 0) {
                    start[producer[vid] + 1]++;
                    indeg[i]++;
                    n_edges++;
                } else if (!defined[vid]) {
                    indeg[i]++; /* never satisfied */
                }
            }
        }
        free(defined);
        if (!st) {
            for (size_t i = 0; i < N; i++) start[i + 1] += start[i];
            edges = calloc(n_edges ? n_edges : 1, sizeof *edges);
            if (!edges) st = tx_oom();
        }
        for (size_t i = 0; !st && i < N; i++) {
            const tx_rw_node *n = &g->nodes[i];
            if (n->dead) continue;
            for (size_t k = 0; k < n->n_inputs; k++) {
                int32_t vid = tx_rw_view_find(v, n->inputs[k]);
                if (vid >= 0 && producer[vid] >= 0)
                    edges[start[producer[vid]] + fill[producer[vid]]++] = i;
            }
        }
    }
    if (!st) {
        size_t hn = 0, k = 0, pcount = 0, acount = 0;
        for (size_t i = 0; i < N; i++)
            if (!g->nodes[i].dead && !indeg[i]) heap_push(heap, &hn, i);
        while (hn && !st) {
            size_t i = heap_pop(heap, &hn);
            const tx_rw_node *rn = &g->nodes[i];
            int32_t *p = v->st->ports + pcount;
            for (size_t s = 0; s < rn->n_inputs; s++) p[s] = tx_rw_view_find(v, rn->inputs[s]);
            for (size_t s = 0; s < rn->n_outputs; s++) {
                int32_t vid = tx_rw_view_find(v, rn->outputs[s]);
                /* a second definition of a name is not this node's to write */
                p[rn->n_inputs + s] = vid >= 0 && producer[vid] == (int32_t)i ? vid : -1;
            }
            pcount += rn->n_inputs + rn->n_outputs;
            v->rw_node[k] = i;
            st = convert_node(v, k, i, p, v->st->attrs + acount);
            acount += rn->n_attrs;
            k++;
            for (size_t e = start[i]; e < start[i + 1]; e++)
                if (--indeg[edges[e]] == 0) heap_push(heap, &hn, edges[e]);
        }
        v->n_nodes = k;
        v->n_unordered = live - k;
    }
    (void)ports_at;
    free(producer);
    free(indeg);
    free(heap);
    free(start);
    free(edges);
    free(fill);
    free(ports_at);
    if (!st) st = seed(v);
    if (st) {
        tx_rw_view_free(v);
        return st;
    }
    *out = v;
    return NULL;
}

teexec_status *tx_rw_view_infer(tx_rw_view *v, uint64_t value_elements)
{
    tx_infer_options o = {true, value_elements};
    for (size_t k = 0; k < v->n_nodes; k++) {
        const tx_ir_node *n = &v->nodes[k];
        TX_TRY(tx_infer_step(n, v->file, &o, v->vals));
        for (size_t j = 0; j < n->n_outputs; j++) {
            int32_t id = n->outputs[j];
            if (id < 0 || v->vals[id].shape_known || !v->st->has_hint[id]) continue;
            const tx_infer_value *h = &v->st->hints[id];
            if (v->vals[id].dtype == TEEXEC_DTYPE_UNDEFINED) v->vals[id].dtype = h->dtype;
            v->vals[id].shape = h->shape;
            v->vals[id].shape_known = true;
        }
    }
    return NULL;
}

teexec_status *tx_rw_view_node(tx_rw_graph *g, size_t node, tx_rw_view **out)
{
    *out = NULL;
    if (node >= g->n_nodes || g->nodes[node].dead)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "rewrite view: no live node %zu", node);
    const tx_rw_node *rn = &g->nodes[node];
    size_t np = rn->n_inputs + rn->n_outputs;
    tx_rw_view *v;
    TX_TRY(view_alloc(g, np, 1, np, rn->n_attrs, &v));
    int32_t *p = v->st->ports;
    for (size_t s = 0; s < rn->n_inputs; s++) {
        v->names[s] = rn->inputs[s];
        p[s] = rn->inputs[s][0] ? (int32_t)s : -1;
    }
    for (size_t s = 0; s < rn->n_outputs; s++) {
        v->names[rn->n_inputs + s] = rn->outputs[s];
        p[rn->n_inputs + s] = rn->outputs[s][0] ? (int32_t)(rn->n_inputs + s) : -1;
    }
    v->n_values = np;
    v->rw_node[0] = node;
    v->n_nodes = 1;
    teexec_status *st = convert_node(v, 0, node, p, v->st->attrs);
    if (!st) {
        v->st->hints = calloc(np ? np : 1, sizeof *v->st->hints);
        v->st->has_hint = calloc(np ? np : 1, sizeof *v->st->has_hint);
        if (!v->st->hints || !v->st->has_hint) st = tx_oom();
    }
    if (st) {
        tx_rw_view_free(v);
        return st;
    }
    *out = v;
    return NULL;
}
