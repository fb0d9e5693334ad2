/*
 * block_cache.h - large tensor buffers kept from one run to the next.
 *
 * A CPU run allocates its intermediate tensors with tx_tensor_alloc and
 * frees them before it returns. Each fresh buffer of a few MiB comes from
 * the kernel as new pages, which it zeroes and maps on first touch. The
 * bench GPT-2 block spent about a fifth of its run doing that
 * (bench/results/cpu_gpt2_block.md). A session therefore binds a cache to
 * its thread for the length of a run:
 *   - tx_tensor_release puts buffers of at least TX_BLOCK_CACHE_MIN bytes
 *     into it instead of freeing them;
 *   - tx_tensor_alloc takes the smallest cached buffer that holds the
 *     request and is at most twice its size, and zeroes the bytes it hands
 *     out, so the buffer reads as calloc's would.
 * Cached buffers are plain malloc blocks, so code that frees a tensor's
 * data itself stays correct. A buffer is recorded as large as the tensor
 * that last held it (the bytes beyond stay unused): steady runs of the same
 * shapes reuse their own buffers.
 *
 * tx_block_cache_end_run frees what a run left unused that an earlier run
 * had cached. A cache therefore holds at most what one run freed.
 * tx_block_cache_free frees everything.
 *
 * Thread-safety: binding is per thread (thread-local), and a cache may be
 * bound to one thread at a time; threads with no cache bound allocate and
 * free as before. Never prints or exits.
 */
#ifndef TEEXEC_BASE_BLOCK_CACHE_H
#define TEEXEC_BASE_BLOCK_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Smaller buffers come from malloc's own free lists; not worth keeping. */
#define TX_BLOCK_CACHE_MIN ((size_t)256 * 1024)

typedef struct tx_block_entry {
    void *p;
    size_t bytes;
    uint64_t run; /* the run that cached it */
} tx_block_entry;

typedef struct tx_block_cache {
    tx_block_entry *e;
    size_t n, cap;
    uint64_t run; /* runs begun */
    size_t hits, misses; /* for tests and profiles */
} tx_block_cache;

/* Binds c (NULL: none) to the calling thread and starts a run on it.
 * Returns the cache bound before, which the caller restores with
 * tx_block_cache_end_run. */
tx_block_cache *tx_block_cache_begin_run(tx_block_cache *c);

/* Ends the run on the bound cache: frees the buffers cached by earlier runs
 * that this one did not reuse. Then binds `previous`. */
void tx_block_cache_end_run(tx_block_cache *previous);

/* Frees every cached buffer; c stays usable (empty). Accepts NULL. */
void tx_block_cache_free(tx_block_cache *c);

/* For tensor.c: a zeroed buffer of `bytes` from the bound cache, or NULL
 * (no cache bound, too small, nothing fits). */
void *tx_block_cache_take(size_t bytes);

/* For tensor.c: keeps p (a malloc block of at least `bytes`) in the bound
 * cache. Returns 0 when it did not (then the caller frees p). */
int tx_block_cache_put(void *p, size_t bytes);

#endif
