/* api_plan.c - the public planning and conversion API (teexec.h):
 * teexec_model_plan and teexec_model_convert over the lowering passes
 * (import/lower.h) and the planner (planner/plan.h). */
#include "import/infer_graph.h"
#include "exec/model_lower.h"
#include "exec/prepare.h"
#include "format/atomic_write.h"
#include "format/external_data.h"
#include "import/rewrite.h"
#include "planner/coverage.h"
#include "planner/plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct teexec_plan_options {
    tx_recipe recipe;
    tx_device_caps device;
    bool training, deterministic;
    bool external_data; /* convert: weights to "<path>.data" */
    int64_t kv_batch, kv_capacity; /* convert: > 0 = the cache form (tx_model_kv_cache) */
    char **dim_names;
    int64_t *dim_values;
    size_t n_dims;
};

/* The documented defaults: recipe none, device cpu, inference. */
static teexec_status *options_defaults(teexec_plan_options *o)
{
    memset(o, 0, sizeof(*o));
    TX_TRY(tx_recipe_parse("none", &o->recipe));
    return tx_device_caps_parse("cpu", &o->device);
}

teexec_status *teexec_plan_options_create(teexec_plan_options **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_options is NULL");
    *out = NULL;
    teexec_plan_options *o = calloc(1, sizeof(*o));
    if (!o) return tx_oom();
    teexec_status *st = options_defaults(o);
    if (st) {
        free(o);
        return st;
    }
    *out = o;
    return NULL;
}

void teexec_plan_options_destroy(teexec_plan_options *o)
{
    if (!o) return;
    for (size_t i = 0; i < o->n_dims; i++) free(o->dim_names[i]);
    free(o->dim_names);
    free(o->dim_values);
    free(o);
}

teexec_status *teexec_plan_options_set_recipe(teexec_plan_options *o, const char *recipe)
{
    if (!o || !recipe) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options or recipe is NULL");
    tx_recipe r;
    TX_TRY(tx_recipe_parse(recipe, &r));
    o->recipe = r;
    return NULL;
}

teexec_status *teexec_plan_options_set_device(teexec_plan_options *o, const char *device)
{
    if (!o || !device) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options or device is NULL");
    tx_device_caps d;
    TX_TRY(tx_device_caps_parse(device, &d));
    o->device = d;
    return NULL;
}

teexec_status *teexec_plan_options_set_training(teexec_plan_options *o, int training)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->training = training != 0;
    return NULL;
}

teexec_status *teexec_plan_options_set_external_data(teexec_plan_options *o, int external_data)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->external_data = external_data != 0;
    return NULL;
}

teexec_status *teexec_plan_options_set_kv_cache(teexec_plan_options *o, int64_t batch,
                                                int64_t capacity)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    if ((batch == 0) != (capacity == 0) || batch < 0 || capacity < 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "kv cache batch %lld and capacity %lld: both at least 1, or both 0 (off)",
                        (long long)batch, (long long)capacity);
    o->kv_batch = batch;
    o->kv_capacity = capacity;
    return NULL;
}

teexec_status *teexec_plan_options_set_deterministic(teexec_plan_options *o, int deterministic)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->deterministic = deterministic != 0;
    return NULL;
}

teexec_status *teexec_plan_options_set_dim(teexec_plan_options *o, const char *name, int64_t value)
{
    if (!o || !name) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options or dim name is NULL");
    if (value < 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dim %s: value %" PRId64 " is negative", name,
                        value);
    for (size_t i = 0; i < o->n_dims; i++)
        if (strcmp(o->dim_names[i], name) == 0) {
            o->dim_values[i] = value;
            return NULL;
        }
    char **nn = realloc(o->dim_names, (o->n_dims + 1) * sizeof(*nn));
    if (!nn) return tx_oom();
    o->dim_names = nn;
    int64_t *nv = realloc(o->dim_values, (o->n_dims + 1) * sizeof(*nv));
    if (!nv) return tx_oom();
    o->dim_values = nv;
    char *copy = strdup(name);
    if (!copy) return tx_oom();
    o->dim_names[o->n_dims] = copy;
    o->dim_values[o->n_dims] = value;
    o->n_dims++;
    return NULL;
}

void teexec_string_free(char *text) { free(text); }

/* ---- planning a model ---------------------------------------------------- */

/* Everything a plan of a model is made of; released by planned_free. The
 * lowered model and its report belong to the model (exec/prepare.h). */
