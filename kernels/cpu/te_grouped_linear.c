/*
 * te_grouped_linear.c - GroupedLinear (MoE experts), CPU: rows of x are
 * split in order by split_sizes and group g's rows go through its own
 * weight (and bias). Rows past sum(split_sizes) belong to no group: their
 * output is 0 and they get no gradient (dx = 0 there, no parameter grad).
 *
 * Written once over REAL, compiled twice (this file includes itself;
 * te_real.h).
 */
#ifndef TE_PASS
#define TE_PASS
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Validates split_sizes against G and the row count M; fills offsets
 * (G + 1 entries, caller-provided). */
static teexec_status *read_splits(tx_te_op_id op, const tx_tensor *ss, int64_t g, int64_t m,
                                  int64_t *offsets)
{
    if (!ss || !ss->data || ss->dtype != TEEXEC_DTYPE_INT64 || ss->rank != 1 || ss->dims[0] != g)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: split_sizes must be an int64 tensor of shape [%lld]",
                        tx_te_name(op), (long long)g);
    const int64_t *s = ss->data;
    offsets[0] = 0;
    for (int64_t i = 0; i < g; i++) {
        if (s[i] < 0 || s[i] > m - offsets[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops %s: split_sizes[%lld] = %lld is negative or runs past the "
                            "%lld rows of x", tx_te_name(op), (long long)i, (long long)s[i],
                            (long long)m);
        offsets[i + 1] = offsets[i] + s[i];
    }
    return NULL;
}

#define TE_F64 0
#include "kernels/cpu/te_grouped_linear.c"
#undef TE_F64
#define TE_F64 1
#include "kernels/cpu/te_grouped_linear.c"
#undef TE_F64

teexec_status *tx_te_cpu_grouped_linear_fwd(const tx_te_fwd_args *a)
{
    int64_t g = a->attrs[TX_TE_A_GL_NUM_GROUPS].i;
    bool has_bias = a->attrs[TX_TE_A_GL_BIAS].i != 0;
    const tx_tensor *x = a->input;
    TX_TRY(tx_te_check_real(a->op, "x", x));
    if (g < 1 || a->n_params != (has_bias ? 2 * g : g) || x->rank < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops GroupedLinear: expected %lld parameters for num_groups=%lld",
                        (long long)(has_bias ? 2 * g : g), (long long)g);
    int64_t m, k;
    tx_te_rows(x, 1, &m, &k);
    int64_t n = -1;
    for (int64_t i = 0; i < a->n_params; i++) {
        const tx_tensor *p = a->params[i];
        TX_TRY(tx_te_check_real(a->op, i < g ? "weight" : "bias", p));
        if (i == 0) n = p->rank == 2 ? p->dims[0] : -1;
        bool ok = i < g ? p->rank == 2 && p->dims[0] == n && p->dims[1] == k
                        : p->rank == 1 && p->dims[0] == n;
        if (!ok)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops GroupedLinear: every weight must be [N, K] and every bias [N] "
                            "(K = last dim of x)");
    }
    tx_shape ys = tx_shape_of(x);
    ys.dims[ys.rank - 1] = n;
    TX_TRY(tx_te_check_real_shape(a->op, "y", a->output, &ys));
    TX_TRY(tx_te_check_blas(a->op, m, n, k));
    int64_t *off = tx_te_malloc((size_t)g + 1, sizeof(int64_t));
    if (!off) return tx_oom();
    teexec_status *st = read_splits(a->op, a->n_extra_inputs > 0 ? a->extra_inputs[0] : NULL, g, m, off);
    if (!st) st = x->dtype == TEEXEC_DTYPE_DOUBLE ? gl_fwd_f64(a, off, n) : gl_fwd_f32(a, off, n);
    free(off);
    return st;
}

teexec_status *tx_te_cpu_grouped_linear_bwd(const tx_te_bwd_args *a)
{
    int64_t g = a->attrs[TX_TE_A_GL_NUM_GROUPS].i;
    bool has_bias = a->attrs[TX_TE_A_GL_BIAS].i != 0;
    int64_t np = has_bias ? 2 * g : g;
    const tx_tensor *dy = a->grad_output;
    TX_TRY(tx_te_check_real(a->op, "dy", dy));
    if (g < 1 || a->n_saved != 2 + np || dy->rank < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops GroupedLinear: expected %lld saved tensors, got %d",
                        (long long)(2 + np), a->n_saved);
    int64_t m, n;
    tx_te_rows(dy, 1, &m, &n);
    const tx_tensor *x = a->saved[1];
    bool need_dparams = false;
    for (int i = 0; i < a->n_grad_params; i++) need_dparams |= a->grad_params[i] != NULL;
    int64_t k = -1;
    if (a->grad_input) {
        for (int64_t i = 0; i < g; i++) {
            const tx_tensor *w = a->saved[2 + i];
            TX_TRY(tx_te_check_real(a->op, "saved weight", w));
            if (w->rank != 2 || w->dims[0] != n || (k >= 0 && w->dims[1] != k))
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "te.ops GroupedLinear: saved weights do not fit dy");
            k = w->dims[1];
        }
        tx_shape s = tx_shape_of(dy);
        s.dims[s.rank - 1] = k;
        TX_TRY(tx_te_check_real_shape(a->op, "dx", a->grad_input, &s));
    }
    if (need_dparams) {
        TX_TRY(tx_te_check_real(a->op, "saved x", x));
        int64_t xm, xk;
        tx_te_rows(x, 1, &xm, &xk);
        if (xm != m || (k >= 0 && xk != k))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops GroupedLinear: saved x does not fit dy");
        k = xk;
        for (int64_t i = 0; i < a->n_grad_params && i < np; i++) {
            if (!a->grad_params[i]) continue;
            tx_shape s = i < g ? (tx_shape){2, {n, k}} : (tx_shape){1, {n}};
            TX_TRY(tx_te_check_real_shape(a->op, "parameter grad", a->grad_params[i], &s));
        }
    }
    if (k < 0) return NULL;
    TX_TRY(tx_te_check_blas(a->op, m, n, k));
    int64_t *off = tx_te_malloc((size_t)g + 1, sizeof(int64_t));
    if (!off) return tx_oom();
    teexec_status *st = read_splits(a->op, a->saved[0], g, m, off);
    bool f64 = dy->dtype == TEEXEC_DTYPE_DOUBLE || (x && x->dtype == TEEXEC_DTYPE_DOUBLE);
    if (!st) st = f64 ? gl_bwd_f64(a, off, n, k) : gl_bwd_f32(a, off, n, k);
    free(off);
    return st;
}

