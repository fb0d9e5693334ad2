/* Tests for .npz reading (NumPy-written stored, deflated and ZIP64
 * archives; corrupted copies of them) and the stored-member writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include "base/dtype.h"
#include "format/npz.h"
#include "npy_test_util.h"

static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void check_pattern(const tx_tensor *t, teexec_dtype dt)
{
    assert_non_null(t);
    assert_int_equal(t->dtype, dt);
    assert_int_equal(t->rank, 2);
    assert_int_equal(t->dims[0], 2);
    assert_int_equal(t->dims[1], 3);
    bool is_int = tx_dtype_is_integer(dt);
    for (size_t i = 0; i < (is_int ? 5u : 6u); i++) assert_true(elem(t, i) == pattern(dt, i));
    if (is_int) assert_true(last_int_bits(t) == int_max_bits(dt));
}

static void check_three_arrays(const tx_npz *z)
{
    assert_int_equal(z->count, 3);
    check_pattern(tx_npz_find(z, "x"), TEEXEC_DTYPE_FLOAT);
    check_pattern(tx_npz_find(z, "ids"), TEEXEC_DTYPE_INT64);
    check_pattern(tx_npz_find(z, "mask"), TEEXEC_DTYPE_BOOL);
    assert_null(tx_npz_find(z, "missing"));
    assert_null(tx_npz_find(z, "x.npy"));
}

static teexec_status *read_fixture(const char *name, uint64_t budget, tx_npz **z)
{
    char path[1024];
    fixture_path(path, sizeof path, name);
    return tx_npz_read_file(path, budget, z);
}

static void reads_stored_and_deflated(void **state)
{
    (void)state;
    const char *names[] = {"stored.npz", "deflated.npz"};
    for (size_t k = 0; k < 2; k++) {
        tx_npz *z = NULL;
        teexec_status *st = read_fixture(names[k], 0, &z);
        if (st) fail_msg("%s: %s", names[k], teexec_status_message(st));
        check_three_arrays(z);
        assert_string_equal(z->arrays[0].name, "x"); /* archive order kept */
        tx_npz_free(z);
    }
}

static void reads_zip64_members(void **state)
{
    (void)state;
    tx_npz *z = NULL;
    assert_null(read_fixture("zip64.npz", 0, &z));
    assert_int_equal(z->count, 1);
    check_pattern(tx_npz_find(z, "big"), TEEXEC_DTYPE_DOUBLE);
    tx_npz_free(z);
    /* Every size and offset through ZIP64 records. */
    assert_null(read_fixture("zip64_full.npz", 0, &z));
    assert_int_equal(z->count, 1);
    check_pattern(tx_npz_find(z, "w"), TEEXEC_DTYPE_INT32);
    tx_npz_free(z);
}

static void expect_error(const unsigned char *buf, size_t size, teexec_code code,
                         const char *words)
{
    tx_npz *z = (tx_npz *)1;
    teexec_status *st = tx_npz_read_memory(buf, size, "t.npz", 0, &z);
    assert_null(z);
    if (!st) fail_msg("expected an error containing '%s'", words);
    if (teexec_status_code(st) != code || (words && !strstr(teexec_status_message(st), words)))
        fail_msg("want code %d '%s', got code %d: %s", code, words ? words : "",
                 teexec_status_code(st), teexec_status_message(st));
    teexec_status_destroy(st);
}

/* Offset of the end record of an archive without a comment. */
static size_t eocd_of(size_t size) { return size - 22; }

static void refuses_bad_crc(void **state)
{
    (void)state;
    size_t size;
    unsigned char *buf = slurp("stored.npz", &size);
    assert_non_null(buf);
    /* The first member's data starts after its 30-byte header and name;
     * flip a payload byte near its end. */
    size_t data = 30 + get16(buf + 26) + get16(buf + 28);
    size_t len = get32(buf + 18);
    buf[data + len - 1] ^= 0x40;
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "CRC-32");
    buf[data + len - 1] ^= 0x40;
    /* Or a wrong CRC in the central directory. */
    size_t cd = get32(buf + eocd_of(size) + 16);
    buf[cd + 16] ^= 1;
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "CRC-32");
    free(buf);

    /* Deflated: a flipped bit is caught by inflate or by the CRC. */
    buf = slurp("deflated.npz", &size);
    data = 30 + get16(buf + 26) + get16(buf + 28);
    buf[data + 5] ^= 0x10;
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "zip member 'x.npy'");
    free(buf);
}

