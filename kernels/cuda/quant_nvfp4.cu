/* quant_nvfp4.cu - NVFP4 quantizer (rowwise 1x16, columnwise 16x1 with
 * optional Hadamard transform, 2-D 16x16, RN or stochastic rounding). See
 * quant_nvfp4.h.
 *
 * Pass 1 finds the global amax (plain max|x|, or of RHT(X^T) for the
 * columnwise operand). Pass 2 walks 32-row x 256-column tiles like the
 * MXFP8 kernel: rowwise blocks are 2 lanes of 8 elements each, columnwise
 * blocks are 16 rows of one column read back from shared memory, and a
 * thread's 32 rows of one column are 16 contiguous bytes of the
 * transposed output.
 *
 * Shapes: cols % 16 == 0 (a 16-element block is two whole lanes), and
 * rows % 16 == 0 where a columnwise or 2-D copy is made (its blocks run
 * down 16 rows), any row count rowwise only: that is the planner's rule
 * (M, N, K multiples of 16). The last tile's rows past the end load as
 * zeros and store nothing; where it holds 16 rows only, its columnwise
 * thread writes the first 8 of its 16 bytes and the first scale. */
#include "kernels/cuda/quant_nvfp4.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant_common.cuh"
#include "kernels/cuda/quant_fp8.h"

#include <float.h>

namespace {

constexpr int TR = 32, TC = 256, NT = 256;

/* ---- Philox4x32-10 (kernels/cpu/philox.c) ------------------------------- */
__device__ __forceinline__ uint4 philox(uint64_t seed, uint64_t stream, uint64_t counter)
{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32);
    uint32_t c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        const uint32_t lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        const uint32_t lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return make_uint4(c0, c1, c2, c3);
}

__device__ __forceinline__ uint32_t draw_byte(const uint4 &d, unsigned lane)
{
    const uint32_t w = (lane >> 2) == 0 ? d.x : (lane >> 2) == 1 ? d.y : (lane >> 2) == 2 ? d.z : d.w;
    return (w >> (8u * (lane & 3u))) & 0xFFu;
}

/* Stochastic rounding onto the E2M1 grid with 8 random bits u: up iff
 * (|y| - lo) * 256 >= (256 - u) * (hi - lo). Every product and difference
 * here is exact in float (Sterbenz; steps are powers of two), so this
 * equals the CPU's double evaluation. The grid point below |y| comes from
 * adding 2^22 times the step rounding toward zero (enc_e2m1's trick), not
 * from a seven-way compare chain; equal to the chain for all 2^32 inputs
 * (checked on the CPU). */
__device__ __forceinline__ uint32_t e2m1_sr(float y, uint32_t u)
{
    const uint32_t b = __float_as_uint(y), a = b & 0x7fffffffu;
    const uint32_t sign = (b >> 28) & 8u;
    const uint32_t e = (a >> 23) > 127u ? (a >> 23) : 127u;
    const uint32_t mb = (e + 22u) << 23;                   /* 2^22 * step */
    const float t = __fadd_rz(__uint_as_float(a), __uint_as_float(mb));
    const uint32_t lo = __float_as_uint(t) - mb + 2u * e - 254u;
    const float glo = __fsub_rn(t, __uint_as_float(mb)); /* exact */
    const float step = __uint_as_float((e - 1u) << 23);    /* 2^(e-128) */
    const bool up = __fmul_rn(__fsub_rn(__uint_as_float(a), glo), 256.0f) >=
                    __fmul_rn((float)(256u - u), step);
    const uint32_t code = a >= 0x40C00000u ? 7u : lo + (up ? 1u : 0u); /* >= 6, Inf */
    return a > 0x7f800000u ? 0x7u : sign | code;                       /* NaN: +6 */
}

/* ---- Hadamard transform (kernels/cpu/hadamard.c) ---------------------------
 * w[j] = sum_i v[i] * H[i][j] with H = (1/4) diag(s) H16, summed in double
 * in order i = 0..15. Each term is exact, and so is summing +-v[i] and
 * scaling by 1/4 at the end (a power of two, far from double's range
 * limits), which gives the same double as the CPU's sum. Then one
 * rounding to the source dtype: bf16 through round-to-odd float (as the
 * CPU's tx_convert), or float. */

