/* Unit test (no GPU needed): the prepare-time side of the FP8 quantized
 * hand-offs (exec/cuda/te_cuda_handoff.h, te_cuda_linear.c): which
 * producer / format / dtype combinations the GPU accepts and the reasons it
 * gives otherwise (every activation ForwardActivationQuantize covers,
 * float16, BackwardActivationBias's quantize), which family prepares
 * BackwardActivationBias (the hand-off only where the Linear before expects
 * its grad_output quantized), and how a handed-off operand changes the
 * consumer Linear's layout (dy's region moves from the shared scratch into
 * the state; x's stays where it is). Prepare runs no CUDA call. */
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
#define F16 TEEXEC_DTYPE_FLOAT16
#define F32 TEEXEC_DTYPE_FLOAT

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
    blk.cfg.block_2d = true; /* 1x128 is handed off (test_handoff_block_prepare.c) */
    mx.cfg.kind = TX_QKIND_MXFP8;
    off.on = false;
    expect_decline(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, BF16, 4096, &blk, "fp8-block");
    expect_decline(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, BF16, 4096, &mx, "MXFP8");
    expect_decline(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, BF16, 4096, &off, "not quantized");
    expect_decline(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SCALED_SWIGLU, BF16, 4096, &q, "unscaled");
    expect_decline(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_LAYER_NORM, BF16, 4096, &q, "unscaled");
    expect_decline(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_GELU, BF16, 4096, &q, "LayerNorm");
    expect_decline(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, TEEXEC_DTYPE_DOUBLE, 4096, &q,
                   "float32, bfloat16 or float16");
    expect_decline(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, BF16, 32768, &q, "registers");
    expect_decline(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, BF16, 24, &g, "multiple of 16");
    expect_decline(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_LAYER_NORM, BF16, 64, &g, "not a Bias");
    expect_decline(TX_FUSION_BWD_ADD_NORM, TX_TE_LAYER_NORM, BF16, 64, &g, "not a hand-off");
    expect_decline(TX_FUSION_BWD_ACT_BIAS, TX_TE_BIAS, BF16, 64, &g, "GELU, QGELU, ReLU, SReLU or SiLU");
}

/* in_dt -> dt through accepts, with the GELU attributes' defaults. */
static teexec_status *acc(tx_fusion_id f, tx_te_op_id op, teexec_dtype in_dt, teexec_dtype dt,
                          size_t cols, const tx_cuda_operand_q *q)
{
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(op), attrs);
    return tx_cuda_handoff_accepts(f, op, attrs, in_dt, dt, cols, q);
}

static void expect_no(teexec_status *st, const char *needle)
{
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    if (!strstr(teexec_status_message(st), needle))
        fail_msg("\"%s\" lacks \"%s\"", teexec_status_message(st), needle);
    teexec_status_destroy(st);
}

/* Every activation the planner's ForwardActivationQuantize covers
 * (fuse_catalog.c is_plain_activation) is accepted in each dtype; the
 * scaled ones and mixed dtypes are declined. */
static void accepts_activations(void **state)
{
    (void)state;
    tx_cuda_operand_q q = fp8(TEEXEC_DTYPE_FLOAT8E4M3FN);
    const tx_te_op_id acts[] = {TX_TE_GELU,   TX_TE_QGELU,  TX_TE_RELU,   TX_TE_SRELU,
                                TX_TE_SILU,   TX_TE_GLU,    TX_TE_GEGLU,  TX_TE_QGEGLU,
                                TX_TE_REGLU,  TX_TE_SREGLU, TX_TE_SWIGLU, TX_TE_CLAMPED_SWIGLU};
    const teexec_dtype dts[] = {BF16, F16, F32};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        for (size_t k = 0; k < 3; k++) {
            teexec_status *st = acc(TX_FUSION_FWD_ACT_QUANTIZE, acts[i], dts[k], dts[k], 1024, &q);
            if (st) fail_msg("activation %d dtype %d: %s", (int)acts[i], (int)dts[k],
                             teexec_status_message(st));
        }
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SCALED_SRELU, BF16, BF16, 1024, &q), "unscaled");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SWIGLU, BF16, F32, 1024, &q), "bfloat16 -> float)");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, F16, BF16, 1024, &q), "float16 -> bfloat16");
    expect_no(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_SWIGLU, BF16, BF16, 1000, &q), "multiple of 16");
    /* no attributes: ClampedSwiGLU's limit is unknown */
    expect_no(tx_cuda_handoff_accepts(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_CLAMPED_SWIGLU, NULL, BF16,
                                      BF16, 1024, &q), "unscaled");
}

