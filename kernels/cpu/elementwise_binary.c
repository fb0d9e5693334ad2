/* elementwise_binary.c - two-input elementwise ops with numpy broadcasting
 * (arithmetic, Pow, two-input Min/Max, comparisons, logical ops).
 *
 * The output is walked row by row (kernels/cpu/iter.h); in a row each input
 * has stride 1 or 0, so every op has three simple loops: both vectors,
 * vector-scalar, scalar-vector. float32 rows are used in place; other
 * dtypes are converted block-wise into the compute type. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

#include <math.h>
#include <string.h>

static const char *const binary_names[TX_BINARY_COUNT] = {
    [TX_BINARY_ADD] = "Add",          [TX_BINARY_SUB] = "Sub",
    [TX_BINARY_MUL] = "Mul",          [TX_BINARY_DIV] = "Div",
    [TX_BINARY_POW] = "Pow",          [TX_BINARY_MIN] = "Min",
    [TX_BINARY_MAX] = "Max",          [TX_BINARY_EQUAL] = "Equal",
    [TX_BINARY_LESS] = "Less",        [TX_BINARY_LESS_OR_EQUAL] = "LessOrEqual",
    [TX_BINARY_GREATER] = "Greater",  [TX_BINARY_GREATER_OR_EQUAL] = "GreaterOrEqual",
    [TX_BINARY_AND] = "And",          [TX_BINARY_OR] = "Or",
    [TX_BINARY_XOR] = "Xor",
};

const char *tx_binary_op_name(tx_binary_op op)
{
    return (unsigned)op < TX_BINARY_COUNT ? binary_names[op] : "binary";
}

static bool is_compare(tx_binary_op op)
{
    return op >= TX_BINARY_EQUAL && op <= TX_BINARY_GREATER_OR_EQUAL;
}

static bool is_logical(tx_binary_op op)
{
    return op >= TX_BINARY_AND && op <= TX_BINARY_XOR;
}

/* y[i] = EXPR(x, z) where x comes from a, z from b; sa/sb are 0 or 1. */
#define BIN_LOOPS(T, OUT_T, EXPR)                                              \
    do {                                                                       \
        if (sa && sb) {                                                        \
            for (size_t i = 0; i < n; i++) {                                   \
                T x = a[i], z = b[i];                                          \
                (void)z;                                                       \
                y[i] = (OUT_T)(EXPR);                                          \
            }                                                                  \
        } else if (sa) {                                                       \
            T z = b[0];                                                        \
            (void)z;                                                           \
            for (size_t i = 0; i < n; i++) {                                   \
                T x = a[i];                                                    \
                y[i] = (OUT_T)(EXPR);                                          \
            }                                                                  \
        } else if (sb) {                                                       \
            T x = a[0];                                                        \
            for (size_t i = 0; i < n; i++) {                                   \
                T z = b[i];                                                    \
                (void)z;                                                       \
                y[i] = (OUT_T)(EXPR);                                          \
            }                                                                  \
        } else {                                                               \
            T x = a[0], z = b[0];                                              \
            (void)z;                                                           \
            OUT_T v = (OUT_T)(EXPR);                                           \
            for (size_t i = 0; i < n; i++) y[i] = v;                           \
        }                                                                      \
    } while (0)

/* numpy's minimum/maximum propagate NaN */
#define FMIN(x, z) ((x) != (x) || (x) < (z) ? (x) : (z))
#define FMAX(x, z) ((x) != (x) || (x) > (z) ? (x) : (z))

