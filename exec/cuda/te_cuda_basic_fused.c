/* te_cuda_basic_fused.c - the planner's fusions over basic ops on the GPU
 * (tx_cuda_fused_basic_prepare, te_cuda.h):
 *
 *  - BackwardActivationBias (Bias, GELU|QGELU|ReLU|SReLU|SiLU): dact and
 *    dbias in one kernel chain (act.h's fused dact+dbias where it has the
 *    activation, else act_ext.h's dact followed by the column sums), dbias
 *    summed from dx as stored, exactly what the unfused Bias backward reads.
 *    The planner also asks this fusion to quantize the grad for the Linear
 *    before: where that Linear's grad_output is handed off (FP8 per-tensor),
 *    te_cuda_handoff.c, consulted first, runs dact + dbias + the quantize;
 *    what reaches this file leaves dx in high precision, and the Linear
 *    quantizes its grad_output itself (same bytes, one more pass).
 *  - BackwardDactDbias (Bias, an elementwise activation): the same kernel
 *    chain, planned where no quantized grad is handed over (recipe none,
 *    or the recipes BackwardActivationBias declines).
 *  - BackwardAddNorm (MakeExtraOutput, LayerNorm|RMSNorm): the norm's
 *    backward adding the fork's grad into dx in the same pass (FP32 sum,
 *    one rounding). The unfused path rounds the norm's dx to bf16/fp16
 *    before adding, so it differs from this (more accurate) result by up
 *    to half an ulp of the norm's dx, which shows where the sum cancels.
 *  - ForwardNormQuantize, ForwardActivationQuantize, BackwardBiasQuantize
 *    (and BackwardActivationBias's quantize) are the hand-off family's
 *    (te_cuda_handoff.c, consulted first); what it declines reaches this
 *    file, which answers UNSUPPORTED with the
 *    reason, and the executor runs the ops unfused.
 *
 * The arrays a[i] / descs[i] follow the ops of the fusion in forward order.
 * The intermediate grad between the two ops (the Bias's output grad, the
 * norm's input grad) is not written when the first op's dx is: nothing
 * outside the fusion reads it.
 *
 * Ownership: the private data (malloc'd) is freed by free_priv.
 * Thread-safety: one host thread per fused kernel. */
#include "exec/cuda/te_cuda.h"
#include "exec/cuda/te_cuda_basic.h"

#include "base/checked.h"
#include "kernels/cuda/act.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fused_priv {
    tx_fusion_id fusion;
    char label[200];
    tx_te_op_id act;                   /* BWD_ACT_BIAS */
    size_t dx_off, dx_bytes, ws_off;   /* BWD_ACT_BIAS scratch layout */
    void *norm_priv;                   /* BWD_ADD_NORM: a norm node of our own */
    const tx_cuda_te_impl *norm_impl;
} fused_priv;

static void fused_free(void *priv)
{
    fused_priv *p = priv;
    if (!p) return;
    if (p->norm_priv && p->norm_impl->free_priv) p->norm_impl->free_priv(p->norm_priv);
    free(p);
}

static const char *fusion_name(tx_fusion_id f)
{
    const tx_fusion_info *i = tx_fusion_info_of(f);
    return i ? i->name : "fusion";
}

static const char *node_name(const tx_cuda_te_desc *d) { return d && d->name ? d->name : "?"; }

static teexec_status *declined(tx_fusion_id f, const tx_cuda_te_desc *const *descs, int n,
                               const char *why)
{
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s over op %s..%s: %s", fusion_name(f),
                    n > 0 ? node_name(descs[0]) : "?", n > 0 ? node_name(descs[n - 1]) : "?", why);
}

/* ---- BackwardActivationBias ------------------------------------------------ */

