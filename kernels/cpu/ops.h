/*
 * ops.h - CPU kernels for the standard ONNX operators.
 *
 * Kernels know tensors (base/tensor.h) and nothing about graphs, nodes or
 * protobuf. The caller (exec's dispatcher) reads the node's attributes,
 * infers the output shapes (base/shape.h has the helpers), allocates every
 * output with the right dtype and shape, and passes them in. Each kernel
 * then checks that dtypes and shapes agree with the op's rules and returns:
 *   - NULL on success;
 *   - TEEXEC_ERR_INVALID_ARGUMENT when shapes, dtypes or parameters do not
 *     fit together (the message names the op and the mismatch);
 *   - TEEXEC_ERR_UNSUPPORTED for a dtype the op does not handle here (the
 *     message names the op and the dtype);
 *   - TEEXEC_ERR_NO_MEMORY when scratch memory cannot be had.
 * On error, outputs may have been partly written.
 *
 * Numbers: float16/bfloat16 compute in FP32 and round once at the output;
 * float32 computes in FP32 (reductions, norms and softmax accumulate in
 * FP64); float64 in FP64. In the float32 compute path, exp, erf and tanh
 * (Exp, Erf, Tanh, Sigmoid, Gelu, Softmax) use the vectorizable forms of
 * kernels/cpu/fastmath.h: relative error below 4e-7, a few ulps, where
 * libm's would be within one. Integers follow ONNX/numpy: arithmetic wraps
 * (two's complement, computed in unsigned so there is no C undefined
 * behaviour), Div truncates toward zero. Integer division by zero yields 0
 * and INT_MIN / -1 yields INT_MIN (wrapped); Pow with a negative integer
 * exponent yields 1 / base truncated (1, -1 or 0).
 *
 * Memory: kernels never take ownership of tensors; scratch memory is freed
 * before returning. Outputs must not alias inputs unless a kernel says so.
 *
 * Thread-safety: kernels keep no state; concurrent calls on distinct
 * outputs are safe. MatMul/Gemm use OpenBLAS, which threads internally.
 */
#ifndef TEEXEC_KERNELS_CPU_OPS_H
#define TEEXEC_KERNELS_CPU_OPS_H

#include "base/shape.h"
#include "base/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Elementwise unary: y has x's shape.                                 */
/* ------------------------------------------------------------------ */

typedef enum tx_unary_op {
    TX_UNARY_NEG,        /* floats, signed ints                         */
    TX_UNARY_ABS,        /* floats, all ints                            */
    TX_UNARY_SIGN,       /* floats, all ints                            */
    TX_UNARY_RELU,       /* floats, signed ints                         */
    TX_UNARY_SQRT,       /* the rest: floats only (fp32/fp16/bf16/fp64) */
    TX_UNARY_RECIPROCAL,
    TX_UNARY_EXP,
    TX_UNARY_LOG,
    TX_UNARY_ERF,
    TX_UNARY_TANH,
    TX_UNARY_SIGMOID,
    TX_UNARY_LEAKY_RELU, /* alpha (ONNX default 0.01)                    */
    TX_UNARY_ELU,        /* alpha (ONNX default 1.0)                     */
    TX_UNARY_SOFTPLUS,
    TX_UNARY_GELU,       /* exact: x/2 (1 + erf(x/sqrt 2))               */
    TX_UNARY_GELU_TANH,  /* Gelu approximate="tanh"                     */
    TX_UNARY_FLOOR,
    TX_UNARY_CEIL,
    TX_UNARY_ROUND,      /* half to even                                */
    TX_UNARY_SIN,
    TX_UNARY_COS,
    TX_UNARY_COUNT
} tx_unary_op;

/* The op's name as ONNX spells it ("Neg", "Gelu", ...). */
const char *tx_unary_op_name(tx_unary_op op);

/* y = op(x). alpha is read by LEAKY_RELU and ELU only. y may alias x. */
teexec_status *tx_cpu_unary(tx_unary_op op, const tx_tensor *x, float alpha, tx_tensor *y);

