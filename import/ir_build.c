/*
 * ir_build.c - ONNX ModelProto -> teexec IR (see ir.h).
 *
 * Each graph is built in passes so that every name is known before it is
 * looked up: (1) graph inputs, initializers and sparse initializers,
 * (2) every node's outputs, (3) every node's inputs, attributes and nested
 * graphs, (4) graph outputs and value_info types, (5) consumer lists.
 * Registering all definitions first lets validation tell "defined later"
 * (an ordering error or a cycle) from "defined nowhere".
 *
 * The only errors raised here are those the IR cannot represent (a name
 * defined twice, a graph input listed twice, a missing graph, counts past
 * int32); everything else is tx_ir_validate's job.
 */
#include "import/ir_internal.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "base/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deepest TypeProto nesting (sequence of optional of ...) followed; the
 * loader's nesting budget normally stops far earlier. */
#define TX_IR_MAX_TYPE_DEPTH 64

typedef struct builder {
    const tx_onnx_file *file;
    tx_ir_model *model;
} builder;

/* ---- small helpers */

static char *dup_str(const char *s)
{
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *dup_bytes(const uint8_t *p, size_t n)
{
    size_t sz;
    if (!tx_add_size(n, 1, &sz)) return NULL;
    char *d = malloc(sz);
    if (!d) return NULL;
    if (n) memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

/* calloc of n elements that also succeeds (non-NULL) for n == 0. */
static void *alloc_array(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

static teexec_status *check_count(size_t n, const char *what)
{
    if (n > (size_t)INT32_MAX - 1)
        return tx_error(TEEXEC_ERR_LIMIT, "too many %s (%zu)", what, n);
    return NULL;
}

/* Reads a length-delimited unknown field `tag` of a message (a field newer
 * than the system's onnx.proto, e.g. NodeProto.overload) as a string.
 * protobuf-c keeps the field's bytes after the tag, length prefix included.
 * Returns NULL (no error) when the field is absent or malformed. */
static char *unknown_string_field(const ProtobufCMessage *msg, uint32_t tag)
{
    for (unsigned i = 0; i < msg->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *u = &msg->unknown_fields[i];
        if (u->tag != tag || u->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) continue;
        uint64_t len = 0;
        size_t at = 0;
        unsigned shift = 0;
        for (;;) {
            if (at >= u->len || shift > 63) return NULL;
            uint8_t b = u->data[at++];
            len |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
            shift += 7;
        }
        if (len > u->len - at) return NULL;
        return dup_bytes(u->data + at, (size_t)len);
    }
    return NULL;
}

/* ---- values */

static teexec_status *value_new(tx_ir_graph *g, const char *name, int32_t *out)
{
    TX_TRY(check_count(g->n_values + 1, "values in one graph"));
    if (g->n_values == g->values_cap) {
        size_t ncap = g->values_cap ? g->values_cap * 2 : 16;
        size_t bytes;
        if (!tx_mul_size(ncap, sizeof(tx_ir_value), &bytes)) return tx_oom();
        tx_ir_value *nv = realloc(g->values, bytes);
        if (!nv) return tx_oom();
        g->values = nv;
        g->values_cap = ncap;
    }
    tx_ir_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->kind = TX_IR_KIND_UNKNOWN;
    v->dtype = TEEXEC_DTYPE_UNDEFINED;
    v->rank = -1;
    v->producer = -1;
    v->producer_slot = -1;
    v->outer = -1;
    v->name = dup_str(name);
    if (!v->name) return tx_oom();
    int32_t idx = (int32_t)g->n_values;
    g->n_values++;
    TX_TRY(tx_ir_index_add(g, idx));
    *out = idx;
    return NULL;
}

static teexec_dtype dtype_of(int32_t t)
{
    return tx_dtype_valid(t) ? (teexec_dtype)t : TEEXEC_DTYPE_UNDEFINED;
}

static teexec_status *rank_check(size_t n, const char *name)
{
    if (n > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_LIMIT, "\"%s\" has rank %zu, more than the maximum %d",
                        name, n, TX_MAX_RANK);
    return NULL;
}

static teexec_status *shape_from_proto(const Onnx__TensorShapeProto *sp, tx_ir_value *v)
{
    if (!sp) {
        v->rank = -1;
        return NULL;
    }
    TX_TRY(rank_check(sp->n_dim, v->name));
    v->rank = (int32_t)sp->n_dim;
    if (sp->n_dim == 0) return NULL;
    v->dims = calloc(sp->n_dim, sizeof *v->dims);
    v->dim_params = calloc(sp->n_dim, sizeof *v->dim_params);
    if (!v->dims || !v->dim_params) return tx_oom();
    for (size_t d = 0; d < sp->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = sp->dim[d];
        v->dims[d] = -1;
        if (!dim) continue;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            /* A negative extent carries no information: treat as unknown. */
            if (dim->dim_value >= 0) v->dims[d] = dim->dim_value;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   dim->dim_param && dim->dim_param[0]) {
            v->dim_params[d] = dup_str(dim->dim_param);
            if (!v->dim_params[d]) return tx_oom();
        }
    }
    return NULL;
}

/* Fills kind/dtype/shape from a TypeProto. For sequence/optional/map the
 * dtype and shape are those of the innermost tensor. */
static teexec_status *type_from_proto(const Onnx__TypeProto *tp, tx_ir_value *v, int top,
                                      int depth)
{
    if (!tp) return NULL;
    if (depth > TX_IR_MAX_TYPE_DEPTH)
        return tx_error(TEEXEC_ERR_LIMIT, "the type of \"%s\" nests deeper than %d", v->name,
                        TX_IR_MAX_TYPE_DEPTH);
    tx_ir_kind kind;
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        kind = TX_IR_KIND_TENSOR;
        if (tp->tensor_type) {
            v->dtype = tp->tensor_type->has_elem_type ? dtype_of(tp->tensor_type->elem_type)
                                                      : TEEXEC_DTYPE_UNDEFINED;
            TX_TRY(shape_from_proto(tp->tensor_type->shape, v));
        }
        break;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        kind = TX_IR_KIND_SPARSE_TENSOR;
        if (tp->sparse_tensor_type) {
            v->dtype = tp->sparse_tensor_type->has_elem_type
                           ? dtype_of(tp->sparse_tensor_type->elem_type)
                           : TEEXEC_DTYPE_UNDEFINED;
            TX_TRY(shape_from_proto(tp->sparse_tensor_type->shape, v));
        }
        break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        kind = TX_IR_KIND_SEQUENCE;
        if (tp->sequence_type)
            TX_TRY(type_from_proto(tp->sequence_type->elem_type, v, 0, depth + 1));
        break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        kind = TX_IR_KIND_OPTIONAL;
        if (tp->optional_type)
            TX_TRY(type_from_proto(tp->optional_type->elem_type, v, 0, depth + 1));
        break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        kind = TX_IR_KIND_MAP;
        if (tp->map_type) TX_TRY(type_from_proto(tp->map_type->value_type, v, 0, depth + 1));
        break;
    default:
        kind = TX_IR_KIND_OTHER;
        break;
    }
    if (top) v->kind = kind;
    return NULL;
}

static teexec_status *type_from_tensor(const Onnx__TensorProto *tp, const int64_t *dims,
                                       size_t n_dims, tx_ir_value *v, tx_ir_kind kind)
{
    v->kind = kind;
    v->dtype = (tp && tp->has_data_type) ? dtype_of(tp->data_type) : TEEXEC_DTYPE_UNDEFINED;
    TX_TRY(rank_check(n_dims, v->name));
    v->rank = (int32_t)n_dims;
    if (n_dims == 0) return NULL;
    v->dims = calloc(n_dims, sizeof *v->dims);
    v->dim_params = calloc(n_dims, sizeof *v->dim_params);
    if (!v->dims || !v->dim_params) return tx_oom();
    for (size_t d = 0; d < n_dims; d++) {
        if (dims[d] < 0)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "initializer \"%s\" has a negative dim (%lld)",
                            v->name, (long long)dims[d]);
        v->dims[d] = dims[d];
    }
    return NULL;
}

