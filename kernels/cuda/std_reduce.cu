/* std_reduce.cu - reductions, ArgMax/ArgMin, TopK and CumSum on the GPU
 * (std_reduce.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_num.cuh"

extern "C" {
#include "kernels/cuda/std_reduce.h"
}

#include <math.h>
#include <string.h>

using namespace txs;

namespace {

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

/* ---- reductions ------------------------------------------------------------------ */

struct red_plan {
    int nk, nr;
    int64_t kdims[TX_STD_RANK], kst[TX_STD_RANK]; /* kept dims and their x strides */
    int64_t rdims[TX_STD_RANK], rst[TX_STD_RANK]; /* reduced */
    uint64_t n_red;
};

__device__ __forceinline__ int64_t kept_off(const red_plan &q, uint64_t t)
{
    int64_t o = 0;
    for (int i = q.nk - 1; i >= 0; i--) {
        o += (int64_t)(t % (uint64_t)q.kdims[i]) * q.kst[i];
        t /= (uint64_t)q.kdims[i];
    }
    return o;
}

__device__ __forceinline__ int64_t red_off(const red_plan &q, uint64_t j)
{
    int64_t o = 0;
    for (int i = q.nr - 1; i >= 0; i--) {
        o += (int64_t)(j % (uint64_t)q.rdims[i]) * q.rst[i];
        j /= (uint64_t)q.rdims[i];
    }
    return o;
}

template <typename T> __device__ __forceinline__ bool is_nan(T v) { return false; }
template <> __device__ __forceinline__ bool is_nan(double v) { return v != v; }

/* c (op)= v, the CPU's FOLD; also combines two partial results. */
template <typename T>
__device__ __forceinline__ T fold(int op, T c, T v)
{
    switch (op) {
    case TX_REDUCE_SUM:
    case TX_REDUCE_MEAN: return (T)(c + v);
    case TX_REDUCE_PROD: return (T)(c * v);
    case TX_REDUCE_MAX: return (is_nan(v) || v > c) ? v : c;
    default: return (is_nan(v) || v < c) ? v : c;
    }
}

template <typename T> __device__ __forceinline__ T load_acc(const void *x, size_t i, int dt);
template <> __device__ __forceinline__ double load_acc(const void *x, size_t i, int dt) { return ld_f64(x, i, dt); }
template <> __device__ __forceinline__ int64_t load_acc(const void *x, size_t i, int dt) { return ld_i64(x, i, dt); }
template <> __device__ __forceinline__ uint64_t load_acc(const void *x, size_t i, int dt) { return ld_u64(x, i, dt); }

/* The finished value of one output, stored as the CPU does. */
__device__ __forceinline__ void finish(int op, double v, double count, void *y, size_t t, int dt)
{
    if (op == TX_REDUCE_MEAN) v = v / count;
    if (dt == TEEXEC_DTYPE_DOUBLE) st_f64(y, t, dt, v);
    else st_f32(y, t, dt, __double2float_rn(v));
}
__device__ __forceinline__ void finish(int op, int64_t v, double count, void *y, size_t t, int dt)
{
    if (op == TX_REDUCE_MEAN) v = count > 0 ? v / (int64_t)count : 0;
    st_i64(y, t, dt, v);
}
__device__ __forceinline__ void finish(int op, uint64_t v, double count, void *y, size_t t, int dt)
{
    if (op == TX_REDUCE_MEAN) v = count > 0 ? v / (uint64_t)count : 0;
    st_u64(y, t, dt, v);
}

template <typename T>
__global__ void reduce_thread_kernel(int op, red_plan q, T ident, const void *x, int dt, void *y,
                                     uint64_t n_target)
{
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n_target;
         t += (uint64_t)gridDim.x * blockDim.x) {
        int64_t base = kept_off(q, t);
        T c = ident;
        for (uint64_t j = 0; j < q.n_red; j++)
            c = fold<T>(op, c, load_acc<T>(x, (size_t)(base + red_off(q, j)), dt));
        finish(op, c, (double)q.n_red, y, (size_t)t, dt);
    }
}

