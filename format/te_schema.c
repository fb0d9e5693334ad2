/*
 * te_schema.c - the te.ops table and its shape/type rules (see te_schema.h).
 */
#include "format/te_schema.h"

#include "base/checked.h"
#include "base/dtype.h"

#include <stdio.h>
#include <string.h>

/* ---- shape rule helpers ---------------------------------------------- */

static teexec_status *bad(const char *op, const char *fmt, const char *detail)
{
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: %s%s", op, fmt, detail ? detail : "");
}

static const char *sh(const tx_shape *s, char *buf, size_t n) { return tx_shape_str(s, buf, n); }

/* Leading dims of `in` without its last `drop` dims. */
static tx_shape leading(const tx_shape *in, int drop)
{
    tx_shape s = *in;
    s.rank = in->rank >= drop ? in->rank - drop : 0;
    return s;
}

static teexec_status *need_rank_ge(const char *op, const char *what, const tx_shape *s, int r)
{
    if (s->rank >= r) return NULL;
    char b[128];
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: %s must have rank >= %d, got %s", op,
                    what, r, sh(s, b, sizeof b));
}

static teexec_status *infer_same(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    out->output = *in->input;
    return NULL;
}

/* AllGather / ReduceScatter: dim 0 times / divided by the world_size
 * attribute (the group the op runs over; 1: the identity). */
static teexec_status *comm_world(const tx_te_infer_in *in, const char *op, int64_t *w)
{
    *w = in->attrs[TX_TE_A_COMM_WORLD].i;
    if (*w < 1 || *w > 4096)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: world_size=%lld (1..4096)", op,
                        (long long)*w);
    return need_rank_ge(op, "x", &in->input->shape, 1);
}

static teexec_status *infer_all_gather(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    int64_t w;
    TX_TRY(comm_world(in, "AllGather", &w));
    out->output = *in->input;
    int64_t d = in->input->shape.dims[0];
    if (d >= 0 && w > 1) {
        if (d > INT64_MAX / w)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops AllGather: dim 0 overflows");
        out->output.shape.dims[0] = d * w;
    }
    return NULL;
}

static teexec_status *infer_reduce_scatter(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    int64_t w;
    TX_TRY(comm_world(in, "ReduceScatter", &w));
    out->output = *in->input;
    int64_t d = in->input->shape.dims[0];
    if (d >= 0 && w > 1) {
        if (d % w)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops ReduceScatter: dim 0 (%lld) is not a multiple of "
                            "world_size=%lld",
                            (long long)d, (long long)w);
        out->output.shape.dims[0] = d / w;
    }
    return NULL;
}

static teexec_status *infer_linear(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    const tx_shape *x = &in->input->shape, *w = &in->params[0]->shape;
    TX_TRY(need_rank_ge("Linear", "x", x, 1));
    char b1[128], b2[128];
    if (w->rank != 2 || w->dims[1] != x->dims[x->rank - 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops Linear: weight %s must be [N, K] with K = last dim of x %s",
                        sh(w, b1, sizeof b1), sh(x, b2, sizeof b2));
    out->output = *in->input;
    out->output.shape.dims[x->rank - 1] = w->dims[0];
    return NULL;
}

static teexec_status *infer_bias(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    const tx_shape *x = &in->input->shape, *b = &in->params[0]->shape;
    TX_TRY(need_rank_ge("Bias", "x", x, 1));
    char b1[128], b2[128];
    if (b->rank != 1 || b->dims[0] != x->dims[x->rank - 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops Bias: bias %s must be [N] with N = last dim of x %s",
                        sh(b, b1, sizeof b1), sh(x, b2, sizeof b2));
    out->output = *in->input;
    return NULL;
}

/* weight (and bias) shape = trailing dims of x (normalized_shape). */
static teexec_status *infer_norm(const char *op, const tx_te_infer_in *in, tx_te_infer_out *out,
                                 int n_stats)
{
    const tx_shape *x = &in->input->shape;
    char b1[128], b2[128];
    for (int p = 0; p < in->n_params; p++) {
        const tx_shape *w = &in->params[p]->shape;
        bool ok = w->rank >= 1 && w->rank <= x->rank;
        for (int d = 0; ok && d < w->rank; d++)
            ok = w->dims[d] == x->dims[x->rank - w->rank + d];
        if (p > 0) ok = ok && tx_shape_equal(w, &in->params[0]->shape);
        if (!ok)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: parameter %s must equal the trailing dims of x %s", op,
                            sh(w, b1, sizeof b1), sh(x, b2, sizeof b2));
    }
    out->output = *in->input;
    tx_shape rows = leading(x, in->params[0]->shape.rank);
    for (int i = 0; i < n_stats; i++) {
        out->aux[i].dtype = tx_dtype_stat(in->input->dtype);
        out->aux[i].shape = rows;
    }
    return NULL;
}

static teexec_status *infer_layer_norm(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    return infer_norm("LayerNorm", in, out, 2);
}

static teexec_status *infer_rms_norm(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    return infer_norm("RMSNorm", in, out, 1);
}

static teexec_status *infer_l2(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    TX_TRY(need_rank_ge("L2Normalization", "x", &in->input->shape, 1));
    out->output = *in->input;
    out->aux[0].dtype = tx_dtype_stat(in->input->dtype);
    out->aux[0].shape = leading(&in->input->shape, 1);
    return NULL;
}

/* Plain activations work row-wise on [..., H] (the CPU and CUDA kernels
 * refuse a scalar), so the rule does too: a rank-0 x is refused when a
 * session is created, not on its first run. */
static teexec_status *infer_unary(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    TX_TRY(need_rank_ge("activation", "x", &in->input->shape, 1));
    return infer_same(in, out);
}

static teexec_status *infer_gated(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    const tx_shape *x = &in->input->shape;
    TX_TRY(need_rank_ge("gated activation", "x", x, 1));
    if (x->dims[x->rank - 1] % 2 != 0) {
        char b[128];
        return bad("gated activation", "the last dim of x must be even ([gate | up]), got ",
                   sh(x, b, sizeof b));
    }
    out->output = *in->input;
    out->output.shape.dims[x->rank - 1] /= 2;
    return NULL;
}

/* SiTU's soft caps divide by beta1 and beta2: both must be finite and > 0
 * (TE refuses others the same way). */
static teexec_status *check_situ_betas(const tx_te_infer_in *in)
{
    for (int i = TX_TE_A_SITU_BETA1; i <= TX_TE_A_SITU_BETA2; i++) {
        double b = in->attrs[i].f;
        if (!(b > 0.0 && b <= 1e300)) {
            char buf[64];
            snprintf(buf, sizeof buf, "%s = %g", i == TX_TE_A_SITU_BETA1 ? "beta1" : "beta2", b);
            return bad("SiTUGLU", "beta1 and beta2 must be finite and > 0, got ", buf);
        }
    }
    return NULL;
}

static teexec_status *check_row_scales(const char *op, const tx_te_infer_in *in)
{
    const tx_shape *x = &in->input->shape;
    tx_shape rows = leading(x, 1);
    const tx_shape *s = &in->extra_inputs[0]->shape;
    if (!tx_shape_equal(s, &rows)) {
        char b1[128], b2[128];
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: scales %s must have the shape of x without its last dim %s",
                        op, sh(s, b1, sizeof b1), sh(&rows, b2, sizeof b2));
    }
    return NULL;
}

static teexec_status *infer_scaled_gated(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    TX_TRY(need_rank_ge("scaled gated activation", "x", &in->input->shape, 1));
    TX_TRY(check_row_scales("scaled gated activation", in));
    return infer_gated(in, out);
}

static teexec_status *infer_situ(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    TX_TRY(check_situ_betas(in));
    return infer_gated(in, out);
}

static teexec_status *infer_scaled_situ(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    TX_TRY(check_situ_betas(in));
    return infer_scaled_gated(in, out);
}

