/* handoff_block.cu - norm / activation forward and Bias backward that also
 * write the next Linear's fp8-block (1x128 / 128x1) operand
 * (handoff_block.h). */
#include "kernels/cuda/colsum_parts.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/norm_row.cuh"
#include "kernels/cuda/fp8_tile.cuh"
#include "kernels/cuda/quant_common.cuh"

extern "C" {
#include "kernels/cuda/handoff_block.h"
}

#include <float.h>
#include <math.h>

namespace {

constexpr int kNormThreads = 256;
constexpr int kTile = 128;   /* tile rows and columns; also the block length */
constexpr int kTileThreads = 256;
constexpr size_t kChunk = 64; /* tx_cuda_bias_grad's row chunk */

/* Where the operand goes and how its scales are made. */
struct BQ {
    uint8_t *row_data, *col_data;
    float *row_si, *col_si;
    size_t row_ld, col_ld;
    float eps, inf_value;
    int pow2, e5m2;
};

__device__ __forceinline__ float fp8_max_of(int e5m2) { return e5m2 ? 57344.0f : 448.0f; }

__device__ __forceinline__ float block_scale(const BQ &q, float amax)
{
    return txq::scale_from_amax(amax, fp8_max_of(q.e5m2), q.eps, q.inf_value, q.pow2);
}

/* Rounds 8 values to T in place (so later uses see them as stored) and
 * stores them. */
__device__ __forceinline__ void round_store8(__nv_bfloat16 *p, float v[8])
{
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const __nv_bfloat16 lo = __float2bfloat16_rn(v[2 * j]), hi = __float2bfloat16_rn(v[2 * j + 1]);
        v[2 * j] = __bfloat162float(lo);
        v[2 * j + 1] = __bfloat162float(hi);
        w[j] = (uint32_t)__bfloat16_as_ushort(lo) | ((uint32_t)__bfloat16_as_ushort(hi) << 16);
    }
    *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ void round_store8(float *p, float v[8])
{
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4 *>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}
/* 8 values as stored, into a shared-memory row (16 or 32 bytes). */
__device__ __forceinline__ void stage8(unsigned short *d, const float v[8])
{
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        w[j] = (__float_as_uint(v[2 * j]) >> 16) | (__float_as_uint(v[2 * j + 1]) & 0xffff0000u);
    *reinterpret_cast<uint4 *>(d) = make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ void stage8(float *d, const float v[8])
{
    *reinterpret_cast<float4 *>(d) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4 *>(d + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

__device__ __forceinline__ void put_fp8x8(uint8_t *p, int e5m2, const float v[8], float s)
{
    uint2 w;
    w.x = txq::quant_fp8x4(e5m2 != 0, v, s);
    w.y = txq::quant_fp8x4(e5m2 != 0, v + 4, s);
    *reinterpret_cast<uint2 *>(p) = w;
}

/* The quantizer's memset leaves zeros in the padding columns of a scale
 * array; the one thread that owns the last real entry of a scale row
 * writes them. */
__device__ __forceinline__ void zero_pad(float *row, size_t from, size_t ld)
{
    for (size_t i = from; i < ld; i++) row[i] = 0.0f;
}

/* act.cu's forward formulas (te_activation.c's, in float). */
__device__ __forceinline__ float act_fwd(int act, float x)
{
    switch (act) {
    case TX_CUDA_ACT_GELU_TANH: {
        const float t = tanhf(0.79788456f * x * (1.0f + 0.044715f * x * x));
        return 0.5f * x * (1.0f + t);
    }
    case TX_CUDA_ACT_GELU_ERF: return x * (0.5f * (1.0f + erff(x * 0.70710678118654752440f)));
    case TX_CUDA_ACT_RELU: return x > 0.0f ? x : 0.0f;
    default: {
        const float s = 1.0f / (1.0f + expf(-x));
        return x * s;
    }
    }
}

/* ---- norm: one block per row, the row in registers ---------------------- */

/* norm.cu's statistics (two passes in FP32, rs = 1 / sqrt(var + eps)).
 * Thread t holds vectors c = t + 256 k (elements 8c .. 8c+7), so the 16
 * lanes of a half-warp hold one 128-element block for each k: the block
 * amax is a 16-lane shuffle, every lane taking part (zeros past the row). */
template <typename TX, typename TY, int NV, bool ROW>
__global__ void __launch_bounds__(kNormThreads) norm_block_kernel(tx_cuda_norm_fwd a, BQ q)
{
    __shared__ float red[32];
    const size_t r = blockIdx.x, h = a.h, base = r * h, nvec = h / 8;
    const TX *x = static_cast<const TX *>(a.x);
    TY *y = static_cast<TY *>(a.y);
    float v[NV][8];
    float mu, rs;
    txn::row_stats<TX, NV, kNormThreads>(x, base, nvec, h, a.rms, a.eps, v, red, mu, rs);
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const size_t c = threadIdx.x + (size_t)k * kNormThreads;
        const bool in = c < nvec;
        float o[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (in) {
            txn::apply8(a, c, v[k], mu, rs, o);
            round_store8(y + base + c * 8, o);
        }
        if (ROW && (size_t)k * kNormThreads < nvec) { /* uniform over the block */
            float am = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) am = fmaxf(am, fabsf(o[j]));
            am = txq::warp_max_xor(am, 16);
            const float sc = block_scale(q, am);
            if (in) {
                put_fp8x8(q.row_data + base + c * 8, q.e5m2, o, sc);
                if ((c & 15) == 0) q.row_si[(c / 16) * q.row_ld + r] = __frcp_rn(sc);
            }
        }
    }
    if (threadIdx.x == 0) {
        if (a.mu && !a.rms) a.mu[r] = mu;
        if (a.rsigma) a.rsigma[r] = rs;
        if (ROW && r + 1 == gridDim.x)
            for (size_t kb = 0; kb * kTile < h; kb++) zero_pad(q.row_si + kb * q.row_ld, r + 1, q.row_ld);
    }
}

/* ---- activation / Bias backward: 128 x 128 tiles ------------------------- */

struct TileP {
    const void *x;   /* act input or dy */
    void *y;         /* act output, or the Bias's dx (NULL: no copy) */
    size_t rows, cols, ncb;
    int act;
    float *ws;       /* Bias: 64-row chunk partial sums, or NULL */
    BQ q;
};

/* Block (mb, kb) owns rows r0 .. r0+127, columns c0 .. c0+127. Row sweep:
 * thread (rg, l16) holds rows rg + 16 i (i < 8), columns c0 + 8 l16 ..
 * +7, so a row's 128-element block is one half-warp (16-lane max); the
 * values as stored are staged in shared memory. Column sweep (as
 * fp8_tile.cuh's): thread (h, cl) owns column c0+cl, rows 64 h .. 64 h+63
 * = one of tx_cuda_bias_grad's 64-row chunks, summed in row order, and 64
 * contiguous bytes of the transposed copy. Elements outside the tensor are
 * zeros, which change neither a max nor a sum. */
template <typename TI, typename TO, bool BIAS, bool ROW, bool COL>
__global__ void __launch_bounds__(kTileThreads) tile_kernel(TileP p)
{
    typedef txq::StageT<TO> St;
    typedef typename St::type S;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    S(*xs)[kTile] = reinterpret_cast<S(*)[kTile]>(smem_raw);
    __shared__ float colpart[2][kTile];

    const BQ &q = p.q;
    const int tid = threadIdx.x, l16 = tid & 15, rg = tid >> 4;
    const size_t mb = blockIdx.x / p.ncb, kb = blockIdx.x % p.ncb;
    const size_t r0 = mb * kTile, c0 = kb * kTile, M = p.rows, K = p.cols;
    const size_t c = c0 + (size_t)l16 * 8;
    const bool cin = c < K;
    const bool stage = COL || (BIAS && p.ws);
    const TI *x = static_cast<const TI *>(p.x);
    TO *y = static_cast<TO *>(p.y);

    txq::Raw8<TI> rv[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const size_t r = r0 + rg + 16 * i;
        if (cin && r < M) rv[i].load(x + r * K + c);
        else rv[i].zero();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const size_t r = r0 + rg + 16 * i;
        const bool in = cin && r < M;
        float v[8];
        rv[i].get(v);
        if (!BIAS) {
#pragma unroll
            for (int j = 0; j < 8; j++) v[j] = in ? act_fwd(p.act, v[j]) : 0.0f;
            if (in) round_store8(y + r * K + c, v);
        } else if (y && in) {
            rv[i].stage(y + r * K + c); /* dx = dy, the same bits */
        }
        if (stage && cin) stage8(&xs[rg + 16 * i][l16 * 8], v); /* v exact in TO */
        if (ROW) {
            float am = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) am = fmaxf(am, fabsf(v[j]));
            am = txq::warp_max_xor(am, 16);
            const float sc = block_scale(q, am);
            if (r < M && l16 == 0) {
                q.row_si[kb * q.row_ld + r] = __frcp_rn(sc);
                if (r + 1 == M) zero_pad(q.row_si + kb * q.row_ld, M, q.row_ld);
            }
            if (in) put_fp8x8(q.row_data + r * K + c, q.e5m2, v, sc);
        }
    }
    if (!stage) return;
    __syncthreads();

    const int cl = tid & (kTile - 1), h = tid >> 7;
    const size_t cc = c0 + cl;
    float am = 0.0f, sum = 0.0f;
#pragma unroll 8
    for (int r = 0; r < 64; r++) {
        const float f = St::unpack(xs[h * 64 + r][cl]);
        am = fmaxf(am, fabsf(f));
        sum += f;
    }
    if (BIAS && p.ws && cc < K && r0 + (size_t)h * 64 < M) p.ws[(mb * 2 + h) * K + cc] = sum;
    if (!COL) return;
    colpart[h][cl] = am;
    __syncthreads();
    const float sc = block_scale(q, fmaxf(colpart[0][cl], colpart[1][cl]));
    if (cc >= K) return;
    if (h == 0) {
        q.col_si[mb * q.col_ld + cc] = __frcp_rn(sc);
        if (cc + 1 == K) zero_pad(q.col_si + mb * q.col_ld, K, q.col_ld);
    }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int rb = h * 64 + k * 16;
        if (r0 + rb >= M) break; /* M % 16 == 0: 16-row chunks are whole */
        uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float f[4];
#pragma unroll
            for (int t = 0; t < 4; t++) f[t] = St::unpack(xs[rb + 4 * j + t][cl]);
            w[j] = txq::quant_fp8x4(q.e5m2 != 0, f, sc);
        }
        *reinterpret_cast<uint4 *>(q.col_data + cc * M + r0 + rb) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

template <typename TI, typename TO, bool BIAS, bool ROW, bool COL>
cudaError_t tile_launch(const TileP &p, unsigned blocks, cudaStream_t s)
{
    const bool stage = COL || (BIAS && p.ws);
    const size_t smem = stage ? sizeof(typename txq::StageT<TO>::type) * kTile * kTile : 0;
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(tile_kernel<TI, TO, BIAS, ROW, COL>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    tile_kernel<TI, TO, BIAS, ROW, COL><<<blocks, kTileThreads, smem, s>>>(p);
    return cudaGetLastError();
}

template <typename TI, typename TO, bool BIAS>
cudaError_t tile_usage(const TileP &p, bool row, bool col, unsigned blocks, cudaStream_t s)
{
    if (row && col) return tile_launch<TI, TO, BIAS, true, true>(p, blocks, s);
    if (row) return tile_launch<TI, TO, BIAS, true, false>(p, blocks, s);
    if (col) return tile_launch<TI, TO, BIAS, false, true>(p, blocks, s);
    return tile_launch<TI, TO, BIAS, false, false>(p, blocks, s);
}

/* ---- host helpers ------------------------------------------------------------ */

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "%s: %s", what, why);
}

bool quant_src(teexec_dtype t) { return t == TEEXEC_DTYPE_BFLOAT16 || t == TEEXEC_DTYPE_FLOAT; }
bool aligned16(const void *p) { return ((uintptr_t)p % 16) == 0; }
size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* Checks the destination for a rows x cols source and makes the device
 * view; `with_col` false drops the columnwise usage (written later). */
teexec_status *bq_of(const tx_cuda_block_args *a, size_t rows, size_t cols, teexec_dtype src,
                     const char *what, BQ *q)
{
    if (!a) return bad(what, "no destination");
    if (a->two_d) return bad(what, "128x128 tiles are a weight format; the hand-off writes 1x128");
    if (a->fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && a->fmt != TEEXEC_DTYPE_FLOAT8E5M2)
        return bad(what, "the format is not E4M3FN or E5M2");
    if ((a->row_data && !a->row_scale_inv) || (a->col_data && !a->col_scale_inv))
        return bad(what, "data without a scale buffer");
    if (!aligned16(a->row_data) || !aligned16(a->col_data))
        return bad(what, "the FP8 data must be 16-byte aligned");
    if (cols % 8 || (a->col_data && rows % 16))
        return bad(what, "cols must be a multiple of 8 (and rows of 16 with the columnwise copy)");
    /* every scale the kernels write, padding included, inside the arrays */
    if (a->row_data && (a->row_ld < rows || a->row_scale_count / a->row_ld < ceil_div(cols, kTile)))
        return bad(what, "the rowwise scale array is smaller than [ceil(cols/128), rows]");
    if (a->col_data && (a->col_ld < cols || a->col_scale_count / a->col_ld < ceil_div(rows, kTile)))
        return bad(what, "the columnwise scale array is smaller than [ceil(rows/128), cols]");
    q->row_data = a->row_data;
    q->col_data = a->col_data;
    q->row_si = a->row_scale_inv;
    q->col_si = a->col_scale_inv;
    q->row_ld = a->row_ld;
    q->col_ld = a->col_ld;
    q->eps = a->amax_eps;
    /* quant_block.cu's value_for_inf: the largest finite source value */
    q->inf_value = src == TEEXEC_DTYPE_BFLOAT16 ? 3.38953139e38f : FLT_MAX;
    q->pow2 = a->pow2;
    q->e5m2 = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    return NULL;
}

/* Scale entries past the rows the kernels write (an array larger than
 * needed) are zeroed as the quantizer would. */
teexec_status *clear_tail(float *scales, size_t count, size_t used, cudaStream_t s, const char *what)
{
    if (!scales || count <= used) return NULL;
    TX_CUDA_TRY(cudaMemsetAsync(scales + used, 0, (count - used) * sizeof(float), s), what);
    return NULL;
}

/* The columnwise copy from the stored output (the split passes). */
teexec_status *col_pass(const tx_cuda_block_args *a, const void *src, teexec_dtype dt, size_t rows,
                        size_t cols, void *stream)
{
    if (!a->col_data) return NULL;
    tx_cuda_block_args c = *a;
    c.x = src;
    c.x_dtype = dt;
    c.rows = rows;
    c.cols = cols;
    c.row_data = NULL;
    c.row_scale_inv = NULL;
    c.row_scale_count = 0;
    return tx_cuda_block_quantize(&c, stream);
}

template <typename TX, typename TY, bool ROW>
void launch_norm(int nv, unsigned grid, const tx_cuda_norm_fwd &a, const BQ &q, cudaStream_t s)
{
    switch (nv) {
    case 1: norm_block_kernel<TX, TY, 1, ROW><<<grid, kNormThreads, 0, s>>>(a, q); break;
    case 2: norm_block_kernel<TX, TY, 2, ROW><<<grid, kNormThreads, 0, s>>>(a, q); break;
    case 4: norm_block_kernel<TX, TY, 4, ROW><<<grid, kNormThreads, 0, s>>>(a, q); break;
    default: norm_block_kernel<TX, TY, 8, ROW><<<grid, kNormThreads, 0, s>>>(a, q); break;
    }
}

template <typename TX, typename TY>
void launch_norm_row(bool row, int nv, unsigned grid, const tx_cuda_norm_fwd &a, const BQ &q,
                     cudaStream_t s)
{
    if (row) launch_norm<TX, TY, true>(nv, grid, a, q, s);
    else launch_norm<TX, TY, false>(nv, grid, a, q, s);
}

} // namespace

