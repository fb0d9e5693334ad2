/* plan_cache.c - plans keyed on everything a plan depends on (key in
 * plan_cache.h), bounded, the oldest insert dropped first (a hit does not
 * refresh an entry), each with an optional executor payload. TE keys its fusion cache on
 * the recipe's class only (te-ops.md 3.3), so changing a field of the same
 * recipe keeps a stale plan; here every field is part of the key. */
#include "planner/plan_cache.h"

#include <stdlib.h>
#include <string.h>

typedef struct plan_key {
    const tx_ir_graph *g;
    tx_recipe recipe;
    tx_device_caps device;
    bool training, deterministic, params_frozen;
    size_t n_fed;
    bool *needs_grad;      /* n_fed */
    teexec_dtype *dtypes;  /* n_fed */
    bool *known;           /* n_fed */
    tx_shape *shapes;      /* n_fed */
    uint64_t hash;
} plan_key;

typedef struct cache_entry {
    plan_key key;
    tx_fuser_plan *plan;
    void *payload;
} cache_entry;

struct tx_plan_cache {
    cache_entry *entries; /* ring of capacity slots, oldest insert at `oldest` */
    size_t capacity, count, oldest;
    uint64_t builds;
    /* entry builder and destructor; the plan-only ones (create_with) run
     * through the adapters below with the cache itself as ctx */
    tx_plan_entry_build_fn build_entry;
    tx_plan_entry_free_fn free_entry;
    void *ctx;
    tx_plan_build_fn build;
    tx_plan_free_fn free_fn;
};

/* ---- hashing (FNV-1a over each field's value, never over padding) ---------- */

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

#define MIX(h, v)                                    \
    do {                                             \
        __typeof__(v) mix_tmp_ = (v);                \
        (h) = mix((h), &mix_tmp_, sizeof(mix_tmp_)); \
    } while (0)

static uint64_t hash_recipe(uint64_t h, const tx_recipe *r)
{
    MIX(h, (int)r->kind);
    MIX(h, (int)r->hybrid);
    MIX(h, r->amax_history_len);
    MIX(h, (int)r->mxfp8_2d_weights);
    MIX(h, (int)r->nvfp4_rht);
    MIX(h, (int)r->nvfp4_stochastic);
    MIX(h, (int)r->nvfp4_2d_weights);
    MIX(h, (int)r->pow2_scales);
    MIX(h, (int)r->keep_first_last_hp);
    MIX(h, (int)r->compute_dtype);
    return h;
}

static bool recipe_equal(const tx_recipe *a, const tx_recipe *b)
{
    return a->kind == b->kind && a->hybrid == b->hybrid && a->amax_history_len == b->amax_history_len &&
           a->mxfp8_2d_weights == b->mxfp8_2d_weights && a->nvfp4_rht == b->nvfp4_rht &&
           a->nvfp4_stochastic == b->nvfp4_stochastic && a->nvfp4_2d_weights == b->nvfp4_2d_weights &&
           a->pow2_scales == b->pow2_scales &&
           a->keep_first_last_hp == b->keep_first_last_hp && a->compute_dtype == b->compute_dtype;
}

static uint64_t hash_device(uint64_t h, const tx_device_caps *d)
{
    h = mix(h, d->name, strnlen(d->name, sizeof d->name));
    MIX(h, d->sm);
    MIX(h, (int)d->fp8_gemm);
    MIX(h, (int)d->fp8_block_gemm);
    MIX(h, (int)d->mx_gemm);
    MIX(h, d->memory_bytes);
    return h;
}

static bool device_equal(const tx_device_caps *a, const tx_device_caps *b)
{
    return strncmp(a->name, b->name, sizeof a->name) == 0 && a->sm == b->sm && a->fp8_gemm == b->fp8_gemm &&
           a->fp8_block_gemm == b->fp8_block_gemm && a->mx_gemm == b->mx_gemm &&
           a->memory_bytes == b->memory_bytes;
}

/* ---- keys ------------------------------------------------------------------- */

static void key_free(plan_key *k)
{
    free(k->needs_grad);
    free(k->dtypes);
    free(k->known);
    free(k->shapes);
    memset(k, 0, sizeof(*k));
}

static size_t fed_inputs(const tx_ir_graph *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_inputs; i++)
        if (!(g->values[g->inputs[i]].flags & TX_IR_VALUE_INITIALIZER)) n++;
    return n;
}

