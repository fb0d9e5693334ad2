/* trilu.c - Trilu: keep one triangle of each matrix in the last two dims. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <string.h>

teexec_status *tx_cpu_trilu(const tx_tensor *x, int64_t k, bool upper, tx_tensor *y)
{
    TX_TRY(tx_check_tensor("Trilu", "input", x));
    size_t es = tx_movable_size(x->dtype);
    if (!es) return tx_err_dtype("Trilu", x->dtype);
    if (x->rank < 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Trilu: input rank %d is below 2",
                        (int)x->rank);
    tx_shape xs = tx_shape_of(x);
    TX_TRY(tx_check_output("Trilu", y, x->dtype, &xs));
    int64_t rows = xs.dims[xs.rank - 2], cols = xs.dims[xs.rank - 1];
    if (x->numel == 0) return NULL;
    uint64_t mats = x->numel / (uint64_t)(rows * cols);
    /* k is clamped so that the column arithmetic cannot overflow */
    if (k > cols) k = cols;
    if (k < -rows) k = -rows;
    for (uint64_t mtx = 0; mtx < mats; mtx++) {
        for (int64_t i = 0; i < rows; i++) {
            size_t off = (size_t)((int64_t)mtx * rows * cols + i * cols) * es;
            const char *src = (const char *)x->data + off;
            char *dst = (char *)y->data + off;
            /* upper keeps j >= i + k; lower keeps j <= i + k */
            int64_t lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
            if (lo < 0) lo = 0;
            if (lo > cols) lo = cols;
            if (hi > cols) hi = cols;
            if (hi < lo) hi = lo;
            if (dst != src) memcpy(dst + lo * (int64_t)es, src + lo * (int64_t)es,
                                   (size_t)(hi - lo) * es);
            memset(dst, 0, (size_t)lo * es);
            memset(dst + hi * (int64_t)es, 0, (size_t)(cols - hi) * es);
        }
    }
    return NULL;
}
