/* Tests for the data-movement kernels: transpose, concat/split, slice,
 * gather/gather_elements, expand/tile, trilu, range, copy. References use
 * direct index arithmetic. */
#include "kt_util.h"

static void transpose_perms(void **state)
{
    (void)state;
    kt_seed(51);
    int64_t dims[] = {2, 3, 4, 5};
    int64_t perms[][4] = {{0, 2, 1, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}, {0, 1, 3, 2}, {2, 3, 0, 1}};
    teexec_dtype dts[] = {TEEXEC_DTYPE_FLOAT, TEEXEC_DTYPE_BOOL, TEEXEC_DTYPE_FLOAT16,
                          TEEXEC_DTYPE_INT64};
    for (size_t d = 0; d < 4; d++)
        for (size_t p = 0; p <= 5; p++) {
            tx_tensor x = kt_random(dts[d], 4, dims, -9, 9);
            const int64_t *perm = p < 5 ? perms[p] : NULL;
            int64_t od[4];
            for (int i = 0; i < 4; i++) od[i] = dims[perm ? perm[i] : 3 - i];
            tx_tensor y = kt_alloc(dts[d], 4, od);
            kt_ok(tx_cpu_transpose(&x, perm, perm ? 4 : 0, &y));
            double ref[120];
            for (size_t f = 0; f < 120; f++) {
                int64_t oi[4], xi[4];
                kt_unravel(f, 4, od, oi);
                for (int i = 0; i < 4; i++) xi[perm ? perm[i] : 3 - i] = oi[i];
                ref[f] = kt_get(&x, kt_ravel(4, dims, xi));
            }
            kt_expect_close(&y, ref, 0, 0);
            tx_tensor_release(&x);
            tx_tensor_release(&y);
        }
    int64_t bad[] = {0, 1, 1, 2};
    tx_tensor x = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, dims), y = kt_alloc(TEEXEC_DTYPE_FLOAT, 4, dims);
    kt_err(tx_cpu_transpose(&x, bad, 4, &y), TEEXEC_ERR_INVALID_ARGUMENT, "perm");
    int64_t wrong[] = {0, 1, 3, 2};
    kt_err(tx_cpu_transpose(&x, wrong, 4, &y), TEEXEC_ERR_INVALID_ARGUMENT, "shape");
    tx_tensor s = kt_alloc(TEEXEC_DTYPE_STRING, 4, dims);
    kt_err(tx_cpu_transpose(&s, NULL, 0, &y), TEEXEC_ERR_UNSUPPORTED, "Transpose: dtype string");
    tx_tensor_release(&x);
    tx_tensor_release(&y);
    tx_tensor_release(&s);
}

static void concat_split_roundtrip(void **state)
{
    (void)state;
    kt_seed(52);
    for (int64_t axis = -3; axis < 3; axis++) {
        int64_t ax = axis < 0 ? axis + 3 : axis;
        int64_t da[] = {2, 3, 4}, db[] = {2, 3, 4}, dc[] = {2, 3, 4};
        da[ax] = 1;
        db[ax] = 0; /* an empty piece */
        dc[ax] = 3;
        tx_tensor a = kt_random(TEEXEC_DTYPE_INT16, 3, da, -99, 99);
        tx_tensor b = kt_random(TEEXEC_DTYPE_INT16, 3, db, -99, 99);
        tx_tensor c = kt_random(TEEXEC_DTYPE_INT16, 3, dc, -99, 99);
        int64_t dy[] = {2, 3, 4};
        dy[ax] = 4;
        tx_tensor y = kt_alloc(TEEXEC_DTYPE_INT16, 3, dy);
        const tx_tensor *in[3] = {&a, &b, &c};
        kt_ok(tx_cpu_concat(3, in, axis, &y));
        int64_t ref[96];
        for (size_t f = 0; f < y.numel; f++) {
            int64_t i[3];
            kt_unravel(f, 3, dy, i);
            if (i[ax] < 1) {
                ref[f] = kt_geti(&a, kt_ravel(3, da, i));
            } else {
                i[ax] -= 1;
                ref[f] = kt_geti(&c, kt_ravel(3, dc, i));
            }
        }
        kt_expect_exact_i(&y, ref);
        /* split back */
        tx_tensor a2 = kt_alloc(TEEXEC_DTYPE_INT16, 3, da), b2 = kt_alloc(TEEXEC_DTYPE_INT16, 3, db);
        tx_tensor c2 = kt_alloc(TEEXEC_DTYPE_INT16, 3, dc);
        tx_tensor *outs[3] = {&a2, &b2, &c2};
        kt_ok(tx_cpu_split(&y, axis, 3, outs));
        assert_memory_equal(a2.data, a.data, a.nbytes);
        assert_memory_equal(c2.data, c.data, c.nbytes);
        /* sizes that do not add up */
        tx_tensor *two[2] = {&a2, &c2};
        kt_ok(tx_cpu_split(&y, axis, 2, two));
        tx_tensor *bad[2] = {&a2, &a2};
        kt_err(tx_cpu_split(&y, axis, 2, bad), TEEXEC_ERR_INVALID_ARGUMENT, "add up");
        tx_tensor *all[] = {&a, &b, &c, &y, &a2, &b2, &c2};
        for (size_t i = 0; i < 7; i++) tx_tensor_release(all[i]);
    }
    int64_t d1[] = {2, 3}, d2[] = {3, 3}, dy[] = {5, 3};
    tx_tensor p = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, d1), q = kt_alloc(TEEXEC_DTYPE_DOUBLE, 2, d2);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, dy);
    const tx_tensor *in[2] = {&p, &q};
    kt_err(tx_cpu_concat(2, in, 0, &y), TEEXEC_ERR_INVALID_ARGUMENT, "dtype");
    kt_err(tx_cpu_concat(1, in, 1, &y), TEEXEC_ERR_INVALID_ARGUMENT, "shape");
    tx_tensor_release(&p);
    tx_tensor_release(&q);
    tx_tensor_release(&y);
}

