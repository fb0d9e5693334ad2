/* Tests for base/numfmt: golden decode tables (generated independently by
 * make_golden.py from the ONNX bit-field definitions), hand-checked encode
 * vectors, exhaustive round trips and a brute-force nearest-value check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "base/numfmt.h"
#include "golden_numfmt.h"

#include <float.h>
#include <math.h>

typedef float (*decode_fn)(uint8_t);
typedef uint8_t (*encode_fn)(float, int);

static void check_table(decode_fn dec, const uint32_t *golden, int count, const char *name)
{
    for (int b = 0; b < count; b++) {
        float got = dec((uint8_t)b);
        float want = tx_bits_f32(golden[b]);
        if (isnan(want)) {
            if (!isnan(got)) fail_msg("%s 0x%02x: want NaN, got %g", name, b, (double)got);
        } else if (tx_f32_bits(got) != golden[b]) {
            fail_msg("%s 0x%02x: want %a, got %a", name, b, (double)want, (double)got);
        }
    }
}

static void decode_golden_fp8(void **state)
{
    (void)state;
    check_table(tx_e4m3fn_to_f32, golden_e4m3fn, 256, "e4m3fn");
    check_table(tx_e4m3fnuz_to_f32, golden_e4m3fnuz, 256, "e4m3fnuz");
    check_table(tx_e5m2_to_f32, golden_e5m2, 256, "e5m2");
    check_table(tx_e5m2fnuz_to_f32, golden_e5m2fnuz, 256, "e5m2fnuz");
    check_table(tx_e8m0_to_f32, golden_e8m0, 256, "e8m0");
}

static float e2m1_dec(uint8_t b) { return tx_e2m1_to_f32(b); }

static void decode_golden_fp4(void **state)
{
    (void)state;
    check_table(e2m1_dec, golden_e2m1, 16, "e2m1");
}

/* Hand-checked anchors, guarding the generator as much as the decoder. */
static void decode_anchors(void **state)
{
    (void)state;
    assert_true(tx_e4m3fn_to_f32(0x7E) == 448.0f);
    assert_true(tx_e4m3fn_to_f32(0x01) == 0x1p-9f);
    assert_true(tx_e4m3fn_to_f32(0x38) == 1.0f);
    assert_true(isnan(tx_e4m3fn_to_f32(0xFF)));
    assert_true(tx_f32_bits(tx_e4m3fn_to_f32(0x80)) == 0x80000000u); /* -0 */
    assert_true(tx_e4m3fnuz_to_f32(0x7F) == 240.0f);
    assert_true(tx_e4m3fnuz_to_f32(0x01) == 0x1p-10f);
    assert_true(isnan(tx_e4m3fnuz_to_f32(0x80)));
    assert_true(tx_e4m3fnuz_to_f32(0xFF) == -240.0f);
    assert_true(tx_e5m2_to_f32(0x7B) == 57344.0f);
    assert_true(tx_e5m2_to_f32(0x7C) == INFINITY);
    assert_true(tx_e5m2_to_f32(0xFC) == -INFINITY);
    assert_true(isnan(tx_e5m2_to_f32(0x7D)));
    assert_true(tx_e5m2_to_f32(0x01) == 0x1p-16f);
    assert_true(tx_e5m2fnuz_to_f32(0x7F) == 57344.0f);
    assert_true(tx_e5m2fnuz_to_f32(0x01) == 0x1p-17f);
    assert_true(tx_e8m0_to_f32(0x00) == 0x1p-127f);
    assert_true(tx_e8m0_to_f32(0x7F) == 1.0f);
    assert_true(tx_e8m0_to_f32(0xFE) == 0x1p127f);
    assert_true(isnan(tx_e8m0_to_f32(0xFF)));
    assert_true(tx_e2m1_to_f32(0x7) == 6.0f);
    assert_true(tx_e2m1_to_f32(0xB) == -1.5f);
    assert_true(tx_fp8_to_f32(TEEXEC_DTYPE_FLOAT8E5M2, 0x7B) == 57344.0f);
    assert_true(tx_numfmt_max(TEEXEC_DTYPE_FLOAT8E4M3FN) == 448.0f);
    assert_true(tx_numfmt_max(TEEXEC_DTYPE_FLOAT4E2M1) == 6.0f);
}

