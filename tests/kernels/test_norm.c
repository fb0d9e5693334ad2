/* Tests for softmax.c and layernorm.c against FP64 references. */
#include "kt_util.h"

/* Reference softmax over the elements of x at flat positions
 * base + t * step, t < n. */
static void ref_softmax_group(const tx_tensor *x, size_t base, size_t step, size_t n, bool lg,
                              double *ref)
{
    double mx = -INFINITY, sum = 0;
    for (size_t t = 0; t < n; t++) mx = fmax(mx, kt_get(x, base + t * step));
    for (size_t t = 0; t < n; t++) sum += exp(kt_get(x, base + t * step) - mx);
    for (size_t t = 0; t < n; t++) {
        double v = kt_get(x, base + t * step);
        ref[base + t * step] = lg ? v - mx - log(sum) : exp(v - mx) / sum;
    }
}

static void softmax_axes_and_modes(void **state)
{
    (void)state;
    teexec_dtype dts[] = KT_FLOAT_DTYPES;
    int64_t dims[] = {2, 3, 4, 5};
    kt_seed(31);
    for (size_t d = 0; d < 4; d++)
        for (int lg = 0; lg < 2; lg++)
            for (int legacy = 0; legacy < 2; legacy++)
                for (int64_t axis = -4; axis < 4; axis++) {
                    tx_tensor x = kt_random(dts[d], 4, dims, -5, 5);
                    tx_tensor y = kt_alloc(dts[d], 4, dims);
                    teexec_status *st = lg ? tx_cpu_log_softmax(&x, axis, legacy, &y)
                                           : tx_cpu_softmax(&x, axis, legacy, &y);
                    kt_ok(st);
                    double ref[120];
                    int64_t ax = axis < 0 ? axis + 4 : axis;
                    size_t outer = 1, n = 1, inner = 1;
                    for (int64_t i = 0; i < ax; i++) outer *= (size_t)dims[i];
                    if (legacy) {
                        for (int64_t i = ax; i < 4; i++) n *= (size_t)dims[i];
                    } else {
                        n = (size_t)dims[ax];
                        for (int64_t i = ax + 1; i < 4; i++) inner *= (size_t)dims[i];
                    }
                    for (size_t o = 0; o < outer; o++)
                        for (size_t j = 0; j < inner; j++)
                            ref_softmax_group(&x, o * n * inner + j, inner, n, lg, ref);
                    for (size_t i = 0; i < 120; i++) ref[i] = kt_round_to(dts[d], ref[i]);
                    /* log-softmax values are differences of O(5) numbers:
                     * allow an absolute error of a few ulps of those */
                    double atol = lg ? (dts[d] == TEEXEC_DTYPE_DOUBLE ? 1e-13 : 10 * kt_rtol(dts[d])) : 1e-7;
                    kt_expect_close(&y, ref, kt_rtol(dts[d]) * 4, atol);
                    tx_tensor_release(&x);
                    tx_tensor_release(&y);
                }
}

