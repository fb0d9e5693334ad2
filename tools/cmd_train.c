/*
 * cmd_train.c - `teexec train MODEL.onnx --data FILE.npz [options]`:
 * training on the GPU or the CPU through the public trainer API
 * (teexec_trainer_*).
 *
 * The .npz holds one array per model input plus `target` (MSE) or `labels`
 * (cross-entropy). --batch B feeds rows [s*B, s*B+B) of every array (dim 0,
 * wrapping around) at step s; without it every step sees the whole arrays.
 *
 * A token stream (--data TOKENS.npy, a 1-D uint16/int32/int64 array, with
 * --seq T --batch B) trains a language model without materializing its
 * batches: row b of step s is window w = s*B + b, starting at
 * start = (w*T) mod (N - T); the model's one input gets tokens
 * [start, start+T) and `labels` gets [start+1, start+T+1) (cross-entropy
 * is implied). Only the current batch is ever copied.
 *
 * Several ranks (data parallel, docs/multi-gpu.md): --ranks N runs N CPU
 * trainers in this process, one thread each, over the thread communicator;
 * --gpus N one thread per GPU over NCCL; --rank R --world-size W
 * --rendezvous FILE this process as one rank of W over NCCL. Every rank
 * reads the same data; --batch is the global batch, which each trainer
 * cuts to its share. Rank 0 prints, writes --json and --save.
 */
#include "cli_common.h"
#include "commands.h"
#include "exec_options.h"
#include "json_out.h"
#include "teexec/teexec.h"

#include <errno.h>
#include <pthread.h>
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
            "  --data FILE.npz          training data (required), or\n"
            "  --data TOKENS.npy        a 1-D token stream (uint16/int32/int64) for a language\n"
            "                           model, with --seq T and --batch B: windows of T tokens\n"
            "                           and the next-token labels, walked in order\n"
            "  --seq T                  tokens per row with a token stream\n"
            "  --loss mse|cross-entropy loss over the model's first output (default mse)\n"
            "  --loss-output NAME       the output the loss reads (default: the first)\n"
            "  --optimizer adamw|sgd    (default adamw)\n"
            "  --lr F                   learning rate (default 1e-3)\n"
            "  --weight-decay F         (default 0.01)\n"
            "  --momentum F             SGD momentum (default 0)\n"
            "  --beta1 F --beta2 F --eps F\n"
            "                           AdamW's (defaults 0.9, 0.999, 1e-8)\n"
            "  --warmup-steps N         learning rate rises linearly over the first N steps\n"
            "  --decay-steps N --min-lr F\n"
            "                           then falls along a cosine to F at step N (nanoGPT's\n"
            "                           schedule; default: no decay)\n"
            "  --clip-grad-norm F       scale the gradients down to a global 2-norm of F\n"
            "                           (as torch.nn.utils.clip_grad_norm_; default off)\n"
            "  --steps N                optimizer steps (default 1)\n"
            "  --batch B                rows of dim 0 per step, cycling (default: all)\n"
            "  --seed N                 seed (default 0)\n"
            "  --freeze LIST            initializers to keep fixed: names or shell patterns,\n"
            "                           comma-separated (\"*.bias,wte\"); scalars and masks\n"
            "                           are never trained\n"
            "  --save OUT.onnx          write the trained model (atomically; its weights\n"
            "                           in OUT.onnx.data when the model keeps external\n"
            "                           data or is over 2 GiB)\n"
            "  --dump-grads DIR         after the first step write NAME.npy per trainable\n"
            "                           initializer and INPUT.grad.npy per float input\n"
            "  --json                   print one JSON object instead of progress lines\n"
            "data parallel (docs/multi-gpu.md; --batch is the global batch, split evenly):\n"
            "  --ranks N                N CPU ranks in this process, one thread each (implies\n"
            "                           --device cpu): try data parallelism without GPUs\n"
            "  --zero1                  shard the optimizer state over the ranks (ZeRO-1;\n"
            "                           CPU ranks)\n"
            "  --bucket-mb F            gradient all-reduce bucket size (default 25)\n"
            "  --comm-timeout-ms N      a rank waiting longer fails every rank (default 60000)\n"
            "  --gpus N                 one thread per GPU over NCCL (CUDA builds; fails when\n"
            "                           fewer GPUs are visible)\n"
            "  --rank R --world-size W --rendezvous FILE\n"
            "                           this process is rank R of W over NCCL, one process per\n"
            "                           GPU (device R mod the visible GPUs); rank 0 writes\n"
            "                           NCCL's id to FILE, the others wait for it\n"
            "%s"
            "  -h, --help               show this help\n",
            exec_options_help);
}

