/* backward_std.c - backward rules for the standard ONNX ops PyTorch exports
 * inside trainable blocks (see train_internal.h for the calling contract). */
#include "exec/train_internal.h"

#include "base/shape.h"
#include "exec/cpu_ops.h"
#include "import/shape_infer.h"
#include "kernels/cpu/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static teexec_status *bad(const tx_bwd_call *c, const char *why)
{
    return tx_status_with_node(tx_error(TEEXEC_ERR_UNSUPPORTED, "node \"%s\" (%s) backward: %s",
                                        c->node->label, c->node->op_type, why),
                               c->node->label);
}

static uint64_t numel_of(const tx_tensor *t) { return t ? t->numel : 0; }

/* Walks every index of `shape` in row-major order; off[k] follows strides
 * st[k] (per operand, 0 on broadcast dims). */
typedef struct bcast_iter {
    int32_t rank;
    int64_t dims[TX_MAX_RANK];
    int64_t idx[TX_MAX_RANK];
    int n_ops;
    int64_t st[4][TX_MAX_RANK];
    int64_t off[4];
} bcast_iter;

/* Strides of `t` aligned right to a rank-r output, 0 where it broadcasts. */
static void bcast_strides(const tx_tensor *t, int32_t r, const int64_t *odims, int64_t *st)
{
    int64_t s = 1;
    for (int32_t k = r - 1; k >= 0; k--) {
        int32_t tk = k - (r - t->rank);
        if (tk < 0) {
            st[k] = 0;
            continue;
        }
        int64_t d = t->dims[tk];
        st[k] = (d == 1 && odims[k] != 1) ? 0 : s;
        s *= d;
    }
}

static void iter_next(bcast_iter *it)
{
    for (int32_t k = it->rank - 1; k >= 0; k--) {
        it->idx[k]++;
        for (int o = 0; o < it->n_ops; o++) it->off[o] += it->st[o][k];
        if (it->idx[k] < it->dims[k]) return;
        for (int o = 0; o < it->n_ops; o++) it->off[o] -= it->st[o][k] * it->dims[k];
        it->idx[k] = 0;
    }
}

