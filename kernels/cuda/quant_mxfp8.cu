/* quant_mxfp8.cu - MXFP8 quantizer (rowwise 1x32, columnwise 32x1, 2-D
 * 32x32), one pass over the input. See quant_mxfp8.h.
 *
 * A tile is 32 rows x 256 columns; 256 threads. Each thread
 * loads 8 consecutive elements of 4 rows with 16-byte loads: four lanes
 * hold one rowwise 32-block, so its amax is a 4-lane shuffle and the
 * rowwise bytes go straight out. 1-D columnwise: the 32 rows of a column
 * are spread over the 8 warps, so each thread max-reduces its 4 rows per
 * column, the 8 partials meet in shared memory (one thread per column makes
 * the E8M0 scale), and each thread quantizes the elements still in its
 * registers with the 8 column multipliers: no staged copy of the tile and
 * no second pass over it. 2-D: the tile is staged in shared memory, one
 * thread per column finds each 32x32 block's amax (warp shuffle) and
 * quantizes once; those bytes are gathered in shared memory again so that
 * both usages go out as 16-byte stores. */
#include "kernels/cuda/quant_mxfp8.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant_common.cuh"

namespace {

constexpr int TR = 32;   /* tile rows = block length */
constexpr int TC = 256;  /* tile columns */
constexpr int NT = 256;  /* threads */

struct Params {
    const void *x;
    size_t rows, cols, ncb;
    uint8_t *row_data, *row_scales;
    size_t row_ld, row_pad_cols; /* compact ld / swizzled padded columns */
    uint8_t *col_data, *col_scales;
    size_t col_ld, col_pad_cols;
    int e5m2, swz; /* runtime: uniform branches, half the instantiations */
};

template <typename T> struct Stage;
template <> struct Stage<__nv_bfloat16> {
    typedef unsigned short type;
    static __device__ __forceinline__ float unpack(type h) { return __uint_as_float((uint32_t)h << 16); }
};
template <> struct Stage<float> {
    typedef float type;
    static __device__ __forceinline__ float unpack(type h) { return h; }
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

/* The raw words again, through an opaque move: otherwise the compiler
 * keeps the unpacked floats of the row sweep alive across the barriers of
 * the column step (32 more registers, half the occupancy) instead of
 * unpacking a second time, which costs one instruction per element. */
template <typename R>
__device__ __forceinline__ R opaque(const R &in)
{
    R r = in;
    uint32_t *w = reinterpret_cast<uint32_t *>(&r);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(R) / 4); i++) asm volatile("mov.b32 %0, %0;" : "+r"(w[i]));
    return r;
}

/* Persistent: each block walks tiles blockIdx.x, +gridDim.x, ... and loads
 * the next tile's rows into registers before working on the current one,
 * so the loads of one tile overlap the arithmetic of the previous. */
/* 1-D: at least 3 blocks per SM (<= 80 registers). Unbounded, the 1-D
 * kernel took ~106 registers (2 blocks per SM) and was slower than the
 * staged version it replaced (H200: 54% vs 57% of copy); a bound of 4
 * (64 registers) spilled 60-190 bytes and reached 50%; 3 gave 61%. */
