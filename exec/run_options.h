/*
 * run_options.h - what a teexec_run_options holds (teexec.h "Run options")
 * and the helpers every run path (CPU and CUDA sessions, trainers) uses to
 * honour it: the cancel check, the cancellation status, the tag put on
 * the run's log messages and on its failure status, the per-run profile
 * switch, and the CUDA run settings (stream, device outputs, no host
 * sync).
 *
 * Ownership: the options belong to the caller; runs borrow them for the
 * call. Thread-safety: the cancel flag is a C11 atomic, set from any thread
 * and read by runs; the tag and the CUDA settings are only read during runs
 * (set them while no run uses the options).
 */
#ifndef TEEXEC_EXEC_RUN_OPTIONS_H
#define TEEXEC_EXEC_RUN_OPTIONS_H

#include "base/status.h"

#include <stdbool.h>

/* The CUDA run settings (NULL options: none): the caller's stream the run
 * is ordered with, outputs left on the device, return without waiting. */
void *tx_run_cuda_stream(const teexec_run_options *o);
bool tx_run_device_outputs(const teexec_run_options *o);
bool tx_run_no_sync(const teexec_run_options *o);

/* Whether the run times its own work (set_profile; false for NULL
 * options): exec/run_profile.h. */
bool tx_run_profiled(const teexec_run_options *o);

/* Whether a cancel was asked (false for NULL options). */
bool tx_run_cancelled(const teexec_run_options *o);

/* TEEXEC_ERR_CANCELLED saying where the run stopped: `where` is a phrase
 * such as "before the run started"; node (may be NULL) becomes the status's
 * node. */
teexec_status *tx_run_cancelled_status(const char *where, const char *node);

/* A run's start and end on the calling thread: begin installs the tag for
 * the thread's log messages and returns the previous tag, which end
 * restores; end also prefixes the failure status st (returned) with the
 * tag. Both accept NULL options. */
const char *tx_run_begin(const teexec_run_options *o);
teexec_status *tx_run_end(const teexec_run_options *o, const char *prev_tag, teexec_status *st);

#endif
