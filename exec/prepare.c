/* prepare.c - lowering once at load (prepare.h). */
#include "exec/prepare.h"

#include "exec/model_lower.h"
#include "format/tensor_proto.h"

#include <stdlib.h>
#include <string.h>

void tx_prepared_free(tx_prepared *p)
{
    if (!p) return;
    teexec_model_destroy(p->lowered);
    tx_lower_report_free(p->report);
    tx_param_sources_free(p->sources, p->n_sources);
    teexec_status_destroy(p->error);
    free(p);
}

/* The annotations a source list is read from may have been written by an
 * earlier lowering (a converted model keeps weight_source / weight_layout
 * on its Linears): then the user's initializer under the lowered name is
 * already the lowered tensor, and the mapping is the identity. Decided by
 * the bytes: equal tensors under one name are the same parameter. */
/* A user initializer of shape [b, ...] held as [1, ...] in the lowered model
 * (import/lower_unbroadcast.c) is the lowered tensor repeated b times. */
static void mark_repeats(const teexec_model *user, tx_prepared *p)
{
    const tx_ir_graph *ug = user->ir->graph, *lg = p->lowered->ir->graph;
    for (size_t i = 0; i < p->n_sources; i++) {
        tx_param_source *s = &p->sources[i];
        if (strcmp(s->original, s->lowered) != 0 || s->transposed || s->rows >= 0 ||
            s->orig_rank > 0)
            continue;
        int32_t uv = tx_ir_graph_find_value(ug, s->original);
        int32_t lv = tx_ir_graph_find_value(lg, s->lowered);
        if (uv < 0 || lv < 0) continue;
        const tx_ir_value *a = &ug->values[uv], *b = &lg->values[lv];
        if (!(a->flags & TX_IR_VALUE_INITIALIZER) || !(b->flags & TX_IR_VALUE_INITIALIZER) ||
            a->rank != b->rank || a->rank < 1 || b->dims[0] != 1 || a->dims[0] <= 1)
            continue;
        bool rest = true;
        for (int32_t d = 1; d < a->rank; d++) rest &= a->dims[d] == b->dims[d];
        if (rest) s->repeat = a->dims[0];
    }
}

static teexec_status *drop_inherited_sources(const teexec_model *user, tx_prepared *p)
{
    const tx_ir_graph *ug = user->ir->graph, *lg = p->lowered->ir->graph;
    for (size_t i = 0; i < p->n_sources; i++) {
        tx_param_source *s = &p->sources[i];
        if (strcmp(s->original, s->lowered) != 0 ||
            (!s->transposed && s->rows < 0 && s->orig_rank == 0))
            continue;
        int32_t uv = tx_ir_graph_find_value(ug, s->original);
        int32_t lv = tx_ir_graph_find_value(lg, s->lowered);
        if (uv < 0 || lv < 0 || !ug->values[uv].initializer || !lg->values[lv].initializer)
            continue;
        tx_tensor a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        teexec_status *st = tx_tensor_from_proto(ug->values[uv].initializer, user->file, &a);
        if (!st) st = tx_tensor_from_proto(lg->values[lv].initializer, p->lowered->file, &b);
        bool same = !st && a.dtype == b.dtype && a.rank == b.rank && a.numel == b.numel &&
                    memcmp(a.dims, b.dims, sizeof(int64_t) * (size_t)a.rank) == 0 &&
                    a.nbytes == b.nbytes && memcmp(a.data, b.data, a.nbytes) == 0;
        tx_tensor_release(&a);
        tx_tensor_release(&b);
        TX_TRY(st);
        if (same) {
            s->transposed = false;
            s->row_offset = 0;
            s->rows = -1;
            s->orig_rank = 0;
        }
    }
    return NULL;
}

teexec_status *tx_prepare_at_load(teexec_model *m)
{
    tx_prepared *p = calloc(1, sizeof *p);
    if (!p) return tx_oom();
    /* Q/DQ pairs stay standard ops in what runs: a quantized export then
     * computes exactly what its file says (the quant pass would turn them
     * into annotations, which only a recipe applies). */
    tx_lower_options lo;
    tx_lower_options_default(&lo);
    lo.quant = false;
    teexec_status *st = tx_model_lower_with(m, &lo, &p->report, &p->lowered);
    if (!st) st = tx_param_sources(p->lowered->ir->graph, &p->sources, &p->n_sources);
    if (!st) st = drop_inherited_sources(m, p);
    if (!st) mark_repeats(m, p);
    if (st && teexec_status_code(st) == TEEXEC_ERR_NO_MEMORY) {
        tx_prepared_free(p);
        return st;
    }
    if (st) {
        /* kept for the executors; the model itself loaded fine */
        teexec_model_destroy(p->lowered);
        p->lowered = NULL;
        p->error = tx_status_prefix(st, "preparing the model to run");
    }
    m->prepared = p;
    return NULL;
}

teexec_status *tx_model_runnable(const teexec_model *model, const teexec_model **out,
                                 const tx_prepared **prep)
{
    *out = NULL;
    if (prep) *prep = NULL;
    if (!model) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "model is NULL");
    const tx_prepared *p = model->prepared;
    if (!p) {
        *out = model;
        return NULL;
    }
    if (p->error)
        return tx_status_new(teexec_status_code(p->error), teexec_status_file(p->error),
                             teexec_status_node(p->error), "%s", teexec_status_message(p->error));
    *out = p->lowered;
    if (prep) *prep = p;
    return NULL;
}

const tx_param_source *tx_prepared_source(const tx_prepared *p, const char *name)
{
    if (!p || !name) return NULL;
    for (size_t i = 0; i < p->n_sources; i++)
        if (!strcmp(p->sources[i].original, name)) return &p->sources[i];
    return NULL;
}
