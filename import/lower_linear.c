/* lower_linear.c - MatMul / Gemm with a constant weight -> te.ops Linear,
 * and the bias that follows (Gemm's C, or an Add of a constant [N]
 * vector) -> te.ops Bias.
 *
 * Weights: Linear stores [N, K] (y = x Wᵀ). Gemm with transB=1 already has
 * that layout and is used as is (weight_layout "NK"). MatMul's and Gemm
 * transB=0's [K, N] initializer is transposed in place under its own name
 * (weight_layout "KN"), which is only correct when every reader of the
 * initializer is lowered the same way: the pass checks all readers first
 * and declines (with a note) when one of them would be left reading the
 * transposed bytes.
 *
 * A weight written as Transpose(W) of an initializer W (read by this node
 * only) is W in the other layout: the Linear reads W (the Transpose goes).
 *
 * Tied LM heads: when the weight holds the bits of an embedding table T
 * (the table of a Gather on axis 0 or a te.ops Embedding; for MatMul's
 * [K, N] weight, T's transpose), the Linear reads T itself, so one
 * initializer serves both uses as in the user's model. The head's own copy
 * is dropped (nothing reads it); weight_source names it and weight_layout
 * says how it related to T ("KN": it was T's transpose), so
 * tx_param_sources maps its gradient to T's (transposed back), which is
 * the tied parameter's whole gradient, as PyTorch reports it under each
 * name.
 *
 * Not a Linear (left alone, no note): MatMul between two activations
 * (attention scores, batched matmuls), MatMul of two constants. Declined
 * with a note: Gemm with transA=1, alpha != 1, beta != 1, a C that is not a
 * [N] vector; a weight that is a graph input (callers may override it) or a
 * Constant node, or not a rank-2 float tensor. */
#include "import/lower.h"

#include "format/te_schema.h"
#include "import/lower_match.h"
#include "import/lower_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lin_plan {
    const char *x, *w, *out; /* main input, weight, the value the Linear(+Bias) must define */
    const char *bias;        /* NULL: no bias */
    int64_t add_node;        /* the Add folded into the Bias, or -1 */
    bool kn;                 /* weight stored [K, N]: transpose */
    int64_t n;               /* output features */
    const char *tied_source; /* a tied head: the user's weight, w is the table */
    bool tied_kn;            /* ... which was the table's transpose */
} lin_plan;

static char *dupstr(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static bool in_names(char **list, size_t n, const char *v)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], v) == 0) return true;
    return false;
}

static bool is_op(const tx_rw_node *n, const char *op)
{
    return !n->dead && n->domain[0] == '\0' && strcmp(n->op_type, op) == 0;
}

static int64_t int_attr(const tx_rw_graph *g, size_t node, const char *name, int64_t def)
{
    const tx_rw_attr *a = tx_rw_get_attr(g, node, name);
    return a && a->type == TX_IR_ATTR_INT ? a->i : def;
}

static float float_attr(const tx_rw_graph *g, size_t node, const char *name, float def)
{
    const tx_rw_attr *a = tx_rw_get_attr(g, node, name);
    return a && a->type == TX_IR_ATTR_FLOAT ? a->f : def;
}

/* A parameter the Linear can own: an initializer no graph input overrides. */
static const char *param_problem(tx_rw_graph *g, const char *v, const char *what)
{
    if (tx_rw_is_graph_input(g, v)) return "is a graph input, which callers may override";
    if (!tx_rw_is_initializer(g, v)) {
        tx_tensor t;
        if (tx_rw_constant(g, v, &t)) {
            tx_tensor_release(&t);
            return "is a Constant node, not an initializer (not trainable)";
        }
        return "";
    }
    (void)what;
    return NULL;
}

/* The bias candidate: `v` an initializer [n] of dtype dt. */
static bool bias_ok(tx_rw_graph *g, const char *v, int64_t n, teexec_dtype dt)
{
    tx_rw_value_type t;
    if (param_problem(g, v, "bias") || !tx_rw_value_type_of(g, v, &t)) return false;
    return t.rank == 1 && t.dims[0] == n && t.dtype == dt;
}

