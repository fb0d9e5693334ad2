/* grouped_gemm_mma.cu - tensor-core grouped GEMMs with mma.sync
 * (grouped_gemm_mma.h).
 *
 * Every kind is C(i, j) = sum_l A(i, l) B(l, j) over one group's rows:
 *   FPROP  A = x_g  (K-major: l contiguous), B = W_g^T (W stored [n][k]: l contiguous)
 *   DGRAD  A = dy_g (l contiguous),          B = W_g   (j contiguous)
 *   WGRAD  A = dy_g^T (i contiguous),        B = x_g   (j contiguous)
 * so the kernel is templated on which dimension of each operand is
 * contiguous; the shared-memory tile keeps the global layout (16-byte
 * cp.async copies need that) and ldmatrix's .trans variant turns an
 * i- or j-contiguous tile into mma's fragments.
 *
 * Shared-memory rows are padded by 16 bytes instead of swizzled: with row
 * pitches of 80 or 272 bytes the eight 16-byte rows one ldmatrix phase
 * reads fall into distinct bank quads, which is all a swizzle would buy. */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

#include <cstring>

extern "C" {
#include "kernels/cuda/grouped_gemm_mma.h"
}

namespace {

constexpr int G_MAX = TX_GG_MAX_GROUPS;
/* Tile shape (the GG_* macros exist so a benchmark build can time other
 * shapes; warps own 64 x 64 sub-tiles). */
#ifndef GG_BM
#define GG_BM 128
#define GG_BN 128
#define GG_BK 32
#define GG_STAGES 4
#endif
#ifndef GG_DBUF
#define GG_DBUF 0
#endif
constexpr int BM = GG_BM, BN = GG_BN, BK = GG_BK, STAGES = GG_STAGES;
constexpr int WARPS_N = BN / 64, THREADS = 32 * (BM / 64) * WARPS_N;
constexpr int MIN_BLOCKS = THREADS <= 128 ? 2 : 1;
constexpr int PAD = 8;       /* elements: 16 bytes */
constexpr int RASTER_M = 16; /* row tiles per raster band (L2 reuse of B) */

/* Elements of one stage's tile of an operand with R rows (i or j) by BK. */
template <bool KMAJ, int R>
struct tile_shape {
    static constexpr int pitch = KMAJ ? BK + PAD : R + PAD;
    static constexpr int elems = KMAJ ? R * pitch : BK * pitch;
};

struct mma_params {
    int kind, groups;
    const int64_t *split;
    long long m, n, k;
    long long tiles_m, tiles_n; /* FPROP / DGRAD: row-tile bound; WGRAD: tiles of dW_g */
    const void *a;
    const void *b[G_MAX];
    const void *bias[G_MAX];
    int bias_dt;
    void *out[G_MAX];
    int out_dt;
    const float *alpha_a; /* grouped_gemm.h's alpha: device floats, NULL = 1 */
    const float *alpha_b[G_MAX];
};

/* Warp 0: off[g] (clamped as grouped_gemm.h says) and tile[g] (first row
 * tile of group g for tile height `tm`; 0 = no tiles), g = 0..groups.
 * A clamped prefix equals the prefix of the sizes (negatives as 0) cut at
 * m, so a warp scan replaces the sequential clamp. */
__device__ void prefix(const int64_t *split, int groups, long long m, int tm, long long *off,
                       long long *tile)
{
    const int lane = threadIdx.x & 31;
    long long s[2], carry_s = 0, carry_c = 0;
    for (int h = 0; h < 2; h++) {
        int g = lane + 32 * h;
        long long v = g < groups ? (long long)split[g] : 0;
        s[h] = v < 0 ? 0 : (v > m ? m : v);
    }
    for (int h = 0; h < 2; h++) {
        long long x = s[h];
        for (int d = 1; d < 32; d <<= 1) {
            long long y = __shfl_up_sync(0xffffffffu, x, d);
            if (lane >= d) x += y;
        }
        x += carry_s;
        carry_s = __shfl_sync(0xffffffffu, x, 31);
        long long hi = x < m ? x : m, lo = x - s[h] < m ? x - s[h] : m;
        int g = lane + 32 * h;
        if (g < groups) off[g + 1] = hi;
        long long cnt = tm > 0 ? (hi - lo + tm - 1) / tm : 0;
        for (int d = 1; d < 32; d <<= 1) {
            long long y = __shfl_up_sync(0xffffffffu, cnt, d);
            if (lane >= d) cnt += y;
        }
        cnt += carry_c;
        carry_c = __shfl_sync(0xffffffffu, cnt, 31);
        if (g < groups) tile[g + 1] = cnt;
    }
    if (lane == 0) off[0] = 0, tile[0] = 0;
}

/* Band rasterization: RASTER_M row tiles walk the column tiles together, so
 * the B tiles one band reads stay in L2 while its rows go by. */
__device__ void raster(long long pid, long long nm, long long nn, long long *tm, long long *tn)
{
    long long band = pid / (RASTER_M * nn), first = band * RASTER_M;
    long long rows = nm - first < RASTER_M ? nm - first : RASTER_M;
    long long in = pid % (RASTER_M * nn);
    *tm = first + in % rows;
    *tn = in / rows;
}

__device__ __forceinline__ void cp16(void *dst, const void *src, bool pred)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    int n = pred ? 16 : 0; /* 0 source bytes: the 16 destination bytes are zeroed */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <bool TRANS>
__device__ __forceinline__ void ldm4(unsigned addr, unsigned *r)
{
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
}

template <typename T>
__device__ __forceinline__ void mma16816(float *c, const unsigned *a, const unsigned *b);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float *c, const unsigned *a,
                                                        const unsigned *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float *c, const unsigned *a, const unsigned *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* One operand's view for this block: element (r, l) (r = i for A, j for B)
 * at base[r * sr + l * sl] with one of sr / sl equal to 1; rows r < rlim,
 * l < L are inside. */
struct operand {
    const char *base; /* bytes */
    long long ld;     /* elements between consecutive rows of the stored matrix */
    long long r0, rlim;
};

/* Issues one stage's cp.async copies of an R x BK tile (r0.., l0..). */
template <typename T, bool KMAJ, int R>
__device__ __forceinline__ void load_stage(T *dst, const operand &o, long long l0, long long L)
{
    using S = tile_shape<KMAJ, R>;
    const int t = threadIdx.x;
    constexpr int CHUNKS = R * BK / 8;
    static_assert(CHUNKS % THREADS == 0, "whole chunks per thread");
#pragma unroll
    for (int q = 0; q < CHUNKS / THREADS; q++) {
        int c = t + q * THREADS;
        int r, l;
        if (KMAJ) r = c / (BK / 8), l = (c % (BK / 8)) * 8;
        else l = c / (R / 8), r = (c % (R / 8)) * 8;
        long long gr = o.r0 + r, gl = l0 + l;
        bool in = gr < o.rlim && gl < L;
        const char *src = o.base;
        if (in) src += (KMAJ ? gr * o.ld + gl : gl * o.ld + gr) * (long long)sizeof(T);
        T *d = KMAJ ? dst + r * S::pitch + l : dst + l * S::pitch + r;
        cp16(d, src, in);
    }
}

template <typename T>
__device__ __forceinline__ void store2(void *out, long long idx, int dt, float v0, float v1);
template <>
__device__ __forceinline__ void store2<__nv_bfloat16>(void *out, long long idx, int dt, float v0,
                                                      float v1)
{
    if (dt == TEEXEC_DTYPE_BFLOAT16)
        *(__nv_bfloat162 *)((__nv_bfloat16 *)out + idx) = __floats2bfloat162_rn(v0, v1);
    else if (dt == TEEXEC_DTYPE_FLOAT)
        *(float2 *)((float *)out + idx) = make_float2(v0, v1);
    else
        tx_st(out, (size_t)idx, dt, v0), tx_st(out, (size_t)idx + 1, dt, v1);
}
template <>
__device__ __forceinline__ void store2<__half>(void *out, long long idx, int dt, float v0, float v1)
{
    if (dt == TEEXEC_DTYPE_FLOAT16)
        *(__half2 *)((__half *)out + idx) = __floats2half2_rn(v0, v1);
    else if (dt == TEEXEC_DTYPE_FLOAT)
        *(float2 *)((float *)out + idx) = make_float2(v0, v1);
    else
        tx_st(out, (size_t)idx, dt, v0), tx_st(out, (size_t)idx + 1, dt, v1);
}

template <typename T, bool AK, bool BK_>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) gg_mma(mma_params p)
{
    using SA = tile_shape<AK, BM>;
    using SB = tile_shape<BK_, BN>;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ long long s_off[G_MAX + 1], s_tile[G_MAX + 1];
    T *As = (T *)smem;
    T *Bs = As + STAGES * SA::elems;

    const bool wgrad = p.kind == TX_GG_WGRAD;
    long long pid = blockIdx.x, tm, tn;
    int g;
    if (wgrad) {
        long long per = p.tiles_m * p.tiles_n;
        g = (int)(pid / per);
        raster(pid % per, p.tiles_m, p.tiles_n, &tm, &tn);
        if (!p.out[g]) return; /* that weight grad is not wanted */
    } else {
        raster(pid, p.tiles_m, p.tiles_n, &tm, &tn);
    }
    if (threadIdx.x < 32) prefix(p.split, p.groups, p.m, wgrad ? 0 : BM, s_off, s_tile);
    __syncthreads();

    operand oa, ob;
    long long L, I, J, ldo, i0;
    const void *bias = nullptr;
    char *out;
    const long long es = (long long)sizeof(T);
    if (wgrad) {
        long long r0 = s_off[g];
        L = s_off[g + 1] - r0;
        I = p.n, J = p.k, i0 = tm * BM;
        oa = {(const char *)p.a + r0 * p.n * es, p.n, i0, I};
        ob = {(const char *)p.b[0] + r0 * p.k * es, p.k, tn * BN, J};
        out = (char *)p.out[g];
        ldo = p.k;
    } else {
        if (tm >= s_tile[p.groups]) return;
        g = 0;
        while (g + 1 < p.groups && s_tile[g + 1] <= tm) g++;
        long long row0 = s_off[g] + (tm - s_tile[g]) * BM;
        I = s_off[g + 1] - row0, i0 = 0;
        bias = p.kind == TX_GG_FPROP ? p.bias[g] : nullptr;
        if (p.kind == TX_GG_FPROP) {
            L = p.k, J = p.n, ldo = p.n;
            oa = {(const char *)p.a + row0 * p.k * es, p.k, 0, I};
            ob = {(const char *)p.b[g], p.k, tn * BN, J};
        } else {
            L = p.n, J = p.k, ldo = p.k;
            oa = {(const char *)p.a + row0 * p.n * es, p.n, 0, I};
            ob = {(const char *)p.b[g], p.k, tn * BN, J};
        }
        out = (char *)p.out[0] + row0 * ldo * (p.out_dt == TEEXEC_DTYPE_FLOAT ? 4 : 2);
    }
    const long long j0 = tn * BN;
    /* the group's alpha (a multiplication by 1 is exact: no alpha, no change) */
    float alpha = p.alpha_a ? *p.alpha_a : 1.0f;
    if (const float *ab = p.alpha_b[wgrad ? 0 : g]) alpha = __fmul_rn(alpha, *ab);

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;

    /* ldmatrix lane addresses (bytes within a stage, kk = 0); see the
     * fragment layouts of mma.m16n8k16 for why these rows / columns. */
    unsigned a_addr[4], b_addr[4];
    const unsigned as0 = (unsigned)__cvta_generic_to_shared(As),
                   bs0 = (unsigned)__cvta_generic_to_shared(Bs);
    {
        const int q = lane >> 3, r = lane & 7;
#pragma unroll
        for (int mi = 0; mi < 4; mi++) {
            int row, col; /* stored coordinates */
            if (AK) row = wm * 64 + mi * 16 + (lane & 15), col = (lane >> 4) * 8;
            else row = r + (q >> 1) * 8, col = wm * 64 + mi * 16 + (q & 1) * 8;
            a_addr[mi] = (unsigned)((row * SA::pitch + col) * sizeof(T));
        }
#pragma unroll
        for (int np = 0; np < 4; np++) {
            int row, col;
            if (BK_) row = wn * 64 + np * 16 + r + (q >> 1) * 8, col = (q & 1) * 8;
            else row = r + (q & 1) * 8, col = wn * 64 + np * 16 + (q >> 1) * 8;
            b_addr[np] = (unsigned)((row * SB::pitch + col) * sizeof(T));
        }
    }
    /* stepping kk by 16 along l: columns for an l-contiguous tile, rows otherwise */
    constexpr unsigned A_KK = (AK ? 16 : 16 * SA::pitch) * sizeof(T);
    constexpr unsigned B_KK = (BK_ ? 16 : 16 * SB::pitch) * sizeof(T);

    float acc[4][8][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 8; b++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[a][b][c] = 0.0f;

    const long long ktiles = (L + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles) {
            load_stage<T, AK, BM>(As + s * SA::elems, oa, (long long)s * BK, L);
            load_stage<T, BK_, BN>(Bs + s * SB::elems, ob, (long long)s * BK, L);
        }
        cp_commit(); /* empty groups too: the wait count below stays exact */
    }
#if GG_DBUF
    /* Fragments double-buffered in registers: the ldmatrix of step kk + 1
     * (or of the next stage's first step, after its barrier) is issued
     * before the mma of step kk, so its latency hides behind them. */
    constexpr int KS = BK / 16;
    unsigned af[2][4][4], bf[2][4][4];
    cp_wait<STAGES - 2>();
    __syncthreads();
#pragma unroll
    for (int mi = 0; mi < 4; mi++) ldm4<!AK>(as0 + a_addr[mi], af[0][mi]);
#pragma unroll
    for (int np = 0; np < 4; np++) ldm4<!BK_>(bs0 + b_addr[np], bf[0][np]);
    for (long long kt = 0; kt < ktiles; kt++) {
        long long nk = kt + STAGES - 1;
        if (nk < ktiles) { /* slot of stage kt-1: every thread passed the barrier after reading it */
            int st = (int)(nk % STAGES);
            load_stage<T, AK, BM>(As + st * SA::elems, oa, nk * BK, L);
            load_stage<T, BK_, BN>(Bs + st * SB::elems, ob, nk * BK, L);
        }
        cp_commit();
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            const int nb = (kk + 1) & 1;
            unsigned abase, bbase, koff_a, koff_b;
            bool more = true;
            if (kk + 1 < KS) {
                const int cur = (int)(kt % STAGES);
                abase = as0 + cur * SA::elems * (unsigned)sizeof(T);
                bbase = bs0 + cur * SB::elems * (unsigned)sizeof(T);
                koff_a = (kk + 1) * A_KK, koff_b = (kk + 1) * B_KK;
            } else {
                more = kt + 1 < ktiles;
                if (more) {
                    cp_wait<STAGES - 2>();
                    __syncthreads(); /* stage kt+1 landed for all; stage kt fully read */
                }
                const int nxt = (int)((kt + 1) % STAGES);
                abase = as0 + nxt * SA::elems * (unsigned)sizeof(T);
                bbase = bs0 + nxt * SB::elems * (unsigned)sizeof(T);
                koff_a = koff_b = 0;
            }
            if (more) {
#pragma unroll
                for (int mi = 0; mi < 4; mi++) ldm4<!AK>(abase + a_addr[mi] + koff_a, af[nb][mi]);
#pragma unroll
                for (int np = 0; np < 4; np++) ldm4<!BK_>(bbase + b_addr[np] + koff_b, bf[nb][np]);
            }
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int nj = 0; nj < 8; nj++)
                    mma16816<T>(acc[mi][nj], af[kk & 1][mi], &bf[kk & 1][nj >> 1][(nj & 1) * 2]);
        }
    }
