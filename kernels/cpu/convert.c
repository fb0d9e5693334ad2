/* convert.c - dtype conversion with ONNX Cast semantics (see convert.h).
 *
 * Every element passes through one neutral value: a double for floating
 * sources, an int64/uint64 for integer and bool sources. Narrowing to a
 * format of <= 24 significant bits goes double -> float with round-to-odd
 * and then float -> target with round-to-nearest-even; round-to-odd keeps
 * the sticky information, so the two steps give the correctly rounded
 * result (a plain double -> float -> fp8 chain can round twice). Integer
 * sources beyond 2^53 reach the double the same way.
 */
#include "kernels/cpu/convert.h"

#include "base/half.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef enum { V_FLOAT, V_INT, V_UINT } val_kind;

typedef struct val {
    val_kind kind;
    double d;
    int64_t i;
    uint64_t u;
} val;

bool tx_convert_supports(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: case TEEXEC_DTYPE_UINT8: case TEEXEC_DTYPE_INT8:
    case TEEXEC_DTYPE_UINT16: case TEEXEC_DTYPE_INT16: case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_INT64: case TEEXEC_DTYPE_BOOL: case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_DOUBLE: case TEEXEC_DTYPE_UINT32: case TEEXEC_DTYPE_UINT64:
    case TEEXEC_DTYPE_BFLOAT16: case TEEXEC_DTYPE_FLOAT8E4M3FN:
    case TEEXEC_DTYPE_FLOAT8E4M3FNUZ: case TEEXEC_DTYPE_FLOAT8E5M2:
    case TEEXEC_DTYPE_FLOAT8E5M2FNUZ: case TEEXEC_DTYPE_UINT4: case TEEXEC_DTYPE_INT4:
    case TEEXEC_DTYPE_FLOAT4E2M1: case TEEXEC_DTYPE_FLOAT8E8M0: case TEEXEC_DTYPE_UINT2:
    case TEEXEC_DTYPE_INT2:
        return true;
    default:
        return false;
    }
}

/* Round-to-odd conversion of an integer magnitude to double: keep 53 bits
 * and fold the dropped bits into the lowest kept one. */
static double u64_to_f64_odd(uint64_t u)
{
    if (u < (1ull << 53)) return (double)u;
    int s = 64 - __builtin_clzll(u) - 53;
    uint64_t t = u >> s;
    if (u & ((1ull << s) - 1u)) t |= 1u;
    return ldexp((double)t, s);
}

static double i64_to_f64_odd(int64_t i)
{
    if (i >= 0) return u64_to_f64_odd((uint64_t)i);
    return -u64_to_f64_odd(0u - (uint64_t)i);
}

static float f64_to_f32_odd(double d)
{
    if (isnan(d)) return tx_bits_f32((signbit(d) ? 0x80000000u : 0u) | 0x7fc00000u);
    if (fabs(d) > FLT_MAX) return signbit(d) ? -INFINITY : INFINITY;
    float f = (float)d;
    if ((double)f != d) {
        uint32_t b = tx_f32_bits(f);
        if (!(b & 1u)) {
            /* step the magnitude one ulp toward d: lands on the odd neighbour */
            if (fabs((double)f) > fabs(d)) b--;
            else b++;
            f = tx_bits_f32(b);
        }
    }
    return f;
}

/* double -> float, round to nearest even, defined for every input. */
static float f64_to_f32_rne(double d)
{
    if (!isnan(d) && fabs(d) > FLT_MAX) {
        /* FLT_MAX + half an ulp (2^103) is the tie; FLT_MAX is odd, so the
         * tie goes to Inf */
        if (fabs(d) >= (double)FLT_MAX + 0x1p103) return signbit(d) ? -INFINITY : INFINITY;
        return signbit(d) ? -FLT_MAX : FLT_MAX;
    }
    return (float)d;
}

