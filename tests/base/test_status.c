/* Tests for status objects: creation, accessors, NULL handling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "base/status.h"

static void null_is_success(void **state)
{
    (void)state;
    assert_int_equal(teexec_status_code(NULL), TEEXEC_OK);
    assert_string_equal(teexec_status_message(NULL), "");
    assert_null(teexec_status_node(NULL));
    assert_null(teexec_status_file(NULL));
    teexec_status_destroy(NULL);
}

static void carries_code_message_node_file(void **state)
{
    (void)state;
    teexec_status *st = tx_status_new(TEEXEC_ERR_BAD_MODEL, "m.onnx", "n1", "bad %d", 42);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_BAD_MODEL);
    assert_string_equal(teexec_status_message(st), "bad 42");
    assert_string_equal(teexec_status_node(st), "n1");
    assert_string_equal(teexec_status_file(st), "m.onnx");
    teexec_status_destroy(st);
}

static void context_is_added_once(void **state)
{
    (void)state;
    teexec_status *st = tx_error(TEEXEC_ERR_IO, "cannot read");
    st = tx_status_with_node(st, "first");
    st = tx_status_with_node(st, "second");
    st = tx_status_with_file(st, "a.onnx");
    st = tx_status_prefix(st, "loading %s", "weights");
    assert_string_equal(teexec_status_node(st), "first");
    assert_string_equal(teexec_status_file(st), "a.onnx");
    assert_string_equal(teexec_status_message(st), "loading weights: cannot read");
    assert_null(tx_status_with_node(NULL, "x"));
    teexec_status_destroy(st);
}

static void code_names(void **state)
{
    (void)state;
    assert_string_equal(teexec_code_name(TEEXEC_ERR_LIMIT), "limit exceeded");
    assert_string_equal(teexec_code_name((teexec_code)99), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_is_success),
        cmocka_unit_test(carries_code_message_node_file),
        cmocka_unit_test(context_is_added_once),
        cmocka_unit_test(code_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
