/* model_inputs.h - the stored inputs of a sample model or zoo export
 * (DIR/inputs/<name>.npy, one file per graph input), as the tests that run
 * them through the public API need them: names and tensors side by side,
 * ready for teexec_session_run. Header-only (static functions), for tests.
 *
 * Ownership: a tx_test_inputs owns its tensors (tx_test_inputs_free).
 * Thread-safety: none needed (one per test). */
#ifndef TEEXEC_TESTS_MODEL_INPUTS_H
#define TEEXEC_TESTS_MODEL_INPUTS_H

#include "teexec/teexec.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define TX_TEST_MAX_INPUTS 8

typedef struct tx_test_inputs {
    const char *names[TX_TEST_MAX_INPUTS];
    teexec_tensor *ts[TX_TEST_MAX_INPUTS];
    char storage[TX_TEST_MAX_INPUTS][128];
    size_t n;
} tx_test_inputs;

static inline void tx_test_inputs_free(tx_test_inputs *x)
{
    for (size_t i = 0; i < x->n; i++) teexec_tensor_destroy(x->ts[i]);
    x->n = 0;
}

/* Loads every DIR/inputs/<name>.npy into *in (the first TX_TEST_MAX_INPUTS).
 * False when the directory is missing or a file does not load; then `why`
 * (may be NULL, `why_size` bytes) says which, and *in holds what loaded. */
static inline bool tx_test_inputs_load(const char *dir, tx_test_inputs *in, char *why,
                                       size_t why_size)
{
    memset(in, 0, sizeof *in);
    char path[4096];
    snprintf(path, sizeof path, "%s/inputs", dir);
    DIR *d = opendir(path);
    if (!d) {
        if (why) snprintf(why, why_size, "no directory %.400s", path);
        return false;
    }
    struct dirent *e;
    bool good = true;
    while ((e = readdir(d)) && in->n < TX_TEST_MAX_INPUTS) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".npy")) continue;
        snprintf(in->storage[in->n], sizeof in->storage[0], "%.*s", (int)(len - 4), e->d_name);
        snprintf(path, sizeof path, "%s/inputs/%s", dir, e->d_name);
        teexec_status *st = teexec_tensor_load_file(path, &in->ts[in->n]);
        if (st) {
            if (why) snprintf(why, why_size, "%.300s: %.200s", path, teexec_status_message(st));
            teexec_status_destroy(st);
            good = false;
            break;
        }
        in->names[in->n] = in->storage[in->n];
        in->n++;
    }
    closedir(d);
    return good;
}

/* A copy of rows [first, first + count) of t (its leading dim); count is
 * cut to the rows t has from `first`. */
static inline teexec_status *tx_test_rows(const teexec_tensor *t, int64_t first, int64_t count,
                                          teexec_tensor **out)
{
    int32_t rank = teexec_tensor_rank(t);
    int64_t dims[8];
    if (rank < 1 || rank > 8) return teexec_tensor_create_copy(teexec_tensor_dtype(t), rank,
                                                              teexec_tensor_dims(t),
                                                              teexec_tensor_data_const(t),
                                                              teexec_tensor_byte_size(t), out);
    memcpy(dims, teexec_tensor_dims(t), sizeof(int64_t) * (size_t)rank);
    size_t row = dims[0] ? teexec_tensor_byte_size(t) / (size_t)dims[0] : 0;
    if (first > dims[0]) first = dims[0];
    if (count > dims[0] - first) count = dims[0] - first;
    dims[0] = count;
    return teexec_tensor_create_copy(teexec_tensor_dtype(t), rank, dims,
                                     (const char *)teexec_tensor_data_const(t) +
                                         (size_t)first * row,
                                     row * (size_t)count, out);
}

#endif
