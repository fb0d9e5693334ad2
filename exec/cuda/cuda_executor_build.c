/* cuda_executor_build.c - creating the CUDA executor (cuda_executor.h): take the
 * model's lowered copy, type every value and fold what is known before
 * running (its own value planner, exec/value_plan.h), plan, prepare a GPU
 * node per graph node and the plan's fused kernels, wire the backward walk,
 * make the one device allocation, upload what is known before running. */
#include "exec/cuda/cuda_executor_internal.h"

#include "exec/cpu_te_ops.h"
#include "exec/cuda/dev_arena.h"
#include "exec/cuda/gpu_handoff.h"
#include "exec/cuda/te_cuda_basic.h"
#include "exec/cuda/te_cuda_linear.h"
#include "exec/device_budget.h"
#include "exec/prepare.h"
#include "exec/quant_operand.h"
#include "exec/trainable.h"
#include "exec/weight_share.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/gemm_select.h"
#include "kernels/cuda/loss_mse.h"
#include "kernels/cuda/sdpa_cudnn.h"
#include "kernels/cuda/xent.h"
#include "planner/plan_schedule.h"
#include "planner/quant_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tx_gpu_built(void) { return true; }

bool tx_gpu_available(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* ---- creation: values ----------------------------------------------------------- */

static teexec_status *init_values(tx_cuda_executor *g)
{
    const tx_ir_graph *ir = g->ir;
    g->vals = calloc(ir->n_values ? ir->n_values : 1, sizeof(*g->vals));
    if (!g->vals) return tx_oom();
    for (size_t v = 0; v < ir->n_values; v++) {
        cx_value *gv = &g->vals[v];
        gv->param = -1;
        const tx_infer_value *iv = &g->plan.vals[v];
        if (!iv->shape_known || iv->dtype == TEEXEC_DTYPE_UNDEFINED) continue;
        gv->model_dtype = iv->dtype;
        gv->host = iv->value;
        if (!gv->host && tx_value_planner_is_deferred(g->vp, (int32_t)v)) {
            /* a deferred weight: its header now, its bytes when uploaded
             * (a graph output is read from the host: decoded now) */
            if (ir->values[v].flags & TX_IR_VALUE_GRAPH_OUTPUT)
                TX_TRY(tx_value_planner_load(g->vp, (int32_t)v));
            gv->host = &g->vp->init[v];
        }
        if (iv->dtype == TEEXEC_DTYPE_STRING)
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "value \"%s\" is a string tensor",
                            ir->values[v].name);
        TX_TRY(shape_tensor(&gv->dev, map_dtype(g, iv->dtype), &iv->shape));
    }
    return NULL;
}

/* Trainable parameters: float initializers read by a running node through a
 * slot that carries a gradient, and that reach the loss. */
static bool slot_diff(const cx_node *n, size_t k)
{
    if (n->kind == GN_TE) return tx_te_slot_differentiable(n->ir, k);
    if (n->kind == GN_STD) return tx_cuda_std_differentiable(n->std, k);
    return false;
}

static teexec_status *analyse_grads(tx_cuda_executor *g)
{
    const tx_ir_graph *ir = g->ir;
    size_t nv = ir->n_values;
    bool *fwd = calloc(nv ? nv : 1, sizeof(bool)), *reach = calloc(nv ? nv : 1, sizeof(bool));
    if (!fwd || !reach) {
        free(fwd);
        free(reach);
        return tx_oom();
    }
    for (size_t v = 0; v < nv; v++)
        if ((ir->values[v].flags & TX_IR_VALUE_INITIALIZER) && is_float(g->vals[v].model_dtype) &&
            tx_trainable_initializer(g->vals[v].host, ir->values[v].name, g->prep, g->topt.freeze)) {
            fwd[v] = true;
            tx_trainable_note_shared_norm(ir, (int32_t)v);
        }
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        if (n->kind == GN_FOLDED) continue;
        bool any = false;
        for (size_t k = 0; k < n->ir->n_inputs; k++) {
            int32_t v = n->ir->inputs[k];
            if (v >= 0 && fwd[v] && slot_diff(n, k)) any = true;
        }
        if (!any) continue;
        for (size_t j = 0; j < n->ir->n_outputs; j++) {
            int32_t o = n->ir->outputs[j];
            if (o >= 0 && is_float(g->vals[o].model_dtype)) fwd[o] = true;
        }
    }
    reach[g->loss_value] = fwd[g->loss_value];
    for (size_t i = g->n_nodes; i-- > 0;) {
        cx_node *n = &g->nodes[i];
        if (n->kind == GN_FOLDED) continue;
        bool any = false;
        for (size_t j = 0; j < n->ir->n_outputs; j++) {
            int32_t o = n->ir->outputs[j];
            if (o >= 0 && reach[o]) any = true;
        }
        if (!any) continue;
        n->needs_bwd = true;
        for (size_t k = 0; k < n->ir->n_inputs; k++) {
            int32_t v = n->ir->inputs[k];
            if (v >= 0 && fwd[v] && slot_diff(n, k)) reach[v] = true;
        }
    }
    teexec_status *st = NULL;
    for (size_t v = 0; v < nv && !st; v++) {
        cx_value *gv = &g->vals[v];
        gv->req = fwd[v] && reach[v];
        if (!gv->req) continue;
        st = tx_tensor_wrap(&gv->grad, gv->dev.dtype, gv->dev.rank, gv->dev.dims, NULL);
        if (!st && (ir->values[v].flags & TX_IR_VALUE_INITIALIZER)) {
            cx_param *np = realloc(g->params, (g->n_params + 1) * sizeof(*np));
            if (!np) {
                st = tx_oom();
                break;
            }
            g->params = np;
            g->params[g->n_params] = (cx_param){.value = (int32_t)v, .name = ir->values[v].name};
            gv->param = (int32_t)g->n_params++;
        }
    }
    free(fwd);
    free(reach);
    return st;
}

/* ---- creation: nodes ------------------------------------------------------------ */

/* The plan's quantizer for one operand (exec/quant_operand.h, as the CPU
 * group executor reads it), plus where fp8-delayed keeps its scale/amax.
 * NVFP4's stochastic-rounding offset travels per call (env.step). */
static tx_cuda_operand_q operand_q(tx_cuda_executor *g, const cx_node *n, tx_qoperand operand,
                                   bool dx, bool dp)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    const tx_plan_quant *p = tx_quant_operand_config(g->fplan->quant, g->fplan->n_quant,
                                                     &g->cfg.recipe, n->index, operand, dx, dp,
                                                     g->topt.seed, 0, &q.cfg);
    if (!p) return q;
    q.on = true;
    q.native = p->native;
    if (g->cfg.recipe.kind == TX_RECIPE_FP8_DELAYED && p->kind == TX_QKIND_FP8_TENSOR &&
        p->delayed_slot >= 0 && (uint32_t)p->delayed_slot < g->n_delayed) {
        q.delayed_scale = g->delayed_dev + p->delayed_slot;
        q.delayed_amax = g->delayed_dev + g->n_delayed + p->delayed_slot;
    }
    return q;
}

static bool slot_req(const tx_cuda_executor *g, const cx_node *n, size_t k)
{
    int32_t v = k < n->ir->n_inputs ? n->ir->inputs[k] : -1;
    return g->cfg.training && n->needs_bwd && v >= 0 && g->vals[v].req && slot_diff(n, k);
}

static teexec_status *prepare_te(tx_cuda_executor *g, cx_node *n)
{
    const tx_ir_node *ir = n->ir;
    TX_TRY(tx_te_node_decode(ir, &n->s, n->attrs, &n->n_params));
    n->n_slots = 1 + (size_t)n->s->n_extra_inputs + (size_t)n->n_params;
    if (n->n_slots > 64) return tx_error(TEEXEC_ERR_LIMIT, "too many inputs");
    for (size_t k = 0; k < n->n_slots; k++) {
        int32_t v = k < ir->n_inputs ? ir->inputs[k] : -1;
        n->slot_in[k] = v >= 0 ? &g->vals[v].dev : NULL;
    }
    for (size_t j = 0; j < ir->n_outputs && j < 1 + TX_TE_MAX_EXTRA; j++) {
        int32_t o = ir->outputs[j];
        n->slot_out[j] = o >= 0 ? &g->vals[o].dev : NULL;
    }
    bool training = g->cfg.training && n->needs_bwd;
    /* aux shapes from the registry's rule over the (mapped) tensors */
    if (training && n->s->n_aux > 0) {
        tx_te_tinfo ti[64];
        const tx_te_tinfo *ptrs[64];
        for (size_t k = 0; k < n->n_slots; k++) {
            ptrs[k] = NULL;
            if (!n->slot_in[k]) continue;
            ti[k].dtype = n->slot_in[k]->dtype;
            ti[k].shape = tx_shape_of(n->slot_in[k]);
            ptrs[k] = &ti[k];
        }
        tx_te_infer_in iin = {n->attrs, ptrs[0], ptrs + 1, n->s->n_extra_inputs,
                              ptrs + 1 + n->s->n_extra_inputs, n->n_params};
        tx_te_infer_out iout;
        memset(&iout, 0, sizeof iout);
        TX_TRY(tx_te_infer(n->s, &iin, &iout));
        for (int j = 0; j < n->s->n_aux; j++) {
            TX_TRY(shape_tensor(&n->aux[j], iout.aux[j].dtype, &iout.aux[j].shape));
            n->auxp[j] = &n->aux[j];
        }
        n->n_aux = n->s->n_aux;
    }
    unsigned needs = 0;
    bool dx = slot_req(g, n, 0), dp = false, de = false;
    for (size_t k = 1; k < n->n_slots; k++) {
        if (!slot_req(g, n, k)) continue;
        if (k <= (size_t)n->s->n_extra_inputs) de = true;
        else dp = true;
    }
    if (dx) needs |= TX_TE_FOR_DX;
    if (dp) needs |= TX_TE_FOR_DPARAMS;
    if (de) needs |= TX_TE_FOR_DEXTRA;
    bool linear = n->s->id == TX_TE_LINEAR || n->s->id == TX_TE_GROUPED_LINEAR;
    if (linear) {
        n->q.x = operand_q(g, n, TX_QOP_INPUT, dx, dp);
        n->q.w = operand_q(g, n, TX_QOP_WEIGHT, dx, dp);
        n->q.dy = training ? operand_q(g, n, TX_QOP_GRAD_OUTPUT, dx, dp) : n->q.dy;
        tx_gpu_handoff_mark(g, n); /* before the layout is fixed */
    }
    tx_cuda_te_desc *d = &n->desc;
    *d = (tx_cuda_te_desc){.op = n->s->id, .name = ir->label, .attrs = n->attrs,
                           .input = n->slot_in[0], .extra_inputs = n->slot_in + 1,
                           .n_extra_inputs = n->s->n_extra_inputs,
                           .params = n->slot_in + 1 + n->s->n_extra_inputs,
                           .n_params = n->n_params, .output = n->slot_out[0],
                           .extra_outputs = (const tx_tensor *const *)n->slot_out + 1,
                           .n_extra_outputs = (int)ir->n_outputs - 1, .training = training,
                           .needs = needs, .quant = linear ? &n->q : NULL, .sm = g->env.sm,
                           .deterministic = g->cfg.deterministic, .sdpa = g->sdpa};
    TX_TRY(tx_cuda_te_prepare(d, &n->te));
    n->state_bytes = tx_cuda_te_state_bytes(n->te);
    n->dy_region_bytes = n->s->id == TX_TE_LINEAR
                             ? tx_cuda_linear_dy_region_bytes(tx_cuda_te_node_priv(n->te))
                             : 0;
    size_t sb = tx_cuda_te_scratch_bytes(n->te);
    if (sb > g->scratch_bytes) g->scratch_bytes = sb;
    /* forward args (pointers into the value table; data placed later) */
    tx_te_fwd_args *a = &n->fa;
    memset(a, 0, sizeof *a);
    a->op = n->s->id;
    a->attrs = n->attrs;
    a->input = n->slot_in[0];
    a->extra_inputs = n->slot_in + 1;
    a->n_extra_inputs = n->s->n_extra_inputs;
    a->params = n->slot_in + 1 + n->s->n_extra_inputs;
    a->n_params = n->n_params;
    a->output = n->slot_out[0];
    a->extra_outputs = n->slot_out + 1;
    a->n_extra_outputs = (int)ir->n_outputs - 1;
    a->aux = training ? n->auxp : NULL;
    a->n_aux = training ? n->n_aux : 0;
    a->training = training;
    return NULL;
}

