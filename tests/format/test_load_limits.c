/* Tests for the load budgets and the wire pre-scan (format/onnx_load.c,
 * format/wire_scan.c, format/model_check.c): every budget triggers with
 * TEEXEC_ERR_LIMIT naming it; malformed bytes give TEEXEC_ERR_BAD_MODEL. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/onnx_load.h"
#include "format/tensor_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void expect_error(teexec_status *st, teexec_code code, const char *substr)
{
    if (!st) fail_msg("expected an error containing '%s', got success", substr);
    const char *msg = teexec_status_message(st);
    if (teexec_status_code(st) != code || !strstr(msg, substr)) {
        print_message("got code %d: %s\n", (int)teexec_status_code(st), msg);
        teexec_status_destroy(st);
        fail_msg("expected code %d with '%s'", (int)code, substr);
    }
    teexec_status_destroy(st);
}

static void expect_ok(teexec_status *st)
{
    if (st) {
        print_message("unexpected error: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

/* ---- a tiny protobuf writer for byte-level cases ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_varint(buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) t[n] |= 0x80;
        n++;
    } while (v);
    put(b, t, n);
}

static void put_tag(buf *b, unsigned field, unsigned wt)
{
    put_varint(b, ((uint64_t)field << 3) | wt);
}

static void put_len(buf *b, unsigned field, const void *d, size_t n)
{
    put_tag(b, field, 2);
    put_varint(b, n);
    put(b, d, n);
}

/* ---- models built with the generated structs ---- */

static uint8_t *pack_model(Onnx__GraphProto *g, size_t *size)
{
    Onnx__OperatorSetIdProto op = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    op.domain = (char *)"";
    op.has_version = 1;
    op.version = 17;
    Onnx__OperatorSetIdProto *ops[] = {&op};
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.n_opset_import = 1;
    m.opset_import = ops;
    m.graph = g;
    *size = onnx__model_proto__get_packed_size(&m);
    uint8_t *b = malloc(*size);
    assert_non_null(b);
    onnx__model_proto__pack(&m, b);
    return b;
}

static teexec_status *load_graph(Onnx__GraphProto *g, const teexec_load_options *o)
{
    size_t n;
    uint8_t *b = pack_model(g, &n);
    tx_onnx_file *f = NULL;
    teexec_status *st = tx_onnx_load_memory(b, n, NULL, o, &f);
    free(b);
    if (!st) assert_non_null(f->model);
    tx_onnx_file_free(f);
    return st;
}

static void defaults_and_clamps(void **state)
{
    (void)state;
    teexec_load_options o;
    tx_load_options_resolve(NULL, &o);
    assert_int_equal(o.max_file_bytes, ((uint64_t)2 << 30) - 2); /* protobuf-c: < INT_MAX */
    assert_int_equal(o.max_external_bytes, (uint64_t)1 << 40);
    assert_int_equal(o.max_tensor_count, 1000000);
    assert_int_equal(o.max_tensor_elements, (uint64_t)1 << 40);
    assert_int_equal(o.max_rank, 32);
    assert_int_equal(o.max_attributes, 4096);
    assert_int_equal(o.max_nesting_depth, 32);
    assert_int_equal(o.max_nodes, 10000000);
    teexec_load_options in = {0};
    in.max_rank = 1000;
    in.max_nesting_depth = 100000;
    in.max_nodes = 7;
    tx_load_options_resolve(&in, &o);
    assert_int_equal(o.max_rank, 32);
    assert_int_equal(o.max_nesting_depth, 64);
    assert_int_equal(o.max_nodes, 7);
}

static void tensor_count_budget(void **state)
{
    (void)state;
    Onnx__TensorProto t[11];
    Onnx__TensorProto *tp[11];
    for (int i = 0; i < 11; i++) {
        onnx__tensor_proto__init(&t[i]);
        t[i].has_data_type = 1;
        t[i].data_type = TEEXEC_DTYPE_FLOAT;
        tp[i] = &t[i];
    }
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.n_initializer = 11;
    g.initializer = tp;
    teexec_load_options o = {0};
    o.max_tensor_count = 10;
    expect_error(load_graph(&g, &o), TEEXEC_ERR_LIMIT, "max_tensor_count");
    o.max_tensor_count = 11;
    expect_ok(load_graph(&g, &o));
}

