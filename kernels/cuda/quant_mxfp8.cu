/* quant_mxfp8.cu - MXFP8 quantizer (rowwise 1x32, columnwise 32x1, 2-D
 * 32x32), one pass over the input. See quant_mxfp8.h.
 *
 * 1-D on whole 128 x 128 tiles: one 256-thread block per tile (the
 * block-tile kernel, 89% of a device-to-device copy's bandwidth on the
 * H200 with a 256 MiB bf16 input). Otherwise, and for 32x32: one warp per
 * 32 x 64 tile, no shared memory (the warp-tile kernel: 83-84% for 1-D,
 * 89% for 32x32; bench/results/gpu_quant_2026-12-04.md). */
#include "kernels/cuda/quant_mxfp8.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant_common.cuh"

namespace {

struct Params {
    const void *x;
    size_t rows, cols, ncb;
    uint8_t *row_data, *row_scales;
    size_t row_ld, row_pad_cols; /* compact ld / swizzled padded columns */
    uint8_t *col_data, *col_scales;
    size_t col_ld, col_pad_cols;
    int e5m2, swz; /* runtime: uniform branches, half the instantiations */
};

__device__ __forceinline__ size_t scale_off(bool swz, size_t r, size_t c, size_t ld, size_t pad_cols)
{
    return swz ? txq::swizzle128x4(r, c, pad_cols) : r * ld + c;
}

/* q = fp8(x[j] * m[j]) for 4 values with their own multipliers (the
 * columnwise 32x1 blocks of four adjacent columns); NaN as quant_fp8x4. */
__device__ __forceinline__ uint32_t quant_fp8x4_v(bool e5m2, const float x[4], const float m[4])
{
    uint32_t w = txq::cvt_fp8x2(e5m2, __fmul_rn(x[0], m[0]), __fmul_rn(x[1], m[1])) |
                 (txq::cvt_fp8x2(e5m2, __fmul_rn(x[2], m[2]), __fmul_rn(x[3], m[3])) << 16);
    if (__builtin_expect(txq::has_nan_code(e5m2, w), 0)) {
        w = txq::patch_nan1(w, x[0], 0);
        w = txq::patch_nan1(w, x[1], 1);
        w = txq::patch_nan1(w, x[2], 2);
        w = txq::patch_nan1(w, x[3], 3);
    }
    return w;
}

/* The raw words again, through an opaque move: otherwise the compiler may
 * keep floats unpacked for an earlier pass alive (up to 64 more registers)
 * instead of unpacking a second time, which costs one instruction per
 * element. */
template <typename R>
__device__ __forceinline__ R opaque(const R &in)
{
    R r = in;
    uint32_t *w = reinterpret_cast<uint32_t *>(&r);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(R) / 4); i++) asm volatile("mov.b32 %0, %0;" : "+r"(w[i]));
    return r;
}

/* ---- warp-tile kernel -----------------------------------------------------
 *
 * Each warp owns a 32-row x 64-column tile on its own: no shared memory and
 * no barriers. Lane l holds 8 columns (8*(l%8)..+7) of rows l/8 + 4i,
 * i = 0..7, loaded with eight 16-byte loads (each load instruction reads 4
 * whole 128-byte row segments). A rowwise 1x32 block is then 4 lanes
 * (xor 1, 2), a columnwise 32x1 block 4 lanes x 8 registers (xor 8, 16), a
 * 32x32 block 16 lanes (xor 1, 2, 8, 16). Both usages are quantized from
 * the same registers and stored as 8-byte pieces of whole 64-byte row
 * segments.
 *
 * NaN: the amaxes are first reduced with max.NaN, so a NaN anywhere in the
 * warp's tile shows up for free; only such tiles take the careful path
 * (amaxes again with fmaxf, which drops NaN as the CPU does, and the FP8
 * codes checked for NaN to give them the input's sign). Without NaN
 * inputs no product can be NaN (multipliers are finite and > 0), so the
 * fast path converts without looking. */
