/* GPU test: the CUDA te.ops RotaryEmbedding (kernels/cuda/rope.h) and
 * Embedding (kernels/cuda/embedding.h) against the CPU kernels
 * (kernels/cpu/te_rope.c, te_embedding.c).
 * RoPE: forward and backward, bshd and sbhd, halves and interleaved, a
 * rotated width below the head dim, angles from base or from a freqs
 * input; FLOAT within 1.3e-6 relative + 1e-6 absolute (the cos/sin table
 * may differ from glibc's cosf/sinf in the last bit, the rotation itself
 * is done in the CPU's order without FMA), BFLOAT16/FLOAT16 within
 * DESIGN.md's tolerances; the number of bit-identical elements is printed.
 * Embedding: the gather byte for byte; the backward (double, index order)
 * bit for bit, with heavily repeated ids, int64 and int32 ids, and
 * several column bands; out-of-range ids counted by the forward. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/cpu/te_args.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/rope.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

typedef struct rope_case {
    const char *name;
    int64_t b, s, h, d, r;  /* r = 0: the whole head */
    int sbhd, interleaved, with_freqs;
    teexec_dtype dt;
} rope_case;

static void run_rope(void **state)
{
    const rope_case *c = *state;
    ku_seed((uint64_t)(c->b * 1000 + c->s * 10 + c->d));
    const tx_te_op_schema *s = tx_te_schema(TX_TE_ROTARY_EMBEDDING);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    attrs[TX_TE_A_ROPE_LAYOUT].i = c->sbhd ? TX_TE_LAYOUT_SBHD : TX_TE_LAYOUT_BSHD;
    attrs[TX_TE_A_ROPE_INTERLEAVED].i = c->interleaved;
    attrs[TX_TE_A_ROPE_DIM].i = c->r;
    int64_t r = c->r ? c->r : c->d;
    int64_t xd[4] = {c->sbhd ? c->s : c->b, c->sbhd ? c->b : c->s, c->h, c->d};
    int64_t fd[2] = {c->s + 3, r};
    tx_tensor x = {0}, y = {0}, dy = {0}, dx = {0}, fr = {0};
    ku_make(&x, c->dt, 4, xd, -2.0, 2.0);
    ku_make(&dy, c->dt, 4, xd, -1.0, 1.0);
    /* freqs has x's type (schema type T); the kernel takes them as FP32, an
     * exact widening */
    ku_make(&fr, c->dt, 2, fd, -20.0, 20.0);
    float *fr32 = malloc((size_t)fr.numel * sizeof(float));
    assert_non_null(fr32);
    for (uint64_t i = 0; i < fr.numel; i++) fr32[i] = ku_get(&fr, i);
    TG_OK(tx_tensor_alloc(&y, c->dt, 4, xd));
    TG_OK(tx_tensor_alloc(&dx, c->dt, 4, xd));
    const tx_tensor *extra[1] = {c->with_freqs ? &fr : NULL};
    tx_te_fwd_args fa = {.op = TX_TE_ROTARY_EMBEDDING, .attrs = attrs, .input = &x,
                         .extra_inputs = extra, .n_extra_inputs = 1, .output = &y,
                         .training = true};
    TG_OK(tx_te_cpu_forward(&fa));
    const tx_tensor *saved[TX_TE_SAVED_CAP(0)];
    int n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(0), &n_saved));
    tx_te_bwd_args ba = {.op = TX_TE_ROTARY_EMBEDDING, .attrs = attrs, .grad_output = &dy,
                         .saved = saved, .n_saved = n_saved, .grad_input = &dx};
    TG_OK(tx_te_cpu_backward(&ba));

    void *dX = ku_upload(&x), *dDY = ku_upload(&dy),
         *dF = tg_dev_upload(fr32, (size_t)fr.numel * sizeof(float));
    void *dY = tg_dev_alloc(y.nbytes), *dDX = tg_dev_alloc(dx.nbytes);
    float *table = tg_dev_alloc(2 * (size_t)c->s * (size_t)r * sizeof(float));
    tx_cuda_rope_args a = {.b = (size_t)c->b, .s = (size_t)c->s, .h = (size_t)c->h,
                           .d = (size_t)c->d, .r = (size_t)r, .sbhd = c->sbhd,
                           .interleaved = c->interleaved,
                           .freqs = c->with_freqs ? dF : NULL,
                           .base = attrs[TX_TE_A_ROPE_BASE].f, .in = dX, .in_dtype = c->dt,
                           .out = dY, .out_dtype = c->dt, .table = table};
    TG_OK(tx_cuda_rope_forward(&a, NULL));
    a.in = dDY;
    a.out = dDX;
    TG_OK(tx_cuda_rope_backward(&a, NULL));
    tg_sync("rope");
    double rtol = ku_rtol(c->dt), atol = c->dt == KU_F32 ? 1e-6 : 1e-5;
    char what[128];
    snprintf(what, sizeof what, "%s y", c->name);
    ku_expect_close(what, &y, dY, rtol, atol);
    snprintf(what, sizeof what, "%s dx", c->name);
    ku_expect_close(what, &dx, dDX, rtol, atol);
    void *bufs[] = {dX, dDY, dF, dY, dDX, table};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
    free(fr32);
    tx_tensor *ts[] = {&x, &y, &dy, &dx, &fr};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tx_tensor_release(ts[i]);
}

