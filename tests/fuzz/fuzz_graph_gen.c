/*
 * fuzz_graph_gen.c - bytes -> a random valid graph -> load, plan, run,
 * train (fuzz_graph_gen.h says what and why).
 *
 * The generator keeps a pool of values (graph inputs and node outputs)
 * with the dtype and shape it computed itself from the ONNX / te.ops
 * rules; each step picks an op, takes its inputs from the pool or makes
 * initializers of fitting shapes, sets attributes, and adds the outputs to
 * the pool. te.ops nodes are checked with the schema's own shape rule
 * (tx_te_infer) before they are written, so only accepted combinations go
 * in. The model is written with the project's writer (format/model_write.h)
 * and sent through the public API only.
 */
#include "tests/fuzz/fuzz_graph_gen.h"

#include "format/model_write.h"
#include "format/te_schema.h"
#include "teexec/teexec.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    FG_MAX_NODES = 12,  /* nodes in a graph (an op may write two) */
    FG_MAX_VALS = 40,   /* pool values */
    FG_MAX_INITS = 48,  /* initializers */
    FG_MAX_RANK = 5,    /* of any value */
    FG_MAX_NUMEL = 4096 /* elements of any value */
};

/* ---- the byte source ---------------------------------------------------- */

typedef struct fz {
    const uint8_t *p;
    size_t n, i;
} fz;

static unsigned fz_byte(fz *s) { return s->i < s->n ? s->p[s->i++] : 0; }
/* 0..n-1 (n <= 256); 0 when n is 0. */
static unsigned fz_below(fz *s, unsigned n) { return n ? fz_byte(s) % n : 0; }
static bool fz_bool(fz *s) { return fz_byte(s) & 1u; }
/* lo..hi inclusive (hi - lo < 256). */
static int64_t fz_range(fz *s, int64_t lo, int64_t hi) { return lo + (int64_t)fz_below(s, (unsigned)(hi - lo + 1)); }

/* ---- the generator's state ---------------------------------------------- */

typedef struct fg_val {
    char name[16];
    char op[24]; /* the op that made it ("" for a graph input) */
    teexec_dtype dt;
    int32_t rank;
    int64_t dims[FG_MAX_RANK + 2];
} fg_val;

typedef struct fg {
    fz src;
    tx_mw *w;
    bool oom, specials;
    int opset;
    Onnx__NodeProto *nodes[FG_MAX_NODES];
    size_t n_nodes;
    Onnx__TensorProto *inits[FG_MAX_INITS];
    size_t n_inits;
    fg_val vals[FG_MAX_VALS];
    int n_vals, n_inputs;
    int n_params; /* float initializers of > 1 element: trainable */
    unsigned next_id;
} fg;

static int64_t numel_of(int32_t rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int32_t i = 0; i < rank; i++) n *= dims[i];
    return n;
}

static bool shape_ok(int32_t rank, const int64_t *dims)
{
    if (rank < 0 || rank > FG_MAX_RANK) return false;
    int64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0 || dims[i] > 64) return false;
        n *= dims[i] ? dims[i] : 1;
        if (n > FG_MAX_NUMEL) return false;
    }
    return true;
}

static const char *fresh_name(fg *g, char prefix, char *buf, size_t size)
{
    snprintf(buf, size, "%c%u", prefix, g->next_id++);
    return buf;
}

/* A pool value of dtype dt (UNDEFINED: any) and rank >= min_rank, biased
 * to the newest (deep chains) but able to reach any; -1 when none. */
static int pick_val(fg *g, teexec_dtype dt, int32_t min_rank)
{
    int cand[FG_MAX_VALS], n = 0;
    for (int i = 0; i < g->n_vals; i++)
        if ((dt == TEEXEC_DTYPE_UNDEFINED || g->vals[i].dt == dt) && g->vals[i].rank >= min_rank)
            cand[n++] = i;
    if (n == 0) return -1;
    return fz_bool(&g->src) ? cand[n - 1] : cand[fz_below(&g->src, (unsigned)n)];
}

/* ---- writing nodes and initializers --------------------------------------- */

static Onnx__NodeProto *node_new(fg *g, const char *op, const char *domain)
{
    if (g->n_nodes >= FG_MAX_NODES) return NULL;
    Onnx__NodeProto *n = tx_mw_node(g->w);
    if (!n) { g->oom = true; return NULL; }
    char buf[16];
    n->op_type = tx_mw_strdup(g->w, op);
    n->domain = tx_mw_strdup(g->w, domain ? domain : "");
    n->name = tx_mw_strdup(g->w, fresh_name(g, 'n', buf, sizeof buf));
    n->input = tx_mw_array(g->w, 16, sizeof(char *));
    n->output = tx_mw_array(g->w, 8, sizeof(char *));
    n->attribute = tx_mw_array(g->w, TX_TE_MAX_ATTRS + 4, sizeof(Onnx__AttributeProto *));
    if (!n->op_type || !n->domain || !n->name || !n->input || !n->output || !n->attribute) {
        g->oom = true;
        return NULL;
    }
    g->nodes[g->n_nodes++] = n;
    return n;
}

static void node_in(fg *g, Onnx__NodeProto *n, const char *name)
{
    if (n->n_input >= 16) return;
    char *s = tx_mw_strdup(g->w, name);
    if (!s) g->oom = true;
    n->input[n->n_input++] = s;
}

/* A new pool value as the node's next output; its index, -1 when the pool is full. */
static int node_out(fg *g, Onnx__NodeProto *n, teexec_dtype dt, int32_t rank, const int64_t *dims)
{
    if (g->n_vals >= FG_MAX_VALS || n->n_output >= 8) {
        /* An unnamed output slot keeps the node valid; nobody reads it. */
        if (n->n_output < 8) n->output[n->n_output++] = tx_mw_strdup(g->w, "");
        return -1;
    }
    fg_val *v = &g->vals[g->n_vals];
    fresh_name(g, 'v', v->name, sizeof v->name);
    snprintf(v->op, sizeof v->op, "%s", n->op_type);
    v->dt = dt;
    v->rank = rank;
    if (rank) memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
    char *s = tx_mw_strdup(g->w, v->name);
    if (!s) g->oom = true;
    n->output[n->n_output++] = s;
    return g->n_vals++;
}

