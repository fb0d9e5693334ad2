/*
 * ir_internal.h - helpers shared by the IR builder, validator and freer.
 * Not for use outside import/. Thread-safety: the functions touch only the
 * graph passed in; a graph under construction belongs to one thread.
 */
#ifndef TEEXEC_IMPORT_IR_INTERNAL_H
#define TEEXEC_IMPORT_IR_INTERNAL_H

#include "import/ir.h"

/* Adds name -> value to g's index (the value's name must already be set and
 * must not be in the index). Grows the table as needed. */
teexec_status *tx_ir_index_add(tx_ir_graph *g, int32_t value) TX_NODISCARD;

/* Frees a graph and everything it owns (accepts NULL). */
void tx_ir_graph_free(tx_ir_graph *g);

/* The standard BAD_MODEL error about a node: `node "<label>" (<op>) <msg>`,
 * with the status's node set to the node's label. */
teexec_status *tx_ir_node_error(const tx_ir_node *node, const char *fmt, ...)
    TX_PRINTF(2, 3) TX_NODISCARD;

#endif
