/*
 * backend.h - the interface every execution backend (CPU, CUDA) implements.
 *
 * A backend owns device memory and knows how to run one graph node. The
 * session (exec/session.c) does everything device-independent: shape
 * inference, constant folding, buffer planning, binding inputs/outputs; it
 * asks the backend to resolve each node to a kernel once, at session
 * creation (prepare_node), and then to run that kernel (run_node).
 *
 * Node calls (tx_op_call) hand the kernel its node (for attributes), its
 * inputs (NULL for an omitted optional input) and its outputs, already
 * allocated by the session with the dtype and shape inference gave (NULL
 * for an omitted optional output). Tensors live in the backend's memory
 * (host memory for the CPU backend).
 *
 * Ownership: a backend instance (tx_backend) is created and destroyed by
 * its session; memory from alloc is released with free. Kernel functions
 * returned by prepare_node are static.
 * Thread-safety: a backend instance belongs to its session and is used by
 * one thread at a time; the vtables themselves are immutable.
 */
#ifndef TEEXEC_EXEC_BACKEND_H
#define TEEXEC_EXEC_BACKEND_H

#include "base/tensor.h"
#include "import/ir.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tx_op_call {
    const tx_ir_node *node;
    const tx_onnx_file *file;          /* for Constant-like attributes */
    size_t n_in;
    const tx_tensor *const *in;        /* n_in entries, NULL = omitted */
    size_t n_out;
    tx_tensor *const *out;             /* n_out entries, NULL = omitted */
} tx_op_call;

/* One kernel: runs the node once. Reads only the call, writes only the
 * outputs. */
typedef teexec_status *(*tx_op_fn)(const tx_op_call *call);

/* Capability bits. */
enum {
    TX_BACKEND_HOST_MEMORY = 1u << 0, /* tensors are directly host-readable */
    TX_BACKEND_ASYNC = 1u << 1        /* runs are queued on a stream */
};

typedef struct tx_backend_config {
    int threads; /* 0 = backend default */
} tx_backend_config;

typedef struct tx_backend_vtable {
    const char *name; /* "cpu", "cuda" */
    unsigned caps;    /* TX_BACKEND_* */

    teexec_status *(*create)(const tx_backend_config *cfg, void **out_state);
    void (*destroy)(void *state);

    teexec_status *(*alloc)(void *state, size_t bytes, void **out);
    void (*free)(void *state, void *ptr);
    teexec_status *(*copy_to_host)(void *state, void *dst_host, const void *src, size_t bytes);
    teexec_status *(*copy_from_host)(void *state, void *dst, const void *src_host, size_t bytes);

    /* Resolves a node to a kernel. Returns NULL and sets *out when the
     * backend runs the node; otherwise a TEEXEC_ERR_UNSUPPORTED status
     * whose message is exactly `unsupported op X (domain "d", opset N)`. */
    teexec_status *(*prepare_node)(void *state, const tx_ir_node *node, tx_op_fn *out);
    teexec_status *(*run_node)(void *state, tx_op_fn fn, const tx_op_call *call);
} tx_backend_vtable;

typedef struct tx_backend {
    const tx_backend_vtable *vt;
    void *state;
} tx_backend;

/* The CPU backend (exec/backend_cpu.c). */
extern const tx_backend_vtable tx_backend_cpu;

#endif
