/* gpu_handoff.c - which Linear operands the CUDA executor hands off
 * (gpu_handoff.h). The plan's quant entries name the producing node of a
 * hand-off (tx_plan_quant.producer: the norm / activation before the
 * Linear, or the Bias after it, which leads BackwardBiasQuantize or
 * BackwardActivationBias); the GPU takes it only where te_cuda_handoff.c
 * has the kernel, and both sides ask the same question
 * (tx_cuda_handoff_accepts), so the consumer's layout and the producer's
 * kernel agree. */
#include "exec/cuda/gpu_handoff.h"

#include "exec/cpu_te_ops.h"
#include "exec/cuda/te_cuda_handoff.h"

#include <string.h>

static bool is_handoff(tx_fusion_id f)
{
    return f == TX_FUSION_FWD_NORM_QUANTIZE || f == TX_FUSION_FWD_ACT_QUANTIZE ||
           f == TX_FUSION_BWD_BIAS_QUANTIZE || f == TX_FUSION_BWD_ACT_BIAS;
}

/* The fusion of the forward / backward layout kernel that covers node,
 * and the node after it in that kernel (-1 if none). */
static tx_fusion_id fusion_of(const tx_cuda_executor *g, int32_t node, bool bwd, int32_t *next)
{
    *next = -1;
    for (size_t gi = 0; gi < g->fplan->n_groups; gi++) {
        const tx_plan_group *pg = &g->fplan->groups[gi];
        if (pg->kind != TX_GROUP_CHAIN) continue;
        const tx_plan_kernel *ks = bwd ? pg->backward : pg->forward;
        int32_t nk = bwd ? pg->n_backward : pg->n_forward;
        for (int32_t k = 0; k < nk; k++)
            for (int32_t j = 0; j < ks[k].count; j++)
                if (ks[k].first + j < pg->n_nodes && pg->nodes[ks[k].first + j] == node) {
                    if (j + 1 < ks[k].count && ks[k].first + j + 1 < pg->n_nodes)
                        *next = pg->nodes[ks[k].first + j + 1];
                    return ks[k].fusion;
                }
    }
    return TX_FUSION_NONE;
}

/* A node's schema and attributes: the prepared ones, or decoded from the
 * IR for a node prepared later than the Linear (the Bias and activation
 * after it). False when it does not decode. */
static bool schema_of(const cx_node *m, const tx_te_op_schema **s, tx_te_attr_value *buf,
                      const tx_te_attr_value **attrs)
{
    *s = m->s;
    *attrs = m->attrs;
    if (*s) return true;
    int np = 0;
    teexec_status *st = tx_te_node_decode(m->ir, s, buf, &np);
    if (st) {
        teexec_status_destroy(st);
        return false;
    }
    *attrs = buf;
    return true;
}

static const tx_plan_quant *entry(const tx_cuda_executor *g, int32_t node, tx_qoperand op)
{
    for (size_t i = 0; i < g->fplan->n_quant; i++) {
        const tx_plan_quant *p = &g->fplan->quant[i];
        if (p->node == node && p->operand == op && p->quantized) return p;
    }
    return NULL;
}

static size_t last_dim(const tx_tensor *t)
{
    return t && t->rank > 0 ? (size_t)t->dims[t->rank - 1] : 0;
}