static teexec_status *infer_scaled_srelu(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    TX_TRY(need_rank_ge("ScaledSReLU", "x", &in->input->shape, 1));
    TX_TRY(check_row_scales("ScaledSReLU", in));
    return infer_same(in, out);
}

static teexec_status *infer_dropout(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    double p = in->attrs[TX_TE_A_DROPOUT_P].f;
    if (!(p >= 0.0 && p < 1.0)) {
        char b[64];
        snprintf(b, sizeof b, "%g", p);
        return bad("Dropout", "p must be in [0, 1), got ", b);
    }
    uint64_t n;
    TX_TRY(tx_shape_numel(&in->input->shape, &n));
    out->output = *in->input;
    out->aux[0].dtype = TEEXEC_DTYPE_UINT8;
    out->aux[0].shape.rank = 1;
    out->aux[0].shape.dims[0] = (int64_t)((n + 7) / 8);
    return NULL;
}

static teexec_status *infer_reshape(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    const tx_te_attr_value *a = &in->attrs[TX_TE_A_RESHAPE_SHAPE];
    out->output.dtype = in->input->dtype;
    teexec_status *st = tx_shape_reshape(&in->input->shape, a->ints, (size_t)a->n_ints, true,
                                         &out->output.shape);
    return st ? tx_status_prefix(st, "te.ops Reshape") : NULL;
}

static teexec_status *infer_add_extra(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    const tx_shape *x = &in->input->shape, *e = &in->extra_inputs[0]->shape;
    if (!tx_shape_equal(x, e)) {
        char b1[128], b2[128];
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops AddExtraInput: extra input %s must have the shape of x %s",
                        sh(e, b1, sizeof b1), sh(x, b2, sizeof b2));
    }
    out->output = *in->input;
    return NULL;
}

static teexec_status *infer_make_extra(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    out->output = *in->input;
    out->extra_outputs[0] = *in->input;
    return NULL;
}

static teexec_status *infer_grouped_linear(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    const tx_shape *x = &in->input->shape;
    int64_t g = in->attrs[TX_TE_A_GL_NUM_GROUPS].i;
    bool has_bias = in->attrs[TX_TE_A_GL_BIAS].i != 0;
    TX_TRY(need_rank_ge("GroupedLinear", "x", x, 1));
    const tx_shape *ss = &in->extra_inputs[0]->shape;
    char b1[128], b2[128];
    if (ss->rank != 1 || ss->dims[0] != g)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops GroupedLinear: split_sizes %s must be [num_groups] = [%lld]",
                        sh(ss, b1, sizeof b1), (long long)g);
    const tx_shape *w0 = &in->params[0]->shape;
    if (w0->rank != 2 || w0->dims[1] != x->dims[x->rank - 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops GroupedLinear: weight_0 %s must be [N, K] with K = last dim of x %s",
                        sh(w0, b1, sizeof b1), sh(x, b2, sizeof b2));
    for (int64_t i = 1; i < g; i++)
        if (!tx_shape_equal(&in->params[i]->shape, w0))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops GroupedLinear: weight_%lld %s differs from weight_0 %s",
                            (long long)i, sh(&in->params[i]->shape, b1, sizeof b1),
                            sh(w0, b2, sizeof b2));
    if (has_bias)
        for (int64_t i = 0; i < g; i++) {
            const tx_shape *b = &in->params[g + i]->shape;
            if (b->rank != 1 || b->dims[0] != w0->dims[0])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "te.ops GroupedLinear: bias_%lld %s must be [N] = [%lld]",
                                (long long)i, sh(b, b1, sizeof b1), (long long)w0->dims[0]);
        }
    out->output = *in->input;
    out->output.shape.dims[x->rank - 1] = w0->dims[0];
    return NULL;
}

/* q/k/v as [b, s, h, d] whatever the layout. */
static void bshd_dims(const tx_shape *t, int64_t layout, int64_t d[4])
{
    d[0] = layout == TX_TE_LAYOUT_BSHD ? t->dims[0] : t->dims[1];
    d[1] = layout == TX_TE_LAYOUT_BSHD ? t->dims[1] : t->dims[0];
    d[2] = t->dims[2];
    d[3] = t->dims[3];
}

/* a == b, or a >= b, where both dims are known (< 0: not known yet) */
static bool dim_eq(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }
static bool dim_ge(int64_t a, int64_t b) { return a < 0 || b < 0 || a >= b; }

teexec_status *tx_te_dpa_cache_check(const tx_te_dpa_cache_shapes *c)
{
    static const char *op = "DotProductAttention";
    char b1[128], b2[128], b3[128];
    if (!c->k_cache || !c->v_cache || !c->cache_len)
        return bad(op, "the cache mode needs k_cache, v_cache and cache_len together", NULL);
    if (c->mask)
        return bad(op, "the cache mode takes no mask (cache_len bounds every row's keys)", NULL);
    if (c->layout != TX_TE_LAYOUT_BSHD)
        return bad(op, "the cache mode needs qkv_format bshd", NULL);
    const tx_shape *q = &c->q->shape, *k = &c->k->shape, *v = &c->v->shape,
                   *kc = &c->k_cache->shape, *vc = &c->v_cache->shape, *cl = &c->cache_len->shape;
    if (kc->rank != 4 || vc->rank != 4 || q->rank != 4 || k->rank != 4 || v->rank != 4)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: k_cache %s and v_cache %s must have rank 4 [B, capacity, "
                        "h_kv, d]", op, sh(kc, b1, sizeof b1), sh(vc, b2, sizeof b2));
    if (!dim_eq(k->dims[1], q->dims[1]))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: in the cache mode k %s holds the queries' own tokens: its "
                        "seq must be q's %lld", op, sh(k, b1, sizeof b1), (long long)q->dims[1]);
    bool ok = dim_ge(kc->dims[0], q->dims[0]) && dim_eq(vc->dims[0], kc->dims[0]) &&
              dim_eq(vc->dims[1], kc->dims[1]) && dim_ge(kc->dims[1], q->dims[1]) &&
              dim_eq(kc->dims[2], k->dims[2]) && dim_eq(vc->dims[2], k->dims[2]) &&
              dim_eq(kc->dims[3], k->dims[3]) && dim_eq(vc->dims[3], v->dims[3]);
    if (!ok)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: k_cache %s and v_cache %s do not fit k %s: they need [B >= "
                        "b, capacity >= s, h_kv, d] (d_v for v_cache), one B and capacity",
                        op, sh(kc, b1, sizeof b1), sh(vc, b2, sizeof b2), sh(k, b3, sizeof b3));
    if (c->k_cache->dtype != c->k->dtype || c->v_cache->dtype != c->v->dtype)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: k_cache / v_cache are %s / %s; k and v are %s / %s", op,
                        teexec_dtype_name(c->k_cache->dtype), teexec_dtype_name(c->v_cache->dtype),
                        teexec_dtype_name(c->k->dtype), teexec_dtype_name(c->v->dtype));
    if (c->cache_len->dtype != TEEXEC_DTYPE_INT64 || cl->rank != 1 ||
        !dim_eq(cl->dims[0], q->dims[0]))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: cache_len must be int64 [%lld] (one count per batch row), "
                        "not %s %s", op, (long long)q->dims[0],
                        teexec_dtype_name(c->cache_len->dtype), sh(cl, b1, sizeof b1));
    return NULL;
}

