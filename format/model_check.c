/* model_check.c - tensor walk and structural checks on an unpacked ModelProto. */
#include "format/model_check.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "base/tensor.h"

#include <stdio.h>

typedef struct walk {
    tx_tensor_visit_fn fn;
    void *ctx;
    const char *function;
} walk;

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

static teexec_status *walk_graph(walk *w, const Onnx__GraphProto *g, int depth);

static teexec_status *visit(walk *w, const Onnx__TensorProto *tp, tx_tensor_site *site)
{
    return tp ? w->fn(w->ctx, tp, site) : NULL;
}

static teexec_status *walk_sparse(walk *w, const Onnx__SparseTensorProto *sp,
                                  tx_tensor_site *site)
{
    if (!sp) return NULL;
    tx_tensor_site_kind k = site->kind;
    site->kind = TX_SITE_SPARSE_VALUES;
    TX_TRY(visit(w, sp->values, site));
    site->kind = TX_SITE_SPARSE_INDICES;
    TX_TRY(visit(w, sp->indices, site));
    site->kind = k;
    return NULL;
}

/* Recursion here follows subgraph attributes; its depth was bounded by the
 * wire pre-scan (max_nesting_depth) before the message was unpacked. */
static teexec_status *walk_nodes(walk *w, Onnx__NodeProto *const *nodes, size_t n,
                                 const char *graph, int depth)
{
    for (size_t i = 0; i < n; i++) {
        const Onnx__NodeProto *node = nodes[i];
        for (size_t a = 0; a < node->n_attribute; a++) {
            const Onnx__AttributeProto *at = node->attribute[a];
            tx_tensor_site site = {TX_SITE_ATTRIBUTE, graph, w->function,
                                   str_or_empty(node->name), str_or_empty(at->name), depth};
            TX_TRY(visit(w, at->t, &site));
            for (size_t k = 0; k < at->n_tensors; k++) TX_TRY(visit(w, at->tensors[k], &site));
            TX_TRY(walk_sparse(w, at->sparse_tensor, &site));
            for (size_t k = 0; k < at->n_sparse_tensors; k++)
                TX_TRY(walk_sparse(w, at->sparse_tensors[k], &site));
            if (at->g) TX_TRY(walk_graph(w, at->g, depth + 1));
            for (size_t k = 0; k < at->n_graphs; k++)
                TX_TRY(walk_graph(w, at->graphs[k], depth + 1));
        }
    }
    return NULL;
}

static teexec_status *walk_graph(walk *w, const Onnx__GraphProto *g, int depth)
{
    if (!g) return NULL;
    const char *gname = str_or_empty(g->name);
    tx_tensor_site site = {TX_SITE_INITIALIZER, gname, w->function, NULL, NULL, depth};
    for (size_t i = 0; i < g->n_initializer; i++) TX_TRY(visit(w, g->initializer[i], &site));
    for (size_t i = 0; i < g->n_sparse_initializer; i++)
        TX_TRY(walk_sparse(w, g->sparse_initializer[i], &site));
    return walk_nodes(w, g->node, g->n_node, gname, depth);
}

teexec_status *tx_graph_for_each_tensor(const Onnx__GraphProto *graph, tx_tensor_visit_fn fn,
                                        void *ctx)
{
    walk w = {fn, ctx, NULL};
    return walk_graph(&w, graph, 0);
}

teexec_status *tx_model_for_each_tensor(const Onnx__ModelProto *model, tx_tensor_visit_fn fn,
                                        void *ctx)
{
    walk w = {fn, ctx, NULL};
    TX_TRY(walk_graph(&w, model->graph, 0));
    for (size_t i = 0; i < model->n_training_info; i++) {
        const Onnx__TrainingInfoProto *ti = model->training_info[i];
        TX_TRY(walk_graph(&w, ti->initialization, 1));
        TX_TRY(walk_graph(&w, ti->algorithm, 1));
    }
    for (size_t i = 0; i < model->n_functions; i++) {
        const Onnx__FunctionProto *fn_proto = model->functions[i];
        w.function = str_or_empty(fn_proto->name);
        TX_TRY(walk_nodes(&w, fn_proto->node, fn_proto->n_node, "", 1));
    }
    return NULL;
}

const char *tx_tensor_site_describe(const Onnx__TensorProto *tp, const tx_tensor_site *site,
                                    char *buf, size_t size)
{
    const char *name = tp ? str_or_empty(tp->name) : "";
    const char *where = site->function ? "function" : "graph";
    const char *wname = site->function ? site->function : site->graph;
    switch (site->kind) {
    case TX_SITE_INITIALIZER:
        snprintf(buf, size, "initializer '%s' in %s '%s'", name, where, wname);
        break;
    case TX_SITE_SPARSE_VALUES:
    case TX_SITE_SPARSE_INDICES:
        snprintf(buf, size, "sparse tensor %s '%s' in %s '%s'",
                 site->kind == TX_SITE_SPARSE_VALUES ? "values" : "indices", name, where, wname);
        break;
    case TX_SITE_ATTRIBUTE:
        snprintf(buf, size, "tensor in attribute '%s' of node '%s' in %s '%s'",
                 str_or_empty(site->attribute), str_or_empty(site->node), where, wname);
        break;
    }
    return buf;
}

