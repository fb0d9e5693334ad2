/* test_tp_collectives.c - te.ops communication ops over a tensor-parallel
 * group of thread ranks on the CPU (teexec_session_options_set_comm):
 *
 * The single-rank model y = Linear(GELU(Linear(x, W1)), W2) split the way
 * TE and Megatron split an MLP -- rank r holds rows [r*H/W, (r+1)*H/W) of
 * W1 (column parallel: its share of the hidden features, GELU applied to
 * them locally) and the same columns of W2 (row parallel: a partial y),
 * then AllReduce sums the partial ys -- gives every rank the single-rank y
 * within fp32 tolerance (the hidden sum is split into W partial sums, so
 * the rounding differs), and the same bits on every rank. Without a group
 * AllReduce is the identity (a rank's partial y); an AllGather whose
 * world_size attribute is not the group's and a CUDA session with a host
 * group are refused with a reason. Sequence parallel: AllGather(world_size W)
 * of the ranks' row blocks is the whole tensor, ReduceScatter(world_size
 * W) gives rank r block r of the sum, on every rank.
 *
 * teexec_model_split_tensor_parallel (and `teexec convert
 * --tensor-parallel N`) writes those rank models from the single-rank one
 * (with a Bias after each Linear: the first split with its Linear, the
 * second kept after the inserted AllReduce), and they run to the same y. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "../import/model_builder.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define FLT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
enum { M = 6, K = 8, H = 12, N = 5 };

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static float w1_at(int h, int k) { return sinf(0.37f * (float)(h * K + k) + 0.1f) * 0.5f; }
static float w2_at(int n, int h) { return cosf(0.23f * (float)(n * H + h) + 0.7f) * 0.4f; }

static void set_init(Onnx__GraphProto *g, const char *name, int64_t rows, int64_t cols,
                     const float *vals)
{
    int64_t dims[2] = {rows, cols};
    mb_init(g, name, dims, 2);
    Onnx__TensorProto *t = g->initializer[g->n_initializer - 1];
    memcpy(t->raw_data.data, vals, sizeof(float) * (size_t)(rows * cols));
}

/* Rank r of w (w = 1: the whole model, no AllReduce unless `reduce`);
 * `gather` puts an AllGather where the AllReduce goes. */
static teexec_model *build(int r, int w, int reduce, int gather)
{
    int hs = H / w, h0 = r * hs;
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    mb_opset(m, "te.ops", 1);
    Onnx__GraphProto *g = mb_graph("tp_mlp");
    m->graph = g;
    mb_node(g, "fc1", "Linear", "te.ops", "x,w1", "h");
    mb_node(g, "act", "GELU", "te.ops", "h", "a");
    mb_node(g, "fc2", "Linear", "te.ops", "a,w2", reduce || gather ? "p" : "y");
    if (reduce || gather) mb_node(g, "ar", gather ? "AllGather" : "AllReduce", "te.ops", "p", "y");
    mb_input(g, "x", FLT, "6,8");
    char ydims[32];
    snprintf(ydims, sizeof ydims, "%d,%d", M, N);
    mb_output(g, "y", FLT, ydims);
    float w1[H * K], w2[N * H];
    for (int h = 0; h < hs; h++)
        for (int k = 0; k < K; k++) w1[h * K + k] = w1_at(h0 + h, k);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < hs; h++) w2[n * hs + h] = w2_at(n, h0 + h);
    set_init(g, "w1", hs, K, w1);
    set_init(g, "w2", N, hs, w2);
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_model *model;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &model));
    free(bytes);
    mb_free_all();
    return model;
}

/* The single-rank model with biases, written to `path`. */
static void write_biased(const char *path)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    mb_opset(m, "te.ops", 1);
    Onnx__GraphProto *g = mb_graph("mlp");
    m->graph = g;
    mb_node(g, "fc1", "Linear", "te.ops", "x,w1", "h");
    mb_node(g, "b1", "Bias", "te.ops", "h,bias1", "hb");
    mb_node(g, "act", "GELU", "te.ops", "hb", "a");
    mb_node(g, "fc2", "Linear", "te.ops", "a,w2", "p");
    mb_node(g, "b2", "Bias", "te.ops", "p,bias2", "y");
    mb_input(g, "x", FLT, "6,8");
    mb_output(g, "y", FLT, "6,5");
    mb_value_info_add(g, "h", FLT, "6,12"); /* recorded shapes the split must drop */
    mb_value_info_add(g, "a", FLT, "6,12");
    float w1[H * K], w2[N * H], b1[H], b2[N];
    for (int h = 0; h < H; h++)
        for (int k = 0; k < K; k++) w1[h * K + k] = w1_at(h, k);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) w2[n * H + h] = w2_at(n, h);
    for (int h = 0; h < H; h++) b1[h] = 0.05f * (float)(h - 6);
    for (int n = 0; n < N; n++) b2[n] = 0.3f - 0.1f * (float)n;
    set_init(g, "w1", H, K, w1);
    set_init(g, "w2", N, H, w2);
    int64_t dh = H, dn = N;
    mb_init(g, "bias1", &dh, 1);
    memcpy(g->initializer[g->n_initializer - 1]->raw_data.data, b1, sizeof b1);
    mb_init(g, "bias2", &dn, 1);
    memcpy(g->initializer[g->n_initializer - 1]->raw_data.data, b2, sizeof b2);
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, size, f), size);
    fclose(f);
    free(bytes);
    mb_free_all();
}

