/*
 * cuda_check.h - turning CUDA runtime errors into teexec_status objects.
 *
 * For the .cu files of kernels/cuda only (C++; includes cuda_runtime.h).
 * Every CUDA call in a kernel wrapper goes through TX_CUDA_TRY, and every
 * launch is followed by TX_CUDA_LAUNCHED, so a failure comes back as a
 * TEEXEC_ERR_DEVICE status naming the kernel and the call instead of being
 * printed or ignored. The returned status is owned by the caller.
 *
 * Thread-safety: the helpers keep no state. cudaGetLastError reads the
 * calling host thread's last error, which is why it is checked right after
 * each launch on the same thread.
 */
#ifndef TEEXEC_KERNELS_CUDA_CUDA_CHECK_H
#define TEEXEC_KERNELS_CUDA_CUDA_CHECK_H

#include <cuda_runtime.h>

extern "C" {
#include "base/status.h"
}

static inline teexec_status *tx_cuda_status(cudaError_t err, const char *kernel,
                                            const char *call)
{
    return tx_status_new(TEEXEC_ERR_DEVICE, NULL, NULL, "%s: %s failed: %s (%s)",
                         kernel, call, cudaGetErrorName(err), cudaGetErrorString(err));
}

/* `what` names the kernel or wrapper the call belongs to. */
#define TX_CUDA_TRY(call, what)                                              \
    do {                                                                     \
        cudaError_t tx_cuda_err_ = (call);                                   \
        if (tx_cuda_err_ != cudaSuccess)                                     \
            return tx_cuda_status(tx_cuda_err_, (what), #call);              \
    } while (0)

/* After a <<<...>>> launch: configuration errors surface here; errors
 * inside the kernel surface at the caller's next synchronization. */
#define TX_CUDA_LAUNCHED(what) TX_CUDA_TRY(cudaGetLastError(), (what))

#endif
