/* test_zoo.c - every export of models/zoo (real Hugging Face and nanoGPT
 * exports from PyTorch 2.11, both exporters; models/zoo/README.md) through
 * the public API on the CPU, against PyTorch's own numbers:
 *
 *   run        outputs within 1e-5 rel-L2 of expected/<output>.npy
 *   convert    teexec_model_convert succeeds, the converted model gives the
 *              same output (1e-5), and converting it again writes the same
 *              bytes
 *   plan       plans for training under every recipe on sm_90 and sm_100
 *   attention  every attention pattern lowered to DotProductAttention (none
 *              declined, at least one lowered, no Softmax left)
 *   coverage   decoders: >= 95% of the forward FLOPs inside te.ops groups
 *   grads      one step's gradient of every initializer in
 *              expected/grads.npz within 1e-4 of PyTorch's, each compared
 *              on at least a thousandth of the average parameter's scale
 *              (a gradient that is zero in exact arithmetic, such as a key
 *              bias under softmax, is rounding noise in both); the loss
 *              within 1e-5 of expected/loss.npy
 *   adamw      50 AdamW steps (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight
 *              decay 0.01, rows 2(s mod 4).. of train.npz) within 1e-3
 *              relative of expected/adamw_loss.npy at every step
 *
 * Decoders (train.npz has `labels`) train with cross-entropy, the rest with
 * MSE against `target`. A gap that is known and not yet closed is listed in
 * tests/zoo/expected_gaps.txt ("EXPORT CHECK reason"): a listed check that
 * fails is reported and tolerated, an unlisted one that fails fails the
 * test, and a listed one that passes fails it too (the list only shrinks).
 *
 * `test_zoo cuda` (suite gpu; exit 77 without a GPU) runs the device checks
 * on the CUDA backend instead, with CUDA graphs, against the same PyTorch
 * numbers, its gaps in tests/zoo/expected_gaps_cuda.txt:
 *   run        fp32 within 1e-5 rel-L2
 *   run_bf16   --dtype bf16 within 2e-2 rel-L2 of PyTorch's fp32 output
 *   grads      fp32, as on the CPU (1e-4)
 *   adamw      fp32, as on the CPU (1e-3)
 *   train_bf16 / train_fp8 / train_mxfp8
 *              5 bf16 training steps (recipes none, fp8-current, mxfp8):
 *              every loss finite and the last below the first
 *   recipes    inference under every recipe, CUDA against the CPU
 *              (check_recipes_run says by how much)
 *   recipes_train
 *              one training step under MXFP8 and NVFP4, CUDA against the
 *              CPU (loss 1e-5, gradients 1e-4)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "tests/model_inputs.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_IO 8
#define ADAMW_STEPS 50
#define BATCH 2

static char root[1024], tmpdir[1024];
/* The device the checks run on: CPU, or CUDA for `test_zoo cuda`. */
static teexec_device device = TEEXEC_DEVICE_CPU;

/* ---- expected gaps ------------------------------------------------------- */

typedef struct gap {
    char export_name[128], check[32];
    bool seen_failing;
} gap;

static gap gaps[512];
static size_t n_gaps;
static int unexpected_failures, stale_gaps;

static void load_gaps(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/zoo/%s", root,
             device == TEEXEC_DEVICE_CUDA ? "expected_gaps_cuda.txt" : "expected_gaps.txt");
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f) && n_gaps < sizeof gaps / sizeof *gaps) {
        if (line[0] == '#' || line[0] == '\n') continue;
        gap *g = &gaps[n_gaps];
        if (sscanf(line, "%127s %31s", g->export_name, g->check) == 2) n_gaps++;
    }
    fclose(f);
}

static gap *find_gap(const char *exp, const char *check)
{
    for (size_t i = 0; i < n_gaps; i++)
        if (!strcmp(gaps[i].export_name, exp) && !strcmp(gaps[i].check, check)) return &gaps[i];
    return NULL;
}

/* Records the outcome of one check; `why` says what failed. */
static void outcome(const char *exp, const char *check, bool passed, const char *fmt, ...)
{
    char why[2048] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    gap *g = find_gap(exp, check);
    if (passed) {
        printf("# %-24s %-9s ok   %s\n", exp, check, why);
        if (g) {
            fprintf(stderr, "%s %s passes now: remove it from tests/zoo/%s\n", exp, check,
                    device == TEEXEC_DEVICE_CUDA ? "expected_gaps_cuda.txt" : "expected_gaps.txt");
            stale_gaps++;
        }
        return;
    }
    if (g) {
        g->seen_failing = true;
        printf("# %-24s %-9s GAP  %s (listed)\n", exp, check, why);
        return;
    }
    fprintf(stderr, "%s %s FAILED: %s\n", exp, check, why);
    unexpected_failures++;
}