#else
    for (long long kt = 0; kt < ktiles; kt++) {
        cp_wait<STAGES - 2>();
        __syncthreads(); /* stage kt landed for all; stage kt-1 fully read */
        long long nk = kt + STAGES - 1;
        if (nk < ktiles) {
            int st = (int)(nk % STAGES);
            load_stage<T, AK, BM>(As + st * SA::elems, oa, nk * BK, L);
            load_stage<T, BK_, BN>(Bs + st * SB::elems, ob, nk * BK, L);
        }
        cp_commit();
        const int cur = (int)(kt % STAGES);
        const unsigned abase = as0 + cur * SA::elems * (unsigned)sizeof(T),
                       bbase = bs0 + cur * SB::elems * (unsigned)sizeof(T);
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            unsigned af[4][4], bf[4][4];
#pragma unroll
            for (int mi = 0; mi < 4; mi++) ldm4<!AK>(abase + a_addr[mi] + kk * A_KK, af[mi]);
#pragma unroll
            for (int np = 0; np < 4; np++) ldm4<!BK_>(bbase + b_addr[np] + kk * B_KK, bf[np]);
#pragma unroll
            for (int mi = 0; mi < 4; mi++)
#pragma unroll
                for (int nj = 0; nj < 8; nj++)
                    mma16816<T>(acc[mi][nj], af[mi], &bf[nj >> 1][(nj & 1) * 2]);
        }
    }
