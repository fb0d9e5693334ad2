/* GPU test: the CUDA LayerNorm / RMSNorm and activation kernels (forward,
 * backward, fused dact+dbias, bias grad) against the CPU te.ops kernels
 * (kernels/cpu/te_norm.c, te_activation.c, te_linear.c's Bias) on the same
 * inputs, within DESIGN.md's tolerances (bf16 rtol 1.6e-2; fp32 here 2e-5
 * relative + 2e-6 absolute: the GPU reduces rows in FP32 tree order where
 * the CPU accumulates in double). Deterministic reductions are checked by
 * running each backward twice and comparing the bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/tensor.h"
#include "kernels/cpu/te_args.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/norm.h"
#include "tests/gpu/gpu_harness.h"

#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F32 TEEXEC_DTYPE_FLOAT

static uint64_t rng_state;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* A host tensor of dtype dt, values uniform in [lo, hi) rounded to dt. */
static void make(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims, double lo,
                 double hi)
{
    TG_OK(tx_tensor_alloc(t, dt, rank, dims));
    for (uint64_t i = 0; i < t->numel; i++) {
        float v = (float)(lo + (hi - lo) * urand());
        if (dt == BF16) ((uint16_t *)t->data)[i] = tx_f32_to_bf16(v);
        else ((float *)t->data)[i] = v;
    }
}

static float get(const tx_tensor *t, uint64_t i)
{
    return t->dtype == BF16 ? tx_bf16_to_f32(((const uint16_t *)t->data)[i])
                            : ((const float *)t->data)[i];
}

/* Compares a GPU buffer (same dtype and size as ref) with the CPU result.
 * sum_terms > 0 marks a column sum over that many rows: FP32 summation in
 * a different order can then differ by about n * eps * sum|terms| (terms
 * here are below ~5 in magnitude), which a relative bound on a result that
 * cancels to near zero would not allow. */
