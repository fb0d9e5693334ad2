/* cpu_ops_shape.c - CPU kernels for data movement and metadata ops: copies,
 * Shape/Size/Constant, Cast, and the ops whose parameters come from
 * constant inputs (Slice, Tile, Range, Trilu). */
#include "exec/cpu_ops.h"

#include "base/dtype.h"
#include "format/tensor_proto.h"
#include "import/shape_infer.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ops.h"

#include <stdlib.h>
#include <string.h>

#define ERR(expr) tx_cpu_op_error(c, (expr))

static const tx_tensor *IN(const tx_op_call *c, size_t i)
{
    return i < c->n_in ? c->in[i] : NULL;
}

static tx_tensor *OUT(const tx_op_call *c, size_t i)
{
    return i < c->n_out ? c->out[i] : NULL;
}

static teexec_status *need(const tx_op_call *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!IN(c, i)) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "input %zu is missing", i));
    return NULL;
}

/* Reshape, Squeeze, Unsqueeze, Flatten and Identity change only metadata:
 * the session allocated the output with the inferred shape, so the data is
 * a plain copy. */
teexec_status *tx_cpu_op_reshape(const tx_op_call *c)
{
    TX_TRY(need(c, 1));
    return ERR(tx_cpu_copy(IN(c, 0), OUT(c, 0)));
}

/* Dropout runs in inference mode: the output is the input and the mask all
 * true. Training mode with a non-zero ratio would need random numbers,
 * which inference does not do. */
teexec_status *tx_cpu_op_dropout(const tx_op_call *c)
{
    TX_TRY(need(c, 1));
    if (c->node->opset >= 12 && IN(c, 2)) {
        double training = 0, ratio = 0.5;
        TX_TRY(ERR(tx_tensor_read_scalar(IN(c, 2), &training)));
        if (IN(c, 1)) TX_TRY(ERR(tx_tensor_read_scalar(IN(c, 1), &ratio)));
        if (training != 0 && ratio != 0)
            return ERR(tx_error(TEEXEC_ERR_UNSUPPORTED,
                                "Dropout in training mode (ratio %g) is not supported", ratio));
    }
    TX_TRY(ERR(tx_cpu_copy(IN(c, 0), OUT(c, 0))));
    tx_tensor *mask = OUT(c, 1);
    if (mask) memset(mask->data, 1, mask->nbytes);
    return NULL;
}

/* Shape, Size and Constant: inference already computes the value. */
static teexec_status *from_inference(const tx_op_call *c)
{
    tx_infer_value ins[8];
    const tx_infer_value *pins[8];
    if (c->n_in > 8) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "too many inputs"));
    for (size_t i = 0; i < c->n_in; i++) {
        memset(&ins[i], 0, sizeof(ins[i]));
        pins[i] = NULL;
        if (!c->in[i]) continue;
        ins[i].dtype = c->in[i]->dtype;
        ins[i].shape_known = true;
        ins[i].shape = tx_shape_of(c->in[i]);
        ins[i].value = c->in[i];
        pins[i] = &ins[i];
    }
    tx_infer_value out;
    memset(&out, 0, sizeof(out));
    teexec_status *st = tx_infer_node(c->node, c->file, pins, &out);
    if (!st && !out.value)
        st = tx_error(TEEXEC_ERR_INTERNAL, "inference gave no value");
    if (!st && (out.value->dtype != OUT(c, 0)->dtype || out.value->nbytes != OUT(c, 0)->nbytes))
        st = tx_error(TEEXEC_ERR_INTERNAL, "output does not match its inferred value");
    if (!st && out.value->nbytes) memcpy(OUT(c, 0)->data, out.value->data, out.value->nbytes);
    tx_infer_value_clear(&out);
    return ERR(st);
}

teexec_status *tx_cpu_op_shape(const tx_op_call *c) { return from_inference(c); }
teexec_status *tx_cpu_op_size(const tx_op_call *c) { return from_inference(c); }
teexec_status *tx_cpu_op_constant(const tx_op_call *c) { return from_inference(c); }

teexec_status *tx_cpu_op_constant_of_shape(const tx_op_call *c)
{
    tx_tensor *y = OUT(c, 0);
    tx_tensor v;
    bool found;
    TX_TRY(ERR(tx_ir_attr_tensor_value(c->node, "value", c->file, &v, &found)));
    if (!found) {
        /* float zeros (arena buffers are not zero-filled) */
        if (y->nbytes) memset(y->data, 0, y->nbytes);
        return NULL;
    }
    teexec_status *st = NULL;
    if (v.numel != 1 || v.dtype != y->dtype)
        st = tx_error(TEEXEC_ERR_BAD_MODEL, "value must be a one-element %s tensor",
                      teexec_dtype_name(y->dtype));
    size_t es = tx_dtype_elem_size(y->dtype);
    if (!st && es == 0)
        st = tx_error(TEEXEC_ERR_UNSUPPORTED, "cannot fill %s", teexec_dtype_name(y->dtype));
    if (!st)
        for (uint64_t i = 0; i < y->numel; i++)
            memcpy((char *)y->data + i * es, v.data, es);
    tx_tensor_release(&v);
    return ERR(st);
}