static void iter_init(bcast_iter *it, const tx_tensor *out, int n_ops, const tx_tensor *const *ops)
{
    memset(it, 0, sizeof(*it));
    it->rank = out->rank;
    memcpy(it->dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
    it->n_ops = n_ops;
    for (int o = 0; o < n_ops; o++) bcast_strides(ops[o], out->rank, out->dims, it->st[o]);
}

/* ---- pass-through and unary ------------------------------------------- */

static teexec_status *bwd_identity(const tx_bwd_call *c)
{
    if (!c->gin[0] || !c->gout[0]) return NULL;
    uint64_t n = numel_of(c->out[0]);
    if (n != numel_of(c->in[0])) return bad(c, "element counts differ");
    for (uint64_t i = 0; i < n; i++) c->gin[0][i] += c->gout[0][i];
    return NULL;
}

static teexec_status *bwd_unary(const tx_bwd_call *c)
{
    double *gx = c->gin[0];
    const double *g = c->gout[0], *x = c->in64[0], *y = c->out64[0];
    if (!gx || !g) return NULL;
    uint64_t n = numel_of(c->out[0]);
    const char *op = c->node->op_type;
    if (!strcmp(op, "Relu")) {
        for (uint64_t i = 0; i < n; i++) gx[i] += x[i] > 0 ? g[i] : 0;
    } else if (!strcmp(op, "Sqrt")) {
        for (uint64_t i = 0; i < n; i++) gx[i] += g[i] * 0.5 / y[i];
    } else if (!strcmp(op, "Erf")) {
        const double k = 2.0 / sqrt(M_PI);
        for (uint64_t i = 0; i < n; i++) gx[i] += g[i] * k * exp(-x[i] * x[i]);
    } else if (!strcmp(op, "Tanh")) {
        for (uint64_t i = 0; i < n; i++) gx[i] += g[i] * (1 - y[i] * y[i]);
    } else if (!strcmp(op, "Sigmoid")) {
        for (uint64_t i = 0; i < n; i++) gx[i] += g[i] * y[i] * (1 - y[i]);
    } else if (!strcmp(op, "Neg")) {
        for (uint64_t i = 0; i < n; i++) gx[i] -= g[i];
    } else if (!strcmp(op, "Exp")) {
        for (uint64_t i = 0; i < n; i++) gx[i] += g[i] * y[i];
    } else if (!strcmp(op, "Log")) {
        for (uint64_t i = 0; i < n; i++) gx[i] += g[i] / x[i];
    } else if (!strcmp(op, "Reciprocal")) {
        for (uint64_t i = 0; i < n; i++) gx[i] -= g[i] * y[i] * y[i];
    } else {
        return bad(c, "no unary rule");
    }
    return NULL;
}

/* ---- broadcasting binary ops and Where --------------------------------- */

static teexec_status *bwd_binary(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    if (!g) return NULL;
    const tx_tensor *ops[2] = {c->in[0], c->in[1]};
    bcast_iter it;
    iter_init(&it, c->out[0], 2, ops);
    const double *a = c->in64[0], *b = c->in64[1], *y = c->out64[0];
    double *ga = c->gin[0], *gb = c->gin[1];
    const char *op = c->node->op_type;
    int kind = !strcmp(op, "Add") ? 0 : !strcmp(op, "Sub") ? 1 : !strcmp(op, "Mul") ? 2
             : !strcmp(op, "Div") ? 3 : !strcmp(op, "Pow") ? 4 : -1;
    if (kind < 0) return bad(c, "no binary rule");
    uint64_t n = numel_of(c->out[0]);
    for (uint64_t i = 0; i < n; i++, iter_next(&it)) {
        int64_t ia = it.off[0], ib = it.off[1];
        double gi = g[i];
        switch (kind) {
        case 0:
            if (ga) ga[ia] += gi;
            if (gb) gb[ib] += gi;
            break;
        case 1:
            if (ga) ga[ia] += gi;
            if (gb) gb[ib] -= gi;
            break;
        case 2:
            if (ga) ga[ia] += gi * b[ib];
            if (gb) gb[ib] += gi * a[ia];
            break;
        case 3:
            if (ga) ga[ia] += gi / b[ib];
            if (gb) gb[ib] -= gi * a[ia] / (b[ib] * b[ib]);
            break;
        default:
            if (ga) ga[ia] += gi * b[ib] * pow(a[ia], b[ib] - 1);
            if (gb && a[ia] > 0) gb[ib] += gi * y[i] * log(a[ia]);
            break;
        }
    }
    return NULL;
}

static teexec_status *bwd_where(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    if (!g) return NULL;
    const tx_tensor *ops[3] = {c->in[0], c->in[1], c->in[2]};
    bcast_iter it;
    iter_init(&it, c->out[0], 3, ops);
    const double *cond = c->in64[0];
    uint64_t n = numel_of(c->out[0]);
    for (uint64_t i = 0; i < n; i++, iter_next(&it)) {
        bool t = cond[it.off[0]] != 0;
        if (t && c->gin[1]) c->gin[1][it.off[1]] += g[i];
        if (!t && c->gin[2]) c->gin[2][it.off[2]] += g[i];
    }
    return NULL;
}

static teexec_status *bwd_expand(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    if (!g || !c->gin[0]) return NULL;
    const tx_tensor *ops[1] = {c->in[0]};
    bcast_iter it;
    iter_init(&it, c->out[0], 1, ops);
    uint64_t n = numel_of(c->out[0]);
    for (uint64_t i = 0; i < n; i++, iter_next(&it)) c->gin[0][it.off[0]] += g[i];
    return NULL;
}

/* ---- MatMul and Gemm ----------------------------------------------------- */

static teexec_status *bwd_matmul(const tx_bwd_call *c)
{
    const tx_tensor *A = c->in[0], *B = c->in[1], *Y = c->out[0];
    const double *g = c->gout[0], *a = c->in64[0], *b = c->in64[1];
    double *ga = c->gin[0], *gb = c->gin[1];
    if (!g) return NULL;
    if (A->rank < 1 || B->rank < 1) return bad(c, "scalar operand");
    int64_t M = A->rank == 1 ? 1 : A->dims[A->rank - 2];
    int64_t K = A->dims[A->rank - 1];
    int64_t N = B->rank == 1 ? 1 : B->dims[B->rank - 1];
    if ((B->rank == 1 ? B->dims[0] : B->dims[B->rank - 2]) != K) return bad(c, "inner dims differ");
    /* batch dims: those of the output before its matrix dims */
    int32_t nb_a = A->rank > 2 ? A->rank - 2 : 0, nb_b = B->rank > 2 ? B->rank - 2 : 0;
    int32_t nb = nb_a > nb_b ? nb_a : nb_b;
    int64_t bd[TX_MAX_RANK], sa[TX_MAX_RANK], sb[TX_MAX_RANK];
    int64_t s_a = M * K, s_b = K * N;
    for (int32_t k = nb - 1; k >= 0; k--) {
        int32_t ka = k - (nb - nb_a), kb = k - (nb - nb_b);
        int64_t da = ka >= 0 ? A->dims[ka] : 1, db = kb >= 0 ? B->dims[kb] : 1;
        bd[k] = da > db ? da : db;
        sa[k] = (da == 1) ? 0 : s_a;
        sb[k] = (db == 1) ? 0 : s_b;
        if (ka >= 0) s_a *= da;
        if (kb >= 0) s_b *= db;
    }
    uint64_t nbatch = 1;
    for (int32_t k = 0; k < nb; k++) nbatch *= (uint64_t)bd[k];
    if (nbatch * (uint64_t)M * (uint64_t)N != Y->numel) return bad(c, "output size mismatch");
    int64_t idx[TX_MAX_RANK] = {0};
    for (uint64_t bi = 0; bi < nbatch; bi++) {
        int64_t oa = 0, ob = 0;
        for (int32_t k = 0; k < nb; k++) {
            oa += idx[k] * sa[k];
            ob += idx[k] * sb[k];
        }
        const double *gy = g + bi * (uint64_t)(M * N);
        if (ga)
            for (int64_t m = 0; m < M; m++)
                for (int64_t kk = 0; kk < K; kk++) {
                    double s = 0;
                    const double *br = b + ob + kk * N;
                    const double *gr = gy + m * N;
                    for (int64_t nn = 0; nn < N; nn++) s += gr[nn] * br[nn];
                    ga[oa + m * K + kk] += s;
                }
        if (gb)
            for (int64_t m = 0; m < M; m++) {
                const double *ar = a + oa + m * K;
                const double *gr = gy + m * N;
                for (int64_t kk = 0; kk < K; kk++) {
                    double av = ar[kk];
                    if (av == 0) continue;
                    double *gbr = gb + ob + kk * N;
                    for (int64_t nn = 0; nn < N; nn++) gbr[nn] += av * gr[nn];
                }
            }
        for (int32_t k = nb - 1; k >= 0; k--) {
            if (++idx[k] < bd[k]) break;
            idx[k] = 0;
        }
    }
    return NULL;
}

static teexec_status *bwd_gemm(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    if (!g) return NULL;
    int64_t ta, tb;
    float alpha, beta;
    TX_TRY(tx_ir_attr_int(c->node, "transA", 0, &ta));
    TX_TRY(tx_ir_attr_int(c->node, "transB", 0, &tb));
    TX_TRY(tx_ir_attr_float(c->node, "alpha", 1.0f, &alpha));
    TX_TRY(tx_ir_attr_float(c->node, "beta", 1.0f, &beta));
    const tx_tensor *A = c->in[0], *B = c->in[1];
    if (A->rank != 2 || B->rank != 2) return bad(c, "operands must be 2-D");
    int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
    int64_t N = tb ? B->dims[0] : B->dims[1];
    const double *a = c->in64[0], *b = c->in64[1];
    double *ga = c->gin[0], *gb = c->gin[1];
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            double av = ta ? a[k * M + m] : a[m * K + k];
            double s = 0;
            for (int64_t n = 0; n < N; n++) {
                double gv = g[m * N + n] * alpha;
                double bv = tb ? b[n * K + k] : b[k * N + n];
                s += gv * bv;
                if (gb) gb[tb ? n * K + k : k * N + n] += gv * av;
            }
            if (ga) ga[ta ? k * M + m : m * K + k] += s;
        }
    if (c->n_in > 2 && c->in[2] && c->gin[2]) {
        const tx_tensor *ops[1] = {c->in[2]};
        bcast_iter it;
        iter_init(&it, c->out[0], 1, ops);
        for (uint64_t i = 0; i < c->out[0]->numel; i++, iter_next(&it))
            c->gin[2][it.off[0]] += g[i] * beta;
    }
    return NULL;
}

/* ---- Softmax, LogSoftmax, LayerNormalization --------------------------- */

/* outer x axis x inner decomposition of a tensor around `axis`; before
 * opset 13 Softmax flattens everything from axis on into one row. */
static teexec_status *softmax_dims(const tx_bwd_call *c, int64_t def_axis, int64_t *outer,
                                   int64_t *len, int64_t *inner)
{
    const tx_tensor *x = c->in[0];
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", def_axis, &axis));
    int32_t ax;
    TX_TRY(tx_shape_normalize_axis(axis, x->rank, &ax));
    *outer = 1;
    *len = 1;
    *inner = 1;
    for (int32_t k = 0; k < ax; k++) *outer *= x->dims[k];
    if (c->node->opset < 13) {
        for (int32_t k = ax; k < x->rank; k++) *len *= x->dims[k];
    } else {
        *len = x->dims[ax];
        for (int32_t k = ax + 1; k < x->rank; k++) *inner *= x->dims[k];
    }
    return NULL;
}

