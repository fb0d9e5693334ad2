/* Tests for conv.c, gather_nd.c, rmsnorm.c and attention.c against naive
 * FP64 references written from the ONNX definitions, on inputs exactly
 * representable in every float dtype; the backward kernels of Conv and
 * Attention against the forward (adjoint identities and an FP64 finite
 * difference; tests/train/test_backward_fd.c checks them through the
 * trainer). */
#include "kt_util.h"

/* Halves in [-2, 2]: exact in bfloat16, and their products and short sums
 * exact in float32, so only the final rounding differs between dtypes. */
static tx_tensor halves(teexec_dtype dt, int32_t rank, const int64_t *dims)
{
    tx_tensor t = kt_alloc(dt, rank, dims);
    for (size_t i = 0; i < t.numel; i++) kt_set(&t, i, floor(kt_uniform(-4, 5)) / 2);
    return t;
}

static size_t numel_of(int32_t rank, const int64_t *dims)
{
    size_t n = 1;
    for (int32_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

/* ---- Conv ---------------------------------------------------------------- */

typedef struct conv_case {
    int32_t rank;
    int64_t x[5], w[5];
    int64_t group;
    int64_t strides[3], dilations[3], pads[6];
    bool bias;
} conv_case;

/* Output dims by the ONNX formula, and the direct definition of Conv. */
static void conv_out_dims(const conv_case *cc, int64_t *y)
{
    int32_t k = cc->rank - 2;
    y[0] = cc->x[0];
    y[1] = cc->w[0];
    for (int32_t i = 0; i < k; i++)
        y[2 + i] = (cc->x[2 + i] + cc->pads[i] + cc->pads[k + i] -
                    ((cc->w[2 + i] - 1) * cc->dilations[i] + 1)) /
                       cc->strides[i] +
                   1;
}

static void conv_ref(const conv_case *cc, const tx_tensor *x, const tx_tensor *w,
                     const tx_tensor *b, double *ref)
{
    int32_t r = cc->rank, k = r - 2;
    int64_t yd[5];
    conv_out_dims(cc, yd);
    int64_t cg = cc->w[1], mg = cc->w[0] / cc->group;
    size_t ny = numel_of(r, yd), nk = numel_of(k, cc->w + 2);
    for (size_t f = 0; f < ny; f++) {
        int64_t yi[5];
        kt_unravel(f, r, yd, yi);
        int64_t n = yi[0], m = yi[1], gi = m / mg;
        double s = b ? kt_get(b, (size_t)m) : 0.0;
        for (int64_t c = 0; c < cg; c++)
            for (size_t kk = 0; kk < nk; kk++) {
                int64_t ki[3], xi[5] = {n, gi * cg + c}, wi[5] = {m, c};
                kt_unravel(kk, k, cc->w + 2, ki);
                bool inside = true;
                for (int32_t i = 0; i < k; i++) {
                    xi[2 + i] = yi[2 + i] * cc->strides[i] - cc->pads[i] + ki[i] * cc->dilations[i];
                    wi[2 + i] = ki[i];
                    if (xi[2 + i] < 0 || xi[2 + i] >= cc->x[2 + i]) inside = false;
                }
                if (inside)
                    s += kt_get(x, kt_ravel(r, cc->x, xi)) * kt_get(w, kt_ravel(r, cc->w, wi));
            }
        ref[f] = s;
    }
}

static const conv_case CONV_CASES[] = {
    /* 1-D, groups, stride, dilation, asymmetric pads */
    {3, {2, 4, 9}, {6, 2, 3}, 2, {2}, {2}, {1, 2}, true},
    /* 2-D, strides, dilations, asymmetric pads */
    {4, {2, 3, 7, 6}, {4, 3, 3, 2}, 1, {2, 1}, {1, 2}, {1, 0, 2, 1}, true},
    /* depthwise with a channel multiplier */
    {4, {1, 4, 5, 5}, {8, 1, 3, 3}, 4, {1, 1}, {1, 1}, {1, 1, 1, 1}, false},
    /* 3-D */
    {5, {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {1, 1, 1}, {0, 1, 1, 1, 0, 0}, true},
    /* 1x1: the column matrix is x itself */
    {4, {2, 5, 3, 4}, {3, 5, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},
    /* ViT patch embedding: stride = kernel */
    {4, {2, 3, 16, 16}, {8, 3, 4, 4}, 1, {4, 4}, {1, 1}, {0, 0, 0, 0}, true},
};

static void conv_against_definition(void **state)
{
    (void)state;
    teexec_dtype dts[] = KT_FLOAT_DTYPES;
    kt_seed(141);
    for (size_t ci = 0; ci < sizeof CONV_CASES / sizeof CONV_CASES[0]; ci++)
        for (size_t d = 0; d < 4; d++) {
            const conv_case *cc = &CONV_CASES[ci];
            int64_t yd[5], bd[1] = {cc->w[0]};
            conv_out_dims(cc, yd);
            tx_tensor x = halves(dts[d], cc->rank, cc->x), w = halves(dts[d], cc->rank, cc->w);
            tx_tensor b = halves(dts[d], 1, bd), y = kt_alloc(dts[d], cc->rank, yd);
            kt_ok(tx_cpu_conv(&x, &w, cc->bias ? &b : NULL, cc->group, cc->strides, cc->dilations,
                              cc->pads, &y));
            double *ref = malloc(y.numel * sizeof(double));
            conv_ref(cc, &x, &w, cc->bias ? &b : NULL, ref);
            for (size_t i = 0; i < y.numel; i++) ref[i] = kt_round_to(dts[d], ref[i]);
            /* every product and partial sum is exact: only the last rounding counts */
            kt_expect_close(&y, ref, 0, 0);
            free(ref);
            tx_tensor_release(&x);
            tx_tensor_release(&w);
            tx_tensor_release(&b);
            tx_tensor_release(&y);
        }
}

static void conv_errors(void **state)
{
    (void)state;
    int64_t xd[] = {1, 3, 5, 5}, wd[] = {4, 3, 3, 3}, yd[] = {1, 4, 3, 3};
    int64_t one[] = {1, 1}, zero[] = {0, 0, 0, 0};
    tx_tensor x = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, xd), w = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, wd);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, yd);
    kt_ok(tx_cpu_conv(&x, &w, NULL, 1, one, one, zero, &y));
    kt_err(tx_cpu_conv(&x, &w, NULL, 2, one, one, zero, &y), TEEXEC_ERR_INVALID_ARGUMENT, "group");
    int64_t two[] = {2, 2};
    kt_err(tx_cpu_conv(&x, &w, NULL, 1, two, one, zero, &y), TEEXEC_ERR_INVALID_ARGUMENT, "output");
    int64_t big[] = {3, 3};
    kt_err(tx_cpu_conv(&x, &w, NULL, 1, one, big, zero, &y), TEEXEC_ERR_INVALID_ARGUMENT,
           "does not fit");
    int64_t neg[] = {-1, 0, 0, 0};
    kt_err(tx_cpu_conv(&x, &w, NULL, 1, one, one, neg, &y), TEEXEC_ERR_INVALID_ARGUMENT, "pads");
    int64_t bd[] = {3};
    tx_tensor b = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, bd);
    kt_err(tx_cpu_conv(&x, &w, &b, 1, one, one, zero, &y), TEEXEC_ERR_INVALID_ARGUMENT, "B");
    int64_t w3[] = {4, 3, 3};
    tx_tensor wr = kt_alloc(TEEXEC_DTYPE_FLOAT, 3, w3);
    kt_err(tx_cpu_conv(&x, &wr, NULL, 1, one, one, zero, &y), TEEXEC_ERR_INVALID_ARGUMENT, "rank");
    tx_tensor wd64 = kt_alloc(TEEXEC_DTYPE_DOUBLE, 4, wd);
    kt_err(tx_cpu_conv(&x, &wd64, NULL, 1, one, one, zero, &y), TEEXEC_ERR_INVALID_ARGUMENT, "W");
    tx_tensor xi = kt_alloc(TEEXEC_DTYPE_INT32, 4, xd), wi = kt_alloc(TEEXEC_DTYPE_INT32, 4, wd);
    tx_tensor yi = kt_alloc(TEEXEC_DTYPE_INT32, 4, yd);
    kt_err(tx_cpu_conv(&xi, &wi, NULL, 1, one, one, zero, &yi), TEEXEC_ERR_UNSUPPORTED, "int32");
    /* the backward is FP64 only */
    kt_err(tx_cpu_conv_backward(&x, &w, &y, 1, one, one, zero, NULL, NULL, NULL),
           TEEXEC_ERR_UNSUPPORTED, "float");
    tx_tensor *all[] = {&x, &w, &y, &b, &wr, &wd64, &xi, &wi, &yi};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static double dot(const tx_tensor *a, const tx_tensor *b)
{
    double s = 0;
    for (size_t i = 0; i < a->numel; i++) s += kt_get(a, i) * kt_get(b, i);
    return s;
}

/* Conv is bilinear: <conv(x, w), g> = <x, dX> = <w, dW>, and dB sums g.
 * The backward adds into its outputs, so a second call doubles them. */
static void conv_backward_adjoint(void **state)
{
    (void)state;
    kt_seed(142);
    const teexec_dtype D = TEEXEC_DTYPE_DOUBLE;
    for (size_t ci = 0; ci < sizeof CONV_CASES / sizeof CONV_CASES[0]; ci++) {
        const conv_case *cc = &CONV_CASES[ci];
        int64_t yd[5], bd[1] = {cc->w[0]};
        conv_out_dims(cc, yd);
        tx_tensor x = halves(D, cc->rank, cc->x), w = halves(D, cc->rank, cc->w);
        tx_tensor y = kt_alloc(D, cc->rank, yd), g = halves(D, cc->rank, yd);
        tx_tensor gx = kt_alloc(D, cc->rank, cc->x), gw = kt_alloc(D, cc->rank, cc->w);
        tx_tensor gb = kt_alloc(D, 1, bd);
        kt_ok(tx_cpu_conv(&x, &w, NULL, cc->group, cc->strides, cc->dilations, cc->pads, &y));
        for (int pass = 1; pass <= 2; pass++) {
            kt_ok(tx_cpu_conv_backward(&x, &w, &g, cc->group, cc->strides, cc->dilations, cc->pads,
                                       &gx, &gw, &gb));
            double want = pass * dot(&y, &g);
            assert_true(fabs(dot(&x, &gx) - want) <= 1e-12 * (1 + fabs(want)));
            assert_true(fabs(dot(&w, &gw) - want) <= 1e-12 * (1 + fabs(want)));
            int64_t per = (int64_t)(g.numel / (size_t)(yd[0] * yd[1]));
            for (int64_t m = 0; m < yd[1]; m++) {
                double s = 0;
                for (int64_t n = 0; n < yd[0]; n++)
                    for (int64_t o = 0; o < per; o++)
                        s += kt_get(&g, (size_t)((n * yd[1] + m) * per + o));
                assert_true(fabs(kt_get(&gb, (size_t)m) - pass * s) <= 1e-12 * (1 + fabs(s)));
            }
        }
        tx_tensor *all[] = {&x, &w, &y, &g, &gx, &gw, &gb};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
    }
}

/* ---- GatherND ------------------------------------------------------------ */

static tx_tensor ints(int32_t rank, const int64_t *dims, const int64_t *v)
{
    tx_tensor t = kt_alloc(TEEXEC_DTYPE_INT64, rank, dims);
    memcpy(t.data, v, t.numel * sizeof(int64_t));
    return t;
}

static void gather_nd_cases(void **state)
{
    (void)state;
    /* data [2, 2] with full index tuples and with row indices (k = 1) */
    int64_t d22[] = {2, 2};
    double dv[] = {0, 1, 2, 3};
    tx_tensor data = kt_from(TEEXEC_DTYPE_INT32, 2, d22, dv);
    int64_t i1v[] = {0, 0, 1, 1}, i1d[] = {2, 2};
    tx_tensor i1 = ints(2, i1d, i1v);
    int64_t y1d[] = {2};
    tx_tensor y1 = kt_alloc(TEEXEC_DTYPE_INT32, 1, y1d);
    kt_ok(tx_cpu_gather_nd(&data, &i1, 0, &y1));
    int64_t w1[] = {0, 3};
    kt_expect_exact_i(&y1, w1);
    int64_t i2v[] = {1, -2}, i2d[] = {2, 1};
    tx_tensor i2 = ints(2, i2d, i2v);
    tx_tensor y2 = kt_alloc(TEEXEC_DTYPE_INT32, 2, d22);
    kt_ok(tx_cpu_gather_nd(&data, &i2, 0, &y2));
    int64_t w2[] = {2, 3, 0, 1};
    kt_expect_exact_i(&y2, w2);

    /* batch_dims 1: data [2, 2, 2], indices [2, 1] pick a row per batch */
    int64_t d222[] = {2, 2, 2};
    double dv3[] = {0, 1, 2, 3, 4, 5, 6, 7};
    tx_tensor data3 = kt_from(TEEXEC_DTYPE_FLOAT, 3, d222, dv3);
    int64_t i3v[] = {1, 0};
    tx_tensor i3 = ints(2, i2d, i3v);
    tx_tensor y3 = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, d22);
    kt_ok(tx_cpu_gather_nd(&data3, &i3, 1, &y3));
    double w3[] = {2, 3, 4, 5};
    kt_expect_close(&y3, w3, 0, 0);

    /* batch_dims 2 on random data, against index arithmetic */
    kt_seed(143);
    int64_t dd[] = {2, 3, 4, 5}, id[] = {2, 3, 4, 2}, yd[] = {2, 3, 4};
    tx_tensor data4 = kt_random(TEEXEC_DTYPE_BFLOAT16, 4, dd, -3, 3);
    int64_t iv[48];
    for (int i = 0; i < 24; i++) {
        iv[2 * i] = (int64_t)floor(kt_uniform(-4, 4));
        iv[2 * i + 1] = (int64_t)floor(kt_uniform(-5, 5));
    }
    tx_tensor i4 = ints(4, id, iv);
    tx_tensor y4 = kt_alloc(TEEXEC_DTYPE_BFLOAT16, 3, yd);
    kt_ok(tx_cpu_gather_nd(&data4, &i4, 2, &y4));
    double ref[24];
    for (int f = 0; f < 24; f++) {
        int64_t b0 = f / 12, b1 = (f / 4) % 3, a = iv[2 * f], c = iv[2 * f + 1];
        int64_t xi[4] = {b0, b1, a < 0 ? a + 4 : a, c < 0 ? c + 5 : c};
        ref[f] = kt_get(&data4, kt_ravel(4, dd, xi));
    }
    kt_expect_close(&y4, ref, 0, 0);

    /* bad indices and shapes */
    int64_t oob[] = {2, 0};
    tx_tensor io = ints(2, i2d, oob);
    kt_err(tx_cpu_gather_nd(&data, &io, 0, &y2), TEEXEC_ERR_INVALID_ARGUMENT, "out of range");
    kt_err(tx_cpu_gather_nd(&data, &i1, 1, &y1), TEEXEC_ERR_INVALID_ARGUMENT, "last indices dim");
    kt_err(tx_cpu_gather_nd(&data, &i1, 2, &y1), TEEXEC_ERR_INVALID_ARGUMENT, "batch_dims");
    kt_err(tx_cpu_gather_nd(&data, &i1, 0, &y2), TEEXEC_ERR_INVALID_ARGUMENT, "shape");
    tx_tensor i32 = kt_alloc(TEEXEC_DTYPE_INT32, 2, i1d);
    kt_err(tx_cpu_gather_nd(&data, &i32, 0, &y1), TEEXEC_ERR_UNSUPPORTED, "int32");
    tx_tensor *all[] = {&data, &i1, &y1, &i2, &y2, &data3, &i3, &y3, &data4, &i4, &y4, &io, &i32};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

/* ---- RMSNormalization ---------------------------------------------------- */

static void rms_norm_cases(void **state)
{
    (void)state;
    teexec_dtype dts[] = KT_FLOAT_DTYPES;
    kt_seed(144);
    int64_t xd[] = {2, 3, 4, 5};
    struct {
        int64_t axis;
        int32_t srank;
        int64_t sd[3];
    } cs[] = {{-1, 1, {5}}, {2, 2, {4, 5}}, {1, 3, {1, 4, 5}}, {-2, 2, {4, 1}}, {3, 1, {1}}};
    for (size_t d = 0; d < 4; d++)
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
            tx_tensor x = kt_random(dts[d], 4, xd, -2, 2);
            tx_tensor s = kt_random(dts[d], cs[k].srank, cs[k].sd, 0.5, 1.5);
            tx_tensor y = kt_alloc(dts[d], 4, xd);
            const float eps = 1e-3f;
            kt_ok(tx_cpu_rms_norm(&x, &s, cs[k].axis, eps, 1, &y));
            int32_t ax = (int32_t)(cs[k].axis < 0 ? cs[k].axis + 4 : cs[k].axis);
            size_t n = numel_of(4 - ax, xd + ax), outer = x.numel / n;
            double ref[120];
            for (size_t o = 0; o < outer; o++) {
                double ms = 0;
                for (size_t j = 0; j < n; j++) ms += kt_get(&x, o * n + j) * kt_get(&x, o * n + j);
                double r = 1 / sqrt(ms / (double)n + (double)eps);
                for (size_t j = 0; j < n; j++) {
                    int64_t idx[4];
                    kt_unravel(o * n + j, 4, xd, idx);
                    double sv = kt_get(&s, kt_bcast_index(&s, 4, idx));
                    ref[o * n + j] = kt_round_to(dts[d], kt_get(&x, o * n + j) * r * sv);
                }
            }
            kt_expect_close(&y, ref, 2 * kt_rtol(dts[d]), 1e-7);
            tx_tensor_release(&x);
            tx_tensor_release(&s);
            tx_tensor_release(&y);
        }
    /* Y takes scale's dtype; scale must broadcast to dims[axis:] */
    tx_tensor x = kt_random(TEEXEC_DTYPE_FLOAT, 4, xd, -2, 2);
    int64_t s5[] = {5}, s4[] = {4};
    tx_tensor s = kt_random(TEEXEC_DTYPE_DOUBLE, 1, s5, 0.5, 1.5);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_DOUBLE, 4, xd), yf = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, xd);
    kt_ok(tx_cpu_rms_norm(&x, &s, -1, 1e-5f, 1, &y));
    kt_err(tx_cpu_rms_norm(&x, &s, -1, 1e-5f, 1, &yf), TEEXEC_ERR_INVALID_ARGUMENT, "output");
    tx_tensor s_bad = kt_random(TEEXEC_DTYPE_FLOAT, 1, s4, 0.5, 1.5);
    kt_err(tx_cpu_rms_norm(&x, &s_bad, -1, 1e-5f, 1, &yf), TEEXEC_ERR_INVALID_ARGUMENT, "scale");
    kt_err(tx_cpu_rms_norm(&x, &s_bad, 4, 1e-5f, 1, &yf), TEEXEC_ERR_INVALID_ARGUMENT, "axis");
    kt_err(tx_cpu_rms_norm(&x, &s_bad, -1, 1e-5f, 7, &yf), TEEXEC_ERR_UNSUPPORTED, "stash_type");
    tx_tensor *all[] = {&x, &s, &y, &yf, &s_bad};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

