/* quant_fp8.cu - per-tensor FP8 quantizers (delayed, current) and the
 * tensor amax reduction. See quant_fp8.h. */
#include "kernels/cuda/quant_fp8.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8_tile.cuh"

namespace {

/* Grid-stride max|x| over 8-element vectors; one atomic per block. NaN is
 * dropped by fmaxf. Amaxes are >= 0, so their float bits order like
 * unsigned integers and atomicMax on the bits is a float max. */
template <typename T>
__global__ void __launch_bounds__(512) amax_kernel(const T *x, size_t nvec, size_t n, float *amax)
{
    float a = 0.0f;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    /* four 16-byte loads in flight per thread before any use: one per
     * iteration left the grid (4 blocks per SM) short of bytes in flight */
    for (; i + 3 * stride < nvec; i += 4 * stride) {
        txq::Raw8<T> r[4];
#pragma unroll
        for (int k = 0; k < 4; k++) r[k].load(x + (i + k * stride) * 8);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float v[8];
            r[k].get(v);
#pragma unroll
            for (int j = 0; j < 8; j++) a = fmaxf(a, fabsf(v[j]));
        }
    }
    for (; i < nvec; i += stride) {
        float v[8];
        txq::load8(x + i * 8, v);
#pragma unroll
        for (int j = 0; j < 8; j++) a = fmaxf(a, fabsf(v[j]));
    }
    if (blockIdx.x == 0)
        for (size_t i = nvec * 8 + threadIdx.x; i < n; i += blockDim.x)
            a = fmaxf(a, fabsf(txq::to_f32(x[i])));
    a = txq::warp_max_xor(a, 32);
    __shared__ float red[16];
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = a;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < (int)(blockDim.x >> 5); i++) a = fmaxf(a, red[i]);
        if (a > 0.0f) atomicMax(reinterpret_cast<unsigned int *>(amax), __float_as_uint(a));
    }
}

/* Per-tensor cast(+transpose). One scale for the whole tensor, so an
 * element's FP8 byte is the same in both usages: each element is converted
 * once and the transposed copy is a byte transpose of the staged codes
 * (fp8_tile.cuh). */
using txq::FT_C;
using txq::FT_NT;
using txq::FT_R;
using txq::ft_word;

template <typename T, bool ROW, bool COL>
__global__ void __launch_bounds__(FT_NT) fp8_pt_kernel(txq::Fp8TileParams p)
{
    __shared__ __align__(16) uint32_t qs[COL ? txq::FT_WORDS : 1];

    const bool E5M2 = p.e5m2 != 0;
    const int tid = threadIdx.x, lane = tid & 31;
    const int l16 = tid & 15, rg = tid >> 4;
    const size_t kb = blockIdx.x % p.ncb;
    const size_t r0 = (blockIdx.x / p.ncb) * FT_R, c0 = kb * FT_C;
    const size_t M = p.rows, K = p.cols;
    const T *x = static_cast<const T *>(p.x);
    const size_t c = c0 + (size_t)l16 * 8;
    const bool cin = c < K;

    txq::Raw8<T> rv[8];
    txq::ft_load_rows(p, r0, c, rg, rv);
    const float s = __ldg(p.scale);

    /* Optimistic: convert without the NaN look-up, noting with a
     * NaN-propagating max whether any input was NaN. With a finite
     * nonzero scale only a NaN input gives a NaN product; then (rare) the
     * thread redoes its rows carefully, overwriting its own bytes. */
    float tmax = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int rl = rg + 16 * i;
        const size_t r = r0 + rl;
        float v[8];
        rv[i].get(v);
#pragma unroll
        for (int j = 0; j < 8; j++) tmax = txq::fmax_nan(tmax, fabsf(v[j]));
        const uint2 q = txq::quant_fp8x8_fast(E5M2, v, s);
        if (ROW && cin && r < M) *reinterpret_cast<uint2 *>(p.row_data + r * K + c) = q;
        if (COL) *reinterpret_cast<uint2 *>(&qs[ft_word(rl, 2 * l16)]) = q;
    }
    if (tmax != tmax || !(fabsf(s) <= FLT_MAX) || s == 0.0f) {
        tmax = 0.0f;
#pragma unroll 1
        for (int i = 0; i < 8; i++) {
            const int rl = rg + 16 * i;
            const size_t r = r0 + rl;
            txq::Raw8<T> w;
            if (cin && r < M) w.load(x + r * K + c);
            else w.zero();
            float v[8];
            w.get(v);
#pragma unroll
            for (int j = 0; j < 8; j++) tmax = fmaxf(tmax, fabsf(v[j]));
            uint2 q;
            q.x = txq::quant_fp8x4(E5M2, v, s);
            q.y = txq::quant_fp8x4(E5M2, v + 4, s);
            if (ROW && cin && r < M) *reinterpret_cast<uint2 *>(p.row_data + r * K + c) = q;
            if (COL) *reinterpret_cast<uint2 *>(&qs[ft_word(rl, 2 * l16)]) = q;
        }
    }
    /* one atomic per block: one per warp meant 64K atomics on one address
     * for a 256 MiB input, serialized in L2; the delayed cast ran at 74%
     * of copy while current scaling's identical cast, without them, ran at
     * ~86% (H200). */
    __shared__ float wmax[FT_NT / 32];
    if (p.amax) {
        tmax = txq::warp_max_xor(tmax, 32);
        if (lane == 0) wmax[tid >> 5] = tmax;
    }
    if (COL || p.amax) __syncthreads();
    if (p.amax && tid == 0) {
        float a = wmax[0];
#pragma unroll
        for (int w = 1; w < FT_NT / 32; w++) a = fmaxf(a, wmax[w]);
        if (a > 0.0f) atomicMax(reinterpret_cast<unsigned int *>(p.amax), __float_as_uint(a));
    }
    if (!COL) return;

    txq::ft_store_transposed(qs, p.col_data, M, K, r0, c0, tid);
}

