/*
 * run_node_tests.c - the ONNX conformance runner: runs libonnx-testdata's
 * node tests through the CPU backend, or the CUDA backend with --device
 * cuda (public API only), and compares every output with ONNX's tolerances
 * (rtol 1e-3, atol 1e-7 for floats: |a - b| <= atol + rtol * |b|, NaN
 * matches NaN; exact for integers/bool).
 *
 *   run_node_tests [--device cpu|cuda] [--claimed FILE] [--root DIR]
 *                  [--list-passing] [--verbose] [TEST_NAME...]
 *
 * The device is the CPU unless --device (or $TEEXEC_CONFORMANCE_DEVICE)
 * says cuda; the claimed list is the same for both. With cuda and no
 * usable GPU (or a build without CUDA) the runner exits 77 (skip).
 *
 * The corpora are $TEEXEC_TESTDATA/node, whose tests are named bare
 * ("test_relu"), and the small-model categories pytorch-operator,
 * pytorch-converted and simple, named "category/test_x" (default
 * $TEEXEC_TESTDATA = /usr/share/libonnx-testdata/data; a folder without
 * node/ is taken as one corpus of bare names, as is --root DIR). The claimed
 * list (default $TEEXEC_SOURCE_ROOT/tests/conformance/claimed.txt) holds one
 * test name per line, '#' starts a comment. Every test of every corpus is
 * tried; the totals of each corpus are printed, then the last line is
 * exactly "N passed, M failed" over the claimed tests. The exit status is
 * non-zero when any claimed test does not pass (or is missing from the
 * corpus).
 */
#include "teexec/teexec.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { R_PASS, R_FAIL, R_UNSUPPORTED };

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool is_float_type(teexec_dtype d)
{
    return d == TEEXEC_DTYPE_FLOAT || d == TEEXEC_DTYPE_DOUBLE || d == TEEXEC_DTYPE_FLOAT16 ||
           d == TEEXEC_DTYPE_BFLOAT16 ||
           (d >= TEEXEC_DTYPE_FLOAT8E4M3FN && d <= TEEXEC_DTYPE_FLOAT8E5M2FNUZ) ||
           d == TEEXEC_DTYPE_FLOAT4E2M1 || d == TEEXEC_DTYPE_FLOAT8E8M0;
}

/* Compares got against want; on mismatch writes a reason. */
static bool compare(const teexec_tensor *got, const teexec_tensor *want, char *why, size_t wsz)
{
    teexec_dtype gd = teexec_tensor_dtype(got), wd = teexec_tensor_dtype(want);
    if (gd != wd) {
        snprintf(why, wsz, "dtype %s, expected %s", teexec_dtype_name(gd), teexec_dtype_name(wd));
        return false;
    }
    int32_t r = teexec_tensor_rank(got);
    bool same_shape = r == teexec_tensor_rank(want);
    for (int32_t d = 0; same_shape && d < r; d++)
        same_shape = teexec_tensor_dims(got)[d] == teexec_tensor_dims(want)[d];
    if (!same_shape) {
        char a[128] = "", b[128] = "";
        size_t la = 0, lb = 0;
        for (int32_t d = 0; d < r && la < sizeof(a); d++)
            la += (size_t)snprintf(a + la, sizeof(a) - la, "%s%lld", d ? "," : "",
                                   (long long)teexec_tensor_dims(got)[d]);
        for (int32_t d = 0; d < teexec_tensor_rank(want) && lb < sizeof(b); d++)
            lb += (size_t)snprintf(b + lb, sizeof(b) - lb, "%s%lld", d ? "," : "",
                                   (long long)teexec_tensor_dims(want)[d]);
        snprintf(why, wsz, "shape [%s], expected [%s]", a, b);
        return false;
    }
    uint64_t n = teexec_tensor_element_count(got);
    if (!is_float_type(gd)) {
        if (teexec_tensor_byte_size(got) != teexec_tensor_byte_size(want) ||
            memcmp(teexec_tensor_data_const(got), teexec_tensor_data_const(want),
                   teexec_tensor_byte_size(got)) != 0) {
            snprintf(why, wsz, "%s values differ", teexec_dtype_name(gd));
            return false;
        }
        return true;
    }
    teexec_tensor *g = NULL, *w = NULL;
    teexec_status *st = teexec_tensor_cast(got, TEEXEC_DTYPE_DOUBLE, &g);
    if (!st) st = teexec_tensor_cast(want, TEEXEC_DTYPE_DOUBLE, &w);
    if (st) {
        snprintf(why, wsz, "cannot compare: %s", teexec_status_message(st));
        teexec_status_destroy(st);
        teexec_tensor_destroy(g);
        return false;
    }
    const double *a = teexec_tensor_data_const(g), *b = teexec_tensor_data_const(w);
    bool ok = true;
    for (uint64_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i])) continue;
        if (a[i] == b[i]) continue; /* infinities */
        if (!(fabs(a[i] - b[i]) <= 1e-7 + 1e-3 * fabs(b[i]))) {
            snprintf(why, wsz, "element %llu is %.9g, expected %.9g", (unsigned long long)i, a[i],
                     b[i]);
            ok = false;
            break;
        }
    }
    teexec_tensor_destroy(g);
    teexec_tensor_destroy(w);
    return ok;
}