/* ---- helpers ---------------------------------------------------------------- */

static char *status_text(teexec_status *st)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s", st ? teexec_status_message(st) : "");
    teexec_status_destroy(st);
    return buf;
}

static double elem(const teexec_tensor *t, uint64_t i)
{
    const void *d = teexec_tensor_data_const(t);
    switch (teexec_tensor_dtype(t)) {
    case TEEXEC_DTYPE_FLOAT: return ((const float *)d)[i];
    case TEEXEC_DTYPE_DOUBLE: return ((const double *)d)[i];
    case TEEXEC_DTYPE_INT64: return (double)((const int64_t *)d)[i];
    default: return NAN;
    }
}

static bool same_shape(const teexec_tensor *a, const teexec_tensor *b)
{
    if (teexec_tensor_rank(a) != teexec_tensor_rank(b)) return false;
    for (int32_t d = 0; d < teexec_tensor_rank(a); d++)
        if (teexec_tensor_dims(a)[d] != teexec_tensor_dims(b)[d]) return false;
    return true;
}

static double rel_l2(const teexec_tensor *got, const teexec_tensor *want)
{
    if (!same_shape(got, want)) return INFINITY;
    double num = 0, den = 0;
    for (uint64_t i = 0; i < teexec_tensor_element_count(want); i++) {
        double d = elem(got, i) - elem(want, i);
        num += d * d;
        den += elem(want, i) * elem(want, i);
    }
    if (isnan(num)) return INFINITY;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef tx_test_inputs io;

/* Runs `model` on `dev` in `dtype` (UNDEFINED: the model's own); *out
 * gets its first output. */
static teexec_status *run_recipe(const teexec_model *model, teexec_device dev, teexec_dtype dtype,
                                 const char *recipe, const io *in, teexec_tensor **out)
{
    *out = NULL;
    teexec_session_options *o;
    teexec_status *st = teexec_session_options_create(&o);
    if (st) return st;
    st = teexec_session_options_set_device(o, dev);
    if (!st && dtype != TEEXEC_DTYPE_UNDEFINED) st = teexec_session_options_set_dtype(o, dtype);
    if (!st && recipe) st = teexec_session_options_set_recipe(o, recipe);
    teexec_session *s = NULL;
    if (!st) st = teexec_session_create(model, o, &s);
    teexec_session_options_destroy(o);
    size_t n_out = teexec_model_output_count(model);
    teexec_tensor *outs[MAX_IO] = {0};
    if (!st && n_out > MAX_IO) st = NULL, n_out = 0;
    if (!st)
        st = teexec_session_run(s, in->n, in->names, (const teexec_tensor *const *)in->ts, n_out,
                                NULL, outs);
    teexec_session_destroy(s);
    if (st) return st;
    *out = outs[0];
    for (size_t i = 1; i < n_out; i++) teexec_tensor_destroy(outs[i]);
    return NULL;
}

/* The same, under recipe none. */
static teexec_status *run_on(const teexec_model *model, teexec_device dev, teexec_dtype dtype,
                             const io *in, teexec_tensor **out)
{
    return run_recipe(model, dev, dtype, NULL, in, out);
}

static teexec_status *run_cpu(const teexec_model *model, const io *in, teexec_tensor **out)
{
    return run_on(model, TEEXEC_DEVICE_CPU, TEEXEC_DTYPE_UNDEFINED, in, out);
}

static teexec_status *load_model(const char *path, teexec_model **m)
{
    return teexec_model_load_file(path, NULL, m);
}

static bool read_file(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(n > 0 ? (size_t)n : 1);
    *len = n > 0 ? (size_t)n : 0;
    bool good = *data && fread(*data, 1, *len, f) == *len;
    fclose(f);
    return good;
}

/* ---- the checks ------------------------------------------------------------------ */

typedef struct export_ctx {
    char name[256], dir[2048], model_path[2100], expected_path[2100];
    bool decoder;
    teexec_model *model;
    teexec_tensor *expected;
    io in;
} export_ctx;

static void check_run_as(export_ctx *x, const char *check, teexec_dtype dtype, double tol)
{
    teexec_tensor *y = NULL;
    teexec_status *st = run_on(x->model, device, dtype, &x->in, &y);
    if (st) {
        outcome(x->name, check, false, "%s", status_text(st));
        return;
    }
    double e = rel_l2(y, x->expected);
    outcome(x->name, check, e <= tol, "rel-L2 %.2e", e);
    teexec_tensor_destroy(y);
}

static void check_run(export_ctx *x) { check_run_as(x, "run", TEEXEC_DTYPE_UNDEFINED, 1e-5); }

static void check_convert(export_ctx *x)
{
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/%s.converted.onnx", tmpdir, x->name);
    snprintf(b, sizeof b, "%s/%s.reconverted.onnx", tmpdir, x->name);
    teexec_status *st = teexec_model_convert(x->model, NULL, a, NULL);
    if (st) {
        outcome(x->name, "convert", false, "%s", status_text(st));
        return;
    }
    teexec_model *cm = NULL;
    st = load_model(a, &cm);
    teexec_tensor *y = NULL;
    if (!st) st = run_cpu(cm, &x->in, &y);
    if (st) {
        outcome(x->name, "convert", false, "the converted model: %s", status_text(st));
        teexec_model_destroy(cm);
        return;
    }
    double e = rel_l2(y, x->expected);
    teexec_tensor_destroy(y);
    st = teexec_model_convert(cm, NULL, b, NULL);
    teexec_model_destroy(cm);
    if (st) {
        outcome(x->name, "convert", false, "converting again: %s", status_text(st));
        return;
    }
    char *da = NULL, *db = NULL;
    size_t la = 0, lb = 0;
    bool same = read_file(a, &da, &la) && read_file(b, &db, &lb) && la == lb &&
                memcmp(da, db, la) == 0;
    free(da);
    free(db);
    outcome(x->name, "convert", e <= 1e-5 && same, "converted output rel-L2 %.2e, %s", e,
            same ? "converting again writes the same bytes" : "converting again DIFFERS");
    unlink(a);
    unlink(b);
}

static void check_plans(export_ctx *x)
{
    static const char *recipes[] = {"none", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8",
                                    "nvfp4"};
    static const char *devices[] = {"sm_90", "sm_100"};
    int planned = 0;
    char fail[1400] = "";
    for (size_t r = 0; r < sizeof recipes / sizeof *recipes; r++)
        for (size_t d = 0; d < 2; d++) {
            teexec_plan_options *o;
            teexec_status *st = teexec_plan_options_create(&o);
            if (!st) st = teexec_plan_options_set_recipe(o, recipes[r]);
            if (!st) st = teexec_plan_options_set_device(o, devices[d]);
            if (!st) st = teexec_plan_options_set_training(o, 1);
            char *text = NULL;
            if (!st) st = teexec_model_plan(x->model, o, TEEXEC_PLAN_TEXT, &text);
            teexec_plan_options_destroy(o);
            teexec_string_free(text);
            if (st && !fail[0])
                snprintf(fail, sizeof fail, "%s on %s: %s", recipes[r], devices[d],
                         status_text(st));
            else if (st) teexec_status_destroy(st);
            else planned++;
        }
    outcome(x->name, "plan", planned == 12, "%d of 12 training plans%s%s", planned,
            fail[0] ? "; " : "", fail);
}

/* Lowering and coverage, from the explained plan's text. */
static void check_lowering(export_ctx *x)
{
    char *text = NULL;
    teexec_status *st = teexec_model_plan(x->model, NULL, TEEXEC_PLAN_EXPLAIN, &text);
    if (st) {
        const char *m = status_text(st);
        outcome(x->name, "attention", false, "%s", m);
        if (x->decoder) outcome(x->name, "coverage", false, "%s", m);
        return;
    }
    int lowered = 0, declined = 0, softmax_left = 0;
    double cov = -1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "  lowered  DotProductAttention", 30)) lowered++;
        if (!strncmp(line, "  declined DotProductAttention", 30)) declined++;
        if (!strncmp(line, "  standard Softmax ", 19)) softmax_left++;
        if (!strncmp(line, "coverage: ", 10)) cov = strtod(line + 10, NULL);
    }
    teexec_string_free(text);
    outcome(x->name, "attention", lowered > 0 && declined == 0 && softmax_left == 0,
            "%d lowered, %d declined%s", lowered, declined,
            softmax_left ? ", a Softmax left as a standard op" : "");
    if (x->decoder)
        outcome(x->name, "coverage", cov >= 95.0, "%.1f%% of FLOPs in te.ops groups", cov);
}

