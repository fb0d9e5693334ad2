/*
 * attention_fallback.cu - plain CUDA attention (see attention_fallback.h).
 *
 * Forward: one block per (32 query rows, head, batch) walks the keys in
 * tiles of 32 with the online softmax (running max m and sum l per row),
 * so scores are never stored beyond one tile. A few query rows (decode:
 * s_q = 1 against a cache) would leave 31 of the 32 rows of every tile
 * idle and one block per head, so there one block per (query row, head,
 * batch) splits the keys over its warps instead: each warp keeps its own
 * online softmax over every DEC_WARPS-th key (a lane holds 32-strided
 * channels of q and of its output row, the score is a warp sum), and the
 * warps' partial results are merged once at the end. Backward: D = rowsum(dO*O)
 * first; then dQ per query tile (looping over keys) and dK/dV per key tile
 * (looping over the query heads of its kv group and over queries), each
 * accumulating in shared memory in a fixed order: deterministic without
 * atomics. P is recomputed from the saved log-sum-exp, as in the CPU
 * reference. Rows of shared tiles that are read lane-by-lane along the row
 * index are padded by one float against bank conflicts.
 */
#include "kernels/cuda/attention_fallback.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

#include <math.h>
#include <stdint.h>

namespace {

constexpr int BQ = 32, BK = 32, THREADS = 128;
/* Up to this many query rows the forward runs attn_decode_kernel. */
constexpr int64_t DECODE_MAX_SQ = 4;

struct geom {
    int64_t b, h, hk, sq, skv, d, dv, mb, mh;
    int sbhd, causal, mask_kind, dt, mdt;
    float scale;
    const int64_t *cl; /* cache mode: per batch row, its cached length (device) */
};

/* Keys row bi's query i may see at most: [0, keys_upto) (causal and cache
 * bounds; explicit masks come on top). */
__device__ __forceinline__ int64_t keys_upto(const geom &g, int64_t bi, int64_t i)
{
    int64_t e = g.skv;
    if (g.cl) e = g.causal ? g.cl[bi] + i + 1 : g.cl[bi] + g.sq;
    else if (g.causal) e = i + 1 + g.skv - g.sq;
    return e < 0 ? 0 : (e > g.skv ? g.skv : e);
}

/* Element offset of channel 0 of (batch, seq, head) in a bshd / sbhd tensor. */
__device__ __forceinline__ int64_t row_off(const geom &g, int64_t bi, int64_t si, int64_t s,
                                           int64_t hi, int64_t nh, int64_t c)
{
    return g.sbhd ? ((si * g.b + bi) * nh + hi) * c : ((bi * s + si) * nh + hi) * c;
}

/* The scaled score s of (query i, key j) after every mask; -inf = hidden. */
__device__ __forceinline__ float masked(const geom &g, const void *mask, const int32_t *lq,
                                        const int32_t *lk, int64_t bi, int64_t hi, int64_t i,
                                        int64_t j, float s)
{
    if (i >= g.sq || j >= g.skv) return -INFINITY;
    if (j >= keys_upto(g, bi, i)) return -INFINITY;
    if (g.mask_kind == TX_ATTN_MASK_PADDING) {
        if (i >= lq[bi] || j >= lk[bi]) return -INFINITY;
    } else if (g.mask_kind != TX_ATTN_MASK_NONE) {
        int64_t mo = (((g.mb > 1 ? bi : 0) * g.mh + (g.mh > 1 ? hi : 0)) * g.sq + i) * g.skv + j;
        if (g.mask_kind == TX_ATTN_MASK_BOOL) {
            if (((const uint8_t *)mask)[mo]) return -INFINITY;
        } else {
            s += tx_ld(mask, (size_t)mo, g.mdt);
        }
    }
    return s;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Loads rows [r0, r0+n) of head hi of a [.., s, nh, c] tensor into
 * dst[row * stride + ch] as float; rows past s are zero. */
__device__ void load_tile(const geom &g, const void *src, int64_t bi, int64_t r0, int n, int64_t s,
                          int64_t hi, int64_t nh, int64_t c, float *dst, int stride)
{
    for (int64_t e = threadIdx.x; e < (int64_t)n * c; e += blockDim.x) {
        int r = (int)(e / c), ch = (int)(e % c);
        float v = 0.0f;
        if (r0 + r < s) v = tx_ld(src, (size_t)(row_off(g, bi, r0 + r, s, hi, nh, c) + ch), g.dt);
        dst[r * stride + ch] = v;
    }
}

/* Keys [0, key_end(q0)) can be seen by query rows [q0, q0+BQ). */
__device__ __forceinline__ int64_t key_end(const geom &g, int64_t q0, int64_t bi)
{
    if (g.cl) return keys_upto(g, bi, q0 + BQ - 1 < g.sq ? q0 + BQ - 1 : g.sq - 1);
    if (!g.causal) return g.skv;
    int64_t e = q0 + BQ + g.skv - g.sq;
    return e < 0 ? 0 : (e > g.skv ? g.skv : e);
}

__global__ void attn_fwd_kernel(geom g, const void *q, const void *k, const void *v,
                                const void *mask, const int32_t *lq, const int32_t *lk, void *o,
                                float *lse)
{
    extern __shared__ float sm[];
    const int d = (int)g.d, dv = (int)g.dv, kst = d + 1;
    float *Qs = sm, *Ks = Qs + BQ * d, *Vs = Ks + BK * kst, *Os = Vs + BK * dv,
          *Ss = Os + BQ * dv, *m = Ss + BQ * BK, *l = m + BQ, *alpha = l + BQ;
    const int64_t q0 = (int64_t)blockIdx.x * BQ, hi = blockIdx.y, bi = blockIdx.z;
    const int64_t kh = hi / (g.h / g.hk);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    load_tile(g, q, bi, q0, BQ, g.sq, hi, g.h, d, Qs, d);
    for (int e = threadIdx.x; e < BQ * dv; e += blockDim.x) Os[e] = 0.0f;
    if (threadIdx.x < BQ) {
        m[threadIdx.x] = -INFINITY;
        l[threadIdx.x] = 0.0f;
    }
    const int64_t kend = key_end(g, q0, bi);
    for (int64_t k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads();
        load_tile(g, k, bi, k0, BK, g.skv, kh, g.hk, d, Ks, kst);
        load_tile(g, v, bi, k0, BK, g.skv, kh, g.hk, dv, Vs, dv);
        __syncthreads();
        for (int e = threadIdx.x; e < BQ * BK; e += blockDim.x) {
            int r = e / BK, c = e % BK;
            float acc = 0.0f;
            for (int t = 0; t < d; t++) acc += Qs[r * d + t] * Ks[c * kst + t];
            Ss[e] = masked(g, mask, lq, lk, bi, hi, q0 + r, k0 + c, acc * g.scale);
        }
        __syncthreads();
        for (int rr = 0; rr < BQ / (THREADS / 32); rr++) {
            int r = warp * (BQ / (THREADS / 32)) + rr;
            float s = Ss[r * BK + lane];
            float mo = m[r], mn = fmaxf(mo, warp_max(s));
            float p = mn == -INFINITY ? 0.0f : expf(s - mn);
            float sum = warp_sum(p);
            Ss[r * BK + lane] = p;
            if (lane == 0) {
                float a = mo == -INFINITY ? 0.0f : expf(mo - mn);
                l[r] = l[r] * a + sum;
                alpha[r] = a;
                m[r] = mn;
            }
        }
        __syncthreads();
        for (int e = threadIdx.x; e < BQ * dv; e += blockDim.x) {
            int r = e / dv, c = e % dv;
            float acc = 0.0f;
            for (int j = 0; j < BK; j++) acc += Ss[r * BK + j] * Vs[j * dv + c];
            Os[e] = Os[e] * alpha[r] + acc;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < BQ * dv; e += blockDim.x) {
        int r = e / dv, c = e % dv;
        if (q0 + r >= g.sq) continue;
        float val = l[r] > 0.0f ? Os[e] / l[r] : 0.0f;
        tx_st(o, (size_t)(row_off(g, bi, q0 + r, g.sq, hi, g.h, dv) + c), g.dt, val);
    }
    if (lse && threadIdx.x < BQ && q0 + threadIdx.x < g.sq) {
        int r = threadIdx.x;
        lse[(bi * g.h + hi) * g.sq + q0 + r] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
    }
}

/* 16 warps: each key costs a chain of dependent loads and a warp sum, so
 * the keys are spread over as many warps as a block holds well */
constexpr int DEC_WARPS = 16, DEC_CH = 8; /* channels per lane: head dims <= 256 */

/* One query row i of head hi, batch bi (see the file comment). */
__global__ void attn_decode_kernel(geom g, const void *q, const void *k, const void *v,
                                   const void *mask, const int32_t *lq, const int32_t *lk,
                                   void *o, float *lse)
{
    __shared__ float wm[DEC_WARPS], wl[DEC_WARPS], wacc[DEC_WARPS][DEC_CH * 32];
    const int64_t i = blockIdx.x, hi = blockIdx.y, bi = blockIdx.z;
    const int64_t kh = hi / (g.h / g.hk);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int d = (int)g.d, dv = (int)g.dv;
    float qr[DEC_CH], acc[DEC_CH];
    const int64_t qo = row_off(g, bi, i, g.sq, hi, g.h, d);
#pragma unroll
    for (int t = 0; t < DEC_CH; t++) {
        int c = lane + 32 * t;
        qr[t] = c < d ? tx_ld(q, (size_t)(qo + c), g.dt) : 0.0f;
        acc[t] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int64_t kend = keys_upto(g, bi, i);
    for (int64_t j = warp; j < kend; j += DEC_WARPS) {
        const int64_t ko = row_off(g, bi, j, g.skv, kh, g.hk, d);
        float part = 0.0f;
#pragma unroll
        for (int t = 0; t < DEC_CH; t++) {
            int c = lane + 32 * t;
            if (c < d) part += qr[t] * tx_ld(k, (size_t)(ko + c), g.dt);
        }
        float sc = masked(g, mask, lq, lk, bi, hi, i, j, warp_sum(part) * g.scale);
        if (sc == -INFINITY) continue; /* the same for every lane */
        float mn = fmaxf(m, sc);
        float a = m == -INFINITY ? 0.0f : expf(m - mn), p = expf(sc - mn);
        l = l * a + p;
        m = mn;
        const int64_t vo = row_off(g, bi, j, g.skv, kh, g.hk, dv);
#pragma unroll
        for (int t = 0; t < DEC_CH; t++) {
            int c = lane + 32 * t;
            if (c < dv) acc[t] = acc[t] * a + p * tx_ld(v, (size_t)(vo + c), g.dt);
        }
    }
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
#pragma unroll
    for (int t = 0; t < DEC_CH; t++) wacc[warp][lane + 32 * t] = acc[t];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < DEC_WARPS; w++) M = fmaxf(M, wm[w]);
    float L = 0.0f;
    for (int w = 0; w < DEC_WARPS; w++)
        if (wm[w] != -INFINITY) L += wl[w] * expf(wm[w] - M);
    const int64_t oo = row_off(g, bi, i, g.sq, hi, g.h, dv);
    for (int c = threadIdx.x; c < dv; c += blockDim.x) {
        float val = 0.0f;
        if (L > 0.0f) {
            for (int w = 0; w < DEC_WARPS; w++)
                if (wm[w] != -INFINITY) val += wacc[w][c] * expf(wm[w] - M);
            val /= L;
        }
        tx_st(o, (size_t)(oo + c), g.dt, val);
    }
    if (lse && threadIdx.x == 0) lse[(bi * g.h + hi) * g.sq + i] = L > 0.0f ? M + logf(L) : -INFINITY;
}

/* D[bi, hi, i] = sum_c dO * O, one warp per row. */
__global__ void attn_bwd_dot_kernel(geom g, const void *o, const void *d_o, float *D)
{
    int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (row >= g.b * g.h * g.sq) return;
    int64_t i = row % g.sq, hi = (row / g.sq) % g.h, bi = row / (g.sq * g.h);
    int64_t base = row_off(g, bi, i, g.sq, hi, g.h, g.dv);
    float acc = 0.0f;
    for (int64_t c = threadIdx.x & 31; c < g.dv; c += 32)
        acc += tx_ld(o, (size_t)(base + c), g.dt) * tx_ld(d_o, (size_t)(base + c), g.dt);
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) D[row] = acc;
}

__global__ void attn_bwd_dq_kernel(geom g, const void *q, const void *k, const void *v,
                                   const void *d_o, const float *lse, const float *D,
                                   const void *mask, const int32_t *lq, const int32_t *lk,
                                   void *dq)
{
    extern __shared__ float sm[];
    const int d = (int)g.d, dv = (int)g.dv, kst = d + 1, vst = dv + 1;
    float *Qs = sm, *dOs = Qs + BQ * d, *Ks = dOs + BQ * dv, *Vs = Ks + BK * kst,
          *dSs = Vs + BK * vst, *dQs = dSs + BQ * BK, *L = dQs + BQ * d, *Dr = L + BQ;
    const int64_t q0 = (int64_t)blockIdx.x * BQ, hi = blockIdx.y, bi = blockIdx.z;
    const int64_t kh = hi / (g.h / g.hk);

    load_tile(g, q, bi, q0, BQ, g.sq, hi, g.h, d, Qs, d);
    load_tile(g, d_o, bi, q0, BQ, g.sq, hi, g.h, dv, dOs, dv);
    for (int e = threadIdx.x; e < BQ * d; e += blockDim.x) dQs[e] = 0.0f;
    if (threadIdx.x < BQ) {
        int64_t i = q0 + threadIdx.x, ri = (bi * g.h + hi) * g.sq + i;
        L[threadIdx.x] = i < g.sq ? lse[ri] : -INFINITY;
        Dr[threadIdx.x] = i < g.sq ? D[ri] : 0.0f;
    }
    const int64_t kend = key_end(g, q0, bi);
    for (int64_t k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads();
        load_tile(g, k, bi, k0, BK, g.skv, kh, g.hk, d, Ks, kst);
        load_tile(g, v, bi, k0, BK, g.skv, kh, g.hk, dv, Vs, vst);
        __syncthreads();
        for (int e = threadIdx.x; e < BQ * BK; e += blockDim.x) {
            int r = e / BK, c = e % BK;
            float s = 0.0f, dp = 0.0f;
            for (int t = 0; t < d; t++) s += Qs[r * d + t] * Ks[c * kst + t];
            s = masked(g, mask, lq, lk, bi, hi, q0 + r, k0 + c, s * g.scale);
            float p = s == -INFINITY || L[r] == -INFINITY ? 0.0f : expf(s - L[r]);
            if (p != 0.0f)
                for (int t = 0; t < dv; t++) dp += dOs[r * dv + t] * Vs[c * vst + t];
            dSs[e] = p * (dp - Dr[r]);
        }
        __syncthreads();
        for (int e = threadIdx.x; e < BQ * d; e += blockDim.x) {
            int r = e / d, t = e % d;
            float acc = 0.0f;
            for (int j = 0; j < BK; j++) acc += dSs[r * BK + j] * Ks[j * kst + t];
            dQs[e] += acc;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < BQ * d; e += blockDim.x) {
        int r = e / d, t = e % d;
        if (q0 + r >= g.sq) continue;
        tx_st(dq, (size_t)(row_off(g, bi, q0 + r, g.sq, hi, g.h, d) + t), g.dt, dQs[e] * g.scale);
    }
}

__global__ void attn_bwd_dkv_kernel(geom g, const void *q, const void *k, const void *v,
                                    const void *d_o, const float *lse, const float *D,
                                    const void *mask, const int32_t *lq, const int32_t *lk,
                                    void *dk, void *dvo)
{
    extern __shared__ float sm[];
    const int d = (int)g.d, dv = (int)g.dv, qst = d + 1, ost = dv + 1;
    float *Ks = sm, *Vs = Ks + BK * d, *Qs = Vs + BK * dv, *dOs = Qs + BQ * qst,
          *Ps = dOs + BQ * ost, *dSs = Ps + BQ * BK, *dKs = dSs + BQ * BK, *dVs = dKs + BK * d,
          *L = dVs + BK * dv, *Dr = L + BQ;
    const int64_t k0 = (int64_t)blockIdx.x * BK, kh = blockIdx.y, bi = blockIdx.z;
    const int64_t grp = g.h / g.hk;

    load_tile(g, k, bi, k0, BK, g.skv, kh, g.hk, d, Ks, d);
    load_tile(g, v, bi, k0, BK, g.skv, kh, g.hk, dv, Vs, dv);
    for (int e = threadIdx.x; e < BK * d; e += blockDim.x) dKs[e] = 0.0f;
    for (int e = threadIdx.x; e < BK * dv; e += blockDim.x) dVs[e] = 0.0f;
    /* causal: query i sees key j when i >= j - (s_kv - s_q) */
    int64_t qstart = g.causal ? k0 - (g.skv - g.sq) : 0;
    qstart = qstart < 0 ? 0 : qstart / BQ * BQ;
    for (int64_t gi = 0; gi < grp; gi++) {
        const int64_t hi = kh * grp + gi;
        for (int64_t q0 = qstart; q0 < g.sq; q0 += BQ) {
            __syncthreads();
            load_tile(g, q, bi, q0, BQ, g.sq, hi, g.h, d, Qs, qst);
            load_tile(g, d_o, bi, q0, BQ, g.sq, hi, g.h, dv, dOs, ost);
            if (threadIdx.x < BQ) {
                int64_t i = q0 + threadIdx.x, ri = (bi * g.h + hi) * g.sq + i;
                L[threadIdx.x] = i < g.sq ? lse[ri] : -INFINITY;
                Dr[threadIdx.x] = i < g.sq ? D[ri] : 0.0f;
            }
            __syncthreads();
            for (int e = threadIdx.x; e < BQ * BK; e += blockDim.x) {
                int c = e / BQ, r = e % BQ;
                float s = 0.0f, dp = 0.0f;
                for (int t = 0; t < d; t++) s += Qs[r * qst + t] * Ks[c * d + t];
                s = masked(g, mask, lq, lk, bi, hi, q0 + r, k0 + c, s * g.scale);
                float p = s == -INFINITY || L[r] == -INFINITY ? 0.0f : expf(s - L[r]);
                if (p != 0.0f)
                    for (int t = 0; t < dv; t++) dp += dOs[r * ost + t] * Vs[c * dv + t];
                Ps[r * BK + c] = p;
                dSs[r * BK + c] = p * (dp - Dr[r]);
            }
            __syncthreads();
            for (int e = threadIdx.x; e < BK * dv; e += blockDim.x) {
                int c = e / dv, t = e % dv;
                float acc = 0.0f;
                for (int r = 0; r < BQ; r++) acc += Ps[r * BK + c] * dOs[r * ost + t];
                dVs[e] += acc;
            }
            for (int e = threadIdx.x; e < BK * d; e += blockDim.x) {
                int c = e / d, t = e % d;
                float acc = 0.0f;
                for (int r = 0; r < BQ; r++) acc += dSs[r * BK + c] * Qs[r * qst + t];
                dKs[e] += acc;
            }
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < BK * d; e += blockDim.x) {
        int c = e / d, t = e % d;
        if (k0 + c < g.skv)
            tx_st(dk, (size_t)(row_off(g, bi, k0 + c, g.skv, kh, g.hk, d) + t), g.dt,
                  dKs[e] * g.scale);
    }
    for (int e = threadIdx.x; e < BK * dv; e += blockDim.x) {
        int c = e / dv, t = e % dv;
        if (k0 + c < g.skv)
            tx_st(dvo, (size_t)(row_off(g, bi, k0 + c, g.skv, kh, g.hk, dv) + t), g.dt, dVs[e]);
    }
}

size_t fwd_smem(int64_t d, int64_t dv)
{
    return sizeof(float) * (size_t)(BQ * d + BK * (d + 1) + BK * dv + BQ * dv + BQ * BK + 3 * BQ);
}

size_t dq_smem(int64_t d, int64_t dv)
{
    return sizeof(float) *
           (size_t)(BQ * d + BQ * dv + BK * (d + 1) + BK * (dv + 1) + BQ * BK + BQ * d + 2 * BQ);
}

size_t dkv_smem(int64_t d, int64_t dv)
{
    return sizeof(float) * (size_t)(BK * d + BK * dv + BQ * (d + 1) + BQ * (dv + 1) +
                                    2 * BQ * BK + BK * d + BK * dv + 2 * BQ);
}

geom geom_of(const tx_attn_desc *a)
{
    geom g;
    g.b = a->b;
    g.h = a->h;
    g.hk = a->h_kv;
    g.sq = a->s_q;
    g.skv = a->s_kv;
    g.d = a->d;
    g.dv = a->d_v;
    g.mb = a->mask_b;
    g.mh = a->mask_h;
    g.sbhd = a->sbhd;
    g.causal = a->causal;
    g.mask_kind = a->mask_kind;
    g.dt = a->dtype;
    g.mdt = a->mask_dtype;
    g.scale = tx_attn_scale(a);
    g.cl = NULL;
    return g;
}

/* One thread per element of the new k or v (32-bit words, so bf16 pairs
 * move together when the channel count is even). */
template <typename W>
__global__ void cache_append_kernel(const W *src, W *dst, const int64_t *cl, int64_t b,
                                    int64_t sq, int64_t cap, int64_t row_words)
{
    int64_t n = b * sq * row_words;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t w = e % row_words, t = e / row_words, i = t % sq, bi = t / sq;
        int64_t pos = cl[bi] + i;
        if (pos < 0 || pos >= cap) continue;
        dst[(bi * cap + pos) * row_words + w] = src[e];
    }
}

teexec_status *append_one(const void *src, void *dst, const int64_t *cl, int64_t b, int64_t sq,
                          int64_t cap, int64_t row_elems, teexec_dtype dt, cudaStream_t s)
{
    size_t es = (size_t)teexec_dtype_bits(dt) / 8, bytes = (size_t)row_elems * es;
    int64_t n_rows = b * sq;
    if (bytes % 4 == 0) {
        int64_t rw = (int64_t)(bytes / 4), n = n_rows * rw;
        unsigned blocks = (unsigned)((n + 255) / 256 < 65535 ? (n + 255) / 256 : 65535);
        cache_append_kernel<uint32_t><<<blocks ? blocks : 1, 256, 0, s>>>(
            (const uint32_t *)src, (uint32_t *)dst, cl, b, sq, cap, rw);
    } else {
        int64_t rw = (int64_t)(bytes / 2), n = n_rows * rw;
        unsigned blocks = (unsigned)((n + 255) / 256 < 65535 ? (n + 255) / 256 : 65535);
        cache_append_kernel<uint16_t><<<blocks ? blocks : 1, 256, 0, s>>>(
            (const uint16_t *)src, (uint16_t *)dst, cl, b, sq, cap, rw);
    }
    TX_CUDA_LAUNCHED("attention cache append");
    return NULL;
}

/* Opts the kernel in to `bytes` of dynamic shared memory. */
teexec_status *smem_opt_in(const void *kernel, size_t bytes, const char *what)
{
    int dev = 0, cap = 0;
    TX_CUDA_TRY(cudaGetDevice(&dev), what);
    TX_CUDA_TRY(cudaDeviceGetAttribute(&cap, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), what);
    if (bytes > (size_t)cap)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: head dims need %zu bytes of shared memory per block, the device "
                        "allows %d", what, bytes, cap);
    TX_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)bytes), what);
    return NULL;
}

} // namespace

