/*
 * ir_access.c - lookups over a built IR: values by name, opsets, functions,
 * and typed attribute accessors for op implementations.
 */
#include "import/ir_internal.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "format/tensor_proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a: names are short and adversarial inputs only cost time, not
 * correctness (probing is linear and bounded by the table size). */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h;
}

static void index_place(int32_t *slots, size_t cap, const tx_ir_value *values, int32_t v)
{
    size_t mask = cap - 1;
    size_t i = (size_t)name_hash(values[v].name) & mask;
    while (slots[i] >= 0) i = (i + 1) & mask;
    slots[i] = v;
}

teexec_status *tx_ir_index_add(tx_ir_graph *g, int32_t value)
{
    tx_ir_name_index *ix = &g->index;
    /* Keep the load factor at or below 1/2. */
    size_t needed;
    if (!tx_mul_size((size_t)value + 1, 2, &needed)) return tx_oom();
    if (ix->cap < needed) {
        size_t cap = ix->cap ? ix->cap : 16;
        while (cap < needed) {
            if (cap > SIZE_MAX / 2 / sizeof(int32_t)) return tx_oom();
            cap *= 2;
        }
        int32_t *slots = malloc(cap * sizeof *slots);
        if (!slots) return tx_oom();
        for (size_t i = 0; i < cap; i++) slots[i] = -1;
        for (size_t i = 0; i < ix->cap; i++)
            if (ix->slots[i] >= 0) index_place(slots, cap, g->values, ix->slots[i]);
        free(ix->slots);
        ix->slots = slots;
        ix->cap = cap;
    }
    index_place(ix->slots, ix->cap, g->values, value);
    return NULL;
}

int32_t tx_ir_graph_find_value(const tx_ir_graph *g, const char *name)
{
    if (!g || !name || g->index.cap == 0) return -1;
    size_t mask = g->index.cap - 1;
    size_t i = (size_t)name_hash(name) & mask;
    for (;;) {
        int32_t v = g->index.slots[i];
        if (v < 0) return -1;
        if (strcmp(g->values[v].name, name) == 0) return v;
        i = (i + 1) & mask;
    }
}

const tx_ir_value *tx_ir_value_resolve(const tx_ir_graph *g, int32_t value,
                                       const tx_ir_graph **owner)
{
    if (!g || value < 0 || (size_t)value >= g->n_values) return NULL;
    while ((g->values[value].flags & TX_IR_VALUE_OUTER) && g->parent &&
           g->values[value].outer >= 0) {
        value = g->values[value].outer;
        g = g->parent;
    }
    if (owner) *owner = g;
    return &g->values[value];
}

const char *tx_ir_normalize_domain(const char *domain)
{
    if (!domain || strcmp(domain, "ai.onnx") == 0) return "";
    return domain;
}

int64_t tx_ir_model_opset(const tx_ir_model *model, const char *domain)
{
    if (!model) return -1;
    const char *d = tx_ir_normalize_domain(domain);
    for (size_t i = 0; i < model->n_opsets; i++)
        if (strcmp(model->opsets[i].domain, d) == 0) return model->opsets[i].version;
    return -1;
}

int32_t tx_ir_model_find_function(const tx_ir_model *model, const char *domain,
                                  const char *name, const char *overload)
{
    if (!model || !name) return -1;
    const char *d = tx_ir_normalize_domain(domain);
    const char *o = overload ? overload : "";
    for (size_t i = 0; i < model->n_functions; i++) {
        const tx_ir_function *f = &model->functions[i];
        if (strcmp(f->domain, d) == 0 && strcmp(f->name, name) == 0 &&
            strcmp(f->overload, o) == 0)
            return (int32_t)i;
    }
    return -1;
}

teexec_status *tx_ir_node_error(const tx_ir_node *node, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, node->label, "node \"%s\" (%s) %s",
                         node->label, node->op_type, msg);
}

/* ---- attributes */

const tx_ir_attr *tx_ir_attr_find(const tx_ir_node *node, const char *name)
{
    if (!node || !name) return NULL;
    for (size_t i = 0; i < node->n_attrs; i++)
        if (strcmp(node->attrs[i].name, name) == 0) return &node->attrs[i];
    return NULL;
}

