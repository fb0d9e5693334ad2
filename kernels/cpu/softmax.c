/* softmax.c - Softmax and LogSoftmax, opset-13 (one axis) and legacy
 * (coerced to 2-D at the axis) semantics. The input is seen as
 * [outer, n, inner] with the softmax over n; rows with inner == 1 are
 * contiguous and handled in place, others are gathered into scratch. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/kcommon.h"
#include "kernels/cpu/rowops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* In place over v[0..n). The sum accumulates in double. */
TX_SIMD_CLONES static void row_f32(float *v, size_t n, bool log_mode)
{
    float mx = tx_row_max(v, n);
    if (mx == -INFINITY) mx = 0.0f; /* a row of -inf: avoid inf - inf */
    if (log_mode) {
        /* the row must survive the sum, so the exponentials go to scratch */
        double sum = 0.0;
        float tmp[TX_BLOCK];
        for (size_t i = 0; i < n; i += TX_BLOCK) {
            size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
            for (size_t j = 0; j < m; j++) tmp[j] = tx_expf_fast(v[i + j] - mx);
            sum += tx_row_sum(tmp, m);
        }
        /* (v - max) - log(sum): rounding max + log(sum) first would cost
         * accuracy where the result is small */
        float ls = (float)log(sum);
        for (size_t i = 0; i < n; i++) v[i] = (v[i] - mx) - ls;
    } else {
        for (size_t i = 0; i < n; i++) v[i] = tx_expf_fast(v[i] - mx);
        float inv = (float)(1.0 / tx_row_sum(v, n));
        for (size_t i = 0; i < n; i++) v[i] *= inv;
    }
}

static void row_f64(double *v, size_t n, bool log_mode)
{
    double mx = -INFINITY;
    for (size_t i = 0; i < n; i++) mx = v[i] > mx ? v[i] : mx;
    if (mx == -INFINITY) mx = 0.0;
    double sum = 0.0;
    if (log_mode) {
        for (size_t i = 0; i < n; i++) sum += exp(v[i] - mx);
        double ls = log(sum);
        for (size_t i = 0; i < n; i++) v[i] = (v[i] - mx) - ls;
    } else {
        for (size_t i = 0; i < n; i++) {
            v[i] = exp(v[i] - mx);
            sum += v[i];
        }
        double inv = 1.0 / sum;
        for (size_t i = 0; i < n; i++) v[i] *= inv;
    }
}

static teexec_status *softmax_impl(const char *name, const tx_tensor *x, int64_t axis,
                                   bool legacy_2d, bool log_mode, tx_tensor *y)
{
    TX_TRY(tx_check_tensor(name, "input", x));
    tx_shape s = tx_shape_of(x);
    TX_TRY(tx_check_output(name, y, x->dtype, &s));
    tx_kclass kc = tx_kclass_of(x->dtype);
    if (!tx_kc_is_float(kc)) return tx_err_dtype(name, x->dtype);
    int32_t ax;
    if (s.rank == 0) {
        /* a scalar is a row of one: softmax 1, log-softmax 0 */
        if (axis != 0 && axis != -1)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: axis %lld for a scalar", name,
                            (long long)axis);
        s.rank = 1;
        s.dims[0] = 1;
        ax = 0;
    } else {
        TX_TRY(tx_status_prefix(tx_shape_normalize_axis(axis, s.rank, &ax), "%s", name));
    }
    size_t outer = 1, n = 1, inner = 1;
    for (int32_t i = 0; i < ax; i++) outer *= (size_t)s.dims[i];
    if (legacy_2d) {
        for (int32_t i = ax; i < s.rank; i++) n *= (size_t)s.dims[i];
    } else {
        n = (size_t)s.dims[ax];
        for (int32_t i = ax + 1; i < s.rank; i++) inner *= (size_t)s.dims[i];
    }
    if (x->numel == 0) return NULL;
    size_t es = kc == TX_KC_F64 ? sizeof(double) : sizeof(float);
    void *buf = NULL;
    bool direct = inner == 1 && (x->dtype == TEEXEC_DTYPE_FLOAT || kc == TX_KC_F64);
    if (!direct) {
        buf = malloc(n * es);
        if (!buf) return tx_oom();
    }
    for (size_t o = 0; o < outer; o++) {
        for (size_t j = 0; j < inner; j++) {
            size_t base = o * n * inner + j;
            if (direct) {
                if (kc == TX_KC_F64) {
                    double *row = (double *)y->data + base;
                    if (y->data != x->data) memcpy(row, (const double *)x->data + base, n * es);
                    row_f64(row, n, log_mode);
                } else {
                    float *row = (float *)y->data + base;
                    if (y->data != x->data) memcpy(row, (const float *)x->data + base, n * es);
                    row_f32(row, n, log_mode);
                }
                continue;
            }
            if (inner == 1) {
                tx_load_f32(x->dtype, x->data, base, n, buf);
                row_f32(buf, n, log_mode);
                tx_store_f32(y->dtype, y->data, base, n, buf);
                continue;
            }
            for (size_t i = 0; i < n; i++) {
                if (kc == TX_KC_F64)
                    tx_load_f64(x->dtype, x->data, base + i * inner, 1, (double *)buf + i);
                else
                    tx_load_f32(x->dtype, x->data, base + i * inner, 1, (float *)buf + i);
            }
            if (kc == TX_KC_F64)
                row_f64(buf, n, log_mode);
            else
                row_f32(buf, n, log_mode);
            for (size_t i = 0; i < n; i++) {
                if (kc == TX_KC_F64)
                    tx_store_f64(y->dtype, y->data, base + i * inner, 1, (double *)buf + i);
                else
                    tx_store_f32(y->dtype, y->data, base + i * inner, 1, (float *)buf + i);
            }
        }
    }
    free(buf);
    return NULL;
}

teexec_status *tx_cpu_softmax(const tx_tensor *x, int64_t axis, bool legacy_2d, tx_tensor *y)
{
    return softmax_impl("Softmax", x, axis, legacy_2d, false, y);
}

teexec_status *tx_cpu_log_softmax(const tx_tensor *x, int64_t axis, bool legacy_2d,
                                  tx_tensor *y)
{
    return softmax_impl("LogSoftmax", x, axis, legacy_2d, true, y);
}
