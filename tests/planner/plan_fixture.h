/*
 * plan_fixture.h - shared by the planner tests: small te.ops graphs built in
 * memory (tests/import/model_builder.h), loaded, typed with tx_infer_graph
 * and planned with a request given as text (recipe, device, training...).
 * Header-only; each test program includes it once. Not thread-safe.
 */
#ifndef TEEXEC_TESTS_PLAN_FIXTURE_H
#define TEEXEC_TESTS_PLAN_FIXTURE_H

#include "../import/model_builder.h"

#include "import/infer_graph.h"
#include "import/ir.h"
#include "planner/plan.h"

#include <stdio.h>
#include <string.h>

enum { FX_FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, FX_INT64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };

typedef struct fx {
    tx_onnx_file *file;
    tx_ir_model *ir;
    tx_infer_value *vals;
    tx_fuser_plan *plan;
} fx;

/* What to plan for. */
typedef struct fx_req {
    const char *recipe;
    const char *device;
    bool training;
    bool deterministic;
    bool params_frozen;
    const bool *input_needs_grad;
    size_t n_inputs;
} fx_req;

static inline void fx_free(fx *f)
{
    tx_fuser_plan_free(f->plan);
    if (f->vals && f->ir) tx_infer_values_free(f->vals, f->ir->graph->n_values);
    tx_ir_model_free(f->ir);
    tx_onnx_file_free(f->file);
    memset(f, 0, sizeof *f);
}

static inline void fx_fail(teexec_status *st, const char *what)
{
    if (!st) return;
    fprintf(stderr, "%s: %s\n", what, teexec_status_message(st));
    teexec_status_destroy(st);
    fail_msg("%s failed", what);
}

/* Loads the IR and the value types (from a file path or packed bytes). */
static inline void fx_open_file(fx *f, const char *path)
{
    memset(f, 0, sizeof *f);
    fx_fail(tx_onnx_load_file(path, NULL, &f->file), path);
    fx_fail(tx_ir_build(f->file, &f->ir), "ir build");
    fx_fail(tx_ir_validate(f->ir), "ir validate");
    fx_fail(tx_infer_graph(f->ir->graph, f->file, NULL, NULL, 0, &f->vals), "infer graph");
}

static inline void fx_open_model(fx *f, const Onnx__ModelProto *m)
{
    memset(f, 0, sizeof *f);
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_status *st = tx_onnx_load_memory(bytes, size, NULL, NULL, &f->file);
    free(bytes);
    fx_fail(st, "load");
    fx_fail(tx_ir_build(f->file, &f->ir), "ir build");
    fx_fail(tx_ir_validate(f->ir), "ir validate");
    fx_fail(tx_infer_graph(f->ir->graph, f->file, NULL, NULL, 0, &f->vals), "infer graph");
}

/* Plans f for r; returns the status (the plan is in f->plan on success). */
static inline teexec_status *fx_try_plan(fx *f, const fx_req *r)
{
    tx_plan_request req;
    memset(&req, 0, sizeof req);
    teexec_status *st = tx_recipe_parse(r->recipe ? r->recipe : "none", &req.recipe);
    if (!st) st = tx_device_caps_parse(r->device ? r->device : "cpu", &req.device);
    if (st) return st;
    req.training = r->training;
    req.deterministic = r->deterministic;
    req.params_frozen = r->params_frozen;
    req.input_needs_grad = r->input_needs_grad;
    req.n_inputs = r->n_inputs;
    req.vals = f->vals;
    req.n_vals = f->ir->graph->n_values;
    tx_fuser_plan_free(f->plan);
    f->plan = NULL;
    return tx_fuser_plan_build(f->ir->graph, &req, &f->plan);
}

static inline void fx_plan(fx *f, const fx_req *r)
{
    fx_fail(fx_try_plan(f, r), "plan");
}

/* ---- building te.ops graphs ---------------------------------------------- */

static inline Onnx__ModelProto *fx_model(Onnx__GraphProto **g, const char *name)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    mb_opset(m, "te.ops", 1);
    *g = mb_graph(name);
    m->graph = *g;
    return m;
}

static inline Onnx__NodeProto *fx_te(Onnx__GraphProto *g, const char *name, const char *op,
                              const char *inputs, const char *outputs)
{
    return mb_node(g, name, op, "te.ops", inputs, outputs);
}

/* A float initializer of the given dims ("64,32"). */
static inline void fx_param(Onnx__GraphProto *g, const char *name, const char *dims)
{
    int64_t d[8];
    size_t n = 0;
    const char *p = dims;
    while (*p && n < 8) {
        d[n++] = strtoll(p, (char **)&p, 10);
        if (*p == ',') p++;
    }
    mb_init(g, name, d, n);
}

/* ---- looking at a plan ------------------------------------------------------ */

/* The group holding node `name`. */
static inline const tx_plan_group *fx_group_of(const fx *f, const char *name)
{
    const tx_ir_graph *g = f->ir->graph;
    for (size_t i = 0; i < g->n_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return &f->plan->groups[f->plan->group_of_node[i]];
    fail_msg("no node %s", name);
    return NULL;
}

/* A layout as text: "Fusion(a b) unfused(c)". */
static inline const char *fx_layout(const fx *f, const tx_plan_group *grp, const tx_plan_kernel *k,
                             int32_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < n; i++) {
        used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s(", i ? " " : "",
                                 tx_fusion_info_of(k[i].fusion)->name);
        for (int32_t j = 0; j < k[i].count; j++)
            used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s", j ? " " : "",
                                     f->ir->graph->nodes[grp->nodes[k[i].first + j]].name);
        used += (size_t)snprintf(buf + used, used < size ? size - used : 0, ")");
    }
    return buf;
}

/* The reason of the decline of `fusion` at node `name`, or NULL. */
static inline const char *fx_decline(const fx *f, tx_fusion_id fusion, const char *name)
{
    for (size_t i = 0; i < f->plan->n_declines; i++) {
        const tx_plan_decline *d = &f->plan->declines[i];
        const tx_plan_group *grp = &f->plan->groups[d->group];
        if (d->fusion == fusion
            && strcmp(f->ir->graph->nodes[grp->nodes[d->first_op]].name, name) == 0)
            return d->reason;
    }
    return NULL;
}

#endif