static teexec_status *bwd_softmax(const tx_bwd_call *c)
{
    const double *g = c->gout[0], *y = c->out64[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    int64_t outer, len, inner;
    TX_TRY(softmax_dims(c, c->node->opset < 13 ? 1 : -1, &outer, &len, &inner));
    bool logsm = strcmp(c->node->op_type, "LogSoftmax") == 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double s = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t p = base + j * inner;
                s += logsm ? g[p] : g[p] * y[p];
            }
            for (int64_t j = 0; j < len; j++) {
                int64_t p = base + j * inner;
                gx[p] += logsm ? g[p] - exp(y[p]) * s : y[p] * (g[p] - s);
            }
        }
    return NULL;
}

static teexec_status *bwd_layernorm(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    if (!g) return NULL;
    const tx_tensor *X = c->in[0];
    int64_t axis;
    float eps;
    TX_TRY(tx_ir_attr_int(c->node, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_float(c->node, "epsilon", 1e-5f, &eps));
    int32_t ax;
    TX_TRY(tx_shape_normalize_axis(axis, X->rank, &ax));
    int64_t rows = 1, D = 1;
    for (int32_t k = 0; k < ax; k++) rows *= X->dims[k];
    for (int32_t k = ax; k < X->rank; k++) D *= X->dims[k];
    const double *x = c->in64[0], *scale = c->in64[1];
    const double *bias = c->n_in > 2 && c->in[2] ? c->in64[2] : NULL;
    (void)bias;
    uint64_t ns = numel_of(c->in[1]);
    if (ns != (uint64_t)D && ns != 1) return bad(c, "scale must cover the normalized dims");
    double *gx = c->gin[0], *gs = c->gin[1], *gbias = c->n_in > 2 ? c->gin[2] : NULL;
    uint64_t nbias = c->n_in > 2 && c->in[2] ? c->in[2]->numel : 0;
    if (gbias && nbias != (uint64_t)D && nbias != 1) return bad(c, "bias must cover the normalized dims");
    double *dxh = malloc(sizeof(double) * (size_t)(D ? D : 1));
    if (!dxh) return tx_oom();
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D, *gr = g + r * D;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < D; j++) mu += xr[j];
        mu /= (double)D;
        for (int64_t j = 0; j < D; j++) var += (xr[j] - mu) * (xr[j] - mu);
        var /= (double)D;
        /* the forward adds eps in float; use the same float value */
        double rstd = 1.0 / sqrt(var + (double)eps);
        double m1 = 0, m2 = 0;
        for (int64_t j = 0; j < D; j++) {
            double xh = (xr[j] - mu) * rstd;
            double sj = scale[ns == 1 ? 0 : j];
            if (gs) gs[ns == 1 ? 0 : j] += gr[j] * xh;
            if (gbias) gbias[nbias == 1 ? 0 : j] += gr[j];
            dxh[j] = gr[j] * sj;
            m1 += dxh[j];
            m2 += dxh[j] * xh;
        }
        m1 /= (double)D;
        m2 /= (double)D;
        if (gx)
            for (int64_t j = 0; j < D; j++) {
                double xh = (xr[j] - mu) * rstd;
                gx[r * D + j] += rstd * (dxh[j] - m1 - xh * m2);
            }
    }
    free(dxh);
    return NULL;
}

/* ---- data movement ------------------------------------------------------ */

static teexec_status *bwd_transpose(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0], *Y = c->out[0];
    const int64_t *perm;
    size_t np;
    TX_TRY(tx_ir_attr_ints(c->node, "perm", &perm, &np));
    int32_t r = X->rank;
    /* Check before reading perm[k]: a short perm must not be read past its end. */
    if (np && np != (size_t)r) return bad(c, "perm length differs from rank");
    if (r < 0 || r > TX_MAX_RANK) return bad(c, "rank out of range");
    int64_t p[TX_MAX_RANK];
    for (int32_t k = 0; k < r; k++) p[k] = np ? perm[k] : r - 1 - k;
    tx_shape xs = tx_shape_of(X);
    int64_t xst[TX_MAX_RANK];
    tx_shape_strides(&xs, xst);
    /* output dim k walks input dim p[k] */
    tx_tensor view = *Y;
    bcast_iter it;
    memset(&it, 0, sizeof(it));
    it.rank = r;
    memcpy(it.dims, view.dims, sizeof(int64_t) * (size_t)r);
    it.n_ops = 1;
    for (int32_t k = 0; k < r; k++) it.st[0][k] = xst[p[k]];
    for (uint64_t i = 0; i < Y->numel; i++, iter_next(&it)) gx[it.off[0]] += g[i];
    return NULL;
}

/* Split and Concat: outputs (inputs) are consecutive chunks along an axis. */
static teexec_status *chunk_dims(const tx_tensor *whole, int64_t axis_attr, int32_t *ax,
                                 int64_t *outer, int64_t *inner)
{
    TX_TRY(tx_shape_normalize_axis(axis_attr, whole->rank, ax));
    *outer = 1;
    *inner = 1;
    for (int32_t k = 0; k < *ax; k++) *outer *= whole->dims[k];
    for (int32_t k = *ax + 1; k < whole->rank; k++) *inner *= whole->dims[k];
    return NULL;
}

static teexec_status *bwd_split(const tx_bwd_call *c)
{
    double *gx = c->gin[0];
    if (!gx) return NULL;
    const tx_tensor *X = c->in[0];
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    int32_t ax;
    int64_t outer, inner;
    TX_TRY(chunk_dims(X, axis, &ax, &outer, &inner));
    int64_t total = X->dims[ax], off = 0;
    for (size_t j = 0; j < c->n_out; j++) {
        if (!c->out[j]) continue;
        int64_t len = c->out[j]->dims[ax];
        const double *g = c->gout[j];
        if (g)
            for (int64_t o = 0; o < outer; o++)
                for (int64_t e = 0; e < len * inner; e++)
                    gx[(o * total + off) * inner + e] += g[o * len * inner + e];
        off += len;
    }
    return NULL;
}

static teexec_status *bwd_concat(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    if (!g) return NULL;
    const tx_tensor *Y = c->out[0];
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    int32_t ax;
    int64_t outer, inner;
    TX_TRY(chunk_dims(Y, axis, &ax, &outer, &inner));
    int64_t total = Y->dims[ax], off = 0;
    for (size_t j = 0; j < c->n_in; j++) {
        if (!c->in[j]) continue;
        int64_t len = c->in[j]->rank > ax ? c->in[j]->dims[ax] : 0;
        double *gx = c->gin[j];
        if (gx)
            for (int64_t o = 0; o < outer; o++)
                for (int64_t e = 0; e < len * inner; e++)
                    gx[o * len * inner + e] += g[(o * total + off) * inner + e];
        off += len;
    }
    return NULL;
}

