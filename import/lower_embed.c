/*
 * lower_embed.c - tx_lower_embedding (import/lower.h): table lookups ->
 * te.ops Embedding.
 *
 * The form: Gather(table, indices) on axis 0, the table a rank-2 float
 * initializer (token, position and token-type embeddings, both
 * exporters), the indices an integer tensor (input ids, or the constant
 * positions of a static shape) -> Embedding(indices, table), the table
 * keeping its name (weight_source names it, so tx_param_sources maps it
 * to itself even when a tied LM head reads it too, see lower_linear.c).
 *
 * te.ops Embedding takes rows 0 <= i < V; ONNX Gather also takes -V <= i
 * < 0 (counted from the end). Exported ids are never negative; a negative
 * one fails at run time rather than reading the wrong row.
 *
 * Declined with a note: a table that is a graph input (callers may
 * override it) or a Constant node (not trainable), not rank 2 or not
 * float; indices known not to be int32/int64; an axis other than 0.
 */
#include "import/lower.h"
#include "import/lower_match.h"
#include "import/lower_shape.h"

#include "format/te_schema.h"

#include <stdlib.h>
#include <string.h>

#define PATTERN "Embedding"

/* NULL when Gather node i lowers, "" when it is not a table lookup at
 * all (shape arithmetic: Gather of a Shape), else the reason. */
static const char *analyze(tx_rw_graph *g, size_t i)
{
    tx_rw_node *n = tx_lm_node(g, (int64_t)i);
    if (n->n_inputs != 2 || n->n_outputs != 1 || !n->inputs[0][0] || !n->inputs[1][0]) return "";
    const char *table = n->inputs[0];
    tx_rw_value_type t;
    bool typed = tx_rw_value_type_of(g, table, &t);
    if (!typed || !tx_dtype_is_real(t.dtype)) return ""; /* ints: shape arithmetic */
    if (tx_rw_is_graph_input(g, table))
        return "the table is a graph input, which callers may override";
    if (!tx_rw_is_initializer(g, table)) {
        tx_tensor c;
        if (!tx_rw_constant(g, table, &c)) return ""; /* an activation: not a table */
        tx_tensor_release(&c);
        return "the table is a Constant node, not an initializer (not trainable)";
    }
    if (t.rank != 2) return "the table is not a rank-2 [V, D] tensor";
    const tx_rw_attr *ax = tx_rw_get_attr(g, i, "axis");
    if (ax && (ax->type != TX_IR_ATTR_INT || ax->i != 0)) return "the lookup is not on axis 0";
    teexec_dtype dt;
    tx_shape sh;
    bool known = false;
    teexec_status *st = tx_lower_type_of(g, n->inputs[1], &dt, &sh, &known);
    if (st) {
        teexec_status_destroy(st);
        known = false;
    }
    if (known && dt != TEEXEC_DTYPE_UNDEFINED && dt != TEEXEC_DTYPE_INT64 &&
        dt != TEEXEC_DTYPE_INT32)
        return "the indices are not int64 or int32";
    return NULL;
}

static teexec_status *rewrite(tx_rw_graph *g, size_t i, tx_lower_report *r)
{
    tx_rw_node *n = tx_lm_node(g, (int64_t)i);
    char *name = tx_lm_strdup(n->name && n->name[0] ? n->name : PATTERN);
    char *table = tx_lm_strdup(n->inputs[0]), *idx = tx_lm_strdup(n->inputs[1]);
    char *out = tx_lm_strdup(n->outputs[0]);
    teexec_status *st = NULL;
    if (!name || !table || !idx || !out) {
        st = tx_oom();
        goto done;
    }
    tx_rw_remove_node(g, i);
    const char *ins[2] = {idx, table}, *outs[1] = {out};
    const char *nn = tx_rw_fresh_name(g, name);
    size_t k = 0;
    st = nn ? tx_rw_add_node(g, PATTERN, TX_TE_DOMAIN, nn, ins, 2, outs, 1, &k) : tx_oom();
    if (!st) st = tx_rw_set_string(g, k, "weight_source", table);
    if (!st) st = tx_lower_note_add(r, PATTERN, name, true, NULL);
done:
    free(name);
    free(table);
    free(idx);
    free(out);
    return st;
}

teexec_status *tx_lower_embedding(tx_rw_graph *g, tx_lower_report *r)
{
    size_t count = tx_rw_node_count(g); /* nodes added here are te.ops */
    for (size_t i = 0; i < count; i++) {
        tx_rw_node *n = tx_lm_node(g, (int64_t)i);
        if (!tx_lm_is(n, "", "Gather")) continue;
        const char *no = analyze(g, i);
        if (no && !*no) continue;
        TX_TRY(no ? tx_lower_note_add(r, PATTERN, n->name, false, no) : rewrite(g, i, r));
    }
    return NULL;
}
