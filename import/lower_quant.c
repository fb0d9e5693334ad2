/* lower_quant.c - quantize -> dequantize pairs on a GEMM's operands become
 * format annotations on a te.ops Linear.
 *
 * What happens to the Q/DQ nodes (the decision this pass makes): a
 * quantize -> dequantize pair (with the Casts TE wraps around it) that
 * fake-quantizes a float value is REMOVED, the GEMM reads the float value
 * itself, and the Linear it becomes records the format in quant_input /
 * quant_weight (tx_qann names) and, when the scale is a constant scalar,
 * quant_input_scale / quant_weight_scale. The lowered model therefore
 * computes in high precision on its own; the quantization comes back when
 * the planner applies the recipe the annotations ask for (fp8-tensor ->
 * fp8-delayed/current, mxfp8, nvfp4), which is TE's model: high-precision
 * parameters, quantizers as op state. The trainable parameter is the float
 * weight the exporter quantized.
 *
 * Left as they are (noted, not lowered): weights stored quantized (an
 * int4/fp4/fp8 initializer read by a DequantizeLinear: there is no float
 * parameter for a Linear to own), pairs whose removal would change a
 * value's type, and GEMMs the Linear pass would decline anyway (transA,
 * alpha, a C that is not a [N] vector), so a declined GEMM keeps its
 * quantizers and its numbers. Q/DQ pairs feeding a GEMM that the Linear
 * pass already lowered (float weight, quantized input) are not annotated.
 *
 * The findings come from import/quant_annotate.h, which works on the IR:
 * the pass emits the current graph, loads it and maps the IR's nodes back
 * by their (unique) output names. */
#include "import/lower.h"

#include "format/onnx_load.h"
#include "format/te_schema.h"
#include "import/quant_annotate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One GEMM with quantized operands. */
typedef struct qgemm {
    char *gemm_name;       /* the GEMM node's name: the Linear keeps it */
    char *gemm_out;        /* its output (unique) */
    bool has[2];           /* operand 0 (input), 1 (weight) annotated */
    tx_qann_format fmt[2];
    bool has_scale[2];
    float scale[2];
    char *entry[2], *exit_[2]; /* float value before the pair, value after it */
    bool blocked;          /* an operand's pair cannot go: the GEMM keeps both */
} qgemm;

