/* cudnn_dl.c - run-time loading of cuDNN's graph API (see cudnn_dl.h). */
#include "kernels/cuda/cudnn_dl.h"

#include "base/status.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define TX_STR2(x) #x
#define TX_STR(x) TX_STR2(x)
#define SONAME "libcudnn.so." TX_STR(CUDNN_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tx_cudnn_api api;
static int loaded;
static char failure[512];

/* dlsym returns void *; POSIX makes the function-pointer conversion work,
 * memcpy states it without a cast warning. */
static int resolve(void *lib, const char *name, void *slot, size_t size)
{
    void *p = dlsym(lib, name);
    if (!p) {
        const char *e = dlerror();
        snprintf(failure, sizeof failure, "%s: %s", SONAME, e ? e : name);
        return 0;
    }
    memcpy(slot, &p, size);
    return 1;
}

#define RESOLVE(field) resolve(lib, "cudnn" #field, &api.field, sizeof api.field)

static void load_once(void)
{
    void *lib = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
#ifdef TX_CUBLASLT_DIR
    /* the toolkit's lib64 folder, where cuDNN sits beside cuBLASLt */
    if (!lib) lib = dlopen(TX_CUBLASLT_DIR "/" SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!lib) {
        const char *e = dlerror();
        snprintf(failure, sizeof failure, "%s", e ? e : "dlopen failed");
        return;
    }
    loaded = RESOLVE(GetVersion) && RESOLVE(Create) && RESOLVE(Destroy) && RESOLVE(SetStream) &&
             RESOLVE(GetErrorString) && RESOLVE(GetLastErrorString) &&
             RESOLVE(BackendCreateDescriptor) && RESOLVE(BackendDestroyDescriptor) &&
             RESOLVE(BackendSetAttribute) && RESOLVE(BackendGetAttribute) &&
             RESOLVE(BackendFinalize) && RESOLVE(BackendExecute);
}

teexec_status *tx_cudnn_load(const tx_cudnn_api **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_cudnn_load: NULL out");
    *out = NULL;
    if (pthread_once(&once, load_once) != 0)
        return tx_error(TEEXEC_ERR_INTERNAL, "tx_cudnn_load: pthread_once failed");
    if (!loaded) return tx_error(TEEXEC_ERR_UNSUPPORTED, "cannot load cuDNN (%s)", failure);
    *out = &api;
    return NULL;
}

const tx_cudnn_api *tx_cudnn(void)
{
    return &api;
}
