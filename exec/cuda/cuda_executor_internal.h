/*
 * cuda_executor_internal.h - what the CUDA executor's two halves share: the
 * executor's state (struct tx_cuda_executor and its per-value / per-node
 * records) and small helpers. cuda_executor_build.c creates it (lower, infer,
 * plan, prepare, one allocation); cuda_executor_run.c runs it (forward, loss,
 * backward, optimizer, CUDA graphs, profile, results).
 *
 * Ownership and thread-safety: as cuda_executor.h (the graph owns everything
 * here; one host thread at a time).
 */
#ifndef TEEXEC_EXEC_CUDA_CUDA_EXECUTOR_INTERNAL_H
#define TEEXEC_EXEC_CUDA_CUDA_EXECUTOR_INTERNAL_H

#include "exec/cuda/cuda_executor.h"

#include "base/shape.h"
#include "exec/cuda/std_cuda.h"
#include "exec/cuda/te_cuda.h"
#include "exec/recipe_delayed.h"
#include "exec/run_profile.h"
#include "exec/value_plan.h"
#include "import/lower.h"
#include "kernels/cuda/optim.h"

#include <cuda_runtime_api.h>
#include <time.h>

/* Setup phases timed by tx_cuda_executor_create (names in gx_setup_phase). */
enum {
    GX_SETUP_DEVICE,  /* device, streams, handles */
    GX_SETUP_PLAN,    /* values typed, fuser plan, node preparation */
    GX_SETUP_KERNELS, /* kernels prepared: GEMM selection, cuDNN graphs */
    GX_SETUP_MEMORY,  /* the arena placed and allocated */
    GX_SETUP_UPLOAD,  /* weights and constants on the device (or shared) */
    GX_SETUP_PHASES
};

static inline const char *gx_setup_phase(int i)
{
    static const char *const names[GX_SETUP_PHASES] = {"device", "plan", "kernels", "memory",
                                                       "upload"};
    return i >= 0 && i < GX_SETUP_PHASES ? names[i] : "?";
}

/* A monotonic wall clock in milliseconds. */
static inline double gx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* cuBLASLt's workspace as TE sizes it on Hopper (32 MiB + 1 KiB). */
#define GEMM_WORKSPACE ((size_t)32 * 1024 * 1024 + 1024)

typedef enum gn_kind { GN_FOLDED, GN_TE, GN_STD } gn_kind;

typedef struct cx_value {
    tx_tensor dev;             /* device view: dtype (compute-mapped), dims, data */
    teexec_dtype model_dtype;  /* the dtype inference gave (what callers see) */
    const tx_tensor *host;     /* host value known before running (folded / initializer) */
    bool produced;             /* written by a node that runs */
    int32_t param;             /* index into params, or -1 */
    bool req;                  /* carries a gradient */
    tx_tensor grad;            /* device grad (dev's dtype) when req */
    bool grad_live;            /* backward simulation / run: the grad buffer holds a value */
    bool shared;               /* dev.data is the model's shared copy (exec/weight_share.h):
                                * read only, uploaded by whoever acquired it first */
} cx_value;

