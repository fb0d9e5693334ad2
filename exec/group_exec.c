/*
 * group_exec.c - one CHAIN fuser group on the CPU: forward and backward
 * layouts, quantization emulation, hand-off, saved contexts (group_exec.h).
 */
#include "exec/group_exec.h"

#include "exec/cpu_fused.h"
#include "exec/quant_operand.h"
#include "kernels/cpu/te_args.h"
#include "kernels/cpu/te_common.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define NX TX_TE_MAX_EXTRA

struct tx_group_run {
    const tx_group_desc *g;
    const tx_group_config *cfg;
    int32_t n, f;
    tx_te_tinfo *vinfo;        /* n + 1: main values */
    tx_te_tinfo *xinfo;        /* n: extra output 0 */
    tx_te_tinfo *auxinfo;      /* n * nx */
    tx_tensor *val;            /* n + 1; val[0] borrows the input */
    tx_qtensor *val_q;         /* hand-off into op i's input */
    bool *has_val_q;
    tx_tensor *xout;           /* n: extra output 0 */
    tx_tensor *aux;            /* n * nx */
    tx_tensor **own;           /* saved copies (dequantized operands) */
    size_t n_own, cap_own;
    const tx_tensor **saved;   /* n * cap */
    int *n_saved;
    int saved_cap;
    int32_t *joint_first;      /* per op: first op of its joint kernel, -1 */
    tx_fused_mlp_ctx *mlp;     /* per op (the joint kernel's first op) */
    bool *need_dx, *need_dparams;
    unsigned *needs;
    tx_tensor *dval;           /* n + 1 */
    tx_qtensor *dval_q;        /* hand-off of the grad of val[i] */
    bool *has_dval_q;
    tx_tensor *dparam;         /* n * pcap */
    int pcap;
    tx_tensor *dxin;           /* n * nx: grads of external extra inputs */
    int nx;                    /* per-op slots of aux, auxinfo and dxin: the group's most
                                * extra inputs or aux tensors of one op (at most NX) */
    tx_tensor *chan_grad;      /* n: grad of extra output 0 from channel consumers */
    void *block;               /* every per-op array above is a piece of it */
};

/* ---- small helpers ---------------------------------------------------------- */

static bool has(const tx_tensor *t) { return t && t->data != NULL; }

static const tx_group_op *op_at(const tx_group_run *r, int32_t i) { return &r->g->ops[i]; }

static teexec_status *at_op(teexec_status *st, const tx_group_run *r, int32_t i, const char *what)
{
    if (!st) return NULL;
    const tx_group_op *o = op_at(r, i);
    st = tx_status_prefix(st, "group op %d (%s %s), %s", (int)i, tx_te_name(o->op),
                          o->name ? o->name : "", what);
    /* name the graph node, as a node-by-node run does */
    if (o->name && !teexec_status_node(st)) st = tx_status_with_node(st, o->name);
    return st;
}

static teexec_status *alloc_like_info(tx_tensor *t, const tx_te_tinfo *ti)
{
    if (has(t)) return NULL;
    return tx_tensor_alloc(t, ti->dtype, ti->shape.rank, ti->shape.dims);
}

static teexec_status *alloc_like(tx_tensor *t, const tx_tensor *like)
{
    if (has(t)) return NULL;
    return tx_tensor_alloc(t, like->dtype, like->rank, like->dims);
}

static tx_te_tinfo info_of(const tx_tensor *t)
{
    tx_te_tinfo ti;
    ti.dtype = t->dtype;
    ti.shape = tx_shape_of(t);
    return ti;
}

static teexec_status *own_new(tx_group_run *r, tx_tensor **out)
{
    if (r->n_own == r->cap_own) {
        size_t cap = r->cap_own ? 2 * r->cap_own : 16;
        tx_tensor **p = realloc(r->own, cap * sizeof *p);
        if (!p) return tx_oom();
        r->own = p;
        r->cap_own = cap;
    }
    tx_tensor *t = calloc(1, sizeof *t);
    if (!t) return tx_oom();
    r->own[r->n_own++] = t;
    *out = t;
    return NULL;
}

/* dst = dst + src elementwise through float, one rounding to dst's dtype. */
static teexec_status *add_into(tx_tensor *dst, const tx_tensor *src)
{
    if (dst->numel != src->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "grad sum: shapes differ");
    float *a = NULL, *b = NULL;
    teexec_status *st = tx_te_load_f32(dst, &a);
    if (!st) st = tx_te_load_f32(src, &b);
    if (!st) {
        for (uint64_t i = 0; i < dst->numel; i++) a[i] = a[i] + b[i];
        tx_te_store_f32(dst, a);
    }
    free(a);
    free(b);
    return st;
}

/* The tensor feeding extra input `s` of op i (external or a channel). */
static const tx_tensor *extra_in(const tx_group_run *r, int32_t i, int s)
{
    const tx_group_op *o = op_at(r, i);
    int32_t from = o->channel_from[s];
    if (from >= 0) return has(&r->xout[from]) ? &r->xout[from] : NULL;
    return s < o->n_extra_inputs ? o->extra_inputs[s] : NULL;
}

int32_t tx_group_first_op_requiring_backward(const tx_group_desc *g)
{
    if (g->input_needs_grad) return 0;
    for (int32_t i = 0; i < g->n_ops; i++)
        if (g->ops[i].params_need_grad && g->ops[i].n_params > 0) return i;
    return g->n_ops;
}

/* ---- layouts ---------------------------------------------------------------- */

static bool is_norm(tx_te_op_id op) { return tx_te_op_is(op, TX_TE_CLASS_NORM); }
static bool is_act(tx_te_op_id op) { return tx_te_op_is(op, TX_TE_CLASS_ACTIVATION); }