static teexec_status *prepare_std(tx_cuda_executor *g, cx_node *n)
{
    const tx_ir_node *ir = n->ir;
    size_t ni = ir->n_inputs, no = ir->n_outputs;
    n->s_in = calloc(ni ? ni : 1, sizeof(*n->s_in));
    const tx_tensor **host = calloc(ni ? ni : 1, sizeof(*host));
    n->s_out = calloc(no ? no : 1, sizeof(*n->s_out));
    n->s_gout = calloc(no ? no : 1, sizeof(*n->s_gout));
    n->s_gin = calloc(ni ? ni : 1, sizeof(*n->s_gin));
    if (!n->s_in || !host || !n->s_out || !n->s_gout || !n->s_gin) {
        free(host);
        return tx_oom();
    }
    for (size_t k = 0; k < ni; k++) {
        int32_t v = ir->inputs[k];
        n->s_in[k] = v >= 0 ? &g->vals[v].dev : NULL;
        /* a deferred weight's bytes are not on the host: the node sees it
         * as a device tensor, as every weight this large */
        host[k] = v >= 0 && g->vals[v].host && g->vals[v].host->data ? g->vals[v].host : NULL;
    }
    for (size_t j = 0; j < no; j++) {
        int32_t o = ir->outputs[j];
        n->s_out[j] = o >= 0 ? &g->vals[o].dev : NULL;
    }
    tx_cuda_std_desc d = {.node = ir, .file = g->lowered->file, .n_in = ni, .in = n->s_in,
                          .in_host = host, .n_out = no,
                          .out = (const tx_tensor *const *)n->s_out,
                          .training = g->cfg.training, .gemm = g->gemm};
    teexec_status *st = tx_cuda_std_prepare(&d, &n->std);
    free(host);
    if (st) return st;
    n->alias = tx_cuda_std_is_alias(n->std);
    size_t sb = tx_cuda_std_scratch_bytes(n->std);
    if (sb > g->scratch_bytes) g->scratch_bytes = sb;
    return NULL;
}

/* Classifies every node (folded before running, te.ops, standard) and
 * marks the values the device computes. */
static teexec_status *prepare_nodes(tx_cuda_executor *g)
{
    const tx_ir_graph *ir = g->ir;
    g->n_nodes = ir->n_nodes;
    g->nodes = calloc(g->n_nodes ? g->n_nodes : 1, sizeof(*g->nodes));
    if (!g->nodes) return tx_oom();
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        n->ir = &ir->nodes[i];
        n->index = (int32_t)i;
        n->fwd_fused = n->bwd_fused = -1;
        n->dgelu_act = n->dgelu_bias = -1;
        n->dgelu_plan_group = n->dgelu_plan_first = -1;
        n->dy_producer = -1;
        bool all_known = true;
        for (size_t j = 0; j < n->ir->n_outputs; j++) {
            int32_t o = n->ir->outputs[j];
            if (o >= 0 && !g->vals[o].host) all_known = false;
        }
        n->kind = g->plan.skip[i] || all_known ? GN_FOLDED
                  : tx_te_domain(n->ir->domain)  ? GN_TE
                                                 : GN_STD;
        if (n->kind == GN_FOLDED) continue;
        for (size_t j = 0; j < n->ir->n_outputs; j++) {
            int32_t o = n->ir->outputs[j];
            if (o < 0) continue;
            g->vals[o].produced = true;
            g->vals[o].host = NULL; /* computed on the device */
        }
    }
    return NULL;
}

/* Prepares every node of one kind, or of all kinds (kind -1). Training
 * prepares the standard nodes first (the grad analysis needs their
 * differentiability), the te.ops nodes after it (their quantizers and saved
 * contexts depend on which grads are wanted). Lists every node the
 * GPU cannot run in one status, as sessions do. */
static teexec_status *prepare_kernels(tx_cuda_executor *g, int kind)
{
    char *msg = NULL;
    size_t len = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        teexec_status *st = NULL;
        if (n->kind == GN_FOLDED || (kind >= 0 && (int)n->kind != kind)) continue;
        if (n->kind == GN_TE) st = prepare_te(g, n);
        else {
            if (!tx_cuda_std_supported(n->ir->domain, n->ir->op_type))
                st = tx_error(TEEXEC_ERR_UNSUPPORTED,
                              "unsupported op %s (domain \"%s\", opset %lld) on the GPU",
                              n->ir->op_type, n->ir->domain, (long long)n->ir->opset);
            else
                st = prepare_std(g, n);
        }
        if (!st) continue;
        if (teexec_status_code(st) != TEEXEC_ERR_UNSUPPORTED) {
            free(msg);
            return node_err(n->ir, st);
        }
        char line[1024];
        snprintf(line, sizeof line, "%s%s", len ? "; " : "", teexec_status_message(st));
        teexec_status_destroy(st);
        size_t ll = strlen(line);
        char *nm = realloc(msg, len + ll + 1);
        if (!nm) {
            free(msg);
            return tx_oom();
        }
        msg = nm;
        memcpy(msg + len, line, ll + 1);
        len += ll;
    }
    if (!msg) return NULL;
    teexec_status *st = tx_error(TEEXEC_ERR_UNSUPPORTED, "%s", msg);
    free(msg);
    return st;
}

/* Records a prepared fused kernel over nodes idx[0..n) (forward order):
 * the forward is led by the first node, the backward by the last (the
 * backward walk meets it first); the others are covered. Takes f (freed
 * on failure). */
static teexec_status *add_fused(tx_cuda_executor *g, tx_cuda_fused *f, tx_fusion_id fusion, bool bwd,
                                const int32_t *idx, int32_t n)
{
    if (g->n_fused == g->cap_fused) {
        size_t cap = g->cap_fused ? 2 * g->cap_fused : 16;
        cx_fused *nf = realloc(g->fused, cap * sizeof(*nf));
        if (!nf) {
            tx_cuda_fused_free(f);
            return tx_oom();
        }
        g->fused = nf;
        g->cap_fused = cap;
    }
    cx_fused *gf = &g->fused[g->n_fused];
    *gf = (cx_fused){.f = f, .fusion = fusion, .backward = bwd, .n = n};
    memcpy(gf->nodes, idx, (size_t)n * sizeof(idx[0]));
    size_t sb = tx_cuda_fused_scratch_bytes(f);
    if (sb > g->scratch_bytes) g->scratch_bytes = sb;
    for (int32_t j = 0; j < n; j++) {
        cx_node *nd = &g->nodes[idx[j]];
        if (!bwd) {
            if (j == 0) nd->fwd_fused = (int32_t)g->n_fused;
            else nd->fwd_covered = true;
        } else {
            if (j == n - 1) nd->bwd_fused = (int32_t)g->n_fused;
            else nd->bwd_covered = true;
        }
    }
    g->n_fused++;
    return NULL;
}

/* Forward layouts' and backward layouts' fused kernels, where the GPU has
 * them; the others run unfused (declines recorded in the fuser plan). */
static teexec_status *prepare_fusions(tx_cuda_executor *g)
{
    for (size_t gi = 0; gi < g->fplan->n_groups; gi++) {
        const tx_plan_group *pg = &g->fplan->groups[gi];
        if (pg->kind != TX_GROUP_CHAIN) continue;
        for (int pass = 0; pass < 2; pass++) {
            bool bwd = pass == 1;
            if (bwd && !g->cfg.training) break;
            const tx_plan_kernel *ks = bwd ? pg->backward : pg->forward;
            int32_t nk = bwd ? pg->n_backward : pg->n_forward;
            for (int32_t k = 0; k < nk; k++) {
                if (ks[k].fusion == TX_FUSION_NONE || ks[k].count < 1 || ks[k].count > 8) continue;
                const tx_cuda_te_desc *descs[8];
                tx_cuda_te_node *tn[8];
                int32_t idx[8];
                bool ok = true;
                for (int32_t j = 0; j < ks[k].count; j++) {
                    idx[j] = pg->nodes[ks[k].first + j];
                    cx_node *n = &g->nodes[idx[j]];
                    /* the two passes are independent: a node inside a forward
                     * fusion may lead or join a backward one */
                    if (n->kind != GN_TE || (!bwd && (n->fwd_covered || n->fwd_fused >= 0)) ||
                        (bwd && (!n->needs_bwd || n->bwd_fused >= 0 || n->bwd_covered)))
                        ok = false;
                    descs[j] = &n->desc;
                    tn[j] = n->te;
                }
                if (!ok) continue;
                if (ks[k].fusion == TX_FUSION_BWD_LINEAR_DGELU_BIAS) {
                    /* no fused object: the Linear's dgrad takes the epilogue,
                     * bound after the backward is wired (bind_dgelu_epilogues) */
                    cx_node *lin = &g->nodes[idx[ks[k].count - 1]];
                    lin->dgelu_plan_group = (int32_t)gi;
                    lin->dgelu_plan_first = ks[k].first;
                    continue;
                }
                tx_cuda_fused *f = NULL;
                tx_gpu_handoff_bind(g, ks[k].fusion, &g->nodes[idx[0]]);
                teexec_status *st = tx_cuda_fused_prepare(ks[k].fusion, bwd, descs, tn,
                                                          ks[k].count, &f);
                if (st) {
                    if (teexec_status_code(st) != TEEXEC_ERR_UNSUPPORTED) return st;
                    teexec_status *ds = tx_plan_add_decline(
                        g->fplan, (int32_t)gi, ks[k].first, ks[k].fusion,
                        teexec_status_message(st));
                    teexec_status_destroy(st);
                    TX_TRY(ds);
                    continue;
                }
                TX_TRY(add_fused(g, f, ks[k].fusion, bwd, idx, ks[k].count));
            }
        }
    }
    return tx_gpu_handoff_verify(g);
}