typedef struct train_args {
    const char *model, *data, *save, *dump;
    teexec_train_options opt;
    exec_options ex;
    long steps, batch, seq;
    bool json;
    /* data parallel: ranks (thread ranks on the CPU), gpus (NCCL threads),
     * or this process's rank of world over NCCL through rendezvous */
    long ranks, gpus, rank, world, timeout_ms;
    bool rank_given;
    const char *rendezvous;
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
        int rc;
        if (cli_model_command_arg(CMD, o, train_usage, &a->model, &a->json, &rc)) {
            if (rc == CLI_EXIT_OK) return -1; /* help printed */
            if (rc >= 0) return rc;
            continue;
        }
        if (!strcmp(o, "--zero1")) {
            a->opt.zero1 = 1;
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
        else if (!strcmp(o, "--rendezvous")) a->rendezvous = v;
        else if (!strcmp(o, "--bucket-mb")) {
            if (!parse_num(v, &d) || d <= 0)
                return cli_usage_error(CMD, "--bucket-mb needs a positive number, not \"%s\"", v);
            a->opt.dp_bucket_mb = d;
        } else if (!strcmp(o, "--ranks") || !strcmp(o, "--gpus") || !strcmp(o, "--rank") ||
                   !strcmp(o, "--world-size") || !strcmp(o, "--comm-timeout-ms")) {
            if (!parse_long(v, &l) || l > 4096 ||
                (l < 1 && strcmp(o, "--rank") != 0))
                return cli_usage_error(CMD, "%s needs an integer%s, not \"%s\"", o,
                                       strcmp(o, "--rank") ? " from 1 to 4096" : "", v);
            if (!strcmp(o, "--ranks")) a->ranks = l;
            else if (!strcmp(o, "--gpus")) a->gpus = l;
            else if (!strcmp(o, "--world-size")) a->world = l;
            else if (!strcmp(o, "--comm-timeout-ms")) a->timeout_ms = l;
            else {
                a->rank = l;
                a->rank_given = true;
            }
        }
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
        } else if (!strcmp(o, "--lr") || !strcmp(o, "--weight-decay") || !strcmp(o, "--momentum") ||
                   !strcmp(o, "--beta1") || !strcmp(o, "--beta2") || !strcmp(o, "--eps") ||
                   !strcmp(o, "--min-lr") || !strcmp(o, "--clip-grad-norm")) {
            if (!parse_num(v, &d)) return cli_usage_error(CMD, "%s needs a number, not \"%s\"", o, v);
            if (!strcmp(o, "--lr")) a->opt.lr = d;
            else if (!strcmp(o, "--weight-decay")) a->opt.weight_decay = d;
            else if (!strcmp(o, "--beta1")) a->opt.beta1 = d;
            else if (!strcmp(o, "--beta2")) a->opt.beta2 = d;
            else if (!strcmp(o, "--eps")) a->opt.eps = d;
            else if (!strcmp(o, "--min-lr")) a->opt.min_lr = d;
            else if (!strcmp(o, "--clip-grad-norm")) a->opt.clip_grad_norm = d;
            else a->opt.momentum = d;
        } else if (!strcmp(o, "--steps") || !strcmp(o, "--batch") || !strcmp(o, "--seed") ||
                   !strcmp(o, "--seq") || !strcmp(o, "--warmup-steps") ||
                   !strcmp(o, "--decay-steps")) {
            if (!parse_long(v, &l))
                return cli_usage_error(CMD, "%s needs a non-negative integer, not \"%s\"", o, v);
            if (!strcmp(o, "--steps")) a->steps = l;
            else if (!strcmp(o, "--batch")) a->batch = l;
            else if (!strcmp(o, "--seq")) a->seq = l;
            else if (!strcmp(o, "--warmup-steps")) a->opt.warmup_steps = l;
            else if (!strcmp(o, "--decay-steps")) a->opt.decay_steps = l;
            else a->opt.seed = (uint64_t)l;
        } else {
            return cli_usage_error(CMD, "unknown option %s", o);
        }
    }
    if (!a->model) return cli_usage_error(CMD, "no model given");
    if (!a->data) return cli_usage_error(CMD, "--data FILE.npz is required");
    size_t dl = strlen(a->data);
    bool stream = dl > 4 && !strcmp(a->data + dl - 4, ".npy");
    if (stream && (a->seq < 1 || a->batch < 1))
        return cli_usage_error(CMD, "a token stream (--data %s) needs --seq T and --batch B",
                               a->data);
    if (!stream && a->seq)
        return cli_usage_error(CMD, "--seq goes with a token stream (--data TOKENS.npy)");
    if (stream) a->opt.loss = TEEXEC_LOSS_CROSS_ENTROPY;
    int modes = (a->ranks > 0) + (a->gpus > 0) + (a->rank_given || a->world || a->rendezvous);
    if (modes > 1)
        return cli_usage_error(CMD, "--ranks, --gpus and --rank/--world-size are different "
                                    "launch modes: give one");
    if ((a->rank_given || a->world || a->rendezvous) && !a->world)
        return cli_usage_error(CMD, "--rank and --rendezvous go with --world-size W");
    if (a->world && a->rank >= a->world)
        return cli_usage_error(CMD, "--rank %ld is not below --world-size %ld", a->rank, a->world);
    if (a->world > 1 && !a->rendezvous)
        return cli_usage_error(CMD, "--world-size %ld needs --rendezvous FILE", a->world);
    if (a->ranks > 0) {
        if (a->ex.device == TEEXEC_DEVICE_CUDA)
            return cli_usage_error(CMD, "--ranks runs CPU ranks; for GPUs use --gpus N");
        a->ex.device = TEEXEC_DEVICE_CPU;
    }
    if (a->gpus > 0 || a->world) {
        if (a->ex.device == TEEXEC_DEVICE_CPU)
            return cli_usage_error(CMD, "--gpus and --world-size run on GPUs; for CPU ranks use "
                                        "--ranks N");
        a->ex.device = TEEXEC_DEVICE_CUDA;
    }
    if (a->opt.zero1 && a->ranks < 2 && a->gpus < 2 && a->world < 2)
        return cli_usage_error(CMD, "--zero1 needs more than one rank");
    exec_options_apply_train(&a->ex, &a->opt);
    return 0;
}

