/*
 * plan_cache.h - the plan cache's test seam: a cache whose plans come from
 * another builder than tx_fuser_plan_build (tests count builds with it), and
 * the key hash. The cache itself is declared in plan.h.
 *
 * The key (plan_cache.c) holds copies of: the graph's address (one cache
 * may serve several graphs), the dtype and shape of every caller-fed graph
 * input (graph inputs that are not initializers, from req->vals; unknown
 * shapes compare equal only to unknown), every field of the recipe, every
 * field of the device caps, training, deterministic, params_frozen and the
 * input_needs_grad flags (NULL reads as all false). A lookup compares the
 * hash, then the whole key.
 *
 * Ownership: the cache owns its plans (freed with free_fn) and keys.
 * Thread-safety: one thread at a time per cache.
 */
#ifndef TEEXEC_PLANNER_PLAN_CACHE_H
#define TEEXEC_PLANNER_PLAN_CACHE_H

#include "planner/plan.h"

typedef teexec_status *(*tx_plan_build_fn)(const tx_ir_graph *g, const tx_plan_request *req,
                                           tx_fuser_plan **out);
typedef void (*tx_plan_free_fn)(tx_fuser_plan *p);

/* As tx_plan_cache_create, with the builder and destructor given. */
teexec_status *tx_plan_cache_create_with(size_t capacity, tx_plan_build_fn build, tx_plan_free_fn free_fn,
                                         tx_plan_cache **out) TX_NODISCARD;

/* The hash a request keys to (equal requests hash equal). */
uint64_t tx_plan_cache_hash(const tx_ir_graph *g, const tx_plan_request *req);

/* Plans held now. */
size_t tx_plan_cache_size(const tx_plan_cache *c);

#endif