static Onnx__AttributeProto *attr_new(fg *g, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
    if (n->n_attribute >= TX_TE_MAX_ATTRS + 4) return NULL;
    Onnx__AttributeProto *a = tx_mw_attr(g->w);
    if (!a || !(a->name = tx_mw_strdup(g->w, name))) { g->oom = true; return NULL; }
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static void attr_i(fg *g, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr_new(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) { a->has_i = 1; a->i = v; }
}

static void attr_f(fg *g, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = attr_new(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) { a->has_f = 1; a->f = v; }
}

static void attr_s(fg *g, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attr_new(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return;
    char *s = tx_mw_strdup(g->w, v);
    if (!s) { g->oom = true; return; }
    a->has_s = 1;
    a->s.data = (uint8_t *)s;
    a->s.len = strlen(s);
}

static void attr_ints(fg *g, Onnx__NodeProto *n, const char *name, const int64_t *v, size_t k)
{
    Onnx__AttributeProto *a = attr_new(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    if (!a) return;
    a->ints = tx_mw_array(g->w, k ? k : 1, sizeof(int64_t));
    if (!a->ints) { g->oom = true; return; }
    memcpy(a->ints, v, sizeof(int64_t) * k);
    a->n_ints = k;
}

/* A float drawn from the bytes: mostly small multiples of 1/32, with NaN
 * and infinities when the graph asked for special values. */
static float fz_float(fg *g)
{
    unsigned b = fz_byte(&g->src);
    if (g->specials && b >= 0xFD) return b == 0xFD ? NAN : b == 0xFE ? INFINITY : -INFINITY;
    return ((float)b - 128.0f) / 32.0f;
}

/* Fills t (FLOAT or INT64 or BOOL) from the bytes; int64 values in [lo, hi]. */
static void fill(fg *g, tx_tensor *t, int64_t lo, int64_t hi)
{
    for (uint64_t i = 0; i < t->numel; i++) {
        if (t->dtype == TEEXEC_DTYPE_FLOAT)
            ((float *)t->data)[i] = fz_float(g);
        else if (t->dtype == TEEXEC_DTYPE_INT64)
            ((int64_t *)t->data)[i] = hi - lo < 256 ? fz_range(&g->src, lo, hi) : lo;
        else if (t->dtype == TEEXEC_DTYPE_BOOL)
            ((uint8_t *)t->data)[i] = (uint8_t)fz_bool(&g->src);
    }
}

/* An initializer; its name (owned by the writer), NULL when none could be made. */
static const char *init_add(fg *g, const tx_tensor *t)
{
    if (g->n_inits >= FG_MAX_INITS) return NULL;
    char buf[16];
    Onnx__TensorProto *tp = NULL;
    teexec_status *st = tx_mw_tensor(g->w, fresh_name(g, 'w', buf, sizeof buf), t, &tp);
    if (st) {
        teexec_status_destroy(st);
        g->oom = true;
        return NULL;
    }
    g->inits[g->n_inits++] = tp;
    if (t->dtype == TEEXEC_DTYPE_FLOAT && t->numel > 1) g->n_params++;
    return tp->name;
}

/* A float initializer of the given shape filled from the bytes. */
static const char *init_float(fg *g, int32_t rank, const int64_t *dims)
{
    tx_tensor t;
    teexec_status *st = tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT, rank, dims);
    if (st) { teexec_status_destroy(st); g->oom = true; return NULL; }
    fill(g, &t, 0, 0);
    const char *name = init_add(g, &t);
    tx_tensor_release(&t);
    return name;
}

/* An int64 initializer holding vals (rank 0 or 1). */
static const char *init_i64(fg *g, int32_t rank, const int64_t *vals, int64_t n)
{
    tx_tensor t;
    int64_t dims[1] = {n};
    teexec_status *st = tx_tensor_alloc(&t, TEEXEC_DTYPE_INT64, rank, dims);
    if (st) { teexec_status_destroy(st); g->oom = true; return NULL; }
    memcpy(t.data, vals, sizeof(int64_t) * (size_t)(rank ? n : 1));
    const char *name = init_add(g, &t);
    tx_tensor_release(&t);
    return name;
}

/* A scalar float initializer (not trainable: one element). */
static const char *init_scalar(fg *g)
{
    return init_float(g, 0, NULL);
}

/* A shape that broadcasts against x's (a suffix of it with some dims 1). */
static int32_t broadcast_shape(fg *g, const fg_val *x, int64_t *dims)
{
    int32_t r = (int32_t)fz_below(&g->src, (unsigned)x->rank + 1);
    for (int32_t i = 0; i < r; i++) {
        int64_t d = x->dims[x->rank - r + i];
        dims[i] = fz_below(&g->src, 3) == 0 ? 1 : d;
    }
    return r;
}

static void broadcast2(const fg_val *a, int32_t rb, const int64_t *db, int32_t *r, int64_t *out)
{
    *r = a->rank > rb ? a->rank : rb;
    for (int32_t i = 0; i < *r; i++) {
        int32_t ia = i - (*r - a->rank), ib = i - (*r - rb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, d2 = ib >= 0 ? db[ib] : 1;
        out[i] = da == 1 ? d2 : da;
    }
}

/* ---- standard ops ------------------------------------------------------- */

typedef struct op_name {
    const char *name;
    int min_opset;
} op_name;

static void gen_unary(fg *g)
{
    static const op_name ops[] = {
        {"Neg", 1}, {"Abs", 1}, {"Relu", 1}, {"Sqrt", 1}, {"Reciprocal", 1}, {"Exp", 1},
        {"Log", 1}, {"Erf", 9}, {"Tanh", 1}, {"Sigmoid", 1}, {"LeakyRelu", 1}, {"Elu", 1},
        {"Softplus", 1}, {"Floor", 1}, {"Ceil", 1}, {"Round", 11}, {"Sin", 7}, {"Cos", 7},
        {"Sign", 9}, {"Gelu", 20}, {"Identity", 1}, {"Dropout", 1}};
    const op_name *o = &ops[fz_below(&g->src, sizeof ops / sizeof ops[0])];
    if (g->opset < o->min_opset) o = &ops[0];
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    Onnx__NodeProto *n = node_new(g, o->name, NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    if (!strcmp(o->name, "LeakyRelu") || !strcmp(o->name, "Elu"))
        attr_f(g, n, "alpha", fz_float(g));
    if (!strcmp(o->name, "Gelu") && fz_bool(&g->src))
        attr_s(g, n, "approximate", fz_bool(&g->src) ? "tanh" : "none");
    if (!strcmp(o->name, "Dropout") && fz_bool(&g->src)) {
        const char *ratio = init_scalar(g); /* inference: the ratio is read, not used */
        node_in(g, n, ratio ? ratio : "");
    }
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, xv.dims);
}

static void gen_binary(fg *g)
{
    static const char *ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max", "Sum", "Mean"};
    const char *op = ops[fz_below(&g->src, 9)];
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t db[FG_MAX_RANK + 2];
    int32_t rb;
    const char *other = NULL;
    int y = pick_val(g, TEEXEC_DTYPE_FLOAT, 0);
    int32_t rr;
    int64_t dr[FG_MAX_RANK + 2];
    bool fits = false;
    if (y >= 0 && fz_bool(&g->src)) {
        /* An existing value when the two broadcast (numpy rules). */
        const fg_val *yv = &g->vals[y];
        fits = true;
        int32_t r = xv.rank > yv->rank ? xv.rank : yv->rank;
        for (int32_t i = 0; i < r && fits; i++) {
            int32_t ia = i - (r - xv.rank), ib = i - (r - yv->rank);
            int64_t a = ia >= 0 ? xv.dims[ia] : 1, b = ib >= 0 ? yv->dims[ib] : 1;
            fits = a == b || a == 1 || b == 1;
        }
        if (fits) {
            rb = yv->rank;
            memcpy(db, yv->dims, sizeof db);
            other = yv->name;
        }
    }
    if (!fits) {
        rb = broadcast_shape(g, &xv, db);
        other = init_float(g, rb, db);
        if (!other) return;
    }
    broadcast2(&xv, rb, db, &rr, dr);
    if (!shape_ok(rr, dr)) return;
    Onnx__NodeProto *n = node_new(g, op, NULL);
    if (!n) return;
    bool swap = fz_bool(&g->src);
    char xname[16];
    memcpy(xname, xv.name, sizeof xname);
    node_in(g, n, swap ? other : xname);
    node_in(g, n, swap ? xname : other);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, rr, dr);
}

/* Compare (or IsNaN/IsInf) to a bool, maybe Not, then Where back to float. */
static void gen_where(fg *g)
{
    static const char *ops[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                "IsNaN", "IsInf"};
    const char *op = ops[fz_below(&g->src, 7)];
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t db[FG_MAX_RANK + 2] = {0}, dr[FG_MAX_RANK + 2];
    int32_t rb = 0, rr = xv.rank;
    memcpy(dr, xv.dims, sizeof dr);
    const char *other = NULL;
    bool unary = !strncmp(op, "Is", 2);
    if (!unary) {
        rb = broadcast_shape(g, &xv, db);
        if (!(other = init_float(g, rb, db))) return;
        broadcast2(&xv, rb, db, &rr, dr);
    }
    Onnx__NodeProto *n = node_new(g, op, NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    if (other) node_in(g, n, other);
    int c = node_out(g, n, TEEXEC_DTYPE_BOOL, rr, dr);
    if (c < 0) return;
    fg_val cv = g->vals[c];
    if (fz_bool(&g->src)) {
        if (!(n = node_new(g, "Not", NULL))) return;
        node_in(g, n, cv.name);
        if ((c = node_out(g, n, TEEXEC_DTYPE_BOOL, cv.rank, cv.dims)) < 0) return;
        cv = g->vals[c];
    }
    const char *y = init_scalar(g);
    if (!y || !(n = node_new(g, "Where", NULL))) return;
    node_in(g, n, cv.name);
    node_in(g, n, xv.name);
    node_in(g, n, y);
    int32_t ro;
    int64_t dout[FG_MAX_RANK + 2];
    broadcast2(&cv, xv.rank, xv.dims, &ro, dout);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, ro, dout);
}

/* MatMul with a [K, N] weight, maybe followed by Add of a [N] bias (the
 * pattern the importer lowers to Linear + Bias). */
static void gen_matmul(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t k = xv.dims[xv.rank - 1], nn = fz_range(&g->src, 1, 8);
    int64_t wd[2] = {k, nn};
    const char *w = init_float(g, 2, wd);
    if (!w) return;
    Onnx__NodeProto *n = node_new(g, "MatMul", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    node_in(g, n, w);
    int64_t od[FG_MAX_RANK + 2];
    int32_t r = xv.rank;
    memcpy(od, xv.dims, sizeof od);
    od[r - 1] = nn;
    int y = node_out(g, n, TEEXEC_DTYPE_FLOAT, r, od);
    if (y < 0 || !fz_bool(&g->src)) return;
    const char *b = init_float(g, 1, &nn);
    if (!b || !(n = node_new(g, "Add", NULL))) return;
    node_in(g, n, g->vals[y].name);
    node_in(g, n, b);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, r, od);
}

static void gen_gemm(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 2);
    if (x < 0 || g->vals[x].rank != 2) return;
    fg_val xv = g->vals[x];
    bool ta = fz_bool(&g->src), tb = fz_bool(&g->src);
    int64_t m = ta ? xv.dims[1] : xv.dims[0], k = ta ? xv.dims[0] : xv.dims[1];
    int64_t nn = fz_range(&g->src, 1, 8);
    int64_t bd[2] = {tb ? nn : k, tb ? k : nn};
    const char *b = init_float(g, 2, bd);
    if (!b) return;
    const char *c = NULL;
    unsigned cc = fz_below(&g->src, 4);
    if (cc == 1) c = init_float(g, 1, &nn);
    else if (cc == 2) c = init_scalar(g);
    else if (cc == 3) { int64_t cd[2] = {m, nn}; c = init_float(g, 2, cd); }
    Onnx__NodeProto *n = node_new(g, "Gemm", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    node_in(g, n, b);
    if (c) node_in(g, n, c);
    if (ta) attr_i(g, n, "transA", 1);
    if (tb) attr_i(g, n, "transB", 1);
    if (fz_bool(&g->src)) attr_f(g, n, "alpha", fz_float(g));
    if (fz_bool(&g->src)) attr_f(g, n, "beta", fz_float(g));
    int64_t od[2] = {m, nn};
    node_out(g, n, TEEXEC_DTYPE_FLOAT, 2, od);
}

static void gen_softmax(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    Onnx__NodeProto *n = node_new(g, fz_bool(&g->src) ? "Softmax" : "LogSoftmax", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    if (fz_bool(&g->src)) attr_i(g, n, "axis", fz_range(&g->src, -xv.rank, xv.rank - 1));
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, xv.dims);
}

/* LayerNormalization (17) or RMSNormalization (23) over dims[axis:]. */
static void gen_norm(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    bool rms = g->opset >= 23 && fz_bool(&g->src);
    int64_t axis = fz_range(&g->src, -xv.rank, xv.rank - 1);
    int32_t a = (int32_t)(axis < 0 ? axis + xv.rank : axis);
    const char *scale = init_float(g, xv.rank - a, xv.dims + a);
    const char *bias = !rms && fz_bool(&g->src) ? init_float(g, xv.rank - a, xv.dims + a) : NULL;
    if (!scale) return;
    Onnx__NodeProto *n = node_new(g, rms ? "RMSNormalization" : "LayerNormalization", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    node_in(g, n, scale);
    if (bias) node_in(g, n, bias);
    if (axis != -1 || fz_bool(&g->src)) attr_i(g, n, "axis", axis);
    if (fz_bool(&g->src)) attr_f(g, n, "epsilon", (float)fz_range(&g->src, 1, 100) * 1e-6f);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, xv.dims);
}

/* Reduce*: axes as an input (ReduceSum from 13, the others from 18). */
static void gen_reduce(fg *g)
{
    static const char *ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"};
    const char *op = ops[fz_below(&g->src, 5)];
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    bool keep = fz_bool(&g->src), noop = fz_below(&g->src, 4) == 0;
    bool mask[FG_MAX_RANK + 2] = {false};
    int64_t axes[FG_MAX_RANK + 2];
    int64_t na = 0;
    unsigned how = fz_below(&g->src, 3); /* 0 omitted, 1 subset, 2 empty list */
    if (how == 1)
        for (int32_t i = 0; i < xv.rank; i++)
            if (fz_bool(&g->src)) {
                mask[i] = true;
                axes[na++] = fz_bool(&g->src) ? i - xv.rank : i;
            }
    if (how == 1 && na == 0) how = 2;
    bool all = how != 1 && !noop, none = how != 1 && noop;
    /* ReduceMax/Min of an empty set has no value: keep those nonempty. */
    if (strcmp(op, "ReduceSum") && strcmp(op, "ReduceMean") && strcmp(op, "ReduceProd"))
        for (int32_t i = 0; i < xv.rank; i++)
            if (xv.dims[i] == 0 && (all || mask[i])) return;
    const char *ax = NULL;
    if (how == 1) ax = init_i64(g, 1, axes, na);
    else if (how == 2) ax = init_i64(g, 1, axes, 0);
    if (how != 0 && !ax) return;
    Onnx__NodeProto *n = node_new(g, op, NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    if (ax) node_in(g, n, ax);
    if (!keep) attr_i(g, n, "keepdims", 0);
    else if (fz_bool(&g->src)) attr_i(g, n, "keepdims", 1);
    if (noop) attr_i(g, n, "noop_with_empty_axes", 1);
    int64_t od[FG_MAX_RANK + 2];
    int32_t r = 0;
    for (int32_t i = 0; i < xv.rank; i++) {
        bool red = !none && (all || mask[i]);
        if (!red) od[r++] = xv.dims[i];
        else if (keep) od[r++] = 1;
    }
    node_out(g, n, TEEXEC_DTYPE_FLOAT, r, od);
}

/* ArgMax/ArgMin (int64), then Cast back to float half of the time. */
static void gen_argmax(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t axis = fz_range(&g->src, -xv.rank, xv.rank - 1);
    int32_t a = (int32_t)(axis < 0 ? axis + xv.rank : axis);
    if (xv.dims[a] == 0) return;
    bool keep = fz_bool(&g->src);
    Onnx__NodeProto *n = node_new(g, fz_bool(&g->src) ? "ArgMax" : "ArgMin", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    attr_i(g, n, "axis", axis);
    attr_i(g, n, "keepdims", keep);
    if (fz_bool(&g->src)) attr_i(g, n, "select_last_index", 1);
    int64_t od[FG_MAX_RANK + 2];
    int32_t r = 0;
    for (int32_t i = 0; i < xv.rank; i++)
        if (i != a) od[r++] = xv.dims[i];
        else if (keep) od[r++] = 1;
    node_out(g, n, TEEXEC_DTYPE_INT64, r, od);
}

static void gen_cumsum(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t axis = fz_range(&g->src, -xv.rank, xv.rank - 1);
    const char *ax = init_i64(g, fz_bool(&g->src) ? 1 : 0, &axis, 1);
    Onnx__NodeProto *n = ax ? node_new(g, "CumSum", NULL) : NULL;
    if (!n) return;
    node_in(g, n, xv.name);
    node_in(g, n, ax);
    if (fz_bool(&g->src)) attr_i(g, n, "exclusive", 1);
    if (fz_bool(&g->src)) attr_i(g, n, "reverse", 1);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, xv.dims);
}

/* A new shape of the same element count (numel > 0): random factors. */
static int32_t refactor(fg *g, int64_t numel, int64_t *dims)
{
    int32_t r = (int32_t)fz_range(&g->src, 1, 4);
    int64_t left = numel;
    for (int32_t i = 0; i < r - 1; i++) {
        int64_t divs[64];
        int nd = 0;
        for (int64_t d = 1; d <= left && nd < 64; d++)
            if (left % d == 0) divs[nd++] = d;
        dims[i] = divs[fz_below(&g->src, (unsigned)nd)];
        left /= dims[i];
    }
    dims[r - 1] = left;
    return r;
}

static void gen_reshape(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_UNDEFINED, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t numel = numel_of(xv.rank, xv.dims);
    if (numel == 0) return;
    int64_t od[FG_MAX_RANK + 2], spec[FG_MAX_RANK + 2];
    int32_t r = refactor(g, numel, od);
    memcpy(spec, od, sizeof spec);
    /* te.ops Reshape takes its shape as written (an attribute, no 0 = copy). */
    bool te = xv.dt == TEEXEC_DTYPE_FLOAT && fz_below(&g->src, 4) == 0;
    unsigned how = fz_below(&g->src, te ? 2 : 3);
    if (how == 1) spec[fz_below(&g->src, (unsigned)r)] = -1;
    if (how == 2)
        for (int32_t i = 0; i < r && i < xv.rank; i++)
            if (od[i] == xv.dims[i] && fz_bool(&g->src)) spec[i] = 0;
    const char *sh = te ? "" : init_i64(g, 1, spec, r);
    Onnx__NodeProto *n = sh ? node_new(g, "Reshape", te ? TX_TE_DOMAIN : NULL) : NULL;
    if (!n) return;
    node_in(g, n, xv.name);
    if (te) attr_ints(g, n, "shape", spec, (size_t)r);
    else node_in(g, n, sh);
    node_out(g, n, xv.dt, r, od);
}

static void gen_squeeze(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_UNDEFINED, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t axes[FG_MAX_RANK + 2], od[FG_MAX_RANK + 2];
    int64_t na = 0;
    int32_t r = 0;
    if (fz_bool(&g->src)) {
        /* Unsqueeze: k new axes at distinct positions of the output. */
        int32_t k = (int32_t)fz_range(&g->src, 1, 2);
        int32_t ro = xv.rank + k;
        if (ro > FG_MAX_RANK) return;
        bool isnew[FG_MAX_RANK + 2] = {false};
        for (int32_t i = 0; i < k; i++) {
            int32_t p = (int32_t)fz_below(&g->src, (unsigned)ro);
            while (isnew[p]) p = (p + 1) % ro;
            isnew[p] = true;
            axes[na++] = fz_bool(&g->src) ? p - ro : p;
        }
        for (int32_t i = 0, j = 0; i < ro; i++) od[r++] = isnew[i] ? 1 : xv.dims[j++];
        const char *ax = init_i64(g, 1, axes, na);
        Onnx__NodeProto *n = ax ? node_new(g, "Unsqueeze", NULL) : NULL;
        if (!n) return;
        node_in(g, n, xv.name);
        node_in(g, n, ax);
        node_out(g, n, xv.dt, r, od);
        return;
    }
    bool omit = fz_bool(&g->src);
    for (int32_t i = 0; i < xv.rank; i++) {
        bool sq = xv.dims[i] == 1 && (omit || fz_bool(&g->src));
        if (sq && !omit) axes[na++] = fz_bool(&g->src) ? i - xv.rank : i;
        if (!sq) od[r++] = xv.dims[i];
    }
    if (!omit && na == 0) return;
    const char *ax = omit ? NULL : init_i64(g, 1, axes, na);
    if (!omit && !ax) return;
    Onnx__NodeProto *n = node_new(g, "Squeeze", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    if (ax) node_in(g, n, ax);
    node_out(g, n, xv.dt, r, od);
}

static void gen_flatten_transpose(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_UNDEFINED, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t od[FG_MAX_RANK + 2];
    if (fz_bool(&g->src)) {
        int64_t axis = fz_range(&g->src, -xv.rank, xv.rank);
        int32_t a = (int32_t)(axis < 0 ? axis + xv.rank : axis);
        Onnx__NodeProto *n = node_new(g, "Flatten", NULL);
        if (!n) return;
        node_in(g, n, xv.name);
        if (axis != 1 || fz_bool(&g->src)) attr_i(g, n, "axis", axis);
        od[0] = numel_of(a, xv.dims);
        od[1] = numel_of(xv.rank - a, xv.dims + a);
        node_out(g, n, xv.dt, 2, od);
        return;
    }
    int64_t perm[FG_MAX_RANK + 2];
    bool given = fz_bool(&g->src);
    for (int32_t i = 0; i < xv.rank; i++) perm[i] = given ? i : xv.rank - 1 - i;
    if (given)
        for (int32_t i = xv.rank - 1; i > 0; i--) {
            int32_t j = (int32_t)fz_below(&g->src, (unsigned)i + 1);
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    Onnx__NodeProto *n = node_new(g, "Transpose", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    if (given) attr_ints(g, n, "perm", perm, (size_t)xv.rank);
    for (int32_t i = 0; i < xv.rank; i++) od[i] = xv.dims[perm[i]];
    node_out(g, n, xv.dt, xv.rank, od);
}

static void gen_concat(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t axis = fz_range(&g->src, -xv.rank, xv.rank - 1);
    int32_t a = (int32_t)(axis < 0 ? axis + xv.rank : axis);
    int k = (int)fz_range(&g->src, 1, 3);
    const char *names[3];
    int64_t total = xv.dims[a];
    for (int i = 0; i < k; i++) {
        int64_t d[FG_MAX_RANK + 2];
        memcpy(d, xv.dims, sizeof d);
        d[a] = fz_range(&g->src, 0, 4);
        total += d[a];
        if (!(names[i] = init_float(g, xv.rank, d))) return;
    }
    int64_t od[FG_MAX_RANK + 2];
    memcpy(od, xv.dims, sizeof od);
    od[a] = total;
    if (!shape_ok(xv.rank, od)) return;
    Onnx__NodeProto *n = node_new(g, "Concat", NULL);
    if (!n) return;
    int at = (int)fz_below(&g->src, (unsigned)k + 1);
    for (int i = 0; i <= k; i++) node_in(g, n, i == at ? xv.name : names[i - (i > at)]);
    attr_i(g, n, "axis", axis);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, od);
}

static void gen_split(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t axis = fz_range(&g->src, -xv.rank, xv.rank - 1);
    int32_t a = (int32_t)(axis < 0 ? axis + xv.rank : axis);
    int64_t d = xv.dims[a], sizes[4];
    int k;
    bool by_count = fz_bool(&g->src) && d > 0;
    if (by_count) {
        /* num_outputs (18): ceil(d / k) each, the last the rest (> 0). */
        k = (int)fz_range(&g->src, 1, d < 4 ? d : 4);
        int64_t each = (d + k - 1) / k;
        if (each * (k - 1) >= d) return; /* the last part would be empty */
        for (int i = 0; i < k; i++) sizes[i] = i < k - 1 ? each : d - each * (k - 1);
    } else {
        k = (int)fz_range(&g->src, 1, 3);
        int64_t left = d;
        for (int i = 0; i < k - 1; i++) {
            sizes[i] = fz_range(&g->src, 0, left < 8 ? left : 8);
            left -= sizes[i];
        }
        sizes[k - 1] = left;
    }
    const char *sp = by_count ? NULL : init_i64(g, 1, sizes, k);
    if (!by_count && !sp) return;
    Onnx__NodeProto *n = node_new(g, "Split", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    if (sp) node_in(g, n, sp);
    else attr_i(g, n, "num_outputs", k);
    attr_i(g, n, "axis", axis);
    for (int i = 0; i < k; i++) {
        int64_t od[FG_MAX_RANK + 2];
        memcpy(od, xv.dims, sizeof od);
        od[a] = sizes[i];
        node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, od);
    }
}

/* ONNX Slice's clamping of one start or end. */
static int64_t slice_clamp(int64_t v, int64_t d, int64_t lo, int64_t hi)
{
    if (v < 0) v = v < -d ? -1 : v + d;
    return v < lo ? lo : v > hi ? hi : v;
}

static void gen_slice(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t starts[FG_MAX_RANK], ends[FG_MAX_RANK], axes[FG_MAX_RANK], steps[FG_MAX_RANK];
    int64_t od[FG_MAX_RANK + 2];
    memcpy(od, xv.dims, sizeof od);
    int64_t k = 0;
    bool any_step = false;
    for (int32_t i = 0; i < xv.rank; i++) {
        if (!fz_bool(&g->src)) continue;
        int64_t d = xv.dims[i];
        static const int64_t step_of[] = {1, 1, 2, -1, -2, 3};
        int64_t st = step_of[fz_below(&g->src, 6)];
        int64_t s = fz_range(&g->src, -10, 10), e = fz_range(&g->src, -10, 10);
        unsigned big = fz_below(&g->src, 8);
        if (big == 1) e = INT64_MAX;
        if (big == 2) e = INT64_MIN;
        if (big == 3) s = INT64_MIN;
        int64_t len;
        if (d == 0) {
            len = 0; /* nothing to take, whatever the clamping says */
        } else if (st > 0) {
            int64_t cs = slice_clamp(s, d, 0, d), ce = slice_clamp(e, d, 0, d);
            len = ce > cs ? (ce - cs + st - 1) / st : 0;
        } else {
            int64_t cs = slice_clamp(s, d, 0, d - 1), ce = slice_clamp(e, d, -1, d - 1);
            len = cs > ce ? (cs - ce + (-st) - 1) / (-st) : 0;
        }
        starts[k] = s;
        ends[k] = e;
        axes[k] = fz_bool(&g->src) ? i - xv.rank : i;
        steps[k] = st;
        any_step |= st != 1;
        od[i] = len;
        k++;
    }
    if (k == 0) return;
    bool with_axes = any_step || fz_bool(&g->src);
    /* Without axes the starts/ends name axes 0..k-1 in order: only valid
     * when the chosen axes were exactly those. */
    for (int64_t i = 0; i < k && !with_axes; i++) with_axes = (axes[i] + xv.rank) % xv.rank != i;
    const char *ns = init_i64(g, 1, starts, k), *ne = init_i64(g, 1, ends, k);
    const char *na = with_axes ? init_i64(g, 1, axes, k) : NULL;
    const char *nst = any_step ? init_i64(g, 1, steps, k) : NULL;
    if (!ns || !ne || (with_axes && !na) || (any_step && !nst)) return;
    Onnx__NodeProto *n = node_new(g, "Slice", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    node_in(g, n, ns);
    node_in(g, n, ne);
    if (na) node_in(g, n, na);
    if (nst) node_in(g, n, nst);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, od);
}

static void gen_gather(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t axis = fz_range(&g->src, -xv.rank, xv.rank - 1);
    int32_t a = (int32_t)(axis < 0 ? axis + xv.rank : axis);
    int64_t d = xv.dims[a];
    if (d == 0 || d > 128) return;
    bool elements = fz_bool(&g->src);
    tx_tensor t;
    int64_t idims[FG_MAX_RANK + 2];
    int32_t ir;
    if (elements) {
        /* GatherElements: indices of x's rank, no larger than x off the axis. */
        ir = xv.rank;
        for (int32_t i = 0; i < ir; i++)
            idims[i] = i == a ? fz_range(&g->src, 1, 3) : fz_range(&g->src, xv.dims[i] ? 1 : 0, xv.dims[i]);
    } else {
        ir = (int32_t)fz_below(&g->src, 3);
        for (int32_t i = 0; i < ir; i++) idims[i] = fz_range(&g->src, 1, 3);
    }
    int64_t od[FG_MAX_RANK + 4];
    int32_t r = 0;
    if (elements) {
        memcpy(od, idims, sizeof(int64_t) * (size_t)ir);
        r = ir;
    } else {
        for (int32_t i = 0; i < a; i++) od[r++] = xv.dims[i];
        for (int32_t i = 0; i < ir; i++) od[r++] = idims[i];
        for (int32_t i = a + 1; i < xv.rank; i++) od[r++] = xv.dims[i];
    }
    if (!shape_ok(r, od)) return;
    teexec_status *st = tx_tensor_alloc(&t, TEEXEC_DTYPE_INT64, ir, idims);
    if (st) { teexec_status_destroy(st); g->oom = true; return; }
    fill(g, &t, -d, d - 1);
    const char *ind = init_add(g, &t);
    tx_tensor_release(&t);
    Onnx__NodeProto *n = ind ? node_new(g, elements ? "GatherElements" : "Gather", NULL) : NULL;
    if (!n) return;
    node_in(g, n, xv.name);
    node_in(g, n, ind);
    attr_i(g, n, "axis", axis);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, r, od);
}

static void gen_expand_tile(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t spec[FG_MAX_RANK + 2], od[FG_MAX_RANK + 2];
    if (fz_bool(&g->src) && xv.rank > 0) {
        for (int32_t i = 0; i < xv.rank; i++) {
            spec[i] = fz_range(&g->src, 0, 2);
            od[i] = xv.dims[i] * spec[i];
        }
        if (!shape_ok(xv.rank, od)) return;
        const char *rep = init_i64(g, 1, spec, xv.rank);
        Onnx__NodeProto *n = rep ? node_new(g, "Tile", NULL) : NULL;
        if (!n) return;
        node_in(g, n, xv.name);
        node_in(g, n, rep);
        node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, od);
        return;
    }
    int32_t extra = (int32_t)fz_below(&g->src, 2), r = xv.rank + extra;
    if (r > FG_MAX_RANK) return;
    for (int32_t i = 0; i < r; i++) {
        int32_t j = i - extra;
        int64_t d = j >= 0 ? xv.dims[j] : 1;
        if (d == 1) spec[i] = fz_range(&g->src, 1, 3);
        else spec[i] = fz_bool(&g->src) ? 1 : d;
        od[i] = d == 1 ? spec[i] : d;
    }
    if (!shape_ok(r, od)) return;
    const char *sh = init_i64(g, 1, spec, r);
    Onnx__NodeProto *n = sh ? node_new(g, "Expand", NULL) : NULL;
    if (!n) return;
    node_in(g, n, xv.name);
    node_in(g, n, sh);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, r, od);
}

/* Cast to another dtype, and back to float half of the time. */
static void gen_cast(fg *g)
{
    static const teexec_dtype to[] = {TEEXEC_DTYPE_FLOAT16, TEEXEC_DTYPE_DOUBLE, TEEXEC_DTYPE_INT64,
                                      TEEXEC_DTYPE_BOOL, TEEXEC_DTYPE_BFLOAT16, TEEXEC_DTYPE_INT32,
                                      TEEXEC_DTYPE_FLOAT, TEEXEC_DTYPE_UINT8};
    int x = pick_val(g, TEEXEC_DTYPE_UNDEFINED, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    teexec_dtype t = to[fz_below(&g->src, 8)];
    Onnx__NodeProto *n = node_new(g, "Cast", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    attr_i(g, n, "to", t);
    int y = node_out(g, n, t, xv.rank, xv.dims);
    if (y < 0 || t == TEEXEC_DTYPE_FLOAT || !fz_bool(&g->src)) return;
    if (!(n = node_new(g, "Cast", NULL))) return;
    node_in(g, n, g->vals[y].name);
    attr_i(g, n, "to", TEEXEC_DTYPE_FLOAT);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, xv.dims);
}

static void gen_trilu_clip(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    if (xv.rank >= 2 && fz_bool(&g->src)) {
        int64_t k = fz_range(&g->src, -4, 4);
        const char *kn = fz_bool(&g->src) ? init_i64(g, 0, &k, 1) : NULL;
        Onnx__NodeProto *n = node_new(g, "Trilu", NULL);
        if (!n) return;
        node_in(g, n, xv.name);
        if (kn) node_in(g, n, kn);
        if (fz_bool(&g->src)) attr_i(g, n, "upper", fz_bool(&g->src));
        node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, xv.dims);
        return;
    }
    unsigned which = fz_below(&g->src, 4); /* bit 0: min, bit 1: max */
    const char *lo = which & 1 ? init_scalar(g) : "", *hi = which & 2 ? init_scalar(g) : NULL;
    if (!lo) return;
    Onnx__NodeProto *n = node_new(g, "Clip", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    if (which) node_in(g, n, lo);
    if (hi) node_in(g, n, hi);
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, xv.dims);
}

/* Shape -> ConstantOfShape (a float tensor of x's shape), or Size. */
static void gen_shape(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_UNDEFINED, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    if (fz_below(&g->src, 4) == 0) {
        Onnx__NodeProto *n = node_new(g, "Size", NULL);
        if (!n) return;
        node_in(g, n, xv.name);
        node_out(g, n, TEEXEC_DTYPE_INT64, 0, NULL);
        return;
    }
    Onnx__NodeProto *n = node_new(g, "Shape", NULL);
    if (!n) return;
    node_in(g, n, xv.name);
    int64_t rk = xv.rank;
    int s = node_out(g, n, TEEXEC_DTYPE_INT64, 1, &rk);
    if (s < 0 || !(n = node_new(g, "ConstantOfShape", NULL))) return;
    node_in(g, n, g->vals[s].name);
    if (fz_bool(&g->src)) {
        tx_tensor t;
        int64_t one = 1;
        teexec_status *st = tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT, 1, &one);
        if (st) { teexec_status_destroy(st); g->oom = true; return; }
        fill(g, &t, 0, 0);
        Onnx__TensorProto *tp = NULL;
        st = tx_mw_tensor(g->w, "value", &t, &tp);
        tx_tensor_release(&t);
        if (st) { teexec_status_destroy(st); g->oom = true; return; }
        Onnx__AttributeProto *a = attr_new(g, n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
        if (a) a->t = tp;
    }
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, xv.dims);
}

static void gen_topk(fg *g)
{
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 1);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    int64_t axis = fz_range(&g->src, -xv.rank, xv.rank - 1);
    int32_t a = (int32_t)(axis < 0 ? axis + xv.rank : axis);
    int64_t k = fz_range(&g->src, 0, xv.dims[a] < 8 ? xv.dims[a] : 8);
    const char *kn = init_i64(g, 1, &k, 1);
    Onnx__NodeProto *n = kn ? node_new(g, "TopK", NULL) : NULL;
    if (!n) return;
    node_in(g, n, xv.name);
    node_in(g, n, kn);
    attr_i(g, n, "axis", axis);
    if (fz_bool(&g->src)) attr_i(g, n, "largest", fz_bool(&g->src));
    if (fz_bool(&g->src)) attr_i(g, n, "sorted", fz_bool(&g->src));
    int64_t od[FG_MAX_RANK + 2];
    memcpy(od, xv.dims, sizeof od);
    od[a] = k;
    node_out(g, n, TEEXEC_DTYPE_FLOAT, xv.rank, od);
    node_out(g, n, TEEXEC_DTYPE_INT64, xv.rank, od);
}

