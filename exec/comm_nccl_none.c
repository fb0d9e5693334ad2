/* comm_nccl_none.c - the NCCL backend's entry points (comm.h) in a build
 * without CUDA: no GPU, so NCCL ranks are refused. */
#include "exec/comm.h"

int tx_comm_gpu_count(void) { return 0; }

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
