/* std_ops.cu - kernels of the standard ONNX ops on the GPU (std_ops.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/std_num.cuh"

extern "C" {
#include "kernels/cuda/std_ops.h"
}

#include <math.h>
#include <string.h>

namespace {

unsigned grid_for(uint64_t n, unsigned threads)
{
    uint64_t b = (n + threads - 1) / threads;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

uint64_t numel_of(int rank, const int64_t *dims)
{
    uint64_t n = 1;
    for (int k = 0; k < rank; k++) n *= (uint64_t)dims[k];
    return n;
}

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

/* ---- strided copy -------------------------------------------------------- */

template <typename T>
__global__ void strided_kernel(tx_cuda_strided p, const T *src, T *dst, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t so = p.src_base, d_o = p.dst_base;
        for (int k = p.rank - 1; k >= 0; k--) {
            int64_t c = (int64_t)(rem % (uint64_t)p.dims[k]);
            rem /= (uint64_t)p.dims[k];
            so += c * p.src_st[k];
            d_o += c * p.dst_st[k];
        }
        dst[d_o] = src[so];
    }
}

/* Rows of `width` 16-byte words from src (pitch sp words) to dst (pitch dp
 * words), cut into segments of 4 words per thread; a block takes one
 * (row, segment) at a time, so a Split / Concat along the last axis, and a
 * single long row alike, move at HBM speed without per-element index
 * arithmetic. The four loads of a thread are issued before its stores. */
constexpr unsigned kCopyThreads = 256;
constexpr uint64_t kCopySeg = 4 * kCopyThreads;

__global__ void __launch_bounds__(kCopyThreads)
copy_rows16_kernel(const uint4 *src, uint4 *dst, uint64_t rows, uint64_t width, uint64_t sp,
                   uint64_t dp)
{
    uint64_t nseg = (width + kCopySeg - 1) / kCopySeg;
    for (uint64_t it = blockIdx.x; it < rows * nseg; it += gridDim.x) {
        uint64_t r = it / nseg, j0 = (it % nseg) * kCopySeg + threadIdx.x;
        const uint4 *s = src + r * sp;
        uint4 *d = dst + r * dp;
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (j0 + u * kCopyThreads < width) v[u] = s[j0 + u * kCopyThreads];
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (j0 + u * kCopyThreads < width) d[j0 + u * kCopyThreads] = v[u];
    }
}

/* ---- elementwise forward ------------------------------------------------- */

__device__ __forceinline__ float ew_apply(int op, float x, float z)
{
    switch (op) {
    case TX_STD_EW_ADD: return x + z;
    case TX_STD_EW_SUB: return x - z;
    case TX_STD_EW_MUL: return x * z;
    case TX_STD_EW_DIV: return x / z;
    default: /* POW */
        if (z == 2.0f) return x * x;
        if (z == 3.0f) return x * x * x;
        return powf(x, z);
    }
}

__global__ void ew_kernel(int op, tx_cuda_bcast p, const void *a, int at, const void *b, int bt,
                          void *y, int yt, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t oa = 0, ob = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            int64_t c = (int64_t)(rem % (uint64_t)p.dims[k]);
            rem /= (uint64_t)p.dims[k];
            oa += c * p.st[0][k];
            ob += c * p.st[1][k];
        }
        float x = tx_ld(a, (size_t)oa, at);
        float z = txs::ld_f32(b, (size_t)ob, bt); /* Pow's exponent: any numeric dtype */
        tx_st(y, i, yt, ew_apply(op, x, z));
    }
}

template <typename T>
__global__ void where_kernel(tx_cuda_bcast p, const uint8_t *cond, const T *x, const T *y, T *out,
                             uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t oc = 0, ox = 0, oy = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            int64_t c = (int64_t)(rem % (uint64_t)p.dims[k]);
            rem /= (uint64_t)p.dims[k];
            oc += c * p.st[0][k];
            ox += c * p.st[1][k];
            oy += c * p.st[2][k];
        }
        out[i] = cond[oc] ? x[ox] : y[oy];
    }
}