typedef struct planned {
    const teexec_model *lowered;
    const tx_lower_report *report;
    tx_infer_value *vals;
    size_t n_vals;
    tx_fuser_plan *plan;
} planned;

static void planned_free(planned *p)
{
    tx_fuser_plan_free(p->plan);
    if (p->vals) tx_infer_values_free(p->vals, p->n_vals);
    memset(p, 0, sizeof(*p));
}

/* Infers and plans the model's lowered copy for o (NULL: the defaults). */
static teexec_status *plan_model(const teexec_model *model, const teexec_plan_options *o,
                                 planned *p)
{
    memset(p, 0, sizeof(*p));
    teexec_plan_options defaults;
    if (!o) {
        TX_TRY(options_defaults(&defaults));
        o = &defaults;
    }
    const tx_prepared *prep = NULL;
    teexec_status *st = tx_model_runnable(model, &p->lowered, &prep);
    if (!st) p->report = prep ? prep->report : NULL;
    const tx_ir_graph *g = st ? NULL : p->lowered->ir->graph;
    if (!st)
        st = tx_infer_graph(g, p->lowered->file, (const char *const *)o->dim_names, o->dim_values,
                            o->n_dims, &p->vals);
    if (!st) {
        p->n_vals = g->n_values;
        tx_plan_request req = {
            .recipe = o->recipe,
            .device = o->device,
            .training = o->training,
            .deterministic = o->deterministic,
            .vals = p->vals,
            .n_vals = g->n_values,
        };
        st = tx_fuser_plan_build(g, &req, &p->plan);
    }
    if (st) planned_free(p);
    return st;
}

/* A growing text buffer; on allocation failure it keeps `failed` and
 * the caller reports out of memory once. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
    bool failed;
} strbuf;

TX_PRINTF(2, 3)
static void sb_printf(strbuf *b, const char *fmt, ...)
{
    if (b->failed) return;
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        va_end(ap2);
        return;
    }
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->failed = true;
            va_end(ap2);
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

static void sb_json_string(strbuf *b, const char *s)
{
    sb_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\') sb_printf(b, "\\%c", *c);
        else if (*c < 0x20) sb_printf(b, "\\u%04x", *c);
        else sb_printf(b, "%c", *c);
    }
    sb_printf(b, "\"");
}

static size_t count_lowered(const tx_lower_report *r)
{
    size_t n = 0;
    for (size_t i = 0; r && i < r->n_notes; i++) n += r->notes[i].lowered;
    return n;
}

static void lowering_text(strbuf *b, const tx_lower_report *r, bool explain)
{
    size_t n = r ? r->n_notes : 0, low = count_lowered(r);
    sb_printf(b, "lowering: %zu pattern%s lowered to te.ops, %zu left as standard ops\n", low,
              low == 1 ? "" : "s", n - low);
    if (!explain) return;
    for (size_t i = 0; i < n; i++) {
        const tx_lower_note *x = &r->notes[i];
        if (x->lowered) sb_printf(b, "  lowered  %-22s at %s\n", x->pattern, x->node);
        else sb_printf(b, "  declined %-22s at %s: %s\n", x->pattern, x->node, x->reason);
    }
}

static void lowering_json(strbuf *b, const tx_lower_report *r)
{
    sb_printf(b, "[");
    for (size_t i = 0; r && i < r->n_notes; i++) {
        const tx_lower_note *x = &r->notes[i];
        sb_printf(b, "%s{\"pattern\": ", i ? ", " : "");
        sb_json_string(b, x->pattern);
        sb_printf(b, ", \"node\": ");
        sb_json_string(b, x->node);
        sb_printf(b, ", \"lowered\": %s", x->lowered ? "true" : "false");
        if (!x->lowered) {
            sb_printf(b, ", \"reason\": ");
            sb_json_string(b, x->reason);
        }
        sb_printf(b, "}");
    }
    sb_printf(b, "]");
}

/* Why a standard op of a row is left: it only moves data, a declined
 * lowering pattern anchored at one of its nodes says why, or no pattern
 * covers it. */
static const char *row_reason(const tx_coverage_row *row, const tx_ir_graph *g,
                              const tx_lower_report *r)
{
    if (row->data_movement) return "moves or reshapes data only (no arithmetic)";
    for (size_t i = 0; r && i < r->n_notes; i++) {
        const tx_lower_note *x = &r->notes[i];
        if (x->lowered || !x->reason) continue;
        for (size_t k = 0; k < g->n_nodes; k++) {
            const tx_ir_node *n = &g->nodes[k];
            const char *op = strchr(row->op, ':') ? strchr(row->op, ':') + 1 : row->op;
            if (strcmp(n->op_type, op) == 0 && strcmp(n->label, x->node) == 0) return x->reason;
        }
    }
    return "no lowering pattern covers it";
}

