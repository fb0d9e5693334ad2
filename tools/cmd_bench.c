/*
 * cmd_bench.c - `teexec bench MODEL.onnx [options]`: times inference runs
 * (a session) or training steps (a trainer, --train) on seeded random
 * inputs through the public API only.
 *
 * Each timed call is measured with the wall clock around it; the library
 * synchronizes the device before a run or step returns, so the time covers
 * the whole call as a user of the API sees it (for inference: copying the
 * outputs back to the host included). Warm-up calls come first and are not
 * timed: they absorb planning of a new input signature, CUDA graph capture
 * and allocator growth.
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
#include <time.h>

#define CMD "bench"
#define MAX_DIMS 256
#define MAX_RANK 64

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: teexec bench MODEL.onnx [options]\n"
            "\n"
            "Times the model on seeded random inputs of its declared shapes: --warmup\n"
            "untimed calls, then --iters timed ones, each measured with the wall clock\n"
            "around the call (the library synchronizes the device before returning).\n"
            "Prints min, median, mean and max milliseconds per call.\n"
            "On the GPU, calls after the first reuse the inputs already on the device\n"
            "and fetch no outputs (as PyTorch timings of resident tensors do).\n"
            "With --train each call is one training step (forward, loss, backward,\n"
            "optimizer update) against a random target (mse) or random labels\n"
            "(cross-entropy over the output's last dim).\n"
            "\n"
            "options:\n"
            "%s"
            "  --train                  time training steps instead of inference runs\n"
            "  --loss mse|cross-entropy loss for --train (default mse)\n"
            "  --loss-output NAME       the output the loss reads (default: the first)\n"
            "  --optimizer adamw|sgd    optimizer for --train (default adamw)\n"
            "  --iters N                timed calls, 1..1000000 (default 10)\n"
            "  --warmup N               untimed calls before them, 0..1000000 (default 3)\n"
            "  --dim NAME=VALUE         value of a symbolic input dim (default 1); repeatable\n"
            "  --seed N                 seed of the random inputs and targets (default 0)\n"
            "  --threads N              threads for the CPU GEMM kernels (default: library's)\n"
            "  --json                   print one JSON object instead of text\n"
            "  -h, --help               show this help\n",
            exec_options_help);
}

typedef struct dim_value {
    const char *name;
    int64_t value;
} dim_value;

typedef struct bench_args {
    const char *model;
    exec_options ex;
    bool train;
    teexec_loss_kind loss;
    teexec_optimizer_kind optimizer;
    const char *loss_output;
    bool train_option_given; /* --loss, --loss-output or --optimizer */
    long iters, warmup;
    dim_value dims[MAX_DIMS];
    size_t n_dims;
    uint64_t seed;
    int threads;
    bool json;
} bench_args;

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, bench_args *a)
{
    memset(a, 0, sizeof(*a));
    exec_options_init(&a->ex);
    a->loss = TEEXEC_LOSS_MSE;
    a->optimizer = TEEXEC_OPTIMIZER_ADAMW;
    a->iters = 10;
    a->warmup = 3;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        if (cli_model_command_arg(CMD, arg, bench_usage, &a->model, &a->json, &rc)) {
            if (rc >= 0) return rc;
            continue;
        }
        if (strcmp(arg, "--train") == 0) {
            a->train = true;
            continue;
        }
        int ex = exec_options_parse(&a->ex, CMD, argc, argv, &i);
        if (ex < 0) return -ex;
        if (ex > 0) continue;
        static const char *const valued[] = {"--loss", "--loss-output", "--optimizer", "--iters",
                                             "--warmup", "--dim", "--seed", "--threads"};
        size_t namelen = strcspn(arg, "=");
        const char *name = NULL;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
            if (strlen(valued[k]) == namelen && strncmp(valued[k], arg, namelen) == 0)
                name = valued[k];
        if (!name) return cli_usage_error(CMD, "unknown option '%s'", arg);
        const char *v;
        if (arg[namelen] == '=') {
            v = arg + namelen + 1;
        } else {
            if (i + 1 >= argc) return cli_usage_error(CMD, "%s needs a value", name);
            v = argv[++i];
        }
        long l;
        if (strncmp(name, "--loss", 6) == 0 || strcmp(name, "--optimizer") == 0)
            a->train_option_given = true;
        if (strcmp(name, "--loss") == 0) {
            if (strcmp(v, "mse") == 0) a->loss = TEEXEC_LOSS_MSE;
            else if (strcmp(v, "cross-entropy") == 0) a->loss = TEEXEC_LOSS_CROSS_ENTROPY;
            else return cli_usage_error(CMD, "--loss must be mse or cross-entropy, not '%s'", v);
        } else if (strcmp(name, "--loss-output") == 0) {
            a->loss_output = v;
        } else if (strcmp(name, "--optimizer") == 0) {
            if (strcmp(v, "adamw") == 0) a->optimizer = TEEXEC_OPTIMIZER_ADAMW;
            else if (strcmp(v, "sgd") == 0) a->optimizer = TEEXEC_OPTIMIZER_SGD;
            else return cli_usage_error(CMD, "--optimizer must be adamw or sgd, not '%s'", v);
        } else if (strcmp(name, "--iters") == 0) {
            if (!parse_long(v, 1, 1000000, &l))
                return cli_usage_error(CMD, "--iters must be 1..1000000, not '%s'", v);
            a->iters = l;
        } else if (strcmp(name, "--warmup") == 0) {
            if (!parse_long(v, 0, 1000000, &l))
                return cli_usage_error(CMD, "--warmup must be 0..1000000, not '%s'", v);
            a->warmup = l;
        } else if (strcmp(name, "--threads") == 0) {
            if (!parse_long(v, 1, 4096, &l))
                return cli_usage_error(CMD, "--threads must be 1..4096, not '%s'", v);
            a->threads = (int)l;
        } else if (strcmp(name, "--seed") == 0) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-')
                return cli_usage_error(CMD, "--seed must be a non-negative integer, not '%s'", v);
            a->seed = s;
        } else { /* --dim NAME=VALUE, split at the last '=' */
            const char *eq = strrchr(v, '=');
            if (!eq || eq == v || !eq[1])
                return cli_usage_error(CMD, "--dim expects NAME=VALUE, got '%s'", v);
            if (a->n_dims >= MAX_DIMS) return cli_usage_error(CMD, "too many --dim options");
            if (!parse_long(eq + 1, 0, INT32_MAX, &l))
                return cli_usage_error(CMD, "--dim %.*s: '%s' is not a non-negative integer",
                                       (int)(eq - v), v, eq + 1);
            /* the name is cut out of argv in place: argv outlives the run */
            ((char *)eq)[0] = 0;
            a->dims[a->n_dims].name = v;
            a->dims[a->n_dims].value = l;
            a->n_dims++;
        }
    }
    if (!a->model) return cli_usage_error(CMD, "no model given");
    if (!a->train && a->train_option_given)
        return cli_usage_error(CMD, "--loss, --loss-output and --optimizer need --train");
    return -1;
}

