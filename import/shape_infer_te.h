/*
 * shape_infer_te.h - te.ops nodes as the rest of import/ sees them: the
 * node read against its schema (format/te_schema.h: attributes by name and
 * type with the schema's defaults, the parameter count, the input layout
 * checked) and its shape/type inference in the calling convention of
 * tx_infer_node (shape_infer.h). The CPU and CUDA executors decode nodes
 * through the same reader, so every layer agrees on what a node means.
 *
 * Node layout (the schema's order): the main input, the schema's extra
 * inputs (an omitted optional one is ""), then the parameters
 * (GroupedLinear: weight_0..G-1, bias_0..G-1); outputs are the main output
 * then the extra outputs. Trailing optional extra inputs may be left out
 * when the op has no parameters; a missing required one is refused.
 *
 * Ownership: a tx_te_node borrows INTS attribute arrays from the IR.
 * Thread-safety: pure functions.
 */
#ifndef TEEXEC_IMPORT_SHAPE_INFER_TE_H
#define TEEXEC_IMPORT_SHAPE_INFER_TE_H

#include "format/te_schema.h"
#include "import/ir.h"
#include "import/shape_infer.h"

#include <stdbool.h>
#include <stddef.h>

/* The most input slots (main + extra + parameters) a te.ops node may have. */
#define TX_TE_MAX_SLOTS 64

typedef struct tx_te_node {
    const tx_te_op_schema *s;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    int n_params;
    size_t first_param; /* node input index of the first parameter */
    size_t n_slots;     /* main + extra inputs + parameters; the node may
                         * have fewer (omitted trailing optional inputs) */
} tx_te_node;

/* True for domain "te.ops". */
bool tx_te_domain(const char *domain);

/* Reads node n against its schema. UNSUPPORTED for an op the schema does
 * not have, BAD_MODEL (node named) for wrong attributes or inputs. */
teexec_status *tx_te_node_read(const tx_ir_node *n, tx_te_node *out) TX_NODISCARD;

/* The same, as schema, attributes (TX_TE_MAX_ATTRS entries) and parameter
 * count. Parameters are node inputs 1 + schema->n_extra_inputs onwards. */
teexec_status *tx_te_node_decode(const tx_ir_node *n, const tx_te_op_schema **schema,
                                 tx_te_attr_value *attrs, int *n_params) TX_NODISCARD;

/* Shape/type inference of a te.ops node through its schema's rule. While
 * an input's shape is unknown the outputs' shapes are too, but their type
 * is set (the first real-float input's). */
teexec_status *tx_te_infer_node(const tx_ir_node *node, const tx_infer_value *const *inputs,
                                tx_infer_value *outputs) TX_NODISCARD;

/* tx_infer_node for any node: te.ops nodes through tx_te_infer_node, the
 * rest through shape_infer.h. */
teexec_status *tx_infer_node_any(const tx_ir_node *node, const tx_onnx_file *file,
                                 const tx_infer_value *const *inputs,
                                 tx_infer_value *outputs) TX_NODISCARD;

#endif