static double share(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

static void coverage_text(strbuf *b, const tx_plan_coverage *c, const tx_ir_graph *g,
                          const tx_lower_report *r, bool explain)
{
    sb_printf(b, "coverage: %.1f%% of %.4g forward FLOPs and %zu of %zu nodes in te.ops groups",
              100.0 * share(c->flops_te, c->flops_total), c->flops_total, c->nodes_te,
              c->nodes_total);
    if (c->unknown) sb_printf(b, " (%zu nodes of unknown size not counted)", c->unknown);
    sb_printf(b, "\n");
    for (size_t i = 0; i < c->n_left; i++) {
        const tx_coverage_row *row = &c->left[i];
        if (!explain && row->data_movement) continue;
        sb_printf(b, "  standard %-22s x%-4zu %5.1f%% of FLOPs: %s\n", row->op, row->count,
                  100.0 * share(row->flops, c->flops_total), row_reason(row, g, r));
    }
}

static void coverage_json(strbuf *b, const tx_plan_coverage *c, const tx_ir_graph *g,
                          const tx_lower_report *r)
{
    sb_printf(b, "{\"flops_total\": %.17g, \"flops_te\": %.17g, \"flops_share\": %.6f, "
                 "\"nodes_total\": %zu, \"nodes_te\": %zu, \"node_share\": %.6f, "
                 "\"nodes_uncounted\": %zu, \"standard_ops\": [",
              c->flops_total, c->flops_te, share(c->flops_te, c->flops_total), c->nodes_total,
              c->nodes_te, share((double)c->nodes_te, (double)c->nodes_total), c->unknown);
    for (size_t i = 0; i < c->n_left; i++) {
        const tx_coverage_row *row = &c->left[i];
        sb_printf(b, "%s{\"op\": ", i ? ", " : "");
        sb_json_string(b, row->op);
        sb_printf(b, ", \"count\": %zu, \"flops\": %.17g, \"reason\": ", row->count, row->flops);
        sb_json_string(b, row_reason(row, g, r));
        sb_printf(b, "}");
    }
    sb_printf(b, "]}");
}

teexec_status *teexec_model_plan(const teexec_model *model, const teexec_plan_options *options,
                                 teexec_plan_format format, char **out_text)
{
    if (!out_text) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_text is NULL");
    *out_text = NULL;
    if (!model) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "model is NULL");
    if (format != TEEXEC_PLAN_TEXT && format != TEEXEC_PLAN_EXPLAIN && format != TEEXEC_PLAN_JSON &&
        format != TEEXEC_PLAN_DOT)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "unknown plan format %d", (int)format);
    planned p;
    TX_TRY(plan_model(model, options, &p));
    const tx_ir_graph *g = p.lowered->ir->graph;
    if (format == TEEXEC_PLAN_DOT) {
        /* the graph alone: a file `dot` reads, no lowering or coverage text */
        teexec_status *st = tx_fuser_plan_dot(p.plan, g, out_text);
        planned_free(&p);
        return st;
    }
    char *body = NULL;
    tx_plan_coverage cov;
    teexec_status *st = tx_plan_coverage_compute(p.plan, g, p.vals, p.n_vals, &cov);
    if (st) {
        planned_free(&p);
        return st;
    }
    st = format == TEEXEC_PLAN_JSON
             ? tx_fuser_plan_json(p.plan, g, &body)
             : tx_fuser_plan_text(p.plan, g, format == TEEXEC_PLAN_EXPLAIN, &body);
    strbuf b = {0};
    if (!st) {
        if (format == TEEXEC_PLAN_JSON) {
            sb_printf(&b, "{\"lowering\": ");
            lowering_json(&b, p.report);
            sb_printf(&b, ", \"coverage\": ");
            coverage_json(&b, &cov, g, p.report);
            sb_printf(&b, ", \"plan\": %s}\n", body);
        } else {
            lowering_text(&b, p.report, format == TEEXEC_PLAN_EXPLAIN);
            coverage_text(&b, &cov, g, p.report, format == TEEXEC_PLAN_EXPLAIN);
            sb_printf(&b, "%s", body);
        }
        if (b.failed) st = tx_oom();
    }
    tx_plan_coverage_free(&cov);
    free(body);
    planned_free(&p);
    if (st) {
        free(b.s);
        return st;
    }
    *out_text = b.s;
    return NULL;
}