static void expect_close_n(const char *what, const tx_tensor *ref, const void *dev,
                           int64_t sum_terms)
{
    void *host = malloc(ref->nbytes);
    assert_non_null(host);
    tg_download(host, dev, ref->nbytes);
    tx_tensor got = *ref;
    got.data = host;
    got.owns_data = false;
    double rtol = ref->dtype == BF16 ? 1.6e-2 : 2e-5, atol = ref->dtype == BF16 ? 1e-2 : 2e-6;
    if (sum_terms > 0 && ref->dtype != BF16) atol = 5.0 * 1.2e-7 * (double)sum_terms;
    size_t bad = 0;
    double worst = 0.0;
    for (uint64_t i = 0; i < ref->numel; i++) {
        double a = get(ref, i), b = get(&got, i);
        double err = fabs(a - b), lim = atol + rtol * fabs(a);
        if (err > lim || isnan(b) != isnan(a)) {
            if (!bad) fprintf(stderr, "%s: element %llu cpu %.9g gpu %.9g\n", what,
                              (unsigned long long)i, a, b);
            bad++;
        }
        if (fabs(a) > 1e-3 && err / fabs(a) > worst) worst = err / fabs(a);
    }
    free(host);
    char detail[160];
    snprintf(detail, sizeof detail, "%zu of %llu outside tolerance, worst rel %.3g", bad,
             (unsigned long long)ref->numel, worst);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

static void expect_close(const char *what, const tx_tensor *ref, const void *dev)
{
    expect_close_n(what, ref, dev, 0);
}

static void *upload(const tx_tensor *t) { return tg_dev_upload(t->data, t->nbytes); }

typedef struct norm_case {
    const char *name;
    int rms;
    int64_t rows, h;
    teexec_dtype dt;
    int zcg;
} norm_case;

static void run_norm(void **state)
{
    const norm_case *c = *state;
    rng_state = (uint64_t)c->rows * 7919u + (uint64_t)c->h;
    tx_te_op_id op = c->rms ? TX_TE_RMS_NORM : TX_TE_LAYER_NORM;
    const tx_te_op_schema *s = tx_te_schema(op);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    attrs[TX_TE_A_NORM_ZCG].i = c->zcg;
    int64_t xd[2] = {c->rows, c->h}, wd[1] = {c->h}, rd[1] = {c->rows};
    tx_tensor x = {0}, g = {0}, b = {0}, y = {0}, mu = {0}, rs = {0}, dy = {0}, dx = {0},
              dg = {0}, db = {0};
    make(&x, c->dt, 2, xd, -3.0, 5.0);
    make(&g, c->dt, 1, wd, 0.5, 1.5);
    make(&b, c->dt, 1, wd, -0.5, 0.5);
    make(&dy, c->dt, 2, xd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&y, c->dt, 2, xd));
    TG_OK(tx_tensor_alloc(&mu, F32, 1, rd));
    TG_OK(tx_tensor_alloc(&rs, F32, 1, rd));
    TG_OK(tx_tensor_alloc(&dx, c->dt, 2, xd));
    TG_OK(tx_tensor_alloc(&dg, c->dt, 1, wd));
    TG_OK(tx_tensor_alloc(&db, c->dt, 1, wd));
    const tx_tensor *params[2] = {&g, &b};
    tx_tensor *aux[2] = {c->rms ? &rs : &mu, &rs};
    tx_te_fwd_args fa = {.op = op, .attrs = attrs, .input = &x, .params = params,
                         .n_params = c->rms ? 1 : 2, .output = &y, .aux = aux,
                         .n_aux = c->rms ? 1 : 2, .training = true};
    TG_OK(tx_te_cpu_forward(&fa));
    const tx_tensor *saved[TX_TE_SAVED_CAP(2)];
    int n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(2), &n_saved));
    tx_tensor *gp[2] = {&dg, &db};
    tx_te_bwd_args ba = {.op = op, .attrs = attrs, .grad_output = &dy, .saved = saved,
                         .n_saved = n_saved, .grad_input = &dx, .grad_params = gp,
                         .n_grad_params = c->rms ? 1 : 2};
    TG_OK(tx_te_cpu_backward(&ba));

    void *dX = upload(&x), *dG = upload(&g), *dB = upload(&b), *dDY = upload(&dy);
    void *dY = tg_dev_alloc(y.nbytes), *dMU = tg_dev_alloc(mu.nbytes), *dRS = tg_dev_alloc(rs.nbytes);
    void *dDX = tg_dev_alloc(dx.nbytes), *dDG = tg_dev_alloc(dg.nbytes), *dDB = tg_dev_alloc(db.nbytes);
    size_t wsf = tx_cuda_norm_bwd_workspace_floats((size_t)c->rows, (size_t)c->h);
    float *ws = tg_dev_alloc(wsf * sizeof(float));
    tx_cuda_norm_fwd nf = {.rms = c->rms, .rows = (size_t)c->rows, .h = (size_t)c->h,
                           .eps = (float)attrs[TX_TE_A_NORM_EPS].f, .zero_centered_gamma = c->zcg,
                           .x = dX, .x_dtype = c->dt, .gamma = dG, .beta = dB, .w_dtype = c->dt,
                           .y = dY, .y_dtype = c->dt, .mu = c->rms ? NULL : dMU, .rsigma = dRS};
    TG_OK(tx_cuda_norm_forward(&nf, NULL));
    tg_sync("norm forward");
    char what[128];
    snprintf(what, sizeof what, "%s y", c->name);
    expect_close(what, &y, dY);
    snprintf(what, sizeof what, "%s rsigma", c->name);
    expect_close(what, &rs, dRS);
    /* backward from the CPU's statistics, so only the backward is compared */
    tg_upload_to(dRS, rs.data, rs.nbytes);
    if (!c->rms) tg_upload_to(dMU, mu.data, mu.nbytes);
    tx_cuda_norm_bwd nb = {.rms = c->rms, .rows = (size_t)c->rows, .h = (size_t)c->h,
                           .zero_centered_gamma = c->zcg, .x = dX, .x_dtype = c->dt, .dy = dDY,
                           .dy_dtype = c->dt, .gamma = dG, .w_dtype = c->dt,
                           .mu = c->rms ? NULL : dMU, .rsigma = dRS, .dx = dDX, .dx_dtype = c->dt,
                           .dgamma = dDG, .dbeta = c->rms ? NULL : dDB, .workspace = ws};
    TG_OK(tx_cuda_norm_backward(&nb, NULL));
    tg_sync("norm backward");
    snprintf(what, sizeof what, "%s dx", c->name);
    expect_close(what, &dx, dDX);
    snprintf(what, sizeof what, "%s dgamma", c->name);
    expect_close_n(what, &dg, dDG, c->rows);
    if (!c->rms) {
        snprintf(what, sizeof what, "%s dbeta", c->name);
        expect_close_n(what, &db, dDB, c->rows);
    }
    /* deterministic: a second backward gives the same bits */
    uint8_t *first = malloc(dg.nbytes), *second = malloc(dg.nbytes);
    assert_non_null(first);
    assert_non_null(second);
    tg_download(first, dDG, dg.nbytes);
    TG_OK(tx_cuda_norm_backward(&nb, NULL));
    tg_sync("norm backward again");
    tg_download(second, dDG, dg.nbytes);
    assert_int_equal(tg_cmp_bytes("dgamma repeat", first, second, dg.nbytes), 0);
    free(first);
    free(second);
    void *bufs[] = {dX, dG, dB, dDY, dY, dMU, dRS, dDX, dDG, dDB, ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
    tx_tensor *ts[] = {&x, &g, &b, &y, &mu, &rs, &dy, &dx, &dg, &db};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tx_tensor_release(ts[i]);
}