/* ---- creation: backward wiring ------------------------------------------------ */

/* Simulates the backward walk once: which grad buffer each node writes
 * directly and where it needs a temporary to add (fan-out), which output
 * grads are zero. Runs are then the same every step. */
static teexec_status *wire_backward(tx_cuda_executor *g)
{
    for (size_t v = 0; v < g->ir->n_values; v++) g->vals[v].grad_live = false;
    g->vals[g->loss_value].grad_live = true;
    for (size_t i = g->n_nodes; i-- > 0;) {
        cx_node *n = &g->nodes[i];
        if (n->kind == GN_FOLDED || !n->needs_bwd) continue;
        const tx_ir_node *ir = n->ir;
        size_t ni = ir->n_inputs;
        n->acc = calloc(ni ? ni : 1, sizeof(*n->acc));
        if (!n->acc) return tx_oom();
        /* output grads */
        bool main_live = true;
        for (size_t j = 0; j < ir->n_outputs; j++) {
            int32_t o = ir->outputs[j];
            const tx_tensor *gt = o >= 0 && g->vals[o].req && g->vals[o].grad_live
                                      ? &g->vals[o].grad
                                      : NULL;
            if (j == 0 && !gt) main_live = false;
            if (n->kind == GN_TE && j < 1 + TX_TE_MAX_EXTRA) n->gout[j] = gt;
            if (n->kind == GN_STD) n->s_gout[j] = gt;
        }
        if (n->kind == GN_TE && !main_live) {
            /* te backward wants a main dy: a zero grad of the main output */
            int32_t o = ir->outputs[0];
            if (o < 0 || !g->vals[o].req)
                return node_err(ir, tx_error(TEEXEC_ERR_UNSUPPORTED,
                                             "its main output carries no gradient but an extra "
                                             "output does"));
            n->gout[0] = &g->vals[o].grad; /* zeroed before backward (zero_grads) */
            n->zero_gout0 = true;
            g->vals[o].grad_live = true;
        }
        /* input grads */
        for (size_t k = 0; k < ni; k++) {
            int32_t v = ir->inputs[k];
            tx_tensor *dst = NULL;
            if (slot_req(g, n, k)) {
                cx_value *gv = &g->vals[v];
                bool dup = false; /* the same value twice in this node's inputs */
                for (size_t k2 = 0; k2 < k; k2++)
                    if (ir->inputs[k2] == v && slot_req(g, n, k2)) dup = true;
                if (!gv->grad_live && !dup) {
                    dst = &gv->grad;
                    gv->grad_live = true;
                } else {
                    /* placed with the node's backward step (place_memory) */
                    TX_TRY(tx_tensor_wrap(&n->acc[k], gv->grad.dtype, gv->grad.rank,
                                          gv->grad.dims, NULL));
                    dst = &n->acc[k];
                }
            }
            if (n->kind == GN_TE && k < 64) n->gin[k] = dst;
            if (n->kind == GN_STD) n->s_gin[k] = dst;
        }
    }
    return NULL;
}

/* The one reader of value v, if v has exactly one consumer node and is
 * no graph output; else NULL. */
static cx_node *sole_consumer(tx_cuda_executor *g, int32_t v)
{
    const tx_ir_value *iv = &g->ir->values[v];
    if (iv->n_consumers != 1 || (iv->flags & TX_IR_VALUE_GRAPH_OUTPUT)) return NULL;
    return &g->nodes[iv->consumers[0].node];
}

static bool te_bwd_unfused(const cx_node *n, tx_te_op_id op)
{
    return n->kind == GN_TE && n->s->id == op && n->needs_bwd && n->bwd_fused < 0 &&
           !n->bwd_covered && n->dgelu_act < 0;
}

/* Why the plan's BackwardLinearDGeluBias over Bias -> GELU -> `lin` cannot
 * run as planned, or NULL. The planner checked recipe, device,
 * determinism, dtype and width; what it cannot see is checked here: the
 * Linear's operands as prepared, and the wiring (the GELU's output and the
 * Bias's output read by the next op alone, their grads written directly,
 * no fan-out temporary). */
static const char *dgelu_mismatch(tx_cuda_executor *g, cx_node *lin, int32_t *pa, int32_t *pb)
{
    if (!te_bwd_unfused(lin, TX_TE_LINEAR) || lin->ir->n_inputs < 1)
        return "the Linear's backward is taken by another kernel";
    const tx_cuda_linear *l = tx_cuda_te_node_priv(lin->te);
    if (!l || tx_cuda_linear_quantized(l)) return "the Linear's dgrad operands are quantized";
    if (l->x_dt != TEEXEC_DTYPE_BFLOAT16 && l->x_dt != TEEXEC_DTYPE_FLOAT16)
        return "the Linear's operands are not bf16 or fp16";
    int32_t v = lin->ir->inputs[0];
    *pa = v >= 0 ? g->ir->values[v].producer : -1;
    if (*pa < 0 || sole_consumer(g, v) != lin || lin->gin[0] != &g->vals[v].grad)
        return "the GELU's output has another reader or its grad is summed from several";
    cx_node *act = &g->nodes[*pa];
    if (!te_bwd_unfused(act, TX_TE_GELU) ||
        act->attrs[TX_TE_A_GELU_APPROX].i != TX_TE_GELU_TANH || act->ir->n_inputs < 1)
        return "the op before the Linear is not a tanh GELU running its own backward";
    int32_t u = act->ir->inputs[0];
    *pb = u >= 0 ? g->ir->values[u].producer : -1;
    if (*pb < 0 || sole_consumer(g, u) != act || act->gout[0] != &g->vals[v].grad ||
        act->gin[0] != &g->vals[u].grad)
        return "the Bias's output has another reader or its grad is summed from several";
    cx_node *bias = &g->nodes[*pb];
    if (!te_bwd_unfused(bias, TX_TE_BIAS) || bias->gout[0] != &g->vals[u].grad)
        return "the op before the GELU is not a Bias running its own backward";
    const tx_tensor *dx = bias->gin[0];
    const tx_tensor *db = bias->n_params > 0 ? bias->gin[1 + bias->s->n_extra_inputs] : NULL;
    if (!dx || !db || dx->dtype != l->x_dt || db->dtype != l->x_dt ||
        g->vals[u].dev.dtype != l->x_dt || (size_t)dx->numel != l->T * l->K ||
        (size_t)db->numel != l->K)
        return "the Bias's input grad or dbias is not in the Linear's dtype and shape";
    return NULL;
}

/* The plan's BackwardLinearDGeluBias kernels (planner/fuse_catalog.c): the
 * Linear's dgrad runs with cuBLASLt's DGELU_BGRAD epilogue and writes the
 * Bias's input grad and dbias itself; the GELU's and the Bias's backward
 * kernels do not run. One the wiring does not allow runs unfused, with a
 * decline in the plan saying why (--profile shows it). */
static teexec_status *bind_dgelu_epilogues(tx_cuda_executor *g)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *lin = &g->nodes[i];
        if (lin->dgelu_plan_group < 0) continue;
        int32_t pa = -1, pb = -1;
        const char *why = dgelu_mismatch(g, lin, &pa, &pb);
        if (why) {
            TX_TRY(tx_plan_add_decline(g->fplan, lin->dgelu_plan_group, lin->dgelu_plan_first,
                                       TX_FUSION_BWD_LINEAR_DGELU_BIAS, why));
            continue;
        }
        lin->dgelu_act = pa;
        lin->dgelu_bias = pb;
        g->nodes[pa].bwd_covered = g->nodes[pb].bwd_covered = true;
    }
    return NULL;
}

/* ---- creation: memory --------------------------------------------------------- */

static void widen(int32_t *lo, int32_t *hi, int32_t a, int32_t b)
{
    if (a < *lo) *lo = a;
    if (b > *hi) *hi = b;
}

/* Schedule steps for buffer lifetimes, in the order the executor runs:
 * forward node i at step i (a fused kernel at its first node's), the loss
 * (with the clearing of zero grads) at F = n_nodes, node i's backward at
 * 2F - i (a fused kernel, or a Linear carrying the dGELU+dbias epilogue, at
 * its leading node's).
 *
 * The plan's memory plan gives lifetimes in the plan's schedule
 * (planner/plan_schedule.h), whose order of groups may differ from the
 * node order (a group runs where the plan put it). Plan step s covers some
 * nodes; pmin[s] / pmax[s] are the first and last executor steps of those
 * nodes' kernels (forward steps for a forward step, backward steps for a
 * backward one), so a plan lifetime [a, b] becomes the executor steps
 * min(pmin[a..b]) .. max(pmax[a..b]): every step at which the plan lets
 * any of its users run. The loss, which the plan does not schedule, counts
 * as part of the plan's first backward step. planned: false when the plan's
 * schedule could not be rebuilt (then every input and output of a node with
 * a backward is kept to it, the executor's own conservative rule). */
typedef struct life_steps {
    int32_t *fwd, *bwd;
    int32_t loss;
    bool planned;
    int32_t *pmin, *pmax; /* per plan step */
    int32_t n_plan_steps;
    int32_t *plan_bwd;    /* per node: its backward step in the plan, -1: none */
    int32_t *aux_entry;   /* per (node, aux index < TX_TE_MAX_EXTRA): the memory
                           * plan's saved tensor for it, -1: none */
} life_steps;