constexpr int WT_R = 32, WT_C = 64, WT_NT = 128, WT_WARPS = WT_NT / 32;

/* e8m0 code back from its multiplier 2^(127-e) (e8m0_rcp_fin): exponent
 * field 254-e, and e = 254 (multiplier 2^-127, field 0) fits the same rule. */
__device__ __forceinline__ uint32_t e8m0_of_rcp(float m) { return 254u - (__float_as_uint(m) >> 23); }

/* The fast path: quantizes and stores one warp tile whose raw elements are
 * in `v8` and which has no NaN. ra[i] / ca[j] (1-D) or ra[0] (2-D) hold this
 * thread's partial amaxes. Offsets are a first one plus a step (rows of a
 * thread are 4 apart: 4 rows of data, 64 bytes of a swizzled scale tile;
 * its 8 columns are 16 swizzled bytes apart), which keeps the address
 * registers few. */
template <typename T, bool ROW, bool COL, bool TWO_D>
__device__ __forceinline__ void wt_tile(const Params &p, const txq::Raw8<T> (&v8)[8], const float (&ra)[8],
                                        const float (&ca)[8], size_t rb, size_t c, int rq, int cg)
{
    const bool E5M2 = p.e5m2 != 0, SWZ = p.swz != 0;
    const float rcp = E5M2 ? 1.0f / 57344.0f : 1.0f / 448.0f;
    const size_t K = p.cols;
    const bool cin = c < K; /* K % 32 == 0: a 32-column block is all in or out */
    /* multipliers: rm[i] for row i (1-D) or the block's (2-D, rm[0]); cm[j]
     * for column j (1-D) */
    float rm[8], cm[8];
    if (TWO_D) {
        float a = ra[0];
        a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
        a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
        a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 8));
        a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 16));
        rm[0] = txq::e8m0_rcp_fin(txq::e8m0_up_fin(a * rcp));
    } else {
        if (ROW)
#pragma unroll
            for (int i = 0; i < 8; i++) {
                float a = ra[i];
                a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
                a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
                rm[i] = txq::e8m0_rcp_fin(txq::e8m0_up_fin(a * rcp));
            }
        if (COL)
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float a = ca[j];
                a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 8));
                a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 16));
                cm[j] = txq::e8m0_rcp_fin(txq::e8m0_up_fin(a * rcp));
            }
    }
    if (!cin) return;
    const size_t r = rb * WT_R + rq; /* this thread's first row; then +4 */
    const size_t dstep = 4 * K;
    uint8_t *rd = ROW ? p.row_data + r * K + c : NULL;
    uint8_t *cd = COL ? p.col_data + r * K + c : NULL;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float v[8];
        opaque(v8[i]).get(v); /* unpack again rather than keep 64 floats live */
        if (TWO_D) {
            uint2 q;
            q.x = txq::quant_fp8x4_fast(E5M2, v, rm[0]);
            q.y = txq::quant_fp8x4_fast(E5M2, v + 4, rm[0]);
            if (ROW) *reinterpret_cast<uint2 *>(rd + i * dstep) = q;
            if (COL) *reinterpret_cast<uint2 *>(cd + i * dstep) = q;
            continue;
        }
        if (ROW) {
            uint2 q;
            q.x = txq::quant_fp8x4_fast(E5M2, v, rm[i]);
            q.y = txq::quant_fp8x4_fast(E5M2, v + 4, rm[i]);
            *reinterpret_cast<uint2 *>(rd + i * dstep) = q;
        }
        if (COL) {
            uint2 q;
            q.x = txq::quant_fp8x4_v_fast(E5M2, v, cm);
            q.y = txq::quant_fp8x4_v_fast(E5M2, v + 4, cm + 4);
            *reinterpret_cast<uint2 *>(cd + i * dstep) = q;
        }
    }
    if (ROW && (cg & 3) == 0) {
        uint8_t *sp = p.row_scales + scale_off(SWZ, r, c / 32, p.row_ld, p.row_pad_cols);
        const size_t step = SWZ ? 64 : 4 * p.row_ld;
#pragma unroll
        for (int i = 0; i < 8; i++) sp[i * step] = (uint8_t)e8m0_of_rcp(rm[TWO_D ? 0 : i]);
    }
    if (COL && rq == 0) {
        uint8_t *sp = p.col_scales + (SWZ ? txq::swizzle128x4(c, rb, p.col_pad_cols) : rb * p.col_ld + c);
        const size_t step = SWZ ? 16 : 1;
#pragma unroll
        for (int j = 0; j < 8; j++) sp[j * step] = (uint8_t)e8m0_of_rcp(TWO_D ? rm[0] : cm[j]);
    }
}

