/*
 * lower_norm.c - tx_lower_norms: normalizations as PyTorch exports them ->
 * te.ops LayerNorm / RMSNorm.
 *
 * Forms recognized (x the normalized activation, w/b 1-D initializers):
 *   LayerNormalization(x, w, b), axis -1 (or rank-1), Mean/InvStdDev
 *     outputs unused                                   -> LayerNorm(eps)
 *   RMSNormalization(x, w) (opset 23), axis -1, stash_type float
 *                                                      -> RMSNorm(eps)
 *   opset < 17 decomposition, anchored at the first ReduceMean:
 *     m = ReduceMean(x); d = Sub(x, m); v = ReduceMean(Pow(d, 2) | Mul(d, d));
 *     s = Sqrt(Add(v, eps)); y = Add(Mul(Div(d, s), w), b)
 *                                                      -> LayerNorm(eps)
 *   RMSNorm, anchored at the ReduceMean of the square:
 *     r = Reciprocal(Sqrt(Add(ReduceMean(Pow(x, 2) | Mul(x, x)), eps)))
 *         or Div(1, Sqrt(...));  n = Mul(x, r)  (or Div(x, Sqrt(...)));
 *     y = Mul(n, w)                                    -> RMSNorm(eps)
 *     A Cast(to float) in front of x and a Cast after n (the fp16/bf16
 *     export of `x.float() ... .to(dtype)`) are absorbed: te.ops RMSNorm
 *     computes in float32 itself and rounds once to x's type.
 * Every ReduceMean must reduce only the last axis with keepdims; every
 * Add/Mul is accepted with its operands in either order; every
 * intermediate must be read only inside the pattern (it disappears).
 *
 * A form that starts like one of these but breaks a rule stays standard
 * ops and gets a note saying which rule. The LayerNorm forms are matched
 * before RMSNorm so the variance half of a declined LayerNorm (which
 * looks like an RMSNorm of x - mean) is never lowered on its own.
 */
#include "import/lower.h"
#include "import/lower_match.h"
#include "import/lower_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 256

/* What a match found; strings point into the graph until the first edit. */
typedef struct norm_match {
    const char *x, *w, *b, *y; /* b NULL for RMSNorm */
    double eps;
    tx_lm_set nodes;
    int64_t identity_cast; /* a Cast of x to its own type, removed (-1: none) */
} norm_match;

static bool param_1d(tx_rw_graph *g, const char *v)
{
    if (!tx_lm_is_param(g, v)) return false;
    tx_rw_value_type t;
    return tx_rw_value_type_of(g, v, &t) && t.rank == 1;
}

/* Replaces m.nodes by one te.ops node op(x, w[, b]) -> y. */
static teexec_status *emit_norm(tx_rw_graph *g, const char *op, const char *anchor,
                                const norm_match *m, tx_lower_report *r)
{
    char *x = tx_lm_strdup(m->x), *w = tx_lm_strdup(m->w), *y = tx_lm_strdup(m->y);
    char *b = m->b ? tx_lm_strdup(m->b) : NULL;
    char *an = tx_lm_strdup(anchor);
    teexec_status *st = NULL;
    if (!x || !w || !y || !an || (m->b && !b)) {
        st = tx_oom();
        goto done;
    }
    tx_lm_remove_all(g, &m->nodes);
    if (m->identity_cast >= 0) {
        /* every reader of the Cast reads its source instead */
        tx_rw_node *c = tx_lm_node(g, m->identity_cast);
        char *src = c ? tx_lm_strdup(c->inputs[0]) : NULL;
        if (!src) {
            st = tx_oom();
            goto done;
        }
        st = tx_rw_replace_uses(g, x, src);
        if (!st) {
            tx_rw_remove_node(g, (size_t)m->identity_cast);
            free(x);
            x = src;
        } else {
            free(src);
            goto done;
        }
    }
    const char *ins[3] = {x, w, b};
    const char *outs[1] = {y};
    size_t idx;
    const char *name = tx_rw_fresh_name(g, *an ? an : op);
    if (!name) {
        st = tx_oom();
        goto done;
    }
    st = tx_rw_add_node(g, op, "te.ops", name, ins, b ? 3 : 2, outs, 1, &idx);
    if (!st) st = tx_rw_set_float(g, idx, "eps", (float)m->eps);
    if (!st) st = tx_lower_note_add(r, op, an, true, NULL);
done:
    free(x);
    free(w);
    free(y);
    free(b);
    free(an);
    return st;
}