static val load(const void *src, teexec_dtype t, uint64_t k)
{
    val v = {V_FLOAT, 0.0, 0, 0};
    switch (t) {
    case TEEXEC_DTYPE_FLOAT: v.d = ((const float *)src)[k]; break;
    case TEEXEC_DTYPE_DOUBLE: v.d = ((const double *)src)[k]; break;
    case TEEXEC_DTYPE_FLOAT16: v.d = tx_f16_to_f32(((const uint16_t *)src)[k]); break;
    case TEEXEC_DTYPE_BFLOAT16: v.d = tx_bf16_to_f32(((const uint16_t *)src)[k]); break;
    case TEEXEC_DTYPE_FLOAT8E4M3FN: case TEEXEC_DTYPE_FLOAT8E4M3FNUZ:
    case TEEXEC_DTYPE_FLOAT8E5M2: case TEEXEC_DTYPE_FLOAT8E5M2FNUZ:
    case TEEXEC_DTYPE_FLOAT8E8M0:
        v.d = tx_fp8_to_f32(t, ((const uint8_t *)src)[k]);
        break;
    case TEEXEC_DTYPE_FLOAT4E2M1:
        v.d = tx_e2m1_to_f32((uint8_t)tx_subbyte_get(src, k, 4));
        break;
    case TEEXEC_DTYPE_INT8: v.kind = V_INT; v.i = ((const int8_t *)src)[k]; break;
    case TEEXEC_DTYPE_INT16: v.kind = V_INT; v.i = ((const int16_t *)src)[k]; break;
    case TEEXEC_DTYPE_INT32: v.kind = V_INT; v.i = ((const int32_t *)src)[k]; break;
    case TEEXEC_DTYPE_INT64: v.kind = V_INT; v.i = ((const int64_t *)src)[k]; break;
    case TEEXEC_DTYPE_INT4: v.kind = V_INT; v.i = tx_subbyte_sext(tx_subbyte_get(src, k, 4), 4); break;
    case TEEXEC_DTYPE_INT2: v.kind = V_INT; v.i = tx_subbyte_sext(tx_subbyte_get(src, k, 2), 2); break;
    case TEEXEC_DTYPE_UINT8: v.kind = V_UINT; v.u = ((const uint8_t *)src)[k]; break;
    case TEEXEC_DTYPE_UINT16: v.kind = V_UINT; v.u = ((const uint16_t *)src)[k]; break;
    case TEEXEC_DTYPE_UINT32: v.kind = V_UINT; v.u = ((const uint32_t *)src)[k]; break;
    case TEEXEC_DTYPE_UINT64: v.kind = V_UINT; v.u = ((const uint64_t *)src)[k]; break;
    case TEEXEC_DTYPE_UINT4: v.kind = V_UINT; v.u = tx_subbyte_get(src, k, 4); break;
    case TEEXEC_DTYPE_UINT2: v.kind = V_UINT; v.u = tx_subbyte_get(src, k, 2); break;
    case TEEXEC_DTYPE_BOOL: v.kind = V_UINT; v.u = ((const uint8_t *)src)[k] != 0; break;
    default: break;
    }
    return v;
}

/* The value as a double, for floating targets: exact for floats,
 * round-to-odd for wide integers (see the file comment). */
static double as_f64_odd(val v)
{
    if (v.kind == V_INT) return i64_to_f64_odd(v.i);
    if (v.kind == V_UINT) return u64_to_f64_odd(v.u);
    return v.d;
}

/* Truncation toward zero with saturation and NaN -> 0 (C leaves these
 * undefined). lo and hi are exact in double except INT64_MAX, whose double
 * 2^63 is the right threshold anyway. */
static int64_t f64_trunc_sat_i64(double d, int64_t lo, int64_t hi)
{
    if (isnan(d)) return 0;
    double t = trunc(d);
    if (t <= (double)lo) return lo;
    if (t >= (double)hi) return hi;
    return (int64_t)t;
}

static uint64_t f64_trunc_sat_u64(double d, uint64_t hi)
{
    if (isnan(d)) return 0;
    double t = trunc(d);
    if (t <= 0.0) return 0;
    if (t >= (double)hi) return hi; /* UINT64_MAX -> 2^64: right threshold */
    return (uint64_t)t;
}