static teexec_status *life_steps_init(const tx_cuda_executor *g, life_steps *ls)
{
    size_t n = g->n_nodes;
    if (n > (size_t)INT32_MAX / 4) return tx_error(TEEXEC_ERR_LIMIT, "too many nodes");
    ls->fwd = malloc((n ? n : 1) * sizeof(int32_t));
    ls->bwd = malloc((n ? n : 1) * sizeof(int32_t));
    ls->plan_bwd = malloc((n ? n : 1) * sizeof(int32_t));
    if (!ls->fwd || !ls->bwd || !ls->plan_bwd) return tx_oom();
    int32_t F = (int32_t)n;
    ls->loss = F;
    for (int32_t i = 0; i < F; i++) {
        ls->fwd[i] = i;
        ls->bwd[i] = 2 * F - i;
        ls->plan_bwd[i] = -1;
    }
    for (size_t f = 0; f < g->n_fused; f++) {
        const cx_fused *gf = &g->fused[f];
        int32_t lead = gf->backward ? gf->nodes[gf->n - 1] : gf->nodes[0];
        for (int32_t j = 0; j < gf->n; j++) {
            if (gf->backward) ls->bwd[gf->nodes[j]] = ls->bwd[lead];
            else ls->fwd[gf->nodes[j]] = ls->fwd[lead];
        }
    }
    for (size_t i = 0; i < n; i++) {
        const cx_node *nd = &g->nodes[i];
        if (nd->dgelu_act < 0) continue;
        ls->bwd[nd->dgelu_act] = ls->bwd[nd->dgelu_bias] = ls->bwd[i];
    }
    return NULL;
}

/* pmin / pmax from the plan's schedule; *why when it cannot be had. */
static teexec_status *life_steps_map_plan(const tx_cuda_executor *g, life_steps *ls, char *why,
                                          size_t why_size)
{
    tx_plan_schedule sc;
    memset(&sc, 0, sizeof sc);
    teexec_status *st = g->fplan ? tx_plan_schedule_build(g->ir, g->fplan, g->cfg.training, &sc)
                                 : tx_error(TEEXEC_ERR_INTERNAL, "no fuser plan");
    if (st) {
        snprintf(why, why_size, "%s", teexec_status_message(st));
        teexec_status_destroy(st);
        tx_plan_schedule_free(&sc);
        return NULL; /* not planned: the conservative rule */
    }
    size_t ns = sc.n_steps > 0 ? (size_t)sc.n_steps : 1;
    ls->pmin = malloc(ns * sizeof(int32_t));
    ls->pmax = malloc(ns * sizeof(int32_t));
    if (!ls->pmin || !ls->pmax) {
        tx_plan_schedule_free(&sc);
        return tx_oom();
    }
    for (size_t k = 0; k < ns; k++) ls->pmin[k] = INT32_MAX, ls->pmax[k] = INT32_MIN;
    for (size_t i = 0; i < g->n_nodes; i++) {
        int32_t f = sc.fwd_step[i], b = sc.bwd_step[i];
        if (f >= 0 && f < sc.n_steps) widen(&ls->pmin[f], &ls->pmax[f], ls->fwd[i], ls->fwd[i]);
        if (b >= 0 && b < sc.n_steps) widen(&ls->pmin[b], &ls->pmax[b], ls->bwd[i], ls->bwd[i]);
        ls->plan_bwd[i] = b;
    }
    /* the plan does not schedule the loss: it runs as the start of the
     * plan's first backward step (whose kernels read the grads it writes) */
    if (g->cfg.training && sc.n_forward < sc.n_steps)
        widen(&ls->pmin[sc.n_forward], &ls->pmax[sc.n_forward], ls->loss, ls->loss);
    ls->n_plan_steps = sc.n_steps;
    tx_plan_schedule_free(&sc);
    size_t na = (g->n_nodes ? g->n_nodes : 1) * TX_TE_MAX_EXTRA;
    ls->aux_entry = malloc(na * sizeof(int32_t));
    if (!ls->aux_entry) return tx_oom();
    for (size_t k = 0; k < na; k++) ls->aux_entry[k] = -1;
    const tx_memory_plan *mp = &g->fplan->memory;
    for (size_t t = 0; t < mp->n_tensors && t <= (size_t)INT32_MAX; t++) {
        const tx_mem_tensor *mt = &mp->tensors[t];
        if (mt->kind == TX_MEM_SAVED && mt->node >= 0 && (size_t)mt->node < g->n_nodes &&
            mt->aux >= 0 && mt->aux < TX_TE_MAX_EXTRA)
            ls->aux_entry[(size_t)mt->node * TX_TE_MAX_EXTRA + (size_t)mt->aux] = (int32_t)t;
    }
    ls->planned = true;
    return NULL;
}

/* A plan lifetime [a, b] in the executor's steps (see life_steps). */
static void plan_span(const life_steps *ls, int32_t a, int32_t b, int32_t *lo, int32_t *hi)
{
    *lo = INT32_MAX, *hi = INT32_MIN;
    if (a < 0) a = 0;
    if (b >= ls->n_plan_steps) b = ls->n_plan_steps - 1;
    for (int32_t k = a; k <= b; k++) widen(lo, hi, ls->pmin[k], ls->pmax[k]);
}

static void life_steps_free(life_steps *ls)
{
    free(ls->fwd);
    free(ls->bwd);
    free(ls->plan_bwd);
    free(ls->pmin);
    free(ls->pmax);
    free(ls->aux_entry);
}

/* The root buffer of a value: a standard op that only reinterprets its
 * input (Reshape and the like, n->alias) shares its input's buffer. */
static int32_t alias_root(const tx_cuda_executor *g, const int32_t *alias_of, int32_t v)
{
    for (size_t hops = 0; v >= 0 && alias_of[v] >= 0 && hops < g->ir->n_values; hops++)
        v = alias_of[v];
    return v;
}

/* The value whose device tensor is t, or -1. */
static int32_t value_of_tensor(const tx_cuda_executor *g, const tx_tensor *t)
{
    if (!t || !g->ir->n_values || t < &g->vals[0].dev || t > &g->vals[g->ir->n_values - 1].dev)
        return -1;
    size_t v = (size_t)((const char *)t - (const char *)&g->vals[0].dev) / sizeof(cx_value);
    return v < g->ir->n_values && &g->vals[v].dev == t ? (int32_t)v : -1;
}

/* Whether a Linear's operand is quantized with a columnwise usage, so
 * that its backward reads the copy its forward quantized (planner
 * quant_plan.h; the executor's n->q follows the same entry). */
static bool colwise_kept(const tx_cuda_executor *g, const cx_node *n, tx_qoperand op)
{
    if (n->kind != GN_TE || (n->s->id != TX_TE_LINEAR && n->s->id != TX_TE_GROUPED_LINEAR))
        return false;
    const tx_cuda_operand_q *q = op == TX_QOP_INPUT ? &n->q.x : &n->q.w;
    const tx_plan_quant *pq = tx_plan_quant_find(g->fplan, n->index, op);
    return q->on && pq && pq->quantized && (pq->usage & TX_QUSAGE_COLUMNWISE);
}

/* What the memory plan says and what the executor does differently
 * (tx_cuda_executor_memory): a lifetime the executor had to widen. */
static void note_widened(tx_cuda_executor *g, const char *what, const char *name)
{
    g->mem.widened++;
    size_t len = strlen(g->mem.widened_names);
    if (len + 4 >= sizeof g->mem.widened_names) return;
    snprintf(g->mem.widened_names + len, sizeof g->mem.widened_names - len, "%s%s %s",
             len ? "; " : "", what, name);
}

/* Lifetimes of every value's buffer and grad, in the executor's steps.
 *
 * The executor's own uses: a value lives from its producer's forward step
 * to its last reader's; a grad from the first backward step that writes it
 * (the loss step for the loss and for grads cleared before the backward)
 * to its producer's backward step. Graph inputs and outputs, parameters,
 * known constants and everything of an inference-only value that outlives
 * the call live for the whole run.
 *
 * What a backward reads of the forward: the memory plan's lifetime of every
 * value and grad it lists (planner/memory_plan.h), which each lifetime here
 * includes, and a te.ops op's saved context as its backward is handed it
 * (tx_te_setup_context; a quantized GEMM operand's columnwise copy stands
 * for the operand, as the plan counts it). An own use past the plan's
 * lifetime is noted (note_widened), as is a node whose backward the plan
 * has not scheduled: its inputs and outputs are kept to its backward, the
 * rule used for every node when the plan's schedule is missing. */
static teexec_status *value_lifetimes(tx_cuda_executor *g, const life_steps *ls,
                                      const int32_t *alias_of, int32_t *vlo, int32_t *vhi,
                                      int32_t *glo, int32_t *ghi)
{
    const tx_ir_graph *ir = g->ir;
    const int32_t WHOLE_LO = 0, WHOLE_HI = INT32_MAX;
    for (size_t v = 0; v < ir->n_values; v++) {
        vlo[v] = INT32_MAX, vhi[v] = INT32_MIN;
        glo[v] = INT32_MAX, ghi[v] = INT32_MIN;
    }
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        if (n->kind == GN_FOLDED) continue;
        bool bwd = g->cfg.training && n->needs_bwd;
        bool unplanned = bwd && ls->planned && ls->plan_bwd[i] < 0;
        if (unplanned) note_widened(g, "the unplanned backward of", n->ir->label);
        bool keep_all = bwd && (!ls->planned || unplanned);
        /* a fused kernel reads its nodes' inputs at its own step; without
         * the plan, at each node's index (never before the leader's) */
        int32_t at = ls->planned ? ls->fwd[i] : (int32_t)i;
        for (size_t j = 0; j < n->ir->n_outputs; j++) {
            int32_t o = n->ir->outputs[j];
            if (o < 0) continue;
            widen(&vlo[o], &vhi[o], ls->fwd[i], ls->fwd[i]);
            if (keep_all) widen(&vlo[o], &vhi[o], ls->fwd[i], ls->bwd[i]);
        }
        for (size_t k = 0; k < n->ir->n_inputs; k++) {
            int32_t v = n->ir->inputs[k];
            if (v < 0) continue;
            widen(&vlo[v], &vhi[v], at, at);
            if (keep_all) widen(&vlo[v], &vhi[v], at, ls->bwd[i]);
            if (g->cfg.training && slot_req(g, n, k)) widen(&glo[v], &ghi[v], ls->bwd[i], ls->bwd[i]);
        }
        if (bwd && !keep_all && n->kind == GN_TE) {
            bool qx = colwise_kept(g, n, TX_QOP_INPUT), qw = colwise_kept(g, n, TX_QOP_WEIGHT);
            for (int e = 0; e < n->n_saved; e++) {
                const tx_tensor *sv = n->saved[e];
                if (!sv || (qx && sv == n->fa.input)) continue;
                bool param = false;
                for (int k = 0; k < n->fa.n_params; k++) param |= sv == n->fa.params[k];
                if (qw && param) continue;
                int32_t v = value_of_tensor(g, sv);
                if (v >= 0) widen(&vlo[v], &vhi[v], ls->fwd[i], ls->bwd[i]);
            }
        }
        if (n->zero_gout0 && n->ir->outputs[0] >= 0)
            widen(&glo[n->ir->outputs[0]], &ghi[n->ir->outputs[0]], ls->loss, ls->loss);
    }
    for (size_t v = 0; v < ir->n_values; v++) {
        cx_value *gv = &g->vals[v];
        const tx_ir_value *iv = &ir->values[v];
        int32_t p = iv->producer;
        bool whole = gv->param >= 0 || (gv->host && !gv->produced) || p < 0 ||
                     g->nodes[p].kind == GN_FOLDED ||
                     (iv->flags & (TX_IR_VALUE_GRAPH_INPUT | TX_IR_VALUE_GRAPH_OUTPUT)) ||
                     (int32_t)v == g->loss_value || vlo[v] > vhi[v];
        if (whole) vlo[v] = WHOLE_LO, vhi[v] = WHOLE_HI;
        if (gv->req && g->cfg.training) {
            if ((int32_t)v == g->loss_value) widen(&glo[v], &ghi[v], ls->loss, ls->loss);
            if (p >= 0 && g->nodes[p].kind != GN_FOLDED && g->nodes[p].needs_bwd)
                widen(&glo[v], &ghi[v], ls->bwd[p], ls->bwd[p]);
            if (gv->param >= 0 || p < 0 || g->nodes[p].kind == GN_FOLDED || glo[v] > ghi[v])
                glo[v] = WHOLE_LO, ghi[v] = WHOLE_HI;
        }
    }
    /* the memory plan's lifetimes: included; the executor's own uses past
     * them noted */
    const tx_memory_plan *mp = ls->planned ? &g->fplan->memory : NULL;
    for (size_t t = 0; mp && t < mp->n_tensors; t++) {
        const tx_mem_tensor *mt = &mp->tensors[t];
        if (mt->value < 0 || (size_t)mt->value >= ir->n_values || mt->kind == TX_MEM_WORKSPACE)
            continue;
        bool grad = mt->kind == TX_MEM_GRAD;
        if (grad && !(g->vals[mt->value].req && g->cfg.training)) continue;
        int32_t *lo = grad ? &glo[mt->value] : &vlo[mt->value];
        int32_t *hi = grad ? &ghi[mt->value] : &vhi[mt->value];
        if (*lo == WHOLE_LO && *hi == WHOLE_HI) continue;
        int32_t plo, phi;
        plan_span(ls, mt->start, mt->end, &plo, &phi);
        if (plo > phi) continue;
        if (*lo <= *hi && (*lo < plo || *hi > phi))
            note_widened(g, grad ? "grad of" : "value", ir->values[mt->value].name);
        widen(lo, hi, plo, phi);
        g->mem.from_plan++;
    }
    /* an alias keeps its root's buffer alive */
    for (size_t v = 0; v < ir->n_values; v++) {
        int32_t r = alias_root(g, alias_of, (int32_t)v);
        if (r >= 0 && r != (int32_t)v) widen(&vlo[r], &vhi[r], vlo[v], vhi[v]);
    }
    return NULL;
}

