/* session_groups.c - a CPU session's runs follow its fuser plan: CHAIN
 * groups through the group executor, the rest node by node
 * (session_groups.h). */
#include "exec/session_groups.h"

#include "exec/group_exec.h"
#include "import/shape_infer_te.h"

#include <stdlib.h>
#include <string.h>

#define NX TX_TE_MAX_EXTRA

typedef tx_sgroup sgroup;

struct tx_sgroups {
    sgroup *g;                 /* per fuser group (STANDARD ones unused) */
    size_t n_groups;
    int8_t *role;              /* per node: tx_sgroups_role */
};

void tx_sgroup_free(tx_sgroup *g)
{
    free(g->ops);
    free(g->dec);
    free(g->ptrs);
    free(g->ptr_off);
}

void tx_sgroups_free(tx_plan *p)
{
    if (!p) return;
    if (p->sg) {
        for (size_t i = 0; i < p->sg->n_groups; i++) tx_sgroup_free(&p->sg->g[i]);
        free(p->sg->g);
        free(p->sg->role);
        free(p->sg);
        p->sg = NULL;
    }
    tx_fuser_plan_free(p->fplan);
    p->fplan = NULL;
}

/* Op index of node `node` in group pg, or -1. */
static int32_t op_of(const tx_plan_group *pg, int32_t node)
{
    for (int32_t j = 0; j < pg->n_nodes; j++)
        if (pg->nodes[j] == node) return j;
    return -1;
}

/* Op index (< before) of the group node producing value v as its fork
 * (output 1); -1 when none. *inside says whether any output of a group
 * node is v. */
static int32_t fork_of(const tx_ir_graph *g, const tx_plan_group *pg, int32_t before, int32_t v,
                       bool *inside)
{
    *inside = false;
    int32_t found = -1;
    for (int32_t j = 0; j < pg->n_nodes; j++) {
        const tx_ir_node *n = &g->nodes[pg->nodes[j]];
        for (size_t o = 0; o < n->n_outputs; o++) {
            if (n->outputs[o] != v) continue;
            *inside = true;
            if (o == 1 && j < before) found = j;
        }
    }
    return found;
}

teexec_status *tx_sgroup_prepare(const tx_ir_graph *g, const bool *skip,
                                 const tx_plan_group *pg, tx_sgroup *sg)
{
    sg->gx = false;
    int32_t n = pg->n_nodes;
    if (n < 1 || pg->main_input < 0 || pg->main_output < 0) return NULL;
    for (int32_t j = 0; j < n; j++) {
        if (skip && skip[pg->nodes[j]]) return NULL;
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        for (size_t o = 2; o < nd->n_outputs; o++)
            if (nd->outputs[o] >= 0) return NULL;
    }
    sg->ops = calloc((size_t)n, sizeof(*sg->ops));
    sg->dec = calloc((size_t)n, sizeof(*sg->dec));
    sg->ptr_off = calloc((size_t)n, sizeof(*sg->ptr_off));
    if (!sg->ops || !sg->dec || !sg->ptr_off) return tx_oom();
    size_t total = 0;
    for (int32_t j = 0; j < n; j++) {
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        teexec_status *st = tx_te_node_read(nd, &sg->dec[j]);
        if (st) {
            /* the node-by-node run reports it with the node's own message */
            teexec_status_destroy(st);
            return NULL;
        }
        sg->ptr_off[j] = total;
        total += (size_t)sg->dec[j].n_params + NX;
    }
    sg->ptrs = calloc(total ? total : 1, sizeof(*sg->ptrs));
    if (!sg->ptrs) return tx_oom();
    for (int32_t j = 0; j < n; j++) {
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        const tx_te_node *d = &sg->dec[j];
        tx_group_op *o = &sg->ops[j];
        o->op = d->s->id;
        o->node = pg->nodes[j];
        o->name = nd->label;
        o->attrs = d->attrs;
        o->params = sg->ptrs + sg->ptr_off[j];
        o->n_params = d->n_params;
        o->extra_inputs = sg->ptrs + sg->ptr_off[j] + d->n_params;
        o->n_extra_inputs = d->s->n_extra_inputs;
        if (o->n_extra_inputs > NX) return NULL;
        for (int e = 0; e < NX; e++) o->channel_from[e] = -1;
        for (int e = 0; e < o->n_extra_inputs; e++) {
            size_t k = 1 + (size_t)e;
            int32_t v = k < nd->n_inputs ? nd->inputs[k] : -1;
            if (v < 0) continue;
            bool inside = false;
            int32_t from = fork_of(g, pg, j, v, &inside);
            if (from >= 0) o->channel_from[e] = from;
            else if (inside) return NULL;
        }
        o->params_need_grad = false;
    }
    sg->grp.ops = sg->ops;
    sg->grp.n_ops = n;
    sg->grp.input_needs_grad = false;
    sg->gx = true;
    return NULL;
}

