/*
 * shape_buckets.h - shape buckets of a session (teexec_session_options_
 * set_dim_multiple / set_dim_buckets): a symbolic input dim is padded up to
 * a multiple or to the next listed size before planning, so variable
 * traffic reuses a few plans (and CUDA graphs), and the outputs whose
 * declared dims name it are cut back to the size the caller gave.
 *
 * Padding is with zeros at the end of the dim: right for dims whose
 * positions do not affect each other's outputs (batch rows) or only later
 * ones (a causal sequence); the caller chooses which dims to bucket.
 *
 * Ownership: a tx_buckets owns its names and size lists (tx_buckets_free);
 * the padded and cut tensors are new, owned by the caller. Thread-safety:
 * none (options and sessions are one thread's).
 */
#ifndef TEEXEC_EXEC_SHAPE_BUCKETS_H
#define TEEXEC_EXEC_SHAPE_BUCKETS_H

#include "base/status.h"
#include "base/tensor.h"

#include <stddef.h>
#include <stdint.h>

/* Bounds: sizes listed per dim, and the largest multiple accepted. */
#define TX_MAX_BUCKET_SIZES 64u

typedef struct tx_dim_bucket {
    char *name;
    int64_t multiple;     /* > 0: round up to a multiple of it; 0: the sizes below */
    int64_t *sizes;       /* ascending, distinct, > 0 */
    size_t n_sizes;
} tx_dim_bucket;

typedef struct tx_buckets {
    tx_dim_bucket *b;
    size_t n;
} tx_buckets;

/* Sets (or replaces) the bucket of dim `name`: a multiple (> 0), or the
 * listed sizes (1 to TX_MAX_BUCKET_SIZES of them, > 0, in any order;
 * repeats count once). */
teexec_status *tx_buckets_set_multiple(tx_buckets *bs, const char *name,
                                       int64_t multiple) TX_NODISCARD;
teexec_status *tx_buckets_set_sizes(tx_buckets *bs, const char *name, const int64_t *sizes,
                                    size_t n) TX_NODISCARD;
teexec_status *tx_buckets_copy(const tx_buckets *src, tx_buckets *dst) TX_NODISCARD;
void tx_buckets_free(tx_buckets *bs);

/* The size dim `name` (may be NULL) of extent v runs at: v when the dim
 * has no bucket, else its bucket; TEEXEC_ERR_INVALID_ARGUMENT when v is
 * over the largest listed size (or the multiple overflows). */
teexec_status *tx_buckets_round(const tx_buckets *bs, const char *name, int64_t v,
                                int64_t *out) TX_NODISCARD;

/* A new host tensor: t with dim d extended to n >= t->dims[d], the new
 * positions zero. */
teexec_status *tx_tensor_pad_dim(const tx_tensor *t, int32_t d, int64_t n,
                                 tx_tensor *out) TX_NODISCARD;
/* A new host tensor: the first n <= t->dims[d] positions of dim d of t. */
teexec_status *tx_tensor_cut_dim(const tx_tensor *t, int32_t d, int64_t n,
                                 tx_tensor *out) TX_NODISCARD;

#endif
