/* value_plan.c - the values of a plan (value_plan.h): the planner made once
 * per model (inputs, decoded initializers, CPU kernels for folding) and
 * the per-signature inference and folding. */
#include "exec/value_plan.h"

#include "base/dtype.h"

#include "exec/cpu_ops.h"
#include "exec/cpu_te_ops.h"
#include "format/tensor_proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the planner ------------------------------------------------------- */

/* The graph inputs the caller feeds, in inputs_of's order; every graph
 * input and output a tensor. */
static teexec_status *index_io(tx_value_planner *vp, const teexec_model *inputs_of)
{
    const tx_ir_graph *g = vp->g;
    vp->n_in = inputs_of->n_inputs;
    vp->in_vals = calloc(vp->n_in ? vp->n_in : 1, sizeof(*vp->in_vals));
    if (!vp->in_vals) return tx_oom();
    for (size_t i = 0; i < vp->n_in; i++) {
        const char *name = inputs_of->inputs[i].name;
        int32_t v = tx_ir_graph_find_value(g, name);
        if (v < 0) return tx_error(TEEXEC_ERR_INTERNAL, "graph input \"%s\" not found", name);
        if (g->values[v].kind != TX_IR_KIND_TENSOR)
            return tx_status_new(TEEXEC_ERR_UNSUPPORTED, vp->file, NULL,
                                 "graph input \"%s\" is not a tensor (sequences, optionals and "
                                 "maps are not supported)", name);
        vp->in_vals[i] = v;
    }
    for (size_t i = 0; i < g->n_outputs; i++)
        if (g->values[g->outputs[i]].kind != TX_IR_KIND_TENSOR &&
            g->values[g->outputs[i]].kind != TX_IR_KIND_UNKNOWN)
            return tx_status_new(TEEXEC_ERR_UNSUPPORTED, vp->file, NULL,
                                 "graph output \"%s\" is not a tensor",
                                 g->values[g->outputs[i]].name);
    return NULL;
}

/* The CPU kernel of every node, NULL where the CPU has none (such a node
 * is never folded; whoever runs it resolves it), and the scratch sized for
 * the widest node. */
static teexec_status *resolve_fold_kernels(tx_value_planner *vp)
{
    const tx_ir_graph *g = vp->g;
    vp->fold_fns = calloc(g->n_nodes ? g->n_nodes : 1, sizeof(*vp->fold_fns));
    if (!vp->fold_fns) return tx_oom();
    size_t max_in = 0, max_out = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const tx_ir_node *n = &g->nodes[i];
        /* the CPU backend's resolution (exec/backend_cpu.c), as a CPU
         * session resolves the node; a model-local function runs nowhere */
        vp->fold_fns[i] = n->function >= 0 ? NULL : tx_cpu_op_find(n->domain, n->op_type, n->opset);
        if (n->n_inputs > max_in) max_in = n->n_inputs;
        if (n->n_outputs > max_out) max_out = n->n_outputs;
    }
    size_t mi = max_in + 1, mo = max_out + 1;
    vp->sc_pins = calloc(mi, sizeof(*vp->sc_pins));
    vp->sc_ins = calloc(mi, sizeof(*vp->sc_ins));
    vp->sc_outs = calloc(mo, sizeof(*vp->sc_outs));
    vp->sc_fold_outs = calloc(mo, sizeof(*vp->sc_fold_outs));
    if (!vp->sc_pins || !vp->sc_ins || !vp->sc_outs || !vp->sc_fold_outs) return tx_oom();
    return NULL;
}

/* A weight TX_VP_DEFER_WEIGHTS leaves undecoded: a big float initializer
 * whose IR type is its own (not a graph input's declaration). */
static bool deferrable(const tx_ir_value *val)
{
    int dt = 0;
    uint64_t elements = 0, bytes = 0;
    if (!(val->flags & TX_IR_VALUE_INITIALIZER) || (val->flags & TX_IR_VALUE_GRAPH_INPUT) ||
        !val->initializer || !tx_ir_initializer_size(val, &dt, &elements, &bytes))
        return false;
    return tx_dtype_is_real((teexec_dtype)dt) && (teexec_dtype)dt == val->dtype &&
           elements > TX_FOLD_MAX_ELEMENTS && val->rank >= 0 && val->rank <= TX_MAX_RANK;
}

/* vp->init[v] as the header of deferred weight v: dtype and shape, no data. */
static teexec_status *weight_header(tx_value_planner *vp, const tx_ir_value *val, size_t v)
{
    char probe;
    TX_TRY(tx_tensor_wrap(&vp->init[v], val->dtype, val->rank, val->dims, &probe));
    vp->init[v].data = NULL;
    vp->init[v].owns_data = false;
    vp->deferred[v] = true;
    return NULL;
}

