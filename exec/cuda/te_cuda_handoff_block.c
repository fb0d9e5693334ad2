/* te_cuda_handoff_block.c - the quantized hand-offs into an fp8-block
 * operand (te_cuda_handoff_block.h) over kernels/cuda/handoff_block.h:
 *
 *  - ForwardNormQuantize (LayerNorm|RMSNorm before a Linear): the norm
 *    writes y and, from each row held in registers, x's rowwise 1x128
 *    bytes and scales; the columnwise copy would be a second pass over y.
 *  - ForwardActivationQuantize (GELU tanh/erf, ReLU, SiLU before a
 *    Linear): one pass over 128x128 tiles writes y, the rowwise and the
 *    columnwise operand.
 *  - BackwardBiasQuantize (a Bias after a Linear): one pass over dy's
 *    tiles writes dx = dy, dbias's 64-row partial sums and both usages of
 *    the Linear's grad_output; a small pass adds the partials.
 * Unlike FP8 per-tensor there is no global amax to wait for, so nothing
 * runs before the producer and nothing but the norm's columnwise pass
 * after it. All three write the same bytes as the unfused path (tests/gpu/
 * test_gpu_handoff_block.c), but the executor takes only those measured
 * faster on the H200: the Bias backward, and the norm when the Linear needs
 * no columnwise copy (inference, frozen weights). The activation and the
 * training norm decline with the numbers (tx_cuda_handoff_block_accepts),
 * and the Linear quantizes its own input; the activation kernel stays for
 * a faster version to replace.
 *
 * Ownership: the private data (malloc'd) is freed by free_priv.
 * Thread-safety: one host thread per fused kernel. */
#include "exec/cuda/te_cuda_handoff_block.h"

#include "base/checked.h"
#include "exec/cuda/te_cuda_basic.h"
#include "kernels/cuda/handoff_block.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct block_priv {
    tx_fusion_id fusion;
    char label[200];
    tx_cuda_te_node *consumer;
    void *const *consumer_state;
    tx_cuda_act act; /* FWD_ACT_QUANTIZE */
} block_priv;

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

static bool hp_dtype(teexec_dtype t) { return t == TEEXEC_DTYPE_FLOAT || t == TEEXEC_DTYPE_BFLOAT16; }

teexec_status *tx_cuda_handoff_block_accepts(tx_fusion_id fusion, tx_te_op_id op,
                                             const tx_te_attr_value *attrs, teexec_dtype in_dt,
                                             teexec_dtype dt, size_t cols,
                                             const tx_cuda_operand_q *q)
{
    tx_cuda_act act;
    switch (fusion) {
    case TX_FUSION_FWD_NORM_QUANTIZE:
        if (!tx_te_op_is(op, TX_TE_CLASS_NORM))
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "the producer is not LayerNorm or RMSNorm");
        if (cols > TX_HANDOFF_BLOCK_NORM_MAX_H)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "the fused fp8-block norm kernel keeps a row in registers: hidden "
                            "size %zu > %zu", cols, (size_t)TX_HANDOFF_BLOCK_NORM_MAX_H);
        break;
    case TX_FUSION_FWD_ACT_QUANTIZE:
        if (!act_of(op, attrs, &act))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "the fused fp8-block activation kernel covers GELU, ReLU and SiLU only");
        break;
    case TX_FUSION_BWD_BIAS_QUANTIZE:
        if (op != TX_TE_BIAS) return tx_error(TEEXEC_ERR_UNSUPPORTED, "the producer is not a Bias");
        break;
    case TX_FUSION_BWD_ACT_BIAS:
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "fp8-block: the fused dact + dbias + quantize kernel writes FP8 per-tensor "
                        "operands only");
    default: return tx_error(TEEXEC_ERR_UNSUPPORTED, "not a hand-off fusion");
    }
    if (!q || !q->on || q->cfg.kind != TX_QKIND_FP8_BLOCK)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "the consumer's operand is not fp8-block");
    if (q->cfg.block_2d)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "fp8-block with 128x128 tiles: a tile spans 128 rows, which a row-wise "
                        "producer does not see together; the Linear quantizes it itself");
    if (q->cfg.fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && q->cfg.fmt != TEEXEC_DTYPE_FLOAT8E5M2)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "fp8-block format %s is not E4M3 or E5M2",
                        teexec_dtype_name(q->cfg.fmt));
    if (!hp_dtype(dt) || !hp_dtype(in_dt))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "the fused fp8-block kernel reads and writes float32 or bfloat16 (here %s "
                        "-> %s)", teexec_dtype_name(in_dt), teexec_dtype_name(dt));
    if (cols == 0 || cols % 8)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "fp8-block hand-offs need a last dim that is a multiple of 8, got %zu", cols);
    /* Chosen by measurement (H200, bf16, bench/results/handoff_block_2026-12-01.md): the
     * fused kernels give the same bytes, but only the Bias backward and the norm without
     * the columnwise copy were faster than the op followed by the Linear's quantizer. */
    if (fusion == TX_FUSION_FWD_ACT_QUANTIZE)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "fp8-block: the fused activation + 1x128 quantize kernel measured slower "
                        "than the activation followed by the Linear's own quantizer on the H200 "
                        "(GELU 8192x16384 bf16: 0.396 against 0.371 ms with the columnwise copy, "
                        "0.296 against 0.264 ms without); the Linear quantizes its input");
    if (fusion == TX_FUSION_FWD_NORM_QUANTIZE &&
        (q->cfg.usage == 0 || (q->cfg.usage & TX_QUSAGE_COLUMNWISE)))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "fp8-block with the columnwise (wgrad) copy: the norm's row pass plus a "
                        "columnwise pass measured slower than the norm followed by the Linear's "
                        "own quantizer on the H200 (8192x4096 bf16: 0.141 against 0.123 ms); "
                        "the Linear quantizes its input");
    return NULL;
}

