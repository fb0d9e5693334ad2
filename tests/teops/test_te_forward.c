/*
 * test_te_forward.c - forward values of the te.ops CPU implementations:
 * hand-checked values (GELU at known points, a LayerNorm row, ...), the
 * fp32/bf16/fp16 paths against the FP64 path within Transformer Engine's
 * tolerances, GroupedLinear's rows outside every group, attention against
 * a naive reference (GQA, causal, masks, both layouts), the cache mode's
 * in-place append and its refusals, and the Dropout mask's determinism.
 */
#include "te_cases.h"

#include <cblas.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define D TEEXEC_DTYPE_DOUBLE

static void set_values(tx_tensor *t, int rank, const int64_t *dims, const double *v)
{
    tx_tensor_release(t);
    assert_null(tx_tensor_alloc(t, D, rank, dims));
    for (uint64_t i = 0; i < t->numel; i++) tc_set(t, i, v[i]);
}

static void expect_out(te_case *c, const double *want, double tol)
{
    teexec_status *st = tc_forward(c);
    if (st) fail_msg("%s: %s", c->s->name, teexec_status_message(st));
    for (uint64_t i = 0; i < c->out.numel; i++)
        if (fabs(tc_get(&c->out, i) - want[i]) > tol)
            fail_msg("%s: y[%llu] = %.17g, expected %.17g", c->s->name, (unsigned long long)i,
                     tc_get(&c->out, i), want[i]);
}

