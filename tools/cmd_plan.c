/*
 * cmd_plan.c - `teexec plan` and `teexec convert`: how a model is lowered,
 * grouped, fused and quantized, and writing that as a te.ops model.
 * Both parse the same planning options into a teexec_plan_options.
 */
#include "cli_common.h"
#include "commands.h"
#include "teexec/teexec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char recipe_help[] =
    "  --recipe R        none (default), fp8-delayed, fp8-current, fp8-block, mxfp8,\n"
    "                    nvfp4. Gradients as TE's recipes: E5M2 (HYBRID) for\n"
    "                    fp8-delayed and fp8-current (:e4m3 for E4M3), E4M3 for\n"
    "                    mxfp8 (:hybrid for E5M2). Then ,key=value options:\n"
    "                    history=N (fp8-delayed amax history),\n"
    "                    2d=0|1 (2-D weight blocks), rht=0|1 and sr=0|1 (nvfp4's\n"
    "                    Hadamard transform and stochastic rounding), pow2=0|1\n"
    "                    (power-of-two scales: fp8-block default 1, fp8-current 0),\n"
    "                    dtype=bf16|fp16|fp32 (compute dtype)\n";

static void plan_usage(FILE *f)
{
    fprintf(f, "usage: teexec plan MODEL.onnx [--train] [--recipe R] [--device D]\n"
               "                  [--deterministic] [--dim NAME=VALUE]... [--explain | --json | --dot]\n"
               "\n"
               "Lowers the model (PyTorch-exported subgraphs -> TE ops), splits it into\n"
               "fuser groups and shows, per group, the forward and (with --train) the\n"
               "backward kernel layout, the quantization of every GEMM operand and the\n"
               "memory plan's peaks. Nothing is run.\n"
               "\n"
               "options:\n"
               "  --train           plan a training step (forward and backward)\n"
               "%s"
               "  --device D        cpu (default), sm_90 (H100/H200), sm_100 (B200)\n"
               "  --deterministic   only kernels whose results do not depend on scheduling\n"
               "  --dim NAME=VALUE  value of a symbolic input dim (default 1)\n"
               "  --explain         also list every fusion and pattern not used, with why\n"
               "  --json            print one JSON object (includes the --explain details)\n"
               "  --dot             print a Graphviz graph of the plan: a cluster per group\n"
               "                    with its forward and backward layouts side by side,\n"
               "                    each quantized GEMM operand an edge labelled with its\n"
               "                    format, each declined fusion a note with its reason\n"
               "                    (render: teexec plan M.onnx --train --dot | dot -Tsvg)\n"
               "  -h, --help        show this help\n",
            recipe_help);
}

static void convert_usage(FILE *f)
{
    fprintf(f, "usage: teexec convert IN.onnx OUT.onnx [--recipe R] [--train] [--device D]\n"
               "                     [--dim NAME=VALUE]... [--external-data]\n"
               "                     [--kv-cache BATCH,CAPACITY]\n"
               "\n"
               "Writes IN lowered to TE ops (domain te.ops), each fuser group as a\n"
               "model-local function in domain te.fused, the plan's quantization as\n"
               "attributes (quant_input, quant_weight, quant_grad_output), the original\n"
               "initializer names kept (weights stored transposed say so in\n"
               "weight_layout). The output loads in any ONNX tool; converting it again\n"
               "writes the same bytes. OUT is replaced atomically. A model over\n"
               "protobuf's 2 GiB keeps its weights in OUT.data beside it (ONNX external\n"
               "data, written first).\n"
               "\n"
               "options:\n"
               "%s"
               "  --train           record backward layouts too\n"
               "  --device D        cpu (default), sm_90, sm_100\n"
               "  --dim NAME=VALUE  value of a symbolic input dim (default 1)\n"
               "  --external-data   write every initializer of 64 KiB and more to OUT.data\n"
               "                    even when the model would fit one file\n"
               "  --kv-cache BATCH,CAPACITY\n"
               "                    a decoder exported with past_key_values: write its\n"
               "                    attention in DotProductAttention's cache mode, the\n"
               "                    caches state a session keeps (kv_cache.N.key/value,\n"
               "                    [BATCH, CAPACITY, h_kv, d]) appended in place, an input\n"
               "                    cache_len [batch] for the tokens each row holds; past,\n"
               "                    present and attention_mask go (teexec generate runs it)\n"
               "  --tensor-parallel N\n"
               "                    instead: write N rank models OUT.rank<R>.onnx of IN (a\n"
               "                    te.ops model), each Linear -> [Bias, activation]* ->\n"
               "                    Linear split column- then row-parallel with an AllReduce\n"
               "                    after it (docs/multi-gpu.md); run each rank's session\n"
               "                    with a communicator\n"
               "  -h, --help        show this help\n",
            recipe_help);
}

