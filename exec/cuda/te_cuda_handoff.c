/* te_cuda_handoff.c - the planner's quantized hand-off fusions on the GPU
 * for FP8 per-tensor operands (fp8-delayed, fp8-current):
 *
 *  - ForwardNormQuantize (LayerNorm|RMSNorm before a Linear) and
 *    ForwardActivationQuantize (any plain activation before a Linear: GELU,
 *    QGELU, ReLU, SReLU, SiLU and the gated GLU family, whose output - the
 *    Linear's x - has half the input's last dim): the op's forward measures
 *    the amax of its output as it writes it (and with fp8-delayed's known
 *    scale also casts it to the rowwise FP8 bytes), then one
 *    cast(+transpose) pass fills the rest of the consumer Linear's x region
 *    in that Linear's state. The Linear (its q.x.handed_off set by the
 *    executor when it was prepared) does not quantize x.
 *  - BackwardBiasQuantize (a Bias after a Linear): dbias, dx = dy and the
 *    amax of dy in one pass, then the cast(+transpose) into the Linear's
 *    grad_output region, which a handed-off dy keeps in the Linear's state
 *    (the shared scratch would be this kernel's own workspace).
 *  - BackwardActivationBias (Linear, Bias, GELU|QGELU|ReLU|SReLU|SiLU) when
 *    the Linear's grad_output is handed off: dact, dbias and the amax of dx
 *    in one pass, then the cast(+transpose) as for the Bias. Where the
 *    Linear quantizes its grad_output itself, this family leaves the fusion
 *    to te_cuda_basic_fused.c's unquantized dact+dbias.
 * The bytes equal what the Linear's own quantizer makes of the same tensor
 * (linear_gemm.h, tx_cuda_lin_handoff_*). Every other format declines with
 * the reason, and the executor runs the ops unfused.
 *
 * Ownership: the private data (malloc'd) is freed by free_priv.
 * Thread-safety: one host thread per fused kernel. */
#include "exec/cuda/te_cuda_handoff.h"

#include "base/checked.h"
#include "exec/cuda/te_cuda_basic.h"
#include "exec/cuda/te_cuda_handoff_block.h"
#include "exec/cuda/te_cuda_linear.h"
#include "kernels/cuda/handoff_act.h"
#include "kernels/cuda/handoff_fp8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct handoff_priv {
    tx_fusion_id fusion;
    char label[200];
    tx_cuda_te_node *consumer;
    void *const *consumer_state;
    tx_cuda_actx_args act;    /* FWD_ACT_QUANTIZE, BWD_ACT_BIAS: the function */
    tx_te_op_id act_op;       /* BWD_ACT_BIAS */
    size_t dx_off, dx_bytes, ws_off; /* BWD_ACT_BIAS scratch layout */
} handoff_priv;

static bool is_norm(tx_te_op_id op) { return tx_te_op_is(op, TX_TE_CLASS_NORM); }

/* The act_ext.h description of a plain (unscaled) activation, as the
 * unfused GPU op runs it (te_cuda_basic.c); false for any other op. */
static bool act_of(tx_te_op_id op, const tx_te_attr_value *attrs, tx_cuda_actx_args *out)
{
    tx_cuda_actx_args a;
    if (tx_cuda_basic_act_scaled(op) || !tx_cuda_basic_actx_of(op, attrs, &a)) return false;
    if (a.softcap || a.fn == TX_CUDA_ACTX_SITU) return false; /* handoff_act.cu has no SiTU */
    if (out) *out = a;
    return true;
}

/* dact+dbias covers the non-gated ones (BackwardActivationBias's list). */
static bool dact_of(tx_te_op_id op, const tx_te_attr_value *attrs, tx_cuda_actx_args *out)
{
    tx_cuda_actx_args a;
    if (!act_of(op, attrs, &a) || a.gated) return false;
    if (out) *out = a;
    return true;
}

static bool io_dtype(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT || t == TEEXEC_DTYPE_BFLOAT16 || t == TEEXEC_DTYPE_FLOAT16;
}

/* The dtype pairs the kernels take: one dtype in and out; a norm may also
 * go bf16 <-> fp32. */
static bool dtype_pair_ok(tx_fusion_id fusion, teexec_dtype in_dt, teexec_dtype dt)
{
    if (!io_dtype(in_dt) || !io_dtype(dt)) return false;
    if (in_dt == dt) return true;
    return fusion == TX_FUSION_FWD_NORM_QUANTIZE && in_dt != TEEXEC_DTYPE_FLOAT16 &&
           dt != TEEXEC_DTYPE_FLOAT16;
}

