/* std_qdq.cu - ONNX Q/DQ and the trt Q/DQ ops on the GPU (std_qdq.h), as
 * kernels/cpu/qdq.c computes them: each product and quotient rounds to
 * float32 on its own (built with -fmad=false). */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/std_convert.cuh"

extern "C" {
#include "kernels/cuda/std_qdq.h"
}

#include <float.h>

using namespace txc;

namespace {

teexec_status *bad(const char *what, const char *why)
{
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, NULL, NULL, "cuda %s: %s", what, why);
}

__device__ __forceinline__ uint64_t map_index(const tx_cuda_qmap &m, uint64_t i)
{
    if (m.mode == 0) return 0;
    uint64_t in = i % m.inner;
    uint64_t a = (i / m.inner) % m.d;
    if (m.mode == 1) return a;
    uint64_t outer = i / (m.inner * m.d);
    return (outer * m.s + a / m.block) * m.inner + in;
}

__device__ __forceinline__ float round_to(int p, float v)
{
    if (p == TEEXEC_DTYPE_FLOAT16) return f16_to_f32(f32_to_f16(v));
    if (p == TEEXEC_DTYPE_BFLOAT16) return bf16_to_f32(f32_to_bf16(v));
    return v;
}

__device__ __forceinline__ bool int_range_q(int dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case TEEXEC_DTYPE_UINT8: *lo = 0; *hi = 255; return true;
    case TEEXEC_DTYPE_INT8: *lo = -128; *hi = 127; return true;
    case TEEXEC_DTYPE_UINT16: *lo = 0; *hi = 65535; return true;
    case TEEXEC_DTYPE_INT16: *lo = -32768; *hi = 32767; return true;
    case TEEXEC_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
    case TEEXEC_DTYPE_INT4: *lo = -8; *hi = 7; return true;
    case TEEXEC_DTYPE_UINT4: *lo = 0; *hi = 15; return true;
    case TEEXEC_DTYPE_INT2: *lo = -2; *hi = 1; return true;
    case TEEXEC_DTYPE_UINT2: *lo = 0; *hi = 3; return true;
    default: return false;
    }
}

struct q_args {
    tx_cuda_qmap m;
    const void *x, *scale, *zp;
    int xt, st, zt, sat, prec, yt;
};

/* The code of element i (an integer's low bits, an FP8 byte, a nibble). */
__device__ __forceinline__ uint64_t quant_code(const q_args &a, uint64_t i)
{
    uint64_t k = map_index(a.m, i);
    float t = round_to(a.prec, __fdiv_rn(to_f32(a.x, a.xt, i), to_f32(a.scale, a.st, k)));
    float z = a.zp ? to_f32(a.zp, a.zt, k) : 0.0f;
    int64_t lo, hi;
    if (int_range_q(a.yt, &lo, &hi))
        return (uint64_t)txf::f64_to_int_rne_sat((double)t + (double)z, lo, hi);
    if (z != 0.0f) t = __fadd_rn(t, z);
    if (a.yt == TEEXEC_DTYPE_FLOAT4E2M1) return txf::e2m1_encode(t);
    return txf::fp8_encode(a.yt, t, a.sat);
}

__global__ void quantize_kernel(q_args a, void *y, int esz, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t c = quant_code(a, i); /* the low bits are the element */
        if (esz == 1) ((uint8_t *)y)[i] = (uint8_t)c;
        else if (esz == 2) ((uint16_t *)y)[i] = (uint16_t)c;
        else ((uint32_t *)y)[i] = (uint32_t)c;
    }
}

/* 4- and 2-bit outputs: one thread per byte, padding fields 0. */
__global__ void quantize_packed_kernel(q_args a, uint8_t *y, unsigned bits, uint64_t n,
                                       uint64_t nbytes)
{
    unsigned per = 8u / bits, mask = (1u << bits) - 1u;
    for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < nbytes;
         j += (uint64_t)gridDim.x * blockDim.x) {
        unsigned byte = 0;
        for (unsigned q = 0; q < per; q++) {
            uint64_t i = j * per + q;
            if (i < n) byte |= ((unsigned)quant_code(a, i) & mask) << (q * bits);
        }
        y[j] = (uint8_t)byte;
    }
}