/* ONNX 1.12 wrote its bfloat16 test data as UINT16 tensors holding the
 * bit patterns (NumPy has no bfloat16); relabel them when the model
 * declares bfloat16 for that input or output. */
static teexec_status *relabel_bf16(teexec_dtype declared, teexec_tensor **t)
{
    if (declared != TEEXEC_DTYPE_BFLOAT16 || teexec_tensor_dtype(*t) != TEEXEC_DTYPE_UINT16)
        return NULL;
    teexec_tensor *r = NULL;
    teexec_status *st = teexec_tensor_create_copy(
        TEEXEC_DTYPE_BFLOAT16, teexec_tensor_rank(*t), teexec_tensor_dims(*t),
        teexec_tensor_data_const(*t), teexec_tensor_byte_size(*t), &r);
    if (st) return st;
    teexec_tensor_destroy(*t);
    *t = r;
    return NULL;
}

static teexec_device run_device = TEEXEC_DEVICE_CPU;

static teexec_status *make_session(const teexec_model *m, teexec_device dev, teexec_session **s)
{
    teexec_session_options *o = NULL;
    teexec_status *st = teexec_session_options_create(&o);
    if (!st) st = teexec_session_options_set_device(o, dev);
    if (!st) st = teexec_session_create(m, o, s);
    teexec_session_options_destroy(o);
    return st;
}

/* Whether this process has a usable GPU: a session on `probe` (a model the
 * CPU runs) with device AUTO lands on "cuda" exactly then. */
static bool gpu_usable(const char *probe)
{
    teexec_model *m = NULL;
    teexec_session *s = NULL;
    teexec_status *st = teexec_model_load_file(probe, NULL, &m);
    if (!st) st = make_session(m, TEEXEC_DEVICE_AUTO, &s);
    bool ok = !st && !strcmp(teexec_session_device_name(s), "cuda");
    teexec_status_destroy(st);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
    return ok;
}

static int run_test(const char *dir, char *why, size_t wsz)
{
    char path[8192];
    why[0] = 0;
    snprintf(path, sizeof(path), "%s/model.onnx", dir);
    teexec_model *m = NULL;
    teexec_session *s = NULL;
    size_t n_in = 0, n_out = 0;
    teexec_tensor **ins = NULL, **outs = NULL, **want = NULL;
    const char **names = NULL;
    int result = R_FAIL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) goto done;
    n_in = teexec_model_input_count(m);
    n_out = teexec_model_output_count(m);
    for (size_t i = 0; i < n_in; i++)
        if (teexec_model_input(m, i)->kind != TEEXEC_VALUE_TENSOR) {
            snprintf(why, wsz, "input %s is not a tensor", teexec_model_input(m, i)->name);
            result = R_UNSUPPORTED;
            goto done;
        }
    for (size_t j = 0; j < n_out; j++)
        if (teexec_model_output(m, j)->kind != TEEXEC_VALUE_TENSOR) {
            snprintf(why, wsz, "output %s is not a tensor", teexec_model_output(m, j)->name);
            result = R_UNSUPPORTED;
            goto done;
        }
    st = make_session(m, run_device, &s);
    if (st) goto done;
    ins = calloc(n_in + 1, sizeof(*ins));
    names = calloc(n_in + 1, sizeof(*names));
    outs = calloc(n_out + 1, sizeof(*outs));
    want = calloc(n_out + 1, sizeof(*want));
    if (!ins || !names || !outs || !want) {
        snprintf(why, wsz, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_in; i++) {
        names[i] = teexec_model_input(m, i)->name;
        snprintf(path, sizeof(path), "%s/test_data_set_0/input_%zu.pb", dir, i);
        st = teexec_tensor_load_file(path, &ins[i]);
        if (!st) st = relabel_bf16(teexec_model_input(m, i)->dtype, &ins[i]);
        if (st) goto done;
    }
    for (size_t j = 0; j < n_out; j++) {
        snprintf(path, sizeof(path), "%s/test_data_set_0/output_%zu.pb", dir, j);
        st = teexec_tensor_load_file(path, &want[j]);
        if (!st) st = relabel_bf16(teexec_model_output(m, j)->dtype, &want[j]);
        if (st) goto done;
    }
    st = teexec_session_run(s, n_in, names, (const teexec_tensor *const *)ins, n_out, NULL, outs);
    if (st) goto done;
    result = R_PASS;
    for (size_t j = 0; j < n_out && result == R_PASS; j++) {
        char w[400];
        if (!compare(outs[j], want[j], w, sizeof(w))) {
            snprintf(why, wsz, "output %s: %s", teexec_model_output(m, j)->name, w);
            result = R_FAIL;
        }
    }
done:
    if (st) {
        result = teexec_status_code(st) == TEEXEC_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL;
        snprintf(why, wsz, "%s: %s", teexec_code_name(teexec_status_code(st)),
                 teexec_status_message(st));
        teexec_status_destroy(st);
    }
    for (size_t i = 0; ins && i < n_in; i++) teexec_tensor_destroy(ins[i]);
    for (size_t j = 0; outs && j < n_out; j++) teexec_tensor_destroy(outs[j]);
    for (size_t j = 0; want && j < n_out; j++) teexec_tensor_destroy(want[j]);
    free(ins);
    free(names);
    free(outs);
    free(want);
    teexec_session_destroy(s);
    teexec_model_destroy(m);
    return result;
}