static void encode_e4m3fn_vectors(void **state)
{
    (void)state;
    assert_int_equal(tx_f32_to_e4m3fn(1.0f, 1), 0x38);
    assert_int_equal(tx_f32_to_e4m3fn(1.0625f, 1), 0x38);    /* tie 1 / 1.125 -> even */
    assert_int_equal(tx_f32_to_e4m3fn(1.1875f, 1), 0x3A);    /* tie 1.125 / 1.25 -> even */
    assert_int_equal(tx_f32_to_e4m3fn(1.0626f, 1), 0x39);
    assert_int_equal(tx_f32_to_e4m3fn(-1.0f, 1), 0xB8);
    assert_int_equal(tx_f32_to_e4m3fn(448.0f, 0), 0x7E);
    assert_int_equal(tx_f32_to_e4m3fn(464.0f, 0), 0x7E);     /* tie 448 / (480) -> 448 */
    assert_int_equal(tx_f32_to_e4m3fn(464.0001f, 1), 0x7E);  /* just over: saturate */
    assert_int_equal(tx_f32_to_e4m3fn(464.0001f, 0), 0x7F);  /* just over: NaN */
    assert_int_equal(tx_f32_to_e4m3fn(-500.0f, 1), 0xFE);
    assert_int_equal(tx_f32_to_e4m3fn(-500.0f, 0), 0xFF);
    assert_int_equal(tx_f32_to_e4m3fn(INFINITY, 1), 0x7E);
    assert_int_equal(tx_f32_to_e4m3fn(-INFINITY, 1), 0xFE);
    assert_int_equal(tx_f32_to_e4m3fn(INFINITY, 0), 0x7F);
    assert_int_equal(tx_f32_to_e4m3fn(NAN, 1) & 0x7F, 0x7F);
    assert_int_equal(tx_f32_to_e4m3fn(FLT_MAX, 1), 0x7E);
    /* subnormals: quantum 2^-9 */
    assert_int_equal(tx_f32_to_e4m3fn(0x1p-9f, 1), 0x01);
    assert_int_equal(tx_f32_to_e4m3fn(0x1p-10f, 1), 0x00);   /* tie 0 / 2^-9 -> 0 */
    assert_int_equal(tx_f32_to_e4m3fn(0x1.000002p-10f, 1), 0x01);
    assert_int_equal(tx_f32_to_e4m3fn(0x3p-10f, 1), 0x02);   /* tie 1q / 2q -> 2q */
    assert_int_equal(tx_f32_to_e4m3fn(0x7p-10f, 1), 0x04);   /* tie 3q / 4q -> 4q */
    assert_int_equal(tx_f32_to_e4m3fn(0xFp-10f, 1), 0x08);   /* tie 7q / 8q = min normal */
    assert_int_equal(tx_f32_to_e4m3fn(0x1p-149f, 1), 0x00);  /* float subnormal */
    assert_int_equal(tx_f32_to_e4m3fn(-0.0f, 1), 0x80);
    assert_int_equal(tx_f32_to_e4m3fn(-0x1p-12f, 1), 0x80);  /* rounds to -0 */
}

