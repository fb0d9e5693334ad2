/* chain_from_model.c - a lowered single-chain model onto the GPU
 * (chain_from_model.h). */
#include "exec/cuda/chain_from_model.h"

#include "exec/cpu_te_ops.h"
#include "format/tensor_proto.h"

#include <stdlib.h>
#include <string.h>

static teexec_status *node_unsupported(const tx_ir_node *n, const char *why)
{
    return tx_status_new(TEEXEC_ERR_UNSUPPORTED, NULL, n->label,
                         "node %s (%s): %s: the GPU runs a model as one chain of te.ops ops "
                         "for now", n->label, n->op_type, why);
}

teexec_status *tx_cuda_chain_from_model(const teexec_model *lowered,
                                        const tx_cuda_chain_config *cfg_in, void *stream,
                                        tx_cuda_chain **out)
{
    *out = NULL;
    const tx_ir_graph *g = lowered->ir->graph;
    int32_t in_val = -1;
    for (size_t i = 0; i < g->n_inputs; i++)
        if (!(g->values[g->inputs[i]].flags & TX_IR_VALUE_INITIALIZER)) {
            if (in_val >= 0)
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "GPU chain: the model must have one input");
            in_val = g->inputs[i];
        }
    if (in_val < 0 || g->n_outputs != 1 || g->n_nodes == 0)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "GPU chain: the model must have one input and one output");
    tx_cuda_chain_config cfg = *cfg_in;
    const tx_ir_value *iv = &g->values[in_val];
    if (cfg.rows <= 0 || cfg.in_width <= 0) {
        if (iv->rank < 1)
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "GPU chain: the input's shape is unknown");
        int64_t rows = 1;
        for (int32_t d = 0; d + 1 < iv->rank; d++) {
            if (iv->dims[d] < 0)
                return tx_error(TEEXEC_ERR_UNSUPPORTED,
                                "GPU chain: input dim %d is symbolic: give the rows", (int)d);
            rows *= iv->dims[d];
        }
        cfg.rows = rows;
        cfg.in_width = iv->dims[iv->rank - 1];
    }
    size_t n = g->n_nodes;
    tx_cuda_chain_op *ops = calloc(n, sizeof(*ops));
    tx_te_attr_value(*attrs)[TX_TE_MAX_ATTRS] = calloc(n, sizeof(*attrs));
    tx_tensor(*params)[2] = calloc(n, sizeof(*params));
    const tx_tensor *(*pptr)[2] = calloc(n, sizeof(*pptr));
    int32_t *op_of_node = malloc(n * sizeof(*op_of_node));
    teexec_status *st = ops && attrs && params && pptr && op_of_node ? NULL : tx_oom();
    int32_t main_val = in_val;
    int32_t n_ops = 0;
    for (size_t i = 0; !st && i < n; i++) {
        const tx_ir_node *nd = &g->nodes[i];
        /* a Constant nothing reads (left behind by a lowered pattern) */
        bool dead = strcmp(nd->op_type, "Constant") == 0 && nd->domain[0] == 0;
        for (size_t k = 0; dead && k < nd->n_outputs; k++)
            dead = nd->outputs[k] < 0 || g->values[nd->outputs[k]].n_consumers == 0;
        op_of_node[i] = -1;
        if (dead) continue;
        if (!tx_te_domain(nd->domain)) {
            st = node_unsupported(nd, "not a te.ops node");
            break;
        }
        if (nd->n_inputs < 1 || nd->inputs[0] != main_val) {
            st = node_unsupported(nd, "its main input is not the previous op's main output");
            break;
        }
        const tx_te_op_schema *s = NULL;
        int np = 0;
        st = tx_te_node_decode(nd, &s, attrs[n_ops], &np);
        if (st) break;
        ops[n_ops].op = s->id;
        ops[n_ops].name = nd->label;
        ops[n_ops].attrs = attrs[n_ops];
        ops[n_ops].extra_from = -1;
        if (np > 2) {
            st = node_unsupported(nd, "more than two parameters");
            break;
        }
        size_t first = 1 + (size_t)s->n_extra_inputs;
        for (int p = 0; !st && p < np; p++) {
            size_t slot = first + (size_t)p;
            int32_t v = slot < nd->n_inputs ? nd->inputs[slot] : -1;
            if (v < 0 || !(g->values[v].flags & TX_IR_VALUE_INITIALIZER)) {
                st = node_unsupported(nd, "a parameter is not an initializer");
                break;
            }
            st = tx_tensor_from_proto(g->values[v].initializer, lowered->file, &params[n_ops][p]);
            pptr[n_ops][p] = &params[n_ops][p];
        }
        if (st) break;
        ops[n_ops].params = pptr[n_ops];
        ops[n_ops].n_params = np;
        if (s->id == TX_TE_ADD_EXTRA_INPUT) {
            int32_t ev = nd->n_inputs > 1 ? nd->inputs[1] : -1;
            int32_t prod = ev >= 0 ? g->values[ev].producer : -1;
            if (ev == in_val) {
                ops[n_ops].extra_from = -1;
            } else if (prod < 0 || strcmp(g->nodes[prod].op_type, "MakeExtraOutput") != 0 ||
                g->values[ev].producer_slot != 1) {
                st = node_unsupported(nd, "its extra input is neither the model input nor a "
                                          "MakeExtraOutput's extra output");
                break;
            } else {
                ops[n_ops].extra_from = op_of_node[prod];
            }
        }
        if (nd->n_outputs < 1 || nd->outputs[0] < 0) {
            st = node_unsupported(nd, "no main output");
            break;
        }
        main_val = nd->outputs[0];
        op_of_node[i] = n_ops++;
    }
    if (!st && main_val != g->outputs[0])
        st = tx_error(TEEXEC_ERR_UNSUPPORTED, "GPU chain: the last op's output is not the model output");
    if (!st) st = tx_cuda_chain_create(ops, n_ops, &cfg, stream, out);
    if (params)
        for (size_t i = 0; i < n; i++) {
            tx_tensor_release(&params[i][0]);
            tx_tensor_release(&params[i][1]);
        }
    free(ops);
    free(attrs);
    free(params);
    free(pptr);
    free(op_of_node);
    return st;
}