#endif
    cp_wait<0>(); /* nothing may be in flight when the block exits */

    const int gq = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int nj = 0; nj < 8; nj++) {
        long long col = j0 + wn * 64 + nj * 8 + tq * 2;
        if (col >= J) continue; /* J is a multiple of 8: col + 1 < J too */
        float b0 = 0.0f, b1 = 0.0f;
        if (bias) b0 = tx_ld(bias, (size_t)col, p.bias_dt), b1 = tx_ld(bias, (size_t)col + 1, p.bias_dt);
#pragma unroll
        for (int mi = 0; mi < 4; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                long long row = i0 + wm * 64 + mi * 16 + gq + h * 8;
                if (row < I)
                    store2<T>(out, row * ldo + col, p.out_dt,
                              __fadd_rn(__fmul_rn(acc[mi][nj][2 * h], alpha), b0),
                              __fadd_rn(__fmul_rn(acc[mi][nj][2 * h + 1], alpha), b1));
            }
    }
}

template <typename T, bool AK, bool BK_>
teexec_status *launch(const mma_params &p, long long blocks, cudaStream_t s)
{
    constexpr size_t bytes =
        (size_t)STAGES * (tile_shape<AK, BM>::elems + tile_shape<BK_, BN>::elems) * sizeof(T);
    /* above the 48 KB default: opt in (cheap, host-side, allowed during capture) */
    TX_CUDA_TRY(cudaFuncSetAttribute(gg_mma<T, AK, BK_>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)bytes),
                "grouped GEMM (mma)");
    gg_mma<T, AK, BK_><<<(unsigned)blocks, THREADS, bytes, s>>>(p);
    TX_CUDA_LAUNCHED("grouped GEMM (mma)");
    return NULL;
}

