/* te_cuda_handoff.c - the planner's quantized hand-off fusions on the GPU
 * for FP8 per-tensor operands (fp8-delayed, fp8-current):
 *
 *  - ForwardNormQuantize (LayerNorm|RMSNorm before a Linear) and
 *    ForwardActivationQuantize (GELU|ReLU|SiLU before a Linear): the op's
 *    forward measures the amax of its output as it writes it (and with
 *    fp8-delayed's known scale also casts it to the rowwise FP8 bytes), then
 *    one cast(+transpose) pass fills the rest of the consumer Linear's x
 *    region in that Linear's state. The Linear (its q.x.handed_off set by
 *    the executor when it was prepared) does not quantize x.
 *  - BackwardBiasQuantize (a Bias after a Linear): dbias, dx = dy and the
 *    amax of dy in one pass, then the cast(+transpose) into the Linear's
 *    grad_output region, which a handed-off dy keeps in the Linear's state
 *    (the shared scratch would be this kernel's own workspace).
 * The bytes equal what the Linear's own quantizer makes of the same tensor
 * (linear_gemm.h, tx_cuda_lin_handoff_*). Every other format declines with
 * the reason, and the executor runs the ops unfused.
 *
 * Ownership: the private data (malloc'd) is freed by free_priv.
 * Thread-safety: one host thread per fused kernel. */
#include "exec/cuda/te_cuda_handoff.h"

#include "base/checked.h"
#include "exec/cuda/te_cuda_basic.h"
#include "exec/cuda/te_cuda_linear.h"
#include "kernels/cuda/handoff_fp8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct handoff_priv {
    tx_fusion_id fusion;
    char label[200];
    tx_cuda_te_node *consumer;
    void *const *consumer_state;
    tx_cuda_act act;          /* FWD_ACT_QUANTIZE */
} handoff_priv;

static bool is_norm(tx_te_op_id op) { return op == TX_TE_LAYER_NORM || op == TX_TE_RMS_NORM; }

static bool act_of(tx_te_op_id op, const tx_te_attr_value *attrs, tx_cuda_act *out)
{
    switch (op) {
    case TX_TE_GELU:
        *out = attrs && attrs[TX_TE_A_GELU_APPROX].i == TX_TE_GELU_ERF ? TX_CUDA_ACT_GELU_ERF
                                                                       : TX_CUDA_ACT_GELU_TANH;
        return true;
    case TX_TE_RELU: *out = TX_CUDA_ACT_RELU; return true;
    case TX_TE_SILU: *out = TX_CUDA_ACT_SILU; return true;
    default: return false;
    }
}

static bool quant_src(teexec_dtype t) { return t == TEEXEC_DTYPE_FLOAT || t == TEEXEC_DTYPE_BFLOAT16; }

teexec_status *tx_cuda_handoff_accepts(tx_fusion_id fusion, tx_te_op_id op,
                                       const tx_te_attr_value *attrs, teexec_dtype in_dt,
                                       teexec_dtype dt, size_t cols, const tx_cuda_operand_q *q)
{
    tx_cuda_act act;
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
        if (!act_of(op, attrs, &act))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "the fused activation kernel covers GELU, ReLU and SiLU only");
        break;
    case TX_FUSION_BWD_BIAS_QUANTIZE:
        if (op != TX_TE_BIAS) return tx_error(TEEXEC_ERR_UNSUPPORTED, "the producer is not a Bias");
        break;
    default: return tx_error(TEEXEC_ERR_UNSUPPORTED, "not a hand-off fusion");
    }
    if (!quant_src(dt) || !quant_src(in_dt))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "the fused kernel reads and writes float32 or bfloat16 (here %s -> %s)",
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

/* The consumer Linear, its operand, and that operand's region. */
static teexec_status *target(const handoff_priv *p, const tx_cuda_linear **lo,
                             const tx_cuda_lin_operand **op, void **region)
{
    const tx_cuda_linear *l = tx_cuda_te_node_priv(p->consumer);
    void *state = *p->consumer_state;
    bool fwd = p->fusion != TX_FUSION_BWD_BIAS_QUANTIZE;
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
    tx_cuda_lin_handoff t;
    TX_TRY(tx_cuda_lin_handoff_begin(o, region, &t, env->stream));
    tx_cuda_handoff_q q = hq_of(&t);
    teexec_status *st;
    if (p->fusion == TX_FUSION_FWD_NORM_QUANTIZE) {
        bool rms = f->op == TX_TE_RMS_NORM;
        if (f->n_params < (rms ? 1 : 2))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: missing norm parameters", p->label);
        const tx_tensor *w = f->params[0], *b = rms ? NULL : f->params[1];
        tx_tensor *mu = NULL, *rs = NULL;
        if (f->training && f->aux && f->n_aux > 0) {
            if (rms) rs = f->aux[0];
            else {
                mu = f->aux[0];
                rs = f->n_aux > 1 ? f->aux[1] : NULL;
            }
        }
        size_t rows, h;
        tx_cuda_basic_rows(x, w->rank, &rows, &h);
        if (h != o->cols || (mu && mu->numel != rows) || (rs && rs->numel != rows))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: shapes changed since prepare",
                            p->label);
        tx_cuda_norm_fwd k = {.rms = rms, .rows = rows, .h = h,
                              .eps = (float)f->attrs[TX_TE_A_NORM_EPS].f,
                              .zero_centered_gamma = f->attrs[TX_TE_A_NORM_ZCG].i != 0,
                              .x = x->data, .x_dtype = x->dtype, .gamma = w->data,
                              .beta = b ? b->data : NULL, .w_dtype = w->dtype, .y = y->data,
                              .y_dtype = y->dtype, .mu = mu ? mu->data : NULL,
                              .rsigma = rs ? rs->data : NULL};
        st = tx_cuda_handoff_norm_forward(&k, &q, env->stream);
    } else {
        st = tx_cuda_handoff_act_forward(p->act, o->rows, o->cols, x->data, x->dtype, y->data,
                                         y->dtype, &q, env->stream);
    }
    if (!st) st = tx_cuda_lin_handoff_finish(o, y->data, y->dtype, region, env->stream);
    return st ? tx_status_prefix(st, "%s", p->label) : NULL;
}