/* Rows [first, first + BATCH) of every array of the dataset, by name. */
typedef struct batch {
    const char *names[MAX_IO];
    teexec_tensor *ts[MAX_IO];
    size_t n;
} batch;

static teexec_status *make_batch(const teexec_dataset *ds, int64_t first, batch *b)
{
    memset(b, 0, sizeof *b);
    for (size_t i = 0; i < teexec_dataset_count(ds) && b->n < MAX_IO; i++) {
        teexec_status *st = tx_test_rows(teexec_dataset_tensor(ds, i), first, BATCH, &b->ts[b->n]);
        if (st) return st;
        b->names[b->n++] = teexec_dataset_name(ds, i);
    }
    return NULL;
}

static void batch_free(batch *b)
{
    for (size_t i = 0; i < b->n; i++) teexec_tensor_destroy(b->ts[i]);
    b->n = 0;
}

static teexec_status *trainer_on(export_ctx *x, teexec_device dev, double lr, double wd,
                                 teexec_dtype dtype, const char *recipe, teexec_trainer **t)
{
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = dev;
    o.loss = x->decoder ? TEEXEC_LOSS_CROSS_ENTROPY : TEEXEC_LOSS_MSE;
    o.lr = lr;
    o.weight_decay = wd;
    o.dtype = dtype;
    o.recipe = recipe;
    return teexec_trainer_create(x->model, &o, t);
}

