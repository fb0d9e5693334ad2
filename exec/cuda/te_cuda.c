/* te_cuda.c - dispatch of te.ops nodes and fused kernels to the CUDA op
 * families (te_cuda.h). */
#include "exec/cuda/te_cuda.h"

#include <stdlib.h>

struct tx_cuda_te_node {
    tx_te_op_id op;
    const tx_cuda_te_impl *impl;
    void *priv;
    size_t state_bytes, scratch_bytes;
};

struct tx_cuda_fused {
    const tx_cuda_fused_impl *impl;
    void *priv;
    size_t scratch_bytes;
};

static const tx_cuda_te_impl *impl_of(tx_te_op_id op)
{
    const tx_cuda_te_impl *i = tx_cuda_te_basic_impl(op);
    if (!i) i = tx_cuda_te_linear_impl(op);
    if (!i) i = tx_cuda_te_attention_impl(op);
    return i;
}

teexec_status *tx_cuda_te_prepare(const tx_cuda_te_desc *d, tx_cuda_te_node **out)
{
    *out = NULL;
    const tx_te_op_schema *s = tx_te_schema(d->op);
    const tx_cuda_te_impl *impl = s ? impl_of(d->op) : NULL;
    if (!impl)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "op %s (%s): no CUDA kernel",
                        d->name ? d->name : "?", s ? s->name : "?");
    tx_cuda_te_node *n = calloc(1, sizeof(*n));
    if (!n) return tx_oom();
    n->op = d->op;
    n->impl = impl;
    teexec_status *st = impl->prepare(d, &n->priv, &n->state_bytes, &n->scratch_bytes);
    if (st) {
        free(n);
        return st;
    }
    *out = n;
    return NULL;
}

size_t tx_cuda_te_state_bytes(const tx_cuda_te_node *n) { return n->state_bytes; }
size_t tx_cuda_te_scratch_bytes(const tx_cuda_te_node *n) { return n->scratch_bytes; }
const tx_cuda_te_impl *tx_cuda_te_node_impl(const tx_cuda_te_node *n) { return n->impl; }
void *tx_cuda_te_node_priv(const tx_cuda_te_node *n) { return n->priv; }
tx_te_op_id tx_cuda_te_node_op(const tx_cuda_te_node *n) { return n->op; }

teexec_status *tx_cuda_te_forward(tx_cuda_te_node *n, const tx_te_fwd_args *a, void *state,
                                  void *scratch, const tx_cuda_env *env)
{
    return n->impl->forward(n->priv, a, state, scratch, env);
}

teexec_status *tx_cuda_te_backward(tx_cuda_te_node *n, const tx_te_bwd_args *a, void *state,
                                   void *scratch, const tx_cuda_env *env)
{
    return n->impl->backward(n->priv, a, state, scratch, env);
}

void tx_cuda_te_node_free(tx_cuda_te_node *n)
{
    if (!n) return;
    if (n->impl->free_priv) n->impl->free_priv(n->priv);
    free(n);
}

teexec_status *tx_cuda_fused_prepare(tx_fusion_id fusion, bool backward,
                                     const tx_cuda_te_desc *const *descs,
                                     tx_cuda_te_node *const *nodes, int n, tx_cuda_fused **out)
{
    *out = NULL;
    static const tx_cuda_fused_prepare_fn families[] = {tx_cuda_fused_linear_prepare,
                                                        tx_cuda_fused_handoff_prepare,
                                                        tx_cuda_fused_basic_prepare};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        const tx_cuda_fused_impl *impl = NULL;
        void *priv = NULL;
        size_t scratch = 0;
        TX_TRY(families[i](fusion, backward, descs, nodes, n, &impl, &priv, &scratch));
        if (!impl) continue;
        tx_cuda_fused *f = calloc(1, sizeof(*f));
        if (!f) {
            if (impl->free_priv) impl->free_priv(priv);
            return tx_oom();
        }
        *f = (tx_cuda_fused){impl, priv, scratch};
        *out = f;
        return NULL;
    }
    const tx_fusion_info *info = tx_fusion_info_of(fusion);
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: no CUDA kernel yet", info ? info->name : "fusion");
}

size_t tx_cuda_fused_scratch_bytes(const tx_cuda_fused *f) { return f->scratch_bytes; }

teexec_status *tx_cuda_fused_forward(tx_cuda_fused *f, const tx_te_fwd_args *const *a,
                                     void *const *states, void *scratch, const tx_cuda_env *env)
{
    if (!f->impl->forward)
        return tx_error(TEEXEC_ERR_INTERNAL, "fused kernel has no forward");
    return f->impl->forward(f->priv, a, states, scratch, env);
}

teexec_status *tx_cuda_fused_backward(tx_cuda_fused *f, const tx_te_bwd_args *const *a,
                                      void *const *states, void *scratch, const tx_cuda_env *env)
{
    if (!f->impl->backward)
        return tx_error(TEEXEC_ERR_INTERNAL, "fused kernel has no backward");
    return f->impl->backward(f->priv, a, states, scratch, env);
}

void tx_cuda_fused_free(tx_cuda_fused *f)
{
    if (!f) return;
    if (f->impl->free_priv) f->impl->free_priv(f->priv);
    free(f);
}
