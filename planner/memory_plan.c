/* memory_plan.c - lifetimes of activations, saved tensors, gradients and
 * workspaces over the plan's schedule, arena offsets and peaks (the model
 * of memory is described in memory_plan.h). */
#include "planner/memory_plan.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "planner/plan_internal.h"
#include "planner/plan_schedule.h"
#include "planner/quant_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- stand-alone pieces ------------------------------------------------------ */

void tx_memory_plan_clear(tx_memory_plan *mp)
{
    if (!mp) return;
    for (size_t i = 0; i < mp->n_tensors; i++) free(mp->tensors[i].name);
    free(mp->tensors);
    memset(mp, 0, sizeof(*mp));
}

size_t tx_gemm_workspace_bytes(const tx_device_caps *d)
{
    if (d->sm <= 0) return 0;
    return d->sm >= 90 ? TX_GEMM_WORKSPACE_SM90 : TX_GEMM_WORKSPACE_OLDER;
}

size_t tx_memory_peak(const tx_mem_tensor *t, size_t n, int32_t lo, int32_t hi)
{
    if (hi < lo) return 0;
    size_t steps = (size_t)((int64_t)hi - lo) + 1;
    /* Sweep: +bytes where a lifetime starts, -bytes after it ends (modular
     * arithmetic: every prefix sum is a true, non-negative live total). */
    size_t *delta = calloc(steps + 1, sizeof(*delta));
    size_t peak = 0;
    if (delta) {
        for (size_t i = 0; i < n; i++) {
            if (t[i].end < lo || t[i].start > hi) continue;
            int32_t a = t[i].start < lo ? lo : t[i].start, b = t[i].end > hi ? hi : t[i].end;
            delta[a - lo] += t[i].bytes;
            delta[b - lo + 1] -= t[i].bytes;
        }
        size_t live = 0;
        for (size_t s = 0; s < steps; s++) {
            live += delta[s];
            if (live > peak) peak = live;
        }
        free(delta);
        return peak;
    }
    for (int32_t s = lo; s <= hi; s++) { /* no memory for the sweep: the slow way */
        size_t live = 0;
        for (size_t i = 0; i < n; i++)
            if (t[i].start <= s && s <= t[i].end) live += t[i].bytes;
        if (live > peak) peak = live;
    }
    return peak;
}

