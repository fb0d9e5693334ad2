/*
 * ir.h - the teexec intermediate representation of an ONNX model.
 *
 * A tx_ir_model is built from a loaded tx_onnx_file (tx_ir_build) and then
 * checked (tx_ir_validate). It is a read-only index over the ModelProto:
 * every graph has a value table, and nodes refer to values by index into
 * the table of the graph that holds them (never by name). Nodes are kept in
 * the file's order, which validation guarantees is topological.
 *
 * Values read by a subgraph (If/Loop/Scan body) from an enclosing graph
 * appear in the subgraph's own table as TX_IR_VALUE_OUTER entries whose
 * `outer` field is the index of that value in the parent graph (which may
 * itself be an OUTER entry, one level up). The node holding the subgraph
 * lists those parent values as its implicit inputs, so a liveness or
 * ordering pass over the parent sees them.
 *
 * Model-local functions (FunctionProto) are kept: each has a body graph
 * over its own value table whose inputs/outputs are the function's formal
 * parameters (untyped: kind TX_IR_KIND_UNKNOWN), resolved against the
 * function's own opset imports.
 *
 * Ownership: the IR owns every string and array it holds (names, dims,
 * dim_params, index arrays, attribute strings), except:
 *   - TensorProto pointers (value->initializer, attr->t, attr->tensors[]),
 *     sparse tensor pointers and attr->floats / attr->ints, which point into
 *     the tx_onnx_file's unpacked ModelProto;
 * so the tx_onnx_file the IR was built from must outlive the IR. Tensor
 * payloads are not decoded here: users decode them lazily with
 * tx_tensor_from_proto(value->initializer, model->file, &t).
 * Free with tx_ir_model_free().
 *
 * Thread-safety: building is thread-safe (no shared state); a built model is
 * immutable and may be read from any number of threads.
 */
#ifndef TEEXEC_IMPORT_IR_H
#define TEEXEC_IMPORT_IR_H

#include "base/status.h"
#include "base/tensor.h"
#include "format/onnx_load.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_ir_graph tx_ir_graph;

/* The kinds of teexec_value_kind (same numbers), plus UNKNOWN for a value
 * whose type the file does not state (an intermediate without value_info,
 * a function parameter). */
typedef enum tx_ir_kind {
    TX_IR_KIND_TENSOR = TEEXEC_VALUE_TENSOR,
    TX_IR_KIND_SEQUENCE = TEEXEC_VALUE_SEQUENCE,
    TX_IR_KIND_OPTIONAL = TEEXEC_VALUE_OPTIONAL,
    TX_IR_KIND_MAP = TEEXEC_VALUE_MAP,
    TX_IR_KIND_SPARSE_TENSOR = TEEXEC_VALUE_SPARSE_TENSOR,
    TX_IR_KIND_OTHER = TEEXEC_VALUE_OTHER,
    TX_IR_KIND_UNKNOWN = 6
} tx_ir_kind;

/* Value flags (a value may carry several: a graph input that is also an
 * initializer is a parameter with a default). */
enum {
    TX_IR_VALUE_GRAPH_INPUT = 1u << 0,
    TX_IR_VALUE_GRAPH_OUTPUT = 1u << 1,
    TX_IR_VALUE_INITIALIZER = 1u << 2,  /* dense initializer: see ->initializer */
    TX_IR_VALUE_SPARSE_INIT = 1u << 3,  /* sparse initializer: see ->sparse */
    TX_IR_VALUE_OUTER = 1u << 4,        /* defined in an enclosing graph: ->outer */
    TX_IR_VALUE_UNDEFINED = 1u << 5     /* read but defined nowhere (validation error) */
};

/* One use of a value: input slot `slot` of node `node` (same graph). */
typedef struct tx_ir_use {
    int32_t node;
    int32_t slot;
} tx_ir_use;

