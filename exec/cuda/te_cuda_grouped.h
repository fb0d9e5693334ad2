/*
 * te_cuda_grouped.h - internal: te.ops GroupedLinear on the GPU, the
 * te_cuda.h op-family table (prepare / forward / backward / free) that
 * tx_cuda_te_linear_impl hands out for TX_TE_GROUPED_LINEAR. How it runs
 * (device-side split sizes, recipes, state and scratch layout) is described
 * at the top of te_cuda_grouped.c.
 *
 * Ownership: the table is static; the node's private data is freed by its
 * free_priv. Thread-safety: the table is read-only; a node is used by one
 * host thread at a time, as every te_cuda.h node.
 */
#ifndef TEEXEC_EXEC_CUDA_TE_CUDA_GROUPED_H
#define TEEXEC_EXEC_CUDA_TE_CUDA_GROUPED_H

#include "exec/cuda/te_cuda.h"

const tx_cuda_te_impl *tx_cuda_te_grouped_impl(void);

#endif
