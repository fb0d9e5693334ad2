/* recipe_delayed.c - fp8-delayed amax history and scale update. */
#include "exec/recipe_delayed.h"

#include "base/numfmt.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

teexec_status *tx_delayed_init(tx_delayed_state *st, uint32_t history_len, uint32_t count,
                               int margin, tx_amax_algo algo, const teexec_dtype *fmts)
{
    memset(st, 0, sizeof *st);
    if (history_len == 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fp8-delayed: amax history length must be >= 1");
    if (history_len > (1u << 20) || count > (1u << 20))
        return tx_error(TEEXEC_ERR_LIMIT, "fp8-delayed: history %u x %u quantizers is too large",
                        history_len, count);
    if (algo != TX_AMAX_MAX && algo != TX_AMAX_MOST_RECENT)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fp8-delayed: unknown amax algorithm %d", (int)algo);
    if (margin < -126 || margin > 126)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fp8-delayed: margin %d out of range", margin);
    for (uint32_t i = 0; i < count; i++)
        if (!fmts || (fmts[i] != TEEXEC_DTYPE_FLOAT8E4M3FN && fmts[i] != TEEXEC_DTYPE_FLOAT8E5M2))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "fp8-delayed: quantizer %u needs format E4M3 or E5M2", i);
    st->history_len = history_len;
    st->count = count;
    st->margin = margin;
    st->algo = algo;
    /* sizes are bounded by the checks above: at most 2^40 floats on 64-bit */
    st->history = calloc((size_t)history_len * count + 1, sizeof(float));
    st->scale = calloc((size_t)count + 1, sizeof(float));
    st->fmt_max = calloc((size_t)count + 1, sizeof(float));
    if (!st->history || !st->scale || !st->fmt_max) {
        tx_delayed_free(st);
        return tx_oom();
    }
    for (uint32_t i = 0; i < count; i++) {
        st->scale[i] = 1.0f;
        st->fmt_max[i] = tx_numfmt_max(fmts[i]);
    }
    return NULL;
}

void tx_delayed_free(tx_delayed_state *st)
{
    if (!st) return;
    free(st->history);
    free(st->scale);
    free(st->fmt_max);
    memset(st, 0, sizeof *st);
}

int tx_amax_algo_from_name(const char *name)
{
    if (!name) return -1;
    if (strcmp(name, "max") == 0) return TX_AMAX_MAX;
    if (strcmp(name, "most_recent") == 0) return TX_AMAX_MOST_RECENT;
    return -1;
}

float tx_delayed_scale(const tx_delayed_state *st, uint32_t i)
{
    return i < st->count ? st->scale[i] : 1.0f;
}

void tx_delayed_record_amax(tx_delayed_state *st, uint32_t i, float amax)
{
    if (i < st->count) st->history[i] = fmaxf(st->history[i], amax);
}

void tx_delayed_update(tx_delayed_state *st, const float *reduced_amax)
{
    const uint32_t L = st->history_len, n = st->count;
    for (uint32_t i = 0; i < n; i++) {
        float cur = reduced_amax && reduced_amax[i] != 0.0f ? reduced_amax[i] : st->history[i];
        if (cur == 0.0f) continue;
        for (uint32_t j = 0; j + 1 < L; j++) st->history[j * n + i] = st->history[(j + 1) * n + i];
        st->history[(L - 1) * n + i] = cur;
        float amax = cur;
        if (st->algo == TX_AMAX_MAX)
            for (uint32_t j = 0; j < L; j++) amax = fmaxf(amax, st->history[j * n + i]);
        st->history[i] = 0.0f;
        if (isfinite(amax) && amax > 0.0f) {
            float s = ldexpf(st->fmt_max[i], -st->margin) / amax;
            st->scale[i] = isinf(s) ? FLT_MAX : s;
        }
    }
}
