/* gemm_emu_prep.cu - FP32 -> BF16 conversion and the NVFP4 GEMM alpha (see
 * gemm_emu_prep.h). */
#include "kernels/cuda/gemm_emu_prep.h"

#include "kernels/cuda/cuda_check.h"

#include <cuda_bf16.h>
#include <float.h>

namespace {

__global__ void f32_to_bf16_kernel(const float *in, __nv_bfloat16 *out, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    /* pairs: the buffers come from cudaMalloc'd scratch, so 8-byte aligned */
    const size_t pairs = n / 2;
    const float2 *in2 = reinterpret_cast<const float2 *>(in);
    __nv_bfloat162 *out2 = reinterpret_cast<__nv_bfloat162 *>(out);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pairs; i += stride)
        out2[i] = __float22bfloat162_rn(in2[i]);
    if (blockIdx.x == 0 && threadIdx.x == 0 && (n & 1)) out[n - 1] = __float2bfloat16_rn(in[n - 1]);
}

/* The quantizer's S_dec for a global amax (kernels/cpu/quant_nvfp4.c). */
__device__ float nvfp4_sdec(const float *amax)
{
    if (!amax) return 1.0f;
    const float a = *amax;
    float s = fminf(__fdiv_rn(2688.0f, a), FLT_MAX);
    if (a == 0.0f || s == 0.0f) s = 1.0f;
    return __frcp_rn(s);
}

__global__ void nvfp4_alpha_kernel(const float *amax_a, const float *amax_b, float alpha,
                                   float *alpha_out, float *unit_amax_out)
{
    *alpha_out = __fmul_rn(__fmul_rn(alpha, nvfp4_sdec(amax_a)), nvfp4_sdec(amax_b));
    if (unit_amax_out) *unit_amax_out = 2688.0f;
}

} /* namespace */

extern "C" teexec_status *tx_cuda_f32_to_bf16(const float *in, uint16_t *out, size_t n, void *stream)
{
    if (n == 0) return NULL;
    if (!in || !out)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_cuda_f32_to_bf16: NULL buffer");
    if (((uintptr_t)in % 8) || ((uintptr_t)out % 4))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "tx_cuda_f32_to_bf16: buffers must be 8-byte (in) / 4-byte (out) aligned");
    size_t blocks = (n / 2 + 255) / 256;
    if (blocks == 0) blocks = 1;
    if (blocks > 65536) blocks = 65536;
    f32_to_bf16_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(
        in, reinterpret_cast<__nv_bfloat16 *>(out), n);
    TX_CUDA_LAUNCHED("f32_to_bf16_kernel");
    return NULL;
}

extern "C" teexec_status *tx_cuda_nvfp4_gemm_alpha(const float *amax_a, const float *amax_b,
                                                   float alpha, float *alpha_out,
                                                   float *unit_amax_out, void *stream)
{
    if (!alpha_out)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_cuda_nvfp4_gemm_alpha: NULL alpha_out");
    nvfp4_alpha_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(amax_a, amax_b, alpha, alpha_out,
                                                          unit_amax_out);
    TX_CUDA_LAUNCHED("nvfp4_alpha_kernel");
    return NULL;
}
