/* std_binary.cu - broadcasting binary ops and variadic Min/Max/Sum/Mean in
 * every CPU dtype (std_binary.h). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_num.cuh"

extern "C" {
#include "kernels/cuda/std_binary.h"
}

#include <math.h>
#include <string.h>

using namespace txs;

namespace {

enum { D_F32, D_F64, D_I64, D_U64, D_BOOL };

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

bool is_compare(int op)
{
    return op == TX_BINARY_EQUAL || op == TX_BINARY_LESS || op == TX_BINARY_LESS_OR_EQUAL ||
           op == TX_BINARY_GREATER || op == TX_BINARY_GREATER_OR_EQUAL;
}

bool is_logical(int op) { return op == TX_BINARY_AND || op == TX_BINARY_OR || op == TX_BINARY_XOR; }

/* The CPU's plan_types: the domain and the output dtype, or -1. */
int plan(int op, teexec_dtype a, teexec_dtype b, teexec_dtype *y, const char **why)
{
    tx_std_dom ka = tx_std_dom_of(a), kb = tx_std_dom_of(b);
    *why = NULL;
    if (is_logical(op)) {
        if (a != TEEXEC_DTYPE_BOOL || b != TEEXEC_DTYPE_BOOL) {
            *why = "And / Or / Xor take bool operands";
            return -1;
        }
        *y = TEEXEC_DTYPE_BOOL;
        return D_BOOL;
    }
    if (op == TX_BINARY_POW) {
        if (!tx_std_dom_numeric(ka) || !tx_std_dom_numeric(kb)) {
            *why = "Pow takes numeric operands";
            return -1;
        }
        *y = a;
        bool ia = ka == TX_DOM_I64 || ka == TX_DOM_U64, ib = kb == TX_DOM_I64 || kb == TX_DOM_U64;
        if (ia && ib) return ka == TX_DOM_U64 && kb == TX_DOM_U64 ? D_U64 : D_I64;
        if (ka == TX_DOM_F32) return D_F32;
        return D_F64; /* double base, or an integer base with a float exponent */
    }
    if (a != b) {
        *why = "the operands' dtypes differ";
        return -1;
    }
    if (is_compare(op)) {
        *y = TEEXEC_DTYPE_BOOL;
        if (ka == TX_DOM_BOOL && op == TX_BINARY_EQUAL) return D_BOOL;
    } else if (op == TX_BINARY_ADD || op == TX_BINARY_SUB || op == TX_BINARY_MUL ||
               op == TX_BINARY_DIV) {
        *y = a;
    } else {
        *why = "not a binary op of this kernel";
        return -1;
    }
    switch (ka) {
    case TX_DOM_F32: return D_F32;
    case TX_DOM_F64: return D_F64;
    case TX_DOM_I64: return D_I64;
    case TX_DOM_U64: return D_U64;
    default: *why = "the dtype is not numeric"; return -1;
    }
}

template <typename T>
__device__ __forceinline__ uint8_t compare(int op, T x, T z)
{
    switch (op) {
    case TX_BINARY_EQUAL: return x == z;
    case TX_BINARY_LESS: return x < z;
    case TX_BINARY_LESS_OR_EQUAL: return x <= z;
    case TX_BINARY_GREATER: return x > z;
    default: return x >= z;
    }
}

template <typename T>
__device__ __forceinline__ T arith_float(int op, T x, T z)
{
    switch (op) {
    case TX_BINARY_ADD: return x + z;
    case TX_BINARY_SUB: return x - z;
    case TX_BINARY_MUL: return x * z;
    case TX_BINARY_DIV: return x / z;
    default:
        /* exported graphs square and cube through Pow: plain products */
        if (z == (T)2) return x * x;
        if (z == (T)3) return x * x * x;
        return pow(x, z);
    }
}