template <typename T, bool ROW, bool COL, bool TWO_D>
__global__ void __launch_bounds__(NT, TWO_D ? 1 : 3) mxfp8_kernel(Params p)
{
    typedef typename Stage<T>::type S;
    /* 2-D stages the tile; 1-D columnwise keeps its elements in registers
     * and only exchanges per-column partial amaxes and multipliers */
    constexpr bool STAGE = TWO_D;
    constexpr bool COL1 = COL && !TWO_D;
    __shared__ __align__(16) S xs[STAGE ? TR : 1][STAGE ? TC : 1];
    __shared__ __align__(16) uint8_t qs[STAGE ? TR : 1][STAGE ? TC : 16];
    __shared__ __align__(16) float cpart[COL1 ? NT / 32 : 1][COL1 ? TC : 4];
    __shared__ __align__(16) float cmul[COL1 ? TC : 4];

    const bool E5M2 = p.e5m2 != 0, SWZ = p.swz != 0;
    const float rcp = E5M2 ? 1.0f / 57344.0f : 1.0f / 448.0f;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const size_t K = p.cols;
    const T *x = static_cast<const T *>(p.x);
    const size_t ntiles = (p.rows / TR) * p.ncb;

    txq::Raw8<T> cur[4], nxt[4];
    auto load_tile = [&](size_t t, txq::Raw8<T> (&dst)[4]) {
        const size_t r0 = (t / p.ncb) * TR, c = (t % p.ncb) * TC + (size_t)lane * 8;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (t < ntiles && c < K) dst[i].load(x + (r0 + warp * 4 + i) * K + c);
            else dst[i].zero();
        }
    };
    load_tile(blockIdx.x, cur);

    for (size_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
        load_tile(t + gridDim.x, nxt);
        const size_t rb = t / p.ncb;
        const size_t r0 = rb * TR, c0 = (t % p.ncb) * TC;

        /* ---- rowwise sweep ---------------------------------------------- */
        const size_t c = c0 + (size_t)lane * 8;
        const bool cin = c < K; /* K % 32 == 0: a 4-lane group is all in or out */
        float pa[8]; /* 1-D columnwise: max |x| of this thread's 4 rows, per column */
#pragma unroll
        for (int j = 0; j < 8; j++) pa[j] = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int rr = warp * 4 + i;
            if (STAGE && cin) cur[i].stage(&xs[rr][lane * 8]);
            if (COL1) {
                float v[8];
                cur[i].get(v);
#pragma unroll
                for (int j = 0; j < 8; j++) pa[j] = fmaxf(pa[j], fabsf(v[j]));
            }
            if (ROW && !TWO_D) {
                float v[8];
                cur[i].get(v);
                float amax = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; j++) amax = fmaxf(amax, fabsf(v[j]));
                amax = txq::warp_max_xor(amax, 4);
                const uint32_t e = txq::e8m0_up(amax * rcp);
                const float m = txq::e8m0_rcp(e);
                if (cin) {
                    const size_t r = r0 + rr;
                    uint2 q;
                    q.x = txq::quant_fp8x4(E5M2, v, m);
                    q.y = txq::quant_fp8x4(E5M2, v + 4, m);
                    *reinterpret_cast<uint2 *>(p.row_data + r * K + c) = q;
                    if ((lane & 3) == 0)
                        p.row_scales[scale_off(SWZ, r, c / 32, p.row_ld, p.row_pad_cols)] = (uint8_t)e;
                }
            }
        }
        if (COL1) {
            /* the 32 rows of a column are 4 rows in each of the 8 warps */
            reinterpret_cast<float4 *>(&cpart[warp][lane * 8])[0] = make_float4(pa[0], pa[1], pa[2], pa[3]);
            reinterpret_cast<float4 *>(&cpart[warp][lane * 8])[1] = make_float4(pa[4], pa[5], pa[6], pa[7]);
            __syncthreads();
            float a = cpart[0][tid];
#pragma unroll
            for (int w = 1; w < NT / 32; w++) a = fmaxf(a, cpart[w][tid]);
            const uint32_t e = txq::e8m0_up(a * rcp);
            cmul[tid] = txq::e8m0_rcp(e);
            const size_t cc = c0 + tid;
            if (cc < K)
                p.col_scales[SWZ ? txq::swizzle128x4(cc, rb, p.col_pad_cols) : rb * p.col_ld + cc] =
                    (uint8_t)e;
            __syncthreads();
            /* the next tile's writes to cpart/cmul come after its first
             * barrier, which every thread reaches only after these reads */
            const float4 m0 = reinterpret_cast<const float4 *>(&cmul[lane * 8])[0];
            const float4 m1 = reinterpret_cast<const float4 *>(&cmul[lane * 8])[1];
            const float mlo[4] = {m0.x, m0.y, m0.z, m0.w}, mhi[4] = {m1.x, m1.y, m1.z, m1.w};
            if (cin) {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    float v[8];
                    opaque(cur[i]).get(v);
                    uint2 q;
                    q.x = quant_fp8x4_v(E5M2, v, mlo);
                    q.y = quant_fp8x4_v(E5M2, v + 4, mhi);
                    *reinterpret_cast<uint2 *>(p.col_data + (r0 + warp * 4 + i) * K + c) = q;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) cur[i] = nxt[i];
        if (!STAGE) continue;
        __syncthreads();

        /* ---- columnwise sweep: thread tid owns column c0 + tid ------------ */
        const size_t cc = c0 + tid;
        const bool ccin = cc < K;
        float amax = 0.0f;
#pragma unroll 8
        for (int r = 0; r < TR; r++) amax = fmaxf(amax, fabsf(Stage<T>::unpack(xs[r][tid])));
        if (TWO_D) amax = txq::warp_max_xor(amax, 32); /* a warp = 32 columns */
        const uint32_t e = txq::e8m0_up(amax * rcp);
        const float m = txq::e8m0_rcp(e);
#pragma unroll 2
        for (int r = 0; r < TR; r += 4) {
            float y[4];
#pragma unroll
            for (int j = 0; j < 4; j++) y[j] = Stage<T>::unpack(xs[r + j][tid]);
            const uint32_t q = txq::quant_fp8x4(E5M2, y, m);
#pragma unroll
            for (int j = 0; j < 4; j++) qs[r + j][tid] = (uint8_t)(q >> (8 * j));
        }
        if (ccin) {
            /* swizzled with rows and columns exchanged: the 128-long side
             * of a tile runs along the columns of the data */
            if (COL)
                p.col_scales[SWZ ? txq::swizzle128x4(cc, rb, p.col_pad_cols) : rb * p.col_ld + cc] =
                    (uint8_t)e;
            if (TWO_D && ROW)
                /* lane l writes the scale of row l of this 32x32 block */
                p.row_scales[scale_off(SWZ, r0 + lane, cc / 32, p.row_ld, p.row_pad_cols)] = (uint8_t)e;
        }
        __syncthreads();

        /* ---- 16-byte stores of the staged bytes ------------------------- */
#pragma unroll
        for (int k = 0; k < (TR * TC / 16) / NT; k++) {
            const int chunk = tid + k * NT;
            const int rr = chunk / (TC / 16), cb = (chunk % (TC / 16)) * 16;
            if (c0 + cb < K) {
                const uint4 w = *reinterpret_cast<const uint4 *>(&qs[rr][cb]);
                const size_t off = (r0 + rr) * K + c0 + cb;
                if (COL) *reinterpret_cast<uint4 *>(p.col_data + off) = w;
                if (TWO_D && ROW) *reinterpret_cast<uint4 *>(p.row_data + off) = w;
            }
        }
        /* the next iteration's first barrier keeps its shared-memory writes
         * behind every thread's reads here */
    }
}

