/* rewrite.c - the rewrite graph: node edits, attributes, lookups,
 * initializers. Building from the IR is in rewrite_inline.c, writing in
 * rewrite_emit.c, outlining in rewrite_outline.c. */
#include "import/rewrite_internal.h"

#include "base/checked.h"
#include "base/half.h"
#include "format/tensor_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers shared by the rewrite files ------------------------- */

teexec_status *tx_rw_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return NULL;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (!tx_mul_size(n, 2, &n)) return tx_oom();
    }
    size_t bytes;
    if (!tx_mul_size(n, elem, &bytes)) return tx_oom();
    void *p = realloc(*arr, bytes);
    if (!p) return tx_oom();
    memset((char *)p + *cap * elem, 0, (n - *cap) * elem);
    *arr = p;
    *cap = n;
    return NULL;
}

char *tx_rw_strdup(const char *s)
{
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void tx_rw_attr_clear(tx_rw_attr *a)
{
    free(a->name);
    free(a->s);
    free(a->ints);
    free(a->floats);
    for (size_t i = 0; i < a->n_strings; i++) free(a->strings[i]);
    free(a->strings);
    tx_tensor_release(&a->t_owned);
    memset(a, 0, sizeof *a);
}

void tx_rw_node_clear(tx_rw_node *n)
{
    free(n->name);
    free(n->op_type);
    free(n->domain);
    for (size_t i = 0; i < n->n_inputs; i++) free(n->inputs[i]);
    free(n->inputs);
    for (size_t i = 0; i < n->n_outputs; i++) free(n->outputs[i]);
    free(n->outputs);
    for (size_t i = 0; i < n->n_attrs; i++) tx_rw_attr_clear(&n->attrs[i]);
    free(n->attrs);
    memset(n, 0, sizeof *n);
}

teexec_status *tx_rw_attr_copy(const tx_rw_attr *src, tx_rw_attr *dst)
{
    memset(dst, 0, sizeof *dst);
    dst->name = tx_rw_strdup(src->name);
    dst->type = src->type;
    dst->i = src->i;
    dst->f = src->f;
    dst->t_borrowed = src->t_borrowed;
    dst->opaque = src->opaque;
    if (!dst->name) goto oom;
    if (src->s && !(dst->s = tx_rw_strdup(src->s))) goto oom;
    if (src->n_ints) {
        dst->ints = malloc(src->n_ints * sizeof(int64_t));
        if (!dst->ints) goto oom;
        memcpy(dst->ints, src->ints, src->n_ints * sizeof(int64_t));
        dst->n_ints = src->n_ints;
    }
    if (src->n_floats) {
        dst->floats = malloc(src->n_floats * sizeof(float));
        if (!dst->floats) goto oom;
        memcpy(dst->floats, src->floats, src->n_floats * sizeof(float));
        dst->n_floats = src->n_floats;
    }
    if (src->n_strings) {
        dst->strings = calloc(src->n_strings, sizeof(char *));
        if (!dst->strings) goto oom;
        dst->n_strings = src->n_strings;
        for (size_t i = 0; i < src->n_strings; i++)
            if (!(dst->strings[i] = tx_rw_strdup(src->strings[i]))) goto oom;
    }
    if (src->t_owned.data) {
        teexec_status *st = tx_tensor_clone(&src->t_owned, &dst->t_owned);
        if (st) {
            tx_rw_attr_clear(dst);
            return st;
        }
    }
    return NULL;
oom:
    tx_rw_attr_clear(dst);
    return tx_oom();
}

void tx_rw_edited(tx_rw_graph *g)
{
    for (size_t i = 0; i < g->n_scratch; i++) free(g->scratch[i]);
    g->n_scratch = 0;
}

teexec_status *tx_rw_node_push_attr(tx_rw_node *n, tx_rw_attr *a)
{
    tx_rw_attr *p = realloc(n->attrs, (n->n_attrs + 1) * sizeof *p);
    if (!p) return tx_oom();
    n->attrs = p;
    n->attrs[n->n_attrs++] = *a;
    memset(a, 0, sizeof *a);
    return NULL;
}

static bool in_list(char *const *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] && strcmp(list[i], name) == 0) return true;
    return false;
}

