/* norm.cu - LayerNorm / RMSNorm forward and backward on the GPU (norm.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/colsum_parts.cuh"
#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/vec8_io.cuh"

extern "C" {
#include "kernels/cuda/norm.h"
}

#include <math.h>

namespace {

constexpr int kThreads = 256;
/* Rows per chunk of the parameter-grad partial sums. */
constexpr size_t kRowsPerChunk = 64;

__global__ void norm_fwd_kernel(tx_cuda_norm_fwd a)
{
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const size_t h = a.h;
    const size_t base = r * h;
    float mu = 0.0f;
    if (!a.rms) {
        float s = 0.0f;
        for (size_t j = threadIdx.x; j < h; j += blockDim.x) s += tx_ld(a.x, base + j, a.x_dtype);
        mu = tx_block_sum(s, red) / (float)h;
    }
    float ss = 0.0f;
    for (size_t j = threadIdx.x; j < h; j += blockDim.x) {
        float c = tx_ld(a.x, base + j, a.x_dtype) - mu;
        ss += c * c;
    }
    float var = tx_block_sum(ss, red) / (float)h;
    float rs = 1.0f / sqrtf(var + a.eps);
    for (size_t j = threadIdx.x; j < h; j += blockDim.x) {
        float xh = (tx_ld(a.x, base + j, a.x_dtype) - mu) * rs;
        float g = tx_ld(a.gamma, j, a.w_dtype);
        if (a.zero_centered_gamma) g += 1.0f;
        float y = xh * g;
        if (!a.rms) y += tx_ld(a.beta, j, a.w_dtype);
        tx_st(a.y, base + j, a.y_dtype, y);
    }
    if (threadIdx.x == 0) {
        if (a.mu && !a.rms) a.mu[r] = mu;
        if (a.rsigma) a.rsigma[r] = rs;
    }
}

__global__ void norm_bwd_dx_kernel(tx_cuda_norm_bwd a)
{
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const size_t h = a.h, base = r * h;
    float mu = a.rms ? 0.0f : a.mu[r];
    float rs = a.rsigma[r];
    float s1 = 0.0f, s2 = 0.0f; /* sum g*dy, sum g*dy*xhat */
    for (size_t j = threadIdx.x; j < h; j += blockDim.x) {
        float g = tx_ld(a.gamma, j, a.w_dtype);
        if (a.zero_centered_gamma) g += 1.0f;
        float gd = g * tx_ld(a.dy, base + j, a.dy_dtype);
        float xh = (tx_ld(a.x, base + j, a.x_dtype) - mu) * rs;
        s1 += gd;
        s2 += gd * xh;
    }
    float m1 = a.rms ? 0.0f : tx_block_sum(s1, red) / (float)h;
    float m2 = tx_block_sum(s2, red) / (float)h;
    for (size_t j = threadIdx.x; j < h; j += blockDim.x) {
        float g = tx_ld(a.gamma, j, a.w_dtype);
        if (a.zero_centered_gamma) g += 1.0f;
        float gd = g * tx_ld(a.dy, base + j, a.dy_dtype);
        float xh = (tx_ld(a.x, base + j, a.x_dtype) - mu) * rs;
        float dx = rs * (gd - m1 - xh * m2);
        if (a.dresid) dx += tx_ld(a.dresid, base + j, a.dx_dtype);
        tx_st(a.dx, base + j, a.dx_dtype, dx);
    }
}

/* Stage 1: partial column sums of dy*xhat (and dy) over one chunk of rows
 * per blockIdx.y; one thread per column, so reads are coalesced. */
__global__ void norm_bwd_param_partial(tx_cuda_norm_bwd a, size_t n_chunks)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t chunk = blockIdx.y;
    if (j >= a.h) return;
    size_t r0 = chunk * kRowsPerChunk, r1 = r0 + kRowsPerChunk;
    if (r1 > a.rows) r1 = a.rows;
    float sg = 0.0f, sb = 0.0f;
    for (size_t r = r0; r < r1; r++) {
        float dy = tx_ld(a.dy, r * a.h + j, a.dy_dtype);
        float mu = a.rms ? 0.0f : a.mu[r];
        float xh = (tx_ld(a.x, r * a.h + j, a.x_dtype) - mu) * a.rsigma[r];
        sg += dy * xh;
        sb += dy;
    }
    a.workspace[chunk * a.h + j] = sg;
    a.workspace[(n_chunks + chunk) * a.h + j] = sb;
}

