/*
 * const_eval_node.c - evaluates one standard-domain node whose inputs are
 * all known values (tx_ce_eval_node, const_eval.h): the constant work
 * PyTorch's exporters leave in a graph (shape arithmetic, masks, position
 * ids, rotary tables, scales), done once at load instead of per call.
 *
 * The node's shape rule (shape_infer.h) has already typed the outputs, so
 * attributes, axes and broadcasting are checked once, there; this file
 * computes the elements:
 *   - ops that only move elements (Identity, Reshape, Flatten, (Un)Squeeze,
 *     Concat, Split, Slice, Gather, Expand, Tile, Transpose, Trilu, Where,
 *     ConstantOfShape) copy the elements' bytes: exact for every dtype,
 *     int64 sentinels such as INT64_MAX included;
 *   - integer and bool arithmetic is exact in int64; a result that
 *     overflows int64 or its dtype, a division by zero or a negative
 *     integer exponent is declined (the node stays and runs as it would);
 *   - float arithmetic is done in double and each op's result is rounded
 *     to the op's dtype once (float32 via a (float) conversion), which for
 *     + - * / sqrt is the correctly rounded float32 result; MatMul, the
 *     reductions and CumSum accumulate in double and round each output
 *     once (at most half an ulp from the exact result; PyTorch's float32
 *     accumulation may differ by a few ulps);
 *   - Cast rounds as the target type: int64 -> float32 converts directly
 *     (never through double), float -> int truncates toward zero (NaN or
 *     out of range is declined), int -> narrower int wraps as ONNX
 *     Runtime and NumPy do.
 * Anything else (other ops, string / sub-byte / FP8 tensors, MatMuls of
 * more than TX_CE_MAX_MATMUL multiply-adds, outputs over
 * TX_CE_MAX_ELEMENTS) is declined with a reason.
 */
#include "import/const_eval.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "base/half.h"
#include "format/tensor_proto.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef const tx_infer_value *const *ins_t;

/* ---- numbers ----------------------------------------------------------- */

static bool is_float_dt(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_DOUBLE || dt == TEEXEC_DTYPE_FLOAT16 ||
           dt == TEEXEC_DTYPE_BFLOAT16;
}

static bool is_int_dt(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_INT8: case TEEXEC_DTYPE_UINT8: case TEEXEC_DTYPE_INT16:
    case TEEXEC_DTYPE_UINT16: case TEEXEC_DTYPE_INT32: case TEEXEC_DTYPE_UINT32:
    case TEEXEC_DTYPE_INT64: case TEEXEC_DTYPE_UINT64: case TEEXEC_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

static bool numeric_dt(teexec_dtype dt) { return is_float_dt(dt) || is_int_dt(dt); }

/* A tensor's elements as numbers: int64 for integer and bool types,
 * double for float types. */
typedef struct nv {
    bool is_int;
    uint64_t n;
    int64_t *i;
    double *f;
} nv;

static void nv_free(nv *x)
{
    free(x->i);
    free(x->f);
    memset(x, 0, sizeof *x);
}

static teexec_status *nv_alloc(nv *x, bool is_int, uint64_t n)
{
    memset(x, 0, sizeof *x);
    x->is_int = is_int;
    x->n = n;
    if (n > SIZE_MAX / 8) return tx_oom();
    if (is_int) x->i = malloc((n ? n : 1) * sizeof *x->i);
    else x->f = malloc((n ? n : 1) * sizeof *x->f);
    if (!x->i && !x->f) return tx_oom();
    return NULL;
}

/* *why set (and x empty) when the dtype is not numeric or a uint64 value
 * does not fit int64. */
static teexec_status *nv_load(const tx_tensor *t, nv *x, const char **why)
{
    memset(x, 0, sizeof *x);
    if (!numeric_dt(t->dtype)) {
        *why = "its inputs are not of a numeric type evaluated at load";
        return NULL;
    }
    TX_TRY(nv_alloc(x, is_int_dt(t->dtype), t->numel));
    const void *p = t->data;
    for (uint64_t k = 0; k < t->numel; k++) {
        switch (t->dtype) {
        case TEEXEC_DTYPE_FLOAT: x->f[k] = ((const float *)p)[k]; break;
        case TEEXEC_DTYPE_DOUBLE: x->f[k] = ((const double *)p)[k]; break;
        case TEEXEC_DTYPE_FLOAT16: x->f[k] = tx_f16_to_f32(((const uint16_t *)p)[k]); break;
        case TEEXEC_DTYPE_BFLOAT16: x->f[k] = tx_bf16_to_f32(((const uint16_t *)p)[k]); break;
        case TEEXEC_DTYPE_INT8: x->i[k] = ((const int8_t *)p)[k]; break;
        case TEEXEC_DTYPE_UINT8: x->i[k] = ((const uint8_t *)p)[k]; break;
        case TEEXEC_DTYPE_INT16: x->i[k] = ((const int16_t *)p)[k]; break;
        case TEEXEC_DTYPE_UINT16: x->i[k] = ((const uint16_t *)p)[k]; break;
        case TEEXEC_DTYPE_INT32: x->i[k] = ((const int32_t *)p)[k]; break;
        case TEEXEC_DTYPE_UINT32: x->i[k] = ((const uint32_t *)p)[k]; break;
        case TEEXEC_DTYPE_INT64: x->i[k] = ((const int64_t *)p)[k]; break;
        case TEEXEC_DTYPE_BOOL: x->i[k] = ((const uint8_t *)p)[k] != 0; break;
        case TEEXEC_DTYPE_UINT64: {
            uint64_t u = ((const uint64_t *)p)[k];
            if (u > (uint64_t)INT64_MAX) {
                nv_free(x);
                *why = "a uint64 input is beyond the int64 range";
                return NULL;
            }
            x->i[k] = (int64_t)u;
            break;
        }
        default: break;
        }
    }
    return NULL;
}

static bool int_fits(teexec_dtype dt, int64_t v)
{
    switch (dt) {
    case TEEXEC_DTYPE_INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case TEEXEC_DTYPE_UINT8: return v >= 0 && v <= UINT8_MAX;
    case TEEXEC_DTYPE_INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case TEEXEC_DTYPE_UINT16: return v >= 0 && v <= UINT16_MAX;
    case TEEXEC_DTYPE_INT32: return v >= INT32_MIN && v <= INT32_MAX;
    case TEEXEC_DTYPE_UINT32: return v >= 0 && v <= (int64_t)UINT32_MAX;
    case TEEXEC_DTYPE_UINT64: return v >= 0;
    default: return true;
    }
}

static void put_int(void *p, teexec_dtype dt, uint64_t k, int64_t v)
{
    switch (dt) {
    case TEEXEC_DTYPE_INT8: ((int8_t *)p)[k] = (int8_t)v; break;
    case TEEXEC_DTYPE_UINT8: ((uint8_t *)p)[k] = (uint8_t)v; break;
    case TEEXEC_DTYPE_INT16: ((int16_t *)p)[k] = (int16_t)v; break;
    case TEEXEC_DTYPE_UINT16: ((uint16_t *)p)[k] = (uint16_t)v; break;
    case TEEXEC_DTYPE_INT32: ((int32_t *)p)[k] = (int32_t)v; break;
    case TEEXEC_DTYPE_UINT32: ((uint32_t *)p)[k] = (uint32_t)v; break;
    case TEEXEC_DTYPE_INT64: ((int64_t *)p)[k] = v; break;
    case TEEXEC_DTYPE_UINT64: ((uint64_t *)p)[k] = (uint64_t)v; break;
    case TEEXEC_DTYPE_BOOL: ((uint8_t *)p)[k] = v != 0; break;
    default: break;
    }
}

/* Stores x into t (allocated by the caller with its dtype and shape),
 * rounding to t's dtype. `wrap`: integers narrower than int64 wrap (Cast)
 * instead of declining when out of range. */
static void nv_store(const nv *x, tx_tensor *t, bool wrap, const char **why)
{
    void *p = t->data;
    teexec_dtype dt = t->dtype;
    for (uint64_t k = 0; k < t->numel; k++) {
        if (is_float_dt(dt)) {
            /* from an integer directly: (float)int64 rounds once */
            float f = x->is_int ? (float)x->i[k] : (float)x->f[k];
            switch (dt) {
            case TEEXEC_DTYPE_FLOAT: ((float *)p)[k] = f; break;
            case TEEXEC_DTYPE_DOUBLE:
                ((double *)p)[k] = x->is_int ? (double)x->i[k] : x->f[k];
                break;
            case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)p)[k] = tx_f32_to_f16(f); break;
            default: ((uint16_t *)p)[k] = tx_f32_to_bf16(f); break;
            }
            continue;
        }
        int64_t v;
        if (x->is_int) {
            v = x->i[k];
        } else {
            double d = x->f[k];
            if (dt == TEEXEC_DTYPE_BOOL) {
                ((uint8_t *)p)[k] = d != 0;
                continue;
            }
            /* [-2^63, 2^63) holds every double that truncates into int64 */
            if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
                *why = "a float value is NaN or beyond the integer range";
                return;
            }
            v = (int64_t)trunc(d);
        }
        if (!wrap && dt != TEEXEC_DTYPE_BOOL && !int_fits(dt, v)) {
            *why = "an integer result overflows its type";
            return;
        }
        put_int(p, dt, k, v);
    }
}