/* Does fusion k's pattern fit the ops it covers? NULL or why not. */
static const char *pattern_mismatch(const tx_group_desc *g, const tx_plan_kernel *k)
{
    const tx_group_op *o = g->ops + k->first;
    int32_t c = k->count;
#define OP(j) (o[(j)].op)
    switch (k->fusion) {
    case TX_FUSION_NONE: return c == 1 ? NULL : "an unfused kernel covers exactly one op";
    case TX_FUSION_GROUPED_MLP:
        return c == 3 && OP(0) == TX_TE_GROUPED_LINEAR && OP(2) == TX_TE_GROUPED_LINEAR &&
                       (OP(1) == TX_TE_SCALED_SWIGLU || OP(1) == TX_TE_SCALED_SRELU)
                   ? NULL : "pattern is GroupedLinear, ScaledSwiGLU|ScaledSReLU, GroupedLinear";
    case TX_FUSION_DENSE_MLP: {
        bool bias = c == 4;
        if ((c != 3 && c != 4) || OP(0) != TX_TE_LINEAR || OP(c - 1) != TX_TE_LINEAR ||
            (bias && OP(1) != TX_TE_BIAS) || !is_act(OP(c - 2)) ||
            tx_te_op_is(OP(c - 2), TX_TE_CLASS_ROW_SCALED) ||
            !tx_fused_act_supported(OP(c - 2)))
            return "pattern is Linear, [Bias,] activation, Linear";
        return NULL;
    }
    case TX_FUSION_FWD_NORM_QUANTIZE:
        return c == 1 && is_norm(OP(0)) && k->first + 1 < g->n_ops && OP(1) == TX_TE_LINEAR
                   ? NULL : "pattern is LayerNorm|RMSNorm followed by a Linear";
    case TX_FUSION_FWD_ACT_QUANTIZE:
        return c == 1 && is_act(OP(0)) && k->first + 1 < g->n_ops && OP(1) == TX_TE_LINEAR
                   ? NULL : "pattern is an activation followed by a Linear";
    case TX_FUSION_FWD_LINEAR_BIAS_ACT:
        return (c == 2 || c == 3) && OP(0) == TX_TE_LINEAR && OP(1) == TX_TE_BIAS &&
                       (c == 2 || OP(2) == TX_TE_GELU || OP(2) == TX_TE_RELU)
                   ? NULL : "pattern is Linear, Bias[, GELU|ReLU]";
    case TX_FUSION_FWD_LINEAR_BIAS_ADD:
        return (c == 2 || c == 3) && OP(0) == TX_TE_LINEAR && OP(c - 1) == TX_TE_ADD_EXTRA_INPUT &&
                       (c == 2 || OP(1) == TX_TE_BIAS)
                   ? NULL : "pattern is Linear[, Bias], AddExtraInput";
    case TX_FUSION_FWD_LINEAR_SCALE_ADD:
        return c == 3 && OP(0) == TX_TE_LINEAR && OP(1) == TX_TE_CONSTANT_SCALE &&
                       OP(2) == TX_TE_ADD_EXTRA_INPUT
                   ? NULL : "pattern is Linear, ConstantScale, AddExtraInput";
    case TX_FUSION_BWD_LINEAR_ADD:
        return c == 2 && OP(0) == TX_TE_MAKE_EXTRA_OUTPUT && OP(1) == TX_TE_LINEAR
                   ? NULL : "pattern is MakeExtraOutput, Linear";
    case TX_FUSION_BWD_LINEAR_SCALE:
        return c == 2 && OP(0) == TX_TE_LINEAR && OP(1) == TX_TE_CONSTANT_SCALE
                   ? NULL : "pattern is Linear, ConstantScale";
    case TX_FUSION_BWD_ACT_BIAS:
        return c == 2 && OP(0) == TX_TE_BIAS && tx_te_op_is_elementwise_act(OP(1)) &&
                       tx_fused_act_supported(OP(1))
                   ? NULL : "pattern is Bias, a plain activation";
    case TX_FUSION_BWD_ADD_NORM:
        return c == 2 && OP(0) == TX_TE_MAKE_EXTRA_OUTPUT && is_norm(OP(1))
                   ? NULL : "pattern is MakeExtraOutput, LayerNorm|RMSNorm";
    case TX_FUSION_BWD_BIAS_QUANTIZE:
        return c == 1 && OP(0) == TX_TE_BIAS ? NULL : "pattern is Bias";
    case TX_FUSION_BWD_DACT_DBIAS:
        return c == 2 && OP(0) == TX_TE_BIAS && tx_te_op_is_elementwise_act(OP(1)) &&
                       tx_fused_act_supported(OP(1))
                   ? NULL : "pattern is Bias, a plain activation";
    case TX_FUSION_BWD_LINEAR_DGELU_BIAS:
        return "a cuBLASLt GEMM epilogue: the CPU has no kernel for it (the planner declines it "
               "on the CPU)";
    default: return "unknown fusion";
    }
#undef OP
}

static bool pass_ok(tx_fusion_id f, bool forward)
{
    switch (f) {
    case TX_FUSION_NONE:
    case TX_FUSION_GROUPED_MLP:
    case TX_FUSION_DENSE_MLP: return true;
    case TX_FUSION_FWD_NORM_QUANTIZE:
    case TX_FUSION_FWD_LINEAR_BIAS_ACT:
    case TX_FUSION_FWD_LINEAR_BIAS_ADD:
    case TX_FUSION_FWD_LINEAR_SCALE_ADD:
    case TX_FUSION_FWD_ACT_QUANTIZE: return forward;
    default: return !forward;
    }
}

static teexec_status *check_layout(const tx_group_desc *g, const tx_plan_kernel *k, int32_t n,
                                   int32_t from, bool forward)
{
    int32_t next = from;
    for (int32_t i = 0; i < n; i++) {
        if (k[i].first != next || k[i].count < 1 || k[i].first + k[i].count > g->n_ops)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "layout kernel %d covers ops [%d, %d): expected consecutive kernels "
                            "from op %d within the group's %d ops", (int)i, (int)k[i].first,
                            (int)(k[i].first + k[i].count), (int)next, (int)g->n_ops);
        if (!pass_ok(k[i].fusion, forward))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "layout kernel %d: fusion %d belongs to the %s pass", (int)i,
                            (int)k[i].fusion, forward ? "backward" : "forward");
        const char *why = pattern_mismatch(g, &k[i]);
        if (why)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "layout kernel %d at op %d: %s", (int)i,
                            (int)k[i].first, why);
        next += k[i].count;
    }
    if (next != g->n_ops)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "layout stops at op %d of %d", (int)next,
                        (int)g->n_ops);
    return NULL;
}

teexec_status *tx_group_check_layout(const tx_group_desc *g, const tx_plan_kernel *k, int32_t n,
                                  int32_t from)
{
    teexec_status *st = check_layout(g, k, n, from, true);
    if (!st) return NULL;
    teexec_status *st2 = check_layout(g, k, n, from, false);
    if (!st2) {
        teexec_status_destroy(st);
        return NULL;
    }
    teexec_status_destroy(st2);
    return st;
}

/* ---- quantizer configs --------------------------------------------------------- */

static tx_fused_q quantizer(const tx_group_run *r, int32_t i, tx_qoperand operand)
{
    tx_fused_q fq;
    memset(&fq, 0, sizeof fq);
    const tx_group_config *c = r->cfg;
    bool train = c->training;
    const tx_plan_quant *q = tx_quant_operand_config(
        c->quant, c->n_quant, &c->recipe, op_at(r, i)->node, operand, train && r->need_dx[i],
        train && r->need_dparams[i], c->seed, c->step, &fq.cfg);
    if (!q) return fq;
    fq.on = true;
    if (c->recipe.kind == TX_RECIPE_FP8_DELAYED && q->kind == TX_QKIND_FP8_TENSOR && c->delayed &&
        q->delayed_slot >= 0) {
        fq.delayed = c->delayed;
        fq.slot = q->delayed_slot;
    }
    return fq;
}

/* A handed-off tensor must be in exactly the consumer's format. */
static teexec_status *check_edge(const tx_qtensor *q, const tx_fused_q *fq, const char *edge)
{
    if (!fq->on)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: a quantized tensor was handed to an operand that stays in high "
                        "precision", edge);
    if (q->kind != fq->cfg.kind || q->fmt != fq->cfg.fmt || (q->usage & fq->cfg.usage) != fq->cfg.usage)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: handed-off tensor is %s (kind %d, usage %u) but the consumer reads "
                        "%s (kind %d, usage %u)", edge, teexec_dtype_name(q->fmt), (int)q->kind,
                        q->usage, teexec_dtype_name(fq->cfg.fmt), (int)fq->cfg.kind,
                        fq->cfg.usage);
    return NULL;
}

/* ---- run set-up ----------------------------------------------------------------- */

/* Frees what a tensor of the run owns; the arrays holding them are freed
 * next, so tensors that own nothing (views into the arena, empty slots:
 * most of them, every run) are not touched. */
static void drop(tx_tensor *t)
{
    if (t->owns_data) tx_tensor_release(t);
}

