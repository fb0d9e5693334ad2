/*
 * te_activation.c - every TE activation, CPU: GELU, QGELU, ReLU, SReLU,
 * SiLU; the gated GLU, GEGLU, QGEGLU, ReGLU, SReGLU, SwiGLU, ClampedSwiGLU
 * (x = [a | b] on the last dim, TE's order: a is the gate); and the
 * row-scaled ScaledSwiGLU and ScaledSReLU (extra input: one scale per row).
 *
 * All of them are one table of scalar (f, f') pairs plus three loop shapes
 * (plain, gated, scaled), so a new activation is one table row. Written
 * once over REAL, compiled twice (this file includes itself; te_real.h).
 */
#ifndef TE_PASS
#define TE_PASS
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include <math.h>
#include <stdlib.h>

typedef enum act_kind {
    ACT_GELU_TANH,
    ACT_GELU_ERF,
    ACT_QGELU,   /* x·σ(alpha·x), alpha = 1.702 unless ClampedSwiGLU sets it */
    ACT_RELU,
    ACT_SRELU,
    ACT_SILU,
    ACT_SIGMOID, /* GLU's gate */
    ACT_COUNT
} act_kind;

typedef struct act_desc {
    act_kind act;
    bool gated;   /* y = f(a)·b */
    bool scaled;  /* y = (...)·scales[row] */
    bool clamped; /* ClampedSwiGLU */
} act_desc;

static act_desc describe(const tx_te_op_id op, const tx_te_attr_value *attrs)
{
    act_desc d = {ACT_RELU, false, false, false};
    switch (op) {
    case TX_TE_GELU:
    case TX_TE_GEGLU:
        d.act = attrs[TX_TE_A_GELU_APPROX].i == TX_TE_GELU_ERF ? ACT_GELU_ERF : ACT_GELU_TANH;
        d.gated = op == TX_TE_GEGLU;
        break;
    case TX_TE_QGELU: d.act = ACT_QGELU; break;
    case TX_TE_RELU: d.act = ACT_RELU; break;
    case TX_TE_SRELU: d.act = ACT_SRELU; break;
    case TX_TE_SILU: d.act = ACT_SILU; break;
    case TX_TE_GLU: d = (act_desc){ACT_SIGMOID, true, false, false}; break;
    case TX_TE_QGEGLU: d = (act_desc){ACT_QGELU, true, false, false}; break;
    case TX_TE_REGLU: d = (act_desc){ACT_RELU, true, false, false}; break;
    case TX_TE_SREGLU: d = (act_desc){ACT_SRELU, true, false, false}; break;
    case TX_TE_SWIGLU: d = (act_desc){ACT_SILU, true, false, false}; break;
    case TX_TE_CLAMPED_SWIGLU: d = (act_desc){ACT_QGELU, true, false, true}; break;
    case TX_TE_SCALED_SWIGLU: d = (act_desc){ACT_SILU, true, true, false}; break;
    case TX_TE_SCALED_SRELU: d = (act_desc){ACT_SRELU, false, true, false}; break;
    default: break;
    }
    return d;
}

static bool is_activation(tx_te_op_id op)
{
    return (op >= TX_TE_GELU && op <= TX_TE_SCALED_SRELU);
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

static REAL FN(sigmoid)(REAL x) { return K(1) / (K(1) + R_EXP(-x)); }

/* Each scalar function writes f(x) and f'(x); p is alpha for QGELU. */
static void FN(f_gelu_tanh)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    REAL t = R_TANH(K(0.79788456) * x * (K(1) + K(0.044715) * x * x));
    *f = K(0.5) * x * (K(1) + t);
    *df = K(0.5) * x * ((K(1) - t * t) * (K(0.79788456) + K(0.1070322243) * x * x)) +
          K(0.5) * (K(1) + t);
}

static void FN(f_gelu_erf)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    REAL c = K(0.5) * (K(1) + R_ERF(x * K(0.70710678118654752440)));
    *f = x * c;
    *df = c + x * K(0.39894228040143267794) * R_EXP(K(-0.5) * x * x);
}

static void FN(f_qgelu)(REAL x, REAL p, REAL *f, REAL *df)
{
    REAL s = FN(sigmoid)(p * x);
    *f = x * s;
    *df = p * x * s * (K(1) - s) + s;
}

static void FN(f_relu)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    *f = x > K(0) ? x : K(0);
    *df = x > K(0) ? K(1) : K(0);
}

