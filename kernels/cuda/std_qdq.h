/*
 * std_qdq.h - ONNX QuantizeLinear / DequantizeLinear and the `trt` domain
 * Q/DQ ops of Transformer Engine exports on the GPU, byte for byte as the
 * CPU's kernels/cpu/qdq.c (its header states the rules: per-tensor,
 * per-axis and blocked scales; integer, FP8, FP4 and 4-bit outputs; the
 * `precision` rounding of x / scale; TRT_FP8*, TRT_MXFP8* with TE's padded
 * E8M0 scales, TRT_FP4DynamicQuantize with E4M3 block scales under a
 * global scale). Scales and zero points of any dtype are read as floats
 * with Cast's rules (std_convert.cuh), on the device: nothing is copied to
 * the host, so they may be computed by the graph.
 *
 * Device pointers owned by the caller; asynchronous on `stream`.
 * Statuses owned by the caller. Stateless: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_STD_QDQ_H
#define TEEXEC_KERNELS_CUDA_STD_QDQ_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element i's scale index: mode 0 per-tensor, 1 per-axis (a = (i / inner)
 * % d), 2 blocked ((outer * s + a / block) * inner + i % inner). */
typedef struct tx_cuda_qmap {
    int mode;
    uint64_t inner, d, s, block;
} tx_cuda_qmap;

/* QuantizeLinear: y (integer incl. 4-/2-bit, FP8, FP4) from x. zp may be
 * NULL. precision: the dtype x / scale is rounded to (FLOAT16, BFLOAT16,
 * or anything else for float32). */
teexec_status *tx_cuda_qdq_quantize(const tx_cuda_qmap *m, const void *x, teexec_dtype xt,
                                const void *scale, teexec_dtype st, const void *zp,
                                teexec_dtype zt, int saturate, teexec_dtype precision, void *y,
                                teexec_dtype yt, size_t n, void *stream);

/* DequantizeLinear: y (a float type) = (x - zp) * scale. */
teexec_status *tx_cuda_qdq_dequantize(const tx_cuda_qmap *m, const void *x, teexec_dtype xt,
                                  const void *scale, teexec_dtype st, const void *zp,
                                  teexec_dtype zt, void *y, teexec_dtype yt, size_t n,
                                  void *stream);

/* TRT_FP8QuantizeLinear: q = e4m3fn_sat(x / scale_inv[0]). */
teexec_status *tx_cuda_qdq_trt_fp8_quantize(const void *x, teexec_dtype xt, const void *scale_inv,
                                        teexec_dtype st, uint8_t *q, size_t n, void *stream);
/* TRT_FP8DequantizeLinear: y = e4m3(q) * scale_inv[0]. */
teexec_status *tx_cuda_qdq_trt_fp8_dequantize(const uint8_t *q, const void *scale_inv,
                                          teexec_dtype st, void *y, teexec_dtype yt, size_t n,
                                          void *stream);

/* TRT_MXFP8DynamicQuantize over x [M, K] (K % 32 == 0): q [M, K]; scale
 * [srows, scols] (TE's padding, zeros). */
teexec_status *tx_cuda_qdq_trt_mxfp8_quantize(const void *x, teexec_dtype xt, uint64_t M, uint64_t K,
                                          uint8_t *q, uint8_t *scale, uint64_t srows,
                                          uint64_t scols, void *stream);
/* TRT_MXFP8DequantizeLinear: scale row pitch `pitch` (E8M0 per 32). */
teexec_status *tx_cuda_qdq_trt_mxfp8_dequantize(const uint8_t *q, const uint8_t *scale,
                                            uint64_t pitch, uint64_t M, uint64_t K, void *y,
                                            teexec_dtype yt, void *stream);

/* TRT_FP4DynamicQuantize over x [M, K] (K % 16 == 0): q FP4 [M, K] packed,
 * scale E4M3 [M, K / 16]; global decode scale g = global[0] (any dtype). */
teexec_status *tx_cuda_qdq_trt_fp4_quantize(const void *x, teexec_dtype xt, const void *global,
                                        teexec_dtype gt, uint64_t M, uint64_t K, uint8_t *q,
                                        uint8_t *scale, void *stream);

#ifdef __cplusplus
}
#endif

#endif
