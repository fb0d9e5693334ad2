/* quant_fp8.c - per-tensor FP8 (fp8-delayed and fp8-current), te-ops.md 4.3/4.4.
 *
 * q = sat_rn(fl32(x * scale)); the stored scale_inv is fl32(1 / scale)
 * (__frcp_rn). Current scaling derives the scale from this tensor's amax;
 * delayed scaling passes the scale it got from the history (and records
 * the amax measured here). Columnwise data is the transpose of the
 * rowwise bytes: same scale, so the same codes.
 */
/* fl32(a*b) must round on its own, as on the GPU: no FMA contraction. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "kernels/cpu/qtensor.h"

#include "base/numfmt.h"

#include <float.h>

teexec_status *tx_quant_fp8_tensor(const float *x, uint64_t rows, uint64_t cols,
                                   teexec_dtype src_type, const tx_quant_config *cfg,
                                   tx_qtensor *q)
{
    (void)src_type;
    uint64_t n = rows * cols;
    q->amax = tx_amax_f32(x, n);
    float fmt_max = tx_numfmt_max(q->fmt);
    if (cfg->use_given_scale) {
        q->scale = cfg->given_scale;
    } else {
        q->scale = tx_scale_from_amax(q->amax, fmt_max, cfg->power_2_scale, cfg->amax_epsilon,
                                      FLT_MAX);
    }
    q->scale_inv = 1.0f / q->scale;
    for (uint64_t m = 0; m < rows; m++) {
        for (uint64_t k = 0; k < cols; k++) {
            uint8_t b = tx_f32_to_fp8(q->fmt, x[m * cols + k] * q->scale, 1);
            if (q->usage & TX_QUSAGE_ROWWISE) q->row.data[m * cols + k] = b;
            if (q->usage & TX_QUSAGE_COLUMNWISE) q->col.data[k * rows + m] = b;
        }
    }
    return NULL;
}

void tx_dequant_fp8_tensor(const tx_qtensor *q, unsigned usage, float *out)
{
    uint64_t M = q->rows, K = q->cols;
    for (uint64_t m = 0; m < M; m++)
        for (uint64_t k = 0; k < K; k++) {
            uint8_t b = usage == TX_QUSAGE_ROWWISE ? q->row.data[m * K + k] : q->col.data[k * M + m];
            out[m * K + k] = tx_fp8_to_f32(q->fmt, b) * q->scale_inv;
        }
}
