/* elementwise_unary.c - one-input elementwise ops (Neg ... Round, Clip, Not,
 * IsNaN, IsInf). float16/bfloat16 go through float blocks. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/kcommon.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const unary_names[TX_UNARY_COUNT] = {
    [TX_UNARY_NEG] = "Neg",           [TX_UNARY_ABS] = "Abs",
    [TX_UNARY_SIGN] = "Sign",         [TX_UNARY_RELU] = "Relu",
    [TX_UNARY_SQRT] = "Sqrt",         [TX_UNARY_RECIPROCAL] = "Reciprocal",
    [TX_UNARY_EXP] = "Exp",           [TX_UNARY_LOG] = "Log",
    [TX_UNARY_ERF] = "Erf",           [TX_UNARY_TANH] = "Tanh",
    [TX_UNARY_SIGMOID] = "Sigmoid",   [TX_UNARY_LEAKY_RELU] = "LeakyRelu",
    [TX_UNARY_ELU] = "Elu",           [TX_UNARY_SOFTPLUS] = "Softplus",
    [TX_UNARY_GELU] = "Gelu",         [TX_UNARY_GELU_TANH] = "Gelu",
    [TX_UNARY_FLOOR] = "Floor",       [TX_UNARY_CEIL] = "Ceil",
    [TX_UNARY_ROUND] = "Round",       [TX_UNARY_SIN] = "Sin",
    [TX_UNARY_COS] = "Cos",
};

const char *tx_unary_op_name(tx_unary_op op)
{
    return (unsigned)op < TX_UNARY_COUNT ? unary_names[op] : "unary";
}

/* The float bodies, written once for float (SFX = f) and double (SFX empty).
 * Each case is a plain loop so the compiler can vectorize the simple ones. */
#define UNARY_FLOAT_BODY(T, SFX, EXP_, ERF_, TANH_)                                        \
    switch (op) {                                                                          \
    case TX_UNARY_NEG: for (size_t i = 0; i < n; i++) y[i] = -x[i]; break;                 \
    case TX_UNARY_ABS: for (size_t i = 0; i < n; i++) y[i] = fabs##SFX(x[i]); break;       \
    case TX_UNARY_SIGN:                                                                    \
        for (size_t i = 0; i < n; i++)                                                     \
            y[i] = x[i] > 0 ? (T)1 : x[i] < 0 ? (T)-1 : x[i]; /* keeps 0 and NaN */        \
        break;                                                                             \
    case TX_UNARY_RELU:                                                                    \
        for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : (x[i] != x[i] ? x[i] : 0); \
        break;                                                                             \
    case TX_UNARY_SQRT: for (size_t i = 0; i < n; i++) y[i] = sqrt##SFX(x[i]); break;      \
    case TX_UNARY_RECIPROCAL: for (size_t i = 0; i < n; i++) y[i] = (T)1 / x[i]; break;    \
    case TX_UNARY_EXP: for (size_t i = 0; i < n; i++) y[i] = EXP_(x[i]); break;              \
    case TX_UNARY_LOG: for (size_t i = 0; i < n; i++) y[i] = log##SFX(x[i]); break;        \
    case TX_UNARY_ERF: for (size_t i = 0; i < n; i++) y[i] = ERF_(x[i]); break;              \
    case TX_UNARY_TANH: for (size_t i = 0; i < n; i++) y[i] = TANH_(x[i]); break;            \
    case TX_UNARY_SIGMOID:                                                                 \
        /* e^-x overflowing to inf still gives the right limit, 0 */                       \
        for (size_t i = 0; i < n; i++) y[i] = (T)1 / ((T)1 + EXP_(-x[i]));                 \
        break;                                                                             \
    case TX_UNARY_LEAKY_RELU:                                                              \
        for (size_t i = 0; i < n; i++) y[i] = x[i] < 0 ? (T)alpha * x[i] : x[i];           \
        break;                                                                             \
    case TX_UNARY_ELU:                                                                     \
        for (size_t i = 0; i < n; i++) y[i] = x[i] < 0 ? (T)alpha * expm1##SFX(x[i]) : x[i]; \
        break;                                                                             \
    case TX_UNARY_SOFTPLUS:                                                                \
        /* log(1 + e^x) without overflow for large x */                                    \
        for (size_t i = 0; i < n; i++) {                                                   \
            T v = x[i];                                                                    \
            y[i] = v > 0 ? v + log1p##SFX(exp##SFX(-v)) : log1p##SFX(exp##SFX(v));         \
        }                                                                                  \
        break;                                                                             \
    case TX_UNARY_GELU:                                                                    \
        for (size_t i = 0; i < n; i++)                                                     \
            y[i] = (T)0.5 * x[i] * ((T)1 + ERF_(x[i] * (T)0.70710678118654752440));          \
        break;                                                                             \
    case TX_UNARY_GELU_TANH:                                                               \
        /* x/2 (1 + tanh u) = x sigmoid(2u): one exp, no cancellation */                   \
        for (size_t i = 0; i < n; i++) {                                                   \
            T v = x[i];                                                                    \
            T u = (T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v);               \
            y[i] = v / ((T)1 + EXP_((T)-2 * u));                                           \
        }                                                                                  \
        break;                                                                             \
    case TX_UNARY_FLOOR: for (size_t i = 0; i < n; i++) y[i] = floor##SFX(x[i]); break;    \
    case TX_UNARY_CEIL: for (size_t i = 0; i < n; i++) y[i] = ceil##SFX(x[i]); break;      \
    /* rint honours the default rounding mode, round-to-nearest-even */                    \
    case TX_UNARY_ROUND: for (size_t i = 0; i < n; i++) y[i] = rint##SFX(x[i]); break;     \
    case TX_UNARY_SIN: for (size_t i = 0; i < n; i++) y[i] = sin##SFX(x[i]); break;        \
    case TX_UNARY_COS: for (size_t i = 0; i < n; i++) y[i] = cos##SFX(x[i]); break;        \
    default: break;                                                                        \
    }