/* The careful path, for warp tiles with a NaN input: amaxes with fmaxf (NaN
 * ignored, as the CPU) and FP8 codes checked for NaN. Rare, so written for
 * few registers rather than speed: the tile is copied to a local array and
 * the loops are rolled (dynamic indices keep those arrays in local memory).
 * Inlined and unrolled like the fast path, it set the kernel's register
 * count to ~128 (from ~60) for every tile. */
template <typename T, bool ROW, bool COL, bool TWO_D>
__device__ __forceinline__ void wt_tile_careful(const Params &p, const txq::Raw8<T> (&v8)[8], unsigned rb,
                                                size_t c, int rq, int cg)
{
    const bool E5M2 = p.e5m2 != 0, SWZ = p.swz != 0;
    const float rcp = E5M2 ? 1.0f / 57344.0f : 1.0f / 448.0f;
    const size_t K = p.cols;
    const bool cin = c < K;
    txq::Raw8<T> tile[8];
    float rm[8];
#pragma unroll
    for (int i = 0; i < 8; i++) tile[i] = v8[i];
    float cm[8], bm = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) cm[j] = 0.0f;
#pragma unroll 1
    for (int i = 0; i < 8; i++) {
        float v[8], a = 0.0f;
        tile[i].get(v);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            a = fmaxf(a, fabsf(v[j]));
            cm[j] = fmaxf(cm[j], fabsf(v[j])); /* column amaxes for now */
        }
        rm[i] = a; /* row amaxes for now */
        bm = fmaxf(bm, a);
    }
    if (TWO_D) {
        bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, 1));
        bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, 2));
        bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, 8));
        bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, 16));
        bm = txq::e8m0_rcp_fin(txq::e8m0_up_fin(bm * rcp));
    }
    if (ROW && !TWO_D)
#pragma unroll 1
        for (int i = 0; i < 8; i++) {
            float a = rm[i];
            a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
            a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
            rm[i] = txq::e8m0_rcp_fin(txq::e8m0_up_fin(a * rcp));
        }
    if (COL && !TWO_D)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float a = cm[j];
            a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 8));
            a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 16));
            cm[j] = txq::e8m0_rcp_fin(txq::e8m0_up_fin(a * rcp));
        }
    if (TWO_D)
#pragma unroll
        for (int j = 0; j < 8; j++) cm[j] = bm;
    if (!cin) return;
    const size_t r = (size_t)rb * WT_R + rq;
#pragma unroll 1
    for (int i = 0; i < 8; i++) {
        float v[8];
        tile[i].get(v);
        const size_t off = (r + 4 * i) * K + c;
        if (ROW) {
            const float m = TWO_D ? bm : rm[i];
            uint2 q;
            q.x = txq::quant_fp8x4(E5M2, v, m);
            q.y = txq::quant_fp8x4(E5M2, v + 4, m);
            *reinterpret_cast<uint2 *>(p.row_data + off) = q;
        }
        if (COL) {
            uint2 q;
            q.x = quant_fp8x4_v(E5M2, v, cm);
            q.y = quant_fp8x4_v(E5M2, v + 4, cm + 4);
            *reinterpret_cast<uint2 *>(p.col_data + off) = q;
        }
    }
    if (ROW && (cg & 3) == 0)