/* Named forms of tx_cpu_unary. */
teexec_status *tx_cpu_neg(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_abs(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_sign(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_relu(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_sqrt(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_reciprocal(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_exp(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_log(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_erf(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_tanh(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_sigmoid(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_leaky_relu(const tx_tensor *x, float alpha, tx_tensor *y);
teexec_status *tx_cpu_elu(const tx_tensor *x, float alpha, tx_tensor *y);
teexec_status *tx_cpu_softplus(const tx_tensor *x, tx_tensor *y);
/* approximate_tanh: Gelu's approximate="tanh"; false is "none". */
teexec_status *tx_cpu_gelu(const tx_tensor *x, bool approximate_tanh, tx_tensor *y);
teexec_status *tx_cpu_floor(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_ceil(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_round(const tx_tensor *x, tx_tensor *y);

/* Clip: min_t / max_t are scalar (rank 0 or one element) tensors of x's
 * dtype, or NULL for "no bound". All numeric dtypes. y may alias x. */
teexec_status *tx_cpu_clip(const tx_tensor *x, const tx_tensor *min_t,
                           const tx_tensor *max_t, tx_tensor *y);

/* Not: bool -> bool. */
teexec_status *tx_cpu_not(const tx_tensor *x, tx_tensor *y);

/* IsNaN / IsInf: float x -> bool y of the same shape. */
teexec_status *tx_cpu_isnan(const tx_tensor *x, tx_tensor *y);
teexec_status *tx_cpu_isinf(const tx_tensor *x, bool detect_positive,
                            bool detect_negative, tx_tensor *y);

/* ------------------------------------------------------------------ */
/* Elementwise binary with multidirectional broadcasting.              */
/* y's shape must be the broadcast of a's and b's.                     */
/* ------------------------------------------------------------------ */

typedef enum tx_binary_op {
    TX_BINARY_ADD,     /* numeric; y dtype = a dtype = b dtype          */
    TX_BINARY_SUB,
    TX_BINARY_MUL,
    TX_BINARY_DIV,
    TX_BINARY_POW,     /* y dtype = a dtype; b may be any numeric dtype */
    TX_BINARY_MIN,     /* numeric, two-input Min                        */
    TX_BINARY_MAX,
    TX_BINARY_EQUAL,   /* numeric or bool; y is bool                    */
    TX_BINARY_LESS,    /* numeric; y is bool                            */
    TX_BINARY_LESS_OR_EQUAL,
    TX_BINARY_GREATER,
    TX_BINARY_GREATER_OR_EQUAL,
    TX_BINARY_AND,     /* bool, bool -> bool                            */
    TX_BINARY_OR,
    TX_BINARY_XOR,
    TX_BINARY_COUNT
} tx_binary_op;

const char *tx_binary_op_name(tx_binary_op op);

/* y = a op b. y may alias a or b when it has that input's shape and dtype. */
teexec_status *tx_cpu_binary(tx_binary_op op, const tx_tensor *a, const tx_tensor *b,
                             tx_tensor *y);

teexec_status *tx_cpu_add(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_sub(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_mul(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_div(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_pow(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_equal(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_less(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_greater(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_and(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);
teexec_status *tx_cpu_or(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);

/* ------------------------------------------------------------------ */
/* Variadic Min / Max / Sum / Mean (n >= 1 inputs, broadcasting).      */
/* Accumulates in FP64 (floats) or 64-bit integers; rounds once.       */
/* ------------------------------------------------------------------ */

typedef enum tx_variadic_op {
    TX_VARIADIC_MIN,
    TX_VARIADIC_MAX,
    TX_VARIADIC_SUM,
    TX_VARIADIC_MEAN, /* floats only */
} tx_variadic_op;

teexec_status *tx_cpu_variadic(tx_variadic_op op, size_t n, const tx_tensor *const *inputs,
                               tx_tensor *y);

/* Where: cond is bool; x, y and out share a dtype (any dtype of >= 8 bits);
 * out's shape is the broadcast of all three. */
teexec_status *tx_cpu_where(const tx_tensor *cond, const tx_tensor *x, const tx_tensor *y,
                            tx_tensor *out);

/* ------------------------------------------------------------------ */
/* Matrix products                                                     */
/* ------------------------------------------------------------------ */

/* MatMul (numpy semantics, see tx_shape_matmul). float32/float64 via
 * OpenBLAS; float16/bfloat16 via FP32 sgemm, rounded once; int32/int64/
 * uint32/uint64 with 64-bit accumulation (wrapping). */
teexec_status *tx_cpu_matmul(const tx_tensor *a, const tx_tensor *b, tx_tensor *y);

/* Gemm: y = alpha * op(A) op(B) + beta * C, A and B 2-D, C (NULL allowed)
 * unidirectionally broadcastable to [M, N]. Same dtypes as MatMul. */
teexec_status *tx_cpu_gemm(const tx_tensor *a, const tx_tensor *b, const tx_tensor *c,
                           float alpha, float beta, bool trans_a, bool trans_b,
                           tx_tensor *y);

/* Einsum. Supports explicit ("ij,jk->ik") and implicit ("ij,jk") forms,
 * ellipsis, repeated labels (diagonals), summation over any labels: i.e.
 * batch matmul, transpose, inner/outer product, sums. Anything the parser
 * does not accept is TEEXEC_ERR_UNSUPPORTED naming the equation.
 * tx_cpu_einsum_shape gives the output shape for shape inference. Float
 * dtypes and int32/int64; all inputs and y share a dtype. */
teexec_status *tx_cpu_einsum_shape(const char *equation, size_t n,
                                   const tx_tensor *const *inputs, int32_t *rank,
                                   int64_t *dims);
teexec_status *tx_cpu_einsum(const char *equation, size_t n, const tx_tensor *const *inputs,
                             tx_tensor *y);

/* ------------------------------------------------------------------ */
/* Normalization                                                       */
/* ------------------------------------------------------------------ */

/* Softmax / LogSoftmax, float dtypes. legacy_2d = false: opset >= 13, the
 * softmax runs along `axis` alone. legacy_2d = true: opset < 13, the input is
 * coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])] and each row is
 * normalized. y may alias x. */
teexec_status *tx_cpu_softmax(const tx_tensor *x, int64_t axis, bool legacy_2d, tx_tensor *y);
teexec_status *tx_cpu_log_softmax(const tx_tensor *x, int64_t axis, bool legacy_2d,
                                  tx_tensor *y);

/* LayerNormalization (opset 17). Normalizes over dims[axis:]. scale (and
 * bias, which may be NULL) must be unidirectionally broadcastable to
 * dims[axis:] and have x's dtype. stash_type is an ONNX dtype number
 * (1 = float: statistics in FP32 precision or better; 11 = double).
 * mean and inv_std_dev (each may be NULL) have shape dims[:axis] followed by
 * rank-axis ones, dtype float (or double when stash_type is 11 or x is
 * double - whatever the caller allocated among float/double/x's dtype). */
teexec_status *tx_cpu_layer_norm(const tx_tensor *x, const tx_tensor *scale,
                                 const tx_tensor *bias, int64_t axis, float epsilon,
                                 int stash_type, tx_tensor *y, tx_tensor *mean,
                                 tx_tensor *inv_std_dev);

/* ------------------------------------------------------------------ */
/* Reductions                                                          */
/* ------------------------------------------------------------------ */

typedef enum tx_reduce_op {
    TX_REDUCE_SUM,
    TX_REDUCE_MEAN,
    TX_REDUCE_MAX,
    TX_REDUCE_MIN,
    TX_REDUCE_PROD,
    TX_REDUCE_SUM_SQUARE,
    TX_REDUCE_L1,
    TX_REDUCE_L2,
    TX_REDUCE_LOG_SUM,
    TX_REDUCE_LOG_SUM_EXP,
    TX_REDUCE_COUNT
} tx_reduce_op;

/* axes as the node gives them (attribute or input; may be negative);
 * naxes == 0 means all axes, or identity when noop_with_empty_axes. y must
 * have the shape tx_shape_reduce gives. Empty reductions give the identity
 * (0 for sums, 1 for Prod, -inf/+inf or the int limits for Max/Min, NaN
 * for Mean). Numeric dtypes; Max and Min also take bool. */
teexec_status *tx_cpu_reduce(tx_reduce_op op, const tx_tensor *x, const int64_t *axes,
                             size_t naxes, bool keepdims, bool noop_with_empty_axes,
                             tx_tensor *y);

/* ArgMax / ArgMin along axis -> int64 y (axis kept as 1 when keepdims).
 * Ties take the first index, or the last with select_last_index. NaN
 * counts as larger than any number (ArgMax finds it, ArgMin skips it). */
teexec_status *tx_cpu_argmax(const tx_tensor *x, int64_t axis, bool keepdims,
                             bool select_last_index, tx_tensor *y);
teexec_status *tx_cpu_argmin(const tx_tensor *x, int64_t axis, bool keepdims,
                             bool select_last_index, tx_tensor *y);

/* TopK along axis: values (x's dtype) and indices (int64) have x's shape
 * with dims[axis] = k. Equal values keep index order (lower index first),
 * as ONNX's reference does; NaN counts as larger than any number. With
 * sorted = false the result is still sorted (allowed by the spec). */
teexec_status *tx_cpu_topk(const tx_tensor *x, int64_t k, int64_t axis, bool largest,
                           bool sorted, tx_tensor *values, tx_tensor *indices);

/* CumSum along axis (numeric dtypes), with ONNX's exclusive and reverse. */
teexec_status *tx_cpu_cumsum(const tx_tensor *x, int64_t axis, bool exclusive, bool reverse,
                             tx_tensor *y);

/* ------------------------------------------------------------------ */
/* Data movement (any dtype of >= 8 bits, bool included)               */
/* ------------------------------------------------------------------ */

/* Element copy: same dtype and element count (shape may differ). */
teexec_status *tx_cpu_copy(const tx_tensor *src, tx_tensor *dst);

/* Transpose; perm NULL means reversed dims; nperm must equal rank. */
teexec_status *tx_cpu_transpose(const tx_tensor *x, const int64_t *perm, size_t nperm,
                                tx_tensor *y);

/* Concat of n >= 1 inputs along axis (negative allowed). */
teexec_status *tx_cpu_concat(size_t n, const tx_tensor *const *inputs, int64_t axis,
                             tx_tensor *y);

/* Split along axis into n outputs; each output's dim on the axis is its
 * share (the caller worked out `split` / num_outputs); they must add up. */
teexec_status *tx_cpu_split(const tx_tensor *x, int64_t axis, size_t n,
                            tx_tensor *const *outputs);

/* Slice (opset >= 10); see tx_shape_slice for the argument rules. */
teexec_status *tx_cpu_slice(const tx_tensor *x, const int64_t *starts, const int64_t *ends,
                            const int64_t *axes, const int64_t *steps, size_t n,
                            tx_tensor *y);

/* Gather / GatherElements: indices int32 or int64, negative indices count
 * from the end; an index out of range is TEEXEC_ERR_INVALID_ARGUMENT. */
teexec_status *tx_cpu_gather(const tx_tensor *data, const tx_tensor *indices, int64_t axis,
                             tx_tensor *y);
teexec_status *tx_cpu_gather_elements(const tx_tensor *data, const tx_tensor *indices,
                                      int64_t axis, tx_tensor *y);

/* Expand: broadcasts x to y's shape (which must be the broadcast of x's
 * shape and the requested one; see tx_shape_expand). */
teexec_status *tx_cpu_expand(const tx_tensor *x, tx_tensor *y);

/* Tile: y.dims[i] = x.dims[i] * repeats[i]; nrep must equal rank. */
teexec_status *tx_cpu_tile(const tx_tensor *x, const int64_t *repeats, size_t nrep,
                           tx_tensor *y);

/* Trilu: keeps the upper (upper = true) or lower triangle of the last two
 * dims, shifted by k diagonals; the rest becomes zero. */
teexec_status *tx_cpu_trilu(const tx_tensor *x, int64_t k, bool upper, tx_tensor *y);

/* Range: start, limit, delta are scalar tensors of one dtype (float, double,
 * int16, int32, int64; float16/bfloat16 too). tx_cpu_range_count gives the
 * output length max(ceil((limit - start) / delta), 0); delta == 0 is an
 * error. tx_cpu_range fills y (1-D of that length) with start + i * delta. */
teexec_status *tx_cpu_range_count(const tx_tensor *start, const tx_tensor *limit,
                                  const tx_tensor *delta, int64_t *count);
teexec_status *tx_cpu_range(const tx_tensor *start, const tx_tensor *delta, tx_tensor *y);

/* ------------------------------------------------------------------ */
/* Convolution, GatherND, RMSNormalization, Attention (the ops real    */
/* exports need beyond the transformer-block set)                      */
/* ------------------------------------------------------------------ */

/* Conv: X [N, C, D1..Dk], W [M, C/group, K1..Kk], B [M] or NULL, k >= 1
 * spatial dims; strides/dilations have k entries, pads 2k (all begins,
 * then all ends: the caller has resolved auto_pad). y is
 * [N, M, floor((Di + pads - ((Ki - 1) dilation + 1)) / stride) + 1 ...].
 * Float dtypes, X, W, B and y alike (kernels/cpu/conv.c). */
teexec_status *tx_cpu_conv(const tx_tensor *x, const tx_tensor *w, const tx_tensor *b,
                           int64_t group, const int64_t *strides, const int64_t *dilations,
                           const int64_t *pads, tx_tensor *y);

/* Conv backward in FP64: x, w and gy (dL/dy) are double; ADDS dL/dx,
 * dL/dw and dL/db into gx, gw, gb (double, shaped like x, w and [M]; any
 * may be NULL). */
teexec_status *tx_cpu_conv_backward(const tx_tensor *x, const tx_tensor *w, const tx_tensor *gy,
                                    int64_t group, const int64_t *strides,
                                    const int64_t *dilations, const int64_t *pads,
                                    tx_tensor *gx, tx_tensor *gw, tx_tensor *gb);

/* GatherND (batch_dims >= 0): int64 indices whose last dim k indexes
 * data's dims [batch_dims, batch_dims + k); negative entries count from the
 * end, out-of-range ones are TEEXEC_ERR_INVALID_ARGUMENT. y is
 * indices.shape[:-1] + data.shape[batch_dims + k:]; any movable dtype. */
teexec_status *tx_cpu_gather_nd(const tx_tensor *data, const tx_tensor *indices,
                                int64_t batch_dims, tx_tensor *y);

/* The element offset in data of each of the *n_slices gathered slices (of
 * *slice elements each, in output order): malloc'd into *offsets, which
 * the caller frees. The backward's scatter-add uses them. */
teexec_status *tx_cpu_gather_nd_offsets(const tx_shape *data, const tx_tensor *indices,
                                        int64_t batch_dims, int64_t **offsets,
                                        uint64_t *n_slices, uint64_t *slice);

/* RMSNormalization (opset 23) over dims[axis:]: y = x / sqrt(mean(x^2) +
 * epsilon) * scale, scale unidirectionally broadcastable to dims[axis:];
 * y has x's shape and scale's dtype. stash_type as for LayerNormalization
 * (the mean square is always accumulated in double). */
teexec_status *tx_cpu_rms_norm(const tx_tensor *x, const tx_tensor *scale, int64_t axis,
                               float epsilon, int stash_type, tx_tensor *y);

/* Attention (opset 23), kernels/cpu/attention.c says the math. */
typedef struct tx_attention_params {
    int64_t q_num_heads, kv_num_heads; /* required for rank-3 Q/K/V; 0 = not given */
    bool is_causal;
    bool has_scale;                    /* false: scale = 1/sqrt(head_size) */
    float scale;
    float softcap;                     /* 0 = none */
} tx_attention_params;

typedef struct tx_attention_inputs {
    const tx_tensor *q, *k, *v;                 /* rank 3 or 4, one float dtype */
    const tx_tensor *mask;                      /* NULL, bool or Q's dtype */
    const tx_tensor *past_key, *past_value;     /* both NULL or both given */
} tx_attention_inputs;

typedef struct tx_attention_outputs {
    tx_tensor *y;                               /* required */
    tx_tensor *present_key, *present_value, *qk; /* NULL = not wanted */
} tx_attention_outputs;

teexec_status *tx_cpu_attention(const tx_attention_params *p, const tx_attention_inputs *in,
                                const tx_attention_outputs *out);

/* FP64 backward: inputs double (a mask bool or double); the gradients of
 * the outputs (double, NULL = zero) and the input gradients the backward
 * ADDS into (double, shaped like their inputs, NULL = not wanted; gmask
 * needs a double mask). */
typedef struct tx_attention_grads {
    const tx_tensor *gy, *g_present_key, *g_present_value, *g_qk;
    tx_tensor *gq, *gk, *gv, *gmask, *gpast_key, *gpast_value;
} tx_attention_grads;

teexec_status *tx_cpu_attention_backward(const tx_attention_params *p,
                                         const tx_attention_inputs *in,
                                         const tx_attention_grads *g);

#endif
