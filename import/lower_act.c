/*
 * lower_act.c - tx_lower_activations: activation formulas and ops as
 * PyTorch exports them -> te.ops GELU / QGELU / ReLU / SiLU / ConstantScale
 * and the gated SwiGLU / GEGLU / ReGLU.
 *
 * Forms recognized (x any activation; constants within float32 rounding,
 * see lower_match.h; Add/Mul operands in either order):
 *   erf GELU, anchored at the Erf:
 *     e = Erf(Div(x, 1.4142135) | Mul(x, 0.70710678)); a = Add(e, 1)
 *     y = Mul(Mul(x, a), 0.5) | Mul(Mul(x, 0.5), a) | Mul(x, Mul(a, 0.5))
 *                                               -> GELU(approximate="none")
 *   tanh GELU (F.gelu(approximate="tanh") in PyTorch 1.13), at the Tanh:
 *     c = Mul(x, Mul(x, x)) | Pow(x, 3);  u = Add(x, Mul(0.044715, c))
 *     t = Tanh(Mul(0.7978846, u)); a = Add(t, 1); y as for erf
 *                                               -> GELU(approximate="tanh")
 *   y = Mul(x, Sigmoid(x))                      -> SiLU
 *   y = Mul(x, Sigmoid(Mul(x, 1.702)))          -> QGELU (CLIP's quick GELU)
 *   Gelu(x) (opset 20, approximate none|tanh)   -> GELU(approximate)
 *   Relu(x)                                     -> ReLU
 *   y = Mul(x, c), x the main output of a te.ops node, c a float32 scalar
 *     constant (Gemma's embedding * sqrt(h))    -> ConstantScale(scale = c)
 *   y = Mul(act(a), b), act a te.ops SiLU / GELU / ReLU (made above),
 *     a = [Bias](Linear(X, Wg)), b = [Bias](Linear(X, Wu)),
 *     both Linears te.ops (lower_linear ran first) on the same X, Wg and
 *     Wu of the same shape                      -> Linear(X, [Wg; Wu])
 *                                                  [-> Bias([bg; bu])]
 *                                                  -> SwiGLU / GEGLU / ReGLU
 *     The merged weight (and bias) is a new initializer; the Linear keeps
 *     weight_source "gate,up" and weight_split [Hg, Hu] (bias_source /
 *     bias_split likewise) so gradients map back to the user's tensors.
 *     The gated ops take [gate | up]: the gate rows come first; GEGLU keeps
 *     the GELU's approximate.
 *
 * Intermediates of a pattern must be read only inside it. A form that
 * starts like one of these (the anchor and its first neighbour match) but
 * breaks a rule stays standard ops with a note saying which rule.
 */
#include "import/lower.h"
#include "import/lower_match.h"
#include "import/lower_shape.h"

#include "format/te_schema.h"

#include "base/checked.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 256

static const double SQRT2 = 1.4142135623730951;
static const double SQRT_2_OVER_PI = 0.7978845608028654;
static const double GELU_CUBIC = 0.044715;

typedef struct act_match {
    const char *x, *y;
    tx_lm_set nodes;
    int64_t last; /* the node producing y */
} act_match;

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

/* Mul node k multiplies `v` by a scalar close to c (either order). */
static bool mul_by(tx_rw_graph *g, int64_t k, const char *v, double c)
{
    tx_rw_node *n = tx_lm_node(g, k);
    if (!tx_lm_is(n, "", "Mul")) return false;
    const char *o = tx_lm_other_input(n, v);
    return o && tx_lm_scalar_is(g, o, c);
}

/* The intermediates (every output but y's) must die with the pattern. */
static const char *check_private(tx_rw_graph *g, act_match *m, char *why)
{
    if (m->nodes.overflow) return "pattern too large";
    for (size_t k = 0; k < m->nodes.n; k++) {
        if ((int64_t)m->nodes.idx[k] == m->last) continue;
        const char *v = tx_lm_node(g, (int64_t)m->nodes.idx[k])->outputs[0];
        if (!tx_lm_reads_only_within(g, v, &m->nodes)) {
            snprintf(why, REASON_MAX, "intermediate \"%s\" is also read outside the pattern", v);
            return why;
        }
    }
    return NULL;
}

/* y = 0.5 · x · a where a = "1 + f(x)" is the output of node `add`
 * (already in m->nodes). */
