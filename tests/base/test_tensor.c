/* Tests for host tensors and the dtype table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/dtype.h"
#include "base/tensor.h"

static void alloc_sizes(void **state)
{
    (void)state;
    tx_tensor t;
    int64_t dims[] = {3, 5};
    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT, 2, dims));
    assert_int_equal(t.numel, 15);
    assert_int_equal(t.nbytes, 60);
    tx_tensor_release(&t);
    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT4E2M1, 2, dims));
    assert_int_equal(t.nbytes, 8); /* 15 nibbles round up to 8 bytes */
    tx_tensor_release(&t);
    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_INT2, 2, dims));
    assert_int_equal(t.nbytes, 4);
    tx_tensor_release(&t);
    assert_null(tx_tensor_alloc(&t, TEEXEC_DTYPE_BOOL, 0, NULL));
    assert_int_equal(t.numel, 1);
    tx_tensor_release(&t);
}

static void alloc_refuses_overflow_and_negative(void **state)
{
    (void)state;
    tx_tensor t;
    int64_t big[] = {INT64_MAX, INT64_MAX};
    teexec_status *st = tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT, 2, big);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_LIMIT);
    teexec_status_destroy(st);
    int64_t neg[] = {-1};
    st = tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT, 1, neg);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    st = tx_tensor_alloc(&t, TEEXEC_DTYPE_FLOAT, TX_MAX_RANK + 1, neg);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_LIMIT);
    teexec_status_destroy(st);
    assert_null(t.data);
}

static void dtype_table(void **state)
{
    (void)state;
    assert_string_equal(teexec_dtype_name(TEEXEC_DTYPE_FLOAT8E4M3FN), "float8e4m3fn");
    assert_int_equal(teexec_dtype_bits(TEEXEC_DTYPE_FLOAT4E2M1), 4);
    assert_int_equal(teexec_dtype_bits(TEEXEC_DTYPE_STRING), 0);
    assert_int_equal(tx_dtype_from_name("bfloat16"), TEEXEC_DTYPE_BFLOAT16);
    assert_int_equal(tx_dtype_from_name("nope"), -1);
    assert_true(tx_dtype_is_subbyte(TEEXEC_DTYPE_INT4));
    assert_false(tx_dtype_is_subbyte(TEEXEC_DTYPE_INT8));
    assert_string_equal(teexec_dtype_name((teexec_dtype)77), "undefined");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_sizes),
        cmocka_unit_test(alloc_refuses_overflow_and_negative),
        cmocka_unit_test(dtype_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