static teexec_status *trainer_as(export_ctx *x, double lr, double wd, teexec_dtype dtype,
                                 const char *recipe, teexec_trainer **t)
{
    return trainer_on(x, device, lr, wd, dtype, recipe, t);
}

static teexec_status *trainer_for(export_ctx *x, double lr, double wd, teexec_trainer **t)
{
    return trainer_as(x, lr, wd, TEEXEC_DTYPE_UNDEFINED, NULL, t);
}

/* The relative L2 error of a trainer's gradient `got` against `want`,
 * measured on at least `floor` (a gradient that is zero in exact
 * arithmetic is rounding noise on both sides). A token the exporter
 * repeated over the batch ("broadcast" in meta.json) trains as one tensor
 * (import/lower_unbroadcast.c): every copy holds the parameter's whole
 * gradient, which is PyTorch's (the sum over the copies). */
static double grad_error(const teexec_tensor *got, const teexec_tensor *want, double floor)
{
    double num = 0, den = 0;
    int32_t rank = teexec_tensor_rank(want);
    bool copied = !same_shape(got, want) && rank == teexec_tensor_rank(got) && rank > 0 &&
                  teexec_tensor_dims(want)[0] == 1;
    uint64_t n = teexec_tensor_element_count(want);
    if (!same_shape(got, want) && !copied) return INFINITY;
    uint64_t copies = copied ? (uint64_t)teexec_tensor_dims(got)[0] : 1;
    for (uint64_t c = 0; c < copies; c++)
        for (uint64_t k = 0; k < n; k++) {
            double d = elem(got, c * n + k) - elem(want, k);
            num += d * d;
            den += elem(want, k) * elem(want, k);
        }
    double e = sqrt(num) / fmax(sqrt(den), floor);
    return isnan(e) ? INFINITY : e;
}

/* The comparison floor for a set of gradients: a thousandth of the
 * average one's L2 norm. */
static double grad_floor(const teexec_tensor *const *grads, size_t n)
{
    double total = 0;
    for (size_t i = 0; i < n; i++)
        for (uint64_t k = 0; k < teexec_tensor_element_count(grads[i]); k++)
            total += elem(grads[i], k) * elem(grads[i], k);
    return 1e-3 * sqrt(total) / sqrt((double)(n ? n : 1));
}

static void check_grads(export_ctx *x, const teexec_dataset *ds)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/expected/grads.npz", x->dir);
    teexec_dataset *ref = NULL;
    teexec_trainer *t = NULL;
    batch b = {0};
    double loss = NAN;
    teexec_status *st = teexec_dataset_load_npz(path, &ref);
    if (!st) st = trainer_for(x, 0.0, 0.0, &t);
    if (!st) st = make_batch(ds, 0, &b);
    if (!st) st = teexec_trainer_step(t, b.n, b.names, (const teexec_tensor *const *)b.ts, &loss);
    if (st) {
        outcome(x->name, "grads", false, "%s", status_text(st));
        goto done;
    }
    snprintf(path, sizeof path, "%s/expected/loss.npy", x->dir);
    teexec_tensor *want_loss = NULL;
    st = teexec_tensor_load_file(path, &want_loss);
    double loss_err = st ? INFINITY : fabs(loss - elem(want_loss, 0)) / fabs(elem(want_loss, 0));
    teexec_status_destroy(st);
    teexec_tensor_destroy(want_loss);
    size_t n_ref = teexec_dataset_count(ref);
    const teexec_tensor **refs = malloc((n_ref ? n_ref : 1) * sizeof *refs);
    assert_non_null(refs);
    for (size_t i = 0; i < n_ref; i++) refs[i] = teexec_dataset_tensor(ref, i);
    double floor = grad_floor(refs, n_ref);
    free(refs);
    double worst = 0;
    char worst_name[256] = "", missing[1400] = "";
    for (size_t i = 0; i < n_ref; i++) {
        const char *name = teexec_dataset_name(ref, i);
        const teexec_tensor *want = teexec_dataset_tensor(ref, i);
        teexec_tensor *got = NULL;
        st = teexec_trainer_grad(t, name, &got);
        if (st) {
            if (!missing[0]) snprintf(missing, sizeof missing, "%s: %s", name, status_text(st));
            else teexec_status_destroy(st);
            worst = INFINITY;
            continue;
        }
        double e = grad_error(got, want, floor);
        if (!(e <= worst)) {
            worst = isnan(e) ? INFINITY : e;
            snprintf(worst_name, sizeof worst_name, "%s", name);
        }
        teexec_tensor_destroy(got);
    }
    outcome(x->name, "grads", worst <= 1e-4 && loss_err <= 1e-5,
            "worst %.2e (%s), loss rel %.1e%s%s", worst, worst_name, loss_err,
            missing[0] ? "; missing " : "", missing);
