/* test_gpu_nccl.c - the NCCL communicator (exec/comm_nccl.c) on one GPU:
 * a world of one through NCCL itself (ncclCommInitRank with a single rank,
 * device buffers): all-reduce, all-gather and reduce-scatter return their
 * input (float, double, bf16), the barrier returns, a collective after
 * teexec_comm_abort fails with TEEXEC_ERR_COMM, and a CPU trainer takes a
 * one-rank NCCL communicator as the identity. Data parallel CUDA trainers
 * on this one GPU over a "threads" group (gradients averaged through the
 * host): two ranks given the same rows follow one trainer bitwise, a
 * split batch within 1e-4 (gpu_dp.h). Exits 77 without a GPU; exits 77
 * with the reason when NCCL cannot be loaded. The multi-GPU paths are
 * test_gpu_nccl_multi.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/gpu_dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static teexec_comm *one_rank(void)
{
    teexec_comm *c = NULL;
    TG_OK(teexec_comm_create_nccl(1, 0, 0, NULL, 20000, &c));
    assert_int_equal(teexec_comm_world_size(c), 1);
    assert_string_equal(teexec_comm_backend_name(c), "nccl");
    return c;
}

static void single_rank_collectives(void **state)
{
    (void)state;
    teexec_comm *c = one_rank();
    enum { N = 4099 };
    float h[N], back[N];
    for (int i = 0; i < N; i++) h[i] = (float)i * 0.25f - 100.0f;
    void *d = tg_dev_upload(h, sizeof h);
    void *e = tg_dev_alloc(sizeof h);
    TG_OK(teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_FLOAT, d, e, N));
    tg_download(back, e, sizeof back);
    assert_memory_equal(back, h, sizeof h);
    TG_OK(teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_FLOAT, d, d, N)); /* in place */
    tg_download(back, d, sizeof back);
    assert_memory_equal(back, h, sizeof h);
    TG_OK(teexec_comm_all_gather(c, TEEXEC_DTYPE_FLOAT, d, e, N));
    tg_download(back, e, sizeof back);
    assert_memory_equal(back, h, sizeof h);
    TG_OK(teexec_comm_reduce_scatter(c, TEEXEC_DTYPE_FLOAT, d, e, N));
    tg_download(back, e, sizeof back);
    assert_memory_equal(back, h, sizeof h);
    double hd[16], bd[16];
    for (int i = 0; i < 16; i++) hd[i] = 1.0 / (i + 3);
    void *dd = tg_dev_upload(hd, sizeof hd);
    TG_OK(teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_DOUBLE, dd, dd, 16));
    tg_download(bd, dd, sizeof bd);
    assert_memory_equal(bd, hd, sizeof hd);
    uint16_t hb[16], bb[16];
    for (int i = 0; i < 16; i++) hb[i] = (uint16_t)(0x3f80 + i);
    void *db = tg_dev_upload(hb, sizeof hb);
    TG_OK(teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_BFLOAT16, db, db, 16));
    tg_download(bb, db, sizeof bb);
    assert_memory_equal(bb, hb, sizeof hb);
    TG_OK(teexec_comm_barrier(c));
    /* after an abort every call fails, with the reason */
    teexec_comm_abort(c, "test abort");
    teexec_status *st = teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_FLOAT, d, d, N);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_COMM);
    assert_non_null(strstr(teexec_status_message(st), "test abort"));
    teexec_status_destroy(st);
    tg_dev_free(d);
    tg_dev_free(e);
    tg_dev_free(dd);
    tg_dev_free(db);
    teexec_comm_destroy(c);
    tg_record("nccl_single_rank", 1, "world 1 through NCCL: collectives return their input");
}

static void cpu_trainer_world_one(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/mlp/model.onnx", root ? root : ".");
    teexec_model *m;
    TG_OK(teexec_model_load_file(path, NULL, &m));
    teexec_comm *c = one_rank();
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    o.comm = c; /* world 1: the identity, accepted */
    teexec_trainer *tr = NULL;
    TG_OK(teexec_trainer_create(m, &o, &tr));
    teexec_trainer_destroy(tr);
    teexec_comm_destroy(c);
    teexec_model_destroy(m);
}

static void cuda_trainers_one_gpu(void **state)
{
    (void)state;
    teexec_comm *c[2];
    TG_OK(teexec_comm_create_threads(2, 60000, c));
    dp_check(c, 2, "2 CUDA trainers on one GPU, threads group");
    teexec_comm_destroy(c[0]);
    teexec_comm_destroy(c[1]);
    tg_record("dp_cuda_threads_one_gpu", 1, "replicated bitwise, split within 1e-4");
}

int main(void)
{
    tg_require_gpu("test_gpu_nccl");
    teexec_comm *probe = NULL;
    teexec_status *st = teexec_comm_create_nccl(1, 0, 0, NULL, 20000, &probe);
    if (st && teexec_status_code(st) == TEEXEC_ERR_DEVICE &&
        strstr(teexec_status_message(st), "cannot load NCCL")) {
        fprintf(stderr, "test_gpu_nccl: SKIP: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        return 77;
    }
    teexec_status_destroy(st);
    teexec_comm_destroy(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(single_rank_collectives),
        cmocka_unit_test(cpu_trainer_world_one),
        cmocka_unit_test(cuda_trainers_one_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
