/*
 * tensor_internal.h - what a public teexec_tensor is inside the library.
 *
 * A teexec_tensor wraps one tx_tensor (base/tensor.h) whose data is host
 * memory, or, for a device tensor, a CUDA device address (then the
 * tx_tensor never owns it: the wrapper frees it through dev_free when it
 * owns it, and every path that reads tensor data on the host refuses it
 * with tx_tensor_host_only). A host wrapper owns the buffer exactly when
 * the tx_tensor does (owns_data).
 * Thread-safety: as for tx_tensor (concurrent reads only).
 */
#ifndef TEEXEC_EXEC_TENSOR_INTERNAL_H
#define TEEXEC_EXEC_TENSOR_INTERNAL_H

#include "base/tensor.h"

#include <stdbool.h>

struct teexec_tensor {
    tx_tensor t;
    bool on_device;  /* t.data is a CUDA device address */
    int device;      /* its CUDA device ordinal */
    /* frees t.data of a device tensor the library allocated; NULL when
     * borrowed (or a host tensor) */
    void (*dev_free)(int device, void *ptr);
};

/* NULL for a host tensor; TEEXEC_ERR_INVALID_ARGUMENT naming `what` (an
 * input's name, say) for a device one. */
teexec_status *tx_tensor_host_only(const teexec_tensor *t, const char *what) TX_NODISCARD;

/* A public device tensor over `t` (t->data a device address on `device`,
 * t->owns_data false); dev_free (may be NULL: borrowed) frees it with the
 * tensor. On success *t is left empty. */
teexec_status *tx_tensor_to_public_device(tx_tensor *t, int device,
                                          void (*dev_free)(int device, void *ptr),
                                          teexec_tensor **out) TX_NODISCARD;

/* Moves `t` (its buffer included) into a new public tensor; on success *t
 * is left empty and *out owns the data. On failure *t is untouched. */
teexec_status *tx_tensor_to_public(tx_tensor *t, teexec_tensor **out) TX_NODISCARD;

#endif
