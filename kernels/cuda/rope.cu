/* rope.cu - te.ops RotaryEmbedding forward/backward (rope.h). Compiled with
 * -fmad=false (kernels/cuda/meson.build) so x*c + s*x'*sn rounds as the
 * CPU's separate multiplies and add. */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/rope.h"
}

#include <math.h>

namespace {

__global__ void table_kernel(const float *freqs, double base, size_t s, size_t r,
                             int interleaved, float *cs, float *sn)
{
    size_t n = s * r, h2 = r / 2;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t p = k / r, j = k % r;
        float f;
        if (freqs) {
            f = freqs[k];
        } else {
            size_t i = interleaved ? j / 2 : j % h2;
            /* the CPU: (float)p * powf(base, (-2.0f * i) / r), each step in float */
            float e = (-2.0f * (float)i) / (float)r;
            float inv = (float)pow((double)(float)base, (double)e);
            f = (float)p * inv;
        }
        cs[k] = (float)cos((double)f);
        sn[k] = (float)sin((double)f);
    }
}

/* One thread per element of the rotated part or the pass-through part. */
__global__ void rope_kernel(tx_cuda_rope_args a, const float *cs, const float *sn, int backward)
{
    size_t n = a.b * a.s * a.h * a.d, r = a.r, h2 = r / 2;
    size_t inner = a.sbhd ? a.b : a.s;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t j = k % a.d, head_row = k / a.d;
        size_t oq = head_row / a.h, o = oq / inner, q = oq % inner;
        size_t pos = a.sbhd ? o : q;
        float x = tx_ld(a.in, k, a.in_dtype);
        if (j >= r) {
            tx_st(a.out, k, a.out_dtype, x);
            continue;
        }
        size_t pj = a.interleaved ? (j ^ 1) : (j < h2 ? j + h2 : j - h2);
        float sg = a.interleaved ? ((j & 1) ? 1.0f : -1.0f) : (j < h2 ? -1.0f : 1.0f);
        float xp = tx_ld(a.in, k - j + pj, a.in_dtype);
        const float *c = cs + pos * r, *s = sn + pos * r;
        float y = backward ? x * c[j] - sg * xp * s[pj] : x * c[j] + sg * xp * s[j];
        tx_st(a.out, k, a.out_dtype, y);
    }
}

unsigned grid_for(size_t n)
{
    size_t b = (n + 255) / 256;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

teexec_status *bad(const char *what)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                         "cuda RotaryEmbedding: %s", what);
}

teexec_status *run(const tx_cuda_rope_args *a, int backward, void *stream)
{
    if (!tx_io_dtype_ok(a->in_dtype) || !tx_io_dtype_ok(a->out_dtype)) return bad("bad dtype");
    if (a->r < 2 || a->r > a->d || a->r % 2)
        return bad("the rotated width must be even and in [2, d]");
    if (!a->freqs && !(a->base > 0.0)) return bad("base must be > 0");
    /* an element's partner is read by another thread: in place would race */
    if (a->in == a->out) return bad("in place is not supported: pass a separate output");
    size_t n = a->b * a->s * a->h * a->d;
    if (a->b && n / a->b != a->s * a->h * a->d) return bad("size overflow");
    if (!n) return NULL;
    if (!a->in || !a->out || !a->table) return bad("in, out or the table workspace is NULL");
    cudaStream_t st = (cudaStream_t)stream;
    float *cs = a->table, *sn = a->table + a->s * a->r;
    table_kernel<<<grid_for(a->s * a->r), 256, 0, st>>>(a->freqs, a->base, a->s, a->r,
                                                         a->interleaved, cs, sn);
    TX_CUDA_LAUNCHED("rope table");
    rope_kernel<<<grid_for(n), 256, 0, st>>>(*a, cs, sn, backward);
    TX_CUDA_LAUNCHED(backward ? "rope backward" : "rope forward");
    return NULL;
}

} // namespace

extern "C" teexec_status *tx_cuda_rope_forward(const tx_cuda_rope_args *a, void *stream)
{
    return run(a, 0, stream);
}

extern "C" teexec_status *tx_cuda_rope_backward(const tx_cuda_rope_args *a, void *stream)
{
    return run(a, 1, stream);
}
