/*
 * cpu_ops.h - the CPU backend's op dispatch: (domain "", op_type, opset) ->
 * a kernel function (backend.h's tx_op_fn) that reads the node's attributes
 * and constant inputs, handles per-opset differences, and calls the math
 * in kernels/cpu/ops.h on outputs the session allocated.
 *
 * Ownership: the returned functions are static. Thread-safety: the table is
 * immutable; kernels keep no state.
 */
#ifndef TEEXEC_EXEC_CPU_OPS_H
#define TEEXEC_EXEC_CPU_OPS_H

#include "exec/backend.h"

/* The kernel for the op, or NULL when the CPU backend does not run it. */
tx_op_fn tx_cpu_op_find(const char *domain, const char *op_type, int64_t opset);

/* The CPU backend's standard and quantization ops (not te.ops), for the
 * per-device op table (tests/exec/test_op_parity.c): entry i in table
 * order, its domain ("" or "trt"), op type and first opset; false past the
 * end. */
bool tx_cpu_op_at(size_t i, const char **domain, const char **op_type, int64_t *min_opset);

/* Kernels defined in cpu_ops_shape.c (data movement and metadata ops),
 * listed in cpu_ops.c's table. */
teexec_status *tx_cpu_op_reshape(const tx_op_call *c);      /* also Squeeze, Unsqueeze, Flatten, Identity */
teexec_status *tx_cpu_op_dropout(const tx_op_call *c);
teexec_status *tx_cpu_op_shape(const tx_op_call *c);
teexec_status *tx_cpu_op_size(const tx_op_call *c);
teexec_status *tx_cpu_op_constant(const tx_op_call *c);
teexec_status *tx_cpu_op_constant_of_shape(const tx_op_call *c);
teexec_status *tx_cpu_op_cast(const tx_op_call *c);         /* also CastLike */
teexec_status *tx_cpu_op_transpose(const tx_op_call *c);
teexec_status *tx_cpu_op_concat(const tx_op_call *c);
teexec_status *tx_cpu_op_split(const tx_op_call *c);
teexec_status *tx_cpu_op_slice(const tx_op_call *c);
teexec_status *tx_cpu_op_gather(const tx_op_call *c);
teexec_status *tx_cpu_op_gather_elements(const tx_op_call *c);
teexec_status *tx_cpu_op_expand(const tx_op_call *c);
teexec_status *tx_cpu_op_tile(const tx_op_call *c);
teexec_status *tx_cpu_op_range(const tx_op_call *c);
teexec_status *tx_cpu_op_trilu(const tx_op_call *c);

/* Kernels defined in cpu_ops_nn.c (Conv, GatherND, RMSNormalization,
 * Attention), listed in cpu_ops.c's table. */
teexec_status *tx_cpu_op_conv(const tx_op_call *c);
teexec_status *tx_cpu_op_gather_nd(const tx_op_call *c);
teexec_status *tx_cpu_op_rms_norm(const tx_op_call *c);
teexec_status *tx_cpu_op_attention(const tx_op_call *c);

/* An Attention node's attributes as the kernel takes them (shared with its
 * backward rule); qk_matmul_output_mode other than 0 with the
 * qk_matmul_output output in use is TEEXEC_ERR_UNSUPPORTED. */
struct tx_attention_params;
teexec_status *tx_cpu_attention_params_of(const tx_ir_node *n, struct tx_attention_params *p);

/* Attach node context to a kernel's error: prefixes `node "X" (Op)` and sets
 * the status's node. Returns st (NULL stays NULL). */
teexec_status *tx_cpu_op_error(const tx_op_call *c, teexec_status *st);

#endif