/* Stage 2: the chunks summed in order. */
__global__ void norm_bwd_param_final(tx_cuda_norm_bwd a, size_t n_chunks)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= a.h) return;
    float sg = 0.0f, sb = 0.0f;
    for (size_t c = 0; c < n_chunks; c++) {
        sg += a.workspace[c * a.h + j];
        sb += a.workspace[(n_chunks + c) * a.h + j];
    }
    if (a.dgamma) tx_st(a.dgamma, j, a.w_dtype, sg);
    if (a.dbeta && !a.rms) tx_st(a.dbeta, j, a.w_dtype, sb);
}

/* ---- vectorized paths ------------------------------------------------------
 * Taken when h is a multiple of 8, the row tensors (x, y / x, dy, dx, dresid)
 * share one dtype and every pointer is 16-byte aligned: a block owns a row,
 * each thread holds VPT 8-element vectors of it in registers, so x is read
 * once per pass over HBM instead of two or three times, with 16-byte loads.
 * Same per-element formulas as the scalar kernels above; only the order of
 * the row sums differs (still fixed, block-tree order). */

/* Threads per row block and vectors per thread for a row of nv vectors. */
struct vec_cfg {
    int vpt, threads;
};

bool vec_cfg_of(size_t h, vec_cfg *c)
{
    if (h == 0 || h % 8 != 0) return false;
    size_t nv = h / 8;
    for (int v = 1; v <= 4; v++) {
        size_t t = ((nv + v - 1) / v + 31) / 32 * 32;
        if (t <= 256 || (v == 4 && t <= 1024)) {
            c->vpt = v;
            c->threads = (int)t;
            return true;
        }
    }
    return false;
}

template <typename T, int VPT>
__global__ void __launch_bounds__(1024) norm_fwd_vec(tx_cuda_norm_fwd a)
{
    __shared__ float red[32];
    const size_t r = blockIdx.x, h = a.h, nv = h / 8;
    const T *x = (const T *)a.x + r * h;
    T *y = (T *)a.y + r * h;
    float v[VPT][8];
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < VPT; q++) {
        size_t j = threadIdx.x + (size_t)q * blockDim.x;
        if (j < nv) {
            tx_vec8<T>::load(x, j).to_float(v[q]);
#pragma unroll
            for (int k = 0; k < 8; k++) s += v[q][k];
        }
    }
    float mu = 0.0f;
    if (!a.rms) mu = tx_block_sum(s, red) / (float)h;
    float ss = 0.0f;
#pragma unroll
    for (int q = 0; q < VPT; q++) {
        size_t j = threadIdx.x + (size_t)q * blockDim.x;
        if (j < nv) {
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float c = v[q][k] - mu;
                ss += c * c;
            }
        }
    }
    float var = tx_block_sum(ss, red) / (float)h;
    float rs = 1.0f / sqrtf(var + a.eps);
#pragma unroll
    for (int q = 0; q < VPT; q++) {
        size_t j = threadIdx.x + (size_t)q * blockDim.x;
        if (j < nv) {
            float g[8], b[8], o[8];
            tx_ld8_any(a.gamma, j, a.w_dtype, g);
            if (!a.rms) tx_ld8_any(a.beta, j, a.w_dtype, b);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float gk = a.zero_centered_gamma ? g[k] + 1.0f : g[k];
                float yk = ((v[q][k] - mu) * rs) * gk;
                if (!a.rms) yk += b[k];
                o[k] = yk;
            }
            tx_vec8<T>::from_float(o).store(y, j);
        }
    }
    if (threadIdx.x == 0) {
        if (a.mu && !a.rms) a.mu[r] = mu;
        if (a.rsigma) a.rsigma[r] = rs;
    }
}

/* Backward over rows blockIdx.x, + gridDim.x, ...: dx per row as
 * norm_bwd_dx_kernel, and (want_params) the block's column partials of
 * dy*xhat and dy, accumulated in shared memory in row order - x and dy are
 * read from HBM once for both. acc layout [2][8][nv]: plane k holds element
 * k of every vector, so a warp's accesses hit consecutive banks. */
