/* Unit test (host only, no GPU needed): preparing te.ops GroupedLinear for
 * the GPU (exec/cuda/te_cuda_grouped.c) - what it accepts and refuses, and
 * the state / scratch it asks for under recipe none, fp8-current (training
 * and inference), fp8-block with and without power-of-two scales and mxfp8
 * (the dequantized operands in bf16 where their values are exact in bf16,
 * FP32 for fp8-block without power-of-two scales); a forward whose tensors do not fit the prepared
 * node is refused before anything is queued. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "exec/cuda/te_cuda.h"
#include "teexec/teexec.h"

enum { G = 4, NP = 2 * G };
/* dequantized elements of the fixture: x, every weight, dy twice */
#define DQ ((size_t)(64 * 128 + G * 96 * 128 + 2 * 64 * 96))

typedef struct fix {
    tx_tensor x, y, ss, p[NP];
    const tx_tensor *par[NP], *ext[1];
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
} fix;

static void mk(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims)
{
    memset(t, 0, sizeof *t);
    assert_null(tx_tensor_alloc(t, dt, rank, dims));
}

/* x [2, 32, 128], W_g [96, 128], bias_g [96], split_sizes [4] */
static void fix_init(fix *f, teexec_dtype dt)
{
    int64_t xd[3] = {2, 32, 128}, yd[3] = {2, 32, 96}, wd[2] = {96, 128}, bd[1] = {96}, sd[1] = {G};
    mk(&f->x, dt, 3, xd);
    mk(&f->y, dt, 3, yd);
    mk(&f->ss, TEEXEC_DTYPE_INT64, 1, sd);
    for (int i = 0; i < NP; i++) {
        if (i < G) mk(&f->p[i], dt, 2, wd);
        else mk(&f->p[i], dt, 1, bd);
        f->par[i] = &f->p[i];
    }
    f->ext[0] = &f->ss;
    tx_te_attr_defaults(tx_te_schema(TX_TE_GROUPED_LINEAR), f->attrs);
    f->attrs[TX_TE_A_GL_NUM_GROUPS].i = G;
    f->attrs[TX_TE_A_GL_BIAS].i = 1;
}

static void fix_free(fix *f)
{
    tx_tensor_release(&f->x);
    tx_tensor_release(&f->y);
    tx_tensor_release(&f->ss);
    for (int i = 0; i < NP; i++) tx_tensor_release(&f->p[i]);
}

static tx_cuda_te_desc desc_of(fix *f)
{
    tx_cuda_te_desc d;
    memset(&d, 0, sizeof d);
    d.op = TX_TE_GROUPED_LINEAR;
    d.name = "experts";
    d.attrs = f->attrs;
    d.input = &f->x;
    d.extra_inputs = f->ext;
    d.n_extra_inputs = 1;
    d.params = f->par;
    d.n_params = NP;
    d.output = &f->y;
    d.training = true;
    d.needs = TX_TE_FOR_ALL;
    d.sm = 90;
    return d;
}

static const tx_cuda_te_impl *impl(void)
{
    const tx_cuda_te_impl *g = tx_cuda_te_linear_impl(TX_TE_GROUPED_LINEAR);
    assert_non_null(g);
    assert_non_null(g->prepare);
    assert_non_null(g->forward);
    assert_non_null(g->backward);
    assert_non_null(g->free_priv);
    return g;
}

static void expect_error(teexec_status *st, teexec_code code, const char *needle)
{
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), code);
    if (!strstr(teexec_status_message(st), needle))
        fail_msg("message \"%s\" lacks \"%s\"", teexec_status_message(st), needle);
    teexec_status_destroy(st);
}

static void prepare_ok(const tx_cuda_te_desc *d, size_t *state, size_t *scratch)
{
    void *priv = NULL;
    teexec_status *st = impl()->prepare(d, &priv, state, scratch);
    if (st) fail_msg("prepare: %s", teexec_status_message(st));
    assert_non_null(priv);
    impl()->free_priv(priv);
}

static tx_cuda_operand_q quant(tx_qkind kind)
{
    tx_cuda_operand_q q;
    memset(&q, 0, sizeof q);
    q.on = true;
    q.cfg.kind = kind;
    q.cfg.fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
    q.cfg.scale_layout = TX_SCALE_COMPACT;
    return q;
}

