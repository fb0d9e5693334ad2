/*
 * cpu_fused.c - the CPU kernels of the fusion catalog (see cpu_fused.h for
 * the bit-identity promise and why each kernel is shaped as it is).
 *
 * The scalar activation functions below restate kernels/cpu/te_activation.c's
 * float pass expression for expression: any change there must be made here
 * too (tests/exec/test_fused_contract.c fails otherwise).
 */
#include "exec/cpu_fused.h"

#include "base/half.h"
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define K(x) ((float)(x))

/* ---- helpers ---------------------------------------------------------------- */

/* v rounded to dt and back: the value an unfused kernel would have stored
 * and the next one loaded. */
static inline float rt(teexec_dtype dt, float v)
{
    switch (dt) {
    case TEEXEC_DTYPE_BFLOAT16: return tx_bf16_to_f32(tx_f32_to_bf16(v));
    case TEEXEC_DTYPE_FLOAT16: return tx_f16_to_f32(tx_f32_to_f16(v));
    default: return v;
    }
}

static teexec_status *need_f32_path(const char *what, const tx_tensor *t)
{
    if (t && t->dtype == TEEXEC_DTYPE_DOUBLE)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused kernel %s: float64 tensors run the unfused FP64 path", what);
    return NULL;
}

static void rows_of(const tx_tensor *t, int64_t *rows, int64_t *cols)
{
    tx_te_rows(t, 1, rows, cols);
}

teexec_status *tx_fused_quantize(const tx_tensor *t, const tx_fused_q *fq, tx_qtensor *q)
{
    memset(q, 0, sizeof *q);
    if (!fq->on) return tx_error(TEEXEC_ERR_INTERNAL, "fused quantize: operand is not quantized");
    int64_t rows, cols;
    rows_of(t, &rows, &cols);
    tx_quant_config cfg = fq->cfg;
    if (cfg.kind == TX_QKIND_FP8_TENSOR && fq->delayed) {
        cfg.use_given_scale = true;
        cfg.given_scale = tx_delayed_scale(fq->delayed, (uint32_t)fq->slot);
    }
    teexec_status *st;
    if (t->dtype == TEEXEC_DTYPE_DOUBLE) {
        float *buf = NULL;
        TX_TRY(tx_te_load_f32(t, &buf));
        st = tx_quantize(buf, TEEXEC_DTYPE_FLOAT, (uint64_t)rows, (uint64_t)cols, &cfg, q);
        free(buf);
    } else {
        st = tx_quantize(t->data, t->dtype, (uint64_t)rows, (uint64_t)cols, &cfg, q);
    }
    if (st) return st;
    if (cfg.kind == TX_QKIND_FP8_TENSOR && fq->delayed)
        tx_delayed_record_amax(fq->delayed, (uint32_t)fq->slot, q->amax);
    return NULL;
}

teexec_status *tx_fused_dequantize(const tx_qtensor *q, unsigned usage, const tx_tensor *like,
                                   tx_tensor *out)
{
    if (!(q->usage & usage))
        return tx_error(TEEXEC_ERR_INTERNAL, "fused dequantize: the %s usage was not quantized",
                        usage == TX_QUSAGE_ROWWISE ? "rowwise" : "columnwise");
    TX_TRY(tx_tensor_alloc(out, TEEXEC_DTYPE_FLOAT, like->rank, like->dims));
    teexec_status *st = tx_dequantize(q, usage, out->data);
    if (st) tx_tensor_release(out);
    return st;
}

/* ---- activations: te_activation.c's float functions ------------------------ */

typedef struct act_desc {
    tx_te_op_id op;
    const tx_te_attr_value *attrs; /* the op's (GELU's approximate); NULL: defaults */
    bool gated, scaled, ok;
} act_desc;

/* From the schema entry (class bits, act fn, cap): ok for the plain
 * functions the fused loops take, with no cap; ClampedSwiGLU and the SiTU
 * family run unfused. */
static act_desc describe(tx_te_op_id op, const tx_te_attr_value *attrs)
{
    act_desc d = {op, attrs, false, false, false};
    const tx_te_op_schema *s = tx_te_schema(op);
    if (!s || !(s->op_class & TX_TE_CLASS_ACTIVATION) || s->act_cap != TX_TE_CAP_NONE) return d;
    d.gated = (s->op_class & TX_TE_CLASS_GATED) != 0;
    d.scaled = (s->op_class & TX_TE_CLASS_ROW_SCALED) != 0;
    switch (s->act_fn) {
    case TX_TE_ACT_GELU:
    case TX_TE_ACT_QGELU:
    case TX_TE_ACT_RELU:
    case TX_TE_ACT_SRELU:
    case TX_TE_ACT_SILU:
    case TX_TE_ACT_SIGMOID: d.ok = true; break;
    default: break;
    }
    return d;
}

