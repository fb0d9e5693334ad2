/* std_unary.cu - one-input elementwise ONNX ops on the GPU (std_unary.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_num.cuh"

extern "C" {
#include "kernels/cuda/std_unary.h"
}

#include <math.h>

using namespace txs;

namespace {

struct clip_bounds_d {
    const void *lo_dev, *hi_dev;
    double lo, hi;
};

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

/* The float forms, once for float and once for double (the CPU's
 * UNARY_FLOAT_BODY). Sigmoid: e^-x overflowing to inf still gives 0. */
template <typename T> __device__ __forceinline__ T f_exp(T v);
template <> __device__ __forceinline__ float f_exp(float v) { return expf(v); }
template <> __device__ __forceinline__ double f_exp(double v) { return exp(v); }

template <typename T>
__device__ __forceinline__ T unary_float(int op, T x, T alpha)
{
    switch (op) {
    case TX_UNARY_NEG: return -x;
    case TX_UNARY_ABS: return fabs(x);
    case TX_UNARY_SIGN: return x > (T)0 ? (T)1 : x < (T)0 ? (T)-1 : x; /* keeps 0 and NaN */
    case TX_UNARY_RELU: return x > (T)0 ? x : (x != x ? x : (T)0);
    case TX_UNARY_SQRT: return sqrt(x);
    case TX_UNARY_RECIPROCAL: return (T)1 / x;
    case TX_UNARY_EXP: return f_exp(x);
    case TX_UNARY_LOG: return log(x);
    case TX_UNARY_ERF: return erf(x);
    case TX_UNARY_TANH: return tanh(x);
    case TX_UNARY_SIGMOID: return (T)1 / ((T)1 + f_exp(-x));
    case TX_UNARY_LEAKY_RELU: return x < (T)0 ? alpha * x : x;
    case TX_UNARY_ELU: return x < (T)0 ? alpha * expm1(x) : x;
    case TX_UNARY_SOFTPLUS: return x > (T)0 ? x + log1p(f_exp(-x)) : log1p(f_exp(x));
    case TX_UNARY_GELU: return (T)0.5 * x * ((T)1 + erf(x * (T)0.70710678118654752440));
    case TX_UNARY_GELU_TANH: {
        /* x/2 (1 + tanh u) = x sigmoid(2u), as the CPU writes it */
        T u = (T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x);
        return x / ((T)1 + f_exp((T)-2 * u));
    }
    case TX_UNARY_FLOOR: return floor(x);
    case TX_UNARY_CEIL: return ceil(x);
    case TX_UNARY_ROUND: return rint(x); /* half to even */
    case TX_UNARY_SIN: return sin(x);
    case TX_UNARY_COS: return cos(x);
    default: return x;
    }
}

__global__ void unary_kernel(int op, float alpha, const void *x, void *y, int dt, int dom,
                             uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        if (dom == TX_DOM_F32) {
            st_f32(y, i, dt, unary_float<float>(op, ld_f32(x, i, dt), alpha));
        } else if (dom == TX_DOM_F64) {
            st_f64(y, i, dt, unary_float<double>(op, ld_f64(x, i, dt), (double)alpha));
        } else if (dom == TX_DOM_I64) {
            int64_t v = ld_i64(x, i, dt), r = v;
            uint64_t neg = (uint64_t)0 - (uint64_t)v;
            switch (op) {
            case TX_UNARY_NEG: r = (int64_t)neg; break;
            case TX_UNARY_ABS: r = v < 0 ? (int64_t)neg : v; break;
            case TX_UNARY_SIGN: r = (v > 0) - (v < 0); break;
            case TX_UNARY_RELU: r = v > 0 ? v : 0; break;
            default: break;
            }
            st_i64(y, i, dt, r);
        } else {
            uint64_t v = ld_u64(x, i, dt);
            st_u64(y, i, dt, op == TX_UNARY_SIGN ? (v != 0) : v); /* Abs, Relu: identity */
        }
    }
}

/* The CPU trainer's rules (exec/backward_std.c bwd_unary, bwd_unary_attr,
 * bwd_gelu, bwd_trig), in double. */
