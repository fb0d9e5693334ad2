/* backend_cpu.c - the CPU backend: host memory and the CPU op dispatch. */
#include "exec/backend.h"
#include "exec/cpu_ops.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

typedef struct cpu_state {
    int threads;
} cpu_state;

static teexec_status *cpu_create(const tx_backend_config *cfg, void **out_state)
{
    cpu_state *s = calloc(1, sizeof(*s));
    if (!s) return tx_oom();
    s->threads = cfg ? cfg->threads : 0;
    /* OpenBLAS's thread count is process-wide; a session that asks for a
     * number sets it, the default leaves OpenBLAS's own choice alone. */
    if (s->threads > 0) openblas_set_num_threads(s->threads);
    *out_state = s;
    return NULL;
}

static void cpu_destroy(void *state) { free(state); }

static teexec_status *cpu_alloc(void *state, size_t bytes, void **out)
{
    (void)state;
    /* 64-byte alignment keeps vectorized kernels and BLAS on their fast paths. */
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n < bytes) return tx_oom();
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p) return tx_error(TEEXEC_ERR_NO_MEMORY, "out of memory allocating %zu bytes", bytes);
    *out = p;
    return NULL;
}

static void cpu_free(void *state, void *ptr)
{
    (void)state;
    free(ptr);
}

static teexec_status *cpu_copy(void *state, void *dst, const void *src, size_t bytes)
{
    (void)state;
    if (bytes) memmove(dst, src, bytes);
    return NULL;
}

static teexec_status *cpu_prepare(void *state, const tx_ir_node *node, tx_op_fn *out)
{
    (void)state;
    *out = tx_cpu_op_find(node->domain, node->op_type, node->opset);
    if (*out) return NULL;
    return tx_status_with_node(
        tx_error(TEEXEC_ERR_UNSUPPORTED, "unsupported op %s (domain \"%s\", opset %lld)",
                 node->op_type, node->domain, (long long)node->opset),
        node->label);
}

static teexec_status *cpu_run(void *state, tx_op_fn fn, const tx_op_call *call)
{
    (void)state;
    return fn(call);
}

const tx_backend_vtable tx_backend_cpu = {
    .name = "cpu",
    .caps = TX_BACKEND_HOST_MEMORY,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_to_host = cpu_copy,
    .copy_from_host = cpu_copy,
    .prepare_node = cpu_prepare,
    .run_node = cpu_run,
};
