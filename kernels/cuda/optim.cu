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

/* One element's update, the CPU's operation order (see optim.h). */
__device__ __forceinline__ void update_one(const step_consts &k, double g, float *pm, float *pmo,
                                           float *pv)
{
    double p = (double)*pm;
    if (k.adamw) {
        double m = (double)*pmo, v = (double)*pv;
        p *= k.decay;
        m = k.beta1 * m + k.one_minus_beta1 * g;
        v = k.beta2 * v + k.one_minus_beta2 * g * g;
        p -= k.step_size * m / (sqrt(v) / k.sq_bc2 + k.eps);
        *pmo = (float)m;
        *pv = (float)v;
    } else {
        double d = g + k.wd * p;
        if (pmo) {
            double m = k.first_step ? d : k.momentum * (double)*pmo + k.one_minus_dampening * d;
            *pmo = (float)m;
            d = k.nesterov ? d + k.momentum * m : m;
        }
        p -= k.lr * d;
    }
    *pm = (float)p;
}

/* Four gradients as doubles (every bf16/fp16/fp32 value is exact in float). */
__device__ __forceinline__ void ld_grad4(const void *g, uint64_t i, int dt, double *o)
{
    if (dt == TEEXEC_DTYPE_FLOAT) {
        float4 f = *(const float4 *)((const float *)g + i);
        o[0] = f.x; o[1] = f.y; o[2] = f.z; o[3] = f.w;
    } else {
        uint2 u = *(const uint2 *)((const uint16_t *)g + i);
        if (dt == TEEXEC_DTYPE_BFLOAT16) {
            float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)&u.x);
            float2 b = __bfloat1622float2(*(const __nv_bfloat162 *)&u.y);
            o[0] = a.x; o[1] = a.y; o[2] = b.x; o[3] = b.y;
        } else {
            float2 a = __half22float2(*(const __half2 *)&u.x);
            float2 b = __half22float2(*(const __half2 *)&u.y);
            o[0] = a.x; o[1] = a.y; o[2] = b.x; o[3] = b.y;
        }
    }
}

/* Four model-copy values rounded from the new masters, as tx_st does. */
__device__ __forceinline__ void st_model4(void *mp, uint64_t i, int dt, const float *p)
{
    uint2 u;
    if (dt == TEEXEC_DTYPE_BFLOAT16) {
        *(__nv_bfloat162 *)&u.x = __floats2bfloat162_rn(p[0], p[1]);
        *(__nv_bfloat162 *)&u.y = __floats2bfloat162_rn(p[2], p[3]);
    } else {
        *(__half2 *)&u.x = __floats2half2_rn(p[0], p[1]);
        *(__half2 *)&u.y = __floats2half2_rn(p[2], p[3]);
    }
    *(uint2 *)((uint16_t *)mp + i) = u;
}

__device__ __forceinline__ bool aligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* The tensor that owns block `blk`: the last whose first block is <= blk
 * (empty tensors own no block, so the search skips them). */
__device__ size_t owner_of(const tx_cuda_optim_tensor *ts, size_t n_tensors, uint64_t blk)
{
    size_t lo = 0, hi = n_tensors;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts[mid].first_block <= blk) lo = mid;
        else hi = mid;
    }
    while (lo + 1 < n_tensors && ts[lo + 1].first_block <= blk) lo++;
    return lo;
}

/* A block's sum of a per-thread double, in a fixed tree: the same bits for
 * the same inputs. Thread 0 gets the result. */
__device__ double block_sum(double v)
{
    __shared__ double s[kThreads];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    return s[0];
}

/* Per optimizer block: the sum of its gradients' squares. */
__global__ void __launch_bounds__(kThreads)
grad_sq_kernel(const tx_cuda_optim_tensor *ts, size_t n_tensors, double *partials)
{
    __shared__ size_t s_t;
    uint64_t blk = blockIdx.x;
    if (threadIdx.x == 0) s_t = owner_of(ts, n_tensors, blk);
    __syncthreads();
    const tx_cuda_optim_tensor t = ts[s_t];
    uint64_t i0 = (blk - t.first_block) * TX_CUDA_OPTIM_CHUNK;
    uint64_t i1 = i0 + TX_CUDA_OPTIM_CHUNK < t.n ? i0 + TX_CUDA_OPTIM_CHUNK : t.n;
    double acc = 0.0;
    for (uint64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
        double g = ld_grad(t.grad, i, t.grad_dtype);
        acc += g * g;
    }
    double sum = block_sum(acc);
    if (threadIdx.x == 0) partials[blk] = sum;
}

/* One block: the partials in order of their index, then the factor. */
__global__ void __launch_bounds__(kThreads)
clip_coef_kernel(const double *partials, uint64_t n, double max_norm, double *coef)
{
    double acc = 0.0;
    for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) acc += partials[i];
    double ss = block_sum(acc);
    if (threadIdx.x == 0) {
        double norm = sqrt(ss);
        double c = max_norm / (norm + 1e-6);
        coef[0] = isfinite(norm) ? (c < 1.0 ? c : 1.0) : (double)NAN;
        coef[1] = norm;
    }
}