bool tx_fused_act_supported(tx_te_op_id op) { return describe(op, NULL).ok; }

/* f(x) and f'(x): the unfused kernel's own function (kernels/cpu/te_impl.h),
 * so fused and unfused paths give the same bits. */
static void act_eval(act_desc d, float x, float *f, float *df)
{
    if (!tx_te_act_eval_f32(d.op, d.attrs, x, f, df)) *f = *df = NAN;
}

/* One row of an activation's forward: xr (width w) -> yr (w or w/2),
 * row scale s (1 when unscaled). */
static void act_row_fwd(act_desc d, const float *xr, int64_t w, float s, float *yr)
{
    int64_t wo = d.gated ? w / 2 : w;
    /* f over the row first (one inlined loop, no f'), then the gate's up
     * half and the row scale: the same products in the same order */
    if (tx_te_act_row_f32(d.op, d.attrs, xr, yr, wo)) {
        for (int64_t j = 0; d.gated && j < wo; j++) yr[j] = yr[j] * xr[wo + j];
        for (int64_t j = 0; d.scaled && j < wo; j++) yr[j] *= s;
        return;
    }
    for (int64_t j = 0; j < wo; j++) {
        float f = 0, df = 0;
        act_eval(d, xr[j], &f, &df);
        yr[j] = d.gated ? f * xr[wo + j] : f;
        if (d.scaled) yr[j] *= s;
    }
}

/* One row of an activation's backward; returns the row's dscale sum. */
static double act_row_bwd(act_desc d, const float *xr, const float *dyr, int64_t w, float s,
                          float *dxr)
{
    int64_t wo = d.gated ? w / 2 : w;
    double acc = 0.0;
    for (int64_t j = 0; j < wo; j++) {
        float f, df;
        act_eval(d, xr[j], &f, &df);
        if (d.gated) {
            float bt = xr[wo + j];
            float g = dyr[j] * s;
            dxr[j] = g * bt * df;
            dxr[wo + j] = g * f * K(1);
            acc += (double)dyr[j] * f * bt;
        } else {
            dxr[j] = dyr[j] * s * df;
            acc += (double)dyr[j] * f;
        }
    }
    return acc;
}

/* ---- forward-only ------------------------------------------------------------ */