/* Names who defines value v, for "already defined by ..." messages. */
static void describe_definer(const tx_ir_graph *g, int32_t v, char *buf, size_t size)
{
    const tx_ir_value *val = &g->values[v];
    if (val->producer >= 0)
        snprintf(buf, size, "node \"%s\" (%s)", g->nodes[val->producer].label,
                 g->nodes[val->producer].op_type);
    else if (val->flags & (TX_IR_VALUE_INITIALIZER | TX_IR_VALUE_SPARSE_INIT))
        snprintf(buf, size, "an initializer");
    else if (val->flags & TX_IR_VALUE_GRAPH_INPUT)
        snprintf(buf, size, "a graph input");
    else
        snprintf(buf, size, "another definition");
}

/* ---- graphs */

static teexec_status *build_graph(builder *b, const Onnx__GraphProto *gp, tx_ir_graph *parent,
                                  int32_t parent_node, const tx_ir_opset *opsets,
                                  size_t n_opsets, int32_t function, tx_ir_graph **out);

typedef struct graph_ctx {
    builder *b;
    tx_ir_graph *g;
} graph_ctx;

static tx_ir_graph *graph_new(tx_ir_graph *parent, int32_t parent_node,
                              const tx_ir_opset *opsets, size_t n_opsets, int32_t function)
{
    tx_ir_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->parent = parent;
    g->parent_node = parent_node;
    g->opsets = opsets;
    g->n_opsets = n_opsets;
    g->function = function;
    return g;
}

