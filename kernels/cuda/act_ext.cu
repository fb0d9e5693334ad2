/* act_ext.cu - every te.ops activation, forward/backward (act_ext.h): the
 * general kernels, and the hand-over to act.h's vectorized ones where it
 * has the function. */
#include "kernels/cuda/act_fn.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/act_ext.h"
#include "kernels/cuda/act.h"
}

#include <math.h>
#include <string.h>

namespace {

constexpr int kThreads = 256;

using txa::fn_eval;

/* Element j of row r: f (gate), f', the up value b̃ and its derivative. */
__device__ __forceinline__ void eval_at(const tx_cuda_actx_args &a, size_t r, size_t j, float *f,
                                        float *df, float *bt, float *dbt)
{
    if (!a.gated) {
        fn_eval(a.fn, tx_ld(a.x, r * a.cols + j, a.x_dtype), 1.702f, f, df);
        *bt = 1.0f;
        *dbt = 0.0f;
        return;
    }
    size_t xi = r * 2 * a.cols + j;
    float av = tx_ld(a.x, xi, a.x_dtype), bv = tx_ld(a.x, xi + a.cols, a.x_dtype);
    if (a.softcap) {
        fn_eval(a.fn, av, a.beta1, f, df);
        float u = tanhf(bv / a.beta2);
        *bt = a.beta2 * u;
        *dbt = 1.0f - u * u;
        return;
    }
    if (!a.clamped) {
        fn_eval(a.fn, av, 1.702f, f, df);
        *bt = bv;
        *dbt = 1.0f;
        return;
    }
    float at = av < a.limit ? av : a.limit;
    fn_eval(TX_CUDA_ACTX_QGELU, at, a.alpha, f, df);
    if (av > a.limit) *df = 0.0f;
    float bc = bv < -a.limit ? -a.limit : (bv > a.limit ? a.limit : bv);
    *bt = bc + a.offset;
    *dbt = fabsf(bv) <= a.limit ? 1.0f : 0.0f;
}

__global__ void actx_fwd_kernel(tx_cuda_actx_args a)
{
    size_t n = a.rows * a.cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / a.cols, j = i % a.cols;
        float f, df, bt, dbt;
        eval_at(a, r, j, &f, &df, &bt, &dbt);
        float y = a.gated ? f * bt : f;
        if (a.scales) y *= tx_ld(a.scales, r, a.scales_dtype);
        tx_st(a.y, i, a.y_dtype, y);
    }
}

__device__ __forceinline__ void bwd_elem(const tx_cuda_actx_args &a, size_t r, size_t j, float s,
                                         float *contrib)
{
    float dy = tx_ld(a.dy, r * a.cols + j, a.dy_dtype);
    float f, df, bt, dbt;
    eval_at(a, r, j, &f, &df, &bt, &dbt);
    if (a.gated) {
        float g = dy * s;
        if (a.dx) {
            size_t xi = r * 2 * a.cols + j;
            tx_st(a.dx, xi, a.dx_dtype, g * bt * df);
            tx_st(a.dx, xi + a.cols, a.dx_dtype, g * f * dbt);
        }
        *contrib = dy * f * bt;
    } else {
        if (a.dx) tx_st(a.dx, r * a.cols + j, a.dx_dtype, dy * s * df);
        *contrib = dy * f;
    }
}

/* Unscaled: one thread per output element. */
__global__ void actx_bwd_kernel(tx_cuda_actx_args a)
{
    size_t n = a.rows * a.cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float c;
        bwd_elem(a, i / a.cols, i % a.cols, 1.0f, &c);
    }
}

/* Scaled: one block per row, so the row's dscales sum needs no atomics. */
__global__ void actx_bwd_rows_kernel(tx_cuda_actx_args a)
{
    __shared__ float red[32];
    size_t r = blockIdx.x;
    float s = a.scales ? tx_ld(a.scales, r, a.scales_dtype) : 1.0f;
    float acc = 0.0f;
    for (size_t j = threadIdx.x; j < a.cols; j += blockDim.x) {
        float c;
        bwd_elem(a, r, j, s, &c);
        acc += c;
    }
    float total = tx_block_sum(acc, red);
    if (threadIdx.x == 0 && a.dscales) tx_st(a.dscales, r, a.dscales_dtype, total);
}

unsigned grid_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

} // namespace

static teexec_status *bad(const char *what)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda activation: %s", what);
}

