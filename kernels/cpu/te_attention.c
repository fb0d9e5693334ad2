/*
 * te_attention.c - DotProductAttention, CPU reference: bshd or sbhd, GQA
 * (query head i reads kv head i / (h / h_kv)), causal masking (bottom-right
 * aligned: query i sees keys j <= i + s_kv - s_q), an optional bool mask
 * (true = masked out, TE's convention) or float mask (added to the scores),
 * and the softmax scale (0 = 1/sqrt(d)).
 *
 * Forward saves the softmax log-sum-exp per row (aux softmax_lse); backward
 * recomputes the probabilities from q, k and it, as flash attention does,
 * and uses the saved output for D = rowsum(dO ∘ O). A fully masked row has
 * output 0, lse -inf and no gradient.
 *
 * Cache mode (k_cache given, docs/te-ops.md): the new k/v rows go into
 * k_cache / v_cache at cache_len[r] + i, in place -- the caches are the
 * session's state (exec/session_state.h), the one input an op writes --
 * and the attention then runs over the cache, row r's keys bounded by
 * cache_len[r]. Inference only.
 *
 * Written once over REAL, compiled twice (this file includes itself;
 * te_real.h). Sums accumulate in double. The forward spreads its (batch
 * row, head) pairs over the BLAS thread count when the work is large
 * (base/parallel.h); every pair is computed whole by one thread, so the
 * result is the same bits for any split.
 */
#ifndef TE_PASS
#define TE_PASS
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include "base/parallel.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct attn_geom {
    int64_t b, sq, skv, h, hk, d, dv;
    bool sbhd, causal;
    double scale;
    const tx_tensor *mask;
    int64_t mb, mh; /* mask's broadcast dims (1 or b / h) */
    const tx_tensor *k, *v; /* the keys and values read: k and v, or the caches */
    const int64_t *cache_len; /* cache mode: per batch row, else NULL */
} attn_geom;

/* Whether query i of batch row bi may not see key j (causal or cache bounds). */
static inline bool hidden(const attn_geom *g, int64_t bi, int64_t i, int64_t j)
{
    if (g->cache_len) {
        int64_t pos = g->cache_len[bi] + i;
        return g->causal ? j > pos : j >= g->cache_len[bi] + g->sq;
    }
    return g->causal && j > i + g->skv - g->sq;
}

/* Element offset of (batch, seq, head, channel) in a [b,s,h,c] / [s,b,h,c] tensor. */
static inline int64_t at4(const attn_geom *g, int64_t bi, int64_t si, int64_t s, int64_t hi,
                          int64_t nh, int64_t ci, int64_t c)
{
    return g->sbhd ? ((si * g->b + bi) * nh + hi) * c + ci : ((bi * s + si) * nh + hi) * c + ci;
}

/* Worker threads for one forward: the BLAS thread count (the session's
 * threads setting), or 1 when the work is too small to pay for starting
 * threads (~2M multiply-adds; the zoo's attentions are far below). */
static int attn_threads(const attn_geom *g)
{
    const double macs = (double)g->b * (double)g->h * (double)g->sq * (double)g->skv *
                        (double)(g->d + g->dv);
    if (macs < 2.0e6) return 1;
    int n = openblas_get_num_threads();
    return n > 1 ? n : 1;
}