static teexec_status *act_bias_bwd(void *priv, const tx_te_bwd_args *const *a,
                                   void *const *states, void *scratch, const tx_cuda_env *env)
{
    (void)states;
    fused_priv *p = priv;
    const tx_te_bwd_args *bias = a[0], *act = a[1];
    if (bias->op != TX_TE_BIAS || act->op != p->act)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the args are not Bias, activation",
                        p->label);
    if (act->n_saved < 1 || !act->saved[0])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the activation's saved x is missing",
                        p->label);
    const tx_tensor *x = act->saved[0], *dy = act->grad_output;
    tx_tensor *db = bias->n_grad_params > 0 ? bias->grad_params[0] : NULL;
    tx_tensor *dx = bias->grad_input ? bias->grad_input : act->grad_input, tmp;
    if (!dx && !db) return NULL;
    if (!scratch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: needs scratch", p->label);
    if (!dx) {
        /* only dbias is wanted: dact goes to scratch in the act's dx dtype */
        tmp = *x;
        tmp.data = (char *)scratch + p->dx_off;
        tmp.owns_data = false;
        if (tmp.nbytes > p->dx_bytes)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x grew since prepare", p->label);
        dx = &tmp;
    }
    if (dx->numel != x->numel || dy->numel != x->numel || (db && db->rank != 1))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: tensors do not fit", p->label);
    return tx_cuda_basic_act_backward(p->act, act->attrs, x, NULL, dy, dx, NULL, db,
                                      (float *)((char *)scratch + p->ws_off),
                                      env ? env->stream : NULL);
}

static const tx_cuda_fused_impl act_bias_impl = {NULL, act_bias_bwd, fused_free};

static teexec_status *prepare_act_bias(fused_priv *p, const tx_cuda_te_desc *const *descs, int n,
                                       size_t *scratch_bytes)
{
    const tx_cuda_te_desc *b = descs[0], *act = descs[1];
    if (n != 2 || b->op != TX_TE_BIAS)
        return declined(p->fusion, descs, n, "the CUDA kernel covers exactly Bias, activation");
    if (!tx_cuda_basic_act_plain(act->op))
        return declined(p->fusion, descs, n,
                        "the CUDA dact+dbias kernel takes GELU, QGELU, ReLU, SReLU or SiLU only");
    const tx_tensor *x = act->input;
    if (!x || !b->input || x->dtype != b->input->dtype ||
        (x->dtype != TEEXEC_DTYPE_FLOAT && x->dtype != TEEXEC_DTYPE_BFLOAT16 &&
         x->dtype != TEEXEC_DTYPE_FLOAT16) ||
        b->n_params < 1 || !b->params[0] || b->params[0]->dtype == TEEXEC_DTYPE_DOUBLE)
        return declined(p->fusion, descs, n,
                        "the fused kernel needs the Bias's input and the activation's input in one "
                        "float32, bfloat16 or float16 dtype");
    if (x->rank < 1) return declined(p->fusion, descs, n, "x has rank 0");
    size_t rows, cols, ws_bytes;
    tx_cuda_basic_rows(x, 1, &rows, &cols);
    if ((rows + 63) / 64 > 65535)
        return declined(p->fusion, descs, n, "too many rows for the bias-grad grid");
    size_t total = 0;
    p->act = act->op;
    p->dx_off = 0;
    p->dx_bytes = x->nbytes;
    if (!tx_cuda_basic_add_region(&total, x->nbytes)) goto overflow;
    p->ws_off = total;
    if (!tx_mul_size(tx_cuda_colsum_workspace_floats(rows, cols), sizeof(float), &ws_bytes) ||
        !tx_cuda_basic_add_region(&total, ws_bytes))
        goto overflow;
    *scratch_bytes = total;
    return NULL;
overflow:
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: scratch size overflows", p->label);
}

/* ---- BackwardAddNorm ---------------------------------------------------------- */

static teexec_status *add_norm_bwd(void *priv, const tx_te_bwd_args *const *a, void *const *states,
                                   void *scratch, const tx_cuda_env *env)
{
    (void)states;
    fused_priv *p = priv;
    const tx_te_bwd_args *fork = a[0], *norm = a[1];
    if (fork->op != TX_TE_MAKE_EXTRA_OUTPUT ||
        (norm->op != TX_TE_LAYER_NORM && norm->op != TX_TE_RMS_NORM))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: the args are not MakeExtraOutput, norm", p->label);
    const tx_tensor *de = fork->n_grad_extra_outputs > 0 ? fork->grad_extra_outputs[0] : NULL;
    return tx_cuda_basic_norm_backward_add(p->norm_priv, norm, fork->grad_input, de, scratch,
                                           env ? env->stream : NULL);
}

