/*
 * plan.h - the planner: from a lowered graph (te.ops basic ops and
 * standard ops) and a request (recipe, device, training or inference, which
 * inputs need gradients, the value types), a fuser plan:
 *
 *   groups     maximal chains of te.ops basic ops linked by main
 *              input/output (extra inputs/outputs for residuals and forks);
 *              every other node (attention, an unlowered standard op) is a
 *              group of its own                         (planner/groups.c)
 *   layouts    per group three passes over its basic-op list, after TE's
 *              OperationFuser: joint fusions (forward+backward, private
 *              saved layout) first, then forward-only and backward-only
 *              fusions chosen independently    (planner/fuse_*.c, catalog in
 *                                                     planner/fuse_catalog.c)
 *   declines   every fusion whose pattern matched but which does not apply,
 *              with its unsupported_reason (a sentence: recipe, dtype, shape
 *              divisibility, device capability, determinism, format at an
 *              edge, which ops need gradients)
 *   quant      per GEMM operand: format, usage, producer (hand-off), scale
 *              layout, delayed-scaling slot             (planner/quant_plan.c)
 *   memory     lifetimes of activations, saved tensors, gradients and
 *              workspaces over the forward+backward schedule, arena offsets,
 *              peaks                                    (planner/memory_plan.c)
 *
 * The planner launches nothing and allocates no device memory; the CPU and
 * CUDA backends execute what it decides. Layer rule: planner uses base/,
 * format/ and import/, never kernels/ or exec/ (scripts/check_layers.py).
 *
 * Ownership: a tx_fuser_plan owns everything it points to (free with
 * tx_fuser_plan_free); it borrows nothing from the request after
 * tx_fuser_plan_build returns (the request's arrays are copied).
 * Thread-safety: building is pure over its arguments; a built plan is
 * immutable and may be read from any thread. A tx_plan_cache is used by one
 * thread at a time.
 */
#ifndef TEEXEC_PLANNER_PLAN_H
#define TEEXEC_PLANNER_PLAN_H

#include "base/quant_config.h"
#include "base/status.h"
#include "format/te_schema.h"
#include "import/ir.h"
#include "import/shape_infer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- recipe ---------------------------------------------------------------- */

typedef enum tx_recipe_kind {
    TX_RECIPE_NONE = 0,
    TX_RECIPE_FP8_DELAYED,
    TX_RECIPE_FP8_CURRENT,
    TX_RECIPE_FP8_BLOCK,
    TX_RECIPE_MXFP8,
    TX_RECIPE_NVFP4
} tx_recipe_kind;

typedef struct tx_recipe {
    tx_recipe_kind kind;
    /* FP8 formats: E4M3 everywhere, or HYBRID: E4M3 forward, E5M2 grads.
     * As TE: HYBRID by default for fp8-delayed and fp8-current, E4M3 for
     * mxfp8 (":e4m3" / ":hybrid" for the other); the others are E4M3. */
    bool hybrid;
    int amax_history_len;     /* fp8-delayed; default 1024 */
    bool mxfp8_2d_weights;    /* mxfp8: 32x32 weight blocks */
    bool nvfp4_rht;           /* nvfp4: random Hadamard on wgrad operands (default on) */
    bool nvfp4_stochastic;    /* nvfp4: stochastic rounding of grads (default on) */
    bool nvfp4_2d_weights;    /* nvfp4: 16x16 weight blocks (default on) */
    /* Scales rounded down to a power of two (TE's power_2_scale): fp8-block
     * default on (TE's Float8BlockScaling unless
     * NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1), fp8-current default off
     * (NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES); option pow2=0|1. */
    bool pow2_scales;
    /* Keep the first and the last GEMM (Linear / GroupedLinear in node
     * order) in compute_dtype, as TE users often do for the embedding-side
     * and logits-side layers (default off; option first_last_hp=1). */
    bool keep_first_last_hp;
    /* The high-precision dtype around the GEMMs: BF16 for the quantized
     * recipes; for NONE the model's own dtype unless the user casts. */
    teexec_dtype compute_dtype;
} tx_recipe;