static void hand_checked_values(void **state)
{
    (void)state;
    te_case c;
    /* GELU, tanh form (TE's default) and erf form */
    tc_init(&c, TX_TE_GELU);
    set_values(&c.in, 1, (int64_t[]){4}, (double[]){1.0, -1.0, 2.0, 0.5});
    expect_out(&c, (double[]){0.8411919903841787, -0.15880800961582126, 1.9545976939197902,
                              0.34571400973853866}, 1e-12);
    c.attrs[TX_TE_A_GELU_APPROX].i = TX_TE_GELU_ERF;
    set_values(&c.in, 1, (int64_t[]){2}, (double[]){1.0, -0.5});
    expect_out(&c, (double[]){0.8413447460685429, -0.15426876936299344}, 1e-12);
    tc_free(&c);

    tc_init(&c, TX_TE_QGELU);
    set_values(&c.in, 1, (int64_t[]){1}, (double[]){1.0});
    expect_out(&c, (double[]){0.8457957659328212}, 1e-12);
    tc_free(&c);

    tc_init(&c, TX_TE_SRELU);
    set_values(&c.in, 1, (int64_t[]){3}, (double[]){-2.0, 3.0, 0.0});
    expect_out(&c, (double[]){0.0, 9.0, 0.0}, 0);
    tc_free(&c);

    /* gated: [gate | up] */
    tc_init(&c, TX_TE_SWIGLU);
    set_values(&c.in, 2, (int64_t[]){1, 2}, (double[]){1.0, 2.0});
    expect_out(&c, (double[]){1.4621171572600098}, 1e-12);
    tc_free(&c);
    tc_init(&c, TX_TE_REGLU);
    set_values(&c.in, 2, (int64_t[]){2, 2}, (double[]){-1.0, 5.0, 3.0, 2.0});
    expect_out(&c, (double[]){0.0, 6.0}, 0);
    tc_free(&c);
    tc_init(&c, TX_TE_CLAMPED_SWIGLU);
    c.attrs[TX_TE_A_CLAMP_LIMIT].f = 1.0;
    set_values(&c.in, 2, (int64_t[]){1, 2}, (double[]){2.0, 3.0}); /* gate -> 1, up -> 1 + 1 */
    expect_out(&c, (double[]){1.6915915318656425}, 1e-12);
    tc_free(&c);
    /* the same clamp, scaled per row */
    tc_init(&c, TX_TE_SCALED_CLAMPED_QGEGLU);
    c.attrs[TX_TE_A_CLAMP_LIMIT].f = 1.0;
    set_values(&c.in, 2, (int64_t[]){1, 2}, (double[]){2.0, 3.0});
    set_values(&c.ex[0], 1, (int64_t[]){1}, (double[]){0.5});
    c.ex_present[0] = true;
    expect_out(&c, (double[]){0.5 * 1.6915915318656425}, 1e-12);
    tc_free(&c);
    /* SiTU: beta1·tanh(a/beta1)·σ(a)·beta2·tanh(b/beta2); defaults 4, 25 */
    tc_init(&c, TX_TE_SITUGLU);
    set_values(&c.in, 2, (int64_t[]){2, 2}, (double[]){1.0, 2.0, -3.0, 5.0});
    expect_out(&c, (double[]){1.4293511315552199, -0.5945436833059362}, 1e-12);
    tc_free(&c);
    tc_init(&c, TX_TE_SCALED_SITUGLU);
    c.attrs[TX_TE_A_SITU_BETA1].f = 1.5;
    c.attrs[TX_TE_A_SITU_BETA2].f = 0.8;
    set_values(&c.in, 2, (int64_t[]){1, 2}, (double[]){3.0, -2.0});
    set_values(&c.ex[0], 1, (int64_t[]){1}, (double[]){-0.25});
    c.ex_present[0] = true;
    expect_out(&c, (double[]){0.2718046610520355}, 1e-12);
    tc_free(&c);

    /* LayerNorm of [1, 2, 3, 4]: mean 2.5, variance 1.25 */
    tc_init(&c, TX_TE_LAYER_NORM);
    c.attrs[TX_TE_A_NORM_EPS].f = 0.0;
    set_values(&c.in, 2, (int64_t[]){1, 4}, (double[]){1, 2, 3, 4});
    set_values(&c.par[0], 1, (int64_t[]){4}, (double[]){1, 2, 1, 1});
    set_values(&c.par[1], 1, (int64_t[]){4}, (double[]){0, 0, 1, 0});
    c.n_par = 2;
    const double r = 0.894427190999916; /* 1/sqrt(1.25) */
    expect_out(&c, (double[]){-1.5 * r, -0.5 * r * 2, 0.5 * r + 1, 1.5 * r}, 1e-12);
    assert_true(fabs(tc_get(&c.aux[0], 0) - 2.5) < 1e-15);
    assert_true(fabs(tc_get(&c.aux[1], 0) - r) < 1e-15);
    tc_free(&c);

    tc_init(&c, TX_TE_RMS_NORM);
    c.attrs[TX_TE_A_NORM_EPS].f = 0.0;
    set_values(&c.in, 1, (int64_t[]){2}, (double[]){3, 4});
    set_values(&c.par[0], 1, (int64_t[]){2}, (double[]){1, 1});
    c.n_par = 1;
    expect_out(&c, (double[]){3 / sqrt(12.5), 4 / sqrt(12.5)}, 1e-12);
    tc_free(&c);

    tc_init(&c, TX_TE_L2_NORMALIZATION);
    c.attrs[TX_TE_A_L2_EPS].f = 0.0;
    set_values(&c.in, 2, (int64_t[]){1, 2}, (double[]){3, 4});
    expect_out(&c, (double[]){0.6, 0.8}, 1e-15);
    tc_free(&c);

    /* Linear: y = x·Wᵀ with W [N, K] */
    tc_init(&c, TX_TE_LINEAR);
    set_values(&c.in, 2, (int64_t[]){1, 2}, (double[]){1, 2});
    set_values(&c.par[0], 2, (int64_t[]){3, 2}, (double[]){1, 0, 0, 1, 1, 1});
    c.n_par = 1;
    expect_out(&c, (double[]){1, 2, 3}, 0);
    tc_free(&c);

    /* RoPE by a quarter turn: (x0, x1) -> (-x1, x0) on the halves */
    tc_init(&c, TX_TE_ROTARY_EMBEDDING);
    set_values(&c.in, 4, (int64_t[]){1, 1, 1, 2}, (double[]){1, 2});
    set_values(&c.ex[0], 2, (int64_t[]){1, 2}, (double[]){M_PI / 2, M_PI / 2});
    c.ex_present[0] = true;
    expect_out(&c, (double[]){-2, 1}, 1e-15);
    tc_free(&c);
}

static void dtypes_within_tolerance(void **state)
{
    (void)state;
    static const struct { teexec_dtype dt; double rtol; } dts[] = {
        {TEEXEC_DTYPE_FLOAT, 1.3e-6}, {TEEXEC_DTYPE_BFLOAT16, 1.6e-2}, {TEEXEC_DTYPE_FLOAT16, 1e-3}};
    for (int i = 0; i < tc_case_count(); i++)
        for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
            te_case ref, low;
            tc_case_build(i, &ref);
            tc_round_to(&ref, dts[k].dt); /* same representable inputs for both */
            tc_clone_as(&ref, &low, dts[k].dt);
            teexec_status *st = tc_forward(&ref);
            if (!st) st = tc_forward(&low);
            if (st) fail_msg("%s: %s", ref.s->name, teexec_status_message(st));
            if (ref.s->id != TX_TE_EMBEDDING) assert_int_equal(low.out.dtype, dts[k].dt);
            char what[96];
            snprintf(what, sizeof what, "%s as %s", ref.s->name, teexec_dtype_name(dts[k].dt));
            tc_assert_close(&low.out, &ref.out, dts[k].rtol, 1e-5, what);
            for (int j = 0; j < ref.s->n_extra_outputs; j++)
                tc_assert_close(&low.xo[j], &ref.xo[j], dts[k].rtol, 1e-5, what);
            tc_free(&ref);
            tc_free(&low);
        }
}