void tx_group_run_free(tx_group_run *r)
{
    if (!r) return;
    int32_t n = r->n;
    for (int32_t i = 1; r->val && i <= n; i++) drop(&r->val[i]);
    for (int32_t i = 0; r->dval && i <= n; i++) drop(&r->dval[i]);
    for (int32_t i = 0; i <= n; i++) {
        if (r->has_val_q && r->has_val_q[i]) tx_qtensor_free(&r->val_q[i]);
        if (r->has_dval_q && r->has_dval_q[i]) tx_qtensor_free(&r->dval_q[i]);
    }
    for (int32_t i = 0; i < n; i++) {
        if (r->xout) drop(&r->xout[i]);
        if (r->chan_grad) drop(&r->chan_grad[i]);
        for (int s = 0; s < r->nx; s++) {
            if (r->aux) drop(&r->aux[i * r->nx + s]);
            if (r->dxin) drop(&r->dxin[i * r->nx + s]);
        }
        for (int p = 0; r->dparam && p < r->pcap; p++) drop(&r->dparam[i * r->pcap + p]);
        if (r->mlp) tx_fused_mlp_free(&r->mlp[i]);
    }
    for (size_t i = 0; i < r->n_own; i++) {
        tx_tensor_release(r->own[i]);
        free(r->own[i]);
    }
    free(r->own);
    free(r->block);
    free(r);
}

/* Shape/type inference over the chain: vinfo, xinfo, auxinfo. */
static teexec_status *infer_chain(tx_group_run *r)
{
    for (int32_t i = 0; i < r->n; i++) {
        const tx_group_op *o = op_at(r, i);
        const tx_te_op_schema *s = tx_te_schema(o->op);
        if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "group op %d: unknown te.ops id", (int)i);
        /* on the stack: this runs for every op of every run */
        tx_te_tinfo ext[NX], par_store[64];
        const tx_te_tinfo *extp[NX] = {0}, *parp[64];
        if (o->n_params > 64 || o->n_extra_inputs > NX)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "group op %d: too many parameters", (int)i);
        for (int e = 0; e < o->n_extra_inputs; e++) {
            int32_t from = o->channel_from[e];
            if (from >= i) {
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "group op %d: extra input %d comes from a later op %d", (int)i, e,
                                (int)from);
            }
            if (from >= 0) {
                ext[e] = r->xinfo[from];
                extp[e] = &ext[e];
            } else if (o->extra_inputs && o->extra_inputs[e]) {
                ext[e] = info_of(o->extra_inputs[e]);
                extp[e] = &ext[e];
            }
        }
        for (int p = 0; p < o->n_params; p++) {
            par_store[p] = info_of(o->params[p]);
            parp[p] = &par_store[p];
        }
        tx_te_infer_in in = {o->attrs, &r->vinfo[i], extp, o->n_extra_inputs, parp, o->n_params};
        tx_te_infer_out out;
        memset(&out, 0, sizeof out);
        teexec_status *st = tx_te_infer(s, &in, &out);
        if (st) return at_op(st, r, i, "shape inference");
        r->vinfo[i + 1] = out.output;
        r->xinfo[i] = out.extra_outputs[0];
        for (int a = 0; a < r->nx; a++) r->auxinfo[i * r->nx + a] = out.aux[a];
    }
    return NULL;
}

/* Pieces of the run's one block, each aligned for any type: the bytes of
 * count elements of `size` added to *total (false on overflow), and the
 * next piece taken from *at. */
