/* rmsnorm.c - RMSNormalization (opset 23): y = x / sqrt(mean(x^2) + eps) *
 * scale over dims[axis:]. The mean square accumulates in double whatever
 * stash_type asks (1 = float32 or better); the normalization runs in the
 * compute type (float for float/float16/bfloat16, double when x, scale or y
 * is double) and rounds once at the output, which has scale's dtype. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"
#include "kernels/cpu/rowops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* scale broadcast to the normalized shape, as n compute-type values. */
static void expand_scale(const tx_tensor *p, const tx_shape *norm, bool f64, void *dst)
{
    tx_shape ps = tx_shape_of(p);
    int64_t dst_st[TX_MAX_RANK], src_st[TX_MAX_RANK];
    tx_shape_strides(norm, dst_st);
    tx_broadcast_strides(&ps, norm, src_st);
    const int64_t *strides[2] = {dst_st, src_st};
    tx_iter it;
    tx_iter_init(&it, norm->rank, norm->dims, 2, strides);
    for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it))
        for (int64_t i = 0; i < it.inner; i++) {
            size_t d = (size_t)(it.off[0] + i), s = (size_t)(it.off[1] + i * it.inner_stride[1]);
            if (f64)
                tx_load_f64(p->dtype, p->data, s, 1, (double *)dst + d);
            else
                tx_load_f32(p->dtype, p->data, s, 1, (float *)dst + d);
        }
}

TX_SIMD_CLONES static void scale_row(const float *x, float *y, size_t n, float inv, const float *s)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] * inv * s[i];
}

teexec_status *tx_cpu_rms_norm(const tx_tensor *x, const tx_tensor *scale, int64_t axis,
                               float epsilon, int stash_type, tx_tensor *y)
{
    const char *name = "RMSNormalization";
    TX_TRY(tx_check_tensor(name, "X", x));
    TX_TRY(tx_check_tensor(name, "scale", scale));
    if (!tx_kc_is_float(tx_kclass_of(x->dtype))) return tx_err_dtype(name, x->dtype);
    if (!tx_kc_is_float(tx_kclass_of(scale->dtype))) return tx_err_dtype(name, scale->dtype);
    if (stash_type != TEEXEC_DTYPE_FLOAT && stash_type != TEEXEC_DTYPE_DOUBLE &&
        stash_type != TEEXEC_DTYPE_FLOAT16 && stash_type != TEEXEC_DTYPE_BFLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: stash_type %d is not supported", name,
                        stash_type);
    tx_shape xs = tx_shape_of(x);
    TX_TRY(tx_check_output(name, y, scale->dtype, &xs));
    int32_t ax;
    TX_TRY(tx_status_prefix(tx_shape_normalize_axis(axis, xs.rank, &ax), "%s", name));
    tx_shape norm = {.rank = xs.rank - ax};
    memcpy(norm.dims, xs.dims + ax, sizeof(int64_t) * (size_t)norm.rank);
    tx_shape ss = tx_shape_of(scale);
    if (!tx_shape_broadcastable_to(&ss, &norm)) return tx_err_shape(name, "scale", scale, &norm);

    size_t n = 1, outer = 1;
    for (int32_t i = 0; i < norm.rank; i++) n *= (size_t)norm.dims[i];
    for (int32_t i = 0; i < ax; i++) outer *= (size_t)xs.dims[i];
    if (x->numel == 0) return NULL;

    bool f64 = x->dtype == TEEXEC_DTYPE_DOUBLE || scale->dtype == TEEXEC_DTYPE_DOUBLE;
    size_t es = f64 ? sizeof(double) : sizeof(float);
    /* scratch: scale, one input row, one output row */
    char *mem = malloc(3 * n * es + 1);
    if (!mem) return tx_oom();
    void *sc = mem, *xrow = mem + n * es, *yrow = mem + 2 * n * es;
    expand_scale(scale, &norm, f64, sc);
    for (size_t o = 0; o < outer; o++) {
        size_t base = o * n;
        if (f64) {
            double *xr = xrow, *yr = yrow, ms = 0;
            const double *s = sc;
            tx_load_f64(x->dtype, x->data, base, n, xr);
            for (size_t i = 0; i < n; i++) ms += xr[i] * xr[i];
            double inv = 1.0 / sqrt(ms / (double)n + (double)epsilon);
            for (size_t i = 0; i < n; i++) yr[i] = xr[i] * inv * s[i];
            tx_store_f64(y->dtype, y->data, base, n, yr);
        } else {
            const float *xr = tx_view_f32(x->dtype, x->data, base, n, xrow);
            double ms = tx_row_sqdev(xr, n, 0.0) / (double)n;
            float inv = (float)(1.0 / sqrt(ms + (double)epsilon));
            float *yr = y->dtype == TEEXEC_DTYPE_FLOAT ? (float *)y->data + base : yrow;
            scale_row(xr, yr, n, inv, sc);
            if (yr == (float *)yrow) tx_store_f32(y->dtype, y->data, base, n, yrow);
        }
    }
    free(mem);
    return NULL;
}
