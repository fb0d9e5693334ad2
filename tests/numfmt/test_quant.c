/* Tests for the CPU quantizers (kernels/cpu/quant_*.c, qtensor.c):
 * hand-checked vectors per recipe, layout relations (rowwise vs columnwise
 * vs 2-D), FP4 packing order, and property tests on random tensors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "base/numfmt.h"
#include "kernels/cpu/philox.h"
#include "kernels/cpu/qtensor.h"
#include "kernels/cpu/scale_swizzle.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void ok(teexec_status *st)
{
    if (st) fail_msg("unexpected error: %s", teexec_status_message(st));
}

static tx_quant_config cfg_of(tx_qkind kind)
{
    tx_quant_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    return c;
}

/* ---- FP8 per-tensor --------------------------------------------------- */

static void fp8_tensor_current_vectors(void **state)
{
    (void)state;
    const float x[4] = {2.0f, -1.0f, 0.0f, 0.3f}; /* [2,2] */
    tx_quant_config c = cfg_of(TX_QKIND_FP8_TENSOR);
    tx_qtensor q;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, 2, 2, &c, &q));
    assert_true(q.amax == 2.0f);
    assert_true(q.scale == 224.0f);              /* 448 / 2 */
    assert_true(q.scale_inv == 1.0f / 224.0f);
    /* 448 -> 0x7E, -224 -> 0xF6, 0 -> 0, 67.2 -> 64 (0x68) */
    const uint8_t row[4] = {0x7E, 0xF6, 0x00, 0x68};
    const uint8_t col[4] = {0x7E, 0x00, 0xF6, 0x68}; /* transposed */
    assert_memory_equal(q.row.data, row, 4);
    assert_memory_equal(q.col.data, col, 4);
    assert_null(q.row.scale);
    float d[4];
    ok(tx_dequantize(&q, TX_QUSAGE_COLUMNWISE, d));
    assert_true(d[0] == 2.0f && d[1] == -1.0f && d[3] == 64.0f / 224.0f);
    tx_qtensor_free(&q);

    /* the scale is an RN division: 448 / 4.3879566 = 102.09763 (0x42cc31fd);
     * 448 * fl32(1 / 4.3879566) would be one ulp higher */
    const float a1[1] = {4.3879566f};
    c.usage = TX_QUSAGE_ROWWISE;
    ok(tx_quantize(a1, TEEXEC_DTYPE_FLOAT, 1, 1, &c, &q));
    assert_int_equal(tx_f32_bits(q.scale), 0x42cc31fdu);
    tx_qtensor_free(&q);

    /* power-of-2 scale: 448/3 = 149.33 -> 128 */
    const float y[2] = {3.0f, -1.0f};
    c.power_2_scale = true;
    c.usage = TX_QUSAGE_ROWWISE;
    ok(tx_quantize(y, TEEXEC_DTYPE_FLOAT, 1, 2, &c, &q));
    assert_true(q.scale == 128.0f);
    assert_null(q.col.data);
    assert_int_equal(q.row.data[0], 0x7C); /* 384 = 1.5 * 2^8 */
    tx_qtensor_free(&q);
}

static void fp8_tensor_edge_amax(void **state)
{
    (void)state;
    tx_quant_config c = cfg_of(TX_QKIND_FP8_TENSOR);
    c.usage = TX_QUSAGE_ROWWISE;
    tx_qtensor q;
    const float zeros[2] = {0.0f, -0.0f};
    ok(tx_quantize(zeros, TEEXEC_DTYPE_FLOAT, 1, 2, &c, &q));
    assert_true(q.scale == 1.0f && q.row.data[0] == 0x00 && q.row.data[1] == 0x80);
    tx_qtensor_free(&q);
    /* Inf: amax Inf -> scale 1; Inf saturates. NaN: ignored by amax, stays NaN */
    const float inf[3] = {INFINITY, 1.0f, NAN};
    ok(tx_quantize(inf, TEEXEC_DTYPE_FLOAT, 1, 3, &c, &q));
    assert_true(q.scale == 1.0f);
    assert_int_equal(q.row.data[0], 0x7E);
    assert_int_equal(q.row.data[1], 0x38);
    assert_int_equal(q.row.data[2] & 0x7F, 0x7F);
    tx_qtensor_free(&q);
    const float nanamax[2] = {NAN, 0.5f};
    ok(tx_quantize(nanamax, TEEXEC_DTYPE_FLOAT, 1, 2, &c, &q));
    assert_true(q.amax == 0.5f && q.scale == 896.0f);
    tx_qtensor_free(&q);
    /* subnormal amax: 448 / 1e-40 overflows -> FLT_MAX */
    const float tiny[1] = {1e-40f};
    ok(tx_quantize(tiny, TEEXEC_DTYPE_FLOAT, 1, 1, &c, &q));
    assert_true(q.scale == FLT_MAX);
    assert_true(q.scale_inv == 1.0f / FLT_MAX);
    tx_qtensor_free(&q);
    /* epsilon lifts a zero amax */
    c.amax_epsilon = 0.5f;
    ok(tx_quantize(zeros, TEEXEC_DTYPE_FLOAT, 1, 2, &c, &q));
    assert_true(q.scale == 896.0f);
    tx_qtensor_free(&q);
    /* delayed: the given scale is used, the amax still measured */
    c.amax_epsilon = 0.0f;
    c.use_given_scale = true;
    c.given_scale = 2.0f;
    const float big[2] = {300.0f, -0.25f};
    ok(tx_quantize(big, TEEXEC_DTYPE_FLOAT, 1, 2, &c, &q));
    assert_true(q.amax == 300.0f && q.scale == 2.0f && q.scale_inv == 0.5f);
    assert_int_equal(q.row.data[0], 0x7E); /* 600 saturates */
    assert_int_equal(q.row.data[1], 0xB0); /* -0.5 */
    tx_qtensor_free(&q);
    /* E5M2 (HYBRID grads) */
    c.use_given_scale = false;
    c.fmt = TEEXEC_DTYPE_FLOAT8E5M2;
    const float g[2] = {57344.0f, 1.0f};
    ok(tx_quantize(g, TEEXEC_DTYPE_FLOAT, 1, 2, &c, &q));
    assert_true(q.scale == 1.0f);
    assert_int_equal(q.row.data[0], 0x7B);
    assert_int_equal(q.row.data[1], 0x3C);
    tx_qtensor_free(&q);
}

