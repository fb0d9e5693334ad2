/*
 * te_cuda.h - the CUDA implementations of the te.ops basic ops and of the
 * planner's fused kernels, under the same contract as the CPU ones
 * (kernels/cpu/te_args.h, exec/cpu_fused.h), with DEVICE tensors.
 *
 * A tx_te_fwd_args / tx_te_bwd_args handed to the functions here is the CPU
 * contract unchanged except that every tx_tensor's `data` points to device
 * memory (dtype, rank, dims, numel, nbytes as usual; owns_data false). The
 * executor (exec/cuda/cuda_executor_build.c) allocates every input, output, aux and
 * grad tensor with the dtype and shape the schema gives (tx_te_infer), builds
 * the saved list with tx_te_setup_context exactly as the CPU trainer does,
 * and calls forward / backward. So:
 *  - forward writes the main output, the extra outputs and, when training,
 *    the schema's aux tensors (norm statistics, dropout mask, attention's
 *    log-sum-exp) exactly as the CPU kernel defines them;
 *  - backward OVERWRITES dx, the parameter grads and the extra-input grads
 *    it is given (NULL entries: not wanted); the executor sums fan-out.
 *
 * What the CPU contract does not have: a per-node object made once for fixed
 * shapes (tx_cuda_te_node). Preparing checks that the GPU can run the node
 * (dtypes, shapes, recipe, device capability, determinism) and fails with
 * TEEXEC_ERR_UNSUPPORTED and a message "op NAME (OpType): reason" otherwise;
 * it says how many device bytes the node keeps from its forward to its
 * backward besides the schema's aux (`state`: a quantized Linear's FP8
 * copies and scales, cuDNN's attention statistics) and how much transient
 * scratch one call needs. The executor gives each node its own state region
 * (valid from forward to the matching backward) and one shared scratch
 * region; nothing here allocates device memory after prepare, and nothing
 * synchronizes the host, so forward and backward can be captured in a CUDA
 * graph.
 *
 * Numbers: the same as the CPU kernels up to float rounding order (fp32
 * accumulation, each output rounded once to its dtype); quantizers and
 * masks (Dropout's Philox) bit for bit. GEMM operands under a recipe are
 * quantized with the CUDA quantizers (which equal the CPU ones bit for bit)
 * and run natively where the device has the unit (FP8 per-tensor and FP8
 * block on sm_90; MXFP8 / NVFP4 on sm_100+) or exactly emulated (quantize,
 * dequantize to bf16, fp32-accumulating GEMM) otherwise.
 *
 * Ownership: a node owns its private host data; the descriptors it was
 * prepared from are read during prepare only. State and scratch memory
 * belong to the executor.
 * Thread-safety: one host thread at a time per node; nodes are independent.
 */
#ifndef TEEXEC_EXEC_CUDA_TE_CUDA_H
#define TEEXEC_EXEC_CUDA_TE_CUDA_H

#include "base/status.h"
#include "base/tensor.h"
#include "format/te_schema.h"
#include "kernels/cpu/qtensor.h"
#include "kernels/cpu/te_args.h"
#include "planner/plan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_gemm_lt tx_gemm_lt;
typedef struct tx_sdpa_cudnn tx_sdpa_cudnn;

/* What every call runs with. One per executor (session / trainer). */
typedef struct tx_cuda_env {
    void *stream;              /* cudaStream_t: every kernel is queued here */
    tx_gemm_lt *gemm;          /* cuBLASLt handle with its heuristic cache */
    tx_sdpa_cudnn *sdpa;       /* cuDNN fused attention; NULL when cuDNN is unusable */
    void *gemm_ws;             /* cuBLASLt workspace */
    size_t gemm_ws_bytes;
    int sm;                    /* compute capability, e.g. 90, 100 */
    bool deterministic;        /* results must not depend on scheduling */
    bool allow_tf32;           /* fp32 GEMMs may use TF32 */
    uint64_t step;             /* training step (NVFP4 stochastic rounding offset) */
} tx_cuda_env;

/* One GEMM operand's quantizer, from the plan's tx_plan_quant. */
typedef struct tx_cuda_operand_q {
    bool on;                   /* false: stays in high precision */
    tx_quant_config cfg;       /* kind, format, usage, blocks, NVFP4 options (seed included) */
    bool native;               /* the plan chose the native GEMM (else exact emulation) */
    /* fp8-delayed: device floats the executor owns. The quantizer reads its
     * scale from *scale and writes the measured amax to *amax; the executor
     * rolls the history after the step (exec/cuda/cuda_executor_run.c update_delayed). */
    float *delayed_scale;
    float *delayed_amax;
    /* Quantized hand-off: the producer's fused kernel (te_cuda_handoff.c)
     * fills this operand's region, so the Linear does not quantize it (x:
     * forward; dy: backward, its region then kept in the Linear's state). */
    bool handed_off;
} tx_cuda_operand_q;