/* Parses "none", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8",
 * "nvfp4", each optionally followed by ":hybrid" or ":e4m3" (the grad
 * format of fp8-delayed, fp8-current and mxfp8) and ",key=value" options
 * (history=N, 2d=0|1, rht=0|1, sr=0|1, pow2=0|1, first_last_hp=0|1,
 * dtype=bf16|fp16|fp32). Defaults as TE's. BAD_ARGUMENT with the accepted
 * list on anything else. */
teexec_status *tx_recipe_parse(const char *text, tx_recipe *out) TX_NODISCARD;
/* "mxfp8", "fp8-current:e4m3", "mxfp8:hybrid", ... (static or buf): a
 * grad format other than the recipe's default is written. */
const char *tx_recipe_name(const tx_recipe *r, char *buf, size_t size);

/* ---- device ---------------------------------------------------------------- */

typedef struct tx_device_caps {
    char name[32];        /* "cpu", "sm_90", "sm_100", or the GPU's name */
    int sm;               /* compute capability x10 (90, 100); 0 = CPU */
    bool fp8_gemm;        /* native FP8 per-tensor GEMMs (sm >= 89) */
    bool fp8_block_gemm;  /* native 1x128/128x128 scaled GEMMs (cuBLASLt, sm_90+) */
    bool mx_gemm;         /* native MXFP8 / NVFP4 block-scaled GEMMs (sm >= 100) */
    size_t memory_bytes;  /* 0 = unknown */
} tx_device_caps;

/* "cpu", "sm_90" (= "h100"/"h200"), "sm_100" (= "b200"), "sm_120". The
 * real device's caps come from the CUDA backend, which fills the struct
 * itself. */
teexec_status *tx_device_caps_parse(const char *text, tx_device_caps *out) TX_NODISCARD;

/* ---- request ------------------------------------------------------------- */

typedef struct tx_plan_request {
    tx_recipe recipe;
    tx_device_caps device;
    bool training;
    bool deterministic;   /* no scheduling-dependent kernels (float atomics) */
    /* Per graph input that the caller feeds (graph inputs that are not
     * initializers, in graph order): does it need a gradient? NULL = none. */
    const bool *input_needs_grad;
    size_t n_inputs;
    bool params_frozen;   /* true: no parameter gradients (fine-tuning adapters, eval) */
    /* dtype and shape of every value of g (index = value index), from shape
     * inference; borrowed during the build only. */
    const tx_infer_value *vals;
    size_t n_vals;
    /* Leave the memory plan empty: for an executor that places its own
     * buffers (the CPU session) and may run graphs whose shapes depend on
     * data, which the memory plan cannot size. */
    bool skip_memory;
} tx_plan_request;

/* ---- fusion catalog ----------------------------------------------------- */

typedef enum tx_fusion_pass { TX_PASS_JOINT, TX_PASS_FORWARD, TX_PASS_BACKWARD } tx_fusion_pass;

typedef enum tx_fusion_id {
    TX_FUSION_NONE = 0,            /* a basic op's own kernel */
    /* joint (forward + backward, private saved layout) */
    TX_FUSION_GROUPED_MLP,         /* GroupedLinear, ScaledSwiGLU|ScaledSReLU, GroupedLinear */
    TX_FUSION_DENSE_MLP,           /* single-group specialization: Linear, [Bias,] act, Linear */
    /* forward only (leave the unfused saved contexts) */
    TX_FUSION_FWD_NORM_QUANTIZE,   /* LayerNorm|RMSNorm writing the next Linear's input format */
    TX_FUSION_FWD_LINEAR_BIAS_ACT, /* Linear, Bias[, GELU|ReLU] via GEMM epilogue */
    TX_FUSION_FWD_LINEAR_BIAS_ADD, /* Linear[, Bias], AddExtraInput (accumulate into residual) */
    TX_FUSION_FWD_LINEAR_SCALE_ADD,/* Linear, ConstantScale, AddExtraInput */
    TX_FUSION_FWD_ACT_QUANTIZE,    /* activation writing the next Linear's input format */
    /* backward only (read exactly the unfused saved contexts) */
    TX_FUSION_BWD_LINEAR_ADD,      /* MakeExtraOutput, Linear: dgrad accumulates into the fork's grad */
    TX_FUSION_BWD_LINEAR_SCALE,    /* Linear, ConstantScale: alpha = s */
    TX_FUSION_BWD_ACT_BIAS,        /* Bias, GELU|ReLU|SiLU...: dact + dbias (+ grad quantize) */
    TX_FUSION_BWD_ADD_NORM,        /* MakeExtraOutput, RMSNorm|LayerNorm: norm bwd + extra grad */
    TX_FUSION_BWD_BIAS_QUANTIZE,   /* Bias: dbias + quantize dy for the previous Linear */
    TX_FUSION_BWD_LINEAR_DGELU_BIAS, /* Bias, GELU(tanh), Linear: dgrad GEMM's dGELU+dbias epilogue */
    TX_FUSION_BWD_DACT_DBIAS,      /* Bias, activation: dact + dbias, grads in high precision */
    TX_FUSION_COUNT
} tx_fusion_id;

