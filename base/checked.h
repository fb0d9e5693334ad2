/*
 * checked.h - overflow-checked size arithmetic.
 *
 * Every size computed from file contents goes through these: a declared
 * length is never trusted. Each returns 1 on success (result stored) and 0
 * on overflow (result untouched). Pure functions, thread-safe.
 */
#ifndef TEEXEC_BASE_CHECKED_H
#define TEEXEC_BASE_CHECKED_H

#include <stddef.h>
#include <stdint.h>

static inline int tx_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

static inline int tx_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static inline int tx_add_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

static inline int tx_mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* Product of n non-negative dims; 0 on overflow or a negative dim. */
static inline int tx_dims_product(const int64_t *dims, size_t n, uint64_t *out)
{
    uint64_t p = 1;
    for (size_t i = 0; i < n; i++) {
        if (dims[i] < 0) return 0;
        if (!tx_mul_u64(p, (uint64_t)dims[i], &p)) return 0;
    }
    *out = p;
    return 1;
}

#endif
