/* Unit test (host only, no GPU needed): preparing the CUDA te.ops basic ops
 * (exec/cuda/te_cuda_basic.c) and their fusions (te_cuda_basic_fused.c):
 * which ops the table takes, the refusals with their messages (float64,
 * bad shapes, bad attributes), the scratch each node asks for, and the
 * fusions answered, declined or left to another family. Prepare touches no
 * device, so this runs under ASan/UBSan with the unit suite. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/cuda/te_cuda.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/norm.h"

#include <string.h>

static tx_tensor shaped(teexec_dtype dt, int rank, const int64_t *dims)
{
    tx_tensor t;
    memset(&t, 0, sizeof t);
    assert_null(tx_tensor_wrap(&t, dt, rank, dims, NULL));
    return t;
}

typedef struct prep {
    teexec_status *st;
    size_t state, scratch;
} prep;

static prep prepare(const tx_cuda_te_desc *d)
{
    prep r = {NULL, 7, 7};
    const tx_cuda_te_impl *impl = tx_cuda_te_basic_impl(d->op);
    assert_non_null(impl);
    void *priv = NULL;
    r.st = impl->prepare(d, &priv, &r.state, &r.scratch);
    if (r.st) assert_null(priv);
    else impl->free_priv(priv);
    return r;
}

static void expect_error(const tx_cuda_te_desc *d, teexec_code code, const char *part)
{
    prep r = prepare(d);
    assert_non_null(r.st);
    assert_int_equal(teexec_status_code(r.st), code);
    const char *msg = teexec_status_message(r.st);
    if (!strstr(msg, part)) fail_msg("message \"%s\" lacks \"%s\"", msg, part);
    teexec_status_destroy(r.st);
}

static void defaults(tx_te_op_id op, tx_te_attr_value *attrs)
{
    tx_te_attr_defaults(tx_te_schema(op), attrs);
}

static void table_covers_basic_ops_only(void **state)
{
    (void)state;
    tx_te_op_id yes[] = {TX_TE_IDENTITY, TX_TE_RESHAPE, TX_TE_QUANTIZE, TX_TE_BIAS,
                         TX_TE_CONSTANT_SCALE, TX_TE_ADD_EXTRA_INPUT, TX_TE_MAKE_EXTRA_OUTPUT,
                         TX_TE_LAYER_NORM, TX_TE_RMS_NORM, TX_TE_GELU, TX_TE_SCALED_SRELU,
                         TX_TE_CLAMPED_SWIGLU, TX_TE_DROPOUT, TX_TE_ROTARY_EMBEDDING,
                         TX_TE_EMBEDDING};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_non_null(tx_cuda_te_basic_impl(yes[i]));
    tx_te_op_id no[] = {TX_TE_LINEAR, TX_TE_GROUPED_LINEAR, TX_TE_DOT_PRODUCT_ATTENTION,
                        TX_TE_L2_NORMALIZATION, TX_TE_ALL_GATHER, TX_TE_OP_COUNT};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) assert_null(tx_cuda_te_basic_impl(no[i]));
}

static void refuses_float64_and_non_floats(void **state)
{
    (void)state;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    defaults(TX_TE_SILU, attrs);
    int64_t d[2] = {4, 8};
    tx_tensor x = shaped(TEEXEC_DTYPE_DOUBLE, 2, d), y = shaped(TEEXEC_DTYPE_FLOAT, 2, d);
    tx_cuda_te_desc desc = {.op = TX_TE_SILU, .name = "act1", .attrs = attrs, .input = &x,
                            .output = &y};
    expect_error(&desc, TEEXEC_ERR_UNSUPPORTED, "op act1 (SiLU): the input is float64");
    x = shaped(TEEXEC_DTYPE_INT32, 2, d);
    expect_error(&desc, TEEXEC_ERR_UNSUPPORTED, "int32");
    /* a float64 parameter is refused too */
    defaults(TX_TE_BIAS, attrs);
    x = shaped(TEEXEC_DTYPE_BFLOAT16, 2, d);
    tx_tensor b = shaped(TEEXEC_DTYPE_DOUBLE, 1, &d[1]);
    const tx_tensor *bp[1] = {&b};
    tx_cuda_te_desc bd = {.op = TX_TE_BIAS, .name = "b", .attrs = attrs, .input = &x,
                          .params = bp, .n_params = 1, .output = &x};
    expect_error(&bd, TEEXEC_ERR_UNSUPPORTED, "a parameter is float64");
}

