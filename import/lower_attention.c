/*
 * lower_attention.c - tx_lower_attention (import/lower.h): scaled
 * dot-product attention as PyTorch's exporters write it, and the ONNX
 * Attention op (opset 23) -> one te.ops DotProductAttention (bshd).
 *
 * The decomposed form is anchored on a Softmax whose probabilities feed the
 * left operand of a MatMul (P·V), directly or through the dynamo exporter's
 * guard Where(IsNaN(P), 0, P) (it zeroes fully masked rows, as
 * DotProductAttention does). From there:
 *   scores chain (walked back from the Softmax to the Q·Kᵀ MatMul): Mul/Div
 *     by scalar constants (the scale, folded or not; constant expressions
 *     such as the TorchScript exporter's Sqrt/Div/Cast of a constant are
 *     folded), at most one mask:
 *     Where(cond, -inf|<= -1e4, S) / Where(cond, S, fill) or Add(S, m);
 *   q operand: Mul/Div by scalars, Transpose(0,2,1,3) of the bshd tensor,
 *     and a scalar Mul before that tensor's head Reshape (OPT);
 *   k operand: Transpose(0,2,3,1) of the bshd tensor, or
 *     Transpose(0,1,3,2) of [Mul/Div by scalars, a GQA repeat,
 *     Transpose(0,2,1,3) of the bshd tensor], or the dynamo exporter's
 *     Reshape(Transpose(0,2,1)(Reshape(K, [b*h, s, d])), [b, h, d, s]) of
 *     the same (K possibly the 5-D repeat itself);
 *   v operand: [GQA repeat], Transpose(0,2,1,3) of the bshd tensor;
 *   output: Transpose(0,2,1,3), Reshape to [b, s, h*d_v] (or to another
 *     view of those elements, such as GPT-2's [b*s, h*d]: that Reshape
 *     stays and reads the attention's output).
 * An operand that is [b,h,s,d] without the leading Transpose (e.g. after a
 * rotary embedding written in standard ops) gets a new Transpose(0,2,1,3)
 * so the DotProductAttention still reads bshd.
 *
 * The Attention op: Q, K, V [b, h, s, d] walked like the operands above
 * (their Transposes and GQA repeats absorbed), its mask planned the same
 * way (bool: true = attend), is_causal -> causal (s_q = s_kv: the op aligns
 * top-left), scale (default 1/sqrt(d)) -> scale; past key/value inputs,
 * used present/qk outputs, softcap and 3-D operands are declined.
 *
 * GQA repeats whose head order is "kv head j serves query heads
 * j*n .. j*n+n-1" (DotProductAttention's mapping) are recognized:
 *   expand:     Reshape(Expand(Unsqueeze(K, 2), [b,hk,n,s,d]), [b,hk*n,s,d])
 *               (Tile by [1,1,n,1,1] in place of Expand too);
 *   interleave: Concat(axis 1) of Reshape(Expand(Unsqueeze(Split_j(K), 2)))
 *               over the hk one-head slices of Split(K, axis 1) in order
 *               (torch.repeat_interleave's export).
 * The k and v repeats must agree and h = hk * n.
 *
 * Masks. A constant mask (import/const_eval.h folds Trilu of ones, Equal,
 * Cast, sliced buffers, ...) is verified by value, as [b|1, h|1, s_q, s_kv]
 * (the dynamo exporter bakes a causal mask as [b, 1, s, s] equal copies,
 * which collapse to one). Causal means "masked exactly where key j > query
 * i" with s_q = s_kv; an Add mask must be 0 on and below the diagonal and
 * -inf or <= -1e4 above it. A mask that is all zero (Add) or masks nothing
 * (Where) is no mask. A constant mask that is not causal becomes the
 * DotProductAttention's mask input (a new initializer; float for Add, bool
 * for Where) when no row is fully masked. A mask that is not constant is
 * passed as it is when it is a graph input, or when it is computed by
 * standard ops (no products) from integer/bool graph inputs (BERT's
 * attention_mask) and constants whose float tensors are single fill values
 * (a trained bias would lose its gradient: the mask input has none); a
 * Where with the scores in its "true" slot gets a Not in front (TE's bool
 * mask is "true = masked out"), a mask narrower than [b|1, h|1, s_q, s_kv]
 * an Expand. Anything else is noted, not lowered.
 *
 * Dynamic exports. Batch and sequence may be symbolic (a KV-cache export's
 * past_key_values [b, h, past, d] concatenated with the new keys, its
 * mask computed from attention_mask and the cache length): dims are
 * compared by the names the exporter declared (tx_lower_symbolic_shape_of;
 * see the dim encoding below). Heads and head sizes must be fixed; a
 * constant mask or a GQA repeat with constant targets still needs fixed
 * dims to be checked; dims a contraction or the op's own shape check at
 * each run ties together are not required to carry one name.
 *
 * Nodes of the match are removed when every value they define is read only
 * inside the match (or by a Shape node, whose value is then folded to a
 * constant: the TorchScript exporter reads q's shape for its scale and
 * mask); else a note names the value and nothing changes. The constant
 * subgraphs that fed them (mask, shape arithmetic) are removed too once
 * nothing reads them. The DotProductAttention's output keeps the name of
 * the final Reshape's output.
 */
#include "import/lower.h"

#include "import/const_eval.h"
#include "import/lower_match.h"
#include "import/lower_shape.h"
#include "format/te_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATTERN "DotProductAttention"
/* Scores at or below this, added or filled in, are "masked" (the usual
 * -10000, -1e9, finfo.min and -inf all qualify). */
#define MASK_NEG (-1e4)

/* ---- small helpers over the rewrite graph ------------------------------ */

typedef struct idx_set {
    size_t *v;
    size_t n, cap;
} idx_set;

static teexec_status *set_add(idx_set *s, size_t i)
{
    for (size_t k = 0; k < s->n; k++)
        if (s->v[k] == i) return NULL;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 32;
        size_t *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return tx_oom();
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = i;
    return NULL;
}

static bool set_has(const idx_set *s, size_t i)
{
    for (size_t k = 0; k < s->n; k++)
        if (s->v[k] == i) return true;
    return false;
}

static bool is_op(const tx_rw_node *n, const char *op)
{
    return n && !n->dead && !n->domain[0] && strcmp(n->op_type, op) == 0;
}

/* Live producer of `value` (slot 0 only unless slot is wanted), or NULL. */
static tx_rw_node *producer(tx_rw_graph *g, const char *value, int64_t *index, size_t *slot)
{
    size_t s = 0;
    int64_t p = value && value[0] ? tx_rw_producer(g, value, &s) : -1;
    if (index) *index = p;
    if (slot) *slot = s;
    if (p < 0) return NULL;
    tx_rw_node *n = tx_rw_node_at(g, (size_t)p);
    return n && !n->dead ? n : NULL;
}

static const tx_rw_attr *find_attr(const tx_rw_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

static bool perm_is(const tx_rw_node *n, int64_t a, int64_t b, int64_t c, int64_t d)
{
    if (!is_op(n, "Transpose")) return false;
    const tx_rw_attr *p = find_attr(n, "perm");
    return p && p->type == TX_IR_ATTR_INTS && p->n_ints == 4 && p->ints[0] == a &&
           p->ints[1] == b && p->ints[2] == c && p->ints[3] == d;
}

static const char *label(const tx_rw_node *n)
{
    return n->name && n->name[0] ? n->name : (n->n_outputs ? n->outputs[0] : "?");
}

/* Single-element constant of a node's input. */
/* Single-element constant of a node's input: an initializer, a Constant,
 * or a constant expression (the TorchScript exporter's 1/sqrt(d) as
 * Sqrt / Div / Cast / Pow of constants, folded by const_eval.h). */
static bool scalar_in(tx_rw_graph *g, const tx_rw_node *n, size_t slot, double *v)
{
    if (slot >= n->n_inputs || !n->inputs[slot][0]) return false;
    if (tx_rw_scalar(g, n->inputs[slot], v)) return true;
    tx_ce_value cv;
    bool is_c = false;
    teexec_status *st = tx_ce_eval(g, n->inputs[slot], &cv, &is_c);
    if (st) { /* out of memory: not a scalar, the pattern is declined */
        teexec_status_destroy(st);
        return false;
    }
    bool one = is_c && cv.n == 1;
    if (one) *v = cv.v[0];
    tx_ce_release(&cv);
    return one;
}

/* ---- the match ------------------------------------------------------------ */

/* Dims in a match: >= 0 fixed, -1 unknown, <= -2 the symbolic dim the
 * exporter named (match.syms[-2 - d]): a KV-cache export's batch and
 * sequence are symbols, and two dims are the same only when both are fixed
 * and equal or both are the same symbol (dim_same). Products and reshape
 * targets are only computed over fixed dims. */
#define DIM_UNKNOWN (-1)
#define MAX_SYMS 32

static bool dim_same(int64_t a, int64_t b)
{
    return a != DIM_UNKNOWN && a == b;
}

/* One of q, k, v: the bshd value the DotProductAttention reads, or a bhsd
 * value that needs a new Transpose(0,2,1,3) first. dims are bshd (fixed,
 * symbolic or unknown, as above). */
typedef struct side {
    const char *value;
    bool needs_transpose;
    int64_t dims[4];
} side;

/* A GQA repeat found on the k or v path, checked once the dims are known. */
typedef struct repeat {
    int64_t n;            /* repeats per kv head; 1 = none */
    int form;             /* 0 none, 1 expand/tile, 2 interleave */
    int64_t heads_parts;  /* interleave: number of one-head slices */
    int64_t expand[5];    /* expand: broadcast target (or Tile repeats) */
    bool tile;
    int64_t reshape[4];   /* resolved target of the final Reshape(s) */
    size_t n_reshape;
} repeat;

typedef struct match {
    tx_rw_node *softmax;
    const char *anchor;
    idx_set core;
    idx_set shape_readers; /* Shape nodes of intermediates, folded (contained()) */
    double scale;
    bool scale_after_mask; /* a scale op applied after the mask (walk order) */
    side q, k, v;
    repeat rk, rv;
    /* mask operand: Add (float) or Where (cond, fill, sense) */
    int mask_kind; /* 0 none, 1 add, 2 where */
    const char *mask_value;
    double where_fill;
    bool where_masked_is_true; /* cond true = masked out */
    const char *out_value;
    bool out_keep_reshape; /* the final Reshape stays, reading the attention output */
    size_t out_reshape;    /* that Reshape's node */
    bool kt3d;            /* Kᵀ in the 3-D form (match_kt3d) */
    bool op_causal;       /* the Attention op's is_causal */
    bool op_gqa;          /* the Attention op: fewer kv heads need no repeat (it
                             maps query head i to kv head i / (h / h_kv), as
                             DotProductAttention does) */
    /* a scale before q's head Reshape: that Mul goes, the Reshape reads
     * its other input (-1: none) */
    int64_t q_prescale, q_prescale_reshape;
    const char *q_prescale_in;
    int64_t kt_spec3[3], kt_spec4[4];
    char *syms[MAX_SYMS]; /* the dim names met, owned */
    size_t n_syms;
    char reason[320];
} match;

static bool fail(match *m, const char *fmt, ...) TX_PRINTF(2, 3);
static bool fail(match *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->reason, sizeof m->reason, fmt, ap);
    va_end(ap);
    return false;
}

