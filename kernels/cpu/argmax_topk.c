/* argmax_topk.c - ArgMax, ArgMin and TopK along one axis.
 *
 * Elements are compared through order-preserving uint64 keys: integers map
 * exactly (signed ones with the sign bit flipped), floats via their bit
 * patterns with NaN made the largest value and -0 equal to +0. Ties are
 * broken by index, which gives ONNX's reference order. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <stdlib.h>
#include <string.h>

/* keys[i] for the n elements at element offsets off + i * stride. */
static void load_keys(const tx_tensor *x, size_t off, size_t stride, size_t n, uint64_t *keys)
{
    tx_kclass kc = tx_kclass_of(x->dtype);
    for (size_t i = 0; i < n; i++) {
        size_t at = off + i * stride;
        if (tx_kc_is_float(kc)) {
            double v;
            tx_load_f64(x->dtype, x->data, at, 1, &v);
            uint64_t b;
            if (v != v) {
                b = UINT64_C(0x7ff8000000000000);
            } else {
                if (v == 0) v = 0.0; /* -0 -> +0 */
                memcpy(&b, &v, 8);
            }
            keys[i] = (b >> 63) ? ~b : b | (UINT64_C(1) << 63);
        } else if (kc == TX_KC_I64) {
            int64_t v;
            tx_load_i64(x->dtype, x->data, at, 1, &v);
            keys[i] = (uint64_t)v ^ (UINT64_C(1) << 63);
        } else {
            tx_load_u64(x->dtype, x->data, at, 1, &keys[i]);
        }
    }
}

static bool arg_dtype_ok(teexec_dtype dt)
{
    tx_kclass kc = tx_kclass_of(dt);
    return tx_kc_is_numeric(kc) || kc == TX_KC_BOOL;
}

/* Splits x at axis into [outer, n, inner]. */
static void split_axis(const tx_tensor *x, int32_t ax, size_t *outer, size_t *n, size_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int32_t i = 0; i < ax; i++) *outer *= (size_t)x->dims[i];
    for (int32_t i = ax + 1; i < x->rank; i++) *inner *= (size_t)x->dims[i];
    *n = (size_t)x->dims[ax];
}

static teexec_status *arg_impl(const char *name, bool is_max, const tx_tensor *x, int64_t axis,
                               bool keepdims, bool select_last_index, tx_tensor *y)
{
    TX_TRY(tx_check_tensor(name, "data", x));
    if (!arg_dtype_ok(x->dtype)) return tx_err_dtype(name, x->dtype);
    int32_t ax;
    TX_TRY(tx_status_prefix(tx_shape_normalize_axis(axis, x->rank, &ax), "%s", name));
    tx_shape xs = tx_shape_of(x), ys;
    TX_TRY(tx_shape_reduce(&xs, &axis, 1, keepdims, false, &ys, NULL));
    TX_TRY(tx_check_output(name, y, TEEXEC_DTYPE_INT64, &ys));
    size_t outer, n, inner;
    split_axis(x, ax, &outer, &n, &inner);
    if (y->numel == 0) return NULL;
    if (n == 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the axis has size 0", name);
    uint64_t *keys = malloc(n * sizeof(uint64_t));
    if (!keys) return tx_oom();
    int64_t *out = y->data;
    for (size_t o = 0; o < outer; o++) {
        for (size_t j = 0; j < inner; j++) {
            load_keys(x, o * n * inner + j, inner, n, keys);
            size_t best = 0;
            for (size_t i = 1; i < n; i++) {
                bool better = is_max ? keys[i] > keys[best] : keys[i] < keys[best];
                if (better || (select_last_index && keys[i] == keys[best])) best = i;
            }
            out[o * inner + j] = (int64_t)best;
        }
    }
    free(keys);
    return NULL;
}

teexec_status *tx_cpu_argmax(const tx_tensor *x, int64_t axis, bool keepdims,
                             bool select_last_index, tx_tensor *y)
{
    return arg_impl("ArgMax", true, x, axis, keepdims, select_last_index, y);
}

teexec_status *tx_cpu_argmin(const tx_tensor *x, int64_t axis, bool keepdims,
                             bool select_last_index, tx_tensor *y)
{
    return arg_impl("ArgMin", false, x, axis, keepdims, select_last_index, y);
}

typedef struct keyed {
    uint64_t key;
    int64_t index;
} keyed;

static int by_key_desc(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static int by_key_asc(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

teexec_status *tx_cpu_topk(const tx_tensor *x, int64_t k, int64_t axis, bool largest,
                           bool sorted, tx_tensor *values, tx_tensor *indices)
{
    (void)sorted; /* always sorted: the spec leaves the unsorted order free */
    TX_TRY(tx_check_tensor("TopK", "X", x));
    if (!tx_kc_is_numeric(tx_kclass_of(x->dtype))) return tx_err_dtype("TopK", x->dtype);
    int32_t ax;
    TX_TRY(tx_status_prefix(tx_shape_normalize_axis(axis, x->rank, &ax), "TopK"));
    if (k < 0 || k > x->dims[ax])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "TopK: k = %lld for an axis of size %lld",
                        (long long)k, (long long)x->dims[ax]);
    tx_shape ys = tx_shape_of(x);
    ys.dims[ax] = k;
    TX_TRY(tx_check_output("TopK", values, x->dtype, &ys));
    TX_TRY(tx_check_output("TopK", indices, TEEXEC_DTYPE_INT64, &ys));
    size_t outer, n, inner;
    split_axis(x, ax, &outer, &n, &inner);
    if (values->numel == 0) return NULL;
    size_t es = tx_movable_size(x->dtype);
    uint64_t *keys = malloc(n * sizeof(uint64_t));
    keyed *items = malloc(n * sizeof(keyed));
    if (!keys || !items) {
        free(keys);
        free(items);
        return tx_oom();
    }
    int64_t *iout = indices->data;
    size_t kk = (size_t)k;
    for (size_t o = 0; o < outer; o++) {
        for (size_t j = 0; j < inner; j++) {
            size_t base = o * n * inner + j;
            load_keys(x, base, inner, n, keys);
            for (size_t i = 0; i < n; i++) {
                items[i].key = keys[i];
                items[i].index = (int64_t)i;
            }
            qsort(items, n, sizeof(keyed), largest ? by_key_desc : by_key_asc);
            for (size_t t = 0; t < kk; t++) {
                size_t dst = o * kk * inner + t * inner + j;
                size_t src = base + (size_t)items[t].index * inner;
                iout[dst] = items[t].index;
                memcpy((char *)values->data + dst * es, (const char *)x->data + src * es, es);
            }
        }
    }
    free(keys);
    free(items);
    return NULL;
}
