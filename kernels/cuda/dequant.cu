/* dequant.cu - GPU dequantization of FP8 / FP8 block / MXFP8 / NVFP4 (see
 * dequant.h). tx_cuda_dequantize: one thread per output element in a
 * grid-stride loop (the checking path; reading the transposed columnwise
 * forms is strided). tx_cuda_dequantize_to feeds the emulated GEMMs, where
 * the pass is on the step's critical path: 64x64 tiles read along the
 * stored rows with 8-byte loads and write 16-byte stores, transposing
 * through shared memory only when the wanted orientation differs from the
 * stored one. */
#include "kernels/cuda/dequant.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant_common.cuh"

#include <cuda_bf16.h>
#include <float.h>
#include <limits.h>

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


/* ---- tx_cuda_dequantize_to: GEMM-ready operands -------------------------- */

constexpr int TILE = 64;         /* a block covers 64 x 64 stored elements */
constexpr int CHUNKS = TILE * TILE / 8;
constexpr int THREADS = 256;

/* Coordinates are those of the stored matrix: SR rows of SC elements
 * (columnwise FP8 / FP8 block / NVFP4 data is stored transposed, MXFP8's
 * is not), so every kind reads its bytes along stored rows. */
struct Q {
    int kind, e5, col, two_d, swz, swap;
    size_t SR, SC, ld;
    const uint8_t *data;
    const uint8_t *sc8;
    const float *scf;
    const float *scale_inv, *amax;
    void *out;
};

__device__ __forceinline__ float dec8(int e5, uint32_t b)
{
    return e5 ? txq::dec_fp8<true>(b) : txq::dec_fp8<false>(b);
}

/* MXFP8 columnwise: the 32x1 block's scale of stored element (i, j); the
 * swizzled form is that of the scales' transpose (as in dequant_kernel). */
__device__ __forceinline__ uint8_t mx_col_scale(const Q &q, size_t i, size_t j)
{
    return q.sc8[q.swz ? txq::swizzle128x4(j, i / 32, (q.SR / 32 + 3) / 4 * 4) : (i / 32) * q.ld + j];
}

/* Scale of the 1xN blocks along stored rows (everything but MXFP8
 * columnwise), as the multiplier the element is decoded with. */
__device__ __forceinline__ float row_scale(const Q &q, size_t i, size_t j, float sinv)
{
    switch (q.kind) {
    case TX_CUDA_Q_FP8_TENSOR: return sinv;
    case TX_CUDA_Q_FP8_BLOCK:
        return q.two_d ? q.scf[(i / 128) * q.ld + j / 128] : q.scf[(j / 128) * q.ld + i];
    case TX_CUDA_Q_MXFP8: return txq::e8m0_val(q.sc8[soff(q.swz, i, j / 32, q.ld)]);
    default: return txq::f32_from_e4m3(q.sc8[soff(q.swz, i, j / 16, q.ld)]);
    }
}

/* One stored element, exactly as dequant_kernel computes it. */
__device__ float value_at(const Q &q, size_t i, size_t j, float sinv, float sdec)
{
    const size_t pos = i * q.SC + j;
    if (q.kind == TX_CUDA_Q_NVFP4) {
        const uint32_t nib = (q.data[pos / 2] >> (4 * (pos & 1))) & 0xFu;
        return __fmul_rn(__fmul_rn(txq::dec_e2m1(nib), row_scale(q, i, j, sinv)), sdec);
    }
    const float s = q.kind == TX_CUDA_Q_MXFP8 && q.col ? txq::e8m0_val(mx_col_scale(q, i, j))
                                                       : row_scale(q, i, j, sinv);
    return txq::mulq(dec8(q.e5, q.data[pos]), s);
}

/* Eight stored elements (i, j..j+7); j % 8 == 0 and SC % 8 == 0, so one
 * aligned load and (but for MXFP8 columnwise) one scale. */
