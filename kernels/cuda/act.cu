/* act.cu - activations forward/backward, dact+dbias, bias grad (act.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/colsum_parts.cuh"
#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/vec8_io.cuh"

extern "C" {
#include "kernels/cuda/act.h"
}

#include <math.h>

namespace {

constexpr size_t kRowsPerChunk = 64;

size_t n_chunks_of(size_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

/* f(x) and f'(x), the CPU's formulas (te_activation.c) in float. */
__device__ __forceinline__ void act_f(int act, float x, float *f, float *df)
{
    switch (act) {
    case TX_CUDA_ACT_GELU_TANH:
    case TX_CUDA_ACT_GEGLU: {
        float t = tanhf(0.79788456f * x * (1.0f + 0.044715f * x * x));
        *f = 0.5f * x * (1.0f + t);
        *df = 0.5f * x * ((1.0f - t * t) * (0.79788456f + 0.1070322243f * x * x)) +
              0.5f * (1.0f + t);
        return;
    }
    case TX_CUDA_ACT_GELU_ERF: {
        float c = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
        *f = x * c;
        *df = c + x * 0.39894228040143267794f * expf(-0.5f * x * x);
        return;
    }
    case TX_CUDA_ACT_RELU:
    case TX_CUDA_ACT_REGLU:
        *f = x > 0.0f ? x : 0.0f;
        *df = x > 0.0f ? 1.0f : 0.0f;
        return;
    default: { /* SiLU, SwiGLU */
        float s = 1.0f / (1.0f + expf(-x));
        *f = x * s;
        *df = x * s * (1.0f - s) + s;
        return;
    }
    }
}

__device__ __forceinline__ bool gated(int act)
{
    return act == TX_CUDA_ACT_SWIGLU || act == TX_CUDA_ACT_GEGLU || act == TX_CUDA_ACT_REGLU;
}

__global__ void act_fwd_kernel(tx_cuda_act_args a)
{
    size_t n = a.rows * a.cols;
    bool g = gated(a.act);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float f, df;
        if (g) {
            size_t r = i / a.cols, j = i % a.cols;
            size_t xi = r * 2 * a.cols + j;
            act_f(a.act, tx_ld(a.x, xi, a.x_dtype), &f, &df);
            f *= tx_ld(a.x, xi + a.cols, a.x_dtype);
        } else {
            act_f(a.act, tx_ld(a.x, i, a.x_dtype), &f, &df);
        }
        tx_st(a.y, i, a.y_dtype, f);
    }
}

__global__ void act_bwd_kernel(tx_cuda_act_args a)
{
    size_t n = a.rows * a.cols;
    bool g = gated(a.act);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float dy = tx_ld(a.dy, i, a.dy_dtype), f, df;
        if (g) {
            size_t r = i / a.cols, j = i % a.cols;
            size_t xi = r * 2 * a.cols + j;
            float av = tx_ld(a.x, xi, a.x_dtype), bv = tx_ld(a.x, xi + a.cols, a.x_dtype);
            act_f(a.act, av, &f, &df);
            tx_st(a.dx, xi, a.dx_dtype, dy * bv * df);
            tx_st(a.dx, xi + a.cols, a.dx_dtype, dy * f);
        } else {
            act_f(a.act, tx_ld(a.x, i, a.x_dtype), &f, &df);
            tx_st(a.dx, i, a.dx_dtype, dy * df);
        }
    }
}

/* Partial column sums over one chunk of rows per blockIdx.y; one thread
 * per column, so reads are coalesced. */
__global__ void colsum_partial(const void *v, int v_dtype, size_t rows, size_t cols,
                               float *ws)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t chunk = blockIdx.y;
    if (j >= cols) return;
    size_t r0 = chunk * kRowsPerChunk, r1 = r0 + kRowsPerChunk;
    if (r1 > rows) r1 = rows;
    float s = 0.0f;
    for (size_t r = r0; r < r1; r++) s += tx_ld(v, r * cols + j, v_dtype);
    ws[chunk * cols + j] = s;
}

