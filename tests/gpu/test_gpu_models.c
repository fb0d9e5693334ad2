/* test_gpu_models.c - whole models on the CUDA backend through the public
 * API, against the CPU backend on the same data:
 *   - inference: a CUDA session (fp32, CUDA graphs on, then off) gives the
 *     CPU session's outputs (rel-L2 <= 1e-5; TF32 is off);
 *   - training: a CUDA trainer's three AdamW steps (fp32) give the CPU
 *     trainer's losses, last-step gradients and parameters (rel-L2 <=
 *     1e-4; the CPU trainer's backward runs in double); in bf16 within the
 *     bf16 tolerance;
 *   - every recipe trains a step on the GPT-2 and MLP blocks, with a loss
 *     and gradients within the recipe's tolerance of the bf16 run;
 *   - deterministic mode: two trainers, 10 steps each, byte-identical
 *     parameters; --profile gives a table.
 * Models: models/{mlp,gpt2_block,llama_block} (PyTorch exports, lowered on
 * the fly) and models/te_{mlp,gpt2_block,llama_block} (te.ops). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "tests/gpu/gpu_harness.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kModels[] = {"mlp", "gpt2_block", "llama_block",
                                      "te_mlp", "te_gpt2_block", "te_llama_block"};
#define N_MODELS (sizeof kModels / sizeof kModels[0])

static void ok(teexec_status *st, const char *what)
{
    if (st) {
        fprintf(stderr, "%s: %s\n", what, teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static char *path_of(const char *model, const char *file)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 1024, "%s/models/%s/%s", root ? root : ".", model, file);
    return b;
}

static const teexec_tensor *ds_find(const teexec_dataset *d, const char *name)
{
    for (size_t i = 0; i < teexec_dataset_count(d); i++)
        if (!strcmp(teexec_dataset_name(d, i), name)) return teexec_dataset_tensor(d, i);
    return NULL;
}

/* The first dims[0] rows the model's input wants, from the dataset. */
static teexec_tensor *batch_of(const teexec_tensor *t, int64_t b, int64_t start)
{
    int64_t dims[8];
    int32_t r = teexec_tensor_rank(t);
    memcpy(dims, teexec_tensor_dims(t), sizeof(int64_t) * (size_t)r);
    size_t row = teexec_tensor_byte_size(t) / (size_t)dims[0];
    start %= dims[0] - b + 1;
    dims[0] = b;
    teexec_tensor *o;
    ok(teexec_tensor_create_copy(teexec_tensor_dtype(t), r, dims,
                                 (const char *)teexec_tensor_data_const(t) + row * (size_t)start,
                                 row * (size_t)b, &o),
       "batch");
    return o;
}