teexec_status *tx_cpu_op_cast(const tx_op_call *c)
{
    TX_TRY(need(c, 1));
    const tx_tensor *x = IN(c, 0);
    tx_tensor *y = OUT(c, 0);
    tx_convert_opts opts = TX_CONVERT_OPTS_DEFAULT;
    int64_t sat;
    TX_TRY(tx_ir_attr_int(c->node, "saturate", 1, &sat));
    opts.saturate = sat != 0;
    const char *rm; /* Cast-25: rounding of casts to FLOAT8E8M0 */
    TX_TRY(tx_ir_attr_string(c->node, "round_mode", "up", &rm, NULL));
    int mode = tx_e8m0_round_from_name(rm);
    if (mode < 0) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "round_mode must be up, down or nearest"));
    opts.e8m0_round = (tx_e8m0_round)mode;
    if (x->dtype == TEEXEC_DTYPE_STRING || y->dtype == TEEXEC_DTYPE_STRING)
        return ERR(tx_error(TEEXEC_ERR_UNSUPPORTED, "casts from or to string are not supported"));
    if (x->numel != y->numel)
        return ERR(tx_error(TEEXEC_ERR_INTERNAL, "cast output has the wrong size"));
    return ERR(tx_convert(x->data, x->dtype, y->data, y->dtype, x->numel, &opts));
}

teexec_status *tx_cpu_op_transpose(const tx_op_call *c)
{
    TX_TRY(need(c, 1));
    const int64_t *perm;
    size_t np;
    TX_TRY(tx_ir_attr_ints(c->node, "perm", &perm, &np));
    return ERR(tx_cpu_transpose(IN(c, 0), perm, perm ? np : 0, OUT(c, 0)));
}

teexec_status *tx_cpu_op_concat(const tx_op_call *c)
{
    TX_TRY(need(c, c->n_in));
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    return ERR(tx_cpu_concat(c->n_in, c->in, axis, OUT(c, 0)));
}

teexec_status *tx_cpu_op_split(const tx_op_call *c)
{
    TX_TRY(need(c, 1));
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    for (size_t j = 0; j < c->n_out; j++)
        if (!c->out[j]) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "output %zu is omitted", j));
    return ERR(tx_cpu_split(IN(c, 0), axis, c->n_out, c->out));
}

teexec_status *tx_cpu_op_slice(const tx_op_call *c)
{
    TX_TRY(need(c, 1));
    const tx_tensor *x = IN(c, 0);
    if (c->node->opset < 10) {
        const int64_t *st_, *en, *ax;
        size_t ns, ne, na;
        TX_TRY(tx_ir_attr_ints(c->node, "starts", &st_, &ns));
        TX_TRY(tx_ir_attr_ints(c->node, "ends", &en, &ne));
        TX_TRY(tx_ir_attr_ints(c->node, "axes", &ax, &na));
        if (ns != ne || (ax && na != ns))
            return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "starts/ends/axes lengths differ"));
        return ERR(tx_cpu_slice(x, st_, en, ax, NULL, ns, OUT(c, 0)));
    }
    TX_TRY(need(c, 3));
    int64_t *v[4] = {NULL, NULL, NULL, NULL};
    size_t n[4] = {0, 0, 0, 0};
    teexec_status *st = NULL;
    for (size_t i = 0; i < 4 && !st; i++)
        if (IN(c, i + 1)) st = tx_tensor_read_ints(IN(c, i + 1), &v[i], &n[i]);
    if (!st && (n[0] != n[1] || (IN(c, 3) && n[2] != n[0]) || (IN(c, 4) && n[3] != n[0])))
        st = tx_error(TEEXEC_ERR_BAD_MODEL, "starts/ends/axes/steps lengths differ");
    if (!st)
        st = tx_cpu_slice(x, v[0], v[1], IN(c, 3) ? v[2] : NULL, IN(c, 4) ? v[3] : NULL, n[0],
                          OUT(c, 0));
    for (int i = 0; i < 4; i++) free(v[i]);
    return ERR(st);
}

teexec_status *tx_cpu_op_gather(const tx_op_call *c)
{
    TX_TRY(need(c, 2));
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    return ERR(tx_cpu_gather(IN(c, 0), IN(c, 1), axis, OUT(c, 0)));
}

teexec_status *tx_cpu_op_gather_elements(const tx_op_call *c)
{
    TX_TRY(need(c, 2));
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    return ERR(tx_cpu_gather_elements(IN(c, 0), IN(c, 1), axis, OUT(c, 0)));
}

teexec_status *tx_cpu_op_expand(const tx_op_call *c)
{
    TX_TRY(need(c, 2));
    return ERR(tx_cpu_expand(IN(c, 0), OUT(c, 0)));
}

teexec_status *tx_cpu_op_tile(const tx_op_call *c)
{
    TX_TRY(need(c, 2));
    int64_t *rep;
    size_t nr;
    TX_TRY(ERR(tx_tensor_read_ints(IN(c, 1), &rep, &nr)));
    teexec_status *st = tx_cpu_tile(IN(c, 0), rep, nr, OUT(c, 0));
    free(rep);
    return ERR(st);
}

teexec_status *tx_cpu_op_range(const tx_op_call *c)
{
    TX_TRY(need(c, 3));
    return ERR(tx_cpu_range(IN(c, 0), IN(c, 2), OUT(c, 0)));
}

teexec_status *tx_cpu_op_trilu(const tx_op_call *c)
{
    TX_TRY(need(c, 1));
    int64_t upper, k = 0;
    TX_TRY(tx_ir_attr_int(c->node, "upper", 1, &upper));
    if (IN(c, 1)) {
        int64_t *v;
        size_t nv;
        TX_TRY(ERR(tx_tensor_read_ints(IN(c, 1), &v, &nv)));
        if (nv != 1) {
            free(v);
            return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "k must have one element"));
        }
        k = v[0];
        free(v);
    }
    return ERR(tx_cpu_trilu(IN(c, 0), k, upper != 0, OUT(c, 0)));
}
