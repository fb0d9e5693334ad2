/*
 * std_shape.h - the data-movement and value-producing ONNX ops the GPU runs
 * as small kernels (kernels/cpu/expand_tile.c, trilu.c, range.c, gather.c,
 * exec/cpu_ops_shape.c are the CPU's):
 *   - Tile: y[c] = x[c mod x.dims], any element size;
 *   - Trilu: keep one triangle of each matrix of the last two dims, shifted
 *     by k diagonals (k from the device or the host), zeros elsewhere;
 *   - Range: y[i] = start + i * delta with start and delta read on the
 *     device (they may be computed there), in the CPU's arithmetic: wrapping
 *     int64 for integers, FP64 for DOUBLE, FP32 otherwise, with separate
 *     multiply and add;
 *   - fill: every element = one value of esz bytes (ConstantOfShape);
 *   - literal: bytes known at prepare time written by a kernel whose
 *     argument carries them (Shape, Size, small Constants; at most
 *     TX_CUDA_LITERAL_MAX bytes), so nothing is copied from the host while
 *     a CUDA graph runs;
 *   - GatherElements along one axis, indices int32/int64, negative from the
 *     end; an index out of range gives a zero element (the CPU refuses it;
 *     a kernel cannot).
 *
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_SHAPE_H
#define TEEXEC_KERNELS_CUDA_STD_SHAPE_H

#include "kernels/cuda/std_num.h"
#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TX_CUDA_LITERAL_MAX 2048

/* x: rank, dims; y dims = x dims * repeats. */
teexec_status *tx_cuda_tile(int rank, const int64_t *x_dims, const int64_t *y_dims,
                            const void *x, void *y, size_t esz, void *stream);

/* k_dev: an int64 on the device, or NULL to use k_host. */
teexec_status *tx_cuda_trilu(int upper, const int64_t *k_dev, int64_t k_host, const void *x,
                             void *y, size_t esz, size_t mats, int64_t rows, int64_t cols,
                             void *stream);

/* start and delta: one element each of dt on the device. */
teexec_status *tx_cuda_range(const void *start, const void *delta, void *y, teexec_dtype dt,
                             size_t n, void *stream);

/* value: esz bytes (1, 2, 4 or 8) given by the host. */
teexec_status *tx_cuda_fill(void *y, size_t esz, const void *value, size_t n, void *stream);

teexec_status *tx_cuda_literal(void *y, const void *bytes, size_t nbytes, void *stream);

/* data [dims], indices [idx_dims] (same rank), out [idx_dims]. */
teexec_status *tx_cuda_gather_elements(int rank, const int64_t *dims, const int64_t *idx_dims,
                                       int axis, const void *data, size_t esz, const void *idx,
                                       teexec_dtype idx_dtype, void *out, void *stream);

/* GatherND (batch_dims >= 0; int64 indices whose last dim indexes data's
 * dims [batch_dims, batch_dims + k), negative from the end; an index out of
 * range gives a zero slice, as Gather's). */
teexec_status *tx_cuda_gather_nd(int rank, const int64_t *dims, int idx_rank,
                                 const int64_t *idx_dims, int batch_dims, const void *data,
                                 size_t esz, const int64_t *indices, void *out, void *stream);

/* The backwards of the CPU trainer's rules, FLOAT / FLOAT16 / BFLOAT16
 * grads summed in FP64 in the CPU's order, every gx element written:
 *   Tile: each x element sums its copies;
 *   GatherElements / GatherND: each data element sums the outputs that
 *     read it (GatherND's scratch: tx_cuda_gather_nd_backward_scratch);
 *   TopK: the selected values' grads on their sources (indices int64 of
 *     the values' shape [outer, k, inner]), zeros elsewhere. */
teexec_status *tx_cuda_tile_backward(int rank, const int64_t *x_dims, const int64_t *y_dims,
                                     const void *g, teexec_dtype dt, void *gx, void *stream);
teexec_status *tx_cuda_gather_elements_backward(int rank, const int64_t *dims,
                                                const int64_t *idx_dims, int axis,
                                                const void *idx, teexec_dtype idx_dtype,
                                                const void *g, teexec_dtype dt, void *gx,
                                                void *stream);
size_t tx_cuda_gather_nd_backward_scratch(int idx_rank, const int64_t *idx_dims);
teexec_status *tx_cuda_gather_nd_backward(int rank, const int64_t *dims, int idx_rank,
                                          const int64_t *idx_dims, int batch_dims,
                                          const int64_t *indices, const void *g, teexec_dtype dt,
                                          void *gx, void *scratch, void *stream);
teexec_status *tx_cuda_topk_backward(const void *g, teexec_dtype dt, const int64_t *indices,
                                     size_t outer, size_t k, size_t len, size_t inner, void *gx,
                                     void *stream);

#ifdef __cplusplus
}
#endif

#endif
