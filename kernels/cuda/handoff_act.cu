/* handoff_act.cu - activation forward and dact+dbias that also measure
 * (and, with a known scale, cast) their output for a Linear's FP8
 * per-tensor quantizer (handoff_act.h). */
#include "kernels/cuda/act_fn.cuh"
#include "kernels/cuda/colsum_parts.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/handoff_common.cuh"

extern "C" {
#include "kernels/cuda/handoff_act.h"
}

#include <atomic>
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

using txa::fn_eval;

/* How y is made from x: a plain f(a), gated f(a) * b, or ClampedSwiGLU's
 * clamped gated QGELU. */
enum Mode { kPlain = 0, kGated = 1, kClamped = 2 };

/* y for one element: a plain f(av), or gated f(av) * b~ (ClampedSwiGLU:
 * the gate clamped above, the up value clamped both ways plus offset).
 * FN and MODE are template constants, so the switch of fn_eval folds away
 * and f'(x), unused here, is never computed. */
template <int FN, int MODE>
__device__ __forceinline__ float act_y(const Act &a, float av, float bv)
{
    float f, df;
    if (MODE == kPlain) {
        fn_eval(FN, av, 1.702f, &f, &df);
        return f;
    }
    if (MODE == kGated) {
        fn_eval(FN, av, 1.702f, &f, &df);
        return f * bv;
    }
    float at = av < a.limit ? av : a.limit;
    fn_eval(TX_CUDA_ACTX_QGELU, at, a.alpha, &f, &df);
    float bc = bv < -a.limit ? -a.limit : (bv > a.limit ? a.limit : bv);
    return f * (bc + a.offset);
}

/* Vectors of 8 outputs per thread per step, their loads all issued before
 * the first one is used (kFwdUnroll x 16 bytes in flight a thread, x 2
 * gated). Measured on the H200 at 8192 x 16384 bf16, GELU(erf), with the
 * amax (bench/gpu/kernel_bw.c): U = 1 / 2 / 4 / 8 ran 0.184 / 0.183 /
 * 0.181 / 0.190 ms - the pass is bound by the erff arithmetic (~35
 * instructions an element against a 0.130 ms copy of the same bytes), so
 * what counted was the function as a template constant (next kernel), not
 * the unroll: the kernel with fn read at run time ran 0.286 ms. */
constexpr int kFwdThreads = 256;
constexpr int kFwdUnroll = 4;

/* Grid-stride over steps of U vectors: vector u of a thread's step is
 * i0 + u * stride, so each load instruction of a warp covers 512
 * consecutive bytes. Gated x rows hold the gate half then the up half
 * (2 * cols8 vectors a row). */
