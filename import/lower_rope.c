/*
 * lower_rope.c - tx_lower_rope (import/lower.h): rotary position embedding
 * written as torch code and exported by PyTorch,
 *     y = x*cos + rotate_half(x)*sin,
 *     rotate_half(x) = Concat(Neg(x[..., d/2:]), x[..., :d/2]) on the last axis
 * (Mul by -1 in place of Neg, either operand order of the Muls and the
 * Add), with cos and sin constant tables (initializers, Constant nodes, or
 * constant subgraphs over them such as Slice / Gather / Unsqueeze, folded
 * by const_eval.h) -> one te.ops RotaryEmbedding (halves, interleaved 0)
 * reading a new freqs initializer [s, d].
 *
 * Why freqs and not `base`: the op computes y[j] = x[j]·cos f[j] +
 * rot(x)[j]·sin f[j] per position and channel, which is the torch formula
 * exactly when the tables are cos and sin of one angle table f. So the
 * tables are accepted when cos² + sin² = 1 within float32 rounding at every
 * entry (anything else, e.g. a table scaled by an attention factor, cannot
 * be written as angles: noted, not lowered), and f = atan2(sin, cos) is
 * taken from the tables themselves. Recomputing the angles from a base
 * would not reproduce the user's tables bit for bit (PyTorch rounds the
 * angles to float32 before cos/sin), and unwrapped angles pos·θ lose
 * precision in float32 at long positions, while angles in [-π, π] keep the
 * table's own precision. The q and k tables, equal in value, share one
 * freqs initializer.
 *
 * Partial rotation (GPT-NeoX, Phi): when x is X[..., :r] and the result
 * only meets X[..., r:] in a Concat on the last axis, the op reads X and
 * its [s, r] angles rotate the first r channels, passing the rest through:
 * the slices and the Concat go.
 *
 * Layout: the tables broadcast against x [.., .., .., d]; the one axis on
 * which they vary (besides the last) is the position axis: 1 -> bshd, 0 ->
 * sbhd, 2 -> x is [b, h, s, d] (the usual q.transpose(1, 2) before the
 * rotary embedding): the op reads the bshd tensor (the input of that
 * Transpose(0,2,1,3), or a new one) and a Transpose(0,2,1,3) after it gives
 * the original output; when that output's only reader is itself a
 * Transpose(0,2,1,3) back to bshd (the one the attention pass puts in front
 * of a DotProductAttention operand, which runs first), the two cancel and
 * the op writes that reader's output directly.
 *
 * Nodes of the match are removed only when their values are read inside
 * it; the constant subgraphs that fed them go when nothing reads them.
 */
#include "import/lower.h"

#include "import/const_eval.h"
#include "import/lower_match.h"
#include "import/lower_shape.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATTERN "RotaryEmbedding"
/* Max |cos² + sin² − 1| of a table that is cos/sin of one angle: each entry
 * rounded to float32 moves the sum by about 2 ulps of 1. */
#define UNIT_TOL (8.0 * (double)FLT_EPSILON)

typedef struct rope_match {
    int64_t concat, neg, slice_hi, slice_lo, mul_rot, mul_x, add;
    /* partial rotation: x = X[..., :r], out = Concat(rope(x), X[..., r:]) */
    int64_t part_lo, part_hi, part_cat; /* -1 when the whole head rotates */
    const char *x, *cos_v, *sin_v, *out;
    tx_shape xs;
    int seq_axis; /* of x: 0 sbhd, 1 bshd, 2 bhsd */
    int64_t s, d;
    teexec_dtype dtype;
    double *freqs; /* [s, d], malloc'd */
    char reason[320];
} rope_match;

/* freqs initializers this pass made, to share equal tables. */
typedef struct made_freqs {
    char *name;
    double *v;
    int64_t s, d;
    teexec_dtype dtype;
} made_freqs;

typedef struct rope_pass {
    made_freqs *made;
    size_t n_made, cap_made;
} rope_pass;

static bool fail(rope_match *m, const char *fmt, ...) TX_PRINTF(2, 3);
static bool fail(rope_match *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->reason, sizeof m->reason, fmt, ap);
    va_end(ap);
    return false;
}

static const char *label(const tx_rw_node *n)
{
    return n->name && n->name[0] ? n->name : (n->n_outputs ? n->outputs[0] : "?");
}