__global__ void colsum_final(const float *ws, size_t n_chunks, size_t cols, void *out,
                             int out_dtype)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float s = 0.0f;
    for (size_t c = 0; c < n_chunks; c++) s += ws[c * cols + j];
    tx_st(out, j, out_dtype, s);
}

/* ---- vectorized paths ------------------------------------------------------
 * Taken when x, y (dy, dx) share one dtype, every pointer is 16-byte aligned
 * and cols is a multiple of 8: each thread moves 8 elements per 16-byte
 * access. Same per-element formulas and roundings as the kernels above. */

template <typename T>
__global__ void act_fwd_vec(tx_cuda_act_args a, size_t n8, size_t cols8)
{
    const int act = a.act;
    const bool g = gated(act);
    const T *x = (const T *)a.x;
    T *y = (T *)a.y;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
         i += (size_t)gridDim.x * blockDim.x) {
        float v[8], o[8], df;
        if (g) {
            size_t r = i / cols8, j = i % cols8;
            size_t xi = r * 2 * cols8 + j;
            float b[8];
            tx_vec8<T>::load(x, xi).to_float(v);
            tx_vec8<T>::load(x, xi + cols8).to_float(b);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                act_f(act, v[k], &o[k], &df);
                o[k] *= b[k];
            }
        } else {
            tx_vec8<T>::load(x, i).to_float(v);
#pragma unroll
            for (int k = 0; k < 8; k++) act_f(act, v[k], &o[k], &df);
        }
        tx_vec8<T>::from_float(o).store(y, i);
    }
}

template <typename T>
__global__ void act_bwd_vec(tx_cuda_act_args a, size_t n8, size_t cols8)
{
    const int act = a.act;
    const bool g = gated(act);
    const T *x = (const T *)a.x, *dyp = (const T *)a.dy;
    T *dx = (T *)a.dx;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
         i += (size_t)gridDim.x * blockDim.x) {
        float dy[8], v[8], f, df;
        tx_vec8<T>::load(dyp, i).to_float(dy);
        if (g) {
            size_t r = i / cols8, j = i % cols8;
            size_t xi = r * 2 * cols8 + j;
            float b[8], da[8], db[8];
            tx_vec8<T>::load(x, xi).to_float(v);
            tx_vec8<T>::load(x, xi + cols8).to_float(b);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                act_f(act, v[k], &f, &df);
                da[k] = dy[k] * b[k] * df;
                db[k] = dy[k] * f;
            }
            tx_vec8<T>::from_float(da).store(dx, xi);
            tx_vec8<T>::from_float(db).store(dx, xi + cols8);
        } else {
            float o[8];
            tx_vec8<T>::load(x, i).to_float(v);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                act_f(act, v[k], &f, &df);
                o[k] = dy[k] * df;
            }
            tx_vec8<T>::from_float(o).store(dx, i);
        }
    }
}

/* Column partials over one chunk of kRowsPerChunk rows (blockIdx.y) for
 * 8 columns per thread: rows in order, four rows' loads issued before
 * their sums so enough bytes are in flight. With DACT the kernel first
 * computes dx = dy * f'(x), stores it, and sums dx as stored (rounded to
 * the tensor's dtype) - the values the unfused Bias backward reads, in the
 * same order, so fused and unfused dbias are the same bits. */
constexpr int kColThreads = 128;
constexpr int kColUnroll = 4;

