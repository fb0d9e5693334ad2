/*
 * commands.h - the teexec subcommands, dispatched from teexec.c.
 *
 * Each command is `int cmd_NAME(int argc, char **argv)`: argv[0] is the
 * command's name ("inspect"), argv[1..argc-1] its arguments. It handles
 * its own --help (usage on stdout, exit 0) and returns the process exit
 * status (cli_common.h). Commands use only the public API (teexec.h).
 *
 * To add a command: declare it here, put it in its own tools/cmd_NAME.c,
 * list that file in tools/meson.build and add a row to the table in
 * tools/teexec.c.
 */
#ifndef TEEXEC_TOOLS_COMMANDS_H
#define TEEXEC_TOOLS_COMMANDS_H

/* teexec inspect MODEL.onnx [--json] (tools/cmd_inspect.c) */
int cmd_inspect(int argc, char **argv);

/* teexec run MODEL.onnx [...] (tools/cmd_run.c, exec's) */
int cmd_run(int argc, char **argv);

/* teexec ops [--markdown] (tools/cmd_ops.c, the TE op domain's) */
int cmd_ops(int argc, char **argv);

/* teexec train MODEL.onnx --data FILE.npz [...] (tools/cmd_train.c) */
int cmd_train(int argc, char **argv);

/* teexec bench MODEL.onnx [...] (tools/cmd_bench.c) */
int cmd_bench(int argc, char **argv);

/* teexec generate MODEL.onnx --prompt-ids ... --max-new-tokens N [...]
 * (tools/cmd_generate.c, the generator's) */
int cmd_generate(int argc, char **argv);

/* teexec plan MODEL.onnx [...] and teexec convert IN.onnx OUT.onnx [...]
 * (tools/cmd_plan.c, the planner's) */
int cmd_plan(int argc, char **argv);
int cmd_convert(int argc, char **argv);

#endif