#else /* a REAL pass */
#include "kernels/cpu/te_real.h"

static teexec_status *FN(gl_fwd)(const tx_te_fwd_args *a, const int64_t *off, int64_t n)
{
    int64_t g = a->attrs[TX_TE_A_GL_NUM_GROUPS].i;
    bool has_bias = a->attrs[TX_TE_A_GL_BIAS].i != 0;
    int64_t m, k;
    tx_te_rows(a->input, 1, &m, &k);
    REAL *xb = NULL, *wb = NULL, *yb = tx_te_calloc((size_t)a->output->numel, sizeof(REAL));
    teexec_status *st = yb ? NULL : tx_oom();
    if (!st) st = te_load(a->input, &xb);
    for (int64_t i = 0; !st && i < g; i++) {
        int64_t rows = off[i + 1] - off[i];
        if (rows == 0) continue;
        st = te_load(a->params[i], &wb);
        if (st) break;
        te_gemm(false, true, rows, n, k, K(1), xb + off[i] * k, k, wb, k, K(0), yb + off[i] * n, n);
        free(wb);
        wb = NULL;
        if (has_bias) {
            st = te_load(a->params[g + i], &wb);
            if (st) break;
            for (int64_t r = off[i]; r < off[i + 1]; r++)
                for (int64_t j = 0; j < n; j++) yb[r * n + j] += wb[j];
            free(wb);
            wb = NULL;
        }
    }
    if (!st) te_store(a->output, yb);
    free(xb);
    free(wb);
    free(yb);
    return st;
}

static teexec_status *FN(gl_bwd)(const tx_te_bwd_args *a, const int64_t *off, int64_t n, int64_t k)
{
    int64_t g = a->attrs[TX_TE_A_GL_NUM_GROUPS].i;
    bool has_bias = a->attrs[TX_TE_A_GL_BIAS].i != 0;
    const tx_tensor *dy = a->grad_output;
    tx_tensor *dx = a->grad_input;
    REAL *dyb = NULL, *xb = NULL, *wb = NULL;
    REAL *dxb = dx ? tx_te_calloc((size_t)dx->numel, sizeof(REAL)) : NULL;
    REAL *pb = tx_te_malloc((size_t)n * (size_t)(k > 0 ? k : 1), sizeof(REAL));
    double *acc = tx_te_malloc((size_t)n, sizeof(double));
    teexec_status *st = (!dx || dxb) && pb && acc ? NULL : tx_oom();
    if (!st) st = te_load(dy, &dyb);
    bool need_x = false;
    for (int i = 0; i < a->n_grad_params && i < g; i++) need_x |= a->grad_params[i] != NULL;
    if (!st && need_x) st = te_load(a->saved[1], &xb);
    for (int64_t i = 0; !st && i < g; i++) {
        int64_t r0 = off[i], rows = off[i + 1] - off[i];
        const REAL *dyg = dyb + r0 * n;
        if (dx && rows > 0) {
            st = te_load(a->saved[2 + i], &wb);
            if (st) break;
            te_gemm(false, false, rows, k, n, K(1), dyg, n, wb, k, K(0), dxb + r0 * k, k);
            free(wb);
            wb = NULL;
        }
        tx_tensor *dw = i < a->n_grad_params ? a->grad_params[i] : NULL;
        if (dw) {
            if (rows > 0) te_gemm(true, false, n, k, rows, K(1), dyg, n, xb + r0 * k, k, K(0), pb, k);
            else for (int64_t j = 0; j < n * k; j++) pb[j] = K(0);
            te_store(dw, pb);
        }
        tx_tensor *db = has_bias && g + i < a->n_grad_params ? a->grad_params[g + i] : NULL;
        if (db) {
            for (int64_t j = 0; j < n; j++) acc[j] = 0.0;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < n; j++) acc[j] += dyg[r * n + j];
            for (int64_t j = 0; j < n; j++) pb[j] = (REAL)acc[j];
            te_store(db, pb);
        }
    }
    if (!st && dx) te_store(dx, dxb);
    free(dyb);
    free(xb);
    free(wb);
    free(dxb);
    free(pb);
    free(acc);
    return st;
}

#endif
