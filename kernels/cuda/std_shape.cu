/* std_shape.cu - Tile, Trilu, Range, fills, literals and GatherElements on
 * the GPU (std_shape.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_num.cuh"

extern "C" {
#include "base/tensor.h"
#include "kernels/cuda/std_shape.h"
}

#include <string.h>

using namespace txs;

namespace {

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

bool esz_ok(size_t esz) { return esz == 1 || esz == 2 || esz == 4 || esz == 8; }

struct tile_plan {
    int rank;
    int64_t xd[TX_STD_RANK], yd[TX_STD_RANK], xst[TX_STD_RANK];
};

__global__ void tile_kernel(tile_plan p, const void *x, void *y, int esz, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t ox = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            int64_t c = (int64_t)(rem % (uint64_t)p.yd[k]);
            rem /= (uint64_t)p.yd[k];
            ox += (c % p.xd[k]) * p.xst[k];
        }
        mv(y, i, x, (size_t)ox, esz);
    }
}

__global__ void trilu_kernel(int upper, const int64_t *k_dev, int64_t k_host, const void *x,
                             void *y, int esz, int64_t rows, int64_t cols, uint64_t n)
{
    int64_t k = k_dev ? *k_dev : k_host;
    /* clamped as the CPU does, so i + k cannot overflow */
    if (k > cols) k = cols;
    if (k < -rows) k = -rows;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        int64_t j = (int64_t)(e % (uint64_t)cols), i = (int64_t)((e / (uint64_t)cols) % (uint64_t)rows);
        bool keep = upper ? j >= i + k : j <= i + k;
        if (keep) mv(y, e, x, e, esz);
        else zero_elem(y, e, esz);
    }
}

__global__ void range_kernel(const void *start, const void *delta, void *y, int dt, int dom,
                             uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        if (dom == TX_DOM_I64) {
            uint64_t s = (uint64_t)ld_i64(start, 0, dt), d = (uint64_t)ld_i64(delta, 0, dt);
            st_i64(y, i, dt, (int64_t)(s + i * d));
        } else if (dt == TEEXEC_DTYPE_DOUBLE) {
            double s = ld_f64(start, 0, dt), d = ld_f64(delta, 0, dt);
            st_f64(y, i, dt, __dadd_rn(s, __dmul_rn(__ull2double_rn(i), d)));
        } else {
            float s = __double2float_rn(ld_f64(start, 0, dt));
            float d = __double2float_rn(ld_f64(delta, 0, dt));
            st_f32(y, i, dt, __fadd_rn(s, __fmul_rn(__ull2float_rn(i), d)));
        }
    }
}

__global__ void fill_kernel(void *y, int esz, uint64_t v, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        switch (esz) {
        case 1: ((uint8_t *)y)[i] = (uint8_t)v; break;
        case 2: ((uint16_t *)y)[i] = (uint16_t)v; break;
        case 4: ((uint32_t *)y)[i] = (uint32_t)v; break;
        default: ((uint64_t *)y)[i] = v; break;
        }
    }
}

struct literal_arg {
    uint8_t b[TX_CUDA_LITERAL_MAX];
};

__global__ void literal_kernel(literal_arg a, uint8_t *y, unsigned n)
{
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) y[i] = a.b[i];
}

struct ge_plan {
    int rank, axis;
    int64_t id[TX_STD_RANK], dst[TX_STD_RANK]; /* index dims; data strides */
    int64_t dd[TX_STD_RANK];                   /* data dims */
};

__global__ void gather_elements_kernel(ge_plan p, const void *data, int esz, const void *idx,
                                       int i64, int64_t axis_len, void *out, uint64_t n)
{
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        int64_t v = i64 ? ((const int64_t *)idx)[e] : (int64_t)((const int32_t *)idx)[e];
        if (v < 0) v += axis_len;
        if (v < 0 || v >= axis_len) {
            zero_elem(out, e, esz);
            continue;
        }
        uint64_t rem = e;
        int64_t od = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            int64_t c = (int64_t)(rem % (uint64_t)p.id[k]);
            rem /= (uint64_t)p.id[k];
            od += (k == p.axis ? v : c) * p.dst[k];
        }
        mv(out, e, data, (size_t)od, esz);
    }
}

/* Tile's backward: each x element sums its copies in y, repeats walked in
 * order (the CPU's). */