typedef struct cx_node {
    gn_kind kind;
    const tx_ir_node *ir;
    int32_t index;
    bool needs_bwd;
    /* te.ops */
    const tx_te_op_schema *s;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    int n_params;
    size_t n_slots;
    tx_cuda_te_node *te;
    tx_cuda_te_desc desc;
    const tx_tensor *slot_in[64];  /* main, extras, params (NULL = absent) */
    tx_tensor *slot_out[1 + TX_TE_MAX_EXTRA];
    tx_tensor aux[TX_TE_MAX_EXTRA];
    tx_tensor *auxp[TX_TE_MAX_EXTRA];
    int n_aux;
    tx_cuda_linear_quant q;
    size_t state_bytes;
    void *state;
    /* a Linear's handed-off dy (its producer's fused backward kernel
     * writes it, this node's backward reads it): its own buffer, live
     * from the producer's backward step to this node's, not for the whole
     * run as the state is; dy_producer -1: none */
    size_t dy_region_bytes;
    void *dy_region;
    int32_t dy_producer;
    tx_te_fwd_args fa;
    tx_te_bwd_args ba;
    /* its backward's saved context (tx_te_setup_context over fa: pointers
     * to value and aux tensors, collected once before the arena is placed,
     * whose lifetimes follow it) */
    const tx_tensor *saved[TX_TE_MAX_SAVED + 64];
    int n_saved;
    const tx_tensor *gout[1 + TX_TE_MAX_EXTRA];
    tx_tensor *gin[64];
    /* standard */
    tx_cuda_std_node *std;
    bool alias;                    /* standard op that only reinterprets its input */
    bool te_alias;                 /* te.ops Reshape sharing its input's buffer: no forward
                                    * kernel (place_memory) */
    const tx_tensor **s_in;
    tx_tensor **s_out;
    const tx_tensor **s_gout;
    tx_tensor **s_gin;
    /* both: per input slot, a temporary grad to add into the value's grad
     * after the call (fan-out); data NULL = written directly */
    tx_tensor *acc;
    /* fused kernels */
    int32_t fwd_fused, bwd_fused; /* index into g->fused led by this node, or -1 */
    bool zero_gout0;              /* main output's grad is zero: cleared before backward */
    /* a Linear whose dgrad also runs the backward of the GELU(tanh) and
     * Bias before it (cuBLASLt's DGELU_BGRAD epilogue): their node indices,
     * or -1; those two nodes are then bwd_covered */
    int32_t dgelu_act, dgelu_bias;
    /* where the plan has a BackwardLinearDGeluBias kernel ending at this
     * Linear: its group and first op (group -1: none); bound to
     * dgelu_act/dgelu_bias once the backward is wired */
    int32_t dgelu_plan_group, dgelu_plan_first;
    bool fwd_covered, bwd_covered;
    uint64_t rng_base;
    /* its forward's and backward's steps in the lifetimes' schedule
     * (place_memory; bstep -1 or meaningless without a backward) */
    int32_t fstep, bstep;
} cx_node;

/* An arena buffer dead after step `after` (TEEXEC_CUDA_POISON_DEAD). */
typedef struct cx_poison {
    void *ptr;
    size_t bytes;
    int32_t after;
} cx_poison;

typedef struct cx_fused {
    tx_cuda_fused *f;
    tx_fusion_id fusion;
    bool backward;
    int32_t n;
    int32_t nodes[8];
} cx_fused;

typedef struct cx_param {
    int32_t value;
    const char *name;
    float *master;             /* FP32 (== dev data when the compute dtype is FLOAT) */
    float *m, *v;
} cx_param;

typedef struct prof_row {
    char name[96];
    int32_t group;
    bool backward;
    uint64_t calls;
    double ms;
    /* of those, the executor's first call (one-time costs: cuBLASLt's
     * heuristic queries, cuDNN plans, lazy module loading), which the
     * table leaves out once later calls exist */
    uint64_t first_calls;
    double first_ms;
} prof_row;

