/*
 * te_activation.c - every TE activation, CPU: GELU, QGELU, ReLU, SReLU,
 * SiLU; the gated GLU, GEGLU, QGEGLU, ReGLU, SReGLU, SwiGLU, ClampedSwiGLU
 * (x = [a | b] on the last dim, TE's order: a is the gate); and the
 * row-scaled ScaledSwiGLU and ScaledSReLU (extra input: one scale per row).
 *
 * and the gated SiTUGLU, ScaledSiTUGLU, ScaledClampedQGeGLU.
 *
 * All of them are one table of scalar (f, f') pairs indexed by the schema's
 * act fn, plus three loop shapes (plain, gated, scaled) chosen by the
 * schema's class bits, so a new activation is one table row. Written
 * once over REAL, compiled twice (this file includes itself; te_real.h).
 */
#ifndef TE_PASS
#define TE_PASS
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"
/* the float pass's exp and its row loops' vector clones */
#include "kernels/cpu/fastmath.h"
#include "kernels/cpu/kcommon.h"

#include <math.h>
#include <stdlib.h>

/* The CPU's scalar functions: the schema's act fn, with GELU split by its
 * approximate attribute (ACT_GELU_ERF sits past the schema's ids). */
typedef int act_kind;
enum { ACT_GELU_ERF = TX_TE_ACT_FN_COUNT, ACT_COUNT };

/* Everything the loops need comes from the op's schema entry (its class
 * bits, act fn and cap): no per-op list here. */
typedef struct act_desc {
    act_kind act;
    bool gated;        /* y = f(a)·b̃ */
    bool scaled;       /* y = (...)·scales[row] */
    tx_te_act_cap cap; /* ClampedSwiGLU's clamp, SiTU's soft cap */
} act_desc;

static act_desc describe(const tx_te_op_id op, const tx_te_attr_value *attrs)
{
    const tx_te_op_schema *s = tx_te_schema(op);
    act_desc d = {s->act_fn, (s->op_class & TX_TE_CLASS_GATED) != 0,
                  (s->op_class & TX_TE_CLASS_ROW_SCALED) != 0, s->act_cap};
    if (d.act == TX_TE_ACT_GELU && attrs[TX_TE_A_GELU_APPROX].i == TX_TE_GELU_ERF)
        d.act = ACT_GELU_ERF;
    return d;
}

static bool is_activation(tx_te_op_id op)
{
    const tx_te_op_schema *s = tx_te_schema(op);
    return s && (s->op_class & TX_TE_CLASS_ACTIVATION) && s->act_fn > TX_TE_ACT_NONE &&
           s->act_fn < TX_TE_ACT_FN_COUNT;
}

/* Shapes: x [rows, W]; y [rows, W or W/2]; scales [rows]. */
static teexec_status *check_x_y(tx_te_op_id op, act_desc d, const tx_tensor *x, const tx_tensor *y,
                                const char *yname)
{
    TX_TRY(tx_te_check_real(op, "x", x));
    if (x->rank < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: x must have rank >= 1",
                        tx_te_name(op));
    tx_shape ys = tx_shape_of(x);
    if (d.gated) {
        if (ys.dims[ys.rank - 1] % 2)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: the last dim of x must be even ([gate | up])",
                            tx_te_name(op));
        ys.dims[ys.rank - 1] /= 2;
    }
    return tx_te_check_real_shape(op, yname, y, &ys);
}

#define TE_F64 0
#include "kernels/cpu/te_activation.c"
#undef TE_F64
#define TE_F64 1
#include "kernels/cpu/te_activation.c"
#undef TE_F64

/* The plain function of an activation op (attrs NULL: the defaults), or
 * false for a non-activation or a capped one (te_impl.h). */
static bool plain_act(tx_te_op_id op, const tx_te_attr_value *attrs, act_kind *act)
{
    if (!is_activation(op)) return false;
    tx_te_attr_value def[TX_TE_MAX_ATTRS];
    if (!attrs) {
        tx_te_attr_defaults(tx_te_schema(op), def);
        attrs = def;
    }
    act_desc d = describe(op, attrs);
    *act = d.act;
    return d.cap == TX_TE_CAP_NONE;
}

