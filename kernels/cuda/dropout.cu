/* dropout.cu - te.ops Dropout forward/backward with the CPU's Philox mask
 * (dropout.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"
#include "kernels/cuda/philox.cuh"

extern "C" {
#include "kernels/cuda/dropout.h"
}

#include <math.h>

namespace {

/* One thread per 16-element chunk: one Philox draw covers exactly the two
 * mask bytes 2c and 2c + 1, so no two threads write the same byte. */
__global__ void dropout_fwd_kernel(const void *x, int x_dt, void *y, int y_dt, uint8_t *mask,
                                   size_t n, unsigned threshold, float scale, uint64_t seed,
                                   uint64_t offset)
{
    size_t n_chunks = (n + 15) / 16;
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < n_chunks;
         c += (size_t)gridDim.x * blockDim.x) {
        uint32_t w[4];
        tx_dev_philox_draw(seed, offset, (uint64_t)c, w);
        unsigned bits = 0;
        size_t i0 = c * 16;
#pragma unroll
        for (unsigned j = 0; j < 16; j++) {
            size_t i = i0 + j;
            if (i >= n) break;
            unsigned byte = (w[j / 4] >> (8 * (j % 4))) & 0xffu;
            bool keep = byte >= threshold;
            bits |= (keep ? 1u : 0u) << j;
            float v = tx_ld(x, i, x_dt);
            tx_st(y, i, y_dt, keep ? v * scale : 0.0f);
        }
        if (mask) {
            mask[2 * c] = (uint8_t)(bits & 0xffu);
            if (i0 + 8 < n) mask[2 * c + 1] = (uint8_t)(bits >> 8);
        }
    }
}

__global__ void dropout_bwd_kernel(const void *dy, int dy_dt, void *dx, int dx_dt,
                                   const uint8_t *mask, size_t n, float scale)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        bool keep = (mask[i / 8] >> (i % 8)) & 1u;
        tx_st(dx, i, dx_dt, keep ? tx_ld(dy, i, dy_dt) * scale : 0.0f);
    }
}

unsigned grid_for(size_t work)
{
    size_t b = (work + 255) / 256;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

teexec_status *bad(const char *what)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda dropout: %s", what);
}

teexec_status *check_p(double p)
{
    if (!(p >= 0.0 && p < 1.0))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                             "cuda dropout: p must be in [0, 1), got %g", p);
    return NULL;
}

} // namespace

extern "C" size_t tx_cuda_dropout_mask_bytes(size_t n) { return n / 8 + (n % 8 != 0); }

extern "C" teexec_status *tx_cuda_dropout_forward(const void *x, teexec_dtype x_dtype, void *y,
                                                  teexec_dtype y_dtype, uint8_t *mask, size_t n,
                                                  double p, uint64_t seed, uint64_t offset,
                                                  void *stream)
{
    teexec_status *st = check_p(p);
    if (st) return st;
    if (!tx_io_dtype_ok(x_dtype) || !tx_io_dtype_ok(y_dtype)) return bad("bad dtype");
    if (!n) return NULL;
    if (!x || !y) return bad("x or y is NULL");
    /* the CPU's threshold and scale, computed the same way on the host */
    unsigned threshold = (unsigned)floor(p * 256.0);
    float scale = (float)(1.0 / (1.0 - p));
    dropout_fwd_kernel<<<grid_for((n + 15) / 16), 256, 0, (cudaStream_t)stream>>>(
        x, x_dtype, y, y_dtype, mask, n, threshold, scale, seed, offset);
    TX_CUDA_LAUNCHED("dropout forward");
    return NULL;
}

extern "C" teexec_status *tx_cuda_dropout_backward(const void *dy, teexec_dtype dy_dtype,
                                                   void *dx, teexec_dtype dx_dtype,
                                                   const uint8_t *mask, size_t n, double p,
                                                   void *stream)
{
    teexec_status *st = check_p(p);
    if (st) return st;
    if (!tx_io_dtype_ok(dy_dtype) || !tx_io_dtype_ok(dx_dtype)) return bad("bad dtype");
    if (!n) return NULL;
    if (!dy || !dx || !mask) return bad("dy, dx or the mask is NULL");
    float scale = (float)(1.0 / (1.0 - p));
    dropout_bwd_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(dy, dy_dtype, dx, dx_dtype,
                                                                      mask, n, scale);
    TX_CUDA_LAUNCHED("dropout backward");
    return NULL;
}
