/* shape.c - shape arithmetic (broadcasting, axes, matmul, slices, ...). */
#include "base/shape.h"

#include "base/checked.h"

#include <stdio.h>
#include <string.h>

tx_shape tx_shape_of(const tx_tensor *t)
{
    tx_shape s;
    memset(&s, 0, sizeof(s));
    s.rank = t->rank;
    memcpy(s.dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    return s;
}

teexec_status *tx_shape_make(int32_t rank, const int64_t *dims, tx_shape *out)
{
    if (rank < 0 || rank > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_LIMIT, "rank %d is outside 0..%d", (int)rank, TX_MAX_RANK);
    memset(out, 0, sizeof(*out));
    out->rank = rank;
    if (rank) memcpy(out->dims, dims, sizeof(int64_t) * (size_t)rank);
    return NULL;
}

bool tx_shape_equal(const tx_shape *a, const tx_shape *b)
{
    if (a->rank != b->rank) return false;
    for (int32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

bool tx_tensor_has_shape(const tx_tensor *t, const tx_shape *s)
{
    if (t->rank != s->rank) return false;
    for (int32_t i = 0; i < s->rank; i++)
        if (t->dims[i] != s->dims[i]) return false;
    return true;
}

const char *tx_shape_str(const tx_shape *s, char *buf, size_t size)
{
    if (!size) return buf;
    size_t used = 0;
    buf[0] = '\0';
    int w = snprintf(buf, size, "[");
    if (w > 0) used = (size_t)w;
    for (int32_t i = 0; i < s->rank && used < size; i++) {
        w = snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)s->dims[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

static teexec_status *check_dims(const tx_shape *s)
{
    if (s->rank < 0 || s->rank > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "rank %d is outside 0..%d", (int)s->rank,
                        TX_MAX_RANK);
    for (int32_t i = 0; i < s->rank; i++)
        if (s->dims[i] < 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "negative dimension %lld",
                            (long long)s->dims[i]);
    return NULL;
}

/* Every produced shape must describe an addressable tensor. */
static teexec_status *check_numel(const tx_shape *s)
{
    uint64_t n;
    if (!tx_dims_product(s->dims, (size_t)s->rank, &n) || n > (uint64_t)INT64_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "element count of the shape overflows");
    return NULL;
}

teexec_status *tx_shape_numel(const tx_shape *s, uint64_t *numel)
{
    TX_TRY(check_dims(s));
    uint64_t n;
    if (!tx_dims_product(s->dims, (size_t)s->rank, &n))
        return tx_error(TEEXEC_ERR_LIMIT, "element count of the shape overflows");
    *numel = n;
    return NULL;
}

void tx_shape_strides(const tx_shape *s, int64_t *strides)
{
    int64_t st = 1;
    for (int32_t i = s->rank - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dims[i] > 0 ? s->dims[i] : 1;
    }
}

teexec_status *tx_shape_normalize_axis(int64_t axis, int32_t rank, int32_t *out)
{
    if (rank <= 0 || axis < -(int64_t)rank || axis >= (int64_t)rank)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                        (long long)axis, (int)rank);
    *out = (int32_t)(axis < 0 ? axis + rank : axis);
    return NULL;
}

teexec_status *tx_shape_broadcast(size_t n, const tx_shape *const *shapes, tx_shape *out)
{
    if (n == 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "broadcast of no shapes");
    tx_shape r;
    memset(&r, 0, sizeof(r));
    for (size_t k = 0; k < n; k++) {
        TX_TRY(check_dims(shapes[k]));
        if (shapes[k]->rank > r.rank) r.rank = shapes[k]->rank;
    }
    for (int32_t i = 0; i < r.rank; i++) {
        int64_t d = 1;
        for (size_t k = 0; k < n; k++) {
            const tx_shape *s = shapes[k];
            int32_t j = i - (r.rank - s->rank);
            if (j < 0) continue;
            int64_t e = s->dims[j];
            if (e == 1) continue;
            if (d == 1) {
                d = e;
            } else if (e != d) {
                char b1[128], b2[128];
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "shapes %s and %s cannot be broadcast (dim %lld vs %lld)",
                                tx_shape_str(shapes[0], b1, sizeof b1),
                                tx_shape_str(s, b2, sizeof b2), (long long)d, (long long)e);
            }
        }
        r.dims[i] = d;
    }
    TX_TRY(check_numel(&r));
    *out = r;
    return NULL;
}

teexec_status *tx_shape_broadcast2(const tx_shape *a, const tx_shape *b, tx_shape *out)
{
    const tx_shape *s[2] = {a, b};
    return tx_shape_broadcast(2, s, out);
}

bool tx_shape_broadcastable_to(const tx_shape *from, const tx_shape *to)
{
    if (from->rank > to->rank) return false;
    int32_t off = to->rank - from->rank;
    for (int32_t i = 0; i < from->rank; i++) {
        int64_t f = from->dims[i];
        if (f != 1 && f != to->dims[i + off]) return false;
    }
    return true;
}

teexec_status *tx_shape_matmul(const tx_shape *a, const tx_shape *b, tx_shape *out)
{
    TX_TRY(check_dims(a));
    TX_TRY(check_dims(b));
    if (a->rank < 1 || b->rank < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "MatMul operands must have rank >= 1");
    tx_shape pa = *a, pb = *b;
    if (a->rank == 1) {
        pa.rank = 2;
        pa.dims[0] = 1;
        pa.dims[1] = a->dims[0];
    }
    if (b->rank == 1) {
        pb.rank = 2;
        pb.dims[0] = b->dims[0];
        pb.dims[1] = 1;
    }
    int64_t k1 = pa.dims[pa.rank - 1], k2 = pb.dims[pb.rank - 2];
    if (k1 != k2) {
        char b1[128], b2[128];
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "MatMul inner dims differ: %s x %s", tx_shape_str(a, b1, sizeof b1),
                        tx_shape_str(b, b2, sizeof b2));
    }
    tx_shape ba = pa, bb = pb, bo;
    ba.rank -= 2;
    bb.rank -= 2;
    TX_TRY(tx_shape_broadcast2(&ba, &bb, &bo));
    if (bo.rank + 2 > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_LIMIT, "MatMul result rank is over the limit");
    tx_shape r = bo;
    if (a->rank != 1) r.dims[r.rank++] = pa.dims[pa.rank - 2];
    if (b->rank != 1) r.dims[r.rank++] = pb.dims[pb.rank - 1];
    TX_TRY(check_numel(&r));
    *out = r;
    return NULL;
}

teexec_status *tx_shape_gemm(const tx_shape *a, const tx_shape *b, bool trans_a, bool trans_b,
                             int64_t *m, int64_t *n, int64_t *k)
{
    TX_TRY(check_dims(a));
    TX_TRY(check_dims(b));
    if (a->rank != 2 || b->rank != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Gemm needs 2-D A and B (got rank %d and %d)",
                        (int)a->rank, (int)b->rank);
    int64_t am = trans_a ? a->dims[1] : a->dims[0];
    int64_t ak = trans_a ? a->dims[0] : a->dims[1];
    int64_t bk = trans_b ? b->dims[1] : b->dims[0];
    int64_t bn = trans_b ? b->dims[0] : b->dims[1];
    if (ak != bk)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Gemm inner dims differ: K=%lld vs %lld",
                        (long long)ak, (long long)bk);
    uint64_t mn;
    if (!tx_mul_u64((uint64_t)am, (uint64_t)bn, &mn) || mn > (uint64_t)INT64_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "Gemm output size overflows");
    *m = am;
    *n = bn;
    *k = ak;
    return NULL;
}

teexec_status *tx_shape_transpose(const tx_shape *in, const int64_t *perm, size_t nperm,
                                  tx_shape *out)
{
    TX_TRY(check_dims(in));
    tx_shape r = *in;
    if (!perm) {
        for (int32_t i = 0; i < in->rank; i++) r.dims[i] = in->dims[in->rank - 1 - i];
        *out = r;
        return NULL;
    }
    if (nperm != (size_t)in->rank)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "Transpose perm has %zu entries for rank %d", nperm, (int)in->rank);
    bool seen[TX_MAX_RANK] = {false};
    for (size_t i = 0; i < nperm; i++) {
        int64_t p = perm[i];
        if (p < 0) p += in->rank; /* tolerated, as ONNX Runtime does */
        if (p < 0 || p >= in->rank || seen[p])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "Transpose perm is not a permutation of 0..%d", (int)in->rank - 1);
        seen[p] = true;
        r.dims[i] = in->dims[p];
    }
    *out = r;
    return NULL;
}