bool tx_te_act_eval_f32(tx_te_op_id op, const tx_te_attr_value *attrs, float x, float *f,
                        float *df)
{
    act_kind act;
    if (!plain_act(op, attrs, &act)) return false;
    act_table_f32[act](x, 1.702f, f, df);
    return true;
}

bool tx_te_act_row_f32(tx_te_op_id op, const tx_te_attr_value *attrs, const float *x, float *y,
                       int64_t n)
{
    act_kind act;
    if (!plain_act(op, attrs, &act)) return false;
    act_row_f_f32(act, x, y, n, 1.702f);
    return true;
}

teexec_status *tx_te_cpu_activation_fwd(const tx_te_fwd_args *a)
{
    if (!is_activation(a->op))
        return tx_error(TEEXEC_ERR_INTERNAL, "te.ops: %s is not an activation", tx_te_name(a->op));
    act_desc d = describe(a->op, a->attrs);
    TX_TRY(check_x_y(a->op, d, a->input, a->output, "y"));
    if (d.scaled) {
        tx_shape rs = tx_te_leading(a->input, 1);
        TX_TRY(tx_te_check_real_shape(a->op, "scales", a->extra_inputs[0], &rs));
    }
    return a->input->dtype == TEEXEC_DTYPE_DOUBLE ? act_fwd_f64(a, d) : act_fwd_f32(a, d);
}

teexec_status *tx_te_cpu_activation_bwd(const tx_te_bwd_args *a)
{
    if (!is_activation(a->op))
        return tx_error(TEEXEC_ERR_INTERNAL, "te.ops: %s is not an activation", tx_te_name(a->op));
    act_desc d = describe(a->op, a->attrs);
    if (a->n_saved < (d.scaled ? 2 : 1))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: saved context is incomplete",
                        tx_te_name(a->op));
    const tx_tensor *x = a->saved[0];
    TX_TRY(check_x_y(a->op, d, x, a->grad_output, "dy"));
    tx_shape xs = tx_shape_of(x), rs = tx_te_leading(x, 1);
    if (a->grad_input) TX_TRY(tx_te_check_real_shape(a->op, "dx", a->grad_input, &xs));
    tx_tensor *ds = d.scaled && a->n_grad_extra_inputs > 0 ? a->grad_extra_inputs[0] : NULL;
    if (d.scaled && a->grad_input)
        TX_TRY(tx_te_check_real_shape(a->op, "saved scales", a->saved[1], &rs));
    if (ds) TX_TRY(tx_te_check_real_shape(a->op, "dscales", ds, &rs));
    return x->dtype == TEEXEC_DTYPE_DOUBLE ? act_bwd_f64(a, d) : act_bwd_f32(a, d);
}

#else /* a REAL pass */
#include "kernels/cpu/te_real.h"

#if !TE_F64
/* The float pass takes fastmath's exp, erf and tanh (within 4e-7 relative
 * of libm's): straight-line code, so the row loops below vectorize, where
 * libm's are one call per element. Every float path of these activations
 * (the rows, the table, the backward) goes through the same always-inlined
 * functions, so they agree bit for bit. The FP64 pass keeps libm's. */
#undef R_EXP
#undef R_ERF
#undef R_TANH
#define R_EXP tx_expf_fast
#define R_ERF tx_erff_fast
#define R_TANH tx_tanhf_fast
#endif

TX_FM_INLINE REAL FN(sigmoid)(REAL x) { return K(1) / (K(1) + R_EXP(-x)); }

/* Each scalar function writes f(x) and f'(x); p is alpha for QGELU. */
/* 0.5 x (1 + tanh u) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
 * one exp instead of tanh (libm's tanhf goes through expm1f: half the CPU
 * time of a GPT-2 forward), and exact in relative terms where 1 + tanh u
 * cancels (x << 0); f' = s + 2 x s (1 - s) u'; 1.59576912 is twice the 0.79788456
 * used for u before, so 2u is the same float. */
