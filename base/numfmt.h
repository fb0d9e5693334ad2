/*
 * numfmt.h - scalar codecs for the low-precision number formats.
 *
 * FP8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ), E8M0 (exponent-only scale), FP4
 * E2M1, and 4-/2-bit integers, with the semantics of ONNX Cast-19+/-25
 * (saturate, E8M0 round_mode) and of Transformer Engine's quantizers
 * (round to nearest even, saturate to the largest finite value).
 * Decoding is exact (every value of these formats is a float). fp16/bf16
 * live in base/half.h.
 *
 * Byte layouts: an FP8/E8M0 value is one byte (its bit pattern); an FP4 or
 * 4-bit int value is a nibble (0..15), a 2-bit int value 0..3. Arrays of
 * sub-byte values are packed as ONNX packs them: element 0 in the low bits
 * (tx_subbyte_get/set).
 *
 * All functions are pure (no state, no allocation): thread-safe.
 */
#ifndef TEEXEC_BASE_NUMFMT_H
#define TEEXEC_BASE_NUMFMT_H

#include "teexec/teexec.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- FP8 ----------------------------------------------------------------
 * Encoding from float rounds to nearest, ties to even, on the format's grid
 * (subnormals included). Out-of-range handling follows ONNX Cast:
 *   saturate != 0: NaN -> NaN; +-Inf -> +-max; |rounded x| > max -> +-max.
 *   saturate == 0: NaN -> NaN; out of range or Inf -> NaN for E4M3FN,
 *                  E4M3FNUZ and E5M2FNUZ, +-Inf for E5M2.
 * NaN encodes as 0x7F|sign (E4M3FN, E5M2) or 0x80 (FNUZ types). FNUZ types
 * have no -0: -0 and negative values that round to zero give 0x00. */
float tx_e4m3fn_to_f32(uint8_t b);
float tx_e4m3fnuz_to_f32(uint8_t b);
float tx_e5m2_to_f32(uint8_t b);
float tx_e5m2fnuz_to_f32(uint8_t b);
uint8_t tx_f32_to_e4m3fn(float x, int saturate);
uint8_t tx_f32_to_e4m3fnuz(float x, int saturate);
uint8_t tx_f32_to_e5m2(float x, int saturate);
uint8_t tx_f32_to_e5m2fnuz(float x, int saturate);

/* The same, dispatched on dtype: one of the four FP8 types or FLOAT8E8M0
 * (then encoding uses round_mode up). Other dtypes decode to NaN / encode
 * to 0; callers check tx_numfmt_is_byte_float first. */
bool tx_numfmt_is_byte_float(teexec_dtype dt);
float tx_fp8_to_f32(teexec_dtype fmt, uint8_t b);
uint8_t tx_f32_to_fp8(teexec_dtype fmt, float x, int saturate);

/* Largest finite value of a float format (FP8s, E2M1, E8M0, fp16, bf16,
 * fp32); 0 for other dtypes. */
float tx_numfmt_max(teexec_dtype dt);

/* ---- E8M0 ---------------------------------------------------------------
 * Value 2^(b-127) for b in 0..254 (so code 0 is 2^-127, there is no zero),
 * 0xFF is NaN. Encoding ignores the sign (negative inputs are undefined in
 * ONNX; teexec uses |x|) and rounds to a power of two:
 *   UP:      smallest 2^k >= |x|
 *   DOWN:    largest 2^k <= |x|
 *   NEAREST: the nearer of the two in linear distance; the midpoint
 *            1.5 * 2^k goes up (as ONNX's reference does).
 * Specials: NaN -> 0xFF. With saturate: +-Inf and values above 2^127 after
 * rounding -> 0xFE; values below 2^-127 after rounding, and 0, -> 0x00.
 * Without saturate those cases give 0xFF (NaN).
 * UP + saturate is exactly Transformer Engine's MXFP8 scale rounding
 * (cvt.rp.satfinite.ue8m0). */
typedef enum tx_e8m0_round {
    TX_E8M0_ROUND_UP = 0,
    TX_E8M0_ROUND_DOWN = 1,
    TX_E8M0_ROUND_NEAREST = 2
} tx_e8m0_round;

float tx_e8m0_to_f32(uint8_t b);
uint8_t tx_f32_to_e8m0(float x, int saturate, tx_e8m0_round mode);
/* Parses "up" / "down" / "nearest"; -1 if none. */
int tx_e8m0_round_from_name(const char *name);

/* ---- FP4 E2M1 -------------------------------------------------------------
 * Values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; nibble = sign<<3 | exp<<1 | man.
 * Encoding: round to nearest even, always saturating to +-6; +-Inf -> +-6;
 * NaN -> +6 (0x7) as ONNX float4.md says; -0 and negative values rounding
 * to zero keep the sign (0x8). */
float tx_e2m1_to_f32(uint8_t nibble);
uint8_t tx_f32_to_e2m1(float x);

/* ---- small integers -------------------------------------------------------
 * Float to integer with round to nearest even and saturation to [lo, hi]
 * (QuantizeLinear's rule; also ONNX's reference Cast to 4-/2-bit ints).
 * NaN gives 0. */
int64_t tx_f64_to_int_rne_sat(double x, int64_t lo, int64_t hi);

/* Range of a 4-/2-bit integer dtype. Returns false for other dtypes. */
bool tx_subbyte_int_range(teexec_dtype dt, int *lo, int *hi);

/* Packed arrays of `bits`-wide fields (bits = 2 or 4), element 0 in the low
 * bits of byte 0. get returns the raw field (0 .. 2^bits-1); set stores the
 * low `bits` of v and leaves the other fields of the byte unchanged. */
static inline unsigned tx_subbyte_get(const uint8_t *buf, uint64_t i, unsigned bits)
{
    unsigned per = 8u / bits;
    unsigned shift = (unsigned)(i % per) * bits;
    return (unsigned)(buf[i / per] >> shift) & ((1u << bits) - 1u);
}

static inline void tx_subbyte_set(uint8_t *buf, uint64_t i, unsigned bits, unsigned v)
{
    unsigned per = 8u / bits;
    unsigned shift = (unsigned)(i % per) * bits;
    unsigned mask = ((1u << bits) - 1u) << shift;
    buf[i / per] = (uint8_t)((buf[i / per] & ~mask) | ((v << shift) & mask));
}

/* Two's-complement sign extension of a `bits`-wide field. */
static inline int tx_subbyte_sext(unsigned v, unsigned bits)
{
    unsigned sign = 1u << (bits - 1u);
    v &= (1u << bits) - 1u;
    return (int)(v ^ sign) - (int)sign;
}

#endif
