/* embedding.cu - te.ops Embedding gather and deterministic backward
 * (embedding.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

#include <cub/device/device_radix_sort.cuh>

extern "C" {
#include "kernels/cuda/embedding.h"
#include "base/tensor.h"
}

namespace {

constexpr int kThreads = 256;
constexpr int kColsPerThread = 4;
constexpr int kBand = kThreads * kColsPerThread; /* columns per block */

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

/* The backward in three steps over a workspace (tx_cuda_embedding_backward_
 * workspace): (1) key every index by its table row (out-of-range ids get the
 * key `vocab`, sorted last and skipped) with its position as the value;
 * (2) a stable radix sort by key, so equal rows keep ascending positions;
 * (3) the block at the start of each run of equal keys sums that run's dy
 * rows in position order in double and stores the table row once. The
 * order of the sums is the index order of the CPU's loop, so the bits equal
 * the CPU's, and the work is O(n log V + n D), not O(V n) as a scan of the
 * whole index list per table row was (40 ms of a 63 ms GPT-2 124M step). */
__global__ void key_kernel(const void *ids, int is32, uint32_t n, uint32_t vocab, uint32_t *keys,
                           uint32_t *pos)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        long long id = id_at(ids, is32, i);
        keys[i] = (id < 0 || (unsigned long long)id >= vocab) ? vocab : (uint32_t)id;
        pos[i] = i;
    }
}

/* blockIdx.x walks sorted positions, blockIdx.y the column bands; only the
 * block at the first position of a run works (the others return at once). */
__global__ void run_sum_kernel(const uint32_t *keys, const uint32_t *pos, uint32_t n,
                               uint32_t vocab, const void *dy, int dy_dt, size_t dim, void *dw,
                               int dw_dt)
{
    size_t col0 = (size_t)blockIdx.y * kBand;
    for (uint32_t r = blockIdx.x; r < n; r += gridDim.x) {
        uint32_t v = keys[r];
        if (v >= vocab || (r > 0 && keys[r - 1] == v)) continue;
        double acc[kColsPerThread];
#pragma unroll
        for (int c = 0; c < kColsPerThread; c++) acc[c] = 0.0;
        for (uint32_t q = r; q < n && keys[q] == v; q++) {
            size_t rowbase = (size_t)pos[q] * dim;
#pragma unroll
            for (int c = 0; c < kColsPerThread; c++) {
                size_t j = col0 + threadIdx.x + (size_t)c * kThreads;
                if (j < dim) acc[c] += (double)tx_ld(dy, rowbase + j, dy_dt);
            }
        }
#pragma unroll
        for (int c = 0; c < kColsPerThread; c++) {
            size_t j = col0 + threadIdx.x + (size_t)c * kThreads;
            /* double -> float -> narrow is the CPU's store (tx_te_store_f64
             * rounds double to float first for narrow dtypes) */
            if (j < dim) tx_st(dw, (size_t)v * dim + j, dw_dt, (float)acc[c]);
        }
    }
}

/* Bits the keys need: vocab itself (the out-of-range key) must fit. */
int key_bits(size_t vocab)
{
    int b = 1;
    while (b < 32 && (vocab >> b) != 0) b++;
    return b;
}

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

/* The workspace's layout: keys in/out and positions in/out (n uint32 each,
 * 256-byte aligned), then CUB's temporary storage. 0 = too large. */
size_t sort_temp_bytes(size_t n, size_t vocab)
{
    size_t temp = 0;
    if (cub::DeviceRadixSort::SortPairs(nullptr, temp, (const uint32_t *)nullptr,
                                        (uint32_t *)nullptr, (const uint32_t *)nullptr,
                                        (uint32_t *)nullptr, (int)n, 0, key_bits(vocab)) !=
        cudaSuccess)
        return 0;
    return temp ? temp : 1;
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

extern "C" teexec_status *tx_cuda_embedding_backward_workspace(size_t n, size_t vocab,
                                                               size_t *bytes)
{
    *bytes = 0;
    if (n > 0x7fffffffu || vocab >= 0xffffffffu)
        return bad("more than 2^31 indices or 2^32 table rows");
    if (n == 0) return NULL;
    size_t temp = sort_temp_bytes(n, vocab);
    if (!temp) return bad("cannot size the index sort");
    *bytes = 4 * align_up(n * sizeof(uint32_t)) + align_up(temp);
    return NULL;
}

extern "C" teexec_status *tx_cuda_embedding_backward(const void *ids, teexec_dtype ids_dtype,
                                                     size_t n, const void *dy,
                                                     teexec_dtype dy_dtype, size_t vocab,
                                                     size_t dim, void *dweight,
                                                     teexec_dtype dw_dtype, void *workspace,
                                                     size_t workspace_bytes, void *stream)
{
    if (!ids_ok(ids_dtype)) return bad("indices must be int64 or int32");
    if (!tx_io_dtype_ok(dy_dtype) || !tx_io_dtype_ok(dw_dtype)) return bad("bad gradient dtype");
    if (!vocab || !dim) return NULL;
    if (!dweight || (n && (!ids || !dy))) return bad("a required pointer is NULL");
    size_t bands = (dim + kBand - 1) / kBand;
    if (bands > 65535) return bad("the embedding dim is too large for the column grid");
    if (vocab > SIZE_MAX / dim || vocab * dim > SIZE_MAX / tx_dtype_elem_size(dw_dtype))
        return bad("size overflow");
    size_t need = 0;
    TX_TRY(tx_cuda_embedding_backward_workspace(n, vocab, &need));
    if (n && (!workspace || workspace_bytes < need)) return bad("the workspace is too small");
    cudaStream_t s = (cudaStream_t)stream;
    /* rows no index refers to are zero: +0.0 in every float dtype */
    TX_CUDA_TRY(cudaMemsetAsync(dweight, 0, vocab * dim * tx_dtype_elem_size(dw_dtype), s),
                "embedding backward");
    if (!n) return NULL;
    size_t a = align_up(n * sizeof(uint32_t));
    char *w = (char *)workspace;
    uint32_t *keys_in = (uint32_t *)w, *keys = (uint32_t *)(w + a);
    uint32_t *pos_in = (uint32_t *)(w + 2 * a), *pos = (uint32_t *)(w + 3 * a);
    void *temp = w + 4 * a;
    size_t temp_bytes = workspace_bytes - 4 * a;
    key_kernel<<<grid_for(n), kThreads, 0, s>>>(ids, ids_dtype == TEEXEC_DTYPE_INT32, (uint32_t)n,
                                                (uint32_t)vocab, keys_in, pos_in);
    TX_CUDA_LAUNCHED("embedding backward keys");
    TX_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys, pos_in, pos, (int)n,
                                                0, key_bits(vocab), s),
                "embedding backward sort");
    unsigned gx = n < 65535u * 4u ? (unsigned)n : 65535u * 4u;
    run_sum_kernel<<<dim3(gx, (unsigned)bands), kThreads, 0, s>>>(
        keys, pos, (uint32_t)n, (uint32_t)vocab, dy, dy_dtype, dim, dweight, dw_dtype);
    TX_CUDA_LAUNCHED("embedding backward");
    return NULL;
}
