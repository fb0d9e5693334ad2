/*
 * model_builder.h - building small ONNX models in memory for tests, with
 * protobuf-c's generated structs, then packing them to bytes.
 *
 * Every allocation goes to an arena freed by mb_free_all(), so tests never
 * call protobuf_c_message_free_unpacked on hand-built messages. Not
 * thread-safe (tests are single-threaded). Header-only: each test program
 * includes it once.
 */
#ifndef TEEXEC_TESTS_MODEL_BUILDER_H
#define TEEXEC_TESTS_MODEL_BUILDER_H

#include "onnx.pb-c.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef MB_MAX
#define MB_MAX 64 /* entries per repeated field: plenty for unit tests */
#endif

static void **mb_arena;
static size_t mb_arena_n, mb_arena_cap;

static inline void *mb_alloc(size_t size)
{
    void *p = calloc(1, size ? size : 1);
    if (!p) abort();
    if (mb_arena_n == mb_arena_cap) {
        mb_arena_cap = mb_arena_cap ? mb_arena_cap * 2 : 256;
        mb_arena = realloc(mb_arena, mb_arena_cap * sizeof *mb_arena);
        if (!mb_arena) abort();
    }
    mb_arena[mb_arena_n++] = p;
    return p;
}

static inline void mb_free_all(void)
{
    for (size_t i = 0; i < mb_arena_n; i++) free(mb_arena[i]);
    free(mb_arena);
    mb_arena = NULL;
    mb_arena_n = mb_arena_cap = 0;
}