static void block_free(void *priv) { free(priv); }

/* The consumer's operand and the block quantizer's view of its region. */
static teexec_status *target(const block_priv *p, const tx_cuda_linear **lo,
                             const tx_cuda_lin_operand **op, tx_cuda_block_args *dest)
{
    const tx_cuda_linear *l = tx_cuda_te_node_priv(p->consumer);
    void *state = *p->consumer_state; /* forward: its state; backward: its dy region */
    const bool fwd = p->fusion != TX_FUSION_BWD_BIAS_QUANTIZE;
    const size_t off = fwd ? l->st_x : l->st_dy;
    *op = fwd ? &l->ox : &l->ody;
    if (!state || off == SIZE_MAX || !(*op)->q.handed_off ||
        (*op)->q.cfg.kind != TX_QKIND_FP8_BLOCK)
        return tx_error(TEEXEC_ERR_INTERNAL, "%s: %s has no fp8-block hand-off region", p->label,
                        l->name);
    *lo = l;
    tx_cuda_lin_block_dest(*op, (char *)state + off, dest);
    return NULL;
}

static teexec_status *block_fwd(void *priv, const tx_te_fwd_args *const *a, void *const *states,
                                void *scratch, const tx_cuda_env *env)
{
    (void)states;
    (void)scratch;
    block_priv *p = priv;
    const tx_te_fwd_args *f = a[0];
    const tx_cuda_linear *l = NULL;
    const tx_cuda_lin_operand *o = NULL;
    tx_cuda_block_args dest;
    TX_TRY(target(p, &l, &o, &dest));
    const tx_tensor *x = f->input;
    tx_tensor *y = f->output;
    if (!x || !y || y->numel != o->rows * o->cols || y->dtype != l->x_dt)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the output does not fit %s's input",
                        p->label, l->name);
    teexec_status *st;
    if (p->fusion == TX_FUSION_FWD_NORM_QUANTIZE) {
        tx_cuda_norm_fwd k;
        TX_TRY(tx_cuda_basic_norm_fwd_args(f, p->label, &k));
        if (k.h != o->cols || k.rows != o->rows)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: shapes changed since prepare",
                            p->label);
        st = tx_cuda_handoff_block_norm_forward(&k, &dest, env->stream);
    } else {
        if (x->numel != y->numel)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: input and output sizes differ",
                            p->label);
        st = tx_cuda_handoff_block_act_forward(p->act, o->rows, o->cols, x->data, x->dtype,
                                               y->data, y->dtype, &dest, TX_HANDOFF_BLOCK_TILED,
                                               env->stream);
    }
    return st ? tx_status_prefix(st, "%s", p->label) : NULL;
}

