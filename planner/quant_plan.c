/* quant_plan.c - per GEMM operand: format, block shape, usages, hand-off
 * producer, scale layout, delayed-scaling slot, native or emulated, and
 * why (policy in quant_plan.h; formats in te-ops.md section 4). */
#include "planner/quant_plan.h"

#include "base/checked.h"
#include "planner/plan_internal.h"
#include "planner/plan_schedule.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growing "; "-separated reason ------------------------------------ */

typedef struct why_buf {
    char *s;
    size_t len, cap;
    bool oom;
} why_buf;

static void why_add(why_buf *b, const char *fmt, ...) TX_PRINTF(2, 3);
static void why_add(why_buf *b, const char *fmt, ...)
{
    if (b->oom) return;
    char piece[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(piece, sizeof piece, fmt, ap);
    va_end(ap);
    size_t add = strlen(piece) + (b->len ? 2 : 0);
    if (b->len + add + 1 > b->cap) {
        size_t cap = (b->len + add + 1) * 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    if (b->len) {
        memcpy(b->s + b->len, "; ", 2);
        b->len += 2;
    }
    memcpy(b->s + b->len, piece, strlen(piece) + 1);
    b->len += strlen(piece);
}

/* ---- public helpers -------------------------------------------------------- */

void tx_plan_quant_clear(tx_fuser_plan *p)
{
    for (size_t i = 0; i < p->n_quant; i++) free(p->quant[i].why);
    free(p->quant);
    p->quant = NULL;
    p->n_quant = 0;
}

const tx_plan_quant *tx_plan_quant_find(const tx_fuser_plan *p, int32_t node, tx_qoperand operand)
{
    for (size_t i = 0; i < p->n_quant; i++)
        if (p->quant[i].node == node && p->quant[i].operand == operand) return &p->quant[i];
    return NULL;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }
static uint64_t round_up(uint64_t a, uint64_t b) { return ceil_div(a, b) * b; }

/* data bytes + scale entries * scale_size (+ extra) with overflow checks. */
static int usage_bytes(uint64_t data, uint64_t s_rows, uint64_t s_cols, uint64_t s_size,
                       uint64_t extra, uint64_t *acc)
{
    uint64_t sc;
    if (!tx_mul_u64(s_rows, s_cols, &sc) || !tx_mul_u64(sc, s_size, &sc)) return 0;
    return tx_add_u64(*acc, data, acc) && tx_add_u64(*acc, sc, acc) && tx_add_u64(*acc, extra, acc);
}

teexec_status *tx_plan_quant_bytes(const tx_plan_quant *q, uint64_t rows, uint64_t cols, unsigned usage,
                                   uint64_t *out)
{
    *out = 0;
    if (!q->quantized || !usage) return NULL;
    /* Scale shapes are rounded up; keep every intermediate far from
     * wrapping before the checked products. */
    if (rows > (UINT64_C(1) << 48) || cols > (UINT64_C(1) << 48))
        return tx_error(TEEXEC_ERR_LIMIT, "quantized copy of %llu x %llu elements is too large",
                        (unsigned long long)rows, (unsigned long long)cols);
    uint64_t M = rows, K = cols, mk, acc = 0;
    if (!tx_mul_u64(M, K, &mk)) return tx_error(TEEXEC_ERR_LIMIT, "quantized copy size overflows");
    bool row = usage & TX_QUSAGE_ROWWISE, col = usage & TX_QUSAGE_COLUMNWISE;
    bool two_d = q->block_rows > 1;
    int ok = 1;
    switch (q->kind) {
    case TX_QKIND_FP8_TENSOR:
        /* one FP32 scale_inv shared by both usages */
        acc = 4;
        ok = (!row || tx_add_u64(acc, mk, &acc)) && (!col || tx_add_u64(acc, mk, &acc));
        break;
    case TX_QKIND_FP8_BLOCK:
        if (row)
            ok = ok && (two_d ? usage_bytes(mk, ceil_div(M, 128), round_up(ceil_div(K, 128), 4), 4, 0, &acc)
                              : usage_bytes(mk, ceil_div(K, 128), round_up(M, 4), 4, 0, &acc));
        if (col)
            ok = ok && (two_d ? usage_bytes(mk, ceil_div(K, 128), round_up(ceil_div(M, 128), 4), 4, 0, &acc)
                              : usage_bytes(mk, ceil_div(M, 128), round_up(K, 4), 4, 0, &acc));
        break;
    case TX_QKIND_MXFP8:
        if (row) ok = ok && usage_bytes(mk, round_up(M, 128), round_up(ceil_div(K, 32), 4), 1, 0, &acc);
        if (col) ok = ok && usage_bytes(mk, round_up(ceil_div(M, 32), 4), round_up(K, 128), 1, 0, &acc);
        break;
    case TX_QKIND_NVFP4: {
        uint64_t rdata, cdata;
        ok = tx_mul_u64(M, ceil_div(K, 2), &rdata) && tx_mul_u64(K, ceil_div(M, 2), &cdata);
        if (row) ok = ok && usage_bytes(rdata, round_up(M, 128), round_up(ceil_div(K, 16), 4), 1, 4, &acc);
        if (col) ok = ok && usage_bytes(cdata, round_up(K, 128), round_up(ceil_div(M, 16), 4), 1, 4, &acc);
        break;
    }
    default:
        return tx_error(TEEXEC_ERR_INTERNAL, "quantized copy of unknown kind %d", (int)q->kind);
    }
    if (!ok) return tx_error(TEEXEC_ERR_LIMIT, "quantized copy size overflows");
    *out = acc;
    return NULL;
}

/* ---- the plan -------------------------------------------------------------- */

typedef struct gemm_node {
    int32_t node;
    int32_t x, w;       /* value indices (w: the first weight) */
    int32_t groups;     /* 1 for Linear */
    bool grouped;
    bool known;         /* M, N, K known */
    uint64_t m, n, k;
    bool dgrad, wgrad;
} gemm_node;

static const char *operand_attr[3] = {"quant_input", "quant_weight", "quant_grad_output"};

static bool is_gemm(const tx_ir_node *n, bool *grouped)
{
    if (strcmp(n->domain, TX_TE_DOMAIN) != 0) return false;
    *grouped = !strcmp(n->op_type, "GroupedLinear");
    return *grouped || !strcmp(n->op_type, "Linear");
}

static teexec_status *annotation(const tx_ir_node *n, int operand, const char **out)
{
    *out = NULL;
    const tx_ir_attr *a = tx_ir_attr_find(n, operand_attr[operand]);
    if (!a) return NULL;
    if (a->type != TX_IR_ATTR_STRING)
        return tx_status_with_node(tx_error(TEEXEC_ERR_BAD_MODEL, "node \"%s\" (%s): attribute %s must be a string",
                                            n->label, n->op_type, operand_attr[operand]),
                                   n->label);
    *out = a->s;
    return NULL;
}

static bool value_shape(const tx_plan_request *req, int32_t v, const tx_shape **s)
{
    if (v < 0 || !req->vals || (size_t)v >= req->n_vals || !req->vals[v].shape_known) return false;
    *s = &req->vals[v].shape;
    return true;
}

static teexec_status *describe_gemm(const tx_ir_graph *g, const tx_plan_request *req, const bool *rg,
                                    int32_t idx, bool grouped, gemm_node *out)
{
    const tx_ir_node *n = &g->nodes[idx];
    memset(out, 0, sizeof(*out));
    out->node = idx;
    out->grouped = grouped;
    out->groups = 1;
    size_t first_w = 1;
    if (grouped) {
        int64_t G;
        TX_TRY(tx_ir_attr_int(n, "num_groups", 0, &G));
        if (G < 1 || G > INT32_MAX)
            return tx_status_with_node(tx_error(TEEXEC_ERR_BAD_MODEL, "node \"%s\" (GroupedLinear): num_groups "
                                                "must be positive, got %lld", n->label, (long long)G),
                                       n->label);
        out->groups = (int32_t)G;
        first_w = 2;
    }
    if (n->n_inputs < first_w + (size_t)out->groups || n->inputs[0] < 0 || n->inputs[first_w] < 0)
        return tx_status_with_node(tx_error(TEEXEC_ERR_BAD_MODEL, "node \"%s\" (%s): missing input or weight",
                                            n->label, n->op_type),
                                   n->label);
    out->x = n->inputs[0];
    out->w = n->inputs[first_w];
    out->dgrad = req->training && rg[out->x];
    for (size_t i = 0; i < (size_t)out->groups; i++) {
        int32_t w = n->inputs[first_w + i];
        if (w >= 0 && rg[w]) out->wgrad = req->training;
    }
    const tx_shape *xs, *ws;
    if (value_shape(req, out->x, &xs) && value_shape(req, out->w, &ws) && xs->rank >= 1 && ws->rank == 2) {
        uint64_t numel;
        teexec_status *st = tx_shape_numel(xs, &numel);
        if (st) return tx_status_with_node(tx_status_prefix(st, "node \"%s\"", n->label), n->label);
        out->k = (uint64_t)xs->dims[xs->rank - 1];
        out->m = out->k ? numel / out->k : 0;
        out->n = (uint64_t)ws->dims[0];
        out->known = true;
    }
    return NULL;
}

/* Multiple each of M, N, K must be, quantized at all (0: no rule). */
static uint64_t quant_multiple(tx_recipe_kind k)
{
    switch (k) {
    case TX_RECIPE_FP8_DELAYED:
    case TX_RECIPE_FP8_CURRENT:
    case TX_RECIPE_FP8_BLOCK: return 16;
    case TX_RECIPE_MXFP8: return 32;
    case TX_RECIPE_NVFP4: return 16;
    default: return 0;
    }
}

static const char *recipe_label(tx_recipe_kind k)
{
    switch (k) {
    case TX_RECIPE_FP8_DELAYED: return "fp8-delayed";
    case TX_RECIPE_FP8_CURRENT: return "fp8-current";
    case TX_RECIPE_FP8_BLOCK: return "fp8-block";
    case TX_RECIPE_MXFP8: return "mxfp8";
    case TX_RECIPE_NVFP4: return "nvfp4";
    default: return "none";
    }
}

/* Does an annotation name the recipe's own format? */
static bool annotation_matches(const char *ann, tx_recipe_kind k)
{
    if (!strcmp(ann, "fp8-tensor")) return k == TX_RECIPE_FP8_DELAYED || k == TX_RECIPE_FP8_CURRENT;
    if (!strcmp(ann, "mxfp8")) return k == TX_RECIPE_MXFP8;
    if (!strcmp(ann, "nvfp4")) return k == TX_RECIPE_NVFP4;
    if (!strcmp(ann, "blocked")) return k == TX_RECIPE_FP8_BLOCK;
    return false;
}

static void fill_format(const tx_recipe *r, tx_qoperand op, tx_plan_quant *q)
{
    bool weight = op == TX_QOP_WEIGHT;
    bool fp8_grad = op == TX_QOP_GRAD_OUTPUT && r->hybrid;
    q->data_dtype = fp8_grad ? TEEXEC_DTYPE_FLOAT8E5M2 : TEEXEC_DTYPE_FLOAT8E4M3FN;
    switch (r->kind) {
    case TX_RECIPE_FP8_DELAYED:
    case TX_RECIPE_FP8_CURRENT:
        q->kind = TX_QKIND_FP8_TENSOR;
        q->block_rows = q->block_cols = 1;
        break;
    case TX_RECIPE_FP8_BLOCK:
        q->kind = TX_QKIND_FP8_BLOCK;
        q->block_rows = weight ? 128 : 1;
        q->block_cols = 128;
        break;
    case TX_RECIPE_MXFP8:
        q->kind = TX_QKIND_MXFP8;
        q->block_rows = weight && r->mxfp8_2d_weights ? 32 : 1;
        q->block_cols = 32;
        break;
    case TX_RECIPE_NVFP4:
        q->kind = TX_QKIND_NVFP4;
        q->data_dtype = TEEXEC_DTYPE_FLOAT4E2M1;
        q->block_rows = weight && r->nvfp4_2d_weights ? 16 : 1;
        q->block_cols = 16;
        break;
    default: break;
    }
}

static bool native_gemm(const tx_plan_request *req, tx_qkind kind, const gemm_node *gn)
{
    const tx_device_caps *d = &req->device;
    switch (kind) {
    case TX_QKIND_FP8_TENSOR: return d->fp8_gemm;
    case TX_QKIND_FP8_BLOCK:
        return d->fp8_block_gemm && gn->known && gn->m % 128 == 0 && gn->n % 128 == 0 && gn->k % 128 == 0;
    case TX_QKIND_MXFP8:
    case TX_QKIND_NVFP4: return d->mx_gemm;
    }
    return false;
}

/* Hand-off: the node whose kernel writes this operand already quantized. */
static int32_t find_producer(const tx_ir_graph *g, const tx_plan_schedule *sc, const gemm_node *gn,
                             tx_qoperand op)
{
    if (!sc || op == TX_QOP_WEIGHT) return -1;
    const tx_ir_node *n = &g->nodes[gn->node];
    if (op == TX_QOP_INPUT) {
        int32_t m = g->values[gn->x].producer;
        if (m < 0 || sc->fwd_step[m] < 0) return -1;
        tx_fusion_id f = sc->steps[sc->fwd_step[m]].fusion;
        if (f == TX_FUSION_FWD_NORM_QUANTIZE || f == TX_FUSION_FWD_ACT_QUANTIZE) return m;
        if ((f == TX_FUSION_GROUPED_MLP || f == TX_FUSION_DENSE_MLP) &&
            sc->fwd_step[m] == sc->fwd_step[gn->node])
            return m;
        return -1;
    }
    if (n->n_outputs < 1 || n->outputs[0] < 0) return -1;
    const tx_ir_value *y = &g->values[n->outputs[0]];
    if (y->n_consumers != 1 || (y->flags & TX_IR_VALUE_GRAPH_OUTPUT)) return -1;
    int32_t c = y->consumers[0].node;
    if (c < 0 || sc->bwd_step[c] < 0) return -1;
    tx_fusion_id f = sc->steps[sc->bwd_step[c]].fusion;
    if (f == TX_FUSION_BWD_ACT_BIAS || f == TX_FUSION_BWD_BIAS_QUANTIZE) return c;
    if ((f == TX_FUSION_GROUPED_MLP || f == TX_FUSION_DENSE_MLP) && sc->bwd_step[c] == sc->bwd_step[gn->node])
        return c;
    return -1;
}

static unsigned usage_of(const gemm_node *gn, tx_qoperand op)
{
    switch (op) {
    case TX_QOP_INPUT: return TX_QUSAGE_ROWWISE | (gn->wgrad ? TX_QUSAGE_COLUMNWISE : 0u);
    case TX_QOP_WEIGHT: return TX_QUSAGE_ROWWISE | (gn->dgrad ? TX_QUSAGE_COLUMNWISE : 0u);
    case TX_QOP_GRAD_OUTPUT:
        return (gn->dgrad ? TX_QUSAGE_ROWWISE : 0u) | (gn->wgrad ? TX_QUSAGE_COLUMNWISE : 0u);
    }
    return 0;
}

/* Why a usage an operand could have is not planned. */
static void usage_why(const tx_plan_request *req, const gemm_node *gn, tx_qoperand op, why_buf *w)
{
    if (!req->training) {
        if (op == TX_QOP_GRAD_OUTPUT) why_add(w, "not used: inference runs no backward");
        else why_add(w, "rowwise only: inference");
        return;
    }
    if (op == TX_QOP_INPUT && !gn->wgrad) why_add(w, "columnwise dropped: no weight gradient (frozen weight)");
    if (op == TX_QOP_WEIGHT && !gn->dgrad)
        why_add(w, "columnwise dropped: the input needs no gradient (no dgrad)");
    if (op == TX_QOP_GRAD_OUTPUT) {
        if (!gn->dgrad && !gn->wgrad) why_add(w, "not used: this node's backward does not run");
        else if (!gn->dgrad) why_add(w, "rowwise dropped: no dgrad");
        else if (!gn->wgrad) why_add(w, "columnwise dropped: no wgrad");
    }
}

typedef struct plan_ctx {
    const tx_ir_graph *g;
    const tx_plan_request *req;
    const tx_plan_schedule *sc; /* NULL when groups are not planned yet */
    int32_t next_slot;
} plan_ctx;

static teexec_status *plan_operand(plan_ctx *cx, const gemm_node *gn, bool first_or_last,
                                   tx_qoperand op, bool *emit, tx_plan_quant *q)
{
    const tx_ir_node *n = &cx->g->nodes[gn->node];
    const tx_recipe *r = &cx->req->recipe;
    memset(q, 0, sizeof(*q));
    q->node = gn->node;
    q->operand = op;
    q->producer = -1;
    q->delayed_slot = -1;
    q->data_dtype = r->compute_dtype;
    q->usage = usage_of(gn, op);
    why_buf w = {0};
    const char *ann;
    TX_TRY(annotation(n, (int)op, &ann));
    *emit = r->kind != TX_RECIPE_NONE || ann;

    bool quant = r->kind != TX_RECIPE_NONE;
    if (ann) {
        if (!strcmp(ann, "none")) {
            why_add(&w, "model annotation %s=none keeps it in high precision", operand_attr[op]);
            quant = false;
        } else if (r->kind == TX_RECIPE_NONE) {
            why_add(&w, "model annotation %s=%s (Q/DQ pair in the file) not applied: recipe none",
                    operand_attr[op], ann);
        } else if (annotation_matches(ann, r->kind)) {
            why_add(&w, "model annotation %s=%s (Q/DQ pair in the file) agrees with the recipe",
                    operand_attr[op], ann);
        } else {
            why_add(&w, "model annotation %s=%s (Q/DQ pair in the file); the recipe's %s format is used",
                    operand_attr[op], ann, recipe_label(r->kind));
        }
    }
    if (quant && first_or_last) {
        why_add(&w, "first/last GEMM kept in high precision (recipe option keep_first_last_hp)");
        quant = false;
    }
    uint64_t mult = quant_multiple(r->kind);
    if (quant && mult) {
        if (!gn->known) {
            why_add(&w, "shape unknown when planning: divisibility by %llu is checked at run time",
                    (unsigned long long)mult);
        } else if (gn->k % mult || gn->n % mult || gn->m % mult) {
            why_add(&w, "%s needs M, N, K multiples of %llu; this GEMM has M=%llu N=%llu K=%llu",
                    recipe_label(r->kind), (unsigned long long)mult, (unsigned long long)gn->m,
                    (unsigned long long)gn->n, (unsigned long long)gn->k);
            quant = false;
        } else if (gn->grouped) {
            why_add(&w, "each group's rows must be multiples of %llu (checked at run time)",
                    (unsigned long long)(r->kind == TX_RECIPE_NVFP4 ? 128 : mult));
        }
    }
    /* Usage reasons only where they say something: a quantized operand,
     * or one no GEMM reads. */
    if (quant || q->usage == 0) usage_why(cx->req, gn, op, &w);
    if (q->usage == 0) quant = false; /* nothing to quantize */

    if (quant) {
        q->quantized = true;
        fill_format(r, op, q);
        q->native = native_gemm(cx->req, q->kind, gn);
        q->scale_layout =
            (q->kind == TX_QKIND_MXFP8 || q->kind == TX_QKIND_NVFP4) && q->native ? TX_SCALE_SWIZZLED
                                                                                 : TX_SCALE_COMPACT;
        q->producer = find_producer(cx->g, cx->sc, gn, op);
        if (r->kind == TX_RECIPE_FP8_DELAYED) {
            q->delayed_slot = cx->next_slot;
            cx->next_slot += gn->groups;
        }
        if (!q->native && cx->req->device.sm > 0)
            why_add(&w, "no native %s GEMM on %s%s: exact emulation (dequantized BF16 operands, FP32 "
                    "accumulate)", recipe_label(r->kind), cx->req->device.name,
                    q->kind == TX_QKIND_FP8_BLOCK && cx->req->device.fp8_block_gemm
                        ? " for M, N, K not multiples of 128" : "");
        if (q->kind == TX_QKIND_NVFP4 && op != TX_QOP_WEIGHT && (q->usage & TX_QUSAGE_COLUMNWISE) &&
            r->nvfp4_rht)
            why_add(&w, "columnwise (wgrad) copy random-Hadamard transformed");
        if (q->kind == TX_QKIND_NVFP4 && op == TX_QOP_GRAD_OUTPUT && r->nvfp4_stochastic)
            why_add(&w, "stochastic rounding");
    }
    if (w.oom) {
        free(w.s);
        return tx_oom();
    }
    q->why = w.s;
    return NULL;
}

teexec_status *tx_plan_quantization(const tx_ir_graph *g, const tx_plan_request *req, tx_fuser_plan *p)
{
    tx_plan_quant_clear(p);
    if (g->n_nodes > INT32_MAX) return tx_error(TEEXEC_ERR_LIMIT, "quantization plan: too many nodes");
    size_t n_gemm = 0;
    bool grouped;
    for (size_t i = 0; i < g->n_nodes; i++)
        if (is_gemm(&g->nodes[i], &grouped)) n_gemm++;
    if (!n_gemm) return NULL;

    bool *rg = NULL;
    TX_TRY(tx_plan_value_grads(g, req, &rg));
    tx_plan_schedule sched, *sc = NULL;
    teexec_status *st = NULL;
    if (p->n_groups > 0) {
        st = tx_plan_schedule_build(g, p, req->training, &sched);
        if (st) {
            free(rg);
            return st;
        }
        sc = &sched;
    }
    tx_plan_quant *out = calloc(n_gemm * 3, sizeof(*out));
    if (!out) st = tx_oom();
    size_t n_out = 0, gi = 0;
    plan_ctx cx = {g, req, sc, 0};
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        if (!is_gemm(&g->nodes[i], &grouped)) continue;
        gemm_node gn;
        st = describe_gemm(g, req, rg, (int32_t)i, grouped, &gn);
        if (st) break;
        bool edge = req->recipe.keep_first_last_hp && (gi == 0 || gi == n_gemm - 1);
        gi++;
        for (int op = 0; op < 3 && !st; op++) {
            bool emit;
            st = plan_operand(&cx, &gn, edge, (tx_qoperand)op, &emit, &out[n_out]);
            if (st) break;
            if (emit) n_out++;
            else free(out[n_out].why);
        }
    }
    free(rg);
    if (sc) tx_plan_schedule_free(sc);
    if (st) {
        for (size_t i = 0; i < n_out; i++) free(out[i].why);
        free(out);
        return st;
    }
    if (!n_out) {
        free(out);
        return NULL;
    }
    p->quant = out;
    p->n_quant = n_out;
    return NULL;
}
