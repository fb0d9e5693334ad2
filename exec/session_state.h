/*
 * session_state.h - what a session keeps from one run to the next: the KV
 * caches of te.ops DotProductAttention in its cache mode (docs/te-ops.md).
 *
 * A graph input is a state input when it feeds the k_cache or v_cache slot
 * of a cache-mode DotProductAttention, and nothing else. The caller never
 * passes it: the session allocates it once, zeroed, with the shape the
 * model declares (every dim fixed), hands the same buffer to every run --
 * on the CPU a host tensor, on CUDA device memory that every executor of
 * the session uses in place (exec/cuda/cuda_executor.h input_storage), so a
 * decode step copies no cache and its CUDA graph replays unchanged -- and
 * the op appends each run's new keys and values into it. What a row holds
 * is bounded by the cache_len the caller feeds: a generator rewinds or
 * restarts a row by feeding a smaller one, never by clearing the buffer.
 *
 * Ownership: the state owns its tensors and device buffers. Thread-safety:
 * that of its session (one thread at a time).
 */
#ifndef TEEXEC_EXEC_SESSION_STATE_H
#define TEEXEC_EXEC_SESSION_STATE_H

#include "base/status.h"
#include "base/tensor.h"
#include "import/ir.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tx_session_state {
    size_t n_in;      /* the session's inputs */
    bool *is_state;   /* per input (in_vals order) */
    size_t n;         /* state inputs */
    /* per input, NULL unless a state: the tensor a run binds -- host data
     * on the CPU; on CUDA the model's dtype and shape over `dev` */
    tx_tensor *bound;
    void **dev;       /* CUDA: per input, the device buffer (NULL: none) */
    teexec_dtype *dev_dtype; /* CUDA: its dtype (the compute dtype for a float state) */
    int device;       /* CUDA: where the buffers live */
    size_t bytes;     /* their total size */
} tx_session_state;

/* Finds the state inputs of `g` among its inputs in_vals[0..n_in) and
 * checks them: a state input feeds only k_cache / v_cache slots of
 * cache-mode DotProductAttention nodes and has every dim fixed
 * (INVALID_ARGUMENT naming it otherwise). Allocates nothing for a model
 * without state but is_state. */
teexec_status *tx_session_state_init(tx_session_state *st, const tx_ir_graph *g,
                                     const int32_t *in_vals, size_t n_in) TX_NODISCARD;
/* The host tensors (CPU sessions), zeroed. */
teexec_status *tx_session_state_alloc_host(tx_session_state *st, const tx_ir_graph *g,
                                           const int32_t *in_vals) TX_NODISCARD;
/* Device buffers on the current device, zeroed; a float state in
 * `compute` when it is a float type (UNDEFINED: the model's dtype). */
teexec_status *tx_session_state_alloc_device(tx_session_state *st, const tx_ir_graph *g,
                                             const int32_t *in_vals,
                                             teexec_dtype compute) TX_NODISCARD;
void tx_session_state_free(tx_session_state *st);

#endif
