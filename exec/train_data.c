/* train_data.c - teexec_dataset: .npz training data exposed through the
 * public tensor type (format/npz.h does the reading). */
#include "exec/tensor_internal.h"
#include "format/npz.h"

#include <stdlib.h>
#include <string.h>

struct teexec_dataset {
    tx_npz *npz;                 /* names (tensors moved out) */
    struct teexec_tensor *tensors;
};

teexec_status *teexec_dataset_load_npz(const char *path, teexec_dataset **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_dataset is NULL");
    *out = NULL;
    if (!path) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "path is NULL");
    teexec_dataset *d = calloc(1, sizeof(*d));
    if (!d) return tx_oom();
    teexec_status *st = tx_npz_read_file(path, 0, &d->npz);
    if (!st) {
        d->tensors = calloc(d->npz->count ? d->npz->count : 1, sizeof(*d->tensors));
        if (!d->tensors) st = tx_oom();
    }
    if (st) {
        teexec_dataset_destroy(d);
        return st;
    }
    /* the tensors move into the public wrappers; the archive keeps names */
    for (size_t i = 0; i < d->npz->count; i++) {
        d->tensors[i].t = d->npz->arrays[i].tensor;
        memset(&d->npz->arrays[i].tensor, 0, sizeof(d->npz->arrays[i].tensor));
    }
    *out = d;
    return NULL;
}

size_t teexec_dataset_count(const teexec_dataset *d) { return d && d->npz ? d->npz->count : 0; }

const char *teexec_dataset_name(const teexec_dataset *d, size_t i)
{
    return i < teexec_dataset_count(d) ? d->npz->arrays[i].name : NULL;
}

const teexec_tensor *teexec_dataset_tensor(const teexec_dataset *d, size_t i)
{
    return i < teexec_dataset_count(d) ? &d->tensors[i] : NULL;
}

void teexec_dataset_destroy(teexec_dataset *d)
{
    if (!d) return;
    if (d->tensors && d->npz)
        for (size_t i = 0; i < d->npz->count; i++) tx_tensor_release(&d->tensors[i].t);
    free(d->tensors);
    tx_npz_free(d->npz);
    free(d);
}
