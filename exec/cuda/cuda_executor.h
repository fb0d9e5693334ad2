/*
 * cuda_executor.h - the CUDA executor of a whole model for fixed input shapes:
 * what a CUDA session (inference) and a CUDA trainer (forward, loss,
 * backward, optimizer) run.
 *
 * Creation takes the model's lowered copy (exec/prepare.h), types every
 * value and folds the values known before running on the host with a
 * value planner of its own (exec/value_plan.h; no session is involved),
 * plans it (planner/plan.h: groups, forward and backward layouts,
 * quantization per GEMM operand), prepares one GPU node per graph node
 * that is not folded (te.ops through exec/cuda/te_cuda.h, standard ops
 * through exec/cuda/std_cuda.h) and the plan's fused kernels where the GPU
 * has them (the others run unfused; each such choice is kept with its
 * reason), uploads the parameters (converted to the compute dtype; FP32
 * master copies when training; for inference, the model's initializers
 * come from the model's shared device copies, exec/weight_share.h,
 * uploaded by the first executor that needs them) and makes ONE device
 * allocation for every other value, saved tensor, gradient, node state and
 * the scratch. Runs then allocate nothing and do not synchronize the host
 * except to hand back results; with CUDA graphs on the forward (and the
 * training step) is captured on the first run and replayed.
 *
 * Ownership: the graph owns its value planner (with the decoded host
 * initializers; an inference executor releases the big float ones once
 * they are on the device), its plans and its device memory; the model
 * passed in (and so its lowered copy) must outlive it. Host tensors given
 * to run/step are read during the call; tensors returned are new and owned
 * by the caller.
 * Thread-safety: one host thread at a time per graph.
 */
#ifndef TEEXEC_EXEC_CUDA_CUDA_EXECUTOR_H
#define TEEXEC_EXEC_CUDA_CUDA_EXECUTOR_H

#include "base/status.h"
#include "base/tensor.h"
#include "exec/model_internal.h"
#include "planner/plan.h"
#include "teexec/teexec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_cuda_executor tx_cuda_executor;
struct tx_ws_lease;
struct tx_run_profile;

typedef struct tx_cuda_executor_config {
    tx_recipe recipe;
    teexec_dtype dtype;           /* compute dtype; UNDEFINED = the model's */
    bool training;
    bool deterministic;
    bool cuda_graphs;
    bool profile;
    bool allow_tf32;
    void *stream;                 /* cudaStream_t, or NULL: the graph makes its own */
    /* the inputs the caller feeds, by name, with fixed shapes; run and step
     * take the tensors in this order */
    size_t n_inputs;
    const char *const *input_names;
    const tx_shape *input_shapes;
    /* per input (NULL: none), NULL or device memory the input lives in for
     * the executor's whole life, of input_storage_dtype (the dtype the
     * executor computes the input in): the session's state
     * (exec/session_state.h), borrowed for the executor's life. A run neither
     * copies nor checks it (its entry among run's inputs is ignored); the op
     * that owns it writes it in place. */
    void *const *input_storage;
    const teexec_dtype *input_storage_dtype;
    const teexec_train_options *train; /* training only: loss and optimizer */
    /* device-memory limit (exec/device_budget.h; 0: none) and the bytes the
     * owner already holds in other executors, counted against it */
    size_t memory_limit;
    size_t memory_held;
} tx_cuda_executor_config;

/* Whether a usable CUDA device is present (for device AUTO); never fails. */
bool tx_gpu_available(void);
/* Whether this build has the CUDA backend at all. */
bool tx_gpu_built(void);

teexec_status *tx_cuda_executor_create(const teexec_model *model, const tx_cuda_executor_config *cfg,
                                   tx_cuda_executor **out) TX_NODISCARD;
void tx_cuda_executor_destroy(tx_cuda_executor *g);

/* How a run's tensors and stream meet the caller's (NULL: host inputs and
 * outputs, the graph's own stream, the call waits for the device). */
typedef struct tx_gpu_run_io {
    const bool *in_device; /* per input: its data is a device address (NULL: all host) */
    bool out_device;       /* outputs: new device buffers (tx_device_free), not host tensors */
    /* per graph output, NULL or the caller's device memory of exactly its
     * size (tx_cuda_executor_output_info) to write it into: that output's entry
     * is then left empty (NULL: none bound) */
    void *const *out_into;
    void *stream;          /* the caller's cudaStream_t: the run starts after the work queued
                            * on it so far, and work queued on it later waits for the run */
    bool no_sync;          /* return once queued (needs out_device or no outputs fetched) */
    uint64_t host_copies;  /* out: host<->device copies this run made (inputs and outputs) */
} tx_gpu_run_io;

/* Inference: inputs[i] for config input i (tensors with the planned
 * shapes, host memory unless io->in_device[i]), or inputs NULL: the inputs
 * of the previous run, still on the device. outputs (NULL: fetch nothing)
 * has one entry per graph output; entry j receives a new tensor when want
 * is NULL or want[j], else is left empty: a host tensor, or with
 * io->out_device a tensor over new device memory (owns_data false; free it
 * with tx_device_free). Returns when the device has finished, unless
 * io->no_sync. io may be NULL. */
teexec_status *tx_cuda_executor_run(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                tx_gpu_run_io *io, tx_tensor *outputs,
                                const bool *want) TX_NODISCARD;
/* Waits for every run queued on the graph's stream. */
teexec_status *tx_cuda_executor_wait(tx_cuda_executor *g) TX_NODISCARD;
/* The device ordinal the graph runs on. */
int tx_cuda_executor_device(const tx_cuda_executor *g);

