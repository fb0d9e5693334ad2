/*
 * linear_gemm.h - a Linear's three GEMMs on the GPU under any recipe: the
 * operands quantized with the CUDA quantizers (kernels/cuda/quant_*.h) into
 * a caller-owned region, then a native cuBLASLt GEMM where the device has
 * the unit for the format, or the exact emulation (kernels/cuda/
 * gemm_emulate.h) where it does not (DESIGN.md section 3).
 *
 * The three GEMMs, with the row-major source matrices x[T,K], w[N,K],
 * dy[T,N] (Transformer Engine's naming; each operand quantized along the
 * GEMM's reduction dim, which is what picks the usage):
 *   FPROP  y[T,N]  = x · wᵀ      x rowwise,    w rowwise
 *   DGRAD  dx[T,K] = dy · w      dy rowwise,   w columnwise
 *   WGRAD  dw[N,K] = dyᵀ · x     dy columnwise, x columnwise
 * Accumulation: FP32 always; FP8 per-tensor uses fast accumulation in FPROP
 * only (split accumulation for the grads), as TE does. An operand whose
 * quantizer is off stays in its high-precision dtype; when exactly one
 * operand is quantized the other is used as is and the quantized one is
 * dequantized (exact emulation), never the reverse.
 *
 * Operand memory: tx_cuda_lin_operand describes where one operand's
 * quantized data lives (rowwise and/or columnwise data, their scales, and
 * 64 bytes of per-tensor scalars: scale, scale_inv, amax, 16 bytes apart as
 * cuBLASLt wants its scale pointers) inside a region the caller gives
 * (a Linear keeps x's and w's columnwise copies in its state from forward
 * to backward). Layout and sizes come from tx_cuda_lin_operand_init.
 *
 * Ownership: nothing here allocates device memory; every pointer is the
 * caller's. Asynchronous on the stream; no host synchronization.
 * Thread-safety: as tx_gemm_lt (one thread per handle).
 */
#ifndef TEEXEC_EXEC_CUDA_LINEAR_GEMM_H
#define TEEXEC_EXEC_CUDA_LINEAR_GEMM_H

#include "exec/cuda/te_cuda.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/quant_block.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tx_lin_gemm { TX_LIN_FPROP, TX_LIN_DGRAD, TX_LIN_WGRAD } tx_lin_gemm;

typedef struct tx_cuda_lin_operand {
    tx_cuda_operand_q q;     /* copied; q.on false = high precision, nothing stored */
    size_t rows, cols;       /* the source matrix */
    unsigned usage;          /* TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE kept */
    /* byte offsets inside the operand's region (SIZE_MAX: absent) */
    size_t row_data, row_scales, col_data, col_scales, scalars;
    size_t row_scale_cols, col_scale_cols; /* padded compact scale columns */
    bool swizzled;           /* scale layout the native sm_100 GEMM reads */
    size_t bytes;            /* region size (0 when q.on is false) */
} tx_cuda_lin_operand;

/* Lays out one operand of rows x cols under q for the given usages and
 * device; checks the format's shape rules (MXFP8 and NVFP4 multiples of 32
 * (the GPU quantizers' tiles), FP8 per-tensor cols and, with the
 * columnwise copy, rows multiples of 16; FP8 block cols % 8 and, with the
 * columnwise copy, rows % 16) and answers TEEXEC_ERR_UNSUPPORTED with the
 * rule. q.on false: only rows and cols are set (bytes 0). */
teexec_status *tx_cuda_lin_operand_init(tx_cuda_lin_operand *o, const tx_cuda_operand_q *q,
                                        size_t rows, size_t cols, unsigned usage,
                                        int sm) TX_NODISCARD;

/* Quantizes src (rows x cols, src_dtype: FLOAT or BFLOAT16; FLOAT16 is
 * TEEXEC_ERR_UNSUPPORTED: the GPU quantizers read those two) into the
 * operand's region `mem` (256-byte aligned, o->bytes), every kept usage.
 * fp8-delayed reads q.delayed_scale and writes q.delayed_amax. NVFP4
 * stochastic rounding uses q.cfg.seed and sr_offset. */
teexec_status *tx_cuda_lin_quantize(const tx_cuda_lin_operand *o, const void *src,
                                    teexec_dtype src_dtype, void *mem, uint64_t sr_offset,
                                    void *stream) TX_NODISCARD;