static void rope_rejects_bad_width(void **state)
{
    (void)state;
    tx_cuda_rope_args a = {.b = 1, .s = 1, .h = 1, .d = 8, .r = 7, .base = 10000.0,
                           .in_dtype = KU_F32, .out_dtype = KU_F32};
    teexec_status *st = tx_cuda_rope_forward(&a, NULL);
    assert_non_null(st);
    teexec_status_destroy(st);
}

typedef struct emb_case {
    const char *name;
    int64_t vocab, dim, n;
    teexec_dtype dt, ids_dt;
    int hot;   /* percent of ids drawn from the first 4 rows */
} emb_case;

static void run_embedding(void **state)
{
    const emb_case *c = *state;
    ku_seed((uint64_t)(c->vocab * 7 + c->n));
    const tx_te_op_schema *s = tx_te_schema(TX_TE_EMBEDDING);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    int64_t idd[2] = {c->n / 4, 4}, wd[2] = {c->vocab, c->dim}, yd[3] = {c->n / 4, 4, c->dim};
    tx_tensor ids = {0}, w = {0}, y = {0}, dy = {0}, dw = {0};
    TG_OK(tx_tensor_alloc(&ids, c->ids_dt, 2, idd));
    for (uint64_t i = 0; i < ids.numel; i++) {
        int64_t id = (int64_t)ku_below(100) < c->hot ? (int64_t)ku_below(4)
                                                     : (int64_t)ku_below((uint64_t)c->vocab);
        if (c->ids_dt == TEEXEC_DTYPE_INT64) ((int64_t *)ids.data)[i] = id;
        else ((int32_t *)ids.data)[i] = (int32_t)id;
    }
    ku_make(&w, c->dt, 2, wd, -1.0, 1.0);
    ku_make(&dy, c->dt, 3, yd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&y, c->dt, 3, yd));
    TG_OK(tx_tensor_alloc(&dw, c->dt, 2, wd));
    const tx_tensor *params[1] = {&w};
    tx_te_fwd_args fa = {.op = TX_TE_EMBEDDING, .attrs = attrs, .input = &ids, .params = params,
                         .n_params = 1, .output = &y, .training = true};
    TG_OK(tx_te_cpu_forward(&fa));
    const tx_tensor *saved[TX_TE_SAVED_CAP(1)];
    int n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(1), &n_saved));
    tx_tensor *gp[1] = {&dw};
    tx_te_bwd_args ba = {.op = TX_TE_EMBEDDING, .attrs = attrs, .grad_output = &dy,
                         .saved = saved, .n_saved = n_saved, .grad_params = gp,
                         .n_grad_params = 1};
    TG_OK(tx_te_cpu_backward(&ba));

    void *dIds = ku_upload(&ids), *dW = ku_upload(&w), *dDY = ku_upload(&dy);
    void *dY = tg_dev_alloc(y.nbytes), *dDW = tg_dev_alloc(dw.nbytes);
    int64_t zero = 0, *dBad = tg_dev_upload(&zero, sizeof zero);
    TG_OK(tx_cuda_embedding_forward(dIds, c->ids_dt, (size_t)c->n, dW, c->dt, (size_t)c->vocab,
                                    (size_t)c->dim, dY, dBad, NULL));
    size_t ws = 0;
    TG_OK(tx_cuda_embedding_backward_workspace((size_t)c->n, (size_t)c->vocab, &ws));
    void *dWs = tg_dev_alloc(ws ? ws : 1);
    TG_OK(tx_cuda_embedding_backward(dIds, c->ids_dt, (size_t)c->n, dDY, c->dt,
                                     (size_t)c->vocab, (size_t)c->dim, dDW, c->dt, dWs, ws, NULL));
    tg_sync("embedding");
    char what[128];
    snprintf(what, sizeof what, "%s y", c->name);
    ku_expect_bits(what, &y, dY);
    snprintf(what, sizeof what, "%s dweight", c->name);
    ku_expect_bits(what, &dw, dDW);
    int64_t nbad = -1;
    tg_download(&nbad, dBad, sizeof nbad);
    assert_int_equal(nbad, 0);
    void *bufs[] = {dIds, dW, dDY, dY, dDW, dBad, dWs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
    tx_tensor *ts[] = {&ids, &w, &y, &dy, &dw};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tx_tensor_release(ts[i]);
}

