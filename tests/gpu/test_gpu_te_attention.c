/* GPU test: the te.ops DotProductAttention node of the CUDA backend
 * (exec/cuda/te_cuda_attention.c, te_cuda.h contract) against the CPU
 * te.ops kernel (tx_te_cpu_forward / tx_te_cpu_backward) on the same inputs.
 *
 * Each case prepares the node as the executor does (shape-only desc, the
 * session's cuDNN handle), checks which implementation it chose (cuDNN for
 * bf16/fp16 without explicit masks, the CUDA fallback for fp32, bool/float
 * masks - padding is a bool mask in te.ops - and for the deterministic
 * backward), runs forward (y, softmax_lse) and then backward from the GPU's
 * own saved context (tx_te_setup_context over device tensors), and compares
 * with the CPU: bf16 rtol 1.6e-2, fp16 1e-3, fp32 2e-5 (FP32 sums against
 * the CPU's double sums), each with an absolute floor of rtol * max|ref|
 * (attention sums many terms and gradients cancel); LSE 1e-4 rel + 1e-3
 * abs; -inf (fully masked rows) exactly. Deterministic cases run the
 * backward twice and compare the bytes. The cache mode's cases
 * (run_cache_case) compare the appended caches byte for byte and y. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/tensor.h"
#include "exec/cuda/te_cuda.h"
#include "exec/cuda/te_cuda_attention.h"
#include "kernels/cpu/te_args.h"
#include "kernels/cuda/sdpa_cudnn.h"
#include "tests/gpu/gpu_harness.h"

#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F16 TEEXEC_DTYPE_FLOAT16
#define F32 TEEXEC_DTYPE_FLOAT

static tx_sdpa_cudnn *g_cudnn;

static uint64_t rng;
static double urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void put(tx_tensor *t, uint64_t i, float v)
{
    if (t->dtype == BF16) ((uint16_t *)t->data)[i] = tx_f32_to_bf16(v);
    else if (t->dtype == F16) ((uint16_t *)t->data)[i] = tx_f32_to_f16(v);
    else ((float *)t->data)[i] = v;
}

static double get(teexec_dtype dt, const void *data, uint64_t i)
{
    if (dt == BF16) return tx_bf16_to_f32(((const uint16_t *)data)[i]);
    if (dt == F16) return tx_f16_to_f32(((const uint16_t *)data)[i]);
    return ((const float *)data)[i];
}

static void make(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims, double lo,
                 double hi)
{
    TG_OK(tx_tensor_alloc(t, dt, rank, dims));
    for (uint64_t i = 0; i < t->numel; i++) put(t, i, (float)(lo + (hi - lo) * urand()));
}

static double rtol_of(teexec_dtype dt) { return dt == BF16 ? 1.6e-2 : dt == F16 ? 1e-3 : 2e-5; }

/* |gpu - cpu| <= atol + rtol |cpu| with atol = atol_abs when > 0, else
 * rtol * max|cpu|; infinite references must match exactly. */