static void refuses_truncated_archives(void **state)
{
    (void)state;
    const char *names[] = {"stored.npz", "deflated.npz", "zip64_full.npz"};
    for (size_t k = 0; k < 3; k++) {
        size_t size;
        unsigned char *buf = slurp(names[k], &size);
        assert_non_null(buf);
        /* Every proper prefix fails cleanly (ASan checks no byte past it is
         * read): each copy is exactly `cut` bytes. */
        for (size_t cut = 0; cut < size; cut++) {
            unsigned char *copy = malloc(cut ? cut : 1);
            memcpy(copy, buf, cut);
            tx_npz *z = NULL;
            teexec_status *st = tx_npz_read_memory(copy, cut, "cut.npz", 0, &z);
            if (!st) fail_msg("%s cut at %zu was accepted", names[k], cut);
            assert_null(z);
            teexec_status_destroy(st);
            free(copy);
        }
        free(buf);
    }
    /* A central directory that claims more bytes than there are. */
    size_t size;
    unsigned char *buf = slurp("stored.npz", &size);
    unsigned char *e = buf + eocd_of(size);
    put32(e + 12, get32(e + 12) + 100);
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "central directory");
    put32(e + 12, get32(e + 12) - 100);
    /* Entry count larger than the directory can hold. */
    e[8] = e[10] = 200;
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "cannot hold");
    free(buf);
}

static void refuses_encrypted_and_foreign_members(void **state)
{
    (void)state;
    size_t size;
    unsigned char *buf = slurp("stored.npz", &size);
    size_t cd = get32(buf + eocd_of(size) + 16);
    buf[cd + 8] |= 1; /* general purpose flag bit 0: encrypted */
    expect_error(buf, size, TEEXEC_ERR_UNSUPPORTED, "encrypted");
    buf[cd + 8] &= (unsigned char)~1u;
    buf[cd + 10] = 12; /* bzip2 */
    expect_error(buf, size, TEEXEC_ERR_UNSUPPORTED, "compression method 12");
    buf[cd + 10] = 0;
    buf[cd + 46] = 0x01; /* control character in the member name */
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "control character");
    free(buf);

    tx_npz *z = NULL;
    teexec_status *st = read_fixture("not_npy.npz", 0, &z);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
    assert_non_null(strstr(teexec_status_message(st), "readme.txt"));
    teexec_status_destroy(st);
}

static void refuses_local_header_mismatch(void **state)
{
    (void)state;
    size_t size;
    unsigned char *buf = slurp("stored.npz", &size);
    buf[30] = 'y'; /* the local header's copy of the first name */
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "different file");
    buf[30] = 'x';
    size_t cd = get32(buf + eocd_of(size) + 16);
    put32(buf + cd + 42, (uint32_t)size); /* local header offset past the members */
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "out of bounds");
    free(buf);
}

static void enforces_budget(void **state)
{
    (void)state;
    tx_npz *z = NULL;
    teexec_status *st = read_fixture("deflated.npz", 300, &z);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_LIMIT);
    assert_null(z);
    teexec_status_destroy(st);
    assert_null(read_fixture("deflated.npz", 4096, &z));
    tx_npz_free(z);

    /* A deflated member claiming an impossible ratio is refused before
     * any allocation of that size. */
    size_t size;
    unsigned char *buf = slurp("deflated.npz", &size);
    assert_non_null(buf);
    size_t cd = get32(buf + eocd_of(size) + 16);
    put32(buf + cd + 24, 0xfffffff0u);
    expect_error(buf, size, TEEXEC_ERR_BAD_MODEL, "more than deflate can produce");
    free(buf);
}

static void writer_round_trips(void **state)
{
    (void)state;
    tx_tensor a, b, c;
    int64_t da[] = {2, 3}, db[] = {5}, dc[] = {0};
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 2, da));
    assert_null(tx_tensor_alloc(&b, TEEXEC_DTYPE_BFLOAT16, 1, db));
    assert_null(tx_tensor_alloc(&c, TEEXEC_DTYPE_INT64, 1, dc));
    for (int i = 0; i < 6; i++) ((float *)a.data)[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 5; i++) ((uint16_t *)b.data)[i] = tx_f32_to_bf16((float)i + 0.5f);
    const char *names[] = {"alpha", "dir/beta", "gamma"};
    const tx_tensor *ts[] = {&a, &b, &c};

    char dir[] = "/tmp/teexec-npz-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/out.npz", dir);
    assert_null(tx_npz_write_file(path, 3, names, ts));
    tx_npz *z = NULL;
    assert_null(tx_npz_read_file(path, 0, &z));
    assert_int_equal(z->count, 3);
    const tx_tensor *ra = tx_npz_find(z, "alpha");
    assert_non_null(ra);
    assert_memory_equal(ra->data, a.data, a.nbytes);
    const tx_tensor *rb = tx_npz_find(z, "dir/beta");
    assert_non_null(rb);
    assert_int_equal(rb->dtype, TEEXEC_DTYPE_FLOAT); /* bf16 is stored as float32 */
    for (int i = 0; i < 5; i++) assert_true(((float *)rb->data)[i] == (float)i + 0.5f);
    const tx_tensor *rc = tx_npz_find(z, "gamma");
    assert_non_null(rc);
    assert_int_equal(rc->numel, 0);
    tx_npz_free(z);
    unlink(path);
    rmdir(dir);

    /* Bad names are refused before anything is written. */
    const char *dup[] = {"alpha", "alpha"};
    void *img = NULL;
    size_t size;
    teexec_status *st = tx_npz_encode(2, dup, ts, &img, &size);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_null(img);
    teexec_status_destroy(st);
    const char *empty[] = {""};
    st = tx_npz_encode(1, empty, ts, &img, &size);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);

    /* An empty archive is valid. */
    assert_null(tx_npz_encode(0, NULL, NULL, &img, &size));
    assert_int_equal(size, 22);
    assert_null(tx_npz_read_memory(img, size, "empty.npz", 0, &z));
    assert_int_equal(z->count, 0);
    tx_npz_free(z);
    free(img);

    tx_tensor_release(&a);
    tx_tensor_release(&b);
    tx_tensor_release(&c);
}

