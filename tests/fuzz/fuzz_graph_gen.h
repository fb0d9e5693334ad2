/*
 * fuzz_graph_gen.h - the structure fuzzer's one entry point: bytes -> a
 * random *valid* ONNX graph of the ops teexec claims (standard ops of the
 * CPU registry at opset 18..23, te.ops ops from the schema table) -> the
 * public API: load from memory, plan, CPU session run, and (for a float
 * output reached by a trainable initializer) one CPU training step.
 *
 * The bytes steer every choice (op, input values, shapes with dims 0..8,
 * attributes, initializer data); once they run out every choice reads 0,
 * so any input, even the empty one, gives a graph. Sizes are bounded
 * (FG_MAX_NODES nodes, FG_MAX_NUMEL elements a value) so one call stays
 * in the milliseconds.
 *
 * Used by fuzz_graph.c (libFuzzer, clang) and test_fuzz_graph.c (cmocka,
 * fixed seeds, any compiler). Refusals by the library are fine; crashes,
 * leaks and sanitizer reports are the findings. The stats say how far each
 * input got and count outputs whose shape differs from the one the
 * generator computed (a shape-inference or kernel bug, or a generator bug).
 *
 * Ownership: nothing is kept between calls. Thread-safety: calls on
 * different stats objects may run concurrently.
 */
#ifndef TEEXEC_TESTS_FUZZ_GRAPH_GEN_H
#define TEEXEC_TESTS_FUZZ_GRAPH_GEN_H

#include <stddef.h>
#include <stdint.h>

typedef struct tx_fuzz_graph_stats {
    unsigned long built;          /* graphs generated and serialized */
    unsigned long nodes;          /* ... their nodes in all */
    unsigned long te_nodes;       /* ... of which in domain te.ops */
    unsigned long loaded;         /* ... that teexec_model_load_memory accepted */
    unsigned long planned;        /* ... that teexec_model_plan accepted */
    unsigned long sessions;       /* CPU sessions created */
    unsigned long ran;            /* session runs that returned OK */
    unsigned long train_tried;    /* trainers attempted */
    unsigned long trained;        /* training steps that returned OK */
    unsigned long shape_mismatch; /* outputs of a wrong shape or dtype */
    char last_load_error[256];    /* message of the last refused load */
    char last_mismatch[256];      /* what the last mismatch was */
} tx_fuzz_graph_stats;

/* Builds the graph of `data` and runs it through the API. stats may be
 * NULL. Returns 0 (libFuzzer's convention). If the environment variable
 * TEEXEC_FUZZ_GRAPH_SAVE names a file, the model bytes are written there
 * (for reproducing a finding with `teexec run`). */
int tx_fuzz_graph_one(const uint8_t *data, size_t size, tx_fuzz_graph_stats *stats);

#endif