/* ---- Attention ----------------------------------------------------------- */

typedef struct attn_case {
    bool rank3;
    int64_t b, hq, hkv, lq, lk, past, d, dv;
    int mask; /* 0 none, 1 bool, 2 float */
    int32_t mrank;
    int64_t md[4]; /* mask dims (its last may be shorter than past + lk) */
    bool causal, has_scale;
    float scale, softcap;
} attn_case;

/* Element (b, h, l, e) of a Q/K/V tensor of the case's layout. */
static double qkv_at(const attn_case *ac, const tx_tensor *t, int64_t H, int64_t L, int64_t D,
                     int64_t b, int64_t h, int64_t l, int64_t e)
{
    size_t o = ac->rank3 ? (size_t)(((b * L + l) * H + h) * D + e)
                         : (size_t)(((b * H + h) * L + l) * D + e);
    return kt_get(t, o);
}

/* The ONNX definition, row by row in double. */
static void attn_ref(const attn_case *ac, const tx_tensor *q, const tx_tensor *k,
                     const tx_tensor *v, const tx_tensor *m, const tx_tensor *pk,
                     const tx_tensor *pv, double *y, double *qk)
{
    int64_t T = ac->past + ac->lk, reps = ac->hq / ac->hkv;
    double scale = ac->has_scale ? (double)ac->scale : 1 / sqrt((double)ac->d);
    double *z = malloc((size_t)T * sizeof(double));
    for (int64_t b = 0; b < ac->b; b++)
        for (int64_t h = 0; h < ac->hq; h++)
            for (int64_t i = 0; i < ac->lq; i++) {
                int64_t hk = h / reps;
                double mx = -INFINITY;
                for (int64_t j = 0; j < T; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < ac->d; e++) {
                        double kv =
                            j < ac->past
                                ? kt_get(pk,
                                         (size_t)(((b * ac->hkv + hk) * ac->past + j) * ac->d + e))
                                : qkv_at(ac, k, ac->hkv, ac->lk, ac->d, b, hk, j - ac->past, e);
                        s += qkv_at(ac, q, ac->hq, ac->lq, ac->d, b, h, i, e) * kv;
                    }
                    s *= scale;
                    if (qk) qk[((b * ac->hq + h) * ac->lq + i) * T + j] = s;
                    if (ac->softcap > 0) s = ac->softcap * tanh(s / ac->softcap);
                    if (m) {
                        int64_t full[4] = {b, h, i, j}, mi[4];
                        for (int32_t a = 0; a < m->rank; a++) {
                            int64_t fi = full[4 - m->rank + a];
                            mi[a] = m->dims[a] == 1 && a < m->rank - 1 ? 0 : fi;
                        }
                        if (j >= m->dims[m->rank - 1])
                            s = -INFINITY;
                        else if (ac->mask == 1)
                            s = kt_get(m, kt_ravel(m->rank, m->dims, mi)) != 0 ? s : -INFINITY;
                        else
                            s += kt_get(m, kt_ravel(m->rank, m->dims, mi));
                    }
                    if (ac->causal && j > i + ac->past) s = -INFINITY;
                    z[j] = s;
                    mx = fmax(mx, s);
                }
                double sum = 0;
                for (int64_t j = 0; j < T; j++) sum += exp(z[j] - mx);
                for (int64_t e = 0; e < ac->dv; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < T; j++) {
                        double vv =
                            j < ac->past
                                ? kt_get(pv,
                                         (size_t)(((b * ac->hkv + hk) * ac->past + j) * ac->dv + e))
                                : qkv_at(ac, v, ac->hkv, ac->lk, ac->dv, b, hk, j - ac->past, e);
                        acc += exp(z[j] - mx) / sum * vv;
                    }
                    size_t o = ac->rank3 ? (size_t)(((b * ac->lq + i) * ac->hq + h) * ac->dv + e)
                                         : (size_t)(((b * ac->hq + h) * ac->lq + i) * ac->dv + e);
                    y[o] = mx == -INFINITY ? NAN : acc;
                }
            }
    free(z);
}