static teexec_status *infer_dpa(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    static const char *op = "DotProductAttention";
    const tx_te_attr_value *a = in->attrs;
    int64_t layout = a[TX_TE_A_DPA_LAYOUT].i;
    const tx_shape *qs = &in->input->shape, *ks = &in->extra_inputs[0]->shape,
                   *vs = &in->extra_inputs[1]->shape;
    char b1[128], b2[128], b3[128];
    if (qs->rank != 4 || ks->rank != 4 || vs->rank != 4)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: q %s, k %s, v %s must all have rank 4 (bshd or sbhd)", op,
                        sh(qs, b1, sizeof b1), sh(ks, b2, sizeof b2), sh(vs, b3, sizeof b3));
    int64_t q[4], k[4], v[4];
    bshd_dims(qs, layout, q);
    bshd_dims(ks, layout, k);
    bshd_dims(vs, layout, v);
    bool ok = k[0] == q[0] && v[0] == q[0] && k[1] == v[1] && k[2] == v[2] && k[3] == q[3] &&
              k[2] >= 1 && q[2] % k[2] == 0;
    if (!ok)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: q %s, k %s, v %s do not fit: batch must agree, k and v share "
                        "seq and heads, k's head dim equals q's, and q heads must be a multiple "
                        "of kv heads", op, sh(qs, b1, sizeof b1), sh(ks, b2, sizeof b2),
                        sh(vs, b3, sizeof b3));
    if ((a[TX_TE_A_DPA_HEADS].i != 0 && a[TX_TE_A_DPA_HEADS].i != q[2]) ||
        (a[TX_TE_A_DPA_KV_HEADS].i != 0 && a[TX_TE_A_DPA_KV_HEADS].i != k[2]))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: num_attention_heads=%lld / num_gqa_groups=%lld disagree with "
                        "q %s and k %s", op, (long long)a[TX_TE_A_DPA_HEADS].i,
                        (long long)a[TX_TE_A_DPA_KV_HEADS].i, sh(qs, b1, sizeof b1),
                        sh(ks, b2, sizeof b2));
    const tx_te_tinfo *const *x = in->extra_inputs;
    int nx = in->n_extra_inputs;
    bool cache_mode = false;
    for (int i = TX_TE_DPA_IN_K_CACHE; i < nx; i++) cache_mode = cache_mode || x[i];
    if (cache_mode) {
        tx_te_dpa_cache_shapes c = {
            in->input, x[0], x[1], nx > TX_TE_DPA_IN_MASK ? x[TX_TE_DPA_IN_MASK] : NULL,
            nx > TX_TE_DPA_IN_K_CACHE ? x[TX_TE_DPA_IN_K_CACHE] : NULL,
            nx > TX_TE_DPA_IN_V_CACHE ? x[TX_TE_DPA_IN_V_CACHE] : NULL,
            nx > TX_TE_DPA_IN_CACHE_LEN ? x[TX_TE_DPA_IN_CACHE_LEN] : NULL, layout};
        TX_TRY(tx_te_dpa_cache_check(&c));
    } else if (in->n_extra_inputs > 2 && in->extra_inputs[2]) {
        const tx_shape *m = &in->extra_inputs[2]->shape;
        ok = m->rank == 4 && (m->dims[0] == 1 || m->dims[0] == q[0]) &&
             (m->dims[1] == 1 || m->dims[1] == q[2]) && m->dims[2] == q[1] && m->dims[3] == k[1];
        if (!ok)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: mask %s must be [b|1, h|1, s_q, s_kv] = [%lld|1, %lld|1, "
                            "%lld, %lld]", op, sh(m, b1, sizeof b1), (long long)q[0],
                            (long long)q[2], (long long)q[1], (long long)k[1]);
    }
    int64_t hd;
    if (__builtin_mul_overflow(q[2], v[3], &hd)) return bad(op, "output size overflows", NULL);
    out->output.dtype = in->input->dtype;
    out->output.shape.rank = 3;
    out->output.shape.dims[0] = qs->dims[0];
    out->output.shape.dims[1] = qs->dims[1];
    out->output.shape.dims[2] = hd;
    out->aux[0].dtype = tx_dtype_stat(in->input->dtype);
    out->aux[0].shape.rank = 3;
    out->aux[0].shape.dims[0] = q[0];
    out->aux[0].shape.dims[1] = q[2];
    out->aux[0].shape.dims[2] = q[1];
    return NULL;
}

static teexec_status *infer_rope(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    static const char *op = "RotaryEmbedding";
    const tx_shape *x = &in->input->shape;
    char b1[128], b2[128];
    if (x->rank != 4) return bad(op, "x must have rank 4 (bshd or sbhd), got ", sh(x, b1, sizeof b1));
    int64_t layout = in->attrs[TX_TE_A_ROPE_LAYOUT].i;
    int64_t s = layout == TX_TE_LAYOUT_BSHD ? x->dims[1] : x->dims[0];
    int64_t d = x->dims[3];
    const tx_te_tinfo *f = in->n_extra_inputs > 0 ? in->extra_inputs[0] : NULL;
    if (f) {
        const tx_shape *fs = &f->shape;
        if (fs->rank != 2 || fs->dims[0] < s || fs->dims[1] > d || fs->dims[1] % 2 != 0 ||
            fs->dims[1] < 2)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: freqs %s must be [>= seq, r] with r even, 2 <= r <= head "
                            "dim (x %s)", op, sh(fs, b1, sizeof b1), sh(x, b2, sizeof b2));
    } else {
        int64_t r = in->attrs[TX_TE_A_ROPE_DIM].i;
        if (r == 0) r = d;
        if (r < 2 || r > d || r % 2 != 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: rotary_dim %lld must be even, 2 <= it <= head dim (x %s)",
                            op, (long long)r, sh(x, b1, sizeof b1));
        if (!(in->attrs[TX_TE_A_ROPE_BASE].f > 0.0))
            return bad(op, "base must be > 0", NULL);
    }
    out->output = *in->input;
    return NULL;
}

static teexec_status *infer_embedding(const tx_te_infer_in *in, tx_te_infer_out *out)
{
    const tx_shape *ids = &in->input->shape, *w = &in->params[0]->shape;
    char b1[128];
    if (w->rank != 2) return bad("Embedding", "weight must be [V, D], got ", sh(w, b1, sizeof b1));
    if (ids->rank + 1 > TX_MAX_RANK) return bad("Embedding", "indices rank too large", NULL);
    out->output.dtype = in->params[0]->dtype;
    out->output.shape = *ids;
    out->output.shape.dims[ids->rank] = w->dims[1];
    out->output.shape.rank = ids->rank + 1;
    return NULL;
}

/* ---- the table -------------------------------------------------------- */

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define LIST(a) a, N_OF(a)
#define NONE NULL, 0

#define X_IN {"x", "T", "[..., H]", 0, "main input"}
#define Y_OUT {"y", "T", "[..., H]", 0, "main output"}
#define SAVE_X {"x", TX_TE_SRC_INPUT, 0, TX_TE_FOR_DX}

static const tx_te_port linear_params[] = {
    {"weight", "T", "[N, K]", 0, "trainable; y = x · weightᵀ"}};
static const tx_te_saved_schema linear_saved[] = {
    {"x", TX_TE_SRC_INPUT, 0, TX_TE_FOR_DPARAMS},
    {"weight", TX_TE_SRC_PARAM, 0, TX_TE_FOR_DX}};
static const tx_te_quantizer_slot linear_q[] = {
    {TX_TE_QMODE_FORWARD, TX_TE_QROLE_INPUT, "x"},
    {TX_TE_QMODE_FORWARD, TX_TE_QROLE_WEIGHT, "weight"},
    {TX_TE_QMODE_BACKWARD, TX_TE_QROLE_GRAD_OUTPUT, "dy"}};

static const tx_te_port bias_params[] = {{"bias", "T", "[N]", 0, "trainable (TE initialises it to 0)"}};

static const tx_te_port ln_params[] = {
    {"weight", "T", "[H]", 0, "gamma (trainable; the trailing dims of x)"},
    {"bias", "T", "[H]", 0, "beta (trainable)"}};
static const tx_te_port rms_params[] = {{"weight", "T", "[H]", 0, "gamma (trainable)"}};
static const tx_te_port ln_aux[] = {
    {"mu", "S", "[rows]", 0, "mean per row"},
    {"rsigma", "S", "[rows]", 0, "1/sqrt(var + eps) per row"}};