/* A Linear's (GroupedLinear's) quantization: x and w in forward, dy in
 * backward. All off = high precision. */
typedef struct tx_cuda_linear_quant {
    tx_cuda_operand_q x, w, dy;
} tx_cuda_linear_quant;

/* What prepare needs to know about one node. Tensors here carry dtype and
 * shape only (data ignored). */
typedef struct tx_cuda_te_node tx_cuda_te_node; /* a prepared node (below) */

typedef struct tx_cuda_te_desc {
    tx_te_op_id op;
    const char *name;                      /* node label, for messages */
    const tx_te_attr_value *attrs;         /* schema order, defaults filled */
    const tx_tensor *input;
    const tx_tensor *const *extra_inputs;  /* NULL entries: absent */
    int n_extra_inputs;
    const tx_tensor *const *params;
    int n_params;
    const tx_tensor *output;
    const tx_tensor *const *extra_outputs;
    int n_extra_outputs;
    bool training;
    unsigned needs;                        /* TX_TE_FOR_* the backward computes */
    const tx_cuda_linear_quant *quant;     /* Linear / GroupedLinear; NULL = none */
    int sm;                                /* device capability (as env.sm) */
    bool deterministic;
    tx_sdpa_cudnn *sdpa;                   /* env.sdpa (NULL: no cuDNN): attention checks and
                                            * builds its cuDNN plans in prepare */
    /* Hand-off fusions led by this node: the consumer Linear's prepared node
     * and where the executor keeps the address of the region it writes
     * into (read at run time: the arena is placed after prepare): that
     * Linear's state for x, its dy region for a grad_output. NULL: none. */
    tx_cuda_te_node *handoff_to;
    void *const *handoff_state;
} tx_cuda_te_desc;

/* The implementation table each op family provides (te_cuda_basic.c,
 * te_cuda_linear.c, te_cuda_attention.c). prepare returns the family's
 * private data (freed with free_priv), the state bytes and scratch bytes. */
typedef struct tx_cuda_te_impl {
    teexec_status *(*prepare)(const tx_cuda_te_desc *d, void **priv, size_t *state_bytes,
                              size_t *scratch_bytes);
    teexec_status *(*forward)(void *priv, const tx_te_fwd_args *a, void *state, void *scratch,
                              const tx_cuda_env *env);
    teexec_status *(*backward)(void *priv, const tx_te_bwd_args *a, void *state, void *scratch,
                               const tx_cuda_env *env);
    void (*free_priv)(void *priv);
} tx_cuda_te_impl;

/* Each family's table for op, or NULL when the family does not run it. */
const tx_cuda_te_impl *tx_cuda_te_basic_impl(tx_te_op_id op);
const tx_cuda_te_impl *tx_cuda_te_linear_impl(tx_te_op_id op);
const tx_cuda_te_impl *tx_cuda_te_attention_impl(tx_te_op_id op);

/* ---- nodes (te_cuda.c: dispatch over the families) ---------------------- */

teexec_status *tx_cuda_te_prepare(const tx_cuda_te_desc *d, tx_cuda_te_node **out) TX_NODISCARD;
size_t tx_cuda_te_state_bytes(const tx_cuda_te_node *n);
size_t tx_cuda_te_scratch_bytes(const tx_cuda_te_node *n);
/* Asynchronous on env->stream. `state`: the node's region (NULL when
 * state_bytes is 0); `scratch`: at least scratch_bytes, shared. */
teexec_status *tx_cuda_te_forward(tx_cuda_te_node *n, const tx_te_fwd_args *a, void *state,
                                  void *scratch, const tx_cuda_env *env) TX_NODISCARD;
teexec_status *tx_cuda_te_backward(tx_cuda_te_node *n, const tx_te_bwd_args *a, void *state,
                                   void *scratch, const tx_cuda_env *env) TX_NODISCARD;
void tx_cuda_te_node_free(tx_cuda_te_node *n);
/* For the fused kernels: the node's family table and private data (a fused
 * Linear calls its family's internal helpers on it). */
const tx_cuda_te_impl *tx_cuda_te_node_impl(const tx_cuda_te_node *n);
void *tx_cuda_te_node_priv(const tx_cuda_te_node *n);
tx_te_op_id tx_cuda_te_node_op(const tx_cuda_te_node *n);

