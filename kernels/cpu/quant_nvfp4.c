/* quant_nvfp4.c - NVFP4 (E2M1 data, E4M3 scale per 16, FP32 global scale),
 * te-ops.md 4.7.
 *
 * Per usage, from the global amax A (rowwise: amax of X; columnwise: amax
 * of X^T, or of RHT(X^T) with the Hadamard transform):
 *   S_enc = fminf(fl32(2688 / A), FLT_MAX), 1 when A == 0 or S_enc == 0;
 *   S_dec = fl32(1 / S_enc);
 * per 16-block (1x16 along the stored rows; 16x16 tiles for 2-D):
 *   S_dec_b = e4m3_sat_rn(fminf(fl32(amax_b * fl32(S_enc * fl32(1/6))), FLT_MAX));
 *   m = fminf(fl32(1 / fl32(float(S_dec_b) * S_dec)), FLT_MAX);
 *   q = e2m1(fl32(x * m)), round to nearest even or stochastic.
 * Dequantization: fl32(fl32(q * S_dec_b) * S_dec).
 *
 * Stochastic rounding (grads): an element at linear position p of the
 * stored matrix (rowwise p = m*K + k over [M,K]; columnwise p = k*M + m over
 * [K,M]) takes byte p%16 (byte (p%16)%4, low byte first, of word (p%16)/4)
 * of Philox4x32-10(key = seed, counter = {p/16 + sr_offset, stream}) with
 * stream 0 for rowwise and 1 for columnwise. With that byte u, |y| between
 * grid neighbours lo < hi rounds up iff (|y| - lo) * 256 >= (256 - u) *
 * (hi - lo), computed exactly; that is PTX cvt.rs with 8 random bits and
 * TE's software fallback (add u/256 of a step, truncate). |y| >= 6
 * saturates, NaN gives +6, the sign of a zero result is kept.
 *
 * 2-D (weights): tile scales from 16x16 tiles of X; rowwise codes are
 * computed once and the columnwise data is their transpose (with SR the
 * rowwise draws are used).
 */
/* fl32(a*b) must round on its own, as on the GPU: no FMA contraction. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/cpu/qtensor.h"

#include "base/half.h"
#include "base/numfmt.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/philox.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#define BLK 16u

typedef struct fp4_ctx {
    float s_enc, s_dec, k; /* k = S_enc * fl32(1/6) */
    bool sr;
    uint64_t seed, offset, stream;
    uint64_t drawn_group; /* cache of the last Philox draw */
    bool have_draw;
    uint32_t draw[4];
} fp4_ctx;

static void ctx_init(fp4_ctx *c, float amax, const tx_quant_config *cfg, uint64_t stream)
{
    float s = fminf(2688.0f / amax, FLT_MAX); /* 448 * 6 */
    if (amax == 0.0f || s == 0.0f) s = 1.0f;
    c->s_enc = s;
    c->s_dec = 1.0f / s;
    c->k = s * (1.0f / 6.0f);
    c->sr = cfg->stochastic_rounding;
    c->seed = cfg->seed;
    c->offset = cfg->sr_offset;
    c->stream = stream;
    c->have_draw = false;
}

static uint8_t block_scale_code(const fp4_ctx *c, float block_amax)
{
    return tx_f32_to_e4m3fn(fminf(block_amax * c->k, FLT_MAX), 1);
}

static float block_multiplier(const fp4_ctx *c, uint8_t sb)
{
    return fminf(1.0f / (tx_e4m3fn_to_f32(sb) * c->s_dec), FLT_MAX);
}

static const float e2m1_grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static uint8_t e2m1_stochastic(float y, unsigned u)
{
    uint32_t bits = tx_f32_bits(y);
    uint8_t sign = (uint8_t)((bits >> 28) & 8u);
    if (isnan(y)) return 0x7;
    double a = fabs((double)y);
    if (a >= 6.0) return (uint8_t)(sign | 7u);
    unsigned lo = 0;
    while (lo < 6 && e2m1_grid[lo + 1] <= a) lo++;
    double step = (double)e2m1_grid[lo + 1] - (double)e2m1_grid[lo];
    bool up = (a - (double)e2m1_grid[lo]) * 256.0 >= (double)(256u - u) * step;
    return (uint8_t)(sign | (lo + (up ? 1u : 0u)));
}

static uint8_t encode_elem(fp4_ctx *c, float y, uint64_t p)
{
    if (!c->sr) return tx_f32_to_e2m1(y);
    uint64_t g = p / 16u;
    if (!c->have_draw || c->drawn_group != g) {
        tx_philox_draw(c->seed, c->stream, g + c->offset, c->draw);
        c->drawn_group = g;
        c->have_draw = true;
    }
    unsigned lane = (unsigned)(p % 16u);
    unsigned u = (c->draw[lane / 4u] >> (8u * (lane % 4u))) & 0xFFu;
    return e2m1_stochastic(y, u);
}

/* 1x16 blocks along the rows of Y[R, C] into packed data [R, C/2] and
 * compact scales [R][ld]. */