/* ---- index helpers ------------------------------------------------------ */

/* Strides of `in` broadcast against the output shape (0 on broadcast
 * dims), indexed by output dim. */
static void bcast_strides(const tx_shape *in, const tx_shape *out, int64_t *st)
{
    int64_t s = 1;
    for (int32_t d = out->rank - 1; d >= 0; d--) {
        int32_t k = d - (out->rank - in->rank);
        if (k < 0) {
            st[d] = 0;
            continue;
        }
        st[d] = in->dims[k] == 1 && out->dims[d] != 1 ? 0 : s;
        s *= in->dims[k];
    }
}

/* Offset, in an operand with strides st, of output element `flat`. */
static int64_t offset_of(uint64_t flat, const tx_shape *out, const int64_t *st)
{
    int64_t off = 0;
    for (int32_t d = out->rank - 1; d >= 0; d--) {
        uint64_t c = flat % (uint64_t)out->dims[d];
        flat /= (uint64_t)out->dims[d];
        off += (int64_t)c * st[d];
    }
    return off;
}

static size_t esize(teexec_dtype dt)
{
    if (dt == TEEXEC_DTYPE_STRING || tx_dtype_is_subbyte(dt)) return 0;
    return tx_dtype_elem_size(dt);
}

/* ---- the evaluation context --------------------------------------------- */

typedef struct ev {
    const tx_ir_node *n;
    const tx_onnx_file *file;
    ins_t in;
    tx_infer_value *out;
    const char **why;
} ev;

static const tx_tensor *val(const ev *e, size_t i)
{
    return i < e->n->n_inputs && e->in[i] ? e->in[i]->value : NULL;
}

/* Allocates output j as the rule typed it. */
static teexec_status *alloc_out(ev *e, size_t j, tx_tensor **t)
{
    tx_infer_value *o = &e->out[j];
    TX_TRY(tx_tensor_alloc(&o->owned, o->dtype, o->shape.rank, o->shape.dims));
    *t = &o->owned;
    return NULL;
}

static bool decline(ev *e, const char *why)
{
    *e->why = why;
    return false;
}

static int64_t attr_i(const tx_ir_node *n, const char *name, int64_t def)
{
    int64_t v = def;
    teexec_status *st = tx_ir_attr_int(n, name, def, &v);
    if (st) {
        teexec_status_destroy(st);
        return def;
    }
    return v;
}

/* ---- element movement ---------------------------------------------------- */

static teexec_status *op_copy(ev *e)
{
    const tx_tensor *x = val(e, 0);
    tx_tensor *o;
    if (e->out[0].dtype != x->dtype) return decline(e, "its output type differs from its input's"), NULL;
    TX_TRY(alloc_out(e, 0, &o));
    if (o->nbytes != x->nbytes) return decline(e, "its output size differs from its input's"), NULL;
    memcpy(o->data, x->data, x->nbytes);
    return NULL;
}

static teexec_status *op_concat(ev *e)
{
    tx_tensor *o;
    size_t es = esize(e->out[0].dtype);
    if (!es) return decline(e, "its type is not evaluated at load"), NULL;
    int64_t axis = attr_i(e->n, "axis", 0);
    if (axis < 0) axis += e->out[0].shape.rank;
    TX_TRY(alloc_out(e, 0, &o));
    int64_t outer = 1, inner = (int64_t)es;
    for (int32_t d = 0; d < axis; d++) outer *= o->dims[d];
    for (int32_t d = (int32_t)axis + 1; d < o->rank; d++) inner *= o->dims[d];
    uint8_t *w = o->data;
    for (int64_t k = 0; k < outer; k++)
        for (size_t i = 0; i < e->n->n_inputs; i++) {
            const tx_tensor *x = val(e, i);
            if (x->dtype != o->dtype) return decline(e, "its inputs' types differ"), NULL;
            size_t len = (size_t)(x->dims[axis] * inner);
            memcpy(w, (const uint8_t *)x->data + (size_t)k * len, len);
            w += len;
        }
    return NULL;
}

