/* kv_block.c - a KV cache's tensors in one device allocation (kv_block.h). */
#include "exec/kv_block.h"

#include "base/checked.h"
#include "exec/device_mem.h"

#include <stdlib.h>
#include <string.h>

static size_t row_bytes(const tx_kv_layout *l)
{
    return (size_t)l->head_dim * (teexec_dtype_bits(l->dtype) / 8);
}

void tx_kv_block_free(tx_kv_block *b)
{
    if (!b) return;
    if (b->views)
        for (size_t i = 0; b->views[i]; i++) teexec_tensor_destroy(b->views[i]);
    free(b->views);
    tx_device_free(b->device, b->base);
    memset(b, 0, sizeof(*b));
}

/* Bytes of one tensor of the block. */
static teexec_status *tensor_bytes(const tx_kv_layout *l, size_t batch, size_t cols, size_t *out)
{
    size_t b = 0;
    if (!tx_mul_size(batch, (size_t)l->heads, &b) || !tx_mul_size(b, cols, &b) ||
        !tx_mul_size(b, row_bytes(l), &b))
        return tx_error(TEEXEC_ERR_LIMIT, "a KV cache of %zu rows and %zu columns is too large",
                        batch, cols);
    *out = b;
    return NULL;
}

teexec_status *tx_kv_block_make(const tx_kv_layout *l, size_t batch, size_t cols,
                                const tx_kv_block *keep, tx_kv_block *out)
{
    memset(out, 0, sizeof(*out));
    size_t one = 0, all = 0;
    TX_TRY(tensor_bytes(l, batch, cols, &one));
    if (!tx_mul_size(one, l->n, &all))
        return tx_error(TEEXEC_ERR_LIMIT, "a KV cache of %zu tensors is too large", l->n);
    /* NULL-terminated, for the free */
    out->views = calloc(l->n + 1, sizeof(*out->views));
    if (!out->views) return tx_oom();
    teexec_status *st = tx_device_alloc(all, &out->device, &out->base);
    if (!st) st = tx_device_zero(out->base, all);
    int64_t dims[4] = {(int64_t)batch, l->heads, (int64_t)cols, l->head_dim};
    for (size_t i = 0; !st && i < l->n; i++)
        st = teexec_tensor_create_device_borrowed(l->dtype, 4, dims, (char *)out->base + i * one,
                                                  one, &out->views[i]);
    out->batch = batch;
    out->cols = cols;
    if (!st && keep && keep->base) {
        size_t rows = keep->batch < batch ? keep->batch : batch;
        size_t kc = keep->cols < cols ? keep->cols : cols;
        size_t kone = 0, row = row_bytes(l);
        st = tensor_bytes(l, keep->batch, keep->cols, &kone);
        for (size_t i = 0; !st && i < l->n; i++)
            st = tx_device_copy_rows((char *)out->base + i * one, cols * row,
                                     (const char *)keep->base + i * kone, keep->cols * row,
                                     kc * row, rows * (size_t)l->heads);
    }
    if (st) tx_kv_block_free(out);
    return st;
}

teexec_status *tx_kv_block_copy_cols(const tx_kv_layout *l, tx_kv_block *dst, size_t at,
                                     const tx_kv_block *src, size_t from, size_t count)
{
    if (dst->batch != src->batch || at + count > dst->cols || from + count > src->cols)
        return tx_error(TEEXEC_ERR_INTERNAL, "KV column copy out of range");
    size_t row = row_bytes(l);
    /* row r of every tensor at r * cols * row: one copy for all */
    return tx_device_copy_rows((char *)dst->base + at * row, dst->cols * row,
                               (const char *)src->base + from * row, src->cols * row, count * row,
                               l->n * dst->batch * (size_t)l->heads);
}
