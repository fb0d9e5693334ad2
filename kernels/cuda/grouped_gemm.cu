/* grouped_gemm.cu - GroupedLinear's GEMMs with device-side group offsets
 * (grouped_gemm.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

#include <mma.h>
#include <cstring>

extern "C" {
#include "kernels/cuda/grouped_gemm.h"
#include "kernels/cuda/grouped_gemm_mma.h"
}

namespace {

constexpr int G_MAX = TX_GG_MAX_GROUPS;

/* The launch's parameters, by value (about 1.6 KB of the 4 KB a kernel may
 * take): per-group pointers need no device array and no host upload. */
struct gg_params {
    int kind, groups;
    const int64_t *split;
    long long m, n, k;
    const void *a;
    int a_dt;
    const void *b[G_MAX];
    int b_dt;
    const void *bias[G_MAX];
    int bias_dt;
    void *out[G_MAX];
    int out_dt;
    const float *alpha_a;
    const float *alpha_b[G_MAX];
};

/* grouped_gemm.h's alpha of group g: *alpha_a * *alpha_b[g], NULL = 1,
 * one FP32 rounding (a multiplication by 1 is exact: no alpha, no change). */
__device__ __forceinline__ float group_alpha(const float *alpha_a, const float *alpha_b)
{
    float a = alpha_a ? *alpha_a : 1.0f;
    return alpha_b ? __fmul_rn(a, *alpha_b) : a;
}

/* Clamped offsets (grouped_gemm.h: negative -> 0, past the rows -> cut) and,
 * with tile_m > 0, each group's first row tile. Thread 0 only; the caller
 * synchronizes. */
__device__ void group_offsets(const int64_t *split, int groups, long long m, int tile_m,
                              long long *off, long long *tile)
{
    off[0] = 0;
    tile[0] = 0;
    for (int g = 0; g < groups; g++) {
        long long s = (long long)split[g];
        long long left = m - off[g];
        s = s < 0 ? 0 : (s > left ? left : s);
        off[g + 1] = off[g] + s;
        tile[g + 1] = tile[g] + (tile_m > 0 ? (s + tile_m - 1) / tile_m : 0);
    }
}

/* One block's sub-problem in generic terms: C(i, j) = sum_l A(i, l) B(l, j),
 * A(i, l) = a[a_off + i*sai + l*sal], B(l, j) = b[b_off + l*sbl + j*sbj],
 * out[o_off + i*ldo + j] for i < I, j < J. */
struct sub {
    const void *b;
    const void *bias;
    void *out;
    long long a_off, sai, sal, b_off, sbl, sbj, o_off, ldo;
    long long I, J, L;
    long long i0; /* first row of this tile within I */
    float alpha;  /* the group's multiplier (grouped_gemm.h) */
};

/* Finds this block's group and tile; false when the block has none. */
__device__ bool locate(const gg_params &p, int tile_m, long long *s_off, long long *s_tile,
                       sub *s)
{
    if (threadIdx.x == 0)
        group_offsets(p.split, p.groups, p.m, p.kind == TX_GG_WGRAD ? 0 : tile_m, s_off, s_tile);
    __syncthreads();
    if (p.kind == TX_GG_WGRAD) {
        int g = blockIdx.y;
        if (!p.out[g]) return false; /* that weight grad is not wanted */
        long long r0 = s_off[g];
        s->b = p.b[0];
        s->bias = nullptr;
        s->out = p.out[g];
        s->a_off = r0 * p.n, s->sai = 1, s->sal = p.n;
        s->b_off = r0 * p.k, s->sbl = p.k, s->sbj = 1;
        s->o_off = 0, s->ldo = p.k;
        s->I = p.n, s->J = p.k, s->L = s_off[g + 1] - r0;
        long long tiles_i = (p.n + tile_m - 1) / tile_m;
        s->i0 = (long long)(blockIdx.x % tiles_i) * tile_m;
        s->alpha = group_alpha(p.alpha_a, p.alpha_b[0]);
        return true;
    }
    long long t = blockIdx.x;
    if (t >= s_tile[p.groups]) return false;
    int g = 0;
    while (g + 1 < p.groups && s_tile[g + 1] <= t) g++;
    long long row0 = s_off[g] + (t - s_tile[g]) * tile_m;
    s->b = p.b[g];
    s->alpha = group_alpha(p.alpha_a, p.alpha_b[g]);
    s->bias = p.kind == TX_GG_FPROP ? p.bias[g] : nullptr;
    s->out = p.out[0];
    s->i0 = 0;
    s->I = s_off[g + 1] - row0;
    if (p.kind == TX_GG_FPROP) {
        s->a_off = row0 * p.k, s->sai = p.k, s->sal = 1;
        s->b_off = 0, s->sbl = 1, s->sbj = p.k;
        s->o_off = row0 * p.n, s->ldo = p.n;
        s->J = p.n, s->L = p.k;
    } else {
        s->a_off = row0 * p.n, s->sai = p.n, s->sal = 1;
        s->b_off = 0, s->sbl = p.k, s->sbj = 1;
        s->o_off = row0 * p.k, s->ldo = p.k;
        s->J = p.k, s->L = p.n;
    }
    return true;
}

