/*
 * std_binary.h - broadcasting two-input ONNX ops in every dtype the CPU
 * runs them in (kernels/cpu/elementwise_binary.c), and the variadic
 * Min / Max / Sum / Mean (kernels/cpu/variadic.c):
 *   - arithmetic (Add, Sub, Mul, Div, Pow) in the compute domain the CPU
 *     picks: FP32 for FLOAT/FLOAT16/BFLOAT16 (Pow: any exponent dtype,
 *     read as float; b == 2 and b == 3 as plain products), FP64 for DOUBLE
 *     and for Pow of an integer base with a float exponent (truncated back),
 *     wrapping int64 / uint64 for integers (Div truncates, x / 0 = 0,
 *     negative integer exponents give 1 / base truncated);
 *   - comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual) in the
 *     operands' domain, Equal also on bool; logic (And, Or, Xor) on bool;
 *     results bool;
 *   - variadic: an accumulator of the output's size in FP64 / int64 /
 *     uint64 (the caller's scratch, 8 bytes per element), one pass per
 *     input, one rounding at the end, NaN propagating as the CPU's.
 * The iteration space is the output's dims (contiguous), each operand read
 * through its broadcast strides (tx_cuda_bcast of std_ops.h).
 *
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_BINARY_H
#define TEEXEC_KERNELS_CUDA_STD_BINARY_H

#include "kernels/cpu/ops.h"
#include "kernels/cuda/std_ops.h"
#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The output dtype of op on (a, b) and whether the GPU runs it (the CPU's
 * plan_types): returns 0 and sets *why when it does not. */
int tx_cuda_binary_types(tx_binary_op op, teexec_dtype a, teexec_dtype b, teexec_dtype *y,
                         const char **why);

/* y = a op b over g's dims (operands 0 and 1 of g). */
teexec_status *tx_cuda_binary(tx_binary_op op, const tx_cuda_bcast *g, const void *a,
                              teexec_dtype at, const void *b, teexec_dtype bt, void *y,
                              teexec_dtype yt, void *stream);

/* One variadic step: acc (op)= x over dims (x through strides st; first
 * assigns). acc holds 8-byte values of the domain of dt. */
teexec_status *tx_cuda_variadic_step(tx_variadic_op op, int first, int rank,
                                     const int64_t *dims, const int64_t *st, const void *x,
                                     teexec_dtype dt, void *acc, void *stream);
/* y = acc (divided by count for Mean), rounded once into dt. */
teexec_status *tx_cuda_variadic_finish(tx_variadic_op op, size_t count, const void *acc,
                                       void *y, teexec_dtype dt, size_t n, void *stream);

/* Max / Min backward: ties (+)= (x == y) over the output's dims, x read
 * through its broadcast strides (first assigns); ties FP64, the output's
 * size. The grads are then tx_cuda_bcast_grad's EXTREME term. */
teexec_status *tx_cuda_variadic_ties(int first, int rank, const int64_t *dims, const int64_t *st,
                                     const void *x, teexec_dtype xt, const void *y,
                                     teexec_dtype yt, double *ties, void *stream);

#ifdef __cplusplus
}
#endif

#endif