static bool node_uses_name(const tx_rw_node *n, const char *name)
{
    return (n->name && strcmp(n->name, name) == 0) || in_list(n->inputs, n->n_inputs, name) ||
           in_list(n->outputs, n->n_outputs, name);
}

bool tx_rw_name_used(const tx_rw_graph *g, const char *name)
{
    /* Dead nodes count too: a pass may still look at what it removed. */
    for (size_t i = 0; i < g->n_nodes; i++)
        if (node_uses_name(&g->nodes[i], name)) return true;
    for (size_t f = 0; f < g->n_funcs; f++) {
        const tx_rw_function *fn = &g->funcs[f];
        for (size_t i = 0; i < fn->n_nodes; i++)
            if (node_uses_name(&fn->nodes[i], name)) return true;
    }
    for (size_t i = 0; i < g->n_inputs; i++)
        if (strcmp(g->inputs[i].name, name) == 0) return true;
    for (size_t i = 0; i < g->n_outputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0) return true;
    for (size_t i = 0; i < g->n_vinfo; i++)
        if (strcmp(g->vinfo[i].name, name) == 0) return true;
    for (size_t i = 0; i < g->n_inits; i++)
        if (strcmp(g->inits[i].name, name) == 0) return true;
    /* names of the source's main graph not copied yet (inlining runs while
     * the graph is being built) */
    if (g->src && g->src->graph && tx_ir_graph_find_value(g->src->graph, name) >= 0) return true;
    return in_list(g->fresh, g->n_fresh, name);
}

int64_t tx_rw_init_find(const tx_rw_graph *g, const char *name)
{
    for (size_t i = 0; i < g->n_inits; i++)
        if (strcmp(g->inits[i].name, name) == 0) return (int64_t)i;
    return -1;
}

teexec_status *tx_rw_add_opset(tx_rw_graph *g, const char *domain, int64_t version)
{
    const char *d = tx_ir_normalize_domain(domain);
    for (size_t i = 0; i < g->n_opsets; i++)
        if (strcmp(g->opsets[i].domain, d) == 0) return NULL;
    TX_TRY(tx_rw_grow((void **)&g->opsets, &g->cap_opsets, g->n_opsets + 1, sizeof *g->opsets));
    char *copy = tx_rw_strdup(d);
    if (!copy) return tx_oom();
    g->opsets[g->n_opsets].domain = copy;
    g->opsets[g->n_opsets].version = version;
    g->n_opsets++;
    return NULL;
}

static void io_clear(tx_rw_io *io)
{
    free(io->name);
    for (int d = 0; d < TX_MAX_RANK; d++) free(io->type.dim_params[d]);
    memset(io, 0, sizeof *io);
}

teexec_status *tx_rw_drop_source_functions(tx_rw_graph *g, const char *domain)
{
    if (!g || !domain) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_drop_source_functions: NULL");
    char *d = tx_rw_strdup(domain);
    if (!d) return tx_oom();
    free(g->drop_domain);
    g->drop_domain = d;
    return NULL;
}

void tx_rw_free(tx_rw_graph *g)
{
    if (!g) return;
    free(g->drop_domain);
    free(g->graph_name);
    for (size_t i = 0; i < g->n_nodes; i++) tx_rw_node_clear(&g->nodes[i]);
    free(g->nodes);
    for (size_t i = 0; i < g->n_inputs; i++) io_clear(&g->inputs[i]);
    free(g->inputs);
    for (size_t i = 0; i < g->n_outputs; i++) io_clear(&g->outputs[i]);
    free(g->outputs);
    for (size_t i = 0; i < g->n_vinfo; i++) io_clear(&g->vinfo[i]);
    free(g->vinfo);
    for (size_t i = 0; i < g->n_inits; i++) {
        free(g->inits[i].name);
        tx_tensor_release(&g->inits[i].owned);
    }
    free(g->inits);
    for (size_t i = 0; i < g->n_opsets; i++) free(g->opsets[i].domain);
    free(g->opsets);
    for (size_t f = 0; f < g->n_funcs; f++) {
        tx_rw_function *fn = &g->funcs[f];
        free(fn->domain);
        free(fn->name);
        for (size_t i = 0; i < fn->n_inputs; i++) free(fn->inputs[i]);
        free(fn->inputs);
        for (size_t i = 0; i < fn->n_outputs; i++) free(fn->outputs[i]);
        free(fn->outputs);
        for (size_t i = 0; i < fn->n_nodes; i++) tx_rw_node_clear(&fn->nodes[i]);
        free(fn->nodes);
    }
    free(g->funcs);
    for (size_t i = 0; i < g->n_fresh; i++) free(g->fresh[i]);
    free(g->fresh);
    tx_rw_edited(g);
    free(g->scratch);
    free(g);
}

