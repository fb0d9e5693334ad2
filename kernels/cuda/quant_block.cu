/* quant_block.cu - FP8 block-scaling quantizer (1x128 / 128x128). See
 * quant_block.h; the tile walk and the transposed store are shared with
 * quant_fp8.cu (fp8_tile.cuh).
 *
 * A 256-thread block owns a 128 x 128 tile; thread (rg, l16) = (tid / 16,
 * tid % 16) holds rows rg + 16 i (i < 8) x columns 8 l16 .. 8 l16 + 7.
 *   1-D rowwise: a row's 1x128 amax is 16 lanes of one half-warp (shuffles).
 *   1-D columnwise: a column's 128x1 amax is 8 partial maxima per warp (two
 *     row groups by one shuffle), then 8 warps through shared memory. Every
 *     element is converted twice, with its row's and its column's scale;
 *     the columnwise codes go through the byte tile.
 *   2-D: one amax per tile, one conversion, the same bytes in both usages.
 * The amaxes are reduced NaN-propagating (one instruction per element);
 * a tile where any is NaN is redone by block_tile_careful, which ignores
 * NaN in the amax and gives NaN codes the input's sign, as the CPU does
 * (kernels/cpu/quant_block.c). */
#include "kernels/cuda/quant_block.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8_tile.cuh"

