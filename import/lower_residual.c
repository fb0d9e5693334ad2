/*
 * lower_residual.c - tx_lower_residual: the joins and forks of a chain of
 * te.ops ops, made explicit so the planner sees one fuser chain
 * (DESIGN.md section 2).
 *
 * Joins. A standard Add(a, b) of two activations (neither an initializer
 * nor a Constant) where at least one operand is the main output of a
 * te.ops node becomes AddExtraInput(main, extra) when a and b have the
 * same shape: fixed, or symbolic with the same declared dim names
 * (lower_shape.h; a broadcasting Add is not a residual).
 * The chain continues through the operand that is
 *   1. the main output of a te.ops node and read by this Add alone (the
 *      end of a branch, e.g. fc2's Bias in x + fc2(...)), else
 *   2. the second operand when it is a te.ops main output (PyTorch writes
 *      x + f(x) as Add(x, f)), else the first;
 * the other operand is the extra input (the residual stream). Shapes that
 * cannot be derived, or differ, leave the Add standard with a note.
 *
 * Forks. A residual stream leaves the chain where the main output v of a
 * te.ops node is read both as the main input (slot 0) of a te.ops node
 * and as the `extra` input of an AddExtraInput (the join that closes the
 * next residual block). There MakeExtraOutput(v) -> (m, e) is inserted.
 * The chain continues into exactly one reader:
 *   the te.ops node that reads v as its MAIN input, the first such node
 *   in graph order when there are several;
 * that read becomes m, and every other read (the AddExtraInput's extra,
 * other te.ops nodes, standard ops) becomes e. A fan-out without such a
 * join (q, k and v Linears reading one norm output) is left as plain
 * multiple reads, as in TE's own models (models/te_llama_block): the
 * planner handles those, and lowering a te.ops model changes nothing.
 * Extra outputs are already outside the chain, and the outputs of a
 * MakeExtraOutput are never forked again; a graph output v keeps its
 * name (it stays v's producer's).
 *
 * Joins are lowered before forks, because a join makes the te.ops value
 * (the new residual stream) that the next block forks. Running the pass
 * again changes nothing: no standard Add of a te.ops value remains, and a
 * forked value has one reader, the MakeExtraOutput.
 */
#include "import/lower.h"
#include "import/lower_match.h"
#include "import/lower_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* v is the main output (slot 0) of a live te.ops node. */
static bool te_main_output(tx_rw_graph *g, const char *v)
{
    size_t slot = 0;
    int64_t p = tx_rw_producer(g, v, &slot);
    tx_rw_node *n = tx_lm_node(g, p);
    return n && slot == 0 && tx_lm_is(n, "te.ops", n->op_type);
}

static bool is_activation(tx_rw_graph *g, const char *v)
{
    if (!v || !*v) return false;
    if (tx_rw_is_initializer(g, v) && !tx_rw_is_graph_input(g, v)) return false;
    return tx_lm_producer_op(g, v, "", "Constant") < 0;
}

static teexec_status *lower_join(tx_rw_graph *g, size_t i, tx_lower_report *r)
{
    tx_rw_node *n = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(n, "", "Add") || n->n_inputs != 2 || n->n_outputs != 1) return NULL;
    const char *a = n->inputs[0], *b = n->inputs[1];
    if (!is_activation(g, a) || !is_activation(g, b)) return NULL;
    bool ta = te_main_output(g, a), tb = te_main_output(g, b);
    if (!ta && !tb) return NULL;

    bool ea = ta && tx_lm_sole_reader(g, a) == (int64_t)i;
    bool eb = tb && tx_lm_sole_reader(g, b) == (int64_t)i;
    int main_k;
    if (ea != eb) main_k = ea ? 0 : 1;
    else main_k = tb ? 1 : 0;

    char *an = tx_lm_strdup(n->name), *y = tx_lm_strdup(n->outputs[0]);
    char *mv = tx_lm_strdup(n->inputs[main_k]), *ev = tx_lm_strdup(n->inputs[1 - main_k]);
    teexec_status *st = NULL;
    if (!an || !y || !mv || !ev) {
        st = tx_oom();
        goto done;
    }
    /* one shape, fixed or with the same declared dim names (a dynamic
     * export's [batch, seq, hidden]) */
    bool known = false, same = false;
    st = tx_lower_same_shape(g, mv, ev, &known, &same);
    if (st) goto done;
    if (!known) {
        st = tx_lower_note_add(r, "AddExtraInput", an, false,
                               "the operands' shapes cannot be derived, so the Add may broadcast");
        goto done;
    }
    if (!same) {
        st = tx_lower_note_add(r, "AddExtraInput", an, false,
                               "the operands' shapes differ (a broadcasting Add, not a residual)");
        goto done;
    }
    tx_rw_remove_node(g, i);
    const char *ins[2] = {mv, ev}, *outs[1] = {y};
    const char *name = tx_rw_fresh_name(g, *an ? an : "AddExtraInput");
    if (!name) {
        st = tx_oom();
        goto done;
    }
    st = tx_rw_add_node(g, "AddExtraInput", "te.ops", name, ins, 2, outs, 1, NULL);
    if (!st) st = tx_lower_note_add(r, "AddExtraInput", an, true, NULL);