void tx_gpu_handoff_mark(tx_cuda_executor *g, cx_node *n)
{
    if (!n->s || n->s->id != TX_TE_LINEAR) return;
    for (int k = 0; k < 2; k++) {
        bool bwd = k == 1;
        tx_cuda_operand_q *q = bwd ? &n->q.dy : &n->q.x;
        q->handed_off = false;
        if (!q->on) continue;
        const tx_plan_quant *p = entry(g, n->index, bwd ? TX_QOP_GRAD_OUTPUT : TX_QOP_INPUT);
        if (!p || p->producer < 0 || (size_t)p->producer >= g->n_nodes) continue;
        const cx_node *m = &g->nodes[p->producer];
        if (m->kind != GN_TE || m->ir->n_inputs < 1 || m->ir->inputs[0] < 0) continue;
        int32_t next = -1;
        tx_fusion_id f = fusion_of(g, m->index, bwd, &next);
        if (!is_handoff(f)) continue;
        /* BackwardActivationBias: the kernel is the activation's (after
         * the Bias) and reads its input */
        if (f == TX_FUSION_BWD_ACT_BIAS) {
            if (next < 0 || (size_t)next >= g->n_nodes) continue;
            m = &g->nodes[next];
            if (m->kind != GN_TE || m->ir->n_inputs < 1 || m->ir->inputs[0] < 0) continue;
        }
        const tx_te_op_schema *s = NULL;
        tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
        const tx_te_attr_value *ap = NULL;
        if (!schema_of(m, &s, attrs, &ap)) continue;
        const tx_tensor *t = bwd ? n->slot_out[0] : n->slot_in[0];
        if (!t) continue;
        teexec_dtype in_dt = bwd && f == TX_FUSION_BWD_BIAS_QUANTIZE
                                 ? t->dtype
                                 : g->vals[m->ir->inputs[0]].dev.dtype;
        teexec_status *st = tx_cuda_handoff_accepts(f, s->id, ap, in_dt, t->dtype, last_dim(t), q);
        if (st) teexec_status_destroy(st);
        else q->handed_off = true;
    }
}

void tx_gpu_handoff_bind(tx_cuda_executor *g, tx_fusion_id fusion, cx_node *producer)
{
    if (!is_handoff(fusion)) return;
    producer->desc.handoff_to = NULL;
    producer->desc.handoff_state = NULL;
    tx_qoperand op = fusion == TX_FUSION_BWD_BIAS_QUANTIZE || fusion == TX_FUSION_BWD_ACT_BIAS
                         ? TX_QOP_GRAD_OUTPUT
                         : TX_QOP_INPUT;
    for (size_t i = 0; i < g->fplan->n_quant; i++) {
        const tx_plan_quant *p = &g->fplan->quant[i];
        if (p->producer != producer->index || p->operand != op || !p->quantized) continue;
        if (p->node < 0 || (size_t)p->node >= g->n_nodes) continue;
        cx_node *c = &g->nodes[p->node];
        if (c->kind != GN_TE || !c->te || !c->s || c->s->id != TX_TE_LINEAR) continue;
        producer->desc.handoff_to = c->te;
        if (op == TX_QOP_GRAD_OUTPUT) {
            /* the dy region, live from this producer's backward step */
            producer->desc.handoff_state = &c->dy_region;
            c->dy_producer = producer->index;
        } else {
            producer->desc.handoff_state = &c->state;
        }
        return;
    }
}

teexec_status *tx_gpu_handoff_verify(const tx_cuda_executor *g)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        const cx_node *c = &g->nodes[i];
        if (c->kind != GN_TE || !c->s || c->s->id != TX_TE_LINEAR) continue;
        for (int k = 0; k < 2; k++) {
            bool bwd = k == 1;
            const tx_cuda_operand_q *q = bwd ? &c->q.dy : &c->q.x;
            if (!q->handed_off) continue;
            const tx_plan_quant *p = entry(g, c->index, bwd ? TX_QOP_GRAD_OUTPUT : TX_QOP_INPUT);
            const cx_node *m = p && p->producer >= 0 && (size_t)p->producer < g->n_nodes
                                 ? &g->nodes[p->producer]
                                 : NULL;
            /* the producer leads the plan's hand-off kernel: one op, or the
             * Bias that BackwardActivationBias covers with its activation
             * (bound only there; te_cuda_handoff.c takes that fusion
             * whenever the Linear expects its grad, else it declines) */
            if (m && m->desc.handoff_to == c->te &&
                (bwd ? m->bwd_fused >= 0 || m->bwd_covered : m->fwd_fused >= 0))
                continue;
            return tx_error(TEEXEC_ERR_INTERNAL,
                            "op %s (Linear): its %s arrives quantized from op %s, whose fused "
                            "hand-off kernel was not prepared",
                            c->ir->label, bwd ? "grad_output" : "input x",
                            m ? m->ir->label : "?");
        }
    }
    return NULL;
}
