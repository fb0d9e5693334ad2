/* transpose.c - Transpose: a strided copy with permuted input strides.
 * Coalescing in tx_iter turns the common attention permutes
 * ([B,S,H,D] -> [B,H,S,D]) into row memcpys. */
#include "kernels/cpu/ops.h"

#include "base/dtype.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

#include <string.h>

teexec_status *tx_cpu_transpose(const tx_tensor *x, const int64_t *perm, size_t nperm,
                                tx_tensor *y)
{
    TX_TRY(tx_check_tensor("Transpose", "input", x));
    size_t es = tx_movable_size(x->dtype);
    if (!es) return tx_err_dtype("Transpose", x->dtype);
    tx_shape xs = tx_shape_of(x), ys;
    TX_TRY(tx_status_prefix(tx_shape_transpose(&xs, perm, nperm, &ys), "Transpose"));
    TX_TRY(tx_check_output("Transpose", y, x->dtype, &ys));
    int64_t st_x[TX_MAX_RANK], st_in[TX_MAX_RANK], st_y[TX_MAX_RANK];
    tx_shape_strides(&xs, st_x);
    tx_shape_strides(&ys, st_y);
    for (int32_t i = 0; i < ys.rank; i++) {
        int64_t p = perm ? perm[i] : ys.rank - 1 - i;
        if (p < 0) p += xs.rank;
        st_in[i] = st_x[p];
    }
    const int64_t *strides[2] = {st_y, st_in};
    tx_iter it;
    tx_iter_init(&it, ys.rank, ys.dims, 2, strides);
    tx_iter_copy(&it, y->data, x->data, es);
    return NULL;
}

teexec_status *tx_cpu_copy(const tx_tensor *src, tx_tensor *dst)
{
    TX_TRY(tx_check_tensor("copy", "source", src));
    TX_TRY(tx_check_tensor("copy", "destination", dst));
    if (dst->dtype != src->dtype)
        return tx_err_dtype_mismatch("copy", "destination", dst->dtype, src->dtype);
    if (dst->numel != src->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "copy: destination has %llu elements, source %llu",
                        (unsigned long long)dst->numel, (unsigned long long)src->numel);
    if (src->dtype == TEEXEC_DTYPE_STRING) return tx_err_dtype("copy", src->dtype);
    int ok;
    uint64_t bytes = tx_dtype_storage_bytes(src->dtype, src->numel, &ok);
    if (!ok || bytes > src->nbytes || bytes > dst->nbytes)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "copy: storage sizes do not match");
    if (bytes && dst->data != src->data) memmove(dst->data, src->data, (size_t)bytes);
    return NULL;
}
