/* embedding.cu - te.ops Embedding gather and deterministic backward
 * (embedding.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/embedding.h"
#include "base/tensor.h"
}

namespace {

constexpr int kThreads = 256;
constexpr int kColsPerThread = 4;
constexpr int kBand = kThreads * kColsPerThread; /* columns per block */
constexpr int kTile = 1024;                     /* ids staged per pass */

__device__ __forceinline__ long long id_at(const void *ids, int is32, size_t i)
{
    return is32 ? (long long)((const int32_t *)ids)[i] : (long long)((const int64_t *)ids)[i];
}

/* One thread per output element, copied as an integer of the element's
 * size: the bits travel unchanged. */
template <typename T>
__global__ void gather_kernel(const void *ids, int is32, size_t n, const T *w, size_t vocab,
                              size_t dim, T *y, unsigned long long *n_bad)
{
    size_t total = n * dim;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t i = k / dim, j = k % dim;
        long long id = id_at(ids, is32, i);
        if (id < 0 || (unsigned long long)id >= vocab) {
            y[k] = T(0);
            if (j == 0 && n_bad) atomicAdd(n_bad, 1ull); /* integer: exact in any order */
            continue;
        }
        y[k] = w[(size_t)id * dim + j];
    }
}

/* blockIdx.x walks table rows, blockIdx.y the column bands. The match test
 * reads one shared id for the whole block, so the block never diverges. */
__global__ void scatter_kernel(const void *ids, int is32, size_t n, const void *dy, int dy_dt,
                               size_t vocab, size_t dim, void *dw, int dw_dt)
{
    __shared__ long long s_ids[kTile];
    size_t col0 = (size_t)blockIdx.y * kBand;
    for (size_t v = blockIdx.x; v < vocab; v += gridDim.x) {
        double acc[kColsPerThread];
#pragma unroll
        for (int c = 0; c < kColsPerThread; c++) acc[c] = 0.0;
        for (size_t t0 = 0; t0 < n; t0 += kTile) {
            size_t tn = n - t0 < (size_t)kTile ? n - t0 : (size_t)kTile;
            __syncthreads();
            for (size_t q = threadIdx.x; q < tn; q += blockDim.x) s_ids[q] = id_at(ids, is32, t0 + q);
            __syncthreads();
            for (size_t q = 0; q < tn; q++) {
                if (s_ids[q] != (long long)v) continue;
                size_t rowbase = (t0 + q) * dim;
#pragma unroll
                for (int c = 0; c < kColsPerThread; c++) {
                    size_t j = col0 + threadIdx.x + (size_t)c * kThreads;
                    if (j < dim) acc[c] += (double)tx_ld(dy, rowbase + j, dy_dt);
                }
            }
        }
#pragma unroll
        for (int c = 0; c < kColsPerThread; c++) {
            size_t j = col0 + threadIdx.x + (size_t)c * kThreads;
            /* double -> float -> narrow is the CPU's store (tx_te_store_f64
             * rounds double to float first for narrow dtypes) */
            if (j < dim) tx_st(dw, v * dim + j, dw_dt, (float)acc[c]);
        }
    }
}

unsigned grid_for(size_t n)
{
    size_t b = (n + 255) / 256;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

teexec_status *bad(const char *what)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda Embedding: %s", what);
}

bool ids_ok(teexec_dtype dt) { return dt == TEEXEC_DTYPE_INT64 || dt == TEEXEC_DTYPE_INT32; }

} // namespace

extern "C" teexec_status *tx_cuda_embedding_forward(const void *ids, teexec_dtype ids_dtype,
                                                    size_t n, const void *weight,
                                                    teexec_dtype w_dtype, size_t vocab,
                                                    size_t dim, void *y, int64_t *n_bad,
                                                    void *stream)
{
    if (!ids_ok(ids_dtype)) return bad("indices must be int64 or int32");
    size_t es = tx_dtype_elem_size(w_dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8) return bad("unsupported table dtype");
    if (dim && n > SIZE_MAX / dim) return bad("size overflow");
    size_t total = n * dim;
    if (!total) return NULL;
    if (!ids || !weight || !y) return bad("a required pointer is NULL");
    int is32 = ids_dtype == TEEXEC_DTYPE_INT32;
    unsigned long long *nb = (unsigned long long *)n_bad;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(total);
    switch (es) {
    case 1: gather_kernel<uint8_t><<<g, kThreads, 0, s>>>(ids, is32, n, (const uint8_t *)weight, vocab, dim, (uint8_t *)y, nb); break;
    case 2: gather_kernel<uint16_t><<<g, kThreads, 0, s>>>(ids, is32, n, (const uint16_t *)weight, vocab, dim, (uint16_t *)y, nb); break;
    case 4: gather_kernel<uint32_t><<<g, kThreads, 0, s>>>(ids, is32, n, (const uint32_t *)weight, vocab, dim, (uint32_t *)y, nb); break;
    default: gather_kernel<uint64_t><<<g, kThreads, 0, s>>>(ids, is32, n, (const uint64_t *)weight, vocab, dim, (uint64_t *)y, nb); break;
    }
    TX_CUDA_LAUNCHED("embedding forward");
    return NULL;
}

extern "C" teexec_status *tx_cuda_embedding_backward(const void *ids, teexec_dtype ids_dtype,
                                                     size_t n, const void *dy,
                                                     teexec_dtype dy_dtype, size_t vocab,
                                                     size_t dim, void *dweight,
                                                     teexec_dtype dw_dtype, void *stream)
{
    if (!ids_ok(ids_dtype)) return bad("indices must be int64 or int32");
    if (!tx_io_dtype_ok(dy_dtype) || !tx_io_dtype_ok(dw_dtype)) return bad("bad gradient dtype");
    if (!vocab || !dim) return NULL;
    if (!dweight || (n && (!ids || !dy))) return bad("a required pointer is NULL");
    size_t bands = (dim + kBand - 1) / kBand;
    if (bands > 65535) return bad("the embedding dim is too large for the column grid");
    size_t gx = vocab < 65535u * 8u ? vocab : 65535u * 8u;
    scatter_kernel<<<dim3((unsigned)gx, (unsigned)bands), kThreads, 0, (cudaStream_t)stream>>>(
        ids, ids_dtype == TEEXEC_DTYPE_INT32, n, dy, dy_dtype, vocab, dim, dweight, dw_dtype);
    TX_CUDA_LAUNCHED("embedding backward");
    return NULL;
}
