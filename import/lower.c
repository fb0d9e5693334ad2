/* lower.c - the lowering driver: options, the report, and tx_lower running
 * the passes in their fixed order. */
#include "import/lower.h"

#include <stdlib.h>
#include <string.h>

void tx_lower_options_default(tx_lower_options *o)
{
    o->unbroadcast = o->attention = o->rope = o->norms = o->linear = o->activations = o->quant =
        o->residual = o->embedding = o->layout = true;
}

void tx_lower_report_free(tx_lower_report *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_notes; i++) {
        free(r->notes[i].pattern);
        free(r->notes[i].node);
        free(r->notes[i].reason);
    }
    free(r->notes);
    free(r);
}

static char *dup_or_null(const char *s, bool *failed)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d) *failed = true;
    else memcpy(d, s, n);
    return d;
}

teexec_status *tx_lower_note_add(tx_lower_report *r, const char *pattern, const char *node,
                                 bool lowered, const char *reason)
{
    if (!r) return NULL;
    if (r->n_notes == r->cap_notes) {
        size_t cap = r->cap_notes ? r->cap_notes * 2 : 16;
        if (cap > SIZE_MAX / sizeof *r->notes) return tx_oom();
        tx_lower_note *p = realloc(r->notes, cap * sizeof *p);
        if (!p) return tx_oom();
        r->notes = p;
        r->cap_notes = cap;
    }
    bool failed = false;
    tx_lower_note n = {dup_or_null(pattern ? pattern : "", &failed),
                       dup_or_null(node ? node : "", &failed), lowered,
                       dup_or_null(reason, &failed)};
    if (failed) {
        free(n.pattern);
        free(n.node);
        free(n.reason);
        return tx_oom();
    }
    r->notes[r->n_notes++] = n;
    return NULL;
}

/* Removes nodes nothing reads any more (the constants and shape
 * arithmetic a lowered pattern left behind), until none is left: they
 * would otherwise be planned and run as groups of their own. ONNX ops have
 * no side effects, so a node whose outputs are all unread and none a graph
 * output can go. */
static void remove_dead_nodes(tx_rw_graph *g)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (size_t i = 0; i < tx_rw_node_count(g); i++) {
            tx_rw_node *n = tx_rw_node_at(g, i);
            if (!n || n->dead || n->n_outputs == 0) continue;
            bool dead = true;
            for (size_t k = 0; dead && k < n->n_outputs; k++) {
                const char *v = n->outputs[k];
                if (!v[0]) continue;
                size_t nc = 0;
                (void)tx_rw_consumers(g, v, &nc);
                if (nc > 0 || tx_rw_is_graph_output(g, v)) dead = false;
            }
            if (dead) {
                tx_rw_remove_node(g, i);
                changed = true;
            }
        }
    }
}

teexec_status *tx_lower(tx_rw_graph *g, const tx_lower_options *o, tx_lower_report **report)
{
    if (report) *report = NULL;
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_lower: no graph");
    tx_lower_options all;
    tx_lower_options_default(&all);
    if (!o) o = &all;
    tx_lower_report *r = calloc(1, sizeof *r);
    if (!r) return tx_oom();
    /* Order matters: unbroadcast first (patterns then see one parameter
     * where the exporter stored copies); attention, rope and norms first (their subgraphs contain
     * MatMuls and Adds the later passes would otherwise claim; rope after
     * attention, so the Transpose each puts around a [b, h, s, d] operand
     * cancels, and the layout pass removes the pairs left), the embeddings
     * before Linear (a tied LM head is found by the table's Gather or
     * Embedding either way; this keeps the notes in graph order), Linear
     * before the activations (SwiGLU merges two Linears) and before quant
     * (which annotates Linears), residual last (it rewires whatever Adds
     * are left between the lowered ops). */
    struct {
        bool on;
        teexec_status *(*fn)(tx_rw_graph *, tx_lower_report *);
        const char *name;
    } passes[] = {
        {o->unbroadcast, tx_lower_unbroadcast, "unbroadcast"},
        {o->attention, tx_lower_attention, "attention"},
        {o->rope, tx_lower_rope, "rope"},
        {o->layout, tx_lower_layout, "layout"},
        {o->norms, tx_lower_norms, "norms"},
        {o->embedding, tx_lower_embedding, "embedding"},
        {o->linear, tx_lower_linear, "linear"},
        {o->activations, tx_lower_activations, "activations"},
        {o->quant, tx_lower_quant, "quant"},
        {o->residual, tx_lower_residual, "residual"},
    };
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        if (!passes[i].on) continue;
        teexec_status *st = passes[i].fn(g, r);
        if (st) {
            tx_lower_report_free(r);
            return tx_status_prefix(st, "lowering (%s pass)", passes[i].name);
        }
    }
    remove_dead_nodes(g);
    if (report) *report = r;
    else tx_lower_report_free(r);
    return NULL;
}
