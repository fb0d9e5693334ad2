/*
 * session_internal.h - what a teexec_session holds: the model it runs, a
 * backend instance, one kernel per node, the planner that types and folds
 * its values (exec/value_plan.h: the decoded initializers, the inputs' value
 * indices), and its per-shape plans in the one plan cache
 * (planner/plan_cache.h): a tx_plan per input-shape signature as the
 * entry's payload, its fuser plan as the entry's plan.
 *
 * A plan (tx_plan) is everything that depends on the input shapes: the
 * value plan (exec/value_plan.h: the inferred dtype/shape of every value,
 * the values known before running -- initializers, Constant/Shape/Size
 * outputs and small subgraphs over them, folded at plan time -- and which
 * nodes are therefore skipped at run time), the buffer plan: one arena with
 * an offset per intermediate value, reused across values whose lifetimes do
 * not overlap, and the fuser plan (planner/plan.h) whose CHAIN groups the
 * run executes. Values whose shape depends on data only known at run time
 * are allocated during the run.
 *
 * Ownership: the session owns its plans, the arenas and its planner (with
 * the decoded initializers); the model must outlive the session.
 * Thread-safety: one thread at a time per session (plans are added to the
 * cache during runs; each session has its own caches).
 *
 * When plans are made: creating a session plans the declared input shapes
 * (symbolic dims from the options) -- the CPU plan and, for a CUDA session,
 * the device executor -- so the first run with them plans nothing; a run
 * with another signature plans it then. A CUDA session's executors type and
 * fold their values with planners of their own (exec/cuda/cuda_executor.h).
 */
#ifndef TEEXEC_EXEC_SESSION_INTERNAL_H
#define TEEXEC_EXEC_SESSION_INTERNAL_H

#include "base/block_cache.h"
#include "exec/backend.h"
#include "exec/model_internal.h"
#include "exec/recipe_delayed.h"
#include "exec/run_profile.h"
#include "exec/session_state.h"
#include "exec/shape_buckets.h"
#include "exec/value_plan.h"
#include "import/shape_infer.h"
#include "planner/plan.h"

#include <stdbool.h>
#include <stddef.h>

/* Plans kept per session; past this, the one made longest ago is dropped
 * (plan_cache.h; a server fed ever-new sequence lengths must not grow
 * without bound). */
#define TX_MAX_PLANS 32u

typedef struct tx_plan {
    /* (its input signature is the cache entry's key) */
    tx_value_plan typed;      /* per value: dtype, shape, known value; per node: skip */
    size_t *offset;           /* per value: arena offset, or SIZE_MAX */
    void *arena;              /* NULL in a CUDA session (plan_only) */
    size_t arena_bytes;
    /* The fuser plan for this signature (planner/plan.h), and how each of
     * its CHAIN groups runs (exec/session_groups.h); NULL in a CUDA
     * session (plan_only). */
    tx_fuser_plan *fplan;
    struct tx_sgroups *sg;
} tx_plan;

struct teexec_session_options {
    teexec_device device;
    int threads;
    char **dim_names;
    int64_t *dim_values;
    size_t n_dims;
    char *recipe;            /* NULL = "none" */
    bool deterministic;
    bool no_cuda_graphs;
    bool profile;
    teexec_dtype dtype;      /* UNDEFINED = the model's */
    void *cuda_stream;       /* the caller's cudaStream_t, or NULL: the session's own */
    size_t device_memory_limit; /* CUDA sessions: bytes (exec/device_budget.h), 0 = none */
    tx_buckets buckets;      /* symbolic dims padded up before planning (shape_buckets.h) */
    teexec_comm *comm;       /* tensor-parallel group (borrowed), NULL = world size 1 */
};

/* CUDA sessions keep one executor per input-shape signature (each with its
 * own captured CUDA graph) as the payloads of a plan cache; past this many
 * the one made longest ago is dropped. */
#define TX_MAX_CUDA_EXECUTORS 4u

struct tx_cuda_executor;


