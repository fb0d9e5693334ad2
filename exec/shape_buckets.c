/* shape_buckets.c - a session's shape buckets and the padding and cutting
 * they need (shape_buckets.h). */
#include "exec/shape_buckets.h"

#include "base/dtype.h"

#include <stdlib.h>
#include <string.h>

static tx_dim_bucket *find(const tx_buckets *bs, const char *name)
{
    for (size_t i = 0; bs && name && i < bs->n; i++)
        if (!strcmp(bs->b[i].name, name)) return &bs->b[i];
    return NULL;
}

/* The entry for `name`, made empty (new or emptied). */
static teexec_status *entry(tx_buckets *bs, const char *name, tx_dim_bucket **out)
{
    tx_dim_bucket *e = find(bs, name);
    if (e) {
        free(e->sizes);
        e->sizes = NULL;
        e->n_sizes = 0;
        e->multiple = 0;
        *out = e;
        return NULL;
    }
    char *copy = strdup(name);
    if (!copy) return tx_oom();
    tx_dim_bucket *nb = realloc(bs->b, (bs->n + 1) * sizeof(*nb));
    if (!nb) {
        free(copy);
        return tx_oom();
    }
    bs->b = nb;
    e = &bs->b[bs->n++];
    memset(e, 0, sizeof(*e));
    e->name = copy;
    *out = e;
    return NULL;
}

teexec_status *tx_buckets_set_multiple(tx_buckets *bs, const char *name, int64_t multiple)
{
    if (!name || !name[0]) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the dim name is empty");
    if (multiple <= 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "dim \"%s\": a bucket multiple must be positive, not %lld", name,
                        (long long)multiple);
    tx_dim_bucket *e = NULL;
    TX_TRY(entry(bs, name, &e));
    e->multiple = multiple;
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

teexec_status *tx_buckets_set_sizes(tx_buckets *bs, const char *name, const int64_t *sizes,
                                    size_t n)
{
    if (!name || !name[0]) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the dim name is empty");
    if (!sizes || n == 0 || n > TX_MAX_BUCKET_SIZES)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "dim \"%s\": list 1 to %u bucket sizes (%zu given)", name,
                        TX_MAX_BUCKET_SIZES, sizes ? n : 0);
    for (size_t i = 0; i < n; i++)
        if (sizes[i] <= 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "dim \"%s\": bucket size %lld is not positive", name,
                            (long long)sizes[i]);
    int64_t *s = malloc(n * sizeof(*s));
    if (!s) return tx_oom();
    memcpy(s, sizes, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_i64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || s[i] != s[k - 1]) s[k++] = s[i];
    tx_dim_bucket *e = NULL;
    teexec_status *st = entry(bs, name, &e);
    if (st) {
        free(s);
        return st;
    }
    e->sizes = s;
    e->n_sizes = k;
    return NULL;
}

void tx_buckets_free(tx_buckets *bs)
{
    if (!bs) return;
    for (size_t i = 0; i < bs->n; i++) {
        free(bs->b[i].name);
        free(bs->b[i].sizes);
    }
    free(bs->b);
    bs->b = NULL;
    bs->n = 0;
}

teexec_status *tx_buckets_copy(const tx_buckets *src, tx_buckets *dst)
{
    memset(dst, 0, sizeof(*dst));
    for (size_t i = 0; src && i < src->n; i++) {
        const tx_dim_bucket *b = &src->b[i];
        teexec_status *st = b->multiple ? tx_buckets_set_multiple(dst, b->name, b->multiple)
                                        : tx_buckets_set_sizes(dst, b->name, b->sizes, b->n_sizes);
        if (st) {
            tx_buckets_free(dst);
            return st;
        }
    }
    return NULL;
}

teexec_status *tx_buckets_round(const tx_buckets *bs, const char *name, int64_t v, int64_t *out)
{
    *out = v;
    const tx_dim_bucket *b = find(bs, name);
    if (!b || v <= 0) return NULL; /* an empty extent stays empty */
    if (b->multiple) {
        /* checked before the sum: v + multiple - 1 itself may overflow */
        if (v > INT64_MAX - b->multiple)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dim \"%s\" is %lld: too large to bucket",
                            name, (long long)v);
        int64_t q = (v + b->multiple - 1) / b->multiple;
        if (q > INT64_MAX / b->multiple)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dim \"%s\" is %lld: too large to bucket",
                            name, (long long)v);
        *out = q * b->multiple;
        return NULL;
    }
    for (size_t i = 0; i < b->n_sizes; i++)
        if (b->sizes[i] >= v) {
            *out = b->sizes[i];
            return NULL;
        }
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                    "dim \"%s\" is %lld, over its largest bucket %lld (the sizes the session "
                    "was declared for)",
                    name, (long long)v, (long long)b->sizes[b->n_sizes - 1]);
}

/* t viewed as [outer, dims[d], inner] elements; sub-byte dtypes only when
 * the inner run is whole bytes. */
static teexec_status *view(const tx_tensor *t, int32_t d, size_t *outer, size_t *inner_bytes)
{
    if (d < 0 || d >= t->rank)
        return tx_error(TEEXEC_ERR_INTERNAL, "bucketing dim %d of a rank-%d tensor", (int)d,
                        (int)t->rank);
    if (t->dtype == TEEXEC_DTYPE_STRING)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "string tensors are not bucketed");
    size_t o = 1, in = 1;
    for (int32_t k = 0; k < d; k++) o *= (size_t)t->dims[k];
    for (int32_t k = d + 1; k < t->rank; k++) in *= (size_t)t->dims[k];
    size_t es = tx_dtype_elem_size(t->dtype);
    if (!es)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s tensors are not bucketed",
                        teexec_dtype_name(t->dtype));
    *outer = o;
    *inner_bytes = in * es;
    return NULL;
}

static teexec_status *reshape_copy(const tx_tensor *t, int32_t d, int64_t n, tx_tensor *out)
{
    memset(out, 0, sizeof(*out));
    size_t outer = 0, inner = 0;
    TX_TRY(view(t, d, &outer, &inner));
    int64_t dims[TX_MAX_RANK];
    memcpy(dims, t->dims, (size_t)t->rank * sizeof(dims[0]));
    dims[d] = n;
    TX_TRY(tx_tensor_alloc(out, t->dtype, t->rank, dims)); /* zero-filled */
    size_t src_row = (size_t)t->dims[d] * inner, dst_row = (size_t)n * inner;
    size_t row = src_row < dst_row ? src_row : dst_row;
    for (size_t o = 0; o < outer && row; o++)
        memcpy((char *)out->data + o * dst_row, (const char *)t->data + o * src_row, row);
    return NULL;
}

teexec_status *tx_tensor_pad_dim(const tx_tensor *t, int32_t d, int64_t n, tx_tensor *out)
{
    if (d >= 0 && d < t->rank && n < t->dims[d])
        return tx_error(TEEXEC_ERR_INTERNAL, "padding dim %d from %lld down to %lld", (int)d,
                        (long long)t->dims[d], (long long)n);
    return reshape_copy(t, d, n, out);
}

teexec_status *tx_tensor_cut_dim(const tx_tensor *t, int32_t d, int64_t n, tx_tensor *out)
{
    if (d >= 0 && d < t->rank && (n > t->dims[d] || n < 0))
        return tx_error(TEEXEC_ERR_INTERNAL, "cutting dim %d from %lld up to %lld", (int)d,
                        (long long)t->dims[d], (long long)n);
    return reshape_copy(t, d, n, out);
}