template <typename T>
teexec_status *launch_kind(const mma_params &p, long long blocks, cudaStream_t s)
{
    if (p.kind == TX_GG_FPROP) return launch<T, true, true>(p, blocks, s);
    if (p.kind == TX_GG_DGRAD) return launch<T, true, false>(p, blocks, s);
    return launch<T, false, false>(p, blocks, s);
}

bool al16(const void *q) { return ((uintptr_t)q & 15u) == 0; }

} // namespace

extern "C" bool tx_cuda_grouped_mma_covers(const tx_cuda_grouped_gemm *g)
{
    if (g->a_dt != g->b_dt ||
        (g->a_dt != TEEXEC_DTYPE_BFLOAT16 && g->a_dt != TEEXEC_DTYPE_FLOAT16))
        return false;
    if (g->n % 8 || g->k % 8 || !g->n || !g->k) return false;
    if (!al16(g->a)) return false;
    int nb = g->kind == TX_GG_WGRAD ? 1 : g->groups;
    for (int i = 0; i < nb; i++)
        if (!al16(g->b[i])) return false;
    for (int i = 0; i < g->groups; i++)
        if (g->out[i] && !al16(g->out[i])) return false;
    return true;
}

extern "C" teexec_status *tx_cuda_grouped_mma_run(const tx_cuda_grouped_gemm *g, void *stream)
{
    mma_params p;
    memset(&p, 0, sizeof p);
    p.kind = g->kind;
    p.groups = g->groups;
    p.split = g->split_sizes;
    p.m = (long long)g->m, p.n = (long long)g->n, p.k = (long long)g->k;
    p.a = g->a;
    p.bias_dt = g->bias_dt;
    p.out_dt = g->out_dt;
    p.alpha_a = g->alpha_a;
    for (int i = 0; i < g->groups; i++) {
        p.alpha_b[i] = g->alpha_b[i];
        p.b[i] = g->b[i];
        p.bias[i] = g->kind == TX_GG_FPROP ? g->bias[i] : nullptr;
        p.out[i] = g->out[i];
    }
    long long blocks;
    if (g->kind == TX_GG_WGRAD) {
        p.tiles_m = (p.n + BM - 1) / BM;
        p.tiles_n = (p.k + BN - 1) / BN;
        blocks = p.tiles_m * p.tiles_n * g->groups;
    } else {
        long long j = g->kind == TX_GG_FPROP ? p.n : p.k;
        /* sum over groups of ceil(s_g / BM) <= ceil(m / BM) + groups */
        p.tiles_m = (p.m + BM - 1) / BM + g->groups;
        p.tiles_n = (j + BN - 1) / BN;
        blocks = p.tiles_m * p.tiles_n;
    }
    if (blocks > 0x7fffffffLL)
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                             "cuda grouped GEMM: too many tiles (%lld)", blocks);
    if (!blocks) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    if (g->a_dt == TEEXEC_DTYPE_BFLOAT16) return launch_kind<__nv_bfloat16>(p, blocks, s);
    return launch_kind<__half>(p, blocks, s);
}
