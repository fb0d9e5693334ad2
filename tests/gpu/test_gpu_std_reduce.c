/* GPU test: the standard ONNX ops that reduce or select along axes on the
 * GPU (exec/cuda/std_cuda_reduce.c over kernels/cuda/std_reduce.h,
 * std_norm.h) against the CPU kernels, and ReduceSum / ReduceMean against
 * the CPU backward rules: every reduction over one, several and all axes,
 * keepdims on and off, axes as attribute and as input, empty axes (NaN /
 * identity results), the thread-per-output and block-per-output paths,
 * NaN; ArgMax / ArgMin with ties (first and last index) and NaN; TopK
 * largest and smallest, inner strides, ties, NaN, whole-row sorts, rows
 * longer than a tile; CumSum exclusive / reverse; Softmax / LogSoftmax in
 * DOUBLE; integer, bool and DOUBLE forms once each. FLOAT, BFLOAT16 and
 * FLOAT16 otherwise. The runner is std_case.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/std_case.h"

#define F SC_F
#define F64 TEEXEC_DTYPE_DOUBLE
#define I8 TEEXEC_DTYPE_INT8
#define I32 TEEXEC_DTYPE_INT32
#define I64 TEEXEC_DTYPE_INT64
#define U8 TEEXEC_DTYPE_UINT8
#define BOOL TEEXEC_DTYPE_BOOL

static const tcase cases[] = {
    /* ReduceSum (axes as input from opset 13), ReduceMean (attribute, then
     * input at 18); backward for both */
    {"reduce_sum_axis1", "ReduceSum", 13, 0, {{0}}, 2, {T(3, 2, 5, 7), INTS(1)}, 1, TWICE, 1e-6, 1e-2},
    {"reduce_sum_neg_axes", "ReduceSum", 13, 1, {A_INT("keepdims", 0)}, 2,
     {T(4, 2, 3, 5, 4), INTS(-1, 1)}, 1, 0, 1e-6, 1e-2},
    {"reduce_sum_all", "ReduceSum", 13, 0, {{0}}, 1, {T(3, 2, 5, 7)}, 1, 0, 1e-5, 5e-2},
    {"reduce_sum_noop", "ReduceSum", 13, 1, {A_INT("noop_with_empty_axes", 1)}, 1,
     {T(2, 5, 7)}, 1, EXACT, 0, 0},
    {"reduce_sum_v11", "ReduceSum", 11, 1, {A_INTS("axes", 0, 2)}, 1, {T(3, 4, 3, 6)}, 1, 0, 1e-6, 1e-2},
    {"reduce_mean_v13", "ReduceMean", 13, 2, {A_INTS("axes", 0, 2), A_INT("keepdims", 0)}, 1,
     {T(3, 4, 3, 6)}, 1, 0, 1e-6, 1e-2},
    {"reduce_mean_v18", "ReduceMean", 18, 0, {{0}}, 2, {T(3, 4, 3, 6), INTS(-1)}, 1, 0, 1e-6, 1e-2},
    {"reduce_mean_long", "ReduceMean", 18, 0, {{0}}, 2, {T(3, 2, 4, 1000), INTS(-1)}, 1, TWICE, 1e-6, 1e-2},
    {"reduce_sum_long_middle", "ReduceSum", 13, 0, {{0}}, 2, {T(3, 3, 700, 2), INTS(1)}, 1, 0, 1e-5, 5e-2},
    {"reduce_max", "ReduceMax", 13, 1, {A_INTS("axes", 1)}, 1, {T(3, 2, 5, 7)}, 1, EXACT, 0, 0},
    {"reduce_min_all", "ReduceMin", 13, 1, {A_INT("keepdims", 0)}, 1, {T(3, 2, 5, 7)}, 1, EXACT, 0, 0},
    {"reduce_max_nan", "ReduceMax", 13, 1, {A_INTS("axes", 1)}, 1, {TK(IN_SPECIAL, 2, 3, 17)}, 1, EXACT, 0, 0},
    {"reduce_min_long", "ReduceMin", 18, 0, {{0}}, 2, {T(2, 3, 900), INTS(1)}, 1, EXACT, 0, 0},
    {"reduce_prod", "ReduceProd", 13, 1, {A_INTS("axes", 2)}, 1, {TP(3, 2, 5, 7)}, 1, 0, 1e-6, 1e-2},
    /* ties (the grad's split) and zeros (the product of the others) */
    {"reduce_max_ties", "ReduceMax", 13, 1, {A_INTS("axes", 1)}, 1, {TK(IN_SMALL, 3, 2, 9, 5)}, 1, EXACT, 0, 0},
    {"reduce_min_ties_all", "ReduceMin", 13, 0, {{0}}, 1, {TK(IN_SMALL, 2, 6, 5)}, 1, EXACT, 0, 0},
    {"reduce_prod_zeros", "ReduceProd", 13, 1, {A_INTS("axes", 1)}, 1, {TK(IN_SMALL, 3, 2, 6, 5)}, 1, 0, 1e-6, 1e-2},
    /* empty reductions: the identity, or NaN for Mean */
    {"reduce_max_empty", "ReduceMax", 13, 1, {A_INTS("axes", 1)}, 1, {T(3, 2, 0, 3)}, 1, EXACT, 0, 0},
    {"reduce_prod_empty", "ReduceProd", 13, 1, {A_INTS("axes", 1)}, 1, {T(3, 2, 0, 3)}, 1, EXACT, 0, 0},
    {"reduce_mean_empty", "ReduceMean", 13, 1, {A_INTS("axes", 1)}, 1, {T(3, 2, 0, 3)}, 1, EXACT | NO_BWD, 0, 0},
    /* integer, bool, DOUBLE */
    {"reduce_sum_i32_wrap", "ReduceSum", 13, 0, {{0}}, 2, {TD(I32, IN_SPECIAL, 2, 4, 6), INTS(0)}, 1, ONCE, 0, 0},
    {"reduce_mean_i64", "ReduceMean", 13, 1, {A_INTS("axes", 1)}, 1, {TD(I64, IN_IRAND, 2, 4, 7)}, 1, ONCE, 0, 0},
    {"reduce_prod_i64", "ReduceProd", 13, 1, {A_INTS("axes", 1)}, 1, {TD(I64, IN_SMALL, 2, 4, 7)}, 1, ONCE, 0, 0},
    {"reduce_max_i8", "ReduceMax", 13, 1, {A_INTS("axes", 0)}, 1, {TD(I8, IN_SPECIAL, 2, 8, 3)}, 1, ONCE, 0, 0},
    {"reduce_min_u8", "ReduceMin", 13, 1, {A_INTS("axes", 1)}, 1, {TD(U8, IN_IRAND, 2, 4, 7)}, 1, ONCE, 0, 0},
    {"reduce_min_u8_empty", "ReduceMin", 13, 1, {A_INTS("axes", 1)}, 1, {TD(U8, IN_IRAND, 2, 4, 0)}, 1, ONCE, 0, 0},
    {"reduce_max_bool", "ReduceMax", 18, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 2, 4, 7), INTS(1)}, 1, ONCE, 0, 0},
    {"reduce_min_bool", "ReduceMin", 18, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 2, 4, 7), INTS(0)}, 1, ONCE, 0, 0},
    {"reduce_sum_f64", "ReduceSum", 13, 0, {{0}}, 2, {TD(F64, IN_RAND, 2, 4, 700), INTS(1)}, 1, ONCE, 1e-12, 0},
    /* ArgMax / ArgMin: ties (small integers), last index, NaN, the block path */
    {"argmax_axis1", "ArgMax", 13, 1, {A_INT("axis", 1)}, 1, {T(3, 2, 5, 7)}, 1, 0, 0, 0},
    {"argmax_ties", "ArgMax", 13, 2, {A_INT("axis", -1), A_INT("keepdims", 0)}, 1,
     {TK(IN_SMALL, 2, 6, 9)}, 1, 0, 0, 0},
    {"argmax_ties_last", "ArgMax", 13, 2, {A_INT("axis", -1), A_INT("select_last_index", 1)}, 1,
     {TK(IN_SMALL, 2, 6, 9)}, 1, 0, 0, 0},
    {"argmin_ties", "ArgMin", 13, 1, {A_INT("axis", 0)}, 1, {TK(IN_SMALL, 2, 9, 6)}, 1, 0, 0, 0},
    {"argmin_ties_last", "ArgMin", 13, 2, {A_INT("axis", 0), A_INT("select_last_index", 1)}, 1,
     {TK(IN_SMALL, 2, 9, 6)}, 1, 0, 0, 0},
    {"argmax_nan", "ArgMax", 13, 1, {A_INT("axis", 0)}, 1, {TK(IN_SPECIAL, 1, 17)}, 1, 0, 0, 0},
    {"argmin_nan", "ArgMin", 13, 1, {A_INT("axis", 0)}, 1, {TK(IN_SPECIAL, 1, 17)}, 1, 0, 0, 0},
    {"argmax_long", "ArgMax", 13, 1, {A_INT("axis", 2)}, 1, {TK(IN_SMALL, 3, 2, 3, 2000)}, 1, 0, 0, 0},
    {"argmin_long_last", "ArgMin", 13, 2, {A_INT("axis", 1), A_INT("select_last_index", 1)}, 1,
     {TK(IN_SMALL, 3, 2, 3000, 1)}, 1, 0, 0, 0},
    {"argmax_i32", "ArgMax", 13, 1, {A_INT("axis", 1)}, 1, {TD(I32, IN_SPECIAL, 2, 3, 9)}, 1, ONCE, 0, 0},
    {"argmin_bool", "ArgMin", 13, 1, {A_INT("axis", 1)}, 1, {TD(BOOL, IN_BOOL, 2, 3, 9)}, 1, ONCE, 0, 0},
    {"argmax_f64", "ArgMax", 13, 1, {A_INT("axis", 0)}, 1, {TD(F64, IN_SPECIAL, 1, 20)}, 1, ONCE, 0, 0},
    /* TopK: values are copies (exact), indices exact */
    {"topk_largest", "TopK", 11, 0, {{0}}, 2, {T(3, 2, 3, 20), INTS(5)}, 2, EXACT, 0, 0},
    {"topk_smallest_axis1", "TopK", 11, 2, {A_INT("axis", 1), A_INT("largest", 0)}, 2,
     {T(3, 2, 12, 5), INTS(4)}, 2, EXACT, 0, 0},
    {"topk_ties", "TopK", 11, 0, {{0}}, 2, {TK(IN_SMALL, 2, 4, 30), INTS(12)}, 2, EXACT, 0, 0},
    {"topk_ties_smallest", "TopK", 11, 1, {A_INT("largest", 0)}, 2, {TK(IN_SMALL, 2, 4, 30), INTS(12)}, 2, EXACT, 0, 0},
    {"topk_nan", "TopK", 11, 0, {{0}}, 2, {TK(IN_SPECIAL, 1, 17), INTS(17)}, 2, EXACT, 0, 0},
    {"topk_long_row", "TopK", 11, 0, {{0}}, 2, {T(2, 3, 600), INTS(40)}, 2, EXACT, 0, 0},
    {"topk_unsorted", "TopK", 11, 1, {A_INT("sorted", 0)}, 2, {T(2, 3, 20), INTS(6)}, 2, EXACT, 0, 0},
    {"topk_v1", "TopK", 1, 1, {A_INT("k", 3)}, 1, {T(2, 3, 10)}, 2, EXACT, 0, 0},
    /* the values alone: the backward finds the indices again */
    {"topk_values_only", "TopK", 11, 0, {{0}}, 2, {TK(IN_SMALL, 2, 4, 30), INTS(7)}, 1, EXACT, 0, 0},
    {"topk_k0", "TopK", 11, 0, {{0}}, 2, {T(2, 3, 10), INTS(0)}, 2, EXACT, 0, 0},
    {"topk_i64", "TopK", 11, 0, {{0}}, 2, {TD(I64, IN_SPECIAL, 2, 2, 10), INTS(4)}, 2, ONCE, 0, 0},
    {"topk_u8_smallest", "TopK", 11, 1, {A_INT("largest", 0)}, 2, {TD(U8, IN_IRAND, 2, 2, 10), INTS(4)}, 2, ONCE, 0, 0},
    /* CumSum: exclusive, reverse, both; integers wrap */
    {"cumsum", "CumSum", 14, 0, {{0}}, 2, {T(3, 2, 5, 7), INTS(1)}, 1, 0, 1e-6, 1e-2},
    {"cumsum_exclusive", "CumSum", 14, 1, {A_INT("exclusive", 1)}, 2, {T(2, 5, 7), INTS(-1)}, 1, 0, 1e-6, 1e-2},
    {"cumsum_reverse", "CumSum", 14, 1, {A_INT("reverse", 1)}, 2, {T(2, 5, 7), INTS(0)}, 1, 0, 1e-6, 1e-2},
    {"cumsum_excl_rev", "CumSum", 14, 2, {A_INT("exclusive", 1), A_INT("reverse", 1)}, 2,
     {T(3, 2, 50, 3), INTS(1)}, 1, 0, 1e-6, 1e-2},
    {"cumsum_i32", "CumSum", 14, 0, {{0}}, 2, {TD(I32, IN_SPECIAL, 1, 12), INTS(0)}, 1, ONCE, 0, 0},
    {"cumsum_i64_axis_i32", "CumSum", 14, 0, {{0}}, 2,
     {TD(I64, IN_IRAND, 2, 3, 7), {.dt = I32, .rank = 0, .kind = IN_INTS, .vals = {1}, .n_vals = 1}}, 1, ONCE, 0, 0},
    {"cumsum_f64", "CumSum", 14, 0, {{0}}, 2, {TD(F64, IN_RAND, 2, 3, 70), INTS(1)}, 1, ONCE, 1e-15, 0},
    /* Softmax / LogSoftmax in DOUBLE (the float forms: test_gpu_std) */
    {"softmax_f64", "Softmax", 13, 0, {{0}}, 1, {TD(F64, IN_RAND, 3, 2, 3, 300)}, 1, ONCE, 1e-15, 0},
    {"logsoftmax_f64_axis1", "LogSoftmax", 13, 1, {A_INT("axis", 1)}, 1,
     {TD(F64, IN_RAND, 3, 2, 7, 5)}, 1, ONCE, 1e-15, 0},
    {"softmax_f64_legacy", "Softmax", 11, 1, {A_INT("axis", 1)}, 1, {TD(F64, IN_RAND, 3, 2, 3, 4)}, 1, ONCE, 1e-15, 0},
};

int main(void)
{
    return sc_main("test_gpu_std_reduce", cases, sizeof cases / sizeof cases[0], NULL, NULL);
}
