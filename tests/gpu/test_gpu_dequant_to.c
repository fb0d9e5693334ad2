/* test_gpu_dequant_to.c - tx_cuda_dequantize_to (kernels/cuda/dequant.h),
 * the operand preparation of the emulated GEMMs, against tx_cuda_dequantize
 * (the checking path, itself bit-identical to the CPU): every kind and
 * usage, compact and swizzled scales, vector (dims % 8 == 0) and ragged
 * shapes, as stored and transposed, FP32 output bit for bit and BF16 output
 * equal to the FP32 values rounded to nearest even on the host. Inputs are
 * random stored bytes and scales (no NaN codes: the GPU's bf16 conversion
 * canonicalizes NaN, which the host rounding would not). */
#include "base/half.h"
#include "kernels/cuda/dequant.h"
#include "tests/gpu/gpu_harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct dcase {
    const char *name;
    tx_cuda_qkind kind;
    teexec_dtype fmt;
    int col, two_d, swz;
    size_t rows, cols;
    float amax; /* NVFP4 global amax */
} dcase;

#define E4 TEEXEC_DTYPE_FLOAT8E4M3FN
#define E5 TEEXEC_DTYPE_FLOAT8E5M2
#define FP4 TEEXEC_DTYPE_FLOAT4E2M1

static const dcase cases[] = {
    {"mxfp8_row_e4m3", TX_CUDA_Q_MXFP8, E4, 0, 0, 0, 64, 96, 0},
    {"mxfp8_col_e5m2", TX_CUDA_Q_MXFP8, E5, 1, 0, 0, 96, 64, 0},
    {"mxfp8_row_swizzled", TX_CUDA_Q_MXFP8, E4, 0, 0, 1, 160, 64, 0},
    {"mxfp8_col_swizzled", TX_CUDA_Q_MXFP8, E4, 1, 0, 1, 64, 160, 0},
    {"mxfp8_col_large_tiles", TX_CUDA_Q_MXFP8, E4, 1, 0, 0, 256, 192, 0},
    {"nvfp4_row", TX_CUDA_Q_NVFP4, FP4, 0, 0, 0, 64, 96, 3.5f},
    {"nvfp4_col_swizzled_amax0", TX_CUDA_Q_NVFP4, FP4, 1, 0, 1, 96, 64, 0.0f},
    {"nvfp4_col_unit_amax", TX_CUDA_Q_NVFP4, FP4, 1, 1, 0, 128, 64, 2688.0f},
    {"nvfp4_row_ragged", TX_CUDA_Q_NVFP4, FP4, 0, 0, 0, 36, 20, 7.0f},
    {"fp8_tensor_row_ragged", TX_CUDA_Q_FP8_TENSOR, E4, 0, 0, 0, 20, 36, 0},
    {"fp8_tensor_col", TX_CUDA_Q_FP8_TENSOR, E5, 1, 0, 0, 48, 80, 0},
    {"fp8_block_1d_col_ragged", TX_CUDA_Q_FP8_BLOCK, E4, 1, 0, 0, 130, 72, 0},
    {"fp8_block_2d_row", TX_CUDA_Q_FP8_BLOCK, E4, 0, 1, 0, 72, 264, 0},
};

static uint64_t rng_state;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static uint8_t fp8_no_nan(teexec_dtype fmt)
{
    for (;;) {
        const uint8_t b = (uint8_t)rnd();
        if (fmt == E4 ? (b & 0x7F) != 0x7F : (b & 0x7C) != 0x7C) return b;
    }
}

static size_t round_up(size_t a, size_t b) { return (a + b - 1) / b * b; }

/* The check: reference FP32 [rows, cols]; got in out_dtype, transposed or
 * not. Returns the number of differing elements. */