/* `convert IN OUT --tensor-parallel N`: OUT.rank<R>.onnx for every rank
 * ("OUT" without its .onnx suffix). */
static int convert_tp(const char *in, const char *out, long n)
{
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(in, NULL, &m);
    if (st) return cli_report(st, in);
    size_t len = strlen(out);
    int stem = (int)(len > 5 && !strcmp(out + len - 5, ".onnx") ? len - 5 : len);
    int rc = CLI_EXIT_OK;
    for (long r = 0; r < n && rc == CLI_EXIT_OK; r++) {
        char path[4200];
        if (snprintf(path, sizeof path, "%.*s.rank%ld.onnx", stem, out, r) >= (int)sizeof path) {
            rc = cli_usage_error("convert", "OUT is too long");
            break;
        }
        int split = 0;
        st = teexec_model_split_tensor_parallel(m, (int)n, (int)r, path, &split);
        if (st) rc = cli_report(st, in);
        else printf("%s: rank %ld of %ld, %d Linear pair%s split\n", path, r, n, split,
                    split == 1 ? "" : "s");
    }
    teexec_model_destroy(m);
    if (rc == CLI_EXIT_OK && (fflush(stdout) != 0 || ferror(stdout)))
        return cli_fail(CLI_EXIT_BAD_INPUT, "convert", "could not write the output");
    return rc;
}

/* Applies one planning option at argv[*i]; returns 1 when consumed, 0 when
 * not a planning option, or -(exit status) on error. */
static int plan_option(const char *cmd, teexec_plan_options *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    teexec_status *st = NULL;
    if (strcmp(a, "--train") == 0) {
        st = teexec_plan_options_set_training(o, 1);
    } else if (strcmp(a, "--deterministic") == 0) {
        st = teexec_plan_options_set_deterministic(o, 1);
    } else if (strcmp(a, "--recipe") == 0 || strcmp(a, "--device") == 0 ||
               strcmp(a, "--dim") == 0) {
        if (*i + 1 >= argc) return -cli_usage_error(cmd, "%s needs a value", a);
        const char *v = argv[++*i];
        if (strcmp(a, "--recipe") == 0) {
            st = teexec_plan_options_set_recipe(o, v);
        } else if (strcmp(a, "--device") == 0) {
            st = teexec_plan_options_set_device(o, v);
        } else {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1])
                return -cli_usage_error(cmd, "--dim expects NAME=VALUE, not '%s'", v);
            char name[256];
            size_t n = (size_t)(eq - v);
            if (n >= sizeof name) return -cli_usage_error(cmd, "--dim name too long");
            memcpy(name, v, n);
            name[n] = 0;
            errno = 0;
            char *end = NULL;
            long long val = strtoll(eq + 1, &end, 10);
            if (errno || *end || val < 0)
                return -cli_usage_error(cmd, "--dim %s: '%s' is not a non-negative integer", name,
                                        eq + 1);
            st = teexec_plan_options_set_dim(o, name, (int64_t)val);
        }
        if (st) {
            /* a bad recipe or device name is a usage error */
            fprintf(stderr, "teexec: %s: %s (see 'teexec %s --help')\n", cmd,
                    teexec_status_message(st), cmd);
            teexec_status_destroy(st);
            return -CLI_EXIT_USAGE;
        }
        return 1;
    } else {
        return 0;
    }
    if (st) return -cli_report(st, NULL);
    return 1;
}

/* Parses the arguments both commands share into o and the positional
 * arguments (max_pos of them); --explain / --json / --dot only where those flags
 * are given (plan). Returns -1 after printing the help, otherwise an exit
 * status: CLI_EXIT_OK to go on. */
static int parse_args(const char *cmd, int argc, char **argv, void (*usage)(FILE *),
                      teexec_plan_options *o, const char **pos, int max_pos, int *explain,
                      int *json, int *dot)
{
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        }
        int r = plan_option(cmd, o, argc, argv, &i);
        if (r < 0) return -r;
        if (r > 0) continue;
        if (explain && strcmp(a, "--explain") == 0) *explain = 1;
        else if (json && strcmp(a, "--json") == 0) *json = 1;
        else if (dot && strcmp(a, "--dot") == 0) *dot = 1;
        else if (a[0] == '-' && a[1]) return cli_usage_error(cmd, "unknown option '%s'", a);
        else if (n_pos < max_pos) pos[n_pos++] = a;
        else return cli_usage_error(cmd, "unexpected argument '%s'", a);
    }
    if (n_pos < max_pos)
        return cli_usage_error(cmd, max_pos == 1 ? "no model file given"
                                                 : "expected IN.onnx and OUT.onnx");
    return CLI_EXIT_OK;
}