/* The lifetime of node i's aux tensor j (normalization statistics,
 * attention's softmax_lse, a dropout mask): written by its forward, kept to
 * its backward when that is handed it and as long as the memory plan's
 * saved tensor for it says; without the plan's schedule, or for a backward
 * the plan has not scheduled, to the backward (the loss step without one). */
static void aux_lifetime(tx_cuda_executor *g, const life_steps *ls, size_t i, int j, int32_t *lo,
                         int32_t *hi)
{
    const cx_node *n = &g->nodes[i];
    bool bwd = g->cfg.training && n->needs_bwd;
    *lo = *hi = ls->fwd[i];
    if (!ls->planned || (bwd && ls->plan_bwd[i] < 0)) {
        *hi = bwd ? ls->bwd[i] : ls->loss;
        return;
    }
    for (int e = 0; bwd && e < n->n_saved; e++)
        if (n->saved[e] == &n->aux[j]) *hi = ls->bwd[i];
    int32_t t = ls->aux_entry[i * TX_TE_MAX_EXTRA + (size_t)j];
    if (t < 0) return;
    const tx_mem_tensor *mt = &g->fplan->memory.tensors[t];
    int32_t plo, phi;
    plan_span(ls, mt->start, mt->end, &plo, &phi);
    if (plo > phi) return;
    if (*lo < plo || *hi > phi) note_widened(g, "aux of", n->ir->label);
    widen(lo, hi, plo, phi);
    g->mem.from_plan++;
}

/* The input index of value v when it is a graph input with storage of its
 * own (cfg.input_storage), else -1. */
static ptrdiff_t storage_index(const tx_cuda_executor *g, int32_t v)
{
    if (!g->cfg.input_storage) return -1;
    for (size_t i = 0; i < g->n_in; i++)
        if (g->in_values[i] == v && g->cfg.input_storage[i]) return (ptrdiff_t)i;
    return -1;
}

static void *input_storage(const tx_cuda_executor *g, int32_t v)
{
    ptrdiff_t i = storage_index(g, v);
    return i < 0 ? NULL : g->cfg.input_storage[i];
}

static teexec_dtype state_dtype(const tx_cuda_executor *g, int32_t v)
{
    ptrdiff_t i = storage_index(g, v);
    return i < 0 || !g->cfg.input_storage_dtype ? TEEXEC_DTYPE_UNDEFINED
                                                : g->cfg.input_storage_dtype[i];
}

/* An inference executor reads the model's initializers from the model's
 * shared copies (exec/weight_share.h); a trainer updates its parameters, so
 * it keeps every value in its own arena. */
static bool share_value(const tx_cuda_executor *g, size_t v)
{
    const cx_value *gv = &g->vals[v];
    return !g->cfg.training && g->lowered->weights &&
           (g->ir->values[v].flags & TX_IR_VALUE_INITIALIZER) && gv->host &&
           (gv->host->data || tx_value_planner_is_deferred(g->vp, (int32_t)v)) && !gv->produced;
}

/* ---- the shared weights' ops (weight_share.h): g's stream uploads ---- */

static teexec_status *upload_value(tx_cuda_executor *g, void *dst, const tx_tensor *h,
                                   teexec_dtype dst_dtype);

static teexec_status *ws_alloc(void *ctx, int device, size_t bytes, void **out)
{
    (void)ctx;
    (void)device; /* the current device: the executor's */
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e == cudaSuccess) return NULL;
    *out = NULL;
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return tx_device_alloc_failed(bytes, "cuda executor: the model's shared weights",
                                      cudaGetErrorString(e));
    }
    return cuda_err(e, "allocating the model's shared weights");
}

static teexec_status *ws_fill(void *ctx, const tx_ws_want *w, void *dst)
{
    tx_cuda_executor *g = ctx;
    const cx_value *gv = w->src;
    TX_TRY(tx_value_planner_load(g->vp, w->value)); /* the first upload of a deferred weight */
    return upload_value(g, dst, gv->host, gv->dev.dtype);
}

static teexec_status *ws_finish(void *ctx)
{
    tx_cuda_executor *g = ctx;
    /* the copies are read from other executors' streams next */
    CU(cudaStreamSynchronize(g->stream), "uploading the model's shared weights");
    return NULL;
}

static void ws_free(int device, void *ptr)
{
    int cur = -1;
    bool switched = cudaGetDevice(&cur) == cudaSuccess && cur != device &&
                    cudaSetDevice(device) == cudaSuccess;
    cudaFree(ptr);
    if (switched) cudaSetDevice(cur);
}

static const tx_ws_ops ws_ops = {ws_alloc, ws_fill, ws_finish, ws_free};

/* TEEXEC_CUDA_POISON_DEAD=1 (a debug mode, docs/cuda-backend.md): every
 * arena buffer whose lifetime ends before the run does, filled with 0xFF
 * bytes (NaN in every float dtype) right after its last step, so a kernel
 * that reads a buffer the lifetimes call dead turns the outputs or grads
 * into NaN instead of silently reading what another buffer wrote there. */
static int cmp_poison(const void *a, const void *b)
{
    const cx_poison *x = a, *y = b;
    return x->after < y->after ? -1 : x->after > y->after;
}

static teexec_status *list_poison(tx_cuda_executor *g, const tx_dev_reqs *l)
{
    g->poison = calloc(l->n ? l->n : 1, sizeof(*g->poison));
    if (!g->poison) return tx_oom();
    g->n_poison = 0;
    for (size_t i = 0; i < l->n; i++) {
        const tx_dev_req *r = &l->r[i];
        if (r->end == INT32_MAX) continue;
        g->poison[g->n_poison++] = (cx_poison){*r->slot, r->bytes, r->end};
    }
    qsort(g->poison, g->n_poison, sizeof(*g->poison), cmp_poison);
    return NULL;
}