/* The tolerance check can fail: a bf16 result compared at fp32 tolerance. */
static void dtype_check_is_not_vacuous(void **state)
{
    (void)state;
    te_case ref, low;
    tc_case_build(0, &ref); /* Linear */
    tc_round_to(&ref, TEEXEC_DTYPE_BFLOAT16);
    tc_clone_as(&ref, &low, TEEXEC_DTYPE_BFLOAT16);
    assert_null(tc_forward(&ref));
    assert_null(tc_forward(&low));
    double worst = 0;
    for (uint64_t i = 0; i < ref.out.numel; i++) {
        double w = tc_get(&ref.out, i), g = tc_get(&low.out, i);
        if (fabs(w) > 1e-3) worst = fmax(worst, fabs(g - w) / fabs(w));
    }
    assert_true(worst > 1.3e-6 && worst < 1.6e-2);
    tc_free(&ref);
    tc_free(&low);
}

static void grouped_linear_rows_outside_groups(void **state)
{
    (void)state;
    te_case c;
    for (int i = 0; i < tc_case_count(); i++) {
        tc_case_build(i, &c);
        if (c.op == TX_TE_GROUPED_LINEAR && c.attrs[TX_TE_A_GL_NUM_GROUPS].i == 3) break;
        tc_free(&c);
    }
    assert_int_equal(c.op, TX_TE_GROUPED_LINEAR);
    assert_null(tc_forward(&c)); /* x [10, 4], splits {2, 0, 5}: rows 7..9 in no group */
    int64_t n = c.out.dims[1];
    for (int64_t r = 0; r < 10; r++) {
        bool any = false;
        for (int64_t j = 0; j < n; j++) any |= tc_get(&c.out, (uint64_t)(r * n + j)) != 0.0;
        assert_int_equal(any, r < 7);
    }
    /* row 3 (group 2) = x_3 · W_2ᵀ + b_2 */
    for (int64_t j = 0; j < n; j++) {
        double want = tc_get(&c.par[5], (uint64_t)j);
        for (int64_t k = 0; k < 4; k++)
            want += tc_get(&c.in, (uint64_t)(3 * 4 + k)) * tc_get(&c.par[2], (uint64_t)(j * 4 + k));
        assert_true(fabs(tc_get(&c.out, (uint64_t)(3 * n + j)) - want) < 1e-12);
    }
    /* backward: no gradient for rows 7..9 nor for the empty group 1 */
    const tx_tensor *exv[1] = {&c.ex[0]}, *pv[6];
    for (int i = 0; i < 6; i++) pv[i] = &c.par[i];
    tx_te_fwd_args fa = {c.op, c.attrs, &c.in, exv, 1, pv, 6, &c.out, NULL, 0, NULL, 0, true, 0};
    const tx_tensor *saved[TX_TE_SAVED_CAP(6)];
    int ns;
    assert_null(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(6), &ns));
    assert_int_equal(ns, 8);
    tx_tensor dy = {0}, dx = {0}, dp[6] = {{0}};
    tc_fill(&dy, D, 2, c.out.dims, 9, 0.5, 1);
    assert_null(tx_tensor_alloc(&dx, D, 2, c.in.dims));
    tx_tensor *dpv[6];
    for (int i = 0; i < 6; i++) {
        tc_fill(&dp[i], D, c.par[i].rank, c.par[i].dims, 10, 5, 6); /* sentinels: must be overwritten */
        dpv[i] = &dp[i];
    }
    tx_te_bwd_args ba = {c.op, c.attrs, &dy, NULL, 0, saved, ns, &dx, dpv, 6, NULL, 0, NULL};
    assert_null(tx_te_cpu_backward(&ba));
    for (int64_t r = 7; r < 10; r++)
        for (int64_t k = 0; k < 4; k++) assert_true(tc_get(&dx, (uint64_t)(r * 4 + k)) == 0.0);
    for (uint64_t i = 0; i < dp[1].numel; i++) assert_true(tc_get(&dp[1], i) == 0.0);
    for (uint64_t i = 0; i < dp[4].numel; i++) assert_true(tc_get(&dp[4], i) == 0.0);
    /* db_0 = rows 0..1 of dy summed */
    for (int64_t j = 0; j < n; j++)
        assert_true(fabs(tc_get(&dp[3], (uint64_t)j) - tc_get(&dy, (uint64_t)j) -
                         tc_get(&dy, (uint64_t)(n + j))) < 1e-12);
    tx_tensor_release(&dy);
    tx_tensor_release(&dx);
    for (int i = 0; i < 6; i++) tx_tensor_release(&dp[i]);

    /* splits running past the rows are refused */
    ((int64_t *)c.ex[0].data)[2] = 9;
    teexec_status *st = tc_forward(&c);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "split_sizes[2]"));
    teexec_status_destroy(st);
    tc_free(&c);
}