__global__ void tile_bwd_kernel(tile_plan p, const void *g, int dt, void *gx, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        int64_t c[TX_STD_RANK], reps[TX_STD_RANK], r[TX_STD_RANK], yst[TX_STD_RANK];
        uint64_t rem = i, total = 1;
        int64_t s = 1;
        for (int k = p.rank - 1; k >= 0; k--) {
            c[k] = (int64_t)(rem % (uint64_t)p.xd[k]);
            rem /= (uint64_t)p.xd[k];
            reps[k] = p.yd[k] / p.xd[k];
            r[k] = 0;
            yst[k] = s;
            s *= p.yd[k];
            total *= (uint64_t)reps[k];
        }
        double acc = 0.0;
        for (uint64_t t = 0; t < total; t++) {
            int64_t o = 0;
            for (int k = 0; k < p.rank; k++) o += (r[k] * p.xd[k] + c[k]) * yst[k];
            acc += ld_f64(g, (size_t)o, dt);
            for (int k = p.rank - 1; k >= 0; k--) {
                if (++r[k] < reps[k]) break;
                r[k] = 0;
            }
        }
        st_f64(gx, i, dt, acc);
    }
}

/* GatherElements' backward: each data element sums the output elements
 * whose index points at it, scanning the axis in order (the CPU's). */
__global__ void gather_elements_bwd_kernel(ge_plan p, const void *idx, int i64, const void *g,
                                           int dt, void *gx, uint64_t n)
{
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        /* e's coordinates in data, and the index elements sharing them */
        int64_t c[TX_STD_RANK];
        uint64_t rem = e;
        bool inside = true;
        for (int k = p.rank - 1; k >= 0; k--) {
            c[k] = (int64_t)(rem % (uint64_t)p.dd[k]);
            rem /= (uint64_t)p.dd[k];
            if (k != p.axis && c[k] >= p.id[k]) inside = false;
        }
        double acc = 0.0;
        if (inside) {
            int64_t ist = 1, base = 0, ax_st = 0;
            for (int k = p.rank - 1; k >= 0; k--) {
                if (k == p.axis) ax_st = ist;
                else base += c[k] * ist;
                ist *= p.id[k];
            }
            int64_t len = p.dd[p.axis];
            for (int64_t j = 0; j < p.id[p.axis]; j++) {
                int64_t o = base + j * ax_st;
                int64_t v = i64 ? ((const int64_t *)idx)[o] : (int64_t)((const int32_t *)idx)[o];
                if (v < 0) v += len;
                if (v == c[p.axis]) acc += ld_f64(g, (size_t)o, dt);
            }
        }
        st_f64(gx, e, dt, acc);
    }
}

/* TopK's backward: the selected values' grads land on their sources (the
 * indices of a row are distinct), every other element 0. */
__global__ void topk_bwd_kernel(const void *g, int dt, const int64_t *indices, uint64_t k,
                                uint64_t len, uint64_t inner, void *gx, uint64_t n)
{
    for (uint64_t p = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; p < n;
         p += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t in = p % inner, o = p / (inner * k);
        int64_t src = indices[p];
        if (src >= 0 && (uint64_t)src < len)
            st_f64(gx, (size_t)((o * len + (uint64_t)src) * inner + in), dt, ld_f64(g, p, dt));
    }
}

/* GatherND: the element offset in data of each slice's first element; an
 * index out of range gives -1 (a zero slice, as Gather's). */
struct gnd_plan {
    int b, k;                      /* batch dims, indexed dims */
    int64_t dims[TX_STD_RANK];     /* data's indexed dims (b .. b + k) */
    int64_t st[TX_STD_RANK];       /* their element strides */
    uint64_t per_batch, batch_stride;
};

__device__ __forceinline__ int64_t gnd_offset(const gnd_plan &p, const int64_t *iv, uint64_t s)
{
    uint64_t bi = p.per_batch ? s / p.per_batch : 0;
    int64_t o = (int64_t)(bi * p.batch_stride);
    for (int j = 0; j < p.k; j++) {
        int64_t dim = p.dims[j], v = iv[s * (uint64_t)p.k + (uint64_t)j];
        if (v < -dim || v >= dim) return -1;
        o += (v < 0 ? v + dim : v) * p.st[j];
    }
    return o;
}

