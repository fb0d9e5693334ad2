/*
 * lower_shape.c - static shapes of rewrite-graph values (see
 * lower_shape.h). A memo keyed by value name keeps the backward walk
 * linear in the graph size even through residual diamonds; a depth bound
 * keeps the recursion finite on a (malformed) cyclic graph.
 */
#include "import/lower_shape.h"

#include "format/te_schema.h"
#include "import/const_eval.h"
#include "import/lower_match.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512
#define MAX_INS 16

typedef struct sinfo {
    bool known;
    teexec_dtype dtype; /* UNDEFINED when not tracked */
    tx_shape shape;
} sinfo;

typedef struct memo_ent {
    char *name;
    sinfo s;
} memo_ent;

typedef struct ctx {
    tx_rw_graph *g;
    memo_ent *e;
    size_t n, cap;
    int depth;
    bool oom;
} ctx;

static bool in_list(const char *op, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(op, list[i]) == 0) return true;
    return false;
}

/* Ops whose output 0 has input 0's shape and type. */
static const char *const STD_SAME[] = {
    "Relu", "Tanh", "Erf", "Sigmoid", "Neg", "Sqrt", "Exp", "Log", "Abs", "Reciprocal",
    "Identity", "Dropout", "Softmax", "LogSoftmax", "LayerNormalization", "RMSNormalization",
    "Gelu", "Elu", "LeakyRelu", "HardSigmoid", "Softplus", "Sin", "Cos", "Floor", "Ceil",
    "Round", "Clip", "Trilu", "CumSum", NULL};
static const char *const STD_BROADCAST[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min",
                                            "Where", "Sum", "Mod", NULL};
static const char *const STD_COMPARE[] = {"Equal", "Less", "Greater", "LessOrEqual",
                                          "GreaterOrEqual", "And", "Or", "Not", NULL};
static const char *const TE_SAME[] = {
    "Bias", "LayerNorm", "RMSNorm", "L2Normalization", "GELU", "QGELU", "ReLU", "SReLU",
    "SiLU", "Dropout", "Quantize", "Identity", "ConstantScale", "AddExtraInput",
    "MakeExtraOutput", "RotaryEmbedding", "AllReduce", "ScaledSReLU", NULL};
static const char *const TE_GATED[] = {"GLU", "GEGLU", "QGEGLU", "ReGLU", "SReGLU", "SwiGLU",
                                       "ClampedSwiGLU", "ScaledSwiGLU", NULL};

static bool shape_of(ctx *c, const char *v, sinfo *out);

static bool ok(teexec_status *st)
{
    if (!st) return true;
    teexec_status_destroy(st);
    return false;
}

static bool memo_find(ctx *c, const char *v, sinfo *out)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->e[i].name, v) == 0) {
            *out = c->e[i].s;
            return true;
        }
    return false;
}

static void memo_put(ctx *c, const char *v, const sinfo *s)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        memo_ent *e = realloc(c->e, cap * sizeof(*e));
        if (!e) {
            c->oom = true;
            return;
        }
        c->e = e;
        c->cap = cap;
    }
    char *name = tx_lm_strdup(v);
    if (!name) {
        c->oom = true;
        return;
    }
    c->e[c->n].name = name;
    c->e[c->n].s = *s;
    c->n++;
}

static bool all_fixed(const tx_shape *s)
{
    for (int32_t d = 0; d < s->rank; d++)
        if (s->dims[d] < 0) return false;
    return true;
}

static bool ints_attr(tx_rw_graph *g, size_t node, const char *name, const int64_t **v, size_t *n)
{
    const tx_rw_attr *a = tx_rw_get_attr(g, node, name);
    if (!a || a->type != TX_IR_ATTR_INTS) return false;
    *v = a->ints;
    *n = a->n_ints;
    return true;
}

static int64_t int_attr(tx_rw_graph *g, size_t node, const char *name, int64_t def)
{
    const tx_rw_attr *a = tx_rw_get_attr(g, node, name);
    return a && a->type == TX_IR_ATTR_INT ? a->i : def;
}

