/*
 * cli_common.c - exit statuses and one-line error reports (cli_common.h).
 */
#include "cli_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cli_exit_code(const teexec_status *st)
{
    if (!st) return CLI_EXIT_OK;
    switch (teexec_status_code(st)) {
    case TEEXEC_OK: return CLI_EXIT_OK;
    case TEEXEC_ERR_UNSUPPORTED: return CLI_EXIT_UNSUPPORTED;
    case TEEXEC_ERR_DEVICE:
    case TEEXEC_ERR_OUT_OF_DEVICE_MEMORY:
    /* another rank (or its link) failed: the multi-GPU run's device side */
    case TEEXEC_ERR_COMM:
        return CLI_EXIT_DEVICE;
    /* The CLI validates its own arguments, so an invalid argument reaching
     * the library is about a file the user named: bad input. */
    case TEEXEC_ERR_INVALID_ARGUMENT:
    case TEEXEC_ERR_BAD_MODEL:
    case TEEXEC_ERR_LIMIT:
    case TEEXEC_ERR_IO:
    case TEEXEC_ERR_NO_MEMORY:
    case TEEXEC_ERR_INTERNAL:
    /* the CLI never cancels its runs */
    case TEEXEC_ERR_CANCELLED:
        return CLI_EXIT_BAD_INPUT;
    }
    return CLI_EXIT_BAD_INPUT;
}

/* Writes s with control characters escaped, so one report is one line. */
static void put_sanitized(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n' || *p == '\r') fputc(' ', f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
}

int cli_report(teexec_status *st, const char *fallback_file)
{
    if (!st) return CLI_EXIT_OK;
    int code = cli_exit_code(st);
    const char *msg = teexec_status_message(st);
    const char *file = teexec_status_file(st);
    const char *node = teexec_status_node(st);
    if (!file) file = fallback_file;

    fputs("teexec: ", stderr);
    /* Skip parts the message already names, to keep the line readable. */
    if (file && file[0] && !strstr(msg, file)) {
        put_sanitized(stderr, file);
        fputs(": ", stderr);
    }
    if (node && node[0]) {
        char quoted[512];
        snprintf(quoted, sizeof quoted, "node \"%s\"", node);
        if (!strstr(msg, quoted)) {
            fputs("node ", stderr);
            put_sanitized(stderr, node);
            fputs(": ", stderr);
        }
    }
    if (teexec_status_code(st) == TEEXEC_ERR_INTERNAL) fputs("internal error: ", stderr);
    put_sanitized(stderr, msg[0] ? msg : teexec_code_name(teexec_status_code(st)));
    fputc('\n', stderr);
    teexec_status_destroy(st);
    return code;
}

static void vreport(const char *cmd, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    fputs("teexec: ", stderr);
    if (cmd) fprintf(stderr, "%s: ", cmd);
    put_sanitized(stderr, buf);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    if (cmd) fprintf(stderr, " (see 'teexec %s --help')\n", cmd);
    else fputs(" (see 'teexec --help')\n", stderr);
    return CLI_EXIT_USAGE;
}

int cli_fail(int code, const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

bool cli_is_help(const char *arg)
{
    return arg && (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0);
}

bool cli_model_command_arg(const char *cmd, const char *arg, void (*usage)(FILE *),
                           const char **model, bool *json, int *rc)
{
    *rc = -1;
    if (cli_is_help(arg)) {
        usage(stdout);
        *rc = CLI_EXIT_OK;
        return true;
    }
    if (arg[0] != '-') {
        if (*model) *rc = cli_usage_error(cmd, "more than one model given ('%s')", arg);
        else *model = arg;
        return true;
    }
    if (strcmp(arg, "--json") == 0) {
        *json = true;
        return true;
    }
    return false;
}