static teexec_status *decode_initializers(tx_value_planner *vp, unsigned flags)
{
    const tx_ir_graph *g = vp->g;
    vp->init = calloc(g->n_values ? g->n_values : 1, sizeof(*vp->init));
    vp->deferred = calloc(g->n_values ? g->n_values : 1, sizeof(*vp->deferred));
    if (!vp->init || !vp->deferred) return tx_oom();
    for (size_t v = 0; v < g->n_values; v++) {
        const tx_ir_value *val = &g->values[v];
        if (val->flags & TX_IR_VALUE_SPARSE_INIT)
            return tx_status_new(TEEXEC_ERR_UNSUPPORTED, vp->file, NULL,
                                 "sparse initializer \"%s\" is not supported", val->name);
        if (!(val->flags & TX_IR_VALUE_INITIALIZER) || !val->initializer) continue;
        if ((flags & TX_VP_DEFER_WEIGHTS) && deferrable(val)) {
            TX_TRY(weight_header(vp, val, v));
            continue;
        }
        TX_TRY(tx_status_with_file(tx_tensor_from_proto(val->initializer, vp->model->file,
                                                        &vp->init[v]),
                                   vp->file));
        if (vp->init[v].dtype == TEEXEC_DTYPE_STRING)
            return tx_status_new(TEEXEC_ERR_UNSUPPORTED, vp->file, NULL,
                                 "string initializer \"%s\" is not supported", val->name);
    }
    return NULL;
}

bool tx_value_planner_is_deferred(const tx_value_planner *vp, int32_t v)
{
    return vp && v >= 0 && (size_t)v < vp->g->n_values && vp->deferred[v] && !vp->init[v].data;
}

teexec_status *tx_value_planner_load(tx_value_planner *vp, int32_t v)
{
    if (!tx_value_planner_is_deferred(vp, v)) return NULL;
    const tx_ir_value *val = &vp->g->values[v];
    tx_tensor t;
    TX_TRY(tx_status_with_file(tx_tensor_from_proto(val->initializer, vp->model->file, &t),
                               vp->file));
    const tx_tensor *h = &vp->init[v];
    bool same = t.dtype == h->dtype && t.rank == h->rank;
    for (int32_t d = 0; same && d < t.rank; d++) same = t.dims[d] == h->dims[d];
    if (!same) {
        tx_tensor_release(&t);
        return tx_status_new(TEEXEC_ERR_BAD_MODEL, vp->file, NULL,
                             "initializer \"%s\" decodes to another dtype or shape than it "
                             "declares", val->name);
    }
    vp->init[v] = t;
    return NULL;
}

teexec_status *tx_value_planner_create(const teexec_model *model, const teexec_model *inputs_of,
                                       unsigned flags, tx_value_planner **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!model || !model->ir || !inputs_of)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no model to plan");
    tx_value_planner *vp = calloc(1, sizeof(*vp));
    if (!vp) return tx_oom();
    vp->model = model;
    vp->g = model->ir->graph;
    vp->file = inputs_of->file ? inputs_of->file->path : NULL;
    teexec_status *st = index_io(vp, inputs_of);
    if (!st) st = resolve_fold_kernels(vp);
    if (!st) st = decode_initializers(vp, flags);
    if (st) {
        tx_value_planner_destroy(vp);
        return st;
    }
    *out = vp;
    return NULL;
}

void tx_value_planner_destroy(tx_value_planner *vp)
{
    if (!vp) return;
    if (vp->init)
        for (size_t v = 0; v < vp->g->n_values; v++) tx_tensor_release(&vp->init[v]);
    free(vp->init);
    free(vp->deferred);
    free(vp->in_vals);
    free(vp->fold_fns);
    free(vp->sc_pins);
    free(vp->sc_ins);
    free(vp->sc_outs);
    free(vp->sc_fold_outs);
    free(vp);
}

/* ---- plans ------------------------------------------------------------- */

void tx_value_plan_clear(tx_value_plan *p)
{
    if (!p) return;
    if (p->vals)
        for (size_t v = 0; v < p->n_vals; v++) tx_infer_value_clear(&p->vals[v]);
    free(p->vals);
    free(p->skip);
    memset(p, 0, sizeof(*p));
}

/* Stores an inferred output into the plan's value table, keeping an owned
 * value's pointer pointing at its new home. */
static void move_value(tx_infer_value *dst, tx_infer_value *src)
{
    bool own = src->value == &src->owned;
    *dst = *src;
    if (own) dst->value = &dst->owned;
    memset(src, 0, sizeof(*src));
}

/* Runs one node on host tensors now (folding); its outputs' dtypes and
 * shapes are already in the plan. */