static const char *match_half_x_times(tx_rw_graph *g, const char *a, act_match *m)
{
    const char *x = m->x;
    int64_t k1 = reader_op(g, a, "Mul");
    if (k1 < 0) return "the 1 + f(x) term is not only multiplied by a Mul";
    tx_rw_node *n1 = tx_lm_node(g, k1);
    const char *o = tx_lm_other_input(n1, a);
    tx_lm_set_add(&m->nodes, (size_t)k1);
    if (o && strcmp(o, x) == 0) {
        /* (x · a) · 0.5 */
        int64_t k2 = reader_op(g, n1->outputs[0], "Mul");
        if (k2 < 0 || !mul_by(g, k2, n1->outputs[0], 0.5)) return "x · (1 + f(x)) is not multiplied by 0.5";
        tx_lm_set_add(&m->nodes, (size_t)k2);
        m->last = k2;
        return NULL;
    }
    int64_t h = o ? tx_rw_producer(g, o, NULL) : -1;
    if (h >= 0 && mul_by(g, h, x, 0.5)) {
        /* (x · 0.5) · a */
        tx_lm_set_add(&m->nodes, (size_t)h);
        m->last = k1;
        return NULL;
    }
    if (o && tx_lm_scalar_is(g, o, 0.5)) {
        /* x · (a · 0.5) */
        int64_t k2 = reader_op(g, n1->outputs[0], "Mul");
        const char *o2 = k2 >= 0 ? tx_lm_other_input(tx_lm_node(g, k2), n1->outputs[0]) : NULL;
        if (!o2 || strcmp(o2, x) != 0) return "0.5 · (1 + f(x)) is not multiplied by x";
        tx_lm_set_add(&m->nodes, (size_t)k2);
        m->last = k2;
        return NULL;
    }
    return "the 1 + f(x) term is not multiplied by 0.5 and x";
}

/* a = Add(v, 1): the sole reader of v. */
static const char *match_one_plus(tx_rw_graph *g, const char *v, act_match *m, const char **a)
{
    int64_t k = reader_op(g, v, "Add");
    if (k < 0) return "its output is not only added to 1";
    const char *o = tx_lm_other_input(tx_lm_node(g, k), v);
    if (!o || !tx_lm_scalar_is(g, o, 1.0)) return "its output is added to something other than 1";
    tx_lm_set_add(&m->nodes, (size_t)k);
    *a = tx_lm_node(g, k)->outputs[0];
    return NULL;
}

/* ---- erf GELU ---------------------------------------------------------- */

/* Erf i reads x / sqrt(2) in some spelling: *p its producer, *x, *c the constant. */
static bool erf_anchor(tx_rw_graph *g, size_t i, int64_t *p, const char **x, bool *is_div,
                       double *c)
{
    tx_rw_node *e = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(e, "", "Erf") || e->n_inputs != 1) return false;
    *p = tx_rw_producer(g, e->inputs[0], NULL);
    tx_rw_node *pn = tx_lm_node(g, *p);
    if (tx_lm_is(pn, "", "Div") && pn->n_inputs == 2 && tx_rw_scalar(g, pn->inputs[1], c)) {
        *is_div = true;
        *x = pn->inputs[0];
        return true;
    }
    if (tx_lm_is(pn, "", "Mul")) {
        int k = tx_lm_scalar_operand(g, pn, c);
        if (k < 0) return false;
        *is_div = false;
        *x = pn->inputs[1 - k];
        return true;
    }
    return false;
}

static const char *match_gelu_erf(tx_rw_graph *g, size_t i, int64_t p, const char *x,
                                  bool is_div, double c, act_match *m, char *why)
{
    memset(m, 0, sizeof(*m));
    m->x = x;
    if (is_div ? !tx_lm_close(c, SQRT2) : !tx_lm_close(c, 1.0 / SQRT2)) {
        snprintf(why, REASON_MAX, "Erf's argument is x %s %.9g, not x / sqrt(2)", is_div ? "/" : "*", c);
        return why;
    }
    tx_lm_set_add(&m->nodes, (size_t)p);
    tx_lm_set_add(&m->nodes, i);
    const char *a, *no;
    if ((no = match_one_plus(g, tx_lm_node(g, (int64_t)i)->outputs[0], m, &a))) return no;
    if ((no = match_half_x_times(g, a, m))) return no;
    if ((no = check_private(g, m, why))) return no;
    m->y = tx_lm_node(g, m->last)->outputs[0];
    return NULL;
}

/* ---- tanh GELU --------------------------------------------------------- */

/* Tanh i reads Mul(c, u): *p that Mul, *u, *c. */
static bool tanh_anchor(tx_rw_graph *g, size_t i, int64_t *p, const char **u, double *c)
{
    tx_rw_node *t = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(t, "", "Tanh") || t->n_inputs != 1) return false;
    *p = tx_lm_producer_op(g, t->inputs[0], "", "Mul");
    tx_rw_node *pn = tx_lm_node(g, *p);
    if (!pn) return false;
    int k = tx_lm_scalar_operand(g, pn, c);
    if (k < 0) return false;
    *u = pn->inputs[1 - k];
    return true;
}