/* float16 through every hand-off; the norm's mixed pairs are bf16 <-> fp32
 * only. */
static void accepts_fp16(void **state)
{
    (void)state;
    tx_cuda_operand_q q = fp8(TEEXEC_DTYPE_FLOAT8E4M3FN), g = fp8(TEEXEC_DTYPE_FLOAT8E5M2);
    assert_null(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, F16, F16, 4096, &q));
    assert_null(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, F16, F16, 4096, &q));
    assert_null(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_RMS_NORM, BF16, F32, 4096, &q));
    assert_null(acc(TX_FUSION_FWD_ACT_QUANTIZE, TX_TE_GELU, F16, F16, 4096, &q));
    assert_null(acc(TX_FUSION_BWD_BIAS_QUANTIZE, TX_TE_BIAS, F16, F16, 4096, &g));
    assert_null(acc(TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, F16, F16, 4096, &g));
    expect_no(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, F16, F32, 4096, &q),
              "bfloat16 <-> float32");
    expect_no(acc(TX_FUSION_FWD_NORM_QUANTIZE, TX_TE_LAYER_NORM, BF16, F16, 4096, &q),
              "bfloat16 -> float16");
}

/* BackwardActivationBias's quantize: the non-gated activations after the
 * Bias, x and dx of one dtype, FP8 per-tensor only. */
static void accepts_act_bias(void **state)
{
    (void)state;
    tx_cuda_operand_q g = fp8(TEEXEC_DTYPE_FLOAT8E5M2);
    const tx_te_op_id ok[] = {TX_TE_GELU, TX_TE_QGELU, TX_TE_RELU, TX_TE_SRELU, TX_TE_SILU};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        teexec_status *st = acc(TX_FUSION_BWD_ACT_BIAS, ok[i], BF16, BF16, 4096, &g);
        if (st) fail_msg("op %d: %s", (int)ok[i], teexec_status_message(st));
    }
    expect_no(acc(TX_FUSION_BWD_ACT_BIAS, TX_TE_SWIGLU, BF16, BF16, 4096, &g), "after the Bias");
    expect_no(acc(TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, F32, BF16, 4096, &g), "(here float -> bfloat16)");
    tx_cuda_operand_q blk = g, mx = g, nv = g;
    blk.cfg.kind = TX_QKIND_FP8_BLOCK;
    mx.cfg.kind = TX_QKIND_MXFP8;
    nv.cfg.kind = TX_QKIND_NVFP4;
    expect_no(acc(TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, BF16, BF16, 4096, &blk), "fp8-block");
    expect_no(acc(TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, BF16, BF16, 4096, &mx), "MXFP8");
    expect_no(acc(TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, BF16, BF16, 4096, &nv), "NVFP4");
}

/* Which family prepares BackwardActivationBias: the hand-off family only
 * when the Bias is bound to a Linear whose grad_output is handed off (then
 * it declines with a reason rather than let the unquantized kernel leave
 * the Linear's region empty); otherwise it steps aside (impl NULL, no
 * status) for te_cuda_basic_fused.c. */
