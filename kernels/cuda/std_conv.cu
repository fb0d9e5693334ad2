/* std_conv.cu - Conv and its backward by direct summation (std_conv.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_num.cuh"

extern "C" {
#include "kernels/cuda/std_conv.h"
}

using namespace txs;

namespace {

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

/* Row-major position p of dims[0..nsp) into coordinates. */
__device__ __forceinline__ void coords(int nsp, const int64_t *dims, uint64_t p, int64_t *c)
{
    for (int d = nsp - 1; d >= 0; d--) {
        c[d] = (int64_t)(p % (uint64_t)dims[d]);
        p /= (uint64_t)dims[d];
    }
}

__device__ __forceinline__ uint64_t prod_of(int nsp, const int64_t *dims)
{
    uint64_t n = 1;
    for (int d = 0; d < nsp; d++) n *= (uint64_t)dims[d];
    return n;
}

/* The input position read by output position o at kernel position k, or -1. */
__device__ __forceinline__ int64_t in_pos(const tx_cuda_conv &p, const int64_t *o, const int64_t *k)
{
    int64_t pos = 0;
    for (int d = 0; d < p.nsp; d++) {
        int64_t i = o[d] * p.stride[d] + k[d] * p.dilation[d] - p.pad[d];
        if (i < 0 || i >= p.in[d]) return -1;
        pos = pos * p.in[d] + i;
    }
    return pos;
}

__global__ void conv_fwd_kernel(tx_cuda_conv p, const void *x, const void *w, const void *b,
                                void *y, int dt, uint64_t n)
{
    uint64_t oprod = prod_of(p.nsp, p.out), iprod = prod_of(p.nsp, p.in), kprod = prod_of(p.nsp, p.k);
    int64_t cg = p.c / p.group, mg = p.m / p.group;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t op = e % oprod, m = (e / oprod) % (uint64_t)p.m, nn = e / (oprod * (uint64_t)p.m);
        int64_t o[TX_CUDA_CONV_SPATIAL], k[TX_CUDA_CONV_SPATIAL];
        coords(p.nsp, p.out, op, o);
        int64_t g = (int64_t)m / mg;
        double acc = 0.0;
        for (int64_t c = 0; c < cg; c++) {
            const uint64_t xbase = (nn * (uint64_t)p.c + (uint64_t)(g * cg + c)) * iprod;
            const uint64_t wbase = (m * (uint64_t)cg + (uint64_t)c) * kprod;
            for (uint64_t kp = 0; kp < kprod; kp++) {
                coords(p.nsp, p.k, kp, k);
                int64_t ip = in_pos(p, o, k);
                if (ip >= 0)
                    acc += ld_f64(x, (size_t)(xbase + (uint64_t)ip), dt) *
                           ld_f64(w, (size_t)(wbase + kp), dt);
            }
        }
        if (b) acc += ld_f64(b, (size_t)m, dt);
        st_f64(y, e, dt, acc);
    }
}

/* dX[n, c, i]: every (m, kernel position) whose output position reads i. */
__global__ void conv_dx_kernel(tx_cuda_conv p, const void *w, const void *gy, void *gx, int dt,
                               uint64_t n)
{
    uint64_t oprod = prod_of(p.nsp, p.out), iprod = prod_of(p.nsp, p.in), kprod = prod_of(p.nsp, p.k);
    int64_t cg = p.c / p.group, mg = p.m / p.group;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t ip = e % iprod, c = (e / iprod) % (uint64_t)p.c, nn = e / (iprod * (uint64_t)p.c);
        int64_t i[TX_CUDA_CONV_SPATIAL], k[TX_CUDA_CONV_SPATIAL];
        coords(p.nsp, p.in, ip, i);
        int64_t g = (int64_t)c / cg, cl = (int64_t)c % cg;
        double acc = 0.0;
        for (int64_t mi = 0; mi < mg; mi++) {
            int64_t m = g * mg + mi;
            for (uint64_t kp = 0; kp < kprod; kp++) {
                coords(p.nsp, p.k, kp, k);
                int64_t opos = 0;
                bool ok = true;
                for (int d = 0; d < p.nsp && ok; d++) {
                    int64_t t = i[d] + p.pad[d] - k[d] * p.dilation[d];
                    if (t < 0 || t % p.stride[d]) ok = false;
                    else {
                        int64_t od = t / p.stride[d];
                        if (od >= p.out[d]) ok = false;
                        else opos = opos * p.out[d] + od;
                    }
                }
                if (!ok) continue;
                acc += ld_f64(gy, (size_t)((nn * (uint64_t)p.m + (uint64_t)m) * oprod + (uint64_t)opos), dt) *
                       ld_f64(w, (size_t)(((uint64_t)m * (uint64_t)cg + (uint64_t)cl) * kprod + kp), dt);
            }
        }
        st_f64(gx, e, dt, acc);
    }
}