/* ---- nodes --------------------------------------------------------------- */

size_t tx_rw_node_count(const tx_rw_graph *g)
{
    return g->n_nodes;
}

tx_rw_node *tx_rw_node_at(tx_rw_graph *g, size_t index)
{
    return index < g->n_nodes ? &g->nodes[index] : NULL;
}

static teexec_status *copy_names(const char *const *src, size_t n, char ***dst)
{
    *dst = NULL;
    if (!n) return NULL;
    char **d = calloc(n, sizeof *d);
    if (!d) return tx_oom();
    for (size_t i = 0; i < n; i++) {
        d[i] = tx_rw_strdup(src[i]);
        if (!d[i]) {
            for (size_t j = 0; j < i; j++) free(d[j]);
            free(d);
            return tx_oom();
        }
    }
    *dst = d;
    return NULL;
}

teexec_status *tx_rw_add_node(tx_rw_graph *g, const char *op_type, const char *domain,
                              const char *name, const char *const *inputs, size_t n_inputs,
                              const char *const *outputs, size_t n_outputs, size_t *index)
{
    if (!op_type || !*op_type)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_add_node: empty op_type");
    if ((n_inputs && !inputs) || (n_outputs && !outputs))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_add_node (%s): NULL name list",
                        op_type);
    TX_TRY(tx_rw_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes));
    tx_rw_node n;
    memset(&n, 0, sizeof n);
    n.name = tx_rw_strdup(name);
    n.op_type = tx_rw_strdup(op_type);
    n.domain = tx_rw_strdup(tx_ir_normalize_domain(domain));
    teexec_status *st = NULL;
    if (!n.name || !n.op_type || !n.domain) st = tx_oom();
    if (!st) st = copy_names(inputs, n_inputs, &n.inputs);
    if (!st) n.n_inputs = n_inputs;
    if (!st) st = copy_names(outputs, n_outputs, &n.outputs);
    if (!st) n.n_outputs = n_outputs;
    if (st) {
        tx_rw_node_clear(&n);
        return st;
    }
    tx_rw_edited(g);
    if (index) *index = g->n_nodes;
    g->nodes[g->n_nodes++] = n;
    return NULL;
}

void tx_rw_remove_node(tx_rw_graph *g, size_t index)
{
    if (index >= g->n_nodes) return;
    g->nodes[index].dead = true;
    tx_rw_edited(g);
}

static teexec_status *attr_slot(tx_rw_graph *g, size_t node, const char *name, tx_rw_attr **out)
{
    *out = NULL;
    if (node >= g->n_nodes || !name || !*name)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "rewrite: setting attribute \"%s\" on node %zu of %zu",
                        name ? name : "(null)", node, g->n_nodes);
    tx_rw_node *n = &g->nodes[node];
    tx_rw_edited(g);
    for (size_t i = 0; i < n->n_attrs; i++) {
        if (strcmp(n->attrs[i].name, name) == 0) {
            char *keep = n->attrs[i].name;
            n->attrs[i].name = NULL;
            tx_rw_attr_clear(&n->attrs[i]);
            n->attrs[i].name = keep;
            *out = &n->attrs[i];
            return NULL;
        }
    }
    tx_rw_attr a;
    memset(&a, 0, sizeof a);
    a.name = tx_rw_strdup(name);
    if (!a.name) return tx_oom();
    teexec_status *st = tx_rw_node_push_attr(n, &a);
    if (st) {
        tx_rw_attr_clear(&a);
        return st;
    }
    *out = &n->attrs[n->n_attrs - 1];
    return NULL;
}