/* ---- token streams -------------------------------------------------------- */

typedef struct token_stream {
    const teexec_tensor *tokens; /* 1-D */
    int64_t n;
    const char *input;           /* the model's input name */
    teexec_dtype input_dtype;
} token_stream;

static int64_t token_at(const token_stream *ts, int64_t i)
{
    const void *d = teexec_tensor_data_const(ts->tokens);
    switch (teexec_tensor_dtype(ts->tokens)) {
    case TEEXEC_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case TEEXEC_DTYPE_INT32: return ((const int32_t *)d)[i];
    default: return ((const int64_t *)d)[i];
    }
}

/* 0, or the exit status after printing why the stream cannot feed m. */
static int stream_check(const teexec_model *m, const char *path, const teexec_tensor *tokens,
                        long seq, token_stream *ts)
{
    memset(ts, 0, sizeof *ts);
    teexec_dtype dt = teexec_tensor_dtype(tokens);
    if (teexec_tensor_rank(tokens) != 1 ||
        (dt != TEEXEC_DTYPE_UINT16 && dt != TEEXEC_DTYPE_INT32 && dt != TEEXEC_DTYPE_INT64))
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD,
                        "%s: a token stream must be a 1-D uint16, int32 or int64 array", path);
    ts->tokens = tokens;
    ts->n = teexec_tensor_dims(tokens)[0];
    if (ts->n < (int64_t)seq + 2)
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD,
                        "%s holds %lld tokens, fewer than --seq %ld + 2", path,
                        (long long)ts->n, seq);
    if (teexec_model_input_count(m) != 1)
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD,
                        "a token stream feeds a model with one input (token ids); this one has %zu",
                        teexec_model_input_count(m));
    const teexec_value_info *in = teexec_model_input(m, 0);
    if (in->dtype != TEEXEC_DTYPE_INT64 && in->dtype != TEEXEC_DTYPE_INT32)
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "input \"%s\" is %s, not token ids (int64 or int32)",
                        in->name, teexec_dtype_name(in->dtype));
    ts->input = in->name;
    ts->input_dtype = in->dtype;
    return 0;
}

