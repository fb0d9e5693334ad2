/*
 * te_cuda_attention.h - what the CUDA te.ops DotProductAttention node
 * (te_cuda_attention.c, reached through tx_cuda_te_attention_impl of
 * te_cuda.h) chose to run, for `teexec plan --explain` and the GPU tests.
 *
 * Prepare picks, per direction, cuDNN's fused attention (kernels/cuda/
 * sdpa_cudnn.h) when the descriptor has a cuDNN handle that accepts the
 * shapes, dtype and mask, and otherwise the plain CUDA kernels of
 * kernels/cuda/attention_fallback.h (FP32, explicit bool / float masks,
 * head dims cuDNN refuses, no cuDNN). In deterministic mode the backward
 * always runs the fallback, because cuDNN's backward accumulates dQ with
 * float atomics; the forward stays on cuDNN, whose softmax_lse has the
 * meaning the fallback backward reads (natural-log, FP32 [b, h, s_q]).
 *
 * Ownership: the returned strings belong to the node's private data and
 * live until the node is freed. Thread-safety: read-only after prepare.
 */
#ifndef TEEXEC_EXEC_CUDA_TE_CUDA_ATTENTION_H
#define TEEXEC_EXEC_CUDA_TE_CUDA_ATTENTION_H

#include <stdbool.h>

/* One sentence naming the forward and backward implementations and, for
 * each fallback, why cuDNN was not used. `priv` is the private data of a
 * prepared DotProductAttention node (tx_cuda_te_node_priv); NULL gives "". */
const char *tx_cuda_te_attention_choice(const void *priv);

/* Whether the forward / backward run cuDNN (false: the CUDA fallback). */
bool tx_cuda_te_attention_uses_cudnn(const void *priv, bool backward);

#endif
