/*
 * cmd_run.c - `teexec run MODEL.onnx [options]` (also the bare
 * `teexec MODEL.onnx`): inference through the public session API.
 *
 * Inputs come from .npy/.pb files or are filled with seeded random data of
 * the declared dtype and shape (the tool says which on stderr). Outputs are
 * summarized (dtype, shape, first values, min/max/mean), written one file
 * per output, or reported as JSON; --iters times the runs.
 */
#include "cli_common.h"
#include "commands.h"
#include "exec_options.h"
#include "json_out.h"
#include "random_fill.h"
#include "teexec/teexec.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CMD "run"
#define MAX_PAIRS 256

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: teexec run MODEL.onnx [options]\n"
            "       teexec MODEL.onnx [options]\n"
            "\n"
            "Runs inference once (or --iters times) and summarizes or writes the outputs.\n"
            "Inputs not given with --input are filled with seeded random data of the\n"
            "declared dtype and shape (floats in [-1,1), integers in [0,10), bools 0/1).\n"
            "\n"
            "options:\n"
            "%s"
            "  --input NAME=FILE        an input from a .npy or .pb (TensorProto) file;\n"
            "                           repeatable\n"
            "  --dim NAME=VALUE         value of a symbolic input dim (default 1); repeatable\n"
            "  --seed N                 seed for filled inputs (default 0)\n"
            "  --output-dir DIR         write one NAME.npy (or .pb) per output into DIR\n"
            "  --output-format npy|pb   file format for --output-dir (default npy)\n"
            "  --iters N                time N runs after one warm-up run (min/median/max)\n"
            "  --threads N              threads for the GEMM kernels (default: library's)\n"
            "  --json                   print one JSON object instead of text\n"
            "  -h, --help               show this help\n",
            exec_options_help);
}

typedef struct pair {
    const char *name;
    const char *value;
} pair;

typedef struct run_args {
    const char *model;
    exec_options ex;
    pair inputs[MAX_PAIRS];
    size_t n_inputs;
    pair dims[MAX_PAIRS];
    size_t n_dims;
    uint64_t seed;
    const char *output_dir;
    const char *output_format;
    long iters;
    bool iters_given;
    int threads;
    bool json;
    /* symbolic dims learned from the given input files ("N=4" strings) */
    char learned[MAX_PAIRS][160];
} run_args;

/* Splits "NAME=VALUE" at the first '=': file paths contain '=' more often
 * than ONNX value names do. */
