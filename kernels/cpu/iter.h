/*
 * iter.h - strided iteration for the CPU kernels (internal to kernels/cpu).
 *
 * A tx_iter walks an output shape row by row for up to TX_ITER_MAX_OPS
 * operands, each with its own element strides over that shape (0 where an
 * operand is broadcast, permuted strides for a transpose). Dims of size 1
 * are dropped and adjacent dims that every operand walks contiguously are
 * merged, so the inner row is as long as possible and the kernels' inner
 * loops stay simple (stride 0 or 1 in the common cases) and free of index
 * division. Usage:
 *
 *     tx_iter it;
 *     tx_iter_init(&it, rank, dims, nops, strides);
 *     for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it))
 *         row(it.off[0], it.inner_stride[0], ..., it.inner);
 *
 * The struct lives on the caller's stack; no allocation; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_ITER_H
#define TEEXEC_KERNELS_CPU_ITER_H

#include "base/shape.h"

#include <stdint.h>

#define TX_ITER_MAX_OPS 4

typedef struct tx_iter {
    int32_t rank; /* >= 1 */
    int nops;
    int64_t dims[TX_MAX_RANK];
    int64_t strides[TX_ITER_MAX_OPS][TX_MAX_RANK];
    int64_t inner;                          /* length of a row             */
    int64_t inner_stride[TX_ITER_MAX_OPS];  /* element stride within a row */
    int64_t rows;                           /* number of rows (0 if empty) */
    int64_t idx[TX_MAX_RANK];
    int64_t off[TX_ITER_MAX_OPS];           /* element offset of row start */
} tx_iter;

/* strides[k] has `rank` entries for operand k. */
void tx_iter_init(tx_iter *it, int32_t rank, const int64_t *dims, int nops,
                  const int64_t *const *strides);
/* Moves to the next row (the odometer over all but the inner dim). */
void tx_iter_next(tx_iter *it);

/* Copies every element of the walk: operand 0 indexes dst, operand 1 src,
 * both in elements of es bytes (element offsets may be negative relative to
 * the base pointers, e.g. for negative-step slices). Rows contiguous on
 * both sides are one memcpy. */
void tx_iter_copy(tx_iter *it, void *dst, const void *src, size_t es);

/* Strides for reading `in` broadcast to `out` (right-aligned; 0 where in
 * has no dim or a dim of 1). out->rank >= in->rank is the caller's check. */
void tx_broadcast_strides(const tx_shape *in, const tx_shape *out, int64_t *strides);

#endif