done:
    batch_free(&b);
    teexec_trainer_destroy(t);
    teexec_dataset_destroy(ref);
}

static void check_adamw(export_ctx *x, const teexec_dataset *ds)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/expected/adamw_loss.npy", x->dir);
    teexec_tensor *want = NULL;
    teexec_trainer *t = NULL;
    teexec_status *st = teexec_tensor_load_file(path, &want);
    if (!st) st = trainer_for(x, 1e-3, 0.01, &t);
    double worst = 0;
    int at = -1;
    int64_t rows = teexec_dataset_count(ds) ? teexec_tensor_dims(teexec_dataset_tensor(ds, 0))[0] : 0;
    for (int s = 0; s < ADAMW_STEPS && !st; s++) {
        batch b;
        st = make_batch(ds, (int64_t)(BATCH * s) % (rows ? rows : 1), &b);
        double loss = NAN;
        if (!st)
            st = teexec_trainer_step(t, b.n, b.names, (const teexec_tensor *const *)b.ts, &loss);
        batch_free(&b);
        double e = fabs(loss - elem(want, (uint64_t)s)) / fabs(elem(want, (uint64_t)s));
        if (!(e <= worst)) {
            worst = isnan(e) ? INFINITY : e;
            at = s;
        }
    }
    if (st) outcome(x->name, "adamw", false, "%s", status_text(st));
    else
        outcome(x->name, "adamw", worst <= 1e-3, "worst relative loss difference %.2e (step %d)",
                worst, at);
    teexec_trainer_destroy(t);
    teexec_tensor_destroy(want);
}

/* Every recipe on the CUDA backend against the same recipe on the CPU.
 * Both devices run the same plan with the same bit-exact quantizers, so
 * where sm_90 emulates the recipe (MXFP8, NVFP4: FP32 GEMMs on the
 * dequantized operands, as the CPU's) they differ by FP32 summation order
 * alone: inference within 1e-5, and one training step (fp32 model, lr 0)
 * with its loss within 1e-5 and every gradient within 1e-4 of the CPU's.
 * Per-tensor FP8 and FP8 block run native FP8 GEMMs on sm_90, whose
 * accumulator keeps fewer bits than FP32 (bench/gpu/fp8_accum_study:
 * 2e-4 rel-L2 per GEMM against FP64 with split accumulation, 1e-3 with
 * fast); every later re-quantization turns that into whole E4M3 steps for
 * about 1% of the elements, so two runs of the recipe that differ anywhere
 * end a fixed distance apart, about 0.6 of the recipe's own effect (the
 * CPU alone, with 1e-6 noise on its GEMMs, shows it:
 * bench/results/fp8_sensitivity_2026-12-03.md). For those the CUDA output
 * must be closer to the CPU's than the recipe's own output is to recipe
 * none's, and within 0.1 (about one E4M3 step): a wrong scale, layout or
 * format is off by far more. */
static const struct {
    const char *name;
    bool emulated;     /* on sm_90 */
    bool global_scale; /* a per-tensor scale over its block scales (NVFP4) */
} zoo_recipes[] = {
    {"fp8-delayed", false, false}, {"fp8-current", false, false}, {"fp8-block", false, false},
    {"mxfp8", true, false},        {"nvfp4", true, true},
};

