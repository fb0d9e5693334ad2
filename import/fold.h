/*
 * fold.h - load-time folding of constant subgraphs over a rewrite graph
 * (rewrite.h), run before lowering (so lowering patterns see causal masks,
 * rotary tables and scales as constants) and before a session runs a
 * model (so no constant work is left to run per call, and ops that only
 * ever see constants, such as the Cos/Sin of a rotary table, never have
 * to run at all).
 *
 * What is a constant here: an initializer of an integer or bool type that
 * is not also a graph input (and has at most TX_INFER_DECODE_INT_MAX
 * elements), the output of a Constant node, the output of
 * Shape/Size of a value whose shape is static (typed by infer_graph.h over
 * the whole graph), and the outputs of a folded node. Float initializers
 * are not: they are the model's parameters (the trainer trains every float
 * initializer that reaches the loss, and the converter and the gradient
 * mapping know them by name), so a node reading one (Gather of a position
 * table, Expand of a class token, 1 + w) is left to run.
 *
 * The rule: a standard-domain node whose inputs are all constants, that
 * writes no graph output and that the node evaluator computes
 * (const_eval.h: exact for integers and bools, float ops in double rounded
 * to the op's dtype after every op) is folded when
 *   - its outputs have at most TX_FOLD_SMALL_ELEMENTS elements in total, or
 *   - up to the evaluator's bound (TX_CE_MAX_ELEMENTS), when it is cheap
 *     (not a MatMul) and its result takes no more bytes than the constant
 *     inputs it replaces (inputs this node is the only reader of, which go
 *     away with it): folding never makes the model's constants grow beyond
 *     what a small result adds.
 * Otherwise it stays, and the report (pattern "ConstantFold") says why; a
 * node the rule or the evaluator refuses for its inputs (a Range with a
 * zero step, an out-of-range Gather index) is left to fail where the model
 * is typed or run, with that node's error.
 *
 * A folded node's outputs that a remaining node reads keep their names:
 * integer and bool ones become initializers, float ones Constant nodes (in
 * the folded node's place), because a float initializer is taken for a
 * trainable parameter and a mask or a rotary table is not one. Folded
 * nodes, and Constant nodes nothing but folded nodes read, are removed. A
 * graph with a cycle or an input nothing defines is left as it is (the
 * loader reports it).
 *
 * Ownership: notes are appended to the caller's report. Thread-safety: one
 * thread per graph.
 */
#ifndef TEEXEC_IMPORT_FOLD_H
#define TEEXEC_IMPORT_FOLD_H

#include "import/lower.h"
#include "import/rewrite.h"

#include <stddef.h>

/* Results up to this many elements fold whenever their inputs are
 * constants (the same bound as a CPU session's plan-time folding). */
#define TX_FOLD_SMALL_ELEMENTS 65536u

/* Folds g as described above. *n_folded (may be NULL) gets the number of
 * nodes folded; report (may be NULL) gets a note per constant node left
 * unfolded. Errors: allocation failures only. */
teexec_status *tx_fold(tx_rw_graph *g, tx_lower_report *report, size_t *n_folded) TX_NODISCARD;

#endif