/* Straightforward attention in double, written from the definition. */
static void naive_attention(const te_case *c, double *out)
{
    bool sbhd = c->attrs[TX_TE_A_DPA_LAYOUT].i == TX_TE_LAYOUT_SBHD;
    bool causal = c->attrs[TX_TE_A_DPA_CAUSAL].i != 0;
    const tx_tensor *q = &c->in, *k = &c->ex[0], *v = &c->ex[1];
    const tx_tensor *m = c->ex_present[2] ? &c->ex[2] : NULL;
    int64_t B = sbhd ? q->dims[1] : q->dims[0], SQ = sbhd ? q->dims[0] : q->dims[1];
    int64_t H = q->dims[2], Dh = q->dims[3], SK = sbhd ? k->dims[0] : k->dims[1];
    int64_t HK = k->dims[2], DV = v->dims[3];
    double scale = c->attrs[TX_TE_A_DPA_SCALE].f ? c->attrs[TX_TE_A_DPA_SCALE].f : 1 / sqrt((double)Dh);
#define IDX(b, s, h, d, S, NH, C) (sbhd ? (((s) * B + (b)) * (NH) + (h)) * (C) + (d) : (((b) * (S) + (s)) * (NH) + (h)) * (C) + (d))
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < SQ; i++) {
                int64_t kh = h * HK / H;
                double sc[64], mx = -INFINITY;
                for (int64_t j = 0; j < SK; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < Dh; d++)
                        s += tc_get(q, (uint64_t)IDX(b, i, h, d, SQ, H, Dh)) *
                             tc_get(k, (uint64_t)IDX(b, j, kh, d, SK, HK, Dh));
                    s *= scale;
                    uint64_t mi = (uint64_t)((((m && m->dims[0] > 1 ? b : 0) * (m ? m->dims[1] : 1) +
                                               (m && m->dims[1] > 1 ? h : 0)) * SQ + i) * SK + j);
                    if (m && m->dtype == TEEXEC_DTYPE_BOOL && ((uint8_t *)m->data)[mi]) s = -INFINITY;
                    else if (m && m->dtype != TEEXEC_DTYPE_BOOL) s += tc_get(m, mi);
                    if (causal && j > i + SK - SQ) s = -INFINITY;
                    sc[j] = s;
                    if (s > mx) mx = s;
                }
                double den = 0;
                for (int64_t j = 0; j < SK; j++) den += mx == -INFINITY ? 0 : exp(sc[j] - mx);
                for (int64_t d = 0; d < DV; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < SK; j++)
                        if (mx != -INFINITY)
                            acc += exp(sc[j] - mx) / den * tc_get(v, (uint64_t)IDX(b, j, kh, d, SK, HK, DV));
                    out[IDX(b, i, h, d, SQ, H, DV)] = acc;
                }
            }
#undef IDX
}

static void attention_matches_naive_reference(void **state)
{
    (void)state;
    int found = 0;
    for (int i = 0; i < tc_case_count(); i++) {
        te_case c;
        tc_case_build(i, &c);
        if (c.op != TX_TE_DOT_PRODUCT_ATTENTION) {
            tc_free(&c);
            continue;
        }
        for (int variant = 0; variant < 2; variant++) {
            if (variant == 1) { /* no mask, not causal */
                tx_tensor_release(&c.ex[2]);
                c.ex_present[2] = false;
                c.attrs[TX_TE_A_DPA_CAUSAL].i = 0;
            }
            assert_null(tc_forward(&c));
            double *want = calloc((size_t)c.out.numel, sizeof(double));
            assert_non_null(want);
            naive_attention(&c, want);
            for (uint64_t e = 0; e < c.out.numel; e++)
                if (fabs(tc_get(&c.out, e) - want[e]) > 1e-12)
                    fail_msg("attention case %d/%d: y[%llu] = %.15g, naive %.15g", i, variant,
                             (unsigned long long)e, tc_get(&c.out, e), want[e]);
            free(want);
        }
        found++;
        tc_free(&c);
    }
    assert_int_equal(found, 2);
}

