/* qdq.c - QuantizeLinear / DequantizeLinear and TE's trt Q/DQ ops (qdq.h). */
/* Each product and quotient rounds to float32 on its own, as the NumPy
 * reference and TE's kernels do: no FMA contraction. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/cpu/qdq.h"

#include "base/checked.h"
#include "base/half.h"
#include "base/numfmt.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/qtensor.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

/* Reads any numeric tensor as floats into a malloc'd array. */
static teexec_status *to_floats(const tx_tensor *t, const char *what, float **out)
{
    *out = NULL;
    size_t n = t->numel ? (size_t)t->numel : 1;
    size_t bytes;
    if (!tx_mul_size(n, sizeof(float), &bytes))
        return tx_error(TEEXEC_ERR_LIMIT, "%s is too large", what);
    float *f = malloc(bytes);
    if (!f) return tx_error(TEEXEC_ERR_NO_MEMORY, "out of memory reading %s", what);
    teexec_status *st = tx_convert_to_f32(t->data, t->dtype, f, t->numel);
    if (st) {
        free(f);
        return tx_status_prefix(st, "reading %s", what);
    }
    *out = f;
    return NULL;
}

/* Maps element index -> scale index (ONNX granularity rules). */
typedef struct scale_map {
    int mode;            /* 0 per-tensor, 1 per-axis, 2 blocked */
    uint64_t inner;      /* product of dims after axis */
    uint64_t d;          /* dims[axis] */
    uint64_t s;          /* scale dims[axis] (blocked) */
    uint64_t block;
} scale_map;

static teexec_status *make_map(const tx_tensor *x, const tx_tensor *scale, int64_t axis,
                               int64_t block_size, scale_map *m)
{
    m->mode = 0;
    m->inner = 1;
    m->d = 1;
    m->s = 1;
    m->block = 1;
    if (scale->numel == 1 && (scale->rank == 0 || block_size == 0)) return NULL;
    if (x->rank == 0) return tx_error(TEEXEC_ERR_BAD_MODEL, "a scalar input needs a scalar scale");
    int64_t a = axis < 0 ? axis + x->rank : axis;
    if (a < 0 || a >= x->rank)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "axis %lld is out of range for rank %d",
                        (long long)axis, (int)x->rank);
    for (int32_t i = (int32_t)a + 1; i < x->rank; i++) m->inner *= (uint64_t)x->dims[i];
    m->d = (uint64_t)x->dims[a];
    if (block_size <= 0) {
        if (scale->rank != 1 || scale->dims[0] != x->dims[a])
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "per-axis scale must be 1-D of length %lld (dim %lld of the input)",
                            (long long)x->dims[a], (long long)a);
        m->mode = 1;
        return NULL;
    }
    if (scale->rank != x->rank)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "blocked scale must have the input's rank %d, not %d",
                        (int)x->rank, (int)scale->rank);
    for (int32_t i = 0; i < x->rank; i++) {
        if (i == a) continue;
        if (scale->dims[i] != x->dims[i])
            return tx_error(TEEXEC_ERR_BAD_MODEL, "blocked scale dim %d is %lld, expected %lld",
                            (int)i, (long long)scale->dims[i], (long long)x->dims[i]);
    }
    uint64_t want = (m->d + (uint64_t)block_size - 1) / (uint64_t)block_size;
    if ((uint64_t)scale->dims[a] != want)
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "blocked scale dim %lld is %lld, expected ceil(%llu/%lld) = %llu",
                        (long long)a, (long long)scale->dims[a], (unsigned long long)m->d,
                        (long long)block_size, (unsigned long long)want);
    m->mode = 2;
    m->s = want;
    m->block = (uint64_t)block_size;
    return NULL;
}

static inline uint64_t map_index(const scale_map *m, uint64_t i)
{
    if (m->mode == 0) return 0;
    uint64_t in = i % m->inner;
    uint64_t a = (i / m->inner) % m->d;
    if (m->mode == 1) return a;
    uint64_t outer = i / (m->inner * m->d);
    return (outer * m->s + a / m->block) * m->inner + in;
}

