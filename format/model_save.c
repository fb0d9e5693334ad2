/* model_save.c - a loaded model written back with replaced initializers
 * (model_save.h). */
#include "format/model_save.h"

#include "format/atomic_write.h"
#include "format/external_data.h"
#include "format/model_write.h"
#include "format/tensor_proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Initializers from this size on go to the data file in external mode. */
#define DATA_MIN_BYTES ((size_t)64 << 10)

static bool is_external(const Onnx__TensorProto *tp)
{
    return tp->has_data_location &&
           tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* Packs m, of `len` packed bytes (refusing what protobuf could not read
 * back), and writes it. */
static teexec_status *pack_and_write(const Onnx__ModelProto *m, size_t len, const char *path)
{
    if (len > (size_t)INT32_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "model save: the model serializes to %zu bytes, over "
                                          "protobuf's 2 GiB limit", len);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return tx_oom();
    onnx__model_proto__pack(m, buf);
    const void *pieces[1] = {buf};
    size_t sizes[1] = {len};
    teexec_status *st = tx_write_file_atomic(path, 1, pieces, sizes);
    free(buf);
    return st;
}

/* What a save writes from: the loaded file and the replacement callback. */
typedef struct save_ctx {
    const tx_onnx_file *file;
    tx_initializer_replace_fn replace;
    void *ctx;
} save_ctx;

/* Writes the model with every initializer that was external in the source
 * or is DATA_MIN_BYTES or more in "<path>.data" beside it (written first),
 * so the saved model stands on its own in any folder and under 2 GiB. */
static teexec_status *save_external(const save_ctx *c, const char *path)
{
    const Onnx__GraphProto *gp = c->file->model->graph;
    size_t ni = gp->n_initializer;
    char *data_path = NULL, *location = NULL;
    TX_TRY(tx_external_data_names(path, &data_path, &location));
    tx_mw *w = NULL;
    tx_side_data data = {0};
    Onnx__TensorProto **inits = calloc(ni ? ni : 1, sizeof(*inits));
    teexec_status *st = inits ? tx_mw_create(&w) : tx_oom();
    for (size_t i = 0; i < ni && !st; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        inits[i] = (Onnx__TensorProto *)tp;
        const tx_tensor *d = NULL;
        tx_tensor scratch, loaded;
        memset(&scratch, 0, sizeof scratch);
        memset(&loaded, 0, sizeof loaded);
        st = c->replace(c->ctx, tp->name, &d, &scratch);
        if (!st && !d &&
            (is_external(tp) || !tp->has_raw_data || tp->raw_data.len >= DATA_MIN_BYTES)) {
            /* the loaded tensor, decoded when it must move to the data file */
            st = tx_tensor_from_proto(tp, c->file, &loaded);
            if (!st && (is_external(tp) || loaded.nbytes >= DATA_MIN_BYTES)) d = &loaded;
        }
        if (!st && d) {
            bool to_data = is_external(tp) || d->nbytes >= DATA_MIN_BYTES;
            st = to_data ? tx_mw_tensor_side(w, tp->name, d, &data, location, &inits[i])
                         : tx_mw_tensor(w, tp->name, d, &inits[i]);
        }
        tx_tensor_release(&scratch);
        tx_tensor_release(&loaded);
    }
    if (!st) st = tx_side_write_file(&data, data_path);
    if (!st) {
        Onnx__GraphProto g2 = *gp;
        g2.initializer = inits;
        Onnx__ModelProto m2 = *c->file->model;
        m2.graph = &g2;
        st = pack_and_write(&m2, onnx__model_proto__get_packed_size(&m2), path);
    }
    tx_side_free(&data);
    tx_mw_free(w);
    free(inits);
    free(data_path);
    free(location);
    return st;
}

teexec_status *tx_model_save_replacing(const tx_onnx_file *file, const char *path,
                                       tx_initializer_replace_fn replace, void *ctx)
{
    if (!file || !file->model || !file->model->graph || !path || !replace)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "model save: NULL argument");
    const Onnx__ModelProto *mp = file->model;
    const Onnx__GraphProto *gp = mp->graph;
    size_t ni = gp->n_initializer;
    save_ctx c = {file, replace, ctx};
    /* external data in the source would dangle from another folder: the
     * saved model gets its own data file */
    for (size_t i = 0; i < ni; i++)
        if (is_external(gp->initializer[i])) return save_external(&c, path);
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
    bool too_big = false;
    if (!st) {
        Onnx__GraphProto g2 = *gp;
        g2.initializer = inits;
        Onnx__ModelProto m2 = *mp;
        m2.graph = &g2;
        size_t len = onnx__model_proto__get_packed_size(&m2);
        too_big = len > (size_t)INT32_MAX;
        if (!too_big) st = pack_and_write(&m2, len, path);
    }
    for (size_t i = 0; i < ni; i++) {
        if (fresh && fresh[i]) onnx__tensor_proto__free_unpacked(fresh[i], NULL);
        if (blobs) free(blobs[i]);
    }
    free(inits);
    free(blobs);
    free(fresh);
    /* over protobuf's 2 GiB in one file: the weights go beside it */
    if (!st && too_big) st = save_external(&c, path);
    return st;
}