typedef struct tx_ir_value {
    char *name;
    tx_ir_kind kind;
    /* Element type of a tensor / sparse tensor, the innermost tensor element
     * type of a sequence/optional, the value type of a map;
     * TEEXEC_DTYPE_UNDEFINED when not known. Data types beyond the system
     * proto's enum (17..26) are kept as their numbers. */
    teexec_dtype dtype;
    /* Shape of a tensor (or of the innermost tensor of sequence/optional):
     * rank -1 = unknown; dims[d] >= 0 fixed, -1 symbolic (dim_params[d] set)
     * or unknown (dim_params[d] NULL). dims/dim_params are NULL when rank
     * <= 0. */
    int32_t rank;
    int64_t *dims;
    char **dim_params;

    int32_t producer;      /* node index in this graph, or -1 */
    int32_t producer_slot; /* output slot of the producer, or -1 */
    tx_ir_use *consumers;  /* in node order; a node reading the value twice appears twice */
    size_t n_consumers;

    uint32_t flags;                               /* TX_IR_VALUE_* */
    const Onnx__TensorProto *initializer;         /* INITIALIZER: points into the file */
    const Onnx__SparseTensorProto *sparse;        /* SPARSE_INIT: points into the file */
    int32_t outer;                                /* OUTER: index in graph->parent, else -1 */
} tx_ir_value;

/* AttributeProto.AttributeType numbers. */
typedef enum tx_ir_attr_type {
    TX_IR_ATTR_UNDEFINED = 0,
    TX_IR_ATTR_FLOAT = 1,
    TX_IR_ATTR_INT = 2,
    TX_IR_ATTR_STRING = 3,
    TX_IR_ATTR_TENSOR = 4,
    TX_IR_ATTR_GRAPH = 5,
    TX_IR_ATTR_FLOATS = 6,
    TX_IR_ATTR_INTS = 7,
    TX_IR_ATTR_STRINGS = 8,
    TX_IR_ATTR_TENSORS = 9,
    TX_IR_ATTR_GRAPHS = 10,
    TX_IR_ATTR_SPARSE_TENSOR = 11,
    TX_IR_ATTR_SPARSE_TENSORS = 12,
    TX_IR_ATTR_TYPE_PROTO = 13,
    TX_IR_ATTR_TYPE_PROTOS = 14
} tx_ir_attr_type;

typedef struct tx_ir_attr {
    char *name;
    tx_ir_attr_type type;
    /* Inside a function body: the call-site attribute this one stands for
     * (AttributeProto.ref_attr_name), else NULL. */
    char *ref_attr_name;

    float f;
    int64_t i;
    char *s;           /* STRING: a copy with a NUL appended (bytes may hold NULs) */
    size_t s_len;      /* bytes in s, without the appended NUL */
    const Onnx__TensorProto *t;             /* TENSOR (into the file) */
    const Onnx__SparseTensorProto *sparse_tensor; /* SPARSE_TENSOR (into the file) */
    tx_ir_graph *g;                         /* GRAPH: owned by the IR */

    const float *floats;   size_t n_floats;   /* FLOATS (into the file) */
    const int64_t *ints;   size_t n_ints;     /* INTS (into the file) */
    char **strings;        size_t n_strings;  /* STRINGS: copies, NUL appended */
    size_t *string_lens;                      /* STRINGS: byte lengths */
    const Onnx__TensorProto *const *tensors; size_t n_tensors; /* TENSORS (into the file) */
    tx_ir_graph **graphs;  size_t n_graphs;   /* GRAPHS: owned by the IR */
} tx_ir_attr;

typedef struct tx_ir_node {
    char *name;    /* as written; "" when the file gives none */
    char *label;   /* for messages: name, or "#<index>" when unnamed; never NULL */
    char *op_type;
    char *domain;  /* normalized: "ai.onnx" is stored as "" */
    char *overload;/* NodeProto.overload (IR >= 10), "" when absent */
    /* Version imported for `domain` by the scope's opset imports (the
     * model's, or a function's own), or -1 when the domain is not imported
     * (allowed only for model-local function domains; otherwise a
     * validation error). */
    int64_t opset;
    int32_t index; /* position in graph->nodes */

    int32_t *inputs;   size_t n_inputs;   /* value indices; -1 = omitted optional */
    int32_t *outputs;  size_t n_outputs;  /* value indices; -1 = omitted optional */
    /* Values of this graph read by this node's subgraphs (captured outer
     * values), each listed once. */
    int32_t *implicit_inputs; size_t n_implicit_inputs;
    tx_ir_attr *attrs; size_t n_attrs;

    /* A call of a model-local function: index into model->functions, else -1. */
    int32_t function;
    const Onnx__NodeProto *proto; /* into the file */
} tx_ir_node;

