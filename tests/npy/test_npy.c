/* Tests for .npy reading and writing against fixtures written by NumPy
 * (tests/npy/make_fixtures.py) and hand-made malformed headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/dtype.h"
#include "format/npy.h"
#include "npy_test_util.h"

typedef struct dt_case {
    const char *code;
    teexec_dtype dtype;
} dt_case;

static const dt_case all_dtypes[] = {
    {"b1", TEEXEC_DTYPE_BOOL},    {"i1", TEEXEC_DTYPE_INT8},    {"i2", TEEXEC_DTYPE_INT16},
    {"i4", TEEXEC_DTYPE_INT32},   {"i8", TEEXEC_DTYPE_INT64},   {"u1", TEEXEC_DTYPE_UINT8},
    {"u2", TEEXEC_DTYPE_UINT16},  {"u4", TEEXEC_DTYPE_UINT32},  {"u8", TEEXEC_DTYPE_UINT64},
    {"f2", TEEXEC_DTYPE_FLOAT16}, {"f4", TEEXEC_DTYPE_FLOAT},   {"f8", TEEXEC_DTYPE_DOUBLE},
};
#define N_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

static void check_pattern(const tx_tensor *t, teexec_dtype dt)
{
    assert_int_equal(t->dtype, dt);
    assert_int_equal(t->rank, 2);
    assert_int_equal(t->dims[0], 2);
    assert_int_equal(t->dims[1], 3);
    assert_int_equal(t->numel, 6);
    bool is_int = tx_dtype_is_integer(dt);
    for (size_t i = 0; i < (is_int ? 5u : 6u); i++) assert_true(elem(t, i) == pattern(dt, i));
    if (is_int) assert_true(last_int_bits(t) == int_max_bits(dt));
}

static teexec_status *read_fixture(const char *name, tx_tensor *t)
{
    char path[1024];
    fixture_path(path, sizeof path, name);
    return tx_npy_read_file(path, 0, t);
}

static void reads_every_little_endian_dtype(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_DTYPES; k++) {
        char name[64];
        snprintf(name, sizeof name, "le_%s.npy", all_dtypes[k].code);
        tx_tensor t;
        assert_null(read_fixture(name, &t));
        check_pattern(&t, all_dtypes[k].dtype);
        tx_tensor_release(&t);
    }
}

static void swaps_big_endian_on_read(void **state)
{
    (void)state;
    for (size_t k = 0; k < N_DTYPES; k++) {
        if (tx_dtype_elem_size(all_dtypes[k].dtype) == 1) continue;
        char name[64];
        snprintf(name, sizeof name, "be_%s.npy", all_dtypes[k].code);
        tx_tensor t;
        assert_null(read_fixture(name, &t));
        check_pattern(&t, all_dtypes[k].dtype);
        tx_tensor_release(&t);
    }
}

static void reads_versions_2_and_3(void **state)
{
    (void)state;
    const char *names[] = {"v2_f4.npy", "v3_f4.npy"};
    for (size_t k = 0; k < 2; k++) {
        tx_tensor t;
        assert_null(read_fixture(names[k], &t));
        check_pattern(&t, TEEXEC_DTYPE_FLOAT);
        tx_tensor_release(&t);
    }
}

static void reads_scalar_and_empty(void **state)
{
    (void)state;
    tx_tensor t;
    assert_null(read_fixture("scalar_f8.npy", &t));
    assert_int_equal(t.rank, 0);
    assert_int_equal(t.numel, 1);
    assert_true(((double *)t.data)[0] == 2.5);
    tx_tensor_release(&t);
    assert_null(read_fixture("empty_f4.npy", &t));
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.dims[0], 0);
    assert_int_equal(t.dims[1], 3);
    assert_int_equal(t.numel, 0);
    tx_tensor_release(&t);
}

static void expect_refusal(const char *fixture, teexec_code code, const char *words)
{
    tx_tensor t;
    teexec_status *st = read_fixture(fixture, &t);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), code);
    assert_non_null(strstr(teexec_status_message(st), words));
    assert_null(t.data);
    teexec_status_destroy(st);
}

static void refuses_fortran_object_structured_complex(void **state)
{
    (void)state;
    expect_refusal("fortran_f4.npy", TEEXEC_ERR_UNSUPPORTED, "Fortran");
    expect_refusal("object.npy", TEEXEC_ERR_UNSUPPORTED, "object arrays");
    expect_refusal("structured.npy", TEEXEC_ERR_UNSUPPORTED, "structured");
    expect_refusal("complex.npy", TEEXEC_ERR_UNSUPPORTED, "complex");
}

static void refuses_truncated_and_overlong_payload(void **state)
{
    (void)state;
    size_t size = 0;
    unsigned char *buf = slurp("le_f4.npy", &size);
    assert_non_null(buf);
    tx_tensor t;
    /* Every proper prefix is refused, never read past. */
    for (size_t cut = 0; cut < size; cut++) {
        unsigned char *copy = malloc(cut ? cut : 1);
        memcpy(copy, buf, cut);
        teexec_status *st = tx_npy_read_memory(copy, cut, "cut.npy", 0, &t);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
        teexec_status_destroy(st);
        free(copy);
    }
    teexec_status *st = tx_npy_read_memory(buf, size - 1, "cut.npy", 0, &t);
    assert_non_null(strstr(teexec_status_message(st), "truncated .npy payload"));
    teexec_status_destroy(st);

    unsigned char *longer = malloc(size + 1);
    memcpy(longer, buf, size);
    longer[size] = 0;
    st = tx_npy_read_memory(longer, size + 1, "long.npy", 0, &t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
    assert_non_null(strstr(teexec_status_message(st), "after the payload"));
    teexec_status_destroy(st);
    /* The exact size is fine, and the budget applies. */
    assert_null(tx_npy_read_memory(buf, size, "ok.npy", 24, &t));
    tx_tensor_release(&t);
    st = tx_npy_read_memory(buf, size, "ok.npy", 23, &t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_LIMIT);
    teexec_status_destroy(st);
    free(longer);
    free(buf);
}