static bool split_pair(char *s, pair *p)
{
    char *eq = strchr(s, '=');
    if (!eq || eq == s || !eq[1]) return false;
    *eq = 0;
    p->name = s;
    p->value = eq + 1;
    return true;
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* Returns -1 to continue, else an exit status. */
static int parse_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof(*a));
    a->iters = 1;
    a->output_format = "npy";
    exec_options_init(&a->ex);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        if (cli_model_command_arg(CMD, arg, run_usage, &a->model, &a->json, &rc)) {
            if (rc >= 0) return rc;
            continue;
        }
        int ex = exec_options_parse(&a->ex, CMD, argc, argv, &i);
        if (ex < 0) return -ex;
        if (ex > 0) continue;
        /* every other option takes a value, as "--opt VALUE" or "--opt=VALUE" */
        static const char *const valued[] = {"--input", "--dim", "--seed", "--output-dir",
                                             "--output-format", "--iters", "--threads"};
        size_t namelen = strcspn(arg, "=");
        bool known = false;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
            known = known || (strlen(valued[k]) == namelen && strncmp(valued[k], arg, namelen) == 0);
        if (!known) return cli_usage_error(CMD, "unknown option '%s'", arg);
        char optname[64];
        const char *val = NULL;
        const char *eq = strchr(arg, '=');
        if (eq && (size_t)(eq - arg) < sizeof(optname)) {
            memcpy(optname, arg, (size_t)(eq - arg));
            optname[eq - arg] = 0;
            val = eq + 1;
        } else {
            snprintf(optname, sizeof(optname), "%s", arg);
            if (i + 1 >= argc) return cli_usage_error(CMD, "%s needs a value", arg);
            val = argv[++i];
        }
        long v;
        if (strcmp(optname, "--input") == 0 || strcmp(optname, "--dim") == 0) {
            bool is_in = optname[2] == 'i';
            size_t *n = is_in ? &a->n_inputs : &a->n_dims;
            pair *arr = is_in ? a->inputs : a->dims;
            if (*n >= MAX_PAIRS) return cli_usage_error(CMD, "too many %s options", optname);
            if (!split_pair((char *)val, &arr[*n]))
                return cli_usage_error(CMD, "%s expects NAME=%s, got '%s'", optname,
                                       is_in ? "FILE" : "VALUE", val);
            if (!is_in && !parse_long(arr[*n].value, 0, INT32_MAX, &v))
                return cli_usage_error(CMD, "--dim %s: '%s' is not a non-negative integer",
                                       arr[*n].name, arr[*n].value);
            (*n)++;
        } else if (strcmp(optname, "--seed") == 0) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (errno || end == val || *end || val[0] == '-')
                return cli_usage_error(CMD, "--seed must be a non-negative integer, not '%s'", val);
            a->seed = s;
        } else if (strcmp(optname, "--output-dir") == 0) {
            a->output_dir = val;
        } else if (strcmp(optname, "--output-format") == 0) {
            if (strcmp(val, "npy") != 0 && strcmp(val, "pb") != 0)
                return cli_usage_error(CMD, "--output-format must be npy or pb, not '%s'", val);
            a->output_format = val;
        } else if (strcmp(optname, "--iters") == 0) {
            if (!parse_long(val, 1, 1000000, &v))
                return cli_usage_error(CMD, "--iters must be 1..1000000, not '%s'", val);
            a->iters = v;
            a->iters_given = true;
        } else if (strcmp(optname, "--threads") == 0) {
            if (!parse_long(val, 1, 4096, &v))
                return cli_usage_error(CMD, "--threads must be 1..4096, not '%s'", val);
            a->threads = (int)v;
        } else {
            return cli_usage_error(CMD, "unknown option '%s'", arg);
        }
    }
    if (!a->model) return cli_usage_error(CMD, "no model given");
    for (size_t i = 0; i < a->n_inputs; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(a->inputs[i].name, a->inputs[j].name) == 0)
                return cli_usage_error(CMD, "input '%s' is given twice", a->inputs[i].name);
    return -1;
}

/* ---- random inputs ------------------------------------------------------ */

static const char *dim_value_name(const run_args *a, const char *param, int64_t *out)
{
    *out = 1;
    if (!param) return NULL;
    for (size_t i = 0; i < a->n_dims; i++)
        if (strcmp(a->dims[i].name, param) == 0) {
            *out = strtoll(a->dims[i].value, NULL, 10);
            return param;
        }
    return NULL;
}

static void shape_str(int32_t rank, const int64_t *dims, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int32_t d = 0; d < rank && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, d ? "," : "", dims[d]);
    if (len < size) snprintf(buf + len, size - len, "]");
}

/* A tensor of the input's declared dtype and shape with seeded random
 * values: each input gets its own stream (seed and input index). */
static teexec_status *fill_random(const run_args *a, const teexec_value_info *info, size_t index,
                                  teexec_tensor **out)
{
    *out = NULL;
    int64_t dims[64];
    if (info->rank < 0 || info->rank > 64)
        return teexec_tensor_create(TEEXEC_DTYPE_UNDEFINED, -1, NULL, out); /* an error */
    for (int32_t d = 0; d < info->rank; d++) {
        if (info->dims[d] >= 0) dims[d] = info->dims[d];
        else dim_value_name(a, info->dim_params[d], &dims[d]);
    }
    return random_fill(info->dtype, info->rank, dims, a->seed, index, out);
}

/* ---- output summaries --------------------------------------------------- */

typedef struct stats {
    double min, max, mean;
    double first[6];
    size_t n_first;
    uint64_t nan_count;
} stats;

