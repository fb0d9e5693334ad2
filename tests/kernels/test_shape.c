/* Tests for base/shape.c: broadcasting, axes, matmul/gemm, slices, ... */
#include "kt_util.h"

static tx_shape S(int32_t rank, ...)
{
    tx_shape s;
    memset(&s, 0, sizeof(s));
    s.rank = rank;
    va_list ap;
    va_start(ap, rank);
    for (int32_t i = 0; i < rank; i++) s.dims[i] = va_arg(ap, int);
    va_end(ap);
    return s;
}

static void expect_shape(const tx_shape *got, const tx_shape *want)
{
    char a[128], b[128];
    if (!tx_shape_equal(got, want))
        fail_msg("got %s, want %s", tx_shape_str(got, a, sizeof a), tx_shape_str(want, b, sizeof b));
}

static void broadcast_rules(void **state)
{
    (void)state;
    tx_shape a = S(3, 2, 1, 4), b = S(2, 3, 1), o;
    kt_ok(tx_shape_broadcast2(&a, &b, &o));
    tx_shape w = S(3, 2, 3, 4);
    expect_shape(&o, &w);
    tx_shape sc = S(0), e = S(2, 0, 1);
    kt_ok(tx_shape_broadcast2(&sc, &e, &o));
    tx_shape we = S(2, 0, 1);
    expect_shape(&o, &we);
    tx_shape c = S(1, 5), d = S(1, 3);
    kt_err(tx_shape_broadcast2(&c, &d, &o), TEEXEC_ERR_INVALID_ARGUMENT, "broadcast");
    const tx_shape *three[3] = {&a, &b, &sc};
    kt_ok(tx_shape_broadcast(3, three, &o));
    expect_shape(&o, &w);
    assert_true(tx_shape_broadcastable_to(&b, &w));
    assert_false(tx_shape_broadcastable_to(&w, &b));
    tx_shape f = S(1, 3);
    assert_false(tx_shape_broadcastable_to(&f, &a)); /* 3 vs 4 */
}

static void axes_and_strides(void **state)
{
    (void)state;
    int32_t ax;
    kt_ok(tx_shape_normalize_axis(-1, 3, &ax));
    assert_int_equal(ax, 2);
    kt_ok(tx_shape_normalize_axis(-3, 3, &ax));
    assert_int_equal(ax, 0);
    kt_err(tx_shape_normalize_axis(3, 3, &ax), TEEXEC_ERR_INVALID_ARGUMENT, "axis");
    kt_err(tx_shape_normalize_axis(-4, 3, &ax), TEEXEC_ERR_INVALID_ARGUMENT, "axis");
    tx_shape s = S(3, 2, 3, 4);
    int64_t st[3];
    tx_shape_strides(&s, st);
    assert_int_equal(st[0], 12);
    assert_int_equal(st[1], 4);
    assert_int_equal(st[2], 1);
}

