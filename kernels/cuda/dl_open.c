/* dl_open.c - run-time loading of CUDA libraries (dl_open.h). */
#include "kernels/cuda/dl_open.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *tx_dl_open(const char *soname, char *failure, size_t size)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
#ifdef TX_CUBLASLT_DIR
    if (!lib) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", TX_CUBLASLT_DIR, soname);
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
#endif
    if (!lib) {
        const char *e = dlerror();
        snprintf(failure, size, "%s", e ? e : "dlopen failed");
    }
    return lib;
}

int tx_dl_resolve(void *lib, const char *soname, const char *name, void *slot, size_t slot_size,
                  char *failure, size_t size)
{
    void *p = dlsym(lib, name);
    if (!p) {
        const char *e = dlerror();
        snprintf(failure, size, "%s: %s", soname, e ? e : name);
        return 0;
    }
    /* dlsym returns void *; ISO C has no conversion to a function pointer,
     * POSIX guarantees one exists, and memcpy says so without a warning */
    memcpy(slot, &p, slot_size);
    return 1;
}