/* ---- RMSNormalization (opset 23) ------------------------------------------ */

/* RMSNormalization(x, scale) over the last axis with a 1-D scale, float
 * statistics (stash_type 1, as te.ops computes). */
static const char *match_rms_node(tx_rw_graph *g, size_t i, norm_match *m, char *why)
{
    tx_rw_node *n = tx_lm_node(g, (int64_t)i);
    memset(m, 0, sizeof(*m));
    m->identity_cast = -1;
    if (n->n_inputs < 2 || !*n->inputs[1] || n->n_outputs < 1) return "no scale input";
    const tx_rw_attr *ax = tx_rw_get_attr(g, i, "axis");
    if (ax) {
        tx_shape xs;
        bool known = false;
        teexec_status *st = tx_lower_shape_of(g, n->inputs[0], &xs, &known);
        if (st) {
            teexec_status_destroy(st);
            known = false;
        }
        int32_t rank = known ? xs.rank : -1;
        if (ax->type != TX_IR_ATTR_INT || !(ax->i == -1 || (rank > 0 && ax->i == rank - 1))) {
            snprintf(why, REASON_MAX, "normalizes from axis %lld, not over the last axis only",
                     (long long)ax->i);
            return why;
        }
    }
    const tx_rw_attr *stash = tx_rw_get_attr(g, i, "stash_type");
    if (stash && (stash->type != TX_IR_ATTR_INT || stash->i != TEEXEC_DTYPE_FLOAT))
        return "stash_type is not float32 (te.ops RMSNorm keeps its statistics in float32)";
    if (!param_1d(g, n->inputs[1]))
        return "the scale is not a 1-D initializer (te.ops RMSNorm's weight is)";
    const tx_rw_attr *e = tx_rw_get_attr(g, i, "epsilon");
    m->eps = e && e->type == TX_IR_ATTR_FLOAT ? e->f : 1e-5;
    m->x = n->inputs[0];
    m->w = n->inputs[1];
    m->b = NULL;
    m->y = n->outputs[0];
    tx_lm_set_add(&m->nodes, i);
    return NULL;
}

/* ---- LayerNormalization (opset 17) ---------------------------------------- */

static const char *match_ln_node(tx_rw_graph *g, size_t i, norm_match *m, char *why)
{
    tx_rw_node *n = tx_lm_node(g, (int64_t)i);
    memset(m, 0, sizeof(*m));
    m->identity_cast = -1;
    if (n->n_inputs < 3 || !*n->inputs[1] || !*n->inputs[2])
        return "no bias input (te.ops LayerNorm takes both a scale and a bias)";
    const tx_rw_attr *ax = tx_rw_get_attr(g, i, "axis");
    if (ax) {
        tx_rw_value_type t;
        int32_t rank = tx_rw_value_type_of(g, n->inputs[0], &t) ? t.rank : -1;
        if (ax->type != TX_IR_ATTR_INT || !(ax->i == -1 || (rank > 0 && ax->i == rank - 1))) {
            snprintf(why, REASON_MAX,
                     "normalizes from axis %lld, not over the last axis only",
                     (long long)ax->i);
            return why;
        }
    }
    for (size_t k = 1; k < n->n_outputs; k++)
        if (*n->outputs[k] &&
            (tx_lm_reader_count(g, n->outputs[k]) || tx_rw_is_graph_output(g, n->outputs[k])))
            return "its Mean / InvStdDev output is used (te.ops LayerNorm keeps them private)";
    if (!param_1d(g, n->inputs[1]) || !param_1d(g, n->inputs[2]))
        return "scale or bias is not a 1-D initializer (te.ops LayerNorm parameters are)";
    const tx_rw_attr *e = tx_rw_get_attr(g, i, "epsilon");
    m->eps = e && e->type == TX_IR_ATTR_FLOAT ? e->f : 1e-5;
    m->x = n->inputs[0];
    m->w = n->inputs[1];
    m->b = n->inputs[2];
    m->y = n->outputs[0];
    tx_lm_set_add(&m->nodes, i);
    return NULL;
}

/* ---- decomposed LayerNorm (opset < 17) ------------------------------------ */