static char *dupstr(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static bool is_std(const tx_rw_node *n, const char *op)
{
    return n && !n->dead && n->domain[0] == '\0' && strcmp(n->op_type, op) == 0;
}

static bool is_quant_op(const tx_rw_node *n)
{
    if (!n || n->dead) return false;
    if (strcmp(n->domain, "trt") == 0) return strncmp(n->op_type, "TRT_", 4) == 0;
    return n->domain[0] == '\0' &&
           (strcmp(n->op_type, "QuantizeLinear") == 0 || strcmp(n->op_type, "DequantizeLinear") == 0);
}

static size_t readers(tx_rw_graph *g, const char *v)
{
    size_t n = 0;
    tx_rw_consumers(g, v, &n);
    return n + (tx_rw_is_graph_output(g, v) ? 1 : 0);
}

/* The Cast `to` of node n, or -1. */
static int64_t cast_to(tx_rw_graph *g, size_t n)
{
    const tx_rw_attr *a = tx_rw_get_attr(g, n, "to");
    return a && a->type == TX_IR_ATTR_INT ? a->i : -1;
}

/* Follows the pair: entry = the quantizer's data input, walked up through
 * Casts read only by this chain; exit = the dequantizer's output, walked
 * down through Casts that are its only reader. The pair may go when the
 * entry and exit have the same type. Returns NULL or a reason. */
static const char *trace(tx_rw_graph *g, int64_t q, int64_t dq, char **entry, char **exit_)
{
    *entry = *exit_ = NULL;
    tx_rw_node *qn = tx_rw_node_at(g, (size_t)q), *dn = tx_rw_node_at(g, (size_t)dq);
    if (!qn || !dn || qn->dead || dn->dead || qn->n_inputs < 1 || dn->n_outputs < 1)
        return "the quantize/dequantize nodes are not where the finding says";
    const char *in = qn->inputs[0];
    teexec_dtype entry_dt = TEEXEC_DTYPE_UNDEFINED;
    for (;;) {
        int64_t p = tx_rw_producer(g, in, NULL);
        tx_rw_node *pn = tx_rw_node_at(g, (size_t)(p < 0 ? 0 : p));
        if (p < 0 || !is_std(pn, "Cast") || readers(g, in) != 1) break;
        in = pn->inputs[0];
    }
    tx_rw_value_type t;
    if (tx_rw_value_type_of(g, in, &t)) entry_dt = t.dtype;
    const char *out = dn->outputs[0];
    teexec_dtype exit_dt = TEEXEC_DTYPE_UNDEFINED;
    for (;;) {
        size_t nc = 0;
        const tx_ir_use *u = tx_rw_consumers(g, out, &nc);
        if (nc != 1 || tx_rw_is_graph_output(g, out)) break;
        size_t c = (size_t)u[0].node;
        tx_rw_node *cn = tx_rw_node_at(g, c);
        if (!is_std(cn, "Cast")) break;
        exit_dt = (teexec_dtype)cast_to(g, c);
        out = cn->outputs[0];
    }
    /* Without a Cast after the pair, the dequantizer gives its scale's
     * type, which exporters make the quantizer input's type. */
    if (exit_dt != TEEXEC_DTYPE_UNDEFINED && entry_dt != TEEXEC_DTYPE_UNDEFINED &&
        exit_dt != entry_dt)
        return "removing the pair would change the value's type";
    if (entry_dt != TEEXEC_DTYPE_UNDEFINED && !tx_dtype_is_real(entry_dt))
        return "the quantized value is not a float tensor";
    *entry = dupstr(in);
    *exit_ = dupstr(out);
    if (!*entry || !*exit_) {
        free(*entry);
        free(*exit_);
        *entry = *exit_ = NULL;
        return "out of memory";
    }
    return NULL;
}

/* Would the Linear pass take this GEMM once its weight is the float value
 * `w`? (It must: the pair is only removed for a Linear.) */
static const char *gemm_problem(tx_rw_graph *g, size_t gi, const char *w)
{
    const tx_rw_node *n = tx_rw_node_at(g, gi);
    if (!tx_rw_is_initializer(g, w) || tx_rw_is_graph_input(g, w))
        return "the quantized weight is not a float initializer";
    tx_rw_value_type t;
    if (!tx_rw_value_type_of(g, w, &t) || t.rank != 2 || !tx_dtype_is_real(t.dtype))
        return "the quantized weight is not a rank-2 float tensor";
    if (readers(g, w) != 1) return "the float weight has other readers";
    if (is_std(n, "Gemm")) {
        const tx_rw_attr *a = tx_rw_get_attr(g, gi, "transA");
        if (a && a->type == TX_IR_ATTR_INT && a->i) return "Gemm with transA=1";
        a = tx_rw_get_attr(g, gi, "alpha");
        if (a && a->type == TX_IR_ATTR_FLOAT && a->f != 1.0f) return "Gemm with alpha != 1";
        a = tx_rw_get_attr(g, gi, "beta");
        if (a && a->type == TX_IR_ATTR_FLOAT && a->f != 1.0f) return "Gemm with beta != 1";
        a = tx_rw_get_attr(g, gi, "transB");
        bool tb = a && a->type == TX_IR_ATTR_INT && a->i;
        if (n->n_inputs >= 3 && n->inputs[2][0]) {
            tx_rw_value_type ct;
            int64_t nn = tb ? t.dims[0] : t.dims[1];
            if (!tx_rw_is_initializer(g, n->inputs[2]) || tx_rw_is_graph_input(g, n->inputs[2]) ||
                !tx_rw_value_type_of(g, n->inputs[2], &ct) || ct.rank != 1 || ct.dims[0] != nn)
                return "Gemm's C is not a constant [N] vector";
        }
    }
    return NULL;
}

/* Removes quantizer, dequantizer and Cast nodes nobody reads any more. */
static void sweep(tx_rw_graph *g)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (size_t i = 0; i < tx_rw_node_count(g); i++) {
            tx_rw_node *n = tx_rw_node_at(g, i);
            if (n->dead || !(is_quant_op(n) || is_std(n, "Cast"))) continue;
            bool read = false;
            for (size_t o = 0; o < n->n_outputs && !read; o++)
                read = n->outputs[o][0] && readers(g, n->outputs[o]) > 0;
            if (!read) {
                tx_rw_remove_node(g, i);
                changed = true;
            }
        }
    }
}

