/*
 * te_cuda_linear.h - internal: a te.ops Linear prepared for the GPU (its
 * shapes, the operand layouts of its recipe, where they live in the node's
 * state and in the scratch) and the steps its forward and backward are made
 * of. te_cuda_linear.c builds the unfused node on these; the Linear
 * fusions (te_cuda_linear_fused.c) run the same steps with an epilogue.
 *
 * Layout (fixed at prepare, the same for every call):
 *  - state: x's operand region, then w's (each 256-byte aligned; empty when
 *    the operand stays in high precision). The forward quantizes into them
 *    and the backward reads their columnwise copies, so a fused forward
 *    followed by the unfused backward (or the reverse) sees one layout.
 *  - scratch: dy's operand region, then the GEMMs' emulation scratch.
 *    A handed-off operand (tx_cuda_operand_q.handed_off) is written by the
 *    producer's fused kernel (te_cuda_handoff.c) and not quantized here; a
 *    handed-off dy has a region of its own (dy_region_bytes), which the
 *    executor places for the backward steps from its producer to this
 *    Linear only and passes as tx_te_bwd_args.handoff_region: in the state
 *    it was held for the whole run, over 1 GiB for GPT-2 124M's 48 Linears
 *    in fp8-current at 8192 tokens.
 * A GEMM whose two operands stay in high precision runs here through
 * cuBLASLt directly (recipe none: fp32 / bf16 / fp16, TF32 only with
 * env->allow_tf32); any quantized operand goes through exec/cuda/
 * linear_gemm.h.
 *
 * Ownership: a tx_cuda_linear is plain data (no pointers it owns); device
 * memory is the caller's. Thread-safety: read-only after init; calls are
 * asynchronous on env->stream and never synchronize the host.
 */
#ifndef TEEXEC_EXEC_CUDA_TE_CUDA_LINEAR_H
#define TEEXEC_EXEC_CUDA_TE_CUDA_LINEAR_H

#include "exec/cuda/linear_gemm.h"
#include "exec/cuda/te_cuda.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tx_cuda_linear {
    char name[96];                 /* "op NAME (Linear)", for messages */
    size_t T, N, K;                /* x flattened to [T, K], weight [N, K] */
    teexec_dtype x_dt, w_dt, y_dt;
    bool training;
    unsigned needs;                /* TX_TE_FOR_* */
    tx_cuda_lin_operand ox, ow, ody;
    size_t st_x, st_w, state_bytes;        /* offsets into the node's state */
    size_t st_dy;            /* offset of dy in its hand-off region (0), or
                              * SIZE_MAX: dy is not handed off */
    size_t dy_region_bytes;  /* the hand-off region's size; 0: none */
    size_t sc_dy, sc_gemm, gemm_scratch;   /* offsets into the scratch */
    size_t scratch_bytes;
} tx_cuda_linear;

/* Checks the desc (shapes, dtypes, recipe rules via tx_cuda_lin_operand_init)
 * and lays the Linear out. TEEXEC_ERR_UNSUPPORTED with a sentence naming
 * the node when the GPU cannot run it. */
teexec_status *tx_cuda_linear_init(tx_cuda_linear *l, const tx_cuda_te_desc *d) TX_NODISCARD;

/* The region a handed-off dy needs (0: dy is not handed off). */
size_t tx_cuda_linear_dy_region_bytes(const tx_cuda_linear *l);

/* True when some operand is quantized. */
bool tx_cuda_linear_quantized(const tx_cuda_linear *l);

/* Quantizes x and w (those whose quantizer is on) into the state. */
teexec_status *tx_cuda_linear_quantize_inputs(const tx_cuda_linear *l, const void *x,
                                              const void *w, void *state,
                                              const tx_cuda_env *env) TX_NODISCARD;

/* FPROP out[T,N] = epilogue(x·wᵀ) after tx_cuda_linear_quantize_inputs.
 * epi may be NULL; its bias / gelu_pre / residual / alpha are honoured
 * (residual must have out's dtype). */
teexec_status *tx_cuda_linear_fprop(const tx_cuda_linear *l, const void *x, const void *w,
                                    void *state, void *scratch, void *out, teexec_dtype out_dt,
                                    const tx_cuda_lin_epi *epi,
                                    const tx_cuda_env *env) TX_NODISCARD;

/* The backward GEMMs. dy [T,N] (dy_dt); saved_x / saved_w: the schema's
 * saved x and weight (NULL when not saved; a quantized operand is read from
 * the state instead). dx (NULL: not wanted) gets alpha·dy·w (+ dx_add when
 * not NULL: the fork's grad, dx's dtype); dw (NULL: not wanted) gets
 * alpha·dyᵀ·x. alpha 0 means 1. */
typedef struct tx_cuda_linear_bwd {
    const void *dy;
    teexec_dtype dy_dt;
    const void *saved_x, *saved_w;
    void *dx;
    teexec_dtype dx_dt;
    const void *dx_add;
    void *dw;
    teexec_dtype dw_dt;
    float alpha;
    /* Optional dGELU+dbias epilogue of the dgrad (the executor's fusion of
     * the GELU(tanh) and Bias before this Linear, high-precision operands
     * only): dx = (dy·w) * gelu'(dgelu_pre) and dbias = its column sums,
     * one rounding to dx's dtype. dbias must have dx's dtype. */
    const void *dgelu_pre;
    void *dbias;
    /* the handed-off dy's region (tx_te_bwd_args.handoff_region) */
    void *dy_region;
} tx_cuda_linear_bwd;

teexec_status *tx_cuda_linear_backward(const tx_cuda_linear *l, const tx_cuda_linear_bwd *b,
                                       void *state, void *scratch,
                                       const tx_cuda_env *env) TX_NODISCARD;

/* A Linear's tx_te_bwd_args (unfused, or the Linear inside a fused
 * backward) as a tx_cuda_linear_bwd, its tensors checked against the
 * layout; alpha and dx_add left 0 / NULL. */
teexec_status *tx_cuda_linear_bwd_args(const tx_cuda_linear *l, const tx_te_bwd_args *a,
                                       tx_cuda_linear_bwd *b) TX_NODISCARD;

#endif