static teexec_status *compute_stats(const teexec_tensor *t, stats *s)
{
    memset(s, 0, sizeof(*s));
    teexec_tensor *d;
    teexec_status *st = teexec_tensor_cast(t, TEEXEC_DTYPE_DOUBLE, &d);
    if (st) return st;
    const double *v = teexec_tensor_data_const(d);
    uint64_t n = teexec_tensor_element_count(d);
    double sum = 0;
    uint64_t cnt = 0;
    s->min = INFINITY;
    s->max = -INFINITY;
    for (uint64_t i = 0; i < n; i++) {
        if (i < 6) s->first[s->n_first++] = v[i];
        if (isnan(v[i])) {
            s->nan_count++;
            continue;
        }
        if (v[i] < s->min) s->min = v[i];
        if (v[i] > s->max) s->max = v[i];
        sum += v[i];
        cnt++;
    }
    s->mean = cnt ? sum / (double)cnt : NAN;
    if (!cnt) s->min = s->max = NAN;
    teexec_tensor_destroy(d);
    return NULL;
}

/* A file name from an output name: anything but [A-Za-z0-9._-] becomes
 * '_', and a leading '.' too, so names like "../x" or "a/b:0" stay inside
 * the output folder. */
static void sanitize(const char *name, char *buf, size_t size)
{
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || (c == '.' && i > 0);
        buf[i] = ok ? c : '_';
    }
    buf[i] = 0;
    if (i == 0) snprintf(buf, size, "output");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* ---- the command -------------------------------------------------------- */

typedef struct run_state {
    teexec_model *model;
    teexec_session *session;
    size_t n_in, n_out;
    teexec_tensor **inputs;
    const char **in_names;
    bool *filled;
    teexec_tensor **outputs;
    char **files;
    double *times;
} run_state;

static void state_free(run_state *r)
{
    for (size_t i = 0; r->inputs && i < r->n_in; i++) teexec_tensor_destroy(r->inputs[i]);
    for (size_t i = 0; r->outputs && i < r->n_out; i++) teexec_tensor_destroy(r->outputs[i]);
    for (size_t i = 0; r->files && i < r->n_out; i++) free(r->files[i]);
    free(r->inputs);
    free(r->in_names);
    free(r->filled);
    free(r->outputs);
    free(r->files);
    free(r->times);
    teexec_session_destroy(r->session);
    teexec_model_destroy(r->model);
}

static bool have_dim(const run_args *a, const char *name)
{
    for (size_t i = 0; i < a->n_dims; i++)
        if (strcmp(a->dims[i].name, name) == 0) return true;
    return false;
}

/* A symbolic dim not given with --dim takes its value from an input file
 * that has it, so filled inputs agree with the given ones. */
static void learn_dims(run_args *a, const teexec_value_info *info, const teexec_tensor *t)
{
    if (info->rank < 0 || teexec_tensor_rank(t) != info->rank) return;
    for (int32_t d = 0; d < info->rank; d++) {
        const char *p = info->dim_params ? info->dim_params[d] : NULL;
        if (info->dims[d] >= 0 || !p || have_dim(a, p) || a->n_dims >= MAX_PAIRS) continue;
        char *buf = a->learned[a->n_dims];
        int len = snprintf(buf, sizeof(a->learned[0]), "%s=%" PRId64, p, teexec_tensor_dims(t)[d]);
        if (len < 0 || (size_t)len >= sizeof(a->learned[0])) continue;
        char *eq = strrchr(buf, '=');
        *eq = 0;
        a->dims[a->n_dims].name = buf;
        a->dims[a->n_dims].value = eq + 1;
        a->n_dims++;
    }
}

