/*
 * cpu_ops_quant.h - the CPU backend's quantization ops: QuantizeLinear /
 * DequantizeLinear (default domain, opsets 10-25) and the `trt` domain ops
 * of TE exports (kernels/cpu/qdq.h holds the math). cpu_ops.c's
 * tx_cpu_op_find asks here first.
 *
 * Ownership: returned functions are static. Thread-safety: stateless.
 */
#ifndef TEEXEC_EXEC_CPU_OPS_QUANT_H
#define TEEXEC_EXEC_CPU_OPS_QUANT_H

#include "exec/backend.h"

/* The kernel, or NULL when the op is not a quantization op this file runs. */
tx_op_fn tx_cpu_quant_op_find(const char *domain, const char *op_type, int64_t opset);

/* Entry i of this file's table (tx_cpu_op_at's second half); false past the end. */
bool tx_cpu_quant_op_at(size_t i, const char **domain, const char **op_type, int64_t *min_opset);

#endif
