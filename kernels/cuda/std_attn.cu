/* std_attn.cu - the ONNX Attention op and its backward as plain kernels
 * (std_attn.h), following kernels/cpu/attention.c. */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_num.cuh"

extern "C" {
#include "base/tensor.h"
#include "kernels/cuda/std_attn.h"
}

#include <math.h>

using namespace txs;

namespace {

constexpr unsigned kRow = 256;

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

__device__ __forceinline__ size_t q_off(const tx_cuda_attn &p, int64_t b, int64_t h, int64_t l,
                                        int64_t e, int64_t D)
{
    return p.rank3 ? (size_t)(((b * p.lq + l) * p.hq + h) * D + e)
                   : (size_t)(((b * p.hq + h) * p.lq + l) * D + e);
}

/* Element (b, hk, j, e) of the concatenated keys (or values, D = dv). */
__device__ __forceinline__ double kv_at(const tx_cuda_attn &p, const void *past, const void *cur,
                                        int64_t b, int64_t hk, int64_t j, int64_t e, int64_t D)
{
    int dt = (int)p.dt;
    if (j < p.past) return ld_f64(past, (size_t)(((b * p.hkv + hk) * p.past + j) * D + e), dt);
    int64_t l = j - p.past;
    size_t o = p.rank3 ? (size_t)(((b * p.lk + l) * p.hkv + hk) * D + e)
                       : (size_t)(((b * p.hkv + hk) * p.lk + l) * D + e);
    return ld_f64(cur, o, dt);
}

__device__ __forceinline__ size_t kv_cur_off(const tx_cuda_attn &p, int64_t b, int64_t hk,
                                             int64_t l, int64_t e, int64_t D)
{
    return p.rank3 ? (size_t)(((b * p.lk + l) * p.hkv + hk) * D + e)
                   : (size_t)(((b * p.hkv + hk) * p.lk + l) * D + e);
}

__device__ __forceinline__ double bias_of(const tx_cuda_attn &p, const void *mask, int64_t b,
                                          int64_t h, int64_t i, int64_t j)
{
    double v = 0.0;
    if (p.mask) {
        if (j < p.mask_t) {
            size_t o = (size_t)(b * p.mst[0] + h * p.mst[1] + i * p.mst[2] + j * p.mst[3]);
            v = p.mask == 1 ? (((const uint8_t *)mask)[o] ? 0.0 : -INFINITY) : ld_f64(mask, o, (int)p.dt);
        } else {
            v = -INFINITY;
        }
    }
    if (p.causal && j > i + p.past) v = -INFINITY;
    return v;
}

/* raw[r, j] = scale q_i . k_j (the qk output), z = softcap'd raw + bias. */
/* precise: in FP64 whatever the dtype (the backward recomputes as the CPU
 * rule does, in FP64). */
__global__ void scores_kernel(tx_cuda_attn p, tx_cuda_attn_io io, int precise, double *raw,
                              double *z, uint64_t n)
{
    bool f64 = p.dt == TEEXEC_DTYPE_DOUBLE || precise;
    for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (uint64_t)gridDim.x * blockDim.x) {
        int64_t j = (int64_t)(x % (uint64_t)p.t), r = (int64_t)(x / (uint64_t)p.t);
        int64_t i = r % p.lq, h = (r / p.lq) % p.hq, b = r / (p.lq * p.hq), hk = h / p.reps;
        double dot = 0.0;
        for (int64_t e = 0; e < p.d; e++)
            dot += ld_f64(io.q, q_off(p, b, h, i, e, p.d), (int)p.dt) *
                   kv_at(p, io.past_k, io.k, b, hk, j, e, p.d);
        double bias = bias_of(p, io.mask, b, h, i, j), zz;
        if (f64) {
            double s = p.scale * dot;
            if (raw) raw[x] = s;
            if (io.qk) st_f64(io.qk, x, (int)p.dt, s);
            zz = (p.softcap > 0 ? p.softcap * tanh(s / p.softcap) : s) + bias;
        } else {
            float s = __double2float_rn(p.scale * dot), cap = (float)p.softcap;
            if (raw) raw[x] = s;
            if (io.qk) st_f32(io.qk, x, (int)p.dt, s);
            float zf = cap > 0 ? __fmul_rn(cap, tanhf(__fdiv_rn(s, cap))) : s;
            zz = __fadd_rn(zf, (float)bias);
        }
        z[x] = zz;
    }
}