/* The quantized hand-off (exec/cuda/te_cuda_handoff.c): a producer kernel
 * fills this operand's region in place of tx_cuda_lin_quantize. FP8
 * per-tensor only: tx_cuda_lin_handoff_check answers UNSUPPORTED with the
 * reason for any other quantizer. tx_cuda_lin_handoff_begin sets *t to what
 * the producer's own pass writes (the amax; with fp8-delayed's known scale
 * also the rowwise bytes) and queues what must come first (current scaling:
 * the amax zeroed); after the producer, tx_cuda_lin_handoff_finish
 * completes the region from src, the producer's high-precision output
 * (current: scale and cast(+transpose) without another amax pass; delayed:
 * scale_inv and the transposed copy). Together they write the bytes
 * tx_cuda_lin_quantize writes for src. */
typedef struct tx_cuda_lin_handoff {
    teexec_dtype fmt;        /* E4M3FN or E5M2 */
    float *amax;             /* the producer max-reduces |stored value| here */
    const float *scale;      /* non-NULL: the producer casts with it ... */
    uint8_t *row_data;       /* ... into the rowwise data here */
} tx_cuda_lin_handoff;

teexec_status *tx_cuda_lin_handoff_check(const tx_cuda_operand_q *q) TX_NODISCARD;
teexec_status *tx_cuda_lin_handoff_begin(const tx_cuda_lin_operand *o, void *mem,
                                         tx_cuda_lin_handoff *t, void *stream) TX_NODISCARD;
teexec_status *tx_cuda_lin_handoff_finish(const tx_cuda_lin_operand *o, const void *src,
                                          teexec_dtype src_dtype, void *mem,
                                          void *stream) TX_NODISCARD;

/* fp8-block operands: the quantizer arguments (kernels/cuda/quant_block.h)
 * that write the operand's region `mem` (x, x_dtype left NULL / 0), as
 * tx_cuda_lin_quantize uses them; the fp8-block hand-off producers
 * (te_cuda_handoff_block.c) write the same region through them. */
void tx_cuda_lin_block_dest(const tx_cuda_lin_operand *o, void *mem, tx_cuda_block_args *a);

/* One GEMM operand: the high-precision matrix (used when its quantizer is
 * off, and by nothing else) and the quantized region (when on). */
typedef struct tx_cuda_lin_ref {
    const tx_cuda_lin_operand *op;
    const void *hp;          /* [rows, cols] in hp_dtype */
    teexec_dtype hp_dtype;
    const void *mem;         /* the operand's region (q.on) */
} tx_cuda_lin_ref;

/* Epilogue of the output (each optional). */
typedef struct tx_cuda_lin_epi {
    const void *bias;        /* FPROP: + bias[N] (bias_dtype) */
    teexec_dtype bias_dtype;
    void *gelu_pre;          /* FPROP with bias: y = gelu_tanh(x·wᵀ + b), pre-activation here */
    const void *residual;    /* FPROP: + residual (out's dtype, [T,N]); may equal out.
                              * cuBLASLt rounds alpha * product to a 16-bit out
                              * dtype before the add, as an unfused add would */
    float alpha;             /* scales the product (0 means 1) */
    void *dgelu_pre;         /* DGRAD: out = (dy·w) * gelu'(dgelu_pre) ... */
    void *dbias;             /* ... and dbias = column sums of out (bias_dtype) */
    /* gelu_pre / dgelu_pre are [rows, cols] of out in out's dtype, cols a
     * multiple of 8 (cuBLASLt's aux rule; else TEEXEC_ERR_UNSUPPORTED) */
} tx_cuda_lin_epi;

/* Device scratch a GEMM of this kind needs (emulation's dequantized
 * operands and FP32 result; a mixed GEMM's dequantized operand; native
 * NVFP4's device alpha, 256 bytes; FP8 block keeps the emulation's size in
 * case cuBLASLt refuses the native GEMM); 0 for native FP8 per-tensor,
 * native MXFP8 and high-precision GEMMs. */
size_t tx_cuda_lin_gemm_scratch(tx_lin_gemm kind, const tx_cuda_lin_ref *a,
                                const tx_cuda_lin_ref *b);

/* a, b: FPROP (x, w), DGRAD (dy, w), WGRAD (dy, x). out: row-major result
 * in out_dtype. Fails with TEEXEC_ERR_UNSUPPORTED when cuBLASLt refuses an
 * epilogue for these operand types (callers then run the epilogue's op
 * unfused). */
teexec_status *tx_cuda_lin_gemm(tx_lin_gemm kind, const tx_cuda_lin_ref *a,
                                const tx_cuda_lin_ref *b, size_t T, size_t N, size_t K,
                                void *out, teexec_dtype out_dtype, const tx_cuda_lin_epi *epi,
                                void *scratch, size_t scratch_bytes,
                                const tx_cuda_env *env) TX_NODISCARD;

#endif
