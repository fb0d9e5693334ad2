/* numfmt_fp8.c - FP8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) encode/decode.
 *
 * All four share one rounding routine: integer round-to-nearest-even of the
 * float significand onto the format's grid. The grid is treated as
 * unbounded above, so "out of range" means "rounds to a code above the
 * largest finite code", which is exactly where cvt.rn.satfinite and ONNX
 * Cast switch to saturation (e.g. 464 rounds to 448 in E4M3FN, 465 does not).
 */
#include "base/numfmt.h"

#include "base/half.h"

typedef struct fp8_fmt {
    unsigned man_bits;
    int bias;
    unsigned max_code; /* magnitude bits of the largest finite value */
    bool fnuz;         /* single zero, NaN = 0x80 */
    bool has_inf;      /* E5M2: IEEE-style Inf/NaN in exponent 31 */
} fp8_fmt;

static const fp8_fmt fmt_e4m3fn = {3, 7, 0x7E, false, false};
static const fp8_fmt fmt_e4m3fnuz = {3, 8, 0x7F, true, false};
static const fp8_fmt fmt_e5m2 = {2, 15, 0x7B, false, true};
static const fp8_fmt fmt_e5m2fnuz = {2, 16, 0x7F, true, false};

/* Code of a positive finite float (bits a, 0 < a < 0x7f800000) on the
 * format's grid, rounded to nearest even; may exceed max_code (overflow). */
static uint32_t round_magnitude(uint32_t a, const fp8_fmt *f)
{
    int exp_field = (int)(a >> 23);
    /* Float subnormals are below 2^-126, far under half the smallest FP8
     * subnormal (>= 2^-17): they round to zero. */
    if (exp_field == 0) return 0;
    int e = exp_field - 127;
    if (e > 20) return 0xFFFFu; /* every FP8 max is below 2^17 */
    uint32_t sig = (a & 0x7fffffu) | 0x800000u;
    int emin = 1 - f->bias;
    int ep = e < emin ? emin : e; /* below emin the quantum stays 2^(emin-M) */
    int shift = 23 - (int)f->man_bits + (ep - e);
    if (shift >= 25) return 0; /* sig < 2^24 <= half a quantum */
    uint32_t q = sig >> shift;
    uint32_t rem = sig & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    /* A carry out of the mantissa moves into the exponent field by itself. */
    return ((uint32_t)(ep - emin) << f->man_bits) + q;
}

static uint8_t nan_code(const fp8_fmt *f, uint8_t sign)
{
    return f->fnuz ? 0x80 : (uint8_t)(sign | 0x7F);
}

/* What saturate=0 produces for Inf and out-of-range values. */
static uint8_t overflow_code(const fp8_fmt *f, uint8_t sign)
{
    if (f->has_inf) return (uint8_t)(sign | 0x7C);
    return nan_code(f, sign);
}

static uint8_t encode(float x, int saturate, const fp8_fmt *f)
{
    uint32_t u = tx_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return nan_code(f, sign);
    if (a == 0x7f800000u)
        return saturate ? (uint8_t)(sign | f->max_code) : overflow_code(f, sign);
    uint32_t code = a ? round_magnitude(a, f) : 0;
    if (code > f->max_code)
        return saturate ? (uint8_t)(sign | f->max_code) : overflow_code(f, sign);
    if (code == 0 && f->fnuz) return 0; /* no negative zero */
    return (uint8_t)(sign | code);
}

static float decode(uint8_t b, const fp8_fmt *f)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    unsigned m = f->man_bits;
    unsigned e = (b & 0x7Fu) >> m;
    unsigned man = b & ((1u << m) - 1u);
    if (f->fnuz && b == 0x80) return tx_bits_f32(0x7fc00000u);
    if (f->has_inf && e == 31u)
        return tx_bits_f32(sign | (man ? 0x7fc00000u : 0x7f800000u));
    if (!f->fnuz && !f->has_inf && (b & 0x7Fu) == 0x7Fu)
        return tx_bits_f32(sign | 0x7fc00000u);
    if (e == 0) {
        /* subnormal: man * 2^(1 - bias - M); the power of two is a normal
         * float and the product is exact */
        float quantum = tx_bits_f32((uint32_t)(1 - f->bias - (int)m + 127) << 23);
        return tx_bits_f32(sign | tx_f32_bits((float)man * quantum));
    }
    uint32_t exp32 = (uint32_t)((int)e - f->bias + 127);
    return tx_bits_f32(sign | (exp32 << 23) | (man << (23u - m)));
}