/* ---- fused kernels of the planner's catalog (te_cuda_fused.c) ----------- */

/* A fused kernel over consecutive ops of one group, for the plan's forward
 * or backward layout entry `fusion`. It must leave exactly what the unfused
 * kernels leave: every op's output / extra outputs that anything reads, the
 * aux tensors and the Linear's state (forward), every grad (backward).
 * Prepare fails with TEEXEC_ERR_UNSUPPORTED and a sentence when the GPU has
 * no such kernel for these ops (the executor then runs them unfused and
 * records the sentence for `--explain`). `nodes[i]` are the ops' prepared
 * nodes (a fused Linear reuses its node's quantization and state layout). */
typedef struct tx_cuda_fused tx_cuda_fused;

teexec_status *tx_cuda_fused_prepare(tx_fusion_id fusion, bool backward,
                                     const tx_cuda_te_desc *const *descs,
                                     tx_cuda_te_node *const *nodes, int n,
                                     tx_cuda_fused **out) TX_NODISCARD;
size_t tx_cuda_fused_scratch_bytes(const tx_cuda_fused *f);
/* a[i], states[i]: op i's args and state region, as for the unfused calls. */
teexec_status *tx_cuda_fused_forward(tx_cuda_fused *f, const tx_te_fwd_args *const *a,
                                     void *const *states, void *scratch,
                                     const tx_cuda_env *env) TX_NODISCARD;
teexec_status *tx_cuda_fused_backward(tx_cuda_fused *f, const tx_te_bwd_args *const *a,
                                      void *const *states, void *scratch,
                                      const tx_cuda_env *env) TX_NODISCARD;
void tx_cuda_fused_free(tx_cuda_fused *f);

/* What each family implements behind tx_cuda_fused_* (te_cuda.c
 * dispatches): prepare sets *impl to NULL when the fusion is not the
 * family's, else returns NULL with *impl, *priv and *scratch_bytes set, or
 * TEEXEC_ERR_UNSUPPORTED with the sentence. */
typedef struct tx_cuda_fused_impl {
    teexec_status *(*forward)(void *priv, const tx_te_fwd_args *const *a, void *const *states,
                              void *scratch, const tx_cuda_env *env);
    teexec_status *(*backward)(void *priv, const tx_te_bwd_args *const *a, void *const *states,
                               void *scratch, const tx_cuda_env *env);
    void (*free_priv)(void *priv);
} tx_cuda_fused_impl;

typedef teexec_status *(*tx_cuda_fused_prepare_fn)(tx_fusion_id fusion, bool backward,
                                                   const tx_cuda_te_desc *const *descs,
                                                   tx_cuda_te_node *const *nodes, int n,
                                                   const tx_cuda_fused_impl **impl, void **priv,
                                                   size_t *scratch_bytes);
/* Linear fusions (te_cuda_linear_fused.c): FWD_LINEAR_BIAS_ACT,
 * FWD_LINEAR_BIAS_ADD, FWD_LINEAR_SCALE_ADD, BWD_LINEAR_ADD,
 * BWD_LINEAR_SCALE. Others (te_cuda_basic_fused.c): BWD_ACT_BIAS,
 * BWD_ADD_NORM (it also declines the hand-offs when asked directly). */
teexec_status *tx_cuda_fused_linear_prepare(tx_fusion_id fusion, bool backward,
                                            const tx_cuda_te_desc *const *descs,
                                            tx_cuda_te_node *const *nodes, int n,
                                            const tx_cuda_fused_impl **impl, void **priv,
                                            size_t *scratch_bytes) TX_NODISCARD;
/* The quantized hand-offs (te_cuda_handoff.c): FWD_NORM_QUANTIZE,
 * FWD_ACT_QUANTIZE, BWD_BIAS_QUANTIZE; consulted before the basic family. */
teexec_status *tx_cuda_fused_handoff_prepare(tx_fusion_id fusion, bool backward,
                                             const tx_cuda_te_desc *const *descs,
                                             tx_cuda_te_node *const *nodes, int n,
                                             const tx_cuda_fused_impl **impl, void **priv,
                                             size_t *scratch_bytes) TX_NODISCARD;
teexec_status *tx_cuda_fused_basic_prepare(tx_fusion_id fusion, bool backward,
                                           const tx_cuda_te_desc *const *descs,
                                           tx_cuda_te_node *const *nodes, int n,
                                           const tx_cuda_fused_impl **impl, void **priv,
                                           size_t *scratch_bytes) TX_NODISCARD;

#endif
