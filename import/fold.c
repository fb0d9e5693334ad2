/*
 * fold.c - tx_fold (fold.h): one walk over the rewrite graph's IR view in
 * topological order that types every value (infer_graph.h's step) and
 * evaluates the constant nodes (const_eval.h), then the edits: results
 * that remaining nodes read become initializers, folded nodes go.
 */
#include "import/fold.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "import/const_eval.h"
#include "import/rewrite_view.h"
#include "import/shape_infer_te.h"

#include <stdlib.h>
#include <string.h>

/* One result to write back: an initializer (integer and bool results) or
 * a Constant node (float results: an initializer of a float type would be
 * taken for a parameter; see fold.h) under the value's name. */
typedef struct fold_out {
    char *name;
    size_t rw_node, slot; /* the folded node and output */
    tx_tensor t;
} fold_out;

typedef struct fold_ctx {
    tx_rw_view *v;
    tx_lower_report *report;
    bool *cst;        /* per value: a constant in fold.h's sense */
    uint32_t *uses;   /* per value: reads by live nodes (a node reading twice counts twice) */
    bool *out_of_graph; /* per value: a graph output */
    bool *folded;     /* per view node */
} fold_ctx;

static bool has_subgraph(const tx_ir_node *n)
{
    for (size_t a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].type == TX_IR_ATTR_GRAPH || n->attrs[a].type == TX_IR_ATTR_GRAPHS)
            return true;
    return false;
}

static bool is_op(const tx_ir_node *n, const char *op) { return !strcmp(n->op_type, op); }

/* Ops whose output is not a function of their inputs (a fresh draw per
 * call, or Dropout in training): never folded. */
static bool is_random(const tx_ir_node *n)
{
    static const char *const ops[] = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                      "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (is_op(n, ops[i])) return true;
    return false;
}

static teexec_status *note(fold_ctx *c, const tx_ir_node *n, const char *reason)
{
    return tx_lower_note_add(c->report, "ConstantFold", n->label, false, reason);
}

static uint64_t value_bytes(const tx_infer_value *iv)
{
    if (!iv->value) return 0;
    return iv->value->nbytes;
}

/* Whether every present input is a constant; Shape and Size need only
 * their input's (static) shape. */
static bool inputs_constant(const fold_ctx *c, const tx_ir_node *n)
{
    if (is_op(n, "Shape") || is_op(n, "Size"))
        return n->n_inputs >= 1 && n->inputs[0] >= 0 && c->v->vals[n->inputs[0]].shape_known;
    for (size_t k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && !c->cst[n->inputs[k]]) return false;
    return true;
}

