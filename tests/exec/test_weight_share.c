/* test_weight_share.c - the shared device weights' registry
 * (exec/weight_share.h) and the device-memory limit's arithmetic
 * (exec/device_budget.h), without a GPU: the registry's ops here allocate
 * host memory and count what they are asked to do. Also the public calls
 * around them on a CPU session (nothing on the device, the options'
 * checks, the new status code). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec/device_budget.h"
#include "exec/weight_share.h"
#include "teexec/teexec.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fake device: host memory, counted ---- */

typedef struct fake {
    int allocs, frees, fills, finishes;
    size_t bytes_live;
    bool fail_alloc;
    int fail_fill_at; /* the fill that fails (1-based), 0: none */
} fake;

/* the frees come without a ctx (weight_share.h): a global, reset per test */
static fake *g_fake;

typedef struct hdr {
    size_t bytes;
} hdr;

static teexec_status *f_alloc(void *ctx, int device, size_t bytes, void **out)
{
    fake *f = ctx;
    (void)device;
    if (f->fail_alloc) return tx_error(TEEXEC_ERR_OUT_OF_DEVICE_MEMORY, "fake device is full");
    hdr *h = malloc(sizeof(hdr) + bytes);
    if (!h) return tx_oom();
    h->bytes = bytes;
    f->allocs++;
    f->bytes_live += bytes;
    *out = h + 1;
    return NULL;
}

static teexec_status *f_fill(void *ctx, const tx_ws_want *w, void *dst)
{
    fake *f = ctx;
    f->fills++;
    if (f->fail_fill_at && f->fills == f->fail_fill_at)
        return tx_error(TEEXEC_ERR_DEVICE, "fake upload failed");
    memcpy(dst, w->src, w->bytes);
    return NULL;
}

static teexec_status *f_finish(void *ctx)
{
    ((fake *)ctx)->finishes++;
    return NULL;
}

static void f_free(int device, void *ptr)
{
    (void)device;
    hdr *h = (hdr *)ptr - 1;
    g_fake->frees++;
    g_fake->bytes_live -= h->bytes;
    free(h);
}

static const tx_ws_ops kOps = {f_alloc, f_fill, f_finish, f_free};

static void ok(teexec_status *st)
{
    if (st) {
        const char *m = teexec_status_message(st);
        fprintf(stderr, "unexpected: %s\n", m);
        teexec_status_destroy(st);
        fail();
    }
}

/* Three "weights" of 100, 300 and 256 bytes with recognizable contents. */
static unsigned char w_data[3][300];
static void *slots[3];

static void wants3(tx_ws_want *w, int32_t dtype)
{
    static const size_t sizes[3] = {100, 300, 256};
    for (int i = 0; i < 3; i++) {
        memset(w_data[i], 0x10 + i, sizeof w_data[i]);
        w[i] = (tx_ws_want){.value = 7 + i, .dtype = dtype, .bytes = sizes[i], .src = w_data[i],
                            .slot = &slots[i]};
    }
}

static int setup(void **state)
{
    static fake f;
    memset(&f, 0, sizeof f);
    g_fake = &f;
    tx_weight_share *ws = NULL;
    ok(tx_weight_share_create(&ws));
    *state = ws;
    return 0;
}

static int teardown(void **state)
{
    tx_weight_share_destroy(*state);
    return 0;
}

static void test_sizes_round_to_the_alignment(void **state)
{
    (void)state;
    tx_ws_want w[3];
    wants3(w, 1);
    /* 100 -> 256, 300 -> 512, 256 -> 256 */
    assert_int_equal(tx_ws_wants_bytes(w, 3), 1024);
    assert_int_equal(tx_ws_wants_bytes(w, 0), 0);
    w[0].bytes = 0; /* still takes room */
    assert_int_equal(tx_ws_wants_bytes(w, 1), 256);
    w[0].bytes = SIZE_MAX - 10;
    assert_int_equal(tx_ws_wants_bytes(w, 2), SIZE_MAX);
}