/* ---- te.ops ---------------------------------------------------------- */

/* A candidate shape for a parameter or extra input of a te.ops op, from
 * the main input's shape; tx_te_infer decides which ones fit. */
static void te_candidate(fg *g, const fg_val *x, tx_shape *out)
{
    int32_t r = x->rank;
    int64_t last = r ? x->dims[r - 1] : 1;
    int64_t rows = r ? numel_of(r - 1, x->dims) : 1;
    memset(out, 0, sizeof *out);
    switch (fz_below(&g->src, 6)) {
    case 0: /* same as x */
        out->rank = r;
        memcpy(out->dims, x->dims, sizeof(int64_t) * (size_t)r);
        break;
    case 1: /* [H] */
        out->rank = 1;
        out->dims[0] = last;
        break;
    case 2: /* [N, K] (a Linear weight) */
        out->rank = 2;
        out->dims[0] = fz_range(&g->src, 1, 8);
        out->dims[1] = last;
        break;
    case 3: /* x's shape without its last dim (per row) */
        out->rank = r ? r - 1 : 0;
        memcpy(out->dims, x->dims, sizeof(int64_t) * (size_t)out->rank);
        break;
    case 4: /* [rows] */
        out->rank = 1;
        out->dims[0] = rows;
        break;
    default: /* a scalar */
        out->rank = 0;
        break;
    }
}