__global__ void dequantize_kernel(q_args a, void *y, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t k = map_index(a.m, i);
        float v = to_f32(a.x, a.xt, i);
        if (a.zp) v = __fsub_rn(v, to_f32(a.zp, a.zt, k));
        from_f32(y, a.yt, i, __fmul_rn(v, to_f32(a.scale, a.st, k)));
    }
}

__global__ void trt_fp8_q_kernel(const void *x, int xt, const void *s, int st, uint8_t *q,
                                 uint64_t n)
{
    float sv = to_f32(s, st, 0);
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        q[i] = txf::fp8_encode(TEEXEC_DTYPE_FLOAT8E4M3FN, __fdiv_rn(to_f32(x, xt, i), sv), 1);
}

__global__ void trt_fp8_dq_kernel(const uint8_t *q, const void *s, int st, void *y, int yt,
                                  uint64_t n)
{
    float sv = to_f32(s, st, 0);
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        from_f32(y, yt, i, __fmul_rn(txf::fp8_decode(TEEXEC_DTYPE_FLOAT8E4M3FN, q[i]), sv));
}

/* kernels/cpu/qtensor.h tx_amax_step: NaN ignored. */
__device__ __forceinline__ float amax_step(float m, float v)
{
    float a = v < 0.0f ? -v : v;
    return a > m ? a : m;
}

/* 2^(127 - e), as quant_mxfp8.c (TE's exp2f_rcp). */
__device__ __forceinline__ float e8m0_multiplier(uint8_t e)
{
    if (e == 255) return __uint_as_float(0x7fc00000u);
    if (e == 254) return __uint_as_float(0x00400000u);
    return __uint_as_float((uint32_t)(254u - e) << 23);
}

/* One thread per 32-element block. */
__global__ void trt_mxfp8_q_kernel(const void *x, int xt, uint64_t M, uint64_t K, uint8_t *q,
                                   uint8_t *scale, uint64_t scols)
{
    const float rcp = 1.0f / 448.0f;
    uint64_t nb = K / 32, total = M * nb;
    for (uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; b < total;
         b += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t m = b / nb, j = b % nb, base = m * K + j * 32;
        float amax = 0.0f;
        for (int t = 0; t < 32; t++) amax = amax_step(amax, to_f32(x, xt, base + t));
        uint8_t e = txf::e8m0_encode(__fmul_rn(amax, rcp), 1, 0);
        float mult = e8m0_multiplier(e);
        scale[m * scols + j] = e;
        for (int t = 0; t < 32; t++)
            q[base + t] = txf::fp8_encode(TEEXEC_DTYPE_FLOAT8E4M3FN,
                                          __fmul_rn(to_f32(x, xt, base + t), mult), 1);
    }
}

__global__ void trt_mxfp8_dq_kernel(const uint8_t *q, const uint8_t *scale, uint64_t pitch,
                                    uint64_t K, void *y, int yt, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t m = i / K, k = i % K;
        from_f32(y, yt, i, __fmul_rn(txf::fp8_decode(TEEXEC_DTYPE_FLOAT8E4M3FN, q[i]),
                                     txf::e8m0_decode(scale[m * pitch + k / 32])));
    }
}