template <typename T>
cudaError_t pt_dispatch(const txq::Fp8TileParams &p, unsigned blocks, cudaStream_t s)
{
    const bool row = p.row_data != NULL, col = p.col_data != NULL;
    if (row && col) fp8_pt_kernel<T, true, true><<<blocks, FT_NT, 0, s>>>(p);
    else if (row) fp8_pt_kernel<T, true, false><<<blocks, FT_NT, 0, s>>>(p);
    else fp8_pt_kernel<T, false, true><<<blocks, FT_NT, 0, s>>>(p);
    return cudaGetLastError();
}

__global__ void scale_kernel(float *amax, float fp8_max, float eps, int pow2, float *scale,
                             float *scale_inv)
{
    const float s = txq::scale_from_amax(*amax, fp8_max, eps, FLT_MAX, pow2);
    *scale = s;
    if (scale_inv) *scale_inv = __frcp_rn(s);
}

__global__ void rcp_kernel(const float *scale, float *scale_inv) { *scale_inv = __frcp_rn(*scale); }

teexec_status *check(const tx_cuda_fp8_args *a, const char *what)
{
    if (!a || !a->x || !a->scale)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no input or scale", what);
    if (a->x_dtype != TEEXEC_DTYPE_BFLOAT16 && a->x_dtype != TEEXEC_DTYPE_FLOAT &&
        a->x_dtype != TEEXEC_DTYPE_FLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: input dtype %d is not bf16, fp16 or fp32",
                        what, (int)a->x_dtype);
    if (a->fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && a->fmt != TEEXEC_DTYPE_FLOAT8E5M2)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: format %d is not E4M3FN or E5M2", what,
                        (int)a->fmt);
    if (a->cols % 8 || (a->col_data && a->rows % 16))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: shape [%zu, %zu] needs cols %% 8 == 0 (and rows %% 16 == 0 for the "
                        "transposed copy)", what, a->rows, a->cols);
    if (((uintptr_t)a->x | (uintptr_t)a->row_data | (uintptr_t)a->col_data) % 16)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: buffers must be 16-byte aligned", what);
    return NULL;
}

teexec_status *cast(const tx_cuda_fp8_args *a, float *amax, cudaStream_t s, const char *what)
{
    if (a->rows == 0 || a->cols == 0 || (!a->row_data && !a->col_data)) return NULL;
    txq::Fp8TileParams p = {};
    p.x = a->x;
    p.rows = a->rows;
    p.cols = a->cols;
    p.ncb = (a->cols + txq::FT_C - 1) / txq::FT_C;
    p.row_data = a->row_data;
    p.col_data = a->col_data;
    p.scale = a->scale;
    p.amax = amax;
    const size_t blocks = (a->rows + txq::FT_R - 1) / txq::FT_R * p.ncb;
    if (blocks > 0x7fffffffu)
        return tx_error(TEEXEC_ERR_LIMIT, "%s: tensor too large for one launch", what);
    p.e5m2 = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    TX_CUDA_TRY(a->x_dtype == TEEXEC_DTYPE_BFLOAT16
                    ? pt_dispatch<__nv_bfloat16>(p, (unsigned)blocks, s)
                : a->x_dtype == TEEXEC_DTYPE_FLOAT16
                    ? pt_dispatch<__half>(p, (unsigned)blocks, s)
                    : pt_dispatch<float>(p, (unsigned)blocks, s),
                "fp8_pt_kernel");
    return NULL;
}

} /* namespace */

