/* Unit test (no GPU needed): the prepare-time side of the fp8-block
 * quantized hand-offs (exec/cuda/te_cuda_handoff_block.h, reached through
 * te_cuda_handoff.h): which producer / format / shape combinations the GPU
 * accepts for a 1x128 fp8-block operand and the reasons it gives
 * otherwise, the fused kernels' prepare against a consumer Linear (handed
 * off or not), and the region view the producers write through
 * (linear_gemm.h tx_cuda_lin_block_dest) against the operand's layout.
 * Prepare runs no CUDA call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "exec/cuda/te_cuda_handoff.h"
#include "exec/cuda/te_cuda_handoff_block.h"
#include "exec/cuda/te_cuda_linear.h"

#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F16 TEEXEC_DTYPE_FLOAT16
#define F32 TEEXEC_DTYPE_FLOAT
#define E4M3 TEEXEC_DTYPE_FLOAT8E4M3FN
#define E5M2 TEEXEC_DTYPE_FLOAT8E5M2

static tx_cuda_operand_q blk(teexec_dtype fmt)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = true;
    q.native = true;
    q.cfg.kind = TX_QKIND_FP8_BLOCK;
    q.cfg.fmt = fmt;
    q.cfg.power_2_scale = true;
    return q;
}

static void expect_no(teexec_status *st, const char *needle)
{
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    if (!strstr(teexec_status_message(st), needle))
        fail_msg("\"%s\" lacks \"%s\"", teexec_status_message(st), needle);
    teexec_status_destroy(st);
}

static teexec_status *acc(tx_fusion_id f, tx_te_op_id op, teexec_dtype in, teexec_dtype dt,
                          size_t cols, const tx_cuda_operand_q *q)
{
    return tx_cuda_handoff_accepts(f, op, NULL, in, dt, cols, q);
}

static void accepts(void **state)
{
    (void)state;
    tx_cuda_operand_q q = blk(E4M3), g = blk(E5M2), row = q;
    row.cfg.usage = TX_QUSAGE_ROWWISE; /* inference / frozen weights: no wgrad copy */
    assert_null(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, BF16, BF16, 4096, &row));
    assert_null(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, F32, BF16, 16384, &row));
    /* a multiple of 8 is enough (per-tensor FP8 asks for 16) */
    assert_null(acc(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, BF16, BF16, 24, &g));
    assert_null(acc(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, F32, F32, 4096, &q));
    /* the same answers straight from te_cuda_handoff_block.c */
    assert_null(tx_cuda_handoff_block_accepts(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, NULL,
                                              BF16, BF16, 4096, &row));
    /* measured slower than unfused: declined with the numbers */
    expect_no(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, BF16, BF16, 4096, &q), "measured");
    tx_cuda_operand_q both = q;
    both.cfg.usage = TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE;
    expect_no(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, BF16, BF16, 4096, &both), "measured");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, BF16, BF16, 16384, &row), "measured");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SILU, F32, F32, 328, &both), "measured");
}

static void declines(void **state)
{
    (void)state;
    tx_cuda_operand_q q = blk(E4M3), two = q, bad_fmt = q;
    two.cfg.block_2d = true;
    bad_fmt.cfg.fmt = BF16;
    expect_no(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, BF16, BF16, 4096, &two), "128x128");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, BF16, BF16, 4096, &bad_fmt), "E4M3 or E5M2");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, F16, F16, 4096, &q), "float32 or bfloat16");
    expect_no(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, F16, BF16, 4096, &q),
              "float32 or bfloat16");
    expect_no(acc(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, BF16, BF16, 36, &q), "multiple of 8");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, BF16, BF16, 0, &q), "multiple of 8");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_QGELU, BF16, BF16, 4096, &q), "GELU, ReLU and SiLU");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SWIGLU, BF16, BF16, 4096, &q), "GELU, ReLU and SiLU");
    expect_no(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_GELU, BF16, BF16, 4096, &q), "LayerNorm");
    expect_no(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, BF16, BF16, 32768, &q), "registers");
    expect_no(acc(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_LAYER_NORM, BF16, BF16, 64, &q), "not a Bias");
    expect_no(acc(TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, BF16, BF16, 64, &q), "per-tensor");
    expect_no(acc(TX_FUSION_BWD_ADD_NORM, TX_TE_LAYER_NORM, BF16, BF16, 64, &q), "not a hand-off");
    /* asked directly with an operand that is not fp8-block */
    tx_cuda_operand_q mx = q;
    mx.cfg.kind = TX_QKIND_MXFP8;
    expect_no(tx_cuda_handoff_block_accepts(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, NULL, BF16,
                                            BF16, 64, &mx),
              "not fp8-block");
}