/* ---- FP8 block ---------------------------------------------------------- */

static void fp8_block_1d_vectors(void **state)
{
    (void)state;
    enum { M = 2, K = 256 };
    static float x[M * K];
    for (int i = 0; i < M * K; i++) x[i] = 1.0f;
    x[5] = 4.0f;                    /* row 0, block 0: amax 4 (a power of two) */
    x[200] = -7.0f;                 /* row 0, block 1: amax 7 */
    for (int k = 0; k < 128; k++) x[K + k] = 0.0f; /* row 1, block 0: zeros */
    x[K + 128] = 1e-39f;            /* row 1, block 1: subnormal amax */
    for (int k = 129; k < 256; k++) x[K + k] = 0.0f;
    tx_quant_config c = cfg_of(TX_QKIND_FP8_BLOCK);
    c.usage = TX_QUSAGE_ROWWISE;
    tx_qtensor q;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q));
    assert_int_equal(q.row.scale_rows, 2);  /* ceil(K/128) */
    assert_int_equal(q.row.scale_cols, 4);  /* roundup(M,4) */
    const float *s = q.row.scale;
    assert_true(s[0 * 4 + 0] == 1.0f / 112.0f);       /* [j=0][m=0] */
    assert_true(s[1 * 4 + 0] == 1.0f / (448.0f / 7.0f));
    assert_true(s[0 * 4 + 1] == 1.0f);               /* zero block: scale 1 */
    assert_true(s[1 * 4 + 1] == 1.0f / FLT_MAX);      /* value_for_inf = FLT_MAX */
    assert_true(s[0 * 4 + 2] == 0.0f && s[1 * 4 + 3] == 0.0f); /* padding */
    assert_int_equal(q.row.data[5], 0x7E);            /* 4 * 112 = 448 */
    assert_int_equal(q.row.data[0], 0x6E);            /* 112 = 1.75 * 2^6 */
    assert_int_equal(q.row.data[200], 0xFE);
    tx_qtensor_free(&q);

    /* pow2 scales: 448/7 = 64 exactly -> 64; 448/4 = 112 -> 64 */
    c.power_2_scale = true;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q));
    s = q.row.scale;
    assert_true(s[0] == 1.0f / 64.0f && s[4] == 1.0f / 64.0f);
    assert_int_equal(q.row.data[5], 0x78); /* 4 * 64 = 256 */
    tx_qtensor_free(&q);

    /* bf16 source: value_for_inf is bf16's largest finite value */
    uint16_t b[128];
    for (int i = 0; i < 128; i++) b[i] = 0;
    b[3] = 0x0001; /* 2^-133 */
    c.power_2_scale = false;
    ok(tx_quantize(b, TEEXEC_DTYPE_BFLOAT16, 1, 128, &c, &q));
    assert_true(((float *)q.row.scale)[0] == 1.0f / tx_bits_f32(0x7f7f0000u));
    tx_qtensor_free(&q);
}

static void transpose_f32(const float *x, float *t, uint64_t M, uint64_t K)
{
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t k = 0; k < K; k++) t[k * M + m] = x[m * K + k];
}

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* Random data with edge values sprinkled in: zeros, subnormals, huge
 * values, powers of two, exact FP8 ties. */
static void fill_random(float *x, uint64_t n, bool edges)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t r = next_u32();
        float v = ((float)(r >> 8) / 16777216.0f - 0.5f) * ldexpf(1.0f, (int)(next_u32() % 12) - 6);
        if (edges) {
            switch (next_u32() % 64) {
            case 0: v = 0.0f; break;
            case 1: v = 1e-40f; break;
            case 2: v = -ldexpf(1.0f, (int)(next_u32() % 8)); break;
            case 3: v = 1.0625f; break;
            case 4: v = 3e4f; break;
            default: break;
            }
        }
        x[i] = v;
    }
}

/* Columnwise of X equals rowwise of X^T (1-D recipes; scales identical). */
static void columnwise_is_rowwise_of_transpose(void **state)
{
    (void)state;
    enum { M = 256, K = 384 };
    float *x = malloc(sizeof(float) * M * K), *xt = malloc(sizeof(float) * M * K);
    assert_non_null(x);
    assert_non_null(xt);
    fill_random(x, M * K, true);
    transpose_f32(x, xt, M, K);
    tx_qkind kinds[3] = {TX_QKIND_FP8_BLOCK, TX_QKIND_NVFP4, TX_QKIND_MXFP8};
    for (int t = 0; t < 3; t++) {
        tx_quant_config c = cfg_of(kinds[t]);
        tx_qtensor a, b;
        c.usage = TX_QUSAGE_COLUMNWISE;
        ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &a));
        c.usage = TX_QUSAGE_ROWWISE;
        ok(tx_quantize(xt, TEEXEC_DTYPE_FLOAT, K, M, &c, &b));
        if (kinds[t] == TX_QKIND_MXFP8) {
            /* MXFP8 keeps columnwise data [M,K]; scales [M/32][K] vs [K][M/32] */
            for (uint64_t m = 0; m < M; m++)
                for (uint64_t k = 0; k < K; k++)
                    assert_int_equal(a.col.data[m * K + k], b.row.data[k * M + m]);
            for (uint64_t i = 0; i < M / 32; i++)
                for (uint64_t k = 0; k < K; k++)
                    assert_int_equal(((uint8_t *)a.col.scale)[i * a.col.scale_cols + k],
                                     ((uint8_t *)b.row.scale)[k * b.row.scale_cols + i]);
        } else {
            assert_int_equal(a.col.data_bytes, b.row.data_bytes);
            assert_memory_equal(a.col.data, b.row.data, a.col.data_bytes);
            assert_int_equal(a.col.scale_bytes, b.row.scale_bytes);
            assert_memory_equal(a.col.scale, b.row.scale, a.col.scale_bytes);
        }
        tx_qtensor_free(&a);
        tx_qtensor_free(&b);
    }
    free(x);
    free(xt);
}

/* 2-D blocks: one scale per tile, columnwise = transpose of rowwise. */
static void two_d_blocks_consistent(void **state)
{
    (void)state;
    enum { M = 256, K = 128 };
    float *x = malloc(sizeof(float) * M * K);
    assert_non_null(x);
    fill_random(x, M * K, false);
    x[130 * K + 5] = 100.0f; /* tile (1,0) of every recipe gets a big amax */
    tx_qkind kinds[3] = {TX_QKIND_FP8_BLOCK, TX_QKIND_MXFP8, TX_QKIND_NVFP4};
    for (int t = 0; t < 3; t++) {
        tx_quant_config c = cfg_of(kinds[t]);
        c.block_2d = true;
        tx_qtensor q;
        ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q));
        float *dr = malloc(sizeof(float) * M * K), *dc = malloc(sizeof(float) * M * K);
        assert_non_null(dr);
        assert_non_null(dc);
        ok(tx_dequantize(&q, TX_QUSAGE_ROWWISE, dr));
        ok(tx_dequantize(&q, TX_QUSAGE_COLUMNWISE, dc));
        assert_memory_equal(dr, dc, sizeof(float) * M * K);
        if (kinds[t] == TX_QKIND_MXFP8) assert_memory_equal(q.row.data, q.col.data, M * K);
        /* the tile holding 100 got a scale that represents it closely */
        assert_true(fabsf(dr[130 * K + 5] - 100.0f) <= 100.0f * 0.125f);
        free(dr);
        free(dc);
        tx_qtensor_free(&q);
    }
    /* FP8 block 2-D scale shapes */
    tx_quant_config c = cfg_of(TX_QKIND_FP8_BLOCK);
    c.block_2d = true;
    tx_qtensor q;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q));
    assert_int_equal(q.row.scale_rows, 2);
    assert_int_equal(q.row.scale_cols, 4);
    assert_int_equal(q.col.scale_rows, 1);
    assert_int_equal(q.col.scale_cols, 4);
    const float *rs = q.row.scale, *cs = q.col.scale;
    assert_true(rs[0] == cs[0] && rs[4] == cs[1]);
    assert_true(rs[4] == 1.0f / (448.0f / 100.0f));
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t k = 0; k < K; k++) assert_int_equal(q.row.data[m * K + k], q.col.data[k * M + m]);
    tx_qtensor_free(&q);
    free(x);
}

/* ---- MXFP8 -------------------------------------------------------------- */

