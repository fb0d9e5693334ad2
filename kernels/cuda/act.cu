/* act.cu - activations forward/backward, dact+dbias, bias grad (act.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elem_io.cuh"

extern "C" {
#include "kernels/cuda/act.h"
}

#include <math.h>

namespace {

constexpr size_t kRowsPerChunk = 64;

/* f(x) and f'(x), the CPU's formulas (te_activation.c) in float. */
__device__ __forceinline__ void act_f(int act, float x, float *f, float *df)
{
    switch (act) {
    case TX_CUDA_ACT_GELU_TANH:
    case TX_CUDA_ACT_GEGLU: {
        float t = tanhf(0.79788456f * x * (1.0f + 0.044715f * x * x));
        *f = 0.5f * x * (1.0f + t);
        *df = 0.5f * x * ((1.0f - t * t) * (0.79788456f + 0.1070322243f * x * x)) +
              0.5f * (1.0f + t);
        return;
    }
    case TX_CUDA_ACT_GELU_ERF: {
        float c = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
        *f = x * c;
        *df = c + x * 0.39894228040143267794f * expf(-0.5f * x * x);
        return;
    }
    case TX_CUDA_ACT_RELU:
    case TX_CUDA_ACT_REGLU:
        *f = x > 0.0f ? x : 0.0f;
        *df = x > 0.0f ? 1.0f : 0.0f;
        return;
    default: { /* SiLU, SwiGLU */
        float s = 1.0f / (1.0f + expf(-x));
        *f = x * s;
        *df = x * s * (1.0f - s) + s;
        return;
    }
    }
}

__device__ __forceinline__ bool gated(int act)
{
    return act == TX_CUDA_ACT_SWIGLU || act == TX_CUDA_ACT_GEGLU || act == TX_CUDA_ACT_REGLU;
}

__global__ void act_fwd_kernel(tx_cuda_act_args a)
{
    size_t n = a.rows * a.cols;
    bool g = gated(a.act);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float f, df;
        if (g) {
            size_t r = i / a.cols, j = i % a.cols;
            size_t xi = r * 2 * a.cols + j;
            act_f(a.act, tx_ld(a.x, xi, a.x_dtype), &f, &df);
            f *= tx_ld(a.x, xi + a.cols, a.x_dtype);
        } else {
            act_f(a.act, tx_ld(a.x, i, a.x_dtype), &f, &df);
        }
        tx_st(a.y, i, a.y_dtype, f);
    }
}

__global__ void act_bwd_kernel(tx_cuda_act_args a)
{
    size_t n = a.rows * a.cols;
    bool g = gated(a.act);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float dy = tx_ld(a.dy, i, a.dy_dtype), f, df;
        if (g) {
            size_t r = i / a.cols, j = i % a.cols;
            size_t xi = r * 2 * a.cols + j;
            float av = tx_ld(a.x, xi, a.x_dtype), bv = tx_ld(a.x, xi + a.cols, a.x_dtype);
            act_f(a.act, av, &f, &df);
            tx_st(a.dx, xi, a.dx_dtype, dy * bv * df);
            tx_st(a.dx, xi + a.cols, a.dx_dtype, dy * f);
        } else {
            act_f(a.act, tx_ld(a.x, i, a.x_dtype), &f, &df);
            tx_st(a.dx, i, a.dx_dtype, dy * df);
        }
    }
}

/* Partial column sums over one chunk of rows per blockIdx.y; one thread
 * per column, so reads are coalesced. */
__global__ void colsum_partial(const void *v, int v_dtype, size_t rows, size_t cols,
                               float *ws)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t chunk = blockIdx.y;
    if (j >= cols) return;
    size_t r0 = chunk * kRowsPerChunk, r1 = r0 + kRowsPerChunk;
    if (r1 > rows) r1 = rows;
    float s = 0.0f;
    for (size_t r = r0; r < r1; r++) s += tx_ld(v, r * cols + j, v_dtype);
    ws[chunk * cols + j] = s;
}