__global__ void unary_bwd_kernel(int op, double alpha, const void *x, const void *y,
                                 const void *g, void *gx, int dt, uint64_t n)
{
    const double k_erf = 1.12837916709551257390;  /* 2 / sqrt(pi) */
    const double k_phi = 0.39894228040143267794;  /* 1 / sqrt(2 pi) */
    const double k_tanh = 0.79788456080286535588; /* sqrt(2 / pi) */
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        double gv = ld_f64(g, i, dt), r;
        switch (op) {
        case TX_UNARY_RELU: r = ld_f64(x, i, dt) > 0 ? gv : 0.0; break;
        case TX_UNARY_SQRT: r = gv * 0.5 / ld_f64(y, i, dt); break;
        case TX_UNARY_ERF: {
            double xv = ld_f64(x, i, dt);
            r = gv * k_erf * exp(-xv * xv);
            break;
        }
        case TX_UNARY_TANH: {
            double yv = ld_f64(y, i, dt);
            r = gv * (1.0 - yv * yv);
            break;
        }
        case TX_UNARY_SIGMOID: {
            double yv = ld_f64(y, i, dt);
            r = gv * yv * (1.0 - yv);
            break;
        }
        case TX_UNARY_NEG: r = -gv; break;
        case TX_UNARY_EXP: r = gv * ld_f64(y, i, dt); break;
        case TX_UNARY_LOG: r = gv / ld_f64(x, i, dt); break;
        case TX_UNARY_ABS: {
            double xv = ld_f64(x, i, dt);
            r = xv > 0 ? gv : xv < 0 ? -gv : 0.0;
            break;
        }
        case TX_UNARY_LEAKY_RELU: r = ld_f64(x, i, dt) > 0 ? gv : gv * alpha * 1.0; break;
        case TX_UNARY_ELU: {
            double xv = ld_f64(x, i, dt);
            r = xv > 0 ? gv : gv * alpha * exp(xv);
            break;
        }
        case TX_UNARY_SOFTPLUS: r = gv / (1 + exp(-ld_f64(x, i, dt))); break;
        case TX_UNARY_GELU: {
            double v = ld_f64(x, i, dt);
            r = gv * (0.5 * (1 + erf(v / sqrt(2.0))) + v * k_phi * exp(-0.5 * v * v));
            break;
        }
        case TX_UNARY_GELU_TANH: {
            const double a = 0.044715;
            double v = ld_f64(x, i, dt), t = tanh(k_tanh * (v + a * v * v * v));
            r = gv * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k_tanh * (1 + 3 * a * v * v));
            break;
        }
        case TX_UNARY_SIN: r = gv * cos(ld_f64(x, i, dt)); break;
        case TX_UNARY_COS: r = -(gv * sin(ld_f64(x, i, dt))); break;
        default: { /* RECIPROCAL */
            double yv = ld_f64(y, i, dt);
            r = -gv * yv * yv;
            break;
        }
        }
        st_f64(gx, i, dt, r);
    }
}

/* Clip's gradient passes where lo <= x <= hi, bounds included (the CPU
 * rule; the attribute form's bounds as the attributes give them). */
__global__ void clip_bwd_kernel(clip_bounds_d b, const void *x, const void *g, void *gx, int dt,
                                uint64_t n)
{
    double lo = b.lo_dev ? ld_f64(b.lo_dev, 0, dt) : b.lo, hi = b.hi_dev ? ld_f64(b.hi_dev, 0, dt) : b.hi;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        double xv = ld_f64(x, i, dt);
        st_f64(gx, i, dt, xv >= lo && xv <= hi ? ld_f64(g, i, dt) : 0.0);
    }
}

__global__ void not_kernel(const uint8_t *x, uint8_t *y, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        y[i] = !x[i];
}

__global__ void classify_kernel(int mode, int pos, int neg, const void *x, int dt, uint8_t *y,
                                uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        double v = ld_f64(x, i, dt);
        if (mode == 0) y[i] = v != v;
        else y[i] = (pos && v == INFINITY) || (neg && v == -INFINITY);
    }
}

struct clip_args {
    tx_cuda_clip_bound lo, hi;
};

__global__ void clip_kernel(clip_args b, const void *x, void *y, int dt, int dom, uint64_t n)
{
    /* the bounds, read once per thread (a scalar each) */
    if (dom == TX_DOM_F32 || dom == TX_DOM_F64) {
        double lo = b.lo.dev ? ld_f64(b.lo.dev, 0, dt) : b.lo.has_host ? b.lo.host : -INFINITY;
        double hi = b.hi.dev ? ld_f64(b.hi.dev, 0, dt) : b.hi.has_host ? b.hi.host : INFINITY;
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (uint64_t)gridDim.x * blockDim.x) {
            double v = ld_f64(x, i, dt);
            if (v < lo) v = lo;
            if (v > hi) v = hi;
            st_f64(y, i, dt, v); /* already representable in dt */
        }
    } else if (dom == TX_DOM_I64) {
        int64_t lo = b.lo.dev ? ld_i64(b.lo.dev, 0, dt) : b.lo.has_host ? (int64_t)b.lo.host : INT64_MIN;
        int64_t hi = b.hi.dev ? ld_i64(b.hi.dev, 0, dt) : b.hi.has_host ? (int64_t)b.hi.host : INT64_MAX;
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (uint64_t)gridDim.x * blockDim.x) {
            int64_t v = ld_i64(x, i, dt);
            v = v < lo ? lo : v;
            st_i64(y, i, dt, v > hi ? hi : v);
        }
    } else {
        uint64_t lo = b.lo.dev ? ld_u64(b.lo.dev, 0, dt) : b.lo.has_host ? (uint64_t)b.lo.host : 0;
        uint64_t hi = b.hi.dev ? ld_u64(b.hi.dev, 0, dt)
                               : b.hi.has_host ? (uint64_t)b.hi.host : UINT64_MAX;
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (uint64_t)gridDim.x * blockDim.x) {
            uint64_t v = ld_u64(x, i, dt);
            v = v < lo ? lo : v;
            st_u64(y, i, dt, v > hi ? hi : v);
        }
    }
}

} // namespace

