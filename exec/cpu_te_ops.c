/* cpu_te_ops.c - te.ops nodes on the CPU: attributes from the IR, shape
 * inference through the registry, forward and backward through the
 * registry's CPU implementations. */
#include "exec/cpu_te_ops.h"

#include "format/te_schema.h"
#include "kernels/cpu/te_args.h"

#include <stdlib.h>
#include <string.h>

bool tx_te_domain(const char *domain) { return domain && !strcmp(domain, TX_TE_DOMAIN); }

typedef struct te_node {
    const tx_te_op_schema *s;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    int n_params;
    size_t first_param; /* node input index of the first parameter */
} te_node;

static teexec_status *node_err(const tx_ir_node *n, teexec_code code, const char *msg)
{
    return tx_status_with_node(tx_error(code, "node \"%s\" (te.ops %s): %s", n->label, n->op_type, msg),
                               n->label);
}

static teexec_status *te_decode(const tx_ir_node *n, te_node *d)
{
    memset(d, 0, sizeof(*d));
    d->s = tx_te_schema_find(n->op_type);
    if (!d->s)
        return tx_status_with_node(
            tx_error(TEEXEC_ERR_UNSUPPORTED, "unsupported op %s (domain \"%s\", opset %lld)",
                     n->op_type, n->domain, (long long)n->opset),
            n->label);
    const tx_te_op_schema *s = d->s;
    tx_te_attr_defaults(s, d->attrs);
    for (int i = 0; i < s->n_attrs; i++) {
        const tx_te_attr_schema *a = &s->attrs[i];
        if (!tx_ir_attr_find(n, a->name)) {
            if (a->required) return tx_ir_attr_missing(n, a->name);
            continue;
        }
        switch (a->type) {
        case TX_TE_ATTR_INT:
            TX_TRY(tx_ir_attr_int(n, a->name, a->def_i, &d->attrs[i].i));
            break;
        case TX_TE_ATTR_FLOAT: {
            float f;
            TX_TRY(tx_ir_attr_float(n, a->name, (float)a->def_f, &f));
            d->attrs[i].f = f;
            break;
        }
        case TX_TE_ATTR_ENUM: {
            const char *str;
            TX_TRY(tx_ir_attr_string(n, a->name, "", &str, NULL));
            int idx = tx_te_attr_enum_index(a, str);
            if (idx < 0)
                return tx_status_with_node(
                    tx_error(TEEXEC_ERR_BAD_MODEL,
                             "node \"%s\" (te.ops %s): attribute %s must be one of %s, not \"%s\"",
                             n->label, n->op_type, a->name, a->choices, str),
                    n->label);
            d->attrs[i].i = idx;
            break;
        }
        case TX_TE_ATTR_INTS: {
            const int64_t *v;
            size_t cnt;
            TX_TRY(tx_ir_attr_ints(n, a->name, &v, &cnt));
            if (cnt > INT32_MAX) return node_err(n, TEEXEC_ERR_LIMIT, "attribute list too long");
            d->attrs[i].ints = v;
            d->attrs[i].n_ints = (int32_t)cnt;
            break;
        }
        }
    }
    TX_TRY(tx_te_param_count(s, d->attrs, &d->n_params));
    d->first_param = 1 + (size_t)s->n_extra_inputs;
    if (n->n_inputs < 1 || n->inputs[0] < 0) return node_err(n, TEEXEC_ERR_BAD_MODEL, "needs its main input");
    if (n->n_inputs != d->first_param + (size_t)d->n_params)
        return tx_status_with_node(
            tx_error(TEEXEC_ERR_BAD_MODEL,
                     "node \"%s\" (te.ops %s): has %zu inputs, the op takes %zu (main, %d extra, "
                     "%d parameters)",
                     n->label, n->op_type, n->n_inputs, d->first_param + (size_t)d->n_params,
                     s->n_extra_inputs, d->n_params),
            n->label);
    if (n->n_outputs < 1 || n->n_outputs > 1 + (size_t)s->n_extra_outputs)
        return node_err(n, TEEXEC_ERR_BAD_MODEL, "wrong number of outputs");
    return NULL;
}

/* ---- inference ---------------------------------------------------------- */