teexec_status *tx_rw_set_int(tx_rw_graph *g, size_t node, const char *name, int64_t v)
{
    tx_rw_attr *a;
    TX_TRY(attr_slot(g, node, name, &a));
    a->type = TX_IR_ATTR_INT;
    a->i = v;
    return NULL;
}

teexec_status *tx_rw_set_float(tx_rw_graph *g, size_t node, const char *name, float v)
{
    tx_rw_attr *a;
    TX_TRY(attr_slot(g, node, name, &a));
    a->type = TX_IR_ATTR_FLOAT;
    a->f = v;
    return NULL;
}

teexec_status *tx_rw_set_string(tx_rw_graph *g, size_t node, const char *name, const char *v)
{
    tx_rw_attr *a;
    TX_TRY(attr_slot(g, node, name, &a));
    a->type = TX_IR_ATTR_STRING;
    a->s = tx_rw_strdup(v);
    return a->s ? NULL : tx_oom();
}

teexec_status *tx_rw_set_ints(tx_rw_graph *g, size_t node, const char *name, const int64_t *v,
                              size_t n)
{
    tx_rw_attr *a;
    TX_TRY(attr_slot(g, node, name, &a));
    a->type = TX_IR_ATTR_INTS;
    if (n) {
        a->ints = malloc(n * sizeof(int64_t));
        if (!a->ints) return tx_oom();
        memcpy(a->ints, v, n * sizeof(int64_t));
    }
    a->n_ints = n;
    return NULL;
}

teexec_status *tx_rw_set_tensor(tx_rw_graph *g, size_t node, const char *name, const tx_tensor *t)
{
    if (!t || !t->data) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_set_tensor: no tensor");
    tx_rw_attr *a;
    TX_TRY(attr_slot(g, node, name, &a));
    a->type = TX_IR_ATTR_TENSOR;
    return tx_tensor_clone(t, &a->t_owned);
}

teexec_status *tx_rw_make_constant(tx_rw_graph *g, size_t node, size_t slot, const tx_tensor *t)
{
    if (node >= g->n_nodes || g->nodes[node].dead || slot >= g->nodes[node].n_outputs || !t ||
        !t->data)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_make_constant: no live node %zu output %zu",
                        node, slot);
    tx_rw_node *n = &g->nodes[node];
    char *op = tx_rw_strdup("Constant"), *dom = tx_rw_strdup("");
    tx_tensor copy;
    teexec_status *st = op && dom ? tx_tensor_clone(t, &copy) : tx_oom();
    if (st) {
        free(op);
        free(dom);
        return st;
    }
    tx_rw_edited(g);
    free(n->op_type);
    free(n->domain);
    n->op_type = op;
    n->domain = dom;
    for (size_t i = 0; i < n->n_inputs; i++) free(n->inputs[i]);
    n->n_inputs = 0;
    for (size_t o = 0; o < n->n_outputs; o++) {
        if (o == slot) continue;
        free(n->outputs[o]);
    }
    n->outputs[0] = n->outputs[slot];
    n->n_outputs = 1;
    for (size_t i = 0; i < n->n_attrs; i++) tx_rw_attr_clear(&n->attrs[i]);
    n->n_attrs = 0;
    /* the attribute array keeps its capacity: one entry fits */
    tx_rw_attr a;
    memset(&a, 0, sizeof a);
    a.name = tx_rw_strdup("value");
    if (!a.name) {
        tx_tensor_release(&copy);
        return tx_oom();
    }
    a.type = TX_IR_ATTR_TENSOR;
    a.t_owned = copy;
    st = tx_rw_node_push_attr(n, &a);
    if (st) tx_rw_attr_clear(&a);
    return st;
}