/* In place over each row of z: the softmax (NaN for a row of -inf). */
__global__ void __launch_bounds__(kRow) softmax_kernel(tx_cuda_attn p, int precise, double *z,
                                                       uint64_t rows)
{
    __shared__ double red[kRow];
    bool f64 = p.dt == TEEXEC_DTYPE_DOUBLE || precise;
    uint64_t T = (uint64_t)p.t;
    for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        double *row = z + r * T;
        double mx = -INFINITY;
        for (uint64_t j = threadIdx.x; j < T; j += kRow) mx = fmax(mx, row[j]);
        __syncthreads();
        red[threadIdx.x] = mx;
        __syncthreads();
        for (unsigned w = kRow / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + w]);
            __syncthreads();
        }
        mx = red[0];
        __syncthreads();
        if (mx == -INFINITY) {
            for (uint64_t j = threadIdx.x; j < T; j += kRow) row[j] = NAN;
            continue;
        }
        double s = 0.0;
        for (uint64_t j = threadIdx.x; j < T; j += kRow) {
            double e = f64 ? exp(row[j] - mx) : (double)expf(__fsub_rn((float)row[j], (float)mx));
            row[j] = e;
            s += e;
        }
        red[threadIdx.x] = s;
        __syncthreads();
        for (unsigned w = kRow / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
            __syncthreads();
        }
        double sum = red[0];
        __syncthreads();
        float inv = (float)(1.0 / sum);
        for (uint64_t j = threadIdx.x; j < T; j += kRow)
            row[j] = f64 ? row[j] / sum : (double)__fmul_rn((float)row[j], inv);
    }
}

__global__ void output_kernel(tx_cuda_attn p, tx_cuda_attn_io io, const double *pr, uint64_t n)
{
    for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (uint64_t)gridDim.x * blockDim.x) {
        int64_t e = (int64_t)(x % (uint64_t)p.dv), r = (int64_t)(x / (uint64_t)p.dv);
        int64_t i = r % p.lq, h = (r / p.lq) % p.hq, b = r / (p.lq * p.hq), hk = h / p.reps;
        double acc = p.t == 0 ? NAN : 0.0;
        for (int64_t j = 0; j < p.t; j++)
            acc += pr[r * p.t + j] * kv_at(p, io.past_v, io.v, b, hk, j, e, p.dv);
        st_f64(io.y, q_off(p, b, h, i, e, p.dv), (int)p.dt, acc);
    }
}

/* present_key / present_value: the caches followed by the new keys / values. */
__global__ void present_kernel(tx_cuda_attn p, const void *past, const void *cur, void *out,
                               int64_t D, uint64_t n)
{
    for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (uint64_t)gridDim.x * blockDim.x) {
        int64_t e = (int64_t)(x % (uint64_t)D), j = (int64_t)((x / (uint64_t)D) % (uint64_t)p.t);
        int64_t bh = (int64_t)(x / ((uint64_t)D * (uint64_t)p.t));
        st_f64(out, x, (int)p.dt, kv_at(p, past, cur, bh / p.hkv, bh % p.hkv, j, e, D));
    }
}

/* ---- backward ----------------------------------------------------------------- */

