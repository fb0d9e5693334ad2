/*
 * cmd_generate.c - `teexec generate MODEL.onnx --prompt-ids 1,2,3 | --prompt
 * FILE.npy --max-new-tokens N [options]`: a prompt through a generator
 * (teexec.h, "Generation"): prefill, then one decode step per new token;
 * prints each sequence's generated ids, and with --json also the timings.
 *
 * Timing: the wall clock around each call. prefill_ms is the first compute
 * (the prompt's run); each decode step chooses a token and runs the model
 * on the token chosen before it, so N new tokens take N steps holding N - 1
 * one-token runs (the last token chosen is never run). per_token_ms is the
 * decode time over those runs, tokens_per_s the batch's new tokens over the
 * decode time; median_step_ms / max_step_ms the steps that ran the model
 * (the median: the steady step; the maximum: one that planned a shape).
 *
 * Uses only the public API. Single-threaded.
 */
#include "cli_common.h"
#include "commands.h"
#include "exec_options.h"
#include "json_out.h"
#include "teexec/teexec.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "generate"
#define MAX_LIST 4096

static void usage(FILE *f)
{
    fprintf(f,
            "usage: teexec generate MODEL.onnx (--prompt-ids 1,2,3 | --prompt FILE.npy)\n"
            "                       --max-new-tokens N [options]\n"
            "\n"
            "Runs a decoder language model on a prompt, then generates N tokens, one\n"
            "step each: the model runs on the new tokens only when it has\n"
            "past_key_values inputs and present outputs (the Optimum / Hugging Face\n"
            "KV-cache convention), else on the whole sequence every step. Prints the\n"
            "generated ids of each sequence on one line, space-separated.\n"
            "\n"
            "The prompt: --prompt-ids, or an int64/int32 .npy of [T] or [B, T] (one\n"
            "sequence per row; a row may end in -1s, which are not part of it, so rows\n"
            "of different lengths fit).\n"
            "\n"
            "options:\n"
            "  --device auto|cpu|cuda   where to run (default auto)\n"
            "  --recipe R               quantization of the Linears (see 'teexec run --help')\n"
            "  --dtype fp32|bf16|fp16   compute dtype (CUDA; default: the model's)\n"
            "  --max-new-tokens N       tokens to generate per sequence, 1..1000000\n"
            "  --batch B                sequences: the prompt's rows repeated in turn up to\n"
            "                           B (default: the prompt's rows)\n"
            "  --temperature T          0 (default) is greedy; > 0 samples\n"
            "  --top-k K                keep the K most likely tokens (default 0: all)\n"
            "  --top-p P                keep the smallest set reaching P, in (0, 1]\n"
            "                           (default 1: all)\n"
            "  --seed S                 seed of the sampler (default 0); the same seed\n"
            "                           gives the same tokens\n"
            "  --stop-ids 2,7           a sequence stops after one of these ids (which is\n"
            "                           printed); generation ends when all have stopped\n"
            "  --mode auto|recompute|kv how to run the model (default auto: kv when the\n"
            "                           model has a cache)\n"
            "  --max-length L           tokens (KV mode: cache columns) per sequence\n"
            "                           (default: prompt + new tokens)\n"
            "  --past-bucket N          KV mode: feed the past padded (masked) to N\n"
            "                           columns, doubled as it grows, so decode steps\n"
            "                           repeat one input shape (default 64 where the\n"
            "                           model allows it; 1: no padding)\n"
            "  --profile                time every fuser group and kernel of the runs\n"
            "                           (GPU; CUDA graphs off) and print the table\n"
            "  --threads N              threads for the CPU GEMM kernels\n"
            "  --json                   print one JSON object: the ids, stops and timings\n"
            "                           (prefill_ms, decode_ms, per_token_ms, median_step_ms,\n"
            "                           max_step_ms, tokens_per_s)\n"
            "  -h, --help               show this help\n");
}