/* An Add reading `out` and a [n] constant, and the only reader of `out`. */
static void find_add_bias(tx_rw_graph *g, lin_plan *p, teexec_dtype dt)
{
    if (tx_rw_is_graph_output(g, p->out)) return;
    size_t nc = 0;
    const tx_ir_use *uses = tx_rw_consumers(g, p->out, &nc);
    if (nc != 1) return;
    size_t ai = (size_t)uses[0].node;
    tx_rw_node *add = tx_rw_node_at(g, ai);
    if (!is_op(add, "Add") || add->n_inputs != 2 || add->n_outputs != 1) return;
    const char *other = add->inputs[1 - uses[0].slot];
    if (strcmp(other, p->out) == 0 || !bias_ok(g, other, p->n, dt)) return;
    p->bias = other;
    p->add_node = (int64_t)ai;
    p->out = add->outputs[0];
}

/* True when float tensors a and b hold the same bits, b read as the
 * transpose of a when `transposed` (a [R, C], b [C, R]). */
static bool same_bits(const tx_tensor *a, const tx_tensor *b, bool transposed)
{
    if (a->dtype != b->dtype || a->rank != 2 || b->rank != 2) return false;
    size_t es = tx_dtype_elem_size(a->dtype);
    int64_t R = a->dims[0], C = a->dims[1];
    if (transposed ? (b->dims[0] != C || b->dims[1] != R) : (b->dims[0] != R || b->dims[1] != C))
        return false;
    if (!transposed) return memcmp(a->data, b->data, a->nbytes) == 0;
    const uint8_t *pa = a->data, *pb = b->data;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            if (memcmp(pa + ((size_t)r * (size_t)C + (size_t)c) * es,
                       pb + ((size_t)c * (size_t)R + (size_t)r) * es, es))
                return false;
    return true;
}

/* A tied LM head: the weight w ([K, N] when kn, else [N, K]) holds the
 * bits of an embedding table T [N, K] (read as the table of a Gather on
 * axis 0 or a te.ops Embedding), which both exporters write as a separate
 * initializer (T's transpose, for MatMul). Returns T's name or NULL. */
static const char *tied_table(tx_rw_graph *g, const char *w, bool kn)
{
    tx_rw_value_type wt;
    if (!tx_rw_value_type_of(g, w, &wt) || wt.rank != 2) return NULL;
    int64_t n = kn ? wt.dims[1] : wt.dims[0], k = kn ? wt.dims[0] : wt.dims[1];
    tx_tensor wv = {0};
    bool have_w = false;
    const char *found = NULL;
    for (size_t i = 0; i < tx_rw_node_count(g) && !found; i++) {
        tx_rw_node *nd = tx_rw_node_at(g, i);
        if (nd->dead || nd->n_inputs < 2) continue;
        const char *t = NULL;
        if (!nd->domain[0] && strcmp(nd->op_type, "Gather") == 0) {
            const tx_rw_attr *ax = tx_rw_get_attr(g, i, "axis");
            if (!ax || (ax->type == TX_IR_ATTR_INT && ax->i == 0)) t = nd->inputs[0];
        } else if (strcmp(nd->domain, TX_TE_DOMAIN) == 0 && strcmp(nd->op_type, "Embedding") == 0) {
            t = nd->inputs[1];
        }
        tx_rw_value_type tt;
        if (!t || strcmp(t, w) == 0 || tx_rw_is_graph_input(g, t) || !tx_rw_is_initializer(g, t) ||
            !tx_rw_value_type_of(g, t, &tt) || tt.rank != 2 || tt.dims[0] != n ||
            tt.dims[1] != k || tt.dtype != wt.dtype)
            continue;
        if (!have_w && !(have_w = tx_rw_constant(g, w, &wv))) return NULL;
        tx_tensor tv;
        if (!tx_rw_constant(g, t, &tv)) continue;
        if (same_bits(&tv, &wv, kn)) found = t;
        tx_tensor_release(&tv);
    }
    if (have_w) tx_tensor_release(&wv);
    return found;
}

