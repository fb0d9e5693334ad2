/*
 * te_norm.c - LayerNorm, RMSNorm and L2Normalization, CPU.
 *
 * Rows are the leading dims of x; the normalised inner dims are the
 * trailing dims that weight covers (the last dim for L2Normalization).
 * Row statistics accumulate in double; the saved statistics (mu, rsigma,
 * rsqrt_norm) are float32, or float64 on the FP64 path.
 *
 * Written once over REAL, compiled twice (this file includes itself; see
 * te_real.h).
 */
#ifndef TE_PASS
#define TE_PASS
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"
/* the float pass's row loops get AVX2 clones */
#include "kernels/cpu/kcommon.h"

#include <math.h>
#include <stdlib.h>

typedef enum norm_kind { NORM_LAYER, NORM_RMS, NORM_L2 } norm_kind;

static norm_kind kind_of(tx_te_op_id op)
{
    return op == TX_TE_LAYER_NORM ? NORM_LAYER : op == TX_TE_RMS_NORM ? NORM_RMS : NORM_L2;
}

static int n_stats(norm_kind k) { return k == NORM_LAYER ? 2 : 1; }

/* Checks and the row split; inner_rank = rank of weight (1 for L2). */
static teexec_status *norm_check_fwd(const tx_te_fwd_args *a, int *inner_rank)
{
    norm_kind k = kind_of(a->op);
    const tx_tensor *x = a->input;
    TX_TRY(tx_te_check_real(a->op, "x", x));
    *inner_rank = 1;
    int np = k == NORM_LAYER ? 2 : k == NORM_RMS ? 1 : 0;
    for (int p = 0; p < np; p++) {
        const tx_tensor *w = a->params[p];
        TX_TRY(tx_te_check_real(a->op, p ? "bias" : "weight", w));
        bool ok = w->rank >= 1 && w->rank <= x->rank;
        for (int d = 0; ok && d < w->rank; d++) ok = w->dims[d] == x->dims[x->rank - w->rank + d];
        if (!ok)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: parameters must equal the trailing dims of x",
                            tx_te_name(a->op));
        *inner_rank = w->rank;
    }
    if (x->rank < *inner_rank)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: x has rank 0", tx_te_name(a->op));
    tx_shape s = tx_shape_of(x);
    TX_TRY(tx_te_check_real_shape(a->op, "y", a->output, &s));
    if (a->training && a->aux && a->n_aux > 0) {
        tx_shape rs = tx_te_leading(x, *inner_rank);
        for (int i = 0; i < n_stats(k); i++)
            if (a->aux[i])
                TX_TRY(tx_te_check_out(a->op, "saved statistics", a->aux[i],
                                       tx_dtype_stat(x->dtype), &rs));
    }
    return NULL;
}

#define TE_F64 0
#include "kernels/cpu/te_norm.c"
#undef TE_F64
#define TE_F64 1
#include "kernels/cpu/te_norm.c"
#undef TE_F64

static teexec_status *norm_fwd(const tx_te_fwd_args *a)
{
    int inner_rank;
    TX_TRY(norm_check_fwd(a, &inner_rank));
    return a->input->dtype == TEEXEC_DTYPE_DOUBLE ? norm_fwd_f64(a, inner_rank)
                                                  : norm_fwd_f32(a, inner_rank);
}

