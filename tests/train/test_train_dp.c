/* test_train_dp.c - data parallel training on the CPU (exec/train_dp.h):
 * W thread ranks (teexec_comm_create_threads) train models/<m> on the same
 * global batches as one trainer does.
 *
 * What is compared, and why not bitwise with one rank: each rank's
 * backward sums its own rows (a GEMM's reduction over the batch), and the
 * all-reduce then adds the ranks' partial sums, (r0 rows) + (r1 rows);
 * the single trainer sums all rows in one pass. Both are double, so the
 * gradients differ in the last bits only, the fp32 parameters in at most an
 * ulp now and then, and the loss curves agree to ~1e-6 relative (asserted:
 * 1e-5 over 20 AdamW steps, the measured worst printed). What IS bitwise:
 * every rank's loss and parameters with every other rank's, a run with a
 * second run, and ZeRO-1 with plain data parallelism (the owner applies
 * the very update every rank would have). A rank that fails makes the
 * other fail with TEEXEC_ERR_COMM instead of waiting; checkpoints are
 * written by rank 0 only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "tests/train/train_fixtures.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEPS 20
#define MAXW 4

typedef struct rank_job {
    teexec_trainer *tr;
    const char *in, *lab; /* dataset / input names */
    const teexec_dataset *d;
    int64_t batch;   /* global */
    int fail_at;     /* step at which this rank passes no target, -1 = never */
    double loss[STEPS];
    teexec_code code;
    char msg[512];
} rank_job;

static void *train_rank(void *arg)
{
    rank_job *j = arg;
    j->code = TEEXEC_OK;
    int64_t rows = teexec_tensor_dims(ds_find(j->d, j->in))[0];
    for (int s = 0; s < STEPS; s++) {
        int64_t start = (j->batch * s) % rows;
        teexec_tensor *x = rows_of(ds_find(j->d, j->in), start, j->batch);
        teexec_tensor *y = rows_of(ds_find(j->d, j->lab), start, j->batch);
        const char *names[2] = {j->in, j->lab};
        const teexec_tensor *ts[2] = {x, y};
        teexec_status *st =
            teexec_trainer_step(j->tr, s == j->fail_at ? 1 : 2, names, ts, &j->loss[s]);
        teexec_tensor_destroy(x);
        teexec_tensor_destroy(y);
        if (st) {
            j->code = teexec_status_code(st);
            snprintf(j->msg, sizeof j->msg, "%s", teexec_status_message(st));
            teexec_status_destroy(st);
            return NULL;
        }
    }
    return NULL;
}

typedef struct run {
    int world;
    rank_job job[MAXW];
    teexec_trainer *tr[MAXW];
    teexec_comm *comm[MAXW];
} run;

/* world 0: one trainer without a communicator. */
static bool cross_entropy; /* the model being tested: zoo decoders train on labels */
/* Every rank passes the same `batch` rows as its own share (dp_local_batch):
 * the average of W equal gradients, each weighted by n/(W n) = 1/W (a power
 * of two), is that gradient exactly, so the run must equal one rank's
 * bitwise. This is how the zoo decoders are tested: their exports bake the
 * batch of 2 into Reshape shapes, so one rank cannot run a split batch. */
static bool replicate;

