/* GPU test: the CUDA executor runs the fuser plan it shows (issue 16). For
 * every sample model and zoo export with stored inputs:
 *   - an inference session (the model's dtype, recipe none): the kernels
 *     its executor ran for each CHAIN group (tx_session_cuda_kernels) are
 *     the plan's forward layout;
 *   - a bf16 training step under recipe none and fp8-current (the
 *     quantized hand-offs, BackwardActivationBias) on the models with
 *     train.npz: the forward and backward kernels are the plan's forward
 *     and backward layouts.
 * The one allowed difference: a planned fusion the executor could not
 * prepare (no CUDA kernel for it, or a dGELU epilogue its wiring refused)
 * runs as its ops unfused, and then the plan holds the executor's decline
 * at that place saying why (what --profile and --explain print). Those are
 * counted and listed.
 *
 * The memory plan too: every executor sets its arena's lifetimes from the
 * plan's memory plan (tx_cuda_executor_memory), and none of its own uses
 * reaches past them (each one that would is listed). And the lifetimes hold: each run and step is repeated with
 * TEEXEC_CUDA_POISON_DEAD=1 (every buffer filled with NaN once its
 * lifetime ends) and must give the same outputs and losses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec/cuda/cuda_executor.h"
#include "exec/session_internal.h"
#include "teexec/teexec.h"
#include "tests/model_inputs.h"
#include "tests/gpu/gpu_harness.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_IO 8
#define BATCH 2

static char root[1024];

typedef tx_test_inputs io;

static void ok(teexec_status *st, const char *what)
{
    if (st) fail_msg("%s: %s", what, teexec_status_message(st));
}

/* The model directory's stored inputs; false when it has none. */
static bool load_inputs(const char *dir, io *in)
{
    char path[4200], why[600];
    snprintf(path, sizeof path, "%s/inputs", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return false;
    if (!tx_test_inputs_load(dir, in, why, sizeof why)) fail_msg("%s", why);
    return in->n > 0;
}

/* The model input's declared leading dim, or 0 when symbolic or absent
 * (a training target). */
static int64_t declared_rows(const teexec_model *m, const char *name)
{
    for (size_t i = 0; i < teexec_model_input_count(m); i++) {
        const teexec_value_info *v = teexec_model_input(m, i);
        if (v && v->name && !strcmp(v->name, name))
            return v->rank > 0 && v->dims[0] > 0 ? v->dims[0] : 0;
    }
    return 0;
}

/* The first rows of every array of the dataset: as many as the model
 * declares for that input (split_sizes of a GroupedLinear stay whole), else
 * BATCH; a target takes the rows its model input's first array took. */
static void first_rows(const teexec_model *m, const teexec_dataset *ds, io *b)
{
    memset(b, 0, sizeof *b);
    /* the rows of the first input the model fixes, for the targets */
    int64_t batch = 0;
    for (size_t i = 0; i < teexec_dataset_count(ds) && !batch; i++)
        batch = declared_rows(m, teexec_dataset_name(ds, i));
    for (size_t i = 0; i < teexec_dataset_count(ds) && b->n < MAX_IO; i++) {
        int64_t want = declared_rows(m, teexec_dataset_name(ds, i));
        if (!want) want = batch ? batch : BATCH;
        ok(tx_test_rows(teexec_dataset_tensor(ds, i), 0, want, &b->ts[b->n]), "batch");
        b->names[b->n++] = teexec_dataset_name(ds, i);
    }
}

typedef struct tally {
    int checked, declined;
    char declines[4096];
    size_t at;
    /* memory: executors checked, plan entries taken, lifetimes widened */
    int executors;
    size_t from_plan, widened;
} tally;

static void check_memory(const char *what, const tx_cuda_memory_report *r, tally *t)
{
    if (!r->planned) fail_msg("%s: the arena's lifetimes are not the plan's: %s", what, r->why_own);
    t->executors++;
    t->from_plan += r->from_plan;
    t->widened += r->widened;
    if (r->widened) print_message("  %s: %zu lifetime(s) widened past the memory plan: %s\n", what,
                                  r->widened, r->widened_names);
}

/* The same numbers as the unpoisoned run: a dead buffer read shows as a
 * NaN (or as what happened to be left there); the tolerance only allows
 * for kernels whose reduction order may vary from run to run. */
static void same_floats(const char *what, const teexec_tensor *a, const teexec_tensor *b)
{
    if (teexec_tensor_dtype(a) != TEEXEC_DTYPE_FLOAT) return;
    uint64_t n = teexec_tensor_element_count(a);
    assert_int_equal(n, teexec_tensor_element_count(b));
    const float *x = teexec_tensor_data((teexec_tensor *)a), *y = teexec_tensor_data((teexec_tensor *)b);
    for (uint64_t i = 0; i < n; i++)
        if (memcmp(&x[i], &y[i], sizeof(float)) != 0 &&
            !(fabsf(x[i] - y[i]) <= 1e-3f * (fabsf(x[i]) > 1 ? fabsf(x[i]) : 1)))
            fail_msg("%s: element %llu is %.9g with dead buffers poisoned, %.9g without", what,
                     (unsigned long long)i, (double)y[i], (double)x[i]);
}

/* The reason of the last decline of kernel k's fusion at its place (the
 * executor's, added after planning), or NULL when there is none. */
static const char *decline_at(const tx_fuser_plan *fp, int32_t group, const tx_plan_kernel *k)
{
    const char *r = NULL;
    for (size_t d = 0; d < fp->n_declines; d++)
        if (fp->declines[d].group == group && fp->declines[d].first_op == k->first &&
            fp->declines[d].fusion == k->fusion)
            r = fp->declines[d].reason;
    return r;
}

/* The run's kernels of one group and pass against the plan's layout. */
static void check_group(const char *what, const tx_fuser_plan *fp, int32_t g, bool backward,
                        const tx_run_kernel *run, size_t n_run, tally *t)
{
    const tx_plan_group *pg = &fp->groups[g];
    const tx_plan_kernel *lay = backward ? pg->backward : pg->forward;
    int32_t n_lay = backward ? pg->n_backward : pg->n_forward;
    /* this group's run kernels by first op (each op in at most one) */
    int32_t *at = malloc((size_t)(pg->n_nodes ? pg->n_nodes : 1) * sizeof *at);
    assert_non_null(at);
    for (int32_t j = 0; j < pg->n_nodes; j++) at[j] = -1;
    size_t mine = 0;
    for (size_t i = 0; i < n_run; i++) {
        if (run[i].group != g) continue;
        mine++;
        const tx_plan_kernel *k = &run[i].k;
        if (k->first < 0 || k->first >= pg->n_nodes || at[k->first] >= 0)
            fail_msg("%s: group %d %s: a second kernel at op %d", what, (int)g,
                     backward ? "backward" : "forward", (int)k->first);
        at[k->first] = (int32_t)i;
    }
    size_t matched = 0;
    for (int32_t j = 0; j < n_lay; j++) {
        const tx_plan_kernel *e = &lay[j];
        int32_t r = at[e->first];
        if (r >= 0 && run[r].k.fusion == e->fusion && run[r].k.count == e->count) {
            matched++;
            continue;
        }
        /* declined while the executor was prepared: its ops ran unfused */
        bool unfused = e->fusion != TX_FUSION_NONE;
        for (int32_t o = e->first; unfused && o < e->first + e->count; o++)
            unfused = at[o] >= 0 && run[at[o]].k.fusion == TX_FUSION_NONE && run[at[o]].k.count == 1;
        const char *reason = unfused ? decline_at(fp, g, e) : NULL;
        if (reason) {
            matched += (size_t)e->count;
            t->declined++;
            const tx_fusion_info *fi = tx_fusion_info_of(e->fusion);
            if (t->at < sizeof t->declines)
                t->at += (size_t)snprintf(t->declines + t->at, sizeof t->declines - t->at,
                                          "  %s: %s at group %d op %d: %s\n", what, fi->name,
                                          (int)g, (int)e->first, reason);
            continue;
        }
        const tx_fusion_info *fi = tx_fusion_info_of(e->fusion);
        fail_msg("%s: group %d %s: the plan has %s over ops %d+%d; the GPU ran %s", what, (int)g,
                 backward ? "backward" : "forward", fi ? fi->name : "?", (int)e->first,
                 (int)e->count,
                 r < 0 ? "nothing at that op" : tx_fusion_info_of(run[r].k.fusion)->name);
    }
    if (matched != mine)
        fail_msg("%s: group %d %s: the GPU ran %zu kernels, the plan accounts for %zu", what,
                 (int)g, backward ? "backward" : "forward", mine, matched);
    free(at);
    t->checked++;
}

static void check_trace(const char *what, const tx_run_kernel *k, size_t n, size_t n_fwd,
                        const tx_fuser_plan *fp, bool training, tally *t)
{
    assert_non_null(fp);
    for (size_t g = 0; g < fp->n_groups; g++) {
        if (fp->groups[g].kind != TX_GROUP_CHAIN) continue;
        check_group(what, fp, (int32_t)g, false, k, n_fwd, t);
        if (training) check_group(what, fp, (int32_t)g, true, k + n_fwd, n - n_fwd, t);
    }
    if (!training && n != n_fwd) fail_msg("%s: an inference run ran backward kernels", what);
}

/* One inference run; poison: with TEEXEC_CUDA_POISON_DEAD=1. The trace
 * and memory are checked on the unpoisoned run. */
static void run_session(const char *name, const teexec_model *m, const io *in, bool poison,
                        teexec_tensor **outs, tally *t)
{
    if (poison) setenv("TEEXEC_CUDA_POISON_DEAD", "1", 1);
    teexec_session_options *o = NULL;
    ok(teexec_session_options_create(&o), "options");
    ok(teexec_session_options_set_device(o, TEEXEC_DEVICE_CUDA), "device");
    teexec_session *s = NULL;
    ok(teexec_session_create(m, o, &s), name);
    teexec_session_options_destroy(o);
    size_t n_out = teexec_model_output_count(m);
    assert_true(n_out <= MAX_IO);
    ok(teexec_session_run(s, in->n, in->names, (const teexec_tensor *const *)in->ts, n_out, NULL,
                          outs),
       name);
    char what[300];
    snprintf(what, sizeof what, "%s inference", name);
    tx_cuda_memory_report mr;
    ok(tx_session_cuda_memory(s, &mr), name);
    if (mr.poisoned != poison) fail_msg("%s: poisoning is %s", what, mr.poisoned ? "on" : "off");
    if (!poison) {
        tx_run_kernel *k = NULL;
        size_t n = 0, nf = 0;
        const tx_fuser_plan *fp = NULL;
        ok(tx_session_cuda_kernels(s, &k, &n, &nf, &fp), name);
        check_trace(what, k, n, nf, fp, false, t);
        free(k);
        check_memory(what, &mr, t);
    }
    teexec_session_destroy(s);
    unsetenv("TEEXEC_CUDA_POISON_DEAD");
}

static void check_session(const char *name, const teexec_model *m, const io *in, tally *t)
{
    teexec_tensor *outs[MAX_IO] = {0}, *poisoned[MAX_IO] = {0};
    run_session(name, m, in, false, outs, t);
    run_session(name, m, in, true, poisoned, t);
    for (size_t i = 0; i < teexec_model_output_count(m); i++) {
        char what[300];
        snprintf(what, sizeof what, "%s inference, output %zu", name, i);
        same_floats(what, outs[i], poisoned[i]);
        teexec_tensor_destroy(outs[i]);
        teexec_tensor_destroy(poisoned[i]);
    }
}

/* Two training steps (the second's loss reads the first's gradients
 * through the update); poison as for run_session. */
static void train_steps(const char *name, const teexec_model *m, const teexec_dataset *ds,
                        const char *recipe, bool poison, double loss[2], tally *t)
{
    if (poison) setenv("TEEXEC_CUDA_POISON_DEAD", "1", 1);
    bool decoder = false;
    for (size_t i = 0; i < teexec_dataset_count(ds); i++)
        if (!strcmp(teexec_dataset_name(ds, i), "labels")) decoder = true;
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CUDA;
    o.loss = decoder ? TEEXEC_LOSS_CROSS_ENTROPY : TEEXEC_LOSS_MSE;
    o.dtype = TEEXEC_DTYPE_BFLOAT16;
    o.recipe = recipe;
    o.lr = 1e-3;
    teexec_trainer *tr = NULL;
    char what[300];
    snprintf(what, sizeof what, "%s training (bf16, %s)", name, recipe);
    ok(teexec_trainer_create(m, &o, &tr), what);
    io b;
    first_rows(m, ds, &b);
    for (int i = 0; i < 2; i++)
        ok(teexec_trainer_step(tr, b.n, b.names, (const teexec_tensor *const *)b.ts, &loss[i]),
           what);
    tx_test_inputs_free(&b);
    tx_cuda_memory_report mr;
    ok(tx_trainer_cuda_memory(tr, &mr), what);
    if (mr.poisoned != poison) fail_msg("%s: poisoning is %s", what, mr.poisoned ? "on" : "off");
    if (!poison) {
        tx_run_kernel *k = NULL;
        size_t n = 0, nf = 0;
        const tx_fuser_plan *fp = NULL;
        ok(tx_trainer_cuda_kernels(tr, &k, &n, &nf, &fp), what);
        check_trace(what, k, n, nf, fp, true, t);
        free(k);
        check_memory(what, &mr, t);
    }
    teexec_trainer_destroy(tr);
    unsetenv("TEEXEC_CUDA_POISON_DEAD");
}

static void check_trainer(const char *name, const teexec_model *m, const teexec_dataset *ds,
                          const char *recipe, tally *t)
{
    double plain[2], poisoned[2];
    train_steps(name, m, ds, recipe, false, plain, t);
    train_steps(name, m, ds, recipe, true, poisoned, t);
    /* a NaN read from a dead buffer reaches the loss (forward) or the
     * second loss through the update (backward); otherwise the runs may
     * differ by the order of atomic adds only */
    for (int i = 0; i < 2; i++) {
        double tol = 1e-3 * (fabs(plain[i]) > 1 ? fabs(plain[i]) : 1);
        if (!isfinite(poisoned[i]) || fabs(poisoned[i] - plain[i]) > tol)
            fail_msg("%s training (bf16, %s): step %d loss %.9g with dead buffers poisoned, %.9g "
                     "without",
                     name, recipe, i + 1, poisoned[i], plain[i]);
    }
}

/* One model directory: inference, and training where it has train.npz. */
static void check_dir(const char *dir, const char *name, tally *t)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return;
    io in;
    if (!load_inputs(dir, &in)) return;
    teexec_model *m = NULL;
    ok(teexec_model_load_file(path, NULL, &m), path);
    check_session(name, m, &in, t);
    tx_test_inputs_free(&in);
    snprintf(path, sizeof path, "%s/train.npz", dir);
    teexec_dataset *ds = NULL;
    if (access(path, R_OK) == 0) {
        ok(teexec_dataset_load_npz(path, &ds), path);
        check_trainer(name, m, ds, "none", t);
        check_trainer(name, m, ds, "fp8-current", t);
        teexec_dataset_destroy(ds);
    }
    teexec_model_destroy(m);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void check_tree(const char *rel, tally *t)
{
    char base[1100];
    snprintf(base, sizeof base, "%s/%s", root, rel);
    DIR *d = opendir(base);
    if (!d) fail_msg("no %s", base);
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        char dir[1400];
        snprintf(dir, sizeof dir, "%s/%s", base, names[i]);
        check_dir(dir, names[i], t);
        free(names[i]);
    }
}