/* The view the producers write through names the operand's own parts. */
static void region_view(void **state)
{
    (void)state;
    const size_t shapes[3][2] = {{208, 328}, {203, 136}, {8192, 4096}};
    for (int i = 0; i < 3; i++) {
        const size_t M = shapes[i][0], K = shapes[i][1];
        const bool col = M % 16 == 0;
        tx_cuda_operand_q q = blk(E4M3);
        tx_cuda_lin_operand o;
        unsigned usage = TX_QUSAGE_ROWWISE | (col ? TX_QUSAGE_COLUMNWISE : 0u);
        assert_null(tx_cuda_lin_operand_init(&o, &q, M, K, usage, 90));
        char *mem = (char *)(uintptr_t)0x100000; /* never dereferenced */
        tx_cuda_block_args a;
        tx_cuda_lin_block_dest(&o, mem, &a);
        assert_ptr_equal(a.x, NULL);
        assert_int_equal(a.rows, M);
        assert_int_equal(a.cols, K);
        assert_int_equal(a.fmt, E4M3);
        assert_int_equal(a.two_d, 0);
        assert_int_equal(a.pow2, 1);
        assert_ptr_equal(a.row_data, mem + o.row_data);
        assert_ptr_equal(a.row_scale_inv, mem + o.row_scales);
        /* 1-D rowwise scales: [ceil(K/128)][roundup(M,4)] */
        const size_t ld = (M + 3) / 4 * 4;
        assert_int_equal(a.row_ld, ld);
        assert_int_equal(a.row_scale_count, (K + 127) / 128 * ld);
        if (col) {
            assert_ptr_equal(a.col_data, mem + o.col_data);
            assert_ptr_equal(a.col_scale_inv, mem + o.col_scales);
            assert_int_equal(a.col_ld, (K + 3) / 4 * 4);
            assert_int_equal(a.col_scale_count, (M + 127) / 128 * a.col_ld);
            /* the parts do not overlap and fit the region */
            assert_true(o.row_scales + a.row_scale_count * 4 <= o.col_data);
            assert_true(o.col_scales + a.col_scale_count * 4 <= o.bytes);
        } else {
            assert_ptr_equal(a.col_data, NULL);
            assert_int_equal(a.col_scale_count, 0);
            assert_true(o.row_scales + a.row_scale_count * 4 <= o.bytes);
        }
    }
}