static teexec_status *norm_bwd(const tx_te_bwd_args *a)
{
    norm_kind k = kind_of(a->op);
    /* saved: LN x, weight, mu, rsigma; RMS x, weight, rsigma; L2 x, rsqrt_norm */
    int want = k == NORM_LAYER ? 4 : k == NORM_RMS ? 3 : 2;
    if (a->n_saved != want)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: expected %d saved tensors, got %d",
                        tx_te_name(a->op), want, a->n_saved);
    const tx_tensor *x = a->saved[0];
    TX_TRY(tx_te_check_real(a->op, "saved x", x));
    TX_TRY(tx_te_check_real(a->op, "dy", a->grad_output));
    tx_shape s = tx_shape_of(x);
    if (!tx_tensor_has_shape(a->grad_output, &s))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: dy must have x's shape",
                        tx_te_name(a->op));
    int inner_rank = 1;
    if (k != NORM_L2) {
        const tx_tensor *w = a->saved[1];
        if (a->grad_input) TX_TRY(tx_te_check_real(a->op, "saved weight", w));
        for (int p = 0; p < a->n_grad_params; p++)
            if (a->grad_params[p]) inner_rank = a->grad_params[p]->rank;
        if (w) inner_rank = w->rank;
        if (inner_rank < 1 || inner_rank > x->rank)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: bad parameter rank",
                            tx_te_name(a->op));
        tx_shape ws = s;
        ws.rank = inner_rank;
        for (int d = 0; d < inner_rank; d++) ws.dims[d] = s.dims[x->rank - inner_rank + d];
        if (w && !tx_tensor_has_shape(w, &ws))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: saved weight must equal the trailing dims of x",
                            tx_te_name(a->op));
        for (int p = 0; p < a->n_grad_params; p++)
            if (a->grad_params[p]) TX_TRY(tx_te_check_real_shape(a->op, "parameter grad", a->grad_params[p], &ws));
    }
    tx_shape rs = tx_te_leading(x, inner_rank);
    for (int i = want - n_stats(k); i < want; i++)
        TX_TRY(tx_te_check_out(a->op, "saved statistics", a->saved[i], tx_dtype_stat(x->dtype), &rs));
    if (a->grad_input) TX_TRY(tx_te_check_real_shape(a->op, "dx", a->grad_input, &s));
    return x->dtype == TEEXEC_DTYPE_DOUBLE ? norm_bwd_f64(a, inner_rank)
                                           : norm_bwd_f32(a, inner_rank);
}

teexec_status *tx_te_cpu_layer_norm_fwd(const tx_te_fwd_args *a) { return norm_fwd(a); }
teexec_status *tx_te_cpu_layer_norm_bwd(const tx_te_bwd_args *a) { return norm_bwd(a); }
teexec_status *tx_te_cpu_rms_norm_fwd(const tx_te_fwd_args *a) { return norm_fwd(a); }
teexec_status *tx_te_cpu_rms_norm_bwd(const tx_te_bwd_args *a) { return norm_bwd(a); }
teexec_status *tx_te_cpu_l2_normalization_fwd(const tx_te_fwd_args *a) { return norm_fwd(a); }
teexec_status *tx_te_cpu_l2_normalization_bwd(const tx_te_bwd_args *a) { return norm_bwd(a); }

#else /* a REAL pass */
#include "kernels/cpu/te_real.h"

#if TE_F64
#define NORM_CLONES
#else
#define NORM_CLONES TX_SIMD_CLONES
#endif

/* The row's sum, and its sum of squared deviations from mu, in double over
 * four chains: one fixed order on every call (the results do not depend on
 * the machine or the thread), and four independent additions in flight
 * instead of one chain's latency per element. */
NORM_CLONES static double FN(row_sum)(const REAL *row, int64_t h)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    int64_t j = 0;
    for (; j + 4 <= h; j += 4) {
        a0 += row[j];
        a1 += row[j + 1];
        a2 += row[j + 2];
        a3 += row[j + 3];
    }
    for (; j < h; j++) a0 += row[j];
    return (a0 + a1) + (a2 + a3);
}

NORM_CLONES static double FN(row_sq_dev)(const REAL *row, int64_t h, double mu)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    int64_t j = 0;
    for (; j + 4 <= h; j += 4) {
        double c0 = (double)row[j] - mu, c1 = (double)row[j + 1] - mu;
        double c2 = (double)row[j + 2] - mu, c3 = (double)row[j + 3] - mu;
        a0 += c0 * c0;
        a1 += c1 * c1;
        a2 += c2 * c2;
        a3 += c3 * c3;
    }
    for (; j < h; j++) {
        double c = (double)row[j] - mu;
        a0 += c * c;
    }
    return (a0 + a1) + (a2 + a3);
}