static void store_int(void *dst, teexec_dtype t, uint64_t k, val v)
{
    int64_t lo;
    uint64_t hi;
    bool is_signed = true;
    switch (t) {
    case TEEXEC_DTYPE_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case TEEXEC_DTYPE_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    case TEEXEC_DTYPE_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
    case TEEXEC_DTYPE_INT64: lo = INT64_MIN; hi = INT64_MAX; break;
    case TEEXEC_DTYPE_UINT8: lo = 0; hi = UINT8_MAX; is_signed = false; break;
    case TEEXEC_DTYPE_UINT16: lo = 0; hi = UINT16_MAX; is_signed = false; break;
    case TEEXEC_DTYPE_UINT32: lo = 0; hi = UINT32_MAX; is_signed = false; break;
    default: lo = 0; hi = UINT64_MAX; is_signed = false; break;
    }
    uint64_t bits;
    if (v.kind == V_FLOAT) {
        bits = is_signed ? (uint64_t)f64_trunc_sat_i64(v.d, lo, (int64_t)hi)
                         : f64_trunc_sat_u64(v.d, hi);
    } else {
        bits = v.kind == V_INT ? (uint64_t)v.i : v.u; /* wrap: keep the low bytes */
    }
    switch (t) {
    case TEEXEC_DTYPE_INT8: case TEEXEC_DTYPE_UINT8: ((uint8_t *)dst)[k] = (uint8_t)bits; break;
    case TEEXEC_DTYPE_INT16: case TEEXEC_DTYPE_UINT16: ((uint16_t *)dst)[k] = (uint16_t)bits; break;
    case TEEXEC_DTYPE_INT32: case TEEXEC_DTYPE_UINT32: ((uint32_t *)dst)[k] = (uint32_t)bits; break;
    default: ((uint64_t *)dst)[k] = bits; break;
    }
}

static void store_subbyte_int(void *dst, teexec_dtype t, uint64_t k, val v)
{
    int lo = 0, hi = 0;
    (void)tx_subbyte_int_range(t, &lo, &hi);
    unsigned bits = (t == TEEXEC_DTYPE_INT4 || t == TEEXEC_DTYPE_UINT4) ? 4u : 2u;
    int64_t r;
    if (v.kind == V_FLOAT) r = tx_f64_to_int_rne_sat(v.d, lo, hi);
    else if (v.kind == V_INT) r = v.i < lo ? lo : v.i > hi ? hi : v.i;
    else r = v.u > (uint64_t)hi ? hi : (int64_t)v.u;
    tx_subbyte_set(dst, k, bits, (unsigned)r);
}

static void store(void *dst, teexec_dtype t, uint64_t k, val v, const tx_convert_opts *o)
{
    switch (t) {
    case TEEXEC_DTYPE_BOOL:
        ((uint8_t *)dst)[k] = v.kind == V_FLOAT ? (v.d != 0.0) : v.kind == V_INT ? (v.i != 0) : (v.u != 0);
        return;
    case TEEXEC_DTYPE_DOUBLE:
        ((double *)dst)[k] = v.kind == V_FLOAT ? v.d : v.kind == V_INT ? (double)v.i : (double)v.u;
        return;
    case TEEXEC_DTYPE_FLOAT:
        ((float *)dst)[k] = v.kind == V_FLOAT ? f64_to_f32_rne(v.d)
                            : v.kind == V_INT ? (float)v.i : (float)v.u;
        return;
    case TEEXEC_DTYPE_INT4: case TEEXEC_DTYPE_UINT4: case TEEXEC_DTYPE_INT2: case TEEXEC_DTYPE_UINT2:
        store_subbyte_int(dst, t, k, v);
        return;
    case TEEXEC_DTYPE_INT8: case TEEXEC_DTYPE_INT16: case TEEXEC_DTYPE_INT32: case TEEXEC_DTYPE_INT64:
    case TEEXEC_DTYPE_UINT8: case TEEXEC_DTYPE_UINT16: case TEEXEC_DTYPE_UINT32: case TEEXEC_DTYPE_UINT64:
        store_int(dst, t, k, v);
        return;
    default:
        break;
    }
    /* narrow floating targets */
    float f = f64_to_f32_odd(as_f64_odd(v));
    switch (t) {
    case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)dst)[k] = tx_f32_to_f16(f); break;
    case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)dst)[k] = tx_f32_to_bf16(f); break;
    case TEEXEC_DTYPE_FLOAT8E8M0:
        ((uint8_t *)dst)[k] = tx_f32_to_e8m0(f, o->saturate, o->e8m0_round);
        break;
    case TEEXEC_DTYPE_FLOAT4E2M1: tx_subbyte_set(dst, k, 4, tx_f32_to_e2m1(f)); break;
    default: ((uint8_t *)dst)[k] = tx_f32_to_fp8(t, f, o->saturate); break;
    }
}