/* ---- shapes and random data --------------------------------------------- */

/* The extent of dim d of `info`: fixed, from --dim, or 1. -1 when the
 * value's shape is unknown there (no extent and no name). */
static int64_t dim_extent(const bench_args *a, const teexec_value_info *info, int32_t d)
{
    if (info->dims[d] >= 0) return info->dims[d];
    const char *p = info->dim_params ? info->dim_params[d] : NULL;
    if (!p) return -1;
    for (size_t i = a->n_dims; i-- > 0;) /* the last --dim for a name wins */
        if (strcmp(a->dims[i].name, p) == 0) return a->dims[i].value;
    return 1;
}

/* The concrete shape of a declared value; false when it cannot be known
 * from the model and the --dim options. */
static bool resolve_shape(const bench_args *a, const teexec_value_info *info, int64_t *dims)
{
    if (info->kind != TEEXEC_VALUE_TENSOR || info->rank < 0 || info->rank > MAX_RANK) return false;
    for (int32_t d = 0; d < info->rank; d++)
        if ((dims[d] = dim_extent(a, info, d)) < 0) return false;
    return true;
}

static void shape_str(int32_t rank, const int64_t *dims, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int32_t d = 0; d < rank && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, d ? "," : "", dims[d]);
    if (len < size) snprintf(buf + len, size - len, "]");
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