static teexec_status *place_memory(tx_cuda_executor *g)
{
    tx_dev_reqs l = {0};
    tx_ws_want *wants = NULL;
    size_t n_wants = 0;
    const tx_ir_graph *ir = g->ir;
    life_steps ls = {0};
    size_t nv = ir->n_values ? ir->n_values : 1;
    int32_t *alias_of = malloc(nv * sizeof(int32_t)), *vlo = malloc(nv * sizeof(int32_t)),
            *vhi = malloc(nv * sizeof(int32_t)), *glo = malloc(nv * sizeof(int32_t)),
            *ghi = malloc(nv * sizeof(int32_t));
    teexec_status *st = NULL;
    wants = calloc(nv, sizeof(*wants));
    if (!alias_of || !vlo || !vhi || !glo || !ghi || !wants) st = tx_oom();
    for (size_t v = 0; v < ir->n_values && !st; v++) alias_of[v] = -1;
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        cx_node *n = &g->nodes[i];
        if (n->ir->n_outputs < 1 || n->ir->outputs[0] < 0 || n->ir->n_inputs < 1 ||
            n->ir->inputs[0] < 0 || !g->vals[n->ir->outputs[0]].produced)
            continue;
        if (n->kind == GN_STD && n->alias) {
            alias_of[n->ir->outputs[0]] = n->ir->inputs[0];
            continue;
        }
        /* te.ops Reshape, Identity and MakeExtraOutput outside any fusion
         * only copy their input into each output: the outputs share its
         * buffer instead (no kernel writes into a value it did not make) */
        if (n->kind != GN_TE || n->fwd_covered || n->fwd_fused >= 0 ||
            (n->s->id != TX_TE_RESHAPE && n->s->id != TX_TE_IDENTITY &&
             n->s->id != TX_TE_MAKE_EXTRA_OUTPUT))
            continue;
        const tx_tensor *x = &g->vals[n->ir->inputs[0]].dev;
        bool all = true;
        for (size_t j = 0; j < n->ir->n_outputs; j++) {
            int32_t o = n->ir->outputs[j];
            const tx_tensor *y = o >= 0 ? &g->vals[o].dev : NULL;
            if (!y || !g->vals[o].produced || y->dtype != x->dtype || y->numel != x->numel ||
                o == n->ir->inputs[0])
                all = false;
        }
        if (!all) continue;
        n->te_alias = true;
        for (size_t j = 0; j < n->ir->n_outputs; j++) alias_of[n->ir->outputs[j]] = n->ir->inputs[0];
    }
    if (!st && g->cfg.training) {
        st = wire_backward(g);
        if (!st) st = bind_dgelu_epilogues(g);
    }
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        cx_node *n = &g->nodes[i];
        if (n->kind != GN_TE || !g->cfg.training || !n->needs_bwd) continue;
        st = node_err(n->ir, tx_te_setup_context(&n->fa, n->desc.needs, n->saved,
                                                 TX_TE_SAVED_CAP(n->n_params), &n->n_saved));
    }
    if (!st) st = life_steps_init(g, &ls);
    if (!st) st = life_steps_map_plan(g, &ls, g->mem.why_own, sizeof g->mem.why_own);
    g->mem.planned = ls.planned;
    if (!st) st = value_lifetimes(g, &ls, alias_of, vlo, vhi, glo, ghi);
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        g->nodes[i].fstep = ls.fwd[i];
        g->nodes[i].bstep = ls.bwd[i];
    }
    g->loss_step = ls.loss;
    /* values (aliases take their root's buffer after placing) and grads */
    for (size_t v = 0; v < ir->n_values && !st; v++) {
        cx_value *gv = &g->vals[v];
        if (gv->dev.rank == 0 && gv->dev.numel == 0 && gv->model_dtype == TEEXEC_DTYPE_UNDEFINED)
            continue;
        void *storage = input_storage(g, (int32_t)v);
        if (storage) {
            /* the session's state: its buffer, not the arena's */
            if (gv->dev.dtype != state_dtype(g, (int32_t)v)) {
                st = tx_error(TEEXEC_ERR_INTERNAL, "state input \"%s\" is %s on the device; the "
                              "executor computes it in %s", ir->values[v].name,
                              teexec_dtype_name(state_dtype(g, (int32_t)v)),
                              teexec_dtype_name(gv->dev.dtype));
                break;
            }
            gv->dev.data = storage;
        } else if (alias_of[v] >= 0) {
            /* its root's buffer */
        } else if (share_value(g, v)) {
            gv->shared = true;
            wants[n_wants++] = (tx_ws_want){.value = (int32_t)v, .dtype = (int32_t)gv->dev.dtype,
                                            .bytes = tensor_bytes(&gv->dev), .src = gv,
                                            .slot = &gv->dev.data};
        } else {
            tx_dev_want_live(&l, &gv->dev.data, tensor_bytes(&gv->dev), vlo[v], vhi[v]);
        }
        if (gv->req && g->cfg.training)
            tx_dev_want_live(&l, &gv->grad.data, tensor_bytes(&gv->grad), glo[v], ghi[v]);
    }
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        cx_node *n = &g->nodes[i];
        if (n->kind == GN_TE) {
            for (int j = 0; j < n->n_aux; j++) {
                int32_t lo, hi;
                aux_lifetime(g, &ls, i, j, &lo, &hi);
                tx_dev_want_live(&l, &n->aux[j].data, tensor_bytes(&n->aux[j]), lo, hi);
            }
            /* states may carry data from one call to the next: whole run */
            if (n->state_bytes) tx_dev_want(&l, &n->state, n->state_bytes);
            /* a handed-off dy only from its producer's backward to this
             * node's (the producer's fused kernel runs first: its nodes
             * share the step of the group's last node) */
            if (n->dy_region_bytes && n->dy_producer >= 0)
                tx_dev_want_live(&l, &n->dy_region, n->dy_region_bytes, ls.bwd[n->dy_producer],
                                 ls.bwd[i]);
        }
        for (size_t k = 0; n->acc && k < n->ir->n_inputs; k++)
            if (n->acc[k].rank || n->acc[k].numel)
                tx_dev_want_live(&l, &n->acc[k].data, tensor_bytes(&n->acc[k]), ls.bwd[i],
                                 ls.bwd[i]);
    }
    /* staging for inputs converted to the compute dtype */
    if (!st) {
        g->staging = calloc(g->n_in ? g->n_in : 1, sizeof(*g->staging));
        if (!g->staging) st = tx_oom();
    }
    for (size_t i = 0; i < g->n_in && !st; i++) {
        cx_value *gv = &g->vals[g->in_values[i]];
        if (gv->dev.dtype != gv->model_dtype && !input_storage(g, g->in_values[i])) {
            size_t es = tx_dtype_elem_size(gv->model_dtype);
            tx_dev_want(&l, &g->staging[i], (size_t)gv->dev.numel * (es ? es : 1));
        }
    }
    /* and for outputs converted back, so runs never allocate */
    if (!st) {
        g->out_staging = calloc(g->ir->n_outputs ? g->ir->n_outputs : 1, sizeof(*g->out_staging));
        if (!g->out_staging) st = tx_oom();
    }
    for (size_t j = 0; j < g->ir->n_outputs && !st; j++) {
        cx_value *gv = &g->vals[g->ir->outputs[j]];
        if (gv->produced && gv->dev.dtype != gv->model_dtype) {
            size_t es = tx_dtype_elem_size(gv->model_dtype);
            tx_dev_want(&l, &g->out_staging[j], (size_t)gv->dev.numel * (es ? es : 1));
        }
    }
    if (!st && g->cfg.training) {
        cx_value *lv = &g->vals[g->loss_value];
        size_t n = (size_t)lv->dev.numel;
        if (g->topt.loss == TEEXEC_LOSS_MSE) {
            tx_dev_want(&l, &g->target, n * sizeof(float));
            tx_dev_want(&l, &g->loss_partials, tx_cuda_mse_partials(n) * sizeof(double));
        } else {
            size_t classes = lv->dev.rank ? (size_t)lv->dev.dims[lv->dev.rank - 1] : 1;
            size_t rows = classes ? n / classes : 0;
            tx_dev_want(&l, &g->target, rows * sizeof(int64_t));
            tx_dev_want(&l, &g->xent_ws, tx_cuda_xent_workspace_floats(rows) * sizeof(float));
            tx_dev_want(&l, &g->xent_loss, 4 * sizeof(float));
        }
        tx_dev_want(&l, &g->loss_dev, sizeof(double));
        for (size_t p = 0; p < g->n_params; p++) {
            cx_param *gp = &g->params[p];
            cx_value *gv = &g->vals[gp->value];
            size_t bytes = (size_t)gv->dev.numel * sizeof(float);
            if (gv->dev.dtype != TEEXEC_DTYPE_FLOAT) tx_dev_want(&l, &gp->master, bytes);
            if (g->topt.optimizer == TEEXEC_OPTIMIZER_ADAMW || g->topt.momentum != 0.0)
                tx_dev_want(&l, &gp->m, bytes);
            if (g->topt.optimizer == TEEXEC_OPTIMIZER_ADAMW) tx_dev_want(&l, &gp->v, bytes);
        }
        tx_dev_want(&l, &g->opt_dev, (g->n_params ? g->n_params : 1) * sizeof(tx_cuda_optim_tensor));
        if (g->topt.clip_grad_norm > 0.0) {
            /* the block count tx_cuda_optim_layout will find */
            uint64_t blocks = 0;
            for (size_t p = 0; p < g->n_params; p++)
                blocks += tx_cuda_optim_blocks((uint64_t)g->vals[g->params[p].value].dev.numel);
            tx_dev_want(&l, &g->clip_partials, tx_cuda_grad_clip_partials(blocks) * sizeof(double));
            tx_dev_want(&l, &g->clip_coef, 2 * sizeof(double));
        }
    }
    if (!st) {
        tx_dev_want(&l, &g->scratch, g->scratch_bytes);
        tx_dev_want(&l, &g->env.gemm_ws, GEMM_WORKSPACE);
        /* the limit counts the weights in full, shared or not */
        tx_dev_budget budget = {.limit = g->cfg.memory_limit,
                                .held = g->cfg.memory_held,
                                .weights = tx_ws_wants_bytes(wants, n_wants),
                                .own_extra = g->delayed_bytes};
        if (budget.weights == SIZE_MAX)
            st = tx_error(TEEXEC_ERR_LIMIT, "cuda executor: the weights' size overflows");
        if (!st)
            st = tx_dev_place(&l, "cuda executor: the model's tensors", &budget, &g->arena,
                              &g->arena_bytes);
        g->arena_unshared_bytes = l.sum_bytes;
        if (!st && g->poison_dead) st = list_poison(g, &l);
    }
    /* the weights the model's other executors have not uploaded yet go up
     * now (under the registry's lock, so two creators never both upload) */
    if (!st && n_wants)
        st = tx_weight_share_acquire(g->lowered->weights, g->device, wants, n_wants, &ws_ops, g,
                                     &g->weights);
    tx_dev_reqs_free(&l);
    life_steps_free(&ls);
    if (!st) {
        g->env.gemm_ws_bytes = GEMM_WORKSPACE;
        /* aliases share their root's buffer (an alias of an alias too) */
        for (size_t v = 0; v < ir->n_values; v++)
            if (alias_of[v] >= 0) {
                int32_t r = alias_root(g, alias_of, (int32_t)v);
                g->vals[v].dev.data = g->vals[r].dev.data;
            }
    }
    free(alias_of);
    free(vlo);
    free(vhi);
    free(glo);
    free(ghi);
    free(wants);
    return st;
}

/* One host value to device memory at dst, converted to dst_dtype. */
static teexec_status *upload_value(tx_cuda_executor *g, void *dst, const tx_tensor *h,
                                   teexec_dtype dst_dtype)
{
    if (h->dtype == dst_dtype) {
        CU(cudaMemcpyAsync(dst, h->data, h->nbytes, cudaMemcpyHostToDevice, g->stream),
           "uploading a constant");
        return NULL;
    }
    void *tmp = NULL;
    CU(cudaMalloc(&tmp, h->nbytes ? h->nbytes : 1), "staging a constant");
    cudaError_t e = cudaMemcpyAsync(tmp, h->data, h->nbytes, cudaMemcpyHostToDevice, g->stream);
    teexec_status *st = e == cudaSuccess ? NULL : cuda_err(e, "uploading a constant");
    if (!st) st = tx_cuda_convert(tmp, h->dtype, dst, dst_dtype, (size_t)h->numel, g->stream);
    /* tmp is freed only once the conversion has read it */
    e = cudaStreamSynchronize(g->stream);
    if (!st && e != cudaSuccess) st = cuda_err(e, "converting a constant");
    cudaFree(tmp);
    return st;
}

/* Host values known before running (folded constants; initializers too
 * for a trainer) go to the device once, converted to the compute dtype;
 * the shared initializers are up already (place_memory). */
static teexec_status *upload_known(tx_cuda_executor *g)
{
    for (size_t v = 0; v < g->ir->n_values; v++) {
        cx_value *gv = &g->vals[v];
        if (!gv->host || !gv->dev.data || gv->produced || gv->shared) continue;
        TX_TRY(tx_value_planner_load(g->vp, (int32_t)v));
        TX_TRY(upload_value(g, gv->dev.data, gv->host, gv->dev.dtype));
    }
    return NULL;
}