static const tx_cuda_fused_impl add_norm_impl = {NULL, add_norm_bwd, fused_free};

static teexec_status *prepare_add_norm(fused_priv *p, const tx_cuda_te_desc *const *descs, int n,
                                       size_t *scratch_bytes)
{
    const tx_cuda_te_desc *fork = descs[0], *norm = descs[1];
    if (n != 2 || fork->op != TX_TE_MAKE_EXTRA_OUTPUT ||
        (norm->op != TX_TE_LAYER_NORM && norm->op != TX_TE_RMS_NORM))
        return declined(p->fusion, descs, n,
                        "the CUDA kernel covers exactly MakeExtraOutput, LayerNorm|RMSNorm");
    const tx_tensor *xin = fork->input;
    const tx_tensor *xe = fork->n_extra_outputs > 0 ? fork->extra_outputs[0] : NULL;
    if (!xin || !xe || xe->dtype != xin->dtype)
        return declined(p->fusion, descs, n,
                        "the fork's extra output and its input differ in dtype; the norm kernel "
                        "adds a grad of dx's dtype only");
    const tx_cuda_te_impl *impl = tx_cuda_te_basic_impl(norm->op);
    size_t state = 0, scratch = 0;
    TX_TRY(impl->prepare(norm, &p->norm_priv, &state, &scratch));
    p->norm_impl = impl;
    *scratch_bytes = scratch;
    return NULL;
}

/* ---- dispatch ------------------------------------------------------------------ */

teexec_status *tx_cuda_fused_basic_prepare(tx_fusion_id fusion, bool backward,
                                           const tx_cuda_te_desc *const *descs,
                                           tx_cuda_te_node *const *nodes, int n,
                                           const tx_cuda_fused_impl **impl, void **priv,
                                           size_t *scratch_bytes)
{
    (void)nodes; /* the norm keeps a node of its own: no reach into te_cuda.c */
    *impl = NULL;
    *priv = NULL;
    *scratch_bytes = 0;
    switch (fusion) {
    case TX_FUSION_FWD_NORM_QUANTIZE:
        return declined(fusion, descs, n,
                        "no fused CUDA kernel yet: the norm writes its output and the next Linear "
                        "quantizes it with the same quantizer (same bytes, one more pass)");
    case TX_FUSION_FWD_ACT_QUANTIZE:
        return declined(fusion, descs, n,
                        "no fused CUDA kernel yet: the activation writes its output and the next "
                        "Linear quantizes it with the same quantizer (same bytes, one more pass)");
    case TX_FUSION_BWD_BIAS_QUANTIZE:
        return declined(fusion, descs, n,
                        "no fused CUDA kernel yet: the Bias backward writes dx and dbias and the "
                        "Linear before quantizes its grad_output itself (same bytes, one more pass)");
    case TX_FUSION_BWD_ACT_BIAS:
    case TX_FUSION_BWD_DACT_DBIAS:
    case TX_FUSION_BWD_ADD_NORM: break;
    default: return NULL; /* not this family's */
    }
    if (!backward) return declined(fusion, descs, n, "a backward fusion was asked for in forward");
    if (n != 2 || !descs || !descs[0] || !descs[1])
        return declined(fusion, descs, n, "the CUDA kernel covers exactly two ops");
    fused_priv *p = calloc(1, sizeof(*p));
    if (!p) return tx_oom();
    p->fusion = fusion;
    snprintf(p->label, sizeof p->label, "%s over op %s..%s", fusion_name(fusion),
             node_name(descs[0]), node_name(descs[1]));
    const bool act_bias = fusion != TX_FUSION_BWD_ADD_NORM;
    teexec_status *st = act_bias ? prepare_act_bias(p, descs, n, scratch_bytes)
                                 : prepare_add_norm(p, descs, n, scratch_bytes);
    if (st) {
        fused_free(p);
        *scratch_bytes = 0;
        return st;
    }
    *impl = act_bias ? &act_bias_impl : &add_norm_impl;
    *priv = p;
    return NULL;
}