static void check_recipes_run(export_ctx *x, const teexec_tensor *cpu_none)
{
    char why[1024] = "";
    int len = 0;
    bool good = true;
    for (size_t r = 0; r < sizeof zoo_recipes / sizeof *zoo_recipes && good; r++) {
        const char *rn = zoo_recipes[r].name;
        teexec_tensor *c = NULL, *g = NULL;
        teexec_status *st = run_recipe(x->model, TEEXEC_DEVICE_CPU, TEEXEC_DTYPE_UNDEFINED, rn,
                                       &x->in, &c);
        if (st) {
            snprintf(why, sizeof why, "%s on the CPU: %.900s", rn, status_text(st));
            good = false;
            break;
        }
        st = run_recipe(x->model, TEEXEC_DEVICE_CUDA, TEEXEC_DTYPE_UNDEFINED, rn, &x->in, &g);
        if (st) {
            snprintf(why, sizeof why, "%s on CUDA: %.900s", rn, status_text(st));
            teexec_tensor_destroy(c);
            good = false;
            break;
        }
        double diff = rel_l2(g, c), move = rel_l2(c, cpu_none);
        /* (a recipe that quantizes nothing here moves nothing: 1e-5 then) */
        good = diff <= 1e-5 || (!zoo_recipes[r].emulated && diff <= 0.1 && diff < move);
        if (len < (int)sizeof why - 1)
            len += snprintf(why + len, sizeof why - (size_t)len, "%s%s %.1e (recipe %.1e)",
                            r ? ", " : "", rn, diff, move);
        teexec_tensor_destroy(c);
        teexec_tensor_destroy(g);
    }
    outcome(x->name, "recipes", good, "cuda vs cpu: %s", why);
}

/* One training step per emulated recipe on both devices (see above): loss
 * within 1e-5, every gradient within 1e-4 of the CPU's. NVFP4 also scales
 * each tensor by its global amax, so there, as with per-tensor FP8, an
 * FP32-order difference in one amax requantizes a whole gradient tensor:
 * its gradients may differ by up to a tenth of what the recipe itself moves
 * them off recipe none on the CPU (measured on the H200: 2.4e-2 on one of
 * roberta_dynamo's gradients, 3.3e-3 on one of gpt_neox_torchscript's; the
 * other exports within 1e-4). */
static void check_recipes_train(export_ctx *x, const teexec_dataset *ds)
{
    char why[1024] = "", err[1024] = "";
    int len = 0;
    bool good = true;
    batch b = {0};
    teexec_status *st = make_batch(ds, 0, &b);
    if (st) {
        outcome(x->name, "recipes_train", false, "%s", status_text(st));
        return;
    }
    /* recipe none on the CPU: how far each recipe moves each gradient */
    teexec_trainer *none = NULL;
    double none_loss = NAN;
    st = trainer_on(x, TEEXEC_DEVICE_CPU, 0.0, 0.0, TEEXEC_DTYPE_UNDEFINED, NULL, &none);
    if (!st) st = teexec_trainer_step(none, b.n, b.names, (const teexec_tensor *const *)b.ts,
                                      &none_loss);
    if (st) {
        outcome(x->name, "recipes_train", false, "recipe none on the CPU: %s", status_text(st));
        teexec_trainer_destroy(none);
        batch_free(&b);
        return;
    }
    for (size_t r = 0; r < sizeof zoo_recipes / sizeof *zoo_recipes && good; r++) {
        if (!zoo_recipes[r].emulated) continue;
        const char *rn = zoo_recipes[r].name;
        const bool global_scale = zoo_recipes[r].global_scale;
        teexec_trainer *t[2] = {NULL, NULL};
        double loss[2] = {NAN, NAN};
        static const teexec_device devs[2] = {TEEXEC_DEVICE_CPU, TEEXEC_DEVICE_CUDA};
        for (int d = 0; d < 2 && !err[0]; d++) {
            st = trainer_on(x, devs[d], 0.0, 0.0, TEEXEC_DTYPE_UNDEFINED, rn, &t[d]);
            if (!st)
                st = teexec_trainer_step(t[d], b.n, b.names, (const teexec_tensor *const *)b.ts,
                                         &loss[d]);
            if (st) /* status_text takes st */
                snprintf(err, sizeof err, "%s on %s: %.900s", rn, d ? "CUDA" : "the CPU",
                         status_text(st));
            st = NULL;
        }
        size_t n = err[0] ? 0 : teexec_trainer_param_count(t[0]);
        teexec_tensor **want = calloc(n ? n : 1, sizeof *want);
        assert_non_null(want);
        for (size_t i = 0; i < n && !st; i++)
            st = teexec_trainer_grad(t[0], teexec_trainer_param_name(t[0], i), &want[i]);
        double worst = 0, worst_bound = 1e-4, excess = 0;
        char worst_name[256] = "";
        if (!st) {
            double floor = grad_floor((const teexec_tensor *const *)want, n);
            for (size_t i = 0; i < n && !st; i++) {
                teexec_tensor *got = NULL, *g0 = NULL;
                const char *name = teexec_trainer_param_name(t[0], i);
                st = teexec_trainer_grad(t[1], name, &got);
                /* a broadcast token may be held as one copy on one device
                 * and as the batch's copies on the other (grad_error) */
                bool one_copy = !st && !same_shape(got, want[i]) && teexec_tensor_rank(got) > 0 &&
                                teexec_tensor_dims(got)[0] == 1;
                double e = st ? INFINITY
                           : one_copy ? grad_error(want[i], got, floor)
                                      : grad_error(got, want[i], floor);
                double bound = 1e-4;
                if (!st && global_scale) {
                    st = teexec_trainer_grad(none, name, &g0);
                    if (!st) {
                        double move = grad_error(want[i], g0, floor);
                        if (0.1 * move > bound) bound = 0.1 * move;
                    }
                }
                if (!(e / bound <= excess)) {
                    excess = e / bound;
                    worst = e;
                    worst_bound = bound;
                    snprintf(worst_name, sizeof worst_name, "%s", name);
                }
                teexec_tensor_destroy(got);
                teexec_tensor_destroy(g0);
            }
        }
        if (st) snprintf(err, sizeof err, "%s: %.900s", rn, status_text(st));
        st = NULL;
        double loss_err = fabs(loss[1] - loss[0]) / fabs(loss[0]);
        good = !err[0] && excess <= 1.0 && loss_err <= 1e-5;
        if (!err[0] && len < (int)sizeof why - 1)
            len += snprintf(why + len, sizeof why - (size_t)len,
                            "%s%s loss %.1e, worst grad %.1e (%s, bound %.1e)", len ? ", " : "",
                            rn, loss_err, worst, worst_name, worst_bound);
        for (size_t i = 0; i < n; i++) teexec_tensor_destroy(want[i]);
        free(want);
        teexec_trainer_destroy(t[0]);
        teexec_trainer_destroy(t[1]);
    }
    batch_free(&b);
    teexec_trainer_destroy(none);
    outcome(x->name, "recipes_train", good, "cuda vs cpu: %s%s%s", why, why[0] && err[0] ? "; " : "",
            err);
}