#pragma unroll 1
        for (int i = 0; i < 8; i++)
            p.row_scales[scale_off(SWZ, r + 4 * i, c / 32, p.row_ld, p.row_pad_cols)] =
                (uint8_t)e8m0_of_rcp(TWO_D ? bm : rm[i]);
    if (COL && rq == 0)
#pragma unroll
        for (int j = 0; j < 8; j++)
            p.col_scales[SWZ ? txq::swizzle128x4(c + j, rb, p.col_pad_cols) : (size_t)rb * p.col_ld + c + j] =
                (uint8_t)e8m0_of_rcp(cm[j]);
}

/* The fast path's amaxes, NaN-propagating (max.NaN) so that a NaN input
 * is noticed. bf16: on packed pairs, |x| by clearing the sign bits and
 * max.NaN.bf16x2 (exact, one instruction per two elements), which also
 * keeps these values apart from the unpacked floats of the quantization
 * pass (ptxas would otherwise share them and keep 64 floats live). */
__device__ __forceinline__ uint32_t hmax2_nan(uint32_t a, uint32_t b)
{
    uint32_t r;
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

template <bool ROW, bool COL, bool TWO_D>
__device__ __forceinline__ void amax_pass(const txq::Raw8<__nv_bfloat16> (&v8)[8], float (&ra)[8],
                                          float (&ca)[8])
{
    uint32_t cp[4] = {0u, 0u, 0u, 0u}, bp = 0u;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const uint32_t w0 = v8[i].r.x & 0x7fff7fffu, w1 = v8[i].r.y & 0x7fff7fffu;
        const uint32_t w2 = v8[i].r.z & 0x7fff7fffu, w3 = v8[i].r.w & 0x7fff7fffu;
        if (TWO_D) {
            bp = hmax2_nan(bp, hmax2_nan(hmax2_nan(w0, w1), hmax2_nan(w2, w3)));
            continue;
        }
        if (ROW) {
            const uint32_t m = hmax2_nan(hmax2_nan(w0, w1), hmax2_nan(w2, w3));
            ra[i] = txq::fmax_nan(bf_lo(m), bf_hi(m));
        }
        if (COL) {
            cp[0] = hmax2_nan(cp[0], w0);
            cp[1] = hmax2_nan(cp[1], w1);
            cp[2] = hmax2_nan(cp[2], w2);
            cp[3] = hmax2_nan(cp[3], w3);
        }
    }
    if (TWO_D) ra[0] = txq::fmax_nan(bf_lo(bp), bf_hi(bp));
    if (COL && !TWO_D)
#pragma unroll
        for (int k = 0; k < 4; k++) {
            ca[2 * k] = bf_lo(cp[k]);
            ca[2 * k + 1] = bf_hi(cp[k]);
        }
}

template <bool ROW, bool COL, bool TWO_D>
__device__ __forceinline__ void amax_pass(const txq::Raw8<float> (&v8)[8], float (&ra)[8], float (&ca)[8])
{
#pragma unroll
    for (int j = 0; j < 8; j++) ra[j] = ca[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float v[8];
        v8[i].get(v);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float a = fabsf(v[j]);
            if (TWO_D) ra[0] = txq::fmax_nan(ra[0], a);
            else {
                if (ROW) ra[i] = txq::fmax_nan(ra[i], a);
                if (COL) ca[j] = txq::fmax_nan(ca[j], a);
            }
        }
    }
}