teexec_status *tx_shape_reduce(const tx_shape *in, const int64_t *axes, size_t naxes,
                               bool keepdims, bool noop_with_empty_axes, tx_shape *out,
                               bool *reduced)
{
    TX_TRY(check_dims(in));
    bool red[TX_MAX_RANK] = {false};
    if (naxes == 0) {
        if (!noop_with_empty_axes)
            for (int32_t i = 0; i < in->rank; i++) red[i] = true;
    } else {
        for (size_t i = 0; i < naxes; i++) {
            int32_t ax = 0;
            TX_TRY(tx_shape_normalize_axis(axes[i], in->rank, &ax));
            if (red[ax])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "reduction axis %lld repeated",
                                (long long)axes[i]);
            red[ax] = true;
        }
    }
    tx_shape r;
    memset(&r, 0, sizeof(r));
    for (int32_t i = 0; i < in->rank; i++) {
        if (!red[i])
            r.dims[r.rank++] = in->dims[i];
        else if (keepdims)
            r.dims[r.rank++] = 1;
    }
    *out = r;
    if (reduced) memcpy(reduced, red, sizeof(bool) * (size_t)in->rank);
    return NULL;
}

teexec_status *tx_shape_concat(size_t n, const tx_shape *const *in, int64_t axis,
                               tx_shape *out)
{
    if (n == 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Concat of no inputs");
    int32_t rank = in[0]->rank, ax = 0;
    TX_TRY(tx_shape_normalize_axis(axis, rank, &ax));
    tx_shape r = *in[0];
    TX_TRY(check_dims(&r));
    for (size_t k = 1; k < n; k++) {
        const tx_shape *s = in[k];
        TX_TRY(check_dims(s));
        if (s->rank != rank)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "Concat input %zu has rank %d, input 0 has %d", k, (int)s->rank,
                            (int)rank);
        for (int32_t i = 0; i < rank; i++) {
            if (i == ax) continue;
            if (s->dims[i] != r.dims[i])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "Concat input %zu differs on dim %d (%lld vs %lld)", k, (int)i,
                                (long long)s->dims[i], (long long)r.dims[i]);
        }
        if (__builtin_add_overflow(r.dims[ax], s->dims[ax], &r.dims[ax]))
            return tx_error(TEEXEC_ERR_LIMIT, "Concat dim overflows");
    }
    TX_TRY(check_numel(&r));
    *out = r;
    return NULL;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