static float round_to(teexec_dtype p, float v)
{
    if (p == TEEXEC_DTYPE_FLOAT16) return tx_f16_to_f32(tx_f32_to_f16(v));
    if (p == TEEXEC_DTYPE_BFLOAT16) return tx_bf16_to_f32(tx_f32_to_bf16(v));
    return v;
}

static bool int_range(teexec_dtype dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case TEEXEC_DTYPE_UINT8: *lo = 0; *hi = 255; return true;
    case TEEXEC_DTYPE_INT8: *lo = -128; *hi = 127; return true;
    case TEEXEC_DTYPE_UINT16: *lo = 0; *hi = 65535; return true;
    case TEEXEC_DTYPE_INT16: *lo = -32768; *hi = 32767; return true;
    case TEEXEC_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
    default: {
        int l, h;
        if (!tx_subbyte_int_range(dt, &l, &h)) return false;
        *lo = l;
        *hi = h;
        return true;
    }
    }
}

static void store_int(tx_tensor *y, uint64_t i, int64_t v)
{
    switch (y->dtype) {
    case TEEXEC_DTYPE_UINT8: ((uint8_t *)y->data)[i] = (uint8_t)v; break;
    case TEEXEC_DTYPE_INT8: ((int8_t *)y->data)[i] = (int8_t)v; break;
    case TEEXEC_DTYPE_UINT16: ((uint16_t *)y->data)[i] = (uint16_t)v; break;
    case TEEXEC_DTYPE_INT16: ((int16_t *)y->data)[i] = (int16_t)v; break;
    case TEEXEC_DTYPE_INT32: ((int32_t *)y->data)[i] = (int32_t)v; break;
    case TEEXEC_DTYPE_INT2:
    case TEEXEC_DTYPE_UINT2: tx_subbyte_set(y->data, i, 2, (unsigned)v & 3u); break;
    default: tx_subbyte_set(y->data, i, 4, (unsigned)v & 15u); break;
    }
}

static bool is_subbyte(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_INT4 || dt == TEEXEC_DTYPE_UINT4 || dt == TEEXEC_DTYPE_FLOAT4E2M1 ||
           dt == TEEXEC_DTYPE_INT2 || dt == TEEXEC_DTYPE_UINT2;
}

static teexec_status *check_zp(const tx_tensor *zp, const tx_tensor *scale)
{
    if (!zp) return NULL;
    if (zp->numel != scale->numel)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "zero point has %llu elements, the scale %llu",
                        (unsigned long long)zp->numel, (unsigned long long)scale->numel);
    return NULL;
}

teexec_status *tx_qdq_quantize(const tx_tensor *x, const tx_tensor *scale,
                               const tx_tensor *zero_point, int64_t axis, int64_t block_size,
                               int saturate, teexec_dtype precision, tx_tensor *y)
{
    if (y->numel != x->numel) return tx_error(TEEXEC_ERR_INTERNAL, "output has the wrong size");
    scale_map m;
    TX_TRY(make_map(x, scale, axis, block_size, &m));
    TX_TRY(check_zp(zero_point, scale));
    if (precision == TEEXEC_DTYPE_UNDEFINED) precision = scale->dtype;
    int64_t lo = 0, hi = 0;
    bool is_int = int_range(y->dtype, &lo, &hi);
    bool is_f8 = tx_numfmt_is_byte_float(y->dtype) && y->dtype != TEEXEC_DTYPE_FLOAT8E8M0;
    if (!is_int && !is_f8 && y->dtype != TEEXEC_DTYPE_FLOAT4E2M1)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "cannot quantize to %s",
                        teexec_dtype_name(y->dtype));
    float *xf = NULL, *sf = NULL, *zf = NULL;
    teexec_status *st = to_floats(x, "the input", &xf);
    if (!st) st = to_floats(scale, "the scale", &sf);
    if (!st && zero_point) st = to_floats(zero_point, "the zero point", &zf);
    if (st) goto done;
    if (is_subbyte(y->dtype)) {
        size_t nb = y->nbytes;
        for (size_t b = 0; b < nb; b++) ((uint8_t *)y->data)[b] = 0;
    }
    for (uint64_t i = 0; i < x->numel; i++) {
        uint64_t k = map_index(&m, i);
        float t = round_to(precision, xf[i] / sf[k]);
        float z = zf ? zf[k] : 0.0f;
        if (is_int) {
            store_int(y, i, tx_f64_to_int_rne_sat((double)t + (double)z, lo, hi));
        } else if (is_f8) {
            if (z != 0.0f) t = t + z;
            ((uint8_t *)y->data)[i] = tx_f32_to_fp8(y->dtype, t, saturate);
        } else {
            if (z != 0.0f) t = t + z;
            tx_subbyte_set(y->data, i, 4, tx_f32_to_e2m1(t));
        }
    }
