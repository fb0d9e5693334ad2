/*
 * te_cuda_handoff_block.h - internal: the quantized hand-offs
 * (ForwardNormQuantize, ForwardActivationQuantize, BackwardBiasQuantize)
 * when the consumer Linear's operand is fp8-block (1x128 blocks rowwise,
 * 128x1 columnwise, FP32 scales; te-ops.md 4.5). te_cuda_handoff.c hands
 * every operand of kind TX_QKIND_FP8_BLOCK to these two functions: the
 * same question at the consumer's prepare (gpu_handoff.c marks the operand
 * handed off) and at the producer's fused-kernel prepare, so both sides
 * agree. The producer writes the operand region through
 * tx_cuda_lin_block_dest (linear_gemm.h), the bytes the Linear's own
 * quantizer would write, so the Linear's GEMMs are unchanged.
 *
 * Ownership: statuses returned are the caller's; the private data made by
 * the prepare is freed by the impl's free_priv. Thread-safety: the accept
 * check is pure; a fused kernel is used by one host thread.
 */
#ifndef TEEXEC_EXEC_CUDA_TE_CUDA_HANDOFF_BLOCK_H
#define TEEXEC_EXEC_CUDA_TE_CUDA_HANDOFF_BLOCK_H

#include "exec/cuda/te_cuda.h"
#include "exec/cuda/te_cuda_linear.h"

#include <stddef.h>

/* As tx_cuda_handoff_accepts (te_cuda_handoff.h) for an fp8-block q: NULL
 * when the fused kernel can write q from producer `op` (attrs may be NULL
 * for a Bias) whose quantized tensor has dtype `dt` and last dim `cols`
 * and was measured faster than the unfused path (a Bias; a norm whose
 * consumer needs no columnwise copy, q->cfg.usage ROWWISE only), else
 * TEEXEC_ERR_UNSUPPORTED with the reason. */
teexec_status *tx_cuda_handoff_block_accepts(tx_fusion_id fusion, tx_te_op_id op,
                                             const tx_te_attr_value *attrs, teexec_dtype in_dt,
                                             teexec_dtype dt, size_t cols,
                                             const tx_cuda_operand_q *q) TX_NODISCARD;

/* The fused kernel for producer desc `d` writing operand `o` of the
 * consumer Linear `l` (already checked by tx_cuda_fused_handoff_prepare:
 * one op, bound consumer, accepted, handed off, matching shape). Covers
 * the activation too, which the accept check declines today (tests call
 * it directly). */
teexec_status *tx_cuda_fused_handoff_block_prepare(tx_fusion_id fusion, const tx_cuda_te_desc *d,
                                                   const tx_cuda_linear *l,
                                                   const tx_cuda_lin_operand *o,
                                                   const tx_cuda_fused_impl **impl, void **priv,
                                                   size_t *scratch_bytes) TX_NODISCARD;

#endif
