/*
 * infer_graph.h - the one value-typing pass of teexec: dtype, shape and
 * (where small and computable) the constant value of every value of a
 * graph, before any session exists. The planner's request
 * (tx_plan_request.vals), `teexec plan`, the folding pass (fold.h) and the
 * lowering passes' shape questions (lower_shape.h) all type values here.
 *
 * A step types one node: its rule (tx_infer_node_any: te.ops through the
 * schema, standard ops through shape_infer.h) gives the outputs' dtype and
 * shape; when every present input has a value and the outputs have at most
 * `value_elements` elements in total, the node is also evaluated
 * (const_eval.h) so that values computed from constants (shape arithmetic,
 * masks, tables) flow on to the rules that need them (Reshape, Expand,
 * Slice, ...).
 *
 * tx_infer_graph types a loaded graph: graph inputs take their declared
 * types; a symbolic dim takes the value the caller names for it
 * (dim_names[i] = dim_values[i]) and 1 when not named (teexec_plan_options'
 * default), as does a dim the file leaves unnamed and unknown.
 * Initializers take their TensorProto's type; small ones (integer and bool
 * ones up to TX_INFER_DECODE_INT_MAX elements, any up to
 * TX_INFER_DECODE_ANY_MAX) are decoded. Nodes are typed in graph order
 * (validation made it topological); a rule that fails is an error naming
 * the node.
 *
 * Ownership: *vals is a new array of g->n_values entries, each possibly
 * owning a value tensor; release with tx_infer_values_free. g and file are
 * only read. Thread-safety: pure over its arguments.
 */
#ifndef TEEXEC_IMPORT_INFER_GRAPH_H
#define TEEXEC_IMPORT_INFER_GRAPH_H

#include "base/status.h"
#include "format/onnx_load.h"
#include "import/ir.h"
#include "import/shape_infer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TX_INFER_DECODE_ANY_MAX 64
#define TX_INFER_DECODE_INT_MAX 65536
/* Outputs up to this many elements are evaluated by tx_infer_graph. */
#define TX_INFER_VALUE_MAX 65536

typedef struct tx_infer_options {
    /* A rule that fails (or an op without one) leaves the node's outputs
     * unknown instead of failing: for questions asked while a graph is
     * being rewritten (lower_shape.h). */
    bool lenient;
    /* Evaluate a node whose inputs all have values when its outputs have
     * at most this many elements in total; 0: never. */
    uint64_t value_elements;
} tx_infer_options;

/* Types node n: reads vals[n->inputs[k]], writes vals[n->outputs[j]]
 * (each output entry is cleared first). Errors (strict mode) name the
 * node. */
teexec_status *tx_infer_step(const tx_ir_node *n, const tx_onnx_file *file,
                             const tx_infer_options *o, tx_infer_value *vals) TX_NODISCARD;

/* Fills *vals (g->n_values entries). dim_names/dim_values may be NULL when
 * n_dims is 0. Errors name the node whose rule failed. */
teexec_status *tx_infer_graph(const tx_ir_graph *g, const tx_onnx_file *file,
                              const char *const *dim_names, const int64_t *dim_values,
                              size_t n_dims, tx_infer_value **vals) TX_NODISCARD;

/* The same for inputs of known types (a session's bound tensors): value
 * input_values[k] is typed input_types[k] (dtype and shape; any value it
 * carries is not used), the other graph inputs keep their declared types
 * with symbolic dims 1. */
teexec_status *tx_infer_graph_inputs(const tx_ir_graph *g, const tx_onnx_file *file, size_t n,
                                     const int32_t *input_values,
                                     const tx_infer_value *input_types,
                                     tx_infer_value **vals) TX_NODISCARD;

/* Releases what tx_infer_graph returned. Accepts NULL. */
void tx_infer_values_free(tx_infer_value *vals, size_t n);

/* Moves src into dst (dst cleared first), keeping an owned value's pointer
 * pointing at its new home; src is left empty. */
void tx_infer_value_move(tx_infer_value *dst, tx_infer_value *src);

#endif