typedef struct span {
    size_t lo, hi; /* [lo, hi) */
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int align_up(size_t v, size_t a, size_t *out)
{
    size_t r = v % a;
    if (!r) {
        *out = v;
        return 1;
    }
    return tx_add_size(v, a - r, out);
}

/* Placement order: largest first; ties by earlier start, then list
 * order. A merge sort keeps it stable and needs no global comparator state. */
static void merge_sort_idx(size_t *idx, size_t *tmp, size_t n, const tx_mem_tensor *t)
{
    if (n < 2) return;
    size_t h = n / 2;
    merge_sort_idx(idx, tmp, h, t);
    merge_sort_idx(idx + h, tmp, n - h, t);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        const tx_mem_tensor *x = &t[idx[i]], *y = &t[idx[j]];
        bool take_left;
        if (x->bytes != y->bytes) take_left = x->bytes > y->bytes;
        else if (x->start != y->start) take_left = x->start < y->start;
        else take_left = idx[i] < idx[j];
        tmp[k++] = take_left ? idx[i++] : idx[j++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof(*idx));
}

teexec_status *tx_memory_assign_offsets(tx_memory_plan *mp)
{
    size_t n = mp->n_tensors;
    if (!mp->alignment) mp->alignment = TX_MEM_ALIGNMENT;
    mp->arena_bytes = 0;
    if (!n) return NULL;
    size_t *order = malloc(n * sizeof(*order));
    size_t *tmp = malloc(n * sizeof(*tmp));
    span *busy = malloc(n * sizeof(*busy));
    bool *placed = calloc(n, sizeof(*placed));
    teexec_status *st = NULL;
    if (!order || !tmp || !busy || !placed) {
        st = tx_oom();
        goto done;
    }
    for (size_t i = 0; i < n; i++) order[i] = i;
    merge_sort_idx(order, tmp, n, mp->tensors);

    size_t arena = 0;
    for (size_t oi = 0; oi < n && !st; oi++) {
        tx_mem_tensor *t = &mp->tensors[order[oi]];
        size_t nb = 0;
        for (size_t j = 0; j < n; j++) {
            const tx_mem_tensor *u = &mp->tensors[j];
            if (!placed[j] || !u->bytes || u->end < t->start || t->end < u->start) continue;
            busy[nb].lo = u->offset;
            busy[nb].hi = u->offset + u->bytes; /* checked when u was placed */
            nb++;
        }
        qsort(busy, nb, sizeof(*busy), cmp_span);
        size_t cand = 0, top;
        for (size_t j = 0; j < nb; j++) {
            if (!tx_add_size(cand, t->bytes, &top)) break;
            if (top <= busy[j].lo) break;
            if (busy[j].hi > cand && !align_up(busy[j].hi, mp->alignment, &cand)) {
                st = tx_error(TEEXEC_ERR_LIMIT, "memory plan: arena offset overflows");
                break;
            }
        }
        if (st) break;
        if (!tx_add_size(cand, t->bytes, &top)) {
            st = tx_error(TEEXEC_ERR_LIMIT, "memory plan: arena size overflows at \"%s\"", t->name);
            break;
        }
        t->offset = cand;
        placed[order[oi]] = true;
        if (top > arena) arena = top;
    }
    if (!st && !align_up(arena, mp->alignment, &mp->arena_bytes))
        st = tx_error(TEEXEC_ERR_LIMIT, "memory plan: arena size overflows");
done:
    free(order);
    free(tmp);
    free(busy);
    free(placed);
    return st;
}

/* ---- building the tensor list ------------------------------------------------ */

typedef struct mem_build {
    const tx_ir_graph *g;
    const tx_plan_request *req;
    const tx_fuser_plan *p;
    tx_plan_schedule sc;
    bool *rg;             /* per value: needs a gradient */
    int32_t *val_tensor;  /* per value: its activation / saved tensor, -1 */
    tx_mem_tensor *t;
    int32_t *inf_end;     /* per tensor: last step in an inference run, -1 = not in one */
    size_t n, cap;
} mem_build;

/* What a tensor holds (tx_mem_tensor's value, node, aux). */
typedef struct mem_what {
    int32_t value, node, aux;
} mem_what;

static mem_what of_value(int32_t v) { return (mem_what){v, -1, -1}; }
static mem_what of_node(int32_t node, int32_t aux) { return (mem_what){-1, node, aux}; }

static teexec_status *add_tensor(mem_build *b, tx_mem_kind kind, mem_what what, size_t bytes, int32_t start,
                                 int32_t end, int32_t inf_end, const char *fmt, ...) TX_PRINTF(8, 9);
static teexec_status *add_tensor(mem_build *b, tx_mem_kind kind, mem_what what, size_t bytes, int32_t start,
                                 int32_t end, int32_t inf_end, const char *fmt, ...)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        tx_mem_tensor *nt = realloc(b->t, cap * sizeof(*nt));
        if (!nt) return tx_oom();
        b->t = nt;
        int32_t *ne = realloc(b->inf_end, cap * sizeof(*ne));
        if (!ne) return tx_oom();
        b->inf_end = ne;
        b->cap = cap;
    }
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *name = strdup(buf);
    if (!name) return tx_oom();
    b->t[b->n] = (tx_mem_tensor){name, kind, bytes, start, end < start ? start : end, 0,
                                 what.value, what.node, what.aux};
    b->inf_end[b->n] = inf_end;
    b->n++;
    return NULL;
}

