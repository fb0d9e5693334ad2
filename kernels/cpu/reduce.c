/* reduce.c - ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSum/LogSumExp.
 *
 * The input is walked once in memory order; each element is folded into the
 * accumulator of its output position (the reduced axes have stride 0 in the
 * accumulator). Accumulators are double for floats, int64/uint64 for
 * integers (wrapping), so the result is rounded once. L2, LogSum and
 * LogSumExp of integers are computed in double and truncated. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const reduce_names[TX_REDUCE_COUNT] = {
    [TX_REDUCE_SUM] = "ReduceSum",         [TX_REDUCE_MEAN] = "ReduceMean",
    [TX_REDUCE_MAX] = "ReduceMax",         [TX_REDUCE_MIN] = "ReduceMin",
    [TX_REDUCE_PROD] = "ReduceProd",       [TX_REDUCE_SUM_SQUARE] = "ReduceSumSquare",
    [TX_REDUCE_L1] = "ReduceL1",           [TX_REDUCE_L2] = "ReduceL2",
    [TX_REDUCE_LOG_SUM] = "ReduceLogSum",  [TX_REDUCE_LOG_SUM_EXP] = "ReduceLogSumExp",
};

typedef enum { ACC_F64, ACC_I64, ACC_U64 } acc_kind;

/* Fold values v[0..n) (stride sv) into acc[0..n) (stride sa, 0 = one cell).
 * `shift` is the per-output max for LogSumExp's second pass. */
#define FOLD(T, ISNAN, ABS)                                                                \
    for (size_t i = 0; i < n; i++) {                                                    \
        T v = vals[i];                                                                  \
        T *c = &acc[sa ? i : 0];                                                        \
        switch (op) {                                                                   \
        case TX_REDUCE_SUM:                                                             \
        case TX_REDUCE_MEAN:                                                            \
        case TX_REDUCE_LOG_SUM: *c += v; break;                                         \
        case TX_REDUCE_SUM_SQUARE:                                                      \
        case TX_REDUCE_L2: *c += v * v; break;                                          \
        case TX_REDUCE_L1: *c += ABS(v); break;                                         \
        case TX_REDUCE_PROD: *c *= v; break;                                            \
        case TX_REDUCE_MAX:                                                             \
            if (ISNAN(v) || v > *c) *c = v;                                             \
            break;                                                                      \
        case TX_REDUCE_MIN:                                                             \
            if (ISNAN(v) || v < *c) *c = v;                                             \
            break;                                                                      \
        default: break;                                                                 \
        }                                                                               \
    }

#define IS_NAN(x) ((x) != (x))
/* After a NaN is stored, further comparisons are false: NaN sticks. For
 * floats, keep it stuck explicitly (v > NaN is false, but ISNAN(v) of a
 * later non-NaN is false too, so the NaN stays). */
#define NEVER(x) 0
#define IDENT(x) (x)

static void fold_f64(tx_reduce_op op, double *acc, int sa, const double *vals, size_t n,
                     const double *shift)
{
    if (op == TX_REDUCE_LOG_SUM_EXP) {
        for (size_t i = 0; i < n; i++) {
            size_t j = sa ? i : 0;
            acc[j] += exp(vals[i] - shift[j]);
        }
        return;
    }
    FOLD(double, IS_NAN, fabs)
}

/* Integer folds wrap: do the arithmetic in uint64. */
static void fold_i64(tx_reduce_op op, int64_t *acc, int sa, const int64_t *vals, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = vals[i];
        int64_t *c = &acc[sa ? i : 0];
        switch (op) {
        case TX_REDUCE_SUM:
        case TX_REDUCE_MEAN: *c = (int64_t)((uint64_t)*c + (uint64_t)v); break;
        case TX_REDUCE_SUM_SQUARE: *c = (int64_t)((uint64_t)*c + (uint64_t)v * (uint64_t)v); break;
        case TX_REDUCE_L1:
            *c = (int64_t)((uint64_t)*c + (v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v));
            break;
        case TX_REDUCE_PROD: *c = (int64_t)((uint64_t)*c * (uint64_t)v); break;
        case TX_REDUCE_MAX: *c = v > *c ? v : *c; break;
        case TX_REDUCE_MIN: *c = v < *c ? v : *c; break;
        default: break;
        }
    }
}