static const attn_case ATTN_CASES[] = {
    /* the zoo's op23 Llama: rank 4, bool mask [B, 1, L, L], explicit scale */
    {false, 2, 4, 4, 5, 5, 0, 8, 8, 1, 4, {2, 1, 5, 5}, false, true, 0.35355339f, 0},
    /* GQA, causal, default scale, no mask */
    {false, 1, 4, 2, 4, 4, 0, 4, 3, 0, 0, {0}, true, false, 0, 0},
    /* rank 3 with heads attributes, a float mask, past cache and causal */
    {true, 2, 2, 1, 3, 2, 3, 4, 2, 2, 2, {3, 5}, true, false, 0, 0},
    /* a mask shorter than the keys (padded with -inf), softcap, cross attention */
    {false, 1, 2, 2, 3, 6, 0, 4, 4, 1, 3, {1, 3, 4}, false, true, 0.5f, 2.0f},
};

static void attn_tensors(const attn_case *ac, teexec_dtype dt, tx_tensor *t)
{
    int64_t qd[4], kd[4], vd[4], pkd[4] = {ac->b, ac->hkv, ac->past, ac->d};
    int64_t pvd[4] = {ac->b, ac->hkv, ac->past, ac->dv};
    int32_t r = ac->rank3 ? 3 : 4;
    if (ac->rank3) {
        int64_t a[3] = {ac->b, ac->lq, ac->hq * ac->d}, b[3] = {ac->b, ac->lk, ac->hkv * ac->d};
        int64_t c[3] = {ac->b, ac->lk, ac->hkv * ac->dv};
        memcpy(qd, a, sizeof a);
        memcpy(kd, b, sizeof b);
        memcpy(vd, c, sizeof c);
    } else {
        int64_t a[4] = {ac->b, ac->hq, ac->lq, ac->d}, b[4] = {ac->b, ac->hkv, ac->lk, ac->d};
        int64_t c[4] = {ac->b, ac->hkv, ac->lk, ac->dv};
        memcpy(qd, a, sizeof a);
        memcpy(kd, b, sizeof b);
        memcpy(vd, c, sizeof c);
    }
    t[0] = halves(dt, r, qd);
    t[1] = halves(dt, r, kd);
    t[2] = halves(dt, r, vd);
    memset(&t[3], 0, sizeof(tx_tensor) * 3);
    if (ac->mask == 1) {
        t[3] = kt_random(TEEXEC_DTYPE_BOOL, ac->mrank, ac->md, 0, 1);
        /* keep the diagonal so no row is fully masked */
        uint8_t *mb = t[3].data;
        size_t cols = (size_t)ac->md[ac->mrank - 1];
        size_t rows = ac->mrank > 1 ? (size_t)ac->md[ac->mrank - 2] : 1;
        for (size_t i = 0; i < t[3].numel; i++)
            if ((i / cols) % rows == i % cols) mb[i] = 1;
    } else if (ac->mask == 2) {
        t[3] = halves(dt, ac->mrank, ac->md);
    }
    if (ac->past) {
        t[4] = halves(dt, 4, pkd);
        t[5] = halves(dt, 4, pvd);
    }
}

