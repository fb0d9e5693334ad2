/* model_write.c - an arena of protobuf-c messages and ModelProto packing. */
#include "format/model_write.h"

#include "base/checked.h"
#include "base/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocks are kept in a singly linked list; each allocation is its own block
 * so that large tensor payloads do not waste slack. */
typedef struct mw_block {
    struct mw_block *next;
    max_align_t payload[];
} mw_block;

struct tx_mw {
    mw_block *blocks;
};

teexec_status *tx_mw_create(tx_mw **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? NULL : tx_oom();
}

void tx_mw_free(tx_mw *w)
{
    if (!w) return;
    mw_block *b = w->blocks;
    while (b) {
        mw_block *next = b->next;
        free(b);
        b = next;
    }
    free(w);
}

void *tx_mw_alloc(tx_mw *w, size_t size)
{
    size_t total;
    if (!tx_add_size(sizeof(mw_block), size, &total)) return NULL;
    mw_block *b = calloc(1, total);
    if (!b) return NULL;
    b->next = w->blocks;
    w->blocks = b;
    return b->payload;
}

void *tx_mw_array(tx_mw *w, size_t count, size_t size)
{
    size_t total;
    if (!tx_mul_size(count, size, &total)) return NULL;
    return tx_mw_alloc(w, total);
}

char *tx_mw_strdup(tx_mw *w, const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = tx_mw_alloc(w, n);
    if (d) memcpy(d, s, n);
    return d;
}

/* A TensorProto with t's name, dtype and dims and no payload yet. */
static Onnx__TensorProto *tensor_header(tx_mw *w, const char *name, const tx_tensor *t)
{
    Onnx__TensorProto *tp = tx_mw_alloc(w, sizeof *tp);
    if (!tp) return NULL;
    onnx__tensor_proto__init(tp);
    tp->name = tx_mw_strdup(w, name ? name : "");
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    tp->n_dims = (size_t)(t->rank > 0 ? t->rank : 0);
    tp->dims = tx_mw_array(w, tp->n_dims, sizeof(int64_t));
    if (!tp->name || !tp->dims) return NULL;
    for (size_t d = 0; d < tp->n_dims; d++) tp->dims[d] = t->dims[d];
    return tp;
}

teexec_status *tx_mw_tensor(tx_mw *w, const char *name, const tx_tensor *t,
                            Onnx__TensorProto **out)
{
    *out = NULL;
    Onnx__TensorProto *tp = tensor_header(w, name, t);
    if (!tp) return tx_oom();
    if (t->dtype == TEEXEC_DTYPE_STRING) {
        const char *const *strs = t->data;
        if (t->numel > SIZE_MAX / sizeof(ProtobufCBinaryData)) return tx_oom();
        tp->n_string_data = (size_t)t->numel;
        tp->string_data = tx_mw_array(w, tp->n_string_data, sizeof(ProtobufCBinaryData));
        if (!tp->string_data) return tx_oom();
        for (size_t i = 0; i < tp->n_string_data; i++) {
            const char *s = strs[i] ? strs[i] : "";
            char *c = tx_mw_strdup(w, s);
            if (!c) return tx_oom();
            tp->string_data[i].data = (uint8_t *)c;
            tp->string_data[i].len = strlen(s);
        }
    } else {
        uint8_t *raw = tx_mw_alloc(w, t->nbytes);
        if (!raw) return tx_oom();
        if (t->nbytes) memcpy(raw, t->data, t->nbytes);
        tp->has_raw_data = 1;
        tp->raw_data.data = raw;
        tp->raw_data.len = t->nbytes;
    }
    *out = tp;
    return NULL;
}

teexec_status *tx_mw_tensor_side(tx_mw *w, const char *name, const tx_tensor *t,
                                 tx_side_data *side, const char *location,
                                 Onnx__TensorProto **out)
{
    *out = NULL;
    if (t->dtype == TEEXEC_DTYPE_STRING || tx_dtype_elem_size(t->dtype) == 0)
        return tx_mw_tensor(w, name, t, out);
    size_t offset = 0;
    TX_TRY(tx_side_append(side, t->data, t->nbytes, &offset));
    Onnx__TensorProto *tp = tensor_header(w, name, t);
    if (!tp) return tx_oom();
    tp->n_external_data = 3;
    tp->external_data = tx_mw_array(w, 3, sizeof(*tp->external_data));
    if (!tp->external_data) return tx_oom();
    tp->has_data_location = 1;
    tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    char num[2][32];
    snprintf(num[0], sizeof num[0], "%zu", offset);
    snprintf(num[1], sizeof num[1], "%zu", t->nbytes);
    const char *keys[3] = {"location", "offset", "length"};
    const char *vals[3] = {location, num[0], num[1]};
    for (int k = 0; k < 3; k++) {
        Onnx__StringStringEntryProto *e = tx_mw_alloc(w, sizeof *e);
        if (!e) return tx_oom();
        onnx__string_string_entry_proto__init(e);
        e->key = tx_mw_strdup(w, keys[k]);
        e->value = tx_mw_strdup(w, vals[k]);
        if (!e->key || !e->value) return tx_oom();
        tp->external_data[k] = e;
    }
    *out = tp;
    return NULL;
}

