/* Tests for TensorProto decoding/encoding (format/tensor_proto.c) and
 * external data (format/external_data.c). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/dtype.h"
#include "format/external_data.h"
#include "format/model_save.h"
#include "format/onnx_load.h"
#include "format/tensor_proto.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

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

static Onnx__TensorProto make_tp(int dtype, size_t rank, int64_t *dims)
{
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.name = (char *)"t";
    tp.has_data_type = 1;
    tp.data_type = dtype;
    tp.n_dims = rank;
    tp.dims = dims;
    return tp;
}

static void set_raw(Onnx__TensorProto *tp, const void *data, size_t len)
{
    tp->has_raw_data = 1;
    tp->raw_data.data = (uint8_t *)data;
    tp->raw_data.len = len;
}

/* ---- raw_data for every dtype ---- */

static void every_dtype_from_raw(void **state)
{
    (void)state;
    int64_t dims[] = {3};
    for (int dt = 1; dt < TEEXEC_DTYPE_COUNT; dt++) {
        if (dt == TEEXEC_DTYPE_STRING) continue;
        int ok;
        uint64_t nbytes = tx_dtype_storage_bytes((teexec_dtype)dt, 3, &ok);
        assert_true(ok);
        uint8_t raw[64];
        for (size_t i = 0; i < sizeof raw; i++) raw[i] = (uint8_t)(i * 37 + dt);
        if (dt == TEEXEC_DTYPE_BOOL) raw[0] = 1, raw[1] = 0, raw[2] = 1;
        Onnx__TensorProto tp = make_tp(dt, 1, dims);
        set_raw(&tp, raw, (size_t)nbytes);
        tx_tensor t;
        expect_ok(tx_tensor_from_proto(&tp, NULL, &t));
        assert_int_equal(t.dtype, dt);
        assert_int_equal(t.rank, 1);
        assert_int_equal(t.dims[0], 3);
        assert_int_equal(t.numel, 3);
        assert_int_equal(t.nbytes, nbytes);
        assert_memory_equal(t.data, raw, (size_t)nbytes);
        tx_tensor_release(&t);

        /* one byte short and one byte long are both refused */
        set_raw(&tp, raw, (size_t)nbytes - 1);
        expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "raw_data has");
        assert_null(t.data);
        set_raw(&tp, raw, (size_t)nbytes + 1);
        expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "raw_data has");
    }
}

/* ---- typed fields for every dtype ---- */

static void decode_typed(Onnx__TensorProto *tp, const void *want, size_t nbytes)
{
    tx_tensor t;
    expect_ok(tx_tensor_from_proto(tp, NULL, &t));
    assert_int_equal(t.nbytes, nbytes);
    assert_memory_equal(t.data, want, nbytes);
    tx_tensor_release(&t);
}

