/* GPU test: the multi-tensor CUDA AdamW and SGD-momentum step
 * (kernels/cuda/optim.h) against the CPU optimizer (kernels/cpu/optim.c)
 * over several steps on a list of tensors of mixed dtypes (bf16 / fp16
 * parameters with FP32 masters, fp32 parameters updated in place, an empty
 * tensor, sizes that do and do not fill the last block): masters, model
 * copies and moments must be identical bit for bit. The clipping cases also
 * check the device's gradient norm against an FP64 sum on the host (and
 * that it repeats bit for bit), then step both sides with the factor the
 * device computed as grad_scale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/cpu/optim.h"
#include "kernels/cuda/optim.h"
#include "exec/train_schedule.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

enum { MAXT = 6 };

typedef struct optim_case {
    const char *name;
    tx_optim_kind kind;
    double lr, wd, momentum, dampening;
    int nesterov;
    int steps;
    int n_tensors;
    int64_t sizes[MAXT];
    teexec_dtype dtypes[MAXT];
    double clip; /* gradient-norm clipping bound; 0 = off */
} optim_case;

static void run_optim(void **state)
{
    const optim_case *c = *state;
    ku_seed((uint64_t)c->steps * 17u + (uint64_t)c->sizes[0]);
    tx_optim_config cfg = tx_optim_default(c->kind, c->lr);
    cfg.weight_decay = c->wd;
    cfg.momentum = c->momentum;
    cfg.dampening = c->dampening;
    cfg.nesterov = c->nesterov != 0;
    int nt = c->n_tensors;
    tx_tensor param[MAXT], grad[MAXT];
    tx_optim_slot slot[MAXT];
    tx_cuda_optim_tensor desc[MAXT];
    void *dParam[MAXT], *dGrad[MAXT];
    float *dMaster[MAXT], *dM[MAXT], *dV[MAXT];
    bool need_m = c->kind == TX_OPTIM_ADAMW || c->momentum != 0.0;
    for (int t = 0; t < nt; t++) {
        int64_t d[1] = {c->sizes[t]};
        memset(&param[t], 0, sizeof param[t]);
        memset(&grad[t], 0, sizeof grad[t]);
        ku_make(&param[t], c->dtypes[t], 1, d, -1.0, 1.0);
        TG_OK(tx_tensor_alloc(&grad[t], c->dtypes[t], 1, d));
        TG_OK(tx_optim_slot_init(&slot[t], &cfg, &param[t]));
        size_t n = (size_t)c->sizes[t];
        bool low = c->dtypes[t] != KU_F32;
        dParam[t] = ku_upload(&param[t]);
        dGrad[t] = tg_dev_alloc(grad[t].nbytes);
        dMaster[t] = low ? tg_dev_upload(slot[t].master.data, slot[t].master.nbytes) : dParam[t];
        float *zeros = calloc(n + 1, sizeof(float));
        assert_non_null(zeros);
        dM[t] = need_m ? tg_dev_upload(zeros, (n + 1) * sizeof(float)) : NULL;
        dV[t] = c->kind == TX_OPTIM_ADAMW ? tg_dev_upload(zeros, (n + 1) * sizeof(float)) : NULL;
        free(zeros);
        tx_cuda_optim_tensor e = {.master = dMaster[t], .model = low ? dParam[t] : NULL,
                                  .grad = dGrad[t], .m = dM[t], .v = dV[t], .n = n,
                                  .model_dtype = (int32_t)c->dtypes[t],
                                  .grad_dtype = (int32_t)c->dtypes[t]};
        desc[t] = e;
    }
    uint64_t blocks = 0;
    TG_OK(tx_cuda_optim_layout(desc, (size_t)nt, &blocks));
    tx_cuda_optim_tensor *dDesc = tg_dev_upload(desc, sizeof(desc[0]) * (size_t)nt);
    double *dPartials = tg_dev_alloc(tx_cuda_grad_clip_partials(blocks) * sizeof(double));
    double *dCoef = tg_dev_alloc(2 * sizeof(double));
    for (int step = 1; step <= c->steps; step++) {
        double ss = 0.0;
        for (int t = 0; t < nt; t++) {
            for (uint64_t i = 0; i < grad[t].numel; i++) {
                ku_set(&grad[t], i, (float)(ku_urand() * 2.0 - 1.0) * (step == 2 ? 1e-3f : 1.0f));
                double g = ku_get(&grad[t], i);
                ss += g * g;
            }
            tg_upload_to(dGrad[t], grad[t].data, grad[t].nbytes);
        }
        double coef[2] = {1.0, 0.0};
        if (c->clip > 0.0) {
            TG_OK(tx_cuda_grad_clip_coef(dDesc, (size_t)nt, blocks, c->clip, dPartials, dCoef, NULL));
            tg_download(coef, dCoef, sizeof coef);
            double again[2];
            TG_OK(tx_cuda_grad_clip_coef(dDesc, (size_t)nt, blocks, c->clip, dPartials, dCoef, NULL));
            tg_download(again, dCoef, sizeof again);
            assert_memory_equal(coef, again, sizeof coef); /* deterministic */
            double want = sqrt(ss);
            if (fabs(coef[1] - want) > 1e-12 * want) {
                fprintf(stderr, "%s step %d: device norm %.17g, FP64 %.17g\n", c->name, step,
                        coef[1], want);
                fail();
            }
            assert_true(coef[0] == tx_train_clip_coef(c->clip, coef[1]));
            if (step != 2) assert_true(coef[0] < 1.0); /* these cases do clip */
            cfg.grad_scale = coef[0];
        }
        for (int t = 0; t < nt; t++) TG_OK(tx_optim_step(&slot[t], &cfg, &param[t], &grad[t]));
        tx_cuda_optim_step_args sa = {.kind = c->kind == TX_OPTIM_ADAMW ? TX_CUDA_OPTIM_ADAMW
                                                                        : TX_CUDA_OPTIM_SGD,
                                      .lr = cfg.lr, .weight_decay = cfg.weight_decay,
                                      .momentum = cfg.momentum, .dampening = cfg.dampening,
                                      .nesterov = cfg.nesterov, .beta1 = cfg.beta1,
                                      .beta2 = cfg.beta2, .eps = cfg.eps, .step = step,
                                      .grad_scale = c->clip > 0.0 ? dCoef : NULL};
        TG_OK(tx_cuda_optim_step(&sa, dDesc, (size_t)nt, blocks, NULL));
        tg_sync("optimizer step");
    }
    char what[128];
    for (int t = 0; t < nt; t++) {
        bool low = c->dtypes[t] != KU_F32;
        snprintf(what, sizeof what, "%s t%d param", c->name, t);
        ku_expect_bits(what, &param[t], dParam[t]);
        if (low) {
            snprintf(what, sizeof what, "%s t%d master", c->name, t);
            ku_expect_bits(what, &slot[t].master, dMaster[t]);
        }
        if (need_m) {
            snprintf(what, sizeof what, "%s t%d m", c->name, t);
            ku_expect_bits(what, &slot[t].m, dM[t]);
        }
        if (c->kind == TX_OPTIM_ADAMW) {
            snprintf(what, sizeof what, "%s t%d v", c->name, t);
            ku_expect_bits(what, &slot[t].v, dV[t]);
        }
    }
    tg_dev_free(dDesc);
    tg_dev_free(dPartials);
    tg_dev_free(dCoef);
    for (int t = 0; t < nt; t++) {
        if (dMaster[t] != dParam[t]) tg_dev_free(dMaster[t]);
        tg_dev_free(dParam[t]);
        tg_dev_free(dGrad[t]);
        tg_dev_free(dM[t]);
        tg_dev_free(dV[t]);
        tx_optim_slot_release(&slot[t]);
        tx_tensor_release(&param[t]);
        tx_tensor_release(&grad[t]);
    }
}

