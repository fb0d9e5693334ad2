/* cpu_ops_nn.c - attribute handling of Conv, GatherND, RMSNormalization and
 * Attention for the CPU dispatch table (exec/cpu_ops.c); the math is in
 * kernels/cpu (conv.c, gather_nd.c, rmsnorm.c, attention.c). */
#include "exec/cpu_ops.h"

#include "import/shape_infer.h"
#include "kernels/cpu/ops.h"

#include <string.h>

#define ERR(expr) tx_cpu_op_error(c, (expr))

static const tx_tensor *IN(const tx_op_call *c, size_t i)
{
    return i < c->n_in ? c->in[i] : NULL;
}
static tx_tensor *OUT(const tx_op_call *c, size_t i)
{
    return i < c->n_out ? c->out[i] : NULL;
}

static teexec_status *need(const tx_op_call *c, size_t n_in)
{
    for (size_t i = 0; i < n_in; i++)
        if (!IN(c, i)) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "input %zu is missing", i));
    if (!OUT(c, 0)) return ERR(tx_error(TEEXEC_ERR_BAD_MODEL, "output 0 is missing"));
    return NULL;
}

teexec_status *tx_cpu_op_conv(const tx_op_call *c)
{
    TX_TRY(need(c, 2));
    tx_shape xs = tx_shape_of(IN(c, 0)), ws = tx_shape_of(IN(c, 1));
    tx_conv_geom g;
    TX_TRY(tx_conv_geometry(c->node, &xs, &ws, &g));
    return ERR(tx_cpu_conv(IN(c, 0), IN(c, 1), IN(c, 2), g.group, g.strides, g.dilations, g.pads,
                           OUT(c, 0)));
}

teexec_status *tx_cpu_op_gather_nd(const tx_op_call *c)
{
    TX_TRY(need(c, 2));
    int64_t bd = 0;
    if (c->node->opset >= 12) TX_TRY(tx_ir_attr_int(c->node, "batch_dims", 0, &bd));
    return ERR(tx_cpu_gather_nd(IN(c, 0), IN(c, 1), bd, OUT(c, 0)));
}

teexec_status *tx_cpu_op_rms_norm(const tx_op_call *c)
{
    TX_TRY(need(c, 2));
    int64_t axis, stash;
    float eps;
    TX_TRY(tx_ir_attr_int(c->node, "axis", -1, &axis));
    TX_TRY(tx_ir_attr_int(c->node, "stash_type", 1, &stash));
    TX_TRY(tx_ir_attr_float(c->node, "epsilon", 1e-5f, &eps));
    return ERR(tx_cpu_rms_norm(IN(c, 0), IN(c, 1), axis, eps, (int)stash, OUT(c, 0)));
}

teexec_status *tx_cpu_attention_params_of(const tx_ir_node *n, tx_attention_params *p)
{
    memset(p, 0, sizeof(*p));
    int64_t causal, mode;
    TX_TRY(tx_ir_attr_int(n, "q_num_heads", 0, &p->q_num_heads));
    TX_TRY(tx_ir_attr_int(n, "kv_num_heads", 0, &p->kv_num_heads));
    TX_TRY(tx_ir_attr_int(n, "is_causal", 0, &causal));
    TX_TRY(tx_ir_attr_int(n, "qk_matmul_output_mode", 0, &mode));
    TX_TRY(tx_ir_attr_float(n, "softcap", 0.0f, &p->softcap));
    p->is_causal = causal != 0;
    p->has_scale = tx_ir_attr_find(n, "scale") != NULL;
    TX_TRY(tx_ir_attr_float(n, "scale", 0.0f, &p->scale));
    if (mode != 0 && n->n_outputs > 3 && n->outputs[3] >= 0)
        return tx_status_with_node(
            tx_error(
                TEEXEC_ERR_UNSUPPORTED,
                "node \"%s\" (Attention): qk_matmul_output_mode %lld is not supported (only 0)",
                n->label, (long long)mode),
            n->label);
    return NULL;
}

teexec_status *tx_cpu_op_attention(const tx_op_call *c)
{
    TX_TRY(need(c, 3));
    if (IN(c, 6))
        return ERR(tx_error(TEEXEC_ERR_UNSUPPORTED, "the nonpad_kv_seqlen input is not supported"));
    tx_attention_params p;
    TX_TRY(tx_cpu_attention_params_of(c->node, &p));
    tx_attention_inputs in = {IN(c, 0), IN(c, 1), IN(c, 2), IN(c, 3), IN(c, 4), IN(c, 5)};
    tx_attention_outputs out = {OUT(c, 0), OUT(c, 1), OUT(c, 2), OUT(c, 3)};
    return ERR(tx_cpu_attention(&p, &in, &out));
}
