/* gather.c - Gather and GatherElements. Indices are validated (and
 * negative ones wrapped) before anything is copied. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

#include <stdlib.h>
#include <string.h>

/* Reads the indices as int64, wraps negatives, checks the range [0, dim). */
static teexec_status *load_indices(const char *op, const tx_tensor *indices, int64_t dim,
                                   int64_t **out)
{
    if (indices->dtype != TEEXEC_DTYPE_INT64 && indices->dtype != TEEXEC_DTYPE_INT32)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: indices of dtype %s are not supported", op,
                        teexec_dtype_name(indices->dtype));
    size_t n = (size_t)indices->numel;
    int64_t *idx = malloc(n ? n * sizeof(int64_t) : 1);
    if (!idx) return tx_oom();
    tx_load_i64(indices->dtype, indices->data, 0, n, idx);
    for (size_t i = 0; i < n; i++) {
        int64_t v = idx[i];
        if (v < -dim || v >= dim) {
            free(idx);
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: index %lld is out of range for an axis of size %lld", op,
                            (long long)v, (long long)dim);
        }
        idx[i] = v < 0 ? v + dim : v;
    }
    *out = idx;
    return NULL;
}

teexec_status *tx_cpu_gather(const tx_tensor *data, const tx_tensor *indices, int64_t axis,
                             tx_tensor *y)
{
    TX_TRY(tx_check_tensor("Gather", "data", data));
    TX_TRY(tx_check_tensor("Gather", "indices", indices));
    size_t es = tx_movable_size(data->dtype);
    if (!es) return tx_err_dtype("Gather", data->dtype);
    tx_shape ds = tx_shape_of(data), is = tx_shape_of(indices), ys;
    TX_TRY(tx_status_prefix(tx_shape_gather(&ds, &is, axis, &ys), "Gather"));
    TX_TRY(tx_check_output("Gather", y, data->dtype, &ys));
    int32_t ax = (int32_t)(axis < 0 ? axis + ds.rank : axis);
    int64_t *idx;
    TX_TRY(load_indices("Gather", indices, ds.dims[ax], &idx));
    size_t outer = 1, inner = 1, nidx = (size_t)indices->numel;
    for (int32_t i = 0; i < ax; i++) outer *= (size_t)ds.dims[i];
    for (int32_t i = ax + 1; i < ds.rank; i++) inner *= (size_t)ds.dims[i];
    size_t blk = inner * es, dim = (size_t)ds.dims[ax];
    char *dst = y->data;
    for (size_t o = 0; o < outer; o++) {
        const char *src = (const char *)data->data + o * dim * blk;
        for (size_t j = 0; j < nidx; j++, dst += blk) memcpy(dst, src + (size_t)idx[j] * blk, blk);
    }
    free(idx);
    return NULL;
}

teexec_status *tx_cpu_gather_elements(const tx_tensor *data, const tx_tensor *indices,
                                      int64_t axis, tx_tensor *y)
{
    const char *name = "GatherElements";
    TX_TRY(tx_check_tensor(name, "data", data));
    TX_TRY(tx_check_tensor(name, "indices", indices));
    size_t es = tx_movable_size(data->dtype);
    if (!es) return tx_err_dtype(name, data->dtype);
    tx_shape ds = tx_shape_of(data), is = tx_shape_of(indices);
    int32_t ax;
    TX_TRY(tx_status_prefix(tx_shape_normalize_axis(axis, ds.rank, &ax), "%s", name));
    if (is.rank != ds.rank)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: indices rank %d differs from data rank %d",
                        name, (int)is.rank, (int)ds.rank);
    for (int32_t i = 0; i < ds.rank; i++)
        if (i != ax && is.dims[i] > ds.dims[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: indices dim %d (%lld) exceeds the data's (%lld)", name, (int)i,
                            (long long)is.dims[i], (long long)ds.dims[i]);
    TX_TRY(tx_check_output(name, y, data->dtype, &is));
    int64_t *idx;
    TX_TRY(load_indices(name, indices, ds.dims[ax], &idx));
    int64_t st_i[TX_MAX_RANK], st_d[TX_MAX_RANK], st_dz[TX_MAX_RANK];
    tx_shape_strides(&is, st_i);
    tx_shape_strides(&ds, st_d);
    memcpy(st_dz, st_d, sizeof(st_d));
    st_dz[ax] = 0;
    int64_t axis_stride = st_d[ax];
    const int64_t *strides[2] = {st_i, st_dz};
    tx_iter it;
    tx_iter_init(&it, is.rank, is.dims, 2, strides);
    for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it)) {
        for (int64_t i = 0; i < it.inner; i++) {
            int64_t o = it.off[0] + i * it.inner_stride[0];
            int64_t d = it.off[1] + i * it.inner_stride[1] + idx[o] * axis_stride;
            memcpy((char *)y->data + o * (int64_t)es, (const char *)data->data + d * (int64_t)es,
                   es);
        }
    }
    free(idx);
    return NULL;
}
