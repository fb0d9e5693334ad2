/*
 * cublaslt_dl.h - cuBLASLt, loaded at run time.
 *
 * teexec does not link libcublasLt: loading that 0.5 GB library costs
 * every process (the CLI, CPU-only runs, unit tests) noticeable start-up
 * time, and a CPU-only machine may not have it at all. The first
 * tx_cublaslt_load dlopens libcublasLt.so.<major> (the major version of the
 * headers teexec was built with; the usual search path: LD_LIBRARY_PATH,
 * the ld cache, the executable's run path), falling back to the toolkit's
 * lib64 folder the build was configured with, and resolves the functions
 * the GEMM layer calls.
 *
 * Ownership: the table is process-global, immutable once loaded and never
 * unloaded. Thread-safe (pthread_once). Returned statuses belong to the
 * caller.
 */
#ifndef TEEXEC_KERNELS_CUDA_CUBLASLT_DL_H
#define TEEXEC_KERNELS_CUDA_CUBLASLT_DL_H

#include "teexec/teexec.h"

/* cublasLt.h declares one function without a prototype; the toolkit is
 * included with -I, so its warnings would be ours. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop

typedef struct tx_cublaslt_api {
    cublasStatus_t (*Create)(cublasLtHandle_t *);
    cublasStatus_t (*Destroy)(cublasLtHandle_t);
    size_t (*GetVersion)(void);
    const char *(*GetStatusName)(cublasStatus_t);
    const char *(*GetStatusString)(cublasStatus_t);
    cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                             const void *, size_t);
    cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t,
                                         int64_t);
    cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*MatrixLayoutSetAttribute)(cublasLtMatrixLayout_t,
                                               cublasLtMatrixLayoutAttribute_t, const void *,
                                               size_t);
    cublasStatus_t (*MatmulPreferenceCreate)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*MatmulPreferenceDestroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*MatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t,
                                                   cublasLtMatmulPreferenceAttributes_t, const void *,
                                                   size_t);
    cublasStatus_t (*MatmulAlgoGetHeuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                             cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                             cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                             cublasLtMatmulPreference_t, int,
                                             cublasLtMatmulHeuristicResult_t *, int *);
    cublasStatus_t (*Matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                             cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t,
                             const void *, const void *, cublasLtMatrixLayout_t, void *,
                             cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
                             cudaStream_t);
    /* reads an algorithm's id, tile, split-K count, ... (gemm_lt's choice reports) */
    cublasStatus_t (*MatmulAlgoConfigGetAttribute)(const cublasLtMatmulAlgo_t *,
                                                   cublasLtMatmulAlgoConfigAttributes_t, void *,
                                                   size_t, size_t *);
} tx_cublaslt_api;

/* Loads cuBLASLt once; *out is the table (NULL on failure, with a
 * TEEXEC_ERR_DEVICE status naming the library and the dlopen/dlsym error). */
teexec_status *tx_cublaslt_load(const tx_cublaslt_api **out);

/* The table; only meaningful after a successful tx_cublaslt_load (which
 * every tx_gemm_lt handle's creation did: pthread_once orders the two). */
const tx_cublaslt_api *tx_cublaslt(void);

#endif