static void mxfp8_vectors(void **state)
{
    (void)state;
    enum { M = 32, K = 64 };
    static float x[M * K];
    memset(x, 0, sizeof x);
    /* row 0, block 0: amax 1 (power of two): 1*fl(1/448) -> 2^-8 up, e = 119 */
    x[0] = 1.0f;
    x[1] = 17.0f / 256.0f; /* 17 in the scaled domain: tie 16/18 -> 16 */
    x[2] = 19.0f / 256.0f; /* tie 18/20 -> 20 */
    /* row 0, block 1: amax 448: v rounds to exactly 1.0, e = 127 */
    x[32] = 448.0f;
    x[33] = 0.001f;        /* scaled 0.001 -> subnormal 2^-9 */
    /* row 1 block 0 stays zero; row 1 block 1 has Inf */
    x[K + 32] = INFINITY;
    x[K + 33] = 1.0f;
    /* row 2, block 0: NaN and amax 2 */
    x[2 * K + 0] = NAN;
    x[2 * K + 1] = 2.0f;
    /* row 3: amax 56 = 448/8 (exact, e = 124) and 57 (just over, e = 125) */
    x[3 * K + 0] = 56.0f;
    x[3 * K + 32] = 57.0f;
    tx_quant_config c = cfg_of(TX_QKIND_MXFP8);
    tx_qtensor q;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q));
    const uint8_t *rs = q.row.scale;
    uint64_t ld = q.row.scale_cols;
    assert_int_equal(q.row.scale_rows, 128);
    assert_int_equal(ld, 4);
    assert_int_equal(rs[0 * ld + 0], 119);
    assert_int_equal(rs[0 * ld + 1], 127);
    assert_int_equal(rs[1 * ld + 0], 0);    /* zero block: E8M0 code 0 */
    assert_int_equal(rs[1 * ld + 1], 0xFE); /* Inf: saturated exponent */
    assert_int_equal(rs[2 * ld + 0], 120);
    assert_int_equal(rs[3 * ld + 0], 124);
    assert_int_equal(rs[3 * ld + 1], 125);
    assert_int_equal(rs[0 * ld + 2], 0);    /* padding */
    const uint8_t *d = q.row.data;
    assert_int_equal(d[0], 0x78);           /* 256 */
    assert_int_equal(d[1], 0x58);           /* 16 */
    assert_int_equal(d[2], 0x5A);           /* 20 */
    assert_int_equal(d[32], 0x7E);
    assert_int_equal(d[33], 0x01);
    assert_int_equal(d[K + 32], 0x7E);      /* Inf * 2^-127 = Inf -> 448 */
    assert_int_equal(d[K + 33], 0x00);
    assert_int_equal(d[2 * K + 0], 0x7F);   /* NaN stays NaN */
    assert_int_equal(d[2 * K + 1], 0x78);
    assert_int_equal(d[3 * K + 0], 0x7E);   /* 56 * 8 = 448 */
    assert_int_equal(d[3 * K + 32], 0x76);  /* 57 * 4 = 228 -> 224 */
    /* columnwise: column 0 has amax 56 over rows 0..31 (NaN ignored) */
    const uint8_t *cs = q.col.scale;
    assert_int_equal(q.col.scale_rows, 4);
    assert_int_equal(q.col.scale_cols, 128);
    assert_int_equal(cs[0], 124);
    assert_int_equal(cs[32], 0xFE);         /* column 32 holds the Inf */
    assert_int_equal(q.col.data[0], 0x50);  /* 1 * 8 */
    assert_int_equal(q.col.data[2 * K + 0], 0x7F);
    float out[M * K];
    ok(tx_dequantize(&q, TX_QUSAGE_ROWWISE, out));
    assert_true(out[0] == 1.0f && out[1] == 16.0f / 256.0f && out[32] == 448.0f);
    assert_true(out[33] == 0x1p-9f && out[3 * K + 32] == 56.0f);
    assert_true(isnan(out[2 * K]));
    tx_qtensor_free(&q);
    /* E5M2 (HYBRID): amax 57344 -> e = 127 */
    x[32] = 57344.0f;
    c.fmt = TEEXEC_DTYPE_FLOAT8E5M2;
    c.usage = TX_QUSAGE_ROWWISE;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q));
    assert_int_equal(((uint8_t *)q.row.scale)[1], 127);
    assert_int_equal(q.row.data[32], 0x7B);
    tx_qtensor_free(&q);
    /* shape rule */
    teexec_status *st = tx_quantize(x, TEEXEC_DTYPE_FLOAT, 16, K, &c, &q);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
}

/* The E8M0 exponent is the smallest power of two >= amax * fl32(1/max). */
static void mxfp8_scale_rule_random(void **state)
{
    (void)state;
    const float rcp = 1.0f / 448.0f;
    for (int i = 0; i < 20000; i++) {
        float amax = ldexpf((float)(next_u32() >> 8) / 16777216.0f + 0.5f, (int)(next_u32() % 200) - 100);
        float v = amax * rcp;
        uint8_t e = tx_f32_to_e8m0(v, 1, TX_E8M0_ROUND_UP);
        double p = ldexp(1.0, e - 127);
        assert_true(p >= v && (e == 0 || p / 2 < v));
        /* the block max never saturates: amax * 2^(127-e) <= 448 */
        assert_true((double)amax * ldexp(1.0, 127 - e) <= 448.0 * (1 + 1e-6));
    }
}

/* ---- NVFP4 -------------------------------------------------------------- */

