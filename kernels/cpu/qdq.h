/*
 * qdq.h - the math of ONNX QuantizeLinear / DequantizeLinear (opsets
 * 10-25) and of the `trt` domain Q/DQ ops Transformer Engine and Model
 * Optimizer export (TRT_FP8*, TRT_MXFP8*, TRT_FP4DynamicQuantize).
 *
 * Scale granularity follows ONNX: a scale with one element is per-tensor,
 * a 1-D scale of length D[axis] is per-axis, a scale of the same rank as x
 * with dims[axis] = ceil(D[axis]/block_size) (other dims equal) is blocked.
 * Scales and zero points of any numeric dtype are read as floats (E8M0
 * scales decode to 2^(e-127)).
 *
 * Rounding (all in float32 unless said otherwise):
 *   Q:  t = fl32(x / scale) (rounded to `precision` when that is fp16/bf16);
 *       integer outputs: saturate(RNE(t) + zero_point); FP8 outputs:
 *       encode(t + zero_point) with `saturate`; FP4: RNE, saturating.
 *   DQ: y = fl32((float(x) - float(zero_point)) * scale), then rounded to
 *       the output dtype.
 *   TRT_FP8QuantizeLinear:   q = e4m3fn_satfinite(fl32(x / scale_inv))
 *   TRT_FP8DequantizeLinear: y = fl32(e4m3(q) * scale_inv)
 *   TRT_MXFP8DynamicQuantize: per 32 elements along the last dim, the CPU
 *       MXFP8 quantizer's rule (kernels/cpu/quant_mxfp8.c, te-ops.md 4.6):
 *       e = e8m0_up_sat(fl32(amax * fl32(1/448))); q = e4m3_sat(x * 2^(127-e)).
 *       Scales are written padded to [roundup(M,128), roundup(K/32,4)]
 *       (padding 0), M = product of the leading dims, as TE exports them.
 *   TRT_MXFP8DequantizeLinear: y = e4m3(q) * 2^(e-127); the scale may be
 *       TE's padded 2-D form (rows >= M, cols >= K/32, padding ignored) or
 *       the ONNX blocked form [..., K/32].
 *   TRT_FP4DynamicQuantize (global decode scale g, block 16 on the last
 *       dim): sb = e4m3_sat(fl32(amax_b * fl32(fl32(1/g) * fl32(1/6))));
 *       m = min(fl32(1 / fl32(float(sb) * g)), FLT_MAX);
 *       q = e2m1(fl32(x * m)). This is TE's NVFP4 rule (te-ops.md 4.7) with
 *       S_enc = fl32(1/g), S_dec = g; a downstream DQ(sb, g) -> DQ(q, .)
 *       reconstructs q * float(sb) * g.
 *
 * Tensors are host tensors (base/tensor.h); outputs are allocated by the
 * caller with the right dtype and shape. Thread-safe; allocates only
 * temporary buffers (freed before return) and the returned status.
 */
#ifndef TEEXEC_KERNELS_CPU_QDQ_H
#define TEEXEC_KERNELS_CPU_QDQ_H

#include "base/status.h"
#include "base/tensor.h"

/* QuantizeLinear. zero_point may be NULL. precision is UNDEFINED for "the
 * scale's type". y->dtype is the quantized type. */
teexec_status *tx_qdq_quantize(const tx_tensor *x, const tx_tensor *scale,
                               const tx_tensor *zero_point, int64_t axis, int64_t block_size,
                               int saturate, teexec_dtype precision,
                               tx_tensor *y) TX_NODISCARD;

/* DequantizeLinear. zero_point may be NULL; y->dtype is FLOAT, FLOAT16 or
 * BFLOAT16 (or any float type tx_convert writes). */
teexec_status *tx_qdq_dequantize(const tx_tensor *x, const tx_tensor *scale,
                                 const tx_tensor *zero_point, int64_t axis, int64_t block_size,
                                 tx_tensor *y) TX_NODISCARD;

/* TRT_FP8QuantizeLinear / TRT_FP8DequantizeLinear. x: float types; q:
 * UINT8 (or FLOAT8E4M3FN) bytes; scale_inv: a one-element tensor. */
teexec_status *tx_qdq_trt_fp8_quantize(const tx_tensor *x, const tx_tensor *scale_inv,
                                       tx_tensor *q) TX_NODISCARD;
teexec_status *tx_qdq_trt_fp8_dequantize(const tx_tensor *q, const tx_tensor *scale_inv,
                                         tx_tensor *y) TX_NODISCARD;

/* TE's padded MXFP8 scale shape for x: [roundup(M,128), roundup(K/32,4)].
 * Errors when the rank is 0 or K is not a multiple of block (32). */
teexec_status *tx_qdq_mxfp8_scale_shape(int32_t rank, const int64_t *dims, int64_t block,
                                        int64_t out_dims[2]) TX_NODISCARD;

/* TRT_MXFP8DynamicQuantize (axis must be the last, block 32). q: UINT8 or
 * FLOAT8E4M3FN, x's shape; scale: UINT8 or FLOAT8E8M0, the padded shape. */
teexec_status *tx_qdq_trt_mxfp8_quantize(const tx_tensor *x, tx_tensor *q,
                                         tx_tensor *scale) TX_NODISCARD;
teexec_status *tx_qdq_trt_mxfp8_dequantize(const tx_tensor *q, const tx_tensor *scale,
                                           tx_tensor *y) TX_NODISCARD;

/* TRT_FP4DynamicQuantize (last axis, block 16). q: FLOAT4E2M1 of x's
 * shape; scale: FLOAT8E4M3FN [..., K/16]. */
teexec_status *tx_qdq_trt_fp4_quantize(const tx_tensor *x, const tx_tensor *global_scale,
                                       tx_tensor *q, tx_tensor *scale) TX_NODISCARD;

#endif
