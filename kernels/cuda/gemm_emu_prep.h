/*
 * gemm_emu_prep.h - the two small kernels the emulated block-scaled GEMM
 * (gemm_emulate.h) and the native NVFP4 GEMM need around cuBLASLt:
 *  - FP32 -> BF16 conversion (round to nearest even; exact for the values
 *    of dequantized MXFP8 / NVFP4-without-global-scale / power-of-two FP8
 *    block operands, which is the point);
 *  - the NVFP4 GEMM alpha from the two operands' global amaxes:
 *    alpha_out = alpha * S_dec(amax_a) * S_dec(amax_b), with S_dec as the
 *    quantizer computes it (kernels/cpu/quant_nvfp4.c: S_enc = 2688/amax,
 *    1 for amax 0), each product rounded to FP32. A NULL amax counts as 1.
 *    unit_amax_out (may be NULL) receives 2688, the amax whose S_dec is
 *    exactly 1, so that dequantizing with it gives q * S_dec_b alone.
 *
 * Device pointers owned by the caller; asynchronous on `stream` (a
 * cudaStream_t, NULL = default stream); no shared state: thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_GEMM_EMU_PREP_H
#define TEEXEC_KERNELS_CUDA_GEMM_EMU_PREP_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

teexec_status *tx_cuda_f32_to_bf16(const float *in, uint16_t *out, size_t n, void *stream);

teexec_status *tx_cuda_nvfp4_gemm_alpha(const float *amax_a, const float *amax_b, float alpha,
                                        float *alpha_out, float *unit_amax_out, void *stream);

#ifdef __cplusplus
}
#endif

#endif