/* ---- the state of one benchmark ----------------------------------------- */

typedef struct bench_state {
    teexec_model *model;
    teexec_session *session;
    teexec_trainer *trainer;
    size_t n_in, n_out;
    size_t n_feed;              /* inputs plus the target / labels when training */
    const char **feed_names;
    teexec_tensor **feed;
    teexec_tensor **outputs;
    double *times;              /* iters entries, sorted after the runs */
    double loss_first, loss_last;
    const char *device;
    bool on_gpu;                /* the device is "cuda" */
    long calls;
} bench_state;

static void state_free(bench_state *b)
{
    for (size_t i = 0; b->feed && i < b->n_feed; i++) teexec_tensor_destroy(b->feed[i]);
    for (size_t i = 0; b->outputs && i < b->n_out; i++) teexec_tensor_destroy(b->outputs[i]);
    free(b->feed_names);
    free(b->feed);
    free(b->outputs);
    free(b->times);
    teexec_trainer_destroy(b->trainer);
    teexec_session_destroy(b->session);
    teexec_model_destroy(b->model);
}

static void clear_outputs(bench_state *b)
{
    for (size_t o = 0; o < b->n_out; o++) {
        teexec_tensor_destroy(b->outputs[o]);
        b->outputs[o] = NULL;
    }
}

static teexec_status *make_session(const bench_args *a, const teexec_model *m,
                                   teexec_session **out)
{
    teexec_session_options *opts = NULL;
    teexec_status *st = teexec_session_options_create(&opts);
    if (!st) st = exec_options_apply_session(&a->ex, opts);
    if (!st && a->threads) st = teexec_session_options_set_threads(opts, a->threads);
    for (size_t i = 0; !st && i < a->n_dims; i++)
        st = teexec_session_options_set_dim(opts, a->dims[i].name, a->dims[i].value);
    if (!st) st = teexec_session_create(m, opts, out);
    teexec_session_options_destroy(opts);
    return st;
}

static int fill_inputs(const bench_args *a, bench_state *b)
{
    for (size_t i = 0; i < b->n_in; i++) {
        const teexec_value_info *info = teexec_model_input(b->model, i);
        int64_t dims[MAX_RANK];
        if (!resolve_shape(a, info, dims) || info->dtype == TEEXEC_DTYPE_UNDEFINED ||
            info->dtype == TEEXEC_DTYPE_STRING)
            return cli_fail(CLI_EXIT_BAD_INPUT, CMD,
                            "%s: input \"%s\" has no declared tensor shape and numeric dtype to "
                            "fill it from (name its symbolic dims with --dim)",
                            a->model, info->name);
        b->feed_names[i] = info->name;
        teexec_status *st = random_fill(info->dtype, info->rank, dims, a->seed, i, &b->feed[i]);
        if (st) return cli_report(st, a->model);
    }
    return -1;
}

/* The loss output's index (--loss-output or the first output). */
static int loss_output_index(const bench_args *a, const bench_state *b, size_t *out)
{
    if (b->n_out == 0) return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "%s has no outputs", a->model);
    *out = 0;
    if (!a->loss_output) return -1;
    for (size_t o = 0; o < b->n_out; o++)
        if (strcmp(teexec_model_output(b->model, o)->name, a->loss_output) == 0) {
            *out = o;
            return -1;
        }
    return cli_usage_error(CMD, "--loss-output %s: the model has no output of that name",
                           a->loss_output);
}

/* The target (mse) or labels (cross-entropy) for the loss output, shaped
 * from the declared output shape or, where the model leaves it open, from
 * one inference run on the same device. */
