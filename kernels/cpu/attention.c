/* attention.c - the ONNX Attention op (opset 23) and its FP64 backward.
 *
 * Per batch entry b and query head h (kv head h / (Hq / Hkv): each kv head
 * serves consecutive query heads, as ONNX's GQA repeats them):
 *     S = scale * Q K^T                  [Lq, T]   (qk_matmul_output, mode 0)
 *     S = softcap * tanh(S / softcap)    when softcap > 0
 *     Z = S + bias                       bias: attn_mask (bool: 0 / -inf, float:
 *                                        added; a mask shorter than T is padded
 *                                        with -inf) and is_causal (-inf where
 *                                        j > i + past_sequence_length)
 *     Y = softmax(Z) V                   [Lq, Dv]
 * with K and V the past cache followed by the new keys/values (T = past +
 * Lk); present_key/present_value return those. A row whose every score is
 * masked has no softmax: it comes out NaN, as in ONNX's reference and in
 * teexec's Softmax.
 *
 * Numbers: float32/float16/bfloat16 compute in float32 (BLAS sgemm for both
 * products, the softmax sum in double) and round once at the outputs;
 * float64 computes in double. The backward is FP64 only (the trainer's
 * precision) and recomputes the probabilities. Scratch is freed before
 * returning; no state; thread-safe. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/kcommon.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OP "Attention"

typedef struct attn_geom {
    int64_t b, hq, hkv, lq, lk, past, t, d, dv, reps;
    bool rank3;
    double scale, softcap;
    bool causal;
    /* mask: its last dim (<= t) and element strides over (b, h, i, j) */
    int64_t mask_t, mst[4];
} attn_geom;

static bool float_dt(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_DOUBLE || dt == TEEXEC_DTYPE_FLOAT16 ||
           dt == TEEXEC_DTYPE_BFLOAT16;
}