static void qgemm_free(qgemm *q, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(q[i].gemm_name);
        free(q[i].gemm_out);
        for (int k = 0; k < 2; k++) {
            free(q[i].entry[k]);
            free(q[i].exit_[k]);
        }
    }
    free(q);
}

/* Node index in g of the IR node that defines IR value `v`'s producer. */
static int64_t rw_node_of(tx_rw_graph *g, const tx_ir_graph *ig, int32_t ir_node)
{
    if (ir_node < 0) return -1;
    const tx_ir_node *n = &ig->nodes[ir_node];
    for (size_t o = 0; o < n->n_outputs; o++)
        if (n->outputs[o] >= 0) return tx_rw_producer(g, ig->values[n->outputs[o]].name, NULL);
    return -1;
}

/* Runs quant_annotate over the current graph. */
static teexec_status *findings(tx_rw_graph *g, tx_lower_report *r, qgemm **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    uint8_t *bytes = NULL;
    size_t len = 0;
    TX_TRY(tx_rw_emit(g, &bytes, &len));
    tx_onnx_file *file = NULL;
    tx_ir_model *ir = NULL;
    tx_quant_annotation *ann = NULL;
    size_t n_ann = 0;
    qgemm *q = NULL;
    size_t nq = 0;
    teexec_status *st = tx_onnx_load_memory(bytes, len, NULL, NULL, &file);
    free(bytes);
    if (!st) st = tx_ir_build(file, &ir);
    if (!st) st = tx_quant_annotate(ir->graph, file, &ann, &n_ann);
    if (!st && n_ann && !(q = calloc(n_ann, sizeof *q))) st = tx_oom();
    for (size_t k = 0; k < n_ann && !st; k++) {
        const tx_quant_annotation *a = &ann[k];
        const tx_ir_graph *ig = ir->graph;
        int64_t gi = rw_node_of(g, ig, a->gemm_node);
        if (gi < 0 || a->operand < 0 || a->operand > 1) continue;
        tx_rw_node *gn = tx_rw_node_at(g, (size_t)gi);
        qgemm *e = NULL;
        for (size_t j = 0; j < nq && !e; j++)
            if (strcmp(q[j].gemm_out, gn->outputs[0]) == 0) e = &q[j];
        if (!e) {
            e = &q[nq++];
            e->gemm_name = dupstr(gn->name);
            e->gemm_out = dupstr(gn->outputs[0]);
            if (!e->gemm_name || !e->gemm_out) st = tx_oom();
        }
        int op = a->operand;
        e->has[op] = true;
        e->fmt[op] = a->format;
        e->has_scale[op] = a->has_scale_value;
        e->scale[op] = a->scale_value;
        const char *why = NULL;
        char buf[256];
        if (a->q_node < 0) {
            snprintf(buf, sizeof buf, "the %s is stored quantized (%s): no float parameter for a "
                     "Linear", op ? "weight" : "input", tx_qann_format_name(a->format));
            why = buf;
        } else {
            why = trace(g, rw_node_of(g, ig, a->q_node), rw_node_of(g, ig, a->dq_node),
                        &e->entry[op], &e->exit_[op]);
        }
        if (why && !st) {
            st = tx_lower_note_add(r, "Linear(quantized)", gn->name, false, why);
            e->blocked = true; /* one operand stays quantized: both pairs stay */
        }
    }
    free(ann);
    tx_ir_model_free(ir);
    tx_onnx_file_free(file);
    if (st) {
        qgemm_free(q, nq);
        return st;
    }
    *out = q;
    *n_out = nq;
    return NULL;
}

