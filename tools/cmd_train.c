/*
 * cmd_train.c - `teexec train MODEL.onnx --data FILE.npz [options]`:
 * training on the GPU or the CPU through the public trainer API
 * (teexec_trainer_*).
 *
 * The .npz holds one array per model input plus `target` (MSE) or `labels`
 * (cross-entropy). --batch B feeds rows [s*B, s*B+B) of every array (dim 0,
 * wrapping around) at step s; without it every step sees the whole arrays.
 */
#include "cli_common.h"
#include "commands.h"
#include "exec_options.h"
#include "json_out.h"
#include "teexec/teexec.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CMD "train"

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: teexec train MODEL.onnx --data FILE.npz [options]\n"
            "\n"
            "Trains the model's float initializers (on the GPU when one is usable, else\n"
            "on the CPU). FILE.npz holds one array per model input plus 'target' (mse)\n"
            "or int64 'labels' (cross-entropy).\n"
            "\n"
            "options:\n"
            "  --data FILE.npz          training data (required)\n"
            "  --loss mse|cross-entropy loss over the model's first output (default mse)\n"
            "  --loss-output NAME       the output the loss reads (default: the first)\n"
            "  --optimizer adamw|sgd    (default adamw)\n"
            "  --lr F                   learning rate (default 1e-3)\n"
            "  --weight-decay F         (default 0.01)\n"
            "  --momentum F             SGD momentum (default 0)\n"
            "  --steps N                optimizer steps (default 1)\n"
            "  --batch B                rows of dim 0 per step, cycling (default: all)\n"
            "  --seed N                 seed (default 0)\n"
            "  --freeze LIST            initializers to keep fixed: names or shell patterns,\n"
            "                           comma-separated (\"*.bias,wte\"); scalars and masks\n"
            "                           are never trained\n"
            "  --save OUT.onnx          write the trained model (atomically)\n"
            "  --dump-grads DIR         after the first step write NAME.npy per trainable\n"
            "                           initializer and INPUT.grad.npy per float input\n"
            "  --json                   print one JSON object instead of progress lines\n"
            "%s"
            "  -h, --help               show this help\n",
            exec_options_help);
}

typedef struct train_args {
    const char *model, *data, *save, *dump;
    teexec_train_options opt;
    exec_options ex;
    long steps, batch;
    bool json;
} train_args;

static bool parse_num(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

static bool parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0) return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, train_args *a)
{
    memset(a, 0, sizeof(*a));
    teexec_train_options_init(&a->opt);
    exec_options_init(&a->ex);
    a->steps = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (cli_is_help(o)) {
            train_usage(stdout);
            return -1;
        }
        if (!strcmp(o, "--json")) {
            a->json = true;
            continue;
        }
        if (o[0] != '-') {
            if (a->model) return cli_usage_error(CMD, "more than one model given");
            a->model = o;
            continue;
        }
        int ex = exec_options_parse(&a->ex, CMD, argc, argv, &i);
        if (ex < 0) return -ex;
        if (ex > 0) continue;
        if (i + 1 >= argc) return cli_usage_error(CMD, "%s needs a value", o);
        const char *v = argv[++i];
        double d;
        long l;
        if (!strcmp(o, "--data")) a->data = v;
        else if (!strcmp(o, "--save")) a->save = v;
        else if (!strcmp(o, "--dump-grads")) a->dump = v;
        else if (!strcmp(o, "--loss-output")) a->opt.loss_output = v;
        else if (!strcmp(o, "--freeze")) a->opt.freeze = v;
        else if (!strcmp(o, "--loss")) {
            if (!strcmp(v, "mse")) a->opt.loss = TEEXEC_LOSS_MSE;
            else if (!strcmp(v, "cross-entropy")) a->opt.loss = TEEXEC_LOSS_CROSS_ENTROPY;
            else return cli_usage_error(CMD, "--loss must be mse or cross-entropy, not \"%s\"", v);
        } else if (!strcmp(o, "--optimizer")) {
            if (!strcmp(v, "adamw")) a->opt.optimizer = TEEXEC_OPTIMIZER_ADAMW;
            else if (!strcmp(v, "sgd")) a->opt.optimizer = TEEXEC_OPTIMIZER_SGD;
            else return cli_usage_error(CMD, "--optimizer must be adamw or sgd, not \"%s\"", v);
        } else if (!strcmp(o, "--lr") || !strcmp(o, "--weight-decay") || !strcmp(o, "--momentum")) {
            if (!parse_num(v, &d)) return cli_usage_error(CMD, "%s needs a number, not \"%s\"", o, v);
            if (!strcmp(o, "--lr")) a->opt.lr = d;
            else if (!strcmp(o, "--weight-decay")) a->opt.weight_decay = d;
            else a->opt.momentum = d;
        } else if (!strcmp(o, "--steps") || !strcmp(o, "--batch") || !strcmp(o, "--seed")) {
            if (!parse_long(v, &l))
                return cli_usage_error(CMD, "%s needs a non-negative integer, not \"%s\"", o, v);
            if (!strcmp(o, "--steps")) a->steps = l;
            else if (!strcmp(o, "--batch")) a->batch = l;
            else a->opt.seed = (uint64_t)l;
        } else {
            return cli_usage_error(CMD, "unknown option %s", o);
        }
    }
    if (!a->model) return cli_usage_error(CMD, "no model given");
    if (!a->data) return cli_usage_error(CMD, "--data FILE.npz is required");
    exec_options_apply_train(&a->ex, &a->opt);
    return 0;
}

