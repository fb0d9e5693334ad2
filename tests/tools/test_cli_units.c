/* Unit tests for the CLI's building blocks, compiled in from tools/: the
 * JSON writer (structure, escaping, UTF-8 repair), the text table and the
 * exit status mapping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "cli_common.h"
#include "json_out.h"
#include "text_table.h"

/* Captures what fn writes to a FILE* as a malloc'd string. */
typedef struct capture {
    char *buf;
    size_t size;
    FILE *f;
} capture;

static void cap_open(capture *c)
{
    c->buf = NULL;
    c->size = 0;
    c->f = open_memstream(&c->buf, &c->size);
    assert_non_null(c->f);
}

static char *cap_close(capture *c)
{
    fclose(c->f);
    return c->buf;
}

static void json_structure(void **state)
{
    (void)state;
    capture c;
    cap_open(&c);
    json_out j;
    json_init(&j, c.f);
    json_begin_object(&j);
    json_key(&j, "a");
    json_int(&j, -3);
    json_key(&j, "list");
    json_begin_array(&j);
    json_uint(&j, UINT64_MAX);
    json_bool(&j, true);
    json_null(&j);
    json_double(&j, 0.5);
    json_double(&j, NAN);
    json_end_array(&j);
    json_key(&j, "empty");
    json_begin_object(&j);
    json_end_object(&j);
    json_key(&j, "none");
    json_begin_array(&j);
    json_end_array(&j);
    json_end_object(&j);
    json_finish(&j);
    char *s = cap_close(&c);
    assert_string_equal(s, "{\n"
                           "  \"a\": -3,\n"
                           "  \"list\": [\n"
                           "    18446744073709551615,\n"
                           "    true,\n"
                           "    null,\n"
                           "    0.5,\n"
                           "    null\n"
                           "  ],\n"
                           "  \"empty\": {},\n"
                           "  \"none\": []\n"
                           "}\n");
    free(s);
}

static void json_escaping(void **state)
{
    (void)state;
    static const struct { const char *in, *out; } cases[] = {
        {"plain", "\"plain\""},
        {"q\"b\\s/", "\"q\\\"b\\\\s/\""},
        {"\n\r\t\b\f", "\"\\n\\r\\t\\b\\f\""},
        {"\x01\x1f", "\"\\u0001\\u001f\""},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {"bad\xff", "\"bad\\ufffd\""},               /* not a lead byte */
        {"cut\xc3", "\"cut\\ufffd\""},               /* truncated sequence */
        {"over\xc0\xaf", "\"over\\ufffd\\ufffd\""},  /* overlong */
        {"sur\xed\xa0\x80", "\"sur\\ufffd\\ufffd\\ufffd\""}, /* surrogate */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        capture c;
        cap_open(&c);
        json_write_escaped(c.f, cases[i].in);
        char *s = cap_close(&c);
        assert_string_equal(s, cases[i].out);
        free(s);
    }
}

static void table_alignment(void **state)
{
    (void)state;
    capture c;
    cap_open(&c);
    text_table t;
    text_table_init(&t, 3);
    t.right[2] = true;
    const char *r1[] = {"name", "dtype", "n"};
    const char *r2[] = {"gr\xc3\xb6\xc3\x9f" "e", "float", "1234"};
    const char *r3[] = {"x\ny", "", ""};
    text_table_row(&t, r1);
    text_table_row(&t, r2);
    text_table_row(&t, r3);
    text_table_print(&t, c.f, 2);
    text_table_free(&t);
    char *s = cap_close(&c);
    assert_string_equal(s, "  name   dtype     n\n"
                           "  gr\xc3\xb6\xc3\x9f" "e  float  1234\n"
                           "  x?y\n");
    free(s);
}

static void exit_codes(void **state)
{
    (void)state;
    static const struct { teexec_code code; int exit; } map[] = {
        {TEEXEC_ERR_BAD_MODEL, 1}, {TEEXEC_ERR_IO, 1}, {TEEXEC_ERR_LIMIT, 1},
        {TEEXEC_ERR_INVALID_ARGUMENT, 1}, {TEEXEC_ERR_NO_MEMORY, 1}, {TEEXEC_ERR_INTERNAL, 1},
        {TEEXEC_ERR_UNSUPPORTED, 3}, {TEEXEC_ERR_DEVICE, 4},
    };
    assert_int_equal(cli_exit_code(NULL), 0);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        teexec_status *st = tx_error(map[i].code, "x");
        assert_int_equal(cli_exit_code(st), map[i].exit);
        teexec_status_destroy(st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_structure),
        cmocka_unit_test(json_escaping),
        cmocka_unit_test(table_alignment),
        cmocka_unit_test(exit_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