teexec_status *tx_shape_slice(const tx_shape *in, const int64_t *starts, const int64_t *ends,
                              const int64_t *axes, const int64_t *steps, size_t n,
                              int64_t *eff_start, int64_t *eff_step, tx_shape *out)
{
    TX_TRY(check_dims(in));
    if (n > (size_t)in->rank)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Slice has %zu axes for rank %d", n,
                        (int)in->rank);
    tx_shape r = *in;
    int64_t st[TX_MAX_RANK], sp[TX_MAX_RANK];
    bool seen[TX_MAX_RANK] = {false};
    for (int32_t i = 0; i < in->rank; i++) {
        st[i] = 0;
        sp[i] = 1;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t ax = 0;
        TX_TRY(tx_shape_normalize_axis(axes ? axes[i] : (int64_t)i, in->rank, &ax));
        if (seen[ax])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Slice axis %d repeated", (int)ax);
        seen[ax] = true;
        int64_t dim = in->dims[ax];
        int64_t step = steps ? steps[i] : 1;
        if (step == 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Slice step is 0");
        int64_t s = starts[i], e = ends[i];
        /* INT64_MIN/MAX are common "to the end" markers: avoid overflow. */
        if (s < 0) s = s < -dim ? -1 : s + dim;
        if (e < 0) e = e < -dim ? -1 : e + dim;
        int64_t len;
        if (step > 0) {
            s = clamp64(s, 0, dim);
            e = clamp64(e, 0, dim);
            len = e > s ? (e - s - 1) / step + 1 : 0;
        } else {
            /* the spec (and ONNX Runtime) clamp a backward start into
             * [0, dim-1]; numpy would give an empty slice instead */
            s = dim > 0 ? clamp64(s, 0, dim - 1) : -1;
            e = clamp64(e, -1, dim - 1);
            /* -(step) cannot overflow usefully: step == INT64_MIN gives len <= 1 */
            uint64_t ustep = (uint64_t)0 - (uint64_t)step;
            len = s > e ? (int64_t)((uint64_t)(s - e - 1) / ustep) + 1 : 0;
        }
        st[ax] = len > 0 ? s : 0;
        sp[ax] = step;
        r.dims[ax] = len;
    }
    if (eff_start) memcpy(eff_start, st, sizeof(int64_t) * (size_t)in->rank);
    if (eff_step) memcpy(eff_step, sp, sizeof(int64_t) * (size_t)in->rank);
    *out = r;
    return NULL;
}

