/* Tests for `teexec run` (tools/cmd_run.c) through the built binary: exit
 * statuses (DESIGN.md section 4), written outputs matching PyTorch, --json,
 * the bare `teexec MODEL.onnx` form, and what filling inputs reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "teexec/teexec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char src[4096], bin[4096], tmp[256];

static int setup(void **state)
{
    (void)state;
    const char *s = getenv("TEEXEC_SOURCE_ROOT"), *b = getenv("TEEXEC_BUILD_ROOT");
    snprintf(src, sizeof(src), "%s", s ? s : ".");
    snprintf(bin, sizeof(bin), "%s/tools/teexec", b ? b : ".");
    snprintf(tmp, sizeof(tmp), "/tmp/teexec_run_cli_XXXXXX");
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* Runs `teexec ARGS` with stdout/stderr to files in tmp; returns the exit
 * status. */
static int run(const char *args)
{
    char cmd[16384];
    snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s >'%s/out.txt' 2>'%s/err.txt'", src, bin, args,
             tmp, tmp);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc));
    return WEXITSTATUS(rc);
}

static char *slurp(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmp, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void outputs_written_match_pytorch(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof(args),
             "run models/gpt2_block/model.onnx --device cpu --input x=models/gpt2_block/inputs/x.npy "
             "--output-dir '%s/o'", tmp);
    assert_int_equal(run(args), 0);
    char path[8192];
    snprintf(path, sizeof(path), "%s/o/y.npy", tmp);
    teexec_tensor *got = NULL, *want = NULL;
    assert_null(teexec_tensor_load_file(path, &got));
    snprintf(path, sizeof(path), "%s/models/gpt2_block/expected/y.npy", src);
    assert_null(teexec_tensor_load_file(path, &want));
    assert_int_equal(teexec_tensor_element_count(got), teexec_tensor_element_count(want));
    const float *a = teexec_tensor_data_const(got), *b = teexec_tensor_data_const(want);
    double num = 0, den = 0;
    for (uint64_t i = 0; i < teexec_tensor_element_count(got); i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    assert_true(sqrt(num / den) < 1e-5);
    teexec_tensor_destroy(got);
    teexec_tensor_destroy(want);
    /* nothing was filled: every input was given */
    assert_null(strstr(slurp("err.txt"), "filled"));
}

static void exit_statuses(void **state)
{
    (void)state;
    assert_int_equal(run("run tests/exec/data/unsupported.onnx"), 3);
    assert_non_null(strstr(slurp("err.txt"), "unsupported op FooOp"));
    assert_int_equal(run("run models/mlp/model.onnx --no-such-option"), 2);
    assert_int_equal(run("run models/mlp/model.onnx --iters 0"), 2);
    assert_int_equal(run("run models/mlp/model.onnx --input nope=x.npy"), 2);
    assert_int_equal(run("run models/mlp/model.onnx --input x=/nonexistent/x.npy"), 1);
    assert_int_equal(run("run /nonexistent/model.onnx"), 1);
    /* no GPU here: 3 (no CUDA backend in the build) or 4 (no device) */
    int rc = run("run models/mlp/model.onnx --device cuda");
    assert_true(rc == 3 || rc == 4);
    assert_non_null(strstr(slurp("err.txt"), "CUDA"));
    /* an input file whose shape contradicts the model: bad input */
    assert_int_equal(run("run tests/exec/data/two_inputs.onnx --input A=models/mlp/inputs/x.npy"), 1);
    assert_non_null(strstr(slurp("err.txt"), "input \"A\" has rank 3"));
}

static void json_and_bare_form(void **state)
{
    (void)state;
    assert_int_equal(run("models/mlp/model.onnx --json --iters 2 --seed 3"), 0);
    const char *out = slurp("out.txt");
    assert_non_null(strstr(out, "\"timing\""));
    assert_non_null(strstr(out, "\"iters\": 2"));
    assert_non_null(strstr(out, "\"median_ms\""));
    assert_non_null(strstr(out, "\"filled_inputs\""));
    assert_non_null(strstr(slurp("err.txt"), "filled input \"x\" (float [2,8,64])"));
    /* symbolic dims: --dim binds them for filled inputs */
    assert_int_equal(run("run tests/exec/data/add_relu.onnx --dim N=5"), 0);
    assert_non_null(strstr(slurp("out.txt"), "Y: float [5,3]"));
    /* the same seed fills the same data */
    assert_int_equal(run("run tests/exec/data/add_relu.onnx --seed 9"), 0);
    char first[4096];
    snprintf(first, sizeof(first), "%.4095s", slurp("out.txt"));
    assert_int_equal(run("run tests/exec/data/add_relu.onnx --seed 9"), 0);
    assert_string_equal(first, slurp("out.txt"));
    assert_int_equal(run("run tests/exec/data/add_relu.onnx --seed 10"), 0);
    assert_string_not_equal(first, slurp("out.txt"));
}

static void pb_output_and_safe_file_names(void **state)
{
    (void)state;
    char args[1024], path[8192];
    snprintf(args, sizeof(args),
             "run tests/exec/data/weird_names.onnx --output-dir '%s/w' --output-format pb", tmp);
    assert_int_equal(run(args), 0);
    /* "../up/y:0" becomes "_._up_y_0": it stays inside the folder */
    snprintf(path, sizeof(path), "%s/w/_._up_y_0.pb", tmp);
    teexec_tensor *t = NULL;
    teexec_status *st = teexec_tensor_load_file(path, &t);
    if (st) fail_msg("%s: %s", path, teexec_status_message(st));
    assert_int_equal(teexec_tensor_dtype(t), TEEXEC_DTYPE_INT32);
    assert_int_equal(teexec_tensor_element_count(t), 2);
    teexec_tensor_destroy(t);
    snprintf(path, sizeof(path), "%s/up", tmp);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(outputs_written_match_pytorch),
        cmocka_unit_test(exit_statuses),
        cmocka_unit_test(json_and_bare_form),
        cmocka_unit_test(pb_output_and_safe_file_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