static teexec_status *init_params(tx_cuda_executor *g)
{
    if (!g->cfg.training || !g->n_params) return NULL;
    tx_cuda_optim_tensor *ts = calloc(g->n_params, sizeof(*ts));
    if (!ts) return tx_oom();
    teexec_status *st = NULL;
    for (size_t p = 0; p < g->n_params && !st; p++) {
        cx_param *gp = &g->params[p];
        cx_value *gv = &g->vals[gp->value];
        const tx_tensor *h = &g->vp->init[gp->value];
        if (!h->data) {
            st = tx_error(TEEXEC_ERR_INTERNAL, "parameter \"%s\" has no initializer", gp->name);
            break;
        }
        size_t n = (size_t)gv->dev.numel;
        if (!gp->master) gp->master = gv->dev.data; /* FLOAT: the value is the master */
        else {
            void *tmp = NULL;
            cudaError_t e = cudaMalloc(&tmp, h->nbytes ? h->nbytes : 1);
            if (e != cudaSuccess) st = cuda_err(e, "staging a parameter");
            if (!st) {
                e = cudaMemcpyAsync(tmp, h->data, h->nbytes, cudaMemcpyHostToDevice, g->stream);
                if (e != cudaSuccess) st = cuda_err(e, "uploading a parameter");
            }
            if (!st) st = tx_cuda_convert(tmp, h->dtype, gp->master, TEEXEC_DTYPE_FLOAT, n, g->stream);
            if (!st) {
                e = cudaStreamSynchronize(g->stream);
                if (e != cudaSuccess) st = cuda_err(e, "converting a parameter");
            }
            if (tmp) cudaFree(tmp);
        }
        if (!st && gp->m) {
            cudaError_t e = cudaMemsetAsync(gp->m, 0, n * sizeof(float), g->stream);
            if (e != cudaSuccess) st = cuda_err(e, "optimizer state");
        }
        if (!st && gp->v) {
            cudaError_t e = cudaMemsetAsync(gp->v, 0, n * sizeof(float), g->stream);
            if (e != cudaSuccess) st = cuda_err(e, "optimizer state");
        }
        ts[p] = (tx_cuda_optim_tensor){.master = gp->master,
                                       .model = gv->dev.dtype == TEEXEC_DTYPE_FLOAT ? NULL
                                                                                    : gv->dev.data,
                                       .grad = gv->grad.data, .m = gp->m, .v = gp->v,
                                       .n = (uint64_t)n, .model_dtype = (int32_t)gv->dev.dtype,
                                       .grad_dtype = (int32_t)gv->grad.dtype};
    }
    if (!st) st = tx_cuda_optim_layout(ts, g->n_params, &g->opt_blocks);
    if (!st) {
        cudaError_t e = cudaMemcpyAsync(g->opt_dev, ts, g->n_params * sizeof(*ts),
                                        cudaMemcpyHostToDevice, g->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
        if (e != cudaSuccess) st = cuda_err(e, "optimizer table");
    }
    free(ts);
    return st;
}

/* Saved contexts and backward args, once the data pointers exist. */
static teexec_status *finish_args(tx_cuda_executor *g)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        if (n->kind != GN_TE || !g->cfg.training || !n->needs_bwd) continue;
        tx_te_bwd_args *b = &n->ba;
        memset(b, 0, sizeof *b);
        b->op = n->s->id;
        b->attrs = n->attrs;
        b->grad_output = n->gout[0];
        b->grad_extra_outputs = n->gout + 1;
        b->n_grad_extra_outputs = (int)n->ir->n_outputs - 1;
        b->saved = n->saved;
        b->n_saved = n->n_saved;
        b->grad_input = n->gin[0];
        b->grad_extra_inputs = n->gin + 1;
        b->n_grad_extra_inputs = n->s->n_extra_inputs;
        b->grad_params = n->gin + 1 + n->s->n_extra_inputs;
        b->n_grad_params = n->n_params;
        b->handoff_region = n->dy_region;
    }
    return NULL;
}

/* ---- creation ----------------------------------------------------------------------- */

void tx_cuda_executor_destroy(tx_cuda_executor *g)
{
    if (!g) return;
    if (g->stream) cudaStreamSynchronize(g->stream);
    if (g->graph_exec) cudaGraphExecDestroy(g->graph_exec);
    for (size_t i = 0; i < g->n_fused; i++) tx_cuda_fused_free(g->fused[i].f);
    free(g->fused);
    free(g->poison);
    for (size_t i = 0; g->nodes && i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        tx_cuda_te_node_free(n->te);
        tx_cuda_std_node_free(n->std);
        free(n->s_in);
        free(n->s_out);
        free(n->s_gout);
        free(n->s_gin);
        free(n->acc);
    }
    free(g->nodes);
    free(g->vals);
    free(g->params);
    free(g->staging);
    free(g->cache_checks);
    free(g->out_staging);
    free(g->in_values);
    free(g->prof);
    tx_run_profile_free(&g->run_prof);
    if (g->own_sources) tx_param_sources_free(g->sources, g->n_sources);
    if (g->n_delayed) tx_delayed_free(&g->delayed);
    if (g->arena) cudaFree(g->arena);
    if (g->delayed_dev) cudaFree(g->delayed_dev);
    /* after the stream is idle: the last release frees the copies */
    if (g->weights) tx_weight_share_release(g->lowered->weights, g->weights);
    tx_gemm_lt_destroy(g->gemm);
    tx_sdpa_cudnn_destroy(g->sdpa);
    if (g->ev[0]) cudaEventDestroy(g->ev[0]);
    if (g->ev[1]) cudaEventDestroy(g->ev[1]);
    if (g->io_ev[0]) cudaEventDestroy(g->io_ev[0]);
    if (g->io_ev[1]) cudaEventDestroy(g->io_ev[1]);
    if (g->own_stream && g->stream) cudaStreamDestroy(g->stream);
    tx_fuser_plan_free(g->fplan);
    /* the plan's known values point at the planner's initializers */
    tx_value_plan_clear(&g->plan);
    tx_value_planner_destroy(g->vp);
    free(g->recipe_name);
    free(g);
}

static teexec_status *device_setup(tx_cuda_executor *g, tx_device_caps *caps)
{
    int dev = 0;
    CU(cudaGetDevice(&dev), "selecting the device");
    g->device = dev;
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, dev), "reading the device's properties");
    g->env.sm = prop.major * 10 + prop.minor;
    memset(caps, 0, sizeof *caps);
    snprintf(caps->name, sizeof caps->name, "sm_%d", g->env.sm);
    caps->sm = g->env.sm;
    caps->fp8_gemm = g->env.sm >= 89;
    caps->fp8_block_gemm = g->env.sm >= 90;
    caps->mx_gemm = g->env.sm >= 100;
    caps->memory_bytes = prop.totalGlobalMem;
    if (g->cfg.stream) g->stream = (cudaStream_t)g->cfg.stream;
    else {
        CU(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking), "creating a stream");
        g->own_stream = true;
    }
    TX_TRY(tx_gemm_lt_create(GEMM_WORKSPACE, &g->gemm));
    /* GEMM algorithms timed once per shape on the first (uncaptured) call;
     * TEEXEC_GEMM_AUTOTUNE=0 or determinism: the heuristic's first answer */
    const tx_gemm_tune_config tune =
        tx_gemm_tune_from_env(getenv("TEEXEC_GEMM_AUTOTUNE"), g->cfg.deterministic);
    tx_gemm_lt_set_tune(g->gemm, &tune);
    teexec_status *st = tx_sdpa_cudnn_create(&g->sdpa);
    if (st) {
        /* no cuDNN: attention takes the CUDA fallback */
        teexec_status_destroy(st);
        g->sdpa = NULL;
    }
    if (g->cfg.profile) {
        CU(cudaEventCreate(&g->ev[0]), "profile events");
        CU(cudaEventCreate(&g->ev[1]), "profile events");
    }
    g->env.stream = g->stream;
    g->env.gemm = g->gemm;
    g->env.sdpa = g->sdpa;
    g->env.deterministic = g->cfg.deterministic;
    g->env.allow_tf32 = g->cfg.allow_tf32;
    return NULL;
}

/* The executor's value planner over the lowered model and the value plan
 * for the configured input shapes (exec/value_plan.h): every value's dtype
 * and shape, the values known before running (initializers, folded
 * subgraphs) and the nodes that therefore do not run. */
static teexec_status *make_value_plan(tx_cuda_executor *g, const tx_cuda_executor_config *cfg)
{
    /* an inference executor over shared weights decodes a weight only when
     * it is the first to upload it (ws_fill): a new shape costs no pass
     * over the weights on the host */
    unsigned flags = !cfg->training && g->lowered->weights ? TX_VP_DEFER_WEIGHTS : 0;
    TX_TRY(tx_value_planner_create(g->lowered, g->lowered, flags, &g->vp));
    g->ir = g->vp->g;
    const tx_ir_graph *ir = g->ir;
    if (cfg->n_inputs != g->vp->n_in)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the model has %zu inputs; %zu given",
                        g->vp->n_in, cfg->n_inputs);
    g->n_in = g->vp->n_in;
    g->in_values = calloc(g->n_in ? g->n_in : 1, sizeof(*g->in_values));
    teexec_dtype *dts = calloc(g->n_in ? g->n_in : 1, sizeof(*dts));
    tx_shape *shapes = calloc(g->n_in ? g->n_in : 1, sizeof(*shapes));
    if (!g->in_values || !dts || !shapes) {
        free(dts);
        free(shapes);
        return tx_oom();
    }
    /* the lowered model's input order from the caller's names */
    teexec_status *st = NULL;
    for (size_t j = 0; j < g->n_in && !st; j++) {
        int32_t v = g->vp->in_vals[j];
        size_t i = 0;
        while (i < cfg->n_inputs && strcmp(cfg->input_names[i], ir->values[v].name)) i++;
        if (i == cfg->n_inputs) {
            st = tx_error(TEEXEC_ERR_INTERNAL, "lowered input \"%s\" not among the inputs",
                          ir->values[v].name);
            break;
        }
        g->in_values[i] = v;
        dts[j] = ir->values[v].dtype;
        shapes[j] = cfg->input_shapes[i];
    }
    if (!st) st = tx_value_plan_build(g->vp, dts, shapes, &g->plan);
    free(dts);
    free(shapes);
    return st;
}