/* Warps walk tiles t = global warp id, + all warps, ...; tiles are
 * row-block-major so that neighbouring warps read neighbouring columns.
 * The launch gives every warp one tile: with ~55-70 registers, 7-9 blocks
 * of 4 warps per SM keep enough loads in flight. (H200, 256 MiB bf16:
 * persistent grids were slower, 71-78% of copy against 83-89%, also with
 * the next tile prefetched into registers, which cost ~95-120 registers.) */
template <typename T, bool ROW, bool COL, bool TWO_D>
__global__ void __launch_bounds__(WT_NT) mxfp8_wt_kernel(Params p)
{
    const int lane = threadIdx.x & 31, cg = lane & 7, rq = lane >> 3;
    const size_t K = p.cols;
    /* 32-bit tile arithmetic (the host checks the count): a 64-bit
     * division per tile costs a subroutine and a dozen registers */
    const unsigned ns = (unsigned)p.ncb; /* 64-column strips */
    const unsigned ntiles = (unsigned)(p.rows / WT_R) * ns;
    const unsigned step = gridDim.x * WT_WARPS;
    const T *x = static_cast<const T *>(p.x);
    auto load = [&](unsigned t, txq::Raw8<T>(&d)[8]) {
        const unsigned rb = t / ns;
        const size_t c = (size_t)(t - rb * ns) * WT_C + (size_t)cg * 8;
        if (t < ntiles && c < K) {
            const T *xp = x + ((size_t)rb * WT_R + rq) * K + c;
#pragma unroll
            for (int i = 0; i < 8; i++) d[i].load(xp + i * 4 * K);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) d[i].zero();
        }
    };
    unsigned t = blockIdx.x * WT_WARPS + (threadIdx.x >> 5);
    txq::Raw8<T> cur[8];
    for (; t < ntiles; t += step) {
        load(t, cur);
        float ra[8], ca[8];
        amax_pass<ROW, COL, TWO_D>(cur, ra, ca);
        /* a NaN input makes its row's (or column's, or block's) amax NaN */
        float chk = ROW || TWO_D ? ra[0] : ca[0];
#pragma unroll
        for (int j = 1; j < 8; j++)
            if (!TWO_D) chk = txq::fmax_nan(chk, ROW ? ra[j] : ca[j]);
        const unsigned rb = t / ns;
        const size_t c = (size_t)(t - rb * ns) * WT_C + (size_t)cg * 8;
        if (__any_sync(0xffffffffu, chk != chk))
            wt_tile_careful<T, ROW, COL, TWO_D>(p, cur, rb, c, rq, cg);
        else
            wt_tile<T, ROW, COL, TWO_D>(p, cur, ra, ca, rb, c, rq, cg);
    }
}

/* One warp tile per warp: tiles / 4 blocks of 128 threads (the host checks
 * that the tile count fits the kernel's 32-bit tile index). */
template <typename Kern>
cudaError_t launch_wt(Kern k, const Params &p, cudaStream_t s)
{
    const size_t tiles = (p.rows / WT_R) * p.ncb;
    k<<<(unsigned)((tiles + WT_WARPS - 1) / WT_WARPS), WT_NT, 0, s>>>(p);
    return cudaGetLastError();
}

/* ---- 1-D, whole 128 x 128 tiles: one 256-thread block per tile ---------
 * Thread (rg, l16) = (tid / 16, tid % 16) holds rows rg + 16 i (i < 8) x
 * columns 8 l16 .. 8 l16 + 7, so the 16 lanes of a half-warp store whole
 * 128-byte row segments of both data arrays (the warp tile's 64-column
 * rows were half lines, and that kernel stayed at 83-84% of copy). A 1x32
 * rowwise block is 4 lanes (xor 1, 2); a 32x1 columnwise block b holds
 * registers i = 2b, 2b + 1 of all 16 row groups: two per warp (xor 16),
 * then 8 warps through shared memory, where each of its 512 scales is
 * made once and shared. A tile with a NaN is redone as eight warp tiles
 * by wt_tile_careful. */
constexpr int BT = 128, BT_NT = 256;