teexec_status *tx_cuda_handoff_accepts(tx_fusion_id fusion, tx_te_op_id op,
                                       const tx_te_attr_value *attrs, teexec_dtype in_dt,
                                       teexec_dtype dt, size_t cols, const tx_cuda_operand_q *q)
{
    /* fp8-block operands have their own producers (te_cuda_handoff_block.c) */
    if (q && q->on && q->cfg.kind == TX_QKIND_FP8_BLOCK)
        return tx_cuda_handoff_block_accepts(fusion, op, attrs, in_dt, dt, cols, q);
    switch (fusion) {
    case TX_FUSION_FWD_NORM_QUANTIZE:
        if (!is_norm(op))
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "the producer is not LayerNorm or RMSNorm");
        if (cols > TX_HANDOFF_NORM_MAX_H)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "the fused norm kernel keeps a row in registers: hidden size %zu > %zu",
                            cols, (size_t)TX_HANDOFF_NORM_MAX_H);
        break;
    case TX_FUSION_FWD_ACT_QUANTIZE:
        if (!act_of(op, attrs, NULL))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "the fused activation kernel covers the unscaled activations but "
                            "SiTU (GELU, QGELU, ReLU, SReLU, SiLU, GLU, GEGLU, QGEGLU, ReGLU, "
                            "SReGLU, SwiGLU, ClampedSwiGLU), not op type %s",
                            tx_te_schema(op) ? tx_te_schema(op)->name : "?");
        break;
    case TX_FUSION_BWD_BIAS_QUANTIZE:
        if (op != TX_TE_BIAS) return tx_error(TEEXEC_ERR_UNSUPPORTED, "the producer is not a Bias");
        break;
    case TX_FUSION_BWD_ACT_BIAS:
        if (!dact_of(op, attrs, NULL))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "the fused dact+dbias+quantize kernel takes GELU, QGELU, ReLU, SReLU or "
                            "SiLU after the Bias");
        break;
    default: return tx_error(TEEXEC_ERR_UNSUPPORTED, "not a hand-off fusion");
    }
    if (!dtype_pair_ok(fusion, in_dt, dt))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "the fused kernel reads and writes one of float32, bfloat16 or float16%s "
                        "(here %s -> %s)",
                        fusion == TX_FUSION_FWD_NORM_QUANTIZE ? " (or bfloat16 <-> float32)" : "",
                        teexec_dtype_name(in_dt), teexec_dtype_name(dt));
    if (cols == 0 || cols % 16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "FP8 per-tensor operands need a last dim that is a multiple of 16, got %zu",
                        cols);
    return tx_cuda_lin_handoff_check(q);
}

static void handoff_free(void *priv) { free(priv); }

static const char *fusion_name(tx_fusion_id f)
{
    const tx_fusion_info *i = tx_fusion_info_of(f);
    return i ? i->name : "fusion";
}

static bool is_bwd(tx_fusion_id f)
{
    return f == TX_FUSION_BWD_BIAS_QUANTIZE || f == TX_FUSION_BWD_ACT_BIAS;
}

/* The consumer Linear, its operand, and that operand's region. */
static teexec_status *target(const handoff_priv *p, const tx_cuda_linear **lo,
                             const tx_cuda_lin_operand **op, void **region)
{
    const tx_cuda_linear *l = tx_cuda_te_node_priv(p->consumer);
    void *state = *p->consumer_state; /* forward: its state; backward: its dy region */
    bool fwd = !is_bwd(p->fusion);
    size_t off = fwd ? l->st_x : l->st_dy;
    *op = fwd ? &l->ox : &l->ody;
    if (!state || off == SIZE_MAX || !(*op)->q.handed_off)
        return tx_error(TEEXEC_ERR_INTERNAL, "%s: %s has no hand-off region", p->label, l->name);
    *lo = l;
    *region = (char *)state + off;
    return NULL;
}

static tx_cuda_handoff_q hq_of(const tx_cuda_lin_handoff *t)
{
    tx_cuda_handoff_q q = {t->fmt, t->amax, t->scale, t->row_data};
    return q;
}