teexec_status *tx_fused_linear_fwd(const tx_fused_linear_fwd_args *a)
{
    const tx_tensor *x = a->x, *w = a->w;
    TX_TRY(need_f32_path("Linear epilogue", x));
    TX_TRY(need_f32_path("Linear epilogue", w));
    TX_TRY(need_f32_path("Linear epilogue", a->out));
    if (x->rank < 1 || w->rank != 2 || w->dims[1] != x->dims[x->rank - 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused Linear: weight must be [N, K] with K = the last dim of x");
    int64_t m, k, n = w->dims[0];
    rows_of(x, &m, &k);
    act_desc d = {a->act, a->act_attrs, false, false, false};
    if (a->act != TX_TE_OP_COUNT) {
        d = describe(a->act, a->act_attrs);
        if (!d.ok || d.gated || d.scaled)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "fused Linear: activation %s is not a plain one the epilogue has",
                            tx_te_name(a->act));
        if (!a->act_input || a->act_input->numel != (uint64_t)(m * n))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "fused Linear: the activation's input tensor is missing or misshaped");
    }
    if (a->out->numel != (uint64_t)(m * n) ||
        (a->bias && (a->bias->rank != 1 || a->bias->dims[0] != n)) ||
        (a->residual && a->residual->numel != (uint64_t)(m * n)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused Linear: output, bias or residual does not fit [%lld, %lld]",
                        (long long)m, (long long)n);
    TX_TRY(tx_te_check_blas(TX_TE_LINEAR, m, n, k));
    /* FLOAT operands are read in place (no copy of the weight per call) */
    const float *xb = NULL, *wb = NULL, *bb = NULL, *eb = NULL;
    float *xo = NULL, *wo = NULL, *bo = NULL, *eo = NULL, *pre = NULL;
    /* a FLOAT output that shares no byte with an operand is written in
     * place (no buffer and no copy per call) */
    const bool y_direct = a->out->dtype == TEEXEC_DTYPE_FLOAT && a->out->data &&
                          !tx_te_overlap(a->out, x) && !tx_te_overlap(a->out, w) &&
                          (!a->bias || !tx_te_overlap(a->out, a->bias)) &&
                          (!a->residual || !tx_te_overlap(a->out, a->residual)) &&
                          (!d.ok || !tx_te_overlap(a->out, a->act_input));
    float *yb = y_direct ? (float *)a->out->data : tx_te_malloc((size_t)(m * n), sizeof(float));
    if (d.ok) pre = tx_te_malloc((size_t)(m * n), sizeof(float));
    teexec_status *st = yb && (!d.ok || pre) ? NULL : tx_oom();
    if (!st) st = tx_te_view_f32(x, &xb, &xo);
    if (!st) st = tx_te_view_f32(w, &wb, &wo);
    if (!st && a->bias) st = tx_te_view_f32(a->bias, &bb, &bo);
    if (!st && a->residual) st = tx_te_view_f32(a->residual, &eb, &eo);
    if (st) goto done;
    tx_te_gemm_f32(false, true, m, n, k, K(1), xb, k, wb, k, K(0), yb, n);
    float s = (float)a->scale;
    /* Every step in FLOAT and nothing but the bias and the residual (the
     * residual Linears of a fp32 model): the same sums in the same order as
     * the general loop below, in a loop the compiler vectorizes. */
    const bool plain = !d.ok && !a->has_scale && a->y_dtype == TEEXEC_DTYPE_FLOAT &&
                       (!bb || a->bias_out_dtype == TEEXEC_DTYPE_FLOAT);
    for (int64_t r = 0; plain && r < m; r++) {
        float *yr = yb + r * n;
        const float *er = eb ? eb + r * n : NULL;
        if (bb && er)
            for (int64_t j = 0; j < n; j++) yr[j] = (yr[j] + bb[j]) + er[j];
        else if (bb)
            for (int64_t j = 0; j < n; j++) yr[j] = yr[j] + bb[j];
        else if (er)
            for (int64_t j = 0; j < n; j++) yr[j] = yr[j] + er[j];
    }
    /* The epilogue: each step rounds where the unfused op stored. */
    for (int64_t r = 0; !plain && r < m; r++) {
        for (int64_t j = 0; j < n; j++) {
            int64_t i = r * n + j;
            float v = rt(a->y_dtype, yb[i]);
            if (bb) v = rt(a->bias_out_dtype, v + bb[j]);
            if (a->has_scale) v = rt(a->scale_out_dtype, (s == K(1) ? v : v * s) + K(0));
            if (d.ok) {
                float f, df;
                pre[i] = v;
                act_eval(d, v, &f, &df);
                v = f;
                if (eb) v = rt(a->out->dtype, v);
            }
            if (eb) v = v + eb[i];
            yb[i] = v;
        }
    }
    if (d.ok) tx_te_store_f32(a->act_input, pre);
    if (!y_direct) tx_te_store_f32(a->out, yb);
done:
    free(xo);
    free(wo);
    free(bo);
    free(eo);
    free(pre);
    if (!y_direct) free(yb);
    return st;
}

teexec_status *tx_fused_fwd_quantize(const tx_te_fwd_args *a, const tx_fused_q *fq, tx_qtensor *q)
{
    memset(q, 0, sizeof *q);
    TX_TRY(tx_te_cpu_forward(a));
    return tx_fused_quantize(a->output, fq, q);
}

/* ---- backward-only ------------------------------------------------------------- */

teexec_status *tx_fused_dact_dbias(tx_te_op_id act, const tx_te_attr_value *act_attrs,
                                   const tx_tensor *dy, const tx_tensor *act_x,
                                   teexec_dtype act_dx_dtype, tx_tensor *dx, tx_tensor *db,
                                   const tx_fused_q *fq, tx_qtensor *q)
{
    if (q) memset(q, 0, sizeof *q);
    act_desc d = describe(act, act_attrs);
    if (!d.ok || d.gated || d.scaled)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused dact+dbias: %s is not a plain activation", tx_te_name(act));
    TX_TRY(need_f32_path("dact+dbias", dy));
    TX_TRY(need_f32_path("dact+dbias", act_x));
    if (!dx || dy->numel != act_x->numel || dx->numel != act_x->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused dact+dbias: dy, x and dx must have the same shape");
    int64_t rows, n;
    rows_of(act_x, &rows, &n);
    if (db && (db->rank != 1 || db->dims[0] != n))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fused dact+dbias: dbias must be [%lld]",
                        (long long)n);
    float *xb = NULL, *dyb = NULL, *dxb = tx_te_malloc((size_t)dx->numel, sizeof(float));
    double *acc = tx_te_calloc((size_t)n, sizeof(double));
    float *out = tx_te_malloc((size_t)n, sizeof(float));
    teexec_status *st = dxb && acc && out ? NULL : tx_oom();
    if (!st) st = tx_te_load_f32(act_x, &xb);
    if (!st) st = tx_te_load_f32(dy, &dyb);
    if (st) goto done;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < n; j++) {
            int64_t i = r * n + j;
            float f, df;
            act_eval(d, xb[i], &f, &df);
            /* the activation's dx, rounded where it would be stored, then
             * the Bias's view of it (its dx is a copy, db sums it) */
            float v = rt(act_dx_dtype, dyb[i] * K(1) * df);
            dxb[i] = v;
            acc[j] += v;
        }
    }
    tx_te_store_f32(dx, dxb);
    if (db) {
        for (int64_t j = 0; j < n; j++) out[j] = (float)acc[j];
        tx_te_store_f32(db, out);
    }
    if (fq && fq->on && q) st = tx_fused_quantize(dx, fq, q);