__device__ __forceinline__ int64_t ipow_i64(int64_t base, int64_t e)
{
    if (e < 0) {
        if (base == 1) return 1;
        if (base == -1) return (e & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, b = (uint64_t)base, ue = (uint64_t)e;
    while (ue) {
        if (ue & 1) r *= b;
        b *= b;
        ue >>= 1;
    }
    return (int64_t)r;
}

__device__ __forceinline__ uint64_t ipow_u64(uint64_t b, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

__device__ __forceinline__ int64_t arith_i64(int op, int64_t x, int64_t z)
{
    uint64_t ux = (uint64_t)x, uz = (uint64_t)z;
    switch (op) {
    case TX_BINARY_ADD: return (int64_t)(ux + uz);
    case TX_BINARY_SUB: return (int64_t)(ux - uz);
    case TX_BINARY_MUL: return (int64_t)(ux * uz);
    case TX_BINARY_DIV:
        if (z == 0) return 0;
        if (z == -1) return (int64_t)((uint64_t)0 - ux);
        return x / z;
    default: return ipow_i64(x, z);
    }
}

__device__ __forceinline__ uint64_t arith_u64(int op, uint64_t x, uint64_t z)
{
    switch (op) {
    case TX_BINARY_ADD: return x + z;
    case TX_BINARY_SUB: return x - z;
    case TX_BINARY_MUL: return x * z;
    case TX_BINARY_DIV: return z ? x / z : 0;
    default: return ipow_u64(x, z);
    }
}

__global__ void binary_kernel(int op, int dom, int cmp, tx_cuda_bcast p, const void *a, int at,
                              const void *b, int bt, void *y, int yt, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t oa = 0, ob = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            int64_t c = (int64_t)(rem % (uint64_t)p.dims[k]);
            rem /= (uint64_t)p.dims[k];
            oa += c * p.st[0][k];
            ob += c * p.st[1][k];
        }
        switch (dom) {
        case D_F32: {
            float x = ld_f32(a, (size_t)oa, at), z = ld_f32(b, (size_t)ob, bt);
            if (cmp) ((uint8_t *)y)[i] = compare(op, x, z);
            else st_f32(y, i, yt, arith_float(op, x, z));
            break;
        }
        case D_F64: {
            double x = ld_f64(a, (size_t)oa, at), z = ld_f64(b, (size_t)ob, bt);
            if (cmp) ((uint8_t *)y)[i] = compare(op, x, z);
            else st_f64(y, i, yt, arith_float(op, x, z));
            break;
        }
        case D_I64: {
            int64_t x = ld_i64(a, (size_t)oa, at), z = ld_i64(b, (size_t)ob, bt);
            if (cmp) ((uint8_t *)y)[i] = compare(op, x, z);
            else st_i64(y, i, yt, arith_i64(op, x, z));
            break;
        }
        case D_U64: {
            uint64_t x = ld_u64(a, (size_t)oa, at), z = ld_u64(b, (size_t)ob, bt);
            if (cmp) ((uint8_t *)y)[i] = compare(op, x, z);
            else st_u64(y, i, yt, arith_u64(op, x, z));
            break;
        }
        default: {
            uint8_t x = ((const uint8_t *)a)[oa] != 0, z = ((const uint8_t *)b)[ob] != 0;
            uint8_t r;
            switch (op) {
            case TX_BINARY_AND: r = x & z; break;
            case TX_BINARY_OR: r = x | z; break;
            case TX_BINARY_XOR: r = x ^ z; break;
            default: r = x == z; break;
            }
            ((uint8_t *)y)[i] = r;
            break;
        }
        }
    }
}

/* ---- variadic -------------------------------------------------------------------- */

struct var_plan {
    int rank;
    int64_t dims[TX_STD_RANK], st[TX_STD_RANK];
};

__global__ void variadic_step_kernel(int op, int first, int dom, var_plan p, const void *x,
                                     int dt, void *acc, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t ox = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            ox += (int64_t)(rem % (uint64_t)p.dims[k]) * p.st[k];
            rem /= (uint64_t)p.dims[k];
        }
        if (dom == D_F64) {
            double v = ld_f64(x, (size_t)ox, dt), *a = (double *)acc + i;
            if (first) {
                *a = v;
                continue;
            }
            double c = *a;
            bool cn = c != c, vn = v != v;
            if (op == TX_VARIADIC_MIN) *a = (cn || c < v) && !vn ? c : v;
            else if (op == TX_VARIADIC_MAX) *a = (cn || c > v) && !vn ? c : v;
            else *a = c + v;
        } else if (dom == D_I64) {
            int64_t v = ld_i64(x, (size_t)ox, dt), *a = (int64_t *)acc + i;
            if (first) {
                *a = v;
                continue;
            }
            int64_t c = *a;
            if (op == TX_VARIADIC_MIN) *a = c < v ? c : v;
            else if (op == TX_VARIADIC_MAX) *a = c > v ? c : v;
            else *a = (int64_t)((uint64_t)c + (uint64_t)v);
        } else {
            uint64_t v = ld_u64(x, (size_t)ox, dt), *a = (uint64_t *)acc + i;
            if (first) {
                *a = v;
                continue;
            }
            uint64_t c = *a;
            if (op == TX_VARIADIC_MIN) *a = c < v ? c : v;
            else if (op == TX_VARIADIC_MAX) *a = c > v ? c : v;
            else *a = c + v;
        }
    }
}

__global__ void variadic_finish_kernel(int op, int dom, double count, const void *acc, void *y,
                                       int dt, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        if (dom == D_F64) {
            double d = ((const double *)acc)[i];
            if (op == TX_VARIADIC_MEAN) d /= count;
            /* FP32-domain dtypes finish the FP64 sum as a float, then store */
            if (dt == TEEXEC_DTYPE_DOUBLE) st_f64(y, i, dt, d);
            else st_f32(y, i, dt, __double2float_rn(d));
        } else if (dom == D_I64) {
            st_i64(y, i, dt, ((const int64_t *)acc)[i]);
        } else {
            st_u64(y, i, dt, ((const uint64_t *)acc)[i]);
        }
    }
}

