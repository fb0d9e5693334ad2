/* Unit test (host only, no GPU needed): the operand regions of
 * exec/cuda/linear_gemm.h. For every quantization kind, usage set and a
 * few shapes, each part of the region must be 256-byte aligned, must not
 * overlap another, and must hold exactly what the CPU quantizer allocates
 * for the same tensor (data bytes, scale bytes, padded scale columns);
 * shape rules answer TEEXEC_ERR_UNSUPPORTED; scratch sizes follow the
 * path (high precision 0, native NVFP4 its alpha, emulation > 0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/cuda/linear_gemm.h"
#include "kernels/cpu/qtensor.h"

#include <stdio.h>
#include <string.h>

#define E4 TEEXEC_DTYPE_FLOAT8E4M3FN
#define E5 TEEXEC_DTYPE_FLOAT8E5M2
#define FP4 TEEXEC_DTYPE_FLOAT4E2M1
#define ROW TX_QUSAGE_ROWWISE
#define COL TX_QUSAGE_COLUMNWISE

typedef struct part {
    size_t off, bytes;
} part;

static void check_one(const tx_quant_config *cfg, size_t rows, size_t cols, unsigned usage, int sm)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = true;
    q.cfg = *cfg;
    q.native = true;
    tx_cuda_lin_operand o;
    teexec_status *st = tx_cuda_lin_operand_init(&o, &q, rows, cols, usage, sm);
    if (st) fail_msg("kind %d [%zu, %zu]: %s", (int)cfg->kind, rows, cols, teexec_status_message(st));
    tx_quant_config c = *cfg;
    c.usage = usage;
    c.scale_layout = o.swizzled ? TX_SCALE_SWIZZLED : TX_SCALE_COMPACT;
    tx_qtensor cq;
    st = tx_qtensor_alloc(&cq, rows, cols, &c);
    if (st) fail_msg("tx_qtensor_alloc: %s", teexec_status_message(st));
    part parts[5];
    int np = 0;
    for (int u = 0; u < 2; u++) {
        const tx_qdata *d = u ? &cq.col : &cq.row;
        const size_t doff = u ? o.col_data : o.row_data, soff = u ? o.col_scales : o.row_scales;
        const size_t scols = u ? o.col_scale_cols : o.row_scale_cols;
        if (!(usage & (u ? COL : ROW))) {
            assert_int_equal(doff, SIZE_MAX);
            assert_int_equal(soff, SIZE_MAX);
            continue;
        }
        assert_int_not_equal(doff, SIZE_MAX);
        parts[np++] = (part){doff, d->data_bytes};
        if (d->scale) {
            assert_int_not_equal(soff, SIZE_MAX);
            assert_int_equal(scols, d->scale_cols);
            parts[np++] = (part){soff, d->scale_bytes};
        } else {
            assert_int_equal(soff, SIZE_MAX);
        }
    }
    if (cfg->kind == TX_QKIND_FP8_TENSOR || cfg->kind == TX_QKIND_NVFP4) {
        assert_int_not_equal(o.scalars, SIZE_MAX);
        parts[np++] = (part){o.scalars, 64};
    }
    for (int i = 0; i < np; i++) {
        assert_int_equal(parts[i].off % 256, 0);
        assert_true(parts[i].off + parts[i].bytes <= o.bytes);
        for (int j = 0; j < i; j++)
            assert_true(parts[i].off + parts[i].bytes <= parts[j].off ||
                        parts[j].off + parts[j].bytes <= parts[i].off);
    }
    assert_int_equal(o.bytes % 256, 0);
    tx_qtensor_free(&cq);
}

static void test_layouts(void **state)
{
    (void)state;
    const tx_quant_config cfgs[] = {
        {.kind = TX_QKIND_FP8_TENSOR, .fmt = E4},
        {.kind = TX_QKIND_FP8_TENSOR, .fmt = E5, .power_2_scale = true},
        {.kind = TX_QKIND_FP8_BLOCK, .fmt = E4},
        {.kind = TX_QKIND_FP8_BLOCK, .fmt = E4, .block_2d = true},
        {.kind = TX_QKIND_MXFP8, .fmt = E4},
        {.kind = TX_QKIND_MXFP8, .fmt = E5, .block_2d = true},
        {.kind = TX_QKIND_NVFP4, .fmt = FP4, .rht = true},
        {.kind = TX_QKIND_NVFP4, .fmt = FP4, .block_2d = true},
    };
    const size_t shapes[][2] = {{32, 32}, {64, 96}, {256, 384}, {160, 544}, {1024, 32}};
    const unsigned usages[] = {ROW, COL, ROW | COL};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t u = 0; u < 3; u++)
                for (int sm = 90; sm <= 100; sm += 10)
                    check_one(&cfgs[c], shapes[s][0], shapes[s][1], usages[u], sm);
}

static void expect_code(const char *what, teexec_status *st, teexec_code code)
{
    if (!st) fail_msg("%s: expected code %d, got success", what, (int)code);
    const teexec_code got = teexec_status_code(st);
    teexec_status_destroy(st);
    if (got != code) fail_msg("%s: expected code %d, got %d", what, (int)code, (int)got);
}

static void test_shape_rules(void **state)
{
    (void)state;
    tx_cuda_lin_operand o;
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = true;
    q.cfg.kind = TX_QKIND_MXFP8;
    q.cfg.fmt = E4;
    expect_code("mxfp8 cols 48", tx_cuda_lin_operand_init(&o, &q, 64, 48, ROW, 90), TEEXEC_ERR_UNSUPPORTED);
    expect_code("mxfp8 rows 40", tx_cuda_lin_operand_init(&o, &q, 40, 64, ROW, 90), TEEXEC_ERR_UNSUPPORTED);
    q.cfg.kind = TX_QKIND_NVFP4;
    q.cfg.fmt = FP4;
    /* the planner's rule: cols % 16, rows % 16 for a columnwise or 2-D copy */
    assert_null(tx_cuda_lin_operand_init(&o, &q, 48, 80, COL, 90));
    expect_code("nvfp4 cols 40", tx_cuda_lin_operand_init(&o, &q, 48, 40, ROW, 90), TEEXEC_ERR_UNSUPPORTED);
    expect_code("nvfp4 columnwise rows 40", tx_cuda_lin_operand_init(&o, &q, 40, 64, COL, 90),
                TEEXEC_ERR_UNSUPPORTED);
    assert_null(tx_cuda_lin_operand_init(&o, &q, 7, 64, ROW, 90)); /* rowwise: any rows */
    q.cfg.block_2d = true;
    expect_code("nvfp4 2-D rows 40", tx_cuda_lin_operand_init(&o, &q, 40, 64, ROW, 90),
                TEEXEC_ERR_UNSUPPORTED);
    q.cfg.block_2d = false;
    q.cfg.kind = TX_QKIND_FP8_TENSOR;
    q.cfg.fmt = E4;
    expect_code("fp8 cols 24", tx_cuda_lin_operand_init(&o, &q, 32, 24, ROW, 90), TEEXEC_ERR_UNSUPPORTED);
    expect_code("fp8 columnwise rows 8", tx_cuda_lin_operand_init(&o, &q, 8, 32, COL, 90),
                TEEXEC_ERR_UNSUPPORTED);
    assert_null(tx_cuda_lin_operand_init(&o, &q, 8, 32, ROW, 90)); /* rowwise: any rows */
    q.cfg.kind = TX_QKIND_FP8_BLOCK;
    expect_code("block cols 12", tx_cuda_lin_operand_init(&o, &q, 32, 12, ROW, 90), TEEXEC_ERR_UNSUPPORTED);
    q.cfg.fmt = FP4;
    expect_code("block with FP4", tx_cuda_lin_operand_init(&o, &q, 32, 32, ROW, 90),
                TEEXEC_ERR_INVALID_ARGUMENT);
    q.cfg.fmt = E4;
    expect_code("no usage", tx_cuda_lin_operand_init(&o, &q, 32, 32, 0, 90), TEEXEC_ERR_INVALID_ARGUMENT);
    q.cfg.kind = TX_QKIND_FP8_TENSOR;
    q.cfg.use_given_scale = true;
    expect_code("delayed without a device scale", tx_cuda_lin_operand_init(&o, &q, 32, 32, ROW, 90),
                TEEXEC_ERR_INVALID_ARGUMENT);
    /* high precision: shape only */
    memset(&q, 0, sizeof q);
    assert_null(tx_cuda_lin_operand_init(&o, &q, 7, 5, ROW, 90));
    assert_int_equal(o.bytes, 0);
    assert_int_equal(o.rows, 7);
    assert_int_equal(o.cols, 5);
    /* swizzled scales only for a native MXFP8 / NVFP4 GEMM on sm_100+ */
    q.on = true;
    q.cfg.kind = TX_QKIND_MXFP8;
    q.cfg.fmt = E4;
    assert_null(tx_cuda_lin_operand_init(&o, &q, 64, 64, ROW, 100));
    assert_false(o.swizzled);
    q.native = true;
    assert_null(tx_cuda_lin_operand_init(&o, &q, 64, 64, ROW, 90));
    assert_false(o.swizzled);
    assert_null(tx_cuda_lin_operand_init(&o, &q, 64, 64, ROW, 100));
    assert_true(o.swizzled);
    q.cfg.kind = TX_QKIND_FP8_BLOCK;
    assert_null(tx_cuda_lin_operand_init(&o, &q, 64, 64, ROW, 100));
    assert_false(o.swizzled);
}