static teexec_status *bwd_slice(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0], *Y = c->out[0];
    const tx_tensor *vals[4] = {NULL, NULL, NULL, NULL};
    for (size_t k = 1; k < c->n_in && k < 5; k++) vals[k - 1] = c->in[k];
    tx_shape xs = tx_shape_of(X), ys;
    int64_t start[TX_MAX_RANK], step[TX_MAX_RANK], xst[TX_MAX_RANK];
    TX_TRY(tx_slice_params(c->node, vals, &xs, start, step, &ys));
    tx_shape_strides(&xs, xst);
    bcast_iter it;
    memset(&it, 0, sizeof(it));
    it.rank = Y->rank;
    memcpy(it.dims, Y->dims, sizeof(int64_t) * (size_t)Y->rank);
    it.n_ops = 1;
    int64_t base = 0;
    for (int32_t k = 0; k < Y->rank; k++) {
        it.st[0][k] = xst[k] * step[k];
        base += start[k] * xst[k];
    }
    it.off[0] = base;
    for (uint64_t i = 0; i < Y->numel; i++, iter_next(&it)) gx[it.off[0]] += g[i];
    return NULL;
}

static teexec_status *bwd_gather(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0], *I = c->in[1];
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    int32_t ax;
    int64_t outer, inner;
    TX_TRY(chunk_dims(X, axis, &ax, &outer, &inner));
    int64_t *idx;
    size_t ni;
    TX_TRY(tx_tensor_read_ints(I, &idx, &ni));
    int64_t d = X->dims[ax];
    teexec_status *st = NULL;
    for (int64_t o = 0; o < outer && !st; o++)
        for (size_t j = 0; j < ni; j++) {
            int64_t v = idx[j] < 0 ? idx[j] + d : idx[j];
            if (v < 0 || v >= d) {
                st = bad(c, "index out of range");
                break;
            }
            for (int64_t e = 0; e < inner; e++)
                gx[(o * d + v) * inner + e] += g[(o * (int64_t)ni + (int64_t)j) * inner + e];
        }
    free(idx);
    return st;
}

/* Which dims of input 0 a Reduce node reduces (axes from the attribute, or
 * from input 1 when axes_input). */
static teexec_status *reduced_axes(const tx_bwd_call *c, bool axes_input, bool *red)
{
    const tx_tensor *X = c->in[0];
    int64_t *axes = NULL;
    size_t na = 0;
    if (axes_input) {
        if (c->n_in > 1 && c->in[1]) TX_TRY(tx_tensor_read_ints(c->in[1], &axes, &na));
    } else {
        const int64_t *a;
        TX_TRY(tx_ir_attr_ints(c->node, "axes", &a, &na));
        if (na) {
            axes = malloc(sizeof(int64_t) * na);
            if (!axes) return tx_oom();
            memcpy(axes, a, sizeof(int64_t) * na);
        }
    }
    int64_t noop;
    teexec_status *st = tx_ir_attr_int(c->node, "noop_with_empty_axes", 0, &noop);
    for (int32_t k = 0; k < X->rank && !st; k++) red[k] = na == 0 && !noop;
    for (size_t j = 0; j < na && !st; j++) {
        int32_t a;
        st = tx_shape_normalize_axis(axes[j], X->rank, &a);
        if (!st) red[a] = true;
    }
    free(axes);
    return st;
}

static teexec_status *bwd_reduce(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0];
    bool mean = strcmp(c->node->op_type, "ReduceMean") == 0;
    bool sum = strcmp(c->node->op_type, "ReduceSum") == 0;
    bool extreme = !mean && !sum; /* ReduceMax, ReduceMin */
    bool red[TX_MAX_RANK];
    TX_TRY(reduced_axes(c, sum ? c->node->opset >= 13 : c->node->opset >= 18, red));
    /* the output's flat layout equals the input's with reduced dims set to 1 */
    tx_tensor view = *X;
    uint64_t cnt = 1;
    for (int32_t k = 0; k < X->rank; k++)
        if (red[k]) {
            cnt *= (uint64_t)X->dims[k];
            view.dims[k] = 1;
        }
    bcast_iter it;
    const tx_tensor *ops[1] = {&view};
    iter_init(&it, X, 1, ops);
    if (extreme) {
        /* the gradient goes to the elements equal to the extreme, split
         * evenly among ties (as PyTorch's amax/amin) */
        const double *x = c->in64[0], *y = c->out64[0];
        uint64_t ny = numel_of(c->out[0]);
        double *ties = calloc((size_t)(ny ? ny : 1), sizeof(double));
        if (!ties) return tx_oom();
        for (uint64_t i = 0; i < X->numel; i++, iter_next(&it))
            if (x[i] == y[it.off[0]]) ties[it.off[0]] += 1;
        iter_init(&it, X, 1, ops);
        for (uint64_t i = 0; i < X->numel; i++, iter_next(&it))
            if (x[i] == y[it.off[0]]) gx[i] += g[it.off[0]] / ties[it.off[0]];
        free(ties);
        return NULL;
    }
    double scale = mean && cnt ? 1.0 / (double)cnt : 1.0;
    for (uint64_t i = 0; i < X->numel; i++, iter_next(&it)) gx[i] += g[it.off[0]] * scale;
    return NULL;
}

/* ---- Gelu, Sin, Cos ------------------------------------------------------ */

static teexec_status *bwd_gelu(const tx_bwd_call *c)
{
    double *gx = c->gin[0];
    const double *g = c->gout[0], *x = c->in64[0];
    if (!gx || !g) return NULL;
    const char *approx;
    TX_TRY(tx_ir_attr_string(c->node, "approximate", "none", &approx, NULL));
    bool th = strcmp(approx, "tanh") == 0;
    if (!th && strcmp(approx, "none") != 0) return bad(c, "approximate must be none or tanh");
    uint64_t n = numel_of(c->out[0]);
    if (th) {
        /* y = x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3) */
        const double k = sqrt(2.0 / M_PI), a = 0.044715;
        for (uint64_t i = 0; i < n; i++) {
            double v = x[i], t = tanh(k * (v + a * v * v * v));
            gx[i] += g[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * a * v * v));
        }
    } else {
        /* y = x Phi(x): y' = Phi(x) + x phi(x) */
        const double k = 1.0 / sqrt(2.0 * M_PI);
        for (uint64_t i = 0; i < n; i++) {
            double v = x[i];
            gx[i] += g[i] * (0.5 * (1 + erf(v / sqrt(2.0))) + v * k * exp(-0.5 * v * v));
        }
    }
    return NULL;
}

static teexec_status *bwd_trig(const tx_bwd_call *c)
{
    double *gx = c->gin[0];
    const double *g = c->gout[0], *x = c->in64[0];
    if (!gx || !g) return NULL;
    uint64_t n = numel_of(c->out[0]);
    if (!strcmp(c->node->op_type, "Sin"))
        for (uint64_t i = 0; i < n; i++) gx[i] += g[i] * cos(x[i]);
    else
        for (uint64_t i = 0; i < n; i++) gx[i] -= g[i] * sin(x[i]);
    return NULL;
}

/* ---- Conv, GatherND, RMSNormalization, Attention ------------------------- */

