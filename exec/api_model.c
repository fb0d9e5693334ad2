/*
 * api_model.c - the public model API: load (loader -> IR -> validation ->
 * one decode of every stored tensor) and the introspection getters, whose
 * tables are all computed at load so that getters are plain reads.
 */
#include "exec/model_internal.h"

#include "exec/prepare.h"
#include "exec/weight_share.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "base/tensor.h"

#include <stdlib.h>
#include <string.h>

/* ---- release */

void teexec_model_destroy(teexec_model *model)
{
    if (!model) return;
    tx_prepared_free(model->prepared);
    tx_weight_share_destroy(model->weights);
    free(model->opsets);
    free(model->inputs);
    free(model->outputs);
    free(model->ops);
    free(model->externals);
    free(model->functions);
    tx_external_stats_free(model->external_stats, model->n_external_stats);
    /* The IR points into the file: free it first. */
    tx_ir_model_free(model->ir);
    tx_onnx_file_free(model->file);
    free(model);
}

/* ---- load-time checks */

/* ---- introspection tables */

static teexec_status *build_opsets(teexec_model *m)
{
    const tx_ir_model *ir = m->ir;
    m->opsets = calloc(ir->n_opsets ? ir->n_opsets : 1, sizeof *m->opsets);
    if (!m->opsets) return tx_oom();
    for (size_t i = 0; i < ir->n_opsets; i++) {
        m->opsets[i].domain = ir->opsets[i].domain;
        m->opsets[i].version = ir->opsets[i].version;
    }
    m->n_opsets = ir->n_opsets;
    return NULL;
}

static void value_info_from(const tx_ir_value *v, teexec_value_info *out)
{
    out->name = v->name;
    out->kind = v->kind == TX_IR_KIND_UNKNOWN ? TEEXEC_VALUE_TENSOR : (teexec_value_kind)v->kind;
    out->dtype = v->dtype;
    out->rank = v->rank;
    out->dims = v->rank > 0 ? v->dims : NULL;
    out->dim_params = v->rank > 0 ? (const char *const *)v->dim_params : NULL;
}

static teexec_status *build_io(teexec_model *m)
{
    const tx_ir_graph *g = m->ir->graph;
    m->inputs = calloc(g->n_inputs ? g->n_inputs : 1, sizeof *m->inputs);
    m->outputs = calloc(g->n_outputs ? g->n_outputs : 1, sizeof *m->outputs);
    if (!m->inputs || !m->outputs) return tx_oom();
    for (size_t i = 0; i < g->n_inputs; i++) {
        const tx_ir_value *v = &g->values[g->inputs[i]];
        if (v->flags & (TX_IR_VALUE_INITIALIZER | TX_IR_VALUE_SPARSE_INIT)) continue;
        value_info_from(v, &m->inputs[m->n_inputs++]);
    }
    for (size_t i = 0; i < g->n_outputs; i++)
        value_info_from(&g->values[g->outputs[i]], &m->outputs[m->n_outputs++]);
    return NULL;
}

/* (domain, op_type) -> count, open addressing; strings point into the IR. */
typedef struct op_table {
    teexec_op_count *slots;
    size_t cap;
    size_t n;
} op_table;