static teexec_status *node_error(const tx_ir_node *n, teexec_code code, const char *fmt, ...) TX_PRINTF(3, 4);
static teexec_status *node_error(const tx_ir_node *n, teexec_code code, const char *fmt, ...)
{
    char buf[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return tx_status_with_node(tx_error(code, "memory plan: node \"%s\" (%s): %s", n->label, n->op_type, buf),
                               n->label);
}

static const tx_shape *shape_of(const mem_build *b, int32_t v)
{
    const tx_infer_value *iv = tx_plan_val(b->req, v);
    return iv && iv->shape_known ? &iv->shape : NULL;
}

/* Bytes of value v as the request's inference gives it. */
static teexec_status *value_bytes(const mem_build *b, int32_t v, size_t *out)
{
    const tx_infer_value *iv = tx_plan_val(b->req, v);
    const tx_ir_value *val = &b->g->values[v];
    if (!iv || !iv->shape_known || iv->dtype == TEEXEC_DTYPE_UNDEFINED)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "memory plan: value \"%s\" has no known shape and type (plan with input shapes)",
                        val->name);
    uint64_t numel;
    TX_TRY(tx_status_prefix(tx_shape_numel(&iv->shape, &numel), "memory plan: value \"%s\"", val->name));
    int ok = 0;
    uint64_t bytes = tx_dtype_storage_bytes(iv->dtype, numel, &ok);
    if (!ok && numel) {
        if (iv->dtype == TEEXEC_DTYPE_STRING) bytes = 0; /* not a device tensor */
        else return tx_error(TEEXEC_ERR_LIMIT, "memory plan: value \"%s\" is too large", val->name);
    }
    if (bytes > SIZE_MAX) return tx_error(TEEXEC_ERR_LIMIT, "memory plan: value \"%s\" is too large", val->name);
    *out = (size_t)bytes;
    return NULL;
}

static bool is_gemm_node(const tx_ir_node *n)
{
    const tx_te_op_schema *s = tx_plan_node_schema(n);
    return s && (s->id == TX_TE_LINEAR || s->id == TX_TE_GROUPED_LINEAR);
}

/* M, N, K and G of a GEMM node (known shapes), as quant_plan.c reads them. */
static bool gemm_dims(const mem_build *b, const tx_ir_node *n, uint64_t *m, uint64_t *nn, uint64_t *k,
                      int32_t *groups, size_t *first_w)
{
    const tx_te_op_schema *s = tx_plan_node_schema(n);
    *first_w = tx_plan_param_start(s);
    *groups = 1;
    if (s->id == TX_TE_GROUPED_LINEAR) {
        int64_t G = 0;
        teexec_status *st = tx_ir_attr_int(n, "num_groups", 0, &G);
        if (st || G < 1 || G > INT32_MAX) {
            teexec_status_destroy(st);
            return false;
        }
        *groups = (int32_t)G;
    }
    if (n->n_inputs <= *first_w) return false;
    const tx_shape *xs = shape_of(b, n->inputs[0]), *ws = shape_of(b, n->inputs[*first_w]);
    if (!xs || !ws || xs->rank < 1 || ws->rank != 2) return false;
    uint64_t numel;
    teexec_status *st = tx_shape_numel(xs, &numel);
    if (st) {
        teexec_status_destroy(st);
        return false;
    }
    *k = (uint64_t)xs->dims[xs->rank - 1];
    *m = *k ? numel / *k : 0;
    *nn = (uint64_t)ws->dims[0];
    return true;
}

static bool is_external(const tx_ir_value *v)
{
    return v->producer < 0; /* graph input, initializer: caller's or a parameter */
}