extern "C" int tx_cuda_unary_dtype_ok(tx_unary_op op, teexec_dtype dt)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if ((unsigned)op >= TX_UNARY_COUNT) return 0;
    if (tx_std_dom_float(d)) return 1;
    if (op == TX_UNARY_ABS || op == TX_UNARY_SIGN) return d == TX_DOM_I64 || d == TX_DOM_U64;
    if (op == TX_UNARY_NEG || op == TX_UNARY_RELU) return d == TX_DOM_I64;
    return 0;
}

extern "C" teexec_status *tx_cuda_unary(tx_unary_op op, float alpha, const void *x, void *y,
                                        teexec_dtype dt, size_t n, void *stream)
{
    if (!tx_cuda_unary_dtype_ok(op, dt)) return bad("unary", "dtype not supported for this op");
    if (!n) return NULL;
    unary_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        (int)op, alpha, x, y, (int)dt, (int)tx_std_dom_of(dt), (uint64_t)n);
    TX_CUDA_LAUNCHED("unary");
    return NULL;
}

extern "C" int tx_cuda_unary_has_backward(tx_unary_op op)
{
    switch (op) {
    case TX_UNARY_RELU:
    case TX_UNARY_SQRT:
    case TX_UNARY_ERF:
    case TX_UNARY_TANH:
    case TX_UNARY_SIGMOID:
    case TX_UNARY_NEG:
    case TX_UNARY_EXP:
    case TX_UNARY_LOG:
    case TX_UNARY_RECIPROCAL:
    case TX_UNARY_ABS:
    case TX_UNARY_LEAKY_RELU:
    case TX_UNARY_ELU:
    case TX_UNARY_SOFTPLUS:
    case TX_UNARY_GELU:
    case TX_UNARY_GELU_TANH:
    case TX_UNARY_SIN:
    case TX_UNARY_COS: return 1;
    default: return 0;
    }
}

extern "C" teexec_status *tx_cuda_unary_backward(tx_unary_op op, float alpha, const void *x,
                                                 const void *y, const void *g, void *gx,
                                                 teexec_dtype dt, size_t n, void *stream)
{
    if (!tx_cuda_unary_has_backward(op)) return bad("unary backward", "no rule for this op");
    if (tx_std_dom_of(dt) != TX_DOM_F32)
        return bad("unary backward", "dtype must be FLOAT, FLOAT16 or BFLOAT16");
    if (!n) return NULL;
    unary_bwd_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        (int)op, (double)alpha, x, y, g, gx, (int)dt, (uint64_t)n);
    TX_CUDA_LAUNCHED("unary backward");
    return NULL;
}

extern "C" teexec_status *tx_cuda_clip_backward(const void *x, const void *g, void *gx,
                                                teexec_dtype dt, size_t n, const void *lo_dev,
                                                double lo, const void *hi_dev, double hi,
                                                void *stream)
{
    if (tx_std_dom_of(dt) != TX_DOM_F32)
        return bad("clip backward", "dtype must be FLOAT, FLOAT16 or BFLOAT16");
    if (!n) return NULL;
    clip_bounds_d b = {lo_dev, hi_dev, lo, hi};
    clip_bwd_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(b, x, g, gx, (int)dt,
                                                                        (uint64_t)n);
    TX_CUDA_LAUNCHED("clip backward");
    return NULL;
}

extern "C" teexec_status *tx_cuda_not(const uint8_t *x, uint8_t *y, size_t n, void *stream)
{
    if (!n) return NULL;
    not_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(x, y, (uint64_t)n);
    TX_CUDA_LAUNCHED("not");
    return NULL;
}

extern "C" teexec_status *tx_cuda_isnan_isinf(int mode, int detect_pos, int detect_neg,
                                              const void *x, teexec_dtype dt, uint8_t *y,
                                              size_t n, void *stream)
{
    if (!tx_std_dom_float(tx_std_dom_of(dt))) return bad("isnan/isinf", "input must be a float");
    if (!n) return NULL;
    classify_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        mode, detect_pos, detect_neg, x, (int)dt, y, (uint64_t)n);
    TX_CUDA_LAUNCHED("isnan/isinf");
    return NULL;
}

extern "C" teexec_status *tx_cuda_clip(const void *x, void *y, teexec_dtype dt, size_t n,
                                       tx_cuda_clip_bound lo, tx_cuda_clip_bound hi,
                                       void *stream)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if (!tx_std_dom_numeric(d)) return bad("clip", "dtype must be numeric");
    if (!n) return NULL;
    clip_args a = {lo, hi};
    clip_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(a, x, y, (int)dt, (int)d,
                                                                    (uint64_t)n);
    TX_CUDA_LAUNCHED("clip");
    return NULL;
}
