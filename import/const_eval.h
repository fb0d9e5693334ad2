/*
 * const_eval.h - evaluates small constant subgraphs of a rewrite graph
 * (import/rewrite.h): the shape arithmetic and mask construction PyTorch's
 * exporter leaves in a graph (Shape/Gather/Concat/Unsqueeze/ConstantOfShape/
 * Where(Equal(..., -1)) chains for Reshape and Expand targets; Trilu, Equal,
 * Cast, Flatten, Slice of a buffer for causal masks). A pattern matcher
 * asks "what is this value, if it is a constant?" without caring how it
 * was built.
 *
 * Values are computed in double (ints, bools and floats alike: bool is 0/1;
 * int64 beyond 2^53 is not representable: refused as a shape entry, except
 * the +-2^63 sentinels Slice uses for "to the end"). Only the ops listed
 * in const_eval.c are understood; anything else, a value that depends on a
 * graph input, or a result over TX_CE_MAX_ELEMENTS elements is "not
 * constant". Shape(x) of a non-constant x is answered from x's declared type
 * when it is fully static, else from the shape lower_shape.h derives.
 *
 * Ownership: a tx_ce_value owns its `v` array; release with
 * tx_ce_release. Thread-safety: reads only the graph it is given (lookups
 * may rebuild the graph's lazy indexes: one thread per graph).
 */
#ifndef TEEXEC_IMPORT_CONST_EVAL_H
#define TEEXEC_IMPORT_CONST_EVAL_H

#include "import/rewrite.h"

#include <stdbool.h>
#include <stdint.h>

#define TX_CE_MAX_RANK 8
#define TX_CE_MAX_ELEMENTS (1u << 22)

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

#endif
