/* Tests for the quantizers' helpers: Philox4x32-10, the 128x4 scale
 * swizzle, and the 16-point random Hadamard transform. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/philox.h"
#include "kernels/cpu/scale_swizzle.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Known-answer vectors of Random123's philox4x32_10. */
static void philox_known_answers(void **state)
{
    (void)state;
    uint32_t out[4];
    const uint32_t c0[4] = {0, 0, 0, 0}, k0[2] = {0, 0};
    tx_philox4x32_10(c0, k0, out);
    assert_int_equal(out[0], 0x6627e8d5u);
    assert_int_equal(out[1], 0xe169c58du);
    assert_int_equal(out[2], 0xbc57ac4cu);
    assert_int_equal(out[3], 0x9b00dbd8u);
    const uint32_t c1[4] = {~0u, ~0u, ~0u, ~0u}, k1[2] = {~0u, ~0u};
    tx_philox4x32_10(c1, k1, out);
    assert_int_equal(out[0], 0x408f276du);
    assert_int_equal(out[1], 0x41c83b0eu);
    assert_int_equal(out[2], 0xa20bc7c6u);
    assert_int_equal(out[3], 0x6d5451fdu);
    const uint32_t c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
    const uint32_t k2[2] = {0xa4093822u, 0x299f31d0u};
    tx_philox4x32_10(c2, k2, out);
    assert_int_equal(out[0], 0xd16cfe09u);
    assert_int_equal(out[1], 0x94fdccebu);
    assert_int_equal(out[2], 0x5001e420u);
    assert_int_equal(out[3], 0x24126ea1u);
    /* tx_philox_draw lays seed/stream/counter out as documented */
    uint32_t a[4], b[4];
    tx_philox_draw(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull, a);
    tx_philox4x32_10(c2, k2, b);
    assert_memory_equal(a, b, sizeof a);
}

static void swizzle_offsets(void **state)
{
    (void)state;
    assert_int_equal(tx_swizzle_offset(0, 0, 4), 0);
    assert_int_equal(tx_swizzle_offset(1, 0, 4), 16);
    assert_int_equal(tx_swizzle_offset(32, 0, 4), 4);
    assert_int_equal(tx_swizzle_offset(0, 1, 4), 1);
    assert_int_equal(tx_swizzle_offset(33, 2, 4), 22);
    assert_int_equal(tx_swizzle_offset(127, 3, 4), 511);
    assert_int_equal(tx_swizzle_offset(0, 4, 8), 512);   /* next tile to the right */
    assert_int_equal(tx_swizzle_offset(128, 0, 8), 1024); /* next tile row */
}

static void swizzle_round_trip(void **state)
{
    (void)state;
    enum { R = 256, C = 12 };
    uint8_t *a = malloc(R * C), *s = malloc(R * C), *b = malloc(R * C);
    assert_true(a && s && b);
    for (int i = 0; i < R * C; i++) a[i] = (uint8_t)(i * 7 + 3);
    assert_null(tx_scale_swizzle(a, s, R, C, false));
    assert_int_equal(s[tx_swizzle_offset(200, 9, C)], a[200 * C + 9]);
    assert_null(tx_scale_unswizzle(s, b, R, C, false));
    assert_memory_equal(a, b, R * C);
    /* transposed: a (12 x 256) compact matrix swizzled as its transpose */
    assert_null(tx_scale_swizzle(a, s, C, R, true));
    assert_int_equal(s[tx_swizzle_offset(200, 9, C)], a[9 * R + 200]);
    assert_null(tx_scale_unswizzle(s, b, C, R, true));
    assert_memory_equal(a, b, R * C);
    teexec_status *st = tx_scale_swizzle(a, s, 100, 4, false);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    st = tx_scale_swizzle(a, s, 128, 6, false);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    free(a);
    free(s);
    free(b);
}

static void hadamard_matrix(void **state)
{
    (void)state;
    /* H H^T = I: rows orthonormal */
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++) {
            double d = 0;
            for (int j = 0; j < 16; j++) d += (double)tx_rht_entry(i, j) * tx_rht_entry(k, j);
            assert_true(d == (i == k ? 1.0 : 0.0));
        }
    /* row 0: s[0] = 1 and H16[0][j] = 1; row 3: s[3] = -1 */
    float v[16] = {0}, w[16];
    v[0] = 1.0f;
    tx_rht16(v, w, TEEXEC_DTYPE_FLOAT);
    for (int j = 0; j < 16; j++) assert_true(w[j] == 0.25f);
    memset(v, 0, sizeof v);
    v[3] = 1.0f;
    tx_rht16(v, w, TEEXEC_DTYPE_FLOAT);
    assert_true(w[0] == -0.25f && w[1] == 0.25f && w[2] == 0.25f && w[3] == -0.25f);
    assert_int_equal(tx_rht_sign[3], -1);
    assert_int_equal(tx_rht_sign[11], 1);
}

static void hadamard_rounding_and_invariance(void **state)
{
    (void)state;
    /* bf16 output: one rounding of the exact sum. v = (1, 2^-9, 0, ...):
     * w_0 = (1 + 2^-9)/4 is a bf16 tie -> rounds to even 0.25;
     * v = (1, 3*2^-9): w_0 = (1 + 3*2^-9)/4 rounds up */
    float v[16] = {1.0f, 0x1p-9f}, w[16];
    tx_rht16(v, w, TEEXEC_DTYPE_BFLOAT16);
    assert_true(w[0] == 0.25f);
    v[1] = 0x3p-9f;
    tx_rht16(v, w, TEEXEC_DTYPE_BFLOAT16);
    assert_true(w[0] == 0.25f * (1.0f + 0x1p-7f));
    /* the same orthogonal transform on both wgrad operands keeps dot products */
    float a[16], b[16], ha[16], hb[16];
    for (int i = 0; i < 16; i++) {
        a[i] = sinf((float)i);
        b[i] = cosf((float)i * 1.7f);
    }
    tx_rht16(a, ha, TEEXEC_DTYPE_FLOAT);
    tx_rht16(b, hb, TEEXEC_DTYPE_FLOAT);
    double d0 = 0, d1 = 0;
    for (int i = 0; i < 16; i++) {
        d0 += (double)a[i] * b[i];
        d1 += (double)ha[i] * hb[i];
    }
    assert_true(fabs(d0 - d1) < 1e-6);
    /* in place */
    memcpy(ha, a, sizeof a);
    tx_rht16(ha, ha, TEEXEC_DTYPE_FLOAT);
    tx_rht16(a, hb, TEEXEC_DTYPE_FLOAT);
    assert_memory_equal(ha, hb, sizeof ha);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(philox_known_answers),
        cmocka_unit_test(swizzle_offsets),
        cmocka_unit_test(swizzle_round_trip),
        cmocka_unit_test(hadamard_matrix),
        cmocka_unit_test(hadamard_rounding_and_invariance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