static double rel_l2(const teexec_tensor *a, const teexec_tensor *b)
{
    assert_int_equal(teexec_tensor_dtype(a), TEEXEC_DTYPE_FLOAT);
    assert_int_equal(teexec_tensor_dtype(b), TEEXEC_DTYPE_FLOAT);
    assert_int_equal(teexec_tensor_element_count(a), teexec_tensor_element_count(b));
    const float *x = teexec_tensor_data_const(a), *y = teexec_tensor_data_const(b);
    double num = 0, den = 0;
    for (uint64_t i = 0; i < teexec_tensor_element_count(a); i++) {
        double d = (double)x[i] - (double)y[i];
        num += d * d;
        den += (double)y[i] * (double)y[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct model_data {
    teexec_model *m;
    teexec_dataset *d;
    int64_t batch;
} model_data;

static void load(const char *name, model_data *md)
{
    ok(teexec_model_load_file(path_of(name, "model.onnx"), NULL, &md->m), name);
    ok(teexec_dataset_load_npz(path_of(name, "train.npz"), &md->d), name);
    /* the model's declared batch */
    const teexec_value_info *in = teexec_model_input(md->m, 0);
    assert_non_null(in);
    if (in->rank > 0 && in->dims[0] > 0) md->batch = in->dims[0];
}

static void unload(model_data *md)
{
    teexec_dataset_destroy(md->d);
    teexec_model_destroy(md->m);
}

/* ---- inference ---------------------------------------------------------------- */

static void run_session_on(const model_data *md, teexec_device dev, int graphs, int deterministic,
                           void *stream, teexec_tensor **out)
{
    teexec_session_options *o;
    ok(teexec_session_options_create(&o), "options");
    ok(teexec_session_options_set_device(o, dev), "device");
    ok(teexec_session_options_set_cuda_graphs(o, graphs), "graphs");
    ok(teexec_session_options_set_deterministic(o, deterministic), "deterministic");
    ok(teexec_session_options_set_cuda_stream(o, stream), "stream");
    teexec_session *s;
    ok(teexec_session_create(md->m, o, &s), "session");
    teexec_session_options_destroy(o);
    assert_string_equal(teexec_session_device_name(s), dev == TEEXEC_DEVICE_CUDA ? "cuda" : "cpu");
    teexec_tensor *x = batch_of(ds_find(md->d, "x"), md->batch, 0);
    const char *names[1] = {"x"};
    const teexec_tensor *xs[1] = {x};
    /* twice: the second run replays the captured graph */
    ok(teexec_session_run(s, 1, names, xs, 1, NULL, out), "run");
    teexec_tensor_destroy(*out);
    ok(teexec_session_run(s, 1, names, xs, 1, NULL, out), "run again");
    teexec_tensor_destroy(x);
    teexec_session_destroy(s);
}

static void run_session(const model_data *md, teexec_device dev, int graphs, teexec_tensor **out)
{
    run_session_on(md, dev, graphs, 0, NULL, out);
}

/* Against the CPU; then CUDA graphs against plain launches on the caller's
 * stream, bit for bit. That pair runs in deterministic mode: otherwise
 * each session picks its GEMM algorithms by timing them (gemm autotuning),
 * and two sessions may round differently. */
static void test_inference(void **state)
{
    (void)state;
    cudaStream_t caller = NULL;
    assert_int_equal(cudaStreamCreate(&caller), cudaSuccess);
    for (size_t i = 0; i < N_MODELS; i++) {
        model_data md;
        load(kModels[i], &md);
        teexec_tensor *cpu, *gpu, *gpu_det, *gpu_nog;
        run_session(&md, TEEXEC_DEVICE_CPU, 1, &cpu);
        run_session(&md, TEEXEC_DEVICE_CUDA, 1, &gpu);
        run_session_on(&md, TEEXEC_DEVICE_CUDA, 1, 1, NULL, &gpu_det);
        run_session_on(&md, TEEXEC_DEVICE_CUDA, 0, 1, caller, &gpu_nog);
        double e = rel_l2(gpu, cpu), e2 = rel_l2(gpu_nog, gpu_det);
        char detail[200];
        snprintf(detail, sizeof detail,
                 "%s fp32 inference rel-L2 %.2e vs CPU, graphs vs none on the caller's stream "
                 "(deterministic) %.1e",
                 kModels[i], e, e2);
        fprintf(stderr, "%s\n", detail);
        tg_record("models_inference", e <= 1e-5 && e2 == 0.0, detail);
        assert_true(e <= 1e-5);
        assert_true(e2 == 0.0);
        teexec_tensor_destroy(cpu);
        teexec_tensor_destroy(gpu);
        teexec_tensor_destroy(gpu_nog);
        teexec_tensor_destroy(gpu_det);
        unload(&md);
    }
    cudaStreamDestroy(caller);
}

/* ---- training ----------------------------------------------------------------- */

static teexec_trainer *trainer_opt(const model_data *md, teexec_device dev, const char *recipe,
                                   teexec_dtype dtype, int deterministic, int profile, bool sgd,
                                   double lr)
{
    teexec_train_options o;
    teexec_train_options_init(&o);
    if (lr >= 0) o.lr = lr;
    if (sgd) {
        /* the update is linear in the grads, so parameters compare as
         * tightly as the grads do (AdamW's m/sqrt(v) turns the round-off
         * of grads that are zero in exact arithmetic, e.g. the key bias's,
         * into lr-sized steps) */
        o.optimizer = TEEXEC_OPTIMIZER_SGD;
        o.lr = 1e-2;
        o.momentum = 0.9;
    }
    o.device = dev;
    o.recipe = recipe;
    o.dtype = dtype;
    o.deterministic = deterministic;
    o.profile = profile;
    teexec_trainer *t;
    ok(teexec_trainer_create(md->m, &o, &t), "trainer");
    assert_string_equal(teexec_trainer_device_name(t), dev == TEEXEC_DEVICE_CUDA ? "cuda" : "cpu");
    return t;
}

static teexec_trainer *trainer(const model_data *md, teexec_device dev, const char *recipe,
                               teexec_dtype dtype, int deterministic, int profile)
{
    return trainer_opt(md, dev, recipe, dtype, deterministic, profile, false, -1);
}

static double step(teexec_trainer *t, const model_data *md, int s)
{
    teexec_tensor *x = batch_of(ds_find(md->d, "x"), md->batch, s * md->batch);
    teexec_tensor *y = batch_of(ds_find(md->d, "target"), md->batch, s * md->batch);
    const char *names[2] = {"x", "target"};
    const teexec_tensor *ts[2] = {x, y};
    double loss = NAN;
    ok(teexec_trainer_step(t, 2, names, ts, &loss), "step");
    teexec_tensor_destroy(x);
    teexec_tensor_destroy(y);
    return loss;
}

/* Worst rel-L2 over the parameters of a's (grad or value) vs b's. */
static double worst(teexec_trainer *a, teexec_trainer *b, bool grads, const char **which)
{
    double w = 0;
    for (size_t p = 0; p < teexec_trainer_param_count(b); p++) {
        const char *name = teexec_trainer_param_name(b, p);
        teexec_tensor *ta, *tb;
        if (grads) {
            ok(teexec_trainer_grad(a, name, &ta), name);
            ok(teexec_trainer_grad(b, name, &tb), name);
        } else {
            ok(teexec_trainer_param(a, name, &ta), name);
            ok(teexec_trainer_param(b, name, &tb), name);
        }
        double e = rel_l2(ta, tb);
        if (e > w || isnan(e)) {
            w = e;
            *which = name;
        }
        teexec_tensor_destroy(ta);
        teexec_tensor_destroy(tb);
    }
    return w;
}

static void test_training_fp32_bf16(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < N_MODELS; i++) {
        model_data md;
        load(kModels[i], &md);
        teexec_trainer *cpu = trainer_opt(&md, TEEXEC_DEVICE_CPU, NULL, 0, 0, 0, true, -1);
        teexec_trainer *gpu = trainer_opt(&md, TEEXEC_DEVICE_CUDA, NULL, 0, 0, 0, true, -1);
        teexec_trainer *b16 = trainer_opt(&md, TEEXEC_DEVICE_CUDA, NULL, TEEXEC_DTYPE_BFLOAT16, 0, 0, true, -1);
        double lerr = 0, lerr16 = 0;
        for (int s = 0; s < 3; s++) {
            double lc = step(cpu, &md, s), lg = step(gpu, &md, s), lb = step(b16, &md, s);
            double e = fabs(lg - lc) / fabs(lc), e16 = fabs(lb - lc) / fabs(lc);
            if (e > lerr) lerr = e;
            if (e16 > lerr16) lerr16 = e16;
        }
        const char *wg = "-", *wp = "-", *wg16 = "-";
        double eg = worst(gpu, cpu, true, &wg), ep = worst(gpu, cpu, false, &wp);
        double eg16 = worst(b16, cpu, true, &wg16);
        char detail[400];
        snprintf(detail, sizeof detail,
                 "%s 3 SGD steps: fp32 loss rel %.1e, grads rel-L2 %.1e (%s), params %.1e (%s); "
                 "bf16 loss rel %.1e, grads %.1e (%s)",
                 kModels[i], lerr, eg, wg, ep, wp, lerr16, eg16, wg16);
        fprintf(stderr, "%s\n", detail);
        bool pass = lerr <= 1e-4 && eg <= 1e-4 && ep <= 1e-4 && lerr16 <= 3e-2 && eg16 <= 6e-2;
        tg_record("models_training", pass, detail);
        if (!pass) failures++;
        teexec_trainer_destroy(cpu);
        teexec_trainer_destroy(gpu);
        teexec_trainer_destroy(b16);
        unload(&md);
    }
    assert_int_equal(failures, 0);
}

static void test_recipes(void **state)
{
    (void)state;
    /* the FP8 per-tensor recipes in both grad formats: E5M2 (their
     * default, TE's HYBRID) and E4M3 */
    static const char *const recipes[] = {"fp8-delayed", "fp8-current", "fp8-current:e4m3",
                                          "fp8-block",   "mxfp8",       "nvfp4"};
    /* 32 rows x 64 features: every recipe's block shape fits; models/mlp's
     * 16 rows are NVFP4's smallest (rows % 16), and the planner keeps its
     * MXFP8 operands (below 32 rows) in bf16 */
    static const char *const models[] = {"gpt2_block", "llama_block", "mlp"};
    int failures = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        model_data md;
        load(models[i], &md);
        /* lr 0: every step sees the same parameters, so the third step's
         * grads differ from bf16's by quantization alone */
        teexec_trainer *ref = trainer_opt(&md, TEEXEC_DEVICE_CUDA, NULL, TEEXEC_DTYPE_BFLOAT16, 0, 0,
                                          false, 0.0);
        double lref = 0;
        for (int s = 0; s < 3; s++) lref = step(ref, &md, 0);
        for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++) {
            /* three steps on the same batch: fp8-delayed's first step
             * quantizes with the initial scale 1 (as TE does), later ones
             * with the scale from the amax history, which for the same
             * data is current scaling's */
            teexec_trainer *t = trainer_opt(&md, TEEXEC_DEVICE_CUDA, recipes[r],
                                            TEEXEC_DTYPE_BFLOAT16, 0, 0, false, 0.0);
            double l = 0;
            for (int s = 0; s < 3; s++) l = step(t, &md, 0);
            const char *wg = "-";
            double eg = worst(t, ref, true, &wg), el = fabs(l - lref) / fabs(lref);
            double tol = strcmp(recipes[r], "nvfp4") ? 0.125 : 0.25;
            char detail[300];
            snprintf(detail, sizeof detail,
                     "%s %s 3rd step: loss rel %.2e, grads rel-L2 %.2e (%s) vs bf16", models[i],
                     recipes[r], el, eg, wg);
            fprintf(stderr, "%s\n", detail);
            bool pass = el <= tol && eg <= 2 * tol;
            tg_record("models_recipes", pass, detail);
            if (!pass) failures++;
            teexec_trainer_destroy(t);
        }
        teexec_trainer_destroy(ref);
        unload(&md);
    }
    assert_int_equal(failures, 0);
}

