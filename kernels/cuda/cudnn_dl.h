/*
 * cudnn_dl.h - cuDNN (graph API entry points only), loaded at run time.
 *
 * teexec does not link libcudnn, for the reason cuBLASLt is not linked
 * (cublaslt_dl.h): every process would pay for loading it, and a machine
 * with the CUDA driver but no cuDNN must still run everything else (the
 * attention then takes the CUDA fallback). The first tx_cudnn_load dlopens
 * libcudnn.so.<major of the headers> (LD_LIBRARY_PATH, the ld cache, the
 * run path), falling back to the toolkit's lib64 folder the build was
 * configured with, and resolves the functions sdpa_cudnn.c calls. The
 * library found may be older than the headers: callers gate features on
 * GetVersion().
 *
 * Ownership: the table is process-global, immutable once loaded and never
 * unloaded. Thread-safe (pthread_once). Returned statuses belong to the
 * caller.
 */
#ifndef TEEXEC_KERNELS_CUDA_CUDNN_DL_H
#define TEEXEC_KERNELS_CUDA_CUDNN_DL_H

#include "teexec/teexec.h"

#include <cudnn_graph.h>

typedef struct tx_cudnn_api {
    size_t (*GetVersion)(void);
    cudnnStatus_t (*Create)(cudnnHandle_t *);
    cudnnStatus_t (*Destroy)(cudnnHandle_t);
    cudnnStatus_t (*SetStream)(cudnnHandle_t, cudaStream_t);
    const char *(*GetErrorString)(cudnnStatus_t);
    void (*GetLastErrorString)(char *, size_t);
    cudnnStatus_t (*BackendCreateDescriptor)(cudnnBackendDescriptorType_t,
                                             cudnnBackendDescriptor_t *);
    cudnnStatus_t (*BackendDestroyDescriptor)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BackendSetAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                         cudnnBackendAttributeType_t, int64_t, const void *);
    cudnnStatus_t (*BackendGetAttribute)(cudnnBackendDescriptor_t const,
                                         cudnnBackendAttributeName_t,
                                         cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
    cudnnStatus_t (*BackendFinalize)(cudnnBackendDescriptor_t);
    cudnnStatus_t (*BackendExecute)(cudnnHandle_t, cudnnBackendDescriptor_t,
                                    cudnnBackendDescriptor_t);
} tx_cudnn_api;

/* Loads cuDNN once; *out is the table (NULL on failure, with a
 * TEEXEC_ERR_UNSUPPORTED status naming the library and the dlopen/dlsym
 * error: without cuDNN, attention runs on the fallback). */
teexec_status *tx_cudnn_load(const tx_cudnn_api **out);

/* The table; only meaningful after a successful tx_cudnn_load (which the
 * creation of every tx_sdpa_cudnn handle did: pthread_once orders them). */
const tx_cudnn_api *tx_cudnn(void);

#endif