static void slice_cases(void **state)
{
    (void)state;
    kt_seed(53);
    int64_t dims[] = {20, 10, 5};
    tx_tensor x = kt_random(TEEXEC_DTYPE_FLOAT, 3, dims, -9, 9);
    struct {
        size_t n;
        int64_t starts[3], ends[3], axes[3], steps[3];
    } cases[] = {
        {3, {20, 10, 4}, {0, 0, 1}, {0, 1, 2}, {-1, -3, -2}}, /* test_slice_neg_steps */
        {2, {0, 0}, {3, 10}, {0, 1}, {1, 1}},                 /* test_slice */
        {1, {1}, {1000}, {1}, {1}},                           /* end out of bounds */
        {1, {-1}, {INT64_MIN}, {0}, {-1}},                    /* full reverse */
        {2, {2, -4}, {-2, 5}, {-1, -2}, {1, 3}},              /* negative axes */
        {1, {5}, {2}, {0}, {1}},                              /* empty */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tx_shape xs = tx_shape_of(&x), ys;
        int64_t first[3], step[3];
        kt_ok(tx_shape_slice(&xs, cases[c].starts, cases[c].ends, cases[c].axes, cases[c].steps,
                             cases[c].n, first, step, &ys));
        tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, ys.rank, ys.dims);
        kt_ok(tx_cpu_slice(&x, cases[c].starts, cases[c].ends, cases[c].axes, cases[c].steps,
                           cases[c].n, &y));
        /* reference: python-style range per axis, computed independently */
        double *ref = malloc((y.numel + 1) * sizeof(double));
        for (size_t f = 0; f < y.numel; f++) {
            int64_t oi[3], xi[3];
            kt_unravel(f, 3, ys.dims, oi);
            for (int i = 0; i < 3; i++) {
                int64_t st = 0, sp = 1;
                for (size_t k = 0; k < cases[c].n; k++) {
                    int64_t a = cases[c].axes[k] < 0 ? cases[c].axes[k] + 3 : cases[c].axes[k];
                    if (a != i) continue;
                    sp = cases[c].steps[k];
                    st = cases[c].starts[k];
                    if (st < 0) st += dims[i];
                    if (sp > 0) st = st < 0 ? 0 : st > dims[i] ? dims[i] : st;
                    else st = st < 0 ? 0 : st > dims[i] - 1 ? dims[i] - 1 : st;
                }
                xi[i] = st + oi[i] * sp;
            }
            ref[f] = kt_get(&x, kt_ravel(3, dims, xi));
        }
        kt_expect_close(&y, ref, 0, 0);
        free(ref);
        tx_tensor_release(&y);
    }
    int64_t d1[] = {19, 3, 2};
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 3, d1);
    kt_err(tx_cpu_slice(&x, cases[0].starts, cases[0].ends, cases[0].axes, cases[0].steps, 2, &y),
           TEEXEC_ERR_INVALID_ARGUMENT, "shape");
    tx_tensor_release(&y);
    tx_tensor_release(&x);
}