/* ---- conversion ------------------------------------------------------------- */

static const char *qkind_name(const tx_plan_quant *q)
{
    if (!q->quantized) return "none";
    switch (q->kind) {
    case TX_QKIND_FP8_TENSOR: return "fp8-tensor";
    case TX_QKIND_FP8_BLOCK: return "blocked";
    case TX_QKIND_MXFP8: return "mxfp8";
    case TX_QKIND_NVFP4: return "nvfp4";
    }
    return "other";
}

static const char *qoperand_attr(tx_qoperand op)
{
    switch (op) {
    case TX_QOP_INPUT: return "quant_input";
    case TX_QOP_WEIGHT: return "quant_weight";
    case TX_QOP_GRAD_OUTPUT: return "quant_grad_output";
    }
    return "quant_other";
}

/* "ForwardLinearBiasAdd(0-2) GELU(3)": a layout over the group's ops. */
static void layout_text(strbuf *b, const tx_plan_group *grp, const tx_plan_kernel *k, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        const char *name;
        if (k[i].fusion == TX_FUSION_NONE) {
            const tx_te_op_schema *s = tx_te_schema(grp->ops[k[i].first]);
            name = s ? s->name : "?";
        } else {
            const tx_fusion_info *fi = tx_fusion_info_of(k[i].fusion);
            name = fi ? fi->name : "?";
        }
        if (k[i].count > 1)
            sb_printf(b, "%s%s(%d-%d)", i ? " " : "", name, (int)k[i].first,
                      (int)(k[i].first + k[i].count - 1));
        else
            sb_printf(b, "%s%s(%d)", i ? " " : "", name, (int)k[i].first);
    }
}

static teexec_status *set_layout_attr(tx_rw_graph *rw, size_t call, const char *name,
                                      const tx_plan_group *grp, const tx_plan_kernel *k, int32_t n)
{
    strbuf b = {0};
    layout_text(&b, grp, k, n);
    if (b.failed) {
        free(b.s);
        return tx_oom();
    }
    teexec_status *st = tx_rw_set_string(rw, call, name, b.s ? b.s : "");
    free(b.s);
    return st;
}

/* Outlines every te.ops chain group into te.fused function "g<id>_<first op>_<last op>"
 * and annotates Linear nodes with the plan's quantization. Node indices of
 * rw equal those of g (the lowered model has no calls to inline). */
static teexec_status *outline_groups(tx_rw_graph *rw, const tx_ir_graph *g,
                                     const tx_fuser_plan *plan, size_t *n_functions)
{
    *n_functions = 0;
    if (tx_rw_node_count(rw) != g->n_nodes)
        return tx_error(TEEXEC_ERR_INTERNAL,
                        "convert: rewrite graph has %zu nodes, lowered model %zu",
                        tx_rw_node_count(rw), g->n_nodes);
    char rbuf[64];
    const char *recipe = tx_recipe_name(&plan->recipe, rbuf, sizeof rbuf);
    if (plan->recipe.kind != TX_RECIPE_NONE)
        for (size_t i = 0; i < plan->n_quant; i++) {
            const tx_plan_quant *q = &plan->quant[i];
            TX_TRY(tx_rw_set_string(rw, (size_t)q->node, qoperand_attr(q->operand), qkind_name(q)));
        }
    size_t *idx = NULL;
    teexec_status *st = NULL;
    for (size_t gi = 0; gi < plan->n_groups && !st; gi++) {
        const tx_plan_group *grp = &plan->groups[gi];
        if (grp->kind != TX_GROUP_CHAIN || grp->n_nodes <= 0) continue;
        size_t *ni = realloc(idx, (size_t)grp->n_nodes * sizeof(*idx));
        if (!ni) {
            st = tx_oom();
            break;
        }
        idx = ni;
        for (int32_t k = 0; k < grp->n_nodes; k++) idx[k] = (size_t)grp->nodes[k];
        const tx_te_op_schema *first = tx_te_schema(grp->ops[0]);
        const tx_te_op_schema *last = tx_te_schema(grp->ops[grp->n_nodes - 1]);
        char fname[160];
        snprintf(fname, sizeof fname, "g%d_%s_%s", (int)grp->id, first ? first->name : "op",
                 last ? last->name : "op");
        size_t call = 0;
        st = tx_rw_outline(rw, idx, (size_t)grp->n_nodes, TX_TE_FUSED_DOMAIN, fname, &call);
        if (!st) st = tx_rw_set_string(rw, call, "recipe", recipe);
        if (!st) st = set_layout_attr(rw, call, "forward_layout", grp, grp->forward, grp->n_forward);
        if (!st && plan->training)
            st = set_layout_attr(rw, call, "backward_layout", grp, grp->backward, grp->n_backward);
        if (!st) ++*n_functions;
    }
    free(idx);
    return st;
}