static teexec_status *geom_of(const tx_attention_params *p, const tx_attention_inputs *in,
                              attn_geom *g)
{
    const tx_tensor *q = in->q, *k = in->k, *v = in->v;
    TX_TRY(tx_check_tensor(OP, "Q", q));
    TX_TRY(tx_check_tensor(OP, "K", k));
    TX_TRY(tx_check_tensor(OP, "V", v));
    if (!float_dt(q->dtype)) return tx_err_dtype(OP, q->dtype);
    if (k->dtype != q->dtype) return tx_err_dtype_mismatch(OP, "K", k->dtype, q->dtype);
    if (v->dtype != q->dtype) return tx_err_dtype_mismatch(OP, "V", v->dtype, q->dtype);
    if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        OP ": Q, K and V must all be rank 3 or all rank 4 (got %d, %d, %d)",
                        (int)q->rank, (int)k->rank, (int)v->rank);
    memset(g, 0, sizeof(*g));
    g->rank3 = q->rank == 3;
    g->b = q->dims[0];
    if (k->dims[0] != g->b || v->dims[0] != g->b)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, OP ": Q has batch %lld but K/V have %lld",
                        (long long)g->b, (long long)(k->dims[0] != g->b ? k->dims[0] : v->dims[0]));
    if (g->rank3) {
        if (p->q_num_heads < 1 || p->kv_num_heads < 1)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": rank-3 Q/K/V need the q_num_heads and kv_num_heads attributes");
        g->hq = p->q_num_heads;
        g->hkv = p->kv_num_heads;
        g->lq = q->dims[1];
        g->lk = k->dims[1];
        if (v->dims[1] != g->lk)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, OP ": K has %lld positions but V has %lld",
                            (long long)g->lk, (long long)v->dims[1]);
        if (q->dims[2] % g->hq || k->dims[2] % g->hkv || v->dims[2] % g->hkv)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": the hidden sizes of Q, K, V (%lld, %lld, %lld) must divide by "
                               "their head counts (%lld, %lld)",
                            (long long)q->dims[2], (long long)k->dims[2], (long long)v->dims[2],
                            (long long)g->hq, (long long)g->hkv);
        g->d = q->dims[2] / g->hq;
        if (k->dims[2] / g->hkv != g->d)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": Q's head size is %lld but K's is %lld", (long long)g->d,
                            (long long)(k->dims[2] / g->hkv));
        g->dv = v->dims[2] / g->hkv;
    } else {
        g->hq = q->dims[1];
        g->hkv = k->dims[1];
        g->lq = q->dims[2];
        g->lk = k->dims[2];
        g->d = q->dims[3];
        g->dv = v->dims[3];
        if (v->dims[1] != g->hkv || v->dims[2] != g->lk)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": V [%lld, %lld, %lld, %lld] does not match K's heads/positions",
                            (long long)v->dims[0], (long long)v->dims[1], (long long)v->dims[2],
                            (long long)v->dims[3]);
        if (k->dims[3] != g->d)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": Q's head size is %lld but K's is %lld", (long long)g->d,
                            (long long)k->dims[3]);
        if ((p->q_num_heads && p->q_num_heads != g->hq) ||
            (p->kv_num_heads && p->kv_num_heads != g->hkv))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": q_num_heads/kv_num_heads contradict the rank-4 inputs");
    }
    if (g->hkv < 1 || g->hq % g->hkv != 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        OP ": %lld query heads cannot share %lld kv heads", (long long)g->hq,
                        (long long)g->hkv);
    g->reps = g->hq / g->hkv;
    const tx_tensor *pk = in->past_key, *pv = in->past_value;
    if ((pk == NULL) != (pv == NULL))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        OP ": past_key and past_value must be given together");
    if (pk) {
        TX_TRY(tx_check_tensor(OP, "past_key", pk));
        TX_TRY(tx_check_tensor(OP, "past_value", pv));
        if (pk->dtype != q->dtype)
            return tx_err_dtype_mismatch(OP, "past_key", pk->dtype, q->dtype);
        if (pv->dtype != q->dtype)
            return tx_err_dtype_mismatch(OP, "past_value", pv->dtype, q->dtype);
        if (pk->rank != 4 || pk->dims[0] != g->b || pk->dims[1] != g->hkv || pk->dims[3] != g->d)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": past_key must be [batch, kv_num_heads, past, head_size]");
        if (pv->rank != 4 || pv->dims[0] != g->b || pv->dims[1] != g->hkv ||
            pv->dims[2] != pk->dims[2] || pv->dims[3] != g->dv)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": past_value must be [batch, kv_num_heads, past, v_head_size]");
        g->past = pk->dims[2];
    }
    g->t = g->past + g->lk;
    g->scale = p->has_scale ? (double)p->scale : 1.0 / sqrt((double)g->d);
    g->softcap = p->softcap;
    g->causal = p->is_causal;
    if (!(g->softcap >= 0))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, OP ": softcap must be >= 0");
    const tx_tensor *m = in->mask;
    if (m) {
        TX_TRY(tx_check_tensor(OP, "attn_mask", m));
        if (m->dtype != TEEXEC_DTYPE_BOOL && m->dtype != q->dtype)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            OP ": attn_mask must be bool or Q's dtype %s, not %s",
                            teexec_dtype_name(q->dtype), teexec_dtype_name(m->dtype));
        if (m->rank < 1 || m->rank > 4)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, OP ": attn_mask must have rank 1 to 4");
        int64_t full[4] = {g->b, g->hq, g->lq, g->t}, s = 1;
        for (int32_t i = 3; i >= 0; i--) {
            int32_t mi = i - (4 - m->rank);
            if (mi < 0) {
                g->mst[i] = 0;
                continue;
            }
            int64_t dm = m->dims[mi];
            bool fits = i == 3 ? (dm >= 1 && dm <= g->t) : (dm == 1 || dm == full[i]);
            if (!fits)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                OP ": attn_mask dim %d (%lld) does not broadcast to [%lld, %lld, "
                                   "%lld, %lld]",
                                (int)mi, (long long)dm, (long long)full[0], (long long)full[1],
                                (long long)full[2], (long long)full[3]);
            g->mst[i] = (dm == 1 && i < 3) ? 0 : s;
            if (i == 3) g->mask_t = dm;
            s *= dm;
        }
    }
    if (g->lq > INT_MAX || g->t > INT_MAX || g->d > INT_MAX || g->dv > INT_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, OP ": a dim exceeds the BLAS int range");
    return NULL;
}