teexec_status *tx_shape_gather(const tx_shape *data, const tx_shape *indices, int64_t axis,
                               tx_shape *out)
{
    TX_TRY(check_dims(data));
    TX_TRY(check_dims(indices));
    int32_t ax = 0;
    TX_TRY(tx_shape_normalize_axis(axis, data->rank, &ax));
    if (data->rank - 1 + indices->rank > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_LIMIT, "Gather result rank is over the limit");
    tx_shape r;
    memset(&r, 0, sizeof(r));
    for (int32_t i = 0; i < ax; i++) r.dims[r.rank++] = data->dims[i];
    for (int32_t i = 0; i < indices->rank; i++) r.dims[r.rank++] = indices->dims[i];
    for (int32_t i = ax + 1; i < data->rank; i++) r.dims[r.rank++] = data->dims[i];
    TX_TRY(check_numel(&r));
    *out = r;
    return NULL;
}

teexec_status *tx_shape_tile(const tx_shape *in, const int64_t *repeats, size_t nrep,
                             tx_shape *out)
{
    TX_TRY(check_dims(in));
    if (nrep != (size_t)in->rank)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Tile has %zu repeats for rank %d", nrep,
                        (int)in->rank);
    tx_shape r = *in;
    for (int32_t i = 0; i < in->rank; i++) {
        if (repeats[i] < 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Tile repeat %lld is negative",
                            (long long)repeats[i]);
        if (__builtin_mul_overflow(in->dims[i], repeats[i], &r.dims[i]))
            return tx_error(TEEXEC_ERR_LIMIT, "Tile dim overflows");
    }
    TX_TRY(check_numel(&r));
    *out = r;
    return NULL;
}

teexec_status *tx_shape_expand(const tx_shape *in, const int64_t *shape, size_t n,
                               tx_shape *out)
{
    tx_shape want;
    if (n > TX_MAX_RANK) return tx_error(TEEXEC_ERR_LIMIT, "Expand shape rank over the limit");
    TX_TRY(tx_shape_make((int32_t)n, shape, &want));
    return tx_shape_broadcast2(in, &want, out);
}