const tx_rw_attr *tx_rw_get_attr(const tx_rw_graph *g, size_t node, const char *name)
{
    if (node >= g->n_nodes || !name) return NULL;
    const tx_rw_node *n = &g->nodes[node];
    for (size_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

/* ---- lookups ------------------------------------------------------------ */

int64_t tx_rw_producer(tx_rw_graph *g, const char *value, size_t *slot)
{
    if (value && *value) {
        for (size_t i = 0; i < g->n_nodes; i++) {
            const tx_rw_node *n = &g->nodes[i];
            if (n->dead) continue;
            for (size_t o = 0; o < n->n_outputs; o++) {
                if (strcmp(n->outputs[o], value) == 0) {
                    if (slot) *slot = o;
                    return (int64_t)i;
                }
            }
        }
    }
    return -1;
}

const tx_ir_use *tx_rw_consumers(tx_rw_graph *g, const char *value, size_t *n)
{
    *n = 0;
    if (!value || !*value) return NULL;
    size_t count = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const tx_rw_node *nd = &g->nodes[i];
        if (nd->dead) continue;
        for (size_t s = 0; s < nd->n_inputs; s++)
            if (strcmp(nd->inputs[s], value) == 0) count++;
    }
    if (!count) return NULL;
    if (tx_rw_grow((void **)&g->scratch, &g->cap_scratch, g->n_scratch + 1, sizeof *g->scratch))
        return NULL; /* out of memory reads as "no consumers": passes then lower nothing */
    tx_ir_use *uses = malloc(count * sizeof *uses);
    if (!uses) return NULL;
    g->scratch[g->n_scratch++] = uses;
    size_t k = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const tx_rw_node *nd = &g->nodes[i];
        if (nd->dead) continue;
        for (size_t s = 0; s < nd->n_inputs; s++)
            if (strcmp(nd->inputs[s], value) == 0)
                uses[k++] = (tx_ir_use){(int32_t)i, (int32_t)s};
    }
    *n = count;
    return uses;
}

bool tx_rw_is_graph_output(const tx_rw_graph *g, const char *value)
{
    for (size_t i = 0; value && i < g->n_outputs; i++)
        if (strcmp(g->outputs[i].name, value) == 0) return true;
    return false;
}

bool tx_rw_is_graph_input(const tx_rw_graph *g, const char *value)
{
    for (size_t i = 0; value && i < g->n_inputs; i++)
        if (strcmp(g->inputs[i].name, value) == 0) return true;
    return false;
}

bool tx_rw_is_initializer(const tx_rw_graph *g, const char *value)
{
    return value && tx_rw_init_find(g, value) >= 0;
}