static void nvfp4_vectors(void **state)
{
    (void)state;
    /* one row, K = 32: block 0 holds the global amax 6; block 1 amax 0.6 */
    float x[32];
    memset(x, 0, sizeof x);
    x[0] = 6.0f;  x[1] = 1.0f;  x[2] = 0.75f; x[3] = -2.5f; x[4] = 100.0f / 17.0f;
    x[16] = 0.6f; x[17] = 0.3f; x[18] = 0.25f; x[19] = 0.2455f; x[20] = -0.05f;
    tx_quant_config c = cfg_of(TX_QKIND_NVFP4);
    c.usage = TX_QUSAGE_ROWWISE;
    tx_qtensor q;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, 1, 32, &c, &q));
    assert_true(q.row.amax == 6.0f);
    /* S_enc = 2688/6 = 448; k = fl(448 * fl(1/6)) = 74.66667; block 0:
     * e4m3(6k = 448.00003) = 448 (0x7E), multiplier 1/(448 * fl(1/448)) = 1.
     * block 1: e4m3(0.6k = 44.8) = 44 (0x63), multiplier 10.181818 */
    const uint8_t *s = q.row.scale;
    assert_int_equal(q.row.scale_rows, 128);
    assert_int_equal(q.row.scale_cols, 4);
    assert_int_equal(s[0], 0x7E);
    assert_int_equal(s[1], 0x63);
    assert_int_equal(s[2], 0x00);
    /* codes: 6->7, 1->2, 0.75->tie->2 (1.0), -2.5->tie->-2 (0xC), 5.88->7;
     * element 0 in the low nibble */
    const uint8_t *d = q.row.data;
    assert_int_equal(d[0], 0x27);
    assert_int_equal(d[1], 0xC2);
    assert_int_equal(d[2] & 0x0F, 0x7);
    /* block 1: 6.109->7 (sat 6), 3.05->5 (3), 2.545->5 (3), 2.4996->4 (2),
     * -0.509->0x9 (-0.5) */
    assert_int_equal(d[8], 0x57);
    assert_int_equal(d[9], 0x45);
    assert_int_equal(d[10] & 0x0F, 0x9);
    float out[32];
    ok(tx_dequantize(&q, TX_QUSAGE_ROWWISE, out));
    assert_true(out[0] == (6.0f * 448.0f) * (1.0f / 448.0f));
    assert_true(out[3] == (-2.0f * 448.0f) * (1.0f / 448.0f));
    float sdec = 1.0f / 448.0f;
    assert_true(out[17] == (3.0f * 44.0f) * sdec);
    tx_qtensor_free(&q);

    /* the block scale multiplies by fl32(S_enc * fl32(1/6)); dividing
     * S_enc by 6 instead gives 4.7110333 here, not 4.711034, and block 1's
     * scale would round to 0x28 instead of 0x29 */
    float t[32] = {0};
    t[0] = 95.09591f;
    t[16] = 0.056383595f;
    ok(tx_quantize(t, TEEXEC_DTYPE_FLOAT, 1, 32, &c, &q));
    assert_int_equal(((uint8_t *)q.row.scale)[1], 0x29);
    tx_qtensor_free(&q);
    /* the element multiplier is fl32(1 / fl32(S_dec_b * S_dec)); S_enc /
     * S_dec_b is one ulp lower here (1.9216756) and would put 0.650474 at
     * exactly 1.25 -> 1.0 instead of just above it -> 1.5 */
    memset(t, 0, sizeof t);
    t[0] = 26.899601f;
    t[16] = 3.122275f;  /* block scale e4m3(3.122275 * k) = 52 (0x65) */
    t[17] = 0.650474f;
    ok(tx_quantize(t, TEEXEC_DTYPE_FLOAT, 1, 32, &c, &q));
    assert_int_equal(((uint8_t *)q.row.scale)[1], 0x65);
    assert_int_equal(q.row.data[8] >> 4, 0x3);
    tx_qtensor_free(&q);

    /* all zero: A = 0 -> S_enc = 1; block scales 0, data 0 */
    float z[16] = {0};
    ok(tx_quantize(z, TEEXEC_DTYPE_FLOAT, 1, 16, &c, &q));
    assert_int_equal(((uint8_t *)q.row.scale)[0], 0);
    assert_int_equal(q.row.data[0], 0);
    ok(tx_dequantize(&q, TX_QUSAGE_ROWWISE, z));
    assert_true(z[0] == 0.0f);
    tx_qtensor_free(&q);

    /* Inf and NaN: A = Inf -> S_enc = 1 (2688/Inf = 0); Inf -> 6, NaN -> +6 */
    float e[16] = {INFINITY, NAN, 1.0f};
    ok(tx_quantize(e, TEEXEC_DTYPE_FLOAT, 1, 16, &c, &q));
    assert_true(q.row.amax == INFINITY);
    assert_int_equal(((uint8_t *)q.row.scale)[0], 0x7E); /* Inf * k saturates */
    assert_int_equal(q.row.data[0], 0x77);
    tx_qtensor_free(&q);

    /* packing order with odd-sized blocks: K = 18 (partial second block) */
    float p[18];
    for (int i = 0; i < 18; i++) p[i] = (i % 2) ? -6.0f : 6.0f;
    ok(tx_quantize(p, TEEXEC_DTYPE_FLOAT, 1, 18, &c, &q));
    assert_int_equal(q.row.data_bytes, 9);
    for (int i = 0; i < 9; i++) assert_int_equal(q.row.data[i], 0xF7);
    tx_qtensor_free(&q);
}

