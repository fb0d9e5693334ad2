/* scale_bias.cu - ConstantScale and Bias forward (scale_bias.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/scale_bias.h"
}

namespace {

__global__ void scale_kernel(const void *x, int xt, float s, void *y, int yt, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        tx_st(y, i, yt, tx_ld(x, i, xt) * s);
}

__global__ void bias_kernel(const void *x, int xt, const void *b, int bt, void *y, int yt,
                            size_t n, size_t cols)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        tx_st(y, i, yt, tx_ld(x, i, xt) + tx_ld(b, i % cols, bt));
}

unsigned grid_for(size_t n)
{
    size_t b = (n + 255) / 256;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

} // namespace

extern "C" teexec_status *tx_cuda_scale(const void *x, teexec_dtype xt, float s, void *y,
                                        teexec_dtype yt, size_t n, void *stream)
{
    if (!tx_io_dtype_ok(xt) || !tx_io_dtype_ok(yt))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda scale: bad dtype");
    if (!n) return NULL;
    scale_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(x, xt, s, y, yt, n);
    TX_CUDA_LAUNCHED("constant scale");
    return NULL;
}

extern "C" teexec_status *tx_cuda_bias_add(const void *x, teexec_dtype xt, const void *b,
                                           teexec_dtype bt, void *y, teexec_dtype yt,
                                           size_t rows, size_t cols, void *stream)
{
    if (!tx_io_dtype_ok(xt) || !tx_io_dtype_ok(bt) || !tx_io_dtype_ok(yt))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda bias add: bad dtype");
    size_t n = rows * cols;
    if (!n) return NULL;
    bias_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(x, xt, b, bt, y, yt, n, cols);
    TX_CUDA_LAUNCHED("bias add");
    return NULL;
}
