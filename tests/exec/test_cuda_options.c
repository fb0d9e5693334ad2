/* test_cuda_options.c - the options and entry points of the CUDA backend that
 * must behave on any machine: bad values are refused with a clear error,
 * CPU sessions and trainers refuse what only the GPU does (recipes, a cast
 * compute dtype, profiles, reruns without inputs), and asking for the GPU
 * where none is usable fails at creation. On a machine with a GPU the
 * device-specific expectations are skipped (tests/gpu covers them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec/cuda/cuda_executor.h"
#include "teexec/teexec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static teexec_model *load_mlp(void)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/mlp/model.onnx", root ? root : ".");
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) fail_msg("loading %s: %s", path, teexec_status_message(st));
    return m;
}

static void expect(teexec_status *st, teexec_code code, const char *needle)
{
    if (!st) fail_msg("expected an error containing \"%s\"", needle);
    if (teexec_status_code(st) != code || !strstr(teexec_status_message(st), needle))
        fail_msg("got %s: %s (wanted %s containing \"%s\")", teexec_code_name(teexec_status_code(st)),
                 teexec_status_message(st), teexec_code_name(code), needle);
    teexec_status_destroy(st);
}

static void option_values_are_checked(void **state)
{
    (void)state;
    teexec_session_options *o = NULL;
    assert_null(teexec_session_options_create(&o));
    expect(teexec_session_options_set_recipe(o, "fp9"), TEEXEC_ERR_INVALID_ARGUMENT, "fp9");
    expect(teexec_session_options_set_recipe(o, NULL), TEEXEC_ERR_INVALID_ARGUMENT, "NULL");
    assert_null(teexec_session_options_set_recipe(o, "mxfp8:hybrid"));
    expect(teexec_session_options_set_dtype(o, TEEXEC_DTYPE_INT64), TEEXEC_ERR_INVALID_ARGUMENT,
           "compute dtype");
    assert_null(teexec_session_options_set_dtype(o, TEEXEC_DTYPE_BFLOAT16));
    assert_null(teexec_session_options_set_deterministic(o, 1));
    assert_null(teexec_session_options_set_cuda_graphs(o, 0));
    assert_null(teexec_session_options_set_profile(o, 1));
    assert_null(teexec_session_options_set_cuda_stream(o, NULL));
    expect(teexec_session_options_set_cuda_stream(NULL, NULL), TEEXEC_ERR_INVALID_ARGUMENT, "NULL");
    expect(teexec_session_options_set_profile(NULL, 1), TEEXEC_ERR_INVALID_ARGUMENT, "NULL");
    teexec_session_options_destroy(o);
}

/* The CPU runs the model's own dtypes and every recipe, for sessions and
 * trainers alike (issue 16). */