static void fill4(tx_shape *s, int64_t a, int64_t b, int64_t c, int64_t d)
{
    s->rank = 4;
    s->dims[0] = a;
    s->dims[1] = b;
    s->dims[2] = c;
    s->dims[3] = d;
}

static tx_shape y_shape(const attn_geom *g)
{
    tx_shape s;
    if (g->rank3) {
        s.rank = 3;
        s.dims[0] = g->b;
        s.dims[1] = g->lq;
        s.dims[2] = g->hq * g->dv;
    } else {
        fill4(&s, g->b, g->hq, g->lq, g->dv);
    }
    return s;
}

/* Element offset of (b, h, l, 0) in a Q/K/V-shaped tensor of the inputs'
 * layout ([B, L, H*D] for rank 3, [B, H, L, D] for rank 4). */
static size_t off_in(const attn_geom *g, int64_t b, int64_t h, int64_t l, int64_t H, int64_t L,
                     int64_t D)
{
    return g->rank3 ? (size_t)(((b * L + l) * H + h) * D) : (size_t)(((b * H + h) * L + l) * D);
}

/* The bias of one query row (b, h, i) over the T keys, from the mask as
 * converted by mask_values (NULL: no mask). */
static void bias_row(const attn_geom *g, const double *mv, int64_t b, int64_t h, int64_t i,
                     double *row)
{
    for (int64_t j = 0; j < g->t; j++) row[j] = 0.0;
    if (mv) {
        const double *m = mv + b * g->mst[0] + h * g->mst[1] + i * g->mst[2];
        for (int64_t j = 0; j < g->mask_t; j++) row[j] = m[j * g->mst[3]];
        for (int64_t j = g->mask_t; j < g->t; j++) row[j] = -INFINITY;
    }
    if (g->causal)
        for (int64_t j = i + g->past + 1; j < g->t; j++) row[j] = -INFINITY;
}

/* The mask as additive values (bool: 0 where true, -inf where false). */
static teexec_status *mask_values(const tx_tensor *m, double **out)
{
    *out = NULL;
    if (!m) return NULL;
    double *v = malloc((size_t)m->numel * sizeof(double) + 1);
    if (!v) return tx_oom();
    if (m->dtype == TEEXEC_DTYPE_BOOL) {
        const uint8_t *b = m->data;
        for (uint64_t i = 0; i < m->numel; i++) v[i] = b[i] ? 0.0 : -INFINITY;
    } else {
        tx_load_f64(m->dtype, m->data, 0, (size_t)m->numel, v);
    }
    *out = v;
    return NULL;
}

/* Copies Q/K/V-layout elements (or a past cache, always [B, H, P, D]) into
 * a contiguous [B, H, Ltot, D] buffer at position `at` of its L axis. */
static void gather_bhld_f32(const attn_geom *g, const tx_tensor *src, bool cache, int64_t H,
                            int64_t L, int64_t D, int64_t Ltot, int64_t at, float *dst)
{
    for (int64_t b = 0; b < g->b; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t l = 0; l < L; l++) {
                size_t so =
                    cache ? (size_t)(((b * H + h) * L + l) * D) : off_in(g, b, h, l, H, L, D);
                tx_load_f32(src->dtype, src->data, so, (size_t)D,
                            dst + ((b * H + h) * Ltot + at + l) * D);
            }
}

