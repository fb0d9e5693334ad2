/* gpu_none.c - the CUDA executor's entry points in a build without CUDA
 * (cuda_executor.h): no device is available and creation says why. */
#include "exec/cuda/cuda_executor.h"
#include "exec/device_mem.h"

#include <string.h>

bool tx_gpu_available(void) { return false; }
bool tx_gpu_built(void) { return false; }

teexec_status *tx_cuda_executor_create(const teexec_model *model, const tx_cuda_executor_config *cfg,
                                   tx_cuda_executor **out)
{
    (void)model;
    (void)cfg;
    *out = NULL;
    return tx_error(TEEXEC_ERR_UNSUPPORTED,
                    "the CUDA backend is not available in this build (use --device cpu)");
}

void tx_cuda_executor_destroy(tx_cuda_executor *g) { (void)g; }

static teexec_status *none(void)
{
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "the CUDA backend is not available in this build");
}

teexec_status *tx_cuda_executor_run(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                tx_gpu_run_io *io, tx_tensor *outputs, const bool *want)
{
    (void)g, (void)inputs, (void)io, (void)outputs, (void)want;
    return none();
}

teexec_status *tx_cuda_executor_wait(tx_cuda_executor *g)
{
    (void)g;
    return none();
}

int tx_cuda_executor_device(const tx_cuda_executor *g)
{
    (void)g;
    return 0;
}

void tx_cuda_executor_set_run_options(tx_cuda_executor *g, const teexec_run_options *ro)
{
    (void)g, (void)ro;
}

size_t tx_cuda_executor_output_count(const tx_cuda_executor *g) { (void)g; return 0; }
const char *tx_cuda_executor_output_name(const tx_cuda_executor *g, size_t j) { (void)g, (void)j; return NULL; }
void tx_cuda_executor_output_info(const tx_cuda_executor *g, size_t j, teexec_dtype *dtype,
                              tx_shape *shape)
{
    (void)g, (void)j;
    *dtype = TEEXEC_DTYPE_UNDEFINED;
    memset(shape, 0, sizeof *shape);
}
const char *tx_cuda_executor_graphs_off_reason(const tx_cuda_executor *g) { (void)g; return NULL; }

teexec_status *tx_cuda_executor_step(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                 const tx_tensor *loss_data, double *loss)
{
    (void)g, (void)inputs, (void)loss_data, (void)loss;
    return none();
}

void tx_cuda_executor_set_grad_hook(tx_cuda_executor *g, tx_gpu_grad_hook fn, void *ctx)
{
    (void)g, (void)fn, (void)ctx;
}

teexec_status *tx_cuda_executor_param(const tx_cuda_executor *g, const char *name, tx_tensor *out)
{
    (void)g, (void)name, (void)out;
    return none();
}

teexec_status *tx_cuda_executor_param_lowered(const tx_cuda_executor *g, const char *name, tx_tensor *out)
{
    (void)g, (void)name, (void)out;
    return none();
}

teexec_status *tx_cuda_executor_grad(const tx_cuda_executor *g, const char *name, tx_tensor *out)
{
    (void)g, (void)name, (void)out;
    return none();
}

teexec_status *tx_cuda_executor_run_profile(const tx_cuda_executor *g, struct tx_run_profile *out)
{
    (void)g;
    (void)out;
    return none();
}

teexec_status *tx_cuda_executor_profile(const tx_cuda_executor *g, char **out_text)
{
    (void)g;
    *out_text = NULL;
    return none();
}

size_t tx_cuda_executor_device_bytes(const tx_cuda_executor *g) { (void)g; return 0; }

teexec_status *tx_cuda_executor_kernels(const tx_cuda_executor *g, tx_run_kernel **out, size_t *n,
                                    size_t *n_forward, const tx_fuser_plan **plan)
{
    (void)g;
    *out = NULL;
    *n = *n_forward = 0;
    if (plan) *plan = NULL;
    return none();
}
const struct tx_ws_lease *tx_cuda_executor_weights(const tx_cuda_executor *g) { (void)g; return NULL; }

teexec_status *tx_cuda_executor_memory(const tx_cuda_executor *g, tx_cuda_memory_report *out)
{
    (void)g;
    if (out) memset(out, 0, sizeof *out);
    return none();
}

/* ---- device memory of public device tensors (exec/device_mem.h) ---- */

teexec_status *tx_device_alloc(size_t bytes, int *device, void **out)
{
    (void)bytes;
    *device = 0;
    *out = NULL;
    return tx_error(TEEXEC_ERR_UNSUPPORTED,
                    "device tensors need the CUDA backend, which this build does not have");
}

void tx_device_free(int device, void *ptr) { (void)device, (void)ptr; }

teexec_status *tx_device_check_pointer(const void *ptr, int *device)
{
    (void)ptr;
    *device = 0;
    return none();
}

teexec_status *tx_device_to_host(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return none();
}

teexec_status *tx_device_to_device(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return none();
}

teexec_status *tx_device_copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height)
{
    (void)dst, (void)dpitch, (void)src, (void)spitch, (void)width, (void)height;
    return none();
}

teexec_status *tx_device_zero(void *dst, size_t bytes)
{
    (void)dst, (void)bytes;
    return none();
}
