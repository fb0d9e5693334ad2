/* tx_parallel_for: every item is visited exactly once, chunks are
 * contiguous and balanced, worker ids are distinct, and the first failing
 * chunk's status comes back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/parallel.h"

#include <string.h>

enum { N = 1000 };

typedef struct visit {
    int hits[N];
    size_t begin[TX_PARALLEL_MAX_THREADS], end[TX_PARALLEL_MAX_THREADS];
    int calls[TX_PARALLEL_MAX_THREADS];
    int fail_worker; /* -1: none */
    int fail_worker2;
} visit;

static teexec_status *mark(void *ctx, size_t begin, size_t end, int worker)
{
    visit *v = ctx;
    for (size_t i = begin; i < end; i++) v->hits[i]++; /* each item owned by one chunk */
    v->begin[worker] = begin;
    v->end[worker] = end;
    v->calls[worker]++;
    if (worker == v->fail_worker || worker == v->fail_worker2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "chunk %d failed", worker);
    return NULL;
}

static void each_item_once(void **state)
{
    (void)state;
    for (int threads = 0; threads <= 9; threads++) {
        static visit v;
        memset(&v, 0, sizeof v);
        v.fail_worker = v.fail_worker2 = -1;
        assert_null(tx_parallel_for(N, threads, mark, &v));
        for (int i = 0; i < N; i++) assert_int_equal(v.hits[i], 1);
        int used = threads < 2 ? 1 : threads;
        size_t at = 0;
        for (int w = 0; w < used; w++) {
            assert_int_equal(v.calls[w], 1);
            assert_int_equal(v.begin[w], at); /* contiguous, in worker order */
            size_t len = v.end[w] - v.begin[w];
            assert_true(len == N / (size_t)used || len == N / (size_t)used + 1);
            at = v.end[w];
        }
        assert_int_equal(at, N);
    }
}

static void fewer_items_than_threads(void **state)
{
    (void)state;
    static visit v;
    memset(&v, 0, sizeof v);
    v.fail_worker = v.fail_worker2 = -1;
    assert_null(tx_parallel_for(3, 8, mark, &v));
    for (int i = 0; i < 3; i++) assert_int_equal(v.hits[i], 1);
    for (int w = 3; w < 8; w++) assert_int_equal(v.calls[w], 0); /* no empty chunks */
    memset(&v, 0, sizeof v);
    v.fail_worker = v.fail_worker2 = -1;
    assert_null(tx_parallel_for(0, 4, mark, &v)); /* nothing to do: one empty inline call */
    assert_int_equal(v.calls[0], 1);
    assert_int_equal(v.end[0], 0);
}

static void first_failing_chunk_wins(void **state)
{
    (void)state;
    static visit v;
    memset(&v, 0, sizeof v);
    v.fail_worker = 3;
    v.fail_worker2 = 1;
    teexec_status *st = tx_parallel_for(N, 4, mark, &v);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "chunk 1 failed"));
    teexec_status_destroy(st);
    for (int i = 0; i < N; i++) assert_int_equal(v.hits[i], 1); /* every chunk still ran */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_item_once),
        cmocka_unit_test(fewer_items_than_threads),
        cmocka_unit_test(first_failing_chunk_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