/* Adds node p to the core set. Status errors are only allocation failures. */
#define CORE(m, idx)                                                          \
    do {                                                                      \
        teexec_status *core_st_ = set_add(&(m)->core, (size_t)(idx));         \
        if (core_st_) return core_st_;                                        \
    } while (0)

/* Strips Mul/Div by scalar constants walking back from *cur. */
static teexec_status *strip_scales(tx_rw_graph *g, match *m, const char **cur)
{
    for (int guard = 0; guard < 8; guard++) {
        int64_t pi;
        tx_rw_node *p = producer(g, *cur, &pi, NULL);
        double c;
        if (is_op(p, "Mul") && p->n_inputs == 2 && scalar_in(g, p, 1, &c)) {
            m->scale *= c;
            *cur = p->inputs[0];
        } else if (is_op(p, "Mul") && p->n_inputs == 2 && scalar_in(g, p, 0, &c)) {
            m->scale *= c;
            *cur = p->inputs[1];
        } else if (is_op(p, "Div") && p->n_inputs == 2 && scalar_in(g, p, 1, &c) && c != 0) {
            m->scale /= c;
            *cur = p->inputs[0];
        } else {
            return NULL;
        }
        CORE(m, pi);
    }
    return NULL;
}

/* ONNX Reshape target resolution (allowzero 0) against known input dims
 * (in_dims may hold -1 = unknown). Unknown results stay -1. */
static void resolve_reshape(const int64_t *in, size_t in_rank, const int64_t *spec, size_t n,
                            int64_t *out)
{
    int64_t known = 1, in_total = 1;
    bool in_known = true;
    int neg = -1;
    for (size_t i = 0; i < in_rank; i++) {
        if (in[i] < 0) in_known = false;
        else in_total *= in[i];
    }
    bool all = true;
    for (size_t i = 0; i < n; i++) {
        int64_t d = spec[i];
        if (d == 0) d = i < in_rank ? in[i] : -1;
        if (d == -1 && spec[i] == -1) {
            neg = (int)i;
        } else if (d < 0) {
            all = false;
        } else {
            known *= d;
        }
        out[i] = d;
    }
    if (neg >= 0) out[neg] = (all && in_known && known > 0 && in_total % known == 0)
                                 ? in_total / known : -1;
}

/* The id of the named dim `param` (a new one when first met); unknown
 * when the table is full. */
static teexec_status *sym_id(match *m, const char *param, int64_t *id)
{
    *id = DIM_UNKNOWN;
    for (size_t i = 0; i < m->n_syms; i++)
        if (strcmp(m->syms[i], param) == 0) {
            *id = -2 - (int64_t)i;
            return NULL;
        }
    if (m->n_syms == MAX_SYMS) return NULL;
    if (!(m->syms[m->n_syms] = strdup(param))) return tx_oom();
    *id = -2 - (int64_t)m->n_syms++;
    return NULL;
}

/* "[s14, 4, s17 + s70, 16]": dims as a message shows them (? = unknown). */
static const char *dims_text(const match *m, const int64_t *dims, int rank, char *buf,
                             size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < rank && o < size; i++) {
        const char *sep = i ? ", " : "[";
        int w;
        if (dims[i] >= 0) w = snprintf(buf + o, size - o, "%s%lld", sep, (long long)dims[i]);
        else if (dims[i] == DIM_UNKNOWN || (size_t)(-2 - dims[i]) >= m->n_syms)
            w = snprintf(buf + o, size - o, "%s?", sep);
        else w = snprintf(buf + o, size - o, "%s%s", sep, m->syms[-2 - dims[i]]);
        if (w < 0) break;
        o += (size_t)w;
    }
    if (o < size) snprintf(buf + o, size - o, "]");
    return buf;
}

/* The dims of `value` in the match's encoding; *rank -1 when not known;
 * *dtype (may be NULL) its element type. */
static teexec_status *sym_dims(tx_rw_graph *g, match *m, const char *value, int32_t *rank,
                               int64_t dims[TX_MAX_RANK], teexec_dtype *dtype)
{
    *rank = -1;
    tx_shape sh;
    const char *params[TX_MAX_RANK];
    bool known = false;
    TX_TRY(tx_lower_symbolic_shape_of(g, value, &sh, params, &known, dtype));
    if (!known) return NULL;
    for (int32_t d = 0; d < sh.rank; d++) {
        dims[d] = sh.dims[d];
        if (dims[d] < 0 && params[d]) TX_TRY(sym_id(m, params[d], &dims[d]));
        else if (dims[d] < 0) dims[d] = DIM_UNKNOWN;
    }
    *rank = sh.rank;
    return NULL;
}

/* bshd dims of a q/k/v operand (given bhsd when `bhsd`), each fixed,
 * symbolic or unknown. */
static teexec_status *dims_of(tx_rw_graph *g, match *m, const char *value, bool bhsd,
                              int64_t *dims)
{
    for (int i = 0; i < 4; i++) dims[i] = DIM_UNKNOWN;
    int64_t d[TX_MAX_RANK];
    int32_t rank = -1;
    TX_TRY(sym_dims(g, m, value, &rank, d, NULL));
    if (rank != 4) return NULL;
    if (bhsd) {
        dims[0] = d[0];
        dims[1] = d[2];
        dims[2] = d[1];
        dims[3] = d[3];
    } else {
        memcpy(dims, d, 4 * sizeof *dims);
    }
    return NULL;
}

/* Unsqueeze(x, axes=[2]) (input or attribute form). */
static bool unsqueeze_axis2(tx_rw_graph *g, const tx_rw_node *n)
{
    if (!is_op(n, "Unsqueeze")) return false;
    int64_t ax[4];
    size_t na = 0;
    if (n->n_inputs >= 2 && n->inputs[1][0]) {
        if (!tx_ce_ints(g, n->inputs[1], ax, 4, &na)) return false;
    } else {
        const tx_rw_attr *a = find_attr(n, "axes");
        if (!a || a->type != TX_IR_ATTR_INTS || a->n_ints > 4) return false;
        na = a->n_ints;
        memcpy(ax, a->ints, na * sizeof *ax);
    }
    return na == 1 && (ax[0] == 2 || ax[0] == -3);
}

/* Reshape(Expand|Tile(Unsqueeze(x, 2), t)): on success *inner is x, the
 * nodes are added to the core, r gets the constants. With `bare`, the
 * Expand|Tile itself (no Reshape after it: the dynamo exporter's key path
 * reshapes the 5-D repeat straight to [b*h, s, d], see match_kt3d) is
 * accepted too; r->n_reshape is then 0 and the caller supplies the target. */
static teexec_status *match_expand(tx_rw_graph *g, match *m, const char *value, repeat *r,
                                   const char **inner, bool *ok, bool bare)
{
    *ok = false;
    int64_t ri = -1, ei, ui;
    tx_rw_node *rs = producer(g, value, &ri, NULL);
    const char *ex_out = value;
    if (is_op(rs, "Reshape") && rs->n_inputs == 2) {
        ex_out = rs->inputs[0];
    } else if (bare) {
        rs = NULL;
        ri = -1;
    } else {
        return NULL;
    }
    tx_rw_node *ex = producer(g, ex_out, &ei, NULL);
    bool tile = is_op(ex, "Tile");
    if ((!is_op(ex, "Expand") && !tile) || ex->n_inputs != 2) return NULL;
    tx_rw_node *un = producer(g, ex->inputs[0], &ui, NULL);
    if (!unsqueeze_axis2(g, un)) return NULL;
    size_t ne = 0, nr = 0;
    if (!tx_ce_ints(g, ex->inputs[1], r->expand, 5, &ne) || ne != 5) return NULL;
    if (rs && (!tx_ce_ints(g, rs->inputs[1], r->reshape, 4, &nr) || nr != 4)) return NULL;
    r->tile = tile;
    r->n_reshape = nr;
    r->n = r->expand[2];
    if (ri >= 0) CORE(m, ri);
    CORE(m, ei);
    CORE(m, ui);
    *inner = un->inputs[0];
    *ok = true;
    return NULL;
}

/* A GQA repeat ending at *cur (bhsd): *cur becomes the un-repeated value. */
static teexec_status *match_repeat(tx_rw_graph *g, match *m, const char **cur, repeat *r,
                                   bool bare)
{
    memset(r, 0, sizeof *r);
    r->n = 1;
    bool ok;
    const char *inner;
    TX_TRY(match_expand(g, m, *cur, r, &inner, &ok, bare));
    if (ok) {
        r->form = 1;
        *cur = inner;
        return NULL;
    }
    int64_t ci;
    tx_rw_node *cat = producer(g, *cur, &ci, NULL);
    const tx_rw_attr *ax = cat ? find_attr(cat, "axis") : NULL;
    if (!is_op(cat, "Concat") || !ax || ax->type != TX_IR_ATTR_INT || ax->i != 1 ||
        cat->n_inputs < 2)
        return NULL;
    /* every part: Reshape(Expand(Unsqueeze(split output j))) of one Split */
    const char *split_in = NULL;
    int64_t split_idx = -1;
    int64_t n_rep = -1;
    size_t save_n = m->core.n;
    for (size_t j = 0; j < cat->n_inputs; j++) {
        repeat pr;
        memset(&pr, 0, sizeof pr);
        TX_TRY(match_expand(g, m, cat->inputs[j], &pr, &inner, &ok, false));
        int64_t si;
        size_t slot;
        tx_rw_node *sp = ok ? producer(g, inner, &si, &slot) : NULL;
        const tx_rw_attr *sax = sp ? find_attr(sp, "axis") : NULL;
        if (!ok || !is_op(sp, "Split") || slot != j || !sax || sax->type != TX_IR_ATTR_INT ||
            sax->i != 1 || sp->n_outputs != cat->n_inputs || (split_idx >= 0 && si != split_idx) ||
            (n_rep >= 0 && pr.n != n_rep) || pr.tile) {
            m->core.n = save_n; /* drop what this attempt added */
            return NULL;
        }
        split_idx = si;
        n_rep = pr.n;
        split_in = sp->inputs[0];
        if (j == 0) {
            memcpy(r->expand, pr.expand, sizeof pr.expand);
            memcpy(r->reshape, pr.reshape, sizeof pr.reshape);
            r->n_reshape = pr.n_reshape;
        }
    }
    /* the Split must cut one head per output */
    tx_rw_node *sp = tx_rw_node_at(g, (size_t)split_idx);
    int64_t sizes[64];
    size_t nsz = 0;
    if (sp->n_inputs >= 2 && sp->inputs[1][0]) {
        if (!tx_ce_ints(g, sp->inputs[1], sizes, 64, &nsz) || nsz != sp->n_outputs) {
            m->core.n = save_n;
            return NULL;
        }
        for (size_t j = 0; j < nsz; j++)
            if (sizes[j] != 1) {
                m->core.n = save_n;
                return NULL;
            }
    }
    CORE(m, ci);
    CORE(m, split_idx);
    r->form = 2;
    r->n = n_rep;
    r->heads_parts = (int64_t)cat->n_inputs;
    *cur = split_in;
    return NULL;
}