teexec_status *tx_te_infer_node(const tx_ir_node *n, const tx_infer_value *const *inputs,
                                tx_infer_value *outputs)
{
    te_node d;
    TX_TRY(te_decode(n, &d));
    tx_te_tinfo ti[64];
    const tx_te_tinfo *ptrs[64];
    if (n->n_inputs > 64) return node_err(n, TEEXEC_ERR_LIMIT, "too many inputs");
    for (size_t k = 0; k < n->n_inputs; k++) {
        const tx_infer_value *v = inputs[k];
        ptrs[k] = NULL;
        if (!v) continue;
        if (!v->shape_known) return NULL; /* outputs stay unknown until shapes are */
        ti[k].dtype = v->dtype;
        ti[k].shape = v->shape;
        ptrs[k] = &ti[k];
    }
    tx_te_infer_in in = {d.attrs, ptrs[0], ptrs + 1, d.s->n_extra_inputs, ptrs + d.first_param,
                         d.n_params};
    tx_te_infer_out out;
    memset(&out, 0, sizeof(out));
    teexec_status *st = tx_te_infer(d.s, &in, &out);
    if (st) return tx_status_with_node(tx_status_prefix(st, "node \"%s\"", n->label), n->label);
    for (size_t j = 0; j < n->n_outputs; j++) {
        const tx_te_tinfo *o = j == 0 ? &out.output : &out.extra_outputs[j - 1];
        outputs[j].dtype = o->dtype;
        outputs[j].shape = o->shape;
        outputs[j].shape_known = true;
    }
    return NULL;
}

teexec_status *tx_exec_infer_node(const tx_ir_node *node, const tx_onnx_file *file,
                                  const tx_infer_value *const *inputs, tx_infer_value *outputs)
{
    if (tx_te_domain(node->domain)) return tx_te_infer_node(node, inputs, outputs);
    return tx_infer_node(node, file, inputs, outputs);
}

/* ---- forward ------------------------------------------------------------- */

static teexec_status *te_forward(const tx_op_call *c)
{
    te_node d;
    TX_TRY(te_decode(c->node, &d));
    tx_te_fwd_args a;
    memset(&a, 0, sizeof(a));
    a.op = d.s->id;
    a.attrs = d.attrs;
    a.input = c->in[0];
    a.extra_inputs = c->in + 1;
    a.n_extra_inputs = d.s->n_extra_inputs;
    a.params = c->in + d.first_param;
    a.n_params = d.n_params;
    a.output = c->out[0];
    a.extra_outputs = c->out + 1;
    a.n_extra_outputs = (int)c->n_out - 1;
    a.training = false;
    teexec_status *st = tx_te_cpu_forward(&a);
    if (st && !teexec_status_node(st))
        st = tx_status_with_node(tx_status_prefix(st, "node \"%s\"", c->node->label), c->node->label);
    return st;
}

tx_op_fn tx_cpu_te_op_find(const char *op_type, int64_t opset)
{
    if (opset > TX_TE_DOMAIN_VERSION) return NULL;
    return tx_te_schema_find(op_type) ? te_forward : NULL;
}

bool tx_te_slot_differentiable(const tx_ir_node *n, size_t slot)
{
    const tx_te_op_schema *s = tx_te_schema_find(n->op_type);
    if (!s) return false;
    if (slot == 0) return !(s->input.flags & TX_TE_PORT_NO_GRAD);
    if (slot <= (size_t)s->n_extra_inputs) return !(s->extra_inputs[slot - 1].flags & TX_TE_PORT_NO_GRAD);
    if (s->n_params == 0) return false;
    /* PER_GROUP ports repeat per group, grouped by port */
    for (int p = 0; p < s->n_params; p++)
        if (s->params[p].flags & TX_TE_PORT_NO_GRAD) return false;
    return true;
}

/* ---- backward ------------------------------------------------------------ */

static void release_all(tx_tensor *t, size_t n)
{
    for (size_t i = 0; i < n; i++) tx_tensor_release(&t[i]);
}

