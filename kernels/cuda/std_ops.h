/*
 * std_ops.h - CUDA kernels for the standard ONNX ops that stay standard after
 * lowering (exec/cuda/std_cuda.c drives them): strided copies (Transpose,
 * Slice, Split, Concat, Expand and their backwards), numpy-broadcast
 * elementwise arithmetic, Where, the reduction of a broadcast operand's
 * gradient, Gather and its backward, Softmax / LogSoftmax (Cast: std_cast.h).
 *
 * Shapes are described by the caller as an iteration space (at most
 * TX_STD_MAX_RANK dims) with per-operand element strides (0 on broadcast
 * dims, negative for a reversed Slice): the kernels know nothing of ONNX.
 *
 * Numbers: FLOAT / BFLOAT16 / FLOAT16 operands are read as FP32, math in
 * FP32, one rounding on store (round to nearest even). Gradient sums over
 * broadcast dims accumulate in FP64 in a fixed order (no atomics): results
 * do not depend on scheduling.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t, NULL = default). Returned statuses are owned by the
 * caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_OPS_H
#define TEEXEC_KERNELS_CUDA_STD_OPS_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TX_STD_MAX_RANK 8

/* dst[dst_base + sum c_k dst_st[k]] = src[src_base + sum c_k src_st[k]] for
 * every coordinate c of dims (row-major order). Element size esz 1, 2, 4
 * or 8 bytes. */
typedef struct tx_cuda_strided {
    int rank;
    int64_t dims[TX_STD_MAX_RANK];
    int64_t src_st[TX_STD_MAX_RANK], dst_st[TX_STD_MAX_RANK];
    int64_t src_base, dst_base;
} tx_cuda_strided;

teexec_status *tx_cuda_strided_copy(const tx_cuda_strided *p, const void *src, void *dst,
                                    size_t esz, void *stream);

/* Elementwise ops over an output of `dims` (contiguous); operand k is read
 * at sum c_j st[k][j]. */
typedef enum tx_std_ew_op {
    TX_STD_EW_ADD,
    TX_STD_EW_SUB,
    TX_STD_EW_MUL,
    TX_STD_EW_DIV,
    TX_STD_EW_POW    /* b == 2 and b == 3 as plain products, as the CPU does */
} tx_std_ew_op;

typedef struct tx_cuda_bcast {
    int rank;
    int64_t dims[TX_STD_MAX_RANK];
    int64_t st[3][TX_STD_MAX_RANK];
} tx_cuda_bcast;

/* y = a op b (operands 0 and 1 of g); FLOAT/BFLOAT16/FLOAT16, each its own
 * (Pow's exponent b: any numeric dtype, read as float). Unary math is
 * std_unary.h's. */
teexec_status *tx_cuda_ew_forward(tx_std_ew_op op, const tx_cuda_bcast *g, const void *a,
                                  teexec_dtype at, const void *b, teexec_dtype bt, void *y,
                                  teexec_dtype yt, void *stream);

/* out = cond ? x : y (operands 0 cond (bool bytes), 1 x, 2 y); x, y and out
 * of one dtype of esz bytes. */
teexec_status *tx_cuda_where_forward(const tx_cuda_bcast *g, const uint8_t *cond, const void *x,
                                     const void *y, void *out, size_t esz, void *stream);

/* Gradient of one operand X of a broadcasting op: for each element of X
 * (the output's dims with the `red` dims collapsed to 1, contiguous), the
 * sum over the output positions that read it of a term:
 *   G       g                 NEG_G   -g
 *   MUL     g * b             DIV_A   g / b          DIV_B  -g * a / (b*b)
 *   POW_A   g * b * a^(b-1)   POW_B   g * y * ln a (a > 0, else 0)
 *   WHERE_X cond ? g : 0      WHERE_Y cond ? 0 : g
 *   SCALE   g * scale         EXTREME a == y ? g / ties : 0 (Max / Min, ties
 *                                     per output element, contiguous as g)
 * Operand strides over the output's dims: g and y contiguous (st_g), a,
 * b, cond their broadcast strides. g and y are float dtypes; a and b any
 * numeric dtype (a Pow's exponent may be an integer). */
typedef enum tx_std_grad_term {
    TX_STD_GT_G,
    TX_STD_GT_NEG_G,
    TX_STD_GT_MUL,
    TX_STD_GT_DIV_A,
    TX_STD_GT_DIV_B,
    TX_STD_GT_POW_A,
    TX_STD_GT_POW_B,
    TX_STD_GT_WHERE_X,
    TX_STD_GT_WHERE_Y,
    TX_STD_GT_SCALE,
    TX_STD_GT_EXTREME
} tx_std_grad_term;

typedef struct tx_cuda_bgrad {
    int rank;
    int64_t dims[TX_STD_MAX_RANK];       /* the output's */
    int64_t st_a[TX_STD_MAX_RANK], st_b[TX_STD_MAX_RANK], st_c[TX_STD_MAX_RANK];
    unsigned char red[TX_STD_MAX_RANK];  /* 1: X broadcasts along this dim */
} tx_cuda_bgrad;

typedef struct tx_cuda_bgrad_ops {
    const void *g; teexec_dtype g_dtype;
    const void *a; teexec_dtype a_dtype;   /* NULL where the term does not read it */
    const void *b; teexec_dtype b_dtype;
    const void *y; teexec_dtype y_dtype;
    const uint8_t *cond;
    double scale;                          /* SCALE */
    const double *ties;                    /* EXTREME */
} tx_cuda_bgrad_ops;

/* Overwrites gx (gx_dtype FLOAT/BFLOAT16/FLOAT16). */
teexec_status *tx_cuda_bcast_grad(tx_std_grad_term term, const tx_cuda_bgrad *p,
                                  const tx_cuda_bgrad_ops *o, void *gx, teexec_dtype gx_dtype,
                                  void *stream);

/* Gather as [outer, d, inner] -> [outer, n_idx, inner]; indices INT64 or
 * INT32, negative ones count from the end, out-of-range ones give a zero
 * row. Any element size. */
teexec_status *tx_cuda_gather_forward(const void *data, size_t esz, const void *idx,
                                      teexec_dtype idx_dtype, size_t n_idx, size_t outer,
                                      size_t d, size_t inner, void *out, void *stream);
/* gx[o, v, e] = sum over j with idx[j] == v (after wrapping) of
 * g[o, j, e], in j order in FP64, rounded once; every element written. */
teexec_status *tx_cuda_gather_backward(const void *g, teexec_dtype g_dtype, const void *idx,
                                       teexec_dtype idx_dtype, size_t n_idx, size_t outer,
                                       size_t d, size_t inner, void *gx, teexec_dtype gx_dtype,
                                       void *stream);

/* Softmax (log_mode 0) or LogSoftmax (1) over the middle dim of
 * [outer, len, inner], one block per (outer, inner) row; x, y, g, gx all of
 * dtype dt. Exponentials in FP32 (expf), sums in FP64 combined in a fixed
 * order, as the CPU (kernels/cpu/softmax.c) sums in double. */
teexec_status *tx_cuda_softmax_forward(const void *x, void *y, teexec_dtype dt, size_t outer,
                                       size_t len, size_t inner, int log_mode, void *stream);
/* gx = y (g - sum g y)   or, log mode, g - exp(y) sum g. */
teexec_status *tx_cuda_softmax_backward(const void *y, const void *g, void *gx, teexec_dtype dt,
                                        size_t outer, size_t len, size_t inner, int log_mode,
                                        void *stream);

#ifdef __cplusplus
}
#endif

#endif