static unsigned dtype_bits(teexec_dtype t)
{
    return teexec_dtype_bits(t);
}

/* Zero the unused fields of a packed destination's last byte, so output
 * bytes never depend on what the buffer held before. */
static void clear_padding(void *dst, teexec_dtype t, uint64_t n)
{
    unsigned bits = dtype_bits(t);
    if (bits >= 8) return;
    unsigned per = 8u / bits;
    for (uint64_t k = n; k % per != 0; k++) tx_subbyte_set(dst, k, bits, 0);
}

teexec_status *tx_convert(const void *src, teexec_dtype src_type, void *dst,
                          teexec_dtype dst_type, uint64_t n, const tx_convert_opts *opts)
{
    tx_convert_opts o = opts ? *opts : TX_CONVERT_OPTS_DEFAULT;
    if (!tx_convert_supports(src_type) || !tx_convert_supports(dst_type))
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "convert: no conversion from %s to %s",
                        teexec_dtype_name(src_type), teexec_dtype_name(dst_type));
    if ((unsigned)o.e8m0_round > TX_E8M0_ROUND_NEAREST)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "convert: bad E8M0 round mode %d",
                        (int)o.e8m0_round);
    if (n == 0) return NULL;
    if (!src || !dst) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "convert: NULL buffer");

    if (src_type == dst_type) {
        if (src != dst) {
            unsigned bits = dtype_bits(src_type);
            uint64_t bytes = bits >= 8 ? n * (bits / 8u) : (n * bits + 7u) / 8u;
            memmove(dst, src, (size_t)bytes);
            clear_padding(dst, dst_type, n);
        }
        return NULL;
    }
    /* Fast paths for the conversions the quantizers run on big tensors. */
    if (src_type == TEEXEC_DTYPE_BFLOAT16 && dst_type == TEEXEC_DTYPE_FLOAT) {
        for (uint64_t k = 0; k < n; k++)
            ((float *)dst)[k] = tx_bf16_to_f32(((const uint16_t *)src)[k]);
        return NULL;
    }
    if (src_type == TEEXEC_DTYPE_FLOAT && dst_type == TEEXEC_DTYPE_BFLOAT16) {
        for (uint64_t k = 0; k < n; k++)
            ((uint16_t *)dst)[k] = tx_f32_to_bf16(((const float *)src)[k]);
        return NULL;
    }
    if (src_type == TEEXEC_DTYPE_FLOAT16 && dst_type == TEEXEC_DTYPE_FLOAT) {
        for (uint64_t k = 0; k < n; k++)
            ((float *)dst)[k] = tx_f16_to_f32(((const uint16_t *)src)[k]);
        return NULL;
    }
    if (src_type == TEEXEC_DTYPE_FLOAT && dst_type == TEEXEC_DTYPE_FLOAT16) {
        for (uint64_t k = 0; k < n; k++)
            ((uint16_t *)dst)[k] = tx_f32_to_f16(((const float *)src)[k]);
        return NULL;
    }
    for (uint64_t k = 0; k < n; k++) store(dst, dst_type, k, load(src, src_type, k), &o);
    clear_padding(dst, dst_type, n);
    return NULL;
}

teexec_status *tx_convert_from_f32(const float *src, void *dst, teexec_dtype dst_type,
                                   uint64_t n, const tx_convert_opts *opts)
{
    return tx_convert(src, TEEXEC_DTYPE_FLOAT, dst, dst_type, n, opts);
}

teexec_status *tx_convert_to_f32(const void *src, teexec_dtype src_type, float *dst, uint64_t n)
{
    return tx_convert(src, src_type, dst, TEEXEC_DTYPE_FLOAT, n, NULL);
}
