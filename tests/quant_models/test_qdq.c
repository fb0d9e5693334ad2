/* Unit tests of kernels/cpu/qdq.c with hand-checked values, and the
 * TRT_MXFP8DynamicQuantize path against the CPU MXFP8 quantizer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/numfmt.h"
#include "exec/cpu_ops.h"
#include "kernels/cpu/qdq.h"
#include "kernels/cpu/qtensor.h"

#include <math.h>
#include <string.h>

static tx_tensor make(teexec_dtype dt, int32_t rank, const int64_t *dims, const void *data)
{
    tx_tensor t;
    assert_null(tx_tensor_alloc(&t, dt, rank, dims));
    if (data) memcpy(t.data, data, t.nbytes);
    return t;
}

/* uint8 per-tensor with zero point, RNE ties and saturation. */
static void test_q_uint8(void **state)
{
    (void)state;
    int64_t d = 6;
    float xv[6] = {0.0f, 1.0f, 3.0f, -5.0f, 1000.0f, -1000.0f}; /* /2: 0 .5 1.5 -2.5 */
    float sv = 2.0f;
    uint8_t zv = 10;
    tx_tensor x = make(TEEXEC_DTYPE_FLOAT, 1, &d, xv), s = make(TEEXEC_DTYPE_FLOAT, 0, NULL, &sv),
              z = make(TEEXEC_DTYPE_UINT8, 0, NULL, &zv), y = make(TEEXEC_DTYPE_UINT8, 1, &d, NULL);
    assert_null(tx_qdq_quantize(&x, &s, &z, 1, 0, 1, TEEXEC_DTYPE_UNDEFINED, &y));
    const uint8_t want[6] = {10, 10, 12, 8, 255, 0};
    assert_memory_equal(y.data, want, 6);
    tx_tensor f = make(TEEXEC_DTYPE_FLOAT, 1, &d, NULL);
    assert_null(tx_qdq_dequantize(&y, &s, &z, 1, 0, &f));
    const float fw[6] = {0, 0, 4, -4, 490, -20};
    assert_memory_equal(f.data, fw, sizeof(fw));
    tx_tensor_release(&x), tx_tensor_release(&s), tx_tensor_release(&z), tx_tensor_release(&y),
        tx_tensor_release(&f);
}

/* INT4 blocked along axis 1 (block 2, ragged last block), packed output. */
static void test_q_int4_blocked(void **state)
{
    (void)state;
    int64_t dx[2] = {2, 3}, ds[2] = {2, 2};
    float xv[6] = {1, 2, 100, -3, -4, 0.5f};
    float sv[4] = {1, 10, 0.5f, 1};
    tx_tensor x = make(TEEXEC_DTYPE_FLOAT, 2, dx, xv), s = make(TEEXEC_DTYPE_FLOAT, 2, ds, sv),
              y = make(TEEXEC_DTYPE_INT4, 2, dx, NULL);
    assert_null(tx_qdq_quantize(&x, &s, NULL, 1, 2, 1, TEEXEC_DTYPE_UNDEFINED, &y));
    /* 1, 2, 10 | -6, -8, 0 (0.5 rounds to even 0) */
    int want[6] = {1, 2, 7, -6, -8, 0}; /* 100/10 = 10 saturates to 7 */
    for (int i = 0; i < 6; i++)
        assert_int_equal(tx_subbyte_sext(tx_subbyte_get(y.data, (uint64_t)i, 4), 4), want[i]);
    tx_tensor bad = make(TEEXEC_DTYPE_FLOAT, 2, dx, NULL);
    teexec_status *st = tx_qdq_quantize(&x, &s, NULL, 1, 1, 1, TEEXEC_DTYPE_UNDEFINED, &y);
    assert_non_null(st); /* block 1 needs 3 scale columns */
    teexec_status_destroy(st);
    tx_tensor_release(&x), tx_tensor_release(&s), tx_tensor_release(&y), tx_tensor_release(&bad);
}

