/* std_shape.cu - Tile, Trilu, Range, fills, literals and GatherElements on
 * the GPU (std_shape.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_num.cuh"

extern "C" {
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
    int64_t id[TX_STD_RANK], dst[TX_STD_RANK];
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