static void node_and_attribute_budgets(void **state)
{
    (void)state;
    Onnx__AttributeProto a[5];
    Onnx__AttributeProto *ap[5];
    for (int i = 0; i < 5; i++) {
        onnx__attribute_proto__init(&a[i]);
        a[i].name = (char *)"k";
        a[i].has_type = 1;
        a[i].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a[i].has_i = 1;
        ap[i] = &a[i];
    }
    Onnx__NodeProto n[5];
    Onnx__NodeProto *np[5];
    for (int i = 0; i < 5; i++) {
        onnx__node_proto__init(&n[i]);
        n[i].op_type = (char *)"Relu";
        np[i] = &n[i];
    }
    n[2].n_attribute = 5;
    n[2].attribute = ap;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.n_node = 5;
    g.node = np;
    teexec_load_options o = {0};
    o.max_nodes = 4;
    expect_error(load_graph(&g, &o), TEEXEC_ERR_LIMIT, "max_nodes");
    o.max_nodes = 5;
    o.max_attributes = 4;
    expect_error(load_graph(&g, &o), TEEXEC_ERR_LIMIT, "max_attributes");
    o.max_attributes = 5;
    expect_ok(load_graph(&g, &o));
}

static void rank_budget(void **state)
{
    (void)state;
    int64_t dims[1000];
    for (int i = 0; i < 1000; i++) dims[i] = 1;
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.has_data_type = 1;
    t.data_type = TEEXEC_DTYPE_FLOAT;
    t.n_dims = 1000;
    t.dims = dims;
    Onnx__TensorProto *tp[] = {&t};
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.n_initializer = 1;
    g.initializer = tp;
    expect_error(load_graph(&g, NULL), TEEXEC_ERR_LIMIT, "max_rank");
    t.n_dims = 33;
    expect_error(load_graph(&g, NULL), TEEXEC_ERR_LIMIT, "max_rank");
    t.n_dims = 32;
    float one = 1;
    t.has_raw_data = 1;
    t.raw_data.data = (uint8_t *)&one;
    t.raw_data.len = 4;
    expect_ok(load_graph(&g, NULL));
    teexec_load_options o = {0};
    o.max_rank = 4;
    expect_error(load_graph(&g, &o), TEEXEC_ERR_LIMIT, "max_rank");

    /* a graph input whose declared shape has 40 dims */
    Onnx__TensorShapeProto__Dimension d[40];
    Onnx__TensorShapeProto__Dimension *dp[40];
    for (int i = 0; i < 40; i++) {
        onnx__tensor_shape_proto__dimension__init(&d[i]);
        d[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d[i].dim_value = 2;
        dp[i] = &d[i];
    }
    Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
    shape.n_dim = 40;
    shape.dim = dp;
    Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1;
    tt.elem_type = 1;
    tt.shape = &shape;
    Onnx__TypeProto ty = ONNX__TYPE_PROTO__INIT;
    ty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    ty.tensor_type = &tt;
    Onnx__ValueInfoProto vi = ONNX__VALUE_INFO_PROTO__INIT;
    vi.name = (char *)"x";
    vi.type = &ty;
    Onnx__ValueInfoProto *vip[] = {&vi};
    Onnx__GraphProto g2 = ONNX__GRAPH_PROTO__INIT;
    g2.n_input = 1;
    g2.input = vip;
    expect_error(load_graph(&g2, NULL), TEEXEC_ERR_LIMIT, "max_rank");
    shape.n_dim = 3;
    expect_ok(load_graph(&g2, NULL));
}

static void element_budget_and_dims(void **state)
{
    (void)state;
    int64_t dims[] = {1 << 20, 1 << 21};
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.name = (char *)"big";
    t.has_data_type = 1;
    t.data_type = TEEXEC_DTYPE_FLOAT;
    t.n_dims = 2;
    t.dims = dims;
    Onnx__TensorProto *tp[] = {&t};
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.n_initializer = 1;
    g.initializer = tp;
    expect_error(load_graph(&g, NULL), TEEXEC_ERR_LIMIT, "max_tensor_elements");
    teexec_load_options o = {0};
    o.max_tensor_elements = (uint64_t)1 << 41; /* allowed now: no payload yet is fine at load */
    expect_ok(load_graph(&g, &o));
    int64_t ovf[] = {INT64_MAX, 3};
    t.dims = ovf;
    expect_error(load_graph(&g, NULL), TEEXEC_ERR_LIMIT, "overflows 64 bits");
    int64_t neg[] = {4, -2};
    t.dims = neg;
    expect_error(load_graph(&g, NULL), TEEXEC_ERR_BAD_MODEL, "negative dimension");
    int64_t ok2[] = {0, 2};
    t.dims = ok2;
    t.data_type = 0;
    expect_error(load_graph(&g, NULL), TEEXEC_ERR_BAD_MODEL, "UNDEFINED");
    t.data_type = TEEXEC_DTYPE_FLOAT;
    expect_ok(load_graph(&g, NULL));
}

/* Graph -> Node -> Attribute(g) -> Graph ... `depth` graphs deep. */
static teexec_status *load_nested(int depth, const teexec_load_options *o)
{
    Onnx__GraphProto *g = calloc((size_t)depth, sizeof(*g));
    Onnx__NodeProto *n = calloc((size_t)depth, sizeof(*n));
    Onnx__NodeProto **np = calloc((size_t)depth, sizeof(*np));
    Onnx__AttributeProto *a = calloc((size_t)depth, sizeof(*a));
    Onnx__AttributeProto **ap = calloc((size_t)depth, sizeof(*ap));
    assert_true(g && n && np && a && ap);
    for (int i = 0; i < depth; i++) {
        onnx__graph_proto__init(&g[i]);
        g[i].name = (char *)"body";
        if (i + 1 < depth) {
            onnx__node_proto__init(&n[i]);
            n[i].op_type = (char *)"If";
            onnx__attribute_proto__init(&a[i]);
            a[i].name = (char *)"then_branch";
            a[i].has_type = 1;
            a[i].type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
            a[i].g = &g[i + 1];
            ap[i] = &a[i];
            n[i].n_attribute = 1;
            n[i].attribute = &ap[i];
            np[i] = &n[i];
            g[i].n_node = 1;
            g[i].node = &np[i];
        }
    }
    size_t size;
    uint8_t *b = pack_model(&g[0], &size);
    tx_onnx_file *f = NULL;
    teexec_status *st = tx_onnx_load_memory(b, size, NULL, o, &f);
    tx_onnx_file_free(f);
    free(b);
    free(g), free(n), free(np), free(a), free(ap);
    return st;
}

static void nesting_bombs(void **state)
{
    (void)state;
    expect_ok(load_nested(3, NULL));
    expect_ok(load_nested(32, NULL));
    expect_error(load_nested(33, NULL), TEEXEC_ERR_LIMIT, "max_nesting_depth");
    expect_error(load_nested(100, NULL), TEEXEC_ERR_LIMIT, "max_nesting_depth");
    teexec_load_options o = {0};
    o.max_nesting_depth = 2;
    expect_error(load_nested(3, &o), TEEXEC_ERR_LIMIT, "max_nesting_depth");
    o.max_nesting_depth = 1000; /* clamped to the hard maximum 64 */
    expect_error(load_nested(65, &o), TEEXEC_ERR_LIMIT, "max_nesting_depth");

    /* 200000 levels of Graph/Node/Attribute written as raw bytes, built
     * backwards from the innermost graph: refused without recursion (no
     * stack overflow) and in linear time. */
    size_t cap = (size_t)200000 * 3 * 8 + 16, pos = cap;
    uint8_t *r = malloc(cap);
    assert_non_null(r);
    static const unsigned fields[3] = {6, 5, 1}; /* Attribute.g, Node.attribute, Graph.node */
    for (int i = 0; i < 200000 * 3; i++) {
        uint64_t len = cap - pos;
        uint8_t v[10];
        size_t k = 0;
        do {
            v[k] = (uint8_t)(len & 0x7f);
            len >>= 7;
            if (len) v[k] |= 0x80;
            k++;
        } while (len);
        pos -= k;
        memcpy(r + pos, v, k);
        r[--pos] = (uint8_t)((fields[i % 3] << 3) | 2);
    }
    buf model = {0};
    put_len(&model, 7, r + pos, cap - pos);
    free(r);
    tx_onnx_file *f = NULL;
    expect_error(tx_onnx_load_memory(model.p, model.n, NULL, NULL, &f), TEEXEC_ERR_LIMIT,
                 "max_nesting_depth");
    assert_null(f);
    free(model.p);

    /* sequence(sequence(...)) types 1000 deep in a graph input */
    buf ty = {0};
    {
        buf tt = {0};
        put_tag(&tt, 1, 0), put_varint(&tt, 1); /* Tensor.elem_type = FLOAT */
        put_len(&ty, 1, tt.p, tt.n);            /* TypeProto.tensor_type */
        free(tt.p);
    }
    for (int i = 0; i < 1000; i++) {
        buf seq = {0}, outer = {0};
        put_len(&seq, 1, ty.p, ty.n);     /* Sequence.elem_type */
        put_len(&outer, 4, seq.p, seq.n); /* TypeProto.sequence_type */
        free(seq.p), free(ty.p);
        ty = outer;
    }
    buf vi = {0}, g = {0};
    put_len(&vi, 1, "x", 1);
    put_len(&vi, 2, ty.p, ty.n);
    put_len(&g, 11, vi.p, vi.n); /* GraphProto.input */
    buf m = {0};
    put_len(&m, 7, g.p, g.n);
    expect_error(tx_onnx_load_memory(m.p, m.n, NULL, NULL, &f), TEEXEC_ERR_LIMIT,
                 "types nested");
    free(ty.p), free(vi.p), free(g.p), free(m.p);
}

static uint8_t *small_valid_model(size_t *size)
{
    float w[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[] = {2, 3};
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.name = (char *)"w";
    t.has_data_type = 1;
    t.data_type = TEEXEC_DTYPE_FLOAT;
    t.n_dims = 2;
    t.dims = dims;
    t.has_raw_data = 1;
    t.raw_data.data = (uint8_t *)w;
    t.raw_data.len = sizeof w;
    Onnx__TensorProto *tp[] = {&t};
    char *ins[] = {(char *)"x", (char *)"w"};
    char *outs[] = {(char *)"y"};
    Onnx__NodeProto n = ONNX__NODE_PROTO__INIT;
    n.op_type = (char *)"MatMul";
    n.name = (char *)"mm";
    n.n_input = 2, n.input = ins;
    n.n_output = 1, n.output = outs;
    Onnx__NodeProto *np[] = {&n};
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.name = (char *)"g";
    g.n_node = 1, g.node = np;
    g.n_initializer = 1, g.initializer = tp;
    return pack_model(&g, size);
}

static void truncated_and_garbage_bytes(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = small_valid_model(&n);
    tx_onnx_file *f = NULL;
    expect_ok(tx_onnx_load_memory(b, n, NULL, NULL, &f));
    tx_tensor t;
    expect_ok(tx_tensor_from_proto(f->model->graph->initializer[0], f, &t));
    assert_true(((float *)t.data)[5] == 6.0f);
    tx_tensor_release(&t);
    tx_onnx_file_free(f);
    /* Every cut point: never a crash; a cut inside the graph is malformed. */
    unsigned bad = 0;
    for (size_t cut = 0; cut < n; cut++) {
        teexec_status *st = tx_onnx_load_memory(b, cut, NULL, NULL, &f);
        if (st) {
            teexec_code c = teexec_status_code(st);
            assert_true(c == TEEXEC_ERR_BAD_MODEL);
            bad++;
        }
        teexec_status_destroy(st);
        tx_onnx_file_free(f);
    }
    assert_true(bad >= n - 8); /* only cuts at top-level field boundaries can be valid */
    /* a cut in the middle of the raw_data */
    expect_error(tx_onnx_load_memory(b, n - 20, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL,
                 "malformed protobuf");

    /* Seeded garbage and random byte flips: no crash, no sanitizer report. */
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    uint8_t *g = malloc(n);
    for (int round = 0; round < 3000; round++) {
        memcpy(g, b, n);
        int flips = 1 + round % 4;
        for (int k = 0; k < flips; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            g[(seed >> 33) % n] = (uint8_t)(seed >> 24);
        }
        teexec_status *st = tx_onnx_load_memory(g, n, NULL, NULL, &f);
        if (!st) {
            const Onnx__GraphProto *gr = f->model->graph;
            for (size_t i = 0; i < gr->n_initializer; i++) {
                teexec_status *s2 = tx_tensor_from_proto(gr->initializer[i], f, &t);
                teexec_status_destroy(s2);
                tx_tensor_release(&t);
            }
        }
        teexec_status_destroy(st);
        tx_onnx_file_free(f);
        f = NULL;
    }
    free(g);
    free(b);
    uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    expect_error(tx_onnx_load_memory(junk, sizeof junk, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL,
                 "malformed protobuf");
    expect_error(tx_onnx_load_memory("", 0, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL, "empty");
}

static void wire_level_errors(void **state)
{
    (void)state;
    tx_onnx_file *f = NULL;
    buf b = {0};
    /* ir_version (field 1, varint) sent length-delimited */
    put_len(&b, 1, "abc", 3);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL,
                 "ModelProto.ir_version): wire type length-delimited where the schema says varint");
    b.n = 0;
    /* graph (field 7, message) sent as a varint */
    put_tag(&b, 7, 0), put_varint(&b, 5);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL,
                 "wire type varint where the schema says length-delimited");
    b.n = 0;
    /* a graph whose declared length is 2^40 */
    put_tag(&b, 7, 2), put_varint(&b, (uint64_t)1 << 40);
    put(&b, "\x0a\x00", 2);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL,
                 "2 GiB or more");
    b.n = 0;
    put_tag(&b, 7, 2), put_varint(&b, 1000);
    put(&b, "\x0a\x00", 2);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL,
                 "declared length 1000 runs past the end");
    b.n = 0;
    /* group wire types and field number 0 */
    put_tag(&b, 7, 3);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL,
                 "start-group");
    b.n = 0;
    put_tag(&b, 0, 0), put_varint(&b, 1);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL,
                 "field number 0");
    b.n = 0;
    /* an 11-byte varint */
    put_tag(&b, 1, 0);
    put(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL, "varint");
    b.n = 0;
    /* a NUL inside producer_name (string) */
    put_len(&b, 2, "ab\0cd", 5);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_BAD_MODEL, "NUL byte");
    b.n = 0;

    /* a singular message twice (protobuf-c would merge them) and two
     * members of the TypeProto oneof */
    put_len(&b, 7, "", 0);
    put_len(&b, 7, "", 0);
    expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_UNSUPPORTED,
                 "ModelProto.graph occurs twice");
    b.n = 0;
    {
        buf ty = {0}, vi = {0}, g = {0};
        put_len(&ty, 1, "\x08\x01", 2); /* tensor_type { elem_type: 1 } */
        put_len(&ty, 4, "", 0);         /* sequence_type {} */
        put_len(&vi, 2, ty.p, ty.n);
        put_len(&g, 11, vi.p, vi.n);
        put_len(&b, 7, g.p, g.n);
        expect_error(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f), TEEXEC_ERR_UNSUPPORTED,
                     "sets both tensor_type and sequence_type");
        free(ty.p), free(vi.p), free(g.p);
        b.n = 0;
    }

    /* Unknown fields of every wire type are skipped; packed and unpacked dims
     * are both accepted. */
    buf t = {0};
    put_tag(&t, 1, 0), put_varint(&t, 2);    /* dims: 2 (unpacked) */
    put_len(&t, 1, "\x03\x04", 2);           /* dims: 3, 4 (packed) */
    put_tag(&t, 2, 0), put_varint(&t, 3);    /* data_type INT8 */
    put_len(&t, 8, "w", 1);
    uint8_t raw[24] = {0};
    put_len(&t, 9, raw, 24);
    put_tag(&t, 99, 0), put_varint(&t, 12345);
    put_tag(&t, 98, 1), put(&t, "12345678", 8);
    put_tag(&t, 97, 5), put(&t, "1234", 4);
    put_len(&t, 96, "\xff\xff\xff", 3);      /* unknown: never entered */
    buf g = {0};
    put_len(&g, 5, t.p, t.n);
    put_len(&b, 7, g.p, g.n);
    expect_ok(tx_onnx_load_memory(b.p, b.n, NULL, NULL, &f));
    tx_tensor ten;
    expect_ok(tx_tensor_from_proto(f->model->graph->initializer[0], f, &ten));
    assert_int_equal(ten.rank, 3);
    assert_int_equal(ten.numel, 24);
    tx_tensor_release(&ten);
    tx_onnx_file_free(f);
    /* a packed run of fixed32 with a partial element (float_data = field 4) */
    buf t2 = {0};
    put_len(&t2, 4, "\x00\x00\x80\x3f\x00", 5);
    Onnx__TensorProto *tp = NULL;
    expect_error(tx_tensor_proto_parse(t2.p, t2.n, NULL, &tp), TEEXEC_ERR_BAD_MODEL,
                 "partial element");
    free(t.p), free(t2.p), free(g.p), free(b.p);
}

