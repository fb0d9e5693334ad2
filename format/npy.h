/*
 * npy.h - NumPy .npy files <-> host tensors (base/tensor.h).
 *
 * Reading accepts format versions 1.0, 2.0 and 3.0, C order only, with the
 * dtypes b1 i1 i2 i4 i8 u1 u2 u4 u8 f2 f4 f8 in either byte order ('<', '>',
 * '|', and '=' meaning little-endian); big-endian data is byte-swapped on
 * read. The header dict is parsed strictly: exactly the keys 'descr',
 * 'fortran_order' and 'shape', each once; its length is bounded
 * (TX_NPY_MAX_HEADER); the element count is overflow-checked and the
 * payload length must match the shape exactly (no missing, no extra bytes).
 * Fortran order, object arrays ('|O'), structured dtypes (a list descr),
 * strings, complex and datetime arrays are refused with
 * TEEXEC_ERR_UNSUPPORTED and a message saying why. Malformed files give
 * TEEXEC_ERR_BAD_MODEL, I/O failures TEEXEC_ERR_IO, budget overruns
 * TEEXEC_ERR_LIMIT. Booleans are normalised to 0/1.
 *
 * Writing produces a version 1.0 header (2.0 only if the header would not
 * fit), little-endian, C order. NumPy has no bfloat16, FP8, FP4 or E8M0, so
 * the convention is:
 *   - BFLOAT16, FLOAT8E4M3FN/FNUZ, FLOAT8E5M2/FNUZ, FLOAT8E8M0 and
 *     FLOAT4E2M1 tensors are written as float32 ('<f4') holding the exact
 *     values (every one of them is representable in float32; NaN stays NaN,
 *     E8M0's NaN encoding 0xFF becomes a float NaN);
 *   - INT4/INT2 are written as int8, UINT4/UINT2 as uint8 (unpacked);
 *   - STRING and COMPLEX tensors are refused (TEEXEC_ERR_UNSUPPORTED).
 * tx_npy_stored_dtype() says which dtype a tensor will be written as, so
 * tools can tell the user about the upcast. Reading an .npy for a model
 * input of such a type is the caller's conversion: the reader returns the
 * file's own dtype (e.g. FLOAT), never a guess.
 *
 * Writing to a path is atomic: the bytes go to a temporary file in the
 * same folder, which is fsynced and then renamed over the target, so a
 * crash leaves either the old file or the complete new one.
 *
 * The host is assumed little-endian (as every platform teexec targets).
 *
 * Ownership: tensors read are owned by the caller (tx_tensor_release);
 * buffers from tx_npy_encode are malloc'd and owned by the caller (free).
 * Thread-safety: all functions are reentrant; no shared state.
 */
#ifndef TEEXEC_FORMAT_NPY_H
#define TEEXEC_FORMAT_NPY_H

#include "base/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bound on the header dict's length in bytes. NumPy itself refuses
 * headers over 10000 bytes by default; rank 32 with 20-digit dims needs far
 * less than this. */
#define TX_NPY_MAX_HEADER 65536u

/* Reads an .npy file. `max_bytes` bounds the payload size (0 = no budget
 * beyond what memory allows). On failure *out is left empty. Errors name
 * the file. */
teexec_status *tx_npy_read_file(const char *path, uint64_t max_bytes,
                                tx_tensor *out) TX_NODISCARD;

/* Reads an .npy image held in memory. `name` (may be NULL) is used in error
 * messages (e.g. "train.npz:target.npy"). The bytes are copied; the caller
 * keeps ownership of `data`. */
teexec_status *tx_npy_read_memory(const void *data, size_t size, const char *name,
                                  uint64_t max_bytes, tx_tensor *out) TX_NODISCARD;

/* The dtype a tensor of `dtype` is stored as in an .npy file (see the
 * convention above), or TEEXEC_DTYPE_UNDEFINED if it cannot be written. */
teexec_dtype tx_npy_stored_dtype(teexec_dtype dtype);

/* Serialises `t` as an .npy image into a malloc'd buffer (*out, *out_size);
 * the caller frees it. On failure *out is NULL. */
teexec_status *tx_npy_encode(const tx_tensor *t, void **out, size_t *out_size) TX_NODISCARD;

/* Writes `t` to `path` atomically (temp file in the same folder, fsync,
 * rename). *stored (may be NULL) receives the dtype actually written, e.g.
 * FLOAT for a BFLOAT16 tensor. */
teexec_status *tx_npy_write_file(const char *path, const tx_tensor *t,
                                 teexec_dtype *stored) TX_NODISCARD;

#endif