static void attention_against_definition(void **state)
{
    (void)state;
    teexec_dtype dts[] = KT_FLOAT_DTYPES;
    kt_seed(145);
    for (size_t ci = 0; ci < sizeof ATTN_CASES / sizeof ATTN_CASES[0]; ci++)
        for (size_t d = 0; d < 4; d++) {
            const attn_case *ac = &ATTN_CASES[ci];
            tx_tensor t[6];
            attn_tensors(ac, dts[d], t);
            int64_t T = ac->past + ac->lk;
            int64_t yd4[4] = {ac->b, ac->hq, ac->lq, ac->dv},
                    yd3[3] = {ac->b, ac->lq, ac->hq * ac->dv};
            int64_t pkd[4] = {ac->b, ac->hkv, T, ac->d}, pvd[4] = {ac->b, ac->hkv, T, ac->dv};
            int64_t qkd[4] = {ac->b, ac->hq, ac->lq, T};
            tx_tensor y = ac->rank3 ? kt_alloc(dts[d], 3, yd3) : kt_alloc(dts[d], 4, yd4);
            tx_tensor pk = kt_alloc(dts[d], 4, pkd), pv = kt_alloc(dts[d], 4, pvd);
            tx_tensor qk = kt_alloc(dts[d], 4, qkd);
            tx_attention_params p = {ac->rank3 ? ac->hq : 0,
                                     ac->rank3 ? ac->hkv : 0,
                                     ac->causal,
                                     ac->has_scale,
                                     ac->scale,
                                     ac->softcap};
            tx_attention_inputs in = {&t[0],
                                      &t[1],
                                      &t[2],
                                      ac->mask ? &t[3] : NULL,
                                      ac->past ? &t[4] : NULL,
                                      ac->past ? &t[5] : NULL};
            tx_attention_outputs out = {&y, &pk, &pv, &qk};
            kt_ok(tx_cpu_attention(&p, &in, &out));
            double *ry = malloc(y.numel * sizeof(double)), *rqk = malloc(qk.numel * sizeof(double));
            attn_ref(ac, &t[0], &t[1], &t[2], ac->mask ? &t[3] : NULL, &t[4], &t[5], ry, rqk);
            double rt = dts[d] == TEEXEC_DTYPE_DOUBLE ? 1e-12 : 4 * kt_rtol(dts[d]);
            kt_expect_close(&y, ry, rt, 1e-6);
            kt_expect_close(&qk, rqk, rt, 1e-6);
            /* present_key/value: the past followed by the new keys/values */
            for (int64_t b = 0; b < ac->b; b++)
                for (int64_t h = 0; h < ac->hkv; h++)
                    for (int64_t j = 0; j < T; j++)
                        for (int64_t e = 0; e < ac->d; e++) {
                            double want =
                                j < ac->past
                                    ? kt_get(
                                          &t[4],
                                          (size_t)(((b * ac->hkv + h) * ac->past + j) * ac->d + e))
                                    : qkv_at(ac, &t[1], ac->hkv, ac->lk, ac->d, b, h, j - ac->past,
                                             e);
                            assert_true(kt_get(&pk, (size_t)(((b * ac->hkv + h) * T + j) * ac->d +
                                                             e)) == want);
                        }
            free(ry);
            free(rqk);
            for (int i = 0; i < 6; i++) tx_tensor_release(&t[i]);
            tx_tensor_release(&y);
            tx_tensor_release(&pk);
            tx_tensor_release(&pv);
            tx_tensor_release(&qk);
        }
}

