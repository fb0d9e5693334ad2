/* comm.c - the public teexec_comm_* entry points (comm.h): argument checks
 * shared by both backends, then the rank's vtable; and the calling thread's
 * current communicator. */
#include "exec/comm.h"

#include "exec/session_internal.h"
#include "kernels/cpu/te_collective.h"

#include <stdint.h>

size_t tx_comm_dtype_size(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: return 4;
    case TEEXEC_DTYPE_DOUBLE: return 8;
    case TEEXEC_DTYPE_BFLOAT16: return 2;
    default: return 0;
    }
}

/* A run stays on its caller's thread, so a thread-local binding reaches
 * the run's kernels without widening the kernel call (comm.h). */
static _Thread_local teexec_comm *current;

teexec_comm *tx_comm_current(void) { return current; }

static teexec_status *te_all_reduce(void *ctx, teexec_dtype dt, void *buf, size_t count)
{
    return teexec_comm_all_reduce_sum(ctx, dt, buf, buf, count);
}

static teexec_status *te_all_gather(void *ctx, teexec_dtype dt, const void *send, void *recv,
                                    size_t count)
{
    return teexec_comm_all_gather(ctx, dt, send, recv, count);
}

static teexec_status *te_reduce_scatter(void *ctx, teexec_dtype dt, const void *send, void *recv,
                                        size_t count)
{
    return teexec_comm_reduce_scatter(ctx, dt, send, recv, count);
}

teexec_comm *tx_comm_bind(teexec_comm *c)
{
    teexec_comm *prev = current;
    current = c;
    /* the CPU te.ops collectives reduce host tensors: a host group only */
    tx_te_collective tc = {te_all_reduce, te_all_gather, te_reduce_scatter, c,
                           c ? c->world_size : 1};
    tx_te_collective_bind(c && !c->device_memory && c->world_size > 1 ? &tc : NULL);
    return prev;
}

teexec_status *tx_comm_check_session(const teexec_comm *c, bool cuda)
{
    if (!c || c->world_size == 1) return NULL;
    if (cuda && !c->device_memory)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "a CUDA session reduces device tensors: its tensor-parallel group must "
                        "be an \"nccl\" communicator, not \"%s\"",
                        c->vt->name);
    if (cuda) return NULL;
    if (c->device_memory)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "a CPU session reduces host tensors: it needs a \"threads\" "
                        "communicator, not \"%s\"",
                        c->vt->name);
    return NULL;
}

teexec_status *teexec_session_options_set_comm(teexec_session_options *o, teexec_comm *comm)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "session options are NULL");
    o->comm = comm;
    return NULL;
}

teexec_status *teexec_comm_create_threads(int world_size, int timeout_ms, teexec_comm **out)
{
    return tx_comm_threads_create(world_size, timeout_ms, out);
}

teexec_status *teexec_comm_create_nccl(int world_size, int rank, int device,
                                       const char *rendezvous, int timeout_ms, teexec_comm **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "teexec_comm_create_nccl: NULL out");
    *out = NULL;
    if (world_size < 1 || rank < 0 || rank >= world_size || device < 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "teexec_comm_create_nccl: rank %d of world size %d on device %d", rank,
                        world_size, device);
    if (world_size > 1 && (!rendezvous || !*rendezvous))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "teexec_comm_create_nccl: world size %d needs a rendezvous file",
                        world_size);
    return tx_comm_nccl_create(world_size, rank, device, rendezvous, timeout_ms, out);
}

teexec_status *teexec_comm_create_nccl_threads(int world_size, const int *devices, int timeout_ms,
                                               teexec_comm **out)
{
    if (!out)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "teexec_comm_create_nccl_threads: NULL out");
    if (world_size < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "teexec_comm_create_nccl_threads: world size %d", world_size);
    for (int i = 0; i < world_size; i++) out[i] = NULL;
    return tx_comm_nccl_create_threads(world_size, devices, timeout_ms, out);
}

int teexec_comm_gpu_count(void) { return tx_comm_gpu_count(); }

int teexec_comm_rank(const teexec_comm *c) { return c ? c->rank : 0; }

int teexec_comm_world_size(const teexec_comm *c) { return c ? c->world_size : 1; }

const char *teexec_comm_backend_name(const teexec_comm *c) { return c ? c->vt->name : "none"; }

static teexec_status *check(const teexec_comm *c, const char *what, teexec_dtype dt,
                            const void *send, const void *recv, size_t count)
{
    if (!c) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: communicator is NULL", what);
    if (!tx_comm_dtype_size(dt))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: dtype %d (collectives take float, double or bfloat16)", what, (int)dt);
    if (count && (!send || !recv))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL buffer", what);
    if (count > SIZE_MAX / 8 / (size_t)c->world_size)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %zu elements is too many", what, count);
    return NULL;
}

teexec_status *teexec_comm_all_reduce_sum(teexec_comm *c, teexec_dtype dt, const void *send,
                                          void *recv, size_t count)
{
    TX_TRY(check(c, "all_reduce_sum", dt, send, recv, count));
    return c->vt->all_reduce_sum(c, dt, send, recv, count);
}

teexec_status *teexec_comm_all_gather(teexec_comm *c, teexec_dtype dt, const void *send,
                                      void *recv, size_t count)
{
    TX_TRY(check(c, "all_gather", dt, send, recv, count));
    return c->vt->all_gather(c, dt, send, recv, count);
}

teexec_status *teexec_comm_reduce_scatter(teexec_comm *c, teexec_dtype dt, const void *send,
                                          void *recv, size_t count)
{
    TX_TRY(check(c, "reduce_scatter", dt, send, recv, count));
    return c->vt->reduce_scatter(c, dt, send, recv, count);
}

teexec_status *teexec_comm_barrier(teexec_comm *c)
{
    if (!c) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "barrier: communicator is NULL");
    return c->vt->barrier(c);
}

void teexec_comm_abort(teexec_comm *c, const char *reason)
{
    if (c) c->vt->fail_group(c, reason ? reason : "aborted");
}

void teexec_comm_destroy(teexec_comm *c)
{
    if (c) c->vt->destroy(c);
}