static void test_none(void **state)
{
    (void)state;
    fix f;
    fix_init(&f, TEEXEC_DTYPE_BFLOAT16);
    tx_cuda_te_desc d = desc_of(&f);
    size_t st = 1, sc = 1;
    prepare_ok(&d, &st, &sc);
    /* nothing quantized: nothing kept, no scratch */
    assert_int_equal(st, 0);
    assert_int_equal(sc, 0);
    fix_free(&f);
}

static void test_fp8_current(void **state)
{
    (void)state;
    fix f;
    fix_init(&f, TEEXEC_DTYPE_BFLOAT16);
    tx_cuda_linear_quant q = {quant(TX_QKIND_FP8_TENSOR), quant(TX_QKIND_FP8_TENSOR),
                              quant(TX_QKIND_FP8_TENSOR)};
    tx_cuda_te_desc d = desc_of(&f);
    d.quant = &q;
    size_t st, sc;
    prepare_ok(&d, &st, &sc);
    /* x (64 x 128) and 4 weights (96 x 128), each rowwise + columnwise
     * bytes at least; the dequantized operands (x, the weights, dy rowwise
     * and columnwise) in bf16 in the scratch, the scale in the GEMM alpha:
     * 2 bytes an element, and dy's FP8 bytes (1 a usage) beside them, well
     * under the 4 bytes an element of FP32 operands */
    assert_true(st >= 2 * (64 * 128 + (size_t)G * 96 * 128));
    assert_true(sc >= 2 * DQ + 2 * 64 * 96);
    assert_true(sc < 4 * DQ);
    /* inference keeps rowwise copies only */
    d.training = false;
    d.needs = 0;
    size_t st_inf, sc_inf;
    prepare_ok(&d, &st_inf, &sc_inf);
    assert_true(st_inf < st);
    assert_true(st_inf >= 64 * 128 + (size_t)G * 96 * 128);
    assert_true(sc_inf < sc);
    fix_free(&f);
}

/* fp8-block: power-of-two scales give bf16 operands (exact), any other
 * scales FP32 ones (per-block scales cannot be factored out of the sum). */
static void test_fp8_block(void **state)
{
    (void)state;
    fix f;
    fix_init(&f, TEEXEC_DTYPE_BFLOAT16);
    tx_cuda_linear_quant q = {quant(TX_QKIND_FP8_BLOCK), quant(TX_QKIND_FP8_BLOCK),
                              quant(TX_QKIND_FP8_BLOCK)};
    q.w.cfg.block_2d = true;
    tx_cuda_te_desc d = desc_of(&f);
    d.quant = &q;
    size_t st, sc, st2, sc2;
    prepare_ok(&d, &st, &sc);
    assert_true(sc >= 4 * DQ);
    q.x.cfg.power_2_scale = q.w.cfg.power_2_scale = q.dy.cfg.power_2_scale = true;
    prepare_ok(&d, &st2, &sc2);
    assert_int_equal(st2, st);
    assert_true(sc2 >= 2 * DQ && sc2 < 4 * DQ);
    assert_int_equal(sc - sc2, 2 * DQ); /* every region a multiple of 256 here */
    fix_free(&f);
}