/* The repeat's constants against the un-repeated bhsd dims [b, hk, s, d]
 * (given as bshd in `kd`). */
static bool check_repeat(match *m, const repeat *r, const int64_t *kd, const char *what)
{
    if (r->form == 0) return true;
    int64_t b = kd[0], s = kd[1], hk = kd[2], d = kd[3];
    if (b < 0 || s < 0 || hk < 0 || d < 0)
        return fail(m, "the %s heads are repeated (GQA) but the shapes are not known, so the "
                       "repeat cannot be checked", what);
    if (r->n < 1) return fail(m, "the %s repeat count %lld is not positive", what, (long long)r->n);
    /* the unsqueezed operand is [b, hk or 1, 1, s, d] */
    int64_t part_h = r->form == 2 ? 1 : hk;
    int64_t u[5] = {b, part_h, 1, s, d};
    for (int i = 0; i < 5; i++) {
        if (i == 2) continue;
        bool good = r->tile ? r->expand[i] == 1 : (r->expand[i] == u[i] || r->expand[i] == 1);
        if (!good)
            return fail(m, "the %s repeat broadcasts dim %d (%lld -> %lld): not a per-head "
                           "repeat", what, i, (long long)u[i], (long long)r->expand[i]);
    }
    if (r->n_reshape == 0) return true; /* a bare 5-D repeat: check_kt3d checks its target */
    int64_t in5[5] = {b, part_h, r->n, s, d}, got[4];
    resolve_reshape(in5, 5, r->reshape, 4, got);
    if (got[0] != b || got[1] != part_h * r->n || got[2] != s || got[3] != d)
        return fail(m, "the %s repeat is reshaped to [%lld, %lld, %lld, %lld], not [b, h_kv*n, "
                       "s, d] = [%lld, %lld, %lld, %lld]", what, (long long)got[0],
                    (long long)got[1], (long long)got[2], (long long)got[3], (long long)b,
                    (long long)(part_h * r->n), (long long)s, (long long)d);
    if (r->form == 2 && r->heads_parts != hk)
        return fail(m, "the %s repeat_interleave form has %lld slices for %lld kv heads", what,
                    (long long)r->heads_parts, (long long)hk);
    return true;
}

/* q operand of Q·Kᵀ. */
static teexec_status *walk_q(tx_rw_graph *g, match *m, const char *a)
{
    const char *cur = a;
    TX_TRY(strip_scales(g, m, &cur));
    int64_t ti;
    tx_rw_node *t = producer(g, cur, &ti, NULL);
    if (perm_is(t, 0, 2, 1, 3)) {
        CORE(m, ti);
        cur = t->inputs[0];
        TX_TRY(strip_scales(g, m, &cur));
        m->q.value = cur;
        TX_TRY(dims_of(g, m, cur, false, m->q.dims));
        /* OPT scales the projection before splitting the heads:
         * Reshape(Mul(x, c), [b, s, h, d]); the Reshape stays (reading x) */
        int64_t ri, mi;
        tx_rw_node *rs = producer(g, cur, &ri, NULL);
        tx_rw_node *mu = is_op(rs, "Reshape") && rs->n_inputs == 2
                             ? producer(g, rs->inputs[0], &mi, NULL) : NULL;
        double c = 0;
        int k = -1; /* the scalar's slot */
        if (mu && (is_op(mu, "Mul") || is_op(mu, "Div")) && mu->n_inputs == 2) {
            if (scalar_in(g, mu, 1, &c)) k = 1;
            else if (is_op(mu, "Mul") && scalar_in(g, mu, 0, &c)) k = 0;
        }
        if (k >= 0 && c != 0 && isfinite(c) && tx_lm_sole_reader(g, rs->inputs[0]) == ri) {
            m->scale *= is_op(mu, "Div") ? 1.0 / c : c;
            m->q_prescale = mi;
            m->q_prescale_reshape = ri;
            m->q_prescale_in = mu->inputs[1 - k];
        }
    } else {
        m->q.value = cur;
        m->q.needs_transpose = true;
        TX_TRY(dims_of(g, m, cur, true, m->q.dims));
    }
    return NULL;
}

/* Kᵀ as the dynamo exporter writes k.transpose(-2, -1) of a [b, h, s, d]
 * key: Reshape(Transpose(Reshape(X, [b*h, s, d]), perm (0, 2, 1)),
 * [b, h, d, s]), where X is the key or its 5-D GQA repeat [b, h_kv, n, s,
 * d]. *inner gets X; the two targets are checked against the key's shape
 * once it is known (check_kt3d). */
static teexec_status *match_kt3d(tx_rw_graph *g, match *m, const char *value,
                                 const char **inner, bool *ok)
{
    *ok = false;
    int64_t r4i, ti, r3i;
    tx_rw_node *r4 = producer(g, value, &r4i, NULL);
    if (!is_op(r4, "Reshape") || r4->n_inputs != 2) return NULL;
    tx_rw_node *t = producer(g, r4->inputs[0], &ti, NULL);
    const tx_rw_attr *pa = is_op(t, "Transpose") ? find_attr(t, "perm") : NULL;
    if (!pa || pa->type != TX_IR_ATTR_INTS || pa->n_ints != 3 || pa->ints[0] != 0 ||
        pa->ints[1] != 2 || pa->ints[2] != 1)
        return NULL;
    tx_rw_node *r3 = producer(g, t->inputs[0], &r3i, NULL);
    if (!is_op(r3, "Reshape") || r3->n_inputs != 2) return NULL;
    size_t n3 = 0, n4 = 0;
    if (!tx_ce_ints(g, r3->inputs[1], m->kt_spec3, 3, &n3) || n3 != 3 ||
        !tx_ce_ints(g, r4->inputs[1], m->kt_spec4, 4, &n4) || n4 != 4)
        return NULL;
    /* a 0 would copy a dim of a tensor of another rank: never exported */
    for (int i = 0; i < 4; i++)
        if ((i < 3 && m->kt_spec3[i] == 0) || m->kt_spec4[i] == 0) return NULL;
    CORE(m, r4i);
    CORE(m, ti);
    CORE(m, r3i);
    m->kt3d = true;
    *inner = r3->inputs[0];
    *ok = true;
    return NULL;
}

/* The targets of match_kt3d against the key [b, s_kv, h_kv, d] (bshd)
 * repeated n times: [b*h, s_kv, d] then [b, h, d, s_kv], h = h_kv*n. */
static bool check_kt3d(match *m, const int64_t *k, int64_t n)
{
    if (!m->kt3d) return true;
    if (k[0] < 0 || k[1] < 0 || k[2] < 0 || k[3] < 0)
        return fail(m, "the transposed key is reshaped by constant targets but its shape is not "
                       "fixed, so they cannot be checked");
    int64_t b = k[0], s = k[1], h = k[2] * n, d = k[3];
    int64_t in4[4] = {b, h, s, d}, got3[3], in3[3] = {b * h, d, s}, got4[4];
    resolve_reshape(in4, 4, m->kt_spec3, 3, got3);
    resolve_reshape(in3, 3, m->kt_spec4, 4, got4);
    if (got3[0] != b * h || got3[1] != s || got3[2] != d || got4[0] != b || got4[1] != h ||
        got4[2] != d || got4[3] != s)
        return fail(m, "the transposed key is reshaped to [%lld, %lld, %lld] and [%lld, %lld, "
                       "%lld, %lld], not [b*h, s, d] and [b, h, d, s] for b %lld, h %lld, s "
                       "%lld, d %lld", (long long)got3[0], (long long)got3[1],
                    (long long)got3[2], (long long)got4[0], (long long)got4[1],
                    (long long)got4[2], (long long)got4[3], (long long)b, (long long)h,
                    (long long)s, (long long)d);
    return true;
}

/* k operand of Q·Kᵀ (Kᵀ, [b, h, d, s]). *ok false: not a transposed key. */
static teexec_status *walk_k(tx_rw_graph *g, match *m, const char *bv, bool *ok)
{
    *ok = false;
    const char *cur = bv;
    TX_TRY(strip_scales(g, m, &cur));
    int64_t ti;
    tx_rw_node *t = producer(g, cur, &ti, NULL);
    if (perm_is(t, 0, 2, 3, 1)) {
        CORE(m, ti);
        cur = t->inputs[0];
        TX_TRY(strip_scales(g, m, &cur));
        m->k.value = cur;
        TX_TRY(dims_of(g, m, cur, false, m->k.dims));
        *ok = true;
        return NULL;
    }
    bool kt3d = false;
    if (perm_is(t, 0, 1, 3, 2)) {
        CORE(m, ti);
        cur = t->inputs[0];
    } else {
        const char *inner;
        TX_TRY(match_kt3d(g, m, cur, &inner, &kt3d));
        if (!kt3d) return NULL;
        cur = inner;
    }
    TX_TRY(strip_scales(g, m, &cur));
    TX_TRY(match_repeat(g, m, &cur, &m->rk, kt3d));
    TX_TRY(strip_scales(g, m, &cur));
    t = producer(g, cur, &ti, NULL);
    if (perm_is(t, 0, 2, 1, 3)) {
        CORE(m, ti);
        cur = t->inputs[0];
        TX_TRY(strip_scales(g, m, &cur));
        m->k.value = cur;
        TX_TRY(dims_of(g, m, cur, false, m->k.dims));
    } else {
        m->k.value = cur;
        m->k.needs_transpose = true;
        TX_TRY(dims_of(g, m, cur, true, m->k.dims));
    }
    *ok = true;
    return NULL;
}

