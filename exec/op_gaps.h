/*
 * op_gaps.h - collects every op an executor cannot run (no kernel, no
 * backward rule, not on this device) while it prepares a model, and turns
 * them into ONE status naming each distinct gap once with the nodes that
 * have it:
 *   unsupported op Cos (domain "", opset 17) at nodes /a/Cos, /b/Cos;
 *   unsupported op Sin (domain "", opset 17) at node /a/Sin
 * so a user sees every gap of a model when a session or trainer is
 * created, never in the middle of a run or a step.
 *
 * Ownership: a tx_op_gaps owns its copies of the messages; node names are
 * borrowed (they live in the IR). Thread-safety: one thread per list.
 */
#ifndef TEEXEC_EXEC_OP_GAPS_H
#define TEEXEC_EXEC_OP_GAPS_H

#include "base/status.h"

#include <stddef.h>

/* Nodes named per gap before " and N more". */
#define TX_OP_GAP_NODES_SHOWN 4

typedef struct tx_op_gap {
    char *what;
    const char *nodes[TX_OP_GAP_NODES_SHOWN];
    size_t n_nodes;
} tx_op_gap;

typedef struct tx_op_gaps {
    tx_op_gap *v;
    size_t n, cap;
} tx_op_gaps;

/* Records that node `node` has gap `what` (the same text twice is one gap). */
teexec_status *tx_op_gaps_add(tx_op_gaps *g, const char *what, const char *node) TX_NODISCARD;

/* NULL when nothing was recorded; otherwise a status of `code` for `file`
 * listing every gap (its node set when there is exactly one node). */
teexec_status *tx_op_gaps_status(const tx_op_gaps *g, teexec_code code, const char *file);

void tx_op_gaps_free(tx_op_gaps *g);

#endif