/* The model's external-data form (import/rewrite.h): the weights written
 * to "<path>.data" (atomically, before the model that names it), the
 * model's bytes in *bytes. */
static teexec_status *write_external_data(const tx_rw_graph *rw, const char *path,
                                          uint8_t **bytes, size_t *len, size_t *data_bytes)
{
    char *data_path = NULL, *location = NULL;
    TX_TRY(tx_external_data_names(path, &data_path, &location));
    tx_side_data data = {0};
    teexec_status *st = tx_rw_emit_external_data(rw, location, &data, bytes, len);
    if (!st) st = tx_side_write_file(&data, data_path);
    if (!st) *data_bytes = data.size;
    if (st) {
        free(*bytes);
        *bytes = NULL;
    }
    tx_side_free(&data);
    free(data_path);
    free(location);
    return st;
}

teexec_status *teexec_model_convert(const teexec_model *model, const teexec_plan_options *options,
                                    const char *path, char **summary)
{
    if (summary) *summary = NULL;
    if (!model || !path) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "model or path is NULL");
    /* the cache form is a model of its own, planned as any other */
    teexec_model *cached = NULL;
    tx_lower_report *kv_report = NULL;
    const tx_lower_report *first_lowering = NULL; /* the cache form's own lowering finds none */
    if (options && options->kv_capacity > 0) {
        const teexec_model *lowered = NULL;
        const tx_prepared *prep = NULL;
        TX_TRY(tx_model_runnable(model, &lowered, &prep));
        first_lowering = prep ? prep->report : NULL;
        TX_TRY(tx_model_kv_cache(lowered, options->kv_batch, options->kv_capacity, &kv_report,
                                 &cached));
        model = cached;
    }
    planned p;
    teexec_status *pst = plan_model(model, options, &p);
    if (pst) {
        tx_lower_report_free(kv_report);
        teexec_model_destroy(cached);
        return pst;
    }
    tx_rw_graph *rw = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0, n_functions = 0;
    teexec_status *st = tx_rw_from_ir(p.lowered->ir, &rw);
    if (!st) st = outline_groups(rw, p.lowered->ir->graph, p.plan, &n_functions);
    bool external = options && options->external_data;
    if (!st && !external) {
        st = tx_rw_emit(rw, &bytes, &len);
        /* over protobuf's 2 GiB: the weights go beside it instead (any
         * other limit fails the same way again there, and is reported) */
        if (st && teexec_status_code(st) == TEEXEC_ERR_LIMIT) {
            teexec_status_destroy(st);
            st = NULL;
            external = true;
        }
    }
    size_t data_bytes = 0;
    if (!st && external) st = write_external_data(rw, path, &bytes, &len, &data_bytes);
    if (!st) {
        const void *data[1] = {bytes};
        size_t sizes[1] = {len};
        st = tx_write_file_atomic(path, 1, data, sizes);
    }
    if (!st && summary) {
        strbuf b = {0};
        size_t low = count_lowered(kv_report && first_lowering ? first_lowering : p.report);
        sb_printf(&b, "%zu pattern%s lowered to te.ops, %zu fuser group%s written as te.fused "
                      "functions, %zu bytes\n",
                  low, low == 1 ? "" : "s", n_functions, n_functions == 1 ? "" : "s", len);
        if (external)
            sb_printf(&b, "weights as external data: %s.data, %zu bytes\n", path, data_bytes);
        if (kv_report)
            sb_printf(&b, "KV cache: %zu attention%s in the cache mode, state kv_cache.* [%lld, "
                          "%lld, h_kv, d], input cache_len\n",
                      kv_report->n_notes, kv_report->n_notes == 1 ? "" : "s",
                      (long long)options->kv_batch, (long long)options->kv_capacity);
        if (b.failed) {
            free(b.s);
            st = tx_oom();
        } else {
            *summary = b.s;
        }
    }
    free(bytes);
    tx_rw_free(rw);
    planned_free(&p);
    tx_lower_report_free(kv_report);
    teexec_model_destroy(cached);
    return st;
}
