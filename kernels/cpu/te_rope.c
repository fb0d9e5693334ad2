/*
 * te_rope.c - RotaryEmbedding, CPU (TE's apply_rotary_pos_emb semantics:
 * y = x·cos f + rot(x)·sin f on the first r channels of each head, the
 * rest pass through). rot pairs channel j with p(j) = j ± r/2 (halves) or
 * j ^ 1 (interleaved) and sign σ(j) = -1 for the first of a pair, so
 *     y[j]  = x[j]·c[j]  + σ(j)·x[p(j)]·s[j]
 *     dx[j] = dy[j]·c[j] − σ(j)·dy[p(j)]·s[p(j)]
 * The angles f come from the optional freqs input, else from base:
 * θ_i = pos·base^(−2i/r), f[j] = θ_(j mod r/2) (halves) or θ_(j/2)
 * (interleaved). freqs gets no gradient.
 *
 * Written once over REAL, compiled twice (this file includes itself;
 * te_real.h).
 */
#ifndef TE_PASS
#define TE_PASS
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include <math.h>
#include <stdlib.h>

typedef struct rope_geom {
    int64_t b, s, h, d, r;
    bool sbhd, interleaved;
} rope_geom;

static teexec_status *geom_of(tx_te_op_id op, const tx_te_attr_value *attrs, const tx_tensor *x,
                              const tx_tensor *freqs, rope_geom *g)
{
    if (x->rank != 4)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops RotaryEmbedding: x must have rank 4 (bshd or sbhd)");
    g->sbhd = attrs[TX_TE_A_ROPE_LAYOUT].i == TX_TE_LAYOUT_SBHD;
    g->interleaved = attrs[TX_TE_A_ROPE_INTERLEAVED].i != 0;
    g->b = g->sbhd ? x->dims[1] : x->dims[0];
    g->s = g->sbhd ? x->dims[0] : x->dims[1];
    g->h = x->dims[2];
    g->d = x->dims[3];
    if (freqs) {
        TX_TRY(tx_te_check_real(op, "freqs", freqs));
        if (freqs->rank != 2 || freqs->dims[0] < g->s)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "te.ops RotaryEmbedding: freqs must be [>= %lld, r]", (long long)g->s);
        g->r = freqs->dims[1];
    } else {
        g->r = attrs[TX_TE_A_ROPE_DIM].i ? attrs[TX_TE_A_ROPE_DIM].i : g->d;
        if (!(attrs[TX_TE_A_ROPE_BASE].f > 0.0))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops RotaryEmbedding: base must be > 0");
    }
    if (g->r < 2 || g->r > g->d || g->r % 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops RotaryEmbedding: the rotated width %lld must be even and in [2, %lld]",
                        (long long)g->r, (long long)g->d);
    return NULL;
}

#define TE_F64 0
#include "kernels/cpu/te_rope.c"
#undef TE_F64
#define TE_F64 1
#include "kernels/cpu/te_rope.c"
#undef TE_F64

teexec_status *tx_te_cpu_rope_fwd(const tx_te_fwd_args *a)
{
    const tx_tensor *x = a->input;
    const tx_tensor *freqs = a->n_extra_inputs > 0 ? a->extra_inputs[0] : NULL;
    TX_TRY(tx_te_check_real(a->op, "x", x));
    rope_geom g;
    TX_TRY(geom_of(a->op, a->attrs, x, freqs, &g));
    tx_shape s = tx_shape_of(x);
    TX_TRY(tx_te_check_real_shape(a->op, "y", a->output, &s));
    return x->dtype == TEEXEC_DTYPE_DOUBLE ? rope_run_f64(&g, a->attrs, freqs, x, a->output, false)
                                           : rope_run_f32(&g, a->attrs, freqs, x, a->output, false);
}

teexec_status *tx_te_cpu_rope_bwd(const tx_te_bwd_args *a)
{
    const tx_tensor *dy = a->grad_output;
    const tx_tensor *freqs = a->n_saved > 0 ? a->saved[0] : NULL;
    TX_TRY(tx_te_check_real(a->op, "dy", dy));
    if (!a->grad_input) return NULL;
    rope_geom g;
    TX_TRY(geom_of(a->op, a->attrs, dy, freqs, &g));
    tx_shape s = tx_shape_of(dy);
    TX_TRY(tx_te_check_real_shape(a->op, "dx", a->grad_input, &s));
    return dy->dtype == TEEXEC_DTYPE_DOUBLE
               ? rope_run_f64(&g, a->attrs, freqs, dy, a->grad_input, true)
               : rope_run_f32(&g, a->attrs, freqs, dy, a->grad_input, true);
}

#else /* a REAL pass */
#include "kernels/cpu/te_real.h"

/* backward: apply the transpose of the forward map. */
static teexec_status *FN(rope_run)(const rope_geom *g, const tx_te_attr_value *attrs,
                                   const tx_tensor *freqs, const tx_tensor *in, tx_tensor *out,
                                   bool backward)
{
    int64_t r = g->r, h2 = r / 2;
    REAL *xb = NULL, *fb = NULL;
    REAL *cs = tx_te_malloc((size_t)g->s * (size_t)r, sizeof(REAL));
    REAL *sn = tx_te_malloc((size_t)g->s * (size_t)r, sizeof(REAL));
    REAL *row = tx_te_malloc((size_t)g->d, sizeof(REAL));
    teexec_status *st = cs && sn && row ? NULL : tx_oom();
    if (!st && freqs) st = te_load(freqs, &fb);
    if (!st) st = te_load(in, &xb);
    if (st) goto done;
    REAL base = (REAL)attrs[TX_TE_A_ROPE_BASE].f;
    for (int64_t p = 0; p < g->s; p++)
        for (int64_t j = 0; j < r; j++) {
            REAL f;
            if (fb) {
                f = fb[p * r + j];
            } else {
                int64_t i = g->interleaved ? j / 2 : j % h2;
                f = (REAL)p * R_POW(base, K(-2) * (REAL)i / (REAL)r);
            }
            cs[p * r + j] = R_COS(f);
            sn[p * r + j] = R_SIN(f);
        }
    int64_t outer = g->sbhd ? g->s : g->b, inner = g->sbhd ? g->b : g->s;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < inner; q++)
            for (int64_t hh = 0; hh < g->h; hh++) {
                int64_t pos = g->sbhd ? o : q;
                REAL *x = xb + ((o * inner + q) * g->h + hh) * g->d;
                const REAL *c = cs + pos * r, *s = sn + pos * r;
                for (int64_t j = 0; j < r; j++) {
                    int64_t pj = g->interleaved ? (j ^ 1) : (j < h2 ? j + h2 : j - h2);
                    REAL sg = g->interleaved ? ((j & 1) ? K(1) : K(-1)) : (j < h2 ? K(-1) : K(1));
                    row[j] = backward ? x[j] * c[j] - sg * x[pj] * s[pj]
                                      : x[j] * c[j] + sg * x[pj] * s[j];
                }
                for (int64_t j = 0; j < r; j++) x[j] = row[j];
            }
    te_store(out, xb);
done:
    free(xb);
    free(fb);
    free(cs);
    free(sn);
    free(row);
    return st;
}

#endif