static uint64_t op_hash(const char *domain, const char *op)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)domain; *p; p++) h = (h ^ *p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; /* separator: ("a","bc") != ("ab","c") */
    for (const unsigned char *p = (const unsigned char *)op; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return h;
}

static teexec_status *op_table_add(op_table *t, const char *domain, const char *op)
{
    if (t->n * 2 >= t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        teexec_op_count *slots = calloc(cap, sizeof *slots);
        if (!slots) return tx_oom();
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].op_type) continue;
            size_t j = (size_t)op_hash(t->slots[i].domain, t->slots[i].op_type) & (cap - 1);
            while (slots[j].op_type) j = (j + 1) & (cap - 1);
            slots[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    size_t j = (size_t)op_hash(domain, op) & (t->cap - 1);
    while (t->slots[j].op_type) {
        if (strcmp(t->slots[j].domain, domain) == 0 && strcmp(t->slots[j].op_type, op) == 0) {
            t->slots[j].count++;
            return NULL;
        }
        j = (j + 1) & (t->cap - 1);
    }
    t->slots[j].domain = domain;
    t->slots[j].op_type = op;
    t->slots[j].count = 1;
    t->n++;
    return NULL;
}

static teexec_status *count_ops(op_table *t, const tx_ir_graph *g)
{
    for (size_t n = 0; n < g->n_nodes; n++) {
        const tx_ir_node *node = &g->nodes[n];
        TX_TRY(op_table_add(t, node->domain, node->op_type));
        for (size_t a = 0; a < node->n_attrs; a++) {
            const tx_ir_attr *at = &node->attrs[a];
            if (at->g) TX_TRY(count_ops(t, at->g));
            for (size_t k = 0; k < at->n_graphs; k++)
                if (at->graphs[k]) TX_TRY(count_ops(t, at->graphs[k]));
        }
    }
    return NULL;
}

static int op_cmp(const void *a, const void *b)
{
    const teexec_op_count *x = a, *y = b;
    int c = strcmp(x->domain, y->domain);
    return c ? c : strcmp(x->op_type, y->op_type);
}

static teexec_status *build_ops(teexec_model *m)
{
    op_table t = {NULL, 0, 0};
    teexec_status *st = count_ops(&t, m->ir->graph);
    for (size_t f = 0; !st && f < m->ir->n_functions; f++)
        if (m->ir->functions[f].body) st = count_ops(&t, m->ir->functions[f].body);
    if (!st) {
        m->ops = calloc(t.n ? t.n : 1, sizeof *m->ops);
        if (!m->ops) st = tx_oom();
    }
    if (!st) {
        for (size_t i = 0; i < t.cap; i++)
            if (t.slots[i].op_type) m->ops[m->n_ops++] = t.slots[i];
        qsort(m->ops, m->n_ops, sizeof *m->ops, op_cmp);
    }
    free(t.slots);
    return st;
}

static void add_param(teexec_param_stats *p, int dt, uint64_t elements, uint64_t bytes)
{
    /* Totals saturate rather than wrap: they are for display. */
    p->count++;
    if (!tx_add_u64(p->elements, elements, &p->elements)) p->elements = UINT64_MAX;
    if (!tx_add_u64(p->bytes, bytes, &p->bytes)) p->bytes = UINT64_MAX;
    p->count_by_dtype[dt]++;
    if (!tx_add_u64(p->elements_by_dtype[dt], elements, &p->elements_by_dtype[dt]))
        p->elements_by_dtype[dt] = UINT64_MAX;
    if (!tx_add_u64(p->bytes_by_dtype[dt], bytes, &p->bytes_by_dtype[dt]))
        p->bytes_by_dtype[dt] = UINT64_MAX;
}

/* Initializers of g and its nested graphs. A sparse initializer counts its
 * stored values (elements) and values + indices (bytes), under the values'
 * dtype. */
static void count_params(teexec_param_stats *p, const tx_ir_graph *g)
{
    for (size_t i = 0; i < g->n_initializers; i++) {
        int dt;
        uint64_t e, b;
        if (tx_ir_initializer_size(&g->values[g->initializers[i]], &dt, &e, &b))
            add_param(p, dt, e, b);
    }
    for (size_t n = 0; n < g->n_nodes; n++)
        for (size_t a = 0; a < g->nodes[n].n_attrs; a++) {
            const tx_ir_attr *at = &g->nodes[n].attrs[a];
            if (at->g) count_params(p, at->g);
            for (size_t k = 0; k < at->n_graphs; k++)
                if (at->graphs[k]) count_params(p, at->graphs[k]);
        }
}

static teexec_status *build_externals(teexec_model *m)
{
    TX_TRY(tx_external_stats(m->file, &m->external_stats, &m->n_external_stats));
    size_t n = m->n_external_stats;
    m->externals = calloc(n ? n : 1, sizeof *m->externals);
    if (!m->externals) return tx_oom();
    for (size_t i = 0; i < n; i++) {
        m->externals[i].location = m->external_stats[i].location;
        m->externals[i].bytes = m->external_stats[i].bytes;
        m->externals[i].tensors = m->external_stats[i].tensors;
    }
    m->n_externals = n;
    return NULL;
}

static teexec_status *build_functions(teexec_model *m)
{
    const tx_ir_model *ir = m->ir;
    m->functions = calloc(ir->n_functions ? ir->n_functions : 1, sizeof *m->functions);
    if (!m->functions) return tx_oom();
    for (size_t i = 0; i < ir->n_functions; i++) {
        const tx_ir_function *f = &ir->functions[i];
        teexec_function_info *o = &m->functions[i];
        o->domain = f->domain;
        o->name = f->name;
        o->overload = f->overload;
        o->node_count = f->body ? f->body->n_nodes : 0;
        o->input_count = f->n_inputs;
        o->output_count = f->n_outputs;
    }
    m->n_functions = ir->n_functions;
    return NULL;
}

/* Everything after the loader: IR, validation, tensor checks, tables. */
static teexec_status *finish_load(teexec_model *m)
{
    TX_TRY(tx_ir_build(m->file, &m->ir));
    TX_TRY(tx_ir_validate(m->ir));
    TX_TRY(tx_ir_check_tensors(m->file, m->ir->graph));
    for (size_t f = 0; f < m->ir->n_functions; f++)
        if (m->ir->functions[f].body)
            TX_TRY(tx_ir_check_tensors(m->file, m->ir->functions[f].body));
    TX_TRY(build_opsets(m));
    TX_TRY(build_io(m));
    TX_TRY(build_ops(m));
    count_params(&m->params, m->ir->graph);
    TX_TRY(build_externals(m));
    TX_TRY(build_functions(m));
    return NULL;
}

/* prepare: lower the model once for the executors (exec/prepare.h); off
 * for derived copies, which are already lowered. */
static teexec_status *load_common(tx_onnx_file *file, const char *path, bool prepare,
                                  teexec_model **out)
{
    teexec_model *m = calloc(1, sizeof *m);
    if (!m) {
        tx_onnx_file_free(file);
        return tx_status_with_file(tx_oom(), path);
    }
    m->file = file;
    teexec_status *st = tx_weight_share_create(&m->weights);
    if (!st) st = finish_load(m);
    if (!st && prepare) st = tx_prepare_at_load(m);
    if (st) {
        teexec_model_destroy(m);
        return tx_status_with_file(st, path);
    }
    *out = m;
    return NULL;
}

teexec_status *teexec_model_load_file(const char *path, const teexec_load_options *options,
                                      teexec_model **out_model)
{
    if (!out_model)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "teexec_model_load_file: out_model is NULL");
    *out_model = NULL;
    if (!path || !path[0])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "teexec_model_load_file: no path given");
    tx_onnx_file *file = NULL;
    teexec_status *st = tx_onnx_load_file(path, options, &file);
    if (st) return tx_status_with_file(st, path);
    return load_common(file, path, true, out_model);
}

