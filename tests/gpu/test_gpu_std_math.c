/* GPU test: the elementwise standard ONNX ops on the GPU (exec/cuda/
 * std_cuda_math.c over kernels/cuda/std_unary.h, std_binary.h) against the
 * CPU kernels and, where the CPU trainer has a rule, its FP64 backward:
 * unary math in FLOAT, BFLOAT16 and FLOAT16 (forward and backward), on
 * random inputs and on specials (NaN, +-Inf, -0, halves, overflow);
 * integer and DOUBLE forms once each; Not, IsNaN, IsInf; Clip in both
 * forms with host and device bounds; comparisons and logic with
 * broadcasting; integer arithmetic (wrapping, x / 0, negative powers);
 * Pow with mixed dtypes; Min / Max / Sum / Mean over several broadcast
 * inputs. The runner is std_case.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/std_case.h"

#define F SC_F
#define F32 TEEXEC_DTYPE_FLOAT
#define F64 TEEXEC_DTYPE_DOUBLE
#define I8 TEEXEC_DTYPE_INT8
#define I16 TEEXEC_DTYPE_INT16
#define I32 TEEXEC_DTYPE_INT32
#define I64 TEEXEC_DTYPE_INT64
#define U8 TEEXEC_DTYPE_UINT8
#define U16 TEEXEC_DTYPE_UINT16
#define U64 TEEXEC_DTYPE_UINT64
#define BOOL TEEXEC_DTYPE_BOOL

#define U(nm, op, in_kind, flags, a32, a16) \
    {nm, op, 13, 0, {{0}}, 1, {TK(in_kind, 3, 2, 5, 7)}, 1, flags, a32, a16}

static const tcase cases[] = {
    /* unary math, float passes; backward where the CPU trainer has a rule */
    U("abs", "Abs", IN_SPECIAL, EXACT, 0, 0),
    U("sign", "Sign", IN_SPECIAL, EXACT, 0, 0),
    U("relu", "Relu", IN_SPECIAL, EXACT, 0, 0),
    U("relu_rand", "Relu", IN_RAND, EXACT, 0, 0),
    U("neg", "Neg", IN_SPECIAL, EXACT, 0, 0),
    U("sqrt", "Sqrt", IN_POS, 0, 1e-6, 1e-3),
    U("reciprocal", "Reciprocal", IN_POS, 0, 1e-6, 1e-3),
    U("exp", "Exp", IN_RAND, 0, 1e-6, 1e-3),
    U("log", "Log", IN_POS, 0, 1e-6, 1e-3),
    U("erf", "Erf", IN_RAND, 0, 1e-6, 1e-3),
    U("tanh", "Tanh", IN_RAND, 0, 1e-6, 1e-3),
    U("sigmoid", "Sigmoid", IN_RAND, 0, 1e-6, 1e-3),
    U("softplus", "Softplus", IN_RAND, 0, 1e-6, 1e-3),
    U("floor", "Floor", IN_SPECIAL, EXACT, 0, 0),
    U("ceil", "Ceil", IN_SPECIAL, EXACT, 0, 0),
    {"round", "Round", 11, 0, {{0}}, 1, {TK(IN_SPECIAL, 2, 4, 9)}, 1, EXACT, 0, 0},
    {"leakyrelu", "LeakyRelu", 16, 1, {A_FLT("alpha", 0.1f)}, 1, {T(3, 2, 5, 7)}, 1, EXACT, 0, 0},
    {"leakyrelu_default", "LeakyRelu", 16, 0, {{0}}, 1, {T(2, 5, 7)}, 1, EXACT, 0, 0},
    {"elu", "Elu", 6, 1, {A_FLT("alpha", 0.5f)}, 1, {T(3, 2, 5, 7)}, 1, 0, 1e-6, 1e-3},
    {"gelu", "Gelu", 20, 0, {{0}}, 1, {T(3, 2, 5, 70)}, 1, 0, 1e-6, 1e-3},
    {"gelu_tanh", "Gelu", 20, 1, {A_STR("approximate", "tanh")}, 1, {T(3, 2, 5, 70)}, 1, 0, 1e-6, 1e-3},
    {"gelu_special", "Gelu", 20, 0, {{0}}, 1, {TK(IN_SPECIAL, 1, 17)}, 1, 0, 1e-6, 1e-3},
    {"sin", "Sin", 7, 0, {{0}}, 1, {T(2, 5, 7)}, 1, 0, 1e-6, 1e-3},
    {"cos", "Cos", 7, 0, {{0}}, 1, {T(2, 5, 7)}, 1, 0, 1e-6, 1e-3},
    /* integer and DOUBLE forms */
    {"abs_i32", "Abs", 13, 0, {{0}}, 1, {TD(I32, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    {"abs_i64", "Abs", 13, 0, {{0}}, 1, {TD(I64, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    {"abs_u8", "Abs", 13, 0, {{0}}, 1, {TD(U8, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    {"neg_i8", "Neg", 13, 0, {{0}}, 1, {TD(I8, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    {"neg_i64", "Neg", 13, 0, {{0}}, 1, {TD(I64, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    {"sign_i16", "Sign", 13, 0, {{0}}, 1, {TD(I16, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    {"sign_u64", "Sign", 13, 0, {{0}}, 1, {TD(U64, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    {"relu_i32", "Relu", 14, 0, {{0}}, 1, {TD(I32, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    {"exp_f64", "Exp", 13, 0, {{0}}, 1, {TD(F64, IN_RAND, 2, 5, 7)}, 1, ONCE, 1e-12, 0},
    {"tanh_f64", "Tanh", 13, 0, {{0}}, 1, {TD(F64, IN_RAND, 2, 5, 7)}, 1, ONCE, 1e-12, 0},
    {"gelu_f64", "Gelu", 20, 0, {{0}}, 1, {TD(F64, IN_RAND, 2, 5, 7)}, 1, ONCE, 1e-12, 0},
    {"round_f64", "Round", 11, 0, {{0}}, 1, {TD(F64, IN_SPECIAL, 1, 24)}, 1, ONCE | EXACT, 0, 0},
    {"sqrt_f64", "Sqrt", 13, 0, {{0}}, 1, {TD(F64, IN_POS, 1, 24)}, 1, ONCE, 1e-12, 0},
    /* Not, IsNaN, IsInf */
    {"not", "Not", 1, 0, {{0}}, 1, {TD(BOOL, IN_BOOL, 2, 5, 7)}, 1, ONCE, 0, 0},
    {"isnan", "IsNaN", 13, 0, {{0}}, 1, {TK(IN_SPECIAL, 2, 4, 9)}, 1, 0, 0, 0},
    {"isinf", "IsInf", 10, 0, {{0}}, 1, {TK(IN_SPECIAL, 2, 4, 9)}, 1, 0, 0, 0},
    {"isinf_pos", "IsInf", 10, 1, {A_INT("detect_negative", 0)}, 1, {TK(IN_SPECIAL, 2, 4, 9)}, 1, 0, 0, 0},
    {"isinf_neg", "IsInf", 10, 1, {A_INT("detect_positive", 0)}, 1, {TK(IN_SPECIAL, 2, 4, 9)}, 1, 0, 0, 0},
    {"isnan_f64", "IsNaN", 13, 0, {{0}}, 1, {TD(F64, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    /* Clip: bounds known, on the device only, one bound, crossed bounds,
     * the attribute form, integers */
    {"clip_host", "Clip", 13, 0, {{0}}, 3, {T(2, 5, 7), SCALAR(F, -0.5), SCALAR(F, 1.25)}, 1, EXACT, 0, 0},
    {"clip_device", "Clip", 13, 0, {{0}}, 3, {T(2, 5, 7), DSCALAR(F, -1), DSCALAR(F, 0.75)}, 1, EXACT, 0, 0},
    {"clip_max_only", "Clip", 13, 0, {{0}}, 3, {TK(IN_SPECIAL, 1, 20), ABSENT, DSCALAR(F, 1)}, 1, EXACT, 0, 0},
    {"clip_crossed", "Clip", 13, 0, {{0}}, 3, {T(2, 5, 7), SCALAR(F, 1), SCALAR(F, -1)}, 1, EXACT, 0, 0},
    {"clip_v6", "Clip", 6, 2, {A_FLT("min", -0.3f), A_FLT("max", 0.7f)}, 1, {T(2, 5, 7)}, 1, EXACT, 0, 0},
    {"clip_i32", "Clip", 13, 0, {{0}}, 3,
     {TD(I32, IN_IRAND, 2, 5, 7), DSCALAR(I32, -100), SCALAR(I32, 250)}, 1, ONCE, 0, 0},
    {"clip_u8", "Clip", 13, 0, {{0}}, 3,
     {TD(U8, IN_IRAND, 2, 5, 7), SCALAR(U8, 20), ABSENT}, 1, ONCE, 0, 0},
    /* comparisons: small integers give ties; broadcasting */
    {"equal", "Equal", 13, 0, {{0}}, 2, {TK(IN_SMALL, 3, 2, 3, 4), TK(IN_SMALL, 2, 3, 1)}, 1, 0, 0, 0},
    {"less", "Less", 13, 0, {{0}}, 2, {TK(IN_SMALL, 3, 2, 3, 4), TK(IN_SMALL, 1, 4)}, 1, 0, 0, 0},
    {"lessorequal", "LessOrEqual", 16, 0, {{0}}, 2, {TK(IN_SMALL, 3, 2, 3, 4), TK(IN_SMALL, 0, 0)}, 1, 0, 0, 0},
    {"greater", "Greater", 13, 0, {{0}}, 2, {TK(IN_SMALL, 2, 3, 1), TK(IN_SMALL, 3, 2, 1, 4)}, 1, 0, 0, 0},
    {"greaterorequal", "GreaterOrEqual", 16, 0, {{0}}, 2, {TK(IN_SMALL, 2, 3, 4), TK(IN_SMALL, 2, 3, 4)}, 1, 0, 0, 0},
    {"equal_special", "Equal", 13, 0, {{0}}, 2, {TK(IN_SPECIAL, 1, 17), TK(IN_SPECIAL, 1, 17)}, 1, 0, 0, 0},
    {"less_nan", "Less", 13, 0, {{0}}, 2, {TK(IN_SPECIAL, 1, 17), TK(IN_SMALL, 1, 1)}, 1, 0, 0, 0},
    {"equal_i64", "Equal", 13, 0, {{0}}, 2, {TD(I64, IN_SMALL, 2, 4, 5), TD(I64, IN_SMALL, 1, 5)}, 1, ONCE, 0, 0},
    {"equal_bool", "Equal", 13, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 2, 4, 5), TD(BOOL, IN_BOOL, 1, 5)}, 1, ONCE, 0, 0},
    {"less_u8", "Less", 13, 0, {{0}}, 2, {TD(U8, IN_IRAND, 2, 4, 5), TD(U8, IN_IRAND, 2, 4, 1)}, 1, ONCE, 0, 0},
    {"greater_f64", "Greater", 13, 0, {{0}}, 2, {TD(F64, IN_SMALL, 2, 4, 5), TD(F64, IN_SMALL, 0, 0)}, 1, ONCE, 0, 0},
    {"and", "And", 7, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 3, 2, 3, 4), TD(BOOL, IN_BOOL, 1, 4)}, 1, ONCE, 0, 0},
    {"or", "Or", 7, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 2, 3, 1), TD(BOOL, IN_BOOL, 2, 1, 4)}, 1, ONCE, 0, 0},
    {"xor", "Xor", 7, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 2, 3, 4), TD(BOOL, IN_BOOL, 2, 3, 4)}, 1, ONCE, 0, 0},
    /* integer and DOUBLE arithmetic (no grads), Pow's mixed dtypes */
    {"add_i32_wrap", "Add", 14, 0, {{0}}, 2, {TD(I32, IN_SPECIAL, 2, 4, 6), TD(I32, IN_SPECIAL, 1, 6)}, 1, ONCE, 0, 0},
    {"sub_u8", "Sub", 14, 0, {{0}}, 2, {TD(U8, IN_IRAND, 2, 4, 6), TD(U8, IN_IRAND, 2, 4, 6)}, 1, ONCE, 0, 0},
    {"mul_i64", "Mul", 14, 0, {{0}}, 2, {TD(I64, IN_SPECIAL, 2, 4, 6), TD(I64, IN_SMALL, 2, 1, 6)}, 1, ONCE, 0, 0},
    {"div_i32", "Div", 14, 0, {{0}}, 2, {TD(I32, IN_IRAND, 2, 4, 6), TD(I32, IN_SMALL, 2, 4, 6)}, 1, ONCE, 0, 0},
    {"div_i64_edges", "Div", 14, 0, {{0}}, 2, {TD(I64, IN_SPECIAL, 1, 6), TD(I64, IN_SPECIAL, 2, 6, 1)}, 1, ONCE, 0, 0},
    {"div_u16", "Div", 14, 0, {{0}}, 2, {TD(U16, IN_IRAND, 2, 4, 6), TD(U16, IN_SMALL, 1, 6)}, 1, ONCE, 0, 0},
    {"pow_i32", "Pow", 15, 0, {{0}}, 2, {TD(I32, IN_SMALL, 2, 4, 6), TD(I32, IN_SMALL, 2, 4, 6)}, 1, ONCE, 0, 0},
    {"pow_i32_f32", "Pow", 15, 0, {{0}}, 2, {TD(I32, IN_SMALL, 2, 4, 6), TD(F32, IN_RAND, 1, 6)}, 1, ONCE, 0, 0},
    {"add_f64", "Add", 14, 0, {{0}}, 2, {TD(F64, IN_RAND, 2, 4, 6), TD(F64, IN_RAND, 1, 6)}, 1, ONCE, 1e-15, 0},
    {"div_f64", "Div", 14, 0, {{0}}, 2, {TD(F64, IN_RAND, 2, 4, 6), TD(F64, IN_POS, 2, 4, 1)}, 1, ONCE, 1e-15, 0},
    {"pow_f64", "Pow", 15, 0, {{0}}, 2, {TD(F64, IN_POS, 2, 4, 6), TD(F64, IN_RAND, 1, 6)}, 1, ONCE, 1e-15, 0},
    /* a float base with an integer exponent: forward, and the base's grad */
    {"pow_int_exponent", "Pow", 15, 0, {{0}}, 2, {T(2, 4, 6), TD(I64, IN_SMALL, 1, 6)}, 1, 0, 1e-5, 1e-2},
    /* Min / Max / Sum / Mean: three broadcast inputs, NaN, one input */
    {"max3", "Max", 13, 0, {{0}}, 3, {T(3, 2, 3, 4), T(2, 3, 1), T(1, 4)}, 1, EXACT, 0, 0},
    {"min3", "Min", 13, 0, {{0}}, 3, {T(3, 2, 3, 4), T(2, 3, 1), T(1, 4)}, 1, EXACT, 0, 0},
    {"sum3", "Sum", 13, 0, {{0}}, 3, {T(3, 2, 3, 4), T(2, 3, 1), T(1, 4)}, 1, 0, 1e-6, 1e-2},
    {"mean3", "Mean", 13, 0, {{0}}, 3, {T(3, 2, 3, 4), T(2, 3, 1), T(1, 4)}, 1, 0, 1e-6, 1e-2},
    {"max_nan", "Max", 13, 0, {{0}}, 2, {TK(IN_SPECIAL, 1, 17), TK(IN_SMALL, 1, 17)}, 1, EXACT, 0, 0},
    {"min_nan", "Min", 13, 0, {{0}}, 2, {TK(IN_SMALL, 1, 17), TK(IN_SPECIAL, 1, 17)}, 1, EXACT, 0, 0},
    {"sum1", "Sum", 13, 0, {{0}}, 1, {T(2, 3, 4)}, 1, EXACT, 0, 0},
    /* ties: the grad goes where the CPU rule sends it */
    {"max_ties", "Max", 13, 0, {{0}}, 3, {TK(IN_SMALL, 2, 3, 4), TK(IN_SMALL, 2, 3, 4), TK(IN_SMALL, 1, 4)}, 1, EXACT, 0, 0},
    {"min_ties", "Min", 13, 0, {{0}}, 2, {TK(IN_SMALL, 2, 3, 4), TK(IN_SMALL, 2, 3, 1)}, 1, EXACT, 0, 0},
    {"sum_i64", "Sum", 13, 0, {{0}}, 3,
     {TD(I64, IN_SPECIAL, 1, 8), TD(I64, IN_IRAND, 2, 2, 8), TD(I64, IN_IRAND, 0, 0)}, 1, ONCE, 0, 0},
    {"min_u16", "Min", 13, 0, {{0}}, 2, {TD(U16, IN_IRAND, 2, 3, 4), TD(U16, IN_IRAND, 1, 4)}, 1, ONCE, 0, 0},
    {"max_i8", "Max", 13, 0, {{0}}, 2, {TD(I8, IN_SPECIAL, 1, 8), TD(I8, IN_IRAND, 1, 8)}, 1, ONCE, 0, 0},
    {"mean_f64", "Mean", 13, 0, {{0}}, 2, {TD(F64, IN_RAND, 2, 3, 4), TD(F64, IN_RAND, 1, 4)}, 1, ONCE, 1e-15, 0},
};

int main(void)
{
    return sc_main("test_gpu_std_math", cases, sizeof cases / sizeof cases[0], NULL, NULL);
}