static teexec_status *handoff_fwd(void *priv, const tx_te_fwd_args *const *a, void *const *states,
                                  void *scratch, const tx_cuda_env *env)
{
    (void)states;
    (void)scratch;
    handoff_priv *p = priv;
    const tx_te_fwd_args *f = a[0];
    const tx_cuda_linear *l = NULL;
    const tx_cuda_lin_operand *o = NULL;
    void *region = NULL;
    TX_TRY(target(p, &l, &o, &region));
    const tx_tensor *x = f->input;
    tx_tensor *y = f->output;
    if (!x || !y || y->numel != o->rows * o->cols || y->dtype != l->x_dt)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the output does not fit %s's input",
                        p->label, l->name);
    if (p->fusion == TX_FUSION_FWD_ACT_QUANTIZE && x->numel != y->numel * (p->act.gated ? 2 : 1))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x does not fit the output", p->label);
    tx_cuda_lin_handoff t;
    TX_TRY(tx_cuda_lin_handoff_begin(o, region, &t, env->stream));
    tx_cuda_handoff_q q = hq_of(&t);
    teexec_status *st;
    if (p->fusion == TX_FUSION_FWD_NORM_QUANTIZE) {
        tx_cuda_norm_fwd k;
        TX_TRY(tx_cuda_basic_norm_fwd_args(f, p->label, &k));
        if (k.h != o->cols)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: shapes changed since prepare",
                            p->label);
        st = tx_cuda_handoff_norm_forward(&k, &q, env->stream);
    } else {
        tx_cuda_actx_args k = p->act;
        k.rows = o->rows;
        k.cols = o->cols;
        k.x = x->data;
        k.x_dtype = x->dtype;
        k.y = y->data;
        k.y_dtype = y->dtype;
        st = tx_cuda_handoff_act_forward(&k, &q, env->stream);
    }
    if (!st) st = tx_cuda_lin_handoff_finish(o, y->data, y->dtype, region, env->stream);
    return st ? tx_status_prefix(st, "%s", p->label) : NULL;
}

/* BackwardBiasQuantize: a[0] is the Bias. */
static teexec_status *bias_bwd(const handoff_priv *p, const tx_te_bwd_args *b, void *scratch,
                               const tx_cuda_lin_operand *o, const tx_cuda_handoff_q *q,
                               const tx_cuda_env *env, const tx_tensor **hp)
{
    const tx_tensor *dy = b->grad_output;
    tx_tensor *dx = b->grad_input, *db = b->n_grad_params > 0 ? b->grad_params[0] : NULL;
    if (!dy || dy->numel != o->rows * o->cols || (dx && (dx->numel != dy->numel ||
                                                         dx->dtype != dy->dtype)) ||
        (db && db->numel != o->cols))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the grads do not fit the grad_output",
                        p->label);
    if (db && !scratch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: needs scratch", p->label);
    *hp = dy;
    return tx_cuda_handoff_bias_backward(dy->data, dy->dtype, o->rows, o->cols,
                                         dx ? dx->data : NULL, db ? db->data : NULL,
                                         db ? db->dtype : TEEXEC_DTYPE_FLOAT, scratch, q,
                                         env->stream);
}

/* BackwardActivationBias: a[0] is the Bias, a[1] the activation; dx (the
 * Bias's input grad = the activation's) is what the Linear before reads.
 * Nothing outside the fusion reads the grad between the two ops. */
static teexec_status *act_bias_bwd(const handoff_priv *p, const tx_te_bwd_args *const *a,
                                   void *scratch, const tx_cuda_lin_operand *o,
                                   const tx_cuda_handoff_q *q, const tx_cuda_env *env,
                                   const tx_tensor **hp, tx_tensor *tmp)
{
    const tx_te_bwd_args *bias = a[0], *act = a[1];
    if (!bias || !act || bias->op != TX_TE_BIAS || act->op != p->act_op)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the args are not Bias, activation",
                        p->label);
    if (act->n_saved < 1 || !act->saved[0])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the activation's saved x is missing",
                        p->label);
    if (!scratch) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: needs scratch", p->label);
    const tx_tensor *x = act->saved[0], *dy = act->grad_output;
    tx_tensor *db = bias->n_grad_params > 0 ? bias->grad_params[0] : NULL;
    tx_tensor *dx = bias->grad_input ? bias->grad_input : act->grad_input;
    if (!dx) {
        /* the Linear before still reads dx: keep it in scratch */
        *tmp = *x;
        tmp->data = (char *)scratch + p->dx_off;
        tmp->owns_data = false;
        if (tmp->nbytes > p->dx_bytes)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x grew since prepare", p->label);
        dx = tmp;
    }
    if (!dy || x->numel != o->rows * o->cols || dy->numel != x->numel ||
        dx->numel != x->numel || dy->dtype != x->dtype || dx->dtype != x->dtype ||
        (db && db->numel != o->cols))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the grads do not fit the grad_output",
                        p->label);
    *hp = dx;
    return tx_cuda_handoff_dact_bias_backward(
        p->act.fn, o->rows, o->cols, x->data, dy->data, dx->data, x->dtype, db ? db->data : NULL,
        db ? db->dtype : TEEXEC_DTYPE_FLOAT, (float *)((char *)scratch + p->ws_off), q,
        env->stream);
}