/* ties[i] (+)= (x[i through st] == y[i]): the count of inputs holding the
 * extreme, for Max / Min's backward. */
__global__ void ties_kernel(int first, var_plan p, const void *x, int xt, const void *y, int yt,
                            double *ties, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t rem = i;
        int64_t ox = 0;
        for (int k = p.rank - 1; k >= 0; k--) {
            ox += (int64_t)(rem % (uint64_t)p.dims[k]) * p.st[k];
            rem /= (uint64_t)p.dims[k];
        }
        double hit = ld_f64(x, (size_t)ox, xt) == ld_f64(y, i, yt) ? 1.0 : 0.0;
        ties[i] = first ? hit : ties[i] + hit;
    }
}

int var_dom(teexec_dtype dt)
{
    tx_std_dom d = tx_std_dom_of(dt);
    if (tx_std_dom_float(d)) return D_F64;
    if (d == TX_DOM_I64) return D_I64;
    if (d == TX_DOM_U64) return D_U64;
    return -1;
}

uint64_t numel_of(int rank, const int64_t *dims)
{
    uint64_t n = 1;
    for (int k = 0; k < rank; k++) n *= (uint64_t)dims[k];
    return n;
}

} // namespace

extern "C" int tx_cuda_binary_types(tx_binary_op op, teexec_dtype a, teexec_dtype b,
                                    teexec_dtype *y, const char **why)
{
    return plan((int)op, a, b, y, why) >= 0;
}

extern "C" teexec_status *tx_cuda_binary(tx_binary_op op, const tx_cuda_bcast *g, const void *a,
                                         teexec_dtype at, const void *b, teexec_dtype bt,
                                         void *y, teexec_dtype yt, void *stream)
{
    teexec_dtype want;
    const char *why;
    int dom = plan((int)op, at, bt, &want, &why);
    if (dom < 0) return bad("binary", why);
    if (want != yt) return bad("binary", "the output dtype does not fit the op");
    if (g->rank < 0 || g->rank > TX_STD_MAX_RANK) return bad("binary", "rank out of range");
    uint64_t n = numel_of(g->rank, g->dims);
    if (!n) return NULL;
    int cmp = is_compare((int)op) || is_logical((int)op);
    binary_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        (int)op, dom, cmp, *g, a, (int)at, b, (int)bt, y, (int)yt, n);
    TX_CUDA_LAUNCHED("binary");
    return NULL;
}

extern "C" teexec_status *tx_cuda_variadic_step(tx_variadic_op op, int first, int rank,
                                                const int64_t *dims, const int64_t *st,
                                                const void *x, teexec_dtype dt, void *acc,
                                                void *stream)
{
    int dom = var_dom(dt);
    if (dom < 0 || (op == TX_VARIADIC_MEAN && dom != D_F64))
        return bad("variadic", "dtype not supported for this op");
    if (rank < 0 || rank > TX_STD_RANK) return bad("variadic", "rank out of range");
    var_plan p;
    memset(&p, 0, sizeof p);
    p.rank = rank;
    for (int k = 0; k < rank; k++) {
        p.dims[k] = dims[k];
        p.st[k] = st[k];
    }
    uint64_t n = numel_of(rank, dims);
    if (!n) return NULL;
    variadic_step_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        (int)op, first, dom, p, x, (int)dt, acc, n);
    TX_CUDA_LAUNCHED("variadic");
    return NULL;
}

extern "C" teexec_status *tx_cuda_variadic_finish(tx_variadic_op op, size_t count,
                                                  const void *acc, void *y, teexec_dtype dt,
                                                  size_t n, void *stream)
{
    int dom = var_dom(dt);
    if (dom < 0) return bad("variadic", "dtype not supported");
    if (!n) return NULL;
    variadic_finish_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(
        (int)op, dom, (double)count, acc, y, (int)dt, (uint64_t)n);
    TX_CUDA_LAUNCHED("variadic finish");
    return NULL;
}

extern "C" teexec_status *tx_cuda_variadic_ties(int first, int rank, const int64_t *dims,
                                                const int64_t *st, const void *x,
                                                teexec_dtype xt, const void *y, teexec_dtype yt,
                                                double *ties, void *stream)
{
    if (rank < 0 || rank > TX_STD_RANK) return bad("variadic ties", "rank out of range");
    var_plan p;
    memset(&p, 0, sizeof p);
    p.rank = rank;
    for (int k = 0; k < rank; k++) {
        p.dims[k] = dims[k];
        p.st[k] = st[k];
    }
    uint64_t n = numel_of(rank, dims);
    if (!n) return NULL;
    ties_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(first, p, x, (int)xt, y,
                                                                    (int)yt, ties, n);
    TX_CUDA_LAUNCHED("variadic ties");
    return NULL;
}
