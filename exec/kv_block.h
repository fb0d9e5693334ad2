/*
 * kv_block.h - a decoder's KV cache in CUDA device memory, for the
 * generator (exec/generate.c): the n past (or present) tensors of one
 * layout, each [batch, heads, cols, head_dim], back to back in one device
 * allocation. Every row (one batch row and head of one tensor) then lies at
 * a multiple of the same pitch, so copying a column range of every layer
 * at once -- a decode step's new k/v into the cache -- is one row copy
 * (exec/device_mem.h tx_device_copy_rows) rather than one per layer. The
 * tensors are exposed as borrowed device tensors (views) to bind as
 * session inputs and outputs (teexec_session_run_into).
 *
 * Ownership: a block owns its device memory and its views; the views are
 * valid until tx_kv_block_free. Thread-safety: none (the generator's
 * thread); every call returns once the device has finished its copies.
 */
#ifndef TEEXEC_EXEC_KV_BLOCK_H
#define TEEXEC_EXEC_KV_BLOCK_H

#include "base/status.h"
#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tx_kv_layout {
    size_t n;            /* tensors (2 per layer) */
    teexec_dtype dtype;  /* a float type */
    int64_t heads, head_dim;
} tx_kv_layout;

typedef struct tx_kv_block {
    void *base;           /* NULL: empty */
    int device;
    size_t batch, cols;
    teexec_tensor **views; /* n device tensors over base */
} tx_kv_block;

/* A new block of `batch` rows and `cols` columns on the current device, zero
 * (masked padding must hold finite values: 0 * NaN would leak through the
 * attention), holding the first min(cols) columns of the first min(batch)
 * rows of `keep` (NULL or empty: nothing). */
teexec_status *tx_kv_block_make(const tx_kv_layout *l, size_t batch, size_t cols,
                                const tx_kv_block *keep, tx_kv_block *out) TX_NODISCARD;
void tx_kv_block_free(tx_kv_block *b);

/* Columns [from, from + count) of every tensor of `src` into columns
 * [at, at + count) of `dst`'s; both of the same batch (INTERNAL otherwise). */
teexec_status *tx_kv_block_copy_cols(const tx_kv_layout *l, tx_kv_block *dst, size_t at,
                                     const tx_kv_block *src, size_t from,
                                     size_t count) TX_NODISCARD;

#endif