typedef struct act_case {
    const char *name;
    tx_te_op_id op;
    int approx_erf;       /* GELU */
    tx_cuda_act act;
    int64_t rows, cols;   /* cols of the output */
    teexec_dtype dt;
    int with_bias;        /* also compare dact+dbias with Bias's backward */
} act_case;

static void run_act(void **state)
{
    const act_case *c = *state;
    rng_state = (uint64_t)c->rows * 104729u + (uint64_t)c->cols + (uint64_t)c->op;
    int gated = tx_cuda_act_gated(c->act);
    const tx_te_op_schema *s = tx_te_schema(c->op);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    if (c->op == TX_TE_GELU || c->op == TX_TE_GEGLU)
        attrs[TX_TE_A_GELU_APPROX].i = c->approx_erf ? TX_TE_GELU_ERF : TX_TE_GELU_TANH;
    int64_t xd[2] = {c->rows, gated ? 2 * c->cols : c->cols}, yd[2] = {c->rows, c->cols};
    int64_t bd[1] = {c->cols};
    tx_tensor x = {0}, y = {0}, dy = {0}, dx = {0}, db = {0};
    make(&x, c->dt, 2, xd, -4.0, 4.0);
    make(&dy, c->dt, 2, yd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&y, c->dt, 2, yd));
    TG_OK(tx_tensor_alloc(&dx, c->dt, 2, xd));
    TG_OK(tx_tensor_alloc(&db, c->dt, 1, bd));
    tx_te_fwd_args fa = {.op = c->op, .attrs = attrs, .input = &x, .output = &y, .training = true};
    TG_OK(tx_te_cpu_forward(&fa));
    const tx_tensor *saved[TX_TE_SAVED_CAP(0)];
    int n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(0), &n_saved));
    tx_te_bwd_args ba = {.op = c->op, .attrs = attrs, .grad_output = &dy, .saved = saved,
                         .n_saved = n_saved, .grad_input = &dx};
    TG_OK(tx_te_cpu_backward(&ba));
    if (c->with_bias) {
        /* Bias's backward: dbias = column sums of the dx above */
        tx_te_attr_value battrs[TX_TE_MAX_ATTRS];
        tx_te_attr_defaults(tx_te_schema(TX_TE_BIAS), battrs);
        tx_tensor bias = {0}, bx = {0};
        make(&bias, c->dt, 1, bd, 0.0, 0.0);
        make(&bx, c->dt, 2, xd, 0.0, 0.0);
        const tx_tensor *bp[1] = {&bias};
        tx_te_fwd_args bfa = {.op = TX_TE_BIAS, .attrs = battrs, .input = &bx, .params = bp,
                              .n_params = 1, .output = &bx, .training = true};
        const tx_tensor *bsaved[TX_TE_SAVED_CAP(1)];
        int nbs = 0;
        TG_OK(tx_te_setup_context(&bfa, TX_TE_FOR_ALL, bsaved, TX_TE_SAVED_CAP(1), &nbs));
        tx_tensor *bgp[1] = {&db};
        tx_te_bwd_args bba = {.op = TX_TE_BIAS, .attrs = battrs, .grad_output = &dx,
                              .saved = bsaved, .n_saved = nbs, .grad_params = bgp,
                              .n_grad_params = 1};
        TG_OK(tx_te_cpu_backward(&bba));
        tx_tensor_release(&bias);
        tx_tensor_release(&bx);
    }
    void *dX = upload(&x), *dDY = upload(&dy), *dY = tg_dev_alloc(y.nbytes),
         *dDX = tg_dev_alloc(dx.nbytes), *dDB = tg_dev_alloc(db.nbytes);
    float *ws = tg_dev_alloc(tx_cuda_colsum_workspace_floats((size_t)c->rows, (size_t)c->cols) *
                             sizeof(float) + 4);
    tx_cuda_act_args a = {.act = c->act, .rows = (size_t)c->rows, .cols = (size_t)c->cols,
                          .x = dX, .x_dtype = c->dt, .y = dY, .y_dtype = c->dt, .dy = dDY,
                          .dy_dtype = c->dt, .dx = dDX, .dx_dtype = c->dt,
                          .dbias = c->with_bias ? dDB : NULL, .dbias_dtype = c->dt,
                          .workspace = ws};
    TG_OK(tx_cuda_act_forward(&a, NULL));
    TG_OK(tx_cuda_act_backward(&a, NULL));
    tg_sync("activation");
    char what[128];
    snprintf(what, sizeof what, "%s y", c->name);
    expect_close(what, &y, dY);
    snprintf(what, sizeof what, "%s dx", c->name);
    expect_close(what, &dx, dDX);
    if (c->with_bias) {
        snprintf(what, sizeof what, "%s dbias", c->name);
        expect_close_n(what, &db, dDB, c->rows);
    }
    void *bufs[] = {dX, dDY, dY, dDX, dDB, ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
    tx_tensor *ts[] = {&x, &y, &dy, &dx, &db};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tx_tensor_release(ts[i]);
}

