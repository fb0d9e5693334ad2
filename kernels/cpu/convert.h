/*
 * convert.h - element type conversion between any two numeric dtypes, with
 * ONNX Cast semantics. The CPU backend's Cast op and the quantizers' bf16
 * and fp16 inputs use it.
 *
 * Element storage is base/tensor.h's: FP8/E8M0 one byte per value, fp16 and
 * bf16 as uint16_t bit patterns, BOOL one byte 0/1, 4-/2-bit types packed
 * with element 0 in the low bits (a source's padding bits are ignored; a
 * destination's padding bits in the last byte are written as zero).
 *
 * Rules (where ONNX leaves a case undefined, the defined result is given):
 *   float -> float: round to nearest even (correctly rounded, also from
 *     double and int64: no double rounding); FP8/E8M0 targets follow
 *     opts->saturate and opts->e8m0_round as base/numfmt.h says; FP4 always
 *     saturates; fp16/bf16/fp32 overflow to Inf.
 *   float -> integer (8..64 bits): truncate toward zero as C does; NaN
 *     gives 0 and values outside the target's range saturate to its
 *     min/max (C leaves both undefined).
 *   float -> 4-/2-bit integer: round to nearest even, saturate to the
 *     range, NaN -> 0 (ONNX's reference Cast).
 *   integer -> integer (8..64 bits): two's-complement wrap, as C and
 *     NumPy do; integer -> 4-/2-bit integer: saturate.
 *   anything -> bool: nonzero (NaN is nonzero) -> 1; bool -> x: 0 or 1.
 *   STRING, COMPLEX and UNDEFINED are refused (TEEXEC_ERR_UNSUPPORTED).
 *
 * Thread-safe; no allocation except the returned status. src and dst must
 * not overlap unless they are the same dtype and the same pointer.
 */
#ifndef TEEXEC_KERNELS_CPU_CONVERT_H
#define TEEXEC_KERNELS_CPU_CONVERT_H

#include "base/numfmt.h"
#include "base/status.h"

#include <stdint.h>

typedef struct tx_convert_opts {
    int saturate;              /* ONNX Cast 'saturate' for FP8/E8M0 targets (default 1) */
    tx_e8m0_round e8m0_round;  /* ONNX Cast-25 'round_mode' (default up) */
} tx_convert_opts;

#define TX_CONVERT_OPTS_DEFAULT ((tx_convert_opts){1, TX_E8M0_ROUND_UP})

/* Converts n elements. opts may be NULL (defaults). */
teexec_status *tx_convert(const void *src, teexec_dtype src_type, void *dst,
                          teexec_dtype dst_type, uint64_t n,
                          const tx_convert_opts *opts) TX_NODISCARD;

/* True if tx_convert handles the dtype (everything numeric and BOOL). */
bool tx_convert_supports(teexec_dtype dt);

/* Shorthands for callers that hold floats: n floats to any dtype, and any
 * dtype to floats. */
teexec_status *tx_convert_from_f32(const float *src, void *dst, teexec_dtype dst_type,
                                   uint64_t n, const tx_convert_opts *opts) TX_NODISCARD;
teexec_status *tx_convert_to_f32(const void *src, teexec_dtype src_type, float *dst,
                                 uint64_t n) TX_NODISCARD;

#endif