static void attention_causal_hides_the_future(void **state)
{
    (void)state;
    te_case c;
    tc_init(&c, TX_TE_DOT_PRODUCT_ATTENTION);
    c.attrs[TX_TE_A_DPA_CAUSAL].i = 1;
    tc_fill(&c.in, D, 4, (int64_t[]){1, 4, 2, 3}, 1, -1, 1);
    tc_fill(&c.ex[0], D, 4, (int64_t[]){1, 4, 1, 3}, 2, -1, 1);
    tc_fill(&c.ex[1], D, 4, (int64_t[]){1, 4, 1, 3}, 3, -1, 1);
    c.ex_present[0] = c.ex_present[1] = true;
    assert_null(tc_forward(&c));
    /* query 0 sees only key 0: its output is v_0 for both heads (GQA 2:1) */
    for (int h = 0; h < 2; h++)
        for (int d = 0; d < 3; d++)
            assert_true(fabs(tc_get(&c.out, (uint64_t)(h * 3 + d)) - tc_get(&c.ex[1], (uint64_t)d)) < 1e-15);
    tx_tensor before = {0};
    assert_null(tx_tensor_clone(&c.out, &before));
    for (int d = 0; d < 3; d++) { /* change key/value 3: rows 0..2 must not move */
        tc_set(&c.ex[0], (uint64_t)(9 + d), 5.0);
        tc_set(&c.ex[1], (uint64_t)(9 + d), -7.0);
    }
    assert_null(tc_forward(&c));
    for (uint64_t e = 0; e < 3 * 6; e++) assert_true(tc_get(&c.out, e) == tc_get(&before, e));
    bool moved = false;
    for (uint64_t e = 3 * 6; e < 4 * 6; e++) moved |= tc_get(&c.out, e) != tc_get(&before, e);
    assert_true(moved);
    tx_tensor_release(&before);
    tc_free(&c);
}

/* The forward spreads its (batch row, head) pairs over the BLAS threads
 * when the work is large (kernels/cpu/te_attention.c): the output and the
 * saved log-sum-exp must be the same bytes for 1 and 3 threads, in fp32 and
 * fp64, causal GQA above the threading threshold (~2M multiply-adds). */
static void attention_threads_give_the_same_bits(void **state)
{
    (void)state;
    const teexec_dtype dts[2] = {TEEXEC_DTYPE_FLOAT, D};
    const int saved_threads = openblas_get_num_threads();
    for (int k = 0; k < 2; k++) {
        te_case c[2];
        for (int t = 0; t < 2; t++) {
            tc_init(&c[t], TX_TE_DOT_PRODUCT_ATTENTION);
            c[t].attrs[TX_TE_A_DPA_CAUSAL].i = 1;
            c[t].training = true; /* the log-sum-exp aux too */
            tc_fill(&c[t].in, dts[k], 4, (int64_t[]){3, 96, 4, 32}, 11, -1, 1);
            tc_fill(&c[t].ex[0], dts[k], 4, (int64_t[]){3, 96, 2, 32}, 12, -1, 1);
            tc_fill(&c[t].ex[1], dts[k], 4, (int64_t[]){3, 96, 2, 32}, 13, -1, 1);
            c[t].ex_present[0] = c[t].ex_present[1] = true;
            openblas_set_num_threads(t == 0 ? 1 : 3);
            assert_null(tc_forward(&c[t]));
        }
        assert_int_equal(c[0].out.nbytes, c[1].out.nbytes);
        assert_memory_equal(c[0].out.data, c[1].out.data, c[0].out.nbytes);
        assert_true(c[0].s->n_aux > 0 && c[0].aux[0].nbytes > 0);
        assert_memory_equal(c[0].aux[0].data, c[1].aux[0].data, c[0].aux[0].nbytes);
        tc_free(&c[0]);
        tc_free(&c[1]);
    }
    openblas_set_num_threads(saved_threads);
}