static void test_second_acquire_uploads_nothing(void **state)
{
    tx_weight_share *ws = *state;
    fake *f = g_fake;
    tx_ws_want w[3];
    wants3(w, 1);
    tx_ws_lease *a = NULL, *b = NULL;
    ok(tx_weight_share_acquire(ws, 0, w, 3, &kOps, f, &a));
    assert_int_equal(f->allocs, 1);
    assert_int_equal(f->fills, 3);
    assert_int_equal(f->finishes, 1);
    assert_int_equal(tx_ws_lease_bytes(a), 1024);
    assert_int_equal(tx_ws_lease_uploaded(a), 1024);
    void *first[3] = {slots[0], slots[1], slots[2]};
    for (int i = 0; i < 3; i++) {
        assert_non_null(first[i]);
        assert_int_equal(((unsigned char *)first[i])[0], 0x10 + i);
        assert_int_equal((uintptr_t)first[i] % TX_WS_ALIGN, (uintptr_t)first[0] % TX_WS_ALIGN);
    }
    memset(slots, 0, sizeof slots);
    ok(tx_weight_share_acquire(ws, 0, w, 3, &kOps, f, &b));
    assert_int_equal(f->allocs, 1); /* no second copy */
    assert_int_equal(f->fills, 3);
    assert_int_equal(tx_ws_lease_uploaded(b), 0);
    assert_int_equal(tx_ws_lease_bytes(b), 1024);
    for (int i = 0; i < 3; i++) assert_ptr_equal(slots[i], first[i]);
    size_t blocks = 0;
    assert_int_equal(tx_weight_share_bytes(ws, 0, &blocks), 1024);
    assert_int_equal(blocks, 1);
    assert_int_equal(tx_weight_share_bytes(ws, -1, NULL), 1024);
    assert_int_equal(tx_weight_share_bytes(ws, 1, NULL), 0);
    /* the copies live until the last lease goes */
    tx_weight_share_release(ws, a);
    assert_int_equal(f->frees, 0);
    assert_int_equal(tx_weight_share_bytes(ws, -1, NULL), 1024);
    tx_weight_share_release(ws, b);
    assert_int_equal(f->frees, 1);
    assert_int_equal(f->bytes_live, 0);
    assert_int_equal(tx_weight_share_bytes(ws, -1, &blocks), 0);
    assert_int_equal(blocks, 0);
    /* and a later acquire uploads again */
    ok(tx_weight_share_acquire(ws, 0, w, 3, &kOps, f, &a));
    assert_int_equal(f->allocs, 2);
    tx_weight_share_release(ws, a);
    assert_int_equal(f->bytes_live, 0);
}

static void test_dtype_and_device_are_keys(void **state)
{
    tx_weight_share *ws = *state;
    fake *f = g_fake;
    tx_ws_want w[3], w16[3];
    wants3(w, 1);
    wants3(w16, 16);
    tx_ws_lease *a = NULL, *b = NULL, *c = NULL;
    ok(tx_weight_share_acquire(ws, 0, w, 3, &kOps, f, &a));
    ok(tx_weight_share_acquire(ws, 0, w16, 3, &kOps, f, &b)); /* another dtype */
    ok(tx_weight_share_acquire(ws, 1, w, 3, &kOps, f, &c));   /* another device */
    assert_int_equal(f->allocs, 3);
    assert_int_equal(tx_weight_share_bytes(ws, 0, NULL), 2048);
    assert_int_equal(tx_weight_share_bytes(ws, 1, NULL), 1024);
    assert_int_equal(tx_weight_share_bytes(ws, -1, NULL), 3072);
    /* a size mismatch is another copy too, never a wrong one */
    tx_ws_want odd = w[0];
    void *odd_slot = NULL;
    odd.bytes = 99;
    odd.slot = &odd_slot;
    tx_ws_lease *d = NULL;
    ok(tx_weight_share_acquire(ws, 0, &odd, 1, &kOps, f, &d));
    assert_int_equal(f->allocs, 4);
    tx_weight_share_release(ws, a);
    tx_weight_share_release(ws, b);
    tx_weight_share_release(ws, c);
    tx_weight_share_release(ws, d);
    assert_int_equal(f->frees, 4);
    assert_int_equal(f->bytes_live, 0);
}

/* An executor wanting some resident copies and some new ones uploads only
 * the new ones and holds both blocks. */
static void test_partial_overlap_holds_both_blocks(void **state)
{
    tx_weight_share *ws = *state;
    fake *f = g_fake;
    tx_ws_want w[3];
    wants3(w, 1);
    tx_ws_lease *a = NULL, *b = NULL;
    ok(tx_weight_share_acquire(ws, 0, w, 2, &kOps, f, &a)); /* values 7, 8 */
    void *shared = slots[1];
    ok(tx_weight_share_acquire(ws, 0, w + 1, 2, &kOps, f, &b)); /* values 8, 9 */
    assert_ptr_equal(slots[1], shared);
    assert_int_equal(f->allocs, 2);
    assert_int_equal(f->fills, 3);
    assert_int_equal(tx_ws_lease_uploaded(b), 256);
    assert_int_equal(tx_ws_lease_bytes(b), 768);
    /* together: 7, 8, 9 once each */
    const tx_ws_lease *both[3] = {a, NULL, b};
    size_t bytes = 0;
    ok(tx_ws_leases_bytes(both, 3, &bytes));
    assert_int_equal(bytes, 1024);
    ok(tx_ws_leases_bytes(both, 1, &bytes));
    assert_int_equal(bytes, 768);
    ok(tx_ws_leases_bytes(both, 0, &bytes));
    assert_int_equal(bytes, 0);
    tx_weight_share_release(ws, a);
    assert_int_equal(f->frees, 0); /* b still reads value 8 in a's block */
    tx_weight_share_release(ws, b);
    assert_int_equal(f->frees, 2);
    assert_int_equal(f->bytes_live, 0);
}

