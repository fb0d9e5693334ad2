/* The C quantizers against an independent NumPy implementation of the
 * recipes (tests/numfmt/make_quant_golden.py): same pseudo-random 64x64
 * input, FNV-1a hashes of every output array must match. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/cpu/qtensor.h"
#include "quant_golden.h"

#include <math.h>
#include <string.h>

enum { M = 64, K = 64 };

static float x[M * K];

static void make_input(void)
{
    uint32_t s = 2463534242u;
    for (int i = 0; i < M * K; i++) {
        s = s * 1664525u + 1013904223u;
        double mant = (double)((s >> 8) & 0xFFFFFFu) / 16777216.0 - 0.5;
        x[i] = (float)(mant * ldexp(1.0, (int)(s % 13u) - 6));
    }
    x[5] = 0.0f;
    x[100] = 56.0f;
    x[777] = 1e-40f;
    x[1000] = -3e4f;
    x[2049] = 17.0f / 256.0f;
}

static uint64_t fnv(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void check(const void *p, size_t n, uint64_t want, const char *what)
{
    uint64_t got = fnv(p, n);
    if (got != want) fail_msg("%s: hash %016llx, reference %016llx", what, (unsigned long long)got,
                              (unsigned long long)want);
}

static tx_qtensor run(tx_qkind kind)
{
    tx_quant_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    tx_qtensor q;
    teexec_status *st = tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q);
    if (st) fail_msg("quantize: %s", teexec_status_message(st));
    return q;
}

static void fp8_current_matches_reference(void **state)
{
    (void)state;
    make_input();
    tx_qtensor q = run(TX_QKIND_FP8_TENSOR);
    check(q.row.data, q.row.data_bytes, GOLDEN_FP8_CURRENT_ROW, "fp8 rowwise");
    check(q.col.data, q.col.data_bytes, GOLDEN_FP8_CURRENT_COL, "fp8 columnwise");
    check(&q.scale_inv, 4, GOLDEN_FP8_CURRENT_SCALE_INV, "fp8 scale_inv");
    tx_qtensor_free(&q);
}

static void fp8_block_matches_reference(void **state)
{
    (void)state;
    make_input();
    tx_qtensor q = run(TX_QKIND_FP8_BLOCK);
    check(q.row.data, q.row.data_bytes, GOLDEN_BLOCK_ROW, "block rowwise");
    check(q.row.scale, q.row.scale_bytes, GOLDEN_BLOCK_ROW_SCALE, "block rowwise scales");
    check(q.col.data, q.col.data_bytes, GOLDEN_BLOCK_COL, "block columnwise");
    check(q.col.scale, q.col.scale_bytes, GOLDEN_BLOCK_COL_SCALE, "block columnwise scales");
    tx_qtensor_free(&q);
}

static void mxfp8_matches_reference(void **state)
{
    (void)state;
    make_input();
    tx_qtensor q = run(TX_QKIND_MXFP8);
    check(q.row.data, q.row.data_bytes, GOLDEN_MX_ROW, "mxfp8 rowwise");
    check(q.row.scale, q.row.scale_bytes, GOLDEN_MX_ROW_SCALE, "mxfp8 rowwise scales");
    check(q.col.data, q.col.data_bytes, GOLDEN_MX_COL, "mxfp8 columnwise");
    check(q.col.scale, q.col.scale_bytes, GOLDEN_MX_COL_SCALE, "mxfp8 columnwise scales");
    tx_qtensor_free(&q);
}

static void nvfp4_matches_reference(void **state)
{
    (void)state;
    make_input();
    tx_qtensor q = run(TX_QKIND_NVFP4);
    check(q.row.data, q.row.data_bytes, GOLDEN_FP4_ROW, "nvfp4 rowwise");
    check(q.row.scale, q.row.scale_bytes, GOLDEN_FP4_ROW_SCALE, "nvfp4 rowwise scales");
    check(q.col.data, q.col.data_bytes, GOLDEN_FP4_COL, "nvfp4 columnwise");
    check(q.col.scale, q.col.scale_bytes, GOLDEN_FP4_COL_SCALE, "nvfp4 columnwise scales");
    tx_qtensor_free(&q);
}

static void nvfp4_2d_matches_reference(void **state)
{
    (void)state;
    make_input();
    tx_quant_config c;
    memset(&c, 0, sizeof c);
    c.kind = TX_QKIND_NVFP4;
    c.block_2d = true;
    c.usage = TX_QUSAGE_ROWWISE;
    tx_qtensor q;
    teexec_status *st = tx_quantize(x, TEEXEC_DTYPE_FLOAT, M, K, &c, &q);
    if (st) fail_msg("quantize: %s", teexec_status_message(st));
    check(q.row.data, q.row.data_bytes, GOLDEN_FP4_2D_ROW, "nvfp4 2-D rowwise");
    check(q.row.scale, q.row.scale_bytes, GOLDEN_FP4_2D_ROW_SCALE, "nvfp4 2-D scales");
    tx_qtensor_free(&q);
}

/* bf16 source, columnwise with the Hadamard transform: the reference
 * rounds the exact transform to bf16 once, as hadamard.c documents. */
static void nvfp4_rht_matches_reference(void **state)
{
    (void)state;
    enum { RM = 64, RK = 32 };
    uint16_t xb[RM * RK];
    uint32_t s = 88172645u;
    for (int i = 0; i < RM * RK; i++) {
        s = s * 1664525u + 1013904223u;
        float v = (float)(((double)(s >> 24) - 128.0) / 256.0 * ldexp(1.0, (int)(s % 7u) - 3));
        uint32_t u;
        memcpy(&u, &v, 4);
        assert_int_equal(u & 0xffffu, 0); /* exactly representable in bf16 */
        xb[i] = (uint16_t)(u >> 16);
    }
    xb[3 * RK + 7] = 0x4220; /* 40.0 */
    tx_quant_config c;
    memset(&c, 0, sizeof c);
    c.kind = TX_QKIND_NVFP4;
    c.rht = true;
    c.usage = TX_QUSAGE_COLUMNWISE;
    tx_qtensor q;
    teexec_status *st = tx_quantize(xb, TEEXEC_DTYPE_BFLOAT16, RM, RK, &c, &q);
    if (st) fail_msg("quantize: %s", teexec_status_message(st));
    check(q.col.data, q.col.data_bytes, GOLDEN_FP4_RHT_COL, "nvfp4 RHT columnwise");
    check(q.col.scale, q.col.scale_bytes, GOLDEN_FP4_RHT_COL_SCALE, "nvfp4 RHT scales");
    check(&q.col.amax, 4, GOLDEN_FP4_RHT_COL_AMAX, "nvfp4 RHT amax");
    tx_qtensor_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp8_current_matches_reference),
        cmocka_unit_test(fp8_block_matches_reference),
        cmocka_unit_test(mxfp8_matches_reference),
        cmocka_unit_test(nvfp4_matches_reference),
        cmocka_unit_test(nvfp4_2d_matches_reference),
        cmocka_unit_test(nvfp4_rht_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