typedef struct tx_ir_opset {
    char *domain; /* normalized ("" for ai.onnx) */
    int64_t version;
} tx_ir_opset;

/* Name -> value index table (open addressing); private to the IR code but
 * kept inline so a graph is one allocation-tree. */
typedef struct tx_ir_name_index {
    int32_t *slots;  /* -1 = empty */
    size_t cap;      /* power of two, or 0 */
} tx_ir_name_index;

struct tx_ir_graph {
    char *name;                 /* "" when absent */
    tx_ir_value *values;  size_t n_values;
    size_t values_cap;          /* allocated entries (builder bookkeeping) */
    tx_ir_node *nodes;    size_t n_nodes;  /* topological order (after validation) */
    int32_t *inputs;      size_t n_inputs;       /* value indices, file order */
    int32_t *outputs;     size_t n_outputs;      /* value indices, file order */
    int32_t *initializers; size_t n_initializers;/* dense then sparse, file order */

    /* Enclosing graph and the node (index in parent) whose attribute holds
     * this graph; NULL/-1 for the main graph and function bodies. */
    tx_ir_graph *parent;
    int32_t parent_node;
    /* Opset imports in force (the model's or the function's). Not owned. */
    const tx_ir_opset *opsets; size_t n_opsets;
    /* The function this graph is the body of (index into model->functions),
     * or -1. Nested graphs inherit it. */
    int32_t function;

    tx_ir_name_index index;
    const Onnx__GraphProto *proto; /* NULL for function bodies */
};

typedef struct tx_ir_function {
    char *domain;   /* normalized */
    char *name;
    char *overload; /* "" when absent */
    char **inputs;      size_t n_inputs;      /* formal parameter names */
    char **outputs;     size_t n_outputs;
    char **attributes;  size_t n_attributes;  /* attribute names (no defaults) */
    tx_ir_opset *opsets; size_t n_opsets;     /* the function's own imports */
    tx_ir_graph *body;  /* inputs/outputs are the formal parameters */
    const Onnx__FunctionProto *proto;
} tx_ir_function;

typedef struct tx_ir_model {
    tx_ir_graph *graph;                 /* the main graph; never NULL */
    tx_ir_opset *opsets; size_t n_opsets;
    int64_t ir_version;
    char *producer_name;    /* "" when absent */
    char *producer_version; /* "" when absent */
    char *domain;           /* model domain, "" when absent */
    tx_ir_function *functions; size_t n_functions;
    const tx_onnx_file *file;           /* the file the IR indexes (not owned) */
} tx_ir_model;

/* ---- building, validating, freeing (ir_build.c, ir_validate.c, ir_free.c) */

/* Builds the IR over `file` (which must outlive *out). Fails with
 * TEEXEC_ERR_BAD_MODEL (node name set where one applies) on structure the
 * IR cannot represent: a value defined twice, a graph input listed twice,
 * an unnamed input/output/initializer, a domain imported twice, a function
 * defined twice, a missing graph; with TEEXEC_ERR_LIMIT past TX_MAX_RANK or
 * int32 counts. Names read but defined nowhere become UNDEFINED values and
 * are left, like everything else, to tx_ir_validate. Errors inside nested
 * graphs and function bodies are prefixed with where they are. Not done:
 * FunctionProto.attribute_proto (defaults, IR >= 9; not in the system's
 * onnx.proto) is not read. */
teexec_status *tx_ir_build(const tx_onnx_file *file, tx_ir_model **out) TX_NODISCARD;

/* Checks the rules of ONNX's IR.md that the builder does not: every
 * non-empty input defined in scope, topological order (a cycle is reported
 * as one, naming its nodes), graph outputs defined, every node's domain
 * imported. Recurses into subgraphs and function bodies. Errors are
 * TEEXEC_ERR_BAD_MODEL with the node name set. */
teexec_status *tx_ir_validate(const tx_ir_model *model) TX_NODISCARD;

void tx_ir_model_free(tx_ir_model *model);

/* ---- lookups (ir_access.c); all pure reads */

/* Index of the value named `name` in `g` (OUTER/UNDEFINED entries included),
 * or -1. Does not search enclosing graphs. */
int32_t tx_ir_graph_find_value(const tx_ir_graph *g, const char *name);

