/* Tests for elementwise_binary.c, variadic.c and where.c: broadcasting
 * against index-arithmetic references, integer semantics, dtype refusal. */
#include "kt_util.h"

static double ref_arith(tx_binary_op op, double a, double b)
{
    switch (op) {
    case TX_BINARY_ADD: return a + b;
    case TX_BINARY_SUB: return a - b;
    case TX_BINARY_MUL: return a * b;
    case TX_BINARY_DIV: return a / b;
    case TX_BINARY_POW: return pow(a, b);
    case TX_BINARY_MIN: return a < b ? a : b;
    case TX_BINARY_MAX: return a > b ? a : b;
    case TX_BINARY_EQUAL: return a == b;
    case TX_BINARY_LESS: return a < b;
    case TX_BINARY_LESS_OR_EQUAL: return a <= b;
    case TX_BINARY_GREATER: return a > b;
    case TX_BINARY_GREATER_OR_EQUAL: return a >= b;
    case TX_BINARY_AND: return (a != 0) && (b != 0);
    case TX_BINARY_OR: return (a != 0) || (b != 0);
    case TX_BINARY_XOR: return (a != 0) != (b != 0);
    default: return NAN;
    }
}

/* shape pairs exercising same-shape, scalar, last-dim, middle and two-sided
 * broadcasting, plus an empty one */
typedef struct {
    int32_t ra, rb;
    int64_t a[4], b[4];
} pair;

static const pair pairs[] = {
    {3, 3, {2, 3, 600}, {2, 3, 600}}, /* long rows: several blocks */
    {3, 0, {2, 3, 4}, {0}},
    {0, 3, {0}, {2, 3, 4}},
    {3, 1, {2, 3, 4}, {4}},
    {3, 3, {2, 1, 4}, {1, 3, 1}},
    {2, 4, {3, 1}, {2, 1, 3, 5}},
    {3, 3, {2, 3, 1}, {2, 3, 700}},
    {2, 2, {0, 3}, {1, 3}},
};

static void check_op(tx_binary_op op, teexec_dtype dt, const pair *p, double lo, double hi)
{
    tx_tensor a = kt_random(dt, p->ra, p->a, lo, hi);
    tx_tensor b = kt_random(dt, p->rb, p->b, lo, hi);
    tx_shape sa = tx_shape_of(&a), sb = tx_shape_of(&b), so;
    kt_ok(tx_shape_broadcast2(&sa, &sb, &so));
    bool cmp = op >= TX_BINARY_EQUAL;
    teexec_dtype ydt = cmp ? TEEXEC_DTYPE_BOOL : dt;
    tx_tensor y = kt_alloc(ydt, so.rank, so.dims);
    kt_ok(tx_cpu_binary(op, &a, &b, &y));
    double *ref = malloc((y.numel + 1) * sizeof(double));
    int64_t idx[TX_MAX_RANK];
    for (size_t i = 0; i < y.numel; i++) {
        kt_unravel(i, so.rank, so.dims, idx);
        double va = kt_get(&a, kt_bcast_index(&a, so.rank, idx));
        double vb = kt_get(&b, kt_bcast_index(&b, so.rank, idx));
        ref[i] = cmp ? ref_arith(op, va, vb) : kt_round_to(dt, ref_arith(op, va, vb));
    }
    kt_expect_close(&y, ref, cmp ? 0 : kt_rtol(dt) * 2, cmp ? 0 : 1e-30);
    free(ref);
    tx_tensor_release(&a);
    tx_tensor_release(&b);
    tx_tensor_release(&y);
}

static void float_ops_broadcast(void **state)
{
    (void)state;
    teexec_dtype dts[] = KT_FLOAT_DTYPES;
    tx_binary_op ops[] = {TX_BINARY_ADD, TX_BINARY_SUB, TX_BINARY_MUL, TX_BINARY_DIV,
                          TX_BINARY_MIN, TX_BINARY_MAX, TX_BINARY_EQUAL, TX_BINARY_LESS,
                          TX_BINARY_GREATER, TX_BINARY_GREATER_OR_EQUAL};
    kt_seed(7);
    for (size_t d = 0; d < 4; d++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
            for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++)
                check_op(ops[o], dts[d], &pairs[p], -3, 3);
    /* Pow on positive bases */
    for (size_t d = 0; d < 4; d++)
        for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++)
            check_op(TX_BINARY_POW, dts[d], &pairs[p], 0.5, 2);
}

