/* train_fixtures.h - helpers the trainer tests share: fail on a status, the
 * path of a committed model file, a dataset tensor by name, the first rows
 * of a tensor. Include after <cmocka.h> and teexec/teexec.h. Header-only;
 * model_path keeps four static buffers (single-threaded tests only). */
#ifndef TEEXEC_TESTS_TRAIN_TRAIN_FIXTURES_H
#define TEEXEC_TESTS_TRAIN_TRAIN_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A non-NULL status fails the test with its message. */
static inline void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

/* $TEEXEC_SOURCE_ROOT/models/<model>/<file>; the last four results stay valid. */
static inline char *model_path(const char *model, const char *file)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 1024, "%s/models/%s/%s", root ? root : ".", model, file);
    return b;
}

static inline const teexec_tensor *ds_find(const teexec_dataset *d, const char *name)
{
    for (size_t i = 0; i < teexec_dataset_count(d); i++)
        if (!strcmp(teexec_dataset_name(d, i), name)) return teexec_dataset_tensor(d, i);
    return NULL;
}

/* A new tensor of rows [start, start + b) of t's dim 0. */
static inline teexec_tensor *rows_of(const teexec_tensor *t, int64_t start, int64_t b)
{
    assert_non_null(t);
    int64_t dims[8];
    int32_t r = teexec_tensor_rank(t);
    assert_true(r >= 1 && r <= 8);
    memcpy(dims, teexec_tensor_dims(t), sizeof(int64_t) * (size_t)r);
    size_t row = teexec_tensor_byte_size(t) / (size_t)dims[0];
    dims[0] = b;
    teexec_tensor *o;
    ok(teexec_tensor_create_copy(teexec_tensor_dtype(t), r, dims,
                                 (const char *)teexec_tensor_data_const(t) + row * (size_t)start,
                                 row * (size_t)b, &o));
    return o;
}

#endif