/* The cache mode (k_cache, v_cache, cache_len): the new rows land in the
 * caches at each row's cache length, in place, the rest of the caches stays
 * as it was, and each row's output equals plain attention over the row's
 * cached keys followed by the new ones (the naive reference, causal
 * bottom-right aligned). Row lengths 0, 2 and 4 of a capacity of 6, s_q 2
 * and 1, causal or not, GQA 2:1. */
static void attention_cache_mode_appends_and_matches(void **state)
{
    (void)state;
    enum { B = 3, CAP = 6, H = 2, HK = 1, DH = 3 };
    const int64_t lens[B] = {0, 2, 4};
    assert_int_equal(tx_te_schema(TX_TE_DOT_PRODUCT_ATTENTION)->n_extra_inputs, TX_TE_DPA_N_IN);
    for (int variant = 0; variant < 4; variant++) {
        int64_t sq = variant & 1 ? 1 : 2;
        bool causal = variant < 2;
        te_case c;
        tc_init(&c, TX_TE_DOT_PRODUCT_ATTENTION);
        c.training = false; /* the cache mode is inference only */
        c.attrs[TX_TE_A_DPA_CAUSAL].i = causal;
        tc_fill(&c.in, D, 4, (int64_t[]){B, sq, H, DH}, 11 + variant, -1, 1);
        tc_fill(&c.ex[0], D, 4, (int64_t[]){B, sq, HK, DH}, 12, -1, 1);
        tc_fill(&c.ex[1], D, 4, (int64_t[]){B, sq, HK, DH}, 13, -1, 1);
        tc_fill(&c.ex[TX_TE_DPA_IN_K_CACHE], D, 4, (int64_t[]){B, CAP, HK, DH}, 14, -1, 1);
        tc_fill(&c.ex[TX_TE_DPA_IN_V_CACHE], D, 4, (int64_t[]){B, CAP, HK, DH}, 15, -1, 1);
        assert_null(tx_tensor_alloc(&c.ex[TX_TE_DPA_IN_CACHE_LEN], TEEXEC_DTYPE_INT64, 1,
                                    (int64_t[]){B}));
        memcpy(c.ex[TX_TE_DPA_IN_CACHE_LEN].data, lens, sizeof lens);
        for (int i = 0; i < TX_TE_DPA_N_IN; i++) c.ex_present[i] = i != TX_TE_DPA_IN_MASK;
        tx_tensor kc0 = {0}, vc0 = {0};
        assert_null(tx_tensor_clone(&c.ex[TX_TE_DPA_IN_K_CACHE], &kc0));
        assert_null(tx_tensor_clone(&c.ex[TX_TE_DPA_IN_V_CACHE], &vc0));
        teexec_status *st = tc_forward(&c);
        if (st) fail_msg("cache variant %d: %s", variant, teexec_status_message(st));

        const tx_tensor *kc = &c.ex[TX_TE_DPA_IN_K_CACHE], *vc = &c.ex[TX_TE_DPA_IN_V_CACHE];
        for (int64_t r = 0; r < B; r++) {
            /* the caches: new rows at [len, len + sq), the rest untouched */
            for (int64_t p = 0; p < CAP; p++)
                for (int64_t e = 0; e < HK * DH; e++) {
                    uint64_t at = (uint64_t)((r * CAP + p) * HK * DH + e);
                    bool fresh = p >= lens[r] && p < lens[r] + sq;
                    uint64_t src = (uint64_t)((r * sq + (p - lens[r])) * HK * DH + e);
                    assert_true(tc_get(kc, at) == (fresh ? tc_get(&c.ex[0], src) : tc_get(&kc0, at)));
                    assert_true(tc_get(vc, at) == (fresh ? tc_get(&c.ex[1], src) : tc_get(&vc0, at)));
                }
            /* the row alone, over its len + sq keys, without the cache mode */
            int64_t skv = lens[r] + sq;
            te_case one;
            tc_init(&one, TX_TE_DOT_PRODUCT_ATTENTION);
            one.attrs[TX_TE_A_DPA_CAUSAL].i = causal;
            tc_fill(&one.in, D, 4, (int64_t[]){1, sq, H, DH}, 1, 0, 0);
            tc_fill(&one.ex[0], D, 4, (int64_t[]){1, skv, HK, DH}, 1, 0, 0);
            tc_fill(&one.ex[1], D, 4, (int64_t[]){1, skv, HK, DH}, 1, 0, 0);
            for (uint64_t e = 0; e < one.in.numel; e++)
                tc_set(&one.in, e, tc_get(&c.in, (uint64_t)r * one.in.numel + e));
            for (uint64_t e = 0; e < one.ex[0].numel; e++) {
                tc_set(&one.ex[0], e, tc_get(kc, (uint64_t)(r * CAP * HK * DH) + e));
                tc_set(&one.ex[1], e, tc_get(vc, (uint64_t)(r * CAP * HK * DH) + e));
            }
            double want[2 * H * DH];
            naive_attention(&one, want);
            for (uint64_t e = 0; e < (uint64_t)(sq * H * DH); e++) {
                double got = tc_get(&c.out, (uint64_t)(r * sq * H * DH) + e);
                if (fabs(got - want[e]) > 1e-12)
                    fail_msg("cache variant %d row %lld: y[%llu] = %.15g, naive %.15g", variant,
                             (long long)r, (unsigned long long)e, got, want[e]);
            }
            tc_free(&one);
        }
        tx_tensor_release(&kc0);
        tx_tensor_release(&vc0);
        tc_free(&c);
    }
}