static void nvfp4_stochastic_rounding(void **state)
{
    (void)state;
    enum { K = 4096 };
    float *x = malloc(sizeof(float) * K);
    assert_non_null(x);
    for (int i = 0; i < K; i++) x[i] = (i % 16 == 0) ? 6.0f : 2.5f; /* multiplier 1 */
    tx_quant_config c = cfg_of(TX_QKIND_NVFP4);
    c.usage = TX_QUSAGE_ROWWISE;
    c.stochastic_rounding = true;
    c.seed = 1234;
    tx_qtensor a, b;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, 1, K, &c, &a));
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, 1, K, &c, &b));
    assert_memory_equal(a.row.data, b.row.data, a.row.data_bytes); /* deterministic */
    double sum = 0;
    int n = 0;
    for (int i = 0; i < K; i++) {
        if (i % 16 == 0) continue;
        unsigned code = tx_subbyte_get(a.row.data, (uint64_t)i, 4);
        assert_true(code == 4 || code == 5);
        /* exact rule: 2.5 is half a step above 2: up iff 128 >= 256 - u */
        uint32_t w[4];
        tx_philox_draw(1234, 0, (uint64_t)i / 16, w);
        unsigned u = (w[(i % 16) / 4] >> (8 * (i % 4))) & 0xFF;
        assert_int_equal(code, u >= 128 ? 5u : 4u);
        sum += tx_e2m1_to_f32((uint8_t)code);
        n++;
    }
    assert_true(fabs(sum / n - 2.5) < 0.05); /* unbiased on average */
    tx_qtensor_free(&b);
    c.seed = 1235;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, 1, K, &c, &b));
    assert_true(memcmp(a.row.data, b.row.data, a.row.data_bytes) != 0);
    tx_qtensor_free(&b);
    /* sr_offset shifts every counter: group g now draws what group g+1
     * drew (8 bytes per 16-element group) */
    c.seed = 1234;
    c.sr_offset = 1;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, 1, K, &c, &b));
    assert_memory_equal(a.row.data + 8, b.row.data, a.row.data_bytes - 8);
    tx_qtensor_free(&a);
    tx_qtensor_free(&b);
    free(x);
}

static void nvfp4_rht_columnwise(void **state)
{
    (void)state;
    enum { M = 32, K = 16 };
    uint16_t xb[M * K];
    float xf[M * K];
    for (int i = 0; i < M * K; i++) {
        xf[i] = tx_bf16_to_f32(tx_f32_to_bf16(sinf((float)i * 0.37f) * 3.0f));
        xb[i] = tx_f32_to_bf16(xf[i]);
    }
    xb[7 * K + 3] = tx_f32_to_bf16(40.0f); /* an outlier the RHT spreads */
    xf[7 * K + 3] = 40.0f;
    tx_quant_config c = cfg_of(TX_QKIND_NVFP4);
    c.rht = true;
    tx_qtensor q;
    ok(tx_quantize(xb, TEEXEC_DTYPE_BFLOAT16, M, K, &c, &q));
    assert_true(q.rht);
    assert_true(q.row.amax == 40.0f);
    /* columnwise amax is the amax after the transform: column 3, token
     * tile 0 contains the outlier; |RHT| there is about 40/4 + the rest */
    assert_true(q.col.amax < 40.0f && q.col.amax > 8.0f);
    /* dequantized columnwise values are RHT(X^T); transforming back (H is
     * orthogonal) approximates X within NVFP4 error */
    float *d = malloc(sizeof(float) * M * K);
    assert_non_null(d);
    ok(tx_dequantize(&q, TX_QUSAGE_COLUMNWISE, d));
    double err = 0, ref = 0;
    for (int k = 0; k < K; k++)
        for (int g = 0; g < M / 16; g++)
            for (int i = 0; i < 16; i++) {
                /* v_i = sum_j w_j * H[i][j] */
                double v = 0;
                for (int j = 0; j < 16; j++) {
                    int neg = __builtin_popcount((unsigned)(i & j)) & 1;
                    static const int s[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
                    double h = 0.25 * s[i] * (neg ? -1 : 1);
                    v += d[(g * 16 + j) * K + k] * h;
                }
                double x0 = xf[(g * 16 + i) * K + k];
                err += (v - x0) * (v - x0);
                ref += x0 * x0;
            }
    assert_true(sqrt(err / ref) < 0.2);
    free(d);
    tx_qtensor_free(&q);
    /* the transform needs M % 16 */
    teexec_status *st = tx_quantize(xb, TEEXEC_DTYPE_BFLOAT16, 8, 64, &c, &q);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
}

/* ---- properties on random tensors ---------------------------------------- */

static int man_bits(teexec_dtype fmt)
{
    return fmt == TEEXEC_DTYPE_FLOAT8E4M3FN ? 3 : fmt == TEEXEC_DTYPE_FLOAT8E5M2 ? 2 : 1;
}
static int min_exp(teexec_dtype fmt)
{
    return fmt == TEEXEC_DTYPE_FLOAT8E4M3FN ? -6 : fmt == TEEXEC_DTYPE_FLOAT8E5M2 ? -14 : 0;
}

/* |x*mult - q| <= half a grid step of the format at |x*mult| (no
 * saturation happens for amax-derived scales, up to the 1-ulp effects of
 * fl32 products, which the 1e-6 slack covers). */
static void check_error_bound(const float *x, const float *deq, uint64_t n, teexec_dtype fmt,
                              const float *mult, const char *what)
{
    for (uint64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) continue;
        double y = fabs((double)x[i] * mult[i]);
        double fmax = tx_numfmt_max(fmt);
        if (y > fmax) y = fmax;
        int e = y > 0 ? (int)floor(log2(y)) : min_exp(fmt);
        if (e < min_exp(fmt)) e = min_exp(fmt);
        double half_step = ldexp(1.0, e - man_bits(fmt) - 1);
        double err = fabs((double)x[i] - (double)deq[i]) * mult[i];
        if (err > half_step * (1 + 1e-6) + 1e-30)
            fail_msg("%s: element %llu: x=%a deq=%a mult=%a err %g > %g", what,
                     (unsigned long long)i, (double)x[i], (double)deq[i], (double)mult[i], err,
                     half_step);
    }
}