#define PIECE_ALIGN _Alignof(max_align_t)
static bool piece_add(size_t *total, size_t count, size_t size)
{
    size_t bytes;
    return !__builtin_mul_overflow(count, size, &bytes) &&
           !__builtin_add_overflow(*total, (bytes + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN,
                                   total);
}

static void *piece_take(char **at, size_t count, size_t size)
{
    void *p = *at;
    *at += (count * size + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN;
    return p;
}

static teexec_status *run_new(const tx_group_desc *g, const tx_group_config *cfg, tx_group_run **out)
{
    *out = NULL;
    tx_group_run *r = calloc(1, sizeof *r);
    if (!r) return tx_oom();
    int32_t n = g->n_ops;
    r->g = g;
    r->cfg = cfg;
    r->n = n;
    r->f = !cfg->training           ? n
           : g->has_first_backward ? (g->first_backward < 0 ? 0 : g->first_backward > n ? n : g->first_backward)
                                   : tx_group_first_op_requiring_backward(g);
    int pcap = 1, scap = 1;
    for (int32_t i = 0; i < n; i++) {
        if (g->ops[i].n_params > pcap) pcap = g->ops[i].n_params;
        if (TX_TE_SAVED_CAP(g->ops[i].n_params) > scap) scap = TX_TE_SAVED_CAP(g->ops[i].n_params);
    }
    r->pcap = pcap;
    r->saved_cap = scap;
    /* the per-op aux / dxin slots the group's ops can use (zeroed once per
     * run: NX of them for every op would be most of the block) */
    int nx = 1;
    for (int32_t i = 0; i < n; i++) {
        const tx_te_op_schema *os = tx_te_schema(g->ops[i].op);
        if (g->ops[i].n_extra_inputs > nx) nx = g->ops[i].n_extra_inputs;
        if (os && os->n_extra_inputs > nx) nx = os->n_extra_inputs;
        if (os && os->n_aux > nx) nx = os->n_aux;
    }
    r->nx = nx > NX ? NX : nx;
    const size_t rnx = (size_t)r->nx;
    size_t n1 = (size_t)n + 1, nn = n ? (size_t)n : 1;
    /* One zeroed allocation for every per-op array: a group runs once per
     * call, and twenty-odd small mallocs and frees per group were a
     * measurable share of a small model's run. */
#define RUN_ARRAYS(X)                                                                      \
    X(vinfo, n1) X(xinfo, nn) X(auxinfo, nn * rnx) X(val, n1) X(val_q, n1) X(has_val_q, n1) \
    X(xout, nn) X(aux, nn * rnx) X(saved, nn * (size_t)scap) X(n_saved, nn)                 \
    X(joint_first, nn) X(mlp, nn) X(need_dx, nn) X(need_dparams, nn) X(needs, nn)          \
    X(dval, n1) X(dval_q, n1) X(has_dval_q, n1) X(dparam, nn * (size_t)pcap)               \
    X(dxin, nn * rnx) X(chan_grad, nn)
    size_t total = 0;
    bool fits = true;
#define MEASURE(field, count) fits = fits && piece_add(&total, (count), sizeof *r->field);
    RUN_ARRAYS(MEASURE)
#undef MEASURE
    r->block = fits ? calloc(1, total ? total : 1) : NULL;
    if (!r->block) {
        tx_group_run_free(r);
        return tx_oom();
    }
    char *at = r->block;
#define CARVE(field, count) r->field = (void *)piece_take(&at, (count), sizeof *r->field);
    RUN_ARRAYS(CARVE)
#undef CARVE
#undef RUN_ARRAYS
    for (int32_t i = 0; i < n; i++) {
        r->joint_first[i] = -1;
        bool run_bwd = cfg->training && i >= r->f;
        r->need_dx[i] = cfg->training && (i > r->f || (i == 0 && g->input_needs_grad));
        r->need_dparams[i] = run_bwd && g->ops[i].params_need_grad && g->ops[i].n_params > 0;
        r->needs[i] = (r->need_dx[i] ? TX_TE_FOR_DX : 0u) |
                      (r->need_dparams[i] ? TX_TE_FOR_DPARAMS : 0u) |
                      (run_bwd ? TX_TE_FOR_DEXTRA : 0u);
    }
    *out = r;
    return NULL;
}

/* The forward args of op i as its own kernel sees them. The arrays live in
 * the caller's storage. */
typedef struct fwd_store {
    tx_te_fwd_args a;
    const tx_tensor *ext[NX];
    tx_tensor *xo[NX];
    tx_tensor *aux[NX];
} fwd_store;

static teexec_status *fwd_args(tx_group_run *r, int32_t i, fwd_store *fs)
{
    const tx_group_op *o = op_at(r, i);
    const tx_te_op_schema *s = tx_te_schema(o->op);
    memset(fs, 0, sizeof *fs);
    for (int e = 0; e < o->n_extra_inputs; e++) fs->ext[e] = extra_in(r, i, e);
    TX_TRY(alloc_like_info(&r->val[i + 1], &r->vinfo[i + 1]));
    for (int x = 0; x < s->n_extra_outputs && x < 1; x++) {
        TX_TRY(alloc_like_info(&r->xout[i], &r->xinfo[i]));
        fs->xo[x] = &r->xout[i];
    }
    bool train = r->cfg->training;
    for (int x = 0; train && x < s->n_aux && x < r->nx; x++) {
        TX_TRY(alloc_like_info(&r->aux[i * r->nx + x], &r->auxinfo[i * r->nx + x]));
        fs->aux[x] = &r->aux[i * r->nx + x];
    }
    tx_te_fwd_args *a = &fs->a;
    a->op = o->op;
    a->attrs = o->attrs;
    a->input = &r->val[i];
    a->extra_inputs = fs->ext;
    a->n_extra_inputs = o->n_extra_inputs;
    a->params = o->params;
    a->n_params = o->n_params;
    a->output = &r->val[i + 1];
    a->extra_outputs = fs->xo;
    a->n_extra_outputs = s->n_extra_outputs;
    a->aux = train ? fs->aux : NULL;
    a->n_aux = train ? s->n_aux : 0;
    a->training = train;
    a->rng_offset = o->has_rng_offset ? o->rng_offset
                                      : r->cfg->step * (uint64_t)(r->n + 1) + (uint64_t)i;
    return NULL;
}

static teexec_status *setup_ctx(tx_group_run *r, int32_t i, const tx_te_fwd_args *a)
{
    if (!r->cfg->training || i < r->f) {
        r->n_saved[i] = 0;
        return NULL;
    }
    return tx_te_setup_context(a, r->needs[i], &r->saved[(size_t)i * (size_t)r->saved_cap],
                               r->saved_cap, &r->n_saved[i]);
}

/* ---- forward kernels ---------------------------------------------------------- */

/* Linear / GroupedLinear operands: rowwise x and weights for the GEMM (in
 * *xg, wg[]: float copies when quantized, else the originals), and the
 * saved context (columnwise-dequantized when quantized). */
typedef struct lin_ops {
    const tx_tensor *x;
    tx_tensor xq;                  /* owned rowwise dequant of x */
    const tx_tensor **w;           /* n_params: weights rowwise (dequant) or originals, biases */
    tx_tensor *wq;                 /* owned rowwise dequants */
    int n;
} lin_ops;

static void lin_ops_free(lin_ops *l)
{
    tx_tensor_release(&l->xq);
    for (int p = 0; l->wq && p < l->n; p++) tx_tensor_release(&l->wq[p]);
    free(l->wq);
    free(l->w);
    memset(l, 0, sizeof *l);
}

static teexec_status *lin_prepare(tx_group_run *r, int32_t i, lin_ops *l)
{
    const tx_group_op *o = op_at(r, i);
    memset(l, 0, sizeof *l);
    int nw = o->op == TX_TE_GROUPED_LINEAR ? (int)o->attrs[TX_TE_A_GL_NUM_GROUPS].i : 1;
    if (nw < 1 || nw > o->n_params)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "group op %d: bad weight count", (int)i);
    l->n = o->n_params;
    l->w = calloc((size_t)l->n, sizeof *l->w);
    l->wq = calloc((size_t)l->n, sizeof *l->wq);
    if (!l->w || !l->wq) return tx_oom();
    const tx_tensor *x = &r->val[i];
    tx_fused_q qx = quantizer(r, i, TX_QOP_INPUT), qw = quantizer(r, i, TX_QOP_WEIGHT);
    bool train = r->cfg->training && i >= r->f;
    /* saved view for setup_context: input and params replaced */
    const tx_tensor *sx = x;
    const tx_tensor **sp = calloc((size_t)l->n, sizeof *sp);
    if (!sp) return tx_oom();
    teexec_status *st = NULL;
    l->x = x;
    if (qx.on) {
        tx_qtensor q;
        bool handed = r->has_val_q[i];
        if (handed) {
            st = check_edge(&r->val_q[i], &qx, "hand-off into a Linear's input");
            q = r->val_q[i];
        } else {
            st = tx_fused_quantize(x, &qx, &q);
        }
        if (!st) st = tx_fused_dequantize(&q, TX_QUSAGE_ROWWISE, x, &l->xq);
        if (!st) l->x = &l->xq;
        if (!st && train && (r->needs[i] & TX_TE_FOR_DPARAMS)) {
            tx_tensor *t;
            st = own_new(r, &t);
            if (!st) st = tx_fused_dequantize(&q, TX_QUSAGE_COLUMNWISE, x, t);
            if (!st) sx = t;
        }
        if (!handed) tx_qtensor_free(&q);
    }
    for (int p = 0; !st && p < l->n; p++) {
        l->w[p] = o->params[p];
        sp[p] = o->params[p];
        if (p >= nw || !qw.on) continue;
        tx_qtensor q;
        st = tx_fused_quantize(o->params[p], &qw, &q);
        if (!st) st = tx_fused_dequantize(&q, TX_QUSAGE_ROWWISE, o->params[p], &l->wq[p]);
        if (!st) l->w[p] = &l->wq[p];
        if (!st && train && (r->needs[i] & TX_TE_FOR_DX)) {
            tx_tensor *t;
            st = own_new(r, &t);
            if (!st) st = tx_fused_dequantize(&q, TX_QUSAGE_COLUMNWISE, o->params[p], t);
            if (!st) sp[p] = t;
        }
        tx_qtensor_free(&q);
    }
    if (!st) {
        fwd_store fs;
        st = fwd_args(r, i, &fs);
        if (!st) {
            fs.a.input = sx;
            fs.a.params = sp;
            st = setup_ctx(r, i, &fs.a);
        }
    }
    free(sp);
    return st;
}

static teexec_status *fwd_unfused(tx_group_run *r, int32_t i)
{
    const tx_group_op *o = op_at(r, i);
    fwd_store fs;
    TX_TRY(fwd_args(r, i, &fs));
    if (o->op == TX_TE_LINEAR || o->op == TX_TE_GROUPED_LINEAR) {
        lin_ops l;
        teexec_status *st = lin_prepare(r, i, &l);
        if (!st) {
            fs.a.input = l.x;
            fs.a.params = l.w;
            st = tx_te_cpu_forward(&fs.a);
        }
        lin_ops_free(&l);
        return st;
    }
    TX_TRY(tx_te_cpu_forward(&fs.a));
    fs.a.input = &r->val[i];
    return setup_ctx(r, i, &fs.a);
}

/* Linear + [Bias] + [ConstantScale] + [act] + [AddExtraInput]. */
static teexec_status *fwd_linear_epilogue(tx_group_run *r, const tx_plan_kernel *k)
{
    int32_t i = k->first, last = k->first + k->count - 1;
    lin_ops l;
    TX_TRY(lin_prepare(r, i, &l));
    tx_fused_linear_fwd_args a;
    memset(&a, 0, sizeof a);
    a.x = l.x;
    a.w = l.w[0];
    a.y_dtype = r->vinfo[i + 1].dtype;
    a.act = TX_TE_OP_COUNT;
    teexec_status *st = NULL;
    for (int32_t j = i + 1; !st && j <= last; j++) {
        const tx_group_op *o = op_at(r, j);
        fwd_store fs;
        /* saved contexts of the covered ops, exactly as their own kernels
         * leave them (values they reference are written below) */
        if (o->op == TX_TE_BIAS) {
            a.bias = o->params[0];
            a.bias_out_dtype = r->vinfo[j + 1].dtype;
        } else if (o->op == TX_TE_CONSTANT_SCALE) {
            a.has_scale = true;
            a.scale = o->attrs[TX_TE_A_SCALE].f;
            a.scale_out_dtype = r->vinfo[j + 1].dtype;
        } else if (is_act(o->op)) {
            a.act = o->op;
            a.act_attrs = o->attrs;
            st = alloc_like_info(&r->val[j], &r->vinfo[j]);
            a.act_input = &r->val[j];
        } else if (o->op == TX_TE_ADD_EXTRA_INPUT) {
            a.residual = extra_in(r, j, 0);
            if (!a.residual) st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "AddExtraInput's extra is missing");
        }
        if (st) break;
        if (j == last) st = alloc_like_info(&r->val[j + 1], &r->vinfo[j + 1]);
        if (!st) {
            memset(&fs, 0, sizeof fs);
            fs.a.op = o->op;
            fs.a.attrs = o->attrs;
            fs.a.input = &r->val[j];
            fs.a.extra_inputs = (const tx_tensor *const *)fs.ext;
            fs.a.n_extra_inputs = o->n_extra_inputs;
            for (int e = 0; e < o->n_extra_inputs; e++) fs.ext[e] = extra_in(r, j, e);
            fs.a.params = o->params;
            fs.a.n_params = o->n_params;
            fs.a.output = &r->val[j + 1];
            st = setup_ctx(r, j, &fs.a);
        }
    }
    a.out = &r->val[last + 1];
    if (!st) st = tx_fused_linear_fwd(&a);
    lin_ops_free(&l);
    return at_op(st, r, i, "fused forward");
}

