/*
 * te_linear.c - Linear (y = x·Wᵀ, TE's BasicLinear) and Bias, CPU.
 *
 * The math is written once over REAL and compiled twice (float, double):
 * this file includes itself with TE_F64 = 0 and 1 (see te_real.h). The
 * first part (checks and entry points) is compiled once.
 */
#ifndef TE_PASS
#define TE_PASS
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include <math.h>
#include <stdlib.h>

#define TE_F64 0
#include "kernels/cpu/te_linear.c"
#undef TE_F64
#define TE_F64 1
#include "kernels/cpu/te_linear.c"
#undef TE_F64

teexec_status *tx_te_cpu_linear_fwd(const tx_te_fwd_args *a)
{
    const tx_tensor *x = a->input, *w = a->params[0];
    TX_TRY(tx_te_check_real(a->op, "x", x));
    TX_TRY(tx_te_check_real(a->op, "weight", w));
    if (x->rank < 1 || w->rank != 2 || w->dims[1] != x->dims[x->rank - 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops Linear: weight must be [N, K] with K = the last dim of x");
    tx_shape ys = tx_shape_of(x);
    ys.dims[x->rank - 1] = w->dims[0];
    TX_TRY(tx_te_check_real_shape(a->op, "y", a->output, &ys));
    int64_t m, k;
    tx_te_rows(x, 1, &m, &k);
    TX_TRY(tx_te_check_blas(a->op, m, w->dims[0], k));
    return x->dtype == TEEXEC_DTYPE_DOUBLE ? linear_fwd_f64(a) : linear_fwd_f32(a);
}

teexec_status *tx_te_cpu_linear_bwd(const tx_te_bwd_args *a)
{
    if (a->n_saved != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops Linear: expected 2 saved tensors (x, weight), got %d", a->n_saved);
    const tx_tensor *x = a->saved[0], *w = a->saved[1];
    tx_tensor *dx = a->grad_input, *dw = a->n_grad_params > 0 ? a->grad_params[0] : NULL;
    TX_TRY(tx_te_check_real(a->op, "dy", a->grad_output));
    if (dx) TX_TRY(tx_te_check_real(a->op, "saved weight", w));
    if (dw) TX_TRY(tx_te_check_real(a->op, "saved x", x));
    const tx_tensor *dy = a->grad_output;
    int64_t n = dy->rank ? dy->dims[dy->rank - 1] : 1;
    int64_t m = n ? (int64_t)dy->numel / n : 0;
    if (dx) {
        tx_shape s = tx_shape_of(dy);
        if (w->rank != 2 || w->dims[0] != n || dy->rank < 1)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops Linear: dy does not fit the saved weight");
        s.dims[s.rank - 1] = w->dims[1];
        TX_TRY(tx_te_check_real_shape(a->op, "dx", dx, &s));
    }
    if (dw) {
        int64_t xm, k;
        tx_te_rows(x, 1, &xm, &k);
        tx_shape s = {2, {n, k}};
        if (xm != m || dy->rank < 1)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops Linear: dy does not fit the saved x");
        TX_TRY(tx_te_check_real_shape(a->op, "dweight", dw, &s));
    }
    bool f64 = dy->dtype == TEEXEC_DTYPE_DOUBLE || (x && x->dtype == TEEXEC_DTYPE_DOUBLE) ||
               (w && w->dtype == TEEXEC_DTYPE_DOUBLE);
    return f64 ? linear_bwd_f64(a) : linear_bwd_f32(a);
}

teexec_status *tx_te_cpu_bias_fwd(const tx_te_fwd_args *a)
{
    const tx_tensor *x = a->input, *b = a->params[0];
    TX_TRY(tx_te_check_real(a->op, "x", x));
    TX_TRY(tx_te_check_real(a->op, "bias", b));
    if (x->rank < 1 || b->rank != 1 || b->dims[0] != x->dims[x->rank - 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops Bias: bias must be [N] with N = the last dim of x");
    tx_shape s = tx_shape_of(x);
    TX_TRY(tx_te_check_real_shape(a->op, "y", a->output, &s));
    return x->dtype == TEEXEC_DTYPE_DOUBLE ? bias_fwd_f64(a) : bias_fwd_f32(a);
}

teexec_status *tx_te_cpu_bias_bwd(const tx_te_bwd_args *a)
{
    const tx_tensor *dy = a->grad_output;
    tx_tensor *db = a->n_grad_params > 0 ? a->grad_params[0] : NULL;
    TX_TRY(tx_te_check_real(a->op, "dy", dy));
    tx_shape s = tx_shape_of(dy);
    if (a->grad_input) TX_TRY(tx_te_check_real_shape(a->op, "dx", a->grad_input, &s));
    if (db) {
        tx_shape bs = {1, {dy->rank ? dy->dims[dy->rank - 1] : 1}};
        TX_TRY(tx_te_check_real_shape(a->op, "dbias", db, &bs));
    }
    if (a->grad_input) tx_te_convert_copy(a->grad_input, dy);
    if (!db) return NULL;
    return dy->dtype == TEEXEC_DTYPE_DOUBLE ? bias_bwd_f64(a) : bias_bwd_f32(a);
}

#else /* a REAL pass */
#include "kernels/cpu/te_real.h"

static teexec_status *FN(linear_fwd)(const tx_te_fwd_args *a)
{
    const tx_tensor *x = a->input, *w = a->params[0];
    int64_t m, k, n = w->dims[0];
    tx_te_rows(x, 1, &m, &k);
    /* x and w are read in place when they are REAL already (no copy of the
     * weight per call); y is the output itself when it is REAL and shares
     * no byte with x or w */
    const REAL *xb = NULL, *wb = NULL;
    REAL *xo = NULL, *wo = NULL;
    bool y_direct = a->output->dtype == TE_DTYPE && a->output->data &&
                    !tx_te_overlap(a->output, x) && !tx_te_overlap(a->output, w);
    REAL *yb = y_direct ? (REAL *)a->output->data
                        : tx_te_malloc((size_t)a->output->numel, sizeof(REAL));
    teexec_status *st = yb ? NULL : tx_oom();
    if (!st) st = te_view(x, &xb, &xo);
    if (!st) st = te_view(w, &wb, &wo);
    if (!st) {
        te_gemm(false, true, m, n, k, K(1), xb, k, wb, k, K(0), yb, n);
        if (!y_direct) te_store(a->output, yb);
    }
    free(xo);
    free(wo);
    if (!y_direct) free(yb);
    return st;
}

static teexec_status *FN(linear_bwd)(const tx_te_bwd_args *a)
{
    const tx_tensor *dy = a->grad_output, *x = a->saved[0], *w = a->saved[1];
    tx_tensor *dx = a->grad_input, *dw = a->n_grad_params > 0 ? a->grad_params[0] : NULL;
    int64_t n = dy->rank ? dy->dims[dy->rank - 1] : 1;
    int64_t m = n ? (int64_t)dy->numel / n : 0;
    REAL *dyb = NULL, *xb = NULL, *wb = NULL, *out = NULL;
    teexec_status *st = te_load(dy, &dyb);
    if (!st && dx) {
        int64_t k = w->dims[1];
        st = tx_te_check_blas(a->op, m, k, n);
        if (!st) st = te_load(w, &wb);
        if (!st && !(out = tx_te_malloc((size_t)dx->numel, sizeof(REAL)))) st = tx_oom();
        if (!st) {
            te_gemm(false, false, m, k, n, K(1), dyb, n, wb, k, K(0), out, k);
            te_store(dx, out);
        }
        free(out);
        out = NULL;
    }
    if (!st && dw) {
        int64_t k = dw->dims[1];
        st = tx_te_check_blas(a->op, n, k, m);
        if (!st) st = te_load(x, &xb);
        if (!st && !(out = tx_te_malloc((size_t)dw->numel, sizeof(REAL)))) st = tx_oom();
        if (!st) {
            te_gemm(true, false, n, k, m, K(1), dyb, n, xb, k, K(0), out, k);
            te_store(dw, out);
        }
        free(out);
    }
    free(dyb);
    free(xb);
    free(wb);
    return st;
}

static teexec_status *FN(bias_fwd)(const tx_te_fwd_args *a)
{
    const tx_tensor *x = a->input;
    int64_t rows, n;
    tx_te_rows(x, 1, &rows, &n);
    const REAL *xb = NULL, *bb = NULL;
    REAL *xo = NULL, *bo = NULL;
    /* y = x + b element by element: written straight into a REAL output,
     * which may be x's own buffer (each element is read before it is
     * written) but must not overlap it otherwise */
    bool y_direct = a->output->dtype == TE_DTYPE && a->output->data &&
                    (a->output->data == x->data || !tx_te_overlap(a->output, x)) &&
                    !tx_te_overlap(a->output, a->params[0]);
    REAL *yb = y_direct ? (REAL *)a->output->data : NULL;
    teexec_status *st = te_view(x, &xb, &xo);
    if (!st) st = te_view(a->params[0], &bb, &bo);
    if (!st && !y_direct && !(yb = tx_te_malloc((size_t)a->output->numel, sizeof(REAL))))
        st = tx_oom();
    if (!st) {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++) yb[r * n + j] = xb[r * n + j] + bb[j];
        if (!y_direct) te_store(a->output, yb);
    }
    if (!y_direct) free(yb);
    free(xo);
    free(bo);
    return st;
}

static teexec_status *FN(bias_bwd)(const tx_te_bwd_args *a)
{
    const tx_tensor *dy = a->grad_output;
    tx_tensor *db = a->grad_params[0];
    int64_t rows, n;
    tx_te_rows(dy, 1, &rows, &n);
    REAL *dyb = NULL, *out = tx_te_malloc((size_t)n, sizeof(REAL));
    double *acc = tx_te_calloc((size_t)n, sizeof(double));
    teexec_status *st = out && acc ? NULL : tx_oom();
    if (!st) st = te_load(dy, &dyb);
    if (!st) {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++) acc[j] += dyb[r * n + j];
        for (int64_t j = 0; j < n; j++) out[j] = (REAL)acc[j];
        te_store(db, out);
    }
    free(dyb);
    free(out);
    free(acc);
    return st;
}

#endif