/* dP[r, j] = dY_i . V_j */
__global__ void dp_kernel(tx_cuda_attn p, tx_cuda_attn_io io, const void *gy, double *ds,
                          uint64_t n)
{
    for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (uint64_t)gridDim.x * blockDim.x) {
        int64_t j = (int64_t)(x % (uint64_t)p.t), r = (int64_t)(x / (uint64_t)p.t);
        int64_t i = r % p.lq, h = (r / p.lq) % p.hq, b = r / (p.lq * p.hq), hk = h / p.reps;
        double acc = 0.0;
        for (int64_t e = 0; e < p.dv; e++)
            acc += ld_f64(gy, q_off(p, b, h, i, e, p.dv), (int)p.dt) *
                   kv_at(p, io.past_v, io.v, b, hk, j, e, p.dv);
        ds[x] = acc;
    }
}

/* dS = P (dP - sum_j P dP), per row in place. */
__global__ void __launch_bounds__(kRow) dsoftmax_kernel(tx_cuda_attn p, const double *pr,
                                                        double *ds, uint64_t rows)
{
    __shared__ double red[kRow];
    uint64_t T = (uint64_t)p.t;
    for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        double s = 0.0;
        for (uint64_t j = threadIdx.x; j < T; j += kRow) s += pr[r * T + j] * ds[r * T + j];
        __syncthreads();
        red[threadIdx.x] = s;
        __syncthreads();
        for (unsigned w = kRow / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
            __syncthreads();
        }
        double dot = red[0];
        __syncthreads();
        for (uint64_t j = threadIdx.x; j < T; j += kRow)
            ds[r * T + j] = pr[r * T + j] * (ds[r * T + j] - dot);
    }
}

/* The additive mask's gradient: each mask element sums dS over the rows
 * that read it (b, h, i ascending, the CPU's order). */
__global__ void gmask_kernel(tx_cuda_attn p, const double *ds, void *gm, uint64_t n)
{
    for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (uint64_t)gridDim.x * blockDim.x) {
        int64_t c[4];
        uint64_t rem = x;
        for (int k = 3; k >= 0; k--) {
            c[k] = (int64_t)(rem % (uint64_t)p.mdims[k]);
            rem /= (uint64_t)p.mdims[k];
        }
        int64_t full[3] = {p.b, p.hq, p.lq};
        int64_t lo[3], hi[3];
        for (int k = 0; k < 3; k++) {
            bool bc = p.mdims[k] == 1 && full[k] != 1;
            lo[k] = bc ? 0 : c[k];
            hi[k] = bc ? full[k] : c[k] + 1;
        }
        double acc = 0.0;
        for (int64_t b = lo[0]; b < hi[0]; b++)
            for (int64_t h = lo[1]; h < hi[1]; h++)
                for (int64_t i = lo[2]; i < hi[2]; i++)
                    acc += ds[((b * p.hq + h) * p.lq + i) * p.t + c[3]];
        st_f64(gm, x, (int)p.dt, acc);
    }
}

/* dS through the softcap, plus the qk output's gradient. */
__global__ void ds_finish_kernel(tx_cuda_attn p, const double *raw, const void *gqk, double *ds,
                                 int have_p, uint64_t n)
{
    for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (uint64_t)gridDim.x * blockDim.x) {
        double v = have_p ? ds[x] : 0.0;
        if (have_p && p.softcap > 0) {
            double th = tanh(raw[x] / p.softcap);
            v *= 1 - th * th;
        }
        if (gqk) v += ld_f64(gqk, x, (int)p.dt);
        ds[x] = v;
    }
}

__global__ void dq_kernel(tx_cuda_attn p, tx_cuda_attn_io io, const double *ds, void *gq,
                          uint64_t n)
{
    for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (uint64_t)gridDim.x * blockDim.x) {
        int64_t e = (int64_t)(x % (uint64_t)p.d), r = (int64_t)(x / (uint64_t)p.d);
        int64_t i = r % p.lq, h = (r / p.lq) % p.hq, b = r / (p.lq * p.hq), hk = h / p.reps;
        double acc = 0.0;
        for (int64_t j = 0; j < p.t; j++)
            acc += ds[r * p.t + j] * kv_at(p, io.past_k, io.k, b, hk, j, e, p.d);
        st_f64(gq, q_off(p, b, h, i, e, p.d), (int)p.dt, p.scale * acc);
    }
}

