/* Unit test (no GPU needed): the prepare-time side of the FP8 quantized
 * hand-offs (exec/cuda/te_cuda_handoff.h, te_cuda_linear.c): which
 * producer / format combinations the GPU accepts and the reasons it gives
 * otherwise, and how a handed-off operand changes the consumer Linear's
 * layout (dy's region moves from the shared scratch into the state; x's
 * stays where it is). Prepare runs no CUDA call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "exec/cuda/te_cuda_handoff.h"
#include "exec/cuda/te_cuda_linear.h"

#define BF16 TEEXEC_DTYPE_BFLOAT16

static tx_cuda_operand_q fp8(teexec_dtype fmt)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = true;
    q.native = true;
    q.cfg.kind = TX_QKIND_FP8_TENSOR;
    q.cfg.fmt = fmt;
    return q;
}

static void expect_decline(tx_fusion_id f, tx_te_op_id op, teexec_dtype dt, size_t cols,
                           const tx_cuda_operand_q *q, const char *needle)
{
    teexec_status *st = tx_cuda_handoff_accepts(f, op, NULL, dt, dt, cols, q);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    if (!strstr(teexec_status_message(st), needle))
        fail_msg("\"%s\" lacks \"%s\"", teexec_status_message(st), needle);
    teexec_status_destroy(st);
}

static void accepts(void **state)
{
    (void)state;
    tx_cuda_operand_q q = fp8(TEEXEC_DTYPE_FLOAT8E4M3FN), g = fp8(TEEXEC_DTYPE_FLOAT8E5M2);
    assert_null(tx_cuda_handoff_accepts(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, NULL, BF16,
                                        BF16, 4096, &q));
    assert_null(tx_cuda_handoff_accepts(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, NULL,
                                        TEEXEC_DTYPE_FLOAT, BF16, 2048, &q));
    assert_null(tx_cuda_handoff_accepts(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, NULL, BF16, BF16,
                                        16384, &q));
    assert_null(tx_cuda_handoff_accepts(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, NULL, BF16, BF16,
                                        4096, &g));
    tx_cuda_operand_q blk = q, mx = q, off = q;
    blk.cfg.kind = TX_QKIND_FP8_BLOCK;
    mx.cfg.kind = TX_QKIND_MXFP8;
    off.on = false;
    expect_decline(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, BF16, 4096, &blk, "fp8-block");
    expect_decline(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, BF16, 4096, &mx, "MXFP8");
    expect_decline(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, BF16, 4096, &off, "not quantized");
    expect_decline(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_QGELU, BF16, 4096, &q, "GELU, ReLU and SiLU");
    expect_decline(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_GELU, BF16, 4096, &q, "LayerNorm");
    expect_decline(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, TEEXEC_DTYPE_FLOAT16, 4096, &q,
                   "float32 or bfloat16");
    expect_decline(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, BF16, 32768, &q, "registers");
    expect_decline(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, BF16, 24, &g, "multiple of 16");
    expect_decline(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_LAYER_NORM, BF16, 64, &g, "not a Bias");
    expect_decline(TX_FUSION_BWD_ACT_BIAS, TX_TE_BIAS, BF16, 64, &g, "not a hand-off");
}

static void layout(void **state)
{
    (void)state;
    int64_t xd[2] = {64, 128}, wd[2] = {96, 128}, yd[2] = {64, 96};
    tx_tensor x = {0}, w = {0}, y = {0};
    assert_null(tx_tensor_alloc(&x, BF16, 2, xd));
    assert_null(tx_tensor_alloc(&w, BF16, 2, wd));
    assert_null(tx_tensor_alloc(&y, BF16, 2, yd));
    const tx_tensor *par[1] = {&w};
    tx_cuda_linear_quant q;
    q.x = fp8(TEEXEC_DTYPE_FLOAT8E4M3FN);
    q.w = fp8(TEEXEC_DTYPE_FLOAT8E4M3FN);
    q.dy = fp8(TEEXEC_DTYPE_FLOAT8E5M2);
    tx_cuda_te_desc d;
    memset(&d, 0, sizeof d);
    d.op = TX_TE_LINEAR;
    d.name = "fc";
    d.input = &x;
    d.params = par;
    d.n_params = 1;
    d.output = &y;
    d.training = true;
    d.needs = TX_TE_FOR_DX | TX_TE_FOR_DPARAMS;
    d.sm = 90;
    d.quant = &q;
    tx_cuda_linear plain, hx, hdy;
    assert_null(tx_cuda_linear_init(&plain, &d));
    assert_int_equal(plain.st_dy, SIZE_MAX);
    assert_true(plain.ody.bytes > 0);
    assert_true(plain.scratch_bytes >= plain.ody.bytes);
    q.x.handed_off = true;
    assert_null(tx_cuda_linear_init(&hx, &d));
    assert_true(hx.ox.q.handed_off);
    assert_int_equal(hx.st_x, plain.st_x);
    assert_int_equal(hx.state_bytes, plain.state_bytes);
    q.x.handed_off = false;
    q.dy.handed_off = true;
    assert_null(tx_cuda_linear_init(&hdy, &d));
    assert_true(hdy.st_dy != SIZE_MAX);
    assert_true(hdy.st_dy >= plain.state_bytes);
    assert_true(hdy.st_dy % 256 == 0);
    assert_true(hdy.state_bytes >= hdy.st_dy + hdy.ody.bytes);
    assert_int_equal(hdy.sc_gemm, 0);
    assert_true(hdy.scratch_bytes < plain.scratch_bytes);
    tx_tensor_release(&x);
    tx_tensor_release(&w);
    tx_tensor_release(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(accepts), cmocka_unit_test(layout)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
