/*
 * lower_shape.h - the static shape of a value in a rewrite graph, for
 * lowering rules that must know two tensors have the same shape (the
 * residual Add -> AddExtraInput of lower_residual.c) while PyTorch's
 * exports declare no intermediate types.
 *
 * Derived backwards from declared types (graph inputs, value_info,
 * initializers) through the ops a Transformer block is made of: te.ops
 * ops (their schema's shape rule), elementwise and broadcasting standard
 * ops, MatMul, Transpose, Reshape / Split / Slice / Expand / (Un)squeeze with
 * constant arguments (initializers, Constant nodes, or folded shape
 * arithmetic via const_eval.h), Concat, Softmax, Cast, Gather, GatherND,
 * Flatten, ... A value is "known" only when every dim is a fixed number;
 * anything else answers false, so a caller that needs equality declines
 * rather than guesses.
 *
 * Ownership: results are written into caller storage. Thread-safety: reads
 * the graph only (one thread per graph, as rewrite.h says).
 */
#ifndef TEEXEC_IMPORT_LOWER_SHAPE_H
#define TEEXEC_IMPORT_LOWER_SHAPE_H

#include "base/shape.h"
#include "import/rewrite.h"

#include <stdbool.h>

/* The fixed shape of `value`; false when it cannot be derived. A status is
 * returned only for an allocation failure. */
teexec_status *tx_lower_shape_of(tx_rw_graph *g, const char *value, tx_shape *out,
                                 bool *known) TX_NODISCARD;

/* The same, with the element type when it can be followed (UNDEFINED when
 * not: a Reshape of a value whose type is unknown, ...). */
teexec_status *tx_lower_type_of(tx_rw_graph *g, const char *value, teexec_dtype *dtype,
                                tx_shape *out, bool *known) TX_NODISCARD;

#endif