/* dK (value 0) or dV (value 1) over the concatenated positions: the
 * present output's gradient plus, per query head of the group, the sum
 * over query rows; written to the past cache's or the new input's grad. */
__global__ void dkv_kernel(tx_cuda_attn p, tx_cuda_attn_io io, int value, const double *w,
                           const void *gpresent, const void *gy, void *gpast, void *gcur, int64_t D,
                           uint64_t n)
{
    for (uint64_t x = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n;
         x += (uint64_t)gridDim.x * blockDim.x) {
        int64_t e = (int64_t)(x % (uint64_t)D), j = (int64_t)((x / (uint64_t)D) % (uint64_t)p.t);
        int64_t bh = (int64_t)(x / ((uint64_t)D * (uint64_t)p.t)), b = bh / p.hkv, hk = bh % p.hkv;
        double acc = gpresent ? ld_f64(gpresent, x, (int)p.dt) : 0.0;
        if (w)
            for (int64_t h = hk * p.reps; h < (hk + 1) * p.reps; h++) {
                double part = 0.0;
                for (int64_t i = 0; i < p.lq; i++) {
                    double a = w[((b * p.hq + h) * p.lq + i) * p.t + j];
                    part += a * (value ? ld_f64(gy, q_off(p, b, h, i, e, D), (int)p.dt)
                                       : ld_f64(io.q, q_off(p, b, h, i, e, D), (int)p.dt));
                }
                acc += value ? part : p.scale * part;
            }
        if (j < p.past) {
            if (gpast) st_f64(gpast, (size_t)(((b * p.hkv + hk) * p.past + j) * D + e), (int)p.dt, acc);
        } else if (gcur) {
            st_f64(gcur, kv_cur_off(p, b, hk, j - p.past, e, D), (int)p.dt, acc);
        }
    }
}

uint64_t n_rows(const tx_cuda_attn *p) { return (uint64_t)(p->b * p->hq * p->lq); }
unsigned row_blocks(uint64_t rows) { return rows < 132u * 16u ? (unsigned)(rows ? rows : 1) : 132u * 16u; }

} // namespace

extern "C" size_t tx_cuda_attention_scratch(const tx_cuda_attn *p, int backward)
{
    size_t s = (size_t)(n_rows(p) * (uint64_t)p->t * sizeof(double));
    return (backward ? 3 : 1) * (s ? s : 8);
}

extern "C" teexec_status *tx_cuda_attention_forward(const tx_cuda_attn *p, const tx_cuda_attn_io *io,
                                                    void *scratch, void *stream)
{
    if (!tx_std_dom_float(tx_std_dom_of(p->dt))) return bad("attention", "dtype must be a float");
    if (p->reps < 1 || p->hq != p->hkv * p->reps) return bad("attention", "bad head counts");
    cudaStream_t s = (cudaStream_t)stream;
    uint64_t rows = n_rows(p), ns = rows * (uint64_t)p->t;
    double *z = (double *)scratch;
    if (ns) {
        scores_kernel<<<grid_for(ns, 128), 128, 0, s>>>(*p, *io, 0, NULL, z, ns);
        TX_CUDA_LAUNCHED("attention scores");
        softmax_kernel<<<row_blocks(rows), kRow, 0, s>>>(*p, 0, z, rows);
        TX_CUDA_LAUNCHED("attention softmax");
    }
    uint64_t ny = rows * (uint64_t)p->dv;
    if (ny) {
        output_kernel<<<grid_for(ny, 128), 128, 0, s>>>(*p, *io, z, ny);
        TX_CUDA_LAUNCHED("attention output");
    }
    uint64_t nk = (uint64_t)(p->b * p->hkv * p->t * p->d), nv = (uint64_t)(p->b * p->hkv * p->t * p->dv);
    if (io->present_k && nk) {
        present_kernel<<<grid_for(nk, 256), 256, 0, s>>>(*p, io->past_k, io->k, io->present_k, p->d, nk);
        TX_CUDA_LAUNCHED("attention present_key");
    }
    if (io->present_v && nv) {
        present_kernel<<<grid_for(nv, 256), 256, 0, s>>>(*p, io->past_v, io->v, io->present_v, p->dv, nv);
        TX_CUDA_LAUNCHED("attention present_value");
    }
    return NULL;
}