static teexec_status *annotate_linear(tx_rw_graph *g, const qgemm *e, tx_lower_report *r)
{
    for (size_t i = 0; i < tx_rw_node_count(g); i++) {
        tx_rw_node *n = tx_rw_node_at(g, i);
        if (n->dead || strcmp(n->domain, TX_TE_DOMAIN) != 0 || strcmp(n->op_type, "Linear") != 0 ||
            strcmp(n->name, e->gemm_name) != 0)
            continue;
        static const char *const attr[2] = {"quant_input", "quant_weight"};
        static const char *const sattr[2] = {"quant_input_scale", "quant_weight_scale"};
        for (int k = 0; k < 2; k++) {
            if (!e->has[k]) continue;
            TX_TRY(tx_rw_set_string(g, i, attr[k], tx_qann_format_name(e->fmt[k])));
            if (e->has_scale[k]) TX_TRY(tx_rw_set_float(g, i, sattr[k], e->scale[k]));
        }
        return tx_lower_note_add(r, "Linear(quantized)", e->gemm_name, true, NULL);
    }
    return tx_lower_note_add(r, "Linear(quantized)", e->gemm_name, false,
                             "the Linear pass did not lower the GEMM once its pairs were removed");
}

teexec_status *tx_lower_quant(tx_rw_graph *g, tx_lower_report *r)
{
    /* Nothing to do without a quantizer: spare the emit + load. */
    bool any = false;
    for (size_t i = 0; i < tx_rw_node_count(g) && !any; i++) any = is_quant_op(tx_rw_node_at(g, i));
    if (!any) return NULL;
    qgemm *q = NULL;
    size_t nq = 0;
    TX_TRY(findings(g, r, &q, &nq));
    teexec_status *st = NULL;
    size_t freed = 0;
    for (size_t k = 0; k < nq && !st; k++) {
        qgemm *e = &q[k];
        if (e->blocked) continue;
        int64_t gi = tx_rw_producer(g, e->gemm_out, NULL);
        if (gi < 0) continue;
        tx_rw_node *gn = tx_rw_node_at(g, (size_t)gi);
        const char *w = e->has[1] ? e->entry[1] : (gn->n_inputs > 1 ? gn->inputs[1] : "");
        const char *why = gemm_problem(g, (size_t)gi, w);
        if (why) {
            st = tx_lower_note_add(r, "Linear(quantized)", e->gemm_name, false, why);
            e->blocked = true;
            continue;
        }
        for (int op = 0; op < 2 && !st; op++)
            if (e->has[op]) st = tx_rw_replace_uses(g, e->exit_[op], e->entry[op]);
        freed++;
    }
    if (!st && freed) {
        sweep(g);
        /* The freed GEMMs are plain now; the Linear pass's notes on
         * anything else were made already, so only its new Linears count. */
        tx_lower_report tmp;
        memset(&tmp, 0, sizeof tmp);
        st = tx_lower_linear(g, &tmp);
        for (size_t i = 0; i < tmp.n_notes && !st; i++)
            if (tmp.notes[i].lowered)
                st = tx_lower_note_add(r, tmp.notes[i].pattern, tmp.notes[i].node, true, NULL);
        for (size_t i = 0; i < tmp.n_notes; i++) {
            free(tmp.notes[i].pattern);
            free(tmp.notes[i].node);
            free(tmp.notes[i].reason);
        }
        free(tmp.notes);
    }
    for (size_t k = 0; k < nq && !st; k++)
        if (!q[k].blocked) st = annotate_linear(g, &q[k], r);
    qgemm_free(q, nq);
    return st;
}
