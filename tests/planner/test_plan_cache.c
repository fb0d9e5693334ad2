/* Tests for the plan cache: an equal request hits (the same plan), a change
 * of any one key component misses, the cache drops its oldest plan past its
 * capacity, entries with executor payloads (built, counted, dropped in
 * insertion order whatever the hits, released by the destructor), and the
 * real builder is used by tx_plan_cache_create. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "planner/plan_cache.h"
#include "plan_test_util.h"

static int builds;

static teexec_status *counting_build(const tx_ir_graph *g, const tx_plan_request *req, tx_fuser_plan **out)
{
    (void)g;
    tx_fuser_plan *p = calloc(1, sizeof(*p));
    if (!p) return tx_oom();
    p->recipe = req->recipe;
    p->training = req->training;
    builds++;
    *out = p;
    return NULL;
}

static void counting_free(tx_fuser_plan *p) { free(p); }

typedef struct base {
    pt_model m;
    tx_infer_value *vals; /* a private copy the test may change */
    bool needs[1];
    tx_plan_request req;
} base;

static void base_make(base *b)
{
    assert_null(pt_model_load("models/te_mlp/model.onnx", false, &b->m));
    b->vals = calloc(b->m.n_vals, sizeof(*b->vals));
    assert_non_null(b->vals);
    for (size_t v = 0; v < b->m.n_vals; v++) {
        b->vals[v].dtype = b->m.vals[v].dtype;
        b->vals[v].shape = b->m.vals[v].shape;
        b->vals[v].shape_known = b->m.vals[v].shape_known;
    }
    b->req = pt_request(&b->m, "mxfp8", "sm_100", true);
    b->needs[0] = false;
    b->req.input_needs_grad = b->needs;
    b->req.n_inputs = 1;
    b->req.vals = b->vals;
}

static void base_free(base *b)
{
    free(b->vals);
    pt_model_free(&b->m);
}

/* A fresh copy of the base request (own arrays), so equality is by value. */
typedef struct req_copy {
    tx_plan_request req;
    bool needs[1];
    tx_infer_value *vals;
} req_copy;

static void copy_req(const base *b, req_copy *c)
{
    c->req = b->req;
    c->needs[0] = b->needs[0];
    c->req.input_needs_grad = c->needs;
    c->vals = calloc(b->m.n_vals, sizeof(*c->vals));
    assert_non_null(c->vals);
    memcpy(c->vals, b->vals, b->m.n_vals * sizeof(*c->vals));
    c->req.vals = c->vals;
}

static const tx_fuser_plan *get(tx_plan_cache *c, const tx_ir_graph *g, const tx_plan_request *r, bool *hit)
{
    const tx_fuser_plan *p = NULL;
    teexec_status *st = tx_plan_cache_get(c, g, r, &p, hit);
    if (st) fail_msg("%s", teexec_status_message(st));
    assert_non_null(p);
    return p;
}

static int32_t x_value(const base *b) { return b->m.g->inputs[0]; }