extern "C" teexec_status *tx_cuda_attention_backward(const tx_cuda_attn *p,
                                                     const tx_cuda_attn_io *io,
                                                     const tx_cuda_attn_grads *g, void *scratch,
                                                     void *stream)
{
    if (tx_std_dom_of(p->dt) != TX_DOM_F32)
        return bad("attention backward", "grads must be FLOAT, FLOAT16 or BFLOAT16");
    cudaStream_t s = (cudaStream_t)stream;
    uint64_t rows = n_rows(p), ns = rows * (uint64_t)p->t;
    double *raw = (double *)scratch, *pr = raw + (ns ? ns : 1), *ds = pr + (ns ? ns : 1);
    bool have_p = g->gy != NULL;
    if (ns) {
        tx_cuda_attn_io sio = *io;
        sio.qk = NULL;
        scores_kernel<<<grid_for(ns, 128), 128, 0, s>>>(*p, sio, 1, raw, pr, ns);
        TX_CUDA_LAUNCHED("attention backward scores");
        if (have_p) {
            softmax_kernel<<<row_blocks(rows), kRow, 0, s>>>(*p, 1, pr, rows);
            TX_CUDA_LAUNCHED("attention backward softmax");
            dp_kernel<<<grid_for(ns, 128), 128, 0, s>>>(*p, *io, g->gy, ds, ns);
            TX_CUDA_LAUNCHED("attention backward dP");
            dsoftmax_kernel<<<row_blocks(rows), kRow, 0, s>>>(*p, pr, ds, rows);
            TX_CUDA_LAUNCHED("attention backward dS");
        }
    }
    if (g->gmask) {
        uint64_t nm = (uint64_t)(p->mdims[0] * p->mdims[1] * p->mdims[2] * p->mdims[3]);
        if (nm && have_p && ns) {
            gmask_kernel<<<grid_for(nm, 128), 128, 0, s>>>(*p, ds, g->gmask, nm);
            TX_CUDA_LAUNCHED("attention backward mask");
        } else if (nm) {
            TX_CUDA_TRY(cudaMemsetAsync(g->gmask, 0, nm * tx_dtype_elem_size(p->dt), s),
                        "attention backward mask");
        }
    }
    if (ns) {
        ds_finish_kernel<<<grid_for(ns, 256), 256, 0, s>>>(*p, raw, g->g_qk, ds, have_p, ns);
        TX_CUDA_LAUNCHED("attention backward dS finish");
    }
    uint64_t nq = rows * (uint64_t)p->d;
    if (g->gq && nq) {
        dq_kernel<<<grid_for(nq, 128), 128, 0, s>>>(*p, *io, ds, g->gq, nq);
        TX_CUDA_LAUNCHED("attention backward dQ");
    }
    uint64_t nk = (uint64_t)(p->b * p->hkv * p->t * p->d), nv = (uint64_t)(p->b * p->hkv * p->t * p->dv);
    if ((g->gk || g->gpast_k) && nk) {
        dkv_kernel<<<grid_for(nk, 128), 128, 0, s>>>(*p, *io, 0, ns ? ds : NULL, g->g_present_k,
                                                     NULL, g->gpast_k, g->gk, p->d, nk);
        TX_CUDA_LAUNCHED("attention backward dK");
    }
    if ((g->gv || g->gpast_v) && nv) {
        dkv_kernel<<<grid_for(nv, 128), 128, 0, s>>>(*p, *io, 1, have_p && ns ? pr : NULL,
                                                     g->g_present_v, g->gy, g->gpast_v, g->gv,
                                                     p->dv, nv);
        TX_CUDA_LAUNCHED("attention backward dV");
    }
    return NULL;
}