static void expect_close(const char *what, const tx_tensor *ref, const void *dev, double rtol,
                         double atol_abs)
{
    void *host = malloc(ref->nbytes);
    assert_non_null(host);
    tg_download(host, dev, ref->nbytes);
    double maxref = 0.0;
    for (uint64_t i = 0; i < ref->numel; i++) {
        double a = get(ref->dtype, ref->data, i);
        if (isfinite(a) && fabs(a) > maxref) maxref = fabs(a);
    }
    double atol = atol_abs > 0 ? atol_abs : rtol * maxref;
    size_t bad = 0;
    double worst = 0.0;
    for (uint64_t i = 0; i < ref->numel; i++) {
        double a = get(ref->dtype, ref->data, i), b = get(ref->dtype, host, i);
        double lim = atol + rtol * fabs(a);
        bool ok = isinf(a) ? a == b : !isnan(b) && fabs(a - b) <= lim;
        if (!ok) {
            if (!bad)
                fprintf(stderr, "%s: element %llu cpu %.9g gpu %.9g\n", what,
                        (unsigned long long)i, a, b);
            bad++;
        }
        if (isfinite(a) && isfinite(b) && lim > 0 && fabs(a - b) / lim > worst)
            worst = fabs(a - b) / lim;
    }
    free(host);
    char detail[200];
    snprintf(detail, sizeof detail, "%zu of %llu outside tolerance (rtol %.2g, atol %.3g), worst "
             "err/limit %.3f", bad, (unsigned long long)ref->numel, rtol, atol, worst);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

enum { M_NONE = 0, M_PAD = 1, M_BOOL = 2, M_FLOAT = 3 };
enum { WANT_CUDNN = 1, WANT_FALLBACK = 2 };
enum { G_ALL = 0, G_KV_ONLY = 1, G_NONE = 2 }; /* G_NONE: inference */

typedef struct te_case {
    const char *name;
    teexec_dtype dt;
    int64_t b, h, hk, sq, skv, d, dv;
    int sbhd, causal, mask;
    int want_fwd, want_bwd; /* expected implementation where cuDNN is loaded */
    int det;                /* deterministic: backward twice, identical bytes */
    int grads;              /* G_* */
} te_case;

/* A tensor whose data is a fresh device copy of h (or uninitialized). */
static tx_tensor dev_like(const tx_tensor *h, bool copy)
{
    tx_tensor t = *h;
    t.owns_data = false;
    t.data = copy ? tg_dev_upload(h->data, h->nbytes) : tg_dev_alloc(h->nbytes);
    return t;
}

static void run_case(void **state)
{
    const te_case *c = *state;
    const bool training = c->grads != G_NONE;
    rng = (uint64_t)c->sq * 131u + (uint64_t)c->skv * 7u + (uint64_t)c->d + (uint64_t)c->h * 17u +
          (uint64_t)c->mask * 1000u + (uint64_t)c->dt;
    int64_t s0q = c->sbhd ? c->sq : c->b, s1q = c->sbhd ? c->b : c->sq;
    int64_t s0k = c->sbhd ? c->skv : c->b, s1k = c->sbhd ? c->b : c->skv;
    int64_t qd[4] = {s0q, s1q, c->h, c->d}, kd[4] = {s0k, s1k, c->hk, c->d},
            vd[4] = {s0k, s1k, c->hk, c->dv}, yd[3] = {s0q, s1q, c->h * c->dv},
            ld[3] = {c->b, c->h, c->sq};
    tx_tensor q, k, v, mask = {0}, y, lse, dy, dq, dk, dv;
    make(&q, c->dt, 4, qd, -2.0, 2.0);
    make(&k, c->dt, 4, kd, -2.0, 2.0);
    make(&v, c->dt, 4, vd, -1.0, 1.0);
    make(&dy, c->dt, 3, yd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&y, c->dt, 3, yd));
    TG_OK(tx_tensor_alloc(&lse, F32, 3, ld));
    TG_OK(tx_tensor_alloc(&dq, c->dt, 4, qd));
    TG_OK(tx_tensor_alloc(&dk, c->dt, 4, kd));
    TG_OK(tx_tensor_alloc(&dv, c->dt, 4, vd));
    if (c->mask == M_PAD || c->mask == M_BOOL) {
        /* padding: per batch, queries >= lq and keys >= lk are hidden (bool,
         * true = masked out); rows past lq are fully masked */
        int64_t md[4] = {c->b, 1, c->sq, c->skv};
        TG_OK(tx_tensor_alloc(&mask, TEEXEC_DTYPE_BOOL, 4, md));
        uint8_t *m = mask.data;
        for (int64_t bi = 0; bi < c->b; bi++) {
            int64_t lq = c->sq - 19 * bi, lk = c->skv - 29 * bi;
            for (int64_t i = 0; i < c->sq; i++)
                for (int64_t j = 0; j < c->skv; j++)
                    m[(bi * c->sq + i) * c->skv + j] =
                        c->mask == M_PAD ? (i >= lq || j >= lk) : (urand() < 0.25 || i == 5);
        }
    } else if (c->mask == M_FLOAT) {
        int64_t md[4] = {1, c->h, c->sq, c->skv};
        make(&mask, c->dt, 4, md, -3.0, 0.5);
    }
    const tx_te_op_schema *s = tx_te_schema(TX_TE_DOT_PRODUCT_ATTENTION);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    attrs[TX_TE_A_DPA_CAUSAL].i = c->causal;
    attrs[TX_TE_A_DPA_LAYOUT].i = c->sbhd ? TX_TE_LAYOUT_SBHD : TX_TE_LAYOUT_BSHD;
    attrs[TX_TE_A_DPA_HEADS].i = c->h;

    /* CPU reference */
    const tx_tensor *extra[TX_TE_DPA_N_IN] = {&k, &v, c->mask ? &mask : NULL};
    tx_tensor *aux[1] = {&lse};
    tx_te_fwd_args fa = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = attrs, .input = &q,
                         .extra_inputs = extra, .n_extra_inputs = TX_TE_DPA_N_IN,
                         .output = &y, .aux = aux,
                         .n_aux = 1, .training = true};
    TG_OK(tx_te_cpu_forward(&fa));
    const tx_tensor *saved[TX_TE_SAVED_CAP(0)];
    int n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(0), &n_saved));
    tx_tensor *gx[TX_TE_DPA_N_IN] = {&dk, &dv, NULL};
    tx_te_bwd_args ba = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = attrs, .grad_output = &dy,
                         .saved = saved, .n_saved = n_saved, .grad_input = &dq,
                         .grad_extra_inputs = gx, .n_grad_extra_inputs = TX_TE_DPA_N_IN};
    TG_OK(tx_te_cpu_backward(&ba));

    /* prepare, as the executor does */
    const tx_tensor *dextra[TX_TE_DPA_N_IN] = {&k, &v, c->mask ? &mask : NULL};
    tx_cuda_te_desc desc = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .name = c->name, .attrs = attrs,
                            .input = &q, .extra_inputs = dextra, .n_extra_inputs = TX_TE_DPA_N_IN,
                            .output = &y, .training = training,
                            .needs = training ? (TX_TE_FOR_DX | TX_TE_FOR_DEXTRA) : 0,
                            .sm = 90, .deterministic = c->det != 0, .sdpa = g_cudnn};
    const tx_cuda_te_impl *impl = tx_cuda_te_attention_impl(TX_TE_DOT_PRODUCT_ATTENTION);
    assert_non_null(impl);
    void *priv = NULL;
    size_t state_bytes = 1, scratch_bytes = 0;
    TG_OK(impl->prepare(&desc, &priv, &state_bytes, &scratch_bytes));
    assert_int_equal(state_bytes, 0);
    const char *choice = tx_cuda_te_attention_choice(priv);
    fprintf(stderr, "%s: %s (scratch %zu bytes)\n", c->name, choice, scratch_bytes);
    bool fwd_cudnn = tx_cuda_te_attention_uses_cudnn(priv, false);
    bool bwd_cudnn = tx_cuda_te_attention_uses_cudnn(priv, true);
    if (g_cudnn) {
        char what[160];
        snprintf(what, sizeof what, "%s choice", c->name);
        bool ok = fwd_cudnn == (c->want_fwd == WANT_CUDNN) &&
                  (!training || bwd_cudnn == (c->want_bwd == WANT_CUDNN));
        tg_record(what, ok, choice);
        if (!ok) fail_msg("%s: unexpected choice: %s", c->name, choice);
    } else {
        assert_false(fwd_cudnn || bwd_cudnn);
    }
    if (c->det) assert_non_null(strstr(choice, "deterministic"));

    /* device tensors */
    tx_tensor Q = dev_like(&q, true), K = dev_like(&k, true), V = dev_like(&v, true),
              DY = dev_like(&dy, true), Y = dev_like(&y, false), L = dev_like(&lse, false),
              DQ = dev_like(&dq, false), DK = dev_like(&dk, false), DV = dev_like(&dv, false);
    tx_tensor M = {0};
    if (c->mask) M = dev_like(&mask, true);
    void *scratch = tg_dev_alloc(scratch_bytes ? scratch_bytes : 1);
    tx_cuda_env env = {.stream = NULL, .sdpa = g_cudnn, .sm = 90, .deterministic = c->det != 0};

    const tx_tensor *Dextra[TX_TE_DPA_N_IN] = {&K, &V, c->mask ? &M : NULL};
    tx_tensor *Daux[1] = {&L};
    tx_te_fwd_args FA = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = attrs, .input = &Q,
                         .extra_inputs = Dextra, .n_extra_inputs = TX_TE_DPA_N_IN, .output = &Y,
                         .aux = training ? Daux : NULL, .n_aux = training ? 1 : 0,
                         .training = training};
    TG_OK(impl->forward(priv, &FA, NULL, scratch, &env));
    tg_sync("forward");
    char what[160];
    snprintf(what, sizeof what, "%s y", c->name);
    expect_close(what, &y, Y.data, rtol_of(c->dt), 0.0);
    if (training) {
        snprintf(what, sizeof what, "%s softmax_lse", c->name);
        expect_close(what, &lse, L.data, 1e-4, 1e-3);

        const tx_tensor *Dsaved[TX_TE_SAVED_CAP(0)];
        int n_dsaved = 0;
        TG_OK(tx_te_setup_context(&FA, desc.needs, Dsaved, TX_TE_SAVED_CAP(0), &n_dsaved));
        tx_tensor *Dgx[TX_TE_DPA_N_IN] = {&DK, &DV, NULL};
        tx_te_bwd_args BA = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = attrs,
                             .grad_output = &DY, .saved = Dsaved, .n_saved = n_dsaved,
                             .grad_input = c->grads == G_KV_ONLY ? NULL : &DQ,
                             .grad_extra_inputs = Dgx, .n_grad_extra_inputs = TX_TE_DPA_N_IN};
        TG_OK(impl->backward(priv, &BA, NULL, scratch, &env));
        tg_sync("backward");
        if (c->grads != G_KV_ONLY) {
            snprintf(what, sizeof what, "%s dq", c->name);
            expect_close(what, &dq, DQ.data, rtol_of(c->dt), 0.0);
        }
        snprintf(what, sizeof what, "%s dk", c->name);
        expect_close(what, &dk, DK.data, rtol_of(c->dt), 0.0);
        snprintf(what, sizeof what, "%s dv", c->name);
        expect_close(what, &dv, DV.data, rtol_of(c->dt), 0.0);

        if (c->det) {
            /* second backward into fresh (poisoned) buffers: same bytes */
            tx_tensor DQ2 = dev_like(&dq, false), DK2 = dev_like(&dk, false),
                      DV2 = dev_like(&dv, false);
            tx_tensor *Dgx2[TX_TE_DPA_N_IN] = {&DK2, &DV2, NULL};
            BA.grad_input = &DQ2;
            BA.grad_extra_inputs = Dgx2;
            TG_OK(impl->backward(priv, &BA, NULL, scratch, &env));
            tg_sync("backward again");
            const tx_tensor *a1[3] = {&DQ, &DK, &DV}, *a2[3] = {&DQ2, &DK2, &DV2};
            const char *nm[3] = {"dq", "dk", "dv"};
            size_t diff = 0;
            for (int i = 0; i < 3; i++) {
                uint8_t *h1 = malloc(a1[i]->nbytes), *h2 = malloc(a1[i]->nbytes);
                assert_non_null(h1);
                assert_non_null(h2);
                tg_download(h1, a1[i]->data, a1[i]->nbytes);
                tg_download(h2, a2[i]->data, a2[i]->nbytes);
                diff += tg_cmp_bytes(nm[i], h1, h2, a1[i]->nbytes);
                free(h1);
                free(h2);
            }
            char detail[96];
            snprintf(detail, sizeof detail, "%zu bytes differ between two backward runs", diff);
            snprintf(what, sizeof what, "%s deterministic", c->name);
            tg_record(what, diff == 0, detail);
            tg_dev_free(DQ2.data);
            tg_dev_free(DK2.data);
            tg_dev_free(DV2.data);
            if (diff) fail_msg("%s: %s", what, detail);
        }
    }

    impl->free_priv(priv);
    tx_tensor *devs[] = {&Q, &K, &V, &DY, &Y, &L, &DQ, &DK, &DV};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) tg_dev_free(devs[i]->data);
    if (c->mask) tg_dev_free(M.data);
    tg_dev_free(scratch);
    tx_tensor *hosts[] = {&q, &k, &v, &mask, &y, &lse, &dy, &dq, &dk, &dv};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) tx_tensor_release(hosts[i]);
}

