/* cublaslt_dl.c - run-time loading of cuBLASLt (see cublaslt_dl.h). */
#include "kernels/cuda/cublaslt_dl.h"

#include "base/status.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define TX_STR2(x) #x
#define TX_STR(x) TX_STR2(x)
#define SONAME "libcublasLt.so." TX_STR(CUBLAS_VER_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tx_cublaslt_api api;
static int loaded;
static char failure[512];

/* dlsym returns void *; ISO C has no function-pointer conversion for it,
 * POSIX guarantees it works, and memcpy says so without a cast warning. */
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

#define RESOLVE(field) resolve(lib, "cublasLt" #field, &api.field, sizeof api.field)

static void load_once(void)
{
    void *lib = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
#ifdef TX_CUBLASLT_DIR
    if (!lib) lib = dlopen(TX_CUBLASLT_DIR "/" SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!lib) {
        const char *e = dlerror();
        snprintf(failure, sizeof failure, "%s", e ? e : "dlopen failed");
        return;
    }
    loaded = RESOLVE(Create) && RESOLVE(Destroy) && RESOLVE(GetVersion) && RESOLVE(GetStatusName) &&
             RESOLVE(GetStatusString) && RESOLVE(MatmulDescCreate) && RESOLVE(MatmulDescDestroy) &&
             RESOLVE(MatmulDescSetAttribute) && RESOLVE(MatrixLayoutCreate) &&
             RESOLVE(MatrixLayoutDestroy) && RESOLVE(MatmulPreferenceCreate) &&
             RESOLVE(MatmulPreferenceDestroy) && RESOLVE(MatmulPreferenceSetAttribute) &&
             RESOLVE(MatmulAlgoGetHeuristic) && RESOLVE(Matmul);
}

teexec_status *tx_cublaslt_load(const tx_cublaslt_api **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_cublaslt_load: NULL out");
    *out = NULL;
    if (pthread_once(&once, load_once) != 0)
        return tx_error(TEEXEC_ERR_INTERNAL, "tx_cublaslt_load: pthread_once failed");
    if (!loaded)
        return tx_error(TEEXEC_ERR_DEVICE, "cannot load cuBLASLt (%s)", failure);
    *out = &api;
    return NULL;
}

const tx_cublaslt_api *tx_cublaslt(void)
{
    return &api;
}