/* v is x³: Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x). */
static bool match_cube(tx_rw_graph *g, const char *v, const char *x, tx_lm_set *s)
{
    int64_t k = tx_rw_producer(g, v, NULL);
    tx_rw_node *n = tx_lm_node(g, k);
    if (tx_lm_is(n, "", "Pow") && n->n_inputs == 2 && strcmp(n->inputs[0], x) == 0 &&
        tx_lm_scalar_is(g, n->inputs[1], 3.0)) {
        tx_lm_set_add(s, (size_t)k);
        return true;
    }
    if (!tx_lm_is(n, "", "Mul") || n->n_inputs != 2) return false;
    const char *sq = tx_lm_other_input(n, x);
    if (!sq) return false;
    int64_t q = tx_lm_producer_op(g, sq, "", "Mul");
    tx_rw_node *qn = tx_lm_node(g, q);
    if (!qn || qn->n_inputs != 2 || strcmp(qn->inputs[0], x) != 0 || strcmp(qn->inputs[1], x) != 0)
        return false;
    tx_lm_set_add(s, (size_t)k);
    tx_lm_set_add(s, (size_t)q);
    return true;
}

static const char *match_gelu_tanh(tx_rw_graph *g, size_t i, int64_t p, const char *u, double c,
                                   act_match *m, char *why)
{
    memset(m, 0, sizeof(*m));
    if (!tx_lm_close(c, SQRT_2_OVER_PI)) {
        snprintf(why, REASON_MAX, "Tanh's argument is scaled by %.9g, not sqrt(2/pi)", c);
        return why;
    }
    tx_lm_set_add(&m->nodes, (size_t)p);
    tx_lm_set_add(&m->nodes, i);
    int64_t add = tx_lm_producer_op(g, u, "", "Add");
    tx_rw_node *an = tx_lm_node(g, add);
    if (!an || an->n_inputs != 2) return "sqrt(2/pi) does not multiply a sum x + 0.044715·x³";
    /* Which operand is 0.044715·x³ decides which is x. */
    for (int k = 0; k < 2 && !m->x; k++) {
        int64_t mk = tx_lm_producer_op(g, an->inputs[k], "", "Mul");
        tx_rw_node *mn = tx_lm_node(g, mk);
        double cc;
        int sk = mn ? tx_lm_scalar_operand(g, mn, &cc) : -1;
        if (sk < 0) continue;
        const char *x = an->inputs[1 - k];
        tx_lm_set cube = {0};
        if (!match_cube(g, mn->inputs[1 - sk], x, &cube)) continue;
        if (!tx_lm_close(cc, GELU_CUBIC)) {
            snprintf(why, REASON_MAX, "the cubic term is scaled by %.9g, not 0.044715", cc);
            return why;
        }
        m->x = x;
        tx_lm_set_add(&m->nodes, (size_t)add);
        tx_lm_set_add(&m->nodes, (size_t)mk);
        for (size_t j = 0; j < cube.n; j++) tx_lm_set_add(&m->nodes, cube.idx[j]);
    }
    if (!m->x) return "sqrt(2/pi) does not multiply a sum x + 0.044715·x³";
    const char *a, *no;
    if ((no = match_one_plus(g, tx_lm_node(g, (int64_t)i)->outputs[0], m, &a))) return no;
    if ((no = match_half_x_times(g, a, m))) return no;
    if ((no = check_private(g, m, why))) return no;
    m->y = tx_lm_node(g, m->last)->outputs[0];
    return NULL;
}

/* ---- SiLU ---------------------------------------------------------------- */

/* Sigmoid i whose output multiplies its own input somewhere. */
static const char *match_silu(tx_rw_graph *g, size_t i, act_match *m, bool *anchored)
{
    memset(m, 0, sizeof(*m));
    *anchored = false;
    tx_rw_node *s = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(s, "", "Sigmoid") || s->n_inputs != 1) return "";
    const char *x = s->inputs[0], *sv = s->outputs[0];
    size_t nu = 0;
    const tx_ir_use *u = tx_rw_consumers(g, sv, &nu);
    int64_t mul = -1;
    for (size_t k = 0; k < nu && mul < 0; k++) {
        tx_rw_node *c = tx_lm_node(g, u[k].node);
        const char *o = tx_lm_is(c, "", "Mul") ? tx_lm_other_input(c, sv) : NULL;
        if (o && strcmp(o, x) == 0) mul = u[k].node;
    }
    if (mul < 0) return "";
    *anchored = true;
    if (tx_lm_sole_reader(g, sv) != mul) return "the sigmoid is also read outside x · sigmoid(x)";
    m->x = x;
    m->y = tx_lm_node(g, mul)->outputs[0];
    m->last = mul;
    tx_lm_set_add(&m->nodes, i);
    tx_lm_set_add(&m->nodes, (size_t)mul);
    return NULL;
}

/* Quick GELU (CLIP's x * sigmoid(1.702 x)): Sigmoid i reads Mul(x, 1.702)
 * and its output multiplies x. *anchored false: not this form. */