/* FP8 E4M3FN with and without saturate; E8M0 scale in DQ. */
static void test_q_fp8_sat_e8m0(void **state)
{
    (void)state;
    int64_t d = 3;
    float xv[3] = {500.0f, -1.0f, NAN};
    float one = 1.0f;
    uint8_t e = 128; /* 2.0 */
    tx_tensor x = make(TEEXEC_DTYPE_FLOAT, 1, &d, xv), s = make(TEEXEC_DTYPE_FLOAT, 0, NULL, &one),
              y = make(TEEXEC_DTYPE_FLOAT8E4M3FN, 1, &d, NULL);
    assert_null(tx_qdq_quantize(&x, &s, NULL, 1, 0, 1, TEEXEC_DTYPE_UNDEFINED, &y));
    assert_int_equal(((uint8_t *)y.data)[0], 0x7E);
    assert_int_equal(((uint8_t *)y.data)[1], 0xB8);
    assert_int_equal(((uint8_t *)y.data)[2] & 0x7F, 0x7F);
    assert_null(tx_qdq_quantize(&x, &s, NULL, 1, 0, 0, TEEXEC_DTYPE_UNDEFINED, &y));
    assert_int_equal(((uint8_t *)y.data)[0] & 0x7F, 0x7F); /* NaN without saturate */
    tx_tensor se = make(TEEXEC_DTYPE_FLOAT8E8M0, 0, NULL, &e), f = make(TEEXEC_DTYPE_FLOAT, 1, &d, NULL);
    assert_null(tx_qdq_dequantize(&y, &se, NULL, 1, 0, &f));
    assert_true(isnan(((float *)f.data)[0]));
    assert_true(((float *)f.data)[1] == -2.0f);
    tx_tensor_release(&x), tx_tensor_release(&s), tx_tensor_release(&y), tx_tensor_release(&se),
        tx_tensor_release(&f);
}

/* TRT MXFP8 dynamic quantize equals the CPU MXFP8 quantizer (rowwise) and
 * writes TE's padded scale layout; the dequantizer ignores the padding. */
static void test_trt_mxfp8_matches_quantizer(void **state)
{
    (void)state;
    int64_t dx[2] = {32, 64};
    float xv[32 * 64];
    uint32_t r = 12345;
    for (int i = 0; i < 32 * 64; i++) {
        r = r * 1664525u + 1013904223u;
        xv[i] = ((float)(r >> 8) / 16777216.0f - 0.5f) * (float)(1 << (i % 13));
    }
    xv[5] = 448.0f * 8; /* a block whose amax/448 is exactly a power of two */
    tx_tensor x = make(TEEXEC_DTYPE_FLOAT, 2, dx, xv), q = make(TEEXEC_DTYPE_UINT8, 2, dx, NULL);
    int64_t sd[2];
    assert_null(tx_qdq_mxfp8_scale_shape(2, dx, 32, sd));
    assert_int_equal(sd[0], 128);
    assert_int_equal(sd[1], 4);
    tx_tensor sc = make(TEEXEC_DTYPE_UINT8, 2, sd, NULL);
    assert_null(tx_qdq_trt_mxfp8_quantize(&x, &q, &sc));
    tx_quant_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.kind = TX_QKIND_MXFP8;
    cfg.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
    cfg.usage = TX_QUSAGE_ROWWISE;
    tx_qtensor ref;
    assert_null(tx_quantize(xv, TEEXEC_DTYPE_FLOAT, 32, 64, &cfg, &ref));
    assert_memory_equal(q.data, ref.row.data, 32 * 64);
    assert_int_equal(ref.row.scale_cols, 4);
    assert_memory_equal(sc.data, ref.row.scale, 32 * 4);
    tx_tensor y = make(TEEXEC_DTYPE_FLOAT, 2, dx, NULL);
    ((uint8_t *)sc.data)[3] = 200; /* padding column: must be ignored */
    assert_null(tx_qdq_trt_mxfp8_dequantize(&q, &sc, &y));
    float deq[32 * 64];
    assert_null(tx_dequantize(&ref, TX_QUSAGE_ROWWISE, deq));
    assert_memory_equal(y.data, deq, sizeof(deq));
    tx_qtensor_free(&ref);
    tx_tensor_release(&x), tx_tensor_release(&q), tx_tensor_release(&sc), tx_tensor_release(&y);
}