static inline char *mb_str(const char *s)
{
    char *d = mb_alloc(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

static inline void *mb_array(size_t elem)
{
    return mb_alloc(MB_MAX * elem);
}

static inline Onnx__ModelProto *mb_model(int64_t ir_version)
{
    Onnx__ModelProto *m = mb_alloc(sizeof *m);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    m->ir_version = ir_version;
    m->producer_name = mb_str("teexec-tests");
    m->producer_version = mb_str("1.0");
    m->opset_import = mb_array(sizeof(void *));
    m->functions = mb_array(sizeof(void *));
    return m;
}

static inline void mb_opset(Onnx__ModelProto *m, const char *domain, int64_t version)
{
    Onnx__OperatorSetIdProto *o = mb_alloc(sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = mb_str(domain);
    o->has_version = 1;
    o->version = version;
    m->opset_import[m->n_opset_import++] = o;
}

static inline Onnx__GraphProto *mb_graph(const char *name)
{
    Onnx__GraphProto *g = mb_alloc(sizeof *g);
    onnx__graph_proto__init(g);
    g->name = mb_str(name);
    g->node = mb_array(sizeof(void *));
    g->initializer = mb_array(sizeof(void *));
    g->input = mb_array(sizeof(void *));
    g->output = mb_array(sizeof(void *));
    g->value_info = mb_array(sizeof(void *));
    return g;
}

/* A tensor type; dims is a comma-separated list: a number, a dim_param
 * name, or "?" for an unknown extent; NULL means unknown rank, "" a
 * scalar. */
static inline Onnx__TypeProto *mb_tensor_type(int32_t elem, const char *dims)
{
    Onnx__TypeProto *t = mb_alloc(sizeof *t);
    onnx__type_proto__init(t);
    Onnx__TypeProto__Tensor *tt = mb_alloc(sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    if (dims) {
        Onnx__TensorShapeProto *s = mb_alloc(sizeof *s);
        onnx__tensor_shape_proto__init(s);
        s->dim = mb_array(sizeof(void *));
        tt->shape = s;
        const char *p = dims;
        while (*p) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            char tok[64];
            memcpy(tok, p, len);
            tok[len] = '\0';
            Onnx__TensorShapeProto__Dimension *d = mb_alloc(sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (tok[0] >= '0' && tok[0] <= '9') {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = strtoll(tok, NULL, 10);
            } else if (strcmp(tok, "?") != 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = mb_str(tok);
            }
            s->dim[s->n_dim++] = d;
            p = end ? end + 1 : p + len;
        }
    }
    return t;
}

static inline Onnx__ValueInfoProto *mb_value_info(const char *name, int32_t elem, const char *dims)
{
    Onnx__ValueInfoProto *v = mb_alloc(sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = mb_str(name);
    if (elem >= 0) v->type = mb_tensor_type(elem, dims);
    return v;
}

static inline void mb_input(Onnx__GraphProto *g, const char *name, int32_t elem, const char *dims)
{
    g->input[g->n_input++] = mb_value_info(name, elem, dims);
}

static inline void mb_output(Onnx__GraphProto *g, const char *name, int32_t elem, const char *dims)
{
    g->output[g->n_output++] = mb_value_info(name, elem, dims);
}

static inline void mb_value_info_add(Onnx__GraphProto *g, const char *name, int32_t elem,
                              const char *dims)
{
    g->value_info[g->n_value_info++] = mb_value_info(name, elem, dims);
}

/* A float initializer with raw_data holding n values (value i = i). */
static inline Onnx__TensorProto *mb_float_tensor(const char *name, const int64_t *dims, size_t rank)
{
    Onnx__TensorProto *t = mb_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->dims = mb_alloc(rank * sizeof(int64_t));
    t->n_dims = rank;
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        n *= (size_t)dims[i];
    }
    float *vals = mb_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) vals[i] = (float)i;
    t->has_raw_data = 1;
    t->raw_data.data = (uint8_t *)vals;
    t->raw_data.len = n * sizeof(float);
    return t;
}

static inline void mb_init(Onnx__GraphProto *g, const char *name, const int64_t *dims, size_t rank)
{
    g->initializer[g->n_initializer++] = mb_float_tensor(name, dims, rank);
}

/* Splits "a,b,,c" into strings ("" for omitted optionals). */
static inline char **mb_names(const char *list, size_t *n)
{
    char **out = mb_array(sizeof(char *));
    *n = 0;
    if (!list) return out;
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *s = mb_alloc(len + 1);
        memcpy(s, p, len);
        out[(*n)++] = s;
        if (!end) break;
        p = end + 1;
    }
    return out;
}

static inline Onnx__NodeProto *mb_node_new(const char *name, const char *op, const char *domain,
                                    const char *inputs, const char *outputs)
{
    Onnx__NodeProto *n = mb_alloc(sizeof *n);
    onnx__node_proto__init(n);
    n->name = mb_str(name);
    n->op_type = mb_str(op);
    if (domain) n->domain = mb_str(domain);
    n->input = mb_names(inputs, &n->n_input);
    n->output = mb_names(outputs, &n->n_output);
    n->attribute = mb_array(sizeof(void *));
    return n;
}

static inline Onnx__NodeProto *mb_node(Onnx__GraphProto *g, const char *name, const char *op,
                                const char *domain, const char *inputs, const char *outputs)
{
    Onnx__NodeProto *n = mb_node_new(name, op, domain, inputs, outputs);
    g->node[g->n_node++] = n;
    return n;
}

static inline Onnx__AttributeProto *mb_attr(Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = mb_alloc(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = mb_str(name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static inline void mb_attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = mb_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static inline void mb_attr_float(Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = mb_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static inline void mb_attr_string(Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = mb_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)mb_str(v);
    a->s.len = strlen(v);
}

static inline void mb_attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count)
{
    Onnx__AttributeProto *a = mb_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = mb_alloc(count * sizeof(int64_t));
    memcpy(a->ints, v, count * sizeof(int64_t));
    a->n_ints = count;
}

static inline void mb_attr_graph(Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g)
{
    Onnx__AttributeProto *a = mb_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    a->g = g;
}

static inline Onnx__FunctionProto *mb_function(Onnx__ModelProto *m, const char *domain,
                                        const char *name, const char *inputs,
                                        const char *outputs)
{
    Onnx__FunctionProto *f = mb_alloc(sizeof *f);
    onnx__function_proto__init(f);
    f->domain = mb_str(domain);
    f->name = mb_str(name);
    f->input = mb_names(inputs, &f->n_input);
    f->output = mb_names(outputs, &f->n_output);
    f->node = mb_array(sizeof(void *));
    f->opset_import = mb_array(sizeof(void *));
    f->attribute = mb_array(sizeof(char *));
    m->functions[m->n_functions++] = f;
    return f;
}

/* Adds a length-delimited unknown field (a field newer than the system's
 * onnx.proto, e.g. FunctionProto.overload = 13) with a string payload. */
static inline void mb_unknown_string(ProtobufCMessage *msg, uint32_t tag, const char *s)
{
    size_t len = strlen(s);
    ProtobufCMessageUnknownField *u = mb_alloc(sizeof *u);
    u->tag = tag;
    u->wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
    u->data = mb_alloc(len + 1);
    u->data[0] = (uint8_t)len; /* tests use short strings: one-byte varint */
    memcpy(u->data + 1, s, len);
    u->len = len + 1;
    msg->unknown_fields = u;
    msg->n_unknown_fields = 1;
}

/* Packs the message into a malloc'd buffer (caller frees). */
static inline uint8_t *mb_pack(const Onnx__ModelProto *m, size_t *size)
{
    *size = protobuf_c_message_get_packed_size(&m->base);
    uint8_t *buf = malloc(*size ? *size : 1);
    if (!buf) abort();
    protobuf_c_message_pack(&m->base, buf);
    return buf;
}

#endif