static const char *match_qgelu(tx_rw_graph *g, size_t i, act_match *m, bool *anchored,
                               char *why)
{
    memset(m, 0, sizeof(*m));
    *anchored = false;
    tx_rw_node *s = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(s, "", "Sigmoid") || s->n_inputs != 1 || s->n_outputs != 1) return "";
    int64_t k = tx_lm_producer_op(g, s->inputs[0], "", "Mul");
    tx_rw_node *kn = tx_lm_node(g, k);
    double c;
    int sk = kn ? tx_lm_scalar_operand(g, kn, &c) : -1;
    if (sk < 0) return "";
    const char *x = kn->inputs[1 - sk], *sv = s->outputs[0];
    int64_t mul = reader_op(g, sv, "Mul");
    const char *o = mul >= 0 ? tx_lm_other_input(tx_lm_node(g, mul), sv) : NULL;
    if (!o || strcmp(o, x) != 0) return "";
    *anchored = true;
    if (!tx_lm_close(c, 1.702)) {
        snprintf(why, REASON_MAX, "x * sigmoid(%.9g x) is not quick GELU (1.702)", c);
        return why;
    }
    m->x = x;
    m->y = tx_lm_node(g, mul)->outputs[0];
    m->last = mul;
    tx_lm_set_add(&m->nodes, (size_t)k);
    tx_lm_set_add(&m->nodes, i);
    tx_lm_set_add(&m->nodes, (size_t)mul);
    return check_private(g, m, why);
}

/* Replaces m->nodes by te.ops op(x) -> y (GELU gets `approximate`). */
static teexec_status *emit_act(tx_rw_graph *g, const char *op, const char *approximate,
                               const char *pattern, const char *anchor, const act_match *m,
                               tx_lower_report *r, size_t *made)
{
    char *x = tx_lm_strdup(m->x), *y = tx_lm_strdup(m->y), *an = tx_lm_strdup(anchor);
    teexec_status *st = NULL;
    if (!x || !y || !an) {
        st = tx_oom();
        goto done;
    }
    tx_lm_remove_all(g, &m->nodes);
    const char *ins[1] = {x}, *outs[1] = {y};
    const char *name = tx_rw_fresh_name(g, *an ? an : op);
    size_t idx;
    if (!name) {
        st = tx_oom();
        goto done;
    }
    st = tx_rw_add_node(g, op, "te.ops", name, ins, 1, outs, 1, &idx);
    if (!st && made) *made = idx;
    if (!st && approximate) st = tx_rw_set_string(g, idx, "approximate", approximate);
    if (!st) st = tx_lower_note_add(r, pattern, an, true, NULL);
done:
    free(x);
    free(y);
    free(an);
    return st;
}

/* ---- SwiGLU -------------------------------------------------------------- */

/* One side of the gate: value v = [Bias](Linear(X, W)). */
typedef struct glu_side {
    int64_t linear, bias; /* bias -1 when none */
    const char *in, *weight, *bias_param;
} glu_side;

static bool te_is(tx_rw_graph *g, int64_t k, const char *op)
{
    return tx_lm_is(tx_lm_node(g, k), "te.ops", op);
}

static const char *glu_side_of(tx_rw_graph *g, const char *v, glu_side *s)
{
    memset(s, 0, sizeof(*s));
    s->bias = -1;
    int64_t k = tx_rw_producer(g, v, NULL);
    if (te_is(g, k, "Bias")) {
        tx_rw_node *b = tx_lm_node(g, k);
        if (b->n_inputs != 2) return "a Bias node without its parameter";
        s->bias = k;
        s->bias_param = b->inputs[1];
        if (tx_lm_sole_reader(g, b->inputs[0]) != k) return "a Linear output is also read elsewhere";
        k = tx_rw_producer(g, b->inputs[0], NULL);
    }
    if (!te_is(g, k, "Linear")) return "the gate and up values are not both te.ops Linear outputs";
    tx_rw_node *l = tx_lm_node(g, k);
    if (l->n_inputs != 2 || !tx_lm_is_param(g, l->inputs[1]))
        return "a Linear's weight is not an initializer";
    s->linear = k;
    s->in = l->inputs[0];
    s->weight = l->inputs[1];
    return NULL;
}

