/*
 * lower_match.h - small structural questions the pattern passes
 * (lower_norm.c, lower_act.c, lower_residual.c) ask of a rewrite graph:
 * "is this value made by an X node", "is this node its only reader",
 * "is this input a scalar constant close to c", and a fixed-size set of
 * node indices a match collects so it can remove them together.
 *
 * Constants are compared with tx_lm_close: PyTorch writes its literals
 * (0.5, 1/sqrt(2), sqrt(2/pi), 0.044715, ...) as float32 initializers or
 * Constant nodes, so a value matches when it is within a few float32 ulps
 * of the exact number, and nothing looser: a constant off in the 6th
 * digit is another formula.
 *
 * Ownership: returned node pointers and value names point into the graph
 * and are valid until its next edit. Thread-safety: the functions read
 * only the graph they are given (lookups may rebuild its lazy indexes, so
 * one graph is used by one thread at a time, as rewrite.h says).
 */
#ifndef TEEXEC_IMPORT_LOWER_MATCH_H
#define TEEXEC_IMPORT_LOWER_MATCH_H

#include "import/rewrite.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most nodes one pattern removes (the decomposed LayerNorm has 9). */
#define TX_LM_MAX_NODES 24

typedef struct tx_lm_set {
    size_t idx[TX_LM_MAX_NODES];
    size_t n;
    bool overflow;
} tx_lm_set;

/* Adds a node index once (repeats ignored). */
void tx_lm_set_add(tx_lm_set *s, size_t node);
bool tx_lm_set_has(const tx_lm_set *s, size_t node);
/* The smallest index in s (the pattern's first node in file order); s non-empty. */
size_t tx_lm_set_first(const tx_lm_set *s);

/* The live node at `index`, or NULL (out of range or dead). */
tx_rw_node *tx_lm_node(tx_rw_graph *g, int64_t index);

/* True when n is (domain, op_type); domain "" is ai.onnx. */
bool tx_lm_is(const tx_rw_node *n, const char *domain, const char *op_type);

/* The live producer of `value` when it is (domain, op_type), else -1. */
int64_t tx_lm_producer_op(tx_rw_graph *g, const char *value, const char *domain,
                          const char *op_type);

/* The one node reading `value` (it may read it in several slots), or -1
 * when no node or several nodes read it, or it is a graph output (then
 * the value must survive, so it cannot be folded into a pattern). */
int64_t tx_lm_sole_reader(tx_rw_graph *g, const char *value);

/* Number of distinct live nodes reading `value`. */
size_t tx_lm_reader_count(tx_rw_graph *g, const char *value);

/* True when every read of `value` is by a node in s, and it is not a
 * graph output: it may then disappear with the pattern. */
bool tx_lm_reads_only_within(tx_rw_graph *g, const char *value, const tx_lm_set *s);

/* For a node with exactly two inputs one of which is `value`: the other
 * input (the second one when both are `value`), else NULL. */
const char *tx_lm_other_input(const tx_rw_node *n, const char *value);

/* True when got is within float32 rounding of want (a few ulps). */
bool tx_lm_close(double got, double want);

/* True when `value` is a one-element constant close to want. */
bool tx_lm_scalar_is(tx_rw_graph *g, const char *value, double want);

/* For a binary node (Mul, Add, ...) with one scalar-constant input: its
 * index (0 or 1) and value; -1 when neither input is a scalar constant. */
int tx_lm_scalar_operand(tx_rw_graph *g, const tx_rw_node *n, double *value);

/* The reduction axes of a ReduceX node: the `axes` attribute (before
 * opset 18) or its constant second input (from 18). Returns true when it
 * reduces only the last axis of `x` (axes [-1], or [rank-1] with x's rank
 * known) and keeps dims (keepdims absent or 1). */
bool tx_lm_reduces_last_axis_keepdims(tx_rw_graph *g, size_t node, const char *x);

/* True when `value` is an initializer (not overridable by a graph input). */
bool tx_lm_is_param(tx_rw_graph *g, const char *value);

/* Removes every node of s. */
void tx_lm_remove_all(tx_rw_graph *g, const tx_lm_set *s);

/* malloc'd copy of s (NULL on failure or NULL s). */
char *tx_lm_strdup(const char *s);

/* ---- small builders ------------------------------------------------------ */

/* A new Transpose(in, perm) (or, for tx_lm_add_reshape, a Reshape of `in`
 * to the constant `dims`, in a new int64 initializer) whose output gets a
 * fresh name built from `hint`, or the name `out` when it is not NULL.
 * *made (may be NULL) gets the output's name, malloc'd. */
teexec_status *tx_lm_add_transpose(tx_rw_graph *g, const char *in, const int64_t *perm,
                                   size_t n, const char *hint, const char *out,
                                   char **made) TX_NODISCARD;
teexec_status *tx_lm_add_reshape(tx_rw_graph *g, const char *in, const int64_t *dims, size_t n,
                                 const char *hint, const char *out, char **made) TX_NODISCARD;

#endif