static void gather_cases(void **state)
{
    (void)state;
    kt_seed(54);
    int64_t dd[] = {3, 4, 2}, di[] = {2, 2};
    double iv[] = {0, -1, 2, 1};
    tx_tensor data = kt_random(TEEXEC_DTYPE_FLOAT, 3, dd, -9, 9);
    tx_tensor idx = kt_from(TEEXEC_DTYPE_INT32, 2, di, iv);
    for (int64_t axis = 0; axis < 3; axis++) {
        tx_shape ds = tx_shape_of(&data), is = tx_shape_of(&idx), ys;
        kt_ok(tx_shape_gather(&ds, &is, axis, &ys));
        tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, ys.rank, ys.dims);
        teexec_status *st = tx_cpu_gather(&data, &idx, axis - 3 * (axis == 1), &y);
        if (axis == 2) {
            /* index 2 is out of range for a dim of 2 */
            kt_err(st, TEEXEC_ERR_INVALID_ARGUMENT, "out of range");
            tx_tensor_release(&y);
            continue;
        }
        kt_ok(st);
        double ref[64];
        for (size_t f = 0; f < y.numel; f++) {
            int64_t oi[4], xi[3];
            kt_unravel(f, ys.rank, ys.dims, oi);
            int64_t q = (int64_t)iv[oi[axis] * 2 + oi[axis + 1]];
            for (int64_t i = 0, o = 0; i < 3; i++) {
                if (i == axis) {
                    xi[i] = q < 0 ? q + dd[i] : q;
                    o += 2;
                } else {
                    xi[i] = oi[o++];
                }
            }
            ref[f] = kt_get(&data, kt_ravel(3, dd, xi));
        }
        kt_expect_close(&y, ref, 0, 0);
        tx_tensor_release(&y);
    }
    /* GatherElements: ONNX's test_gather_elements_1 and a negative index */
    int64_t d2[] = {2, 2};
    double dv[] = {1, 2, 3, 4}, ev[] = {0, 0, 1, 0}, nv[] = {-1, 0, 0, -2};
    tx_tensor g = kt_from(TEEXEC_DTYPE_INT64, 2, d2, dv), gi = kt_from(TEEXEC_DTYPE_INT64, 2, d2, ev);
    tx_tensor gy = kt_alloc(TEEXEC_DTYPE_INT64, 2, d2);
    kt_ok(tx_cpu_gather_elements(&g, &gi, 1, &gy));
    int64_t w1[] = {1, 1, 4, 3};
    kt_expect_exact_i(&gy, w1);
    tx_tensor gn = kt_from(TEEXEC_DTYPE_INT32, 2, d2, nv);
    kt_ok(tx_cpu_gather_elements(&g, &gn, 0, &gy));
    int64_t w2[] = {3, 2, 1, 2};
    kt_expect_exact_i(&gy, w2);
    double bad[] = {0, 2, 0, 0};
    tx_tensor gb = kt_from(TEEXEC_DTYPE_INT64, 2, d2, bad);
    kt_err(tx_cpu_gather_elements(&g, &gb, 1, &gy), TEEXEC_ERR_INVALID_ARGUMENT, "out of range");
    tx_tensor gf = kt_from(TEEXEC_DTYPE_FLOAT, 2, d2, ev);
    kt_err(tx_cpu_gather_elements(&g, &gf, 1, &gy), TEEXEC_ERR_UNSUPPORTED, "indices");
    tx_tensor *all[] = {&data, &idx, &g, &gi, &gy, &gn, &gb, &gf};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void expand_tile_trilu(void **state)
{
    (void)state;
    kt_seed(55);
    int64_t dx[] = {3, 1}, dy[] = {2, 3, 4};
    tx_tensor x = kt_random(TEEXEC_DTYPE_DOUBLE, 2, dx, -9, 9), y = kt_alloc(TEEXEC_DTYPE_DOUBLE, 3, dy);
    kt_ok(tx_cpu_expand(&x, &y));
    double ref[24];
    for (size_t f = 0; f < 24; f++) {
        int64_t i[3];
        kt_unravel(f, 3, dy, i);
        ref[f] = kt_get(&x, (size_t)i[1]);
    }
    kt_expect_close(&y, ref, 0, 0);
    int64_t dbad[] = {2, 2, 4};
    tx_tensor yb = kt_alloc(TEEXEC_DTYPE_DOUBLE, 3, dbad);
    kt_err(tx_cpu_expand(&x, &yb), TEEXEC_ERR_INVALID_ARGUMENT, "Expand");

    int64_t dt[] = {2, 3}, reps[] = {2, 3}, dto[] = {4, 9};
    tx_tensor t = kt_random(TEEXEC_DTYPE_UINT16, 2, dt, 0, 999), to = kt_alloc(TEEXEC_DTYPE_UINT16, 2, dto);
    kt_ok(tx_cpu_tile(&t, reps, 2, &to));
    int64_t tref[36];
    for (size_t f = 0; f < 36; f++) tref[f] = kt_geti(&t, (f / 9 % 2) * 3 + f % 9 % 3);
    kt_expect_exact_i(&to, tref);
    int64_t reps0[] = {0, 1}, dz[] = {0, 3};
    tx_tensor tz = kt_alloc(TEEXEC_DTYPE_UINT16, 2, dz);
    kt_ok(tx_cpu_tile(&t, reps0, 2, &tz));
    kt_err(tx_cpu_tile(&t, reps0, 2, &to), TEEXEC_ERR_INVALID_ARGUMENT, "shape");

    int64_t dm[] = {2, 3, 4};
    tx_tensor m = kt_random(TEEXEC_DTYPE_FLOAT, 3, dm, 1, 9), mo = kt_alloc(TEEXEC_DTYPE_FLOAT, 3, dm);
    for (int upper = 0; upper < 2; upper++)
        for (int64_t k = -4; k <= 5; k++) {
            kt_ok(tx_cpu_trilu(&m, k, upper, &mo));
            double tr[24];
            for (size_t f = 0; f < 24; f++) {
                int64_t i = (int64_t)(f / 4 % 3), j = (int64_t)(f % 4);
                bool keep = upper ? j - i >= k : j - i <= k;
                tr[f] = keep ? kt_get(&m, f) : 0;
            }
            kt_expect_close(&mo, tr, 0, 0);
        }
    kt_ok(tx_cpu_trilu(&m, INT64_MAX, false, &mo)); /* extreme k: no overflow */
    kt_ok(tx_cpu_trilu(&m, INT64_MIN, true, &mo));
    tx_tensor v = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, dm), vo = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, dm);
    kt_err(tx_cpu_trilu(&v, 0, true, &vo), TEEXEC_ERR_INVALID_ARGUMENT, "rank");
    tx_tensor *all[] = {&x, &y, &yb, &t, &to, &tz, &m, &mo, &v, &vo};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