/* y = (x - m) rs, times the gain (1 + w with zero-centered gamma) plus the
 * bias (0 for RMSNorm, kept as "+ 0" so a -0 product reads as before); L2
 * takes neither. Each kind its own loop, so each vectorizes. */
NORM_CLONES static void FN(normalize)(REAL *row, int64_t h, REAL m, REAL rs, const REAL *wb,
                                      const REAL *bb, bool zcg, norm_kind kind)
{
    if (kind == NORM_L2) {
        for (int64_t j = 0; j < h; j++) row[j] = (row[j] - m) * rs;
    } else if (kind == NORM_LAYER && !zcg) {
        for (int64_t j = 0; j < h; j++) row[j] = ((row[j] - m) * rs) * wb[j] + bb[j];
    } else if (kind == NORM_LAYER) {
        for (int64_t j = 0; j < h; j++) row[j] = ((row[j] - m) * rs) * (K(1) + wb[j]) + bb[j];
    } else if (!zcg) {
        for (int64_t j = 0; j < h; j++) row[j] = ((row[j] - m) * rs) * wb[j] + K(0);
    } else {
        for (int64_t j = 0; j < h; j++) row[j] = ((row[j] - m) * rs) * (K(1) + wb[j]) + K(0);
    }
}
#undef NORM_CLONES

static teexec_status *FN(norm_fwd)(const tx_te_fwd_args *a, int inner_rank)
{
    norm_kind kind = kind_of(a->op);
    const tx_tensor *x = a->input;
    int64_t rows, h;
    tx_te_rows(x, inner_rank, &rows, &h);
    bool zcg = kind != NORM_L2 && a->attrs[TX_TE_A_NORM_ZCG].i != 0;
    double eps = a->attrs[kind == NORM_L2 ? TX_TE_A_L2_EPS : TX_TE_A_NORM_EPS].f;
    REAL *xb = NULL, *wb = NULL, *bb = NULL;
    REAL *s0 = tx_te_malloc((size_t)rows, sizeof(REAL)), *s1 = tx_te_malloc((size_t)rows, sizeof(REAL));
    teexec_status *st = s0 && s1 ? NULL : tx_oom();
    if (!st) st = te_load(x, &xb);
    if (!st && kind != NORM_L2) st = te_load(a->params[0], &wb);
    if (!st && kind == NORM_LAYER) st = te_load(a->params[1], &bb);
    if (st) goto done;
    for (int64_t r = 0; r < rows; r++) {
        REAL *row = xb + r * h;
        double mu = 0.0;
        if (kind == NORM_LAYER) mu = h ? FN(row_sum)(row, h) / (double)h : 0.0;
        double ss = FN(row_sq_dev)(row, h, mu);
        REAL rs;
        if (kind == NORM_L2) rs = (REAL)(1.0 / sqrt(ss + eps));
        else rs = (REAL)(1.0 / sqrt((h ? ss / (double)h : 0.0) + eps));
        REAL m = (REAL)mu;
        FN(normalize)(row, h, m, rs, wb, bb, zcg, kind);
        s0[r] = kind == NORM_LAYER ? m : rs;
        s1[r] = rs;
    }
    te_store(a->output, xb);
    if (a->training && a->aux && a->n_aux > 0) {
        if (a->aux[0]) te_store(a->aux[0], s0);
        if (kind == NORM_LAYER && a->n_aux > 1 && a->aux[1]) te_store(a->aux[1], s1);
    }
done:
    free(xb);
    free(wb);
    free(bb);
    free(s0);
    free(s1);
    return st;
}

