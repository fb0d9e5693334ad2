/* cumsum.c - CumSum along one axis with ONNX's exclusive and reverse
 * flags. The input is [outer, n, inner]; a running sum of `inner` lanes
 * moves along n, so memory is read row by row. Floats accumulate in double,
 * integers in wrapping 64-bit. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <stdlib.h>
#include <string.h>

static bool cumsum_dtype_ok(tx_kclass kc)
{
    return tx_kc_is_numeric(kc);
}

teexec_status *tx_cpu_cumsum(const tx_tensor *x, int64_t axis, bool exclusive, bool reverse,
                             tx_tensor *y)
{
    TX_TRY(tx_check_tensor("CumSum", "x", x));
    tx_kclass kc = tx_kclass_of(x->dtype);
    if (!cumsum_dtype_ok(kc)) return tx_err_dtype("CumSum", x->dtype);
    tx_shape xs = tx_shape_of(x);
    TX_TRY(tx_check_output("CumSum", y, x->dtype, &xs));
    int32_t ax;
    TX_TRY(tx_status_prefix(tx_shape_normalize_axis(axis, xs.rank, &ax), "CumSum"));
    size_t outer = 1, n = (size_t)xs.dims[ax], inner = 1;
    for (int32_t i = 0; i < ax; i++) outer *= (size_t)xs.dims[i];
    for (int32_t i = ax + 1; i < xs.rank; i++) inner *= (size_t)xs.dims[i];
    if (x->numel == 0) return NULL;
    bool fl = tx_kc_is_float(kc);
    /* acc (inner) + one row of values (inner), 8 bytes each */
    char *mem = malloc(2 * inner * 8);
    if (!mem) return tx_oom();
    double *accd = (double *)mem, *rowd = (double *)mem + inner;
    int64_t *acci = (int64_t *)mem, *rowi = (int64_t *)mem + inner;
    for (size_t o = 0; o < outer; o++) {
        memset(mem, 0, inner * 8);
        for (size_t t = 0; t < n; t++) {
            size_t i = reverse ? n - 1 - t : t;
            size_t off = (o * n + i) * inner;
            if (fl) {
                tx_load_f64(x->dtype, x->data, off, inner, rowd);
                for (size_t j = 0; j < inner; j++) {
                    double v = rowd[j];
                    if (exclusive) {
                        rowd[j] = accd[j];
                        accd[j] += v;
                    } else {
                        accd[j] += v;
                        rowd[j] = accd[j];
                    }
                }
                if (kc == TX_KC_F64) {
                    tx_store_f64(y->dtype, y->data, off, inner, rowd);
                } else {
                    for (size_t j = 0; j < inner; j++) {
                        float f = (float)rowd[j];
                        tx_store_f32(y->dtype, y->data, off + j, 1, &f);
                    }
                }
            } else {
                tx_load_i64(x->dtype, x->data, off, inner, rowi);
                for (size_t j = 0; j < inner; j++) {
                    uint64_t v = (uint64_t)rowi[j];
                    if (exclusive) {
                        rowi[j] = acci[j];
                        acci[j] = (int64_t)((uint64_t)acci[j] + v);
                    } else {
                        acci[j] = (int64_t)((uint64_t)acci[j] + v);
                        rowi[j] = acci[j];
                    }
                }
                tx_store_i64(y->dtype, y->data, off, inner, rowi);
            }
        }
    }
    free(mem);
    return NULL;
}
