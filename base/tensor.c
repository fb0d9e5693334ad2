/* tensor.c - host tensor allocation and shape bookkeeping. */
#include "base/tensor.h"

#include "base/block_cache.h"
#include "base/checked.h"
#include "base/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t tx_dtype_elem_size(teexec_dtype dtype)
{
    if (dtype == TEEXEC_DTYPE_STRING) return sizeof(char *);
    unsigned bits = teexec_dtype_bits(dtype);
    return bits >= 8 ? bits / 8 : 0;
}

static teexec_status *set_shape(tx_tensor *t, teexec_dtype dtype, int32_t rank,
                                const int64_t *dims)
{
    memset(t, 0, sizeof(*t));
    if (!tx_dtype_valid((int)dtype))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
    if (rank < 0 || rank > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_LIMIT, "rank %d is over the limit of %d", (int)rank,
                        TX_MAX_RANK);
    uint64_t numel = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "negative dimension %lld",
                            (long long)dims[i]);
        if (!tx_mul_u64(numel, (uint64_t)dims[i], &numel))
            return tx_error(TEEXEC_ERR_LIMIT, "tensor element count overflows");
        t->dims[i] = dims[i];
    }
    uint64_t bytes;
    if (dtype == TEEXEC_DTYPE_STRING) {
        if (!tx_mul_u64(numel, sizeof(char *), &bytes))
            return tx_error(TEEXEC_ERR_LIMIT, "tensor size overflows");
    } else {
        int ok;
        bytes = tx_dtype_storage_bytes(dtype, numel, &ok);
        if (!ok) return tx_error(TEEXEC_ERR_LIMIT, "tensor size overflows");
    }
    if (bytes > SIZE_MAX / 2)
        return tx_error(TEEXEC_ERR_LIMIT, "tensor of %llu bytes is too large",
                        (unsigned long long)bytes);
    t->dtype = dtype;
    t->rank = rank;
    t->numel = numel;
    t->nbytes = (size_t)bytes;
    return NULL;
}

teexec_status *tx_tensor_alloc(tx_tensor *t, teexec_dtype dtype, int32_t rank,
                               const int64_t *dims)
{
    TX_TRY(set_shape(t, dtype, rank, dims));
    t->data = tx_block_cache_take(t->nbytes); /* a run's cached buffer, zeroed */
    if (!t->data) t->data = calloc(1, t->nbytes ? t->nbytes : 1);
    if (!t->data) {
        memset(t, 0, sizeof(*t));
        return tx_status_new(TEEXEC_ERR_NO_MEMORY, NULL, NULL,
                             "out of memory allocating a tensor");
    }
    t->owns_data = true;
    return NULL;
}

teexec_status *tx_tensor_wrap(tx_tensor *t, teexec_dtype dtype, int32_t rank,
                              const int64_t *dims, void *data)
{
    TX_TRY(set_shape(t, dtype, rank, dims));
    t->data = data;
    t->owns_data = false;
    return NULL;
}

void tx_tensor_release(tx_tensor *t)
{
    if (!t) return;
    if (t->owns_data && t->data) {
        if (t->dtype == TEEXEC_DTYPE_STRING) {
            char **s = t->data;
            for (uint64_t i = 0; i < t->numel; i++) free(s[i]);
            free(t->data);
        } else if (!tx_block_cache_put(t->data, t->nbytes)) {
            free(t->data);
        }
    }
    memset(t, 0, sizeof(*t));
}

teexec_status *tx_tensor_clone(const tx_tensor *src, tx_tensor *dst)
{
    TX_TRY(tx_tensor_alloc(dst, src->dtype, src->rank, src->dims));
    if (src->dtype == TEEXEC_DTYPE_STRING) {
        char **s = src->data, **d = dst->data;
        for (uint64_t i = 0; i < src->numel; i++) {
            const char *v = s[i] ? s[i] : "";
            size_t n = strlen(v) + 1;
            d[i] = malloc(n);
            if (!d[i]) {
                tx_tensor_release(dst);
                return tx_oom();
            }
            memcpy(d[i], v, n);
        }
    } else if (src->nbytes) {
        memcpy(dst->data, src->data, src->nbytes);
    }
    return NULL;
}

const char *tx_tensor_describe(const tx_tensor *t, char *buf, size_t size)
{
    size_t used = 0;
    int n = snprintf(buf, size, "%s[", teexec_dtype_name(t->dtype));
    used = n > 0 ? (size_t)n : 0;
    for (int32_t i = 0; i < t->rank && used < size; i++) {
        n = snprintf(buf + used, size - used, i ? ",%lld" : "%lld", (long long)t->dims[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}
