/* handoff_fp8.cu - norm forward and Bias backward that also
 * measure (and, with a known scale, cast) their output for the next
 * Linear's FP8 per-tensor quantizer (handoff_fp8.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/norm_row.cuh"
#include "kernels/cuda/handoff_common.cuh"

extern "C" {
#include "kernels/cuda/handoff_fp8.h"
}

#include <math.h>

namespace {

using txh::HQ;
using txh::commit_amax;
using txh::fold8;
using txh::ld8;
using txh::st8;

constexpr int kNormThreads = 256;
constexpr int kNormVecs = 8; /* 8-element vectors per thread: h <= 256 * 8 * 8 */
constexpr size_t kRowsPerChunk = 64;

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
    float mu, rs;
    txn::row_stats<TX, NV, kNormThreads>(x, base, nvec, h, a.rms, a.eps, v, red, mu, rs);
    float amax = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const size_t c = threadIdx.x + (size_t)k * kNormThreads;
        if (c < nvec) {
            float o[8];
            txn::apply8(a, c, v[k], mu, rs, o);
            st8(y + base + c * 8, o);
            fold8(q, o, base + c * 8, amax);
        }
    }
    if (threadIdx.x == 0) {
        if (a.mu && !a.rms) a.mu[r] = mu;
        if (a.rsigma) a.rsigma[r] = rs;
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
            const tx_vec8<T> raw = tx_vec8<T>::load(dy, i / 8);
            if (dx) raw.store(dx, i / 8);
            float v[8];
            raw.to_float(v);
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

bool quant_src(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_BFLOAT16 || t == TEEXEC_DTYPE_FLOAT || t == TEEXEC_DTYPE_FLOAT16;
}

using txh::check_q;
using txh::hq_of;

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
        return bad(what, "x and y must be float32, bfloat16 or float16");
    if (a->rows > 0x7fffffffu) return bad(what, "too many rows for one launch");
    HQ h = hq_of(q);
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned g = (unsigned)a->rows;
    const size_t nvec = a->h / 8;
    const int nv = nvec <= kNormThreads ? 1 : nvec <= 2 * kNormThreads ? 2
                 : nvec <= 4 * kNormThreads ? 4 : 8;
    const teexec_dtype xt = a->x_dtype, yt = a->y_dtype;
    /* one dtype in and out, or bf16 <-> fp32 (a norm computing in fp32
     * for a bf16 model): the pairs the executor produces */
    if (xt == yt) {
        TX_VEC8_DISPATCH(xt, T, launch_norm<T, T>(nv, g, *a, h, s));
    } else if (xt == TEEXEC_DTYPE_BFLOAT16 && yt == TEEXEC_DTYPE_FLOAT) {
        launch_norm<__nv_bfloat16, float>(nv, g, *a, h, s);
    } else if (xt == TEEXEC_DTYPE_FLOAT && yt == TEEXEC_DTYPE_BFLOAT16) {
        launch_norm<float, __nv_bfloat16>(nv, g, *a, h, s);
    } else {
        return bad(what, "x and y must share a dtype, or be bfloat16 and float32");
    }
    TX_CUDA_LAUNCHED("handoff norm_kernel");
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
    if (!quant_src(dy_dtype)) return bad(what, "dy must be float32, bfloat16 or float16");
    if (dbias && !tx_io_dtype_ok(dbias_dtype)) return bad(what, "bad dbias dtype");
    const size_t nc = n_chunks_of(rows);
    if (nc > 65535) return bad(what, "too many rows for the chunk grid");
    HQ h = hq_of(q);
    cudaStream_t s = (cudaStream_t)stream;
    if (dx == dy) dx = NULL;
    float *ws = dbias ? workspace : NULL; /* no dbias: the pass still copies and measures */
    dim3 grid((unsigned)((cols / 8 + 127) / 128), (unsigned)nc);
    TX_VEC8_DISPATCH(dy_dtype, T,
                     bias_partial<<<grid, 128, 0, s>>>((const T *)dy, (T *)dx, rows, cols, ws, h));
    TX_CUDA_LAUNCHED("handoff bias_partial");
    if (!dbias) return NULL;
    bias_final<<<(unsigned)((cols + 255) / 256), 256, 0, s>>>(ws, nc, cols, dbias, (int)dbias_dtype);
    TX_CUDA_LAUNCHED("handoff bias_final");
    return NULL;
}
