/* test_gpu_nccl_multi.c - NCCL communicators over two GPUs
 * (exec/comm_nccl.c): one thread per GPU (ncclCommInitAll) and one process
 * per GPU (this program re-executed as `--child RANK FILE`, the unique id
 * through the rendezvous file); the collectives' values; a rank that
 * aborts or never arrives ends the others with TEEXEC_ERR_COMM within the
 * timeout; data parallel CUDA trainers, one per GPU over NCCL, against one
 * trainer (gpu_dp.h: the same rows on both ranks bitwise, a split batch
 * within 1e-4); tensor parallel CUDA sessions (models/te_mlp split by
 * teexec_model_split_tensor_parallel, one rank per GPU, te.ops AllReduce
 * through NCCL) against one session within 1e-4; the refusals (a CPU
 * trainer with a device-memory group, zero1 on the CUDA trainer). Exits 77 with the reason on a machine with
 * fewer than two GPUs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/gpu_dp.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { N = 1 << 16 };

typedef struct job {
    teexec_comm *c;
    int mode; /* 0: collectives, 1: rank 1 aborts */
    int failed;
    teexec_code code;
    char msg[400];
} job;

static void note(job *j, teexec_status *st)
{
    if (!st) return;
    if (!j->code) {
        j->code = teexec_status_code(st);
        snprintf(j->msg, sizeof j->msg, "%s", teexec_status_message(st));
    }
    teexec_status_destroy(st);
}

/* Rank r sends x_r[i] = (r + 1) * i (exact in fp32 for these sizes). */
static int check_collectives(teexec_comm *c, job *j)
{
    int r = teexec_comm_rank(c), w = teexec_comm_world_size(c);
    float *h = malloc(sizeof(float) * N * (size_t)w), *back = malloc(sizeof(float) * N * (size_t)w);
    if (!h || !back) return 1;
    for (int i = 0; i < N; i++) h[i] = (float)((r + 1) * (i % 1024));
    float *d = NULL, *e = NULL;
    if (cudaMalloc((void **)&d, sizeof(float) * N * (size_t)w) != cudaSuccess ||
        cudaMalloc((void **)&e, sizeof(float) * N * (size_t)w) != cudaSuccess)
        return 1;
    cudaMemcpy(d, h, sizeof(float) * N, cudaMemcpyHostToDevice);
    int bad = 0;
    teexec_status *st = teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_FLOAT, d, e, N);
    if (j) note(j, st); else if (st) { bad = 1; teexec_status_destroy(st); }
    cudaMemcpy(back, e, sizeof(float) * N, cudaMemcpyDeviceToHost);
    float ranks_sum = (float)(w * (w + 1) / 2);
    for (int i = 0; i < N && !bad; i++) bad = back[i] != ranks_sum * (float)(i % 1024);
    st = teexec_comm_all_gather(c, TEEXEC_DTYPE_FLOAT, d, e, N);
    if (j) note(j, st); else if (st) { bad = 1; teexec_status_destroy(st); }
    cudaMemcpy(back, e, sizeof(float) * N * (size_t)w, cudaMemcpyDeviceToHost);
    for (int q = 0; q < w && !bad; q++)
        for (int i = 0; i < N && !bad; i++) bad = back[q * N + i] != (float)((q + 1) * (i % 1024));
    st = teexec_comm_barrier(c);
    if (j) note(j, st); else if (st) { bad = 1; teexec_status_destroy(st); }
    cudaFree(d);
    cudaFree(e);
    free(h);
    free(back);
    return bad;
}

static void *run_job(void *arg)
{
    job *j = arg;
    int r = teexec_comm_rank(j->c);
    cudaSetDevice(r);
    if (j->mode == 1) {
        if (r == 1) {
            teexec_comm_abort(j->c, "rank 1 gives up");
            return NULL;
        }
        float *d = NULL;
        cudaMalloc((void **)&d, sizeof(float) * 16);
        note(j, teexec_comm_all_reduce_sum(j->c, TEEXEC_DTYPE_FLOAT, d, d, 16));
        cudaFree(d);
        return NULL;
    }
    j->failed = check_collectives(j->c, j);
    return NULL;
}