static void int_ops_broadcast(void **state)
{
    (void)state;
    teexec_dtype dts[] = {TEEXEC_DTYPE_INT32, TEEXEC_DTYPE_INT64, TEEXEC_DTYPE_UINT8,
                          TEEXEC_DTYPE_INT8, TEEXEC_DTYPE_UINT64};
    tx_binary_op ops[] = {TX_BINARY_ADD, TX_BINARY_MUL, TX_BINARY_MIN, TX_BINARY_MAX,
                          TX_BINARY_EQUAL, TX_BINARY_LESS, TX_BINARY_GREATER};
    kt_seed(8);
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
            for (size_t p = 1; p < sizeof pairs / sizeof *pairs; p++)
                check_op(ops[o], dts[d], &pairs[p], 0, 10);
    /* logical ops on bool */
    tx_binary_op lops[] = {TX_BINARY_AND, TX_BINARY_OR, TX_BINARY_XOR, TX_BINARY_EQUAL};
    for (size_t o = 0; o < 4; o++)
        for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++)
            check_op(lops[o], TEEXEC_DTYPE_BOOL, &pairs[p], 0, 1);
}

static void integer_semantics(void **state)
{
    (void)state;
    int64_t d[] = {8};
    double av[] = {7, -7, 7, -7, 5, -2147483648.0, 2147483647, 3};
    double bv[] = {2, 2, -2, -2, 0, -1, 1, 0};
    tx_tensor a = kt_from(TEEXEC_DTYPE_INT32, 1, d, av), b = kt_from(TEEXEC_DTYPE_INT32, 1, d, bv);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_INT32, 1, d);
    kt_ok(tx_cpu_div(&a, &b, &y));
    /* truncation toward zero; x/0 = 0; INT_MIN/-1 wraps to INT_MIN */
    int64_t wd[] = {3, -3, -3, 3, 0, INT32_MIN, 2147483647, 0};
    kt_expect_exact_i(&y, wd);
    kt_ok(tx_cpu_add(&a, &b, &y));
    int64_t wadd[] = {9, -5, 5, -9, 5, 2147483647, INT32_MIN, 3}; /* wraps */
    kt_expect_exact_i(&y, wadd);
    kt_ok(tx_cpu_pow(&a, &b, &y));
    int64_t wp[] = {49, 49, 0, 0, 1, 0, 2147483647, 1};
    kt_expect_exact_i(&y, wp);
    /* int64 extremes: no UB */
    int64_t e1[] = {INT64_MIN, INT64_MAX, INT64_MIN};
    int64_t e2[] = {-1, 1, 0};
    int64_t d3[] = {3};
    tx_tensor x1 = kt_alloc(TEEXEC_DTYPE_INT64, 1, d3), x2 = kt_alloc(TEEXEC_DTYPE_INT64, 1, d3);
    memcpy(x1.data, e1, sizeof e1);
    memcpy(x2.data, e2, sizeof e2);
    tx_tensor y3 = kt_alloc(TEEXEC_DTYPE_INT64, 1, d3);
    kt_ok(tx_cpu_div(&x1, &x2, &y3));
    int64_t w3[] = {INT64_MIN, INT64_MAX, 0};
    kt_expect_exact_i(&y3, w3);
    kt_ok(tx_cpu_mul(&x1, &x2, &y3));
    int64_t w4[] = {INT64_MIN, INT64_MAX, 0};
    kt_expect_exact_i(&y3, w4);
    kt_ok(tx_cpu_sub(&x1, &x2, &y3));
    int64_t w5[] = {INT64_MIN + 1, INT64_MAX - 1, INT64_MIN};
    kt_expect_exact_i(&y3, w5);
    /* uint64 compare above INT64_MAX */
    uint64_t u1[] = {UINT64_MAX, 1, 0}, u2[] = {1, UINT64_MAX, 0};
    tx_tensor p1 = kt_alloc(TEEXEC_DTYPE_UINT64, 1, d3), p2 = kt_alloc(TEEXEC_DTYPE_UINT64, 1, d3);
    memcpy(p1.data, u1, sizeof u1);
    memcpy(p2.data, u2, sizeof u2);
    tx_tensor bo = kt_alloc(TEEXEC_DTYPE_BOOL, 1, d3);
    kt_ok(tx_cpu_greater(&p1, &p2, &bo));
    int64_t wg[] = {1, 0, 0};
    kt_expect_exact_i(&bo, wg);
    tx_tensor *all[] = {&a, &b, &y, &x1, &x2, &y3, &p1, &p2, &bo};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void pow_mixed_types(void **state)
{
    (void)state;
    int64_t d[] = {3};
    double xv[] = {1, 2, 3}, yv[] = {4, 5, 6};
    tx_tensor xi = kt_from(TEEXEC_DTYPE_INT32, 1, d, xv), yf = kt_from(TEEXEC_DTYPE_FLOAT, 1, d, yv);
    tx_tensor out = kt_alloc(TEEXEC_DTYPE_INT32, 1, d);
    kt_ok(tx_cpu_pow(&xi, &yf, &out)); /* ONNX test_pow_types_int32_float32 */
    int64_t w[] = {1, 32, 729};
    kt_expect_exact_i(&out, w);
    tx_tensor xf = kt_from(TEEXEC_DTYPE_FLOAT, 1, d, xv), yi = kt_from(TEEXEC_DTYPE_INT64, 1, d, yv);
    tx_tensor outf = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, d);
    kt_ok(tx_cpu_pow(&xf, &yi, &outf));
    double wf[] = {1, 32, 729};
    kt_expect_close(&outf, wf, 0, 0);
    /* scalar exponents 2 and 3 take the product shortcut; 0.5 goes to pow */
    double bv[] = {-1.5, 2, 3};
    tx_tensor base = kt_from(TEEXEC_DTYPE_FLOAT, 1, d, bv);
    double exps[] = {2, 3, 0.5};
    double want[3][3] = {{2.25, 4, 9}, {-3.375, 8, 27}, {NAN, 1.41421353816986084, 1.73205077648162842}};
    for (int e = 0; e < 3; e++) {
        tx_tensor ex = kt_scalar(TEEXEC_DTYPE_FLOAT, exps[e]);
        kt_ok(tx_cpu_pow(&base, &ex, &outf));
        kt_expect_close(&outf, want[e], 0, 0);
        tx_tensor_release(&ex);
    }
    tx_tensor_release(&base);
    /* output must take the base's dtype */
    kt_err(tx_cpu_pow(&xi, &yf, &outf), TEEXEC_ERR_INVALID_ARGUMENT, "dtype");
    tx_tensor *all[] = {&xi, &yf, &out, &xf, &yi, &outf};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void refusals(void **state)
{
    (void)state;
    int64_t d[] = {2, 3}, d2[] = {4};
    tx_tensor a = kt_random(TEEXEC_DTYPE_FLOAT, 2, d, -1, 1), b = kt_random(TEEXEC_DTYPE_FLOAT, 1, d2, -1, 1);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, d);
    kt_err(tx_cpu_add(&a, &b, &y), TEEXEC_ERR_INVALID_ARGUMENT, "Add");
    tx_tensor bi = kt_random(TEEXEC_DTYPE_INT32, 2, d, 0, 3);
    kt_err(tx_cpu_add(&a, &bi, &y), TEEXEC_ERR_INVALID_ARGUMENT, "dtype");
    kt_err(tx_cpu_and(&a, &a, &y), TEEXEC_ERR_UNSUPPORTED, "And: dtype float");
    tx_tensor bb = kt_random(TEEXEC_DTYPE_BOOL, 2, d, 0, 1);
    kt_err(tx_cpu_less(&bb, &bb, &y), TEEXEC_ERR_UNSUPPORTED, "Less: dtype bool");
    tx_tensor s1 = kt_alloc(TEEXEC_DTYPE_STRING, 2, d);
    kt_err(tx_cpu_add(&s1, &s1, &y), TEEXEC_ERR_UNSUPPORTED, "string");
    /* comparison output must be bool */
    kt_err(tx_cpu_equal(&a, &a, &y), TEEXEC_ERR_INVALID_ARGUMENT, "bool");
    tx_tensor *all[] = {&a, &b, &y, &bi, &bb, &s1};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void variadic_ops(void **state)
{
    (void)state;
    kt_seed(11);
    teexec_dtype dts[] = {TEEXEC_DTYPE_FLOAT, TEEXEC_DTYPE_FLOAT16, TEEXEC_DTYPE_DOUBLE,
                          TEEXEC_DTYPE_INT32};
    int64_t d1[] = {3, 1}, d2[] = {4}, d3[] = {2, 3, 4};
    for (size_t d = 0; d < 4; d++) {
        for (int op = TX_VARIADIC_MIN; op <= TX_VARIADIC_MEAN; op++) {
            tx_tensor a = kt_random(dts[d], 2, d1, -5, 5), b = kt_random(dts[d], 1, d2, -5, 5);
            tx_tensor c = kt_random(dts[d], 3, d3, -5, 5);
            tx_tensor y = kt_alloc(dts[d], 3, d3);
            const tx_tensor *in[3] = {&a, &b, &c};
            teexec_status *st = tx_cpu_variadic((tx_variadic_op)op, 3, in, &y);
            if (op == TX_VARIADIC_MEAN && dts[d] == TEEXEC_DTYPE_INT32) {
                kt_err(st, TEEXEC_ERR_UNSUPPORTED, "Mean");
            } else {
                kt_ok(st);
                double ref[24];
                int64_t idx[3];
                for (size_t i = 0; i < 24; i++) {
                    kt_unravel(i, 3, d3, idx);
                    double v[3] = {kt_get(&a, kt_bcast_index(&a, 3, idx)),
                                   kt_get(&b, kt_bcast_index(&b, 3, idx)),
                                   kt_get(&c, kt_bcast_index(&c, 3, idx))};
                    double r = v[0];
                    for (int k = 1; k < 3; k++) {
                        if (op == TX_VARIADIC_MIN) r = v[k] < r ? v[k] : r;
                        if (op == TX_VARIADIC_MAX) r = v[k] > r ? v[k] : r;
                        if (op >= TX_VARIADIC_SUM) r += v[k];
                    }
                    if (op == TX_VARIADIC_MEAN) r /= 3;
                    ref[i] = kt_round_to(dts[d], r);
                }
                kt_expect_close(&y, ref, kt_rtol(dts[d]), 1e-12);
            }
            tx_tensor *all[] = {&a, &b, &c, &y};
            for (size_t i = 0; i < 4; i++) tx_tensor_release(all[i]);
        }
    }
    /* one input: a copy; mismatch of dtypes refused */
    int64_t d[] = {2};
    double v[] = {1.5, -2};
    tx_tensor x = kt_from(TEEXEC_DTYPE_FLOAT, 1, d, v), y = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, d);
    const tx_tensor *one[1] = {&x};
    kt_ok(tx_cpu_variadic(TX_VARIADIC_SUM, 1, one, &y));
    kt_expect_close(&y, v, 0, 0);
    tx_tensor xi = kt_from(TEEXEC_DTYPE_INT64, 1, d, v);
    const tx_tensor *two[2] = {&x, &xi};
    kt_err(tx_cpu_variadic(TX_VARIADIC_MAX, 2, two, &y), TEEXEC_ERR_INVALID_ARGUMENT, "dtype");
    kt_err(tx_cpu_variadic(TX_VARIADIC_MAX, 0, two, &y), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    tx_tensor_release(&x);
    tx_tensor_release(&y);
    tx_tensor_release(&xi);
}