/* Finds `name` in g or, through OUTER entries created on the way, in an
 * enclosing graph. Returns the index in g, or -1 when defined nowhere. */
static teexec_status *resolve_in_scope(graph_ctx *c, const char *name, int32_t *out)
{
    tx_ir_graph *g = c->g;
    int32_t v = tx_ir_graph_find_value(g, name);
    if (v >= 0 && !(g->values[v].flags & TX_IR_VALUE_UNDEFINED)) {
        *out = v;
        return NULL;
    }
    *out = -1;
    if (v >= 0 || !g->parent) return NULL;
    /* Walk up: the parent is still under construction, but all its
     * definitions were registered before its nested graphs were built. */
    tx_ir_graph *p = g->parent;
    int32_t pv = tx_ir_graph_find_value(p, name);
    if (pv < 0 || (p->values[pv].flags & TX_IR_VALUE_UNDEFINED)) {
        if (pv >= 0 || !p->parent) return NULL;
        /* Not in the parent: ask further up, creating the OUTER entry in
         * the parent first. */
        graph_ctx pc = {c->b, p};
        TX_TRY(resolve_in_scope(&pc, name, &pv));
        if (pv < 0) return NULL;
    }
    int32_t nv;
    TX_TRY(value_new(g, name, &nv));
    tx_ir_value *val = &g->values[nv];
    val->flags = TX_IR_VALUE_OUTER;
    val->outer = pv;
    const tx_ir_value *def = tx_ir_value_resolve(p, pv, NULL);
    /* Carry the type so users of the subgraph need not walk up. */
    val->kind = def->kind;
    val->dtype = def->dtype;
    if (def->rank > 0) {
        val->dims = calloc((size_t)def->rank, sizeof *val->dims);
        val->dim_params = calloc((size_t)def->rank, sizeof *val->dim_params);
        if (!val->dims || !val->dim_params) return tx_oom();
        val->rank = def->rank;
        for (int32_t d = 0; d < def->rank; d++) {
            val->dims[d] = def->dims[d];
            if (def->dim_params[d]) {
                val->dim_params[d] = dup_str(def->dim_params[d]);
                if (!val->dim_params[d]) return tx_oom();
            }
        }
    } else {
        val->rank = def->rank;
    }
    *out = nv;
    return NULL;
}

/* A name read but defined nowhere gets an UNDEFINED entry, so the node
 * still refers to something and validation can name it. */
static teexec_status *resolve_or_undefined(graph_ctx *c, const char *name, int32_t *out)
{
    TX_TRY(resolve_in_scope(c, name, out));
    if (*out >= 0) return NULL;
    int32_t v = tx_ir_graph_find_value(c->g, name);
    if (v >= 0) {
        *out = v;
        return NULL;
    }
    TX_TRY(value_new(c->g, name, out));
    c->g->values[*out].flags = TX_IR_VALUE_UNDEFINED;
    return NULL;
}

static teexec_status *add_graph_inputs(graph_ctx *c, const Onnx__GraphProto *gp)
{
    tx_ir_graph *g = c->g;
    TX_TRY(check_count(gp->n_input, "graph inputs"));
    g->inputs = alloc_array(gp->n_input, sizeof *g->inputs);
    if (!g->inputs) return tx_oom();
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = vi && vi->name ? vi->name : "";
        if (!name[0])
            return tx_error(TEEXEC_ERR_BAD_MODEL, "graph input #%zu has no name", i);
        if (tx_ir_graph_find_value(g, name) >= 0)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "graph input \"%s\" is listed twice", name);
        int32_t v;
        TX_TRY(value_new(g, name, &v));
        g->values[v].flags = TX_IR_VALUE_GRAPH_INPUT;
        TX_TRY(type_from_proto(vi->type, &g->values[v], 1, 0));
        g->inputs[g->n_inputs++] = v;
    }
    return NULL;
}

/* A dense (tp) or sparse (sp) initializer. An initializer may also be a
 * graph input (a parameter with a default); anything else named the same
 * is a second definition. */
