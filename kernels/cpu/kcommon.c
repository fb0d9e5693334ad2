/* kcommon.c - dtype classes, block element conversions, argument checks. */
#include "kernels/cpu/kcommon.h"

#include "base/checked.h"
#include "base/half.h"

#include <math.h>
#include <string.h>

tx_kclass tx_kclass_of(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT:
    case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_BFLOAT16: return TX_KC_F32;
    case TEEXEC_DTYPE_DOUBLE: return TX_KC_F64;
    case TEEXEC_DTYPE_INT8:
    case TEEXEC_DTYPE_INT16:
    case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_INT64: return TX_KC_I64;
    case TEEXEC_DTYPE_UINT8:
    case TEEXEC_DTYPE_UINT16:
    case TEEXEC_DTYPE_UINT32:
    case TEEXEC_DTYPE_UINT64: return TX_KC_U64;
    case TEEXEC_DTYPE_BOOL: return TX_KC_BOOL;
    default: return TX_KC_OTHER;
    }
}

int64_t tx_f64_to_i64(double v)
{
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

/* The element loops below are written per (storage, compute) pair; the
 * macro keeps them one line each. */
#define LOAD_ONE(ST, EXPR)                                                                 \
    {                                                                                      \
        const ST *s = (const ST *)base + off;                                              \
        for (size_t i = 0; i < n; i++) {                                                   \
            dst[i] = EXPR;                                                                 \
        }                                                                                  \
        break;                                                                             \
    }
#define LOAD_CASES(DST_T, CONV_F16, CONV_BF16)                                              \
    switch (dt) {                                                                          \
    case TEEXEC_DTYPE_FLOAT: LOAD_ONE(float, (DST_T)s[i])                                  \
    case TEEXEC_DTYPE_DOUBLE: LOAD_ONE(double, (DST_T)s[i])                                \
    case TEEXEC_DTYPE_FLOAT16: LOAD_ONE(uint16_t, CONV_F16(s[i]))                          \
    case TEEXEC_DTYPE_BFLOAT16: LOAD_ONE(uint16_t, CONV_BF16(s[i]))                        \
    case TEEXEC_DTYPE_INT8: LOAD_ONE(int8_t, (DST_T)s[i])                                  \
    case TEEXEC_DTYPE_INT16: LOAD_ONE(int16_t, (DST_T)s[i])                                \
    case TEEXEC_DTYPE_INT32: LOAD_ONE(int32_t, (DST_T)s[i])                                \
    case TEEXEC_DTYPE_INT64: LOAD_ONE(int64_t, (DST_T)s[i])                                \
    case TEEXEC_DTYPE_BOOL:                                                                \
    case TEEXEC_DTYPE_UINT8: LOAD_ONE(uint8_t, (DST_T)s[i])                                \
    case TEEXEC_DTYPE_UINT16: LOAD_ONE(uint16_t, (DST_T)s[i])                              \
    case TEEXEC_DTYPE_UINT32: LOAD_ONE(uint32_t, (DST_T)s[i])                              \
    case TEEXEC_DTYPE_UINT64: LOAD_ONE(uint64_t, (DST_T)s[i])                              \
    default: memset(dst, 0, n * sizeof(DST_T)); break;                                     \
    }

/* Integer targets take the low bits (two's complement wrap), computed in
 * unsigned so no conversion is implementation-defined in a harmful way. */
#define STORE_ONE(DT_T, EXPR)                                                              \
    {                                                                                      \
        DT_T *d = (DT_T *)base + off;                                                      \
        for (size_t i = 0; i < n; i++) {                                                   \
            d[i] = EXPR;                                                                   \
        }                                                                                  \
        break;                                                                             \
    }
#define STORE_INT_CASES(SRC_T, TO_U64)                                                     \
    case TEEXEC_DTYPE_INT8:                                                                \
    case TEEXEC_DTYPE_UINT8: STORE_ONE(uint8_t, (uint8_t)TO_U64(src[i]))                   \
    case TEEXEC_DTYPE_INT16:                                                               \
    case TEEXEC_DTYPE_UINT16: STORE_ONE(uint16_t, (uint16_t)TO_U64(src[i]))                \
    case TEEXEC_DTYPE_INT32:                                                               \
    case TEEXEC_DTYPE_UINT32: STORE_ONE(uint32_t, (uint32_t)TO_U64(src[i]))                \
    case TEEXEC_DTYPE_INT64:                                                               \
    case TEEXEC_DTYPE_UINT64: STORE_ONE(uint64_t, TO_U64(src[i]))                          \
    case TEEXEC_DTYPE_BOOL: STORE_ONE(uint8_t, src[i] != 0)

/* Integer sources into the float types. fp16/bf16 go through float, so an
 * integer beyond 2^24 rounds twice; the integer kernels rarely store such
 * values into half types, and Cast uses tx_convert, which rounds once. */
#define STORE_FLOAT_CASES                                                                  \
    case TEEXEC_DTYPE_FLOAT: STORE_ONE(float, (float)src[i])                               \
    case TEEXEC_DTYPE_DOUBLE: STORE_ONE(double, (double)src[i])                            \
    case TEEXEC_DTYPE_FLOAT16: STORE_ONE(uint16_t, tx_f32_to_f16((float)src[i]))           \
    case TEEXEC_DTYPE_BFLOAT16: STORE_ONE(uint16_t, tx_f32_to_bf16((float)src[i]))

static inline float f16f(uint16_t h) { return tx_f16_to_f32(h); }
static inline float bf16f(uint16_t h) { return tx_bf16_to_f32(h); }
static inline double f16d(uint16_t h) { return tx_f16_to_f32(h); }
static inline double bf16d(uint16_t h) { return tx_bf16_to_f32(h); }
static inline int64_t f16i(uint16_t h) { return tx_f64_to_i64(tx_f16_to_f32(h)); }
static inline int64_t bf16i(uint16_t h) { return tx_f64_to_i64(tx_bf16_to_f32(h)); }
static inline uint64_t f16u(uint16_t h) { return (uint64_t)tx_f64_to_i64(tx_f16_to_f32(h)); }
static inline uint64_t bf16u(uint16_t h) { return (uint64_t)tx_f64_to_i64(tx_bf16_to_f32(h)); }

static inline uint64_t f32_to_u64bits(float v) { return (uint64_t)tx_f64_to_i64(v); }
static inline uint64_t f64_to_u64bits(double v) { return (uint64_t)tx_f64_to_i64(v); }
static inline uint64_t i64_to_u64bits(int64_t v) { return (uint64_t)v; }
static inline uint64_t u64_to_u64bits(uint64_t v) { return v; }

void tx_load_f32(teexec_dtype dt, const void *base, size_t off, size_t n, float *dst)
{
    LOAD_CASES(float, f16f, bf16f)
}

void tx_load_f64(teexec_dtype dt, const void *base, size_t off, size_t n, double *dst)
{
    LOAD_CASES(double, f16d, bf16d)
}

/* Float sources must not be cast to integers directly (UB when out of
 * range): route them through tx_f64_to_i64. */
void tx_load_i64(teexec_dtype dt, const void *base, size_t off, size_t n, int64_t *dst)
{
    if (dt == TEEXEC_DTYPE_FLOAT) {
        const float *s = (const float *)base + off;
        for (size_t i = 0; i < n; i++) dst[i] = tx_f64_to_i64(s[i]);
        return;
    }
    if (dt == TEEXEC_DTYPE_DOUBLE) {
        const double *s = (const double *)base + off;
        for (size_t i = 0; i < n; i++) dst[i] = tx_f64_to_i64(s[i]);
        return;
    }
    LOAD_CASES(int64_t, f16i, bf16i)
}

void tx_load_u64(teexec_dtype dt, const void *base, size_t off, size_t n, uint64_t *dst)
{
    if (dt == TEEXEC_DTYPE_FLOAT) {
        const float *s = (const float *)base + off;
        for (size_t i = 0; i < n; i++) dst[i] = (uint64_t)tx_f64_to_i64(s[i]);
        return;
    }
    if (dt == TEEXEC_DTYPE_DOUBLE) {
        const double *s = (const double *)base + off;
        for (size_t i = 0; i < n; i++) dst[i] = (uint64_t)tx_f64_to_i64(s[i]);
        return;
    }
    LOAD_CASES(uint64_t, f16u, bf16u)
}

void tx_store_f32(teexec_dtype dt, void *base, size_t off, size_t n, const float *src)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: memcpy((float *)base + off, src, n * sizeof(float)); break;
    case TEEXEC_DTYPE_DOUBLE: {
        double *d = (double *)base + off;
        for (size_t i = 0; i < n; i++) d[i] = src[i];
        break;
    }
    case TEEXEC_DTYPE_FLOAT16: {
        uint16_t *d = (uint16_t *)base + off;
        for (size_t i = 0; i < n; i++) d[i] = tx_f32_to_f16(src[i]);
        break;
    }
    case TEEXEC_DTYPE_BFLOAT16: {
        uint16_t *d = (uint16_t *)base + off;
        for (size_t i = 0; i < n; i++) d[i] = tx_f32_to_bf16(src[i]);
        break;
    }
    STORE_INT_CASES(float, f32_to_u64bits)
    default: break;
    }
}