static void train(run *r, teexec_model *m, const teexec_dataset *d, int world, int zero1,
                  int64_t batch, int fail_rank)
{
    memset(r, 0, sizeof *r);
    r->world = world;
    int n = world ? world : 1;
    if (world) ok(teexec_comm_create_threads(world, 5000, r->comm));
    for (int i = 0; i < n; i++) {
        teexec_train_options o;
        teexec_train_options_init(&o);
        o.device = TEEXEC_DEVICE_CPU;
        o.lr = 1e-3;
        if (cross_entropy) o.loss = TEEXEC_LOSS_CROSS_ENTROPY;
        o.comm = r->comm[i];
        o.zero1 = zero1;
        o.dp_local_batch = world && replicate;
        o.dp_bucket_mb = 0.01; /* small buckets: several flushes per step */
        ok(teexec_trainer_create(m, &o, &r->tr[i]));
        r->job[i] = (rank_job){.tr = r->tr[i], .d = d, .batch = batch,
                               .in = cross_entropy ? "input_ids" : "x",
                               .lab = cross_entropy ? "labels" : "target",
                               .fail_at = i == fail_rank ? 3 : -1};
    }
    pthread_t th[MAXW];
    for (int i = 0; i < n; i++) assert_int_equal(pthread_create(&th[i], NULL, train_rank, &r->job[i]), 0);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static void run_free(run *r)
{
    for (int i = 0; i < MAXW; i++) {
        teexec_trainer_destroy(r->tr[i]);
        teexec_comm_destroy(r->comm[i]);
    }
}

/* Bitwise equal parameters of two trainers; else the worst relative diff. */
static double param_diff(teexec_trainer *a, teexec_trainer *b, bool *bitwise)
{
    double worst = 0;
    *bitwise = true;
    for (size_t i = 0; i < teexec_trainer_param_count(a); i++) {
        const char *name = teexec_trainer_param_name(a, i);
        teexec_tensor *pa, *pb;
        ok(teexec_trainer_param(a, name, &pa));
        ok(teexec_trainer_param(b, name, &pb));
        assert_int_equal(teexec_tensor_byte_size(pa), teexec_tensor_byte_size(pb));
        if (memcmp(teexec_tensor_data_const(pa), teexec_tensor_data_const(pb),
                   teexec_tensor_byte_size(pa)))
            *bitwise = false;
        /* relative to the tensor's largest magnitude: elements near 0 say nothing */
        const float *x = teexec_tensor_data_const(pa), *y = teexec_tensor_data_const(pb);
        double big = 1e-30, d = 0;
        for (uint64_t e = 0; e < teexec_tensor_element_count(pa); e++) {
            if (fabs((double)y[e]) > big) big = fabs((double)y[e]);
            if (fabs((double)x[e] - y[e]) > d) d = fabs((double)x[e] - y[e]);
        }
        if (d / big > worst) worst = d / big;
        teexec_tensor_destroy(pa);
        teexec_tensor_destroy(pb);
    }
    return worst;
}

static void check_model(const char *model, int world, int64_t batch, bool rep)
{
    cross_entropy = strstr(model, "zoo/") != NULL;
    replicate = rep;
    teexec_model *m;
    teexec_dataset *d;
    ok(teexec_model_load_file(model_path(model, "model.onnx"), NULL, &m));
    ok(teexec_dataset_load_npz(model_path(model, "train.npz"), &d));
    run one, dp, dp2, z;
    train(&one, m, d, 0, 0, batch, -1);
    train(&dp, m, d, world, 0, batch, -1);
    train(&dp2, m, d, world, 0, batch, -1);
    train(&z, m, d, world, 1, batch, -1);
    assert_int_equal(one.job[0].code, TEEXEC_OK);
    double worst = 0;
    int same_bits = 0;
    for (int i = 0; i < world; i++) {
        if (dp.job[i].code) fprintf(stderr, "rank %d: %s\n", i, dp.job[i].msg);
        if (z.job[i].code) fprintf(stderr, "zero1 rank %d: %s\n", i, z.job[i].msg);
        assert_int_equal(dp.job[i].code, TEEXEC_OK);
        assert_int_equal(z.job[i].code, TEEXEC_OK);
        /* every rank reports the global loss, the same bits */
        assert_memory_equal(dp.job[i].loss, dp.job[0].loss, sizeof dp.job[0].loss);
        /* the same run again, and ZeRO-1: bitwise */
        assert_memory_equal(dp2.job[i].loss, dp.job[0].loss, sizeof dp.job[0].loss);
        assert_memory_equal(z.job[i].loss, dp.job[0].loss, sizeof dp.job[0].loss);
        bool bw;
        param_diff(dp.tr[i], dp.tr[0], &bw);
        assert_true(bw);
        param_diff(z.tr[i], dp.tr[0], &bw);
        assert_true(bw);
    }
    for (int s = 0; s < STEPS; s++) {
        double a = dp.job[0].loss[s], b = one.job[0].loss[s];
        double rel = fabs(a - b) / fabs(b);
        if (rel > worst) worst = rel;
        if (a == b) same_bits++;
    }
    bool bw;
    double pw = param_diff(dp.tr[0], one.tr[0], &bw);
    fprintf(stderr,
            "%s, %d ranks, %s batch %lld: loss %g -> %g; vs one rank: worst loss rel diff "
            "%.3g, %d of %d steps bitwise, worst param rel diff %.3g%s\n",
            model, world, rep ? "replicated" : "global", (long long)batch, one.job[0].loss[0], one.job[0].loss[STEPS - 1], worst,
            same_bits, STEPS, pw, bw ? " (bitwise)" : "");
    if (replicate) {
        assert_int_equal(same_bits, STEPS);
        assert_true(bw);
    }
    assert_true(worst < 1e-5);
    assert_true(pw < 1e-4);
    /* it did train */
    assert_true(one.job[0].loss[STEPS - 1] < one.job[0].loss[0]);
    run_free(&one);
    run_free(&dp);
    run_free(&dp2);
    run_free(&z);
    teexec_dataset_destroy(d);
    teexec_model_destroy(m);
}

static void dp_mlp(void **state) { (void)state; check_model("mlp", 2, 2, false); }
static void dp_mlp_4(void **state) { (void)state; check_model("mlp", 4, 4, false); }
static void dp_mlp_replicated(void **state) { (void)state; check_model("mlp", 2, 2, true); }
static void dp_gpt2(void **state) { (void)state; check_model("zoo/gpt2_dynamo", 2, 2, true); }
static void dp_llama(void **state) { (void)state; check_model("zoo/llama_dynamo", 2, 2, true); }

static void failing_rank_fails_all(void **state)
{
    (void)state;
    cross_entropy = replicate = false;
    teexec_model *m;
    teexec_dataset *d;
    ok(teexec_model_load_file(model_path("mlp", "model.onnx"), NULL, &m));
    ok(teexec_dataset_load_npz(model_path("mlp", "train.npz"), &d));
    run r;
    train(&r, m, d, 2, 0, 2, 1);
    /* rank 1 lacks its target at step 3: its own error; rank 0 is told */
    assert_int_equal(r.job[1].code, TEEXEC_ERR_INVALID_ARGUMENT);
    assert_int_equal(r.job[0].code, TEEXEC_ERR_COMM);
    assert_non_null(strstr(r.job[0].msg, "rank 1 aborted"));
    assert_non_null(strstr(r.job[0].msg, "target"));
    /* checkpoints: rank 1 writes nothing, rank 0 writes */
    char dir[] = "/tmp/teexec_dp_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p0[256], p1[256];
    snprintf(p0, sizeof p0, "%s/r0.onnx", dir);
    snprintf(p1, sizeof p1, "%s/r1.onnx", dir);
    ok(teexec_trainer_save_model(r.tr[1], p1));
    ok(teexec_trainer_save_model(r.tr[0], p0));
    assert_int_equal(access(p1, F_OK), -1);
    assert_int_equal(access(p0, F_OK), 0);
    unlink(p0);
    rmdir(dir);
    run_free(&r);

    /* a batch that does not split evenly */
    teexec_comm *c[3];
    ok(teexec_comm_create_threads(3, 200, c));
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.comm = c[0];
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    teexec_tensor *x = rows_of(ds_find(d, "x"), 0, 2), *y = rows_of(ds_find(d, "target"), 0, 2);
    const char *names[2] = {"x", "target"};
    const teexec_tensor *ts[2] = {x, y};
    teexec_status *st = teexec_trainer_step(tr, 2, names, ts, NULL);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "does not split evenly over 3 ranks"));
    teexec_status_destroy(st);
    teexec_tensor_destroy(x);
    teexec_tensor_destroy(y);
    teexec_trainer_destroy(tr);
    for (int i = 0; i < 3; i++) teexec_comm_destroy(c[i]);
    teexec_dataset_destroy(d);
    teexec_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dp_mlp),
        cmocka_unit_test(dp_mlp_4),
        cmocka_unit_test(dp_mlp_replicated),
        cmocka_unit_test(dp_gpt2),
        cmocka_unit_test(dp_llama),
        cmocka_unit_test(failing_rank_fails_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