static const tx_rw_attr *node_attr(const tx_rw_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

/* The value of a Constant node (its output 0) as a tensor. */
static bool constant_node_value(const tx_rw_graph *g, const tx_rw_node *n, tx_tensor *out)
{
    const tx_rw_attr *a;
    teexec_status *st = NULL;
    if ((a = node_attr(n, "value")) && a->type == TX_IR_ATTR_TENSOR) {
        if (a->t_owned.data) st = tx_tensor_clone(&a->t_owned, out);
        else if (a->t_borrowed) st = tx_tensor_from_proto(a->t_borrowed, g->src ? g->src->file : NULL, out);
        else return false;
    } else if ((a = node_attr(n, "value_float")) && a->type == TX_IR_ATTR_FLOAT) {
        if (!(st = tx_tensor_alloc(out, TEEXEC_DTYPE_FLOAT, 0, NULL))) *(float *)out->data = a->f;
    } else if ((a = node_attr(n, "value_int")) && a->type == TX_IR_ATTR_INT) {
        if (!(st = tx_tensor_alloc(out, TEEXEC_DTYPE_INT64, 0, NULL))) *(int64_t *)out->data = a->i;
    } else if ((a = node_attr(n, "value_floats")) && a->type == TX_IR_ATTR_FLOATS) {
        int64_t d = (int64_t)a->n_floats;
        if (!(st = tx_tensor_alloc(out, TEEXEC_DTYPE_FLOAT, 1, &d)) && a->n_floats)
            memcpy(out->data, a->floats, a->n_floats * sizeof(float));
    } else if ((a = node_attr(n, "value_ints")) && a->type == TX_IR_ATTR_INTS) {
        int64_t d = (int64_t)a->n_ints;
        if (!(st = tx_tensor_alloc(out, TEEXEC_DTYPE_INT64, 1, &d)) && a->n_ints)
            memcpy(out->data, a->ints, a->n_ints * sizeof(int64_t));
    } else {
        return false;
    }
    if (st) {
        teexec_status_destroy(st);
        memset(out, 0, sizeof *out);
        return false;
    }
    return true;
}

bool tx_rw_constant(tx_rw_graph *g, const char *value, tx_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (!value || !*value) return false;
    int64_t k = tx_rw_init_find(g, value);
    if (k >= 0) {
        if (tx_rw_is_graph_input(g, value)) return false;
        const tx_rw_init *in = &g->inits[k];
        teexec_status *st = in->borrowed
                                ? tx_tensor_from_proto(in->borrowed, g->src ? g->src->file : NULL, out)
                                : tx_tensor_clone(&in->owned, out);
        if (st) {
            teexec_status_destroy(st);
            memset(out, 0, sizeof *out);
            return false;
        }
        return true;
    }
    size_t slot = 0;
    int64_t p = tx_rw_producer(g, value, &slot);
    if (p < 0 || slot != 0) return false;
    const tx_rw_node *n = &g->nodes[p];
    if (strcmp(n->op_type, "Constant") != 0 || n->domain[0]) return false;
    return constant_node_value(g, n, out);
}

bool tx_rw_scalar(tx_rw_graph *g, const char *value, double *out)
{
    tx_tensor t;
    if (!tx_rw_constant(g, value, &t)) return false;
    bool ok = t.numel == 1;
    if (ok) {
        switch (t.dtype) {
        case TEEXEC_DTYPE_FLOAT: *out = *(const float *)t.data; break;
        case TEEXEC_DTYPE_DOUBLE: *out = *(const double *)t.data; break;
        case TEEXEC_DTYPE_FLOAT16: *out = tx_f16_to_f32(*(const uint16_t *)t.data); break;
        case TEEXEC_DTYPE_BFLOAT16: *out = tx_bf16_to_f32(*(const uint16_t *)t.data); break;
        case TEEXEC_DTYPE_INT8: *out = *(const int8_t *)t.data; break;
        case TEEXEC_DTYPE_UINT8: *out = *(const uint8_t *)t.data; break;
        case TEEXEC_DTYPE_INT16: *out = *(const int16_t *)t.data; break;
        case TEEXEC_DTYPE_UINT16: *out = *(const uint16_t *)t.data; break;
        case TEEXEC_DTYPE_INT32: *out = *(const int32_t *)t.data; break;
        case TEEXEC_DTYPE_UINT32: *out = *(const uint32_t *)t.data; break;
        case TEEXEC_DTYPE_INT64: *out = (double)*(const int64_t *)t.data; break;
        case TEEXEC_DTYPE_UINT64: *out = (double)*(const uint64_t *)t.data; break;
        case TEEXEC_DTYPE_BOOL: *out = *(const uint8_t *)t.data ? 1.0 : 0.0; break;
        default: ok = false; break;
        }
    }
    tx_tensor_release(&t);
    return ok;
}

static bool io_type(const tx_rw_io *list, size_t n, const char *value, tx_rw_value_type *out)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(list[i].name, value) == 0) {
            if (!list[i].has_type) return false;
            *out = list[i].type;
            return true;
        }
    }
    return false;
}

bool tx_rw_value_type_of(const tx_rw_graph *g, const char *value, tx_rw_value_type *out)
{
    if (!value || !*value) return false;
    memset(out, 0, sizeof *out);
    out->rank = -1;
    int64_t k = tx_rw_init_find(g, value);
    if (k >= 0) {
        const tx_rw_init *in = &g->inits[k];
        if (in->borrowed) {
            if (in->borrowed->n_dims > TX_MAX_RANK) return false;
            out->dtype = (teexec_dtype)in->borrowed->data_type;
            out->rank = (int32_t)in->borrowed->n_dims;
            for (int32_t d = 0; d < out->rank; d++) out->dims[d] = in->borrowed->dims[d];
        } else {
            out->dtype = in->owned.dtype;
            out->rank = in->owned.rank;
            for (int32_t d = 0; d < out->rank; d++) out->dims[d] = in->owned.dims[d];
        }
        return true;
    }
    return io_type(g->inputs, g->n_inputs, value, out) ||
           io_type(g->outputs, g->n_outputs, value, out) ||
           io_type(g->vinfo, g->n_vinfo, value, out);
}

/* ---- edits -------------------------------------------------------------- */

static teexec_status *set_name(char **slot, const char *name)
{
    char *c = tx_rw_strdup(name);
    if (!c) return tx_oom();
    free(*slot);
    *slot = c;
    return NULL;
}

