/* cublaslt_dl.c - run-time loading of cuBLASLt (see cublaslt_dl.h). */
#include "kernels/cuda/cublaslt_dl.h"

#include "base/status.h"
#include "kernels/cuda/dl_open.h"

#include <pthread.h>

#define TX_STR2(x) #x
#define TX_STR(x) TX_STR2(x)
#define SONAME "libcublasLt.so." TX_STR(CUBLAS_VER_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tx_cublaslt_api api;
static int loaded;
static char failure[512];

#define RESOLVE(field)                                                                      \
    tx_dl_resolve(lib, SONAME, "cublasLt" #field, &api.field, sizeof api.field, failure,        \
                  sizeof failure)

static void load_once(void)
{
    void *lib = tx_dl_open(SONAME, failure, sizeof failure);
    if (!lib) return;
    loaded = RESOLVE(Create) && RESOLVE(Destroy) && RESOLVE(GetVersion) && RESOLVE(GetStatusName) &&
             RESOLVE(GetStatusString) && RESOLVE(MatmulDescCreate) && RESOLVE(MatmulDescDestroy) &&
             RESOLVE(MatmulDescSetAttribute) && RESOLVE(MatrixLayoutCreate) &&
             RESOLVE(MatrixLayoutDestroy) && RESOLVE(MatrixLayoutSetAttribute) &&
             RESOLVE(MatmulPreferenceCreate) &&
             RESOLVE(MatmulPreferenceDestroy) && RESOLVE(MatmulPreferenceSetAttribute) &&
             RESOLVE(MatmulAlgoGetHeuristic) && RESOLVE(Matmul) &&
             RESOLVE(MatmulAlgoConfigGetAttribute);
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