static void property_random(void **state)
{
    (void)state;
    enum { M = 256, K = 256 };
    float *x = malloc(sizeof(float) * M * K), *d = malloc(sizeof(float) * M * K);
    float *d2 = malloc(sizeof(float) * M * K), *mult = malloc(sizeof(float) * M * K);
    assert_true(x && d && d2 && mult);
    for (int round = 0; round < 3; round++) {
        fill_random(x, M * K, round > 0);
        struct { tx_qkind kind; bool two_d; teexec_dtype fmt; bool pow2; } cases[] = {
            {TX_QKIND_FP8_TENSOR, false, TEEXEC_DTYPE_FLOAT8E4M3FN, false},
            {TX_QKIND_FP8_TENSOR, false, TEEXEC_DTYPE_FLOAT8E5M2, true},
            {TX_QKIND_FP8_BLOCK, false, TEEXEC_DTYPE_FLOAT8E4M3FN, false},
            {TX_QKIND_FP8_BLOCK, true, TEEXEC_DTYPE_FLOAT8E4M3FN, true},
            {TX_QKIND_MXFP8, false, TEEXEC_DTYPE_FLOAT8E4M3FN, false},
            {TX_QKIND_MXFP8, false, TEEXEC_DTYPE_FLOAT8E5M2, false},
            {TX_QKIND_MXFP8, true, TEEXEC_DTYPE_FLOAT8E4M3FN, false},
            {TX_QKIND_NVFP4, false, 0, false},
            {TX_QKIND_NVFP4, true, 0, false},
        };
        for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
            tx_quant_config c = cfg_of(cases[t].kind);
            c.block_2d = cases[t].two_d;
            c.fmt = cases[t].fmt;
            c.power_2_scale = cases[t].pow2;
            tx_qtensor q;
            ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q));
            for (unsigned u = 1; u <= 2; u++) {
                ok(tx_dequantize(&q, u, d));
                /* the multiplier each element was encoded with, recovered
                 * from the stored scales */
                for (uint64_t m = 0; m < M; m++)
                    for (uint64_t k = 0; k < K; k++) {
                        uint64_t i = m * K + k;
                        float mu = 1.0f;
                        bool col = u == 2;
                        switch (cases[t].kind) {
                        case TX_QKIND_FP8_TENSOR: mu = q.scale; break;
                        case TX_QKIND_FP8_BLOCK: {
                            const float *s = col ? q.col.scale : q.row.scale;
                            uint64_t ld = col ? q.col.scale_cols : q.row.scale_cols;
                            float sinv = q.block_2d ? (col ? s[(k / 128) * ld + m / 128] : s[(m / 128) * ld + k / 128])
                                                    : (col ? s[(m / 128) * ld + k] : s[(k / 128) * ld + m]);
                            mu = 1.0f / sinv;
                            break;
                        }
                        case TX_QKIND_MXFP8: {
                            const uint8_t *s = col ? q.col.scale : q.row.scale;
                            uint64_t ld = col ? q.col.scale_cols : q.row.scale_cols;
                            uint8_t e = col ? s[(m / 32) * ld + k] : s[m * ld + k / 32];
                            mu = 1.0f / tx_e8m0_to_f32(e);
                            break;
                        }
                        default: {
                            const tx_qdata *qd = col ? &q.col : &q.row;
                            const uint8_t *s = qd->scale;
                            uint8_t sb = col ? s[k * qd->scale_cols + m / 16] : s[m * qd->scale_cols + k / 16];
                            float senc = fminf(2688.0f / qd->amax, FLT_MAX);
                            mu = 1.0f / (tx_e4m3fn_to_f32(sb) * (1.0f / senc));
                            break;
                        }
                        }
                        mult[i] = mu;
                    }
                check_error_bound(x, d, M * K, q.fmt, mult, "bound");
                /* quantize(dequantize(q)) == q (bytes) for the FP8 kinds */
                if (cases[t].kind != TX_QKIND_NVFP4) {
                    tx_quant_config c2 = c;
                    c2.usage = u;
                    tx_qtensor r;
                    ok(tx_quantize(d, TEEXEC_DTYPE_FLOAT, M, K, &c2, &r));
                    const tx_qdata *a = u == 1 ? &q.row : &q.col, *b = u == 1 ? &r.row : &r.col;
                    if (cases[t].kind != TX_QKIND_MXFP8 && !cases[t].pow2) {
                        for (size_t i = 0; i < a->data_bytes; i++)
                            if (a->data[i] != b->data[i])
                                fail_msg("case %zu usage %u: requantized byte %zu: 0x%02x vs 0x%02x",
                                         t, u, i, a->data[i], b->data[i]);
                    } else {
                        /* Power-of-two scales (MXFP8, pow2 FP8): a block whose
                         * largest code is exactly max/2 re-derives a scale one
                         * binade lower, as TE would (224 * fl(1/448) rounds to
                         * exactly 0.5), and its codes double: same values,
                         * other bytes. */
                        ok(tx_dequantize(&r, u, d2));
                        for (uint64_t i = 0; i < (uint64_t)M * K; i++)
                            if (tx_f32_bits(d[i]) != tx_f32_bits(d2[i]) && !(isnan(d[i]) && isnan(d2[i])))
                                fail_msg("case %zu usage %u: requantized value %llu: %a vs %a", t, u,
                                         (unsigned long long)i, (double)d[i], (double)d2[i]);
                    }
                    tx_qtensor_free(&r);
                } else {
                    /* NVFP4: re-encoding the dequantized values with the
                     * stored scales gives the stored codes */
                    const tx_qdata *qd = u == 1 ? &q.row : &q.col;
                    for (uint64_t m = 0; m < M; m++)
                        for (uint64_t k = 0; k < K; k++) {
                            uint64_t p = u == 1 ? m * K + k : k * M + m;
                            float mu = fminf(mult[m * K + k], FLT_MAX);
                            uint8_t code = tx_f32_to_e2m1(d[m * K + k] * mu);
                            unsigned have = tx_subbyte_get(qd->data, p, 4);
                            if (code != have && !((code | have) == 8 && (code & 7) == 0))
                                fail_msg("nvfp4 %s (%llu,%llu): %u vs %u", u == 1 ? "row" : "col",
                                         (unsigned long long)m, (unsigned long long)k, code, have);
                        }
                }
            }
            /* swizzled scales dequantize identically */
            if (cases[t].kind == TX_QKIND_MXFP8 || cases[t].kind == TX_QKIND_NVFP4) {
                tx_quant_config cs = c;
                cs.scale_layout = TX_SCALE_SWIZZLED;
                tx_qtensor s;
                ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &cs, &s));
                for (unsigned u = 1; u <= 2; u++) {
                    ok(tx_dequantize(&q, u, d));
                    ok(tx_dequantize(&s, u, d2));
                    assert_memory_equal(d, d2, sizeof(float) * M * K);
                }
                assert_memory_equal(q.row.data, s.row.data, q.row.data_bytes);
                assert_int_equal(q.row.scale_bytes, s.row.scale_bytes);
                tx_qtensor_free(&s);
            }
            tx_qtensor_free(&q);
        }
    }
    free(x);
    free(d);
    free(d2);
    free(mult);
}