template <typename T, int FN, int MODE, int U>
__global__ void __launch_bounds__(kFwdThreads) act_fwd_kernel(Act a, const T *x, T *y, size_t n8,
                                                              size_t cols8, HQ q)
{
    float amax = 0.0f;
    const size_t stride = (size_t)gridDim.x * kFwdThreads;
    for (size_t i0 = (size_t)blockIdx.x * kFwdThreads + threadIdx.x; i0 < n8; i0 += U * stride) {
        txq::Raw8<T> rv[U], rb[MODE == kPlain ? 1 : U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t i = i0 + u * stride;
            if (i < n8) {
                if (MODE == kPlain) {
                    rv[u].load(x + i * 8);
                } else {
                    const size_t r = i / cols8, j = i % cols8, xi = r * 2 * cols8 + j;
                    rv[u].load(x + xi * 8);
                    rb[u].load(x + (xi + cols8) * 8);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t i = i0 + u * stride;
            if (i < n8) {
                float v[8], b[8], o[8];
                rv[u].get(v);
                if (MODE != kPlain) rb[u].get(b);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    o[k] = act_y<FN, MODE>(a, v[k], MODE == kPlain ? 1.0f : b[k]);
                txh::st8(y + i * 8, o);
                txh::fold8(q, o, i * 8, amax);
            }
        }
    }
    txh::commit_amax(amax, q.amax);
}

/* act.cu's colsum_vec<T, true> (dx = dy * f'(x) stored, its stored values
 * summed over a 64-row chunk in row order, 8 columns per thread) plus the
 * hand-off of each stored dx vector. FN is a template constant: f(x) is
 * never computed and no per-element switch is left - with fn read at run
 * time this pass ran 0.541 ms at 8192 x 16384 bf16 GELU(erf) on the H200,
 * with FN a constant 0.282 ms (UR = 2: 0.279, UR = 8: 0.328, UR = 4 held
 * to 64 registers: 0.297; a copy of x alone takes 0.130). The chunk shape
 * stays act.cu's, so dbias keeps its bits. */
template <typename T, int FN, int UR>
__global__ void __launch_bounds__(kColThreads)
dact_bias_kernel(const T *x, const T *dy, T *dx, size_t rows, size_t cols8, float *ws, HQ q)
{
    const size_t j = (size_t)blockIdx.x * kColThreads + threadIdx.x, chunk = blockIdx.y;
    float amax = 0.0f;
    if (j < cols8) {
        size_t r0 = chunk * kRowsPerChunk, r1 = r0 + kRowsPerChunk;
        if (r1 > rows) r1 = rows;
        float s[8];
#pragma unroll
        for (int k = 0; k < 8; k++) s[k] = 0.0f;
        for (size_t r = r0; r < r1; r += UR) {
            txq::Raw8<T> dv[UR], xv[UR];
#pragma unroll
            for (int u = 0; u < UR; u++) {
                if (r + u < r1) {
                    dv[u].load(dy + ((r + u) * cols8 + j) * 8);
                    xv[u].load(x + ((r + u) * cols8 + j) * 8);
                }
            }
#pragma unroll
            for (int u = 0; u < UR; u++) {
                if (r + u < r1) {
                    float d[8], xf[8], f, df;
                    dv[u].get(d);
                    xv[u].get(xf);
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        fn_eval(FN, xf[k], 1.702f, &f, &df);
                        d[k] = d[k] * df;
                    }
                    const size_t i8 = (r + u) * cols8 + j;
                    txh::st8(dx + i8 * 8, d);
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

int sm_count()
{
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        sms = 132;
    return sms;
}

/* Runs the statements with the int constant F set to fn's value. */
#define HK_FN_DISPATCH(fn, F, ...)                                                               \
    switch (fn) {                                                                                \
    case TX_CUDA_ACTX_GELU_TANH: { constexpr int F = TX_CUDA_ACTX_GELU_TANH; __VA_ARGS__; } break; \
    case TX_CUDA_ACTX_GELU_ERF: { constexpr int F = TX_CUDA_ACTX_GELU_ERF; __VA_ARGS__; } break;   \
    case TX_CUDA_ACTX_QGELU: { constexpr int F = TX_CUDA_ACTX_QGELU; __VA_ARGS__; } break;         \
    case TX_CUDA_ACTX_RELU: { constexpr int F = TX_CUDA_ACTX_RELU; __VA_ARGS__; } break;           \
    case TX_CUDA_ACTX_SRELU: { constexpr int F = TX_CUDA_ACTX_SRELU; __VA_ARGS__; } break;         \
    case TX_CUDA_ACTX_SILU: { constexpr int F = TX_CUDA_ACTX_SILU; __VA_ARGS__; } break;           \
    default: { constexpr int F = TX_CUDA_ACTX_SIGMOID; __VA_ARGS__; } break;                      \
    }

/* One launch of the forward kernel: as many blocks as fit on the device
 * at once (the occupancy the compiled kernel allows), fewer when the
 * tensor has fewer steps; each thread then strides over the tensor. */
template <typename T, int FN, int MODE, int U>
cudaError_t launch_fwd(const Act &k, const T *x, T *y, size_t n8, size_t cols8, const HQ &h,
                       cudaStream_t s)
{
    /* the occupancy of one instantiation never changes: asked once (a
     * relaxed atomic: concurrent first calls compute the same value) */
    static std::atomic<int> cached(0);
    int per_sm = cached.load(std::memory_order_relaxed);
    if (per_sm < 1) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_sm, act_fwd_kernel<T, FN, MODE, U>, kFwdThreads, 0) != cudaSuccess ||
            per_sm < 1) {
            (void)cudaGetLastError(); /* not sticky: fall back to a typical 4 blocks */
            per_sm = 4;
        }
        cached.store(per_sm, std::memory_order_relaxed);
    }
    size_t b = (n8 + (size_t)kFwdThreads * U - 1) / ((size_t)kFwdThreads * U),
           cap = (size_t)sm_count() * (size_t)per_sm;
    if (b > cap) b = cap;
    act_fwd_kernel<T, FN, MODE, U><<<(unsigned)(b ? b : 1), kFwdThreads, 0, s>>>(k, x, y, n8,
                                                                                  cols8, h);
    return cudaGetLastError();
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
    if (a->softcap || a->fn == TX_CUDA_ACTX_SITU) return bad(what, "SiTU has no fused hand-off");
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
    cudaError_t e = cudaSuccess;
    const int mode = !a->gated ? kPlain : a->clamped ? kClamped : kGated;
    TX_VEC8_DISPATCH(a->x_dtype, T, {
        const T *xx = (const T *)a->x;
        T *yy = (T *)a->y;
        if (mode == kClamped)
            e = launch_fwd<T, TX_CUDA_ACTX_QGELU, kClamped, kFwdUnroll>(k, xx, yy, n8, cols8, h, s);
        else if (mode == kGated) {
            HK_FN_DISPATCH(a->fn, F,
                           e = launch_fwd<T, F, kGated, kFwdUnroll>(k, xx, yy, n8, cols8, h, s));
        } else {
            HK_FN_DISPATCH(a->fn, F,
                           e = launch_fwd<T, F, kPlain, kFwdUnroll>(k, xx, yy, n8, cols8, h, s));
        }
    });
    TX_CUDA_TRY(e, "handoff act_fwd_kernel");
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
                     HK_FN_DISPATCH(fn, F,
                                    dact_bias_kernel<T, F, kColUnroll>
                                    <<<grid, kColThreads, 0, s>>>((const T *)x, (const T *)dy,
                                                                  (T *)dx, rows, cols8, ws,
                                                                  h)));
    TX_CUDA_LAUNCHED("handoff dact_bias_kernel");
    if (!dbias) return NULL;
    tx_colsum_outs outs = {{dbias, NULL}};
    tx_colsum_parts_final<<<dim3((unsigned)((cols + 31) / 32), 1), dim3(32, 8), 0, s>>>(
        ws, nc, cols, outs, (int)dbias_dtype);
    TX_CUDA_LAUNCHED("handoff dbias final");
    return NULL;
}