/* TRT FP4: hand-checked block with global scale 1/(6*448)*8. */
static void test_trt_fp4(void **state)
{
    (void)state;
    int64_t dx[2] = {1, 16}, ds[2] = {1, 1};
    float xv[16] = {6, -3, 1.25f, 0, 0.25f, 0.75f, 2.5f, -6, 5, 0, 0, 0, 0, 0, 0, 0};
    float g = 1.0f; /* sb = e4m3(6/6) = 1.0, multiplier 1 */
    tx_tensor x = make(TEEXEC_DTYPE_FLOAT, 2, dx, xv), gs = make(TEEXEC_DTYPE_FLOAT, 0, NULL, &g),
              q = make(TEEXEC_DTYPE_FLOAT4E2M1, 2, dx, NULL),
              sc = make(TEEXEC_DTYPE_FLOAT8E4M3FN, 2, ds, NULL);
    assert_null(tx_qdq_trt_fp4_quantize(&x, &gs, &q, &sc));
    assert_int_equal(((uint8_t *)sc.data)[0], 0x38); /* 1.0 in E4M3 */
    /* 1.25 -> 1 (tie to even), 0.25 -> 0 (tie to even), 0.75 -> 1 (tie to even: 1.0), 2.5 -> 2, 5 -> 4 */
    const float want[9] = {6, -3, 1, 0, 0, 1, 2, -6, 4};
    for (int i = 0; i < 9; i++)
        assert_true(tx_e2m1_to_f32((uint8_t)tx_subbyte_get(q.data, (uint64_t)i, 4)) == want[i]);
    assert_int_equal(((uint8_t *)q.data)[0] & 15, 0x7); /* element 0 in the low nibble */
    tx_tensor_release(&x), tx_tensor_release(&gs), tx_tensor_release(&q), tx_tensor_release(&sc);
}

/* Cast to FLOAT8E8M0 through the CPU dispatch: round_mode and saturate
 * reach tx_convert (3.0 rounds up to 4, down to 2, nearest: 1.5*2^1 goes
 * up to 4; 2.5 nearest -> 2); and dispatch finds the Q/DQ and trt ops. */
static void test_cast_e8m0_round_mode(void **state)
{
    (void)state;
    int64_t d = 2;
    float xv[2] = {3.0f, 2.5f};
    tx_tensor x = make(TEEXEC_DTYPE_FLOAT, 1, &d, xv), y = make(TEEXEC_DTYPE_FLOAT8E8M0, 1, &d, NULL);
    const char *modes[3] = {"up", "down", "nearest"};
    const float want[3][2] = {{4, 4}, {2, 2}, {4, 2}};
    tx_op_fn cast = tx_cpu_op_find("", "Cast", 25);
    assert_non_null(cast);
    for (int m = 0; m < 3; m++) {
        tx_ir_attr attrs[2];
        memset(attrs, 0, sizeof(attrs));
        attrs[0].name = "to";
        attrs[0].type = TX_IR_ATTR_INT;
        attrs[0].i = TEEXEC_DTYPE_FLOAT8E8M0;
        attrs[1].name = "round_mode";
        attrs[1].type = TX_IR_ATTR_STRING;
        attrs[1].s = (char *)modes[m];
        attrs[1].s_len = strlen(modes[m]);
        tx_ir_node node;
        memset(&node, 0, sizeof(node));
        node.label = "cast";
        node.op_type = "Cast";
        node.domain = "";
        node.opset = 25;
        node.attrs = attrs;
        node.n_attrs = 2;
        const tx_tensor *ins[1] = {&x};
        tx_tensor *outs[1] = {&y};
        tx_op_call call = {&node, NULL, 1, ins, 1, outs};
        assert_null(cast(&call));
        for (int i = 0; i < 2; i++)
            assert_true(tx_e8m0_to_f32(((uint8_t *)y.data)[i]) == want[m][i]);
    }
    assert_non_null(tx_cpu_op_find("", "QuantizeLinear", 21));
    assert_non_null(tx_cpu_op_find("", "DequantizeLinear", 10));
    assert_null(tx_cpu_op_find("", "QuantizeLinear", 9));
    assert_non_null(tx_cpu_op_find("trt", "TRT_MXFP8DynamicQuantize", 1));
    assert_null(tx_cpu_op_find("trt", "TRT_Unknown", 1));
    tx_tensor_release(&x), tx_tensor_release(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q_uint8),
        cmocka_unit_test(test_q_int4_blocked),
        cmocka_unit_test(test_q_fp8_sat_e8m0),
        cmocka_unit_test(test_trt_mxfp8_matches_quantizer),
        cmocka_unit_test(test_trt_fp4),
        cmocka_unit_test(test_cast_e8m0_round_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
