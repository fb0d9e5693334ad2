/*
 * model_tp_split.h - one rank's model of a tensor-parallel split of a
 * te.ops model (`teexec convert --tensor-parallel N`, docs/multi-gpu.md).
 *
 * In the main graph, every chain
 *     Linear(x, W1) -> [Bias(b1) | plain elementwise activation | Dropout
 *                       | ConstantScale | Identity]* -> Linear(., W2)
 * whose intermediate values each have one reader and whose W1 [H, K], b1
 * [H] and W2 [N, H] are initializers read by that node only, with H a
 * multiple of the world size W, is split the way TE and Megatron split an
 * MLP: rank r keeps rows [r*H/W, (r+1)*H/W) of W1 and b1 (column parallel)
 * and the same columns of W2 (row parallel), and an AllReduce is inserted
 * on the second Linear's output (renamed "<name>/tp_partial"), so what
 * follows it (a Bias of W2's output) runs on the summed value as before.
 * Gated activations (their halves would need splitting together) end a
 * chain. The shapes recorded for the chain's intermediate values are
 * dropped (inference recomputes them). Everything else is kept as loaded
 * (replicated on every rank).
 *
 * Ownership: reads `file` only. Thread-safety: concurrent calls are safe.
 */
#ifndef TEEXEC_FORMAT_MODEL_TP_SPLIT_H
#define TEEXEC_FORMAT_MODEL_TP_SPLIT_H

#include "base/status.h"
#include "format/onnx_load.h"

/* Writes rank `rank` of `world` to `path` (atomically); *n_split gets the
 * number of Linear pairs split. TEEXEC_ERR_UNSUPPORTED when there is none. */
teexec_status *tx_model_write_tp_rank(const tx_onnx_file *file, int world, int rank,
                                      const char *path, int *n_split) TX_NODISCARD;

#endif