static teexec_status *add_initializer(graph_ctx *c, const Onnx__TensorProto *tp,
                                      const Onnx__SparseTensorProto *sp, size_t i)
{
    tx_ir_graph *g = c->g;
    const Onnx__TensorProto *named = sp ? sp->values : tp;
    const char *name = named && named->name ? named->name : "";
    if (!name[0])
        return tx_error(TEEXEC_ERR_BAD_MODEL, "%sinitializer #%zu has no name",
                        sp ? "sparse " : "", i);
    int32_t v = tx_ir_graph_find_value(g, name);
    if (v >= 0) {
        tx_ir_value *val = &g->values[v];
        if (val->flags & (TX_IR_VALUE_INITIALIZER | TX_IR_VALUE_SPARSE_INIT))
            return tx_error(TEEXEC_ERR_BAD_MODEL, "initializer \"%s\" is defined twice", name);
        /* Otherwise it is a graph input: the initializer is its default. */
    } else {
        TX_TRY(value_new(g, name, &v));
    }
    tx_ir_value *val = &g->values[v];
    if (sp) {
        val->flags |= TX_IR_VALUE_SPARSE_INIT;
        val->sparse = sp;
    } else {
        val->flags |= TX_IR_VALUE_INITIALIZER;
        val->initializer = tp;
    }
    /* The initializer's own dims are authoritative when the input declared
     * no type. */
    if (val->kind == TX_IR_KIND_UNKNOWN || val->rank < 0) {
        free(val->dims);
        if (val->dim_params)
            for (int32_t d = 0; d < val->rank; d++) free(val->dim_params[d]);
        free(val->dim_params);
        val->dims = NULL;
        val->dim_params = NULL;
        if (sp)
            TX_TRY(type_from_tensor(sp->values, sp->dims, sp->n_dims, val,
                                    TX_IR_KIND_SPARSE_TENSOR));
        else
            TX_TRY(type_from_tensor(tp, tp->dims, tp->n_dims, val, TX_IR_KIND_TENSOR));
    }
    g->initializers[g->n_initializers++] = v;
    return NULL;
}

static teexec_status *build_attr(graph_ctx *c, tx_ir_node *node, int32_t node_index,
                                 const Onnx__AttributeProto *ap, tx_ir_attr *a)
{
    tx_ir_graph *g = c->g;
    a->name = dup_str(ap->name);
    if (!a->name) return tx_oom();
    if (ap->ref_attr_name && ap->ref_attr_name[0]) {
        a->ref_attr_name = dup_str(ap->ref_attr_name);
        if (!a->ref_attr_name) return tx_oom();
    }
    int type = ap->has_type ? (int)ap->type : 0;
    if (type == 0) {
        /* IR < 2 files may omit the discriminator: infer it from the one
         * field present, as ONNX's checker does for old models. */
        if (ap->has_f) type = TX_IR_ATTR_FLOAT;
        else if (ap->has_i) type = TX_IR_ATTR_INT;
        else if (ap->has_s) type = TX_IR_ATTR_STRING;
        else if (ap->t) type = TX_IR_ATTR_TENSOR;
        else if (ap->g) type = TX_IR_ATTR_GRAPH;
        else if (ap->n_floats) type = TX_IR_ATTR_FLOATS;
        else if (ap->n_ints) type = TX_IR_ATTR_INTS;
        else if (ap->n_strings) type = TX_IR_ATTR_STRINGS;
        else if (ap->n_tensors) type = TX_IR_ATTR_TENSORS;
        else if (ap->n_graphs) type = TX_IR_ATTR_GRAPHS;
    }
    a->type = (type >= 0 && type <= TX_IR_ATTR_TYPE_PROTOS) ? (tx_ir_attr_type)type
                                                            : TX_IR_ATTR_UNDEFINED;
    a->f = ap->f;
    a->i = ap->i;
    if (a->type == TX_IR_ATTR_STRING || ap->has_s) {
        a->s = dup_bytes(ap->s.data, ap->has_s ? ap->s.len : 0);
        if (!a->s) return tx_oom();
        a->s_len = ap->has_s ? ap->s.len : 0;
    }
    a->t = ap->t;
    a->sparse_tensor = ap->sparse_tensor;
    a->floats = ap->floats;
    a->n_floats = ap->n_floats;
    a->ints = ap->ints;
    a->n_ints = ap->n_ints;
    if (ap->n_strings) {
        a->strings = calloc(ap->n_strings, sizeof *a->strings);
        a->string_lens = calloc(ap->n_strings, sizeof *a->string_lens);
        if (!a->strings || !a->string_lens) return tx_oom();
        a->n_strings = ap->n_strings;
        for (size_t k = 0; k < ap->n_strings; k++) {
            a->strings[k] = dup_bytes(ap->strings[k].data, ap->strings[k].len);
            if (!a->strings[k]) return tx_oom();
            a->string_lens[k] = ap->strings[k].len;
        }
    }
    a->tensors = (const Onnx__TensorProto *const *)ap->tensors;
    a->n_tensors = ap->n_tensors;

    teexec_status *st = NULL;
    if (ap->g) {
        st = build_graph(c->b, ap->g, g, node_index, g->opsets, g->n_opsets, g->function, &a->g);
        if (st)
            return tx_status_prefix(st, "in graph attribute \"%s\" of node \"%s\" (%s)", a->name,
                                    node->label, node->op_type);
    }
    if (ap->n_graphs) {
        a->graphs = calloc(ap->n_graphs, sizeof *a->graphs);
        if (!a->graphs) return tx_oom();
        a->n_graphs = ap->n_graphs;
        for (size_t k = 0; k < ap->n_graphs; k++) {
            if (!ap->graphs[k]) continue;
            st = build_graph(c->b, ap->graphs[k], g, node_index, g->opsets, g->n_opsets,
                             g->function, &a->graphs[k]);
            if (st)
                return tx_status_prefix(st, "in graph #%zu of attribute \"%s\" of node \"%s\" (%s)",
                                        k, a->name, node->label, node->op_type);
        }
    }
    return NULL;
}