static void range_and_copy(void **state)
{
    (void)state;
    /* ONNX test_range_float_type_positive_delta: 1, 5, 2 -> [1, 3] */
    tx_tensor s = kt_scalar(TEEXEC_DTYPE_FLOAT, 1), l = kt_scalar(TEEXEC_DTYPE_FLOAT, 5);
    tx_tensor dl = kt_scalar(TEEXEC_DTYPE_FLOAT, 2);
    int64_t n;
    kt_ok(tx_cpu_range_count(&s, &l, &dl, &n));
    assert_int_equal(n, 2);
    int64_t dn[] = {2};
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 1, dn);
    kt_ok(tx_cpu_range(&s, &dl, &y));
    double w[] = {1, 3};
    kt_expect_close(&y, w, 0, 0);
    /* int32 negative delta: 10, 6, -3 -> [10, 7] */
    tx_tensor si = kt_scalar(TEEXEC_DTYPE_INT32, 10), li = kt_scalar(TEEXEC_DTYPE_INT32, 6);
    tx_tensor di = kt_scalar(TEEXEC_DTYPE_INT32, -3);
    kt_ok(tx_cpu_range_count(&si, &li, &di, &n));
    assert_int_equal(n, 2);
    tx_tensor yi = kt_alloc(TEEXEC_DTYPE_INT32, 1, dn);
    kt_ok(tx_cpu_range(&si, &di, &yi));
    int64_t wi[] = {10, 7};
    kt_expect_exact_i(&yi, wi);
    kt_ok(tx_cpu_range_count(&li, &si, &di, &n)); /* wrong direction: empty */
    assert_int_equal(n, 0);
    tx_tensor z = kt_scalar(TEEXEC_DTYPE_INT32, 0);
    kt_err(tx_cpu_range_count(&si, &li, &z, &n), TEEXEC_ERR_INVALID_ARGUMENT, "delta");
    kt_err(tx_cpu_range_count(&si, &l, &di, &n), TEEXEC_ERR_INVALID_ARGUMENT, "limit");
    tx_tensor su = kt_scalar(TEEXEC_DTYPE_UINT8, 1);
    kt_err(tx_cpu_range_count(&su, &su, &su, &n), TEEXEC_ERR_UNSUPPORTED, "Range: dtype uint8");
    /* copy: same count, any shape */
    int64_t d23[] = {2, 3}, d6[] = {6};
    tx_tensor a = kt_random(TEEXEC_DTYPE_BFLOAT16, 2, d23, -1, 1), b = kt_alloc(TEEXEC_DTYPE_BFLOAT16, 1, d6);
    kt_ok(tx_cpu_copy(&a, &b));
    assert_memory_equal(a.data, b.data, a.nbytes);
    kt_err(tx_cpu_copy(&a, &y), TEEXEC_ERR_INVALID_ARGUMENT, NULL);
    tx_tensor *all[] = {&s, &l, &dl, &y, &si, &li, &di, &yi, &z, &su, &a, &b};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transpose_perms), cmocka_unit_test(concat_split_roundtrip),
        cmocka_unit_test(slice_cases),     cmocka_unit_test(gather_cases),
        cmocka_unit_test(expand_tile_trilu), cmocka_unit_test(range_and_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
