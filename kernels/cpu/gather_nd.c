/* gather_nd.c - GatherND (opset 11 / 12 / 13: batch_dims). Every index
 * tuple is validated (negative entries wrapped) before anything is copied;
 * the same offsets serve the trainer's scatter-add backward. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <stdlib.h>
#include <string.h>

/* The output shape: indices.shape[:-1] + data.shape[batch_dims + k:]. */
static teexec_status *gather_nd_shape(const tx_shape *data, const tx_shape *indices,
                                      int64_t batch_dims, tx_shape *out)
{
    int32_t r = data->rank, q = indices->rank;
    if (r < 1 || q < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "GatherND: data and indices must have rank >= 1 (got %d and %d)", (int)r,
                        (int)q);
    if (batch_dims < 0 || batch_dims >= (int64_t)r || batch_dims >= (int64_t)q)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "GatherND: batch_dims %lld must be below both ranks (%d, %d)",
                        (long long)batch_dims, (int)r, (int)q);
    int32_t b = (int32_t)batch_dims;
    for (int32_t i = 0; i < b; i++)
        if (data->dims[i] != indices->dims[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "GatherND: batch dim %d is %lld in data but %lld in indices", (int)i,
                            (long long)data->dims[i], (long long)indices->dims[i]);
    int64_t k = indices->dims[q - 1];
    if (k < 1 || k > (int64_t)(r - b))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "GatherND: the last indices dim (%lld) must be in [1, %d]", (long long)k,
                        (int)(r - b));
    int32_t orank = q - 1 + r - b - (int32_t)k;
    if (orank > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_LIMIT, "GatherND: output rank %d is too large", (int)orank);
    out->rank = orank;
    int32_t o = 0;
    for (int32_t i = 0; i < q - 1; i++) out->dims[o++] = indices->dims[i];
    for (int32_t i = b + (int32_t)k; i < r; i++) out->dims[o++] = data->dims[i];
    return NULL;
}

teexec_status *tx_cpu_gather_nd_offsets(const tx_shape *data, const tx_tensor *indices,
                                        int64_t batch_dims, int64_t **offsets, uint64_t *n_slices,
                                        uint64_t *slice)
{
    *offsets = NULL;
    TX_TRY(tx_check_tensor("GatherND", "indices", indices));
    if (indices->dtype != TEEXEC_DTYPE_INT64)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "GatherND: indices of dtype %s are not supported",
                        teexec_dtype_name(indices->dtype));
    tx_shape is = tx_shape_of(indices), ys;
    TX_TRY(gather_nd_shape(data, &is, batch_dims, &ys));
    int32_t b = (int32_t)batch_dims, q = is.rank;
    int64_t k = is.dims[q - 1];
    uint64_t nb = 1, per_batch = 1, sl = 1;
    for (int32_t i = 0; i < b; i++) nb *= (uint64_t)is.dims[i];
    for (int32_t i = b; i < q - 1; i++) per_batch *= (uint64_t)is.dims[i];
    for (int32_t i = b + (int32_t)k; i < data->rank; i++) sl *= (uint64_t)data->dims[i];
    /* elements of data per batch entry, and the strides of the indexed dims */
    uint64_t batch_stride = sl;
    int64_t st[TX_MAX_RANK];
    for (int32_t i = b + (int32_t)k - 1; i >= b; i--) {
        st[i] = (int64_t)batch_stride;
        batch_stride *= (uint64_t)data->dims[i];
    }
    uint64_t ns = nb * per_batch;
    int64_t *off = malloc(ns ? ns * sizeof(int64_t) : 1);
    if (!off) return tx_oom();
    const int64_t *iv = indices->data;
    for (uint64_t s = 0; s < ns; s++) {
        uint64_t bi = per_batch ? s / per_batch : 0;
        int64_t o = (int64_t)(bi * batch_stride);
        for (int64_t j = 0; j < k; j++) {
            int64_t dim = data->dims[b + j], v = iv[s * (uint64_t)k + (uint64_t)j];
            if (v < -dim || v >= dim) {
                free(off);
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "GatherND: index %lld is out of range for a dim of size %lld",
                                (long long)v, (long long)dim);
            }
            o += (v < 0 ? v + dim : v) * st[b + j];
        }
        off[s] = o;
    }
    *offsets = off;
    *n_slices = ns;
    *slice = sl;
    return NULL;
}

teexec_status *tx_cpu_gather_nd(const tx_tensor *data, const tx_tensor *indices, int64_t batch_dims,
                                tx_tensor *y)
{
    TX_TRY(tx_check_tensor("GatherND", "data", data));
    TX_TRY(tx_check_tensor("GatherND", "indices", indices));
    size_t es = tx_movable_size(data->dtype);
    if (!es) return tx_err_dtype("GatherND", data->dtype);
    tx_shape ds = tx_shape_of(data), is = tx_shape_of(indices), ys;
    TX_TRY(gather_nd_shape(&ds, &is, batch_dims, &ys));
    TX_TRY(tx_check_output("GatherND", y, data->dtype, &ys));
    int64_t *off;
    uint64_t ns, sl;
    TX_TRY(tx_cpu_gather_nd_offsets(&ds, indices, batch_dims, &off, &ns, &sl));
    size_t blk = (size_t)sl * es;
    char *dst = y->data;
    const char *src = data->data;
    for (uint64_t s = 0; s < ns; s++, dst += blk) memcpy(dst, src + (size_t)off[s] * es, blk);
    free(off);
    return NULL;
}