/* The first node reading `v` that is (ai.onnx, op), or -1. Other readers
 * are not refused here: the final "intermediates stay private" check of
 * the match names the value they leak. */
static int64_t reader_op(tx_rw_graph *g, const char *v, const char *op)
{
    size_t n = 0;
    const tx_ir_use *u = tx_rw_consumers(g, v, &n);
    for (size_t i = 0; i < n; i++)
        if (tx_lm_is(tx_lm_node(g, u[i].node), "", op)) return u[i].node;
    return -1;
}

/* Whether ReduceMean i starts a decomposed LayerNorm at all (then a failed
 * match deserves a note): its mean is subtracted from its own input. */
static bool ln_anchor(tx_rw_graph *g, size_t i, int64_t *sub)
{
    tx_rw_node *rm = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(rm, "", "ReduceMean") || rm->n_inputs < 1 || rm->n_outputs != 1) return false;
    size_t nu = 0;
    const tx_ir_use *u = tx_rw_consumers(g, rm->outputs[0], &nu);
    for (size_t k = 0; k < nu; k++) {
        tx_rw_node *s = tx_lm_node(g, u[k].node);
        if (tx_lm_is(s, "", "Sub") && s->n_inputs == 2 && u[k].slot == 1 &&
            strcmp(s->inputs[0], rm->inputs[0]) == 0) {
            *sub = u[k].node;
            return true;
        }
    }
    return false;
}

static const char *match_ln_decomposed(tx_rw_graph *g, size_t i, int64_t sub, norm_match *m,
                                       char *why)
{
    memset(m, 0, sizeof(*m));
    m->identity_cast = -1;
    tx_rw_node *rm1 = tx_lm_node(g, (int64_t)i);
    const char *x = rm1->inputs[0];
    if (!tx_lm_reduces_last_axis_keepdims(g, i, x))
        return "the mean is not taken over the last axis only (with keepdims)";
    tx_lm_set_add(&m->nodes, i);
    tx_lm_set_add(&m->nodes, (size_t)sub);
    const char *d = tx_lm_node(g, sub)->outputs[0];

    /* d feeds the square and the division, nothing else. */
    size_t nu = 0;
    const tx_ir_use *u = tx_rw_consumers(g, d, &nu);
    int64_t sq = -1, div = -1;
    for (size_t k = 0; k < nu; k++) {
        tx_rw_node *c = tx_lm_node(g, u[k].node);
        if (tx_lm_is(c, "", "Pow") && u[k].slot == 0) sq = u[k].node;
        else if (tx_lm_is(c, "", "Mul") && c->n_inputs == 2 && strcmp(c->inputs[0], d) == 0 &&
                 strcmp(c->inputs[1], d) == 0)
            sq = u[k].node;
        else if (tx_lm_is(c, "", "Div") && u[k].slot == 0) div = u[k].node;
    }
    if (sq < 0 || div < 0) return "x - mean is not both squared and divided by the deviation";
    tx_rw_node *sqn = tx_lm_node(g, sq);
    if (tx_lm_is(sqn, "", "Pow")) {
        double e;
        if (sqn->n_inputs != 2 || !tx_rw_scalar(g, sqn->inputs[1], &e) || !tx_lm_close(e, 2.0)) {
            snprintf(why, REASON_MAX, "the variance squares with a Pow whose exponent is not 2");
            return why;
        }
    }
    tx_lm_set_add(&m->nodes, (size_t)sq);
    tx_lm_set_add(&m->nodes, (size_t)div);

    int64_t rm2 = reader_op(g, sqn->outputs[0], "ReduceMean");
    if (rm2 < 0) return "the square is not only averaged by a ReduceMean";
    if (!tx_lm_reduces_last_axis_keepdims(g, (size_t)rm2, x))
        return "the variance is not taken over the last axis only (with keepdims)";
    tx_lm_set_add(&m->nodes, (size_t)rm2);

    int64_t add = reader_op(g, tx_lm_node(g, rm2)->outputs[0], "Add");
    double eps = 0;
    if (add < 0 || tx_lm_scalar_operand(g, tx_lm_node(g, add), &eps) < 0)
        return "the variance is not only added to a scalar epsilon";
    if (!(eps >= 0)) return "epsilon is negative";
    tx_lm_set_add(&m->nodes, (size_t)add);

    int64_t sqrt = reader_op(g, tx_lm_node(g, add)->outputs[0], "Sqrt");
    if (sqrt < 0) return "variance + eps is not only fed to a Sqrt";
    tx_lm_set_add(&m->nodes, (size_t)sqrt);
    tx_rw_node *divn = tx_lm_node(g, div);
    if (divn->n_inputs != 2 || strcmp(divn->inputs[1], tx_lm_node(g, sqrt)->outputs[0]) != 0 ||
        reader_op(g, tx_lm_node(g, sqrt)->outputs[0], "Div") != div)
        return "x - mean is not divided by the deviation alone";

    int64_t mul = reader_op(g, divn->outputs[0], "Mul");
    if (mul < 0) return "the normalized value is not only scaled by a Mul (no affine scale)";
    const char *w = tx_lm_other_input(tx_lm_node(g, mul), divn->outputs[0]);
    if (!param_1d(g, w)) return "the scale is not a 1-D initializer";
    tx_lm_set_add(&m->nodes, (size_t)mul);

    int64_t addb = reader_op(g, tx_lm_node(g, mul)->outputs[0], "Add");
    if (addb < 0) return "the scaled value is not only shifted by an Add (no affine bias)";
    const char *b = tx_lm_other_input(tx_lm_node(g, addb), tx_lm_node(g, mul)->outputs[0]);
    if (!param_1d(g, b)) return "the bias is not a 1-D initializer";
    tx_lm_set_add(&m->nodes, (size_t)addb);

    /* Every value the pattern defines except y must die with it. */
    for (size_t k = 0; k < m->nodes.n; k++) {
        tx_rw_node *c = tx_lm_node(g, (int64_t)m->nodes.idx[k]);
        if ((int64_t)m->nodes.idx[k] == addb) continue;
        if (!tx_lm_reads_only_within(g, c->outputs[0], &m->nodes)) {
            snprintf(why, REASON_MAX, "intermediate \"%s\" is also read outside the pattern",
                     c->outputs[0]);
            return why;
        }
    }
    m->x = x;
    m->w = w;
    m->b = b;
    m->y = tx_lm_node(g, addb)->outputs[0];
    m->eps = eps;
    return NULL;
}