static void hash_key(plan_key *k)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    MIX(h, (uintptr_t)k->g);
    h = hash_recipe(h, &k->recipe);
    h = hash_device(h, &k->device);
    MIX(h, (int)k->training);
    MIX(h, (int)k->deterministic);
    MIX(h, (int)k->params_frozen);
    MIX(h, k->n_fed);
    for (size_t i = 0; i < k->n_fed; i++) {
        MIX(h, (int)k->needs_grad[i]);
        MIX(h, (int)k->dtypes[i]);
        MIX(h, (int)k->known[i]);
        if (!k->known[i]) continue;
        MIX(h, k->shapes[i].rank);
        for (int32_t d = 0; d < k->shapes[i].rank; d++) MIX(h, k->shapes[i].dims[d]);
    }
    k->hash = h;
}

static teexec_status *key_make(const tx_ir_graph *g, const tx_plan_request *req, plan_key *k)
{
    memset(k, 0, sizeof(*k));
    k->g = g;
    k->recipe = req->recipe;
    k->device = req->device;
    k->training = req->training;
    k->deterministic = req->deterministic;
    k->params_frozen = req->params_frozen;
    k->n_fed = fed_inputs(g);
    size_t n = k->n_fed ? k->n_fed : 1;
    k->needs_grad = calloc(n, sizeof(bool));
    k->dtypes = calloc(n, sizeof(teexec_dtype));
    k->known = calloc(n, sizeof(bool));
    k->shapes = calloc(n, sizeof(tx_shape));
    if (!k->needs_grad || !k->dtypes || !k->known || !k->shapes) {
        key_free(k);
        return tx_oom();
    }
    size_t f = 0;
    for (size_t i = 0; i < g->n_inputs; i++) {
        int32_t v = g->inputs[i];
        if (g->values[v].flags & TX_IR_VALUE_INITIALIZER) continue;
        k->needs_grad[f] = req->input_needs_grad && f < req->n_inputs && req->input_needs_grad[f];
        const tx_infer_value *iv = req->vals && (size_t)v < req->n_vals ? &req->vals[v] : NULL;
        k->dtypes[f] = iv ? iv->dtype : g->values[v].dtype;
        if (iv && iv->shape_known) {
            k->known[f] = true;
            k->shapes[f] = iv->shape;
        }
        f++;
    }
    hash_key(k);
    return NULL;
}

static bool key_equal(const plan_key *a, const plan_key *b)
{
    if (a->hash != b->hash || a->g != b->g || !recipe_equal(&a->recipe, &b->recipe) ||
        !device_equal(&a->device, &b->device) || a->training != b->training ||
        a->deterministic != b->deterministic || a->params_frozen != b->params_frozen || a->n_fed != b->n_fed)
        return false;
    for (size_t i = 0; i < a->n_fed; i++) {
        if (a->needs_grad[i] != b->needs_grad[i] || a->dtypes[i] != b->dtypes[i] || a->known[i] != b->known[i])
            return false;
        if (a->known[i] && !tx_shape_equal(&a->shapes[i], &b->shapes[i])) return false;
    }
    return true;
}

uint64_t tx_plan_cache_hash(const tx_ir_graph *g, const tx_plan_request *req)
{
    plan_key k;
    if (key_make(g, req, &k)) return 0; /* out of memory: no key, no hash */
    uint64_t h = k.hash;
    key_free(&k);
    return h;
}

/* ---- the cache -------------------------------------------------------------- */

static teexec_status *plan_only_build(void *ctx, const tx_ir_graph *g, const tx_plan_request *req,
                                      tx_fuser_plan **plan, void **payload)
{
    const tx_plan_cache *c = ctx;
    *payload = NULL;
    TX_TRY(c->build(g, req, plan));
    if (!*plan) return tx_error(TEEXEC_ERR_INTERNAL, "plan cache: the builder returned no plan");
    return NULL;
}

static void plan_only_free(void *ctx, tx_fuser_plan *plan, void *payload)
{
    const tx_plan_cache *c = ctx;
    (void)payload;
    c->free_fn(plan);
}