static void test_scratch(void **state)
{
    (void)state;
    tx_cuda_operand_q off, nv, mx, f8;
    memset(&off, 0, sizeof off);
    nv = mx = f8 = off;
    nv.on = mx.on = f8.on = true;
    nv.native = mx.native = true;
    nv.cfg.kind = TX_QKIND_NVFP4;
    nv.cfg.fmt = FP4;
    mx.cfg.kind = TX_QKIND_MXFP8;
    mx.cfg.fmt = E4;
    f8.cfg.kind = TX_QKIND_FP8_TENSOR;
    f8.cfg.fmt = E4;
    const size_t T = 128, N = 64, K = 96;
    tx_cuda_lin_operand x, w;
    tx_cuda_lin_ref a = {&x, NULL, TEEXEC_DTYPE_BFLOAT16, NULL}, b = {&w, NULL, TEEXEC_DTYPE_BFLOAT16, NULL};
    /* high precision */
    assert_null(tx_cuda_lin_operand_init(&x, &off, T, K, ROW, 90));
    assert_null(tx_cuda_lin_operand_init(&w, &off, N, K, ROW, 90));
    assert_int_equal(tx_cuda_lin_gemm_scratch(TX_LIN_FPROP, &a, &b), 0);
    /* mixed: the weight dequantized to bf16 through an FP32 staging copy */
    assert_null(tx_cuda_lin_operand_init(&w, &mx, N, K, ROW | COL, 90));
    assert_true(tx_cuda_lin_gemm_scratch(TX_LIN_FPROP, &a, &b) >= N * K * 6);
    /* emulated MXFP8 on sm_90; native on sm_100 needs nothing */
    assert_null(tx_cuda_lin_operand_init(&x, &mx, T, K, ROW | COL, 90));
    assert_true(tx_cuda_lin_gemm_scratch(TX_LIN_FPROP, &a, &b) >= (T + N) * K * 2);
    assert_null(tx_cuda_lin_operand_init(&x, &mx, T, K, ROW | COL, 100));
    assert_null(tx_cuda_lin_operand_init(&w, &mx, N, K, ROW | COL, 100));
    assert_int_equal(tx_cuda_lin_gemm_scratch(TX_LIN_WGRAD, &a, &b), 0);
    /* native NVFP4: one device alpha */
    assert_null(tx_cuda_lin_operand_init(&x, &nv, T, K, ROW | COL, 100));
    assert_null(tx_cuda_lin_operand_init(&w, &nv, N, K, ROW | COL, 100));
    assert_int_equal(tx_cuda_lin_gemm_scratch(TX_LIN_FPROP, &a, &b), 256);
    /* FP8 per-tensor: native when the TN dims are multiples of 16 */
    assert_null(tx_cuda_lin_operand_init(&x, &f8, T, K, ROW | COL, 90));
    assert_null(tx_cuda_lin_operand_init(&w, &f8, N, K, ROW | COL, 90));
    assert_int_equal(tx_cuda_lin_gemm_scratch(TX_LIN_FPROP, &a, &b), 0);
    assert_null(tx_cuda_lin_operand_init(&w, &f8, 40, K, ROW, 90));
    assert_true(tx_cuda_lin_gemm_scratch(TX_LIN_FPROP, &a, &b) >= (T + 40) * K * 4 + T * 40 * 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_shape_rules),
        cmocka_unit_test(test_scratch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