/* The column tile of this block: FPROP / DGRAD blockIdx.y, WGRAD the
 * quotient of blockIdx.x by the row tiles. */
__device__ long long col_tile(const gg_params &p, int tile_m, int tile_n)
{
    if (p.kind == TX_GG_WGRAD) {
        long long tiles_i = (p.n + tile_m - 1) / tile_m;
        return (long long)(blockIdx.x / tiles_i) * tile_n;
    }
    return (long long)blockIdx.y * tile_n;
}

/* ---- FP32-FMA kernel (any dtype mix) ------------------------------------ */

constexpr int FM = 64, FN = 64, FK = 16, FT = 256;

__global__ void __launch_bounds__(FT) gg_fma(gg_params p)
{
    __shared__ long long s_off[G_MAX + 1], s_tile[G_MAX + 1];
    __shared__ float As[FK][FM], Bs[FK][FN];
    sub s;
    if (!locate(p, FM, s_off, s_tile, &s)) return;
    const long long j0 = col_tile(p, FM, FN), i0 = s.i0;
    const int t = threadIdx.x, ty = t / 16, tx = t % 16;
    float acc[4][4];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) acc[a][b] = 0.0f;
    for (long long l0 = 0; l0 < s.L; l0 += FK) {
        for (int e = t; e < FM * FK; e += FT) {
            int i, l;
            if (s.sal == 1) i = e / FK, l = e % FK;
            else i = e % FM, l = e / FM;
            long long gi = i0 + i, gl = l0 + l;
            As[l][i] = gi < s.I && gl < s.L ? tx_ld(p.a, (size_t)(s.a_off + gi * s.sai + gl * s.sal), p.a_dt)
                                            : 0.0f;
        }
        for (int e = t; e < FK * FN; e += FT) {
            int j, l;
            if (s.sbj == 1) j = e % FN, l = e / FN;
            else j = e / FK, l = e % FK;
            long long gj = j0 + j, gl = l0 + l;
            Bs[l][j] = gj < s.J && gl < s.L ? tx_ld(s.b, (size_t)(s.b_off + gl * s.sbl + gj * s.sbj), p.b_dt)
                                            : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int l = 0; l < FK; l++) {
            float av[4], bv[4];
            for (int a = 0; a < 4; a++) av[a] = As[l][ty + 16 * a];
            for (int b = 0; b < 4; b++) bv[b] = Bs[l][tx + 16 * b];
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) acc[a][b] = fmaf(av[a], bv[b], acc[a][b]);
        }
        __syncthreads();
    }
    for (int a = 0; a < 4; a++) {
        long long gi = i0 + ty + 16 * a;
        if (gi >= s.I) continue;
        for (int b = 0; b < 4; b++) {
            long long gj = j0 + tx + 16 * b;
            if (gj >= s.J) continue;
            float v = __fmul_rn(acc[a][b], s.alpha);
            if (s.bias) v += tx_ld(s.bias, (size_t)gj, p.bias_dt);
            tx_st(s.out, (size_t)(s.o_off + gi * s.ldo + gj), p.out_dt, v);
        }
    }
}

/* ---- tensor-core kernel (bf16 / fp16 operands of one dtype) -------------- */

constexpr int WM = 128, WN = 128, WK = 32, WT = 256;
constexpr int A_LD = WK + 8, B_LD = WN + 8; /* pads: fewer bank conflicts, 32-byte rows kept */

/* dst[r][c] = src[off + (r0 + r) * s_r + (c0 + c) * s_c] inside [Rlim, Clim),
 * 0 outside, for a ROWS x COLS tile of 16-bit values. With `vec` (see
 * vec_ok) the contiguous dim is read 8 values (16 bytes) at a time; the
 * loop order keeps neighbouring threads on neighbouring addresses. */
