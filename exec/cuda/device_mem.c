/* device_mem.c - device memory of public device tensors (exec/device_mem.h)
 * over the CUDA runtime. */
#include "exec/device_mem.h"

#include "exec/device_budget.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>

static teexec_status *err(cudaError_t e, const char *what)
{
    return tx_error(TEEXEC_ERR_DEVICE, "%s: %s (%s)", what, cudaGetErrorName(e),
                    cudaGetErrorString(e));
}

teexec_status *tx_device_alloc(size_t bytes, int *device, void **out)
{
    *out = NULL;
    cudaError_t e = cudaGetDevice(device);
    if (e != cudaSuccess) return err(e, "a device tensor: selecting the device");
    e = cudaMalloc(out, bytes ? bytes : 1);
    if (e == cudaSuccess) return NULL;
    *out = NULL;
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return tx_device_alloc_failed(bytes, "a device tensor", cudaGetErrorString(e));
    }
    return err(e, "allocating a device tensor");
}

void tx_device_free(int device, void *ptr)
{
    if (!ptr) return;
    int cur = -1;
    bool switched = cudaGetDevice(&cur) == cudaSuccess && cur != device &&
                    cudaSetDevice(device) == cudaSuccess;
    cudaFree(ptr);
    if (switched) cudaSetDevice(cur);
}

teexec_status *tx_device_check_pointer(const void *ptr, int *device)
{
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%p is not a CUDA device address (%s)", ptr, cudaGetErrorString(e));
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%p is %s memory, not CUDA device memory", ptr,
                        a.type == cudaMemoryTypeHost ? "pinned host" : "unregistered host");
    *device = a.device;
    return NULL;
}

teexec_status *tx_device_to_host(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return NULL;
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? NULL : err(e, "copying a device tensor to the host");
}

/* A device-to-device cudaMemcpy (and cudaMemset) returns before the work
 * is done; the legacy stream it ran on is waited for, so a run on a
 * non-blocking stream queued next sees the bytes. */
static teexec_status *finish(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
    return e == cudaSuccess ? NULL : err(e, what);
}

teexec_status *tx_device_to_device(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return NULL;
    return finish(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "copying a device tensor");
}

teexec_status *tx_device_copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height)
{
    if (!width || !height) return NULL;
    return finish(cudaMemcpy2D(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice),
                  "copying device rows");
}

teexec_status *tx_device_zero(void *dst, size_t bytes)
{
    if (!bytes) return NULL;
    return finish(cudaMemset(dst, 0, bytes), "clearing device memory");
}