teexec_status *tx_rw_replace_uses(tx_rw_graph *g, const char *from, const char *to)
{
    if (!from || !to || !*from || !*to)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_replace_uses: empty value name");
    if (strcmp(from, to) == 0) return NULL;
    tx_rw_edited(g);
    if (tx_rw_is_graph_output(g, from)) {
        size_t slot = 0;
        int64_t p = tx_rw_producer(g, to, &slot);
        if (p < 0 || tx_rw_is_graph_output(g, to) || tx_rw_is_graph_input(g, to)) {
            /* `to` has no producer to rename (an input or initializer) or
             * its own name must survive too: bridge with an Identity. The
             * old producer of `from` is expected to be removed by the
             * caller, as with renaming. */
            const char *in[1] = {to};
            const char *outn[1] = {from};
            const char *nm = tx_rw_fresh_name(g, "Identity_out");
            if (!nm) return tx_oom();
            size_t old = tx_rw_producer(g, from, NULL) >= 0 ? (size_t)tx_rw_producer(g, from, NULL)
                                                             : SIZE_MAX;
            if (old != SIZE_MAX) {
                /* Rename the old definition so there are never two. */
                const char *dead_name = tx_rw_fresh_name(g, from);
                if (!dead_name) return tx_oom();
                tx_rw_node *on = &g->nodes[old];
                for (size_t o = 0; o < on->n_outputs; o++)
                    if (strcmp(on->outputs[o], from) == 0) TX_TRY(set_name(&on->outputs[o], dead_name));
            }
            return tx_rw_add_node(g, "Identity", "", nm, in, 1, outn, 1, NULL);
        }
        /* Rename the old producer's output first so `from` has one definition. */
        int64_t old = tx_rw_producer(g, from, NULL);
        if (old >= 0) {
            const char *dead_name = tx_rw_fresh_name(g, from);
            if (!dead_name) return tx_oom();
            tx_rw_node *on = &g->nodes[old];
            for (size_t o = 0; o < on->n_outputs; o++)
                if (strcmp(on->outputs[o], from) == 0) TX_TRY(set_name(&on->outputs[o], dead_name));
        }
        TX_TRY(set_name(&g->nodes[p].outputs[slot], from));
        for (size_t i = 0; i < g->n_nodes; i++) {
            tx_rw_node *n = &g->nodes[i];
            if (n->dead) continue;
            for (size_t s = 0; s < n->n_inputs; s++)
                if (strcmp(n->inputs[s], to) == 0) TX_TRY(set_name(&n->inputs[s], from));
        }
        return NULL;
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        tx_rw_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (size_t s = 0; s < n->n_inputs; s++)
            if (strcmp(n->inputs[s], from) == 0) TX_TRY(set_name(&n->inputs[s], to));
    }
    return NULL;
}

const char *tx_rw_fresh_name(tx_rw_graph *g, const char *hint)
{
    if (!hint || !*hint) hint = "v";
    if (tx_rw_grow((void **)&g->fresh, &g->cap_fresh, g->n_fresh + 1, sizeof *g->fresh))
        return NULL;
    size_t len = strlen(hint);
    char *buf = malloc(len + 24);
    if (!buf) return NULL;
    memcpy(buf, hint, len + 1);
    while (tx_rw_name_used(g, buf)) {
        g->fresh_counter++;
        snprintf(buf + len, 24, "_%llu", (unsigned long long)g->fresh_counter);
    }
    g->fresh[g->n_fresh++] = buf;
    return buf;
}

