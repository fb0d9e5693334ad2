/*
 * rewrite.h - a mutable copy of a model's main graph, for the lowering
 * passes (import/lower*.c) and the converter: nodes can be added, removed
 * and edited by name, initializers replaced or added, model-local functions
 * inlined and groups of nodes outlined into new functions; the result is
 * written back as a serialized ModelProto (format/model_write.h), which the
 * normal loader reads again.
 *
 * Values are referred to by NAME (as in ONNX), not by index: passes create
 * and delete nodes freely, so indices would go stale. Lookups of producer,
 * consumers and constants are answered from the current state (indexes are
 * rebuilt lazily after edits).
 *
 * Nodes live in an array; removing a node marks it dead (its index stays
 * valid, it is skipped by lookups and by the writer). New nodes are
 * appended; the writer emits live nodes in a topological order (stable:
 * original order where possible), so passes need not insert in order.
 *
 * Initializers are either borrowed (the TensorProto of the source file,
 * which must outlive the rewrite graph) or owned (bytes a pass made, e.g. a
 * transposed weight). Replacing an initializer under the same name keeps
 * the name the user knows.
 *
 * Ownership: the tx_rw_graph owns all its strings, arrays and owned tensors;
 * strings passed in are copied. Pointers returned by lookups are valid until
 * the next edit. Free with tx_rw_free().
 * Thread-safety: a tx_rw_graph is used by one thread at a time; distinct
 * graphs are independent.
 */
#ifndef TEEXEC_IMPORT_REWRITE_H
#define TEEXEC_IMPORT_REWRITE_H

#include "base/status.h"
#include "base/tensor.h"
#include "import/ir.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_rw_graph tx_rw_graph;

typedef struct tx_rw_attr {
    char *name;
    tx_ir_attr_type type;   /* INT, FLOAT, STRING, INTS, FLOATS, STRINGS, TENSOR; others kept opaque */
    int64_t i;
    float f;
    char *s;                /* STRING (NUL-terminated copy) */
    int64_t *ints;   size_t n_ints;
    float *floats;   size_t n_floats;
    char **strings;  size_t n_strings;
    /* TENSOR: either borrowed from the source file or owned (a pass's own). */
    const Onnx__TensorProto *t_borrowed;
    tx_tensor t_owned;      /* data NULL when not owned */
    /* Types the rewrite layer does not model (GRAPH, SPARSE_TENSOR, ...):
     * the source AttributeProto, copied through as is. */
    const Onnx__AttributeProto *opaque;
} tx_rw_attr;

typedef struct tx_rw_node {
    char *name;
    char *op_type;
    char *domain;           /* "" for ai.onnx */
    char **inputs;   size_t n_inputs;    /* "" = omitted optional */
    char **outputs;  size_t n_outputs;   /* "" = omitted optional */
    tx_rw_attr *attrs; size_t n_attrs;
    bool dead;
} tx_rw_node;

/* A value's declared type as the writer emits it in value_info / graph
 * inputs and outputs (rank -1 = unknown; dims -1 with dim_param NULL =
 * unknown dim). */
typedef struct tx_rw_value_type {
    teexec_dtype dtype;
    int32_t rank;
    int64_t dims[TX_MAX_RANK];
    char *dim_params[TX_MAX_RANK];
} tx_rw_value_type;

/* ---- building and writing --------------------------------------------- */

/* Copies model's main graph (nodes, attributes, initializers borrowed,
 * inputs/outputs/value_info types, opset imports, metadata, model-local
 * functions). Calls of model-local functions (any domain, te.fused
 * included) are inlined: each call is replaced by its body, with the
 * body's intermediate names made unique and attribute references
 * (ref_attr_name) substituted from the call site; an unresolvable one is a
 * BAD_MODEL error naming the call. Nested subgraph attributes (If/Loop) are
 * kept opaque. */
teexec_status *tx_rw_from_ir(const tx_ir_model *model, tx_rw_graph **out) TX_NODISCARD;

