/*
 * cpu_te_ops.h - running nodes of domain "te.ops" on the CPU backend: the
 * bridge from an IR node to the op registry (format/te_schema.h) and its
 * CPU forward/backward (kernels/cpu/te_args.h).
 *
 * Node layout (the registry's order): inputs are the main input, then the
 * schema's extra inputs (an omitted optional one is ""), then the
 * parameters (GroupedLinear: weight_0..G-1, bias_0..G-1); outputs are the
 * main output, then the extra outputs. As ONNX allows, trailing optional
 * extra inputs may be left out entirely when the op has no parameters
 * (they are absent); a missing required one is refused. Attributes are read from the node by
 * the schema's names and types (ENUM attributes are ONNX strings), with the
 * schema's defaults.
 *
 * Ownership: returned functions are static; statuses belong to the caller.
 * Thread-safety: stateless; safe from any thread.
 */
#ifndef TEEXEC_EXEC_CPU_TE_OPS_H
#define TEEXEC_EXEC_CPU_TE_OPS_H

#include "exec/backend.h"
#include "exec/train_internal.h"
#include "format/te_schema.h"
#include "import/shape_infer.h"
#include "import/shape_infer_te.h"

/* The forward kernel of te.ops op `op_type`, or NULL when the registry has
 * no such op. */
tx_op_fn tx_cpu_te_op_find(const char *op_type, int64_t opset);

/* tx_te_domain, tx_te_node_read / tx_te_node_decode and tx_te_infer_node:
 * import/shape_infer_te.h. */

/* tx_infer_node for every node (tx_infer_node_any, shape_infer_te.h). */
teexec_status *tx_exec_infer_node(const tx_ir_node *node, const tx_onnx_file *file,
                                  const tx_infer_value *const *inputs,
                                  tx_infer_value *outputs) TX_NODISCARD;

/* The forward of a te.ops node with training semantics, as the trainer runs
 * it: Dropout draws its mask with Philox counter offset rng_offset (the
 * caller's rule, exec/train.c), and the op writes its aux tensors (its
 * share of the saved context, e.g. Dropout's mask) into aux[0..*n_aux),
 * allocated here; aux must have TX_TE_MAX_EXTRA entries and the caller
 * releases the *n_aux written ones (none on error). */
teexec_status *tx_te_forward_train(const tx_op_call *c, uint64_t rng_offset, tx_tensor *aux,
                                   int *n_aux) TX_NODISCARD;

/* The backward rule (train_internal.h's contract) for te.ops nodes. With
 * the forward's aux tensors in the call (c->aux) it uses them as the saved
 * context as they are, so Dropout's backward applies the forward's mask;
 * without them it runs the forward again in training mode at
 * c->rng_offset. Then it collects the saved context with
 * tx_te_setup_context and calls the op's backward_impl. */
teexec_status *tx_te_bwd_rule(const tx_bwd_call *c) TX_NODISCARD;

/* Which inputs of a te.ops node can carry a gradient (not NO_GRAD ports). */
bool tx_te_slot_differentiable(const tx_ir_node *node, size_t slot);

#endif
