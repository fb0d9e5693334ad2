/* Tests for matmul.c, gemm.c and einsum.c against naive FP64 loops. */
#include "kt_util.h"

/* Reference MatMul via explicit promotion and broadcast index arithmetic. */
static void ref_matmul(const tx_tensor *a, const tx_tensor *b, const tx_tensor *y, double *ref)
{
    int32_t ra = a->rank, rb = b->rank;
    int64_t K = a->dims[ra - 1];
    int64_t N = rb == 1 ? 1 : b->dims[rb - 1];
    int64_t M = ra == 1 ? 1 : a->dims[ra - 2];
    /* output index -> (batch idx, i, j) */
    int32_t yr = y->rank;
    int64_t idx[TX_MAX_RANK];
    for (size_t f = 0; f < y->numel; f++) {
        kt_unravel(f, yr, y->dims, idx);
        int64_t i = 0, j = 0;
        int32_t batch_rank = yr;
        if (rb != 1) j = idx[--batch_rank];
        if (ra != 1) i = idx[--batch_rank];
        double s = 0;
        for (int64_t k = 0; k < K; k++) {
            /* A element [batch..., i, k] */
            size_t fa = 0, fb = 0;
            int32_t abatch = ra - 2 < 0 ? 0 : ra - 2, bbatch = rb - 2 < 0 ? 0 : rb - 2;
            for (int32_t q = 0; q < abatch; q++) {
                int64_t v = a->dims[q] == 1 ? 0 : idx[batch_rank - abatch + q];
                fa = fa * (size_t)a->dims[q] + (size_t)v;
            }
            if (ra == 1)
                fa = (size_t)k;
            else
                fa = (fa * (size_t)M + (size_t)i) * (size_t)K + (size_t)k;
            for (int32_t q = 0; q < bbatch; q++) {
                int64_t v = b->dims[q] == 1 ? 0 : idx[batch_rank - bbatch + q];
                fb = fb * (size_t)b->dims[q] + (size_t)v;
            }
            if (rb == 1)
                fb = (size_t)k;
            else
                fb = (fb * (size_t)K + (size_t)k) * (size_t)N + (size_t)j;
            s += kt_get(a, fa) * kt_get(b, fb);
        }
        ref[f] = s;
    }
}

typedef struct {
    int32_t ra, rb;
    int64_t a[4], b[4];
} mm_case;

static const mm_case mm_cases[] = {
    {2, 2, {3, 4}, {4, 5}},
    {3, 2, {2, 3, 4}, {4, 5}},          /* shared weight: one tall GEMM */
    {3, 3, {2, 3, 4}, {2, 4, 5}},       /* batched */
    {4, 3, {2, 1, 3, 4}, {3, 4, 5}},    /* broadcast batch dims */
    {2, 3, {3, 4}, {2, 4, 5}},          /* A broadcast over B's batch */
    {1, 2, {4}, {4, 5}},
    {3, 1, {2, 3, 4}, {4}},
    {1, 1, {4}, {4}},
    {2, 2, {3, 0}, {0, 5}},             /* K = 0: zeros */
    {2, 2, {0, 4}, {4, 5}},             /* empty output */
};

static void matmul_vs_reference(void **state)
{
    (void)state;
    teexec_dtype dts[] = {TEEXEC_DTYPE_FLOAT, TEEXEC_DTYPE_DOUBLE, TEEXEC_DTYPE_FLOAT16,
                          TEEXEC_DTYPE_BFLOAT16, TEEXEC_DTYPE_INT32, TEEXEC_DTYPE_INT64,
                          TEEXEC_DTYPE_UINT32};
    kt_seed(21);
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        for (size_t c = 0; c < sizeof mm_cases / sizeof *mm_cases; c++) {
            const mm_case *mc = &mm_cases[c];
            bool fl = kt_is_float(dts[d]);
            tx_tensor a = kt_random(dts[d], mc->ra, mc->a, fl ? -1 : 0, fl ? 1 : 9);
            tx_tensor b = kt_random(dts[d], mc->rb, mc->b, fl ? -1 : 0, fl ? 1 : 9);
            tx_shape sa = tx_shape_of(&a), sb = tx_shape_of(&b), so;
            kt_ok(tx_shape_matmul(&sa, &sb, &so));
            tx_tensor y = kt_alloc(dts[d], so.rank, so.dims);
            for (size_t i = 0; i < y.numel; i++) kt_set(&y, i, 99); /* must be overwritten */
            kt_ok(tx_cpu_matmul(&a, &b, &y));
            double *ref = malloc((y.numel + 1) * sizeof(double));
            ref_matmul(&a, &b, &y, ref);
            for (size_t i = 0; i < y.numel; i++) ref[i] = kt_round_to(dts[d], ref[i]);
            kt_expect_close(&y, ref, kt_rtol(dts[d]) * 4, fl ? 1e-6 : 0);
            free(ref);
            tx_tensor_release(&a);
            tx_tensor_release(&b);
            tx_tensor_release(&y);
        }
    }
}