static void every_dtype_from_typed_fields(void **state)
{
    (void)state;
    int64_t d3[] = {3};
    tx_tensor t;
    {
        float v[] = {1.5f, -2.0f, 3.25f};
        Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_FLOAT, 1, d3);
        tp.n_float_data = 3, tp.float_data = v;
        decode_typed(&tp, v, sizeof v);
        float c[6] = {1, 2, 3, 4, 5, 6};
        tp = make_tp(TEEXEC_DTYPE_COMPLEX64, 1, d3);
        tp.n_float_data = 6, tp.float_data = c;
        decode_typed(&tp, c, sizeof c);
        tp.n_float_data = 3; /* complex needs two floats per element */
        expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "float_data has 3");
    }
    {
        double v[] = {1.5, -2.0, 1e300}, c[6] = {1, 2, 3, 4, 5, 6};
        Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_DOUBLE, 1, d3);
        tp.n_double_data = 3, tp.double_data = v;
        decode_typed(&tp, v, sizeof v);
        tp = make_tp(TEEXEC_DTYPE_COMPLEX128, 1, d3);
        tp.n_double_data = 6, tp.double_data = c;
        decode_typed(&tp, c, sizeof c);
    }
    {
        int64_t v[] = {INT64_MIN, 0, INT64_MAX};
        Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_INT64, 1, d3);
        tp.n_int64_data = 3, tp.int64_data = v;
        decode_typed(&tp, v, sizeof v);
    }
    {
        uint64_t v[] = {UINT64_MAX, 0, 7};
        Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_UINT64, 1, d3);
        tp.n_uint64_data = 3, tp.uint64_data = v;
        decode_typed(&tp, v, sizeof v);
        uint64_t w[] = {UINT32_MAX, 0, 7};
        uint32_t w32[] = {UINT32_MAX, 0, 7};
        tp = make_tp(TEEXEC_DTYPE_UINT32, 1, d3);
        tp.n_uint64_data = 3, tp.uint64_data = w;
        decode_typed(&tp, w32, sizeof w32);
        tp.uint64_data = v; /* UINT64_MAX does not fit uint32 */
        expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "out of range");
    }
    {
        int32_t v[] = {INT32_MIN, -1, INT32_MAX};
        Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_INT32, 1, d3);
        tp.n_int32_data = 3, tp.int32_data = v;
        decode_typed(&tp, v, sizeof v);

        int32_t i16[] = {-32768, 5, 32767};
        int16_t w16[] = {-32768, 5, 32767};
        tp = make_tp(TEEXEC_DTYPE_INT16, 1, d3);
        tp.n_int32_data = 3, tp.int32_data = i16;
        decode_typed(&tp, w16, sizeof w16);
        tp.int32_data = v;
        expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "out of range");

        int32_t u16[] = {0, 5, 65535};
        uint16_t wu16[] = {0, 5, 65535};
        tp = make_tp(TEEXEC_DTYPE_UINT16, 1, d3);
        tp.n_int32_data = 3, tp.int32_data = u16;
        decode_typed(&tp, wu16, sizeof wu16);

        int32_t i8[] = {-128, 0, 127};
        int8_t wi8[] = {-128, 0, 127};
        tp = make_tp(TEEXEC_DTYPE_INT8, 1, d3);
        tp.n_int32_data = 3, tp.int32_data = i8;
        decode_typed(&tp, wi8, sizeof wi8);
        int32_t bad8[] = {0, 128, 0};
        tp.int32_data = bad8;
        expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "int32_data[1]");

        int32_t u8[] = {0, 200, 255};
        uint8_t wu8[] = {0, 200, 255};
        tp = make_tp(TEEXEC_DTYPE_UINT8, 1, d3);
        tp.n_int32_data = 3, tp.int32_data = u8;
        decode_typed(&tp, wu8, sizeof wu8);

        int32_t b[] = {1, 0, 1};
        uint8_t wb[] = {1, 0, 1};
        tp = make_tp(TEEXEC_DTYPE_BOOL, 1, d3);
        tp.n_int32_data = 3, tp.int32_data = b;
        decode_typed(&tp, wb, sizeof wb);

        /* 16-bit float bit patterns */
        int32_t h[] = {0x3c00, 0xfbff, 0x7e00};
        uint16_t wh[] = {0x3c00, 0xfbff, 0x7e00};
        for (int dt = TEEXEC_DTYPE_FLOAT16; dt <= TEEXEC_DTYPE_BFLOAT16; dt += 6) {
            tp = make_tp(dt, 1, d3);
            tp.n_int32_data = 3, tp.int32_data = h;
            decode_typed(&tp, wh, sizeof wh);
        }
        /* 8-bit float bit patterns: FP8 x4, E8M0 */
        int32_t f8[] = {0x7f, 0x80, 0xff};
        uint8_t wf8[] = {0x7f, 0x80, 0xff};
        for (int dt = TEEXEC_DTYPE_FLOAT8E4M3FN; dt <= TEEXEC_DTYPE_FLOAT8E8M0; dt++) {
            if (teexec_dtype_bits((teexec_dtype)dt) != 8) continue;
            tp = make_tp(dt, 1, d3);
            tp.n_int32_data = 3, tp.int32_data = f8;
            decode_typed(&tp, wf8, sizeof wf8);
        }
        /* 4-bit: two per int32_data entry, first element in the low nibble;
         * 3 elements -> 2 entries (the last one padded). */
        int32_t p4[] = {0x21, 0x03};
        uint8_t wp4[] = {0x21, 0x03};
        for (int dt = TEEXEC_DTYPE_UINT4; dt <= TEEXEC_DTYPE_FLOAT4E2M1; dt++) {
            tp = make_tp(dt, 1, d3);
            tp.n_int32_data = 2, tp.int32_data = p4;
            decode_typed(&tp, wp4, sizeof wp4);
            tp.n_int32_data = 3;
            int32_t p4x[] = {0x21, 0x03, 0};
            tp.int32_data = p4x;
            expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL,
                         "int32_data has 3 values, but its dims need 2");
        }
        /* 2-bit: four per entry; 5 elements -> 2 entries */
        int64_t d5[] = {5};
        int32_t p2[] = {0xe4, 0x02};
        uint8_t wp2[] = {0xe4, 0x02};
        for (int dt = TEEXEC_DTYPE_UINT2; dt <= TEEXEC_DTYPE_INT2; dt++) {
            tp = make_tp(dt, 1, d5);
            tp.n_int32_data = 2, tp.int32_data = p2;
            decode_typed(&tp, wp2, sizeof wp2);
        }
    }
    {
        ProtobufCBinaryData s[3] = {{1, (uint8_t *)"a"}, {0, NULL}, {5, (uint8_t *)"hello"}};
        Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_STRING, 1, d3);
        tp.n_string_data = 3, tp.string_data = s;
        expect_ok(tx_tensor_from_proto(&tp, NULL, &t));
        char **v = t.data;
        assert_string_equal(v[0], "a");
        assert_string_equal(v[1], "");
        assert_string_equal(v[2], "hello");
        tx_tensor_release(&t);
        set_raw(&tp, "abc", 3);
        tp.n_string_data = 0;
        expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "string_data only");
    }
}