static teexec_status *op_split(ev *e)
{
    const tx_tensor *x = val(e, 0);
    size_t es = esize(x->dtype);
    if (!es) return decline(e, "its type is not evaluated at load"), NULL;
    size_t no = e->n->n_outputs;
    int64_t *sizes = malloc((no ? no : 1) * sizeof *sizes);
    if (!sizes) return tx_oom();
    tx_shape xs = tx_shape_of(x);
    int32_t axis;
    teexec_status *st = tx_split_sizes(e->n, e->n->opset >= 13 ? val(e, 1) : NULL, &xs, &axis, sizes);
    if (st) {
        /* the rule accepted it; a disagreement here is a refusal */
        teexec_status_destroy(st);
        free(sizes);
        return decline(e, "its split sizes do not fit"), NULL;
    }
    int64_t outer = 1, inner = (int64_t)es;
    for (int32_t d = 0; d < axis; d++) outer *= x->dims[d];
    for (int32_t d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
    int64_t start = 0;
    for (size_t j = 0; j < no && !st; j++) {
        tx_tensor *o;
        st = alloc_out(e, j, &o);
        if (st) break;
        size_t len = (size_t)(sizes[j] * inner);
        for (int64_t k = 0; k < outer; k++)
            memcpy((uint8_t *)o->data + (size_t)k * len,
                   (const uint8_t *)x->data + (size_t)((k * x->dims[axis] + start) * inner), len);
        start += sizes[j];
    }
    free(sizes);
    return st;
}

static teexec_status *op_slice(ev *e)
{
    const tx_tensor *x = val(e, 0);
    size_t es = esize(x->dtype);
    if (!es) return decline(e, "its type is not evaluated at load"), NULL;
    const tx_tensor *vals[4] = {val(e, 1), val(e, 2), val(e, 3), val(e, 4)};
    int64_t first[TX_MAX_RANK], step[TX_MAX_RANK];
    tx_shape xs = tx_shape_of(x), os;
    teexec_status *st = tx_slice_params(e->n, vals, &xs, first, step, &os);
    if (st) {
        teexec_status_destroy(st);
        return decline(e, "its slice parameters do not fit"), NULL;
    }
    tx_tensor *o;
    TX_TRY(alloc_out(e, 0, &o));
    if (!tx_tensor_has_shape(o, &os)) return decline(e, "its slice disagrees with the rule"), NULL;
    int64_t ist[TX_MAX_RANK];
    tx_shape_strides(&xs, ist);
    for (uint64_t k = 0; k < o->numel; k++) {
        uint64_t r = k;
        int64_t off = 0;
        for (int32_t d = o->rank - 1; d >= 0; d--) {
            int64_t c = (int64_t)(r % (uint64_t)o->dims[d]);
            r /= (uint64_t)o->dims[d];
            off += (first[d] + c * step[d]) * ist[d];
        }
        memcpy((uint8_t *)o->data + k * es, (const uint8_t *)x->data + (size_t)off * es, es);
    }
    return NULL;
}

static bool read_index(const tx_tensor *t, uint64_t k, int64_t *out)
{
    if (t->dtype == TEEXEC_DTYPE_INT64) *out = ((const int64_t *)t->data)[k];
    else if (t->dtype == TEEXEC_DTYPE_INT32) *out = ((const int32_t *)t->data)[k];
    else return false;
    return true;
}

static teexec_status *op_gather(ev *e)
{
    const tx_tensor *x = val(e, 0), *idx = val(e, 1);
    size_t es = esize(x->dtype);
    if (!es) return decline(e, "its type is not evaluated at load"), NULL;
    int64_t axis = attr_i(e->n, "axis", 0);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return decline(e, "its axis is out of range"), NULL;
    int64_t outer = 1, inner = (int64_t)es, dim = x->dims[axis];
    for (int32_t d = 0; d < axis; d++) outer *= x->dims[d];
    for (int32_t d = (int32_t)axis + 1; d < x->rank; d++) inner *= x->dims[d];
    tx_tensor *o;
    TX_TRY(alloc_out(e, 0, &o));
    uint8_t *w = o->data;
    for (int64_t k = 0; k < outer; k++)
        for (uint64_t i = 0; i < idx->numel; i++) {
            int64_t j;
            if (!read_index(idx, i, &j)) return decline(e, "its indices are not int32/int64"), NULL;
            if (j < 0) j += dim;
            if (j < 0 || j >= dim) return decline(e, "an index is out of range"), NULL;
            memcpy(w, (const uint8_t *)x->data + (size_t)((k * dim + j) * inner), (size_t)inner);
            w += inner;
        }
    return NULL;
}

/* Expand (broadcast to the rule's shape) and Where (select by condition). */
static teexec_status *op_broadcast_copy(ev *e, bool where)
{
    const tx_tensor *c = where ? val(e, 0) : NULL;
    const tx_tensor *a = val(e, where ? 1 : 0), *b = where ? val(e, 2) : NULL;
    size_t es = esize(a->dtype);
    if (!es || (b && b->dtype != a->dtype) || a->dtype != e->out[0].dtype)
        return decline(e, "its type is not evaluated at load"), NULL;
    tx_tensor *o;
    TX_TRY(alloc_out(e, 0, &o));
    tx_shape os = tx_shape_of(o), as = tx_shape_of(a);
    int64_t sa[TX_MAX_RANK], sb[TX_MAX_RANK], sc[TX_MAX_RANK];
    if (a->rank > o->rank) return decline(e, "its input outranks its output"), NULL;
    bcast_strides(&as, &os, sa);
    if (where) {
        tx_shape bs = tx_shape_of(b), cs = tx_shape_of(c);
        if (b->rank > o->rank || c->rank > o->rank || c->dtype != TEEXEC_DTYPE_BOOL)
            return decline(e, "its condition is not a bool tensor"), NULL;
        bcast_strides(&bs, &os, sb);
        bcast_strides(&cs, &os, sc);
    }
    for (uint64_t k = 0; k < o->numel; k++) {
        const tx_tensor *src = a;
        int64_t off;
        if (where && !((const uint8_t *)c->data)[offset_of(k, &os, sc)]) {
            src = b;
            off = offset_of(k, &os, sb);
        } else {
            off = offset_of(k, &os, sa);
        }
        memcpy((uint8_t *)o->data + k * es, (const uint8_t *)src->data + (size_t)off * es, es);
    }
    return NULL;
}

static teexec_status *op_tile(ev *e)
{
    const tx_tensor *x = val(e, 0);
    size_t es = esize(x->dtype);
    if (!es) return decline(e, "its type is not evaluated at load"), NULL;
    tx_tensor *o;
    TX_TRY(alloc_out(e, 0, &o));
    if (o->rank != x->rank) return decline(e, "its rank changed"), NULL;
    tx_shape xs = tx_shape_of(x);
    int64_t ist[TX_MAX_RANK];
    tx_shape_strides(&xs, ist);
    for (uint64_t k = 0; k < o->numel; k++) {
        uint64_t r = k;
        int64_t off = 0;
        for (int32_t d = o->rank - 1; d >= 0; d--) {
            int64_t c = (int64_t)(r % (uint64_t)o->dims[d]);
            r /= (uint64_t)o->dims[d];
            off += (c % x->dims[d]) * ist[d];
        }
        memcpy((uint8_t *)o->data + k * es, (const uint8_t *)x->data + (size_t)off * es, es);
    }
    return NULL;
}

static teexec_status *op_transpose(ev *e)
{
    const tx_tensor *x = val(e, 0);
    size_t es = esize(x->dtype);
    if (!es) return decline(e, "its type is not evaluated at load"), NULL;
    const int64_t *perm = NULL;
    size_t np = 0;
    teexec_status *st = tx_ir_attr_ints(e->n, "perm", &perm, &np);
    if (st) {
        teexec_status_destroy(st);
        return decline(e, "its perm attribute is not a list of ints"), NULL;
    }
    int64_t p[TX_MAX_RANK];
    for (int32_t d = 0; d < x->rank; d++) p[d] = perm && np == (size_t)x->rank ? perm[d] : x->rank - 1 - d;
    tx_tensor *o;
    TX_TRY(alloc_out(e, 0, &o));
    tx_shape xs = tx_shape_of(x);
    int64_t ist[TX_MAX_RANK];
    tx_shape_strides(&xs, ist);
    for (uint64_t k = 0; k < o->numel; k++) {
        uint64_t r = k;
        int64_t off = 0;
        for (int32_t d = o->rank - 1; d >= 0; d--) {
            int64_t c = (int64_t)(r % (uint64_t)o->dims[d]);
            r /= (uint64_t)o->dims[d];
            off += c * ist[p[d]];
        }
        memcpy((uint8_t *)o->data + k * es, (const uint8_t *)x->data + (size_t)off * es, es);
    }
    return NULL;
}

static teexec_status *op_trilu(ev *e)
{
    const tx_tensor *x = val(e, 0), *kt = val(e, 1);
    size_t es = esize(x->dtype);
    if (!es || x->rank < 2) return decline(e, "its input is not a matrix of a plain type"), NULL;
    int64_t kk = 0;
    if (kt && (kt->numel != 1 || !read_index(kt, 0, &kk)))
        return decline(e, "its k is not one int64"), NULL;
    bool upper = attr_i(e->n, "upper", 1) != 0;
    TX_TRY(op_copy(e));
    if (*e->why) return NULL;
    tx_tensor *o = &e->out[0].owned;
    int64_t rows = o->dims[o->rank - 2], cols = o->dims[o->rank - 1];
    for (uint64_t k = 0; k < o->numel; k++) {
        int64_t j = (int64_t)(k % (uint64_t)cols), r = (int64_t)((k / (uint64_t)cols) % (uint64_t)rows);
        bool keep = upper ? j - r >= kk : j - r <= kk;
        /* zero is all-zero bytes in every plain type */
        if (!keep) memset((uint8_t *)o->data + k * es, 0, es);
    }
    return NULL;
}

static teexec_status *op_constant_of_shape(ev *e)
{
    const Onnx__TensorProto *tp = NULL;
    teexec_status *st = tx_ir_attr_tensor(e->n, "value", &tp);
    if (st) {
        teexec_status_destroy(st);
        return decline(e, "its value attribute is not a tensor"), NULL;
    }
    tx_tensor fill = {0};
    if (tp) {
        st = tx_tensor_from_proto(tp, e->file, &fill);
        if (st) {
            teexec_status_destroy(st);
            return decline(e, "its value attribute does not decode"), NULL;
        }
    } else {
        TX_TRY(tx_tensor_alloc(&fill, TEEXEC_DTYPE_FLOAT, 0, NULL));
    }
    size_t es = esize(fill.dtype);
    tx_tensor *o = NULL;
    if (!es || fill.numel != 1 || fill.dtype != e->out[0].dtype) {
        tx_tensor_release(&fill);
        return decline(e, "its value is not one element of a plain type"), NULL;
    }
    st = alloc_out(e, 0, &o);
    for (uint64_t k = 0; !st && k < o->numel; k++)
        memcpy((uint8_t *)o->data + k * es, fill.data, es);
    tx_tensor_release(&fill);
    return st;
}

/* ---- arithmetic ----------------------------------------------------------- */

static teexec_status *op_cast(ev *e)
{
    const tx_tensor *x = val(e, 0);
    tx_tensor *o;
    if (x->dtype == e->out[0].dtype) return op_copy(e);
    if (!numeric_dt(e->out[0].dtype)) return decline(e, "its target type is not evaluated at load"), NULL;
    nv a;
    TX_TRY(nv_load(x, &a, e->why));
    if (*e->why) return NULL;
    teexec_status *st = alloc_out(e, 0, &o);
    if (!st) {
        if (x->dtype == TEEXEC_DTYPE_BOOL || !a.is_int || is_float_dt(o->dtype)) nv_store(&a, o, false, e->why);
        else nv_store(&a, o, true, e->why);
    }
    nv_free(&a);
    return st;
}

typedef enum uop {
    U_NEG, U_ABS, U_SQRT, U_RECIP, U_EXP, U_LOG, U_COS, U_SIN, U_TAN, U_TANH, U_ERF, U_SIGMOID,
    U_RELU, U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_NOT, U_ISNAN, U_ISINF
} uop;

static const struct { const char *name; uop op; bool int_ok; } UNARY[] = {
    {"Neg", U_NEG, true}, {"Abs", U_ABS, true}, {"Sqrt", U_SQRT, false},
    {"Reciprocal", U_RECIP, false}, {"Exp", U_EXP, false}, {"Log", U_LOG, false},
    {"Cos", U_COS, false}, {"Sin", U_SIN, false}, {"Tan", U_TAN, false},
    {"Tanh", U_TANH, false}, {"Erf", U_ERF, false}, {"Sigmoid", U_SIGMOID, false},
    {"Relu", U_RELU, true}, {"Floor", U_FLOOR, false}, {"Ceil", U_CEIL, false},
    {"Round", U_ROUND, false}, {"Sign", U_SIGN, true}, {"Not", U_NOT, true},
    {"IsNaN", U_ISNAN, false}, {"IsInf", U_ISINF, false},
};

static teexec_status *op_unary(ev *e, uop op, bool int_ok)
{
    nv a = {0}, r = {0};
    TX_TRY(nv_load(val(e, 0), &a, e->why));
    if (*e->why) return NULL;
    if (a.is_int && !int_ok && op != U_ISNAN && op != U_ISINF) {
        nv_free(&a);
        return decline(e, "it is a float op on integers"), NULL;
    }
    bool det_neg = attr_i(e->n, "detect_negative", 1) != 0;
    bool det_pos = attr_i(e->n, "detect_positive", 1) != 0;
    bool out_int = a.is_int || op == U_ISNAN || op == U_ISINF;
    teexec_status *st = nv_alloc(&r, out_int, a.n);
    for (uint64_t k = 0; !st && k < a.n; k++) {
        if (a.is_int) {
            int64_t v = a.i[k];
            if ((op == U_NEG || op == U_ABS) && v == INT64_MIN) {
                decline(e, "an integer result overflows its type");
                break;
            }
            switch (op) {
            case U_NEG: v = -v; break;
            case U_ABS: v = v < 0 ? -v : v; break;
            case U_RELU: v = v < 0 ? 0 : v; break;
            case U_SIGN: v = v > 0 ? 1 : v < 0 ? -1 : 0; break;
            case U_NOT: v = v == 0; break;
            default: v = 0; break; /* IsNaN / IsInf of an integer: false */
            }
            r.i[k] = v;
            continue;
        }
        double d = a.f[k];
        if (op == U_ISNAN) {
            r.i[k] = isnan(d);
            continue;
        }
        if (op == U_ISINF) {
            r.i[k] = isinf(d) && ((d > 0 && det_pos) || (d < 0 && det_neg));
            continue;
        }
        switch (op) {
        case U_NEG: d = -d; break;
        case U_ABS: d = fabs(d); break;
        case U_SQRT: d = sqrt(d); break;
        case U_RECIP: d = 1.0 / d; break;
        case U_EXP: d = exp(d); break;
        case U_LOG: d = log(d); break;
        case U_COS: d = cos(d); break;
        case U_SIN: d = sin(d); break;
        case U_TAN: d = tan(d); break;
        case U_TANH: d = tanh(d); break;
        case U_ERF: d = erf(d); break;
        case U_SIGMOID: d = 1.0 / (1.0 + exp(-d)); break;
        case U_RELU: d = d < 0 ? 0 : d; break;
        case U_FLOOR: d = floor(d); break;
        case U_CEIL: d = ceil(d); break;
        case U_ROUND: d = nearbyint(d); break; /* half to even */
        case U_SIGN: d = d > 0 ? 1 : d < 0 ? -1 : d; break;
        default: break;
        }
        r.f[k] = d;
    }
    tx_tensor *o;
    if (!st && !*e->why) st = alloc_out(e, 0, &o);
    if (!st && !*e->why) nv_store(&r, o, false, e->why);
    nv_free(&a);
    nv_free(&r);
    return st;
}

typedef enum bop {
    B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MOD, B_MAX, B_MIN, B_EQ, B_LT, B_GT, B_LE, B_GE, B_AND,
    B_OR, B_XOR
} bop;

static const struct { const char *name; bop op; } BINARY[] = {
    {"Add", B_ADD}, {"Sub", B_SUB}, {"Mul", B_MUL}, {"Div", B_DIV}, {"Pow", B_POW},
    {"Mod", B_MOD}, {"Max", B_MAX}, {"Min", B_MIN}, {"Sum", B_ADD}, {"Mean", B_ADD},
    {"Equal", B_EQ}, {"Less", B_LT}, {"Greater", B_GT}, {"LessOrEqual", B_LE},
    {"GreaterOrEqual", B_GE}, {"And", B_AND}, {"Or", B_OR}, {"Xor", B_XOR},
};

static bool is_compare(bop op) { return op >= B_EQ; }

/* Exact integer a op b; false (with *why) when it is not representable. */
static bool int_bin(bop op, int64_t a, int64_t b, bool fmod_c, int64_t *r, const char **why)
{
    switch (op) {
    case B_ADD: if (__builtin_add_overflow(a, b, r)) goto over; return true;
    case B_SUB: if (__builtin_sub_overflow(a, b, r)) goto over; return true;
    case B_MUL: if (__builtin_mul_overflow(a, b, r)) goto over; return true;
    case B_DIV:
    case B_MOD:
        if (b == 0) {
            *why = "it divides an integer by zero";
            return false;
        }
        if (a == INT64_MIN && b == -1) goto over;
        if (op == B_DIV) {
            *r = a / b; /* toward zero, as ONNX Runtime's integer Div */
        } else {
            *r = a % b;
            /* fmod=0: the result takes the divisor's sign (Python's %) */
            if (!fmod_c && *r != 0 && ((*r < 0) != (b < 0))) *r += b;
        }
        return true;
    case B_POW: {
        if (b < 0) {
            *why = "it raises an integer to a negative power";
            return false;
        }
        int64_t acc = 1, base = a;
        while (b) {
            if ((b & 1) && __builtin_mul_overflow(acc, base, &acc)) goto over;
            b >>= 1;
            if (b && __builtin_mul_overflow(base, base, &base)) goto over;
        }
        *r = acc;
        return true;
    }
    case B_MAX: *r = a > b ? a : b; return true;
    case B_MIN: *r = a < b ? a : b; return true;
    case B_EQ: *r = a == b; return true;
    case B_LT: *r = a < b; return true;
    case B_GT: *r = a > b; return true;
    case B_LE: *r = a <= b; return true;
    case B_GE: *r = a >= b; return true;
    case B_AND: *r = (a != 0) && (b != 0); return true;
    case B_OR: *r = (a != 0) || (b != 0); return true;
    case B_XOR: *r = (a != 0) != (b != 0); return true;
    }
over:
    *why = "an integer result overflows its type";
    return false;
}

static double float_bin(bop op, double a, double b)
{
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return pow(a, b);
    case B_MOD: return fmod(a, b);
    case B_MAX: return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
    case B_MIN: return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
    case B_EQ: return a == b;
    case B_LT: return a < b;
    case B_GT: return a > b;
    case B_LE: return a <= b;
    case B_GE: return a >= b;
    case B_AND: return (a != 0) && (b != 0);
    case B_OR: return (a != 0) || (b != 0);
    case B_XOR: return (a != 0) != (b != 0);
    }
    return 0;
}