/* Bit of a recipe kind in tx_fusion_info.recipes. */
#define TX_RECIPE_BIT(kind) (1u << (unsigned)(kind))
#define TX_RECIPES_ALL 0x3fu

typedef struct tx_fusion_info {
    tx_fusion_id id;
    const char *name;     /* "ForwardLinearBiasAdd", ... */
    tx_fusion_pass pass;
    const char *pattern;  /* "Linear [Bias] AddExtraInput" (forward order) */
    const char *summary;  /* what the fused kernel does, one line */
    /* What the fused kernels (CPU and CUDA) support; fuse_catalog.c says
     * why. A plan never asks a fused kernel for more. */
    unsigned recipes;       /* TX_RECIPE_BIT of each recipe kind it runs under */
    bool deterministic;     /* same bits run to run (no float atomics) */
    bool grad_e4m3_only;    /* an MXFP8 grad it writes is E4M3 (never E5M2) */
    bool needs_native_gemm; /* only where the recipe's GEMM is native */
    bool cuda_only;         /* a GPU kernel (a cuBLASLt epilogue); the CPU declines it */
} tx_fusion_info;

/* Static; NULL when out of range. */
const tx_fusion_info *tx_fusion_info_of(tx_fusion_id id);

/* ---- groups and layouts ------------------------------------------------------ */

typedef enum tx_group_kind {
    TX_GROUP_CHAIN,      /* te.ops basic ops (a DotProductAttention alone is a chain of one) */
    TX_GROUP_STANDARD    /* one standard ONNX node, run by the backend's op kernel */
} tx_group_kind;

/* One kernel of a layout: `count` consecutive basic ops of the group from
 * `first` (indices into the group's ops), run by fusion `fusion` (NONE:
 * count is 1 and the op's own kernel runs). */
typedef struct tx_plan_kernel {
    tx_fusion_id fusion;
    int32_t first;
    int32_t count;
} tx_plan_kernel;

/* One kernel an executor ran for a CHAIN group: the group's id in the
 * fuser plan and the kernel (fusion, first op, op count) -- the debug
 * record that tests compare with the plan's layouts. */
typedef struct tx_run_kernel {
    int32_t group;
    tx_plan_kernel k;
} tx_run_kernel;

