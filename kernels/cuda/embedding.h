/*
 * embedding.h - the te.ops Embedding on the GPU (kernels/cpu/te_embedding.c):
 * forward gathers rows of the table [V, D] (a byte copy, exact), backward
 * sums dy rows into dweight per vocabulary row in double, in index order,
 * rounded once: the CPU's order and precision, so the result equals the
 * CPU's bit for bit and is deterministic (no atomics on floats: the indices
 * are sorted by row with a stable radix sort, then one block per run of
 * equal rows sums them in position order; O(n log V + n D)).
 *
 * ids: INT64 or INT32, n entries. Out-of-range ids cannot be reported
 * synchronously: forward writes a zero row for them and counts them in
 * *n_bad (device int64, may be NULL; the caller zeroes it first and checks
 * it after the stream synchronizes); backward skips them.
 *
 * Device pointers owned by the caller; asynchronous on `stream`
 * (cudaStream_t, NULL = default). Statuses owned by the caller. Stateless:
 * thread-safe (buffers in flight belong to their stream).
 */
#ifndef TEEXEC_KERNELS_CUDA_EMBEDDING_H
#define TEEXEC_KERNELS_CUDA_EMBEDDING_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y [n, D] = weight[ids]; weight and y of w_dtype (any 1-, 2-, 4- or
 * 8-byte dtype). */
teexec_status *tx_cuda_embedding_forward(const void *ids, teexec_dtype ids_dtype, size_t n,
                                         const void *weight, teexec_dtype w_dtype, size_t vocab,
                                         size_t dim, void *y, int64_t *n_bad, void *stream);

/* The device workspace the backward needs for n indices into a table of
 * `vocab` rows (0 for n == 0). Fails for n >= 2^31 or vocab >= 2^32 - 1. */
teexec_status *tx_cuda_embedding_backward_workspace(size_t n, size_t vocab, size_t *bytes);

/* dweight [V, D] = sum over i with ids[i] == v of dy[i, :]; dy FLOAT,
 * BFLOAT16 or FLOAT16, dweight the same set. Every row is written (zero
 * where no id refers to it). workspace: a device buffer of at least
 * tx_cuda_embedding_backward_workspace(n, vocab) bytes, 256-byte aligned,
 * in use until the stream passes the call. */
teexec_status *tx_cuda_embedding_backward(const void *ids, teexec_dtype ids_dtype, size_t n,
                                          const void *dy, teexec_dtype dy_dtype, size_t vocab,
                                          size_t dim, void *dweight, teexec_dtype dw_dtype,
                                          void *workspace, size_t workspace_bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif
