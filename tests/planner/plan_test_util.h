/*
 * plan_test_util.h - shared by the quantization-plan, memory-plan and
 * plan-cache tests: loading a model (optionally lowered to te.ops), shape
 * inference of every value, and hand-made fuser plans (groups and kernels
 * filled by the test, so these tests do not depend on the grouping and
 * fusion passes).
 *
 * Header-only (static functions); every test program includes it once.
 * Ownership: pt_model_free / pt_plan_free release what pt_* made.
 * Not thread-safe (tests are single-threaded).
 */
#ifndef TEEXEC_TESTS_PLANNER_PLAN_TEST_UTIL_H
#define TEEXEC_TESTS_PLANNER_PLAN_TEST_UTIL_H

#include "exec/cpu_te_ops.h"
#include "exec/model_internal.h"
#include "exec/model_lower.h"
#include "format/tensor_proto.h"
#include "planner/memory_plan.h"
#include "planner/plan.h"
#include "planner/quant_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pt_model {
    teexec_model *model;
    teexec_model *lowered; /* when loaded with lowering */
    const tx_ir_graph *g;
    const tx_onnx_file *file;
    tx_infer_value *vals;
    tx_tensor *inits; /* per value: decoded initializer */
    size_t n_vals;
} pt_model;

static inline void pt_model_free(pt_model *m)
{
    if (m->vals)
        for (size_t v = 0; v < m->n_vals; v++) tx_infer_value_clear(&m->vals[v]);
    if (m->inits)
        for (size_t v = 0; v < m->n_vals; v++) tx_tensor_release(&m->inits[v]);
    free(m->vals);
    free(m->inits);
    teexec_model_destroy(m->lowered);
    teexec_model_destroy(m->model);
    memset(m, 0, sizeof(*m));
}

/* Infers dtype and shape of every value of m->g from the declared input
 * shapes and the initializers. */
static inline teexec_status *pt_infer(pt_model *m)
{
    const tx_ir_graph *g = m->g;
    m->n_vals = g->n_values;
    m->vals = calloc(g->n_values + 1, sizeof(*m->vals));
    m->inits = calloc(g->n_values + 1, sizeof(*m->inits));
    if (!m->vals || !m->inits) return tx_oom();
    for (size_t i = 0; i < g->n_inputs; i++) {
        const tx_ir_value *val = &g->values[g->inputs[i]];
        tx_infer_value *iv = &m->vals[g->inputs[i]];
        iv->dtype = val->dtype;
        iv->shape.rank = val->rank;
        for (int32_t d = 0; d < val->rank; d++) {
            if (val->dims[d] < 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "input %s has a free dim", val->name);
            iv->shape.dims[d] = val->dims[d];
        }
        iv->shape_known = val->rank >= 0;
    }
    for (size_t v = 0; v < g->n_values; v++) {
        if (!(g->values[v].flags & TX_IR_VALUE_INITIALIZER)) continue;
        TX_TRY(tx_tensor_from_proto(g->values[v].initializer, m->file, &m->inits[v]));
        tx_infer_value *iv = &m->vals[v];
        iv->dtype = m->inits[v].dtype;
        iv->shape = tx_shape_of(&m->inits[v]);
        iv->shape_known = true;
        iv->value = &m->inits[v];
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        const tx_ir_node *n = &g->nodes[i];
        const tx_infer_value *pins[64];
        tx_infer_value outs[16];
        if (n->n_inputs > 64 || n->n_outputs > 16) return tx_error(TEEXEC_ERR_LIMIT, "node too wide for the test");
        for (size_t k = 0; k < n->n_inputs; k++) pins[k] = n->inputs[k] >= 0 ? &m->vals[n->inputs[k]] : NULL;
        memset(outs, 0, sizeof(outs));
        teexec_status *st = tx_exec_infer_node(n, m->file, pins, outs);
        for (size_t j = 0; j < n->n_outputs; j++) {
            int32_t o = n->outputs[j];
            if (st || o < 0) {
                tx_infer_value_clear(&outs[j]);
                continue;
            }
            bool own = outs[j].value == &outs[j].owned;
            m->vals[o] = outs[j];
            if (own) m->vals[o].value = &m->vals[o].owned;
        }
        if (st) return st;
    }
    return NULL;
}

/* Loads TEEXEC_SOURCE_ROOT/rel (lowered to te.ops when `lower`) and infers
 * its values. */
static inline teexec_status *pt_model_load(const char *rel, bool lower, pt_model *m)
{
    memset(m, 0, sizeof(*m));
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    TX_TRY(teexec_model_load_file(path, NULL, &m->model));
    const teexec_model *use = m->model;
    if (lower) {
        TX_TRY(tx_model_lower(m->model, NULL, &m->lowered));
        use = m->lowered;
    }
    m->g = use->ir->graph;
    m->file = use->file;
    return pt_infer(m);
}

/* ---- hand-made plans -------------------------------------------------------- */