template <typename T, int VPT, int MINB>
__global__ void __launch_bounds__(256, MINB) norm_bwd_vec(tx_cuda_norm_bwd a, int want_params)
{
    extern __shared__ float acc[];
    __shared__ float red[32];
    const size_t h = a.h, nv = h / 8;
    const size_t n_parts = gridDim.x;
    float g[VPT][8];
#pragma unroll
    for (int q = 0; q < VPT; q++) {
        size_t j = threadIdx.x + (size_t)q * blockDim.x;
        if (j < nv) {
            if (a.dx) {
                tx_ld8_any(a.gamma, j, a.w_dtype, g[q]);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    if (a.zero_centered_gamma) g[q][k] += 1.0f;
            }
            if (want_params)
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k * nv + j] = acc[(8 + k) * nv + j] = 0.0f;
        }
    }
    /* the next row's x, dy (and residual grad) are loaded while this row is
     * reduced and written: two resident blocks of one row each keep too few
     * bytes in flight to hide HBM latency (measured 35-48% of bandwidth) */
    tx_vec8<T> nx[VPT], ndy[VPT], nres[VPT];
    auto fetch = [&](size_t row) {
#pragma unroll
        for (int q = 0; q < VPT; q++) {
            size_t j = threadIdx.x + (size_t)q * blockDim.x;
            if (j < nv) {
                nx[q] = tx_vec8<T>::load((const T *)a.x + row * h, j);
                ndy[q] = tx_vec8<T>::load((const T *)a.dy + row * h, j);
                if (a.dx && a.dresid) nres[q] = tx_vec8<T>::load((const T *)a.dresid + row * h, j);
            }
        }
    };
    if (blockIdx.x < a.rows) fetch(blockIdx.x);
    for (size_t r = blockIdx.x; r < a.rows; r += n_parts) {
        const size_t base = r * h;
        float xh[VPT][8], dy[VPT][8], res[VPT][8];
#pragma unroll
        for (int q = 0; q < VPT; q++) {
            size_t j = threadIdx.x + (size_t)q * blockDim.x;
            if (j < nv) {
                nx[q].to_float(xh[q]);
                ndy[q].to_float(dy[q]);
                if (a.dx && a.dresid) nres[q].to_float(res[q]);
            }
        }
        if (r + n_parts < a.rows) fetch(r + n_parts);
        float mu = a.rms ? 0.0f : a.mu[r];
        float rs = a.rsigma[r];
        float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
        for (int q = 0; q < VPT; q++) {
            size_t j = threadIdx.x + (size_t)q * blockDim.x;
            if (j < nv) {
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    xh[q][k] = (xh[q][k] - mu) * rs;
                    if (want_params) {
                        acc[k * nv + j] += dy[q][k] * xh[q][k];
                        acc[(8 + k) * nv + j] += dy[q][k];
                    }
                    if (a.dx) {
                        float gd = g[q][k] * dy[q][k];
                        s1 += gd;
                        s2 += gd * xh[q][k];
                    }
                }
            }
        }
        if (!a.dx) continue;
        float m1 = a.rms ? 0.0f : tx_block_sum(s1, red) / (float)h;
        float m2 = tx_block_sum(s2, red) / (float)h;
#pragma unroll
        for (int q = 0; q < VPT; q++) {
            size_t j = threadIdx.x + (size_t)q * blockDim.x;
            if (j < nv) {
                float o[8];
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    float gd = g[q][k] * dy[q][k];
                    float d = rs * (gd - m1 - xh[q][k] * m2);
                    if (a.dresid) d += res[q][k];
                    o[k] = d;
                }
                tx_vec8<T>::from_float(o).store((T *)a.dx + base, j);
            }
        }
    }
    if (!want_params) return;
#pragma unroll
    for (int q = 0; q < VPT; q++) {
        size_t j = threadIdx.x + (size_t)q * blockDim.x;
        if (j < nv) {
            float pg[8], pb[8];
#pragma unroll
            for (int k = 0; k < 8; k++) {
                pg[k] = acc[k * nv + j];
                pb[k] = acc[(8 + k) * nv + j];
            }
            tx_vec8<float>::from_float(pg).store(a.workspace + blockIdx.x * h, j);
            tx_vec8<float>::from_float(pb).store(a.workspace + (n_parts + blockIdx.x) * h, j);
        }
    }
}