extern "C" teexec_status *tx_attn_fallback_check(const tx_attn_desc *a)
{
    if (!a || a->b < 1 || a->h < 1 || a->h_kv < 1 || a->s_q < 1 || a->s_kv < 1 || a->d < 1 ||
        a->d_v < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "attention fallback: every dimension must be at least 1");
    if (a->h % a->h_kv != 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "attention fallback: %lld query heads are not a multiple of %lld kv heads",
                        (long long)a->h, (long long)a->h_kv);
    if (a->b > 65535 || a->h > 65535 || a->d > 4096 || a->d_v > 4096)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "attention fallback: batch and heads must be <= 65535, head dims <= 4096");
    /* keeps every element offset and the workspace size far inside int64 / size_t */
    if ((double)a->b * (double)a->h * (double)(a->s_q > a->s_kv ? a->s_q : a->s_kv) *
            (double)(a->d > a->d_v ? a->d : a->d_v) > 1e15 ||
        (double)a->b * (double)a->h * (double)a->s_q * (double)a->s_kv > 1e17)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "attention fallback: shape too large");
    if (!tx_io_dtype_ok(a->dtype))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "attention fallback: dtype must be FLOAT, BFLOAT16 or FLOAT16");
    if (a->mask_kind == TX_ATTN_MASK_BOOL || a->mask_kind == TX_ATTN_MASK_FLOAT) {
        if ((a->mask_b != 1 && a->mask_b != a->b) || (a->mask_h != 1 && a->mask_h != a->h))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "attention fallback: mask must be [b|1, h|1, s_q, s_kv]");
        if (a->mask_kind == TX_ATTN_MASK_FLOAT && !tx_io_dtype_ok(a->mask_dtype))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "attention fallback: a float mask must be FLOAT, BFLOAT16 or FLOAT16");
    } else if (a->mask_kind != TX_ATTN_MASK_NONE && a->mask_kind != TX_ATTN_MASK_PADDING) {
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "attention fallback: unknown mask kind %d",
                        a->mask_kind);
    }
    if (a->kv_cache && (a->sbhd || a->mask_kind != TX_ATTN_MASK_NONE || a->s_kv < a->s_q))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "attention fallback: the cache mode needs bshd, no mask and a capacity "
                        "of at least s_q");
    return NULL;
}