/* Builds a v1 (or v2) .npy image from a header dict and `payload` zero bytes. */
static unsigned char *make_npy(int major, const char *dict, size_t payload, size_t *size)
{
    size_t hlen = strlen(dict);
    size_t prefix = major == 1 ? 10 : 12;
    *size = prefix + hlen + payload;
    unsigned char *b = calloc(1, *size);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    b[8] = (unsigned char)hlen;
    b[9] = (unsigned char)(hlen >> 8);
    memcpy(b + prefix, dict, hlen);
    return b;
}

typedef struct bad_header {
    const char *dict;
    teexec_code code;
    const char *words;
} bad_header;

static void refuses_malformed_headers(void **state)
{
    (void)state;
    static const bad_header cases[] = {
        {"{'descr': '<f4', 'fortran_order': False}\n", TEEXEC_ERR_BAD_MODEL, "missing key 'shape'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\n",
         TEEXEC_ERR_BAD_MODEL, "duplicate key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n",
         TEEXEC_ERR_BAD_MODEL, "unexpected key 'x'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}\n", TEEXEC_ERR_BAD_MODEL,
         "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}\n", TEEXEC_ERR_BAD_MODEL,
         "negative"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}\n",
         TEEXEC_ERR_LIMIT, "overflows int64"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16)}\n",
         TEEXEC_ERR_LIMIT, "element count overflows"},
        {"{'descr': '<f4', 'fortran_order': Yes, 'shape': (2,)}\n", TEEXEC_ERR_BAD_MODEL,
         "True or False"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}\n", TEEXEC_ERR_BAD_MODEL,
         "expected ','"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}\n", TEEXEC_ERR_BAD_MODEL,
         "expected ':'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)\n", TEEXEC_ERR_BAD_MODEL,
         "expected ','"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 3: 1}\n", TEEXEC_ERR_BAD_MODEL,
         "expected a quoted key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x\n", TEEXEC_ERR_BAD_MODEL,
         "after the dict"},
        {"{'descr': '<f16', 'fortran_order': False, 'shape': (2,)}\n", TEEXEC_ERR_UNSUPPORTED,
         "not supported"},
        {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}\n", TEEXEC_ERR_BAD_MODEL,
         "unexpected character"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}\n", TEEXEC_ERR_BAD_MODEL,
         "leading zero"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}\n", TEEXEC_ERR_BAD_MODEL,
         "tuple of integers"},
        {"('descr', '<f4')\n", TEEXEC_ERR_BAD_MODEL, "dict literal"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
         "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,)}\n", TEEXEC_ERR_LIMIT, "rank"},
        {"{'descr': '<f4', 'fortran_order': Truex, 'shape': (2,)}\n", TEEXEC_ERR_BAD_MODEL,
         "True or False"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t size;
        unsigned char *b = make_npy(1, cases[k].dict, 8, &size);
        tx_tensor t;
        teexec_status *st = tx_npy_read_memory(b, size, "bad.npy", 0, &t);
        if (!st || teexec_status_code(st) != cases[k].code ||
            !strstr(teexec_status_message(st), cases[k].words))
            fail_msg("case %zu (%s): got %s", k, cases[k].dict,
                     st ? teexec_status_message(st) : "success");
        assert_string_equal(teexec_status_file(st), "bad.npy");
        teexec_status_destroy(st);
        free(b);
    }
}