/* Each mutation changes one key component of a copy of the base request. */
typedef void (*mutate_fn)(const base *b, req_copy *c);
static void m_shape(const base *b, req_copy *c) { c->vals[x_value(b)].shape.dims[0] = 4; }
static void m_rank(const base *b, req_copy *c) { c->vals[x_value(b)].shape.rank = 2; }
static void m_known(const base *b, req_copy *c) { c->vals[x_value(b)].shape_known = false; }
static void m_dtype(const base *b, req_copy *c) { c->vals[x_value(b)].dtype = TEEXEC_DTYPE_BFLOAT16; }
static void m_kind(const base *b, req_copy *c) { (void)b; c->req.recipe.kind = TX_RECIPE_NVFP4; }
static void m_hybrid(const base *b, req_copy *c) { (void)b; c->req.recipe.hybrid = true; }
static void m_history(const base *b, req_copy *c) { (void)b; c->req.recipe.amax_history_len = 16; }
static void m_mx2d(const base *b, req_copy *c) { (void)b; c->req.recipe.mxfp8_2d_weights = true; }
static void m_rht(const base *b, req_copy *c) { (void)b; c->req.recipe.nvfp4_rht = false; }
static void m_sr(const base *b, req_copy *c) { (void)b; c->req.recipe.nvfp4_stochastic = false; }
static void m_nv2d(const base *b, req_copy *c) { (void)b; c->req.recipe.nvfp4_2d_weights = false; }
static void m_pow2(const base *b, req_copy *c) { (void)b; c->req.recipe.pow2_scales = !c->req.recipe.pow2_scales; }
static void m_first_last(const base *b, req_copy *c) { (void)b; c->req.recipe.keep_first_last_hp = true; }
static void m_compute(const base *b, req_copy *c) { (void)b; c->req.recipe.compute_dtype = TEEXEC_DTYPE_FLOAT16; }
static void m_training(const base *b, req_copy *c) { (void)b; c->req.training = false; }
static void m_needs(const base *b, req_copy *c) { (void)b; c->needs[0] = true; }
static void m_frozen(const base *b, req_copy *c) { (void)b; c->req.params_frozen = true; }
static void m_determ(const base *b, req_copy *c) { (void)b; c->req.deterministic = true; }
static void m_sm(const base *b, req_copy *c) { (void)b; c->req.device.sm = 90; }
static void m_name(const base *b, req_copy *c) { (void)b; strcpy(c->req.device.name, "B200"); }
static void m_fp8(const base *b, req_copy *c) { (void)b; c->req.device.fp8_gemm = false; }
static void m_fp8b(const base *b, req_copy *c) { (void)b; c->req.device.fp8_block_gemm = !c->req.device.fp8_block_gemm; }
static void m_mx(const base *b, req_copy *c) { (void)b; c->req.device.mx_gemm = false; }
static void m_mem(const base *b, req_copy *c) { (void)b; c->req.device.memory_bytes = 1u << 30; }

static void equal_request_hits(void **state)
{
    (void)state;
    base b;
    base_make(&b);
    tx_plan_cache *c;
    assert_null(tx_plan_cache_create_with(8, counting_build, counting_free, &c));
    builds = 0;
    bool hit = true;
    const tx_fuser_plan *p1 = get(c, b.m.g, &b.req, &hit);
    assert_false(hit);
    req_copy rc;
    copy_req(&b, &rc);
    const tx_fuser_plan *p2 = get(c, b.m.g, &rc.req, &hit);
    assert_true(hit);
    assert_ptr_equal(p1, p2);
    assert_int_equal(builds, 1);
    assert_int_equal(tx_plan_cache_hash(b.m.g, &b.req), tx_plan_cache_hash(b.m.g, &rc.req));
    /* NULL input_needs_grad reads as all false: equal to the base ({false}) */
    rc.req.input_needs_grad = NULL;
    get(c, b.m.g, &rc.req, &hit);
    assert_true(hit);
    free(rc.vals);
    tx_plan_cache_free(c);
    base_free(&b);
}

static void each_key_component_misses(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        mutate_fn fn;
    } muts[] = {{"input shape", m_shape},       {"input rank", m_rank},
                {"shape known", m_known},       {"input dtype", m_dtype},
                {"recipe kind", m_kind},        {"hybrid", m_hybrid},
                {"amax history", m_history},    {"mxfp8 2d", m_mx2d},
                {"nvfp4 rht", m_rht},           {"nvfp4 sr", m_sr},
                {"nvfp4 2d", m_nv2d},           {"pow2 scales", m_pow2},
                {"first/last hp", m_first_last},
                {"compute dtype", m_compute},   {"training", m_training},
                {"input needs grad", m_needs},  {"params frozen", m_frozen},
                {"deterministic", m_determ},    {"device sm", m_sm},
                {"device name", m_name},        {"device fp8", m_fp8},
                {"device fp8 block", m_fp8b},   {"device mx", m_mx},
                {"device memory", m_mem}};
    size_t n = sizeof muts / sizeof muts[0];
    base b;
    base_make(&b);
    tx_plan_cache *c;
    assert_null(tx_plan_cache_create_with(n + 2, counting_build, counting_free, &c));
    builds = 0;
    bool hit;
    const tx_fuser_plan *p0 = get(c, b.m.g, &b.req, &hit);
    assert_false(hit);
    for (size_t i = 0; i < n; i++) {
        req_copy rc;
        copy_req(&b, &rc);
        muts[i].fn(&b, &rc);
        const tx_fuser_plan *p = get(c, b.m.g, &rc.req, &hit);
        if (hit) fail_msg("a change of %s hit the cache", muts[i].what);
        assert_ptr_not_equal(p, p0);
        assert_int_equal(builds, (int)(i + 2));
        /* the changed request now hits its own plan */
        assert_ptr_equal(get(c, b.m.g, &rc.req, &hit), p);
        assert_true(hit);
        free(rc.vals);
    }
    /* the base is still there */
    assert_ptr_equal(get(c, b.m.g, &b.req, &hit), p0);
    assert_true(hit);
    /* another graph with an equal request misses */
    pt_model other;
    assert_null(pt_model_load("models/te_mlp/model.onnx", false, &other));
    get(c, other.g, &b.req, &hit);
    assert_false(hit);
    pt_model_free(&other);
    tx_plan_cache_free(c);
    base_free(&b);
}