/* Which values of a graph are already implicit inputs of the node being
 * built: mark[v] == node index. Keeps collection linear in the number of
 * captured values however many a subgraph reads. */
typedef struct implicit_marks {
    int32_t *mark;
    size_t cap;
} implicit_marks;

/* Collects the parent values a nested graph reads (its OUTER entries) as
 * implicit inputs of the node holding it, each once. */
static teexec_status *collect_implicit(const tx_ir_graph *g, tx_ir_node *node,
                                       const tx_ir_graph *sub, size_t *cap,
                                       implicit_marks *marks)
{
    if (!sub) return NULL;
    /* The subgraph may have added OUTER entries to g: grow to cover them. */
    if (marks->cap < g->n_values) {
        size_t bytes;
        if (!tx_mul_size(g->n_values, sizeof(int32_t), &bytes)) return tx_oom();
        int32_t *nm = realloc(marks->mark, bytes);
        if (!nm) return tx_oom();
        for (size_t i = marks->cap; i < g->n_values; i++) nm[i] = -1;
        marks->mark = nm;
        marks->cap = g->n_values;
    }
    for (size_t i = 0; i < sub->n_values; i++) {
        const tx_ir_value *v = &sub->values[i];
        if (!(v->flags & TX_IR_VALUE_OUTER)) continue;
        if (marks->mark[v->outer] == node->index) continue;
        marks->mark[v->outer] = node->index;
        if (node->n_implicit_inputs == *cap) {
            size_t ncap = *cap ? *cap * 2 : 4;
            int32_t *ni = realloc(node->implicit_inputs, ncap * sizeof *ni);
            if (!ni) return tx_oom();
            node->implicit_inputs = ni;
            *cap = ncap;
        }
        node->implicit_inputs[node->n_implicit_inputs++] = v->outer;
    }
    return NULL;
}

static int64_t scope_opset(const builder *b, const tx_ir_graph *g, const char *domain)
{
    for (size_t i = 0; i < g->n_opsets; i++)
        if (strcmp(g->opsets[i].domain, domain) == 0) return g->opsets[i].version;
    /* A function body that does not import a domain its nodes use falls
     * back to the model's imports (the two must agree anyway). */
    if (g->opsets != b->model->opsets) return tx_ir_model_opset(b->model, domain);
    return -1;
}

/* Pass 3 of build_nodes: inputs, attributes, nested graphs. */
static teexec_status *build_node_inputs(graph_ctx *c, Onnx__NodeProto *const *nodes, size_t n,
                                        implicit_marks *marks)
{
    tx_ir_graph *g = c->g;
    for (size_t i = 0; i < n; i++) {
        const Onnx__NodeProto *np = nodes[i];
        tx_ir_node *node = &g->nodes[i];
        TX_TRY(check_count(np->n_input, "node inputs"));
        node->inputs = alloc_array(np->n_input, sizeof *node->inputs);
        if (!node->inputs) return tx_oom();
        node->n_inputs = np->n_input;
        for (size_t k = 0; k < np->n_input; k++) {
            const char *name = np->input[k] ? np->input[k] : "";
            node->inputs[k] = -1;
            if (!name[0]) continue;
            TX_TRY(resolve_or_undefined(c, name, &node->inputs[k]));
        }
        node->attrs = alloc_array(np->n_attribute, sizeof *node->attrs);
        if (!node->attrs) return tx_oom();
        size_t implicit_cap = 0;
        for (size_t k = 0; k < np->n_attribute; k++) {
            if (!np->attribute[k]) continue;
            tx_ir_attr *a = &node->attrs[node->n_attrs++];
            TX_TRY(build_attr(c, node, (int32_t)i, np->attribute[k], a));
            TX_TRY(collect_implicit(g, node, a->g, &implicit_cap, marks));
            for (size_t s = 0; s < a->n_graphs; s++)
                TX_TRY(collect_implicit(g, node, a->graphs[s], &implicit_cap, marks));
        }
    }
    return NULL;
}