static void gather_bhld_f64(const attn_geom *g, const tx_tensor *src, bool cache, int64_t H,
                            int64_t L, int64_t D, int64_t Ltot, int64_t at, double *dst)
{
    for (int64_t b = 0; b < g->b; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t l = 0; l < L; l++) {
                size_t so =
                    cache ? (size_t)(((b * H + h) * L + l) * D) : off_in(g, b, h, l, H, L, D);
                tx_load_f64(src->dtype, src->data, so, (size_t)D,
                            dst + ((b * H + h) * Ltot + at + l) * D);
            }
}

static teexec_status *check_out(const char *what, tx_tensor *t, teexec_dtype dt, const tx_shape *s)
{
    if (!t) return NULL;
    TX_TRY(tx_check_tensor(OP, what, t));
    if (t->dtype != dt) return tx_err_dtype_mismatch(OP, what, t->dtype, dt);
    if (!tx_tensor_has_shape(t, s)) return tx_err_shape(OP, what, t, s);
    return NULL;
}

/* One (b, h) softmax over rows of z [lq, t] in place; sums in double. */
static void softmax_rows_f32(float *z, int64_t lq, int64_t t)
{
    for (int64_t i = 0; i < lq; i++) {
        float *r = z + i * t, mx = -INFINITY;
        for (int64_t j = 0; j < t; j++) mx = r[j] > mx ? r[j] : mx;
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < t; j++) r[j] = NAN;
            continue;
        }
        double s = 0;
        for (int64_t j = 0; j < t; j++) {
            r[j] = tx_expf_fast(r[j] - mx);
            s += r[j];
        }
        float inv = (float)(1.0 / s);
        for (int64_t j = 0; j < t; j++) r[j] *= inv;
    }
}

static void softmax_rows_f64(double *z, int64_t lq, int64_t t)
{
    for (int64_t i = 0; i < lq; i++) {
        double *r = z + i * t, mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < t; j++) mx = r[j] > mx ? r[j] : mx;
        if (mx == -INFINITY) {
            for (int64_t j = 0; j < t; j++) r[j] = NAN;
            continue;
        }
        for (int64_t j = 0; j < t; j++) {
            r[j] = exp(r[j] - mx);
            s += r[j];
        }
        for (int64_t j = 0; j < t; j++) r[j] /= s;
    }
}