/* v operand of P·V (or k, v of the Attention op): [b, h, s, d], maybe a
 * GQA repeat of [b, h_kv, s, d]. */
static teexec_status *walk_kv(tx_rw_graph *g, match *m, const char *vv, side *sd, repeat *rp)
{
    const char *cur = vv;
    TX_TRY(match_repeat(g, m, &cur, rp, false));
    int64_t ti;
    tx_rw_node *t = producer(g, cur, &ti, NULL);
    if (perm_is(t, 0, 2, 1, 3)) {
        CORE(m, ti);
        sd->value = t->inputs[0];
        TX_TRY(dims_of(g, m, sd->value, false, sd->dims));
    } else {
        sd->value = cur;
        sd->needs_transpose = true;
        TX_TRY(dims_of(g, m, cur, true, sd->dims));
    }
    return NULL;
}

static teexec_status *walk_v(tx_rw_graph *g, match *m, const char *vv)
{
    return walk_kv(g, m, vv, &m->v, &m->rv);
}

/* Whether `value` may be passed to DotProductAttention as its mask, which
 * gets no gradient: a graph input, or a value computed by standard ops
 * (no products: a learned mask is not a mask) from integer/bool graph
 * inputs (attention_mask, input_ids) and constants, where every float
 * constant is a single fill value (a larger float tensor could be a
 * trained bias, such as T5's relative positions, whose gradient would be
 * lost). *why (may be "") names what breaks it. */
static teexec_status *mask_cone(tx_rw_graph *g, const char *value, bool *ok, char *why,
                                size_t whysz)
{
    *ok = false;
    if (tx_rw_is_graph_input(g, value)) {
        *ok = true;
        return NULL;
    }
    const char *stack[256];
    size_t ns = 0;
    idx_set seen = {0};
    teexec_status *st = NULL;
    stack[ns++] = value;
    bool good = true;
    while (ns && good && !st) {
        const char *v = stack[--ns];
        if (!v[0]) continue;
        tx_rw_value_type vt;
        bool typed = tx_rw_value_type_of(g, v, &vt);
        if (tx_rw_is_graph_input(g, v)) {
            if (!typed || tx_dtype_is_real(vt.dtype)) {
                snprintf(why, whysz, "it depends on the float (or untyped) graph input '%s'", v);
                good = false;
            }
            continue;
        }
        if (tx_rw_is_initializer(g, v)) {
            uint64_t numel = 1;
            for (int32_t i = 0; typed && i < vt.rank; i++) numel *= (uint64_t)vt.dims[i];
            if (!typed || (tx_dtype_is_real(vt.dtype) && numel > 1)) {
                snprintf(why, whysz, "it reads the float tensor '%s'", v);
                good = false;
            }
            continue;
        }
        int64_t pi;
        tx_rw_node *p = producer(g, v, &pi, NULL);
        if (!p) {
            snprintf(why, whysz, "'%s' has no producer", v);
            good = false;
            continue;
        }
        if (set_has(&seen, (size_t)pi)) continue;
        if ((st = set_add(&seen, (size_t)pi))) break;
        /* Shape and Size read only their input's dims: a mask may take
         * its lengths from a float tensor (a KV cache's past length). */
        if (is_op(p, "Shape") || is_op(p, "Size")) continue;
        if (is_op(p, "Constant")) {
            tx_tensor t;
            if (tx_rw_constant(g, v, &t)) {
                if (tx_dtype_is_real(t.dtype) && t.numel > 1) {
                    snprintf(why, whysz, "it reads the float tensor '%s'", v);
                    good = false;
                }
                tx_tensor_release(&t);
            }
            continue;
        }
        static const char *const products[] = {"MatMul", "Gemm", "Conv", "Attention", "Einsum",
                                               "Softmax"};
        bool product = p->domain[0] != '\0';
        for (size_t k = 0; k < sizeof products / sizeof *products; k++)
            product = product || is_op(p, products[k]);
        if (product || seen.n > 128 || ns + p->n_inputs > sizeof stack / sizeof *stack) {
            snprintf(why, whysz, "it is computed by %s (%s)", label(p), p->op_type);
            good = false;
            continue;
        }
        for (size_t k = 0; k < p->n_inputs; k++) stack[ns++] = p->inputs[k];
    }
    free(seen.v);
    *ok = good && !st;
    return st;
}

/* Scores chain from the Softmax input back to the Q·Kᵀ MatMul. *qk gets
 * its index (-1 when the chain does not reach one: then m->reason says
 * why, or is empty when this does not look like attention at all). */
static teexec_status *walk_scores(tx_rw_graph *g, match *m, int64_t *qk)
{
    *qk = -1;
    const char *cur = m->softmax->inputs[0];
    bool seen_mask = false;
    for (int guard = 0; guard < 16; guard++) {
        int64_t pi;
        tx_rw_node *p = producer(g, cur, &pi, NULL);
        if (!p) {
            fail(m, "the Softmax input is not computed from a MatMul of queries and keys");
            return NULL;
        }
        double c;
        if (is_op(p, "MatMul")) {
            CORE(m, pi);
            *qk = pi;
            return NULL;
        }
        if ((is_op(p, "Mul") || is_op(p, "Div")) && p->n_inputs == 2) {
            size_t other;
            if (scalar_in(g, p, 1, &c)) other = 0;
            else if (is_op(p, "Mul") && scalar_in(g, p, 0, &c)) other = 1;
            else {
                fail(m, "the scores are multiplied/divided by a non-scalar (%s)", label(p));
                return NULL;
            }
            if (is_op(p, "Div")) {
                if (c == 0) {
                    fail(m, "the scores are divided by zero (%s)", label(p));
                    return NULL;
                }
                c = 1.0 / c;
            }
            m->scale *= c;
            if (!seen_mask) m->scale_after_mask = true;
            CORE(m, pi);
            cur = p->inputs[other];
            continue;
        }
        if (is_op(p, "Add") && p->n_inputs == 2) {
            if (seen_mask) {
                fail(m, "the scores get more than one mask (%s)", label(p));
                return NULL;
            }
            /* the mask operand is the one that is constant, a graph input,
             * or computed from integer/bool inputs and constants only */
            int mi = -1;
            char why[256] = "";
            for (int s = 0; s < 2 && mi < 0; s++) {
                tx_ce_value cv;
                bool is_c = false, cone = false;
                TX_TRY(tx_ce_eval(g, p->inputs[s], &cv, &is_c));
                tx_ce_release(&cv);
                if (!is_c) TX_TRY(mask_cone(g, p->inputs[s], &cone, why, sizeof why));
                if (is_c || cone) mi = s;
            }
            if (mi < 0) {
                fail(m, "the scores get an Add (%s) of a tensor computed in the graph, which is "
                        "not a graph input (a bias, or a mask that is not made from integer/bool "
                        "inputs and constants only%s%s)", label(p), why[0] ? ": " : "", why);
                return NULL;
            }
            m->mask_kind = 1;
            m->mask_value = p->inputs[mi];
            seen_mask = true;
            CORE(m, pi);
            cur = p->inputs[1 - mi];
            continue;
        }
        if (is_op(p, "Where") && p->n_inputs == 3) {
            if (seen_mask) {
                fail(m, "the scores get more than one mask (%s)", label(p));
                return NULL;
            }
            size_t s_slot;
            if (scalar_in(g, p, 1, &c)) {
                m->where_masked_is_true = true;
                s_slot = 2;
            } else if (scalar_in(g, p, 2, &c)) {
                m->where_masked_is_true = false;
                s_slot = 1;
            } else {
                fail(m, "the scores go through a Where (%s) without a constant fill value",
                     label(p));
                return NULL;
            }
            if (!(c <= MASK_NEG)) {
                fail(m, "the mask Where (%s) fills with %g, not -inf or a large negative value",
                     label(p), c);
                return NULL;
            }
            m->mask_kind = 2;
            m->mask_value = p->inputs[0];
            m->where_fill = c;
            seen_mask = true;
            CORE(m, pi);
            cur = p->inputs[s_slot];
            continue;
        }
        fail(m, "%s (%s) between the scores and the Softmax is not a scale or a mask",
             p->op_type, label(p));
        return NULL;
    }
    fail(m, "the score chain is too long");
    return NULL;
}

/* ---- mask analysis --------------------------------------------------------- */

typedef enum mask_class { MASK_NONE, MASK_CAUSAL, MASK_OTHER, MASK_ROW_EMPTY } mask_class;

/* A folded mask seen as [mb, mh, rows, cols] (right-aligned, mb in {1, b},
 * mh in {1, h}, rows in {1, s_q}, cols in {1, s_kv}); slices over batch and
 * heads that are all equal collapse to mb = mh = 1 (the dynamo exporter
 * bakes a causal mask as [b, 1, s, s] with b equal copies). */
typedef struct mask_view {
    const double *v;
    int64_t mb, mh, rows, cols;
    mask_class cls;
    bool soft; /* an Add mask with values other than 0 and "masked" */
} mask_view;

static double mask_at(const mask_view *mv, int64_t bi, int64_t hi, int64_t i, int64_t j)
{
    int64_t o = (((mv->mb == 1 ? 0 : bi) * mv->mh + (mv->mh == 1 ? 0 : hi)) * mv->rows +
                 (mv->rows == 1 ? 0 : i)) * mv->cols + (mv->cols == 1 ? 0 : j);
    return mv->v[o];
}

/* Classifies the mask. For Add: masked = value <= MASK_NEG, kept = exactly
 * 0 (anything else is MASK_OTHER with soft set). For Where: masked =
 * (v != 0) == masked_true. False when the shape does not broadcast to
 * [b, h, s_q, s_kv]. */