/* An integer constant of rank <= 1 (Reshape / Split arguments, which
 * PyTorch's constant folding leaves as initializers or Constant nodes). */
static bool const_ints(tx_rw_graph *g, const char *v, int64_t *out, size_t cap, size_t *n)
{
    tx_tensor t;
    /* Folded shape arithmetic (Shape/Gather/Concat/ConstantOfShape/Where
     * chains before Expand and Reshape) is evaluated by const_eval. */
    if (!tx_rw_constant(g, v, &t)) return tx_ce_ints(g, v, out, cap, n);
    bool good = t.rank <= 1 && t.numel <= cap &&
                (t.dtype == TEEXEC_DTYPE_INT64 || t.dtype == TEEXEC_DTYPE_INT32);
    for (uint64_t k = 0; good && k < t.numel; k++)
        out[k] = t.dtype == TEEXEC_DTYPE_INT64 ? ((const int64_t *)t.data)[k]
                                               : ((const int32_t *)t.data)[k];
    if (good) *n = (size_t)t.numel;
    tx_tensor_release(&t);
    return good;
}

/* Generic te.ops rule: the schema's inference over all input shapes. */
static bool te_generic(ctx *c, size_t node, const tx_rw_node *n, size_t slot, sinfo *out)
{
    const tx_te_op_schema *s = tx_te_schema_find(n->op_type);
    if (!s || s->n_attrs > TX_TE_MAX_ATTRS) return false;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    for (int i = 0; i < s->n_attrs; i++) {
        const tx_te_attr_schema *as = &s->attrs[i];
        const tx_rw_attr *a = tx_rw_get_attr(c->g, node, as->name);
        if (!a) {
            if (as->required) return false;
            continue;
        }
        if (as->type == TX_TE_ATTR_INT && a->type == TX_IR_ATTR_INT) attrs[i].i = a->i;
        else if (as->type == TX_TE_ATTR_FLOAT && a->type == TX_IR_ATTR_FLOAT) attrs[i].f = a->f;
        else if (as->type == TX_TE_ATTR_ENUM && a->type == TX_IR_ATTR_STRING) {
            int k = tx_te_attr_enum_index(as, a->s);
            if (k < 0) return false;
            attrs[i].i = k;
        } else if (as->type == TX_TE_ATTR_INTS && a->type == TX_IR_ATTR_INTS &&
                   a->n_ints <= INT32_MAX) {
            attrs[i].ints = a->ints;
            attrs[i].n_ints = (int32_t)a->n_ints;
        } else
            return false;
    }
    int np = 0;
    if (!ok(tx_te_param_count(s, attrs, &np))) return false;
    size_t first_param = 1 + (size_t)s->n_extra_inputs;
    size_t slots = first_param + (size_t)np;
    if (slots > MAX_INS || n->n_inputs > slots || n->n_inputs < 1) return false;
    tx_te_tinfo ti[MAX_INS];
    const tx_te_tinfo *p[MAX_INS];
    for (size_t k = 0; k < slots; k++) {
        p[k] = NULL;
        if (k >= n->n_inputs || !*n->inputs[k]) continue;
        sinfo si;
        if (!shape_of(c, n->inputs[k], &si)) return false;
        ti[k].dtype = si.dtype == TEEXEC_DTYPE_UNDEFINED ? TEEXEC_DTYPE_FLOAT : si.dtype;
        ti[k].shape = si.shape;
        p[k] = &ti[k];
    }
    tx_te_infer_in in = {attrs, p[0], p + 1, s->n_extra_inputs, p + first_param, np};
    tx_te_infer_out o;
    memset(&o, 0, sizeof(o));
    if (!ok(tx_te_infer(s, &in, &o))) return false;
    const tx_te_tinfo *r = slot == 0 ? &o.output : slot - 1 < TX_TE_MAX_EXTRA ? &o.extra_outputs[slot - 1] : NULL;
    if (!r) return false;
    out->dtype = r->dtype;
    out->shape = r->shape;
    return true;
}