template <typename T, int ROWS, int COLS, int LD>
__device__ __forceinline__ void load_tile(T (*dst)[LD], const T *src, long long off, long long s_r,
                                          long long s_c, long long r0, long long c0,
                                          long long rlim, long long clim, bool vec)
{
    const int t = threadIdx.x;
    const T zero = T(0.0f);
    if (vec && s_c == 1) {
        for (int e = t; e < ROWS * COLS / 8; e += WT) {
            int r = e / (COLS / 8), c = (e % (COLS / 8)) * 8;
            long long gr = r0 + r, gc = c0 + c;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (gr < rlim && gc < clim) v = *(const uint4 *)(src + off + gr * s_r + gc);
            *(uint4 *)&dst[r][c] = v;
        }
        return;
    }
    if (vec && s_r == 1) {
        for (int e = t; e < ROWS * COLS / 8; e += WT) {
            int r = (e % (ROWS / 8)) * 8, c = e / (ROWS / 8);
            long long gr = r0 + r, gc = c0 + c;
            uint4 v = make_uint4(0, 0, 0, 0);
            if (gr < rlim && gc < clim) v = *(const uint4 *)(src + off + gr + gc * s_c);
            const T *h = (const T *)&v;
            for (int q = 0; q < 8; q++) dst[r + q][c] = h[q];
        }
        return;
    }
    for (int e = t; e < ROWS * COLS; e += WT) {
        int r, c;
        if (s_c == 1) r = e / COLS, c = e % COLS;
        else r = e % ROWS, c = e / ROWS;
        long long gr = r0 + r, gc = c0 + c;
        dst[r][c] = gr < rlim && gc < clim ? src[off + gr * s_r + gc * s_c] : zero;
    }
}

/* 16-byte loads are exact when one stride is 1, everything else (the other
 * stride, the offset, the contiguous dim's extent, the base) is a multiple
 * of 8 values: then a vector is wholly inside or wholly outside. */
template <typename T>
__device__ __forceinline__ bool vec_ok(const T *src, long long off, long long s_r, long long s_c,
                                       long long rlim, long long clim)
{
    if ((uintptr_t)src % 16 || off % 8) return false;
    if (s_c == 1) return s_r % 8 == 0 && clim % 8 == 0;
    if (s_r == 1) return s_c % 8 == 0 && rlim % 8 == 0;
    return false;
}

template <typename T>
__global__ void __launch_bounds__(WT) gg_wmma(gg_params p)
{
    using namespace nvcuda;
    __shared__ long long s_off[G_MAX + 1], s_tile[G_MAX + 1];
    __shared__ __align__(32) T As[WM][A_LD];
    __shared__ __align__(32) T Bs[WK][B_LD];
    __shared__ __align__(32) float stage[WT / 32][16 * 16];
    sub s;
    if (!locate(p, WM, s_off, s_tile, &s)) return;
    const long long j0 = col_tile(p, WM, WN), i0 = s.i0;
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int wm = warp / 4, wn = warp % 4; /* 2 x 4 warps, each 64 x 32 */
    const T *A = (const T *)p.a, *B = (const T *)s.b;
    const bool vec_a = vec_ok(A, s.a_off, s.sai, s.sal, s.I, s.L);
    const bool vec_b = vec_ok(B, s.b_off, s.sbl, s.sbj, s.L, s.J);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++) wmma::fill_fragment(acc[a][b], 0.0f);
    for (long long l0 = 0; l0 < s.L; l0 += WK) {
        load_tile<T, WM, WK, A_LD>(As, A, s.a_off, s.sai, s.sal, i0, l0, s.I, s.L, vec_a);
        load_tile<T, WK, WN, B_LD>(Bs, B, s.b_off, s.sbl, s.sbj, l0, j0, s.L, s.J, vec_b);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < WK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[2];
            for (int a = 0; a < 4; a++) wmma::load_matrix_sync(fa[a], &As[wm * 64 + a * 16][kk], A_LD);
            for (int b = 0; b < 2; b++) wmma::load_matrix_sync(fb[b], &Bs[kk][wn * 32 + b * 16], B_LD);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 2; b++) wmma::mma_sync(acc[a][b], fa[a], fb[b], acc[a][b]);
        }
        __syncthreads();
    }
    float *st = stage[warp];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++) {
            wmma::store_matrix_sync(st, acc[a][b], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                long long gi = i0 + wm * 64 + a * 16 + e / 16;
                long long gj = j0 + wn * 32 + b * 16 + e % 16;
                if (gi < s.I && gj < s.J) {
                    float v = __fmul_rn(st[e], s.alpha);
                    if (s.bias) v += tx_ld(s.bias, (size_t)gj, p.bias_dt);
                    tx_st(s.out, (size_t)(s.o_off + gi * s.ldo + gj), p.out_dt, v);
                }
            }
            __syncwarp();
        }
}

