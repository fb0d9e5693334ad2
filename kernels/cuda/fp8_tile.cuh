/*
 * fp8_tile.cuh - the cast(+transpose) kernel behind the per-tensor FP8
 * quantizer (quant_fp8.cu) and the FP8 block quantizer (quant_block.cu).
 *
 * Both store rowwise data [M, K] and columnwise data transposed [K, M], so
 * they share one tile walk: a block of 256 threads owns 128 rows x 128
 * columns; the row sweep loads 16 bytes per thread (8 rows in flight),
 * quantizes and stores rowwise bytes directly, and stages the tile in
 * shared memory; the column sweep gives each thread 64 rows of one column,
 * which are 64 contiguous bytes of the transposed output (four 16-byte
 * stores). The scale is a per-tensor device value, a 1x128 / 128x1 block
 * value, or one per 128x128 tile.
 *
 * Device code only; no state; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_FP8_TILE_CUH
#define TEEXEC_KERNELS_CUDA_FP8_TILE_CUH

#include "kernels/cuda/quant_common.cuh"

#include <float.h>

namespace txq {

enum Fp8Mode { FP8_PER_TENSOR = 0, FP8_BLOCK_1D = 1, FP8_BLOCK_2D = 2 };

constexpr int FT_R = 128, FT_C = 128, FT_NT = 256;

struct Fp8TileParams {
    const void *x;
    size_t rows, cols, ncb;
    uint8_t *row_data, *col_data;   /* [M,K] and [K,M]; either may be NULL */
    const float *scale;             /* per-tensor: device scale */
    float *amax;                    /* per-tensor: max-reduced |x| or NULL */
    float *row_scale_inv, *col_scale_inv; /* block modes */
    size_t row_ld, col_ld;          /* block modes: scale leading dims */
    float eps, inf_value;           /* block modes: scale rule */
    int pow2;
    int e5m2; /* runtime: a uniform branch, half the instantiations */
};

/* te-ops 4.4 compute_scale_from_amax: amax = max(amax, eps); 0/Inf/NaN ->
 * 1; fp8_max / amax with IEEE division; Inf -> inf_value; optional power of
 * two by clearing the mantissa. */
__device__ __forceinline__ float scale_from_amax(float amax, float fp8_max, float eps,
                                                 float inf_value, int pow2)
{
    if (amax < eps) amax = eps;
    float s;
    if (amax == 0.0f || isinf(amax) || isnan(amax)) s = 1.0f;
    else {
        s = __fdiv_rn(fp8_max, amax);
        if (isinf(s)) s = inf_value;
    }
    if (pow2) s = __uint_as_float(__float_as_uint(s) & 0xFF800000u);
    return s;
}

template <typename T> struct StageT;
template <> struct StageT<__nv_bfloat16> {
    typedef unsigned short type;
    static __device__ __forceinline__ type pack(float v) { return (type)(__float_as_uint(v) >> 16); }
    static __device__ __forceinline__ float unpack(type h) { return __uint_as_float((uint32_t)h << 16); }
};
template <> struct StageT<float> {
    typedef float type;
    static __device__ __forceinline__ type pack(float v) { return v; }
    static __device__ __forceinline__ float unpack(type h) { return h; }
};