TX_SIMD_CLONES static void unary_f32(tx_unary_op op, float alpha, const float *x, float *y, size_t n)
{
    UNARY_FLOAT_BODY(float, f, tx_expf_fast, tx_erff_fast, tx_tanhf_fast)
}

static void unary_f64(tx_unary_op op, float alpha, const double *x, double *y, size_t n)
{
    UNARY_FLOAT_BODY(double, , exp, erf, tanh)
}

/* Signed ints: negation and abs wrap (INT_MIN stays INT_MIN after storing
 * to the original width, as numpy does). */
static void unary_i64(tx_unary_op op, const int64_t *x, int64_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v = x[i];
        switch (op) {
        case TX_UNARY_NEG: y[i] = (int64_t)((uint64_t)0 - (uint64_t)v); break;
        case TX_UNARY_ABS: y[i] = v < 0 ? (int64_t)((uint64_t)0 - (uint64_t)v) : v; break;
        case TX_UNARY_SIGN: y[i] = (v > 0) - (v < 0); break;
        case TX_UNARY_RELU: y[i] = v > 0 ? v : 0; break;
        default: y[i] = v; break;
        }
    }
}

static void unary_u64(tx_unary_op op, const uint64_t *x, uint64_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v = x[i];
        y[i] = op == TX_UNARY_SIGN ? (v != 0) : v; /* Abs and Relu are identities */
    }
}

static teexec_status *check_same(const char *op, const tx_tensor *x, const tx_tensor *y,
                                 teexec_dtype ydt)
{
    TX_TRY(tx_check_tensor(op, "input", x));
    tx_shape s = tx_shape_of(x);
    return tx_check_output(op, y, ydt, &s);
}