done:
    free(an);
    free(y);
    free(mv);
    free(ev);
    return st;
}

static teexec_status *rename_input(tx_rw_graph *g, size_t node, size_t slot, const char *to)
{
    tx_rw_node *n = tx_rw_node_at(g, node);
    char *s = tx_lm_strdup(to);
    if (!s) return tx_oom();
    free(n->inputs[slot]);
    n->inputs[slot] = s;
    return NULL;
}

static teexec_status *lower_fork(tx_rw_graph *g, size_t i, tx_lower_report *r)
{
    tx_rw_node *p = tx_lm_node(g, (int64_t)i);
    if (!p || !tx_lm_is(p, "te.ops", p->op_type) || p->n_outputs < 1 || !*p->outputs[0])
        return NULL;
    size_t nu = 0;
    const tx_ir_use *u = tx_rw_consumers(g, p->outputs[0], &nu);
    if (nu < 2) return NULL;
    size_t chain = nu;
    for (size_t k = 0; k < nu && chain == nu; k++) {
        tx_rw_node *c = tx_lm_node(g, u[k].node);
        if (u[k].slot == 0 && tx_lm_is(c, "te.ops", c->op_type)) chain = k;
    }
    if (chain == nu) return NULL;
    bool joins = false;
    for (size_t k = 0; k < nu && !joins; k++)
        joins = k != chain && u[k].slot == 1 &&
                tx_lm_is(tx_lm_node(g, u[k].node), "te.ops", "AddExtraInput");
    if (!joins) return NULL;

    /* The uses, copied: the edits below invalidate the lookup's array. */
    tx_ir_use *uses = malloc(nu * sizeof(*uses));
    char *v = tx_lm_strdup(p->outputs[0]), *pn = tx_lm_strdup(p->name);
    char *m = NULL, *e = NULL;
    teexec_status *st = NULL;
    if (!uses || !v || !pn) {
        st = tx_oom();
        goto done;
    }
    memcpy(uses, u, nu * sizeof(*uses));
    char hint[256];
    snprintf(hint, sizeof(hint), "%s_chain", v);
    m = tx_lm_strdup(tx_rw_fresh_name(g, hint));
    snprintf(hint, sizeof(hint), "%s_extra", v);
    e = tx_lm_strdup(tx_rw_fresh_name(g, hint));
    if (!m || !e) {
        st = tx_oom();
        goto done;
    }
    const char *ins[1] = {v}, *outs[2] = {m, e};
    snprintf(hint, sizeof(hint), "%s_fork", *pn ? pn : "MakeExtraOutput");
    const char *name = tx_rw_fresh_name(g, hint);
    if (!name) {
        st = tx_oom();
        goto done;
    }
    st = tx_rw_add_node(g, "MakeExtraOutput", "te.ops", name, ins, 1, outs, 2, NULL);
    for (size_t k = 0; k < nu && !st; k++)
        st = rename_input(g, (size_t)uses[k].node, (size_t)uses[k].slot, k == chain ? m : e);
    if (!st) st = tx_lower_note_add(r, "MakeExtraOutput", pn, true, NULL);
done:
    free(uses);
    free(v);
    free(pn);
    free(m);
    free(e);
    return st;
}

teexec_status *tx_lower_residual(tx_rw_graph *g, tx_lower_report *r)
{
    for (size_t i = 0; i < tx_rw_node_count(g); i++) TX_TRY(lower_join(g, i, r));
    /* Only nodes that exist now: the MakeExtraOutputs added here fork
     * nothing (their main output has one reader). */
    size_t n = tx_rw_node_count(g);
    for (size_t i = 0; i < n; i++) {
        tx_rw_node *p = tx_lm_node(g, (int64_t)i);
        if (p && tx_lm_is(p, "te.ops", "MakeExtraOutput")) continue;
        TX_TRY(lower_fork(g, i, r));
    }
    return NULL;
}
