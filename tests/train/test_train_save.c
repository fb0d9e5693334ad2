/* test_train_save.c - teexec_trainer_save_model never leaves a broken file:
 * a child process saves two different trained states in turn and is killed
 * (SIGKILL) at varying moments; the target must then always load and hold
 * exactly one of the two states. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static const char *mlp_file(const char *f)
{
    static char b[2][1024];
    static int k;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char *o = b[k++ & 1];
    snprintf(o, 1024, "%s/models/mlp/%s", root ? root : ".", f);
    return o;
}

/* A trainer after `steps` SGD steps on the first two samples. */
static teexec_trainer *trained(const teexec_model *m, const teexec_dataset *d, int steps)
{
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    o.lr = 0.05;
    o.weight_decay = 0;
    teexec_trainer *t;
    ok(teexec_trainer_create(m, &o, &t));
    const char *names[2] = {"x", "target"};
    teexec_tensor *ts[2];
    for (int i = 0; i < 2; i++) {
        const teexec_tensor *a = NULL;
        for (size_t k = 0; k < teexec_dataset_count(d); k++)
            if (!strcmp(teexec_dataset_name(d, k), names[i])) a = teexec_dataset_tensor(d, k);
        assert_non_null(a);
        int64_t dims[8];
        int32_t r = teexec_tensor_rank(a);
        memcpy(dims, teexec_tensor_dims(a), sizeof(int64_t) * (size_t)r);
        size_t row = teexec_tensor_byte_size(a) / (size_t)dims[0];
        dims[0] = 2;
        ok(teexec_tensor_create_copy(teexec_tensor_dtype(a), r, dims, teexec_tensor_data_const(a),
                                     2 * row, &ts[i]));
    }
    for (int s = 0; s < steps; s++)
        ok(teexec_trainer_step(t, 2, names, (const teexec_tensor *const *)ts, NULL));
    teexec_tensor_destroy(ts[0]);
    teexec_tensor_destroy(ts[1]);
    return t;
}

/* 0 or 1: which trainer's parameters the saved model holds; -1 neither. */
static int which_state(const char *path, teexec_trainer *const *states)
{
    teexec_model *m;
    teexec_status *st = teexec_model_load_file(path, NULL, &m);
    if (st) {
        fprintf(stderr, "saved model does not load: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        return -1;
    }
    teexec_trainer *t;
    ok(teexec_trainer_create(m, NULL, &t));
    int found = -1;
    for (int k = 0; k < 2 && found < 0; k++) {
        bool same = true;
        for (size_t i = 0; i < teexec_trainer_param_count(t) && same; i++) {
            const char *name = teexec_trainer_param_name(t, i);
            teexec_tensor *a, *b;
            ok(teexec_trainer_param(t, name, &a));
            ok(teexec_trainer_param(states[k], name, &b));
            same = teexec_tensor_byte_size(a) == teexec_tensor_byte_size(b) &&
                   !memcmp(teexec_tensor_data_const(a), teexec_tensor_data_const(b),
                           teexec_tensor_byte_size(a));
            teexec_tensor_destroy(a);
            teexec_tensor_destroy(b);
        }
        if (same) found = k;
    }
    teexec_trainer_destroy(t);
    teexec_model_destroy(m);
    return found;
}

static void test_kill_during_save(void **state)
{
    (void)state;
    teexec_model *m;
    teexec_dataset *d;
    ok(teexec_model_load_file(mlp_file("model.onnx"), NULL, &m));
    ok(teexec_dataset_load_npz(mlp_file("train.npz"), &d));
    teexec_trainer *states[2] = {trained(m, d, 1), trained(m, d, 3)};
    char dir[] = "/tmp/teexec_save_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    ok(teexec_trainer_save_model(states[0], path));
    assert_int_equal(which_state(path, states), 0);
    int seen[2] = {0, 0};
    for (int round = 0; round < 12; round++) {
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (unsigned k = 0;; k++) {
                teexec_status *st = teexec_trainer_save_model(states[(k + 1) & 1], path);
                if (st) _exit(3);
            }
        }
        struct timespec ts = {0, (long)(1 + round * 25) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        assert_true(WIFSIGNALED(status));
        int w = which_state(path, states);
        assert_true(w == 0 || w == 1);
        seen[w]++;
    }
    fprintf(stderr, "after 12 kills: state A %d times, state B %d times\n", seen[0], seen[1]);
    /* clean the folder (temp files of killed writers included) */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    teexec_trainer_destroy(states[0]);
    teexec_trainer_destroy(states[1]);
    teexec_dataset_destroy(d);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_kill_during_save)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