/* A backward reads value v at step `until`: keep it alive that long. */
static teexec_status *keep_value(mem_build *b, int32_t v, int32_t until)
{
    if (v < 0 || (size_t)v >= b->g->n_values) return NULL;
    const tx_ir_value *val = &b->g->values[v];
    if (is_external(val)) return NULL;
    int32_t ti = b->val_tensor[v];
    if (ti >= 0) {
        if (b->t[ti].end < until) b->t[ti].end = until;
        return NULL;
    }
    /* Private to a fused forward kernel: the kernel must write it out. */
    size_t bytes;
    TX_TRY(value_bytes(b, v, &bytes));
    int32_t start = b->sc.fwd_step[val->producer];
    TX_TRY(add_tensor(b, TX_MEM_SAVED, of_value(v), bytes, start, until, -1, "%s", val->name));
    b->val_tensor[v] = (int32_t)(b->n - 1);
    return NULL;
}

static teexec_status *add_activations(mem_build *b)
{
    const tx_ir_graph *g = b->g;
    int32_t last_fwd = b->sc.n_forward - 1;
    for (size_t v = 0; v < g->n_values; v++) {
        const tx_ir_value *val = &g->values[v];
        if (val->producer < 0 || (size_t)val->producer >= g->n_nodes) continue;
        int32_t ps = b->sc.fwd_step[val->producer];
        int32_t end = ps;
        bool private_ = val->n_consumers > 0;
        for (size_t c = 0; c < val->n_consumers; c++) {
            int32_t cs = b->sc.fwd_step[val->consumers[c].node];
            if (cs != ps) private_ = false;
            if (cs > end) end = cs;
        }
        if (val->flags & TX_IR_VALUE_GRAPH_OUTPUT) {
            private_ = false;
            end = last_fwd;
        }
        if (private_) continue;
        size_t bytes;
        TX_TRY(value_bytes(b, (int32_t)v, &bytes));
        TX_TRY(add_tensor(b, TX_MEM_ACTIVATION, of_value((int32_t)v), bytes, ps, end, end, "%s", val->name));
        b->val_tensor[v] = (int32_t)(b->n - 1);
    }
    return NULL;
}

/* Size of an aux tensor (the op's own saved statistics / masks). */
static teexec_status *aux_bytes(const mem_build *b, const tx_ir_node *n, const tx_te_op_schema *s, int idx,
                                size_t *out)
{
    const tx_shape *xs = shape_of(b, n->inputs[0]);
    const tx_infer_value *xv = tx_plan_val(b->req, n->inputs[0]);
    if (!xs || !xv) return node_error(n, TEEXEC_ERR_INVALID_ARGUMENT, "input shape unknown");
    uint64_t numel, rows, inner = 1;
    TX_TRY(tx_shape_numel(xs, &numel));
    uint64_t stat = tx_dtype_stat(xv->dtype) == TEEXEC_DTYPE_DOUBLE ? 8 : 4;
    switch (s->id) {
    case TX_TE_LAYER_NORM:
    case TX_TE_RMS_NORM: {
        /* the normalized dims are the weight's */
        const tx_shape *ws = n->n_inputs > 1 ? shape_of(b, n->inputs[1]) : NULL;
        if (!ws) return node_error(n, TEEXEC_ERR_INVALID_ARGUMENT, "weight shape unknown");
        TX_TRY(tx_shape_numel(ws, &inner));
        break;
    }
    case TX_TE_L2_NORMALIZATION:
    case TX_TE_DOT_PRODUCT_ATTENTION: /* softmax_lse [b, h, s_q] = q's rows */
        inner = xs->rank > 0 ? (uint64_t)xs->dims[xs->rank - 1] : 1;
        break;
    case TX_TE_DROPOUT: /* one bit per element */
        *out = (size_t)(numel / 8 + (numel % 8 != 0));
        return NULL;
    default:
        return node_error(n, TEEXEC_ERR_UNSUPPORTED, "no size rule for its saved tensor \"%s\"", s->aux[idx].name);
    }
    rows = inner ? numel / inner : 0;
    uint64_t bytes;
    if (!tx_mul_u64(rows, stat, &bytes) || bytes > SIZE_MAX)
        return node_error(n, TEEXEC_ERR_LIMIT, "saved tensor too large");
    *out = (size_t)bytes;
    return NULL;
}