static const norm_case norm_cases[] = {
    {"layernorm_bf16_768", 0, 1000, 768, BF16, 0},
    {"layernorm_f32_4096", 0, 257, 4096, F32, 0},
    {"layernorm_bf16_64_zcg", 0, 129, 64, BF16, 1},
    {"rmsnorm_bf16_5120", 1, 300, 5120, BF16, 0},
    {"rmsnorm_f32_768", 1, 513, 768, F32, 1},
};

static const act_case act_cases[] = {
    {"gelu_tanh_bf16_bias", TX_TE_GELU, 0, TX_CUDA_ACT_GELU_TANH, 1000, 3072, BF16, 1},
    {"gelu_erf_f32", TX_TE_GELU, 1, TX_CUDA_ACT_GELU_ERF, 300, 1000, F32, 1},
    {"relu_bf16", TX_TE_RELU, 0, TX_CUDA_ACT_RELU, 100, 4096, BF16, 1},
    {"silu_f32", TX_TE_SILU, 0, TX_CUDA_ACT_SILU, 77, 768, F32, 0},
    {"swiglu_bf16", TX_TE_SWIGLU, 0, TX_CUDA_ACT_SWIGLU, 500, 2048, BF16, 0},
    {"swiglu_f32", TX_TE_SWIGLU, 0, TX_CUDA_ACT_SWIGLU, 33, 64, F32, 0},
    {"geglu_bf16", TX_TE_GEGLU, 0, TX_CUDA_ACT_GEGLU, 64, 1024, BF16, 0},
    {"reglu_f32", TX_TE_REGLU, 0, TX_CUDA_ACT_REGLU, 64, 512, F32, 0},
};

int main(void)
{
    tg_require_gpu("test_gpu_norm_act");
    enum { NN = sizeof norm_cases / sizeof norm_cases[0], NA = sizeof act_cases / sizeof act_cases[0] };
    struct CMUnitTest tests[NN + NA];
    for (size_t i = 0; i < NN; i++) {
        struct CMUnitTest t = {norm_cases[i].name, run_norm, NULL, NULL, (void *)&norm_cases[i]};
        tests[i] = t;
    }
    for (size_t i = 0; i < NA; i++) {
        struct CMUnitTest t = {act_cases[i].name, run_act, NULL, NULL, (void *)&act_cases[i]};
        tests[NN + i] = t;
    }
    return _cmocka_run_group_tests("test_gpu_norm_act", tests, NN + NA, NULL, NULL);
}
