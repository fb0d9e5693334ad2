/*
 * atomic_write.h - replacing a file so that a crash never leaves it broken.
 *
 * The bytes are written to a new temporary file in the target's folder
 * (same filesystem, so rename is atomic), fsynced, renamed over the target,
 * and the folder is fsynced. On any failure the temporary file is removed
 * and the target is untouched. The new file gets mode 0644.
 *
 * Ownership: nothing is retained. Thread-safety: reentrant; two concurrent
 * writers of the same path each produce a complete file, the last rename
 * wins.
 */
#ifndef TEEXEC_FORMAT_ATOMIC_WRITE_H
#define TEEXEC_FORMAT_ATOMIC_WRITE_H

#include "base/status.h"

#include <stddef.h>

/* Writes the concatenation of `count` pieces (data[i], size[i]) to `path`.
 * Errors (TEEXEC_ERR_IO) name the path and the failing step. */
teexec_status *tx_write_file_atomic(const char *path, size_t count,
                                    const void *const *data,
                                    const size_t *size) TX_NODISCARD;

#endif