static int make_target(const bench_args *a, bench_state *b)
{
    size_t o;
    int rc = loss_output_index(a, b, &o);
    if (rc >= 0) return rc;
    const teexec_value_info *info = teexec_model_output(b->model, o);
    int64_t dims[MAX_RANK];
    int32_t rank = info->rank;
    teexec_dtype dt = info->dtype;
    teexec_status *st = NULL;
    if (!resolve_shape(a, info, dims) || dt == TEEXEC_DTYPE_UNDEFINED) {
        teexec_session *s = NULL;
        st = make_session(a, b->model, &s);
        if (!st)
            st = teexec_session_run(s, b->n_in, b->feed_names,
                                    (const teexec_tensor *const *)b->feed, b->n_out, NULL,
                                    b->outputs);
        if (!st) {
            rank = teexec_tensor_rank(b->outputs[o]);
            dt = teexec_tensor_dtype(b->outputs[o]);
            if (rank > MAX_RANK) rank = MAX_RANK;
            memcpy(dims, teexec_tensor_dims(b->outputs[o]), sizeof(int64_t) * (size_t)rank);
        }
        clear_outputs(b);
        teexec_session_destroy(s);
        if (st) return cli_report(st, a->model);
    }
    b->feed_names[b->n_in] = a->loss == TEEXEC_LOSS_MSE ? "target" : "labels";
    if (a->loss == TEEXEC_LOSS_MSE) {
        if (!random_fill_is_float(dt))
            return cli_fail(CLI_EXIT_UNSUPPORTED, CMD,
                            "output \"%s\" is %s: mse needs a float output (use --loss "
                            "cross-entropy for logits with integer labels)",
                            info->name, teexec_dtype_name(dt));
        st = random_fill(dt, rank, dims, a->seed, b->n_in, &b->feed[b->n_in]);
    } else {
        if (rank < 1 || dims[rank - 1] < 1)
            return cli_fail(CLI_EXIT_UNSUPPORTED, CMD,
                            "output \"%s\" has no class dim for cross-entropy labels", info->name);
        st = random_labels(rank - 1, dims, dims[rank - 1], a->seed, b->n_in, &b->feed[b->n_in]);
    }
    if (st) return cli_report(st, a->model);
    return -1;
}

static teexec_status *make_trainer(const bench_args *a, bench_state *b)
{
    teexec_train_options to;
    teexec_train_options_init(&to);
    to.loss = a->loss;
    to.loss_output = a->loss_output;
    to.optimizer = a->optimizer;
    to.seed = a->seed;
    exec_options_apply_train(&a->ex, &to);
    return teexec_trainer_create(b->model, &to, &b->trainer);
}

/* One call of the benchmarked thing; *ms gets its wall time. */
static teexec_status *one_call(bench_state *b, double *ms, double *loss)
{
    teexec_status *st;
    double t0 = now_ms();
    /* On the GPU, calls after the first reuse the inputs already on the
     * device and fetch no outputs, as PyTorch's timings (tensors resident
     * on the GPU) do; the library still returns only when the work is done. */
    bool resident = b->on_gpu && b->calls > 0;
    if (b->trainer) {
        st = teexec_trainer_step(b->trainer, resident ? 0 : b->n_feed, b->feed_names,
                                 (const teexec_tensor *const *)b->feed, loss);
        *ms = now_ms() - t0;
    } else if (resident) {
        static const char *const none[1] = {NULL};
        st = teexec_session_run(b->session, 0, NULL, NULL, 0, none, NULL);
        *ms = now_ms() - t0;
    } else {
        st = teexec_session_run(b->session, b->n_in, b->feed_names,
                                (const teexec_tensor *const *)b->feed, b->n_out, NULL,
                                b->outputs);
        *ms = now_ms() - t0;
        clear_outputs(b); /* freeing host copies is not the model's time */
    }
    b->calls++;
    return st;
}

/* ---- reporting ---------------------------------------------------------- */

typedef struct summary {
    double min, median, mean, max;
} summary;

static summary summarize(double *times, long n)
{
    summary s;
    double sum = 0;
    for (long i = 0; i < n; i++) sum += times[i];
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    s.min = times[0];
    s.max = times[n - 1];
    s.median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
    s.mean = sum / (double)n;
    return s;
}

static const char *loss_name(teexec_loss_kind k)
{
    return k == TEEXEC_LOSS_MSE ? "mse" : "cross-entropy";
}

