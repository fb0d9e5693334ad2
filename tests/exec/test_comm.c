/* test_comm.c - the thread backend of teexec_comm: every collective's
 * values on several ranks (in place too), bitwise agreement between ranks
 * and runs, and the failure paths (a rank that never arrives, an abort,
 * mismatched calls) ending every rank with TEEXEC_ERR_COMM, not a hang.
 * The NCCL constructors' refusals in a build without CUDA, or on a machine
 * without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "teexec/teexec.h"
#include "teexec_config.h"

#define W 3
#define N 1000

typedef struct job {
    teexec_comm *c;
    int mode;
    teexec_code code[8]; /* per call, TEEXEC_OK = succeeded */
    char msg[256];
    float fsum[N];
    double dsum[N];
    uint16_t bsum[N];
    float gathered[W * 4];
    float scattered[4];
} job;

static void note(job *j, int k, teexec_status *st)
{
    j->code[k] = st ? teexec_status_code(st) : TEEXEC_OK;
    if (st) {
        snprintf(j->msg, sizeof j->msg, "%s", teexec_status_message(st));
        teexec_status_destroy(st);
    }
}

/* Values with a wide spread of magnitudes, so sum order shows in the bits. */
static float val(int rank, int i) { return (float)((i % 7) + 1) * (rank == 1 ? 1e-7f : 1.0f) + (float)rank * 0.3f + (float)i * 1e-3f; }

static void *run_collectives(void *arg)
{
    job *j = arg;
    int r = teexec_comm_rank(j->c);
    for (int i = 0; i < N; i++) {
        j->fsum[i] = val(r, i);
        j->dsum[i] = (double)val(r, i) / 3.0;
        float f = (float)(r + 1) * 0.5f;
        uint32_t u;
        memcpy(&u, &f, 4);
        j->bsum[i] = (uint16_t)(u >> 16);
    }
    /* in place */
    note(j, 0, teexec_comm_all_reduce_sum(j->c, TEEXEC_DTYPE_FLOAT, j->fsum, j->fsum, N));
    note(j, 1, teexec_comm_all_reduce_sum(j->c, TEEXEC_DTYPE_DOUBLE, j->dsum, j->dsum, N));
    note(j, 2, teexec_comm_all_reduce_sum(j->c, TEEXEC_DTYPE_BFLOAT16, j->bsum, j->bsum, N));
    /* all-gather in place: this rank's block already sits in recv */
    for (int i = 0; i < 4; i++) j->gathered[r * 4 + i] = (float)(r * 10 + i);
    note(j, 3, teexec_comm_all_gather(j->c, TEEXEC_DTYPE_FLOAT, j->gathered + r * 4, j->gathered,
                                      4));
    float send[W * 4];
    for (int i = 0; i < W * 4; i++) send[i] = (float)(i * (r + 1));
    note(j, 4, teexec_comm_reduce_scatter(j->c, TEEXEC_DTYPE_FLOAT, send, j->scattered, 4));
    note(j, 5, teexec_comm_barrier(j->c));
    return NULL;
}

static void run_group(job *jobs, int world, void *(*fn)(void *))
{
    pthread_t th[8];
    for (int i = 0; i < world; i++) assert_int_equal(pthread_create(&th[i], NULL, fn, &jobs[i]), 0);
    for (int i = 0; i < world; i++) pthread_join(th[i], NULL);
}

static job *make_jobs(int world, int timeout_ms, int mode)
{
    teexec_comm *c[8];
    teexec_status *st = teexec_comm_create_threads(world, timeout_ms, c);
    assert_null(st);
    job *jobs = calloc((size_t)world, sizeof *jobs);
    assert_non_null(jobs);
    for (int i = 0; i < world; i++) {
        jobs[i].c = c[i];
        jobs[i].mode = mode;
        assert_int_equal(teexec_comm_rank(c[i]), i);
        assert_int_equal(teexec_comm_world_size(c[i]), world);
        assert_string_equal(teexec_comm_backend_name(c[i]), "threads");
    }
    return jobs;
}

static void free_jobs(job *jobs, int world)
{
    for (int i = 0; i < world; i++) teexec_comm_destroy(jobs[i].c);
    free(jobs);
}