static teexec_status *block_bwd(void *priv, const tx_te_bwd_args *const *a, void *const *states,
                                void *scratch, const tx_cuda_env *env)
{
    (void)states;
    block_priv *p = priv;
    const tx_te_bwd_args *b = a[0];
    const tx_cuda_linear *l = NULL;
    const tx_cuda_lin_operand *o = NULL;
    tx_cuda_block_args dest;
    TX_TRY(target(p, &l, &o, &dest));
    const tx_tensor *dy = b->grad_output;
    tx_tensor *dx = b->grad_input, *db = b->n_grad_params > 0 ? b->grad_params[0] : NULL;
    if (!dy || dy->numel != o->rows * o->cols ||
        (dx && (dx->numel != dy->numel || dx->dtype != dy->dtype)) || (db && db->numel != o->cols))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the grads do not fit %s's grad_output",
                        p->label, l->name);
    if (db && !scratch) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: needs scratch", p->label);
    teexec_status *st = tx_cuda_handoff_block_bias_backward(
        dy->data, dy->dtype, o->rows, o->cols, dx ? dx->data : NULL, db ? db->data : NULL,
        db ? db->dtype : TEEXEC_DTYPE_FLOAT, scratch, &dest, env->stream);
    return st ? tx_status_prefix(st, "%s", p->label) : NULL;
}

static const tx_cuda_fused_impl fwd_impl = {block_fwd, NULL, block_free};
static const tx_cuda_fused_impl bwd_impl = {NULL, block_bwd, block_free};

teexec_status *tx_cuda_fused_handoff_block_prepare(tx_fusion_id fusion, const tx_cuda_te_desc *d,
                                                   const tx_cuda_linear *l,
                                                   const tx_cuda_lin_operand *o,
                                                   const tx_cuda_fused_impl **impl, void **priv,
                                                   size_t *scratch_bytes)
{
    *impl = NULL;
    *priv = NULL;
    *scratch_bytes = 0;
    const tx_fusion_info *fi = tx_fusion_info_of(fusion);
    const char *fname = fi ? fi->name : "fusion", *name = d && d->name ? d->name : "?";
    const bool bwd = fusion == TX_FUSION_BWD_BIAS_QUANTIZE;
    if (!d || !l || !o || !o->q.handed_off || o->q.cfg.kind != TX_QKIND_FP8_BLOCK ||
        !d->handoff_to || !d->handoff_state)
        return tx_error(TEEXEC_ERR_INTERNAL, "%s over op %s: no fp8-block operand to hand off to",
                        fname, name);
    /* the tiles' columnwise copy stores 16 rows at a time */
    if ((o->usage & TX_QUSAGE_COLUMNWISE) && o->rows % 16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s over op %s: the columnwise fp8-block copy needs rows %% 16 == 0, got %zu",
                        fname, name, o->rows);
    size_t ws = 0;
    if (bwd && !tx_mul_size(tx_cuda_handoff_block_bias_workspace_floats(o->rows, o->cols),
                            sizeof(float), &ws))
        return tx_error(TEEXEC_ERR_LIMIT, "%s over op %s: workspace size overflows", fname, name);
    block_priv *p = calloc(1, sizeof *p);
    if (!p) return tx_oom();
    p->fusion = fusion;
    snprintf(p->label, sizeof p->label, "%s over op %s (into %s, fp8-block)", fname, name, l->name);
    p->consumer = d->handoff_to;
    p->consumer_state = d->handoff_state;
    if (fusion == TX_FUSION_FWD_ACT_QUANTIZE && !act_of(d->op, d->attrs, &p->act)) {
        free(p);
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s over op %s: not GELU, ReLU or SiLU", fname,
                        name);
    }
    *scratch_bytes = ws;
    *impl = bwd ? &bwd_impl : &fwd_impl;
    *priv = p;
    return NULL;
}