/* A few low-precision training steps on the device: the loss stays finite
 * and goes down. */
static void check_train_recipe(export_ctx *x, const teexec_dataset *ds, const char *check,
                               const char *recipe)
{
    teexec_trainer *t = NULL;
    teexec_status *st = trainer_as(x, 1e-3, 0.01, TEEXEC_DTYPE_BFLOAT16, recipe, &t);
    double first = NAN, last = NAN;
    bool finite = true;
    for (int s = 0; s < 5 && !st; s++) {
        batch b;
        /* the same rows every step: the loss must fall on them */
        st = make_batch(ds, 0, &b);
        double loss = NAN;
        if (!st)
            st = teexec_trainer_step(t, b.n, b.names, (const teexec_tensor *const *)b.ts, &loss);
        batch_free(&b);
        finite &= isfinite(loss);
        if (s == 0) first = loss;
        last = loss;
    }
    if (st) outcome(x->name, check, false, "%s", status_text(st));
    else
        outcome(x->name, check, finite && last < first, "loss %.4f -> %.4f over 5 steps%s", first,
                last, finite ? "" : " (not finite)");
    teexec_trainer_destroy(t);
}

static void check_export(void **state)
{
    export_ctx *x = *state;
    char path[4096];
    teexec_status *st = load_model(x->model_path, &x->model);
    if (st) {
        const char *m = status_text(st);
        const char *checks = device == TEEXEC_DEVICE_CUDA
                                 ? "run run_bf16 grads adamw train_bf16 train_fp8 train_mxfp8 "
                                   "recipes recipes_train"
                                 : "run convert plan attention grads adamw";
        for (const char *c = checks; *c;) {
            char check[32];
            int len = 0;
            sscanf(c, "%31s%n", check, &len);
            outcome(x->name, check, false, "loading: %s", m);
            c += len;
            while (*c == ' ') c++;
        }
        return;
    }
    assert_true(tx_test_inputs_load(x->dir, &x->in, NULL, 0));
    assert_null(teexec_tensor_load_file(x->expected_path, &x->expected));
    snprintf(path, sizeof path, "%s/train.npz", x->dir);
    teexec_dataset *ds = NULL;
    assert_null(teexec_dataset_load_npz(path, &ds));
    for (size_t i = 0; i < teexec_dataset_count(ds); i++)
        if (!strcmp(teexec_dataset_name(ds, i), "labels")) x->decoder = true;
    check_run(x);
    if (device == TEEXEC_DEVICE_CUDA) {
        check_run_as(x, "run_bf16", TEEXEC_DTYPE_BFLOAT16, 2e-2);
        check_grads(x, ds);
        check_adamw(x, ds);
        check_train_recipe(x, ds, "train_bf16", "none");
        check_train_recipe(x, ds, "train_fp8", "fp8-current");
        check_train_recipe(x, ds, "train_mxfp8", "mxfp8");
        teexec_tensor *none = NULL;
        teexec_status *nst = run_cpu(x->model, &x->in, &none);
        if (nst) outcome(x->name, "recipes", false, "recipe none on the CPU: %s", status_text(nst));
        else check_recipes_run(x, none);
        teexec_tensor_destroy(none);
        check_recipes_train(x, ds);
    } else {
        check_convert(x);
        check_plans(x);
        check_lowering(x);
        check_grads(x, ds);
        check_adamw(x, ds);
    }
    teexec_dataset_destroy(ds);
    tx_test_inputs_free(&x->in);
    teexec_tensor_destroy(x->expected);
    teexec_model_destroy(x->model);
    x->model = NULL;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const export_ctx *)a)->name, ((const export_ctx *)b)->name);
}

