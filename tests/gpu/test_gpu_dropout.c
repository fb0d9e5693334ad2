/* GPU test: the CUDA te.ops Dropout (kernels/cuda/dropout.h) against the
 * CPU kernel (kernels/cpu/te_dropout.c) for the same seed and counter
 * offset: the mask, the forward output and the backward output must be
 * identical bit for bit, for FLOAT, BFLOAT16 and FLOAT16, sizes that are
 * and are not multiples of 8 and 16, seeds and offsets above 2^32. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/cpu/te_args.h"
#include "kernels/cuda/dropout.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

typedef struct drop_case {
    const char *name;
    int64_t rows, cols;
    teexec_dtype dt;
    double p;
    int64_t seed;
    uint64_t offset;
} drop_case;

static void run_dropout(void **state)
{
    const drop_case *c = *state;
    ku_seed((uint64_t)c->rows * 31u + (uint64_t)c->cols);
    const tx_te_op_schema *s = tx_te_schema(TX_TE_DROPOUT);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    attrs[TX_TE_A_DROPOUT_P].f = c->p;
    attrs[TX_TE_A_DROPOUT_SEED].i = c->seed;
    int64_t xd[2] = {c->rows, c->cols};
    size_t n = (size_t)(c->rows * c->cols);
    int64_t md[1] = {(int64_t)tx_cuda_dropout_mask_bytes(n)};
    tx_tensor x = {0}, y = {0}, mask = {0}, dy = {0}, dx = {0};
    ku_make(&x, c->dt, 2, xd, -3.0, 3.0);
    ku_make(&dy, c->dt, 2, xd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&y, c->dt, 2, xd));
    TG_OK(tx_tensor_alloc(&dx, c->dt, 2, xd));
    TG_OK(tx_tensor_alloc(&mask, TEEXEC_DTYPE_UINT8, 1, md));
    tx_tensor *aux[1] = {&mask};
    tx_te_fwd_args fa = {.op = TX_TE_DROPOUT, .attrs = attrs, .input = &x, .output = &y,
                         .aux = aux, .n_aux = 1, .training = true, .rng_offset = c->offset};
    TG_OK(tx_te_cpu_forward(&fa));
    const tx_tensor *saved[TX_TE_SAVED_CAP(0)];
    int n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(0), &n_saved));
    tx_te_bwd_args ba = {.op = TX_TE_DROPOUT, .attrs = attrs, .grad_output = &dy, .saved = saved,
                         .n_saved = n_saved, .grad_input = &dx};
    TG_OK(tx_te_cpu_backward(&ba));

    void *dX = ku_upload(&x), *dDY = ku_upload(&dy), *dY = tg_dev_alloc(y.nbytes),
         *dDX = tg_dev_alloc(dx.nbytes);
    uint8_t *dM = tg_dev_alloc(mask.nbytes);
    TG_OK(tx_cuda_dropout_forward(dX, c->dt, dY, c->dt, dM, n, c->p, (uint64_t)c->seed,
                                  c->offset, NULL));
    TG_OK(tx_cuda_dropout_backward(dDY, c->dt, dDX, c->dt, dM, n, c->p, NULL));
    tg_sync("dropout");
    char what[128];
    snprintf(what, sizeof what, "%s mask", c->name);
    ku_expect_bits(what, &mask, dM);
    snprintf(what, sizeof what, "%s y", c->name);
    ku_expect_bits(what, &y, dY);
    snprintf(what, sizeof what, "%s dx", c->name);
    ku_expect_bits(what, &dx, dDX);

    /* the kept fraction is near 1 - floor(256p)/256: the mask is not trivial */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) kept += (((uint8_t *)mask.data)[i / 8] >> (i % 8)) & 1u;
    double expect = 1.0 - floor(c->p * 256.0) / 256.0;
    if (n >= 4096) assert_true(fabs((double)kept / (double)n - expect) < 0.02);

    /* another offset draws another mask */
    if (n >= 64 && c->p > 0.0) {
        TG_OK(tx_cuda_dropout_forward(dX, c->dt, dY, c->dt, dM, n, c->p, (uint64_t)c->seed,
                                      c->offset + 1, NULL));
        tg_sync("dropout offset + 1");
        uint8_t *other = malloc(mask.nbytes);
        assert_non_null(other);
        tg_download(other, dM, mask.nbytes);
        assert_true(memcmp(other, mask.data, mask.nbytes) != 0);
        free(other);
    }
    void *bufs[] = {dX, dDY, dY, dDX, dM};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
    tx_tensor *ts[] = {&x, &y, &mask, &dy, &dx};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tx_tensor_release(ts[i]);
}

static void bad_p_is_an_error(void **state)
{
    (void)state;
    teexec_status *st = tx_cuda_dropout_forward(NULL, KU_F32, NULL, KU_F32, NULL, 16, 1.0, 1, 0,
                                                NULL);
    assert_non_null(st);
    assert_non_null(strstr(teexec_status_message(st), "p must be in [0, 1)"));
    teexec_status_destroy(st);
    st = tx_cuda_dropout_backward(NULL, KU_F32, NULL, KU_F32, NULL, 16, -0.5, NULL);
    assert_non_null(st);
    teexec_status_destroy(st);
}

static const drop_case cases[] = {
    {"dropout_bf16_1000x768_p0.1", 1000, 768, KU_BF16, 0.1, 1234, 0},
    {"dropout_f32_33x17_p0.5", 33, 17, KU_F32, 0.5, 42, 7},
    {"dropout_f16_7x3_p0", 7, 3, KU_F16, 0.0, 9, 3},
    {"dropout_bf16_4096x1024_p0.9_bigseed", 4096, 1024, KU_BF16, 0.9, 0x123456789abcll,
     0x100000005ull},
    {"dropout_f32_129x257_p0.3", 129, 257, KU_F32, 0.3, 77, 1000},
    {"dropout_f16_64x1000_p0.999", 64, 1000, KU_F16, 0.999, 5, 11},
};

int main(void)
{
    tg_require_gpu("test_gpu_dropout");
    enum { N = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[N + 1];
    for (size_t i = 0; i < N; i++) {
        struct CMUnitTest t = {cases[i].name, run_dropout, NULL, NULL, (void *)&cases[i]};
        tests[i] = t;
    }
    struct CMUnitTest t = {"bad_p_is_an_error", bad_p_is_an_error, NULL, NULL, NULL};
    tests[N] = t;
    return _cmocka_run_group_tests("test_gpu_dropout", tests, N + 1, NULL, NULL);
}