static teexec_status *fold_node(tx_value_planner *vp, const tx_ir_node *n, tx_value_plan *p,
                                const tx_tensor **ins)
{
    tx_tensor **outs = vp->sc_fold_outs;
    for (size_t j = 0; j < n->n_outputs; j++) {
        outs[j] = NULL;
        int32_t o = n->outputs[j];
        if (o < 0) continue;
        tx_infer_value *ov = &p->vals[o];
        TX_TRY(tx_tensor_alloc(&ov->owned, ov->dtype, ov->shape.rank, ov->shape.dims));
        outs[j] = &ov->owned;
    }
    tx_op_call call = {.node = n, .file = vp->model->file, .n_in = n->n_inputs, .in = ins,
                       .n_out = n->n_outputs, .out = outs};
    TX_TRY(vp->fold_fns[n->index](&call));
    for (size_t j = 0; j < n->n_outputs; j++)
        if (outs[j]) p->vals[n->outputs[j]].value = outs[j];
    return NULL;
}

/* A float initializer: possibly a trainable parameter, never folded
 * through. */
static bool is_float_initializer(const tx_value_planner *vp, int32_t v)
{
    const tx_tensor *t = &vp->init[v];
    return (vp->g->values[v].flags & TX_IR_VALUE_INITIALIZER) && (t->data || vp->deferred[v]) &&
           tx_dtype_is_real(t->dtype);
}

/* Types node n's outputs and folds it where the rule allows (value_plan.h). */
static teexec_status *plan_node(tx_value_planner *vp, size_t i, tx_value_plan *p)
{
    const tx_ir_node *n = &vp->g->nodes[i];
    const tx_infer_value **pins = vp->sc_pins;
    const tx_tensor **tins = vp->sc_ins;
    tx_infer_value *outs = vp->sc_outs;
    bool all_values = true, reads_weight = false;
    for (size_t k = 0; k < n->n_inputs; k++) {
        int32_t v = n->inputs[k];
        pins[k] = v >= 0 ? &p->vals[v] : NULL;
        tins[k] = v >= 0 ? p->vals[v].value : NULL;
        if (v >= 0 && !p->vals[v].value) all_values = false;
        if (v >= 0 && is_float_initializer(vp, v)) reads_weight = true;
    }
    memset(outs, 0, n->n_outputs * sizeof(outs[0]));
    teexec_status *st = tx_exec_infer_node(n, vp->model->file, pins, outs);
    if (st) {
        for (size_t j = 0; j < n->n_outputs; j++) tx_infer_value_clear(&outs[j]);
        return st;
    }
    bool all_out_values = true, all_shapes = true;
    uint64_t total = 0;
    for (size_t j = 0; j < n->n_outputs; j++) {
        if (!outs[j].value) all_out_values = false;
        if (!outs[j].shape_known) {
            all_shapes = false;
        } else {
            uint64_t ne;
            if (tx_shape_numel(&outs[j].shape, &ne) == NULL) total += ne;
            else total = UINT64_MAX;
        }
        int32_t o = n->outputs[j];
        if (o >= 0) move_value(&p->vals[o], &outs[j]);
        else tx_infer_value_clear(&outs[j]);
    }
    if (all_out_values) {
        p->skip[i] = true;
    } else if (all_values && all_shapes && !reads_weight && total <= TX_FOLD_MAX_ELEMENTS &&
               vp->fold_fns[i]) {
        TX_TRY(fold_node(vp, n, p, tins));
        p->skip[i] = true;
    }
    return NULL;
}

teexec_status *tx_value_plan_build(tx_value_planner *vp, const teexec_dtype *dts,
                                   const tx_shape *shapes, tx_value_plan *out)
{
    memset(out, 0, sizeof(*out));
    const tx_ir_graph *g = vp->g;
    tx_value_plan p = {0};
    p.n_vals = g->n_values;
    p.vals = calloc(g->n_values ? g->n_values : 1, sizeof(*p.vals));
    p.skip = calloc(g->n_nodes ? g->n_nodes : 1, sizeof(*p.skip));
    if (!p.vals || !p.skip) {
        tx_value_plan_clear(&p);
        return tx_oom();
    }
    for (size_t i = 0; i < vp->n_in; i++) {
        tx_infer_value *iv = &p.vals[vp->in_vals[i]];
        iv->dtype = dts[i];
        iv->shape = shapes[i];
        iv->shape_known = true;
    }
    for (size_t v = 0; v < g->n_values; v++) {
        if (!vp->init[v].data && !vp->deferred[v]) continue;
        tx_infer_value *iv = &p.vals[v];
        iv->dtype = vp->init[v].dtype;
        iv->shape = tx_shape_of(&vp->init[v]);
        iv->shape_known = true;
        /* a deferred weight's value is unknown to the plan: never folded,
         * read by the executor through tx_value_planner_load */
        iv->value = vp->init[v].data ? &vp->init[v] : NULL;
    }
    teexec_status *st = NULL;
    for (size_t i = 0; i < g->n_nodes && !st; i++) st = plan_node(vp, i, &p);
    if (st) {
        tx_value_plan_clear(&p);
        return tx_status_with_file(st, vp->file);
    }
    *out = p;
    return NULL;
}
