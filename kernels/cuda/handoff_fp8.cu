/* handoff_fp8.cu - norm / activation forward and Bias backward that also
 * measure (and, with a known scale, cast) their output for the next
 * Linear's FP8 per-tensor quantizer (handoff_fp8.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/quant_common.cuh"

extern "C" {
#include "kernels/cuda/handoff_fp8.h"
}

#include <math.h>

namespace {

constexpr int kNormThreads = 256;
constexpr int kNormVecs = 8; /* 8-element vectors per thread: h <= 256 * 8 * 8 */
constexpr size_t kRowsPerChunk = 64;

struct HQ {
    float *amax;
    const float *scale;
    uint8_t *row_data;
    int e5m2;
};

/* Rounds 8 values to T in place and stores them (16 or 32 bytes). */
__device__ __forceinline__ void store8(__nv_bfloat16 *p, float v[8])
{
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        __nv_bfloat16 lo = __float2bfloat16_rn(v[2 * j]), hi = __float2bfloat16_rn(v[2 * j + 1]);
        v[2 * j] = __bfloat162float(lo);
        v[2 * j + 1] = __bfloat162float(hi);
        w[j] = (uint32_t)__bfloat16_as_ushort(lo) | ((uint32_t)__bfloat16_as_ushort(hi) << 16);
    }
    *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ void store8(float *p, float v[8])
{
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4 *>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

/* The hand-off of 8 stored values at element offset i: amax, and the
 * delayed cast (the quantizer's exact encoder, NaN sign kept). */
__device__ __forceinline__ void fold8(const HQ &q, const float v[8], size_t i, float &amax)
{
#pragma unroll
    for (int j = 0; j < 8; j++) amax = fmaxf(amax, fabsf(v[j]));
    if (q.scale) {
        const float s = __ldg(q.scale);
        uint2 w;
        w.x = txq::quant_fp8x4(q.e5m2 != 0, v, s);
        w.y = txq::quant_fp8x4(q.e5m2 != 0, v + 4, s);
        *reinterpret_cast<uint2 *>(q.row_data + i) = w;
    }
}

/* One atomic per block: amaxes are >= 0, so their bits order as unsigned. */
__device__ __forceinline__ void commit_amax(float a, float *amax)
{
    __shared__ float red[32];
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = a;
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = red[0];
        for (int w = 1; w < nw; w++) b = fmaxf(b, red[w]);
        if (b > 0.0f) atomicMax(reinterpret_cast<unsigned int *>(amax), __float_as_uint(b));
    }
}

/* norm.cu's math (two-pass statistics in FP32, rs = 1 / sqrt(var + eps))
 * with the row kept in registers, 16-byte loads and stores. */
template <typename TX, typename TY, int NV>
__global__ void __launch_bounds__(kNormThreads) norm_kernel(tx_cuda_norm_fwd a, HQ q)
{
    __shared__ float red[32];
    const size_t r = blockIdx.x, h = a.h, base = r * h, nvec = h / 8;
    const TX *x = static_cast<const TX *>(a.x);
    TY *y = static_cast<TY *>(a.y);
    /* NV vectors per thread, just enough for the row: a larger array than
     * the row needs costs registers and so resident blocks (the first
     * version, NV 8 for every h, took 0.140 ms for 8192 x 4096 bf16 with
     * the cast on the H200, slower than norm.cu's forward + the Linear's
     * quantize at 0.111 ms) */
    float v[NV][8];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const size_t c = threadIdx.x + (size_t)k * kNormThreads;
        if (c < nvec) {
            txq::load8(x + base + c * 8, v[k]);
#pragma unroll
            for (int j = 0; j < 8; j++) s += v[k][j];
        }
    }
    float mu = 0.0f;
    if (!a.rms) mu = tx_block_sum(s, red) / (float)h;
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const size_t c = threadIdx.x + (size_t)k * kNormThreads;
        if (c < nvec) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float d = v[k][j] - mu;
                ss += d * d;
            }
        }
    }
    const float var = tx_block_sum(ss, red) / (float)h;
    const float rs = 1.0f / sqrtf(var + a.eps);
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const size_t c = threadIdx.x + (size_t)k * kNormThreads;
        if (c < nvec) {
            float o[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const size_t col = c * 8 + j;
                float g = tx_ld(a.gamma, col, a.w_dtype);
                if (a.zero_centered_gamma) g += 1.0f;
                float t = (v[k][j] - mu) * rs * g;
                if (!a.rms) t += tx_ld(a.beta, col, a.w_dtype);
                o[j] = t;
            }
            store8(y + base + c * 8, o);
            fold8(q, o, base + c * 8, amax);
        }
    }
    if (threadIdx.x == 0) {
        if (a.mu && !a.rms) a.mu[r] = mu;
        if (a.rsigma) a.rsigma[r] = rs;
    }
    commit_amax(amax, q.amax);
}