static teexec_status *geom_of(tx_te_op_id op, const tx_te_attr_value *attrs, const tx_tensor *q,
                              const tx_tensor *k, const tx_tensor *v, const tx_tensor *mask,
                              attn_geom *g)
{
    TX_TRY(tx_te_check_real(op, "q", q));
    TX_TRY(tx_te_check_real(op, "k", k));
    TX_TRY(tx_te_check_real(op, "v", v));
    if (q->rank != 4 || k->rank != 4 || v->rank != 4)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops DotProductAttention: q, k and v must have rank 4");
    g->sbhd = attrs[TX_TE_A_DPA_LAYOUT].i == TX_TE_LAYOUT_SBHD;
    g->causal = attrs[TX_TE_A_DPA_CAUSAL].i != 0;
    int bd = g->sbhd ? 1 : 0, sd = g->sbhd ? 0 : 1;
    g->b = q->dims[bd];
    g->sq = q->dims[sd];
    g->h = q->dims[2];
    g->d = q->dims[3];
    g->skv = k->dims[sd];
    g->hk = k->dims[2];
    g->dv = v->dims[3];
    bool ok = k->dims[bd] == g->b && v->dims[bd] == g->b && v->dims[sd] == g->skv &&
              v->dims[2] == g->hk && k->dims[3] == g->d && g->hk >= 1 && g->h % g->hk == 0;
    if (!ok)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops DotProductAttention: q, k, v shapes do not fit (batch, kv seq, kv "
                        "heads, head dim; q heads must be a multiple of kv heads)");
    if ((attrs[TX_TE_A_DPA_HEADS].i && attrs[TX_TE_A_DPA_HEADS].i != g->h) ||
        (attrs[TX_TE_A_DPA_KV_HEADS].i && attrs[TX_TE_A_DPA_KV_HEADS].i != g->hk))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops DotProductAttention: head counts disagree with the attributes");
    double sc = attrs[TX_TE_A_DPA_SCALE].f;
    g->scale = sc != 0.0 ? sc : 1.0 / sqrt((double)(g->d ? g->d : 1));
    g->mask = mask;
    g->k = k;
    g->v = v;
    g->cache_len = NULL;
    g->mb = g->mh = 1;
    if (mask) {
        if (!mask->data || (mask->dtype != TEEXEC_DTYPE_BOOL && !tx_dtype_is_real(mask->dtype)) ||
            mask->rank != 4 || (mask->dims[0] != 1 && mask->dims[0] != g->b) ||
            (mask->dims[1] != 1 && mask->dims[1] != g->h) || mask->dims[2] != g->sq ||
            mask->dims[3] != g->skv)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops DotProductAttention: mask must be bool or float "
                            "[b|1, h|1, s_q, s_kv]");
        g->mb = mask->dims[0];
        g->mh = mask->dims[1];
    }
    return NULL;
}

static teexec_status *check_lse(tx_te_op_id op, const attn_geom *g, const tx_tensor *lse,
                                teexec_dtype t)
{
    tx_shape s = {3, {g->b, g->h, g->sq}};
    return tx_te_check_out(op, "softmax_lse", lse, tx_dtype_stat(t), &s);
}

static tx_shape out_shape(const attn_geom *g)
{
    tx_shape s = {3, {g->sbhd ? g->sq : g->b, g->sbhd ? g->b : g->sq, g->h * g->dv}};
    return s;
}

#define TE_F64 0
#include "kernels/cpu/te_attention.c"
#undef TE_F64
#define TE_F64 1
#include "kernels/cpu/te_attention.c"
#undef TE_F64

static tx_te_tinfo info_of(const tx_tensor *t)
{
    tx_te_tinfo i = {TEEXEC_DTYPE_UNDEFINED, {0, {0}}};
    if (t) {
        i.dtype = t->dtype;
        i.shape = tx_shape_of(t);
    }
    return i;
}

bool tx_te_dpa_cache_mode(const tx_tensor *const *extra, int n_extra)
{
    for (int i = TX_TE_DPA_IN_K_CACHE; i < n_extra; i++)
        if (extra[i]) return true;
    return false;
}

teexec_status *tx_te_dpa_cache_check_tensors(const tx_tensor *q, const tx_tensor *const *x,
                                             int nx, int64_t layout)
{
    const tx_tensor *t[TX_TE_DPA_N_IN] = {NULL};
    tx_te_tinfo ti[TX_TE_DPA_N_IN], iq = info_of(q);
    const tx_te_tinfo *p[TX_TE_DPA_N_IN] = {NULL};
    for (int i = 0; i < TX_TE_DPA_N_IN && i < nx; i++) {
        t[i] = x[i];
        ti[i] = info_of(t[i]);
        p[i] = t[i] ? &ti[i] : NULL;
    }
    tx_te_dpa_cache_shapes c = {&iq,
                                p[TX_TE_DPA_IN_K],
                                p[TX_TE_DPA_IN_V],
                                p[TX_TE_DPA_IN_MASK],
                                p[TX_TE_DPA_IN_K_CACHE],
                                p[TX_TE_DPA_IN_V_CACHE],
                                p[TX_TE_DPA_IN_CACHE_LEN],
                                layout};
    return tx_te_dpa_cache_check(&c);
}