template <typename T, bool DACT>
__global__ void __launch_bounds__(kColThreads)
colsum_vec(int act, const T *x, const T *v, T *dx, size_t rows, size_t cols8, float *ws)
{
    size_t j = (size_t)blockIdx.x * kColThreads + threadIdx.x;
    if (j >= cols8) return;
    size_t chunk = blockIdx.y;
    size_t r0 = chunk * kRowsPerChunk, r1 = r0 + kRowsPerChunk;
    if (r1 > rows) r1 = rows;
    float s[8];
#pragma unroll
    for (int k = 0; k < 8; k++) s[k] = 0.0f;
    for (size_t r = r0; r < r1; r += kColUnroll) {
        tx_vec8<T> vv[kColUnroll], xv[kColUnroll];
#pragma unroll
        for (int u = 0; u < kColUnroll; u++) {
            if (r + u < r1) {
                vv[u] = tx_vec8<T>::load(v, (r + u) * cols8 + j);
                if (DACT) xv[u] = tx_vec8<T>::load(x, (r + u) * cols8 + j);
            }
        }
#pragma unroll
        for (int u = 0; u < kColUnroll; u++) {
            if (r + u < r1) {
                float d[8];
                vv[u].to_float(d);
                if (DACT) {
                    float xf[8], f, df;
                    xv[u].to_float(xf);
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        act_f(act, xf[k], &f, &df);
                        d[k] = d[k] * df;
                    }
                    tx_vec8<T> o = tx_vec8<T>::from_float(d);
                    o.store(dx, (r + u) * cols8 + j);
                    o.to_float(d);
                }
#pragma unroll
                for (int k = 0; k < 8; k++) s[k] += d[k];
            }
        }
    }
    tx_vec8<float>::from_float(s).store(ws + chunk * cols8 * 8, j);
}

template <typename T>
void launch_colsum_vec(int act, bool dact, const void *x, const void *v, void *dx, size_t rows,
                       size_t cols, float *ws, cudaStream_t s)
{
    size_t cols8 = cols / 8;
    dim3 grid((unsigned)((cols8 + kColThreads - 1) / kColThreads), (unsigned)n_chunks_of(rows));
    if (dact)
        colsum_vec<T, true><<<grid, kColThreads, 0, s>>>(act, (const T *)x, (const T *)v, (T *)dx,
                                                         rows, cols8, ws);
    else
        colsum_vec<T, false><<<grid, kColThreads, 0, s>>>(act, NULL, (const T *)v, NULL, rows,
                                                          cols8, ws);
}

/* Grid of the vectorized elementwise kernels: enough 256-thread blocks to
 * fill the SMs several times over, each thread a few vectors. */
unsigned grid_vec(size_t n8)
{
    size_t b = (n8 + 255) / 256;
    if (b > 132u * 16u) b = 132u * 16u;
    return b ? (unsigned)b : 1u;
}

unsigned grid_for(size_t n)
{
    size_t b = (n + 255) / 256;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

} // namespace

extern "C" int tx_cuda_act_gated(tx_cuda_act act)
{
    return act == TX_CUDA_ACT_SWIGLU || act == TX_CUDA_ACT_GEGLU || act == TX_CUDA_ACT_REGLU;
}

static teexec_status *bad(const char *what)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda activation: %s", what);
}

extern "C" teexec_status *tx_cuda_act_forward(const tx_cuda_act_args *a, void *stream)
{
    if ((int)a->act < 0 || a->act > TX_CUDA_ACT_REGLU) return bad("unknown activation");
    if (!tx_io_dtype_ok(a->x_dtype) || !tx_io_dtype_ok(a->y_dtype)) return bad("bad dtype");
    size_t n = a->rows * a->cols;
    if (!n) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    if (a->cols % 8 == 0 && a->y_dtype == a->x_dtype && tx_aligned16(a->x) && tx_aligned16(a->y)) {
        TX_VEC8_DISPATCH(a->x_dtype, T,
                         act_fwd_vec<T><<<grid_vec(n / 8), 256, 0, s>>>(*a, n / 8, a->cols / 8));
    } else {
        act_fwd_kernel<<<grid_for(n), 256, 0, s>>>(*a);
    }
    TX_CUDA_LAUNCHED("activation forward");
    return NULL;
}

extern "C" size_t tx_cuda_colsum_workspace_floats(size_t rows, size_t cols)
{
    return n_chunks_of(rows) * cols;
}

/* The second pass of the vectorized column sums (colsum_parts.cuh). */
static teexec_status *colsum_finish(const float *ws, size_t nc, size_t cols, void *dbias,
                                    teexec_dtype dbias_dtype, cudaStream_t s)
{
    tx_colsum_outs outs = {{dbias, NULL}};
    tx_colsum_parts_final<<<dim3((unsigned)((cols + 31) / 32), 1), dim3(32, 8), 0, s>>>(
        ws, nc, cols, outs, (int)dbias_dtype);
    TX_CUDA_LAUNCHED("bias grad final");
    return NULL;
}