TX_FM_INLINE void FN(f_gelu_tanh)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    REAL s = FN(sigmoid)(K(1.59576912) * x * (K(1) + K(0.044715) * x * x));
    *f = x * s;
    *df = K(2) * x * s * (K(1) - s) * (K(0.79788456) + K(0.1070322243) * x * x) + s;
}

TX_FM_INLINE void FN(f_gelu_erf)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    REAL c = K(0.5) * (K(1) + R_ERF(x * K(0.70710678118654752440)));
    *f = x * c;
    *df = c + x * K(0.39894228040143267794) * R_EXP(K(-0.5) * x * x);
}

TX_FM_INLINE void FN(f_qgelu)(REAL x, REAL p, REAL *f, REAL *df)
{
    REAL s = FN(sigmoid)(p * x);
    *f = x * s;
    *df = p * x * s * (K(1) - s) + s;
}

TX_FM_INLINE void FN(f_relu)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    *f = x > K(0) ? x : K(0);
    *df = x > K(0) ? K(1) : K(0);
}

TX_FM_INLINE void FN(f_srelu)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    *f = x > K(0) ? x * x : K(0);
    *df = x > K(0) ? K(2) * x : K(0);
}

TX_FM_INLINE void FN(f_silu)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    REAL s = FN(sigmoid)(x);
    *f = x * s;
    *df = x * s * (K(1) - s) + s;
}

TX_FM_INLINE void FN(f_sigmoid)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    REAL s = FN(sigmoid)(x);
    *f = s;
    *df = s * (K(1) - s);
}

/* SiTU's gate: β1·tanh(x/β1)·σ(x); p is β1. */
TX_FM_INLINE void FN(f_situ)(REAL x, REAL p, REAL *f, REAL *df)
{
    REAL t = R_TANH(x / p), s = FN(sigmoid)(x);
    *f = p * t * s;
    *df = (K(1) - t * t) * s + p * t * s * (K(1) - s);
}

static void (*const FN(act_table)[ACT_COUNT])(REAL, REAL, REAL *, REAL *) = {
    [TX_TE_ACT_GELU] = FN(f_gelu_tanh), [ACT_GELU_ERF] = FN(f_gelu_erf),
    [TX_TE_ACT_QGELU] = FN(f_qgelu),    [TX_TE_ACT_RELU] = FN(f_relu),
    [TX_TE_ACT_SRELU] = FN(f_srelu),    [TX_TE_ACT_SILU] = FN(f_silu),
    [TX_TE_ACT_SIGMOID] = FN(f_sigmoid), [TX_TE_ACT_SITU] = FN(f_situ),
};

/* The row loops: the switch sits outside the loop so each loop inlines
 * its function (no call per element); the same functions as the table, so
 * the same bits. ACT_ROWS(ROW) is the one list of inlined cases. */
#define ACT_ROWS(ROW)                                                               \
    switch (act) {                                                                  \
    case TX_TE_ACT_GELU: ROW(FN(f_gelu_tanh));                                      \
    case ACT_GELU_ERF: ROW(FN(f_gelu_erf));                                         \
    case TX_TE_ACT_QGELU: ROW(FN(f_qgelu));                                         \
    case TX_TE_ACT_RELU: ROW(FN(f_relu));                                           \
    case TX_TE_ACT_SRELU: ROW(FN(f_srelu));                                         \
    case TX_TE_ACT_SILU: ROW(FN(f_silu));                                           \
    case TX_TE_ACT_SIGMOID: ROW(FN(f_sigmoid));                                     \
    default: ROW(FN(act_table)[act]);                                               \
    }

/* y[j] = f(x[j]) over a row, f only (the unused f' is never stored). */
#define FN_ROW(fn)                                                                  \
    for (int64_t j = 0; j < n; j++) {                                               \
        REAL f, df;                                                                 \
        fn(x[j], p, &f, &df);                                                       \
        y[j] = f;                                                                   \
    }                                                                               \
    break
#if !TE_F64
TX_SIMD_CLONES
#endif
static void FN(act_row_f)(act_kind act, const REAL *x, REAL *y, int64_t n, REAL p)
{
    ACT_ROWS(FN_ROW)
}
#undef FN_ROW

