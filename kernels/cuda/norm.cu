/* norm.cu - LayerNorm / RMSNorm forward and backward on the GPU (norm.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

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
    norm_fwd_kernel<<<(unsigned)a->rows, threads_for(a->h), 0, (cudaStream_t)stream>>>(*a);
    TX_CUDA_LAUNCHED("norm_forward");
    return NULL;
}

static size_t n_chunks_of(size_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

extern "C" size_t tx_cuda_norm_bwd_workspace_floats(size_t rows, size_t h)
{
    return 2 * n_chunks_of(rows) * h;
}

extern "C" teexec_status *tx_cuda_norm_backward(const tx_cuda_norm_bwd *a, void *stream)
{
    teexec_status *st = check_common(a->rows, a->h, a->x_dtype, a->w_dtype);
    if (st) return st;
    if (!tx_io_dtype_ok(a->dy_dtype) || (a->dx && !tx_io_dtype_ok(a->dx_dtype)))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda norm: bad dy/dx dtype");
    if (a->rows == 0 || a->h == 0) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
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