__device__ __forceinline__ float round_bf16_from_f64(double d)
{
    if (d != d) return __uint_as_float(0x7fc00000u);
    float f = __double2float_rz(d);
    if ((double)f != d) f = __uint_as_float(__float_as_uint(f) | 1u);
    uint32_t u = __float_as_uint(f);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return __uint_as_float(u);
}

/* The in-order double sum (kernels/cpu/hadamard.c's definition), for
 * blocks whose terms the butterfly below might not add exactly. */
template <bool BF16>
__device__ __forceinline__ void rht16_in_order(const float v[16], float w[16])
{
    constexpr int sgn[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
#pragma unroll
    for (int j = 0; j < 16; j++) {
        double s = 0.0;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const bool neg = ((__builtin_popcount(i & j) & 1) != 0) != (sgn[i] < 0);
            s = neg ? __dsub_rn(s, (double)v[i]) : __dadd_rn(s, (double)v[i]);
        }
        s = s * 0.25;
        w[j] = BF16 ? round_bf16_from_f64(s) : __double2float_rn(s);
    }
}

/* When every partial sum is exact in double, the order of the additions
 * does not matter, and the fast Walsh-Hadamard butterfly (4 additions per
 * element) gives the in-order sum's double (16 per element). Sums of 16
 * values of p significant bits whose exponents span d binades need at most
 * d + p + 4 bits: exact in double for d <= 49 - p (bf16 p = 8: 41, fp32 p
 * = 24: 25). Zeros do not count; subnormals count as the least exponent
 * (same last bit); Inf and NaN take the in-order path, whose result any
 * order gives anyway. */
template <bool BF16>
__device__ __forceinline__ bool rht16_exact_in_double(const float v[16])
{
    uint32_t emax = 0, emin = 255;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const uint32_t a = __float_as_uint(v[i]) & 0x7fffffffu;
        uint32_t e = a >> 23;
        e = e == 0 ? 1u : e;
        emax = a != 0 && e > emax ? e : emax;
        emin = a != 0 && e < emin ? e : emin;
    }
    return emax != 255u && (emax <= emin || emax - emin <= (BF16 ? 41u : 25u));
}

/* d = diag(s) H16 v, unscaled, by the butterfly (exact: see above) */
__device__ __forceinline__ void rht16_butterfly(const float v[16], double d[16])
{
    constexpr int sgn[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
#pragma unroll
    for (int i = 0; i < 16; i++) d[i] = sgn[i] < 0 ? -(double)v[i] : (double)v[i];
#pragma unroll
    for (int h = 1; h < 16; h <<= 1)
#pragma unroll
        for (int i = 0; i < 16; i++)
            if ((i & h) == 0) {
                const double x = d[i], y = d[i + h];
                d[i] = __dadd_rn(x, y);
                d[i + h] = __dsub_rn(x, y);
            }
}

template <bool BF16>
__device__ __forceinline__ void rht16(const float v[16], float w[16])
{
    if (!rht16_exact_in_double<BF16>(v)) {
        rht16_in_order<BF16>(v, w);
        return;
    }
    double d[16];
    rht16_butterfly(v, d);
    /* an exact zero: the in-order sum, started at +0, can only give +0;
     * the butterfly gives -0 for sums of negative zeros. Adding +0 makes
     * -0 into +0 and leaves every other value alone. */
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const double t = __dadd_rn(d[j], 0.0) * 0.25;
        w[j] = BF16 ? round_bf16_from_f64(t) : __double2float_rn(t);
    }
}

/* max |w| of rht16(v). Rounding to the source dtype is monotone in |x|,
 * so on the butterfly path the largest rounded |w| is the rounded largest
 * |d| / 4: one rounding per 16 values instead of sixteen (the conversions
 * dominated this pass). */
template <bool BF16>
__device__ __forceinline__ float rht16_amax(const float v[16])
{
    float a = 0.0f;
    if (!rht16_exact_in_double<BF16>(v)) {
        float w[16];
        rht16_in_order<BF16>(v, w);
#pragma unroll
        for (int i = 0; i < 16; i++) a = fmaxf(a, fabsf(w[i]));
        return a;
    }
    double d[16];
    rht16_butterfly(v, d);
    double m = 0.0;
#pragma unroll
    for (int j = 0; j < 16; j++) m = fmax(m, fabs(d[j]));
    m *= 0.25;
    return BF16 ? round_bf16_from_f64(m) : __double2float_rn(m);
}

/* ---- global scale ---------------------------------------------------------- */
struct Glob {
    float s_dec, k; /* S_dec = 1/S_enc, k = S_enc * fl32(1/6) */
};