constexpr unsigned kRedThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kRedThreads)
reduce_block_kernel(int op, red_plan q, T ident, const void *x, int dt, void *y,
                    uint64_t n_target)
{
    __shared__ T part[kRedThreads];
    for (uint64_t t = blockIdx.x; t < n_target; t += gridDim.x) {
        int64_t base = kept_off(q, t);
        T c = ident;
        for (uint64_t j = threadIdx.x; j < q.n_red; j += blockDim.x)
            c = fold<T>(op, c, load_acc<T>(x, (size_t)(base + red_off(q, j)), dt));
        part[threadIdx.x] = c;
        __syncthreads();
        for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) part[threadIdx.x] = fold<T>(op, part[threadIdx.x], part[threadIdx.x + w]);
            __syncthreads();
        }
        if (threadIdx.x == 0) finish(op, part[0], (double)q.n_red, y, (size_t)t, dt);
        __syncthreads();
    }
}

template <typename T>
teexec_status *launch_reduce(int op, const red_plan &q, T ident, const void *x, int dt, void *y,
                             uint64_t n_target, cudaStream_t s)
{
    if (q.n_red >= 256 && n_target < 132u * 64u)
        reduce_block_kernel<T><<<(unsigned)n_target, kRedThreads, 0, s>>>(op, q, ident, x, dt, y,
                                                                         n_target);
    else
        reduce_thread_kernel<T><<<grid_for(n_target, 128), 128, 0, s>>>(op, q, ident, x, dt, y,
                                                                       n_target);
    TX_CUDA_LAUNCHED("reduce");
    return NULL;
}

struct bwd_plan {
    int rank;
    int64_t dims[TX_STD_RANK], gst[TX_STD_RANK]; /* x's dims; g's strides, 0 on reduced */
};

__global__ void reduce_bwd_kernel(bwd_plan p, const void *g, int gt, double scale, void *gx,
                                  int gxt, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t og = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            og += (int64_t)(rem % (uint64_t)p.dims[k]) * p.gst[k];
            rem /= (uint64_t)p.dims[k];
        }
        st_f64(gx, i, gxt, ld_f64(g, (size_t)og, gt) * scale);
    }
}

/* Per output of ReduceMax / ReduceMin: how many inputs equal it (ties); of
 * ReduceProd: the product of the nonzero inputs and the zero count. Each
 * walks its reduced elements in memory order, as the CPU does. */
__global__ void red_stats_kernel(int prod, red_plan q, const void *x, int xt, const void *y,
                                 int yt, double *a, double *b, uint64_t n_target)
{
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n_target;
         t += (uint64_t)gridDim.x * blockDim.x) {
        int64_t base = kept_off(q, t);
        double acc = prod ? 1.0 : 0.0, zeros = 0.0, yv = prod ? 0.0 : ld_f64(y, t, yt);
        for (uint64_t j = 0; j < q.n_red; j++) {
            double v = ld_f64(x, (size_t)(base + red_off(q, j)), xt);
            if (prod) {
                if (v == 0) zeros += 1;
                else acc *= v;
            } else if (v == yv) {
                acc += 1;
            }
        }
        a[t] = acc;
        if (prod) b[t] = zeros;
    }
}

/* gx for ReduceMax / Min (g / ties where x equals the extreme) or
 * ReduceProd (g times the product of the others). */
__global__ void red_bwd2_kernel(int prod, bwd_plan p, const void *x, int xt, const void *y,
                                int yt, const void *g, int gt, const double *a, const double *b,
                                void *gx, int gxt, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t o = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            o += (int64_t)(rem % (uint64_t)p.dims[k]) * p.gst[k];
            rem /= (uint64_t)p.dims[k];
        }
        double xv = ld_f64(x, i, xt), gv = ld_f64(g, (size_t)o, gt), r;
        if (prod) {
            double z = b[o], d = z == 0 ? a[o] / xv : (z == 1 && xv == 0 ? a[o] : 0.0);
            r = gv * d;
        } else {
            r = xv == ld_f64(y, (size_t)o, yt) ? gv / a[o] : 0.0;
        }
        st_f64(gx, i, gxt, r);
    }
}

