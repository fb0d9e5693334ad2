/*
 * te_schema_doc.c - renders the te.ops table as markdown (docs/te-ops.md is
 * exactly this output) and as a compact text table (`teexec ops`).
 */
#include "format/te_schema.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) TX_PRINTF(2, 3);

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    size_t need = b->len + (size_t)n + 1;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static teexec_status *sb_finish(sbuf *b, char **out)
{
    if (b->failed || !b->p) {
        free(b->p);
        return tx_oom();
    }
    *out = b->p;
    return NULL;
}

/* Text inside a markdown table cell: '|' would end the cell. */
static void sb_cell(sbuf *b, const char *text)
{
    for (const char *p = text; p && *p; p++) {
        if (*p == '|') sb_printf(b, "\\|");
        else sb_printf(b, "%c", *p);
    }
}

static const char *attr_type_name(tx_te_attr_type t)
{
    switch (t) {
    case TX_TE_ATTR_INT: return "int";
    case TX_TE_ATTR_FLOAT: return "float";
    case TX_TE_ATTR_ENUM: return "string";
    case TX_TE_ATTR_INTS: return "ints";
    }
    return "?";
}

static void attr_default(const tx_te_attr_schema *a, char *buf, size_t n)
{
    if (a->required) {
        snprintf(buf, n, "required");
        return;
    }
    switch (a->type) {
    case TX_TE_ATTR_INT: snprintf(buf, n, "%lld", (long long)a->def_i); break;
    case TX_TE_ATTR_FLOAT: snprintf(buf, n, "%g", a->def_f); break;
    case TX_TE_ATTR_ENUM: {
        char c[32];
        snprintf(buf, n, "\"%s\"", tx_te_attr_enum_name(a, a->def_i, c, sizeof c));
        break;
    }
    case TX_TE_ATTR_INTS: snprintf(buf, n, "[]"); break;
    }
}

static const char *src_name(tx_te_src s)
{
    switch (s) {
    case TX_TE_SRC_INPUT: return "main input";
    case TX_TE_SRC_EXTRA_INPUT: return "extra input";
    case TX_TE_SRC_PARAM: return "parameter";
    case TX_TE_SRC_PARAMS_ALL: return "all parameters";
    case TX_TE_SRC_OUTPUT: return "main output";
    case TX_TE_SRC_AUX: return "aux (written by forward)";
    }
    return "?";
}

static void needed_for(unsigned f, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s%s", (f & TX_TE_FOR_DX) ? "dx" : "",
             (f & TX_TE_FOR_DX) && (f & (TX_TE_FOR_DPARAMS | TX_TE_FOR_DEXTRA)) ? ", " : "",
             (f & TX_TE_FOR_DPARAMS) ? "dparams" : "",
             (f & TX_TE_FOR_DPARAMS) && (f & TX_TE_FOR_DEXTRA) ? ", " : "",
             (f & TX_TE_FOR_DEXTRA) ? "dextra" : "");
}

static const char *qrole_name(tx_te_qrole r)
{
    switch (r) {
    case TX_TE_QROLE_INPUT: return "input";
    case TX_TE_QROLE_WEIGHT: return "weight";
    case TX_TE_QROLE_GRAD_OUTPUT: return "grad_output";
    }
    return "?";
}

static void port_rows(sbuf *b, const char *kind, const tx_te_port *p, int n)
{
    for (int i = 0; i < n; i++) {
        sb_printf(b, "| %s | `%s` | ", kind, p[i].name);
        sb_cell(b, p[i].type);
        sb_printf(b, " | `");
        sb_cell(b, p[i].shape);
        sb_printf(b, "` | ");
        sb_cell(b, p[i].doc);
        sb_printf(b, "%s%s%s |\n", (p[i].flags & TX_TE_PORT_OPTIONAL) ? " (optional)" : "",
                  (p[i].flags & TX_TE_PORT_NO_GRAD) ? " (no gradient)" : "",
                  (p[i].flags & TX_TE_PORT_PER_GROUP) ? " (per group)" : "");
    }
}

static void code_block(sbuf *b, const char *text)
{
    sb_printf(b, "```\n%s\n```\n\n", text);
}