static void quantize_1d(const float *y, uint64_t R, uint64_t C, fp4_ctx *c, uint8_t *data,
                        uint8_t *scale, uint64_t ld)
{
    for (uint64_t r = 0; r < R; r++)
        for (uint64_t j = 0; j * BLK < C; j++) {
            uint64_t c0 = j * BLK, c1 = c0 + BLK < C ? c0 + BLK : C;
            float amax = 0.0f;
            for (uint64_t t = c0; t < c1; t++) amax = tx_amax_step(amax, y[r * C + t]);
            uint8_t sb = block_scale_code(c, amax);
            scale[r * ld + j] = sb;
            float mult = block_multiplier(c, sb);
            for (uint64_t t = c0; t < c1; t++) {
                uint64_t p = r * C + t;
                tx_subbyte_set(data, p, 4, encode_elem(c, y[p] * mult, p));
            }
        }
}

static void quantize_2d(const float *x, uint64_t M, uint64_t K, fp4_ctx *c, tx_qtensor *q)
{
    bool row = q->usage & TX_QUSAGE_ROWWISE, col = q->usage & TX_QUSAGE_COLUMNWISE;
    uint8_t *rs = q->row.scale, *cs = q->col.scale;
    for (uint64_t i = 0; i < M / BLK; i++)
        for (uint64_t j = 0; j < K / BLK; j++) {
            float amax = 0.0f;
            for (uint64_t m = i * BLK; m < (i + 1) * BLK; m++)
                for (uint64_t k = j * BLK; k < (j + 1) * BLK; k++)
                    amax = tx_amax_step(amax, x[m * K + k]);
            uint8_t sb = block_scale_code(c, amax);
            float mult = block_multiplier(c, sb);
            for (uint64_t m = i * BLK; m < (i + 1) * BLK; m++) {
                if (row) rs[m * q->row.scale_cols + j] = sb;
                for (uint64_t k = j * BLK; k < (j + 1) * BLK; k++) {
                    uint64_t p = m * K + k;
                    uint8_t code = encode_elem(c, x[p] * mult, p);
                    if (row) tx_subbyte_set(q->row.data, p, 4, code);
                    if (col) tx_subbyte_set(q->col.data, k * M + m, 4, code);
                }
            }
            if (col)
                for (uint64_t k = j * BLK; k < (j + 1) * BLK; k++) cs[k * q->col.scale_cols + i] = sb;
        }
}

teexec_status *tx_quant_nvfp4(const float *x, uint64_t rows, uint64_t cols,
                              teexec_dtype src_type, const tx_quant_config *cfg, tx_qtensor *q)
{
    const uint64_t M = rows, K = cols;
    bool row = q->usage & TX_QUSAGE_ROWWISE, col = q->usage & TX_QUSAGE_COLUMNWISE;
    fp4_ctx c;
    float amax_x = tx_amax_f32(x, M * K);
    if (q->block_2d) {
        float a = cfg->use_given_amax ? cfg->given_amax_row : amax_x;
        ctx_init(&c, a, cfg, 0);
        q->row.amax = q->col.amax = a;
        quantize_2d(x, M, K, &c, q);
        return NULL;
    }
    if (row) {
        float a = cfg->use_given_amax ? cfg->given_amax_row : amax_x;
        ctx_init(&c, a, cfg, 0);
        q->row.amax = a;
        quantize_1d(x, M, K, &c, q->row.data, q->row.scale, q->row.scale_cols);
    }
    if (col) {
        float *xt = malloc((size_t)(M * K) * sizeof(float) + 1);
        if (!xt) return tx_oom();
        for (uint64_t m = 0; m < M; m++)
            for (uint64_t k = 0; k < K; k++) xt[k * M + m] = x[m * K + k];
        if (q->rht) {
            /* RHT along the token dim of X^T, rounded to the source dtype
             * as TE's unfused transform writes it */
            teexec_dtype rt = src_type == TEEXEC_DTYPE_BFLOAT16 ? TEEXEC_DTYPE_BFLOAT16 : TEEXEC_DTYPE_FLOAT;
            for (uint64_t p = 0; p < M * K; p += 16) tx_rht16(xt + p, xt + p, rt);
        }
        float a = cfg->use_given_amax ? cfg->given_amax_col : (q->rht ? tx_amax_f32(xt, M * K) : amax_x);
        ctx_init(&c, a, cfg, 1);
        q->col.amax = a;
        quantize_1d(xt, K, M, &c, q->col.data, q->col.scale, q->col.scale_cols);
        free(xt);
    }
    return NULL;
}

void tx_dequant_nvfp4(const tx_qtensor *q, unsigned usage, float *out)
{
    const uint64_t M = q->rows, K = q->cols;
    bool col = usage == TX_QUSAGE_COLUMNWISE;
    const tx_qdata *d = col ? &q->col : &q->row;
    float s = fminf(2688.0f / d->amax, FLT_MAX);
    if (d->amax == 0.0f || s == 0.0f) s = 1.0f;
    float s_dec = 1.0f / s;
    const uint8_t *sc = d->scale;
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t k = 0; k < K; k++) {
            uint64_t p = col ? k * M + m : m * K + k;
            uint8_t sb = col ? sc[k * d->scale_cols + m / BLK] : sc[m * d->scale_cols + k / BLK];
            float v = tx_e2m1_to_f32((uint8_t)tx_subbyte_get(d->data, p, 4));
            out[m * K + k] = (v * tx_e4m3fn_to_f32(sb)) * s_dec;
        }
}