typedef struct gen_args {
    const char *model;
    exec_options ex;
    const char *prompt_ids, *prompt_file, *stop_ids;
    long max_new, batch, max_length, top_k, threads, past_bucket;
    double temperature, top_p;
    uint64_t seed;
    teexec_generate_mode mode;
    bool json;
} gen_args;

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* "1,2,3" -> ids; false on a bad or negative entry or more than MAX_LIST. */
static bool parse_ids(const char *s, int64_t *ids, size_t *n)
{
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v < 0 || *n == MAX_LIST) return false;
        ids[(*n)++] = v;
        if (*end == ',') end++;
        else if (*end) return false;
        p = end;
    }
    return *n > 0;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, gen_args *a)
{
    memset(a, 0, sizeof(*a));
    exec_options_init(&a->ex);
    a->top_p = 1.0;
    a->mode = TEEXEC_GENERATE_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int rc;
        if (cli_model_command_arg(CMD, arg, usage, &a->model, &a->json, &rc)) {
            if (rc >= 0) return rc;
            continue;
        }
        int ex = exec_options_parse(&a->ex, CMD, argc, argv, &i);
        if (ex < 0) return -ex;
        if (ex > 0) {
            if (a->ex.deterministic || a->ex.no_graphs)
                return cli_usage_error(CMD, "%s is not an option of generate", arg);
            continue;
        }
        static const char *const valued[] = {
            "--prompt-ids", "--prompt", "--max-new-tokens", "--batch", "--temperature",
            "--top-k", "--top-p", "--seed", "--stop-ids", "--mode", "--max-length", "--threads",
            "--past-bucket"};
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
        long l = 0;
        if (strcmp(name, "--prompt-ids") == 0) {
            a->prompt_ids = v;
        } else if (strcmp(name, "--prompt") == 0) {
            a->prompt_file = v;
        } else if (strcmp(name, "--stop-ids") == 0) {
            a->stop_ids = v;
        } else if (strcmp(name, "--max-new-tokens") == 0) {
            if (!parse_long(v, 1, 1000000, &a->max_new))
                return cli_usage_error(CMD, "--max-new-tokens must be 1..1000000, not '%s'", v);
        } else if (strcmp(name, "--batch") == 0) {
            if (!parse_long(v, 1, 65536, &a->batch))
                return cli_usage_error(CMD, "--batch must be 1..65536, not '%s'", v);
        } else if (strcmp(name, "--max-length") == 0) {
            if (!parse_long(v, 1, 1L << 30, &a->max_length))
                return cli_usage_error(CMD, "--max-length must be 1..2^30, not '%s'", v);
        } else if (strcmp(name, "--top-k") == 0) {
            if (!parse_long(v, 0, 1L << 30, &a->top_k))
                return cli_usage_error(CMD, "--top-k must be 0..2^30, not '%s'", v);
        } else if (strcmp(name, "--past-bucket") == 0) {
            if (!parse_long(v, 1, 1L << 20, &a->past_bucket))
                return cli_usage_error(CMD, "--past-bucket must be 1..2^20, not '%s'", v);
        } else if (strcmp(name, "--threads") == 0) {
            if (!parse_long(v, 0, 4096, &a->threads))
                return cli_usage_error(CMD, "--threads must be 0..4096, not '%s'", v);
        } else if (strcmp(name, "--seed") == 0) {
            if (!parse_long(v, 0, LONG_MAX, &l))
                return cli_usage_error(CMD, "--seed must be a non-negative integer, not '%s'", v);
            a->seed = (uint64_t)l;
        } else if (strcmp(name, "--temperature") == 0) {
            if (!parse_double(v, &a->temperature) || a->temperature < 0)
                return cli_usage_error(CMD, "--temperature must be >= 0, not '%s'", v);
        } else if (strcmp(name, "--top-p") == 0) {
            if (!parse_double(v, &a->top_p) || !(a->top_p > 0 && a->top_p <= 1))
                return cli_usage_error(CMD, "--top-p must be in (0, 1], not '%s'", v);
        } else if (strcmp(name, "--mode") == 0) {
            if (strcmp(v, "auto") == 0) a->mode = TEEXEC_GENERATE_AUTO;
            else if (strcmp(v, "recompute") == 0) a->mode = TEEXEC_GENERATE_RECOMPUTE;
            else if (strcmp(v, "kv") == 0) a->mode = TEEXEC_GENERATE_KV_CACHE;
            else return cli_usage_error(CMD, "--mode must be auto, recompute or kv, not '%s'", v);
        }
    }
    if (!a->model) return cli_usage_error(CMD, "no model given");
    if (!a->prompt_ids == !a->prompt_file)
        return cli_usage_error(CMD, "give exactly one of --prompt-ids and --prompt");
    if (!a->max_new) return cli_usage_error(CMD, "--max-new-tokens is required");
    return -1;
}

/* The prompt rows: ids (rows x cols, -1 after a row's end) and lengths. */
typedef struct prompt {
    int64_t *ids;
    size_t rows, cols, *len;
} prompt;

static void prompt_free(prompt *p)
{
    free(p->ids);
    free(p->len);
}

