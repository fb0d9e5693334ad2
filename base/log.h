/*
 * log.h - the library's one way to say something: the user's log callback.
 * tx_log is thread-safe as long as the callback is (see teexec.h).
 */
#ifndef TEEXEC_BASE_LOG_H
#define TEEXEC_BASE_LOG_H

#include "base/status.h"

void tx_log(teexec_log_level level, const char *fmt, ...) TX_PRINTF(2, 3);
/* True when a message at `level` would be delivered (skip costly formatting). */
int tx_log_enabled(teexec_log_level level);
/* Sets the calling thread's run tag (NULL: none), which tx_log puts before
 * every message as `run "<tag>": `, and returns the previous one so that
 * the caller restores it when its run ends. The string is borrowed: it must
 * live until it is replaced. */
const char *tx_log_swap_tag(const char *tag);

#endif