void tx_rw_free(tx_rw_graph *g);

/* Serializes to ModelProto bytes (malloc'd; caller frees): live nodes in a
 * topological order (a cycle or an undefined input is an INTERNAL error
 * naming the node), the te.ops opset import added when a te.ops node is
 * present, functions added by tx_rw_outline, initializers that no live
 * node reads dropped. */
teexec_status *tx_rw_emit(const tx_rw_graph *g, uint8_t **bytes, size_t *len) TX_NODISCARD;

/* The same, but initializers the source model keeps as external data stay
 * references to the same locations instead of being read in: for a model
 * loaded again from the source's folder (exec/model_lower.c), which then
 * neither copies the weights nor outgrows the 2 GiB a serialized model may
 * have. With `side` (empty on entry; may be NULL), the graph's own new
 * initializers of 64 KiB and more (weights the lowering transposed or
 * merged) go to it, referenced at TX_SIDE_LOCATION (format/onnx_load.h),
 * for the same reason; on failure it is freed. */
teexec_status *tx_rw_emit_keep_external(const tx_rw_graph *g, tx_side_data *side,
                                        uint8_t **bytes, size_t *len) TX_NODISCARD;

/* The model as ONNX's external-data form: every initializer of 64 KiB and
 * more (the graph's own and the source's, external or not) goes to *data
 * (empty on entry; freed on failure), referenced at `location` (a relative
 * file name, checked by external_data.h's rules), for the caller to write
 * to that file beside the model; the rest as tx_rw_emit. For models whose
 * weights do not fit one serialized message (2 GiB). */
teexec_status *tx_rw_emit_external_data(const tx_rw_graph *g, const char *location,
                                        tx_side_data *data, uint8_t **bytes,
                                        size_t *len) TX_NODISCARD;

/* ---- nodes -------------------------------------------------------------- */

size_t tx_rw_node_count(const tx_rw_graph *g);          /* live and dead */
tx_rw_node *tx_rw_node_at(tx_rw_graph *g, size_t index); /* NULL when out of range */

/* Appends a node; inputs/outputs are copied ("" = omitted). *index (may be
 * NULL) gets its index. */
teexec_status *tx_rw_add_node(tx_rw_graph *g, const char *op_type, const char *domain,
                              const char *name, const char *const *inputs, size_t n_inputs,
                              const char *const *outputs, size_t n_outputs,
                              size_t *index) TX_NODISCARD;
void tx_rw_remove_node(tx_rw_graph *g, size_t index);

/* Attribute setters (replace an attribute of the same name). */
teexec_status *tx_rw_set_int(tx_rw_graph *g, size_t node, const char *name, int64_t v) TX_NODISCARD;
teexec_status *tx_rw_set_float(tx_rw_graph *g, size_t node, const char *name, float v) TX_NODISCARD;
teexec_status *tx_rw_set_string(tx_rw_graph *g, size_t node, const char *name,
                                const char *v) TX_NODISCARD;
teexec_status *tx_rw_set_ints(tx_rw_graph *g, size_t node, const char *name, const int64_t *v,
                              size_t n) TX_NODISCARD;
/* Sets a TENSOR attribute to a copy of t. */
teexec_status *tx_rw_set_tensor(tx_rw_graph *g, size_t node, const char *name,
                                const tx_tensor *t) TX_NODISCARD;
const tx_rw_attr *tx_rw_get_attr(const tx_rw_graph *g, size_t node, const char *name);

/* Turns node `node` into a Constant node (same name, same place) whose one
 * output is its output `slot`, holding a copy of t; its inputs, attributes
 * and other outputs go. */
teexec_status *tx_rw_make_constant(tx_rw_graph *g, size_t node, size_t slot,
                                   const tx_tensor *t) TX_NODISCARD;

/* Replaces every read of value `from` by live nodes (and graph outputs keep
 * their names: when `from` is a graph output, the producer of `to` is
 * renamed instead so the output name survives). */
