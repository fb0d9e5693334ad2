/*
 * cpu_fused.h - the CPU kernels of the planner's fusion catalog
 * (planner/plan.h, tx_fusion_id): the reference every other backend's fused
 * kernels are checked against.
 *
 * The promise of every kernel here: it computes exactly the numbers the
 * unfused kernels (kernels/cpu/te_*.c, float path) compute for the ops it
 * covers, bit for bit, because it performs the same float operations in the
 * same order and rounds each intermediate value to the dtype the unfused
 * path would have stored it in. (The project builds with
 * -ffp-contract=off, so an expression written the same way rounds the same
 * way.) What a fusion saves on the CPU is the intermediate tensors and
 * passes, never the rounding points:
 *
 *  - GEMMs run once into a float scratch buffer through the same OpenBLAS
 *    call as the unfused kernel, then ONE epilogue pass applies bias,
 *    scale, activation and residual and writes the result. A GEMM with
 *    beta = 1 straight into the residual (what a GPU kernel does) would add
 *    the residual to each K-panel's partial sum inside OpenBLAS, which
 *    changes the rounding, so the CPU reference keeps the residual add in
 *    the epilogue; the result still goes straight to the output without
 *    the Linear's and the Bias's outputs ever existing.
 *  - Forward-only fusions write exactly the tensors the unfused forwards
 *    leave for backward (e.g. Linear+Bias+GELU writes GELU's input, which
 *    GELU saves); backward-only fusions read exactly those.
 *  - Quantized hand-off: a kernel that "writes the next Linear's input
 *    format" writes its high-precision output and quantizes that very
 *    tensor with the consumer's quantizer config, so the bytes equal what
 *    the consumer would have produced itself. Whole-tensor statistics
 *    (current scaling's amax, NVFP4's global amax, MXFP8's 32-row column
 *    blocks) need the finished tensor, so the quantize step runs after the
 *    producing loop, not inside it.
 *  - Joint fusions (grouped MLP, dense MLP) keep a private saved layout: a
 *    tx_fused_mlp_ctx that the forward fills and the backward consumes.
 *
 * Dtypes: float32, float16, bfloat16 tensors (mixed freely; math in float).
 * float64 tensors (the FP64 finite-difference path) are refused with
 * TEEXEC_ERR_INVALID_ARGUMENT: that path runs unfused.
 *
 * Ownership: outputs are allocated by the caller with the unfused ops'
 * shapes and dtypes (qtensor outputs are filled by the kernel: free with
 * tx_qtensor_free); a tx_fused_mlp_ctx owns its tensors (tx_fused_mlp_free).
 * Kernels allocate only scratch that they free before returning.
 * Thread-safety: pure over their arguments, except that a quantizer config
 * with a delayed-scaling state reads its scale and records its amax there
 * (one thread per state).
 */
#ifndef TEEXEC_EXEC_CPU_FUSED_H
#define TEEXEC_EXEC_CPU_FUSED_H

#include "base/status.h"
#include "base/tensor.h"
#include "exec/recipe_delayed.h"
#include "format/te_schema.h"
#include "kernels/cpu/qtensor.h"
#include "kernels/cpu/te_args.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- one GEMM operand's quantizer ------------------------------------- */

typedef struct tx_fused_q {
    bool on;                   /* false: the operand stays in high precision */
    tx_quant_config cfg;       /* kind, format, usage, blocks, NVFP4 options */
    tx_delayed_state *delayed; /* fp8-delayed: scale read from / amax recorded to slot */
    int32_t slot;
} tx_fused_q;

/* Quantizes t (viewed as [rows, last dim]) under fq into q (allocated
 * here; free with tx_qtensor_free). fq->on must be true. */
teexec_status *tx_fused_quantize(const tx_tensor *t, const tx_fused_q *fq,
                                 tx_qtensor *q) TX_NODISCARD;
/* One usage of q dequantized into `out`, a new float32 tensor with the
 * shape of `like` (release with tx_tensor_release). */