static void softmax_edges(void **state)
{
    (void)state;
    int64_t d[] = {2, 3};
    double v[] = {1000, 1000, 1000, -INFINITY, 0, -INFINITY};
    tx_tensor x = kt_from(TEEXEC_DTYPE_FLOAT, 2, d, v), y = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, d);
    kt_ok(tx_cpu_softmax(&x, -1, false, &y));
    double w[] = {1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 1, 0};
    kt_expect_close(&y, w, 1e-6, 0);
    /* in place */
    kt_ok(tx_cpu_softmax(&x, 1, false, &x));
    kt_expect_close(&x, w, 1e-6, 0);
    /* scalar: softmax 1 */
    tx_tensor s = kt_scalar(TEEXEC_DTYPE_DOUBLE, 3.0), sy = kt_alloc(TEEXEC_DTYPE_DOUBLE, 0, NULL);
    kt_ok(tx_cpu_softmax(&s, -1, false, &sy));
    assert_true(kt_get(&sy, 0) == 1.0);
    kt_err(tx_cpu_softmax(&y, 2, false, &y), TEEXEC_ERR_INVALID_ARGUMENT, "axis");
    tx_tensor xi = kt_alloc(TEEXEC_DTYPE_INT32, 2, d), yi = kt_alloc(TEEXEC_DTYPE_INT32, 2, d);
    kt_err(tx_cpu_softmax(&xi, 1, false, &yi), TEEXEC_ERR_UNSUPPORTED, "Softmax: dtype int32");
    int64_t e[] = {0, 3};
    tx_tensor ex = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, e), ey = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, e);
    kt_ok(tx_cpu_log_softmax(&ex, 1, false, &ey));
    tx_tensor *all[] = {&x, &y, &s, &sy, &xi, &yi, &ex, &ey};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void layernorm_vs_reference(void **state)
{
    (void)state;
    teexec_dtype dts[] = KT_FLOAT_DTYPES;
    int64_t dims[] = {2, 3, 8};
    kt_seed(32);
    for (size_t d = 0; d < 4; d++)
        for (int64_t axis = -3; axis < 3; axis++)
            for (int variant = 0; variant < 3; variant++) {
                int64_t ax = axis < 0 ? axis + 3 : axis;
                /* variant 0: full-shape scale + bias; 1: scale broadcast
                 * (last dim only), no bias; 2: scalar-ish scale [1] */
                tx_shape norm = {.rank = (int32_t)(3 - ax)};
                for (int32_t i = 0; i < norm.rank; i++) norm.dims[i] = dims[ax + i];
                tx_tensor sc, bi = {0};
                if (variant == 0) {
                    sc = kt_random(dts[d], norm.rank, norm.dims, 0.5, 1.5);
                    bi = kt_random(dts[d], norm.rank, norm.dims, -1, 1);
                } else if (variant == 1) {
                    int64_t last[] = {8};
                    sc = kt_random(dts[d], 1, last, 0.5, 1.5);
                } else {
                    int64_t one[] = {1};
                    sc = kt_random(dts[d], 1, one, 0.5, 1.5);
                }
                tx_tensor x = kt_random(dts[d], 3, dims, -3, 3), y = kt_alloc(dts[d], 3, dims);
                int64_t sd[3] = {dims[0], dims[1], dims[2]};
                for (int64_t i = ax; i < 3; i++) sd[i] = 1;
                tx_tensor mean = kt_alloc(TEEXEC_DTYPE_FLOAT, 3, sd), inv = kt_alloc(TEEXEC_DTYPE_FLOAT, 3, sd);
                kt_ok(tx_cpu_layer_norm(&x, &sc, variant == 0 ? &bi : NULL, axis, 1e-5f, 1, &y,
                                        &mean, &inv));
                size_t n = 1, outer = 1;
                for (int64_t i = ax; i < 3; i++) n *= (size_t)dims[i];
                for (int64_t i = 0; i < ax; i++) outer *= (size_t)dims[i];
                double ref[48], rm[48], ri[48];
                for (size_t o = 0; o < outer; o++) {
                    double mu = 0, var = 0;
                    for (size_t i = 0; i < n; i++) mu += kt_get(&x, o * n + i);
                    mu /= (double)n;
                    for (size_t i = 0; i < n; i++) var += pow(kt_get(&x, o * n + i) - mu, 2);
                    var /= (double)n;
                    double is = 1 / sqrt(var + 1e-5);
                    rm[o] = kt_round_to(TEEXEC_DTYPE_FLOAT, mu);
                    ri[o] = kt_round_to(TEEXEC_DTYPE_FLOAT, is);
                    for (size_t i = 0; i < n; i++) {
                        double s = variant == 0 ? kt_get(&sc, i)
                                   : variant == 1 ? kt_get(&sc, i % 8)
                                                  : kt_get(&sc, 0);
                        double b = variant == 0 ? kt_get(&bi, i) : 0;
                        ref[o * n + i] = kt_round_to(dts[d], (kt_get(&x, o * n + i) - mu) * is * s + b);
                    }
                }
                kt_expect_close(&y, ref, kt_rtol(dts[d]) * 4, 1e-5);
                kt_expect_close(&mean, rm, 1e-6, 1e-7);
                kt_expect_close(&inv, ri, 1e-6, 0);
                tx_tensor *all[] = {&sc, &bi, &x, &y, &mean, &inv};
                for (size_t i = 0; i < 6; i++) tx_tensor_release(all[i]);
            }
}

static void layernorm_refusals(void **state)
{
    (void)state;
    int64_t dims[] = {2, 4}, bad[] = {3}, four[] = {4};
    tx_tensor x = kt_random(TEEXEC_DTYPE_FLOAT, 2, dims, -1, 1), y = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, dims);
    tx_tensor sb = kt_random(TEEXEC_DTYPE_FLOAT, 1, bad, -1, 1);
    kt_err(tx_cpu_layer_norm(&x, &sb, NULL, -1, 1e-5f, 1, &y, NULL, NULL),
           TEEXEC_ERR_INVALID_ARGUMENT, "Scale");
    tx_tensor s4 = kt_random(TEEXEC_DTYPE_DOUBLE, 1, four, -1, 1);
    kt_err(tx_cpu_layer_norm(&x, &s4, NULL, -1, 1e-5f, 1, &y, NULL, NULL),
           TEEXEC_ERR_INVALID_ARGUMENT, "dtype");
    kt_err(tx_cpu_layer_norm(&x, &s4, NULL, 2, 1e-5f, 1, &y, NULL, NULL),
           TEEXEC_ERR_INVALID_ARGUMENT, "axis");
    tx_tensor m = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, four);
    tx_tensor s = kt_random(TEEXEC_DTYPE_FLOAT, 1, four, -1, 1);
    kt_err(tx_cpu_layer_norm(&x, &s, NULL, -1, 1e-5f, 1, &y, &m, NULL),
           TEEXEC_ERR_INVALID_ARGUMENT, "Mean");
    tx_tensor *all[] = {&x, &y, &sb, &s4, &m, &s};
    for (size_t i = 0; i < 6; i++) tx_tensor_release(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(softmax_axes_and_modes), cmocka_unit_test(softmax_edges),
        cmocka_unit_test(layernorm_vs_reference), cmocka_unit_test(layernorm_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