static teexec_status *fwd_quantize(tx_group_run *r, const tx_plan_kernel *k)
{
    int32_t i = k->first;
    tx_fused_q fq = quantizer(r, i + 1, TX_QOP_INPUT);
    if (!fq.on)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "group op %d: a %s-quantize kernel has no quantized Linear input to write",
                        (int)i, k->fusion == TX_FUSION_FWD_NORM_QUANTIZE ? "norm" : "activation");
    fwd_store fs;
    TX_TRY(fwd_args(r, i, &fs));
    if (r->has_val_q[i + 1]) {
        tx_qtensor_free(&r->val_q[i + 1]);
        r->has_val_q[i + 1] = false;
    }
    TX_TRY(at_op(tx_fused_fwd_quantize(&fs.a, &fq, &r->val_q[i + 1]), r, i, "fused forward"));
    r->has_val_q[i + 1] = true;
    return setup_ctx(r, i, &fs.a);
}

static teexec_status *mlp_args(tx_group_run *r, const tx_plan_kernel *k, tx_fused_mlp_args *a)
{
    int32_t i = k->first, last = k->first + k->count - 1;
    const tx_group_op *fc1 = op_at(r, i), *fc2 = op_at(r, last), *act = op_at(r, last - 1);
    memset(a, 0, sizeof *a);
    a->grouped = k->fusion == TX_FUSION_GROUPED_MLP;
    a->x = &r->val[i];
    a->groups = a->grouped ? (int32_t)fc1->attrs[TX_TE_A_GL_NUM_GROUPS].i : 1;
    if (a->grouped) {
        if ((int32_t)fc2->attrs[TX_TE_A_GL_NUM_GROUPS].i != a->groups)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "grouped MLP: fc1 and fc2 group counts differ");
        a->split_sizes = extra_in(r, i, 0);
        bool b1 = fc1->attrs[TX_TE_A_GL_BIAS].i != 0, b2 = fc2->attrs[TX_TE_A_GL_BIAS].i != 0;
        a->b1 = b1 ? fc1->params + a->groups : NULL;
        a->b2 = b2 ? fc2->params + a->groups : NULL;
        a->scales = extra_in(r, last - 1, 0);
    } else if (k->count == 4) {
        a->dense_bias = op_at(r, i + 1)->params[0];
        a->bias_out_dtype = r->vinfo[i + 2].dtype;
    }
    a->w1 = fc1->params;
    a->w2 = fc2->params;
    a->h1_dtype = r->vinfo[i + 1].dtype;
    a->act = act->op;
    a->act_attrs = act->attrs;
    a->h2_dtype = r->vinfo[last].dtype;
    TX_TRY(alloc_like_info(&r->val[last + 1], &r->vinfo[last + 1]));
    a->out = &r->val[last + 1];
    a->q1_x = quantizer(r, i, TX_QOP_INPUT);
    a->q1_w = quantizer(r, i, TX_QOP_WEIGHT);
    a->q1_dy = quantizer(r, i, TX_QOP_GRAD_OUTPUT);
    a->q2_x = quantizer(r, last, TX_QOP_INPUT);
    a->q2_w = quantizer(r, last, TX_QOP_WEIGHT);
    a->q2_dy = quantizer(r, last, TX_QOP_GRAD_OUTPUT);
    a->need_dx = r->need_dx[i];
    a->need_dparams = r->need_dparams[i] || r->need_dparams[last];
    a->need_dscales = a->grouped && r->cfg->training;
    return NULL;
}

static teexec_status *fwd_mlp(tx_group_run *r, const tx_plan_kernel *k)
{
    int32_t i = k->first;
    if (r->cfg->training && r->f > i && r->f < i + k->count)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "group op %d: a joint MLP fusion whose backward starts inside it", (int)i);
    tx_fused_mlp_args a;
    TX_TRY(mlp_args(r, k, &a));
    if (r->has_val_q[i]) {
        TX_TRY(check_edge(&r->val_q[i], &a.q1_x, "hand-off into a joint MLP's input"));
        a.x_q = &r->val_q[i];
    }
    TX_TRY(at_op(tx_fused_mlp_fwd(&a, &r->mlp[i]), r, i, "joint MLP forward"));
    for (int32_t j = i; j < i + k->count; j++) {
        r->joint_first[j] = i;
        r->n_saved[j] = 0;
    }
    return NULL;
}

teexec_status *tx_group_forward(const tx_group_desc *g, const tx_group_config *cfg,
                             const tx_plan_kernel *layout, int32_t n_layout,
                             const tx_tensor *input, tx_group_run **out)
{
    *out = NULL;
    if (!g || !cfg || !input || g->n_ops < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "group forward: empty group or no input");
    TX_TRY(check_layout(g, layout, n_layout, 0, true));
    tx_group_run *r;
    TX_TRY(run_new(g, cfg, &r));
    r->val[0] = *input;
    r->val[0].owns_data = false;
    r->vinfo[0] = info_of(input);
    teexec_status *st = infer_chain(r);
    for (int32_t t = 0; !st && t < n_layout; t++) {
        const tx_plan_kernel *k = &layout[t];
        switch (k->fusion) {
        case TX_FUSION_NONE: st = at_op(fwd_unfused(r, k->first), r, k->first, "forward"); break;
        case TX_FUSION_FWD_LINEAR_BIAS_ACT:
        case TX_FUSION_FWD_LINEAR_BIAS_ADD:
        case TX_FUSION_FWD_LINEAR_SCALE_ADD: st = fwd_linear_epilogue(r, k); break;
        case TX_FUSION_FWD_NORM_QUANTIZE:
        case TX_FUSION_FWD_ACT_QUANTIZE: st = fwd_quantize(r, k); break;
        case TX_FUSION_GROUPED_MLP:
        case TX_FUSION_DENSE_MLP: st = fwd_mlp(r, k); break;
        default: st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fusion %d is not a forward kernel", (int)k->fusion);
        }
    }
    if (st) {
        tx_group_run_free(r);
        return st;
    }
    *out = r;
    return NULL;
}

