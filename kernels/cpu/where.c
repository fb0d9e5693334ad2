/* where.c - Where(cond, X, Y) with three-way broadcasting; a byte-level
 * select, so every dtype of 8 bits or more works. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

#include <string.h>

/* One row; SC/SX/SY are the inner strides. Dispatching the 0/1 stride
 * patterns to loops with constant strides lets them vectorize (the
 * attention-mask case is cond and X contiguous, Y a scalar). */
#define SELECT_ROW(T, SC, SX, SY)                                                  \
    do {                                                                           \
        const uint8_t *c = (const uint8_t *)cond->data + it.off[1];                \
        const T *px = (const T *)x->data + it.off[2];                              \
        const T *py = (const T *)y->data + it.off[3];                              \
        T *po = (T *)out->data + it.off[0];                                        \
        for (int64_t i = 0; i < len; i++)                                          \
            po[i] = c[i * (SC)] ? px[i * (SX)] : py[i * (SY)];                     \
    } while (0)

#define SELECT_LOOP(T)                                                             \
    do {                                                                           \
        if (sc <= 1 && sx <= 1 && sy <= 1 && sc >= 0 && sx >= 0 && sy >= 0) {      \
            switch ((sc << 2) | (sx << 1) | sy) {                                  \
            case 0: SELECT_ROW(T, 0, 0, 0); break;                                 \
            case 1: SELECT_ROW(T, 0, 0, 1); break;                                 \
            case 2: SELECT_ROW(T, 0, 1, 0); break;                                 \
            case 3: SELECT_ROW(T, 0, 1, 1); break;                                 \
            case 4: SELECT_ROW(T, 1, 0, 0); break;                                 \
            case 5: SELECT_ROW(T, 1, 0, 1); break;                                 \
            case 6: SELECT_ROW(T, 1, 1, 0); break;                                 \
            default: SELECT_ROW(T, 1, 1, 1); break;                                \
            }                                                                      \
        } else {                                                                   \
            SELECT_ROW(T, sc, sx, sy);                                             \
        }                                                                          \
    } while (0)

teexec_status *tx_cpu_where(const tx_tensor *cond, const tx_tensor *x, const tx_tensor *y,
                            tx_tensor *out)
{
    TX_TRY(tx_check_tensor("Where", "condition", cond));
    TX_TRY(tx_check_tensor("Where", "X", x));
    TX_TRY(tx_check_tensor("Where", "Y", y));
    if (cond->dtype != TEEXEC_DTYPE_BOOL)
        return tx_err_dtype_mismatch("Where", "condition", cond->dtype, TEEXEC_DTYPE_BOOL);
    if (y->dtype != x->dtype) return tx_err_dtype_mismatch("Where", "Y", y->dtype, x->dtype);
    size_t es = tx_movable_size(x->dtype);
    if (!es) return tx_err_dtype("Where", x->dtype);
    tx_shape sc_ = tx_shape_of(cond), sx_ = tx_shape_of(x), sy_ = tx_shape_of(y), so;
    const tx_shape *all[3] = {&sc_, &sx_, &sy_};
    TX_TRY(tx_status_prefix(tx_shape_broadcast(3, all, &so), "Where"));
    TX_TRY(tx_check_output("Where", out, x->dtype, &so));

    int64_t s0[TX_MAX_RANK], s1[TX_MAX_RANK], s2[TX_MAX_RANK], s3[TX_MAX_RANK];
    tx_shape_strides(&so, s0);
    tx_broadcast_strides(&sc_, &so, s1);
    tx_broadcast_strides(&sx_, &so, s2);
    tx_broadcast_strides(&sy_, &so, s3);
    const int64_t *strides[4] = {s0, s1, s2, s3};
    tx_iter it;
    tx_iter_init(&it, so.rank, so.dims, 4, strides);
    int64_t len = it.inner;
    int64_t sc = it.inner_stride[1], sx = it.inner_stride[2], sy = it.inner_stride[3];
    for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it)) {
        switch (es) {
        case 1: SELECT_LOOP(uint8_t); break;
        case 2: SELECT_LOOP(uint16_t); break;
        case 4: SELECT_LOOP(uint32_t); break;
        case 8: SELECT_LOOP(uint64_t); break;
        default: {
            const uint8_t *c = (const uint8_t *)cond->data + it.off[1];
            for (int64_t i = 0; i < len; i++) {
                const void *src = c[i * sc]
                    ? (const char *)x->data + (size_t)(it.off[2] + i * sx) * es
                    : (const char *)y->data + (size_t)(it.off[3] + i * sy) * es;
                memcpy((char *)out->data + (size_t)(it.off[0] + i) * es, src, es);
            }
        }
        }
    }
    return NULL;
}