static void report_json(const bench_args *a, const bench_state *b, const summary *s,
                        const double *unsorted)
{
    json_out j;
    json_init(&j, stdout);
    json_begin_object(&j);
    json_key(&j, "model");
    json_string(&j, a->model);
    json_key(&j, "device");
    json_string(&j, b->device);
    json_key(&j, "mode");
    json_string(&j, a->train ? "train" : "inference");
    json_key(&j, "recipe");
    json_string(&j, a->ex.recipe ? a->ex.recipe : "none");
    json_key(&j, "dtype");
    json_string(&j, exec_options_dtype_name(a->ex.dtype));
    json_key(&j, "cuda_graphs");
    json_bool(&j, strcmp(b->device, "cpu") != 0 && !a->ex.no_graphs && !a->ex.profile);
    json_key(&j, "deterministic");
    json_bool(&j, exec_options_deterministic(&a->ex));
    json_key(&j, "profile");
    json_bool(&j, a->ex.profile);
    json_key(&j, "seed");
    json_uint(&j, a->seed);
    json_key(&j, "inputs");
    json_begin_array(&j);
    for (size_t i = 0; i < b->n_feed; i++) {
        const teexec_tensor *t = b->feed[i];
        json_begin_object(&j);
        json_key(&j, "name");
        json_string(&j, b->feed_names[i]);
        json_key(&j, "dtype");
        json_string(&j, teexec_dtype_name(teexec_tensor_dtype(t)));
        json_key(&j, "shape");
        json_begin_array(&j);
        for (int32_t d = 0; d < teexec_tensor_rank(t); d++) json_int(&j, teexec_tensor_dims(t)[d]);
        json_end_array(&j);
        json_end_object(&j);
    }
    json_end_array(&j);
    if (a->train) {
        json_key(&j, "loss");
        json_string(&j, loss_name(a->loss));
        json_key(&j, "loss_first");
        json_double(&j, b->loss_first);
        json_key(&j, "loss_last");
        json_double(&j, b->loss_last);
    }
    /* device memory it held (CUDA; 0 on the CPU): the trainer's own
     * allocation, or the session's executors' and the weights they read */
    size_t weights = 0, own = 0;
    if (b->trainer) own = teexec_trainer_device_bytes(b->trainer);
    else if (b->session) teexec_status_destroy(teexec_session_device_memory(b->session, &weights, &own));
    json_key(&j, "device_bytes");
    json_uint(&j, (uint64_t)own);
    json_key(&j, "device_weight_bytes");
    json_uint(&j, (uint64_t)weights);
    json_key(&j, "warmup");
    json_int(&j, a->warmup);
    json_key(&j, "iters");
    json_int(&j, a->iters);
    json_key(&j, "min_ms");
    json_double(&j, s->min);
    json_key(&j, "median_ms");
    json_double(&j, s->median);
    json_key(&j, "mean_ms");
    json_double(&j, s->mean);
    json_key(&j, "max_ms");
    json_double(&j, s->max);
    json_key(&j, "times_ms");
    json_begin_array(&j);
    for (long i = 0; i < a->iters; i++) json_double(&j, unsorted[i]);
    json_end_array(&j);
    json_end_object(&j);
    json_finish(&j);
}

static void report_text(const bench_args *a, const bench_state *b, const summary *s)
{
    printf("model:   %s\n", a->model);
    printf("device:  %s\n", b->device);
    if (a->train)
        printf("mode:    training step (%s loss, %s)\n", loss_name(a->loss),
               a->optimizer == TEEXEC_OPTIMIZER_ADAMW ? "adamw" : "sgd");
    else
        printf("mode:    inference\n");
    printf("recipe:  %s\n", a->ex.recipe ? a->ex.recipe : "none");
    printf("dtype:   %s\n", a->ex.dtype == TEEXEC_DTYPE_UNDEFINED
                                ? "the model's"
                                : exec_options_dtype_name(a->ex.dtype));
    if (strcmp(b->device, "cpu") != 0)
        printf("graphs:  %s\n", a->ex.no_graphs || a->ex.profile ? "off" : "on");
    if (exec_options_deterministic(&a->ex)) printf("deterministic: on\n");
    for (size_t i = 0; i < b->n_feed; i++) {
        char sh[512];
        const teexec_tensor *t = b->feed[i];
        shape_str(teexec_tensor_rank(t), teexec_tensor_dims(t), sh, sizeof(sh));
        printf("%-8s %s %s %s, random (seed %" PRIu64 ")\n", i ? "" : "inputs:", b->feed_names[i],
               teexec_dtype_name(teexec_tensor_dtype(t)), sh, a->seed);
    }
    printf("iters:   %ld after %ld warm-up\n", a->iters, a->warmup);
    printf("time:    min %.3f ms  median %.3f ms  mean %.3f ms  max %.3f ms\n", s->min, s->median,
           s->mean, s->max);
    if (a->train) printf("loss:    first %.6g  last %.6g\n", b->loss_first, b->loss_last);
}