/* The cache mode refuses what it cannot run, and a refused call leaves the
 * caches as they were. */
static void attention_cache_mode_refusals(void **state)
{
    (void)state;
    te_case c;
    tc_init(&c, TX_TE_DOT_PRODUCT_ATTENTION);
    c.attrs[TX_TE_A_DPA_CAUSAL].i = 1;
    tc_fill(&c.in, D, 4, (int64_t[]){2, 2, 2, 4}, 1, -1, 1);
    tc_fill(&c.ex[0], D, 4, (int64_t[]){2, 2, 2, 4}, 2, -1, 1);
    tc_fill(&c.ex[1], D, 4, (int64_t[]){2, 2, 2, 4}, 3, -1, 1);
    tc_fill(&c.ex[TX_TE_DPA_IN_K_CACHE], D, 4, (int64_t[]){2, 5, 2, 4}, 4, -1, 1);
    tc_fill(&c.ex[TX_TE_DPA_IN_V_CACHE], D, 4, (int64_t[]){2, 5, 2, 4}, 5, -1, 1);
    assert_null(tx_tensor_alloc(&c.ex[TX_TE_DPA_IN_CACHE_LEN], TEEXEC_DTYPE_INT64, 1,
                                (int64_t[]){2}));
    int64_t *len = c.ex[TX_TE_DPA_IN_CACHE_LEN].data;
    len[0] = 3; /* 3 + 2 = 5: fits exactly */
    len[1] = 4; /* 4 + 2 > 5 */
    for (int i = 0; i < TX_TE_DPA_N_IN; i++) c.ex_present[i] = i != TX_TE_DPA_IN_MASK;
    tx_tensor kc0 = {0};
    assert_null(tx_tensor_clone(&c.ex[TX_TE_DPA_IN_K_CACHE], &kc0));
    struct { const char *why; const char *want; teexec_code code; } cases[] = {
        {"past the capacity", "cache_len[1] = 4", TEEXEC_ERR_INVALID_ARGUMENT},
        {"negative length", "cache_len[1] = -1", TEEXEC_ERR_INVALID_ARGUMENT},
        {"training", "inference only", TEEXEC_ERR_UNSUPPORTED},
        {"with a mask", "mask", TEEXEC_ERR_INVALID_ARGUMENT},
        {"sbhd", "bshd", TEEXEC_ERR_INVALID_ARGUMENT},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        len[1] = k == 1 ? -1 : 4;
        if (k >= 2) len[1] = 0;
        c.training = k == 2;
        if (k == 3) {
            assert_null(tx_tensor_alloc(&c.ex[TX_TE_DPA_IN_MASK], TEEXEC_DTYPE_BOOL, 4,
                                        (int64_t[]){2, 1, 2, 5}));
            memset(c.ex[TX_TE_DPA_IN_MASK].data, 0, c.ex[TX_TE_DPA_IN_MASK].nbytes);
            c.ex_present[TX_TE_DPA_IN_MASK] = true;
        } else if (c.ex_present[TX_TE_DPA_IN_MASK]) {
            tx_tensor_release(&c.ex[TX_TE_DPA_IN_MASK]);
            c.ex_present[TX_TE_DPA_IN_MASK] = false;
        }
        c.attrs[TX_TE_A_DPA_LAYOUT].i = k == 4 ? TX_TE_LAYOUT_SBHD : TX_TE_LAYOUT_BSHD;
        teexec_status *st = tc_forward(&c);
        if (!st) fail_msg("cache mode %s: accepted", cases[k].why);
        if (teexec_status_code(st) != cases[k].code || !strstr(teexec_status_message(st), cases[k].want))
            fail_msg("cache mode %s: %s", cases[k].why, teexec_status_message(st));
        teexec_status_destroy(st);
        assert_memory_equal(c.ex[TX_TE_DPA_IN_K_CACHE].data, kc0.data, kc0.nbytes);
    }
    tx_tensor_release(&kc0);
    tc_free(&c);
}