static const char *attr_type_name(tx_ir_attr_type t)
{
    static const char *const names[] = {
        "undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
        "strings", "tensors", "graphs", "sparse_tensor", "sparse_tensors",
        "type_proto", "type_protos"};
    if ((unsigned)t < sizeof names / sizeof names[0]) return names[t];
    return "unknown";
}

/* Looks `name` up; *found gets the attribute when present with type `want`.
 * A present attribute of another type is an error. */
static teexec_status *attr_typed(const tx_ir_node *node, const char *name,
                                 tx_ir_attr_type want, const tx_ir_attr **found)
{
    *found = NULL;
    const tx_ir_attr *a = tx_ir_attr_find(node, name);
    if (!a) return NULL;
    if (a->type != want)
        return tx_ir_node_error(node, "has attribute \"%s\" of type %s where %s is expected",
                                name, attr_type_name(a->type), attr_type_name(want));
    *found = a;
    return NULL;
}

teexec_status *tx_ir_attr_missing(const tx_ir_node *node, const char *name)
{
    return tx_ir_node_error(node, "needs attribute \"%s\"", name);
}

teexec_status *tx_ir_attr_int(const tx_ir_node *node, const char *name, int64_t def,
                              int64_t *out)
{
    const tx_ir_attr *a;
    *out = def;
    TX_TRY(attr_typed(node, name, TX_IR_ATTR_INT, &a));
    if (a) *out = a->i;
    return NULL;
}

teexec_status *tx_ir_attr_float(const tx_ir_node *node, const char *name, float def,
                                float *out)
{
    const tx_ir_attr *a;
    *out = def;
    TX_TRY(attr_typed(node, name, TX_IR_ATTR_FLOAT, &a));
    if (a) *out = a->f;
    return NULL;
}

teexec_status *tx_ir_attr_string(const tx_ir_node *node, const char *name, const char *def,
                                 const char **out, size_t *len)
{
    const tx_ir_attr *a;
    *out = def;
    if (len) *len = def ? strlen(def) : 0;
    TX_TRY(attr_typed(node, name, TX_IR_ATTR_STRING, &a));
    if (a) {
        *out = a->s;
        if (len) *len = a->s_len;
    }
    return NULL;
}

teexec_status *tx_ir_attr_ints(const tx_ir_node *node, const char *name,
                               const int64_t **out, size_t *count)
{
    const tx_ir_attr *a;
    *out = NULL;
    *count = 0;
    TX_TRY(attr_typed(node, name, TX_IR_ATTR_INTS, &a));
    if (a) {
        *out = a->ints;
        *count = a->n_ints;
    }
    return NULL;
}

teexec_status *tx_ir_attr_floats(const tx_ir_node *node, const char *name,
                                 const float **out, size_t *count)
{
    const tx_ir_attr *a;
    *out = NULL;
    *count = 0;
    TX_TRY(attr_typed(node, name, TX_IR_ATTR_FLOATS, &a));
    if (a) {
        *out = a->floats;
        *count = a->n_floats;
    }
    return NULL;
}

teexec_status *tx_ir_attr_strings(const tx_ir_node *node, const char *name,
                                  char *const **out, size_t *count)
{
    const tx_ir_attr *a;
    *out = NULL;
    *count = 0;
    TX_TRY(attr_typed(node, name, TX_IR_ATTR_STRINGS, &a));
    if (a) {
        *out = a->strings;
        *count = a->n_strings;
    }
    return NULL;
}

teexec_status *tx_ir_attr_tensor(const tx_ir_node *node, const char *name,
                                 const Onnx__TensorProto **out)
{
    const tx_ir_attr *a;
    *out = NULL;
    TX_TRY(attr_typed(node, name, TX_IR_ATTR_TENSOR, &a));
    if (a) *out = a->t;
    return NULL;
}

teexec_status *tx_ir_attr_tensor_value(const tx_ir_node *node, const char *name,
                                       const tx_onnx_file *file, tx_tensor *out, bool *found)
{
    const Onnx__TensorProto *tp;
    memset(out, 0, sizeof(*out));
    *found = false;
    TX_TRY(tx_ir_attr_tensor(node, name, &tp));
    if (!tp) return NULL;
    *found = true;
    return tx_tensor_from_proto(tp, file, out);
}