__global__ void gather_nd_kernel(gnd_plan p, const void *data, int esz, const int64_t *iv,
                                 uint64_t sl, void *out, uint64_t n)
{
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t s = e / sl, w = e % sl;
        int64_t o = gnd_offset(p, iv, s);
        if (o < 0) zero_elem(out, e, esz);
        else mv(out, e, data, (size_t)((uint64_t)o + w), esz);
    }
}

__global__ void gather_nd_offsets_kernel(gnd_plan p, const int64_t *iv, int64_t *off, uint64_t ns)
{
    for (uint64_t s = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; s < ns;
         s += (uint64_t)gridDim.x * blockDim.x)
        off[s] = gnd_offset(p, iv, s);
}

/* Each data element sums the slices that read it, in slice order. */
__global__ void gather_nd_bwd_kernel(const int64_t *off, uint64_t ns, uint64_t sl, const void *g,
                                     int dt, void *gx, uint64_t n)
{
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        int64_t start = (int64_t)(e - e % sl);
        uint64_t w = e % sl;
        double acc = 0.0;
        for (uint64_t s = 0; s < ns; s++)
            if (off[s] == start) acc += ld_f64(g, (size_t)(s * sl + w), dt);
        st_f64(gx, e, dt, acc);
    }
}

uint64_t numel_of(int rank, const int64_t *dims)
{
    uint64_t n = 1;
    for (int k = 0; k < rank; k++) n *= (uint64_t)dims[k];
    return n;
}

} // namespace

extern "C" teexec_status *tx_cuda_tile(int rank, const int64_t *x_dims, const int64_t *y_dims,
                                       const void *x, void *y, size_t esz, void *stream)
{
    if (!esz_ok(esz)) return bad("tile", "element size must be 1, 2, 4 or 8 bytes");
    if (rank < 0 || rank > TX_STD_RANK) return bad("tile", "rank out of range");
    tile_plan p;
    memset(&p, 0, sizeof p);
    p.rank = rank;
    int64_t s = 1;
    for (int k = rank - 1; k >= 0; k--) {
        p.xd[k] = x_dims[k];
        p.yd[k] = y_dims[k];
        p.xst[k] = s;
        s *= x_dims[k];
    }
    uint64_t n = numel_of(rank, y_dims);
    if (!n) return NULL;
    tile_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(p, x, y, (int)esz, n);
    TX_CUDA_LAUNCHED("tile");
    return NULL;
}

extern "C" teexec_status *tx_cuda_trilu(int upper, const int64_t *k_dev, int64_t k_host,
                                        const void *x, void *y, size_t esz, size_t mats,
                                        int64_t rows, int64_t cols, void *stream)
{
    if (!esz_ok(esz)) return bad("trilu", "element size must be 1, 2, 4 or 8 bytes");
    uint64_t n = (uint64_t)mats * (uint64_t)rows * (uint64_t)cols;
    if (!n) return NULL;
    trilu_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(upper, k_dev, k_host, x, y,
                                                                     (int)esz, rows, cols, n);
    TX_CUDA_LAUNCHED("trilu");
    return NULL;
}

extern "C" teexec_status *tx_cuda_range(const void *start, const void *delta, void *y,
                                        teexec_dtype dt, size_t n, void *stream)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if (d != TX_DOM_I64 && d != TX_DOM_F32 && d != TX_DOM_F64)
        return bad("range", "dtype must be a float or a signed integer");
    if (!n) return NULL;
    range_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(start, delta, y, (int)dt,
                                                                     (int)d, (uint64_t)n);
    TX_CUDA_LAUNCHED("range");
    return NULL;
}

extern "C" teexec_status *tx_cuda_fill(void *y, size_t esz, const void *value, size_t n,
                                       void *stream)
{
    if (!esz_ok(esz)) return bad("fill", "element size must be 1, 2, 4 or 8 bytes");
    if (!n) return NULL;
    uint64_t v = 0;
    memcpy(&v, value, esz);
    fill_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(y, (int)esz, v, (uint64_t)n);
    TX_CUDA_LAUNCHED("fill");
    return NULL;
}

extern "C" teexec_status *tx_cuda_literal(void *y, const void *bytes, size_t nbytes, void *stream)
{
    if (nbytes > TX_CUDA_LITERAL_MAX) return bad("literal", "more bytes than a kernel argument holds");
    if (!nbytes) return NULL;
    literal_arg a;
    memset(&a, 0, sizeof a);
    memcpy(a.b, bytes, nbytes);
    literal_kernel<<<1, 256, 0, (cudaStream_t)stream>>>(a, (uint8_t *)y, (unsigned)nbytes);
    TX_CUDA_LAUNCHED("literal");
    return NULL;
}