/* Row blocks of the vectorized backward: resident blocks of 256 threads
 * per SM of a 132-SM part, so x and dy stream at full rate while the
 * partials (2 x parts x h floats) stay a few per cent of the traffic. Rows
 * of up to 2048 (16 KB of partials per block) run four blocks per SM, wider
 * rows two: measured on the H200 (bench/gpu/kernel_bw), LayerNorm backward
 * at 8192x2048 took 0.053 ms with four against 0.071 with two, while at
 * 8192x4096 four blocks (32 KB each) were 1.6x slower than two. A function
 * of (rows, h, threads) only: the summation order does not depend on the
 * device. */
int bwd_blocks_per_sm(size_t h)
{
    return 16 * (h / 8) * sizeof(float) <= 16 * 1024 ? 4 : 2;
}

size_t vec_bwd_parts(size_t rows, size_t h, int threads)
{
    size_t p = (size_t)132 * (size_t)bwd_blocks_per_sm(h) * 256 / (size_t)threads;
    return rows < p ? rows : p;
}

/* Shared memory of the vectorized backward's partials; larger rows take the
 * scalar path rather than an opt-in carve-out. */
constexpr size_t kVecBwdSmemMax = 48 * 1024;

template <typename T>
void launch_fwd_vec(const tx_cuda_norm_fwd *a, const vec_cfg &c, cudaStream_t s)
{
    switch (c.vpt) {
    case 1: norm_fwd_vec<T, 1><<<(unsigned)a->rows, c.threads, 0, s>>>(*a); break;
    case 2: norm_fwd_vec<T, 2><<<(unsigned)a->rows, c.threads, 0, s>>>(*a); break;
    case 3: norm_fwd_vec<T, 3><<<(unsigned)a->rows, c.threads, 0, s>>>(*a); break;
    default: norm_fwd_vec<T, 4><<<(unsigned)a->rows, c.threads, 0, s>>>(*a); break;
    }
}

template <typename T>
void launch_bwd_vec(const tx_cuda_norm_bwd *a, const vec_cfg &c, int want, size_t parts,
                    cudaStream_t s)
{
    size_t smem = want ? 16 * (a->h / 8) * sizeof(float) : 0;
#define BWD_LAUNCH(MINB)                                                                      \
    switch (c.vpt) {                                                                          \
    case 1: norm_bwd_vec<T, 1, MINB><<<(unsigned)parts, c.threads, smem, s>>>(*a, want); break; \
    case 2: norm_bwd_vec<T, 2, MINB><<<(unsigned)parts, c.threads, smem, s>>>(*a, want); break; \
    case 3: norm_bwd_vec<T, 3, MINB><<<(unsigned)parts, c.threads, smem, s>>>(*a, want); break; \
    default: norm_bwd_vec<T, 4, MINB><<<(unsigned)parts, c.threads, smem, s>>>(*a, want); break; \
    }
    if (bwd_blocks_per_sm(a->h) == 2) {
        BWD_LAUNCH(2)
    } else {
        BWD_LAUNCH(4)
    }
#undef BWD_LAUNCH
}

int threads_for(size_t h)
{
    int t = kThreads;
    if (h >= 4096) t = 512;
    if (h >= 8192) t = 1024;
    return t;
}

} // namespace

static teexec_status *check_common(size_t rows, size_t h, teexec_dtype x, teexec_dtype w)
{
    if (h == 0 || rows == 0) return NULL;
    if (!tx_io_dtype_ok(x) || !tx_io_dtype_ok(w))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                             "cuda norm: tensors must be float32, bfloat16 or float16");
    if (rows > 0x7fffffffu)
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                             "cuda norm: %zu rows exceed the grid limit", rows);
    return NULL;
}

extern "C" teexec_status *tx_cuda_norm_forward(const tx_cuda_norm_fwd *a, void *stream)
{
    teexec_status *st = check_common(a->rows, a->h, a->x_dtype, a->w_dtype);
    if (st) return st;
    if (!tx_io_dtype_ok(a->y_dtype))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda norm: bad y dtype");
    if (a->rows == 0 || a->h == 0) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    vec_cfg c;
    bool vec = vec_cfg_of(a->h, &c) && a->y_dtype == a->x_dtype && tx_aligned16(a->x) &&
               tx_aligned16(a->y) && tx_aligned16(a->gamma) && (a->rms || tx_aligned16(a->beta));
    if (vec) {
        TX_VEC8_DISPATCH(a->x_dtype, T, launch_fwd_vec<T>(a, c, s));
    } else {
        norm_fwd_kernel<<<(unsigned)a->rows, threads_for(a->h), 0, s>>>(*a);
    }
    TX_CUDA_LAUNCHED("norm_forward");
    return NULL;
}