static void refuses_bad_prelude(void **state)
{
    (void)state;
    const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    size_t size;
    tx_tensor t;
    teexec_status *st;

    unsigned char *b = make_npy(1, ok, 8, &size);
    assert_null(tx_npy_read_memory(b, size, "good.npy", 0, &t)); /* the control */
    tx_tensor_release(&t);
    b[1] = 'n';
    st = tx_npy_read_memory(b, size, "x.npy", 0, &t);
    assert_non_null(strstr(teexec_status_message(st), "magic"));
    teexec_status_destroy(st);
    b[1] = 'N';
    b[6] = 4;
    st = tx_npy_read_memory(b, size, "x.npy", 0, &t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "version 4.0"));
    teexec_status_destroy(st);
    b[6] = 1;
    b[7] = 1;
    st = tx_npy_read_memory(b, size, "x.npy", 0, &t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    b[7] = 0;
    b[8] = 0xff; /* header length past the end */
    st = tx_npy_read_memory(b, size, "x.npy", 0, &t);
    assert_non_null(strstr(teexec_status_message(st), "truncated .npy header"));
    teexec_status_destroy(st);
    free(b);

    /* A v2 header length over the bound is refused before anything else. */
    b = make_npy(2, ok, 8, &size);
    b[10] = 0x10; /* hlen = 0x100000 + small */
    st = tx_npy_read_memory(b, size, "x.npy", 0, &t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_LIMIT);
    teexec_status_destroy(st);
    free(b);
}

static void accepts_legal_variations(void **state)
{
    (void)state;
    const char *dicts[] = {
        "{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f4\"}",
        "{ 'descr' : 'f4' , 'fortran_order' : False , 'shape' : ( 2 , ) , }   \n",
        "{'descr': '=f4', 'fortran_order': True, 'shape': (2L,)}\n", /* 1-d: same in F order */
        "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2, 1)}\n",
    };
    for (size_t k = 0; k < sizeof dicts / sizeof dicts[0]; k++) {
        size_t size;
        unsigned char *b = make_npy(1, dicts[k], 8, &size);
        tx_tensor t;
        teexec_status *st = tx_npy_read_memory(b, size, "ok.npy", 0, &t);
        if (st) fail_msg("case %zu: %s", k, teexec_status_message(st));
        assert_int_equal(t.dtype, TEEXEC_DTYPE_FLOAT);
        assert_int_equal(t.numel, 2);
        tx_tensor_release(&t);
        free(b);
    }
}

static void normalises_bools(void **state)
{
    (void)state;
    size_t size;
    unsigned char *b = make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}\n",
                                3, &size);
    b[size - 3] = 0;
    b[size - 2] = 7;
    b[size - 1] = 1;
    tx_tensor t;
    assert_null(tx_npy_read_memory(b, size, "b.npy", 0, &t));
    const unsigned char *v = t.data;
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], 1);
    assert_int_equal(v[2], 1);
    tx_tensor_release(&t);
    free(b);
}

/* Writing the fixtures' tensors reproduces NumPy's files byte for byte
 * (header text, padding to 64, payload), through memory and through a
 * file. */
static void writes_numpy_identical_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/teexec-npy-XXXXXX";
    assert_non_null(mkdtemp(dir));
    const char *extra[] = {"scalar_f8.npy", "empty_f4.npy"};
    for (size_t k = 0; k < N_DTYPES + 2; k++) {
        char name[64];
        if (k < N_DTYPES) snprintf(name, sizeof name, "le_%s.npy", all_dtypes[k].code);
        else snprintf(name, sizeof name, "%s", extra[k - N_DTYPES]);
        size_t size;
        unsigned char *want = slurp(name, &size);
        assert_non_null(want);
        tx_tensor t;
        assert_null(tx_npy_read_memory(want, size, name, 0, &t));
        void *got;
        size_t got_size;
        assert_null(tx_npy_encode(&t, &got, &got_size));
        assert_int_equal(got_size, size);
        assert_memory_equal(got, want, size);
        free(got);

        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        teexec_dtype stored = TEEXEC_DTYPE_UNDEFINED;
        assert_null(tx_npy_write_file(path, &t, &stored));
        assert_int_equal(stored, t.dtype);
        tx_tensor back;
        assert_null(tx_npy_read_file(path, 0, &back));
        assert_int_equal(back.nbytes, t.nbytes);
        assert_memory_equal(back.data, t.data, t.nbytes ? t.nbytes : 1);
        tx_tensor_release(&back);
        tx_tensor_release(&t);
        free(want);
    }
    /* Only the targets are left: no temporary files. */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        assert_true(e->d_name[0] != '.');
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
        files++;
    }
    closedir(d);
    assert_int_equal(files, (int)N_DTYPES + 2);
    rmdir(dir);
}