static void subbyte_packing_and_odd_counts(void **state)
{
    (void)state;
    tx_tensor t;
    int64_t d23[] = {2, 3}; /* 6 FP4 nibbles -> 3 bytes */
    uint8_t raw[4] = {0x10, 0x32, 0x54, 0x76};
    Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_FLOAT4E2M1, 2, d23);
    set_raw(&tp, raw, 3);
    expect_ok(tx_tensor_from_proto(&tp, NULL, &t));
    assert_int_equal(t.nbytes, 3);
    assert_int_equal(((uint8_t *)t.data)[2], 0x54);
    tx_tensor_release(&t);
    int64_t d7[] = {7}; /* 7 INT2 -> 2 bytes; 7 INT4 -> 4 bytes */
    tp = make_tp(TEEXEC_DTYPE_INT2, 1, d7);
    set_raw(&tp, raw, 2);
    expect_ok(tx_tensor_from_proto(&tp, NULL, &t));
    assert_int_equal(t.nbytes, 2);
    tx_tensor_release(&t);
    set_raw(&tp, raw, 3);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "need 2");
    tp = make_tp(TEEXEC_DTYPE_INT4, 1, d7);
    set_raw(&tp, raw, 3);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "need 4");
    set_raw(&tp, raw, 4);
    expect_ok(tx_tensor_from_proto(&tp, NULL, &t));
    tx_tensor_release(&t);
}

static void zero_elements_and_missing_payload(void **state)
{
    (void)state;
    tx_tensor t;
    int64_t d[] = {0, 3};
    Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_FLOAT, 2, d);
    expect_ok(tx_tensor_from_proto(&tp, NULL, &t));
    assert_int_equal(t.numel, 0);
    assert_int_equal(t.dims[1], 3);
    tx_tensor_release(&t);
    tp = make_tp(TEEXEC_DTYPE_STRING, 2, d);
    expect_ok(tx_tensor_from_proto(&tp, NULL, &t));
    tx_tensor_release(&t);
    int64_t d2[] = {2};
    tp = make_tp(TEEXEC_DTYPE_FLOAT, 1, d2);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "no data for its 2");
    /* a scalar (rank 0) has one element */
    tp = make_tp(TEEXEC_DTYPE_INT64, 0, NULL);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "no data for its 1");
    int64_t one = 42;
    tp.n_int64_data = 1, tp.int64_data = &one;
    expect_ok(tx_tensor_from_proto(&tp, NULL, &t));
    assert_int_equal(t.rank, 0);
    assert_int_equal(*(int64_t *)t.data, 42);
    tx_tensor_release(&t);
}

