/* variadic.c - Min / Max / Sum / Mean over n broadcasting inputs.
 *
 * Accumulates into one buffer of the output's size in the wide compute
 * type (double, int64 or uint64) and rounds once into the output, so a
 * float16 Sum of many inputs is not rounded at every step. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

#include <stdlib.h>

static const char *variadic_name(tx_variadic_op op)
{
    switch (op) {
    case TX_VARIADIC_MIN: return "Min";
    case TX_VARIADIC_MAX: return "Max";
    case TX_VARIADIC_SUM: return "Sum";
    case TX_VARIADIC_MEAN: return "Mean";
    }
    return "variadic";
}

/* acc[i] (op)= v[i] for n values; v has stride sv (0 or 1). first: assign. */
#define COMBINE(T, ISNAN)                                                       \
    for (size_t i = 0; i < n; i++) {                                            \
        T v = vals[sv ? i : 0];                                                 \
        if (first) {                                                            \
            acc[i] = v;                                                         \
            continue;                                                           \
        }                                                                       \
        T c = acc[i];                                                           \
        switch (op) {                                                           \
        case TX_VARIADIC_MIN: acc[i] = (ISNAN(c) || c < v) && !ISNAN(v) ? c : v; break; \
        case TX_VARIADIC_MAX: acc[i] = (ISNAN(c) || c > v) && !ISNAN(v) ? c : v; break; \
        default: acc[i] = c + v; break;                                         \
        }                                                                       \
    }

#define F_ISNAN(x) ((x) != (x))
#define NO_NAN(x) 0

static void combine_f64(tx_variadic_op op, double *acc, const double *vals, int sv, size_t n,
                        bool first)
{
    COMBINE(double, F_ISNAN)
}

static void combine_i64(tx_variadic_op op, int64_t *acc, const int64_t *vals, int sv, size_t n,
                        bool first)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = vals[sv ? i : 0];
        if (first) {
            acc[i] = v;
            continue;
        }
        int64_t c = acc[i];
        switch (op) {
        case TX_VARIADIC_MIN: acc[i] = c < v ? c : v; break;
        case TX_VARIADIC_MAX: acc[i] = c > v ? c : v; break;
        default: acc[i] = (int64_t)((uint64_t)c + (uint64_t)v); break; /* wraps */
        }
    }
}

static void combine_u64(tx_variadic_op op, uint64_t *acc, const uint64_t *vals, int sv,
                        size_t n, bool first)
{
    COMBINE(uint64_t, NO_NAN)
}

teexec_status *tx_cpu_variadic(tx_variadic_op op, size_t n, const tx_tensor *const *inputs,
                               tx_tensor *y)
{
    const char *name = variadic_name(op);
    if (n == 0 || !inputs)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: needs at least one input", name);
    if (n > 4096) return tx_error(TEEXEC_ERR_LIMIT, "%s: %zu inputs is too many", name, n);
    const tx_shape **sp = malloc(n * sizeof(*sp));
    tx_shape *sv = malloc(n * sizeof(*sv));
    if (!sp || !sv) {
        free(sp);
        free(sv);
        return tx_oom();
    }
    teexec_status *st = NULL;
    for (size_t k = 0; k < n && !st; k++) {
        st = tx_check_tensor(name, "input", inputs[k]);
        if (!st && inputs[k]->dtype != inputs[0]->dtype)
            st = tx_err_dtype_mismatch(name, "an input", inputs[k]->dtype, inputs[0]->dtype);
        if (!st) {
            sv[k] = tx_shape_of(inputs[k]);
            sp[k] = &sv[k];
        }
    }
    tx_shape so;
    if (!st) st = tx_status_prefix(tx_shape_broadcast(n, sp, &so), "%s", name);
    free(sp);
    if (st) {
        free(sv);
        return st;
    }
    teexec_dtype dt = inputs[0]->dtype;
    tx_kclass kc = tx_kclass_of(dt);
    bool ok = op == TX_VARIADIC_MEAN ? tx_kc_is_float(kc) : tx_kc_is_numeric(kc);
    if (!ok) st = tx_err_dtype(name, dt);
    if (!st) st = tx_check_output(name, y, dt, &so);
    if (st) {
        free(sv);
        return st;
    }
    size_t total = (size_t)y->numel;
    void *acc = malloc(total ? total * 8 : 1);
    if (!acc) {
        free(sv);
        return tx_oom();
    }
    int64_t st_y[TX_MAX_RANK], st_x[TX_MAX_RANK];
    tx_shape_strides(&so, st_y);
    for (size_t k = 0; k < n; k++) {
        const tx_tensor *x = inputs[k];
        tx_broadcast_strides(&sv[k], &so, st_x);
        const int64_t *strides[2] = {st_y, st_x};
        tx_iter it;
        tx_iter_init(&it, so.rank, so.dims, 2, strides);
        for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it)) {
            size_t len = (size_t)it.inner;
            int sx = it.inner_stride[1] != 0;
            for (size_t i = 0; i < len; i += TX_BLOCK) {
                size_t m = len - i < TX_BLOCK ? len - i : TX_BLOCK;
                size_t xo = (size_t)it.off[1] + (sx ? i : 0), xm = sx ? m : 1;
                size_t yo = (size_t)it.off[0] + i;
                if (tx_kc_is_float(kc)) {
                    double v[TX_BLOCK];
                    tx_load_f64(dt, x->data, xo, xm, v);
                    combine_f64(op, (double *)acc + yo, v, sx, m, k == 0);
                } else if (kc == TX_KC_I64) {
                    int64_t v[TX_BLOCK];
                    tx_load_i64(dt, x->data, xo, xm, v);
                    combine_i64(op, (int64_t *)acc + yo, v, sx, m, k == 0);
                } else {
                    uint64_t v[TX_BLOCK];
                    tx_load_u64(dt, x->data, xo, xm, v);
                    combine_u64(op, (uint64_t *)acc + yo, v, sx, m, k == 0);
                }
            }
        }
    }
    if (tx_kc_is_float(kc)) {
        double *d = acc;
        if (op == TX_VARIADIC_MEAN)
            for (size_t i = 0; i < total; i++) d[i] /= (double)n;
        if (kc == TX_KC_F64) {
            tx_store_f64(dt, y->data, 0, total, d);
        } else {
            /* the FP64 accumulator is finished as an FP32 value (the
             * compute type of these dtypes) and then stored */
            float fb[TX_BLOCK];
            for (size_t i = 0; i < total; i += TX_BLOCK) {
                size_t m = total - i < TX_BLOCK ? total - i : TX_BLOCK;
                for (size_t j = 0; j < m; j++) fb[j] = (float)d[i + j];
                tx_store_f32(dt, y->data, i, m, fb);
            }
        }
    } else if (kc == TX_KC_I64) {
        tx_store_i64(dt, y->data, 0, total, acc);
    } else {
        tx_store_u64(dt, y->data, 0, total, acc);
    }
    free(acc);
    free(sv);
    return NULL;
}