static void matmul_refusals(void **state)
{
    (void)state;
    int64_t da[] = {3, 4}, db[] = {5, 6}, dy[] = {3, 6};
    tx_tensor a = kt_random(TEEXEC_DTYPE_FLOAT, 2, da, -1, 1), b = kt_random(TEEXEC_DTYPE_FLOAT, 2, db, -1, 1);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, dy);
    kt_err(tx_cpu_matmul(&a, &b, &y), TEEXEC_ERR_INVALID_ARGUMENT, "MatMul");
    tx_tensor i8 = kt_random(TEEXEC_DTYPE_INT8, 2, da, 0, 3);
    kt_err(tx_cpu_matmul(&i8, &i8, &y), TEEXEC_ERR_UNSUPPORTED, "MatMul: dtype int8");
    tx_tensor_release(&a);
    tx_tensor_release(&b);
    tx_tensor_release(&y);
    tx_tensor_release(&i8);
}

static void gemm_vs_reference(void **state)
{
    (void)state;
    teexec_dtype dts[] = {TEEXEC_DTYPE_FLOAT, TEEXEC_DTYPE_DOUBLE, TEEXEC_DTYPE_FLOAT16,
                          TEEXEC_DTYPE_BFLOAT16, TEEXEC_DTYPE_INT64};
    /* C shapes: none, scalar, [N], [M,1], [M,N], [1,N] */
    int32_t crank[] = {-1, 0, 1, 2, 2, 2};
    kt_seed(22);
    const int64_t M = 3, N = 5, K = 4;
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        bool fl = kt_is_float(dts[d]);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (size_t cc = 0; cc < 6; cc++) {
                    int64_t da[2] = {ta ? K : M, ta ? M : K}, db[2] = {tb ? N : K, tb ? K : N};
                    int64_t dcs[6][2] = {{0, 0}, {0, 0}, {N, 0}, {M, 1}, {M, N}, {1, N}};
                    tx_tensor a = kt_random(dts[d], 2, da, fl ? -1 : -4, fl ? 1 : 4);
                    tx_tensor b = kt_random(dts[d], 2, db, fl ? -1 : -4, fl ? 1 : 4);
                    tx_tensor c = {0};
                    if (crank[cc] >= 0) c = kt_random(dts[d], crank[cc], dcs[cc], fl ? -1 : -4, fl ? 1 : 4);
                    int64_t dy[2] = {M, N};
                    tx_tensor y = kt_alloc(dts[d], 2, dy);
                    float alpha = fl ? 0.5f : 1.0f, beta = fl ? 2.0f : 1.0f;
                    kt_ok(tx_cpu_gemm(&a, &b, crank[cc] >= 0 ? &c : NULL, alpha, beta, ta, tb, &y));
                    double ref[15];
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++) {
                            double s = 0;
                            for (int64_t k = 0; k < K; k++) {
                                double av = kt_get(&a, (size_t)(ta ? k * M + i : i * K + k));
                                double bv = kt_get(&b, (size_t)(tb ? j * K + k : k * N + j));
                                s += av * bv;
                            }
                            double cv = 0;
                            if (crank[cc] == 0) cv = kt_get(&c, 0);
                            if (crank[cc] == 1) cv = kt_get(&c, (size_t)j);
                            if (cc == 3) cv = kt_get(&c, (size_t)i);
                            if (cc == 4) cv = kt_get(&c, (size_t)(i * N + j));
                            if (cc == 5) cv = kt_get(&c, (size_t)j);
                            ref[i * N + j] = kt_round_to(dts[d], alpha * s + beta * cv);
                        }
                    kt_expect_close(&y, ref, kt_rtol(dts[d]) * 4, fl ? 1e-6 : 0);
                    tx_tensor_release(&a);
                    tx_tensor_release(&b);
                    tx_tensor_release(&c);
                    tx_tensor_release(&y);
                }
    }
    /* C that does not broadcast */
    int64_t da[] = {3, 4}, db[] = {4, 5}, dc[] = {2, 5}, dy[] = {3, 5};
    tx_tensor a = kt_random(TEEXEC_DTYPE_FLOAT, 2, da, -1, 1), b = kt_random(TEEXEC_DTYPE_FLOAT, 2, db, -1, 1);
    tx_tensor c = kt_random(TEEXEC_DTYPE_FLOAT, 2, dc, -1, 1), y = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, dy);
    kt_err(tx_cpu_gemm(&a, &b, &c, 1, 1, false, false, &y), TEEXEC_ERR_INVALID_ARGUMENT, "C");
    kt_err(tx_cpu_gemm(&a, &b, NULL, 1, 1, true, false, &y), TEEXEC_ERR_INVALID_ARGUMENT, "Gemm");
    tx_tensor_release(&a);
    tx_tensor_release(&b);
    tx_tensor_release(&c);
    tx_tensor_release(&y);
}