/* A block tile with a NaN: warp w redoes warp tile (row block rb, strip
 * starting at column cw) by the warp-tile kernel's careful path. Not
 * inlined (parameters by value), so the fast path keeps its registers. */
template <typename T, bool ROW, bool COL>
__device__ __noinline__ void bt_tile_careful(const Params p, unsigned rb, size_t cw, int lane)
{
    const int rq = lane >> 3, cg = lane & 7;
    const size_t c = cw + (size_t)cg * 8, K = p.cols;
    const T *x = static_cast<const T *>(p.x);
    txq::Raw8<T> v8[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v8[i].load(x + ((size_t)rb * WT_R + rq + 4 * i) * K + c);
    wt_tile_careful<T, ROW, COL, false>(p, v8, rb, c, rq, cg);
}

template <typename T, bool ROW, bool COL>
__global__ void __launch_bounds__(BT_NT) mxfp8_bt_kernel(Params p)
{
    __shared__ __align__(16) float part[COL ? BT_NT / 32 : 1][4][BT];
    __shared__ __align__(16) float cmul[COL ? 4 : 1][BT];

    const bool E5M2 = p.e5m2 != 0, SWZ = p.swz != 0;
    const float rcp = E5M2 ? 1.0f / 57344.0f : 1.0f / 448.0f;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l16 = tid & 15, rg = tid >> 4;
    const unsigned ncb = (unsigned)p.ncb;
    const size_t mb = blockIdx.x / ncb, kb = blockIdx.x - mb * ncb;
    const size_t r0 = mb * BT, c0 = kb * BT, K = p.cols;
    const size_t c = c0 + (size_t)l16 * 8;
    const T *x = static_cast<const T *>(p.x);

    txq::Raw8<T> rv[8];
#pragma unroll
    for (int i = 0; i < 8; i++) rv[i].load(x + (r0 + rg + 16 * i) * K + c);

    /* amaxes, NaN-propagating */
    float ra[8];
    bool nan = false;
#pragma unroll
    for (int b = 0; b < 4; b++) {
        float v0[8], v1[8], cb[8];
        rv[2 * b].get(v0);
        rv[2 * b + 1].get(v1);
#pragma unroll
        for (int j = 0; j < 8; j++) cb[j] = txq::fmax_nan(fabsf(v0[j]), fabsf(v1[j]));
        if (ROW) {
            float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                a0 = txq::fmax_nan(a0, fabsf(v0[j]));
                a1 = txq::fmax_nan(a1, fabsf(v1[j]));
            }
            ra[2 * b] = a0;
            ra[2 * b + 1] = a1;
            nan |= a0 != a0 || a1 != a1;
        }
        if (COL) {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if (!ROW) nan |= cb[j] != cb[j];
                cb[j] = txq::fmax_nan(cb[j], __shfl_xor_sync(0xffffffffu, cb[j], 16));
            }
            if (lane < 16) {
                float4 *d = reinterpret_cast<float4 *>(&part[warp][b][l16 * 8]);
                d[0] = make_float4(cb[0], cb[1], cb[2], cb[3]);
                d[1] = make_float4(cb[4], cb[5], cb[6], cb[7]);
            }
        }
    }
    if (__syncthreads_or(nan)) {
        bt_tile_careful<T, ROW, COL>(p, (unsigned)(r0 / WT_R) + (unsigned)(warp >> 1),
                                     c0 + (size_t)(warp & 1) * WT_C, lane);
        return;
    }

    if (COL) {
        /* the tile's 4 x 128 column scales, two per thread */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int e = tid + h * BT_NT, b = e >> 7, col = e & (BT - 1);
            float a = part[0][b][col];
#pragma unroll
            for (int w = 1; w < BT_NT / 32; w++) a = fmaxf(a, part[w][b][col]);
            const float m = txq::e8m0_rcp_fin(txq::e8m0_up_fin(a * rcp));
            cmul[b][col] = m;
            const size_t rb32 = r0 / 32 + (size_t)b, cc = c0 + (size_t)col;
            p.col_scales[SWZ ? txq::swizzle128x4(cc, rb32, p.col_pad_cols) : rb32 * p.col_ld + cc] =
                (uint8_t)e8m0_of_rcp(m);
        }
        __syncthreads();
    }
    /* addresses as a first one plus a step (rows of a thread are 16
     * apart), which keeps the address registers few */
    const size_t rfirst = r0 + rg, dstep = 16 * K;
    uint8_t *rd = ROW ? p.row_data + rfirst * K + c : NULL;
    uint8_t *cd = COL ? p.col_data + rfirst * K + c : NULL;
    uint8_t *rs = ROW ? p.row_scales + scale_off(SWZ, rfirst, c / 32, p.row_ld, p.row_pad_cols) : NULL;
    /* swizzled: row r0 + rg + 16 i sits (i & 1) * 256 + (i >> 1) * 4 bytes
     * past row r0 + rg inside the 128-row tile (r0 % 128 == 0) */
    const size_t sstep = 16 * p.row_ld;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float v[8];
        opaque(rv[i]).get(v); /* unpack again rather than keep 64 floats live */
        if (ROW) {
            float a = ra[i];
            a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
            a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
            const float m = txq::e8m0_rcp_fin(txq::e8m0_up_fin(a * rcp));
            uint2 q;
            q.x = txq::quant_fp8x4_fast(E5M2, v, m);
            q.y = txq::quant_fp8x4_fast(E5M2, v + 4, m);
            *reinterpret_cast<uint2 *>(rd + i * dstep) = q;
            if ((l16 & 3) == 0)
                rs[SWZ ? (size_t)((i & 1) * 256 + (i >> 1) * 4) : i * sstep] = (uint8_t)e8m0_of_rcp(m);
        }
        if (COL) {
            const float4 *q4 = reinterpret_cast<const float4 *>(&cmul[i >> 1][l16 * 8]);
            const float4 m0 = q4[0], m1 = q4[1];
            const float cm[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
            uint2 q;
            q.x = txq::quant_fp8x4_v_fast(E5M2, v, cm);
            q.y = txq::quant_fp8x4_v_fast(E5M2, v + 4, cm + 4);
            *reinterpret_cast<uint2 *>(cd + i * dstep) = q;
        }
    }
}