teexec_status *tx_te_bwd_rule(const tx_bwd_call *c)
{
    const tx_ir_node *n = c->node;
    te_node d;
    TX_TRY(te_decode(n, &d));
    const tx_te_op_schema *s = d.s;
    size_t ni = c->n_in, no = c->n_out;
    if (ni > 64 || no > 1 + TX_TE_MAX_EXTRA) return node_err(n, TEEXEC_ERR_LIMIT, "too many tensors");
    /* aux shapes from the registry's rule */
    tx_te_tinfo ti[64];
    const tx_te_tinfo *ptrs[64];
    for (size_t k = 0; k < ni; k++) {
        ptrs[k] = NULL;
        if (!c->in[k]) continue;
        ti[k].dtype = c->in[k]->dtype;
        ti[k].shape = tx_shape_of(c->in[k]);
        ptrs[k] = &ti[k];
    }
    tx_te_infer_in iin = {d.attrs, ptrs[0], ptrs + 1, s->n_extra_inputs, ptrs + d.first_param,
                          d.n_params};
    tx_te_infer_out iout;
    memset(&iout, 0, sizeof(iout));
    TX_TRY(tx_te_infer(s, &iin, &iout));

    /* scratch: recomputed outputs and aux, grads of inputs */
    tx_tensor outs[1 + TX_TE_MAX_EXTRA], aux[TX_TE_MAX_EXTRA], gins[64];
    memset(outs, 0, sizeof(outs));
    memset(aux, 0, sizeof(aux));
    memset(gins, 0, sizeof(gins));
    tx_tensor *outp[1 + TX_TE_MAX_EXTRA] = {NULL}, *auxp[TX_TE_MAX_EXTRA] = {NULL};
    teexec_status *st = NULL;
    for (size_t j = 0; j < no && !st; j++) {
        if (!c->out[j]) continue;
        st = tx_tensor_alloc(&outs[j], c->out[j]->dtype, c->out[j]->rank, c->out[j]->dims);
        outp[j] = &outs[j];
    }
    for (int j = 0; j < s->n_aux && !st; j++) {
        st = tx_tensor_alloc(&aux[j], iout.aux[j].dtype, iout.aux[j].shape.rank, iout.aux[j].shape.dims);
        auxp[j] = &aux[j];
    }
    tx_te_fwd_args fa;
    memset(&fa, 0, sizeof(fa));
    fa.op = s->id;
    fa.attrs = d.attrs;
    fa.input = c->in[0];
    fa.extra_inputs = c->in + 1;
    fa.n_extra_inputs = s->n_extra_inputs;
    fa.params = c->in + d.first_param;
    fa.n_params = d.n_params;
    fa.output = outp[0];
    fa.extra_outputs = outp + 1;
    fa.n_extra_outputs = (int)no - 1;
    fa.aux = auxp;
    fa.n_aux = s->n_aux;
    fa.training = true;
    if (!st) st = tx_te_cpu_forward(&fa);

    const tx_tensor *saved[TX_TE_MAX_SAVED + 64];
    int n_saved = 0;
    if (!st) st = tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(d.n_params), &n_saved);

    /* dy and grads of extra outputs, as double tensors over the trainer's buffers */
    tx_tensor gouts[1 + TX_TE_MAX_EXTRA];
    const tx_tensor *goutp[1 + TX_TE_MAX_EXTRA] = {NULL};
    double *zero = NULL;
    memset(gouts, 0, sizeof(gouts));
    for (size_t j = 0; j < no && !st; j++) {
        if (!c->out[j]) continue;
        double *g = (double *)c->gout[j];
        if (!g && j == 0) {
            zero = calloc((size_t)(c->out[0]->numel ? c->out[0]->numel : 1), sizeof(double));
            if (!zero) st = tx_oom();
            g = zero;
        }
        if (!g || st) continue;
        st = tx_tensor_wrap(&gouts[j], TEEXEC_DTYPE_DOUBLE, c->out[j]->rank, c->out[j]->dims, g);
        goutp[j] = &gouts[j];
    }
    tx_tensor *ginp[64] = {NULL};
    for (size_t k = 0; k < ni && !st; k++) {
        if (!c->gin[k] || !c->in[k]) continue;
        st = tx_tensor_alloc(&gins[k], TEEXEC_DTYPE_DOUBLE, c->in[k]->rank, c->in[k]->dims);
        ginp[k] = &gins[k];
    }
    if (!st) {
        tx_te_bwd_args ba;
        memset(&ba, 0, sizeof(ba));
        ba.op = s->id;
        ba.attrs = d.attrs;
        ba.grad_output = goutp[0];
        ba.grad_extra_outputs = goutp + 1;
        ba.n_grad_extra_outputs = s->n_extra_outputs;
        ba.saved = saved;
        ba.n_saved = n_saved;
        ba.grad_input = ginp[0];
        ba.grad_extra_inputs = ginp + 1;
        ba.n_grad_extra_inputs = s->n_extra_inputs;
        ba.grad_params = ginp + d.first_param;
        ba.n_grad_params = d.n_params;
        st = tx_te_cpu_backward(&ba);
    }
    for (size_t k = 0; k < ni && !st; k++) {
        if (!ginp[k]) continue;
        const double *g = ginp[k]->data;
        for (uint64_t e = 0; e < ginp[k]->numel; e++) c->gin[k][e] += g[e];
    }
    free(zero);
    release_all(outs, 1 + TX_TE_MAX_EXTRA);
    release_all(aux, TX_TE_MAX_EXTRA);
    release_all(gins, ni);
    if (st && !teexec_status_node(st))
        st = tx_status_with_node(tx_status_prefix(st, "node \"%s\" backward", n->label), n->label);
    return st;
}
