/*
 * exec_options.h - the execution options that `teexec run`, `train` and
 * `bench` share: where a model runs and how (--device, --recipe, --dtype,
 * --deterministic, --no-graphs, --profile), parsed once and applied to a
 * teexec_session_options or a teexec_train_options.
 *
 * Only the options the user gave are applied, so everything else keeps the
 * library's defaults (TEEXEC_DETERMINISTIC=1 included). Bad values are usage
 * errors (exit 2): a recipe is checked by the library's own recipe parser
 * (teexec_plan_options_set_recipe) before any model is loaded.
 *
 * No heap memory is owned: strings point into argv. Uses only the public
 * API. Thread-safety: single-threaded CLI use.
 */
#ifndef TEEXEC_TOOLS_EXEC_OPTIONS_H
#define TEEXEC_TOOLS_EXEC_OPTIONS_H

#include "teexec/teexec.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct exec_options {
    teexec_device device;
    const char *recipe;    /* NULL: not given (the library's "none") */
    teexec_dtype dtype;    /* UNDEFINED: not given (the model's dtypes) */
    bool deterministic;    /* --deterministic given */
    bool no_graphs;        /* --no-graphs given */
    bool profile;          /* --profile given */
} exec_options;

/* The help lines for these options, two-space indented, 27 columns wide. */
extern const char exec_options_help[];

void exec_options_init(exec_options *o);

/* Tries argv[*i] as one of these options ("--opt VALUE" or "--opt=VALUE").
 * Returns 0 when it is not one (nothing consumed), 1 when consumed (*i
 * moved past a separate value), or -(exit status) after printing a usage
 * error. `cmd` names the command in messages. */
int exec_options_parse(exec_options *o, const char *cmd, int argc, char **argv, int *i);

/* True when deterministic mode is on: --deterministic, or the environment
 * variable TEEXEC_DETERMINISTIC set to "1" (the library's own default). */
bool exec_options_deterministic(const exec_options *o);

/* Applies the given options to a session's options. */
teexec_status *exec_options_apply_session(const exec_options *o, teexec_session_options *so);

/* Applies the given options to a trainer's options (already initialized with
 * teexec_train_options_init). `o` must outlive `to` (recipe is borrowed). */
void exec_options_apply_train(const exec_options *o, teexec_train_options *to);

/* The short name of a compute dtype as the options spell it ("bf16"), or
 * "model" for UNDEFINED. Static. */
const char *exec_options_dtype_name(teexec_dtype dtype);

/* Prints a profile (teexec_session_profile / teexec_trainer_profile result)
 * to stderr under a heading naming `cmd`, frees `text`, and returns 0; or
 * reports `st` (freeing it) and returns its exit status. `device` is the
 * session's or trainer's device name: the CPU keeps no profile, which is
 * said in one line (exit 0: the runs themselves succeeded). */
int exec_options_print_profile(const char *cmd, const char *device, teexec_status *st,
                               char *text);

#endif
