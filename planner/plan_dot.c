/*
 * plan_dot.c - a plan as a Graphviz graph (`teexec plan --dot`).
 *
 * Each fuser group is a cluster holding two sub-clusters side by side: its
 * forward layout (kernels in run order) and, for a training plan, its
 * backward layout (run in reverse, so its edges point from the last op's
 * kernel to the first's). A kernel is a box naming its fusion (or the op
 * it runs alone) and the nodes it covers; a joint fusion's kernel is drawn
 * bold in both layouts. Edges:
 *   - data between groups: the kernel producing a value -> the kernel of
 *     another group reading it (forward);
 *   - each quantized GEMM operand: from where the operand comes (the
 *     producing kernel, the weight, the incoming gradient) to the kernel of
 *     the GEMM, labelled with its format (kind, data dtype, block, usage);
 *   - each declined fusion: a dashed note in its group, pointing at the
 *     kernel where the pattern matched, with the reason.
 * Deterministic like plan_explain.c: only the plan's contents in its own
 * order. Identifiers are g<group>_f<kernel> / g<group>_b<kernel>; every
 * string is written as a quoted DOT string (quotes and backslashes escaped).
 */
#include "planner/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Output goes to a memory stream; an error at any write shows up in
 * ferror()/fclose() at the end, so the writers below need not check each. */
typedef struct dot_out {
    FILE *f;
    const tx_fuser_plan *p;
    const tx_ir_graph *g;
} dot_out;

/* Writes s as the inside of a DOT quoted string: quotes and backslashes
 * escaped, newlines as \n (a centred line break), control bytes dropped.
 * With wrap > 0, breaks a line at the first space after `wrap` columns. */
static void put_str(FILE *f, const char *s, int wrap)
{
    int col = 0;
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\') {
            fputc('\\', f);
            fputc(*c, f);
        } else if (*c == '\n' || (wrap > 0 && *c == ' ' && col >= wrap)) {
            fputs("\\n", f);
            col = 0;
            continue;
        } else if (*c >= 0x20) {
            fputc(*c, f);
        }
        col++;
    }
}

static const char *node_label(const tx_ir_graph *g, int32_t node)
{
    if (node < 0 || (size_t)node >= g->n_nodes) return "?";
    return g->nodes[node].label;
}

static const char *op_name(const tx_plan_group *grp, const tx_ir_graph *g, int32_t i)
{
    if (grp->kind == TX_GROUP_CHAIN && grp->ops) {
        const tx_te_op_schema *s = tx_te_schema(grp->ops[i]);
        if (s) return s->name;
    }
    return g->nodes[grp->nodes[i]].op_type;
}

/* Index of graph node `node` among the group's ops, or -1. */
static int32_t op_index(const tx_plan_group *grp, int32_t node)
{
    for (int32_t i = 0; i < grp->n_nodes; i++)
        if (grp->nodes[i] == node) return i;
    return -1;
}

/* Index of the kernel of a layout covering op i, or -1. */
static int32_t kernel_of(const tx_plan_kernel *k, int32_t n, int32_t i)
{
    for (int32_t j = 0; j < n; j++)
        if (i >= k[j].first && i < k[j].first + k[j].count) return j;
    return -1;
}

static const tx_plan_group *group_of(const dot_out *d, int32_t node)
{
    if (node < 0 || (size_t)node >= d->g->n_nodes || !d->p->group_of_node) return NULL;
    int32_t gi = d->p->group_of_node[node];
    if (gi < 0 || (size_t)gi >= d->p->n_groups) return NULL;
    return &d->p->groups[gi];
}

static void plain_edge(const dot_out *d, const char *indent, const char *a, const char *b);

static void layout(const dot_out *d, const tx_plan_group *grp, bool backward)
{
    const tx_plan_kernel *k = backward ? grp->backward : grp->forward;
    int32_t n = backward ? grp->n_backward : grp->n_forward;
    char tag = backward ? 'b' : 'f';
    FILE *f = d->f;
    fprintf(f, "    subgraph cluster_g%d_%s {\n      label=\"%s\"; style=rounded;\n", grp->id,
            backward ? "backward" : "forward", backward ? "backward" : "forward");
    if (n == 0)
        fprintf(f, "      g%d_%c_none [label=\"no %s\", shape=plaintext];\n", grp->id, tag,
                backward ? "backward" : "forward");
    for (int32_t j = 0; j < n; j++) {
        const tx_fusion_info *fi = k[j].fusion != TX_FUSION_NONE ? tx_fusion_info_of(k[j].fusion)
                                                                  : NULL;
        fprintf(f, "      g%d_%c%d [label=\"", grp->id, tag, j);
        put_str(f, fi ? fi->name : op_name(grp, d->g, k[j].first), 0);
        for (int32_t i = 0; i < k[j].count; i++) {
            fputs(i ? " " : "\\n", f);
            put_str(f, d->g->nodes[grp->nodes[k[j].first + i]].label, 0);
        }
        fputs("\"", f);
        if (fi && fi->pass == TX_PASS_JOINT) fputs(", style=bold, tooltip=\"joint fusion\"", f);
        else if (fi) fputs(", style=filled, fillcolor=\"#e8f0ff\"", f);
        fputs("];\n", f);
    }
    /* Run order: forward first to last, backward last to first. */
    for (int32_t j = 0; j + 1 < n; j++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "g%d_%c%d", grp->id, tag, backward ? j + 1 : j);
        snprintf(b, sizeof b, "g%d_%c%d", grp->id, tag, backward ? j : j + 1);
        plain_edge(d, "      ", a, b);
    }
    fputs("    }\n", f);
}