static teexec_status *build_nodes(graph_ctx *c, Onnx__NodeProto *const *nodes, size_t n)
{
    tx_ir_graph *g = c->g;
    builder *b = c->b;
    TX_TRY(check_count(n, "nodes in one graph"));
    g->nodes = alloc_array(n, sizeof *g->nodes);
    if (!g->nodes) return tx_oom();
    g->n_nodes = n;

    /* Pass 2: identities and outputs. */
    for (size_t i = 0; i < n; i++) {
        const Onnx__NodeProto *np = nodes[i];
        tx_ir_node *node = &g->nodes[i];
        node->index = (int32_t)i;
        node->function = -1;
        node->proto = np;
        node->name = dup_str(np->name);
        node->op_type = dup_str(np->op_type);
        node->domain = dup_str(tx_ir_normalize_domain(np->domain));
        node->overload = unknown_string_field(&np->base, 8);
        if (!node->overload) node->overload = dup_str("");
        if (!node->name || !node->op_type || !node->domain || !node->overload) return tx_oom();
        if (node->name[0]) {
            node->label = dup_str(node->name);
        } else {
            char buf[32];
            snprintf(buf, sizeof buf, "#%zu", i);
            node->label = dup_str(buf);
        }
        if (!node->label) return tx_oom();
        node->opset = scope_opset(b, g, node->domain);
        node->function = tx_ir_model_find_function(b->model, node->domain, node->op_type,
                                                   node->overload);

        TX_TRY(check_count(np->n_output, "node outputs"));
        node->outputs = alloc_array(np->n_output, sizeof *node->outputs);
        if (!node->outputs) return tx_oom();
        node->n_outputs = np->n_output;
        for (size_t k = 0; k < np->n_output; k++) {
            const char *name = np->output[k] ? np->output[k] : "";
            node->outputs[k] = -1;
            if (!name[0]) continue;
            int32_t v = tx_ir_graph_find_value(g, name);
            if (v >= 0) {
                char who[600];
                describe_definer(g, v, who, sizeof who);
                return tx_ir_node_error(node, "writes \"%s\", which is already defined by %s",
                                        name, who);
            }
            TX_TRY(value_new(g, name, &v));
            g->values[v].producer = (int32_t)i;
            g->values[v].producer_slot = (int32_t)k;
            node->outputs[k] = v;
        }
    }

    /* Pass 3: inputs, attributes, nested graphs. */
    implicit_marks marks = {NULL, 0};
    teexec_status *st = build_node_inputs(c, nodes, n, &marks);
    free(marks.mark);
    return st;
}

static teexec_status *mark_output(graph_ctx *c, const char *name, const Onnx__TypeProto *type,
                                  size_t i)
{
    tx_ir_graph *g = c->g;
    if (!name || !name[0])
        return tx_error(TEEXEC_ERR_BAD_MODEL, "graph output #%zu has no name", i);
    int32_t v;
    TX_TRY(resolve_or_undefined(c, name, &v));
    tx_ir_value *val = &g->values[v];
    val->flags |= TX_IR_VALUE_GRAPH_OUTPUT;
    if (type && (val->kind == TX_IR_KIND_UNKNOWN || val->rank < 0) &&
        !(val->flags & (TX_IR_VALUE_INITIALIZER | TX_IR_VALUE_SPARSE_INIT))) {
        free(val->dims);
        if (val->dim_params)
            for (int32_t d = 0; d < val->rank; d++) free(val->dim_params[d]);
        free(val->dim_params);
        val->dims = NULL;
        val->dim_params = NULL;
        val->rank = -1;
        TX_TRY(type_from_proto(type, val, 1, 0));
    }
    g->outputs[g->n_outputs++] = v;
    return NULL;
}

/* Pass 5: consumer lists, sized by a counting pass. */
static teexec_status *build_consumers(tx_ir_graph *g)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        for (size_t k = 0; k < g->nodes[i].n_inputs; k++) {
            int32_t v = g->nodes[i].inputs[k];
            if (v >= 0) g->values[v].n_consumers++;
        }
    for (size_t v = 0; v < g->n_values; v++) {
        if (!g->values[v].n_consumers) continue;
        g->values[v].consumers = calloc(g->values[v].n_consumers, sizeof(tx_ir_use));
        if (!g->values[v].consumers) return tx_oom();
        g->values[v].n_consumers = 0;
    }
    for (size_t i = 0; i < g->n_nodes; i++)
        for (size_t k = 0; k < g->nodes[i].n_inputs; k++) {
            int32_t v = g->nodes[i].inputs[k];
            if (v < 0) continue;
            tx_ir_value *val = &g->values[v];
            val->consumers[val->n_consumers].node = (int32_t)i;
            val->consumers[val->n_consumers].slot = (int32_t)k;
            val->n_consumers++;
        }
    return NULL;
}