static teexec_status *handoff_bwd(void *priv, const tx_te_bwd_args *const *a, void *const *states,
                                  void *scratch, const tx_cuda_env *env)
{
    (void)states;
    handoff_priv *p = priv;
    const tx_cuda_linear *l = NULL;
    const tx_cuda_lin_operand *o = NULL;
    void *region = NULL;
    TX_TRY(target(p, &l, &o, &region));
    tx_cuda_lin_handoff t;
    TX_TRY(tx_cuda_lin_handoff_begin(o, region, &t, env->stream));
    tx_cuda_handoff_q q = hq_of(&t);
    const tx_tensor *hp = NULL; /* the high-precision grad the cast reads */
    tx_tensor tmp;
    teexec_status *st = p->fusion == TX_FUSION_BWD_ACT_BIAS
                            ? act_bias_bwd(p, a, scratch, o, &q, env, &hp, &tmp)
                            : bias_bwd(p, a[0], scratch, o, &q, env, &hp);
    if (!st) st = tx_cuda_lin_handoff_finish(o, hp->data, hp->dtype, region, env->stream);
    return st ? tx_status_prefix(st, "%s", p->label) : NULL;
}

static const tx_cuda_fused_impl fwd_impl = {handoff_fwd, NULL, handoff_free};
static const tx_cuda_fused_impl bwd_impl = {NULL, handoff_bwd, handoff_free};

/* Scratch of a backward hand-off: BWD_BIAS_QUANTIZE its dbias workspace;
 * BWD_ACT_BIAS a dx buffer (used when no dx is bound) then the workspace. */
static teexec_status *bwd_scratch(handoff_priv *p, const tx_cuda_lin_operand *o,
                                  const tx_tensor *x, size_t *bytes)
{
    size_t ws, total = 0;
    if (p->fusion == TX_FUSION_BWD_BIAS_QUANTIZE) {
        if (!tx_mul_size(tx_cuda_handoff_bias_workspace_floats(o->rows, o->cols), sizeof(float),
                         bytes))
            return tx_error(TEEXEC_ERR_LIMIT, "%s: workspace size overflows", p->label);
        return NULL;
    }
    p->dx_off = 0;
    p->dx_bytes = x->nbytes;
    if (!tx_cuda_basic_add_region(&total, x->nbytes))
        return tx_error(TEEXEC_ERR_LIMIT, "%s: scratch size overflows", p->label);
    p->ws_off = total;
    if (!tx_mul_size(tx_cuda_handoff_dact_bias_workspace_floats(o->rows, o->cols), sizeof(float),
                     &ws) ||
        !tx_cuda_basic_add_region(&total, ws))
        return tx_error(TEEXEC_ERR_LIMIT, "%s: scratch size overflows", p->label);
    *bytes = total;
    return NULL;
}

