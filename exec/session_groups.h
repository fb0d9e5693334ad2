/*
 * session_groups.h - the CPU session runs the fuser plan (planner/plan.h):
 * each CHAIN group of te.ops basic ops runs through the group executor
 * (exec/group_exec.h) with the plan's forward layout and quantization plan
 * under the session's recipe; every other node (STANDARD groups) runs node
 * by node as before.
 *
 * A group runs where its first node stands in the node order (groups.c:
 * every input it reads from outside is ready there) and writes the values
 * that leave it: its main output and the forks (extra output 0) of its
 * ops. The values inside a chain have no other reader, so nothing else of
 * the run needs them.
 *
 * A CHAIN group runs node by node instead (and its kernels are recorded as
 * one unfused kernel per op) only where the group executor cannot take it:
 * a node of it was folded at plan time, it has no main input or output,
 * one of its extra inputs is a value made inside the chain that is not a
 * fork, or a node has a second extra output. The trace makes this visible:
 * a plan with a fusion in such a group does not match what ran.
 *
 * Ownership: the tx_sgroups belongs to its tx_plan (tx_sgroups_free); the
 * tensors a group run writes belong to the run's store. Thread-safety: as
 * the session (one thread).
 */
#ifndef TEEXEC_EXEC_SESSION_GROUPS_H
#define TEEXEC_EXEC_SESSION_GROUPS_H

#include "exec/group_exec.h"
#include "import/shape_infer_te.h"
#include "exec/session_internal.h"

/* How one CHAIN group runs through the group executor; shared with the CPU
 * trainer (exec/train.c), which runs the same groups forward and
 * backward. */
typedef struct tx_sgroup {
    bool gx;                   /* through the group executor */
    tx_group_op *ops;             /* n_ops */
    tx_te_node *dec;           /* n_ops: schema, attributes, parameter slots */
    const tx_tensor **ptrs;    /* per op: its params, then the extra inputs (filled per run) */
    size_t *ptr_off;           /* n_ops */
    tx_group_desc grp;
} tx_sgroup;

/* Prepares CHAIN group pg of g for the group executor; leaves sg->gx false
 * when it has to run node by node (see above). skip: per node, folded at
 * plan time (may be NULL). params_need_grad / input_needs_grad start false:
 * a trainer sets them. Free with tx_sgroup_free, also after a failure. */
teexec_status *tx_sgroup_prepare(const tx_ir_graph *g, const bool *skip,
                                 const tx_plan_group *pg, tx_sgroup *sg) TX_NODISCARD;
/* Points the group's parameters and external extra inputs at cur[value]. */
teexec_status *tx_sgroup_bind(const tx_ir_graph *g, const tx_plan_group *pg, tx_sgroup *sg,
                              const tx_tensor *const *cur) TX_NODISCARD;
void tx_sgroup_free(tx_sgroup *sg);

/* fp8-delayed: sets up *delayed (one slot per quantized operand of the
 * plan) the first time (*has_delayed false), else checks the plan fits it.
 * No-op for other recipes. */
teexec_status *tx_sgroups_init_delayed(const tx_recipe *recipe, const tx_fuser_plan *fp,
                                      tx_delayed_state *delayed, bool *has_delayed) TX_NODISCARD;

/* Builds p->fplan for p->vals (inference, the session's recipe, device
 * "cpu") and decides how each CHAIN group runs. Also sets up the
 * session's fp8-delayed state on the first plan. */
teexec_status *tx_sgroups_build(teexec_session *s, tx_plan *p) TX_NODISCARD;
void tx_sgroups_free(tx_plan *p);

/* For node i of the graph: 1 when it starts a group that runs through the
 * group executor, -1 when it belongs to such a group but does not start it
 * (skip it), 0 when it runs on its own. */
int tx_sgroups_role(const tx_plan *p, size_t node);

/* Runs the group that node `first` starts: reads its inputs from cur
 * (per value), writes the values leaving it into store (owned tensors) and
 * points cur at them. Appends its kernels to the session's trace. */
teexec_status *tx_sgroups_run(teexec_session *s, const tx_plan *p, size_t first,
                              const tx_tensor **cur, tx_tensor *store) TX_NODISCARD;

/* Appends the unfused kernel of node `node` to the trace when the node is
 * part of a CHAIN group that runs node by node. */
teexec_status *tx_sgroups_trace_node(teexec_session *s, const tx_plan *p,
                                     size_t node) TX_NODISCARD;

/* After a run: rolls the fp8-delayed state (no-op for other recipes). */
void tx_sgroups_after_run(teexec_session *s);

#endif