teexec_status *tx_cpu_unary(tx_unary_op op, const tx_tensor *x, float alpha, tx_tensor *y)
{
    if ((unsigned)op >= TX_UNARY_COUNT)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "unknown unary op %d", (int)op);
    const char *name = tx_unary_op_name(op);
    TX_TRY(check_same(name, x, y, x ? x->dtype : TEEXEC_DTYPE_UNDEFINED));
    tx_kclass kc = tx_kclass_of(x->dtype);
    size_t n = (size_t)x->numel;
    bool int_ok = op == TX_UNARY_ABS || op == TX_UNARY_SIGN ||
                  ((op == TX_UNARY_NEG || op == TX_UNARY_RELU) && kc == TX_KC_I64);
    if (kc == TX_KC_F64) {
        unary_f64(op, alpha, (const double *)x->data, (double *)y->data, n);
    } else if (kc == TX_KC_F32) {
        if (x->dtype == TEEXEC_DTYPE_FLOAT) {
            unary_f32(op, alpha, (const float *)x->data, (float *)y->data, n);
            return NULL;
        }
        float buf[TX_BLOCK];
        for (size_t i = 0; i < n; i += TX_BLOCK) {
            size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
            tx_load_f32(x->dtype, x->data, i, m, buf);
            unary_f32(op, alpha, buf, buf, m);
            tx_store_f32(y->dtype, y->data, i, m, buf);
        }
    } else if (kc == TX_KC_I64 && int_ok) {
        int64_t buf[TX_BLOCK];
        for (size_t i = 0; i < n; i += TX_BLOCK) {
            size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
            tx_load_i64(x->dtype, x->data, i, m, buf);
            unary_i64(op, buf, buf, m);
            tx_store_i64(y->dtype, y->data, i, m, buf);
        }
    } else if (kc == TX_KC_U64 && int_ok) {
        uint64_t buf[TX_BLOCK];
        for (size_t i = 0; i < n; i += TX_BLOCK) {
            size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
            tx_load_u64(x->dtype, x->data, i, m, buf);
            unary_u64(op, buf, buf, m);
            tx_store_u64(y->dtype, y->data, i, m, buf);
        }
    } else {
        return tx_err_dtype(name, x->dtype);
    }
    return NULL;
}

#define NAMED_UNARY(fn, OP)                                          \
    teexec_status *fn(const tx_tensor *x, tx_tensor *y)              \
    {                                                                \
        return tx_cpu_unary(OP, x, 0.0f, y);                         \
    }
NAMED_UNARY(tx_cpu_neg, TX_UNARY_NEG)
NAMED_UNARY(tx_cpu_abs, TX_UNARY_ABS)
NAMED_UNARY(tx_cpu_sign, TX_UNARY_SIGN)
NAMED_UNARY(tx_cpu_relu, TX_UNARY_RELU)
NAMED_UNARY(tx_cpu_sqrt, TX_UNARY_SQRT)
NAMED_UNARY(tx_cpu_reciprocal, TX_UNARY_RECIPROCAL)
NAMED_UNARY(tx_cpu_exp, TX_UNARY_EXP)
NAMED_UNARY(tx_cpu_log, TX_UNARY_LOG)
NAMED_UNARY(tx_cpu_erf, TX_UNARY_ERF)
NAMED_UNARY(tx_cpu_tanh, TX_UNARY_TANH)
NAMED_UNARY(tx_cpu_sigmoid, TX_UNARY_SIGMOID)
NAMED_UNARY(tx_cpu_softplus, TX_UNARY_SOFTPLUS)
NAMED_UNARY(tx_cpu_floor, TX_UNARY_FLOOR)
NAMED_UNARY(tx_cpu_ceil, TX_UNARY_CEIL)
NAMED_UNARY(tx_cpu_round, TX_UNARY_ROUND)

teexec_status *tx_cpu_leaky_relu(const tx_tensor *x, float alpha, tx_tensor *y)
{
    return tx_cpu_unary(TX_UNARY_LEAKY_RELU, x, alpha, y);
}

teexec_status *tx_cpu_elu(const tx_tensor *x, float alpha, tx_tensor *y)
{
    return tx_cpu_unary(TX_UNARY_ELU, x, alpha, y);
}

teexec_status *tx_cpu_gelu(const tx_tensor *x, bool approximate_tanh, tx_tensor *y)
{
    return tx_cpu_unary(approximate_tanh ? TX_UNARY_GELU_TANH : TX_UNARY_GELU, x, 0.0f, y);
}

