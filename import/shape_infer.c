/* shape_infer.c - shape/type inference for the standard ONNX ops teexec runs. */
#include "import/shape_infer.h"
#include "import/shape_infer_quant.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "base/half.h"
#include "format/tensor_proto.h"
#include "import/ir_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef const tx_infer_value *const *ins_t;

void tx_infer_value_clear(tx_infer_value *v)
{
    if (!v) return;
    tx_tensor_release(&v->owned);
    memset(v, 0, sizeof(*v));
}

teexec_status *tx_tensor_read_ints(const tx_tensor *t, int64_t **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    if (t->dtype != TEEXEC_DTYPE_INT64 && t->dtype != TEEXEC_DTYPE_INT32)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "expected an int64 or int32 tensor, got %s",
                        teexec_dtype_name(t->dtype));
    if (t->numel == 0) return NULL;
    if (t->numel > SIZE_MAX / sizeof(int64_t)) return tx_oom();
    int64_t *v = malloc((size_t)t->numel * sizeof(int64_t));
    if (!v) return tx_oom();
    for (uint64_t i = 0; i < t->numel; i++)
        v[i] = t->dtype == TEEXEC_DTYPE_INT64 ? ((const int64_t *)t->data)[i]
                                              : ((const int32_t *)t->data)[i];
    *out = v;
    *count = (size_t)t->numel;
    return NULL;
}

teexec_status *tx_tensor_read_scalar(const tx_tensor *t, double *out)
{
    if (t->numel < 1) return tx_error(TEEXEC_ERR_BAD_MODEL, "expected a scalar, got an empty tensor");
    const void *p = t->data;
    switch (t->dtype) {
    case TEEXEC_DTYPE_FLOAT: *out = *(const float *)p; break;
    case TEEXEC_DTYPE_DOUBLE: *out = *(const double *)p; break;
    case TEEXEC_DTYPE_FLOAT16: *out = tx_f16_to_f32(*(const uint16_t *)p); break;
    case TEEXEC_DTYPE_BFLOAT16: *out = tx_bf16_to_f32(*(const uint16_t *)p); break;
    case TEEXEC_DTYPE_INT8: *out = *(const int8_t *)p; break;
    case TEEXEC_DTYPE_INT16: *out = *(const int16_t *)p; break;
    case TEEXEC_DTYPE_INT32: *out = *(const int32_t *)p; break;
    case TEEXEC_DTYPE_INT64: *out = (double)*(const int64_t *)p; break;
    case TEEXEC_DTYPE_UINT8: case TEEXEC_DTYPE_BOOL: *out = *(const uint8_t *)p; break;
    case TEEXEC_DTYPE_UINT16: *out = *(const uint16_t *)p; break;
    case TEEXEC_DTYPE_UINT32: *out = *(const uint32_t *)p; break;
    case TEEXEC_DTYPE_UINT64: *out = (double)*(const uint64_t *)p; break;
    default:
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "cannot read a %s scalar",
                        teexec_dtype_name(t->dtype));
    }
    return NULL;
}

/* ---- small helpers ---------------------------------------------------- */

static const tx_infer_value *in_at(const tx_ir_node *n, ins_t in, size_t i)
{
    return i < n->n_inputs ? in[i] : NULL;
}

static teexec_status *need_inputs(const tx_ir_node *n, ins_t in, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!in_at(n, in, i))
            return tx_ir_node_error(n, "needs input %zu, which is missing", i);
    return NULL;
}

/* Attach the node to a shape-helper error. */
static teexec_status *at_node(const tx_ir_node *n, teexec_status *st)
{
    if (!st) return NULL;
    st = tx_status_prefix(st, "node \"%s\" (%s)", n->label, n->op_type);
    return tx_status_with_node(st, n->label);
}

static void set_out(tx_infer_value *o, teexec_dtype dt, const tx_shape *s)
{
    o->dtype = dt;
    if (s) {
        o->shape = *s;
        o->shape_known = true;
    } else {
        o->shape_known = false;
    }
}

static bool all_known(const tx_ir_node *n, ins_t in, size_t count)
{
    for (size_t i = 0; i < count && i < n->n_inputs; i++)
        if (in[i] && !in[i]->shape_known) return false;
    return true;
}

/* Reads the int list held by input i's value; *known false when the value
 * is not available. */
static teexec_status *input_ints(const tx_ir_node *n, ins_t in, size_t i, bool *known,
                                 int64_t **v, size_t *count)
{
    *v = NULL;
    *count = 0;
    const tx_infer_value *x = in_at(n, in, i);
    *known = x && x->value;
    if (!*known) return NULL;
    return at_node(n, tx_tensor_read_ints(x->value, v, count));
}

/* ---- op families ------------------------------------------------------- */

static teexec_status *inf_same(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    set_out(&out[0], in[0]->dtype, in[0]->shape_known ? &in[0]->shape : NULL);
    return NULL;
}

static teexec_status *inf_bool_same(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    set_out(&out[0], TEEXEC_DTYPE_BOOL, in[0]->shape_known ? &in[0]->shape : NULL);
    return NULL;
}

/* Variadic broadcast over all present inputs; dtype from input `dt_from`. */
static teexec_status *broadcast_all(const tx_ir_node *n, ins_t in, teexec_dtype dt,
                                    tx_infer_value *out)
{
    const tx_shape *shapes[64];
    size_t k = 0;
    if (n->n_inputs == 0) return tx_ir_node_error(n, "needs at least one input");
    if (n->n_inputs > 64) return tx_ir_node_error(n, "has more than 64 inputs");
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (!in[i]) return tx_ir_node_error(n, "input %zu is missing", i);
        if (!in[i]->shape_known) {
            set_out(&out[0], dt, NULL);
            return NULL;
        }
        shapes[k++] = &in[i]->shape;
    }
    tx_shape s;
    TX_TRY(at_node(n, tx_shape_broadcast(k, shapes, &s)));
    set_out(&out[0], dt, &s);
    return NULL;
}

static teexec_status *inf_bcast(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    return broadcast_all(n, in, in[0]->dtype, out);
}

static teexec_status *inf_bcast_bool(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    return broadcast_all(n, in, TEEXEC_DTYPE_BOOL, out);
}

static teexec_status *inf_where(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 3));
    return broadcast_all(n, in, in[1]->dtype, out);
}

static teexec_status *inf_cast(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    int64_t to;
    TX_TRY(tx_ir_attr_int(n, "to", 0, &to));
    if (!tx_ir_attr_find(n, "to")) return tx_ir_attr_missing(n, "to");
    if (!tx_dtype_valid((int)to)) return tx_ir_node_error(n, "has invalid 'to' dtype %lld", (long long)to);
    set_out(&out[0], (teexec_dtype)to, in[0]->shape_known ? &in[0]->shape : NULL);
    return NULL;
}

static teexec_status *inf_castlike(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    set_out(&out[0], in[1]->dtype, in[0]->shape_known ? &in[0]->shape : NULL);
    return NULL;
}