__device__ __forceinline__ Glob glob_from_amax(float amax)
{
    float s = fminf(__fdiv_rn(2688.0f, amax), FLT_MAX);
    if (amax == 0.0f || s == 0.0f) s = 1.0f;
    Glob g;
    g.s_dec = __frcp_rn(s);
    g.k = __fmul_rn(s, 1.0f / 6.0f);
    return g;
}

/* block_amax >= 0 is never NaN (fmaxf-reduced) and g.k is finite and
 * positive, so the clamped product is finite and non-negative: the plain
 * hardware cvt gives the CPU's byte and a code 0..0x7E. */
__device__ __forceinline__ uint32_t block_scale_code(const Glob &g, float block_amax)
{
    return txq::cvt_fp8x2(false, fminf(__fmul_rn(block_amax, g.k), FLT_MAX), 0.0f) & 0xffu;
}

__device__ __forceinline__ float block_mult(const Glob &g, uint32_t sb)
{
    return fminf(__frcp_rn(__fmul_rn(txq::f32_from_e4m3_pos(sb), g.s_dec)), FLT_MAX);
}

struct Params {
    const void *x;
    size_t rows, cols, ncb;
    uint8_t *row_data, *row_scales, *col_data, *col_scales;
    size_t row_ld, col_ld;
    const float *amax;
    uint64_t seed, offset;
    int sr, swz;
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

__device__ __forceinline__ size_t soff(int swz, size_t r, size_t c, size_t ld)
{
    return swz ? txq::swizzle128x4(r, c, ld) : r * ld + c;
}

/* SR is a template argument: the stochastic encoder's compare chain and
 * Philox, left in RN kernels behind a run-time branch, had cost registers
 * and instruction cache. */
template <typename T, bool ROW, bool COL, bool TWO_D, bool RHT, bool SR>
__global__ void __launch_bounds__(NT) nvfp4_kernel(Params p)
{
    typedef typename Stage<T>::type S;
    constexpr bool STAGE = COL || TWO_D;
    __shared__ __align__(16) S xs[STAGE ? TR : 1][STAGE ? TC : 1];
    __shared__ __align__(16) uint8_t qs[TWO_D && COL ? TR : 1][TWO_D && COL ? TC : 16];
    __shared__ float tam[2][TC / 16];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const size_t rb = blockIdx.x / p.ncb;
    const size_t r0 = rb * TR, c0 = (blockIdx.x % p.ncb) * TC;
    const size_t M = p.rows, K = p.cols;
    const T *x = static_cast<const T *>(p.x);
    const size_t c = c0 + (size_t)lane * 8;
    const bool cin = c < K; /* K % 16 == 0: 2-lane blocks are whole */
    /* rows of this tile inside the tensor: 32, or 16 (col / 2-D), or any
     * count (rowwise only) in the last tile */
    const size_t rows_in = M - r0 < (size_t)TR ? M - r0 : (size_t)TR;

    /* raw bits: all four loads in flight, and the staged copy is the
     * loaded bytes (converting to float and packing back cost ~2
     * instructions per element in an issue-bound kernel) */
    txq::Raw8<T> rv[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const size_t r = r0 + warp * 4 + i;
        if (cin && r < M) rv[i].load(x + r * K + c);
        else rv[i].zero();
    }
    float v[4][8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (STAGE && cin) rv[i].stage(&xs[warp * 4 + i][lane * 8]);
        rv[i].get(v[i]);
    }
    const Glob grow = glob_from_amax(p.amax[0]);
    const Glob gcol = glob_from_amax(p.amax[1]);
    const size_t cc = c0 + tid; /* column-sweep column */
    const bool ccin = cc < K;

    if (TWO_D) {
        __syncthreads();
        float a[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int r = 0; r < 16; r++) a[h] = fmaxf(a[h], fabsf(Stage<T>::unpack(xs[16 * h + r][tid])));
            a[h] = txq::warp_max_xor(a[h], 16);
            if ((tid & 15) == 0) tam[h][tid / 16] = a[h];
        }
        __syncthreads();
    }

