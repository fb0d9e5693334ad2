/* weight_share.c - a model's shared device copies of its initializers
 * (weight_share.h): blocks of copies in a list under one mutex, each with
 * the number of leases reading it. Lookups are linear: a model has a few
 * hundred initializers and an acquire happens once per executor. */
#include "exec/weight_share.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct ws_block ws_block;

typedef struct ws_entry {
    int32_t value, dtype;
    size_t bytes;   /* as asked */
    size_t rounded; /* its room in the block */
    void *ptr;
    ws_block *block;
} ws_entry;

struct ws_block {
    ws_block *next;
    int device;
    void *base;
    size_t bytes;
    size_t refs; /* leases reading it */
    void (*free_fn)(int device, void *ptr);
    ws_entry *entries;
    size_t n_entries;
};

struct tx_weight_share {
    pthread_mutex_t mu;
    ws_block *blocks;
};

struct tx_ws_lease {
    ws_block **blocks;
    size_t n_blocks;
    const ws_entry **entries; /* one per want, in order */
    size_t n_entries;
    size_t bytes, uploaded;
};

static size_t round_up(size_t v)
{
    if (v > SIZE_MAX - (TX_WS_ALIGN - 1)) return SIZE_MAX;
    return (v + TX_WS_ALIGN - 1) / TX_WS_ALIGN * TX_WS_ALIGN;
}

size_t tx_ws_wants_bytes(const tx_ws_want *wants, size_t n)
{
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        size_t b = round_up(wants[i].bytes ? wants[i].bytes : 1);
        if (b == SIZE_MAX || sum > SIZE_MAX - b) return SIZE_MAX;
        sum += b;
    }
    return sum;
}

teexec_status *tx_weight_share_create(tx_weight_share **out)
{
    *out = NULL;
    tx_weight_share *ws = calloc(1, sizeof(*ws));
    if (!ws) return tx_oom();
    if (pthread_mutex_init(&ws->mu, NULL) != 0) {
        free(ws);
        return tx_error(TEEXEC_ERR_INTERNAL, "cannot create the shared weights' mutex");
    }
    *out = ws;
    return NULL;
}

static void block_free(ws_block *b)
{
    if (b->base && b->free_fn) b->free_fn(b->device, b->base);
    free(b->entries);
    free(b);
}

void tx_weight_share_destroy(tx_weight_share *ws)
{
    if (!ws) return;
    for (ws_block *b = ws->blocks, *next; b; b = next) {
        next = b->next;
        block_free(b);
    }
    pthread_mutex_destroy(&ws->mu);
    free(ws);
}

static const ws_entry *find(const tx_weight_share *ws, int device, const tx_ws_want *w)
{
    for (const ws_block *b = ws->blocks; b; b = b->next) {
        if (b->device != device) continue;
        for (size_t i = 0; i < b->n_entries; i++) {
            const ws_entry *e = &b->entries[i];
            if (e->value == w->value && e->dtype == w->dtype && e->bytes == w->bytes) return e;
        }
    }
    return NULL;
}

static void lease_free(tx_ws_lease *l)
{
    if (!l) return;
    free(l->blocks);
    free(l->entries);
    free(l);
}

/* Adds b to the lease's blocks unless there already. */
static void lease_add_block(tx_ws_lease *l, ws_block *b)
{
    for (size_t i = 0; i < l->n_blocks; i++)
        if (l->blocks[i] == b) return;
    l->blocks[l->n_blocks++] = b;
}

/* The block of copies for the wants no resident copy answers (their
 * indices in `missing`), allocated and filled. */
static teexec_status *upload_block(int device, const tx_ws_want *wants, const size_t *missing,
                                   size_t n_missing, const tx_ws_ops *ops, void *ctx,
                                   ws_block **out)
{
    *out = NULL;
    ws_block *b = calloc(1, sizeof(*b));
    if (!b) return tx_oom();
    b->device = device;
    b->free_fn = ops->free;
    b->entries = calloc(n_missing, sizeof(*b->entries));
    if (!b->entries) {
        free(b);
        return tx_oom();
    }
    size_t total = 0;
    for (size_t k = 0; k < n_missing; k++) {
        const tx_ws_want *w = &wants[missing[k]];
        ws_entry *e = &b->entries[k];
        e->value = w->value;
        e->dtype = w->dtype;
        e->bytes = w->bytes;
        e->rounded = round_up(w->bytes ? w->bytes : 1);
        e->block = b;
        if (e->rounded == SIZE_MAX || total > SIZE_MAX - e->rounded) {
            block_free(b);
            return tx_error(TEEXEC_ERR_LIMIT, "shared weights: the size overflows");
        }
        total += e->rounded;
    }
    b->n_entries = n_missing;
    b->bytes = total;
    teexec_status *st = ops->alloc(ctx, device, total, &b->base);
    if (st) {
        b->base = NULL;
        block_free(b);
        return st;
    }
    size_t off = 0;
    for (size_t k = 0; k < n_missing && !st; k++) {
        ws_entry *e = &b->entries[k];
        e->ptr = (char *)b->base + off;
        off += e->rounded;
        st = ops->fill(ctx, &wants[missing[k]], e->ptr);
    }
    /* even after a failed fill: queued work must end before the free */
    teexec_status *fin = ops->finish(ctx);
    if (!st) st = fin;
    else teexec_status_destroy(fin);
    if (st) {
        block_free(b);
        return st;
    }
    *out = b;
    return NULL;
}