float tx_e4m3fn_to_f32(uint8_t b) { return decode(b, &fmt_e4m3fn); }
float tx_e4m3fnuz_to_f32(uint8_t b) { return decode(b, &fmt_e4m3fnuz); }
float tx_e5m2_to_f32(uint8_t b) { return decode(b, &fmt_e5m2); }
float tx_e5m2fnuz_to_f32(uint8_t b) { return decode(b, &fmt_e5m2fnuz); }
uint8_t tx_f32_to_e4m3fn(float x, int saturate) { return encode(x, saturate, &fmt_e4m3fn); }
uint8_t tx_f32_to_e4m3fnuz(float x, int saturate) { return encode(x, saturate, &fmt_e4m3fnuz); }
uint8_t tx_f32_to_e5m2(float x, int saturate) { return encode(x, saturate, &fmt_e5m2); }
uint8_t tx_f32_to_e5m2fnuz(float x, int saturate) { return encode(x, saturate, &fmt_e5m2fnuz); }

bool tx_numfmt_is_byte_float(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT8E4M3FN || dt == TEEXEC_DTYPE_FLOAT8E4M3FNUZ ||
           dt == TEEXEC_DTYPE_FLOAT8E5M2 || dt == TEEXEC_DTYPE_FLOAT8E5M2FNUZ ||
           dt == TEEXEC_DTYPE_FLOAT8E8M0;
}

float tx_fp8_to_f32(teexec_dtype fmt, uint8_t b)
{
    switch (fmt) {
    case TEEXEC_DTYPE_FLOAT8E4M3FN: return decode(b, &fmt_e4m3fn);
    case TEEXEC_DTYPE_FLOAT8E4M3FNUZ: return decode(b, &fmt_e4m3fnuz);
    case TEEXEC_DTYPE_FLOAT8E5M2: return decode(b, &fmt_e5m2);
    case TEEXEC_DTYPE_FLOAT8E5M2FNUZ: return decode(b, &fmt_e5m2fnuz);
    case TEEXEC_DTYPE_FLOAT8E8M0: return tx_e8m0_to_f32(b);
    default: return tx_bits_f32(0x7fc00000u);
    }
}

uint8_t tx_f32_to_fp8(teexec_dtype fmt, float x, int saturate)
{
    switch (fmt) {
    case TEEXEC_DTYPE_FLOAT8E4M3FN: return encode(x, saturate, &fmt_e4m3fn);
    case TEEXEC_DTYPE_FLOAT8E4M3FNUZ: return encode(x, saturate, &fmt_e4m3fnuz);
    case TEEXEC_DTYPE_FLOAT8E5M2: return encode(x, saturate, &fmt_e5m2);
    case TEEXEC_DTYPE_FLOAT8E5M2FNUZ: return encode(x, saturate, &fmt_e5m2fnuz);
    case TEEXEC_DTYPE_FLOAT8E8M0: return tx_f32_to_e8m0(x, saturate, TX_E8M0_ROUND_UP);
    default: return 0;
    }
}

float tx_numfmt_max(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT8E4M3FN: return 448.0f;
    case TEEXEC_DTYPE_FLOAT8E4M3FNUZ: return 240.0f;
    case TEEXEC_DTYPE_FLOAT8E5M2: return 57344.0f;
    case TEEXEC_DTYPE_FLOAT8E5M2FNUZ: return 57344.0f;
    case TEEXEC_DTYPE_FLOAT8E8M0: return tx_bits_f32(0x7f000000u); /* 2^127 */
    case TEEXEC_DTYPE_FLOAT4E2M1: return 6.0f;
    case TEEXEC_DTYPE_FLOAT16: return 65504.0f;
    case TEEXEC_DTYPE_BFLOAT16: return tx_bits_f32(0x7f7f0000u);
    case TEEXEC_DTYPE_FLOAT: return tx_bits_f32(0x7f7fffffu);
    default: return 0.0f;
    }
}