static teexec_status *check_bound(const tx_tensor *b, const tx_tensor *x, const char *what)
{
    if (!b) return NULL;
    TX_TRY(tx_check_tensor("Clip", what, b));
    if (b->dtype != x->dtype) return tx_err_dtype_mismatch("Clip", what, b->dtype, x->dtype);
    if (b->numel != 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Clip: %s must be a scalar (has %llu "
                        "elements)", what, (unsigned long long)b->numel);
    return NULL;
}

teexec_status *tx_cpu_clip(const tx_tensor *x, const tx_tensor *min_t, const tx_tensor *max_t,
                           tx_tensor *y)
{
    TX_TRY(check_same("Clip", x, y, x ? x->dtype : TEEXEC_DTYPE_UNDEFINED));
    TX_TRY(check_bound(min_t, x, "min"));
    TX_TRY(check_bound(max_t, x, "max"));
    tx_kclass kc = tx_kclass_of(x->dtype);
    size_t n = (size_t)x->numel;
    /* min is applied first, then max, so min > max gives max everywhere
     * (as numpy.clip and ONNX's reference do). NaN inputs stay NaN. */
    if (tx_kc_is_float(kc)) {
        double lo = min_t ? tx_scalar_f64(min_t, 0) : -INFINITY;
        double hi = max_t ? tx_scalar_f64(max_t, 0) : INFINITY;
        double buf[TX_BLOCK];
        for (size_t i = 0; i < n; i += TX_BLOCK) {
            size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
            tx_load_f64(x->dtype, x->data, i, m, buf);
            for (size_t j = 0; j < m; j++) {
                double v = buf[j];
                if (v < lo) v = lo;
                if (v > hi) v = hi;
                buf[j] = v;
            }
            if (kc == TX_KC_F64)
                tx_store_f64(y->dtype, y->data, i, m, buf);
            else {
                float fb[TX_BLOCK]; /* values are already representable */
                for (size_t j = 0; j < m; j++) fb[j] = (float)buf[j];
                tx_store_f32(y->dtype, y->data, i, m, fb);
            }
        }
    } else if (kc == TX_KC_I64) {
        int64_t lo = min_t ? tx_scalar_i64(min_t, 0) : INT64_MIN;
        int64_t hi = max_t ? tx_scalar_i64(max_t, 0) : INT64_MAX;
        int64_t buf[TX_BLOCK];
        for (size_t i = 0; i < n; i += TX_BLOCK) {
            size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
            tx_load_i64(x->dtype, x->data, i, m, buf);
            for (size_t j = 0; j < m; j++) {
                int64_t v = buf[j] < lo ? lo : buf[j];
                buf[j] = v > hi ? hi : v;
            }
            tx_store_i64(y->dtype, y->data, i, m, buf);
        }
    } else if (kc == TX_KC_U64) {
        uint64_t lo = 0, hi = UINT64_MAX;
        if (min_t) tx_load_u64(min_t->dtype, min_t->data, 0, 1, &lo);
        if (max_t) tx_load_u64(max_t->dtype, max_t->data, 0, 1, &hi);
        uint64_t buf[TX_BLOCK];
        for (size_t i = 0; i < n; i += TX_BLOCK) {
            size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
            tx_load_u64(x->dtype, x->data, i, m, buf);
            for (size_t j = 0; j < m; j++) {
                uint64_t v = buf[j] < lo ? lo : buf[j];
                buf[j] = v > hi ? hi : v;
            }
            tx_store_u64(y->dtype, y->data, i, m, buf);
        }
    } else {
        return tx_err_dtype("Clip", x->dtype);
    }
    return NULL;
}

teexec_status *tx_cpu_not(const tx_tensor *x, tx_tensor *y)
{
    TX_TRY(check_same("Not", x, y, TEEXEC_DTYPE_BOOL));
    if (x->dtype != TEEXEC_DTYPE_BOOL) return tx_err_dtype("Not", x->dtype);
    const uint8_t *s = x->data;
    uint8_t *d = y->data;
    for (uint64_t i = 0; i < x->numel; i++) d[i] = !s[i];
    return NULL;
}

static teexec_status *classify_float(const char *op, const tx_tensor *x, tx_tensor *y,
                                     int detect_pos, int detect_neg, bool nan_mode)
{
    TX_TRY(check_same(op, x, y, TEEXEC_DTYPE_BOOL));
    if (!tx_kc_is_float(tx_kclass_of(x->dtype))) return tx_err_dtype(op, x->dtype);
    size_t n = (size_t)x->numel;
    uint8_t *d = y->data;
    double buf[TX_BLOCK];
    for (size_t i = 0; i < n; i += TX_BLOCK) {
        size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
        tx_load_f64(x->dtype, x->data, i, m, buf);
        for (size_t j = 0; j < m; j++) {
            double v = buf[j];
            if (nan_mode)
                d[i + j] = v != v;
            else
                d[i + j] = (detect_pos && v == INFINITY) || (detect_neg && v == -INFINITY);
        }
    }
    return NULL;
}

teexec_status *tx_cpu_isnan(const tx_tensor *x, tx_tensor *y)
{
    return classify_float("IsNaN", x, y, 0, 0, true);
}

teexec_status *tx_cpu_isinf(const tx_tensor *x, bool detect_positive, bool detect_negative,
                            tx_tensor *y)
{
    return classify_float("IsInf", x, y, detect_positive, detect_negative, false);
}
