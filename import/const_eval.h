/*
 * const_eval.h - evaluation of constant values, in two forms:
 *
 * tx_ce_eval_node evaluates one standard-domain node whose inputs are all
 * known values (const_eval_node.c says exactly how each op computes and
 * rounds). The typing pass (infer_graph.h) and the folding pass (fold.h)
 * call it node by node.
 *
 * tx_ce_eval / tx_ce_ints answer a lowering pattern's "what is this value,
 * if it is a constant?" on a rewrite graph (import/rewrite.h), walking back
 * from the value through its producers (initializers, Constant nodes, and
 * any node tx_ce_eval_node evaluates; Shape(x) of a non-constant x from x's
 * declared type when it is fully static) without caring how it was built.
 * Results come back as doubles (bool as 0/1; int64 beyond 2^53 is not
 * representable: refused as a shape entry, except the +-2^63 sentinels
 * Slice uses for "to the end"). A value that depends on a graph input, a
 * node the evaluator declines, or a result over TX_CE_MAX_ELEMENTS
 * elements is "not constant".
 *
 * Ownership: a tx_ce_value owns its `v` array; release with
 * tx_ce_release. tx_ce_eval_node writes owned tensors into its outputs
 * (released by tx_infer_value_clear). Thread-safety: tx_ce_eval_node is
 * pure; tx_ce_eval reads only the graph it is given (lookups may rebuild
 * the graph's lazy indexes: one thread per graph).
 */
#ifndef TEEXEC_IMPORT_CONST_EVAL_H
#define TEEXEC_IMPORT_CONST_EVAL_H

#include "import/rewrite.h"
#include "import/shape_infer.h"

#include <stdbool.h>
#include <stdint.h>

#define TX_CE_MAX_RANK 8
/* The most elements one evaluated node may produce. */
#define TX_CE_MAX_ELEMENTS (1u << 22)
/* The most multiply-adds of one evaluated MatMul. */
#define TX_CE_MAX_MATMUL (1u << 24)

/* Evaluates node n. out[0..n_outputs) must hold the outputs as the node's
 * rule typed them (shape known); in[k] (NULL for an omitted input) must
 * each have a value. On success every output gets its value (owned), and
 * *declined is NULL; when the node cannot be evaluated here *declined says
 * why (a static sentence) and the outputs get no value. The status is
 * non-NULL only for an allocation failure. */
teexec_status *tx_ce_eval_node(const tx_ir_node *n, const tx_onnx_file *file,
                               const tx_infer_value *const *in, tx_infer_value *out,
                               const char **declined) TX_NODISCARD;

typedef struct tx_ce_value {
    int32_t rank;
    int64_t dims[TX_CE_MAX_RANK];
    uint64_t n;
    double *v;
} tx_ce_value;

void tx_ce_release(tx_ce_value *x);

/* Evaluates `value`. *is_const says whether it is a constant this module
 * can compute (then *out holds it; otherwise *out is empty). The status is
 * non-NULL only for an allocation failure. */
teexec_status *tx_ce_eval(tx_rw_graph *g, const char *value, tx_ce_value *out,
                          bool *is_const) TX_NODISCARD;

/* Convenience for shape-like values: a constant of rank <= 1 with at most
 * `cap` integral entries, copied into out[0..*n). False otherwise (an
 * allocation failure also answers false: the caller then declines). */
bool tx_ce_ints(tx_rw_graph *g, const char *value, int64_t *out, size_t cap, size_t *n);

/* The same walk, answering with the typed tensor (*out owned by the
 * caller; empty when *is_const is false). */
teexec_status *tx_ce_eval_tensor(tx_rw_graph *g, const char *value, tx_tensor *out,
                                 bool *is_const) TX_NODISCARD;

#endif