teexec_status *tx_rw_replace_uses(tx_rw_graph *g, const char *from, const char *to) TX_NODISCARD;

/* A name not used anywhere in the graph, built from `hint`; owned by g. */
const char *tx_rw_fresh_name(tx_rw_graph *g, const char *hint);

/* ---- lookups --------------------------------------------------------------- */

/* The live node producing `value` (and its output slot), or -1. */
int64_t tx_rw_producer(tx_rw_graph *g, const char *value, size_t *slot);
/* Live nodes reading `value` (each (node, input slot) once), in node order;
 * *n gets the count. The array is owned by g, valid until the next edit. */
const tx_ir_use *tx_rw_consumers(tx_rw_graph *g, const char *value, size_t *n);
bool tx_rw_is_graph_output(const tx_rw_graph *g, const char *value);
bool tx_rw_is_graph_input(const tx_rw_graph *g, const char *value);

/* Constant value of `value` when it is an initializer (not also a graph
 * input, which callers may override) or the output of a Constant node:
 * decoded into *out (caller releases). Returns false (and *out empty) when
 * not constant or not decodable. */
bool tx_rw_constant(tx_rw_graph *g, const char *value, tx_tensor *out);
/* Convenience: a constant with exactly one element, as double. */
bool tx_rw_scalar(tx_rw_graph *g, const char *value, double *out);

/* Declared type of a value (graph input/output/value_info or initializer);
 * false when unknown. */
bool tx_rw_value_type_of(const tx_rw_graph *g, const char *value, tx_rw_value_type *out);

/* ---- graph inputs and outputs -------------------------------------------- */

/* Appends a graph input with a copy of `type` (dim_params copied). */
teexec_status *tx_rw_add_input(tx_rw_graph *g, const char *name,
                               const tx_rw_value_type *type) TX_NODISCARD;
/* Removes the graph input / output of that name (false: there was none). */
bool tx_rw_remove_input(tx_rw_graph *g, const char *name);
bool tx_rw_remove_output(tx_rw_graph *g, const char *name);
/* Removes, until none is left, every live node whose outputs are all
 * unread and not graph outputs; *removed (may be NULL) gets the count. A
 * graph with subgraph attributes is left alone (their reads of outer
 * values are not tracked here). */
void tx_rw_remove_unused_nodes(tx_rw_graph *g, size_t *removed);

/* ---- initializers ------------------------------------------------------- */

bool tx_rw_is_initializer(const tx_rw_graph *g, const char *value);
/* Adds (or replaces, keeping the name) an initializer with a copy of t. */
teexec_status *tx_rw_set_initializer(tx_rw_graph *g, const char *name,
                                     const tx_tensor *t) TX_NODISCARD;

/* ---- functions ----------------------------------------------------------- */

/* Moves live nodes `nodes[0..n)` into a new model-local function
 * (domain, name) whose inputs are the values they read from outside the set
 * (initializers included, in first-use order) and whose outputs are the
 * values they define that are read outside the set or are graph outputs,
 * and puts one call node in their place: at the index of the set's first
 * node in graph order (that node's dead entry moves to the end; no other
 * index changes), so the writer emits the call where the group was.
 * Opset imports of the function are those of the model. *call (may be
 * NULL) gets the call node's index. */
teexec_status *tx_rw_outline(tx_rw_graph *g, const size_t *nodes, size_t n, const char *domain,
                             const char *name, size_t *call) TX_NODISCARD;

/* Source-model functions of `domain` are left out of what tx_rw_emit writes
 * and may be outlined again under the same names: for the converter, whose
 * input's te.fused groups were inlined by tx_rw_from_ir and are re-planned.
 * A function of that domain still called by a live node makes emit fail. */
teexec_status *tx_rw_drop_source_functions(tx_rw_graph *g, const char *domain) TX_NODISCARD;

#endif
