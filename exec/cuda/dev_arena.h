/*
 * dev_arena.h - one device allocation for many buffers: callers first list
 * every buffer (the pointer to set and its size), then one cudaMalloc is made
 * and each pointer is set to its 256-byte aligned place in it. The CUDA
 * executors use it so that runs never allocate.
 *
 * Ownership: the list owns its request array (tx_dev_reqs_free); the arena
 * belongs to the caller (cudaFree). Thread-safety: one thread per list.
 */
#ifndef TEEXEC_EXEC_CUDA_DEV_ARENA_H
#define TEEXEC_EXEC_CUDA_DEV_ARENA_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tx_dev_req {
    void **slot;
    size_t bytes;
} tx_dev_req;

typedef struct tx_dev_reqs {
    tx_dev_req *r;
    size_t n, cap;
    bool oom;   /* a request could not be recorded: place fails */
} tx_dev_reqs;

#define TX_DEV_ALIGN 256u

/* Records that *slot (a pointer of any type) wants `bytes` (0 counts as 1). */
void tx_dev_want(tx_dev_reqs *l, void *slot, size_t bytes);

/* One cudaMalloc for every request; sets each slot; *arena and *total get
 * the allocation. `what` names the owner in the error message. */
teexec_status *tx_dev_place(tx_dev_reqs *l, const char *what, void **arena,
                            size_t *total) TX_NODISCARD;

void tx_dev_reqs_free(tx_dev_reqs *l);

#endif
