/*
 * std_unary.h - the one-input elementwise ONNX ops on the GPU, forward and
 * backward, with the CPU kernels' semantics (kernels/cpu/elementwise_unary.c,
 * exec/backward_std.c):
 *   - tx_cuda_unary: the tx_unary_op list (Neg ... Round, Sin, Cos) in the
 *     dtype's domain (std_num.h): FP32 for FLOAT/FLOAT16/BFLOAT16 (libdevice
 *     expf/erff/tanhf where the CPU uses its few-ulp fast forms), FP64 for
 *     DOUBLE, int64 / uint64 for Neg, Abs, Sign, Relu on integers (Neg and
 *     Relu signed only; wrapping as numpy);
 *   - Not (bool), IsNaN / IsInf (float -> bool), Clip (bounds read on the
 *     device from scalar tensors, or given as host values);
 *   - tx_cuda_unary_backward: gx = g * f'(x, y) for the ops with a CPU
 *     backward rule (Relu, Sqrt, Erf, Tanh, Sigmoid, Neg, Exp, Log,
 *     Reciprocal, Abs, LeakyRelu, Elu, Softplus, Gelu in both forms, Sin,
 *     Cos; Clip), in FP64 as the rules are written, rounded once; float
 *     dtypes only.
 * x and y have n elements; y may alias x. Unsupported dtype/op pairs are
 * INVALID_ARGUMENT here (the executor refuses them at prepare).
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t). Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_UNARY_H
#define TEEXEC_KERNELS_CUDA_STD_UNARY_H

#include "kernels/cpu/ops.h"
#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether tx_cuda_unary runs op on dtype (the CPU's rule). */
int tx_cuda_unary_dtype_ok(tx_unary_op op, teexec_dtype dt);

/* y = op(x); alpha for LeakyRelu and Elu. x and y of one dtype. */
teexec_status *tx_cuda_unary(tx_unary_op op, float alpha, const void *x, void *y,
                             teexec_dtype dt, size_t n, void *stream);

/* Whether tx_cuda_unary_backward has op (the CPU trainer's rules). */
int tx_cuda_unary_has_backward(tx_unary_op op);

/* gx = g * f'(x or y); x, y, g, gx of dtype dt (FLOAT, FLOAT16, BFLOAT16);
 * alpha for LeakyRelu and Elu. Overwrites gx. */
teexec_status *tx_cuda_unary_backward(tx_unary_op op, float alpha, const void *x, const void *y,
                                      const void *g, void *gx, teexec_dtype dt, size_t n,
                                      void *stream);

/* Clip's backward: gx = g where lo <= x <= hi (each bound a device scalar
 * of dt, or the host value when its pointer is NULL; +-inf for none). */
teexec_status *tx_cuda_clip_backward(const void *x, const void *g, void *gx, teexec_dtype dt,
                                     size_t n, const void *lo_dev, double lo, const void *hi_dev,
                                     double hi, void *stream);

/* Not: bool -> bool. */
teexec_status *tx_cuda_not(const uint8_t *x, uint8_t *y, size_t n, void *stream);

/* IsNaN (mode 0) / IsInf (mode 1 with the detect flags): float -> bool. */
teexec_status *tx_cuda_isnan_isinf(int mode, int detect_pos, int detect_neg, const void *x,
                                   teexec_dtype dt, uint8_t *y, size_t n, void *stream);

/* Clip bounds: a device scalar tensor of x's dtype, or a host value (the
 * older attribute form, already rounded to x's dtype), or neither. */
typedef struct tx_cuda_clip_bound {
    const void *dev;   /* one element of x's dtype, or NULL */
    int has_host;
    double host;
} tx_cuda_clip_bound;

/* y = min(max(x, lo), hi), min applied first (so lo > hi gives hi); NaN
 * stays NaN. Numeric dtypes. */
teexec_status *tx_cuda_clip(const void *x, void *y, teexec_dtype dt, size_t n,
                            tx_cuda_clip_bound lo, tx_cuda_clip_bound hi, void *stream);

#ifdef __cplusplus
}
#endif

#endif
