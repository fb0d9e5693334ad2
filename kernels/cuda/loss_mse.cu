/* loss_mse.cu - MSE loss and gradient (loss_mse.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/vec8_io.cuh"

extern "C" {
#include "kernels/cuda/loss_mse.h"
}

namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 1024;

size_t blocks_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    if (b > kMaxBlocks) b = kMaxBlocks;
    return b ? b : 1;
}

__device__ double block_sum(double v)
{
    __shared__ double sh[kThreads];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    return sh[0];
}

__global__ void mse_kernel(const void *y, int yt, const float *t, size_t n, void *dy, int dt,
                           double *partials)
{
    double acc = 0.0;
    float scale = 2.0f / (float)n;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = tx_ld(y, i, yt) - t[i];
        acc += (double)d * (double)d;
        if (dy) tx_st(dy, i, dt, scale * d);
    }
    double s = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

/* The same loss and gradient, 8 elements per step with 16-byte accesses
 * (y / dy of type T, the FP32 target as two float4): taken when n is a
 * multiple of 8 and every pointer is aligned. Per element the arithmetic
 * is mse_kernel's; only the order of the double partial sums differs. */
template <typename T>
__global__ void mse_vec_kernel(const T *y, const float *t, size_t n8, T *dy, float scale,
                               double *partials)
{
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
         i += (size_t)gridDim.x * blockDim.x) {
        float yv[8], tv[8], d[8];
        tx_vec8<T>::load(y, i).to_float(yv);
        tx_vec8<float>::load(t, i).to_float(tv);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            d[k] = yv[k] - tv[k];
            acc += (double)d[k] * (double)d[k];
            d[k] = scale * d[k];
        }
        if (dy) tx_vec8<T>::from_float(d).store(dy, i);
    }
    double s = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void finish_kernel(const double *partials, size_t nb, size_t n, double *out)
{
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < nb; i += blockDim.x) acc += partials[i];
    double s = block_sum(acc);
    if (threadIdx.x == 0) out[0] = s / (double)n;
}

} // namespace

extern "C" size_t tx_cuda_mse_partials(size_t n) { return blocks_for(n); }

extern "C" teexec_status *tx_cuda_mse(const void *y, teexec_dtype yt, const float *target,
                                      size_t n, void *dy, teexec_dtype dt, double *partials,
                                      double *loss_out, void *stream)
{
    if (!tx_io_dtype_ok(yt) || (dy && !tx_io_dtype_ok(dt)))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda mse: bad dtype");
    if (!n)
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda mse: empty tensor");
    cudaStream_t s = (cudaStream_t)stream;
    size_t nb = blocks_for(n);
    bool vec = n % 8 == 0 && (!dy || dt == yt) && tx_aligned16(y) && tx_aligned16(target) &&
               tx_aligned16(dy);
    if (vec) {
        float scale = 2.0f / (float)n;
        TX_VEC8_DISPATCH(yt, T,
                         mse_vec_kernel<T><<<(unsigned)nb, kThreads, 0, s>>>(
                             (const T *)y, target, n / 8, (T *)dy, scale, partials));
    } else {
        mse_kernel<<<(unsigned)nb, kThreads, 0, s>>>(y, (int)yt, target, n, dy, (int)dt, partials);
    }
    TX_CUDA_LAUNCHED("mse");
    finish_kernel<<<1, kThreads, 0, s>>>(partials, nb, n, loss_out);
    TX_CUDA_LAUNCHED("mse finish");
    return NULL;
}