/* ---- backward kernels ---------------------------------------------------------- */

/* The grad of op i's extra output 0 (caller's + channel consumers'), in
 * *tmp when a sum had to be formed. */
static teexec_status *extra_out_grad(tx_group_run *r, int32_t i, const tx_tensor *const *gxo,
                                     tx_tensor *tmp, const tx_tensor **out)
{
    const tx_tensor *caller = gxo ? gxo[i] : NULL;
    const tx_tensor *chan = has(&r->chan_grad[i]) ? &r->chan_grad[i] : NULL;
    *out = caller ? caller : chan;
    if (caller && chan) {
        TX_TRY(tx_tensor_clone(caller, tmp));
        TX_TRY(add_into(tmp, chan));
        *out = tmp;
    }
    return NULL;
}

/* Routes op i's grads of its extra inputs: external ones stay in dxin,
 * channel ones are summed into the producer's chan_grad. */
static teexec_status *bwd_extra_slots(tx_group_run *r, int32_t i, tx_tensor **slots, tx_tensor *tmp)
{
    const tx_group_op *o = op_at(r, i);
    const tx_te_op_schema *s = tx_te_schema(o->op);
    bool want = r->needs[i] & TX_TE_FOR_DEXTRA;
    for (int e = 0; e < NX; e++) slots[e] = NULL;
    for (int e = 0; want && e < o->n_extra_inputs && e < s->n_extra_inputs; e++) {
        if (s->extra_inputs[e].flags & TX_TE_PORT_NO_GRAD) continue;
        const tx_tensor *src = extra_in(r, i, e);
        if (!src) continue;
        if (o->channel_from[e] >= 0) {
            TX_TRY(alloc_like(&tmp[e], src));
            slots[e] = &tmp[e];
        } else {
            TX_TRY(alloc_like(&r->dxin[i * r->nx + e], src));
            slots[e] = &r->dxin[i * r->nx + e];
        }
    }
    return NULL;
}

static teexec_status *bwd_route_channels(tx_group_run *r, int32_t i, tx_tensor *tmp)
{
    const tx_group_op *o = op_at(r, i);
    for (int e = 0; e < o->n_extra_inputs && e < NX; e++) {
        int32_t from = o->channel_from[e];
        if (from < 0 || !has(&tmp[e])) continue;
        if (!has(&r->chan_grad[from])) {
            r->chan_grad[from] = tmp[e];
            memset(&tmp[e], 0, sizeof tmp[e]);
        } else {
            TX_TRY(add_into(&r->chan_grad[from], &tmp[e]));
        }
    }
    return NULL;
}

static tx_tensor *const *dparams_of(tx_group_run *r, int32_t i, tx_tensor **ptrs)
{
    const tx_group_op *o = op_at(r, i);
    for (int p = 0; p < o->n_params; p++) ptrs[p] = NULL;
    if (!r->need_dparams[i]) return ptrs;
    for (int p = 0; p < o->n_params; p++) {
        tx_tensor *t = &r->dparam[i * r->pcap + p];
        if (alloc_like(t, o->params[p])) return NULL;
        ptrs[p] = t;
    }
    return ptrs;
}

/* Linear / GroupedLinear backward from dy (hp), with its grad_output
 * quantized here or handed off (hq). dx goes to *dx_out (NULL: not
 * wanted); with dgrad_add set, the dgrad goes through the fused
 * dgrad+add kernel instead (BWD_LINEAR_ADD). */
static teexec_status *lin_bwd(tx_group_run *r, int32_t i, const tx_tensor *dy, const tx_qtensor *hq,
                              tx_tensor *dx_out, bool dgrad_add, const tx_tensor *extra_grad,
                              teexec_dtype lin_dx_dtype)
{
    const tx_group_op *o = op_at(r, i);
    bool gl = o->op == TX_TE_GROUPED_LINEAR;
    int nw = gl ? (int)o->attrs[TX_TE_A_GL_NUM_GROUPS].i : 1;
    const tx_tensor *const *sv = &r->saved[(size_t)i * (size_t)r->saved_cap];
    tx_tensor *pp[64];
    if (o->n_params > 64) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "too many parameters");
    tx_tensor *const *dp = dparams_of(r, i, pp);
    if (!dp) return tx_oom();
    tx_fused_q qd = quantizer(r, i, TX_QOP_GRAD_OUTPUT);
    bool want_dx = dx_out != NULL;
    bool want_dw = r->need_dparams[i];
    tx_tensor dyr = {0}, dyc = {0};
    const tx_tensor *dy_row = dy, *dy_col = dy;
    teexec_status *st = NULL;
    if (qd.on && qd.cfg.usage) {
        tx_qtensor q;
        if (hq) {
            st = check_edge(hq, &qd, "hand-off into a Linear's grad_output");
            if (!st) q = *hq;
        } else {
            st = tx_fused_quantize(dy, &qd, &q);
        }
        if (!st && want_dx) st = tx_fused_dequantize(&q, TX_QUSAGE_ROWWISE, dy, &dyr);
        if (!st && want_dw) st = tx_fused_dequantize(&q, TX_QUSAGE_COLUMNWISE, dy, &dyc);
        if (!hq && !st) tx_qtensor_free(&q);
        dy_row = &dyr;
        dy_col = &dyc;
    } else if (hq) {
        st = check_edge(hq, &qd, "hand-off into a Linear's grad_output");
    }
    tx_te_bwd_args a;
    memset(&a, 0, sizeof a);
    a.op = o->op;
    a.attrs = o->attrs;
    a.saved = sv;
    a.n_saved = r->n_saved[i];
    tx_tensor *none[64] = {0};
    bool split = qd.on;
    if (!st && want_dx) {
        if (dgrad_add) {
            st = tx_fused_dgrad_add(dy_row, sv[1], lin_dx_dtype, extra_grad, dx_out);
        } else {
            a.grad_output = dy_row;
            a.grad_input = dx_out;
            a.grad_params = split ? none : dp;
            a.n_grad_params = o->n_params;
            st = tx_te_cpu_backward(&a);
            if (!split) want_dw = false; /* done in the same call */
        }
    }
    if (!st && want_dw) {
        /* weights from the (columnwise) dy; biases from the hp dy */
        tx_tensor *wonly[64] = {0}, *bonly[64] = {0};
        bool any_b = false;
        for (int p = 0; p < o->n_params; p++) {
            if (p < nw) wonly[p] = dp[p];
            else {
                bonly[p] = dp[p];
                any_b |= dp[p] != NULL;
            }
        }
        a.grad_output = dy_col;
        a.grad_input = NULL;
        a.grad_params = split ? wonly : dp;
        a.n_grad_params = o->n_params;
        st = tx_te_cpu_backward(&a);
        if (!st && split && any_b) {
            a.grad_output = dy;
            a.grad_params = bonly;
            st = tx_te_cpu_backward(&a);
        }
    }
    tx_tensor_release(&dyr);
    tx_tensor_release(&dyc);
    return st;
}

static teexec_status *dval_out(tx_group_run *r, int32_t i, tx_tensor **out)
{
    *out = NULL;
    if (!r->need_dx[i]) return NULL;
    TX_TRY(alloc_like_info(&r->dval[i], &r->vinfo[i]));
    *out = &r->dval[i];
    return NULL;
}

