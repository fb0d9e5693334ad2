/*
 * te_cases.c - the shared op instances (te_cases.h). Shapes are small and
 * random (seeded) so finite differences over every element stay fast.
 */
#include "te_cases.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#define D TEEXEC_DTYPE_DOUBLE
#define DIMS(...) (int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static void in(te_case *c, const int64_t *dims, int rank, double lo, double hi)
{
    tc_fill(&c->in, D, rank, dims, 1000 + (uint64_t)c->op, lo, hi);
}

static void ex(te_case *c, int i, const int64_t *dims, int rank, double lo, double hi)
{
    tc_fill(&c->ex[i], D, rank, dims, 2000 + 10 * (uint64_t)c->op + (uint64_t)i, lo, hi);
    c->ex_present[i] = true;
}

static void par(te_case *c, const int64_t *dims, int rank, double lo, double hi)
{
    int i = c->n_par++;
    tc_fill(&c->par[i], D, rank, dims, 3000 + 100 * (uint64_t)c->op + (uint64_t)i, lo, hi);
}

static void ints_tensor(tx_tensor *t, const int64_t *vals, int n)
{
    int64_t d = n;
    assert_null(tx_tensor_alloc(t, TEEXEC_DTYPE_INT64, 1, &d));
    memcpy(t->data, vals, (size_t)n * sizeof(int64_t));
}

static void unary(te_case *c, tx_te_op_id op) { tc_init(c, op); in(c, DIMS(3, 5), -2, 2); }
static void gated(te_case *c, tx_te_op_id op) { tc_init(c, op); in(c, DIMS(2, 3, 6), -2, 2); }