/* The cache mode's checks and its in-place append: the new k/v rows of
 * every batch row into the caches at cache_len[r]; g then reads the
 * caches. The caches are written only once every check has passed. */
static teexec_status *cache_append(const tx_te_fwd_args *a, attn_geom *g)
{
    static const char *op = "te.ops DotProductAttention";
    const tx_tensor *const *x = a->extra_inputs;
    int nx = a->n_extra_inputs;
    const tx_tensor *k = x[TX_TE_DPA_IN_K], *v = x[TX_TE_DPA_IN_V];
    const tx_tensor *kc = nx > TX_TE_DPA_IN_K_CACHE ? x[TX_TE_DPA_IN_K_CACHE] : NULL;
    const tx_tensor *vc = nx > TX_TE_DPA_IN_V_CACHE ? x[TX_TE_DPA_IN_V_CACHE] : NULL;
    const tx_tensor *cl = nx > TX_TE_DPA_IN_CACHE_LEN ? x[TX_TE_DPA_IN_CACHE_LEN] : NULL;
    if (a->training)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: the cache mode is inference only", op);
    TX_TRY(tx_te_dpa_cache_check_tensors(a->input, x, nx, a->attrs[TX_TE_A_DPA_LAYOUT].i));
    if (!kc->data || !vc->data || !cl->data)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: a cache or cache_len has no data", op);
    const int64_t *len = cl->data;
    int64_t cap = kc->dims[1];
    for (int64_t r = 0; r < g->b; r++)
        if (len[r] < 0 || len[r] > cap - g->sq)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: cache_len[%lld] = %lld with %lld new tokens does not fit the "
                            "cache's capacity of %lld", op, (long long)r, (long long)len[r],
                            (long long)g->sq, (long long)cap);
    /* bshd: the h_kv * d channels of one (row, position) are contiguous */
    size_t kes = tx_dtype_elem_size(k->dtype), ves = tx_dtype_elem_size(v->dtype);
    size_t krow = (size_t)(g->hk * g->d) * kes, vrow = (size_t)(g->hk * g->dv) * ves;
    for (int64_t r = 0; r < g->b; r++)
        for (int64_t i = 0; i < g->sq; i++) {
            size_t src = (size_t)(r * g->sq + i), dst = (size_t)(r * cap + len[r] + i);
            /* the caches are state the op owns (file comment): written in place */
            memcpy((char *)kc->data + dst * krow, (const char *)k->data + src * krow, krow);
            memcpy((char *)vc->data + dst * vrow, (const char *)v->data + src * vrow, vrow);
        }
    g->k = kc;
    g->v = vc;
    g->skv = cap;
    g->cache_len = len;
    return NULL;
}