static teexec_status *bwd_unfused(tx_group_run *r, int32_t i, const tx_tensor *const *gxo)
{
    const tx_group_op *o = op_at(r, i);
    const tx_tensor *dy = &r->dval[i + 1];
    tx_tensor *dx;
    TX_TRY(dval_out(r, i, &dx));
    if (o->op == TX_TE_LINEAR || o->op == TX_TE_GROUPED_LINEAR) {
        const tx_qtensor *hq = r->has_dval_q[i + 1] ? &r->dval_q[i + 1] : NULL;
        return lin_bwd(r, i, dy, hq, dx, false, NULL, TEEXEC_DTYPE_FLOAT);
    }
    if (r->has_dval_q[i + 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "a quantized grad was handed to %s, which has no grad quantizer",
                        tx_te_name(o->op));
    tx_tensor tmp_x = {0}, tmp_e[NX];
    memset(tmp_e, 0, sizeof tmp_e);
    tx_tensor *slots[NX], *pp[64];
    const tx_tensor *gx[NX] = {0};
    if (o->n_params > 64) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "too many parameters");
    teexec_status *st = extra_out_grad(r, i, gxo, &tmp_x, &gx[0]);
    if (!st) st = bwd_extra_slots(r, i, slots, tmp_e);
    tx_tensor *const *dp = st ? NULL : dparams_of(r, i, pp);
    if (!st && !dp) st = tx_oom();
    if (!st) {
        tx_te_bwd_args a;
        memset(&a, 0, sizeof a);
        a.op = o->op;
        a.attrs = o->attrs;
        a.grad_output = dy;
        a.grad_extra_outputs = gx;
        a.n_grad_extra_outputs = tx_te_schema(o->op)->n_extra_outputs;
        a.saved = &r->saved[(size_t)i * (size_t)r->saved_cap];
        a.n_saved = r->n_saved[i];
        a.grad_input = dx;
        a.grad_params = dp;
        a.n_grad_params = o->n_params;
        a.grad_extra_inputs = slots;
        a.n_grad_extra_inputs = o->n_extra_inputs;
        st = tx_te_cpu_backward(&a);
    }
    if (!st) st = bwd_route_channels(r, i, tmp_e);
    tx_tensor_release(&tmp_x);
    for (int e = 0; e < NX; e++) tx_tensor_release(&tmp_e[e]);
    return st;
}

/* Quantizer that a backward kernel at op i hands its dx to: the grad_output
 * quantizer of a Linear at i - 1. */
static tx_fused_q prev_grad_q(const tx_group_run *r, int32_t i)
{
    tx_fused_q none;
    memset(&none, 0, sizeof none);
    if (i < 1 || op_at(r, i - 1)->op != TX_TE_LINEAR) return none;
    return quantizer(r, i - 1, TX_QOP_GRAD_OUTPUT);
}

static teexec_status *set_dval_q(tx_group_run *r, int32_t i)
{
    if (r->has_dval_q[i]) {
        tx_qtensor_free(&r->dval_q[i]);
        r->has_dval_q[i] = false;
    }
    memset(&r->dval_q[i], 0, sizeof r->dval_q[i]);
    return NULL;
}

/* dact + dbias of Bias at k->first and the activation after it; `hand`:
 * also write the quantized grad for the Linear before (BackwardActivationBias),
 * else only the high-precision grads (BackwardDactDbias). */
static teexec_status *bwd_act_bias(tx_group_run *r, const tx_plan_kernel *k, bool hand_over)
{
    int32_t i = k->first; /* Bias at i, activation at i + 1 */
    const tx_group_op *act = op_at(r, i + 1);
    if (r->has_dval_q[i + 2])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "a quantized grad was handed to an activation");
    const tx_tensor *act_x = r->saved[(size_t)(i + 1) * (size_t)r->saved_cap];
    tx_tensor *dx, tmp = {0}, *pp[1];
    TX_TRY(dval_out(r, i, &dx));
    if (!dx) {
        TX_TRY(tx_tensor_alloc(&tmp, r->vinfo[i].dtype, r->vinfo[i].shape.rank, r->vinfo[i].shape.dims));
        dx = &tmp;
    }
    tx_tensor *const *dp = dparams_of(r, i, pp);
    teexec_status *st = dp ? NULL : tx_oom();
    tx_fused_q fq = prev_grad_q(r, i);
    bool hand = hand_over && fq.on && r->need_dx[i] && fq.cfg.usage;
    set_dval_q(r, i);
    if (!st)
        st = tx_fused_dact_dbias(act->op, act->attrs, &r->dval[i + 2], act_x, r->vinfo[i + 1].dtype,
                                 dx, dp[0], hand ? &fq : NULL, hand ? &r->dval_q[i] : NULL);
    if (!st && hand) r->has_dval_q[i] = true;
    tx_tensor_release(&tmp);
    return st;
}

static teexec_status *bwd_bias_quantize(tx_group_run *r, const tx_plan_kernel *k)
{
    int32_t i = k->first;
    if (r->has_dval_q[i + 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "a quantized grad was handed to a Bias");
    tx_tensor *dx, *pp[1];
    TX_TRY(dval_out(r, i, &dx));
    tx_tensor *const *dp = dparams_of(r, i, pp);
    if (!dp) return tx_oom();
    tx_fused_q fq = prev_grad_q(r, i);
    bool hand = fq.on && dx && fq.cfg.usage;
    set_dval_q(r, i);
    TX_TRY(tx_fused_dbias_quantize(&r->dval[i + 1], dx, dp[0], hand ? &fq : NULL,
                                   hand ? &r->dval_q[i] : NULL));
    if (hand) r->has_dval_q[i] = true;
    return NULL;
}

static teexec_status *bwd_linear_add(tx_group_run *r, const tx_plan_kernel *k,
                                     const tx_tensor *const *gxo)
{
    int32_t i = k->first; /* MakeExtraOutput at i, Linear at i + 1 */
    tx_tensor tmp = {0}, *dx;
    const tx_tensor *de;
    TX_TRY(dval_out(r, i, &dx));
    teexec_status *st = extra_out_grad(r, i, gxo, &tmp, &de);
    const tx_qtensor *hq = r->has_dval_q[i + 2] ? &r->dval_q[i + 2] : NULL;
    if (!st) st = lin_bwd(r, i + 1, &r->dval[i + 2], hq, dx, true, de, r->vinfo[i + 1].dtype);
    tx_tensor_release(&tmp);
    return st;
}

static teexec_status *bwd_linear_scale(tx_group_run *r, const tx_plan_kernel *k)
{
    int32_t i = k->first; /* Linear at i, ConstantScale at i + 1 */
    if (r->has_dval_q[i + 2])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "a quantized grad was handed to ConstantScale");
    tx_tensor ds = {0}, *dx;
    TX_TRY(dval_out(r, i, &dx));
    const tx_te_tinfo *ti = &r->vinfo[i + 1];
    teexec_status *st = tx_tensor_alloc(&ds, ti->dtype, ti->shape.rank, ti->shape.dims);
    if (!st) st = tx_fused_scale_grad(&r->dval[i + 2], op_at(r, i + 1)->attrs[TX_TE_A_SCALE].f, &ds);
    if (!st) st = lin_bwd(r, i, &ds, NULL, dx, false, NULL, TEEXEC_DTYPE_FLOAT);
    tx_tensor_release(&ds);
    return st;
}