/* One thread per 16-element block: its E4M3 scale and 8 bytes of nibbles. */
__global__ void trt_fp4_q_kernel(const void *x, int xt, const void *g_p, int gt, uint64_t M,
                                 uint64_t K, uint8_t *q, uint8_t *scale)
{
    float g = to_f32(g_p, gt, 0);
    const float enc6 = __fmul_rn(__fdiv_rn(1.0f, g), 1.0f / 6.0f);
    uint64_t nb = K / 16, total = M * nb;
    for (uint64_t b = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; b < total;
         b += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t m = b / nb, j = b % nb, base = m * K + j * 16;
        float amax = 0.0f;
        for (int t = 0; t < 16; t++) amax = amax_step(amax, to_f32(x, xt, base + t));
        uint8_t sb = txf::fp8_encode(TEEXEC_DTYPE_FLOAT8E4M3FN, __fmul_rn(amax, enc6), 1);
        scale[m * nb + j] = sb;
        float mult = __fdiv_rn(1.0f, __fmul_rn(txf::fp8_decode(TEEXEC_DTYPE_FLOAT8E4M3FN, sb), g));
        if (!(mult <= FLT_MAX)) mult = FLT_MAX; /* also NaN: TE's fminf drops it */
        for (int t = 0; t < 16; t += 2) {
            unsigned lo = txf::e2m1_encode(__fmul_rn(to_f32(x, xt, base + t), mult));
            unsigned hi = txf::e2m1_encode(__fmul_rn(to_f32(x, xt, base + t + 1), mult));
            q[(base + t) / 2] = (uint8_t)((lo & 15u) | ((hi & 15u) << 4));
        }
    }
}

unsigned host_bits(teexec_dtype dt) { return teexec_dtype_bits(dt); }

bool quant_out_ok(teexec_dtype yt)
{
    switch (yt) {
    case TEEXEC_DTYPE_UINT8: case TEEXEC_DTYPE_INT8: case TEEXEC_DTYPE_UINT16:
    case TEEXEC_DTYPE_INT16: case TEEXEC_DTYPE_INT32: case TEEXEC_DTYPE_INT4:
    case TEEXEC_DTYPE_UINT4: case TEEXEC_DTYPE_INT2: case TEEXEC_DTYPE_UINT2:
    case TEEXEC_DTYPE_FLOAT8E4M3FN: case TEEXEC_DTYPE_FLOAT8E4M3FNUZ:
    case TEEXEC_DTYPE_FLOAT8E5M2: case TEEXEC_DTYPE_FLOAT8E5M2FNUZ:
    case TEEXEC_DTYPE_FLOAT4E2M1: return true;
    default: return false;
    }
}

bool float_out_ok(teexec_dtype yt)
{
    return yt == TEEXEC_DTYPE_FLOAT || yt == TEEXEC_DTYPE_FLOAT16 ||
           yt == TEEXEC_DTYPE_BFLOAT16 || yt == TEEXEC_DTYPE_DOUBLE;
}

} // namespace

extern "C" teexec_status *tx_cuda_qdq_quantize(const tx_cuda_qmap *m, const void *x, teexec_dtype xt,
                                           const void *scale, teexec_dtype st, const void *zp,
                                           teexec_dtype zt, int saturate,
                                           teexec_dtype precision, void *y, teexec_dtype yt,
                                           size_t n, void *stream)
{
    if (!quant_out_ok(yt)) return bad("quantize", "cannot quantize to this dtype");
    if (!n) return NULL;
    q_args a = {*m, x, scale, zp, (int)xt, (int)st, (int)zt, saturate != 0, (int)precision,
                (int)yt};
    cudaStream_t s = (cudaStream_t)stream;
    unsigned bits = host_bits(yt);
    if (bits < 8) {
        uint64_t nbytes = ((uint64_t)n * bits + 7) / 8;
        quantize_packed_kernel<<<grid_for(nbytes, 256), 256, 0, s>>>(a, (uint8_t *)y, bits,
                                                                     (uint64_t)n, nbytes);
    } else {
        quantize_kernel<<<grid_for(n, 256), 256, 0, s>>>(a, y, (int)(bits / 8), (uint64_t)n);
    }
    TX_CUDA_LAUNCHED("quantize");
    return NULL;
}

