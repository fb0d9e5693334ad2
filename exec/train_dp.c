/* train_dp.c - data parallelism of the CPU trainer (train_dp.h). */
#include "exec/train_dp.h"

#include <stdlib.h>
#include <string.h>

teexec_status *tx_dp_create(teexec_comm *comm, int local_batch, double bucket_mb, int zero1,
                            tx_dp **out)
{
    *out = NULL;
    if (!comm || comm->world_size == 1) return NULL;
    if (!(bucket_mb >= 0)) /* NaN too */
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dp_bucket_mb %g", bucket_mb);
    tx_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return tx_oom();
    dp->comm = comm;
    dp->rank = comm->rank;
    dp->world = comm->world_size;
    dp->local_batch = local_batch != 0;
    dp->zero1 = zero1 != 0;
    double mb = bucket_mb > 0 ? bucket_mb : 25.0;
    double bytes = mb * 1024.0 * 1024.0;
    dp->bucket_bytes = bytes < 64 ? 64 : bytes > 1e12 ? (size_t)1e12 : (size_t)bytes;
    dp->bucket_bytes -= dp->bucket_bytes % sizeof(double);
    *out = dp; /* the bucket is allocated at the first reduce, no larger than the gradients */
    return NULL;
}

void tx_dp_destroy(tx_dp *dp)
{
    if (!dp) return;
    tx_tensor_release(&dp->label);
    free(dp->bucket);
    free(dp->owner);
    free(dp->gather);
    free(dp);
}

static teexec_status *rows(const tx_tensor *x, int64_t lo, int64_t hi, tx_tensor *out)
{
    int64_t dims[TX_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    size_t row = x->dims[0] ? x->nbytes / (size_t)x->dims[0] : 0;
    dims[0] = hi - lo;
    TX_TRY(tx_tensor_alloc(out, x->dtype, x->rank, dims));
    if (row) memcpy(out->data, (const char *)x->data + row * (size_t)lo, row * (size_t)(hi - lo));
    return NULL;
}

teexec_status *tx_dp_shard(tx_dp *dp, tx_tensor *const *vals, size_t n, const tx_tensor **label)
{
    if (dp->local_batch) return NULL;
    const tx_tensor *lb = *label;
    if (lb->rank < 1 || lb->dtype == TEEXEC_DTYPE_STRING)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "data parallel: the label needs a batch dimension to split over %d ranks",
                        dp->world);
    int64_t b = lb->dims[0];
    if (b % dp->world != 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "data parallel: a global batch of %lld rows does not split evenly over "
                        "%d ranks",
                        (long long)b, dp->world);
    int64_t lo = b / dp->world * dp->rank, hi = lo + b / dp->world;
    for (size_t i = 0; i < n; i++) {
        tx_tensor *x = vals[i];
        if (!x || !x->data || x->rank < 1 || x->dims[0] != b || x->dtype == TEEXEC_DTYPE_STRING)
            continue;
        tx_tensor part;
        TX_TRY(rows(x, lo, hi, &part));
        tx_tensor_release(x);
        *x = part;
    }
    tx_tensor_release(&dp->label);
    TX_TRY(rows(lb, lo, hi, &dp->label));
    *label = &dp->label;
    return NULL;
}

static teexec_status *flush(tx_dp *dp, size_t used, double *const *grads, const uint64_t *numel,
                            const size_t *idx, size_t n_idx)
{
    if (!used) return NULL;
    TX_TRY(teexec_comm_all_reduce_sum(dp->comm, TEEXEC_DTYPE_DOUBLE, dp->bucket, dp->bucket, used));
    size_t off = 0;
    for (size_t k = 0; k < n_idx; k++) {
        memcpy(grads[idx[k]], dp->bucket + off, sizeof(double) * (size_t)numel[idx[k]]);
        off += (size_t)numel[idx[k]];
    }
    return NULL;
}

