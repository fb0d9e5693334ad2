/*
 * te_embedding.c - Embedding, CPU: a row gather from the table in forward,
 * a scatter-add of dy rows into dweight in backward (accumulated in double,
 * in index order, so the result is deterministic).
 */
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include <stdlib.h>

static teexec_status *index_at(tx_te_op_id op, const tx_tensor *ids, uint64_t i, int64_t v,
                               int64_t *out)
{
    int64_t id = ids->dtype == TEEXEC_DTYPE_INT64 ? ((const int64_t *)ids->data)[i]
                                                  : ((const int32_t *)ids->data)[i];
    if (id < 0 || id >= v)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: index %lld at position %llu is outside the table's %lld rows",
                        tx_te_name(op), (long long)id, (unsigned long long)i, (long long)v);
    *out = id;
    return NULL;
}

static teexec_status *check_ids(tx_te_op_id op, const tx_tensor *ids)
{
    if (!ids || !ids->data ||
        (ids->dtype != TEEXEC_DTYPE_INT64 && ids->dtype != TEEXEC_DTYPE_INT32))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: indices must be an int64 or int32 tensor", tx_te_name(op));
    if (ids->rank + 1 > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: indices rank too large",
                        tx_te_name(op));
    return NULL;
}

teexec_status *tx_te_cpu_embedding_fwd(const tx_te_fwd_args *a)
{
    const tx_tensor *ids = a->input, *w = a->params[0];
    TX_TRY(check_ids(a->op, ids));
    TX_TRY(tx_te_check_real(a->op, "weight", w));
    if (w->rank != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops Embedding: weight must be [V, D]");
    tx_shape ys = tx_shape_of(ids);
    ys.dims[ys.rank++] = w->dims[1];
    TX_TRY(tx_te_check_out(a->op, "y", a->output, w->dtype, &ys));
    int64_t v = w->dims[0], d = w->dims[1];
    size_t es = tx_dtype_elem_size(w->dtype);
    const char *src = w->data;
    char *dst = a->output->data;
    for (uint64_t i = 0; i < ids->numel; i++) {
        int64_t id = 0;
        TX_TRY(index_at(a->op, ids, i, v, &id));
        /* Same dtype in and out: a byte copy is exact. */
        for (size_t b = 0; b < (size_t)d * es; b++) dst[i * (size_t)d * es + b] = src[(size_t)id * (size_t)d * es + b];
    }
    return NULL;
}

teexec_status *tx_te_cpu_embedding_bwd(const tx_te_bwd_args *a)
{
    tx_tensor *dw = a->n_grad_params > 0 ? a->grad_params[0] : NULL;
    if (!dw) return NULL;
    if (a->n_saved < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops Embedding: the saved indices are missing");
    const tx_tensor *ids = a->saved[0], *dy = a->grad_output;
    TX_TRY(check_ids(a->op, ids));
    TX_TRY(tx_te_check_real(a->op, "dweight", dw));
    TX_TRY(tx_te_check_real(a->op, "dy", dy));
    if (dw->rank != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops Embedding: dweight must be [V, D]");
    int64_t v = dw->dims[0], d = dw->dims[1];
    tx_shape ys = tx_shape_of(ids);
    ys.dims[ys.rank++] = d;
    TX_TRY(tx_te_check_real_shape(a->op, "dy", dy, &ys));
    double *acc = tx_te_calloc((size_t)dw->numel, sizeof(double)), *dyb = NULL;
    teexec_status *st = acc ? NULL : tx_oom();
    if (!st) st = tx_te_load_f64(dy, &dyb);
    for (uint64_t i = 0; !st && i < ids->numel; i++) {
        int64_t id = 0;
        st = index_at(a->op, ids, i, v, &id);
        if (!st)
            for (int64_t j = 0; j < d; j++) acc[id * d + j] += dyb[i * (uint64_t)d + (uint64_t)j];
    }
    if (!st) tx_te_store_f64(dw, acc);
    free(acc);
    free(dyb);
    return st;
}