static void bf16_source_matches_f32(void **state)
{
    (void)state;
    enum { M = 64, K = 64 };
    uint16_t b[M * K];
    float f[M * K];
    for (int i = 0; i < M * K; i++) {
        b[i] = tx_f32_to_bf16(((float)(next_u32() >> 8) / 16777216.0f - 0.5f) * 10.0f);
        f[i] = tx_bf16_to_f32(b[i]);
    }
    tx_qkind kinds[3] = {TX_QKIND_MXFP8, TX_QKIND_NVFP4, TX_QKIND_FP8_TENSOR};
    for (int t = 0; t < 3; t++) {
        tx_quant_config c = cfg_of(kinds[t]);
        tx_qtensor a, bq;
        ok(tx_quantize(b, TEEXEC_DTYPE_BFLOAT16, M, K, &c, &a));
        ok(tx_quantize(f, TEEXEC_DTYPE_FLOAT, M, K, &c, &bq));
        assert_memory_equal(a.row.data, bq.row.data, a.row.data_bytes);
        assert_memory_equal(a.col.data, bq.col.data, a.col.data_bytes);
        tx_qtensor_free(&a);
        tx_qtensor_free(&bq);
    }
}

static void usage_and_errors(void **state)
{
    (void)state;
    float x[64 * 32] = {0};
    tx_quant_config c = cfg_of(TX_QKIND_MXFP8);
    tx_qtensor q;
    ok(tx_quantize(x, TEEXEC_DTYPE_FLOAT, 64, 32, &c, &q));
    assert_int_equal(q.usage, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    tx_qtensor_drop_usage(&q, TX_QUSAGE_COLUMNWISE);
    assert_int_equal(q.usage, TX_QUSAGE_ROWWISE);
    assert_null(q.col.data);
    float d[64 * 32];
    teexec_status *st = tx_dequantize(&q, TX_QUSAGE_COLUMNWISE, d);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    teexec_status_destroy(st);
    tx_qtensor_free(&q);
    c.fmt = TEEXEC_DTYPE_FLOAT8E4M3FNUZ;
    st = tx_quantize(x, TEEXEC_DTYPE_FLOAT, 64, 32, &c, &q);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    c = cfg_of(TX_QKIND_FP8_BLOCK);
    c.scale_layout = TX_SCALE_SWIZZLED;
    st = tx_quantize(x, TEEXEC_DTYPE_FLOAT, 64, 32, &c, &q);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    c = cfg_of(TX_QKIND_FP8_TENSOR);
    st = tx_quantize(x, TEEXEC_DTYPE_INT8, 64, 32, &c, &q);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    st = tx_quantize(x, TEEXEC_DTYPE_FLOAT, UINT64_MAX / 2, 4, &c, &q);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_LIMIT);
    teexec_status_destroy(st);
    c = cfg_of(TX_QKIND_NVFP4);
    st = tx_quantize(x, TEEXEC_DTYPE_FLOAT, 1, 3, &c, &q);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp8_tensor_current_vectors),
        cmocka_unit_test(fp8_tensor_edge_amax),
        cmocka_unit_test(fp8_block_1d_vectors),
        cmocka_unit_test(columnwise_is_rowwise_of_transpose),
        cmocka_unit_test(two_d_blocks_consistent),
        cmocka_unit_test(mxfp8_vectors),
        cmocka_unit_test(mxfp8_scale_rule_random),
        cmocka_unit_test(nvfp4_vectors),
        cmocka_unit_test(nvfp4_stochastic_rounding),
        cmocka_unit_test(nvfp4_rht_columnwise),
        cmocka_unit_test(property_random),
        cmocka_unit_test(bf16_source_matches_f32),
        cmocka_unit_test(usage_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
