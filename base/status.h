/*
 * status.h - building teexec_status objects inside the library.
 *
 * Every fallible internal function returns a teexec_status pointer, NULL on
 * success, exactly like the public API. These helpers create statuses; the
 * public accessors live in status.c too. A status is owned by whoever
 * receives it until it is returned further up or destroyed.
 *
 * Thread-safety: creating and destroying statuses is thread-safe (no shared
 * state). If the allocation of a status itself fails, a static
 * "out of memory" status is returned; teexec_status_destroy recognizes it.
 */
#ifndef TEEXEC_BASE_STATUS_H
#define TEEXEC_BASE_STATUS_H

#include "teexec/teexec.h"

#include <stdarg.h>

#if defined(__GNUC__)
#define TX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TX_NODISCARD __attribute__((warn_unused_result))
#else
#define TX_PRINTF(a, b)
#define TX_NODISCARD
#endif

/* Creates a status with a printf-style message. file and node may be NULL. */
teexec_status *tx_status_new(teexec_code code, const char *file,
                             const char *node, const char *fmt, ...)
    TX_PRINTF(4, 5);
teexec_status *tx_status_vnew(teexec_code code, const char *file,
                              const char *node, const char *fmt, va_list ap)
    TX_PRINTF(4, 0);

/* Shorthands for the most common codes. */
#define tx_error(code, ...) tx_status_new((code), NULL, NULL, __VA_ARGS__)
#define tx_oom() tx_status_new(TEEXEC_ERR_NO_MEMORY, NULL, NULL, "out of memory")

/* Fills in file/node of an existing status where still unset, and returns
 * it (NULL stays NULL). Used as errors travel up through layers that know
 * more context. */
teexec_status *tx_status_with_file(teexec_status *st, const char *file);
teexec_status *tx_status_with_node(teexec_status *st, const char *node);

/* Prefixes the message: "<prefix>: <old message>". Returns st. */
teexec_status *tx_status_prefix(teexec_status *st, const char *fmt, ...)
    TX_PRINTF(2, 3);

/* Propagate a status: `TX_TRY(call());` returns the status on failure. */
#define TX_TRY(expr)                                                     \
    do {                                                                 \
        teexec_status *tx_try_status_ = (expr);                          \
        if (tx_try_status_) return tx_try_status_;                       \
    } while (0)

#endif