static void gpu_runs_the_plan(void **state)
{
    (void)state;
    tally t;
    memset(&t, 0, sizeof t);
    check_tree("models", &t);
    check_tree("models/zoo", &t);
    print_message("%d group layouts checked; %d planned fusions declined by the executor:\n%s",
                  t.checked, t.declined, t.declines);
    print_message("%d executors placed their arenas from the memory plan (%zu entries); %zu "
                  "lifetimes widened past it (listed above)\n",
                  t.executors, t.from_plan, t.widened);
    char detail[240];
    snprintf(detail, sizeof detail, "%d group layouts as planned, %d executor declines; %d arenas "
             "from the memory plan, %zu lifetimes widened; poisoned reruns equal",
             t.checked, t.declined, t.executors, t.widened);
    tg_record("gpu_runs_the_plan", 1, detail);
    assert_true(t.checked > 100);
    /* every lifetime the executors need is one the memory plan gives */
    assert_true(t.executors > 100);
    assert_int_equal(t.widened, 0);
}

int main(void)
{
    tg_require_gpu("test_gpu_plan_trace");
    const char *r = getenv("TEEXEC_SOURCE_ROOT");
    snprintf(root, sizeof root, "%s", r ? r : ".");
    const struct CMUnitTest tests[] = {cmocka_unit_test(gpu_runs_the_plan)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