static teexec_status *bwd_add_norm(tx_group_run *r, const tx_plan_kernel *k,
                                   const tx_tensor *const *gxo)
{
    int32_t i = k->first; /* MakeExtraOutput at i, norm at i + 1 */
    const tx_group_op *o = op_at(r, i + 1);
    if (r->has_dval_q[i + 2])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "a quantized grad was handed to a norm");
    tx_tensor tmp = {0}, *dx, *pp[2];
    const tx_tensor *de;
    TX_TRY(dval_out(r, i, &dx));
    teexec_status *st = extra_out_grad(r, i, gxo, &tmp, &de);
    tx_tensor *const *dp = st ? NULL : dparams_of(r, i + 1, pp);
    if (!st && !dp) st = tx_oom();
    if (!st) {
        tx_te_bwd_args a;
        memset(&a, 0, sizeof a);
        a.op = o->op;
        a.attrs = o->attrs;
        a.grad_output = &r->dval[i + 2];
        a.saved = &r->saved[(size_t)(i + 1) * (size_t)r->saved_cap];
        a.n_saved = r->n_saved[i + 1];
        a.grad_input = dx;
        a.grad_params = dp;
        a.n_grad_params = o->n_params;
        st = tx_fused_norm_bwd_add(&a, r->vinfo[i + 1].dtype, de);
    }
    tx_tensor_release(&tmp);
    return st;
}

static teexec_status *bwd_mlp(tx_group_run *r, const tx_plan_kernel *k)
{
    int32_t i = k->first, last = k->first + k->count - 1;
    if (r->joint_first[i] != i || (k->count > 1 && r->joint_first[last] != i))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "group op %d: a joint fusion must be in both layouts", (int)i);
    const tx_fused_mlp_ctx *c = &r->mlp[i];
    if (r->has_dval_q[last + 1])
        TX_TRY(check_edge(&r->dval_q[last + 1], &c->a.q2_dy, "hand-off into a joint MLP's grad"));
    int32_t g = c->a.groups;
    tx_tensor *dx, *p1[64], *p2[64], *pb[1], *ds = NULL, tmp_e[NX];
    memset(tmp_e, 0, sizeof tmp_e);
    TX_TRY(dval_out(r, i, &dx));
    tx_tensor *const *d1 = dparams_of(r, i, p1);
    tx_tensor *const *d2 = dparams_of(r, last, p2);
    tx_tensor *const *dbias = k->count == 4 ? dparams_of(r, i + 1, pb) : NULL;
    if (!d1 || !d2 || (k->count == 4 && !dbias)) return tx_oom();
    teexec_status *st = NULL;
    if (c->a.grouped) {
        tx_tensor *slots[NX];
        st = bwd_extra_slots(r, last - 1, slots, tmp_e);
        ds = slots[0];
    }
    tx_fused_mlp_grads gr;
    memset(&gr, 0, sizeof gr);
    gr.dx = dx;
    gr.dw1 = r->need_dparams[i] ? d1 : NULL;
    gr.db1 = r->need_dparams[i] && c->a.b1 ? d1 + g : NULL;
    gr.dw2 = r->need_dparams[last] ? d2 : NULL;
    gr.db2 = r->need_dparams[last] && c->a.b2 ? d2 + g : NULL;
    gr.dense_db = dbias && r->need_dparams[i + 1] ? dbias[0] : NULL;
    gr.dscales = ds;
    gr.dy_q = r->has_dval_q[last + 1] ? &r->dval_q[last + 1] : NULL;
    if (!st) st = tx_fused_mlp_bwd(c, &r->dval[last + 1], &gr);
    if (!st && c->a.grouped) st = bwd_route_channels(r, last - 1, tmp_e);
    for (int e = 0; e < NX; e++) tx_tensor_release(&tmp_e[e]);
    return st;
}

teexec_status *tx_group_backward(tx_group_run *r, const tx_plan_kernel *layout, int32_t n_layout,
                              const tx_tensor *dy, const tx_tensor *const *gxo)
{
    if (!r->cfg->training)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "group backward: the forward ran for inference");
    if (r->f >= r->n) return NULL;
    TX_TRY(check_layout(r->g, layout, n_layout, r->f, false));
    /* joint kernels of the forward must appear identically */
    for (int32_t i = r->f; i < r->n; i++) {
        bool found = r->joint_first[i] < 0;
        for (int32_t t = 0; !found && t < n_layout; t++)
            found = (layout[t].fusion == TX_FUSION_GROUPED_MLP ||
                     layout[t].fusion == TX_FUSION_DENSE_MLP) &&
                    layout[t].first == r->joint_first[i];
        if (!found)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "group op %d: the forward ran a joint fusion the backward layout lacks",
                            (int)i);
    }
    for (int32_t t = 0; t < n_layout; t++)
        if ((layout[t].fusion == TX_FUSION_GROUPED_MLP || layout[t].fusion == TX_FUSION_DENSE_MLP) &&
            r->joint_first[layout[t].first] != layout[t].first)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "group op %d: the backward has a joint fusion the forward did not run",
                            (int)layout[t].first);
    if (dy->numel != r->val[r->n].numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "group backward: dy does not fit the output");
    TX_TRY(tx_tensor_clone(dy, &r->dval[r->n]));
    for (int32_t t = n_layout - 1; t >= 0; t--) {
        const tx_plan_kernel *k = &layout[t];
        teexec_status *st;
        switch (k->fusion) {
        case TX_FUSION_NONE: st = bwd_unfused(r, k->first, gxo); break;
        case TX_FUSION_BWD_ACT_BIAS: st = bwd_act_bias(r, k, true); break;
        case TX_FUSION_BWD_DACT_DBIAS: st = bwd_act_bias(r, k, false); break;
        case TX_FUSION_BWD_BIAS_QUANTIZE: st = bwd_bias_quantize(r, k); break;
        case TX_FUSION_BWD_LINEAR_ADD: st = bwd_linear_add(r, k, gxo); break;
        case TX_FUSION_BWD_LINEAR_SCALE: st = bwd_linear_scale(r, k); break;
        case TX_FUSION_BWD_ADD_NORM: st = bwd_add_norm(r, k, gxo); break;
        case TX_FUSION_GROUPED_MLP:
        case TX_FUSION_DENSE_MLP: st = bwd_mlp(r, k); break;
        default: st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fusion %d is not a backward kernel", (int)k->fusion);
        }
        if (st) return at_op(st, r, k->first, "backward");
    }
    return NULL;
}

/* ---- results -------------------------------------------------------------------- */

const tx_tensor *tx_group_output(const tx_group_run *r) { return has(&r->val[r->n]) ? &r->val[r->n] : NULL; }

const tx_tensor *tx_group_extra_output(const tx_group_run *r, int32_t op)
{
    return op >= 0 && op < r->n && has(&r->xout[op]) ? &r->xout[op] : NULL;
}

const tx_tensor *const *tx_group_saved(const tx_group_run *r, int32_t op, int *n)
{
    *n = 0;
    if (op < 0 || op >= r->n) return NULL;
    *n = r->n_saved[op];
    return &r->saved[(size_t)op * (size_t)r->saved_cap];
}

const tx_tensor *tx_group_grad_input(const tx_group_run *r) { return has(&r->dval[0]) ? &r->dval[0] : NULL; }

const tx_tensor *tx_group_grad_param(const tx_group_run *r, int32_t op, int param)
{
    if (op < 0 || op >= r->n || param < 0 || param >= r->pcap) return NULL;
    const tx_tensor *t = &r->dparam[op * r->pcap + param];
    return has(t) ? t : NULL;
}

const tx_tensor *tx_group_grad_extra_input(const tx_group_run *r, int32_t op, int slot)
{
    if (op < 0 || op >= r->n || slot < 0 || slot >= r->nx) return NULL;
    const tx_tensor *t = &r->dxin[op * r->nx + slot];
    return has(t) ? t : NULL;
}

void tx_group_update_recipe_state(const tx_group_config *cfg)
{
    if (cfg->recipe.kind == TX_RECIPE_FP8_DELAYED && cfg->delayed)
        tx_delayed_update(cfg->delayed, NULL);
}