static const tx_rw_attr *find_attr(const tx_rw_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

/* Neg(a) or Mul(a, -1) / Mul(-1, a): the negated value a, else NULL. */
static const char *negated(tx_rw_graph *g, const char *value, int64_t *node)
{
    int64_t p = tx_lm_producer_op(g, value, "", "Neg");
    if (p >= 0) {
        tx_rw_node *n = tx_lm_node(g, p);
        if (n->n_inputs != 1) return NULL;
        *node = p;
        return n->inputs[0];
    }
    p = tx_lm_producer_op(g, value, "", "Mul");
    if (p < 0) return NULL;
    tx_rw_node *n = tx_lm_node(g, p);
    double c;
    int k = tx_lm_scalar_operand(g, n, &c);
    if (k < 0 || c != -1.0) return NULL;
    *node = p;
    return n->inputs[1 - k];
}

/* A Slice (opset >= 10 form) of the last axis of a rank-`rank`, last dim
 * `d` tensor with step 1: its [*lo, *hi) after ONNX's clamping. */
static bool last_axis_slice(tx_rw_graph *g, const tx_rw_node *n, int32_t rank, int64_t d,
                            int64_t *lo, int64_t *hi)
{
    if (n->n_inputs < 3 || find_attr(n, "starts")) return false;
    int64_t st[2], en[2], ax[2], sp[2];
    size_t ns = 0, ne = 0, na = 0, nsp = 0;
    if (!tx_ce_ints(g, n->inputs[1], st, 2, &ns) || !tx_ce_ints(g, n->inputs[2], en, 2, &ne) ||
        ns != 1 || ne != 1)
        return false;
    int64_t axis = 0;
    if (n->n_inputs > 3 && n->inputs[3][0]) {
        if (!tx_ce_ints(g, n->inputs[3], ax, 2, &na) || na != 1) return false;
        axis = ax[0] < 0 ? ax[0] + rank : ax[0];
    }
    if (axis != rank - 1) return false;
    if (n->n_inputs > 4 && n->inputs[4][0] &&
        (!tx_ce_ints(g, n->inputs[4], sp, 2, &nsp) || nsp != 1 || sp[0] != 1))
        return false;
    int64_t b = st[0], e = en[0];
    /* INT64 sentinels for "to the end" stay far outside [-d, d] */
    if (b < 0) b = b < -d ? 0 : b + d;
    if (e < 0) e = e < -d ? 0 : e + d;
    *lo = b > d ? d : b;
    *hi = e > d ? d : e;
    return true;
}

/* The dtype of a constant table: the constant it was computed from, through
 * the data-movement ops PyTorch puts between a buffer and its use (Cast
 * decides it when present). UNDEFINED when unknown. */
static teexec_dtype table_dtype(tx_rw_graph *g, const char *value)
{
    static const char *const moves[] = {"Slice",   "Gather",  "Unsqueeze", "Squeeze",
                                        "Reshape", "Expand",  "Transpose", "Identity",
                                        "Flatten", "Concat"};
    for (int guard = 0; guard < 16 && value && value[0]; guard++) {
        tx_tensor t;
        if (tx_rw_constant(g, value, &t)) {
            teexec_dtype dt = t.dtype;
            tx_tensor_release(&t);
            return dt;
        }
        tx_rw_node *p = tx_lm_node(g, tx_rw_producer(g, value, NULL));
        if (!p || p->domain[0] || p->n_inputs < 1) return TEEXEC_DTYPE_UNDEFINED;
        if (!strcmp(p->op_type, "Cast")) {
            const tx_rw_attr *to = find_attr(p, "to");
            return to && to->type == TX_IR_ATTR_INT ? (teexec_dtype)to->i
                                                   : TEEXEC_DTYPE_UNDEFINED;
        }
        bool move = false;
        for (size_t i = 0; i < sizeof moves / sizeof *moves && !move; i++)
            move = !strcmp(p->op_type, moves[i]);
        if (!move) return TEEXEC_DTYPE_UNDEFINED;
        value = p->inputs[0];
    }
    return TEEXEC_DTYPE_UNDEFINED;
}

/* The position axis of x from a table's broadcast shape, or -1 (reason set). */
static int position_axis(rope_match *m, const tx_ce_value *t, const char *which)
{
    if (t->rank > 4)
        return fail(m, "the %s table has rank %d, more than x's 4", which, (int)t->rank), -1;
    int64_t td[4];
    for (int k = 0; k < 4; k++) td[k] = k >= 4 - t->rank ? t->dims[k - (4 - t->rank)] : 1;
    if (td[3] != m->d)
        return fail(m, "the %s table's last dim is %lld, not the head dim %lld (a rotary "
                       "embedding over part of the head is not this pattern)",
                    which, (long long)td[3], (long long)m->d), -1;
    int axis = -1;
    for (int k = 0; k < 3; k++) {
        if (td[k] == 1) continue;
        if (axis >= 0)
            return fail(m, "the %s table varies along two axes besides the last (not one "
                           "angle per position)", which), -1;
        axis = k;
    }
    if (axis < 0)
        return fail(m, "the %s table does not vary with position (no position axis to "
                       "read it by)", which), -1;
    if (td[axis] != m->xs.dims[axis])
        return fail(m, "the %s table has %lld positions, x has %lld", which,
                    (long long)td[axis], (long long)m->xs.dims[axis]), -1;
    return axis;
}

/* Reads the tables, checks they are cos and sin of one angle table and
 * fills m->freqs. Status only for allocation failures. */
static teexec_status *angles(tx_rw_graph *g, rope_match *m, bool *ok)
{
    *ok = false;
    tx_ce_value c = {0}, s = {0};
    bool cc = false, sc = false;
    teexec_status *st = tx_ce_eval(g, m->cos_v, &c, &cc);
    if (!st) st = tx_ce_eval(g, m->sin_v, &s, &sc);
    if (st) goto done;
    if (!cc || !sc) {
        fail(m, "the %s table \"%s\" is not a constant", !cc ? "cos" : "sin",
             !cc ? m->cos_v : m->sin_v);
        goto done;
    }
    int ac = position_axis(m, &c, "cos");
    if (ac < 0) goto done;
    int as = position_axis(m, &s, "sin");
    if (as < 0) goto done;
    if (ac != as) {
        fail(m, "the cos and sin tables have different position axes");
        goto done;
    }
    m->seq_axis = ac;
    m->s = m->xs.dims[ac];
    uint64_t n = (uint64_t)m->s * (uint64_t)m->d;
    if (c.n != n || s.n != n) { /* position_axis makes this hold; kept for safety */
        fail(m, "the cos/sin tables have %llu and %llu entries, expected %llu",
             (unsigned long long)c.n, (unsigned long long)s.n, (unsigned long long)n);
        goto done;
    }
    m->dtype = table_dtype(g, m->cos_v);
    if (m->dtype == TEEXEC_DTYPE_UNDEFINED) m->dtype = table_dtype(g, m->sin_v);
    if (m->dtype != TEEXEC_DTYPE_FLOAT && m->dtype != TEEXEC_DTYPE_DOUBLE) {
        fail(m, "the cos/sin tables are not float32 or float64 (dtype %d): angles in that type "
                "would not reproduce them", (int)m->dtype);
        goto done;
    }
    m->freqs = malloc((size_t)n * sizeof *m->freqs);
    if (!m->freqs) {
        st = tx_oom();
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        double cv = c.v[i], sv = s.v[i], r = cv * cv + sv * sv;
        if (!isfinite(r) || fabs(r - 1.0) > UNIT_TOL) {
            fail(m, "the tables are not cos and sin of one angle: at position %lld, channel "
                    "%lld cos^2 + sin^2 = %.9g",
                 (long long)(i / (uint64_t)m->d), (long long)(i % (uint64_t)m->d), r);
            free(m->freqs);
            m->freqs = NULL;
            goto done;
        }
        m->freqs[i] = atan2(sv, cv);
    }
    *ok = true;
done:
    tx_ce_release(&c);
    tx_ce_release(&s);
    return st;
}

/* Structure from the Concat at ci. Returns false without a reason when the
 * Concat is not a rotate_half at all, with m->reason when it is one but
 * the rest does not fit. Status only for allocation failures. */
static teexec_status *match_partial(tx_rw_graph *g, rope_match *m);

static teexec_status *match_at(tx_rw_graph *g, size_t ci, rope_match *m, bool *ok)
{
    *ok = false;
    tx_rw_node *cat = tx_lm_node(g, (int64_t)ci);
    if (!tx_lm_is(cat, "", "Concat") || cat->n_inputs != 2 || cat->n_outputs < 1) return NULL;
    m->concat = (int64_t)ci;
    const char *hi_v = negated(g, cat->inputs[0], &m->neg);
    if (!hi_v) return NULL;
    m->slice_hi = tx_lm_producer_op(g, hi_v, "", "Slice");
    m->slice_lo = tx_lm_producer_op(g, cat->inputs[1], "", "Slice");
    if (m->slice_hi < 0 || m->slice_lo < 0) return NULL;
    tx_rw_node *shi = tx_lm_node(g, m->slice_hi), *slo = tx_lm_node(g, m->slice_lo);
    if (shi->n_inputs < 1 || slo->n_inputs < 1 || shi->n_outputs < 1 || slo->n_outputs < 1 ||
        tx_lm_node(g, m->neg)->n_outputs < 1 || strcmp(shi->inputs[0], slo->inputs[0]) != 0)
        return NULL;
    m->x = shi->inputs[0];
    /* From here on it looks like rotate_half: say why when it is not lowered. */
    bool known = false;
    teexec_status *st = tx_lower_shape_of(g, m->x, &m->xs, &known);
    if (st) return st;
    if (!known || m->xs.rank != 4) {
        fail(m, "x \"%s\" has no static rank-4 shape", m->x);
        return NULL;
    }
    m->d = m->xs.dims[3];
    if (m->d < 2 || m->d % 2) {
        fail(m, "the head dim %lld is not even", (long long)m->d);
        return NULL;
    }
    const tx_rw_attr *axis = find_attr(cat, "axis");
    if (!axis || axis->type != TX_IR_ATTR_INT || (axis->i != -1 && axis->i != 3)) {
        fail(m, "the Concat is not on the last axis");
        return NULL;
    }
    int64_t a0, a1, b0, b1, h = m->d / 2;
    if (!last_axis_slice(g, shi, 4, m->d, &a0, &a1) ||
        !last_axis_slice(g, slo, 4, m->d, &b0, &b1) || a0 != h || a1 != m->d || b0 != 0 ||
        b1 != h) {
        fail(m, "the slices are not x[..., %lld:] and x[..., :%lld] (interleaved or partial "
                "rotation is not this pattern)", (long long)h, (long long)h);
        return NULL;
    }
    /* The intermediate values must die with the match. */
    if (tx_lm_sole_reader(g, shi->outputs[0]) != m->neg ||
        tx_lm_sole_reader(g, tx_lm_node(g, m->neg)->outputs[0]) != (int64_t)ci ||
        tx_lm_sole_reader(g, slo->outputs[0]) != (int64_t)ci) {
        fail(m, "a half of x is also read outside the rotation");
        return NULL;
    }
    const char *rot = cat->outputs[0];
    m->mul_rot = tx_lm_sole_reader(g, rot);
    tx_rw_node *mr = tx_lm_node(g, m->mul_rot);
    if (!tx_lm_is(mr, "", "Mul") || mr->n_outputs < 1) {
        fail(m, "rotate_half(x) is not only multiplied by a sin table");
        return NULL;
    }
    m->sin_v = tx_lm_other_input(mr, rot);
    m->add = tx_lm_sole_reader(g, mr->outputs[0]);
    tx_rw_node *ad = tx_lm_node(g, m->add);
    if (!m->sin_v || !tx_lm_is(ad, "", "Add") || ad->n_outputs < 1) {
        fail(m, "rotate_half(x)*sin is not only added to x*cos");
        return NULL;
    }
    const char *xc = tx_lm_other_input(ad, mr->outputs[0]);
    m->mul_x = xc ? tx_lm_producer_op(g, xc, "", "Mul") : -1;
    tx_rw_node *mx = tx_lm_node(g, m->mul_x);
    m->cos_v = mx ? tx_lm_other_input(mx, m->x) : NULL;
    if (!m->cos_v || m->mul_x == m->mul_rot || tx_lm_sole_reader(g, xc) != m->add) {
        fail(m, "the other addend is not x*cos read only by the Add");
        return NULL;
    }
    m->out = ad->outputs[0];
    st = angles(g, m, ok);
    if (!st && *ok) st = match_partial(g, m);
    return st;
}

/* Partial rotation (GPT-NeoX, Phi: the first r channels of each head
 * rotate, the rest pass through): x = Slice(X, [0, r)) on the last axis,
 * the result only read by Concat(result, Slice(X, [r, D))). RotaryEmbedding
 * with [s, r] angles passes channels >= r through itself, so it takes X and
 * writes the Concat's output. Sets m->x, m->xs, m->out and the part_*
 * nodes; leaves m unchanged when this is not the form. */
static teexec_status *match_partial(tx_rw_graph *g, rope_match *m)
{
    int64_t lo = tx_lm_producer_op(g, m->x, "", "Slice");
    tx_rw_node *ln = tx_lm_node(g, lo);
    if (!ln || ln->n_inputs < 1) return NULL;
    const char *big = ln->inputs[0];
    tx_shape bs;
    bool known = false;
    TX_TRY(tx_lower_shape_of(g, big, &bs, &known));
    int64_t D = known && bs.rank == 4 ? bs.dims[3] : -1, a0, a1, b0, b1;
    if (D <= m->d || !last_axis_slice(g, ln, 4, D, &a0, &a1) || a0 != 0 || a1 != m->d) return NULL;
    int64_t cat = tx_lm_sole_reader(g, m->out);
    tx_rw_node *cn = tx_lm_node(g, cat);
    const tx_rw_attr *axis = cn ? find_attr(cn, "axis") : NULL;
    if (!tx_lm_is(cn, "", "Concat") || cn->n_inputs != 2 || cn->n_outputs != 1 ||
        strcmp(cn->inputs[0], m->out) != 0 || !axis || axis->type != TX_IR_ATTR_INT ||
        (axis->i != -1 && axis->i != 3))
        return NULL;
    int64_t hi = tx_lm_producer_op(g, cn->inputs[1], "", "Slice");
    tx_rw_node *hn = tx_lm_node(g, hi);
    if (!hn || hn->n_inputs < 1 || strcmp(hn->inputs[0], big) != 0 ||
        !last_axis_slice(g, hn, 4, D, &b0, &b1) || b0 != m->d || b1 != D ||
        tx_lm_sole_reader(g, cn->inputs[1]) != cat)
        return NULL;
    /* x[..., :r] is read by the rotation's own nodes only */
    tx_lm_set own = {0};
    tx_lm_set_add(&own, (size_t)m->slice_hi);
    tx_lm_set_add(&own, (size_t)m->slice_lo);
    tx_lm_set_add(&own, (size_t)m->mul_x);
    if (!tx_lm_reads_only_within(g, m->x, &own)) return NULL;
    m->part_lo = lo;
    m->part_hi = hi;
    m->part_cat = cat;
    m->x = big;
    m->xs = bs;
    m->out = cn->outputs[0];
    return NULL;
}

/* Producer of `value` when it is a Transpose(0,2,1,3), else NULL. */
static const char *untransposed(tx_rw_graph *g, const char *value)
{
    tx_rw_node *p = tx_lm_node(g, tx_lm_producer_op(g, value, "", "Transpose"));
    if (!p || p->n_inputs != 1) return NULL;
    const tx_rw_attr *pa = find_attr(p, "perm");
    if (!pa || pa->type != TX_IR_ATTR_INTS || pa->n_ints != 4 || pa->ints[0] != 0 ||
        pa->ints[1] != 2 || pa->ints[2] != 1 || pa->ints[3] != 3)
        return NULL;
    return p->inputs[0];
}

/* Removes the producers of `names` once nothing reads any of their outputs,
 * and then their own feeders (the constants and folded shape arithmetic
 * only the match read). */
static void remove_dead_feeders(tx_rw_graph *g, char **names, size_t n, int depth)
{
    if (depth > 64) return;
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || !names[i][0]) continue;
        int64_t pi = tx_rw_producer(g, names[i], NULL);
        tx_rw_node *p = tx_lm_node(g, pi);
        if (!p) continue;
        bool used = false;
        for (size_t o = 0; o < p->n_outputs && !used; o++) {
            size_t nc = 0;
            if (!p->outputs[o][0]) continue;
            (void)tx_rw_consumers(g, p->outputs[o], &nc);
            used = nc > 0 || tx_rw_is_graph_output(g, p->outputs[o]);
        }
        if (used) continue;
        size_t nin = p->n_inputs;
        char **ins = calloc(nin ? nin : 1, sizeof *ins);
        bool copied = ins != NULL;
        for (size_t k = 0; copied && k < nin; k++) {
            ins[k] = tx_lm_strdup(p->inputs[k]);
            if (!ins[k]) copied = false;
        }
        tx_rw_remove_node(g, (size_t)pi);
        /* without the copy (out of memory) the feeders merely stay: harmless */
        if (copied) remove_dead_feeders(g, ins, nin, depth + 1);
        for (size_t k = 0; ins && k < nin; k++) free(ins[k]);
        free(ins);
    }
}