static void op_markdown(sbuf *b, const tx_te_op_schema *s)
{
    sb_printf(b, "## %s\n\n%s.\n\n", s->name, s->summary);
    sb_printf(b, "| kind | name | type | shape | notes |\n|---|---|---|---|---|\n");
    port_rows(b, "input", &s->input, 1);
    port_rows(b, "extra input", s->extra_inputs, s->n_extra_inputs);
    port_rows(b, "parameter", s->params, s->n_params);
    port_rows(b, "output", &s->output, 1);
    port_rows(b, "extra output", s->extra_outputs, s->n_extra_outputs);
    port_rows(b, "aux", s->aux, s->n_aux);
    sb_printf(b, "\n");
    if (s->n_attrs) {
        sb_printf(b, "Attributes:\n\n| name | type | default | meaning |\n|---|---|---|---|\n");
        for (int i = 0; i < s->n_attrs; i++) {
            const tx_te_attr_schema *a = &s->attrs[i];
            char d[64];
            attr_default(a, d, sizeof d);
            sb_printf(b, "| `%s` | %s%s", a->name, attr_type_name(a->type), a->choices ? ": " : "");
            sb_cell(b, a->choices);
            sb_printf(b, " | %s | ", d);
            sb_cell(b, a->doc);
            sb_printf(b, " |\n");
        }
        sb_printf(b, "\n");
    } else {
        sb_printf(b, "Attributes: none.\n\n");
    }
    sb_printf(b, "Shape/type rule: %s.\n\n", s->shape_rule);
    sb_printf(b, "Forward:\n\n");
    code_block(b, s->forward);
    sb_printf(b, "Backward:\n\n");
    code_block(b, s->backward);
    if (s->n_saved) {
        sb_printf(b, "Saved context (in this order):\n\n");
        for (int i = 0; i < s->n_saved; i++) {
            char nf[64];
            needed_for(s->saved[i].needed_for, nf, sizeof nf);
            sb_printf(b, "%d. `%s` (%s; needed for %s)\n", i + 1, s->saved[i].name,
                      src_name(s->saved[i].src), nf);
        }
        sb_printf(b, "\n");
    } else {
        sb_printf(b, "Saved context: none.\n\n");
    }
    if (s->n_quantizers) {
        sb_printf(b, "Quantizer slots:\n\n");
        for (int i = 0; i < s->n_quantizers; i++)
            sb_printf(b, "- %s: %s (`%s`)\n",
                      s->quantizers[i].mode == TX_TE_QMODE_FORWARD ? "forward" : "backward",
                      qrole_name(s->quantizers[i].role), s->quantizers[i].what);
        sb_printf(b, "\n");
    } else {
        sb_printf(b, "Quantizer slots: none.\n\n");
    }
}