__global__ void colsum_final(const float *ws, size_t n_chunks, size_t cols, void *out,
                             int out_dtype)
{
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float s = 0.0f;
    for (size_t c = 0; c < n_chunks; c++) s += ws[c * cols + j];
    tx_st(out, j, out_dtype, s);
}

unsigned grid_for(size_t n)
{
    size_t b = (n + 255) / 256;
    if (b > 132u * 32u) b = 132u * 32u;
    return b ? (unsigned)b : 1u;
}

size_t n_chunks_of(size_t rows) { return (rows + kRowsPerChunk - 1) / kRowsPerChunk; }

} // namespace

extern "C" int tx_cuda_act_gated(tx_cuda_act act)
{
    return act == TX_CUDA_ACT_SWIGLU || act == TX_CUDA_ACT_GEGLU || act == TX_CUDA_ACT_REGLU;
}

static teexec_status *bad(const char *what)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda activation: %s", what);
}

extern "C" teexec_status *tx_cuda_act_forward(const tx_cuda_act_args *a, void *stream)
{
    if ((int)a->act < 0 || a->act > TX_CUDA_ACT_REGLU) return bad("unknown activation");
    if (!tx_io_dtype_ok(a->x_dtype) || !tx_io_dtype_ok(a->y_dtype)) return bad("bad dtype");
    size_t n = a->rows * a->cols;
    if (!n) return NULL;
    act_fwd_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(*a);
    TX_CUDA_LAUNCHED("activation forward");
    return NULL;
}

extern "C" size_t tx_cuda_colsum_workspace_floats(size_t rows, size_t cols)
{
    return n_chunks_of(rows) * cols;
}

extern "C" teexec_status *tx_cuda_bias_grad(const void *dy, teexec_dtype dy_dtype, size_t rows,
                                            size_t cols, void *dbias, teexec_dtype dbias_dtype,
                                            float *workspace, void *stream)
{
    if (!tx_io_dtype_ok(dy_dtype) || !tx_io_dtype_ok(dbias_dtype)) return bad("bad bias dtype");
    if (!cols) return NULL;
    size_t nc = n_chunks_of(rows);
    if (nc > 65535) return bad("too many rows for the bias-grad grid");
    cudaStream_t s = (cudaStream_t)stream;
    unsigned gx = (unsigned)((cols + 255) / 256);
    if (nc) {
        if (!workspace) return bad("bias grad needs the workspace");
        colsum_partial<<<dim3(gx, (unsigned)nc), 256, 0, s>>>(dy, dy_dtype, rows, cols, workspace);
        TX_CUDA_LAUNCHED("bias grad partial");
    }
    colsum_final<<<gx, 256, 0, s>>>(workspace, nc, cols, dbias, dbias_dtype);
    TX_CUDA_LAUNCHED("bias grad final");
    return NULL;
}

extern "C" teexec_status *tx_cuda_act_backward(const tx_cuda_act_args *a, void *stream)
{
    if ((int)a->act < 0 || a->act > TX_CUDA_ACT_REGLU) return bad("unknown activation");
    if (!tx_io_dtype_ok(a->x_dtype) || !tx_io_dtype_ok(a->dy_dtype) ||
        !tx_io_dtype_ok(a->dx_dtype))
        return bad("bad dtype");
    if (a->dbias && tx_cuda_act_gated(a->act)) return bad("dbias with a gated activation");
    size_t n = a->rows * a->cols;
    if (!n) return NULL;
    act_bwd_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(*a);
    TX_CUDA_LAUNCHED("activation backward");
    /* The bias grad sums dx as stored (rounded to dx's dtype), exactly
     * what the unfused Bias backward would read: fused and unfused agree. */
    if (a->dbias)
        return tx_cuda_bias_grad(a->dx, a->dx_dtype, a->rows, a->cols, a->dbias, a->dbias_dtype,
                                 a->workspace, stream);
    return NULL;
}