static const tx_te_port rms_aux[] = {{"rsigma", "S", "[rows]", 0, "1/sqrt(mean(x²) + eps) per row"}};
static const tx_te_attr_schema norm_attrs[] = {
    {"eps", TX_TE_ATTR_FLOAT, false, 0, 1e-5, NULL, "added to the variance inside the square root"},
    {"zero_centered_gamma", TX_TE_ATTR_INT, false, 0, 0, NULL,
     "1: the effective scale is 1 + weight"}};
static const tx_te_saved_schema ln_saved[] = {
    {"x", TX_TE_SRC_INPUT, 0, TX_TE_FOR_ALL},
    {"weight", TX_TE_SRC_PARAM, 0, TX_TE_FOR_DX},
    {"mu", TX_TE_SRC_AUX, 0, TX_TE_FOR_ALL},
    {"rsigma", TX_TE_SRC_AUX, 1, TX_TE_FOR_ALL}};
static const tx_te_saved_schema rms_saved[] = {
    {"x", TX_TE_SRC_INPUT, 0, TX_TE_FOR_ALL},
    {"weight", TX_TE_SRC_PARAM, 0, TX_TE_FOR_DX},
    {"rsigma", TX_TE_SRC_AUX, 0, TX_TE_FOR_ALL}};

static const tx_te_attr_schema l2_attrs[] = {
    {"eps", TX_TE_ATTR_FLOAT, false, 0, 1e-6, NULL, "added to the sum of squares"}};
static const tx_te_port l2_aux[] = {{"rsqrt_norm", "S", "[rows]", 0, "1/sqrt(Σx² + eps) per row"}};
static const tx_te_saved_schema l2_saved[] = {
    {"x", TX_TE_SRC_INPUT, 0, TX_TE_FOR_DX},
    {"rsqrt_norm", TX_TE_SRC_AUX, 0, TX_TE_FOR_DX}};

static const tx_te_saved_schema act_saved[] = {SAVE_X};
static const tx_te_attr_schema gelu_attrs[] = {
    {"approximate", TX_TE_ATTR_ENUM, false, TX_TE_GELU_TANH, 0, "tanh|none",
     "tanh: TE's default approximation; none: exact erf form"}};
static const tx_te_attr_schema clamped_attrs[] = {
    {"limit", TX_TE_ATTR_FLOAT, false, 0, 7.0, NULL, "clamp bound for gate (above) and up (both sides)"},
    {"alpha", TX_TE_ATTR_FLOAT, false, 0, 1.702, NULL, "sigmoid slope of the gate"},
    {"offset", TX_TE_ATTR_FLOAT, false, 0, 1.0, NULL, "added to the clamped up half"}};

static const tx_te_attr_schema situ_attrs[] = {
    {"beta1", TX_TE_ATTR_FLOAT, false, 0, 4.0, NULL, "gate soft cap (> 0)"},
    {"beta2", TX_TE_ATTR_FLOAT, false, 0, 25.0, NULL, "up soft cap (> 0)"}};

static const tx_te_port scales_in[] = {
    {"scales", "T", "[rows] = y.shape[:-1]", 0, "per-row output scale (e.g. MoE router probabilities)"}};
static const tx_te_saved_schema scaled_saved[] = {
    {"x", TX_TE_SRC_INPUT, 0, TX_TE_FOR_ALL},
    {"scales", TX_TE_SRC_EXTRA_INPUT, 0, TX_TE_FOR_DX}};

static const tx_te_attr_schema dropout_attrs[] = {
    {"p", TX_TE_ATTR_FLOAT, true, 0, 0, NULL, "drop probability, 0 <= p < 1"},
    {"seed", TX_TE_ATTR_INT, false, 0, 0, NULL, "Philox key; the executor supplies the counter offset per call (the trainer: a "
     "distinct one per step and node, from its seed option, the step and the node index)"}};
static const tx_te_port dropout_aux[] = {
    {"mask", "uint8", "[ceil(numel/8)]", 0, "1 bit per element, bit (i mod 8) of byte i/8, 1 = kept"}};
static const tx_te_saved_schema dropout_saved[] = {{"mask", TX_TE_SRC_AUX, 0, TX_TE_FOR_DX}};

static const tx_te_attr_schema quantize_attrs[] = {
    {"forward", TX_TE_ATTR_INT, false, 1, 0, NULL, "1: quantize y with the forward quantizer"},
    {"backward", TX_TE_ATTR_INT, false, 0, 0, NULL, "1: quantize dx with the backward quantizer"}};
static const tx_te_quantizer_slot quantize_q[] = {
    {TX_TE_QMODE_FORWARD, TX_TE_QROLE_INPUT, "y (iff forward=1)"},
    {TX_TE_QMODE_BACKWARD, TX_TE_QROLE_GRAD_OUTPUT, "dx (iff backward=1)"}};

static const tx_te_attr_schema reshape_attrs[] = {
    {"shape", TX_TE_ATTR_INTS, true, 0, 0, NULL, "target shape; one -1 is inferred (torch.reshape)"}};

static const tx_te_attr_schema comm_attrs[] = {
    {"world_size", TX_TE_ATTR_INT, false, 1, 0, NULL,
     "ranks of the tensor-parallel group; the run's group must have as many (1: the identity)"}};

static const tx_te_attr_schema scale_attrs[] = {
    {"scale", TX_TE_ATTR_FLOAT, true, 0, 0, NULL, "the constant s"}};

static const tx_te_port add_extra_in[] = {
    {"extra", "T", "x.shape", 0, "added to x (e.g. the residual)"}};
static const tx_te_port make_extra_out[] = {
    {"extra", "T", "x.shape", 0, "a copy of x (e.g. the residual branch)"}};

static const tx_te_port gl_extra_in[] = {
    {"split_sizes", "int64", "[G]", TX_TE_PORT_NO_GRAD,
     "rows of x per group, in order; sum <= rows of x"}};
static const tx_te_port gl_params[] = {
    {"weight_g", "T", "[N, K]", TX_TE_PORT_PER_GROUP, "one per group g = 0..G-1 (trainable)"},
    {"bias_g", "T", "[N]", TX_TE_PORT_PER_GROUP | TX_TE_PORT_OPTIONAL,
     "one per group, present iff bias=1 (trainable)"}};
static const tx_te_attr_schema gl_attrs[] = {
    {"num_groups", TX_TE_ATTR_INT, true, 0, 0, NULL, "G, the number of groups (experts)"},
    {"bias", TX_TE_ATTR_INT, false, 1, 0, NULL, "1: each group has a bias parameter"}};
static const tx_te_saved_schema gl_saved[] = {
    {"split_sizes", TX_TE_SRC_EXTRA_INPUT, 0, TX_TE_FOR_ALL},
    {"x", TX_TE_SRC_INPUT, 0, TX_TE_FOR_DPARAMS},
    {"params", TX_TE_SRC_PARAMS_ALL, 0, TX_TE_FOR_DX}};
static const tx_te_quantizer_slot gl_q[] = {
    {TX_TE_QMODE_FORWARD, TX_TE_QROLE_INPUT, "x_g (per group: slots in_0, w_0, in_1, w_1, ...)"},
    {TX_TE_QMODE_FORWARD, TX_TE_QROLE_WEIGHT, "weight_g (per group)"},
    {TX_TE_QMODE_BACKWARD, TX_TE_QROLE_GRAD_OUTPUT, "dy_g (per group)"}};

static const tx_te_port dpa_extra_in[] = {
    {"k", "T", "[b, s_kv, h_kv, d] (bshd) | [s_kv, b, h_kv, d] (sbhd)", 0, "keys"},
    {"v", "T", "[b, s_kv, h_kv, d_v] | [s_kv, b, h_kv, d_v]", 0, "values"},
    {"mask", "bool|T", "[b|1, h|1, s_q, s_kv]", TX_TE_PORT_OPTIONAL | TX_TE_PORT_NO_GRAD,
     "bool: true = masked out (TE's convention); float: added to the scores"},
    {"k_cache", "T", "[B >= b, capacity, h_kv, d] (bshd)", TX_TE_PORT_OPTIONAL | TX_TE_PORT_NO_GRAD,
     "cache mode: keys of the earlier runs, written in place (session state)"},
    {"v_cache", "T", "[B >= b, capacity, h_kv, d_v] (bshd)",
     TX_TE_PORT_OPTIONAL | TX_TE_PORT_NO_GRAD,
     "cache mode: values of the earlier runs, written in place (session state)"},
    {"cache_len", "int64", "[b]", TX_TE_PORT_OPTIONAL | TX_TE_PORT_NO_GRAD,
     "cache mode: tokens each row holds in the cache before this call"}};
