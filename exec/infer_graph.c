/*
 * infer_graph.c - tx_infer_graph: per-value dtype and shape over a whole
 * graph, node by node through tx_exec_infer_node.
 */
#include "exec/infer_graph.h"

#include "base/checked.h"
#include "exec/cpu_te_ops.h"
#include "format/tensor_proto.h"

#include <stdlib.h>
#include <string.h>

#define DECODE_ANY_MAX 64
#define DECODE_INT_MAX 65536

void tx_infer_values_free(tx_infer_value *vals, size_t n)
{
    if (!vals) return;
    for (size_t i = 0; i < n; i++) tx_infer_value_clear(&vals[i]);
    free(vals);
}

static void move_value(tx_infer_value *dst, tx_infer_value *src)
{
    bool own = src->value == &src->owned;
    tx_infer_value_clear(dst);
    *dst = *src;
    if (own) dst->value = &dst->owned;
    memset(src, 0, sizeof *src);
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
    bool integer = iv->dtype == TEEXEC_DTYPE_INT64 || iv->dtype == TEEXEC_DTYPE_INT32;
    if (numel <= DECODE_ANY_MAX || (integer && numel <= DECODE_INT_MAX)) {
        TX_TRY(tx_tensor_from_proto(tp, file, &iv->owned));
        iv->value = &iv->owned;
    }
    return NULL;
}

teexec_status *tx_infer_graph(const tx_ir_graph *g, const tx_onnx_file *file,
                              const char *const *dim_names, const int64_t *dim_values,
                              size_t n_dims, tx_infer_value **vals)
{
    if (!vals) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "infer graph: vals is NULL");
    *vals = NULL;
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "infer graph: graph is NULL");
    if (n_dims && (!dim_names || !dim_values))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "infer graph: dims given without names/values");
    size_t nv = g->n_values;
    tx_infer_value *v = calloc(nv ? nv : 1, sizeof *v);
    if (!v) return tx_oom();
    teexec_status *st = NULL;

    for (size_t i = 0; i < nv && !st; i++) {
        const tx_ir_value *val = &g->values[i];
        if (val->flags & TX_IR_VALUE_INITIALIZER) {
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

    size_t max_in = 1, max_out = 1;
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].n_inputs > max_in) max_in = g->nodes[i].n_inputs;
        if (g->nodes[i].n_outputs > max_out) max_out = g->nodes[i].n_outputs;
    }
    const tx_infer_value **pins = calloc(max_in, sizeof *pins);
    tx_infer_value *outs = calloc(max_out, sizeof *outs);
    if (!st && (!pins || !outs)) st = tx_oom();

    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        const tx_ir_node *n = &g->nodes[i];
        for (size_t k = 0; k < n->n_inputs; k++)
            pins[k] = n->inputs[k] >= 0 ? &v[n->inputs[k]] : NULL;
        memset(outs, 0, n->n_outputs * sizeof *outs);
        st = tx_exec_infer_node(n, file, pins, outs);
        for (size_t j = 0; j < n->n_outputs; j++) {
            int32_t o = n->outputs[j];
            if (!st && o >= 0) move_value(&v[o], &outs[j]);
            else tx_infer_value_clear(&outs[j]);
        }
    }
    free(pins);
    free(outs);
    if (st) {
        tx_infer_values_free(v, nv);
        return st;
    }
    *vals = v;
    return NULL;
}
