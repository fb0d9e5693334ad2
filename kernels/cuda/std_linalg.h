/*
 * std_linalg.h - the matrix products cuBLASLt does not take, as plain
 * kernels with the CPU's arithmetic (kernels/cpu/matmul.c, gemm.c,
 * einsum.c):
 *   - tx_cuda_naive_gemm: batched, broadcast MatMul and Gemm in DOUBLE
 *     (FP64 accumulation) and the integer dtypes (wrapping 64-bit
 *     accumulation; Gemm's alpha / beta applied in double and truncated
 *     unless both are 1, as the CPU does). One thread per output element,
 *     summing k in order: fine for the small integer / double products
 *     models contain, not a GEMM replacement;
 *   - tx_cuda_einsum: Einsum by direct summation over the plan the CPU's
 *     parser makes (labels, their sizes, and each input's stride per label:
 *     a repeated label is a diagonal); for each output element the summed
 *     labels are walked in the CPU's order, in FP64 (floats) or wrapping
 *     int64, so results are the CPU's bits.
 *
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_LINALG_H
#define TEEXEC_KERNELS_CUDA_STD_LINALG_H

#include "kernels/cuda/std_num.h"
#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[batch..., M, N] (contiguous) = sum_k a[.., m, k] b[.., k, n]; batch
 * coordinates walk bdims, operands step by their batch strides sa / sb
 * (elements, 0 where they broadcast) and inside a matrix by a_sm / a_sk /
 * b_sk / b_sn (so a transposed operand is only other strides). Gemm: y =
 * alpha * AB + beta * c[m * c_si + n * c_sj] (c may be NULL). */
typedef struct tx_cuda_naive_gemm {
    int nb;
    int64_t bdims[TX_STD_RANK], sa[TX_STD_RANK], sb[TX_STD_RANK];
    int64_t M, N, K;
    int64_t a_sm, a_sk, b_sk, b_sn;
    int gemm;
    double alpha, beta;
    const void *c;
    int64_t c_si, c_sj;
} tx_cuda_naive_gemm;

/* Whether tx_cuda_naive_gemm runs dt: DOUBLE, INT32, INT64, UINT32, UINT64. */
int tx_cuda_naive_gemm_dtype_ok(teexec_dtype dt);

teexec_status *tx_cuda_naive_gemm_run(const tx_cuda_naive_gemm *p, const void *a, const void *b,
                                      void *y, teexec_dtype dt, void *stream);

#define TX_CUDA_EINSUM_LABELS 16
#define TX_CUDA_EINSUM_INPUTS 4

/* Labels in walk order: the first nout are the output's dims (row-major),
 * the rest are summed. stride[k][l]: input k's element stride for label l. */
typedef struct tx_cuda_einsum_plan {
    int n_inputs, nlabels, nout;
    int64_t size[TX_CUDA_EINSUM_LABELS];
    int64_t stride[TX_CUDA_EINSUM_INPUTS][TX_CUDA_EINSUM_LABELS];
} tx_cuda_einsum_plan;

/* Every input and y of dtype dt (floats, signed or unsigned integers). */
teexec_status *tx_cuda_einsum(const tx_cuda_einsum_plan *p, const void *const *inputs, void *y,
                              teexec_dtype dt, void *stream);

/* Einsum's backward for one input (the CPU rule, kernels' FP64 order):
 * labels in use in ascending label order with their sizes, each input's
 * and the output's stride per label (0 where absent), and the target
 * input's dims with the label each binds (-1: a broadcast dim of size 1,
 * which binds none). gx FLOAT / FLOAT16 / BFLOAT16, every element written. */
typedef struct tx_cuda_einsum_bwd_plan {
    int n_inputs, target, nlabels, trank;
    int64_t size[TX_CUDA_EINSUM_LABELS];
    int64_t stride[TX_CUDA_EINSUM_INPUTS][TX_CUDA_EINSUM_LABELS];
    int64_t ostride[TX_CUDA_EINSUM_LABELS];
    int64_t tdims[TX_STD_RANK];
    int tlab[TX_STD_RANK];
} tx_cuda_einsum_bwd_plan;

teexec_status *tx_cuda_einsum_backward(const tx_cuda_einsum_bwd_plan *p,
                                       const void *const *inputs, const void *g, void *gx,
                                       teexec_dtype dt, void *stream);

#ifdef __cplusplus
}
#endif

#endif
