/* param_map.c - where each of the user's initializers lives in a lowered
 * model (tx_param_sources), and getting its value or gradient back in the
 * user's layout (tx_param_to_original). Reads the weight_source /
 * weight_layout / weight_split and bias_source / bias_split annotations
 * that lower.h describes. */
#include "import/lower.h"

#include "base/checked.h"
#include "format/te_schema.h"

#include <stdlib.h>
#include <string.h>

typedef struct src_list {
    tx_param_source *v;
    size_t n, cap;
} src_list;

void tx_param_sources_free(tx_param_source *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) {
        free(s[i].original);
        free(s[i].lowered);
    }
    free(s);
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static teexec_status *push(src_list *l, const char *orig, size_t orig_len, const char *lowered,
                           bool transposed, int64_t row_offset, int64_t rows,
                           const tx_ir_attr *shape)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        tx_param_source *p = realloc(l->v, cap * sizeof *p);
        if (!p) return tx_oom();
        l->v = p;
        l->cap = cap;
    }
    tx_param_source s = {dupn(orig, orig_len), dupn(lowered, strlen(lowered)), transposed,
                         row_offset, rows, 0, {0}, 1};
    if (shape) {
        s.orig_rank = (int32_t)shape->n_ints;
        memcpy(s.orig_dims, shape->ints, shape->n_ints * sizeof *shape->ints);
    }
    if (!s.original || !s.lowered) {
        free(s.original);
        free(s.lowered);
        return tx_oom();
    }
    l->v[l->n++] = s;
    return NULL;
}

/* True when `name` needs no entry of its own: it is the original of an
 * entry (a weight transposed in place keeps its name), or rows of it
 * belong to merged sources (a fresh gate|up weight). A tied table that a
 * head's weight maps to is neither: it maps to itself too. */
static bool listed_lowered(const src_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].original, name) == 0 ||
            (strcmp(l->v[i].lowered, name) == 0 && l->v[i].rows >= 0))
            return true;
    return false;
}

/* The input slot of the parameter port called `port` of a te.ops node, or
 * -1 (parameters follow the main input and every extra input). */
static int param_slot(const tx_ir_node *n, const char *port)
{
    const tx_te_op_schema *s = tx_te_schema_find(n->op_type);
    if (!s) return -1;
    for (int p = 0; p < s->n_params; p++)
        if (strcmp(s->params[p].name, port) == 0) return 1 + s->n_extra_inputs + p;
    return -1;
}

/* One annotation: "a" or "a,b,..." with the rows of each in `split`. */
static teexec_status *annotate(const tx_ir_graph *g, const tx_ir_node *n, const char *src_attr,
                               const char *split_attr, const char *layout_attr,
                               const char *port, src_list *l)
{
    const tx_ir_attr *a = tx_ir_attr_find(n, src_attr);
    if (!a) return NULL;
    if (a->type != TX_IR_ATTR_STRING)
        return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, n->label,
                             "node \"%s\" (%s): attribute %s must be a string", n->label,
                             n->op_type, src_attr);
    int slot = param_slot(n, port);
    /* Ops that are not in the schema name their parameter "weight" or
     * "bias" by position: 1 then 2, as Linear/Bias/LayerNorm do. */
    if (slot < 0) slot = strcmp(port, "bias") == 0 && n->n_inputs > 2 ? 2 : 1;
    if ((size_t)slot >= n->n_inputs || n->inputs[slot] < 0)
        return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, n->label,
                             "node \"%s\" (%s) has %s but no %s input", n->label, n->op_type,
                             src_attr, port);
    const char *lowered = g->values[n->inputs[slot]].name;
    bool transposed = false;
    const tx_ir_attr *lay = layout_attr ? tx_ir_attr_find(n, layout_attr) : NULL;
    if (lay && lay->type == TX_IR_ATTR_STRING) transposed = strcmp(lay->s, "KN") == 0;
    const tx_ir_attr *split = tx_ir_attr_find(n, split_attr);
    const tx_ir_attr *shape = layout_attr ? tx_ir_attr_find(n, "weight_shape") : NULL;
    if (shape && (shape->type != TX_IR_ATTR_INTS || shape->n_ints < 1 ||
                  shape->n_ints > TX_PARAM_MAX_RANK))
        return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, n->label,
                             "node \"%s\" (%s): weight_shape must be 1 to %d ints", n->label,
                             n->op_type, TX_PARAM_MAX_RANK);
    for (size_t k = 0; shape && k < shape->n_ints; k++)
        if (shape->ints[k] < 0)
            return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, n->label,
                                 "node \"%s\": negative weight_shape entry", n->label);

    size_t count = 1;
    for (const char *p = a->s; *p; p++) count += *p == ',';
    if (count > 1 && (!split || split->type != TX_IR_ATTR_INTS || split->n_ints != count))
        return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, n->label,
                             "node \"%s\" (%s): %s names %zu sources but %s does not give %zu "
                             "row counts",
                             n->label, n->op_type, src_attr, count, split_attr, count);
    const char *p = a->s;
    int64_t offset = 0;
    for (size_t k = 0; k < count; k++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int64_t rows = count > 1 ? split->ints[k] : -1;
        if (count > 1 && rows < 0)
            return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, n->label,
                                 "node \"%s\": negative %s entry", n->label, split_attr);
        /* The same weight read by two Linears is one source. */
        bool dup = false;
        for (size_t i = 0; i < l->n && !dup; i++)
            dup = strlen(l->v[i].original) == len && strncmp(l->v[i].original, p, len) == 0 &&
                  strcmp(l->v[i].lowered, lowered) == 0;
        if (!dup)
            TX_TRY(push(l, p, len, lowered, transposed, count > 1 ? offset : 0, rows,
                        count == 1 ? shape : NULL));
        if (count > 1 && __builtin_add_overflow(offset, rows, &offset))
            return tx_status_new(TEEXEC_ERR_BAD_MODEL, NULL, n->label,
                                 "node \"%s\": %s overflows", n->label, split_attr);
        p = end ? end + 1 : p + len;
    }
    return NULL;
}