/* Whether a CUDA session can be made at all (a GPU, a CUDA build). */
static bool cuda_usable(void)
{
    teexec_session_options *o = NULL;
    teexec_status *st = teexec_session_options_create(&o);
    if (!st) st = teexec_session_options_set_device(o, TEEXEC_DEVICE_CUDA);
    teexec_session_options_destroy(o);
    if (st) {
        teexec_status_destroy(st);
        return false;
    }
    char path[2048];
    snprintf(path, sizeof path, "%s/models/mlp/model.onnx", root);
    teexec_model *m = NULL;
    st = load_model(path, &m);
    teexec_session *s = NULL;
    if (!st) {
        teexec_session_options *so = NULL;
        st = teexec_session_options_create(&so);
        if (!st) st = teexec_session_options_set_device(so, TEEXEC_DEVICE_CUDA);
        if (!st) st = teexec_session_create(m, so, &s);
        teexec_session_options_destroy(so);
    }
    bool usable = !st;
    if (st) fprintf(stderr, "test_zoo cuda: SKIP: %s\n", teexec_status_message(st));
    teexec_status_destroy(st);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
    return usable;
}

int main(int argc, char **argv)
{
    const char *r = getenv("TEEXEC_SOURCE_ROOT");
    snprintf(root, sizeof root, "%s", r ? r : ".");
    const char *tmp = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/teexec-zoo-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", tmpdir, strerror(errno));
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        device = TEEXEC_DEVICE_CUDA;
        if (!cuda_usable()) return 77;
    }
    load_gaps();
    char zoo[1100];
    snprintf(zoo, sizeof zoo, "%s/models/zoo", root);
    DIR *d = opendir(zoo);
    if (!d) {
        fprintf(stderr, "no %s\n", zoo);
        return 1;
    }
    static export_ctx exports[128];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < sizeof exports / sizeof *exports) {
        if (e->d_name[0] == '.') continue;
        export_ctx *x = &exports[n];
        snprintf(x->name, sizeof x->name, "%.255s", e->d_name);
        snprintf(x->dir, sizeof x->dir, "%.1099s/%.255s", zoo, e->d_name);
        char dir[sizeof x->dir];
        memcpy(dir, x->dir, sizeof dir); /* a separate object to format from */
        snprintf(x->model_path, sizeof x->model_path, "%s/model.onnx", dir);
        struct stat sb;
        if (stat(x->model_path, &sb) != 0) continue;
        /* decoders' output is `logits`, the others' `last_hidden_state` */
        snprintf(x->expected_path, sizeof x->expected_path, "%s/expected/logits.npy", dir);
        if (access(x->expected_path, R_OK) != 0)
            snprintf(x->expected_path, sizeof x->expected_path,
                     "%s/expected/last_hidden_state.npy", dir);
        n++;
    }
    closedir(d);
    qsort(exports, n, sizeof *exports, name_cmp);
    struct CMUnitTest *tests = calloc(n ? n : 1, sizeof *tests);
    if (!tests) return 1;
    for (size_t i = 0; i < n; i++) {
        tests[i].name = exports[i].name;
        tests[i].test_func = check_export;
        tests[i].initial_state = &exports[i];
    }
    int failed = _cmocka_run_group_tests("zoo", tests, n, NULL, NULL);
    free(tests);
    rmdir(tmpdir);
    for (size_t i = 0; i < n_gaps; i++) {
        bool exists = false;
        for (size_t k = 0; k < n; k++) exists |= !strcmp(exports[k].name, gaps[i].export_name);
        if (!exists) {
            fprintf(stderr, "expected_gaps.txt names %s, which is not in the zoo\n",
                    gaps[i].export_name);
            stale_gaps++;
        }
    }
    printf("# zoo: %zu exports, %d unexpected failures, %d listed gaps that pass now\n", n,
           unexpected_failures, stale_gaps);
    return failed || unexpected_failures || stale_gaps ? 1 : 0;
}
