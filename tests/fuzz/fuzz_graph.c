/*
 * fuzz_graph.c - libFuzzer target: the structure fuzzer. The input bytes
 * steer a generator of random valid graphs of teexec's claimed ops, each
 * of which is loaded, planned, run on a CPU session and, where it has a
 * float output reached by a parameter, trained for one step
 * (fuzz_graph_gen.h). Refusals are expected; crashes, leaks and sanitizer
 * reports are the findings.
 */
#include "tests/fuzz/fuzz_graph_gen.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return tx_fuzz_graph_one(data, size, NULL);
}