static void bad_settings_are_errors(void **state)
{
    (void)state;
    tx_cuda_optim_step_args sa = {.kind = TX_CUDA_OPTIM_ADAMW, .lr = 1e-3, .beta1 = 1.0,
                                  .beta2 = 0.999, .eps = 1e-8, .step = 1};
    teexec_status *st = tx_cuda_optim_step(&sa, NULL, 0, 0, NULL);
    assert_non_null(st);
    teexec_status_destroy(st);
    sa.beta1 = 0.9;
    sa.step = 0;
    st = tx_cuda_optim_step(&sa, NULL, 0, 0, NULL);
    assert_non_null(st);
    teexec_status_destroy(st);
    tx_cuda_optim_tensor t = {.master = (float *)8, .grad = (void *)8, .n = 10,
                              .model = (void *)8, .model_dtype = TEEXEC_DTYPE_FLOAT,
                              .grad_dtype = TEEXEC_DTYPE_FLOAT};
    uint64_t blocks = 0;
    st = tx_cuda_optim_layout(&t, 1, &blocks);
    assert_non_null(st); /* an fp32 model copy is its own master */
    teexec_status_destroy(st);
}

#define BF TEEXEC_DTYPE_BFLOAT16
#define HF TEEXEC_DTYPE_FLOAT16
#define FL TEEXEC_DTYPE_FLOAT

static const optim_case cases[] = {
    {"adamw_mixed", TX_OPTIM_ADAMW, 1e-3, 0.01, 0, 0, 0, 4, 5,
     {10000, 4096, 0, 777, 300000}, {BF, FL, BF, HF, BF}, 0.0},
    {"adamw_f32_no_wd", TX_OPTIM_ADAMW, 3e-4, 0.0, 0, 0, 0, 3, 2, {8193, 1}, {FL, FL}, 0.0},
    {"sgd_momentum_dampening", TX_OPTIM_SGD, 0.05, 1e-4, 0.9, 0.1, 0, 4, 3,
     {5000, 4097, 12}, {BF, FL, HF}, 0.0},
    {"sgd_nesterov", TX_OPTIM_SGD, 0.1, 0.0, 0.9, 0.0, 1, 3, 2, {65536, 100}, {FL, BF}, 0.0},
    {"sgd_plain", TX_OPTIM_SGD, 0.01, 0.001, 0.0, 0.0, 0, 2, 2, {4096, 4095}, {BF, FL}, 0.0},
    {"adamw_clipped", TX_OPTIM_ADAMW, 1e-3, 0.01, 0, 0, 0, 3, 4, {10000, 0, 4097, 300000},
     {BF, FL, HF, FL}, 1.0},
    {"sgd_clipped", TX_OPTIM_SGD, 0.05, 0.0, 0.9, 0.0, 0, 3, 2, {5000, 12}, {FL, BF}, 0.5},
};

int main(void)
{
    tg_require_gpu("test_gpu_optim");
    enum { N = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[N + 1];
    for (size_t i = 0; i < N; i++) {
        struct CMUnitTest t = {cases[i].name, run_optim, NULL, NULL, (void *)&cases[i]};
        tests[i] = t;
    }
    struct CMUnitTest t = {"bad_settings_are_errors", bad_settings_are_errors, NULL, NULL, NULL};
    tests[N] = t;
    return _cmocka_run_group_tests("test_gpu_optim", tests, N + 1, NULL, NULL);
}