teexec_status *tx_te_cpu_attention_fwd(const tx_te_fwd_args *a)
{
    if (a->n_extra_inputs < 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops DotProductAttention: k and v are missing");
    bool cache_mode = tx_te_dpa_cache_mode(a->extra_inputs, a->n_extra_inputs);
    attn_geom g;
    TX_TRY(geom_of(a->op, a->attrs, a->input, a->extra_inputs[0], a->extra_inputs[1],
                   !cache_mode && a->n_extra_inputs > 2 ? a->extra_inputs[2] : NULL, &g));
    if (cache_mode) TX_TRY(cache_append(a, &g));
    tx_shape ys = out_shape(&g);
    TX_TRY(tx_te_check_real_shape(a->op, "y", a->output, &ys));
    tx_tensor *lse = a->training && a->aux && a->n_aux > 0 ? a->aux[0] : NULL;
    if (lse) TX_TRY(check_lse(a->op, &g, lse, a->input->dtype));
    return a->input->dtype == TEEXEC_DTYPE_DOUBLE ? attn_fwd_f64(a, &g, lse) : attn_fwd_f32(a, &g, lse);
}

teexec_status *tx_te_cpu_attention_bwd(const tx_te_bwd_args *a)
{
    if (a->n_saved != 6)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops DotProductAttention: expected 6 saved tensors (q, k, v, mask, y, "
                        "softmax_lse), got %d", a->n_saved);
    const tx_tensor *q = a->saved[0];
    attn_geom g;
    TX_TRY(geom_of(a->op, a->attrs, q, a->saved[1], a->saved[2], a->saved[3], &g));
    tx_shape ys = out_shape(&g);
    TX_TRY(tx_te_check_real_shape(a->op, "dy", a->grad_output, &ys));
    TX_TRY(tx_te_check_real_shape(a->op, "saved y", a->saved[4], &ys));
    TX_TRY(check_lse(a->op, &g, a->saved[5], q->dtype));
    tx_shape qs = tx_shape_of(q), ks = tx_shape_of(a->saved[1]), vs = tx_shape_of(a->saved[2]);
    if (a->grad_input) TX_TRY(tx_te_check_real_shape(a->op, "dq", a->grad_input, &qs));
    tx_tensor *dk = a->n_grad_extra_inputs > 0 ? a->grad_extra_inputs[0] : NULL;
    tx_tensor *dv = a->n_grad_extra_inputs > 1 ? a->grad_extra_inputs[1] : NULL;
    if (dk) TX_TRY(tx_te_check_real_shape(a->op, "dk", dk, &ks));
    if (dv) TX_TRY(tx_te_check_real_shape(a->op, "dv", dv, &vs));
    return q->dtype == TEEXEC_DTYPE_DOUBLE ? attn_bwd_f64(a, &g, dk, dv) : attn_bwd_f32(a, &g, dk, dv);
}

#else /* a REAL pass */
#include "kernels/cpu/te_real.h"

/* Scores of query row (bi, hi, i) against every key into s[]; masked
 * entries are -inf. Returns the row max (-inf when all are masked). */
static REAL FN(scores)(const attn_geom *g, const REAL *qb, const REAL *kb, const REAL *mb,
                       int64_t bi, int64_t hi, int64_t i, REAL *s)
{
    int64_t kh = hi / (g->h / g->hk);
    REAL mx = (REAL)-INFINITY;
    const REAL *qr = qb + at4(g, bi, i, g->sq, hi, g->h, 0, g->d);
    const uint8_t *mbool = g->mask && g->mask->dtype == TEEXEC_DTYPE_BOOL ? g->mask->data : NULL;
    int64_t moff = (((g->mb > 1 ? bi : 0) * g->mh + (g->mh > 1 ? hi : 0)) * g->sq + i) * g->skv;
    for (int64_t j = 0; j < g->skv; j++) {
        if (hidden(g, bi, i, j) || (mbool && mbool[moff + j])) {
            s[j] = (REAL)-INFINITY;
            continue;
        }
        const REAL *kr = kb + at4(g, bi, j, g->skv, kh, g->hk, 0, g->d);
        /* four partial sums (in double, as every sum here): independent
         * chains the compiler can keep in one vector register */
        double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
        int64_t c = 0;
        for (; c + 4 <= g->d; c += 4) {
            d0 += (double)qr[c] * kr[c];
            d1 += (double)qr[c + 1] * kr[c + 1];
            d2 += (double)qr[c + 2] * kr[c + 2];
            d3 += (double)qr[c + 3] * kr[c + 3];
        }
        for (; c < g->d; c++) d0 += (double)qr[c] * kr[c];
        double dot = (d0 + d1) + (d2 + d3);
        s[j] = (REAL)(dot * g->scale);
        if (mb) s[j] += mb[moff + j];
        if (s[j] > mx) mx = s[j];
    }
    return mx;
}

/* One forward's read-only views and outputs, shared by its workers. */
typedef struct FN(fwd_job) {
    const attn_geom *g;
    const REAL *qb, *kb, *vb, *mb;
    REAL *yb, *lse;
} FN(fwd_job);

/* Query heads [begin, end) of the flattened (batch row, head) pairs: each
 * pair's rows are computed whole by one worker, with its own scratch, so
 * the result does not depend on how the pairs are split. */
static teexec_status *FN(fwd_pairs)(void *ctx, size_t begin, size_t end, int worker)
{
    (void)worker;
    const FN(fwd_job) *jb = ctx;
    const attn_geom *g = jb->g;
    REAL *s = tx_te_malloc((size_t)g->skv, sizeof(REAL));
    double *acc = tx_te_malloc((size_t)g->dv, sizeof(double));
    if (!s || !acc) {
        free(s);
        free(acc);
        return tx_oom();
    }
    for (size_t pr = begin; pr < end; pr++) {
        const int64_t bi = (int64_t)pr / g->h, hi = (int64_t)pr % g->h;
        const int64_t kh = hi / (g->h / g->hk);
        for (int64_t i = 0; i < g->sq; i++) {
            REAL mx = FN(scores)(g, jb->qb, jb->kb, jb->mb, bi, hi, i, s);
            REAL *yr = jb->yb + at4(g, bi, i, g->sq, hi, g->h, 0, g->dv);
            REAL *l = jb->lse + (bi * g->h + hi) * g->sq + i;
            if (mx == (REAL)-INFINITY) {
                for (int64_t c = 0; c < g->dv; c++) yr[c] = K(0);
                *l = (REAL)-INFINITY;
                continue;
            }
            double sum = 0.0;
            for (int64_t c = 0; c < g->dv; c++) acc[c] = 0.0;
            for (int64_t j = 0; j < g->skv; j++) {
                if (s[j] == (REAL)-INFINITY) continue;
                REAL p = R_EXP(s[j] - mx);
                sum += p;
                const REAL *vr = jb->vb + at4(g, bi, j, g->skv, kh, g->hk, 0, g->dv);
                for (int64_t c = 0; c < g->dv; c++) acc[c] += (double)p * vr[c];
            }
            for (int64_t c = 0; c < g->dv; c++) yr[c] = (REAL)(acc[c] / sum);
            *l = mx + (REAL)log(sum);
        }
    }
    free(s);
    free(acc);
    return NULL;
}

static teexec_status *FN(attn_fwd)(const tx_te_fwd_args *a, const attn_geom *g, tx_tensor *lse_t)
{
    /* inputs in REAL already are read in place, and y is written straight
     * into the output when it is REAL and shares no byte with an input
     * (a planner may give y the buffer of an input that dies here) */
    const REAL *qb = NULL, *kb = NULL, *vb = NULL, *mb = NULL;
    REAL *qo = NULL, *ko = NULL, *vo = NULL, *mo = NULL;
    bool y_direct = a->output->dtype == TE_DTYPE && a->output->data &&
                    !tx_te_overlap(a->output, a->input) && !tx_te_overlap(a->output, g->k) &&
                    !tx_te_overlap(a->output, g->v) && !tx_te_overlap(a->output, g->mask);
    REAL *yb = y_direct ? (REAL *)a->output->data
                        : tx_te_malloc((size_t)a->output->numel, sizeof(REAL));
    REAL *lse = tx_te_malloc((size_t)(g->b * g->h * g->sq), sizeof(REAL));
    teexec_status *st = yb && lse ? NULL : tx_oom();
    if (!st) st = te_view(a->input, &qb, &qo);
    if (!st) st = te_view(g->k, &kb, &ko);
    if (!st) st = te_view(g->v, &vb, &vo);
    if (!st && g->mask && g->mask->dtype != TEEXEC_DTYPE_BOOL) st = te_view(g->mask, &mb, &mo);
    if (st) goto done;
    FN(fwd_job) jb = {g, qb, kb, vb, mb, yb, lse};
    st = tx_parallel_for((size_t)(g->b * g->h), attn_threads(g), FN(fwd_pairs), &jb);
    if (st) goto done;
    if (!y_direct) te_store(a->output, yb);
    if (lse_t) te_store(lse_t, lse);
done:
    free(qo);
    free(ko);
    free(vo);
    free(mo);
    if (!y_direct) free(yb);
    free(lse);
    return st;
}

static teexec_status *FN(attn_bwd)(const tx_te_bwd_args *a, const attn_geom *g, tx_tensor *dk_t,
                                   tx_tensor *dv_t)
{
    const tx_tensor *q = a->saved[0], *k = a->saved[1], *v = a->saved[2];
    REAL *qb = NULL, *kb = NULL, *vb = NULL, *mb = NULL, *yb = NULL, *dyb = NULL, *lse = NULL;
    double *dq = tx_te_calloc((size_t)q->numel, sizeof(double));
    double *dk = tx_te_calloc((size_t)k->numel, sizeof(double));
    double *dv = tx_te_calloc((size_t)v->numel, sizeof(double));
    REAL *s = tx_te_malloc((size_t)g->skv, sizeof(REAL));
    teexec_status *st = dq && dk && dv && s ? NULL : tx_oom();
    if (!st) st = te_load(q, &qb);
    if (!st) st = te_load(k, &kb);
    if (!st) st = te_load(v, &vb);
    if (!st && g->mask && g->mask->dtype != TEEXEC_DTYPE_BOOL) st = te_load(g->mask, &mb);
    if (!st) st = te_load(a->saved[4], &yb);
    if (!st) st = te_load(a->grad_output, &dyb);
    if (!st) st = te_load(a->saved[5], &lse);
    if (st) goto done;
    for (int64_t bi = 0; bi < g->b; bi++)
        for (int64_t hi = 0; hi < g->h; hi++)
            for (int64_t i = 0; i < g->sq; i++) {
                REAL l = lse[(bi * g->h + hi) * g->sq + i];
                if (l == (REAL)-INFINITY) continue;
                int64_t kh = hi / (g->h / g->hk);
                (void)FN(scores)(g, qb, kb, mb, bi, hi, i, s);
                int64_t yo = at4(g, bi, i, g->sq, hi, g->h, 0, g->dv);
                const REAL *dor = dyb + yo, *orow = yb + yo;
                double dd = 0.0;
                for (int64_t c = 0; c < g->dv; c++) dd += (double)dor[c] * orow[c];
                int64_t qo = at4(g, bi, i, g->sq, hi, g->h, 0, g->d);
                for (int64_t j = 0; j < g->skv; j++) {
                    if (s[j] == (REAL)-INFINITY) continue;
                    REAL p = R_EXP(s[j] - l);
                    int64_t vo = at4(g, bi, j, g->skv, kh, g->hk, 0, g->dv);
                    int64_t ko = at4(g, bi, j, g->skv, kh, g->hk, 0, g->d);
                    double dp = 0.0;
                    for (int64_t c = 0; c < g->dv; c++) {
                        dp += (double)dor[c] * vb[vo + c];
                        dv[vo + c] += (double)p * dor[c];
                    }
                    double ds = (double)p * (dp - dd) * g->scale;
                    for (int64_t c = 0; c < g->d; c++) {
                        dq[qo + c] += ds * kb[ko + c];
                        dk[ko + c] += ds * qb[qo + c];
                    }
                }
            }
    if (a->grad_input) tx_te_store_f64(a->grad_input, dq);
    if (dk_t) tx_te_store_f64(dk_t, dk);
    if (dv_t) tx_te_store_f64(dv_t, dv);
done:
    free(qb);
    free(kb);
    free(vb);
    free(mb);
    free(yb);
    free(dyb);
    free(lse);
    free(dq);
    free(dk);
    free(dv);
    free(s);
    return st;
}

#endif
