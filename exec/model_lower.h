/*
 * model_lower.h - derived models the executor and the converter work on:
 * the prepared model (model-local function calls inlined, as a converted
 * model's te.fused groups are, and constant subgraphs folded: what a
 * session or trainer runs), and the lowered model (folded, then standard
 * subgraphs rewritten into te.ops: what the planner plans).
 *
 * Both go through the rewrite graph (import/rewrite.h): the result is
 * serialized and loaded again by the normal loader, so it is checked like
 * any file. External data of the source model is resolved against the
 * source model's folder.
 *
 * Ownership: *out is a new model owned by the caller (teexec_model_destroy);
 * *report (lowering) is owned by the caller (tx_lower_report_free).
 * Thread-safety: pure over the (immutable) source model.
 */
#ifndef TEEXEC_EXEC_MODEL_LOWER_H
#define TEEXEC_EXEC_MODEL_LOWER_H

#include "exec/model_internal.h"
#include "import/lower.h"

#include <stdbool.h>

/* True when the main graph calls a model-local function. */
bool tx_model_has_calls(const teexec_model *model);

/* The model after constant folding (import/fold.h) and all lowering passes
 * (function calls inlined first); the report has the folding pass's notes
 * (pattern "ConstantFold") before the lowering passes'.
 * report may be NULL. */
teexec_status *tx_model_lower(const teexec_model *model, tx_lower_report **report,
                              teexec_model **out) TX_NODISCARD;
/* The same with the passes `o` enables (NULL = all). */
teexec_status *tx_model_lower_with(const teexec_model *model, const tx_lower_options *o,
                                   tx_lower_report **report, teexec_model **out) TX_NODISCARD;

/* A lowered model (exec/prepare.h tx_model_runnable) with its KV-cache
 * attention in DotProductAttention's cache mode (import/lower.h
 * tx_lower_kv_cache): what `teexec convert --kv-cache` writes. report may
 * be NULL. */
teexec_status *tx_model_kv_cache(const teexec_model *lowered, int64_t batch, int64_t capacity,
                                 tx_lower_report **report, teexec_model **out) TX_NODISCARD;

/* The folder external data of `model` is read from ("." for a model loaded
 * from a file without a folder part, NULL for one loaded from memory
 * without a base folder). Malloc'd; caller frees. */
char *tx_model_base_dir(const teexec_model *model);

#endif