static void round_trips_after_overwrite(void **state)
{
    (void)state;
    char dir[] = "/tmp/teexec-npy-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/a.npy", dir);
    tx_tensor t;
    int64_t dims[] = {4};
    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_INT32, 1, dims));
    for (int i = 0; i < 4; i++) ((int32_t *)t.data)[i] = i * 1000 - 1;
    assert_null(tx_npy_write_file(path, &t, NULL));
    ((int32_t *)t.data)[2] = 77;
    assert_null(tx_npy_write_file(path, &t, NULL)); /* replaces the old file */
    tx_tensor back;
    assert_null(tx_npy_read_file(path, 0, &back));
    assert_int_equal(((int32_t *)back.data)[2], 77);
    assert_int_equal(((int32_t *)back.data)[3], 2999);
    tx_tensor_release(&back);
    /* A target in a missing folder is an I/O error naming the path. */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/nope/a.npy", dir);
    teexec_status *st = tx_npy_write_file(bad, &t, NULL);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_IO);
    assert_string_equal(teexec_status_file(st), bad);
    teexec_status_destroy(st);
    tx_tensor_release(&t);
    unlink(path);
    rmdir(dir);
}

static float stored_float(const tx_tensor *t, size_t i, void **img)
{
    size_t size;
    assert_null(tx_npy_encode(t, img, &size));
    tx_tensor back;
    assert_null(tx_npy_read_memory(*img, size, "up.npy", 0, &back));
    assert_int_equal(back.dtype, TEEXEC_DTYPE_FLOAT);
    assert_int_equal(back.numel, t->numel);
    float v = ((float *)back.data)[i];
    tx_tensor_release(&back);
    free(*img);
    *img = NULL;
    return v;
}

/* bfloat16 / FP8 / FP4 / E8M0 are written as their exact float32 values;
 * 4- and 2-bit ints are unpacked to int8/uint8. */