static teexec_status *check(const tx_cuda_actx_args *a)
{
    if ((int)a->fn < 0 || a->fn >= TX_CUDA_ACTX_COUNT) return bad("unknown function");
    if (a->clamped && (!a->gated || a->fn != TX_CUDA_ACTX_QGELU))
        return bad("the clamp is ClampedSwiGLU's (gated QGELU)");
    if ((a->softcap != 0) != (a->fn == TX_CUDA_ACTX_SITU) || (a->softcap && !a->gated) ||
        (a->softcap && !(a->beta1 > 0.0f && a->beta2 > 0.0f)))
        return bad("SiTU is gated, soft-capped, with beta1, beta2 > 0");
    if (!tx_io_dtype_ok(a->x_dtype)) return bad("x must be float32, bfloat16 or float16");
    if (a->scales && !tx_io_dtype_ok(a->scales_dtype)) return bad("bad scales dtype");
    return NULL;
}

/* The act.h kind with the same function, where act.h has it. */
static bool fast_kind(const tx_cuda_actx_args *a, tx_cuda_act *out)
{
    if (a->scales || a->dscales || a->clamped || a->softcap) return false;
    switch (a->fn) {
    case TX_CUDA_ACTX_GELU_TANH: *out = a->gated ? TX_CUDA_ACT_GEGLU : TX_CUDA_ACT_GELU_TANH; return true;
    case TX_CUDA_ACTX_GELU_ERF:
        if (a->gated) return false; /* act.h's GEGLU is the tanh form */
        *out = TX_CUDA_ACT_GELU_ERF;
        return true;
    case TX_CUDA_ACTX_RELU: *out = a->gated ? TX_CUDA_ACT_REGLU : TX_CUDA_ACT_RELU; return true;
    case TX_CUDA_ACTX_SILU: *out = a->gated ? TX_CUDA_ACT_SWIGLU : TX_CUDA_ACT_SILU; return true;
    default: return false;
    }
}

static tx_cuda_act_args act_args(const tx_cuda_actx_args *a, tx_cuda_act k)
{
    tx_cuda_act_args f;
    memset(&f, 0, sizeof f);
    f.act = k;
    f.rows = a->rows;
    f.cols = a->cols;
    f.x = a->x;
    f.x_dtype = a->x_dtype;
    return f;
}

extern "C" teexec_status *tx_cuda_actx_forward(const tx_cuda_actx_args *a, void *stream)
{
    teexec_status *st = check(a);
    if (st) return st;
    if (!tx_io_dtype_ok(a->y_dtype)) return bad("bad y dtype");
    tx_cuda_act k;
    if (fast_kind(a, &k)) {
        tx_cuda_act_args f = act_args(a, k);
        f.y = a->y;
        f.y_dtype = a->y_dtype;
        return tx_cuda_act_forward(&f, stream);
    }
    size_t n = a->rows * a->cols;
    if (!n) return NULL;
    actx_fwd_kernel<<<grid_for(n), kThreads, 0, (cudaStream_t)stream>>>(*a);
    TX_CUDA_LAUNCHED("activation forward (act_ext)");
    return NULL;
}

extern "C" teexec_status *tx_cuda_actx_backward(const tx_cuda_actx_args *a, void *stream)
{
    teexec_status *st = check(a);
    if (st) return st;
    if (!tx_io_dtype_ok(a->dy_dtype) || (a->dx && !tx_io_dtype_ok(a->dx_dtype)) ||
        (a->dscales && !tx_io_dtype_ok(a->dscales_dtype)))
        return bad("bad dy / dx / dscales dtype");
    if (a->dbias && (!a->dx || a->gated || a->scales || !a->workspace))
        return bad("dbias needs dx, a workspace and a plain (not gated, not scaled) activation");
    if (!a->dx && !a->dscales) return NULL;
    tx_cuda_act k;
    if (fast_kind(a, &k)) {
        tx_cuda_act_args f = act_args(a, k);
        f.dy = a->dy;
        f.dy_dtype = a->dy_dtype;
        f.dx = a->dx;
        f.dx_dtype = a->dx_dtype;
        f.dbias = a->dbias;
        f.dbias_dtype = a->dbias ? a->dbias_dtype : TEEXEC_DTYPE_FLOAT;
        f.workspace = a->workspace;
        return tx_cuda_act_backward(&f, stream);
    }
    size_t n = a->rows * a->cols;
    cudaStream_t s = (cudaStream_t)stream;
    if (a->scales || a->dscales) {
        if (!a->rows) return NULL;
        if (a->rows > 0x7fffffffu) return bad("too many rows for the row grid");
        actx_bwd_rows_kernel<<<(unsigned)a->rows, kThreads, 0, s>>>(*a);
        TX_CUDA_LAUNCHED("activation backward rows (act_ext)");
        return NULL;
    }
    if (!n) return NULL;
    actx_bwd_kernel<<<grid_for(n), kThreads, 0, s>>>(*a);
    TX_CUDA_LAUNCHED("activation backward (act_ext)");
    if (!a->dbias) return NULL;
    return tx_cuda_bias_grad(a->dx, a->dx_dtype, a->rows, a->cols, a->dbias, a->dbias_dtype,
                             a->workspace, stream);
}