/* The run options (may be NULL; borrowed until replaced) that the next
 * runs read: whether a run profiles itself (set_profile: it then runs
 * uncaptured, each kernel timed with events, tx_cuda_executor_run_profile),
 * and the cancel flag, checked before every node's kernels when the run is not
 * captured (CUDA graphs off, the profile, the first tuning call) and before
 * a graph launch, never during a capture. A cancelled run waits for the
 * work already queued and returns TEEXEC_ERR_CANCELLED naming the node.
 * Training steps never read them. */
void tx_cuda_executor_set_run_options(tx_cuda_executor *g, const teexec_run_options *ro);

/* The graph outputs run returns, in order, by name. */
size_t tx_cuda_executor_output_count(const tx_cuda_executor *g);
const char *tx_cuda_executor_output_name(const tx_cuda_executor *g, size_t j);
/* Graph output j's dtype (the model's) and shape as this executor makes it. */
void tx_cuda_executor_output_info(const tx_cuda_executor *g, size_t j, teexec_dtype *dtype,
                              tx_shape *shape);
/* Why CUDA graphs are off for this executor (NULL when they are on or
 * were not asked for), and the fused kernels the GPU declined (the plan's
 * text with --explain reasons). */
const char *tx_cuda_executor_graphs_off_reason(const tx_cuda_executor *g);

/* Training step: inputs as for run, plus the loss's data ("target" for
 * MSE, int64 "labels" for cross-entropy); either NULL reuses the previous
 * step's, still on the device. *loss gets the loss before the update. */
teexec_status *tx_cuda_executor_step(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                 const tx_tensor *loss_data, double *loss) TX_NODISCARD;

/* Data parallel training (exec/train_dp.h): called by every step between
 * the backward and the optimizer with the parameters' gradient buffers on
 * the device (n of them; elements and dtype each) and the executor's
 * stream (a cudaStream_t: the gradients are final once the work queued on
 * it so far is done); the hook replaces them with the group's average
 * before the optimizer reads them. NULL: none. The hook runs outside any
 * captured CUDA graph. */
typedef teexec_status *(*tx_gpu_grad_hook)(void *ctx, void *stream, size_t n,
                                           void *const *grads, const uint64_t *numel,
                                           const teexec_dtype *dtypes);
void tx_cuda_executor_set_grad_hook(tx_cuda_executor *g, tx_gpu_grad_hook fn, void *ctx);

/* A trainable parameter by the user's initializer name (a lowered model
 * may hold it merged into or transposed from another): the current value
 * (the model's dtype) and the last step's grad, as new host tensors. */
teexec_status *tx_cuda_executor_param(const tx_cuda_executor *g, const char *name,
                                  tx_tensor *out) TX_NODISCARD;
teexec_status *tx_cuda_executor_grad(const tx_cuda_executor *g, const char *name,
                                 tx_tensor *out) TX_NODISCARD;
/* The current value of the lowered model's parameter `name`, in the
 * lowered layout (the CPU trainer's mirror of the device's parameters). */
teexec_status *tx_cuda_executor_param_lowered(const tx_cuda_executor *g, const char *name,
                                          tx_tensor *out) TX_NODISCARD;

/* The last run's own profile (run options set_profile, read through
 * tx_cuda_executor_set_run_options): a copy into *out (its old rows freed). */
teexec_status *tx_cuda_executor_run_profile(const tx_cuda_executor *g, struct tx_run_profile *out) TX_NODISCARD;

/* The --profile table (teexec_session_profile's format); caller frees. */
teexec_status *tx_cuda_executor_profile(const tx_cuda_executor *g, char **out_text) TX_NODISCARD;
/* Device bytes the executor allocated for itself (its arena and small
 * state), and the shared weights it reads (NULL for a trainer, whose
 * parameters are in its own allocation). */
size_t tx_cuda_executor_device_bytes(const tx_cuda_executor *g);

/* Debug query for tests (exec/cuda/cuda_executor_trace.c): the kernels this
 * executor runs for the fuser plan's CHAIN groups, as (group, fusion,
 * first op, op count): the forward in run order, then, for a training
 * executor, the backward in run order. A planned fusion the GPU has no
 * kernel for, or a dGELU epilogue its wiring refused, appears as its ops
 * unfused; the plan (*plan, borrowed) then holds a decline saying why. A
 * te.ops op that only aliases its input (Reshape, Identity,
 * MakeExtraOutput) counts as its unfused kernel: it runs as planned,
 * without a launch. *out is malloc'ed (free it); its first *n_forward
 * entries are the forward's. */
teexec_status *tx_cuda_executor_kernels(const tx_cuda_executor *g, tx_run_kernel **out, size_t *n,
                                    size_t *n_forward, const tx_fuser_plan **plan) TX_NODISCARD;
const struct tx_ws_lease *tx_cuda_executor_weights(const tx_cuda_executor *g);

/* How an executor set the lifetimes its arena is packed over (debug query
 * for tests, cuda_executor_trace.c). planned: every value, grad and saved
 * aux tensor the plan's memory plan lists is kept at least as long as the
 * memory plan says, its lifetime in the plan's schedule mapped to the steps
 * the executor runs them at (from_plan: how many entries it took); where
 * the executor's own uses reach further it keeps them too and counts them
 * in widened, naming the first few. Not planned (why_own says why): the
 * executor's own conservative rule. */
typedef struct tx_cuda_memory_report {
    bool planned;
    char why_own[192];
    size_t from_plan, widened;
    char widened_names[768];
    size_t arena_bytes, plan_arena_bytes;
    bool poisoned;  /* TEEXEC_CUDA_POISON_DEAD is on for it */
} tx_cuda_memory_report;

teexec_status *tx_cuda_executor_memory(const tx_cuda_executor *g,
                                       tx_cuda_memory_report *out) TX_NODISCARD;

#endif