static size_t compare(const dcase *c, const float *ref, const void *got, teexec_dtype dt,
                      int transposed)
{
    size_t bad = 0;
    for (size_t r = 0; r < c->rows; r++)
        for (size_t k = 0; k < c->cols; k++) {
            const size_t at = transposed ? k * c->rows + r : r * c->cols + k;
            const float want = ref[r * c->cols + k];
            int same;
            if (dt == TEEXEC_DTYPE_FLOAT) {
                uint32_t a, b;
                memcpy(&a, &want, 4);
                memcpy(&b, (const float *)got + at, 4);
                same = a == b;
            } else {
                same = tx_f32_to_bf16(want) == ((const uint16_t *)got)[at];
            }
            if (!same && bad++ == 0)
                fprintf(stderr, "  first difference at [%zu, %zu] (%s, %s): want %g\n", r, k,
                        dt == TEEXEC_DTYPE_FLOAT ? "fp32" : "bf16",
                        transposed ? "transposed" : "as is", (double)want);
        }
    return bad;
}

static void run_case(void **state)
{
    const dcase *c = *state;
    rng_state = 0x1234567ull + c->rows * 131 + c->cols + (uint64_t)c->kind * 7 + (uint64_t)c->col;
    const size_t n = c->rows * c->cols;
    const int stored_t = c->col && c->kind != TX_CUDA_Q_MXFP8;
    const size_t SR = stored_t ? c->cols : c->rows, SC = stored_t ? c->rows : c->cols;
    /* data: FP8 one byte per element; NVFP4 two per byte */
    const size_t data_bytes = c->kind == TX_CUDA_Q_NVFP4 ? (n + 1) / 2 : n;
    uint8_t *data = malloc(data_bytes);
    assert_non_null(data);
    for (size_t i = 0; i < data_bytes; i++)
        data[i] = c->kind == TX_CUDA_Q_NVFP4 ? (uint8_t)rnd() : fp8_no_nan(c->fmt);
    /* scales: a buffer larger than any layout needs, every entry valid */
    const size_t scale_elems = (round_up(SR, 128) + 128) * (round_up(SC, 128) + 128);
    size_t scale_cols = 0;
    void *scales = NULL;
    if (c->kind == TX_CUDA_Q_FP8_BLOCK) {
        float *s = malloc(scale_elems * 4);
        assert_non_null(s);
        for (size_t i = 0; i < scale_elems; i++)
            s[i] = (float)(1 + rnd() % 1000) / 256.0f * (float)(1u << (rnd() % 8));
        scales = s;
        scale_cols = c->two_d ? round_up((SC + 127) / 128, 4) : round_up(SR, 4);
    } else if (c->kind != TX_CUDA_Q_FP8_TENSOR) {
        uint8_t *s = malloc(scale_elems);
        assert_non_null(s);
        for (size_t i = 0; i < scale_elems; i++)
            s[i] = c->kind == TX_CUDA_Q_MXFP8 ? (uint8_t)(rnd() % 255) : (uint8_t)(fp8_no_nan(E4) & 0x7F);
        scales = s;
        if (c->kind == TX_CUDA_Q_MXFP8)
            scale_cols = c->col ? round_up(c->cols, 128) : round_up(c->cols / 32, 4);
        else
            scale_cols = round_up((SC + 15) / 16, 4);
    }
    const float sinv = 0.3671875f;
    tx_cuda_dequant_args a;
    memset(&a, 0, sizeof a);
    a.kind = c->kind;
    a.fmt = c->fmt;
    a.columnwise = c->col;
    a.block_2d = c->two_d;
    a.swizzled = c->swz;
    a.rows = c->rows;
    a.cols = c->cols;
    a.data = tg_dev_upload(data, data_bytes);
    if (scales)
        a.scales = tg_dev_upload(scales, c->kind == TX_CUDA_Q_FP8_BLOCK ? scale_elems * 4 : scale_elems);
    a.scale_cols = scale_cols;
    a.scale_inv = tg_dev_upload(&sinv, 4);
    a.amax = tg_dev_upload(&c->amax, 4);
    a.out = tg_dev_alloc(n * 4);
    TG_OK(tx_cuda_dequantize(&a, NULL));
    float *ref = malloc(n * 4);
    void *got = malloc(n * 4);
    assert_non_null(ref);
    assert_non_null(got);
    tg_download(ref, a.out, n * 4);
    void *dev = tg_dev_alloc(n * 4);
    size_t bad_all = 0;
    char detail[160];
    for (int t = 0; t < 2; t++)
        for (int d = 0; d < 2; d++) {
            const teexec_dtype dt = d ? TEEXEC_DTYPE_BFLOAT16 : TEEXEC_DTYPE_FLOAT;
            TG_OK(tx_cuda_dequantize_to(&a, t, dt, dev, NULL));
            tg_sync("tx_cuda_dequantize_to");
            tg_download(got, dev, n * (d ? 2 : 4));
            const size_t bad = compare(c, ref, got, dt, t);
            bad_all += bad;
            snprintf(detail, sizeof detail, "%zux%zu %s %s: %zu of %zu differ", c->rows, c->cols,
                     d ? "bf16" : "fp32", t ? "transposed" : "as is", bad, n);
            fprintf(stderr, "  %s %s\n", c->name, detail);
        }
    snprintf(detail, sizeof detail, "%zux%zu fp32/bf16 x as-is/transposed: %zu differ", c->rows,
             c->cols, bad_all);
    tg_record(c->name, bad_all == 0, detail);
    tg_dev_free(dev);
    tg_dev_free((void *)a.data);
    tg_dev_free((void *)a.scales);
    tg_dev_free((void *)a.scale_inv);
    tg_dev_free((void *)a.amax);
    tg_dev_free(a.out);
    free(ref);
    free(got);
    free(data);
    free(scales);
    if (bad_all) fail_msg("%s: %zu elements differ", c->name, bad_all);
}