/* ---- ArgMax / ArgMin / TopK ------------------------------------------------------- */

/* The CPU's order-preserving key (kernels/cpu/argmax_topk.c load_keys). */
__device__ __forceinline__ uint64_t key_of(const void *x, size_t i, int dt, int dom)
{
    if (dom == TX_DOM_F32 || dom == TX_DOM_F64) {
        double v = ld_f64(x, i, dt);
        uint64_t b;
        if (v != v) {
            b = 0x7ff8000000000000ull;
        } else {
            if (v == 0) v = 0.0; /* -0 -> +0 */
            b = (uint64_t)__double_as_longlong(v);
        }
        return (b >> 63) ? ~b : b | (1ull << 63);
    }
    if (dom == TX_DOM_I64) return (uint64_t)ld_i64(x, i, dt) ^ (1ull << 63);
    return ld_u64(x, i, dt);
}

/* Whether (ka, ia) wins over the current (kb, ib). */
__device__ __forceinline__ bool arg_better(int is_max, int last, uint64_t ka, uint64_t ia,
                                           uint64_t kb, uint64_t ib)
{
    if (ka != kb) return is_max ? ka > kb : ka < kb;
    return last ? ia > ib : ia < ib;
}

__global__ void argmax_thread_kernel(int is_max, int last, const void *x, int dt, int dom,
                                     uint64_t n, uint64_t inner, int64_t *y, uint64_t lines)
{
    for (uint64_t l = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; l < lines;
         l += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t o = l / inner, j = l % inner, base = o * n * inner + j;
        uint64_t best = 0, bk = key_of(x, (size_t)base, dt, dom);
        for (uint64_t i = 1; i < n; i++) {
            uint64_t k = key_of(x, (size_t)(base + i * inner), dt, dom);
            bool better = is_max ? k > bk : k < bk;
            if (better || (last && k == bk)) {
                best = i;
                bk = k;
            }
        }
        y[l] = (int64_t)best;
    }
}

__global__ void __launch_bounds__(kRedThreads)
argmax_block_kernel(int is_max, int last, const void *x, int dt, int dom, uint64_t n,
                    uint64_t inner, int64_t *y, uint64_t lines)
{
    __shared__ uint64_t sk[kRedThreads], si[kRedThreads];
    for (uint64_t l = blockIdx.x; l < lines; l += gridDim.x) {
        uint64_t o = l / inner, j = l % inner, base = o * n * inner + j;
        uint64_t bi = UINT64_MAX, bk = 0;
        for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
            uint64_t k = key_of(x, (size_t)(base + i * inner), dt, dom);
            if (bi == UINT64_MAX || arg_better(is_max, last, k, i, bk, bi)) {
                bk = k;
                bi = i;
            }
        }
        sk[threadIdx.x] = bk;
        si[threadIdx.x] = bi;
        __syncthreads();
        for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) {
                uint64_t oi = si[threadIdx.x + w];
                if (oi != UINT64_MAX &&
                    (si[threadIdx.x] == UINT64_MAX ||
                     arg_better(is_max, last, sk[threadIdx.x + w], oi, sk[threadIdx.x],
                                si[threadIdx.x]))) {
                    sk[threadIdx.x] = sk[threadIdx.x + w];
                    si[threadIdx.x] = oi;
                }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) y[l] = (int64_t)si[0];
        __syncthreads();
    }
}

constexpr unsigned kTopThreads = 256;

/* grid (blocks over a row's elements, rows): each thread counts how many
 * elements of its row come before its own; that rank is its place. */
