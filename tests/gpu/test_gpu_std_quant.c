/* GPU test: QuantizeLinear / DequantizeLinear and the `trt` domain Q/DQ ops
 * on the GPU (exec/cuda/std_cuda_quant.c over kernels/cuda/std_qdq.h)
 * against the CPU's kernels/cpu/qdq.c, byte for byte: per-tensor,
 * per-axis and blocked scales; INT8, UINT8, INT16, INT32, INT4, UINT4 with
 * zero points; FP8 E4M3FN / E5M2 / E4M3FNUZ with and without saturation
 * (inputs with NaN, +-Inf and out-of-range values); FP4 E2M1; the
 * `precision` rounding; E8M0 scales; the dequantized values in FLOAT,
 * BFLOAT16 and FLOAT16; TRT_FP8Quantize/DequantizeLinear,
 * TRT_MXFP8DynamicQuantize (TE's padded scales) / DequantizeLinear and
 * TRT_FP4DynamicQuantize (E4M3 block scales under a global scale). Scales
 * live on the device only. The runner is std_case.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/std_case.h"

#define F SC_F
#define F32 TEEXEC_DTYPE_FLOAT
#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F16 TEEXEC_DTYPE_FLOAT16
#define I8 TEEXEC_DTYPE_INT8
#define U8 TEEXEC_DTYPE_UINT8
#define I16 TEEXEC_DTYPE_INT16
#define I32 TEEXEC_DTYPE_INT32
#define I4 TEEXEC_DTYPE_INT4
#define U4 TEEXEC_DTYPE_UINT4
#define E4M3 TEEXEC_DTYPE_FLOAT8E4M3FN
#define E4M3Z TEEXEC_DTYPE_FLOAT8E4M3FNUZ
#define E5M2 TEEXEC_DTYPE_FLOAT8E5M2
#define E8M0 TEEXEC_DTYPE_FLOAT8E8M0
#define FP4 TEEXEC_DTYPE_FLOAT4E2M1

/* A scale tensor of positive values on the device only. */
#define SCALE(d, r, ...) {.dt = d, .rank = r, .dims = {__VA_ARGS__}, .kind = IN_POS}
#define ZP(d, r, ...) {.dt = d, .rank = r, .dims = {__VA_ARGS__}, .kind = IN_SMALL}
#define X(k, r, ...) {.dt = SC_F, .rank = r, .dims = {__VA_ARGS__}, .kind = k}