static teexec_tensor *input_x(void)
{
    float x[M * K];
    for (int i = 0; i < M * K; i++) x[i] = (float)((i * 7) % 13) / 6.0f - 1.0f;
    int64_t dims[2] = {M, K};
    teexec_tensor *t;
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, dims, x, sizeof x, &t));
    return t;
}

typedef struct rank_job {
    teexec_session *s;
    teexec_tensor *y;
    teexec_code code;
    char msg[300];
} rank_job;

static void *run_rank(void *arg)
{
    rank_job *j = arg;
    teexec_tensor *x = input_x();
    const char *in = "x", *out = "y";
    const teexec_tensor *xs[1] = {x};
    teexec_status *st = teexec_session_run(j->s, 1, &in, xs, 1, &out, &j->y);
    j->code = teexec_status_code(st);
    if (st) snprintf(j->msg, sizeof j->msg, "%s", teexec_status_message(st));
    teexec_status_destroy(st);
    teexec_tensor_destroy(x);
    return NULL;
}

static teexec_session *session_for(teexec_model *m, teexec_comm *c)
{
    teexec_session_options *so;
    ok(teexec_session_options_create(&so));
    ok(teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU));
    ok(teexec_session_options_set_comm(so, c));
    teexec_session *s;
    ok(teexec_session_create(m, so, &s));
    teexec_session_options_destroy(so);
    return s;
}

/* Runs ranks 0..w-1 of the split model in threads; jobs[r].y their outputs. */
static void run_split(int w, int gather, teexec_model **models, rank_job *jobs, teexec_comm **c)
{
    ok(teexec_comm_create_threads(w, 5000, c));
    pthread_t th[4];
    for (int r = 0; r < w; r++) {
        models[r] = build(r, w, 1, gather);
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].s = session_for(models[r], c[r]);
    }
    for (int r = 0; r < w; r++) assert_int_equal(pthread_create(&th[r], NULL, run_rank, &jobs[r]), 0);
    for (int r = 0; r < w; r++) pthread_join(th[r], NULL);
}

static void free_split(int w, teexec_model **models, rank_job *jobs, teexec_comm **c)
{
    for (int r = 0; r < w; r++) {
        teexec_tensor_destroy(jobs[r].y);
        teexec_session_destroy(jobs[r].s);
        teexec_model_destroy(models[r]);
        teexec_comm_destroy(c[r]);
    }
}

static void column_row_parallel_mlp(void **state)
{
    (void)state;
    teexec_model *full = build(0, 1, 0, 0);
    rank_job one = {.s = session_for(full, NULL)};
    run_rank(&one);
    assert_int_equal(one.code, TEEXEC_OK);
    const float *want = teexec_tensor_data_const(one.y);
    for (int w = 2; w <= 4; w++) {
        if (H % w) continue;
        teexec_model *models[4];
        rank_job jobs[4];
        teexec_comm *c[4];
        run_split(w, 0, models, jobs, c);
        double worst = 0, big = 0;
        for (int r = 0; r < w; r++) {
            if (jobs[r].code) fprintf(stderr, "rank %d: %s\n", r, jobs[r].msg);
            assert_int_equal(jobs[r].code, TEEXEC_OK);
            assert_int_equal(teexec_tensor_element_count(jobs[r].y), M * N);
            assert_memory_equal(teexec_tensor_data_const(jobs[r].y),
                                teexec_tensor_data_const(jobs[0].y), sizeof(float) * M * N);
        }
        const float *got = teexec_tensor_data_const(jobs[0].y);
        for (int i = 0; i < M * N; i++) {
            double d = fabs((double)got[i] - want[i]);
            if (d > worst) worst = d;
            if (fabs((double)want[i]) > big) big = fabs((double)want[i]);
        }
        fprintf(stderr, "%d ranks: worst |y - y_single| %.3g (max |y| %.3g)\n", w, worst, big);
        assert_true(worst <= 1e-5 * big);
        free_split(w, models, jobs, c);
    }
    /* without a group the AllReduce is the identity: rank 0's partial y */
    teexec_model *part = build(0, 2, 1, 0);
    rank_job alone = {.s = session_for(part, NULL)};
    run_rank(&alone);
    assert_int_equal(alone.code, TEEXEC_OK);
    assert_memory_not_equal(teexec_tensor_data_const(alone.y), want, sizeof(float) * M * N);
    teexec_tensor_destroy(alone.y);
    teexec_session_destroy(alone.s);
    teexec_model_destroy(part);
    teexec_tensor_destroy(one.y);
    teexec_session_destroy(one.s);
    teexec_model_destroy(full);
}

