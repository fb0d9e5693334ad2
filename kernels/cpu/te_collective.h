/*
 * te_collective.h - the tensor-parallel group the te.ops communication ops
 * (AllGather, AllReduce, ReduceScatter; te_misc.c) of the calling thread's
 * current run reduce over.
 *
 * The executor (exec/comm.h's tx_comm_bind) binds its communicator here
 * for the length of a run: the kernels cannot see exec's communicator
 * type, and the op arguments (te_args.h) are filled by several executors
 * (node by node, the group executor, the fused kernels), so a binding per
 * thread reaches them all without each passing it on. Unbound (world 1):
 * the ops are the identity.
 *
 * Ownership: the binding borrows ctx. Thread-safety: per thread.
 */
#ifndef TEEXEC_KERNELS_CPU_TE_COLLECTIVE_H
#define TEEXEC_KERNELS_CPU_TE_COLLECTIVE_H

#include "base/status.h"

#include <stddef.h>

typedef struct tx_te_collective {
    /* buf (count elements of dt: FLOAT, DOUBLE or BFLOAT16) = the sum of
     * every rank's buf, in place */
    teexec_status *(*all_reduce)(void *ctx, teexec_dtype dt, void *buf, size_t count);
    /* recv (world * count) = the ranks' send (count each) in rank order */
    teexec_status *(*all_gather)(void *ctx, teexec_dtype dt, const void *send, void *recv,
                                 size_t count);
    /* recv (count) = block `rank` of the sum of the ranks' send (world * count) */
    teexec_status *(*reduce_scatter)(void *ctx, teexec_dtype dt, const void *send, void *recv,
                                     size_t count);
    void *ctx;
    int world; /* < 2: no group */
} tx_te_collective;

/* Binds c (NULL: none) for this thread; returns the previous binding. */
tx_te_collective tx_te_collective_bind(const tx_te_collective *c);
/* This thread's binding (world 1 and no function when none). */
const tx_te_collective *tx_te_collective_current(void);

#endif