static void test_same_key_twice_in_one_acquire(void **state)
{
    tx_weight_share *ws = *state;
    fake *f = g_fake;
    tx_ws_want w[3];
    wants3(w, 1);
    void *other = NULL;
    tx_ws_want two[2] = {w[0], w[0]};
    two[1].slot = &other;
    tx_ws_lease *a = NULL;
    ok(tx_weight_share_acquire(ws, 0, two, 2, &kOps, f, &a));
    assert_int_equal(f->fills, 1);
    assert_ptr_equal(slots[0], other);
    assert_int_equal(tx_ws_lease_bytes(a), 256);
    assert_int_equal(tx_weight_share_bytes(ws, -1, NULL), 256);
    tx_weight_share_release(ws, a);
    assert_int_equal(f->bytes_live, 0);
}

static void test_failed_upload_leaves_nothing(void **state)
{
    tx_weight_share *ws = *state;
    fake *f = g_fake;
    tx_ws_want w[3];
    wants3(w, 1);
    tx_ws_lease *a = NULL;
    f->fail_fill_at = 2;
    teexec_status *st = tx_weight_share_acquire(ws, 0, w, 3, &kOps, f, &a);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_DEVICE);
    teexec_status_destroy(st);
    assert_null(a);
    assert_int_equal(f->finishes, 1); /* queued work waited for before the free */
    assert_int_equal(f->frees, f->allocs);
    assert_int_equal(f->bytes_live, 0);
    assert_int_equal(tx_weight_share_bytes(ws, -1, NULL), 0);
    f->fail_fill_at = 0;
    f->fail_alloc = true;
    st = tx_weight_share_acquire(ws, 0, w, 3, &kOps, f, &a);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_OUT_OF_DEVICE_MEMORY);
    teexec_status_destroy(st);
    assert_null(a);
    /* resident copies stay usable after a failure next to them */
    f->fail_alloc = false;
    ok(tx_weight_share_acquire(ws, 0, w, 1, &kOps, f, &a));
    f->fail_alloc = true;
    tx_ws_lease *b = NULL;
    ok(tx_weight_share_acquire(ws, 0, w, 1, &kOps, f, &b)); /* resident: no alloc needed */
    tx_ws_lease *c = NULL;
    st = tx_weight_share_acquire(ws, 0, w, 2, &kOps, f, &c); /* needs one more */
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_OUT_OF_DEVICE_MEMORY);
    teexec_status_destroy(st);
    assert_null(c);
    assert_int_equal(tx_weight_share_bytes(ws, -1, NULL), 256);
    tx_weight_share_release(ws, a);
    assert_int_equal(tx_weight_share_bytes(ws, -1, NULL), 256); /* b holds it */
    tx_weight_share_release(ws, b);
    assert_int_equal(f->bytes_live, 0);
    f->fail_alloc = false;
}

/* ---- threads: one upload for every creator ---- */

typedef struct job {
    tx_weight_share *ws;
    pthread_barrier_t *bar;
    void *slots[3];
    tx_ws_lease *lease;
    teexec_status *st;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    tx_ws_want w[3];
    static const size_t sizes[3] = {100, 300, 256};
    for (int i = 0; i < 3; i++)
        w[i] = (tx_ws_want){.value = 7 + i, .dtype = 1, .bytes = sizes[i], .src = w_data[i],
                            .slot = &j->slots[i]};
    pthread_barrier_wait(j->bar);
    j->st = tx_weight_share_acquire(j->ws, 0, w, 3, &kOps, g_fake, &j->lease);
    return NULL;
}

