/*
 * cli_common.h - what every teexec subcommand shares: exit statuses, the
 * one-line error report, usage errors.
 *
 * Errors are printed to stderr as exactly one line:
 *     teexec: FILE: node NAME: message
 * (the file and node parts only where known and not already in the
 * message); control characters in names and messages are escaped so the
 * report stays one line. Exit statuses follow DESIGN.md section 4.
 *
 * Uses only the public API. Thread-safety: single-threaded CLI use.
 */
#ifndef TEEXEC_TOOLS_CLI_COMMON_H
#define TEEXEC_TOOLS_CLI_COMMON_H

#include "teexec/teexec.h"

#include <stdbool.h>
#include <stdio.h>

enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_BAD_INPUT = 1,   /* bad model or input file, I/O, limits, memory, internal */
    CLI_EXIT_USAGE = 2,       /* bad command line */
    CLI_EXIT_UNSUPPORTED = 3, /* valid, but teexec cannot do it */
    CLI_EXIT_DEVICE = 4       /* a GPU / CUDA failure */
};

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* The exit status for a failed call's status (NULL -> 0). */
int cli_exit_code(const teexec_status *st);

/* Prints `st` as the one-line report (fallback_file names the file when the
 * status does not), destroys it, and returns its exit status. */
int cli_report(teexec_status *st, const char *fallback_file);

/* Prints "teexec: CMD: <message> (see 'teexec CMD --help')" on one line and
 * returns CLI_EXIT_USAGE. cmd may be NULL for the top level. */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Prints "teexec: CMD: <message>" on one line and returns `code`. */
int cli_fail(int code, const char *cmd, const char *fmt, ...) CLI_PRINTF(3, 4);

/* True if arg is "-h" or "--help". */
bool cli_is_help(const char *arg);

/* The arguments the model commands (run, bench, generate, train) share: -h/--help
 * (prints usage to stdout: *rc = CLI_EXIT_OK), the one model path (a second
 * one: *rc = a usage error), --json (sets *json). True when arg was one of
 * them; *rc is then -1 to go on or the exit status to return. */
bool cli_model_command_arg(const char *cmd, const char *arg, void (*usage)(FILE *),
                           const char **model, bool *json, int *rc);

#endif
