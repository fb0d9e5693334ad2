/*
 * device_mem.h - the device memory behind public device tensors
 * (teexec_tensor_create_device and friends, device outputs of a CUDA run):
 * allocate, free, check a caller's pointer, copy. Implemented by
 * exec/cuda/device_mem.c, or by exec/gpu_none.c in a build without CUDA
 * (every call then fails with TEEXEC_ERR_UNSUPPORTED and free does
 * nothing).
 *
 * Ownership: memory from tx_device_alloc is freed by tx_device_free.
 * Thread-safety: any thread (the CUDA runtime's own rules; each call works
 * on the current device, or on the one named).
 */
#ifndef TEEXEC_EXEC_DEVICE_MEM_H
#define TEEXEC_EXEC_DEVICE_MEM_H

#include "base/status.h"

#include <stddef.h>

/* `bytes` (0 counts as 1) on the current device; *device gets its ordinal. */
teexec_status *tx_device_alloc(size_t bytes, int *device, void **out) TX_NODISCARD;
/* Frees memory of tx_device_alloc or of a CUDA run's device output (on
 * `device`); waits for the device's work on it (cudaFree). */
void tx_device_free(int device, void *ptr);
/* Whether [ptr, ptr + bytes) is device memory the current context can
 * address (device or managed memory); *device gets its ordinal. */
teexec_status *tx_device_check_pointer(const void *ptr, int *device) TX_NODISCARD;
/* Copies (and a fill) on the legacy default stream that return once done,
 * so work queued afterwards on any stream sees the result (a plain
 * device-to-device cudaMemcpy returns before the copy is done; these
 * wait). */
teexec_status *tx_device_to_host(void *dst, const void *src, size_t bytes) TX_NODISCARD;
teexec_status *tx_device_to_device(void *dst, const void *src, size_t bytes) TX_NODISCARD;
/* `height` rows of `width` bytes, row r from src + r * spitch to
 * dst + r * dpitch (both device memory): a column range of many rows in
 * one call. */
teexec_status *tx_device_copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height) TX_NODISCARD;
teexec_status *tx_device_zero(void *dst, size_t bytes) TX_NODISCARD;

#endif