/* Element-wise (variadic for Max/Min/Sum/Mean) with NumPy broadcasting,
 * folded left to right: r = in0 op in1 op in2 ... */
static teexec_status *op_binary(ev *e, bop op)
{
    size_t ni = e->n->n_inputs;
    bool mean = strcmp(e->n->op_type, "Mean") == 0;
    bool fmod_c = attr_i(e->n, "fmod", 0) != 0;
    tx_shape os = e->out[0].shape;
    uint64_t n;
    TX_TRY(tx_shape_numel(&os, &n));
    nv in = {0}, acc = {0};
    teexec_status *st = NULL;
    bool all_int = true;
    for (size_t i = 0; i < ni; i++) {
        const tx_tensor *t = val(e, i);
        if (!t || !numeric_dt(t->dtype)) return decline(e, "its inputs are not numeric"), NULL;
        all_int = all_int && is_int_dt(t->dtype);
    }
    if (op == B_POW && is_int_dt(val(e, 0)->dtype) != all_int)
        return decline(e, "it raises an integer to a float power"), NULL;
    if (op == B_MOD && !all_int && !fmod_c) return decline(e, "a float Mod needs fmod=1"), NULL;
    if (mean && all_int) return decline(e, "Mean of integers is not defined"), NULL;
    st = nv_alloc(&acc, all_int, n);
    for (size_t i = 0; !st && i < ni && !*e->why; i++) {
        const tx_tensor *t = val(e, i);
        if (t->rank > os.rank) {
            decline(e, "an input outranks the output");
            break;
        }
        st = nv_load(t, &in, e->why);
        if (st || *e->why) break;
        tx_shape ts = tx_shape_of(t);
        int64_t sa[TX_MAX_RANK];
        bcast_strides(&ts, &os, sa);
        for (uint64_t k = 0; k < n && !*e->why; k++) {
            int64_t off = offset_of(k, &os, sa);
            if (i == 0) {
                if (all_int) acc.i[k] = in.i[off];
                else acc.f[k] = in.is_int ? (double)in.i[off] : in.f[off];
                continue;
            }
            if (all_int) {
                int64_t r;
                if (!int_bin(op, acc.i[k], in.i[off], fmod_c, &r, e->why)) break;
                acc.i[k] = r;
            } else {
                double b = in.is_int ? (double)in.i[off] : in.f[off];
                acc.f[k] = float_bin(op, acc.f[k], b);
            }
        }
        nv_free(&in);
        /* a comparison has exactly two operands: the result is final */
    }
    if (!st && !*e->why && ni == 1 && is_compare(op)) decline(e, "a comparison needs two inputs");
    if (!st && !*e->why && mean)
        for (uint64_t k = 0; k < n; k++) acc.f[k] /= (double)ni;
    if (!st && !*e->why && is_compare(op) && !all_int) {
        /* comparison results of float operands, as bools */
        nv b;
        st = nv_alloc(&b, true, n);
        for (uint64_t k = 0; !st && k < n; k++) b.i[k] = acc.f[k] != 0;
        if (!st) {
            nv_free(&acc);
            acc = b;
        }
    }
    tx_tensor *o;
    if (!st && !*e->why) st = alloc_out(e, 0, &o);
    if (!st && !*e->why) nv_store(&acc, o, false, e->why);
    nv_free(&in);
    nv_free(&acc);
    return st;
}