static void embedding_counts_bad_ids(void **state)
{
    (void)state;
    int64_t ids[4] = {0, 5, -1, 2};
    float w[3 * 2] = {1, 2, 3, 4, 5, 6}, y[4 * 2];
    int64_t zero = 0, nbad = 0;
    void *dIds = tg_dev_upload(ids, sizeof ids), *dW = tg_dev_upload(w, sizeof w);
    void *dY = tg_dev_alloc(sizeof y);
    int64_t *dBad = tg_dev_upload(&zero, sizeof zero);
    TG_OK(tx_cuda_embedding_forward(dIds, TEEXEC_DTYPE_INT64, 4, dW, KU_F32, 3, 2, dY, dBad,
                                    NULL));
    tg_sync("embedding bad ids");
    tg_download(y, dY, sizeof y);
    tg_download(&nbad, dBad, sizeof nbad);
    assert_int_equal(nbad, 2);
    const float expect[8] = {1, 2, 0, 0, 0, 0, 5, 6};
    assert_memory_equal(y, expect, sizeof y);
    void *bufs[] = {dIds, dW, dY, dBad};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
}

static const rope_case rope_cases[] = {
    {"rope_bshd_f32", 2, 128, 4, 64, 0, 0, 0, 0, KU_F32},
    {"rope_sbhd_bf16_interleaved", 3, 200, 2, 128, 0, 1, 1, 0, KU_BF16},
    {"rope_bshd_f16_partial_freqs", 2, 64, 3, 96, 32, 0, 0, 1, KU_F16},
    {"rope_sbhd_f32_partial_interleaved_freqs", 1, 33, 5, 80, 48, 1, 1, 1, KU_F32},
    {"rope_bshd_bf16_long", 1, 2048, 2, 128, 0, 0, 0, 0, KU_BF16},
};

static const emb_case emb_cases[] = {
    {"embedding_bf16_1000x768_hot", 1000, 768, 4096, KU_BF16, TEEXEC_DTYPE_INT64, 30},
    {"embedding_f32_50x1500_i32", 50, 1500, 300, KU_F32, TEEXEC_DTYPE_INT32, 0},
    {"embedding_f16_5000x64", 5000, 64, 2048, KU_F16, TEEXEC_DTYPE_INT64, 50},
    /* GPT-2's table and a 8 x 1024 batch, a fifth of it on 4 hot rows */
    {"embedding_bf16_50304x768_gpt2", 50304, 768, 8192, KU_BF16, TEEXEC_DTYPE_INT64, 20},
    /* every index on rows 0-3: runs of about a thousand */
    {"embedding_f32_7x96_four_rows", 7, 96, 4096, KU_F32, TEEXEC_DTYPE_INT32, 100},
    {"embedding_f32_32000x1024_hot", 32000, 1024, 1024, KU_F32, TEEXEC_DTYPE_INT64, 90},
};

int main(void)
{
    tg_require_gpu("test_gpu_rope_embed");
    enum { NR = sizeof rope_cases / sizeof rope_cases[0],
           NE = sizeof emb_cases / sizeof emb_cases[0] };
    struct CMUnitTest tests[NR + NE + 2];
    size_t k = 0;
    for (size_t i = 0; i < NR; i++) {
        struct CMUnitTest t = {rope_cases[i].name, run_rope, NULL, NULL, (void *)&rope_cases[i]};
        tests[k++] = t;
    }
    for (size_t i = 0; i < NE; i++) {
        struct CMUnitTest t = {emb_cases[i].name, run_embedding, NULL, NULL,
                               (void *)&emb_cases[i]};
        tests[k++] = t;
    }
    struct CMUnitTest t1 = {"rope_rejects_bad_width", rope_rejects_bad_width, NULL, NULL, NULL};
    struct CMUnitTest t2 = {"embedding_counts_bad_ids", embedding_counts_bad_ids, NULL, NULL,
                            NULL};
    tests[k++] = t1;
    tests[k++] = t2;
    return _cmocka_run_group_tests("test_gpu_rope_embed", tests, k, NULL, NULL);
}
