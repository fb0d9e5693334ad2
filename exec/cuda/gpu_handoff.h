/*
 * gpu_handoff.h - the CUDA executor's wiring of the FP8 quantized
 * hand-offs (te_cuda_handoff.h): which consumer Linear operands arrive
 * quantized, which producer writes them, and a check that every such
 * producer really runs its fused kernel.
 *
 * Called by cuda_executor_build.c in this order: tx_gpu_handoff_mark while
 * preparing each Linear (before its layout is fixed), tx_gpu_handoff_bind
 * before preparing each one-op fused kernel, tx_gpu_handoff_verify after
 * all fused kernels are prepared.
 *
 * Ownership: nothing allocated; statuses returned are the caller's.
 * Thread-safety: as the executor (one host thread).
 */
#ifndef TEEXEC_EXEC_CUDA_GPU_HANDOFF_H
#define TEEXEC_EXEC_CUDA_GPU_HANDOFF_H

#include "exec/cuda/cuda_executor_internal.h"

/* For a Linear node whose quantizers are set (n->q): sets q.x.handed_off /
 * q.dy.handed_off where the plan names a hand-off producer and the GPU's
 * fused kernel accepts it. */
void tx_gpu_handoff_mark(tx_cuda_executor *g, cx_node *n);

/* Points the producer's desc at its consumer Linear (or clears it) before
 * the fused kernel `fusion` led by `producer` is prepared (a no-op for
 * fusions that are not hand-offs; BackwardActivationBias is led by its
 * Bias). */
void tx_gpu_handoff_bind(tx_cuda_executor *g, tx_fusion_id fusion, cx_node *producer);

/* TEEXEC_ERR_INTERNAL naming the nodes when a Linear expects a handed-off
 * operand that no prepared fused kernel writes. */
teexec_status *tx_gpu_handoff_verify(const tx_cuda_executor *g) TX_NODISCARD;

#endif
