/* quant_block.c - fp8-block (DeepSeek-style), te-ops.md 4.5.
 *
 * Per block: s = compute_scale_from_amax(amax_b, fmt_max, pow2, eps,
 * value_for_inf = largest finite value of the *source* dtype), q =
 * sat_rn(fl32(x * s)), stored scale_inv = fl32(1 / s) as FP32. 1-D: 1x128
 * blocks along K (rowwise) and, independently, along M (columnwise, data
 * stored transposed [K,M]). 2-D: one scale per 128x128 tile shared by both
 * usages, whose data are then transposes of each other. Scale layouts in
 * qtensor.h. A partial last block uses the elements that exist.
 */
/* fl32(a*b) must round on its own, as on the GPU: no FMA contraction. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/cpu/qtensor.h"

#include "base/numfmt.h"

#include <math.h>

#define BLK 128u

typedef struct blk_ctx {
    const float *x;
    uint64_t M, K;
    teexec_dtype fmt;
    float fmt_max, vfi, eps;
    bool pow2;
} blk_ctx;

static float block_scale(const blk_ctx *c, uint64_t m0, uint64_t m1, uint64_t k0, uint64_t k1)
{
    float amax = 0.0f;
    for (uint64_t m = m0; m < m1; m++)
        for (uint64_t k = k0; k < k1; k++) amax = tx_amax_step(amax, c->x[m * c->K + k]);
    return tx_scale_from_amax(amax, c->fmt_max, c->pow2, c->eps, c->vfi);
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

teexec_status *tx_quant_fp8_block(const float *x, uint64_t rows, uint64_t cols,
                                  teexec_dtype src_type, const tx_quant_config *cfg,
                                  tx_qtensor *q)
{
    blk_ctx c = {x, rows, cols, q->fmt, tx_numfmt_max(q->fmt), tx_numfmt_max(src_type),
                 cfg->amax_epsilon, cfg->power_2_scale};
    const uint64_t M = rows, K = cols;
    bool row = q->usage & TX_QUSAGE_ROWWISE, col = q->usage & TX_QUSAGE_COLUMNWISE;
    float *rs = q->row.scale, *cs = q->col.scale;
    if (q->block_2d) {
        for (uint64_t i = 0; i * BLK < M; i++) {
            for (uint64_t j = 0; j * BLK < K; j++) {
                uint64_t m1 = min_u64(M, (i + 1) * BLK), k1 = min_u64(K, (j + 1) * BLK);
                float s = block_scale(&c, i * BLK, m1, j * BLK, k1);
                float sinv = 1.0f / s;
                if (row) rs[i * q->row.scale_cols + j] = sinv;
                if (col) cs[j * q->col.scale_cols + i] = sinv;
                for (uint64_t m = i * BLK; m < m1; m++)
                    for (uint64_t k = j * BLK; k < k1; k++) {
                        uint8_t b = tx_f32_to_fp8(c.fmt, x[m * K + k] * s, 1);
                        if (row) q->row.data[m * K + k] = b;
                        if (col) q->col.data[k * M + m] = b;
                    }
            }
        }
        return NULL;
    }
    if (row) {
        for (uint64_t m = 0; m < M; m++)
            for (uint64_t j = 0; j * BLK < K; j++) {
                uint64_t k1 = min_u64(K, (j + 1) * BLK);
                float s = block_scale(&c, m, m + 1, j * BLK, k1);
                rs[j * q->row.scale_cols + m] = 1.0f / s;
                for (uint64_t k = j * BLK; k < k1; k++)
                    q->row.data[m * K + k] = tx_f32_to_fp8(c.fmt, x[m * K + k] * s, 1);
            }
    }
    if (col) {
        for (uint64_t k = 0; k < K; k++)
            for (uint64_t i = 0; i * BLK < M; i++) {
                uint64_t m1 = min_u64(M, (i + 1) * BLK);
                float s = block_scale(&c, i * BLK, m1, k, k + 1);
                cs[i * q->col.scale_cols + k] = 1.0f / s;
                for (uint64_t m = i * BLK; m < m1; m++)
                    q->col.data[k * M + m] = tx_f32_to_fp8(c.fmt, x[m * K + k] * s, 1);
            }
    }
    return NULL;
}

void tx_dequant_fp8_block(const tx_qtensor *q, unsigned usage, float *out)
{
    const uint64_t M = q->rows, K = q->cols;
    bool col = usage == TX_QUSAGE_COLUMNWISE;
    const float *sc = col ? q->col.scale : q->row.scale;
    uint64_t ld = col ? q->col.scale_cols : q->row.scale_cols;
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t k = 0; k < K; k++) {
            float sinv;
            uint8_t b;
            if (q->block_2d) sinv = col ? sc[(k / BLK) * ld + m / BLK] : sc[(m / BLK) * ld + k / BLK];
            else sinv = col ? sc[(m / BLK) * ld + k] : sc[(k / BLK) * ld + m];
            b = col ? q->col.data[k * M + m] : q->row.data[m * K + k];
            out[m * K + k] = tx_fp8_to_f32(q->fmt, b) * sinv;
        }
}