extern "C" teexec_status *tx_cuda_qdq_dequantize(const tx_cuda_qmap *m, const void *x,
                                             teexec_dtype xt, const void *scale, teexec_dtype st,
                                             const void *zp, teexec_dtype zt, void *y,
                                             teexec_dtype yt, size_t n, void *stream)
{
    if (!float_out_ok(yt)) return bad("dequantize", "the output must be a float");
    if (!n) return NULL;
    q_args a = {*m, x, scale, zp, (int)xt, (int)st, (int)zt, 1, 0, (int)yt};
    dequantize_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(a, y, (uint64_t)n);
    TX_CUDA_LAUNCHED("dequantize");
    return NULL;
}

extern "C" teexec_status *tx_cuda_qdq_trt_fp8_quantize(const void *x, teexec_dtype xt,
                                                   const void *scale_inv, teexec_dtype st,
                                                   uint8_t *q, size_t n, void *stream)
{
    if (!n) return NULL;
    trt_fp8_q_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(x, (int)xt, scale_inv,
                                                                         (int)st, q, (uint64_t)n);
    TX_CUDA_LAUNCHED("trt fp8 quantize");
    return NULL;
}

extern "C" teexec_status *tx_cuda_qdq_trt_fp8_dequantize(const uint8_t *q, const void *scale_inv,
                                                     teexec_dtype st, void *y, teexec_dtype yt,
                                                     size_t n, void *stream)
{
    if (!float_out_ok(yt)) return bad("trt fp8 dequantize", "the output must be a float");
    if (!n) return NULL;
    trt_fp8_dq_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(q, scale_inv, (int)st,
                                                                          y, (int)yt, (uint64_t)n);
    TX_CUDA_LAUNCHED("trt fp8 dequantize");
    return NULL;
}

extern "C" teexec_status *tx_cuda_qdq_trt_mxfp8_quantize(const void *x, teexec_dtype xt, uint64_t M,
                                                     uint64_t K, uint8_t *q, uint8_t *scale,
                                                     uint64_t srows, uint64_t scols,
                                                     void *stream)
{
    if (K % 32 || srows < M || scols < K / 32) return bad("trt mxfp8 quantize", "bad shapes");
    cudaStream_t s = (cudaStream_t)stream;
    if (srows * scols) TX_CUDA_TRY(cudaMemsetAsync(scale, 0, srows * scols, s), "trt mxfp8 quantize");
    uint64_t blocks = M * (K / 32);
    if (!blocks) return NULL;
    trt_mxfp8_q_kernel<<<grid_for(blocks, 128), 128, 0, s>>>(x, (int)xt, M, K, q, scale, scols);
    TX_CUDA_LAUNCHED("trt mxfp8 quantize");
    return NULL;
}

extern "C" teexec_status *tx_cuda_qdq_trt_mxfp8_dequantize(const uint8_t *q, const uint8_t *scale,
                                                       uint64_t pitch, uint64_t M, uint64_t K,
                                                       void *y, teexec_dtype yt, void *stream)
{
    if (!float_out_ok(yt)) return bad("trt mxfp8 dequantize", "the output must be a float");
    uint64_t n = M * K;
    if (!n) return NULL;
    trt_mxfp8_dq_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>(q, scale, pitch, K, y,
                                                                            (int)yt, n);
    TX_CUDA_LAUNCHED("trt mxfp8 dequantize");
    return NULL;
}

extern "C" teexec_status *tx_cuda_qdq_trt_fp4_quantize(const void *x, teexec_dtype xt,
                                                   const void *global, teexec_dtype gt,
                                                   uint64_t M, uint64_t K, uint8_t *q,
                                                   uint8_t *scale, void *stream)
{
    if (K % 16) return bad("trt fp4 quantize", "the last dim must be a multiple of 16");
    uint64_t blocks = M * (K / 16);
    if (!blocks) return NULL;
    trt_fp4_q_kernel<<<grid_for(blocks, 128), 128, 0, (cudaStream_t)stream>>>(
        x, (int)xt, global, (int)gt, M, K, q, scale);
    TX_CUDA_LAUNCHED("trt fp4 quantize");
    return NULL;
}
