/* optim.cu - multi-tensor AdamW and SGD with momentum (optim.h). Compiled
 * with -fmad=false (kernels/cuda/meson.build): a fused multiply-add would
 * round differently from the CPU's separate multiply and add. */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/optim.h"
}

#include <math.h>

namespace {

constexpr int kThreads = 256;

/* The step's constants, computed on the host with the CPU's expressions. */
struct step_consts {
    int adamw;
    double lr, wd, momentum, one_minus_dampening;
    int nesterov, first_step;
    double beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
    double decay, step_size, sq_bc2;
};

__device__ __forceinline__ double ld_grad(const void *g, uint64_t i, int dt)
{
    return (double)tx_ld(g, (size_t)i, dt); /* every bf16/fp16/fp32 is exact in float */
}

__global__ void optim_kernel(step_consts k, const tx_cuda_optim_tensor *ts, size_t n_tensors)
{
    __shared__ size_t s_t;
    uint64_t blk = blockIdx.x;
    if (threadIdx.x == 0) {
        /* the last tensor whose first block is <= this block (empty tensors
         * own no block, so the search skips them) */
        size_t lo = 0, hi = n_tensors;
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (ts[mid].first_block <= blk) lo = mid;
            else hi = mid;
        }
        while (lo + 1 < n_tensors && ts[lo + 1].first_block <= blk) lo++;
        s_t = lo;
    }
    __syncthreads();
    const tx_cuda_optim_tensor t = ts[s_t];
    uint64_t i0 = (blk - t.first_block) * TX_CUDA_OPTIM_CHUNK;
    uint64_t i1 = i0 + TX_CUDA_OPTIM_CHUNK < t.n ? i0 + TX_CUDA_OPTIM_CHUNK : t.n;
    for (uint64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
        double p = (double)t.master[i];
        double g = ld_grad(t.grad, i, t.grad_dtype);
        if (k.adamw) {
            double m = (double)t.m[i], v = (double)t.v[i];
            p *= k.decay;
            m = k.beta1 * m + k.one_minus_beta1 * g;
            v = k.beta2 * v + k.one_minus_beta2 * g * g;
            p -= k.step_size * m / (sqrt(v) / k.sq_bc2 + k.eps);
            t.m[i] = (float)m;
            t.v[i] = (float)v;
        } else {
            double d = g + k.wd * p;
            if (t.m) {
                double m = k.first_step ? d : k.momentum * (double)t.m[i] + k.one_minus_dampening * d;
                t.m[i] = (float)m;
                d = k.nesterov ? d + k.momentum * m : m;
            }
            p -= k.lr * d;
        }
        float pf = (float)p;
        t.master[i] = pf;
        if (t.model) tx_st(t.model, (size_t)i, t.model_dtype, pf);
    }
}

teexec_status *bad(const char *fmt, long long a)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, fmt, a);
}

} // namespace

extern "C" teexec_status *tx_cuda_optim_layout(tx_cuda_optim_tensor *ts, size_t n,
                                               uint64_t *total_blocks)
{
    uint64_t blocks = 0;
    for (size_t i = 0; i < n; i++) {
        tx_cuda_optim_tensor *t = &ts[i];
        if (t->n && (!t->master || !t->grad))
            return bad("cuda optimizer: tensor %lld has no master weights or gradient",
                       (long long)i);
        if (!tx_io_dtype_ok((teexec_dtype)t->grad_dtype))
            return bad("cuda optimizer: tensor %lld: the gradient must be float32, bfloat16 or "
                       "float16", (long long)i);
        if (t->model && t->model_dtype != TEEXEC_DTYPE_BFLOAT16 &&
            t->model_dtype != TEEXEC_DTYPE_FLOAT16)
            return bad("cuda optimizer: tensor %lld: the model copy must be bfloat16 or float16 "
                       "(a float32 parameter is its own master)", (long long)i);
        t->first_block = blocks;
        uint64_t nb = t->n / TX_CUDA_OPTIM_CHUNK + (t->n % TX_CUDA_OPTIM_CHUNK != 0);
        if (nb > (uint64_t)INT32_MAX - blocks)
            return bad("cuda optimizer: %lld tensors need more blocks than one launch allows",
                       (long long)n);
        blocks += nb;
    }
    *total_blocks = blocks;
    return NULL;
}

extern "C" teexec_status *tx_cuda_optim_step(const tx_cuda_optim_step_args *a,
                                             const tx_cuda_optim_tensor *dev_tensors,
                                             size_t n_tensors, uint64_t total_blocks,
                                             void *stream)
{
    if (a->kind != TX_CUDA_OPTIM_SGD && a->kind != TX_CUDA_OPTIM_ADAMW)
        return bad("cuda optimizer: unknown kind %lld", (long long)a->kind);
    if (!(a->lr >= 0.0) || !isfinite(a->lr) || !(a->weight_decay >= 0.0) ||
        !isfinite(a->weight_decay))
        return bad("cuda optimizer: lr and weight decay must be finite and >= 0 (step %lld)",
                   (long long)a->step);
    if (a->step < 1) return bad("cuda optimizer: step must be >= 1, got %lld", (long long)a->step);
    step_consts k = {};
    k.adamw = a->kind == TX_CUDA_OPTIM_ADAMW;
    k.lr = a->lr;
    k.wd = a->weight_decay;
    k.first_step = a->step == 1;
    if (k.adamw) {
        if (!(a->beta1 >= 0.0 && a->beta1 < 1.0) || !(a->beta2 >= 0.0 && a->beta2 < 1.0) ||
            !(a->eps >= 0.0))
            return bad("cuda optimizer: AdamW betas must be in [0, 1) and eps >= 0 (step %lld)",
                       (long long)a->step);
        /* the CPU's expressions, evaluated by the same host libm */
        double bc1 = 1.0 - pow(a->beta1, (double)a->step);
        double bc2 = 1.0 - pow(a->beta2, (double)a->step);
        k.beta1 = a->beta1;
        k.one_minus_beta1 = 1.0 - a->beta1;
        k.beta2 = a->beta2;
        k.one_minus_beta2 = 1.0 - a->beta2;
        k.eps = a->eps;
        k.decay = 1.0 - a->lr * a->weight_decay;
        k.step_size = a->lr / bc1;
        k.sq_bc2 = sqrt(bc2);
    } else {
        if (!(a->momentum >= 0.0) || !(a->dampening >= 0.0 && a->dampening <= 1.0))
            return bad("cuda optimizer: SGD momentum must be >= 0 and dampening in [0, 1] "
                       "(step %lld)", (long long)a->step);
        if (a->nesterov && (a->momentum <= 0.0 || a->dampening != 0.0))
            return bad("cuda optimizer: Nesterov momentum needs momentum > 0 and dampening 0 "
                       "(step %lld)", (long long)a->step);
        k.momentum = a->momentum;
        k.one_minus_dampening = 1.0 - a->dampening;
        k.nesterov = a->nesterov != 0;
    }
    if (!n_tensors || !total_blocks) return NULL;
    if (!dev_tensors) return bad("cuda optimizer: no tensor array (%lld tensors)", (long long)n_tensors);
    if (total_blocks > (uint64_t)INT32_MAX)
        return bad("cuda optimizer: %lld blocks is too many for one launch", (long long)total_blocks);
    optim_kernel<<<(unsigned)total_blocks, kThreads, 0, (cudaStream_t)stream>>>(k, dev_tensors,
                                                                               n_tensors);
    TX_CUDA_LAUNCHED("optimizer step");
    return NULL;
}