/* Types node n and, when it is a candidate, evaluates it and decides. */
static teexec_status *visit(fold_ctx *c, size_t k)
{
    tx_rw_view *v = c->v;
    const tx_ir_node *n = &v->nodes[k];
    bool candidate = !n->domain[0] && !has_subgraph(n) && !is_op(n, "Constant") && !is_random(n) &&
                     n->n_outputs > 0 && inputs_constant(c, n);
    for (size_t j = 0; candidate && j < n->n_outputs; j++)
        if (n->outputs[j] < 0 || c->out_of_graph[n->outputs[j]]) candidate = false;
    if (is_op(n, "Constant") && !n->domain[0]) {
        TX_TRY(tx_infer_step(n, v->file, &(tx_infer_options){true, 0}, v->vals));
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0 && v->vals[n->outputs[j]].value) c->cst[n->outputs[j]] = true;
        return NULL;
    }
    if (!candidate) {
        /* typed only (small values still flow on for the shape rules) */
        tx_infer_options o = {true, TX_INFER_VALUE_MAX};
        return tx_infer_step(n, v->file, &o, v->vals);
    }

    /* the rule, then the evaluator, so a refusal has its reason */
    const tx_infer_value *pins[64];
    tx_infer_value outs[16];
    if (n->n_inputs > 64 || n->n_outputs > 16) {
        tx_infer_options o = {true, TX_INFER_VALUE_MAX};
        TX_TRY(tx_infer_step(n, v->file, &o, v->vals));
        return note(c, n, "it has too many inputs or outputs to fold");
    }
    for (size_t i = 0; i < n->n_inputs; i++)
        pins[i] = n->inputs[i] >= 0 ? &v->vals[n->inputs[i]] : NULL;
    memset(outs, 0, sizeof outs);
    teexec_status *st = tx_infer_node_any(n, v->file, pins, outs);
    const char *why = NULL;
    if (st) {
        teexec_code code = teexec_status_code(st);
        if (code == TEEXEC_ERR_NO_MEMORY) return st;
        /* the model's own error, reported where it is typed or run */
        teexec_status_destroy(st);
        for (size_t j = 0; j < n->n_outputs; j++) tx_infer_value_clear(&outs[j]);
        return note(c, n, code == TEEXEC_ERR_UNSUPPORTED
                              ? "the op has no shape rule here, so it is not evaluated at load"
                              : "its shape rule rejects its constant inputs");
    }
    uint64_t total = 0, out_bytes = 0;
    for (size_t j = 0; j < n->n_outputs && !why; j++) {
        uint64_t ne = 0;
        teexec_status *nst = outs[j].shape_known ? tx_shape_numel(&outs[j].shape, &ne) : NULL;
        if (!outs[j].shape_known || nst) {
            teexec_status_destroy(nst);
            why = "its output shape is not known";
            break;
        }
        int okb = 1;
        uint64_t b = tx_dtype_storage_bytes(outs[j].dtype, ne, &okb);
        total += ne;
        out_bytes += okb ? b : UINT64_MAX / 4;
    }
    bool evaluated = false;
    if (!why && total > TX_CE_MAX_ELEMENTS) why = "its result is over the evaluator's element bound";
    if (!why && total > TX_FOLD_SMALL_ELEMENTS) {
        /* big results only where they replace what they read */
        uint64_t freed = 0;
        for (size_t i = 0; i < n->n_inputs; i++) {
            int32_t id = n->inputs[i];
            if (id < 0 || c->out_of_graph[id]) continue;
            bool seen = false;
            for (size_t i2 = 0; i2 < i; i2++) seen |= n->inputs[i2] == id;
            size_t reads = 0;
            for (size_t i2 = 0; i2 < n->n_inputs; i2++) reads += n->inputs[i2] == id;
            if (!seen && c->uses[id] == reads) freed += value_bytes(&v->vals[id]);
        }
        if (is_op(n, "MatMul")) why = "a large MatMul is not folded at load";
        else if (out_bytes > freed)
            why = "its result is over the folding bound of 65536 elements and larger than the "
                  "constant inputs it replaces (folding would add memory)";
    }
    if (!why) {
        st = tx_ce_eval_node(n, v->file, pins, outs, &why);
        if (st) {
            for (size_t j = 0; j < n->n_outputs; j++) tx_infer_value_clear(&outs[j]);
            return st;
        }
        evaluated = !why;
    }
    for (size_t j = 0; j < n->n_outputs; j++) {
        int32_t id = n->outputs[j];
        if (id >= 0) {
            tx_infer_value_move(&v->vals[id], &outs[j]);
            if (evaluated) c->cst[id] = true;
        } else {
            tx_infer_value_clear(&outs[j]);
        }
    }
    if (evaluated) {
        c->folded[k] = true;
        return NULL;
    }
    return note(c, n, why ? why : "it was not evaluated");
}

static void outs_free(fold_out *o, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(o[i].name);
        tx_tensor_release(&o[i].t);
    }
    free(o);
}

/* Writes the results and removes the folded nodes: a folded node's first
 * float result takes its place as a Constant node, further float results
 * get Constant nodes of their own, integer and bool results become
 * initializers. */
static teexec_status *write_back(tx_rw_graph *g, fold_out *outs, size_t n_outs,
                                 const size_t *folded, size_t n_folded)
{
    for (size_t i = 0; i < n_outs; i++) {
        fold_out *o = &outs[i];
        if (!tx_dtype_is_float(o->t.dtype)) TX_TRY(tx_rw_set_initializer(g, o->name, &o->t));
    }
    for (size_t f = 0; f < n_folded; f++) {
        size_t rn = folded[f];
        bool in_place = false;
        for (size_t i = 0; i < n_outs; i++) {
            fold_out *o = &outs[i];
            if (o->rw_node != rn || !tx_dtype_is_float(o->t.dtype)) continue;
            if (!in_place) {
                /* (the node's output names are read before it changes) */
                TX_TRY(tx_rw_make_constant(g, rn, o->slot, &o->t));
                in_place = true;
                continue;
            }
            const char *nm = tx_rw_fresh_name(g, o->name);
            if (!nm) return tx_oom();
            size_t idx;
            const char *outn[1] = {o->name};
            TX_TRY(tx_rw_add_node(g, "Constant", "", nm, NULL, 0, outn, 1, &idx));
            TX_TRY(tx_rw_set_tensor(g, idx, "value", &o->t));
        }
        if (!in_place) tx_rw_remove_node(g, rn);
    }
    return NULL;
}