__global__ void __launch_bounds__(kTopThreads)
topk_kernel(int largest, uint64_t k, const void *x, int dt, int dom, int esz, uint64_t n,
            uint64_t inner, void *values, int64_t *indices, uint64_t lines)
{
    __shared__ uint64_t tile[kTopThreads];
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (uint64_t l = blockIdx.y; l < lines; l += gridDim.y) {
        uint64_t o = l / inner, jl = l % inner, base = o * n * inner + jl;
        uint64_t mine = i < n ? key_of(x, (size_t)(base + i * inner), dt, dom) : 0, rank = 0;
        for (uint64_t t0 = 0; t0 < n; t0 += kTopThreads) {
            __syncthreads();
            uint64_t jt = t0 + threadIdx.x;
            if (jt < n) tile[threadIdx.x] = key_of(x, (size_t)(base + jt * inner), dt, dom);
            __syncthreads();
            uint64_t m = n - t0 < kTopThreads ? n - t0 : kTopThreads;
            if (i < n)
                for (uint64_t q = 0; q < m; q++) {
                    uint64_t kj = tile[q], j = t0 + q;
                    bool before = largest ? kj > mine : kj < mine;
                    rank += before || (kj == mine && j < i);
                }
        }
        if (i < n && rank < k) {
            size_t dst = (size_t)(o * k * inner + rank * inner + jl);
            mv(values, dst, x, (size_t)(base + i * inner), esz);
            indices[dst] = (int64_t)i;
        }
    }
}

/* ---- CumSum ------------------------------------------------------------------------ */

__global__ void cumsum_kernel(int exclusive, int reverse, const void *x, void *y, int dt,
                              int is_float, uint64_t n, uint64_t inner, uint64_t lanes)
{
    for (uint64_t l = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; l < lanes;
         l += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t o = l / inner, j = l % inner;
        double ad = 0.0;
        uint64_t ai = 0;
        for (uint64_t t = 0; t < n; t++) {
            uint64_t i = reverse ? n - 1 - t : t;
            size_t off = (size_t)((o * n + i) * inner + j);
            if (is_float) {
                double v = ld_f64(x, off, dt), r;
                if (exclusive) {
                    r = ad;
                    ad += v;
                } else {
                    ad += v;
                    r = ad;
                }
                if (dt == TEEXEC_DTYPE_DOUBLE) st_f64(y, off, dt, r);
                else st_f32(y, off, dt, __double2float_rn(r));
            } else {
                uint64_t v = (uint64_t)ld_i64(x, off, dt), r;
                if (exclusive) {
                    r = ai;
                    ai += v;
                } else {
                    ai += v;
                    r = ai;
                }
                st_i64(y, off, dt, (int64_t)r);
            }
        }
    }
}

uint64_t grid_lines(uint64_t lines) { return lines < 65535 ? lines : 65535; }

} // namespace

/* The kept / reduced split of a plan, and the output's element count. */
static uint64_t make_red_plan(const tx_cuda_reduce_plan *p, red_plan *q)
{
    memset(q, 0, sizeof *q);
    q->n_red = 1;
    uint64_t n_target = 1;
    int64_t s = 1, st[TX_STD_RANK];
    for (int k = p->rank - 1; k >= 0; k--) {
        st[k] = s;
        s *= p->dims[k];
    }
    for (int k = 0; k < p->rank; k++) {
        if (p->red[k]) {
            q->rdims[q->nr] = p->dims[k];
            q->rst[q->nr++] = st[k];
            q->n_red *= (uint64_t)p->dims[k];
        } else {
            q->kdims[q->nk] = p->dims[k];
            q->kst[q->nk++] = st[k];
            n_target *= (uint64_t)p->dims[k];
        }
    }
    return n_target;
}

static uint64_t make_bwd_plan(const tx_cuda_reduce_plan *p, bwd_plan *b)
{
    memset(b, 0, sizeof *b);
    b->rank = p->rank;
    uint64_t n = 1;
    int64_t s = 1;
    for (int k = p->rank - 1; k >= 0; k--) {
        b->dims[k] = p->dims[k];
        b->gst[k] = p->red[k] ? 0 : s;
        if (!p->red[k]) s *= p->dims[k];
        n *= (uint64_t)p->dims[k];
    }
    return n;
}