#define C_ WANT_CUDNN
#define F_ WANT_FALLBACK
static const te_case cases[] = {
    /* name, dt, b, h, hk, sq, skv, d, dv, sbhd, causal, mask, fwd, bwd, det, grads */
    {"bf16 bshd mha causal s128 d64", BF16, 2, 4, 4, 128, 128, 64, 64, 0, 1, M_NONE, C_, C_, 0, G_ALL},
    {"bf16 sbhd gqa nomask sq64 skv192 d128", BF16, 2, 8, 2, 64, 192, 128, 128, 1, 0, M_NONE, C_, C_, 0, G_ALL},
    {"fp16 bshd gqa causal sq128 skv256 d64", F16, 2, 4, 2, 128, 256, 64, 64, 0, 1, M_NONE, C_, C_, 0, G_ALL},
    {"bf16 bshd gqa causal kv-grads-only s128 d64", BF16, 1, 4, 2, 128, 128, 64, 64, 0, 1, M_NONE, C_, C_, 0, G_KV_ONLY},
    {"bf16 bshd mha inference s128 d64", BF16, 2, 4, 4, 128, 128, 64, 64, 0, 0, M_NONE, C_, C_, 0, G_NONE},
    {"bf16 bshd gqa padding s128 d64", BF16, 2, 4, 2, 128, 128, 64, 64, 0, 0, M_PAD, F_, F_, 0, G_ALL},
    {"fp32 bshd gqa causal s128 d64", F32, 2, 4, 2, 128, 128, 64, 64, 0, 1, M_NONE, F_, F_, 0, G_ALL},
    {"fp32 sbhd mha padding s96 d32 dv48", F32, 2, 2, 2, 96, 96, 32, 48, 1, 0, M_PAD, F_, F_, 0, G_ALL},
    {"fp32 bshd gqa nomask sq80 skv112 d64", F32, 2, 4, 1, 80, 112, 64, 64, 0, 0, M_NONE, F_, F_, 0, G_ALL},
    {"fp16 bshd mha boolmask s64 d64", F16, 2, 2, 2, 64, 64, 64, 64, 0, 0, M_BOOL, F_, F_, 0, G_ALL},
    {"fp32 bshd gqa floatmask s64 d64", F32, 1, 4, 2, 64, 64, 64, 64, 0, 1, M_FLOAT, F_, F_, 0, G_ALL},
    {"bf16 bshd gqa causal deterministic s128 d64", BF16, 2, 4, 2, 128, 128, 64, 64, 0, 1, M_NONE, C_, F_, 1, G_ALL},
    {"fp32 sbhd gqa causal deterministic s96 d64", F32, 2, 4, 2, 96, 96, 64, 64, 1, 1, M_NONE, F_, F_, 1, G_ALL},
    /* a few query rows against a long cache: the forward's per-row decode kernel */
    {"bf16 bshd gqa floatmask decode sq1 skv137 d64", BF16, 2, 12, 4, 1, 137, 64, 64, 0, 0, M_FLOAT, F_, F_, 0, G_NONE},
    {"fp32 bshd mha causal decode sq3 skv70 d128", F32, 1, 4, 4, 3, 70, 128, 128, 0, 1, M_NONE, F_, F_, 0, G_ALL},
    {"fp16 sbhd gqa boolmask decode sq2 skv90 d32 dv48", F16, 2, 4, 2, 2, 90, 32, 48, 1, 0, M_BOOL, F_, F_, 0, G_ALL},
    {"bf16 bshd gqa padding decode sq1 skv200 d64", BF16, 3, 4, 2, 1, 200, 64, 64, 0, 0, M_PAD, F_, F_, 0, G_NONE},
};