static int prepare_inputs(run_args *a, run_state *r)
{
    for (size_t k = 0; k < a->n_inputs; k++) {
        size_t i = 0;
        while (i < r->n_in && strcmp(teexec_model_input(r->model, i)->name, a->inputs[k].name) != 0)
            i++;
        if (i == r->n_in)
            return cli_usage_error(CMD, "--input %s: the model has no input of that name",
                                   a->inputs[k].name);
        const teexec_value_info *info = teexec_model_input(r->model, i);
        teexec_tensor *t;
        teexec_status *st = teexec_tensor_load_file(a->inputs[k].value, &t);
        if (st) return cli_report(st, a->inputs[k].value);
        if (info->dtype != TEEXEC_DTYPE_UNDEFINED && teexec_tensor_dtype(t) != info->dtype) {
            /* .npy has no bfloat16/FP8: such inputs arrive as float32 */
            teexec_tensor *c;
            st = teexec_tensor_cast(t, info->dtype, &c);
            if (st) {
                teexec_tensor_destroy(t);
                return cli_report(st, a->inputs[k].value);
            }
            fprintf(stderr, "teexec: run: input \"%s\": converted %s from %s to %s\n",
                    info->name, a->inputs[k].value, teexec_dtype_name(teexec_tensor_dtype(t)),
                    teexec_dtype_name(info->dtype));
            teexec_tensor_destroy(t);
            t = c;
        }
        r->inputs[i] = t;
        learn_dims(a, info, t);
    }
    for (size_t i = 0; i < r->n_in; i++) {
        if (r->inputs[i]) continue;
        const teexec_value_info *info = teexec_model_input(r->model, i);
        if (info->kind != TEEXEC_VALUE_TENSOR || info->rank < 0 ||
            info->dtype == TEEXEC_DTYPE_UNDEFINED || info->dtype == TEEXEC_DTYPE_STRING)
            return cli_fail(CLI_EXIT_USAGE, CMD,
                            "input \"%s\" has no declared %s to fill it from; give it with "
                            "--input %s=FILE",
                            info->name, info->rank < 0 ? "shape" : "numeric dtype", info->name);
        teexec_status *st = fill_random(a, info, i, &r->inputs[i]);
        if (st) return cli_report(st, a->model);
        r->filled[i] = true;
        char sh[256];
        shape_str(teexec_tensor_rank(r->inputs[i]), teexec_tensor_dims(r->inputs[i]), sh,
                  sizeof(sh));
        fprintf(stderr, "teexec: run: filled input \"%s\" (%s %s) with random data (seed %" PRIu64
                ")\n", info->name, teexec_dtype_name(info->dtype), sh, a->seed);
    }
    return -1;
}

static int write_outputs(const run_args *a, run_state *r)
{
    if (mkdir(a->output_dir, 0755) != 0 && errno != EEXIST)
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "cannot create %s: %s", a->output_dir,
                        strerror(errno));
    for (size_t j = 0; j < r->n_out; j++) {
        const char *name = teexec_model_output(r->model, j)->name;
        char base[256];
        sanitize(name, base, sizeof(base));
        /* two outputs that sanitize alike get distinct files */
        for (size_t k = 0; k < j; k++) {
            char other[256];
            sanitize(teexec_model_output(r->model, k)->name, other, sizeof(other));
            if (strcmp(other, base) == 0) {
                size_t len = strlen(base);
                snprintf(base + len, sizeof(base) - len, "_%zu", j);
                break;
            }
        }
        size_t sz = strlen(a->output_dir) + strlen(base) + 8;
        r->files[j] = malloc(sz);
        if (!r->files[j]) return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
        snprintf(r->files[j], sz, "%s/%s.%s", a->output_dir, base, a->output_format);
        teexec_status *st = teexec_tensor_save_file(r->outputs[j], r->files[j], name);
        if (st) return cli_report(st, r->files[j]);
    }
    return -1;
}

static void json_shape(json_out *j, const teexec_tensor *t)
{
    json_begin_array(j);
    for (int32_t d = 0; d < teexec_tensor_rank(t); d++) json_int(j, teexec_tensor_dims(t)[d]);
    json_end_array(j);
}

