/*
 * plan.c - tx_fuser_plan_build (groups -> fusions -> quantization ->
 * memory), tx_fuser_plan_free, the decline helper and the printable names
 * of the plan's enums.
 */
#include "planner/plan.h"
#include "planner/memory_plan.h"
#include "planner/quant_plan.h"

#include <stdlib.h>
#include <string.h>

const char *tx_group_kind_name(tx_group_kind k)
{
    return k == TX_GROUP_CHAIN ? "chain" : k == TX_GROUP_STANDARD ? "standard" : "unknown";
}

const char *tx_fusion_pass_name(tx_fusion_pass p)
{
    switch (p) {
    case TX_PASS_JOINT: return "joint";
    case TX_PASS_FORWARD: return "forward";
    case TX_PASS_BACKWARD: return "backward";
    }
    return "unknown";
}

const char *tx_qoperand_name(tx_qoperand q)
{
    switch (q) {
    case TX_QOP_INPUT: return "input";
    case TX_QOP_WEIGHT: return "weight";
    case TX_QOP_GRAD_OUTPUT: return "grad_output";
    }
    return "unknown";
}

const char *tx_mem_kind_name(tx_mem_kind k)
{
    switch (k) {
    case TX_MEM_ACTIVATION: return "activation";
    case TX_MEM_SAVED: return "saved";
    case TX_MEM_GRAD: return "grad";
    case TX_MEM_WORKSPACE: return "workspace";
    }
    return "unknown";
}

teexec_status *tx_plan_add_decline(tx_fuser_plan *p, int32_t group, int32_t first_op,
                                   tx_fusion_id fusion, const char *reason)
{
    if (!p || !reason) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan decline: NULL argument");
    size_t n = p->n_declines + 1;
    tx_plan_decline *d = realloc(p->declines, n * sizeof *d);
    if (!d) return tx_oom();
    p->declines = d;
    char *copy = malloc(strlen(reason) + 1);
    if (!copy) return tx_oom();
    strcpy(copy, reason);
    d[n - 1] = (tx_plan_decline){group, first_op, fusion, copy};
    p->n_declines = n;
    return NULL;
}

void tx_fuser_plan_free(tx_fuser_plan *p)
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

teexec_status *tx_fuser_plan_build(const tx_ir_graph *g, const tx_plan_request *req,
                                   tx_fuser_plan **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan: out is NULL");
    *out = NULL;
    if (!g || !req) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan: graph or request is NULL");
    if (req->vals && req->n_vals != g->n_values)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "plan: the request has types for %zu values, the graph has %zu",
                        req->n_vals, g->n_values);
    if (req->input_needs_grad == NULL && req->n_inputs != 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "plan: n_inputs set without input_needs_grad");
    tx_fuser_plan *p = calloc(1, sizeof *p);
    if (!p) return tx_oom();
    p->recipe = req->recipe;
    p->device = req->device;
    p->training = req->training;
    p->deterministic = req->deterministic;
    teexec_status *st = tx_plan_groups(g, req, p);
    if (!st) st = tx_plan_fusions(g, req, p);
    if (!st) st = tx_plan_quantization(g, req, p);
    if (!st && !req->skip_memory) st = tx_plan_memory(g, req, p);
    if (st) {
        tx_fuser_plan_free(p);
        return tx_status_prefix(st, "planning graph \"%s\"", g->name);
    }
    *out = p;
    return NULL;
}
