/*
 * quant_plan.h - helpers around the quantization plan (tx_plan_quantization
 * in plan.h, planner/quant_plan.c) for the rest of the planner: lookup of an
 * operand's entry, the bytes a quantized copy takes, and releasing the
 * entries.
 *
 * Policy decisions tx_plan_quantization takes (recorded in each entry's why
 * where they apply):
 *  - Entries: one per operand (input, weight, grad_output) of every te.ops
 *    Linear / GroupedLinear node, in node order. Under recipe "none" only
 *    operands the model annotates get an entry (not quantized, why says the
 *    annotation is not applied). A GroupedLinear's entry stands for all its
 *    groups.
 *  - Divisibility is per node, all or nothing (its three GEMMs share M, N,
 *    K): FP8 per-tensor and fp8-block need multiples of 16 (cuBLASLt FP8
 *    leading dims), MXFP8 32, NVFP4 16. fp8-block pads partial 128 blocks
 *    (the scales cover the ragged edge) and runs natively only when M, N, K
 *    are multiples of 128; otherwise it is emulated exactly. GroupedLinear
 *    checks K, N and the total rows; each group's rows are checked at run
 *    time. Unknown shapes are planned quantized and checked at run time.
 *  - keep_first_last_hp: the first and last GEMM node in node order stay in
 *    compute_dtype (all three operands).
 *  - Delayed-scaling slots number the quantized operands in node order
 *    (input, weight, grad_output per node); a GroupedLinear takes G
 *    consecutive slots per operand (TE's per-group quantizers), the entry's
 *    delayed_slot is the first.
 *
 * Ownership: entries own their `why` strings. Thread-safety: pure.
 */
#ifndef TEEXEC_PLANNER_QUANT_PLAN_H
#define TEEXEC_PLANNER_QUANT_PLAN_H

#include "planner/plan.h"

/* The entry of (node, operand), or NULL. */
const tx_plan_quant *tx_plan_quant_find(const tx_fuser_plan *p, int32_t node, tx_qoperand operand);

/* Bytes of a quantized copy of a (rows x cols) matrix in q's format with the
 * given usages: data plus the compact scale arrays TE allocates
 * (base/quant_config.h), NVFP4 with its FP32 global amax per usage,
 * FP8 per-tensor with one FP32 scale_inv. 0 when q is not quantized or
 * usage is 0. LIMIT on overflow. */
teexec_status *tx_plan_quant_bytes(const tx_plan_quant *q, uint64_t rows, uint64_t cols,
                                   unsigned usage, uint64_t *out) TX_NODISCARD;

/* Frees p->quant and its strings; p->quant becomes empty. */
void tx_plan_quant_clear(tx_fuser_plan *p);

#endif
