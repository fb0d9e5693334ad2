/* Tests for kernels/cpu/convert: ONNX Cast semantics between dtypes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "kernels/cpu/convert.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void ok(teexec_status *st)
{
    if (st) {
        const char *m = teexec_status_message(st);
        fail_msg("unexpected error: %s", m);
    }
}

static void float_to_fp8_saturate_and_not(void **state)
{
    (void)state;
    const float src[] = {1.0f, 464.0f, 500.0f, -INFINITY, NAN, 0x1p-10f, -0.0f};
    uint8_t dst[N_OF(src)];
    ok(tx_convert(src, TEEXEC_DTYPE_FLOAT, dst, TEEXEC_DTYPE_FLOAT8E4M3FN, N_OF(src), NULL));
    const uint8_t want_sat[] = {0x38, 0x7E, 0x7E, 0xFE, 0x7F, 0x00, 0x80};
    assert_memory_equal(dst, want_sat, sizeof dst);
    tx_convert_opts o = TX_CONVERT_OPTS_DEFAULT;
    o.saturate = 0;
    ok(tx_convert(src, TEEXEC_DTYPE_FLOAT, dst, TEEXEC_DTYPE_FLOAT8E4M3FN, N_OF(src), &o));
    const uint8_t want_nosat[] = {0x38, 0x7E, 0x7F, 0xFF, 0x7F, 0x00, 0x80};
    assert_memory_equal(dst, want_nosat, sizeof dst);
    ok(tx_convert(src, TEEXEC_DTYPE_FLOAT, dst, TEEXEC_DTYPE_FLOAT8E5M2, N_OF(src), &o));
    assert_int_equal(dst[2], 0x60);  /* 500 is nearer 512 than 448 */
    assert_int_equal(dst[3], 0xFC);  /* -Inf stays -Inf without saturation */
}

static void fp8_to_fp8_and_back(void **state)
{
    (void)state;
    const uint8_t e5[] = {0x7B, 0x3C, 0x7C, 0x01};
    uint8_t e4[4];
    ok(tx_convert(e5, TEEXEC_DTYPE_FLOAT8E5M2, e4, TEEXEC_DTYPE_FLOAT8E4M3FN, 4, NULL));
    /* 57344 -> 448, 1 -> 1, Inf -> 448 (saturate), 2^-16 -> 0 */
    const uint8_t want[] = {0x7E, 0x38, 0x7E, 0x00};
    assert_memory_equal(e4, want, 4);
    float back[256];
    uint8_t all[256];
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)i;
    ok(tx_convert(all, TEEXEC_DTYPE_FLOAT8E4M3FNUZ, back, TEEXEC_DTYPE_FLOAT, 256, NULL));
    for (int i = 0; i < 256; i++) {
        float w = tx_e4m3fnuz_to_f32((uint8_t)i);
        assert_true(isnan(w) ? isnan(back[i]) : tx_f32_bits(w) == tx_f32_bits(back[i]));
    }
}

static void float_to_int_defined(void **state)
{
    (void)state;
    const float src[] = {2.7f, -2.7f, NAN, 1e20f, -1e20f, -0.5f, 2147483520.0f};
    int32_t d32[N_OF(src)];
    ok(tx_convert(src, TEEXEC_DTYPE_FLOAT, d32, TEEXEC_DTYPE_INT32, N_OF(src), NULL));
    const int32_t w32[] = {2, -2, 0, INT32_MAX, INT32_MIN, 0, 2147483520};
    assert_memory_equal(d32, w32, sizeof d32);
    uint8_t du8[N_OF(src)];
    ok(tx_convert(src, TEEXEC_DTYPE_FLOAT, du8, TEEXEC_DTYPE_UINT8, N_OF(src), NULL));
    const uint8_t wu8[] = {2, 0, 0, 255, 0, 0, 255};
    assert_memory_equal(du8, wu8, sizeof du8);
    const double dd[] = {9.3e18, -9.3e18, 1.9e19, 1e19};
    int64_t d64[4];
    uint64_t du64[4];
    ok(tx_convert(dd, TEEXEC_DTYPE_DOUBLE, d64, TEEXEC_DTYPE_INT64, 4, NULL));
    assert_true(d64[0] == INT64_MAX && d64[1] == INT64_MIN && d64[3] == INT64_MAX);
    ok(tx_convert(dd, TEEXEC_DTYPE_DOUBLE, du64, TEEXEC_DTYPE_UINT64, 4, NULL));
    assert_true(du64[0] == 9300000000000000000ull && du64[1] == 0 && du64[2] == UINT64_MAX);
    assert_true(du64[3] == 10000000000000000000ull);
}

