/* shape_infer_te.c - te.ops nodes read against their schema, and their
 * shape/type inference (shape_infer_te.h). */
#include "import/shape_infer_te.h"

#include <string.h>

bool tx_te_domain(const char *domain) { return domain && !strcmp(domain, TX_TE_DOMAIN); }

static teexec_status *node_err(const tx_ir_node *n, teexec_code code, const char *msg)
{
    return tx_status_with_node(tx_error(code, "node \"%s\" (te.ops %s): %s", n->label, n->op_type, msg),
                               n->label);
}

teexec_status *tx_te_node_read(const tx_ir_node *n, tx_te_node *d)
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
    d->n_slots = d->first_param + (size_t)d->n_params;
    if (n->n_inputs < 1 || n->inputs[0] < 0) return node_err(n, TEEXEC_ERR_BAD_MODEL, "needs its main input");
    if (d->n_slots > TX_TE_MAX_SLOTS) return node_err(n, TEEXEC_ERR_LIMIT, "too many inputs");
    if (n->n_inputs < d->n_slots && d->n_params == 0) {
        /* ONNX lets a node leave out trailing optional inputs. Only an op
         * without parameters can: otherwise the parameters' positions
         * would shift, so their slots must be written as "". */
        for (size_t k = n->n_inputs; k < d->n_slots; k++) {
            const tx_te_port *p = &s->extra_inputs[k - 1];
            if (!(p->flags & TX_TE_PORT_OPTIONAL))
                return tx_status_with_node(
                    tx_error(TEEXEC_ERR_BAD_MODEL,
                             "node \"%s\" (te.ops %s): has %zu inputs; its required extra input "
                             "'%s' (input %zu) is missing",
                             n->label, n->op_type, n->n_inputs, p->name, k),
                    n->label);
        }
    } else if (n->n_inputs != d->n_slots)
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

teexec_status *tx_te_node_decode(const tx_ir_node *n, const tx_te_op_schema **schema,
                                 tx_te_attr_value *attrs, int *n_params)
{
    tx_te_node d;
    TX_TRY(tx_te_node_read(n, &d));
    *schema = d.s;
    memcpy(attrs, d.attrs, sizeof d.attrs);
    *n_params = d.n_params;
    return NULL;
}

teexec_status *tx_te_infer_node(const tx_ir_node *n, const tx_infer_value *const *inputs,
                                tx_infer_value *outputs)
{
    tx_te_node d;
    TX_TRY(tx_te_node_read(n, &d));
    tx_te_tinfo ti[TX_TE_MAX_SLOTS];
    const tx_te_tinfo *ptrs[TX_TE_MAX_SLOTS];
    for (size_t k = 0; k < d.n_slots; k++) {
        const tx_infer_value *v = k < n->n_inputs ? inputs[k] : NULL;
        ptrs[k] = NULL;
        if (!v) continue;
        if (!v->shape_known) {
            /* Shapes stay unknown until the inputs' are, but the type is
             * known: every output is T, the first real-float input (the
             * trainer needs it to see that the node is differentiable). */
            for (size_t i = 0; i < n->n_inputs; i++) {
                if (inputs[i] && tx_dtype_is_real(inputs[i]->dtype)) {
                    for (size_t j = 0; j < n->n_outputs; j++) outputs[j].dtype = inputs[i]->dtype;
                    break;
                }
            }
            return NULL;
        }
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

teexec_status *tx_infer_node_any(const tx_ir_node *node, const tx_onnx_file *file,
                                 const tx_infer_value *const *inputs, tx_infer_value *outputs)
{
    if (tx_te_domain(node->domain)) return tx_te_infer_node(node, inputs, outputs);
    return tx_infer_node(node, file, inputs, outputs);
}
