/*
 * device_budget.h - the device-memory limit of a CUDA session
 * (teexec_session_options_set_device_memory_limit): what an executor
 * counts against it and the refusal it gives, kept apart from CUDA so the
 * arithmetic and the message are tested without a GPU.
 *
 * What counts: the executor's own allocations (its arena: activations,
 * saved tensors, node states, staging, scratch, the cuBLASLt workspace;
 * its fp8-delayed state), the same of the session's other executors (its
 * other input shapes) still held, and the weights it reads, in full even
 * when another session already holds them on the device (so whether a
 * session fits does not depend on what else runs). What does not count:
 * the CUDA context, the cuBLASLt / cuDNN handles, captured CUDA graphs and
 * memory the CUDA libraries allocate on their own.
 *
 * Thread-safety: pure functions.
 */
#ifndef TEEXEC_EXEC_DEVICE_BUDGET_H
#define TEEXEC_EXEC_DEVICE_BUDGET_H

#include "base/status.h"

#include <stddef.h>

/* NULL when limit is 0 (no limit) or held + weights + own <= limit; else
 * TEEXEC_ERR_OUT_OF_DEVICE_MEMORY, the message prefixed by `what`, giving
 * the bytes needed (and their parts) and the limit. A sum that overflows
 * is over any limit. */
teexec_status *tx_device_budget_check(size_t limit, size_t held, size_t weights, size_t own,
                                      const char *what) TX_NODISCARD;

/* The refusal for a device allocation that failed (cudaMalloc out of
 * memory): the same code, naming the bytes asked and `what`. */
teexec_status *tx_device_alloc_failed(size_t bytes, const char *what, const char *why);

#endif