static void encode_e5m2_vectors(void **state)
{
    (void)state;
    assert_int_equal(tx_f32_to_e5m2(57344.0f, 0), 0x7B);
    assert_int_equal(tx_f32_to_e5m2(61439.0f, 0), 0x7B);
    assert_int_equal(tx_f32_to_e5m2(61440.0f, 0), 0x7C);     /* tie -> even = Inf */
    assert_int_equal(tx_f32_to_e5m2(61440.0f, 1), 0x7B);
    assert_int_equal(tx_f32_to_e5m2(-1e6f, 1), 0xFB);
    assert_int_equal(tx_f32_to_e5m2(-1e6f, 0), 0xFC);
    assert_int_equal(tx_f32_to_e5m2(INFINITY, 0), 0x7C);
    assert_int_equal(tx_f32_to_e5m2(-INFINITY, 0), 0xFC);
    assert_int_equal(tx_f32_to_e5m2(INFINITY, 1), 0x7B);
    uint8_t n = tx_f32_to_e5m2(NAN, 1);
    assert_true(isnan(tx_e5m2_to_f32(n)));
    assert_int_equal(tx_f32_to_e5m2(0x1p-16f, 1), 0x01);
    assert_int_equal(tx_f32_to_e5m2(0x1p-17f, 1), 0x00);
    assert_int_equal(tx_f32_to_e5m2(0x3p-17f, 1), 0x02);
    assert_int_equal(tx_f32_to_e5m2(1.125f, 1), 0x3C);        /* tie 1 / 1.25 -> 1 */
    assert_int_equal(tx_f32_to_e5m2(1.375f, 1), 0x3E);        /* tie 1.25 / 1.5 -> 1.5 */
}

static void encode_fnuz_vectors(void **state)
{
    (void)state;
    assert_int_equal(tx_f32_to_e4m3fnuz(240.0f, 0), 0x7F);
    assert_int_equal(tx_f32_to_e4m3fnuz(247.0f, 0), 0x7F);
    assert_int_equal(tx_f32_to_e4m3fnuz(248.0f, 1), 0x7F);   /* tie 240 / (256): over */
    assert_int_equal(tx_f32_to_e4m3fnuz(248.0f, 0), 0x80);
    assert_int_equal(tx_f32_to_e4m3fnuz(-1000.0f, 1), 0xFF);
    assert_int_equal(tx_f32_to_e4m3fnuz(INFINITY, 1), 0x7F);
    assert_int_equal(tx_f32_to_e4m3fnuz(-INFINITY, 1), 0xFF);
    assert_int_equal(tx_f32_to_e4m3fnuz(INFINITY, 0), 0x80);
    assert_int_equal(tx_f32_to_e4m3fnuz(NAN, 1), 0x80);
    assert_int_equal(tx_f32_to_e4m3fnuz(-0.0f, 1), 0x00);    /* no -0 */
    assert_int_equal(tx_f32_to_e4m3fnuz(-0x1p-12f, 1), 0x00);
    assert_int_equal(tx_f32_to_e4m3fnuz(0x1p-10f, 1), 0x01);
    assert_int_equal(tx_f32_to_e5m2fnuz(1e6f, 1), 0x7F);
    assert_int_equal(tx_f32_to_e5m2fnuz(1e6f, 0), 0x80);
    assert_int_equal(tx_f32_to_e5m2fnuz(-1e6f, 1), 0xFF);
    assert_int_equal(tx_f32_to_e5m2fnuz(-1e6f, 0), 0x80);
    assert_int_equal(tx_f32_to_e5m2fnuz(-0.0f, 0), 0x00);
    assert_int_equal(tx_f32_to_e5m2fnuz(0x1p-17f, 1), 0x01);
    assert_int_equal(tx_f32_to_e5m2fnuz(NAN, 0), 0x80);
}

