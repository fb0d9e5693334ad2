/*
 * te_dropout.c - Dropout, CPU, with the mask drawn from Philox4x32-10 so a
 * GPU kernel can draw the very same mask.
 *
 * The draw (documented in docs/te-ops.md): element i belongs to chunk
 * c = i / 16; Philox4x32-10 with counter {lo(c), hi(c), lo(offset),
 * hi(offset)} and key {lo(seed), hi(seed)} gives four 32-bit words = 16
 * bytes, little-endian within each word; byte (i mod 16) decides element i:
 * dropped iff byte < floor(p·256), as Transformer Engine's fused dropout
 * does (so p acts in steps of 1/256), kept values are scaled by 1/(1 - p)
 * with the exact p. The saved mask is one bit per element, bit (i mod 8) of
 * byte i / 8, 1 = kept.
 *
 * The offset is the caller's: the trainer gives each step and node its own
 * (tx_train_rng_offset, exec/train_internal.h) and hands the saved mask to
 * the backward; inference (training false) is the identity and draws none.
 */
#include "kernels/cpu/philox.h"
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Fills mask (ceil(n/8) bytes) for n elements. */
static void draw_mask(uint64_t seed, uint64_t offset, double p, uint64_t n, uint8_t *mask)
{
    unsigned threshold = (unsigned)floor(p * 256.0);
    memset(mask, 0, (size_t)((n + 7) / 8));
    for (uint64_t c = 0; c * 16 < n; c++) {
        uint32_t w[4];
        tx_philox_draw(seed, offset, c, w);
        for (unsigned j = 0; j < 16 && c * 16 + j < n; j++) {
            unsigned byte = (w[j / 4] >> (8 * (j % 4))) & 0xffu;
            uint64_t i = c * 16 + j;
            if (byte >= threshold) mask[i / 8] |= (uint8_t)(1u << (i % 8));
        }
    }
}

static teexec_status *apply(const tx_tensor *in, const uint8_t *mask, double p, tx_tensor *out)
{
    uint64_t n = in->numel;
    if (in->dtype == TEEXEC_DTYPE_DOUBLE) {
        double *b = NULL;
        TX_TRY(tx_te_load_f64(in, &b));
        double scale = 1.0 / (1.0 - p);
        for (uint64_t i = 0; i < n; i++) b[i] = (mask[i / 8] >> (i % 8)) & 1u ? b[i] * scale : 0.0;
        tx_te_store_f64(out, b);
        free(b);
    } else {
        float *b = NULL;
        TX_TRY(tx_te_load_f32(in, &b));
        float scale = (float)(1.0 / (1.0 - p));
        for (uint64_t i = 0; i < n; i++) b[i] = (mask[i / 8] >> (i % 8)) & 1u ? b[i] * scale : 0.0f;
        tx_te_store_f32(out, b);
        free(b);
    }
    return NULL;
}

teexec_status *tx_te_cpu_dropout_fwd(const tx_te_fwd_args *a)
{
    const tx_tensor *x = a->input;
    double p = a->attrs[TX_TE_A_DROPOUT_P].f;
    TX_TRY(tx_te_check_real(a->op, "x", x));
    tx_shape s = tx_shape_of(x);
    TX_TRY(tx_te_check_real_shape(a->op, "y", a->output, &s));
    if (!(p >= 0.0 && p < 1.0))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops Dropout: p must be in [0, 1), got %g", p);
    if (!a->training) {
        tx_te_convert_copy(a->output, x);
        return NULL;
    }
    tx_tensor *mask_t = a->aux && a->n_aux > 0 ? a->aux[0] : NULL;
    tx_shape ms = {1, {(int64_t)((x->numel + 7) / 8)}};
    if (mask_t) TX_TRY(tx_te_check_out(a->op, "mask", mask_t, TEEXEC_DTYPE_UINT8, &ms));
    uint8_t *mask = mask_t ? mask_t->data : tx_te_malloc((size_t)ms.dims[0], 1);
    if (!mask) return tx_oom();
    draw_mask((uint64_t)a->attrs[TX_TE_A_DROPOUT_SEED].i, a->rng_offset, p, x->numel, mask);
    teexec_status *st = apply(x, mask, p, a->output);
    if (!mask_t) free(mask);
    return st;
}

teexec_status *tx_te_cpu_dropout_bwd(const tx_te_bwd_args *a)
{
    const tx_tensor *dy = a->grad_output;
    double p = a->attrs[TX_TE_A_DROPOUT_P].f;
    TX_TRY(tx_te_check_real(a->op, "dy", dy));
    if (!a->grad_input) return NULL;
    tx_shape s = tx_shape_of(dy);
    TX_TRY(tx_te_check_real_shape(a->op, "dx", a->grad_input, &s));
    tx_shape ms = {1, {(int64_t)((dy->numel + 7) / 8)}};
    if (a->n_saved < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops Dropout: the saved mask is missing");
    TX_TRY(tx_te_check_out(a->op, "saved mask", a->saved[0], TEEXEC_DTYPE_UINT8, &ms));
    if (!(p >= 0.0 && p < 1.0))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops Dropout: p must be in [0, 1), got %g", p);
    return apply(dy, a->saved[0]->data, p, a->grad_input);
}