/* ---- broadcast gradient reduction --------------------------------------- */

struct bgrad_plan {
    tx_cuda_bgrad p;
    int nk, nr;
    int kept[TX_STD_MAX_RANK], redd[TX_STD_MAX_RANK];
    int64_t st_g[TX_STD_MAX_RANK];
    uint64_t n_red;
};

__device__ __forceinline__ double grad_term(int term, const tx_cuda_bgrad_ops &o, int64_t og,
                                            int64_t oa, int64_t ob, int64_t oc)
{
    /* a and b may be of any numeric dtype (Pow's exponent); g and y float */
    double g = tx_ld(o.g, (size_t)og, o.g_dtype);
    switch (term) {
    case TX_STD_GT_G: return g;
    case TX_STD_GT_NEG_G: return -g;
    case TX_STD_GT_SCALE: return g * o.scale;
    case TX_STD_GT_MUL: return g * txs::ld_f64(o.b, (size_t)ob, o.b_dtype);
    case TX_STD_GT_DIV_A: return g / txs::ld_f64(o.b, (size_t)ob, o.b_dtype);
    case TX_STD_GT_DIV_B: {
        double a = txs::ld_f64(o.a, (size_t)oa, o.a_dtype), b = txs::ld_f64(o.b, (size_t)ob, o.b_dtype);
        return -g * a / (b * b);
    }
    case TX_STD_GT_POW_A: {
        double a = txs::ld_f64(o.a, (size_t)oa, o.a_dtype), b = txs::ld_f64(o.b, (size_t)ob, o.b_dtype);
        return g * b * pow(a, b - 1.0);
    }
    case TX_STD_GT_POW_B: {
        double a = txs::ld_f64(o.a, (size_t)oa, o.a_dtype);
        return a > 0 ? g * (double)tx_ld(o.y, (size_t)og, o.y_dtype) * log(a) : 0.0;
    }
    case TX_STD_GT_WHERE_X: return o.cond[oc] ? g : 0.0;
    case TX_STD_GT_EXTREME: {
        double a = txs::ld_f64(o.a, (size_t)oa, o.a_dtype);
        return a == (double)tx_ld(o.y, (size_t)og, o.y_dtype) ? g / o.ties[og] : 0.0;
    }
    default: return o.cond[oc] ? 0.0 : g; /* WHERE_Y */
    }
}

/* Offsets of operand positions for target element t (kept coordinates) and
 * reduced index j. */
__device__ __forceinline__ void bgrad_offsets(const bgrad_plan &q, uint64_t t, uint64_t j,
                                              int64_t *og, int64_t *oa, int64_t *ob,
                                              int64_t *oc)
{
    int64_t g = 0, a = 0, b = 0, c = 0;
    for (int i = q.nk - 1; i >= 0; i--) {
        int k = q.kept[i];
        int64_t v = (int64_t)(t % (uint64_t)q.p.dims[k]);
        t /= (uint64_t)q.p.dims[k];
        g += v * q.st_g[k];
        a += v * q.p.st_a[k];
        b += v * q.p.st_b[k];
        c += v * q.p.st_c[k];
    }
    for (int i = q.nr - 1; i >= 0; i--) {
        int k = q.redd[i];
        int64_t v = (int64_t)(j % (uint64_t)q.p.dims[k]);
        j /= (uint64_t)q.p.dims[k];
        g += v * q.st_g[k];
        a += v * q.p.st_a[k];
        b += v * q.p.st_b[k];
        c += v * q.p.st_c[k];
    }
    *og = g;
    *oa = a;
    *ob = b;
    *oc = c;
}

/* One thread per element of X: for short reductions. */
__global__ void bgrad_thread_kernel(int term, bgrad_plan q, tx_cuda_bgrad_ops o, void *gx, int gxt,
                                    uint64_t n_target)
{
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n_target;
         t += (uint64_t)gridDim.x * blockDim.x) {
        double s = 0.0;
        for (uint64_t j = 0; j < q.n_red; j++) {
            int64_t og, oa, ob, oc;
            bgrad_offsets(q, t, j, &og, &oa, &ob, &oc);
            s += grad_term(term, o, og, oa, ob, oc);
        }
        tx_st(gx, t, gxt, (float)s);
    }
}