extern "C" teexec_status *tx_cuda_bias_grad(const void *dy, teexec_dtype dy_dtype, size_t rows,
                                            size_t cols, void *dbias, teexec_dtype dbias_dtype,
                                            float *workspace, void *stream)
{
    if (!tx_io_dtype_ok(dy_dtype) || !tx_io_dtype_ok(dbias_dtype)) return bad("bad bias dtype");
    if (!cols) return NULL;
    size_t nc = n_chunks_of(rows);
    if (nc > 65535) return bad("too many rows for the bias-grad grid");
    cudaStream_t s = (cudaStream_t)stream;
    if (nc && cols % 8 == 0 && tx_aligned16(dy) && tx_aligned16(workspace)) {
        TX_VEC8_DISPATCH(dy_dtype, T,
                         launch_colsum_vec<T>(0, false, NULL, dy, NULL, rows, cols, workspace, s));
        TX_CUDA_LAUNCHED("bias grad partial (vectorized)");
        return colsum_finish(workspace, nc, cols, dbias, dbias_dtype, s);
    }
    unsigned gx = (unsigned)((cols + 255) / 256);
    if (nc) {
        if (!workspace) return bad("bias grad needs the workspace");
        colsum_partial<<<dim3(gx, (unsigned)nc), 256, 0, s>>>(dy, dy_dtype, rows, cols, workspace);
        TX_CUDA_LAUNCHED("bias grad partial");
    }
    colsum_final<<<gx, 256, 0, s>>>(workspace, nc, cols, dbias, dbias_dtype);
    TX_CUDA_LAUNCHED("bias grad final");
    return NULL;
}

extern "C" teexec_status *tx_cuda_act_backward(const tx_cuda_act_args *a, void *stream)
{
    if ((int)a->act < 0 || a->act > TX_CUDA_ACT_REGLU) return bad("unknown activation");
    if (!tx_io_dtype_ok(a->x_dtype) || !tx_io_dtype_ok(a->dy_dtype) ||
        !tx_io_dtype_ok(a->dx_dtype))
        return bad("bad dtype");
    if (a->dbias && tx_cuda_act_gated(a->act)) return bad("dbias with a gated activation");
    size_t n = a->rows * a->cols;
    if (!n) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    bool vec = a->cols % 8 == 0 && a->dy_dtype == a->x_dtype && a->dx_dtype == a->x_dtype &&
               tx_aligned16(a->x) && tx_aligned16(a->dy) && tx_aligned16(a->dx);
    size_t nc = n_chunks_of(a->rows);
    if (vec && a->dbias && nc <= 65535 && tx_aligned16(a->workspace)) {
        if (!a->workspace) return bad("bias grad needs the workspace");
        /* dact + dbias in one pass over x and dy (dx summed as stored) */
        TX_VEC8_DISPATCH(a->x_dtype, T,
                         launch_colsum_vec<T>((int)a->act, true, a->x, a->dy, a->dx, a->rows,
                                              a->cols, a->workspace, s));
        TX_CUDA_LAUNCHED("activation backward + bias grad partial");
        return colsum_finish(a->workspace, nc, a->cols, a->dbias, a->dbias_dtype, s);
    }
    if (vec) {
        TX_VEC8_DISPATCH(a->x_dtype, T,
                         act_bwd_vec<T><<<grid_vec(n / 8), 256, 0, s>>>(*a, n / 8, a->cols / 8));
    } else {
        act_bwd_kernel<<<grid_for(n), 256, 0, s>>>(*a);
    }
    TX_CUDA_LAUNCHED("activation backward");
    /* The bias grad sums dx as stored (rounded to dx's dtype), exactly
     * what the unfused Bias backward would read: fused and unfused agree. */
    if (a->dbias)
        return tx_cuda_bias_grad(a->dx, a->dx_dtype, a->rows, a->cols, a->dbias, a->dbias_dtype,
                                 a->workspace, stream);
    return NULL;
}
