/* elementwise.cu - add and convert kernels (elementwise.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/elementwise.h"
}

namespace {

__global__ void add_kernel(const void *a, int at, const void *b, int bt, void *out, int ot,
                           size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        tx_st(out, i, ot, tx_ld(a, i, at) + tx_ld(b, i, bt));
}

/* bf16 + bf16 -> bf16, eight elements per 16-byte access. */
__global__ void add_bf16x8_kernel(const uint4 *a, const uint4 *b, uint4 *out, size_t n8)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 va = a[i], vb = b[i], vo;
        const __nv_bfloat162 *pa = (const __nv_bfloat162 *)&va, *pb = (const __nv_bfloat162 *)&vb;
        __nv_bfloat162 *po = (__nv_bfloat162 *)&vo;
        for (int k = 0; k < 4; k++) {
            float2 fa = __bfloat1622float2(pa[k]), fb = __bfloat1622float2(pb[k]);
            po[k] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
        }
        out[i] = vo;
    }
}

__global__ void convert_kernel(const void *x, int xt, void *out, int ot, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        tx_st(out, i, ot, tx_ld(x, i, xt));
}

unsigned grid_for(size_t n)
{
    size_t b = (n + 255) / 256;
    if (b > 132u * 16u) b = 132u * 16u;
    return b ? (unsigned)b : 1u;
}

} // namespace

extern "C" teexec_status *tx_cuda_add(const void *a, teexec_dtype at, const void *b,
                                      teexec_dtype bt, void *out, teexec_dtype ot, size_t n,
                                      void *stream)
{
    if (!tx_io_dtype_ok(at) || !tx_io_dtype_ok(bt) || !tx_io_dtype_ok(ot))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda add: bad dtype");
    if (!n) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    bool aligned = (((uintptr_t)a | (uintptr_t)b | (uintptr_t)out) & 15u) == 0;
    if (at == TEEXEC_DTYPE_BFLOAT16 && bt == at && ot == at && aligned && n % 8 == 0) {
        add_bf16x8_kernel<<<grid_for(n / 8), 256, 0, s>>>((const uint4 *)a, (const uint4 *)b,
                                                          (uint4 *)out, n / 8);
    } else {
        add_kernel<<<grid_for(n), 256, 0, s>>>(a, at, b, bt, out, ot, n);
    }
    TX_CUDA_LAUNCHED("add");
    return NULL;
}

extern "C" teexec_status *tx_cuda_convert(const void *x, teexec_dtype xt, void *out,
                                          teexec_dtype ot, size_t n, void *stream)
{
    if (!tx_io_dtype_ok(xt) || !tx_io_dtype_ok(ot))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda convert: bad dtype");
    if (!n) return NULL;
    convert_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(x, xt, out, ot, n);
    TX_CUDA_LAUNCHED("convert");
    return NULL;
}
