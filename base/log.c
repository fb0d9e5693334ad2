/* log.c - delivery of diagnostics to the user's callback; never prints. */
#include "base/log.h"

#include <stdio.h>

static teexec_log_fn log_fn;
static void *log_user;
static teexec_log_level log_max = TEEXEC_LOG_WARNING;
/* The tag of the run in progress on this thread (run options), put before
 * every message; thread-local because runs on other threads have their own. */
static _Thread_local const char *log_tag;

void teexec_set_log_callback(teexec_log_fn fn, void *user_data,
                             teexec_log_level max_level)
{
    log_fn = fn;
    log_user = user_data;
    log_max = max_level;
}

int tx_log_enabled(teexec_log_level level)
{
    return log_fn != NULL && level <= log_max;
}

void tx_log(teexec_log_level level, const char *fmt, ...)
{
    if (!tx_log_enabled(level)) return;
    char buf[1024];
    size_t at = 0;
    if (log_tag) {
        int n = snprintf(buf, sizeof(buf), "run \"%s\": ", log_tag);
        at = n > 0 ? ((size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) : 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + at, sizeof(buf) - at, fmt, ap);
    va_end(ap);
    log_fn(log_user, level, buf);
}

const char *tx_log_swap_tag(const char *tag)
{
    const char *old = log_tag;
    log_tag = tag;
    return old;
}