teexec_status *tx_cpu_attention(const tx_attention_params *p, const tx_attention_inputs *in,
                                const tx_attention_outputs *out)
{
    attn_geom g;
    TX_TRY(geom_of(p, in, &g));
    teexec_dtype dt = in->q->dtype;
    tx_shape ys = y_shape(&g), pks, pvs, qks;
    fill4(&pks, g.b, g.hkv, g.t, g.d);
    fill4(&pvs, g.b, g.hkv, g.t, g.dv);
    fill4(&qks, g.b, g.hq, g.lq, g.t);
    if (!out->y) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, OP ": output Y is missing");
    TX_TRY(check_out("Y", out->y, dt, &ys));
    TX_TRY(check_out("present_key", out->present_key, dt, &pks));
    TX_TRY(check_out("present_value", out->present_value, dt, &pvs));
    TX_TRY(check_out("qk_matmul_output", out->qk, dt, &qks));

    bool f64 = dt == TEEXEC_DTYPE_DOUBLE;
    size_t es = f64 ? sizeof(double) : sizeof(float);
    size_t nq = (size_t)(g.b * g.hq * g.lq * g.d), nk = (size_t)(g.b * g.hkv * g.t * g.d);
    size_t nv = (size_t)(g.b * g.hkv * g.t * g.dv), ns = (size_t)(g.lq * g.t);
    size_t ny = (size_t)(g.lq * g.dv);
    char *qc = malloc(nq * es + 1), *kc = malloc(nk * es + 1), *vc = malloc(nv * es + 1);
    char *sc = malloc(ns * es + 1), *yc = malloc(ny * es + 1);
    double *brow = malloc((size_t)g.t * sizeof(double) + 1), *mv = NULL;
    teexec_status *st =
        (qc && kc && vc && sc && yc && brow) ? mask_values(in->mask, &mv) : tx_oom();
    if (st) goto done;
    if (f64) {
        gather_bhld_f64(&g, in->q, false, g.hq, g.lq, g.d, g.lq, 0, (double *)qc);
        if (in->past_key) {
            gather_bhld_f64(&g, in->past_key, true, g.hkv, g.past, g.d, g.t, 0, (double *)kc);
            gather_bhld_f64(&g, in->past_value, true, g.hkv, g.past, g.dv, g.t, 0, (double *)vc);
        }
        gather_bhld_f64(&g, in->k, false, g.hkv, g.lk, g.d, g.t, g.past, (double *)kc);
        gather_bhld_f64(&g, in->v, false, g.hkv, g.lk, g.dv, g.t, g.past, (double *)vc);
    } else {
        gather_bhld_f32(&g, in->q, false, g.hq, g.lq, g.d, g.lq, 0, (float *)qc);
        if (in->past_key) {
            gather_bhld_f32(&g, in->past_key, true, g.hkv, g.past, g.d, g.t, 0, (float *)kc);
            gather_bhld_f32(&g, in->past_value, true, g.hkv, g.past, g.dv, g.t, 0, (float *)vc);
        }
        gather_bhld_f32(&g, in->k, false, g.hkv, g.lk, g.d, g.t, g.past, (float *)kc);
        gather_bhld_f32(&g, in->v, false, g.hkv, g.lk, g.dv, g.t, g.past, (float *)vc);
    }
    if (out->present_key) {
        if (f64)
            tx_store_f64(dt, out->present_key->data, 0, nk, (const double *)kc);
        else
            tx_store_f32(dt, out->present_key->data, 0, nk, (const float *)kc);
    }
    if (out->present_value) {
        if (f64)
            tx_store_f64(dt, out->present_value->data, 0, nv, (const double *)vc);
        else
            tx_store_f32(dt, out->present_value->data, 0, nv, (const float *)vc);
    }
    if (out->y->numel == 0) goto done;
    int D = (int)g.d, DV = (int)g.dv, LQ = (int)g.lq, T = (int)g.t;
    for (int64_t b = 0; b < g.b; b++)
        for (int64_t h = 0; h < g.hq; h++) {
            int64_t hk = h / g.reps;
            size_t qo = (size_t)((b * g.hq + h) * g.lq * g.d);
            size_t ko = (size_t)((b * g.hkv + hk) * g.t * g.d);
            size_t vo = (size_t)((b * g.hkv + hk) * g.t * g.dv);
            size_t qko = (size_t)((b * g.hq + h) * g.lq * g.t);
            if (f64) {
                double *s = (double *)sc, *yv = (double *)yc;
                if (T > 0 && D > 0)
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, LQ, T, D, g.scale,
                                (const double *)qc + qo, D, (const double *)kc + ko, D, 0.0, s, T);
                else
                    memset(s, 0, ns * es);
                if (out->qk) tx_store_f64(dt, out->qk->data, qko, ns, s);
                for (int64_t i = 0; i < g.lq; i++) {
                    double *r = s + i * g.t;
                    bias_row(&g, mv, b, h, i, brow);
                    for (int64_t j = 0; j < g.t; j++) {
                        double z = g.softcap > 0 ? g.softcap * tanh(r[j] / g.softcap) : r[j];
                        r[j] = z + brow[j];
                    }
                }
                softmax_rows_f64(s, g.lq, g.t);
                if (DV > 0)
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, LQ, DV, T, 1.0, s, T,
                                (const double *)vc + vo, DV, 0.0, yv, DV);
                for (int64_t i = 0; i < g.lq; i++) {
                    size_t yo = off_in(&g, b, h, i, g.hq, g.lq, g.dv);
                    if (T == 0)
                        for (int64_t e = 0; e < g.dv; e++) yv[i * g.dv + e] = NAN;
                    tx_store_f64(dt, out->y->data, yo, (size_t)g.dv, yv + i * g.dv);
                }
            } else {
                float *s = (float *)sc, *yv = (float *)yc;
                if (T > 0 && D > 0)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, LQ, T, D, (float)g.scale,
                                (const float *)qc + qo, D, (const float *)kc + ko, D, 0.0f, s, T);
                else
                    memset(s, 0, ns * es);
                if (out->qk) tx_store_f32(dt, out->qk->data, qko, ns, s);
                float cap = (float)g.softcap;
                for (int64_t i = 0; i < g.lq; i++) {
                    float *r = s + i * g.t;
                    bias_row(&g, mv, b, h, i, brow);
                    for (int64_t j = 0; j < g.t; j++) {
                        float z = cap > 0 ? cap * tanhf(r[j] / cap) : r[j];
                        r[j] = z + (float)brow[j];
                    }
                }
                softmax_rows_f32(s, g.lq, g.t);
                if (DV > 0)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, LQ, DV, T, 1.0f, s, T,
                                (const float *)vc + vo, DV, 0.0f, yv, DV);
                for (int64_t i = 0; i < g.lq; i++) {
                    size_t yo = off_in(&g, b, h, i, g.hq, g.lq, g.dv);
                    if (T == 0)
                        for (int64_t e = 0; e < g.dv; e++) yv[i * g.dv + e] = NAN;
                    tx_store_f32(dt, out->y->data, yo, (size_t)g.dv, yv + i * g.dv);
                }
            }
        }
