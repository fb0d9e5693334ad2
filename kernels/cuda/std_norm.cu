/* std_norm.cu - LayerNormalization and Softmax / LogSoftmax in DOUBLE
 * (std_norm.h). */
#include "kernels/cuda/cuda_check.h"

extern "C" {
#include "kernels/cuda/std_norm.h"
}

#include <math.h>

namespace {

constexpr unsigned kThreads = 256;

/* Fixed-tree block sum / max over kThreads partials; every thread gets it. */
__device__ double block_sum(double v, double *red)
{
    __syncthreads();
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned w = kThreads / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    return red[0];
}

__device__ double block_max(double v, double *red)
{
    __syncthreads();
    red[threadIdx.x] = v;
    __syncthreads();
    for (unsigned w = kThreads / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + w]);
        __syncthreads();
    }
    return red[0];
}

__global__ void __launch_bounds__(kThreads)
ln_f64_kernel(const double *x, const double *scale, const double *bias, double eps, double *y,
              double *mean, double *inv_std, size_t rows, size_t h)
{
    __shared__ double red[kThreads];
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const double *xr = x + r * h;
        double s = 0.0;
        for (size_t i = threadIdx.x; i < h; i += kThreads) s += xr[i];
        double mu = h ? block_sum(s, red) / (double)h : NAN;
        double v = 0.0;
        for (size_t i = threadIdx.x; i < h; i += kThreads) v += (xr[i] - mu) * (xr[i] - mu);
        double var = h ? block_sum(v, red) / (double)h : NAN;
        double inv = 1.0 / sqrt(var + eps);
        for (size_t i = threadIdx.x; i < h; i += kThreads)
            y[r * h + i] = (xr[i] - mu) * inv * scale[i] + (bias ? bias[i] : 0.0);
        if (threadIdx.x == 0) {
            if (mean) mean[r] = mu;
            if (inv_std) inv_std[r] = inv;
        }
    }
}

__global__ void __launch_bounds__(kThreads)
softmax_f64_kernel(const double *x, double *y, size_t len, size_t inner, int log_mode,
                   size_t lines)
{
    __shared__ double red[kThreads];
    for (size_t l = blockIdx.x; l < lines; l += gridDim.x) {
        size_t base = (l / inner) * len * inner + l % inner;
        double mx = -INFINITY;
        for (size_t j = threadIdx.x; j < len; j += kThreads) mx = fmax(mx, x[base + j * inner]);
        mx = block_max(mx, red);
        if (mx == -INFINITY) mx = 0.0; /* a row of -inf: avoid inf - inf */
        double s = 0.0;
        for (size_t j = threadIdx.x; j < len; j += kThreads) s += exp(x[base + j * inner] - mx);
        double sum = block_sum(s, red);
        if (log_mode) {
            double ls = log(sum);
            for (size_t j = threadIdx.x; j < len; j += kThreads)
                y[base + j * inner] = (x[base + j * inner] - mx) - ls;
        } else {
            double inv = 1.0 / sum;
            for (size_t j = threadIdx.x; j < len; j += kThreads)
                y[base + j * inner] = exp(x[base + j * inner] - mx) * inv;
        }
    }
}

__global__ void __launch_bounds__(kThreads)
rms_f64_kernel(const double *x, const double *scale, double eps, double *y, size_t rows, size_t h)
{
    __shared__ double red[kThreads];
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const double *xr = x + r * h;
        double s = 0.0;
        for (size_t i = threadIdx.x; i < h; i += kThreads) s += xr[i] * xr[i];
        double ms = block_sum(s, red);
        double inv = 1.0 / sqrt(ms / (double)h + eps);
        for (size_t i = threadIdx.x; i < h; i += kThreads) y[r * h + i] = xr[i] * inv * scale[i];
    }
}

unsigned blocks_for(size_t rows) { return rows < 132u * 16u ? (unsigned)rows : 132u * 16u; }

} // namespace

extern "C" teexec_status *tx_cuda_layernorm_f64(const double *x, const double *scale,
                                                const double *bias, double eps, double *y,
                                                double *mean, double *inv_std, size_t rows,
                                                size_t h, void *stream)
{
    if (!rows) return NULL;
    ln_f64_kernel<<<blocks_for(rows), kThreads, 0, (cudaStream_t)stream>>>(
        x, scale, bias, eps, y, mean, inv_std, rows, h);
    TX_CUDA_LAUNCHED("layernorm (double)");
    return NULL;
}

extern "C" teexec_status *tx_cuda_softmax_f64(const double *x, double *y, size_t outer,
                                              size_t len, size_t inner, int log_mode,
                                              void *stream)
{
    size_t lines = outer * inner;
    if (!lines || !len) return NULL;
    softmax_f64_kernel<<<blocks_for(lines), kThreads, 0, (cudaStream_t)stream>>>(
        x, y, len, inner, log_mode, lines);
    TX_CUDA_LAUNCHED("softmax (double)");
    return NULL;
}

extern "C" teexec_status *tx_cuda_rmsnorm_f64(const double *x, const double *scale, double eps,
                                              double *y, size_t rows, size_t h, void *stream)
{
    if (!rows) return NULL;
    rms_f64_kernel<<<blocks_for(rows), kThreads, 0, (cudaStream_t)stream>>>(x, scale, eps, y, rows, h);
    TX_CUDA_LAUNCHED("rmsnorm (double)");
    return NULL;
}