/* dW[m, cl, k]: over images and output positions. */
__global__ void conv_dw_kernel(tx_cuda_conv p, const void *x, const void *gy, void *gw, int dt,
                               uint64_t n)
{
    uint64_t oprod = prod_of(p.nsp, p.out), iprod = prod_of(p.nsp, p.in), kprod = prod_of(p.nsp, p.k);
    int64_t cg = p.c / p.group, mg = p.m / p.group;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t kp = e % kprod, cl = (e / kprod) % (uint64_t)cg, m = e / (kprod * (uint64_t)cg);
        int64_t k[TX_CUDA_CONV_SPATIAL], o[TX_CUDA_CONV_SPATIAL];
        coords(p.nsp, p.k, kp, k);
        int64_t g = (int64_t)m / mg;
        double acc = 0.0;
        for (int64_t nn = 0; nn < p.n; nn++)
            for (uint64_t op = 0; op < oprod; op++) {
                coords(p.nsp, p.out, op, o);
                int64_t ip = in_pos(p, o, k);
                if (ip < 0) continue;
                acc += ld_f64(gy, (size_t)(((uint64_t)nn * (uint64_t)p.m + m) * oprod + op), dt) *
                       ld_f64(x, (size_t)(((uint64_t)nn * (uint64_t)p.c + (uint64_t)(g * cg) + cl) * iprod + (uint64_t)ip), dt);
            }
        st_f64(gw, e, dt, acc);
    }
}

__global__ void conv_db_kernel(tx_cuda_conv p, const void *gy, void *gb, int dt)
{
    uint64_t oprod = prod_of(p.nsp, p.out);
    for (uint64_t m = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; m < (uint64_t)p.m;
         m += (uint64_t)gridDim.x * blockDim.x) {
        double acc = 0.0;
        for (int64_t nn = 0; nn < p.n; nn++)
            for (uint64_t op = 0; op < oprod; op++)
                acc += ld_f64(gy, (size_t)(((uint64_t)nn * (uint64_t)p.m + m) * oprod + op), dt);
        st_f64(gb, m, dt, acc);
    }
}

teexec_status *check(const tx_cuda_conv *p, teexec_dtype dt)
{
    if (!tx_std_dom_float(tx_std_dom_of(dt))) return bad("conv", "dtype must be a float");
    if (p->nsp < 1 || p->nsp > TX_CUDA_CONV_SPATIAL) return bad("conv", "spatial rank out of range");
    if (p->group < 1 || p->c % p->group || p->m % p->group) return bad("conv", "bad group");
    for (int d = 0; d < p->nsp; d++)
        if (p->stride[d] < 1 || p->dilation[d] < 1) return bad("conv", "bad stride or dilation");
    return NULL;
}

uint64_t h_prod(int nsp, const int64_t *d)
{
    uint64_t n = 1;
    for (int i = 0; i < nsp; i++) n *= (uint64_t)d[i];
    return n;
}

} // namespace

extern "C" teexec_status *tx_cuda_conv_forward(const tx_cuda_conv *p, const void *x, const void *w,
                                               const void *b, void *y, teexec_dtype dt,
                                               void *stream)
{
    TX_TRY(check(p, dt));
    uint64_t n = (uint64_t)p->n * (uint64_t)p->m * h_prod(p->nsp, p->out);
    if (!n) return NULL;
    conv_fwd_kernel<<<grid_for(n, 128), 128, 0, (cudaStream_t)stream>>>(*p, x, w, b, y, (int)dt, n);
    TX_CUDA_LAUNCHED("conv");
    return NULL;
}

extern "C" teexec_status *tx_cuda_conv_backward(const tx_cuda_conv *p, const void *x,
                                                const void *w, const void *gy, void *gx,
                                                void *gw, void *gb, teexec_dtype dt,
                                                void *stream)
{
    TX_TRY(check(p, dt));
    if (tx_std_dom_of(dt) != TX_DOM_F32) return bad("conv backward", "grads must be FLOAT, FLOAT16 or BFLOAT16");
    cudaStream_t s = (cudaStream_t)stream;
    uint64_t nx = (uint64_t)p->n * (uint64_t)p->c * h_prod(p->nsp, p->in);
    uint64_t nw = (uint64_t)p->m * (uint64_t)(p->c / p->group) * h_prod(p->nsp, p->k);
    if (gx && nx) {
        conv_dx_kernel<<<grid_for(nx, 128), 128, 0, s>>>(*p, w, gy, gx, (int)dt, nx);
        TX_CUDA_LAUNCHED("conv backward data");
    }
    if (gw && nw) {
        conv_dw_kernel<<<grid_for(nw, 128), 128, 0, s>>>(*p, x, gy, gw, (int)dt, nw);
        TX_CUDA_LAUNCHED("conv backward weight");
    }
    if (gb && p->m) {
        conv_db_kernel<<<grid_for((uint64_t)p->m, 128), 128, 0, s>>>(*p, gy, gb, (int)dt);
        TX_CUDA_LAUNCHED("conv backward bias");
    }
    return NULL;
}