    /* ---- rowwise (and every 2-D code) ------------------------------------- */
    if (ROW || TWO_D) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int rr = warp * 4 + i;
            const size_t r = r0 + rr;
            float amax;
            if (TWO_D) {
                amax = tam[rr / 16][lane / 2];
            } else {
                amax = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; j++) amax = fmaxf(amax, fabsf(v[i][j]));
                amax = txq::warp_max_xor(amax, 2);
            }
            const uint32_t sb = block_scale_code(grow, amax);
            const float m = block_mult(grow, sb);
            if (!cin || r >= M) continue;
            uint4 d = make_uint4(0, 0, 0, 0);
            if (SR) d = philox(p.seed, 0, (r * K + c) / 16 + p.offset);
            uint32_t packed = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float y = __fmul_rn(v[i][j], m);
                const uint32_t q = SR ? e2m1_sr(y, draw_byte(d, (unsigned)((c & 15) + j)))
                                        : txq::enc_e2m1(y);
                packed |= q << (4 * j);
                if (TWO_D && COL) qs[rr][lane * 8 + j] = (uint8_t)q;
            }
            if (ROW) {
                *reinterpret_cast<uint32_t *>(p.row_data + (r * K + c) / 2) = packed;
                if ((lane & 1) == 0) p.row_scales[soff(p.swz, r, c / 16, p.row_ld)] = (uint8_t)sb;
            }
        }
    }
    if (!COL) return;
    __syncthreads();

    /* ---- columnwise: thread owns column cc, rows r0 .. r0+31 -------------- */
    uint32_t out[4];
    if (TWO_D) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t sb = block_scale_code(grow, tam[h][tid / 16]);
            if (ccin && 16 * (size_t)h < rows_in)
                p.col_scales[soff(p.swz, cc, r0 / 16 + h, p.col_ld)] = (uint8_t)sb;
#pragma unroll
            for (int w = 0; w < 2; w++) {
                uint32_t packed = 0;
#pragma unroll
                for (int j = 0; j < 8; j++) packed |= (uint32_t)qs[16 * h + 8 * w + j][tid] << (4 * j);
                out[2 * h + w] = packed;
            }
        }
    } else {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float y[16];
#pragma unroll
            for (int r = 0; r < 16; r++) y[r] = Stage<T>::unpack(xs[16 * h + r][tid]);
            if (RHT) {
                float w[16];
                rht16<sizeof(S) == 2>(y, w);
#pragma unroll
                for (int r = 0; r < 16; r++) y[r] = w[r];
            }
            float amax = 0.0f;
#pragma unroll
            for (int r = 0; r < 16; r++) amax = fmaxf(amax, fabsf(y[r]));
            const uint32_t sb = block_scale_code(gcol, amax);
            const float m = block_mult(gcol, sb);
            if (ccin && 16 * (size_t)h < rows_in)
                p.col_scales[soff(p.swz, cc, r0 / 16 + h, p.col_ld)] = (uint8_t)sb;
            uint4 d = make_uint4(0, 0, 0, 0);
            if (SR && ccin) d = philox(p.seed, 1, (cc * M + r0 + 16 * h) / 16 + p.offset);
#pragma unroll
            for (int w = 0; w < 2; w++) {
                uint32_t packed = 0;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const float t = __fmul_rn(y[8 * w + j], m);
                    const uint32_t q = SR ? e2m1_sr(t, draw_byte(d, (unsigned)(8 * w + j)))
                                            : txq::enc_e2m1(t);
                    packed |= q << (4 * j);
                }
                out[2 * h + w] = packed;
            }
        }
    }
    if (!ccin) return;
    /* column cc starts at byte cc * M / 2: 16-byte aligned when M % 32 == 0,
     * 8-byte aligned when M % 16 == 0 */
    uint8_t *dst = p.col_data + (cc * M + r0) / 2;
    if (M % TR == 0) {
        *reinterpret_cast<uint4 *>(dst) = make_uint4(out[0], out[1], out[2], out[3]);
    } else {
        *reinterpret_cast<uint2 *>(dst) = make_uint2(out[0], out[1]);
        if (rows_in == (size_t)TR) *reinterpret_cast<uint2 *>(dst + 8) = make_uint2(out[2], out[3]);
    }
}