teexec_status *tx_fused_dequantize(const tx_qtensor *q, unsigned usage, const tx_tensor *like,
                                   tx_tensor *out) TX_NODISCARD;

/* True for the activations the fused epilogues implement (plain and gated,
 * and the row-scaled ScaledSwiGLU / ScaledSReLU); ClampedSwiGLU is not. */
bool tx_fused_act_supported(tx_te_op_id op);

/* ---- forward-only ------------------------------------------------------- */

/* FWD_LINEAR_BIAS_ACT, FWD_LINEAR_BIAS_ADD, FWD_LINEAR_SCALE_ADD: the
 * Linear's GEMM y = x·wᵀ followed by, in this order, the optional Bias,
 * ConstantScale, activation and AddExtraInput, in one epilogue pass. */
typedef struct tx_fused_linear_fwd_args {
    const tx_tensor *x, *w;      /* the GEMM operands (dequantized when quantized) */
    teexec_dtype y_dtype;        /* dtype of the Linear's output */
    const tx_tensor *bias;       /* NULL: no Bias */
    teexec_dtype bias_out_dtype;
    bool has_scale;              /* ConstantScale */
    double scale;
    teexec_dtype scale_out_dtype;
    tx_te_op_id act;             /* TX_TE_OP_COUNT: no activation */
    const tx_te_attr_value *act_attrs;
    tx_tensor *act_input;        /* with act: written (the activation's saved x) */
    const tx_tensor *residual;   /* AddExtraInput's extra; NULL: none */
    tx_tensor *out;              /* the last covered op's output */
} tx_fused_linear_fwd_args;

teexec_status *tx_fused_linear_fwd(const tx_fused_linear_fwd_args *a) TX_NODISCARD;

/* FWD_NORM_QUANTIZE / FWD_ACT_QUANTIZE: the op's forward (args as for
 * tx_te_cpu_forward, aux included) and its output quantized under fq into
 * *q (the next Linear's input). */
teexec_status *tx_fused_fwd_quantize(const tx_te_fwd_args *a, const tx_fused_q *fq,
                                     tx_qtensor *q) TX_NODISCARD;

/* ---- backward-only -------------------------------------------------------- */

/* BWD_ACT_BIAS: ops Bias, act. dy = grad of the act's output, act_x = the
 * act's saved input; writes dx (the grad of the Bias's input, which equals
 * the grad of the act's input, rounded to dx's dtype) and db (NULL: not
 * wanted) in one pass; then, with fq on, quantizes dx into *q for the Linear
 * before. act_dx_dtype: dtype of the act's grad_input in the unfused path. */
teexec_status *tx_fused_dact_dbias(tx_te_op_id act, const tx_te_attr_value *act_attrs,
                                   const tx_tensor *dy, const tx_tensor *act_x,
                                   teexec_dtype act_dx_dtype, tx_tensor *dx, tx_tensor *db,
                                   const tx_fused_q *fq, tx_qtensor *q) TX_NODISCARD;

/* BWD_BIAS_QUANTIZE: db = Σ_rows dy, dx = dy, quantized under fq into *q. */
teexec_status *tx_fused_dbias_quantize(const tx_tensor *dy, tx_tensor *dx, tx_tensor *db,
                                       const tx_fused_q *fq, tx_qtensor *q) TX_NODISCARD;

/* BWD_LINEAR_ADD dgrad: dx = round(dy·w, lin_dx_dtype) + extra_grad
 * (extra_grad NULL: zero, then dx = the rounded dgrad). dy, w: the dgrad
 * operands (dequantized when quantized). */
teexec_status *tx_fused_dgrad_add(const tx_tensor *dy, const tx_tensor *w,
                                  teexec_dtype lin_dx_dtype, const tx_tensor *extra_grad,
                                  tx_tensor *dx) TX_NODISCARD;

/* BWD_LINEAR_SCALE: the Linear's incoming grad s·dy (ConstantScale's
 * backward, written into out: the tensor the Linear's dgrad and wgrad
 * read, quantized by the caller when the plan says so). */
