/*
 * rewrite_internal.h - the insides of a tx_rw_graph, shared by the files
 * that implement rewrite.h: rewrite.c (edits, lookups), rewrite_inline.c
 * (tx_rw_from_ir and function inlining), rewrite_emit.c (tx_rw_emit) and
 * rewrite_outline.c (tx_rw_outline). Not for passes: they use rewrite.h.
 *
 * Lookups scan the node array instead of keeping an index: passes may edit
 * a node's inputs/outputs in place through tx_rw_node_at, and a scan can
 * never go stale. Graphs lowered here have at most a few thousand nodes.
 *
 * Ownership: as in rewrite.h. Thread-safety: one thread per graph.
 */
#ifndef TEEXEC_IMPORT_REWRITE_INTERNAL_H
#define TEEXEC_IMPORT_REWRITE_INTERNAL_H

#include "import/rewrite.h"

/* A graph input, output or value_info entry. */
typedef struct tx_rw_io {
    char *name;
    bool has_type;
    tx_rw_value_type type;
    /* The source's entry, emitted as is while `retyped` is false (keeps
     * sequence/map types and doc strings the rewrite layer does not model). */
    const Onnx__ValueInfoProto *src;
    bool retyped;
} tx_rw_io;

typedef struct tx_rw_init {
    char *name;
    const Onnx__TensorProto *borrowed; /* NULL when owned */
    tx_tensor owned;                   /* data NULL when borrowed */
} tx_rw_init;

/* A function made by tx_rw_outline. */
typedef struct tx_rw_function {
    char *domain, *name;
    char **inputs;  size_t n_inputs;
    char **outputs; size_t n_outputs;
    tx_rw_node *nodes; size_t n_nodes;
} tx_rw_function;

struct tx_rw_graph {
    const tx_ir_model *src;  /* borrowed tensors point into src->file */
    char *graph_name;

    tx_rw_node *nodes; size_t n_nodes, cap_nodes;
    tx_rw_io *inputs;  size_t n_inputs, cap_inputs;
    tx_rw_io *outputs; size_t n_outputs, cap_outputs;
    tx_rw_io *vinfo;   size_t n_vinfo, cap_vinfo;
    tx_rw_init *inits; size_t n_inits, cap_inits;
    tx_ir_opset *opsets; size_t n_opsets, cap_opsets;
    tx_rw_function *funcs; size_t n_funcs, cap_funcs;
    /* Source-model functions of this domain are not written back
     * (tx_rw_drop_source_functions); NULL keeps them all. */
    char *drop_domain;

    /* Strings handed out by tx_rw_fresh_name and arrays by
     * tx_rw_consumers: kept until the graph is freed (fresh names) or the
     * next edit (consumer arrays). */
    char **fresh; size_t n_fresh, cap_fresh;
    uint64_t fresh_counter;
    tx_ir_use **scratch; size_t n_scratch, cap_scratch;
};

/* Grows *arr (of *cap elements of `elem` bytes) to hold at least `need`. */
teexec_status *tx_rw_grow(void **arr, size_t *cap, size_t need, size_t elem) TX_NODISCARD;
char *tx_rw_strdup(const char *s);
void tx_rw_attr_clear(tx_rw_attr *a);
void tx_rw_node_clear(tx_rw_node *n);
/* Deep copy of an attribute (owned tensors cloned, borrowed kept). */
teexec_status *tx_rw_attr_copy(const tx_rw_attr *src, tx_rw_attr *dst) TX_NODISCARD;
/* Frees consumer arrays handed out since the last edit. */
void tx_rw_edited(tx_rw_graph *g);
/* Appends an attribute to node n (takes ownership of *a's contents). */
teexec_status *tx_rw_node_push_attr(tx_rw_node *n, tx_rw_attr *a) TX_NODISCARD;
/* True when `name` appears anywhere (nodes, names, io, initializers, functions). */
bool tx_rw_name_used(const tx_rw_graph *g, const char *name);
/* Index of the initializer called name, or -1. */
int64_t tx_rw_init_find(const tx_rw_graph *g, const char *name);
/* Adds an opset import unless the domain is already imported. */
teexec_status *tx_rw_add_opset(tx_rw_graph *g, const char *domain, int64_t version) TX_NODISCARD;

#endif
