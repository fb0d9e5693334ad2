/*
 * prepare.h - the one preparation step between a loaded model and every
 * executor: a model is lowered once, at load (import/lower.h: standard
 * subgraphs -> te.ops, constants folded, model-local te.fused groups
 * inlined), and that lowered copy is what the CPU session, the CPU trainer,
 * the CUDA executor and teexec_model_plan / teexec_model_convert run and
 * plan. The user's model stays as loaded: inspection, input/output names,
 * file names in messages and saved checkpoints speak of it.
 *
 * Every lowering pass runs but the quantization pass: Q/DQ pairs of a
 * quantized export stay standard ops feeding their GEMM, so the model
 * computes exactly what its file says under every executor.
 *
 * A lowered copy is itself a teexec_model (made by the loader from the
 * rewrite graph) whose `prepared` is NULL: it runs as it is.
 *
 * Lowering that fails (a malformed te.ops node, an internal limit) does not
 * fail the load -- `teexec inspect` must still work -- it is kept and
 * returned by whatever wants to run or plan the model.
 *
 * Ownership: the tx_prepared belongs to the model (freed by
 * teexec_model_destroy). Thread-safety: made before the model is shared and
 * immutable afterwards, like the model.
 */
#ifndef TEEXEC_EXEC_PREPARE_H
#define TEEXEC_EXEC_PREPARE_H

#include "exec/model_internal.h"
#include "import/lower.h"

typedef struct tx_prepared {
    teexec_model *lowered;          /* what runs; NULL when lowering failed */
    tx_lower_report *report;        /* what lowering found (plan --explain, convert) */
    /* Where each of the user's initializers lives in `lowered`
     * (import/lower.h tx_param_sources), for gradients, parameters and
     * checkpoints by the user's names. */
    tx_param_source *sources;
    size_t n_sources;
    teexec_status *error;           /* why lowering failed, or NULL */
} tx_prepared;

/* Lowers `m` (a freshly loaded model that is not itself a lowered copy)
 * and attaches the result. Fails only for an allocation failure; a
 * lowering error is kept in m->prepared->error. */
teexec_status *tx_prepare_at_load(teexec_model *m) TX_NODISCARD;

void tx_prepared_free(tx_prepared *p);

/* The model to run for `model`: its lowered copy, or `model` itself when
 * it is a lowered copy. *prep (may be NULL) gets the preparation, NULL for
 * a lowered copy. Returns (a copy of) the lowering error when lowering
 * failed. */
teexec_status *tx_model_runnable(const teexec_model *model, const teexec_model **out,
                                 const tx_prepared **prep) TX_NODISCARD;

/* The source of the user's initializer `name` in the lowered model, or
 * NULL when `name` is not one (or the model is a lowered copy). */
const tx_param_source *tx_prepared_source(const tx_prepared *p, const char *name);

#endif
