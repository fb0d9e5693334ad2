/* layernorm.c - LayerNormalization (opset 17) over dims[axis:], with the
 * optional Mean and InvStdDev outputs. Statistics are two-pass in double;
 * the normalization itself runs in the compute type (float for
 * float/float16/bfloat16, double for double). */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"
#include "kernels/cpu/rowops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Writes param broadcast to `norm` (the normalized shape) as n values. */
static void expand_param(const tx_tensor *p, const tx_shape *norm, bool f64, void *dst)
{
    tx_shape ps = tx_shape_of(p);
    int64_t dst_st[TX_MAX_RANK], src_st[TX_MAX_RANK];
    tx_shape_strides(norm, dst_st);
    tx_broadcast_strides(&ps, norm, src_st);
    const int64_t *strides[2] = {dst_st, src_st};
    tx_iter it;
    tx_iter_init(&it, norm->rank, norm->dims, 2, strides);
    for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it)) {
        for (int64_t i = 0; i < it.inner; i++) {
            size_t d = (size_t)(it.off[0] + i), s = (size_t)(it.off[1] + i * it.inner_stride[1]);
            if (f64)
                tx_load_f64(p->dtype, p->data, s, 1, (double *)dst + d);
            else
                tx_load_f32(p->dtype, p->data, s, 1, (float *)dst + d);
        }
    }
}

TX_SIMD_CLONES static void normalize_row(const float *x, float *y, size_t n, float mu,
                                         float inv, const float *s, const float *b)
{
    for (size_t i = 0; i < n; i++) y[i] = (x[i] - mu) * inv * s[i] + b[i];
}

static teexec_status *check_param(const tx_tensor *p, const char *what, const tx_tensor *x,
                                  const tx_shape *norm)
{
    TX_TRY(tx_check_tensor("LayerNormalization", what, p));
    if (p->dtype != x->dtype)
        return tx_err_dtype_mismatch("LayerNormalization", what, p->dtype, x->dtype);
    tx_shape ps = tx_shape_of(p);
    if (!tx_shape_broadcastable_to(&ps, norm))
        return tx_err_shape("LayerNormalization", what, p, norm);
    return NULL;
}

static teexec_status *check_stat(const tx_tensor *t, const char *what, const tx_shape *want)
{
    if (!t) return NULL;
    TX_TRY(tx_check_tensor("LayerNormalization", what, t));
    if (!tx_kc_is_float(tx_kclass_of(t->dtype))) return tx_err_dtype("LayerNormalization", t->dtype);
    if (!tx_tensor_has_shape(t, want)) return tx_err_shape("LayerNormalization", what, t, want);
    return NULL;
}

teexec_status *tx_cpu_layer_norm(const tx_tensor *x, const tx_tensor *scale,
                                 const tx_tensor *bias, int64_t axis, float epsilon,
                                 int stash_type, tx_tensor *y, tx_tensor *mean,
                                 tx_tensor *inv_std_dev)
{
    const char *name = "LayerNormalization";
    TX_TRY(tx_check_tensor(name, "X", x));
    tx_kclass kc = tx_kclass_of(x->dtype);
    if (!tx_kc_is_float(kc)) return tx_err_dtype(name, x->dtype);
    if (stash_type != TEEXEC_DTYPE_FLOAT && stash_type != TEEXEC_DTYPE_DOUBLE &&
        stash_type != TEEXEC_DTYPE_FLOAT16 && stash_type != TEEXEC_DTYPE_BFLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: stash_type %d is not supported", name,
                        stash_type);
    tx_shape xs = tx_shape_of(x);
    TX_TRY(tx_check_output(name, y, x->dtype, &xs));
    int32_t ax;
    TX_TRY(tx_status_prefix(tx_shape_normalize_axis(axis, xs.rank, &ax), "%s", name));
    tx_shape norm, stat = xs;
    norm.rank = xs.rank - ax;
    memcpy(norm.dims, xs.dims + ax, sizeof(int64_t) * (size_t)norm.rank);
    for (int32_t i = ax; i < xs.rank; i++) stat.dims[i] = 1;
    TX_TRY(check_param(scale, "Scale", x, &norm));
    if (bias) TX_TRY(check_param(bias, "B", x, &norm));
    TX_TRY(check_stat(mean, "Mean", &stat));
    TX_TRY(check_stat(inv_std_dev, "InvStdDev", &stat));

    size_t n = 1, outer = 1;
    for (int32_t i = 0; i < norm.rank; i++) n *= (size_t)norm.dims[i];
    for (int32_t i = 0; i < ax; i++) outer *= (size_t)xs.dims[i];
    if (x->numel == 0 && outer == 0) return NULL;

    bool f64 = kc == TX_KC_F64;
    size_t es = f64 ? sizeof(double) : sizeof(float);
    /* scratch: scale, bias, one row */
    char *mem = malloc(3 * (n ? n : 1) * es);
    if (!mem) return tx_oom();
    void *sc = mem, *bi = mem + n * es, *row = mem + 2 * n * es;
    expand_param(scale, &norm, f64, sc);
    if (bias)
        expand_param(bias, &norm, f64, bi);
    else
        memset(bi, 0, n * es);

    for (size_t o = 0; o < outer; o++) {
        size_t base = o * n;
        double sum = 0.0, var = 0.0, mu, inv;
        if (f64) {
            const double *xr = (const double *)x->data + base;
            double *yr = (double *)y->data + base;
            for (size_t i = 0; i < n; i++) sum += xr[i];
            mu = n ? sum / (double)n : NAN;
            for (size_t i = 0; i < n; i++) var += (xr[i] - mu) * (xr[i] - mu);
            var = n ? var / (double)n : NAN;
            inv = 1.0 / sqrt(var + (double)epsilon);
            const double *s = sc, *b = bi;
            for (size_t i = 0; i < n; i++) yr[i] = (xr[i] - mu) * inv * s[i] + b[i];
        } else {
            const float *xr = tx_view_f32(x->dtype, x->data, base, n, row);
            sum = tx_row_sum(xr, n);
            mu = n ? sum / (double)n : NAN;
            var = n ? tx_row_sqdev(xr, n, mu) / (double)n : NAN;
            inv = 1.0 / sqrt(var + (double)epsilon);
            float muf = (float)mu, invf = (float)inv;
            const float *s = sc, *b = bi;
            float *yr = x->dtype == TEEXEC_DTYPE_FLOAT ? (float *)y->data + base : row;
            normalize_row(xr, yr, n, muf, invf, s, b);
            if (yr == (float *)row) tx_store_f32(y->dtype, y->data, base, n, row);
        }
        if (mean) {
            if (mean->dtype == TEEXEC_DTYPE_DOUBLE) {
                tx_store_f64(mean->dtype, mean->data, o, 1, &mu);
            } else {
                float v = (float)mu;
                tx_store_f32(mean->dtype, mean->data, o, 1, &v);
            }
        }
        if (inv_std_dev) {
            if (inv_std_dev->dtype == TEEXEC_DTYPE_DOUBLE) {
                tx_store_f64(inv_std_dev->dtype, inv_std_dev->data, o, 1, &inv);
            } else {
                float v = (float)inv;
                tx_store_f32(inv_std_dev->dtype, inv_std_dev->data, o, 1, &v);
            }
        }
    }
    free(mem);
    return NULL;
}