void tx_store_f64(teexec_dtype dt, void *base, size_t off, size_t n, const double *src)
{
    switch (dt) {
    case TEEXEC_DTYPE_DOUBLE: memcpy((double *)base + off, src, n * sizeof(double)); break;
    case TEEXEC_DTYPE_FLOAT: {
        float *d = (float *)base + off;
        for (size_t i = 0; i < n; i++) d[i] = (float)src[i];
        break;
    }
    /* double -> fp16/bf16 through float rounds twice; the kernels never
     * compute fp16/bf16 in double (they use the F32 path), so this only
     * serves parameter copies where the value is already representable. */
    case TEEXEC_DTYPE_FLOAT16: {
        uint16_t *d = (uint16_t *)base + off;
        for (size_t i = 0; i < n; i++) d[i] = tx_f32_to_f16((float)src[i]);
        break;
    }
    case TEEXEC_DTYPE_BFLOAT16: {
        uint16_t *d = (uint16_t *)base + off;
        for (size_t i = 0; i < n; i++) d[i] = tx_f32_to_bf16((float)src[i]);
        break;
    }
    STORE_INT_CASES(double, f64_to_u64bits)
    default: break;
    }
}

void tx_store_i64(teexec_dtype dt, void *base, size_t off, size_t n, const int64_t *src)
{
    switch (dt) {
    STORE_FLOAT_CASES
    STORE_INT_CASES(int64_t, i64_to_u64bits)
    default: break;
    }
}