static void int_to_int_wraps(void **state)
{
    (void)state;
    const int32_t s[] = {300, -1, -129, 127};
    int8_t d8[4];
    ok(tx_convert(s, TEEXEC_DTYPE_INT32, d8, TEEXEC_DTYPE_INT8, 4, NULL));
    assert_int_equal(d8[0], 44);
    assert_int_equal(d8[1], -1);
    assert_int_equal(d8[2], 127);
    uint16_t d16[4];
    ok(tx_convert(s, TEEXEC_DTYPE_INT32, d16, TEEXEC_DTYPE_UINT16, 4, NULL));
    assert_int_equal(d16[1], 65535);
    const uint64_t big[] = {UINT64_MAX};
    int64_t di[1];
    ok(tx_convert(big, TEEXEC_DTYPE_UINT64, di, TEEXEC_DTYPE_INT64, 1, NULL));
    assert_true(di[0] == -1);
    float f[1];
    ok(tx_convert(big, TEEXEC_DTYPE_UINT64, f, TEEXEC_DTYPE_FLOAT, 1, NULL));
    assert_true(f[0] == 0x1p64f);
}

static void subbyte_ints(void **state)
{
    (void)state;
    const int32_t s[] = {100, -100, 3, -3, 7};
    uint8_t packed[3] = {0xAA, 0xAA, 0xAA};
    ok(tx_convert(s, TEEXEC_DTYPE_INT32, packed, TEEXEC_DTYPE_INT4, 5, NULL));
    /* 7, -8(0x8), 3, -3(0xD), 7, padding 0 */
    assert_int_equal(packed[0], 0x87);
    assert_int_equal(packed[1], 0xD3);
    assert_int_equal(packed[2], 0x07);
    int32_t back[5];
    ok(tx_convert(packed, TEEXEC_DTYPE_INT4, back, TEEXEC_DTYPE_INT32, 5, NULL));
    const int32_t wb[] = {7, -8, 3, -3, 7};
    assert_memory_equal(back, wb, sizeof back);
    const float f[] = {2.5f, 3.5f, -0.7f, NAN, 1e9f};
    uint8_t u4[3];
    ok(tx_convert(f, TEEXEC_DTYPE_FLOAT, u4, TEEXEC_DTYPE_UINT4, 5, NULL));
    assert_int_equal(u4[0], 0x42); /* 2.5 -> 2 (even), 3.5 -> 4 */
    assert_int_equal(u4[1], 0x00); /* -0.7 -> 0 (saturated), NaN -> 0 */
    assert_int_equal(u4[2], 0x0F);
    uint8_t i2[2] = {0xFF, 0xFF};
    ok(tx_convert(f, TEEXEC_DTYPE_FLOAT, i2, TEEXEC_DTYPE_INT2, 5, NULL));
    /* 2.5->1, 3.5->1, -0.7->-1(3), NaN->0, 1e9->1 */
    assert_int_equal(i2[0], 0x1 | (0x1 << 2) | (0x3 << 4));
    assert_int_equal(i2[1], 0x01);
    float fb[5];
    ok(tx_convert(i2, TEEXEC_DTYPE_INT2, fb, TEEXEC_DTYPE_FLOAT, 5, NULL));
    assert_true(fb[0] == 1.0f && fb[2] == -1.0f && fb[3] == 0.0f);
    ok(tx_convert(u4, TEEXEC_DTYPE_UINT4, fb, TEEXEC_DTYPE_FLOAT, 5, NULL));
    assert_true(fb[1] == 4.0f && fb[4] == 15.0f);
}