done:
    free(xb);
    free(dyb);
    free(dxb);
    free(acc);
    free(out);
    return st;
}

teexec_status *tx_fused_dbias_quantize(const tx_tensor *dy, tx_tensor *dx, tx_tensor *db,
                                       const tx_fused_q *fq, tx_qtensor *q)
{
    if (q) memset(q, 0, sizeof *q);
    TX_TRY(need_f32_path("dbias+quantize", dy));
    int64_t rows, n;
    rows_of(dy, &rows, &n);
    if ((dx && dx->numel != dy->numel) || (db && (db->rank != 1 || db->dims[0] != n)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused dbias+quantize: dx must have dy's shape and dbias be [%lld]",
                        (long long)n);
    float *dyb = NULL, *out = tx_te_malloc((size_t)n, sizeof(float));
    double *acc = tx_te_calloc((size_t)n, sizeof(double));
    teexec_status *st = out && acc ? NULL : tx_oom();
    if (!st) st = tx_te_load_f32(dy, &dyb);
    if (!st) {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++) acc[j] += dyb[r * n + j];
        if (db) {
            for (int64_t j = 0; j < n; j++) out[j] = (float)acc[j];
            tx_te_store_f32(db, out);
        }
        if (dx) tx_te_convert_copy(dx, dy);
        if (dx && fq && fq->on && q) st = tx_fused_quantize(dx, fq, q);
    }
    free(dyb);
    free(out);
    free(acc);
    return st;
}

teexec_status *tx_fused_dgrad_add(const tx_tensor *dy, const tx_tensor *w,
                                  teexec_dtype lin_dx_dtype, const tx_tensor *extra_grad,
                                  tx_tensor *dx)
{
    TX_TRY(need_f32_path("dgrad+add", dy));
    TX_TRY(need_f32_path("dgrad+add", w));
    int64_t m, n;
    rows_of(dy, &m, &n);
    if (w->rank != 2 || w->dims[0] != n)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fused dgrad+add: dy does not fit the weight");
    int64_t k = w->dims[1];
    if (dx->numel != (uint64_t)(m * k) || (extra_grad && extra_grad->numel != dx->numel))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused dgrad+add: dx or the extra grad does not fit [%lld, %lld]",
                        (long long)m, (long long)k);
    TX_TRY(tx_te_check_blas(TX_TE_LINEAR, m, k, n));
    float *dyb = NULL, *wb = NULL, *eb = NULL, *out = tx_te_malloc((size_t)(m * k), sizeof(float));
    teexec_status *st = out ? NULL : tx_oom();
    if (!st) st = tx_te_load_f32(dy, &dyb);
    if (!st) st = tx_te_load_f32(w, &wb);
    if (!st && extra_grad) st = tx_te_load_f32(extra_grad, &eb);
    if (!st) {
        tx_te_gemm_f32(false, false, m, k, n, K(1), dyb, n, wb, k, K(0), out, k);
        for (int64_t i = 0; i < m * k; i++) {
            float v = rt(lin_dx_dtype, out[i]);
            out[i] = eb ? v + eb[i] : v;
        }
        tx_te_store_f32(dx, out);
    }
    free(dyb);
    free(wb);
    free(eb);
    free(out);
    return st;
}