static void act_bias_family(void **state)
{
    (void)state;
    enum { T = 128, K = 64, N = 256 };
    int64_t xd[2] = {T, K}, wd[2] = {N, K}, yd[2] = {T, N}, bd[1] = {N};
    tx_tensor x = {0}, w = {0}, y = {0}, b = {0}, h = {0};
    assert_null(tx_tensor_alloc(&x, BF16, 2, xd));
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
    q.x = fp8(TEEXEC_DTYPE_FLOAT8E4M3FN);
    q.w = fp8(TEEXEC_DTYPE_FLOAT8E4M3FN);
    q.dy = fp8(TEEXEC_DTYPE_FLOAT8E5M2);
    tx_cuda_te_desc ld = {.op = TX_TE_LINEAR, .name = "fc1", .attrs = lattrs, .input = &x,
                          .params = wp, .n_params = 1, .output = &y, .training = true,
                          .needs = TX_TE_FOR_DX | TX_TE_FOR_DPARAMS, .quant = &q, .sm = 90};
    tx_cuda_te_node *own = NULL, *handed = NULL;
    assert_null(tx_cuda_te_prepare(&ld, &own));
    q.dy.handed_off = true;
    assert_null(tx_cuda_te_prepare(&ld, &handed));
    void *state_ptr = NULL;
    tx_cuda_te_desc bdesc = {.op = TX_TE_BIAS, .name = "bias", .attrs = battrs, .input = &y,
                             .params = bp, .n_params = 1, .output = &h, .training = true,
                             .needs = TX_TE_FOR_ALL, .sm = 90};
    tx_cuda_te_desc gdesc = {.op = TX_TE_GELU, .name = "gelu", .attrs = gattrs, .input = &h,
                             .output = &h, .training = true, .needs = TX_TE_FOR_ALL, .sm = 90};
    const tx_cuda_te_desc *descs[2] = {&bdesc, &gdesc};
    const tx_cuda_fused_impl *impl = NULL;
    void *priv = NULL;
    size_t scratch = 0;
    /* unbound, and bound to a Linear that quantizes dy itself: not ours */
    assert_null(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_ACT_BIAS, true, descs, NULL, 2, &impl,
                                              &priv, &scratch));
    assert_null(impl);
    bdesc.handoff_to = own;
    bdesc.handoff_state = &state_ptr;
    assert_null(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_ACT_BIAS, true, descs, NULL, 2, &impl,
                                              &priv, &scratch));
    assert_null(impl);
    /* handed off: ours, with dx + the chunk workspace as scratch */
    bdesc.handoff_to = handed;
    assert_null(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_ACT_BIAS, true, descs, NULL, 2, &impl,
                                              &priv, &scratch));
    assert_non_null(impl);
    assert_non_null(impl->backward);
    assert_null(impl->forward);
    size_t ws = (size_t)(T + 63) / 64 * N * sizeof(float);
    assert_true(scratch >= h.nbytes + ws);
    assert_true(scratch < h.nbytes + ws + 512);
    impl->free_priv(priv);
    /* handed off but a gated activation: declined with the reason */
    gdesc.op = TX_TE_SWIGLU;
    teexec_status *st = tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_ACT_BIAS, true, descs, NULL,
                                                      2, &impl, &priv, &scratch);
    expect_no(st, "after the Bias");
    assert_null(impl);
    /* handed off, but x's dtype differs from the grad's */
    gdesc.op = TX_TE_GELU;
    tx_tensor hf = {0};
    assert_null(tx_tensor_alloc(&hf, F32, 2, yd));
    gdesc.input = &hf;
    expect_no(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_ACT_BIAS, true, descs, NULL, 2, &impl,
                                            &priv, &scratch),
              "differ in dtype");
    /* a forward call of a backward fusion */
    gdesc.input = &h;
    expect_no(tx_cuda_fused_handoff_prepare(TX_FUSION_BWD_ACT_BIAS, false, descs, NULL, 2, &impl,
                                            &priv, &scratch),
              "backward");
    tx_cuda_te_node_free(own);
    tx_cuda_te_node_free(handed);
    tx_tensor *ts[] = {&x, &w, &y, &b, &h, &hf};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tx_tensor_release(ts[i]);
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
    /* a handed-off dy has a region of its own (placed by the executor for
     * the backward steps that need it), not a part of the state */
    assert_int_equal(hdy.st_dy, 0);
    assert_int_equal(tx_cuda_linear_dy_region_bytes(&hdy), hdy.dy_region_bytes);
    assert_true(hdy.dy_region_bytes >= hdy.ody.bytes);
    assert_true(hdy.dy_region_bytes % 256 == 0);
    assert_int_equal(hdy.state_bytes, plain.state_bytes);
    assert_int_equal(tx_cuda_linear_dy_region_bytes(&plain), 0);
    assert_int_equal(hdy.sc_gemm, 0);
    assert_true(hdy.scratch_bytes < plain.scratch_bytes);
    tx_tensor_release(&x);
    tx_tensor_release(&w);
    tx_tensor_release(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts),          cmocka_unit_test(accepts_activations),
        cmocka_unit_test(accepts_fp16),     cmocka_unit_test(accepts_act_bias),
        cmocka_unit_test(act_bias_family),  cmocka_unit_test(layout)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
