/* TE-domain golden models: every models/te_* folder (written by
 * models/make_te_models.py from an independent float64 PyTorch reference)
 * runs through the public session API on the CPU, and each output matches
 * expected/<output>.npy to rel-L2 < 1e-5; and one training step at lr 0
 * through the public trainer API (MSE against train.npz's target) gives
 * the gradient of every trainable initializer and float input that
 * expected/grads.npz holds (rel-L2 < 1e-5), the same set of parameters, and
 * the loss of expected/loss.npy.
 *
 * Two cmocka tests per folder (forward, gradients), found at run time,
 * plus one that checks the four folders the generator writes are all
 * there, so a lost folder fails instead of silently shrinking the test.
 * A folder that cannot be loaded, planned, run or trained fails its test:
 * nothing here skips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "teexec/teexec.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_FOLDERS 64

static const char *const expected_folders[] = {"te_mlp", "te_gpt2_block", "te_llama_block",
                                               "te_moe_block"};

static bool exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static const char *source_root(void)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    return root ? root : ".";
}

static double rel_l2(const double *got, const double *want, uint64_t n)
{
    double num = 0, den = 0;
    for (uint64_t k = 0; k < n; k++) {
        double d = got[k] - want[k];
        num += d * d;
        den += want[k] * want[k];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Loads a .npy (as stored) and converts it to float64; fails the test on error. */
static teexec_tensor *load_f64(const char *path)
{
    teexec_tensor *t = NULL, *d = NULL;
    teexec_status *st = teexec_tensor_load_file(path, &t);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    st = teexec_tensor_cast(t, TEEXEC_DTYPE_DOUBLE, &d);
    if (st) fail_msg("%s: cast to float64: %s", path, teexec_status_message(st));
    teexec_tensor_destroy(t);
    return d;
}

/* Compares one output with expected/<name>.npy (and reports the distance to
 * the float64 reference in expected/float64/ too). Returns rel-L2. */
static double compare_output(const char *dir, const char *name, const teexec_tensor *out)
{
    char path[8192];
    snprintf(path, sizeof(path), "%s/expected/%s.npy", dir, name);
    if (!exists(path)) fail_msg("%s: no expected/%s.npy for output %s", dir, name, name);
    teexec_tensor *want = load_f64(path), *got = NULL;
    int32_t rank = teexec_tensor_rank(want);
    if (teexec_tensor_rank(out) != rank ||
        memcmp(teexec_tensor_dims(out), teexec_tensor_dims(want), (size_t)rank * sizeof(int64_t)))
        fail_msg("%s output %s: shape differs from expected/%s.npy", dir, name, name);
    teexec_status *st = teexec_tensor_cast(out, TEEXEC_DTYPE_DOUBLE, &got);
    if (st) fail_msg("%s output %s: cast: %s", dir, name, teexec_status_message(st));
    uint64_t n = teexec_tensor_element_count(want);
    double rel = rel_l2(teexec_tensor_data_const(got), teexec_tensor_data_const(want), n);

    snprintf(path, sizeof(path), "%s/expected/float64/%s.npy", dir, name);
    double rel64 = -1;
    if (exists(path)) {
        teexec_tensor *w64 = load_f64(path);
        assert_int_equal(teexec_tensor_element_count(w64), n);
        rel64 = rel_l2(teexec_tensor_data_const(got), teexec_tensor_data_const(w64), n);
        teexec_tensor_destroy(w64);
    }
    printf("# %s output %s: rel-L2 %.3g (vs float64 reference %.3g)\n", dir, name, rel, rel64);
    teexec_tensor_destroy(want);
    teexec_tensor_destroy(got);
    return rel;
}