/* A quantized copy of a GEMM operand with its columnwise usage, if the
 * plan quantizes it and wants that usage; *bytes 0 otherwise. */
static teexec_status *colwise_copy(const mem_build *b, int32_t node, tx_qoperand op, uint64_t rows,
                                   uint64_t cols, size_t *bytes)
{
    *bytes = 0;
    const tx_plan_quant *q = tx_plan_quant_find(b->p, node, op);
    if (!q || !q->quantized || !(q->usage & TX_QUSAGE_COLUMNWISE)) return NULL;
    uint64_t n;
    TX_TRY(tx_plan_quant_bytes(q, rows, cols, TX_QUSAGE_COLUMNWISE, &n));
    if (n > SIZE_MAX) return tx_error(TEEXEC_ERR_LIMIT, "memory plan: quantized copy too large");
    *bytes = (size_t)n;
    return NULL;
}

static bool slot_grad(const mem_build *b, const tx_ir_node *n, size_t slot)
{
    if (slot >= n->n_inputs || n->inputs[slot] < 0 || !b->rg[n->inputs[slot]]) return false;
    const tx_te_op_schema *s = tx_plan_node_schema(n);
    if (!s) return true;
    if (slot == 0) return !(s->input.flags & TX_TE_PORT_NO_GRAD);
    if (slot < tx_plan_param_start(s)) return !(s->extra_inputs[slot - 1].flags & TX_TE_PORT_NO_GRAD);
    return true;
}

/* Standard ops whose gradient is a reshaping, selection, sum or sign
 * change of dy: nothing of the forward but shapes and integer inputs. */
static bool is_structural(const tx_ir_node *n)
{
    static const char *const ops[] = {"Add",     "Sub",       "Neg",     "Cast",    "CastLike", "Concat",
                                      "Expand",  "Flatten",   "Identity", "Reshape", "Slice",    "Split",
                                      "Squeeze", "Transpose", "Unsqueeze", "ReduceSum", "ReduceMean",
                                      "Gather",  "Where"};
    if (n->domain[0] != '\0') return false;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(n->op_type, ops[i])) return true;
    return false;
}

