/* block_cache.c - large tensor buffers kept from one run to the next
 * (block_cache.h). */
#include "base/block_cache.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local tx_block_cache *bound;

tx_block_cache *tx_block_cache_begin_run(tx_block_cache *c)
{
    tx_block_cache *prev = bound;
    bound = c;
    if (c) c->run++;
    return prev;
}

void tx_block_cache_end_run(tx_block_cache *previous)
{
    tx_block_cache *c = bound;
    if (c) {
        size_t keep = 0;
        for (size_t i = 0; i < c->n; i++) {
            if (c->e[i].run == c->run) c->e[keep++] = c->e[i];
            else free(c->e[i].p); /* cached before this run, not reused in it */
        }
        c->n = keep;
    }
    bound = previous;
}

void tx_block_cache_free(tx_block_cache *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->e[i].p);
    free(c->e);
    c->e = NULL;
    c->n = c->cap = 0;
}

void *tx_block_cache_take(size_t bytes)
{
    tx_block_cache *c = bound;
    if (!c || bytes < TX_BLOCK_CACHE_MIN) return NULL;
    size_t best = c->n;
    for (size_t i = 0; i < c->n; i++) {
        size_t b = c->e[i].bytes;
        if (b >= bytes && b / 2 <= bytes && (best == c->n || b < c->e[best].bytes)) best = i;
    }
    if (best == c->n) {
        c->misses++;
        return NULL;
    }
    void *p = c->e[best].p;
    c->e[best] = c->e[--c->n];
    c->hits++;
    memset(p, 0, bytes); /* what calloc would have given */
    return p;
}

int tx_block_cache_put(void *p, size_t bytes)
{
    tx_block_cache *c = bound;
    if (!c || !p || bytes < TX_BLOCK_CACHE_MIN) return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        tx_block_entry *e = realloc(c->e, cap * sizeof(*e));
        if (!e) return 0; /* then it is simply freed */
        c->e = e;
        c->cap = cap;
    }
    c->e[c->n++] = (tx_block_entry){p, bytes, c->run};
    return 1;
}
