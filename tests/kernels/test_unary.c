/* Tests for kernels/cpu/elementwise_unary.c against FP64 references. */
#include "kt_util.h"

#include "kernels/cpu/fastmath.h"

static double ref_unary(tx_unary_op op, double x, double alpha)
{
    switch (op) {
    case TX_UNARY_NEG: return -x;
    case TX_UNARY_ABS: return fabs(x);
    case TX_UNARY_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case TX_UNARY_RELU: return x > 0 ? x : 0;
    case TX_UNARY_SQRT: return sqrt(x);
    case TX_UNARY_RECIPROCAL: return 1 / x;
    case TX_UNARY_EXP: return exp(x);
    case TX_UNARY_LOG: return log(x);
    case TX_UNARY_ERF: return erf(x);
    case TX_UNARY_TANH: return tanh(x);
    case TX_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case TX_UNARY_LEAKY_RELU: return x < 0 ? alpha * x : x;
    case TX_UNARY_ELU: return x < 0 ? alpha * (exp(x) - 1) : x;
    case TX_UNARY_SOFTPLUS: return log(1 + exp(x));
    case TX_UNARY_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case TX_UNARY_GELU_TANH:
        return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case TX_UNARY_FLOOR: return floor(x);
    case TX_UNARY_CEIL: return ceil(x);
    case TX_UNARY_ROUND: return nearbyint(x);
    case TX_UNARY_SIN: return sin(x);
    case TX_UNARY_COS: return cos(x);
    default: return NAN;
    }
}

static void all_float_ops_random(void **state)
{
    (void)state;
    teexec_dtype dts[] = KT_FLOAT_DTYPES;
    int64_t dims[] = {3, 5, 37}; /* odd sizes cross the block boundary poorly on purpose */
    for (size_t d = 0; d < 4; d++) {
        for (int op = 0; op < TX_UNARY_COUNT; op++) {
            kt_seed(100 + (uint64_t)op * 7 + d);
            bool positive = op == TX_UNARY_SQRT || op == TX_UNARY_LOG;
            tx_tensor x = kt_random(dts[d], 3, dims, positive ? 0.05 : -4, 4);
            tx_tensor y = kt_alloc(dts[d], 3, dims);
            float alpha = op == TX_UNARY_ELU ? 0.7f : 0.1f;
            kt_ok(tx_cpu_unary((tx_unary_op)op, &x, alpha, &y));
            double *ref = malloc(x.numel * sizeof(double));
            for (size_t i = 0; i < x.numel; i++)
                ref[i] = kt_round_to(dts[d], ref_unary((tx_unary_op)op, kt_get(&x, i), alpha));
            /* fp32 math vs fp64 reference: a few ulps for transcendental ops */
            double rtol = dts[d] == TEEXEC_DTYPE_FLOAT ? 4e-6 : kt_rtol(dts[d]);
            double atol = dts[d] == TEEXEC_DTYPE_DOUBLE ? 1e-14 : 1e-6;
            kt_expect_close(&y, ref, rtol, atol);
            free(ref);
            tx_tensor_release(&x);
            tx_tensor_release(&y);
        }
    }
}

static void hand_checked_values(void **state)
{
    (void)state;
    int64_t d5[] = {6};
    double rv[] = {0.5, 1.5, 2.5, -0.5, -2.5, 3.7};
    tx_tensor x = kt_from(TEEXEC_DTYPE_FLOAT, 1, d5, rv);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, d5);
    kt_ok(tx_cpu_round(&x, &y));
    double want[] = {0, 2, 2, -0.0, -2, 4};
    kt_expect_close(&y, want, 0, 0);
    assert_true(signbit(kt_get(&y, 3))); /* -0.5 rounds to -0 */
    /* gelu(1) = 0.8413447460685429 exactly from erf */
    double one = 1.0;
    tx_tensor g = kt_from(TEEXEC_DTYPE_FLOAT, 0, NULL, &one), gy = kt_alloc(TEEXEC_DTYPE_FLOAT, 0, NULL);
    kt_ok(tx_cpu_gelu(&g, false, &gy));
    assert_true(fabs(kt_get(&gy, 0) - 0.8413447460685429) < 1e-7);
    kt_ok(tx_cpu_gelu(&g, true, &gy));
    assert_true(fabs(kt_get(&gy, 0) - 0.8411919906082768) < 1e-7);
    /* sigmoid and softplus far out: no overflow */
    double big[] = {-1000, 1000, 0, -20, 20, 88.5};
    tx_tensor b = kt_from(TEEXEC_DTYPE_FLOAT, 1, d5, big);
    kt_ok(tx_cpu_sigmoid(&b, &y));
    double ws[] = {0, 1, 0.5, 2.0611536e-9, 1, 1};
    kt_expect_close(&y, ws, 1e-6, 0);
    kt_ok(tx_cpu_softplus(&b, &y));
    double wp[] = {0, 1000, log(2.0), 2.0611536e-9, 20.000000002, 88.5};
    kt_expect_close(&y, wp, 1e-6, 0);
    tx_tensor_release(&x);
    tx_tensor_release(&y);
    tx_tensor_release(&g);
    tx_tensor_release(&gy);
    tx_tensor_release(&b);
}