static teexec_status *build_graph_body(graph_ctx *c, const Onnx__GraphProto *gp)
{
    tx_ir_graph *g = c->g;
    g->proto = gp;
    g->name = dup_str(gp->name);
    if (!g->name) return tx_oom();

    TX_TRY(add_graph_inputs(c, gp));
    size_t n_init;
    if (!tx_add_size(gp->n_initializer, gp->n_sparse_initializer, &n_init)) return tx_oom();
    TX_TRY(check_count(n_init, "initializers"));
    g->initializers = alloc_array(n_init, sizeof *g->initializers);
    if (!g->initializers) return tx_oom();
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i]) TX_TRY(add_initializer(c, gp->initializer[i], NULL, i));
    for (size_t i = 0; i < gp->n_sparse_initializer; i++)
        if (gp->sparse_initializer[i])
            TX_TRY(add_initializer(c, NULL, gp->sparse_initializer[i], i));

    TX_TRY(build_nodes(c, gp->node, gp->n_node));

    TX_TRY(check_count(gp->n_output, "graph outputs"));
    g->outputs = alloc_array(gp->n_output, sizeof *g->outputs);
    if (!g->outputs) return tx_oom();
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        TX_TRY(mark_output(c, vi ? vi->name : NULL, vi ? vi->type : NULL, i));
    }

    /* value_info: type hints for intermediates; names not in this graph
     * are ignored (exporters leave stale entries). */
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        if (!vi || !vi->name || !vi->type) continue;
        int32_t v = tx_ir_graph_find_value(g, vi->name);
        if (v < 0) continue;
        tx_ir_value *val = &g->values[v];
        if (val->kind != TX_IR_KIND_UNKNOWN || (val->flags & TX_IR_VALUE_OUTER)) continue;
        TX_TRY(type_from_proto(vi->type, val, 1, 0));
    }
    return build_consumers(g);
}

static teexec_status *build_graph(builder *b, const Onnx__GraphProto *gp, tx_ir_graph *parent,
                                  int32_t parent_node, const tx_ir_opset *opsets,
                                  size_t n_opsets, int32_t function, tx_ir_graph **out)
{
    *out = NULL;
    tx_ir_graph *g = graph_new(parent, parent_node, opsets, n_opsets, function);
    if (!g) return tx_oom();
    graph_ctx c = {b, g};
    teexec_status *st = build_graph_body(&c, gp);
    if (st) {
        tx_ir_graph_free(g);
        return st;
    }
    *out = g;
    return NULL;
}

/* ---- opsets and functions */

static teexec_status *build_opsets(Onnx__OperatorSetIdProto *const *in, size_t n,
                                   tx_ir_opset **out, size_t *count, const char *where)
{
    *out = alloc_array(n, sizeof **out);
    if (!*out) return tx_oom();
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in[i]) continue;
        const char *d = tx_ir_normalize_domain(in[i]->domain);
        for (size_t k = 0; k < *count; k++)
            if (strcmp((*out)[k].domain, d) == 0)
                return tx_error(TEEXEC_ERR_BAD_MODEL, "%s imports domain \"%s\" twice", where,
                                d[0] ? d : "ai.onnx");
        tx_ir_opset *o = &(*out)[(*count)++];
        o->domain = dup_str(d);
        if (!o->domain) return tx_oom();
        o->version = in[i]->has_version ? in[i]->version : 1;
    }
    return NULL;
}

static teexec_status *dup_names(char *const *in, size_t n, char ***out, size_t *count)
{
    *out = alloc_array(n, sizeof **out);
    if (!*out) return tx_oom();
    *count = n;
    for (size_t i = 0; i < n; i++) {
        (*out)[i] = dup_str(in[i]);
        if (!(*out)[i]) return tx_oom();
    }
    return NULL;
}

static teexec_status *function_head(builder *b, const Onnx__FunctionProto *fp, tx_ir_function *f)
{
    f->proto = fp;
    f->domain = dup_str(tx_ir_normalize_domain(fp->domain));
    f->name = dup_str(fp->name);
    f->overload = unknown_string_field(&fp->base, 13);
    if (!f->overload) f->overload = dup_str("");
    if (!f->domain || !f->name || !f->overload) return tx_oom();
    if (!f->name[0]) return tx_error(TEEXEC_ERR_BAD_MODEL, "a model-local function has no name");
    for (tx_ir_function *o = b->model->functions; o < f; o++)
        if (strcmp(o->domain, f->domain) == 0 && strcmp(o->name, f->name) == 0 &&
            strcmp(o->overload, f->overload) == 0)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "function \"%s%s%s\" is defined twice",
                            f->domain, f->domain[0] ? "." : "", f->name);
    TX_TRY(dup_names(fp->input, fp->n_input, &f->inputs, &f->n_inputs));
    TX_TRY(dup_names(fp->output, fp->n_output, &f->outputs, &f->n_outputs));
    TX_TRY(dup_names(fp->attribute, fp->n_attribute, &f->attributes, &f->n_attributes));
    char where[300];
    snprintf(where, sizeof where, "function \"%.200s\"", f->name);
    return build_opsets(fp->opset_import, fp->n_opset_import, &f->opsets, &f->n_opsets, where);
}