done:
    free(qc);
    free(kc);
    free(vc);
    free(sc);
    free(yc);
    free(brow);
    free(mv);
    return st;
}

/* ---- backward (FP64) ----------------------------------------------------- */

static teexec_status *check_grad(const char *what, const tx_tensor *t, const tx_tensor *like)
{
    if (!t) return NULL;
    TX_TRY(tx_check_tensor(OP, what, t));
    if (t->dtype != TEEXEC_DTYPE_DOUBLE) return tx_err_dtype(OP, t->dtype);
    tx_shape s = tx_shape_of(like);
    if (!tx_tensor_has_shape(t, &s)) return tx_err_shape(OP, what, t, &s);
    return NULL;
}

/* Adds a contiguous [B, H, Ltot, D] buffer's rows [at, at + L) into a
 * tensor of the inputs' layout (cache: [B, H, L, D]). */
static void scatter_bhld(const attn_geom *g, const double *src, bool cache, int64_t H, int64_t L,
                         int64_t D, int64_t Ltot, int64_t at, double *dst)
{
    for (int64_t b = 0; b < g->b; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t l = 0; l < L; l++) {
                size_t o =
                    cache ? (size_t)(((b * H + h) * L + l) * D) : off_in(g, b, h, l, H, L, D);
                const double *s = src + ((b * H + h) * Ltot + at + l) * D;
                for (int64_t e = 0; e < D; e++) dst[o + (size_t)e] += s[e];
            }
}