static teexec_status *add_saved_of(mem_build *b, int32_t ni)
{
    const tx_ir_node *n = &b->g->nodes[ni];
    int32_t fs = b->sc.fwd_step[ni], bs = b->sc.bwd_step[ni];
    const tx_te_op_schema *s = tx_plan_node_schema(n);
    if (!s) {
        /* A standard op's backward may read any input or output, except for
         * the structural ones, whose backward needs only shapes and their
         * integer / bool inputs (indices, axes, conditions). */
        bool structural = is_structural(n);
        for (size_t i = 0; i < n->n_inputs; i++) {
            int32_t v = n->inputs[i];
            if (structural && v >= 0) {
                const tx_infer_value *iv = tx_plan_val(b->req, v);
                teexec_dtype dt = iv ? iv->dtype : b->g->values[v].dtype;
                if (dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_FLOAT16 || dt == TEEXEC_DTYPE_BFLOAT16 ||
                    dt == TEEXEC_DTYPE_DOUBLE)
                    continue;
            }
            TX_TRY(keep_value(b, v, bs));
        }
        if (!structural)
            for (size_t i = 0; i < n->n_outputs; i++) TX_TRY(keep_value(b, n->outputs[i], bs));
        return NULL;
    }
    size_t ps = tx_plan_param_start(s);
    unsigned needs = 0;
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (!slot_grad(b, n, i)) continue;
        needs |= i == 0 ? TX_TE_FOR_DX : i < ps ? TX_TE_FOR_DEXTRA : TX_TE_FOR_DPARAMS;
    }
    if (!needs) return NULL;
    uint64_t m = 0, nn = 0, k = 0;
    int32_t groups = 1;
    size_t first_w = ps;
    bool gemm = is_gemm_node(n) && gemm_dims(b, n, &m, &nn, &k, &groups, &first_w);
    for (int e = 0; e < s->n_saved; e++) {
        const tx_te_saved_schema *sv = &s->saved[e];
        if (!(sv->needed_for & needs)) continue;
        size_t qb;
        switch (sv->src) {
        case TX_TE_SRC_INPUT:
            if (gemm) {
                TX_TRY(colwise_copy(b, ni, TX_QOP_INPUT, m, k, &qb));
                if (qb) {
                    TX_TRY(add_tensor(b, TX_MEM_SAVED, of_node(ni, -1), qb, fs, bs, -1, "%s.x (quantized, columnwise)",
                                      n->label));
                    break;
                }
            }
            TX_TRY(keep_value(b, n->inputs[0], bs));
            break;
        case TX_TE_SRC_EXTRA_INPUT:
            if ((size_t)(1 + sv->index) < n->n_inputs) TX_TRY(keep_value(b, n->inputs[1 + sv->index], bs));
            break;
        case TX_TE_SRC_PARAM:
        case TX_TE_SRC_PARAMS_ALL: {
            size_t lo = ps + (sv->src == TX_TE_SRC_PARAM ? (size_t)sv->index : 0);
            size_t hi = sv->src == TX_TE_SRC_PARAM ? lo + 1 : n->n_inputs;
            if (gemm) {
                TX_TRY(colwise_copy(b, ni, TX_QOP_WEIGHT, nn, k, &qb));
                if (qb) {
                    size_t all;
                    if (!tx_mul_size(qb, (size_t)groups, &all))
                        return node_error(n, TEEXEC_ERR_LIMIT, "quantized weights too large");
                    TX_TRY(add_tensor(b, TX_MEM_SAVED, of_node(ni, -1), all, fs, bs, -1, "%s.weight (quantized, columnwise)",
                                      n->label));
                    lo = first_w + (size_t)groups; /* the weights are covered by the copy */
                }
            }
            for (size_t i = lo; i < hi && i < n->n_inputs; i++) TX_TRY(keep_value(b, n->inputs[i], bs));
            break;
        }
        case TX_TE_SRC_OUTPUT:
            if (n->n_outputs > 0) TX_TRY(keep_value(b, n->outputs[0], bs));
            break;
        case TX_TE_SRC_AUX: {
            size_t ab = 0;
            if (sv->index < 0 || sv->index >= s->n_aux)
                return node_error(n, TEEXEC_ERR_INTERNAL, "saved entry %s names aux %d", sv->name, sv->index);
            TX_TRY(aux_bytes(b, n, s, sv->index, &ab));
            TX_TRY(add_tensor(b, TX_MEM_SAVED, of_node(ni, sv->index), ab, fs, bs, -1, "%s.%s", n->label,
                              s->aux[sv->index].name));
            break;
        }
        }
    }
    return NULL;
}

static teexec_status *add_grads(mem_build *b)
{
    const tx_ir_graph *g = b->g;
    int32_t first_bwd = b->sc.n_forward, last = b->sc.n_steps - 1;
    if (first_bwd > last) return NULL;
    for (size_t v = 0; v < g->n_values; v++) {
        const tx_ir_value *val = &g->values[v];
        if (!b->rg[v] || (val->flags & TX_IR_VALUE_INITIALIZER)) continue;
        int32_t start = INT32_MAX, end;
        bool all_in_producer = true;
        int32_t pbs = val->producer >= 0 ? b->sc.bwd_step[val->producer] : -1;
        for (size_t c = 0; c < val->n_consumers; c++) {
            const tx_ir_node *cn = &g->nodes[val->consumers[c].node];
            int32_t cs = b->sc.bwd_step[val->consumers[c].node];
            if (cs < 0 || !slot_grad(b, cn, (size_t)val->consumers[c].slot)) continue;
            if (cs < start) start = cs;
            if (cs != pbs) all_in_producer = false;
        }
        if (val->flags & TX_IR_VALUE_GRAPH_OUTPUT) {
            start = first_bwd;
            all_in_producer = false;
        }
        if (start == INT32_MAX) continue;
        if (pbs >= 0) end = pbs;
        else if (val->producer < 0) end = last; /* a graph input's grad goes to the caller */
        else end = start;
        if (pbs >= 0 && all_in_producer) continue; /* passed inside one backward kernel */
        size_t bytes;
        TX_TRY(value_bytes(b, (int32_t)v, &bytes));
        TX_TRY(add_tensor(b, TX_MEM_GRAD, of_value((int32_t)v), bytes, start, end, -1, "grad:%s", val->name));
    }
    return NULL;
}