static teexec_status *make_fuser_plan(tx_cuda_executor *g, const tx_device_caps *caps)
{
    tx_plan_request req;
    memset(&req, 0, sizeof req);
    req.recipe = g->cfg.recipe;
    /* a cast compute dtype is what the fused kernels see (epilogues that
     * take 16-bit operands only, for instance) */
    if (g->compute != TEEXEC_DTYPE_UNDEFINED) req.recipe.compute_dtype = g->compute;
    req.device = *caps;
    req.training = g->cfg.training;
    req.deterministic = g->cfg.deterministic;
    req.vals = g->plan.vals;
    req.n_vals = g->ir->n_values;
    return tx_fuser_plan_build(g->ir, &req, &g->fplan);
}

static teexec_status *init_delayed(tx_cuda_executor *g)
{
    if (g->cfg.recipe.kind != TX_RECIPE_FP8_DELAYED) return NULL;
    int32_t max_slot = -1;
    for (size_t i = 0; i < g->fplan->n_quant; i++)
        if (g->fplan->quant[i].delayed_slot > max_slot) max_slot = g->fplan->quant[i].delayed_slot;
    if (max_slot < 0) return NULL;
    uint32_t count = (uint32_t)max_slot + 1;
    teexec_dtype *fmts = calloc(count, sizeof(*fmts));
    if (!fmts) return tx_oom();
    for (uint32_t i = 0; i < count; i++) fmts[i] = TEEXEC_DTYPE_FLOAT8E4M3FN;
    for (size_t i = 0; i < g->fplan->n_quant; i++)
        if (g->fplan->quant[i].delayed_slot >= 0)
            fmts[g->fplan->quant[i].delayed_slot] = g->fplan->quant[i].data_dtype;
    int hist = g->cfg.recipe.amax_history_len > 0 ? g->cfg.recipe.amax_history_len : 1024;
    teexec_status *st = tx_delayed_init(&g->delayed, (uint32_t)hist, count, 0,
                                        TX_AMAX_MAX, fmts);
    free(fmts);
    TX_TRY(st);
    g->n_delayed = count;
    /* its own small allocation: the Linears' quantizers are prepared with
     * pointers into it before the arena exists */
    g->delayed_bytes = 2 * (size_t)count * sizeof(float);
    TX_TRY(tx_device_budget_check(g->cfg.memory_limit, g->cfg.memory_held, 0, g->delayed_bytes,
                                  "cuda executor: the fp8-delayed state"));
    cudaError_t e = cudaMalloc((void **)&g->delayed_dev, g->delayed_bytes);
    if (e != cudaSuccess) {
        g->delayed_dev = NULL;
        g->delayed_bytes = 0;
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            return tx_device_alloc_failed(2 * (size_t)count * sizeof(float),
                                          "cuda executor: the fp8-delayed state",
                                          cudaGetErrorString(e));
        }
        return cuda_err(e, "fp8-delayed state");
    }
    return NULL;
}

static teexec_status *upload_delayed(tx_cuda_executor *g)
{
    if (!g->n_delayed) return NULL;
    float *h = calloc(2 * g->n_delayed, sizeof(float));
    if (!h) return tx_oom();
    for (uint32_t i = 0; i < g->n_delayed; i++) h[i] = tx_delayed_scale(&g->delayed, i);
    cudaError_t e = cudaMemcpyAsync(g->delayed_dev, h, 2 * g->n_delayed * sizeof(float),
                                    cudaMemcpyHostToDevice, g->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    free(h);
    if (e != cudaSuccess) return cuda_err(e, "fp8-delayed state");
    return NULL;
}

/* Graph capture needs the same work every launch: host values that change
 * per step (Dropout's Philox offset, NVFP4's stochastic-rounding offset)
 * would be frozen into the graph. */
static void decide_graphs(tx_cuda_executor *g)
{
    g->graph_ok = true;
    /* te.ops AllReduce queues NCCL work through the run's communicator,
     * which a captured graph would freeze (exec/comm.h) */
    for (size_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind == GN_TE && g->nodes[i].s->id == TX_TE_ALL_REDUCE) {
            g->graph_ok = false;
            g->graph_off_why = "te.ops AllReduce calls NCCL each run";
            return;
        }
    if (!g->cfg.training) return;
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        if (n->kind == GN_TE && n->s->id == TX_TE_DROPOUT &&
            n->attrs[TX_TE_A_DROPOUT_P].f > 0.0) {
            g->graph_ok = false;
            g->graph_off_why = "Dropout draws a new mask each step";
        }
        if (n->kind == GN_TE && n->q.dy.on && n->q.dy.cfg.stochastic_rounding) {
            g->graph_ok = false;
            g->graph_off_why = "NVFP4 stochastic rounding draws new numbers each step";
        }
    }
}

/* The host copies of the big float weights an inference executor read
 * from the model's shared device copies: needed only to upload them (done
 * by now, by this executor or an earlier one), so they go, and the
 * executors of a session (one per shape) do not each keep the model's
 * weights in host memory. They are the executor's own planner's decoded
 * initializers, which no later plan reads (the executor plans once). Small
 * initializers stay (node preparation may have kept pointers to integer
 * shapes and indices), and so does one a graph output reads. */
static void drop_host_weights(tx_cuda_executor *g)
{
    if (g->cfg.training) return;
    for (size_t v = 0; v < g->ir->n_values; v++) {
        cx_value *gv = &g->vals[v];
        if (!gv->shared || gv->host != &g->vp->init[v]) continue;
        const tx_tensor *h = gv->host;
        if (!is_float(h->dtype) || h->nbytes < ((size_t)64 << 10) ||
            (g->ir->values[v].flags & TX_IR_VALUE_GRAPH_OUTPUT))
            continue;
        tx_tensor_release(&g->vp->init[v]);
        gv->host = NULL;
    }
}

/* The cache-mode attentions whose cache_len is a graph input: what a run
 * checks that input's host values against (cuda_executor_internal.h). */
static teexec_status *collect_cache_checks(tx_cuda_executor *g)
{
    const size_t slot = 1 + TX_TE_DPA_IN_CACHE_LEN;
    for (size_t ni = 0; ni < g->n_nodes; ni++) {
        const cx_node *n = &g->nodes[ni];
        if (n->kind != GN_TE || !n->s || n->s->id != TX_TE_DOT_PRODUCT_ATTENTION ||
            n->ir->n_inputs <= slot || n->ir->inputs[slot] < 0)
            continue;
        const tx_tensor *q = n->slot_in[0], *kc = n->slot_in[1 + TX_TE_DPA_IN_K_CACHE];
        if (!q || !kc || q->rank != 4 || kc->rank != 4) continue; /* the op refused it */
        for (size_t i = 0; i < g->n_in; i++) {
            if (g->in_values[i] != n->ir->inputs[slot]) continue;
            struct gx_cache_check *nc =
                realloc(g->cache_checks, (g->n_cache_checks + 1) * sizeof(*nc));
            if (!nc) return tx_oom();
            g->cache_checks = nc;
            nc[g->n_cache_checks++] =
                (struct gx_cache_check){i, q->dims[1], kc->dims[1], n->ir->label};
        }
    }
    return NULL;
}

teexec_status *tx_cuda_executor_create(const teexec_model *model, const tx_cuda_executor_config *cfg,
                                   tx_cuda_executor **out)
{
    *out = NULL;
    if (!tx_gpu_available())
        return tx_error(TEEXEC_ERR_DEVICE, "no usable CUDA device");
    tx_cuda_executor *g = calloc(1, sizeof(*g));
    if (!g) return tx_oom();
    g->cfg = *cfg;
    g->cfg.input_shapes = NULL; /* borrowed during creation only */
    g->cfg.input_names = NULL;
    if (cfg->train) g->topt = *cfg->train;
    else teexec_train_options_init(&g->topt);
    g->topt.loss_output = NULL;
    g->compute = cfg->dtype;
    const char *poison = getenv("TEEXEC_CUDA_POISON_DEAD");
    g->poison_dead = poison && !strcmp(poison, "1");
    tx_device_caps caps;
    double t0 = gx_now_ms(), t1;
#define PHASE_DONE(ph) (t1 = gx_now_ms(), g->setup_ms[ph] += t1 - t0, t0 = t1)
    teexec_status *st = device_setup(g, &caps);
    PHASE_DONE(GX_SETUP_DEVICE);
    if (!st) st = tx_model_runnable(model, &g->lowered, &g->prep);
    if (!st) st = make_value_plan(g, cfg);
    /* the user's names: the preparation's sources (they know repeated and
     * inherited annotations); a lowered copy given directly gets its own */
    if (!st && g->prep) {
        g->sources = g->prep->sources;
        g->n_sources = g->prep->n_sources;
    } else if (!st) {
        st = tx_param_sources(g->ir, &g->sources, &g->n_sources);
        g->own_sources = true;
    }
    if (!st) st = init_values(g);
    if (!st && g->ir->n_outputs == 0) st = tx_error(TEEXEC_ERR_BAD_MODEL, "the model has no outputs");
    if (!st) {
        g->loss_value = g->ir->outputs[0];
        if (cfg->train && cfg->train->loss_output) {
            g->loss_value = -1;
            for (size_t i = 0; i < g->ir->n_outputs; i++)
                if (!strcmp(g->ir->values[g->ir->outputs[i]].name, cfg->train->loss_output))
                    g->loss_value = g->ir->outputs[i];
            if (g->loss_value < 0)
                st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the model has no output \"%s\"",
                              cfg->train->loss_output);
        }
    }
    if (!st) st = prepare_nodes(g);
    if (!st) st = make_fuser_plan(g, &caps);
    if (!st) st = init_delayed(g);
    PHASE_DONE(GX_SETUP_PLAN);
    if (!st && !g->cfg.training) st = prepare_kernels(g, -1);
    if (!st && g->cfg.training) {
        st = prepare_kernels(g, GN_STD);
        if (!st) st = analyse_grads(g);
        if (!st && g->n_params == 0)
            st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no trainable parameter reaches the loss");
        if (!st) st = prepare_kernels(g, GN_TE);
    }
    if (!st) st = prepare_fusions(g);
    PHASE_DONE(GX_SETUP_KERNELS);
    if (!st) st = place_memory(g);
    PHASE_DONE(GX_SETUP_MEMORY);
    if (!st) st = upload_known(g);
    if (!st) st = upload_delayed(g);
    if (!st) st = init_params(g);
    if (!st) st = finish_args(g);
    if (!st) st = collect_cache_checks(g);
    if (!st) {
        decide_graphs(g);
        cudaError_t e = cudaStreamSynchronize(g->stream);
        if (e != cudaSuccess) st = cuda_err(e, "setting up");
    }
    PHASE_DONE(GX_SETUP_UPLOAD);
#undef PHASE_DONE
    if (!st) drop_host_weights(g);
    if (st) {
        tx_cuda_executor_destroy(g);
        return tx_status_with_file(st, model->file ? model->file->path : NULL);
    }
    *out = g;
    return NULL;
}