extern "C" int tx_cuda_reduce_dtype_ok(tx_reduce_op op, teexec_dtype dt)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if (op != TX_REDUCE_SUM && op != TX_REDUCE_MEAN && op != TX_REDUCE_MAX &&
        op != TX_REDUCE_MIN && op != TX_REDUCE_PROD)
        return 0;
    return tx_std_dom_numeric(d) ||
           (d == TX_DOM_BOOL && (op == TX_REDUCE_MAX || op == TX_REDUCE_MIN));
}

extern "C" teexec_status *tx_cuda_reduce(tx_reduce_op op, const tx_cuda_reduce_plan *p,
                                         const void *x, void *y, teexec_dtype dt, void *stream)
{
    if (!tx_cuda_reduce_dtype_ok(op, dt)) return bad("reduce", "dtype not supported for this op");
    if (p->rank < 0 || p->rank > TX_STD_RANK) return bad("reduce", "rank out of range");
    red_plan q;
    uint64_t n_target = make_red_plan(p, &q);
    if (!n_target) return NULL;
    cudaStream_t cs = (cudaStream_t)stream;
    tx_std_dom d = tx_std_dom_of(dt);
    if (tx_std_dom_float(d)) {
        double id = op == TX_REDUCE_PROD ? 1.0 : op == TX_REDUCE_MAX ? -INFINITY
                    : op == TX_REDUCE_MIN ? INFINITY : 0.0;
        return launch_reduce<double>((int)op, q, id, x, (int)dt, y, n_target, cs);
    }
    unsigned bits = teexec_dtype_bits(dt);
    if (d == TX_DOM_I64) {
        int64_t tmax = bits >= 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1);
        int64_t id = op == TX_REDUCE_PROD ? 1 : op == TX_REDUCE_MAX ? -tmax - 1
                     : op == TX_REDUCE_MIN ? tmax : 0;
        return launch_reduce<int64_t>((int)op, q, id, x, (int)dt, y, n_target, cs);
    }
    uint64_t id = op == TX_REDUCE_PROD ? 1 : 0;
    if (op == TX_REDUCE_MIN) id = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    return launch_reduce<uint64_t>((int)op, q, id, x, (int)dt, y, n_target, cs);
}

extern "C" teexec_status *tx_cuda_reduce_backward(const tx_cuda_reduce_plan *p, const void *g,
                                                  teexec_dtype g_dtype, double scale, void *gx,
                                                  teexec_dtype gx_dtype, void *stream)
{
    if (tx_std_dom_of(g_dtype) != TX_DOM_F32 || tx_std_dom_of(gx_dtype) != TX_DOM_F32)
        return bad("reduce backward", "grads must be FLOAT, FLOAT16 or BFLOAT16");
    if (p->rank < 0 || p->rank > TX_STD_RANK) return bad("reduce backward", "rank out of range");
    bwd_plan b;
    uint64_t n = make_bwd_plan(p, &b);
    if (!n) return NULL;
    reduce_bwd_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        b, g, (int)g_dtype, scale, gx, (int)gx_dtype, n);
    TX_CUDA_LAUNCHED("reduce backward");
    return NULL;
}

extern "C" teexec_status *tx_cuda_argmax(int is_max, int select_last, const void *x,
                                         teexec_dtype dt, size_t outer, size_t n, size_t inner,
                                         int64_t *y, void *stream)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if (d == TX_DOM_NONE) return bad("argmax", "dtype must be numeric or bool");
    uint64_t lines = (uint64_t)outer * inner;
    if (!lines) return NULL;
    if (!n) return bad("argmax", "the axis has size 0");
    cudaStream_t s = (cudaStream_t)stream;
    if (lines >= 256 || n <= 1024)
        argmax_thread_kernel<<<grid_for(lines, 128), 128, 0, s>>>(
            is_max, select_last, x, (int)dt, (int)d, n, inner, y, lines);
    else
        argmax_block_kernel<<<(unsigned)lines, kRedThreads, 0, s>>>(
            is_max, select_last, x, (int)dt, (int)d, n, inner, y, lines);
    TX_CUDA_LAUNCHED("argmax");
    return NULL;
}