static void gen_te(fg *g)
{
    const tx_te_op_schema *s = tx_te_schema((tx_te_op_id)fz_below(&g->src, TX_TE_OP_COUNT));
    if (!s || strcmp(s->input.type, "T") != 0) return; /* Embedding's ids: not drawn here */
    int x = pick_val(g, TEEXEC_DTYPE_FLOAT, 0);
    if (x < 0) return;
    fg_val xv = g->vals[x];
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    int64_t ints[TX_TE_MAX_ATTRS][FG_MAX_RANK + 2];
    tx_te_attr_defaults(s, attrs);
    bool set[TX_TE_MAX_ATTRS] = {false};
    for (int i = 0; i < s->n_attrs; i++) {
        const tx_te_attr_schema *a = &s->attrs[i];
        if (!a->required && fz_below(&g->src, 3) != 0) continue;
        set[i] = true;
        switch (a->type) {
        case TX_TE_ATTR_INT: attrs[i].i = fz_range(&g->src, -1, 4); break;
        case TX_TE_ATTR_FLOAT:
            attrs[i].f = fz_bool(&g->src) ? a->def_f : (double)fz_float(g);
            break;
        case TX_TE_ATTR_ENUM: {
            int nc = 1;
            for (const char *c = a->choices; c && *c; c++) nc += *c == '|';
            attrs[i].i = fz_below(&g->src, (unsigned)nc);
            break;
        }
        case TX_TE_ATTR_INTS: {
            int64_t numel = numel_of(xv.rank, xv.dims);
            int32_t r = numel > 0 ? refactor(g, numel, ints[i]) : 0;
            attrs[i].ints = ints[i];
            attrs[i].n_ints = r;
            break;
        }
        }
    }
    int n_params = 0;
    teexec_status *st = tx_te_param_count(s, attrs, &n_params);
    if (st || n_params > 8) { teexec_status_destroy(st); return; }
    /* Up to four draws of shapes for the extra inputs and parameters. */
    tx_te_tinfo xin = {TEEXEC_DTYPE_FLOAT, {0, {0}}}, ex[TX_TE_MAX_EXTRA], pa[8];
    const tx_te_tinfo *exp_[TX_TE_MAX_EXTRA], *pap[8];
    bool have_ex[TX_TE_MAX_EXTRA];
    xin.shape.rank = xv.rank;
    memcpy(xin.shape.dims, xv.dims, sizeof(int64_t) * (size_t)xv.rank);
    tx_te_infer_out out;
    bool ok = false;
    for (int attempt = 0; attempt < 4 && !ok; attempt++) {
        for (int i = 0; i < s->n_extra_inputs; i++) {
            have_ex[i] = !(s->extra_inputs[i].flags & TX_TE_PORT_OPTIONAL) || fz_bool(&g->src);
            ex[i].dtype = strcmp(s->extra_inputs[i].type, "T") ? TEEXEC_DTYPE_INT64 : TEEXEC_DTYPE_FLOAT;
            te_candidate(g, &xv, &ex[i].shape);
            exp_[i] = have_ex[i] ? &ex[i] : NULL;
        }
        for (int i = 0; i < n_params; i++) {
            pa[i].dtype = TEEXEC_DTYPE_FLOAT;
            te_candidate(g, &xv, &pa[i].shape);
            pap[i] = &pa[i];
        }
        tx_te_infer_in in = {attrs, &xin, exp_, s->n_extra_inputs, pap, n_params};
        memset(&out, 0, sizeof out);
        st = tx_te_infer(s, &in, &out);
        ok = st == NULL;
        teexec_status_destroy(st);
    }
    if (!ok || !shape_ok(out.output.shape.rank, out.output.shape.dims)) return;
    for (int i = 0; i < s->n_extra_outputs; i++)
        if (!shape_ok(out.extra_outputs[i].shape.rank, out.extra_outputs[i].shape.dims)) return;
    /* Tensors for the extra inputs (int64 ones hold small indices) and the parameters. */
    const char *exn[TX_TE_MAX_EXTRA], *pan[8];
    for (int i = 0; i < s->n_extra_inputs; i++) {
        exn[i] = "";
        if (!have_ex[i]) continue;
        if (ex[i].dtype == TEEXEC_DTYPE_FLOAT) {
            exn[i] = init_float(g, ex[i].shape.rank, ex[i].shape.dims);
        } else {
            tx_tensor t;
            st = tx_tensor_alloc(&t, TEEXEC_DTYPE_INT64, ex[i].shape.rank, ex[i].shape.dims);
            if (st) { teexec_status_destroy(st); g->oom = true; return; }
            fill(g, &t, 0, 3);
            exn[i] = init_add(g, &t);
            tx_tensor_release(&t);
        }
        if (!exn[i]) return;
    }
    for (int i = 0; i < n_params; i++)
        if (!(pan[i] = init_float(g, pa[i].shape.rank, pa[i].shape.dims))) return;
    Onnx__NodeProto *n = node_new(g, s->name, TX_TE_DOMAIN);
    if (!n) return;
    node_in(g, n, xv.name);
    /* Trailing absent optional extra inputs may be left out when there
     * are no parameters; otherwise they are "". */
    int n_ex = s->n_extra_inputs;
    if (n_params == 0)
        while (n_ex > 0 && !have_ex[n_ex - 1] && fz_bool(&g->src)) n_ex--;
    for (int i = 0; i < n_ex; i++) node_in(g, n, exn[i]);
    for (int i = 0; i < n_params; i++) node_in(g, n, pan[i]);
    for (int i = 0; i < s->n_attrs; i++) {
        if (!set[i]) continue;
        const tx_te_attr_schema *a = &s->attrs[i];
        char buf[64];
        switch (a->type) {
        case TX_TE_ATTR_INT: attr_i(g, n, a->name, attrs[i].i); break;
        case TX_TE_ATTR_FLOAT: attr_f(g, n, a->name, (float)attrs[i].f); break;
        case TX_TE_ATTR_ENUM:
            attr_s(g, n, a->name, tx_te_attr_enum_name(a, attrs[i].i, buf, sizeof buf));
            break;
        case TX_TE_ATTR_INTS: attr_ints(g, n, a->name, attrs[i].ints, (size_t)attrs[i].n_ints); break;
        }
    }
    node_out(g, n, out.output.dtype, out.output.shape.rank, out.output.shape.dims);
    for (int i = 0; i < s->n_extra_outputs; i++)
        node_out(g, n, out.extra_outputs[i].dtype, out.extra_outputs[i].shape.rank,
                 out.extra_outputs[i].shape.dims);
}