/* Two adjacent elements (8-byte aligned pair for fp32, 4-byte for bf16). */
template <typename T> struct Pair2;
template <> struct Pair2<__nv_bfloat16> {
    uint32_t w;
    __device__ __forceinline__ void load(const __nv_bfloat16 *p) { w = __ldg(reinterpret_cast<const unsigned int *>(p)); }
    __device__ __forceinline__ void get(float &a, float &b) const
    {
        a = __uint_as_float(w << 16);
        b = __uint_as_float(w & 0xffff0000u);
    }
};
template <> struct Pair2<float> {
    float2 f;
    __device__ __forceinline__ void load(const float *p) { f = __ldg(reinterpret_cast<const float2 *>(p)); }
    __device__ __forceinline__ void get(float &a, float &b) const
    {
        a = f.x;
        b = f.y;
    }
};

/* amax of RHT(X^T): a thread transforms 2 columns x 16 rows. */
template <typename T>
__global__ void __launch_bounds__(256) rht_amax_kernel(const T *x, size_t M, size_t K, float *amax)
{
    const size_t pairs = K / 2;
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float a = 0.0f;
    if (idx < pairs * (M / 16)) {
        const size_t cp = idx % pairs, g = idx / pairs;
        float v0[16], v1[16];
        /* the column pair as one 4- or 8-byte load per row, all 16 in
         * flight before any use (two 2-byte loads per row ran this pass
         * at ~25% of copy) */
        Pair2<T> pr[16];
#pragma unroll
        for (int i = 0; i < 16; i++) pr[i].load(x + (g * 16 + i) * K + cp * 2);
#pragma unroll
        for (int i = 0; i < 16; i++) pr[i].get(v0[i], v1[i]);
        a = fmaxf(rht16_amax<sizeof(T) == 2>(v0), rht16_amax<sizeof(T) == 2>(v1));
    }
    a = txq::warp_max_xor(a, 32);
    __shared__ float red[8];
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = a;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < 8; i++) a = fmaxf(a, red[i]);
        if (a > 0.0f) atomicMax(reinterpret_cast<unsigned int *>(amax), __float_as_uint(a));
    }
}

__global__ void set_amax_kernel(float *amax, float row, float col, int copy_row_to_col)
{
    if (copy_row_to_col) amax[1] = amax[0];
    else {
        amax[0] = row;
        amax[1] = col;
    }
}

template <typename T, bool TWO_D, bool RHT, bool SR>
void launch_usage(const Params &p, bool row, bool col, unsigned blocks, cudaStream_t s)
{
    if (row && col) nvfp4_kernel<T, true, true, TWO_D, RHT, SR><<<blocks, NT, 0, s>>>(p);
    else if (row) nvfp4_kernel<T, true, false, TWO_D, false, SR><<<blocks, NT, 0, s>>>(p);
    else nvfp4_kernel<T, false, true, TWO_D, RHT, SR><<<blocks, NT, 0, s>>>(p);
}

template <typename T, bool SR>
void launch_mode(const Params &p, bool row, bool col, bool two_d, bool rht, unsigned blocks,
                 cudaStream_t s)
{
    if (two_d) launch_usage<T, true, false, SR>(p, row, col, blocks, s);
    else if (rht) launch_usage<T, false, true, SR>(p, row, col, blocks, s);
    else launch_usage<T, false, false, SR>(p, row, col, blocks, s);
}

template <typename T>
void launch(const Params &p, bool row, bool col, bool two_d, bool rht, unsigned blocks,
            cudaStream_t s)
{
    if (p.sr) launch_mode<T, true>(p, row, col, two_d, rht, blocks, s);
    else launch_mode<T, false>(p, row, col, two_d, rht, blocks, s);
}

} /* namespace */