teexec_status *tx_fused_scale_grad(const tx_tensor *dy, double s, tx_tensor *out) TX_NODISCARD;

/* BWD_ADD_NORM: the norm's backward (args as for tx_te_cpu_backward, its
 * grad_input rounded to norm_dx_dtype) plus the fork's extra grad, written
 * into a->grad_input. extra_grad NULL: zero. */
teexec_status *tx_fused_norm_bwd_add(const tx_te_bwd_args *a, teexec_dtype norm_dx_dtype,
                                     const tx_tensor *extra_grad) TX_NODISCARD;

/* ---- joint: MLPs ------------------------------------------------------------ */

/* GROUPED_MLP (GroupedLinear fc1, ScaledSwiGLU | ScaledSReLU, GroupedLinear
 * fc2) and DENSE_MLP (Linear fc1, [Bias], activation, Linear fc2). */
typedef struct tx_fused_mlp_args {
    bool grouped;
    /* fc1 */
    const tx_tensor *x;                   /* main input */
    const tx_qtensor *x_q;                /* x already quantized by a hand-off, or NULL */
    const tx_tensor *split_sizes;         /* grouped: fc1's (and fc2's) split sizes */
    const tx_tensor *const *w1; const tx_tensor *const *b1; /* G weights, G biases or NULL */
    teexec_dtype h1_dtype;                /* fc1's output dtype (the act's input) */
    teexec_dtype bias_out_dtype;          /* dense with Bias: the Bias's output dtype */
    const tx_tensor *dense_bias;          /* dense: the Bias op's parameter, or NULL */
    /* activation */
    tx_te_op_id act;
    const tx_te_attr_value *act_attrs;
    const tx_tensor *scales;              /* grouped: the act's row scales */
    teexec_dtype h2_dtype;                /* act output dtype (fc2's input) */
    /* fc2 */
    const tx_tensor *const *w2; const tx_tensor *const *b2;
    int32_t groups;                       /* G (1 for dense) */
    tx_tensor *out;                       /* fc2's output */
    /* quantizers: input / weight / grad_output of fc1 and fc2 */
    tx_fused_q q1_x, q1_w, q1_dy, q2_x, q2_w, q2_dy;
    /* which grads the backward computes */
    bool need_dx, need_dparams, need_dscales;
} tx_fused_mlp_args;

/* The private saved layout. */
typedef struct tx_fused_mlp_ctx {
    tx_fused_mlp_args a;          /* copy; pointers borrowed from the caller */
    tx_tensor x1_saved;           /* fc1 input for wgrad: columnwise-dequantized or a copy */
    tx_tensor *w1_saved, *w2_saved; /* per group: columnwise-dequantized weights or copies */
    tx_tensor pre_act;            /* the act's input (fc1 output + bias) */
    tx_tensor h2_saved;           /* fc2 input for wgrad */
    int64_t *offsets;             /* G + 1 row offsets */
} tx_fused_mlp_ctx;

teexec_status *tx_fused_mlp_fwd(const tx_fused_mlp_args *a, tx_fused_mlp_ctx *ctx) TX_NODISCARD;

/* Grads: dx (NULL: not wanted) of fc1's input; dw1/db1/dw2/db2 per group
 * (NULL entries or arrays: not wanted), dense_db (the Bias op's grad),
 * dscales (grouped). */
typedef struct tx_fused_mlp_grads {
    tx_tensor *dx;
    tx_tensor *const *dw1, *const *db1, *const *dw2, *const *db2;
    tx_tensor *dense_db;
    tx_tensor *dscales;
    const tx_qtensor *dy_q;   /* dy already quantized by a hand-off, or NULL */
} tx_fused_mlp_grads;

teexec_status *tx_fused_mlp_bwd(const tx_fused_mlp_ctx *ctx, const tx_tensor *dy,
                                const tx_fused_mlp_grads *g) TX_NODISCARD;
void tx_fused_mlp_free(tx_fused_mlp_ctx *ctx);

#endif
