/*
 * cmd_ops.c - `teexec ops [--markdown]`: prints the TE operation domain's
 * spec from the library's registry (a compact table, or the markdown that
 * docs/te-ops.md holds verbatim). Uses only the public API.
 */
#include "cli_common.h"
#include "commands.h"
#include "teexec/teexec.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: teexec ops [--markdown]\n"
               "\n"
               "Lists the ops of the TE operation domain (te.ops, version 1): extra inputs,\n"
               "parameters, extra outputs, attributes and saved context of each.\n"
               "\n"
               "  --markdown   print the full spec (inputs, attributes with defaults, shape\n"
               "               rules, forward and backward formulas, saved context, quantizer\n"
               "               slots) as markdown; docs/te-ops.md is exactly this output\n");
}

int cmd_ops(int argc, char **argv)
{
    teexec_te_ops_format format = TEEXEC_TE_OPS_TABLE;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (strcmp(argv[i], "--markdown") == 0) format = TEEXEC_TE_OPS_MARKDOWN;
        else return cli_usage_error("ops", "unknown argument '%s'", argv[i]);
    }
    const char *text = teexec_te_ops_text(format);
    if (!text) return cli_fail(CLI_EXIT_BAD_INPUT, "ops", "out of memory");
    fputs(text, stdout);
    if (fflush(stdout) != 0 || ferror(stdout))
        return cli_fail(CLI_EXIT_BAD_INPUT, "ops", "cannot write the output");
    return CLI_EXIT_OK;
}
