/*
 * te_args.h - the argument structs of the TE basic ops' forward and
 * backward implementations (DESIGN.md section 2), and the CPU backend's
 * table of them.
 *
 * The contract, which every backend and every fused kernel keeps:
 *
 *  - forward_impl(const tx_te_fwd_args *) and backward_impl(const
 *    tx_te_bwd_args *) are PURE: they read only what their args point to
 *    and write only the output tensors named there. They keep no state and
 *    allocate nothing that outlives the call. Every tensor is allocated by
 *    the caller with the dtype and shape that the op's shape rule
 *    (format/te_schema.h, tx_te_infer) gives; the implementation checks them.
 *
 *  - Forward: main input, extra inputs (schema order; NULL for an absent
 *    optional one), parameters (schema order; GroupedLinear: weight_0..G-1
 *    then bias_0..G-1), attributes (schema order, defaults filled: see
 *    tx_te_attr_defaults) in; main output, extra outputs, and aux out.
 *    `aux` are the tensors the op itself produces for its backward (norm
 *    statistics, the dropout mask, the softmax log-sum-exp). With training
 *    false the aux pointers may be NULL (or n_aux 0) and nothing is saved.
 *
 *  - setup_context (tx_te_setup_context, generic over the schema's
 *    saved-context list): after the forward, collects by reference the
 *    tensors the backward reads, in the schema's order: inputs, parameters,
 *    the output and the aux tensors. Entries not needed for the gradients
 *    requested are left NULL (e.g. Linear's x when the weight is frozen), so
 *    a planner can free them. A fused forward must produce exactly this list.
 *
 *  - Backward: dy (grad of the main output), grads of the extra outputs
 *    (NULL = zero), the saved context, attributes in; dx (NULL = not
 *    wanted), parameter grads (NULL entries = not wanted) and extra-input
 *    grads (NULL entries = not wanted; integer extra inputs never get one)
 *    out. Parameter grads are OVERWRITTEN, not accumulated: summing over
 *    uses is the executor's job. Shapes of the grads are those of the
 *    matching forward tensors, so e.g. Reshape's backward takes x's shape
 *    from dx.
 *
 * Numbers: tensors may be float32, float16, bfloat16 or float64, mixed
 * freely. The compute type is float64 when the main float tensor (x, or
 * the table for Embedding) is float64 - the FP64 path used for finite
 * differences - and float32 otherwise; reductions accumulate in float64;
 * each output is rounded once to its dtype. GEMMs run in OpenBLAS (sgemm /
 * dgemm).
 *
 * Errors: TEEXEC_ERR_INVALID_ARGUMENT for tensors that do not fit (the
 * message names the op), TEEXEC_ERR_NO_MEMORY for scratch memory. On error
 * outputs may be partly written.
 *
 * Thread-safety: concurrent calls on distinct outputs are safe.
 */
#ifndef TEEXEC_KERNELS_CPU_TE_ARGS_H
#define TEEXEC_KERNELS_CPU_TE_ARGS_H

#include "base/tensor.h"
#include "format/te_schema.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct tx_te_fwd_args {
    tx_te_op_id op;
    const tx_te_attr_value *attrs;          /* schema order, defaults filled */
    const tx_tensor *input;
    const tx_tensor *const *extra_inputs;   /* NULL entries: absent optional */
    int n_extra_inputs;
    const tx_tensor *const *params;
    int n_params;
    tx_tensor *output;
    tx_tensor *const *extra_outputs;
    int n_extra_outputs;
    tx_tensor *const *aux;                  /* may be NULL when !training */
    int n_aux;
    bool training;      /* false: inference semantics (Dropout = identity), no aux */
    uint64_t rng_offset; /* Philox counter offset for this call (Dropout); the
                          * executor advances it per call so steps differ */
} tx_te_fwd_args;

typedef struct tx_te_bwd_args {
    tx_te_op_id op;
    const tx_te_attr_value *attrs;
    const tx_tensor *grad_output;              /* dy */
    const tx_tensor *const *grad_extra_outputs; /* NULL entries: zero */
    int n_grad_extra_outputs;
    const tx_tensor *const *saved;             /* tx_te_setup_context order */
    int n_saved;
    tx_tensor *grad_input;                     /* dx; NULL: not wanted */
    tx_tensor *const *grad_params;             /* NULL entries: not wanted */
    int n_grad_params;
    tx_tensor *const *grad_extra_inputs;       /* NULL entries: not wanted */
    int n_grad_extra_inputs;
    /* GPU executors only (NULL elsewhere): the device buffer a fused
     * producer wrote this op's quantized grad_output into (a Linear's
     * handed-off dy), placed by the executor for the backward steps
     * between the producer and this op */
    void *handoff_region;
} tx_te_bwd_args;

typedef teexec_status *(*tx_te_fwd_fn)(const tx_te_fwd_args *a);
typedef teexec_status *(*tx_te_bwd_fn)(const tx_te_bwd_args *a);

typedef struct tx_te_cpu_impl {
    tx_te_fwd_fn forward;
    tx_te_bwd_fn backward;
} tx_te_cpu_impl;

/* The CPU implementation of an op; NULL when out of range. Static. */
const tx_te_cpu_impl *tx_te_cpu_impl_of(tx_te_op_id op);

/* Upper bound on the saved entries of any op with n_params parameters. */
#define TX_TE_SAVED_CAP(n_params) (TX_TE_MAX_SAVED + (n_params))

/* Collects the saved context of a finished forward (see above). `needs` is
 * an OR of TX_TE_FOR_* saying which grads the backward will compute;
 * entries needed by none of them are set to NULL. Writes *n_saved entries
 * (cap must be >= TX_TE_SAVED_CAP(a->n_params)). */
teexec_status *tx_te_setup_context(const tx_te_fwd_args *a, unsigned needs,
                                   const tx_tensor **saved, int cap,
                                   int *n_saved) TX_NODISCARD;

/* DotProductAttention's cache mode over tensors (the CPU kernel and the
 * CUDA preparation share it): whether the extra inputs put it in the cache
 * mode (k_cache, v_cache or cache_len given), and format/te_schema.h's
 * tx_te_dpa_cache_check on q and the extra inputs (NULL: absent). */
bool tx_te_dpa_cache_mode(const tx_tensor *const *extra, int n_extra);
teexec_status *tx_te_dpa_cache_check_tensors(const tx_tensor *q, const tx_tensor *const *extra,
                                             int n_extra, int64_t layout) TX_NODISCARD;

/* Runs forward_impl / backward_impl after checking that the counts in the
 * args match the schema (and the attributes' values). */
teexec_status *tx_te_cpu_forward(const tx_te_fwd_args *a) TX_NODISCARD;
teexec_status *tx_te_cpu_backward(const tx_te_bwd_args *a) TX_NODISCARD;

#endif
