/*
 * session_cuda.h - the CUDA side of teexec_session (exec/session_cuda.c):
 * device choice, the executors per input-shape signature (payloads of the
 * session's plan cache, planner/plan_cache.h: at most TX_MAX_CUDA_EXECUTORS,
 * the one made longest ago dropped first), and the option parsing shared
 * with the trainer.
 *
 * Each executor (exec/cuda/cuda_executor.h) types and folds its values with a
 * value planner of its own (exec/value_plan.h) over the session's lowered
 * model; the session's own CPU plans (a CUDA session is plan_only: types,
 * folding and the arena's extent, no host arena, no fuser groups) only
 * check at creation that the declared shapes plan.
 *
 * Ownership: executors (through their cache) and copied options belong to
 * the session (tx_session_cuda_free). Thread-safety: as the session (one
 * thread).
 */
#ifndef TEEXEC_EXEC_SESSION_CUDA_H
#define TEEXEC_EXEC_SESSION_CUDA_H

#include "exec/session_internal.h"

#include <stdbool.h>

/* TEEXEC_DETERMINISTIC=1 in the environment. */
bool tx_env_deterministic(void);

/* The device to use: CPU, CUDA (fails when none is usable), or AUTO (the
 * GPU when one is usable, else the CPU). A compute dtype needs the GPU;
 * so does a recipe other than "none" unless cpu_recipes (CPU sessions run
 * every recipe through the group executor; the CPU trainer does not). */
teexec_status *tx_resolve_device(teexec_device asked, const char *recipe, teexec_dtype dtype,
                                 bool cpu_recipes, bool *use_cuda) TX_NODISCARD;

/* Called by session creation (exec/session.c) once the CPU-side pieces
 * (binding, shape checks) exist; plans the declared shapes (s->declared)
 * on the device, so the first run with them plans nothing. */
teexec_status *tx_session_cuda_init(teexec_session *s, const teexec_session_options *o) TX_NODISCARD;
void tx_session_cuda_free(teexec_session *s);
size_t tx_session_cuda_plan_count(const teexec_session *s);

/* ro: the run options (may be NULL), checked for a cancel before the
 * executor launches and, with CUDA graphs off, between kernel launches,
 * and their CUDA settings (stream, device outputs, no host sync);
 * bound: the session inputs (in_vals order), or NULL: the previous run's,
 * still on the device; in_device (may be NULL: all host): per input, the
 * CUDA device its data lives on, -1 for host memory; want: value indices
 * of the requested outputs; into: NULL, or per requested output NULL or
 * the caller's tensor to write it into (teexec_session_run_into; a device
 * one of the executor's exact dtype and shape is written on the device and
 * its out[j] left NULL; any other gets an out[j] the session copies in);
 * out: new public tensors (device tensors with device outputs). */
teexec_status *tx_session_cuda_run(teexec_session *s, const teexec_run_options *ro,
                                   const tx_tensor **bound, const int *in_device,
                                   size_t n_outputs, const int32_t *want,
                                   teexec_tensor *const *into, teexec_tensor **out) TX_NODISCARD;

/* A run that fails on the device (TEEXEC_ERR_DEVICE: a CUDA call or kernel
 * failed mid-run) leaves the session's executors in an unknown state: the
 * session refuses every later run with TEEXEC_ERR_DEVICE, saying why, and
 * must be destroyed; other sessions (and the model) are not touched. A
 * sticky CUDA error (an illegal address, say) breaks the whole CUDA context
 * of the process, which no library can contain: their runs then fail too,
 * each with its own status. Refusals of bad input, cancellations and
 * memory-limit refusals do not poison. */
bool tx_session_cuda_poisoned(const teexec_session *s);

/* Test seam: the next run fails as if a kernel had failed on the device
 * (tests/gpu/test_gpu_device_io.c checks the poisoning without breaking
 * the CUDA context). */
void tx_session_cuda_inject_device_fault(teexec_session *s);

/* Host<->device copies the session's runs made for inputs and outputs so
 * far (tests: a run on device tensors makes none). */
uint64_t tx_session_cuda_host_copies(const teexec_session *s);

#endif