static bool infer_te(ctx *c, size_t node, const tx_rw_node *n, size_t slot, sinfo *out)
{
    sinfo x;
    if (in_list(n->op_type, TE_SAME) && n->n_inputs >= 1) {
        if (!shape_of(c, n->inputs[0], out)) return false;
        return true;
    }
    if (in_list(n->op_type, TE_GATED) && n->n_inputs >= 1 && slot == 0) {
        if (!shape_of(c, n->inputs[0], &x) || x.shape.rank < 1) return false;
        int64_t *last = &x.shape.dims[x.shape.rank - 1];
        if (*last % 2) return false;
        *last /= 2;
        *out = x;
        return true;
    }
    if (strcmp(n->op_type, "Linear") == 0 && n->n_inputs == 2 && slot == 0) {
        sinfo w;
        if (!shape_of(c, n->inputs[0], &x) || !shape_of(c, n->inputs[1], &w)) return false;
        if (x.shape.rank < 1 || w.shape.rank != 2) return false;
        x.shape.dims[x.shape.rank - 1] = w.shape.dims[0];
        *out = x;
        return true;
    }
    return te_generic(c, node, n, slot, out);
}

static bool infer_std(ctx *c, size_t node, const tx_rw_node *n, size_t slot, sinfo *out)
{
    tx_rw_graph *g = c->g;
    const char *op = n->op_type;
    sinfo x;
    if (in_list(op, STD_SAME) && n->n_inputs >= 1 && slot == 0)
        return shape_of(c, n->inputs[0], out);
    if (strcmp(op, "Cast") == 0 && n->n_inputs == 1) {
        if (!shape_of(c, n->inputs[0], out)) return false;
        out->dtype = (teexec_dtype)int_attr(g, node, "to", TEEXEC_DTYPE_UNDEFINED);
        return true;
    }
    bool cmp = in_list(op, STD_COMPARE);
    if ((in_list(op, STD_BROADCAST) || cmp) && n->n_inputs >= 1 && n->n_inputs <= MAX_INS) {
        sinfo si[MAX_INS];
        const tx_shape *sp[MAX_INS];
        for (size_t k = 0; k < n->n_inputs; k++) {
            if (!shape_of(c, n->inputs[k], &si[k])) return false;
            sp[k] = &si[k].shape;
        }
        if (!ok(tx_shape_broadcast(n->n_inputs, sp, &out->shape))) return false;
        /* Where's type is its second input's; others follow the first. */
        out->dtype = cmp ? TEEXEC_DTYPE_BOOL
                         : si[strcmp(op, "Where") == 0 && n->n_inputs == 3 ? 1 : 0].dtype;
        return true;
    }
    if (strcmp(op, "MatMul") == 0 && n->n_inputs == 2) {
        sinfo b;
        if (!shape_of(c, n->inputs[0], &x) || !shape_of(c, n->inputs[1], &b)) return false;
        if (!ok(tx_shape_matmul(&x.shape, &b.shape, &out->shape))) return false;
        out->dtype = x.dtype;
        return true;
    }
    if (strcmp(op, "Transpose") == 0 && n->n_inputs == 1) {
        const int64_t *perm = NULL;
        size_t np = 0;
        if (!shape_of(c, n->inputs[0], &x)) return false;
        ints_attr(g, node, "perm", &perm, &np);
        if (!ok(tx_shape_transpose(&x.shape, perm, np, &out->shape))) return false;
        out->dtype = x.dtype;
        return true;
    }
    if (strcmp(op, "Reshape") == 0 && n->n_inputs == 2) {
        int64_t target[TX_MAX_RANK];
        size_t nt = 0;
        if (!const_ints(g, n->inputs[1], target, TX_MAX_RANK, &nt)) return false;
        bool needs_input = false;
        bool allowzero = int_attr(g, node, "allowzero", 0) != 0;
        for (size_t k = 0; k < nt; k++) needs_input |= target[k] == -1 || (target[k] == 0 && !allowzero);
        if (needs_input) {
            if (!shape_of(c, n->inputs[0], &x)) return false;
        } else {
            /* The target alone fixes the shape; the type still comes from x. */
            x.known = true;
            x.dtype = TEEXEC_DTYPE_UNDEFINED;
            x.shape.rank = 0;
            sinfo xi;
            if (shape_of(c, n->inputs[0], &xi)) x = xi;
        }
        if (needs_input || x.shape.rank > 0) {
            if (!ok(tx_shape_reshape(&x.shape, target, nt, allowzero, &out->shape))) return false;
        } else {
            if (!ok(tx_shape_make((int32_t)nt, target, &out->shape))) return false;
        }
        out->dtype = x.dtype;
        return true;
    }
    if (strcmp(op, "Slice") == 0 && n->n_inputs >= 3 && n->n_inputs <= 5) {
        int64_t v[4][TX_MAX_RANK];
        size_t cnt[4] = {0, 0, 0, 0};
        if (!shape_of(c, n->inputs[0], &x)) return false;
        for (size_t k = 1; k < n->n_inputs; k++) {
            if (!*n->inputs[k]) continue;
            if (!const_ints(g, n->inputs[k], v[k - 1], TX_MAX_RANK, &cnt[k - 1])) return false;
        }
        size_t ns = cnt[0];
        if (cnt[1] != ns || (cnt[2] && cnt[2] != ns) || (cnt[3] && cnt[3] != ns)) return false;
        int64_t es[TX_MAX_RANK], st[TX_MAX_RANK];
        if (!ok(tx_shape_slice(&x.shape, v[0], v[1], cnt[2] ? v[2] : NULL, cnt[3] ? v[3] : NULL,
                               ns, es, st, &out->shape)))
            return false;
        out->dtype = x.dtype;
        return true;
    }
    if (strcmp(op, "Concat") == 0 && n->n_inputs >= 1 && n->n_inputs <= MAX_INS) {
        sinfo si[MAX_INS];
        const tx_shape *sp[MAX_INS];
        for (size_t k = 0; k < n->n_inputs; k++) {
            if (!shape_of(c, n->inputs[k], &si[k])) return false;
            sp[k] = &si[k].shape;
        }
        if (!ok(tx_shape_concat(n->n_inputs, sp, int_attr(g, node, "axis", 0), &out->shape)))
            return false;
        out->dtype = si[0].dtype;
        return true;
    }
    if ((strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0 ||
         strcmp(op, "Expand") == 0) && n->n_inputs >= 1) {
        int64_t v[TX_MAX_RANK];
        size_t nv = 0;
        const int64_t *av = NULL;
        if (!shape_of(c, n->inputs[0], &x)) return false;
        if (n->n_inputs >= 2 && *n->inputs[1]) {
            if (!const_ints(g, n->inputs[1], v, TX_MAX_RANK, &nv)) return false;
            av = v;
        } else if (ints_attr(g, node, "axes", &av, &nv)) {
            /* opset < 13 */
        }
        teexec_status *st;
        if (op[0] == 'U') st = tx_shape_unsqueeze(&x.shape, av, nv, &out->shape);
        else if (op[0] == 'S') st = tx_shape_squeeze(&x.shape, av, nv, &out->shape);
        else if (av) st = tx_shape_expand(&x.shape, av, nv, &out->shape);
        else return false;
        if (!ok(st)) return false;
        out->dtype = x.dtype;
        return true;
    }
    if (strcmp(op, "Split") == 0 && n->n_inputs >= 1) {
        if (!shape_of(c, n->inputs[0], &x)) return false;
        int64_t axis = int_attr(g, node, "axis", 0);
        if (axis < 0) axis += x.shape.rank;
        if (axis < 0 || axis >= x.shape.rank) return false;
        int64_t sizes[TX_MAX_RANK * 4];
        size_t ns = 0;
        const int64_t *sa;
        if (n->n_inputs >= 2 && *n->inputs[1]) {
            if (!const_ints(g, n->inputs[1], sizes, sizeof(sizes) / sizeof(sizes[0]), &ns))
                return false;
        } else if (ints_attr(g, node, "split", &sa, &ns)) {
            if (ns > sizeof(sizes) / sizeof(sizes[0])) return false;
            memcpy(sizes, sa, ns * sizeof(int64_t));
        } else {
            if (n->n_outputs == 0 || x.shape.dims[axis] % (int64_t)n->n_outputs) return false;
            ns = n->n_outputs;
            for (size_t k = 0; k < ns; k++) sizes[k] = x.shape.dims[axis] / (int64_t)ns;
        }
        if (slot >= ns) return false;
        *out = x;
        out->shape.dims[axis] = sizes[slot];
        return true;
    }
    if (strcmp(op, "Gather") == 0 && n->n_inputs == 2 && slot == 0) {
        sinfo idx;
        if (!shape_of(c, n->inputs[0], &x) || !shape_of(c, n->inputs[1], &idx)) return false;
        if (!ok(tx_shape_gather(&x.shape, &idx.shape, int_attr(g, node, "axis", 0),
                                &out->shape)))
            return false;
        out->dtype = x.dtype;
        return true;
    }
    if (strcmp(op, "GatherND") == 0 && n->n_inputs == 2 && slot == 0) {
        /* out = indices.shape[:-1] + data.shape[batch_dims + k:], k = the
         * indices' last dim (batch dims 0: the dynamo exporter's mask
         * broadcast of attention_mask) */
        sinfo idx;
        if (int_attr(g, node, "batch_dims", 0) != 0 || !shape_of(c, n->inputs[0], &x) ||
            !shape_of(c, n->inputs[1], &idx) || idx.shape.rank < 1)
            return false;
        int64_t k = idx.shape.dims[idx.shape.rank - 1];
        if (k < 1 || k > x.shape.rank) return false;
        int64_t d[TX_MAX_RANK];
        int32_t r = 0;
        for (int32_t i = 0; i + 1 < idx.shape.rank; i++) d[r++] = idx.shape.dims[i];
        for (int32_t i = (int32_t)k; i < x.shape.rank; i++) {
            if (r == TX_MAX_RANK) return false;
            d[r++] = x.shape.dims[i];
        }
        if (!ok(tx_shape_make(r, d, &out->shape))) return false;
        out->dtype = x.dtype;
        return true;
    }
    if (strcmp(op, "Shape") == 0 && n->n_inputs == 1 && slot == 0) {
        /* [rank] or the [start, end) part: only the input's rank matters */
        if (!shape_of(c, n->inputs[0], &x)) return false;
        int64_t r = x.shape.rank, st = int_attr(g, node, "start", 0),
                en = int_attr(g, node, "end", r);
        if (st < 0) st += r;
        if (en < 0) en += r;
        st = st < 0 ? 0 : (st > r ? r : st);
        en = en < 0 ? 0 : (en > r ? r : en);
        int64_t len = en > st ? en - st : 0;
        if (!ok(tx_shape_make(1, &len, &out->shape))) return false;
        out->dtype = TEEXEC_DTYPE_INT64;
        return true;
    }
    if (strcmp(op, "ConstantOfShape") == 0 && n->n_inputs == 1 && slot == 0) {
        int64_t d[TX_MAX_RANK];
        size_t nd = 0;
        if (!const_ints(g, n->inputs[0], d, TX_MAX_RANK, &nd) ||
            !ok(tx_shape_make((int32_t)nd, d, &out->shape)))
            return false;
        const tx_rw_attr *v = tx_rw_get_attr(g, node, "value");
        tx_tensor t;
        out->dtype = TEEXEC_DTYPE_FLOAT;
        if (v && tx_rw_constant(g, n->outputs[0], &t)) {
            out->dtype = t.dtype;
            tx_tensor_release(&t);
        }
        return true;
    }
    if (strcmp(op, "GatherElements") == 0 && n->n_inputs == 2 && slot == 0) {
        sinfo idx;
        if (!shape_of(c, n->inputs[0], &x) || !shape_of(c, n->inputs[1], &idx) ||
            idx.shape.rank != x.shape.rank)
            return false;
        out->shape = idx.shape;
        out->dtype = x.dtype;
        return true;
    }
    if ((strcmp(op, "ReduceMean") == 0 || strcmp(op, "ReduceSum") == 0 ||
         strcmp(op, "ReduceMax") == 0) && n->n_inputs >= 1 && slot == 0) {
        int64_t axes[TX_MAX_RANK];
        size_t na = 0;
        const int64_t *av = NULL;
        if (!shape_of(c, n->inputs[0], &x)) return false;
        if (n->n_inputs >= 2 && *n->inputs[1]) {
            if (!const_ints(g, n->inputs[1], axes, TX_MAX_RANK, &na)) return false;
            av = axes;
        } else if (!ints_attr(g, node, "axes", &av, &na)) {
            av = NULL; /* every axis */
            na = 0;
        }
        bool reduced[TX_MAX_RANK];
        if (!ok(tx_shape_reduce(&x.shape, av, na, int_attr(g, node, "keepdims", 1) != 0,
                                int_attr(g, node, "noop_with_empty_axes", 0) != 0, &out->shape,
                                reduced)))
            return false;
        out->dtype = x.dtype;
        return true;
    }
    if (strcmp(op, "Conv") == 0 && n->n_inputs >= 2 && slot == 0) {
        /* NC[spatial] with explicit pads (auto_pad NOTSET), the patch
         * embedding of a ViT */
        sinfo w;
        const int64_t *st = NULL, *pads = NULL, *dil = NULL;
        size_t nst = 0, np = 0, nd = 0;
        const tx_rw_attr *ap = tx_rw_get_attr(g, node, "auto_pad");
        if (ap && (ap->type != TX_IR_ATTR_STRING || strcmp(ap->s, "NOTSET") != 0)) return false;
        if (!shape_of(c, n->inputs[0], &x) || !shape_of(c, n->inputs[1], &w) ||
            x.shape.rank < 3 || w.shape.rank != x.shape.rank)
            return false;
        int32_t sp = x.shape.rank - 2;
        ints_attr(g, node, "strides", &st, &nst);
        ints_attr(g, node, "pads", &pads, &np);
        ints_attr(g, node, "dilations", &dil, &nd);
        if ((st && nst != (size_t)sp) || (pads && np != 2 * (size_t)sp) ||
            (dil && nd != (size_t)sp))
            return false;
        *out = x;
        out->shape.dims[1] = w.shape.dims[0];
        for (int32_t i = 0; i < sp; i++) {
            int64_t k = w.shape.dims[2 + i], s1 = st ? st[i] : 1, d1 = dil ? dil[i] : 1;
            int64_t in = x.shape.dims[2 + i] + (pads ? pads[i] + pads[sp + i] : 0);
            int64_t span = d1 * (k - 1) + 1;
            if (s1 < 1 || d1 < 1 || k < 1 || in < span) return false;
            out->shape.dims[2 + i] = (in - span) / s1 + 1;
        }
        return true;
    }
    if (strcmp(op, "Flatten") == 0 && n->n_inputs == 1) {
        if (!shape_of(c, n->inputs[0], &x) ||
            !ok(tx_shape_flatten(&x.shape, int_attr(g, node, "axis", 1), &out->shape)))
            return false;
        out->dtype = x.dtype;
        return true;
    }
    /* Concat, and Slice with constant arguments: a rotary embedding written
     * as torch code (rotate_half) feeding a lowered attention. */
    if (strcmp(op, "Concat") == 0 && n->n_inputs >= 1 && slot == 0) {
        int64_t axis = int_attr(g, node, "axis", 0);
        for (size_t k = 0; k < n->n_inputs; k++) {
            sinfo si;
            if (!shape_of(c, n->inputs[k], &si)) return false;
            if (k == 0) {
                x = si;
                if (axis < 0) axis += x.shape.rank;
                if (axis < 0 || axis >= x.shape.rank) return false;
                continue;
            }
            if (si.shape.rank != x.shape.rank) return false;
            for (int32_t d = 0; d < x.shape.rank; d++)
                if (d != axis && si.shape.dims[d] != x.shape.dims[d]) return false;
            x.shape.dims[axis] += si.shape.dims[axis];
        }
        *out = x;
        return true;
    }
    if (strcmp(op, "Slice") == 0 && n->n_inputs >= 3 && slot == 0) {
        int64_t starts[TX_MAX_RANK], ends[TX_MAX_RANK], axes[TX_MAX_RANK], steps[TX_MAX_RANK];
        size_t ns = 0, ne = 0, na = 0, nsp = 0;
        bool has_axes = n->n_inputs > 3 && *n->inputs[3];
        bool has_steps = n->n_inputs > 4 && *n->inputs[4];
        if (!shape_of(c, n->inputs[0], &x) ||
            !const_ints(g, n->inputs[1], starts, TX_MAX_RANK, &ns) ||
            !const_ints(g, n->inputs[2], ends, TX_MAX_RANK, &ne) || ns != ne ||
            (has_axes && (!const_ints(g, n->inputs[3], axes, TX_MAX_RANK, &na) || na != ns)) ||
            (has_steps && (!const_ints(g, n->inputs[4], steps, TX_MAX_RANK, &nsp) || nsp != ns)))
            return false;
        for (size_t k = 0; k < ns; k++) {
            int64_t a = has_axes ? axes[k] : (int64_t)k;
            if (a < 0) a += x.shape.rank;
            if (a < 0 || a >= x.shape.rank || (has_steps && steps[k] != 1)) return false;
            int64_t dim = x.shape.dims[a], b0 = starts[k], e0 = ends[k];
            if (b0 < 0) b0 += dim;
            if (e0 < 0) e0 += dim;
            b0 = b0 < 0 ? 0 : (b0 > dim ? dim : b0);
            e0 = e0 < 0 ? 0 : (e0 > dim ? dim : e0);
            x.shape.dims[a] = e0 > b0 ? e0 - b0 : 0;
        }
        *out = x;
        return true;
    }
    return false;
}