extern "C" teexec_status *tx_attn_cache_append(const tx_attn_desc *a, const void *k_new,
                                               const void *v_new, void *k_cache, void *v_cache,
                                               const int64_t *cache_len, void *stream)
{
    TX_TRY(tx_attn_fallback_check(a));
    if (!a->kv_cache || !k_new || !v_new || !k_cache || !v_cache || !cache_len)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "attention cache append: missing buffer");
    cudaStream_t s = (cudaStream_t)stream;
    TX_TRY(append_one(k_new, k_cache, cache_len, a->b, a->s_q, a->s_kv, a->h_kv * a->d, a->dtype, s));
    return append_one(v_new, v_cache, cache_len, a->b, a->s_q, a->s_kv, a->h_kv * a->d_v, a->dtype,
                      s);
}

extern "C" size_t tx_attn_fallback_bwd_workspace(const tx_attn_desc *a)
{
    return (size_t)a->b * (size_t)a->h * (size_t)a->s_q * sizeof(float);
}

extern "C" teexec_status *tx_attn_fallback_forward(const tx_attn_desc *a,
                                                   const tx_attn_fwd_io *io, void *stream)
{
    TX_TRY(tx_attn_fallback_check(a));
    if (!io || !io->q || !io->k || !io->v || !io->o ||
        ((a->mask_kind == TX_ATTN_MASK_BOOL || a->mask_kind == TX_ATTN_MASK_FLOAT) && !io->mask) ||
        (a->mask_kind == TX_ATTN_MASK_PADDING && (!io->seq_q || !io->seq_kv)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "attention fallback forward: missing buffer");
    if (a->kv_cache && !io->cache_len)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "attention fallback forward: no cache_len");
    geom g = geom_of(a);
    g.cl = a->kv_cache ? io->cache_len : NULL;
    if (a->s_q <= DECODE_MAX_SQ && a->d <= 32 * DEC_CH && a->d_v <= 32 * DEC_CH &&
        a->s_q <= 65535) {
        dim3 grid((unsigned)a->s_q, (unsigned)a->h, (unsigned)a->b);
        attn_decode_kernel<<<grid, 32 * DEC_WARPS, 0, (cudaStream_t)stream>>>(
            g, io->q, io->k, io->v, io->mask, io->seq_q, io->seq_kv, io->o, io->lse);
        TX_CUDA_LAUNCHED("attention fallback forward (few query rows)");
        return NULL;
    }
    size_t sm = fwd_smem(a->d, a->d_v);
    TX_TRY(smem_opt_in((const void *)attn_fwd_kernel, sm, "attention fallback forward"));
    dim3 grid((unsigned)((a->s_q + BQ - 1) / BQ), (unsigned)a->h, (unsigned)a->b);
    attn_fwd_kernel<<<grid, THREADS, sm, (cudaStream_t)stream>>>(
        g, io->q, io->k, io->v, io->mask, io->seq_q, io->seq_kv, io->o, io->lse);
    TX_CUDA_LAUNCHED("attention fallback forward");
    return NULL;
}