static void encode_e8m0_vectors(void **state)
{
    (void)state;
    const tx_e8m0_round U = TX_E8M0_ROUND_UP, D = TX_E8M0_ROUND_DOWN, N = TX_E8M0_ROUND_NEAREST;
    assert_int_equal(tx_f32_to_e8m0(1.0f, 1, U), 127);
    assert_int_equal(tx_f32_to_e8m0(1.0f, 1, D), 127);
    assert_int_equal(tx_f32_to_e8m0(1.0f, 1, N), 127);
    assert_int_equal(tx_f32_to_e8m0(0x1.000002p0f, 1, U), 128);
    assert_int_equal(tx_f32_to_e8m0(0x1.000002p0f, 1, D), 127);
    assert_int_equal(tx_f32_to_e8m0(0.75f, 1, U), 127);
    assert_int_equal(tx_f32_to_e8m0(1.9f, 1, D), 127);
    assert_int_equal(tx_f32_to_e8m0(1.5f, 1, N), 128);        /* midpoint goes up */
    assert_int_equal(tx_f32_to_e8m0(1.49f, 1, N), 127);
    assert_int_equal(tx_f32_to_e8m0(3.0f, 1, N), 129);
    assert_int_equal(tx_f32_to_e8m0(-4.0f, 1, U), 129);       /* sign ignored */
    assert_int_equal(tx_f32_to_e8m0(0.0f, 1, U), 0x00);
    assert_int_equal(tx_f32_to_e8m0(0.0f, 0, N), 0xFF);
    assert_int_equal(tx_f32_to_e8m0(INFINITY, 1, U), 0xFE);
    assert_int_equal(tx_f32_to_e8m0(INFINITY, 0, U), 0xFF);
    assert_int_equal(tx_f32_to_e8m0(NAN, 1, U), 0xFF);
    assert_int_equal(tx_f32_to_e8m0(0x1p127f, 1, U), 0xFE);
    assert_int_equal(tx_f32_to_e8m0(0x1.000002p127f, 1, U), 0xFE); /* > max: saturate */
    assert_int_equal(tx_f32_to_e8m0(0x1.000002p127f, 0, U), 0xFF);
    assert_int_equal(tx_f32_to_e8m0(FLT_MAX, 1, D), 0xFE);
    assert_int_equal(tx_f32_to_e8m0(FLT_MAX, 0, N), 0xFF);
    assert_int_equal(tx_f32_to_e8m0(0x1p-127f, 0, U), 0x00);
    assert_int_equal(tx_f32_to_e8m0(0x1p-128f, 1, U), 0x00);
    assert_int_equal(tx_f32_to_e8m0(0x1p-149f, 0, U), 0x00);  /* up to 2^-127: exact */
    assert_int_equal(tx_f32_to_e8m0(0x1.8p-127f, 1, U), 0x01);
    assert_int_equal(tx_f32_to_e8m0(0x1.8p-127f, 1, N), 0x01);
    assert_int_equal(tx_f32_to_e8m0(0x1.7p-127f, 1, N), 0x00);
    assert_int_equal(tx_f32_to_e8m0(0x1p-128f, 1, D), 0x00);
    assert_int_equal(tx_f32_to_e8m0(0x1p-128f, 0, D), 0xFF);
    assert_int_equal(tx_f32_to_e8m0(0x1p-128f, 0, N), 0x00);
    assert_int_equal(tx_f32_to_e8m0(0x1p-130f, 0, N), 0xFF);
    assert_int_equal(tx_f32_to_e8m0(0x1p-126f, 1, U), 0x01);
    assert_int_equal(tx_e8m0_round_from_name("nearest"), TX_E8M0_ROUND_NEAREST);
    assert_int_equal(tx_e8m0_round_from_name("up"), TX_E8M0_ROUND_UP);
    assert_int_equal(tx_e8m0_round_from_name("sideways"), -1);
}

static void encode_e2m1_vectors(void **state)
{
    (void)state;
    static const struct { float x; uint8_t q; } v[] = {
        {0.0f, 0x0}, {0.25f, 0x0}, {0.2501f, 0x1}, {0.5f, 0x1}, {0.75f, 0x2}, {1.25f, 0x2},
        {1.2501f, 0x3}, {1.75f, 0x4}, {2.5f, 0x4}, {2.5001f, 0x5}, {3.5f, 0x6}, {5.0f, 0x6},
        {5.0001f, 0x7}, {6.0f, 0x7}, {100.0f, 0x7}, {INFINITY, 0x7}, {-INFINITY, 0xF},
        {NAN, 0x7}, {-0.0f, 0x8}, {-0.1f, 0x8}, {-5.5f, 0xF}, {-1.5f, 0xB}, {0x1p-140f, 0x0},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (tx_f32_to_e2m1(v[i].x) != v[i].q)
            fail_msg("e2m1(%g) = 0x%x, want 0x%x", (double)v[i].x, tx_f32_to_e2m1(v[i].x), v[i].q);
    }
}

