/*
 * dtype.h - facts about element types (teexec_dtype, numbered as ONNX's).
 * Pure functions over a static table; thread-safe.
 */
#ifndef TEEXEC_BASE_DTYPE_H
#define TEEXEC_BASE_DTYPE_H

#include "teexec/teexec.h"

#include <stdbool.h>
#include <stdint.h>

/* True for 1..26 except UNDEFINED. */
bool tx_dtype_valid(int dtype);
bool tx_dtype_is_float(teexec_dtype dt);   /* any floating format incl. FP8/FP4/E8M0 */
bool tx_dtype_is_integer(teexec_dtype dt); /* signed or unsigned ints, not bool */
bool tx_dtype_is_signed(teexec_dtype dt);
bool tx_dtype_is_subbyte(teexec_dtype dt); /* 4- and 2-bit types */

/* True for float32, float16, bfloat16, float64: the "real" types the math
 * kernels compute on (the "T" of the TE op schema's ports). */
bool tx_dtype_is_real(teexec_dtype dt);

/* The dtype of statistics an op saves for backward: float64 when t is
 * float64 (so finite differences are meaningful), else float32. */
teexec_dtype tx_dtype_stat(teexec_dtype t);

/* Bytes needed to store `elements` values packed (sub-byte types round up).
 * Returns 0 on overflow or for STRING/UNDEFINED; sets *ok accordingly. */
uint64_t tx_dtype_storage_bytes(teexec_dtype dt, uint64_t elements, int *ok);

/* Parse an ONNX dtype name as teexec_dtype_name() writes it; -1 if unknown. */
int tx_dtype_from_name(const char *name);

#endif