static inline tx_fuser_plan *pt_plan_new(const tx_ir_graph *g, bool training, const char *device)
{
    tx_fuser_plan *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->training = training;
    p->group_of_node = calloc(g->n_nodes + 1, sizeof(int32_t));
    p->groups = calloc(g->n_nodes + 1, sizeof(tx_plan_group));
    if (device) {
        teexec_status *st = tx_device_caps_parse(device, &p->device);
        if (st) {
            teexec_status_destroy(st);
            return NULL;
        }
    }
    return p;
}

static inline tx_plan_kernel *pt_kernels(const tx_plan_kernel *k, int32_t n)
{
    tx_plan_kernel *out = calloc((size_t)n + 1, sizeof(*out));
    if (out && n) memcpy(out, k, (size_t)n * sizeof(*k));
    return out;
}

/* Appends a group over `nodes`, with the given layouts (NULL forward: one
 * unfused kernel per op; NULL backward when fob < n: one per op from fob). */
static inline void pt_group_add(tx_fuser_plan *p, const tx_ir_graph *g, tx_group_kind kind, const int32_t *nodes,
                         int32_t n, int32_t fob, const tx_plan_kernel *fwd, int32_t nf,
                         const tx_plan_kernel *bwd, int32_t nb)
{
    tx_plan_group *grp = &p->groups[p->n_groups];
    grp->id = (int32_t)p->n_groups;
    grp->kind = kind;
    grp->nodes = calloc((size_t)n, sizeof(int32_t));
    grp->ops = calloc((size_t)n, sizeof(tx_te_op_id));
    grp->n_nodes = n;
    grp->main_input = grp->main_output = -1;
    for (int32_t i = 0; i < n; i++) {
        grp->nodes[i] = nodes[i];
        p->group_of_node[nodes[i]] = grp->id;
        const tx_te_op_schema *s = tx_te_schema_find(g->nodes[nodes[i]].op_type);
        grp->ops[i] = s ? s->id : TX_TE_IDENTITY;
    }
    grp->first_op_requiring_backward = fob;
    tx_plan_kernel each[256];
    if (!fwd) {
        for (int32_t i = 0; i < n; i++) each[i] = (tx_plan_kernel){TX_FUSION_NONE, i, 1};
        fwd = each;
        nf = n;
    }
    grp->forward = pt_kernels(fwd, nf);
    grp->n_forward = nf;
    if (fob < n) {
        if (!bwd) {
            for (int32_t i = fob; i < n; i++) each[i - fob] = (tx_plan_kernel){TX_FUSION_NONE, i, 1};
            bwd = each;
            nb = n - fob;
        }
        grp->backward = pt_kernels(bwd, nb);
        grp->n_backward = nb;
    }
    p->n_groups++;
}

/* Every node its own group of one unfused kernel; backward for every node
 * when training. */
static inline tx_fuser_plan *pt_plan_each_node(const tx_ir_graph *g, bool training, const char *device)
{
    tx_fuser_plan *p = pt_plan_new(g, training, device);
    if (!p) return NULL;
    for (size_t i = 0; i < g->n_nodes; i++) {
        int32_t node = (int32_t)i;
        bool te = !strcmp(g->nodes[i].domain, "te.ops");
        pt_group_add(p, g, te ? TX_GROUP_CHAIN : TX_GROUP_STANDARD, &node, 1, training ? 0 : 1, NULL, 0, NULL, 0);
    }
    return p;
}

static inline void pt_plan_free(tx_fuser_plan *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_groups; i++) {
        tx_plan_group *g = &p->groups[i];
        free(g->nodes);
        free(g->ops);
        free(g->extra_inputs);
        free(g->extra_outputs);
        free(g->joint);
        free(g->forward);
        free(g->backward);
    }
    free(p->groups);
    free(p->group_of_node);
    for (size_t i = 0; i < p->n_declines; i++) free(p->declines[i].reason);
    free(p->declines);
    tx_plan_quant_clear(p);
    tx_memory_plan_clear(&p->memory);
    free(p);
}

static inline tx_plan_request pt_request(const pt_model *m, const char *recipe, const char *device, bool training)
{
    tx_plan_request r;
    memset(&r, 0, sizeof(r));
    teexec_status *st = tx_recipe_parse(recipe, &r.recipe);
    if (st) {
        fprintf(stderr, "recipe %s: %s\n", recipe, teexec_status_message(st));
        teexec_status_destroy(st);
    }
    st = tx_device_caps_parse(device, &r.device);
    if (st) {
        fprintf(stderr, "device %s: %s\n", device, teexec_status_message(st));
        teexec_status_destroy(st);
    }
    r.training = training;
    r.vals = m ? m->vals : NULL;
    r.n_vals = m ? m->n_vals : 0;
    return r;
}

/* Node index by name, -1 when absent. */
static inline int32_t pt_node(const tx_ir_graph *g, const char *name)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return (int32_t)i;
    return -1;
}

#endif
