/*
 * infer_graph.h - dtype and shape of every value of a graph, before any
 * session exists: what the planner's request needs (tx_plan_request.vals)
 * and what `teexec plan` and the planner tests compute from a model file.
 *
 * Graph inputs take their declared types; a symbolic dim takes the value
 * the caller names for it (dim_names[i] = dim_values[i]) and 1 when not
 * named (teexec_plan_options' default), as does a dim the file leaves
 * unnamed and unknown. Initializers take their TensorProto's type; small
 * ones (integer ones up to 65536 elements, any up to 64) are decoded so that
 * Reshape/Split/Slice inputs fold. Then every node runs tx_exec_infer_node
 * (exec/cpu_te_ops.h: te.ops nodes through the registry, the rest through
 * import/shape_infer.h) in graph order.
 *
 * Ownership: *vals is a new array of g->n_values entries, each possibly
 * owning a value tensor; release with tx_infer_values_free. g and file are
 * only read. Thread-safety: pure over its arguments.
 */
#ifndef TEEXEC_EXEC_INFER_GRAPH_H
#define TEEXEC_EXEC_INFER_GRAPH_H

#include "base/status.h"
#include "format/onnx_load.h"
#include "import/ir.h"
#include "import/shape_infer.h"

#include <stddef.h>
#include <stdint.h>

/* Fills *vals (g->n_values entries). dim_names/dim_values may be NULL when
 * n_dims is 0. Errors name the node whose rule failed. */
teexec_status *tx_infer_graph(const tx_ir_graph *g, const tx_onnx_file *file,
                              const char *const *dim_names, const int64_t *dim_values,
                              size_t n_dims, tx_infer_value **vals) TX_NODISCARD;

/* Releases what tx_infer_graph returned. Accepts NULL. */
void tx_infer_values_free(tx_infer_value *vals, size_t n);

#endif
