/* dev_arena.c - one device allocation for many buffers (dev_arena.h). */
#include "exec/cuda/dev_arena.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

static size_t round_up(size_t v) { return (v + TX_DEV_ALIGN - 1) / TX_DEV_ALIGN * TX_DEV_ALIGN; }

void tx_dev_want(tx_dev_reqs *l, void *slot, size_t bytes)
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
    l->r[l->n++] = (tx_dev_req){(void **)slot, bytes ? bytes : 1};
}

teexec_status *tx_dev_place(tx_dev_reqs *l, const char *what, void **arena, size_t *total)
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
    cudaError_t e = cudaMalloc(arena, sum ? sum : 1);
    if (e != cudaSuccess) {
        *arena = NULL;
        return tx_error(TEEXEC_ERR_DEVICE, "%s: allocating %.1f MiB of device memory: %s", what,
                        (double)sum / 1048576.0, cudaGetErrorString(e));
    }
    size_t off = 0;
    for (size_t i = 0; i < l->n; i++) {
        *l->r[i].slot = (char *)*arena + off;
        off += round_up(l->r[i].bytes);
    }
    *total = sum;
    return NULL;
}

void tx_dev_reqs_free(tx_dev_reqs *l)
{
    free(l->r);
    l->r = NULL;
    l->n = l->cap = 0;
}