typedef struct tx_plan_group {
    int32_t id;
    tx_group_kind kind;
    int32_t *nodes;            /* graph node indices, chain (forward) order */
    int32_t n_nodes;
    tx_te_op_id *ops;          /* CHAIN: the basic op of each node (NULL for STANDARD) */
    /* CHAIN: value indices. main_input feeds ops[0]'s main input, main_output
     * is the last op's main output. extra_inputs: every value an op reads
     * besides its main input and parameters that no op of the chain produces
     * (residuals from other groups, split_sizes, scales, k/v), first use
     * order, each once. extra_outputs: every value the chain produces besides
     * main_output that something outside the chain reads (a MakeExtraOutput
     * fork consumed by another group or a graph output). STANDARD groups
     * leave these -1 / empty. */
    int32_t main_input, main_output;
    int32_t *extra_inputs;     int32_t n_extra_inputs;
    int32_t *extra_outputs;    int32_t n_extra_outputs;
    /* Index of the first op whose backward must run (TE's
     * first_op_requiring_backward): n_nodes when nothing before the group's
     * end needs a gradient or when not training. */
    int32_t first_op_requiring_backward;
    tx_plan_kernel *joint;     int32_t n_joint;    /* joint fusions applied */
    tx_plan_kernel *forward;   int32_t n_forward;  /* covers every op, forward order */
    tx_plan_kernel *backward;  int32_t n_backward; /* covers ops >= first_op_requiring_backward,
                                                      forward order (run in reverse) */
} tx_plan_group;

/* A fusion whose pattern matched at `first_op` of `group` but does not
 * apply. */
typedef struct tx_plan_decline {
    int32_t group;
    int32_t first_op;
    tx_fusion_id fusion;
    char *reason;
} tx_plan_decline;

/* ---- quantization plan --------------------------------------------------- */

typedef enum tx_qoperand { TX_QOP_INPUT, TX_QOP_WEIGHT, TX_QOP_GRAD_OUTPUT } tx_qoperand;

typedef struct tx_plan_quant {
    int32_t node;             /* the Linear / GroupedLinear node */
    tx_qoperand operand;
    bool quantized;           /* false: stays in compute_dtype (why says why) */
    tx_qkind kind;            /* when quantized */
    teexec_dtype data_dtype;  /* FLOAT8E4M3FN, FLOAT8E5M2, FLOAT4E2M1 */
    int32_t block_rows, block_cols; /* 1x1 per-tensor, 1x128, 128x128, 1x32, 32x32, 1x16, 16x16 */
    unsigned usage;           /* TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE, as needed */
    int32_t producer;         /* node whose kernel writes it already quantized (hand-off),
                                 -1 = a quantize kernel before the GEMM */
    tx_scale_layout scale_layout;
    int32_t delayed_slot;     /* fp8-delayed: index into the amax/scale state; -1 otherwise */
    bool native;              /* GEMM runs natively on the device; false = exact emulation */
    char *why;                /* NULL, or the reason for a choice (annotation, override) */
} tx_plan_quant;

/* ---- memory plan -------------------------------------------------------------- */

typedef enum tx_mem_kind { TX_MEM_ACTIVATION, TX_MEM_SAVED, TX_MEM_GRAD, TX_MEM_WORKSPACE } tx_mem_kind;

/* One arena tensor, live over schedule steps [start, end] (forward kernels
 * are steps 0..F-1 in order, then backward kernels F..F+B-1). */
typedef struct tx_mem_tensor {
    char *name;
    tx_mem_kind kind;
    size_t bytes;
    int32_t start, end;
    size_t offset;            /* in the arena, aligned */
    /* What it holds, for the executors that place their buffers from it
     * (exec/cuda): the graph value (an activation, a saved value, or the
     * gradient of `value` for TX_MEM_GRAD), else -1; the node whose
     * kernel writes it for a saved aux tensor (`aux`: its index in the
     * op's schema) or a saved quantized copy (aux -1), else -1. */
    int32_t value, node, aux;
} tx_mem_tensor;

typedef struct tx_memory_plan {
    tx_mem_tensor *tensors;   size_t n_tensors;
    size_t alignment;
    size_t arena_bytes;       /* training arena (inference arena when not training) */
    size_t peak_inference;    /* max over forward steps of live bytes without saving */
    size_t peak_training;     /* max over forward+backward steps of live bytes */
    size_t sum_bytes;         /* sum of all tensor sizes (the no-reuse baseline) */
    size_t param_bytes;       /* parameters (+ their grads when training): outside the arena */
} tx_memory_plan;

/* ---- the plan ------------------------------------------------------------------ */

