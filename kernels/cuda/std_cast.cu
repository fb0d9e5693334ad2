/* std_cast.cu - Cast on the GPU with kernels/cpu/convert.c's rules
 * (std_cast.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_convert.cuh"

extern "C" {
#include "kernels/cuda/std_cast.h"
}

#include <float.h>
#include <math.h>

using namespace txc;

namespace {

__global__ void cast_kernel(const void *x, int xt, void *y, int yt, int sat, int mode, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        store(y, yt, i, load(x, xt, i), sat, mode);
}

/* Sub-byte destinations: one thread per output byte, padding fields 0. */
__global__ void cast_packed_kernel(const void *x, int xt, uint8_t *y, int yt, uint64_t n,
                                   uint64_t nbytes)
{
    unsigned bits = bits_of(yt), per = 8u / bits;
    for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nbytes;
         j += (uint64_t)gridDim.x * blockDim.x) {
        unsigned byte = 0;
        for (unsigned q = 0; q < per; q++) {
            uint64_t k = j * per + q;
            if (k < n) byte |= subbyte_code(yt, load(x, xt, k)) << (q * bits);
        }
        y[j] = (uint8_t)byte;
    }
}

bool host_ok(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_UNDEFINED:
    case TEEXEC_DTYPE_STRING:
    case TEEXEC_DTYPE_COMPLEX64:
    case TEEXEC_DTYPE_COMPLEX128: return false;
    default: return (int)dt > 0 && (int)dt < TEEXEC_DTYPE_COUNT;
    }
}

unsigned host_bits(teexec_dtype dt) { return teexec_dtype_bits(dt); }

} // namespace

extern "C" int tx_cuda_cast_dtype_ok(teexec_dtype dt) { return host_ok(dt); }

extern "C" teexec_status *tx_cuda_cast_ex(const void *x, teexec_dtype xt, void *y,
                                          teexec_dtype yt, size_t n, int saturate,
                                          int e8m0_round, void *stream)
{
    if (!host_ok(xt) || !host_ok(yt))
        return tx_status_new(TEEXEC_ERR_UNSUPPORTED, NULL, NULL,
                             "cuda cast: %s -> %s is not supported", teexec_dtype_name(xt),
                             teexec_dtype_name(yt));
    if (e8m0_round < 0 || e8m0_round > 2)
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda cast: bad round mode");
    if (!n) return NULL;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned bits = host_bits(yt);
    if (bits < 8) {
        uint64_t nbytes = ((uint64_t)n * bits + 7) / 8;
        cast_packed_kernel<<<grid_for(nbytes, 256), 256, 0, s>>>(x, (int)xt, (uint8_t *)y, (int)yt,
                                                                 (uint64_t)n, nbytes);
    } else {
        cast_kernel<<<grid_for(n, 256), 256, 0, s>>>(x, (int)xt, y, (int)yt, saturate != 0,
                                                     e8m0_round, (uint64_t)n);
    }
    TX_CUDA_LAUNCHED("cast");
    return NULL;
}

extern "C" teexec_status *tx_cuda_cast(const void *x, teexec_dtype xt, void *y, teexec_dtype yt,
                                       size_t n, void *stream)
{
    return tx_cuda_cast_ex(x, xt, y, yt, n, 1, 0, stream);
}
