/*
 * chain_from_model.h - a GPU chain (cuda_chain.h) from a lowered model whose
 * main graph is one fuser group: te.ops nodes only, from the single graph
 * input to the single graph output, each node's main input the previous
 * node's main output (MakeExtraOutput / AddExtraInput carrying the
 * residual). What the MLP block of the benchmark lowers to.
 *
 * Ownership: the chain is owned by the caller (tx_cuda_chain_destroy); the
 * model is read during the call only. Thread-safety: as cuda_chain.h.
 */
#ifndef TEEXEC_EXEC_CUDA_CHAIN_FROM_MODEL_H
#define TEEXEC_EXEC_CUDA_CHAIN_FROM_MODEL_H

#include "exec/cuda/cuda_chain.h"
#include "exec/model_internal.h"

/* cfg->rows and cfg->in_width are taken from the graph input's shape when
 * given as 0 (the input must then have fixed dims). Fails with
 * TEEXEC_ERR_UNSUPPORTED naming the first node that does not fit. */
teexec_status *tx_cuda_chain_from_model(const teexec_model *lowered,
                                        const tx_cuda_chain_config *cfg, void *stream,
                                        tx_cuda_chain **out) TX_NODISCARD;

#endif