teexec_status *tx_mw_value_info(tx_mw *w, const char *name, teexec_dtype dtype, int32_t rank,
                                const int64_t *dims, char *const *dim_params,
                                Onnx__ValueInfoProto **out)
{
    *out = NULL;
    Onnx__ValueInfoProto *v = tx_mw_alloc(w, sizeof *v);
    Onnx__TypeProto *ty = tx_mw_alloc(w, sizeof *ty);
    Onnx__TypeProto__Tensor *tt = tx_mw_alloc(w, sizeof *tt);
    if (!v || !ty || !tt) return tx_oom();
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(ty);
    onnx__type_proto__tensor__init(tt);
    v->name = tx_mw_strdup(w, name);
    if (!v->name) return tx_oom();
    v->type = ty;
    ty->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty->tensor_type = tt;
    if (dtype != TEEXEC_DTYPE_UNDEFINED) {
        tt->has_elem_type = 1;
        tt->elem_type = (int32_t)dtype;
    }
    if (rank >= 0) {
        Onnx__TensorShapeProto *s = tx_mw_alloc(w, sizeof *s);
        if (!s) return tx_oom();
        onnx__tensor_shape_proto__init(s);
        s->n_dim = (size_t)rank;
        s->dim = tx_mw_array(w, s->n_dim, sizeof(void *));
        if (!s->dim) return tx_oom();
        for (int32_t d = 0; d < rank; d++) {
            Onnx__TensorShapeProto__Dimension *dim = tx_mw_alloc(w, sizeof *dim);
            if (!dim) return tx_oom();
            onnx__tensor_shape_proto__dimension__init(dim);
            if (dims[d] >= 0) {
                dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                dim->dim_value = dims[d];
            } else if (dim_params && dim_params[d]) {
                dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                dim->dim_param = tx_mw_strdup(w, dim_params[d]);
                if (!dim->dim_param) return tx_oom();
            }
            s->dim[d] = dim;
        }
        tt->shape = s;
    }
    *out = v;
    return NULL;
}

#define MW_MAKE(fn, type, init)                 \
    type *fn(tx_mw *w)                          \
    {                                           \
        type *m = tx_mw_alloc(w, sizeof *m);    \
        if (m) init(m);                         \
        return m;                               \
    }

MW_MAKE(tx_mw_model, Onnx__ModelProto, onnx__model_proto__init)
MW_MAKE(tx_mw_graph, Onnx__GraphProto, onnx__graph_proto__init)
MW_MAKE(tx_mw_node, Onnx__NodeProto, onnx__node_proto__init)
MW_MAKE(tx_mw_attr, Onnx__AttributeProto, onnx__attribute_proto__init)
MW_MAKE(tx_mw_function, Onnx__FunctionProto, onnx__function_proto__init)

Onnx__OperatorSetIdProto *tx_mw_opset(tx_mw *w, const char *domain, int64_t version)
{
    Onnx__OperatorSetIdProto *o = tx_mw_alloc(w, sizeof *o);
    if (!o) return NULL;
    onnx__operator_set_id_proto__init(o);
    o->domain = tx_mw_strdup(w, domain ? domain : "");
    if (!o->domain) return NULL;
    o->has_version = 1;
    o->version = version;
    return o;
}

teexec_status *tx_mw_pack(const Onnx__ModelProto *m, uint8_t **bytes, size_t *len)
{
    *bytes = NULL;
    *len = 0;
    size_t size = onnx__model_proto__get_packed_size(m);
    /* protobuf's own limit: a message over 2 GiB cannot be parsed back. */
    if (size > (size_t)INT32_MAX)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "model serializes to %zu bytes, over protobuf's 2 GiB limit "
                        "(external data writing is not supported)", size);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return tx_oom();
    size_t written = onnx__model_proto__pack(m, buf);
    if (written != size) {
        free(buf);
        return tx_error(TEEXEC_ERR_INTERNAL, "packed %zu bytes of a %zu-byte model", written,
                        size);
    }
    *bytes = buf;
    *len = size;
    return NULL;
}