static void attention_edges(void **state)
{
    (void)state;
    kt_seed(146);
    attn_case ac = {false, 1, 2, 2, 2, 3, 0, 4, 4, 1, 2, {2, 3}, false, false, 0, 0};
    tx_tensor t[6];
    attn_tensors(&ac, TEEXEC_DTYPE_FLOAT, t);
    /* a fully masked row has no softmax: NaN, as ONNX's reference gives */
    memset(t[3].data, 0, 3);
    memset((uint8_t *)t[3].data + 3, 1, 3);
    int64_t yd[] = {1, 2, 2, 4};
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, yd);
    tx_attention_params p = {0, 0, false, false, 0, 0};
    tx_attention_inputs in = {&t[0], &t[1], &t[2], &t[3], NULL, NULL};
    tx_attention_outputs out = {&y, NULL, NULL, NULL};
    kt_ok(tx_cpu_attention(&p, &in, &out));
    for (int h = 0; h < 2; h++)
        for (int e = 0; e < 4; e++) {
            assert_true(isnan(kt_get(&y, (size_t)(h * 8 + e))));
            assert_false(isnan(kt_get(&y, (size_t)(h * 8 + 4 + e))));
        }
    /* bad inputs */
    tx_attention_params p3 = {0, 0, false, false, 0, 0};
    int64_t d3[] = {1, 2, 8};
    tx_tensor q3 = kt_alloc(TEEXEC_DTYPE_FLOAT, 3, d3);
    tx_attention_inputs in3 = {&q3, &q3, &q3, NULL, NULL, NULL};
    kt_err(tx_cpu_attention(&p3, &in3, &out), TEEXEC_ERR_INVALID_ARGUMENT, "q_num_heads");
    tx_attention_inputs mixed = {&t[0], &q3, &t[2], NULL, NULL, NULL};
    kt_err(tx_cpu_attention(&p, &mixed, &out), TEEXEC_ERR_INVALID_ARGUMENT, "rank");
    tx_attention_inputs half_cache = {&t[0], &t[1], &t[2], NULL, &t[1], NULL};
    kt_err(tx_cpu_attention(&p, &half_cache, &out), TEEXEC_ERR_INVALID_ARGUMENT, "together");
    int64_t md[] = {3, 3};
    tx_tensor mbad = kt_alloc(TEEXEC_DTYPE_BOOL, 2, md);
    tx_attention_inputs inm = {&t[0], &t[1], &t[2], &mbad, NULL, NULL};
    kt_err(tx_cpu_attention(&p, &inm, &out), TEEXEC_ERR_INVALID_ARGUMENT, "attn_mask");
    tx_tensor mint = kt_alloc(TEEXEC_DTYPE_INT32, 2, t[3].dims);
    tx_attention_inputs ini = {&t[0], &t[1], &t[2], &mint, NULL, NULL};
    kt_err(tx_cpu_attention(&p, &ini, &out), TEEXEC_ERR_UNSUPPORTED, "attn_mask");
    int64_t hd[] = {1, 3, 2, 4};
    tx_tensor q_odd = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, hd),
              y_odd = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, hd);
    tx_attention_inputs ing = {&q_odd, &t[1], &t[2], NULL, NULL, NULL};
    tx_attention_outputs outg = {&y_odd, NULL, NULL, NULL};
    kt_err(tx_cpu_attention(&p, &ing, &outg), TEEXEC_ERR_INVALID_ARGUMENT, "kv heads");
    tx_tensor *all[] = {&t[0], &t[1], &t[2], &t[3], &y, &q3, &mbad, &mint, &q_odd, &y_odd};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