/* ---- the whole graph ------------------------------------------------- */

typedef void (*gen_fn)(fg *g);

static const gen_fn gens[] = {
    gen_unary, gen_binary, gen_where, gen_matmul, gen_gemm, gen_softmax, gen_norm,
    gen_reduce, gen_argmax, gen_cumsum, gen_reshape, gen_squeeze, gen_flatten_transpose,
    gen_concat, gen_split, gen_slice, gen_gather, gen_expand_tile, gen_cast, gen_trilu_clip,
    gen_shape, gen_topk, gen_te, gen_te, gen_te, gen_te};

typedef struct fg_model {
    uint8_t *bytes;
    size_t len;
    int n_inputs;
    fg_val inputs[2];
    int n_outputs;
    fg_val outputs[2];
    bool trainable;
    unsigned n_nodes, n_te_nodes;
} fg_model;

/* Builds and serializes the graph; false when memory ran out. */
static bool build(fg *g, fg_model *m)
{
    g->specials = fz_below(&g->src, 8) == 0;
    static const int opsets[] = {18, 20, 21, 23};
    g->opset = opsets[fz_below(&g->src, 4)];
    g->n_inputs = 1 + (int)fz_below(&g->src, 2);
    for (int i = 0; i < g->n_inputs; i++) {
        fg_val *v = &g->vals[g->n_vals++];
        fresh_name(g, 'x', v->name, sizeof v->name);
        v->dt = TEEXEC_DTYPE_FLOAT;
        v->rank = (int32_t)fz_range(&g->src, 0, 4);
        for (int32_t d = 0; d < v->rank; d++)
            v->dims[d] = fz_below(&g->src, 32) == 0 ? 0 : fz_range(&g->src, 1, 6);
    }
    unsigned steps = 1 + fz_below(&g->src, 8);
    for (unsigned i = 0; i < steps && g->n_nodes < FG_MAX_NODES && !g->oom; i++)
        gens[fz_below(&g->src, sizeof gens / sizeof gens[0])](g);
    if (g->n_nodes == 0) {
        Onnx__NodeProto *n = node_new(g, "Identity", NULL);
        if (n) {
            fg_val x = g->vals[0];
            node_in(g, n, x.name);
            node_out(g, n, x.dt, x.rank, x.dims);
        }
    }
    if (g->oom) return false;
    const char *verbose = getenv("TEEXEC_FUZZ_GRAPH_VERBOSE");
    if (verbose && *verbose == '2') { /* the graph, node by node, with the shapes expected */
        for (size_t i = 0; i < g->n_nodes; i++) {
            fprintf(stderr, "fuzz_graph: %s(", g->nodes[i]->op_type);
            for (size_t k = 0; k < g->nodes[i]->n_input; k++)
                fprintf(stderr, "%s%s", k ? ", " : "", g->nodes[i]->input[k]);
            fprintf(stderr, ") ->");
            for (size_t k = 0; k < g->nodes[i]->n_output; k++) fprintf(stderr, " %s", g->nodes[i]->output[k]);
            fprintf(stderr, "\n");
        }
        for (int i = 0; i < g->n_vals; i++) {
            fprintf(stderr, "fuzz_graph:   %s %s [", g->vals[i].name, teexec_dtype_name(g->vals[i].dt));
            for (int32_t k = 0; k < g->vals[i].rank; k++)
                fprintf(stderr, "%s%lld", k ? "," : "", (long long)g->vals[i].dims[k]);
            fprintf(stderr, "]\n");
        }
    }

    /* Outputs: the newest value, and another node output sometimes. */
    m->n_outputs = 1;
    m->outputs[0] = g->vals[g->n_vals - 1];
    if (g->n_vals - 1 > g->n_inputs && fz_bool(&g->src)) {
        int o = g->n_inputs + (int)fz_below(&g->src, (unsigned)(g->n_vals - 1 - g->n_inputs));
        m->outputs[m->n_outputs++] = g->vals[o];
    }
    m->n_inputs = g->n_inputs;
    memcpy(m->inputs, g->vals, sizeof(fg_val) * (size_t)g->n_inputs);
    m->trainable = g->n_params > 0;
    m->n_nodes = (unsigned)g->n_nodes;
    for (size_t i = 0; i < g->n_nodes; i++) m->n_te_nodes += !strcmp(g->nodes[i]->domain, TX_TE_DOMAIN);

    Onnx__ModelProto *model = tx_mw_model(g->w);
    Onnx__GraphProto *graph = tx_mw_graph(g->w);
    if (!model || !graph) return false;
    model->has_ir_version = 1;
    model->ir_version = g->opset >= 23 ? 11 : g->opset >= 21 ? 10 : 9;
    model->producer_name = tx_mw_strdup(g->w, "fuzz_graph");
    model->opset_import = tx_mw_array(g->w, 2, sizeof(Onnx__OperatorSetIdProto *));
    if (!model->opset_import) return false;
    model->opset_import[0] = tx_mw_opset(g->w, "", g->opset);
    model->opset_import[1] = tx_mw_opset(g->w, TX_TE_DOMAIN, TX_TE_DOMAIN_VERSION);
    if (!model->opset_import[0] || !model->opset_import[1]) return false;
    model->n_opset_import = 2;
    model->graph = graph;
    graph->name = tx_mw_strdup(g->w, "fuzz");
    graph->node = g->nodes;
    graph->n_node = g->n_nodes;
    graph->initializer = g->inits;
    graph->n_initializer = g->n_inits;
    graph->input = tx_mw_array(g->w, 2, sizeof(Onnx__ValueInfoProto *));
    graph->output = tx_mw_array(g->w, 2, sizeof(Onnx__ValueInfoProto *));
    if (!graph->input || !graph->output) return false;
    for (int i = 0; i < m->n_inputs; i++) {
        teexec_status *st = tx_mw_value_info(g->w, m->inputs[i].name, m->inputs[i].dt,
                                             m->inputs[i].rank, m->inputs[i].dims, NULL,
                                             &graph->input[i]);
        if (st) { teexec_status_destroy(st); return false; }
    }
    graph->n_input = (size_t)m->n_inputs;
    for (int i = 0; i < m->n_outputs; i++) {
        /* The dtype is declared; the shape only sometimes (the library infers it). */
        bool shaped = fz_bool(&g->src);
        teexec_status *st = tx_mw_value_info(g->w, m->outputs[i].name, m->outputs[i].dt,
                                             shaped ? m->outputs[i].rank : -1, m->outputs[i].dims,
                                             NULL, &graph->output[i]);
        if (st) { teexec_status_destroy(st); return false; }
    }
    graph->n_output = (size_t)m->n_outputs;
    teexec_status *st = tx_mw_pack(model, &m->bytes, &m->len);
    if (st) { teexec_status_destroy(st); return false; }
    return true;
}

