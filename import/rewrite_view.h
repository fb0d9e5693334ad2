/*
 * rewrite_view.h - a rewrite graph (rewrite.h) seen as IR nodes (ir.h), so
 * that the passes over a graph being rewritten use the same per-node rules
 * as everything else: shape inference (shape_infer.h, shape_infer_te.h),
 * the value-typing pass (infer_graph.h) and the node evaluator
 * (const_eval.h).
 *
 * A view numbers the values it knows (graph inputs, initializers, node
 * outputs, names read but defined nowhere) and lists the graph's live nodes
 * as tx_ir_node entries in a topological order that keeps the graph's own
 * order where it can; node->index is the position in that list and
 * view->rw_node[k] the rewrite graph's index of node k. A node on a cycle
 * or reading a name nothing defines is left out of the order (its outputs
 * stay unknown) and counted in n_unordered.
 *
 * vals[] is seeded for typing: graph inputs take their declared types
 * (known shape only when every dim is fixed); initializers that are not
 * also graph inputs take their types, and their values when they have at
 * most TX_INFER_DECODE_INT_MAX elements (integer and bool ones) or
 * TX_INFER_DECODE_ANY_MAX (any type); everything else starts unknown.
 * tx_rw_view_infer then types every node (lenient: a rule that fails
 * leaves its outputs unknown) and fills the gaps from declared value_info
 * types that are fully static.
 *
 * Ownership: the view owns its arrays, the seeded / inferred values and
 * any TensorProto it made for an attribute a pass set; names, op types and
 * attribute arrays are borrowed from the graph, so a view is valid only
 * until the graph's next edit. Free with tx_rw_view_free.
 * Thread-safety: reads the graph only; one thread per graph.
 */
#ifndef TEEXEC_IMPORT_REWRITE_VIEW_H
#define TEEXEC_IMPORT_REWRITE_VIEW_H

#include "import/infer_graph.h"
#include "import/rewrite.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_rw_view_storage tx_rw_view_storage;

typedef struct tx_rw_view {
    tx_rw_graph *g;
    const tx_onnx_file *file;   /* the source model's file (external data, budgets) */
    size_t n_values;
    const char **names;         /* value id -> name (borrowed from g) */
    tx_infer_value *vals;       /* value id -> type (and value), see above */
    tx_ir_node *nodes;          /* topological */
    size_t n_nodes;
    size_t *rw_node;            /* nodes[k] is g's node rw_node[k] */
    size_t n_unordered;         /* live nodes left out of the order */
    tx_rw_view_storage *st;     /* private */
} tx_rw_view;

/* Builds the view of g's live nodes, seeded as above. */
teexec_status *tx_rw_view_build(tx_rw_graph *g, tx_rw_view **out) TX_NODISCARD;

/* Types every node of the view in order (infer_graph.h's step, lenient,
 * evaluating nodes whose outputs have at most value_elements elements). */
teexec_status *tx_rw_view_infer(tx_rw_view *v, uint64_t value_elements) TX_NODISCARD;

/* The id of value `name`, or -1. */
int32_t tx_rw_view_find(const tx_rw_view *v, const char *name);

void tx_rw_view_free(tx_rw_view *v);

/* One node of g as an IR node: its inputs are values 0..n_inputs-1 and its
 * outputs values n_inputs.. (-1 for omitted ones), nothing seeded. For the
 * evaluator's recursive walk (const_eval.c). */
teexec_status *tx_rw_view_node(tx_rw_graph *g, size_t node, tx_rw_view **out) TX_NODISCARD;

#endif