/* The backward kernel against central differences of the forward kernel
 * (FP64), for every input and output the cases use; the trainer-level
 * checks are in tests/train/test_backward_fd.c. */
static double attn_loss(const attn_case *ac, tx_tensor *t, const tx_tensor *gy,
                        const tx_tensor *gpk, const tx_tensor *gqk)
{
    const teexec_dtype D = TEEXEC_DTYPE_DOUBLE;
    int64_t T = ac->past + ac->lk;
    int64_t pkd[4] = {ac->b, ac->hkv, T, ac->d}, qkd[4] = {ac->b, ac->hq, ac->lq, T};
    tx_tensor y = kt_alloc(D, gy->rank, gy->dims), pk = kt_alloc(D, 4, pkd);
    tx_tensor qk = kt_alloc(D, 4, qkd);
    tx_attention_params p = {ac->rank3 ? ac->hq : 0,
                             ac->rank3 ? ac->hkv : 0,
                             ac->causal,
                             ac->has_scale,
                             ac->scale,
                             ac->softcap};
    tx_attention_inputs in = {&t[0],
                              &t[1],
                              &t[2],
                              ac->mask ? &t[3] : NULL,
                              ac->past ? &t[4] : NULL,
                              ac->past ? &t[5] : NULL};
    tx_attention_outputs out = {&y, &pk, NULL, &qk};
    kt_ok(tx_cpu_attention(&p, &in, &out));
    double l = dot(&y, gy) + dot(&pk, gpk) + dot(&qk, gqk);
    tx_tensor_release(&y);
    tx_tensor_release(&pk);
    tx_tensor_release(&qk);
    return l;
}