/* A double view of forward operand i (NULL data when it is absent) or of
 * the gradient buffer gin[i], shaped like the forward tensor. */
static teexec_status *wrap64(const tx_tensor *like, const double *data, tx_tensor *t)
{
    return tx_tensor_wrap(t, TEEXEC_DTYPE_DOUBLE, like->rank, like->dims, (void *)data);
}

static teexec_status *bwd_conv(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    if (!g) return NULL;
    double *gx = c->gin[0], *gw = c->gin[1], *gb = c->n_in > 2 && c->in[2] ? c->gin[2] : NULL;
    if (!gx && !gw && !gb) return NULL;
    const tx_tensor *X = c->in[0], *W = c->in[1];
    tx_shape xs = tx_shape_of(X), ws = tx_shape_of(W);
    tx_conv_geom geo;
    TX_TRY(tx_conv_geometry(c->node, &xs, &ws, &geo));
    tx_tensor x, w, gy, tgx, tgw, tgb;
    TX_TRY(wrap64(X, c->in64[0], &x));
    TX_TRY(wrap64(W, c->in64[1], &w));
    TX_TRY(wrap64(c->out[0], g, &gy));
    if (gx) TX_TRY(wrap64(X, gx, &tgx));
    if (gw) TX_TRY(wrap64(W, gw, &tgw));
    if (gb) TX_TRY(wrap64(c->in[2], gb, &tgb));
    return tx_cpu_conv_backward(&x, &w, &gy, geo.group, geo.strides, geo.dilations, geo.pads,
                                gx ? &tgx : NULL, gw ? &tgw : NULL, gb ? &tgb : NULL);
}

/* GatherND's backward scatters each output slice back onto its source. */
static teexec_status *bwd_gather_nd(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    int64_t bd = 0;
    if (c->node->opset >= 12) TX_TRY(tx_ir_attr_int(c->node, "batch_dims", 0, &bd));
    tx_shape ds = tx_shape_of(c->in[0]);
    int64_t *off;
    uint64_t ns, sl;
    TX_TRY(tx_cpu_gather_nd_offsets(&ds, c->in[1], bd, &off, &ns, &sl));
    for (uint64_t s = 0; s < ns; s++)
        for (uint64_t e = 0; e < sl; e++) gx[(uint64_t)off[s] + e] += g[s * sl + e];
    free(off);
    return NULL;
}

/* y = x r s with r = 1 / sqrt(mean(x^2) + eps) over each row of dims[axis:]:
 *   dx = r (g s) - x r^3 / D * sum(g s x),   ds += g x r. */
static teexec_status *bwd_rms_norm(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0], *gs = c->gin[1];
    if (!g || (!gx && !gs)) return NULL;
    const tx_tensor *X = c->in[0], *S = c->in[1];
    int64_t axis;
    float eps;
    TX_TRY(tx_ir_attr_int(c->node, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_float(c->node, "epsilon", 1e-5f, &eps));
    int32_t ax;
    TX_TRY(tx_shape_normalize_axis(axis, X->rank, &ax));
    int64_t rows = 1, D = 1;
    for (int32_t k = 0; k < ax; k++) rows *= X->dims[k];
    for (int32_t k = ax; k < X->rank; k++) D *= X->dims[k];
    /* scale index of each normalized element (scale broadcasts to dims[axis:]) */
    tx_tensor norm;
    TX_TRY(tx_tensor_wrap(&norm, X->dtype, X->rank - ax, X->dims + ax, X->data));
    if (S->rank > norm.rank) return bad(c, "scale has a higher rank than the normalized dims");
    int64_t *sidx = malloc(sizeof(int64_t) * (size_t)(D ? D : 1));
    if (!sidx) return tx_oom();
    {
        const tx_tensor *ops[1] = {S};
        bcast_iter it;
        iter_init(&it, &norm, 1, ops);
        for (int64_t j = 0; j < D; j++, iter_next(&it)) sidx[j] = it.off[0];
    }
    const double *x = c->in64[0], *s = c->in64[1];
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D, *gr = g + r * D;
        double ms = 0, dot = 0;
        for (int64_t j = 0; j < D; j++) ms += xr[j] * xr[j];
        /* the forward adds eps in float; use the same float value */
        double rr = 1.0 / sqrt(ms / (double)D + (double)eps);
        for (int64_t j = 0; j < D; j++) {
            dot += gr[j] * s[sidx[j]] * xr[j];
            if (gs) gs[sidx[j]] += gr[j] * xr[j] * rr;
        }
        if (gx)
            for (int64_t j = 0; j < D; j++)
                gx[r * D + j] += rr * gr[j] * s[sidx[j]] - xr[j] * rr * rr * rr / (double)D * dot;
    }
    free(sidx);
    return NULL;
}

static teexec_status *bwd_attention(const tx_bwd_call *c)
{
    tx_attention_params p;
    TX_TRY(tx_cpu_attention_params_of(c->node, &p));
    enum { NIN = 6, NOUT = 4 };
    tx_tensor in[NIN], gin[NIN], gout[NOUT];
    const tx_tensor *inp[NIN] = {NULL};
    tx_tensor *ginp[NIN] = {NULL};
    const tx_tensor *goutp[NOUT] = {NULL};
    bool any_out = false;
    for (size_t k = 0; k < NIN && k < c->n_in; k++) {
        const tx_tensor *t = c->in[k];
        if (!t) continue;
        if (t->dtype == TEEXEC_DTYPE_BOOL) {
            inp[k] = t; /* a bool mask is read as it is */
        } else {
            if (!c->in64[k]) return bad(c, "an input is not numeric");
            TX_TRY(wrap64(t, c->in64[k], &in[k]));
            inp[k] = &in[k];
        }
        if (c->gin[k] && t->dtype != TEEXEC_DTYPE_BOOL) {
            TX_TRY(wrap64(t, c->gin[k], &gin[k]));
            ginp[k] = &gin[k];
        }
    }
    for (size_t j = 0; j < NOUT && j < c->n_out; j++) {
        if (!c->out[j] || !c->gout[j]) continue;
        TX_TRY(wrap64(c->out[j], c->gout[j], &gout[j]));
        goutp[j] = &gout[j];
        any_out = true;
    }
    if (!any_out) return NULL;
    tx_attention_inputs ai = {inp[0], inp[1], inp[2], inp[3], inp[4], inp[5]};
    tx_attention_grads ag = {goutp[0], goutp[1], goutp[2], goutp[3], ginp[0], ginp[1],
                             ginp[2],  ginp[3],  ginp[4],  ginp[5]};
    return tx_cpu_attention_backward(&p, &ai, &ag);
}

/* ---- the remaining differentiable ops of the CPU op table ---------------- */

