/*
 * infer_graph.c - the value-typing pass (infer_graph.h): one step per node
 * (the node's rule, then its evaluation when its inputs are all known
 * values), and tx_infer_graph over a loaded graph.
 */
#include "import/infer_graph.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "format/tensor_proto.h"
#include "import/const_eval.h"
#include "import/shape_infer_te.h"

#include <stdlib.h>
#include <string.h>

void tx_infer_values_free(tx_infer_value *vals, size_t n)
{
    if (!vals) return;
    for (size_t i = 0; i < n; i++) tx_infer_value_clear(&vals[i]);
    free(vals);
}

void tx_infer_value_move(tx_infer_value *dst, tx_infer_value *src)
{
    bool own = src->value == &src->owned;
    tx_infer_value_clear(dst);
    *dst = *src;
    if (own) dst->value = &dst->owned;
    memset(src, 0, sizeof *src);
}

/* Node arrays of up to this many entries live on the stack. */
#define STEP_STACK 16

/* Evaluates node n when every present input has a value and its outputs
 * are small enough; a node the evaluator declines keeps value-less
 * outputs (its type is still known). */
static teexec_status *evaluate(const tx_ir_node *n, const tx_onnx_file *file,
                               const tx_infer_options *o, const tx_infer_value *const *pins,
                               tx_infer_value *outs)
{
    if (!o->value_elements || n->n_outputs == 0) return NULL;
    for (size_t k = 0; k < n->n_inputs; k++)
        if (pins[k] && !pins[k]->value) return NULL;
    uint64_t total = 0;
    bool all_valued = true;
    for (size_t j = 0; j < n->n_outputs; j++) {
        if (!outs[j].shape_known) return NULL;
        if (!outs[j].value) all_valued = false;
        uint64_t ne;
        teexec_status *st = tx_shape_numel(&outs[j].shape, &ne);
        if (st) {
            teexec_status_destroy(st);
            return NULL;
        }
        if (!tx_add_u64(total, ne, &total)) return NULL;
    }
    if (all_valued || total > o->value_elements) return NULL;
    const char *why = NULL;
    return tx_ce_eval_node(n, file, pins, outs, &why);
}

teexec_status *tx_infer_step(const tx_ir_node *n, const tx_onnx_file *file,
                             const tx_infer_options *o, tx_infer_value *vals)
{
    static const tx_infer_options strict = {false, 0};
    if (!o) o = &strict;
    const tx_infer_value *pin_stack[STEP_STACK];
    tx_infer_value out_stack[STEP_STACK];
    const tx_infer_value **pins = pin_stack;
    tx_infer_value *outs = out_stack;
    if (n->n_inputs > STEP_STACK) pins = calloc(n->n_inputs, sizeof *pins);
    if (n->n_outputs > STEP_STACK) outs = calloc(n->n_outputs, sizeof *outs);
    teexec_status *st = NULL;
    if (!pins || !outs) {
        st = tx_oom();
        goto done;
    }
    for (size_t k = 0; k < n->n_inputs; k++)
        pins[k] = n->inputs[k] >= 0 ? &vals[n->inputs[k]] : NULL;
    memset(outs, 0, n->n_outputs * sizeof *outs);
    st = tx_infer_node_any(n, file, pins, outs);
    if (!st) st = evaluate(n, file, o, pins, outs);
    if (st && o->lenient && teexec_status_code(st) != TEEXEC_ERR_NO_MEMORY) {
        /* an unknown op or a rule the inputs break: nothing is known */
        teexec_status_destroy(st);
        st = NULL;
        for (size_t j = 0; j < n->n_outputs; j++) tx_infer_value_clear(&outs[j]);
    }
    for (size_t j = 0; j < n->n_outputs; j++) {
        int32_t v = n->outputs[j];
        if (!st && v >= 0) tx_infer_value_move(&vals[v], &outs[j]);
        else tx_infer_value_clear(&outs[j]);
    }
done:
    if (pins != pin_stack) free(pins);
    if (outs != out_stack) free(outs);
    return st;
}

static int64_t named_dim(const char *name, const char *const *names, const int64_t *values,
                         size_t n)
{
    for (size_t i = 0; name && i < n; i++)
        if (names[i] && strcmp(names[i], name) == 0) return values[i];
    return 1;
}

