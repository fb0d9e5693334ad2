/* expand_tile.c - Expand (broadcast copy) and Tile (repeat copy). */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

#include <string.h>

teexec_status *tx_cpu_expand(const tx_tensor *x, tx_tensor *y)
{
    TX_TRY(tx_check_tensor("Expand", "input", x));
    TX_TRY(tx_check_tensor("Expand", "output", y));
    size_t es = tx_movable_size(x->dtype);
    if (!es) return tx_err_dtype("Expand", x->dtype);
    tx_shape xs = tx_shape_of(x), ys = tx_shape_of(y), bs;
    TX_TRY(tx_status_prefix(tx_shape_broadcast2(&xs, &ys, &bs), "Expand"));
    TX_TRY(tx_check_output("Expand", y, x->dtype, &bs));
    int64_t st_y[TX_MAX_RANK], st_x[TX_MAX_RANK];
    tx_shape_strides(&ys, st_y);
    tx_broadcast_strides(&xs, &ys, st_x);
    const int64_t *strides[2] = {st_y, st_x};
    tx_iter it;
    tx_iter_init(&it, ys.rank, ys.dims, 2, strides);
    tx_iter_copy(&it, y->data, x->data, es);
    return NULL;
}

teexec_status *tx_cpu_tile(const tx_tensor *x, const int64_t *repeats, size_t nrep,
                           tx_tensor *y)
{
    TX_TRY(tx_check_tensor("Tile", "input", x));
    size_t es = tx_movable_size(x->dtype);
    if (!es) return tx_err_dtype("Tile", x->dtype);
    if (nrep && !repeats)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Tile: repeats are required");
    tx_shape xs = tx_shape_of(x), ys;
    TX_TRY(tx_status_prefix(tx_shape_tile(&xs, repeats, nrep, &ys), "Tile"));
    TX_TRY(tx_check_output("Tile", y, x->dtype, &ys));
    if (y->numel == 0) return NULL;
    if (xs.rank == 0) {
        memcpy(y->data, x->data, es);
        return NULL;
    }
    /* One output row (last axis) at a time: find its source row from the
     * output index modulo the input dims, then lay it down `reps` times. */
    int32_t r = xs.rank;
    int64_t st_x[TX_MAX_RANK], idx[TX_MAX_RANK] = {0};
    tx_shape_strides(&xs, st_x);
    size_t rowlen = (size_t)xs.dims[r - 1] * es, reps = (size_t)repeats[r - 1];
    uint64_t rows = y->numel / (uint64_t)ys.dims[r - 1];
    char *dst = y->data;
    for (uint64_t k = 0; k < rows; k++) {
        int64_t off = 0;
        for (int32_t i = 0; i < r - 1; i++) off += (idx[i] % xs.dims[i]) * st_x[i];
        const char *src = (const char *)x->data + off * (int64_t)es;
        for (size_t t = 0; t < reps; t++, dst += rowlen) memcpy(dst, src, rowlen);
        for (int32_t i = r - 2; i >= 0; i--) {
            if (++idx[i] < ys.dims[i]) break;
            idx[i] = 0;
        }
    }
    return NULL;
}