/* act.cu's forward formulas (te_activation.c's, in float). */
__device__ __forceinline__ float act_f(int act, float x)
{
    switch (act) {
    case TX_CUDA_ACT_GELU_TANH: {
        float t = tanhf(0.79788456f * x * (1.0f + 0.044715f * x * x));
        return 0.5f * x * (1.0f + t);
    }
    case TX_CUDA_ACT_GELU_ERF: return x * (0.5f * (1.0f + erff(x * 0.70710678118654752440f)));
    case TX_CUDA_ACT_RELU: return x > 0.0f ? x : 0.0f;
    default: {
        float s = 1.0f / (1.0f + expf(-x));
        return x * s;
    }
    }
}

template <typename TX, typename TY>
__global__ void __launch_bounds__(256) act_kernel(int act, const TX *x, TY *y, size_t nvec, HQ q)
{
    float amax = 0.0f;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride) {
        float v[8];
        txq::load8(x + i * 8, v);
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = act_f(act, v[j]);
        store8(y + i * 8, v);
        fold8(q, v, i * 8, amax);
    }
    commit_amax(amax, q.amax);
}

/* Partial column sums over one 64-row chunk (blockIdx.y), 8 columns per
 * thread, rows in order (act.cu's colsum order); dx copy and hand-off in
 * the same read. */
template <typename T>
__global__ void __launch_bounds__(128) bias_partial(const T *dy, T *dx, size_t rows, size_t cols,
                                                    float *ws, HQ q)
{
    const size_t cv = (size_t)blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
    float amax = 0.0f;
    if (cv * 8 < cols) {
        size_t r0 = chunk * kRowsPerChunk, r1 = r0 + kRowsPerChunk;
        if (r1 > rows) r1 = rows;
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (size_t r = r0; r < r1; r++) {
            const size_t i = r * cols + cv * 8;
            txq::Raw8<T> raw;
            raw.load(dy + i);
            if (dx) raw.stage(dx + i);
            float v[8];
            raw.get(v);
#pragma unroll
            for (int j = 0; j < 8; j++) s[j] += v[j];
            fold8(q, v, i, amax);
        }
        if (ws) {
            float *o = ws + chunk * cols + cv * 8;
#pragma unroll
            for (int j = 0; j < 8; j++) o[j] = s[j];
        }
    }
    commit_amax(amax, q.amax);
}

__global__ void bias_final(const float *ws, size_t n_chunks, size_t cols, void *out, int out_dtype)
{
    const size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float s = 0.0f;
    for (size_t c = 0; c < n_chunks; c++) s += ws[c * cols + j];
    tx_st(out, j, out_dtype, s);
}

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "%s: %s", what, why);
}

bool quant_src(teexec_dtype t) { return t == TEEXEC_DTYPE_BFLOAT16 || t == TEEXEC_DTYPE_FLOAT; }

