/* xent.cu - softmax cross-entropy with its gradient (xent.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/xent.h"
}

#include <math.h>
#include <stdint.h>

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

/* The fast path: logits read with 16-byte vector loads, max and sum of exp
 * in one online pass (each chunk rescales the running sum to the new max),
 * dlogits written with vector stores in a second pass: two reads and one
 * write of the row instead of three reads, per-element dtype switches and
 * scalar accesses. Taken when the row length is a multiple of the vector,
 * the pointers are 16-byte aligned and dlogits (if any) has the logits'
 * dtype; the loss stays FP32 and deterministic (a fixed combine order). */
template <typename T> struct vec_io;
template <> struct vec_io<float> {
    static constexpr int V = 4;
    static __device__ __forceinline__ void load(const float *p, float *o)
    {
        float4 v = *(const float4 *)p;
        o[0] = v.x; o[1] = v.y; o[2] = v.z; o[3] = v.w;
    }
    static __device__ __forceinline__ void store(float *p, const float *i)
    {
        *(float4 *)p = make_float4(i[0], i[1], i[2], i[3]);
    }
};
template <> struct vec_io<__nv_bfloat16> {
    static constexpr int V = 8;
    static __device__ __forceinline__ void load(const __nv_bfloat16 *p, float *o)
    {
        uint4 raw = *(const uint4 *)p;
        const __nv_bfloat16 *h = (const __nv_bfloat16 *)&raw;
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = __bfloat162float(h[k]);
    }
    static __device__ __forceinline__ void store(__nv_bfloat16 *p, const float *i)
    {
        uint4 raw;
        __nv_bfloat16 *h = (__nv_bfloat16 *)&raw;
#pragma unroll
        for (int k = 0; k < 8; k++) h[k] = __float2bfloat16_rn(i[k]);
        *(uint4 *)p = raw;
    }
};
template <> struct vec_io<__half> {
    static constexpr int V = 8;
    static __device__ __forceinline__ void load(const __half *p, float *o)
    {
        uint4 raw = *(const uint4 *)p;
        const __half *h = (const __half *)&raw;
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = __half2float(h[k]);
    }
    static __device__ __forceinline__ void store(__half *p, const float *i)
    {
        uint4 raw;
        __half *h = (__half *)&raw;
#pragma unroll
        for (int k = 0; k < 8; k++) h[k] = __float2half_rn(i[k]);
        *(uint4 *)p = raw;
    }
};

/* (m, s) <- the pair for the union of two parts: s * e^(m - M) + s2 * e^(m2 - M)
 * with M the larger max; an all -inf part adds nothing. */
__device__ __forceinline__ void lse_combine(float &m, float &s, float m2, float s2)
{
    float nm = fmaxf(m, m2);
    if (nm == -INFINITY) return;
    s = s * expf(m - nm) + s2 * expf(m2 - nm);
    m = nm;
}

/* Every thread gets the block's (max, sum of exp); fixed order. */
__device__ __forceinline__ void block_lse(float &m, float &s, float *red_m, float *red_s)
{
    for (int o = 16; o > 0; o >>= 1)
        lse_combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) {
        red_m[warp] = m;
        red_s[warp] = s;
    }
    __syncthreads();
    m = lane < nw ? red_m[lane] : -INFINITY;
    s = lane < nw ? red_s[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        lse_combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
}

template <typename T>
__global__ void row_vec_kernel(tx_cuda_xent_args a, const long long *counters)
{
    constexpr int V = vec_io<T>::V;
    __shared__ float red_m[32], red_s[32];
    const int64_t classes = (int64_t)a.classes;
    const long long counted = counters[0];
    const float div = a.sum_reduction || counted == 0 ? 1.0f : (float)counted;
    const size_t step = (size_t)blockDim.x * V;
    for (size_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const int64_t y = a.labels[r];
        const size_t base = r * a.classes;
        const T *row = (const T *)a.logits + base;
        T *drow = a.dlogits ? (T *)a.dlogits + base : nullptr;
        float x[V];
        if (y == a.ignore_index || y < 0 || y >= classes) {
            if (drow) {
#pragma unroll
                for (int k = 0; k < V; k++) x[k] = 0.0f;
                for (size_t c = (size_t)threadIdx.x * V; c < a.classes; c += step)
                    vec_io<T>::store(drow + c, x);
            }
            if (threadIdx.x == 0) a.workspace[r] = 0.0f;
            continue;
        }
        float m = -INFINITY, s = 0.0f;
        for (size_t c = (size_t)threadIdx.x * V; c < a.classes; c += step) {
            vec_io<T>::load(row + c, x);
            float cm = x[0];
#pragma unroll
            for (int k = 1; k < V; k++) cm = fmaxf(cm, x[k]);
            float nm = fmaxf(m, cm);
            if (nm == -INFINITY) continue;
            float cs = 0.0f;
#pragma unroll
            for (int k = 0; k < V; k++) cs += expf(x[k] - nm);
            s = s * expf(m - nm) + cs;
            m = nm;
        }
        block_lse(m, s, red_m, red_s);
        const float lse = m + logf(s);
        if (threadIdx.x == 0) {
            float xy[V];
            vec_io<T>::load(row + ((size_t)y / V) * V, xy);
            a.workspace[r] = lse - xy[(size_t)y % V];
        }
        if (drow)
            for (size_t c = (size_t)threadIdx.x * V; c < a.classes; c += step) {
                vec_io<T>::load(row + c, x);
#pragma unroll
                for (int k = 0; k < V; k++) {
                    float g = expf(x[k] - lse) - ((int64_t)(c + k) == y ? 1.0f : 0.0f);
                    x[k] = g / div;
                }
                vec_io<T>::store(drow + c, x);
            }
    }
}

/* The vector width the fast path needs for `a`, or 0 when it cannot take it. */
int vec_width(const tx_cuda_xent_args *a)
{
    int v = a->logits_dtype == TEEXEC_DTYPE_FLOAT ? 4 : 8;
    if (a->classes % (size_t)v) return 0;
    if ((uintptr_t)a->logits % 16) return 0;
    if (a->dlogits && (a->dlogits_dtype != a->logits_dtype || (uintptr_t)a->dlogits % 16))
        return 0;
    return v;
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
        if (!vec_width(a))
            row_kernel<<<(unsigned)g, kThreads, 0, s>>>(*a, counters);
        else if (a->logits_dtype == TEEXEC_DTYPE_BFLOAT16)
            row_vec_kernel<__nv_bfloat16><<<(unsigned)g, kThreads, 0, s>>>(*a, counters);
        else if (a->logits_dtype == TEEXEC_DTYPE_FLOAT16)
            row_vec_kernel<__half><<<(unsigned)g, kThreads, 0, s>>>(*a, counters);
        else
            row_vec_kernel<float><<<(unsigned)g, kThreads, 0, s>>>(*a, counters);
        TX_CUDA_LAUNCHED("cross-entropy rows");
    }
    finish_kernel<<<1, 1024, 0, s>>>(a->workspace, a->rows, counters, a->sum_reduction, a->loss,
                                     a->n_counted, a->n_bad);
    TX_CUDA_LAUNCHED("cross-entropy finish");
    return NULL;
}
