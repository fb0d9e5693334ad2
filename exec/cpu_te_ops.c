/* cpu_te_ops.c - te.ops nodes on the CPU: attributes from the IR, shape
 * inference through the registry, forward and backward through the
 * registry's CPU implementations. */
#include "exec/cpu_te_ops.h"

#include "format/te_schema.h"
#include "kernels/cpu/te_args.h"

#include <stdlib.h>
#include <string.h>

/* Node reading (tx_te_node_read), inference and the domain test live in
 * import/shape_infer_te.c: every layer decodes a te.ops node the same way. */

static teexec_status *node_err(const tx_ir_node *n, teexec_code code, const char *msg)
{
    return tx_status_with_node(tx_error(code, "node \"%s\" (te.ops %s): %s", n->label, n->op_type, msg),
                               n->label);
}

/* Copies the node's n_in tensors into buf (n_slots entries): omitted
 * trailing inputs become NULL, the registry's "absent". */
static void pad_inputs(const tx_te_node *d, size_t n_in, const tx_tensor *const *in, const tx_tensor **buf)
{
    for (size_t k = 0; k < d->n_slots; k++) buf[k] = k < n_in ? in[k] : NULL;
}

/* The registry's shape rule over actual tensors (in: n_slots entries). */
static teexec_status *infer_tensors(const tx_te_node *d, const tx_tensor *const *in, tx_te_infer_out *out)
{
    tx_te_tinfo ti[TX_TE_MAX_SLOTS];
    const tx_te_tinfo *ptrs[TX_TE_MAX_SLOTS];
    for (size_t k = 0; k < d->n_slots; k++) {
        ptrs[k] = NULL;
        if (!in[k]) continue;
        ti[k].dtype = in[k]->dtype;
        ti[k].shape = tx_shape_of(in[k]);
        ptrs[k] = &ti[k];
    }
    tx_te_infer_in iin = {d->attrs, ptrs[0], ptrs + 1, d->s->n_extra_inputs, ptrs + d->first_param,
                          d->n_params};
    memset(out, 0, sizeof(*out));
    return tx_te_infer(d->s, &iin, out);
}

static void fill_fwd(const tx_te_node *d, const tx_tensor *const *in, size_t n_out,
                     tx_tensor *const *out, tx_te_fwd_args *a)
{
    memset(a, 0, sizeof(*a));
    a->op = d->s->id;
    a->attrs = d->attrs;
    a->input = in[0];
    a->extra_inputs = in + 1;
    a->n_extra_inputs = d->s->n_extra_inputs;
    a->params = in + d->first_param;
    a->n_params = d->n_params;
    a->output = out[0];
    a->extra_outputs = out + 1;
    a->n_extra_outputs = (int)n_out - 1;
}

static teexec_status *with_node(const tx_ir_node *n, teexec_status *st, const char *what)
{
    if (st && !teexec_status_node(st))
        st = tx_status_with_node(tx_status_prefix(st, "node \"%s\"%s", n->label, what), n->label);
    return st;
}

teexec_status *tx_exec_infer_node(const tx_ir_node *node, const tx_onnx_file *file,
                                  const tx_infer_value *const *inputs, tx_infer_value *outputs)
{
    return tx_infer_node_any(node, file, inputs, outputs);
}

/* ---- forward ------------------------------------------------------------- */

/* Inference semantics: sessions run this (Dropout is the identity). */
static teexec_status *te_forward(const tx_op_call *c)
{
    tx_te_node d;
    TX_TRY(tx_te_node_read(c->node, &d));
    const tx_tensor *in[TX_TE_MAX_SLOTS];
    pad_inputs(&d, c->n_in, c->in, in);
    tx_te_fwd_args a;
    fill_fwd(&d, in, c->n_out, c->out, &a);
    a.training = false;
    return with_node(c->node, tx_te_cpu_forward(&a), "");
}