typedef struct tx_fuser_plan {
    tx_recipe recipe;
    tx_device_caps device;
    bool training, deterministic;
    tx_plan_group *groups;     size_t n_groups;
    int32_t *group_of_node;    /* per graph node: its group */
    tx_plan_decline *declines; size_t n_declines;
    tx_plan_quant *quant;      size_t n_quant;
    tx_memory_plan memory;
} tx_fuser_plan;

teexec_status *tx_fuser_plan_build(const tx_ir_graph *g, const tx_plan_request *req,
                                   tx_fuser_plan **out) TX_NODISCARD;
void tx_fuser_plan_free(tx_fuser_plan *p);

/* Pieces tx_fuser_plan_build runs in order (each its own file), exposed for
 * tests. Each fills its part of p from g, req and what earlier steps put in p. */
teexec_status *tx_plan_groups(const tx_ir_graph *g, const tx_plan_request *req,
                              tx_fuser_plan *p) TX_NODISCARD;
teexec_status *tx_plan_fusions(const tx_ir_graph *g, const tx_plan_request *req,
                               tx_fuser_plan *p) TX_NODISCARD;
teexec_status *tx_plan_quantization(const tx_ir_graph *g, const tx_plan_request *req,
                                    tx_fuser_plan *p) TX_NODISCARD;
teexec_status *tx_plan_memory(const tx_ir_graph *g, const tx_plan_request *req,
                              tx_fuser_plan *p) TX_NODISCARD;

/* Printable names, static: "chain"/"standard", "joint"/"forward"/"backward",
 * "input"/"weight"/"grad_output", "activation"/"saved"/"grad"/"workspace". */
const char *tx_group_kind_name(tx_group_kind k);
const char *tx_fusion_pass_name(tx_fusion_pass p);
const char *tx_qoperand_name(tx_qoperand q);
const char *tx_mem_kind_name(tx_mem_kind k);

/* Adds a decline (copies reason). */
teexec_status *tx_plan_add_decline(tx_fuser_plan *p, int32_t group, int32_t first_op,
                                   tx_fusion_id fusion, const char *reason) TX_NODISCARD;

/* ---- output ------------------------------------------------------------------- */

/* Human-readable plan (`teexec plan`): groups with forward and backward
 * layouts, quantization per operand, memory peaks; with `explain`, every
 * decline with its reason. Malloc'd NUL-terminated text in *out. */
teexec_status *tx_fuser_plan_text(const tx_fuser_plan *p, const tx_ir_graph *g, bool explain,
                                  char **out) TX_NODISCARD;
/* The same as one JSON object (`teexec plan --json`; golden tests pin it). */
teexec_status *tx_fuser_plan_json(const tx_fuser_plan *p, const tx_ir_graph *g,
                                  char **out) TX_NODISCARD;
/* The same as a Graphviz digraph (`teexec plan --dot`, plan_dot.c): a
 * cluster per group with its forward and backward layouts side by side,
 * quantized GEMM operands as edges labelled with their format, declined
 * fusions as notes with their reasons. Malloc'd NUL-terminated text. */
teexec_status *tx_fuser_plan_dot(const tx_fuser_plan *p, const tx_ir_graph *g,
                                 char **out) TX_NODISCARD;

/* ---- cache --------------------------------------------------------------------- */

/* Plans keyed on: input shapes and dtypes, the whole recipe (every field, not
 * just its kind), training vs inference, which inputs need grads, frozen
 * params, determinism and the device caps. Bounded: past `capacity` the entry
 * inserted longest ago is dropped (plan_cache.h: entries, payloads, eviction). */
typedef struct tx_plan_cache tx_plan_cache;

teexec_status *tx_plan_cache_create(size_t capacity, tx_plan_cache **out) TX_NODISCARD;
void tx_plan_cache_free(tx_plan_cache *c);
/* The cached plan for (g, req), building and inserting it when absent.
 * *hit (may be NULL) says whether it was cached. The plan stays owned by
 * the cache (valid until dropped: at most `capacity` later inserts). */
teexec_status *tx_plan_cache_get(tx_plan_cache *c, const tx_ir_graph *g,
                                 const tx_plan_request *req, const tx_fuser_plan **out,
                                 bool *hit) TX_NODISCARD;

#endif