/* ---- the command -------------------------------------------------------- */

int cmd_bench(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    bench_state b;
    memset(&b, 0, sizeof(b));
    double *unsorted = NULL;
    teexec_status *st = teexec_model_load_file(a.model, NULL, &b.model);
    if (st) return cli_report(st, a.model);
    b.n_in = teexec_model_input_count(b.model);
    b.n_out = teexec_model_output_count(b.model);
    b.n_feed = b.n_in + (a.train ? 1 : 0);
    b.feed_names = calloc(b.n_feed + 1, sizeof(*b.feed_names));
    b.feed = calloc(b.n_feed + 1, sizeof(*b.feed));
    b.outputs = calloc(b.n_out + 1, sizeof(*b.outputs));
    b.times = calloc((size_t)a.iters, sizeof(double));
    unsorted = calloc((size_t)a.iters, sizeof(double));
    if (!b.feed_names || !b.feed || !b.outputs || !b.times || !unsorted) {
        rc = cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
        goto done;
    }
    if ((rc = fill_inputs(&a, &b)) >= 0) goto done;
    if (a.train) {
        if ((rc = make_target(&a, &b)) >= 0) goto done;
        st = make_trainer(&a, &b);
        if (!st) b.device = teexec_trainer_device_name(b.trainer);
    } else {
        st = make_session(&a, b.model, &b.session);
        if (!st) b.device = teexec_session_device_name(b.session);
    }
    if (st) {
        rc = cli_report(st, a.model);
        goto done;
    }
    b.on_gpu = b.device && !strcmp(b.device, "cuda");
    for (long it = 0; it < a.warmup + a.iters; it++) {
        double ms = 0, loss = NAN;
        st = one_call(&b, &ms, &loss);
        if (st) {
            rc = cli_report(st, a.model);
            goto done;
        }
        if (it == 0) b.loss_first = loss;
        b.loss_last = loss;
        if (it >= a.warmup) b.times[it - a.warmup] = ms;
    }
    memcpy(unsorted, b.times, sizeof(double) * (size_t)a.iters);
    summary s = summarize(b.times, a.iters);
    if (a.json) report_json(&a, &b, &s, unsorted);
    else report_text(&a, &b, &s);
    fflush(stdout);
    rc = CLI_EXIT_OK;
    if (a.ex.profile) {
        char *text = NULL;
        if (!b.trainer && !b.on_gpu) {
            /* the CPU has no session-wide profile: one more run, not
             * timed above, profiles itself (run options set_profile) */
            teexec_run_options *ro = NULL;
            st = teexec_run_options_create(&ro);
            if (!st) st = teexec_run_options_set_profile(ro, 1);
            if (!st)
                st = teexec_session_run_with(b.session, ro, b.n_in, b.feed_names,
                                             (const teexec_tensor *const *)b.feed, b.n_out, NULL,
                                             b.outputs);
            clear_outputs(&b);
            teexec_run_options_destroy(ro);
            if (!st) st = teexec_session_run_profile(b.session, &text);
        } else {
            st = b.trainer ? teexec_trainer_profile(b.trainer, &text)
                           : teexec_session_profile(b.session, &text);
        }
        rc = exec_options_print_profile(CMD, b.device, st, text);
    }
done:
    free(unsorted);
    state_free(&b);
    return rc;
}