static void declines_of(const dot_out *d, const tx_plan_group *grp)
{
    FILE *f = d->f;
    for (size_t i = 0; i < d->p->n_declines; i++) {
        const tx_plan_decline *dc = &d->p->declines[i];
        if (dc->group != grp->id) continue;
        const tx_fusion_info *fi = tx_fusion_info_of(dc->fusion);
        const char *at = dc->first_op >= 0 && dc->first_op < grp->n_nodes
                             ? d->g->nodes[grp->nodes[dc->first_op]].label
                             : "?";
        fprintf(f, "    decline%zu [shape=note, style=dashed, fontsize=9, label=\"declined: ", i);
        put_str(f, fi ? fi->name : "unknown", 0);
        fprintf(f, " (%s) at ", fi ? tx_fusion_pass_name(fi->pass) : "?");
        put_str(f, at, 0);
        fputs("\\n", f);
        put_str(f, dc->reason, 48);
        fputs("\"];\n", f);
        /* Point at the kernel where the pattern matched, in the layout of
         * its pass (a joint fusion would have replaced forward kernels). */
        bool bwd = fi && fi->pass == TX_PASS_BACKWARD && grp->n_backward > 0;
        int32_t k = kernel_of(bwd ? grp->backward : grp->forward,
                              bwd ? grp->n_backward : grp->n_forward, dc->first_op);
        if (k >= 0)
            fprintf(f, "    decline%zu -> g%d_%c%d [style=dashed, arrowhead=none];\n", i, grp->id,
                    bwd ? 'b' : 'f', k);
    }
}

/* Forward data edges into group grp from kernels of other groups, each
 * kernel pair once. */
static void cross_edges(const dot_out *d, const tx_plan_group *grp)
{
    for (int32_t i = 0; i < grp->n_nodes; i++) {
        const tx_ir_node *n = &d->g->nodes[grp->nodes[i]];
        int32_t dk = kernel_of(grp->forward, grp->n_forward, i);
        for (size_t a = 0; a < n->n_inputs && dk >= 0; a++) {
            int32_t v = n->inputs[a];
            if (v < 0 || (size_t)v >= d->g->n_values) continue;
            int32_t pn = d->g->values[v].producer;
            const tx_plan_group *pg = group_of(d, pn);
            if (!pg || pg == grp) continue;
            int32_t sk = kernel_of(pg->forward, pg->n_forward, op_index(pg, pn));
            if (sk < 0) continue;
            /* once per kernel pair: skip when an earlier input made it */
            bool seen = false;
            for (int32_t i2 = 0; i2 <= i && !seen; i2++) {
                const tx_ir_node *n2 = &d->g->nodes[grp->nodes[i2]];
                if (kernel_of(grp->forward, grp->n_forward, i2) != dk) continue;
                size_t lim = i2 == i ? a : n2->n_inputs;
                for (size_t a2 = 0; a2 < lim && !seen; a2++) {
                    int32_t v2 = n2->inputs[a2];
                    if (v2 < 0 || (size_t)v2 >= d->g->n_values) continue;
                    int32_t pn2 = d->g->values[v2].producer;
                    const tx_plan_group *pg2 = group_of(d, pn2);
                    seen = pg2 == pg && kernel_of(pg->forward, pg->n_forward,
                                                  op_index(pg, pn2)) == sk;
                }
            }
            if (!seen) {
                char sa[64], sb[64];
                snprintf(sa, sizeof sa, "g%d_f%d", pg->id, sk);
                snprintf(sb, sizeof sb, "g%d_f%d", grp->id, dk);
                plain_edge(d, "  ", sa, sb);
            }
        }
    }
}

static void quant_label(FILE *f, const tx_plan_quant *q)
{
    fprintf(f, "%s %s %s %dx%d %s", tx_qoperand_name(q->operand), tx_qkind_name(q->kind),
            teexec_dtype_name(q->data_dtype), q->block_rows, q->block_cols, tx_qusage_name(q->usage));
}

/* The endpoints of quantized operand qi's edge: src and dst node ids
 * (dst: the GEMM's kernel; src: the kernel writing the operand, or "" when
 * it comes from outside a layout: a weight, a graph input, a gradient from
 * another group). False when the operand has no edge (not quantized). */