template <typename T, int MODE, bool ROW, bool COL>
__global__ void __launch_bounds__(FT_NT) fp8_tile_kernel(Fp8TileParams p)
{
    typedef typename StageT<T>::type S;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    S(*xs)[FT_C] = reinterpret_cast<S(*)[FT_C]>(smem_raw);
    __shared__ float red[FT_NT / 32];
    __shared__ float colpart[2][FT_C];

    const bool E5M2 = p.e5m2 != 0;
    const float fp8_max = E5M2 ? 57344.0f : 448.0f;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l16 = tid & 15, rg = tid >> 4;
    const size_t mb = blockIdx.x / p.ncb, kb = blockIdx.x % p.ncb;
    const size_t r0 = mb * FT_R, c0 = kb * FT_C;
    const size_t M = p.rows, K = p.cols;
    const T *x = static_cast<const T *>(p.x);
    const size_t c = c0 + (size_t)l16 * 8;
    const bool cin = c < K;

    /* 8 rows x 8 elements per thread, kept as raw bits (half the registers
     * of floats for bf16), all loads issued before any use */
    Raw8<T> rv[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const size_t r = r0 + rg + 16 * i;
        if (cin && r < M) rv[i].load(x + r * K + c);
        else rv[i].zero();
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        if (COL && cin) rv[i].stage(&xs[rg + 16 * i][l16 * 8]);

    float s2d = 0.0f;
    if (MODE == FP8_BLOCK_2D) {
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            float v[8];
            rv[i].get(v);
#pragma unroll
            for (int j = 0; j < 8; j++) a = fmaxf(a, fabsf(v[j]));
        }
        a = warp_max_xor(a, 32);
        if (lane == 0) red[warp] = a;
        __syncthreads();
        float b = red[0];
#pragma unroll
        for (int i = 1; i < FT_NT / 32; i++) b = fmaxf(b, red[i]);
        s2d = scale_from_amax(b, fp8_max, p.eps, p.inf_value, p.pow2);
    }
    const float sten = MODE == FP8_PER_TENSOR ? __ldg(p.scale) : 0.0f;

    float tamax = 0.0f; /* per-tensor: this thread's share of the amax */
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const size_t r = r0 + rg + 16 * i;
        float v[8];
        rv[i].get(v);
        if (MODE == FP8_PER_TENSOR && p.amax)
#pragma unroll
            for (int j = 0; j < 8; j++) tamax = fmaxf(tamax, fabsf(v[j]));
        if (ROW) {
            float s;
            if (MODE == FP8_PER_TENSOR) s = sten;
            else if (MODE == FP8_BLOCK_2D) s = s2d;
            else {
                float a = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; j++) a = fmaxf(a, fabsf(v[j]));
                a = warp_max_xor(a, 16);
                s = scale_from_amax(a, fp8_max, p.eps, p.inf_value, p.pow2);
                if (l16 == 0 && r < M) p.row_scale_inv[kb * p.row_ld + r] = __frcp_rn(s);
            }
            if (cin && r < M) {
                uint2 q;
                q.x = quant_fp8x4(E5M2, v, s);
                q.y = quant_fp8x4(E5M2, v + 4, s);
                *reinterpret_cast<uint2 *>(p.row_data + r * K + c) = q;
            }
        }
    }
    if (MODE == FP8_PER_TENSOR && p.amax) {
        tamax = warp_max_xor(tamax, 32);
        if (lane == 0 && tamax > 0.0f)
            atomicMax(reinterpret_cast<unsigned int *>(p.amax), __float_as_uint(tamax));
    }
    if (MODE == FP8_BLOCK_2D && tid == 0) {
        if (ROW) p.row_scale_inv[mb * p.row_ld + kb] = __frcp_rn(s2d);
        if (COL) p.col_scale_inv[kb * p.col_ld + mb] = __frcp_rn(s2d);
    }
    if (!COL) return;
    __syncthreads();

    /* column sweep: thread owns column c0+cl, rows h*64 .. h*64+63, which
     * are 64 contiguous bytes of the transposed output */
    const int cl = tid & (FT_C - 1), h = tid >> 7;
    const size_t cc = c0 + cl;
    float s;
    if (MODE == FP8_PER_TENSOR) s = sten;
    else if (MODE == FP8_BLOCK_2D) s = s2d;
    else {
        float a = 0.0f;
#pragma unroll 8
        for (int r = 0; r < 64; r++) a = fmaxf(a, fabsf(StageT<T>::unpack(xs[h * 64 + r][cl])));
        colpart[h][cl] = a;
        __syncthreads();
        a = fmaxf(colpart[0][cl], colpart[1][cl]);
        s = scale_from_amax(a, fp8_max, p.eps, p.inf_value, p.pow2);
        if (h == 0 && cc < K) p.col_scale_inv[mb * p.col_ld + cc] = __frcp_rn(s);
    }
    if (cc >= K) return;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int rb = h * 64 + k * 16;
        if (r0 + rb >= M) break; /* M % 16 == 0: chunks are whole */
        uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float y[4];
#pragma unroll
            for (int t = 0; t < 4; t++) y[t] = StageT<T>::unpack(xs[rb + 4 * j + t][cl]);
            w[j] = quant_fp8x4(E5M2, y, s);
        }
        *reinterpret_cast<uint4 *>(p.col_data + cc * M + r0 + rb) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

template <typename T>
constexpr size_t fp8_tile_smem() { return sizeof(typename StageT<T>::type) * FT_R * FT_C; }

/* Launches with the dynamic shared memory the tile needs (raising the
 * kernel's limit above 48 KiB for fp32 input). */
template <typename T, int MODE, bool ROW, bool COL>
cudaError_t fp8_tile_launch(const Fp8TileParams &p, unsigned blocks, cudaStream_t s)
{
    const size_t smem = COL ? fp8_tile_smem<T>() : 0;
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(fp8_tile_kernel<T, MODE, ROW, COL>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    fp8_tile_kernel<T, MODE, ROW, COL><<<blocks, FT_NT, smem, s>>>(p);
    return cudaGetLastError();
}

template <typename T, int MODE>
cudaError_t fp8_tile_dispatch_usage(const Fp8TileParams &p, unsigned blocks, cudaStream_t s)
{
    const bool row = p.row_data != NULL, col = p.col_data != NULL;
    if (row && col) return fp8_tile_launch<T, MODE, true, true>(p, blocks, s);
    if (row) return fp8_tile_launch<T, MODE, true, false>(p, blocks, s);
    return fp8_tile_launch<T, MODE, false, true>(p, blocks, s);
}

/* p.e5m2 must be set by the caller. */
template <int MODE>
cudaError_t fp8_tile_dispatch(const Fp8TileParams &p, bool bf16, unsigned blocks, cudaStream_t s)
{
    return bf16 ? fp8_tile_dispatch_usage<__nv_bfloat16, MODE>(p, blocks, s)
                : fp8_tile_dispatch_usage<float, MODE>(p, blocks, s);
}

} /* namespace txq */

#endif
