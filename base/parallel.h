/*
 * parallel.h - a fork-join loop over [0, n) for the CPU kernels whose work
 * the BLAS threads do not cover (attention, for one).
 *
 * tx_parallel_for splits [0, n) into up to `threads` contiguous chunks of
 * whole items and runs fn on each: chunk 0 on the calling thread, the
 * others on threads created for the call and joined before it returns. A
 * thread that cannot be created leaves its chunk to the caller, so the loop
 * always completes. Every chunk runs even when another fails; the first
 * failing chunk's status (in chunk order) is returned and the others are
 * destroyed. fn must only write what its own items own: chunks run
 * concurrently and in no particular order.
 *
 * No state of its own; thread-safe; never prints or exits.
 */
#ifndef TEEXEC_BASE_PARALLEL_H
#define TEEXEC_BASE_PARALLEL_H

#include "base/status.h"

#include <stddef.h>

/* fn(ctx, begin, end, worker): items [begin, end) on worker 0..threads-1. */
typedef teexec_status *(*tx_parallel_fn)(void *ctx, size_t begin, size_t end, int worker);

/* The most threads tx_parallel_for uses for one call. */
enum { TX_PARALLEL_MAX_THREADS = 64 };

/* threads < 2 (or n < 2) runs fn(ctx, 0, n, 0) inline. */
teexec_status *tx_parallel_for(size_t n, int threads, tx_parallel_fn fn, void *ctx) TX_NODISCARD;

#endif