namespace {

using txq::FT_C;
using txq::FT_NT;
using txq::FT_R;
using txq::ft_word;

__device__ __forceinline__ float block_scale(const txq::Fp8TileParams &p, float amax)
{
    return txq::scale_from_amax(amax, p.e5m2 ? 57344.0f : 448.0f, p.eps, p.inf_value, p.pow2);
}

/* The tile of a block that saw a NaN, the plain way: thread t < 128 owns
 * tile row t, thread 128 + t tile column t (strided reads: slow, and only
 * ever run on tiles with NaN). Not inlined, so the fast path keeps its
 * registers; the parameters by value, because taking the kernel
 * parameter's address made every thread copy it to local memory (112
 * bytes) at the start of every tile. */
template <typename T>
__device__ __noinline__ void block_tile_careful(const txq::Fp8TileParams p, bool two_d, bool row,
                                                bool col, size_t mb, size_t kb)
{
    __shared__ float tile_part[FT_R];
    const bool E5M2 = p.e5m2 != 0;
    const T *x = static_cast<const T *>(p.x);
    const size_t M = p.rows, K = p.cols, r0 = mb * FT_R, c0 = kb * FT_C;
    const int tid = threadIdx.x, t = tid & (FT_R - 1);
    const bool is_row = tid < FT_R;
    const size_t nr = M - r0 < (size_t)FT_R ? M - r0 : (size_t)FT_R;
    const size_t nc = K - c0 < (size_t)FT_C ? K - c0 : (size_t)FT_C;

    /* amax of this thread's row (2-D: folded into the tile's) or column */
    float a = 0.0f;
    if (is_row || !two_d) {
        if (is_row && (size_t)t < nr)
            for (size_t c = 0; c < nc; c++) a = fmaxf(a, fabsf(txq::to_f32(x[(r0 + t) * K + c0 + c])));
        if (!is_row && (size_t)t < nc)
            for (size_t r = 0; r < nr; r++) a = fmaxf(a, fabsf(txq::to_f32(x[(r0 + r) * K + c0 + t])));
    }
    if (two_d) {
        if (is_row) tile_part[t] = a;
        __syncthreads();
        a = 0.0f;
        for (int i = 0; i < FT_R; i++) a = fmaxf(a, tile_part[i]);
    }
    const float s = block_scale(p, a);

    if (is_row && row && (size_t)t < nr) {
        const size_t r = r0 + t;
        if (!two_d) p.row_scale_inv[kb * p.row_ld + r] = __frcp_rn(s);
        for (size_t c = 0; c < nc; c += 4) {
            float v[4];
            for (int j = 0; j < 4; j++) v[j] = txq::to_f32(x[r * K + c0 + c + j]);
            *reinterpret_cast<uint32_t *>(p.row_data + r * K + c0 + c) = txq::quant_fp8x4(E5M2, v, s);
        }
    }
    if (!is_row && col && (size_t)t < nc) {
        const size_t cc = c0 + t;
        if (!two_d) p.col_scale_inv[mb * p.col_ld + cc] = __frcp_rn(s);
        for (size_t r = 0; r < nr; r += 4) {
            float v[4];
            for (int j = 0; j < 4; j++) v[j] = txq::to_f32(x[(r0 + r + j) * K + cc]);
            *reinterpret_cast<uint32_t *>(p.col_data + cc * M + r0 + r) = txq::quant_fp8x4(E5M2, v, s);
        }
    }
    if (two_d && tid == 0) {
        if (row) p.row_scale_inv[mb * p.row_ld + kb] = __frcp_rn(s);
        if (col) p.col_scale_inv[kb * p.col_ld + mb] = __frcp_rn(s);
    }
}

template <typename T, bool TWO_D, bool ROW, bool COL>
__global__ void __launch_bounds__(FT_NT) fp8_block_kernel(txq::Fp8TileParams p)
{
    __shared__ __align__(16) uint32_t qs[COL ? txq::FT_WORDS : 1];
    /* 1-D columnwise: per-warp column maxima; 2-D: per-warp tile maxima */
    __shared__ __align__(16) float part[TWO_D ? 1 : (COL ? FT_NT / 32 : 1)][TWO_D ? FT_NT / 32 : FT_C];

    const bool E5M2 = p.e5m2 != 0;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l16 = tid & 15, rg = tid >> 4;
    const size_t mb = blockIdx.x / p.ncb, kb = blockIdx.x % p.ncb;
    const size_t r0 = mb * FT_R, c0 = kb * FT_C;
    const size_t M = p.rows, K = p.cols;
    const size_t c = c0 + (size_t)l16 * 8;
    const bool cin = c < K;

    txq::Raw8<T> rv[8];
    txq::ft_load_rows(p, r0, c, rg, rv);

    /* amaxes, NaN-propagating: rows (1-D rowwise, or all of them for 2-D)
     * and this thread's 8 columns over its 8 rows (1-D columnwise) */
    float ra[8], ca[8];
    bool nan = false;
#pragma unroll
    for (int j = 0; j < 8; j++) ca[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        float v[8];
        rv[i].get(v);
        ra[i] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float av = fabsf(v[j]);
            if (ROW || TWO_D) ra[i] = txq::fmax_nan(ra[i], av);
            if (COL && !TWO_D) ca[j] = txq::fmax_nan(ca[j], av);
        }
        if (ROW || TWO_D) nan |= ra[i] != ra[i];
    }
    if (COL && !TWO_D) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            nan |= ca[j] != ca[j];
            ca[j] = txq::fmax_nan(ca[j], __shfl_xor_sync(0xffffffffu, ca[j], 16));
        }
        if (lane < 16) {
            float4 *d = reinterpret_cast<float4 *>(&part[warp][l16 * 8]);
            d[0] = make_float4(ca[0], ca[1], ca[2], ca[3]);
            d[1] = make_float4(ca[4], ca[5], ca[6], ca[7]);
        }
    }
    float t2 = 0.0f;
    if (TWO_D) {
#pragma unroll
        for (int i = 0; i < 8; i++) t2 = txq::fmax_nan(t2, ra[i]);
        t2 = txq::warp_max_xor(t2, 32); /* fmaxf: a NaN tile goes careful anyway */
        if (lane == 0) part[0][warp] = t2;
    }
    if (__syncthreads_or(nan)) {
        block_tile_careful<T>(p, TWO_D, ROW, COL, mb, kb);
        return;
    }

    if (TWO_D) {
        float a = part[0][0];
#pragma unroll
        for (int w = 1; w < FT_NT / 32; w++) a = fmaxf(a, part[0][w]);
        const float s = block_scale(p, a);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int rl = rg + 16 * i;
            const size_t r = r0 + rl;
            float v[8];
            rv[i].get(v);
            const uint2 q = txq::quant_fp8x8_fast(E5M2, v, s);
            if (ROW && cin && r < M) *reinterpret_cast<uint2 *>(p.row_data + r * K + c) = q;
            if (COL) *reinterpret_cast<uint2 *>(&qs[ft_word(rl, 2 * l16)]) = q;
        }
        if (tid == 0) {
            if (ROW) p.row_scale_inv[mb * p.row_ld + kb] = __frcp_rn(s);
            if (COL) p.col_scale_inv[kb * p.col_ld + mb] = __frcp_rn(s);
        }
    } else {
        /* column scales: thread t < 128 reduces column t's 8 warp maxima,
         * stores its scale_inv (coalesced) and shares the scale */
        __shared__ __align__(16) float col_scale[COL ? FT_C : 1];
        float cs[8];
        if (COL) {
            if (tid < FT_C) {
                float a = part[0][tid];
#pragma unroll
                for (int w = 1; w < FT_NT / 32; w++) a = fmaxf(a, part[w][tid]);
                const float sc = block_scale(p, a);
                col_scale[tid] = sc;
                if (c0 + tid < K) p.col_scale_inv[mb * p.col_ld + c0 + tid] = __frcp_rn(sc);
            }
            __syncthreads();
            const float4 *q = reinterpret_cast<const float4 *>(&col_scale[l16 * 8]);
            const float4 a = q[0], b = q[1];
            cs[0] = a.x; cs[1] = a.y; cs[2] = a.z; cs[3] = a.w;
            cs[4] = b.x; cs[5] = b.y; cs[6] = b.z; cs[7] = b.w;
        }
        /* row scales: the 16 lanes of a half-warp share its 8 rows; lane
         * l16 < 8 computes row l16's scale (one division per lane instead
         * of eight) and hands it round */
        float rs_mine = 1.0f;
        if (ROW) {
            const int mine = l16 & 7;
            float a = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float ai = txq::warp_max_xor(ra[i], 16);
                if (i == mine) a = ai;
            }
            rs_mine = block_scale(p, a);
            const size_t r = r0 + rg + 16 * mine;
            if (l16 < 8 && r < M) p.row_scale_inv[kb * p.row_ld + r] = __frcp_rn(rs_mine);
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int rl = rg + 16 * i;
            const size_t r = r0 + rl;
            float v[8];
            rv[i].get(v);
            if (ROW) {
                const float s = __shfl_sync(0xffffffffu, rs_mine, (lane & 16) | i);
                if (cin && r < M)
                    *reinterpret_cast<uint2 *>(p.row_data + r * K + c) =
                        txq::quant_fp8x8_fast(E5M2, v, s);
            }
            if (COL) {
                uint2 q;
                q.x = txq::quant_fp8x4_v_fast(E5M2, v, cs);
                q.y = txq::quant_fp8x4_v_fast(E5M2, v + 4, cs + 4);
                *reinterpret_cast<uint2 *>(&qs[ft_word(rl, 2 * l16)]) = q;
            }
        }
    }
    if (!COL) return;
    __syncthreads();
    txq::ft_store_transposed(qs, p.col_data, M, K, r0, c0, tid);
}