extern "C" teexec_status *tx_cuda_gather_elements(int rank, const int64_t *dims,
                                                  const int64_t *idx_dims, int axis,
                                                  const void *data, size_t esz, const void *idx,
                                                  teexec_dtype idx_dtype, void *out,
                                                  void *stream)
{
    if (!esz_ok(esz)) return bad("gather elements", "element size must be 1, 2, 4 or 8 bytes");
    if (idx_dtype != TEEXEC_DTYPE_INT64 && idx_dtype != TEEXEC_DTYPE_INT32)
        return bad("gather elements", "indices must be INT64 or INT32");
    if (rank < 1 || rank > TX_STD_RANK || axis < 0 || axis >= rank)
        return bad("gather elements", "rank or axis out of range");
    ge_plan p;
    memset(&p, 0, sizeof p);
    p.rank = rank;
    p.axis = axis;
    int64_t s = 1;
    for (int k = rank - 1; k >= 0; k--) {
        p.id[k] = idx_dims[k];
        p.dst[k] = s;
        s *= dims[k];
    }
    uint64_t n = numel_of(rank, idx_dims);
    if (!n) return NULL;
    gather_elements_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        p, data, (int)esz, idx, idx_dtype == TEEXEC_DTYPE_INT64, dims[axis], out, n);
    TX_CUDA_LAUNCHED("gather elements");
    return NULL;
}

extern "C" teexec_status *tx_cuda_tile_backward(int rank, const int64_t *x_dims,
                                                const int64_t *y_dims, const void *g,
                                                teexec_dtype dt, void *gx, void *stream)
{
    if (tx_std_dom_of(dt) != TX_DOM_F32) return bad("tile backward", "grads must be float");
    if (rank < 0 || rank > TX_STD_RANK) return bad("tile backward", "rank out of range");
    tile_plan p;
    memset(&p, 0, sizeof p);
    p.rank = rank;
    for (int k = 0; k < rank; k++) {
        p.xd[k] = x_dims[k];
        p.yd[k] = y_dims[k];
    }
    uint64_t n = numel_of(rank, x_dims);
    if (!n) return NULL;
    tile_bwd_kernel<<<grid_for(n, 128), 128, 0, (cudaStream_t)stream>>>(p, g, (int)dt, gx, n);
    TX_CUDA_LAUNCHED("tile backward");
    return NULL;
}

extern "C" teexec_status *tx_cuda_gather_elements_backward(int rank, const int64_t *dims,
                                                           const int64_t *idx_dims, int axis,
                                                           const void *idx, teexec_dtype idx_dtype,
                                                           const void *g, teexec_dtype dt,
                                                           void *gx, void *stream)
{
    if (tx_std_dom_of(dt) != TX_DOM_F32) return bad("gather elements backward", "grads must be float");
    if (idx_dtype != TEEXEC_DTYPE_INT64 && idx_dtype != TEEXEC_DTYPE_INT32)
        return bad("gather elements backward", "indices must be INT64 or INT32");
    if (rank < 1 || rank > TX_STD_RANK || axis < 0 || axis >= rank)
        return bad("gather elements backward", "rank or axis out of range");
    ge_plan p;
    memset(&p, 0, sizeof p);
    p.rank = rank;
    p.axis = axis;
    for (int k = 0; k < rank; k++) {
        p.id[k] = idx_dims[k];
        p.dd[k] = dims[k];
    }
    uint64_t n = numel_of(rank, dims);
    if (!n) return NULL;
    gather_elements_bwd_kernel<<<grid_for(n, 128), 128, 0, (cudaStream_t)stream>>>(
        p, idx, idx_dtype == TEEXEC_DTYPE_INT64, g, (int)dt, gx, n);
    TX_CUDA_LAUNCHED("gather elements backward");
    return NULL;
}