static teexec_status *from_initializer(const tx_ir_value *v, const tx_onnx_file *file,
                                       tx_infer_value *iv)
{
    const Onnx__TensorProto *tp = v->initializer;
    if (tp->n_dims > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_LIMIT, "initializer \"%s\": rank %zu exceeds %d", v->name,
                        tp->n_dims, TX_MAX_RANK);
    iv->dtype = (teexec_dtype)tp->data_type;
    iv->shape.rank = (int32_t)tp->n_dims;
    uint64_t numel = 1;
    for (size_t d = 0; d < tp->n_dims; d++) {
        if (tp->dims[d] < 0 || !tx_mul_u64(numel, (uint64_t)tp->dims[d], &numel))
            return tx_error(TEEXEC_ERR_BAD_MODEL, "initializer \"%s\": bad dims", v->name);
        iv->shape.dims[d] = tp->dims[d];
    }
    iv->shape_known = true;
    bool integer = tx_dtype_is_integer(iv->dtype) || iv->dtype == TEEXEC_DTYPE_BOOL;
    if (tx_dtype_is_subbyte(iv->dtype)) integer = false;
    if (numel <= TX_INFER_DECODE_ANY_MAX || (integer && numel <= TX_INFER_DECODE_INT_MAX)) {
        TX_TRY(tx_tensor_from_proto(tp, file, &iv->owned));
        iv->value = &iv->owned;
    }
    return NULL;
}

/* Seeds v from initializers and graph inputs (declared types, symbolic
 * dims from the names), then applies the caller's bound input types and
 * types every node. */
static teexec_status *type_graph(const tx_ir_graph *g, const tx_onnx_file *file,
                                 const char *const *dim_names, const int64_t *dim_values,
                                 size_t n_dims, size_t n_bound, const int32_t *bound_values,
                                 const tx_infer_value *bound_types, tx_infer_value **vals)
{
    if (!vals) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "infer graph: vals is NULL");
    *vals = NULL;
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "infer graph: graph is NULL");
    if (n_dims && (!dim_names || !dim_values))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "infer graph: dims given without names/values");
    if (n_bound && (!bound_values || !bound_types))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "infer graph: inputs given without types");
    size_t nv = g->n_values;
    tx_infer_value *v = calloc(nv ? nv : 1, sizeof *v);
    if (!v) return tx_oom();
    teexec_status *st = NULL;

    for (size_t i = 0; i < nv && !st; i++) {
        const tx_ir_value *val = &g->values[i];
        if (val->flags & TX_IR_VALUE_INITIALIZER) {
            /* (an input with a default too: typed and valued by the
             * default, as older exporters list every initializer as an
             * input) */
            st = from_initializer(val, file, &v[i]);
            if (st) st = tx_status_prefix(st, "infer graph");
            continue;
        }
        if (!(val->flags & TX_IR_VALUE_GRAPH_INPUT)) continue;
        v[i].dtype = val->dtype;
        if (val->rank < 0 || val->rank > TX_MAX_RANK) continue;
        v[i].shape.rank = val->rank;
        for (int32_t d = 0; d < val->rank; d++)
            v[i].shape.dims[d] = val->dims[d] >= 0
                                     ? val->dims[d]
                                     : named_dim(val->dim_params ? val->dim_params[d] : NULL,
                                                 dim_names, dim_values, n_dims);
        v[i].shape_known = true;
    }
    for (size_t k = 0; k < n_bound && !st; k++) {
        int32_t id = bound_values[k];
        if (id < 0 || (size_t)id >= nv) {
            st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "infer graph: input %zu names no value", k);
            break;
        }
        tx_infer_value_clear(&v[id]);
        v[id].dtype = bound_types[k].dtype;
        v[id].shape = bound_types[k].shape;
        v[id].shape_known = bound_types[k].shape_known;
    }

    tx_infer_options o = {false, TX_INFER_VALUE_MAX};
    for (size_t i = 0; i < g->n_nodes && !st; i++) st = tx_infer_step(&g->nodes[i], file, &o, v);
    if (st) {
        tx_infer_values_free(v, nv);
        return st;
    }
    *vals = v;
    return NULL;
}

teexec_status *tx_infer_graph(const tx_ir_graph *g, const tx_onnx_file *file,
                              const char *const *dim_names, const int64_t *dim_values,
                              size_t n_dims, tx_infer_value **vals)
{
    return type_graph(g, file, dim_names, dim_values, n_dims, 0, NULL, NULL, vals);
}

teexec_status *tx_infer_graph_inputs(const tx_ir_graph *g, const tx_onnx_file *file, size_t n,
                                     const int32_t *input_values,
                                     const tx_infer_value *input_types, tx_infer_value **vals)
{
    return type_graph(g, file, NULL, NULL, 0, n, input_values, input_types, vals);
}