/* The value an OUTER entry stands for, following parents up to its
 * definition; `*owner` (may be NULL) gets the graph holding it. A non-OUTER
 * value is returned as is. */
const tx_ir_value *tx_ir_value_resolve(const tx_ir_graph *g, int32_t value,
                                       const tx_ir_graph **owner);

/* Imported version of `domain` ("" or "ai.onnx" for the default domain) in
 * `model`'s imports, or -1. */
int64_t tx_ir_model_opset(const tx_ir_model *model, const char *domain);

/* Index into model->functions of the function (domain, name, overload)
 * (overload NULL or "" for none), or -1. */
int32_t tx_ir_model_find_function(const tx_ir_model *model, const char *domain,
                                  const char *name, const char *overload);

/* "" for "ai.onnx", otherwise the domain itself (never NULL; NULL -> ""). */
const char *tx_ir_normalize_domain(const char *domain);

/* ---- attribute accessors for op implementations (ir_access.c)
 *
 * Each looks the attribute up by name. When absent, the default is stored
 * (or NULL / 0 for arrays and objects) and NULL returned. When present with
 * another type, a TEEXEC_ERR_BAD_MODEL status naming the node and attribute
 * is returned and *out is left as the default. Returned pointers are owned
 * by the IR (or the file) and live as long as they do. */

const tx_ir_attr *tx_ir_attr_find(const tx_ir_node *node, const char *name);

teexec_status *tx_ir_attr_int(const tx_ir_node *node, const char *name,
                              int64_t def, int64_t *out) TX_NODISCARD;
/* FLOAT attributes; an INT attribute is not converted (ONNX is strict). */
teexec_status *tx_ir_attr_float(const tx_ir_node *node, const char *name,
                                float def, float *out) TX_NODISCARD;
/* NUL-terminated copy; *len (may be NULL) gets the byte length. */
teexec_status *tx_ir_attr_string(const tx_ir_node *node, const char *name,
                                 const char *def, const char **out,
                                 size_t *len) TX_NODISCARD;
teexec_status *tx_ir_attr_ints(const tx_ir_node *node, const char *name,
                               const int64_t **out, size_t *count) TX_NODISCARD;
teexec_status *tx_ir_attr_floats(const tx_ir_node *node, const char *name,
                                 const float **out, size_t *count) TX_NODISCARD;
teexec_status *tx_ir_attr_strings(const tx_ir_node *node, const char *name,
                                  char *const **out, size_t *count) TX_NODISCARD;
/* The TensorProto (not decoded: use tx_tensor_from_proto). */
teexec_status *tx_ir_attr_tensor(const tx_ir_node *node, const char *name,
                                 const Onnx__TensorProto **out) TX_NODISCARD;
/* The TENSOR attribute decoded into *out (owned by the caller: release with
 * tx_tensor_release); *found says whether the node has it (when not, *out
 * is zeroed and NULL is returned). `file` supplies external data. For
 * executors, which must not read the TensorProto themselves. */
teexec_status *tx_ir_attr_tensor_value(const tx_ir_node *node, const char *name,
                                       const tx_onnx_file *file, tx_tensor *out,
                                       bool *found) TX_NODISCARD;
teexec_status *tx_ir_attr_graph(const tx_ir_node *node, const char *name,
                                const tx_ir_graph **out) TX_NODISCARD;

/* Decodes every stored tensor of g and its nested graphs (initializers and
 * their sparse parts, TENSOR/TENSORS attributes) into a temporary and drops
 * it, one at a time: payload, dtype and external-data errors surface at
 * load, naming the node. */
teexec_status *tx_ir_check_tensors(const tx_onnx_file *file, const tx_ir_graph *g) TX_NODISCARD;

/* An initializer value's size as stored, for statistics: *dtype (0 when the
 * file gives no valid one), *elements (sparse: the stored values) and *bytes
 * (sparse: values + indices; strings: their byte lengths; saturating).
 * False, with zeros, when v is no initializer. */
bool tx_ir_initializer_size(const tx_ir_value *v, int *dtype, uint64_t *elements,
                            uint64_t *bytes);

/* A required attribute that is absent: the standard error
 * `node "X" (Op) needs attribute "name"` (BAD_MODEL, node set). */
teexec_status *tx_ir_attr_missing(const tx_ir_node *node, const char *name) TX_NODISCARD;

#endif