extern "C" teexec_status *tx_cuda_amax(const void *x, teexec_dtype x_dtype, size_t n, float *amax,
                                       void *stream)
{
    static const char *const what = "tx_cuda_amax";
    if (!x || !amax) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL pointer", what);
    if ((uintptr_t)x % 16)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: input must be 16-byte aligned", what);
    if (n == 0) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    const size_t nvec = n / 8;
    int dev = 0, sms = 0;
    TX_CUDA_TRY(cudaGetDevice(&dev), what);
    TX_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), what);
    size_t blocks = (nvec + 511) / 512;
    const size_t cap = (size_t)sms * 4;
    if (blocks > cap) blocks = cap;
    if (blocks == 0) blocks = 1;
    if (x_dtype == TEEXEC_DTYPE_BFLOAT16)
        amax_kernel<<<(unsigned)blocks, 512, 0, s>>>(static_cast<const __nv_bfloat16 *>(x), nvec, n,
                                                     amax);
    else if (x_dtype == TEEXEC_DTYPE_FLOAT)
        amax_kernel<<<(unsigned)blocks, 512, 0, s>>>(static_cast<const float *>(x), nvec, n, amax);
    else if (x_dtype == TEEXEC_DTYPE_FLOAT16)
        amax_kernel<<<(unsigned)blocks, 512, 0, s>>>(static_cast<const __half *>(x), nvec, n, amax);
    else
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: input dtype %d is not bf16, fp16 or fp32",
                        what, (int)x_dtype);
    TX_CUDA_LAUNCHED("amax_kernel");
    return NULL;
}

extern "C" teexec_status *tx_cuda_fp8_quantize_delayed(const tx_cuda_fp8_args *a, void *stream)
{
    static const char *const what = "tx_cuda_fp8_quantize_delayed";
    TX_TRY(check(a, what));
    cudaStream_t s = (cudaStream_t)stream;
    if (a->scale_inv) {
        rcp_kernel<<<1, 1, 0, s>>>(a->scale, a->scale_inv);
        TX_CUDA_LAUNCHED("rcp_kernel");
    }
    if (a->amax && !a->row_data && !a->col_data)
        return tx_cuda_amax(a->x, a->x_dtype, a->rows * a->cols, a->amax, stream);
    return cast(a, a->amax, s, what);
}

extern "C" teexec_status *tx_cuda_fp8_quantize_current(const tx_cuda_fp8_args *a, float amax_eps,
                                                       int pow2, void *stream)
{
    static const char *const what = "tx_cuda_fp8_quantize_current";
    TX_TRY(check(a, what));
    if (!a->amax) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no amax buffer", what);
    cudaStream_t s = (cudaStream_t)stream;
    TX_CUDA_TRY(cudaMemsetAsync(a->amax, 0, sizeof(float), s), what);
    TX_TRY(tx_cuda_amax(a->x, a->x_dtype, a->rows * a->cols, a->amax, stream));
    return tx_cuda_fp8_quantize_from_amax(a, amax_eps, pow2, stream);
}

extern "C" teexec_status *tx_cuda_fp8_quantize_from_amax(const tx_cuda_fp8_args *a, float amax_eps,
                                                         int pow2, void *stream)
{
    static const char *const what = "tx_cuda_fp8_quantize_from_amax";
    TX_TRY(check(a, what));
    if (!a->amax) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no amax buffer", what);
    cudaStream_t s = (cudaStream_t)stream;
    const float fp8_max = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2 ? 57344.0f : 448.0f;
    scale_kernel<<<1, 1, 0, s>>>(a->amax, fp8_max, amax_eps, pow2, a->scale, a->scale_inv);
    TX_CUDA_LAUNCHED("scale_kernel");
    return cast(a, NULL, s, what);
}
