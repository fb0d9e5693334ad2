/*
 * te_cuda_handoff.h - internal: when the GPU runs a quantized hand-off
 * (ForwardNormQuantize, ForwardActivationQuantize, BackwardBiasQuantize,
 * and BackwardActivationBias with its grad quantize: the producer writes
 * its high-precision output and the consumer Linear's FP8 operand, and the
 * Linear skips its own quantize). The executor asks
 * tx_cuda_handoff_accepts while preparing the consumer Linear (to set
 * tx_cuda_operand_q.handed_off, which fixes the Linear's layout) and the
 * fused kernel's prepare (te_cuda_handoff.c, tx_cuda_fused_handoff_prepare)
 * asks it again, so both sides decide alike.
 *
 * Ownership: statuses returned are the caller's. Thread-safety: pure.
 */
#ifndef TEEXEC_EXEC_CUDA_TE_CUDA_HANDOFF_H
#define TEEXEC_EXEC_CUDA_TE_CUDA_HANDOFF_H

#include "exec/cuda/te_cuda.h"

#include <stddef.h>

/* NULL when the GPU's fused kernel for `fusion` can write the consumer's
 * operand q from producer `op` (attrs: its attributes, schema order; may be
 * NULL for Bias) reading `in_dt` and whose quantized tensor (the norm's /
 * activation's output, the Bias's grad_output) has dtype `dt` and last dim
 * `cols`; else TEEXEC_ERR_UNSUPPORTED with the reason. For
 * TX_FUSION_BWD_ACT_BIAS, `op` / attrs are the activation after the Bias,
 * in_dt its input's dtype and dt its dx's (the Linear's grad_output). */
teexec_status *tx_cuda_handoff_accepts(tx_fusion_id fusion, tx_te_op_id op,
                                       const tx_te_attr_value *attrs, teexec_dtype in_dt,
                                       teexec_dtype dt, size_t cols,
                                       const tx_cuda_operand_q *q) TX_NODISCARD;

#endif