static bool shape_of(ctx *c, const char *v, sinfo *out)
{
    memset(out, 0, sizeof(*out));
    if (!v || !*v || c->oom) return false;
    if (memo_find(c, v, out)) return out->known;

    sinfo s;
    memset(&s, 0, sizeof(s));
    tx_rw_value_type vt;
    if (tx_rw_value_type_of(c->g, v, &vt) && vt.rank >= 0 &&
        ok(tx_shape_make(vt.rank, vt.dims, &s.shape)) && all_fixed(&s.shape)) {
        s.known = true;
        s.dtype = vt.dtype;
    } else if (c->depth < MAX_DEPTH) {
        size_t slot = 0;
        int64_t p = tx_rw_producer(c->g, v, &slot);
        tx_rw_node *n = tx_lm_node(c->g, p);
        tx_tensor t;
        if (n && tx_lm_is(n, "", "Constant") && tx_rw_constant(c->g, v, &t)) {
            s.known = true;
            s.dtype = t.dtype;
            s.shape = tx_shape_of(&t);
            tx_tensor_release(&t);
        } else if (n) {
            c->depth++;
            bool te = tx_lm_is(n, "te.ops", n->op_type);
            s.known = te ? infer_te(c, (size_t)p, n, slot, &s) : infer_std(c, (size_t)p, n, slot, &s);
            c->depth--;
            s.known = s.known && all_fixed(&s.shape);
        }
    }
    if (!s.known) memset(&s, 0, sizeof(s));
    memo_put(c, v, &s);
    *out = s;
    return s.known;
}

teexec_status *tx_lower_shape_of(tx_rw_graph *g, const char *value, tx_shape *out, bool *known)
{
    teexec_dtype dt;
    return tx_lower_type_of(g, value, &dt, out, known);
}

teexec_status *tx_lower_type_of(tx_rw_graph *g, const char *value, teexec_dtype *dtype,
                                tx_shape *out, bool *known)
{
    ctx c = {.g = g};
    sinfo s;
    *known = shape_of(&c, value, &s);
    *dtype = *known ? s.dtype : TEEXEC_DTYPE_UNDEFINED;
    if (*known) *out = s.shape;
    for (size_t i = 0; i < c.n; i++) free(c.e[i].name);
    free(c.e);
    if (c.oom) {
        *known = false;
        return tx_oom();
    }
    return NULL;
}
