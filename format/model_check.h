/*
 * model_check.h - structural checks on an unpacked ModelProto, and a walk
 * over every TensorProto it holds.
 *
 * The walk visits initializers, sparse initializers (values and indices),
 * tensors in node attributes (t, tensors, sparse_tensor, sparse_tensors),
 * recursively through subgraph attributes (g, graphs), model-local
 * functions and training_info graphs. Its recursion depth is bounded by the
 * nesting budget that the wire pre-scan enforced before unpacking.
 *
 * tx_model_check applies the per-tensor rules to every tensor: dims
 * non-negative, element count overflow-checked and within
 * max_tensor_elements, rank within max_rank, no `segment`, and for
 * initializers and attribute tensors a data_type in 1..26.
 *
 * Ownership: nothing is allocated for the caller. Thread-safety: read-only
 * on the model; reentrant.
 */
#ifndef TEEXEC_FORMAT_MODEL_CHECK_H
#define TEEXEC_FORMAT_MODEL_CHECK_H

#include "base/status.h"
#include "onnx.pb-c.h"

#include <stdbool.h>

typedef enum tx_tensor_site_kind {
    TX_SITE_INITIALIZER,        /* GraphProto.initializer */
    TX_SITE_SPARSE_VALUES,      /* SparseTensorProto.values (initializer or attribute) */
    TX_SITE_SPARSE_INDICES,     /* SparseTensorProto.indices */
    TX_SITE_ATTRIBUTE,          /* AttributeProto.t / .tensors */
} tx_tensor_site_kind;

/* Where a visited tensor lives; strings point into the model (may be ""). */
typedef struct tx_tensor_site {
    tx_tensor_site_kind kind;
    const char *graph;      /* name of the enclosing graph ("" if unnamed) */
    const char *function;   /* enclosing FunctionProto name, or NULL */
    const char *node;       /* node name for attribute tensors, else NULL */
    const char *attribute;  /* attribute name for attribute tensors, else NULL */
    int depth;              /* 0 for the main graph, +1 per subgraph */
} tx_tensor_site;

/* Called for each tensor; a non-NULL return stops the walk and is returned. */
typedef teexec_status *(*tx_tensor_visit_fn)(void *ctx, const Onnx__TensorProto *tp,
                                             const tx_tensor_site *site);

teexec_status *tx_model_for_each_tensor(const Onnx__ModelProto *model, tx_tensor_visit_fn fn,
                                        void *ctx) TX_NODISCARD;

/* Same walk below one graph (depth starts at 0). */
teexec_status *tx_graph_for_each_tensor(const Onnx__GraphProto *graph, tx_tensor_visit_fn fn,
                                        void *ctx) TX_NODISCARD;

/* Checks one tensor's header (not its payload). `what` names it in errors
 * (e.g. "initializer 'w'"). need_dtype refuses data_type 0 / out of range. */
teexec_status *tx_tensor_proto_check(const Onnx__TensorProto *tp,
                                     const teexec_load_options *limits, bool need_dtype,
                                     const char *what) TX_NODISCARD;

/* Runs tx_tensor_proto_check over every tensor of the model and checks
 * sparse tensors' dims; requires a graph. */
teexec_status *tx_model_check(const Onnx__ModelProto *model,
                              const teexec_load_options *limits) TX_NODISCARD;

/* "initializer 'w' in graph 'g'" etc. into buf; returns buf. */
const char *tx_tensor_site_describe(const Onnx__TensorProto *tp, const tx_tensor_site *site,
                                    char *buf, size_t size);

#endif