/* ---- dbias and the tail ------------------------------------------------- */

struct db_params {
    const int64_t *split;
    int groups;
    long long m, n;
    const void *dy;
    int dy_dt;
    void *db[G_MAX];
    int db_dt;
};

__global__ void gg_dbias(db_params p)
{
    __shared__ long long s_off[G_MAX + 1], s_tile[G_MAX + 1];
    if (threadIdx.x == 0) group_offsets(p.split, p.groups, p.m, 0, s_off, s_tile);
    __syncthreads();
    int g = blockIdx.y;
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (!p.db[g] || j >= p.n) return;
    double acc = 0.0;
    for (long long r = s_off[g]; r < s_off[g + 1]; r++)
        acc += (double)tx_ld(p.dy, (size_t)(r * p.n + j), p.dy_dt);
    tx_st(p.db[g], (size_t)j, p.db_dt, (float)acc);
}

__global__ void gg_zero_tail(const int64_t *split, int groups, long long m, long long cols,
                             void *t, int dt)
{
    __shared__ long long s_off[G_MAX + 1], s_tile[G_MAX + 1];
    if (threadIdx.x == 0) group_offsets(split, groups, m, 0, s_off, s_tile);
    __syncthreads();
    long long end = m * cols;
    for (long long i = s_off[groups] * cols + (long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < end; i += (long long)gridDim.x * blockDim.x)
        tx_st(t, (size_t)i, dt, 0.0f);
}

unsigned div_up(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

teexec_status *bad(const char *what)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda grouped GEMM: %s", what);
}

} // namespace

extern "C" bool tx_cuda_grouped_gemm_uses_mma(const tx_cuda_grouped_gemm *g)
{
    return !g->force_general && tx_cuda_grouped_mma_covers(g);
}