static teexec_status *op_range(ev *e)
{
    nv s = {0}, l = {0}, d = {0};
    const tx_tensor *ts = val(e, 0), *tl = val(e, 1), *td = val(e, 2);
    if (ts->numel != 1 || tl->numel != 1 || td->numel != 1)
        return decline(e, "its start, limit and delta are not scalars"), NULL;
    TX_TRY(nv_load(ts, &s, e->why));
    teexec_status *st = NULL;
    if (!*e->why) st = nv_load(tl, &l, e->why);
    if (!st && !*e->why) st = nv_load(td, &d, e->why);
    tx_tensor *o = NULL;
    nv r = {0};
    if (!st && !*e->why) {
        uint64_t cnt = 0;
        if (s.is_int) {
            int64_t a = s.i[0], b = l.i[0], c = d.i[0];
            if (c == 0) decline(e, "its delta is 0");
            /* exact: max(ceil((b - a) / c), 0) with the difference taken
             * unsigned, where it cannot overflow */
            else if (c > 0 && b > a) cnt = ((uint64_t)b - (uint64_t)a + (uint64_t)c - 1) / (uint64_t)c;
            else if (c < 0 && b < a)
                cnt = ((uint64_t)a - (uint64_t)b + ((uint64_t)0 - (uint64_t)c) - 1) /
                      ((uint64_t)0 - (uint64_t)c);
        } else {
            double q = ceil((l.f[0] - s.f[0]) / d.f[0]);
            if (d.f[0] == 0 || isnan(q)) decline(e, "its count is not a number");
            else cnt = q > 0 ? (uint64_t)q : 0;
        }
        if (!*e->why && (e->out[0].shape.rank != 1 || (uint64_t)e->out[0].shape.dims[0] != cnt))
            decline(e, "its element count disagrees with the rule's");
        if (!*e->why) st = nv_alloc(&r, s.is_int, cnt);
        for (uint64_t k = 0; !st && !*e->why && k < cnt; k++) {
            if (s.is_int) {
                int64_t step;
                if (__builtin_mul_overflow((int64_t)k, d.i[0], &step) ||
                    __builtin_add_overflow(s.i[0], step, &r.i[k]))
                    decline(e, "an integer result overflows its type");
            } else {
                r.f[k] = s.f[0] + (double)k * d.f[0];
            }
        }
        if (!st && !*e->why) st = alloc_out(e, 0, &o);
        if (!st && !*e->why) nv_store(&r, o, false, e->why);
    }
    nv_free(&s);
    nv_free(&l);
    nv_free(&d);
    nv_free(&r);
    return st;
}