static bool quant_ends(const dot_out *d, size_t qi, char *src, char *dst, size_t size)
{
    const tx_plan_quant *q = &d->p->quant[qi];
    src[0] = dst[0] = 0;
    if (!q->quantized) return false;
    const tx_plan_group *grp = group_of(d, q->node);
    if (!grp) return false;
    int32_t i = op_index(grp, q->node);
    const tx_ir_node *n = &d->g->nodes[q->node];
    bool bwd = q->operand == TX_QOP_GRAD_OUTPUT;
    int32_t dk = bwd ? kernel_of(grp->backward, grp->n_backward, i)
                     : kernel_of(grp->forward, grp->n_forward, i);
    if (dk < 0) return false;
    snprintf(dst, size, "g%d_%c%d", grp->id, bwd ? 'b' : 'f', dk);
    if (q->operand == TX_QOP_INPUT) {
        /* the hand-off producer, else the producer of the main input */
        int32_t pn = q->producer;
        if (pn < 0 && n->n_inputs > 0 && n->inputs[0] >= 0 && (size_t)n->inputs[0] < d->g->n_values)
            pn = d->g->values[n->inputs[0]].producer;
        const tx_plan_group *pg = group_of(d, pn);
        int32_t sk = pg ? kernel_of(pg->forward, pg->n_forward, op_index(pg, pn)) : -1;
        if (sk >= 0) snprintf(src, size, "g%d_f%d", pg->id, sk);
    } else if (bwd && i + 1 < grp->n_nodes) {
        /* dy comes from the backward kernel of the next op */
        int32_t sk = kernel_of(grp->backward, grp->n_backward, i + 1);
        if (sk >= 0) snprintf(src, size, "g%d_b%d", grp->id, sk);
    }
    return true;
}

/* Is a -> b drawn as a quantized operand's edge (so the plain data edge
 * is left out)? */
static bool quant_covers(const dot_out *d, const char *a, const char *b)
{
    char src[64], dst[64];
    for (size_t qi = 0; qi < d->p->n_quant; qi++)
        if (quant_ends(d, qi, src, dst, sizeof src) && strcmp(src, a) == 0 && strcmp(dst, b) == 0)
            return true;
    return false;
}

/* A plain data edge a -> b, unless a quantized operand's edge draws it. */
static void plain_edge(const dot_out *d, const char *indent, const char *a, const char *b)
{
    if (!quant_covers(d, a, b)) fprintf(d->f, "%s%s -> %s;\n", indent, a, b);
}

/* One edge per quantized GEMM operand, into the GEMM's kernel. */
static void quant_edges(const dot_out *d)
{
    FILE *f = d->f;
    for (size_t qi = 0; qi < d->p->n_quant; qi++) {
        const tx_plan_quant *q = &d->p->quant[qi];
        char src[64], dst[64];
        if (!quant_ends(d, qi, src, dst, sizeof src)) continue;
        if (!src[0]) {
            snprintf(src, sizeof src, "q%zu", qi);
            fprintf(f, "  q%zu [shape=plaintext, fontsize=9, label=\"", qi);
            put_str(f, node_label(d->g, q->node), 0);
            fprintf(f, " %s\"];\n", tx_qoperand_name(q->operand));
        }
        fprintf(f, "  %s -> %s [color=\"#c03000\", fontcolor=\"#c03000\", fontsize=9, label=\"",
                src, dst);
        quant_label(f, q);
        fputs("\"];\n", f);
    }
}

teexec_status *tx_fuser_plan_dot(const tx_fuser_plan *p, const tx_ir_graph *g, char **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan dot: out is NULL");
    *out = NULL;
    if (!p || !g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan dot: plan or graph is NULL");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return tx_oom();
    dot_out d = {f, p, g};
    char rb[128];
    fputs("digraph plan {\n  graph [fontname=\"Helvetica\", labelloc=t, label=\"", f);
    fprintf(f, "plan: recipe %s, device ", tx_recipe_name(&p->recipe, rb, sizeof rb));
    put_str(f, p->device.name, 0);
    fprintf(f, ", %s%s\", compound=true, newrank=true];\n", p->training ? "training" : "inference",
            p->deterministic ? ", deterministic" : "");
    fputs("  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
          "  edge [fontname=\"Helvetica\"];\n",
          f);
    for (size_t gi = 0; gi < p->n_groups; gi++) {
        const tx_plan_group *grp = &p->groups[gi];
        fprintf(f, "  subgraph cluster_g%d {\n    label=\"group %d (%s, %d op%s)\";\n", grp->id,
                grp->id, tx_group_kind_name(grp->kind), grp->n_nodes, grp->n_nodes == 1 ? "" : "s");
        layout(&d, grp, false);
        if (p->training) {
            layout(&d, grp, true);
            /* side by side: the first forward kernel level with the first
             * backward kernel to run (the last op's) */
            if (grp->n_forward > 0 && grp->n_backward > 0)
                fprintf(f, "    { rank=same; g%d_f0; g%d_b%d; }\n", grp->id, grp->id,
                        grp->n_backward - 1);
        }
        declines_of(&d, grp);
        fputs("  }\n", f);
    }
    for (size_t gi = 0; gi < p->n_groups; gi++) cross_edges(&d, &p->groups[gi]);
    quant_edges(&d);
    fputs("}\n", f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0) bad = true;
    if (bad || !buf) {
        free(buf);
        return tx_oom();
    }
    *out = buf;
    return NULL;
}
