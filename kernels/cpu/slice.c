/* slice.c - Slice: a strided copy; the input strides are multiplied by the
 * steps (negative steps walk backwards) and the walk starts at the
 * effective start of every axis. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

teexec_status *tx_cpu_slice(const tx_tensor *x, const int64_t *starts, const int64_t *ends,
                            const int64_t *axes, const int64_t *steps, size_t n, tx_tensor *y)
{
    TX_TRY(tx_check_tensor("Slice", "input", x));
    size_t es = tx_movable_size(x->dtype);
    if (!es) return tx_err_dtype("Slice", x->dtype);
    if (n && (!starts || !ends))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Slice: starts and ends are required");
    tx_shape xs = tx_shape_of(x), ys;
    int64_t first[TX_MAX_RANK], step[TX_MAX_RANK];
    TX_TRY(tx_status_prefix(tx_shape_slice(&xs, starts, ends, axes, steps, n, first, step, &ys),
                            "Slice"));
    TX_TRY(tx_check_output("Slice", y, x->dtype, &ys));
    if (y->numel == 0) return NULL;
    int64_t st_x[TX_MAX_RANK], st_in[TX_MAX_RANK], st_y[TX_MAX_RANK];
    tx_shape_strides(&xs, st_x);
    tx_shape_strides(&ys, st_y);
    int64_t base = 0;
    for (int32_t i = 0; i < xs.rank; i++) {
        st_in[i] = st_x[i] * step[i];
        base += first[i] * st_x[i];
    }
    const int64_t *strides[2] = {st_y, st_in};
    tx_iter it;
    tx_iter_init(&it, ys.rank, ys.dims, 2, strides);
    tx_iter_copy(&it, y->data, (const char *)x->data + base * (int64_t)es, es);
    return NULL;
}