static void integer_ops(void **state)
{
    (void)state;
    int64_t d[] = {5};
    double v[] = {-2147483648.0, -5, 0, 7, 2147483647.0};
    tx_tensor x = kt_from(TEEXEC_DTYPE_INT32, 1, d, v), y = kt_alloc(TEEXEC_DTYPE_INT32, 1, d);
    kt_ok(tx_cpu_neg(&x, &y));
    int64_t wn[] = {INT32_MIN, 5, 0, -7, -2147483647}; /* INT_MIN wraps to itself */
    kt_expect_exact_i(&y, wn);
    kt_ok(tx_cpu_abs(&x, &y));
    int64_t wa[] = {INT32_MIN, 5, 0, 7, 2147483647};
    kt_expect_exact_i(&y, wa);
    kt_ok(tx_cpu_relu(&x, &y));
    int64_t wr[] = {0, 0, 0, 7, 2147483647};
    kt_expect_exact_i(&y, wr);
    kt_ok(tx_cpu_sign(&x, &y));
    int64_t wsg[] = {-1, -1, 0, 1, 1};
    kt_expect_exact_i(&y, wsg);
    /* unsigned: Neg is not defined, Abs/Sign are */
    double uv[] = {0, 1, 200, 255, 3};
    tx_tensor u = kt_from(TEEXEC_DTYPE_UINT8, 1, d, uv), uy = kt_alloc(TEEXEC_DTYPE_UINT8, 1, d);
    kt_err(tx_cpu_neg(&u, &uy), TEEXEC_ERR_UNSUPPORTED, "uint8");
    kt_ok(tx_cpu_sign(&u, &uy));
    int64_t wus[] = {0, 1, 1, 1, 1};
    kt_expect_exact_i(&uy, wus);
    /* float-only ops refuse ints with the op and dtype named */
    kt_err(tx_cpu_sqrt(&x, &y), TEEXEC_ERR_UNSUPPORTED, "Sqrt: dtype int32");
    kt_err(tx_cpu_gelu(&x, false, &y), TEEXEC_ERR_UNSUPPORTED, "Gelu");
    tx_tensor_release(&x);
    tx_tensor_release(&y);
    tx_tensor_release(&u);
    tx_tensor_release(&uy);
}