static void unpack_memory_budget(void **state)
{
    (void)state;
    /* 400000 empty initializers: 2 bytes each on the wire, ~200 bytes each
     * unpacked: over 8x the input + 64 MiB, within the tensor count. */
    buf g = {0};
    for (int i = 0; i < 400000; i++) put(&g, "\x2a\x00", 2);
    buf m = {0};
    put_len(&m, 7, g.p, g.n);
    tx_onnx_file *f = NULL;
    expect_error(tx_onnx_load_memory(m.p, m.n, NULL, NULL, &f), TEEXEC_ERR_LIMIT,
                 "unpack memory budget");
    free(g.p), free(m.p);
}

static void file_level(void **state)
{
    (void)state;
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/teexec-load-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
    char p[512];
    tx_onnx_file *f = NULL;
    expect_error(tx_onnx_load_file(dir, NULL, &f), TEEXEC_ERR_BAD_MODEL, "not a regular file");
    snprintf(p, sizeof p, "%s/fifo.onnx", dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    expect_error(tx_onnx_load_file(p, NULL, &f), TEEXEC_ERR_BAD_MODEL, "not a regular file");
    unlink(p);
    snprintf(p, sizeof p, "%s/missing.onnx", dir);
    expect_error(tx_onnx_load_file(p, NULL, &f), TEEXEC_ERR_IO, "cannot open");
    snprintf(p, sizeof p, "%s/empty.onnx", dir);
    FILE *fp = fopen(p, "wb");
    fclose(fp);
    expect_error(tx_onnx_load_file(p, NULL, &f), TEEXEC_ERR_BAD_MODEL, "empty");
    unlink(p);
    size_t n;
    uint8_t *b = small_valid_model(&n);
    snprintf(p, sizeof p, "%s/m.onnx", dir);
    fp = fopen(p, "wb");
    assert_int_equal(fwrite(b, 1, n, fp), n);
    fclose(fp);
    expect_ok(tx_onnx_load_file(p, NULL, &f));
    assert_string_equal(f->path, p);
    assert_string_equal(f->base_dir, dir);
    assert_int_equal(f->model->graph->n_initializer, 1);
    tx_onnx_file_free(f);
    teexec_load_options o = {0};
    o.max_file_bytes = 10;
    teexec_status *st = tx_onnx_load_file(p, &o, &f);
    assert_string_equal(teexec_status_file(st), p);
    expect_error(st, TEEXEC_ERR_LIMIT, "max_file_bytes");
    expect_error(tx_onnx_load_memory(b, n, NULL, &o, &f), TEEXEC_ERR_LIMIT, "max_file_bytes");
    unlink(p);
    rmdir(dir);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_and_clamps),
        cmocka_unit_test(tensor_count_budget),
        cmocka_unit_test(node_and_attribute_budgets),
        cmocka_unit_test(rank_budget),
        cmocka_unit_test(element_budget_and_dims),
        cmocka_unit_test(nesting_bombs),
        cmocka_unit_test(truncated_and_garbage_bytes),
        cmocka_unit_test(wire_level_errors),
        cmocka_unit_test(unpack_memory_budget),
        cmocka_unit_test(file_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
