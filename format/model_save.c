/* model_save.c - a loaded model written back with replaced initializers
 * (model_save.h). */
#include "format/model_save.h"

#include "format/atomic_write.h"
#include "format/tensor_proto.h"

#include <stdlib.h>
#include <string.h>

teexec_status *tx_model_save_replacing(const tx_onnx_file *file, const char *path,
                                       tx_initializer_replace_fn replace, void *ctx)
{
    if (!file || !file->model || !file->model->graph || !path || !replace)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "model save: NULL argument");
    const Onnx__ModelProto *mp = file->model;
    const Onnx__GraphProto *gp = mp->graph;
    size_t ni = gp->n_initializer;
    Onnx__TensorProto **inits = calloc(ni ? ni : 1, sizeof(*inits));
    uint8_t **blobs = calloc(ni ? ni : 1, sizeof(*blobs));
    Onnx__TensorProto **fresh = calloc(ni ? ni : 1, sizeof(*fresh));
    teexec_status *st = NULL;
    if (!inits || !blobs || !fresh) st = tx_oom();
    for (size_t i = 0; i < ni && !st; i++) {
        inits[i] = gp->initializer[i];
        const char *name = gp->initializer[i]->name;
        const tx_tensor *d = NULL;
        tx_tensor scratch;
        memset(&scratch, 0, sizeof scratch);
        st = replace(ctx, name, &d, &scratch);
        size_t sz = 0;
        if (!st && d) st = tx_tensor_to_proto_bytes(d, name, &blobs[i], &sz);
        tx_tensor_release(&scratch);
        if (st) break;
        if (!d) continue;
        /* the encoder's bytes read back as the message the packer wants */
        fresh[i] = onnx__tensor_proto__unpack(NULL, sz, blobs[i]);
        if (!fresh[i]) {
            st = tx_error(TEEXEC_ERR_INTERNAL, "re-reading initializer \"%s\" failed", name);
            break;
        }
        inits[i] = fresh[i];
    }
    if (!st) {
        Onnx__GraphProto g2 = *gp;
        g2.initializer = inits;
        Onnx__ModelProto m2 = *mp;
        m2.graph = &g2;
        size_t len = onnx__model_proto__get_packed_size(&m2);
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf) {
            st = tx_oom();
        } else {
            onnx__model_proto__pack(&m2, buf);
            const void *pieces[1] = {buf};
            size_t sizes[1] = {len};
            st = tx_write_file_atomic(path, 1, pieces, sizes);
            free(buf);
        }
    }
    for (size_t i = 0; i < ni; i++) {
        if (fresh && fresh[i]) onnx__tensor_proto__free_unpacked(fresh[i], NULL);
        if (blobs) free(blobs[i]);
    }
    free(inits);
    free(blobs);
    free(fresh);
    return st;
}