/* A string attribute of node k, or NULL. */
static const char *str_attr(tx_rw_graph *g, int64_t k, const char *name)
{
    const tx_rw_attr *a = tx_rw_get_attr(g, (size_t)k, name);
    return a && a->type == TX_IR_ATTR_STRING ? a->s : NULL;
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* "a,b" from the sources of two merged tensors (an existing *_source
 * attribute, else the initializer's name). malloc'd; NULL on OOM. */
static char *join_sources(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n;
    if (!tx_add_size(la, lb, &n) || !tx_add_size(n, 2, &n)) return NULL;
    char *s = malloc(n);
    if (!s) return NULL;
    memcpy(s, a, la);
    s[la] = ',';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

/* Rows of a and b stacked: [Ra + Rb, ...]. Both must share dtype and the
 * trailing dims. */
static teexec_status *concat_rows(const tx_tensor *a, const tx_tensor *b, tx_tensor *out,
                                  const char **why)
{
    *why = NULL;
    if (a->dtype != b->dtype || a->rank != b->rank || a->rank < 1 || tx_dtype_elem_size(a->dtype) == 0) {
        *why = "the two weights (or biases) differ in type or rank";
        return NULL;
    }
    for (int32_t d = 1; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) {
            *why = "the two weights read inputs of different widths";
            return NULL;
        }
    int64_t dims[TX_MAX_RANK];
    memcpy(dims, a->dims, sizeof(int64_t) * (size_t)a->rank);
    if (__builtin_add_overflow(a->dims[0], b->dims[0], &dims[0]))
        return tx_error(TEEXEC_ERR_LIMIT, "merged weight rows overflow");
    TX_TRY(tx_tensor_alloc(out, a->dtype, a->rank, dims));
    memcpy(out->data, a->data, a->nbytes);
    memcpy((uint8_t *)out->data + a->nbytes, b->data, b->nbytes);
    return NULL;
}

typedef struct glu_plan {
    act_match m;
    glu_side gate, up;
    int64_t silu, mul;
} glu_plan;

/* The gated op of a te.ops activation: act(a) * b -> GLU op on [a | b]. */
static const char *gated_op(const tx_rw_node *n)
{
    if (tx_lm_is(n, "te.ops", "SiLU")) return "SwiGLU";
    if (tx_lm_is(n, "te.ops", "GELU")) return "GEGLU";
    if (tx_lm_is(n, "te.ops", "ReLU")) return "ReGLU";
    return NULL;
}

static const char *match_swiglu(tx_rw_graph *g, size_t i, glu_plan *p, bool *anchored, char *why)
{
    memset(p, 0, sizeof(*p));
    *anchored = false;
    tx_rw_node *s = tx_lm_node(g, (int64_t)i);
    if (!gated_op(s) || s->n_inputs < 1 || s->n_outputs < 1) return "";
    int64_t mul = reader_op(g, s->outputs[0], "Mul");
    if (mul < 0) return "";
    const char *b = tx_lm_other_input(tx_lm_node(g, mul), s->outputs[0]);
    if (!b || strcmp(b, s->outputs[0]) == 0) return "";
    *anchored = true;
    const char *no;
    if ((no = glu_side_of(g, s->inputs[0], &p->gate))) return no;
    if ((no = glu_side_of(g, b, &p->up))) return no;
    if (strcmp(p->gate.in, p->up.in) != 0) return "the gate and up Linears read different inputs";
    if ((p->gate.bias < 0) != (p->up.bias < 0)) return "only one of the gate and up Linears has a bias";
    if (p->gate.linear == p->up.linear) return "the gate and up values come from one Linear";
    const char *attrs[] = {"weight_layout", "quant_input", "quant_weight", "quant_grad_output"};
    for (size_t k = 0; k < sizeof(attrs) / sizeof(attrs[0]); k++)
        if (!same_str(str_attr(g, p->gate.linear, attrs[k]), str_attr(g, p->up.linear, attrs[k]))) {
            snprintf(why, REASON_MAX, "the gate and up Linears differ in %s", attrs[k]);
            return why;
        }
    const char *ws = str_attr(g, p->gate.linear, "weight_source");
    const char *us = str_attr(g, p->up.linear, "weight_source");
    if ((ws && strchr(ws, ',')) || (us && strchr(us, ',')))
        return "a Linear is already a merge of two";
    p->silu = (int64_t)i;
    p->mul = mul;
    act_match *m = &p->m;
    tx_lm_set_add(&m->nodes, (size_t)p->gate.linear);
    tx_lm_set_add(&m->nodes, (size_t)p->up.linear);
    if (p->gate.bias >= 0) tx_lm_set_add(&m->nodes, (size_t)p->gate.bias);
    if (p->up.bias >= 0) tx_lm_set_add(&m->nodes, (size_t)p->up.bias);
    tx_lm_set_add(&m->nodes, i);
    tx_lm_set_add(&m->nodes, (size_t)mul);
    m->last = mul;
    m->x = p->gate.in;
    m->y = tx_lm_node(g, mul)->outputs[0];
    return check_private(g, m, why);
}

/* Decodes two parameters and stacks them; *why set when they do not fit. */
static teexec_status *merged_param(tx_rw_graph *g, const char *a, const char *b, tx_tensor *out,
                                   const char **why)
{
    tx_tensor ta, tb;
    memset(out, 0, sizeof(*out));
    if (!tx_rw_constant(g, a, &ta)) {
        *why = "a weight cannot be decoded";
        return NULL;
    }
    if (!tx_rw_constant(g, b, &tb)) {
        tx_tensor_release(&ta);
        *why = "a weight cannot be decoded";
        return NULL;
    }
    teexec_status *st = NULL;
    if (ta.rank != tb.rank || ta.dims[0] != tb.dims[0])
        *why = "the gate and up widths differ (SwiGLU splits its input in equal halves)";
    else
        st = concat_rows(&ta, &tb, out, why);
    tx_tensor_release(&ta);
    tx_tensor_release(&tb);
    return st;
}

/* Adds the merged initializer and the *_source/_split annotations. */
static teexec_status *annotate_merge(tx_rw_graph *g, size_t node, const char *src_attr,
                                     const char *split_attr, const char *ga, const char *ua,
                                     const int64_t split[2])
{
    char *src = join_sources(ga, ua);
    if (!src) return tx_oom();
    teexec_status *st = tx_rw_set_string(g, node, src_attr, src);
    free(src);
    if (!st) st = tx_rw_set_ints(g, node, split_attr, split, 2);
    return st;
}

static teexec_status *emit_swiglu(tx_rw_graph *g, glu_plan *p, const char *anchor, bool *done,
                                  const char **why)
{
    *done = false;
    /* the activation's op and its approximate attribute (GELU) */
    const char *gop = gated_op(tx_lm_node(g, p->silu));
    const tx_rw_attr *apx = tx_rw_get_attr(g, (size_t)p->silu, "approximate");
    char *approx = apx && apx->type == TX_IR_ATTR_STRING ? tx_lm_strdup(apx->s) : NULL;
    if (apx && apx->type == TX_IR_ATTR_STRING && !approx) return tx_oom();
    tx_tensor w, bias;
    memset(&bias, 0, sizeof(bias));
    teexec_status *mst = merged_param(g, p->gate.weight, p->up.weight, &w, why);
    if (mst || *why) {
        free(approx);
        return mst;
    }
    if (p->gate.bias >= 0) {
        teexec_status *st = merged_param(g, p->gate.bias_param, p->up.bias_param, &bias, why);
        if (st || *why) {
            tx_tensor_release(&w);
            free(approx);
            return st;
        }
    }
    int64_t split[2] = {w.dims[0] / 2, w.dims[0] / 2};

    /* Everything read from the nodes about to go, copied first. */
    const char *gws = str_attr(g, p->gate.linear, "weight_source");
    const char *uws = str_attr(g, p->up.linear, "weight_source");
    const char *gbs = p->gate.bias >= 0 ? str_attr(g, p->gate.bias, "bias_source") : NULL;
    const char *ubs = p->up.bias >= 0 ? str_attr(g, p->up.bias, "bias_source") : NULL;
    char *s[12] = {
        tx_lm_strdup(p->gate.in),
        tx_lm_strdup(p->m.y),
        tx_lm_strdup(gws ? gws : p->gate.weight),
        tx_lm_strdup(uws ? uws : p->up.weight),
        tx_lm_strdup(p->gate.bias >= 0 ? (gbs ? gbs : p->gate.bias_param) : ""),
        tx_lm_strdup(p->up.bias >= 0 ? (ubs ? ubs : p->up.bias_param) : ""),
        tx_lm_strdup(str_attr(g, p->gate.linear, "weight_layout")),
        tx_lm_strdup(str_attr(g, p->gate.linear, "quant_input")),
        tx_lm_strdup(str_attr(g, p->gate.linear, "quant_weight")),
        tx_lm_strdup(str_attr(g, p->gate.linear, "quant_grad_output")),
        tx_lm_strdup(anchor),
        tx_lm_strdup(p->gate.weight),
    };
    const char *copy_names[4] = {"weight_layout", "quant_input", "quant_weight", "quant_grad_output"};
    bool has_bias = p->gate.bias >= 0;
    teexec_status *st = NULL;
    for (int k = 0; k < 12; k++)
        if (!s[k] && !(k >= 6 && k <= 9)) st = tx_oom();
    if (st) goto out;

    tx_lm_remove_all(g, &p->m.nodes);

    char hint[256];
    snprintf(hint, sizeof(hint), "%s_gate_up", s[11]);
    const char *wname = tx_rw_fresh_name(g, hint);
    if (!wname) {
        st = tx_oom();
        goto out;
    }
    char *wn = tx_lm_strdup(wname);
    if (!wn || (st = tx_rw_set_initializer(g, wn, &w))) {
        free(wn);
        if (!st) st = tx_oom();
        goto out;
    }
    const char *h = tx_rw_fresh_name(g, "swiglu_in");
    char *hn = tx_lm_strdup(h);
    const char *lname = tx_rw_fresh_name(g, *s[10] ? s[10] : "Linear");
    char *ln = tx_lm_strdup(lname);
    size_t li;
    if (!hn || !ln) st = tx_oom();
    if (!st) {
        const char *ins[2] = {s[0], wn}, *outs[1] = {hn};
        st = tx_rw_add_node(g, "Linear", "te.ops", ln, ins, 2, outs, 1, &li);
    }
    if (!st) st = annotate_merge(g, li, "weight_source", "weight_split", s[2], s[3], split);
    for (int k = 0; k < 4 && !st; k++)
        if (s[6 + k]) st = tx_rw_set_string(g, li, copy_names[k], s[6 + k]);
    char *swin = hn;
    char *bn = NULL, *bo = NULL;
    if (!st && has_bias) {
        const char *bname = tx_rw_fresh_name(g, "swiglu_bias");
        bn = tx_lm_strdup(bname);
        if (!bn) st = tx_oom();
        if (!st) st = tx_rw_set_initializer(g, bn, &bias);
        if (!st) {
            bo = tx_lm_strdup(tx_rw_fresh_name(g, "swiglu_in_biased"));
            if (!bo) st = tx_oom();
        }
        size_t bi;
        if (!st) {
            const char *ins[2] = {hn, bn}, *outs[1] = {bo};
            st = tx_rw_add_node(g, "Bias", "te.ops", tx_rw_fresh_name(g, "Bias"), ins, 2, outs, 1,
                                &bi);
        }
        if (!st) st = annotate_merge(g, bi, "bias_source", "bias_split", s[4], s[5], split);
        swin = bo;
    }
    if (!st) {
        const char *ins[1] = {swin}, *outs[1] = {s[1]};
        size_t gi = 0;
        st = tx_rw_add_node(g, gop, "te.ops", tx_rw_fresh_name(g, gop), ins, 1, outs, 1, &gi);
        if (!st && approx && strcmp(gop, "GEGLU") == 0)
            st = tx_rw_set_string(g, gi, "approximate", approx);
    }
    if (!st) *done = true;
    free(wn);
    free(hn);
    free(ln);
    free(bn);
    free(bo);
out:
    for (int k = 0; k < 12; k++) free(s[k]);
    tx_tensor_release(&w);
    tx_tensor_release(&bias);
    free(approx);
    return st;
}

/* ---- the ONNX activation ops ---------------------------------------------- */

/* Gelu (opset 20, approximate "none" | "tanh") -> GELU, Relu -> ReLU: the
 * same functions, one node for one. *anchored false: not such a node.
 * Declined: an input known not to be a float tensor (Relu takes ints). */
static teexec_status *lower_op(tx_rw_graph *g, size_t i, tx_lower_report *r)
{
    tx_rw_node *n = tx_lm_node(g, (int64_t)i);
    bool gelu = tx_lm_is(n, "", "Gelu"), relu = tx_lm_is(n, "", "Relu");
    if ((!gelu && !relu) || n->n_inputs != 1 || n->n_outputs != 1) return NULL;
    const char *pattern = relu ? "ReLU" : "GELU(none)";
    const char *approx = "none";
    const tx_rw_attr *a = gelu ? tx_rw_get_attr(g, i, "approximate") : NULL;
    if (a) {
        if (a->type != TX_IR_ATTR_STRING || (strcmp(a->s, "none") && strcmp(a->s, "tanh")))
            return tx_lower_note_add(r, "GELU", n->name, false,
                                     "approximate is neither \"none\" nor \"tanh\"");
        approx = strcmp(a->s, "tanh") == 0 ? "tanh" : "none";
        if (approx[0] == 't') pattern = "GELU(tanh)";
    }
    teexec_dtype dt;
    tx_shape sh;
    bool known = false;
    TX_TRY(tx_lower_type_of(g, n->inputs[0], &dt, &sh, &known));
    if (known && dt != TEEXEC_DTYPE_UNDEFINED && !tx_dtype_is_real(dt))
        return tx_lower_note_add(r, pattern, n->name, false,
                                 "the input is not a float tensor");
    act_match m;
    memset(&m, 0, sizeof m);
    m.x = n->inputs[0];
    m.y = n->outputs[0];
    m.last = (int64_t)i;
    tx_lm_set_add(&m.nodes, i);
    return emit_act(g, relu ? "ReLU" : "GELU", gelu ? approx : NULL, pattern, n->name, &m, r,
                    NULL);
}

/* ---- ConstantScale --------------------------------------------------------- */

/* y = Mul(x, c) of the main output x of a te.ops node and a one-element
 * float constant c (Gemma's embedding times sqrt(h)) -> ConstantScale(x,
 * scale = c), so the chain goes on. Only when c is a float32 number
 * exactly (the attribute is float32). Left alone (no note) otherwise. */
static teexec_status *lower_scale(tx_rw_graph *g, size_t i, tx_lower_report *r)
{
    tx_rw_node *n = tx_lm_node(g, (int64_t)i);
    if (!tx_lm_is(n, "", "Mul") || n->n_inputs != 2 || n->n_outputs != 1) return NULL;
    double c;
    int k = tx_lm_scalar_operand(g, n, &c);
    if (k < 0 || !isfinite(c) || (double)(float)c != c) return NULL;
    const char *x = n->inputs[1 - k];
    size_t slot = 0;
    tx_rw_node *p = tx_lm_node(g, tx_rw_producer(g, x, &slot));
    if (!p || slot != 0 || !tx_lm_is(p, "te.ops", p->op_type) || tx_rw_is_initializer(g, x))
        return NULL;
    tx_tensor t;
    if (!tx_rw_constant(g, n->inputs[k], &t)) return NULL;
    bool f32 = t.dtype == TEEXEC_DTYPE_FLOAT;
    tx_tensor_release(&t);
    if (!f32) return NULL;
    act_match m;
    memset(&m, 0, sizeof m);
    m.x = x;
    m.y = n->outputs[0];
    m.last = (int64_t)i;
    tx_lm_set_add(&m.nodes, i);
    char *anchor = tx_lm_strdup(n->name);
    if (!anchor) return tx_oom();
    size_t made = 0;
    teexec_status *st = emit_act(g, "ConstantScale", NULL, "ConstantScale", anchor, &m, r, &made);
    if (!st) st = tx_rw_set_float(g, made, "scale", (float)c);
    free(anchor);
    return st;
}

/* ---- the pass -------------------------------------------------------------- */

teexec_status *tx_lower_activations(tx_rw_graph *g, tx_lower_report *r)
{
    char why[REASON_MAX];
    act_match m;

    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        int64_t p;
        const char *x;
        bool is_div;
        double c;
        if (!erf_anchor(g, i, &p, &x, &is_div, &c)) continue;
        const char *anchor = tx_lm_node(g, p)->name;
        const char *no = match_gelu_erf(g, i, p, x, is_div, c, &m, why);
        TX_TRY(no ? tx_lower_note_add(r, "GELU(none)", anchor, false, no)
                  : emit_act(g, "GELU", "none", "GELU(none)", anchor, &m, r, NULL));
    }
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        int64_t p;
        const char *u;
        double c;
        if (!tanh_anchor(g, i, &p, &u, &c)) continue;
        /* The anchor named in notes is the first node of the formula. */
        const char *no = match_gelu_tanh(g, i, p, u, c, &m, why);
        int64_t first = m.nodes.n ? (int64_t)tx_lm_set_first(&m.nodes) : p;
        const char *anchor = tx_lm_node(g, first)->name;
        TX_TRY(no ? tx_lower_note_add(r, "GELU(tanh)", anchor, false, no)
                  : emit_act(g, "GELU", "tanh", "GELU(tanh)", anchor, &m, r, NULL));
    }
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        bool anchored;
        const char *no = match_qgelu(g, i, &m, &anchored, why);
        if (!anchored) continue;
        const char *anchor = tx_lm_node(g, (int64_t)i)->name;
        TX_TRY(no ? tx_lower_note_add(r, "QGELU", anchor, false, no)
                  : emit_act(g, "QGELU", NULL, "QGELU", anchor, &m, r, NULL));
    }
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        bool anchored;
        const char *no = match_silu(g, i, &m, &anchored);
        if (!anchored) continue;
        const char *anchor = tx_lm_node(g, (int64_t)i)->name;
        TX_TRY(no ? tx_lower_note_add(r, "SiLU", anchor, false, no)
                  : emit_act(g, "SiLU", NULL, "SiLU", anchor, &m, r, NULL));
    }
    for (size_t i = 0; i < tx_rw_node_count(g); i++) TX_TRY(lower_op(g, i, r));
    for (size_t i = 0; i < tx_rw_node_count(g); i++) TX_TRY(lower_scale(g, i, r));
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        glu_plan plan;
        bool anchored;
        const char *no = match_swiglu(g, i, &plan, &anchored, why);
        if (!anchored) continue;
        int64_t first = no ? (int64_t)i : plan.gate.linear;
        char *anchor = tx_lm_strdup(tx_lm_node(g, first)->name);
        const char *gop = gated_op(tx_lm_node(g, (int64_t)i));
        if (!anchor) return tx_oom();
        teexec_status *st = NULL;
        if (!no) {
            bool done;
            st = emit_swiglu(g, &plan, anchor, &done, &no);
            if (!st && done) st = tx_lower_note_add(r, gop, anchor, true, NULL);
        }
        if (!st && no) st = tx_lower_note_add(r, gop, anchor, false, no);
        free(anchor);
        TX_TRY(st);
    }
    return NULL;
}