extern "C" teexec_status *tx_cuda_topk(int largest, size_t k, const void *x, teexec_dtype dt,
                                       size_t outer, size_t n, size_t inner, void *values,
                                       int64_t *indices, void *stream)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if (!tx_std_dom_numeric(d)) return bad("topk", "dtype must be numeric");
    if (k > n) return bad("topk", "k exceeds the axis");
    uint64_t lines = (uint64_t)outer * inner;
    if (!lines || !k) return NULL;
    uint64_t bx = (n + kTopThreads - 1) / kTopThreads;
    if (bx > 0x7fffffffu) return bad("topk", "axis too long");
    dim3 grid((unsigned)bx, (unsigned)grid_lines(lines));
    topk_kernel<<<grid, kTopThreads, 0, (cudaStream_t)stream>>>(
        largest, k, x, (int)dt, (int)d, (int)tx_dtype_elem_size(dt), n, inner, values, indices,
        lines);
    TX_CUDA_LAUNCHED("topk");
    return NULL;
}

extern "C" teexec_status *tx_cuda_cumsum(int exclusive, int reverse, const void *x, void *y,
                                         teexec_dtype dt, size_t outer, size_t n, size_t inner,
                                         void *stream)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if (!tx_std_dom_numeric(d)) return bad("cumsum", "dtype must be numeric");
    uint64_t lanes = (uint64_t)outer * inner;
    if (!lanes || !n) return NULL;
    cumsum_kernel<<<grid_for(lanes, 128), 128, 0, (cudaStream_t)stream>>>(
        exclusive, reverse, x, y, (int)dt, tx_std_dom_float(d), n, inner, lanes);
    TX_CUDA_LAUNCHED("cumsum");
    return NULL;
}

extern "C" size_t tx_cuda_reduce_backward_scratch(const tx_cuda_reduce_plan *p)
{
    red_plan q;
    uint64_t n_target = make_red_plan(p, &q);
    return (size_t)(2 * (n_target ? n_target : 1) * sizeof(double));
}

extern "C" teexec_status *tx_cuda_reduce_backward_select(tx_reduce_op op,
                                                         const tx_cuda_reduce_plan *p,
                                                         const void *x, teexec_dtype xt,
                                                         const void *y, teexec_dtype yt,
                                                         const void *g, teexec_dtype gt,
                                                         void *gx, void *scratch, void *stream)
{
    if (op != TX_REDUCE_MAX && op != TX_REDUCE_MIN && op != TX_REDUCE_PROD)
        return bad("reduce backward", "not ReduceMax, ReduceMin or ReduceProd");
    if (tx_std_dom_of(gt) != TX_DOM_F32 || tx_std_dom_of(xt) != TX_DOM_F32)
        return bad("reduce backward", "grads must be FLOAT, FLOAT16 or BFLOAT16");
    if (p->rank < 0 || p->rank > TX_STD_RANK) return bad("reduce backward", "rank out of range");
    red_plan q;
    uint64_t n_target = make_red_plan(p, &q);
    bwd_plan b;
    uint64_t n = make_bwd_plan(p, &b);
    if (!n) return NULL;
    int prod = op == TX_REDUCE_PROD;
    double *a = (double *)scratch, *z = a + (n_target ? n_target : 1);
    cudaStream_t s = (cudaStream_t)stream;
    if (n_target) {
        red_stats_kernel<<<grid_for(n_target, 128), 128, 0, s>>>(prod, q, x, (int)xt, y, (int)yt,
                                                                  a, z, n_target);
        TX_CUDA_LAUNCHED("reduce backward statistics");
    }
    red_bwd2_kernel<<<grid_for(n, 256), 256, 0, s>>>(prod, b, x, (int)xt, y, (int)yt, g, (int)gt,
                                                     a, z, gx, (int)xt, n);
    TX_CUDA_LAUNCHED("reduce backward");
    return NULL;
}