static bool classify(const tx_ce_value *cv, int kind, bool masked_true, int64_t b, int64_t h,
                     int64_t sq, int64_t skv, mask_view *mv)
{
    memset(mv, 0, sizeof *mv);
    if (cv->rank > 4) return false;
    int64_t d[4] = {1, 1, 1, 1};
    for (int32_t i = 0; i < cv->rank; i++) d[4 - cv->rank + i] = cv->dims[i];
    if ((d[0] != 1 && d[0] != b) || (d[1] != 1 && d[1] != h) || (d[2] != 1 && d[2] != sq) ||
        (d[3] != 1 && d[3] != skv))
        return false;
    mv->v = cv->v;
    mv->mb = d[0];
    mv->mh = d[1];
    mv->rows = d[2];
    mv->cols = d[3];
    /* equal slices collapse */
    bool same = true;
    int64_t slice = d[2] * d[3];
    for (int64_t k = 1; same && k < d[0] * d[1]; k++)
        same = memcmp(cv->v, cv->v + k * slice, (size_t)slice * sizeof *cv->v) == 0;
    if (same) mv->mb = mv->mh = 1;
    bool any = false, causal = sq == skv, row_empty = false;
    for (int64_t bi = 0; bi < mv->mb; bi++)
        for (int64_t hi = 0; hi < mv->mh; hi++)
            for (int64_t i = 0; i < sq; i++) {
                bool row_all = true;
                for (int64_t j = 0; j < skv; j++) {
                    double v = mask_at(mv, bi, hi, i, j);
                    bool masked;
                    if (kind == 1) {
                        masked = v <= MASK_NEG;
                        if (!masked && v != 0) mv->soft = true;
                    } else {
                        masked = (v != 0) == masked_true;
                    }
                    any = any || masked;
                    row_all = row_all && masked;
                    if (masked != (j > i)) causal = false;
                }
                if (row_all) row_empty = true;
            }
    mv->cls = !any && !mv->soft ? MASK_NONE
              : mv->soft        ? MASK_OTHER
              : causal          ? MASK_CAUSAL
              : row_empty       ? MASK_ROW_EMPTY
                                : MASK_OTHER;
    return true;
}

/* ---- one attention ----------------------------------------------------- */

typedef struct plan {
    int causal;
    const char *mask_in;     /* existing value to pass as mask, or NULL */
    bool mask_needs_not;
    bool mask_expand;        /* mask_in broadcast to mask_dims by a new Expand */
    int64_t mask_dims[4];
    tx_tensor mask_const;    /* a new initializer, data NULL when none */
} plan;

static teexec_status *note(tx_lower_report *r, const char *anchor, bool lowered,
                           const char *reason)
{
    return r ? tx_lower_note_add(r, PATTERN, anchor, lowered, reason) : NULL;
}

/* Decides the mask; false (m->reason set) when it cannot be expressed. */
static teexec_status *plan_mask(tx_rw_graph *g, match *m, plan *pl, bool *ok)
{
    *ok = false;
    memset(pl, 0, sizeof *pl);
    if (m->mask_kind == 0) {
        *ok = true;
        return NULL;
    }
    int64_t sq = m->q.dims[1], skv = m->k.dims[1];
    tx_ce_value cv;
    bool is_c = false;
    TX_TRY(tx_ce_eval(g, m->mask_value, &cv, &is_c));
    if (!is_c) {
        /* PyTorch casts a bool mask to bool once more before Where */
        for (int guard = 0; guard < 4 && m->mask_kind == 2; guard++) {
            tx_rw_node *c = producer(g, m->mask_value, NULL, NULL);
            const tx_rw_attr *to = c ? find_attr(c, "to") : NULL;
            if (!is_op(c, "Cast") || !to || to->type != TX_IR_ATTR_INT ||
                to->i != TEEXEC_DTYPE_BOOL)
                break;
            m->mask_value = c->inputs[0];
        }
        bool input = tx_rw_is_graph_input(g, m->mask_value), cone = input;
        char why[256] = "";
        if (!input) TX_TRY(mask_cone(g, m->mask_value, &cone, why, sizeof why));
        if (!cone) {
            fail(m, "the mask '%s' is not a graph input, and not made from integer/bool graph "
                    "inputs and constants only: %s", m->mask_value, why);
            return NULL;
        }
        teexec_dtype dt;
        int64_t want[4] = {m->q.dims[0], m->q.dims[2], sq, skv}, mdims[TX_MAX_RANK];
        int32_t mrank = -1;
        TX_TRY(sym_dims(g, m, m->mask_value, &mrank, mdims, &dt));
        bool fits = mrank <= 4 && mrank >= 1;
        int64_t md[4] = {1, 1, 1, 1};
        for (int32_t i = 0; fits && i < mrank; i++) {
            int64_t d = mdims[i], w = want[4 - mrank + i];
            md[4 - mrank + i] = d;
            /* a symbolic dim against another dim: the Add (or Where)
             * broadcasts them, DotProductAttention takes b|1 and h|1 the
             * same way and checks s_q and s_kv at each run, so a run the
             * model would broadcast differently is refused there */
            fits = d == 1 || dim_same(d, w) ||
                   (d != DIM_UNKNOWN && w != DIM_UNKNOWN && (d < 0 || w < 0));
        }
        if (!fits) {
            char wt[160], mt[160];
            int64_t w4[4] = {want[0], want[1], sq, skv};
            fail(m, "the mask '%s' %s does not broadcast to [b, h, s_q, s_kv] = %s (or its shape "
                    "cannot be derived)", m->mask_value,
                 mrank >= 1 && mrank <= 4 ? dims_text(m, mdims, mrank, mt, sizeof mt) : "[?]",
                 dims_text(m, w4, 4, wt, sizeof wt));
            return NULL;
        }
        if (m->mask_kind == 1 && m->scale_after_mask && m->scale != 1.0) {
            fail(m, "the scale is applied after the additive mask '%s'", m->mask_value);
            return NULL;
        }
        if (m->mask_kind == 2 && !isinf(m->where_fill)) {
            fail(m, "the mask '%s' fills with %g, which differs from DotProductAttention's -inf "
                    "on fully masked rows", m->mask_value, m->where_fill);
            return NULL;
        }
        if (m->mask_kind == 2 && dt != TEEXEC_DTYPE_BOOL) {
            fail(m, "the Where condition '%s' is not bool", m->mask_value);
            return NULL;
        }
        if (m->mask_kind == 1 && dt != TEEXEC_DTYPE_UNDEFINED && !tx_dtype_is_real(dt)) {
            fail(m, "the additive mask '%s' is not a float tensor", m->mask_value);
            return NULL;
        }
        /* [b|1, h|1, s_q, s_kv] as DotProductAttention takes it, else an
         * Expand to that ([b, 1, 1, s_kv] padding masks) */
        pl->mask_expand = mrank != 4 || (md[2] == 1 && sq != 1) || (md[3] == 1 && skv != 1);
        if (pl->mask_expand && (md[0] < 0 || md[1] < 0 || sq < 0 || skv < 0)) {
            fail(m, "the mask '%s' must be expanded to [b|1, h|1, s_q, s_kv], but those dims are "
                    "not fixed numbers", m->mask_value);
            return NULL;
        }
        pl->mask_dims[0] = md[0];
        pl->mask_dims[1] = md[1];
        pl->mask_dims[2] = sq;
        pl->mask_dims[3] = skv;
        pl->mask_in = m->mask_value;
        pl->mask_needs_not = m->mask_kind == 2 && !m->where_masked_is_true;
        *ok = true;
        return NULL;
    }
    if (sq < 0 || skv < 0) {
        tx_ce_release(&cv);
        fail(m, "the mask is constant but the sequence lengths are not known to check it");
        return NULL;
    }
    mask_view mv;
    bool fits = classify(&cv, m->mask_kind, m->where_masked_is_true, m->q.dims[0],
                         m->q.dims[2], sq, skv, &mv);
    if (!fits) {
        tx_ce_release(&cv);
        fail(m, "the constant mask does not broadcast to [b, h, s_q, s_kv] = [%lld, %lld, "
                "%lld, %lld] (its dims must be 1 or those)", (long long)m->q.dims[0],
             (long long)m->q.dims[2], (long long)sq, (long long)skv);
        return NULL;
    }
    teexec_status *st = NULL;
    switch (mv.cls) {
    case MASK_NONE: *ok = true; break;
    case MASK_CAUSAL: pl->causal = 1; *ok = true; break;
    case MASK_ROW_EMPTY:
        fail(m, "the constant mask hides every key of some query row (PyTorch gives NaN or a "
                "uniform row there, DotProductAttention 0)");
        break;
    case MASK_OTHER:
        if (m->mask_kind == 1 && m->scale_after_mask && m->scale != 1.0) {
            fail(m, "the scale is applied after a constant additive mask that is not causal");
            break;
        }
        {
            int64_t dims[4] = {mv.mb, mv.mh, sq, skv};
            bool is_bool = m->mask_kind == 2 || !mv.soft;
            st = tx_tensor_alloc(&pl->mask_const, is_bool ? TEEXEC_DTYPE_BOOL : TEEXEC_DTYPE_FLOAT,
                                 4, dims);
            if (st) break;
            size_t o = 0;
            for (int64_t bi = 0; bi < mv.mb; bi++)
                for (int64_t hi = 0; hi < mv.mh; hi++)
                    for (int64_t i = 0; i < sq; i++)
                        for (int64_t j = 0; j < skv; j++, o++) {
                            double v = mask_at(&mv, bi, hi, i, j);
                            if (!is_bool)
                                ((float *)pl->mask_const.data)[o] = (float)v;
                            else if (m->mask_kind == 1)
                                ((uint8_t *)pl->mask_const.data)[o] = v <= MASK_NEG;
                            else
                                ((uint8_t *)pl->mask_const.data)[o] =
                                    (uint8_t)((v != 0) == m->where_masked_is_true);
                        }
            *ok = true;
        }
        break;
    }
    tx_ce_release(&cv);
    return st;
}

/* Every value a core node defines is read only by core nodes (the final
 * Reshape's output excepted: it becomes the DotProductAttention's). */
static teexec_status *contained(tx_rw_graph *g, match *m, size_t out_reshape, bool *ok)
{
    *ok = false;
    for (size_t k = 0; k < m->core.n; k++) {
        if (m->core.v[k] == out_reshape) continue;
        const tx_rw_node *n = tx_rw_node_at(g, m->core.v[k]);
        for (size_t o = 0; o < n->n_outputs; o++) {
            const char *val = n->outputs[o];
            if (!val[0]) continue;
            if (tx_rw_is_graph_output(g, val)) {
                fail(m, "'%s' (output of %s) is a graph output, so the attention "
                        "intermediates must stay", val, label(n));
                return NULL;
            }
            size_t nc = 0;
            const tx_ir_use *u = tx_rw_consumers(g, val, &nc);
            for (size_t c = 0; c < nc; c++) {
                if (set_has(&m->core, (size_t)u[c].node)) continue;
                const tx_rw_node *r = tx_rw_node_at(g, (size_t)u[c].node);
                /* a Shape of a static intermediate (the TorchScript
                 * exporter's scale and mask read q's shape) becomes its
                 * constant in rewrite() */
                if (is_op(r, "Shape") && r->n_outputs == 1) {
                    tx_ce_value cv;
                    bool is_c = false;
                    TX_TRY(tx_ce_eval(g, r->outputs[0], &cv, &is_c));
                    tx_ce_release(&cv);
                    if (is_c) {
                        TX_TRY(set_add(&m->shape_readers, (size_t)u[c].node));
                        continue;
                    }
                }
                fail(m, "'%s' (output of %s) is also read by %s (%s) outside the attention "
                        "pattern", val, label(n), label(r), r->op_type);
                return NULL;
            }
        }
    }
    *ok = true;
    return NULL;
}

