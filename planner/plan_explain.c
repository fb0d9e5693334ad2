/*
 * plan_explain.c - a plan as text (`teexec plan`, with --explain every
 * declined fusion and its reason) and as one JSON object (`teexec plan
 * --json`, pinned by the golden tests). Both are deterministic: they print
 * only the plan's contents in its own order, never addresses or times, and
 * numbers in a fixed format.
 */
#include "planner/plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) TX_PRINTF(2, 3);
static void sb_add(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    size_t need = b->len + (size_t)n + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < need) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    if ((size_t)n < sizeof small) {
        memcpy(b->s + b->len, small, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* A JSON string literal (quotes included); NULL prints null. */
static void sb_json_str(sbuf *b, const char *s)
{
    if (!s) {
        sb_add(b, "null");
        return;
    }
    sb_add(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') sb_add(b, "\\%c", *p);
        else if (*p == '\n') sb_add(b, "\\n");
        else if (*p == '\t') sb_add(b, "\\t");
        else if (*p < 0x20) sb_add(b, "\\u%04x", *p);
        else sb_add(b, "%c", *p);
    }
    sb_add(b, "\"");
}

static teexec_status *sb_finish(sbuf *b, char **out)
{
    if (b->oom || !b->s) {
        free(b->s);
        return tx_oom();
    }
    *out = b->s;
    return NULL;
}

static const char *node_label(const tx_ir_graph *g, int32_t node)
{
    if (!g || node < 0 || (size_t)node >= g->n_nodes) return NULL;
    return g->nodes[node].label;
}

static const char *value_name(const tx_ir_graph *g, int32_t v)
{
    if (!g || v < 0 || (size_t)v >= g->n_values) return NULL;
    return g->values[v].name;
}

static const char *op_name(const tx_plan_group *grp, const tx_ir_graph *g, int32_t i)
{
    if (grp->kind == TX_GROUP_CHAIN && grp->ops) return tx_te_schema(grp->ops[i])->name;
    return g->nodes[grp->nodes[i]].op_type;
}

static const char *fusion_name(tx_fusion_id f)
{
    const tx_fusion_info *fi = tx_fusion_info_of(f);
    return fi ? fi->name : "unknown";
}

static void header_line(sbuf *b, const tx_fuser_plan *p)
{
    char rb[128];
    sb_add(b, "plan: recipe %s, device %s, %s%s\n", tx_recipe_name(&p->recipe, rb, sizeof rb),
           p->device.name, p->training ? "training" : "inference",
           p->deterministic ? ", deterministic" : "");
}

static void text_layout(sbuf *b, const tx_ir_graph *g, const tx_plan_group *grp, const char *title,
                        const tx_plan_kernel *k, int32_t n)
{
    sb_add(b, "  %-9s", title);
    if (n == 0) sb_add(b, " -");
    for (int32_t i = 0; i < n; i++) {
        sb_add(b, "%s %s(", i ? ";" : "", fusion_name(k[i].fusion));
        for (int32_t j = 0; j < k[i].count; j++)
            sb_add(b, "%s%s", j ? " " : "", g->nodes[grp->nodes[k[i].first + j]].label);
        sb_add(b, ")");
    }
    sb_add(b, "\n");
}

static void text_values(sbuf *b, const tx_ir_graph *g, const char *title, const int32_t *v, int32_t n)
{
    sb_add(b, " %s", title);
    if (n == 0) sb_add(b, " -");
    for (int32_t i = 0; i < n; i++) sb_add(b, "%s %s", i ? "," : "", value_name(g, v[i]));
}

teexec_status *tx_fuser_plan_text(const tx_fuser_plan *p, const tx_ir_graph *g, bool explain,
                                  char **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan text: out is NULL");
    *out = NULL;
    if (!p || !g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan text: plan or graph is NULL");
    sbuf b = {0};
    header_line(&b, p);
    sb_add(&b, "groups: %zu\n", p->n_groups);
    for (size_t gi = 0; gi < p->n_groups; gi++) {
        const tx_plan_group *grp = &p->groups[gi];
        sb_add(&b, "group %d (%s, %d op%s)", grp->id, tx_group_kind_name(grp->kind), grp->n_nodes,
               grp->n_nodes == 1 ? "" : "s");
        if (p->training) {
            if (grp->first_op_requiring_backward >= grp->n_nodes) sb_add(&b, ", no backward");
            else sb_add(&b, ", backward from op %d", grp->first_op_requiring_backward);
        }
        sb_add(&b, "\n  ops:     ");
        for (int32_t i = 0; i < grp->n_nodes; i++)
            sb_add(&b, "%s %d %s %s", i ? ";" : "", i, op_name(grp, g, i),
                   g->nodes[grp->nodes[i]].label);
        sb_add(&b, "\n");
        if (grp->kind == TX_GROUP_CHAIN) {
            sb_add(&b, "  tensors:  main %s -> %s;", value_name(g, grp->main_input),
                   value_name(g, grp->main_output));
            text_values(&b, g, "extra in", grp->extra_inputs, grp->n_extra_inputs);
            sb_add(&b, ";");
            text_values(&b, g, "extra out", grp->extra_outputs, grp->n_extra_outputs);
            sb_add(&b, "\n");
        }
        if (grp->n_joint) text_layout(&b, g, grp, "joint:", grp->joint, grp->n_joint);
        text_layout(&b, g, grp, "forward:", grp->forward, grp->n_forward);
        if (p->training) text_layout(&b, g, grp, "backward:", grp->backward, grp->n_backward);
    }
    sb_add(&b, "quantization: %zu operand%s\n", p->n_quant, p->n_quant == 1 ? "" : "s");
    for (size_t i = 0; i < p->n_quant; i++) {
        const tx_plan_quant *q = &p->quant[i];
        sb_add(&b, "  %s %s: ", node_label(g, q->node), tx_qoperand_name(q->operand));
        if (q->quantized) {
            sb_add(&b, "%s %s %dx%d %s, %s scales, %s", tx_qkind_name(q->kind),
                   teexec_dtype_name(q->data_dtype), q->block_rows, q->block_cols,
                   tx_qusage_name(q->usage), q->scale_layout == TX_SCALE_SWIZZLED ? "swizzled" : "compact",
                   q->native ? "native GEMM" : "emulated GEMM");
            if (q->producer >= 0) sb_add(&b, ", written by %s", node_label(g, q->producer));
            if (q->delayed_slot >= 0) sb_add(&b, ", delayed slot %d", q->delayed_slot);
        } else {
            sb_add(&b, "not quantized");
        }
        if (q->why) sb_add(&b, " (%s)", q->why);
        sb_add(&b, "\n");
    }
    const tx_memory_plan *m = &p->memory;
    sb_add(&b, "memory: arena %zu bytes (%zu tensors, alignment %zu), peak inference %zu, "
           "peak training %zu, without reuse %zu, parameters %zu\n",
           m->arena_bytes, m->n_tensors, m->alignment, m->peak_inference, m->peak_training,
           m->sum_bytes, m->param_bytes);
    if (explain) {
        sb_add(&b, "declined: %zu\n", p->n_declines);
        for (size_t i = 0; i < p->n_declines; i++) {
            const tx_plan_decline *d = &p->declines[i];
            const tx_fusion_info *fi = tx_fusion_info_of(d->fusion);
            const char *at = "?";
            if (d->group >= 0 && (size_t)d->group < p->n_groups && d->first_op >= 0
                && d->first_op < p->groups[d->group].n_nodes)
                at = g->nodes[p->groups[d->group].nodes[d->first_op]].label;
            sb_add(&b, "  group %d at %s: %s (%s) not used: %s\n", d->group, at,
                   fi ? fi->name : "unknown", fi ? tx_fusion_pass_name(fi->pass) : "?", d->reason);
        }
    }
    return sb_finish(&b, out);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_kernels(sbuf *b, const tx_ir_graph *g, const tx_plan_group *grp,
                         const tx_plan_kernel *k, int32_t n)
{
    sb_add(b, "[");
    for (int32_t i = 0; i < n; i++) {
        sb_add(b, "%s{\"fusion\": ", i ? ", " : "");
        sb_json_str(b, fusion_name(k[i].fusion));
        sb_add(b, ", \"first\": %d, \"count\": %d, \"nodes\": [", k[i].first, k[i].count);
        for (int32_t j = 0; j < k[i].count; j++) {
            if (j) sb_add(b, ", ");
            sb_json_str(b, g->nodes[grp->nodes[k[i].first + j]].label);
        }
        sb_add(b, "]}");
    }
    sb_add(b, "]");
}

static void json_values(sbuf *b, const tx_ir_graph *g, const int32_t *v, int32_t n)
{
    sb_add(b, "[");
    for (int32_t i = 0; i < n; i++) {
        if (i) sb_add(b, ", ");
        sb_json_str(b, value_name(g, v[i]));
    }
    sb_add(b, "]");
}

teexec_status *tx_fuser_plan_json(const tx_fuser_plan *p, const tx_ir_graph *g, char **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan json: out is NULL");
    *out = NULL;
    if (!p || !g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan json: plan or graph is NULL");
    sbuf b = {0};
    char rb[128];
    sb_add(&b, "{\n  \"recipe\": ");
    sb_json_str(&b, tx_recipe_name(&p->recipe, rb, sizeof rb));
    sb_add(&b, ",\n  \"device\": ");
    sb_json_str(&b, p->device.name);
    sb_add(&b, ",\n  \"training\": %s,\n  \"deterministic\": %s,\n  \"groups\": [",
           p->training ? "true" : "false", p->deterministic ? "true" : "false");
    for (size_t gi = 0; gi < p->n_groups; gi++) {
        const tx_plan_group *grp = &p->groups[gi];
        sb_add(&b, "%s\n    {\"id\": %d, \"kind\": \"%s\", \"ops\": [", gi ? "," : "", grp->id,
               tx_group_kind_name(grp->kind));
        for (int32_t i = 0; i < grp->n_nodes; i++) {
            sb_add(&b, "%s{\"op\": ", i ? ", " : "");
            sb_json_str(&b, op_name(grp, g, i));
            sb_add(&b, ", \"node\": ");
            sb_json_str(&b, g->nodes[grp->nodes[i]].label);
            sb_add(&b, "}");
        }
        sb_add(&b, "],\n     \"main_input\": ");
        sb_json_str(&b, value_name(g, grp->main_input));
        sb_add(&b, ", \"main_output\": ");
        sb_json_str(&b, value_name(g, grp->main_output));
        sb_add(&b, ", \"extra_inputs\": ");
        json_values(&b, g, grp->extra_inputs, grp->n_extra_inputs);
        sb_add(&b, ", \"extra_outputs\": ");
        json_values(&b, g, grp->extra_outputs, grp->n_extra_outputs);
        sb_add(&b, ",\n     \"first_op_requiring_backward\": %d,\n     \"joint\": ",
               grp->first_op_requiring_backward);
        json_kernels(&b, g, grp, grp->joint, grp->n_joint);
        sb_add(&b, ",\n     \"forward\": ");
        json_kernels(&b, g, grp, grp->forward, grp->n_forward);
        sb_add(&b, ",\n     \"backward\": ");
        json_kernels(&b, g, grp, grp->backward, grp->n_backward);
        sb_add(&b, "}");
    }
    sb_add(&b, "\n  ],\n  \"declines\": [");
    for (size_t i = 0; i < p->n_declines; i++) {
        const tx_plan_decline *d = &p->declines[i];
        const tx_fusion_info *fi = tx_fusion_info_of(d->fusion);
        sb_add(&b, "%s\n    {\"group\": %d, \"first_op\": %d, \"fusion\": ", i ? "," : "", d->group,
               d->first_op);
        sb_json_str(&b, fi ? fi->name : "unknown");
        sb_add(&b, ", \"pass\": \"%s\", \"reason\": ", fi ? tx_fusion_pass_name(fi->pass) : "unknown");
        sb_json_str(&b, d->reason);
        sb_add(&b, "}");
    }
    sb_add(&b, "%s],\n  \"quantization\": [", p->n_declines ? "\n  " : "");
    for (size_t i = 0; i < p->n_quant; i++) {
        const tx_plan_quant *q = &p->quant[i];
        sb_add(&b, "%s\n    {\"node\": ", i ? "," : "");
        sb_json_str(&b, node_label(g, q->node));
        sb_add(&b, ", \"operand\": \"%s\", \"quantized\": %s", tx_qoperand_name(q->operand),
               q->quantized ? "true" : "false");
        if (q->quantized) {
            sb_add(&b, ", \"kind\": \"%s\", \"dtype\": ", tx_qkind_name(q->kind));
            sb_json_str(&b, teexec_dtype_name(q->data_dtype));
            sb_add(&b, ", \"block\": [%d, %d], \"usage\": \"%s\", \"producer\": ", q->block_rows,
                   q->block_cols, tx_qusage_name(q->usage));
            sb_json_str(&b, node_label(g, q->producer));
            sb_add(&b, ", \"scale_layout\": \"%s\", \"delayed_slot\": %d, \"native\": %s",
                   q->scale_layout == TX_SCALE_SWIZZLED ? "swizzled" : "compact", q->delayed_slot,
                   q->native ? "true" : "false");
        }
        sb_add(&b, ", \"why\": ");
        sb_json_str(&b, q->why);
        sb_add(&b, "}");
    }
    const tx_memory_plan *m = &p->memory;
    sb_add(&b, "%s],\n  \"memory\": {\"alignment\": %zu, \"arena_bytes\": %zu, "
           "\"peak_inference\": %zu, \"peak_training\": %zu, \"sum_bytes\": %zu, "
           "\"param_bytes\": %zu, \"tensors\": [",
           p->n_quant ? "\n  " : "", m->alignment, m->arena_bytes, m->peak_inference,
           m->peak_training, m->sum_bytes, m->param_bytes);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tx_mem_tensor *t = &m->tensors[i];
        sb_add(&b, "%s\n    {\"name\": ", i ? "," : "");
        sb_json_str(&b, t->name);
        sb_add(&b, ", \"kind\": \"%s\", \"bytes\": %zu, \"start\": %d, \"end\": %d, \"offset\": %zu}",
               tx_mem_kind_name(t->kind), t->bytes, t->start, t->end, t->offset);
    }
    sb_add(&b, "%s]}\n}\n", m->n_tensors ? "\n  " : "");
    return sb_finish(&b, out);
}