extern "C" teexec_status *tx_cuda_handoff_block_norm_forward(const tx_cuda_norm_fwd *a,
                                                             const tx_cuda_block_args *q,
                                                             void *stream)
{
    static const char *const what = "cuda fp8-block hand-off norm";
    if (!a || !a->x || !a->y || !a->gamma || (!a->rms && !a->beta)) return bad(what, "missing tensor");
    if (a->rows == 0 || a->h == 0) return NULL;
    BQ b;
    TX_TRY(bq_of(q, a->rows, a->h, a->y_dtype, what, &b));
    if (a->h % 8 || a->h > TX_HANDOFF_BLOCK_NORM_MAX_H || !aligned16(a->x) || !aligned16(a->y))
        return bad(what, "h must be a multiple of 8 and <= 16384, x and y 16-byte aligned");
    if (!quant_src(a->x_dtype) || !quant_src(a->y_dtype) || !tx_io_dtype_ok(a->w_dtype))
        return bad(what, "x and y must be float32 or bfloat16");
    if (a->rows > 0x7fffffffu) return bad(what, "too many rows for one launch");
    cudaStream_t s = (cudaStream_t)stream;
    const bool row = q->row_data != NULL;
    if (row)
        TX_TRY(clear_tail(q->row_scale_inv, q->row_scale_count,
                          ceil_div(a->h, kTile) * q->row_ld, s, what));
    const unsigned g = (unsigned)a->rows;
    const bool xb = a->x_dtype == TEEXEC_DTYPE_BFLOAT16, yb = a->y_dtype == TEEXEC_DTYPE_BFLOAT16;
    const size_t nvec = a->h / 8;
    const int nv = nvec <= kNormThreads ? 1 : nvec <= 2 * kNormThreads ? 2
                 : nvec <= 4 * kNormThreads ? 4 : 8;
    if (xb && yb) launch_norm_row<__nv_bfloat16, __nv_bfloat16>(row, nv, g, *a, b, s);
    else if (xb) launch_norm_row<__nv_bfloat16, float>(row, nv, g, *a, b, s);
    else if (yb) launch_norm_row<float, __nv_bfloat16>(row, nv, g, *a, b, s);
    else launch_norm_row<float, float>(row, nv, g, *a, b, s);
    TX_CUDA_LAUNCHED("fp8-block hand-off norm kernel");
    return tx_status_prefix(col_pass(q, a->y, a->y_dtype, a->rows, a->h, stream), what);
}

