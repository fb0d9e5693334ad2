/* comm_nccl_none.c - the NCCL backend's entry points (comm.h) in a build
 * without CUDA: no GPU, so NCCL ranks are refused. */
#include "exec/comm.h"

int tx_comm_gpu_count(void) { return 0; }

teexec_status *tx_comm_average_device(teexec_comm *c, void *stream, size_t n, void *const *bufs,
                                      const uint64_t *numel, const teexec_dtype *dtypes,
                                      size_t bucket_bytes)
{
    (void)c, (void)stream, (void)n, (void)bufs, (void)numel, (void)dtypes, (void)bucket_bytes;
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "device buffers need a CUDA build");
}

teexec_status *tx_comm_use_device(const teexec_comm *c)
{
    (void)c;
    return NULL;
}

/* Without CUDA every communicator holds host memory. */
teexec_status *tx_comm_all_reduce_host(teexec_comm *c, double *vals, size_t n)
{
    return teexec_comm_all_reduce_sum(c, TEEXEC_DTYPE_DOUBLE, vals, vals, n);
}

teexec_status *tx_comm_nccl_create(int world, int rank, int device, const char *rendezvous,
                                   int timeout_ms, teexec_comm **out)
{
    (void)world, (void)rank, (void)device, (void)rendezvous, (void)timeout_ms;
    *out = NULL;
    return tx_error(TEEXEC_ERR_UNSUPPORTED,
                    "NCCL communicators need a CUDA build (this teexec was built without CUDA)");
}

teexec_status *tx_comm_nccl_create_threads(int world, const int *devices, int timeout_ms,
                                           teexec_comm **out)
{
    (void)world, (void)devices, (void)timeout_ms, (void)out;
    return tx_error(TEEXEC_ERR_UNSUPPORTED,
                    "NCCL communicators need a CUDA build (this teexec was built without CUDA)");
}