static const tx_te_attr_schema dpa_attrs[] = {
    {"num_attention_heads", TX_TE_ATTR_INT, false, 0, 0, NULL, "h; 0 = taken from q (checked when set)"},
    {"num_gqa_groups", TX_TE_ATTR_INT, false, 0, 0, NULL, "h_kv; 0 = taken from k (checked when set)"},
    {"causal", TX_TE_ATTR_INT, false, 0, 0, NULL,
     "1: query i sees keys j <= i + s_kv - s_q (bottom-right aligned, = top-left when s_q = s_kv)"},
    {"scale", TX_TE_ATTR_FLOAT, false, 0, 0.0, NULL, "softmax scale; 0 = 1/sqrt(d)"},
    {"qkv_format", TX_TE_ATTR_ENUM, false, TX_TE_LAYOUT_BSHD, 0, "bshd|sbhd", "layout of q, k, v and y"}};
static const tx_te_port dpa_aux[] = {
    {"softmax_lse", "S", "[b, h, s_q]", 0, "log-sum-exp of each score row (-inf when fully masked)"}};
static const tx_te_saved_schema dpa_saved[] = {
    {"q", TX_TE_SRC_INPUT, 0, TX_TE_FOR_ALL},
    {"k", TX_TE_SRC_EXTRA_INPUT, 0, TX_TE_FOR_ALL},
    {"v", TX_TE_SRC_EXTRA_INPUT, 1, TX_TE_FOR_ALL},
    {"mask", TX_TE_SRC_EXTRA_INPUT, 2, TX_TE_FOR_ALL},
    {"y", TX_TE_SRC_OUTPUT, 0, TX_TE_FOR_ALL},
    {"softmax_lse", TX_TE_SRC_AUX, 0, TX_TE_FOR_ALL}};

static const tx_te_port rope_extra_in[] = {
    {"freqs", "T", "[>= s, r]", TX_TE_PORT_OPTIONAL | TX_TE_PORT_NO_GRAD,
     "rotation angles per position and rotated channel; absent: made from base"}};
static const tx_te_attr_schema rope_attrs[] = {
    {"qkv_format", TX_TE_ATTR_ENUM, false, TX_TE_LAYOUT_BSHD, 0, "bshd|sbhd", "layout of x"},
    {"interleaved", TX_TE_ATTR_INT, false, 0, 0, NULL,
     "0: rotate halves (x[j], x[j + r/2]); 1: rotate pairs (x[2i], x[2i+1])"},
    {"base", TX_TE_ATTR_FLOAT, false, 0, 10000.0, NULL, "theta base when freqs is absent"},
    {"rotary_dim", TX_TE_ATTR_INT, false, 0, 0, NULL, "r when freqs is absent; 0 = head dim"}};
static const tx_te_saved_schema rope_saved[] = {{"freqs", TX_TE_SRC_EXTRA_INPUT, 0, TX_TE_FOR_DX}};

static const tx_te_port emb_params[] = {{"weight", "T", "[V, D]", 0, "the table (trainable)"}};
static const tx_te_saved_schema emb_saved[] = {{"indices", TX_TE_SRC_INPUT, 0, TX_TE_FOR_DPARAMS}};

#define GELU_FWD \
    "y = 0.5·x·(1 + tanh(0.79788456·x·(1 + 0.044715·x²)))  (approximate=tanh)\n" \
    "y = 0.5·x·(1 + erf(x/√2))  (approximate=none)"
#define GELU_BWD \
    "dx = dy·(0.5·x·(1 − t²)·(0.79788456 + 0.1070322243·x²) + 0.5·(1 + t)), t = tanh(...) above\n" \
    "dx = dy·(0.5·(1 + erf(x/√2)) + x·exp(−x²/2)/√(2π))  (approximate=none)"

#define ACT_ENTRY(ID, FN, NAME, SUMMARY, FWD, BWD)                                            \
    {ID, NAME, SUMMARY, X_IN, NONE, NONE, Y_OUT, NONE, NONE, NONE, LIST(act_saved), NONE,     \
     "y has the shape and type of x", FWD, BWD, infer_unary, TX_TE_CLASS_ACTIVATION, FN,      \
     TX_TE_CAP_NONE}

#define GATED_ENTRY_R(ID, NAME, ATTRS, NATTRS, FN, CAP, FWD, BWD, INFER)                   \
    {ID, NAME, "gated activation: x = [a | b] on the last dim, y = act(a)·b",               \
     {"x", "T", "[..., 2H] = [a | b]", 0, "main input: a = first half (gate), b = second half"}, \
     NONE, NONE, {"y", "T", "[..., H]", 0, "main output"}, NONE, NONE, ATTRS, NATTRS,         \
     LIST(act_saved), NONE, "x's last dim must be even; y = x with the last dim halved", FWD, \
     BWD, INFER, TX_TE_CLASS_ACTIVATION | TX_TE_CLASS_GATED, FN, CAP}
#define GATED_ENTRY(ID, NAME, ATTRS, NATTRS, FN, CAP, FWD, BWD) \
    GATED_ENTRY_R(ID, NAME, ATTRS, NATTRS, FN, CAP, FWD, BWD, infer_gated)

/* A gated activation with a per-row output scale (extra input 0). */
#define SCALED_GATED_ENTRY(ID, NAME, SUMMARY, ATTRS, NATTRS, FN, CAP, FWD, BWD, INFER)     \
    {ID, NAME, SUMMARY, {"x", "T", "[..., 2H] = [a | b]", 0, "main input"}, LIST(scales_in),  \
     NONE, {"y", "T", "[..., H]", 0, "main output"}, NONE, NONE, ATTRS, NATTRS,               \
     LIST(scaled_saved), NONE, "as the unscaled op; scales = y.shape[:-1]", FWD, BWD,         \
     INFER,                                                                                   \
     TX_TE_CLASS_ACTIVATION | TX_TE_CLASS_GATED | TX_TE_CLASS_ROW_SCALED, FN, CAP}

#define SITU_FWD(SCALE) \
    "y = β1·tanh(a/β1)·σ(a) · β2·tanh(b/β2)" SCALE
#define SITU_BWD(SCALE) \
    "t = tanh(a/β1), u = tanh(b/β2), s = σ(a);  g = dy" SCALE ";\n" \
    "da = g·β2·u·((1 − t²)·s + β1·t·s·(1 − s));  db = g·β1·t·s·(1 − u²)" 

