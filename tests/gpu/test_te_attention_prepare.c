/* Unit test (no GPU needed): the host side of the CUDA DotProductAttention
 * node (exec/cuda/te_cuda_attention.c) - which implementation prepare
 * picks without a cuDNN handle and why, the scratch it asks for, its
 * refusals (float64, mixed dtypes, shapes that do not fit) and the checks
 * forward / backward make before launching anything. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "exec/cuda/te_cuda.h"
#include "exec/cuda/te_cuda_attention.h"
#include "kernels/cuda/attention_fallback.h"

/* Shape-only tensors (data never dereferenced: a recognizable non-NULL). */
static tx_tensor shaped(teexec_dtype dt, int rank, const int64_t *dims)
{
    tx_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    t.numel = 1;
    for (int i = 0; i < rank; i++) {
        t.dims[i] = dims[i];
        t.numel *= (uint64_t)dims[i];
    }
    t.nbytes = t.numel * tx_dtype_elem_size(dt);
    t.data = (void *)(uintptr_t)0x1000;
    return t;
}

typedef struct fixture {
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_tensor q, k, v, y, mask, lse;
    const tx_tensor *extra[3];
    tx_cuda_te_desc d;
} fixture;

/* b 2, s_q 16, s_kv 24, h 4, h_kv 2, d 32, d_v 32, bshd. */
static void setup(fixture *f, teexec_dtype dt, bool with_mask)
{
    memset(f, 0, sizeof *f);
    tx_te_attr_defaults(tx_te_schema(TX_TE_DOT_PRODUCT_ATTENTION), f->attrs);
    int64_t qd[4] = {2, 16, 4, 32}, kd[4] = {2, 24, 2, 32}, yd[3] = {2, 16, 128},
            md[4] = {2, 1, 16, 24}, ld[3] = {2, 4, 16};
    f->q = shaped(dt, 4, qd);
    f->k = shaped(dt, 4, kd);
    f->v = shaped(dt, 4, kd);
    f->y = shaped(dt, 3, yd);
    f->mask = shaped(TEEXEC_DTYPE_BOOL, 4, md);
    f->lse = shaped(TEEXEC_DTYPE_FLOAT, 3, ld);
    f->extra[0] = &f->k;
    f->extra[1] = &f->v;
    f->extra[2] = with_mask ? &f->mask : NULL;
    f->d = (tx_cuda_te_desc){.op = TX_TE_DOT_PRODUCT_ATTENTION, .name = "attn0",
                             .attrs = f->attrs, .input = &f->q, .extra_inputs = f->extra,
                             .n_extra_inputs = 3, .output = &f->y, .training = true,
                             .needs = TX_TE_FOR_DX | TX_TE_FOR_DEXTRA, .sm = 90};
}

static const tx_cuda_te_impl *impl(void)
{
    const tx_cuda_te_impl *i = tx_cuda_te_attention_impl(TX_TE_DOT_PRODUCT_ATTENTION);
    assert_non_null(i);
    return i;
}

static void test_only_attention(void **state)
{
    (void)state;
    assert_null(tx_cuda_te_attention_impl(TX_TE_LINEAR));
    assert_null(tx_cuda_te_attention_impl(TX_TE_LAYER_NORM));
    assert_string_equal(tx_cuda_te_attention_choice(NULL), "");
}

static void test_fallback_without_cudnn(void **state)
{
    (void)state;
    fixture f;
    setup(&f, TEEXEC_DTYPE_BFLOAT16, false);
    void *priv = NULL;
    size_t st_b = 7, sc_b = 0;
    assert_null(impl()->prepare(&f.d, &priv, &st_b, &sc_b));
    assert_non_null(priv);
    assert_int_equal(st_b, 0);
    const char *ch = tx_cuda_te_attention_choice(priv);
    assert_non_null(strstr(ch, "CUDA fallback"));
    assert_non_null(strstr(ch, "no cuDNN handle"));
    assert_false(tx_cuda_te_attention_uses_cudnn(priv, false));
    assert_false(tx_cuda_te_attention_uses_cudnn(priv, true));
    /* workspace (D: b*h*s_q floats) + spare dq, dk, dv, each 256-aligned */
    size_t need = 2 * 4 * 16 * 4 + f.q.nbytes + f.k.nbytes + f.v.nbytes;
    assert_true(sc_b >= need);
    assert_true(sc_b <= need + 4 * 256);
    impl()->free_priv(priv);
}

static void test_inference_needs_no_scratch(void **state)
{
    (void)state;
    fixture f;
    setup(&f, TEEXEC_DTYPE_FLOAT, true);
    f.d.training = false;
    f.d.needs = 0;
    void *priv = NULL;
    size_t st_b = 7, sc_b = 7;
    assert_null(impl()->prepare(&f.d, &priv, &st_b, &sc_b));
    assert_int_equal(st_b, 0);
    assert_int_equal(sc_b, 0);
    assert_non_null(strstr(tx_cuda_te_attention_choice(priv), "no backward"));
    /* a backward on it is refused before any launch */
    const tx_tensor *saved[6] = {&f.q, &f.k, &f.v, &f.mask, &f.y, &f.lse};
    tx_tensor dq = f.q;
    tx_te_bwd_args ba = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = f.attrs,
                         .grad_output = &f.y, .saved = saved, .n_saved = 6, .grad_input = &dq};
    tx_cuda_env env = {.sm = 90};
    teexec_status *st = impl()->backward(priv, &ba, NULL, (void *)(uintptr_t)0x2000, &env);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "attn0"));
    teexec_status_destroy(st);
    impl()->free_priv(priv);
}

