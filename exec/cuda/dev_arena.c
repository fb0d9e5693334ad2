/* dev_arena.c - one device allocation for many buffers (dev_arena.h). */
#include "exec/cuda/dev_arena.h"

#include "exec/device_budget.h"
#include "planner/memory_plan.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

static size_t round_up(size_t v) { return (v + TX_DEV_ALIGN - 1) / TX_DEV_ALIGN * TX_DEV_ALIGN; }

void tx_dev_want(tx_dev_reqs *l, void *slot, size_t bytes)
{
    tx_dev_want_live(l, slot, bytes, 0, INT32_MAX);
}

void tx_dev_want_live(tx_dev_reqs *l, void *slot, size_t bytes, int32_t start, int32_t end)
{
    if (l->oom) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        tx_dev_req *nr = realloc(l->r, cap * sizeof(*nr));
        if (!nr) {
            l->oom = true;
            return;
        }
        l->r = nr;
        l->cap = cap;
    }
    if (start > end) start = end; /* a caller's slip costs sharing, never correctness */
    l->r[l->n++] = (tx_dev_req){(void **)slot, bytes ? bytes : 1, start, end};
}

teexec_status *tx_dev_place(tx_dev_reqs *l, const char *what, const tx_dev_budget *budget,
                            void **arena, size_t *total)
{
    *arena = NULL;
    *total = 0;
    if (l->oom) return tx_oom();
    size_t sum = 0;
    for (size_t i = 0; i < l->n; i++) {
        size_t b = round_up(l->r[i].bytes);
        if (b < l->r[i].bytes || sum + b < sum)
            return tx_error(TEEXEC_ERR_LIMIT, "%s: device memory size overflows", what);
        sum += b;
    }
    l->sum_bytes = sum;
    tx_memory_plan mp = {0};
    mp.alignment = TX_DEV_ALIGN;
    mp.n_tensors = l->n;
    mp.tensors = calloc(l->n ? l->n : 1, sizeof(*mp.tensors));
    if (!mp.tensors) return tx_oom();
    for (size_t i = 0; i < l->n; i++) {
        mp.tensors[i].name = (char *)"a device buffer"; /* for its messages only */
        mp.tensors[i].bytes = l->r[i].bytes;
        mp.tensors[i].start = l->r[i].start;
        mp.tensors[i].end = l->r[i].end;
    }
    teexec_status *st = tx_memory_assign_offsets(&mp);
    size_t bytes = mp.arena_bytes;
    if (st) {
        free(mp.tensors);
        return tx_status_prefix(st, "%s", what);
    }
    if (budget) {
        size_t own = bytes > SIZE_MAX - budget->own_extra ? SIZE_MAX : bytes + budget->own_extra;
        st = tx_device_budget_check(budget->limit, budget->held, budget->weights, own, what);
        if (st) {
            free(mp.tensors);
            return st;
        }
    }
    cudaError_t e = cudaMalloc(arena, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        free(mp.tensors);
        *arena = NULL;
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError(); /* not sticky: clear it for the next call */
            return tx_device_alloc_failed(bytes, what, cudaGetErrorString(e));
        }
        return tx_error(TEEXEC_ERR_DEVICE, "%s: allocating %.1f MiB of device memory: %s", what,
                        (double)bytes / 1048576.0, cudaGetErrorString(e));
    }
    for (size_t i = 0; i < l->n; i++) *l->r[i].slot = (char *)*arena + mp.tensors[i].offset;
    free(mp.tensors);
    *total = bytes;
    return NULL;
}

void tx_dev_reqs_free(tx_dev_reqs *l)
{
    free(l->r);
    l->r = NULL;
    l->n = l->cap = 0;
}