static void upcasts_types_numpy_lacks(void **state)
{
    (void)state;
    void *img = NULL;
    tx_tensor t;
    int64_t d4[] = {4};
    assert_int_equal(tx_npy_stored_dtype(TEEXEC_DTYPE_BFLOAT16), TEEXEC_DTYPE_FLOAT);
    assert_int_equal(tx_npy_stored_dtype(TEEXEC_DTYPE_STRING), TEEXEC_DTYPE_UNDEFINED);
    assert_int_equal(tx_npy_stored_dtype(TEEXEC_DTYPE_UINT4), TEEXEC_DTYPE_UINT8);

    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_BFLOAT16, 1, d4));
    uint16_t *h = t.data;
    h[0] = 0x3f80; /* 1 */
    h[1] = 0xc0a0; /* -5 */
    h[2] = 0x0001; /* smallest subnormal, 2^-133 */
    h[3] = 0x7f80; /* inf */
    assert_true(stored_float(&t, 0, &img) == 1.0f);
    assert_true(stored_float(&t, 1, &img) == -5.0f);
    assert_true(stored_float(&t, 2, &img) == ldexpf(1.0f, -133));
    assert_true(isinf(stored_float(&t, 3, &img)));
    tx_tensor_release(&t);

    struct { teexec_dtype dt; uint8_t bits; float want; } fp8[] = {
        {TEEXEC_DTYPE_FLOAT8E4M3FN, 0x7e, 448.0f},
        {TEEXEC_DTYPE_FLOAT8E4M3FN, 0x01, 0x1p-9f},
        {TEEXEC_DTYPE_FLOAT8E4M3FN, 0xb8, -1.0f},
        {TEEXEC_DTYPE_FLOAT8E4M3FNUZ, 0x40, 1.0f},
        {TEEXEC_DTYPE_FLOAT8E4M3FNUZ, 0x7f, 240.0f},
        {TEEXEC_DTYPE_FLOAT8E5M2, 0x7b, 57344.0f},
        {TEEXEC_DTYPE_FLOAT8E5M2, 0x01, 0x1p-16f},
        {TEEXEC_DTYPE_FLOAT8E5M2FNUZ, 0x7f, 57344.0f},
        {TEEXEC_DTYPE_FLOAT8E5M2FNUZ, 0x40, 1.0f},
        {TEEXEC_DTYPE_FLOAT8E8M0, 127, 1.0f},
        {TEEXEC_DTYPE_FLOAT8E8M0, 0, 0x1p-127f},
        {TEEXEC_DTYPE_FLOAT8E8M0, 254, 0x1p127f},
    };
    for (size_t k = 0; k < sizeof fp8 / sizeof fp8[0]; k++) {
        assert_null(tx_tensor_alloc(&t, fp8[k].dt, 1, d4));
        ((uint8_t *)t.data)[1] = fp8[k].bits;
        float got = stored_float(&t, 1, &img);
        if (got != fp8[k].want) fail_msg("fp8 case %zu: got %g want %g", k, got, fp8[k].want);
        tx_tensor_release(&t);
    }
    uint8_t nan_bits[][2] = {{TEEXEC_DTYPE_FLOAT8E4M3FN, 0xff}, {TEEXEC_DTYPE_FLOAT8E5M2, 0x7e},
                             {TEEXEC_DTYPE_FLOAT8E4M3FNUZ, 0x80}, {TEEXEC_DTYPE_FLOAT8E8M0, 0xff}};
    for (size_t k = 0; k < 4; k++) {
        assert_null(tx_tensor_alloc(&t, (teexec_dtype)nan_bits[k][0], 1, d4));
        ((uint8_t *)t.data)[0] = nan_bits[k][1];
        assert_true(isnan(stored_float(&t, 0, &img)));
        tx_tensor_release(&t);
    }

    /* FP4 E2M1: element 0 in the low nibble. 0x2f = [-6 (0xf), 1 (0x2)]. */
    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT4E2M1, 1, d4));
    ((uint8_t *)t.data)[0] = 0x2f;
    ((uint8_t *)t.data)[1] = 0x91; /* [0.5, -0.5] */
    assert_true(stored_float(&t, 0, &img) == -6.0f);
    assert_true(stored_float(&t, 1, &img) == 1.0f);
    assert_true(stored_float(&t, 2, &img) == 0.5f);
    assert_true(stored_float(&t, 3, &img) == -0.5f);
    tx_tensor_release(&t);

    /* INT4 [-8, 7, -1, 0] packed as 0x78, 0x0f. */
    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_INT4, 1, d4));
    ((uint8_t *)t.data)[0] = 0x78;
    ((uint8_t *)t.data)[1] = 0x0f;
    size_t size;
    assert_null(tx_npy_encode(&t, &img, &size));
    tx_tensor back;
    assert_null(tx_npy_read_memory(img, size, "i4.npy", 0, &back));
    assert_int_equal(back.dtype, TEEXEC_DTYPE_INT8);
    const int8_t *v = back.data;
    assert_int_equal(v[0], -8);
    assert_int_equal(v[1], 7);
    assert_int_equal(v[2], -1);
    assert_int_equal(v[3], 0);
    tx_tensor_release(&back);
    free(img);
    tx_tensor_release(&t);

    /* Types with no .npy form are refused. */
    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_COMPLEX64, 1, d4));
    teexec_status *st = tx_npy_encode(&t, &img, &size);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_null(img);
    teexec_status_destroy(st);
    tx_tensor_release(&t);
}

static void read_file_errors(void **state)
{
    (void)state;
    tx_tensor t;
    teexec_status *st = tx_npy_read_file("/nonexistent/x.npy", 0, &t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_IO);
    assert_string_equal(teexec_status_file(st), "/nonexistent/x.npy");
    teexec_status_destroy(st);
    st = tx_npy_read_file("/tmp", 0, &t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_IO);
    teexec_status_destroy(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_every_little_endian_dtype),
        cmocka_unit_test(swaps_big_endian_on_read),
        cmocka_unit_test(reads_versions_2_and_3),
        cmocka_unit_test(reads_scalar_and_empty),
        cmocka_unit_test(refuses_fortran_object_structured_complex),
        cmocka_unit_test(refuses_truncated_and_overlong_payload),
        cmocka_unit_test(refuses_malformed_headers),
        cmocka_unit_test(refuses_bad_prelude),
        cmocka_unit_test(accepts_legal_variations),
        cmocka_unit_test(normalises_bools),
        cmocka_unit_test(writes_numpy_identical_files),
        cmocka_unit_test(round_trips_after_overwrite),
        cmocka_unit_test(upcasts_types_numpy_lacks),
        cmocka_unit_test(read_file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
