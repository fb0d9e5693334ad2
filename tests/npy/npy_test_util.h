/* npy_test_util.h - shared helpers of the .npy/.npz tests: fixture paths,
 * whole-file reads, the value pattern of tests/npy/make_fixtures.py. */
#ifndef TEEXEC_TESTS_NPY_UTIL_H
#define TEEXEC_TESTS_NPY_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/tensor.h"

static inline void fixture_path(char *buf, size_t size, const char *name)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    snprintf(buf, size, "%s/tests/npy/fixtures/%s", root ? root : ".", name);
}

/* Whole file into a malloc'd buffer; NULL if it cannot be read. */
static inline unsigned char *slurp(const char *name, size_t *size)
{
    char path[1024];
    fixture_path(path, sizeof path, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* Element i of a tensor as a double (types the fixtures use). */
static inline double elem(const tx_tensor *t, size_t i)
{
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case TEEXEC_DTYPE_BOOL: return p[i];
    case TEEXEC_DTYPE_INT8: return ((const int8_t *)p)[i];
    case TEEXEC_DTYPE_INT16: return ((const int16_t *)p)[i];
    case TEEXEC_DTYPE_INT32: return ((const int32_t *)p)[i];
    case TEEXEC_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case TEEXEC_DTYPE_UINT8: return p[i];
    case TEEXEC_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case TEEXEC_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case TEEXEC_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    case TEEXEC_DTYPE_FLOAT16: return tx_f16_to_f32(((const uint16_t *)p)[i]);
    case TEEXEC_DTYPE_FLOAT: return ((const float *)p)[i];
    case TEEXEC_DTYPE_DOUBLE: return ((const double *)p)[i];
    default: return -12345.0;
    }
}

/* The fixture pattern (see make_fixtures.py); element 5 is the max value of
 * ints, checked separately as an exact integer. */
static inline double pattern(teexec_dtype dt, size_t i)
{
    static const double sgn[] = {-6, -3, 0, 3, 6};
    static const double uns[] = {0, 7, 14, 21, 28};
    static const double flt[] = {-1.25, -0.75, -0.25, 0.25, 0.75, 65504.0};
    static const double bol[] = {1, 0, 1, 1, 0, 0};
    switch (dt) {
    case TEEXEC_DTYPE_BOOL: return bol[i];
    case TEEXEC_DTYPE_INT8: case TEEXEC_DTYPE_INT16: case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_INT64: return sgn[i];
    case TEEXEC_DTYPE_UINT8: case TEEXEC_DTYPE_UINT16: case TEEXEC_DTYPE_UINT32:
    case TEEXEC_DTYPE_UINT64: return uns[i];
    default: return flt[i];
    }
}

/* The last element of an int fixture: the type's maximum, as raw bits so
 * 64-bit values compare exactly. */
static inline uint64_t last_int_bits(const tx_tensor *t)
{
    size_t w = tx_dtype_elem_size(t->dtype);
    uint64_t v = 0;
    memcpy(&v, (const unsigned char *)t->data + 5 * w, w);
    return v;
}

static inline uint64_t int_max_bits(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_INT8: return 0x7f;
    case TEEXEC_DTYPE_INT16: return 0x7fff;
    case TEEXEC_DTYPE_INT32: return 0x7fffffff;
    case TEEXEC_DTYPE_INT64: return 0x7fffffffffffffffull;
    case TEEXEC_DTYPE_UINT8: return 0xff;
    case TEEXEC_DTYPE_UINT16: return 0xffff;
    case TEEXEC_DTYPE_UINT32: return 0xffffffffull;
    case TEEXEC_DTYPE_UINT64: return 0xffffffffffffffffull;
    default: return 0;
    }
}

#endif