static void test_deterministic(void **state)
{
    (void)state;
    static const char *const models[] = {"gpt2_block", "te_llama_block"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        model_data md;
        load(models[i], &md);
        teexec_trainer *a = trainer(&md, TEEXEC_DEVICE_CUDA, NULL, TEEXEC_DTYPE_BFLOAT16, 1, 0);
        teexec_trainer *b = trainer(&md, TEEXEC_DEVICE_CUDA, NULL, TEEXEC_DTYPE_BFLOAT16, 1, 0);
        for (int s = 0; s < 10; s++) {
            step(a, &md, s);
            step(b, &md, s);
        }
        size_t differing = 0;
        for (size_t p = 0; p < teexec_trainer_param_count(a); p++) {
            const char *name = teexec_trainer_param_name(a, p);
            teexec_tensor *ta, *tb;
            ok(teexec_trainer_param(a, name, &ta), name);
            ok(teexec_trainer_param(b, name, &tb), name);
            if (teexec_tensor_byte_size(ta) != teexec_tensor_byte_size(tb) ||
                memcmp(teexec_tensor_data_const(ta), teexec_tensor_data_const(tb),
                       teexec_tensor_byte_size(ta)))
                differing++;
            teexec_tensor_destroy(ta);
            teexec_tensor_destroy(tb);
        }
        char detail[200];
        snprintf(detail, sizeof detail, "%s bf16 deterministic: 10 steps x 2 trainers, %zu of %zu "
                 "parameters differ", models[i], differing, teexec_trainer_param_count(a));
        fprintf(stderr, "%s\n", detail);
        tg_record("models_deterministic", differing == 0, detail);
        assert_int_equal(differing, 0);
        teexec_trainer_destroy(a);
        teexec_trainer_destroy(b);
        unload(&md);
    }
}