__device__ __forceinline__ void chunk8(const Q &q, size_t i, size_t j, float sinv, float sdec,
                                       float v[8])
{
    const size_t pos = i * q.SC + j;
    if (q.kind == TX_CUDA_Q_NVFP4) {
        const uint32_t w = __ldg(reinterpret_cast<const unsigned int *>(q.data + pos / 2));
        const float s = row_scale(q, i, j, sinv);
#pragma unroll
        for (int e = 0; e < 8; e++)
            v[e] = __fmul_rn(__fmul_rn(txq::dec_e2m1((w >> (4 * e)) & 0xFu), s), sdec);
        return;
    }
    const uint2 raw = __ldg(reinterpret_cast<const uint2 *>(q.data + pos));
    const uint32_t w[2] = {raw.x, raw.y};
    if (q.kind == TX_CUDA_Q_MXFP8 && q.col) {
#pragma unroll
        for (int e = 0; e < 8; e++)
            v[e] = txq::mulq(dec8(q.e5, (w[e / 4] >> (8 * (e % 4))) & 0xFFu),
                             txq::e8m0_val(mx_col_scale(q, i, j + e)));
        return;
    }
    const float s = row_scale(q, i, j, sinv);
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = txq::mulq(dec8(q.e5, (w[e / 4] >> (8 * (e % 4))) & 0xFFu), s);
}

template <typename T> struct Out;
template <> struct Out<__nv_bfloat16> {
    static constexpr int PAD = 2; /* 33-word rows: conflict-free transposed reads */
    __device__ static __nv_bfloat16 cvt(float x) { return __float2bfloat16_rn(x); }
    /* 8 values to 8 consecutive outputs (16-byte aligned) */
    __device__ static void store8(__nv_bfloat16 *dst, const float v[8])
    {
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
            w[k] = *reinterpret_cast<const uint32_t *>(&h);
        }
        *reinterpret_cast<uint4 *>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    }
    /* 8 staged values (4-byte aligned in shared memory) to dst */
    __device__ static void copy8(__nv_bfloat16 *dst, const __nv_bfloat16 *src)
    {
        const uint32_t *s = reinterpret_cast<const uint32_t *>(src);
        *reinterpret_cast<uint4 *>(dst) = make_uint4(s[0], s[1], s[2], s[3]);
    }
};
template <> struct Out<float> {
    static constexpr int PAD = 1;
    __device__ static float cvt(float x) { return x; }
    __device__ static void store8(float *dst, const float v[8])
    {
        reinterpret_cast<float4 *>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4 *>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    __device__ static void copy8(float *dst, const float *src)
    {
        reinterpret_cast<float4 *>(dst)[0] = make_float4(src[0], src[1], src[2], src[3]);
        reinterpret_cast<float4 *>(dst)[1] = make_float4(src[4], src[5], src[6], src[7]);
    }
};

/* VEC: SR and SC are multiples of 8 (vector loads and stores); otherwise
 * element by element with bounds checks. */
template <typename T, bool VEC>
__global__ void __launch_bounds__(THREADS) dequant_to_kernel(Q q)
{
    __shared__ __align__(16) T tile[TILE][TILE + Out<T>::PAD]; /* [stored col][stored row] */
    const size_t tiles_c = (q.SC + TILE - 1) / TILE;
    const size_t i0 = (size_t)blockIdx.x / tiles_c * TILE, j0 = (size_t)blockIdx.x % tiles_c * TILE;
    float sdec = 0.0f;
    if (q.kind == TX_CUDA_Q_NVFP4) {
        const float amax = *q.amax;
        float s = fminf(__fdiv_rn(2688.0f, amax), FLT_MAX);
        if (amax == 0.0f || s == 0.0f) s = 1.0f;
        sdec = __frcp_rn(s);
    }
    const float sinv = q.kind == TX_CUDA_Q_FP8_TENSOR ? *q.scale_inv : 0.0f;
    T *out = static_cast<T *>(q.out);
    for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
        const int r = c / 8, cc = c % 8 * 8;
        const size_t i = i0 + r, j = j0 + cc;
        if (i >= q.SR || j >= q.SC) continue;
        float v[8];
        if (VEC) {
            chunk8(q, i, j, sinv, sdec, v);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = j + e < q.SC ? value_at(q, i, j + e, sinv, sdec) : 0.0f;
        }
        if (!q.swap) {
            if (VEC) {
                Out<T>::store8(out + i * q.SC + j, v);
            } else {
                for (int e = 0; e < 8 && j + e < q.SC; e++) out[i * q.SC + j + e] = Out<T>::cvt(v[e]);
            }
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) tile[cc + e][r] = Out<T>::cvt(v[e]);
        }
    }
    if (!q.swap) return; /* the same for the whole block */
    __syncthreads();
    /* the output is [SC, SR]: stored column j0 + cr is output row j0 + cr */
    for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
        const int cr = c / 8, rr = c % 8 * 8;
        const size_t oi = j0 + cr, oj = i0 + rr;
        if (oi >= q.SC || oj >= q.SR) continue;
        T *dst = out + oi * q.SR + oj;
        if (VEC) {
            Out<T>::copy8(dst, &tile[cr][rr]);
        } else {
            for (int e = 0; e < 8 && oj + e < q.SR; e++) dst[e] = tile[cr][rr + e];
        }
    }
}

} /* namespace */