extern "C" teexec_status *tx_cuda_grouped_gemm_run(const tx_cuda_grouped_gemm *g, void *stream)
{
    if (g->groups < 1 || g->groups > G_MAX) return bad("groups must be 1..64");
    if (!tx_io_dtype_ok(g->a_dt) || !tx_io_dtype_ok(g->b_dt) || !tx_io_dtype_ok(g->out_dt) ||
        (g->kind == TX_GG_FPROP && !tx_io_dtype_ok(g->bias_dt) && g->bias[0]))
        return bad("tensors must be float, bfloat16 or float16");
    if (!g->split_sizes || !g->a) return bad("split sizes and the first operand must be given");
    if (g->kind != TX_GG_FPROP && g->kind != TX_GG_DGRAD && g->kind != TX_GG_WGRAD)
        return bad("unknown GEMM kind");
    int nb = g->kind == TX_GG_WGRAD ? 1 : g->groups;
    for (int i = 0; i < nb; i++)
        if (!g->b[i]) return bad("a weight (or WGRAD's x) is missing");
    if (g->kind != TX_GG_WGRAD && !g->out[0]) return bad("the output is missing");
    /* index arithmetic runs in long long */
    if (g->m > (1ull << 40) || g->n > (1ull << 31) || g->k > (1ull << 31) ||
        g->m * (g->n > g->k ? g->n : g->k) > (1ull << 62))
        return bad("matrices too large");
    if (!g->m || !g->n || !g->k) {
        if (g->kind != TX_GG_WGRAD || !g->n || !g->k) return NULL;
        /* m = 0: every dW_g is 0 (the launch below sums no rows) */
    }
    if (tx_cuda_grouped_gemm_uses_mma(g)) return tx_cuda_grouped_mma_run(g, stream);
    gg_params p;
    memset(&p, 0, sizeof p);
    p.kind = g->kind;
    p.groups = g->groups;
    p.split = g->split_sizes;
    p.m = (long long)g->m, p.n = (long long)g->n, p.k = (long long)g->k;
    p.a = g->a;
    p.a_dt = g->a_dt;
    p.b_dt = g->b_dt;
    p.bias_dt = g->bias_dt;
    p.out_dt = g->out_dt;
    p.alpha_a = g->alpha_a;
    for (int i = 0; i < g->groups; i++) {
        p.b[i] = g->b[i];
        p.bias[i] = g->kind == TX_GG_FPROP ? g->bias[i] : nullptr;
        p.out[i] = g->out[i];
        p.alpha_b[i] = g->alpha_b[i];
    }
    const bool tc = g->a_dt == g->b_dt &&
                    (g->a_dt == TEEXEC_DTYPE_BFLOAT16 || g->a_dt == TEEXEC_DTYPE_FLOAT16);
    const int tm = tc ? WM : FM, tn = tc ? WN : FN;
    dim3 grid;
    if (g->kind == TX_GG_WGRAD) {
        size_t tiles = (size_t)div_up(g->n, tm) * div_up(g->k, tn);
        if (tiles > 0x7fffffffu) return bad("too many tiles");
        grid = dim3((unsigned)tiles, (unsigned)g->groups, 1);
    } else {
        size_t rows = (size_t)div_up(g->m, tm) + (size_t)g->groups; /* >= sum of ceil(s_g / tm) */
        size_t cols = div_up(g->kind == TX_GG_FPROP ? g->n : g->k, tn);
        if (rows > 0x7fffffffu || cols > 65535u) return bad("too many tiles");
        grid = dim3((unsigned)rows, (unsigned)cols, 1);
    }
    cudaStream_t s = (cudaStream_t)stream;
    if (!tc) gg_fma<<<grid, FT, 0, s>>>(p);
    else if (g->a_dt == TEEXEC_DTYPE_BFLOAT16) gg_wmma<__nv_bfloat16><<<grid, WT, 0, s>>>(p);
    else gg_wmma<__half><<<grid, WT, 0, s>>>(p);
    TX_CUDA_LAUNCHED("grouped GEMM");
    return NULL;
}

extern "C" teexec_status *tx_cuda_grouped_dbias(const int64_t *split_sizes, int groups, size_t m,
                                                size_t n, const void *dy, teexec_dtype dy_dt,
                                                void *const *dbias, teexec_dtype dbias_dt,
                                                void *stream)
{
    if (groups < 1 || groups > G_MAX) return bad("groups must be 1..64");
    if (!tx_io_dtype_ok(dy_dt) || !tx_io_dtype_ok(dbias_dt))
        return bad("dbias: tensors must be float, bfloat16 or float16");
    if (!split_sizes || (!dy && m)) return bad("dbias: split sizes or dy missing");
    if (!n) return NULL;
    if (m > (1ull << 40) || n > (1ull << 31)) return bad("dbias: too large");
    db_params p;
    memset(&p, 0, sizeof p);
    p.split = split_sizes;
    p.groups = groups;
    p.m = (long long)m, p.n = (long long)n;
    p.dy = dy;
    p.dy_dt = dy_dt;
    p.db_dt = dbias_dt;
    for (int i = 0; i < groups; i++) p.db[i] = dbias[i];
    gg_dbias<<<dim3(div_up(n, 256), (unsigned)groups, 1), 256, 0, (cudaStream_t)stream>>>(p);
    TX_CUDA_LAUNCHED("grouped dbias");
    return NULL;
}

extern "C" teexec_status *tx_cuda_grouped_zero_tail(const int64_t *split_sizes, int groups,
                                                    size_t m, size_t cols, void *t,
                                                    teexec_dtype dt, void *stream)
{
    if (groups < 1 || groups > G_MAX) return bad("groups must be 1..64");
    if (!tx_io_dtype_ok(dt)) return bad("zero tail: tensor must be float, bfloat16 or float16");
    if (!split_sizes || (!t && m && cols)) return bad("zero tail: split sizes or tensor missing");
    if (!m || !cols) return NULL;
    if (m > (1ull << 40) || cols > (1ull << 31)) return bad("zero tail: too large");
    size_t blocks = div_up(m * cols, 256);
    if (blocks > 1024) blocks = 1024;
    gg_zero_tail<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(
        split_sizes, groups, (long long)m, (long long)cols, t, dt);
    TX_CUDA_LAUNCHED("grouped zero tail");
    return NULL;
}