teexec_status *tx_cpu_attention_backward(const tx_attention_params *p,
                                         const tx_attention_inputs *in,
                                         const tx_attention_grads *gr)
{
    attn_geom g;
    TX_TRY(geom_of(p, in, &g));
    if (in->q->dtype != TEEXEC_DTYPE_DOUBLE) return tx_err_dtype(OP, in->q->dtype);
    tx_shape ys = y_shape(&g), pks, pvs, qks;
    fill4(&pks, g.b, g.hkv, g.t, g.d);
    fill4(&pvs, g.b, g.hkv, g.t, g.dv);
    fill4(&qks, g.b, g.hq, g.lq, g.t);
    const teexec_dtype D64 = TEEXEC_DTYPE_DOUBLE;
    TX_TRY(check_out("dY", (tx_tensor *)gr->gy, D64, &ys));
    TX_TRY(check_out("d present_key", (tx_tensor *)gr->g_present_key, D64, &pks));
    TX_TRY(check_out("d present_value", (tx_tensor *)gr->g_present_value, D64, &pvs));
    TX_TRY(check_out("d qk_matmul_output", (tx_tensor *)gr->g_qk, D64, &qks));
    TX_TRY(check_grad("dQ", gr->gq, in->q));
    TX_TRY(check_grad("dK", gr->gk, in->k));
    TX_TRY(check_grad("dV", gr->gv, in->v));
    if (gr->gpast_key && !in->past_key)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, OP ": d past_key without past_key");
    if (gr->gpast_key) TX_TRY(check_grad("d past_key", gr->gpast_key, in->past_key));
    if (gr->gpast_value) TX_TRY(check_grad("d past_value", gr->gpast_value, in->past_value));
    if (gr->gmask) {
        if (!in->mask || in->mask->dtype != D64)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            OP ": a mask gradient needs a float (double) mask");
        TX_TRY(check_grad("d attn_mask", gr->gmask, in->mask));
    }

    size_t nq = (size_t)(g.b * g.hq * g.lq * g.d), nk = (size_t)(g.b * g.hkv * g.t * g.d);
    size_t nv = (size_t)(g.b * g.hkv * g.t * g.dv), ns = (size_t)(g.lq * g.t);
    size_t ny = (size_t)(g.lq * g.dv);
    double *q = malloc(nq * 8 + 8), *k = malloc(nk * 8 + 8), *v = malloc(nv * 8 + 8);
    double *dq = calloc(nq + 1, 8), *dk = calloc(nk + 1, 8), *dv = calloc(nv + 1, 8);
    double *sraw = malloc(ns * 8 + 8), *pr = malloc(ns * 8 + 8), *dp = malloc(ns * 8 + 8);
    double *gyc = malloc(ny * 8 + 8), *brow = malloc((size_t)g.t * 8 + 8), *mv = NULL;
    teexec_status *st = (q && k && v && dq && dk && dv && sraw && pr && dp && gyc && brow)
                            ? mask_values(in->mask, &mv)
                            : tx_oom();
    if (st) goto done;
    gather_bhld_f64(&g, in->q, false, g.hq, g.lq, g.d, g.lq, 0, q);
    if (in->past_key) {
        gather_bhld_f64(&g, in->past_key, true, g.hkv, g.past, g.d, g.t, 0, k);
        gather_bhld_f64(&g, in->past_value, true, g.hkv, g.past, g.dv, g.t, 0, v);
    }
    gather_bhld_f64(&g, in->k, false, g.hkv, g.lk, g.d, g.t, g.past, k);
    gather_bhld_f64(&g, in->v, false, g.hkv, g.lk, g.dv, g.t, g.past, v);
    /* present_key/value are the concatenated caches: their gradients add
     * straight onto the concatenated dK/dV */
    if (gr->g_present_key)
        for (size_t i = 0; i < nk; i++) dk[i] += ((const double *)gr->g_present_key->data)[i];
    if (gr->g_present_value)
        for (size_t i = 0; i < nv; i++) dv[i] += ((const double *)gr->g_present_value->data)[i];
    int D = (int)g.d, DV = (int)g.dv, LQ = (int)g.lq, T = (int)g.t;
    bool need_scores = gr->gy || gr->g_qk;
    for (int64_t b = 0; b < g.b && need_scores && T > 0; b++)
        for (int64_t h = 0; h < g.hq; h++) {
            int64_t hk = h / g.reps;
            size_t qo = (size_t)((b * g.hq + h) * g.lq * g.d);
            size_t ko = (size_t)((b * g.hkv + hk) * g.t * g.d);
            size_t vo = (size_t)((b * g.hkv + hk) * g.t * g.dv);
            size_t qko = (size_t)((b * g.hq + h) * g.lq * g.t);
            if (D > 0)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, LQ, T, D, g.scale, q + qo, D,
                            k + ko, D, 0.0, sraw, T);
            else
                memset(sraw, 0, ns * 8);
            /* dS (w.r.t. the raw scaled scores) accumulates in dp */
            memset(dp, 0, ns * 8);
            if (gr->gy) {
                for (int64_t i = 0; i < g.lq; i++) {
                    bias_row(&g, mv, b, h, i, brow);
                    for (int64_t j = 0; j < g.t; j++) {
                        double s = sraw[i * g.t + j];
                        double z = g.softcap > 0 ? g.softcap * tanh(s / g.softcap) : s;
                        pr[i * g.t + j] = z + brow[j];
                    }
                }
                softmax_rows_f64(pr, g.lq, g.t);
                for (int64_t i = 0; i < g.lq; i++) {
                    size_t yo = off_in(&g, b, h, i, g.hq, g.lq, g.dv);
                    memcpy(gyc + i * g.dv, (const double *)gr->gy->data + yo, (size_t)g.dv * 8);
                }
                /* dV += P^T dY;  dP = dY V^T */
                if (DV > 0) {
                    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, DV, LQ, 1.0, pr, T, gyc,
                                DV, 1.0, dv + vo, DV);
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, LQ, T, DV, 1.0, gyc, DV,
                                v + vo, DV, 0.0, dp, T);
                }
                for (int64_t i = 0; i < g.lq; i++) {
                    double *pi = pr + i * g.t, *di = dp + i * g.t, dot = 0;
                    for (int64_t j = 0; j < g.t; j++) dot += pi[j] * di[j];
                    for (int64_t j = 0; j < g.t; j++) di[j] = pi[j] * (di[j] - dot);
                }
                if (gr->gmask) {
                    double *gm = gr->gmask->data;
                    for (int64_t i = 0; i < g.lq; i++) {
                        double *m = gm + b * g.mst[0] + h * g.mst[1] + i * g.mst[2];
                        for (int64_t j = 0; j < g.mask_t; j++) m[j * g.mst[3]] += dp[i * g.t + j];
                    }
                }
                if (g.softcap > 0)
                    for (size_t e = 0; e < ns; e++) {
                        double th = tanh(sraw[e] / g.softcap);
                        dp[e] *= 1 - th * th;
                    }
            }
            if (gr->g_qk) {
                const double *gq = (const double *)gr->g_qk->data + qko;
                for (size_t e = 0; e < ns; e++) dp[e] += gq[e];
            }
            /* dQ += scale dS K;  dK += scale dS^T Q */
            if (D > 0) {
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, LQ, D, T, g.scale, dp, T,
                            k + ko, D, 1.0, dq + qo, D);
                cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, LQ, g.scale, dp, T,
                            q + qo, D, 1.0, dk + ko, D);
            }
        }
    if (gr->gq) scatter_bhld(&g, dq, false, g.hq, g.lq, g.d, g.lq, 0, gr->gq->data);
    if (gr->gk) scatter_bhld(&g, dk, false, g.hkv, g.lk, g.d, g.t, g.past, gr->gk->data);
    if (gr->gv) scatter_bhld(&g, dv, false, g.hkv, g.lk, g.dv, g.t, g.past, gr->gv->data);
    if (gr->gpast_key) scatter_bhld(&g, dk, true, g.hkv, g.past, g.d, g.t, 0, gr->gpast_key->data);
    if (gr->gpast_value)
        scatter_bhld(&g, dv, true, g.hkv, g.past, g.dv, g.t, 0, gr->gpast_value->data);
done:
    free(q);
    free(k);
    free(v);
    free(dq);
    free(dk);
    free(dv);
    free(sraw);
    free(pr);
    free(dp);
    free(gyc);
    free(brow);
    free(mv);
    return st;
}
