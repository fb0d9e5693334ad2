/*
 * shape.h - pure shape arithmetic shared by shape inference and the kernels.
 *
 * A tx_shape is a value (rank + dims, no data). Every helper validates its
 * inputs (negative dims, bad axes, mismatched dims, overflow of the element
 * count) and returns a teexec_status (NULL on success) with a message saying
 * which rule was broken; out-parameters are written only on success. Axes
 * follow ONNX: an axis may be negative and then counts from the end.
 *
 * Nothing here allocates memory except the returned error statuses. Pure
 * functions, thread-safe.
 */
#ifndef TEEXEC_BASE_SHAPE_H
#define TEEXEC_BASE_SHAPE_H

#include "base/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_shape {
    int32_t rank;
    int64_t dims[TX_MAX_RANK];
} tx_shape;

/* The shape of a tensor. */
tx_shape tx_shape_of(const tx_tensor *t);
/* A shape from rank + dims (rank must be 0..TX_MAX_RANK). */
teexec_status *tx_shape_make(int32_t rank, const int64_t *dims, tx_shape *out) TX_NODISCARD;

bool tx_shape_equal(const tx_shape *a, const tx_shape *b);
/* True when the tensor's dims equal the shape's. */
bool tx_tensor_has_shape(const tx_tensor *t, const tx_shape *s);

/* Element count; errors on negative dims or overflow. */
teexec_status *tx_shape_numel(const tx_shape *s, uint64_t *numel) TX_NODISCARD;

/* Row-major strides in elements (strides[rank-1] == 1). Dims must be valid
 * (non-negative, product fits in int64) - true of any allocated tensor. */
void tx_shape_strides(const tx_shape *s, int64_t *strides);

/* Maps axis in [-rank, rank-1] to [0, rank-1]. For ops whose axis ranges
 * over rank+1 positions (Unsqueeze, Concat of rank-0 is invalid anyway),
 * pass rank+1. */
teexec_status *tx_shape_normalize_axis(int64_t axis, int32_t rank, int32_t *out) TX_NODISCARD;

/* Multidirectional (numpy) broadcast of n shapes (n >= 1). */
teexec_status *tx_shape_broadcast(size_t n, const tx_shape *const *shapes,
                                  tx_shape *out) TX_NODISCARD;
teexec_status *tx_shape_broadcast2(const tx_shape *a, const tx_shape *b,
                                   tx_shape *out) TX_NODISCARD;
/* Unidirectional broadcast: can `from` be broadcast to exactly `to`? */
bool tx_shape_broadcastable_to(const tx_shape *from, const tx_shape *to);

/* ONNX MatMul (numpy matmul): 1-D operands are promoted ([K] -> [1,K] for A,
 * [K] -> [K,1] for B) and the promoted dim is removed from the result; the
 * leading (batch) dims broadcast. */
teexec_status *tx_shape_matmul(const tx_shape *a, const tx_shape *b,
                               tx_shape *out) TX_NODISCARD;

/* Gemm: A and B must be 2-D; M, N, K after the optional transposes. */
teexec_status *tx_shape_gemm(const tx_shape *a, const tx_shape *b, bool trans_a,
                             bool trans_b, int64_t *m, int64_t *n,
                             int64_t *k) TX_NODISCARD;

/* Transpose: perm NULL means reversed dims. Validates that perm is a
 * permutation of 0..rank-1 (nperm must equal rank). */
teexec_status *tx_shape_transpose(const tx_shape *in, const int64_t *perm, size_t nperm,
                                  tx_shape *out) TX_NODISCARD;

/* Reduction. axes (naxes of them, may be negative, duplicates refused);
 * naxes == 0 means all axes, or none (identity) when noop_with_empty_axes.
 * reduced[i] (may be NULL) is set for each reduced input axis. */
teexec_status *tx_shape_reduce(const tx_shape *in, const int64_t *axes, size_t naxes,
                               bool keepdims, bool noop_with_empty_axes, tx_shape *out,
                               bool *reduced) TX_NODISCARD;

/* Concat along axis: all ranks equal, dims equal except on the axis. */
teexec_status *tx_shape_concat(size_t n, const tx_shape *const *in, int64_t axis,
                               tx_shape *out) TX_NODISCARD;

/* Slice (ONNX opset >= 10 semantics). starts/ends/axes/steps have n
 * entries; axes NULL means 0..n-1, steps NULL means all 1. Out-of-range
 * starts/ends are clamped as ONNX specifies (also for negative steps).
 * Writes, for every axis of the input (rank entries), the effective first
 * index and step (1 for untouched axes), and the output shape. */
teexec_status *tx_shape_slice(const tx_shape *in, const int64_t *starts, const int64_t *ends,
                              const int64_t *axes, const int64_t *steps, size_t n,
                              int64_t *eff_start, int64_t *eff_step,
                              tx_shape *out) TX_NODISCARD;

/* Gather: data.shape[:axis] + indices.shape + data.shape[axis+1:]. */
teexec_status *tx_shape_gather(const tx_shape *data, const tx_shape *indices, int64_t axis,
                               tx_shape *out) TX_NODISCARD;

/* Tile: dims[i] * repeats[i] (nrep must equal rank, repeats >= 0). */
teexec_status *tx_shape_tile(const tx_shape *in, const int64_t *repeats, size_t nrep,
                             tx_shape *out) TX_NODISCARD;

/* Expand: broadcast of the input shape with the requested shape. */
teexec_status *tx_shape_expand(const tx_shape *in, const int64_t *shape, size_t n,
                               tx_shape *out) TX_NODISCARD;

/* Reshape: 0 copies the input dim (unless allowzero), one -1 is inferred. */
teexec_status *tx_shape_reshape(const tx_shape *in, const int64_t *shape, size_t n,
                                bool allowzero, tx_shape *out) TX_NODISCARD;

/* Squeeze: axes NULL/naxes 0 removes all 1-dims; a listed axis must be 1. */
teexec_status *tx_shape_squeeze(const tx_shape *in, const int64_t *axes, size_t naxes,
                                tx_shape *out) TX_NODISCARD;

/* Unsqueeze: axes index the output (rank + naxes), may be negative. */
teexec_status *tx_shape_unsqueeze(const tx_shape *in, const int64_t *axes, size_t naxes,
                                  tx_shape *out) TX_NODISCARD;

/* Flatten: [prod(dims[:axis]), prod(dims[axis:])], axis in [-rank, rank]. */
teexec_status *tx_shape_flatten(const tx_shape *in, int64_t axis, tx_shape *out) TX_NODISCARD;

/* "[2,3,4]" into buf (truncated to size). Returns buf. */
const char *tx_shape_str(const tx_shape *s, char *buf, size_t size);

#endif
