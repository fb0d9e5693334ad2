/*
 * te_impl.h - the CPU forward_impl / backward_impl of every TE basic op,
 * one pair per op family file (te_linear.c, te_norm.c, te_activation.c,
 * te_dropout.c, te_misc.c, te_grouped_linear.c, te_attention.c, te_rope.c,
 * te_embedding.c). Reached through tx_te_cpu_impl_of (te_args.h), which
 * maps op ids onto these; the activation, identity-like and communication
 * families serve several op ids and dispatch on args->op.
 *
 * Contract, ownership and thread-safety: kernels/cpu/te_args.h.
 */
#ifndef TEEXEC_KERNELS_CPU_TE_IMPL_H
#define TEEXEC_KERNELS_CPU_TE_IMPL_H

#include "kernels/cpu/te_args.h"

#define TX_TE_DECLARE(name)                                                 \
    teexec_status *tx_te_cpu_##name##_fwd(const tx_te_fwd_args *a) TX_NODISCARD; \
    teexec_status *tx_te_cpu_##name##_bwd(const tx_te_bwd_args *a) TX_NODISCARD

TX_TE_DECLARE(linear);
TX_TE_DECLARE(bias);
TX_TE_DECLARE(layer_norm);
TX_TE_DECLARE(rms_norm);
TX_TE_DECLARE(l2_normalization);
TX_TE_DECLARE(activation);      /* GELU .. ScaledSReLU */
TX_TE_DECLARE(dropout);
TX_TE_DECLARE(passthrough);     /* Quantize (no recipe), Identity */
TX_TE_DECLARE(collective);      /* AllGather, AllReduce, ReduceScatter (te_collective.h) */
TX_TE_DECLARE(reshape);
TX_TE_DECLARE(constant_scale);
TX_TE_DECLARE(add_extra_input);
TX_TE_DECLARE(make_extra_output);
TX_TE_DECLARE(grouped_linear);
TX_TE_DECLARE(attention);
TX_TE_DECLARE(rope);
TX_TE_DECLARE(embedding);

#undef TX_TE_DECLARE

/* f(x) and f'(x) of the plain activation function of `op` (its schema's
 * act fn, GELU by its approximate attribute; attrs may be NULL for the
 * defaults), in float: the very function the activation kernels apply, so
 * a fused path that calls it computes the same bits. False (nothing
 * written) for an op that is not an activation or has a cap (ClampedSwiGLU,
 * the SiTU family). Pure; thread-safe. */
bool tx_te_act_eval_f32(tx_te_op_id op, const tx_te_attr_value *attrs, float x, float *f,
                        float *df);
/* y[j] = f(x[j]) for j < n (y may be x), f as tx_te_act_eval_f32 gives it,
 * bit for bit, without f' and without a call per element: the forward's
 * row loop. False (nothing written) where tx_te_act_eval_f32 is false. */
bool tx_te_act_row_f32(tx_te_op_id op, const tx_te_attr_value *attrs, const float *x, float *y,
                       int64_t n);

#endif