/* The Shape nodes contained() let read the match's intermediates, each
 * replaced by an int64 initializer of its value under its output's name. */
static teexec_status *fold_shape_readers(tx_rw_graph *g, const match *m)
{
    for (size_t k = 0; k < m->shape_readers.n; k++) {
        tx_rw_node *r = tx_rw_node_at(g, m->shape_readers.v[k]);
        if (!r || r->dead) continue;
        tx_ce_value cv;
        bool is_c = false;
        TX_TRY(tx_ce_eval(g, r->outputs[0], &cv, &is_c));
        if (!is_c) continue; /* checked by contained(): cannot happen */
        tx_tensor t;
        int64_t n = (int64_t)cv.n;
        teexec_status *st = tx_tensor_alloc(&t, TEEXEC_DTYPE_INT64, 1, &n);
        for (uint64_t i = 0; !st && i < cv.n; i++) ((int64_t *)t.data)[i] = (int64_t)cv.v[i];
        tx_ce_release(&cv);
        char *name = st ? NULL : strdup(r->outputs[0]);
        if (!st && !name) st = tx_oom();
        if (!st) {
            tx_rw_remove_node(g, m->shape_readers.v[k]);
            st = tx_rw_set_initializer(g, name, &t);
        }
        free(name);
        tx_tensor_release(&t);
        TX_TRY(st);
    }
    return NULL;
}

/* Removes the producers of `names` that nothing reads any more, and theirs. */
static void remove_dead_feeders(tx_rw_graph *g, char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int64_t pi;
        tx_rw_node *p = producer(g, names[i], &pi, NULL);
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
            ins[k] = strdup(p->inputs[k]);
            if (!ins[k]) copied = false;
        }
        tx_rw_remove_node(g, (size_t)pi);
        /* without the copy (out of memory) the feeders merely stay: harmless */
        if (copied) remove_dead_feeders(g, ins, nin);
        for (size_t k = 0; ins && k < nin; k++) free(ins[k]);
        free(ins);
    }
}

/* A new Transpose(0,2,1,3) of *value (bhsd -> bshd); *value, malloc'd,
 * is replaced by the (malloc'd) name of its output. */
static teexec_status *add_transpose(tx_rw_graph *g, char **value, const char *hint)
{
    char nm[256];
    snprintf(nm, sizeof nm, "%s_bshd", hint);
    const char *fresh = tx_rw_fresh_name(g, nm);
    char *out = fresh ? strdup(fresh) : NULL;
    if (!out) return tx_oom();
    snprintf(nm, sizeof nm, "%s/Transpose_bshd", hint);
    const char *node_name = tx_rw_fresh_name(g, nm);
    size_t idx = 0;
    const char *ins[1] = {*value}, *outs[1] = {out};
    teexec_status *st = node_name ? tx_rw_add_node(g, "Transpose", "", node_name, ins, 1, outs, 1,
                                                   &idx)
                                  : tx_oom();
    static const int64_t perm[4] = {0, 2, 1, 3};
    if (!st) st = tx_rw_set_ints(g, idx, "perm", perm, 4);
    if (st) {
        free(out);
        return st;
    }
    free(*value);
    *value = out;
    return NULL;
}

/* A new Expand of *mask to dims (a padding mask [b, 1, 1, s_kv] becomes
 * [b, 1, s_q, s_kv], the shapes DotProductAttention takes); *mask,
 * malloc'd, is replaced by the (malloc'd) name of its output. */
static teexec_status *expand_mask(tx_rw_graph *g, char **mask, const int64_t dims[4],
                                  const char *hint)
{
    char nm[256];
    tx_tensor shape;
    int64_t four = 4;
    TX_TRY(tx_tensor_alloc(&shape, TEEXEC_DTYPE_INT64, 1, &four));
    memcpy(shape.data, dims, 4 * sizeof *dims);
    snprintf(nm, sizeof nm, "%s/mask_shape", hint);
    const char *sn = tx_rw_fresh_name(g, nm);
    char *shape_name = sn ? strdup(sn) : NULL;
    teexec_status *st = shape_name ? tx_rw_set_initializer(g, shape_name, &shape) : tx_oom();
    tx_tensor_release(&shape);
    snprintf(nm, sizeof nm, "%s/mask_expanded", hint);
    const char *on = st ? NULL : tx_rw_fresh_name(g, nm);
    char *out = on ? strdup(on) : NULL;
    if (!st && !out) st = tx_oom();
    snprintf(nm, sizeof nm, "%s/Expand_mask", hint);
    const char *nn = st ? NULL : tx_rw_fresh_name(g, nm);
    if (!st && !nn) st = tx_oom();
    const char *ins[2] = {*mask, shape_name}, *outs[1] = {out};
    if (!st) st = tx_rw_add_node(g, "Expand", "", nn, ins, 2, outs, 1, NULL);
    free(shape_name);
    if (st) {
        free(out);
        return st;
    }
    free(*mask);
    *mask = out;
    return NULL;
}

/* Rewrites one match. Strings from the graph are copied first: edits
 * invalidate them. */
static teexec_status *rewrite(tx_rw_graph *g, match *m, plan *pl)
{
    teexec_status *st = NULL;
    char *qv = strdup(m->q.value), *kv = strdup(m->k.value), *vv = strdup(m->v.value);
    char *anchor = strdup(m->anchor);
    char *outv = NULL;
    if (m->out_keep_reshape && anchor) {
        char nm[256];
        snprintf(nm, sizeof nm, "%s/attention_out", anchor);
        const char *fresh = tx_rw_fresh_name(g, nm);
        outv = fresh ? strdup(fresh) : NULL;
    } else if (m->out_value) {
        outv = strdup(m->out_value);
    }
    char *maskv = pl->mask_in ? strdup(pl->mask_in) : NULL;
    char **feeders = NULL;
    size_t nf = 0, capf = 0;
    if (!qv || !kv || !vv || !outv || !anchor || (pl->mask_in && !maskv)) {
        st = tx_oom();
        goto done;
    }
    /* inputs of the removed nodes, to clean up their now-dead feeders */
    for (size_t k = 0; k < m->core.n && !st; k++) {
        const tx_rw_node *n = tx_rw_node_at(g, m->core.v[k]);
        for (size_t i = 0; i < n->n_inputs; i++) {
            if (!n->inputs[i][0]) continue;
            if (nf == capf) {
                size_t cap = capf ? 2 * capf : 32;
                char **nfd = realloc(feeders, cap * sizeof *nfd);
                if (!nfd) {
                    st = tx_oom();
                    break;
                }
                feeders = nfd;
                capf = cap;
            }
            feeders[nf] = strdup(n->inputs[i]);
            if (!feeders[nf]) {
                st = tx_oom();
                break;
            }
            nf++;
        }
    }
    if (st) goto done;
    if ((st = fold_shape_readers(g, m))) goto done;
    if (m->q_prescale >= 0) {
        tx_rw_node *rs = tx_rw_node_at(g, (size_t)m->q_prescale_reshape);
        char *in = strdup(m->q_prescale_in);
        if (!in) {
            st = tx_oom();
            goto done;
        }
        free(rs->inputs[0]);
        rs->inputs[0] = in;
        tx_rw_remove_node(g, (size_t)m->q_prescale);
    }
    for (size_t k = 0; k < m->core.n; k++)
        if (!m->out_keep_reshape || m->core.v[k] != m->out_reshape)
            tx_rw_remove_node(g, m->core.v[k]);
    if (m->out_keep_reshape) {
        tx_rw_node *rs = tx_rw_node_at(g, m->out_reshape);
        char *in = strdup(outv);
        if (!in) {
            st = tx_oom();
            goto done;
        }
        free(rs->inputs[0]);
        rs->inputs[0] = in;
    }

    if (m->q.needs_transpose && (st = add_transpose(g, &qv, anchor))) goto done;
    if (m->k.needs_transpose && (st = add_transpose(g, &kv, anchor))) goto done;
    if (m->v.needs_transpose && (st = add_transpose(g, &vv, anchor))) goto done;
    char *mc = NULL;
    if (pl->mask_const.data) {
        char nm[256];
        snprintf(nm, sizeof nm, "%s/mask", anchor);
        const char *mn = tx_rw_fresh_name(g, nm);
        mc = mn ? strdup(mn) : NULL;
        if (!mc) st = tx_oom();
        if (!st) st = tx_rw_set_initializer(g, mc, &pl->mask_const);
    } else if (!st && pl->mask_needs_not) {
        char nm[256];
        snprintf(nm, sizeof nm, "%s/mask_not", anchor);
        const char *mn = tx_rw_fresh_name(g, nm);
        mc = mn ? strdup(mn) : NULL;
        if (!mc) st = tx_oom();
        snprintf(nm, sizeof nm, "%s/Not", anchor);
        const char *nn = st ? NULL : tx_rw_fresh_name(g, nm);
        if (!st && !nn) st = tx_oom();
        const char *ins[1] = {maskv}, *outs[1] = {mc};
        if (!st) st = tx_rw_add_node(g, "Not", "", nn, ins, 1, outs, 1, NULL);
    } else if (!st && maskv) {
        mc = strdup(maskv);
        if (!mc) st = tx_oom();
    }
    if (!st && pl->mask_expand) st = expand_mask(g, &mc, pl->mask_dims, anchor);
    if (!st) {
        char nm[256];
        snprintf(nm, sizeof nm, "%s/DotProductAttention", anchor);
        const char *nn = tx_rw_fresh_name(g, nm);
        const char *ins[4] = {qv, kv, vv, mc ? mc : ""};
        const char *outs[1] = {outv};
        size_t idx = 0;
        st = nn ? tx_rw_add_node(g, PATTERN, "te.ops", nn, ins, mc ? 4 : 3, outs, 1, &idx)
                : tx_oom();
        if (!st && m->q.dims[2] > 0)
            st = tx_rw_set_int(g, idx, "num_attention_heads", m->q.dims[2]);
        if (!st && m->k.dims[2] > 0)
            st = tx_rw_set_int(g, idx, "num_gqa_groups", m->k.dims[2]);
        if (!st) st = tx_rw_set_int(g, idx, "causal", pl->causal);
        if (!st) st = tx_rw_set_float(g, idx, "scale", (float)m->scale);
        if (!st) st = tx_rw_set_string(g, idx, "qkv_format", "bshd");
    }
    free(mc);
    if (!st) remove_dead_feeders(g, feeders, nf);
done:
    for (size_t i = 0; i < nf; i++) free(feeders[i]);
    free(feeders);
    free(qv);
    free(kv);
    free(vv);
    free(outv);
    free(anchor);
    free(maskv);
    return st;
}