/* Checks node i. Returns NULL when it lowers (plan filled), "" when it is
 * simply not a Linear, else the reason it is declined. */
static const char *analyze(tx_rw_graph *g, size_t i, lin_plan *p, char *buf, size_t bufsz,
                           char **done, size_t n_done)
{
    memset(p, 0, sizeof *p);
    p->add_node = -1;
    tx_rw_node *n = tx_rw_node_at(g, i);
    bool gemm = is_op(n, "Gemm");
    if (!gemm && !is_op(n, "MatMul")) return "";
    if (n->n_outputs != 1 || n->n_inputs < 2 || !n->inputs[0][0] || !n->inputs[1][0]) return "";
    p->x = n->inputs[0];
    p->w = n->inputs[1];
    p->out = n->outputs[0];
    tx_tensor probe;
    if (tx_rw_constant(g, p->x, &probe)) { /* constant folding, not a layer */
        tx_tensor_release(&probe);
        return "";
    }
    /* W.T of an initializer W [N, K] (a Transpose only this node reads):
     * that is W in Linear's own layout */
    bool flip = false;
    int64_t ti = tx_rw_producer(g, p->w, NULL);
    tx_rw_node *tn = ti >= 0 ? tx_rw_node_at(g, (size_t)ti) : NULL;
    if (tn && !tn->dead && is_op(tn, "Transpose") && tn->n_inputs == 1 &&
        tx_lm_sole_reader(g, p->w) == (int64_t)i && !param_problem(g, tn->inputs[0], "weight")) {
        const tx_rw_attr *perm = tx_rw_get_attr(g, (size_t)ti, "perm");
        tx_rw_value_type tt;
        if ((!perm || (perm->type == TX_IR_ATTR_INTS && perm->n_ints == 2 && perm->ints[0] == 1 &&
                       perm->ints[1] == 0)) &&
            tx_rw_value_type_of(g, tn->inputs[0], &tt) && tt.rank == 2) {
            p->w = tn->inputs[0];
            flip = true;
        }
    }
    const char *why = param_problem(g, p->w, "weight");
    if (why) {
        if (!*why) return ""; /* activation x activation: batched matmul */
        snprintf(buf, bufsz, "weight \"%s\" %s", p->w, why);
        return buf;
    }
    tx_rw_value_type wt;
    if (!tx_rw_value_type_of(g, p->w, &wt) || wt.rank != 2 || !tx_dtype_is_real(wt.dtype)) {
        snprintf(buf, bufsz, "weight \"%s\" is not a rank-2 float32/float16/bfloat16/float64 tensor",
                 p->w);
        return buf;
    }
    /* seen as the reader does: transposed already, or through the Transpose */
    if (in_names(done, n_done, p->w) != flip) {
        int64_t d0 = wt.dims[0];
        wt.dims[0] = wt.dims[1];
        wt.dims[1] = d0;
    }
    tx_rw_value_type xt;
    if (tx_rw_value_type_of(g, p->x, &xt) && xt.dtype != TEEXEC_DTYPE_UNDEFINED &&
        xt.dtype != wt.dtype) {
        snprintf(buf, bufsz, "input and weight types differ (%s, %s)", teexec_dtype_name(xt.dtype),
                 teexec_dtype_name(wt.dtype));
        return buf;
    }
    if (xt.rank == 1 && !gemm) return "vector input (MatMul of rank 1 is a dot product, not a layer)";
    p->kn = true;
    if (gemm) {
        if (int_attr(g, i, "transA", 0) != 0) return "transA=1 (Linear reads x as [M, K])";
        if (float_attr(g, i, "alpha", 1.0f) != 1.0f) return "alpha != 1";
        p->kn = int_attr(g, i, "transB", 0) == 0;
    }
    p->n = p->kn ? wt.dims[1] : wt.dims[0];
    if (flip) p->kn = !p->kn; /* the layout of W itself */
    if (gemm && n->n_inputs >= 3 && n->inputs[2][0]) {
        float beta = float_attr(g, i, "beta", 1.0f);
        if (beta != 1.0f && beta != 0.0f) return "beta is neither 1 nor 0";
        if (beta == 1.0f) {
            if (!bias_ok(g, n->inputs[2], p->n, wt.dtype)) {
                snprintf(buf, bufsz, "C \"%s\" is not a constant [%lld] initializer",
                         n->inputs[2], (long long)p->n);
                return buf;
            }
            p->bias = n->inputs[2];
        }
    }
    if (!p->bias) find_add_bias(g, p, wt.dtype);
    /* a tied head reads the table itself (NK), whatever layout its own
     * copy had; the copy is dropped once nothing reads it */
    const char *t = in_names(done, n_done, p->w) ? NULL : tied_table(g, p->w, p->kn);
    if (t) {
        p->tied_source = p->w;
        p->tied_kn = p->kn;
        p->w = t;
        p->kn = false;
    }
    return NULL;
}