done:
    free(xf);
    free(sf);
    free(zf);
    return st;
}

teexec_status *tx_qdq_dequantize(const tx_tensor *x, const tx_tensor *scale,
                                 const tx_tensor *zero_point, int64_t axis, int64_t block_size,
                                 tx_tensor *y)
{
    if (y->numel != x->numel) return tx_error(TEEXEC_ERR_INTERNAL, "output has the wrong size");
    scale_map m;
    TX_TRY(make_map(x, scale, axis, block_size, &m));
    TX_TRY(check_zp(zero_point, scale));
    float *xf = NULL, *sf = NULL, *zf = NULL, *yf = NULL;
    teexec_status *st = to_floats(x, "the input", &xf);
    if (!st) st = to_floats(scale, "the scale", &sf);
    if (!st && zero_point) st = to_floats(zero_point, "the zero point", &zf);
    if (st) goto done;
    if (y->dtype == TEEXEC_DTYPE_FLOAT) {
        yf = y->data;
    } else {
        size_t bytes;
        if (!tx_mul_size((size_t)x->numel + 1, sizeof(float), &bytes) || !(yf = malloc(bytes))) {
            st = tx_error(TEEXEC_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
    }
    for (uint64_t i = 0; i < x->numel; i++) {
        uint64_t k = map_index(&m, i);
        float v = zf ? xf[i] - zf[k] : xf[i];
        yf[i] = v * sf[k];
    }
    if (y->dtype != TEEXEC_DTYPE_FLOAT)
        st = tx_convert_from_f32(yf, y->data, y->dtype, x->numel, NULL);
done:
    if (yf && yf != y->data) free(yf);
    free(xf);
    free(sf);
    free(zf);
    return st;
}

static teexec_status *scalar_f32(const tx_tensor *t, const char *what, float *out)
{
    if (!t || t->numel != 1)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "%s must have exactly one element", what);
    return tx_convert_to_f32(t->data, t->dtype, out, 1);
}

static bool byte_fmt(teexec_dtype dt, teexec_dtype alt)
{
    return dt == TEEXEC_DTYPE_UINT8 || dt == alt;
}

teexec_status *tx_qdq_trt_fp8_quantize(const tx_tensor *x, const tx_tensor *scale_inv,
                                       tx_tensor *q)
{
    float s;
    TX_TRY(scalar_f32(scale_inv, "scale_inv", &s));
    if (!byte_fmt(q->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN) || q->numel != x->numel)
        return tx_error(TEEXEC_ERR_INTERNAL, "output must be uint8 of the input's size");
    float *xf;
    TX_TRY(to_floats(x, "the input", &xf));
    uint8_t *o = q->data;
    for (uint64_t i = 0; i < x->numel; i++) o[i] = tx_f32_to_e4m3fn(xf[i] / s, 1);
    free(xf);
    return NULL;
}

teexec_status *tx_qdq_trt_fp8_dequantize(const tx_tensor *q, const tx_tensor *scale_inv,
                                         tx_tensor *y)
{
    float s;
    TX_TRY(scalar_f32(scale_inv, "scale_inv", &s));
    if (!byte_fmt(q->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN))
        return tx_error(TEEXEC_ERR_BAD_MODEL, "input must be uint8 (E4M3 bits), not %s",
                        teexec_dtype_name(q->dtype));
    if (y->numel != q->numel) return tx_error(TEEXEC_ERR_INTERNAL, "output has the wrong size");
    const uint8_t *b = q->data;
    if (y->dtype == TEEXEC_DTYPE_FLOAT) {
        float *o = y->data;
        for (uint64_t i = 0; i < q->numel; i++) o[i] = tx_e4m3fn_to_f32(b[i]) * s;
        return NULL;
    }
    for (uint64_t i = 0; i < q->numel; i++) {
        float v = tx_e4m3fn_to_f32(b[i]) * s;
        TX_TRY(tx_convert_from_f32(&v, (uint8_t *)y->data + i * tx_dtype_elem_size(y->dtype),
                                   y->dtype, 1, NULL));
    }
    return NULL;
}

/* M (product of leading dims) and K (last dim) of a tensor of rank >= 1. */
static teexec_status *rows_cols(int32_t rank, const int64_t *dims, uint64_t *M, uint64_t *K)
{
    if (rank < 1) return tx_error(TEEXEC_ERR_BAD_MODEL, "input must have rank >= 1");
    if (!tx_dims_product(dims, (size_t)rank - 1, M))
        return tx_error(TEEXEC_ERR_LIMIT, "input is too large");
    *K = (uint64_t)dims[rank - 1];
    return NULL;
}

teexec_status *tx_qdq_mxfp8_scale_shape(int32_t rank, const int64_t *dims, int64_t block,
                                        int64_t out_dims[2])
{
    uint64_t M = 0, K = 0;
    TX_TRY(rows_cols(rank, dims, &M, &K));
    if (block != 32) return tx_error(TEEXEC_ERR_UNSUPPORTED, "block_size must be 32, not %lld",
                                     (long long)block);
    if (K % 32 != 0)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "last dim %llu is not a multiple of 32",
                        (unsigned long long)K);
    if (M > (uint64_t)INT64_MAX - 128) return tx_error(TEEXEC_ERR_LIMIT, "input is too large");
    out_dims[0] = (int64_t)((M + 127) / 128 * 128);
    out_dims[1] = (int64_t)((K / 32 + 3) / 4 * 4);
    return NULL;
}

