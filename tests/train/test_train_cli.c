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
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%.1000s/tools/teexec' %.7000s", getenv("TEEXEC_BUILD_ROOT"), args);
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

/* A token stream: windows of --seq tokens and the next-token labels,
 * walked in order. Step 0 at lr 0 must give the loss of the model on
 * ids = S[0:16], S[16:32] and labels = S[1:17], S[17:33], computed here
 * through the trainer API. */
static void test_token_stream(void **s)
{
    (void)s;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char dir[] = "/tmp/teexec_stream_XXXXXX";
    assert_non_null(mkdtemp(dir));
    enum { N = 100, T = 16, B = 2 };
    uint16_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (uint16_t)((i * 37 + 11) % 256);
    int64_t n = N;
    teexec_tensor *stream;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_UINT16, 1, &n, toks, sizeof toks, &stream));
    char path[128];
    snprintf(path, sizeof path, "%s/tokens.npy", dir);
    ok(teexec_tensor_save_file(stream, path, "tokens"));
    teexec_tensor_destroy(stream);
    char model[1100], args[4096], out[128];
    snprintf(model, sizeof model, "%.1000s/models/zoo/llama_dynamo/model.onnx", root);
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(args, sizeof args,
             "train '%s' --device cpu --data '%s' --seq %d --batch %d --steps 1 --lr 0 --json > '%s'",
             model, path, T, B, out);
    assert_int_equal(run_cmd(args), 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char text[4096] = "";
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    const char *l = strstr(text, "\"losses\"");
    assert_non_null(l);
    double got = strtod(strchr(l, '[') + 1, NULL);
    assert_non_null(strstr(text, "\"tokens_per_step\": 32"));

    int64_t ids[B * T], labels[B * T], dims[2] = {B, T};
    for (int r = 0; r < B; r++)
        for (int t = 0; t < T; t++) {
            ids[r * T + t] = toks[r * T + t];
            labels[r * T + t] = toks[r * T + t + 1];
        }
    teexec_model *m;
    ok(teexec_model_load_file(model, NULL, &m));
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.loss = TEEXEC_LOSS_CROSS_ENTROPY;
    o.lr = 0;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    teexec_tensor *ti, *tl;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 2, dims, ids, sizeof ids, &ti));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 2, dims, labels, sizeof labels, &tl));
    const char *names[2] = {"input_ids", "labels"};
    const teexec_tensor *ts[2] = {ti, tl};
    double want;
    ok(teexec_trainer_step(tr, 2, names, ts, &want));
    assert_true(fabs(got - want) <= 1e-9 * fabs(want));
    teexec_tensor_destroy(ti);
    teexec_tensor_destroy(tl);
    teexec_trainer_destroy(tr);
    teexec_model_destroy(m);

    /* usage: a stream needs --seq and --batch; --seq needs a stream */
    snprintf(args, sizeof args, "train '%s' --data '%s' --steps 1 2> /dev/null", model, path);
    assert_int_equal(run_cmd(args), 2);
    snprintf(args, sizeof args,
             "train '%s' --data '%.1000s/models/zoo/llama_dynamo/train.npz' --seq 4 2> /dev/null",
             model, root);
    assert_int_equal(run_cmd(args), 2);
    /* a stream shorter than a window */
    snprintf(args, sizeof args, "train '%s' --data '%s' --seq 200 --batch 1 2> /dev/null", model,
             path);
    assert_int_equal(run_cmd(args), 1);
    unlink(out);
    unlink(path);
    rmdir(dir);
}

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
        cmocka_unit_test(test_token_stream),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