static int report(const run_args *a, run_state *r)
{
    double tmin = 0, tmed = 0, tmax = 0;
    if (a->iters > 0) {
        qsort(r->times, (size_t)a->iters, sizeof(double), cmp_double);
        tmin = r->times[0];
        tmax = r->times[a->iters - 1];
        tmed = a->iters % 2 ? r->times[a->iters / 2]
                            : (r->times[a->iters / 2 - 1] + r->times[a->iters / 2]) / 2;
    }
    if (a->json) {
        json_out j;
        json_init(&j, stdout);
        json_begin_object(&j);
        json_key(&j, "model");
        json_string(&j, a->model);
        json_key(&j, "device");
        json_string(&j, teexec_session_device_name(r->session));
        json_key(&j, "filled_inputs");
        json_begin_array(&j);
        for (size_t i = 0; i < r->n_in; i++) {
            if (!r->filled[i]) continue;
            json_begin_object(&j);
            json_key(&j, "name");
            json_string(&j, teexec_model_input(r->model, i)->name);
            json_key(&j, "dtype");
            json_string(&j, teexec_dtype_name(teexec_tensor_dtype(r->inputs[i])));
            json_key(&j, "shape");
            json_shape(&j, r->inputs[i]);
            json_key(&j, "seed");
            json_uint(&j, a->seed);
            json_end_object(&j);
        }
        json_end_array(&j);
        json_key(&j, "outputs");
        json_begin_array(&j);
        for (size_t o = 0; o < r->n_out; o++) {
            stats s;
            teexec_status *st = compute_stats(r->outputs[o], &s);
            json_begin_object(&j);
            json_key(&j, "name");
            json_string(&j, teexec_model_output(r->model, o)->name);
            json_key(&j, "dtype");
            json_string(&j, teexec_dtype_name(teexec_tensor_dtype(r->outputs[o])));
            json_key(&j, "shape");
            json_shape(&j, r->outputs[o]);
            if (!st) {
                json_key(&j, "min");
                json_double(&j, s.min);
                json_key(&j, "max");
                json_double(&j, s.max);
                json_key(&j, "mean");
                json_double(&j, s.mean);
                json_key(&j, "nan_count");
                json_uint(&j, s.nan_count);
                json_key(&j, "first");
                json_begin_array(&j);
                for (size_t k = 0; k < s.n_first; k++) json_double(&j, s.first[k]);
                json_end_array(&j);
            }
            teexec_status_destroy(st);
            if (r->files[o]) {
                json_key(&j, "file");
                json_string(&j, r->files[o]);
            }
            json_end_object(&j);
        }
        json_end_array(&j);
        json_key(&j, "timing");
        json_begin_object(&j);
        json_key(&j, "iters");
        json_int(&j, a->iters);
        json_key(&j, "min_ms");
        json_double(&j, tmin);
        json_key(&j, "median_ms");
        json_double(&j, tmed);
        json_key(&j, "max_ms");
        json_double(&j, tmax);
        json_end_object(&j);
        json_end_object(&j);
        json_finish(&j);
        return CLI_EXIT_OK;
    }
    for (size_t o = 0; o < r->n_out; o++) {
        const teexec_tensor *t = r->outputs[o];
        char sh[256];
        shape_str(teexec_tensor_rank(t), teexec_tensor_dims(t), sh, sizeof(sh));
        printf("%s: %s %s", teexec_model_output(r->model, o)->name,
               teexec_dtype_name(teexec_tensor_dtype(t)), sh);
        if (r->files[o]) printf(" -> %s", r->files[o]);
        printf("\n");
        stats s;
        teexec_status *st = compute_stats(t, &s);
        if (st) {
            printf("  (no summary: %s)\n", teexec_status_message(st));
            teexec_status_destroy(st);
            continue;
        }
        printf("  values:");
        for (size_t k = 0; k < s.n_first; k++) printf(" %.6g", s.first[k]);
        if (teexec_tensor_element_count(t) > s.n_first) printf(" ...");
        printf("\n  min %.6g  max %.6g  mean %.6g", s.min, s.max, s.mean);
        if (s.nan_count) printf("  nan %" PRIu64, s.nan_count);
        printf("\n");
    }
    if (a->iters_given)
        printf("timing: %ld iters, min %.3f ms, median %.3f ms, max %.3f ms\n", a->iters, tmin,
               tmed, tmax);
    return CLI_EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    run_state r;
    memset(&r, 0, sizeof(r));
    teexec_status *st = teexec_model_load_file(a.model, NULL, &r.model);
    if (st) return cli_report(st, a.model);
    r.n_in = teexec_model_input_count(r.model);
    r.n_out = teexec_model_output_count(r.model);
    r.inputs = calloc(r.n_in + 1, sizeof(*r.inputs));
    r.in_names = calloc(r.n_in + 1, sizeof(*r.in_names));
    r.filled = calloc(r.n_in + 1, sizeof(*r.filled));
    r.outputs = calloc(r.n_out + 1, sizeof(*r.outputs));
    r.files = calloc(r.n_out + 1, sizeof(*r.files));
    r.times = calloc((size_t)a.iters, sizeof(double));
    if (!r.inputs || !r.in_names || !r.filled || !r.outputs || !r.files || !r.times) {
        state_free(&r);
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
    }
    for (size_t i = 0; i < r.n_in; i++) r.in_names[i] = teexec_model_input(r.model, i)->name;

    teexec_session_options *opts = NULL;
    st = teexec_session_options_create(&opts);
    if (!st) st = exec_options_apply_session(&a.ex, opts);
    if (!st && a.threads) st = teexec_session_options_set_threads(opts, a.threads);
    for (size_t i = 0; !st && i < a.n_dims; i++)
        st = teexec_session_options_set_dim(opts, a.dims[i].name,
                                            strtoll(a.dims[i].value, NULL, 10));
    if (!st) st = teexec_session_create(r.model, opts, &r.session);
    teexec_session_options_destroy(opts);
    if (st) {
        state_free(&r);
        return cli_report(st, a.model);
    }
    rc = prepare_inputs(&a, &r);
    if (rc >= 0) {
        state_free(&r);
        return rc;
    }
    /* --profile on the CPU: every run profiles itself (run options
     * set_profile) and the last one's table is printed; a CUDA session
     * made with --profile keeps its own, summed over the runs */
    teexec_run_options *ro = NULL;
    bool run_profile = a.ex.profile && strcmp(teexec_session_device_name(r.session), "cpu") == 0;
    if (run_profile) {
        st = teexec_run_options_create(&ro);
        if (!st) st = teexec_run_options_set_profile(ro, 1);
        if (st) {
            teexec_run_options_destroy(ro);
            state_free(&r);
            return cli_report(st, a.model);
        }
    }
    long total = a.iters_given ? a.iters + 1 : 1;
    for (long it = 0; it < total; it++) {
        for (size_t o = 0; o < r.n_out; o++) {
            teexec_tensor_destroy(r.outputs[o]);
            r.outputs[o] = NULL;
        }
        double t0 = now_ms();
        st = teexec_session_run_with(r.session, ro, r.n_in, r.in_names,
                                     (const teexec_tensor *const *)r.inputs, r.n_out, NULL,
                                     r.outputs);
        double t1 = now_ms();
        if (st) {
            teexec_run_options_destroy(ro);
            state_free(&r);
            return cli_report(st, a.model);
        }
        long slot = a.iters_given ? it - 1 : it; /* the warm-up run is not timed */
        if (slot >= 0) r.times[slot] = t1 - t0;
    }
    teexec_run_options_destroy(ro);
    if (a.output_dir) {
        rc = write_outputs(&a, &r);
        if (rc >= 0) {
            state_free(&r);
            return rc;
        }
    }
    rc = report(&a, &r);
    if (rc == CLI_EXIT_OK && a.ex.profile) {
        char *text = NULL;
        st = run_profile ? teexec_session_run_profile(r.session, &text)
                         : teexec_session_profile(r.session, &text);
        rc = exec_options_print_profile(CMD, teexec_session_device_name(r.session), st, text);
    }
    state_free(&r);
    return rc;
}