static size_t n_chunks_of(size_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

/* True when the backward takes the vectorized path (then *c is its shape). */
static bool bwd_vec(const tx_cuda_norm_bwd *a, vec_cfg *c)
{
    if (!vec_cfg_of(a->h, c) || c->threads > 256) return false; /* norm_bwd_vec's bound */
    bool want = a->dgamma || (a->dbeta && !a->rms);
    if (want && 16 * (a->h / 8) * sizeof(float) > kVecBwdSmemMax) return false;
    if (a->dx && (a->dx_dtype != a->x_dtype || !tx_aligned16(a->dx) || !tx_aligned16(a->gamma)))
        return false;
    if (a->dresid && !tx_aligned16(a->dresid)) return false;
    return a->dy_dtype == a->x_dtype && tx_aligned16(a->x) && tx_aligned16(a->dy) &&
           (!want || tx_aligned16(a->workspace));
}

extern "C" size_t tx_cuda_norm_bwd_workspace_floats(size_t rows, size_t h)
{
    size_t scalar = 2 * n_chunks_of(rows) * h;
    vec_cfg c;
    if (!vec_cfg_of(h, &c)) return scalar;
    size_t vec = 2 * vec_bwd_parts(rows, h, c.threads) * h;
    return vec > scalar ? vec : scalar;
}

extern "C" teexec_status *tx_cuda_norm_backward(const tx_cuda_norm_bwd *a, void *stream)
{
    teexec_status *st = check_common(a->rows, a->h, a->x_dtype, a->w_dtype);
    if (st) return st;
    if (!tx_io_dtype_ok(a->dy_dtype) || (a->dx && !tx_io_dtype_ok(a->dx_dtype)))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda norm: bad dy/dx dtype");
    if (a->rows == 0 || a->h == 0) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    vec_cfg c;
    if (bwd_vec(a, &c)) {
        int want = a->dgamma || (a->dbeta && !a->rms);
        if (!a->dx && !want) return NULL;
        if (want && !a->workspace)
            return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                                 "cuda norm backward: parameter grads need the workspace");
        size_t parts = vec_bwd_parts(a->rows, a->h, c.threads);
        TX_VEC8_DISPATCH(a->x_dtype, T, launch_bwd_vec<T>(a, c, want, parts, s));
        TX_CUDA_LAUNCHED("norm_backward (vectorized)");
        if (want) {
            tx_colsum_outs outs = {{a->dgamma, a->rms ? NULL : a->dbeta}};
            dim3 grid((unsigned)((a->h + 31) / 32), 2);
            tx_colsum_parts_final<<<grid, dim3(32, 8), 0, s>>>(a->workspace, parts, a->h, outs,
                                                               (int)a->w_dtype);
            TX_CUDA_LAUNCHED("norm_backward param final");
        }
        return NULL;
    }
    if (a->dx) {
        norm_bwd_dx_kernel<<<(unsigned)a->rows, threads_for(a->h), 0, s>>>(*a);
        TX_CUDA_LAUNCHED("norm_backward dx");
    }
    if (a->dgamma || (a->dbeta && !a->rms)) {
        if (!a->workspace)
            return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                                 "cuda norm backward: parameter grads need the workspace");
        size_t nc = n_chunks_of(a->rows);
        if (nc > 65535)
            return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                                 "cuda norm backward: %zu rows exceed the chunk grid", a->rows);
        dim3 grid((unsigned)((a->h + 255) / 256), (unsigned)nc);
        norm_bwd_param_partial<<<grid, 256, 0, s>>>(*a, nc);
        TX_CUDA_LAUNCHED("norm_backward param partial");
        norm_bwd_param_final<<<(unsigned)((a->h + 255) / 256), 256, 0, s>>>(*a, nc);
        TX_CUDA_LAUNCHED("norm_backward param final");
    }
    return NULL;
}