/* f and f' over a row, for the backward. */
#define FN_ROW_FDF(fn)                                                              \
    for (int64_t j = 0; j < n; j++) fn(x[j], p, &f[j], &df[j]);                     \
    break
#if !TE_F64
TX_SIMD_CLONES
#endif
static void FN(act_row_fdf)(act_kind act, const REAL *x, REAL *f, REAL *df, int64_t n, REAL p)
{
    ACT_ROWS(FN_ROW_FDF)
}
#undef FN_ROW_FDF
#undef ACT_ROWS

/* The cap's attributes: CLAMP limit, alpha, offset; SOFTCAP β1, β2. */
typedef struct FN(clamp_params) {
    REAL limit, alpha, offset, beta1, beta2;
} FN(clamp_params);

static FN(clamp_params) FN(cap_params)(act_desc d, const tx_te_attr_value *attrs)
{
    FN(clamp_params) c = {K(0), K(0), K(0), K(1), K(1)};
    if (d.cap == TX_TE_CAP_CLAMP) {
        c.limit = (REAL)attrs[TX_TE_A_CLAMP_LIMIT].f;
        c.alpha = (REAL)attrs[TX_TE_A_CLAMP_ALPHA].f;
        c.offset = (REAL)attrs[TX_TE_A_CLAMP_OFFSET].f;
    } else if (d.cap == TX_TE_CAP_SOFTCAP) {
        c.beta1 = (REAL)attrs[TX_TE_A_SITU_BETA1].f;
        c.beta2 = (REAL)attrs[TX_TE_A_SITU_BETA2].f;
    }
    return c;
}

/* The gate's f, f' with ClampedSwiGLU's clamp, and the up value b̃ with
 * its derivative. */
static void FN(gate)(act_desc d, const FN(clamp_params) *c, REAL a, REAL b, REAL *f, REAL *df,
                     REAL *bt, REAL *dbt)
{
    if (d.cap == TX_TE_CAP_SOFTCAP) {
        FN(act_table)[d.act](a, c->beta1, f, df);
        REAL u = R_TANH(b / c->beta2);
        *bt = c->beta2 * u;
        *dbt = K(1) - u * u;
        return;
    }
    if (d.cap != TX_TE_CAP_CLAMP) {
        FN(act_table)[d.act](a, K(1.702), f, df);
        *bt = b;
        *dbt = K(1);
        return;
    }
    REAL at = a < c->limit ? a : c->limit;
    FN(act_table)[d.act](at, c->alpha, f, df);
    if (a > c->limit) *df = K(0);
    REAL bc = b < -c->limit ? -c->limit : (b > c->limit ? c->limit : b);
    *bt = bc + c->offset;
    *dbt = R_FABS(b) <= c->limit ? K(1) : K(0);
}

static teexec_status *FN(act_fwd)(const tx_te_fwd_args *a, act_desc d)
{
    const tx_tensor *x = a->input;
    int64_t rows, w;
    tx_te_rows(x, 1, &rows, &w);
    int64_t wo = d.gated ? w / 2 : w;
    FN(clamp_params) c = FN(cap_params)(d, a->attrs);
    REAL *xb = NULL, *sb = NULL, *yb = tx_te_malloc((size_t)a->output->numel, sizeof(REAL));
    teexec_status *st = yb ? NULL : tx_oom();
    if (!st) st = te_load(x, &xb);
    if (!st && d.scaled) st = te_load(a->extra_inputs[0], &sb);
    if (!st) {
        for (int64_t r = 0; r < rows; r++) {
            const REAL *xr = xb + r * w;
            REAL *yr = yb + r * wo;
            REAL s = d.scaled ? sb[r] : K(1);
            if (!d.gated) {
                FN(act_row_f)(d.act, xr, yr, wo, K(1.702));
                if (d.scaled)
                    for (int64_t j = 0; j < wo; j++) yr[j] *= s;
                continue;
            }
            if (d.cap == TX_TE_CAP_NONE) {
                /* f(a) over the gate half in the vectorized row loop (the
                 * table's function, so the same bits as FN(gate)), then
                 * times b */
                FN(act_row_f)(d.act, xr, yr, wo, K(1.702));
                for (int64_t j = 0; j < wo; j++) {
                    yr[j] = yr[j] * xr[wo + j];
                    if (d.scaled) yr[j] *= s;
                }
                continue;
            }
            for (int64_t j = 0; j < wo; j++) {
                REAL f, df, bt, dbt;
                FN(gate)(d, &c, xr[j], xr[wo + j], &f, &df, &bt, &dbt);
                yr[j] = f * bt;
                if (d.scaled) yr[j] *= s;
            }
        }
        te_store(a->output, yb);
    }
    free(xb);
    free(sb);
    free(yb);
    return st;
}