teexec_status *tx_param_sources(const tx_ir_graph *lowered, tx_param_source **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    src_list l = {0};
    teexec_status *st = NULL;
    for (size_t i = 0; i < lowered->n_nodes && !st; i++) {
        const tx_ir_node *nd = &lowered->nodes[i];
        st = annotate(lowered, nd, "weight_source", "weight_split", "weight_layout", "weight", &l);
        if (!st) st = annotate(lowered, nd, "bias_source", "bias_split", NULL, "bias", &l);
    }
    for (size_t i = 0; i < lowered->n_initializers && !st; i++) {
        const char *name = lowered->values[lowered->initializers[i]].name;
        if (!listed_lowered(&l, name))
            st = push(&l, name, strlen(name), name, false, 0, -1, NULL);
    }
    if (st) {
        for (size_t i = 0; i < l.n; i++) {
            free(l.v[i].original);
            free(l.v[i].lowered);
        }
        free(l.v);
        return st;
    }
    *out = l.v;
    *n = l.n;
    return NULL;
}

teexec_status *tx_param_to_original(const tx_param_source *src, const tx_tensor *t,
                                    tx_tensor *out)
{
    memset(out, 0, sizeof *out);
    size_t es = tx_dtype_elem_size(t->dtype);
    if (!es || t->dtype == TEEXEC_DTYPE_STRING)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "parameter %s: %s elements cannot be remapped",
                        src->original, teexec_dtype_name(t->dtype));
    if (t->rank < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "parameter %s: scalar has no rows",
                        src->original);
    int64_t total_rows = t->dims[0];
    int64_t first = src->rows < 0 ? 0 : src->row_offset;
    int64_t rows = src->rows < 0 ? total_rows : src->rows;
    int64_t end;
    if (first < 0 || __builtin_add_overflow(first, rows, &end) || end > total_rows)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "parameter %s: rows %lld..%lld outside %s's %lld rows", src->original,
                        (long long)first, (long long)(first + rows), src->lowered,
                        (long long)total_rows);
    if (src->transposed && t->rank != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "parameter %s: only a rank-2 weight can be transposed back (rank %d)",
                        src->original, (int)t->rank);
    uint64_t row_elems = 1;
    if (!tx_dims_product(t->dims + 1, (size_t)(t->rank - 1), &row_elems))
        return tx_error(TEEXEC_ERR_LIMIT, "parameter %s: size overflows", src->original);
    int64_t dims[TX_MAX_RANK];
    memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    dims[0] = rows;
    if (src->transposed) {
        dims[0] = t->dims[1];
        dims[1] = rows;
    }
    int64_t repeat = src->repeat > 1 ? src->repeat : 1;
    if (repeat > 1 && dims[0] != 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "parameter %s: only a tensor of one row can be repeated (%lld rows)",
                        src->original, (long long)dims[0]);
    dims[0] *= repeat;
    TX_TRY(tx_tensor_alloc(out, t->dtype, t->rank, dims));
    const uint8_t *in = (const uint8_t *)t->data + (size_t)first * (size_t)row_elems * es;
    uint8_t *o = out->data;
    size_t one = (size_t)rows * (size_t)row_elems * es; /* bytes of one copy */
    if (!src->transposed) {
        memcpy(o, in, one);
    } else {
        size_t cols = (size_t)t->dims[1];
        for (size_t r = 0; r < (size_t)rows; r++)
            for (size_t c = 0; c < cols; c++)
                memcpy(o + (c * (size_t)rows + r) * es, in + (r * cols + c) * es, es);
    }
    for (int64_t k = 1; k < repeat; k++) memcpy(o + (size_t)k * one, o, one);
    if (src->orig_rank > 0) {
        /* the same elements in the original's shape (a patch Conv's weight) */
        uint64_t want = 1, have = out->numel;
        if (src->orig_rank > TX_PARAM_MAX_RANK ||
            !tx_dims_product(src->orig_dims, (size_t)src->orig_rank, &want) || want != have) {
            tx_tensor_release(out);
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "parameter %s: its original shape (weight_shape) does not hold the "
                            "%llu elements of %s", src->original, (unsigned long long)have,
                            src->lowered);
        }
        out->rank = src->orig_rank;
        memcpy(out->dims, src->orig_dims, (size_t)src->orig_rank * sizeof *src->orig_dims);
    }
    return NULL;
}