static void header_errors(void **state)
{
    (void)state;
    tx_tensor t;
    float f[2] = {1, 2};
    int64_t i64[2] = {1, 2};
    int64_t d2[] = {2};
    Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_FLOAT, 1, d2);
    tp.n_int64_data = 2, tp.int64_data = i64; /* typed field of the wrong kind */
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "int64_data holds float");
    tp.n_float_data = 2, tp.float_data = f;
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "more than one typed");
    tp = make_tp(TEEXEC_DTYPE_FLOAT, 1, d2);
    tp.n_float_data = 2, tp.float_data = f;
    set_raw(&tp, f, 8);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "more than one payload");
    tp = make_tp(0, 1, d2);
    set_raw(&tp, f, 8);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "UNDEFINED");
    tp.data_type = 27;
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_UNSUPPORTED, "data_type 27");
    int64_t neg[] = {-1};
    tp = make_tp(TEEXEC_DTYPE_FLOAT, 1, neg);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "negative dimension");
    int64_t huge[] = {INT64_MAX, INT64_MAX, 4};
    tp = make_tp(TEEXEC_DTYPE_FLOAT, 3, huge);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_LIMIT, "max_tensor_elements");
    int64_t big[] = {1 << 20, 1 << 21}; /* 2^41 > 2^40 */
    tp = make_tp(TEEXEC_DTYPE_FLOAT, 2, big);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_LIMIT, "max_tensor_elements");
    int64_t many[40] = {0};
    for (int i = 0; i < 40; i++) many[i] = 1;
    tp = make_tp(TEEXEC_DTYPE_FLOAT, 40, many);
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_LIMIT, "max_rank");
    Onnx__TensorProto__Segment seg = ONNX__TENSOR_PROTO__SEGMENT__INIT;
    tp = make_tp(TEEXEC_DTYPE_FLOAT, 1, d2);
    set_raw(&tp, f, 8);
    tp.segment = &seg;
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_UNSUPPORTED, "segment");
    /* external data without a model folder */
    Onnx__StringStringEntryProto kv = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    kv.key = (char *)"location", kv.value = (char *)"w.bin";
    Onnx__StringStringEntryProto *kvs[] = {&kv};
    tp = make_tp(TEEXEC_DTYPE_FLOAT, 1, d2);
    tp.has_data_location = 1, tp.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    tp.n_external_data = 1, tp.external_data = kvs;
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "without a folder");
    tp.has_data_location = 0;
    expect_error(tx_tensor_from_proto(&tp, NULL, &t), TEEXEC_ERR_BAD_MODEL, "not EXTERNAL");
}

static void roundtrip_to_proto_bytes(void **state)
{
    (void)state;
    int64_t dims[] = {2, 3};
    tx_tensor src;
    expect_ok(tx_tensor_alloc(&src, TEEXEC_DTYPE_INT4, 2, dims));
    memcpy(src.data, "\x21\x43\x65", 3);
    uint8_t *bytes;
    size_t n;
    expect_ok(tx_tensor_to_proto_bytes(&src, "w", &bytes, &n));
    Onnx__TensorProto *tp;
    expect_ok(tx_tensor_proto_parse(bytes, n, NULL, &tp));
    assert_string_equal(tp->name, "w");
    tx_tensor back;
    expect_ok(tx_tensor_from_proto(tp, NULL, &back));
    assert_int_equal(back.dtype, TEEXEC_DTYPE_INT4);
    assert_int_equal(back.rank, 2);
    assert_int_equal(back.dims[1], 3);
    assert_memory_equal(back.data, src.data, 3);
    tx_tensor_release(&back);
    tx_tensor_proto_free(tp);
    free(bytes);
    tx_tensor_release(&src);

    expect_ok(tx_tensor_alloc(&src, TEEXEC_DTYPE_STRING, 1, (int64_t[]){2}));
    ((char **)src.data)[0] = strdup("x y");
    ((char **)src.data)[1] = strdup("");
    expect_ok(tx_tensor_to_proto_bytes(&src, NULL, &bytes, &n));
    expect_ok(tx_tensor_proto_parse(bytes, n, NULL, &tp));
    expect_ok(tx_tensor_from_proto(tp, NULL, &back));
    assert_string_equal(((char **)back.data)[0], "x y");
    assert_string_equal(((char **)back.data)[1], "");
    tx_tensor_release(&back);
    tx_tensor_proto_free(tp);
    free(bytes);
    tx_tensor_release(&src);

    /* garbage is refused by the parser, not misread */
    expect_error(tx_tensor_proto_parse("\xff\xff\xff", 3, NULL, &tp), TEEXEC_ERR_BAD_MODEL,
                 "malformed protobuf");
    assert_null(tp);
}