static const tx_te_op_schema table[TX_TE_OP_COUNT] = {
    {TX_TE_LINEAR, "Linear", "matrix multiply with a [N, K] weight (TE BasicLinear; no bias)",
     {"x", "T", "[..., K]", 0, "main input"}, NONE, LIST(linear_params),
     {"y", "T", "[..., N]", 0, "main output"}, NONE, NONE, NONE, LIST(linear_saved),
     LIST(linear_q), "y = x with the last dim K replaced by N; weight must be [N, K]",
     "Y = X · Wᵀ over X = x flattened to [M, K]", "dX = dY · W;  dW = dYᵀ · X", infer_linear, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_BIAS, "Bias", "add a bias along the last dim",
     {"x", "T", "[..., N]", 0, "main input"}, NONE, LIST(bias_params),
     {"y", "T", "[..., N]", 0, "main output"}, NONE, NONE, NONE, NONE, NONE,
     "y has the shape and type of x; bias is [last dim of x]", "y = x + bias",
     "dx = dy;  dbias = Σ over all but the last dim of dy", infer_bias, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_LAYER_NORM, "LayerNorm", "layer normalisation over the trailing dims given by weight",
     X_IN, NONE, LIST(ln_params), Y_OUT, NONE, LIST(ln_aux), LIST(norm_attrs), LIST(ln_saved), NONE,
     "y has the shape and type of x; weight and bias equal the trailing dims of x; mu and "
     "rsigma have the leading dims",
     "mu = mean(x), rsigma = 1/sqrt(var(x) + eps) (population variance) per row;\n"
     "x̂ = (x − mu)·rsigma;  y = x̂·γ' + bias,  γ' = weight (or 1 + weight if zero_centered_gamma)",
     "g = dy·γ';  dx = rsigma·(g − mean(g) − x̂·mean(g·x̂));\n"
     "dweight = Σ_rows dy·x̂;  dbias = Σ_rows dy", infer_layer_norm, TX_TE_CLASS_NORM,
     TX_TE_ACT_NONE, TX_TE_CAP_NONE},
    {TX_TE_RMS_NORM, "RMSNorm", "root-mean-square normalisation over the trailing dims",
     X_IN, NONE, LIST(rms_params), Y_OUT, NONE, LIST(rms_aux), LIST(norm_attrs), LIST(rms_saved), NONE,
     "y has the shape and type of x; weight equals the trailing dims of x",
     "rsigma = 1/sqrt(mean(x²) + eps) per row;  x̂ = x·rsigma;  y = x̂·γ'",
     "g = dy·γ';  dx = rsigma·(g − x̂·mean(g·x̂));  dweight = Σ_rows dy·x̂", infer_rms_norm, TX_TE_CLASS_NORM,
     TX_TE_ACT_NONE, TX_TE_CAP_NONE},
    {TX_TE_L2_NORMALIZATION, "L2Normalization", "scale each row to unit L2 norm",
     X_IN, NONE, NONE, Y_OUT, NONE, LIST(l2_aux), LIST(l2_attrs), LIST(l2_saved), NONE,
     "y has the shape and type of x",
     "r = 1/sqrt(Σ_last x² + eps);  y = x·r",
     "dx = r·(dy − x·Σ(x·dy)/(Σx² + eps))", infer_l2, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_GELU, "GELU", "Gaussian error linear unit", X_IN, NONE, NONE, Y_OUT, NONE, NONE,
     LIST(gelu_attrs), LIST(act_saved), NONE, "y has the shape and type of x", GELU_FWD, GELU_BWD,
     infer_unary, TX_TE_CLASS_ACTIVATION, TX_TE_ACT_GELU, TX_TE_CAP_NONE},
    ACT_ENTRY(TX_TE_QGELU, TX_TE_ACT_QGELU, "QGELU", "quick GELU", "y = x·σ(1.702·x)",
              "dx = dy·(1.702·x·σ·(1 − σ) + σ),  σ = σ(1.702·x)"),
    ACT_ENTRY(TX_TE_RELU, TX_TE_ACT_RELU, "ReLU", "rectified linear unit", "y = max(x, 0)",
              "dx = dy·(x > 0 ? 1 : 0)"),
    ACT_ENTRY(TX_TE_SRELU, TX_TE_ACT_SRELU, "SReLU", "squared ReLU", "y = x > 0 ? x² : 0",
              "dx = dy·max(2x, 0)"),
    ACT_ENTRY(TX_TE_SILU, TX_TE_ACT_SILU, "SiLU", "sigmoid linear unit (swish)", "y = x·σ(x)",
              "dx = dy·(x·σ·(1 − σ) + σ)"),
    GATED_ENTRY(TX_TE_GLU, "GLU", NULL, 0, TX_TE_ACT_SIGMOID, TX_TE_CAP_NONE, "y = σ(a)·b",
                "da = dy·b·σ(a)·(1 − σ(a));  db = dy·σ(a)"),
    GATED_ENTRY(TX_TE_GEGLU, "GEGLU", gelu_attrs, N_OF(gelu_attrs), TX_TE_ACT_GELU, TX_TE_CAP_NONE, "y = gelu(a)·b  (gelu as GELU, same approximate)",
                "da = dy·b·gelu'(a);  db = dy·gelu(a)"),
    GATED_ENTRY(TX_TE_QGEGLU, "QGEGLU", NULL, 0, TX_TE_ACT_QGELU, TX_TE_CAP_NONE, "y = qgelu(a)·b", "da = dy·b·qgelu'(a);  db = dy·qgelu(a)"),
    GATED_ENTRY(TX_TE_REGLU, "ReGLU", NULL, 0, TX_TE_ACT_RELU, TX_TE_CAP_NONE, "y = relu(a)·b", "da = dy·b·(a > 0);  db = dy·relu(a)"),
    GATED_ENTRY(TX_TE_SREGLU, "SReGLU", NULL, 0, TX_TE_ACT_SRELU, TX_TE_CAP_NONE, "y = srelu(a)·b",
                "da = dy·b·max(2a, 0);  db = dy·srelu(a)"),
    GATED_ENTRY(TX_TE_SWIGLU, "SwiGLU", NULL, 0, TX_TE_ACT_SILU, TX_TE_CAP_NONE, "y = silu(a)·b",
                "da = dy·b·silu'(a);  db = dy·silu(a)"),
    GATED_ENTRY(TX_TE_CLAMPED_SWIGLU, "ClampedSwiGLU", clamped_attrs, N_OF(clamped_attrs), TX_TE_ACT_QGELU, TX_TE_CAP_CLAMP,
                "ã = min(a, limit);  b̃ = clamp(b, −limit, limit) + offset;\n"
                "y = ã·σ(alpha·ã)·b̃",
                "da = dy·b̃·(a <= limit ? d/dã[ã·σ(alpha·ã)] : 0);\n"
                "db = dy·(|b| <= limit ? 1 : 0)·ã·σ(alpha·ã)"),
    {TX_TE_SCALED_SWIGLU, "ScaledSwiGLU", "SwiGLU with a per-row output scale",
     {"x", "T", "[..., 2H] = [a | b]", 0, "main input"}, LIST(scales_in), NONE,
     {"y", "T", "[..., H]", 0, "main output"}, NONE, NONE, NONE, LIST(scaled_saved), NONE,
     "as SwiGLU; scales = y.shape[:-1]",
     "y[r, :] = silu(a[r, :])·b[r, :]·scales[r]",
     "da = scales·dy·b·silu'(a);  db = scales·dy·silu(a);\n"
     "dscales[r] = Σ_j dy[r, j]·silu(a[r, j])·b[r, j]", infer_scaled_gated,
     TX_TE_CLASS_ACTIVATION | TX_TE_CLASS_GATED | TX_TE_CLASS_ROW_SCALED, TX_TE_ACT_SILU,
     TX_TE_CAP_NONE},
    {TX_TE_SCALED_SRELU, "ScaledSReLU", "squared ReLU with a per-row output scale", X_IN,
     LIST(scales_in), NONE, Y_OUT, NONE, NONE, NONE, LIST(scaled_saved), NONE,
     "y has the shape and type of x; scales = x.shape[:-1]",
     "y[r, :] = srelu(x[r, :])·scales[r]",
     "dx = scales·dy·max(2x, 0);  dscales[r] = Σ_j dy[r, j]·srelu(x[r, j])", infer_scaled_srelu,
     TX_TE_CLASS_ACTIVATION | TX_TE_CLASS_ROW_SCALED, TX_TE_ACT_SRELU, TX_TE_CAP_NONE},
    GATED_ENTRY_R(TX_TE_SITUGLU, "SiTUGLU", situ_attrs, N_OF(situ_attrs), TX_TE_ACT_SITU,
                  TX_TE_CAP_SOFTCAP, SITU_FWD(""), SITU_BWD(""), infer_situ),
    SCALED_GATED_ENTRY(TX_TE_SCALED_SITUGLU, "ScaledSiTUGLU", "SiTUGLU with a per-row output scale",
                       situ_attrs, N_OF(situ_attrs), TX_TE_ACT_SITU, TX_TE_CAP_SOFTCAP,
                       SITU_FWD("·scales[r]"),
                       SITU_BWD("·scales[r]") ";\ndscales[r] = Σ_j dy[r, j]·β1·tanh(a/β1)·σ(a)·"
                       "β2·tanh(b/β2)", infer_scaled_situ),
    SCALED_GATED_ENTRY(TX_TE_SCALED_CLAMPED_QGEGLU, "ScaledClampedQGeGLU",
                       "ClampedSwiGLU with a per-row output scale", clamped_attrs,
                       N_OF(clamped_attrs), TX_TE_ACT_QGELU, TX_TE_CAP_CLAMP,
                       "y[r, :] = ClampedSwiGLU(x[r, :])·scales[r] (same attributes)",
                       "as ClampedSwiGLU with dy·scales[r];\n"
                       "dscales[r] = Σ_j dy[r, j]·ClampedSwiGLU(x)[r, j]", infer_scaled_gated),
    {TX_TE_DROPOUT, "Dropout", "seeded inverted dropout (identity in inference)", X_IN, NONE,
     NONE, Y_OUT, NONE, LIST(dropout_aux), LIST(dropout_attrs), LIST(dropout_saved), NONE,
     "y has the shape and type of x; p in [0, 1)",
     "training: element i is dropped iff byte (i mod 16) of Philox4x32-10(counter = {i/16, "
     "offset}, key = seed) (little-endian bytes of the four words) < floor(p·256);\n"
     "y = kept ? x/(1 − p) : 0.  inference: y = x",
     "dx = dy·mask/(1 − p)", infer_dropout, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_QUANTIZE, "Quantize", "exposes a quantizer to its neighbours", X_IN, NONE, NONE,
     Y_OUT, NONE, NONE, LIST(quantize_attrs), NONE, LIST(quantize_q),
     "y has the shape and type of x",
     "y = q(x) with the recipe's forward quantizer (iff forward=1); identity without a recipe",
     "dx = q_bwd(dy) (iff backward=1); identity without a recipe", infer_same, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_RESHAPE, "Reshape", "view with another shape", X_IN, NONE, NONE,
     {"y", "T", "shape", 0, "main output"}, NONE, NONE, LIST(reshape_attrs), NONE, NONE,
     "y = x reshaped to shape (same element count)", "y = reshape(x, shape)",
     "dx = reshape(dy, x.shape)", infer_reshape, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_IDENTITY, "Identity", "pass-through", X_IN, NONE, NONE, Y_OUT, NONE, NONE, NONE,
     NONE, NONE, "y has the shape and type of x", "y = x", "dx = dy", infer_same, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_CONSTANT_SCALE, "ConstantScale", "multiply by a constant", X_IN, NONE, NONE, Y_OUT,
     NONE, NONE, LIST(scale_attrs), NONE, NONE, "y has the shape and type of x", "y = scale·x",
     "dx = scale·dy", infer_same, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_ADD_EXTRA_INPUT, "AddExtraInput", "add a tensor from outside the chain (residual)",
     X_IN, LIST(add_extra_in), NONE, Y_OUT, NONE, NONE, NONE, NONE, NONE,
     "y has the shape and type of x; extra has x's shape", "y = x + extra",
     "dx = dy;  dextra = dy", infer_add_extra, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_MAKE_EXTRA_OUTPUT, "MakeExtraOutput", "fork the main value out of the chain", X_IN,
     NONE, NONE, Y_OUT, LIST(make_extra_out), NONE, NONE, NONE, NONE,
     "y and extra have the shape and type of x", "y = x;  extra = x",
     "dx = dy + dextra (an absent dextra counts as 0)", infer_make_extra, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_GROUPED_LINEAR, "GroupedLinear", "one Linear (+ bias) per group of consecutive rows (MoE experts)",
     {"x", "T", "[..., K]", 0, "main input, flattened to [M, K]"}, LIST(gl_extra_in),
     LIST(gl_params), {"y", "T", "[..., N]", 0, "main output"}, NONE, NONE, LIST(gl_attrs),
     LIST(gl_saved), LIST(gl_q),
     "y = x with the last dim K replaced by N; split_sizes is [G]; every weight_g is [N, K], "
     "every bias_g [N]; parameters are ordered weight_0..weight_{G-1}, bias_0..bias_{G-1}",
     "rows are split in order by split_sizes: Y_g = X_g · W_gᵀ + b_g;\n"
     "rows past sum(split_sizes) belong to no group: y = 0 there",
     "dX_g = dY_g · W_g;  dW_g = dY_gᵀ · X_g;  db_g = Σ_rows dY_g;\n"
     "rows past sum(split_sizes): dx = 0, no parameter gradient", infer_grouped_linear, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_DOT_PRODUCT_ATTENTION, "DotProductAttention",
     "scaled dot-product attention with GQA, causal and explicit masks",
     {"q", "T", "[b, s_q, h, d] (bshd) | [s_q, b, h, d] (sbhd)", 0, "queries (main input)"},
     LIST(dpa_extra_in), NONE,
     {"y", "T", "[b, s_q, h·d_v] (bshd) | [s_q, b, h·d_v] (sbhd)", 0, "heads concatenated"},
     NONE, LIST(dpa_aux), LIST(dpa_attrs), LIST(dpa_saved), NONE,
     "q, k, v rank 4 in qkv_format; k and v share b, s_kv, h_kv; h is a multiple of h_kv; "
     "y = [b, s_q, h·d_v] (or sbhd)",
     "query head i uses kv head i/(h/h_kv);  S = scale·Q·Kᵀ (+ float mask; −inf where bool "
     "mask is true or causal hides);\nP = softmax(S) per row;  O = P·V;  softmax_lse = "
     "logsumexp(S) per row; a fully masked row gives O = 0;\n"
     "cache mode (k_cache given): first k_cache[r, cache_len[r] + i] = k[r, i] and likewise v, in "
     "place; then attention over the cache, query i of row r at position cache_len[r] + i seeing "
     "cache positions j <= cache_len[r] + i (causal) or j < cache_len[r] + s_q; inference only",
     "P recomputed from q, k and softmax_lse;  D = rowsum(dO ∘ O);  dV = Pᵀ·dO;\n"
     "dS = P ∘ (dO·Vᵀ − D);  dQ = scale·dS·K;  dK = scale·dSᵀ·Q (summed over the query heads "
     "sharing a kv head)", infer_dpa, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_ROTARY_EMBEDDING, "RotaryEmbedding", "rotary position embedding (RoPE) on q or k",
     {"x", "T", "[b, s, h, d] (bshd) | [s, b, h, d] (sbhd)", 0, "main input"},
     LIST(rope_extra_in), NONE, {"y", "T", "x.shape", 0, "main output"}, NONE, NONE,
     LIST(rope_attrs), LIST(rope_saved), NONE,
     "y has the shape and type of x; freqs is [>= s, r], r even and <= d",
     "f = freqs[pos] (or, when absent, θ_i = pos·base^(−2i/r), f[j] = θ_(j mod r/2) for halves, "
     "θ_(j/2) when interleaved);\n"
     "on the first r channels y = x·cos f + rot(x)·sin f with rot(x)[j] = −x[j + r/2] (j < r/2), "
     "x[j − r/2] (j >= r/2), or for pairs rot(x)[2i] = −x[2i+1], rot(x)[2i+1] = x[2i];\n"
     "channels >= r pass through",
     "dx = dy·cos f + rotᵀ(dy·sin f) on the first r channels (rotᵀ = −rot);  dx = dy on the "
     "rest;  no gradient for freqs", infer_rope, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_EMBEDDING, "Embedding", "table lookup",
     {"indices", "int64|int32", "[...]", TX_TE_PORT_NO_GRAD, "row numbers, 0 <= i < V"}, NONE,
     LIST(emb_params), {"y", "T", "[..., D]", 0, "main output, the table's dtype"}, NONE, NONE,
     NONE, LIST(emb_saved), NONE, "y = indices.shape + [D], the dtype of weight",
     "y[..., :] = weight[indices[...], :]", "dweight[v, :] = Σ over positions with index v of dy",
     infer_embedding, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_ALL_GATHER, "AllGather", "gather along dim 0 over the tensor-parallel group", X_IN,
     NONE, NONE, Y_OUT, NONE, NONE, LIST(comm_attrs), NONE, NONE,
     "y is x with dim 0 times world_size, the type of x",
     "y = the ranks' x concatenated along dim 0 in rank order (world_size 1: y = x)",
     "dx = reduce_scatter(dy) (world_size 1: dx = dy)", infer_all_gather, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_ALL_REDUCE, "AllReduce", "sum over the tensor-parallel group", X_IN, NONE, NONE,
     Y_OUT, NONE, NONE, NONE, NONE, NONE, "y has the shape and type of x",
     "y = all_reduce_sum(x) (world size 1: y = x)", "dx = dy", infer_same, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
    {TX_TE_REDUCE_SCATTER, "ReduceScatter", "sum and split along dim 0 over the group", X_IN,
     NONE, NONE, Y_OUT, NONE, NONE, LIST(comm_attrs), NONE, NONE,
     "y is x with dim 0 divided by world_size (a multiple of it), the type of x",
     "y = block `rank` (along dim 0) of the sum of the ranks' x (world_size 1: y = x)",
     "dx = all_gather(dy) (world_size 1: dx = dy)", infer_reduce_scatter, 0, TX_TE_ACT_NONE,
     TX_TE_CAP_NONE},
};

const tx_te_op_schema *tx_te_schema(tx_te_op_id id)
{
    if ((int)id < 0 || id >= TX_TE_OP_COUNT) return NULL;
    return &table[id];
}

bool tx_te_op_is(tx_te_op_id id, unsigned classes)
{
    const tx_te_op_schema *s = tx_te_schema(id);
    return s && (s->op_class & classes) == classes;
}

bool tx_te_op_is_unscaled_act(tx_te_op_id id)
{
    return tx_te_op_is(id, TX_TE_CLASS_ACTIVATION) && !tx_te_op_is(id, TX_TE_CLASS_ROW_SCALED);
}

bool tx_te_op_is_elementwise_act(tx_te_op_id id)
{
    return tx_te_op_is_unscaled_act(id) && !tx_te_op_is(id, TX_TE_CLASS_GATED);
}

const tx_te_op_schema *tx_te_schema_find(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < TX_TE_OP_COUNT; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

int tx_te_attr_index(const tx_te_op_schema *s, const char *name)
{
    for (int i = 0; i < s->n_attrs; i++)
        if (strcmp(s->attrs[i].name, name) == 0) return i;
    return -1;
}

void tx_te_attr_defaults(const tx_te_op_schema *s, tx_te_attr_value *out)
{
    for (int i = 0; i < s->n_attrs; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (s->attrs[i].required) continue;
        out[i].i = s->attrs[i].def_i;
        out[i].f = s->attrs[i].def_f;
    }
}

int tx_te_attr_enum_index(const tx_te_attr_schema *a, const char *text)
{
    if (a->type != TX_TE_ATTR_ENUM || !text) return -1;
    size_t n = strlen(text);
    const char *p = a->choices;
    for (int idx = 0; p && *p; idx++) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, text, n) == 0) return idx;
        p = e ? e + 1 : NULL;
    }
    return -1;
}