static void test_refusals(void **state)
{
    (void)state;
    const tx_cuda_te_impl *g = impl();
    void *priv = NULL;
    size_t st, sc;
    fix f;
    fix_init(&f, TEEXEC_DTYPE_BFLOAT16);
    tx_cuda_te_desc d = desc_of(&f);
    /* no split sizes, or not int64 [G] */
    d.n_extra_inputs = 0;
    expect_error(g->prepare(&d, &priv, &st, &sc), TEEXEC_ERR_INVALID_ARGUMENT, "split_sizes");
    assert_null(priv);
    d = desc_of(&f);
    f.ss.dtype = TEEXEC_DTYPE_INT32;
    expect_error(g->prepare(&d, &priv, &st, &sc), TEEXEC_ERR_INVALID_ARGUMENT, "split_sizes");
    f.ss.dtype = TEEXEC_DTYPE_INT64;
    f.ss.dims[0] = G + 1;
    expect_error(g->prepare(&d, &priv, &st, &sc), TEEXEC_ERR_INVALID_ARGUMENT, "split_sizes");
    f.ss.dims[0] = G;
    /* more groups than one launch carries */
    f.attrs[TX_TE_A_GL_NUM_GROUPS].i = 65;
    expect_error(g->prepare(&d, &priv, &st, &sc), TEEXEC_ERR_UNSUPPORTED, "65");
    f.attrs[TX_TE_A_GL_NUM_GROUPS].i = G;
    /* a weight of the wrong shape */
    f.p[2].dims[1] = 64;
    expect_error(g->prepare(&d, &priv, &st, &sc), TEEXEC_ERR_INVALID_ARGUMENT, "parameter 2");
    f.p[2].dims[1] = 128;
    /* mxfp8 on the GPU needs multiples of 32 */
    tx_cuda_linear_quant q = {quant(TX_QKIND_MXFP8), quant(TX_QKIND_MXFP8), quant(TX_QKIND_MXFP8)};
    d.quant = &q;
    prepare_ok(&d, &st, &sc);
    f.p[0].dims[0] = f.p[1].dims[0] = f.p[2].dims[0] = f.p[3].dims[0] = 80;
    f.y.dims[2] = 80;
    f.y.numel = 2 * 32 * 80;
    for (int i = G; i < NP; i++) f.p[i].dims[0] = 80;
    expect_error(g->prepare(&d, &priv, &st, &sc), TEEXEC_ERR_UNSUPPORTED, "32");
    fix_free(&f);
    /* fp64 is the CPU's; fp16 cannot be quantized on the GPU */
    fix_init(&f, TEEXEC_DTYPE_DOUBLE);
    d = desc_of(&f);
    expect_error(g->prepare(&d, &priv, &st, &sc), TEEXEC_ERR_UNSUPPORTED, "fp64");
    fix_free(&f);
    fix_init(&f, TEEXEC_DTYPE_FLOAT16);
    d = desc_of(&f);
    prepare_ok(&d, &st, &sc); /* recipe none runs fp16 */
    tx_cuda_linear_quant q8 = {quant(TX_QKIND_FP8_TENSOR), quant(TX_QKIND_FP8_TENSOR),
                               quant(TX_QKIND_FP8_TENSOR)};
    d.quant = &q8;
    expect_error(g->prepare(&d, &priv, &st, &sc), TEEXEC_ERR_UNSUPPORTED, "float16");
    fix_free(&f);
}

/* Calls whose tensors do not fit the node fail before any launch (the
 * tensors here are host memory: a launch would fault). */
static void test_call_checks(void **state)
{
    (void)state;
    const tx_cuda_te_impl *g = impl();
    fix f;
    fix_init(&f, TEEXEC_DTYPE_FLOAT);
    tx_cuda_te_desc d = desc_of(&f);
    void *priv = NULL;
    size_t st, sc;
    assert_null(g->prepare(&d, &priv, &st, &sc));
    tx_cuda_env env;
    memset(&env, 0, sizeof env);
    tx_te_fwd_args a;
    memset(&a, 0, sizeof a);
    a.op = TX_TE_GROUPED_LINEAR;
    a.attrs = f.attrs;
    a.input = &f.x;
    a.extra_inputs = f.ext;
    a.n_extra_inputs = 1;
    a.params = f.par;
    a.n_params = NP;
    a.output = &f.y;
    a.training = true;
    /* y of another size */
    tx_tensor y2 = f.y;
    y2.numel -= 96;
    a.output = &y2;
    expect_error(g->forward(priv, &a, NULL, NULL, &env), TEEXEC_ERR_INVALID_ARGUMENT, "y");
    a.output = &f.y;
    /* split sizes of another dtype */
    tx_tensor ss2 = f.ss;
    ss2.dtype = TEEXEC_DTYPE_INT32;
    const tx_tensor *ext2[1] = {&ss2};
    a.extra_inputs = ext2;
    expect_error(g->forward(priv, &a, NULL, NULL, &env), TEEXEC_ERR_INVALID_ARGUMENT, "split_sizes");
    /* backward: wrong saved count */
    tx_te_bwd_args b;
    memset(&b, 0, sizeof b);
    b.op = TX_TE_GROUPED_LINEAR;
    b.attrs = f.attrs;
    b.grad_output = &f.y;
    const tx_tensor *saved[2] = {&f.ss, &f.x};
    b.saved = saved;
    b.n_saved = 2;
    b.grad_input = &f.x;
    expect_error(g->backward(priv, &b, NULL, NULL, &env), TEEXEC_ERR_INVALID_ARGUMENT, "saved");
    g->free_priv(priv);
    fix_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_fp8_current),
        cmocka_unit_test(test_fp8_block),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_call_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