static teexec_status *inf_matmul(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    if (!all_known(n, in, 2)) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    tx_shape s;
    TX_TRY(at_node(n, tx_shape_matmul(&in[0]->shape, &in[1]->shape, &s)));
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_gemm(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    if (!all_known(n, in, 3)) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    int64_t ta, tb, m, nn, k;
    TX_TRY(tx_ir_attr_int(n, "transA", 0, &ta));
    TX_TRY(tx_ir_attr_int(n, "transB", 0, &tb));
    TX_TRY(at_node(n, tx_shape_gemm(&in[0]->shape, &in[1]->shape, ta != 0, tb != 0, &m, &nn, &k)));
    tx_shape s = {.rank = 2, .dims = {m, nn}};
    const tx_infer_value *c = in_at(n, in, 2);
    if (c && !tx_shape_broadcastable_to(&c->shape, &s))
        return tx_ir_node_error(n, "bias C cannot be broadcast to [%lld,%lld]", (long long)m,
                                (long long)nn);
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_layernorm(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    int64_t axis, stash;
    TX_TRY(tx_ir_attr_int(n, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_int(n, "stash_type", TEEXEC_DTYPE_FLOAT, &stash));
    if (!in[0]->shape_known) {
        for (size_t j = 0; j < n->n_outputs; j++)
            set_out(&out[j], j == 0 ? in[0]->dtype : (teexec_dtype)stash, NULL);
        return NULL;
    }
    int32_t ax;
    TX_TRY(at_node(n, tx_shape_normalize_axis(axis, in[0]->shape.rank, &ax)));
    set_out(&out[0], in[0]->dtype, &in[0]->shape);
    tx_shape st = in[0]->shape;
    for (int32_t d = ax; d < st.rank; d++) st.dims[d] = 1;
    for (size_t j = 1; j < n->n_outputs; j++) set_out(&out[j], (teexec_dtype)stash, &st);
    return NULL;
}

static bool reduce_axes_are_input(const tx_ir_node *n)
{
    if (strcmp(n->op_type, "ReduceSum") == 0) return n->opset >= 13;
    return n->opset >= 18;
}

static teexec_status *inf_reduce(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    int64_t keep, noop;
    TX_TRY(tx_ir_attr_int(n, "keepdims", 1, &keep));
    TX_TRY(tx_ir_attr_int(n, "noop_with_empty_axes", 0, &noop));
    const int64_t *axes = NULL;
    size_t naxes = 0;
    int64_t *owned = NULL;
    if (reduce_axes_are_input(n)) {
        bool known = true;
        if (in_at(n, in, 1)) TX_TRY(input_ints(n, in, 1, &known, &owned, &naxes));
        if (!known) {
            set_out(&out[0], in[0]->dtype, NULL);
            return NULL;
        }
        axes = owned;
    } else {
        TX_TRY(tx_ir_attr_ints(n, "axes", &axes, &naxes));
    }
    if (!in[0]->shape_known) {
        free(owned);
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    tx_shape s;
    teexec_status *st = at_node(n, tx_shape_reduce(&in[0]->shape, axes, naxes, keep != 0,
                                                   noop != 0, &s, NULL));
    free(owned);
    TX_TRY(st);
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_argmax(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    int64_t axis, keep;
    TX_TRY(tx_ir_attr_int(n, "axis", 0, &axis));
    TX_TRY(tx_ir_attr_int(n, "keepdims", 1, &keep));
    if (!in[0]->shape_known) {
        set_out(&out[0], TEEXEC_DTYPE_INT64, NULL);
        return NULL;
    }
    tx_shape s;
    TX_TRY(at_node(n, tx_shape_reduce(&in[0]->shape, &axis, 1, keep != 0, false, &s, NULL)));
    set_out(&out[0], TEEXEC_DTYPE_INT64, &s);
    return NULL;
}

static teexec_status *inf_reshape(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    int64_t allowzero;
    TX_TRY(tx_ir_attr_int(n, "allowzero", 0, &allowzero));
    const int64_t *shape;
    size_t ns;
    int64_t *owned = NULL;
    if (n->opset < 5) {
        TX_TRY(tx_ir_attr_ints(n, "shape", &shape, &ns));
    } else {
        TX_TRY(need_inputs(n, in, 2));
        bool known;
        TX_TRY(input_ints(n, in, 1, &known, &owned, &ns));
        if (!known || !in[0]->shape_known) {
            free(owned);
            set_out(&out[0], in[0]->dtype, NULL);
            return NULL;
        }
        shape = owned;
    }
    tx_shape s;
    teexec_status *st = at_node(n, tx_shape_reshape(&in[0]->shape, shape, ns, allowzero != 0, &s));
    free(owned);
    TX_TRY(st);
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_transpose(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    const int64_t *perm;
    size_t np;
    TX_TRY(tx_ir_attr_ints(n, "perm", &perm, &np));
    if (!in[0]->shape_known) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    tx_shape s;
    TX_TRY(at_node(n, tx_shape_transpose(&in[0]->shape, perm, perm ? np : 0, &s)));
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

/* Squeeze/Unsqueeze: axes attribute before opset 13, an input from 13. */
static teexec_status *sq_axes(const tx_ir_node *n, ins_t in, bool *known, const int64_t **axes,
                              size_t *naxes, int64_t **owned)
{
    *owned = NULL;
    *known = true;
    if (n->opset < 13) return tx_ir_attr_ints(n, "axes", axes, naxes);
    *axes = NULL;
    *naxes = 0;
    if (!in_at(n, in, 1)) return NULL;
    TX_TRY(input_ints(n, in, 1, known, owned, naxes));
    *axes = *owned;
    return NULL;
}

static teexec_status *inf_squeeze(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    bool known;
    const int64_t *axes;
    size_t na;
    int64_t *owned;
    TX_TRY(sq_axes(n, in, &known, &axes, &na, &owned));
    if (!known || !in[0]->shape_known) {
        free(owned);
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    tx_shape s;
    teexec_status *st = at_node(n, tx_shape_squeeze(&in[0]->shape, axes, na, &s));
    free(owned);
    TX_TRY(st);
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_unsqueeze(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    bool known;
    const int64_t *axes;
    size_t na;
    int64_t *owned;
    TX_TRY(sq_axes(n, in, &known, &axes, &na, &owned));
    if (!known || !in[0]->shape_known) {
        free(owned);
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    if (na == 0) {
        free(owned);
        return tx_ir_node_error(n, "needs axes");
    }
    tx_shape s;
    teexec_status *st = at_node(n, tx_shape_unsqueeze(&in[0]->shape, axes, na, &s));
    free(owned);
    TX_TRY(st);
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_flatten(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    int64_t axis;
    TX_TRY(tx_ir_attr_int(n, "axis", 1, &axis));
    if (!in[0]->shape_known) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    tx_shape s;
    TX_TRY(at_node(n, tx_shape_flatten(&in[0]->shape, axis, &s)));
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_concat(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    int64_t axis;
    TX_TRY(tx_ir_attr_int(n, "axis", 0, &axis));
    if (!tx_ir_attr_find(n, "axis")) return tx_ir_attr_missing(n, "axis");
    const tx_shape *shapes[256];
    if (n->n_inputs > 256) return tx_ir_node_error(n, "has more than 256 inputs");
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (!in[i]) return tx_ir_node_error(n, "input %zu is missing", i);
        if (!in[i]->shape_known) {
            set_out(&out[0], in[0]->dtype, NULL);
            return NULL;
        }
        shapes[i] = &in[i]->shape;
    }
    tx_shape s;
    TX_TRY(at_node(n, tx_shape_concat(n->n_inputs, shapes, axis, &s)));
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

/* The sizes of each Split output along the axis (n->n_outputs entries). */
teexec_status *tx_split_sizes(const tx_ir_node *n, const tx_tensor *split_input,
                              const tx_shape *in, int32_t *axis_out, int64_t *sizes)
{
    int64_t axis;
    TX_TRY(tx_ir_attr_int(n, "axis", 0, &axis));
    int32_t ax;
    TX_TRY(at_node(n, tx_shape_normalize_axis(axis, in->rank, &ax)));
    *axis_out = ax;
    int64_t dim = in->dims[ax];
    size_t nout = n->n_outputs;
    const int64_t *split = NULL;
    size_t ns = 0;
    int64_t *owned = NULL;
    if (n->opset < 13) {
        TX_TRY(tx_ir_attr_ints(n, "split", &split, &ns));
    } else if (split_input) {
        TX_TRY(at_node(n, tx_tensor_read_ints(split_input, &owned, &ns)));
        split = owned;
        if (ns == 0) split = NULL; /* an empty split input means equal parts */
    }
    if (split) {
        if (ns != nout) {
            free(owned);
            return tx_ir_node_error(n, "has %zu split sizes for %zu outputs", ns, nout);
        }
        int64_t total = 0;
        for (size_t i = 0; i < ns; i++) {
            if (split[i] < 0) {
                free(owned);
                return tx_ir_node_error(n, "has a negative split size");
            }
            sizes[i] = split[i];
            total += split[i];
        }
        free(owned);
        if (total != dim)
            return tx_ir_node_error(n, "split sizes sum to %lld but the axis has %lld",
                                    (long long)total, (long long)dim);
        return NULL;
    }
    int64_t num = (int64_t)nout;
    if (n->opset >= 18) {
        int64_t no;
        TX_TRY(tx_ir_attr_int(n, "num_outputs", (int64_t)nout, &no));
        if (no != (int64_t)nout)
            return tx_ir_node_error(n, "num_outputs %lld but %zu outputs", (long long)no, nout);
        /* Opset 18: ceil-sized chunks, the last one smaller. */
        int64_t chunk = (dim + num - 1) / (num ? num : 1);
        int64_t left = dim;
        for (size_t i = 0; i < nout; i++) {
            sizes[i] = left < chunk ? left : chunk;
            left -= sizes[i];
        }
        return NULL;
    }
    if (num == 0 || dim % num != 0)
        return tx_ir_node_error(n, "cannot split %lld evenly into %zu parts", (long long)dim, nout);
    for (size_t i = 0; i < nout; i++) sizes[i] = dim / num;
    return NULL;
}

static teexec_status *inf_split(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    const tx_infer_value *sp = n->opset >= 13 ? in_at(n, in, 1) : NULL;
    if (!in[0]->shape_known || (sp && !sp->value)) {
        for (size_t j = 0; j < n->n_outputs; j++) set_out(&out[j], in[0]->dtype, NULL);
        return NULL;
    }
    if (n->n_outputs > 4096) return tx_ir_node_error(n, "has too many outputs");
    int64_t sizes[4096];
    int32_t ax;
    TX_TRY(tx_split_sizes(n, sp ? sp->value : NULL, &in[0]->shape, &ax, sizes));
    for (size_t j = 0; j < n->n_outputs; j++) {
        tx_shape s = in[0]->shape;
        s.dims[ax] = sizes[j];
        set_out(&out[j], in[0]->dtype, &s);
    }
    return NULL;
}

/* Slice parameters: attributes before opset 10, inputs 1..4 from 10.
 * vals[0..3] are starts, ends, axes, steps (NULL when absent). */
teexec_status *tx_slice_params(const tx_ir_node *n, const tx_tensor *const *vals,
                               const tx_shape *in, int64_t *eff_start, int64_t *eff_step,
                               tx_shape *out)
{
    const int64_t *p[4] = {NULL, NULL, NULL, NULL};
    size_t cnt[4] = {0, 0, 0, 0};
    int64_t *owned[4] = {NULL, NULL, NULL, NULL};
    teexec_status *st = NULL;
    if (n->opset < 10) {
        static const char *names[3] = {"starts", "ends", "axes"};
        for (int i = 0; i < 3 && !st; i++) st = tx_ir_attr_ints(n, names[i], &p[i], &cnt[i]);
    } else {
        for (int i = 0; i < 4 && !st; i++) {
            if (!vals[i]) continue;
            st = at_node(n, tx_tensor_read_ints(vals[i], &owned[i], &cnt[i]));
            p[i] = owned[i];
        }
    }
    if (!st && (!p[0] && cnt[0]) ) st = tx_ir_node_error(n, "needs starts");
    if (!st && cnt[0] != cnt[1])
        st = tx_ir_node_error(n, "has %zu starts but %zu ends", cnt[0], cnt[1]);
    if (!st && p[2] && cnt[2] != cnt[0])
        st = tx_ir_node_error(n, "has %zu axes for %zu starts", cnt[2], cnt[0]);
    if (!st && p[3] && cnt[3] != cnt[0])
        st = tx_ir_node_error(n, "has %zu steps for %zu starts", cnt[3], cnt[0]);
    if (!st)
        st = at_node(n, tx_shape_slice(in, p[0], p[1], p[2], p[3], cnt[0], eff_start, eff_step,
                                       out));
    for (int i = 0; i < 4; i++) free(owned[i]);
    return st;
}

static teexec_status *inf_slice(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    const tx_tensor *vals[4] = {NULL, NULL, NULL, NULL};
    bool known = in[0]->shape_known;
    if (n->opset >= 10) {
        TX_TRY(need_inputs(n, in, 3));
        for (size_t i = 1; i <= 4; i++) {
            const tx_infer_value *v = in_at(n, in, i);
            if (!v) continue;
            if (!v->value) known = false;
            vals[i - 1] = v->value;
        }
    }
    if (!known) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    int64_t es[TX_MAX_RANK], ep[TX_MAX_RANK];
    tx_shape s;
    TX_TRY(tx_slice_params(n, vals, &in[0]->shape, es, ep, &s));
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_gather(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    int64_t axis;
    TX_TRY(tx_ir_attr_int(n, "axis", 0, &axis));
    if (!all_known(n, in, 2)) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    tx_shape s;
    TX_TRY(at_node(n, tx_shape_gather(&in[0]->shape, &in[1]->shape, axis, &s)));
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *inf_gather_elements(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    if (!all_known(n, in, 2)) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    if (in[0]->shape.rank != in[1]->shape.rank || in[0]->shape.rank < 1)
        return tx_ir_node_error(n, "data and indices must have the same rank (>= 1)");
    set_out(&out[0], in[0]->dtype, &in[1]->shape);
    return NULL;
}

/* Expand and Tile take their shape/repeats from input 1's value. */
static teexec_status *inf_expand_tile(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    bool known;
    int64_t *v;
    size_t nv;
    TX_TRY(input_ints(n, in, 1, &known, &v, &nv));
    if (!known || !in[0]->shape_known) {
        free(v);
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    tx_shape s;
    teexec_status *st;
    if (strcmp(n->op_type, "Expand") == 0)
        st = tx_shape_expand(&in[0]->shape, v, nv, &s);
    else
        st = tx_shape_tile(&in[0]->shape, v, nv, &s);
    free(v);
    TX_TRY(at_node(n, st));
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

static teexec_status *make_int64_value(tx_infer_value *o, int32_t rank, const int64_t *dims,
                                       const int64_t *vals)
{
    TX_TRY(tx_tensor_alloc(&o->owned, TEEXEC_DTYPE_INT64, rank, dims));
    if (o->owned.numel) memcpy(o->owned.data, vals, (size_t)o->owned.numel * sizeof(int64_t));
    o->value = &o->owned;
    set_out(o, TEEXEC_DTYPE_INT64, NULL);
    o->shape = tx_shape_of(&o->owned);
    o->shape_known = true;
    return NULL;
}

static teexec_status *inf_shape(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    if (!in[0]->shape_known) {
        /* the rank alone would fix the output shape, but ranks travel with
         * shapes here */
        set_out(&out[0], TEEXEC_DTYPE_INT64, NULL);
        return NULL;
    }
    int64_t r = in[0]->shape.rank, start = 0, end = r;
    if (n->opset >= 15) {
        TX_TRY(tx_ir_attr_int(n, "start", 0, &start));
        TX_TRY(tx_ir_attr_int(n, "end", r, &end));
    }
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    return make_int64_value(&out[0], 1, &len, in[0]->shape.dims + start);
}

static teexec_status *inf_size(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    if (!in[0]->shape_known) {
        tx_shape s = {.rank = 0};
        set_out(&out[0], TEEXEC_DTYPE_INT64, &s);
        return NULL;
    }
    uint64_t ne;
    TX_TRY(at_node(n, tx_shape_numel(&in[0]->shape, &ne)));
    int64_t v = (int64_t)ne;
    return make_int64_value(&out[0], 0, NULL, &v);
}

static teexec_status *inf_range(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 3));
    teexec_dtype dt = in[0]->dtype;
    if (!in[0]->value || !in[1]->value || !in[2]->value) {
        set_out(&out[0], dt, NULL);
        return NULL;
    }
    double s = 0, l = 0, d = 0;
    TX_TRY(at_node(n, tx_tensor_read_scalar(in[0]->value, &s)));
    TX_TRY(at_node(n, tx_tensor_read_scalar(in[1]->value, &l)));
    TX_TRY(at_node(n, tx_tensor_read_scalar(in[2]->value, &d)));
    if (d == 0) return tx_ir_node_error(n, "has delta 0");
    double cnt = ceil((l - s) / d);
    if (!(cnt >= 0)) cnt = 0;
    if (cnt > 1e15) return tx_ir_node_error(n, "would produce %g elements", cnt);
    tx_shape sh = {.rank = 1, .dims = {(int64_t)cnt}};
    set_out(&out[0], dt, &sh);
    return NULL;
}

/* ConstantOfShape's fill value: the `value` attribute (a one-element
 * tensor) or float 0. */
static teexec_status *inf_constant_of_shape(const tx_ir_node *n, const tx_onnx_file *file,
                                            ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    const Onnx__TensorProto *tp;
    TX_TRY(tx_ir_attr_tensor(n, "value", &tp));
    teexec_dtype dt = TEEXEC_DTYPE_FLOAT;
    if (tp) dt = (teexec_dtype)tp->data_type;
    (void)file;
    bool known;
    int64_t *v;
    size_t nv;
    TX_TRY(input_ints(n, in, 0, &known, &v, &nv));
    if (!known) {
        set_out(&out[0], dt, NULL);
        return NULL;
    }
    tx_shape s;
    teexec_status *st = nv > TX_MAX_RANK ? tx_ir_node_error(n, "shape has rank %zu", nv)
                                         : tx_shape_make((int32_t)nv, v, &s);
    free(v);
    TX_TRY(at_node(n, st));
    uint64_t ne;
    TX_TRY(at_node(n, tx_shape_numel(&s, &ne)));
    set_out(&out[0], dt, &s);
    return NULL;
}

static teexec_status *inf_constant(const tx_ir_node *n, const tx_onnx_file *file, ins_t in,
                                   tx_infer_value *out)
{
    (void)in;
    tx_infer_value *o = &out[0];
    const tx_ir_attr *a;
    if ((a = tx_ir_attr_find(n, "value"))) {
        if (a->type != TX_IR_ATTR_TENSOR || !a->t)
            return tx_ir_node_error(n, "attribute 'value' is not a tensor");
        TX_TRY(at_node(n, tx_tensor_from_proto(a->t, file, &o->owned)));
    } else if ((a = tx_ir_attr_find(n, "value_float"))) {
        TX_TRY(tx_tensor_alloc(&o->owned, TEEXEC_DTYPE_FLOAT, 0, NULL));
        *(float *)o->owned.data = a->f;
    } else if ((a = tx_ir_attr_find(n, "value_floats"))) {
        int64_t d = (int64_t)a->n_floats;
        TX_TRY(tx_tensor_alloc(&o->owned, TEEXEC_DTYPE_FLOAT, 1, &d));
        if (d) memcpy(o->owned.data, a->floats, a->n_floats * sizeof(float));
    } else if ((a = tx_ir_attr_find(n, "value_int"))) {
        TX_TRY(tx_tensor_alloc(&o->owned, TEEXEC_DTYPE_INT64, 0, NULL));
        *(int64_t *)o->owned.data = a->i;
    } else if ((a = tx_ir_attr_find(n, "value_ints"))) {
        int64_t d = (int64_t)a->n_ints;
        TX_TRY(tx_tensor_alloc(&o->owned, TEEXEC_DTYPE_INT64, 1, &d));
        if (d) memcpy(o->owned.data, a->ints, a->n_ints * sizeof(int64_t));
    } else if (tx_ir_attr_find(n, "value_string") || tx_ir_attr_find(n, "value_strings")) {
        return tx_status_with_node(
            tx_error(TEEXEC_ERR_UNSUPPORTED, "node \"%s\" (Constant): string constants are not supported",
                     n->label), n->label);
    } else if (tx_ir_attr_find(n, "sparse_value")) {
        return tx_status_with_node(
            tx_error(TEEXEC_ERR_UNSUPPORTED, "node \"%s\" (Constant): sparse constants are not supported",
                     n->label), n->label);
    } else {
        return tx_ir_node_error(n, "has no value attribute");
    }
    if (o->owned.dtype == TEEXEC_DTYPE_STRING) {
        tx_tensor_release(&o->owned);
        return tx_status_with_node(
            tx_error(TEEXEC_ERR_UNSUPPORTED, "node \"%s\" (Constant): string constants are not supported",
                     n->label), n->label);
    }
    o->value = &o->owned;
    o->dtype = o->owned.dtype;
    o->shape = tx_shape_of(&o->owned);
    o->shape_known = true;
    return NULL;
}

static teexec_status *inf_dropout(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(inf_same(n, in, out));
    if (n->n_outputs > 1)
        set_out(&out[1], TEEXEC_DTYPE_BOOL, in[0]->shape_known ? &in[0]->shape : NULL);
    return NULL;
}

static teexec_status *inf_topk(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    int64_t axis, k = 0;
    TX_TRY(tx_ir_attr_int(n, "axis", -1, &axis));
    bool known = in[0]->shape_known;
    if (n->opset < 10) {
        TX_TRY(tx_ir_attr_int(n, "k", 0, &k));
    } else {
        TX_TRY(need_inputs(n, in, 2));
        if (!in[1]->value) {
            known = false;
        } else {
            int64_t *v;
            size_t nv;
            TX_TRY(at_node(n, tx_tensor_read_ints(in[1]->value, &v, &nv)));
            if (nv != 1) {
                free(v);
                return tx_ir_node_error(n, "K must have one element");
            }
            k = v[0];
            free(v);
        }
    }
    if (!known) {
        set_out(&out[0], in[0]->dtype, NULL);
        if (n->n_outputs > 1) set_out(&out[1], TEEXEC_DTYPE_INT64, NULL);
        return NULL;
    }
    int32_t ax;
    TX_TRY(at_node(n, tx_shape_normalize_axis(axis, in[0]->shape.rank, &ax)));
    if (k < 0 || k > in[0]->shape.dims[ax])
        return tx_ir_node_error(n, "K=%lld is outside [0, %lld]", (long long)k,
                                (long long)in[0]->shape.dims[ax]);
    tx_shape s = in[0]->shape;
    s.dims[ax] = k;
    set_out(&out[0], in[0]->dtype, &s);
    if (n->n_outputs > 1) set_out(&out[1], TEEXEC_DTYPE_INT64, &s);
    return NULL;
}

/* ---- Einsum ------------------------------------------------------------ */

teexec_status *tx_einsum_parse(const tx_ir_node *n, size_t n_in, const tx_shape *const *shapes,
                               tx_einsum *e)
{
    const char *eq;
    TX_TRY(tx_ir_attr_string(n, "equation", NULL, &eq, NULL));
    if (!eq) return tx_ir_attr_missing(n, "equation");
    memset(e, 0, sizeof(*e));
    for (int c = 0; c < 128; c++) e->letter_index[c] = -1;
    if (n_in > TX_EINSUM_MAX_INPUTS) return tx_ir_node_error(n, "has too many inputs");
    e->n_inputs = (int)n_in;
    int ell_rank = -1; /* dims the ellipsis stands for */
    int64_t ell_dims[TX_MAX_RANK];
    const char *p = eq;
    size_t term = 0;
    int counts[TX_EINSUM_MAX_LABELS] = {0};
    for (;;) {
        if (term >= n_in) return tx_ir_node_error(n, "equation '%s' has more terms than inputs", eq);
        const tx_shape *s = shapes[term];
        int ndim = 0, seen_ell = 0;
        int labels[TX_MAX_RANK + 1];
        int nl = 0;
        while (*p && *p != ',' && *p != '-') {
            if (*p == ' ') { p++; continue; }
            if (*p == '.') {
                if (strncmp(p, "...", 3) != 0 || seen_ell)
                    return tx_ir_node_error(n, "bad ellipsis in equation '%s'", eq);
                seen_ell = 1;
                labels[nl++] = -2;
                p += 3;
                continue;
            }
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                return tx_ir_node_error(n, "bad character '%c' in equation '%s'", *p, eq);
            if (nl > TX_MAX_RANK) return tx_ir_node_error(n, "term too long in '%s'", eq);
            int c = (unsigned char)*p;
            if (e->letter_index[c] < 0) {
                if (e->n_labels >= TX_EINSUM_MAX_LABELS - TX_MAX_RANK)
                    return tx_ir_node_error(n, "too many labels");
                e->letter_index[c] = e->n_labels++;
            }
            labels[nl++] = e->letter_index[c];
            ndim++;
            p++;
        }
        int er = seen_ell ? s->rank - ndim : 0;
        if (er < 0 || (!seen_ell && ndim != s->rank))
            return tx_ir_node_error(n, "term %zu of '%s' does not match input rank %d", term, eq,
                                    (int)s->rank);
        if (seen_ell) {
            if (ell_rank < 0) {
                ell_rank = er;
            } else if (ell_rank != er) {
                return tx_ir_node_error(n, "ellipsis ranks differ in '%s'", eq);
            }
        }
        /* expand into per-dim labels; ellipsis dims get labels
         * TX_EINSUM_MAX_LABELS - TX_MAX_RANK + k */
        int d = 0;
        for (int i = 0; i < nl; i++) {
            if (labels[i] == -2) {
                for (int k = 0; k < er; k++) {
                    int lab = TX_EINSUM_MAX_LABELS - TX_MAX_RANK + (ell_rank - er) + k;
                    e->in_labels[term][d] = lab;
                    int64_t dim = s->dims[d];
                    if (counts[lab] && ell_dims[k] != dim && ell_dims[k] != 1 && dim != 1)
                        return tx_ir_node_error(n, "ellipsis dims do not broadcast in '%s'", eq);
                    if (!counts[lab] || ell_dims[k] == 1) ell_dims[k] = dim;
                    counts[lab]++;
                    d++;
                }
            } else {
                e->in_labels[term][d] = labels[i];
                int64_t dim = s->dims[d];
                if (counts[labels[i]] && e->label_dim[labels[i]] != dim)
                    return tx_ir_node_error(n, "label '%c' has dims %lld and %lld in '%s'",
                                            (char)0, (long long)e->label_dim[labels[i]],
                                            (long long)dim, eq);
                e->label_dim[labels[i]] = dim;
                counts[labels[i]]++;
                d++;
            }
        }
        e->in_rank[term] = d;
        term++;
        if (*p == ',') {
            p++;
            continue;
        }
        break;
    }
    if (term != n_in) return tx_ir_node_error(n, "equation '%s' has %zu terms for %zu inputs", eq, term, n_in);
    if (ell_rank < 0) ell_rank = 0;
    for (int k = 0; k < ell_rank; k++)
        e->label_dim[TX_EINSUM_MAX_LABELS - TX_MAX_RANK + k] = ell_dims[k];
    e->out_rank = 0;
    if (*p == '-') {
        if (p[1] != '>') return tx_ir_node_error(n, "bad equation '%s'", eq);
        p += 2;
        while (*p) {
            if (*p == ' ') { p++; continue; }
            if (*p == '.') {
                if (strncmp(p, "...", 3) != 0) return tx_ir_node_error(n, "bad ellipsis in '%s'", eq);
                for (int k = 0; k < ell_rank; k++)
                    e->out_labels[e->out_rank++] = TX_EINSUM_MAX_LABELS - TX_MAX_RANK + k;
                p += 3;
                continue;
            }
            int c = (unsigned char)*p;
            if (c >= 128 || e->letter_index[c] < 0)
                return tx_ir_node_error(n, "output label '%c' not in any input of '%s'", *p, eq);
            if (e->out_rank >= TX_MAX_RANK) return tx_ir_node_error(n, "output rank too large");
            e->out_labels[e->out_rank++] = e->letter_index[c];
            p++;
        }
    } else {
        /* implicit output: the ellipsis, then labels seen once, alphabetically */
        for (int k = 0; k < ell_rank; k++)
            e->out_labels[e->out_rank++] = TX_EINSUM_MAX_LABELS - TX_MAX_RANK + k;
        for (int c = 'A'; c <= 'z'; c++) {
            if (e->letter_index[c] >= 0 && counts[e->letter_index[c]] == 1) {
                if (e->out_rank >= TX_MAX_RANK) return tx_ir_node_error(n, "output rank too large");
                e->out_labels[e->out_rank++] = e->letter_index[c];
            }
        }
    }
    e->ell_rank = ell_rank;
    return NULL;
}

static teexec_status *inf_einsum(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 1));
    const tx_shape *shapes[TX_EINSUM_MAX_INPUTS];
    if (n->n_inputs > TX_EINSUM_MAX_INPUTS) return tx_ir_node_error(n, "has too many inputs");
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (!in[i]) return tx_ir_node_error(n, "input %zu is missing", i);
        if (!in[i]->shape_known) {
            set_out(&out[0], in[0]->dtype, NULL);
            return NULL;
        }
        shapes[i] = &in[i]->shape;
    }
    tx_einsum e;
    TX_TRY(tx_einsum_parse(n, n->n_inputs, shapes, &e));
    tx_shape s = {.rank = e.out_rank};
    for (int i = 0; i < e.out_rank; i++) s.dims[i] = e.label_dim[e.out_labels[i]];
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

/* ---- Conv, GatherND, RMSNormalization, Attention ------------------------ */

static teexec_status *unsupported_at(const tx_ir_node *n, const char *why)
{
    return tx_status_with_node(tx_error(TEEXEC_ERR_UNSUPPORTED, "node \"%s\" (%s): %s", n->label,
                                        n->op_type, why),
                               n->label);
}

/* An ints attribute of exactly `want` entries, or `def` for each when absent. */
static teexec_status *ints_or(const tx_ir_node *n, const char *name, size_t want, int64_t def,
                              int64_t *out)
{
    const int64_t *v;
    size_t cnt;
    TX_TRY(tx_ir_attr_ints(n, name, &v, &cnt));
    if (!tx_ir_attr_find(n, name)) {
        for (size_t i = 0; i < want; i++) out[i] = def;
        return NULL;
    }
    if (cnt != want)
        return tx_ir_node_error(n, "has %zu '%s' values, expected %zu", cnt, name, want);
    memcpy(out, v, want * sizeof(int64_t));
    return NULL;
}

teexec_status *tx_conv_geometry(const tx_ir_node *n, const tx_shape *x, const tx_shape *w,
                                tx_conv_geom *g)
{
    memset(g, 0, sizeof(*g));
    if (x->rank < 3) return tx_ir_node_error(n, "needs X of rank >= 3, got rank %d", (int)x->rank);
    if (w->rank != x->rank)
        return tx_ir_node_error(n, "has W of rank %d for X of rank %d", (int)w->rank, (int)x->rank);
    int32_t k = x->rank - 2;
    g->nsp = k;
    TX_TRY(tx_ir_attr_int(n, "group", 1, &g->group));
    if (g->group < 1 || x->dims[1] != w->dims[1] * g->group || w->dims[0] % g->group != 0)
        return tx_ir_node_error(n,
                                "has %lld input channels, W [%lld, %lld, ...] and group %lld: "
                                "they do not fit",
                                (long long)x->dims[1], (long long)w->dims[0],
                                (long long)w->dims[1], (long long)g->group);
    int64_t ks[TX_MAX_RANK];
    TX_TRY(ints_or(n, "kernel_shape", (size_t)k, 0, ks));
    for (int32_t i = 0; i < k; i++)
        if (tx_ir_attr_find(n, "kernel_shape") && ks[i] != w->dims[2 + i])
            return tx_ir_node_error(n, "has kernel_shape %lld on dim %d but W has %lld",
                                    (long long)ks[i], (int)i, (long long)w->dims[2 + i]);
    TX_TRY(ints_or(n, "strides", (size_t)k, 1, g->strides));
    TX_TRY(ints_or(n, "dilations", (size_t)k, 1, g->dilations));
    const char *ap;
    TX_TRY(tx_ir_attr_string(n, "auto_pad", "NOTSET", &ap, NULL));
    bool upper = strcmp(ap, "SAME_UPPER") == 0, lower = strcmp(ap, "SAME_LOWER") == 0;
    bool valid = strcmp(ap, "VALID") == 0;
    if (!upper && !lower && !valid && strcmp(ap, "NOTSET") != 0)
        return tx_ir_node_error(n, "has unknown auto_pad \"%s\"", ap);
    if (!upper && !lower && !valid) TX_TRY(ints_or(n, "pads", (size_t)(2 * k), 0, g->pads));
    g->out.rank = x->rank;
    g->out.dims[0] = x->dims[0];
    g->out.dims[1] = w->dims[0];
    for (int32_t i = 0; i < k; i++) {
        int64_t in = x->dims[2 + i], s = g->strides[i], d = g->dilations[i];
        if (s < 1 || d < 1) return tx_ir_node_error(n, "needs strides and dilations >= 1");
        int64_t span = (w->dims[2 + i] - 1) * d + 1;
        if (upper || lower) {
            int64_t out = (in + s - 1) / s;
            int64_t total = (out - 1) * s + span - in;
            if (total < 0) total = 0;
            g->pads[i] = upper ? total / 2 : total - total / 2;
            g->pads[k + i] = total - g->pads[i];
        } else if (valid) {
            g->pads[i] = g->pads[k + i] = 0;
        }
        if (g->pads[i] < 0 || g->pads[k + i] < 0) return tx_ir_node_error(n, "has negative pads");
        int64_t room = in + g->pads[i] + g->pads[k + i] - span;
        if (room < 0)
            return tx_ir_node_error(n, "has a kernel extent %lld larger than the padded input %lld",
                                    (long long)span, (long long)(in + g->pads[i] + g->pads[k + i]));
        g->out.dims[2 + i] = room / s + 1;
    }
    return NULL;
}

static teexec_status *inf_conv(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    if (!all_known(n, in, 2)) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    tx_conv_geom g;
    TX_TRY(tx_conv_geometry(n, &in[0]->shape, &in[1]->shape, &g));
    const tx_infer_value *b = in_at(n, in, 2);
    if (b && b->shape_known && (b->shape.rank != 1 || b->shape.dims[0] != g.out.dims[1]))
        return tx_ir_node_error(n, "needs B of shape [%lld]", (long long)g.out.dims[1]);
    set_out(&out[0], in[0]->dtype, &g.out);
    return NULL;
}

static teexec_status *inf_gather_nd(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    int64_t bd = 0;
    if (n->opset >= 12) TX_TRY(tx_ir_attr_int(n, "batch_dims", 0, &bd));
    if (in[1]->dtype != TEEXEC_DTYPE_INT64 && in[1]->dtype != TEEXEC_DTYPE_UNDEFINED)
        return tx_ir_node_error(n, "needs int64 indices, got %s", teexec_dtype_name(in[1]->dtype));
    if (!all_known(n, in, 2)) {
        set_out(&out[0], in[0]->dtype, NULL);
        return NULL;
    }
    const tx_shape *d = &in[0]->shape, *ix = &in[1]->shape;
    if (d->rank < 1 || ix->rank < 1 || bd < 0 || bd >= d->rank || bd >= ix->rank)
        return tx_ir_node_error(n, "needs data and indices of rank > batch_dims = %lld",
                                (long long)bd);
    int64_t k = ix->dims[ix->rank - 1];
    if (k < 1 || k > d->rank - bd)
        return tx_ir_node_error(n, "has an indices last dim of %lld, outside [1, %lld]",
                                (long long)k, (long long)(d->rank - bd));
    for (int64_t i = 0; i < bd; i++)
        if (d->dims[i] != ix->dims[i])
            return tx_ir_node_error(n, "has batch dim %lld of %lld in data but %lld in indices",
                                    (long long)i, (long long)d->dims[i], (long long)ix->dims[i]);
    tx_shape s = {.rank = ix->rank - 1 + d->rank - (int32_t)bd - (int32_t)k};
    int32_t o = 0;
    for (int32_t i = 0; i < ix->rank - 1; i++) s.dims[o++] = ix->dims[i];
    for (int32_t i = (int32_t)(bd + k); i < d->rank; i++) s.dims[o++] = d->dims[i];
    set_out(&out[0], in[0]->dtype, &s);
    return NULL;
}

/* RMSNormalization: Y has X's shape and scale's dtype. */
static teexec_status *inf_rms_norm(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 2));
    int64_t axis;
    TX_TRY(tx_ir_attr_int(n, "axis", -1, &axis));
    if (in[0]->shape_known) {
        int32_t ax;
        TX_TRY(at_node(n, tx_shape_normalize_axis(axis, in[0]->shape.rank, &ax)));
    }
    set_out(&out[0], in[1]->dtype, in[0]->shape_known ? &in[0]->shape : NULL);
    return NULL;
}

/* Attention (opset 23): Y, present_key, present_value, qk_matmul_output. */
static teexec_status *inf_attention(const tx_ir_node *n, ins_t in, tx_infer_value *out)
{
    TX_TRY(need_inputs(n, in, 3));
    int64_t mode, hq = 0, hkv = 0;
    TX_TRY(tx_ir_attr_int(n, "qk_matmul_output_mode", 0, &mode));
    TX_TRY(tx_ir_attr_int(n, "q_num_heads", 0, &hq));
    TX_TRY(tx_ir_attr_int(n, "kv_num_heads", 0, &hkv));
    if (mode != 0 && n->n_outputs > 3 && n->outputs[3] >= 0)
        return unsupported_at(n, "qk_matmul_output_mode other than 0 is not supported");
    if (n->n_inputs > 6 && n->inputs[6] >= 0)
        return unsupported_at(n, "the nonpad_kv_seqlen input (opset 24) is not supported");
    const tx_infer_value *pk = in_at(n, in, 4), *pv = in_at(n, in, 5);
    if ((pk == NULL) != (pv == NULL))
        return tx_ir_node_error(n, "needs past_key and past_value together");
    teexec_dtype dq = in[0]->dtype, dv = in[2]->dtype;
    bool known = all_known(n, in, 3) && (!pk || (pk->shape_known && pv->shape_known));
    if (!known) {
        for (size_t j = 0; j < n->n_outputs; j++) set_out(&out[j], j == 2 ? dv : dq, NULL);
        return NULL;
    }
    const tx_shape *q = &in[0]->shape, *k = &in[1]->shape, *v = &in[2]->shape;
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return tx_ir_node_error(n, "needs Q, K, V all of rank 3 or all of rank 4");
    int64_t B = q->dims[0], Lq, Lk, D, Dv;
    if (q->rank == 3) {
        if (hq < 1 || hkv < 1)
            return tx_ir_node_error(n, "needs q_num_heads and kv_num_heads for rank-3 inputs");
        if (q->dims[2] % hq || k->dims[2] % hkv || v->dims[2] % hkv)
            return tx_ir_node_error(n, "has hidden sizes that do not divide by the head counts");
        Lq = q->dims[1];
        Lk = k->dims[1];
        D = q->dims[2] / hq;
        Dv = v->dims[2] / hkv;
    } else {
        hq = q->dims[1];
        hkv = k->dims[1];
        Lq = q->dims[2];
        Lk = k->dims[2];
        D = q->dims[3];
        Dv = v->dims[3];
    }
    int64_t past = pk ? (pk->shape.rank == 4 ? pk->shape.dims[2] : -1) : 0;
    if (past < 0) return tx_ir_node_error(n, "needs a rank-4 past_key");
    int64_t T = past + Lk;
    tx_shape ys = {.rank = q->rank}, pks = {.rank = 4, .dims = {B, hkv, T, D}};
    tx_shape pvs = {.rank = 4, .dims = {B, hkv, T, Dv}}, qks = {.rank = 4, .dims = {B, hq, Lq, T}};
    if (q->rank == 3) {
        ys.dims[0] = B;
        ys.dims[1] = Lq;
        ys.dims[2] = hq * Dv;
    } else {
        ys.dims[0] = B;
        ys.dims[1] = hq;
        ys.dims[2] = Lq;
        ys.dims[3] = Dv;
    }
    const tx_shape *shapes[4] = {&ys, &pks, &pvs, &qks};
    for (size_t j = 0; j < n->n_outputs && j < 4; j++)
        set_out(&out[j], j == 2 ? dv : dq, shapes[j]);
    return NULL;
}

/* ---- the table --------------------------------------------------------- */

typedef teexec_status *(*infer_fn)(const tx_ir_node *, ins_t, tx_infer_value *);
typedef teexec_status *(*infer_file_fn)(const tx_ir_node *, const tx_onnx_file *, ins_t,
                                        tx_infer_value *);

typedef struct op_rule {
    const char *op;
    int64_t min_opset;
    infer_fn fn;
    infer_file_fn ffn;
} op_rule;

static const op_rule rules[] = {
    {"Add", 1, inf_bcast, NULL}, {"Sub", 1, inf_bcast, NULL}, {"Mul", 1, inf_bcast, NULL},
    {"Div", 1, inf_bcast, NULL}, {"Pow", 1, inf_bcast, NULL},
    {"Min", 1, inf_bcast, NULL}, {"Max", 1, inf_bcast, NULL}, {"Mean", 1, inf_bcast, NULL},
    {"Sum", 1, inf_bcast, NULL},
    {"Equal", 1, inf_bcast_bool, NULL}, {"Less", 1, inf_bcast_bool, NULL},
    {"Greater", 1, inf_bcast_bool, NULL}, {"LessOrEqual", 12, inf_bcast_bool, NULL},
    {"GreaterOrEqual", 12, inf_bcast_bool, NULL},
    {"And", 1, inf_bcast_bool, NULL}, {"Or", 1, inf_bcast_bool, NULL},
    {"Xor", 1, inf_bcast_bool, NULL},
    {"Where", 9, inf_where, NULL},
    {"Sqrt", 1, inf_same, NULL}, {"Reciprocal", 1, inf_same, NULL}, {"Neg", 1, inf_same, NULL},
    {"Abs", 1, inf_same, NULL}, {"Exp", 1, inf_same, NULL}, {"Log", 1, inf_same, NULL},
    {"Erf", 9, inf_same, NULL}, {"Tanh", 1, inf_same, NULL}, {"Sigmoid", 1, inf_same, NULL},
    {"Relu", 1, inf_same, NULL}, {"LeakyRelu", 1, inf_same, NULL}, {"Elu", 1, inf_same, NULL},
    {"Softplus", 1, inf_same, NULL}, {"Gelu", 20, inf_same, NULL}, {"Clip", 1, inf_same, NULL},
    {"Floor", 1, inf_same, NULL}, {"Ceil", 1, inf_same, NULL}, {"Round", 11, inf_same, NULL},
    {"Sign", 9, inf_same, NULL}, {"Not", 1, inf_same, NULL},
    {"IsNaN", 9, inf_bool_same, NULL}, {"IsInf", 10, inf_bool_same, NULL},
    {"Identity", 1, inf_same, NULL}, {"Dropout", 1, inf_dropout, NULL},
    {"Softmax", 1, inf_same, NULL}, {"LogSoftmax", 1, inf_same, NULL},
    {"CumSum", 11, inf_same, NULL}, {"Trilu", 14, inf_same, NULL},
    {"Cast", 1, inf_cast, NULL}, {"CastLike", 15, inf_castlike, NULL},
    {"MatMul", 1, inf_matmul, NULL}, {"Gemm", 1, inf_gemm, NULL},
    {"LayerNormalization", 17, inf_layernorm, NULL},
    {"ReduceMean", 1, inf_reduce, NULL}, {"ReduceSum", 1, inf_reduce, NULL},
    {"ReduceMax", 1, inf_reduce, NULL}, {"ReduceMin", 1, inf_reduce, NULL},
    {"ReduceProd", 1, inf_reduce, NULL},
    {"ArgMax", 1, inf_argmax, NULL}, {"ArgMin", 1, inf_argmax, NULL},
    {"Reshape", 1, inf_reshape, NULL}, {"Transpose", 1, inf_transpose, NULL},
    {"Squeeze", 1, inf_squeeze, NULL}, {"Unsqueeze", 1, inf_unsqueeze, NULL},
    {"Flatten", 1, inf_flatten, NULL}, {"Concat", 1, inf_concat, NULL},
    {"Split", 2, inf_split, NULL}, {"Slice", 1, inf_slice, NULL},
    {"Gather", 1, inf_gather, NULL}, {"GatherElements", 11, inf_gather_elements, NULL},
    {"Expand", 8, inf_expand_tile, NULL}, {"Tile", 6, inf_expand_tile, NULL},
    {"Shape", 1, inf_shape, NULL}, {"Size", 1, inf_size, NULL}, {"Range", 11, inf_range, NULL},
    {"ConstantOfShape", 9, NULL, inf_constant_of_shape},
    {"Constant", 1, NULL, inf_constant},
    {"Einsum", 12, inf_einsum, NULL}, {"TopK", 1, inf_topk, NULL},
    /* the ops real exports need beyond the transformer-block set */
    {"Sin", 7, inf_same, NULL}, {"Cos", 7, inf_same, NULL},
    {"Conv", 1, inf_conv, NULL}, {"GatherND", 11, inf_gather_nd, NULL},
    {"RMSNormalization", 23, inf_rms_norm, NULL}, {"Attention", 23, inf_attention, NULL},
};

/* Rules of ops that so far only the load-time evaluator computes
 * (import/const_eval_node.c, for the folding pass: the Cos/Sin of a rotary
 * table built from constants). Looked up after the table above, so an
 * entry there (once a backend runs the op) takes over. */
static const op_rule fold_only_rules[] = {
    {"Cos", 7, inf_same, NULL}, {"Sin", 7, inf_same, NULL}, {"Tan", 7, inf_same, NULL},
    {"Mod", 10, inf_bcast, NULL},
};

static const op_rule *find_fold_only_rule(const char *op_type, int64_t opset)
{
    for (size_t i = 0; i < sizeof(fold_only_rules) / sizeof(fold_only_rules[0]); i++)
        if (strcmp(fold_only_rules[i].op, op_type) == 0)
            return opset >= fold_only_rules[i].min_opset ? &fold_only_rules[i] : NULL;
    return NULL;
}

static const op_rule *find_rule(const char *domain, const char *op_type, int64_t opset)
{
    if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0) return NULL;
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if (strcmp(rules[i].op, op_type) == 0) return opset >= rules[i].min_opset ? &rules[i] : NULL;
    return find_fold_only_rule(op_type, opset);
}

bool tx_infer_op_known(const char *domain, const char *op_type, int64_t opset)
{
    return find_rule(domain, op_type, opset) != NULL ||
           tx_infer_quant_known(domain, op_type, opset); /* shape_infer_quant.c */
}

teexec_status *tx_infer_node(const tx_ir_node *node, const tx_onnx_file *file,
                             const tx_infer_value *const *inputs, tx_infer_value *outputs)
{
    const op_rule *r = find_rule(node->domain, node->op_type, node->opset);
    if (!r && tx_infer_quant_known(node->domain, node->op_type, node->opset))
        return tx_infer_quant_node(node, inputs, outputs);
    if (!r)
        return tx_status_with_node(
            tx_error(TEEXEC_ERR_UNSUPPORTED, "unsupported op %s (domain \"%s\", opset %lld)",
                     node->op_type, node->domain, (long long)node->opset),
            node->label);
    if (node->n_outputs == 0) return tx_ir_node_error(node, "has no outputs");
    return r->fn ? r->fn(node, inputs, outputs) : r->ffn(node, file, inputs, outputs);
}
