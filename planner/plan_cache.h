/*
 * plan_cache.h - the one per-shape plan cache of every executor (the CPU
 * session, the CUDA session; declared in plan.h), its entries with executor
 * payloads, its build counter and its test seam: a cache whose plans come
 * from another builder than tx_fuser_plan_build, and the key hash.
 *
 * The key (plan_cache.c) holds copies of: the graph's address (one cache
 * may serve several graphs), the dtype and shape of every caller-fed graph
 * input (graph inputs that are not initializers, from req->vals; unknown
 * shapes compare equal only to unknown), every field of the recipe, every
 * field of the device caps, training, deterministic, params_frozen and the
 * input_needs_grad flags (NULL reads as all false). A lookup compares the
 * hash, then the whole key.
 *
 * Bound and eviction: a cache holds at most `capacity` entries; inserting
 * one more drops the entry inserted longest ago (oldest insert first, a
 * ring: a hit does not refresh an entry, so the order of eviction depends
 * only on the order of the builds). The executors' bounds: a CPU session
 * keeps 32 entries (TX_MAX_PLANS), a CUDA session 4 (TX_MAX_CUDA_EXECUTORS).
 *
 * Entries: each holds the planner's plan and, for executors whose
 * per-shape state is more than the plan (inference results, buffers,
 * captured CUDA graphs), an opaque payload. An entry is built by the
 * cache's builder on a miss and released by its destructor when dropped
 * or when the cache is freed; either the plan or the payload may be NULL,
 * not both (an executor that only plans, or one that plans inside its
 * payload, stores NULL for the plan).
 *
 * Ownership: the cache owns its keys and entries (released with the
 * destructor); a plan or payload handed out stays valid until it is
 * dropped, which takes `capacity` later builds, or until the cache is
 * freed. Thread-safety: one thread at a time per cache; every executor
 * keeps its own cache (one per session), so the one-thread-per-session
 * rule covers it.
 */
#ifndef TEEXEC_PLANNER_PLAN_CACHE_H
#define TEEXEC_PLANNER_PLAN_CACHE_H

#include "planner/plan.h"

typedef teexec_status *(*tx_plan_build_fn)(const tx_ir_graph *g, const tx_plan_request *req,
                                           tx_fuser_plan **out);
typedef void (*tx_plan_free_fn)(tx_fuser_plan *p);

/* An entry's builder: the plan and the payload for (g, req); ctx is the
 * cache's. On failure it returns a status and leaves nothing to free. */
typedef teexec_status *(*tx_plan_entry_build_fn)(void *ctx, const tx_ir_graph *g,
                                                 const tx_plan_request *req, tx_fuser_plan **plan,
                                                 void **payload);
/* Releases one entry (plan and payload, either may be NULL). */
typedef void (*tx_plan_entry_free_fn)(void *ctx, tx_fuser_plan *plan, void *payload);

/* A cache whose entries come from `build` (ctx is passed to both; borrowed
 * for the cache's life). */
teexec_status *tx_plan_cache_create_entries(size_t capacity, tx_plan_entry_build_fn build,
                                            tx_plan_entry_free_fn free_fn, void *ctx,
                                            tx_plan_cache **out) TX_NODISCARD;

/* The entry for (g, req), built and inserted when absent (dropping the
 * oldest insert when full). *plan and *payload (each may be NULL) get the
 * entry's; *hit (may be NULL) whether it was cached. */
teexec_status *tx_plan_cache_lookup(tx_plan_cache *c, const tx_ir_graph *g,
                                    const tx_plan_request *req, const tx_fuser_plan **plan,
                                    void **payload, bool *hit) TX_NODISCARD;

/* Entries built over the cache's life (every miss that built one, evicted
 * or not): how tests count plannings. */
uint64_t tx_plan_cache_builds(const tx_plan_cache *c);

/* As tx_plan_cache_create, with the builder and destructor given. */
teexec_status *tx_plan_cache_create_with(size_t capacity, tx_plan_build_fn build, tx_plan_free_fn free_fn,
                                         tx_plan_cache **out) TX_NODISCARD;

/* The hash a request keys to (equal requests hash equal). */
uint64_t tx_plan_cache_hash(const tx_ir_graph *g, const tx_plan_request *req);

/* Plans held now. */
size_t tx_plan_cache_size(const tx_plan_cache *c);

#endif