static void refuses_bad_shapes_and_attributes(void **state)
{
    (void)state;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    defaults(TX_TE_SWIGLU, attrs);
    int64_t odd[2] = {4, 7}, half[2] = {4, 3};
    tx_tensor x = shaped(TEEXEC_DTYPE_FLOAT, 2, odd), y = shaped(TEEXEC_DTYPE_FLOAT, 2, half);
    tx_cuda_te_desc desc = {.op = TX_TE_SWIGLU, .name = "s", .attrs = attrs, .input = &x,
                            .output = &y};
    expect_error(&desc, TEEXEC_ERR_INVALID_ARGUMENT, "must be even");

    defaults(TX_TE_DROPOUT, attrs);
    attrs[TX_TE_A_DROPOUT_P].f = 1.0;
    x = shaped(TEEXEC_DTYPE_FLOAT, 2, odd);
    desc = (tx_cuda_te_desc){.op = TX_TE_DROPOUT, .name = "d", .attrs = attrs, .input = &x,
                             .output = &x};
    expect_error(&desc, TEEXEC_ERR_INVALID_ARGUMENT, "p must be in [0, 1)");

    defaults(TX_TE_ROTARY_EMBEDDING, attrs);
    attrs[TX_TE_A_ROPE_DIM].i = 5;
    int64_t q[4] = {1, 4, 2, 8};
    tx_tensor r = shaped(TEEXEC_DTYPE_BFLOAT16, 4, q);
    const tx_tensor *none[1] = {NULL};
    desc = (tx_cuda_te_desc){.op = TX_TE_ROTARY_EMBEDDING, .name = "r", .attrs = attrs,
                             .input = &r, .extra_inputs = none, .n_extra_inputs = 1,
                             .output = &r};
    expect_error(&desc, TEEXEC_ERR_INVALID_ARGUMENT, "rotated width 5");

    defaults(TX_TE_BIAS, attrs);
    int64_t wrong = 5;
    tx_tensor b = shaped(TEEXEC_DTYPE_FLOAT, 1, &wrong);
    const tx_tensor *bp[1] = {&b};
    desc = (tx_cuda_te_desc){.op = TX_TE_BIAS, .name = "b", .attrs = attrs, .input = &x,
                             .params = bp, .n_params = 1, .output = &x};
    expect_error(&desc, TEEXEC_ERR_INVALID_ARGUMENT, "bias must be [N]");
}

static void scratch_sizes(void **state)
{
    (void)state;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    int64_t xd[3] = {3, 100, 96}, wd[1] = {96};
    tx_tensor x = shaped(TEEXEC_DTYPE_BFLOAT16, 3, xd), w = shaped(TEEXEC_DTYPE_FLOAT, 1, wd);
    const tx_tensor *p2[2] = {&w, &w};

    defaults(TX_TE_IDENTITY, attrs);
    tx_cuda_te_desc d = {.op = TX_TE_IDENTITY, .name = "i", .attrs = attrs, .input = &x,
                         .output = &x, .deterministic = true};
    prep r = prepare(&d);
    assert_null(r.st);
    assert_int_equal(r.state, 0);
    assert_int_equal(r.scratch, 0);

    defaults(TX_TE_LAYER_NORM, attrs);
    d = (tx_cuda_te_desc){.op = TX_TE_LAYER_NORM, .name = "ln", .attrs = attrs, .input = &x,
                          .params = p2, .n_params = 2, .output = &x, .training = true,
                          .deterministic = true};
    r = prepare(&d);
    assert_null(r.st);
    assert_int_equal(r.state, 0);
    assert_true(r.scratch >= tx_cuda_norm_bwd_workspace_floats(300, 96) * sizeof(float));

    defaults(TX_TE_BIAS, attrs);
    d = (tx_cuda_te_desc){.op = TX_TE_BIAS, .name = "b", .attrs = attrs, .input = &x,
                          .params = p2, .n_params = 1, .output = &x, .deterministic = true};
    r = prepare(&d);
    assert_null(r.st);
    assert_true(r.scratch >= tx_cuda_colsum_workspace_floats(300, 96) * sizeof(float));

    /* RoPE: the cos/sin table, plus an FP32 copy of bf16 freqs */
    defaults(TX_TE_ROTARY_EMBEDDING, attrs);
    int64_t q[4] = {2, 16, 4, 64}, fd[2] = {20, 32};
    tx_tensor rq = shaped(TEEXEC_DTYPE_BFLOAT16, 4, q), fr = shaped(TEEXEC_DTYPE_BFLOAT16, 2, fd);
    const tx_tensor *ex[1] = {NULL};
    d = (tx_cuda_te_desc){.op = TX_TE_ROTARY_EMBEDDING, .name = "r", .attrs = attrs,
                          .input = &rq, .extra_inputs = ex, .n_extra_inputs = 1, .output = &rq};
    r = prepare(&d);
    assert_null(r.st);
    assert_true(r.scratch >= 2 * 16 * 64 * sizeof(float));
    size_t from_base = r.scratch;
    ex[0] = &fr;
    r = prepare(&d);
    assert_null(r.st);
    assert_true(r.scratch >= 3 * 16 * 32 * sizeof(float));
    assert_true(r.scratch != from_base);
}