template <typename Kern>
cudaError_t launch_persistent(Kern k, const Params &p, size_t tiles, cudaStream_t s)
{
    int dev = 0, sms = 0, per_sm = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, NT, 0);
    if (e != cudaSuccess) return e;
    size_t grid = (size_t)sms * (size_t)(per_sm > 0 ? per_sm : 1);
    if (grid > tiles) grid = tiles;
    k<<<(unsigned)grid, NT, 0, s>>>(p);
    return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch(const Params &p, bool row, bool col, bool two_d, size_t tiles, cudaStream_t s)
{
    if (two_d) {
        if (row && col) return launch_persistent(mxfp8_kernel<T, true, true, true>, p, tiles, s);
        if (row) return launch_persistent(mxfp8_kernel<T, true, false, true>, p, tiles, s);
        return launch_persistent(mxfp8_kernel<T, false, true, true>, p, tiles, s);
    }
    if (row && col) return launch_persistent(mxfp8_kernel<T, true, true, false>, p, tiles, s);
    if (row) return launch_persistent(mxfp8_kernel<T, true, false, false>, p, tiles, s);
    return launch_persistent(mxfp8_kernel<T, false, true, false>, p, tiles, s);
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
    p.ncb = (a->cols + TC - 1) / TC;
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
    size_t blocks = (a->rows / TR) * p.ncb;
    if (blocks > 0x7fffffffu)
        return tx_error(TEEXEC_ERR_LIMIT, "%s: tensor too large for one launch", what);

    cudaStream_t s = (cudaStream_t)stream;
    if (row) TX_CUDA_TRY(cudaMemsetAsync(a->row_scales, 0, a->row_scale_bytes, s), what);
    if (col) TX_CUDA_TRY(cudaMemsetAsync(a->col_scales, 0, a->col_scale_bytes, s), what);
    p.e5m2 = a->fmt == TEEXEC_DTYPE_FLOAT8E5M2;
    p.swz = a->swizzled != 0;
    if (a->x_dtype == TEEXEC_DTYPE_BFLOAT16)
        TX_CUDA_TRY(dispatch<__nv_bfloat16>(p, row, col, a->two_d != 0, blocks, s), "mxfp8_kernel");
    else
        TX_CUDA_TRY(dispatch<float>(p, row, col, a->two_d != 0, blocks, s), "mxfp8_kernel");
    return NULL;
}