static void matmul_shapes(void **state)
{
    (void)state;
    tx_shape o;
    tx_shape a = S(3, 2, 3, 4), b = S(2, 4, 5);
    kt_ok(tx_shape_matmul(&a, &b, &o));
    tx_shape w = S(3, 2, 3, 5);
    expect_shape(&o, &w);
    tx_shape v = S(1, 4);
    kt_ok(tx_shape_matmul(&v, &b, &o)); /* [4] x [4,5] -> [5] */
    tx_shape w2 = S(1, 5);
    expect_shape(&o, &w2);
    kt_ok(tx_shape_matmul(&a, &v, &o)); /* [2,3,4] x [4] -> [2,3] */
    tx_shape w3 = S(2, 2, 3);
    expect_shape(&o, &w3);
    kt_ok(tx_shape_matmul(&v, &v, &o)); /* inner product -> scalar */
    assert_int_equal(o.rank, 0);
    tx_shape ba = S(4, 2, 1, 3, 4), bb = S(3, 5, 4, 6);
    kt_ok(tx_shape_matmul(&ba, &bb, &o));
    tx_shape w4 = S(4, 2, 5, 3, 6);
    expect_shape(&o, &w4);
    tx_shape bad = S(2, 5, 6);
    kt_err(tx_shape_matmul(&a, &bad, &o), TEEXEC_ERR_INVALID_ARGUMENT, "inner");
    int64_t m, n, k;
    tx_shape ga = S(2, 4, 3), gb = S(2, 5, 4);
    kt_ok(tx_shape_gemm(&ga, &gb, true, true, &m, &n, &k));
    assert_int_equal(m, 3);
    assert_int_equal(n, 5);
    assert_int_equal(k, 4);
    kt_err(tx_shape_gemm(&ga, &gb, false, false, &m, &n, &k), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
}

static void slice_shapes(void **state)
{
    (void)state;
    tx_shape in = S(3, 20, 10, 5), o;
    int64_t st[3], sp[3];
    /* ONNX test_slice_neg_steps */
    int64_t starts[] = {20, 10, 4}, ends[] = {0, 0, 1}, axes[] = {0, 1, 2}, steps[] = {-1, -3, -2};
    kt_ok(tx_shape_slice(&in, starts, ends, axes, steps, 3, st, sp, &o));
    tx_shape w = S(3, 19, 3, 2);
    expect_shape(&o, &w);
    assert_int_equal(st[0], 19);
    assert_int_equal(st[1], 9);
    assert_int_equal(st[2], 4);
    /* clamping and "to the end" markers */
    int64_t s2[] = {-100, 1}, e2[] = {INT64_MAX, 1000}, a2[] = {0, -1};
    kt_ok(tx_shape_slice(&in, s2, e2, a2, NULL, 2, st, sp, &o));
    tx_shape w2 = S(3, 20, 10, 4);
    expect_shape(&o, &w2);
    /* backwards to the start with INT64_MIN */
    int64_t s3[] = {-1}, e3[] = {INT64_MIN}, p3[] = {-1};
    kt_ok(tx_shape_slice(&in, s3, e3, NULL, p3, 1, st, sp, &o));
    tx_shape w3 = S(3, 20, 10, 5);
    expect_shape(&o, &w3);
    assert_int_equal(st[0], 19);
    int64_t zero[] = {0};
    kt_err(tx_shape_slice(&in, zero, zero, NULL, zero, 1, st, sp, &o),
           TEEXEC_ERR_INVALID_ARGUMENT, "step");
    /* empty */
    int64_t s4[] = {5}, e4[] = {2};
    kt_ok(tx_shape_slice(&in, s4, e4, NULL, NULL, 1, st, sp, &o));
    assert_int_equal(o.dims[0], 0);
}

static void misc_shapes(void **state)
{
    (void)state;
    tx_shape in = S(3, 2, 3, 4), o;
    int64_t perm[] = {1, 2, 0};
    kt_ok(tx_shape_transpose(&in, perm, 3, &o));
    tx_shape w = S(3, 3, 4, 2);
    expect_shape(&o, &w);
    int64_t badperm[] = {0, 0, 1};
    kt_err(tx_shape_transpose(&in, badperm, 3, &o), TEEXEC_ERR_INVALID_ARGUMENT, "perm");
    int64_t axes[] = {-1, 0};
    kt_ok(tx_shape_reduce(&in, axes, 2, true, false, &o, NULL));
    tx_shape w2 = S(3, 1, 3, 1);
    expect_shape(&o, &w2);
    kt_ok(tx_shape_reduce(&in, NULL, 0, false, false, &o, NULL));
    assert_int_equal(o.rank, 0);
    kt_ok(tx_shape_reduce(&in, NULL, 0, false, true, &o, NULL));
    expect_shape(&o, &in);
    int64_t dup[] = {1, -2};
    kt_err(tx_shape_reduce(&in, dup, 2, true, false, &o, NULL), TEEXEC_ERR_INVALID_ARGUMENT,
           "repeated");
    tx_shape idx = S(2, 5, 6);
    kt_ok(tx_shape_gather(&in, &idx, 1, &o));
    tx_shape w3 = S(4, 2, 5, 6, 4);
    expect_shape(&o, &w3);
    int64_t rs[] = {0, -1};
    kt_ok(tx_shape_reshape(&in, rs, 2, false, &o));
    tx_shape w4 = S(2, 2, 12);
    expect_shape(&o, &w4);
    int64_t rs2[] = {5, -1};
    kt_err(tx_shape_reshape(&in, rs2, 2, false, &o), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    tx_shape sq = S(4, 1, 3, 1, 2);
    kt_ok(tx_shape_squeeze(&sq, NULL, 0, &o));
    tx_shape w5 = S(2, 3, 2);
    expect_shape(&o, &w5);
    int64_t ua[] = {0, -1};
    kt_ok(tx_shape_unsqueeze(&w5, ua, 2, &o));
    tx_shape w6 = S(4, 1, 3, 2, 1);
    expect_shape(&o, &w6);
    kt_ok(tx_shape_flatten(&in, 0, &o));
    tx_shape w7 = S(2, 1, 24);
    expect_shape(&o, &w7);
    int64_t reps[] = {2, 1, 3};
    kt_ok(tx_shape_tile(&in, reps, 3, &o));
    tx_shape w8 = S(3, 4, 3, 12);
    expect_shape(&o, &w8);
    tx_shape c1 = S(2, 2, 3), c2 = S(2, 2, 5), c3 = S(2, 3, 5);
    const tx_shape *cs[2] = {&c1, &c2};
    kt_ok(tx_shape_concat(2, cs, -1, &o));
    tx_shape w9 = S(2, 2, 8);
    expect_shape(&o, &w9);
    const tx_shape *cs2[2] = {&c1, &c3};
    kt_err(tx_shape_concat(2, cs2, 1, &o), TEEXEC_ERR_INVALID_ARGUMENT, "differs");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(broadcast_rules), cmocka_unit_test(axes_and_strides),
        cmocka_unit_test(matmul_shapes),   cmocka_unit_test(slice_shapes),
        cmocka_unit_test(misc_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
