/* model_lower.c - inlined and lowered copies of a model (model_lower.h). */
#include "exec/model_lower.h"

#include "format/te_schema.h"
#include "import/fold.h"
#include "import/rewrite.h"

#include <stdlib.h>
#include <string.h>

bool tx_model_has_calls(const teexec_model *model)
{
    if (!model || !model->ir) return false;
    const tx_ir_graph *g = model->ir->graph;
    for (size_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].function >= 0) return true;
    return false;
}

char *tx_model_base_dir(const teexec_model *model)
{
    if (!model || !model->file || !model->file->base_dir) return NULL;
    return strdup(model->file->base_dir);
}

/* Serializes g and loads the bytes as a derived model (not prepared again),
 * external data (kept as references) resolved against the source's folder,
 * under the budgets the source was loaded with; the lowering's own big
 * initializers travel as side data (import/rewrite.h), so a lowered model
 * of any size loads. */
static teexec_status *reload(const teexec_model *src, const tx_rw_graph *g, teexec_model **out)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    tx_side_data side = {0};
    TX_TRY(tx_rw_emit_keep_external(g, &side, &bytes, &len));
    const char *base = src->file ? src->file->base_dir : NULL;
    const teexec_load_options *limits = src->file ? &src->file->limits : NULL;
    teexec_status *st = tx_model_load_derived(bytes, len, base, limits, &side, out);
    free(bytes);
    tx_side_free(&side); /* emptied when the model took it */
    return st;
}

/* Appends src's notes to dst (src freed). */
static teexec_status *merge_notes(tx_lower_report *dst, tx_lower_report *src)
{
    teexec_status *st = NULL;
    for (size_t i = 0; src && i < src->n_notes && !st; i++) {
        const tx_lower_note *x = &src->notes[i];
        st = tx_lower_note_add(dst, x->pattern, x->node, x->lowered, x->reason);
    }
    tx_lower_report_free(src);
    return st;
}

teexec_status *tx_model_lower(const teexec_model *model, tx_lower_report **report,
                              teexec_model **out)
{
    return tx_model_lower_with(model, NULL, report, out);
}

teexec_status *tx_model_lower_with(const teexec_model *model, const tx_lower_options *o,
                                   tx_lower_report **report, teexec_model **out)
{
    *out = NULL;
    if (report) *report = NULL;
    tx_rw_graph *g = NULL;
    TX_TRY(tx_rw_from_ir(model->ir, &g));
    tx_lower_report *rep = calloc(1, sizeof *rep), *lowered = NULL;
    teexec_status *st = rep ? NULL : tx_oom();
    /* te.fused groups (a converted model's) were inlined: they are planned
     * afresh, so the old functions go */
    if (!st) st = tx_rw_drop_source_functions(g, TX_TE_FUSED_DOMAIN);
    /* constants first, so the patterns see masks and tables as constants */
    if (!st) st = tx_fold(g, rep, NULL);
    if (!st) st = tx_lower(g, o, &lowered);
    if (!st) st = merge_notes(rep, lowered);
    else tx_lower_report_free(lowered);
    if (!st) st = reload(model, g, out);
    tx_rw_free(g);
    if (st || !report) tx_lower_report_free(rep);
    else *report = rep;
    return st;
}

teexec_status *tx_model_kv_cache(const teexec_model *lowered, int64_t batch, int64_t capacity,
                                 tx_lower_report **report, teexec_model **out)
{
    *out = NULL;
    if (report) *report = NULL;
    tx_rw_graph *g = NULL;
    TX_TRY(tx_rw_from_ir(lowered->ir, &g));
    tx_lower_report *rep = calloc(1, sizeof *rep);
    teexec_status *st = rep ? NULL : tx_oom();
    if (!st) st = tx_lower_kv_cache(g, batch, capacity, rep);
    if (!st) st = reload(lowered, g, out);
    tx_rw_free(g);
    if (st || !report) tx_lower_report_free(rep);
    else *report = rep;
    return st;
}