struct teexec_session {
    /* What runs: the user's model's lowered copy (exec/prepare.h), which
     * `g` and every node, value and file reference below belong to. */
    const teexec_model *model;
    /* The model the user created the session with: input names and the
     * file named in messages. */
    const teexec_model *user_model;
    const tx_ir_graph *g;
    tx_backend be;
    tx_op_fn *fns;           /* per node */
    /* CUDA sessions: the options that shape an executor, and the executors
     * made so far with their input shapes (n_in each). */
    bool cuda;
    bool plan_only;          /* CUDA sessions: their CPU plans get no host
                              * activation arena (the executors run) */
    teexec_session_options *gpu_opts;
    struct tx_plan_cache *gpu;      /* payloads: tx_cuda_executor (exec/session_cuda.c) */
    struct tx_cuda_executor *last_gpu;  /* the executor of the last run (in `gpu`) */
    /* the executors `gpu` holds, oldest insert first (the cache's eviction
     * order); one more while a new one is inserted */
    struct tx_cuda_executor *gpu_live[TX_MAX_CUDA_EXECUTORS + 1];
    size_t n_gpu_live;
    uint64_t cuda_host_copies;      /* host<->device copies of runs' inputs and outputs */
    char *cuda_poisoned;            /* why an earlier run's device failure left it unusable */
    bool cuda_fault_next;           /* test seam: fail the next run as a device error */
    /* CPU sessions: the recipe and determinism every fuser plan is built
     * for, the fp8-delayed scaling state (one per session, rolled after
     * each run as TE does under fp8_autocast), the number of runs so far
     * and the kernels of the last run (tx_session_last_kernels). */
    tx_recipe recipe;
    bool deterministic;
    /* CPU sessions: large buffers a run freed, kept for the next run
     * (base/block_cache.h; bound to the running thread by run_entry) */
    tx_block_cache blocks;
    tx_delayed_state delayed;
    bool has_delayed;
    uint64_t n_runs;
    tx_run_kernel *trace;
    size_t n_trace, cap_trace;
    const tx_fuser_plan *last_fplan;   /* the plan of the last run (borrowed) */
    /* Per-run profiles (run options set_profile, exec/run_profile.h): the
     * run in progress fills run_prof_work (the CPU here, a CUDA run from
     * its executor); a run that succeeds swaps it into run_prof, which
     * teexec_session_run_profile reads. */
    tx_run_profile run_prof, run_prof_work;
    bool has_run_prof;
    teexec_comm *comm;       /* tensor-parallel group the te.ops collectives use (borrowed) */
    /* Types and folds every plan's values (exec/value_plan.h); owns the
     * decoded initializers. */
    tx_value_planner *vp;
    tx_buckets buckets;      /* the options' shape buckets (exec/shape_buckets.h) */
    const int32_t *in_vals;  /* graph inputs the caller feeds, user_model->inputs
                              * order (vp's, borrowed) */
    size_t n_in;
    /* the KV caches it keeps between runs (exec/session_state.h): inputs
     * the caller does not feed */
    tx_session_state state;
    int64_t *last_use;       /* per value: last reading node; n_nodes for graph outputs */
    /* The per-shape plans (payloads: tx_plan) and the key scratch: one
     * value per graph value, only the fed inputs' dtype and shape set. */
    tx_plan_cache *plans;
    tx_device_caps caps;              /* "cpu": the device the plans are for */
    tx_infer_value *key_vals;
    /* The declared input shapes planned at creation (in_vals order), NULL
     * when the model leaves some undeclared. */
    tx_shape *declared;
    /* Per-node scratch sized for the widest node (planning and runs use one
     * node at a time), kept off the stack: a session may run on a thread
     * with a small stack. */
    size_t max_in, max_out;
    const tx_infer_value **sc_pins;   /* max_in */
    tx_infer_value *sc_in_vals;       /* max_in */
    const tx_tensor **sc_ins;         /* max_in */
    tx_tensor **sc_outs;              /* max_out */
    tx_infer_value *sc_out_vals;      /* max_out */
};

/* The request the session's plans are keyed on for these input dtypes
 * and shapes (in in_vals order; both NULL: the ones already in
 * s->key_vals): fills s->key_vals, which *req borrows. */
void tx_session_key(teexec_session *s, const teexec_dtype *dts, const tx_shape *shapes,
                    tx_plan_request *req);

/* Test query: plans made over the session's life (CPU plans; for a CUDA
 * session, device executors), evicted ones included. */
uint64_t tx_session_plans_built(const teexec_session *s);

/* Debug query: the kernels the last successful CPU run executed for the
 * plan's CHAIN groups, in execution order (*n entries; borrowed until the
 * next run), and the fuser plan that run followed (*plan, may be NULL). */
const tx_run_kernel *tx_session_last_kernels(const teexec_session *s, size_t *n,
                                             const tx_fuser_plan **plan);

/* The same for a CPU trainer's last step: the forward kernels of its CHAIN
 * groups in forward order, then their backward kernels as they ran (each
 * group's backward layout last kernel first, groups in reverse order);
 * *plan is the training plan the step followed. Borrowed until the next
 * step. */
const tx_run_kernel *tx_trainer_last_kernels(const teexec_trainer *t, size_t *n,
                                             const tx_fuser_plan **plan);

/* The same for CUDA: the kernels of the executor that ran the session's
 * last run, or that the trainer's last step used (forward kernels in
 * forward order, then backward kernels as they run), from
 * tx_cuda_executor_kernels; *out is malloc'ed (free it), the first
 * *n_forward entries the forward's, *plan borrowed.
 * INVALID_ARGUMENT before the first run or step, or on another device. */
teexec_status *tx_session_cuda_kernels(const teexec_session *s, tx_run_kernel **out, size_t *n,
                                       size_t *n_forward, const tx_fuser_plan **plan) TX_NODISCARD;
teexec_status *tx_trainer_cuda_kernels(const teexec_trainer *t, tx_run_kernel **out, size_t *n,
                                       size_t *n_forward, const tx_fuser_plan **plan) TX_NODISCARD;
/* And how that executor set its arena's lifetimes from the plan's memory
 * plan (tx_cuda_executor_memory, exec/cuda/cuda_executor.h). */
struct tx_cuda_memory_report;
teexec_status *tx_session_cuda_memory(const teexec_session *s,
                                      struct tx_cuda_memory_report *out) TX_NODISCARD;
teexec_status *tx_trainer_cuda_memory(const teexec_trainer *t,
                                      struct tx_cuda_memory_report *out) TX_NODISCARD;

/* Debug switch for tests: the CPU trainer (recipe none) drops its plan and
 * runs every node with its own kernel and backward rule, as before the
 * plan ran (the reference the planned run is compared with). */
teexec_status *tx_trainer_debug_node_by_node(teexec_trainer *t) TX_NODISCARD;

#endif