static teexec_status *FN(norm_bwd)(const tx_te_bwd_args *a, int inner_rank)
{
    norm_kind kind = kind_of(a->op);
    const tx_tensor *x = a->saved[0];
    int64_t rows, h;
    tx_te_rows(x, inner_rank, &rows, &h);
    bool zcg = kind != NORM_L2 && a->attrs[TX_TE_A_NORM_ZCG].i != 0;
    double eps = kind == NORM_L2 ? a->attrs[TX_TE_A_L2_EPS].f : 0.0;
    const tx_tensor *wt = kind != NORM_L2 ? a->saved[1] : NULL;
    const tx_tensor *mu_t = kind == NORM_LAYER ? a->saved[2] : NULL;
    const tx_tensor *rs_t = a->saved[kind == NORM_LAYER ? 3 : kind == NORM_RMS ? 2 : 1];
    tx_tensor *dw = kind != NORM_L2 && a->n_grad_params > 0 ? a->grad_params[0] : NULL;
    tx_tensor *db = kind == NORM_LAYER && a->n_grad_params > 1 ? a->grad_params[1] : NULL;
    REAL *xb = NULL, *dyb = NULL, *wb = NULL, *mub = NULL, *rsb = NULL, *out = NULL;
    double *dwacc = tx_te_calloc((size_t)h, sizeof(double));
    double *dbacc = tx_te_calloc((size_t)h, sizeof(double));
    teexec_status *st = dwacc && dbacc ? NULL : tx_oom();
    if (!st) st = te_load(x, &xb);
    if (!st) st = te_load(a->grad_output, &dyb);
    if (!st && wt) st = te_load(wt, &wb);
    if (!st && mu_t) st = te_load(mu_t, &mub);
    if (!st) st = te_load(rs_t, &rsb);
    if (st) goto done;
    for (int64_t r = 0; r < rows; r++) {
        REAL *xr = xb + r * h, *dyr = dyb + r * h;
        REAL m = mub ? mub[r] : K(0), rs = rsb[r];
        double mg = 0.0, mgx = 0.0;
        for (int64_t j = 0; j < h; j++) {
            REAL xh = (xr[j] - m) * rs;
            if (kind == NORM_L2) {
                mgx += (double)xr[j] * dyr[j];
                continue;
            }
            dwacc[j] += (double)dyr[j] * xh;
            dbacc[j] += dyr[j];
            if (wb) {
                REAL g = dyr[j] * (zcg ? K(1) + wb[j] : wb[j]);
                mg += g;
                mgx += (double)g * xh;
            }
        }
        if (!a->grad_input) continue;
        if (kind == NORM_L2) {
            /* dx = r·(dy − x·Σ(x·dy)/(Σx² + eps)) with 1/(Σx² + eps) = r². */
            (void)eps;
            REAL c = (REAL)(mgx * (double)rs * (double)rs);
            for (int64_t j = 0; j < h; j++) xr[j] = rs * (dyr[j] - xr[j] * c);
            continue;
        }
        REAL mgr = (REAL)(h ? mg / (double)h : 0.0), mgxr = (REAL)(h ? mgx / (double)h : 0.0);
        if (kind == NORM_RMS) mgr = K(0);
        for (int64_t j = 0; j < h; j++) {
            REAL xh = (xr[j] - m) * rs;
            REAL g = dyr[j] * (zcg ? K(1) + wb[j] : wb[j]);
            xr[j] = rs * (g - mgr - xh * mgxr);
        }
    }
    if (a->grad_input) te_store(a->grad_input, xb);
    if (dw || db) {
        if (!(out = tx_te_malloc((size_t)h, sizeof(REAL)))) {
            st = tx_oom();
            goto done;
        }
        if (dw) {
            for (int64_t j = 0; j < h; j++) out[j] = (REAL)dwacc[j];
            te_store(dw, out);
        }
        if (db) {
            for (int64_t j = 0; j < h; j++) out[j] = (REAL)dbacc[j];
            te_store(db, out);
        }
    }
done:
    free(xb);
    free(dyb);
    free(wb);
    free(mub);
    free(rsb);
    free(out);
    free(dwacc);
    free(dbacc);
    return st;
}

#endif
