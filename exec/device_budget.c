/* device_budget.c - a CUDA session's device-memory limit (device_budget.h). */
#include "exec/device_budget.h"

#include <stdbool.h>
#include <stdint.h>

teexec_status *tx_device_budget_check(size_t limit, size_t held, size_t weights, size_t own,
                                      const char *what)
{
    if (limit == 0) return NULL;
    size_t need = held;
    bool over = need > SIZE_MAX - weights;
    if (!over) need += weights;
    over = over || need > SIZE_MAX - own;
    if (!over) need += own;
    if (!over && need <= limit) return NULL;
    if (over)
        return tx_error(TEEXEC_ERR_OUT_OF_DEVICE_MEMORY,
                        "%s: needs more device memory than can be counted (weights %zu + "
                        "activations and buffers %zu + held %zu bytes); the session's limit is "
                        "%zu bytes",
                        what, weights, own, held, limit);
    if (held)
        return tx_error(TEEXEC_ERR_OUT_OF_DEVICE_MEMORY,
                        "%s: needs %zu bytes of device memory (weights %zu, activations and "
                        "buffers %zu, and %zu held by the session's other input shapes); the "
                        "session's limit is %zu bytes",
                        what, need, weights, own, held, limit);
    return tx_error(TEEXEC_ERR_OUT_OF_DEVICE_MEMORY,
                    "%s: needs %zu bytes of device memory (weights %zu, activations and buffers "
                    "%zu); the session's limit is %zu bytes",
                    what, need, weights, own, limit);
}

teexec_status *tx_device_alloc_failed(size_t bytes, const char *what, const char *why)
{
    return tx_error(TEEXEC_ERR_OUT_OF_DEVICE_MEMORY,
                    "%s: allocating %zu bytes (%.1f MiB) of device memory failed: %s", what, bytes,
                    (double)bytes / 1048576.0, why ? why : "out of memory");
}