static teexec_status *function_body_inner(builder *b, tx_ir_function *f, int32_t index,
                                          tx_ir_graph *g)
{
    const Onnx__FunctionProto *fp = f->proto;
    graph_ctx c = {b, g};
    g->name = dup_str(f->name);
    if (!g->name) return tx_oom();
    TX_TRY(check_count(fp->n_input, "function inputs"));
    g->inputs = alloc_array(fp->n_input, sizeof *g->inputs);
    g->initializers = alloc_array(0, sizeof *g->initializers);
    if (!g->inputs || !g->initializers) return tx_oom();
    for (size_t i = 0; i < fp->n_input; i++) {
        const char *name = fp->input[i] ? fp->input[i] : "";
        if (!name[0])
            return tx_error(TEEXEC_ERR_BAD_MODEL, "input #%zu has no name", i);
        if (tx_ir_graph_find_value(g, name) >= 0)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "input \"%s\" is listed twice", name);
        int32_t v;
        TX_TRY(value_new(g, name, &v));
        g->values[v].flags = TX_IR_VALUE_GRAPH_INPUT;
        g->inputs[g->n_inputs++] = v;
    }
    (void)index;
    TX_TRY(build_nodes(&c, fp->node, fp->n_node));
    TX_TRY(check_count(fp->n_output, "function outputs"));
    g->outputs = alloc_array(fp->n_output, sizeof *g->outputs);
    if (!g->outputs) return tx_oom();
    for (size_t i = 0; i < fp->n_output; i++)
        TX_TRY(mark_output(&c, fp->output[i], NULL, i));
    return build_consumers(g);
}

static teexec_status *function_body(builder *b, tx_ir_function *f, int32_t index)
{
    tx_ir_graph *g = graph_new(NULL, -1, f->opsets, f->n_opsets, index);
    if (!g) return tx_oom();
    f->body = g;
    teexec_status *st = function_body_inner(b, f, index, g);
    if (st)
        return tx_status_prefix(st, "in function \"%s%s%s\"", f->domain, f->domain[0] ? "." : "",
                                f->name);
    return NULL;
}

static teexec_status *build_model(builder *b)
{
    const Onnx__ModelProto *mp = b->file->model;
    tx_ir_model *m = b->model;
    m->file = b->file;
    m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    m->producer_name = dup_str(mp->producer_name);
    m->producer_version = dup_str(mp->producer_version);
    m->domain = dup_str(mp->domain);
    if (!m->producer_name || !m->producer_version || !m->domain) return tx_oom();
    TX_TRY(build_opsets(mp->opset_import, mp->n_opset_import, &m->opsets, &m->n_opsets,
                        "the model"));
    /* Before IR 3 there were no opset imports: the default domain at
     * version 1 is implied. */
    if (m->n_opsets == 0 && m->ir_version < 3) {
        m->opsets[0].domain = dup_str("");
        if (!m->opsets[0].domain) return tx_oom();
        m->opsets[0].version = 1;
        m->n_opsets = 1;
    }

    TX_TRY(check_count(mp->n_functions, "functions"));
    m->functions = alloc_array(mp->n_functions, sizeof *m->functions);
    if (!m->functions) return tx_oom();
    /* Heads first, so calls can be resolved while bodies and the graph are
     * built. */
    for (size_t i = 0; i < mp->n_functions; i++) {
        if (!mp->functions[i]) continue;
        tx_ir_function *f = &m->functions[m->n_functions++];
        TX_TRY(function_head(b, mp->functions[i], f));
    }

    if (!mp->graph) return tx_error(TEEXEC_ERR_BAD_MODEL, "the model has no graph");
    TX_TRY(build_graph(b, mp->graph, NULL, -1, m->opsets, m->n_opsets, -1, &m->graph));

    for (size_t i = 0; i < m->n_functions; i++)
        TX_TRY(function_body(b, &m->functions[i], (int32_t)i));
    return NULL;
}

teexec_status *tx_ir_build(const tx_onnx_file *file, tx_ir_model **out)
{
    *out = NULL;
    if (!file || !file->model)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_ir_build: no model");
    tx_ir_model *m = calloc(1, sizeof *m);
    if (!m) return tx_oom();
    builder b = {file, m};
    teexec_status *st = build_model(&b);
    if (st) {
        tx_ir_model_free(m);
        return st;
    }
    *out = m;
    return NULL;
}
