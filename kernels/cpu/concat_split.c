/* concat_split.c - Concat and Split: block copies along one axis. With
 * outer = prod(dims[:axis]) each input (output) contributes one contiguous
 * block of dims[axis] * inner elements per outer index. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <stdlib.h>
#include <string.h>

teexec_status *tx_cpu_concat(size_t n, const tx_tensor *const *inputs, int64_t axis,
                             tx_tensor *y)
{
    if (n == 0 || !inputs)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Concat: needs at least one input");
    const tx_shape **sp = malloc(n * sizeof(*sp));
    tx_shape *sv = malloc(n * sizeof(*sv));
    if (!sp || !sv) {
        free(sp);
        free(sv);
        return tx_oom();
    }
    teexec_status *st = NULL;
    for (size_t k = 0; k < n && !st; k++) {
        st = tx_check_tensor("Concat", "input", inputs[k]);
        if (!st && inputs[k]->dtype != inputs[0]->dtype)
            st = tx_err_dtype_mismatch("Concat", "an input", inputs[k]->dtype, inputs[0]->dtype);
        if (!st) {
            sv[k] = tx_shape_of(inputs[k]);
            sp[k] = &sv[k];
        }
    }
    tx_shape ys;
    if (!st) st = tx_status_prefix(tx_shape_concat(n, sp, axis, &ys), "Concat");
    size_t es = 0;
    if (!st) {
        es = tx_movable_size(inputs[0]->dtype);
        if (!es) st = tx_err_dtype("Concat", inputs[0]->dtype);
    }
    if (!st) st = tx_check_output("Concat", y, inputs[0]->dtype, &ys);
    free(sp);
    free(sv);
    if (st) return st;
    int32_t ax = (int32_t)(axis < 0 ? axis + ys.rank : axis);
    size_t outer = 1, inner = 1;
    for (int32_t i = 0; i < ax; i++) outer *= (size_t)ys.dims[i];
    for (int32_t i = ax + 1; i < ys.rank; i++) inner *= (size_t)ys.dims[i];
    size_t yrow = (size_t)ys.dims[ax] * inner * es;
    size_t col = 0;
    for (size_t k = 0; k < n; k++) {
        size_t blk = (size_t)inputs[k]->dims[ax] * inner * es;
        for (size_t o = 0; o < outer && blk; o++)
            memcpy((char *)y->data + o * yrow + col, (const char *)inputs[k]->data + o * blk,
                   blk);
        col += blk;
    }
    return NULL;
}

teexec_status *tx_cpu_split(const tx_tensor *x, int64_t axis, size_t n,
                            tx_tensor *const *outputs)
{
    TX_TRY(tx_check_tensor("Split", "input", x));
    if (n == 0 || !outputs)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Split: needs at least one output");
    size_t es = tx_movable_size(x->dtype);
    if (!es) return tx_err_dtype("Split", x->dtype);
    int32_t ax;
    TX_TRY(tx_status_prefix(tx_shape_normalize_axis(axis, x->rank, &ax), "Split"));
    int64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        tx_tensor *o = outputs[k];
        TX_TRY(tx_check_tensor("Split", "output", o));
        if (o->dtype != x->dtype) return tx_err_dtype_mismatch("Split", "output", o->dtype, x->dtype);
        tx_shape want = tx_shape_of(x);
        if (o->rank == want.rank) want.dims[ax] = o->dims[ax];
        if (!tx_tensor_has_shape(o, &want)) return tx_err_shape("Split", "an output", o, &want);
        sum += o->dims[ax];
    }
    if (sum != x->dims[ax])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "Split: output sizes add up to %lld, the axis has %lld", (long long)sum,
                        (long long)x->dims[ax]);
    size_t outer = 1, inner = 1;
    for (int32_t i = 0; i < ax; i++) outer *= (size_t)x->dims[i];
    for (int32_t i = ax + 1; i < x->rank; i++) inner *= (size_t)x->dims[i];
    size_t xrow = (size_t)x->dims[ax] * inner * es;
    size_t col = 0;
    for (size_t k = 0; k < n; k++) {
        size_t blk = (size_t)outputs[k]->dims[ax] * inner * es;
        for (size_t o = 0; o < outer && blk; o++)
            memcpy((char *)outputs[k]->data + o * blk, (const char *)x->data + o * xrow + col,
                   blk);
        col += blk;
    }
    return NULL;
}