/* The argument rules both entry points share. */
static teexec_status *check_args(const tx_cuda_dequant_args *a, const char *what)
{
    if (!a->data) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL data", what);
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
    return NULL;
}

extern "C" teexec_status *tx_cuda_dequantize(const tx_cuda_dequant_args *a, void *stream)
{
    static const char *const what = "tx_cuda_dequantize";
    if (!a || !a->out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL output", what);
    TX_TRY(check_args(a, what));
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

extern "C" teexec_status *tx_cuda_dequantize_to(const tx_cuda_dequant_args *a, int transposed,
                                                teexec_dtype out_dtype, void *out, void *stream)
{
    static const char *const what = "tx_cuda_dequantize_to";
    if (!a || !out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL output", what);
    TX_TRY(check_args(a, what));
    if (out_dtype != TEEXEC_DTYPE_BFLOAT16 && out_dtype != TEEXEC_DTYPE_FLOAT)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: output dtype %s is not BFLOAT16 or FLOAT",
                        what, teexec_dtype_name(out_dtype));
    if ((uintptr_t)out % 16)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: output must be 16-byte aligned", what);
    if (a->rows == 0 || a->cols == 0) return NULL;
    const bool stored_t = a->columnwise && a->kind != TX_CUDA_Q_MXFP8;
    Q q;
    q.kind = a->kind;
    q.e5 = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    q.col = a->columnwise != 0;
    q.two_d = a->block_2d != 0;
    q.swz = a->swizzled != 0;
    q.swap = (transposed != 0) != stored_t;
    q.SR = stored_t ? a->cols : a->rows;
    q.SC = stored_t ? a->rows : a->cols;
    q.ld = a->scale_cols;
    q.data = a->data;
    q.sc8 = static_cast<const uint8_t *>(a->scales);
    q.scf = static_cast<const float *>(a->scales);
    q.scale_inv = a->scale_inv;
    q.amax = a->amax;
    q.out = out;
    const size_t tr = (q.SR + TILE - 1) / TILE, tc = (q.SC + TILE - 1) / TILE;
    if (tr > (size_t)INT_MAX / tc)
        return tx_error(TEEXEC_ERR_LIMIT, "%s: [%zu, %zu] needs too many blocks", what, a->rows,
                        a->cols);
    const unsigned blocks = (unsigned)(tr * tc);
    const bool vec = q.SR % 8 == 0 && q.SC % 8 == 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (out_dtype == TEEXEC_DTYPE_BFLOAT16) {
        if (vec) dequant_to_kernel<__nv_bfloat16, true><<<blocks, THREADS, 0, s>>>(q);
        else dequant_to_kernel<__nv_bfloat16, false><<<blocks, THREADS, 0, s>>>(q);
    } else {
        if (vec) dequant_to_kernel<float, true><<<blocks, THREADS, 0, s>>>(q);
        else dequant_to_kernel<float, false><<<blocks, THREADS, 0, s>>>(q);
    }
    TX_CUDA_LAUNCHED("dequant_to_kernel");
    return NULL;
}