const char *tx_te_attr_enum_name(const tx_te_attr_schema *a, int64_t index, char *buf, size_t size)
{
    if (size == 0) return buf;
    buf[0] = '\0';
    const char *p = a->choices;
    for (int64_t idx = 0; p && *p; idx++) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (idx == index) {
            if (len >= size) len = size - 1;
            memcpy(buf, p, len);
            buf[len] = '\0';
            return buf;
        }
        p = e ? e + 1 : NULL;
    }
    return buf;
}

teexec_status *tx_te_param_count(const tx_te_op_schema *s, const tx_te_attr_value *attrs, int *out)
{
    if (s->id != TX_TE_GROUPED_LINEAR) {
        *out = s->n_params;
        return NULL;
    }
    int64_t g = attrs[TX_TE_A_GL_NUM_GROUPS].i;
    if (g < 1 || g > 65536)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops GroupedLinear: num_groups must be in [1, 65536], got %lld",
                        (long long)g);
    *out = (int)(attrs[TX_TE_A_GL_BIAS].i ? 2 * g : g);
    return NULL;
}

/* Does dtype dt match a port type like "T", "int64|int32", "bool|T"? */
static bool type_matches(const char *type, teexec_dtype dt)
{
    const char *p = type;
    while (p && *p) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 1 && p[0] == 'T') {
            if (tx_dtype_is_real(dt)) return true;
        } else {
            const char *name = teexec_dtype_name(dt);
            if (strlen(name) == len && strncmp(name, p, len) == 0) return true;
        }
        p = e ? e + 1 : NULL;
    }
    return false;
}