teexec_status *tx_ir_attr_graph(const tx_ir_node *node, const char *name,
                                const tx_ir_graph **out)
{
    const tx_ir_attr *a;
    *out = NULL;
    TX_TRY(attr_typed(node, name, TX_IR_ATTR_GRAPH, &a));
    if (a) *out = a->g;
    return NULL;
}

/* ---- stored tensors ------------------------------------------------------ */

/* Decodes one stored tensor into a temporary and drops it: payload length,
 * dtype and external-data errors surface at load, naming the tensor, while
 * only one tensor's worth of memory is held at a time. */
static teexec_status *check_tensor(const tx_onnx_file *file, const Onnx__TensorProto *tp)
{
    if (!tp) return NULL;
    tx_tensor t;
    memset(&t, 0, sizeof t);
    TX_TRY(tx_tensor_from_proto(tp, file, &t));
    tx_tensor_release(&t);
    return NULL;
}

teexec_status *tx_ir_check_tensors(const tx_onnx_file *file, const tx_ir_graph *g)
{
    for (size_t i = 0; i < g->n_initializers; i++) {
        const tx_ir_value *v = &g->values[g->initializers[i]];
        TX_TRY(check_tensor(file, v->initializer));
        if (v->sparse) {
            TX_TRY(check_tensor(file, v->sparse->values));
            TX_TRY(check_tensor(file, v->sparse->indices));
        }
    }
    for (size_t n = 0; n < g->n_nodes; n++) {
        const tx_ir_node *node = &g->nodes[n];
        for (size_t a = 0; a < node->n_attrs; a++) {
            const tx_ir_attr *at = &node->attrs[a];
            teexec_status *st = check_tensor(file, at->t);
            for (size_t k = 0; !st && k < at->n_tensors; k++)
                st = check_tensor(file, at->tensors[k]);
            if (!st && at->g) st = tx_ir_check_tensors(file, at->g);
            for (size_t k = 0; !st && k < at->n_graphs; k++)
                if (at->graphs[k]) st = tx_ir_check_tensors(file, at->graphs[k]);
            if (st) return tx_status_with_node(st, node->label);
        }
    }
    return NULL;
}

/* Elements and bytes of one stored tensor (strings: their byte lengths). */
static void tensor_size(const Onnx__TensorProto *tp, uint64_t *elements, uint64_t *bytes)
{
    *elements = 0;
    *bytes = 0;
    if (!tp) return;
    uint64_t n;
    if (!tx_dims_product(tp->dims, tp->n_dims, &n)) return;
    *elements = n;
    teexec_dtype dt = tp->has_data_type && tx_dtype_valid(tp->data_type)
                          ? (teexec_dtype)tp->data_type
                          : TEEXEC_DTYPE_UNDEFINED;
    if (dt == TEEXEC_DTYPE_STRING) {
        for (size_t i = 0; i < tp->n_string_data; i++)
            if (!tx_add_u64(*bytes, tp->string_data[i].len, bytes)) return;
        return;
    }
    int ok = 0;
    uint64_t b = tx_dtype_storage_bytes(dt, n, &ok);
    if (ok) *bytes = b;
}

static int stored_dtype(const Onnx__TensorProto *tp)
{
    return tp && tp->has_data_type && tx_dtype_valid(tp->data_type) ? tp->data_type : 0;
}

bool tx_ir_initializer_size(const tx_ir_value *v, int *dtype, uint64_t *elements, uint64_t *bytes)
{
    *dtype = 0;
    *elements = *bytes = 0;
    if (v->initializer) {
        tensor_size(v->initializer, elements, bytes);
        *dtype = stored_dtype(v->initializer);
        return true;
    }
    if (!v->sparse) return false;
    uint64_t e2, b2;
    tensor_size(v->sparse->values, elements, bytes);
    tensor_size(v->sparse->indices, &e2, &b2);
    if (!tx_add_u64(*bytes, b2, bytes)) *bytes = UINT64_MAX;
    *dtype = stored_dtype(v->sparse->values);
    return true;
}