/* The Reshape `rs` after the attention's Transpose back: replaced when its
 * result is [b, s, h*dv] (m->out_value), kept reading the attention's
 * [b, s, h*dv] when it is another view of the same elements
 * (m->out_keep_reshape: GPT-2's [b*s, h*d] before a Gemm); else m->reason
 * says why not. A constant target is resolved against fixed dims, or,
 * with a symbolic b or s, kept when it has no 0 past the first two
 * entries (a 0 copies the input's dim there, and dims 0 and 1 are b and s
 * in both the rank-4 and the rank-3 input; the rest follows from the
 * element count, which is the same). A computed target (a dynamic
 * export's Concat of shape pieces) is accepted when the exporter declared
 * the Reshape's result [b, s, h*dv] with b and s the same dims as q's. */
static teexec_status *out_target(tx_rw_graph *g, match *m, const tx_rw_node *rs, int64_t b,
                                 int64_t s, int64_t h, int64_t dv)
{
    int64_t spec[8], got[8];
    size_t ns = 0;
    if (!tx_ce_ints(g, rs->inputs[1], spec, 8, &ns) || ns < 1) {
        int64_t od[TX_MAX_RANK];
        int32_t orank = -1;
        TX_TRY(sym_dims(g, m, rs->outputs[0], &orank, od, NULL));
        if (orank == 3 && dim_same(od[0], b) && dim_same(od[1], s) && od[2] == h * dv)
            m->out_value = rs->outputs[0];
        else
            fail(m, "the attention output's Reshape target is not a constant, and its result "
                    "is not declared [b, s, h*d_v]");
        return NULL;
    }
    bool fixed = b >= 0 && s >= 0;
    if (fixed) {
        int64_t in4[4] = {b, s, h, dv};
        resolve_reshape(in4, 4, spec, ns, got);
        if (ns == 3 && got[0] == b && got[1] == s && got[2] == h * dv) {
            m->out_value = rs->outputs[0];
            return NULL;
        }
        /* Another view of the same elements: the Reshape stays. A 0 in
         * the target would copy a dim of the rank-4 input, which differs
         * from the rank-3 one it would then read. */
        int64_t total = 1, want = b * s * h * dv;
        bool zero = false;
        for (size_t i = 0; i < ns; i++) {
            zero = zero || spec[i] == 0;
            total = got[i] >= 0 && total >= 0 ? total * got[i] : -1;
        }
        if (zero || total != want) {
            fail(m, "the attention output is reshaped to a target that is not a view of "
                    "[b, s, h*d_v]");
            return NULL;
        }
    } else {
        if (b == DIM_UNKNOWN || s == DIM_UNKNOWN) {
            fail(m, "the attention output's batch or sequence dim is not known");
            return NULL;
        }
        int negs = 0;
        for (size_t i = 0; i < ns; i++) {
            if ((spec[i] == 0 && i >= 2) || spec[i] < -1) {
                fail(m, "the attention output is reshaped to a target that copies a head dim "
                        "(0 past the first two entries)");
                return NULL;
            }
            negs += spec[i] == -1;
        }
        if (negs > 1) {
            fail(m, "the attention output's Reshape target has more than one -1");
            return NULL;
        }
    }
    m->out_keep_reshape = true;
    m->out_value = NULL; /* a fresh name, made by rewrite() */
    return NULL;
}

/* The rest of a match once q, k and v are walked: the output `o` of the
 * attention (P·V or the Attention op's Y, [b, h, s, d_v]) must be
 * transposed back and reshaped; the shapes must fit one attention; then
 * the mask is planned, the match checked to be self-contained and
 * rewritten. Declines are noted at `label`. */
static teexec_status *finish(tx_rw_graph *g, match *m, const char *o, const char *qk_label,
                             tx_lower_report *r)
{
    teexec_status *st = NULL;
    /* output: Transpose(0,2,1,3) -> Reshape [b, s, h*dv] */
    size_t n1 = 0;
    const tx_ir_use *u1 = tx_rw_consumers(g, o, &n1);
    int64_t t_idx = n1 == 1 ? u1[0].node : -1;
    tx_rw_node *t = t_idx >= 0 ? tx_rw_node_at(g, (size_t)t_idx) : NULL;
    size_t n2 = 0;
    const tx_ir_use *u2 = perm_is(t, 0, 2, 1, 3) && !tx_rw_is_graph_output(g, o)
                              ? tx_rw_consumers(g, t->outputs[0], &n2) : NULL;
    tx_rw_node *rs = u2 && n2 == 1 ? tx_rw_node_at(g, (size_t)u2[0].node) : NULL;
    if (!is_op(rs, "Reshape") || rs->n_inputs != 2 || u2[0].slot != 0 ||
        tx_rw_is_graph_output(g, t->outputs[0]))
        return note(r, qk_label, false,
                    "the attention output is not transposed back (0,2,1,3) and reshaped to "
                    "[b, s, h*d] with nothing else reading the intermediates");
    int64_t out_idx = u2[0].node;
    if ((st = set_add(&m->core, (size_t)t_idx)) ||
        (st = set_add(&m->core, (size_t)out_idx)))
        return st;
    int64_t b = m->q.dims[0], s = m->q.dims[1], h = m->q.dims[2], dv = m->v.dims[3];
    if (h < 0 || dv < 0)
        return note(r, qk_label, false, "the number of heads or the head size is not a fixed "
                                        "number");
    if ((st = out_target(g, m, rs, b, s, h, dv))) return st;
    if (!m->out_keep_reshape && !m->out_value) return note(r, qk_label, false, m->reason);
    m->out_reshape = (size_t)out_idx;

    /* shapes: q [b,s,h,d], k [b,skv,hk,d], v [b,skv,hk,dv] */
    const int64_t *q = m->q.dims, *k = m->k.dims, *v = m->v.dims;
    char tq[160], tk[160], tv[160];
    bool ok = true;
    /* Heads and head sizes must be fixed numbers, batches the same dim.
     * The sequence of k and of v need only be the same dim when both are
     * fixed: P·V contracts them, so the model itself fails on any run
     * where they differ (the exporter names the past key's and the past
     * value's length apart). */
    bool seq_fits = dim_same(k[1], v[1]) || (k[1] != DIM_UNKNOWN && v[1] != DIM_UNKNOWN &&
                                             (k[1] < 0 || v[1] < 0));
    if (k[0] == DIM_UNKNOWN || k[1] == DIM_UNKNOWN || v[0] == DIM_UNKNOWN ||
        v[1] == DIM_UNKNOWN || k[2] < 0 || k[3] < 0 || v[2] < 0 || q[3] < 0)
        ok = fail(m, "the key/value shapes are not known (heads and head sizes must be fixed)");
    else if (!dim_same(k[0], b) || !dim_same(v[0], b) || !seq_fits || k[2] != v[2] ||
             k[3] != q[3])
        ok = fail(m, "q %s, k %s and v %s (bshd) do not fit one attention",
                  dims_text(m, q, 4, tq, sizeof tq), dims_text(m, k, 4, tk, sizeof tk),
                  dims_text(m, v, 4, tv, sizeof tv));
    else if (m->rk.n != m->rv.n)
        ok = fail(m, "keys are repeated %lld times but values %lld times",
                  (long long)m->rk.n, (long long)m->rv.n);
    else if (!check_repeat(m, &m->rk, k, "key") || !check_repeat(m, &m->rv, v, "value") ||
             !check_kt3d(m, k, m->rk.n))
        ok = false;
    else if (h != k[2] * m->rk.n &&
             !(m->op_gqa && m->rk.n == 1 && k[2] > 0 && h % k[2] == 0))
        ok = fail(m, "%lld query heads do not match %lld kv heads x %lld repeats",
                  (long long)h, (long long)k[2], (long long)m->rk.n);
    else if (m->scale == 0 || !isfinite(m->scale))
        ok = fail(m, "the softmax scale folds to %g", m->scale);
    if (!ok) {
        return note(r, qk_label, false, m->reason);
    }
    plan pl;
    bool mok = false;
    if ((st = plan_mask(g, m, &pl, &mok))) return st;
    if (mok && m->op_causal) {
        /* the Attention op's is_causal aligns the triangle top-left,
         * DotProductAttention's bottom-right: the same when s_q = s_kv */
        if (m->q.dims[1] != m->k.dims[1])
            mok = fail(m, "is_causal with s_q %lld != s_kv %lld (the Attention op aligns the "
                          "causal mask top-left, DotProductAttention bottom-right)",
                       (long long)m->q.dims[1], (long long)m->k.dims[1]);
        else
            pl.causal = 1;
    }
    if (!mok) {
        tx_tensor_release(&pl.mask_const);
        return note(r, qk_label, false, m->reason);
    }
    bool cok = false;
    st = contained(g, m, (size_t)out_idx, &cok);
    if (st || !cok) {
        tx_tensor_release(&pl.mask_const);
        return st ? st : note(r, qk_label, false, m->reason);
    }
    st = rewrite(g, m, &pl);
    tx_tensor_release(&pl.mask_const);
    if (!st) st = note(r, qk_label, true, NULL);
    return st;
}

/* The dynamo exporter's guard after the Softmax, Where(IsNaN(P), 0, P):
 * it zeroes the rows a mask hid completely (softmax of all -inf is NaN),
 * which is what DotProductAttention gives for such rows, so it belongs to
 * the pattern. True when P is read by exactly that IsNaN and Where, the
 * IsNaN only by the Where. */