extern "C" teexec_status *tx_cuda_nvfp4_quantize(const tx_cuda_nvfp4_args *a, void *stream)
{
    static const char *const what = "tx_cuda_nvfp4_quantize";
    if (!a || !a->x || !a->amax)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no input or amax buffer", what);
    if (a->x_dtype != TEEXEC_DTYPE_BFLOAT16 && a->x_dtype != TEEXEC_DTYPE_FLOAT)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: input dtype %d is not bf16 or fp32", what,
                        (int)a->x_dtype);
    const bool row = a->row_data != NULL, col = a->col_data != NULL;
    if (a->cols % 16 || ((col || a->two_d) && a->rows % 16))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: the GPU kernel needs cols %% 16 == 0%s, got [%zu, %zu]", what,
                        col || a->two_d ? " and rows % 16 == 0 (columnwise or 2-D)" : "",
                        a->rows, a->cols);
    if ((row && !a->row_scales) || (col && !a->col_scales))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: data without a scale buffer", what);
    if (((uintptr_t)a->x | (uintptr_t)a->row_data | (uintptr_t)a->col_data) % 16)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: buffers must be 16-byte aligned", what);
    if (a->rows == 0 || a->cols == 0 || (!row && !col)) return NULL;
    const bool rht = a->rht && col && !a->two_d;
    const bool bf16 = a->x_dtype == TEEXEC_DTYPE_BFLOAT16;
    cudaStream_t s = (cudaStream_t)stream;

    /* pass 1: global amaxes */
    if (a->use_given_amax) {
        set_amax_kernel<<<1, 1, 0, s>>>(a->amax, a->given_amax_row,
                                        a->two_d ? a->given_amax_row : a->given_amax_col, 0);
        TX_CUDA_LAUNCHED("set_amax_kernel");
    } else {
        TX_CUDA_TRY(cudaMemsetAsync(a->amax, 0, 2 * sizeof(float), s), what);
        if (row || !rht) {
            TX_TRY(tx_cuda_amax(a->x, a->x_dtype, a->rows * a->cols, a->amax, stream));
            set_amax_kernel<<<1, 1, 0, s>>>(a->amax, 0.0f, 0.0f, 1);
            TX_CUDA_LAUNCHED("set_amax_kernel");
        }
        if (rht) {
            TX_CUDA_TRY(cudaMemsetAsync(a->amax + 1, 0, sizeof(float), s), what);
            const size_t threads = a->cols / 2 * (a->rows / 16);
            const size_t blocks = (threads + 255) / 256;
            if (blocks > 0x7fffffffu)
                return tx_error(TEEXEC_ERR_LIMIT, "%s: tensor too large for one launch", what);
            if (bf16)
                rht_amax_kernel<<<(unsigned)blocks, 256, 0, s>>>(
                    static_cast<const __nv_bfloat16 *>(a->x), a->rows, a->cols, a->amax + 1);
            else
                rht_amax_kernel<<<(unsigned)blocks, 256, 0, s>>>(static_cast<const float *>(a->x),
                                                                 a->rows, a->cols, a->amax + 1);
            TX_CUDA_LAUNCHED("rht_amax_kernel");
        }
    }

    /* pass 2; scale bytes are zeroed only where the kernel leaves some
     * unwritten (padding, a larger buffer) */
    const size_t nblk = a->rows * (a->cols / 16);
    const bool swz = a->swizzled != 0;
    const bool row_dense = a->row_scale_bytes == nblk &&
                           (swz ? a->rows % 128 == 0 && (a->cols / 16) % 4 == 0
                                : a->row_scale_ld == a->cols / 16);
    const bool col_dense = a->col_scale_bytes == nblk &&
                           (swz ? a->cols % 128 == 0 && (a->rows / 16) % 4 == 0
                                : a->col_scale_ld == a->rows / 16);
    if (row && !row_dense) TX_CUDA_TRY(cudaMemsetAsync(a->row_scales, 0, a->row_scale_bytes, s), what);
    if (col && !col_dense) TX_CUDA_TRY(cudaMemsetAsync(a->col_scales, 0, a->col_scale_bytes, s), what);
    Params p;
    p.x = a->x;
    p.rows = a->rows;
    p.cols = a->cols;
    p.ncb = (a->cols + TC - 1) / TC;
    p.row_data = a->row_data;
    p.row_scales = a->row_scales;
    p.col_data = a->col_data;
    p.col_scales = a->col_scales;
    /* the swizzle needs the padded column count; compact needs the ld */
    p.row_ld = a->swizzled ? (a->cols / 16 + 3) / 4 * 4 : a->row_scale_ld;
    p.col_ld = a->swizzled ? (a->rows / 16 + 3) / 4 * 4 : a->col_scale_ld;
    p.amax = a->amax;
    p.seed = a->seed;
    p.offset = a->sr_offset;
    p.sr = a->stochastic != 0;
    p.swz = a->swizzled != 0;
    const size_t blocks = (a->rows + TR - 1) / TR * p.ncb;
    if (blocks > 0x7fffffffu)
        return tx_error(TEEXEC_ERR_LIMIT, "%s: tensor too large for one launch", what);
    if (bf16) launch<__nv_bfloat16>(p, row, col, a->two_d != 0, rht, (unsigned)blocks, s);
    else launch<float>(p, row, col, a->two_d != 0, rht, (unsigned)blocks, s);
    TX_CUDA_LAUNCHED("nvfp4_kernel");
    return NULL;
}