/* Every reader of a KN weight must be a Linear-to-be reading it as weight,
 * since the initializer is transposed in place. */
static const char *sharing_problem(tx_rw_graph *g, const lin_plan *p, char *buf, size_t bufsz)
{
    if (!p->kn) return NULL;
    if (tx_rw_is_graph_output(g, p->w)) {
        snprintf(buf, bufsz, "weight \"%s\" is also a graph output", p->w);
        return buf;
    }
    size_t nc = 0;
    const tx_ir_use *uses = tx_rw_consumers(g, p->w, &nc);
    /* Copy: analyze() below makes more lookups. */
    tx_ir_use *copy = malloc((nc ? nc : 1) * sizeof *copy);
    if (!copy) return "out of memory";
    if (nc) memcpy(copy, uses, nc * sizeof *copy);
    const char *why = NULL;
    for (size_t k = 0; k < nc && !why; k++) {
        lin_plan q;
        char tmp[256];
        tx_rw_node *r = tx_rw_node_at(g, (size_t)copy[k].node);
        if (copy[k].slot != 1 || analyze(g, (size_t)copy[k].node, &q, tmp, sizeof tmp, NULL, 0) || !q.kn) {
            snprintf(buf, bufsz, "weight \"%s\" is also read by node \"%s\" (%s), which cannot "
                     "read it transposed", p->w, r->name, r->op_type);
            why = buf;
        }
    }
    free(copy);
    return why;
}

static teexec_status *transpose_in_place(tx_rw_graph *g, const char *w)
{
    tx_tensor t, tt;
    if (!tx_rw_constant(g, w, &t))
        return tx_error(TEEXEC_ERR_BAD_MODEL, "weight \"%s\" cannot be decoded", w);
    size_t es = tx_dtype_elem_size(t.dtype);
    int64_t dims[2] = {t.dims[1], t.dims[0]};
    teexec_status *st = tx_tensor_alloc(&tt, t.dtype, 2, dims);
    if (st) {
        tx_tensor_release(&t);
        return st;
    }
    size_t K = (size_t)t.dims[0], N = (size_t)t.dims[1];
    const uint8_t *src = t.data;
    uint8_t *dst = tt.data;
    for (size_t k = 0; k < K; k++)
        for (size_t c = 0; c < N; c++) memcpy(dst + (c * K + k) * es, src + (k * N + c) * es, es);
    st = tx_rw_set_initializer(g, w, &tt);
    tx_tensor_release(&t);
    tx_tensor_release(&tt);
    return st;
}

/* Builds Linear (+ Bias) for plan p replacing node i. Names are copied
 * first: the edits invalidate pointers into the graph. */