static void run_folder(void **state)
{
    const char *folder = *state;
    char dir[4200], path[8192];
    snprintf(dir, sizeof(dir), "%s/models/%s", source_root(), folder);
    snprintf(path, sizeof(path), "%s/model.onnx", dir);

    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));

    teexec_session_options *opt = NULL;
    assert_null(teexec_session_options_create(&opt));
    assert_null(teexec_session_options_set_device(opt, TEEXEC_DEVICE_CPU));
    teexec_session *s = NULL;
    st = teexec_session_create(m, opt, &s);
    teexec_session_options_destroy(opt);
    if (st) fail_msg("%s: session on the CPU: %s", path, teexec_status_message(st));

    size_t n_in = teexec_model_input_count(m), n_out = teexec_model_output_count(m);
    assert_true(n_out > 0);
    teexec_tensor **ins = calloc(n_in + 1, sizeof(*ins));
    const char **names = calloc(n_in + 1, sizeof(*names));
    teexec_tensor **outs = calloc(n_out, sizeof(*outs));
    assert_non_null(ins);
    assert_non_null(names);
    assert_non_null(outs);
    for (size_t i = 0; i < n_in; i++) {
        names[i] = teexec_model_input(m, i)->name;
        snprintf(path, sizeof(path), "%s/inputs/%s.npy", dir, names[i]);
        st = teexec_tensor_load_file(path, &ins[i]);
        if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    }
    st = teexec_session_run(s, n_in, names, (const teexec_tensor *const *)ins, n_out, NULL, outs);
    if (st) fail_msg("%s: run on the CPU: %s", dir, teexec_status_message(st));

    for (size_t j = 0; j < n_out; j++) {
        const char *name = teexec_model_output(m, j)->name;
        double rel = compare_output(dir, name, outs[j]);
        if (!(rel < 1e-5)) fail_msg("%s output %s: rel-L2 %g >= 1e-5", dir, name, rel);
    }

    for (size_t i = 0; i < n_in; i++) teexec_tensor_destroy(ins[i]);
    for (size_t j = 0; j < n_out; j++) teexec_tensor_destroy(outs[j]);
    free(ins);
    free(names);
    free(outs);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
}

static const teexec_tensor *ds_find(const teexec_dataset *d, const char *name)
{
    for (size_t i = 0; i < teexec_dataset_count(d); i++)
        if (strcmp(teexec_dataset_name(d, i), name) == 0) return teexec_dataset_tensor(d, i);
    return NULL;
}

static teexec_dataset *load_npz(const char *dir, const char *file)
{
    char path[8192];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    teexec_dataset *d = NULL;
    teexec_status *st = teexec_dataset_load_npz(path, &d);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    return d;
}

/* Compares the trainer's gradient for `value` with want (float64). */
static void compare_grad(const char *folder, teexec_trainer *tr, const char *value,
                         const teexec_tensor *want)
{
    teexec_tensor *got = NULL, *g64 = NULL, *w64 = NULL;
    teexec_status *st = teexec_trainer_grad(tr, value, &got);
    if (st) fail_msg("%s: gradient of %s: %s", folder, value, teexec_status_message(st));
    int32_t rank = teexec_tensor_rank(want);
    if (teexec_tensor_rank(got) != rank ||
        memcmp(teexec_tensor_dims(got), teexec_tensor_dims(want), (size_t)rank * sizeof(int64_t)))
        fail_msg("%s: gradient of %s has another shape than in grads.npz", folder, value);
    assert_null(teexec_tensor_cast(got, TEEXEC_DTYPE_DOUBLE, &g64));
    assert_null(teexec_tensor_cast(want, TEEXEC_DTYPE_DOUBLE, &w64));
    double rel = rel_l2(teexec_tensor_data_const(g64), teexec_tensor_data_const(w64),
                        teexec_tensor_element_count(w64));
    printf("# %s grad %s: rel-L2 %.3g\n", folder, value, rel);
    if (!(rel < 1e-5)) fail_msg("%s: gradient of %s: rel-L2 %g >= 1e-5", folder, value, rel);
    teexec_tensor_destroy(got);
    teexec_tensor_destroy(g64);
    teexec_tensor_destroy(w64);
}