/* ---- through the API --------------------------------------------------- */

/* TEEXEC_FUZZ_GRAPH_VERBOSE=1: each refusal on stderr (for looking at
 * what the library declines; never set while fuzzing). */
static void refused(const char *stage, const teexec_status *st)
{
    const char *v = getenv("TEEXEC_FUZZ_GRAPH_VERBOSE");
    if (v && *v == '1') fprintf(stderr, "fuzz_graph: %s refused: %s\n", stage, teexec_status_message(st));
}

static void note(char *buf, const char *what, const teexec_status *st)
{
    snprintf(buf, 256, "%s: %s", what, st ? teexec_status_message(st) : "");
}

static void plan(fg *g, const teexec_model *model, tx_fuzz_graph_stats *stats)
{
    static const char *devices[] = {"cpu", "sm_90", "sm_100"};
    static const char *recipes[] = {"none", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8", "nvfp4"};
    teexec_plan_options *po = NULL;
    teexec_status *st = teexec_plan_options_create(&po);
    if (st) { teexec_status_destroy(st); return; }
    unsigned dev = fz_below(&g->src, 3);
    teexec_status_destroy(teexec_plan_options_set_device(po, devices[dev]));
    if (dev) teexec_status_destroy(teexec_plan_options_set_recipe(po, recipes[fz_below(&g->src, 6)]));
    teexec_status_destroy(teexec_plan_options_set_training(po, fz_bool(&g->src)));
    char *text = NULL;
    st = teexec_model_plan(model, po, (teexec_plan_format)fz_below(&g->src, 3), &text);
    if (!st && stats) stats->planned++;
    if (st) refused("plan", st);
    teexec_status_destroy(st);
    teexec_string_free(text);
    teexec_plan_options_destroy(po);
}

/* Input tensors with data from the bytes; false when one could not be made. */
static bool make_inputs(fg *g, const fg_model *m, teexec_tensor **t)
{
    for (int i = 0; i < m->n_inputs; i++) {
        teexec_status *st = teexec_tensor_create(m->inputs[i].dt, m->inputs[i].rank,
                                                 m->inputs[i].dims, &t[i]);
        if (st) { teexec_status_destroy(st); return false; }
        float *d = teexec_tensor_data(t[i]);
        for (uint64_t k = 0; k < teexec_tensor_element_count(t[i]); k++) d[k] = fz_float(g);
    }
    return true;
}

static void check_output(const fg_val *want, const teexec_tensor *got, tx_fuzz_graph_stats *stats)
{
    bool same = teexec_tensor_dtype(got) == want->dt && teexec_tensor_rank(got) == want->rank;
    for (int32_t i = 0; same && i < want->rank; i++) same = teexec_tensor_dims(got)[i] == want->dims[i];
    if (same || !stats) return;
    stats->shape_mismatch++;
    char w[96] = "", h[96] = "";
    for (int32_t i = 0; i < want->rank; i++)
        snprintf(w + strlen(w), sizeof w - strlen(w), "%s%lld", i ? "," : "", (long long)want->dims[i]);
    for (int32_t i = 0; i < teexec_tensor_rank(got); i++)
        snprintf(h + strlen(h), sizeof h - strlen(h), "%s%lld", i ? "," : "",
                 (long long)teexec_tensor_dims(got)[i]);
    snprintf(stats->last_mismatch, sizeof stats->last_mismatch, "%s (%s): want %s [%s], got %s [%s]",
             want->name, want->op, teexec_dtype_name(want->dt), w, teexec_dtype_name(teexec_tensor_dtype(got)), h);
}

static void run_session(fg *g, const teexec_model *model, const fg_model *m,
                        tx_fuzz_graph_stats *stats)
{
    teexec_session_options *so = NULL;
    teexec_status *st = teexec_session_options_create(&so);
    if (st) { teexec_status_destroy(st); return; }
    teexec_status_destroy(teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU));
    teexec_status_destroy(teexec_session_options_set_threads(so, 1));
    teexec_session *s = NULL;
    st = teexec_session_create(model, so, &s);
    teexec_session_options_destroy(so);
    if (st) { refused("session", st); teexec_status_destroy(st); return; }
    if (stats) stats->sessions++;
    teexec_tensor *in[2] = {NULL, NULL}, *out[2] = {NULL, NULL};
    const char *names[2] = {m->inputs[0].name, m->n_inputs > 1 ? m->inputs[1].name : NULL};
    if (make_inputs(g, m, in)) {
        st = teexec_session_run(s, (size_t)m->n_inputs, names, (const teexec_tensor *const *)in,
                                (size_t)m->n_outputs, NULL, out);
        if (!st) {
            if (stats) stats->ran++;
            for (int i = 0; i < m->n_outputs; i++) check_output(&m->outputs[i], out[i], stats);
        } else {
            refused("run", st);
        }
        teexec_status_destroy(st);
    }
    for (int i = 0; i < 2; i++) {
        teexec_tensor_destroy(in[i]);
        teexec_tensor_destroy(out[i]);
    }
    teexec_session_destroy(s);
}