static void clip_not_isnan_isinf(void **state)
{
    (void)state;
    int64_t d[] = {6};
    double v[] = {-5, -1, 0, 1, 5, NAN};
    tx_tensor x = kt_from(TEEXEC_DTYPE_FLOAT16, 1, d, v), y = kt_alloc(TEEXEC_DTYPE_FLOAT16, 1, d);
    tx_tensor lo = kt_scalar(TEEXEC_DTYPE_FLOAT16, -2), hi = kt_scalar(TEEXEC_DTYPE_FLOAT16, 2);
    kt_ok(tx_cpu_clip(&x, &lo, &hi, &y));
    double w[] = {-2, -1, 0, 1, 2, NAN};
    kt_expect_close(&y, w, 0, 0);
    kt_ok(tx_cpu_clip(&x, NULL, &hi, &y));
    double w2[] = {-5, -1, 0, 1, 2, NAN};
    kt_expect_close(&y, w2, 0, 0);
    /* integer clip */
    double iv[] = {-100, -1, 0, 1, 100, 7};
    tx_tensor xi = kt_from(TEEXEC_DTYPE_INT64, 1, d, iv), yi = kt_alloc(TEEXEC_DTYPE_INT64, 1, d);
    tx_tensor ilo = kt_scalar(TEEXEC_DTYPE_INT64, -3);
    kt_ok(tx_cpu_clip(&xi, &ilo, NULL, &yi));
    int64_t wi[] = {-3, -1, 0, 1, 100, 7};
    kt_expect_exact_i(&yi, wi);
    /* bound of the wrong dtype */
    kt_err(tx_cpu_clip(&xi, &lo, NULL, &yi), TEEXEC_ERR_INVALID_ARGUMENT, "min");

    double fv[] = {-INFINITY, -1, NAN, 0, INFINITY, 3};
    tx_tensor f = kt_from(TEEXEC_DTYPE_BFLOAT16, 1, d, fv), b = kt_alloc(TEEXEC_DTYPE_BOOL, 1, d);
    kt_ok(tx_cpu_isnan(&f, &b));
    int64_t wn[] = {0, 0, 1, 0, 0, 0};
    kt_expect_exact_i(&b, wn);
    kt_ok(tx_cpu_isinf(&f, true, false, &b));
    int64_t wpos[] = {0, 0, 0, 0, 1, 0};
    kt_expect_exact_i(&b, wpos);
    kt_ok(tx_cpu_isinf(&f, true, true, &b));
    int64_t wboth[] = {1, 0, 0, 0, 1, 0};
    kt_expect_exact_i(&b, wboth);
    tx_tensor nb = kt_alloc(TEEXEC_DTYPE_BOOL, 1, d);
    kt_ok(tx_cpu_not(&b, &nb));
    int64_t wnot[] = {0, 1, 1, 1, 0, 1};
    kt_expect_exact_i(&nb, wnot);
    kt_err(tx_cpu_not(&f, &nb), TEEXEC_ERR_UNSUPPORTED, "Not");
    tx_tensor *all[] = {&x, &y, &lo, &hi, &xi, &yi, &ilo, &f, &b, &nb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void shape_checks_and_empty(void **state)
{
    (void)state;
    int64_t d1[] = {2, 3}, d2[] = {3, 2}, d0[] = {0, 4};
    tx_tensor x = kt_random(TEEXEC_DTYPE_FLOAT, 2, d1, -1, 1);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, d2);
    kt_err(tx_cpu_exp(&x, &y), TEEXEC_ERR_INVALID_ARGUMENT, "shape");
    tx_tensor yd = kt_alloc(TEEXEC_DTYPE_DOUBLE, 2, d1);
    kt_err(tx_cpu_exp(&x, &yd), TEEXEC_ERR_INVALID_ARGUMENT, "dtype");
    kt_err(tx_cpu_exp(NULL, &yd), TEEXEC_ERR_INVALID_ARGUMENT, "missing");
    tx_tensor e = kt_alloc(TEEXEC_DTYPE_FLOAT16, 2, d0), ey = kt_alloc(TEEXEC_DTYPE_FLOAT16, 2, d0);
    kt_ok(tx_cpu_tanh(&e, &ey));
    /* in place */
    tx_tensor c;
    kt_ok(tx_tensor_clone(&x, &c));
    kt_ok(tx_cpu_neg(&c, &c));
    for (size_t i = 0; i < 6; i++) assert_true(kt_get(&c, i) == -kt_get(&x, i));
    tx_tensor *all[] = {&x, &y, &yd, &e, &ey, &c};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

/* The branch-free float exp/erf/tanh over their whole useful range, dense
 * sampling, against double libm: relative error under 4e-7 where the result
 * is a normal float, exact limits and NaN. */
static void fast_math_accuracy(void **state)
{
    (void)state;
    double worst[3] = {0, 0, 0};
    for (int f = 0; f < 3; f++) {
        double lo = f == 0 ? -110 : f == 1 ? -6 : -25, hi = f == 0 ? 90 : -lo;
        for (int i = 0; i <= 2000000; i++) {
            float x = (float)(lo + (hi - lo) * i / 2000000.0);
            double ref = f == 0 ? exp((double)x) : f == 1 ? erf((double)x) : tanh((double)x);
            float got = f == 0 ? tx_expf_fast(x) : f == 1 ? tx_erff_fast(x) : tx_tanhf_fast(x);
            if (fabs(ref) > 3.4028234663852886e38) {
                if (!isinf(got)) fail_msg("f%d(%g): got %g, expected inf", f, x, got);
                continue;
            }
            if (fabs(ref) < 1.1754943508222875e-38) {
                if (fabs(got - ref) > 1.5e-45) fail_msg("f%d(%g): got %g, expected %g", f, x, got, ref);
                continue;
            }
            double rel = fabs(got - ref) / fabs(ref);
            if (rel > worst[f]) worst[f] = rel;
            if (rel > 4e-7) fail_msg("f%d(%.9g): got %.9g, expected %.9g (rel %g)", f, x, got, ref, rel);
        }
    }
    assert_true(isnan(tx_expf_fast(NAN)) && isnan(tx_erff_fast(NAN)) && isnan(tx_tanhf_fast(NAN)));
    assert_true(tx_expf_fast(-INFINITY) == 0 && isinf(tx_expf_fast(INFINITY)));
    assert_true(tx_erff_fast(INFINITY) == 1 && tx_erff_fast(-INFINITY) == -1);
    assert_true(tx_tanhf_fast(INFINITY) == 1 && tx_tanhf_fast(-1e30f) == -1);
    assert_true(tx_erff_fast(0.0f) == 0 && tx_tanhf_fast(0.0f) == 0 && tx_expf_fast(0.0f) == 1);
    print_message("worst relative errors: exp %.3g erf %.3g tanh %.3g\n", worst[0], worst[1],
                  worst[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_float_ops_random), cmocka_unit_test(hand_checked_values),
        cmocka_unit_test(integer_ops),          cmocka_unit_test(clip_not_isnan_isinf),
        cmocka_unit_test(shape_checks_and_empty), cmocka_unit_test(fast_math_accuracy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