static void oldest_dropped_past_capacity(void **state)
{
    (void)state;
    base b;
    base_make(&b);
    tx_plan_cache *c;
    assert_null(tx_plan_cache_create_with(2, counting_build, counting_free, &c));
    builds = 0;
    bool hit;
    req_copy r1, r2;
    copy_req(&b, &r1);
    copy_req(&b, &r2);
    r1.req.training = false;
    r2.req.deterministic = true;
    get(c, b.m.g, &b.req, &hit);
    get(c, b.m.g, &r1.req, &hit);
    assert_int_equal(tx_plan_cache_size(c), 2);
    get(c, b.m.g, &r2.req, &hit); /* drops the base request's plan */
    assert_false(hit);
    assert_int_equal(tx_plan_cache_size(c), 2);
    get(c, b.m.g, &r1.req, &hit);
    assert_true(hit);
    get(c, b.m.g, &b.req, &hit);
    assert_false(hit);
    assert_int_equal(builds, 4);
    free(r1.vals);
    free(r2.vals);
    tx_plan_cache_free(c);
    base_free(&b);
}

static teexec_status *failing_build(const tx_ir_graph *g, const tx_plan_request *req, tx_fuser_plan **out)
{
    (void)g;
    (void)req;
    *out = NULL;
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "cannot plan this");
}

static void bad_arguments_and_failures(void **state)
{
    (void)state;
    tx_plan_cache *c = (tx_plan_cache *)1;
    teexec_status *st = tx_plan_cache_create(0, &c);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_null(c);
    teexec_status_destroy(st);
    tx_plan_cache_free(NULL);
    base b;
    base_make(&b);
    assert_null(tx_plan_cache_create_with(2, failing_build, counting_free, &c));
    const tx_fuser_plan *p = (const tx_fuser_plan *)1;
    bool hit = true;
    st = tx_plan_cache_get(c, b.m.g, &b.req, &p, &hit);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_null(p);
    assert_false(hit);
    assert_int_equal(tx_plan_cache_size(c), 0);
    teexec_status_destroy(st);
    tx_plan_cache_free(c);
    base_free(&b);
}

/* ---- entries with payloads ------------------------------------------------ */

typedef struct payload_log {
    int made, freed;
    int last_freed;   /* id of the payload freed last */
    bool with_plan;   /* entries carry a plan beside the payload */
} payload_log;

typedef struct payload {
    int id;
} payload;

static teexec_status *payload_build(void *ctx, const tx_ir_graph *g, const tx_plan_request *req,
                                    tx_fuser_plan **plan, void **out)
{
    payload_log *log = ctx;
    *plan = NULL;
    *out = NULL;
    if (log->with_plan) TX_TRY(counting_build(g, req, plan));
    payload *p = malloc(sizeof(*p));
    if (!p) {
        free(*plan);
        *plan = NULL;
        return tx_oom();
    }
    p->id = log->made++;
    *out = p;
    return NULL;
}

static void payload_free(void *ctx, tx_fuser_plan *plan, void *pl)
{
    payload_log *log = ctx;
    log->freed++;
    log->last_freed = ((payload *)pl)->id;
    free(plan);
    free(pl);
}

static int lookup_id(tx_plan_cache *c, const tx_ir_graph *g, const tx_plan_request *r, bool *hit)
{
    void *pl = NULL;
    teexec_status *st = tx_plan_cache_lookup(c, g, r, NULL, &pl, hit);
    if (st) fail_msg("%s", teexec_status_message(st));
    assert_non_null(pl);
    return ((payload *)pl)->id;
}

