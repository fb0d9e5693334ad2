/* xent.cu - softmax cross-entropy with its gradient (xent.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/xent.h"
}

#include <math.h>

namespace {

constexpr int kThreads = 256;

/* The workspace: [0, rows) the rows' losses, then two int64 counters
 * (counted, bad) kept 8-byte aligned. */
size_t counter_offset_floats(size_t rows) { return (rows + 1) / 2 * 2; }

__device__ __forceinline__ float block_max(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = lane < nw ? red[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
    return t;
}

/* One block: how many rows count, how many have a bad label. Integer sums
 * are exact in any order. */
__global__ void count_kernel(const int64_t *labels, size_t rows, int64_t classes,
                             int64_t ignore_index, long long *counters)
{
    __shared__ unsigned long long s_counted, s_bad;
    if (threadIdx.x == 0) { s_counted = 0; s_bad = 0; }
    __syncthreads();
    unsigned long long counted = 0, bad = 0;
    for (size_t r = threadIdx.x; r < rows; r += blockDim.x) {
        int64_t y = labels[r];
        if (y == ignore_index) continue;
        if (y < 0 || y >= classes) bad++;
        else counted++;
    }
    atomicAdd(&s_counted, counted);
    atomicAdd(&s_bad, bad);
    __syncthreads();
    if (threadIdx.x == 0) {
        counters[0] = (long long)s_counted;
        counters[1] = (long long)s_bad;
    }
}

__global__ void row_kernel(tx_cuda_xent_args a, const long long *counters)
{
    __shared__ float red[32];
    int64_t classes = (int64_t)a.classes;
    long long counted = counters[0];
    float div = a.sum_reduction || counted == 0 ? 1.0f : (float)counted;
    for (size_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        int64_t y = a.labels[r];
        size_t base = r * a.classes;
        bool skip = y == a.ignore_index || y < 0 || y >= classes;
        if (skip) {
            if (a.dlogits)
                for (size_t j = threadIdx.x; j < a.classes; j += blockDim.x)
                    tx_st(a.dlogits, base + j, a.dlogits_dtype, 0.0f);
            if (threadIdx.x == 0) a.workspace[r] = 0.0f;
            continue;
        }
        float mx = -INFINITY;
        for (size_t j = threadIdx.x; j < a.classes; j += blockDim.x)
            mx = fmaxf(mx, tx_ld(a.logits, base + j, a.logits_dtype));
        mx = block_max(mx, red);
        float se = 0.0f;
        for (size_t j = threadIdx.x; j < a.classes; j += blockDim.x)
            se += expf(tx_ld(a.logits, base + j, a.logits_dtype) - mx);
        se = tx_block_sum(se, red);
        float lse = mx + logf(se);
        if (threadIdx.x == 0)
            a.workspace[r] = lse - tx_ld(a.logits, base + (size_t)y, a.logits_dtype);
        if (a.dlogits)
            for (size_t j = threadIdx.x; j < a.classes; j += blockDim.x) {
                float p = expf(tx_ld(a.logits, base + j, a.logits_dtype) - lse);
                float g = p - ((int64_t)j == y ? 1.0f : 0.0f);
                tx_st(a.dlogits, base + j, a.dlogits_dtype, g / div);
            }
    }
}

/* One block sums the rows' losses: thread t sums rows t, t + T, ... in
 * order, then the fixed-order block sum. */
__global__ void finish_kernel(const float *row_loss, size_t rows, const long long *counters,
                              int sum_reduction, float *loss, int64_t *n_counted, int64_t *n_bad)
{
    __shared__ float red[32];
    float s = 0.0f;
    for (size_t r = threadIdx.x; r < rows; r += blockDim.x) s += row_loss[r];
    s = tx_block_sum(s, red);
    if (threadIdx.x == 0) {
        long long counted = counters[0];
        *loss = sum_reduction ? s : (counted ? s / (float)counted : NAN);
        if (n_counted) *n_counted = counted;
        if (n_bad) *n_bad = counters[1];
    }
}

teexec_status *bad(const char *what)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda cross-entropy: %s",
                         what);
}

} // namespace

extern "C" size_t tx_cuda_xent_workspace_floats(size_t rows)
{
    return counter_offset_floats(rows) + 4; /* + two int64 counters */
}

extern "C" teexec_status *tx_cuda_xent(const tx_cuda_xent_args *a, void *stream)
{
    if (!tx_io_dtype_ok(a->logits_dtype)) return bad("logits must be float32, bfloat16 or float16");
    if (a->dlogits && !tx_io_dtype_ok(a->dlogits_dtype)) return bad("bad dlogits dtype");
    if (!a->classes) return bad("no classes");
    if (a->classes > (size_t)INT64_MAX) return bad("too many classes");
    if (!a->loss || !a->workspace || (a->rows && (!a->logits || !a->labels)))
        return bad("a required pointer is NULL");
    cudaStream_t s = (cudaStream_t)stream;
    long long *counters = (long long *)(a->workspace + counter_offset_floats(a->rows));
    count_kernel<<<1, 1024, 0, s>>>(a->labels, a->rows, (int64_t)a->classes, a->ignore_index,
                                    counters);
    TX_CUDA_LAUNCHED("cross-entropy count");
    if (a->rows) {
        size_t g = a->rows < 65535u * 16u ? a->rows : 65535u * 16u;
        row_kernel<<<(unsigned)g, kThreads, 0, s>>>(*a, counters);
        TX_CUDA_LAUNCHED("cross-entropy rows");
    }
    finish_kernel<<<1, 1024, 0, s>>>(a->workspace, a->rows, counters, a->sum_reduction, a->loss,
                                     a->n_counted, a->n_bad);
    TX_CUDA_LAUNCHED("cross-entropy finish");
    return NULL;
}