teexec_status *tx_shape_reshape(const tx_shape *in, const int64_t *shape, size_t n,
                                bool allowzero, tx_shape *out)
{
    TX_TRY(check_dims(in));
    if (n > TX_MAX_RANK) return tx_error(TEEXEC_ERR_LIMIT, "Reshape rank over the limit");
    uint64_t total = 0;
    TX_TRY(tx_shape_numel(in, &total));
    tx_shape r;
    memset(&r, 0, sizeof(r));
    r.rank = (int32_t)n;
    int infer = -1;
    uint64_t known = 1;
    for (size_t i = 0; i < n; i++) {
        int64_t d = shape[i];
        if (d == -1) {
            if (infer >= 0)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Reshape has more than one -1");
            infer = (int)i;
            continue;
        }
        if (d == 0 && !allowzero) {
            if (i >= (size_t)in->rank)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "Reshape copies dim %zu (0) that the input lacks", i);
            d = in->dims[i];
        }
        if (d < 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Reshape dim %lld is invalid",
                            (long long)d);
        r.dims[i] = d;
        if (!tx_mul_u64(known, (uint64_t)d, &known))
            return tx_error(TEEXEC_ERR_LIMIT, "Reshape size overflows");
    }
    if (infer >= 0) {
        if (known == 0) {
            if (total != 0)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "Reshape cannot infer -1 next to a zero dim");
            r.dims[infer] = 0;
        } else {
            if (total % known)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "Reshape: %llu elements do not divide into %llu",
                                (unsigned long long)total, (unsigned long long)known);
            r.dims[infer] = (int64_t)(total / known);
        }
    } else if (known != total) {
        char b1[128];
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "Reshape of %s (%llu elements) into %llu elements",
                        tx_shape_str(in, b1, sizeof b1), (unsigned long long)total,
                        (unsigned long long)known);
    }
    *out = r;
    return NULL;
}

teexec_status *tx_shape_squeeze(const tx_shape *in, const int64_t *axes, size_t naxes,
                                tx_shape *out)
{
    TX_TRY(check_dims(in));
    bool drop[TX_MAX_RANK] = {false};
    if (!axes || naxes == 0) {
        for (int32_t i = 0; i < in->rank; i++) drop[i] = in->dims[i] == 1;
    } else {
        for (size_t i = 0; i < naxes; i++) {
            int32_t ax = 0;
            TX_TRY(tx_shape_normalize_axis(axes[i], in->rank, &ax));
            if (in->dims[ax] != 1)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "Squeeze axis %lld has size %lld, not 1", (long long)axes[i],
                                (long long)in->dims[ax]);
            drop[ax] = true;
        }
    }
    tx_shape r;
    memset(&r, 0, sizeof(r));
    for (int32_t i = 0; i < in->rank; i++)
        if (!drop[i]) r.dims[r.rank++] = in->dims[i];
    *out = r;
    return NULL;
}

teexec_status *tx_shape_unsqueeze(const tx_shape *in, const int64_t *axes, size_t naxes,
                                  tx_shape *out)
{
    TX_TRY(check_dims(in));
    if ((size_t)in->rank + naxes > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_LIMIT, "Unsqueeze result rank over the limit");
    int32_t orank = in->rank + (int32_t)naxes;
    bool ins[TX_MAX_RANK] = {false};
    for (size_t i = 0; i < naxes; i++) {
        int32_t ax = 0;
        TX_TRY(tx_shape_normalize_axis(axes[i], orank, &ax));
        if (ins[ax])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Unsqueeze axis %lld repeated",
                            (long long)axes[i]);
        ins[ax] = true;
    }
    tx_shape r;
    memset(&r, 0, sizeof(r));
    r.rank = orank;
    int32_t j = 0;
    for (int32_t i = 0; i < orank; i++) r.dims[i] = ins[i] ? 1 : in->dims[j++];
    *out = r;
    return NULL;
}

teexec_status *tx_shape_flatten(const tx_shape *in, int64_t axis, tx_shape *out)
{
    TX_TRY(check_dims(in));
    int32_t ax = 0;
    /* Flatten's axis lies in [-rank, rank] and a negative one counts from
     * rank (-1 is rank-1), so normalize it before the rank+1 range check. */
    if (axis < 0) axis += in->rank;
    TX_TRY(tx_shape_normalize_axis(axis, in->rank + 1, &ax));
    uint64_t a = 1, b = 1;
    if (!tx_dims_product(in->dims, (size_t)ax, &a) ||
        !tx_dims_product(in->dims + ax, (size_t)(in->rank - ax), &b))
        return tx_error(TEEXEC_ERR_LIMIT, "Flatten size overflows");
    tx_shape r;
    memset(&r, 0, sizeof(r));
    r.rank = 2;
    r.dims[0] = (int64_t)a;
    r.dims[1] = (int64_t)b;
    *out = r;
    return NULL;
}