teexec_status *check_q(const tx_cuda_handoff_q *q, const char *what)
{
    if (!q || !q->amax) return bad(what, "no amax target");
    if (q->scale && (!q->row_data || (uintptr_t)q->row_data % 16))
        return bad(what, "a cast needs 16-byte aligned rowwise data");
    if (q->scale && q->fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && q->fmt != TEEXEC_DTYPE_FLOAT8E5M2)
        return bad(what, "the format is not E4M3FN or E5M2");
    return NULL;
}

HQ hq_of(const tx_cuda_handoff_q *q)
{
    HQ h;
    h.amax = q->amax;
    h.scale = q->scale;
    h.row_data = q->row_data;
    h.e5m2 = q->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    return h;
}

bool aligned16(const void *p) { return ((uintptr_t)p % 16) == 0; }

size_t n_chunks_of(size_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

template <typename TX, typename TY>
void launch_norm(int nv, unsigned grid, const tx_cuda_norm_fwd &a, const HQ &h, cudaStream_t s)
{
    switch (nv) {
    case 1: norm_kernel<TX, TY, 1><<<grid, kNormThreads, 0, s>>>(a, h); break;
    case 2: norm_kernel<TX, TY, 2><<<grid, kNormThreads, 0, s>>>(a, h); break;
    case 4: norm_kernel<TX, TY, 4><<<grid, kNormThreads, 0, s>>>(a, h); break;
    default: norm_kernel<TX, TY, kNormVecs><<<grid, kNormThreads, 0, s>>>(a, h); break;
    }
}

} // namespace

extern "C" teexec_status *tx_cuda_handoff_norm_forward(const tx_cuda_norm_fwd *a,
                                                       const tx_cuda_handoff_q *q, void *stream)
{
    static const char *const what = "cuda hand-off norm";
    TX_TRY(check_q(q, what));
    if (!a || !a->x || !a->y || !a->gamma || (!a->rms && !a->beta)) return bad(what, "missing tensor");
    if (a->rows == 0 || a->h == 0) return NULL;
    if (a->h % 8 || a->h > TX_HANDOFF_NORM_MAX_H || !aligned16(a->x) || !aligned16(a->y))
        return bad(what, "h must be a multiple of 8 and <= 16384, x and y 16-byte aligned");
    if (!quant_src(a->x_dtype) || !quant_src(a->y_dtype) || !tx_io_dtype_ok(a->w_dtype))
        return bad(what, "x and y must be float32 or bfloat16");
    if (a->rows > 0x7fffffffu) return bad(what, "too many rows for one launch");
    HQ h = hq_of(q);
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned g = (unsigned)a->rows;
    const bool xb = a->x_dtype == TEEXEC_DTYPE_BFLOAT16, yb = a->y_dtype == TEEXEC_DTYPE_BFLOAT16;
    const size_t nvec = a->h / 8;
    const int nv = nvec <= kNormThreads ? 1 : nvec <= 2 * kNormThreads ? 2
                 : nvec <= 4 * kNormThreads ? 4 : 8;
    if (xb && yb) launch_norm<__nv_bfloat16, __nv_bfloat16>(nv, g, *a, h, s);
    else if (xb) launch_norm<__nv_bfloat16, float>(nv, g, *a, h, s);
    else if (yb) launch_norm<float, __nv_bfloat16>(nv, g, *a, h, s);
    else launch_norm<float, float>(nv, g, *a, h, s);
    TX_CUDA_LAUNCHED("handoff norm_kernel");
    return NULL;
}

static unsigned grid_of(size_t nvec)
{
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        sms = 132;
    size_t b = (nvec + 255) / 256, cap = (size_t)sms * 8;
    if (b > cap) b = cap;
    return b ? (unsigned)b : 1u;
}

