/*
 * nccl_dl.h - NCCL, loaded at run time (libnccl.so.2).
 *
 * Like cuBLASLt (cublaslt_dl.h), NCCL is dlopen'ed by its first user, not
 * linked: a teexec that never runs more than one rank never needs it, and a
 * machine without it still runs everything else. The usual search path
 * first, then the toolkit's lib64 folder (dl_open.c).
 *
 * Ownership: the table is process-global, immutable once loaded and never
 * unloaded. Thread-safe (pthread_once). Returned statuses belong to the
 * caller.
 */
#ifndef TEEXEC_KERNELS_CUDA_NCCL_DL_H
#define TEEXEC_KERNELS_CUDA_NCCL_DL_H

#include "base/status.h"

/* nccl.h declares a few functions without prototypes; the toolkit is
 * included with -I, so its warnings would be ours. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

typedef struct tx_nccl_api {
    ncclResult_t (*GetVersion)(int *);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    const char *(*GetErrorString)(ncclResult_t);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                  ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
} tx_nccl_api;

/* The loaded table, or TEEXEC_ERR_DEVICE saying why NCCL cannot be used. */
teexec_status *tx_nccl_load(const tx_nccl_api **out) TX_NODISCARD;

#endif