/* One block per element of X: each thread sums a strided share, then a
 * fixed-shape tree in shared memory. */
__global__ void bgrad_block_kernel(int term, bgrad_plan q, tx_cuda_bgrad_ops o, void *gx, int gxt,
                                   uint64_t n_target)
{
    __shared__ double part[256];
    for (uint64_t t = blockIdx.x; t < n_target; t += gridDim.x) {
        double s = 0.0;
        for (uint64_t j = threadIdx.x; j < q.n_red; j += blockDim.x) {
            int64_t og, oa, ob, oc;
            bgrad_offsets(q, t, j, &og, &oa, &ob, &oc);
            s += grad_term(term, o, og, oa, ob, oc);
        }
        part[threadIdx.x] = s;
        __syncthreads();
        for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) tx_st(gx, t, gxt, (float)part[0]);
        __syncthreads();
    }
}

/* ---- gather --------------------------------------------------------------- */

__device__ __forceinline__ int64_t load_idx(const void *idx, int i64, uint64_t j, int64_t d)
{
    int64_t v = i64 ? ((const int64_t *)idx)[j] : (int64_t)((const int32_t *)idx)[j];
    if (v < 0) v += d;
    return v;
}

template <typename T>
__global__ void gather_kernel(const T *data, const void *idx, int i64, uint64_t n_idx, uint64_t d,
                              uint64_t inner, T *out, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t e = i % inner, r = i / inner;
        uint64_t j = r % n_idx, o = r / n_idx;
        int64_t v = load_idx(idx, i64, j, (int64_t)d);
        out[i] = (v >= 0 && (uint64_t)v < d) ? data[(o * d + (uint64_t)v) * inner + e] : T(0);
    }
}

/* grid (d, column bands, outer): a block owns row v of one outer slice and
 * up to 256 columns, and scans every index in order (staged in shared
 * memory). */
__global__ void gather_bwd_kernel(const void *g, int gt, const void *idx, int i64, uint64_t n_idx,
                                  uint64_t d, uint64_t inner, void *gx, int gxt)
{
    __shared__ int64_t sidx[1024];
    uint64_t v = blockIdx.x, o = blockIdx.z;
    uint64_t e = (uint64_t)blockIdx.y * blockDim.x + threadIdx.x;
    double s = 0.0;
    for (uint64_t j0 = 0; j0 < n_idx; j0 += 1024) {
        uint64_t m = n_idx - j0 < 1024 ? n_idx - j0 : 1024;
        __syncthreads();
        for (uint64_t k = threadIdx.x; k < m; k += blockDim.x)
            sidx[k] = load_idx(idx, i64, j0 + k, (int64_t)d);
        __syncthreads();
        if (e < inner)
            for (uint64_t k = 0; k < m; k++)
                if (sidx[k] == (int64_t)v)
                    s += tx_ld(g, (size_t)((o * n_idx + j0 + k) * inner + e), gt);
    }
    if (e < inner) tx_st(gx, (size_t)((o * d + v) * inner + e), gxt, (float)s);
}

/* ---- softmax --------------------------------------------------------------- */