extern "C" teexec_status *tx_cuda_handoff_block_act_forward(tx_cuda_act act, size_t rows,
                                                            size_t cols, const void *x,
                                                            teexec_dtype x_dtype, void *y,
                                                            teexec_dtype y_dtype,
                                                            const tx_cuda_block_args *q,
                                                            tx_handoff_block_mode mode,
                                                            void *stream)
{
    static const char *const what = "cuda fp8-block hand-off activation";
    if (act != TX_CUDA_ACT_GELU_TANH && act != TX_CUDA_ACT_GELU_ERF && act != TX_CUDA_ACT_RELU &&
        act != TX_CUDA_ACT_SILU)
        return bad(what, "only GELU, ReLU and SiLU");
    if (!x || !y) return bad(what, "missing tensor");
    if (rows == 0 || cols == 0) return NULL;
    BQ b;
    TX_TRY(bq_of(q, rows, cols, y_dtype, what, &b));
    if (!aligned16(x) || !aligned16(y)) return bad(what, "x and y must be 16-byte aligned");
    if (!quant_src(x_dtype) || !quant_src(y_dtype)) return bad(what, "x and y must be float32 or bfloat16");
    const size_t ncb = ceil_div(cols, kTile), blocks = ceil_div(rows, kTile) * ncb;
    if (blocks > 0x7fffffffu) return bad(what, "tensor too large for one launch");
    cudaStream_t s = (cudaStream_t)stream;
    const bool split = mode == TX_HANDOFF_BLOCK_SPLIT;
    const bool row = q->row_data != NULL, col = q->col_data != NULL && !split;
    if (row) TX_TRY(clear_tail(q->row_scale_inv, q->row_scale_count, ncb * q->row_ld, s, what));
    if (col)
        TX_TRY(clear_tail(q->col_scale_inv, q->col_scale_count, ceil_div(rows, kTile) * q->col_ld, s,
                          what));
    TileP p = {};
    p.x = x;
    p.y = y;
    p.rows = rows;
    p.cols = cols;
    p.ncb = ncb;
    p.act = (int)act;
    p.q = b;
    const bool xb = x_dtype == TEEXEC_DTYPE_BFLOAT16, yb = y_dtype == TEEXEC_DTYPE_BFLOAT16;
    const unsigned nb = (unsigned)blocks;
    cudaError_t e;
    if (xb && yb) e = tile_usage<__nv_bfloat16, __nv_bfloat16, false>(p, row, col, nb, s);
    else if (xb) e = tile_usage<__nv_bfloat16, float, false>(p, row, col, nb, s);
    else if (yb) e = tile_usage<float, __nv_bfloat16, false>(p, row, col, nb, s);
    else e = tile_usage<float, float, false>(p, row, col, nb, s);
    TX_CUDA_TRY(e, "fp8-block hand-off activation tile kernel");
    if (!split) return NULL;
    return tx_status_prefix(col_pass(q, y, y_dtype, rows, cols, stream), what);
}