template <typename T, bool ROW, bool COL>
cudaError_t launch_bt(const Params &p, cudaStream_t s)
{
    const size_t tiles = (p.rows / BT) * (p.cols / BT);
    Params q = p;
    q.ncb = p.cols / BT; /* 128-column strips */
    mxfp8_bt_kernel<T, ROW, COL><<<(unsigned)tiles, BT_NT, 0, s>>>(q);
    return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch(const Params &p, bool row, bool col, bool two_d, cudaStream_t s)
{
    if (!two_d && p.rows % BT == 0 && p.cols % BT == 0) {
        if (row && col) return launch_bt<T, true, true>(p, s);
        if (row) return launch_bt<T, true, false>(p, s);
        return launch_bt<T, false, true>(p, s);
    }
    if (two_d) {
        if (row && col) return launch_wt(mxfp8_wt_kernel<T, true, true, true>, p, s);
        if (row) return launch_wt(mxfp8_wt_kernel<T, true, false, true>, p, s);
        return launch_wt(mxfp8_wt_kernel<T, false, true, true>, p, s);
    }
    if (row && col) return launch_wt(mxfp8_wt_kernel<T, true, true, false>, p, s);
    if (row) return launch_wt(mxfp8_wt_kernel<T, true, false, false>, p, s);
    return launch_wt(mxfp8_wt_kernel<T, false, true, false>, p, s);
}

/* Whether the kernel writes every byte of a scale buffer (no padding, no
 * gaps between compact rows, nothing beyond): then it need not be zeroed. */
bool scales_dense(bool swz, size_t srows, size_t scols, size_t ld, size_t bytes, size_t row_mult,
                  size_t col_mult)
{
    if (bytes != srows * scols) return false;
    if (swz) return srows % row_mult == 0 && scols % col_mult == 0;
    return ld == scols;
}

} /* namespace */