/* The freqs initializer for m: one made earlier with equal values, or a
 * new one. *name points into g or pass storage (valid until the pass ends). */
static teexec_status *freqs_initializer(tx_rw_graph *g, rope_pass *ps, rope_match *m,
                                        const char *hint, const char **name)
{
    size_t n = (size_t)m->s * (size_t)m->d;
    for (size_t i = 0; i < ps->n_made; i++) {
        made_freqs *f = &ps->made[i];
        if (f->s == m->s && f->d == m->d && f->dtype == m->dtype &&
            memcmp(f->v, m->freqs, n * sizeof *f->v) == 0) {
            *name = f->name;
            return NULL;
        }
    }
    if (ps->n_made == ps->cap_made) {
        size_t cap = ps->cap_made ? 2 * ps->cap_made : 4;
        made_freqs *nm = realloc(ps->made, cap * sizeof *nm);
        if (!nm) return tx_oom();
        ps->made = nm;
        ps->cap_made = cap;
    }
    char buf[320];
    snprintf(buf, sizeof buf, "%s/rope_freqs", hint);
    const char *fresh = tx_rw_fresh_name(g, buf);
    char *nmc = fresh ? tx_lm_strdup(fresh) : NULL;
    if (!nmc) return tx_oom();
    tx_tensor t;
    int64_t dims[2] = {m->s, m->d};
    teexec_status *st = tx_tensor_alloc(&t, m->dtype, 2, dims);
    if (st) {
        free(nmc);
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        if (m->dtype == TEEXEC_DTYPE_DOUBLE) ((double *)t.data)[i] = m->freqs[i];
        else ((float *)t.data)[i] = (float)m->freqs[i];
    }
    st = tx_rw_set_initializer(g, nmc, &t);
    tx_tensor_release(&t);
    if (st) {
        free(nmc);
        return st;
    }
    /* the match's array moves into the pass's list */
    ps->made[ps->n_made++] = (made_freqs){nmc, m->freqs, m->s, m->d, m->dtype};
    m->freqs = NULL;
    *name = nmc;
    return NULL;
}