teexec_status *teexec_model_load_memory(const void *data, size_t size, const char *base_dir,
                                        const teexec_load_options *options,
                                        teexec_model **out_model)
{
    if (!out_model)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "teexec_model_load_memory: out_model is NULL");
    *out_model = NULL;
    if (!data && size)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "teexec_model_load_memory: data is NULL");
    tx_onnx_file *file = NULL;
    TX_TRY(tx_onnx_load_memory(data, size, base_dir, options, &file));
    return load_common(file, NULL, true, out_model);
}

teexec_status *tx_model_load_derived(const void *data, size_t size, const char *base_dir,
                                     const teexec_load_options *limits, tx_side_data *side,
                                     teexec_model **out)
{
    *out = NULL;
    tx_onnx_file *file = NULL;
    TX_TRY(tx_onnx_load_memory(data, size, base_dir, limits, &file));
    if (side) {
        /* before the tensors are checked: they read it */
        file->side = *side;
        memset(side, 0, sizeof *side);
    }
    return load_common(file, NULL, false, out);
}

/* ---- getters */

const char *teexec_model_producer_name(const teexec_model *model)
{
    return model && model->ir ? model->ir->producer_name : "";
}

const char *teexec_model_producer_version(const teexec_model *model)
{
    return model && model->ir ? model->ir->producer_version : "";
}

int64_t teexec_model_ir_version(const teexec_model *model)
{
    return model && model->ir ? model->ir->ir_version : 0;
}

const char *teexec_model_path(const teexec_model *model)
{
    return model && model->file ? model->file->path : NULL;
}

size_t teexec_model_opset_count(const teexec_model *model)
{
    return model ? model->n_opsets : 0;
}

const teexec_opset *teexec_model_opset(const teexec_model *model, size_t index)
{
    return model && index < model->n_opsets ? &model->opsets[index] : NULL;
}

size_t teexec_model_input_count(const teexec_model *model)
{
    return model ? model->n_inputs : 0;
}

const teexec_value_info *teexec_model_input(const teexec_model *model, size_t index)
{
    return model && index < model->n_inputs ? &model->inputs[index] : NULL;
}

size_t teexec_model_output_count(const teexec_model *model)
{
    return model ? model->n_outputs : 0;
}

const teexec_value_info *teexec_model_output(const teexec_model *model, size_t index)
{
    return model && index < model->n_outputs ? &model->outputs[index] : NULL;
}

size_t teexec_model_op_count(const teexec_model *model)
{
    return model ? model->n_ops : 0;
}

const teexec_op_count *teexec_model_op(const teexec_model *model, size_t index)
{
    return model && index < model->n_ops ? &model->ops[index] : NULL;
}

void teexec_model_param_stats(const teexec_model *model, teexec_param_stats *out_stats)
{
    if (!out_stats) return;
    if (!model) {
        memset(out_stats, 0, sizeof *out_stats);
        return;
    }
    *out_stats = model->params;
}

size_t teexec_model_external_file_count(const teexec_model *model)
{
    return model ? model->n_externals : 0;
}

const teexec_external_file *teexec_model_external_file(const teexec_model *model, size_t index)
{
    return model && index < model->n_externals ? &model->externals[index] : NULL;
}

size_t teexec_model_function_count(const teexec_model *model)
{
    return model ? model->n_functions : 0;
}

const teexec_function_info *teexec_model_function(const teexec_model *model, size_t index)
{
    return model && index < model->n_functions ? &model->functions[index] : NULL;
}

uint64_t teexec_model_node_count(const teexec_model *model)
{
    return model && model->ir ? model->ir->graph->n_nodes : 0;
}