static void fold_u64(tx_reduce_op op, uint64_t *acc, int sa, const uint64_t *vals, size_t n)
{
    FOLD(uint64_t, NEVER, IDENT)
}

static bool float_op_for_ints(tx_reduce_op op)
{
    return op == TX_REDUCE_L2 || op == TX_REDUCE_LOG_SUM || op == TX_REDUCE_LOG_SUM_EXP;
}

teexec_status *tx_cpu_reduce(tx_reduce_op op, const tx_tensor *x, const int64_t *axes,
                             size_t naxes, bool keepdims, bool noop_with_empty_axes,
                             tx_tensor *y)
{
    if ((unsigned)op >= TX_REDUCE_COUNT)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "unknown reduction %d", (int)op);
    const char *name = reduce_names[op];
    TX_TRY(tx_check_tensor(name, "data", x));
    tx_kclass kc = tx_kclass_of(x->dtype);
    bool ok = tx_kc_is_numeric(kc) ||
              (kc == TX_KC_BOOL && (op == TX_REDUCE_MAX || op == TX_REDUCE_MIN));
    if (!ok) return tx_err_dtype(name, x->dtype);
    tx_shape xs = tx_shape_of(x), ys;
    bool red[TX_MAX_RANK];
    TX_TRY(tx_status_prefix(
        tx_shape_reduce(&xs, axes, naxes, keepdims, noop_with_empty_axes, &ys, red), "%s",
        name));
    TX_TRY(tx_check_output(name, y, x->dtype, &ys));

    acc_kind ak = tx_kc_is_float(kc) || float_op_for_ints(op) ? ACC_F64
                  : kc == TX_KC_I64                           ? ACC_I64
                                                              : ACC_U64;
    size_t total = (size_t)y->numel;
    void *acc = malloc(total ? total * 8 : 8);
    double *shift = NULL;
    if (!acc) return tx_oom();

    /* identities */
    unsigned bits = teexec_dtype_bits(x->dtype);
    for (size_t i = 0; i < total; i++) {
        switch (ak) {
        case ACC_F64: {
            double v = 0.0;
            if (op == TX_REDUCE_PROD) v = 1.0;
            if (op == TX_REDUCE_MAX) v = -INFINITY;
            if (op == TX_REDUCE_MIN) v = INFINITY;
            ((double *)acc)[i] = v;
            break;
        }
        case ACC_I64: {
            int64_t v = 0;
            int64_t tmax = bits >= 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1);
            if (op == TX_REDUCE_PROD) v = 1;
            if (op == TX_REDUCE_MAX) v = -tmax - 1;
            if (op == TX_REDUCE_MIN) v = tmax;
            ((int64_t *)acc)[i] = v;
            break;
        }
        case ACC_U64: {
            uint64_t v = 0;
            if (op == TX_REDUCE_PROD) v = 1;
            if (op == TX_REDUCE_MIN)
                v = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
            ((uint64_t *)acc)[i] = v;
            break;
        }
        }
    }

    /* Accumulator strides over the input shape: keepdims layout of y with
     * reduced axes at stride 0. */
    tx_shape kd = xs;
    for (int32_t i = 0; i < xs.rank; i++)
        if (red[i]) kd.dims[i] = 1;
    int64_t st_x[TX_MAX_RANK], st_a[TX_MAX_RANK];
    tx_shape_strides(&xs, st_x);
    tx_broadcast_strides(&kd, &xs, st_a);
    const int64_t *strides[2] = {st_x, st_a};

    if (op == TX_REDUCE_LOG_SUM_EXP) {
        /* pass 1: the max of each output, for a stable sum of exponentials */
        shift = malloc(total ? total * 8 : 8);
        if (!shift) {
            free(acc);
            return tx_oom();
        }
        for (size_t i = 0; i < total; i++) shift[i] = -INFINITY;
        tx_iter it;
        tx_iter_init(&it, xs.rank, xs.dims, 2, strides);
        for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it)) {
            double v[TX_BLOCK];
            int sa = it.inner_stride[1] != 0;
            for (int64_t i = 0; i < it.inner; i += TX_BLOCK) {
                size_t m = (size_t)(it.inner - i < TX_BLOCK ? it.inner - i : TX_BLOCK);
                tx_load_f64(x->dtype, x->data, (size_t)(it.off[0] + i), m, v);
                fold_f64(TX_REDUCE_MAX, shift + it.off[1] + (sa ? i : 0), sa, v, m, NULL);
            }
        }
        for (size_t i = 0; i < total; i++)
            if (!isfinite(shift[i])) shift[i] = 0.0; /* empty or +-inf: exp does the rest */
    }

    tx_iter it;
    tx_iter_init(&it, xs.rank, xs.dims, 2, strides);
    for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it)) {
        int sa = it.inner_stride[1] != 0;
        for (int64_t i = 0; i < it.inner; i += TX_BLOCK) {
            size_t m = (size_t)(it.inner - i < TX_BLOCK ? it.inner - i : TX_BLOCK);
            size_t xo = (size_t)(it.off[0] + i), ao = (size_t)it.off[1] + (sa ? (size_t)i : 0);
            if (ak == ACC_F64) {
                double v[TX_BLOCK];
                tx_load_f64(x->dtype, x->data, xo, m, v);
                fold_f64(op, (double *)acc + ao, sa, v, m, shift ? shift + ao : NULL);
            } else if (ak == ACC_I64) {
                int64_t v[TX_BLOCK];
                tx_load_i64(x->dtype, x->data, xo, m, v);
                fold_i64(op, (int64_t *)acc + ao, sa, v, m);
            } else {
                uint64_t v[TX_BLOCK];
                tx_load_u64(x->dtype, x->data, xo, m, v);
                fold_u64(op, (uint64_t *)acc + ao, sa, v, m);
            }
        }
    }

    /* finish */
    uint64_t count = total ? x->numel / total : 0;
    if (ak == ACC_F64) {
        double *d = acc;
        for (size_t i = 0; i < total; i++) {
            switch (op) {
            case TX_REDUCE_MEAN: d[i] = d[i] / (double)count; break;
            case TX_REDUCE_L2: d[i] = sqrt(d[i]); break;
            case TX_REDUCE_LOG_SUM: d[i] = log(d[i]); break;
            case TX_REDUCE_LOG_SUM_EXP: d[i] = log(d[i]) + shift[i]; break;
            default: break;
            }
        }
        if (kc == TX_KC_F32) {
            float fb[TX_BLOCK];
            for (size_t i = 0; i < total; i += TX_BLOCK) {
                size_t m = total - i < TX_BLOCK ? total - i : TX_BLOCK;
                for (size_t j = 0; j < m; j++) fb[j] = (float)d[i + j];
                tx_store_f32(y->dtype, y->data, i, m, fb);
            }
        } else {
            tx_store_f64(y->dtype, y->data, 0, total, d);
        }
    } else if (ak == ACC_I64) {
        int64_t *d = acc;
        if (op == TX_REDUCE_MEAN)
            for (size_t i = 0; i < total; i++) d[i] = count ? d[i] / (int64_t)count : 0;
        tx_store_i64(y->dtype, y->data, 0, total, d);
    } else {
        uint64_t *d = acc;
        if (op == TX_REDUCE_MEAN)
            for (size_t i = 0; i < total; i++) d[i] = count ? d[i] / count : 0;
        tx_store_u64(y->dtype, y->data, 0, total, d);
    }
    free(shift);
    free(acc);
    return NULL;
}
