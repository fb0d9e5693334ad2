/*
 * dev_arena.h - one device allocation for many buffers: callers first list
 * every buffer (the pointer to set, its size and optionally the schedule
 * steps it is live over), then one cudaMalloc is made and each pointer is
 * set to its 256-byte aligned place in it. Buffers whose lifetimes do not
 * overlap may share bytes: the offsets come from the memory plan's packer
 * (planner/memory_plan.h, tx_memory_assign_offsets: largest first, lowest
 * free offset). The CUDA executors use it so that runs never allocate.
 *
 * Ownership: the list owns its request array (tx_dev_reqs_free); the arena
 * belongs to the caller (cudaFree). Thread-safety: one thread per list.
 */
#ifndef TEEXEC_EXEC_CUDA_DEV_ARENA_H
#define TEEXEC_EXEC_CUDA_DEV_ARENA_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_dev_req {
    void **slot;
    size_t bytes;
    int32_t start, end;  /* live over steps [start, end]; whole run: 0, INT32_MAX */
} tx_dev_req;

typedef struct tx_dev_reqs {
    tx_dev_req *r;
    size_t n, cap;
    bool oom;          /* a request could not be recorded: place fails */
    size_t sum_bytes;  /* after place: what the buffers take without sharing */
} tx_dev_reqs;

#define TX_DEV_ALIGN 256u

/* Records that *slot (a pointer of any type) wants `bytes` (0 counts as 1)
 * for the whole run. */
void tx_dev_want(tx_dev_reqs *l, void *slot, size_t bytes);

/* The same, live only over steps [start, end] (start <= end): the caller
 * promises that nothing reads or writes the buffer outside them, and that
 * every use happens in step order on one stream. */
void tx_dev_want_live(tx_dev_reqs *l, void *slot, size_t bytes, int32_t start, int32_t end);

/* A device-memory limit the allocation must respect (exec/device_budget.h):
 * limit 0 = none; held, weights and own_extra (the owner's other own
 * allocations) are what the owner counts besides the arena. */
typedef struct tx_dev_budget {
    size_t limit, held, weights, own_extra;
} tx_dev_budget;

/* One cudaMalloc for every request; sets each slot; *arena and *total get
 * the allocation. `what` names the owner in the error message. With a
 * budget (may be NULL), an arena that would take the owner past its limit
 * is refused before anything is allocated; that and a cudaMalloc out of
 * memory give TEEXEC_ERR_OUT_OF_DEVICE_MEMORY with the bytes asked. */
teexec_status *tx_dev_place(tx_dev_reqs *l, const char *what, const tx_dev_budget *budget,
                            void **arena, size_t *total) TX_NODISCARD;

void tx_dev_reqs_free(tx_dev_reqs *l);

#endif
