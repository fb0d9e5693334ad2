/*
 * tensor.h - a host tensor: dtype, shape and a contiguous row-major buffer.
 *
 * This is the currency between the loader, the importer, the CPU kernels and
 * the tools. Element storage:
 *   - types of 8 bits or more: native little-endian values, one per element
 *     (FLOAT16/BFLOAT16/FP8/E8M0 as their raw bit patterns: uint16_t/uint8_t);
 *   - BOOL: one byte, 0 or 1;
 *   - 4-bit and 2-bit types: packed as ONNX packs them (first element in the
 *     low bits), ceil(numel * bits / 8) bytes;
 *   - STRING: an array of numel `char *` (NUL-terminated, each malloc'd).
 *
 * Ownership: a tx_tensor owns its buffer iff owns_data is set; then
 * tx_tensor_release() frees it (and the strings). A tensor is not
 * thread-safe to mutate; concurrent reads are fine.
 */
#ifndef TEEXEC_BASE_TENSOR_H
#define TEEXEC_BASE_TENSOR_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest rank teexec handles anywhere; loads refuse deeper tensors. */
#define TX_MAX_RANK 32

typedef struct tx_tensor {
    teexec_dtype dtype;
    int32_t rank;
    int64_t dims[TX_MAX_RANK];
    uint64_t numel;
    size_t nbytes;
    void *data;
    bool owns_data;
} tx_tensor;

/* Sets dtype/rank/dims/numel/nbytes and allocates a zero-filled buffer
 * (at least 1 byte, so data is never NULL). Checks rank and overflow.
 * On failure `t` is left empty (data NULL). */
teexec_status *tx_tensor_alloc(tx_tensor *t, teexec_dtype dtype, int32_t rank,
                               const int64_t *dims) TX_NODISCARD;

/* Like tx_tensor_alloc but wraps caller memory (not owned, not freed). The
 * caller guarantees `data` holds the storage size of the shape. */
teexec_status *tx_tensor_wrap(tx_tensor *t, teexec_dtype dtype, int32_t rank,
                              const int64_t *dims, void *data) TX_NODISCARD;

/* Frees an owned buffer and resets *t to empty. Accepts NULL and empty. */
void tx_tensor_release(tx_tensor *t);

/* Deep copy of src into dst (dst must be empty or released). */
teexec_status *tx_tensor_clone(const tx_tensor *src, tx_tensor *dst) TX_NODISCARD;

/* Bytes per element for types of >= 8 bits (1 for BOOL); 0 otherwise. */
size_t tx_dtype_elem_size(teexec_dtype dtype);

/* "float[2,3,4]" into buf (truncated to size). Returns buf. */
const char *tx_tensor_describe(const tx_tensor *t, char *buf, size_t size);

#endif