template <typename T, bool TWO_D>
void launch_usage(const txq::Fp8TileParams &p, unsigned blocks, cudaStream_t s)
{
    const bool row = p.row_data != NULL, col = p.col_data != NULL;
    if (row && col) fp8_block_kernel<T, TWO_D, true, true><<<blocks, FT_NT, 0, s>>>(p);
    else if (row) fp8_block_kernel<T, TWO_D, true, false><<<blocks, FT_NT, 0, s>>>(p);
    else fp8_block_kernel<T, TWO_D, false, true><<<blocks, FT_NT, 0, s>>>(p);
}

/* Whether the kernel writes every float of a scale buffer: `outer` slabs of
 * `inner` written entries at leading dimension ld, `count` floats in all. */
bool scales_cover(size_t outer, size_t inner, size_t ld, size_t count)
{
    return ld == inner && count == outer * ld;
}

} /* namespace */

extern "C" teexec_status *tx_cuda_block_quantize(const tx_cuda_block_args *a, void *stream)
{
    static const char *const what = "tx_cuda_block_quantize";
    if (!a || !a->x) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no input", what);
    if (a->x_dtype != TEEXEC_DTYPE_BFLOAT16 && a->x_dtype != TEEXEC_DTYPE_FLOAT)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: input dtype %d is not bf16 or fp32", what,
                        (int)a->x_dtype);
    if (a->fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && a->fmt != TEEXEC_DTYPE_FLOAT8E5M2)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: format %d is not E4M3FN or E5M2", what,
                        (int)a->fmt);
    if (a->cols % 8 || (a->col_data && a->rows % 16))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: shape [%zu, %zu] needs cols %% 8 == 0 (and rows %% 16 == 0 for the "
                        "transposed copy)", what, a->rows, a->cols);
    if (((uintptr_t)a->x | (uintptr_t)a->row_data | (uintptr_t)a->col_data) % 16)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: buffers must be 16-byte aligned", what);
    if ((a->row_data && !a->row_scale_inv) || (a->col_data && !a->col_scale_inv))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: data without a scale buffer", what);
    if (a->rows == 0 || a->cols == 0 || (!a->row_data && !a->col_data)) return NULL;

    const size_t nrb = (a->rows + FT_R - 1) / FT_R, ncb = (a->cols + FT_C - 1) / FT_C;
    /* The header promises zeros wherever no scale is stored; zero only
     * when the kernel leaves some float unwritten (padding, a larger
     * buffer): for whole tiles that saves a launch and the writes. */
    const bool row_full = a->two_d ? scales_cover(nrb, ncb, a->row_ld, a->row_scale_count)
                                   : scales_cover(ncb, a->rows, a->row_ld, a->row_scale_count);
    const bool col_full = a->two_d ? scales_cover(ncb, nrb, a->col_ld, a->col_scale_count)
                                   : scales_cover(nrb, a->cols, a->col_ld, a->col_scale_count);
    cudaStream_t s = (cudaStream_t)stream;
    if (a->row_data && !row_full)
        TX_CUDA_TRY(cudaMemsetAsync(a->row_scale_inv, 0, a->row_scale_count * sizeof(float), s), what);
    if (a->col_data && !col_full)
        TX_CUDA_TRY(cudaMemsetAsync(a->col_scale_inv, 0, a->col_scale_count * sizeof(float), s), what);

    txq::Fp8TileParams p = {};
    p.x = a->x;
    p.rows = a->rows;
    p.cols = a->cols;
    p.ncb = ncb;
    p.row_data = a->row_data;
    p.col_data = a->col_data;
    p.row_scale_inv = a->row_scale_inv;
    p.col_scale_inv = a->col_scale_inv;
    p.row_ld = a->row_ld;
    p.col_ld = a->col_ld;
    p.eps = a->amax_eps;
    p.inf_value = a->x_dtype == TEEXEC_DTYPE_BFLOAT16 ? 3.38953139e38f : FLT_MAX; /* bf16 max = 0x7f7f0000 */
    p.pow2 = a->pow2;
    p.e5m2 = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    const size_t blocks = nrb * ncb;
    if (blocks > 0x7fffffffu)
        return tx_error(TEEXEC_ERR_LIMIT, "%s: tensor too large for one launch", what);
    const bool bf16 = a->x_dtype == TEEXEC_DTYPE_BFLOAT16;
    if (a->two_d) {
        if (bf16) launch_usage<__nv_bfloat16, true>(p, (unsigned)blocks, s);
        else launch_usage<float, true>(p, (unsigned)blocks, s);
    } else {
        if (bf16) launch_usage<__nv_bfloat16, false>(p, (unsigned)blocks, s);
        else launch_usage<float, false>(p, (unsigned)blocks, s);
    }
    TX_CUDA_LAUNCHED(a->two_d ? "fp8_block_kernel (128x128)" : "fp8_block_kernel (1x128)");
    return NULL;
}