/* Refusals before any launch. */
static void test_refusals(void **state)
{
    (void)state;
    uint8_t *data = tg_dev_alloc(1024);
    uint8_t *sc = tg_dev_alloc(1024);
    unsigned char *out = tg_dev_alloc(4096);
    tx_cuda_dequant_args a;
    memset(&a, 0, sizeof a);
    a.kind = TX_CUDA_Q_MXFP8;
    a.fmt = E4;
    a.rows = 32;
    a.cols = 32;
    a.data = data;
    a.scales = sc;
    a.scale_cols = 4;
    const struct { const char *what; const void *out; teexec_dtype dt; teexec_code code; } r[] = {
        {"fp16 output", out, TEEXEC_DTYPE_FLOAT16, TEEXEC_ERR_UNSUPPORTED},
        {"misaligned output", out + 8, TEEXEC_DTYPE_BFLOAT16, TEEXEC_ERR_INVALID_ARGUMENT},
        {"NULL output", NULL, TEEXEC_DTYPE_BFLOAT16, TEEXEC_ERR_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        teexec_status *st = tx_cuda_dequantize_to(&a, 0, r[i].dt, (void *)r[i].out, NULL);
        if (!st) fail_msg("%s: accepted", r[i].what);
        fprintf(stderr, "  %s -> %s\n", r[i].what, teexec_status_message(st));
        const teexec_code code = teexec_status_code(st);
        teexec_status_destroy(st);
        assert_int_equal(code, r[i].code);
    }
    a.fmt = FP4; /* not an MXFP8 format */
    teexec_status *st = tx_cuda_dequantize_to(&a, 0, TEEXEC_DTYPE_BFLOAT16, out, NULL);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    tg_record("dequant_to_refusals", 1, "fp16 out, misaligned, NULL, wrong format");
    tg_dev_free(data);
    tg_dev_free(sc);
    tg_dev_free(out);
}

int main(void)
{
    tg_require_gpu("test_gpu_dequant_to");
    enum { N = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[N + 1];
    for (size_t i = 0; i < N; i++) {
        struct CMUnitTest t = {cases[i].name, run_case, NULL, NULL, (void *)&cases[i]};
        tests[i] = t;
    }
    struct CMUnitTest r = {"refusals", test_refusals, NULL, NULL, NULL};
    tests[N] = r;
    return _cmocka_run_group_tests("test_gpu_dequant_to", tests, N + 1, NULL, NULL);
}