static void bool_rules(void **state)
{
    (void)state;
    const float f[] = {0.0f, -0.0f, NAN, 0.5f, -3.0f};
    uint8_t b[5];
    ok(tx_convert(f, TEEXEC_DTYPE_FLOAT, b, TEEXEC_DTYPE_BOOL, 5, NULL));
    const uint8_t wb[] = {0, 0, 1, 1, 1};
    assert_memory_equal(b, wb, 5);
    uint16_t h[5];
    ok(tx_convert(b, TEEXEC_DTYPE_BOOL, h, TEEXEC_DTYPE_FLOAT16, 5, NULL));
    assert_int_equal(h[0], 0);
    assert_int_equal(h[2], 0x3C00);
}

static void no_double_rounding(void **state)
{
    (void)state;
    /* 1 + 2^-11 + 2^-40: just above the fp16 midpoint; going through a
     * float would land exactly on the midpoint and round down to 1.0. */
    const double d[] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11};
    uint16_t h[2];
    ok(tx_convert(d, TEEXEC_DTYPE_DOUBLE, h, TEEXEC_DTYPE_FLOAT16, 2, NULL));
    assert_int_equal(h[0], 0x3C01);
    assert_int_equal(h[1], 0x3C00);
    /* 2^60 + 2^52 + 1: just above a bf16 midpoint that int64 -> double
     * would hit exactly */
    const int64_t i[] = {(1ll << 60) + (1ll << 52) + 1, (1ll << 60) + (1ll << 52)};
    uint16_t bf[2];
    ok(tx_convert(i, TEEXEC_DTYPE_INT64, bf, TEEXEC_DTYPE_BFLOAT16, 2, NULL));
    assert_int_equal(bf[0], 0x5D81);
    assert_int_equal(bf[1], 0x5D80);
    /* double -> E4M3: 1 + 2^-4 + 2^-30 is above the tie 1.0625 */
    const double e[] = {1.0625 + 0x1p-30};
    uint8_t q[1];
    ok(tx_convert(e, TEEXEC_DTYPE_DOUBLE, q, TEEXEC_DTYPE_FLOAT8E4M3FN, 1, NULL));
    assert_int_equal(q[0], 0x39);
    /* double beyond float: Inf for float targets, defined for all */
    const double big[] = {1e39, -1e39, (double)FLT_MAX + 0x1p102};
    float f[3];
    ok(tx_convert(big, TEEXEC_DTYPE_DOUBLE, f, TEEXEC_DTYPE_FLOAT, 3, NULL));
    assert_true(f[0] == INFINITY && f[1] == -INFINITY && f[2] == FLT_MAX);
}