static int load_prompt(const gen_args *a, prompt *p)
{
    memset(p, 0, sizeof(*p));
    if (a->prompt_ids) {
        p->ids = malloc(MAX_LIST * sizeof(*p->ids));
        p->len = malloc(sizeof(*p->len));
        if (!p->ids || !p->len) return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
        size_t n = 0;
        if (!parse_ids(a->prompt_ids, p->ids, &n))
            return cli_usage_error(CMD, "--prompt-ids must be a comma-separated list of ids >= 0 "
                                   "(at most %d), not '%s'", MAX_LIST, a->prompt_ids);
        p->rows = 1;
        p->cols = n;
        p->len[0] = n;
        return -1;
    }
    teexec_tensor *t = NULL;
    teexec_status *st = teexec_tensor_load_file(a->prompt_file, &t);
    if (st) return cli_report(st, a->prompt_file);
    teexec_dtype dt = teexec_tensor_dtype(t);
    int32_t rank = teexec_tensor_rank(t);
    const int64_t *d = teexec_tensor_dims(t);
    if ((dt != TEEXEC_DTYPE_INT64 && dt != TEEXEC_DTYPE_INT32) || rank < 1 || rank > 2 ||
        teexec_tensor_element_count(t) == 0) {
        teexec_tensor_destroy(t);
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "%s: the prompt must be a non-empty int64 or "
                        "int32 array of [T] or [B, T]", a->prompt_file);
    }
    p->rows = rank == 2 ? (size_t)d[0] : 1;
    p->cols = (size_t)d[rank - 1];
    p->ids = malloc(p->rows * p->cols * sizeof(*p->ids));
    p->len = calloc(p->rows, sizeof(*p->len));
    if (!p->ids || !p->len) {
        teexec_tensor_destroy(t);
        return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
    }
    const void *data = teexec_tensor_data_const(t);
    for (size_t i = 0; i < p->rows * p->cols; i++)
        p->ids[i] = dt == TEEXEC_DTYPE_INT64 ? ((const int64_t *)data)[i]
                                             : ((const int32_t *)data)[i];
    teexec_tensor_destroy(t);
    for (size_t r = 0; r < p->rows; r++) {
        size_t n = 0;
        while (n < p->cols && p->ids[r * p->cols + n] >= 0) n++;
        for (size_t c = n; c < p->cols; c++)
            if (p->ids[r * p->cols + c] != -1)
                return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "%s: row %zu: id %lld at %zu; only -1 "
                                "may follow a row's end", a->prompt_file, r,
                                (long long)p->ids[r * p->cols + c], c);
        if (!n)
            return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "%s: row %zu is empty", a->prompt_file, r);
        p->len[r] = n;
    }
    return -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *mode_name(teexec_generate_mode m)
{
    return m == TEEXEC_GENERATE_KV_CACHE ? "kv" : "recompute";
}