teexec_status *tx_fused_scale_grad(const tx_tensor *dy, double s, tx_tensor *out)
{
    TX_TRY(need_f32_path("scale grad", dy));
    if (out->numel != dy->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fused scale grad: out must have dy's shape");
    float *b = NULL;
    TX_TRY(tx_te_load_f32(dy, &b));
    float fs = (float)s;
    /* ConstantScale's backward adds +0 too (so -0 becomes +0) */
    for (uint64_t i = 0; i < dy->numel; i++) b[i] = (fs == K(1) ? b[i] : b[i] * fs) + K(0);
    tx_te_store_f32(out, b);
    free(b);
    return NULL;
}

teexec_status *tx_fused_norm_bwd_add(const tx_te_bwd_args *a, teexec_dtype norm_dx_dtype,
                                     const tx_tensor *extra_grad)
{
    if (!tx_te_op_is(a->op, TX_TE_CLASS_NORM))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fused norm bwd+add: %s is not a norm",
                        tx_te_name(a->op));
    if (!a->grad_input) return tx_te_cpu_backward(a);
    TX_TRY(need_f32_path("norm bwd+add", a->grad_output));
    if (extra_grad && extra_grad->numel != a->grad_input->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused norm bwd+add: the extra grad must have x's shape");
    /* The norm's dx goes to a float scratch tensor (rounded to its dtype
     * below), then the fork's grad is added in the same pass as the store. */
    tx_tensor tmp;
    TX_TRY(tx_tensor_alloc(&tmp, TEEXEC_DTYPE_FLOAT, a->grad_input->rank, a->grad_input->dims));
    tx_te_bwd_args b = *a;
    b.grad_input = &tmp;
    teexec_status *st = tx_te_cpu_backward(&b);
    float *eb = NULL;
    if (!st && extra_grad) st = tx_te_load_f32(extra_grad, &eb);
    if (!st) {
        float *v = tmp.data;
        for (uint64_t i = 0; i < tmp.numel; i++) {
            float r = rt(norm_dx_dtype, v[i]);
            v[i] = eb ? r + eb[i] : r;
        }
        tx_te_store_f32(a->grad_input, v);
    }
    free(eb);
    tx_tensor_release(&tmp);
    return st;
}

/* ---- joint: MLPs ----------------------------------------------------------------- */

void tx_fused_mlp_free(tx_fused_mlp_ctx *c)
{
    if (!c) return;
    int32_t g = c->a.groups;
    tx_tensor_release(&c->x1_saved);
    tx_tensor_release(&c->pre_act);
    tx_tensor_release(&c->h2_saved);
    for (int32_t i = 0; c->w1_saved && i < g; i++) tx_tensor_release(&c->w1_saved[i]);
    for (int32_t i = 0; c->w2_saved && i < g; i++) tx_tensor_release(&c->w2_saved[i]);
    free(c->w1_saved);
    free(c->w2_saved);
    free(c->offsets);
    memset(c, 0, sizeof *c);
}

/* Quantizes (when fq->on) and returns the rowwise operand in *row and,
 * when want_col, the columnwise one in *col (both float32 tensors shaped
 * like t; copies of t when not quantized). */
static teexec_status *qdq_operand(const tx_tensor *t, const tx_fused_q *fq, const tx_qtensor *pre,
                                  bool want_col, tx_tensor *row, tx_tensor *col)
{
    memset(row, 0, sizeof *row);
    if (col) memset(col, 0, sizeof *col);
    if (!fq->on) {
        TX_TRY(tx_tensor_clone(t, row));
        if (want_col && col) {
            teexec_status *st = tx_tensor_clone(t, col);
            if (st) tx_tensor_release(row);
            return st;
        }
        return NULL;
    }
    tx_qtensor q;
    if (pre) q = *pre;
    else TX_TRY(tx_fused_quantize(t, fq, &q));
    teexec_status *st = NULL;
    if (q.usage & TX_QUSAGE_ROWWISE) st = tx_fused_dequantize(&q, TX_QUSAGE_ROWWISE, t, row);
    if (!st && want_col && col) st = tx_fused_dequantize(&q, TX_QUSAGE_COLUMNWISE, t, col);
    if (!pre) tx_qtensor_free(&q);
    if (st) {
        tx_tensor_release(row);
        if (col) tx_tensor_release(col);
    }
    return st;
}

static teexec_status *mlp_offsets(const tx_fused_mlp_args *a, int64_t m, int64_t *off)
{
    off[0] = 0;
    if (!a->grouped) {
        off[1] = m;
        return NULL;
    }
    const tx_tensor *ss = a->split_sizes;
    if (!ss || ss->dtype != TEEXEC_DTYPE_INT64 || ss->rank != 1 || ss->dims[0] != a->groups)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused grouped MLP: split_sizes must be int64 [%d]", (int)a->groups);
    const int64_t *s = ss->data;
    for (int32_t i = 0; i < a->groups; i++) {
        if (s[i] < 0 || s[i] > m - off[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "fused grouped MLP: split_sizes[%d] = %lld runs past the %lld rows",
                            (int)i, (long long)s[i], (long long)m);
        off[i + 1] = off[i] + s[i];
    }
    return NULL;
}

/* Y[rows of each group] = X·W_gᵀ (+ b_g added in float, as GroupedLinear
 * does; dense: no bias here). Rows past the groups stay 0. */
static teexec_status *grouped_gemm_fwd(const float *xb, int64_t k, const tx_tensor *w,
                                       const tx_tensor *const *wg, const tx_tensor *const *bg,
                                       const int64_t *off, int32_t g, int64_t n, float *yb)
{
    (void)w;
    float *wb = NULL;
    for (int32_t i = 0; i < g; i++) {
        int64_t rows = off[i + 1] - off[i];
        if (rows == 0) continue;
        TX_TRY(tx_te_load_f32(wg[i], &wb));
        tx_te_gemm_f32(false, true, rows, n, k, K(1), xb + off[i] * k, k, wb, k, K(0),
                       yb + off[i] * n, n);
        free(wb);
        wb = NULL;
        if (bg && bg[i]) {
            TX_TRY(tx_te_load_f32(bg[i], &wb));
            for (int64_t r = off[i]; r < off[i + 1]; r++)
                for (int64_t j = 0; j < n; j++) yb[r * n + j] += wb[j];
            free(wb);
            wb = NULL;
        }
    }
    return NULL;
}

teexec_status *tx_fused_mlp_fwd(const tx_fused_mlp_args *a, tx_fused_mlp_ctx *c)
{
    memset(c, 0, sizeof *c);
    c->a = *a;
    int32_t g = a->groups;
    const tx_tensor *x = a->x;
    TX_TRY(need_f32_path("MLP", x));
    act_desc d = describe(a->act, a->act_attrs);
    if (!d.ok || g < 1 || (a->grouped != d.scaled) || !a->w1 || !a->w2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused MLP: activation %s does not fit a %s MLP", tx_te_name(a->act),
                        a->grouped ? "grouped" : "dense");
    int64_t m, k;
    rows_of(x, &m, &k);
    const tx_tensor *w1 = a->w1[0], *w2 = a->w2[0];
    if (w1->rank != 2 || w1->dims[1] != k || w2->rank != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "fused MLP: weights do not fit x");
    int64_t n1 = w1->dims[0], h = d.gated ? n1 / 2 : n1, n2 = w2->dims[0];
    if (w2->dims[1] != h || a->out->numel != (uint64_t)(m * n2))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "fused MLP: fc2's weight must be [N, %lld] and the output [%lld, N]",
                        (long long)h, (long long)m);
    TX_TRY(tx_te_check_blas(TX_TE_LINEAR, m, n1 > n2 ? n1 : n2, k > h ? k : h));
    c->offsets = tx_te_malloc((size_t)g + 1, sizeof(int64_t));
    c->w1_saved = tx_te_calloc((size_t)g, sizeof(tx_tensor));
    c->w2_saved = tx_te_calloc((size_t)g, sizeof(tx_tensor));
    if (!c->offsets || !c->w1_saved || !c->w2_saved) {
        tx_fused_mlp_free(c);
        return tx_oom();
    }
    teexec_status *st = mlp_offsets(a, m, c->offsets);
    tx_tensor x1 = {0}, h2 = {0}, *w1r = tx_te_calloc((size_t)g, sizeof(tx_tensor)),
              *w2r = tx_te_calloc((size_t)g, sizeof(tx_tensor));
    float *xb = NULL, *yb = NULL, *hb = NULL, *sb = NULL, *bb = NULL;
    const tx_tensor **w1p = tx_te_calloc((size_t)g, sizeof(*w1p));
    const tx_tensor **w2p = tx_te_calloc((size_t)g, sizeof(*w2p));
    if (!st && (!w1r || !w2r || !w1p || !w2p)) st = tx_oom();
    /* fc1 operands: exactly the unfused Linear's quantize / dequantize */
    if (!st) st = qdq_operand(x, &a->q1_x, a->x_q, a->need_dparams, &x1, &c->x1_saved);
    for (int32_t i = 0; !st && i < g; i++) {
        st = qdq_operand(a->w1[i], &a->q1_w, NULL, a->need_dx, &w1r[i], &c->w1_saved[i]);
        w1p[i] = &w1r[i];
    }
    for (int32_t i = 0; !st && i < g; i++) {
        st = qdq_operand(a->w2[i], &a->q2_w, NULL, true, &w2r[i], &c->w2_saved[i]);
        w2p[i] = &w2r[i];
    }
    if (!st && !(yb = tx_te_calloc((size_t)(m * n1), sizeof(float)))) st = tx_oom();
    if (!st) st = tx_te_load_f32(&x1, &xb);
    if (!st)
        st = grouped_gemm_fwd(xb, k, NULL, w1p, a->grouped ? a->b1 : NULL, c->offsets, g, n1, yb);
    if (!st && a->dense_bias) st = tx_te_load_f32(a->dense_bias, &bb);
    if (!st && a->scales) st = tx_te_load_f32(a->scales, &sb);
    if (!st) {
        int64_t dims[2] = {m, n1}, hd[2] = {m, h};
        st = tx_tensor_alloc(&c->pre_act, a->dense_bias ? a->bias_out_dtype : a->h1_dtype, 2,
                             dims);
        if (!st) st = tx_tensor_alloc(&h2, a->h2_dtype, 2, hd);
    }
    if (!st && !(hb = tx_te_malloc((size_t)(m * h), sizeof(float)))) st = tx_oom();
    if (st) goto done;
    /* fc1's epilogue, the activation and its row scale in one pass per row */
    for (int64_t r = 0; r < m; r++) {
        float *yr = yb + r * n1;
        for (int64_t j = 0; j < n1; j++) {
            float v = rt(a->h1_dtype, yr[j]);
            if (bb) v = rt(a->bias_out_dtype, v + bb[j]);
            yr[j] = v;
        }
        act_row_fwd(d, yr, n1, sb ? sb[r] : K(1), hb + r * h);
    }
    tx_te_store_f32(&c->pre_act, yb);
    tx_te_store_f32(&h2, hb);
    free(xb);
    xb = NULL;
    /* fc2 */
    tx_tensor h2r = {0};
    st = qdq_operand(&h2, &a->q2_x, NULL, a->need_dparams, &h2r, &c->h2_saved);
    if (!st) st = tx_te_load_f32(&h2r, &xb);
    tx_tensor_release(&h2r);
    free(yb);
    yb = NULL;
    if (!st && !(yb = tx_te_calloc((size_t)(m * n2), sizeof(float)))) st = tx_oom();
    if (!st)
        st = grouped_gemm_fwd(xb, h, NULL, w2p, a->grouped ? a->b2 : NULL, c->offsets, g, n2, yb);
    if (!st) tx_te_store_f32(a->out, yb);
done:
    free(xb);
    free(yb);
    free(hb);
    free(sb);
    free(bb);
    tx_tensor_release(&x1);
    tx_tensor_release(&h2);
    for (int32_t i = 0; w1r && i < g; i++) tx_tensor_release(&w1r[i]);
    for (int32_t i = 0; w2r && i < g; i++) tx_tensor_release(&w2r[i]);
    free(w1r);
    free(w2r);
    free(w1p);
    free(w2p);
    if (st) tx_fused_mlp_free(c);
    return st;
}

/* The backward of one GroupedLinear / Linear from dy (hp) with its saved
 * operands: dgrad into dxb (float, zero rows past the groups), wgrads,
 * dbias (from the hp dy, as the unfused paths compute it). */
static teexec_status *gl_bwd(const tx_tensor *dy, const tx_fused_q *qdy, const tx_qtensor *pre,
                             bool need_dx,
                             const tx_tensor *x_saved, const tx_tensor *w_saved,
                             const int64_t *off, int32_t g, int64_t k, float *dxb,
                             tx_tensor *const *dw, tx_tensor *const *db)
{
    int64_t m, n;
    rows_of(dy, &m, &n);
    bool need_dw = false, need_db = false;
    for (int32_t i = 0; i < g; i++) {
        need_dw |= dw && dw[i];
        need_db |= db && db[i];
    }
    tx_fused_q q = *qdy;
    if (q.on) q.cfg.usage = (need_dx ? TX_QUSAGE_ROWWISE : 0) | (need_dw ? TX_QUSAGE_COLUMNWISE : 0);
    tx_tensor dyr = {0}, dyc = {0};
    float *rb = NULL, *cb = NULL, *hb = NULL, *wb = NULL, *xb = NULL;
    float *pb = tx_te_malloc((size_t)(n * (k > 0 ? k : 1)), sizeof(float));
    double *acc = tx_te_malloc((size_t)n, sizeof(double));
    teexec_status *st = pb && acc ? NULL : tx_oom();
    if (!st && (need_dx || need_dw)) {
        if (q.on && q.cfg.usage) {
            tx_qtensor qt;
            if (pre) qt = *pre;
            else st = tx_fused_quantize(dy, &q, &qt);
            if (!st && need_dx) st = tx_fused_dequantize(&qt, TX_QUSAGE_ROWWISE, dy, &dyr);
            if (!st && need_dw) st = tx_fused_dequantize(&qt, TX_QUSAGE_COLUMNWISE, dy, &dyc);
            if (!pre) tx_qtensor_free(&qt);
            if (!st && need_dx) st = tx_te_load_f32(&dyr, &rb);
            if (!st && need_dw) st = tx_te_load_f32(&dyc, &cb);
        } else {
            st = tx_te_load_f32(dy, &rb);
            if (!st && need_dw) st = tx_te_load_f32(dy, &cb);
        }
    }
    if (!st && need_db) st = tx_te_load_f32(dy, &hb);
    if (!st && need_dw) st = tx_te_load_f32(x_saved, &xb);
    for (int32_t i = 0; !st && i < g; i++) {
        int64_t r0 = off[i], rows = off[i + 1] - off[i];
        if (need_dx && rows > 0) {
            st = tx_te_load_f32(&w_saved[i], &wb);
            if (st) break;
            tx_te_gemm_f32(false, false, rows, k, n, K(1), rb + r0 * n, n, wb, k, K(0),
                           dxb + r0 * k, k);
            free(wb);
            wb = NULL;
        }
        if (dw && dw[i]) {
            if (rows > 0)
                tx_te_gemm_f32(true, false, n, k, rows, K(1), cb + r0 * n, n, xb + r0 * k, k, K(0),
                               pb, k);
            else
                for (int64_t j = 0; j < n * k; j++) pb[j] = K(0);
            tx_te_store_f32(dw[i], pb);
        }
        if (db && db[i]) {
            for (int64_t j = 0; j < n; j++) acc[j] = 0.0;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < n; j++) acc[j] += hb[(r0 + r) * n + j];
            for (int64_t j = 0; j < n; j++) pb[j] = (float)acc[j];
            tx_te_store_f32(db[i], pb);
        }
    }
    tx_tensor_release(&dyr);
    tx_tensor_release(&dyc);
    free(rb);
    free(cb);
    free(hb);
    free(wb);
    free(xb);
    free(pb);
    free(acc);
    return st;
}

