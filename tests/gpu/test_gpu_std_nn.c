/* GPU test: Conv, GatherND, RMSNormalization and Attention on the GPU
 * (exec/cuda/std_cuda_nn.c over kernels/cuda/std_conv.h, std_shape.h,
 * norm.h / std_norm.h, std_attn.h) against the CPU kernels and the CPU
 * backward rules, in FLOAT, BFLOAT16 and FLOAT16 (DOUBLE and integer forms
 * once): Conv in 1-D, 2-D and 3-D with pads, strides, dilations, groups,
 * auto_pad and with and without a bias; GatherND with batch dims and
 * negative indices (bit for bit, grads summed over repeated indices);
 * RMSNormalization over one and two axes, a scale of another dtype, a
 * broadcast scale; Attention rank 3 and 4, GQA, causal, bool and additive
 * masks (the additive one's grad), past caches with present outputs,
 * softcap, an explicit scale, the qk output. The runner is std_case.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/std_case.h"

#define F SC_F
#define F32 TEEXEC_DTYPE_FLOAT
#define F64 TEEXEC_DTYPE_DOUBLE
#define I32 TEEXEC_DTYPE_INT32
#define I64 TEEXEC_DTYPE_INT64
#define BOOL TEEXEC_DTYPE_BOOL

#define IDXR(r, bound, ...) {.dt = I64, .rank = r, .dims = {__VA_ARGS__}, .kind = IN_IDXR, .vals = {bound}}

static const tcase cases[] = {
    /* Conv */
    {"conv2d", "Conv", 11, 0, {{0}}, 3, {T(4, 2, 3, 7, 6), T(4, 4, 3, 3, 3), T(1, 4)}, 1, 0, 1e-5, 2e-2},
    {"conv2d_pads_strides", "Conv", 11, 2, {A_INTS("pads", 1, 0, 2, 1), A_INTS("strides", 2, 1)}, 2,
     {T(4, 2, 3, 7, 6), T(4, 5, 3, 3, 2)}, 1, 0, 1e-5, 2e-2},
    {"conv2d_dilation_group", "Conv", 11, 3,
     {A_INT("group", 2), A_INTS("dilations", 2, 1), A_INTS("pads", 2, 1, 2, 1)}, 3,
     {T(4, 2, 4, 8, 5), T(4, 6, 2, 3, 3), T(1, 6)}, 1, 0, 1e-5, 2e-2},
    {"conv2d_same_upper", "Conv", 11, 2, {A_STR("auto_pad", "SAME_UPPER"), A_INTS("strides", 2, 2)}, 2,
     {T(4, 1, 2, 7, 7), T(4, 3, 2, 4, 4)}, 1, 0, 1e-5, 2e-2},
    {"conv1d", "Conv", 11, 1, {A_INTS("pads", 1, 1)}, 3, {T(3, 2, 3, 9), T(3, 4, 3, 3), T(1, 4)}, 1, 0, 1e-5, 2e-2},
    {"conv3d", "Conv", 11, 0, {{0}}, 2, {T(5, 1, 2, 4, 4, 3), T(5, 2, 2, 2, 2, 2)}, 1, 0, 1e-5, 2e-2},
    {"conv_depthwise", "Conv", 11, 2, {A_INT("group", 3), A_INTS("pads", 1, 1, 1, 1)}, 2,
     {T(4, 2, 3, 5, 5), T(4, 3, 1, 3, 3)}, 1, 0, 1e-5, 2e-2},
    {"conv2d_f64", "Conv", 11, 0, {{0}}, 3,
     {TD(F64, IN_RAND, 4, 2, 3, 6, 6), TD(F64, IN_RAND, 4, 4, 3, 3, 3), TD(F64, IN_RAND, 1, 4)}, 1, ONCE, 1e-12, 0},
    /* GatherND: the gathered slices are copies (exact); repeated indices sum their grads */
    {"gather_nd", "GatherND", 13, 0, {{0}}, 2, {T(3, 4, 5, 3), IDXR(2, 4, 6, 2)}, 1, EXACT, 0, 0},
    {"gather_nd_full", "GatherND", 13, 0, {{0}}, 2, {T(2, 4, 5), IDXR(2, 4, 9, 2)}, 1, EXACT, 0, 0},
    {"gather_nd_batch", "GatherND", 13, 1, {A_INT("batch_dims", 1)}, 2,
     {T(3, 2, 5, 4), IDXR(3, 5, 2, 3, 1)}, 1, EXACT, 0, 0},
    {"gather_nd_i32", "GatherND", 13, 0, {{0}}, 2, {TD(I32, IN_IRAND, 2, 4, 5), IDXR(2, 4, 3, 1)}, 1, ONCE, 0, 0},
    {"gather_nd_bool", "GatherND", 13, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 2, 4, 5), IDXR(2, 4, 3, 2)}, 1, ONCE, 0, 0},
    /* RMSNormalization */
    {"rmsnorm", "RMSNormalization", 23, 1, {A_FLT("epsilon", 1e-6f)}, 2, {T(3, 2, 5, 32), T(1, 32)}, 1, 0, 1e-5, 2e-2},
    {"rmsnorm_axis1", "RMSNormalization", 23, 1, {A_INT("axis", 1)}, 2, {T(3, 3, 4, 8), T(2, 4, 8)}, 1, 0, 1e-5, 2e-2},
    {"rmsnorm_wide", "RMSNormalization", 23, 0, {{0}}, 2, {T(2, 4, 1024), T(1, 1024)}, 1, 0, 1e-5, 2e-2},
    {"rmsnorm_scale_f32", "RMSNormalization", 23, 0, {{0}}, 2,
     {T(2, 4, 24), TD(F32, IN_RAND, 1, 24)}, 1, 0, 1e-5, 2e-2},
    {"rmsnorm_bcast_scale", "RMSNormalization", 23, 1, {A_INT("axis", 1)}, 2,
     {T(3, 3, 4, 8), T(1, 8)}, 1, NO_BWD, 1e-5, 2e-2},
    {"rmsnorm_f64", "RMSNormalization", 23, 0, {{0}}, 2,
     {TD(F64, IN_RAND, 2, 6, 40), TD(F64, IN_RAND, 1, 40)}, 1, ONCE, 1e-12, 0},
    /* Attention */
    {"attention", "Attention", 23, 0, {{0}}, 3, {T(4, 2, 2, 5, 8), T(4, 2, 2, 6, 8), T(4, 2, 2, 6, 4)}, 1, 0, 2e-5, 2e-2},
    {"attention_gqa_causal", "Attention", 23, 1, {A_INT("is_causal", 1)}, 3,
     {T(4, 2, 4, 6, 8), T(4, 2, 2, 6, 8), T(4, 2, 2, 6, 8)}, 1, 0, 2e-5, 2e-2},
    {"attention_rank3", "Attention", 23, 2, {A_INT("q_num_heads", 4), A_INT("kv_num_heads", 2)}, 3,
     {T(3, 2, 5, 32), T(3, 2, 7, 16), T(3, 2, 7, 12)}, 1, 0, 2e-5, 2e-2},
    {"attention_bool_mask", "Attention", 23, 0, {{0}}, 4,
     {T(4, 2, 2, 5, 8), T(4, 2, 2, 6, 8), T(4, 2, 2, 6, 8), TD(BOOL, IN_BOOL, 2, 5, 6)}, 1, 0, 2e-5, 2e-2},
    {"attention_float_mask", "Attention", 23, 1, {A_FLT("scale", 0.3f)}, 4,
     {T(4, 2, 2, 5, 8), T(4, 2, 2, 6, 8), T(4, 2, 2, 6, 8), T(4, 2, 1, 5, 4)}, 1, 0, 2e-5, 2e-2},
    {"attention_past_present", "Attention", 23, 1, {A_INT("is_causal", 1)}, 6,
     {T(4, 1, 2, 3, 8), T(4, 1, 2, 3, 8), T(4, 1, 2, 3, 8), ABSENT, T(4, 1, 2, 4, 8), T(4, 1, 2, 4, 8)},
     3, 0, 2e-5, 2e-2},
    {"attention_softcap_qk", "Attention", 23, 1, {A_FLT("softcap", 2.0f)}, 3,
     {T(4, 2, 2, 5, 8), T(4, 2, 2, 6, 8), T(4, 2, 2, 6, 8)}, 4, 0, 2e-5, 2e-2},
    {"attention_f64", "Attention", 23, 1, {A_INT("is_causal", 1)}, 3,
     {TD(F64, IN_RAND, 4, 1, 2, 5, 8), TD(F64, IN_RAND, 4, 1, 2, 5, 8), TD(F64, IN_RAND, 4, 1, 2, 5, 8)},
     1, ONCE, 1e-12, 0},
};

int main(void)
{
    return sc_main("test_gpu_std_nn", cases, sizeof cases / sizeof cases[0], NULL, NULL);
}