/* ---- RMSNorm --------------------------------------------------------------- */

/* ReduceMean i averages a square: x through *sq, or -1. */
static bool rms_anchor(tx_rw_graph *g, size_t i, int64_t *sq, const char **x)
{
    tx_rw_node *rm = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(rm, "", "ReduceMean") || rm->n_inputs < 1 || rm->n_outputs != 1) return false;
    int64_t p = tx_rw_producer(g, rm->inputs[0], NULL);
    tx_rw_node *pn = tx_lm_node(g, p);
    if (!pn || pn->n_inputs != 2) return false;
    if (tx_lm_is(pn, "", "Pow") ||
        (tx_lm_is(pn, "", "Mul") && strcmp(pn->inputs[0], pn->inputs[1]) == 0)) {
        *sq = p;
        *x = pn->inputs[0];
        /* x - mean squared is a LayerNorm's variance: that pass decides. */
        int64_t s = tx_lm_producer_op(g, *x, "", "Sub");
        if (s >= 0) {
            tx_rw_node *sn = tx_lm_node(g, s);
            int64_t mp = tx_lm_producer_op(g, sn->inputs[1], "", "ReduceMean");
            if (mp >= 0 && strcmp(tx_lm_node(g, mp)->inputs[0], sn->inputs[0]) == 0) return false;
        }
        return true;
    }
    return false;
}

static bool is_cast_to(tx_rw_graph *g, int64_t node, int64_t to)
{
    tx_rw_node *n = tx_lm_node(g, node);
    if (!tx_lm_is(n, "", "Cast")) return false;
    const tx_rw_attr *a = tx_rw_get_attr(g, (size_t)node, "to");
    return a && a->type == TX_IR_ATTR_INT && (to < 0 || a->i == to);
}