/* The cache mode (k_cache, v_cache, cache_len; inference): the CUDA node
 * appends the new rows into device caches and attends over them exactly as
 * the CPU kernel does on host copies of the same caches: the caches'
 * bytes equal (the append is a copy), y within rtol. Rows of different
 * cache lengths (0, some, the capacity less s_q), s_q 1 and 3 (the decode
 * kernel) and 37 (the tiled one), causal or not, GQA. */
typedef struct cache_case {
    const char *name;
    teexec_dtype dt;
    int64_t b, h, hk, sq, cap, d;
    int causal;
} cache_case;

static void run_cache_case(void **state)
{
    const cache_case *c = *state;
    rng = (uint64_t)c->sq * 977u + (uint64_t)c->cap + (uint64_t)c->dt;
    int64_t qd[4] = {c->b, c->sq, c->h, c->d}, kd[4] = {c->b, c->sq, c->hk, c->d},
            cd[4] = {c->b, c->cap, c->hk, c->d}, yd[3] = {c->b, c->sq, c->h * c->d};
    tx_tensor q, k, v, kc, vc, y, cl;
    make(&q, c->dt, 4, qd, -2.0, 2.0);
    make(&k, c->dt, 4, kd, -2.0, 2.0);
    make(&v, c->dt, 4, kd, -1.0, 1.0);
    make(&kc, c->dt, 4, cd, -2.0, 2.0); /* what was cached, and garbage past it */
    make(&vc, c->dt, 4, cd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&y, c->dt, 3, yd));
    TG_OK(tx_tensor_alloc(&cl, TEEXEC_DTYPE_INT64, 1, (int64_t[]){c->b}));
    int64_t *len = cl.data;
    for (int64_t r = 0; r < c->b; r++)
        len[r] = r == 0 ? 0 : r == c->b - 1 ? c->cap - c->sq : (c->cap - c->sq) * r / c->b;
    tx_tensor KC = dev_like(&kc, true), VC = dev_like(&vc, true), CL = dev_like(&cl, true);

    const tx_te_op_schema *s = tx_te_schema(TX_TE_DOT_PRODUCT_ATTENTION);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    attrs[TX_TE_A_DPA_CAUSAL].i = c->causal;
    attrs[TX_TE_A_DPA_HEADS].i = c->h;
    const tx_tensor *extra[TX_TE_DPA_N_IN] = {&k, &v, NULL, &kc, &vc, &cl};
    tx_te_fwd_args fa = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = attrs, .input = &q,
                         .extra_inputs = extra, .n_extra_inputs = TX_TE_DPA_N_IN,
                         .output = &y, .training = false};
    TG_OK(tx_te_cpu_forward(&fa)); /* kc, vc now hold the appended rows */

    const tx_tensor *dextra[TX_TE_DPA_N_IN] = {&k, &v, NULL, &kc, &vc, &cl};
    tx_cuda_te_desc desc = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .name = c->name, .attrs = attrs,
                            .input = &q, .extra_inputs = dextra, .n_extra_inputs = TX_TE_DPA_N_IN,
                            .output = &y, .training = false, .sm = 90, .sdpa = g_cudnn};
    const tx_cuda_te_impl *impl = tx_cuda_te_attention_impl(TX_TE_DOT_PRODUCT_ATTENTION);
    void *priv = NULL;
    size_t state_bytes = 1, scratch_bytes = 0;
    TG_OK(impl->prepare(&desc, &priv, &state_bytes, &scratch_bytes));
    const char *choice = tx_cuda_te_attention_choice(priv);
    fprintf(stderr, "%s: %s\n", c->name, choice);
    assert_false(tx_cuda_te_attention_uses_cudnn(priv, false));
    assert_non_null(strstr(choice, "cache mode"));

    tx_tensor Q = dev_like(&q, true), K = dev_like(&k, true), V = dev_like(&v, true),
              Y = dev_like(&y, false);
    void *scratch = tg_dev_alloc(scratch_bytes ? scratch_bytes : 1);
    tx_cuda_env env = {.stream = NULL, .sdpa = g_cudnn, .sm = 90};
    const tx_tensor *Dextra[TX_TE_DPA_N_IN] = {&K, &V, NULL, &KC, &VC, &CL};
    tx_te_fwd_args FA = {.op = TX_TE_DOT_PRODUCT_ATTENTION, .attrs = attrs, .input = &Q,
                         .extra_inputs = Dextra, .n_extra_inputs = TX_TE_DPA_N_IN,
                         .output = &Y, .training = false};
    TG_OK(impl->forward(priv, &FA, NULL, scratch, &env));
    tg_sync("cache-mode forward");
    char what[160];
    const tx_tensor *host_caches[2] = {&kc, &vc}, *dev_caches[2] = {&KC, &VC};
    for (int i = 0; i < 2; i++) {
        void *got = malloc(kc.nbytes);
        assert_non_null(got);
        tg_download(got, dev_caches[i]->data, kc.nbytes);
        bool same = memcmp(got, host_caches[i]->data, kc.nbytes) == 0;
        free(got);
        snprintf(what, sizeof what, "%s %s after the append", c->name, i ? "v_cache" : "k_cache");
        tg_record(what, same, same ? "bytes equal the CPU's" : "bytes differ from the CPU's");
        if (!same) fail_msg("%s: bytes differ from the CPU's", what);
    }
    snprintf(what, sizeof what, "%s y", c->name);
    expect_close(what, &y, Y.data, rtol_of(c->dt), 0.0);

    impl->free_priv(priv);
    tx_tensor *devs[] = {&Q, &K, &V, &Y, &KC, &VC, &CL};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) tg_dev_free(devs[i]->data);
    tg_dev_free(scratch);
    tx_tensor *hosts[] = {&q, &k, &v, &kc, &vc, &y, &cl};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) tx_tensor_release(hosts[i]);
}

