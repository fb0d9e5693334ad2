/*
 * gpu_dp.h - data parallel CUDA trainers for the NCCL GPU tests: W rank
 * trainers stepping in their own threads on models/mlp against one
 * trainer, on the same global batches. Header-only test code (one include
 * per program); fails the cmocka test on error.
 */
#ifndef TEEXEC_TESTS_GPU_DP_H
#define TEEXEC_TESTS_GPU_DP_H

#include "teexec/teexec.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DP_STEPS 10

typedef struct dp_rank {
    teexec_trainer *tr;
    const teexec_dataset *d;
    int64_t rows; /* rows passed per step */
    double loss[DP_STEPS];
    teexec_code code;
    char msg[400];
} dp_rank;

static const teexec_tensor *dp_find(const teexec_dataset *d, const char *name)
{
    for (size_t i = 0; i < teexec_dataset_count(d); i++)
        if (!strcmp(teexec_dataset_name(d, i), name)) return teexec_dataset_tensor(d, i);
    return NULL;
}

static teexec_tensor *dp_rows(const teexec_tensor *t, int64_t start, int64_t n)
{
    int64_t dims[8];
    int32_t r = teexec_tensor_rank(t);
    memcpy(dims, teexec_tensor_dims(t), sizeof(int64_t) * (size_t)r);
    size_t row = teexec_tensor_byte_size(t) / (size_t)dims[0];
    dims[0] = n;
    teexec_tensor *o = NULL;
    teexec_status *st = teexec_tensor_create_copy(
        teexec_tensor_dtype(t), r, dims, (const char *)teexec_tensor_data_const(t) + row * (size_t)start,
        row * (size_t)n, &o);
    teexec_status_destroy(st);
    return o;
}

static void *dp_rank_run(void *arg)
{
    dp_rank *j = arg;
    int64_t total = teexec_tensor_dims(dp_find(j->d, "x"))[0];
    for (int s = 0; s < DP_STEPS && !j->code; s++) {
        int64_t start = (2 * s) % total;
        teexec_tensor *x = dp_rows(dp_find(j->d, "x"), start, j->rows);
        teexec_tensor *y = dp_rows(dp_find(j->d, "target"), start, j->rows);
        const char *names[2] = {"x", "target"};
        const teexec_tensor *ts[2] = {x, y};
        teexec_status *st = teexec_trainer_step(j->tr, 2, names, ts, &j->loss[s]);
        if (st) {
            j->code = teexec_status_code(st);
            snprintf(j->msg, sizeof j->msg, "%s", teexec_status_message(st));
            teexec_status_destroy(st);
        }
        teexec_tensor_destroy(x);
        teexec_tensor_destroy(y);
    }
    return NULL;
}

/* Trains W ranks over comms (NULL: one trainer, W = 1) on models/mlp with
 * deterministic CUDA kernels; replicate: every rank passes the same 2 rows
 * as its share (dp_local_batch), else the global batch of 2 rows is split.
 * loss[s] gets rank 0's curve; all ranks' curves must agree bitwise. */
static void dp_train(teexec_comm **comms, int w, int replicate, double *loss)
{
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char mp[1024], dp[1024];
    snprintf(mp, sizeof mp, "%s/models/mlp/model.onnx", root ? root : ".");
    snprintf(dp, sizeof dp, "%s/models/mlp/train.npz", root ? root : ".");
    teexec_model *m;
    teexec_dataset *d;
    TG_OK(teexec_model_load_file(mp, NULL, &m));
    TG_OK(teexec_dataset_load_npz(dp, &d));
    dp_rank ranks[8];
    pthread_t th[8];
    for (int r = 0; r < w; r++) {
        teexec_train_options o;
        teexec_train_options_init(&o);
        o.device = TEEXEC_DEVICE_CUDA;
        o.deterministic = 1;
        o.comm = comms ? comms[r] : NULL;
        o.dp_local_batch = replicate;
        memset(&ranks[r], 0, sizeof ranks[r]);
        TG_OK(teexec_trainer_create(m, &o, &ranks[r].tr));
        ranks[r].d = d;
        ranks[r].rows = 2;
    }
    for (int r = 0; r < w; r++) assert_int_equal(pthread_create(&th[r], NULL, dp_rank_run, &ranks[r]), 0);
    for (int r = 0; r < w; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < w; r++) {
        if (ranks[r].code) fprintf(stderr, "rank %d: %s\n", r, ranks[r].msg);
        assert_int_equal(ranks[r].code, TEEXEC_OK);
        assert_memory_equal(ranks[r].loss, ranks[0].loss, sizeof ranks[0].loss);
        teexec_trainer_destroy(ranks[r].tr);
    }
    memcpy(loss, ranks[0].loss, sizeof ranks[0].loss);
    teexec_dataset_destroy(d);
    teexec_model_destroy(m);
}

/* The W-rank curves against one trainer's: bitwise when replicated (the
 * average of equal gradients is exact for W = 2), else within 1e-4. */
static void dp_check(teexec_comm **comms, int w, const char *what)
{
    double one[DP_STEPS], rep[DP_STEPS], split[DP_STEPS];
    dp_train(NULL, 1, 0, one);
    dp_train(comms, w, 1, rep);
    dp_train(comms, w, 0, split);
    double worst = 0;
    for (int s = 0; s < DP_STEPS; s++) {
        double rel = fabs(split[s] - one[s]) / fabs(one[s]);
        if (rel > worst) worst = rel;
    }
    fprintf(stderr, "%s: loss %g -> %g; replicated %s; split worst rel diff %.3g\n", what,
            one[0], one[DP_STEPS - 1], memcmp(rep, one, sizeof one) ? "DIFFERS" : "bitwise",
            worst);
    assert_memory_equal(rep, one, sizeof one);
    assert_true(worst < 1e-4);
    assert_true(one[DP_STEPS - 1] < one[0]);
}

#endif