static void test_threads_upload_once(void **state)
{
    tx_weight_share *ws = *state;
    fake *f = g_fake;
    tx_ws_want w[3];
    wants3(w, 1); /* fills w_data */
    enum { N = 8 };
    pthread_barrier_t bar;
    assert_int_equal(pthread_barrier_init(&bar, NULL, N), 0);
    pthread_t th[N];
    job jobs[N];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < N; i++) {
        jobs[i].ws = ws;
        jobs[i].bar = &bar;
        assert_int_equal(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    }
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    size_t uploaded = 0;
    for (int i = 0; i < N; i++) {
        ok(jobs[i].st);
        uploaded += tx_ws_lease_uploaded(jobs[i].lease);
        for (int k = 0; k < 3; k++) assert_ptr_equal(jobs[i].slots[k], jobs[0].slots[k]);
    }
    assert_int_equal(f->allocs, 1);
    assert_int_equal(uploaded, 1024);
    assert_int_equal(tx_weight_share_bytes(ws, -1, NULL), 1024);
    for (int i = 0; i < N; i++) tx_weight_share_release(ws, jobs[i].lease);
    assert_int_equal(f->frees, 1);
    assert_int_equal(f->bytes_live, 0);
}

/* ---- the device-memory limit ---- */

static void expect_over(teexec_status *st, const char *const *parts)
{
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_OUT_OF_DEVICE_MEMORY);
    const char *m = teexec_status_message(st);
    for (size_t i = 0; parts[i]; i++)
        if (!strstr(m, parts[i])) fail_msg("\"%s\" lacks \"%s\"", m, parts[i]);
    teexec_status_destroy(st);
}

static void test_budget(void **state)
{
    (void)state;
    /* no limit, and fits exactly */
    assert_null(tx_device_budget_check(0, 1000, 1000, 1000, "x"));
    assert_null(tx_device_budget_check(3000, 1000, 1000, 1000, "x"));
    assert_null(tx_device_budget_check(SIZE_MAX, SIZE_MAX - 2, 1, 1, "x"));
    /* one byte over: the total, its parts and the limit */
    expect_over(tx_device_budget_check(2999, 0, 2000, 1000, "cuda executor"),
                (const char *const[]){"cuda executor: needs 3000 bytes", "weights 2000",
                                      "activations and buffers 1000", "limit is 2999 bytes",
                                      NULL});
    expect_over(tx_device_budget_check(2999, 1000, 1000, 1000, "y"),
                (const char *const[]){"needs 3000 bytes", "1000 held by the session's other",
                                      "limit is 2999", NULL});
    /* sums past SIZE_MAX are over any limit, never wrapped */
    expect_over(tx_device_budget_check(SIZE_MAX, SIZE_MAX, 1, 0, "z"),
                (const char *const[]){"more device memory than can be counted", NULL});
    expect_over(tx_device_budget_check(SIZE_MAX, 1, SIZE_MAX, 0, "z"),
                (const char *const[]){"more device memory than can be counted", NULL});
    expect_over(tx_device_budget_check(SIZE_MAX, 0, SIZE_MAX, 1, "z"),
                (const char *const[]){"more device memory than can be counted", NULL});
    expect_over(tx_device_alloc_failed(1048576, "w", "out of memory"),
                (const char *const[]){"w: allocating 1048576 bytes (1.0 MiB)", NULL});
}

/* ---- the public calls on a CPU session ---- */

static void test_public_calls_on_cpu(void **state)
{
    (void)state;
    assert_string_equal(teexec_code_name(TEEXEC_ERR_OUT_OF_DEVICE_MEMORY), "out of device memory");
    teexec_status *bad = teexec_session_options_set_device_memory_limit(NULL, 1);
    assert_int_equal(teexec_status_code(bad), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(bad);
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/exec/data/add_relu.onnx", root ? root : ".");
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m));
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o));
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    /* CPU sessions ignore the device limit, even a tiny one */
    ok(teexec_session_options_set_device_memory_limit(o, 1));
    teexec_session *s = NULL;
    ok(teexec_session_create(m, o, &s));
    size_t wb = 123, ob = 456;
    ok(teexec_session_device_memory(s, &wb, &ob));
    assert_int_equal(wb, 0);
    assert_int_equal(ob, 0);
    ok(teexec_session_device_memory(s, NULL, NULL));
    assert_int_equal(teexec_model_device_weight_bytes(m), 0);
    assert_int_equal(teexec_model_device_weight_bytes(NULL), 0);
    teexec_status *st = teexec_session_device_memory(NULL, &wb, &ob);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    teexec_session_destroy(s);
    teexec_session_options_destroy(o);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_round_to_the_alignment),
        cmocka_unit_test_setup_teardown(test_second_acquire_uploads_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dtype_and_device_are_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_overlap_holds_both_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_key_twice_in_one_acquire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_upload_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_upload_once, setup, teardown),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_public_calls_on_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
