/* GPU test: Gemm, Einsum, LayerNormalization and the plain-kernel MatMul on
 * the GPU (exec/cuda/std_cuda_linalg.c, std_cuda_reduce.c over cuBLASLt,
 * kernels/cuda/std_linalg.h, norm.h, std_norm.h) against the CPU kernels
 * and, for Gemm and LayerNormalization, the CPU backward rules: Gemm with
 * every transpose pair, alpha / beta, C broadcast from a row, a column, a
 * scalar, absent or ignored (beta 0); integer and DOUBLE Gemm / MatMul
 * (wrapping 64-bit, FP64); Einsum as matmul, batch matmul, diagonal, trace,
 * outer product, ellipsis, three operands (bit for bit: the CPU's FP64
 * summation order); LayerNormalization over one and two axes, with and
 * without bias, with its Mean / InvStdDev outputs, a broadcast Scale, wide
 * rows, DOUBLE. FLOAT, BFLOAT16 and FLOAT16 otherwise. The runner is
 * std_case.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/std_case.h"

#define F SC_F
#define F64 TEEXEC_DTYPE_DOUBLE
#define I32 TEEXEC_DTYPE_INT32
#define I64 TEEXEC_DTYPE_INT64
#define U32 TEEXEC_DTYPE_UINT32
#define U64 TEEXEC_DTYPE_UINT64

static const tcase cases[] = {
    /* Gemm */
    {"gemm_bias_row", "Gemm", 13, 0, {{0}}, 3, {T(2, 4, 8), T(2, 8, 6), T(1, 6)}, 1, 0, 2e-5, 5e-2},
    {"gemm_ta_tb", "Gemm", 13, 4,
     {A_INT("transA", 1), A_INT("transB", 1), A_FLT("alpha", 0.5f), A_FLT("beta", 2.0f)}, 3,
     {T(2, 8, 4), T(2, 6, 8), T(2, 4, 6)}, 1, 0, 2e-5, 5e-2},
    {"gemm_ta", "Gemm", 13, 1, {A_INT("transA", 1)}, 3, {T(2, 8, 5), T(2, 8, 3), T(2, 5, 1)}, 1, 0, 2e-5, 5e-2},
    {"gemm_tb_noc", "Gemm", 13, 2, {A_INT("transB", 1), A_FLT("alpha", -1.5f)}, 2,
     {T(2, 7, 16), T(2, 9, 16)}, 1, 0, 2e-5, 5e-2},
    {"gemm_c_scalar", "Gemm", 13, 1, {A_FLT("beta", 0.25f)}, 3, {T(2, 3, 8), T(2, 8, 5), T(0, 0)}, 1, 0, 2e-5, 5e-2},
    {"gemm_beta0", "Gemm", 13, 1, {A_FLT("beta", 0.0f)}, 3, {T(2, 3, 8), T(2, 8, 5), T(2, 3, 5)}, 1, 0, 2e-5, 5e-2},
    {"gemm_big", "Gemm", 13, 1, {A_INT("transB", 1)}, 3, {T(2, 64, 96), T(2, 80, 96), T(1, 80)}, 1, 0, 1e-4, 2e-1},
    {"gemm_i32", "Gemm", 13, 0, {{0}}, 3,
     {TD(I32, IN_IRAND, 2, 4, 8), TD(I32, IN_IRAND, 2, 8, 6), TD(I32, IN_IRAND, 1, 6)}, 1, ONCE, 0, 0},
    {"gemm_i64_alpha", "Gemm", 13, 3, {A_INT("transA", 1), A_FLT("alpha", 2.0f), A_FLT("beta", -1.0f)}, 3,
     {TD(I64, IN_SPECIAL, 2, 8, 4), TD(I64, IN_SMALL, 2, 8, 6), TD(I64, IN_IRAND, 2, 4, 1)}, 1, ONCE, 0, 0},
    {"gemm_u32", "Gemm", 13, 1, {A_INT("transB", 1)}, 2, {TD(U32, IN_IRAND, 2, 3, 5), TD(U32, IN_IRAND, 2, 4, 5)}, 1, ONCE, 0, 0},
    {"gemm_f64", "Gemm", 13, 3, {A_INT("transB", 1), A_FLT("alpha", 0.5f), A_FLT("beta", 3.0f)}, 3,
     {TD(F64, IN_RAND, 2, 5, 9), TD(F64, IN_RAND, 2, 7, 9), TD(F64, IN_RAND, 1, 7)}, 1, ONCE, 1e-13, 0},
    /* MatMul in the dtypes cuBLASLt does not take */
    {"matmul_i32_bcast", "MatMul", 13, 0, {{0}}, 2,
     {TD(I32, IN_IRAND, 3, 2, 3, 4), TD(I32, IN_IRAND, 4, 5, 1, 4, 2)}, 1, ONCE, 0, 0},
    {"matmul_i64_wrap", "MatMul", 13, 0, {{0}}, 2, {TD(I64, IN_SPECIAL, 2, 2, 3), TD(I64, IN_IRAND, 2, 3, 2)}, 1, ONCE, 0, 0},
    {"matmul_u64_vec", "MatMul", 13, 0, {{0}}, 2, {TD(U64, IN_IRAND, 1, 6), TD(U64, IN_IRAND, 3, 2, 6, 3)}, 1, ONCE, 0, 0},
    {"matmul_f64", "MatMul", 13, 0, {{0}}, 2, {TD(F64, IN_RAND, 3, 2, 5, 16), TD(F64, IN_RAND, 2, 16, 4)}, 1, ONCE, 1e-13, 0},
    {"matmul_f64_vec_b", "MatMul", 13, 0, {{0}}, 2, {TD(F64, IN_RAND, 3, 2, 5, 8), TD(F64, IN_RAND, 1, 8)}, 1, ONCE, 1e-13, 0},
    /* Einsum: the CPU's FP64 sums in the CPU's order, so bit for bit */
    {"einsum_matmul", "Einsum", 12, 1, {A_STR("equation", "ij,jk->ik")}, 2, {T(2, 4, 8), T(2, 8, 5)}, 1, EXACT, 0, 0},
    {"einsum_batch", "Einsum", 12, 1, {A_STR("equation", "bij,bjk->bik")}, 2, {T(3, 2, 4, 8), T(3, 2, 8, 5)}, 1, EXACT, 0, 0},
    {"einsum_attention", "Einsum", 12, 1, {A_STR("equation", "bhid,bhjd->bhij")}, 2,
     {T(4, 2, 2, 5, 8), T(4, 2, 2, 6, 8)}, 1, EXACT, 0, 0},
    {"einsum_diag", "Einsum", 12, 1, {A_STR("equation", "ii->i")}, 1, {T(2, 6, 6)}, 1, EXACT, 0, 0},
    {"einsum_trace", "Einsum", 12, 1, {A_STR("equation", "ii")}, 1, {T(2, 6, 6)}, 1, EXACT, 0, 0},
    {"einsum_outer", "Einsum", 12, 1, {A_STR("equation", "i,j->ij")}, 2, {T(1, 5), T(1, 7)}, 1, EXACT, 0, 0},
    {"einsum_ellipsis_t", "Einsum", 12, 1, {A_STR("equation", "...ij->...ji")}, 1, {T(4, 2, 3, 4, 5)}, 1, EXACT, 0, 0},
    {"einsum_ellipsis_bcast", "Einsum", 12, 1, {A_STR("equation", "...ij,...jk->...ik")}, 2,
     {T(4, 2, 1, 3, 4), T(4, 1, 3, 4, 2)}, 1, EXACT, 0, 0},
    {"einsum_sum_axis", "Einsum", 12, 1, {A_STR("equation", "ijk->ik")}, 1, {T(3, 3, 40, 2)}, 1, EXACT, 0, 0},
    {"einsum_three", "Einsum", 12, 1, {A_STR("equation", "ij,jk,kl->il")}, 3,
     {T(2, 3, 4), T(2, 4, 5), T(2, 5, 2)}, 1, EXACT, 0, 0},
    {"einsum_implicit", "Einsum", 12, 1, {A_STR("equation", "ba,ac")}, 2, {T(2, 3, 4), T(2, 4, 2)}, 1, EXACT, 0, 0},
    {"einsum_i64", "Einsum", 12, 1, {A_STR("equation", "ij,j->i")}, 2,
     {TD(I64, IN_SPECIAL, 2, 3, 7), TD(I64, IN_IRAND, 1, 7)}, 1, ONCE, 0, 0},
    {"einsum_f64", "Einsum", 12, 1, {A_STR("equation", "bij,bkj->bik")}, 2,
     {TD(F64, IN_RAND, 3, 2, 4, 6), TD(F64, IN_RAND, 3, 2, 3, 6)}, 1, ONCE | EXACT, 0, 0},
    /* LayerNormalization */
    {"layernorm", "LayerNormalization", 17, 1, {A_FLT("epsilon", 1e-5f)}, 3,
     {T(3, 2, 5, 32), T(1, 32), T(1, 32)}, 1, 0, 1e-5, 2e-2},
    {"layernorm_axis2", "LayerNormalization", 17, 1, {A_INT("axis", 2)}, 3,
     {T(4, 2, 3, 4, 5), T(2, 4, 5), T(2, 4, 5)}, 1, 0, 1e-5, 2e-2},
    {"layernorm_nobias", "LayerNormalization", 17, 0, {{0}}, 2, {T(2, 6, 24), T(1, 24)}, 1, 0, 1e-5, 2e-2},
    {"layernorm_stats", "LayerNormalization", 17, 1, {A_FLT("epsilon", 1e-3f)}, 3,
     {T(3, 2, 5, 16), T(1, 16), T(1, 16)}, 3, 0, 1e-5, 2e-2},
    {"layernorm_wide", "LayerNormalization", 17, 0, {{0}}, 3,
     {T(2, 8, 1024), T(1, 1024), T(1, 1024)}, 1, 0, 1e-5, 2e-2},
    {"layernorm_odd_width", "LayerNormalization", 17, 0, {{0}}, 3,
     {T(2, 5, 37), T(1, 37), T(1, 37)}, 1, 0, 1e-5, 2e-2},
    {"layernorm_bcast_scale", "LayerNormalization", 17, 1, {A_INT("axis", 1)}, 3,
     {T(3, 2, 4, 5), T(1, 5), T(2, 1, 5)}, 1, NO_BWD, 1e-5, 2e-2},
    {"layernorm_f64", "LayerNormalization", 17, 0, {{0}}, 3,
     {TD(F64, IN_RAND, 2, 6, 40), TD(F64, IN_RAND, 1, 40), TD(F64, IN_RAND, 1, 40)}, 3, ONCE, 1e-12, 0},
};

int main(void)
{
    return sc_main("test_gpu_std_linalg", cases, sizeof cases / sizeof cases[0], NULL, NULL);
}
