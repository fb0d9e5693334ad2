/*
 * quant_operand.h - one GEMM operand's quantizer config as the planner's
 * quantization plan says (planner/plan.h tx_plan_quant), shared by the CPU
 * group executor (exec/group_exec.c) and the CUDA executor, so that both
 * quantize exactly the same way: format and blocks from the plan, usages
 * from which gradients the step computes, NVFP4's Hadamard / stochastic
 * rounding options from the recipe and a per-(node, operand) seed.
 *
 * Ownership: returns pointers into the caller's plan array.
 * Thread-safety: pure.
 */
#ifndef TEEXEC_EXEC_QUANT_OPERAND_H
#define TEEXEC_EXEC_QUANT_OPERAND_H

#include "kernels/cpu/qtensor.h"
#include "planner/plan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The plan entry of (node, operand), or NULL. */
const tx_plan_quant *tx_quant_entry(const tx_plan_quant *quant, size_t n_quant, int32_t node,
                                    tx_qoperand operand);

/* Usages an operand needs: x rowwise (+ columnwise for the weight grad), w
 * rowwise (+ columnwise for dx), dy rowwise for dx + columnwise for the
 * weight grad. dx / dparams: which grads this step computes. */
unsigned tx_quant_usage(tx_qoperand operand, bool dx, bool dparams);

/* Fills *cfg (zeroed first) for the operand and returns its plan entry, or
 * NULL when the operand stays in high precision (recipe none, no entry, or
 * the plan keeps it unquantized). NVFP4: seed = seed ^ (node * golden +
 * operand), sr_offset = step. */
const tx_plan_quant *tx_quant_operand_config(const tx_plan_quant *quant, size_t n_quant,
                                             const tx_recipe *recipe, int32_t node,
                                             tx_qoperand operand, bool dx, bool dparams,
                                             uint64_t seed, uint64_t step, tx_quant_config *cfg);

#endif