static void fusions(void **state)
{
    (void)state;
    tx_te_attr_value battrs[TX_TE_MAX_ATTRS], aattrs[TX_TE_MAX_ATTRS], nattrs[TX_TE_MAX_ATTRS];
    defaults(TX_TE_BIAS, battrs);
    defaults(TX_TE_QGELU, aattrs);
    defaults(TX_TE_RMS_NORM, nattrs);
    int64_t xd[2] = {130, 64};
    tx_tensor x = shaped(TEEXEC_DTYPE_BFLOAT16, 2, xd), b = shaped(TEEXEC_DTYPE_BFLOAT16, 1, &xd[1]);
    const tx_tensor *bp[1] = {&b};
    tx_cuda_te_desc bd = {.op = TX_TE_BIAS, .name = "b", .attrs = battrs, .input = &x,
                          .params = bp, .n_params = 1, .output = &x};
    tx_cuda_te_desc ad = {.op = TX_TE_QGELU, .name = "a", .attrs = aattrs, .input = &x,
                          .output = &x};
    const tx_cuda_te_desc *two[2] = {&bd, &ad};
    const tx_cuda_fused_impl *impl = NULL;
    void *priv = NULL;
    size_t sb = 0;
    assert_null(tx_cuda_fused_basic_prepare(TX_FUSION_BWD_ACT_BIAS, true, two, NULL, 2, &impl,
                                            &priv, &sb));
    assert_non_null(impl);
    assert_null(impl->forward);
    assert_non_null(impl->backward);
    assert_true(sb >= x.nbytes + tx_cuda_colsum_workspace_floats(130, 64) * sizeof(float));
    impl->free_priv(priv);

    /* asked in forward: declined */
    teexec_status *st = tx_cuda_fused_basic_prepare(TX_FUSION_BWD_ACT_BIAS, false, two, NULL, 2,
                                                    &impl, &priv, &sb);
    assert_non_null(st);
    assert_null(impl);
    teexec_status_destroy(st);

    /* BackwardAddNorm keeps a norm node of its own */
    tx_tensor w = shaped(TEEXEC_DTYPE_BFLOAT16, 1, &xd[1]);
    const tx_tensor *wp[1] = {&w}, *eo[1] = {&x};
    tx_cuda_te_desc md = {.op = TX_TE_MAKE_EXTRA_OUTPUT, .name = "m", .attrs = battrs,
                          .input = &x, .output = &x, .extra_outputs = eo, .n_extra_outputs = 1};
    tx_cuda_te_desc nd = {.op = TX_TE_RMS_NORM, .name = "n", .attrs = nattrs, .input = &x,
                          .params = wp, .n_params = 1, .output = &x};
    const tx_cuda_te_desc *mn[2] = {&md, &nd};
    assert_null(tx_cuda_fused_basic_prepare(TX_FUSION_BWD_ADD_NORM, true, mn, NULL, 2, &impl,
                                            &priv, &sb));
    assert_non_null(impl);
    assert_true(sb >= tx_cuda_norm_bwd_workspace_floats(130, 64) * sizeof(float));
    impl->free_priv(priv);

    /* an extra output of another dtype: declined with the reason */
    tx_tensor xf = shaped(TEEXEC_DTYPE_FLOAT, 2, xd);
    eo[0] = &xf;
    st = tx_cuda_fused_basic_prepare(TX_FUSION_BWD_ADD_NORM, true, mn, NULL, 2, &impl, &priv, &sb);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "BackwardAddNorm over op m..n"));
    teexec_status_destroy(st);

    /* the quantizing hand-offs have no CUDA kernel; Linear fusions are T2's */
    st = tx_cuda_fused_basic_prepare(TX_FUSION_FWD_NORM_QUANTIZE, false, mn, NULL, 2, &impl, &priv,
                                     &sb);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    assert_null(tx_cuda_fused_basic_prepare(TX_FUSION_BWD_LINEAR_ADD, true, mn, NULL, 2, &impl,
                                            &priv, &sb));
    assert_null(impl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_covers_basic_ops_only),
        cmocka_unit_test(refuses_float64_and_non_floats),
        cmocka_unit_test(refuses_bad_shapes_and_attributes),
        cmocka_unit_test(scratch_sizes),
        cmocka_unit_test(fusions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