teexec_status *tx_fused_mlp_bwd(const tx_fused_mlp_ctx *c, const tx_tensor *dy,
                                const tx_fused_mlp_grads *gr)
{
    const tx_fused_mlp_args *a = &c->a;
    int32_t g = a->groups;
    act_desc d = describe(a->act, a->act_attrs);
    int64_t m, n2;
    rows_of(dy, &m, &n2);
    int64_t n1 = c->pre_act.dims[1], h = d.gated ? n1 / 2 : n1, k = c->w1_saved[0].dims[1];
    TX_TRY(need_f32_path("MLP backward", dy));
    bool want_dx = gr->dx != NULL;
    bool want_dc = want_dx || gr->dw1 || gr->db1 || gr->dense_db;
    float *dhb = tx_te_calloc((size_t)(m * h), sizeof(float));
    float *pre = NULL, *sb = NULL, *dcb = tx_te_malloc((size_t)(m * n1), sizeof(float));
    float *dsb = tx_te_malloc((size_t)m, sizeof(float)), *dxb = NULL;
    tx_tensor dc = {0};
    teexec_status *st = dhb && dcb && dsb ? NULL : tx_oom();
    /* fc2: dgrad (into float), wgrad, dbias */
    if (!st)
        st = gl_bwd(dy, &a->q2_dy, gr->dy_q, want_dc || gr->dscales, &c->h2_saved, c->w2_saved, c->offsets,
                    g, h, dhb, gr->dw2, gr->db2);
    if (!st) st = tx_te_load_f32(&c->pre_act, &pre);
    if (!st && a->scales) st = tx_te_load_f32(a->scales, &sb);
    teexec_dtype pre_dt = c->pre_act.dtype;
    if (!st) {
        int64_t dims[2] = {m, n1};
        st = tx_tensor_alloc(&dc, pre_dt, 2, dims);
    }
    if (st) goto done;
    /* fc2's dgrad epilogue = the activation's backward, one pass per row */
    for (int64_t r = 0; r < m; r++) {
        float *dr = dhb + r * h;
        for (int64_t j = 0; j < h; j++) dr[j] = rt(a->h2_dtype, dr[j]);
        double acc = act_row_bwd(d, pre + r * n1, dr, n1, sb && want_dc ? sb[r] : K(1),
                                 dcb + r * n1);
        dsb[r] = (float)acc;
        for (int64_t j = 0; j < n1; j++) dcb[r * n1 + j] = rt(pre_dt, dcb[r * n1 + j]);
    }
    tx_te_store_f32(&dc, dcb);
    if (gr->dscales) tx_te_store_f32(gr->dscales, dsb);
    if (!want_dc) goto done;
    if (a->dense_bias && gr->dense_db) {
        /* the Bias op's backward: db = Σ rows of dc, dx = dc */
        st = tx_fused_dbias_quantize(&dc, NULL, gr->dense_db, NULL, NULL);
        if (st) goto done;
    }
    if (a->dense_bias && pre_dt != a->h1_dtype) {
        /* the Bias's dx is dc stored in the Linear's output dtype */
        tx_tensor conv;
        st = tx_tensor_alloc(&conv, a->h1_dtype, dc.rank, dc.dims);
        if (st) goto done;
        tx_te_convert_copy(&conv, &dc);
        tx_tensor_release(&dc);
        dc = conv;
    }
    if (want_dx && !(dxb = tx_te_calloc((size_t)(m * k), sizeof(float)))) {
        st = tx_oom();
        goto done;
    }
    st = gl_bwd(&dc, &a->q1_dy, NULL, want_dx, &c->x1_saved, c->w1_saved, c->offsets, g, k, dxb,
                gr->dw1, gr->db1);
    if (!st && want_dx) tx_te_store_f32(gr->dx, dxb);
done:
    free(dhb);
    free(pre);
    free(sb);
    free(dcb);
    free(dsb);
    free(dxb);
    tx_tensor_release(&dc);
    return st;
}