teexec_status *tx_dp_reduce(tx_dp *dp, double n_local, double *loss, double *const *grads,
                            const uint64_t *numel, size_t n)
{
    double counts[2] = {n_local, n_local * *loss};
    TX_TRY(teexec_comm_all_reduce_sum(dp->comm, TEEXEC_DTYPE_DOUBLE, counts, counts, 2));
    double w = counts[0] > 0 ? n_local / counts[0] : 0.0;
    *loss = counts[0] > 0 ? counts[1] / counts[0] : 0.0;
    size_t cap = dp->bucket_bytes / sizeof(double), used = 0, n_idx = 0, total = 0;
    for (size_t j = 0; j < n; j++) total += (size_t)numel[j];
    if (total < cap) cap = total ? total : 1;
    if (!dp->bucket) {
        dp->bucket = malloc(sizeof(double) * cap);
        if (!dp->bucket) return tx_oom();
        dp->bucket_bytes = sizeof(double) * cap;
    }
    cap = dp->bucket_bytes / sizeof(double);
    size_t *idx = malloc(sizeof(size_t) * (n ? n : 1));
    if (!idx) return tx_oom();
    teexec_status *st = NULL;
    for (size_t j = n; j-- > 0 && !st;) {
        double *g = grads[j];
        size_t m = (size_t)numel[j];
        for (size_t e = 0; e < m; e++) g[e] *= w;
        if (m > cap) {
            /* larger than a bucket: reduced where it lies */
            st = teexec_comm_all_reduce_sum(dp->comm, TEEXEC_DTYPE_DOUBLE, g, g, m);
            continue;
        }
        if (used + m > cap) {
            st = flush(dp, used, grads, numel, idx, n_idx);
            used = n_idx = 0;
            if (st) break;
        }
        memcpy(dp->bucket + used, g, sizeof(double) * m);
        used += m;
        idx[n_idx++] = j;
    }
    if (!st) st = flush(dp, used, grads, numel, idx, n_idx);
    free(idx);
    return st;
}

teexec_status *tx_dp_partition(tx_dp *dp, const size_t *bytes, size_t n)
{
    free(dp->owner);
    dp->owner = NULL;
    dp->n_params = n;
    if (!dp->zero1) return NULL;
    dp->owner = malloc(sizeof(int) * (n ? n : 1));
    if (!dp->owner) return tx_oom();
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += bytes[i];
    /* contiguous ranges: parameter i goes to the rank whose share of the
     * byte total holds the parameter's first byte */
    size_t at = 0, *own = calloc((size_t)dp->world, sizeof(size_t));
    if (!own) return tx_oom();
    for (size_t i = 0; i < n; i++) {
        int r = total ? (int)((double)at / (double)total * dp->world) : 0;
        if (r >= dp->world) r = dp->world - 1;
        dp->owner[i] = r;
        own[r] += bytes[i];
        at += bytes[i];
    }
    size_t most = 0;
    for (int r = 0; r < dp->world; r++) most = own[r] > most ? own[r] : most;
    free(own);
    dp->block_bytes = (most + 3) & ~(size_t)3;
    free(dp->gather);
    dp->gather = malloc(dp->block_bytes * (size_t)(dp->world + 1) + 4);
    return dp->gather ? NULL : tx_oom();
}

teexec_status *tx_dp_gpu_grads(void *ctx, void *stream, size_t n, void *const *grads,
                               const uint64_t *numel, const teexec_dtype *dtypes)
{
    tx_dp *dp = ctx;
    return tx_comm_average_device(dp->comm, stream, n, grads, numel, dtypes, dp->bucket_bytes);
}

teexec_status *tx_dp_average_loss(tx_dp *dp, double *loss)
{
    TX_TRY(tx_comm_all_reduce_host(dp->comm, loss, 1));
    *loss /= (double)dp->world;
    return NULL;
}

bool tx_dp_owns(const tx_dp *dp, size_t i)
{
    return !dp || !dp->zero1 || !dp->owner || i >= dp->n_params || dp->owner[i] == dp->rank;
}

teexec_status *tx_dp_gather_params(tx_dp *dp, tx_tensor *const *params, size_t n)
{
    if (!dp->zero1 || n != dp->n_params)
        return n == dp->n_params ? NULL
                                 : tx_error(TEEXEC_ERR_INTERNAL, "zero1: %zu parameters, %zu "
                                            "partitioned", n, dp->n_params);
    unsigned char *send = dp->gather, *recv = dp->gather + dp->block_bytes;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (dp->owner[i] != dp->rank) continue;
        memcpy(send + off, params[i]->data, params[i]->nbytes);
        off += params[i]->nbytes;
    }
    /* the blocks are bytes; FLOAT is only the unit of the copy */
    TX_TRY(teexec_comm_all_gather(dp->comm, TEEXEC_DTYPE_FLOAT, send, recv, dp->block_bytes / 4));
    size_t *at = calloc((size_t)dp->world, sizeof(size_t));
    if (!at) return tx_oom();
    for (size_t i = 0; i < n; i++) {
        int r = dp->owner[i];
        if (r != dp->rank)
            memcpy(params[i]->data, recv + (size_t)r * dp->block_bytes + at[r], params[i]->nbytes);
        at[r] += params[i]->nbytes;
    }
    free(at);
    return NULL;
}