static void refusals(void **state)
{
    (void)state;
    teexec_model *models[2];
    rank_job jobs[2];
    teexec_comm *c[2];
    run_split(2, 1, models, jobs, c);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(jobs[r].code, TEEXEC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(jobs[r].msg, "world_size=1, but the run's tensor-parallel group "
                                            "has 2 ranks"));
    }
    free_split(2, models, jobs, c);
    /* a CUDA session does not take a host ("threads") group */
    teexec_comm *g[2];
    ok(teexec_comm_create_threads(2, 1000, g));
    teexec_model *m = build(0, 2, 1, 0);
    teexec_session_options *so;
    ok(teexec_session_options_create(&so));
    ok(teexec_session_options_set_device(so, TEEXEC_DEVICE_CUDA));
    ok(teexec_session_options_set_comm(so, g[0]));
    teexec_session *s = NULL;
    teexec_status *st = teexec_session_create(m, so, &s);
    assert_non_null(st); /* no GPU here: a device error; with one: unsupported */
    assert_true(teexec_status_code(st) == TEEXEC_ERR_UNSUPPORTED ||
                teexec_status_code(st) == TEEXEC_ERR_DEVICE);
    teexec_status_destroy(st);
    teexec_session_options_destroy(so);
    teexec_model_destroy(m);
    teexec_comm_destroy(g[0]);
    teexec_comm_destroy(g[1]);
}

/* x [rows_in, K] -> op(world_size = w) -> y; on rank r x = x0 * (r + 1). */
static teexec_model *build_comm(const char *op, int w, int rows_in, int rows_out)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    mb_opset(m, "te.ops", 1);
    Onnx__GraphProto *g = mb_graph("sp");
    m->graph = g;
    Onnx__NodeProto *n = mb_node(g, "c", op, "te.ops", "x", "y");
    mb_attr_int(n, "world_size", w);
    char d[32];
    snprintf(d, sizeof d, "%d,%d", rows_in, K);
    mb_input(g, "x", FLT, d);
    snprintf(d, sizeof d, "%d,%d", rows_out, K);
    mb_output(g, "y", FLT, d);
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_model *model;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &model));
    free(bytes);
    mb_free_all();
    return model;
}

typedef struct sp_job {
    teexec_session *s;
    teexec_tensor *x, *y;
    teexec_code code;
} sp_job;

static void *run_sp(void *arg)
{
    sp_job *j = arg;
    const char *in = "x", *out = "y";
    const teexec_tensor *xs[1] = {j->x};
    teexec_status *st = teexec_session_run(j->s, 1, &in, xs, 1, &out, &j->y);
    j->code = teexec_status_code(st);
    if (st) fprintf(stderr, "%s\n", teexec_status_message(st));
    teexec_status_destroy(st);
    return NULL;
}