extern "C" teexec_status *tx_cuda_topk_backward(const void *g, teexec_dtype dt,
                                                const int64_t *indices, size_t outer, size_t k,
                                                size_t len, size_t inner, void *gx, void *stream)
{
    if (tx_std_dom_of(dt) != TX_DOM_F32) return bad("topk backward", "grads must be float");
    cudaStream_t s = (cudaStream_t)stream;
    size_t esz = tx_dtype_elem_size(dt);
    if (outer * len * inner)
        TX_CUDA_TRY(cudaMemsetAsync(gx, 0, outer * len * inner * esz, s), "topk backward");
    uint64_t n = (uint64_t)outer * k * inner;
    if (!n) return NULL;
    topk_bwd_kernel<<<grid_for(n, 256), 256, 0, s>>>(g, (int)dt, indices, k, len, inner, gx, n);
    TX_CUDA_LAUNCHED("topk backward");
    return NULL;
}

static teexec_status *gnd_make(int rank, const int64_t *dims, int idx_rank,
                               const int64_t *idx_dims, int batch_dims, gnd_plan *p,
                               uint64_t *ns, uint64_t *sl)
{
    memset(p, 0, sizeof *p);
    if (rank < 1 || idx_rank < 1 || batch_dims < 0 || batch_dims >= rank || batch_dims >= idx_rank)
        return bad("gather nd", "ranks or batch_dims out of range");
    int64_t k = idx_dims[idx_rank - 1];
    if (k < 1 || k > rank - batch_dims || k > TX_STD_RANK) return bad("gather nd", "bad index depth");
    p->b = batch_dims;
    p->k = (int)k;
    uint64_t nb = 1, per = 1, s = 1;
    for (int i = 0; i < batch_dims; i++) nb *= (uint64_t)idx_dims[i];
    for (int i = batch_dims; i < idx_rank - 1; i++) per *= (uint64_t)idx_dims[i];
    for (int i = batch_dims + (int)k; i < rank; i++) s *= (uint64_t)dims[i];
    uint64_t bs = s;
    for (int i = batch_dims + (int)k - 1; i >= batch_dims; i--) {
        p->dims[i - batch_dims] = dims[i];
        p->st[i - batch_dims] = (int64_t)bs;
        bs *= (uint64_t)dims[i];
    }
    p->per_batch = per;
    p->batch_stride = bs;
    *ns = nb * per;
    *sl = s;
    return NULL;
}

extern "C" teexec_status *tx_cuda_gather_nd(int rank, const int64_t *dims, int idx_rank,
                                            const int64_t *idx_dims, int batch_dims,
                                            const void *data, size_t esz, const int64_t *indices,
                                            void *out, void *stream)
{
    if (!esz_ok(esz)) return bad("gather nd", "element size must be 1, 2, 4 or 8 bytes");
    gnd_plan p;
    uint64_t ns, sl;
    TX_TRY(gnd_make(rank, dims, idx_rank, idx_dims, batch_dims, &p, &ns, &sl));
    uint64_t n = ns * sl;
    if (!n) return NULL;
    gather_nd_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(p, data, (int)esz,
                                                                         indices, sl, out, n);
    TX_CUDA_LAUNCHED("gather nd");
    return NULL;
}

extern "C" size_t tx_cuda_gather_nd_backward_scratch(int idx_rank, const int64_t *idx_dims)
{
    uint64_t ns = 1;
    for (int i = 0; i < idx_rank - 1; i++) ns *= (uint64_t)idx_dims[i];
    return (size_t)((ns ? ns : 1) * sizeof(int64_t));
}

extern "C" teexec_status *tx_cuda_gather_nd_backward(int rank, const int64_t *dims, int idx_rank,
                                                     const int64_t *idx_dims, int batch_dims,
                                                     const int64_t *indices, const void *g,
                                                     teexec_dtype dt, void *gx, void *scratch,
                                                     void *stream)
{
    if (tx_std_dom_of(dt) != TX_DOM_F32) return bad("gather nd backward", "grads must be float");
    gnd_plan p;
    uint64_t ns, sl;
    TX_TRY(gnd_make(rank, dims, idx_rank, idx_dims, batch_dims, &p, &ns, &sl));
    uint64_t n = numel_of(rank, dims);
    if (!n) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    int64_t *off = (int64_t *)scratch;
    if (ns) {
        gather_nd_offsets_kernel<<<grid_for(ns, 256), 256, 0, s>>>(p, indices, off, ns);
        TX_CUDA_LAUNCHED("gather nd backward offsets");
    }
    gather_nd_bwd_kernel<<<grid_for(n, 256), 256, 0, s>>>(off, ns, sl ? sl : 1, g, (int)dt, gx, n);
    TX_CUDA_LAUNCHED("gather nd backward");
    return NULL;
}