teexec_status *tx_te_forward_train(const tx_op_call *c, uint64_t rng_offset, tx_tensor *aux,
                                   int *n_aux)
{
    *n_aux = 0;
    tx_te_node d;
    TX_TRY(tx_te_node_read(c->node, &d));
    const tx_tensor *in[TX_TE_MAX_SLOTS];
    pad_inputs(&d, c->n_in, c->in, in);
    tx_te_infer_out iout;
    TX_TRY(with_node(c->node, infer_tensors(&d, in, &iout), ""));
    tx_tensor *auxp[TX_TE_MAX_EXTRA] = {NULL};
    teexec_status *st = NULL;
    for (int j = 0; j < d.s->n_aux && !st; j++) {
        memset(&aux[j], 0, sizeof(aux[j]));
        st = tx_tensor_alloc(&aux[j], iout.aux[j].dtype, iout.aux[j].shape.rank,
                             iout.aux[j].shape.dims);
        auxp[j] = &aux[j];
        *n_aux = j + 1;
    }
    if (!st) {
        tx_te_fwd_args a;
        fill_fwd(&d, in, c->n_out, c->out, &a);
        a.aux = auxp;
        a.n_aux = d.s->n_aux;
        a.training = true;
        a.rng_offset = rng_offset;
        st = tx_te_cpu_forward(&a);
    }
    if (st) {
        for (int j = 0; j < *n_aux; j++) tx_tensor_release(&aux[j]);
        *n_aux = 0;
    }
    return with_node(c->node, st, "");
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
    tx_te_node d;
    TX_TRY(tx_te_node_read(n, &d));
    const tx_te_op_schema *s = d.s;
    size_t ni = c->n_in, no = c->n_out;
    if (ni > TX_TE_MAX_SLOTS || no > 1 + TX_TE_MAX_EXTRA)
        return node_err(n, TEEXEC_ERR_LIMIT, "too many tensors");
    if (c->aux && c->n_aux != s->n_aux)
        return node_err(n, TEEXEC_ERR_INTERNAL, "the saved aux tensors do not match the op");
    const tx_tensor *in[TX_TE_MAX_SLOTS];
    pad_inputs(&d, ni, c->in, in);

    /* scratch: recomputed outputs and aux, grads of inputs */
    tx_tensor outs[1 + TX_TE_MAX_EXTRA], aux[TX_TE_MAX_EXTRA], gins[TX_TE_MAX_SLOTS];
    memset(outs, 0, sizeof(outs));
    memset(aux, 0, sizeof(aux));
    memset(gins, 0, sizeof(gins));
    tx_tensor *outp[1 + TX_TE_MAX_EXTRA] = {NULL}, *auxp[TX_TE_MAX_EXTRA] = {NULL};
    teexec_status *st = NULL;
    tx_te_fwd_args fa;
    if (c->aux) {
        /* The forward's own saved context (the trainer keeps it): the
         * Dropout mask is the one the forward applied. setup_context only
         * reads the output, so lending the const forward output is safe. */
        for (size_t j = 0; j < no; j++) outp[j] = (tx_tensor *)c->out[j];
        for (int j = 0; j < s->n_aux; j++) auxp[j] = (tx_tensor *)c->aux[j];
        fill_fwd(&d, in, no, outp, &fa);
        fa.aux = auxp;
        fa.n_aux = s->n_aux;
        fa.training = true;
        fa.rng_offset = c->rng_offset;
    } else {
        /* No saved context: run the forward again in training mode, with
         * the caller's rng offset so Dropout redraws the same mask. */
        tx_te_infer_out iout;
        st = infer_tensors(&d, in, &iout);
        for (size_t j = 0; j < no && !st; j++) {
            if (!c->out[j]) continue;
            st = tx_tensor_alloc(&outs[j], c->out[j]->dtype, c->out[j]->rank, c->out[j]->dims);
            outp[j] = &outs[j];
        }
        for (int j = 0; j < s->n_aux && !st; j++) {
            st = tx_tensor_alloc(&aux[j], iout.aux[j].dtype, iout.aux[j].shape.rank,
                                 iout.aux[j].shape.dims);
            auxp[j] = &aux[j];
        }
        fill_fwd(&d, in, no, outp, &fa);
        fa.aux = auxp;
        fa.n_aux = s->n_aux;
        fa.training = true;
        fa.rng_offset = c->rng_offset;
        if (!st) st = tx_te_cpu_forward(&fa);
    }

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
    tx_tensor *ginp[TX_TE_MAX_SLOTS] = {NULL};
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
    return with_node(n, st, " backward");
}
