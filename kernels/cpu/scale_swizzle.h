/*
 * scale_swizzle.h - block-scale layouts: compact row-major <-> the cuBLAS
 * "128x4" swizzled layout that block-scaled GEMMs (MXFP8, NVFP4) read.
 *
 * A compact [rows][cols] matrix of 1-byte scales (rows a multiple of 128,
 * cols a multiple of 4: the padded shapes of qtensor.h) is cut into tiles
 * of 128 rows x 4 cols, stored tile after tile in row-major tile order; in
 * a 512-byte tile, scale (r, c) sits at (r%32)*16 + ((r%128)/32)*4 + c%4
 * (te-ops.md 4.6). "transposed" swizzles the transpose of the compact
 * matrix instead (MXFP8 columnwise scales): compact [r][c] lands where
 * entry [c][r] of a (cols x rows) matrix would; then cols must be a
 * multiple of 128 and rows of 4.
 *
 * Pure functions on caller buffers (same size in both layouts); thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_SCALE_SWIZZLE_H
#define TEEXEC_KERNELS_CPU_SCALE_SWIZZLE_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Offset of (r, c) in the swizzled form of a matrix with `cols` columns. */
static inline uint64_t tx_swizzle_offset(uint64_t r, uint64_t c, uint64_t cols)
{
    uint64_t tile = (r / 128u) * (cols / 4u) + c / 4u;
    return tile * 512u + (r % 32u) * 16u + ((r % 128u) / 32u) * 4u + (c % 4u);
}

/* Returns INVALID_ARGUMENT if the shape does not tile. */
teexec_status *tx_scale_swizzle(const uint8_t *compact, uint8_t *swizzled, uint64_t rows,
                                uint64_t cols, bool transposed) TX_NODISCARD;
teexec_status *tx_scale_unswizzle(const uint8_t *swizzled, uint8_t *compact, uint64_t rows,
                                  uint64_t cols, bool transposed) TX_NODISCARD;

#endif