static teexec_status *FN(act_bwd)(const tx_te_bwd_args *a, act_desc d)
{
    const tx_tensor *x = a->saved[0];
    tx_tensor *dx = a->grad_input;
    tx_tensor *ds = d.scaled && a->n_grad_extra_inputs > 0 ? a->grad_extra_inputs[0] : NULL;
    int64_t rows, w;
    tx_te_rows(x, 1, &rows, &w);
    int64_t wo = d.gated ? w / 2 : w;
    FN(clamp_params) c = FN(cap_params)(d, a->attrs);
    REAL *xb = NULL, *dyb = NULL, *sb = NULL;
    REAL *dxb = tx_te_malloc((size_t)x->numel, sizeof(REAL));
    REAL *dsb = tx_te_malloc((size_t)rows, sizeof(REAL));
    /* one row's f and f' (uncapped activations: act_row_fdf) */
    REAL *fr = tx_te_malloc((size_t)(2 * wo), sizeof(REAL)), *dfr = fr ? fr + wo : NULL;
    teexec_status *st = dxb && dsb && fr ? NULL : tx_oom();
    if (!st) st = te_load(x, &xb);
    if (!st) st = te_load(a->grad_output, &dyb);
    if (!st && d.scaled && dx) st = te_load(a->saved[1], &sb);
    if (st) goto done;
    for (int64_t r = 0; r < rows; r++) {
        const REAL *xr = xb + r * w, *dyr = dyb + r * wo;
        REAL *dxr = dxb + r * w;
        REAL s = sb ? sb[r] : K(1);
        double dsacc = 0.0;
        if (d.cap == TX_TE_CAP_NONE) {
            /* the same f and f' as the table gives (the same inlined
             * functions), computed by the vectorized row loop */
            FN(act_row_fdf)(d.act, xr, fr, dfr, wo, K(1.702));
            for (int64_t j = 0; j < wo; j++) {
                if (d.gated) {
                    REAL bt = xr[wo + j], g = dyr[j] * s;
                    dxr[j] = g * bt * dfr[j];
                    dxr[wo + j] = g * fr[j] * K(1);
                    dsacc += (double)dyr[j] * fr[j] * bt;
                } else {
                    dxr[j] = dyr[j] * s * dfr[j];
                    dsacc += (double)dyr[j] * fr[j];
                }
            }
            dsb[r] = (REAL)dsacc;
            continue;
        }
        for (int64_t j = 0; j < wo; j++) {
            REAL f, df;
            if (d.gated) {
                REAL bt, dbt;
                FN(gate)(d, &c, xr[j], xr[wo + j], &f, &df, &bt, &dbt);
                REAL g = dyr[j] * s;
                dxr[j] = g * bt * df;
                dxr[wo + j] = g * f * dbt;
                dsacc += (double)dyr[j] * f * bt;
            } else {
                FN(act_table)[d.act](xr[j], K(1.702), &f, &df);
                dxr[j] = dyr[j] * s * df;
                dsacc += (double)dyr[j] * f;
            }
        }
        dsb[r] = (REAL)dsacc;
    }
    if (dx) te_store(dx, dxb);
    if (ds) te_store(ds, dsb);
done:
    free(xb);
    free(dyb);
    free(sb);
    free(dxb);
    free(dsb);
    free(fr);
    return st;
}

#endif
