/* The run-to-run block cache (base/block_cache.h) behind tx_tensor_alloc:
 * a large buffer freed in a run comes back zeroed in the next allocation
 * that fits, small ones are not kept, nothing is cached with no cache
 * bound, stale buffers go at the end of the next run, binding nests, and
 * a buffer kept by the cache can still be freed by whoever owns it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/block_cache.h"
#include "base/tensor.h"

#include <stdlib.h>
#include <string.h>

#define BIG ((int64_t)TX_BLOCK_CACHE_MIN) /* floats: 4x the minimum in bytes */

static void big_buffer_comes_back_zeroed(void **state)
{
    (void)state;
    tx_block_cache c = {0};
    tx_block_cache *prev = tx_block_cache_begin_run(&c);
    tx_tensor a = {0}, b = {0};
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG}));
    void *pa = a.data;
    memset(pa, 0xab, a.nbytes);
    tx_tensor_release(&a);
    assert_int_equal(c.n, 1);
    /* the same size: the same buffer, zeroed */
    assert_null(tx_tensor_alloc(&b, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG}));
    assert_ptr_equal(b.data, pa);
    for (size_t i = 0; i < b.nbytes; i++) assert_int_equal(((uint8_t *)b.data)[i], 0);
    tx_tensor_release(&b);
    /* less than half of it: a buffer of its own */
    tx_tensor small = {0};
    assert_null(tx_tensor_alloc(&small, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG / 2 - 1024}));
    assert_ptr_not_equal(small.data, pa);
    tx_tensor_release(&small);
    assert_int_equal(c.n, 2);
    /* within [half, whole] of the big one and too large for the small one */
    assert_null(tx_tensor_alloc(&b, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG / 2 + 1024}));
    assert_ptr_equal(b.data, pa);
    tx_tensor_release(&b);
    assert_int_equal(c.hits, 2);
    tx_block_cache_end_run(prev);
    tx_block_cache_free(&c);
    assert_int_equal(c.n, 0);
}

static void small_buffers_and_unbound_threads_are_not_cached(void **state)
{
    (void)state;
    tx_block_cache c = {0};
    tx_tensor a = {0};
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG}));
    tx_tensor_release(&a); /* no cache bound: freed */
    assert_int_equal(c.n, 0);
    tx_block_cache *prev = tx_block_cache_begin_run(&c);
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1,
                                (int64_t[]){(int64_t)TX_BLOCK_CACHE_MIN / 4 - 1}));
    tx_tensor_release(&a); /* one float under the minimum */
    assert_int_equal(c.n, 0);
    tx_block_cache_end_run(prev);
    tx_block_cache_free(&c);
}

static void stale_buffers_go_at_the_end_of_the_next_run(void **state)
{
    (void)state;
    tx_block_cache c = {0};
    tx_tensor a = {0}, b = {0};
    tx_block_cache *prev = tx_block_cache_begin_run(&c);
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG}));
    assert_null(tx_tensor_alloc(&b, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){4 * BIG}));
    tx_tensor_release(&a);
    tx_tensor_release(&b);
    tx_block_cache_end_run(prev);
    assert_int_equal(c.n, 2); /* kept for the next run */
    prev = tx_block_cache_begin_run(&c);
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG}));
    tx_tensor_release(&a); /* reused and cached again in this run */
    tx_block_cache_end_run(prev);
    assert_int_equal(c.n, 1); /* the 4x buffer was not reused: freed */
    assert_int_equal(c.e[0].bytes, (size_t)BIG * 4);
    tx_block_cache_free(&c);
}

static void binding_nests_and_owners_may_free(void **state)
{
    (void)state;
    tx_block_cache outer = {0}, inner = {0};
    tx_block_cache *p0 = tx_block_cache_begin_run(&outer);
    tx_block_cache *p1 = tx_block_cache_begin_run(&inner);
    tx_tensor a = {0};
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG}));
    tx_tensor_release(&a);
    assert_int_equal(inner.n, 1);
    tx_block_cache_end_run(p1); /* back to the outer cache */
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG}));
    tx_tensor_release(&a);
    assert_int_equal(outer.n, 1);
    /* a tensor taken from the cache is a plain malloc block: its owner may
     * free it directly */
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1, (int64_t[]){BIG}));
    assert_int_equal(outer.n, 0);
    free(a.data);
    tx_block_cache_end_run(p0);
    tx_block_cache_free(&outer);
    tx_block_cache_free(&inner);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(big_buffer_comes_back_zeroed),
        cmocka_unit_test(small_buffers_and_unbound_threads_are_not_cached),
        cmocka_unit_test(stale_buffers_go_at_the_end_of_the_next_run),
        cmocka_unit_test(binding_nests_and_owners_may_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
