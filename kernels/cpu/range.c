/* range.c - Range: start + i * delta for i in [0, count). */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <math.h>

static bool range_dtype_ok(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT:
    case TEEXEC_DTYPE_DOUBLE:
    case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_BFLOAT16:
    case TEEXEC_DTYPE_INT16:
    case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_INT64: return true;
    default: return false;
    }
}

static teexec_status *check_scalar(const tx_tensor *t, const char *what, teexec_dtype dt)
{
    TX_TRY(tx_check_tensor("Range", what, t));
    if (t->dtype != dt) return tx_err_dtype_mismatch("Range", what, t->dtype, dt);
    if (t->numel != 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Range: %s must be a scalar", what);
    return NULL;
}

teexec_status *tx_cpu_range_count(const tx_tensor *start, const tx_tensor *limit,
                                  const tx_tensor *delta, int64_t *count)
{
    TX_TRY(tx_check_tensor("Range", "start", start));
    if (!range_dtype_ok(start->dtype)) return tx_err_dtype("Range", start->dtype);
    TX_TRY(check_scalar(start, "start", start->dtype));
    TX_TRY(check_scalar(limit, "limit", start->dtype));
    TX_TRY(check_scalar(delta, "delta", start->dtype));
    if (tx_kc_is_int(tx_kclass_of(start->dtype))) {
        int64_t s = tx_scalar_i64(start, 0), l = tx_scalar_i64(limit, 0);
        int64_t d = tx_scalar_i64(delta, 0);
        if (d == 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Range: delta is 0");
        /* values are at most 64-bit: do the span in 128 bits */
        __int128 span = (__int128)l - (__int128)s;
        __int128 c = 0;
        if ((span > 0 && d > 0) || (span < 0 && d < 0)) {
            __int128 ad = d < 0 ? -(__int128)d : d, as = span < 0 ? -span : span;
            c = (as + ad - 1) / ad;
        }
        if (c > INT64_MAX) return tx_error(TEEXEC_ERR_LIMIT, "Range: too many elements");
        *count = (int64_t)c;
        return NULL;
    }
    double s = tx_scalar_f64(start, 0), l = tx_scalar_f64(limit, 0), d = tx_scalar_f64(delta, 0);
    if (d == 0 || d != d || s != s || l != l || isinf(s) || isinf(l))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Range: start/limit/delta must be finite "
                        "and delta non-zero");
    double c = ceil((l - s) / d);
    if (!(c > 0)) c = 0;
    if (c > 9.2e18) return tx_error(TEEXEC_ERR_LIMIT, "Range: too many elements");
    *count = (int64_t)c;
    return NULL;
}

teexec_status *tx_cpu_range(const tx_tensor *start, const tx_tensor *delta, tx_tensor *y)
{
    TX_TRY(tx_check_tensor("Range", "start", start));
    if (!range_dtype_ok(start->dtype)) return tx_err_dtype("Range", start->dtype);
    TX_TRY(check_scalar(start, "start", start->dtype));
    TX_TRY(check_scalar(delta, "delta", start->dtype));
    TX_TRY(tx_check_tensor("Range", "output", y));
    if (y->dtype != start->dtype)
        return tx_err_dtype_mismatch("Range", "output", y->dtype, start->dtype);
    if (y->rank != 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Range: output must be 1-D");
    size_t n = (size_t)y->numel;
    if (tx_kc_is_int(tx_kclass_of(start->dtype))) {
        uint64_t s = (uint64_t)tx_scalar_i64(start, 0), d = (uint64_t)tx_scalar_i64(delta, 0);
        int64_t buf[TX_BLOCK];
        for (size_t i = 0; i < n; i += TX_BLOCK) {
            size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
            for (size_t j = 0; j < m; j++) buf[j] = (int64_t)(s + (uint64_t)(i + j) * d);
            tx_store_i64(y->dtype, y->data, i, m, buf);
        }
        return NULL;
    }
    if (start->dtype == TEEXEC_DTYPE_DOUBLE) {
        double s = tx_scalar_f64(start, 0), d = tx_scalar_f64(delta, 0);
        double *out = y->data;
        for (size_t i = 0; i < n; i++) out[i] = s + (double)i * d;
        return NULL;
    }
    float s = (float)tx_scalar_f64(start, 0), d = (float)tx_scalar_f64(delta, 0);
    float buf[TX_BLOCK];
    for (size_t i = 0; i < n; i += TX_BLOCK) {
        size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
        for (size_t j = 0; j < m; j++) buf[j] = s + (float)(i + j) * d;
        tx_store_f32(y->dtype, y->data, i, m, buf);
    }
    return NULL;
}
