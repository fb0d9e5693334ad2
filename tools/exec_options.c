/*
 * exec_options.c - the execution options shared by run, train and bench
 * (exec_options.h).
 */
#include "exec_options.h"

#include "cli_common.h"

#include <stdlib.h>
#include <string.h>

const char exec_options_help[] =
    "  --device auto|cpu|cuda   where to run (default auto: the GPU when one is\n"
    "                           usable, else the CPU)\n"
    "  --recipe R               quantization of the Linears: none (default),\n"
    "                           fp8-delayed, fp8-current, fp8-block, mxfp8,\n"
    "                           nvfp4; grads E5M2 for fp8-delayed/-current as in\n"
    "                           TE (:e4m3, :hybrid: see 'teexec plan --help').\n"
    "                           The CPU runs every recipe for\n"
    "                           inference and training (exact quantizers, FP32\n"
    "                           GEMMs on the dequantized operands)\n"
    "  --dtype fp32|bf16|fp16   compute dtype of float activations and parameters\n"
    "                           (default: the model's); inputs and outputs keep\n"
    "                           the model's dtypes\n"
    "  --deterministic          only kernels whose results do not depend on\n"
    "                           scheduling (also: TEEXEC_DETERMINISTIC=1)\n"
    "  --no-graphs              launch every kernel each run instead of\n"
    "                           replaying a captured CUDA graph\n"
    "  --profile                time every fuser group and kernel and print the\n"
    "                           table to stderr after the runs: on the GPU summed\n"
    "                           over the runs (the first call's one-time setup\n"
    "                           left out), with the device memory used and the\n"
    "                           fusions not run, and why; on the CPU the wall time\n"
    "                           of each fuser group and standard node of one run\n"
    "                           (run: the last; bench: one more, untimed)\n";

void exec_options_init(exec_options *o)
{
    memset(o, 0, sizeof(*o));
    o->device = TEEXEC_DEVICE_AUTO;
    o->dtype = TEEXEC_DTYPE_UNDEFINED;
}

static bool parse_dtype(const char *v, teexec_dtype *out)
{
    static const struct {
        const char *name;
        teexec_dtype dtype;
    } names[] = {
        {"fp32", TEEXEC_DTYPE_FLOAT},     {"float32", TEEXEC_DTYPE_FLOAT},
        {"float", TEEXEC_DTYPE_FLOAT},    {"bf16", TEEXEC_DTYPE_BFLOAT16},
        {"bfloat16", TEEXEC_DTYPE_BFLOAT16}, {"fp16", TEEXEC_DTYPE_FLOAT16},
        {"float16", TEEXEC_DTYPE_FLOAT16}, {"half", TEEXEC_DTYPE_FLOAT16},
    };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        if (strcmp(v, names[k].name) == 0) {
            *out = names[k].dtype;
            return true;
        }
    return false;
}

/* Checks a recipe string with the library's parser, so a typo is a usage
 * error before a (possibly large) model is loaded. */
static int check_recipe(const char *cmd, const char *v)
{
    teexec_plan_options *po = NULL;
    teexec_status *st = teexec_plan_options_create(&po);
    if (!st) st = teexec_plan_options_set_recipe(po, v);
    teexec_plan_options_destroy(po);
    if (!st) return 0;
    if (teexec_status_code(st) != TEEXEC_ERR_INVALID_ARGUMENT) return -cli_report(st, NULL);
    int rc = cli_usage_error(cmd, "--recipe: %s", teexec_status_message(st));
    teexec_status_destroy(st);
    return -rc;
}

