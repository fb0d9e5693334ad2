/*
 * rw_util.h - helpers for the rewrite and lowering tests: loading a model
 * and its rewrite graph, emitting and loading the result back, running a
 * model on the CPU, comparing outputs bit for bit or by relative L2.
 *
 * Header-only (static functions; each test program includes it once).
 * Failures go through cmocka asserts. Not thread-safe (tests are
 * single-threaded). Returned objects are owned by the caller.
 */
#ifndef TEEXEC_TESTS_RW_UTIL_H
#define TEEXEC_TESTS_RW_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "exec/model_internal.h"
#include "import/rewrite.h"
#include "teexec/teexec.h"

#define RW_MAX_IO 32
/* Not every test program uses every helper. */
#define RW_UNUSED __attribute__((unused))

/* Fails the test with the status's message when st is not NULL. */
RW_UNUSED static void rw_ok(teexec_status *st, const char *what)
{
    if (st) {
        fprintf(stderr, "%s: %s: %s (node %s)\n", what, teexec_code_name(teexec_status_code(st)),
                teexec_status_message(st),
                teexec_status_node(st) ? teexec_status_node(st) : "-");
        teexec_status_destroy(st);
        fail_msg("%s failed", what);
    }
}

RW_UNUSED static const char *rw_source_root(void)
{
    const char *r = getenv("TEEXEC_SOURCE_ROOT");
    return r ? r : ".";
}

/* Emits g and loads the bytes as a model. */
RW_UNUSED static teexec_model *rw_emit_load(const tx_rw_graph *g)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    rw_ok(tx_rw_emit(g, &bytes, &len), "tx_rw_emit");
    /* RW_DUMP=path keeps the last emitted model for a look with other tools. */
    const char *dump = getenv("RW_DUMP");
    if (dump) {
        FILE *f = fopen(dump, "wb");
        if (f) {
            fwrite(bytes, 1, len, f);
            fclose(f);
        }
    }
    teexec_model *m = NULL;
    rw_ok(teexec_model_load_memory(bytes, len, NULL, NULL, &m), "loading the emitted model");
    free(bytes);
    return m;
}

/* Model inputs read from DIR/<name>.npy. */
typedef struct rw_inputs {
    size_t n;
    const char *names[RW_MAX_IO];
    teexec_tensor *t[RW_MAX_IO];
} rw_inputs;

RW_UNUSED static void rw_inputs_free(rw_inputs *in)
{
    for (size_t i = 0; i < in->n; i++) teexec_tensor_destroy(in->t[i]);
    in->n = 0;
}

RW_UNUSED static void rw_inputs_npy(const teexec_model *m, const char *dir, rw_inputs *in)
{
    memset(in, 0, sizeof *in);
    size_t n = teexec_model_input_count(m);
    assert_true(n <= RW_MAX_IO);
    for (size_t i = 0; i < n; i++) {
        const teexec_value_info *vi = teexec_model_input(m, i);
        char path[8192];
        snprintf(path, sizeof path, "%s/%s.npy", dir, vi->name);
        in->names[i] = vi->name;
        rw_ok(teexec_tensor_load_file(path, &in->t[i]), path);
        in->n++;
    }
}

/* Runs m on the CPU; out[] gets every graph output (caller destroys).
 * Returns the status instead of failing when `soft` (models the CPU
 * backend cannot run). */
RW_UNUSED static teexec_status *rw_run(const teexec_model *m, const rw_inputs *in, teexec_tensor **out,
                             size_t *n_out)
{
    teexec_session_options *o = NULL;
    rw_ok(teexec_session_options_create(&o), "session options");
    rw_ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU), "set device");
    teexec_session *s = NULL;
    teexec_status *st = teexec_session_create(m, o, &s);
    teexec_session_options_destroy(o);
    if (st) return st;
    *n_out = teexec_model_output_count(m);
    assert_true(*n_out <= RW_MAX_IO);
    st = teexec_session_run(s, in->n, in->names, (const teexec_tensor *const *)in->t, *n_out,
                            NULL, out);
    teexec_session_destroy(s);
    return st;
}

RW_UNUSED static void rw_outputs_free(teexec_tensor **t, size_t n)
{
    for (size_t i = 0; i < n; i++) teexec_tensor_destroy(t[i]);
}

/* Same dtype, shape and bytes. */
RW_UNUSED static bool rw_bit_equal(const teexec_tensor *a, const teexec_tensor *b)
{
    if (teexec_tensor_dtype(a) != teexec_tensor_dtype(b)) return false;
    if (teexec_tensor_rank(a) != teexec_tensor_rank(b)) return false;
    for (int32_t d = 0; d < teexec_tensor_rank(a); d++)
        if (teexec_tensor_dims(a)[d] != teexec_tensor_dims(b)[d]) return false;
    if (teexec_tensor_dtype(a) == TEEXEC_DTYPE_STRING) {
        const char *const *sa = teexec_tensor_data_const(a), *const *sb = teexec_tensor_data_const(b);
        for (uint64_t i = 0; i < teexec_tensor_element_count(a); i++)
            if (strcmp(sa[i], sb[i]) != 0) return false;
        return true;
    }
    size_t n = teexec_tensor_byte_size(a);
    return n == teexec_tensor_byte_size(b) &&
           memcmp(teexec_tensor_data_const(a), teexec_tensor_data_const(b), n) == 0;
}

RW_UNUSED static double rw_elem(const teexec_tensor *t, uint64_t i)
{
    const void *d = teexec_tensor_data_const(t);
    switch (teexec_tensor_dtype(t)) {
    case TEEXEC_DTYPE_FLOAT: return ((const float *)d)[i];
    case TEEXEC_DTYPE_DOUBLE: return ((const double *)d)[i];
    case TEEXEC_DTYPE_FLOAT16: return tx_f16_to_f32(((const uint16_t *)d)[i]);
    case TEEXEC_DTYPE_BFLOAT16: return tx_bf16_to_f32(((const uint16_t *)d)[i]);
    default: fail_msg("rw_elem: dtype %d", (int)teexec_tensor_dtype(t));
    }
    return 0;
}

/* ||a - b|| / ||b|| over float tensors of the same shape (0 when both 0). */
RW_UNUSED static double rw_rel_l2(const teexec_tensor *a, const teexec_tensor *b)
{
    assert_int_equal(teexec_tensor_element_count(a), teexec_tensor_element_count(b));
    double num = 0, den = 0;
    for (uint64_t i = 0; i < teexec_tensor_element_count(a); i++) {
        double x = rw_elem(a, i), y = rw_elem(b, i);
        num += (x - y) * (x - y);
        den += y * y;
    }
    if (den == 0) return sqrt(num);
    return sqrt(num / den);
}

#endif
