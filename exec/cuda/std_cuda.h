/*
 * std_cuda.h - standard ONNX ops on the GPU, forward and backward: every
 * op the CPU backend runs (exec/cpu_ops.h), in the dtypes it runs them in,
 * with a backward wherever the CPU trainer has a rule (exec/train_internal.h);
 * QuantizeLinear / DequantizeLinear and TE's `trt` Q/DQ ops too. Which op,
 * dtype and backward is the registry's (exec/cuda/std_cuda_ops.h), which
 * docs/ops-by-device.md tabulates; the arithmetic is the CPU kernels'
 * (kernels/cuda/std_*.h say how closely).
 *
 * Tensors are tx_tensor with DEVICE data (as in te_cuda.h). A node is
 * prepared once for fixed shapes: `in` carries every input's dtype and
 * shape, and, for inputs whose value is known before running (initializers,
 * Constant outputs, shapes folded by the executor), HOST data in in_host[i]
 * (NULL when not known; a value of another dtype than `in` says is
 * converted to it, as the executor's upload converts). Ops whose
 * attribute-like inputs (Split's split, Slice's starts/ends/axes/steps,
 * TopK's K, CumSum's axis, a Reduce's axes, Dropout's training_mode) are
 * not known at prepare time are refused with TEEXEC_ERR_UNSUPPORTED; data
 * inputs (Clip's bounds, Range's start and delta, Trilu's k, Q/DQ scales
 * and zero points) are read on the device. Nothing is copied from the host
 * while a node runs: Shape, Size and small Constants are written by a
 * kernel that carries their bytes.
 *
 * Forward reads the inputs (device) and writes the outputs (device,
 * allocated by the executor with the inferred dtype/shape). Reshape-like
 * ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) copy when the
 * executor gives distinct buffers and do nothing when output and input data
 * are the same pointer (tx_cuda_std_is_alias says when the executor may
 * alias them).
 *
 * Backward: forward inputs and outputs (device), the grads of the outputs
 * (NULL = zero), and for each input the grad buffer to OVERWRITE (NULL =
 * not wanted; the executor sums fan-out). Broadcast inputs get the grad
 * summed over the broadcast dims (deterministically: no float atomics).
 * Float math in fp32, or in FP64 where the CPU rule's sums need it
 * (kernels/cuda/std_*.h say which); results rounded once to the tensor's dtype.
 *
 * Errors: TEEXEC_ERR_UNSUPPORTED "node NAME (Op): reason" at prepare for an
 * op, dtype, attribute or rank the GPU does not run; device errors as
 * TEEXEC_ERR_DEVICE naming the node.
 *
 * Ownership: a node owns its host data; `node`/`file` must outlive it.
 * Thread-safety: one thread at a time per node.
 */
#ifndef TEEXEC_EXEC_CUDA_STD_CUDA_H
#define TEEXEC_EXEC_CUDA_STD_CUDA_H

#include "base/status.h"
#include "base/tensor.h"
#include "import/ir.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tx_cuda_std_node tx_cuda_std_node;

typedef struct tx_cuda_std_desc {
    const tx_ir_node *node;
    const tx_onnx_file *file;          /* for attribute tensors */
    size_t n_in;
    const tx_tensor *const *in;        /* dtype/shape; NULL = omitted optional input */
    const tx_tensor *const *in_host;   /* host values known before running, or NULL entries */
    size_t n_out;
    const tx_tensor *const *out;       /* dtype/shape; NULL = omitted optional output */
    bool training;
    /* MatMul: a cuBLASLt handle to borrow (kernels/cuda/gemm_lt.h; used on
     * this node's thread, its workspace counted in the scratch bytes), or
     * NULL: the node creates its own, without workspace. */
    struct tx_gemm_lt *gemm;
} tx_cuda_std_desc;

/* True when the op type exists on the GPU at all (before shapes). */
bool tx_cuda_std_supported(const char *domain, const char *op_type);

teexec_status *tx_cuda_std_prepare(const tx_cuda_std_desc *d, tx_cuda_std_node **out) TX_NODISCARD;
/* Output 0 may share input 0's buffer (a pure reshape of contiguous data). */
bool tx_cuda_std_is_alias(const tx_cuda_std_node *n);
/* True when input slot i can carry a gradient (Reshape's shape cannot). */
bool tx_cuda_std_differentiable(const tx_cuda_std_node *n, size_t slot);
size_t tx_cuda_std_scratch_bytes(const tx_cuda_std_node *n);

/* Asynchronous on `stream` (cudaStream_t). in/out as in the desc, with
 * device data; scratch at least tx_cuda_std_scratch_bytes. */
teexec_status *tx_cuda_std_forward(tx_cuda_std_node *n, const tx_tensor *const *in,
                                   tx_tensor *const *out, void *scratch,
                                   void *stream) TX_NODISCARD;
teexec_status *tx_cuda_std_backward(tx_cuda_std_node *n, const tx_tensor *const *in,
                                    const tx_tensor *const *out,
                                    const tx_tensor *const *gout, tx_tensor *const *gin,
                                    void *scratch, void *stream) TX_NODISCARD;
void tx_cuda_std_node_free(tx_cuda_std_node *n);

#endif