static teexec_status *add_transpose(tx_rw_graph *g, const char *in, const char *out,
                                    const char *node_hint)
{
    const char *nn = tx_rw_fresh_name(g, node_hint);
    if (!nn) return tx_oom();
    const char *ins[1] = {in}, *outs[1] = {out};
    size_t idx = 0;
    teexec_status *st = tx_rw_add_node(g, "Transpose", "", nn, ins, 1, outs, 1, &idx);
    static const int64_t perm[4] = {0, 2, 1, 3};
    if (!st) st = tx_rw_set_ints(g, idx, "perm", perm, 4);
    return st;
}

static teexec_status *rewrite(tx_rw_graph *g, rope_pass *ps, rope_match *m, const char *anchor)
{
    teexec_status *st = NULL;
    int64_t nodes[10] = {m->concat, m->neg,  m->slice_hi, m->slice_lo, m->mul_rot,
                         m->mul_x,  m->add,  m->part_lo,  m->part_hi,  m->part_cat};
    /* copies: node arrays move when nodes are added */
    const char *src = m->seq_axis == 2 ? untransposed(g, m->x) : NULL;
    /* a reader that transposes the bhsd result back to bshd cancels the
     * Transpose the op would need after it */
    int64_t back = m->seq_axis == 2 ? tx_lm_sole_reader(g, m->out) : -1;
    tx_rw_node *bn = tx_lm_node(g, back);
    if (bn && (bn->n_outputs != 1 || !untransposed(g, bn->outputs[0]))) back = -1;
    char *xin = tx_lm_strdup(src ? src : m->x), *xv = tx_lm_strdup(m->x);
    char *out = tx_lm_strdup(back >= 0 ? bn->outputs[0] : m->out);
    char *feeders[32] = {0};
    size_t nf = 0;
    if (!xin || !xv || !out) st = tx_oom();
    for (size_t k = 0; k < 10 && !st; k++) {
        const tx_rw_node *n = tx_lm_node(g, nodes[k]);
        for (size_t i = 0; n && i < n->n_inputs && nf < 32 && !st; i++) {
            if (!n->inputs[i][0]) continue;
            feeders[nf] = tx_lm_strdup(n->inputs[i]);
            if (!feeders[nf++]) st = tx_oom();
        }
    }
    if (st) goto done;
    for (size_t k = 0; k < 10; k++)
        if (nodes[k] >= 0) tx_rw_remove_node(g, (size_t)nodes[k]);
    if (back >= 0) tx_rw_remove_node(g, (size_t)back);

    const char *freqs = NULL;
    st = freqs_initializer(g, ps, m, anchor, &freqs);
    if (st) goto done;
    char buf[320];
    const char *rope_in = xin, *rope_out = out;
    char *tmp_in = NULL, *tmp_out = NULL;
    if (m->seq_axis == 2) {
        if (!src) {
            snprintf(buf, sizeof buf, "%s/rope_in_bshd", anchor);
            const char *f = tx_rw_fresh_name(g, buf);
            tmp_in = f ? tx_lm_strdup(f) : NULL;
            if (!tmp_in) st = tx_oom();
            snprintf(buf, sizeof buf, "%s/Transpose_rope_in", anchor);
            if (!st) st = add_transpose(g, xin, tmp_in, buf);
            rope_in = tmp_in;
        }
        if (back < 0) {
            snprintf(buf, sizeof buf, "%s/rope_bshd", anchor);
            const char *f = st ? NULL : tx_rw_fresh_name(g, buf);
            tmp_out = f ? tx_lm_strdup(f) : NULL;
            if (!st && !tmp_out) st = tx_oom();
            rope_out = tmp_out;
        }
    }
    if (!st) {
        snprintf(buf, sizeof buf, "%s/RotaryEmbedding", anchor);
        const char *nn = tx_rw_fresh_name(g, buf);
        const char *ins[2] = {rope_in, freqs}, *outs[1] = {rope_out};
        size_t idx = 0;
        st = nn ? tx_rw_add_node(g, PATTERN, "te.ops", nn, ins, 2, outs, 1, &idx) : tx_oom();
        if (!st)
            st = tx_rw_set_string(g, idx, "qkv_format", m->seq_axis == 0 ? "sbhd" : "bshd");
        if (!st) st = tx_rw_set_int(g, idx, "interleaved", 0);
    }
    if (!st && m->seq_axis == 2 && back < 0) {
        snprintf(buf, sizeof buf, "%s/Transpose_rope_out", anchor);
        st = add_transpose(g, tmp_out, out, buf);
    }
    free(tmp_in);
    free(tmp_out);
    if (!st) {
        remove_dead_feeders(g, feeders, nf, 0);
        char *xs[1] = {xv};
        remove_dead_feeders(g, xs, 1, 0); /* x's Transpose when the op reads its input */
    }
done:
    for (size_t i = 0; i < nf; i++) free(feeders[i]);
    free(xin);
    free(xv);
    free(out);
    return st;
}

teexec_status *tx_lower_rope(tx_rw_graph *g, tx_lower_report *r)
{
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_lower_rope: no graph");
    rope_pass ps = {0};
    teexec_status *st = NULL;
    size_t count = tx_rw_node_count(g);
    for (size_t i = 0; i < count && !st; i++) {
        rope_match m;
        memset(&m, 0, sizeof m);
        m.part_lo = m.part_hi = m.part_cat = -1;
        bool ok = false;
        st = match_at(g, i, &m, &ok);
        if (!st && (ok || m.reason[0])) {
            char anchor[256];
            snprintf(anchor, sizeof anchor, "%s", label(tx_rw_node_at(g, i)));
            if (ok) st = rewrite(g, &ps, &m, anchor);
            if (!st) st = tx_lower_note_add(r, PATTERN, anchor, ok, ok ? NULL : m.reason);
        }
        free(m.freqs);
    }
    for (size_t i = 0; i < ps.n_made; i++) {
        free(ps.made[i].name);
        free(ps.made[i].v);
    }
    free(ps.made);
    return st;
}