static void test_profile(void **state)
{
    (void)state;
    model_data md;
    load("gpt2_block", &md);
    teexec_trainer *t = trainer(&md, TEEXEC_DEVICE_CUDA, NULL, TEEXEC_DTYPE_BFLOAT16, 0, 1);
    step(t, &md, 0);
    char *text = NULL;
    ok(teexec_trainer_profile(t, &text), "profile");
    assert_non_null(strstr(text, "includes one-time setup"));
    teexec_string_free(text);
    /* from the second call on, the first call's setup is left out */
    step(t, &md, 1);
    step(t, &md, 2);
    ok(teexec_trainer_profile(t, &text), "profile");
    fprintf(stderr, "%s", text);
    assert_non_null(strstr(text, "is left out"));
    assert_non_null(strstr(text, "bwd"));
    assert_non_null(strstr(text, "Linear"));
    /* gpt2_block's MLP (Bias, GELU(tanh), Linear) runs its dgrad with the
     * dGELU+dbias epilogue in bf16 */
    assert_non_null(strstr(text, "dGELU+dBias"));
    /* buffers with disjoint lifetimes share the arena */
    const char *ar = strstr(text, "device arena: ");
    assert_non_null(ar);
    double mib = 0.0, unshared = 0.0;
    assert_int_equal(sscanf(ar, "device arena: %lf MiB (%lf", &mib, &unshared), 2);
    assert_true(mib < unshared);
    tg_record("models_profile", 1, "gpt2_block bf16 training step profile table");
    teexec_string_free(text);
    teexec_trainer_destroy(t);
    unload(&md);
}

int main(void)
{
    tg_require_gpu("test_gpu_models");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inference),
        cmocka_unit_test(test_training_fp32_bf16),
        cmocka_unit_test(test_recipes),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