/* One block per (outer, inner) column; rows walk `len` with stride inner. */
__global__ void softmax_fwd_kernel(const void *x, void *y, int dt, uint64_t len, uint64_t inner,
                                   int log_mode)
{
    __shared__ double red[256];
    uint64_t col = blockIdx.x;
    uint64_t o = col / inner, in = col % inner;
    uint64_t base = o * len * inner + in;
    float mx = -INFINITY;
    for (uint64_t j = threadIdx.x; j < len; j += blockDim.x)
        mx = fmaxf(mx, tx_ld(x, (size_t)(base + j * inner), dt));
    red[threadIdx.x] = mx;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + w]);
        __syncthreads();
    }
    mx = (float)red[0];
    if (mx == -INFINITY) mx = 0.0f;
    __syncthreads();
    double s = 0.0;
    for (uint64_t j = threadIdx.x; j < len; j += blockDim.x)
        s += (double)expf(tx_ld(x, (size_t)(base + j * inner), dt) - mx);
    red[threadIdx.x] = s;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    double sum = red[0];
    if (log_mode) {
        float ls = (float)log(sum);
        for (uint64_t j = threadIdx.x; j < len; j += blockDim.x) {
            size_t p = (size_t)(base + j * inner);
            tx_st(y, p, dt, (tx_ld(x, p, dt) - mx) - ls);
        }
    } else {
        float inv = (float)(1.0 / sum);
        for (uint64_t j = threadIdx.x; j < len; j += blockDim.x) {
            size_t p = (size_t)(base + j * inner);
            tx_st(y, p, dt, expf(tx_ld(x, p, dt) - mx) * inv);
        }
    }
}

__global__ void softmax_bwd_kernel(const void *y, const void *g, void *gx, int dt, uint64_t len,
                                   uint64_t inner, int log_mode)
{
    __shared__ double red[256];
    uint64_t col = blockIdx.x;
    uint64_t o = col / inner, in = col % inner;
    uint64_t base = o * len * inner + in;
    double s = 0.0;
    for (uint64_t j = threadIdx.x; j < len; j += blockDim.x) {
        size_t p = (size_t)(base + j * inner);
        double gv = tx_ld(g, p, dt);
        s += log_mode ? gv : gv * (double)tx_ld(y, p, dt);
    }
    red[threadIdx.x] = s;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    double sum = red[0];
    for (uint64_t j = threadIdx.x; j < len; j += blockDim.x) {
        size_t p = (size_t)(base + j * inner);
        double gv = tx_ld(g, p, dt), yv = tx_ld(y, p, dt);
        double r = log_mode ? gv - exp(yv) * sum : yv * (gv - sum);
        tx_st(gx, p, dt, (float)r);
    }
}

} // namespace

/* Copies whose innermost run is contiguous on both sides and whose outer
 * dims fold into one (Split / Concat / Slice along the last axis, the
 * reshapes): one cudaMemcpy2DAsync, which moves the rows at copy-engine
 * speed instead of one thread per element doing index arithmetic. Returns
 * false when the pattern does not fold that far. */
static bool as_2d(const tx_cuda_strided *p, size_t esz, int64_t *rows, int64_t *width,
                  int64_t *src_pitch, int64_t *dst_pitch)
{
    int64_t d[TX_STD_MAX_RANK], ss[TX_STD_MAX_RANK], ds[TX_STD_MAX_RANK];
    int r = 0;
    for (int k = 0; k < p->rank; k++) {
        if (p->dims[k] == 1) continue; /* a unit dim moves nothing */
        d[r] = p->dims[k];
        ss[r] = p->src_st[k];
        ds[r] = p->dst_st[k];
        /* fold into the previous dim when both sides are contiguous across */
        if (r > 0 && ss[r - 1] == ss[r] * d[r] && ds[r - 1] == ds[r] * d[r]) {
            d[r - 1] *= d[r];
            ss[r - 1] = ss[r];
            ds[r - 1] = ds[r];
            continue;
        }
        r++;
    }
    if (r == 0) {
        *rows = 1;
        *width = (int64_t)esz;
        *src_pitch = *dst_pitch = *width;
        return true;
    }
    if (ss[r - 1] != 1 || ds[r - 1] != 1 || r > 2) return false;
    *width = d[r - 1] * (int64_t)esz;
    *rows = r == 2 ? d[0] : 1;
    *src_pitch = r == 2 ? ss[0] * (int64_t)esz : *width;
    *dst_pitch = r == 2 ? ds[0] * (int64_t)esz : *width;
    return *src_pitch >= *width && *dst_pitch >= *width;
}