/* One MSE step on the first output when it is float and a trainable
 * initializer exists. */
static void train_step(fg *g, const teexec_model *model, const fg_model *m,
                       tx_fuzz_graph_stats *stats)
{
    const fg_val *y = &m->outputs[0];
    if (!m->trainable || y->dt != TEEXEC_DTYPE_FLOAT || !fz_bool(&g->src)) return;
    if (stats) stats->train_tried++;
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.loss_output = y->name;
    o.optimizer = fz_bool(&g->src) ? TEEXEC_OPTIMIZER_SGD : TEEXEC_OPTIMIZER_ADAMW;
    o.lr = 1e-2;
    teexec_trainer *tr = NULL;
    teexec_status *st = teexec_trainer_create(model, &o, &tr);
    if (st) { teexec_status_destroy(st); return; }
    teexec_tensor *t[3] = {NULL, NULL, NULL};
    const char *names[3] = {m->inputs[0].name, m->n_inputs > 1 ? m->inputs[1].name : "target",
                            "target"};
    if (make_inputs(g, m, t)) {
        st = teexec_tensor_create(TEEXEC_DTYPE_FLOAT, y->rank, y->dims, &t[m->n_inputs]);
        if (!st) {
            double loss = 0;
            st = teexec_trainer_step(tr, (size_t)m->n_inputs + 1, names,
                                     (const teexec_tensor *const *)t, &loss);
            if (!st && stats) stats->trained++;
            if (st) refused("step", st);
        }
        teexec_status_destroy(st);
    }
    for (int i = 0; i < 3; i++) teexec_tensor_destroy(t[i]);
    teexec_trainer_destroy(tr);
}

