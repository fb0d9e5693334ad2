/*
 * weight_share.h - the device copies of a model's initializers, uploaded
 * once per (device, value, dtype) and shared by every CUDA executor of the
 * model: every inference session and every input shape within one. Each
 * executor keeps its own activations, streams and CUDA graphs; trainers
 * never come here (they update their parameters: each keeps a private copy
 * in its own arena).
 *
 * An executor asks for the copies it reads (tx_weight_share_acquire): those
 * already resident are handed out; the missing ones are uploaded, in one
 * device allocation (a block) per acquire, through the caller's ops. The
 * executor holds a lease on every block it reads from; releasing the last
 * lease on a block frees it. So the weights stay on the device while any
 * executor of the model reads them, and no longer.
 *
 * The registry knows nothing of CUDA: the ops allocate, fill and free (the
 * CUDA executor's ops: exec/cuda/cuda_executor_build.c; a unit test's: host
 * memory), so its accounting is tested without a GPU.
 *
 * What is not shared: copies quantized for a recipe (FP8 / MXFP8 / NVFP4
 * weights) are made by each Linear on every forward into its executor's
 * own state (they depend on the recipe's scales and on delayed-scaling
 * history, per session); they count as the executor's own memory.
 *
 * Ownership: the model owns its registry (created at load, destroyed with
 * the model; by then every session is gone, so every lease is released).
 * A lease belongs to the executor that acquired it. Thread-safety: every
 * call takes the registry's mutex; an acquire holds it while it uploads,
 * so sessions created concurrently from threads wait for the one upload
 * rather than making a second copy. The ops' fill and finish run under
 * the mutex: they must not call back into the registry.
 */
#ifndef TEEXEC_EXEC_WEIGHT_SHARE_H
#define TEEXEC_EXEC_WEIGHT_SHARE_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tx_weight_share tx_weight_share;
typedef struct tx_ws_lease tx_ws_lease;

/* Copies within a block are aligned like the executors' arenas. */
#define TX_WS_ALIGN 256u

typedef struct tx_ws_want {
    /* the key (with the device): the value's index in the lowered model's
     * graph, the copy's dtype (teexec_dtype) and size */
    int32_t value;
    int32_t dtype;
    size_t bytes;
    const void *src; /* for the caller's fill (a host tensor, say) */
    void **slot;     /* receives the device pointer */
} tx_ws_want;

typedef struct tx_ws_ops {
    /* one allocation of `bytes` on `device` */
    teexec_status *(*alloc)(void *ctx, int device, size_t bytes, void **out);
    /* writes want's value into dst (may queue work: finish waits for it) */
    teexec_status *(*fill)(void *ctx, const tx_ws_want *want, void *dst);
    /* every fill is complete and visible to any stream of the device */
    teexec_status *(*finish)(void *ctx);
    /* frees what alloc made; called without the acquirer's ctx (the last
     * release may come from another executor) */
    void (*free)(int device, void *ptr);
} tx_ws_ops;

teexec_status *tx_weight_share_create(tx_weight_share **out) TX_NODISCARD;
/* Frees the registry; a block still leased (a caller's bug) is freed too. */
void tx_weight_share_destroy(tx_weight_share *ws);

/* Sets *want[i].slot for every want: from the resident copies of `device`
 * or from a new block filled now. On failure nothing is leased or left
 * allocated and the slots are unspecified. n may be 0 (an empty lease). */
teexec_status *tx_weight_share_acquire(tx_weight_share *ws, int device, const tx_ws_want *wants,
                                       size_t n, const tx_ws_ops *ops, void *ctx,
                                       tx_ws_lease **out) TX_NODISCARD;
/* Releases a lease (NULL is ignored); frees the blocks no lease holds. */
void tx_weight_share_release(tx_weight_share *ws, tx_ws_lease *lease);

/* Bytes of the copies a lease reads (each rounded up to TX_WS_ALIGN), and
 * of those, what its acquire uploaded (0 when everything was resident). */
size_t tx_ws_lease_bytes(const tx_ws_lease *lease);
size_t tx_ws_lease_uploaded(const tx_ws_lease *lease);
/* Bytes of the distinct copies n leases read together (a copy two leases
 * share counts once): a session's weights over its executors. NULL leases
 * are skipped. Fails only for an allocation failure (then *bytes is 0). */
teexec_status *tx_ws_leases_bytes(const tx_ws_lease *const *leases, size_t n,
                                  size_t *bytes) TX_NODISCARD;

/* The bytes of every resident block on `device` (-1: every device) and
 * their number (may be NULL). */
size_t tx_weight_share_bytes(tx_weight_share *ws, int device, size_t *blocks);

/* The sum of the sizes rounded up to TX_WS_ALIGN: what an acquire of these
 * wants reads, resident or not (callers check a memory limit with it
 * before acquiring). SIZE_MAX when it overflows. */
size_t tx_ws_wants_bytes(const tx_ws_want *wants, size_t n);

#endif
