/* handoff_act.cu - activation forward and dact+dbias that also measure
 * (and, with a known scale, cast) their output for a Linear's FP8
 * per-tensor quantizer (handoff_act.h). */
#include "kernels/cuda/colsum_parts.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/handoff_common.cuh"

extern "C" {
#include "kernels/cuda/handoff_act.h"
}

#include <math.h>

namespace {

using txh::HQ;

constexpr size_t kRowsPerChunk = 64; /* act.cu's bias-grad chunk: same partial sums */
constexpr int kColThreads = 128;
constexpr int kColUnroll = 4;

struct Act {
    int fn, gated, clamped;
    float limit, alpha, offset;
};

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* f(x) and f'(x): act_ext.cu's fn_eval (act.cu's act_f for the functions
 * both have), expression for expression, so that the compiler contracts
 * them alike and the stored bits match the unfused kernels'. */
__device__ __forceinline__ void fn_eval(int fn, float x, float p, float *f, float *df)
{
    switch (fn) {
    case TX_CUDA_ACTX_GELU_TANH: {
        float t = tanhf(0.79788456f * x * (1.0f + 0.044715f * x * x));
        *f = 0.5f * x * (1.0f + t);
        *df = 0.5f * x * ((1.0f - t * t) * (0.79788456f + 0.1070322243f * x * x)) +
              0.5f * (1.0f + t);
        return;
    }
    case TX_CUDA_ACTX_GELU_ERF: {
        float c = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
        *f = x * c;
        *df = c + x * 0.39894228040143267794f * expf(-0.5f * x * x);
        return;
    }
    case TX_CUDA_ACTX_QGELU: {
        float s = sigm(p * x);
        *f = x * s;
        *df = p * x * s * (1.0f - s) + s;
        return;
    }
    case TX_CUDA_ACTX_RELU:
        *f = x > 0.0f ? x : 0.0f;
        *df = x > 0.0f ? 1.0f : 0.0f;
        return;
    case TX_CUDA_ACTX_SRELU:
        *f = x > 0.0f ? x * x : 0.0f;
        *df = x > 0.0f ? 2.0f * x : 0.0f;
        return;
    case TX_CUDA_ACTX_SILU: {
        float s = sigm(x);
        *f = x * s;
        *df = x * s * (1.0f - s) + s;
        return;
    }
    default: { /* sigmoid, GLU's gate */
        float s = sigm(x);
        *f = s;
        *df = s * (1.0f - s);
        return;
    }
    }
}

/* y for one element: a plain f(av), or gated f(av) * b~ (ClampedSwiGLU:
 * the gate clamped above, the up value clamped both ways plus offset). */
__device__ __forceinline__ float act_y(const Act &a, float av, float bv)
{
    float f, df;
    if (!a.gated) {
        fn_eval(a.fn, av, 1.702f, &f, &df);
        return f;
    }
    if (!a.clamped) {
        fn_eval(a.fn, av, 1.702f, &f, &df);
        return f * bv;
    }
    float at = av < a.limit ? av : a.limit;
    fn_eval(TX_CUDA_ACTX_QGELU, at, a.alpha, &f, &df);
    float bc = bv < -a.limit ? -a.limit : (bv > a.limit ? a.limit : bv);
    return f * (bc + a.offset);
}

/* One thread per 8 outputs, grid-stride; gated x rows hold the gate
 * half then the up half (2 * cols8 vectors a row). */
template <typename T>
__global__ void __launch_bounds__(256) act_fwd_kernel(Act a, const T *x, T *y, size_t n8,
                                                      size_t cols8, HQ q)
{
    float amax = 0.0f;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
        float v[8], b[8], o[8];
        if (a.gated) {
            const size_t r = i / cols8, j = i % cols8, xi = r * 2 * cols8 + j;
            txh::ld8(x + xi * 8, v);
            txh::ld8(x + (xi + cols8) * 8, b);
        } else {
            txh::ld8(x + i * 8, v);
#pragma unroll
            for (int k = 0; k < 8; k++) b[k] = 1.0f;
        }
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = act_y(a, v[k], b[k]);
        txh::st8(y + i * 8, o);
        txh::fold8(q, o, i * 8, amax);
    }
    txh::commit_amax(amax, q.amax);
}

/* act.cu's colsum_vec<T, true> (dx = dy * f'(x) stored, its stored values
 * summed over a 64-row chunk in row order, 8 columns per thread) plus the
 * hand-off of each stored dx vector. */
template <typename T>
__global__ void __launch_bounds__(kColThreads)
dact_bias_kernel(int fn, const T *x, const T *dy, T *dx, size_t rows, size_t cols8, float *ws,
                 HQ q)
{
    const size_t j = (size_t)blockIdx.x * kColThreads + threadIdx.x, chunk = blockIdx.y;
    float amax = 0.0f;
    if (j < cols8) {
        size_t r0 = chunk * kRowsPerChunk, r1 = r0 + kRowsPerChunk;
        if (r1 > rows) r1 = rows;
        float s[8];
#pragma unroll
        for (int k = 0; k < 8; k++) s[k] = 0.0f;
        for (size_t r = r0; r < r1; r += kColUnroll) {
            tx_vec8<T> dv[kColUnroll], xv[kColUnroll];
#pragma unroll
            for (int u = 0; u < kColUnroll; u++) {
                if (r + u < r1) {
                    dv[u] = tx_vec8<T>::load(dy, (r + u) * cols8 + j);
                    xv[u] = tx_vec8<T>::load(x, (r + u) * cols8 + j);
                }
            }
#pragma unroll
            for (int u = 0; u < kColUnroll; u++) {
                if (r + u < r1) {
                    float d[8], xf[8], f, df;
                    dv[u].to_float(d);
                    xv[u].to_float(xf);
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        fn_eval(fn, xf[k], 1.702f, &f, &df);
                        d[k] = d[k] * df;
                    }
                    const size_t i8 = (r + u) * cols8 + j;
                    tx_vec8<T> o = tx_vec8<T>::from_float(d);
                    o.store(dx, i8);
                    o.to_float(d);
#pragma unroll
                    for (int k = 0; k < 8; k++) s[k] += d[k];
                    txh::fold8(q, d, i8 * 8, amax);
                }
            }
        }
        if (ws) tx_vec8<float>::from_float(s).store(ws + chunk * cols8 * 8, j);
    }
    txh::commit_amax(amax, q.amax);
}

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "%s: %s", what, why);
}