static bool nan_guard(tx_rw_graph *g, const char *p, int64_t *isnan, int64_t *where)
{
    if (tx_rw_is_graph_output(g, p)) return false;
    size_t nc = 0;
    const tx_ir_use *u = tx_rw_consumers(g, p, &nc);
    int64_t in = -1, wh = -1;
    for (size_t c = 0; c < nc; c++) {
        tx_rw_node *n = tx_rw_node_at(g, (size_t)u[c].node);
        if (is_op(n, "IsNaN") && u[c].slot == 0 && in < 0) in = u[c].node;
        else if (is_op(n, "Where") && u[c].slot == 2 && wh < 0) wh = u[c].node;
        else return false;
    }
    if (in < 0 || wh < 0) return false;
    tx_rw_node *isn = tx_rw_node_at(g, (size_t)in), *whn = tx_rw_node_at(g, (size_t)wh);
    double zero;
    if (whn->n_inputs != 3 || isn->n_outputs < 1 || strcmp(whn->inputs[0], isn->outputs[0]) ||
        !scalar_in(g, whn, 1, &zero) || zero != 0.0 ||
        tx_lm_sole_reader(g, isn->outputs[0]) != wh)
        return false;
    *isnan = in;
    *where = wh;
    return true;
}

/* Tries the attention anchored on Softmax node `si`: lowers it, or adds a
 * note saying why not once it looks like attention (a Softmax whose output
 * is the left operand of a MatMul, or goes through Dropout); any other
 * Softmax is left alone without a note. */
static teexec_status *try_one(tx_rw_graph *g, size_t si, tx_lower_report *r)
{
    match m;
    memset(&m, 0, sizeof m);
    m.scale = 1.0;
    m.rk.n = m.rv.n = 1;
    m.q_prescale = m.q_prescale_reshape = -1;
    m.softmax = tx_rw_node_at(g, si);
    teexec_status *st = NULL;
    if (!is_op(m.softmax, "Softmax") || m.softmax->n_inputs < 1 || m.softmax->n_outputs < 1)
        return NULL;
    char softmax_label[256];
    snprintf(softmax_label, sizeof softmax_label, "%s", label(m.softmax));
    m.anchor = softmax_label;

    /* forward: probabilities -> [NaN guard] -> [Dropout] -> MatMul(P, V) */
    const char *probs = m.softmax->outputs[0];
    int64_t guard_isnan = -1, guard_where = -1;
    if (nan_guard(g, probs, &guard_isnan, &guard_where))
        probs = tx_rw_node_at(g, (size_t)guard_where)->outputs[0];
    size_t nc = 0;
    const tx_ir_use *u = tx_rw_consumers(g, probs, &nc);
    int64_t pv = -1;
    bool dropout = false, other_reader = tx_rw_is_graph_output(g, probs);
    for (size_t c = 0; c < nc; c++) {
        tx_rw_node *n = tx_rw_node_at(g, (size_t)u[c].node);
        if (is_op(n, "MatMul") && u[c].slot == 0) pv = u[c].node;
        else if (is_op(n, "Dropout")) dropout = true;
        else other_reader = true;
    }
    if (pv < 0 && !dropout) return NULL; /* a softmax, but not attention */
    if (dropout) {
        /* training-mode Dropout on P: TE's attention dropout is not modelled */
        return note(r, softmax_label, false,
                    "dropout on the attention probabilities (exported for training); "
                    "DotProductAttention here has no dropout");
    }
    if (other_reader)
        return note(r, softmax_label, false,
                    "the attention probabilities (Softmax output) are read outside the pattern "
                    "(or are a graph output)");
    const tx_rw_attr *ax = find_attr(m.softmax, "axis");
    tx_rw_node *pvn = tx_rw_node_at(g, (size_t)pv);

    int64_t qk = -1;
    if ((st = set_add(&m.core, si)) || (st = set_add(&m.core, (size_t)pv))) goto done;
    if (guard_where >= 0 && ((st = set_add(&m.core, (size_t)guard_isnan)) ||
                             (st = set_add(&m.core, (size_t)guard_where))))
        goto done;
    if (!ax || ax->type != TX_IR_ATTR_INT || (ax->i != -1 && ax->i != 3)) {
        st = note(r, softmax_label, false, "the Softmax is not over the last axis (axis -1)");
        goto done;
    }
    if ((st = walk_scores(g, &m, &qk))) goto done;
    if (qk < 0) {
        st = note(r, softmax_label, false, m.reason);
        goto done;
    }
    tx_rw_node *qkn = tx_rw_node_at(g, (size_t)qk);
    char qk_label[256];
    snprintf(qk_label, sizeof qk_label, "%s", label(qkn));
    m.anchor = qk_label;
    if (qkn->n_inputs != 2 || pvn->n_inputs != 2) goto done;
    if ((st = walk_q(g, &m, qkn->inputs[0]))) goto done;
    bool kok = false;
    if ((st = walk_k(g, &m, qkn->inputs[1], &kok))) goto done;
    if (!kok) {
        st = note(r, qk_label, false,
                  "the key operand of the score MatMul is not a transposed key "
                  "(Transpose(0,2,3,1) of [b,s,h,d] or Transpose(0,1,3,2) of [b,h,s,d])");
        goto done;
    }
    if ((st = walk_v(g, &m, pvn->inputs[1]))) goto done;

    st = finish(g, &m, pvn->outputs[0], qk_label, r);
done:
    free(m.core.v);
    free(m.shape_readers.v);
    for (size_t i = 0; i < m.n_syms; i++) free(m.syms[i]);
    return st;
}

/* ---- the ONNX Attention op (opset 23) ------------------------------------- */

/* An output of the Attention op nothing reads (present_key / present_value /
 * qk_matmul_output must be unused: DotProductAttention has no such outputs). */
static bool output_unused(tx_rw_graph *g, const tx_rw_node *n, size_t k)
{
    if (k >= n->n_outputs || !n->outputs[k][0]) return true;
    return tx_lm_reader_count(g, n->outputs[k]) == 0 && !tx_rw_is_graph_output(g, n->outputs[k]);
}

/* Attention(Q, K, V[, attn_mask]) with 4-D [b, h, s, d] operands (the
 * dynamo exporter's SDPA at opset 23): q, k and v are walked as for the
 * decomposed form (their Transpose from bshd and a GQA repeat of k and v
 * are absorbed), the bool mask (true = attend) or float mask is planned
 * the same way, is_causal becomes causal, scale (default 1/sqrt(d))
 * becomes scale. Declined with a note: past key/value inputs, used
 * present/qk outputs, softcap, 3-D operands. */
static teexec_status *try_attention_op(tx_rw_graph *g, size_t ai, tx_lower_report *r)
{
    tx_rw_node *a = tx_rw_node_at(g, ai);
    char lbl[256];
    snprintf(lbl, sizeof lbl, "%s", label(a));
    if (a->n_inputs < 3 || a->n_outputs < 1 || !a->outputs[0][0])
        return note(r, lbl, false, "an Attention node without q, k, v or output");
    for (size_t k = 4; k < a->n_inputs; k++)
        if (a->inputs[k][0])
            return note(r, lbl, false, "past key/value (or sequence length) inputs: a KV "
                                       "cache, which DotProductAttention does not keep");
    for (size_t k = 1; k < a->n_outputs; k++)
        if (!output_unused(g, a, k))
            return note(r, lbl, false, "its present key/value or qk_matmul_output output is "
                                       "used");
    const tx_rw_attr *sc = find_attr(a, "softcap");
    if (sc && (sc->type != TX_IR_ATTR_FLOAT || sc->f != 0.0f))
        return note(r, lbl, false, "softcap is set (DotProductAttention has no score softcap)");
    tx_shape qs;
    bool known = false;
    TX_TRY(tx_lower_shape_of(g, a->inputs[0], &qs, &known));
    if (!known || qs.rank != 4)
        return note(r, lbl, false, "q is not a 4-D [b, h, s, d] tensor of known shape (3-D "
                                   "operands are not lowered)");
    match m;
    memset(&m, 0, sizeof m);
    m.scale = 1.0;
    m.rk.n = m.rv.n = 1;
    m.q_prescale = m.q_prescale_reshape = -1;
    m.anchor = lbl;
    teexec_status *st = set_add(&m.core, ai);
    if (!st) st = walk_q(g, &m, a->inputs[0]);
    if (!st) st = walk_kv(g, &m, a->inputs[1], &m.k, &m.rk);
    if (!st) st = walk_kv(g, &m, a->inputs[2], &m.v, &m.rv);
    if (st) goto done;
    const tx_rw_attr *sa = find_attr(a, "scale");
    if (sa && sa->type == TX_IR_ATTR_FLOAT) {
        m.scale *= sa->f;
    } else if (m.q.dims[3] > 0) {
        m.scale *= 1.0 / sqrt((double)m.q.dims[3]);
    } else {
        st = note(r, lbl, false, "no scale and the head size is not known");
        goto done;
    }
    const tx_rw_attr *ca = find_attr(a, "is_causal");
    m.op_causal = ca && ca->type == TX_IR_ATTR_INT && ca->i != 0;
    m.op_gqa = true;
    if (a->n_inputs > 3 && a->inputs[3][0]) {
        teexec_dtype dt;
        tx_shape ms;
        bool mk = false;
        if ((st = tx_lower_type_of(g, a->inputs[3], &dt, &ms, &mk))) goto done;
        m.mask_value = a->inputs[3];
        if (mk && dt == TEEXEC_DTYPE_BOOL) {
            m.mask_kind = 2; /* Where(mask, S, -inf): true = attend */
            m.where_masked_is_true = false;
            m.where_fill = -INFINITY;
        } else if (mk && tx_dtype_is_real(dt)) {
            m.mask_kind = 1;
        } else {
            st = note(r, lbl, false, "the mask's type cannot be derived");
            goto done;
        }
    }
    st = finish(g, &m, a->outputs[0], lbl, r);
done:
    free(m.core.v);
    free(m.shape_readers.v);
    for (size_t i = 0; i < m.n_syms; i++) free(m.syms[i]);
    return st;
}

teexec_status *tx_lower_attention(tx_rw_graph *g, tx_lower_report *r)
{
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_lower_attention: no graph");
    /* Nodes appended by a rewrite are te.ops or helpers, never a Softmax,
     * so one pass over the original count sees every candidate. */
    size_t n = tx_rw_node_count(g);
    for (size_t i = 0; i < n; i++) {
        tx_rw_node *s = tx_rw_node_at(g, i);
        if (is_op(s, "Softmax")) TX_TRY(try_one(g, i, r));
        else if (is_op(s, "Attention")) TX_TRY(try_attention_op(g, i, r));
    }
    return NULL;
}
