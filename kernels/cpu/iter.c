/* iter.c - row-wise strided iteration with dim coalescing. */
#include "kernels/cpu/iter.h"

#include <string.h>

void tx_broadcast_strides(const tx_shape *in, const tx_shape *out, int64_t *strides)
{
    int64_t own[TX_MAX_RANK];
    tx_shape_strides(in, own);
    int32_t off = out->rank - in->rank;
    for (int32_t i = 0; i < out->rank; i++) {
        int32_t j = i - off;
        strides[i] = (j < 0 || in->dims[j] == 1) ? 0 : own[j];
    }
}

void tx_iter_init(tx_iter *it, int32_t rank, const int64_t *dims, int nops,
                  const int64_t *const *strides)
{
    memset(it, 0, sizeof(*it));
    it->nops = nops;
    int64_t total = 1;
    for (int32_t i = 0; i < rank; i++) total *= dims[i];
    /* Drop size-1 dims: their strides never matter. */
    int32_t r = 0;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] == 1) continue;
        it->dims[r] = dims[i];
        for (int k = 0; k < nops; k++) it->strides[k][r] = strides[k][i];
        r++;
    }
    /* Merge dim i into dim i+1 where every operand steps over i exactly as
     * one full run of i+1. Scan from the right, compacting in place. */
    if (r > 1) {
        int32_t w = r - 1; /* dims[w..r-1] hold the compacted tail, dims[w] is its head */
        for (int32_t i = r - 2; i >= 0; i--) {
            int mergeable = 1;
            for (int k = 0; k < nops; k++)
                if (it->strides[k][i] != it->strides[k][w] * it->dims[w]) mergeable = 0;
            if (mergeable) {
                it->dims[w] *= it->dims[i];
            } else {
                w--;
                it->dims[w] = it->dims[i];
                for (int k = 0; k < nops; k++) it->strides[k][w] = it->strides[k][i];
            }
        }
        /* shift [w, r) down to [0, r-w) */
        int32_t n = r - w;
        for (int32_t i = 0; i < n; i++) {
            it->dims[i] = it->dims[i + w];
            for (int k = 0; k < nops; k++) it->strides[k][i] = it->strides[k][i + w];
        }
        r = n;
    }
    if (r == 0) {
        r = 1;
        it->dims[0] = 1;
        for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
    }
    it->rank = r;
    it->inner = it->dims[r - 1];
    for (int k = 0; k < nops; k++) it->inner_stride[k] = it->strides[k][r - 1];
    it->rows = it->inner ? total / it->inner : 0;
    if (total == 0) it->rows = 0;
}

void tx_iter_next(tx_iter *it)
{
    for (int32_t d = it->rank - 2; d >= 0; d--) {
        it->idx[d]++;
        for (int k = 0; k < it->nops; k++) it->off[k] += it->strides[k][d];
        if (it->idx[d] < it->dims[d]) return;
        for (int k = 0; k < it->nops; k++) it->off[k] -= it->strides[k][d] * it->dims[d];
        it->idx[d] = 0;
    }
}

#define STRIDED_ROW(T)                                                          \
    do {                                                                        \
        T *d = (T *)dst + it->off[0];                                           \
        const T *s = (const T *)src + it->off[1];                               \
        for (int64_t i = 0; i < n; i++) d[i * sd] = s[i * ss];                  \
    } while (0)

void tx_iter_copy(tx_iter *it, void *dst, const void *src, size_t es)
{
    int64_t n = it->inner, sd = it->inner_stride[0], ss = it->inner_stride[1];
    for (int64_t r = 0; r < it->rows; r++, tx_iter_next(it)) {
        if (sd == 1 && ss == 1) {
            memcpy((char *)dst + it->off[0] * (int64_t)es,
                   (const char *)src + it->off[1] * (int64_t)es, (size_t)n * es);
            continue;
        }
        switch (es) {
        case 1: STRIDED_ROW(uint8_t); break;
        case 2: STRIDED_ROW(uint16_t); break;
        case 4: STRIDED_ROW(uint32_t); break;
        case 8: STRIDED_ROW(uint64_t); break;
        default:
            for (int64_t i = 0; i < n; i++)
                memcpy((char *)dst + (it->off[0] + i * sd) * (int64_t)es,
                       (const char *)src + (it->off[1] + i * ss) * (int64_t)es, es);
            break;
        }
    }
}
