/* test_train_dp_cli.c - `teexec train` with several ranks: --ranks 2 (CPU
 * thread ranks) follows the one-rank loss curve on the same global batch
 * (within 1e-6: the ranks' partial gradient sums add in another order,
 * test_train_dp.c says why), --zero1 and --save work with it, --gpus asks
 * for GPUs that are not there with exit 4 and a reason, and mixed launch
 * modes are usage errors (exit 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STEPS 8

static int run_cmd(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%.1000s/tools/teexec' %.7000s", getenv("TEEXEC_BUILD_ROOT"), args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs `train mlp ... EXTRA --json` and reads the "losses" array. */
static void losses_of(const char *extra, double *out)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char out_path[] = "/tmp/teexec_dpcli_XXXXXX";
    int fd = mkstemp(out_path);
    assert_true(fd >= 0);
    close(fd);
    char args[3000];
    snprintf(args, sizeof args,
             "train '%s/models/mlp/model.onnx' --data '%s/models/mlp/train.npz' --batch 2 "
             "--steps %d %s --json > '%s'",
             root, root, STEPS, extra, out_path);
    assert_int_equal(run_cmd(args), 0);
    FILE *f = fopen(out_path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(out_path);
    buf[n] = 0;
    char *p = strstr(buf, "\"losses\"");
    assert_non_null(p);
    p = strchr(p, '[');
    assert_non_null(p);
    p++;
    for (int i = 0; i < STEPS; i++) {
        char *end;
        out[i] = strtod(p, &end);
        assert_true(end != p);
        p = end;
        while (*p == ',' || *p == ' ' || *p == '\n') p++;
    }
}

static void ranks_follow_one_rank(void **s)
{
    (void)s;
    double one[STEPS], two[STEPS], zero[STEPS];
    losses_of("--device cpu", one);
    losses_of("--ranks 2", two);
    losses_of("--ranks 2 --zero1 --bucket-mb 0.01", zero);
    for (int i = 0; i < STEPS; i++) {
        assert_true(fabs(two[i] - one[i]) <= 1e-6 * fabs(one[i]));
        assert_true(zero[i] == two[i]); /* ZeRO-1 applies the same updates */
    }
    assert_true(one[STEPS - 1] < one[0]);
}

static void save_and_refusals(void **s)
{
    (void)s;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char dir[] = "/tmp/teexec_dpsave_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char base[1500], args[3000];
    snprintf(base, sizeof base,
             "train '%s/models/mlp/model.onnx' --data '%s/models/mlp/train.npz' --batch 2", root,
             root);
    snprintf(args, sizeof args, "%s --ranks 2 --save '%s/m.onnx' 2> /dev/null", base, dir);
    assert_int_equal(run_cmd(args), 0);
    snprintf(args, sizeof args, "%s/m.onnx", dir);
    teexec_model *m;
    teexec_status *st = teexec_model_load_file(args, NULL, &m);
    assert_null(st);
    teexec_model_destroy(m);
    unlink(args);
    rmdir(dir);
    /* an uneven split names the batch and the ranks; exit 1 */
    snprintf(args, sizeof args, "%s --ranks 4 2> /dev/null", base);
    assert_int_equal(run_cmd(args), 1);
    if (teexec_comm_gpu_count() < 2) {
        snprintf(args, sizeof args, "%s --gpus 2 2> /dev/null", base);
        assert_int_equal(run_cmd(args), 4);
    }
    const char *usage[] = {"--ranks 2 --gpus 2", "--ranks 2 --device cuda", "--world-size 2",
                           "--rank 1", "--world-size 2 --rank 2 --rendezvous /tmp/x",
                           "--zero1", "--ranks 0", "--bucket-mb 0"};
    for (size_t i = 0; i < sizeof usage / sizeof *usage; i++) {
        snprintf(args, sizeof args, "%s %s 2> /dev/null", base, usage[i]);
        if (run_cmd(args) != 2) fprintf(stderr, "not a usage error: %s\n", usage[i]);
        assert_int_equal(run_cmd(args), 2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ranks_follow_one_rank),
        cmocka_unit_test(save_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
