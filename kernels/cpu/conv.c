/* conv.c - ONNX Conv (1-D, 2-D and N-D spatial, groups, pads, strides,
 * dilations, optional bias) by im2col and one GEMM per (image, group), and
 * its FP64 backward (data, weight and bias gradients) for the trainer.
 *
 * Forward: for image n and group g the receptive fields are unrolled into a
 * column matrix col[Cg * K, O] (Cg input channels of the group, K = kernel
 * elements, O = output positions), so that Y[n, g] = W[g] col, with W[g]
 * the group's [Mg, Cg * K] block of the weight as it is laid out. A 1x1
 * kernel with unit strides and no padding needs no unrolling: x itself is
 * the column matrix. float32/float64 go straight to OpenBLAS; float16 and
 * bfloat16 are converted to float32 once and rounded once at the output.
 *
 * Backward (FP64 only, as the trainer computes): dW[g] += dY[n, g] col^T,
 * dcol = W[g]^T dY[n, g] folded back onto dX (col2im, adding), and
 * dB[m] += the sum of dY[n, m, :]. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Geometry of one call, checked against the tensors. */
typedef struct conv_geom {
    int32_t nsp; /* spatial dims */
    int64_t n, c, m, group, cg, mg;
    int64_t in[TX_MAX_RANK];  /* input spatial dims */
    int64_t k[TX_MAX_RANK];   /* kernel spatial dims */
    int64_t out[TX_MAX_RANK]; /* output spatial dims */
    int64_t s[TX_MAX_RANK], d[TX_MAX_RANK], pb[TX_MAX_RANK];
    int64_t iprod, kprod, oprod; /* elements per channel */
    int64_t kc;                  /* cg * kprod: one weight row */
    bool direct;                 /* 1x1, unit strides, no padding: col == x */
} conv_geom;

static teexec_status *geom_of(const char *op, const tx_tensor *x, const tx_tensor *w, int64_t group,
                              const int64_t *strides, const int64_t *dilations, const int64_t *pads,
                              conv_geom *g)
{
    if (x->rank < 3)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: X must have rank >= 3, not %d", op,
                        (int)x->rank);
    if (w->rank != x->rank)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: W has rank %d but X has rank %d", op,
                        (int)w->rank, (int)x->rank);
    memset(g, 0, sizeof(*g));
    g->nsp = x->rank - 2;
    g->n = x->dims[0];
    g->c = x->dims[1];
    g->m = w->dims[0];
    g->group = group;
    if (group < 1 || g->c % group != 0 || g->m % group != 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: group %lld must divide both the %lld input and %lld output channels",
                        op, (long long)group, (long long)g->c, (long long)g->m);
    g->cg = g->c / group;
    g->mg = g->m / group;
    if (w->dims[1] != g->cg)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: W has %lld input channels per group, X gives %lld / %lld = %lld", op,
                        (long long)w->dims[1], (long long)g->c, (long long)group, (long long)g->cg);
    g->iprod = g->kprod = g->oprod = 1;
    g->direct = true;
    for (int32_t i = 0; i < g->nsp; i++) {
        g->in[i] = x->dims[2 + i];
        g->k[i] = w->dims[2 + i];
        g->s[i] = strides[i];
        g->d[i] = dilations[i];
        g->pb[i] = pads[i];
        int64_t pe = pads[g->nsp + i];
        if (g->s[i] < 1 || g->d[i] < 1 || g->pb[i] < 0 || pe < 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: strides and dilations must be >= 1 and pads >= 0", op);
        int64_t span = (g->k[i] - 1) * g->d[i] + 1;
        int64_t room = g->in[i] + g->pb[i] + pe - span;
        if (g->k[i] < 1 || room < 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: kernel extent %lld does not fit the padded input %lld (dim %d)",
                            op, (long long)span, (long long)(g->in[i] + g->pb[i] + pe), (int)i);
        g->out[i] = room / g->s[i] + 1;
        g->iprod *= g->in[i];
        g->kprod *= g->k[i];
        g->oprod *= g->out[i];
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] != 0 || pe != 0) g->direct = false;
    }
    g->kc = g->cg * g->kprod;
    if (g->mg > INT_MAX || g->kc > INT_MAX || g->oprod > INT_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "%s: a GEMM dim exceeds the BLAS int range", op);
    return NULL;
}