static const char *match_rms(tx_rw_graph *g, size_t i, int64_t sq, const char *x,
                             norm_match *m, char *why)
{
    memset(m, 0, sizeof(*m));
    m->identity_cast = -1;
    tx_rw_node *sqn = tx_lm_node(g, sq);
    if (tx_lm_is(sqn, "", "Pow")) {
        double e;
        if (!tx_rw_scalar(g, sqn->inputs[1], &e)) return "the square is a Pow with a non-constant exponent";
        if (!tx_lm_close(e, 2.0)) {
            snprintf(why, REASON_MAX, "the square is a Pow with exponent %g, not 2", e);
            return why;
        }
    }
    tx_lm_set_add(&m->nodes, (size_t)sq);
    if (!tx_lm_reduces_last_axis_keepdims(g, i, x))
        return "the mean of squares is not taken over the last axis only (with keepdims)";
    tx_lm_set_add(&m->nodes, i);

    int64_t add = reader_op(g, tx_lm_node(g, (int64_t)i)->outputs[0], "Add");
    double eps = 0;
    if (add < 0 || tx_lm_scalar_operand(g, tx_lm_node(g, add), &eps) < 0)
        return "the mean of squares is not only added to a scalar epsilon";
    if (!(eps >= 0)) return "epsilon is negative";
    tx_lm_set_add(&m->nodes, (size_t)add);

    int64_t sqrt = reader_op(g, tx_lm_node(g, add)->outputs[0], "Sqrt");
    if (sqrt < 0) return "mean + eps is not only fed to a Sqrt";
    tx_lm_set_add(&m->nodes, (size_t)sqrt);
    const char *s = tx_lm_node(g, sqrt)->outputs[0];

    /* n = x * (1 / s), in one of three spellings. */
    int64_t k = -1;
    size_t nu = 0;
    const tx_ir_use *u = tx_rw_consumers(g, s, &nu);
    for (size_t j = 0; j < nu && k < 0; j++) {
        tx_rw_node *c = tx_lm_node(g, u[j].node);
        if (tx_lm_is(c, "", "Reciprocal") || (tx_lm_is(c, "", "Div") && u[j].slot == 1))
            k = u[j].node;
    }
    tx_rw_node *kn = tx_lm_node(g, k);
    const char *r = NULL; /* the reciprocal, when there is one */
    int64_t mulx = -1;
    if (tx_lm_is(kn, "", "Reciprocal")) {
        r = kn->outputs[0];
    } else if (tx_lm_is(kn, "", "Div") && kn->n_inputs == 2 && strcmp(kn->inputs[1], s) == 0) {
        if (tx_lm_scalar_is(g, kn->inputs[0], 1.0)) r = kn->outputs[0];
        else if (strcmp(kn->inputs[0], x) == 0) mulx = k;
        else return "the deviation divides something other than 1 or x";
    } else {
        return "the deviation is not inverted (Reciprocal, 1 / s, x / s)";
    }
    tx_lm_set_add(&m->nodes, (size_t)k);
    if (r) {
        mulx = reader_op(g, r, "Mul");
        const char *o = mulx >= 0 ? tx_lm_other_input(tx_lm_node(g, mulx), r) : NULL;
        if (!o || strcmp(o, x) != 0) return "the inverse deviation does not only multiply x";
        tx_lm_set_add(&m->nodes, (size_t)mulx);
    }
    const char *nrm = tx_lm_node(g, mulx)->outputs[0];

    /* Optional Cast back to the input's type before the weight. */
    int64_t back = tx_lm_sole_reader(g, nrm);
    int64_t back_to = -1;
    if (is_cast_to(g, back, -1)) {
        back_to = tx_rw_get_attr(g, (size_t)back, "to")->i;
        tx_lm_set_add(&m->nodes, (size_t)back);
        nrm = tx_lm_node(g, back)->outputs[0];
    }
    int64_t mulw = reader_op(g, nrm, "Mul");
    if (mulw < 0) return "the normalized value is not only scaled by a Mul (no weight)";
    const char *w = tx_lm_other_input(tx_lm_node(g, mulw), nrm);
    if (!param_1d(g, w)) return "the weight is not a 1-D initializer";
    tx_lm_set_add(&m->nodes, (size_t)mulw);

    /* A Cast to float32 in front of x: absorbed when the type round-trips
     * (a Cast back to its source type, or a float32 source). */
    const char *xin = x;
    int64_t front = tx_rw_producer(g, x, NULL);
    if (is_cast_to(g, front, TEEXEC_DTYPE_FLOAT)) {
        const char *src = tx_lm_node(g, front)->inputs[0];
        tx_rw_value_type st;
        bool src_known = tx_rw_value_type_of(g, src, &st);
        bool roundtrip = back >= 0 && back_to >= 0 && tx_lm_set_has(&m->nodes, (size_t)back) &&
                         (!src_known || (int64_t)st.dtype == back_to);
        bool plain = back_to < 0 && src_known && st.dtype == TEEXEC_DTYPE_FLOAT;
        tx_lm_set set_with = m->nodes;
        tx_lm_set_add(&set_with, (size_t)front);
        if ((roundtrip || plain) && tx_lm_reads_only_within(g, x, &set_with)) {
            m->nodes = set_with;
            xin = src;
        }
    }
    if (back_to >= 0 && xin == x) {
        /* The TorchScript exporter's hidden.to(float32) ... .to(float32) of a
         * float32 x, whose front Cast the residual Add reads too: both
         * Casts are identities (x is what the front Cast made). */
        bool identity = is_cast_to(g, front, back_to);
        if (identity) {
            const char *src = tx_lm_node(g, front)->inputs[0];
            teexec_dtype sd;
            tx_shape ss;
            bool known = false;
            teexec_status *st = tx_lower_type_of(g, src, &sd, &ss, &known);
            if (st) {
                teexec_status_destroy(st);
                known = false;
            }
            identity = known && (int64_t)sd == back_to;
            /* the Cast goes unless its value is a graph output */
            if (identity && !tx_rw_is_graph_output(g, x)) m->identity_cast = front;
        }
        if (!identity)
            return "the result is cast to another type without a matching Cast to float32 of x";
    }

    for (size_t j = 0; j < m->nodes.n; j++) {
        tx_rw_node *c = tx_lm_node(g, (int64_t)m->nodes.idx[j]);
        if ((int64_t)m->nodes.idx[j] == mulw) continue;
        if (strcmp(c->outputs[0], x) == 0) continue; /* the front Cast: checked above */
        if (!tx_lm_reads_only_within(g, c->outputs[0], &m->nodes)) {
            snprintf(why, REASON_MAX, "intermediate \"%s\" is also read outside the pattern",
                     c->outputs[0]);
            return why;
        }
    }
    if (m->nodes.overflow) return "pattern too large";
    m->x = xin;
    m->w = w;
    m->b = NULL;
    m->y = tx_lm_node(g, mulw)->outputs[0];
    m->eps = eps;
    return NULL;
}