teexec_status *tx_sgroups_init_delayed(const tx_recipe *recipe, const tx_fuser_plan *fp,
                                      tx_delayed_state *delayed, bool *has_delayed)
{
    if (recipe->kind != TX_RECIPE_FP8_DELAYED) return NULL;
    int32_t max_slot = -1;
    for (size_t i = 0; i < fp->n_quant; i++)
        if (fp->quant[i].delayed_slot > max_slot) max_slot = fp->quant[i].delayed_slot;
    if (*has_delayed) {
        /* slots number the quantized operands of the graph, whatever the shapes */
        if ((uint32_t)(max_slot + 1) > delayed->count)
            return tx_error(TEEXEC_ERR_INTERNAL,
                            "fp8-delayed: a plan has %d scaling slots, the state %u",
                            (int)(max_slot + 1), (unsigned)delayed->count);
        return NULL;
    }
    if (max_slot < 0) return NULL;
    uint32_t count = (uint32_t)max_slot + 1;
    teexec_dtype *fmts = calloc(count, sizeof(*fmts));
    if (!fmts) return tx_oom();
    for (uint32_t i = 0; i < count; i++) fmts[i] = TEEXEC_DTYPE_FLOAT8E4M3FN;
    for (size_t i = 0; i < fp->n_quant; i++)
        if (fp->quant[i].delayed_slot >= 0) fmts[fp->quant[i].delayed_slot] = fp->quant[i].data_dtype;
    int hist = recipe->amax_history_len > 0 ? recipe->amax_history_len : 1024;
    teexec_status *st = tx_delayed_init(delayed, (uint32_t)hist, count, 0, TX_AMAX_MAX, fmts);
    free(fmts);
    TX_TRY(st);
    *has_delayed = true;
    return NULL;
}

teexec_status *tx_sgroups_build(teexec_session *s, tx_plan *p)
{
    const tx_ir_graph *g = s->g;
    tx_plan_request req;
    memset(&req, 0, sizeof(req));
    req.recipe = s->recipe;
    TX_TRY(tx_device_caps_parse("cpu", &req.device));
    req.training = false;
    req.deterministic = s->deterministic;
    req.vals = p->typed.vals;
    req.n_vals = g->n_values;
    req.skip_memory = true; /* the session's own buffer plan places the values */
    TX_TRY(tx_fuser_plan_build(g, &req, &p->fplan));
    const tx_fuser_plan *fp = p->fplan;
    p->sg = calloc(1, sizeof(*p->sg));
    if (!p->sg) return tx_oom();
    p->sg->g = calloc(fp->n_groups ? fp->n_groups : 1, sizeof(*p->sg->g));
    p->sg->role = calloc(g->n_nodes ? g->n_nodes : 1, sizeof(*p->sg->role));
    if (!p->sg->g || !p->sg->role) return tx_oom();
    p->sg->n_groups = fp->n_groups;
    for (size_t k = 0; k < fp->n_groups; k++) {
        const tx_plan_group *pg = &fp->groups[k];
        if (pg->kind != TX_GROUP_CHAIN) continue;
        TX_TRY(tx_sgroup_prepare(g, p->typed.skip, pg, &p->sg->g[k]));
        if (!p->sg->g[k].gx) continue;
        for (int32_t j = 0; j < pg->n_nodes; j++) p->sg->role[pg->nodes[j]] = j == 0 ? 1 : -1;
    }
    return tx_sgroups_init_delayed(&s->recipe, fp, &s->delayed, &s->has_delayed);
}

int tx_sgroups_role(const tx_plan *p, size_t node)
{
    return p->sg ? p->sg->role[node] : 0;
}

static teexec_status *trace_add(teexec_session *s, int32_t group, tx_plan_kernel k)
{
    if (s->n_trace == s->cap_trace) {
        size_t cap = s->cap_trace ? 2 * s->cap_trace : 64;
        tx_run_kernel *t = realloc(s->trace, cap * sizeof(*t));
        if (!t) return tx_oom();
        s->trace = t;
        s->cap_trace = cap;
    }
    s->trace[s->n_trace++] = (tx_run_kernel){group, k};
    return NULL;
}