teexec_status *tx_cuda_fused_handoff_prepare(tx_fusion_id fusion, bool backward,
                                             const tx_cuda_te_desc *const *descs,
                                             tx_cuda_te_node *const *nodes, int n,
                                             const tx_cuda_fused_impl **impl, void **priv,
                                             size_t *scratch_bytes)
{
    (void)nodes;
    *impl = NULL;
    *priv = NULL;
    *scratch_bytes = 0;
    bool act_bias = fusion == TX_FUSION_BWD_ACT_BIAS;
    if (fusion != TX_FUSION_FWD_NORM_QUANTIZE && fusion != TX_FUSION_FWD_ACT_QUANTIZE &&
        fusion != TX_FUSION_BWD_BIAS_QUANTIZE && !act_bias)
        return NULL;
    /* the lead op (the Bias of BWD_ACT_BIAS) names the consumer */
    const tx_cuda_te_desc *d = descs && n >= 1 ? descs[0] : NULL;
    if (act_bias) {
        /* ours only where the Linear before expects its grad_output from
         * this kernel; else te_cuda_basic_fused.c's dact+dbias runs */
        if (!d || n != 2 || !descs[1] || !d->handoff_to || !d->handoff_state ||
            tx_cuda_te_node_op(d->handoff_to) != TX_TE_LINEAR)
            return NULL;
        const tx_cuda_linear *l = tx_cuda_te_node_priv(d->handoff_to);
        if (!l->ody.q.handed_off) return NULL;
    } else if (n != 1) {
        d = NULL;
    }
    const char *name = d && d->name ? d->name : "?";
    bool bwd_fusion = is_bwd(fusion);
    if (!d || backward != bwd_fusion || !d->output)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s over op %s: the CUDA kernel covers one %s op",
                        fusion_name(fusion), name, bwd_fusion ? "backward" : "forward");
    if (!d->handoff_to || !d->handoff_state || tx_cuda_te_node_op(d->handoff_to) != TX_TE_LINEAR)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s over op %s: the executor found no consumer Linear for the hand-off",
                        fusion_name(fusion), name);
    const tx_cuda_linear *l = tx_cuda_te_node_priv(d->handoff_to);
    const tx_cuda_lin_operand *o = bwd_fusion ? &l->ody : &l->ox;
    /* the quantized tensor: the norm's / act's output; the Bias's grad has
     * its dtype; BWD_ACT_BIAS's dx has the activation's input's */
    const tx_cuda_te_desc *pd = act_bias ? descs[1] : d;
    const tx_tensor *qt = act_bias ? pd->input : d->output;
    teexec_status *why = NULL;
    if (!qt)
        why = tx_error(TEEXEC_ERR_UNSUPPORTED, "the activation's input is not known");
    size_t cols = qt && qt->rank > 0 ? (size_t)qt->dims[qt->rank - 1] : 0;
    teexec_dtype in_dt = pd->input ? pd->input->dtype : qt ? qt->dtype : TEEXEC_DTYPE_UNDEFINED;
    if (!why)
        why = tx_cuda_handoff_accepts(fusion, pd->op, pd->attrs, in_dt, qt->dtype, cols, &o->q);
    if (!why && !o->q.handed_off)
        why = tx_error(TEEXEC_ERR_UNSUPPORTED,
                       "%s was prepared to quantize this operand itself", l->name);
    if (!why && (qt->numel != o->rows * o->cols || cols != o->cols))
        why = tx_error(TEEXEC_ERR_UNSUPPORTED, "the tensor does not have %s's operand shape",
                       l->name);
    if (!why && act_bias && (!d->input || d->input->dtype != qt->dtype))
        why = tx_error(TEEXEC_ERR_UNSUPPORTED,
                       "the Bias's input and the activation's input differ in dtype");
    if (why) {
        teexec_status *st = tx_error(TEEXEC_ERR_UNSUPPORTED, "%s over op %s: %s",
                                     fusion_name(fusion), name, teexec_status_message(why));
        teexec_status_destroy(why);
        return st;
    }
    if (o->q.cfg.kind == TX_QKIND_FP8_BLOCK)
        return tx_cuda_fused_handoff_block_prepare(fusion, d, l, o, impl, priv, scratch_bytes);
    handoff_priv *p = calloc(1, sizeof *p);
    if (!p) return tx_oom();
    p->fusion = fusion;
    snprintf(p->label, sizeof p->label, "%s over op %s%s%s (into %s)", fusion_name(fusion), name,
             act_bias ? ".." : "", act_bias ? (pd->name ? pd->name : "?") : "", l->name);
    p->consumer = d->handoff_to;
    p->consumer_state = d->handoff_state;
    if (fusion == TX_FUSION_FWD_ACT_QUANTIZE) (void)act_of(pd->op, pd->attrs, &p->act);
    if (act_bias) {
        (void)dact_of(pd->op, pd->attrs, &p->act);
        p->act_op = pd->op;
    }
    if (bwd_fusion) {
        teexec_status *st = bwd_scratch(p, o, qt, scratch_bytes);
        if (st) {
            free(p);
            *scratch_bytes = 0;
            return st;
        }
    }
    *impl = bwd_fusion ? &bwd_impl : &fwd_impl;
    *priv = p;
    return NULL;
}