extern "C" teexec_status *tx_attn_fallback_backward(const tx_attn_desc *a,
                                                    const tx_attn_bwd_io *io, void *workspace,
                                                    size_t workspace_bytes, void *stream)
{
    TX_TRY(tx_attn_fallback_check(a));
    if (!io || !io->q || !io->k || !io->v || !io->o || !io->d_o || !io->lse || !io->dq ||
        !io->dk || !io->dv ||
        ((a->mask_kind == TX_ATTN_MASK_BOOL || a->mask_kind == TX_ATTN_MASK_FLOAT) && !io->mask) ||
        (a->mask_kind == TX_ATTN_MASK_PADDING && (!io->seq_q || !io->seq_kv)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "attention fallback backward: missing buffer");
    if (a->kv_cache)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "attention fallback: the cache mode has no backward");
    size_t need = tx_attn_fallback_bwd_workspace(a);
    if (!workspace || workspace_bytes < need)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "attention fallback backward: workspace of %zu bytes given, %zu needed",
                        workspace_bytes, need);
    geom g = geom_of(a);
    cudaStream_t s = (cudaStream_t)stream;
    float *D = (float *)workspace;
    int64_t rows = a->b * a->h * a->s_q;
    attn_bwd_dot_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, s>>>(g, io->o, io->d_o, D);
    TX_CUDA_LAUNCHED("attention fallback backward (rowsum dO*O)");
    size_t sq = dq_smem(a->d, a->d_v), skv = dkv_smem(a->d, a->d_v);
    TX_TRY(smem_opt_in((const void *)attn_bwd_dq_kernel, sq, "attention fallback backward dq"));
    TX_TRY(smem_opt_in((const void *)attn_bwd_dkv_kernel, skv, "attention fallback backward dk/dv"));
    dim3 gq((unsigned)((a->s_q + BQ - 1) / BQ), (unsigned)a->h, (unsigned)a->b);
    attn_bwd_dq_kernel<<<gq, THREADS, sq, s>>>(g, io->q, io->k, io->v, io->d_o, io->lse, D,
                                              io->mask, io->seq_q, io->seq_kv, io->dq);
    TX_CUDA_LAUNCHED("attention fallback backward dq");
    dim3 gk((unsigned)((a->s_kv + BK - 1) / BK), (unsigned)a->h_kv, (unsigned)a->b);
    attn_bwd_dkv_kernel<<<gk, THREADS, skv, s>>>(g, io->q, io->k, io->v, io->d_o, io->lse, D,
                                                io->mask, io->seq_q, io->seq_kv, io->dk, io->dv);
    TX_CUDA_LAUNCHED("attention fallback backward dk/dv");
    return NULL;
}