static teexec_status *cache_alloc(size_t capacity, tx_plan_cache **out)
{
    *out = NULL;
    if (!capacity)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan cache: capacity must be at least 1");
    if (capacity > SIZE_MAX / sizeof(cache_entry))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan cache: capacity %zu too large", capacity);
    tx_plan_cache *c = calloc(1, sizeof(*c));
    if (!c) return tx_oom();
    c->entries = calloc(capacity, sizeof(*c->entries));
    if (!c->entries) {
        free(c);
        return tx_oom();
    }
    c->capacity = capacity;
    *out = c;
    return NULL;
}

teexec_status *tx_plan_cache_create_entries(size_t capacity, tx_plan_entry_build_fn build,
                                            tx_plan_entry_free_fn free_fn, void *ctx,
                                            tx_plan_cache **out)
{
    if (out) *out = NULL;
    if (!out || !build || !free_fn)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan cache: a builder and a destructor are needed");
    TX_TRY(cache_alloc(capacity, out));
    (*out)->build_entry = build;
    (*out)->free_entry = free_fn;
    (*out)->ctx = ctx;
    return NULL;
}

teexec_status *tx_plan_cache_create_with(size_t capacity, tx_plan_build_fn build, tx_plan_free_fn free_fn,
                                         tx_plan_cache **out)
{
    *out = NULL;
    if (!capacity || !build || !free_fn)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan cache: capacity must be at least 1 and a builder given");
    TX_TRY(cache_alloc(capacity, out));
    tx_plan_cache *c = *out;
    c->build_entry = plan_only_build;
    c->free_entry = plan_only_free;
    c->ctx = c;
    c->build = build;
    c->free_fn = free_fn;
    return NULL;
}

teexec_status *tx_plan_cache_create(size_t capacity, tx_plan_cache **out)
{
    return tx_plan_cache_create_with(capacity, tx_fuser_plan_build, tx_fuser_plan_free, out);
}

void tx_plan_cache_free(tx_plan_cache *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->count; i++) {
        cache_entry *e = &c->entries[(c->oldest + i) % c->capacity];
        c->free_entry(c->ctx, e->plan, e->payload);
        key_free(&e->key);
    }
    free(c->entries);
    free(c);
}

size_t tx_plan_cache_size(const tx_plan_cache *c) { return c ? c->count : 0; }

uint64_t tx_plan_cache_builds(const tx_plan_cache *c) { return c ? c->builds : 0; }

teexec_status *tx_plan_cache_lookup(tx_plan_cache *c, const tx_ir_graph *g, const tx_plan_request *req,
                                    const tx_fuser_plan **plan, void **payload, bool *hit)
{
    if (plan) *plan = NULL;
    if (payload) *payload = NULL;
    if (hit) *hit = false;
    if (!c || !g || !req) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan cache: missing argument");
    plan_key k;
    TX_TRY(key_make(g, req, &k));
    for (size_t i = 0; i < c->count; i++) {
        cache_entry *e = &c->entries[(c->oldest + i) % c->capacity];
        if (key_equal(&e->key, &k)) {
            key_free(&k);
            if (plan) *plan = e->plan;
            if (payload) *payload = e->payload;
            if (hit) *hit = true;
            return NULL;
        }
    }
    tx_fuser_plan *np = NULL;
    void *npay = NULL;
    teexec_status *st = c->build_entry(c->ctx, g, req, &np, &npay);
    if (st) {
        key_free(&k);
        return st;
    }
    if (!np && !npay) {
        key_free(&k);
        return tx_error(TEEXEC_ERR_INTERNAL, "plan cache: the builder returned nothing");
    }
    c->builds++;
    if (c->count == c->capacity) { /* drop the oldest insert */
        cache_entry *e = &c->entries[c->oldest];
        c->free_entry(c->ctx, e->plan, e->payload);
        key_free(&e->key);
        c->oldest = (c->oldest + 1) % c->capacity;
        c->count--;
    }
    cache_entry *e = &c->entries[(c->oldest + c->count) % c->capacity];
    e->key = k;
    e->plan = np;
    e->payload = npay;
    c->count++;
    if (plan) *plan = np;
    if (payload) *payload = npay;
    return NULL;
}

teexec_status *tx_plan_cache_get(tx_plan_cache *c, const tx_ir_graph *g, const tx_plan_request *req,
                                 const tx_fuser_plan **out, bool *hit)
{
    return tx_plan_cache_lookup(c, g, req, out, NULL, hit);
}
