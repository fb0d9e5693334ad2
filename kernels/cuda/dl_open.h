/*
 * dl_open.h - opening a CUDA library at run time (cuBLASLt, cuDNN): the
 * system's search path first, then the toolkit's lib64 folder the build
 * found (TX_CUBLASLT_DIR), and resolving its functions.
 *
 * Loading them lazily keeps them off every process's start-up: a teexec
 * that never touches the GPU never pays for them.
 *
 * Errors are written into the caller's `failure` buffer (NUL-terminated,
 * truncated to `size`). No state; thread-safe (dlopen/dlsym are; dlerror
 * is per thread).
 */
#ifndef TEEXEC_KERNELS_CUDA_DL_OPEN_H
#define TEEXEC_KERNELS_CUDA_DL_OPEN_H

#include <stddef.h>

/* The library's handle, or NULL with the reason in failure. */
void *tx_dl_open(const char *soname, char *failure, size_t size);

/* Stores function `name` of lib into the function pointer at slot (of
 * slot_size bytes). 0 with the reason in failure when it is missing. */
int tx_dl_resolve(void *lib, const char *soname, const char *name, void *slot, size_t slot_size,
                  char *failure, size_t size);

#endif