static void threads_per_gpu(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        teexec_comm *c[2];
        TG_OK(teexec_comm_create_nccl_threads(2, NULL, 3000, c));
        job jobs[2] = {{.c = c[0], .mode = mode}, {.c = c[1], .mode = mode}};
        pthread_t th[2];
        time_t t0 = time(NULL);
        for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        assert_true(time(NULL) - t0 < 60);
        if (mode == 0) {
            for (int i = 0; i < 2; i++) {
                if (jobs[i].code) fprintf(stderr, "rank %d: %s\n", i, jobs[i].msg);
                assert_int_equal(jobs[i].code, TEEXEC_OK);
                assert_int_equal(jobs[i].failed, 0);
            }
        } else {
            /* rank 0 waits for a peer that left: the timeout ends it */
            assert_int_equal(jobs[0].code, TEEXEC_ERR_COMM);
        }
        teexec_comm_destroy(c[0]);
        teexec_comm_destroy(c[1]);
    }
    tg_record("nccl_threads", 1, "2 GPUs, one thread each; abort ends the peer");
}

typedef struct tp_job {
    teexec_session *s;
    const teexec_tensor *x;
    teexec_tensor *y;
    teexec_code code;
    char msg[400];
} tp_job;

static void *tp_run(void *arg)
{
    tp_job *j = arg;
    const char *in = "x", *out = "y";
    teexec_status *st = teexec_session_run(j->s, 1, &in, &j->x, 1, &out, &j->y);
    j->code = teexec_status_code(st);
    if (st) snprintf(j->msg, sizeof j->msg, "%s", teexec_status_message(st));
    teexec_status_destroy(st);
    return NULL;
}

static teexec_session *cuda_session(teexec_model *m, teexec_comm *c)
{
    teexec_session_options *so;
    TG_OK(teexec_session_options_create(&so));
    TG_OK(teexec_session_options_set_device(so, TEEXEC_DEVICE_CUDA));
    TG_OK(teexec_session_options_set_deterministic(so, 1));
    TG_OK(teexec_session_options_set_comm(so, c));
    teexec_session *s;
    TG_OK(teexec_session_create(m, so, &s));
    teexec_session_options_destroy(so);
    return s;
}

static void tensor_parallel_sessions(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[1024], xpath[1024], rp[2][256], dir[] = "/tmp/teexec_tpg_XXXXXX";
    snprintf(path, sizeof path, "%s/models/te_mlp/model.onnx", root ? root : ".");
    snprintf(xpath, sizeof xpath, "%s/models/te_mlp/inputs/x.npy", root ? root : ".");
    assert_non_null(mkdtemp(dir));
    teexec_model *full, *ranks[2];
    teexec_tensor *x;
    TG_OK(teexec_model_load_file(path, NULL, &full));
    TG_OK(teexec_tensor_load_file(xpath, &x));
    for (int r = 0; r < 2; r++) {
        snprintf(rp[r], sizeof rp[r], "%s/r%d.onnx", dir, r);
        TG_OK(teexec_model_split_tensor_parallel(full, 2, r, rp[r], NULL));
        TG_OK(teexec_model_load_file(rp[r], NULL, &ranks[r]));
    }
    cudaSetDevice(0);
    tp_job one = {.s = cuda_session(full, NULL), .x = x};
    tp_run(&one);
    assert_int_equal(one.code, TEEXEC_OK);
    teexec_comm *c[2];
    TG_OK(teexec_comm_create_nccl_threads(2, NULL, 60000, c));
    tp_job jobs[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].s = cuda_session(ranks[r], c[r]);
        jobs[r].x = x;
    }
    for (int r = 0; r < 2; r++) assert_int_equal(pthread_create(&th[r], NULL, tp_run, &jobs[r]), 0);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    const float *want = teexec_tensor_data_const(one.y);
    uint64_t n = teexec_tensor_element_count(one.y);
    double worst = 0;
    for (int r = 0; r < 2; r++) {
        if (jobs[r].code) fprintf(stderr, "rank %d: %s\n", r, jobs[r].msg);
        assert_int_equal(jobs[r].code, TEEXEC_OK);
        const float *got = teexec_tensor_data_const(jobs[r].y);
        for (uint64_t i = 0; i < n; i++)
            if (fabs((double)got[i] - want[i]) > worst) worst = fabs((double)got[i] - want[i]);
        teexec_tensor_destroy(jobs[r].y);
        teexec_session_destroy(jobs[r].s);
        teexec_comm_destroy(c[r]);
        teexec_model_destroy(ranks[r]);
        unlink(rp[r]);
    }
    fprintf(stderr, "te_mlp over 2 GPUs: worst |y - y_one_gpu| %.3g\n", worst);
    assert_true(worst < 1e-4);
    teexec_tensor_destroy(one.y);
    teexec_session_destroy(one.s);
    teexec_tensor_destroy(x);
    teexec_model_destroy(full);
    rmdir(dir);
    tg_record("tp_cuda_two_gpus", 1, "te_mlp split over 2 GPUs within 1e-4 of one");
}