extern "C" size_t tx_cuda_handoff_block_bias_workspace_floats(size_t rows, size_t cols)
{
    return ceil_div(rows, kChunk) * cols;
}

extern "C" teexec_status *tx_cuda_handoff_block_bias_backward(const void *dy, teexec_dtype dy_dtype,
                                                              size_t rows, size_t cols, void *dx,
                                                              void *dbias,
                                                              teexec_dtype dbias_dtype,
                                                              float *workspace,
                                                              const tx_cuda_block_args *q,
                                                              void *stream)
{
    static const char *const what = "cuda fp8-block hand-off bias backward";
    if (!dy || (dbias && !workspace)) return bad(what, "missing tensor or workspace");
    if (rows == 0 || cols == 0) return NULL;
    BQ b;
    TX_TRY(bq_of(q, rows, cols, dy_dtype, what, &b));
    if (!aligned16(dy) || !aligned16(dx)) return bad(what, "dy and dx must be 16-byte aligned");
    if (!quant_src(dy_dtype)) return bad(what, "dy must be float32 or bfloat16");
    if (dbias && !tx_io_dtype_ok(dbias_dtype)) return bad(what, "bad dbias dtype");
    const size_t ncb = ceil_div(cols, kTile), blocks = ceil_div(rows, kTile) * ncb;
    if (blocks > 0x7fffffffu) return bad(what, "tensor too large for one launch");
    cudaStream_t s = (cudaStream_t)stream;
    const bool row = q->row_data != NULL, col = q->col_data != NULL;
    if (row) TX_TRY(clear_tail(q->row_scale_inv, q->row_scale_count, ncb * q->row_ld, s, what));
    if (col)
        TX_TRY(clear_tail(q->col_scale_inv, q->col_scale_count, ceil_div(rows, kTile) * q->col_ld, s,
                          what));
    TileP p = {};
    p.x = dy;
    p.y = dx == dy ? NULL : dx;
    p.rows = rows;
    p.cols = cols;
    p.ncb = ncb;
    p.ws = dbias ? workspace : NULL;
    p.q = b;
    const unsigned nb = (unsigned)blocks;
    cudaError_t e = dy_dtype == TEEXEC_DTYPE_BFLOAT16
                        ? tile_usage<__nv_bfloat16, __nv_bfloat16, true>(p, row, col, nb, s)
                        : tile_usage<float, float, true>(p, row, col, nb, s);
    TX_CUDA_TRY(e, "fp8-block hand-off bias tile kernel");
    if (!dbias) return NULL;
    tx_colsum_outs outs = {{dbias, NULL}};
    tx_colsum_parts_final<<<dim3((unsigned)ceil_div(cols, 32), 1), dim3(32, 8), 0, s>>>(
        workspace, ceil_div(rows, kChunk), cols, outs, (int)dbias_dtype);
    TX_CUDA_LAUNCHED("fp8-block hand-off bias grad final");
    return NULL;
}
