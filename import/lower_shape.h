/*
 * lower_shape.h - the static shape of a value in a rewrite graph, for
 * lowering rules that must know two tensors have the same shape (the
 * residual Add -> AddExtraInput of lower_residual.c, RoPE's layout) while
 * PyTorch's exports declare no intermediate types.
 *
 * The whole graph is typed by the value-typing pass (infer_graph.h) over
 * its IR view (rewrite_view.h): graph inputs and initializers from their
 * declared types, every node through its rule (te.ops through the
 * schema's), small constant values evaluated on the way so shape
 * arithmetic folds, declared value_info used where a rule cannot tell. A
 * value is "known" only when every dim is a fixed number; anything else
 * answers false, so a caller that needs equality declines rather than
 * guesses (tx_lower_symbolic_shape_of adds the exporter's named dims, for
 * callers that compare them by name).
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

/* The same, with the element type (UNDEFINED when the pass cannot tell). */
teexec_status *tx_lower_type_of(tx_rw_graph *g, const char *value, teexec_dtype *dtype,
                                tx_shape *out, bool *known) TX_NODISCARD;

/* The shape of `value` with its symbolic dims kept, for rules that must
 * accept dynamic batch and sequence dims (a KV-cache export's attention)
 * but still prove two dims equal: dims[d] >= 0 is fixed (the typing pass,
 * else the declared type); dims[d] = -1 with params[d] set is the declared
 * dim_param ("s14", "s17 + s70": equal strings are equal dims, as the
 * exporter wrote them); -1 with params[d] NULL is unknown. *known is false
 * when not even the rank can be told; *dtype (may be NULL) gets the
 * element type, UNDEFINED when the pass cannot tell. params borrow from
 * the graph and stay valid until it is edited. A status only for allocation failure. */
teexec_status *tx_lower_symbolic_shape_of(tx_rw_graph *g, const char *value, tx_shape *out,
                                          const char *params[TX_MAX_RANK], bool *known,
                                          teexec_dtype *dtype) TX_NODISCARD;

/* Whether values a and b have one shape, proven: *known when every dim of
 * both is a fixed number or a declared name (symbolic shape above), and
 * then *same when they have one rank and each dim pair is the same number
 * or the same name. Unknown dims give *known false. */
teexec_status *tx_lower_same_shape(tx_rw_graph *g, const char *a, const char *b, bool *known,
                                   bool *same) TX_NODISCARD;

#endif