static teexec_status *op_cumsum(ev *e)
{
    const tx_tensor *x = val(e, 0), *at = val(e, 1);
    int64_t axis;
    if (!at || at->numel != 1 || !read_index(at, 0, &axis)) return decline(e, "its axis is not one int"), NULL;
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return decline(e, "its axis is out of range"), NULL;
    bool exclusive = attr_i(e->n, "exclusive", 0) != 0, reverse = attr_i(e->n, "reverse", 0) != 0;
    nv a = {0}, r = {0};
    TX_TRY(nv_load(x, &a, e->why));
    if (*e->why) return NULL;
    teexec_status *st = nv_alloc(&r, a.is_int, a.n);
    int64_t outer = 1, inner = 1, dim = x->dims[axis];
    for (int32_t d = 0; d < axis; d++) outer *= x->dims[d];
    for (int32_t d = (int32_t)axis + 1; d < x->rank; d++) inner *= x->dims[d];
    for (int64_t o = 0; !st && o < outer && !*e->why; o++)
        for (int64_t in = 0; in < inner && !*e->why; in++) {
            int64_t si = 0;
            double sf = 0;
            for (int64_t t = 0; t < dim; t++) {
                int64_t j = reverse ? dim - 1 - t : t;
                uint64_t k = (uint64_t)((o * dim + j) * inner + in);
                if (a.is_int) {
                    int64_t next;
                    if (__builtin_add_overflow(si, a.i[k], &next)) {
                        decline(e, "an integer result overflows its type");
                        break;
                    }
                    r.i[k] = exclusive ? si : next;
                    si = next;
                } else {
                    double next = sf + a.f[k];
                    r.f[k] = exclusive ? sf : next;
                    sf = next;
                }
            }
        }
    tx_tensor *o;
    if (!st && !*e->why) st = alloc_out(e, 0, &o);
    if (!st && !*e->why) nv_store(&r, o, false, e->why);
    nv_free(&a);
    nv_free(&r);
    return st;
}