/* ---- external data ---- */

static char tmpdir[256];

static void path_in(char *buf, size_t size, const char *rel)
{
    snprintf(buf, size, "%s/%s", tmpdir, rel);
}

static void write_file(const char *rel, const void *data, size_t len)
{
    char p[512];
    path_in(p, sizeof p, rel);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static int setup_dir(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/teexec-ext-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) return -1;
    char p[512], q[512];
    float w[4] = {1, 2, 3, 4};
    uint8_t big[8192];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)i;
    write_file("w.bin", w, sizeof w);
    write_file("big.bin", big, sizeof big);
    path_in(p, sizeof p, "sub");
    mkdir(p, 0700);
    write_file("sub/w.bin", w, sizeof w);
    write_file("linked.bin", w, sizeof w);
    path_in(p, sizeof p, "linked.bin");
    path_in(q, sizeof q, "hardlink.bin");
    if (link(p, q) != 0) return -1;
    path_in(p, sizeof p, "passwd");
    if (symlink("/etc/passwd", p) != 0) return -1;
    path_in(p, sizeof p, "subdirlink");
    if (symlink("sub", p) != 0) return -1;
    path_in(p, sizeof p, "fifo");
    if (mkfifo(p, 0600) != 0) return -1;
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    static const char *const files[] = {"w.bin", "big.bin", "sub/w.bin", "linked.bin",
                                        "hardlink.bin", "passwd", "subdirlink", "fifo"};
    char p[512];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        path_in(p, sizeof p, files[i]);
        unlink(p);
    }
    path_in(p, sizeof p, "sub");
    rmdir(p);
    rmdir(tmpdir);
    return 0;
}

/* A model whose single initializer (float[4] or given dims) uses the
 * given external_data keys; loaded from memory with base_dir = tmpdir. */
static tx_onnx_file *model_with_external(const char *const *kv, size_t nkv, int64_t n)
{
    Onnx__StringStringEntryProto e[8];
    Onnx__StringStringEntryProto *ep[8];
    for (size_t i = 0; i < nkv; i++) {
        onnx__string_string_entry_proto__init(&e[i]);
        e[i].key = (char *)kv[2 * i];
        e[i].value = (char *)kv[2 * i + 1];
        ep[i] = &e[i];
    }
    int64_t dims[] = {n};
    Onnx__TensorProto tp = make_tp(TEEXEC_DTYPE_FLOAT, 1, dims);
    tp.name = (char *)"w";
    tp.has_data_location = 1;
    tp.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    tp.n_external_data = nkv;
    tp.external_data = ep;
    Onnx__TensorProto *tps[] = {&tp};
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    g.name = (char *)"g";
    g.n_initializer = 1;
    g.initializer = tps;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.graph = &g;
    size_t size = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(size);
    assert_non_null(buf);
    onnx__model_proto__pack(&m, buf);
    tx_onnx_file *f = NULL;
    expect_ok(tx_onnx_load_memory(buf, size, tmpdir, NULL, &f));
    free(buf);
    return f;
}

static teexec_status *read_ext(const char *loc, const char *offset, const char *length,
                               int64_t n, tx_tensor *t)
{
    const char *kv[6];
    size_t nkv = 0;
    kv[2 * nkv] = "location", kv[2 * nkv++ + 1] = loc;
    if (offset) kv[2 * nkv] = "offset", kv[2 * nkv++ + 1] = offset;
    if (length) kv[2 * nkv] = "length", kv[2 * nkv++ + 1] = length;
    tx_onnx_file *f = model_with_external(kv, nkv, n);
    teexec_status *st = tx_tensor_from_proto(f->model->graph->initializer[0], f, t);
    tx_onnx_file_free(f);
    return st;
}