extern "C" teexec_status *tx_cuda_strided_copy(const tx_cuda_strided *p, const void *src,
                                               void *dst, size_t esz, void *stream)
{
    if (p->rank < 0 || p->rank > TX_STD_MAX_RANK) return bad("strided copy", "rank out of range");
    uint64_t n = numel_of(p->rank, p->dims);
    if (!n) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    int64_t rows, width, sp, dp;
    if (as_2d(p, esz, &rows, &width, &sp, &dp)) {
        const char *from = (const char *)src + p->src_base * (int64_t)esz;
        char *to = (char *)dst + p->dst_base * (int64_t)esz;
        if (((uintptr_t)from | (uintptr_t)to | (uint64_t)width | (uint64_t)sp | (uint64_t)dp) %
                16 == 0) {
            /* 16-byte words, a block per row: several times the rate of
             * cudaMemcpy2DAsync on narrow rows (the copy engine's rate) */
            uint64_t w16 = (uint64_t)width / 16;
            uint64_t blocks = (uint64_t)rows * ((w16 + kCopySeg - 1) / kCopySeg);
            if (blocks > 132u * 16u) blocks = 132u * 16u;
            if (!blocks) return NULL;
            copy_rows16_kernel<<<(unsigned)blocks, kCopyThreads, 0, s>>>(
                (const uint4 *)from, (uint4 *)to, (uint64_t)rows, w16, (uint64_t)sp / 16,
                (uint64_t)dp / 16);
            TX_CUDA_LAUNCHED("strided copy (rows)");
            return NULL;
        }
        TX_CUDA_TRY(cudaMemcpy2DAsync(to, (size_t)dp, from, (size_t)sp, (size_t)width,
                                      (size_t)rows, cudaMemcpyDeviceToDevice, s),
                    "strided copy");
        return NULL;
    }
    unsigned gr = grid_for(n, 256);
    switch (esz) {
    case 1: strided_kernel<uint8_t><<<gr, 256, 0, s>>>(*p, (const uint8_t *)src, (uint8_t *)dst, n); break;
    case 2: strided_kernel<uint16_t><<<gr, 256, 0, s>>>(*p, (const uint16_t *)src, (uint16_t *)dst, n); break;
    case 4: strided_kernel<uint32_t><<<gr, 256, 0, s>>>(*p, (const uint32_t *)src, (uint32_t *)dst, n); break;
    case 8: strided_kernel<uint64_t><<<gr, 256, 0, s>>>(*p, (const uint64_t *)src, (uint64_t *)dst, n); break;
    default: return bad("strided copy", "element size must be 1, 2, 4 or 8 bytes");
    }
    TX_CUDA_LAUNCHED("strided copy");
    return NULL;
}

extern "C" teexec_status *tx_cuda_ew_forward(tx_std_ew_op op, const tx_cuda_bcast *g,
                                             const void *a, teexec_dtype at, const void *b,
                                             teexec_dtype bt, void *y, teexec_dtype yt,
                                             void *stream)
{
    bool b_ok = tx_io_dtype_ok(bt) ||
                (op == TX_STD_EW_POW && tx_std_dom_numeric(tx_std_dom_of(bt)));
    if (!tx_io_dtype_ok(at) || !tx_io_dtype_ok(yt) || !b_ok)
        return bad("elementwise", "operands must be FLOAT, BFLOAT16 or FLOAT16");
    if (g->rank < 0 || g->rank > TX_STD_MAX_RANK) return bad("elementwise", "rank out of range");
    uint64_t n = numel_of(g->rank, g->dims);
    if (!n) return NULL;
    ew_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>((int)op, *g, a, (int)at, b,
                                                                    (int)bt, y, (int)yt, n);
    TX_CUDA_LAUNCHED("elementwise");
    return NULL;
}