teexec_status *tx_fold(tx_rw_graph *g, tx_lower_report *report, size_t *n_folded)
{
    if (n_folded) *n_folded = 0;
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_fold: no graph");
    tx_rw_view *v = NULL;
    TX_TRY(tx_rw_view_build(g, &v));
    fold_ctx c = {v, report, NULL, NULL, NULL, NULL};
    size_t nv = v->n_values ? v->n_values : 1;
    c.cst = calloc(nv, sizeof *c.cst);
    c.uses = calloc(nv, sizeof *c.uses);
    c.out_of_graph = calloc(nv, sizeof *c.out_of_graph);
    c.folded = calloc(v->n_nodes ? v->n_nodes : 1, sizeof *c.folded);
    fold_out *outs = NULL;
    size_t n_outs = 0, *dead = NULL, n_dead = 0;
    teexec_status *st = NULL;
    if (!c.cst || !c.uses || !c.out_of_graph || !c.folded) st = tx_oom();
    for (size_t k = 0; !st && k < v->n_nodes; k++)
        for (size_t i = 0; i < v->nodes[k].n_inputs; i++)
            if (v->nodes[k].inputs[i] >= 0) c.uses[v->nodes[k].inputs[i]]++;
    for (size_t i = 0; !st && i < v->n_values; i++) {
        if (tx_rw_is_graph_output(g, v->names[i])) c.out_of_graph[i] = true;
        /* integer and bool initializers (not parameters, not inputs) */
        const tx_infer_value *iv = &v->vals[i];
        if (tx_rw_is_initializer(g, v->names[i]) && !tx_rw_is_graph_input(g, v->names[i]) &&
            !tx_dtype_is_float(iv->dtype) && iv->value)
            c.cst[i] = true;
    }
    /* a node outside the order (a cycle, an input nothing defines) makes
     * the graph malformed, which the loader reports: fold nothing */
    for (size_t k = 0; !st && !v->n_unordered && k < v->n_nodes; k++) st = visit(&c, k);

    /* what to write back: folded values a node that stays reads */
    bool *read_by_rest = st ? NULL : calloc(nv, sizeof *read_by_rest);
    if (!st && !read_by_rest) st = tx_oom();
    size_t n_fold = 0;
    for (size_t k = 0; !st && k < v->n_nodes; k++) {
        if (c.folded[k]) {
            n_fold++;
            continue;
        }
        for (size_t i = 0; i < v->nodes[k].n_inputs; i++)
            if (v->nodes[k].inputs[i] >= 0) read_by_rest[v->nodes[k].inputs[i]] = true;
    }
    if (!st && n_fold) {
        outs = calloc(v->n_values ? v->n_values : 1, sizeof *outs);
        dead = calloc(v->n_nodes ? v->n_nodes : 1, sizeof *dead);
        if (!outs || !dead) st = tx_oom();
    }
    size_t *folded_rw = NULL, n_fold_rw = 0;
    if (!st && n_fold) {
        folded_rw = calloc(n_fold, sizeof *folded_rw);
        if (!folded_rw) st = tx_oom();
    }
    for (size_t k = 0; !st && n_fold && k < v->n_nodes; k++) {
        const tx_ir_node *n = &v->nodes[k];
        if (c.folded[k]) folded_rw[n_fold_rw++] = v->rw_node[k];
        bool is_const_node = is_op(n, "Constant") && !n->domain[0];
        if (c.folded[k]) {
            for (size_t j = 0; j < n->n_outputs && !st; j++) {
                int32_t id = n->outputs[j];
                if (id < 0 || !read_by_rest[id]) continue;
                tx_infer_value *iv = &v->vals[id];
                fold_out *o = &outs[n_outs];
                o->rw_node = v->rw_node[k];
                o->slot = j;
                o->name = strdup(v->names[id]);
                if (!o->name) {
                    st = tx_oom();
                    break;
                }
                if (iv->value == &iv->owned) {
                    o->t = iv->owned;
                    memset(&iv->owned, 0, sizeof iv->owned);
                    iv->value = NULL;
                } else {
                    st = tx_tensor_clone(iv->value, &o->t);
                }
                n_outs++;
            }
        } else if (is_const_node) {
            /* a Constant only folded nodes read goes with them */
            bool read = false;
            for (size_t j = 0; j < n->n_outputs; j++)
                if (n->outputs[j] >= 0 &&
                    (read_by_rest[n->outputs[j]] || c.out_of_graph[n->outputs[j]]))
                    read = true;
            bool fed_fold = false;
            for (size_t j = 0; j < n->n_outputs; j++)
                if (n->outputs[j] >= 0 && c.uses[n->outputs[j]]) fed_fold = true;
            if (!read && fed_fold) dead[n_dead++] = v->rw_node[k];
        }
    }
    free(read_by_rest);
    free(c.cst);
    free(c.uses);
    free(c.out_of_graph);
    free(c.folded);
    tx_rw_view_free(v);
    /* the edits, now that nothing borrows the graph's strings */
    if (!st) st = write_back(g, outs, n_outs, folded_rw, n_fold_rw);
    for (size_t i = 0; !st && i < n_dead; i++) tx_rw_remove_node(g, dead[i]);
    outs_free(outs, n_outs);
    free(dead);
    free(folded_rw);
    if (!st && n_folded) *n_folded = n_fold;
    return st;
}
