/* nccl_dl.c - run-time loading of NCCL (see nccl_dl.h). */
#include "kernels/cuda/nccl_dl.h"

#include "base/status.h"
#include "kernels/cuda/dl_open.h"

#include <pthread.h>

#define SONAME "libnccl.so.2"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tx_nccl_api api;
static int loaded;
static char failure[512];

#define RESOLVE(field)                                                                       \
    tx_dl_resolve(lib, SONAME, "nccl" #field, &api.field, sizeof api.field, failure,          \
                  sizeof failure)

static void load_once(void)
{
    void *lib = tx_dl_open(SONAME, failure, sizeof failure);
    if (!lib) return;
    loaded = RESOLVE(GetVersion) && RESOLVE(GetUniqueId) && RESOLVE(CommInitRankConfig) &&
             RESOLVE(CommInitAll) && RESOLVE(CommDestroy) && RESOLVE(CommAbort) &&
             RESOLVE(CommGetAsyncError) && RESOLVE(GetErrorString) && RESOLVE(AllReduce) &&
             RESOLVE(AllGather) && RESOLVE(ReduceScatter) && RESOLVE(GroupStart) &&
             RESOLVE(GroupEnd);
}

teexec_status *tx_nccl_load(const tx_nccl_api **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_nccl_load: NULL out");
    *out = NULL;
    if (pthread_once(&once, load_once) != 0)
        return tx_error(TEEXEC_ERR_INTERNAL, "tx_nccl_load: pthread_once failed");
    if (!loaded) return tx_error(TEEXEC_ERR_DEVICE, "cannot load NCCL (%s)", failure);
    *out = &api;
    return NULL;
}