teexec_status *tx_te_schema_markdown(char **out)
{
    *out = NULL;
    sbuf b = {0};
    sb_printf(&b,
              "<!-- Generated by `teexec ops --markdown` from format/te_schema.c. Do not edit: "
              "a test checks this file against the registry. -->\n\n"
              "# The TE operation domain `%s`, version %d\n\n"
              "Each node of domain `%s` is one *basic op* (DESIGN.md section 2). It has one main "
              "input and one main output, which chain ops into fuser groups; optional *extra "
              "inputs* and *extra outputs* carry residuals, forks, split sizes and row scales; "
              "*parameters* are trainable initializers; *aux* tensors are what the forward itself "
              "produces for its backward. The *saved context* lists, in order, exactly what the "
              "backward reads: inputs, parameters and the output are saved by reference, aux "
              "tensors are written by the forward.\n\n"
              "Input order: a node's inputs are the main input, then the extra inputs in the "
              "order listed, then the parameters; its outputs are the main output, then the extra "
              "outputs. An omitted optional input is the empty name `\"\"`; as ONNX allows, "
              "trailing optional extra inputs may also be left out entirely when the op has no "
              "parameters.\n\n"
              "Conventions: `T` is float32, float16, bfloat16 or float64; all math is done in "
              "float32 (float64 when `T` is float64) and rounded once to the output type. `S` (the "
              "statistics type) is float32, or float64 when `T` is float64. `x` of rank r is "
              "viewed as `[rows, H]` with rows the product of its leading dims. Gated ops split the "
              "last dim as `[gate | up]` (Transformer Engine's convention, the opposite of "
              "PyTorch's `glu`). σ is the logistic sigmoid.\n\n"
              "Quantizer slots follow Transformer Engine: forward slot roles `input` and `weight`, "
              "backward slot role `grad_output`; a recipe configures each slot by its role.\n\n"
              "The domain `%s` is reserved for the planner's fuser-group functions (one function "
              "per group, whose body is a chain of `%s` nodes).\n\n"
              "| op | extra inputs | parameters | extra outputs | aux |\n|---|---|---|---|---|\n",
              TX_TE_DOMAIN, TX_TE_DOMAIN_VERSION, TX_TE_DOMAIN, TX_TE_FUSED_DOMAIN, TX_TE_DOMAIN);
    for (int i = 0; i < TX_TE_OP_COUNT; i++) {
        const tx_te_op_schema *s = tx_te_schema((tx_te_op_id)i);
        /* GitHub's heading anchors are the lower-cased heading text. */
        sb_printf(&b, "| [%s](#", s->name);
        for (const char *p = s->name; *p; p++) sb_printf(&b, "%c", tolower((unsigned char)*p));
        sb_printf(&b, ") | ");
        for (int j = 0; j < s->n_extra_inputs; j++)
            sb_printf(&b, "%s`%s`", j ? ", " : "", s->extra_inputs[j].name);
        sb_printf(&b, " | ");
        for (int j = 0; j < s->n_params; j++)
            sb_printf(&b, "%s`%s`", j ? ", " : "", s->params[j].name);
        sb_printf(&b, " | ");
        for (int j = 0; j < s->n_extra_outputs; j++)
            sb_printf(&b, "%s`%s`", j ? ", " : "", s->extra_outputs[j].name);
        sb_printf(&b, " | ");
        for (int j = 0; j < s->n_aux; j++) sb_printf(&b, "%s`%s`", j ? ", " : "", s->aux[j].name);
        sb_printf(&b, " |\n");
    }
    sb_printf(&b, "\n");
    for (int i = 0; i < TX_TE_OP_COUNT; i++) op_markdown(&b, tx_te_schema((tx_te_op_id)i));
    return sb_finish(&b, out);
}

static void names(sbuf *b, const tx_te_port *p, int n)
{
    if (n == 0) sb_printf(b, "-");
    for (int j = 0; j < n; j++) sb_printf(b, "%s%s", j ? "," : "", p[j].name);
}

teexec_status *tx_te_schema_table(char **out)
{
    *out = NULL;
    sbuf b = {0};
    sb_printf(&b, "domain %s version %d (%d ops; %s reserved for fuser groups)\n", TX_TE_DOMAIN,
              TX_TE_DOMAIN_VERSION, (int)TX_TE_OP_COUNT, TX_TE_FUSED_DOMAIN);
    sb_printf(&b, "%-20s %-12s %-16s %-10s %-40s %s\n", "op", "extra-in", "params", "extra-out",
              "attributes", "saved");
    for (int i = 0; i < TX_TE_OP_COUNT; i++) {
        const tx_te_op_schema *s = tx_te_schema((tx_te_op_id)i);
        sbuf col = {0};
        char *cols[5] = {0};
        const tx_te_port *lists[3] = {s->extra_inputs, s->params, s->extra_outputs};
        int counts[3] = {s->n_extra_inputs, s->n_params, s->n_extra_outputs};
        bool failed = false;
        for (int c = 0; c < 3; c++) {
            col = (sbuf){0};
            names(&col, lists[c], counts[c]);
            failed |= col.failed;
            cols[c] = col.p;
        }
        col = (sbuf){0};
        if (s->n_attrs == 0) sb_printf(&col, "-");
        for (int j = 0; j < s->n_attrs; j++) sb_printf(&col, "%s%s", j ? "," : "", s->attrs[j].name);
        failed |= col.failed;
        cols[3] = col.p;
        col = (sbuf){0};
        if (s->n_saved == 0) sb_printf(&col, "-");
        for (int j = 0; j < s->n_saved; j++) sb_printf(&col, "%s%s", j ? "," : "", s->saved[j].name);
        failed |= col.failed;
        cols[4] = col.p;
        if (!failed)
            sb_printf(&b, "%-20s %-12s %-16s %-10s %-40s %s\n", s->name, cols[0], cols[1], cols[2],
                      cols[3], cols[4]);
        else
            b.failed = true;
        for (int c = 0; c < 5; c++) free(cols[c]);
    }
    return sb_finish(&b, out);
}