/* The quantized operands a GEMM step writes itself (not handed over). */
static teexec_status *quant_workspace(const mem_build *b, int32_t ni, bool backward, size_t *out)
{
    *out = 0;
    const tx_ir_node *n = &b->g->nodes[ni];
    uint64_t m, nn, k, acc = 0, part;
    int32_t groups;
    size_t first_w;
    if (!gemm_dims(b, n, &m, &nn, &k, &groups, &first_w)) return NULL;
    if (!backward) {
        const tx_plan_quant *x = tx_plan_quant_find(b->p, ni, TX_QOP_INPUT);
        const tx_plan_quant *w = tx_plan_quant_find(b->p, ni, TX_QOP_WEIGHT);
        if (x && x->producer < 0) {
            TX_TRY(tx_plan_quant_bytes(x, m, k, TX_QUSAGE_ROWWISE & x->usage, &part));
            acc += part;
        }
        if (w) {
            TX_TRY(tx_plan_quant_bytes(w, nn, k, TX_QUSAGE_ROWWISE & w->usage, &part));
            if (!tx_mul_u64(part, (uint64_t)groups, &part) || !tx_add_u64(acc, part, &acc))
                return node_error(n, TEEXEC_ERR_LIMIT, "quantized weights too large");
        }
    } else {
        const tx_plan_quant *dy = tx_plan_quant_find(b->p, ni, TX_QOP_GRAD_OUTPUT);
        if (dy && dy->producer < 0) TX_TRY(tx_plan_quant_bytes(dy, m, nn, dy->usage, &acc));
    }
    if (acc > SIZE_MAX) return node_error(n, TEEXEC_ERR_LIMIT, "quantized operands too large");
    *out = (size_t)acc;
    return NULL;
}

static teexec_status *add_workspaces(mem_build *b)
{
    size_t gemm_ws = tx_gemm_workspace_bytes(&b->req->device);
    for (int32_t s = 0; s < b->sc.n_steps; s++) {
        const tx_plan_step *stp = &b->sc.steps[s];
        const tx_plan_group *grp = &b->p->groups[stp->group];
        bool bwd = stp->backward;
        bool any_gemm = false;
        size_t q = 0;
        const char *label = b->g->nodes[grp->nodes[stp->first]].label;
        for (int32_t o = stp->first; o < stp->first + stp->count; o++) {
            int32_t ni = grp->nodes[o];
            if (!is_gemm_node(&b->g->nodes[ni])) continue;
            any_gemm = true;
            size_t part;
            TX_TRY(quant_workspace(b, ni, bwd, &part));
            if (!tx_add_size(q, part, &q)) return tx_error(TEEXEC_ERR_LIMIT, "memory plan: workspace too large");
        }
        if (!any_gemm) continue;
        const char *dir = bwd ? "backward" : "forward";
        mem_what at = of_node(grp->nodes[stp->first], -1);
        if (gemm_ws)
            TX_TRY(add_tensor(b, TX_MEM_WORKSPACE, at, gemm_ws, s, s, bwd ? -1 : s, "%s:%s GEMM workspace", label,
                              dir));
        if (q)
            TX_TRY(add_tensor(b, TX_MEM_WORKSPACE, at, q, s, s, bwd ? -1 : s, "%s:%s quantized operands", label,
                              dir));
    }
    return NULL;
}