static void sequence_parallel_ops(void **state)
{
    (void)state;
    enum { W = 3, R = 4 }; /* rows per rank */
    for (int which = 0; which < 2; which++) {
        bool gather = which == 0;
        teexec_comm *c[W];
        ok(teexec_comm_create_threads(W, 5000, c));
        sp_job jobs[W];
        teexec_model *models[W];
        pthread_t th[W];
        for (int r = 0; r < W; r++) {
            int rows = gather ? R : R * W;
            models[r] = build_comm(gather ? "AllGather" : "ReduceScatter", W, rows,
                                   gather ? R * W : R);
            float x[R * W * K];
            for (int i = 0; i < rows * K; i++) x[i] = (float)(i % 17) * 0.5f * (float)(r + 1);
            int64_t dims[2] = {rows, K};
            memset(&jobs[r], 0, sizeof jobs[r]);
            ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, dims, x,
                                         sizeof(float) * (size_t)(rows * K), &jobs[r].x));
            jobs[r].s = session_for(models[r], c[r]);
        }
        for (int r = 0; r < W; r++) assert_int_equal(pthread_create(&th[r], NULL, run_sp, &jobs[r]), 0);
        for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
        for (int r = 0; r < W; r++) {
            assert_int_equal(jobs[r].code, TEEXEC_OK);
            const float *y = teexec_tensor_data_const(jobs[r].y);
            if (gather) {
                assert_int_equal(teexec_tensor_dims(jobs[r].y)[0], R * W);
                for (int q = 0; q < W; q++)
                    for (int i = 0; i < R * K; i++)
                        assert_true(y[q * R * K + i] == (float)(i % 17) * 0.5f * (float)(q + 1));
            } else {
                assert_int_equal(teexec_tensor_dims(jobs[r].y)[0], R);
                for (int i = 0; i < R * K; i++) {
                    float v = (float)((r * R * K + i) % 17) * 0.5f;
                    assert_true(y[i] == v * 1.0f + v * 2.0f + v * 3.0f);
                }
            }
        }
        for (int r = 0; r < W; r++) {
            teexec_tensor_destroy(jobs[r].x);
            teexec_tensor_destroy(jobs[r].y);
            teexec_session_destroy(jobs[r].s);
            teexec_model_destroy(models[r]);
            teexec_comm_destroy(c[r]);
        }
    }
    /* world_size 1 without a group: the identity */
    teexec_model *m = build_comm("ReduceScatter", 1, R, R);
    sp_job one = {.s = session_for(m, NULL)};
    float x[R * K];
    for (int i = 0; i < R * K; i++) x[i] = (float)i;
    int64_t dims[2] = {R, K};
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 2, dims, x, sizeof x, &one.x));
    run_sp(&one);
    assert_int_equal(one.code, TEEXEC_OK);
    assert_memory_equal(teexec_tensor_data_const(one.y), x, sizeof x);
    teexec_tensor_destroy(one.x);
    teexec_tensor_destroy(one.y);
    teexec_session_destroy(one.s);
    teexec_model_destroy(m);
}

static void run_models(teexec_model *full, teexec_model **ranks, int w)
{
    rank_job one = {.s = session_for(full, NULL)};
    run_rank(&one);
    assert_int_equal(one.code, TEEXEC_OK);
    teexec_comm *c[4];
    rank_job jobs[4];
    ok(teexec_comm_create_threads(w, 5000, c));
    pthread_t th[4];
    for (int r = 0; r < w; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].s = session_for(ranks[r], c[r]);
    }
    for (int r = 0; r < w; r++) assert_int_equal(pthread_create(&th[r], NULL, run_rank, &jobs[r]), 0);
    for (int r = 0; r < w; r++) pthread_join(th[r], NULL);
    const float *want = teexec_tensor_data_const(one.y);
    for (int r = 0; r < w; r++) {
        if (jobs[r].code) fprintf(stderr, "rank %d: %s\n", r, jobs[r].msg);
        assert_int_equal(jobs[r].code, TEEXEC_OK);
        const float *got = teexec_tensor_data_const(jobs[r].y);
        for (int i = 0; i < M * N; i++) assert_true(fabs((double)got[i] - want[i]) <= 1e-5);
        teexec_tensor_destroy(jobs[r].y);
        teexec_session_destroy(jobs[r].s);
        teexec_comm_destroy(c[r]);
    }
    teexec_tensor_destroy(one.y);
    teexec_session_destroy(one.s);
}

/* models/te_mlp (LayerNorm, Linear, Bias, GELU, Linear, Bias, residual)
 * split over 2 ranks: each rank's y equals the whole model's on its
 * committed input within fp32 tolerance. */
