/*
 * te_registry.c - the CPU backend's table of TE op implementations (indexed
 * by tx_te_op_id, parallel to format/te_schema.c's table; activations by
 * their class), the generic
 * setup_context step, and the checked entry points (te_args.h).
 */
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#define IMPL(name) {tx_te_cpu_##name##_fwd, tx_te_cpu_##name##_bwd}

static const tx_te_cpu_impl impls[TX_TE_OP_COUNT] = {
    [TX_TE_LINEAR] = IMPL(linear),
    [TX_TE_BIAS] = IMPL(bias),
    [TX_TE_LAYER_NORM] = IMPL(layer_norm),
    [TX_TE_RMS_NORM] = IMPL(rms_norm),
    [TX_TE_L2_NORMALIZATION] = IMPL(l2_normalization),
    [TX_TE_DROPOUT] = IMPL(dropout),
    [TX_TE_QUANTIZE] = IMPL(passthrough),
    [TX_TE_RESHAPE] = IMPL(reshape),
    [TX_TE_IDENTITY] = IMPL(passthrough),
    [TX_TE_CONSTANT_SCALE] = IMPL(constant_scale),
    [TX_TE_ADD_EXTRA_INPUT] = IMPL(add_extra_input),
    [TX_TE_MAKE_EXTRA_OUTPUT] = IMPL(make_extra_output),
    [TX_TE_GROUPED_LINEAR] = IMPL(grouped_linear),
    [TX_TE_DOT_PRODUCT_ATTENTION] = IMPL(attention),
    [TX_TE_ROTARY_EMBEDDING] = IMPL(rope),
    [TX_TE_EMBEDDING] = IMPL(embedding),
    [TX_TE_ALL_GATHER] = IMPL(collective),
    [TX_TE_ALL_REDUCE] = IMPL(collective),
    [TX_TE_REDUCE_SCATTER] = IMPL(collective),
};

/* Every activation (the schema's class bit) runs te_activation.c, which
 * reads the rest of its description from the schema too. */
static const tx_te_cpu_impl activation_impl = IMPL(activation);

const tx_te_cpu_impl *tx_te_cpu_impl_of(tx_te_op_id op)
{
    if ((int)op < 0 || op >= TX_TE_OP_COUNT) return NULL;
    if (tx_te_op_is(op, TX_TE_CLASS_ACTIVATION)) return &activation_impl;
    return &impls[op];
}

teexec_status *tx_te_setup_context(const tx_te_fwd_args *a, unsigned needs,
                                   const tx_tensor **saved, int cap, int *n_saved)
{
    *n_saved = 0;
    const tx_te_op_schema *s = tx_te_schema(a->op);
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops: unknown op id %d", (int)a->op);
    int n = 0;
    for (int i = 0; i < s->n_saved; i++) {
        const tx_te_saved_schema *e = &s->saved[i];
        bool keep = (e->needed_for & needs) != 0;
        int count = e->src == TX_TE_SRC_PARAMS_ALL ? a->n_params : 1;
        if (n + count > cap)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: setup_context needs room for more than %d entries",
                            s->name, cap);
        for (int c = 0; c < count; c++) {
            const tx_tensor *t = NULL;
            switch (e->src) {
            case TX_TE_SRC_INPUT: t = a->input; break;
            case TX_TE_SRC_EXTRA_INPUT:
                t = e->index < a->n_extra_inputs ? a->extra_inputs[e->index] : NULL;
                break;
            case TX_TE_SRC_PARAM: t = e->index < a->n_params ? a->params[e->index] : NULL; break;
            case TX_TE_SRC_PARAMS_ALL: t = a->params[c]; break;
            case TX_TE_SRC_OUTPUT: t = a->output; break;
            case TX_TE_SRC_AUX:
                t = a->aux && e->index < a->n_aux ? a->aux[e->index] : NULL;
                if (keep && !t)
                    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                    "te.ops %s: the forward wrote no '%s' (aux %d): run it with "
                                    "training set and its aux tensors", s->name, e->name, e->index);
                break;
            }
            saved[n++] = keep ? t : NULL;
        }
    }
    *n_saved = n;
    return NULL;
}