/* ---- the pass -------------------------------------------------------------- */

static teexec_status *declined(tx_lower_report *r, const char *op, const char *anchor,
                               const char *reason)
{
    return tx_lower_note_add(r, op, anchor, false, reason);
}

teexec_status *tx_lower_norms(tx_rw_graph *g, tx_lower_report *r)
{
    char why[REASON_MAX];
    norm_match m;

    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        tx_rw_node *n = tx_lm_node(g, (int64_t)i);
        if (!tx_lm_is(n, "", "LayerNormalization")) continue;
        const char *anchor = n->name;
        const char *no = match_ln_node(g, i, &m, why);
        TX_TRY(no ? declined(r, "LayerNorm", anchor, no) : emit_norm(g, "LayerNorm", anchor, &m, r));
    }
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        tx_rw_node *n = tx_lm_node(g, (int64_t)i);
        if (!tx_lm_is(n, "", "RMSNormalization")) continue;
        const char *anchor = n->name;
        const char *no = match_rms_node(g, i, &m, why);
        TX_TRY(no ? declined(r, "RMSNorm", anchor, no) : emit_norm(g, "RMSNorm", anchor, &m, r));
    }
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        int64_t sub;
        if (!ln_anchor(g, i, &sub)) continue;
        const char *anchor = tx_lm_node(g, (int64_t)i)->name;
        const char *no = match_ln_decomposed(g, i, sub, &m, why);
        TX_TRY(no ? declined(r, "LayerNorm", anchor, no) : emit_norm(g, "LayerNorm", anchor, &m, r));
    }
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        int64_t sq;
        const char *x;
        if (!rms_anchor(g, i, &sq, &x)) continue;
        const char *anchor = tx_lm_node(g, sq)->name;
        const char *no = match_rms(g, i, sq, x, &m, why);
        TX_TRY(no ? declined(r, "RMSNorm", anchor, no) : emit_norm(g, "RMSNorm", anchor, &m, r));
    }
    return NULL;
}