static const char *self_exe;

static void processes_per_gpu(void **state)
{
    (void)state;
    char file[] = "/tmp/teexec_nccl_rdv_XXXXXX";
    int fd = mkstemp(file);
    assert_true(fd >= 0);
    close(fd);
    unlink(file); /* rank 0 creates it: a stale id must not be read */
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        char rank[8];
        snprintf(rank, sizeof rank, "%d", r);
        char *argv[] = {(char *)self_exe, "--child", rank, file, NULL};
        assert_int_equal(posix_spawn(&pid[r], self_exe, NULL, NULL, argv, environ), 0);
    }
    for (int r = 0; r < 2; r++) {
        int st = 0;
        assert_int_equal(waitpid(pid[r], &st, 0), pid[r]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    unlink(file);
    /* rank 0 alone: its peer never comes, the init times out */
    teexec_comm *c = NULL;
    teexec_status *st = teexec_comm_create_nccl(2, 0, 0, file, 3000, &c);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_COMM);
    teexec_status_destroy(st);
    unlink(file);
    /* rank 1 alone: no id appears */
    st = teexec_comm_create_nccl(2, 1, 1, file, 1000, &c);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_COMM);
    assert_non_null(strstr(teexec_status_message(st), "did rank 0 start"));
    teexec_status_destroy(st);
    tg_record("nccl_processes", 1, "2 processes through a rendezvous file; timeouts");
}

static void trainers_refuse(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/mlp/model.onnx", root ? root : ".");
    teexec_model *m;
    TG_OK(teexec_model_load_file(path, NULL, &m));
    teexec_comm *c[2];
    TG_OK(teexec_comm_create_nccl_threads(2, NULL, 3000, c));
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.comm = c[0];
    teexec_trainer *tr = NULL;
    teexec_status *st = teexec_trainer_create(m, &o, &tr);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "host communicator"));
    teexec_status_destroy(st);
    teexec_comm_destroy(c[0]);
    teexec_comm_destroy(c[1]);
    teexec_comm *t[2];
    TG_OK(teexec_comm_create_threads(2, 1000, t));
    o.device = TEEXEC_DEVICE_CUDA;
    o.comm = t[0];
    o.zero1 = 1;
    st = teexec_trainer_create(m, &o, &tr);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "zero1"));
    teexec_status_destroy(st);
    teexec_comm_destroy(t[0]);
    teexec_comm_destroy(t[1]);
    teexec_model_destroy(m);
}

static void cuda_trainers_two_gpus(void **state)
{
    (void)state;
    teexec_comm *c[2];
    TG_OK(teexec_comm_create_nccl_threads(2, NULL, 60000, c));
    dp_check(c, 2, "2 CUDA trainers on 2 GPUs over NCCL");
    teexec_comm_destroy(c[0]);
    teexec_comm_destroy(c[1]);
    tg_record("dp_cuda_nccl_two_gpus", 1, "replicated bitwise, split within 1e-4");
}

static int child(int rank, const char *file)
{
    teexec_comm *c = NULL;
    teexec_status *st = teexec_comm_create_nccl(2, rank, rank, file, 30000, &c);
    if (st) {
        fprintf(stderr, "child %d: %s\n", rank, teexec_status_message(st));
        teexec_status_destroy(st);
        return 1;
    }
    cudaSetDevice(rank);
    int bad = check_collectives(c, NULL);
    teexec_comm_destroy(c);
    if (bad) fprintf(stderr, "child %d: wrong collective results\n", rank);
    return bad;
}

int main(int argc, char **argv)
{
    self_exe = argv[0];
    if (argc == 4 && !strcmp(argv[1], "--child")) return child(atoi(argv[2]), argv[3]);
    int n = teexec_comm_gpu_count();
    if (n < 2) {
        fprintf(stderr, "test_gpu_nccl_multi: SKIP: needs 2 GPUs, %d visible\n", n);
        return 77;
    }
    tg_require_gpu("test_gpu_nccl_multi");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(threads_per_gpu),
        cmocka_unit_test(processes_per_gpu),
        cmocka_unit_test(trainers_refuse),
        cmocka_unit_test(cuda_trainers_two_gpus),
        cmocka_unit_test(tensor_parallel_sessions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
