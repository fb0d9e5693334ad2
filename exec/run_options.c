/* run_options.c - teexec_run_options (teexec.h "Run options"): a tag, a
 * cancel flag, the per-run profile switch and the CUDA run settings, read
 * by runs (exec/run_options.h). */
#include "exec/run_options.h"

#include "base/log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Longest tag accepted: it travels in every log message of its run, whose
 * buffer is 1 KiB (base/log.c). */
#define TX_MAX_RUN_TAG 255u

struct teexec_run_options {
    char *tag;                 /* NULL: none */
    atomic_bool cancelled;     /* set from any thread, read by runs */
    /* CUDA runs (set while no run uses the options) */
    void *cuda_stream;         /* the caller's cudaStream_t, or NULL */
    bool device_outputs;       /* outputs as device tensors */
    bool no_sync;              /* return once queued */
    bool profile;              /* time this run's work (run_profile.h) */
};

teexec_status *teexec_run_options_set_cuda_stream(teexec_run_options *o, void *stream)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->cuda_stream = stream;
    return NULL;
}

teexec_status *teexec_run_options_set_device_outputs(teexec_run_options *o, int on)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->device_outputs = on != 0;
    return NULL;
}

teexec_status *teexec_run_options_set_no_sync(teexec_run_options *o, int on)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->no_sync = on != 0;
    return NULL;
}

teexec_status *teexec_run_options_set_profile(teexec_run_options *o, int on)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->profile = on != 0;
    return NULL;
}

bool tx_run_profiled(const teexec_run_options *o) { return o && o->profile; }

void *tx_run_cuda_stream(const teexec_run_options *o) { return o ? o->cuda_stream : NULL; }
bool tx_run_device_outputs(const teexec_run_options *o) { return o && o->device_outputs; }
bool tx_run_no_sync(const teexec_run_options *o) { return o && o->no_sync; }

teexec_status *teexec_run_options_create(teexec_run_options **out_options)
{
    if (!out_options) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_options is NULL");
    teexec_run_options *o = calloc(1, sizeof(*o));
    if (!o) {
        *out_options = NULL;
        return tx_oom();
    }
    atomic_init(&o->cancelled, false);
    *out_options = o;
    return NULL;
}

void teexec_run_options_destroy(teexec_run_options *o)
{
    if (!o) return;
    free(o->tag);
    free(o);
}

teexec_status *teexec_run_options_set_tag(teexec_run_options *o, const char *tag)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    char *copy = NULL;
    if (tag) {
        size_t n = strlen(tag);
        if (n > TX_MAX_RUN_TAG)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "a run tag has at most %u bytes, not %zu", TX_MAX_RUN_TAG, n);
        copy = strdup(tag);
        if (!copy) return tx_oom();
    }
    free(o->tag);
    o->tag = copy;
    return NULL;
}

teexec_status *teexec_run_options_cancel(teexec_run_options *o)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    /* release: whatever the canceller did before is visible to the run
     * that sees the flag (acquire in tx_run_cancelled) */
    atomic_store_explicit(&o->cancelled, true, memory_order_release);
    return NULL;
}

teexec_status *teexec_run_options_reset(teexec_run_options *o)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    atomic_store_explicit(&o->cancelled, false, memory_order_release);
    return NULL;
}

int teexec_run_options_is_cancelled(const teexec_run_options *o)
{
    return tx_run_cancelled(o) ? 1 : 0;
}

bool tx_run_cancelled(const teexec_run_options *o)
{
    /* the flag is only read; the cast is for C11's atomic_load as first
     * published (non-const argument, fixed by DR 459) */
    return o && atomic_load_explicit((atomic_bool *)&o->cancelled, memory_order_acquire);
}

teexec_status *tx_run_cancelled_status(const char *where, const char *node)
{
    return tx_status_new(TEEXEC_ERR_CANCELLED, NULL, node, "the run was cancelled %s", where);
}

const char *tx_run_begin(const teexec_run_options *o)
{
    const char *prev = tx_log_swap_tag(o && o->tag ? o->tag : NULL);
    return prev;
}

teexec_status *tx_run_end(const teexec_run_options *o, const char *prev_tag, teexec_status *st)
{
    (void)tx_log_swap_tag(prev_tag);
    if (st && o && o->tag) st = tx_status_prefix(st, "run \"%s\"", o->tag);
    return st;
}