static teexec_status *rewrite(tx_rw_graph *g, size_t i, const lin_plan *p, tx_lower_report *r,
                              char ***done, size_t *n_done)
{
    teexec_status *st = NULL;
    char *x = dupstr(p->x), *w = dupstr(p->w);
    char *src = dupstr(p->tied_source ? p->tied_source : p->w);
    char *out = dupstr(p->out), *bias = p->bias ? dupstr(p->bias) : NULL;
    char *mm_name = dupstr(tx_rw_node_at(g, i)->name);
    char *mm_out = dupstr(tx_rw_node_at(g, i)->outputs[0]);
    char *add_name = p->add_node >= 0 ? dupstr(tx_rw_node_at(g, (size_t)p->add_node)->name)
                                      : NULL;
    if (!x || !w || !src || !out || !mm_name || !mm_out || (p->bias && !bias) ||
        (p->add_node >= 0 && !add_name)) {
        st = tx_oom();
        goto done_;
    }
    if (p->kn && !in_names(*done, *n_done, w)) {
        if ((st = transpose_in_place(g, w))) goto done_;
        char **nd = realloc(*done, (*n_done + 1) * sizeof *nd);
        if (!nd) {
            st = tx_oom();
            goto done_;
        }
        *done = nd;
        if (!(nd[*n_done] = dupstr(w))) {
            st = tx_oom();
            goto done_;
        }
        (*n_done)++;
    }
    tx_rw_remove_node(g, i);
    if (p->add_node >= 0) tx_rw_remove_node(g, (size_t)p->add_node);

    /* The Linear's own output: the final name when there is no bias, the
     * MatMul's (now free) name before an Add, a fresh one inside a Gemm. */
    const char *lin_out = out;
    if (bias) lin_out = p->add_node >= 0 ? mm_out : tx_rw_fresh_name(g, "linear_out");
    if (!lin_out) {
        st = tx_oom();
        goto done_;
    }
    const char *lin_in[2] = {x, w};
    size_t li = 0;
    if ((st = tx_rw_add_node(g, "Linear", TX_TE_DOMAIN, mm_name, lin_in, 2, &lin_out, 1, &li)))
        goto done_;
    if ((st = tx_rw_set_string(g, li, "weight_source", src))) goto done_;
    if ((st = tx_rw_set_string(g, li, "weight_layout",
                               (p->tied_source ? p->tied_kn : p->kn) ? "KN" : "NK")))
        goto done_;
    if ((st = tx_lower_note_add(r, "Linear", mm_name, true, NULL))) goto done_;
    if (bias) {
        const char *b_in[2] = {lin_out, bias};
        const char *outs[1] = {out};
        const char *bname = add_name;
        if (!bname) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s/Bias", mm_name);
            bname = tx_rw_fresh_name(g, buf);
            if (!bname) {
                st = tx_oom();
                goto done_;
            }
        }
        size_t bi = 0;
        if ((st = tx_rw_add_node(g, "Bias", TX_TE_DOMAIN, bname, b_in, 2, outs, 1, &bi))) goto done_;
        if ((st = tx_rw_set_string(g, bi, "bias_source", bias))) goto done_;
        st = tx_lower_note_add(r, "Bias", bname, true, NULL);
    }
done_:
    free(x);
    free(w);
    free(src);
    free(out);
    free(bias);
    free(mm_name);
    free(mm_out);
    free(add_name);
    return st;
}

/* GPT-2's Conv1D (both exporters) flattens x to [M, K] before its Gemm and
 * reshapes the result back: Reshape(Linear[+Bias](Reshape(x, [M, K])),
 * [..., N]) where x is [..., K] and the result [..., N] has x's leading
 * dims. te.ops Linear takes [..., K] itself, so both Reshapes go and the
 * chain reads x and writes the second Reshape's output (the views break
 * fuser chains and residual joins otherwise). */