int exec_options_parse(exec_options *o, const char *cmd, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    if (strcmp(arg, "--deterministic") == 0) {
        o->deterministic = true;
        return 1;
    }
    if (strcmp(arg, "--no-graphs") == 0) {
        o->no_graphs = true;
        return 1;
    }
    if (strcmp(arg, "--profile") == 0) {
        o->profile = true;
        return 1;
    }
    static const char *const valued[] = {"--device", "--recipe", "--dtype"};
    size_t namelen = strcspn(arg, "=");
    const char *name = NULL;
    for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
        if (strlen(valued[k]) == namelen && strncmp(valued[k], arg, namelen) == 0) name = valued[k];
    if (!name) return 0;
    const char *v;
    if (arg[namelen] == '=') {
        v = arg + namelen + 1;
    } else {
        if (*i + 1 >= argc) return -cli_usage_error(cmd, "%s needs a value", name);
        v = argv[++*i];
    }
    if (strcmp(name, "--device") == 0) {
        if (strcmp(v, "auto") == 0) o->device = TEEXEC_DEVICE_AUTO;
        else if (strcmp(v, "cpu") == 0) o->device = TEEXEC_DEVICE_CPU;
        else if (strcmp(v, "cuda") == 0 || strcmp(v, "gpu") == 0) o->device = TEEXEC_DEVICE_CUDA;
        else return -cli_usage_error(cmd, "--device must be auto, cpu or cuda, not '%s'", v);
    } else if (strcmp(name, "--dtype") == 0) {
        if (!parse_dtype(v, &o->dtype))
            return -cli_usage_error(cmd, "--dtype must be fp32, bf16 or fp16, not '%s'", v);
    } else {
        int rc = check_recipe(cmd, v);
        if (rc) return rc;
        o->recipe = v;
    }
    return 1;
}

bool exec_options_deterministic(const exec_options *o)
{
    const char *env = getenv("TEEXEC_DETERMINISTIC");
    return o->deterministic || (env && strcmp(env, "1") == 0);
}

teexec_status *exec_options_apply_session(const exec_options *o, teexec_session_options *so)
{
    teexec_status *st = teexec_session_options_set_device(so, o->device);
    if (!st && o->recipe) st = teexec_session_options_set_recipe(so, o->recipe);
    if (!st && o->dtype != TEEXEC_DTYPE_UNDEFINED) st = teexec_session_options_set_dtype(so, o->dtype);
    if (!st && o->deterministic) st = teexec_session_options_set_deterministic(so, 1);
    if (!st && o->no_graphs) st = teexec_session_options_set_cuda_graphs(so, 0);
    if (!st && o->profile) st = teexec_session_options_set_profile(so, 1);
    return st;
}

void exec_options_apply_train(const exec_options *o, teexec_train_options *to)
{
    to->device = o->device;
    if (o->recipe) to->recipe = o->recipe;
    if (o->dtype != TEEXEC_DTYPE_UNDEFINED) to->dtype = o->dtype;
    if (exec_options_deterministic(o)) to->deterministic = 1;
    if (o->no_graphs) to->cuda_graphs = 0;
    if (o->profile) to->profile = 1;
}

const char *exec_options_dtype_name(teexec_dtype dtype)
{
    switch (dtype) {
    case TEEXEC_DTYPE_FLOAT: return "fp32";
    case TEEXEC_DTYPE_BFLOAT16: return "bf16";
    case TEEXEC_DTYPE_FLOAT16: return "fp16";
    default: return "model";
    }
}

int exec_options_print_profile(const char *cmd, const char *device, teexec_status *st,
                               char *text)
{
    if (st && device && strcmp(device, "cpu") == 0 &&
        teexec_status_code(st) == TEEXEC_ERR_INVALID_ARGUMENT) {
        /* trainers and the generator keep no CPU profile */
        teexec_status_destroy(st);
        teexec_string_free(text);
        fprintf(stderr, "teexec: %s: --profile: no profile of this command on the cpu device "
                        "(run and bench have one)\n", cmd);
        return CLI_EXIT_OK;
    }
    if (st) return cli_report(st, NULL);
    fprintf(stderr, "teexec: %s: profile:\n%s", cmd, text ? text : "");
    if (text && text[0] && text[strlen(text) - 1] != '\n') fputc('\n', stderr);
    teexec_string_free(text);
    return CLI_EXIT_OK;
}