static void attention_backward_fd(void **state)
{
    (void)state;
    kt_seed(147);
    const teexec_dtype D = TEEXEC_DTYPE_DOUBLE;
    for (size_t ci = 0; ci < sizeof ATTN_CASES / sizeof ATTN_CASES[0]; ci++) {
        const attn_case *ac = &ATTN_CASES[ci];
        tx_tensor t[6];
        attn_tensors(ac, D, t);
        int64_t T = ac->past + ac->lk;
        int64_t yd4[4] = {ac->b, ac->hq, ac->lq, ac->dv}, yd3[3] = {ac->b, ac->lq, ac->hq * ac->dv};
        int64_t pkd[4] = {ac->b, ac->hkv, T, ac->d}, qkd[4] = {ac->b, ac->hq, ac->lq, T};
        tx_tensor gy = ac->rank3 ? kt_random(D, 3, yd3, -1, 1) : kt_random(D, 4, yd4, -1, 1);
        tx_tensor gpk = kt_random(D, 4, pkd, -1, 1), gqk = kt_random(D, 4, qkd, -1, 1);
        tx_tensor g[6];
        memset(g, 0, sizeof g);
        for (int i = 0; i < 6; i++)
            if (t[i].data && (i != 3 || ac->mask == 2)) g[i] = kt_alloc(D, t[i].rank, t[i].dims);
        tx_attention_params p = {ac->rank3 ? ac->hq : 0,
                                 ac->rank3 ? ac->hkv : 0,
                                 ac->causal,
                                 ac->has_scale,
                                 ac->scale,
                                 ac->softcap};
        tx_attention_inputs in = {&t[0],
                                  &t[1],
                                  &t[2],
                                  ac->mask ? &t[3] : NULL,
                                  ac->past ? &t[4] : NULL,
                                  ac->past ? &t[5] : NULL};
        tx_attention_grads gr = {&gy,
                                 &gpk,
                                 NULL,
                                 &gqk,
                                 &g[0],
                                 &g[1],
                                 &g[2],
                                 ac->mask == 2 ? &g[3] : NULL,
                                 ac->past ? &g[4] : NULL,
                                 ac->past ? &g[5] : NULL};
        kt_ok(tx_cpu_attention_backward(&p, &in, &gr));
        for (int i = 0; i < 6; i++) {
            if (!g[i].data) continue;
            double *x = t[i].data, num = 0, den = 0;
            for (size_t e = 0; e < t[i].numel; e++) {
                double x0 = x[e], h = 1e-6;
                x[e] = x0 + h;
                double lp = attn_loss(ac, t, &gy, &gpk, &gqk);
                x[e] = x0 - h;
                double lm = attn_loss(ac, t, &gy, &gpk, &gqk);
                x[e] = x0;
                double fd = (lp - lm) / (2 * h), an = ((double *)g[i].data)[e];
                num += (fd - an) * (fd - an);
                den += fd * fd;
            }
            assert_true(den > 0);
            if (!(sqrt(num / den) < 1e-7))
                fail_msg("case %zu input %d: rel %g", ci, i, sqrt(num / den));
        }
        for (int i = 0; i < 6; i++) {
            tx_tensor_release(&t[i]);
            tx_tensor_release(&g[i]);
        }
        tx_tensor_release(&gy);
        tx_tensor_release(&gpk);
        tx_tensor_release(&gqk);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conv_against_definition), cmocka_unit_test(conv_errors),
        cmocka_unit_test(conv_backward_adjoint),   cmocka_unit_test(gather_nd_cases),
        cmocka_unit_test(rms_norm_cases),          cmocka_unit_test(attention_against_definition),
        cmocka_unit_test(attention_edges),         cmocka_unit_test(attention_backward_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