int cmd_plan(int argc, char **argv)
{
    const char *path = NULL;
    int explain = 0, json = 0, dot = 0;
    teexec_plan_options *o = NULL;
    teexec_status *st = teexec_plan_options_create(&o);
    if (st) return cli_report(st, NULL);
    int rc = parse_args("plan", argc, argv, plan_usage, o, &path, 1, &explain, &json, &dot);
    if (rc == CLI_EXIT_OK && dot && json)
        rc = cli_usage_error("plan", "--dot and --json are different outputs: give one");
    if (rc != CLI_EXIT_OK) {
        teexec_plan_options_destroy(o);
        return rc < 0 ? CLI_EXIT_OK : rc;
    }
    teexec_model *m = NULL;
    st = teexec_model_load_file(path, NULL, &m);
    char *text = NULL;
    if (!st)
        st = teexec_model_plan(m, o,
                               dot    ? TEEXEC_PLAN_DOT
                               : json ? TEEXEC_PLAN_JSON
                                      : explain ? TEEXEC_PLAN_EXPLAIN : TEEXEC_PLAN_TEXT,
                               &text);
    teexec_plan_options_destroy(o);
    teexec_model_destroy(m);
    if (st) return cli_report(st, path);
    fputs(text, stdout);
    teexec_string_free(text);
    if (fflush(stdout) != 0 || ferror(stdout))
        return cli_fail(CLI_EXIT_BAD_INPUT, "plan", "could not write the output");
    return CLI_EXIT_OK;
}

int cmd_convert(int argc, char **argv)
{
    /* --tensor-parallel N is convert's own (the planning options are shared
     * with plan): taken out of argv before they are parsed */
    long tp = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tensor-parallel") != 0) continue;
        char *end = NULL;
        tp = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
        if (i + 1 >= argc || !end || *end || tp < 2 || tp > 4096)
            return cli_usage_error("convert", "--tensor-parallel needs a rank count from 2 to "
                                              "4096");
        for (int j = i; j + 2 < argc; j++) argv[j] = argv[j + 2];
        argc -= 2;
        i--;
    }
    /* --external-data too */
    bool external = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--external-data") != 0) continue;
        external = true;
        for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
        argc--;
        i--;
    }
    /* --kv-cache BATCH,CAPACITY */
    long long kv_batch = 0, kv_cap = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kv-cache") != 0) continue;
        char tail = 0;
        if (i + 1 >= argc ||
            sscanf(argv[i + 1], "%lld,%lld%c", &kv_batch, &kv_cap, &tail) != 2 || kv_batch < 1 ||
            kv_cap < 1 || kv_batch > (1ll << 20) || kv_cap > (1ll << 24))
            return cli_usage_error("convert", "--kv-cache needs BATCH,CAPACITY, two positive "
                                              "counts (batch <= 2^20, capacity <= 2^24)");
        for (int j = i; j + 2 < argc; j++) argv[j] = argv[j + 2];
        argc -= 2;
        i--;
    }
    const char *files[2] = {NULL, NULL};
    teexec_plan_options *o = NULL;
    teexec_status *st = teexec_plan_options_create(&o);
    if (!st && external) st = teexec_plan_options_set_external_data(o, 1);
    if (!st && kv_cap) st = teexec_plan_options_set_kv_cache(o, kv_batch, kv_cap);
    if (st) {
        teexec_plan_options_destroy(o);
        return cli_report(st, NULL);
    }
    int rc = parse_args("convert", argc, argv, convert_usage, o, files, 2, NULL, NULL, NULL);
    if (rc != CLI_EXIT_OK) {
        teexec_plan_options_destroy(o);
        return rc < 0 ? CLI_EXIT_OK : rc;
    }
    const char *in = files[0], *out = files[1];
    if (tp) {
        teexec_plan_options_destroy(o);
        return convert_tp(in, out, tp);
    }
    teexec_model *m = NULL;
    st = teexec_model_load_file(in, NULL, &m);
    char *summary = NULL;
    if (!st) st = teexec_model_convert(m, o, out, &summary);
    teexec_plan_options_destroy(o);
    teexec_model_destroy(m);
    if (st) return cli_report(st, in);
    printf("%s: %s", out, summary ? summary : "written\n");
    teexec_string_free(summary);
    if (fflush(stdout) != 0 || ferror(stdout))
        return cli_fail(CLI_EXIT_BAD_INPUT, "convert", "could not write the output");
    return CLI_EXIT_OK;
}