static void grads_folder(void **state)
{
    const char *folder = *state;
    char dir[4200], path[8192];
    snprintf(dir, sizeof(dir), "%s/models/%s", source_root(), folder);
    snprintf(path, sizeof(path), "%s/model.onnx", dir);

    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    teexec_train_options opt;
    teexec_train_options_init(&opt);
    opt.loss = TEEXEC_LOSS_MSE;
    opt.optimizer = TEEXEC_OPTIMIZER_SGD;
    opt.lr = 0;
    opt.weight_decay = 0;
    teexec_trainer *tr = NULL;
    st = teexec_trainer_create(m, &opt, &tr);
    if (st) fail_msg("%s: trainer: %s", path, teexec_status_message(st));

    /* train.npz holds every model input and the MSE target. */
    teexec_dataset *data = load_npz(dir, "train.npz");
    size_t n = teexec_dataset_count(data);
    const char **names = calloc(n + 1, sizeof(*names));
    const teexec_tensor **ts = calloc(n + 1, sizeof(*ts));
    assert_non_null(names);
    assert_non_null(ts);
    for (size_t i = 0; i < n; i++) {
        names[i] = teexec_dataset_name(data, i);
        ts[i] = teexec_dataset_tensor(data, i);
    }
    double loss = NAN;
    st = teexec_trainer_step(tr, n, names, ts, &loss);
    if (st) fail_msg("%s: training step: %s", dir, teexec_status_message(st));

    teexec_tensor *want_loss = NULL;
    snprintf(path, sizeof(path), "%s/expected/loss.npy", dir);
    want_loss = load_f64(path);
    double wl = *(const double *)teexec_tensor_data_const(want_loss);
    printf("# %s loss %.9g (reference %.9g)\n", folder, loss, wl);
    if (!(fabs(loss - wl) <= 1e-5 * fabs(wl)))
        fail_msg("%s: loss %.9g, reference %.9g", folder, loss, wl);
    teexec_tensor_destroy(want_loss);

    /* Every trainable initializer has a reference gradient, and every
     * reference gradient is checked: parameters by name, inputs as
     * "<input>.grad". */
    teexec_dataset *grads = load_npz(dir, "expected/grads.npz");
    size_t n_params = teexec_trainer_param_count(tr), n_ref_params = 0;
    for (size_t i = 0; i < n_params; i++) {
        const char *p = teexec_trainer_param_name(tr, i);
        if (!ds_find(grads, p))
            fail_msg("%s: trainable initializer %s has no reference gradient", folder, p);
    }
    for (size_t i = 0; i < teexec_dataset_count(grads); i++) {
        const char *g = teexec_dataset_name(grads, i);
        size_t len = strlen(g);
        char value[512];
        if (len > 5 && strcmp(g + len - 5, ".grad") == 0 && len - 5 < sizeof(value)) {
            memcpy(value, g, len - 5);
            value[len - 5] = '\0';
        } else {
            snprintf(value, sizeof(value), "%s", g);
            n_ref_params++;
        }
        compare_grad(folder, tr, value, teexec_dataset_tensor(grads, i));
    }
    if (n_ref_params != n_params)
        fail_msg("%s: the trainer has %zu trainable initializers, grads.npz %zu", folder,
                 n_params, n_ref_params);

    teexec_dataset_destroy(grads);
    free(names);
    free(ts);
    teexec_dataset_destroy(data);
    teexec_trainer_destroy(tr);
    teexec_model_destroy(m);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* models/te_* folders holding a model.onnx, sorted; returns the count. */
static size_t list_folders(char **names, size_t cap)
{
    char models[4096];
    snprintf(models, sizeof(models), "%s/models", source_root());
    DIR *d = opendir(models);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        if (strncmp(de->d_name, "te_", 3) != 0) continue;
        char p[8192];
        snprintf(p, sizeof(p), "%s/%s/model.onnx", models, de->d_name);
        if (!exists(p)) continue;
        names[n] = strdup(de->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_str);
    return n;
}

static void all_generated_folders_present(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(expected_folders) / sizeof(expected_folders[0]); i++) {
        char p[8192];
        snprintf(p, sizeof(p), "%s/models/%s/model.onnx", source_root(), expected_folders[i]);
        if (!exists(p)) fail_msg("missing %s (run models/make_te_models.py)", p);
    }
}

int main(void)
{
    char *names[MAX_FOLDERS];
    size_t n = list_folders(names, MAX_FOLDERS);
    char labels[MAX_FOLDERS][2][128];
    struct CMUnitTest *tests = calloc(2 * n + 1, sizeof(*tests));
    if (!tests) return 1;
    tests[0] = (struct CMUnitTest)cmocka_unit_test(all_generated_folders_present);
    for (size_t i = 0; i < n; i++) {
        snprintf(labels[i][0], sizeof(labels[i][0]), "%s forward", names[i]);
        snprintf(labels[i][1], sizeof(labels[i][1]), "%s gradients", names[i]);
        tests[1 + 2 * i] = (struct CMUnitTest)cmocka_unit_test_prestate(run_folder, names[i]);
        tests[1 + 2 * i].name = labels[i][0];
        tests[2 + 2 * i] = (struct CMUnitTest)cmocka_unit_test_prestate(grads_folder, names[i]);
        tests[2 + 2 * i].name = labels[i][1];
    }
    int rc = _cmocka_run_group_tests("te_models", tests, 2 * n + 1, NULL, NULL);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(tests);
    return rc;
}