static void einsum_cases(void **state)
{
    (void)state;
    kt_seed(23);
    /* batch matmul */
    int64_t da[] = {2, 3, 4}, db[] = {2, 4, 5};
    tx_tensor a = kt_random(TEEXEC_DTYPE_FLOAT, 3, da, -1, 1), b = kt_random(TEEXEC_DTYPE_FLOAT, 3, db, -1, 1);
    const tx_tensor *ab[2] = {&a, &b};
    int32_t rank;
    int64_t dims[TX_MAX_RANK];
    kt_ok(tx_cpu_einsum_shape("bij, bjk -> bik", 2, ab, &rank, dims));
    assert_int_equal(rank, 3);
    assert_int_equal(dims[2], 5);
    tx_tensor y = kt_alloc(TEEXEC_DTYPE_FLOAT, rank, dims), ym = kt_alloc(TEEXEC_DTYPE_FLOAT, rank, dims);
    kt_ok(tx_cpu_einsum("bij, bjk -> bik", 2, ab, &y));
    kt_ok(tx_cpu_matmul(&a, &b, &ym));
    double ref[30];
    for (size_t i = 0; i < 30; i++) ref[i] = kt_get(&ym, i);
    kt_expect_close(&y, ref, 1e-5, 1e-6);
    /* implicit output, ellipsis form of the same */
    kt_ok(tx_cpu_einsum("...ij,...jk", 2, ab, &y));
    kt_expect_close(&y, ref, 1e-5, 1e-6);
    tx_tensor_release(&y);
    tx_tensor_release(&ym);

    /* transpose, sum, inner product, diagonal */
    int64_t d2[] = {3, 4};
    tx_tensor m = kt_random(TEEXEC_DTYPE_DOUBLE, 2, d2, -1, 1);
    const tx_tensor *mm[1] = {&m};
    int64_t dt[] = {4, 3};
    tx_tensor t = kt_alloc(TEEXEC_DTYPE_DOUBLE, 2, dt);
    kt_ok(tx_cpu_einsum("ij->ji", 1, mm, &t));
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 4; j++) assert_true(kt_get(&t, (size_t)(j * 3 + i)) == kt_get(&m, (size_t)(i * 4 + j)));
    int64_t ds[] = {3};
    tx_tensor s = kt_alloc(TEEXEC_DTYPE_DOUBLE, 1, ds);
    kt_ok(tx_cpu_einsum("ij->i", 1, mm, &s));
    for (int64_t i = 0; i < 3; i++) {
        double r = 0;
        for (int64_t j = 0; j < 4; j++) r += kt_get(&m, (size_t)(i * 4 + j));
        assert_true(fabs(kt_get(&s, (size_t)i) - r) < 1e-12);
    }
    int64_t dv[] = {5};
    tx_tensor v = kt_random(TEEXEC_DTYPE_INT32, 1, dv, -3, 3);
    const tx_tensor *vv[2] = {&v, &v};
    tx_tensor sc = kt_alloc(TEEXEC_DTYPE_INT32, 0, NULL);
    kt_ok(tx_cpu_einsum("i,i", 2, vv, &sc));
    int64_t ip = 0;
    for (size_t i = 0; i < 5; i++) ip += kt_geti(&v, i) * kt_geti(&v, i);
    assert_int_equal(kt_geti(&sc, 0), ip);
    int64_t dq[] = {2, 3, 3};
    tx_tensor q = kt_random(TEEXEC_DTYPE_FLOAT, 3, dq, -1, 1);
    const tx_tensor *qq[1] = {&q};
    int64_t dd[] = {2, 3};
    tx_tensor diag = kt_alloc(TEEXEC_DTYPE_FLOAT, 2, dd);
    kt_ok(tx_cpu_einsum("...ii->...i", 1, qq, &diag)); /* test_einsum_batch_diagonal */
    for (size_t bch = 0; bch < 2; bch++)
        for (size_t i = 0; i < 3; i++)
            assert_true(kt_get(&diag, bch * 3 + i) == kt_get(&q, bch * 9 + i * 3 + i));
    /* refusals */
    kt_err(tx_cpu_einsum("ij->i", 2, ab, &s), TEEXEC_ERR_INVALID_ARGUMENT, "terms");
    kt_err(tx_cpu_einsum("i1->i", 1, mm, &s), TEEXEC_ERR_UNSUPPORTED, "i1->i");
    kt_err(tx_cpu_einsum("ij->k", 1, mm, &s), TEEXEC_ERR_INVALID_ARGUMENT, "'k'");
    kt_err(tx_cpu_einsum("ijk->i", 1, mm, &s), TEEXEC_ERR_INVALID_ARGUMENT, "labels");
    tx_tensor *all[] = {&a, &b, &m, &t, &s, &v, &sc, &q, &diag};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tx_tensor_release(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matmul_vs_reference), cmocka_unit_test(matmul_refusals),
        cmocka_unit_test(gemm_vs_reference),   cmocka_unit_test(einsum_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