static void fp4_and_e8m0(void **state)
{
    (void)state;
    const float f[] = {0.5f, -6.0f, 1e9f, NAN, 3.0f};
    uint8_t p[3] = {0xFF, 0xFF, 0xFF};
    ok(tx_convert(f, TEEXEC_DTYPE_FLOAT, p, TEEXEC_DTYPE_FLOAT4E2M1, 5, NULL));
    assert_int_equal(p[0], 0xF1); /* element 0 in the low nibble */
    assert_int_equal(p[1], 0x77);
    assert_int_equal(p[2], 0x05); /* padding nibble zeroed */
    uint16_t bf[5];
    ok(tx_convert(p, TEEXEC_DTYPE_FLOAT4E2M1, bf, TEEXEC_DTYPE_BFLOAT16, 5, NULL));
    assert_int_equal(bf[1], 0xC0C0); /* -6 */
    const float s[] = {1.5f, 0.0f, INFINITY};
    uint8_t e[3];
    ok(tx_convert(s, TEEXEC_DTYPE_FLOAT, e, TEEXEC_DTYPE_FLOAT8E8M0, 3, NULL));
    assert_int_equal(e[0], 128);
    assert_int_equal(e[1], 0);
    assert_int_equal(e[2], 0xFE);
    tx_convert_opts o = {0, TX_E8M0_ROUND_NEAREST};
    ok(tx_convert(s, TEEXEC_DTYPE_FLOAT, e, TEEXEC_DTYPE_FLOAT8E8M0, 3, &o));
    assert_int_equal(e[0], 128);
    assert_int_equal(e[1], 0xFF);
    assert_int_equal(e[2], 0xFF);
    o.e8m0_round = TX_E8M0_ROUND_DOWN;
    ok(tx_convert(s, TEEXEC_DTYPE_FLOAT, e, TEEXEC_DTYPE_FLOAT8E8M0, 1, &o));
    assert_int_equal(e[0], 127);
    int32_t ints[3];
    const uint8_t codes[] = {127 + 3, 0, 0xFF};
    ok(tx_convert(codes, TEEXEC_DTYPE_FLOAT8E8M0, ints, TEEXEC_DTYPE_INT32, 3, NULL));
    assert_int_equal(ints[0], 8);
    assert_int_equal(ints[1], 0);
    assert_int_equal(ints[2], 0); /* NaN -> 0 */
}

static void refusals_and_fast_paths(void **state)
{
    (void)state;
    float f[2] = {1.0f, 2.0f};
    teexec_status *st = tx_convert(f, TEEXEC_DTYPE_FLOAT, f, TEEXEC_DTYPE_STRING, 2, NULL);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    st = tx_convert(f, TEEXEC_DTYPE_COMPLEX64, f, TEEXEC_DTYPE_FLOAT, 1, NULL);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    tx_convert_opts bad = {1, (tx_e8m0_round)7};
    st = tx_convert(f, TEEXEC_DTYPE_FLOAT, f, TEEXEC_DTYPE_FLOAT8E8M0, 1, &bad);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    st = tx_convert(NULL, TEEXEC_DTYPE_FLOAT, f, TEEXEC_DTYPE_DOUBLE, 1, NULL);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    ok(tx_convert(NULL, TEEXEC_DTYPE_FLOAT, NULL, TEEXEC_DTYPE_DOUBLE, 0, NULL));
    /* the fast paths agree with the scalar codecs */
    const float v[] = {1.00390625f, -65519.0f, 65520.0f, 0x1p-25f, NAN};
    uint16_t h[5], b[5];
    ok(tx_convert(v, TEEXEC_DTYPE_FLOAT, h, TEEXEC_DTYPE_FLOAT16, 5, NULL));
    ok(tx_convert_from_f32(v, b, TEEXEC_DTYPE_BFLOAT16, 5, NULL));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(h[i], tx_f32_to_f16(v[i]));
        assert_int_equal(b[i], tx_f32_to_bf16(v[i]));
    }
    float r[5];
    ok(tx_convert_to_f32(h, TEEXEC_DTYPE_FLOAT16, r, 5));
    assert_true(r[1] == -65504.0f && r[2] == INFINITY);
    /* same dtype: copy */
    uint8_t p[2] = {0x21, 0x43}, q[2] = {0xFF, 0xFF};
    ok(tx_convert(p, TEEXEC_DTYPE_UINT4, q, TEEXEC_DTYPE_UINT4, 3, NULL));
    assert_int_equal(q[0], 0x21);
    assert_int_equal(q[1], 0x03);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(float_to_fp8_saturate_and_not),
        cmocka_unit_test(fp8_to_fp8_and_back),
        cmocka_unit_test(float_to_int_defined),
        cmocka_unit_test(int_to_int_wraps),
        cmocka_unit_test(subbyte_ints),
        cmocka_unit_test(bool_rules),
        cmocka_unit_test(no_double_rounding),
        cmocka_unit_test(fp4_and_e8m0),
        cmocka_unit_test(refusals_and_fast_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