static const tcase cases[] = {
    /* QuantizeLinear to integers: per tensor, per axis, blocked */
    {"q_u8_tensor", "QuantizeLinear", 13, 0, {{0}}, 2, {X(IN_RAND, 2, 6, 40), SCALE(F32, 0, 0)}, 1, 0, 0, 0},
    {"q_i8_tensor_zp", "QuantizeLinear", 13, 0, {{0}}, 3,
     {X(IN_SPECIAL, 2, 6, 40), SCALE(F32, 0, 0), ZP(I8, 0, 0)}, 1, 0, 0, 0},
    {"q_i8_axis", "QuantizeLinear", 13, 1, {A_INT("axis", 0)}, 3,
     {X(IN_RAND, 2, 6, 40), SCALE(F32, 1, 6), ZP(I8, 1, 6)}, 1, 0, 0, 0},
    {"q_u8_axis_last", "QuantizeLinear", 13, 1, {A_INT("axis", -1)}, 3,
     {X(IN_RAND, 3, 2, 3, 8), SCALE(F32, 1, 8), ZP(U8, 1, 8)}, 1, 0, 0, 0},
    {"q_i16_blocked", "QuantizeLinear", 21, 2, {A_INT("axis", 1), A_INT("block_size", 16)}, 3,
     {X(IN_RAND, 2, 6, 40), SCALE(F32, 2, 6, 3), ZP(I16, 2, 6, 3)}, 1, 0, 0, 0},
    {"q_i32_scale_bf16", "QuantizeLinear", 21, 1, {A_INT("output_dtype", I32)}, 2,
     {X(IN_RAND, 2, 5, 9), SCALE(BF16, 0, 0)}, 1, 0, 0, 0},
    {"q_i4_blocked", "QuantizeLinear", 21, 2, {A_INT("axis", 1), A_INT("block_size", 8)}, 3,
     {X(IN_RAND, 2, 5, 33), SCALE(F32, 2, 5, 5), ZP(I4, 2, 5, 5)}, 1, 0, 0, 0},
    {"q_u4", "QuantizeLinear", 21, 1, {A_INT("output_dtype", U4)}, 2,
     {X(IN_RAND, 2, 5, 9), SCALE(F32, 0, 0)}, 1, 0, 0, 0},
    {"q_precision_f16", "QuantizeLinear", 23, 1, {A_INT("precision", F16)}, 3,
     {X(IN_RAND, 2, 6, 40), SCALE(F32, 1, 40), ZP(I8, 1, 40)}, 1, 0, 0, 0},
    /* QuantizeLinear to FP8 / FP4 */
    {"q_e4m3", "QuantizeLinear", 19, 1, {A_INT("output_dtype", E4M3)}, 2,
     {X(IN_SPECIAL, 2, 6, 40), SCALE(F32, 0, 0)}, 1, 0, 0, 0},
    {"q_e4m3_nosat", "QuantizeLinear", 21, 2, {A_INT("output_dtype", E4M3), A_INT("saturate", 0)}, 2,
     {X(IN_SPECIAL, 2, 6, 40), SCALE(F32, 1, 40)}, 1, 0, 0, 0},
    {"q_e5m2_axis", "QuantizeLinear", 21, 2, {A_INT("output_dtype", E5M2), A_INT("axis", 0)}, 2,
     {X(IN_SPECIAL, 2, 6, 40), SCALE(F32, 1, 6)}, 1, 0, 0, 0},
    {"q_e4m3fnuz_nosat", "QuantizeLinear", 21, 2, {A_INT("output_dtype", E4M3Z), A_INT("saturate", 0)}, 2,
     {X(IN_SPECIAL, 2, 6, 40), SCALE(F32, 0, 0)}, 1, 0, 0, 0},
    {"q_fp4_blocked", "QuantizeLinear", 23, 3,
     {A_INT("output_dtype", FP4), A_INT("axis", 1), A_INT("block_size", 16)}, 2,
     {X(IN_SPECIAL, 2, 4, 32), SCALE(E4M3, 2, 4, 2)}, 1, 0, 0, 0},
    /* DequantizeLinear back to floats (the output follows the scale's type) */
    {"dq_u8_tensor", "DequantizeLinear", 13, 0, {{0}}, 3,
     {TD(U8, IN_IRAND, 2, 6, 40), SCALE(F32, 0, 0), ZP(U8, 0, 0)}, 1, ONCE, 0, 0},
    {"dq_i8_axis", "DequantizeLinear", 13, 1, {A_INT("axis", 0)}, 3,
     {TD(I8, IN_IRAND, 2, 6, 40), SCALE(F32, 1, 6), ZP(I8, 1, 6)}, 1, ONCE, 0, 0},
    {"dq_i32_scale_f16", "DequantizeLinear", 19, 0, {{0}}, 2,
     {TD(I32, IN_IRAND, 2, 6, 40), SCALE(F16, 0, 0)}, 1, ONCE, 0, 0},
    {"dq_i4_blocked_bf16", "DequantizeLinear", 21, 2, {A_INT("axis", 1), A_INT("block_size", 8)}, 3,
     {TD(I4, IN_SMALL, 2, 5, 33), SCALE(BF16, 2, 5, 5), ZP(I4, 2, 5, 5)}, 1, ONCE, 0, 0},
    {"dq_e4m3_all_codes", "DequantizeLinear", 19, 0, {{0}}, 2,
     {TD(E4M3, IN_IRAND, 1, 256), SCALE(F32, 0, 0)}, 1, ONCE, 0, 0},
    {"dq_e5m2_axis_bf16", "DequantizeLinear", 19, 1, {A_INT("axis", 0)}, 2,
     {TD(E5M2, IN_IRAND, 2, 4, 64), SCALE(BF16, 1, 4)}, 1, ONCE, 0, 0},
    {"dq_fp4_e8m0", "DequantizeLinear", 23, 2, {A_INT("axis", 1), A_INT("block_size", 32)}, 2,
     {TD(FP4, IN_SMALL, 2, 3, 64), {.dt = E8M0, .rank = 2, .dims = {3, 2}, .kind = IN_POS}}, 1, ONCE, 0, 0},
    {"dq_output_dtype", "DequantizeLinear", 23, 1, {A_INT("output_dtype", BF16)}, 2,
     {TD(I8, IN_IRAND, 2, 6, 40), SCALE(F32, 0, 0)}, 1, ONCE, 0, 0},
    /* the trt domain */
    {"trt_fp8_q", "TRT_FP8QuantizeLinear", 1, 0, {{0}}, 2,
     {X(IN_SPECIAL, 2, 4, 48), SCALE(F32, 0, 0)}, 1, 0, 0, 0},
    {"trt_fp8_dq", "TRT_FP8DequantizeLinear", 1, 0, {{0}}, 2,
     {TD(U8, IN_IRAND, 2, 4, 64), SCALE(F32, 0, 0)}, 1, ONCE, 0, 0},
    {"trt_fp8_dq_bf16", "TRT_FP8DequantizeLinear", 1, 1, {A_INT("output_dtype", BF16)}, 2,
     {TD(U8, IN_IRAND, 2, 4, 64), SCALE(F32, 0, 0)}, 1, ONCE, 0, 0},
    {"trt_mxfp8_q", "TRT_MXFP8DynamicQuantize", 1, 0, {{0}}, 1, {X(IN_RAND, 3, 2, 5, 64)}, 2, 0, 0, 0},
    {"trt_mxfp8_q_special", "TRT_MXFP8DynamicQuantize", 1, 0, {{0}}, 1, {X(IN_SPECIAL, 2, 3, 32)}, 2, 0, 0, 0},
    {"trt_mxfp8_dq_padded", "TRT_MXFP8DequantizeLinear", 1, 0, {{0}}, 2,
     {TD(U8, IN_IRAND, 2, 5, 64), {.dt = U8, .rank = 2, .dims = {128, 4}, .kind = IN_IRAND}}, 1, ONCE, 0, 0},
    {"trt_mxfp8_dq_blocked", "TRT_MXFP8DequantizeLinear", 1, 1, {A_INT("output_dtype", F16)}, 2,
     {TD(U8, IN_IRAND, 2, 5, 64), {.dt = U8, .rank = 2, .dims = {5, 2}, .kind = IN_IRAND}}, 1, ONCE, 0, 0},
    {"trt_fp4_q", "TRT_FP4DynamicQuantize", 1, 0, {{0}}, 2,
     {X(IN_RAND, 3, 2, 4, 32), SCALE(F32, 0, 0)}, 2, 0, 0, 0},
    {"trt_fp4_q_special", "TRT_FP4DynamicQuantize", 1, 0, {{0}}, 2,
     {X(IN_SPECIAL, 2, 2, 48), SCALE(F32, 0, 0)}, 2, 0, 0, 0},
};

int main(void)
{
    return sc_main("test_gpu_std_quant", cases, sizeof cases / sizeof cases[0], NULL, NULL);
}
