/*
 * const_eval.c - "is this value a constant?" on a rewrite graph (see
 * const_eval.h): a walk back from the value through its producers, each
 * node typed by its rule and computed by tx_ce_eval_node
 * (const_eval_node.c), so lowering patterns and the folding pass agree on
 * every op's value.
 */
#include "import/const_eval.h"

#include "base/half.h"
#include "format/tensor_proto.h"
#include "import/rewrite_view.h"
#include "import/shape_infer_te.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Deep enough for PyTorch's shape chains, shallow enough for the C stack;
 * the visit budget bounds the work on graphs that reuse a value many times
 * (evaluation is not memoized, so a crafted DAG could otherwise explode). */
#define CE_MAX_DEPTH 64
#define CE_MAX_VISITS 4096

typedef struct ce_ctx {
    int depth;
    int visits;
} ce_ctx;

void tx_ce_release(tx_ce_value *x)
{
    if (!x) return;
    free(x->v);
    memset(x, 0, sizeof *x);
}

static teexec_status *ev(tx_rw_graph *g, const char *value, ce_ctx *cx, tx_tensor *out, bool *ok);

/* The declared, fully static type of a non-constant value (what Shape and
 * Size need of their input). */
static bool static_type(tx_rw_graph *g, const char *value, tx_infer_value *iv)
{
    tx_rw_value_type t;
    if (!tx_rw_value_type_of(g, value, &t) || t.rank < 0 || t.rank > TX_MAX_RANK) return false;
    for (int32_t d = 0; d < t.rank; d++)
        if (t.dims[d] < 0) return false;
    iv->dtype = t.dtype;
    iv->shape.rank = t.rank;
    memcpy(iv->shape.dims, t.dims, (size_t)t.rank * sizeof *t.dims);
    iv->shape_known = true;
    return true;
}

/* Output `slot` of rw node `p`, when every input is a constant. */
static teexec_status *ev_node(tx_rw_graph *g, size_t p, size_t slot, ce_ctx *cx, tx_tensor *out,
                              bool *ok)
{
    tx_rw_view *v = NULL;
    TX_TRY(tx_rw_view_node(g, p, &v));
    const tx_ir_node *n = &v->nodes[0];
    bool shape_only = !strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size");
    teexec_status *st = NULL;
    bool all = !n->domain[0];
    for (size_t k = 0; all && !st && k < n->n_inputs; k++) {
        if (n->inputs[k] < 0) continue;
        tx_infer_value *iv = &v->vals[n->inputs[k]];
        bool okk = false;
        st = ev(g, v->names[n->inputs[k]], cx, &iv->owned, &okk);
        if (st) break;
        if (okk) {
            iv->value = &iv->owned;
            iv->dtype = iv->owned.dtype;
            iv->shape = tx_shape_of(&iv->owned);
            iv->shape_known = true;
        } else if (!(shape_only && k == 0 && static_type(g, v->names[n->inputs[k]], iv))) {
            all = false;
        }
    }
    if (!st && all) {
        /* lenient: a rule the constants break is "not constant" here (the
         * node is reported when the model is typed or run) */
        tx_infer_options o = {true, TX_CE_MAX_ELEMENTS};
        st = tx_infer_step(n, v->file, &o, v->vals);
        int32_t oid = slot < n->n_outputs ? n->outputs[slot] : -1;
        if (!st && oid >= 0 && v->vals[oid].value) {
            tx_infer_value *ov = &v->vals[oid];
            if (ov->value == &ov->owned) {
                *out = ov->owned;
                memset(&ov->owned, 0, sizeof ov->owned);
                ov->value = NULL;
            } else {
                st = tx_tensor_clone(ov->value, out);
            }
            if (!st) *ok = true;
        }
    }
    tx_rw_view_free(v);
    return st;
}

static teexec_status *ev(tx_rw_graph *g, const char *value, ce_ctx *cx, tx_tensor *out, bool *ok)
{
    memset(out, 0, sizeof *out);
    *ok = false;
    if (!value || !value[0] || cx->depth >= CE_MAX_DEPTH || cx->visits >= CE_MAX_VISITS)
        return NULL;
    cx->visits++;
    if (tx_rw_constant(g, value, out)) {
        *ok = true;
        return NULL;
    }
    if (tx_rw_is_graph_input(g, value)) return NULL;
    size_t slot = 0;
    int64_t p = tx_rw_producer(g, value, &slot);
    if (p < 0) return NULL;
    cx->depth++;
    teexec_status *st = ev_node(g, (size_t)p, slot, cx, out, ok);
    cx->depth--;
    if (st) {
        tx_tensor_release(out);
        *ok = false;
    }
    return st;
}

teexec_status *tx_ce_eval_tensor(tx_rw_graph *g, const char *value, tx_tensor *out,
                                 bool *is_const)
{
    ce_ctx cx = {0, 0};
    return ev(g, value, &cx, out, is_const);
}