static void collectives_values(void **state)
{
    (void)state;
    job *a = make_jobs(W, 10000, 0);
    run_group(a, W, run_collectives);
    for (int r = 0; r < W; r++)
        for (int k = 0; k < 6; k++) assert_int_equal(a[r].code[k], TEEXEC_OK);
    for (int i = 0; i < N; i++) {
        /* rank order 0, 1, 2 in fp32 */
        float want = val(0, i);
        want += val(1, i);
        want += val(2, i);
        assert_memory_equal(&a[0].fsum[i], &want, 4);
        double dw = (double)val(0, i) / 3.0;
        dw += (double)val(1, i) / 3.0;
        dw += (double)val(2, i) / 3.0;
        assert_memory_equal(&a[0].dsum[i], &dw, 8);
        assert_int_equal(a[0].bsum[i], 0x4040); /* 0.5 + 1 + 1.5 = 3.0 */
    }
    for (int r = 1; r < W; r++) {
        assert_memory_equal(a[r].fsum, a[0].fsum, sizeof a[0].fsum);
        assert_memory_equal(a[r].dsum, a[0].dsum, sizeof a[0].dsum);
        assert_memory_equal(a[r].bsum, a[0].bsum, sizeof a[0].bsum);
    }
    for (int r = 0; r < W; r++) {
        for (int q = 0; q < W; q++)
            for (int i = 0; i < 4; i++)
                assert_true(a[r].gathered[q * 4 + i] == (float)(q * 10 + i));
        /* block r of send summed over ranks: (r*4+i) * (1+2+3) */
        for (int i = 0; i < 4; i++) assert_true(a[r].scattered[i] == (float)((r * 4 + i) * 6));
    }
    /* a second group gives the same bits */
    job *b = make_jobs(W, 10000, 0);
    run_group(b, W, run_collectives);
    assert_memory_equal(a[0].fsum, b[0].fsum, sizeof a[0].fsum);
    assert_memory_equal(a[0].dsum, b[0].dsum, sizeof a[0].dsum);
    free_jobs(a, W);
    free_jobs(b, W);
}

/* mode 1: rank 2 never calls; mode 2: rank 2 aborts; mode 3: rank 2 calls
 * a different collective. */
static void *run_faulty(void *arg)
{
    job *j = arg;
    float x[4] = {1, 2, 3, 4};
    if (teexec_comm_rank(j->c) == 2) {
        if (j->mode == 1) return NULL;
        if (j->mode == 2) {
            teexec_comm_abort(j->c, "its input file is missing");
            return NULL;
        }
        note(j, 0, teexec_comm_all_gather(j->c, TEEXEC_DTYPE_FLOAT, x, x, 1));
        return NULL;
    }
    note(j, 0, teexec_comm_all_reduce_sum(j->c, TEEXEC_DTYPE_FLOAT, x, x, 4));
    /* the group stays failed: later calls fail at once */
    note(j, 1, teexec_comm_barrier(j->c));
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void failures_end_every_rank(void **state)
{
    (void)state;
    const char *want[] = {NULL, "waited 200 ms", "rank 2 aborted: its input file is missing",
                          "mismatched collectives"};
    for (int mode = 1; mode <= 3; mode++) {
        job *a = make_jobs(W, 200, mode);
        double t0 = now();
        run_group(a, W, run_faulty);
        double dt = now() - t0;
        assert_true(dt < 5.0); /* the timeout is 0.2 s: nobody hangs */
        for (int r = 0; r < 2; r++) {
            assert_int_equal(a[r].code[0], TEEXEC_ERR_COMM);
            assert_int_equal(a[r].code[1], TEEXEC_ERR_COMM);
            if (!strstr(a[r].msg, want[mode])) fprintf(stderr, "mode %d: %s\n", mode, a[r].msg);
            assert_non_null(strstr(a[r].msg, want[mode]));
        }
        if (mode == 3) assert_int_equal(a[2].code[0], TEEXEC_ERR_COMM);
        free_jobs(a, W);
    }
}

static void world_one_and_arguments(void **state)
{
    (void)state;
    teexec_comm *c;
    assert_null(teexec_comm_create_threads(1, 0, &c));
    float x[3] = {1, 2, 3}, y[3];
    assert_null(teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_FLOAT, x, y, 3));
    assert_memory_equal(x, y, sizeof x);
    assert_null(teexec_comm_barrier(c));
    int64_t bad[1] = {0};
    teexec_status *st = teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_INT64, bad, bad, 1);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    teexec_comm_destroy(c);
    teexec_comm *cs[2];
    st = teexec_comm_create_threads(0, 0, cs);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    assert_int_equal(teexec_comm_world_size(NULL), 1);
    assert_string_equal(teexec_code_name(TEEXEC_ERR_COMM), "communication failure");
}

static void nccl_without_cuda(void **state)
{
    (void)state;
#if TEEXEC_HAVE_CUDA
    /* a CUDA build on a machine without a GPU: NCCL loads (or says why
     * not), and the ranks are refused for want of devices, not hung */
    if (teexec_comm_gpu_count() > 0) skip();
    teexec_comm *c = NULL, *cs[2];
    teexec_status *st = teexec_comm_create_nccl(1, 0, 0, NULL, 2000, &c);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_DEVICE);
    assert_null(c);
    teexec_status_destroy(st);
    st = teexec_comm_create_nccl_threads(2, NULL, 2000, cs);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_DEVICE);
    teexec_status_destroy(st);
#else
    teexec_comm *c = (teexec_comm *)1;
    teexec_status *st = teexec_comm_create_nccl(1, 0, 0, NULL, 0, &c);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_null(c);
    teexec_status_destroy(st);
    st = teexec_comm_create_nccl(2, 1, 0, NULL, 0, &c);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT); /* no rendezvous */
    teexec_status_destroy(st);
    teexec_comm *cs[2];
    st = teexec_comm_create_nccl_threads(2, NULL, 0, cs);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    assert_int_equal(teexec_comm_gpu_count(), 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collectives_values),
        cmocka_unit_test(failures_end_every_rank),
        cmocka_unit_test(world_one_and_arguments),
        cmocka_unit_test(nccl_without_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