static teexec_status *handoff_bwd(void *priv, const tx_te_bwd_args *const *a, void *const *states,
                                  void *scratch, const tx_cuda_env *env)
{
    (void)states;
    handoff_priv *p = priv;
    const tx_te_bwd_args *b = a[0];
    const tx_cuda_linear *l = NULL;
    const tx_cuda_lin_operand *o = NULL;
    void *region = NULL;
    TX_TRY(target(p, &l, &o, &region));
    const tx_tensor *dy = b->grad_output;
    tx_tensor *dx = b->grad_input, *db = b->n_grad_params > 0 ? b->grad_params[0] : NULL;
    if (!dy || dy->numel != o->rows * o->cols || (dx && (dx->numel != dy->numel ||
                                                         dx->dtype != dy->dtype)) ||
        (db && db->numel != o->cols))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the grads do not fit %s's grad_output",
                        p->label, l->name);
    if (db && !scratch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: needs scratch", p->label);
    tx_cuda_lin_handoff t;
    TX_TRY(tx_cuda_lin_handoff_begin(o, region, &t, env->stream));
    tx_cuda_handoff_q q = hq_of(&t);
    teexec_status *st = tx_cuda_handoff_bias_backward(
        dy->data, dy->dtype, o->rows, o->cols, dx ? dx->data : NULL, db ? db->data : NULL,
        db ? db->dtype : TEEXEC_DTYPE_FLOAT, scratch, &q, env->stream);
    if (!st) st = tx_cuda_lin_handoff_finish(o, dy->data, dy->dtype, region, env->stream);
    return st ? tx_status_prefix(st, "%s", p->label) : NULL;
}

static const tx_cuda_fused_impl fwd_impl = {handoff_fwd, NULL, handoff_free};
static const tx_cuda_fused_impl bwd_impl = {NULL, handoff_bwd, handoff_free};

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
    if (fusion != TX_FUSION_FWD_NORM_QUANTIZE && fusion != TX_FUSION_FWD_ACT_QUANTIZE &&
        fusion != TX_FUSION_BWD_BIAS_QUANTIZE)
        return NULL;
    const tx_cuda_te_desc *d = n == 1 && descs ? descs[0] : NULL;
    const char *name = d && d->name ? d->name : "?";
    bool bwd_fusion = fusion == TX_FUSION_BWD_BIAS_QUANTIZE;
    if (!d || backward != bwd_fusion || !d->output)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s over op %s: the CUDA kernel covers one %s op",
                        fusion_name(fusion), name, bwd_fusion ? "backward" : "forward");
    if (!d->handoff_to || !d->handoff_state || tx_cuda_te_node_op(d->handoff_to) != TX_TE_LINEAR)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s over op %s: the executor found no consumer Linear for the hand-off",
                        fusion_name(fusion), name);
    const tx_cuda_linear *l = tx_cuda_te_node_priv(d->handoff_to);
    const tx_cuda_lin_operand *o = bwd_fusion ? &l->ody : &l->ox;
    const tx_tensor *qt = d->output; /* the norm's / act's output; the Bias's grad has its dtype */
    size_t cols = qt->rank > 0 ? (size_t)qt->dims[qt->rank - 1] : 0;
    teexec_dtype in_dt = d->input ? d->input->dtype : qt->dtype;
    teexec_status *why = tx_cuda_handoff_accepts(fusion, d->op, d->attrs, in_dt, qt->dtype, cols,
                                                 &o->q);
    if (!why && !o->q.handed_off)
        why = tx_error(TEEXEC_ERR_UNSUPPORTED,
                       "%s was prepared to quantize this operand itself", l->name);
    if (!why && (qt->numel != o->rows * o->cols || cols != o->cols))
        why = tx_error(TEEXEC_ERR_UNSUPPORTED, "the tensor does not have %s's operand shape",
                       l->name);
    if (why) {
        teexec_status *st = tx_error(TEEXEC_ERR_UNSUPPORTED, "%s over op %s: %s",
                                     fusion_name(fusion), name, teexec_status_message(why));
        teexec_status_destroy(why);
        return st;
    }
    handoff_priv *p = calloc(1, sizeof *p);
    if (!p) return tx_oom();
    p->fusion = fusion;
    snprintf(p->label, sizeof p->label, "%s over op %s (into %s)", fusion_name(fusion), name,
             l->name);
    p->consumer = d->handoff_to;
    p->consumer_state = d->handoff_state;
    if (fusion == TX_FUSION_FWD_ACT_QUANTIZE) (void)act_of(d->op, d->attrs, &p->act);
    if (bwd_fusion) {
        size_t ws;
        if (!tx_mul_size(tx_cuda_handoff_bias_workspace_floats(o->rows, o->cols), sizeof(float),
                         &ws)) {
            teexec_status *st = tx_error(TEEXEC_ERR_LIMIT, "%s: workspace size overflows", p->label);
            free(p);
            return st;
        }
        *scratch_bytes = ws;
    }
    *impl = bwd_fusion ? &bwd_impl : &fwd_impl;
    *priv = p;
    return NULL;
}