/* encode(decode(b)) == b for every non-NaN code. */
static void round_trip_all(void **state)
{
    (void)state;
    struct { decode_fn d; encode_fn e; const char *name; } f[] = {
        {tx_e4m3fn_to_f32, tx_f32_to_e4m3fn, "e4m3fn"},
        {tx_e4m3fnuz_to_f32, tx_f32_to_e4m3fnuz, "e4m3fnuz"},
        {tx_e5m2_to_f32, tx_f32_to_e5m2, "e5m2"},
        {tx_e5m2fnuz_to_f32, tx_f32_to_e5m2fnuz, "e5m2fnuz"},
    };
    for (size_t k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            float v = f[k].d((uint8_t)b);
            if (isnan(v)) continue;
            /* Inf only survives without saturation */
            uint8_t got = f[k].e(v, isinf(v) ? 0 : 1);
            if (got != b) fail_msg("%s: 0x%02x -> %g -> 0x%02x", f[k].name, b, (double)v, got);
        }
    }
    for (int b = 0; b < 255; b++) {
        for (int m = 0; m < 3; m++) {
            uint8_t got = tx_f32_to_e8m0(tx_e8m0_to_f32((uint8_t)b), 0, (tx_e8m0_round)m);
            if (got != b) fail_msg("e8m0 mode %d: 0x%02x -> 0x%02x", m, b, got);
        }
    }
    for (uint8_t b = 0; b < 16; b++) assert_int_equal(tx_f32_to_e2m1(tx_e2m1_to_f32(b)), b);
}

/* Deterministic xorshift so the test never depends on libc's rand. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

/* Brute force: the encoder's choice must be the nearest finite value of the
 * golden table (ties: even code), or +-max when nothing finite is nearer. */
static void check_nearest(const uint32_t *golden, int count, encode_fn enc,
                          uint8_t (*enc4)(float), int min_exp, int max_exp, const char *name)
{
    for (int iter = 0; iter < 200000; iter++) {
        uint32_t r = next_u32();
        int e = min_exp + (int)(next_u32() % (uint32_t)(max_exp - min_exp + 1));
        uint32_t bits = ((uint32_t)(e + 127) << 23) | (r & 0x7fffffu);
        if (iter % 4 == 0) bits &= ~0xffffu; /* make exact ties likely */
        float x = tx_bits_f32(bits);
        if (r & 0x80000000u) x = -x;
        double best_d = INFINITY;
        int best = -1;
        for (int b = 0; b < count; b++) {
            float v = tx_bits_f32(golden[b]);
            if (isnan(v) || isinf(v)) continue;
            double d = fabs((double)v - (double)x);
            if (d < best_d || (d == best_d && ((b & 1) == 0) && (best & 1))) {
                best_d = d;
                best = b;
            }
        }
        uint8_t got = enc ? enc(x, 1) : enc4(x);
        float gv = tx_bits_f32(golden[got]);
        float bv = tx_bits_f32(golden[best]);
        if (gv != bv) /* compares values: +0 and -0 both accepted for FNUZ zero */
            fail_msg("%s: x=%a got 0x%02x (%g) want 0x%02x (%g)", name, (double)x, got,
                     (double)gv, best, (double)bv);
        if (got != best && !(gv == 0.0f && bv == 0.0f))
            fail_msg("%s: x=%a code 0x%02x want 0x%02x", name, (double)x, got, best);
    }
}

static void nearest_brute_force(void **state)
{
    (void)state;
    check_nearest(golden_e4m3fn, 256, tx_f32_to_e4m3fn, NULL, -12, 10, "e4m3fn");
    check_nearest(golden_e4m3fnuz, 256, tx_f32_to_e4m3fnuz, NULL, -13, 9, "e4m3fnuz");
    check_nearest(golden_e5m2, 256, tx_f32_to_e5m2, NULL, -19, 17, "e5m2");
    check_nearest(golden_e5m2fnuz, 256, tx_f32_to_e5m2fnuz, NULL, -20, 17, "e5m2fnuz");
    check_nearest(golden_e2m1, 16, NULL, tx_f32_to_e2m1, -4, 4, "e2m1");
}

