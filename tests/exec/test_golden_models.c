/* Golden-model tests: every folder under models/ holding model.onnx,
 * inputs/NAME.npy and expected/NAME.npy runs on the CPU backend and matches
 * the expected outputs (made by PyTorch) to rel-L2 < 1e-5. Folders are
 * found at run time; with none, the test is skipped with a reason.
 *
 * The Hugging Face exports with a KV cache (models/kv/NAME, made by
 * bench/gpu/make_kv_models.py) are checked on their prefill call (inputs/,
 * empty past) and on a decode step (inputs_step/, past length 8, s_q 1):
 * their attention, with symbolic batch and sequence dims and a mask
 * computed from attention_mask, must be lowered to one te.ops
 * DotProductAttention per layer and their two residual Adds a layer to
 * AddExtraInput, and still match. */
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

static bool exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* Runs one model folder; returns the number of outputs checked. */
static int check_call(const char *dir, const char *in_sub, const char *exp_sub)
{
    char path[16384];
    snprintf(path, sizeof(path), "%s/model.onnx", dir);
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    teexec_session *s = NULL;
    st = teexec_session_create(m, NULL, &s);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    size_t n_in = teexec_model_input_count(m), n_out = teexec_model_output_count(m);
    teexec_tensor **ins = calloc(n_in + 1, sizeof(*ins));
    const char **names = calloc(n_in + 1, sizeof(*names));
    teexec_tensor **outs = calloc(n_out + 1, sizeof(*outs));
    assert_non_null(ins);
    assert_non_null(names);
    assert_non_null(outs);
    for (size_t i = 0; i < n_in; i++) {
        names[i] = teexec_model_input(m, i)->name;
        snprintf(path, sizeof(path), "%s/%s/%s.npy", dir, in_sub, names[i]);
        st = teexec_tensor_load_file(path, &ins[i]);
        if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    }
    st = teexec_session_run(s, n_in, names, (const teexec_tensor *const *)ins, n_out, NULL, outs);
    if (st) fail_msg("%s: %s", dir, teexec_status_message(st));
    int checked = 0;
    for (size_t j = 0; j < n_out; j++) {
        const char *name = teexec_model_output(m, j)->name;
        snprintf(path, sizeof(path), "%s/%s/%s.npy", dir, exp_sub, name);
        if (!exists(path)) continue;
        teexec_tensor *want = NULL, *got = NULL, *w64 = NULL;
        assert_null(teexec_tensor_load_file(path, &want));
        assert_int_equal(teexec_tensor_rank(outs[j]), teexec_tensor_rank(want));
        assert_memory_equal(teexec_tensor_dims(outs[j]), teexec_tensor_dims(want),
                            (size_t)teexec_tensor_rank(want) * sizeof(int64_t));
        assert_null(teexec_tensor_cast(outs[j], TEEXEC_DTYPE_DOUBLE, &got));
        assert_null(teexec_tensor_cast(want, TEEXEC_DTYPE_DOUBLE, &w64));
        const double *a = teexec_tensor_data_const(got), *b = teexec_tensor_data_const(w64);
        double num = 0, den = 0;
        for (uint64_t k = 0; k < teexec_tensor_element_count(got); k++) {
            num += (a[k] - b[k]) * (a[k] - b[k]);
            den += b[k] * b[k];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        printf("# %s %s output %s: rel-L2 %.3g\n", dir, in_sub, name, rel);
        if (!(rel < 1e-5)) fail_msg("%s %s output %s: rel-L2 %g >= 1e-5", dir, in_sub, name, rel);
        checked++;
        teexec_tensor_destroy(want);
        teexec_tensor_destroy(got);
        teexec_tensor_destroy(w64);
    }
    for (size_t i = 0; i < n_in; i++) teexec_tensor_destroy(ins[i]);
    for (size_t j = 0; j < n_out; j++) teexec_tensor_destroy(outs[j]);
    free(ins);
    free(names);
    free(outs);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
    return checked;
}

static int check_model(const char *dir)
{
    return check_call(dir, "inputs", "expected");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void golden_models_match_pytorch(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char models[4096];
    snprintf(models, sizeof(models), "%s/models", root ? root : ".");
    DIR *d = opendir(models);
    if (!d) {
        printf("# skipped: no models/ folder at %s\n", models);
        skip();
    }
    char *names[256];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 256) {
        if (de->d_name[0] == '.') continue;
        /* te_* folders are TE-domain models with their own test (tests/te_models). */
        if (strncmp(de->d_name, "te_", 3) == 0) continue;
        char p[8192];
        snprintf(p, sizeof(p), "%s/%s/model.onnx", models, de->d_name);
        char q[8192], r[8192];
        snprintf(q, sizeof(q), "%s/%s/inputs", models, de->d_name);
        snprintf(r, sizeof(r), "%s/%s/expected", models, de->d_name);
        if (exists(p) && exists(q) && exists(r)) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n == 0) {
        printf("# skipped: no models/<name>/{model.onnx,inputs,expected} yet\n");
        skip();
    }
    qsort(names, n, sizeof(*names), cmp_str);
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        char dir[4400];
        snprintf(dir, sizeof(dir), "%s/%s", models, names[i]);
        total += check_model(dir);
        free(names[i]);
    }
    assert_true(total > 0);
}

/* How many times `needle` occurs in `text`. */
static size_t count_of(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void kv_exports_lower_attention_and_match(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    static const struct {
        const char *name;
        size_t layers, residuals; /* GPT-2 also adds its position embedding */
    } kv[] = {{"gpt2_kv", 2, 5}, {"llama_gqa_kv", 2, 4}};
    int found = 0;
    for (size_t i = 0; i < sizeof kv / sizeof *kv; i++) {
        char dir[4400], path[4600];
        snprintf(dir, sizeof dir, "%s/models/kv/%s", root ? root : ".", kv[i].name);
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        if (!exists(path)) continue;
        found++;
        teexec_model *m = NULL;
        teexec_status *st = teexec_model_load_file(path, NULL, &m);
        if (st) fail_msg("%s: %s", path, teexec_status_message(st));
        char *text = NULL;
        st = teexec_model_plan(m, NULL, TEEXEC_PLAN_EXPLAIN, &text);
        if (st) fail_msg("%s: %s", path, teexec_status_message(st));
        size_t lowered = count_of(text, "lowered  DotProductAttention");
        if (lowered != kv[i].layers)
            fail_msg("%s: %zu attentions lowered, want %zu:\n%s", kv[i].name, lowered,
                     kv[i].layers, text);
        /* and the residual Adds, whose operands' shapes are the same
         * declared names ([batch, seq, hidden]) */
        size_t residuals = count_of(text, "lowered  AddExtraInput");
        if (residuals != kv[i].residuals)
            fail_msg("%s: %zu residual Adds lowered, want %zu", kv[i].name, residuals,
                     kv[i].residuals);
        teexec_string_free(text);
        teexec_model_destroy(m);
        int checked = check_call(dir, "inputs", "expected");
        snprintf(path, sizeof path, "%s/inputs_step", dir);
        if (exists(path)) checked += check_call(dir, "inputs_step", "expected_step");
        /* logits and every layer's present key and value, twice */
        assert_true(checked >= 2 * (int)(1 + 2 * kv[i].layers));
    }
    if (!found) {
        printf("# skipped: no models/kv/<name>/model.onnx\n");
        skip();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_models_match_pytorch),
        cmocka_unit_test(kv_exports_lower_attention_and_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