static void duplicate_members_refused(void **state)
{
    (void)state;
    tx_tensor a;
    int64_t d[] = {1};
    assert_null(tx_tensor_alloc(&a, TEEXEC_DTYPE_FLOAT, 1, d));
    const char *names[] = {"aa", "ab"};
    const tx_tensor *ts[] = {&a, &a};
    void *img;
    size_t size;
    assert_null(tx_npz_encode(2, names, ts, &img, &size));
    /* Rename the second member "ab" -> "aa" in both headers. */
    unsigned char *b = img;
    for (size_t i = 0; i + 6 <= size; i++)
        if (memcmp(b + i, "ab.npy", 6) == 0) b[i + 1] = 'a';
    expect_error(b, size, TEEXEC_ERR_BAD_MODEL, "two arrays named 'aa'");
    free(img);
    tx_tensor_release(&a);
}

/* Deterministic byte mutations of a deflated archive: whatever happens, no
 * crash, no leak, and either a clean error or a well-formed result. */
static void survives_mutations(void **state)
{
    (void)state;
    size_t size;
    unsigned char *orig = slurp("deflated.npz", &size);
    assert_non_null(orig);
    unsigned char *buf = malloc(size);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int errors = 0;
    for (int iter = 0; iter < 1200; iter++) {
        memcpy(buf, orig, size);
        int flips = 1 + iter % 4;
        for (int f = 0; f < flips; f++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            buf[(s >> 33) % size] ^= (unsigned char)(1u << ((s >> 20) & 7));
        }
        tx_npz *z = NULL;
        teexec_status *st = tx_npz_read_memory(buf, size, "m.npz", 0, &z);
        if (st) {
            errors++;
            assert_null(z);
            assert_true(teexec_status_code(st) != TEEXEC_ERR_INTERNAL);
            teexec_status_destroy(st);
        } else {
            for (size_t i = 0; i < z->count; i++) assert_non_null(z->arrays[i].tensor.data);
            tx_npz_free(z);
        }
    }
    assert_true(errors > 1000); /* almost every mutation is detected */
    free(buf);
    free(orig);
}

/* The training fixtures under models/ (np.savez_compressed by
 * models/make_models.py) read back with the shapes the README promises. */
static void reads_model_training_fixtures(void **state)
{
    (void)state;
    const char *root = getenv("TEEXEC_SOURCE_ROOT");
    struct { const char *model; int64_t seq; } m[] = {{"mlp", 8}, {"gpt2_block", 16}};
    for (size_t k = 0; k < 2; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s/train.npz", root ? root : ".", m[k].model);
        tx_npz *z = NULL;
        teexec_status *st = tx_npz_read_file(path, 0, &z);
        if (st) fail_msg("%s: %s", path, teexec_status_message(st));
        assert_int_equal(z->count, 2);
        const tx_tensor *names[2] = {tx_npz_find(z, "x"), tx_npz_find(z, "target")};
        for (int i = 0; i < 2; i++) {
            assert_non_null(names[i]);
            assert_int_equal(names[i]->dtype, TEEXEC_DTYPE_FLOAT);
            assert_int_equal(names[i]->rank, 3);
            assert_int_equal(names[i]->dims[0], 8);
            assert_int_equal(names[i]->dims[1], m[k].seq);
            assert_int_equal(names[i]->dims[2], 64);
        }
        tx_npz_free(z);
        snprintf(path, sizeof path, "%s/models/%s/expected/grads.npz", root ? root : ".",
                 m[k].model);
        assert_null(tx_npz_read_file(path, 0, &z));
        const tx_tensor *xg = tx_npz_find(z, "x.grad");
        assert_non_null(xg);
        assert_int_equal(xg->dims[0], 2);
        assert_non_null(tx_npz_find(z, "fc1.bias"));
        tx_npz_free(z);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_stored_and_deflated),
        cmocka_unit_test(reads_zip64_members),
        cmocka_unit_test(refuses_bad_crc),
        cmocka_unit_test(refuses_truncated_archives),
        cmocka_unit_test(refuses_encrypted_and_foreign_members),
        cmocka_unit_test(refuses_local_header_mismatch),
        cmocka_unit_test(enforces_budget),
        cmocka_unit_test(writer_round_trips),
        cmocka_unit_test(duplicate_members_refused),
        cmocka_unit_test(survives_mutations),
        cmocka_unit_test(reads_model_training_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
