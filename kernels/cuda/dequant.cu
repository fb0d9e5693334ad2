/* dequant.cu - GPU dequantization of FP8 / FP8 block / MXFP8 / NVFP4 (see
 * dequant.h). One thread per output element in a grid-stride loop: reading
 * the transposed columnwise forms is strided, which is acceptable for a
 * path used for checking and for emulating block formats the GEMM cannot
 * take natively. */
#include "kernels/cuda/dequant.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant_common.cuh"

#include <float.h>

namespace {

struct P {
    int kind, e5, col, two_d, swz;
    size_t M, K;
    const uint8_t *data;
    const void *scales;
    size_t ld;
    const float *scale_inv, *amax;
    float *out;
};

__device__ __forceinline__ size_t soff(int swz, size_t r, size_t c, size_t ld)
{
    return swz ? txq::swizzle128x4(r, c, ld) : r * ld + c;
}

__global__ void dequant_kernel(P p)
{
    const size_t n = p.M * p.K;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    float sdec = 0.0f;
    if (p.kind == TX_CUDA_Q_NVFP4) {
        const float amax = *p.amax;
        float s = fminf(__fdiv_rn(2688.0f, amax), FLT_MAX);
        if (amax == 0.0f || s == 0.0f) s = 1.0f;
        sdec = __frcp_rn(s);
    }
    const float sinv_t = p.kind == TX_CUDA_Q_FP8_TENSOR ? *p.scale_inv : 0.0f;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
        const size_t m = idx / p.K, k = idx % p.K;
        float r;
        switch (p.kind) {
        case TX_CUDA_Q_FP8_TENSOR: {
            const uint8_t b = p.col ? p.data[k * p.M + m] : p.data[idx];
            r = txq::mulq(p.e5 ? txq::dec_fp8<true>(b) : txq::dec_fp8<false>(b), sinv_t);
            break;
        }
        case TX_CUDA_Q_FP8_BLOCK: {
            const float *sc = static_cast<const float *>(p.scales);
            float s;
            if (p.two_d) s = p.col ? sc[(k / 128) * p.ld + m / 128] : sc[(m / 128) * p.ld + k / 128];
            else s = p.col ? sc[(m / 128) * p.ld + k] : sc[(k / 128) * p.ld + m];
            const uint8_t b = p.col ? p.data[k * p.M + m] : p.data[idx];
            r = txq::mulq(p.e5 ? txq::dec_fp8<true>(b) : txq::dec_fp8<false>(b), s);
            break;
        }
        case TX_CUDA_Q_MXFP8: {
            const uint8_t *sc = static_cast<const uint8_t *>(p.scales);
            /* columnwise scales are swizzled as their transpose */
            const uint8_t e = p.col ? sc[p.swz ? txq::swizzle128x4(k, m / 32, (p.M / 32 + 3) / 4 * 4) : (m / 32) * p.ld + k]
                                    : sc[soff(p.swz, m, k / 32, p.ld)];
            const uint8_t b = p.data[idx];
            r = txq::mulq(p.e5 ? txq::dec_fp8<true>(b) : txq::dec_fp8<false>(b), txq::e8m0_val(e));
            break;
        }
        default: { /* NVFP4 */
            const uint8_t *sc = static_cast<const uint8_t *>(p.scales);
            const size_t pos = p.col ? k * p.M + m : idx;
            const uint8_t sb = p.col ? sc[soff(p.swz, k, m / 16, p.ld)] : sc[soff(p.swz, m, k / 16, p.ld)];
            const uint32_t nib = (p.data[pos / 2] >> (4 * (pos & 1))) & 0xFu;
            r = __fmul_rn(__fmul_rn(txq::dec_e2m1(nib), txq::f32_from_e4m3(sb)), sdec);
            break;
        }
        }
        p.out[idx] = r;
    }
}

} /* namespace */

extern "C" teexec_status *tx_cuda_dequantize(const tx_cuda_dequant_args *a, void *stream)
{
    static const char *const what = "tx_cuda_dequantize";
    if (!a || !a->data || !a->out)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL data or output", what);
    if (a->kind < TX_CUDA_Q_FP8_TENSOR || a->kind > TX_CUDA_Q_NVFP4)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: unknown kind %d", what, (int)a->kind);
    if (a->kind == TX_CUDA_Q_FP8_TENSOR && !a->scale_inv)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: FP8 per-tensor needs scale_inv", what);
    if (a->kind == TX_CUDA_Q_NVFP4 && !a->amax)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NVFP4 needs the global amax", what);
    if (a->kind != TX_CUDA_Q_FP8_TENSOR && !a->scales)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no scales", what);
    if (a->kind == TX_CUDA_Q_NVFP4 ? a->fmt != TEEXEC_DTYPE_FLOAT4E2M1
                                   : (a->fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && a->fmt != TEEXEC_DTYPE_FLOAT8E5M2))
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: format %d does not fit kind %d", what,
                        (int)a->fmt, (int)a->kind);
    const size_t n = a->rows * a->cols;
    if (n == 0) return NULL;
    P p;
    p.kind = a->kind;
    p.e5 = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    p.col = a->columnwise != 0;
    p.two_d = a->block_2d != 0;
    p.swz = a->swizzled != 0;
    p.M = a->rows;
    p.K = a->cols;
    p.data = a->data;
    p.scales = a->scales;
    p.ld = a->scale_cols;
    p.scale_inv = a->scale_inv;
    p.amax = a->amax;
    p.out = a->out;
    size_t blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    dequant_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(p);
    TX_CUDA_LAUNCHED("dequant_kernel");
    return NULL;
}