static teexec_status *check_dims(const int64_t *dims, size_t n, const teexec_load_options *lim,
                                 const char *what)
{
    if (n > lim->max_rank)
        return tx_error(TEEXEC_ERR_LIMIT, "%s has %zu dims, over the rank budget (max_rank = %u)",
                        what, n, lim->max_rank);
    uint64_t numel = 1;
    for (size_t i = 0; i < n; i++) {
        if (dims[i] < 0)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "%s has a negative dimension %lld (dim %zu)",
                            what, (long long)dims[i], i);
    }
    for (size_t i = 0; i < n; i++) {
        if (!tx_mul_u64(numel, (uint64_t)dims[i], &numel))
            return tx_error(TEEXEC_ERR_LIMIT,
                            "%s: element count overflows 64 bits, over the element budget "
                            "(max_tensor_elements = %llu)",
                            what, (unsigned long long)lim->max_tensor_elements);
    }
    if (numel > lim->max_tensor_elements)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "%s has %llu elements, over the element budget "
                        "(max_tensor_elements = %llu)",
                        what, (unsigned long long)numel,
                        (unsigned long long)lim->max_tensor_elements);
    return NULL;
}

teexec_status *tx_tensor_proto_check(const Onnx__TensorProto *tp,
                                     const teexec_load_options *limits, bool need_dtype,
                                     const char *what)
{
    TX_TRY(check_dims(tp->dims, tp->n_dims, limits, what));
    if (tp->segment)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s uses TensorProto.segment (chunked tensors), which teexec does not "
                        "support",
                        what);
    if (need_dtype) {
        if (!tp->has_data_type || tp->data_type == 0)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "%s has no data_type (UNDEFINED)", what);
        if (tp->data_type < 0)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "%s has an invalid data_type %d", what,
                            (int)tp->data_type);
        if (!tx_dtype_valid(tp->data_type))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "%s has data_type %d, newer than teexec knows (1..%d)", what,
                            (int)tp->data_type, TEEXEC_DTYPE_COUNT - 1);
    }
    return NULL;
}

typedef struct check_ctx {
    const teexec_load_options *limits;
} check_ctx;

static teexec_status *check_visit(void *ctx, const Onnx__TensorProto *tp,
                                  const tx_tensor_site *site)
{
    const check_ctx *c = ctx;
    char what[512];
    tx_tensor_site_describe(tp, site, what, sizeof what);
    teexec_status *st = tx_tensor_proto_check(tp, c->limits, true, what);
    if (st && site->node) st = tx_status_with_node(st, site->node);
    return st;
}

/* Sparse tensors' own dims (the dense shape) are checked with the same rules. */
static teexec_status *check_sparse_dims(const Onnx__SparseTensorProto *sp,
                                        const teexec_load_options *lim, const char *where)
{
    if (!sp) return NULL;
    char what[512];
    snprintf(what, sizeof what, "sparse tensor '%s' in %s",
             sp->values && sp->values->name ? sp->values->name : "", where);
    return check_dims(sp->dims, sp->n_dims, lim, what);
}

static teexec_status *check_graph_sparse(const Onnx__GraphProto *g,
                                         const teexec_load_options *lim);

static teexec_status *check_nodes_sparse(Onnx__NodeProto *const *nodes, size_t n,
                                         const teexec_load_options *lim, const char *where)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t a = 0; a < nodes[i]->n_attribute; a++) {
            const Onnx__AttributeProto *at = nodes[i]->attribute[a];
            TX_TRY(check_sparse_dims(at->sparse_tensor, lim, where));
            for (size_t k = 0; k < at->n_sparse_tensors; k++)
                TX_TRY(check_sparse_dims(at->sparse_tensors[k], lim, where));
            if (at->g) TX_TRY(check_graph_sparse(at->g, lim));
            for (size_t k = 0; k < at->n_graphs; k++) TX_TRY(check_graph_sparse(at->graphs[k], lim));
        }
    }
    return NULL;
}

static teexec_status *check_graph_sparse(const Onnx__GraphProto *g,
                                         const teexec_load_options *lim)
{
    if (!g) return NULL;
    char where[300];
    snprintf(where, sizeof where, "graph '%s'", str_or_empty(g->name));
    for (size_t i = 0; i < g->n_sparse_initializer; i++)
        TX_TRY(check_sparse_dims(g->sparse_initializer[i], lim, where));
    return check_nodes_sparse(g->node, g->n_node, lim, where);
}

teexec_status *tx_model_check(const Onnx__ModelProto *model, const teexec_load_options *limits)
{
    if (!model->graph) return tx_error(TEEXEC_ERR_BAD_MODEL, "the model has no graph");
    check_ctx c = {limits};
    TX_TRY(tx_model_for_each_tensor(model, check_visit, &c));
    TX_TRY(check_graph_sparse(model->graph, limits));
    for (size_t i = 0; i < model->n_training_info; i++) {
        TX_TRY(check_graph_sparse(model->training_info[i]->initialization, limits));
        TX_TRY(check_graph_sparse(model->training_info[i]->algorithm, limits));
    }
    for (size_t i = 0; i < model->n_functions; i++) {
        char where[300];
        snprintf(where, sizeof where, "function '%s'", str_or_empty(model->functions[i]->name));
        TX_TRY(check_nodes_sparse(model->functions[i]->node, model->functions[i]->n_node, limits,
                                  where));
    }
    return NULL;
}