int tx_fuzz_graph_one(const uint8_t *data, size_t size, tx_fuzz_graph_stats *stats)
{
    fg *g = calloc(1, sizeof *g);
    if (!g) return 0;
    g->src.p = data;
    g->src.n = size;
    fg_model m;
    memset(&m, 0, sizeof m);
    teexec_status *st = tx_mw_create(&g->w);
    bool built = !st && build(g, &m);
    teexec_status_destroy(st);
    tx_mw_free(g->w);
    g->w = NULL;
    if (!built) {
        free(m.bytes);
        free(g);
        return 0;
    }
    if (stats) {
        stats->built++;
        stats->nodes += m.n_nodes;
        stats->te_nodes += m.n_te_nodes;
    }
    const char *save = getenv("TEEXEC_FUZZ_GRAPH_SAVE");
    if (save && *save) {
        FILE *f = fopen(save, "wb");
        if (f) {
            fwrite(m.bytes, 1, m.len, f);
            fclose(f);
        }
    }
    teexec_model *model = NULL;
    st = teexec_model_load_memory(m.bytes, m.len, NULL, NULL, &model);
    free(m.bytes);
    if (st) {
        refused("load", st);
        if (stats) note(stats->last_load_error, "load", st);
        teexec_status_destroy(st);
        free(g);
        return 0;
    }
    if (stats) stats->loaded++;
    plan(g, model, stats);
    run_session(g, model, &m, stats);
    train_step(g, model, &m, stats);
    teexec_model_destroy(model);
    free(g);
    return 0;
}