static teexec_status *check_type(const tx_te_op_schema *s, const char *role, const tx_te_port *port,
                                 const tx_te_tinfo *t)
{
    if (type_matches(port->type, t->dtype)) return NULL;
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                    "te.ops %s: %s '%s' has type %s, expected %s%s", s->name, role, port->name,
                    teexec_dtype_name(t->dtype), port->type,
                    strcmp(port->type, "T") == 0 ? " (float32|float16|bfloat16|float64)" : "");
}

teexec_status *tx_te_infer(const tx_te_op_schema *s, const tx_te_infer_in *in, tx_te_infer_out *out)
{
    if (!s || !in || !in->input || (!in->attrs && s->n_attrs > 0) || !out)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops: tx_te_infer: missing argument");
    memset(out, 0, sizeof *out);
    for (int i = 0; i < s->n_attrs; i++) {
        const tx_te_attr_schema *a = &s->attrs[i];
        if (a->type == TX_TE_ATTR_ENUM) {
            char b[32];
            if (!tx_te_attr_enum_name(a, in->attrs[i].i, b, sizeof b)[0])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "te.ops %s: attribute %s=%lld is not one of %s", s->name, a->name,
                                (long long)in->attrs[i].i, a->choices);
        }
        if (a->type == TX_TE_ATTR_INTS && in->attrs[i].n_ints > 0 && !in->attrs[i].ints)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: attribute %s has no values",
                            s->name, a->name);
    }
    TX_TRY(check_type(s, "input", &s->input, in->input));
    if (in->n_extra_inputs != s->n_extra_inputs || (s->n_extra_inputs && !in->extra_inputs))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: expected %d extra input slot(s), got %d", s->name,
                        s->n_extra_inputs, in->n_extra_inputs);
    for (int i = 0; i < s->n_extra_inputs; i++) {
        const tx_te_port *p = &s->extra_inputs[i];
        if (!in->extra_inputs[i]) {
            if (p->flags & TX_TE_PORT_OPTIONAL) continue;
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: extra input '%s' is missing",
                            s->name, p->name);
        }
        TX_TRY(check_type(s, "extra input", p, in->extra_inputs[i]));
    }
    int np = 0;
    TX_TRY(tx_te_param_count(s, in->attrs, &np));
    if (in->n_params != np || (np && !in->params))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: expected %d parameter(s), got %d", s->name, np, in->n_params);
    for (int i = 0; i < np; i++) {
        const tx_te_port *p = s->id == TX_TE_GROUPED_LINEAR
                                  ? &s->params[i / (int)in->attrs[TX_TE_A_GL_NUM_GROUPS].i]
                                  : &s->params[i];
        if (!in->params[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: parameter '%s' is missing",
                            s->name, p->name);
        TX_TRY(check_type(s, "parameter", p, in->params[i]));
    }
    return s->infer(in, out);
}