struct tx_cuda_executor {
    tx_cuda_executor_config cfg;
    teexec_train_options topt;
    char *recipe_name;
    const teexec_model *lowered; /* the model's lowered copy (exec/prepare.h), borrowed */
    const struct tx_prepared *prep; /* its preparation (user names), NULL for a lowered copy */
    /* the lowered model's value planner (exec/value_plan.h, owned: its
     * decoded initializers are the host copies uploaded, some released by
     * drop_host_weights) and its plan for the configured shapes (owned) */
    tx_value_planner *vp;
    tx_value_plan plan;
    const tx_ir_graph *ir;
    tx_fuser_plan *fplan;
    teexec_dtype compute;      /* UNDEFINED: keep the model's */
    cx_value *vals;
    cx_node *nodes;
    size_t n_nodes;
    cx_fused *fused;
    size_t n_fused, cap_fused;
    cx_param *params;
    size_t n_params;
    tx_param_source *sources;  /* prep's (borrowed) or own_sources */
    size_t n_sources;
    bool own_sources;
    int32_t loss_value;
    int32_t *in_values;        /* per graph input (model order) */
    size_t n_in;
    /* DotProductAttention's cache mode: each graph input fed as cache_len,
     * with the new tokens and the capacity of the attention it bounds, for
     * the range check of a run (cuda_executor_run.c) */
    struct gx_cache_check {
        size_t input;
        int64_t s_q, capacity;
        const char *node;
    } *cache_checks;
    size_t n_cache_checks;
    /* device */
    int device;                /* the CUDA device ordinal it was made on */
    struct tx_ws_lease *weights; /* its shared weights (inference), or NULL */
    size_t delayed_bytes;      /* delayed_dev's size */
    cudaStream_t stream;
    bool own_stream;
    tx_cuda_env env;
    tx_gemm_lt *gemm;
    tx_sdpa_cudnn *sdpa;
    void *arena;
    size_t arena_bytes;
    /* how the arena's lifetimes were set (place_memory; read with
     * tx_cuda_executor_memory) */
    tx_cuda_memory_report mem;
    int32_t loss_step;         /* the loss's step in the lifetimes' schedule */
    /* TEEXEC_CUDA_POISON_DEAD: the buffers to poison, by step; the next
     * one of the current run */
    bool poison_dead;
    cx_poison *poison;
    size_t n_poison, poison_next;
    size_t arena_unshared_bytes; /* what it would take without lifetime sharing */
    void *scratch;
    size_t scratch_bytes;
    void **staging;            /* per input: device staging buffer when converted */
    void **out_staging;        /* per graph output: the same for the way back */
    float *target;             /* MSE target / xent labels (int64) */
    double *loss_partials;
    double *loss_dev;
    float *xent_ws;
    float *xent_loss;
    tx_cuda_optim_tensor *opt_dev;
    uint64_t opt_blocks;
    double *clip_partials;     /* gradient clipping (topt.clip_grad_norm > 0): scratch */
    double *clip_coef;         /* [factor, norm] of the last step */
    /* fp8-delayed: one scale and amax per (node, operand) slot */
    tx_delayed_state delayed;
    float *delayed_dev;        /* [count] scales, then [count] amaxes */
    uint32_t n_delayed;
    /* CUDA graphs */
    cudaGraphExec_t graph_exec;
    bool graph_ok;             /* capture allowed for this graph */
    const char *graph_off_why;
    uint64_t steps;
    bool stepped;
    bool inputs_bound, target_bound; /* on the device from an earlier call */
    /* profile: prof is the session-wide table (cfg.profile, every run);
     * run_prof the current run's alone when its run options ask for one
     * (run_prof_on, set for that run: it runs uncaptured) */
    prof_row *prof;
    size_t n_prof;
    tx_run_profile run_prof;
    bool run_prof_on;
    /* wall time of the executor's setup phases (tx_cuda_executor_create), for
     * the profile: a new input shape pays all of them once */
    double setup_ms[GX_SETUP_PHASES];
    uint64_t calls_done;       /* finished run / step calls */
    cudaEvent_t ev[2];
    /* a caller's stream (tx_gpu_run_io): [0] recorded on it before the
     * run, [1] on ours after; made on first use */
    cudaEvent_t io_ev[2];
    /* cancellation (tx_cuda_executor_set_run_options): the current run's
     * options, and whether run_body is being captured (no cancel points
     * inside a capture: the captured graph must be whole) */
    const teexec_run_options *run_opts;
    bool capturing;
    /* data parallel: the gradient hook (tx_cuda_executor_set_grad_hook) */
    tx_gpu_grad_hook grad_hook;
    void *grad_hook_ctx;
};


/* ---- helpers ---- */

static inline teexec_status *cuda_err(cudaError_t e, const char *what)
{
    return tx_error(TEEXEC_ERR_DEVICE, "cuda executor: %s: %s (%s)", what, cudaGetErrorName(e),
                    cudaGetErrorString(e));
}

#define CU(call, what)                                                                     \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) return cuda_err(e_, what);                                  \
    } while (0)


static inline bool is_float(teexec_dtype d)
{
    return d == TEEXEC_DTYPE_FLOAT || d == TEEXEC_DTYPE_BFLOAT16 || d == TEEXEC_DTYPE_FLOAT16;
}

static inline teexec_dtype map_dtype(const tx_cuda_executor *g, teexec_dtype d)
{
    if (g->compute != TEEXEC_DTYPE_UNDEFINED && is_float(d)) return g->compute;
    return d;
}

static inline teexec_status *node_err(const tx_ir_node *n, teexec_status *st)
{
    if (!st || teexec_status_node(st)) return st;
    return tx_status_with_node(tx_status_prefix(st, "node \"%s\" (%s)", n->label, n->op_type),
                               n->label);
}



static inline size_t tensor_bytes(const tx_tensor *t)
{
    size_t es = tx_dtype_elem_size(t->dtype);
    return (size_t)t->numel * (es ? es : 1);
}

/* A shape-only tensor (data set when the arena is placed). */
static inline teexec_status *shape_tensor(tx_tensor *t, teexec_dtype dt, const tx_shape *sh)
{
    return tx_tensor_wrap(t, dt, sh->rank, sh->dims, NULL);
}

#endif
