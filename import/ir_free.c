/*
 * ir_free.c - releasing an IR. Everything the IR owns is freed; the
 * tx_onnx_file it points into is not touched.
 */
#include "import/ir_internal.h"

#include <stdlib.h>

static void attr_free(tx_ir_attr *a)
{
    free(a->name);
    free(a->ref_attr_name);
    free(a->s);
    tx_ir_graph_free(a->g);
    for (size_t i = 0; i < a->n_strings; i++) free(a->strings[i]);
    free(a->strings);
    free(a->string_lens);
    if (a->graphs)
        for (size_t i = 0; i < a->n_graphs; i++) tx_ir_graph_free(a->graphs[i]);
    free(a->graphs);
}

static void node_free(tx_ir_node *n)
{
    free(n->name);
    free(n->label);
    free(n->op_type);
    free(n->domain);
    free(n->overload);
    free(n->inputs);
    free(n->outputs);
    free(n->implicit_inputs);
    if (n->attrs)
        for (size_t i = 0; i < n->n_attrs; i++) attr_free(&n->attrs[i]);
    free(n->attrs);
}

static void value_free(tx_ir_value *v)
{
    free(v->name);
    if (v->dim_params)
        for (int32_t d = 0; d < v->rank; d++) free(v->dim_params[d]);
    free(v->dim_params);
    free(v->dims);
    free(v->consumers);
}

void tx_ir_graph_free(tx_ir_graph *g)
{
    if (!g) return;
    free(g->name);
    if (g->values)
        for (size_t i = 0; i < g->n_values; i++) value_free(&g->values[i]);
    free(g->values);
    if (g->nodes)
        for (size_t i = 0; i < g->n_nodes; i++) node_free(&g->nodes[i]);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->initializers);
    free(g->index.slots);
    free(g);
}

static void opsets_free(tx_ir_opset *o, size_t n)
{
    if (o)
        for (size_t i = 0; i < n; i++) free(o[i].domain);
    free(o);
}

static void strings_free(char **s, size_t n)
{
    if (s)
        for (size_t i = 0; i < n; i++) free(s[i]);
    free(s);
}

void tx_ir_model_free(tx_ir_model *model)
{
    if (!model) return;
    tx_ir_graph_free(model->graph);
    if (model->functions) {
        for (size_t i = 0; i < model->n_functions; i++) {
            tx_ir_function *f = &model->functions[i];
            free(f->domain);
            free(f->name);
            free(f->overload);
            strings_free(f->inputs, f->n_inputs);
            strings_free(f->outputs, f->n_outputs);
            strings_free(f->attributes, f->n_attributes);
            tx_ir_graph_free(f->body);
            opsets_free(f->opsets, f->n_opsets);
        }
    }
    free(model->functions);
    opsets_free(model->opsets, model->n_opsets);
    free(model->producer_name);
    free(model->producer_version);
    free(model->domain);
    free(model);
}