extern "C" teexec_status *tx_cuda_mxfp8_quantize(const tx_cuda_mxfp8_args *a, void *stream)
{
    static const char *const what = "tx_cuda_mxfp8_quantize";
    if (!a || !a->x)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no input", what);
    if (a->x_dtype != TEEXEC_DTYPE_BFLOAT16 && a->x_dtype != TEEXEC_DTYPE_FLOAT)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: input dtype %d is not bf16 or fp32", what,
                        (int)a->x_dtype);
    if (a->fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && a->fmt != TEEXEC_DTYPE_FLOAT8E5M2)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: format %d is not E4M3FN or E5M2", what,
                        (int)a->fmt);
    if (a->rows % 32 || a->cols % 32)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: shape [%zu, %zu] is not a multiple of 32 in both dims", what,
                        a->rows, a->cols);
    const bool row = a->row_data != NULL, col = a->col_data != NULL;
    if ((row && !a->row_scales) || (col && !a->col_scales))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: data without a scale buffer", what);
    if (((uintptr_t)a->x | (uintptr_t)a->row_data | (uintptr_t)a->col_data) % 16)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: buffers must be 16-byte aligned", what);
    if (!row && !col) return NULL;
    if (a->rows == 0 || a->cols == 0) return NULL;

    Params p;
    p.x = a->x;
    p.rows = a->rows;
    p.cols = a->cols;
    p.ncb = (a->cols + WT_C - 1) / WT_C; /* 64-column strips */
    p.row_data = a->row_data;
    p.row_scales = a->row_scales;
    p.row_ld = a->row_scale_ld;
    p.row_pad_cols = (a->cols / 32 + 3) / 4 * 4;
    p.col_data = a->col_data;
    p.col_scales = a->col_scales;
    p.col_ld = a->col_scale_ld;
    p.col_pad_cols = (a->rows / 32 + 3) / 4 * 4;
    if (!a->swizzled && ((row && a->row_scale_ld < a->cols / 32) || (col && a->col_scale_ld < a->cols)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: compact scale leading dimension too small",
                        what);

    if ((a->rows / WT_R) * p.ncb > 0x7fffffffu)
        return tx_error(TEEXEC_ERR_LIMIT, "%s: tensor [%zu, %zu] too large for one launch", what,
                        a->rows, a->cols);

    cudaStream_t s = (cudaStream_t)stream;
    /* zero only where the kernel leaves bytes unwritten (padding): for a
     * 256 MiB input this saves 8 MiB of writes and two launches */
    const bool swz = a->swizzled != 0;
    if (row && !scales_dense(swz, a->rows, a->cols / 32, a->row_scale_ld, a->row_scale_bytes, 128, 4))
        TX_CUDA_TRY(cudaMemsetAsync(a->row_scales, 0, a->row_scale_bytes, s), what);
    if (col && !scales_dense(swz, a->rows / 32, a->cols, a->col_scale_ld, a->col_scale_bytes, 4, 128))
        TX_CUDA_TRY(cudaMemsetAsync(a->col_scales, 0, a->col_scale_bytes, s), what);
    p.e5m2 = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    p.swz = a->swizzled != 0;
    if (a->x_dtype == TEEXEC_DTYPE_BFLOAT16)
        TX_CUDA_TRY(dispatch<__nv_bfloat16>(p, row, col, a->two_d != 0, s), "mxfp8_kernel");
    else
        TX_CUDA_TRY(dispatch<float>(p, row, col, a->two_d != 0, s), "mxfp8_kernel");
    return NULL;
}