static void external_good(void **state)
{
    (void)state;
    tx_tensor t;
    expect_ok(read_ext("w.bin", NULL, NULL, 4, &t));
    assert_true(((float *)t.data)[3] == 4.0f);
    tx_tensor_release(&t);
    expect_ok(read_ext("./sub/w.bin", "0", "16", 4, &t));
    assert_true(((float *)t.data)[0] == 1.0f);
    tx_tensor_release(&t);
    expect_ok(read_ext("big.bin", "4096", "16", 4, &t));
    assert_int_equal(((uint8_t *)t.data)[0], (uint8_t)4096);
    assert_int_equal(((uint8_t *)t.data)[15], (uint8_t)(4096 + 15));
    tx_tensor_release(&t);

    /* stats read only the keys */
    const char *kv[] = {"location", "big.bin", "offset", "0", "length", "64"};
    tx_onnx_file *f = model_with_external(kv, 3, 16);
    tx_external_stat *s;
    size_t n;
    expect_ok(tx_external_stats(f, &s, &n));
    assert_int_equal(n, 1);
    assert_string_equal(s[0].location, "big.bin");
    assert_int_equal(s[0].bytes, 64);
    assert_int_equal(s[0].tensors, 1);
    tx_external_stats_free(s, n);
    tx_onnx_file_free(f);
}