static void dropout_mask_is_deterministic(void **state)
{
    (void)state;
    te_case a, b;
    tc_init(&a, TX_TE_DROPOUT);
    a.attrs[TX_TE_A_DROPOUT_P].f = 0.25;
    a.attrs[TX_TE_A_DROPOUT_SEED].i = 1234;
    a.rng_offset = 5;
    tc_fill(&a.in, TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){64, 67}, 3, 0.5, 1.5); /* never 0 */
    tc_clone_as(&a, &b, TEEXEC_DTYPE_FLOAT);
    assert_null(tc_forward(&a));
    assert_null(tc_forward(&b));
    assert_memory_equal(a.aux[0].data, b.aux[0].data, a.aux[0].nbytes);
    assert_memory_equal(a.out.data, b.out.data, a.out.nbytes);
    /* mask bits agree with the output; kept values are x / (1 - p) */
    uint64_t kept = 0, n = a.in.numel;
    const uint8_t *mask = a.aux[0].data;
    for (uint64_t i = 0; i < n; i++) {
        bool k = (mask[i / 8] >> (i % 8)) & 1;
        float y = ((float *)a.out.data)[i], x = ((float *)a.in.data)[i];
        kept += k;
        assert_true(k ? y == x * (float)(1.0 / 0.75) : y == 0.0f);
    }
    double frac = 1.0 - (double)kept / (double)n;
    assert_true(fabs(frac - 0.25) < 0.03);
    /* another offset or seed draws another mask */
    b.rng_offset = 6;
    assert_null(tc_forward(&b));
    assert_memory_not_equal(a.aux[0].data, b.aux[0].data, a.aux[0].nbytes);
    b.rng_offset = 5;
    b.attrs[TX_TE_A_DROPOUT_SEED].i = 1235;
    assert_null(tc_forward(&b));
    assert_memory_not_equal(a.aux[0].data, b.aux[0].data, a.aux[0].nbytes);
    /* bf16 input draws the same mask (the draw does not depend on values) */
    te_case h;
    tc_clone_as(&a, &h, TEEXEC_DTYPE_BFLOAT16);
    assert_null(tc_forward(&h));
    assert_memory_equal(a.aux[0].data, h.aux[0].data, a.aux[0].nbytes);
    /* inference: identity */
    b.training = false;
    assert_null(tc_forward(&b));
    assert_memory_equal(b.out.data, b.in.data, b.in.nbytes);
    tc_free(&a);
    tc_free(&b);
    tc_free(&h);
}

static void embedding_refuses_bad_index(void **state)
{
    (void)state;
    te_case c;
    tc_init(&c, TX_TE_EMBEDDING);
    assert_null(tx_tensor_alloc(&c.in, TEEXEC_DTYPE_INT64, 1, (int64_t[]){2}));
    ((int64_t *)c.in.data)[1] = 3;
    tc_fill(&c.par[0], TEEXEC_DTYPE_FLOAT, 2, (int64_t[]){3, 2}, 1, -1, 1);
    c.n_par = 1;
    teexec_status *st = tc_forward(&c);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "index 3"));
    teexec_status_destroy(st);
    ((int64_t *)c.in.data)[1] = 2;
    assert_null(tc_forward(&c));
    assert_memory_equal((float *)c.out.data + 2, (float *)c.par[0].data + 4, 2 * sizeof(float));
    tc_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_checked_values),
        cmocka_unit_test(dtypes_within_tolerance),
        cmocka_unit_test(dtype_check_is_not_vacuous),
        cmocka_unit_test(grouped_linear_rows_outside_groups),
        cmocka_unit_test(attention_matches_naive_reference),
        cmocka_unit_test(attention_causal_hides_the_future),
        cmocka_unit_test(attention_cache_mode_appends_and_matches),
        cmocka_unit_test(attention_cache_mode_refusals),
        cmocka_unit_test(attention_threads_give_the_same_bits),
        cmocka_unit_test(dropout_mask_is_deterministic),
        cmocka_unit_test(embedding_refuses_bad_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
