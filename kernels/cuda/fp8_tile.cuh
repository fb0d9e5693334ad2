/*
 * fp8_tile.cuh - what the per-tensor FP8 quantizer (quant_fp8.cu) and the
 * FP8 block quantizer (quant_block.cu) share: the 128 x 128 tile of a
 * 256-thread block, the kernel parameters, TE's scale rule, and the byte
 * tile that turns a tile's codes into the transposed columnwise copy.
 *
 * Both store rowwise data [M, K] and columnwise data transposed [K, M].
 * Each thread loads 8 rows x 8 columns (16-byte loads, all in flight before
 * any use), converts them, stores its rowwise bytes directly and its
 * columnwise bytes into the swizzled byte tile; after one barrier the tile
 * is written out transposed with whole 128-byte rows per store instruction
 * (ft_store_transposed). Writing the transposed copy from the staged input
 * instead, one column per thread, put the 32 lanes of a store on 32
 * different output rows and held these kernels at 52-57% of copy.
 *
 * Device code only; no state; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_FP8_TILE_CUH
#define TEEXEC_KERNELS_CUDA_FP8_TILE_CUH

#include "kernels/cuda/quant_common.cuh"

#include <float.h>

namespace txq {

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

/* The thread's 8 rows r0 + rg + 16 i x 8 columns from c of the tile, all
 * loads issued before any use; outside the tensor reads as zeros. */
template <typename T>
__device__ __forceinline__ void ft_load_rows(const Fp8TileParams &p, size_t r0, size_t c, int rg,
                                             Raw8<T> (&rv)[8])
{
    const T *x = static_cast<const T *>(p.x);
    const bool cin = c < p.cols;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const size_t r = r0 + rg + 16 * i;
        if (cin && r < p.rows) rv[i].load(x + r * p.cols + c);
        else rv[i].zero();
    }
}

/* ---- the byte tile behind both columnwise copies --------------------------
 * A block's 128 x 128 FP8 codes staged in shared memory as 4-byte words,
 * row-major, XOR-swizzled by row group so that the transpose's reads (8 row
 * groups x 4 word columns per warp) hit 32 distinct banks. */
constexpr int FT_WORDS = FT_R * FT_C / 4;

__device__ __forceinline__ int ft_word(int r, int w) { return r * (FT_C / 4) + (w ^ (((r >> 4) & 7) << 2)); }

/* Stores the staged tile transposed into col [K, M] (element (r, c) of the
 * tile to col[(c0 + c) * M + r0 + r]): thread owns tile columns
 * 4*cg..4*cg+3 (output rows) and tile rows 16*rb..16*rb+15; the 8 threads
 * of one cg are adjacent lanes, so each store instruction writes whole
 * 128-byte output rows. The caller has synchronised the block after the
 * last write to qs; M % 16 == 0, so 16-row chunks are whole. */
__device__ __forceinline__ void ft_store_transposed(const uint32_t *qs, uint8_t *col, size_t M,
                                                    size_t K, size_t r0, size_t c0, int tid)
{
    const int rb = tid & 7, cg = tid >> 3;
    if (r0 + rb * 16 >= M) return;
    uint32_t o[4][4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int rr = rb * 16 + k * 4;
        const uint32_t a = qs[ft_word(rr, cg)], b = qs[ft_word(rr + 1, cg)];
        const uint32_t cq = qs[ft_word(rr + 2, cg)], d = qs[ft_word(rr + 3, cg)];
        const uint32_t t0 = __byte_perm(a, b, 0x5140), t1 = __byte_perm(cq, d, 0x5140);
        const uint32_t t2 = __byte_perm(a, b, 0x7362), t3 = __byte_perm(cq, d, 0x7362);
        o[0][k] = __byte_perm(t0, t1, 0x5410);
        o[1][k] = __byte_perm(t0, t1, 0x7632);
        o[2][k] = __byte_perm(t2, t3, 0x5410);
        o[3][k] = __byte_perm(t2, t3, 0x7632);
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const size_t cc = c0 + (size_t)cg * 4 + j;
        if (cc < K)
            *reinterpret_cast<uint4 *>(col + cc * M + r0 + rb * 16) =
                make_uint4(o[j][0], o[j][1], o[j][2], o[j][3]);
    }
}

} /* namespace txq */

#endif