/* Rows [start, start+b) of dim 0 of `t` (wrapping), as a new tensor. */
static teexec_status *slice_rows(const teexec_tensor *t, long start, long b, teexec_tensor **out)
{
    int32_t r = teexec_tensor_rank(t);
    const int64_t *dims = teexec_tensor_dims(t);
    if (r < 1 || dims[0] < 1) return teexec_tensor_create_copy(teexec_tensor_dtype(t), r, dims,
                                                              teexec_tensor_data_const(t),
                                                              teexec_tensor_byte_size(t), out);
    int64_t nd[64];
    if (r > 64) r = 64;
    memcpy(nd, dims, sizeof(int64_t) * (size_t)r);
    nd[0] = b;
    teexec_status *st = teexec_tensor_create(teexec_tensor_dtype(t), r, nd, out);
    if (st) return st;
    size_t row = teexec_tensor_byte_size(t) / (size_t)dims[0];
    const char *src = teexec_tensor_data_const(t);
    char *dst = teexec_tensor_data(*out);
    for (long i = 0; i < b; i++) memcpy(dst + (size_t)i * row, src + (size_t)((start + i) % dims[0]) * row, row);
    return NULL;
}

static int dump_grads(teexec_trainer *tr, const teexec_model *m, const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "cannot create %s: %s", dir, strerror(errno));
    size_t np = teexec_trainer_param_count(tr), ni = teexec_model_input_count(m);
    for (size_t i = 0; i < np + ni; i++) {
        const char *name = i < np ? teexec_trainer_param_name(tr, i)
                                  : teexec_model_input(m, i - np)->name;
        teexec_tensor *g;
        teexec_status *st = teexec_trainer_grad(tr, name, &g);
        if (st && i >= np) { /* an input without a gradient (integer ids) */
            teexec_status_destroy(st);
            continue;
        }
        if (st) return cli_report(st, NULL);
        size_t len = strlen(dir) + strlen(name) + 16;
        char *path = malloc(len);
        if (!path) {
            teexec_tensor_destroy(g);
            return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
        }
        snprintf(path, len, "%s/", dir);
        char *p = path + strlen(path);
        for (const char *s = name; *s; s++) *p++ = *s == '/' ? '_' : *s;
        strcpy(p, i < np ? ".npy" : ".grad.npy");
        st = teexec_tensor_save_file(g, path, name);
        free(path);
        teexec_tensor_destroy(g);
        if (st) return cli_report(st, NULL);
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    teexec_model *m = NULL;
    teexec_dataset *ds = NULL;
    teexec_trainer *tr = NULL;
    double *losses = NULL;
    const char **names = NULL;
    teexec_tensor **batch = NULL;
    teexec_status *st = teexec_model_load_file(a.model, NULL, &m);
    if (st) return cli_report(st, a.model);
    st = teexec_dataset_load_npz(a.data, &ds);
    if (st) {
        rc = cli_report(st, a.data);
        goto done;
    }
    st = teexec_trainer_create(m, &a.opt, &tr);
    if (st) {
        rc = cli_report(st, a.model);
        goto done;
    }
    size_t n = teexec_dataset_count(ds);
    names = calloc(n ? n : 1, sizeof(*names));
    batch = calloc(n ? n : 1, sizeof(*batch));
    losses = calloc(a.steps ? (size_t)a.steps : 1, sizeof(*losses));
    if (!names || !batch || !losses) {
        rc = cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
        goto done;
    }
    /* tokens per step: dim 0 (x dim 1 when rank >= 2) of the first input */
    double tokens = 0;
    bool tty = !a.json && isatty(fileno(stderr));
    double t0 = now_s();
    for (long s = 0; s < a.steps; s++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const teexec_tensor *t = teexec_dataset_tensor(ds, i);
            names[k] = teexec_dataset_name(ds, i);
            if (a.batch > 0) {
                int64_t rows = teexec_tensor_rank(t) > 0 ? teexec_tensor_dims(t)[0] : 1;
                st = slice_rows(t, (long)(((int64_t)s * a.batch) % (rows ? rows : 1)), a.batch, &batch[k]);
            } else {
                st = teexec_tensor_create_copy(teexec_tensor_dtype(t), teexec_tensor_rank(t),
                                               teexec_tensor_dims(t), teexec_tensor_data_const(t),
                                               teexec_tensor_byte_size(t), &batch[k]);
            }
            if (st) break;
            k++;
        }
        if (!st) {
            if (s == 0 && k > 0 && teexec_tensor_rank(batch[0]) > 0) {
                tokens = (double)teexec_tensor_dims(batch[0])[0];
                if (teexec_tensor_rank(batch[0]) > 2) tokens *= (double)teexec_tensor_dims(batch[0])[1];
            }
            st = teexec_trainer_step(tr, k, names, (const teexec_tensor *const *)batch, &losses[s]);
        }
        for (size_t i = 0; i < k; i++) {
            teexec_tensor_destroy(batch[i]);
            batch[i] = NULL;
        }
        if (st) {
            rc = cli_report(st, a.model);
            goto done;
        }
        if (s == 0 && a.dump && (rc = dump_grads(tr, m, a.dump)) != 0) goto done;
        double el = now_s() - t0, per = el / (double)(s + 1);
        if (!a.json) {
            fprintf(stderr, "%sstep %ld/%ld  loss %.6g  %.0f tokens/s  ETA %.1fs%s", tty ? "\r" : "",
                    s + 1, a.steps, losses[s], per > 0 ? tokens / per : 0.0,
                    per * (double)(a.steps - s - 1), tty ? "" : "\n");
            fflush(stderr);
        }
    }
    if (tty && a.steps > 0) fputc('\n', stderr);
    if (a.save) {
        st = teexec_trainer_save_model(tr, a.save);
        if (st) {
            rc = cli_report(st, a.save);
            goto done;
        }
    }
    if (a.json) {
        json_out j;
        json_init(&j, stdout);
        json_begin_object(&j);
        json_key(&j, "model");
        json_string(&j, a.model);
        json_key(&j, "steps");
        json_int(&j, a.steps);
        json_key(&j, "losses");
        json_begin_array(&j);
        for (long s = 0; s < a.steps; s++) json_double(&j, losses[s]);
        json_end_array(&j);
        json_key(&j, "device");
        json_string(&j, teexec_trainer_device_name(tr));
        json_key(&j, "saved");
        json_string(&j, a.save);
        json_end_object(&j);
        fputc('\n', stdout);
    }
    rc = CLI_EXIT_OK;
    if (a.ex.profile) {
        char *text = NULL;
        st = teexec_trainer_profile(tr, &text);
        rc = exec_options_print_profile(CMD, teexec_trainer_device_name(tr), st, text);
    }
done:
    free(names);
    free(batch);
    free(losses);
    teexec_trainer_destroy(tr);
    teexec_dataset_destroy(ds);
    teexec_model_destroy(m);
    return rc;
}