static teexec_status *op_reduce(ev *e)
{
    const char *op = e->n->op_type;
    const tx_tensor *x = val(e, 0);
    int64_t keep = attr_i(e->n, "keepdims", 1), noop = attr_i(e->n, "noop_with_empty_axes", 0);
    const int64_t *axes = NULL;
    size_t na = 0;
    int64_t *owned = NULL;
    bool axes_input = strcmp(op, "ReduceSum") == 0 ? e->n->opset >= 13 : e->n->opset >= 18;
    teexec_status *st = NULL;
    if (axes_input) {
        if (val(e, 1)) {
            st = tx_tensor_read_ints(val(e, 1), &owned, &na);
            axes = owned;
        }
    } else {
        st = tx_ir_attr_ints(e->n, "axes", &axes, &na);
    }
    if (st) {
        teexec_status_destroy(st);
        free(owned);
        return decline(e, "its axes are not ints"), NULL;
    }
    tx_shape xs = tx_shape_of(x), ks;
    bool reduced[TX_MAX_RANK] = {false};
    st = tx_shape_reduce(&xs, axes, na, true, noop != 0, &ks, reduced);
    free(owned);
    if (st) {
        teexec_status_destroy(st);
        return decline(e, "its axes do not fit"), NULL;
    }
    (void)keep; /* the flat order is the same with and without the reduced dims */
    bool sum = !strcmp(op, "ReduceSum") || !strcmp(op, "ReduceMean");
    bool prod = !strcmp(op, "ReduceProd"), mx = !strcmp(op, "ReduceMax");
    nv a = {0}, r = {0};
    TX_TRY(nv_load(x, &a, e->why));
    if (*e->why) return NULL;
    if (!strcmp(op, "ReduceMean") && a.is_int) {
        nv_free(&a);
        return decline(e, "ReduceMean of integers is not evaluated at load"), NULL;
    }
    uint64_t on;
    st = tx_shape_numel(&ks, &on);
    if (!st) st = nv_alloc(&r, a.is_int, on);
    uint64_t *count = st ? NULL : calloc(on ? on : 1, sizeof *count);
    if (!st && !count) st = tx_oom();
    int64_t kst[TX_MAX_RANK];
    tx_shape_strides(&ks, kst);
    for (int32_t d = 0; d < xs.rank; d++)
        if (reduced[d]) kst[d] = 0;
    for (uint64_t k = 0; !st && k < a.n && !*e->why; k++) {
        uint64_t o = (uint64_t)offset_of(k, &xs, kst);
        bool first = count[o]++ == 0;
        if (a.is_int) {
            int64_t v = a.i[k], cur = first ? (sum ? 0 : prod ? 1 : v) : r.i[o];
            if (sum) {
                if (__builtin_add_overflow(cur, v, &cur)) decline(e, "an integer result overflows its type");
            } else if (prod) {
                if (__builtin_mul_overflow(cur, v, &cur)) decline(e, "an integer result overflows its type");
            } else {
                cur = mx ? (v > cur ? v : cur) : (v < cur ? v : cur);
            }
            r.i[o] = cur;
        } else {
            double v = a.f[k], cur = first ? (sum ? 0 : prod ? 1 : v) : r.f[o];
            if (sum) cur += v;
            else if (prod) cur *= v;
            else if (isnan(v) || isnan(cur)) cur = NAN;
            else cur = mx ? (v > cur ? v : cur) : (v < cur ? v : cur);
            r.f[o] = cur;
        }
    }
    if (!st && !*e->why && !strcmp(op, "ReduceMean"))
        for (uint64_t o = 0; o < on; o++) r.f[o] /= (double)count[o];
    if (!st && !*e->why && on && !(sum || prod))
        for (uint64_t o = 0; o < on; o++)
            if (!count[o]) decline(e, "it reduces an empty axis to a max/min");
    tx_tensor *o;
    if (!st && !*e->why) st = alloc_out(e, 0, &o);
    if (!st && !*e->why) {
        if (o->numel != on) decline(e, "its output size disagrees with the rule's");
        else nv_store(&r, o, false, e->why);
    }
    free(count);
    nv_free(&a);
    nv_free(&r);
    return st;
}