/* 2^(127-e), as quant_mxfp8.c (TE's exp2f_rcp). */
static float e8m0_multiplier(uint8_t e)
{
    if (e == 255) return tx_bits_f32(0x7fc00000u);
    if (e == 254) return tx_bits_f32(0x00400000u);
    return tx_bits_f32((uint32_t)(254u - e) << 23);
}

teexec_status *tx_qdq_trt_mxfp8_quantize(const tx_tensor *x, tx_tensor *q, tx_tensor *scale)
{
    int64_t sd[2] = {0, 0};
    TX_TRY(tx_qdq_mxfp8_scale_shape(x->rank, x->dims, 32, sd));
    uint64_t M = 0, K = 0;
    TX_TRY(rows_cols(x->rank, x->dims, &M, &K));
    if (!byte_fmt(q->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN) || q->numel != x->numel ||
        !byte_fmt(scale->dtype, TEEXEC_DTYPE_FLOAT8E8M0) ||
        scale->numel != (uint64_t)sd[0] * (uint64_t)sd[1])
        return tx_error(TEEXEC_ERR_INTERNAL, "outputs have the wrong type or size");
    float *xf;
    TX_TRY(to_floats(x, "the input", &xf));
    const float rcp = 1.0f / 448.0f;
    uint8_t *qd = q->data, *sc = scale->data;
    for (uint64_t b = 0; b < scale->numel; b++) sc[b] = 0;
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t j = 0; j < K / 32; j++) {
            const float *xb = xf + m * K + j * 32;
            float amax = 0.0f;
            for (int t = 0; t < 32; t++) amax = tx_amax_step(amax, xb[t]);
            uint8_t e = tx_f32_to_e8m0(amax * rcp, 1, TX_E8M0_ROUND_UP);
            float mult = e8m0_multiplier(e);
            sc[m * (uint64_t)sd[1] + j] = e;
            for (int t = 0; t < 32; t++) qd[m * K + j * 32 + (uint64_t)t] = tx_f32_to_e4m3fn(xb[t] * mult, 1);
        }
    free(xf);
    return NULL;
}