extern "C" teexec_status *tx_cuda_where_forward(const tx_cuda_bcast *g, const uint8_t *cond,
                                                const void *x, const void *y, void *out,
                                                size_t esz, void *stream)
{
    if (g->rank < 0 || g->rank > TX_STD_MAX_RANK) return bad("where", "rank out of range");
    uint64_t n = numel_of(g->rank, g->dims);
    if (!n) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned gr = grid_for(n, 256);
    switch (esz) {
    case 1: where_kernel<uint8_t><<<gr, 256, 0, s>>>(*g, cond, (const uint8_t *)x, (const uint8_t *)y, (uint8_t *)out, n); break;
    case 2: where_kernel<uint16_t><<<gr, 256, 0, s>>>(*g, cond, (const uint16_t *)x, (const uint16_t *)y, (uint16_t *)out, n); break;
    case 4: where_kernel<uint32_t><<<gr, 256, 0, s>>>(*g, cond, (const uint32_t *)x, (const uint32_t *)y, (uint32_t *)out, n); break;
    case 8: where_kernel<uint64_t><<<gr, 256, 0, s>>>(*g, cond, (const uint64_t *)x, (const uint64_t *)y, (uint64_t *)out, n); break;
    default: return bad("where", "element size must be 1, 2, 4 or 8 bytes");
    }
    TX_CUDA_LAUNCHED("where");
    return NULL;
}

extern "C" teexec_status *tx_cuda_bcast_grad(tx_std_grad_term term, const tx_cuda_bgrad *p,
                                             const tx_cuda_bgrad_ops *o, void *gx,
                                             teexec_dtype gx_dtype, void *stream)
{
    if (!tx_io_dtype_ok(gx_dtype) || !tx_io_dtype_ok(o->g_dtype))
        return bad("broadcast grad", "grads must be FLOAT, BFLOAT16 or FLOAT16");
    if (p->rank < 0 || p->rank > TX_STD_MAX_RANK) return bad("broadcast grad", "rank out of range");
    bgrad_plan q;
    memset(&q, 0, sizeof q);
    q.p = *p;
    q.n_red = 1;
    uint64_t n_target = 1;
    int64_t s = 1;
    for (int k = p->rank - 1; k >= 0; k--) {
        q.st_g[k] = s;
        s *= p->dims[k];
    }
    for (int k = 0; k < p->rank; k++) {
        if (p->red[k]) {
            q.redd[q.nr++] = k;
            q.n_red *= (uint64_t)p->dims[k];
        } else {
            q.kept[q.nk++] = k;
            n_target *= (uint64_t)p->dims[k];
        }
    }
    if (!n_target) return NULL;
    cudaStream_t st = (cudaStream_t)stream;
    if (q.n_red >= 256 && n_target < 132u * 64u) {
        unsigned blocks = n_target > 132u * 64u ? 132u * 64u : (unsigned)n_target;
        bgrad_block_kernel<<<blocks, 256, 0, st>>>((int)term, q, *o, gx, (int)gx_dtype, n_target);
    } else {
        bgrad_thread_kernel<<<grid_for(n_target, 128), 128, 0, st>>>((int)term, q, *o, gx,
                                                                       (int)gx_dtype, n_target);
    }
    TX_CUDA_LAUNCHED("broadcast grad");
    return NULL;
}

extern "C" teexec_status *tx_cuda_gather_forward(const void *data, size_t esz, const void *idx,
                                                 teexec_dtype idx_dtype, size_t n_idx,
                                                 size_t outer, size_t d, size_t inner, void *out,
                                                 void *stream)
{
    if (idx_dtype != TEEXEC_DTYPE_INT64 && idx_dtype != TEEXEC_DTYPE_INT32)
        return bad("gather", "indices must be INT64 or INT32");
    uint64_t n = (uint64_t)outer * n_idx * inner;
    if (!n) return NULL;
    int i64 = idx_dtype == TEEXEC_DTYPE_INT64;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned gr = grid_for(n, 256);
    switch (esz) {
    case 1: gather_kernel<uint8_t><<<gr, 256, 0, s>>>((const uint8_t *)data, idx, i64, n_idx, d, inner, (uint8_t *)out, n); break;
    case 2: gather_kernel<uint16_t><<<gr, 256, 0, s>>>((const uint16_t *)data, idx, i64, n_idx, d, inner, (uint16_t *)out, n); break;
    case 4: gather_kernel<uint32_t><<<gr, 256, 0, s>>>((const uint32_t *)data, idx, i64, n_idx, d, inner, (uint32_t *)out, n); break;
    case 8: gather_kernel<uint64_t><<<gr, 256, 0, s>>>((const uint64_t *)data, idx, i64, n_idx, d, inner, (uint64_t *)out, n); break;
    default: return bad("gather", "element size must be 1, 2, 4 or 8 bytes");
    }
    TX_CUDA_LAUNCHED("gather");
    return NULL;
}

