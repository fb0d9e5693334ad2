/*
 * random_fill.c - seeded random tensors (random_fill.h).
 */
#include "random_fill.h"

#include <stddef.h>

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The stream of one tensor: the FNV prime spreads seeds apart so that
 * (seed, index) and (seed + 1, index - 1) do not collide for small indexes. */
static uint64_t stream_start(uint64_t seed, uint64_t index)
{
    return seed * 0x100000001B3ull + index;
}

bool random_fill_is_float(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_DOUBLE || dt == TEEXEC_DTYPE_FLOAT16 ||
           dt == TEEXEC_DTYPE_BFLOAT16 ||
           (dt >= TEEXEC_DTYPE_FLOAT8E4M3FN && dt <= TEEXEC_DTYPE_FLOAT8E5M2FNUZ) ||
           dt == TEEXEC_DTYPE_FLOAT4E2M1;
}

teexec_status *random_fill(teexec_dtype dt, int32_t rank, const int64_t *dims, uint64_t seed,
                           uint64_t index, teexec_tensor **out)
{
    *out = NULL;
    bool is_float = random_fill_is_float(dt);
    /* values are drawn in a wide type and cast, so every dtype (bf16, FP8,
     * int4, ...) gets the same values the cast rules give */
    teexec_dtype gen = is_float ? TEEXEC_DTYPE_DOUBLE
                       : dt == TEEXEC_DTYPE_BOOL ? TEEXEC_DTYPE_BOOL
                                                 : TEEXEC_DTYPE_INT64;
    teexec_tensor *t;
    teexec_status *st = teexec_tensor_create(gen, rank, dims, &t);
    if (st) return st;
    uint64_t n = teexec_tensor_element_count(t);
    uint64_t s = stream_start(seed, index);
    void *data = teexec_tensor_data(t);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = splitmix64(&s);
        if (gen == TEEXEC_DTYPE_DOUBLE)
            ((double *)data)[i] = (double)(r >> 11) * (2.0 / 9007199254740992.0) - 1.0;
        else if (gen == TEEXEC_DTYPE_BOOL)
            ((uint8_t *)data)[i] = (uint8_t)(r >> 63);
        else
            ((int64_t *)data)[i] = (int64_t)(r % 10);
    }
    if (gen == dt) {
        *out = t;
        return NULL;
    }
    st = teexec_tensor_cast(t, dt, out);
    teexec_tensor_destroy(t);
    return st;
}

teexec_status *random_labels(int32_t rank, const int64_t *dims, int64_t classes, uint64_t seed,
                             uint64_t index, teexec_tensor **out)
{
    *out = NULL;
    teexec_tensor *t;
    teexec_status *st = teexec_tensor_create(TEEXEC_DTYPE_INT64, rank, dims, &t);
    if (st) return st;
    uint64_t n = teexec_tensor_element_count(t);
    uint64_t s = stream_start(seed, index);
    int64_t *v = teexec_tensor_data(t);
    uint64_t c = classes > 0 ? (uint64_t)classes : 1;
    for (uint64_t i = 0; i < n; i++) v[i] = (int64_t)(splitmix64(&s) % c);
    *out = t;
    return NULL;
}