static void FN(f_srelu)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    *f = x > K(0) ? x * x : K(0);
    *df = x > K(0) ? K(2) * x : K(0);
}

static void FN(f_silu)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    REAL s = FN(sigmoid)(x);
    *f = x * s;
    *df = x * s * (K(1) - s) + s;
}

static void FN(f_sigmoid)(REAL x, REAL p, REAL *f, REAL *df)
{
    (void)p;
    REAL s = FN(sigmoid)(x);
    *f = s;
    *df = s * (K(1) - s);
}

static void (*const FN(act_table)[ACT_COUNT])(REAL, REAL, REAL *, REAL *) = {
    [ACT_GELU_TANH] = FN(f_gelu_tanh), [ACT_GELU_ERF] = FN(f_gelu_erf),
    [ACT_QGELU] = FN(f_qgelu),         [ACT_RELU] = FN(f_relu),
    [ACT_SRELU] = FN(f_srelu),         [ACT_SILU] = FN(f_silu),
    [ACT_SIGMOID] = FN(f_sigmoid),
};

typedef struct FN(clamp_params) {
    REAL limit, alpha, offset;
} FN(clamp_params);

/* The gate's f, f' with ClampedSwiGLU's clamp, and the up value b̃ with
 * its derivative. */
static void FN(gate)(act_desc d, const FN(clamp_params) *c, REAL a, REAL b, REAL *f, REAL *df,
                     REAL *bt, REAL *dbt)
{
    if (!d.clamped) {
        FN(act_table)[d.act](a, K(1.702), f, df);
        *bt = b;
        *dbt = K(1);
        return;
    }
    REAL at = a < c->limit ? a : c->limit;
    FN(act_table)[ACT_QGELU](at, c->alpha, f, df);
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
    FN(clamp_params) c = {K(0), K(0), K(0)};
    if (d.clamped)
        c = (FN(clamp_params)){(REAL)a->attrs[TX_TE_A_CLAMP_LIMIT].f,
                               (REAL)a->attrs[TX_TE_A_CLAMP_ALPHA].f,
                               (REAL)a->attrs[TX_TE_A_CLAMP_OFFSET].f};
    REAL *xb = NULL, *sb = NULL, *yb = tx_te_malloc((size_t)a->output->numel, sizeof(REAL));
    teexec_status *st = yb ? NULL : tx_oom();
    if (!st) st = te_load(x, &xb);
    if (!st && d.scaled) st = te_load(a->extra_inputs[0], &sb);
    if (!st) {
        for (int64_t r = 0; r < rows; r++) {
            const REAL *xr = xb + r * w;
            REAL *yr = yb + r * wo;
            REAL s = d.scaled ? sb[r] : K(1);
            for (int64_t j = 0; j < wo; j++) {
                REAL f, df;
                if (d.gated) {
                    REAL bt, dbt;
                    FN(gate)(d, &c, xr[j], xr[wo + j], &f, &df, &bt, &dbt);
                    yr[j] = f * bt;
                } else {
                    FN(act_table)[d.act](xr[j], K(1.702), &f, &df);
                    yr[j] = f;
                }
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
    FN(clamp_params) c = {K(0), K(0), K(0)};
    if (d.clamped)
        c = (FN(clamp_params)){(REAL)a->attrs[TX_TE_A_CLAMP_LIMIT].f,
                               (REAL)a->attrs[TX_TE_A_CLAMP_ALPHA].f,
                               (REAL)a->attrs[TX_TE_A_CLAMP_OFFSET].f};
    REAL *xb = NULL, *dyb = NULL, *sb = NULL;
    REAL *dxb = tx_te_malloc((size_t)x->numel, sizeof(REAL));
    REAL *dsb = tx_te_malloc((size_t)rows, sizeof(REAL));
    teexec_status *st = dxb && dsb ? NULL : tx_oom();
    if (!st) st = te_load(x, &xb);
    if (!st) st = te_load(a->grad_output, &dyb);
    if (!st && d.scaled && dx) st = te_load(a->saved[1], &sb);
    if (st) goto done;
    for (int64_t r = 0; r < rows; r++) {
        const REAL *xr = xb + r * w, *dyr = dyb + r * wo;
        REAL *dxr = dxb + r * w;
        REAL s = sb ? sb[r] : K(1);
        double dsacc = 0.0;
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
    return st;
}

#endif