/* Each builder is one case; several may exercise the same op. */
static void b_linear(te_case *c) { tc_init(c, TX_TE_LINEAR); in(c, DIMS(2, 3, 4), -1, 1); par(c, DIMS(5, 4), -1, 1); }
static void b_bias(te_case *c) { tc_init(c, TX_TE_BIAS); in(c, DIMS(3, 5), -1, 1); par(c, DIMS(5), -1, 1); }
static void b_ln(te_case *c)
{
    tc_init(c, TX_TE_LAYER_NORM);
    in(c, DIMS(3, 6), -1, 2);
    par(c, DIMS(6), 0.5, 1.5);
    par(c, DIMS(6), -0.5, 0.5);
}
static void b_ln_zcg_2d(te_case *c)
{
    tc_init(c, TX_TE_LAYER_NORM);
    c->attrs[TX_TE_A_NORM_ZCG].i = 1;
    c->attrs[TX_TE_A_NORM_EPS].f = 1e-3;
    in(c, DIMS(4, 2, 3), -1, 1);
    par(c, DIMS(2, 3), -0.5, 0.5);
    par(c, DIMS(2, 3), -0.5, 0.5);
}
static void b_rms(te_case *c) { tc_init(c, TX_TE_RMS_NORM); in(c, DIMS(3, 6), -1, 1); par(c, DIMS(6), 0.5, 1.5); }
static void b_rms_zcg(te_case *c)
{
    tc_init(c, TX_TE_RMS_NORM);
    c->attrs[TX_TE_A_NORM_ZCG].i = 1;
    in(c, DIMS(2, 2, 5), -1, 1);
    par(c, DIMS(5), -0.5, 0.5);
}
static void b_l2(te_case *c) { tc_init(c, TX_TE_L2_NORMALIZATION); in(c, DIMS(3, 5), -1, 1); }
static void b_gelu(te_case *c) { unary(c, TX_TE_GELU); }
static void b_gelu_erf(te_case *c) { unary(c, TX_TE_GELU); c->attrs[TX_TE_A_GELU_APPROX].i = TX_TE_GELU_ERF; }
static void b_qgelu(te_case *c) { unary(c, TX_TE_QGELU); }
static void b_relu(te_case *c) { unary(c, TX_TE_RELU); }
static void b_srelu(te_case *c) { unary(c, TX_TE_SRELU); }
static void b_silu(te_case *c) { unary(c, TX_TE_SILU); }
static void b_glu(te_case *c) { gated(c, TX_TE_GLU); }
static void b_geglu(te_case *c) { gated(c, TX_TE_GEGLU); }
static void b_geglu_erf(te_case *c) { gated(c, TX_TE_GEGLU); c->attrs[TX_TE_A_GELU_APPROX].i = TX_TE_GELU_ERF; }
static void b_qgeglu(te_case *c) { gated(c, TX_TE_QGEGLU); }
static void b_reglu(te_case *c) { gated(c, TX_TE_REGLU); }
static void b_sreglu(te_case *c) { gated(c, TX_TE_SREGLU); }
static void b_swiglu(te_case *c) { gated(c, TX_TE_SWIGLU); }
static void b_clamped(te_case *c)
{
    gated(c, TX_TE_CLAMPED_SWIGLU);
    c->attrs[TX_TE_A_CLAMP_LIMIT].f = 0.7; /* so both clamps bite on [-2, 2) */
    c->attrs[TX_TE_A_CLAMP_ALPHA].f = 1.5;
    c->attrs[TX_TE_A_CLAMP_OFFSET].f = 0.5;
}
static void b_scaled_swiglu(te_case *c)
{
    tc_init(c, TX_TE_SCALED_SWIGLU);
    in(c, DIMS(3, 8), -2, 2);
    ex(c, 0, DIMS(3), 0, 1);
}
static void b_scaled_srelu(te_case *c)
{
    tc_init(c, TX_TE_SCALED_SRELU);
    in(c, DIMS(2, 3, 4), -2, 2);
    ex(c, 0, DIMS(2, 3), 0, 1);
}
/* SiTU with small caps so both tanh soft caps bend on [-2, 2). */
static void b_situ(te_case *c)
{
    gated(c, TX_TE_SITUGLU);
    c->attrs[TX_TE_A_SITU_BETA1].f = 1.5;
    c->attrs[TX_TE_A_SITU_BETA2].f = 0.8;
}
static void b_situ_default(te_case *c) { gated(c, TX_TE_SITUGLU); }
static void b_scaled_situ(te_case *c)
{
    tc_init(c, TX_TE_SCALED_SITUGLU);
    c->attrs[TX_TE_A_SITU_BETA1].f = 0.9;
    c->attrs[TX_TE_A_SITU_BETA2].f = 1.2;
    in(c, DIMS(2, 3, 6), -2, 2);
    ex(c, 0, DIMS(2, 3), -1, 1);
}
static void b_scaled_clamped(te_case *c)
{
    tc_init(c, TX_TE_SCALED_CLAMPED_QGEGLU);
    c->attrs[TX_TE_A_CLAMP_LIMIT].f = 0.7;
    c->attrs[TX_TE_A_CLAMP_ALPHA].f = 1.5;
    c->attrs[TX_TE_A_CLAMP_OFFSET].f = 0.5;
    in(c, DIMS(3, 8), -2, 2);
    ex(c, 0, DIMS(3), 0, 1);
}
static void b_dropout(te_case *c)
{
    tc_init(c, TX_TE_DROPOUT);
    c->attrs[TX_TE_A_DROPOUT_P].f = 0.3;
    c->attrs[TX_TE_A_DROPOUT_SEED].i = 7;
    c->rng_offset = 3;
    in(c, DIMS(5, 7), -1, 1);
}
static void b_quantize(te_case *c) { tc_init(c, TX_TE_QUANTIZE); in(c, DIMS(2, 3), -1, 1); }
static void b_reshape(te_case *c)
{
    tc_init(c, TX_TE_RESHAPE);
    c->ints[0] = 3;
    c->ints[1] = -1;
    c->attrs[TX_TE_A_RESHAPE_SHAPE].ints = c->ints;
    c->attrs[TX_TE_A_RESHAPE_SHAPE].n_ints = 2;
    in(c, DIMS(2, 3, 2), -1, 1);
}
static void b_identity(te_case *c) { tc_init(c, TX_TE_IDENTITY); in(c, DIMS(4), -1, 1); }
static void b_cscale(te_case *c) { tc_init(c, TX_TE_CONSTANT_SCALE); c->attrs[TX_TE_A_SCALE].f = -2.5; in(c, DIMS(2, 3), -1, 1); }
static void b_add_extra(te_case *c)
{
    tc_init(c, TX_TE_ADD_EXTRA_INPUT);
    in(c, DIMS(2, 4), -1, 1);
    ex(c, 0, DIMS(2, 4), -1, 1);
}
static void b_make_extra(te_case *c) { tc_init(c, TX_TE_MAKE_EXTRA_OUTPUT); in(c, DIMS(3, 2), -1, 1); }
static void b_grouped(te_case *c)
{
    tc_init(c, TX_TE_GROUPED_LINEAR);
    c->attrs[TX_TE_A_GL_NUM_GROUPS].i = 3;
    in(c, DIMS(10, 4), -1, 1);
    ints_tensor(&c->ex[0], (int64_t[]){2, 0, 5}, 3); /* rows 7..9 in no group */
    c->ex_present[0] = true;
    for (int g = 0; g < 3; g++) par(c, DIMS(3, 4), -1, 1);
    for (int g = 0; g < 3; g++) par(c, DIMS(3), -1, 1);
}
static void b_grouped_nobias(te_case *c)
{
    tc_init(c, TX_TE_GROUPED_LINEAR);
    c->attrs[TX_TE_A_GL_NUM_GROUPS].i = 2;
    c->attrs[TX_TE_A_GL_BIAS].i = 0;
    in(c, DIMS(2, 3, 3), -1, 1);
    ints_tensor(&c->ex[0], (int64_t[]){4, 2}, 2);
    c->ex_present[0] = true;
    for (int g = 0; g < 2; g++) par(c, DIMS(2, 3), -1, 1);
}
static void bool_mask(tx_tensor *t, const int64_t *dims, uint64_t seed)
{
    tc_fill(t, D, 4, dims, seed, 0, 1);
    tx_tensor b = {0};
    assert_null(tx_tensor_alloc(&b, TEEXEC_DTYPE_BOOL, 4, dims));
    for (uint64_t i = 0; i < b.numel; i++) ((uint8_t *)b.data)[i] = tc_get(t, i) < 0.3;
    tx_tensor_release(t);
    *t = b;
}
static void b_dpa_causal_gqa(te_case *c)
{
    tc_init(c, TX_TE_DOT_PRODUCT_ATTENTION);
    c->attrs[TX_TE_A_DPA_CAUSAL].i = 1;
    in(c, DIMS(2, 3, 4, 5), -1, 1);     /* b=2, s_q=3, h=4, d=5 */
    ex(c, 0, DIMS(2, 4, 2, 5), -1, 1);  /* s_kv=4, h_kv=2 */
    ex(c, 1, DIMS(2, 4, 2, 3), -1, 1);  /* d_v=3 */
    bool_mask(&c->ex[2], (int64_t[]){2, 1, 3, 4}, 77);
    c->ex_present[2] = true;
}
static void b_dpa_sbhd_float_mask(te_case *c)
{
    tc_init(c, TX_TE_DOT_PRODUCT_ATTENTION);
    c->attrs[TX_TE_A_DPA_LAYOUT].i = TX_TE_LAYOUT_SBHD;
    c->attrs[TX_TE_A_DPA_SCALE].f = 0.7;
    in(c, DIMS(3, 2, 2, 4), -1, 1);     /* s_q=3, b=2, h=2, d=4 */
    ex(c, 0, DIMS(3, 2, 1, 4), -1, 1);  /* s_kv=3, h_kv=1 */
    ex(c, 1, DIMS(3, 2, 1, 4), -1, 1);
    ex(c, 2, DIMS(1, 2, 3, 3), -1, 1);  /* float mask per head */
}
static void b_rope(te_case *c)
{
    tc_init(c, TX_TE_ROTARY_EMBEDDING);
    c->attrs[TX_TE_A_ROPE_DIM].i = 4;
    c->attrs[TX_TE_A_ROPE_BASE].f = 100.0;
    in(c, DIMS(2, 3, 2, 6), -1, 1);
}
static void b_rope_interleaved(te_case *c)
{
    tc_init(c, TX_TE_ROTARY_EMBEDDING);
    c->attrs[TX_TE_A_ROPE_LAYOUT].i = TX_TE_LAYOUT_SBHD;
    c->attrs[TX_TE_A_ROPE_INTERLEAVED].i = 1;
    in(c, DIMS(3, 2, 2, 4), -1, 1);
    ex(c, 0, DIMS(5, 4), -3, 3);
}
static void b_embedding(te_case *c)
{
    tc_init(c, TX_TE_EMBEDDING);
    int64_t d[2] = {2, 3};
    assert_null(tx_tensor_alloc(&c->in, TEEXEC_DTYPE_INT64, 2, d));
    int64_t ids[6] = {4, 0, 2, 2, 4, 1};
    memcpy(c->in.data, ids, sizeof ids);
    par(c, DIMS(5, 4), -1, 1);
}
static void b_all_gather(te_case *c) { tc_init(c, TX_TE_ALL_GATHER); in(c, DIMS(2, 2), -1, 1); }
static void b_all_reduce(te_case *c) { tc_init(c, TX_TE_ALL_REDUCE); in(c, DIMS(2, 2), -1, 1); }
static void b_reduce_scatter(te_case *c) { tc_init(c, TX_TE_REDUCE_SCATTER); in(c, DIMS(2, 2), -1, 1); }

static void (*const builders[])(te_case *) = {
    b_linear, b_bias, b_ln, b_ln_zcg_2d, b_rms, b_rms_zcg, b_l2, b_gelu, b_gelu_erf, b_qgelu,
    b_relu, b_srelu, b_silu, b_glu, b_geglu, b_geglu_erf, b_qgeglu, b_reglu, b_sreglu,
    b_swiglu, b_clamped, b_scaled_swiglu, b_scaled_srelu, b_situ, b_situ_default,
    b_scaled_situ, b_scaled_clamped, b_dropout, b_quantize, b_reshape,
    b_identity, b_cscale, b_add_extra, b_make_extra, b_grouped, b_grouped_nobias,
    b_dpa_causal_gqa, b_dpa_sbhd_float_mask, b_rope, b_rope_interleaved, b_embedding,
    b_all_gather, b_all_reduce, b_reduce_scatter,
};

int tc_case_count(void) { return (int)(sizeof builders / sizeof builders[0]); }

void tc_case_build(int i, te_case *c) { builders[i](c); }
