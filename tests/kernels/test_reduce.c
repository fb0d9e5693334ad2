/* Tests for reduce.c, argmax_topk.c and cumsum.c against naive references. */
#include "kt_util.h"

static void reduce_vs_reference(void **state)
{
    (void)state;
    teexec_dtype dts[] = {TEEXEC_DTYPE_FLOAT, TEEXEC_DTYPE_FLOAT16, TEEXEC_DTYPE_BFLOAT16,
                          TEEXEC_DTYPE_DOUBLE, TEEXEC_DTYPE_INT32, TEEXEC_DTYPE_INT64,
                          TEEXEC_DTYPE_UINT8};
    int64_t dims[] = {3, 4, 5};
    /* axis sets as bit masks over the 3 axes, given with negative numbers */
    int64_t axes_lists[][3] = {{-1}, {0}, {1, -1}, {0, 2}, {0, 1, 2}, {-2}};
    size_t naxes[] = {1, 1, 2, 2, 3, 1};
    kt_seed(41);
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        bool fl = kt_is_float(dts[d]);
        for (int op = 0; op < TX_REDUCE_COUNT; op++) {
            for (size_t a = 0; a < 7; a++) /* 6 lists + "all" via empty axes */
                for (int keep = 0; keep < 2; keep++) {
                    size_t na = a < 6 ? naxes[a] : 0;
                    const int64_t *ax = a < 6 ? axes_lists[a] : NULL;
                    bool positive = op == TX_REDUCE_LOG_SUM || op == TX_REDUCE_PROD;
                    tx_tensor x = kt_random(dts[d], 3, dims, positive ? (fl ? 0.5 : 1) : (fl ? -2 : 0),
                                            positive ? (fl ? 1.5 : 2) : (fl ? 2 : 5));
                    tx_shape xs = tx_shape_of(&x), ys;
                    bool red[3];
                    kt_ok(tx_shape_reduce(&xs, ax, na, keep, false, &ys, red));
                    tx_tensor y = kt_alloc(dts[d], ys.rank, ys.dims);
                    kt_ok(tx_cpu_reduce((tx_reduce_op)op, &x, ax, na, keep, false, &y));
                    /* reference: for each output (keepdims layout), walk all inputs */
                    int64_t kd[3];
                    for (int i = 0; i < 3; i++) kd[i] = red[i] ? 1 : dims[i];
                    double ref[60];
                    for (size_t o = 0; o < y.numel; o++) {
                        int64_t oi[3];
                        kt_unravel(o, 3, kd, oi);
                        double acc = op == TX_REDUCE_PROD ? 1 : op == TX_REDUCE_MAX ? -INFINITY
                                     : op == TX_REDUCE_MIN ? INFINITY : 0;
                        double mx = -INFINITY;
                        int cnt = 0;
                        for (size_t f = 0; f < x.numel; f++) {
                            int64_t xi[3];
                            kt_unravel(f, 3, dims, xi);
                            bool mine = true;
                            for (int i = 0; i < 3; i++)
                                if (!red[i] && xi[i] != oi[i]) mine = false;
                            if (!mine) continue;
                            double v = kt_get(&x, f);
                            cnt++;
                            mx = fmax(mx, v);
                            switch (op) {
                            case TX_REDUCE_SUM: case TX_REDUCE_MEAN: case TX_REDUCE_LOG_SUM: acc += v; break;
                            case TX_REDUCE_SUM_SQUARE: case TX_REDUCE_L2: acc += v * v; break;
                            case TX_REDUCE_L1: acc += fabs(v); break;
                            case TX_REDUCE_PROD: acc *= v; break;
                            case TX_REDUCE_MAX: acc = fmax(acc, v); break;
                            case TX_REDUCE_MIN: acc = fmin(acc, v); break;
                            default: break;
                            }
                        }
                        if (op == TX_REDUCE_LOG_SUM_EXP) {
                            acc = 0;
                            for (size_t f = 0; f < x.numel; f++) {
                                int64_t xi[3];
                                kt_unravel(f, 3, dims, xi);
                                bool mine = true;
                                for (int i = 0; i < 3; i++)
                                    if (!red[i] && xi[i] != oi[i]) mine = false;
                                if (mine) acc += exp(kt_get(&x, f) - mx);
                            }
                            acc = log(acc) + mx;
                        }
                        if (op == TX_REDUCE_MEAN) acc = fl ? acc / cnt : trunc(acc / cnt);
                        if (op == TX_REDUCE_L2) acc = sqrt(acc);
                        if (op == TX_REDUCE_LOG_SUM) acc = log(acc);
                        if (!fl) acc = trunc(acc);
                        ref[o] = kt_round_to(dts[d], acc);
                    }
                    kt_expect_close(&y, ref, fl ? kt_rtol(dts[d]) * 4 : 0, fl ? 1e-6 : 0);
                    tx_tensor_release(&x);
                    tx_tensor_release(&y);
                }
        }
    }
}

