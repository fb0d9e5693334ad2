/* quant_mxfp8.c - MXFP8 (E8M0 scale per 32 elements), te-ops.md 4.6.
 *
 * Per block: amax_b (NaN ignored); v = fl32(amax_b * fl32(1/max_norm)) -- a
 * multiplication by the rounded reciprocal, not a division; e = E8M0 of v
 * rounded up, saturating (tx_f32_to_e8m0(v, 1, UP), which is TE's
 * float_to_e8m0); element multiplier 2^(127-e) (e = 254 gives the float
 * subnormal 2^-127, e = 255 NaN); q = sat_rn(fl32(x * 2^(127-e))).
 * Dequantization: q * 2^(e-127), exact.
 * Rowwise: 1x32 blocks along K; columnwise: 32x1 blocks along M, data NOT
 * transposed; 2-D: one scale per 32x32 tile, both usages identical.
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

#include <math.h>

#define BLK 32u

/* 2^(127-e) as TE's exp2f_rcp builds it. */
static float e8m0_multiplier(uint8_t e)
{
    if (e == 255) return tx_bits_f32(0x7fc00000u);
    if (e == 254) return tx_bits_f32(0x00400000u);
    return tx_bits_f32((uint32_t)(254u - e) << 23);
}

static uint8_t block_exponent(float amax, float max_norm_rcp)
{
    return tx_f32_to_e8m0(amax * max_norm_rcp, 1, TX_E8M0_ROUND_UP);
}

teexec_status *tx_quant_mxfp8(const float *x, uint64_t rows, uint64_t cols,
                              const tx_quant_config *cfg, tx_qtensor *q)
{
    (void)cfg;
    const uint64_t M = rows, K = cols;
    const float rcp = 1.0f / tx_numfmt_max(q->fmt); /* fl32(1/448), fl32(1/57344) */
    bool row = q->usage & TX_QUSAGE_ROWWISE, col = q->usage & TX_QUSAGE_COLUMNWISE;
    uint8_t *rs = q->row.scale, *cs = q->col.scale;
    if (q->block_2d) {
        for (uint64_t i = 0; i < M / BLK; i++)
            for (uint64_t j = 0; j < K / BLK; j++) {
                float amax = 0.0f;
                for (uint64_t m = i * BLK; m < (i + 1) * BLK; m++)
                    for (uint64_t k = j * BLK; k < (j + 1) * BLK; k++)
                        amax = tx_amax_step(amax, x[m * K + k]);
                uint8_t e = block_exponent(amax, rcp);
                float mult = e8m0_multiplier(e);
                for (uint64_t m = i * BLK; m < (i + 1) * BLK; m++) {
                    if (row) rs[m * q->row.scale_cols + j] = e;
                    for (uint64_t k = j * BLK; k < (j + 1) * BLK; k++) {
                        uint8_t b = tx_f32_to_fp8(q->fmt, x[m * K + k] * mult, 1);
                        if (row) q->row.data[m * K + k] = b;
                        if (col) q->col.data[m * K + k] = b;
                    }
                }
                if (col)
                    for (uint64_t k = j * BLK; k < (j + 1) * BLK; k++) cs[i * q->col.scale_cols + k] = e;
            }
        return NULL;
    }
    if (row) {
        for (uint64_t m = 0; m < M; m++)
            for (uint64_t j = 0; j < K / BLK; j++) {
                const float *xb = x + m * K + j * BLK;
                float amax = 0.0f;
                for (uint64_t t = 0; t < BLK; t++) amax = tx_amax_step(amax, xb[t]);
                uint8_t e = block_exponent(amax, rcp);
                float mult = e8m0_multiplier(e);
                rs[m * q->row.scale_cols + j] = e;
                for (uint64_t t = 0; t < BLK; t++)
                    q->row.data[m * K + j * BLK + t] = tx_f32_to_fp8(q->fmt, xb[t] * mult, 1);
            }
    }
    if (col) {
        for (uint64_t i = 0; i < M / BLK; i++)
            for (uint64_t k = 0; k < K; k++) {
                float amax = 0.0f;
                for (uint64_t t = 0; t < BLK; t++) amax = tx_amax_step(amax, x[(i * BLK + t) * K + k]);
                uint8_t e = block_exponent(amax, rcp);
                float mult = e8m0_multiplier(e);
                cs[i * q->col.scale_cols + k] = e;
                for (uint64_t t = 0; t < BLK; t++) {
                    uint64_t p = (i * BLK + t) * K + k;
                    q->col.data[p] = tx_f32_to_fp8(q->fmt, x[p] * mult, 1);
                }
            }
    }
    return NULL;
}

void tx_dequant_mxfp8(const tx_qtensor *q, unsigned usage, float *out)
{
    const uint64_t M = q->rows, K = q->cols;
    bool col = usage == TX_QUSAGE_COLUMNWISE;
    const uint8_t *data = col ? q->col.data : q->row.data;
    const uint8_t *sc = col ? q->col.scale : q->row.scale;
    uint64_t ld = col ? q->col.scale_cols : q->row.scale_cols;
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t k = 0; k < K; k++) {
            uint8_t e = col ? sc[(m / BLK) * ld + k] : sc[m * ld + k / BLK];
            out[m * K + k] = tx_fp8_to_f32(q->fmt, data[m * K + k]) * tx_e8m0_to_f32(e);
        }
}
