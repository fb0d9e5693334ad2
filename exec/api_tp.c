/* api_tp.c - teexec_model_split_tensor_parallel: one rank's model of a
 * tensor-parallel split (format/model_tp_split.h says which chains split
 * and how). */
#include "exec/model_internal.h"
#include "format/model_tp_split.h"

teexec_status *teexec_model_split_tensor_parallel(const teexec_model *model, int world_size,
                                                  int rank, const char *path, int *out_n_split)
{
    int n = 0;
    if (out_n_split) *out_n_split = 0;
    if (!model || !path)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "teexec_model_split_tensor_parallel: model or path is NULL");
    teexec_status *st = tx_model_write_tp_rank(model->file, world_size, rank, path, &n);
    if (out_n_split) *out_n_split = n;
    return tx_status_with_file(st, model->file->path);
}
