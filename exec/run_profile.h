/*
 * run_profile.h - the profile of one run (teexec_run_options_set_profile,
 * read with teexec_session_run_profile): rows of (name, fuser group, pass,
 * calls, milliseconds) summed over the run, and its text table. The CPU
 * session adds the wall time of each fuser group and standard node it runs
 * (exec/session.c); the CUDA executor, for a profiled run, launches its
 * kernels one by one instead of replaying its CUDA graph and adds each
 * kernel's event time (exec/cuda/cuda_executor_run.c). The session-wide
 * profile of CUDA sessions (options set_profile, teexec_session_profile)
 * is another table: summed over every run, kept per executor.
 *
 * Ownership: a tx_run_profile owns its rows (tx_run_profile_free); zeroed
 * memory is an empty profile. Thread-safety: none; one run at a time, as
 * the session that holds it.
 */
#ifndef TEEXEC_EXEC_RUN_PROFILE_H
#define TEEXEC_EXEC_RUN_PROFILE_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_run_profile_row {
    char name[96];
    int32_t group;  /* fuser group, -1 for work outside the groups */
    bool backward;
    uint64_t calls;
    double ms;
} tx_run_profile_row;

typedef struct tx_run_profile {
    tx_run_profile_row *rows;
    size_t n, cap;
    double wall_ms; /* the whole run, host clock (tx_run_profile_set_wall) */
} tx_run_profile;

/* Empties the rows (keeps the memory) for a new run. */
void tx_run_profile_reset(tx_run_profile *p);

/* Adds ms to the row (name, group, backward), made on first use. */
teexec_status *tx_run_profile_add(tx_run_profile *p, const char *name, int32_t group,
                                  bool backward, double ms) TX_NODISCARD;

/* The run's wall time, printed beside the rows' sum. */
void tx_run_profile_set_wall(tx_run_profile *p, double ms);

/* The table: a header naming `device` and how it was timed (`how`), one
 * line per row in the order first met, with calls, total and mean ms and
 * the share of the rows' sum, then the sum and the run's wall time.
 * *out_text is malloc'ed (teexec_string_free / free). */
teexec_status *tx_run_profile_text(const tx_run_profile *p, const char *device, const char *how,
                                   char **out_text) TX_NODISCARD;

/* A copy of src's rows into dst (dst's old rows are freed). */
teexec_status *tx_run_profile_copy(tx_run_profile *dst, const tx_run_profile *src) TX_NODISCARD;

void tx_run_profile_free(tx_run_profile *p);

/* Milliseconds of CLOCK_MONOTONIC, for the CPU's timings. */
double tx_run_profile_now_ms(void);

#endif