/* E8M0 round up: the result is the smallest power of two >= |x|. */
static void e8m0_up_is_ceil_pow2(void **state)
{
    (void)state;
    for (int iter = 0; iter < 100000; iter++) {
        uint32_t bits = next_u32() & 0x7f7fffffu; /* finite, positive */
        if (bits == 0) continue;
        float x = tx_bits_f32(bits);
        uint8_t up = tx_f32_to_e8m0(x, 1, TX_E8M0_ROUND_UP);
        uint8_t dn = tx_f32_to_e8m0(x, 1, TX_E8M0_ROUND_DOWN);
        double v = ldexp(1.0, up - 127);
        if (x > 0x1p127f) { /* nothing representable is >= x: saturates */
            if (up != 0xFE) fail_msg("e8m0 up(%a) = %d", (double)x, up);
        } else if (!(v >= x) || (up > 0 && !(v / 2 < x)))
            fail_msg("e8m0 up(%a) = %d", (double)x, up);
        if (x >= 0x1p-127f) {
            double w = ldexp(1.0, dn - 127);
            if (!(w <= x) || !(w * 2 > x)) fail_msg("e8m0 down(%a) = %d", (double)x, dn);
        }
    }
}

static void subbyte_helpers(void **state)
{
    (void)state;
    uint8_t buf[3] = {0xFF, 0xFF, 0xFF};
    tx_subbyte_set(buf, 0, 4, 0x1);
    tx_subbyte_set(buf, 1, 4, 0x2);
    tx_subbyte_set(buf, 2, 4, 0x13); /* only the low 4 bits are stored */
    assert_int_equal(buf[0], 0x21);
    assert_int_equal(buf[1], 0xF3);
    assert_int_equal(tx_subbyte_get(buf, 1, 4), 2);
    uint8_t b2 = 0;
    for (unsigned i = 0; i < 4; i++) tx_subbyte_set(&b2, i, 2, i);
    assert_int_equal(b2, 0xE4); /* 3<<6 | 2<<4 | 1<<2 | 0 */
    assert_int_equal(tx_subbyte_get(&b2, 3, 2), 3);
    assert_int_equal(tx_subbyte_sext(0xF, 4), -1);
    assert_int_equal(tx_subbyte_sext(0x8, 4), -8);
    assert_int_equal(tx_subbyte_sext(0x7, 4), 7);
    assert_int_equal(tx_subbyte_sext(0x2, 2), -2);
    assert_int_equal(tx_subbyte_sext(0x1, 2), 1);
    assert_int_equal(tx_f64_to_int_rne_sat(2.5, -8, 7), 2);
    assert_int_equal(tx_f64_to_int_rne_sat(3.5, -8, 7), 4);
    assert_int_equal(tx_f64_to_int_rne_sat(-2.5, -8, 7), -2);
    assert_int_equal(tx_f64_to_int_rne_sat(7.5, -8, 7), 7);
    assert_int_equal(tx_f64_to_int_rne_sat(-8.6, -8, 7), -8);
    assert_int_equal(tx_f64_to_int_rne_sat(NAN, -8, 7), 0);
    assert_int_equal(tx_f64_to_int_rne_sat(1e300, INT64_MIN, INT64_MAX), INT64_MAX);
    assert_int_equal(tx_f64_to_int_rne_sat(-3.0, 0, 15), 0);
    int lo, hi;
    assert_true(tx_subbyte_int_range(TEEXEC_DTYPE_INT2, &lo, &hi));
    assert_int_equal(lo, -2);
    assert_int_equal(hi, 1);
    assert_false(tx_subbyte_int_range(TEEXEC_DTYPE_INT8, &lo, &hi));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_golden_fp8),
        cmocka_unit_test(decode_golden_fp4),
        cmocka_unit_test(decode_anchors),
        cmocka_unit_test(encode_e4m3fn_vectors),
        cmocka_unit_test(encode_e5m2_vectors),
        cmocka_unit_test(encode_fnuz_vectors),
        cmocka_unit_test(encode_e8m0_vectors),
        cmocka_unit_test(encode_e2m1_vectors),
        cmocka_unit_test(round_trip_all),
        cmocka_unit_test(nearest_brute_force),
        cmocka_unit_test(e8m0_up_is_ceil_pow2),
        cmocka_unit_test(subbyte_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