teexec_status *tx_weight_share_acquire(tx_weight_share *ws, int device, const tx_ws_want *wants,
                                       size_t n, const tx_ws_ops *ops, void *ctx,
                                       tx_ws_lease **out)
{
    *out = NULL;
    if (!ws || !ops || (n && !wants))
        return tx_error(TEEXEC_ERR_INTERNAL, "shared weights: bad acquire");
    tx_ws_lease *l = calloc(1, sizeof(*l));
    size_t *missing = calloc(n ? n : 1, sizeof(*missing));
    if (l) {
        /* at most one new block plus one per want already resident */
        l->blocks = calloc(n + 1, sizeof(*l->blocks));
        l->entries = calloc(n ? n : 1, sizeof(*l->entries));
    }
    if (!l || !missing || !l->blocks || !l->entries) {
        lease_free(l);
        free(missing);
        return tx_oom();
    }
    l->n_entries = n;
    pthread_mutex_lock(&ws->mu);
    size_t n_missing = 0;
    for (size_t i = 0; i < n; i++) {
        l->entries[i] = find(ws, device, &wants[i]);
        if (!l->entries[i]) {
            /* the same key twice in one acquire: one copy */
            bool dup = false;
            for (size_t k = 0; k < n_missing && !dup; k++) {
                const tx_ws_want *o = &wants[missing[k]];
                dup = o->value == wants[i].value && o->dtype == wants[i].dtype &&
                      o->bytes == wants[i].bytes;
            }
            if (!dup) missing[n_missing++] = i;
        }
    }
    ws_block *fresh = NULL;
    teexec_status *st = NULL;
    if (n_missing) st = upload_block(device, wants, missing, n_missing, ops, ctx, &fresh);
    if (st) {
        pthread_mutex_unlock(&ws->mu);
        lease_free(l);
        free(missing);
        return st;
    }
    if (fresh) {
        fresh->next = ws->blocks;
        ws->blocks = fresh;
        l->uploaded = fresh->bytes;
    }
    for (size_t i = 0; i < n; i++) {
        if (!l->entries[i]) l->entries[i] = find(ws, device, &wants[i]);
        lease_add_block(l, l->entries[i]->block);
        *wants[i].slot = l->entries[i]->ptr;
    }
    for (size_t i = 0; i < l->n_blocks; i++) l->blocks[i]->refs++;
    pthread_mutex_unlock(&ws->mu);
    free(missing);
    /* what it reads: each distinct copy once */
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++) seen = l->entries[k] == l->entries[i];
        if (!seen) bytes += l->entries[i]->rounded;
    }
    l->bytes = bytes;
    *out = l;
    return NULL;
}

void tx_weight_share_release(tx_weight_share *ws, tx_ws_lease *l)
{
    if (!ws || !l) return;
    pthread_mutex_lock(&ws->mu);
    for (size_t i = 0; i < l->n_blocks; i++) {
        ws_block *b = l->blocks[i];
        if (--b->refs) continue;
        for (ws_block **p = &ws->blocks; *p; p = &(*p)->next)
            if (*p == b) {
                *p = b->next;
                break;
            }
        block_free(b);
    }
    pthread_mutex_unlock(&ws->mu);
    lease_free(l);
}

size_t tx_ws_lease_bytes(const tx_ws_lease *l) { return l ? l->bytes : 0; }
size_t tx_ws_lease_uploaded(const tx_ws_lease *l) { return l ? l->uploaded : 0; }

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

teexec_status *tx_ws_leases_bytes(const tx_ws_lease *const *leases, size_t n, size_t *bytes)
{
    *bytes = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (leases[i]) total += leases[i]->n_entries;
    if (!total) return NULL;
    const ws_entry **all = malloc(total * sizeof(*all));
    if (!all) return tx_oom();
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; leases[i] && j < leases[i]->n_entries; j++)
            all[k++] = leases[i]->entries[j];
    qsort(all, total, sizeof(*all), cmp_ptr);
    size_t sum = 0;
    for (size_t i = 0; i < total; i++)
        if (i == 0 || all[i] != all[i - 1]) sum += all[i]->rounded;
    free(all);
    *bytes = sum;
    return NULL;
}

size_t tx_weight_share_bytes(tx_weight_share *ws, int device, size_t *blocks)
{
    size_t sum = 0, nb = 0;
    if (ws) {
        pthread_mutex_lock(&ws->mu);
        for (const ws_block *b = ws->blocks; b; b = b->next)
            if (device < 0 || b->device == device) {
                sum += b->bytes;
                nb++;
            }
        pthread_mutex_unlock(&ws->mu);
    }
    if (blocks) *blocks = nb;
    return sum;
}
