/*
 * random_fill.h - seeded random tensors for the CLI: the inputs `teexec run`
 * and `teexec bench` fill in when none are given, and bench's training
 * targets and labels.
 *
 * Each tensor draws from its own stream, keyed by (seed, index), with
 * splitmix64, so the values do not depend on the platform or on which other
 * tensors were drawn. Floats are uniform in [-1, 1) (drawn in double, then
 * cast to the dtype with round-to-nearest-even), integers in [0, 10), bools
 * 0/1, labels in [0, classes).
 *
 * The returned tensor is owned by the caller. Uses only the public API.
 * Thread-safe (no shared state).
 */
#ifndef TEEXEC_TOOLS_RANDOM_FILL_H
#define TEEXEC_TOOLS_RANDOM_FILL_H

#include "teexec/teexec.h"

#include <stdbool.h>
#include <stdint.h>

/* True for the dtypes filled with floating-point values. */
bool random_fill_is_float(teexec_dtype dtype);

/* A new tensor of `dtype` and shape (rank, dims) with random values. */
teexec_status *random_fill(teexec_dtype dtype, int32_t rank, const int64_t *dims, uint64_t seed,
                           uint64_t index, teexec_tensor **out);

/* A new int64 tensor of shape (rank, dims) with values in [0, classes);
 * classes must be >= 1. */
teexec_status *random_labels(int32_t rank, const int64_t *dims, int64_t classes, uint64_t seed,
                             uint64_t index, teexec_tensor **out);

#endif