static void where_broadcast(void **state)
{
    (void)state;
    kt_seed(12);
    teexec_dtype dts[] = {TEEXEC_DTYPE_FLOAT, TEEXEC_DTYPE_INT64, TEEXEC_DTYPE_BFLOAT16,
                          TEEXEC_DTYPE_BOOL, TEEXEC_DTYPE_INT8};
    /* two layouts: (cond broadcast, X partly, Y last-dim) and the attention
     * mask pattern (cond and X full, Y scalar) */
    int64_t dcs[2][3] = {{1, 3, 1}, {2, 3, 5}}, dxs[2][3] = {{2, 1, 5}, {2, 3, 5}}, dy[] = {5};
    int64_t dout[] = {2, 3, 5};
    for (size_t d = 0; d < 10; d++) {
        int lay = (int)(d / 5);
        tx_tensor c = kt_random(TEEXEC_DTYPE_BOOL, 3, dcs[lay], 0, 1);
        tx_tensor x = kt_random(dts[d % 5], 3, dxs[lay], -9, 9);
        tx_tensor y = kt_random(dts[d % 5], lay ? 0 : 1, dy, -9, 9);
        tx_tensor o = kt_alloc(dts[d % 5], 3, dout);
        kt_ok(tx_cpu_where(&c, &x, &y, &o));
        double ref[30];
        int64_t idx[3];
        for (size_t i = 0; i < 30; i++) {
            kt_unravel(i, 3, dout, idx);
            bool cv = kt_get(&c, kt_bcast_index(&c, 3, idx)) != 0;
            ref[i] = cv ? kt_get(&x, kt_bcast_index(&x, 3, idx))
                        : kt_get(&y, kt_bcast_index(&y, 3, idx));
        }
        kt_expect_close(&o, ref, 0, 0);
        tx_tensor *all[] = {&c, &x, &y, &o};
        for (size_t i = 0; i < 4; i++) tx_tensor_release(all[i]);
    }
    int64_t d2[] = {2};
    tx_tensor f = kt_random(TEEXEC_DTYPE_FLOAT, 1, d2, 0, 1), o = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, d2);
    kt_err(tx_cpu_where(&f, &f, &f, &o), TEEXEC_ERR_INVALID_ARGUMENT, "condition");
    tx_tensor_release(&f);
    tx_tensor_release(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(float_ops_broadcast), cmocka_unit_test(int_ops_broadcast),
        cmocka_unit_test(integer_semantics),   cmocka_unit_test(pow_mixed_types),
        cmocka_unit_test(refusals),            cmocka_unit_test(variadic_ops),
        cmocka_unit_test(where_broadcast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