static teexec_status *check_counts(const tx_te_op_schema *s, const tx_te_attr_value *attrs,
                                   int n_extra_in, int n_params, int n_extra_out)
{
    int np;
    TX_TRY(tx_te_param_count(s, attrs, &np));
    if (n_extra_in != s->n_extra_inputs || n_params != np || n_extra_out != s->n_extra_outputs)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: expected %d extra input(s), %d parameter(s), %d extra "
                        "output(s); got %d, %d, %d", s->name, s->n_extra_inputs, np,
                        s->n_extra_outputs, n_extra_in, n_params, n_extra_out);
    return NULL;
}

static teexec_status *check_attrs(const tx_te_op_schema *s, const tx_te_attr_value *attrs)
{
    if (s->n_attrs && !attrs)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: attributes are missing", s->name);
    for (int i = 0; i < s->n_attrs; i++) {
        const tx_te_attr_schema *as = &s->attrs[i];
        char buf[32];
        if (as->type == TX_TE_ATTR_ENUM && !tx_te_attr_enum_name(as, attrs[i].i, buf, sizeof buf)[0])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: attribute %s=%lld is not one of %s", s->name, as->name,
                            (long long)attrs[i].i, as->choices);
        if (as->type == TX_TE_ATTR_INTS && attrs[i].n_ints > 0 && !attrs[i].ints)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: attribute %s has no values",
                            s->name, as->name);
    }
    return NULL;
}

teexec_status *tx_te_cpu_forward(const tx_te_fwd_args *a)
{
    const tx_te_op_schema *s = a ? tx_te_schema(a->op) : NULL;
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops: bad forward arguments");
    TX_TRY(check_attrs(s, a->attrs));
    TX_TRY(check_counts(s, a->attrs, a->n_extra_inputs, a->n_params, a->n_extra_outputs));
    if (!a->input || !a->output || (a->n_extra_inputs && !a->extra_inputs) ||
        (a->n_params && !a->params) || (a->n_extra_outputs && !a->extra_outputs) ||
        (a->n_aux && !a->aux))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: input, output or a tensor list is missing", s->name);
    for (int i = 0; i < s->n_extra_inputs; i++)
        if (!a->extra_inputs[i] && !(s->extra_inputs[i].flags & TX_TE_PORT_OPTIONAL))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: extra input '%s' is missing",
                            s->name, s->extra_inputs[i].name);
    for (int i = 0; i < a->n_params; i++)
        if (!a->params[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: parameter %d is missing",
                            s->name, i);
    return tx_te_cpu_impl_of(a->op)->forward(a);
}

teexec_status *tx_te_cpu_backward(const tx_te_bwd_args *a)
{
    const tx_te_op_schema *s = a ? tx_te_schema(a->op) : NULL;
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops: bad backward arguments");
    TX_TRY(check_attrs(s, a->attrs));
    if (!a->grad_output || (a->n_saved && !a->saved) || (a->n_grad_params && !a->grad_params) ||
        (a->n_grad_extra_inputs && !a->grad_extra_inputs) ||
        (a->n_grad_extra_outputs && !a->grad_extra_outputs))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: dy or a tensor list is missing", s->name);
    int np;
    TX_TRY(tx_te_param_count(s, a->attrs, &np));
    if ((a->n_grad_params != 0 && a->n_grad_params != np) ||
        (a->n_grad_extra_inputs != 0 && a->n_grad_extra_inputs != s->n_extra_inputs) ||
        (a->n_grad_extra_outputs != 0 && a->n_grad_extra_outputs != s->n_extra_outputs))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: gradient lists must be empty or have one slot per parameter "
                        "(%d), extra input (%d) and extra output (%d)", s->name, np,
                        s->n_extra_inputs, s->n_extra_outputs);
    for (int i = 0; i < a->n_grad_extra_inputs; i++)
        if (a->grad_extra_inputs[i] && (s->extra_inputs[i].flags & TX_TE_PORT_NO_GRAD))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: extra input '%s' has no gradient", s->name,
                            s->extra_inputs[i].name);
    return tx_te_cpu_impl_of(a->op)->backward(a);
}