static teexec_status *op_matmul(ev *e)
{
    const tx_tensor *ta = val(e, 0), *tb = val(e, 1);
    tx_shape as = tx_shape_of(ta), bs = tx_shape_of(tb);
    if (as.rank < 1 || bs.rank < 1) return decline(e, "its operands are scalars"), NULL;
    /* promote 1-D operands as NumPy does */
    tx_shape pa = as, pb = bs;
    if (pa.rank == 1) {
        pa.rank = 2;
        pa.dims[1] = pa.dims[0];
        pa.dims[0] = 1;
    }
    if (pb.rank == 1) {
        pb.rank = 2;
        pb.dims[1] = 1;
    }
    int64_t M = pa.dims[pa.rank - 2], K = pa.dims[pa.rank - 1], N = pb.dims[pb.rank - 1];
    if (pb.dims[pb.rank - 2] != K) return decline(e, "its inner dims differ"), NULL;
    /* batch dims broadcast: the output without its last two dims */
    tx_shape ba = pa, bb = pb, bo;
    ba.rank -= 2;
    bb.rank -= 2;
    const tx_shape *bsh[2] = {&ba, &bb};
    teexec_status *st = tx_shape_broadcast(2, bsh, &bo);
    if (st) {
        teexec_status_destroy(st);
        return decline(e, "its batch dims do not broadcast"), NULL;
    }
    uint64_t batch, work;
    TX_TRY(tx_shape_numel(&bo, &batch));
    if (!tx_dims_product((const int64_t[]){(int64_t)batch, M, N, K}, 4, &work) ||
        work > TX_CE_MAX_MATMUL)
        return decline(e, "the MatMul is too large to fold at load"), NULL;
    int64_t sa[TX_MAX_RANK], sb[TX_MAX_RANK];
    bcast_strides(&ba, &bo, sa);
    bcast_strides(&bb, &bo, sb);
    nv a = {0}, b = {0}, r = {0};
    TX_TRY(nv_load(ta, &a, e->why));
    if (*e->why) return NULL;
    st = nv_load(tb, &b, e->why);
    if (st || *e->why) {
        nv_free(&a);
        return st;
    }
    bool is_int = a.is_int && b.is_int;
    st = nv_alloc(&r, is_int, batch * (uint64_t)(M * N));
    for (uint64_t t = 0; !st && t < batch && !*e->why; t++) {
        int64_t oa = offset_of(t, &bo, sa) * M * K, ob = offset_of(t, &bo, sb) * K * N;
        for (int64_t i = 0; i < M && !*e->why; i++)
            for (int64_t j = 0; j < N; j++) {
                uint64_t w = t * (uint64_t)(M * N) + (uint64_t)(i * N + j);
                if (is_int) {
                    int64_t acc = 0, p;
                    for (int64_t k = 0; k < K; k++)
                        if (__builtin_mul_overflow(a.i[oa + i * K + k], b.i[ob + k * N + j], &p) ||
                            __builtin_add_overflow(acc, p, &acc)) {
                            decline(e, "an integer result overflows its type");
                            break;
                        }
                    r.i[w] = acc;
                } else {
                    double acc = 0;
                    for (int64_t k = 0; k < K; k++) {
                        double x = a.is_int ? (double)a.i[oa + i * K + k] : a.f[oa + i * K + k];
                        double y = b.is_int ? (double)b.i[ob + k * N + j] : b.f[ob + k * N + j];
                        acc += x * y;
                    }
                    r.f[w] = acc;
                }
            }
    }
    tx_tensor *o;
    if (!st && !*e->why) st = alloc_out(e, 0, &o);
    if (!st && !*e->why) {
        if (o->numel != r.n) decline(e, "its output size disagrees with the rule's");
        else nv_store(&r, o, false, e->why);
    }
    nv_free(&a);
    nv_free(&b);
    nv_free(&r);
    return st;
}

/* ---- dispatch ------------------------------------------------------------- */

teexec_status *tx_ce_eval_node(const tx_ir_node *n, const tx_onnx_file *file,
                               const tx_infer_value *const *in, tx_infer_value *out,
                               const char **declined)
{
    const char *why = NULL;
    *declined = NULL;
    ev e = {n, file, in, out, &why};
    bool have_all = true;
    uint64_t total = 0;
    for (size_t j = 0; j < n->n_outputs; j++) {
        uint64_t ne = 0;
        teexec_status *nst = out[j].shape_known ? tx_shape_numel(&out[j].shape, &ne) : NULL;
        if (!out[j].shape_known || nst || !tx_add_u64(total, ne, &total)) {
            teexec_status_destroy(nst);
            *declined = "its output shape is not known";
            return NULL;
        }
        if (!out[j].value) have_all = false;
    }
    if (have_all) return NULL; /* Shape, Size, Constant: the rule computed them */
    if (total > TX_CE_MAX_ELEMENTS) {
        *declined = "its result is over the evaluator's element bound";
        return NULL;
    }
    for (size_t k = 0; k < n->n_inputs; k++) {
        if (in[k] && !in[k]->value) {
            *declined = "an input is not a known value";
            return NULL;
        }
    }
    if (n->domain[0]) {
        *declined = "it is not a standard-domain op";
        return NULL;
    }
    const char *op = n->op_type;
    teexec_status *st = NULL;
    bool handled = true;
    if (!strcmp(op, "Identity") || !strcmp(op, "Reshape") || !strcmp(op, "Flatten") ||
        !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze"))
        st = op_copy(&e);
    else if (!strcmp(op, "Concat")) st = op_concat(&e);
    else if (!strcmp(op, "Split")) st = op_split(&e);
    else if (!strcmp(op, "Slice")) st = op_slice(&e);
    else if (!strcmp(op, "Gather")) st = op_gather(&e);
    else if (!strcmp(op, "Expand")) st = op_broadcast_copy(&e, false);
    else if (!strcmp(op, "Where")) st = op_broadcast_copy(&e, true);
    else if (!strcmp(op, "Tile")) st = op_tile(&e);
    else if (!strcmp(op, "Transpose")) st = op_transpose(&e);
    else if (!strcmp(op, "Trilu")) st = op_trilu(&e);
    else if (!strcmp(op, "ConstantOfShape")) st = op_constant_of_shape(&e);
    else if (!strcmp(op, "Cast") || !strcmp(op, "CastLike")) st = op_cast(&e);
    else if (!strcmp(op, "Range")) st = op_range(&e);
    else if (!strcmp(op, "CumSum")) st = op_cumsum(&e);
    else if (!strcmp(op, "MatMul")) st = op_matmul(&e);
    else if (!strncmp(op, "Reduce", 6) &&
             (!strcmp(op + 6, "Sum") || !strcmp(op + 6, "Mean") || !strcmp(op + 6, "Max") ||
              !strcmp(op + 6, "Min") || !strcmp(op + 6, "Prod")))
        st = op_reduce(&e);
    else {
        handled = false;
        for (size_t i = 0; !handled && i < sizeof UNARY / sizeof *UNARY; i++)
            if (!strcmp(op, UNARY[i].name)) {
                handled = true;
                st = op_unary(&e, UNARY[i].op, UNARY[i].int_ok);
            }
        for (size_t i = 0; !handled && i < sizeof BINARY / sizeof *BINARY; i++)
            if (!strcmp(op, BINARY[i].name)) {
                handled = true;
                st = op_binary(&e, BINARY[i].op);
            }
    }
    if (!handled) why = "the op is not evaluated at load";
    if (!st && !why)
        for (size_t j = 0; j < n->n_outputs; j++) {
            if (!out[j].owned.data) {
                why = "an output was not computed";
                break;
            }
            out[j].value = &out[j].owned;
        }
    if (st || why) {
        for (size_t j = 0; j < n->n_outputs; j++) {
            if (out[j].value == &out[j].owned) out[j].value = NULL;
            if (!out[j].value) tx_tensor_release(&out[j].owned);
        }
    }
    *declined = why;
    return st;
}
