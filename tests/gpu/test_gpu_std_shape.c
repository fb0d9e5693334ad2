/* GPU test: the shape and value standard ONNX ops on the GPU (exec/cuda/
 * std_cuda_shape.c over kernels/cuda/std_shape.h) against the CPU kernels,
 * bit for bit: Tile, Trilu (upper / lower, k known, on the device only,
 * negative, rectangular), Range in every dtype it takes, ConstantOfShape,
 * Shape, Size and Constant (values written by a kernel), GatherElements,
 * Dropout with its mask (and its identity backward), and the data-movement
 * ops on the dtypes beyond the float ones (DOUBLE, integers, bool). The
 * runner is std_case.h. */
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
#define U16 TEEXEC_DTYPE_UINT16
#define BOOL TEEXEC_DTYPE_BOOL

static const tcase cases[] = {
    /* Tile */
    {"tile", "Tile", 13, 0, {{0}}, 2, {T(3, 2, 3, 4), INTS(2, 1, 3)}, 1, EXACT, 0, 0},
    {"tile_rank1", "Tile", 13, 0, {{0}}, 2, {T(1, 5), INTS(4)}, 1, EXACT, 0, 0},
    {"tile_i64", "Tile", 13, 0, {{0}}, 2, {TD(I64, IN_SPECIAL, 2, 2, 3), INTS(3, 2)}, 1, ONCE, 0, 0},
    {"tile_bool", "Tile", 13, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 2, 2, 3), INTS(1, 4)}, 1, ONCE, 0, 0},
    /* Trilu */
    {"triu", "Trilu", 14, 0, {{0}}, 1, {T(3, 2, 5, 5)}, 1, EXACT, 0, 0},
    {"tril", "Trilu", 14, 1, {A_INT("upper", 0)}, 1, {T(3, 2, 5, 5)}, 1, EXACT, 0, 0},
    {"triu_k1", "Trilu", 14, 0, {{0}}, 2, {T(2, 4, 6), SCALAR(I64, 1)}, 1, EXACT, 0, 0},
    {"tril_kneg", "Trilu", 14, 1, {A_INT("upper", 0)}, 2, {T(3, 3, 6, 4), SCALAR(I64, -2)}, 1, EXACT, 0, 0},
    {"triu_k_device", "Trilu", 14, 0, {{0}}, 2, {T(2, 6, 4), DSCALAR(I64, -1)}, 1, EXACT, 0, 0},
    {"tril_k_device_big", "Trilu", 14, 1, {A_INT("upper", 0)}, 2, {T(2, 3, 7), DSCALAR(I64, 50)}, 1, EXACT, 0, 0},
    {"triu_k_out", "Trilu", 14, 0, {{0}}, 2, {T(2, 3, 7), SCALAR(I64, -9)}, 1, EXACT, 0, 0},
    {"tril_i32", "Trilu", 14, 1, {A_INT("upper", 0)}, 1, {TD(I32, IN_IRAND, 2, 4, 4)}, 1, ONCE, 0, 0},
    /* Range: the CPU's arithmetic in each dtype */
    {"range", "Range", 11, 0, {{0}}, 3, {SCALAR(F, 1.5), SCALAR(F, 10), SCALAR(F, 0.75)}, 1, EXACT, 0, 0},
    {"range_neg", "Range", 11, 0, {{0}}, 3, {SCALAR(F, 3), SCALAR(F, -5), SCALAR(F, -0.375)}, 1, EXACT, 0, 0},
    {"range_f32_long", "Range", 11, 0, {{0}}, 3,
     {SCALAR(F32, -7.3), SCALAR(F32, 300), SCALAR(F32, 0.1)}, 1, EXACT | ONCE, 0, 0},
    {"range_f64", "Range", 11, 0, {{0}}, 3,
     {SCALAR(F64, -7.3), SCALAR(F64, 30), SCALAR(F64, 0.1)}, 1, EXACT | ONCE, 0, 0},
    {"range_i64", "Range", 11, 0, {{0}}, 3, {SCALAR(I64, -5), SCALAR(I64, 40), SCALAR(I64, 3)}, 1, ONCE, 0, 0},
    {"range_i32_neg", "Range", 11, 0, {{0}}, 3, {SCALAR(I32, 10), SCALAR(I32, -7), SCALAR(I32, -2)}, 1, ONCE, 0, 0},
    {"range_i16", "Range", 11, 0, {{0}}, 3, {SCALAR(I16, 0), SCALAR(I16, 9), SCALAR(I16, 1)}, 1, ONCE, 0, 0},
    /* ConstantOfShape: float zeros, and a value of each kind */
    {"constantofshape_zeros", "ConstantOfShape", 9, 0, {{0}}, 1, {INTS(2, 3, 4)}, 1, ONCE, 0, 0},
    {"constantofshape_f32", "ConstantOfShape", 9, 1, {A_TEN("value", F32, 1.5f)}, 1, {INTS(3, 5)}, 1, ONCE, 0, 0},
    {"constantofshape_i64", "ConstantOfShape", 9, 1, {A_TEN("value", I64, 7)}, 1, {INTS(2, 2, 2)}, 1, ONCE, 0, 0},
    {"constantofshape_bool", "ConstantOfShape", 9, 1, {A_TEN("value", BOOL, 1)}, 1, {INTS(6)}, 1, ONCE, 0, 0},
    {"constantofshape_f16", "ConstantOfShape", 9, 1, {A_TEN("value", TEEXEC_DTYPE_FLOAT16, -0.25f)}, 1,
     {INTS(4, 1)}, 1, ONCE, 0, 0},
    {"constantofshape_empty", "ConstantOfShape", 9, 0, {{0}}, 1, {INTS(2, 0)}, 1, ONCE, 0, 0},
    /* Shape, Size, Constant: values known before running, written by a kernel */
    {"shape", "Shape", 13, 0, {{0}}, 1, {T(4, 2, 3, 4, 5)}, 1, ONCE, 0, 0},
    {"shape_slice", "Shape", 15, 2, {A_INT("start", 1), A_INT("end", -1)}, 1, {T(4, 2, 3, 4, 5)}, 1, ONCE, 0, 0},
    {"size", "Size", 13, 0, {{0}}, 1, {T(3, 2, 3, 4)}, 1, ONCE, 0, 0},
    {"constant_tensor", "Constant", 13, 1, {A_TEN("value", F32, 3.25f)}, 0, {ABSENT}, 1, ONCE, 0, 0},
    {"constant_float", "Constant", 13, 1, {A_FLT("value_float", -2.5f)}, 0, {ABSENT}, 1, ONCE, 0, 0},
    {"constant_ints", "Constant", 13, 1, {A_INTS("value_ints", 4, -1, 9)}, 0, {ABSENT}, 1, ONCE, 0, 0},
    /* GatherElements: negative indices, each axis, int32 indices */
    {"gather_elements_axis2", "GatherElements", 13, 1, {A_INT("axis", 2)}, 2,
     {T(3, 2, 3, 4), {.dt = I64, .rank = 3, .dims = {2, 3, 6}, .kind = IN_IDXR, .vals = {4}}}, 1, EXACT, 0, 0},
    {"gather_elements_axis0_i32", "GatherElements", 13, 1, {A_INT("axis", 0)}, 2,
     {T(2, 5, 3), {.dt = I32, .rank = 2, .dims = {7, 2}, .kind = IN_IDXR, .vals = {5}}}, 1, EXACT, 0, 0},
    {"gather_elements_f64", "GatherElements", 13, 1, {A_INT("axis", 1)}, 2,
     {TD(F64, IN_RAND, 2, 3, 4), {.dt = I64, .rank = 2, .dims = {3, 2}, .kind = IN_IDXR, .vals = {4}}}, 1, ONCE, 0, 0},
    /* Dropout (inference mode) with its mask; the identity backward */
    {"dropout_mask", "Dropout", 13, 0, {{0}}, 1, {T(3, 2, 3, 4)}, 2, EXACT, 0, 0},
    {"dropout_ratio", "Dropout", 13, 0, {{0}}, 3, {T(2, 3, 4), SCALAR(F32, 0.3), SCALAR(BOOL, 0)}, 2, EXACT, 0, 0},
    {"dropout_v7", "Dropout", 7, 1, {A_FLT("ratio", 0.2f)}, 1, {T(2, 3, 4)}, 1, EXACT, 0, 0},
    /* data movement beyond the float dtypes */
    {"transpose_f64", "Transpose", 13, 1, {A_INTS("perm", 2, 0, 1)}, 1, {TD(F64, IN_RAND, 3, 2, 3, 4)}, 1, ONCE, 0, 0},
    {"concat_i8", "Concat", 13, 1, {A_INT("axis", 1)}, 2, {TD(I8, IN_IRAND, 2, 2, 3), TD(I8, IN_IRAND, 2, 2, 5)}, 1, ONCE, 0, 0},
    {"split_u16", "Split", 13, 1, {A_INT("axis", 0)}, 1, {TD(U16, IN_IRAND, 2, 6, 3)}, 2, ONCE, 0, 0},
    {"gather_f64", "Gather", 13, 1, {A_INT("axis", 0)}, 2,
     {TD(F64, IN_RAND, 2, 7, 5), IDX(I64, 1, 3, 0, 6, -1, 2)}, 1, ONCE, 0, 0},
    {"expand_bool", "Expand", 13, 0, {{0}}, 2, {TD(BOOL, IN_BOOL, 2, 3, 1), INTS(2, 3, 4)}, 1, ONCE, 0, 0},
    {"where_f64", "Where", 16, 0, {{0}}, 3,
     {TD(BOOL, IN_BOOL, 2, 3, 1), TD(F64, IN_RAND, 2, 3, 4), TD(F64, IN_RAND, 1, 4)}, 1, ONCE, 0, 0},
    {"slice_i32", "Slice", 13, 0, {{0}}, 4, {TD(I32, IN_IRAND, 2, 5, 8), INTS(1), INTS(7), INTS(1)}, 1, ONCE, 0, 0},
    {"identity_bool", "Identity", 16, 0, {{0}}, 1, {TD(BOOL, IN_BOOL, 2, 3, 5)}, 1, ONCE, 0, 0},
};

int main(void)
{
    return sc_main("test_gpu_std_shape", cases, sizeof cases / sizeof cases[0], NULL, NULL);
}
