/*
 * test_fuzz_graph.c - the structure fuzzer's generator on fixed seeds,
 * without libFuzzer, so every build (gcc included, ASan in scripts/test)
 * runs it: 200 byte strings from a fixed PRNG go through the same entry
 * point as fuzz_graph.c. Beyond "no crash, no leak", it checks that the
 * generator does what it claims: every graph it writes loads (they are
 * valid by construction), most of them plan and run, some train, and no
 * output has another shape than the one the ONNX / te.ops rules give.
 */
#include "tests/fuzz/fuzz_graph_gen.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

enum { N_SEEDS = 200, MAX_LEN = 512 };

/* splitmix64: a fixed, portable stream of bytes. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void test_fixed_seeds(void **state)
{
    (void)state;
    tx_fuzz_graph_stats st = {0};
    uint64_t s = 16;
    static uint8_t buf[MAX_LEN];
    for (int i = 0; i < N_SEEDS; i++) {
        size_t len = (size_t)(next(&s) % MAX_LEN);
        for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)next(&s);
        unsigned long loaded = st.loaded, built = st.built;
        tx_fuzz_graph_one(buf, len, &st);
        if (st.built != built && st.loaded == loaded)
            fail_msg("seed %d: a generated graph did not load: %s", i, st.last_load_error);
    }
    /* The empty input is a graph too (every choice reads 0). */
    tx_fuzz_graph_one(NULL, 0, &st);
    printf("built %lu (%lu nodes, %lu te.ops), loaded %lu, planned %lu, sessions %lu, ran %lu, train %lu/%lu, "
           "mismatches %lu\n", st.built, st.nodes, st.te_nodes, st.loaded, st.planned, st.sessions, st.ran, st.trained,
           st.train_tried, st.shape_mismatch);
    if (st.shape_mismatch) fail_msg("output shape mismatch: %s", st.last_mismatch);
    assert_int_equal(st.built, N_SEEDS + 1);
    assert_int_equal(st.loaded, st.built);
    /* Valid graphs should mostly be accepted; a floor well under what they
     * reach today, so a generator that drifts into refusals fails here. */
    assert_true(st.planned * 10 >= st.built * 8);
    assert_true(st.ran * 10 >= st.built * 5);
    assert_true(st.trained > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fixed_seeds)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
