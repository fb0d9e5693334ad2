/*
 * lower_layout.c - tx_lower_layout (import/lower.h): Transposes the other
 * passes leave in pairs, gone.
 *
 * The attention and rotary passes read their operands in bshd and put a
 * Transpose(0,2,1,3) in front of an operand the graph keeps in bhsd; where
 * the graph made that operand by transposing a bshd tensor, the two undo
 * each other. Two rewrites, repeated until neither applies:
 *   y = Transpose(q)(Transpose(p)(x)) with q after p the identity
 *     -> readers of y read x (the inner Transpose goes once nothing reads it);
 *   Split(Transpose(p)(x), axis a) whose every output is read only by a
 *     Transpose(q) with q after p the identity (GPT-NeoX's per-head
 *     interleaved qkv: Reshape to [b, s, h, 3d], Transpose, Split of the
 *     last axis)
 *     -> Split(x, axis p[a]) writing the outer Transposes' outputs.
 * Both only drop data movement: values are unchanged bit for bit. A graph
 * output keeps its name (tx_rw_replace_uses renames the producer). No
 * notes: nothing is declined here.
 */
#include "import/lower.h"
#include "import/lower_match.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PERM 8

/* The perm of Transpose node i (default: reversed axes, needs the rank,
 * so only explicit perms are used). */
static bool perm_of(tx_rw_graph *g, size_t i, int64_t *perm, size_t *n)
{
    tx_rw_node *t = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(t, "", "Transpose") || t->n_inputs != 1 || t->n_outputs != 1) return false;
    const tx_rw_attr *a = tx_rw_get_attr(g, i, "perm");
    if (!a || a->type != TX_IR_ATTR_INTS || a->n_ints < 1 || a->n_ints > MAX_PERM) return false;
    for (size_t k = 0; k < a->n_ints; k++) {
        if (a->ints[k] < 0 || a->ints[k] >= (int64_t)a->n_ints) return false;
        perm[k] = a->ints[k];
    }
    *n = a->n_ints;
    return true;
}

/* q after p: y[k] = x[p[q[k]]]; identity when p[q[k]] == k for all k. */
static bool undoes(const int64_t *p, const int64_t *q, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (p[q[k]] != (int64_t)k) return false;
    return true;
}

/* Outer Transpose o reading an inner Transpose that it undoes. */
static teexec_status *cancel_pair(tx_rw_graph *g, size_t o, bool *changed)
{
    int64_t q[MAX_PERM], p[MAX_PERM];
    size_t nq = 0, np = 0;
    if (!perm_of(g, o, q, &nq)) return NULL;
    tx_rw_node *on = tx_lm_node(g, (int64_t)o);
    int64_t ii = tx_lm_producer_op(g, on->inputs[0], "", "Transpose");
    if (ii < 0 || !perm_of(g, (size_t)ii, p, &np) || np != nq || !undoes(p, q, nq)) return NULL;
    /* a graph output keeps its producer (renaming x could clash with x's
     * other readers) */
    if (tx_rw_is_graph_output(g, on->outputs[0])) return NULL;
    char *x = tx_lm_strdup(tx_lm_node(g, ii)->inputs[0]);
    char *y = tx_lm_strdup(on->outputs[0]);
    teexec_status *st = x && y ? NULL : tx_oom();
    if (!st) {
        tx_rw_remove_node(g, o);
        st = tx_rw_replace_uses(g, y, x);
        *changed = true;
    }
    free(x);
    free(y);
    return st;
}

/* Split node s of a Transpose, each output transposed back. */
static teexec_status *sink_split(tx_rw_graph *g, size_t s, bool *changed)
{
    tx_rw_node *sp = tx_lm_node(g, (int64_t)s);
    if (!tx_lm_is(sp, "", "Split") || sp->n_inputs < 1 || sp->n_outputs < 1 ||
        sp->n_outputs > 64)
        return NULL;
    int64_t ti = tx_lm_producer_op(g, sp->inputs[0], "", "Transpose");
    int64_t p[MAX_PERM], q[MAX_PERM];
    size_t np = 0, nq = 0;
    if (ti < 0 || !perm_of(g, (size_t)ti, p, &np)) return NULL;
    const tx_rw_attr *ax = tx_rw_get_attr(g, s, "axis");
    int64_t axis = ax && ax->type == TX_IR_ATTR_INT ? ax->i : 0;
    if (axis < 0) axis += (int64_t)np;
    if (axis < 0 || axis >= (int64_t)np) return NULL;
    int64_t back[64];
    for (size_t k = 0; k < sp->n_outputs; k++) {
        back[k] = tx_lm_sole_reader(g, sp->outputs[k]);
        if (back[k] < 0 || !perm_of(g, (size_t)back[k], q, &nq) || nq != np || !undoes(p, q, np))
            return NULL;
    }
    /* the Split's outputs now come straight from x, as the outer
     * Transposes' outputs */
    for (size_t k = 0; k < sp->n_outputs; k++) {
        tx_rw_node *b = tx_lm_node(g, back[k]);
        char *nm = tx_lm_strdup(b->outputs[0]);
        if (!nm) return tx_oom();
        tx_rw_remove_node(g, (size_t)back[k]);
        sp = tx_lm_node(g, (int64_t)s);
        free(sp->outputs[k]);
        sp->outputs[k] = nm;
    }
    char *x = tx_lm_strdup(tx_lm_node(g, ti)->inputs[0]);
    if (!x) return tx_oom();
    sp = tx_lm_node(g, (int64_t)s);
    free(sp->inputs[0]);
    sp->inputs[0] = x;
    TX_TRY(tx_rw_set_int(g, s, "axis", p[axis]));
    *changed = true;
    return NULL;
}

teexec_status *tx_lower_layout(tx_rw_graph *g, tx_lower_report *r)
{
    (void)r;
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_lower_layout: no graph");
    bool changed = true;
    for (int round = 0; changed && round < 8; round++) {
        changed = false;
        for (size_t i = 0; i < tx_rw_node_count(g); i++) {
            TX_TRY(cancel_pair(g, i, &changed));
            TX_TRY(sink_split(g, i, &changed));
        }
    }
    return NULL;
}