/* Abs, Clip, LeakyRelu, Elu, Softplus: elementwise, gradient of input 0. */
static teexec_status *bwd_unary_attr(const tx_bwd_call *c)
{
    double *gx = c->gin[0];
    const double *g = c->gout[0], *x = c->in64[0];
    if (!gx || !g) return NULL;
    uint64_t n = numel_of(c->out[0]);
    const char *op = c->node->op_type;
    if (!strcmp(op, "Abs")) {
        for (uint64_t i = 0; i < n; i++) gx[i] += x[i] > 0 ? g[i] : x[i] < 0 ? -g[i] : 0;
    } else if (!strcmp(op, "Clip")) {
        /* the gradient passes where lo <= x <= hi, bounds included (as PyTorch's clamp) */
        double lo = -INFINITY, hi = INFINITY;
        if (c->node->opset >= 11) {
            if (c->n_in > 1 && c->in[1] && c->in64[1] && c->in[1]->numel) lo = c->in64[1][0];
            if (c->n_in > 2 && c->in[2] && c->in64[2] && c->in[2]->numel) hi = c->in64[2][0];
        } else {
            float flo, fhi;
            TX_TRY(tx_ir_attr_float(c->node, "min", -INFINITY, &flo));
            TX_TRY(tx_ir_attr_float(c->node, "max", INFINITY, &fhi));
            lo = flo;
            hi = fhi;
        }
        for (uint64_t i = 0; i < n; i++) gx[i] += x[i] >= lo && x[i] <= hi ? g[i] : 0;
    } else if (!strcmp(op, "LeakyRelu") || !strcmp(op, "Elu")) {
        bool elu = !strcmp(op, "Elu");
        float alpha;
        TX_TRY(tx_ir_attr_float(c->node, "alpha", elu ? 1.0f : 0.01f, &alpha));
        for (uint64_t i = 0; i < n; i++)
            gx[i] += x[i] > 0 ? g[i] : g[i] * (double)alpha * (elu ? exp(x[i]) : 1.0);
    } else if (!strcmp(op, "Softplus")) {
        for (uint64_t i = 0; i < n; i++) gx[i] += g[i] / (1 + exp(-x[i]));
    } else {
        return bad(c, "no unary rule");
    }
    return NULL;
}

/* Row-major odometer over an output shape with each operand's broadcast
 * element offset, for any number of operands (variadic ops). */
typedef struct multi_iter {
    int32_t rank;
    const int64_t *dims;
    int64_t idx[TX_MAX_RANK];
} multi_iter;

static bool multi_next(multi_iter *it)
{
    for (int32_t k = it->rank - 1; k >= 0; k--) {
        if (++it->idx[k] < it->dims[k]) return true;
        it->idx[k] = 0;
    }
    return false;
}

static int64_t offset_of(const int64_t *idx, const int64_t *st, int32_t rank)
{
    int64_t o = 0;
    for (int32_t k = 0; k < rank; k++) o += idx[k] * st[k];
    return o;
}

/* Sum, Mean, Max, Min over broadcast inputs. Max and Min send the gradient
 * to every input holding the extreme value, split evenly among ties (as
 * PyTorch's maximum/minimum and amax/amin do). */
static teexec_status *bwd_variadic(const tx_bwd_call *c)
{
    const double *g = c->gout[0], *y = c->out64[0];
    if (!g) return NULL;
    const tx_tensor *Y = c->out[0];
    size_t n = c->n_in;
    if (n == 0 || n > 64) return bad(c, "needs 1 to 64 inputs");
    int64_t(*st)[TX_MAX_RANK] = malloc(sizeof(*st) * n);
    if (!st) return tx_oom();
    for (size_t k = 0; k < n; k++) {
        if (!c->in[k]) {
            free(st);
            return bad(c, "an input is missing");
        }
        bcast_strides(c->in[k], Y->rank, Y->dims, st[k]);
    }
    const char *op = c->node->op_type;
    int kind = !strcmp(op, "Sum") ? 0 : !strcmp(op, "Mean") ? 1 : 2;
    multi_iter it = {.rank = Y->rank, .dims = Y->dims};
    memset(it.idx, 0, sizeof(it.idx));
    for (uint64_t i = 0; i < Y->numel; i++, multi_next(&it)) {
        double share = kind == 1 ? g[i] / (double)n : g[i];
        if (kind == 2) {
            size_t ties = 0;
            for (size_t k = 0; k < n; k++)
                if (c->in64[k][offset_of(it.idx, st[k], Y->rank)] == y[i]) ties++;
            share = ties ? g[i] / (double)ties : 0;
        }
        for (size_t k = 0; k < n; k++) {
            if (!c->gin[k]) continue;
            int64_t o = offset_of(it.idx, st[k], Y->rank);
            if (kind < 2 || c->in64[k][o] == y[i]) c->gin[k][o] += share;
        }
    }
    free(st);
    return NULL;
}

/* Reads the single integer of an optional scalar input (CumSum's axis,
 * Trilu's k). */
static teexec_status *scalar_int(const tx_bwd_call *c, size_t slot, int64_t def, int64_t *out)
{
    *out = def;
    if (slot >= c->n_in || !c->in[slot]) return NULL;
    int64_t *v;
    size_t nv;
    TX_TRY(tx_tensor_read_ints(c->in[slot], &v, &nv));
    if (nv != 1) {
        free(v);
        return bad(c, "a scalar input has more than one element");
    }
    *out = v[0];
    free(v);
    return NULL;
}

/* CumSum: the adjoint of a running sum is the running sum the other way,
 * with the same exclusive flag. */
static teexec_status *bwd_cumsum(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    int64_t axis, excl, rev;
    if (c->n_in < 2 || !c->in[1]) return bad(c, "needs input axis");
    TX_TRY(scalar_int(c, 1, 0, &axis));
    TX_TRY(tx_ir_attr_int(c->node, "exclusive", 0, &excl));
    TX_TRY(tx_ir_attr_int(c->node, "reverse", 0, &rev));
    int32_t ax;
    int64_t outer, inner;
    TX_TRY(chunk_dims(c->in[0], axis, &ax, &outer, &inner));
    int64_t len = c->in[0]->dims[ax];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double run = 0;
            for (int64_t t = 0; t < len; t++) {
                int64_t j = rev ? t : len - 1 - t; /* backward walks opposite to forward */
                int64_t p = (o * len + j) * inner + in;
                if (excl) {
                    gx[p] += run;
                    run += g[p];
                } else {
                    run += g[p];
                    gx[p] += run;
                }
            }
        }
    return NULL;
}

/* Tile: every copy's gradient lands on the element it copied. */
static teexec_status *bwd_tile(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0], *Y = c->out[0];
    if (X->rank != Y->rank) return bad(c, "output rank differs from input rank");
    tx_shape xs = tx_shape_of(X);
    int64_t xst[TX_MAX_RANK];
    tx_shape_strides(&xs, xst);
    multi_iter it = {.rank = Y->rank, .dims = Y->dims};
    memset(it.idx, 0, sizeof(it.idx));
    for (uint64_t i = 0; i < Y->numel; i++, multi_next(&it)) {
        int64_t o = 0;
        for (int32_t k = 0; k < Y->rank; k++) o += (it.idx[k] % X->dims[k]) * xst[k];
        gx[o] += g[i];
    }
    return NULL;
}