static void reduce_edges(void **state)
{
    (void)state;
    /* empty reduction: identities */
    int64_t d0[] = {2, 0}, d2[] = {2};
    tx_tensor e = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, d0), y = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, d2);
    int64_t ax1[] = {1};
    double w_sum[] = {0, 0}, w_prod[] = {1, 1}, w_max[] = {-INFINITY, -INFINITY},
           w_min[] = {INFINITY, INFINITY}, w_mean[] = {NAN, NAN};
    kt_ok(tx_cpu_reduce(TX_REDUCE_SUM, &e, ax1, 1, false, false, &y));
    kt_expect_close(&y, w_sum, 0, 0);
    kt_ok(tx_cpu_reduce(TX_REDUCE_PROD, &e, ax1, 1, false, false, &y));
    kt_expect_close(&y, w_prod, 0, 0);
    kt_ok(tx_cpu_reduce(TX_REDUCE_MAX, &e, ax1, 1, false, false, &y));
    kt_expect_close(&y, w_max, 0, 0);
    kt_ok(tx_cpu_reduce(TX_REDUCE_MIN, &e, ax1, 1, false, false, &y));
    kt_expect_close(&y, w_min, 0, 0);
    kt_ok(tx_cpu_reduce(TX_REDUCE_MEAN, &e, ax1, 1, false, false, &y));
    kt_expect_close(&y, w_mean, 0, 0);
    kt_ok(tx_cpu_reduce(TX_REDUCE_LOG_SUM_EXP, &e, ax1, 1, false, false, &y));
    kt_expect_close(&y, w_max, 0, 0);
    /* noop_with_empty_axes: identity */
    int64_t d3[] = {3};
    double v[] = {1, NAN, -2};
    tx_tensor x = kt_from(TEEXEC_DTYPE_FLOAT, 1, d3, v), y3 = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, d3);
    kt_ok(tx_cpu_reduce(TX_REDUCE_SUM, &x, NULL, 0, true, true, &y3));
    kt_expect_close(&y3, v, 0, 0);
    /* NaN propagates through Max */
    tx_tensor s = kt_alloc(TEEXEC_DTYPE_FLOAT, 0, NULL);
    kt_ok(tx_cpu_reduce(TX_REDUCE_MAX, &x, NULL, 0, false, false, &s));
    assert_true(isnan(kt_get(&s, 0)));
    /* int32 Max of nothing is INT32_MIN */
    tx_tensor ei = kt_alloc(TEEXEC_DTYPE_INT32, 2, d0), yi = kt_alloc(TEEXEC_DTYPE_INT32, 1, d2);
    kt_ok(tx_cpu_reduce(TX_REDUCE_MAX, &ei, ax1, 1, false, false, &yi));
    int64_t wi[] = {INT32_MIN, INT32_MIN};
    kt_expect_exact_i(&yi, wi);
    /* refusals */
    kt_err(tx_cpu_reduce(TX_REDUCE_SUM, &x, ax1, 1, false, false, &y3), TEEXEC_ERR_INVALID_ARGUMENT,
           "axis");
    kt_err(tx_cpu_reduce(TX_REDUCE_SUM, &x, NULL, 0, true, false, &y3), TEEXEC_ERR_INVALID_ARGUMENT,
           "shape");
    tx_tensor b = kt_alloc(TEEXEC_DTYPE_BOOL, 1, d3), bs = kt_alloc(TEEXEC_DTYPE_BOOL, 0, NULL);
    kt_err(tx_cpu_reduce(TX_REDUCE_SUM, &b, NULL, 0, false, false, &bs), TEEXEC_ERR_UNSUPPORTED,
           "ReduceSum: dtype bool");
    ((uint8_t *)b.data)[1] = 1;
    kt_ok(tx_cpu_reduce(TX_REDUCE_MAX, &b, NULL, 0, false, false, &bs));
    assert_int_equal(((uint8_t *)bs.data)[0], 1);
    tx_tensor *all[] = {&e, &y, &x, &y3, &s, &ei, &yi, &b, &bs};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void argmax_argmin(void **state)
{
    (void)state;
    int64_t d[] = {2, 4};
    double v[] = {1, 3, 3, 0, 5, NAN, 5, 5};
    tx_tensor x = kt_from(TEEXEC_DTYPE_FLOAT, 2, d, v);
    int64_t dk[] = {2, 1}, dn[] = {2};
    tx_tensor yk = kt_alloc(TEEXEC_DTYPE_INT64, 2, dk), yn = kt_alloc(TEEXEC_DTYPE_INT64, 1, dn);
    kt_ok(tx_cpu_argmax(&x, -1, true, false, &yk));
    int64_t w1[] = {1, 1}; /* first of the ties; NaN is the largest */
    kt_expect_exact_i(&yk, w1);
    kt_ok(tx_cpu_argmax(&x, 1, false, true, &yn));
    int64_t w2[] = {2, 1};
    kt_expect_exact_i(&yn, w2);
    kt_ok(tx_cpu_argmin(&x, 1, false, true, &yn));
    int64_t w3[] = {3, 7 - 4}; /* last of the 5s */
    kt_expect_exact_i(&yn, w3);
    /* axis 0 on ints, random vs reference */
    kt_seed(42);
    int64_t d3[] = {5, 3, 4};
    tx_tensor xi = kt_random(TEEXEC_DTYPE_INT64, 3, d3, -3, 3);
    int64_t dy[] = {3, 4};
    tx_tensor yi = kt_alloc(TEEXEC_DTYPE_INT64, 2, dy);
    kt_ok(tx_cpu_argmax(&xi, 0, false, false, &yi));
    int64_t ref[12];
    for (size_t j = 0; j < 12; j++) {
        int64_t best = 0;
        for (int64_t i = 1; i < 5; i++)
            if (kt_geti(&xi, (size_t)i * 12 + j) > kt_geti(&xi, (size_t)best * 12 + j)) best = i;
        ref[j] = best;
    }
    kt_expect_exact_i(&yi, ref);
    kt_err(tx_cpu_argmax(&xi, 0, true, false, &yi), TEEXEC_ERR_INVALID_ARGUMENT, "shape");
    kt_err(tx_cpu_argmax(&xi, 0, false, false, &x), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    tx_tensor *all[] = {&x, &yk, &yn, &xi, &yi};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void topk_cases(void **state)
{
    (void)state;
    /* ONNX's test_top_k: X = arange(12).reshape(3,4), k = 3 */
    int64_t d[] = {3, 4}, dy[] = {3, 3};
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = i;
    tx_tensor x = kt_from(TEEXEC_DTYPE_FLOAT, 2, d, v);
    tx_tensor vals = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, dy), idx = kt_alloc(TEEXEC_DTYPE_INT64, 2, dy);
    kt_ok(tx_cpu_topk(&x, 3, -1, true, true, &vals, &idx));
    double wv[] = {3, 2, 1, 7, 6, 5, 11, 10, 9};
    int64_t wi[] = {3, 2, 1, 3, 2, 1, 3, 2, 1};
    kt_expect_close(&vals, wv, 0, 0);
    kt_expect_exact_i(&idx, wi);
    kt_ok(tx_cpu_topk(&x, 3, 1, false, true, &vals, &idx));
    double wv2[] = {0, 1, 2, 4, 5, 6, 8, 9, 10};
    int64_t wi2[] = {0, 1, 2, 0, 1, 2, 0, 1, 2};
    kt_expect_close(&vals, wv2, 0, 0);
    kt_expect_exact_i(&idx, wi2);
    /* ties keep index order, both directions; along axis 0 */
    int64_t dt[] = {5, 1}, dk[] = {3, 1};
    double tv[] = {2, 7, 2, 7, 2};
    tx_tensor t = kt_from(TEEXEC_DTYPE_INT32, 2, dt, tv);
    tx_tensor tvals = kt_alloc(TEEXEC_DTYPE_INT32, 2, dk), tidx = kt_alloc(TEEXEC_DTYPE_INT64, 2, dk);
    kt_ok(tx_cpu_topk(&t, 3, 0, true, true, &tvals, &tidx));
    int64_t wtv[] = {7, 7, 2}, wti[] = {1, 3, 0};
    kt_expect_exact_i(&tvals, wtv);
    kt_expect_exact_i(&tidx, wti);
    kt_ok(tx_cpu_topk(&t, 3, 0, false, true, &tvals, &tidx));
    int64_t wtv2[] = {2, 2, 2}, wti2[] = {0, 2, 4};
    kt_expect_exact_i(&tvals, wtv2);
    kt_expect_exact_i(&tidx, wti2);
    kt_err(tx_cpu_topk(&t, 6, 0, true, true, &tvals, &tidx), TEEXEC_ERR_INVALID_ARGUMENT, "k");
    kt_err(tx_cpu_topk(&t, 2, 0, true, true, &tvals, &tidx), TEEXEC_ERR_INVALID_ARGUMENT, "shape");
    tx_tensor *all[] = {&x, &vals, &idx, &t, &tvals, &tidx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void cumsum_cases(void **state)
{
    (void)state;
    /* ONNX's test_cumsum_1d_* : x = [1,2,3,4,5] */
    int64_t d[] = {5};
    double v[] = {1, 2, 3, 4, 5};
    tx_tensor x = kt_from(TEEXEC_DTYPE_DOUBLE, 1, d, v), y = kt_alloc(TEEXEC_DTYPE_DOUBLE, 1, d);
    double w[4][5] = {{1, 3, 6, 10, 15}, {0, 1, 3, 6, 10}, {15, 14, 12, 9, 5}, {14, 12, 9, 5, 0}};
    for (int m = 0; m < 4; m++) {
        kt_ok(tx_cpu_cumsum(&x, 0, m == 1 || m == 3, m >= 2, &y));
        kt_expect_close(&y, w[m], 0, 0);
    }
    /* random 3-D along each axis, float16 and int32 */
    kt_seed(43);
    int64_t d3[] = {3, 4, 5};
    teexec_dtype dts[] = {TEEXEC_DTYPE_FLOAT16, TEEXEC_DTYPE_INT32, TEEXEC_DTYPE_FLOAT};
    for (size_t dd = 0; dd < 3; dd++)
        for (int64_t axis = -3; axis < 3; axis++)
            for (int m = 0; m < 4; m++) {
                bool excl = m & 1, rev = m >> 1;
                tx_tensor a = kt_random(dts[dd], 3, d3, -4, 4), b = kt_alloc(dts[dd], 3, d3);
                kt_ok(tx_cpu_cumsum(&a, axis, excl, rev, &b));
                int64_t ax = axis < 0 ? axis + 3 : axis;
                double ref[60];
                for (size_t f = 0; f < 60; f++) {
                    int64_t idx[3];
                    kt_unravel(f, 3, d3, idx);
                    double s = 0;
                    for (int64_t t = 0; t < d3[ax]; t++) {
                        bool take = rev ? (excl ? t > idx[ax] : t >= idx[ax])
                                        : (excl ? t < idx[ax] : t <= idx[ax]);
                        if (!take) continue;
                        int64_t j[3] = {idx[0], idx[1], idx[2]};
                        j[ax] = t;
                        s += kt_get(&a, kt_ravel(3, d3, j));
                    }
                    ref[f] = kt_round_to(dts[dd], s);
                }
                kt_expect_close(&b, ref, kt_rtol(dts[dd]) * 2, 1e-6);
                tx_tensor_release(&a);
                tx_tensor_release(&b);
            }
    tx_tensor bb = kt_alloc(TEEXEC_DTYPE_BOOL, 1, d), by = kt_alloc(TEEXEC_DTYPE_BOOL, 1, d);
    kt_err(tx_cpu_cumsum(&bb, 0, false, false, &by), TEEXEC_ERR_UNSUPPORTED, "CumSum: dtype bool");
    kt_err(tx_cpu_cumsum(&x, 1, false, false, &y), TEEXEC_ERR_INVALID_ARGUMENT, "axis");
    tx_tensor *all[] = {&x, &y, &bb, &by};
    for (size_t i = 0; i < 4; i++) tx_tensor_release(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reduce_vs_reference), cmocka_unit_test(reduce_edges),
        cmocka_unit_test(argmax_argmin),       cmocka_unit_test(topk_cases),
        cmocka_unit_test(cumsum_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