__global__ void __launch_bounds__(kThreads)
optim_kernel(step_consts k, const tx_cuda_optim_tensor *ts, size_t n_tensors,
             const double *grad_scale)
{
    __shared__ size_t s_t;
    uint64_t blk = blockIdx.x;
    if (threadIdx.x == 0) s_t = owner_of(ts, n_tensors, blk);
    __syncthreads();
    const double gs = grad_scale ? *grad_scale : 1.0;
    const bool scaled = gs != 1.0;
    const tx_cuda_optim_tensor t = ts[s_t];
    uint64_t i0 = (blk - t.first_block) * TX_CUDA_OPTIM_CHUNK;
    uint64_t i1 = i0 + TX_CUDA_OPTIM_CHUNK < t.n ? i0 + TX_CUDA_OPTIM_CHUNK : t.n;
    /* Four elements per thread with 16-byte accesses to master / m / v when
     * every array of the tensor is aligned for them (i0 is a multiple of
     * 4096, so alignment of the base decides); the arithmetic per element
     * is update_one's either way, so both paths give the same bits. */
    bool gw = t.grad_dtype == TEEXEC_DTYPE_FLOAT;
    bool vec = aligned(t.master, 16) && aligned(t.grad, gw ? 16 : 8) &&
               (!t.m || aligned(t.m, 16)) && (!t.v || aligned(t.v, 16)) &&
               (!t.model || aligned(t.model, 8));
    uint64_t iv = vec ? i0 + (i1 - i0) / 4 * 4 : i0;
    for (uint64_t i = i0 + 4 * (uint64_t)threadIdx.x; i < iv; i += 4 * (uint64_t)blockDim.x) {
        double g[4];
        ld_grad4(t.grad, i, t.grad_dtype, g);
        if (scaled)
            for (int e = 0; e < 4; e++) g[e] *= gs;
        float4 pm = *(const float4 *)(t.master + i);
        float4 mo = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vv = mo;
        if (t.m) mo = *(const float4 *)(t.m + i);
        if (k.adamw) vv = *(const float4 *)(t.v + i);
        float *P = &pm.x, *M = &mo.x, *V = &vv.x;
#pragma unroll
        for (int e = 0; e < 4; e++) update_one(k, g[e], P + e, t.m ? M + e : NULL, V + e);
        *(float4 *)(t.master + i) = pm;
        if (t.m) *(float4 *)(t.m + i) = mo;
        if (k.adamw) *(float4 *)(t.v + i) = vv;
        if (t.model) st_model4(t.model, i, t.model_dtype, P);
    }
    for (uint64_t i = iv + threadIdx.x; i < i1; i += blockDim.x) {
        double g = ld_grad(t.grad, i, t.grad_dtype);
        if (scaled) g *= gs;
        update_one(k, g, t.master + i, t.m ? t.m + i : NULL, t.v ? t.v + i : NULL);
        if (t.model) tx_st(t.model, (size_t)i, t.model_dtype, t.master[i]);
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
        uint64_t nb = tx_cuda_optim_blocks(t->n);
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
    optim_kernel<<<(unsigned)total_blocks, kThreads, 0, (cudaStream_t)stream>>>(
        k, dev_tensors, n_tensors, a->grad_scale);
    TX_CUDA_LAUNCHED("optimizer step");
    return NULL;
}

extern "C" uint64_t tx_cuda_grad_clip_partials(uint64_t total_blocks)
{
    return total_blocks ? total_blocks : 1;
}

extern "C" teexec_status *tx_cuda_grad_clip_coef(const tx_cuda_optim_tensor *dev_tensors,
                                                 size_t n_tensors, uint64_t total_blocks,
                                                 double max_norm, double *dev_partials,
                                                 double *dev_coef, void *stream)
{
    if (!(max_norm > 0.0) || !isfinite(max_norm))
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL,
                             "gradient clipping: max norm must be finite and > 0, got %g",
                             max_norm);
    if (!dev_partials || !dev_coef)
        return bad("gradient clipping: no scratch or result buffer (%lld tensors)",
                   (long long)n_tensors);
    if (total_blocks > (uint64_t)INT32_MAX)
        return bad("gradient clipping: %lld blocks is too many for one launch",
                   (long long)total_blocks);
    cudaStream_t s = (cudaStream_t)stream;
    if (n_tensors && total_blocks) {
        if (!dev_tensors)
            return bad("gradient clipping: no tensor array (%lld tensors)", (long long)n_tensors);
        grad_sq_kernel<<<(unsigned)total_blocks, kThreads, 0, s>>>(dev_tensors, n_tensors,
                                                                   dev_partials);
        TX_CUDA_LAUNCHED("gradient norm");
    }
    clip_coef_kernel<<<1, kThreads, 0, s>>>(dev_partials, n_tensors ? total_blocks : 0, max_norm,
                                           dev_coef);
    TX_CUDA_LAUNCHED("gradient clipping factor");
    return NULL;
}