/* GatherElements scatters back along its axis. */
static teexec_status *bwd_gather_elements(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0], *I = c->in[1];
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", 0, &axis));
    int32_t ax;
    TX_TRY(tx_shape_normalize_axis(axis, X->rank, &ax));
    if (I->rank != X->rank) return bad(c, "indices rank differs from data rank");
    int64_t *idx;
    size_t ni;
    TX_TRY(tx_tensor_read_ints(I, &idx, &ni));
    tx_shape xs = tx_shape_of(X);
    int64_t xst[TX_MAX_RANK];
    tx_shape_strides(&xs, xst);
    multi_iter it = {.rank = I->rank, .dims = I->dims};
    memset(it.idx, 0, sizeof(it.idx));
    teexec_status *st = NULL;
    for (size_t i = 0; i < ni; i++, multi_next(&it)) {
        int64_t d = X->dims[ax], v = idx[i] < 0 ? idx[i] + d : idx[i];
        if (v < 0 || v >= d) {
            st = bad(c, "index out of range");
            break;
        }
        int64_t o = 0;
        for (int32_t k = 0; k < X->rank; k++) o += (k == ax ? v : it.idx[k]) * xst[k];
        gx[o] += g[i];
    }
    free(idx);
    return st;
}

/* Trilu: the gradient passes where the forward kept the element. */
static teexec_status *bwd_trilu(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0];
    if (X->rank < 2) return bad(c, "needs rank >= 2");
    int64_t upper, k;
    TX_TRY(tx_ir_attr_int(c->node, "upper", 1, &upper));
    TX_TRY(scalar_int(c, 1, 0, &k));
    int64_t rows = X->dims[X->rank - 2], cols = X->dims[X->rank - 1];
    for (uint64_t i = 0; i < X->numel; i++) {
        int64_t r = (int64_t)(i / (uint64_t)cols) % rows, col = (int64_t)(i % (uint64_t)cols);
        bool keep = upper ? col - r >= k : col - r <= k;
        if (keep) gx[i] += g[i];
    }
    return NULL;
}

/* TopK: each selected value's gradient goes back to where it came from
 * (the indices output, or the same selection made again). */
static teexec_status *bwd_topk(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0], *V = c->out[0];
    const tx_tensor *I = c->n_out > 1 ? c->out[1] : NULL;
    int64_t axis;
    TX_TRY(tx_ir_attr_int(c->node, "axis", -1, &axis));
    int32_t ax;
    int64_t outer, inner;
    TX_TRY(chunk_dims(X, axis, &ax, &outer, &inner));
    tx_tensor scratch;
    memset(&scratch, 0, sizeof scratch);
    if (!I) {
        int64_t largest, sorted;
        TX_TRY(tx_ir_attr_int(c->node, "largest", 1, &largest));
        TX_TRY(tx_ir_attr_int(c->node, "sorted", 1, &sorted));
        tx_tensor xd, vd;
        TX_TRY(tx_tensor_alloc(&scratch, TEEXEC_DTYPE_INT64, V->rank, V->dims));
        teexec_status *st = tx_tensor_alloc(&vd, TEEXEC_DTYPE_DOUBLE, V->rank, V->dims);
        if (!st) st = tx_tensor_wrap(&xd, TEEXEC_DTYPE_DOUBLE, X->rank, X->dims,
                                     (void *)c->in64[0]);
        if (!st)
            st = tx_cpu_topk(&xd, V->dims[ax], axis, largest != 0, sorted != 0, &vd, &scratch);
        tx_tensor_release(&vd);
        if (st) {
            tx_tensor_release(&scratch);
            return st;
        }
        I = &scratch;
    }
    int64_t len = X->dims[ax], k = V->dims[ax];
    const int64_t *iv = I->data;
    teexec_status *st = NULL;
    for (int64_t o = 0; o < outer && !st; o++)
        for (int64_t j = 0; j < k && !st; j++)
            for (int64_t in = 0; in < inner; in++) {
                int64_t p = (o * k + j) * inner + in, src = iv[p];
                if (src < 0 || src >= len) {
                    st = bad(c, "index out of range");
                    break;
                }
                gx[(o * len + src) * inner + in] += g[p];
            }
    tx_tensor_release(&scratch);
    return st;
}

/* Einsum by direct summation over every label (the forward's own method,
 * kernels/cpu/einsum.c): for each assignment of all labels, each operand's
 * gradient gets dY times the other operands. Diagonals (repeated labels)
 * and broadcast ellipsis dims fall out of the per-label strides. */
static teexec_status *bwd_einsum(const tx_bwd_call *c)
{
    const double *g = c->gout[0];
    if (!g) return NULL;
    size_t n = c->n_in;
    if (n == 0 || n > TX_EINSUM_MAX_INPUTS) return bad(c, "too many inputs");
    const tx_shape *shapes[TX_EINSUM_MAX_INPUTS];
    tx_shape sh[TX_EINSUM_MAX_INPUTS];
    for (size_t i = 0; i < n; i++) {
        if (!c->in[i] || !c->in64[i]) return bad(c, "an input is missing");
        sh[i] = tx_shape_of(c->in[i]);
        shapes[i] = &sh[i];
    }
    tx_einsum *e = malloc(sizeof(*e));
    if (!e) return tx_oom();
    teexec_status *st = tx_einsum_parse(c->node, n, shapes, e);
    if (st) {
        free(e);
        return st;
    }
    /* the labels in use, their sizes and every operand's stride per label */
    enum { NL = TX_EINSUM_MAX_LABELS };
    int used[NL], nu = 0;
    bool in_use[NL] = {false};
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < e->in_rank[i]; d++) in_use[e->in_labels[i][d]] = true;
    for (int l = 0; l < NL; l++)
        if (in_use[l]) used[nu++] = l;
    int64_t (*st_in)[NL] = calloc(n + 1, sizeof(*st_in));
    if (!st_in) {
        free(e);
        return tx_oom();
    }
    int64_t *st_out = st_in[n];
    for (size_t i = 0; i < n; i++) {
        int64_t s = 1;
        for (int d = e->in_rank[i] - 1; d >= 0; d--) {
            int64_t dim = sh[i].dims[d];
            if (dim != 1 || e->label_dim[e->in_labels[i][d]] == 1)
                st_in[i][e->in_labels[i][d]] += s;
            s *= dim;
        }
    }
    {
        int64_t s = 1;
        for (int d = e->out_rank - 1; d >= 0; d--) {
            st_out[e->out_labels[d]] = s;
            s *= e->label_dim[e->out_labels[d]];
        }
    }
    int64_t idx[NL] = {0};
    uint64_t total = 1;
    for (int u = 0; u < nu; u++) total *= (uint64_t)e->label_dim[used[u]];
    for (uint64_t a = 0; a < total; a++) {
        int64_t yo = 0, off[TX_EINSUM_MAX_INPUTS];
        for (int u = 0; u < nu; u++) yo += idx[u] * st_out[used[u]];
        for (size_t i = 0; i < n; i++) {
            off[i] = 0;
            for (int u = 0; u < nu; u++) off[i] += idx[u] * st_in[i][used[u]];
        }
        for (size_t i = 0; i < n; i++) {
            if (!c->gin[i]) continue;
            double p = g[yo];
            for (size_t j = 0; j < n; j++)
                if (j != i) p *= c->in64[j][off[j]];
            c->gin[i][off[i]] += p;
        }
        for (int u = nu - 1; u >= 0; u--) {
            if (++idx[u] < e->label_dim[used[u]]) break;
            idx[u] = 0;
        }
    }
    free(st_in);
    free(e);
    return NULL;
}