teexec_status *tx_qdq_trt_mxfp8_dequantize(const tx_tensor *q, const tx_tensor *scale,
                                           tx_tensor *y)
{
    uint64_t M = 0, K = 0;
    TX_TRY(rows_cols(q->rank, q->dims, &M, &K));
    if (!byte_fmt(q->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN) ||
        !byte_fmt(scale->dtype, TEEXEC_DTYPE_FLOAT8E8M0))
        return tx_error(TEEXEC_ERR_BAD_MODEL, "data and scale must be uint8 (E4M3 / E8M0 bits)");
    if (K % 32 != 0)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "last dim %llu is not a multiple of 32",
                        (unsigned long long)K);
    if (y->numel != q->numel) return tx_error(TEEXEC_ERR_INTERNAL, "output has the wrong size");
    /* Scale row pitch: TE's padded 2-D form, or the ONNX blocked form. */
    uint64_t pitch;
    if (scale->rank == 2 && (uint64_t)scale->dims[0] >= M && (uint64_t)scale->dims[1] >= K / 32) {
        pitch = (uint64_t)scale->dims[1];
    } else if (scale->rank == q->rank && (uint64_t)scale->dims[scale->rank - 1] == K / 32 &&
               scale->numel == M * (K / 32)) {
        pitch = K / 32;
    } else {
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "scale shape fits neither [>=%llu, >=%llu] (TE padded) nor [..., %llu]",
                        (unsigned long long)M, (unsigned long long)(K / 32),
                        (unsigned long long)(K / 32));
    }
    const uint8_t *qd = q->data, *sc = scale->data;
    float *yf = y->dtype == TEEXEC_DTYPE_FLOAT ? y->data : NULL;
    if (!yf) {
        size_t bytes;
        if (!tx_mul_size((size_t)q->numel + 1, sizeof(float), &bytes) || !(yf = malloc(bytes)))
            return tx_error(TEEXEC_ERR_NO_MEMORY, "out of memory");
    }
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t k = 0; k < K; k++)
            yf[m * K + k] = tx_e4m3fn_to_f32(qd[m * K + k]) * tx_e8m0_to_f32(sc[m * pitch + k / 32]);
    teexec_status *st = NULL;
    if (yf != y->data) {
        st = tx_convert_from_f32(yf, y->data, y->dtype, q->numel, NULL);
        free(yf);
    }
    return st;
}

teexec_status *tx_qdq_trt_fp4_quantize(const tx_tensor *x, const tx_tensor *global_scale,
                                       tx_tensor *q, tx_tensor *scale)
{
    float g;
    TX_TRY(scalar_f32(global_scale, "global scale", &g));
    uint64_t M = 0, K = 0;
    TX_TRY(rows_cols(x->rank, x->dims, &M, &K));
    if (K % 16 != 0)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "last dim %llu is not a multiple of 16",
                        (unsigned long long)K);
    if (q->dtype != TEEXEC_DTYPE_FLOAT4E2M1 || q->numel != x->numel ||
        !byte_fmt(scale->dtype, TEEXEC_DTYPE_FLOAT8E4M3FN) || scale->numel != M * (K / 16))
        return tx_error(TEEXEC_ERR_INTERNAL, "outputs have the wrong type or size");
    float *xf;
    TX_TRY(to_floats(x, "the input", &xf));
    const float enc6 = (1.0f / g) * (1.0f / 6.0f);
    uint8_t *qd = q->data, *sc = scale->data;
    for (size_t b = 0; b < q->nbytes; b++) qd[b] = 0;
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t j = 0; j < K / 16; j++) {
            const float *xb = xf + m * K + j * 16;
            float amax = 0.0f;
            for (int t = 0; t < 16; t++) amax = tx_amax_step(amax, xb[t]);
            uint8_t sb = tx_f32_to_e4m3fn(amax * enc6, 1);
            sc[m * (K / 16) + j] = sb;
            float mult = 1.0f / (tx_e4m3fn_to_f32(sb) * g);
            if (!(mult <= FLT_MAX)) mult = FLT_MAX; /* also NaN: TE's fminf drops it */
            for (int t = 0; t < 16; t++)
                tx_subbyte_set(qd, m * K + j * 16 + (uint64_t)t, 4, tx_f32_to_e2m1(xb[t] * mult));
        }
    free(xf);
    return NULL;
}