void tx_store_u64(teexec_dtype dt, void *base, size_t off, size_t n, const uint64_t *src)
{
    switch (dt) {
    STORE_FLOAT_CASES
    STORE_INT_CASES(uint64_t, u64_to_u64bits)
    default: break;
    }
}

const float *tx_view_f32(teexec_dtype dt, const void *base, size_t off, size_t n, float *tmp)
{
    if (dt == TEEXEC_DTYPE_FLOAT) return (const float *)base + off;
    tx_load_f32(dt, base, off, n, tmp);
    return tmp;
}

double tx_scalar_f64(const tx_tensor *t, size_t i)
{
    double v;
    tx_load_f64(t->dtype, t->data, i, 1, &v);
    return v;
}

int64_t tx_scalar_i64(const tx_tensor *t, size_t i)
{
    int64_t v;
    tx_load_i64(t->dtype, t->data, i, 1, &v);
    return v;
}

teexec_status *tx_err_dtype(const char *op, teexec_dtype dt)
{
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: dtype %s is not supported", op,
                    teexec_dtype_name(dt));
}

teexec_status *tx_err_dtype_mismatch(const char *op, const char *what, teexec_dtype got,
                                     teexec_dtype want)
{
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s has dtype %s, expected %s", op, what,
                    teexec_dtype_name(got), teexec_dtype_name(want));
}

teexec_status *tx_err_shape(const char *op, const char *what, const tx_tensor *got,
                            const tx_shape *want)
{
    tx_shape g = tx_shape_of(got);
    char b1[160], b2[160];
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s has shape %s, expected %s", op, what,
                    tx_shape_str(&g, b1, sizeof b1), tx_shape_str(want, b2, sizeof b2));
}

teexec_status *tx_check_tensor(const char *op, const char *what, const tx_tensor *t)
{
    if (!t) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s is missing", op, what);
    if (t->rank < 0 || t->rank > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s has invalid rank %d", op, what,
                        (int)t->rank);
    uint64_t n;
    if (!tx_dims_product(t->dims, (size_t)t->rank, &n) || n != t->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s has inconsistent dims", op, what);
    if (!t->data && n)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s has no storage", op, what);
    size_t es = tx_dtype_elem_size(t->dtype);
    if (es && (n > SIZE_MAX / es || t->nbytes < n * es))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s storage is too small", op, what);
    return NULL;
}

teexec_status *tx_check_output(const char *op, const tx_tensor *y, teexec_dtype dt,
                               const tx_shape *s)
{
    TX_TRY(tx_check_tensor(op, "output", y));
    if (y->dtype != dt) return tx_err_dtype_mismatch(op, "output", y->dtype, dt);
    if (!tx_tensor_has_shape(y, s)) return tx_err_shape(op, "output", y, s);
    return NULL;
}

size_t tx_movable_size(teexec_dtype dt)
{
    if (dt == TEEXEC_DTYPE_STRING) return 0;
    return tx_dtype_elem_size(dt);
}