/* ReduceProd: d prod / d x_j is the product of the others. Zeros are
 * counted, not divided by: no zero in the group gives prod / x_j, one zero
 * the product of the others at the zero and 0 elsewhere, two or more 0. */
static teexec_status *bwd_reduce_prod(const tx_bwd_call *c)
{
    const double *g = c->gout[0], *x = c->in64[0];
    double *gx = c->gin[0];
    if (!g || !gx) return NULL;
    const tx_tensor *X = c->in[0];
    bool red[TX_MAX_RANK];
    TX_TRY(reduced_axes(c, c->node->opset >= 18, red));
    tx_tensor view = *X;
    for (int32_t k = 0; k < X->rank; k++)
        if (red[k]) view.dims[k] = 1;
    uint64_t ny = numel_of(c->out[0]);
    double *nz = malloc(sizeof(double) * (size_t)(ny ? ny : 1));
    int64_t *zeros = calloc((size_t)(ny ? ny : 1), sizeof(int64_t));
    if (!nz || !zeros) {
        free(nz);
        free(zeros);
        return tx_oom();
    }
    for (uint64_t i = 0; i < ny; i++) nz[i] = 1;
    const tx_tensor *ops[1] = {&view};
    bcast_iter it;
    iter_init(&it, X, 1, ops);
    for (uint64_t i = 0; i < X->numel; i++, iter_next(&it)) {
        if (x[i] == 0)
            zeros[it.off[0]]++;
        else
            nz[it.off[0]] *= x[i];
    }
    iter_init(&it, X, 1, ops);
    for (uint64_t i = 0; i < X->numel; i++, iter_next(&it)) {
        int64_t o = it.off[0];
        double d = zeros[o] == 0 ? nz[o] / x[i] : (zeros[o] == 1 && x[i] == 0 ? nz[o] : 0);
        gx[i] += g[o] * d;
    }
    free(nz);
    free(zeros);
    return NULL;
}

/* ---- the table ---------------------------------------------------------- */

static const struct {
    const char *op;
    tx_bwd_fn fn;
} table[] = {
    {"Identity", bwd_identity}, {"Reshape", bwd_identity}, {"Squeeze", bwd_identity},
    {"Unsqueeze", bwd_identity}, {"Flatten", bwd_identity}, {"Cast", bwd_identity},
    /* Dropout: the forward is the identity (training_mode true is refused,
     * exec/cpu_ops_shape.c); te.ops Dropout is the one that drops. */
    {"CastLike", bwd_identity}, {"Dropout", bwd_identity},
    {"Relu", bwd_unary}, {"Sqrt", bwd_unary}, {"Erf", bwd_unary}, {"Tanh", bwd_unary},
    {"Sigmoid", bwd_unary}, {"Neg", bwd_unary}, {"Exp", bwd_unary}, {"Log", bwd_unary},
    {"Reciprocal", bwd_unary},
    {"Add", bwd_binary}, {"Sub", bwd_binary}, {"Mul", bwd_binary}, {"Div", bwd_binary},
    {"Pow", bwd_binary}, {"Where", bwd_where}, {"Expand", bwd_expand},
    {"MatMul", bwd_matmul}, {"Gemm", bwd_gemm},
    {"Softmax", bwd_softmax}, {"LogSoftmax", bwd_softmax},
    {"LayerNormalization", bwd_layernorm},
    {"Transpose", bwd_transpose}, {"Split", bwd_split}, {"Concat", bwd_concat},
    {"Slice", bwd_slice}, {"Gather", bwd_gather},
    {"ReduceMean", bwd_reduce}, {"ReduceSum", bwd_reduce},
    {"Gelu", bwd_gelu}, {"Sin", bwd_trig}, {"Cos", bwd_trig},
    {"Conv", bwd_conv}, {"GatherND", bwd_gather_nd},
    {"RMSNormalization", bwd_rms_norm}, {"Attention", bwd_attention},
    {"Abs", bwd_unary_attr}, {"Clip", bwd_unary_attr}, {"LeakyRelu", bwd_unary_attr},
    {"Elu", bwd_unary_attr}, {"Softplus", bwd_unary_attr},
    {"Sum", bwd_variadic}, {"Mean", bwd_variadic}, {"Max", bwd_variadic},
    {"Min", bwd_variadic}, {"ReduceMax", bwd_reduce}, {"ReduceMin", bwd_reduce},
    {"CumSum", bwd_cumsum}, {"Tile", bwd_tile}, {"GatherElements", bwd_gather_elements},
    {"Trilu", bwd_trilu}, {"TopK", bwd_topk}, {"Einsum", bwd_einsum},
    {"ReduceProd", bwd_reduce_prod},
};

const char *tx_bwd_op_at(size_t i)
{
    return i < sizeof(table) / sizeof(table[0]) ? table[i].op : NULL;
}

tx_bwd_fn tx_bwd_find(const char *domain, const char *op_type)
{
    if (domain && domain[0] && strcmp(domain, "ai.onnx") != 0) return NULL;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (!strcmp(table[i].op, op_type)) return table[i].fn;
    return NULL;
}

bool tx_bwd_slot_differentiable(const char *op_type, size_t slot)
{
    if (!strcmp(op_type, "Where")) return slot == 1 || slot == 2;
    if (!strcmp(op_type, "LayerNormalization") || !strcmp(op_type, "Gemm") ||
        !strcmp(op_type, "Conv"))
        return slot <= 2;
    if (!strcmp(op_type, "RMSNormalization")) return slot <= 1;
    /* Attention: Q, K, V, a float attn_mask, past_key, past_value */
    if (!strcmp(op_type, "Attention")) return slot <= 5;
    if (!strcmp(op_type, "Add") || !strcmp(op_type, "Sub") || !strcmp(op_type, "Mul") ||
        !strcmp(op_type, "Div") || !strcmp(op_type, "Pow") || !strcmp(op_type, "MatMul"))
        return slot <= 1;
    if (!strcmp(op_type, "Concat") || !strcmp(op_type, "Sum") || !strcmp(op_type, "Mean") ||
        !strcmp(op_type, "Max") || !strcmp(op_type, "Min") || !strcmp(op_type, "Einsum"))
        return true;
    return slot == 0;
}