static void split_te_mlp(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[1024], xpath[1024], dir[] = "/tmp/teexec_tpm_XXXXXX", rp[2][256];
    snprintf(path, sizeof path, "%s/models/te_mlp/model.onnx", root ? root : ".");
    snprintf(xpath, sizeof xpath, "%s/models/te_mlp/inputs/x.npy", root ? root : ".");
    assert_non_null(mkdtemp(dir));
    teexec_model *full, *ranks[2];
    ok(teexec_model_load_file(path, NULL, &full));
    teexec_tensor *x;
    ok(teexec_tensor_load_file(xpath, &x));
    for (int r = 0; r < 2; r++) {
        snprintf(rp[r], sizeof rp[r], "%s/r%d.onnx", dir, r);
        int n = 0;
        ok(teexec_model_split_tensor_parallel(full, 2, r, rp[r], &n));
        assert_int_equal(n, 1);
        ok(teexec_model_load_file(rp[r], NULL, &ranks[r]));
    }
    sp_job one = {.s = session_for(full, NULL), .x = x};
    run_sp(&one);
    assert_int_equal(one.code, TEEXEC_OK);
    teexec_comm *c[2];
    ok(teexec_comm_create_threads(2, 5000, c));
    sp_job jobs[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) jobs[r] = (sp_job){.s = session_for(ranks[r], c[r]), .x = x};
    for (int r = 0; r < 2; r++) assert_int_equal(pthread_create(&th[r], NULL, run_sp, &jobs[r]), 0);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    const float *want = teexec_tensor_data_const(one.y);
    uint64_t n = teexec_tensor_element_count(one.y);
    double worst = 0;
    for (int r = 0; r < 2; r++) {
        assert_int_equal(jobs[r].code, TEEXEC_OK);
        assert_int_equal(teexec_tensor_element_count(jobs[r].y), n);
        const float *got = teexec_tensor_data_const(jobs[r].y);
        for (uint64_t i = 0; i < n; i++)
            if (fabs((double)got[i] - want[i]) > worst) worst = fabs((double)got[i] - want[i]);
        teexec_tensor_destroy(jobs[r].y);
        teexec_session_destroy(jobs[r].s);
        teexec_comm_destroy(c[r]);
        teexec_model_destroy(ranks[r]);
        unlink(rp[r]);
    }
    fprintf(stderr, "te_mlp over 2 ranks: worst |y - y_single| %.3g\n", worst);
    assert_true(worst < 1e-5);
    teexec_tensor_destroy(one.y);
    teexec_session_destroy(one.s);
    teexec_tensor_destroy(x);
    teexec_model_destroy(full);
    rmdir(dir);
}

static void split_writes_rank_models(void **state)
{
    (void)state;
    char dir[] = "/tmp/teexec_tp_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], rp[4][256];
    snprintf(path, sizeof path, "%s/mlp.onnx", dir);
    write_biased(path);
    teexec_model *full;
    ok(teexec_model_load_file(path, NULL, &full));
    for (int w = 2; w <= 4; w += 2) {
        teexec_model *ranks[4];
        for (int r = 0; r < w; r++) {
            snprintf(rp[r], sizeof rp[r], "%s/r%d.onnx", dir, r);
            int n = -1;
            ok(teexec_model_split_tensor_parallel(full, w, r, rp[r], &n));
            assert_int_equal(n, 1);
            ok(teexec_model_load_file(rp[r], NULL, &ranks[r]));
            /* W1, bias1 and W2 are 1/w of theirs; bias2 is whole */
            teexec_param_stats ps, fs;
            teexec_model_param_stats(ranks[r], &ps);
            teexec_model_param_stats(full, &fs);
            assert_int_equal(ps.elements, (uint64_t)((H * K + H + N * H) / w + N));
            assert_int_equal(fs.elements, (uint64_t)(H * K + H + N * H + N));
            int has_ar = 0;
            for (size_t i = 0; i < teexec_model_op_count(ranks[r]); i++)
                if (!strcmp(teexec_model_op(ranks[r], i)->op_type, "AllReduce")) has_ar = 1;
            assert_true(has_ar);
        }
        run_models(full, ranks, w);
        for (int r = 0; r < w; r++) {
            teexec_model_destroy(ranks[r]);
            unlink(rp[r]);
        }
    }
    /* H = 12 does not split 5 ways: nothing to split */
    teexec_status *st = teexec_model_split_tensor_parallel(full, 5, 0, rp[0], NULL);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    /* the CLI: OUT.rank<R>.onnx per rank */
    const char *build = getenv("TEEXEC_BUILD_ROOT");
    if (build) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd,
                 "'%s/tools/teexec' convert '%s' '%s/tp.onnx' --tensor-parallel 2 > /dev/null",
                 build, path, dir);
        int rc = system(cmd);
        assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
        teexec_model *ranks[2];
        for (int r = 0; r < 2; r++) {
            snprintf(rp[r], sizeof rp[r], "%s/tp.rank%d.onnx", dir, r);
            ok(teexec_model_load_file(rp[r], NULL, &ranks[r]));
        }
        run_models(full, ranks, 2);
        for (int r = 0; r < 2; r++) {
            teexec_model_destroy(ranks[r]);
            unlink(rp[r]);
        }
    }
    teexec_model_destroy(full);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(column_row_parallel_mlp),
        cmocka_unit_test(refusals),
        cmocka_unit_test(split_writes_rank_models),
        cmocka_unit_test(sequence_parallel_ops),
        cmocka_unit_test(split_te_mlp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