static void cpu_refuses_gpu_only_options(void **state)
{
    (void)state;
    teexec_model *m = load_mlp();
    teexec_session_options *o = NULL;
    assert_null(teexec_session_options_create(&o));
    assert_null(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    assert_null(teexec_session_options_set_recipe(o, "fp8-current"));
    teexec_session *s = NULL;
    assert_null(teexec_session_create(m, o, &s));
    assert_string_equal(teexec_session_device_name(s), "cpu");
    teexec_session_destroy(s);
    s = NULL;
    assert_null(teexec_session_options_set_recipe(o, "none"));
    assert_null(teexec_session_options_set_dtype(o, TEEXEC_DTYPE_BFLOAT16));
    expect(teexec_session_create(m, o, &s), TEEXEC_ERR_UNSUPPORTED, "compute dtype");
    assert_null(teexec_session_options_set_dtype(o, TEEXEC_DTYPE_UNDEFINED));
    assert_null(teexec_session_create(m, o, &s));
    assert_string_equal(teexec_session_device_name(s), "cpu");
    /* a CPU session has no profile and needs its inputs every time */
    char *text = (char *)1;
    expect(teexec_session_profile(s, &text), TEEXEC_ERR_INVALID_ARGUMENT, "profiling");
    assert_null(text);
    teexec_tensor *out[1] = {NULL};
    expect(teexec_session_run(s, 0, NULL, NULL, 1, NULL, out), TEEXEC_ERR_INVALID_ARGUMENT,
           "missing");
    assert_null(out[0]);
    teexec_session_destroy(s);
    teexec_session_options_destroy(o);

    teexec_train_options to;
    teexec_train_options_init(&to);
    assert_int_equal(to.device, TEEXEC_DEVICE_AUTO);
    assert_int_equal(to.cuda_graphs, 1);
    to.device = TEEXEC_DEVICE_CPU;
    to.recipe = "nvfp4";
    teexec_trainer *t = NULL;
    assert_null(teexec_trainer_create(m, &to, &t));
    assert_string_equal(teexec_trainer_device_name(t), "cpu");
    teexec_trainer_destroy(t);
    t = NULL;
    to.recipe = NULL;
    to.dtype = TEEXEC_DTYPE_BFLOAT16;
    expect(teexec_trainer_create(m, &to, &t), TEEXEC_ERR_UNSUPPORTED, "compute dtype");
    assert_null(t);
    to.dtype = TEEXEC_DTYPE_UNDEFINED;
    assert_null(teexec_trainer_create(m, &to, &t));
    assert_string_equal(teexec_trainer_device_name(t), "cpu");
    expect(teexec_trainer_profile(t, &text), TEEXEC_ERR_INVALID_ARGUMENT, "profiling");
    expect(teexec_trainer_step(t, 0, NULL, NULL, NULL), TEEXEC_ERR_INVALID_ARGUMENT, "not given");
    teexec_trainer_destroy(t);
    teexec_model_destroy(m);
}

/* Without a usable GPU: CUDA is refused at creation, AUTO runs on the CPU
 * (a recipe too, for training as well). */
static void no_gpu_behaviour(void **state)
{
    (void)state;
    if (tx_gpu_available()) skip();
    teexec_model *m = load_mlp();
    teexec_session_options *o = NULL;
    assert_null(teexec_session_options_create(&o));
    assert_null(teexec_session_options_set_device(o, TEEXEC_DEVICE_CUDA));
    teexec_session *s = NULL;
    teexec_status *st = teexec_session_create(m, o, &s);
    assert_non_null(st);
    assert_true(teexec_status_code(st) == (tx_gpu_built() ? TEEXEC_ERR_DEVICE : TEEXEC_ERR_UNSUPPORTED));
    assert_non_null(strstr(teexec_status_message(st), "CUDA"));
    teexec_status_destroy(st);
    assert_null(teexec_session_options_set_device(o, TEEXEC_DEVICE_AUTO));
    assert_null(teexec_session_create(m, o, &s));
    assert_string_equal(teexec_session_device_name(s), "cpu");
    teexec_session_destroy(s);
    assert_null(teexec_session_options_set_recipe(o, "mxfp8"));
    assert_null(teexec_session_create(m, o, &s));
    assert_string_equal(teexec_session_device_name(s), "cpu");
    teexec_session_destroy(s);
    teexec_session_options_destroy(o);

    teexec_train_options to;
    teexec_train_options_init(&to);
    to.recipe = "mxfp8";
    teexec_trainer *t = NULL;
    assert_null(teexec_trainer_create(m, &to, &t));
    assert_string_equal(teexec_trainer_device_name(t), "cpu");
    teexec_trainer_destroy(t);
    t = NULL;
    to.recipe = NULL;
    to.device = TEEXEC_DEVICE_CUDA;
    st = teexec_trainer_create(m, &to, &t);
    assert_non_null(st);
    assert_null(t);
    teexec_status_destroy(st);
    teexec_model_destroy(m);
}

/* TEEXEC_DETERMINISTIC=1 turns deterministic mode on by default. */
static void deterministic_from_environment(void **state)
{
    (void)state;
    setenv("TEEXEC_DETERMINISTIC", "1", 1);
    teexec_train_options to;
    teexec_train_options_init(&to);
    assert_int_equal(to.deterministic, 1);
    setenv("TEEXEC_DETERMINISTIC", "0", 1);
    teexec_train_options_init(&to);
    assert_int_equal(to.deterministic, 0);
    unsetenv("TEEXEC_DETERMINISTIC");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(option_values_are_checked),
        cmocka_unit_test(cpu_refuses_gpu_only_options),
        cmocka_unit_test(no_gpu_behaviour),
        cmocka_unit_test(deterministic_from_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
