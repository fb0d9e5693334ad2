/* std_linalg.cu - plain-kernel MatMul / Gemm for DOUBLE and integers, and
 * Einsum (std_linalg.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_num.cuh"

extern "C" {
#include "kernels/cuda/std_linalg.h"
}

#include <string.h>

using namespace txs;

namespace {

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

__global__ void naive_gemm_kernel(tx_cuda_naive_gemm p, const void *a, const void *b, void *y,
                                  int dt, int is_float, uint64_t n)
{
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        int64_t nn = (int64_t)(e % (uint64_t)p.N), mm = (int64_t)((e / (uint64_t)p.N) % (uint64_t)p.M);
        uint64_t bi = e / ((uint64_t)p.N * (uint64_t)p.M);
        int64_t oa = 0, ob = 0;
        for (int k = p.nb - 1; k >= 0; k--) {
            int64_t c = (int64_t)(bi % (uint64_t)p.bdims[k]);
            bi /= (uint64_t)p.bdims[k];
            oa += c * p.sa[k];
            ob += c * p.sb[k];
        }
        oa += mm * p.a_sm;
        ob += nn * p.b_sn;
        int64_t co = mm * p.c_si + nn * p.c_sj;
        if (is_float) {
            double acc = 0.0;
            for (int64_t q = 0; q < p.K; q++)
                acc += ld_f64(a, (size_t)(oa + q * p.a_sk), dt) * ld_f64(b, (size_t)(ob + q * p.b_sk), dt);
            if (p.gemm) {
                acc *= p.alpha;
                if (p.c && p.beta != 0.0) acc += p.beta * ld_f64(p.c, (size_t)co, dt);
            }
            st_f64(y, e, dt, acc);
        } else {
            uint64_t acc = 0;
            for (int64_t q = 0; q < p.K; q++)
                acc += (uint64_t)ld_i64(a, (size_t)(oa + q * p.a_sk), dt) *
                       (uint64_t)ld_i64(b, (size_t)(ob + q * p.b_sk), dt);
            int64_t r = (int64_t)acc;
            if (p.gemm) {
                int64_t cv = p.c ? ld_i64(p.c, (size_t)co, dt) : 0;
                if (p.alpha == 1.0 && p.beta == 1.0)
                    r = (int64_t)(acc + (uint64_t)cv);
                else
                    r = f64_to_i64(p.alpha * (double)(int64_t)acc + p.beta * (double)cv);
            }
            st_i64(y, e, dt, r);
        }
    }
}

__global__ void einsum_kernel(tx_cuda_einsum_plan p, const void *in0, const void *in1,
                              const void *in2, const void *in3, void *y, int dt, int is_float,
                              uint64_t n)
{
    const void *ins[TX_CUDA_EINSUM_INPUTS] = {in0, in1, in2, in3};
    bool empty = false;
    uint64_t n_sum = 1;
    for (int l = p.nout; l < p.nlabels; l++) {
        if (p.size[l] == 0) empty = true;
        n_sum *= (uint64_t)p.size[l];
    }
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        int64_t base[TX_CUDA_EINSUM_INPUTS] = {0, 0, 0, 0};
        uint64_t rem = e;
        for (int l = p.nout - 1; l >= 0; l--) {
            int64_t c = (int64_t)(rem % (uint64_t)p.size[l]);
            rem /= (uint64_t)p.size[l];
            for (int k = 0; k < p.n_inputs; k++) base[k] += c * p.stride[k][l];
        }
        double accd = 0.0;
        uint64_t acci = 0;
        /* the summed labels in the CPU's odometer order (last label fastest) */
        for (uint64_t s = 0; !empty && s < n_sum; s++) {
            uint64_t r = s;
            int64_t off[TX_CUDA_EINSUM_INPUTS];
            for (int k = 0; k < p.n_inputs; k++) off[k] = base[k];
            for (int l = p.nlabels - 1; l >= p.nout; l--) {
                int64_t c = (int64_t)(r % (uint64_t)p.size[l]);
                r /= (uint64_t)p.size[l];
                for (int k = 0; k < p.n_inputs; k++) off[k] += c * p.stride[k][l];
            }
            if (is_float) {
                double prod = 1.0;
                for (int k = 0; k < p.n_inputs; k++) prod *= ld_f64(ins[k], (size_t)off[k], dt);
                accd += prod;
            } else {
                uint64_t prod = 1;
                for (int k = 0; k < p.n_inputs; k++) prod *= (uint64_t)ld_i64(ins[k], (size_t)off[k], dt);
                acci += prod;
            }
        }
        if (!is_float) st_i64(y, e, dt, (int64_t)acci);
        else if (dt == TEEXEC_DTYPE_DOUBLE) st_f64(y, e, dt, accd);
        else st_f32(y, e, dt, __double2float_rn(accd));
    }
}

/* The gradient of input p.target: for each of its elements, the labels it
 * binds (a repeated label off its diagonal binds nothing: 0), and the sum
 * over the free labels, in the CPU rule's order, of dY times the others. */
