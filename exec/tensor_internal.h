/*
 * tensor_internal.h - what a public teexec_tensor is inside the library.
 *
 * A teexec_tensor wraps one host tx_tensor (base/tensor.h); the wrapper
 * owns the buffer exactly when the tx_tensor does (owns_data).
 * Thread-safety: as for tx_tensor (concurrent reads only).
 */
#ifndef TEEXEC_EXEC_TENSOR_INTERNAL_H
#define TEEXEC_EXEC_TENSOR_INTERNAL_H

#include "base/tensor.h"

struct teexec_tensor {
    tx_tensor t;
};

/* Moves `t` (its buffer included) into a new public tensor; on success *t
 * is left empty and *out owns the data. On failure *t is untouched. */
teexec_status *tx_tensor_to_public(tx_tensor *t, teexec_tensor **out) TX_NODISCARD;

#endif