typedef struct claimed {
    char **names;
    size_t n;
    bool *seen;
} claimed;

static int load_claimed(const char *path, claimed *c)
{
    memset(c, 0, sizeof(*c));
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "run_node_tests: cannot open claimed list %s\n", path);
        return -1;
    }
    char line[1024];
    size_t cap = 0;
    while (fgets(line, sizeof(line), f)) {
        char *h = strchr(line, '#');
        if (h) *h = 0;
        char *b = line;
        while (*b == ' ' || *b == '\t') b++;
        char *e = b + strlen(b);
        while (e > b && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) *--e = 0;
        if (!*b) continue;
        if (c->n == cap) {
            cap = cap ? cap * 2 : 256;
            char **nn = realloc(c->names, cap * sizeof(*nn));
            if (!nn) {
                fclose(f);
                return -1;
            }
            c->names = nn;
        }
        c->names[c->n] = strdup(b);
        if (!c->names[c->n]) {
            fclose(f);
            return -1;
        }
        c->n++;
    }
    fclose(f);
    c->seen = calloc(c->n + 1, sizeof(bool));
    return c->seen ? 0 : -1;
}

static long find_claimed(const claimed *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->names[i], name) == 0) return (long)i;
    return -1;
}

int main(int argc, char **argv)
{
    const char *claimed_path = NULL, *root = NULL;
    bool list_passing = false, verbose = false;
    char **only = NULL;
    size_t n_only = 0;
    only = calloc((size_t)argc, sizeof(*only));
    const char *device = getenv("TEEXEC_CONFORMANCE_DEVICE");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = argv[++i];
        else if (strcmp(argv[i], "--claimed") == 0 && i + 1 < argc) claimed_path = argv[++i];
        else if (strcmp(argv[i], "--root") == 0 && i + 1 < argc) root = argv[++i];
        else if (strcmp(argv[i], "--list-passing") == 0) list_passing = true;
        else if (strcmp(argv[i], "--verbose") == 0) verbose = true;
        else if (argv[i][0] != '-') only[n_only++] = argv[i];
        else {
            fprintf(stderr, "usage: run_node_tests [--device cpu|cuda] [--claimed FILE] "
                            "[--root DIR] [--list-passing] [--verbose] [TEST...]\n");
            return 2;
        }
    }
    if (device && *device) {
        if (!strcmp(device, "cuda")) run_device = TEEXEC_DEVICE_CUDA;
        else if (strcmp(device, "cpu") != 0) {
            fprintf(stderr, "run_node_tests: --device must be cpu or cuda, not %s\n", device);
            return 2;
        }
    }
    char claimbuf[4096];
    /* the corpora: node/ (tests named bare) and the small model categories
     * (named "category/test_x"), or just --root */
    static const char *const cats[] = {"node", "pytorch-operator", "pytorch-converted", "simple"};
    char dirs[4][4096];
    const char *prefixes[4];
    size_t n_corp = 0;
    if (root) {
        snprintf(dirs[0], sizeof(dirs[0]), "%s", root);
        prefixes[0] = "";
        n_corp = 1;
    } else {
        const char *env = getenv("TEEXEC_TESTDATA");
        if (!env || !*env) env = "/usr/share/libonnx-testdata/data";
        snprintf(dirs[0], sizeof(dirs[0]), "%s/node", env);
        if (!is_dir(dirs[0])) {
            snprintf(dirs[0], sizeof(dirs[0]), "%s", env);
            prefixes[0] = "";
            n_corp = 1;
        } else {
            for (size_t k = 0; k < 4; k++) {
                snprintf(dirs[n_corp], sizeof(dirs[0]), "%s/%s", env, cats[k]);
                if (!is_dir(dirs[n_corp])) continue;
                prefixes[n_corp++] = k == 0 ? "" : cats[k];
            }
        }
    }
    if (!claimed_path) {
        const char *src = getenv("TEEXEC_SOURCE_ROOT");
        snprintf(claimbuf, sizeof(claimbuf), "%s/tests/conformance/claimed.txt", src ? src : ".");
        claimed_path = claimbuf;
    }
    if (!is_dir(dirs[0])) {
        /* no corpus: nothing claimed can be checked; say so and skip (77) */
        printf("run_node_tests: no test corpus at %s (install libonnx-testdata)\n", dirs[0]);
        free(only);
        return 77;
    }
    if (run_device == TEEXEC_DEVICE_CUDA) {
        char probe[4200];
        snprintf(probe, sizeof(probe), "%s/test_abs/model.onnx", dirs[0]);
        if (!is_file(probe) || !gpu_usable(probe)) {
            printf("run_node_tests: no usable CUDA device (or no CUDA in this build): skipped\n");
            free(only);
            return 77;
        }
        printf("run_node_tests: device cuda\n");
    }
    claimed c;
    if (load_claimed(claimed_path, &c) != 0) return 1;

    size_t cl_pass = 0, cl_fail = 0;
    char totals[4][512];
    for (size_t k = 0; k < n_corp; k++) {
        DIR *d = opendir(dirs[k]);
        if (!d) return 1;
        char **tests = NULL;
        size_t nt = 0, cap = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (strncmp(de->d_name, "test_", 5) != 0) continue;
            if (nt == cap) {
                cap = cap ? cap * 2 : 1024;
                char **nn = realloc(tests, cap * sizeof(*nn));
                if (!nn) return 1;
                tests = nn;
            }
            /* the test's identifier: "test_x" in node/, "category/test_x" elsewhere */
            size_t len = strlen(prefixes[k]) + strlen(de->d_name) + 2;
            tests[nt] = malloc(len);
            if (!tests[nt]) return 1;
            snprintf(tests[nt], len, "%s%s%s", prefixes[k], prefixes[k][0] ? "/" : "",
                     de->d_name);
            nt++;
        }
        closedir(d);
        qsort(tests, nt, sizeof(*tests), cmp_str);
        size_t tot[3] = {0, 0, 0};
        for (size_t t = 0; t < nt; t++) {
            if (n_only) {
                bool want = false;
                for (size_t q = 0; q < n_only; q++) want = want || strcmp(only[q], tests[t]) == 0;
                if (!want) continue;
            }
            const char *base = strrchr(tests[t], '/');
            base = base ? base + 1 : tests[t];
            char dir[4400], why[8192];
            snprintf(dir, sizeof(dir), "%s/%s", dirs[k], base);
            snprintf(why, sizeof(why), "%s/model.onnx", dir);
            if (!is_file(why)) continue;
            int r = run_test(dir, why, sizeof(why));
            tot[r]++;
            long ci = find_claimed(&c, tests[t]);
            if (ci >= 0) {
                c.seen[ci] = true;
                if (r == R_PASS) {
                    cl_pass++;
                } else {
                    cl_fail++;
                    printf("FAIL %s: %s\n", tests[t], why);
                }
            } else if (verbose && r != R_PASS) {
                printf("%s %s: %s\n", r == R_FAIL ? "fail" : "unsupported", tests[t], why);
            }
            if (list_passing && r == R_PASS) printf("pass %s\n", tests[t]);
            fflush(stdout);
        }
        snprintf(totals[k], sizeof(totals[k]),
                 "corpus %s: %zu tests, %zu passed, %zu failed, %zu unsupported", dirs[k],
                 tot[0] + tot[1] + tot[2], tot[R_PASS], tot[R_FAIL], tot[R_UNSUPPORTED]);
        for (size_t t = 0; t < nt; t++) free(tests[t]);
        free(tests);
    }
    for (size_t i = 0; i < c.n && !n_only; i++) {
        if (!c.seen[i]) {
            cl_fail++;
            printf("FAIL %s: claimed but not in the corpus\n", c.names[i]);
        }
    }
    for (size_t k = 0; k < n_corp; k++) printf("%s\n", totals[k]);
    printf("%zu passed, %zu failed\n", cl_pass, cl_fail);
    for (size_t i = 0; i < c.n; i++) free(c.names[i]);
    free(c.names);
    free(c.seen);
    free(only);
    return cl_fail ? 1 : 0;
}