extern "C" teexec_status *tx_cuda_gather_backward(const void *g, teexec_dtype g_dtype,
                                                  const void *idx, teexec_dtype idx_dtype,
                                                  size_t n_idx, size_t outer, size_t d,
                                                  size_t inner, void *gx, teexec_dtype gx_dtype,
                                                  void *stream)
{
    if (idx_dtype != TEEXEC_DTYPE_INT64 && idx_dtype != TEEXEC_DTYPE_INT32)
        return bad("gather backward", "indices must be INT64 or INT32");
    if (!tx_io_dtype_ok(g_dtype) || !tx_io_dtype_ok(gx_dtype))
        return bad("gather backward", "grads must be FLOAT, BFLOAT16 or FLOAT16");
    if (!outer || !d || !inner) return NULL;
    unsigned threads = inner >= 256 ? 256 : (unsigned)((inner + 31) / 32 * 32);
    size_t bands = (inner + threads - 1) / threads;
    if (d > 2147483647u || bands > 65535u || outer > 65535u)
        return tx_status_new(TEEXEC_ERR_UNSUPPORTED, NULL, NULL,
                             "cuda gather backward: [%zu, %zu, %zu] exceeds the grid", outer, d,
                             inner);
    dim3 grid((unsigned)d, (unsigned)bands, (unsigned)outer);
    gather_bwd_kernel<<<grid, threads, 0, (cudaStream_t)stream>>>(
        g, (int)g_dtype, idx, idx_dtype == TEEXEC_DTYPE_INT64, n_idx, d, inner, gx, (int)gx_dtype);
    TX_CUDA_LAUNCHED("gather backward");
    return NULL;
}

static teexec_status *softmax_check(size_t outer, size_t inner, teexec_dtype dt)
{
    if (!tx_io_dtype_ok(dt)) return bad("softmax", "dtype must be FLOAT, BFLOAT16 or FLOAT16");
    if ((uint64_t)outer * inner > 0x7fffffffull)
        return tx_status_new(TEEXEC_ERR_UNSUPPORTED, NULL, NULL, "cuda softmax: too many rows");
    return NULL;
}

extern "C" teexec_status *tx_cuda_softmax_forward(const void *x, void *y, teexec_dtype dt,
                                                  size_t outer, size_t len, size_t inner,
                                                  int log_mode, void *stream)
{
    TX_TRY(softmax_check(outer, inner, dt));
    if (!outer || !inner || !len) return NULL;
    softmax_fwd_kernel<<<(unsigned)(outer * inner), 256, 0, (cudaStream_t)stream>>>(
        x, y, (int)dt, len, inner, log_mode);
    TX_CUDA_LAUNCHED("softmax");
    return NULL;
}

extern "C" teexec_status *tx_cuda_softmax_backward(const void *y, const void *g, void *gx,
                                                   teexec_dtype dt, size_t outer, size_t len,
                                                   size_t inner, int log_mode, void *stream)
{
    TX_TRY(softmax_check(outer, inner, dt));
    if (!outer || !inner || !len) return NULL;
    softmax_bwd_kernel<<<(unsigned)(outer * inner), 256, 0, (cudaStream_t)stream>>>(
        y, g, gx, (int)dt, len, inner, log_mode);
    TX_CUDA_LAUNCHED("softmax backward");
    return NULL;
}