bool io_dtype(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_BFLOAT16 || t == TEEXEC_DTYPE_FLOAT || t == TEEXEC_DTYPE_FLOAT16;
}

unsigned grid_of(size_t n8)
{
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        sms = 132;
    size_t b = (n8 + 255) / 256, cap = (size_t)sms * 8;
    if (b > cap) b = cap;
    return b ? (unsigned)b : 1u;
}

size_t n_chunks_of(size_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

} // namespace

extern "C" teexec_status *tx_cuda_handoff_act_forward(const tx_cuda_actx_args *a,
                                                      const tx_cuda_handoff_q *q, void *stream)
{
    static const char *const what = "cuda hand-off activation";
    TX_TRY(txh::check_q(q, what));
    if (!a || !a->x || !a->y) return bad(what, "missing tensor");
    if ((int)a->fn < 0 || a->fn >= TX_CUDA_ACTX_COUNT) return bad(what, "unknown function");
    if (a->scales) return bad(what, "scaled activations have no hand-off kernel");
    if (a->clamped && (!a->gated || a->fn != TX_CUDA_ACTX_QGELU))
        return bad(what, "the clamp is ClampedSwiGLU's (gated QGELU)");
    if (a->rows == 0 || a->cols == 0) return NULL;
    if (a->cols % 8 || !tx_aligned16(a->x) || !tx_aligned16(a->y))
        return bad(what, "cols must be a multiple of 8, x and y 16-byte aligned");
    if (!io_dtype(a->x_dtype) || a->y_dtype != a->x_dtype)
        return bad(what, "x and y must share one dtype: float32, bfloat16 or float16");
    const Act k = {(int)a->fn, a->gated != 0, a->clamped != 0, a->limit, a->alpha, a->offset};
    const HQ h = txh::hq_of(q);
    const size_t n8 = a->rows * a->cols / 8, cols8 = a->cols / 8;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned g = grid_of(n8);
    TX_VEC8_DISPATCH(a->x_dtype, T,
                     act_fwd_kernel<T><<<g, 256, 0, s>>>(k, (const T *)a->x, (T *)a->y, n8, cols8,
                                                         h));
    TX_CUDA_LAUNCHED("handoff act_fwd_kernel");
    return NULL;
}

extern "C" size_t tx_cuda_handoff_dact_bias_workspace_floats(size_t rows, size_t cols)
{
    return n_chunks_of(rows) * cols;
}

extern "C" teexec_status *tx_cuda_handoff_dact_bias_backward(
    tx_cuda_actx_fn fn, size_t rows, size_t cols, const void *x, const void *dy, void *dx,
    teexec_dtype dtype, void *dbias, teexec_dtype dbias_dtype, float *workspace,
    const tx_cuda_handoff_q *q, void *stream)
{
    static const char *const what = "cuda hand-off dact+dbias";
    TX_TRY(txh::check_q(q, what));
    if (!x || !dy || !dx || (dbias && !workspace)) return bad(what, "missing tensor or workspace");
    if ((int)fn < 0 || fn >= TX_CUDA_ACTX_SIGMOID) return bad(what, "not a plain activation");
    if (rows == 0 || cols == 0) return NULL;
    if (cols % 8 || !tx_aligned16(x) || !tx_aligned16(dy) || !tx_aligned16(dx) ||
        (workspace && !tx_aligned16(workspace)))
        return bad(what, "cols must be a multiple of 8, every buffer 16-byte aligned");
    if (!io_dtype(dtype)) return bad(what, "x, dy and dx must be float32, bfloat16 or float16");
    if (dbias && !io_dtype(dbias_dtype)) return bad(what, "bad dbias dtype");
    const size_t nc = n_chunks_of(rows), cols8 = cols / 8;
    if (nc > 65535) return bad(what, "too many rows for the chunk grid");
    const HQ h = txh::hq_of(q);
    cudaStream_t s = (cudaStream_t)stream;
    float *ws = dbias ? workspace : NULL;
    dim3 grid((unsigned)((cols8 + kColThreads - 1) / kColThreads), (unsigned)nc);
    TX_VEC8_DISPATCH(dtype, T,
                     dact_bias_kernel<T><<<grid, kColThreads, 0, s>>>(
                         (int)fn, (const T *)x, (const T *)dy, (T *)dx, rows, cols8, ws, h));
    TX_CUDA_LAUNCHED("handoff dact_bias_kernel");
    if (!dbias) return NULL;
    tx_colsum_outs outs = {{dbias, NULL}};
    tx_colsum_parts_final<<<dim3((unsigned)((cols + 31) / 32), 1), dim3(32, 8), 0, s>>>(
        ws, nc, cols, outs, (int)dbias_dtype);
    TX_CUDA_LAUNCHED("handoff dbias final");
    return NULL;
}