/* The fused kernels' prepare against a consumer Linear. */
static void fused_prepare(void **state)
{
    (void)state;
    enum { T = 256, K = 384, N = 512 };
    int64_t xd[2] = {T, K}, wd[2] = {N, K}, yd[2] = {T, N}, bd[1] = {N};
    tx_tensor x = {0}, w = {0}, y = {0}, b = {0}, h = {0}, xin = {0};
    assert_null(tx_tensor_alloc(&x, BF16, 2, xd));
    assert_null(tx_tensor_alloc(&xin, BF16, 2, xd));
    assert_null(tx_tensor_alloc(&w, BF16, 2, wd));
    assert_null(tx_tensor_alloc(&y, BF16, 2, yd));
    assert_null(tx_tensor_alloc(&b, BF16, 1, bd));
    assert_null(tx_tensor_alloc(&h, BF16, 2, yd));
    const tx_tensor *wp[1] = {&w}, *bp[1] = {&b};
    tx_te_attr_value lattrs[TX_TE_MAX_ATTRS], battrs[TX_TE_MAX_ATTRS], gattrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_LINEAR), lattrs);
    tx_te_attr_defaults(tx_te_schema(TX_TE_BIAS), battrs);
    tx_te_attr_defaults(tx_te_schema(TX_TE_GELU), gattrs);
    tx_cuda_linear_quant q;
    memset(&q, 0, sizeof q);
    q.x = blk(E4M3);
    q.w = blk(E4M3);
    q.w.cfg.block_2d = true;
    q.dy = blk(E4M3);
    tx_cuda_te_desc ld = {.op = TX_TE_LINEAR, .name = "fc", .attrs = lattrs, .input = &x,
                          .params = wp, .n_params = 1, .output = &y, .training = true,
                          .needs = TX_TE_FOR_DX | TX_TE_FOR_DPARAMS, .quant = &q, .sm = 90};
    tx_cuda_te_node *own = NULL, *hx = NULL, *hdy = NULL;
    assert_null(tx_cuda_te_prepare(&ld, &own));
    q.x.handed_off = true;
    assert_null(tx_cuda_te_prepare(&ld, &hx));
    q.x.handed_off = false;
    q.dy.handed_off = true;
    assert_null(tx_cuda_te_prepare(&ld, &hdy));
    const tx_cuda_linear *lh = tx_cuda_te_node_priv(hdy);
    assert_true(lh->st_dy != SIZE_MAX); /* dy's region kept in the state */
    void *state_ptr = NULL;
    const tx_cuda_fused_impl *impl = NULL;
    void *priv = NULL;
    size_t scratch = 7;

    /* GELU -> fc: the executor's prepare declines (measured slower) ... */
    tx_cuda_te_desc gd = {.op = TX_TE_GELU, .name = "gelu", .attrs = gattrs, .input = &xin,
                          .output = &x, .training = true, .needs = TX_TE_FOR_ALL, .sm = 90,
                          .handoff_to = hx, .handoff_state = &state_ptr};
    const tx_cuda_te_desc *gds[1] = {&gd};
    expect_no(tx_cuda_fused_handoff_prepare(TX_FUSION_FWD_ACT_QUANTIZE, false, gds, NULL, 1, &impl,
                                            &priv, &scratch),
              "measured");
    assert_null(impl);
    /* ... the kernel itself prepares: forward only, no scratch */
    const tx_cuda_linear *lx = tx_cuda_te_node_priv(hx);
    assert_null(tx_cuda_fused_handoff_block_prepare(TX_FUSION_FWD_ACT_QUANTIZE, &gd, lx, &lx->ox,
                                                    &impl, &priv, &scratch));
    assert_non_null(impl);
    assert_non_null(impl->forward);
    assert_null(impl->backward);
    assert_int_equal(scratch, 0);
    impl->free_priv(priv);
    /* QGELU has no fp8-block kernel */
    gd.op = TX_TE_QGELU;
    expect_no(tx_cuda_fused_handoff_block_prepare(TX_FUSION_FWD_ACT_QUANTIZE, &gd, lx, &lx->ox,
                                                  &impl, &priv, &scratch),
              "GELU, ReLU or SiLU");
    /* an operand that is not handed off: an internal error, not a kernel */
    const tx_cuda_linear *lo = tx_cuda_te_node_priv(own);
    teexec_status *st = tx_cuda_fused_handoff_block_prepare(TX_FUSION_FWD_ACT_QUANTIZE, &gd, lo,
                                                            &lo->ox, &impl, &priv, &scratch);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INTERNAL);
    teexec_status_destroy(st);

    /* Bias after fc: backward kernel with the 64-row partial sums */
    tx_cuda_te_desc bdesc = {.op = TX_TE_BIAS, .name = "bias", .attrs = battrs, .input = &y,
                             .params = bp, .n_params = 1, .output = &h, .training = true,
                             .needs = TX_TE_FOR_ALL, .sm = 90, .handoff_to = hdy,
                             .handoff_state = &state_ptr};
    const tx_cuda_te_desc *bds[1] = {&bdesc};
    assert_null(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_BIAS_QUANTIZE, true, bds, NULL, 1,
                                              &impl, &priv, &scratch));
    assert_non_null(impl);
    assert_non_null(impl->backward);
    assert_null(impl->forward);
    assert_int_equal(scratch, (size_t)(T + 63) / 64 * N * sizeof(float));
    impl->free_priv(priv);
    /* the Linear was prepared to quantize dy itself: declined with the reason */
    bdesc.handoff_to = own;
    expect_no(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_BIAS_QUANTIZE, true, bds, NULL, 1, &impl,
                                            &priv, &scratch),
              "quantize this operand itself");
    assert_null(impl);
    bdesc.handoff_to = hdy;
    /* a forward call of the backward fusion */
    expect_no(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_BIAS_QUANTIZE, false, bds, NULL, 1, &impl,
                                            &priv, &scratch),
              "backward");
    /* a grad whose shape is not the Linear's grad_output */
    int64_t sd[2] = {T / 2, N};
    tx_tensor small = {0};
    assert_null(tx_tensor_alloc(&small, BF16, 2, sd));
    bdesc.output = &small;
    expect_no(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_BIAS_QUANTIZE, true, bds, NULL, 1, &impl,
                                            &priv, &scratch),
              "operand shape");
    tx_cuda_te_node_free(own);
    tx_cuda_te_node_free(hx);
    tx_cuda_te_node_free(hdy);
    tx_tensor *ts[] = {&x, &xin, &w, &y, &b, &h, &small};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tx_tensor_release(ts[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(accepts), cmocka_unit_test(declines),
                                       cmocka_unit_test(region_view),
                                       cmocka_unit_test(fused_prepare)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