__global__ void einsum_bwd_kernel(tx_cuda_einsum_bwd_plan p, const void *in0, const void *in1,
                                  const void *in2, const void *in3, const void *g, void *gx,
                                  int dt, uint64_t n)
{
    const void *ins[TX_CUDA_EINSUM_INPUTS] = {in0, in1, in2, in3};
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (uint64_t)gridDim.x * blockDim.x) {
        int64_t val[TX_CUDA_EINSUM_LABELS];
        for (int l = 0; l < p.nlabels; l++) val[l] = -1;
        uint64_t rem = e;
        bool diag_ok = true;
        for (int d = p.trank - 1; d >= 0; d--) {
            int64_t c = (int64_t)(rem % (uint64_t)p.tdims[d]);
            rem /= (uint64_t)p.tdims[d];
            int l = p.tlab[d];
            if (l < 0) continue;
            if (val[l] < 0) val[l] = c;
            else if (val[l] != c) diag_ok = false;
        }
        double acc = 0.0;
        if (diag_ok) {
            int free_l[TX_CUDA_EINSUM_LABELS], nf = 0;
            uint64_t total = 1;
            for (int l = 0; l < p.nlabels; l++)
                if (val[l] < 0) {
                    free_l[nf++] = l;
                    val[l] = 0;
                    total *= (uint64_t)p.size[l];
                }
            for (uint64_t t = 0; t < total; t++) {
                int64_t yo = 0;
                for (int l = 0; l < p.nlabels; l++) yo += val[l] * p.ostride[l];
                double prod = ld_f64(g, (size_t)yo, dt);
                for (int k = 0; k < p.n_inputs; k++) {
                    if (k == p.target) continue;
                    int64_t o = 0;
                    for (int l = 0; l < p.nlabels; l++) o += val[l] * p.stride[k][l];
                    prod *= ld_f64(ins[k], (size_t)o, dt);
                }
                acc += prod;
                for (int f = nf - 1; f >= 0; f--) {
                    int l = free_l[f];
                    if (++val[l] < p.size[l]) break;
                    val[l] = 0;
                }
            }
        }
        st_f64(gx, e, dt, acc);
    }
}

} // namespace

extern "C" teexec_status *tx_cuda_einsum_backward(const tx_cuda_einsum_bwd_plan *p,
                                                  const void *const *inputs, const void *g,
                                                  void *gx, teexec_dtype dt, void *stream)
{
    if (tx_std_dom_of(dt) != TX_DOM_F32) return bad("einsum backward", "grads must be float");
    if (p->n_inputs < 1 || p->n_inputs > TX_CUDA_EINSUM_INPUTS || p->nlabels > TX_CUDA_EINSUM_LABELS ||
        p->trank < 0 || p->trank > TX_STD_RANK || p->target < 0 || p->target >= p->n_inputs)
        return bad("einsum backward", "plan out of range");
    uint64_t n = 1;
    for (int d = 0; d < p->trank; d++) n *= (uint64_t)p->tdims[d];
    if (!n) return NULL;
    const void *in[TX_CUDA_EINSUM_INPUTS] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < p->n_inputs; k++) in[k] = inputs[k];
    einsum_bwd_kernel<<<grid_for(n, 128), 128, 0, (cudaStream_t)stream>>>(
        *p, in[0], in[1], in[2], in[3], g, gx, (int)dt, n);
    TX_CUDA_LAUNCHED("einsum backward");
    return NULL;
}

extern "C" int tx_cuda_naive_gemm_dtype_ok(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_DOUBLE || dt == TEEXEC_DTYPE_INT32 || dt == TEEXEC_DTYPE_INT64 ||
           dt == TEEXEC_DTYPE_UINT32 || dt == TEEXEC_DTYPE_UINT64;
}

extern "C" teexec_status *tx_cuda_naive_gemm_run(const tx_cuda_naive_gemm *p, const void *a,
                                                 const void *b, void *y, teexec_dtype dt,
                                                 void *stream)
{
    if (!tx_cuda_naive_gemm_dtype_ok(dt)) return bad("gemm", "dtype not supported");
    if (p->nb < 0 || p->nb > TX_STD_RANK) return bad("gemm", "batch rank out of range");
    uint64_t n = (uint64_t)p->M * (uint64_t)p->N;
    for (int k = 0; k < p->nb; k++) n *= (uint64_t)p->bdims[k];
    if (!n) return NULL;
    naive_gemm_kernel<<<grid_for(n, 128), 128, 0, (cudaStream_t)stream>>>(
        *p, a, b, y, (int)dt, dt == TEEXEC_DTYPE_DOUBLE, n);
    TX_CUDA_LAUNCHED("naive gemm");
    return NULL;
}

extern "C" teexec_status *tx_cuda_einsum(const tx_cuda_einsum_plan *p, const void *const *inputs,
                                         void *y, teexec_dtype dt, void *stream)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if (!tx_std_dom_numeric(d)) return bad("einsum", "dtype must be numeric");
    if (p->n_inputs < 1 || p->n_inputs > TX_CUDA_EINSUM_INPUTS || p->nlabels < p->nout ||
        p->nlabels > TX_CUDA_EINSUM_LABELS)
        return bad("einsum", "plan out of range");
    uint64_t n = 1;
    for (int l = 0; l < p->nout; l++) n *= (uint64_t)p->size[l];
    if (!n) return NULL;
    const void *in[TX_CUDA_EINSUM_INPUTS] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < p->n_inputs; k++) in[k] = inputs[k];
    einsum_kernel<<<grid_for(n, 128), 128, 0, (cudaStream_t)stream>>>(
        *p, in[0], in[1], in[2], in[3], y, (int)dt, tx_std_dom_float(d), n);
    TX_CUDA_LAUNCHED("einsum");
    return NULL;
}