/* The tensor as doubles (ints, bools and floats alike). */
static teexec_status *to_doubles(const tx_tensor *t, tx_ce_value *out, bool *ok)
{
    memset(out, 0, sizeof *out);
    *ok = false;
    if (t->rank > TX_CE_MAX_RANK || t->numel > TX_CE_MAX_ELEMENTS) return NULL;
    switch (t->dtype) {
    case TEEXEC_DTYPE_FLOAT: case TEEXEC_DTYPE_DOUBLE: case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_BFLOAT16: case TEEXEC_DTYPE_INT8: case TEEXEC_DTYPE_UINT8:
    case TEEXEC_DTYPE_INT16: case TEEXEC_DTYPE_UINT16: case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_UINT32: case TEEXEC_DTYPE_INT64: case TEEXEC_DTYPE_UINT64:
    case TEEXEC_DTYPE_BOOL: break;
    default: return NULL;
    }
    out->v = calloc(t->numel ? t->numel : 1, sizeof(double));
    if (!out->v) return tx_oom();
    out->rank = t->rank;
    if (t->rank) memcpy(out->dims, t->dims, (size_t)t->rank * sizeof *t->dims);
    out->n = t->numel;
    for (uint64_t i = 0; i < t->numel; i++) {
        double d = 0;
        switch (t->dtype) {
        case TEEXEC_DTYPE_FLOAT: d = ((const float *)t->data)[i]; break;
        case TEEXEC_DTYPE_DOUBLE: d = ((const double *)t->data)[i]; break;
        case TEEXEC_DTYPE_FLOAT16: d = tx_f16_to_f32(((const uint16_t *)t->data)[i]); break;
        case TEEXEC_DTYPE_BFLOAT16: d = tx_bf16_to_f32(((const uint16_t *)t->data)[i]); break;
        case TEEXEC_DTYPE_INT8: d = ((const int8_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_UINT8: d = ((const uint8_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_INT16: d = ((const int16_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_UINT16: d = ((const uint16_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_INT32: d = ((const int32_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_UINT32: d = ((const uint32_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_INT64: d = (double)((const int64_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_UINT64: d = (double)((const uint64_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_BOOL: d = ((const uint8_t *)t->data)[i] ? 1.0 : 0.0; break;
        default: break;
        }
        out->v[i] = d;
    }
    *ok = true;
    return NULL;
}

teexec_status *tx_ce_eval(tx_rw_graph *g, const char *value, tx_ce_value *out, bool *is_const)
{
    memset(out, 0, sizeof *out);
    tx_tensor t;
    bool ok = false;
    teexec_status *st = tx_ce_eval_tensor(g, value, &t, &ok);
    if (!st && ok) st = to_doubles(&t, out, is_const);
    else *is_const = false;
    tx_tensor_release(&t);
    if (st) {
        tx_ce_release(out);
        *is_const = false;
    }
    return st;
}

bool tx_ce_ints(tx_rw_graph *g, const char *value, int64_t *out, size_t cap, size_t *n)
{
    tx_tensor t;
    bool ok = false;
    teexec_status *st = tx_ce_eval_tensor(g, value, &t, &ok);
    if (st) {
        teexec_status_destroy(st);
        return false;
    }
    /* integer tensors exactly (INT64_MAX / INT64_MIN are Slice's "to the
     * end" sentinels); float ones only when every entry is integral */
    bool good = ok && t.rank <= 1 && t.numel <= cap;
    for (uint64_t i = 0; good && i < t.numel; i++) {
        switch (t.dtype) {
        case TEEXEC_DTYPE_INT64: out[i] = ((const int64_t *)t.data)[i]; break;
        case TEEXEC_DTYPE_INT32: out[i] = ((const int32_t *)t.data)[i]; break;
        case TEEXEC_DTYPE_INT16: out[i] = ((const int16_t *)t.data)[i]; break;
        case TEEXEC_DTYPE_INT8: out[i] = ((const int8_t *)t.data)[i]; break;
        case TEEXEC_DTYPE_UINT8: case TEEXEC_DTYPE_BOOL: out[i] = ((const uint8_t *)t.data)[i]; break;
        case TEEXEC_DTYPE_UINT16: out[i] = ((const uint16_t *)t.data)[i]; break;
        case TEEXEC_DTYPE_UINT32: out[i] = ((const uint32_t *)t.data)[i]; break;
        case TEEXEC_DTYPE_FLOAT: case TEEXEC_DTYPE_DOUBLE: {
            double d = t.dtype == TEEXEC_DTYPE_FLOAT ? ((const float *)t.data)[i]
                                                     : ((const double *)t.data)[i];
            if (d != floor(d) || fabs(d) > 9007199254740992.0) good = false;
            else out[i] = (int64_t)d;
            break;
        }
        default: good = false; break;
        }
    }
    if (good) *n = (size_t)t.numel;
    tx_tensor_release(&t);
    return good;
}
