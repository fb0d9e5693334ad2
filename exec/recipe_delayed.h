/*
 * recipe_delayed.h - fp8-delayed scaling state: per quantizer an amax
 * history and the scale the next step quantizes with (te-ops.md 4.3,
 * Transformer Engine's DelayedScaling).
 *
 * Life of one step: quantizers read tx_delayed_scale(i) (1 at the first
 * step), quantize with it (kernels/cpu/qtensor.h, use_given_scale) and
 * report the amax they measured with tx_delayed_record_amax (a max into
 * history slot 0). After the step, tx_delayed_update rolls each history and
 * recomputes the scale:
 *   cur = reduced amax if given and non-zero, else history[0];
 *   cur == 0: nothing changes (no roll, scale kept);
 *   else roll (h'[j] = h[j+1], h'[L-1] = cur), amax = max(h'[0..L-1])
 *   ("max"; the evicted h[1] still counts, as in TE) or cur
 *   ("most_recent"), then h'[0] = 0;
 *   scale = fl32(fl32(fmt_max * 2^-margin) / amax) if amax is finite and
 *   > 0, else unchanged; a scale of +Inf becomes FLT_MAX.
 *
 * Ownership: the state owns its arrays (tx_delayed_free). Not thread-safe:
 * one session updates it, between steps.
 */
#ifndef TEEXEC_EXEC_RECIPE_DELAYED_H
#define TEEXEC_EXEC_RECIPE_DELAYED_H

#include "base/status.h"

#include <stdint.h>

typedef enum tx_amax_algo {
    TX_AMAX_MAX = 0,
    TX_AMAX_MOST_RECENT = 1
} tx_amax_algo;

typedef struct tx_delayed_state {
    uint32_t history_len;  /* L >= 1 */
    uint32_t count;        /* quantizers */
    int margin;
    tx_amax_algo algo;
    float *history;        /* [L][count], row 0 = the current step */
    float *scale;          /* [count], 1 initially */
    float *fmt_max;        /* [count]: 448 (E4M3) or 57344 (E5M2) */
} tx_delayed_state;

/* fmts[i]: FLOAT8E4M3FN or FLOAT8E5M2 for quantizer i. */
teexec_status *tx_delayed_init(tx_delayed_state *st, uint32_t history_len, uint32_t count,
                               int margin, tx_amax_algo algo,
                               const teexec_dtype *fmts) TX_NODISCARD;
void tx_delayed_free(tx_delayed_state *st);

/* "max" / "most_recent"; -1 if neither. */
int tx_amax_algo_from_name(const char *name);

float tx_delayed_scale(const tx_delayed_state *st, uint32_t i);
void tx_delayed_record_amax(tx_delayed_state *st, uint32_t i, float amax);

/* reduced_amax: NULL, or count values (e.g. all-reduced across ranks). */
void tx_delayed_update(tx_delayed_state *st, const float *reduced_amax);

#endif