int cmd_generate(int argc, char **argv)
{
    gen_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    int64_t *stops = malloc(MAX_LIST * sizeof(*stops));
    if (!stops) return cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
    size_t n_stops = 0;
    if (a.stop_ids && !parse_ids(a.stop_ids, stops, &n_stops)) {
        free(stops);
        return cli_usage_error(CMD, "--stop-ids must be a comma-separated list of ids >= 0");
    }
    prompt p;
    rc = load_prompt(&a, &p);
    if (rc >= 0) {
        prompt_free(&p);
        free(stops);
        return rc;
    }
    size_t batch = a.batch ? (size_t)a.batch : p.rows, longest = 0;
    for (size_t r = 0; r < p.rows; r++)
        if (p.len[r] > longest) longest = p.len[r];

    teexec_model *model = NULL;
    teexec_generator *g = NULL;
    int64_t *out = calloc(batch * (size_t)a.max_new, sizeof(*out));
    int64_t *step_ids = calloc(batch, sizeof(*step_ids));
    size_t *made = calloc(batch, sizeof(*made));
    bool *stopped = calloc(batch, sizeof(*stopped));
    double *step_ms = calloc((size_t)a.max_new, sizeof(*step_ms));
    bool fail = !out || !step_ids || !made || !stopped || !step_ms;
    teexec_status *st = fail ? NULL : teexec_model_load_file(a.model, NULL, &model);
    if (fail) {
        rc = cli_fail(CLI_EXIT_BAD_INPUT, CMD, "out of memory");
        goto done;
    }
    if (st) {
        rc = cli_report(st, a.model);
        goto done;
    }
    teexec_generator_options o;
    teexec_generator_options_init(&o);
    o.device = a.ex.device;
    o.recipe = a.ex.recipe;
    o.dtype = a.ex.dtype;
    o.threads = (int)a.threads;
    o.mode = a.mode;
    o.max_batch = batch;
    o.max_length = a.max_length ? (size_t)a.max_length : longest + (size_t)a.max_new;
    o.temperature = a.temperature;
    o.top_k = (uint32_t)a.top_k;
    o.top_p = a.top_p;
    o.seed = a.seed;
    o.past_bucket = (size_t)a.past_bucket;
    o.profile = a.ex.profile;
    st = teexec_generator_create(model, &o, &g);
    if (st && o.max_length && !a.max_length && teexec_status_code(st) == TEEXEC_ERR_INVALID_ARGUMENT &&
        strstr(teexec_status_message(st), "fixed sequence")) {
        /* a fixed-length model: its own length bounds the tokens */
        teexec_status_destroy(st);
        o.max_length = 0;
        st = teexec_generator_create(model, &o, &g);
    }
    if (st) {
        rc = cli_report(st, a.model);
        goto done;
    }
    for (size_t r = 0; r < batch && !st; r++) {
        size_t src = r % p.rows;
        st = teexec_generator_append(g, r, p.ids + src * p.cols, p.len[src]);
    }
    double t0 = now_ms();
    if (!st) st = teexec_generator_compute(g);
    double t1 = now_ms();
    size_t steps = 0, live = batch;
    while (!st && steps < (size_t)a.max_new && live) {
        double ts = now_ms();
        st = teexec_generator_step(g, step_ids, batch);
        step_ms[steps] = now_ms() - ts;
        for (size_t r = 0; !st && r < batch; r++) {
            if (stopped[r]) continue;
            out[r * (size_t)a.max_new + made[r]++] = step_ids[r];
            for (size_t k = 0; k < n_stops; k++)
                if (step_ids[r] == stops[k]) stopped[r] = true;
            if (stopped[r]) live--;
        }
        if (!st) steps++;
    }
    double t2 = now_ms();
    if (st) {
        rc = cli_report(st, a.model);
        goto done;
    }
    double prefill = t1 - t0, decode = t2 - t1;
    size_t runs = steps > 1 ? steps - 1 : 0, new_tokens = 0;
    for (size_t r = 0; r < batch; r++) new_tokens += made[r];
    if (a.json) {
        json_out j;
        json_init(&j, stdout);
        json_begin_object(&j);
        json_key(&j, "model");
        json_string(&j, a.model);
        json_key(&j, "device");
        json_string(&j, teexec_generator_device_name(g));
        json_key(&j, "mode");
        json_string(&j, mode_name(teexec_generator_mode(g)));
        json_key(&j, "batch");
        json_uint(&j, batch);
        json_key(&j, "prompt_tokens");
        json_begin_array(&j);
        for (size_t r = 0; r < batch; r++) json_uint(&j, p.len[r % p.rows]);
        json_end_array(&j);
        json_key(&j, "max_new_tokens");
        json_int(&j, a.max_new);
        json_key(&j, "sequences");
        json_begin_array(&j);
        for (size_t r = 0; r < batch; r++) {
            json_begin_array(&j);
            for (size_t k = 0; k < made[r]; k++) json_int(&j, out[r * (size_t)a.max_new + k]);
            json_end_array(&j);
        }
        json_end_array(&j);
        json_key(&j, "stopped");
        json_begin_array(&j);
        for (size_t r = 0; r < batch; r++) json_bool(&j, stopped[r]);
        json_end_array(&j);
        json_key(&j, "steps");
        json_uint(&j, steps);
        json_key(&j, "model_runs");
        json_uint(&j, teexec_generator_run_count(g));
        json_key(&j, "plans");
        json_uint(&j, teexec_session_plan_count(teexec_generator_session(g)));
        json_key(&j, "prefill_ms");
        json_double(&j, prefill);
        json_key(&j, "decode_ms");
        json_double(&j, decode);
        json_key(&j, "per_token_ms");
        json_double(&j, runs ? decode / (double)runs : NAN);
        json_key(&j, "tokens_per_s");
        json_double(&j, decode > 0 ? (double)new_tokens / (decode / 1e3) : NAN);
        /* the steps that run the model (all but the first, whose token the
         * prefill computed): the median is the steady decode step, the
         * maximum shows a step that planned a new shape */
        double med = NAN, mx = NAN;
        if (steps > 1) {
            qsort(step_ms + 1, steps - 1, sizeof(*step_ms), cmp_double);
            med = step_ms[1 + (steps - 1) / 2];
            mx = step_ms[steps - 1];
        }
        json_key(&j, "median_step_ms");
        json_double(&j, med);
        json_key(&j, "max_step_ms");
        json_double(&j, mx);
        json_end_object(&j);
        json_finish(&j);
    } else {
        for (size_t r = 0; r < batch; r++) {
            for (size_t k = 0; k < made[r]; k++)
                printf("%s%lld", k ? " " : "", (long long)out[r * (size_t)a.max_new + k]);
            printf("\n");
        }
    }
    rc = CLI_EXIT_OK;
    if (a.ex.profile) {
        char *text = NULL;
        const teexec_session *gs = teexec_generator_session(g);
        st = teexec_session_profile(gs, &text);
        rc = exec_options_print_profile(CMD, teexec_session_device_name(gs), st, text);
        st = NULL;
    }
done:
    teexec_generator_destroy(g);
    teexec_model_destroy(model);
    prompt_free(&p);
    free(out);
    free(step_ids);
    free(step_ms);
    free(made);
    free(stopped);
    free(stops);
    return rc;
}