/* Step s of a token stream: [B, T] ids and labels, the next tokens. */
static teexec_status *stream_batch(const token_stream *ts, long s, long b, long seq,
                                   teexec_tensor **ids, teexec_tensor **labels)
{
    int64_t dims[2] = {b, seq};
    teexec_status *st = teexec_tensor_create(ts->input_dtype, 2, dims, ids);
    if (!st) st = teexec_tensor_create(TEEXEC_DTYPE_INT64, 2, dims, labels);
    if (st) return st;
    int64_t *lab = teexec_tensor_data(*labels);
    void *x = teexec_tensor_data(*ids);
    for (long r = 0; r < b; r++) {
        int64_t w = (int64_t)s * b + r;
        int64_t start = (int64_t)(((uint64_t)w * (uint64_t)seq) % (uint64_t)(ts->n - seq));
        for (long t = 0; t < seq; t++) {
            int64_t tok = token_at(ts, start + t);
            if (ts->input_dtype == TEEXEC_DTYPE_INT32) ((int32_t *)x)[r * seq + t] = (int32_t)tok;
            else ((int64_t *)x)[r * seq + t] = tok;
            lab[r * seq + t] = token_at(ts, start + t + 1);
        }
    }
    return NULL;
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

/* One rank's training run: its trainer steps a.steps times over the
 * (global) batches; rank 0 alone prints, writes --json, --save and
 * --dump-grads. */
typedef struct rank_run {
    const train_args *a;
    const teexec_model *m;
    const teexec_dataset *ds;
    const token_stream *stream;
    teexec_trainer *tr;
    int rank, world;
    int rc;
    /* thread ranks: a failed step's status is kept for the launcher, which
     * reports the one that explains the failure (not each rank's echo) */
    bool keep;
    teexec_status *st;
    char what[1200];
} rank_run;

static int train_loop(rank_run *r)
{
    const train_args *a = r->a;
    bool streaming = a->seq > 0, talk = r->rank == 0;
    const teexec_dataset *ds = r->ds;
    teexec_trainer *tr = r->tr;
    teexec_status *st = NULL;
    int rc = CLI_EXIT_OK;
    char *what = r->what;
    if (r->world > 1) snprintf(what, sizeof r->what, "%s (rank %d of %d)", a->model, r->rank, r->world);
    else snprintf(what, sizeof r->what, "%s", a->model);
    size_t n = streaming ? 2 : teexec_dataset_count(ds);
    const char **names = calloc(n ? n : 1, sizeof(*names));
    teexec_tensor **batch = calloc(n ? n : 1, sizeof(*batch));
    double *losses = calloc(a->steps ? (size_t)a->steps : 1, sizeof(*losses));
    double *step_s = calloc(a->steps ? (size_t)a->steps : 1, sizeof(*step_s));
    if (!names || !batch || !losses || !step_s) {
        rc = cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
        goto done;
    }
    /* tokens per step: dim 0 (x dim 1 when rank >= 2) of the first input */
    double tokens_per_step = 0;
    bool tty = talk && !a->json && isatty(fileno(stderr));
    double t0 = now_s();
    for (long s = 0; s < a->steps; s++) {
        double ts0 = now_s();
        size_t k = 0;
        if (streaming) {
            names[0] = r->stream->input;
            names[1] = "labels";
            st = stream_batch(r->stream, s, a->batch, a->seq, &batch[0], &batch[1]);
            if (!st) k = 2;
        }
        for (size_t i = 0; !streaming && i < n; i++) {
            const teexec_tensor *t = teexec_dataset_tensor(ds, i);
            names[k] = teexec_dataset_name(ds, i);
            if (a->batch > 0) {
                int64_t rows = teexec_tensor_rank(t) > 0 ? teexec_tensor_dims(t)[0] : 1;
                st = slice_rows(t, (long)(((int64_t)s * a->batch) % (rows ? rows : 1)), a->batch, &batch[k]);
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
                tokens_per_step = (double)teexec_tensor_dims(batch[0])[0];
                if (teexec_tensor_rank(batch[0]) >= 2)
                    tokens_per_step *= (double)teexec_tensor_dims(batch[0])[1];
            }
            st = teexec_trainer_step(tr, k, names, (const teexec_tensor *const *)batch, &losses[s]);
        }
        step_s[s] = now_s() - ts0;
        for (size_t i = 0; i < k; i++) {
            teexec_tensor_destroy(batch[i]);
            batch[i] = NULL;
        }
        if (st && r->keep) {
            r->st = st;
            rc = CLI_EXIT_BAD_INPUT;
            goto done;
        }
        if (st) {
            rc = cli_report(st, what);
            goto done;
        }
        if (talk && s == 0 && a->dump && (rc = dump_grads(tr, r->m, a->dump)) != 0) goto done;
        double el = now_s() - t0, per = el / (double)(s + 1);
        if (talk && !a->json) {
            fprintf(stderr, "%sstep %ld/%ld  loss %.6g  %.0f tokens/s  ETA %.1fs%s", tty ? "\r" : "",
                    s + 1, a->steps, losses[s], per > 0 ? tokens_per_step / per : 0.0,
                    per * (double)(a->steps - s - 1), tty ? "" : "\n");
            fflush(stderr);
        }
    }
    if (tty && a->steps > 0) fputc('\n', stderr);
    if (!talk) goto done;
    if (a->save) {
        st = teexec_trainer_save_model(tr, a->save);
        if (st) {
            rc = cli_report(st, a->save);
            goto done;
        }
    }
    if (a->json) {
        json_out j;
        json_init(&j, stdout);
        json_begin_object(&j);
        json_key(&j, "model");
        json_string(&j, a->model);
        json_key(&j, "steps");
        json_int(&j, a->steps);
        json_key(&j, "losses");
        json_begin_array(&j);
        for (long s = 0; s < a->steps; s++) json_double(&j, losses[s]);
        json_end_array(&j);
        json_key(&j, "device");
        json_string(&j, teexec_trainer_device_name(tr));
        json_key(&j, "ranks");
        json_int(&j, r->world);
        json_key(&j, "tokens_per_step");
        json_double(&j, tokens_per_step);
        json_key(&j, "step_seconds");
        json_begin_array(&j);
        for (long s = 0; s < a->steps; s++) json_double(&j, step_s[s]);
        json_end_array(&j);
        /* steady state: the first step (one-time setup, autotuning) left out */
        double tail = 0;
        for (long s = a->steps > 1 ? 1 : 0; s < a->steps; s++) tail += step_s[s];
        long counted = a->steps > 1 ? a->steps - 1 : a->steps;
        json_key(&j, "tokens_per_s");
        json_double(&j, tail > 0 ? tokens_per_step * (double)counted / tail : 0.0);
        json_key(&j, "device_bytes");
        json_uint(&j, (uint64_t)teexec_trainer_device_bytes(tr));
        json_key(&j, "saved");
        json_string(&j, a->save);
        json_end_object(&j);
        fputc('\n', stdout);
    }
    if (a->ex.profile) {
        char *text = NULL;
        st = teexec_trainer_profile(tr, &text);
        rc = exec_options_print_profile(CMD, teexec_trainer_device_name(tr), st, text);
    }
done:
    free(names);
    free(batch);
    free(losses);
    free(step_s);
    return rc;
}

static void *rank_thread(void *arg)
{
    rank_run *r = arg;
    r->rc = train_loop(r);
    return NULL;
}

/* The communicators of the launch mode: none (one rank), n thread or NCCL
 * ranks of this process, or this process's one NCCL rank. */
static int make_comms(const train_args *a, teexec_comm **comms, int *n_local, int *world)
{
    teexec_status *st = NULL;
    int timeout = (int)a->timeout_ms;
    *n_local = 1;
    *world = 1;
    if (a->ranks > 0) {
        *n_local = *world = (int)a->ranks;
        st = teexec_comm_create_threads((int)a->ranks, timeout, comms);
    } else if (a->gpus > 0) {
        int have = teexec_comm_gpu_count();
        if (have < a->gpus)
            return cli_fail(CLI_EXIT_DEVICE, CMD, "--gpus %ld: %d CUDA device%s visible", a->gpus,
                            have, have == 1 ? "" : "s");
        *n_local = *world = (int)a->gpus;
        st = teexec_comm_create_nccl_threads((int)a->gpus, NULL, timeout, comms);
    } else if (a->world > 0) {
        int have = teexec_comm_gpu_count();
        if (have < 1) return cli_fail(CLI_EXIT_DEVICE, CMD, "--world-size: no CUDA device visible");
        *world = (int)a->world;
        st = teexec_comm_create_nccl((int)a->world, (int)a->rank, (int)(a->rank % have),
                                     a->rendezvous, timeout, comms);
    } else {
        comms[0] = NULL;
    }
    return st ? cli_report(st, a->rendezvous) : CLI_EXIT_OK;
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    teexec_model *m = NULL;
    teexec_dataset *ds = NULL;
    teexec_tensor *tokens = NULL;
    token_stream stream;
    bool streaming = a.seq > 0;
    int n_local = 1, world = 1;
    teexec_comm **comms = NULL;
    rank_run *runs = NULL;
    teexec_status *st = teexec_model_load_file(a.model, NULL, &m);
    if (st) return cli_report(st, a.model);
    st = streaming ? teexec_tensor_load_file(a.data, &tokens) : teexec_dataset_load_npz(a.data, &ds);
    if (st) {
        rc = cli_report(st, a.data);
        goto done;
    }
    if (streaming && (rc = stream_check(m, a.data, tokens, a.seq, &stream)) != 0) goto done;
    long most = a.ranks > a.gpus ? a.ranks : a.gpus;
    comms = calloc((size_t)(most > 1 ? most : 1), sizeof(*comms));
    runs = calloc((size_t)(most > 1 ? most : 1), sizeof(*runs));
    if (!comms || !runs) {
        rc = cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
        goto done;
    }
    if ((rc = make_comms(&a, comms, &n_local, &world)) != 0) goto done;
    /* trainers made one after another: creation reads the model's tables */
    for (int i = 0; i < n_local; i++) {
        teexec_train_options o = a.opt;
        o.comm = comms[i];
        runs[i] = (rank_run){.a = &a, .m = m, .ds = ds, .stream = &stream,
                             .rank = comms[i] ? teexec_comm_rank(comms[i]) : 0, .world = world,
                             .keep = n_local > 1};
        st = teexec_trainer_create(m, &o, &runs[i].tr);
        if (st) {
            rc = cli_report(st, a.model);
            goto done;
        }
    }
    if (n_local == 1) {
        rc = train_loop(&runs[0]);
    } else {
        pthread_t *th = calloc((size_t)(n_local > 1 ? n_local : 1), sizeof(*th));
        if (!th) {
            rc = cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
            goto done;
        }
        int started = 0;
        for (; started < n_local; started++)
            if (pthread_create(&th[started], NULL, rank_thread, &runs[started]) != 0) break;
        if (started < n_local) {
            /* the started ranks would wait for the missing ones: fail them now */
            teexec_comm_abort(comms[0], "the launcher could not start every rank's thread");
            rc = cli_fail(CLI_EXIT_BAD_INPUT, CMD, "cannot start %d threads", n_local);
        }
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        free(th);
        /* one report: the first rank that failed on its own (the others
         * failed because it aborted the group), else rank 0's */
        int culprit = -1;
        for (int i = 0; i < started; i++)
            if (runs[i].st && teexec_status_code(runs[i].st) != TEEXEC_ERR_COMM && culprit < 0)
                culprit = i;
        for (int i = 0; i < started && culprit < 0; i++)
            if (runs[i].st) culprit = i;
        if (culprit >= 0) {
            rc = cli_report(runs[culprit].st, runs[culprit].what);
            runs[culprit].st = NULL;
        }
        for (int i = 0; i < started; i++) {
            teexec_status_destroy(runs[i].st);
            if (!rc) rc = runs[i].rc;
        }
    }
done:
    for (int i = 0; runs && i < n_local; i++) teexec_trainer_destroy(runs[i].tr);
    for (int i = 0; comms && i < n_local; i++) teexec_comm_destroy(comms[i]);
    free(runs);
    free(comms);
    teexec_tensor_destroy(tokens);
    teexec_dataset_destroy(ds);
    teexec_model_destroy(m);
    return rc;
}