#define FLOAT_ARITH(T, SFX)                                                      \
    switch (op) {                                                                \
    case TX_BINARY_ADD: BIN_LOOPS(T, T, x + z); break;                           \
    case TX_BINARY_SUB: BIN_LOOPS(T, T, x - z); break;                           \
    case TX_BINARY_MUL: BIN_LOOPS(T, T, x * z); break;                           \
    case TX_BINARY_DIV: BIN_LOOPS(T, T, x / z); break;                           \
    case TX_BINARY_POW:                                                          \
        /* exported graphs square and cube through Pow (variance, tanh-GELU):  \
         * plain products there, pow() elsewhere */                            \
        if (!sb && b[0] == (T)2)                                                 \
            BIN_LOOPS(T, T, x * x);                                              \
        else if (!sb && b[0] == (T)3)                                            \
            BIN_LOOPS(T, T, x * x * x);                                          \
        else                                                                     \
            BIN_LOOPS(T, T, pow##SFX(x, z));                                     \
        break;                                                                   \
    case TX_BINARY_MIN: BIN_LOOPS(T, T, FMIN(x, z)); break;                      \
    case TX_BINARY_MAX: BIN_LOOPS(T, T, FMAX(x, z)); break;                      \
    default: break;                                                              \
    }

TX_SIMD_CLONES static void arith_f32(tx_binary_op op, const float *a, int sa, const float *b, int sb,
                      float *y, size_t n)
{
    FLOAT_ARITH(float, f)
}

static void arith_f64(tx_binary_op op, const double *a, int sa, const double *b, int sb,
                      double *y, size_t n)
{
    FLOAT_ARITH(double, )
}

/* Integer power by squaring, wrapping; negative exponents truncate 1/x^|e|. */
static int64_t ipow_i64(int64_t base, int64_t e)
{
    if (e < 0) {
        if (base == 1) return 1;
        if (base == -1) return (e & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, b = (uint64_t)base;
    uint64_t ue = (uint64_t)e;
    while (ue) {
        if (ue & 1) r *= b;
        b *= b;
        ue >>= 1;
    }
    return (int64_t)r;
}

static uint64_t ipow_u64(uint64_t b, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

/* Truncating division without C undefined behaviour: x / 0 = 0 and
 * INT64_MIN / -1 = INT64_MIN (the wrapped quotient). */
static inline int64_t idiv_i64(int64_t x, int64_t z)
{
    if (z == 0) return 0;
    if (z == -1) return (int64_t)((uint64_t)0 - (uint64_t)x);
    return x / z;
}

static inline uint64_t idiv_u64(uint64_t x, uint64_t z)
{
    return z ? x / z : 0;
}

#define WADD(x, z) ((int64_t)((uint64_t)(x) + (uint64_t)(z)))
#define WSUB(x, z) ((int64_t)((uint64_t)(x) - (uint64_t)(z)))
#define WMUL(x, z) ((int64_t)((uint64_t)(x) * (uint64_t)(z)))

static void arith_i64(tx_binary_op op, const int64_t *a, int sa, const int64_t *b, int sb,
                      int64_t *y, size_t n)
{
    switch (op) {
    case TX_BINARY_ADD: BIN_LOOPS(int64_t, int64_t, WADD(x, z)); break;
    case TX_BINARY_SUB: BIN_LOOPS(int64_t, int64_t, WSUB(x, z)); break;
    case TX_BINARY_MUL: BIN_LOOPS(int64_t, int64_t, WMUL(x, z)); break;
    case TX_BINARY_DIV: BIN_LOOPS(int64_t, int64_t, idiv_i64(x, z)); break;
    case TX_BINARY_POW: BIN_LOOPS(int64_t, int64_t, ipow_i64(x, z)); break;
    case TX_BINARY_MIN: BIN_LOOPS(int64_t, int64_t, x < z ? x : z); break;
    case TX_BINARY_MAX: BIN_LOOPS(int64_t, int64_t, x > z ? x : z); break;
    default: break;
    }
}

static void arith_u64(tx_binary_op op, const uint64_t *a, int sa, const uint64_t *b, int sb,
                      uint64_t *y, size_t n)
{
    switch (op) {
    case TX_BINARY_ADD: BIN_LOOPS(uint64_t, uint64_t, x + z); break;
    case TX_BINARY_SUB: BIN_LOOPS(uint64_t, uint64_t, x - z); break;
    case TX_BINARY_MUL: BIN_LOOPS(uint64_t, uint64_t, x * z); break;
    case TX_BINARY_DIV: BIN_LOOPS(uint64_t, uint64_t, idiv_u64(x, z)); break;
    case TX_BINARY_POW: BIN_LOOPS(uint64_t, uint64_t, ipow_u64(x, z)); break;
    case TX_BINARY_MIN: BIN_LOOPS(uint64_t, uint64_t, x < z ? x : z); break;
    case TX_BINARY_MAX: BIN_LOOPS(uint64_t, uint64_t, x > z ? x : z); break;
    default: break;
    }
}

#define COMPARE_BODY(T)                                                          \
    switch (op) {                                                                \
    case TX_BINARY_EQUAL: BIN_LOOPS(T, uint8_t, x == z); break;                  \
    case TX_BINARY_LESS: BIN_LOOPS(T, uint8_t, x < z); break;                    \
    case TX_BINARY_LESS_OR_EQUAL: BIN_LOOPS(T, uint8_t, x <= z); break;          \
    case TX_BINARY_GREATER: BIN_LOOPS(T, uint8_t, x > z); break;                 \
    case TX_BINARY_GREATER_OR_EQUAL: BIN_LOOPS(T, uint8_t, x >= z); break;       \
    case TX_BINARY_AND: BIN_LOOPS(T, uint8_t, (x != 0) & (z != 0)); break;       \
    case TX_BINARY_OR: BIN_LOOPS(T, uint8_t, (x != 0) | (z != 0)); break;        \
    case TX_BINARY_XOR: BIN_LOOPS(T, uint8_t, (x != 0) ^ (z != 0)); break;       \
    default: break;                                                              \
    }

static void compare_f32(tx_binary_op op, const float *a, int sa, const float *b, int sb,
                        uint8_t *y, size_t n)
{
    COMPARE_BODY(float)
}

static void compare_f64(tx_binary_op op, const double *a, int sa, const double *b, int sb,
                        uint8_t *y, size_t n)
{
    COMPARE_BODY(double)
}

static void compare_i64(tx_binary_op op, const int64_t *a, int sa, const int64_t *b, int sb,
                        uint8_t *y, size_t n)
{
    COMPARE_BODY(int64_t)
}

static void compare_u64(tx_binary_op op, const uint64_t *a, int sa, const uint64_t *b, int sb,
                        uint8_t *y, size_t n)
{
    COMPARE_BODY(uint64_t)
}

static void compare_u8(tx_binary_op op, const uint8_t *a, int sa, const uint8_t *b, int sb,
                       uint8_t *y, size_t n)
{
    COMPARE_BODY(uint8_t)
}

/* The domain a (dtype pair, op) computes in. */
typedef enum { DOM_F32, DOM_F64, DOM_I64, DOM_U64, DOM_POW_F64, DOM_BOOL } domain;

/* One row: n outputs at y_off; a at a_off with stride sa (0/1), b likewise. */
static void run_row(tx_binary_op op, domain dom, const tx_tensor *A, int64_t a_off, int sa,
                    const tx_tensor *B, int64_t b_off, int sb, tx_tensor *Y, int64_t y_off,
                    size_t n)
{
    bool cmp = is_compare(op) || is_logical(op);
    for (size_t i = 0; i < n; i += TX_BLOCK) {
        size_t m = n - i < TX_BLOCK ? n - i : TX_BLOCK;
        size_t ao = (size_t)a_off + (sa ? i : 0), bo = (size_t)b_off + (sb ? i : 0);
        size_t am = sa ? m : 1, bm = sb ? m : 1;
        size_t yo = (size_t)y_off + i;
        switch (dom) {
        case DOM_F32: {
            float ta[TX_BLOCK], tb[TX_BLOCK], ty[TX_BLOCK];
            const float *pa = tx_view_f32(A->dtype, A->data, ao, am, ta);
            const float *pb = tx_view_f32(B->dtype, B->data, bo, bm, tb);
            if (cmp) {
                compare_f32(op, pa, sa, pb, sb, (uint8_t *)Y->data + yo, m);
            } else if (Y->dtype == TEEXEC_DTYPE_FLOAT) {
                arith_f32(op, pa, sa, pb, sb, (float *)Y->data + yo, m);
            } else {
                arith_f32(op, pa, sa, pb, sb, ty, m);
                tx_store_f32(Y->dtype, Y->data, yo, m, ty);
            }
            break;
        }
        case DOM_F64:
        case DOM_POW_F64: {
            double ta[TX_BLOCK], tb[TX_BLOCK], ty[TX_BLOCK];
            tx_load_f64(A->dtype, A->data, ao, am, ta);
            tx_load_f64(B->dtype, B->data, bo, bm, tb);
            if (cmp) {
                compare_f64(op, ta, sa, tb, sb, (uint8_t *)Y->data + yo, m);
            } else {
                arith_f64(op, ta, sa, tb, sb, ty, m);
                tx_store_f64(Y->dtype, Y->data, yo, m, ty);
            }
            break;
        }
        case DOM_I64: {
            int64_t ta[TX_BLOCK], tb[TX_BLOCK], ty[TX_BLOCK];
            tx_load_i64(A->dtype, A->data, ao, am, ta);
            tx_load_i64(B->dtype, B->data, bo, bm, tb);
            if (cmp) {
                compare_i64(op, ta, sa, tb, sb, (uint8_t *)Y->data + yo, m);
            } else {
                arith_i64(op, ta, sa, tb, sb, ty, m);
                tx_store_i64(Y->dtype, Y->data, yo, m, ty);
            }
            break;
        }
        case DOM_U64: {
            uint64_t ta[TX_BLOCK], tb[TX_BLOCK], ty[TX_BLOCK];
            tx_load_u64(A->dtype, A->data, ao, am, ta);
            tx_load_u64(B->dtype, B->data, bo, bm, tb);
            if (cmp) {
                compare_u64(op, ta, sa, tb, sb, (uint8_t *)Y->data + yo, m);
            } else {
                arith_u64(op, ta, sa, tb, sb, ty, m);
                tx_store_u64(Y->dtype, Y->data, yo, m, ty);
            }
            break;
        }
        case DOM_BOOL:
            compare_u8(op, (const uint8_t *)A->data + ao, sa, (const uint8_t *)B->data + bo, sb,
                       (uint8_t *)Y->data + yo, m);
            break;
        }
    }
}

/* Picks the compute domain and the output dtype, or refuses. */
static teexec_status *plan_types(tx_binary_op op, const tx_tensor *a, const tx_tensor *b,
                                 domain *dom, teexec_dtype *ydt)
{
    const char *name = tx_binary_op_name(op);
    tx_kclass ka = tx_kclass_of(a->dtype), kb = tx_kclass_of(b->dtype);
    if (is_logical(op)) {
        if (a->dtype != TEEXEC_DTYPE_BOOL) return tx_err_dtype(name, a->dtype);
        if (b->dtype != TEEXEC_DTYPE_BOOL) return tx_err_dtype(name, b->dtype);
        *dom = DOM_BOOL;
        *ydt = TEEXEC_DTYPE_BOOL;
        return NULL;
    }
    if (op == TX_BINARY_POW) {
        if (!tx_kc_is_numeric(ka)) return tx_err_dtype(name, a->dtype);
        if (!tx_kc_is_numeric(kb)) return tx_err_dtype(name, b->dtype);
        *ydt = a->dtype;
        if (tx_kc_is_int(ka) && tx_kc_is_int(kb))
            *dom = ka == TX_KC_U64 && kb == TX_KC_U64 ? DOM_U64 : DOM_I64;
        else if (ka == TX_KC_F32)
            *dom = DOM_F32; /* exponent of any dtype converted to float */
        else
            *dom = DOM_POW_F64; /* double base, or int base with float exponent */
        return NULL;
    }
    if (a->dtype != b->dtype) return tx_err_dtype_mismatch(name, "B", b->dtype, a->dtype);
    if (is_compare(op)) {
        *ydt = TEEXEC_DTYPE_BOOL;
        if (ka == TX_KC_BOOL && op == TX_BINARY_EQUAL) {
            *dom = DOM_BOOL;
            return NULL;
        }
    } else {
        *ydt = a->dtype;
    }
    switch (ka) {
    case TX_KC_F32: *dom = DOM_F32; break;
    case TX_KC_F64: *dom = DOM_F64; break;
    case TX_KC_I64: *dom = DOM_I64; break;
    case TX_KC_U64: *dom = DOM_U64; break;
    default: return tx_err_dtype(name, a->dtype);
    }
    return NULL;
}

teexec_status *tx_cpu_binary(tx_binary_op op, const tx_tensor *a, const tx_tensor *b,
                             tx_tensor *y)
{
    if ((unsigned)op >= TX_BINARY_COUNT)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "unknown binary op %d", (int)op);
    const char *name = tx_binary_op_name(op);
    TX_TRY(tx_check_tensor(name, "A", a));
    TX_TRY(tx_check_tensor(name, "B", b));
    domain dom = DOM_F32;
    teexec_dtype ydt = TEEXEC_DTYPE_UNDEFINED;
    TX_TRY(plan_types(op, a, b, &dom, &ydt));
    tx_shape sa = tx_shape_of(a), sb = tx_shape_of(b), so;
    TX_TRY(tx_status_prefix(tx_shape_broadcast2(&sa, &sb, &so), "%s", name));
    TX_TRY(tx_check_output(name, y, ydt, &so));

    int64_t st_y[TX_MAX_RANK], st_a[TX_MAX_RANK], st_b[TX_MAX_RANK];
    tx_shape_strides(&so, st_y);
    tx_broadcast_strides(&sa, &so, st_a);
    tx_broadcast_strides(&sb, &so, st_b);
    const int64_t *strides[3] = {st_y, st_a, st_b};
    tx_iter it;
    tx_iter_init(&it, so.rank, so.dims, 3, strides);
    for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it))
        run_row(op, dom, a, it.off[1], it.inner_stride[1] != 0, b, it.off[2],
                it.inner_stride[2] != 0, y, it.off[0], (size_t)it.inner);
    return NULL;
}

#define NAMED_BINARY(fn, OP)                                                   \
    teexec_status *fn(const tx_tensor *a, const tx_tensor *b, tx_tensor *y)    \
    {                                                                          \
        return tx_cpu_binary(OP, a, b, y);                                     \
    }
NAMED_BINARY(tx_cpu_add, TX_BINARY_ADD)
NAMED_BINARY(tx_cpu_sub, TX_BINARY_SUB)
NAMED_BINARY(tx_cpu_mul, TX_BINARY_MUL)
NAMED_BINARY(tx_cpu_div, TX_BINARY_DIV)
NAMED_BINARY(tx_cpu_pow, TX_BINARY_POW)
NAMED_BINARY(tx_cpu_equal, TX_BINARY_EQUAL)
NAMED_BINARY(tx_cpu_less, TX_BINARY_LESS)
NAMED_BINARY(tx_cpu_greater, TX_BINARY_GREATER)
NAMED_BINARY(tx_cpu_and, TX_BINARY_AND)
NAMED_BINARY(tx_cpu_or, TX_BINARY_OR)