static tx_shape out_shape(const conv_geom *g)
{
    tx_shape s = {.rank = g->nsp + 2};
    s.dims[0] = g->n;
    s.dims[1] = g->m;
    for (int32_t i = 0; i < g->nsp; i++) s.dims[2 + i] = g->out[i];
    return s;
}

/* Walks every (channel, kernel element) row of the column matrix and, in
 * it, every output position, with the input element each one reads (or -1
 * in the padding). The innermost output dim is the loop the body sees, so
 * the index arithmetic for the outer dims runs once per row segment. */
#define CONV_WALK(BODY)                                                                            \
    do {                                                                                           \
        int32_t last = g->nsp - 1;                                                                 \
        int64_t ol = g->out[last], il = g->in[last];                                               \
        int64_t kidx[TX_MAX_RANK], oidx[TX_MAX_RANK];                                              \
        for (int64_t c = 0; c < g->cg; c++) {                                                      \
            memset(kidx, 0, sizeof(kidx));                                                         \
            for (int64_t kk = 0; kk < g->kprod; kk++) {                                            \
                int64_t row = (c * g->kprod + kk) * g->oprod;                                      \
                int64_t col0 = 0;                                                                  \
                memset(oidx, 0, sizeof(oidx));                                                     \
                int64_t nouter = g->oprod / (ol ? ol : 1);                                         \
                for (int64_t oo = 0; oo < nouter; oo++, col0 += ol) {                              \
                    /* input offset of the outer dims, or -1 in the padding */                     \
                    int64_t base = c;                                                              \
                    for (int32_t i = 0; i < last && base >= 0; i++) {                              \
                        int64_t p = oidx[i] * g->s[i] - g->pb[i] + kidx[i] * g->d[i];              \
                        base = (p < 0 || p >= g->in[i]) ? -1 : base * g->in[i] + p;                \
                    }                                                                              \
                    int64_t shift = kidx[last] * g->d[last] - g->pb[last];                         \
                    for (int64_t o = 0; o < ol; o++) {                                             \
                        int64_t p = o * g->s[last] + shift;                                        \
                        int64_t src = (base < 0 || p < 0 || p >= il) ? -1 : base * il + p;         \
                        int64_t dst = row + col0 + o;                                              \
                        BODY;                                                                      \
                    }                                                                              \
                    for (int32_t i = last - 1; i >= 0; i--) {                                      \
                        if (++oidx[i] < g->out[i]) break;                                          \
                        oidx[i] = 0;                                                               \
                    }                                                                              \
                }                                                                                  \
                for (int32_t i = last; i >= 0; i--) {                                              \
                    if (++kidx[i] < g->k[i]) break;                                                \
                    kidx[i] = 0;                                                                   \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* x: one image's group of channels [cg, in...]; col: [kc, oprod]. */
static void im2col_f32(const conv_geom *g, const float *x, float *col)
{
    CONV_WALK(col[dst] = src < 0 ? 0.0f : x[src]);
}

static void im2col_f64(const conv_geom *g, const double *x, double *col)
{
    CONV_WALK(col[dst] = src < 0 ? 0.0 : x[src]);
}

/* The adjoint of im2col: dx += fold(dcol). */
static void col2im_f64(const conv_geom *g, const double *dcol, double *dx)
{
    CONV_WALK(if (src >= 0) dx[src] += dcol[dst]);
}

static bool conv_dtype_ok(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_DOUBLE || dt == TEEXEC_DTYPE_FLOAT16 ||
           dt == TEEXEC_DTYPE_BFLOAT16;
}

static teexec_status *check_args(const char *op, const tx_tensor *x, const tx_tensor *w,
                                 const tx_tensor *b)
{
    TX_TRY(tx_check_tensor(op, "X", x));
    TX_TRY(tx_check_tensor(op, "W", w));
    if (!conv_dtype_ok(x->dtype)) return tx_err_dtype(op, x->dtype);
    if (w->dtype != x->dtype) return tx_err_dtype_mismatch(op, "W", w->dtype, x->dtype);
    if (b) {
        TX_TRY(tx_check_tensor(op, "B", b));
        if (b->dtype != x->dtype) return tx_err_dtype_mismatch(op, "B", b->dtype, x->dtype);
    }
    return NULL;
}

teexec_status *tx_cpu_conv(const tx_tensor *x, const tx_tensor *w, const tx_tensor *b,
                           int64_t group, const int64_t *strides, const int64_t *dilations,
                           const int64_t *pads, tx_tensor *y)
{
    const char *op = "Conv";
    TX_TRY(check_args(op, x, w, b));
    conv_geom g;
    TX_TRY(geom_of(op, x, w, group, strides, dilations, pads, &g));
    if (b && (b->rank != 1 || b->dims[0] != g.m)) {
        tx_shape want = {.rank = 1, .dims = {g.m}};
        return tx_err_shape(op, "B", b, &want);
    }
    tx_shape ys = out_shape(&g);
    TX_TRY(tx_check_output(op, y, x->dtype, &ys));
    if (y->numel == 0) return NULL;

    bool f64 = x->dtype == TEEXEC_DTYPE_DOUBLE, f32 = x->dtype == TEEXEC_DTYPE_FLOAT;
    size_t es = f64 ? sizeof(double) : sizeof(float);
    size_t img_in = (size_t)(g.c * g.iprod), img_out = (size_t)(g.m * g.oprod);
    /* compute-type copies where x/w/b/y are not already float32/float64 */
    void *wc = NULL, *bc = NULL, *xc = NULL, *yc = NULL, *col = NULL;
    bool ok = true;
    if (!f64 && !f32) {
        wc = malloc(w->numel * sizeof(float) + 1);
        xc = malloc(img_in * sizeof(float) + 1);
        yc = malloc(img_out * sizeof(float) + 1);
        ok = wc && xc && yc;
        if (ok) tx_load_f32(w->dtype, w->data, 0, w->numel, wc);
    }
    if (b && ok) {
        bc = malloc((size_t)g.m * es + 1);
        ok = bc != NULL;
        if (ok && f64) tx_load_f64(b->dtype, b->data, 0, (size_t)g.m, bc);
        if (ok && !f64) tx_load_f32(b->dtype, b->data, 0, (size_t)g.m, bc);
    }
    if (!g.direct && ok) {
        col = malloc((size_t)(g.kc * g.oprod) * es + 1);
        ok = col != NULL;
    }
    if (!ok) {
        free(wc);
        free(bc);
        free(xc);
        free(yc);
        free(col);
        return tx_oom();
    }
    const void *W = wc ? wc : w->data;
    for (int64_t n = 0; n < g.n; n++) {
        const void *X;
        void *Y;
        if (f64 || f32) {
            X = (const char *)x->data + (size_t)n * img_in * es;
            Y = (char *)y->data + (size_t)n * img_out * es;
        } else {
            tx_load_f32(x->dtype, x->data, (size_t)n * img_in, img_in, xc);
            X = xc;
            Y = yc;
        }
        for (int64_t gi = 0; gi < g.group; gi++) {
            size_t xoff = (size_t)(gi * g.cg * g.iprod), woff = (size_t)(gi * g.mg * g.kc);
            size_t yoff = (size_t)(gi * g.mg * g.oprod);
            if (f64) {
                const double *cm = (const double *)X + xoff;
                if (!g.direct) {
                    im2col_f64(&g, cm, col);
                    cm = col;
                }
                if (g.kc == 0)
                    memset((double *)Y + yoff, 0, (size_t)(g.mg * g.oprod) * es);
                else
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g.mg, (int)g.oprod,
                                (int)g.kc, 1.0, (const double *)W + woff, (int)g.kc, cm,
                                (int)g.oprod, 0.0, (double *)Y + yoff, (int)g.oprod);
            } else {
                const float *cm = (const float *)X + xoff;
                if (!g.direct) {
                    im2col_f32(&g, cm, col);
                    cm = col;
                }
                if (g.kc == 0)
                    memset((float *)Y + yoff, 0, (size_t)(g.mg * g.oprod) * es);
                else
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g.mg, (int)g.oprod,
                                (int)g.kc, 1.0f, (const float *)W + woff, (int)g.kc, cm,
                                (int)g.oprod, 0.0f, (float *)Y + yoff, (int)g.oprod);
            }
        }
        if (bc)
            for (int64_t m = 0; m < g.m; m++) {
                if (f64) {
                    double *r = (double *)Y + m * g.oprod, bv = ((const double *)bc)[m];
                    for (int64_t o = 0; o < g.oprod; o++) r[o] += bv;
                } else {
                    float *r = (float *)Y + m * g.oprod, bv = ((const float *)bc)[m];
                    for (int64_t o = 0; o < g.oprod; o++) r[o] += bv;
                }
            }
        if (!f64 && !f32) tx_store_f32(y->dtype, y->data, (size_t)n * img_out, img_out, yc);
    }
    free(wc);
    free(bc);
    free(xc);
    free(yc);
    free(col);
    return NULL;
}

teexec_status *tx_cpu_conv_backward(const tx_tensor *x, const tx_tensor *w, const tx_tensor *gy,
                                    int64_t group, const int64_t *strides, const int64_t *dilations,
                                    const int64_t *pads, tx_tensor *gx, tx_tensor *gw,
                                    tx_tensor *gb)
{
    const char *op = "Conv backward";
    TX_TRY(check_args(op, x, w, NULL));
    if (x->dtype != TEEXEC_DTYPE_DOUBLE) return tx_err_dtype(op, x->dtype);
    conv_geom g;
    TX_TRY(geom_of(op, x, w, group, strides, dilations, pads, &g));
    tx_shape ys = out_shape(&g), xs = tx_shape_of(x), ws = tx_shape_of(w);
    tx_shape bs = {.rank = 1, .dims = {g.m}};
    TX_TRY(tx_check_tensor(op, "dY", gy));
    if (gy->dtype != TEEXEC_DTYPE_DOUBLE) return tx_err_dtype(op, gy->dtype);
    if (!tx_tensor_has_shape(gy, &ys)) return tx_err_shape(op, "dY", gy, &ys);
    if (gx) TX_TRY(tx_check_output(op, gx, TEEXEC_DTYPE_DOUBLE, &xs));
    if (gw) TX_TRY(tx_check_output(op, gw, TEEXEC_DTYPE_DOUBLE, &ws));
    if (gb) TX_TRY(tx_check_output(op, gb, TEEXEC_DTYPE_DOUBLE, &bs));
    if (gy->numel == 0) return NULL;

    const double *X = x->data, *W = w->data, *GY = gy->data;
    double *GX = gx ? gx->data : NULL, *GW = gw ? gw->data : NULL, *GB = gb ? gb->data : NULL;
    size_t colsz = (size_t)(g.kc * g.oprod);
    double *col = (gw && !g.direct) ? malloc(colsz * sizeof(double) + 1) : NULL;
    double *dcol = (gx && !g.direct) ? malloc(colsz * sizeof(double) + 1) : NULL;
    if ((gw && !g.direct && !col) || (gx && !g.direct && !dcol)) {
        free(col);
        free(dcol);
        return tx_oom();
    }
    size_t img_in = (size_t)(g.c * g.iprod), img_out = (size_t)(g.m * g.oprod);
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t gi = 0; gi < g.group; gi++) {
            size_t xoff = (size_t)n * img_in + (size_t)(gi * g.cg * g.iprod);
            size_t woff = (size_t)(gi * g.mg * g.kc);
            const double *gyg = GY + (size_t)n * img_out + (size_t)(gi * g.mg * g.oprod);
            if (GW && g.kc > 0) {
                const double *cm = X + xoff;
                if (!g.direct) {
                    im2col_f64(&g, cm, col);
                    cm = col;
                }
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g.mg, (int)g.kc,
                            (int)g.oprod, 1.0, gyg, (int)g.oprod, cm, (int)g.oprod, 1.0, GW + woff,
                            (int)g.kc);
            }
            if (GX && g.kc > 0) {
                /* direct: dcol is dX's own block, so BLAS adds into it */
                double *dc = g.direct ? GX + xoff : dcol;
                cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)g.kc, (int)g.oprod,
                            (int)g.mg, 1.0, W + woff, (int)g.kc, gyg, (int)g.oprod,
                            g.direct ? 1.0 : 0.0, dc, (int)g.oprod);
                if (!g.direct) col2im_f64(&g, dcol, GX + xoff);
            }
        }
    if (GB)
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t m = 0; m < g.m; m++) {
                const double *r = GY + (size_t)n * img_out + (size_t)(m * g.oprod);
                double s = 0;
                for (int64_t o = 0; o < g.oprod; o++) s += r[o];
                GB[m] += s;
            }
    free(col);
    free(dcol);
    return NULL;
}
