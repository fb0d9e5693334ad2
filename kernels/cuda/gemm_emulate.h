/*
 * gemm_emulate.h - the exact emulation of block-scaled GEMMs (MXFP8, NVFP4,
 * FP8 block) where cuBLASLt has no native mode on the device (MXFP8 and
 * NVFP4 on sm_90, FP8 block off sm_90), DESIGN.md section 3.
 *
 * Each operand is one usage of a quantized tensor, described as for
 * kernels/cuda/dequant.h (its `out` is ignored). The helper dequantizes
 * both into scratch with tx_cuda_dequantize_to, straight into the operand
 * dtype and K-contiguous (transposing where the source's cols are not the
 * reduction dim), and runs one TN tx_gemm_lt GEMM with FP32 accumulation:
 *  - BFLOAT16 operands (the default) are exact for NVFP4 (the operands
 *    are q * S_dec_b; the two global S_dec factors go into a device alpha,
 *    as the native NVFP4 GEMM does), for MXFP8 except blocks with an E8M0
 *    scale below 2^-124 (E4M3) / 2^-117 (E5M2), whose smallest subnormal
 *    values fall under bf16's range, and for FP8 block data with
 *    power-of-two scales (same range caveat);
 *  - FLOAT operands (CUBLAS_COMPUTE_32F, no TF32) are exact for any FP32
 *    scale (FP8 block without pow2 scales), at FP32 GEMM speed.
 *
 * The dequantized operand is the source matrix X[rows, cols] (row-major;
 * columnwise data comes back transposed to [rows, cols]), which cuBLASLt
 * sees as the column-major cols x rows matrix with ld = cols. So an
 * operand A with transa = 1 gives m = rows, k = cols (Transformer Engine's
 * "TN" fprop with A = W); transa = 0 gives m = cols, k = rows; B with
 * transb = 0 gives k = cols, n = rows; transb = 1 gives k = rows, n = cols.
 *
 * `g` supplies everything else (m, n, k, transa, transb, c/d dtypes,
 * ldc/ldd, alpha, beta, epilogue, bias, aux); its A/B dtype, lda/ldb, scale
 * fields and alpha_dev are set by the helper, and the GEMM that runs is TN
 * whatever transa / transb say (they only say how the sources map). With NVFP4 operands beta
 * must be 0 or 1 (device alpha).
 *
 * Ownership: all pointers are the caller's device memory. The scratch
 * holds the converted operands and must have at least
 * tx_gemm_emu_scratch_bytes() bytes, 256-byte aligned: no allocation
 * happens here. Asynchronous on `stream`; thread-safety as tx_gemm_lt.
 */
#ifndef TEEXEC_KERNELS_CUDA_GEMM_EMULATE_H
#define TEEXEC_KERNELS_CUDA_GEMM_EMULATE_H

#include "kernels/cuda/dequant.h"
#include "kernels/cuda/gemm_lt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch for operands of rows x cols each (0 on overflow). operand_type:
 * BFLOAT16 (0 means BFLOAT16) or FLOAT. */
size_t tx_gemm_emu_scratch_bytes(const tx_cuda_dequant_args *qa, const tx_cuda_dequant_args *qb,
                                 teexec_dtype operand_type);

teexec_status *tx_gemm_emulate(tx_gemm_lt *h, const tx_gemm_desc *g, const tx_cuda_dequant_args *qa,
                               const tx_cuda_dequant_args *qb, teexec_dtype operand_type,
                               void *scratch, size_t scratch_bytes, const void *C, void *D,
                               void *workspace, void *stream);

#ifdef __cplusplus
}
#endif

#endif