teexec_status *tx_sgroups_trace_node(teexec_session *s, const tx_plan *p, size_t node)
{
    if (!p->fplan) return NULL;
    int32_t gid = p->fplan->group_of_node[node];
    const tx_plan_group *pg = &p->fplan->groups[gid];
    if (pg->kind != TX_GROUP_CHAIN) return NULL;
    int32_t j = op_of(pg, (int32_t)node);
    return trace_add(s, gid, (tx_plan_kernel){TX_FUSION_NONE, j, 1});
}

/* Moves a copy of a group result into the run's store. */
static teexec_status *publish(const tx_tensor *t, int32_t v, const tx_tensor **cur, tx_tensor *store)
{
    if (!t || !t->data) return tx_error(TEEXEC_ERR_INTERNAL, "a fuser group did not produce a value");
    TX_TRY(tx_tensor_clone(t, &store[v]));
    cur[v] = &store[v];
    return NULL;
}

teexec_status *tx_sgroup_bind(const tx_ir_graph *g, const tx_plan_group *pg, tx_sgroup *sg,
                              const tx_tensor *const *cur)
{
    for (int32_t j = 0; j < pg->n_nodes; j++) {
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        const tx_te_node *d = &sg->dec[j];
        const tx_tensor **pp = sg->ptrs + sg->ptr_off[j];
        for (int q = 0; q < d->n_params; q++) {
            size_t k = d->first_param + (size_t)q;
            int32_t v = k < nd->n_inputs ? nd->inputs[k] : -1;
            pp[q] = v >= 0 ? cur[v] : NULL;
            if (v >= 0 && !pp[q])
                return tx_error(TEEXEC_ERR_INTERNAL, "value \"%s\" was not computed",
                                g->values[v].name);
        }
        const tx_tensor **xp = pp + d->n_params;
        for (int e = 0; e < NX; e++) {
            xp[e] = NULL;
            size_t k = 1 + (size_t)e;
            if (e >= sg->ops[j].n_extra_inputs || sg->ops[j].channel_from[e] >= 0 ||
                k >= nd->n_inputs || nd->inputs[k] < 0)
                continue;
            xp[e] = cur[nd->inputs[k]];
            if (!xp[e])
                return tx_error(TEEXEC_ERR_INTERNAL, "value \"%s\" was not computed",
                                g->values[nd->inputs[k]].name);
        }
    }
    return NULL;
}

teexec_status *tx_sgroups_run(teexec_session *s, const tx_plan *p, size_t first,
                              const tx_tensor **cur, tx_tensor *store)
{
    const tx_ir_graph *g = s->g;
    const tx_fuser_plan *fp = p->fplan;
    int32_t gid = fp->group_of_node[first];
    const tx_plan_group *pg = &fp->groups[gid];
    sgroup *sg = &p->sg->g[gid];
    TX_TRY(tx_sgroup_bind(g, pg, sg, cur));
    const tx_tensor *input = cur[pg->main_input];
    if (!input)
        return tx_error(TEEXEC_ERR_INTERNAL, "value \"%s\" was not computed",
                        g->values[pg->main_input].name);
    tx_group_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.recipe = fp->recipe;
    cfg.quant = fp->quant;
    cfg.n_quant = fp->n_quant;
    cfg.delayed = s->has_delayed ? &s->delayed : NULL;
    cfg.seed = 0;
    cfg.step = s->n_runs;
    cfg.training = false;
    tx_group_run *r = NULL;
    TX_TRY(tx_group_forward(&sg->grp, &cfg, pg->forward, pg->n_forward, input, &r));
    teexec_status *st = publish(tx_group_output(r), pg->main_output, cur, store);
    for (int32_t j = 0; !st && j < pg->n_nodes; j++) {
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        if (nd->n_outputs < 2 || nd->outputs[1] < 0) continue;
        bool leaves = false; /* forks read only inside the chain stay in the run */
        for (int32_t k = 0; k < pg->n_extra_outputs; k++)
            if (pg->extra_outputs[k] == nd->outputs[1]) leaves = true;
        if (!leaves) continue;
        st = publish(tx_group_extra_output(r, j), nd->outputs[1], cur, store);
    }
    tx_group_run_free(r);
    for (int32_t t = 0; !st && t < pg->n_forward; t++) st = trace_add(s, gid, pg->forward[t]);
    return st;
}

void tx_sgroups_after_run(teexec_session *s)
{
    if (s->has_delayed) tx_delayed_update(&s->delayed, NULL);
}

const tx_run_kernel *tx_session_last_kernels(const teexec_session *s, size_t *n,
                                             const tx_fuser_plan **plan)
{
    *n = s ? s->n_trace : 0;
    if (plan) *plan = s ? s->last_fplan : NULL;
    return s ? s->trace : NULL;
}