static teexec_status *param_bytes(const mem_build *b, size_t *out)
{
    const tx_ir_graph *g = b->g;
    size_t total = 0;
    for (size_t i = 0; i < g->n_initializers; i++) {
        int32_t v = g->initializers[i];
        if (v < 0 || (size_t)v >= g->n_values) continue;
        size_t bytes;
        TX_TRY(value_bytes(b, v, &bytes));
        size_t mult = b->rg[v] ? 2 : 1; /* + its gradient */
        if (!tx_mul_size(bytes, mult, &bytes) || !tx_add_size(total, bytes, &total))
            return tx_error(TEEXEC_ERR_LIMIT, "memory plan: parameters too large");
    }
    *out = total;
    return NULL;
}

static teexec_status *build(mem_build *b, tx_memory_plan *mp)
{
    const tx_ir_graph *g = b->g;
    if (!b->p->n_groups && g->n_nodes)
        return tx_error(TEEXEC_ERR_INTERNAL, "memory plan: the plan has no groups (run tx_plan_groups first)");
    TX_TRY(tx_plan_schedule_build(g, b->p, b->req->training, &b->sc));
    TX_TRY(tx_plan_value_grads(g, b->req, &b->rg));
    b->val_tensor = malloc((g->n_values ? g->n_values : 1) * sizeof(int32_t));
    if (!b->val_tensor) return tx_oom();
    for (size_t v = 0; v < g->n_values; v++) b->val_tensor[v] = -1;

    TX_TRY(add_activations(b));
    if (b->req->training) {
        for (size_t ni = 0; ni < g->n_nodes; ni++)
            if (b->sc.bwd_step[ni] >= 0) TX_TRY(add_saved_of(b, (int32_t)ni));
        TX_TRY(add_grads(b));
    }
    TX_TRY(add_workspaces(b));

    mp->tensors = b->t;
    mp->n_tensors = b->n;
    b->t = NULL;
    b->n = b->cap = 0;
    mp->alignment = TX_MEM_ALIGNMENT;
    size_t sum = 0;
    for (size_t i = 0; i < mp->n_tensors; i++)
        if (!tx_add_size(sum, mp->tensors[i].bytes, &sum))
            return tx_error(TEEXEC_ERR_LIMIT, "memory plan: total size overflows");
    mp->sum_bytes = sum;
    mp->peak_training = tx_memory_peak(mp->tensors, mp->n_tensors, 0, b->sc.n_steps - 1);

    /* Inference: activations with their forward lifetimes, forward
     * workspaces; nothing saved. */
    tx_mem_tensor *inf = malloc((mp->n_tensors ? mp->n_tensors : 1) * sizeof(*inf));
    if (!inf) return tx_oom();
    for (size_t i = 0; i < mp->n_tensors; i++) {
        inf[i] = mp->tensors[i];
        inf[i].end = b->inf_end[i];
        if (b->inf_end[i] < 0) inf[i].bytes = 0;
    }
    size_t peak_inf = tx_memory_peak(inf, mp->n_tensors, 0, b->sc.n_forward - 1);
    free(inf);
    mp->peak_inference = peak_inf;
    TX_TRY(param_bytes(b, &mp->param_bytes));
    return tx_memory_assign_offsets(mp);
}

teexec_status *tx_plan_memory(const tx_ir_graph *g, const tx_plan_request *req, tx_fuser_plan *p)
{
    tx_memory_plan_clear(&p->memory);
    mem_build b;
    memset(&b, 0, sizeof(b));
    b.g = g;
    b.req = req;
    b.p = p;
    teexec_status *st = build(&b, &p->memory);
    if (st) tx_memory_plan_clear(&p->memory);
    for (size_t i = 0; i < b.n; i++) free(b.t[i].name);
    free(b.t);
    free(b.inf_end);
    free(b.val_tensor);
    free(b.rg);
    tx_plan_schedule_free(&b.sc);
    return st;
}