static void external_refusals(void **state)
{
    (void)state;
    tx_tensor t;
    expect_error(read_ext("../w.bin", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "'..'");
    expect_error(read_ext("sub/../../w.bin", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "'..'");
    expect_error(read_ext("/etc/passwd", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "absolute");
    expect_error(read_ext("", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "empty");
    expect_error(read_ext("sub//w.bin", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "empty path");
    expect_error(read_ext("passwd", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "symbolic link");
    expect_error(read_ext("subdirlink/w.bin", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL,
                 "symbolic link");
    expect_error(read_ext("hardlink.bin", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "hard links");
    expect_error(read_ext("fifo", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "not a regular file");
    expect_error(read_ext("sub", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "not a regular file");
    expect_error(read_ext("w.bin/x", NULL, NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "not a folder");
    expect_error(read_ext("missing.bin", NULL, NULL, 4, &t), TEEXEC_ERR_IO, "not found");
    expect_error(read_ext("big.bin", "9000", "16", 4, &t), TEEXEC_ERR_BAD_MODEL, "past the end");
    expect_error(read_ext("big.bin", "8180", "16", 4, &t), TEEXEC_ERR_BAD_MODEL, "runs past");
    expect_error(read_ext("big.bin", "18446744073709551615", "16", 4, &t), TEEXEC_ERR_BAD_MODEL,
                 "past the end");
    expect_error(read_ext("big.bin", "18446744073709551616", "16", 4, &t), TEEXEC_ERR_BAD_MODEL,
                 "overflows");
    expect_error(read_ext("big.bin", "12x", "16", 4, &t), TEEXEC_ERR_BAD_MODEL, "decimal");
    expect_error(read_ext("big.bin", "-16", "16", 4, &t), TEEXEC_ERR_BAD_MODEL, "decimal");
    expect_error(read_ext("big.bin", "+16", "16", 4, &t), TEEXEC_ERR_BAD_MODEL, "decimal");
    expect_error(read_ext("big.bin", "0", "20", 4, &t), TEEXEC_ERR_BAD_MODEL, "does not match");
    expect_error(read_ext("big.bin", "0", NULL, 4, &t), TEEXEC_ERR_BAD_MODEL, "no 'length'");
    assert_null(t.data);
    /* a tiny external budget */
    const char *kv[] = {"location", "big.bin", "length", "16"};
    tx_onnx_file *f = model_with_external(kv, 2, 4);
    f->limits.max_external_bytes = 100;
    expect_error(tx_tensor_from_proto(f->model->graph->initializer[0], f, &t), TEEXEC_ERR_LIMIT,
                 "max_external_bytes");
    tx_onnx_file_free(f);
    const char *dup[] = {"location", "w.bin", "location", "w.bin"};
    f = model_with_external(dup, 2, 4);
    expect_error(tx_tensor_from_proto(f->model->graph->initializer[0], f, &t),
                 TEEXEC_ERR_BAD_MODEL, "twice");
    tx_onnx_file_free(f);
}

/* Side data (onnx_load.h): resolved only in a file that holds it, with
 * its range checked; in a user's model the location is just a file name. */
static void side_data(void **state)
{
    (void)state;
    tx_tensor t;
    /* no side data: an ordinary (missing) file */
    expect_error(read_ext(TX_SIDE_LOCATION, "0", "16", 4, &t), TEEXEC_ERR_IO, "not found");
    const float vals[16] = {9, 9, 1, 2, 3, 4}; /* 64 bytes: the appends below read them all */
    const char *kv[] = {"location", TX_SIDE_LOCATION, "offset", "64", "length", "16"};
    tx_onnx_file *f = model_with_external(kv, 3, 4);
    size_t at = 0;
    expect_ok(tx_side_append(&f->side, vals, sizeof vals, &at));
    assert_int_equal(at, 0);
    expect_ok(tx_side_append(&f->side, vals + 2, 16, &at));
    assert_int_equal(at, 64); /* aligned */
    expect_ok(tx_tensor_from_proto(f->model->graph->initializer[0], f, &t));
    assert_true(((float *)t.data)[0] == 1.0f && ((float *)t.data)[3] == 4.0f);
    tx_tensor_release(&t);
    tx_onnx_file_free(f);
    /* a range past the side data, and a length that is not the tensor's */
    const char *past[] = {"location", TX_SIDE_LOCATION, "offset", "60", "length", "16"};
    f = model_with_external(past, 3, 4);
    expect_ok(tx_side_append(&f->side, vals, 64, &at));
    expect_error(tx_tensor_from_proto(f->model->graph->initializer[0], f, &t),
                 TEEXEC_ERR_BAD_MODEL, "outside");
    tx_onnx_file_free(f);
    const char *len[] = {"location", TX_SIDE_LOCATION, "offset", "0", "length", "8"};
    f = model_with_external(len, 3, 4);
    expect_ok(tx_side_append(&f->side, vals, 64, &at));
    expect_error(tx_tensor_from_proto(f->model->graph->initializer[0], f, &t),
                 TEEXEC_ERR_BAD_MODEL, "outside");
    tx_onnx_file_free(f);
}

/* Replaces "w" with 5..8 when ctx is non-NULL, else keeps it. */
static teexec_status *replace_w(void *ctx, const char *name, const tx_tensor **out,
                                tx_tensor *scratch)
{
    if (!ctx || strcmp(name, "w") != 0) return NULL;
    int64_t d[1] = {4};
    TX_TRY(tx_tensor_alloc(scratch, TEEXEC_DTYPE_FLOAT, 1, d));
    for (int i = 0; i < 4; i++) ((float *)scratch->data)[i] = (float)(5 + i);
    *out = scratch;
    return NULL;
}

/* A model whose weight is external data in one folder, saved into
 * another: it gets its own "<file>.data" there (the source's location
 * would not resolve from the new folder), kept or replaced. */
static void save_with_external_data(void **state)
{
    (void)state;
    char dir[512], out[600], data[700];
    path_in(dir, sizeof dir, "saved");
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(out, sizeof out, "%s/m.onnx", dir);
    snprintf(data, sizeof data, "%s.data", out);
    const char *kv[] = {"location", "w.bin"};
    for (int replaced = 0; replaced < 2; replaced++) {
        tx_onnx_file *f = model_with_external(kv, 1, 4);
        expect_ok(tx_model_save_replacing(f, out, replace_w, replaced ? (void *)f : NULL));
        tx_onnx_file_free(f);
        struct stat sb;
        assert_int_equal(stat(data, &sb), 0);
        assert_int_equal(sb.st_size, 16);
        tx_onnx_file *g = NULL;
        expect_ok(tx_onnx_load_file(out, NULL, &g));
        tx_tensor t;
        expect_ok(tx_tensor_from_proto(g->model->graph->initializer[0], g, &t));
        for (int i = 0; i < 4; i++)
            assert_true(((float *)t.data)[i] == (float)((replaced ? 5 : 1) + i));
        tx_tensor_release(&t);
        tx_onnx_file_free(g);
    }
    unlink(out);
    unlink(data);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_dtype_from_raw),
        cmocka_unit_test(every_dtype_from_typed_fields),
        cmocka_unit_test(subbyte_packing_and_odd_counts),
        cmocka_unit_test(zero_elements_and_missing_payload),
        cmocka_unit_test(header_errors),
        cmocka_unit_test(roundtrip_to_proto_bytes),
        cmocka_unit_test(external_good),
        cmocka_unit_test(external_refusals),
        cmocka_unit_test(side_data),
        cmocka_unit_test(save_with_external_data),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
