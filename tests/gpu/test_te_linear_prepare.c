/* Unit test (no GPU needed): what the CUDA Linear and the Linear fusions
 * decide at prepare time (exec/cuda/te_cuda_linear.c,
 * te_cuda_linear_fused.c): the refusals with their reasons, the fusions
 * that are not the Linear family's, and the state / scratch layout by
 * recipe and by which grads are needed. Prepare runs no CUDA call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "exec/cuda/te_cuda_linear.h"

#define F32 TEEXEC_DTYPE_FLOAT
#define BF16 TEEXEC_DTYPE_BFLOAT16

typedef struct shapes {
    tx_tensor x, w, y, b;
} shapes;

static void mk(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims)
{
    assert_null(tx_tensor_alloc(t, dt, rank, dims));
}

static void shapes_init(shapes *s, teexec_dtype xdt, teexec_dtype wdt)
{
    int64_t xd[3] = {2, 32, 128}, wd[2] = {96, 128}, yd[3] = {2, 32, 96}, bd[1] = {96};
    mk(&s->x, xdt, 3, xd);
    mk(&s->w, wdt, 2, wd);
    mk(&s->y, xdt, 3, yd);
    mk(&s->b, xdt, 1, bd);
}

static void shapes_free(shapes *s)
{
    tx_tensor_release(&s->x);
    tx_tensor_release(&s->w);
    tx_tensor_release(&s->y);
    tx_tensor_release(&s->b);
}

static tx_cuda_te_desc linear_desc(const shapes *s, const tx_tensor *const *par, unsigned needs)
{
    tx_cuda_te_desc d;
    memset(&d, 0, sizeof d);
    d.op = TX_TE_LINEAR;
    d.name = "fc1";
    d.input = &s->x;
    d.params = par;
    d.n_params = 1;
    d.output = &s->y;
    d.training = needs != 0;
    d.needs = needs;
    d.sm = 90;
    return d;
}

static void expect_refusal(teexec_status *st, const char *needle)
{
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    if (!strstr(teexec_status_message(st), needle))
        fail_msg("message \"%s\" lacks \"%s\"", teexec_status_message(st), needle);
    teexec_status_destroy(st);
}

static tx_cuda_operand_q fp8_current(teexec_dtype fmt)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = true;
    q.native = true;
    q.cfg.kind = TX_QKIND_FP8_TENSOR;
    q.cfg.fmt = fmt;
    return q;
}

static void test_none_layout(void **state)
{
    (void)state;
    shapes s;
    shapes_init(&s, F32, F32);
    const tx_tensor *par[1] = {&s.w};
    tx_cuda_te_desc d = linear_desc(&s, par, TX_TE_FOR_ALL);
    const tx_cuda_te_impl *impl = tx_cuda_te_linear_impl(TX_TE_LINEAR);
    assert_non_null(impl);
    assert_null(tx_cuda_te_linear_impl(TX_TE_BIAS));
    void *priv = NULL;
    size_t sb = 1, scb = 1;
    assert_null(impl->prepare(&d, &priv, &sb, &scb));
    assert_int_equal(sb, 0);
    assert_int_equal(scb, 0);
    const tx_cuda_linear *l = priv;
    assert_int_equal(l->T, 64);
    assert_int_equal(l->N, 96);
    assert_int_equal(l->K, 128);
    impl->free_priv(priv);
    shapes_free(&s);
}

static void test_quantized_layout(void **state)
{
    (void)state;
    shapes s;
    shapes_init(&s, BF16, BF16);
    const tx_tensor *par[1] = {&s.w};
    tx_cuda_linear_quant q = {fp8_current(TEEXEC_DTYPE_FLOAT8E4M3FN),
                              fp8_current(TEEXEC_DTYPE_FLOAT8E4M3FN),
                              fp8_current(TEEXEC_DTYPE_FLOAT8E5M2)};
    tx_cuda_linear train, infer;
    tx_cuda_te_desc d = linear_desc(&s, par, TX_TE_FOR_ALL);
    d.quant = &q;
    assert_null(tx_cuda_linear_init(&train, &d));
    d = linear_desc(&s, par, 0);
    d.quant = &q;
    assert_null(tx_cuda_linear_init(&infer, &d));
    /* training keeps both usages of x and w and quantizes dy both ways */
    assert_int_equal(train.ox.usage, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    assert_int_equal(train.ow.usage, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    assert_int_equal(train.ody.usage, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    assert_true(train.ody.q.on);
    assert_true(train.st_w >= train.ox.bytes && train.st_w % 256 == 0);
    assert_true(train.state_bytes >= train.st_w + train.ow.bytes);
    assert_true(train.scratch_bytes >= train.ody.bytes);
    /* inference: rowwise only, no grad operand, a smaller state */
    assert_int_equal(infer.ox.usage, TX_QUSAGE_ROWWISE);
    assert_int_equal(infer.ow.usage, TX_QUSAGE_ROWWISE);
    assert_false(infer.ody.q.on);
    assert_true(infer.state_bytes < train.state_bytes);
    /* a frozen weight: x needs no columnwise copy, dy no columnwise usage */
    tx_cuda_linear frozen;
    d = linear_desc(&s, par, TX_TE_FOR_DX);
    d.quant = &q;
    assert_null(tx_cuda_linear_init(&frozen, &d));
    assert_int_equal(frozen.ox.usage, TX_QUSAGE_ROWWISE);
    assert_int_equal(frozen.ody.usage, TX_QUSAGE_ROWWISE);
    shapes_free(&s);
}

static void test_refusals(void **state)
{
    (void)state;
    shapes s;
    shapes_init(&s, TEEXEC_DTYPE_DOUBLE, TEEXEC_DTYPE_DOUBLE);
    const tx_tensor *par[1] = {&s.w};
    tx_cuda_linear l;
    tx_cuda_te_desc d = linear_desc(&s, par, TX_TE_FOR_ALL);
    expect_refusal(tx_cuda_linear_init(&l, &d), "fp64");
    shapes_free(&s);
    /* recipe none with two dtypes: one cuBLASLt GEMM cannot mix them */
    shapes_init(&s, BF16, F32);
    par[0] = &s.w;
    d = linear_desc(&s, par, TX_TE_FOR_ALL);
    expect_refusal(tx_cuda_linear_init(&l, &d), "differ in dtype");
    shapes_free(&s);
    /* the quantizers read fp32 / bf16 only */
    shapes_init(&s, TEEXEC_DTYPE_FLOAT16, TEEXEC_DTYPE_FLOAT16);
    par[0] = &s.w;
    d = linear_desc(&s, par, TX_TE_FOR_ALL);
    tx_cuda_linear_quant q = {fp8_current(TEEXEC_DTYPE_FLOAT8E4M3FN),
                              fp8_current(TEEXEC_DTYPE_FLOAT8E4M3FN),
                              fp8_current(TEEXEC_DTYPE_FLOAT8E4M3FN)};
    d.quant = &q;
    expect_refusal(tx_cuda_linear_init(&l, &d), "float16");
    d.quant = NULL; /* recipe none runs fp16 */
    assert_null(tx_cuda_linear_init(&l, &d));
    shapes_free(&s);
    /* GroupedLinear (te_cuda_grouped.c; test_te_grouped_prepare.c): a desc
     * without its num_groups attribute is refused */
    const tx_cuda_te_impl *g = tx_cuda_te_linear_impl(TX_TE_GROUPED_LINEAR);
    assert_non_null(g);
    void *priv = NULL;
    size_t sb, scb;
    shapes_init(&s, BF16, BF16);
    par[0] = &s.w;
    d = linear_desc(&s, par, TX_TE_FOR_ALL);
    d.op = TX_TE_GROUPED_LINEAR;
    expect_refusal(g->prepare(&d, &priv, &sb, &scb), "groups");
    assert_null(priv);
    shapes_free(&s);
}

static void test_fusion_prepare(void **state)
{
    (void)state;
    shapes s;
    shapes_init(&s, BF16, BF16);
    const tx_tensor *par[1] = {&s.w}, *pb[1] = {&s.b}, *ext[1] = {&s.y};
    tx_cuda_te_desc dl = linear_desc(&s, par, TX_TE_FOR_ALL);
    tx_cuda_te_desc db = dl, dg = dl, da = dl, dsc = dl;
    db.op = TX_TE_BIAS;
    db.input = &s.y;
    db.params = pb;
    dg.op = TX_TE_GELU;
    dg.input = &s.y;
    dg.n_params = 0;
    dg.params = NULL;
    da.op = TX_TE_ADD_EXTRA_INPUT;
    da.input = &s.y;
    da.n_params = 0;
    da.params = NULL;
    da.extra_inputs = ext;
    da.n_extra_inputs = 1;
    tx_te_attr_value sattr[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(tx_te_schema(TX_TE_CONSTANT_SCALE), sattr);
    dsc.op = TX_TE_CONSTANT_SCALE;
    dsc.input = &s.y;
    dsc.n_params = 0;
    dsc.params = NULL;
    dsc.attrs = sattr;
    const tx_cuda_fused_impl *impl = NULL;
    void *priv = NULL;
    size_t scratch = 0;
    /* not the Linear family's: no impl, no error */
    const tx_cuda_te_desc *two[2] = {&db, &dg};
    assert_null(tx_cuda_fused_linear_prepare(TX_FUSION_BWD_ACT_BIAS, true, two, NULL, 2, &impl,
                                             &priv, &scratch));
    assert_null(impl);
    /* Linear, Bias, GELU: accepted, forward only */
    const tx_cuda_te_desc *lbg[3] = {&dl, &db, &dg};
    assert_null(tx_cuda_fused_linear_prepare(TX_FUSION_FWD_LINEAR_BIAS_ACT, false, lbg, NULL, 3,
                                             &impl, &priv, &scratch));
    assert_non_null(impl);
    assert_non_null(impl->forward);
    assert_null(impl->backward);
    impl->free_priv(priv);
    expect_refusal(tx_cuda_fused_linear_prepare(TX_FUSION_FWD_LINEAR_BIAS_ACT, true, lbg, NULL,
                                                3, &impl, &priv, &scratch),
                   "no backward kernel");
    /* wrong pattern */
    const tx_cuda_te_desc *lg[2] = {&dl, &dg};
    expect_refusal(tx_cuda_fused_linear_prepare(TX_FUSION_FWD_LINEAR_BIAS_ACT, false, lg, NULL, 2,
                                                &impl, &priv, &scratch),
                   "pattern is Linear, Bias");
    /* ConstantScale 0 is no alpha */
    sattr[TX_TE_A_SCALE].f = 0.0;
    const tx_cuda_te_desc *lsa[3] = {&dl, &dsc, &da};
    expect_refusal(tx_cuda_fused_linear_prepare(TX_FUSION_FWD_LINEAR_SCALE_ADD, false, lsa, NULL,
                                                3, &impl, &priv, &scratch),
                   "scale of 0");
    sattr[TX_TE_A_SCALE].f = 0.5;
    assert_null(tx_cuda_fused_linear_prepare(TX_FUSION_FWD_LINEAR_SCALE_ADD, false, lsa, NULL, 3,
                                             &impl, &priv, &scratch));
    impl->free_priv(priv);
    /* BWD_LINEAR_SCALE under a quantized dy runs unfused */
    tx_cuda_linear_quant q = {fp8_current(TEEXEC_DTYPE_FLOAT8E4M3FN),
                              fp8_current(TEEXEC_DTYPE_FLOAT8E4M3FN),
                              fp8_current(TEEXEC_DTYPE_FLOAT8E4M3FN)};
    tx_cuda_te_desc dq = dl;
    dq.quant = &q;
    const tx_cuda_te_desc *ls[2] = {&dq, &dsc};
    expect_refusal(tx_cuda_fused_linear_prepare(TX_FUSION_BWD_LINEAR_SCALE, true, ls, NULL, 2,
                                                &impl, &priv, &scratch),
                   "s·dy");
    ls[0] = &dl;
    assert_null(tx_cuda_fused_linear_prepare(TX_FUSION_BWD_LINEAR_SCALE, true, ls, NULL, 2, &impl,
                                             &priv, &scratch));
    assert_null(impl->forward);
    assert_non_null(impl->backward);
    impl->free_priv(priv);
    /* the fused Linear's scratch is its node's */
    tx_cuda_linear ql;
    assert_null(tx_cuda_linear_init(&ql, &dq));
    const tx_cuda_te_desc *lba[3] = {&dq, &db, &da};
    assert_null(tx_cuda_fused_linear_prepare(TX_FUSION_FWD_LINEAR_BIAS_ADD, false, lba, NULL, 3,
                                             &impl, &priv, &scratch));
    assert_int_equal(scratch, ql.scratch_bytes);
    impl->free_priv(priv);
    shapes_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_layout),
        cmocka_unit_test(test_quantized_layout),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_fusion_prepare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
