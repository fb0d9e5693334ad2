/*
 * memory_plan.h - pieces of the memory plan (tx_plan_memory in plan.h,
 * planner/memory_plan.c) that stand on their own: the offset assignment
 * over lifetimes, the peak of a set of lifetimes, and releasing a plan.
 *
 * What tx_plan_memory assumes (the model of memory it plans):
 *  - Schedule: plan_schedule.h (forward kernels, then backward kernels in
 *    reverse). A tensor live over [start, end] occupies its bytes during
 *    every step from start to end inclusive.
 *  - Activations: every value a forward kernel writes that something
 *    outside the kernel reads, or that no node reads, or that is a graph
 *    output (held to the end of the forward pass). Values produced and
 *    consumed inside one fused kernel do not exist, unless a backward reads
 *    them: then they are SAVED tensors the fused kernel writes out. Sized in
 *    their own dtype (a quantized hand-off is counted at full size: an upper
 *    bound). Graph inputs and initializers are the caller's / parameters,
 *    not in the arena.
 *  - Saved (training): per basic op whose backward runs, its saved-context
 *    schema (format/te_schema.h) restricted to the grads requested of it
 *    (needed_for); references extend the referenced activation to that
 *    backward step; aux tensors are new. A quantized Linear / GroupedLinear
 *    operand with a columnwise usage is saved as its columnwise quantized
 *    copy (TE keeps only that usage after fprop), sized with
 *    tx_plan_quant_bytes, for the input and for the weight (the weight's
 *    copy is per step, not cached). Standard ops keep all their inputs and
 *    outputs, except structural ones (Add, Sub, Neg, Cast, Concat, Expand,
 *    Flatten, Identity, Reshape, Slice, Split, Squeeze, Transpose,
 *    Unsqueeze, ReduceSum, ReduceMean, Gather, Where) which keep only their
 *    integer / bool inputs. Joint fusions are sized as their basic ops'
 *    schemas.
 *  - Gradients (training): the grad of each non-parameter value that needs
 *    one, from the first backward kernel writing it to the backward kernel
 *    of its producer; graph outputs' grads (from the loss) live from the
 *    first backward step, graph inputs' grads to the end. Grads passed
 *    inside one backward kernel do not exist. Parameter grads are counted in
 *    param_bytes.
 *  - Workspaces, one step each: the GEMM workspace of a kernel with a
 *    Linear / GroupedLinear (TE's 32 MiB + 1 KiB on sm_90 and later, 4 MiB
 *    on older GPUs, none on the CPU); the rowwise quantized input (unless a
 *    producer hands it over quantized) and weight of a forward GEMM; the
 *    quantized grad_output of a backward GEMM (unless handed over).
 *  - peak_inference counts activations with their forward lifetimes and the
 *    forward workspaces only.
 *
 * Ownership: a tx_memory_plan owns its tensors and their names.
 * Thread-safety: pure over the arguments.
 */
#ifndef TEEXEC_PLANNER_MEMORY_PLAN_H
#define TEEXEC_PLANNER_MEMORY_PLAN_H

#include "planner/plan.h"

/* TE's cuBLAS workspace on sm_90+: 32 MiB + 1 KiB. */
#define TX_GEMM_WORKSPACE_SM90 ((size_t)32 * 1024 * 1024 + 1024)
#define TX_GEMM_WORKSPACE_OLDER ((size_t)4 * 1024 * 1024)
#define TX_MEM_ALIGNMENT 256u

/* GEMM workspace bytes on a device (0 on the CPU). */
size_t tx_gemm_workspace_bytes(const tx_device_caps *d);

/* Places mp->tensors in one arena: largest first (ties: earlier start, then
 * list order), each at the lowest offset, a multiple of mp->alignment (256
 * when 0), where it overlaps no already placed tensor whose lifetime
 * overlaps its own. Sets every offset and mp->arena_bytes (end of the last
 * byte, rounded up to the alignment). LIMIT on size overflow. */
teexec_status *tx_memory_assign_offsets(tx_memory_plan *mp) TX_NODISCARD;

/* Max over steps lo..hi of the bytes of the tensors live at that step. */
size_t tx_memory_peak(const tx_mem_tensor *t, size_t n, int32_t lo, int32_t hi);

/* Frees the tensors and names; *mp becomes all zero. */
void tx_memory_plan_clear(tx_memory_plan *mp);

#endif