teexec_status *tx_rw_set_initializer(tx_rw_graph *g, const char *name, const tx_tensor *t)
{
    if (!name || !*name || !t || !t->data)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_set_initializer: empty name or tensor");
    tx_tensor copy;
    TX_TRY(tx_tensor_clone(t, &copy));
    int64_t k = tx_rw_init_find(g, name);
    if (k < 0) {
        teexec_status *st =
            tx_rw_grow((void **)&g->inits, &g->cap_inits, g->n_inits + 1, sizeof *g->inits);
        char *nm = st ? NULL : tx_rw_strdup(name);
        if (!st && !nm) st = tx_oom();
        if (st) {
            tx_tensor_release(&copy);
            return st;
        }
        k = (int64_t)g->n_inits++;
        g->inits[k].name = nm;
    } else {
        tx_tensor_release(&g->inits[k].owned);
    }
    g->inits[k].borrowed = NULL;
    g->inits[k].owned = copy;
    tx_rw_edited(g);
    /* A graph input that is also this initializer (older exporters list
     * them) must declare the new type, or the model contradicts itself. */
    for (size_t i = 0; i < g->n_inputs; i++) {
        tx_rw_io *io = &g->inputs[i];
        if (strcmp(io->name, name) != 0) continue;
        for (int d = 0; d < TX_MAX_RANK; d++) {
            free(io->type.dim_params[d]);
            io->type.dim_params[d] = NULL;
        }
        io->has_type = true;
        io->retyped = true;
        io->type.dtype = t->dtype;
        io->type.rank = t->rank;
        for (int32_t d = 0; d < t->rank; d++) io->type.dims[d] = t->dims[d];
    }
    return NULL;
}

/* ---- graph inputs and outputs -------------------------------------------- */

teexec_status *tx_rw_add_input(tx_rw_graph *g, const char *name, const tx_rw_value_type *type)
{
    if (!g || !name || !*name || !type)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_rw_add_input: NULL or empty name");
    if (tx_rw_is_graph_input(g, name))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "rewrite: input \"%s\" exists", name);
    TX_TRY(tx_rw_grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof(*g->inputs)));
    tx_rw_io *io = &g->inputs[g->n_inputs];
    memset(io, 0, sizeof *io);
    io->name = tx_rw_strdup(name);
    io->has_type = true;
    io->retyped = true;
    io->type = *type;
    bool ok = io->name != NULL;
    for (int d = 0; d < TX_MAX_RANK; d++) {
        io->type.dim_params[d] = NULL;
        if (type->dim_params[d] && d < type->rank) {
            io->type.dim_params[d] = tx_rw_strdup(type->dim_params[d]);
            if (!io->type.dim_params[d]) ok = false;
        }
    }
    if (!ok) {
        io_clear(io);
        return tx_oom();
    }
    g->n_inputs++;
    tx_rw_edited(g);
    return NULL;
}

static bool io_remove(tx_rw_io *list, size_t *n, const char *name)
{
    for (size_t i = 0; name && i < *n; i++) {
        if (strcmp(list[i].name, name) != 0) continue;
        io_clear(&list[i]);
        memmove(&list[i], &list[i + 1], (*n - i - 1) * sizeof(*list));
        (*n)--;
        return true;
    }
    return false;
}

bool tx_rw_remove_input(tx_rw_graph *g, const char *name)
{
    bool ok = io_remove(g->inputs, &g->n_inputs, name);
    if (ok) tx_rw_edited(g);
    return ok;
}

bool tx_rw_remove_output(tx_rw_graph *g, const char *name)
{
    bool ok = io_remove(g->outputs, &g->n_outputs, name);
    if (ok) tx_rw_edited(g);
    return ok;
}

void tx_rw_remove_unused_nodes(tx_rw_graph *g, size_t *removed)
{
    size_t count = 0;
    if (removed) *removed = 0;
    /* a subgraph's reads of outer values are not consumers here: a graph
     * with subgraphs is left as it is */
    for (size_t i = 0; i < g->n_nodes; i++)
        for (size_t a = 0; !g->nodes[i].dead && a < g->nodes[i].n_attrs; a++)
            if (g->nodes[i].attrs[a].type == TX_IR_ATTR_GRAPH ||
                g->nodes[i].attrs[a].type == TX_IR_ATTR_GRAPHS)
                return;
    for (bool again = true; again;) {
        again = false;
        for (size_t i = g->n_nodes; i-- > 0;) {
            tx_rw_node *n = &g->nodes[i];
            if (n->dead) continue;
            bool used = false;
            for (size_t j = 0; j < n->n_outputs && !used; j++) {
                const char *o = n->outputs[j];
                if (!o || !*o) continue;
                size_t nc = 0;
                (void)tx_rw_consumers(g, o, &nc);
                used = nc > 0 || tx_rw_is_graph_output(g, o);
            }
            if (used) continue;
            tx_rw_remove_node(g, i);
            count++;
            again = true;
        }
    }
    if (removed) *removed = count;
}