static const cache_case cache_cases[] = {
    /* name, dt, b, h, hk, sq, cap, d, causal */
    {"cache bf16 gqa causal decode sq1 cap256 d64", BF16, 4, 12, 4, 1, 256, 64, 1},
    {"cache fp32 mha causal decode sq3 cap70 d128", F32, 3, 4, 4, 3, 70, 128, 1},
    {"cache fp32 gqa noncausal decode sq1 cap48 d32", F32, 3, 4, 2, 1, 48, 32, 0},
    {"cache bf16 gqa causal prefill sq37 cap160 d64", BF16, 3, 8, 2, 37, 160, 64, 1},
    {"cache fp32 mha noncausal prefill sq37 cap96 d64", F32, 2, 4, 4, 37, 96, 64, 0},
};

/* An optional argument is a cmocka test-name filter (wildcards * and ?). */
int main(int argc, char **argv)
{
    tg_require_gpu("test_gpu_te_attention");
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    teexec_status *st = tx_sdpa_cudnn_create(&g_cudnn);
    if (st) {
        fprintf(stderr, "test_gpu_te_attention: no cuDNN (%s): every case runs the fallback\n",
                teexec_status_message(st));
        tg_record("te attention cuDNN handle", 0, teexec_status_message(st));
        teexec_status_destroy(st);
        g_cudnn = NULL;
    } else {
        fprintf(stderr, "test_gpu_te_attention: cuDNN %zu\n", tx_sdpa_cudnn_version(g_cudnn));
    }
    enum { NC = sizeof(cases) / sizeof(cases[0]),
           N = NC + sizeof(cache_cases) / sizeof(cache_cases[0]) };
    struct CMUnitTest tests[N];
    for (size_t i = 0; i < NC; i++) {
        struct CMUnitTest t = {cases[i].name, run_case, NULL, NULL, (void *)&cases[i]};
        tests[i] = t;
    }
    for (size_t i = NC; i < N; i++) {
        struct CMUnitTest t = {cache_cases[i - NC].name, run_cache_case, NULL, NULL,
                               (void *)&cache_cases[i - NC]};
        tests[i] = t;
    }
    int rc = _cmocka_run_group_tests("test_gpu_te_attention", tests, N, NULL, NULL);
    tx_sdpa_cudnn_destroy(g_cudnn);
    return rc;
}
