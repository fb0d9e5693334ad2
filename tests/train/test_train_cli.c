/* test_train_cli.c - `teexec train`: --steps 1 --lr 0 --dump-grads on the
 * PyTorch-exported models reproduces models/<m>/expected/grads.npz (one
 * NAME.npy per parameter, x.grad.npy for the input; rel-L2 < 1e-4), and
 * usage errors exit 2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static int run_cmd(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tools/teexec' %s", getenv("TEEXEC_BUILD_ROOT"), args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_model(const char *model)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char dir[] = "/tmp/teexec_grads_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char args[1500];
    snprintf(args, sizeof args,
             "train '%s/models/%s/model.onnx' --data '%s/models/%s/train.npz' --batch 2 "
             "--steps 1 --lr 0 --dump-grads '%s' > /dev/null 2>&1",
             root, model, root, model, dir);
    assert_int_equal(run_cmd(args), 0);
    char ref_path[1024];
    snprintf(ref_path, sizeof ref_path, "%s/models/%s/expected/grads.npz", root, model);
    teexec_dataset *ref;
    ok(teexec_dataset_load_npz(ref_path, &ref));
    for (size_t i = 0; i < teexec_dataset_count(ref); i++) {
        const char *name = teexec_dataset_name(ref, i);
        const teexec_tensor *want = teexec_dataset_tensor(ref, i);
        char p[1200];
        snprintf(p, sizeof p, "%s/%s.npy", dir, name); /* "x.grad" -> x.grad.npy */
        teexec_tensor *got;
        ok(teexec_tensor_load_file(p, &got));
        assert_int_equal(teexec_tensor_element_count(got), teexec_tensor_element_count(want));
        assert_int_equal(teexec_tensor_rank(got), teexec_tensor_rank(want));
        assert_memory_equal(teexec_tensor_dims(got), teexec_tensor_dims(want),
                            sizeof(int64_t) * (size_t)teexec_tensor_rank(want));
        const float *a = teexec_tensor_data_const(got), *b = teexec_tensor_data_const(want);
        double num = 0, den = 0;
        for (uint64_t k = 0; k < teexec_tensor_element_count(want); k++) {
            num += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
            den += (double)b[k] * b[k];
        }
        double e = sqrt(num / den);
        if (!(e < 1e-4)) fprintf(stderr, "%s %s: rel-L2 %g\n", model, name, e);
        assert_true(e < 1e-4);
        teexec_tensor_destroy(got);
        unlink(p);
    }
    teexec_dataset_destroy(ref);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_dump_grads_mlp(void **s) { (void)s; check_model("mlp"); }
static void test_dump_grads_gpt2(void **s) { (void)s; check_model("gpt2_block"); }

static void test_usage(void **s)
{
    (void)s;
    assert_int_equal(run_cmd("train > /dev/null 2>&1"), 2);
    assert_int_equal(run_cmd("train m.onnx > /dev/null 2>&1"), 2);
    assert_int_equal(run_cmd("train m.onnx --data d.npz --loss hinge > /dev/null 2>&1"), 2);
    assert_int_equal(run_cmd("train --help > /dev/null 2>&1"), 0);
    /* a missing model file is bad input */
    assert_int_equal(run_cmd("train /nonexistent.onnx --data d.npz > /dev/null 2>&1"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dump_grads_mlp),
        cmocka_unit_test(test_dump_grads_gpt2),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