static teexec_status *drop_flat_views(tx_rw_graph *g)
{
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        tx_rw_node *lin = tx_rw_node_at(g, i);
        if (lin->dead || strcmp(lin->domain, TX_TE_DOMAIN) || strcmp(lin->op_type, "Linear") ||
            lin->n_inputs < 1 || lin->n_outputs != 1)
            continue;
        int64_t ri = tx_rw_producer(g, lin->inputs[0], NULL);
        tx_rw_node *r1 = ri >= 0 ? tx_rw_node_at(g, (size_t)ri) : NULL;
        if (!r1 || r1->dead || !is_op(r1, "Reshape") || r1->n_inputs != 2 ||
            tx_lm_sole_reader(g, lin->inputs[0]) != (int64_t)i)
            continue;
        /* the chain's end: the Linear, or its Bias */
        size_t last = i;
        int64_t b = tx_lm_sole_reader(g, lin->outputs[0]);
        tx_rw_node *bn = b >= 0 ? tx_rw_node_at(g, (size_t)b) : NULL;
        if (bn && !strcmp(bn->domain, TX_TE_DOMAIN) && !strcmp(bn->op_type, "Bias") &&
            bn->n_outputs == 1)
            last = (size_t)b;
        const char *end = tx_rw_node_at(g, last)->outputs[0];
        int64_t r2i = tx_lm_sole_reader(g, end);
        tx_rw_node *r2 = r2i >= 0 ? tx_rw_node_at(g, (size_t)r2i) : NULL;
        if (!r2 || !is_op(r2, "Reshape") || r2->n_inputs != 2 || strcmp(r2->inputs[0], end))
            continue;
        tx_shape xs, flat, ys;
        bool k1 = false, k2 = false, k3 = false;
        TX_TRY(tx_lower_shape_of(g, r1->inputs[0], &xs, &k1));
        TX_TRY(tx_lower_shape_of(g, lin->inputs[0], &flat, &k2));
        TX_TRY(tx_lower_shape_of(g, r2->outputs[0], &ys, &k3));
        if (!k1 || !k2 || !k3 || xs.rank < 2 || flat.rank != 2 || ys.rank != xs.rank ||
            flat.dims[1] != xs.dims[xs.rank - 1])
            continue;
        bool same_lead = true;
        for (int32_t d = 0; d + 1 < xs.rank; d++) same_lead = same_lead && xs.dims[d] == ys.dims[d];
        if (!same_lead) continue;
        char *x = tx_lm_strdup(r1->inputs[0]), *y = tx_lm_strdup(r2->outputs[0]);
        if (!x || !y) {
            free(x);
            free(y);
            return tx_oom();
        }
        tx_rw_remove_node(g, (size_t)ri);
        tx_rw_remove_node(g, (size_t)r2i);
        lin = tx_rw_node_at(g, i);
        free(lin->inputs[0]);
        lin->inputs[0] = x;
        tx_rw_node *ln = tx_rw_node_at(g, last);
        free(ln->outputs[0]);
        ln->outputs[0] = y;
    }
    return NULL;
}

teexec_status *tx_lower_linear(tx_rw_graph *g, tx_lower_report *r)
{
    char **done = NULL; /* weights transposed so far */
    size_t n_done = 0;
    /* patch-embedding Convs are Linears too (lower_patch.c) */
    teexec_status *st = tx_lower_patch_conv(g, r);
    if (st) return st;
    size_t count = tx_rw_node_count(g); /* nodes added here are te.ops: not revisited */
    for (size_t i = 0; i < count && !st; i++) {
        tx_rw_node *n = tx_rw_node_at(g, i);
        if (n->dead) continue;
        lin_plan p;
        char buf[512], buf2[512];
        const char *why = analyze(g, i, &p, buf, sizeof buf, done, n_done);
        if (why && !*why) continue;
        if (!why && !in_names(done, n_done, p.w)) why = sharing_problem(g, &p, buf2, sizeof buf2);
        if (why) {
            st = tx_lower_note_add(r, "Linear", n->name, false, why);
            continue;
        }
        st = rewrite(g, i, &p, r, &done, &n_done);
    }
    for (size_t k = 0; k < n_done; k++) free(done[k]);
    free(done);
    if (!st) st = drop_flat_views(g);
    return st;
}
