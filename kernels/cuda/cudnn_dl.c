/* cudnn_dl.c - run-time loading of cuDNN's graph API (see cudnn_dl.h). */
#include "kernels/cuda/cudnn_dl.h"

#include "base/status.h"
#include "kernels/cuda/dl_open.h"

#include <pthread.h>

#define TX_STR2(x) #x
#define TX_STR(x) TX_STR2(x)
#define SONAME "libcudnn.so." TX_STR(CUDNN_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tx_cudnn_api api;
static int loaded;
static char failure[512];

#define RESOLVE(field)                                                                      \
    tx_dl_resolve(lib, SONAME, "cudnn" #field, &api.field, sizeof api.field, failure,        \
                  sizeof failure)

static void load_once(void)
{
    void *lib = tx_dl_open(SONAME, failure, sizeof failure);
    if (!lib) return;
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
