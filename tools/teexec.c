/*
 * teexec.c - the teexec command: global options and subcommand dispatch.
 *
 *     teexec [--help | --version]
 *     teexec help [COMMAND]
 *     teexec COMMAND [args]
 *     teexec MODEL.onnx [run args]    (the same as `teexec run MODEL.onnx ...`)
 */
#include "cli_common.h"
#include "commands.h"
#include "teexec/teexec.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "run inference on a model"},
    {"inspect", cmd_inspect, "show a model's inputs, outputs, opsets, ops and parameters"},
    {"convert", cmd_convert, "write a model lowered to TE ops, fuser groups as te.fused functions"},
    {"plan", cmd_plan, "show how a model is lowered, fused, quantized and laid out in memory"},
    {"train", cmd_train, "fine-tune a model"},
    {"bench", cmd_bench, "time inference runs or training steps of a model"},
    {"generate", cmd_generate, "generate tokens with a decoder LM (KV cache when it has one)"},
    {"ops", cmd_ops, "list the TE operation domain's ops (--markdown: the full spec)"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static void print_help(void)
{
    printf("usage: teexec COMMAND [ARGS]\n"
           "       teexec MODEL.onnx [ARGS]     (same as: teexec run MODEL.onnx [ARGS])\n"
           "       teexec help COMMAND          (or: teexec COMMAND --help)\n"
           "       teexec --version\n"
           "\n"
           "teexec loads ONNX models (including Transformer Engine style models) and\n"
           "runs them on a GPU or the CPU.\n"
           "\n"
           "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        printf("  %-9s %s\n", commands[i].name, commands[i].summary);
    printf("\n"
           "exit status: 0 success, 1 bad input (model or file), 2 usage error,\n"
           "3 unsupported model, 4 device failure.\n");
}

static int help_command(int argc, char **argv)
{
    if (argc < 2) {
        print_help();
        return CLI_EXIT_OK;
    }
    if (argc > 2) return cli_usage_error("help", "expected one command name");
    const command *c = find_command(argv[1]);
    if (!c) return cli_usage_error("help", "unknown command '%s'", argv[1]);
    char *sub_argv[] = {argv[1], (char *)"--help", NULL};
    return c->fn(2, sub_argv);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        return cli_usage_error(NULL, "no command given");
    }
    const char *first = argv[1];
    if (cli_is_help(first)) {
        print_help();
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0) {
        printf("teexec %s\n", teexec_version_string());
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "help") == 0) return help_command(argc - 1, argv + 1);
    if (first[0] == '-') return cli_usage_error(NULL, "unknown option '%s'", first);

    const command *c = find_command(first);
    if (c) return c->fn(argc - 1, argv + 1);

    /* Not a command: a model path, meaning `teexec run MODEL ...`. A word
     * that is neither a path-like name nor an existing file is taken as a
     * mistyped command. */
    struct stat sb;
    if (!strchr(first, '.') && !strchr(first, '/') && stat(first, &sb) != 0)
        return cli_usage_error(NULL, "unknown command '%s'", first);
    /* argv[0] becomes the command name slot of `run`. */
    argv[0] = (char *)"run";
    return cmd_run(argc, argv);
}
