/* status.c - teexec_status objects: creation (internal) and accessors (public). */
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct teexec_status {
    teexec_code code;
    char *message;
    char *file;
    char *node;
};

/* Returned when allocating a status fails; never freed. */
static struct teexec_status oom_status = {TEEXEC_ERR_NO_MEMORY,
                                          (char *)"out of memory", NULL, NULL};

static char *dup_or_null(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

teexec_status *tx_status_vnew(teexec_code code, const char *file,
                              const char *node, const char *fmt, va_list ap)
{
    teexec_status *st = calloc(1, sizeof(*st));
    if (!st) return &oom_status;
    st->code = code;
    /* Most messages fit a small buffer; longer ones are formatted twice. */
    char small[256];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof(small), fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        n = 0;
        small[0] = '\0';
    }
    st->message = malloc((size_t)n + 1);
    if (!st->message) {
        free(st);
        return &oom_status;
    }
    if ((size_t)n < sizeof(small))
        memcpy(st->message, small, (size_t)n + 1);
    else
        vsnprintf(st->message, (size_t)n + 1, fmt, ap);
    st->file = dup_or_null(file);
    st->node = dup_or_null(node);
    if ((file && !st->file) || (node && !st->node)) {
        free(st->message);
        free(st->file);
        free(st->node);
        free(st);
        return &oom_status;
    }
    return st;
}

teexec_status *tx_status_new(teexec_code code, const char *file,
                             const char *node, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    teexec_status *st = tx_status_vnew(code, file, node, fmt, ap);
    va_end(ap);
    return st;
}

teexec_status *tx_status_with_file(teexec_status *st, const char *file)
{
    if (!st || st == &oom_status || st->file || !file) return st;
    st->file = dup_or_null(file); /* on failure the status simply lacks it */
    return st;
}

teexec_status *tx_status_with_node(teexec_status *st, const char *node)
{
    if (!st || st == &oom_status || st->node || !node || !*node) return st;
    st->node = dup_or_null(node);
    return st;
}

teexec_status *tx_status_prefix(teexec_status *st, const char *fmt, ...)
{
    if (!st || st == &oom_status) return st;
    va_list ap;
    va_start(ap, fmt);
    char prefix[512];
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    size_t n = strlen(prefix) + 2 + strlen(st->message) + 1;
    char *m = malloc(n);
    if (!m) return st;
    snprintf(m, n, "%s: %s", prefix, st->message);
    free(st->message);
    st->message = m;
    return st;
}

teexec_code teexec_status_code(const teexec_status *status)
{
    return status ? status->code : TEEXEC_OK;
}

const char *teexec_status_message(const teexec_status *status)
{
    return status ? status->message : "";
}

const char *teexec_status_node(const teexec_status *status)
{
    return status ? status->node : NULL;
}

const char *teexec_status_file(const teexec_status *status)
{
    return status ? status->file : NULL;
}

void teexec_status_destroy(teexec_status *status)
{
    if (!status || status == &oom_status) return;
    free(status->message);
    free(status->file);
    free(status->node);
    free(status);
}

const char *teexec_code_name(teexec_code code)
{
    switch (code) {
    case TEEXEC_OK: return "ok";
    case TEEXEC_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TEEXEC_ERR_BAD_MODEL: return "bad model";
    case TEEXEC_ERR_LIMIT: return "limit exceeded";
    case TEEXEC_ERR_IO: return "i/o error";
    case TEEXEC_ERR_UNSUPPORTED: return "unsupported";
    case TEEXEC_ERR_DEVICE: return "device error";
    case TEEXEC_ERR_NO_MEMORY: return "out of memory";
    case TEEXEC_ERR_INTERNAL: return "internal error";
    case TEEXEC_ERR_CANCELLED: return "cancelled";
    case TEEXEC_ERR_OUT_OF_DEVICE_MEMORY: return "out of device memory";
    case TEEXEC_ERR_COMM: return "communication failure";
    }
    return "unknown error";
}
