/*
 * std_reduce.h - reductions and selections along axes on the GPU, with the
 * CPU kernels' semantics (kernels/cpu/reduce.c, argmax_topk.c, cumsum.c):
 *   - tx_cuda_reduce: ReduceSum / Mean / Max / Min / Prod over any set of
 *     axes, accumulated in FP64 (float dtypes), wrapping int64 / uint64
 *     (integers; uint64 for bool Max / Min), one rounding at the end; empty
 *     reductions give the op's identity (NaN for a float Mean). Each output
 *     element is reduced by one thread, or by one block in a fixed tree
 *     (long reductions): deterministic, and equal to the CPU's sequential
 *     sum up to the FP64 rounding of the order;
 *   - tx_cuda_reduce_backward: gx = g (broadcast back over the reduced
 *     dims) * scale, for ReduceSum (scale 1) and ReduceMean (1 / count);
 *   - ArgMax / ArgMin along one axis -> int64, ties first (or last) index,
 *     NaN larger than any number, through the CPU's order-preserving keys;
 *   - TopK: values and int64 indices, largest or smallest first, equal
 *     values in index order, NaN largest; each element's rank is counted
 *     against its whole row (O(n^2) per row: exact, simple, deterministic);
 *   - CumSum along one axis, exclusive / reverse, one thread per lane
 *     walking the axis in order (FP64 / wrapping int64): the CPU's bits.
 *
 * Shapes: a reduction plan names the input's dims (rank <= 8) and which are
 * reduced; the output is the input with those dims removed (contiguous).
 * Axis ops take the input as [outer, n, inner].
 *
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_REDUCE_H
#define TEEXEC_KERNELS_CUDA_STD_REDUCE_H

#include "kernels/cpu/ops.h"
#include "kernels/cuda/std_num.h"
#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_cuda_reduce_plan {
    int rank;
    int64_t dims[TX_STD_RANK];     /* the input's */
    unsigned char red[TX_STD_RANK]; /* 1: reduced */
} tx_cuda_reduce_plan;

/* Whether tx_cuda_reduce runs op on dt (numeric; bool for Max / Min). */
int tx_cuda_reduce_dtype_ok(tx_reduce_op op, teexec_dtype dt);

/* y (x's dtype, the kept dims) = op over the reduced dims of x. */
teexec_status *tx_cuda_reduce(tx_reduce_op op, const tx_cuda_reduce_plan *p, const void *x,
                              void *y, teexec_dtype dt, void *stream);

/* gx (the input's dims) = g[kept coordinates] * scale; g and gx FLOAT,
 * FLOAT16 or BFLOAT16 (each its own). Overwrites gx. */
teexec_status *tx_cuda_reduce_backward(const tx_cuda_reduce_plan *p, const void *g,
                                       teexec_dtype g_dtype, double scale, void *gx,
                                       teexec_dtype gx_dtype, void *stream);

/* ReduceMax / ReduceMin / ReduceProd backward (the CPU rules): Max / Min
 * send g to every element equal to the extreme, split evenly among ties;
 * Prod gives g times the product of the others (zeros counted, not divided
 * by). x (and gx) of dtype xt, y (the forward output) yt, g gt, all FLOAT,
 * FLOAT16 or BFLOAT16; scratch of tx_cuda_reduce_backward_scratch bytes. */
size_t tx_cuda_reduce_backward_scratch(const tx_cuda_reduce_plan *p);
teexec_status *tx_cuda_reduce_backward_select(tx_reduce_op op, const tx_cuda_reduce_plan *p,
                                              const void *x, teexec_dtype xt, const void *y,
                                              teexec_dtype yt, const void *g, teexec_dtype gt,
                                              void *gx, void *scratch, void *stream);

/* ArgMax (is_max 1) / ArgMin over the middle dim; y int64 [outer, inner].
 * n must be > 0 (the caller refuses an empty axis). */
teexec_status *tx_cuda_argmax(int is_max, int select_last, const void *x, teexec_dtype dt,
                              size_t outer, size_t n, size_t inner, int64_t *y, void *stream);

/* TopK over the middle dim: values (dt) and indices (int64) [outer, k, inner]. */
teexec_status *tx_cuda_topk(int largest, size_t k, const void *x, teexec_dtype dt, size_t outer,
                            size_t n, size_t inner, void *values, int64_t *indices,
                            void *stream);

/* CumSum over the middle dim; x and y of dtype dt (numeric). */
teexec_status *tx_cuda_cumsum(int exclusive, int reverse, const void *x, void *y,
                              teexec_dtype dt, size_t outer, size_t n, size_t inner,
                              void *stream);

#ifdef __cplusplus
}
#endif

#endif