static void test_deterministic_reason(void **state)
{
    (void)state;
    fixture f;
    setup(&f, TEEXEC_DTYPE_FLOAT16, false);
    f.d.deterministic = true;
    void *priv = NULL;
    size_t st_b, sc_b;
    assert_null(impl()->prepare(&f.d, &priv, &st_b, &sc_b));
    const char *ch = tx_cuda_te_attention_choice(priv);
    assert_non_null(strstr(ch, "forward: CUDA fallback"));
    assert_non_null(strstr(ch, "backward: CUDA fallback: deterministic"));
    impl()->free_priv(priv);
}

static void expect_refused(fixture *f, teexec_code code, const char *needle)
{
    void *priv = (void *)1;
    size_t st_b, sc_b;
    teexec_status *st = impl()->prepare(&f->d, &priv, &st_b, &sc_b);
    assert_non_null(st);
    assert_null(priv);
    assert_int_equal(teexec_status_code(st), code);
    const char *msg = teexec_status_message(st);
    if (!strstr(msg, "op attn0 (DotProductAttention)") || !strstr(msg, needle))
        fail_msg("unexpected message: %s", msg);
    teexec_status_destroy(st);
}

static void test_refusals(void **state)
{
    (void)state;
    fixture f;
    setup(&f, TEEXEC_DTYPE_DOUBLE, false);
    expect_refused(&f, TEEXEC_ERR_UNSUPPORTED, "dtype");

    setup(&f, TEEXEC_DTYPE_BFLOAT16, false);
    f.k.dtype = TEEXEC_DTYPE_FLOAT;
    expect_refused(&f, TEEXEC_ERR_UNSUPPORTED, "one dtype");

    setup(&f, TEEXEC_DTYPE_FLOAT, false);
    f.k.dims[3] = 16; /* head dim differs from q's */
    expect_refused(&f, TEEXEC_ERR_INVALID_ARGUMENT, "do not fit");

    setup(&f, TEEXEC_DTYPE_FLOAT, false);
    f.k.dims[2] = 3; /* 4 query heads over 3 kv heads */
    f.v.dims[2] = 3;
    expect_refused(&f, TEEXEC_ERR_INVALID_ARGUMENT, "do not fit");

    setup(&f, TEEXEC_DTYPE_FLOAT, true);
    f.mask.dims[2] = 15;
    expect_refused(&f, TEEXEC_ERR_INVALID_ARGUMENT, "mask");

    setup(&f, TEEXEC_DTYPE_FLOAT, false);
    f.y.dims[2] = 64;
    expect_refused(&f, TEEXEC_ERR_INVALID_ARGUMENT, "do not fit");
}

/* Forward checks the call's tensors against what was prepared. */
static void test_forward_checks_tensors(void **state)
{
    (void)state;
    fixture f;
    setup(&f, TEEXEC_DTYPE_FLOAT, false);
    void *priv = NULL;
    size_t st_b, sc_b;
    assert_null(impl()->prepare(&f.d, &priv, &st_b, &sc_b));
    tx_cuda_env env = {.sm = 90};
    tx_tensor y_bad = f.y;
    y_bad.dims[1] = 15;
    tx_tensor *aux[1] = {&f.lse};
    tx_te_fwd_args fa = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = f.attrs, .input = &f.q,
                         .extra_inputs = f.extra, .n_extra_inputs = 3, .output = &y_bad,
                         .aux = aux, .n_aux = 1, .training = true};
    teexec_status *st = impl()->forward(priv, &fa, NULL, (void *)(uintptr_t)0x2000, &env);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "y is missing or has another"));
    teexec_status_destroy(st);
    /* a mask the node was not prepared with */
    const tx_tensor *extra_m[3] = {&f.k, &f.v, &f.mask};
    fa.output = &f.y;
    fa.extra_inputs = extra_m;
    st = impl()->forward(priv, &fa, NULL, (void *)(uintptr_t)0x2000, &env);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "mask"));
    teexec_status_destroy(st);
    /* training without the softmax_lse aux */
    fa.extra_inputs = f.extra;
    fa.aux = NULL;
    fa.n_aux = 0;
    st = impl()->forward(priv, &fa, NULL, (void *)(uintptr_t)0x2000, &env);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "softmax_lse"));
    teexec_status_destroy(st);
    impl()->free_priv(priv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_attention),
        cmocka_unit_test(test_fallback_without_cudnn),
        cmocka_unit_test(test_inference_needs_no_scratch),
        cmocka_unit_test(test_deterministic_reason),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_forward_checks_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