extern "C" teexec_status *tx_cuda_handoff_act_forward(tx_cuda_act act, size_t rows, size_t cols,
                                                      const void *x, teexec_dtype x_dtype, void *y,
                                                      teexec_dtype y_dtype,
                                                      const tx_cuda_handoff_q *q, void *stream)
{
    static const char *const what = "cuda hand-off activation";
    TX_TRY(check_q(q, what));
    if (act != TX_CUDA_ACT_GELU_TANH && act != TX_CUDA_ACT_GELU_ERF && act != TX_CUDA_ACT_RELU &&
        act != TX_CUDA_ACT_SILU)
        return bad(what, "only GELU, ReLU and SiLU");
    if (!x || !y) return bad(what, "missing tensor");
    if (rows == 0 || cols == 0) return NULL;
    if (cols % 8 || !aligned16(x) || !aligned16(y))
        return bad(what, "cols must be a multiple of 8, x and y 16-byte aligned");
    if (!quant_src(x_dtype) || !quant_src(y_dtype)) return bad(what, "x and y must be float32 or bfloat16");
    HQ h = hq_of(q);
    const size_t nvec = rows * cols / 8;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned g = grid_of(nvec);
    const bool xb = x_dtype == TEEXEC_DTYPE_BFLOAT16, yb = y_dtype == TEEXEC_DTYPE_BFLOAT16;
    if (xb && yb)
        act_kernel<<<g, 256, 0, s>>>((int)act, (const __nv_bfloat16 *)x, (__nv_bfloat16 *)y, nvec, h);
    else if (xb)
        act_kernel<<<g, 256, 0, s>>>((int)act, (const __nv_bfloat16 *)x, (float *)y, nvec, h);
    else if (yb)
        act_kernel<<<g, 256, 0, s>>>((int)act, (const float *)x, (__nv_bfloat16 *)y, nvec, h);
    else act_kernel<<<g, 256, 0, s>>>((int)act, (const float *)x, (float *)y, nvec, h);
    TX_CUDA_LAUNCHED("handoff act_kernel");
    return NULL;
}

extern "C" size_t tx_cuda_handoff_bias_workspace_floats(size_t rows, size_t cols)
{
    return n_chunks_of(rows) * cols;
}

extern "C" teexec_status *tx_cuda_handoff_bias_backward(const void *dy, teexec_dtype dy_dtype,
                                                        size_t rows, size_t cols, void *dx,
                                                        void *dbias, teexec_dtype dbias_dtype,
                                                        float *workspace,
                                                        const tx_cuda_handoff_q *q, void *stream)
{
    static const char *const what = "cuda hand-off bias backward";
    TX_TRY(check_q(q, what));
    if (!dy || (dbias && !workspace)) return bad(what, "missing tensor or workspace");
    if (rows == 0 || cols == 0) return NULL;
    if (cols % 8 || !aligned16(dy) || (dx && !aligned16(dx)))
        return bad(what, "cols must be a multiple of 8, dy and dx 16-byte aligned");
    if (!quant_src(dy_dtype)) return bad(what, "dy must be float32 or bfloat16");
    if (dbias && !tx_io_dtype_ok(dbias_dtype)) return bad(what, "bad dbias dtype");
    const size_t nc = n_chunks_of(rows);
    if (nc > 65535) return bad(what, "too many rows for the chunk grid");
    HQ h = hq_of(q);
    cudaStream_t s = (cudaStream_t)stream;
    if (dx == dy) dx = NULL;
    float *ws = dbias ? workspace : NULL; /* no dbias: the pass still copies and measures */
    dim3 grid((unsigned)((cols / 8 + 127) / 128), (unsigned)nc);
    if (dy_dtype == TEEXEC_DTYPE_BFLOAT16)
        bias_partial<<<grid, 128, 0, s>>>((const __nv_bfloat16 *)dy, (__nv_bfloat16 *)dx, rows,
                                          cols, ws, h);
    else bias_partial<<<grid, 128, 0, s>>>((const float *)dy, (float *)dx, rows, cols, ws, h);
    TX_CUDA_LAUNCHED("handoff bias_partial");
    if (!dbias) return NULL;
    bias_final<<<(unsigned)((cols + 255) / 256), 256, 0, s>>>(ws, nc, cols, dbias, (int)dbias_dtype);
    TX_CUDA_LAUNCHED("handoff bias_final");
    return NULL;
}