static void payload_entries_counted_and_dropped_in_insert_order(void **state)
{
    (void)state;
    base b;
    base_make(&b);
    payload_log log = {0};
    tx_plan_cache *c;
    assert_null(tx_plan_cache_create_entries(2, payload_build, payload_free, &log, &c));
    req_copy r1, r2;
    copy_req(&b, &r1);
    copy_req(&b, &r2);
    r1.req.training = false;
    r2.req.deterministic = true;
    bool hit;
    assert_int_equal(lookup_id(c, b.m.g, &b.req, &hit), 0);
    assert_false(hit);
    assert_int_equal(lookup_id(c, b.m.g, &b.req, &hit), 0);
    assert_true(hit);
    assert_int_equal(lookup_id(c, b.m.g, &r1.req, &hit), 1);
    assert_int_equal(tx_plan_cache_builds(c), 2);
    /* a hit does not refresh: the base entry (inserted first) is dropped
     * although it was used last */
    assert_int_equal(lookup_id(c, b.m.g, &b.req, &hit), 0);
    assert_true(hit);
    assert_int_equal(lookup_id(c, b.m.g, &r2.req, &hit), 2);
    assert_false(hit);
    assert_int_equal(log.freed, 1);
    assert_int_equal(log.last_freed, 0);
    assert_int_equal(tx_plan_cache_size(c), 2);
    assert_int_equal(lookup_id(c, b.m.g, &r1.req, &hit), 1);
    assert_true(hit);
    /* re-planning the dropped request counts as a build */
    assert_int_equal(lookup_id(c, b.m.g, &b.req, &hit), 3);
    assert_false(hit);
    assert_int_equal(tx_plan_cache_builds(c), 4);
    assert_int_equal(log.last_freed, 1);
    tx_plan_cache_free(c);
    assert_int_equal(log.freed, 4); /* every payload released once */

    /* with a plan beside the payload: both are handed out */
    payload_log log2 = {.with_plan = true};
    assert_null(tx_plan_cache_create_entries(1, payload_build, payload_free, &log2, &c));
    const tx_fuser_plan *fp = NULL;
    void *pl = NULL;
    assert_null(tx_plan_cache_lookup(c, b.m.g, &b.req, &fp, &pl, &hit));
    assert_non_null(fp);
    assert_non_null(pl);
    assert_true(fp->training);
    tx_plan_cache_free(c);
    assert_int_equal(log2.freed, 1);

    teexec_status *st = tx_plan_cache_create_entries(2, NULL, payload_free, &log, &c);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_null(c);
    teexec_status_destroy(st);
    free(r1.vals);
    free(r2.vals);
    base_free(&b);
}

static teexec_status *empty_build(void *ctx, const tx_ir_graph *g, const tx_plan_request *req,
                                  tx_fuser_plan **plan, void **out)
{
    (void)ctx;
    (void)g;
    (void)req;
    *plan = NULL;
    *out = NULL;
    return NULL;
}

static void entry_with_nothing_refused(void **state)
{
    (void)state;
    base b;
    base_make(&b);
    payload_log log = {0};
    tx_plan_cache *c;
    assert_null(tx_plan_cache_create_entries(2, empty_build, payload_free, &log, &c));
    bool hit = true;
    teexec_status *st = tx_plan_cache_lookup(c, b.m.g, &b.req, NULL, NULL, &hit);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INTERNAL);
    assert_false(hit);
    assert_int_equal(tx_plan_cache_size(c), 0);
    assert_int_equal(tx_plan_cache_builds(c), 0);
    teexec_status_destroy(st);
    tx_plan_cache_free(c);
    base_free(&b);
}

static void real_builder(void **state)
{
    (void)state;
    base b;
    base_make(&b);
    tx_plan_cache *c;
    assert_null(tx_plan_cache_create(4, &c));
    bool hit;
    const tx_fuser_plan *p1 = get(c, b.m.g, &b.req, &hit);
    assert_false(hit);
    assert_true(p1->n_groups > 0);
    assert_true(p1->memory.n_tensors > 0);
    const tx_fuser_plan *p2 = get(c, b.m.g, &b.req, &hit);
    assert_true(hit);
    assert_ptr_equal(p1, p2);
    tx_plan_cache_free(c);
    base_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(equal_request_hits),
        cmocka_unit_test(each_key_component_misses),
        cmocka_unit_test(oldest_dropped_past_capacity),
        cmocka_unit_test(bad_arguments_and_failures),
        cmocka_unit_test(payload_entries_counted_and_dropped_in_insert_order),
        cmocka_unit_test(entry_with_nothing_refused),
        cmocka_unit_test(real_builder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
