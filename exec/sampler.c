/* sampler.c - greedy / temperature / top-k / top-p token choice and the
 * counter-based RNG behind it (exec/sampler.h). */
#include "exec/sampler.h"

#include <math.h>
#include <stdlib.h>

teexec_status *tx_sampling_check(const tx_sampling *s)
{
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "sampling options are NULL");
    if (!(s->temperature >= 0) || !isfinite(s->temperature))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "temperature must be finite and >= 0 (0 = greedy), not %g", s->temperature);
    if (!(s->top_p > 0 && s->top_p <= 1))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "top_p must be in (0, 1], not %g", s->top_p);
    return NULL;
}

/* splitmix64's finalizer: a bijection on 64 bits with full avalanche. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

uint64_t tx_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
    /* Each word goes through the finalizer after being added with a
     * distinct odd constant, so (seed, stream, counter) triples that differ
     * in any word give unrelated outputs. */
    uint64_t x = mix64(seed + 0x9E3779B97F4A7C15ull);
    x = mix64(x ^ (stream + 0xD1B54A32D192ED03ull));
    x = mix64(x ^ (counter + 0x8CB92BA72F3D8DD7ull));
    return x;
}

double tx_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
    return (double)(tx_rng_bits(seed, stream, counter) >> 11) * (1.0 / 9007199254740992.0);
}

void tx_sampler_ws_free(tx_sampler_ws *ws)
{
    if (!ws) return;
    free(ws->idx);
    free(ws->prob);
    ws->idx = NULL;
    ws->prob = NULL;
    ws->cap = 0;
}

static teexec_status *ws_reserve(tx_sampler_ws *ws, size_t n)
{
    if (ws->cap >= n) return NULL;
    if (n > SIZE_MAX / (2 * sizeof(uint32_t)) || n > UINT32_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "vocabulary of %zu tokens is too large", n);
    uint32_t *idx = realloc(ws->idx, 2 * n * sizeof(*idx));
    if (!idx) return tx_oom();
    ws->idx = idx;
    double *prob = realloc(ws->prob, n * sizeof(*prob));
    if (!prob) return tx_oom();
    ws->prob = prob;
    ws->cap = n;
    return NULL;
}

/* The sampler's total order: larger logit first, then lower id. */
static int before(const float *l, uint32_t a, uint32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void sift_down(const float *l, uint32_t *h, size_t n, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && before(l, h[c + 1], h[c])) c++;
        if (!before(l, h[c], h[i])) return;
        uint32_t t = h[c];
        h[c] = h[i];
        h[i] = t;
        i = c;
    }
}

static uint32_t heap_pop(const float *l, uint32_t *h, size_t *n)
{
    uint32_t top = h[0];
    h[0] = h[--*n];
    sift_down(l, h, *n, 0);
    return top;
}

/* Fills ws->idx[cap..cap+*kept) with the kept tokens in order and
 * ws->prob[0..*kept) with their normalized probabilities. */
static teexec_status *prepare(const tx_sampling *s, const float *logits, size_t n,
                              tx_sampler_ws *ws, size_t *kept)
{
    TX_TRY(tx_sampling_check(s));
    if (!logits || n == 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no logits to sample from");
    TX_TRY(ws_reserve(ws, n));
    uint32_t *heap = ws->idx, *order = ws->idx + ws->cap;
    size_t nfinite = 0;
    int64_t best = -1;
    for (size_t i = 0; i < n; i++) {
        float v = logits[i];
        if (isnan(v) || v == INFINITY)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "logit %zu is %s", i,
                            isnan(v) ? "NaN" : "+inf");
        if (v == -INFINITY) continue;
        heap[nfinite++] = (uint32_t)i;
        if (best < 0 || v > logits[best]) best = (int64_t)i;
    }
    if (nfinite == 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "every logit is -inf: nothing to sample");
    if (s->temperature == 0 || s->top_k == 1) {
        order[0] = (uint32_t)best;
        ws->prob[0] = 1.0;
        *kept = 1;
        return NULL;
    }
    for (size_t i = nfinite / 2; i-- > 0;) sift_down(logits, heap, nfinite, i);
    size_t k = s->top_k && s->top_k < nfinite ? s->top_k : nfinite;
    double mx = logits[heap[0]], inv_t = 1.0 / s->temperature, z = 0;
    size_t popped = 0, hn = nfinite;
    if (k < nfinite) {
        /* top-k first: the softmax is over the k survivors */
        for (; popped < k; popped++) {
            order[popped] = heap_pop(logits, heap, &hn);
            z += exp(((double)logits[order[popped]] - mx) * inv_t);
        }
    } else {
        for (size_t i = 0; i < n; i++)
            if (logits[i] != -INFINITY) z += exp(((double)logits[i] - mx) * inv_t);
    }
    /* top-p: keep a token while the mass before it is below p */
    double cum = 0;
    size_t m = 0;
    while (m < k) {
        if (m == popped) order[popped++] = heap_pop(logits, heap, &hn);
        if (m > 0 && s->top_p < 1 && cum >= s->top_p) break;
        double w = exp(((double)logits[order[m]] - mx) * inv_t);
        ws->prob[m] = w;
        cum += w / z;
        m++;
    }
    double kept_w = 0;
    for (size_t j = 0; j < m; j++) kept_w += ws->prob[j];
    for (size_t j = 0; j < m; j++) ws->prob[j] /= kept_w;
    *kept = m;
    return NULL;
}

teexec_status *tx_sample_probs(const tx_sampling *s, const float *logits, size_t n,
                               tx_sampler_ws *ws, double *probs)
{
    size_t kept = 0;
    TX_TRY(prepare(s, logits, n, ws, &kept));
    for (size_t i = 0; i < n; i++) probs[i] = 0;
    for (size_t j = 0; j < kept; j++) probs[ws->idx[ws->cap + j]] = ws->prob[j];
    return NULL;
}

teexec_status *tx_sample_with(const tx_sampling *s, const float *logits, size_t n, double u,
                              tx_sampler_ws *ws, int64_t *out_id)
{
    size_t kept = 0;
    TX_TRY(prepare(s, logits, n, ws, &kept));
    const uint32_t *order = ws->idx + ws->cap;
    double cum = 0;
    for (size_t j = 0; j < kept; j++) {
        cum += ws->prob[j];
        if (u < cum) {
            *out_id = order[j];
            return NULL;
        }
    }
    *out_id = order[kept - 1]; /* u within rounding of 1 */
    return NULL;
}

teexec_status *tx_sample(const tx_sampling *s, const float *logits, size_t n, uint64_t stream,
                         uint64_t counter, tx_sampler_ws *ws, int64_t *out_id)
{
    uint64_t seed = s ? s->seed : 0;
    return tx_sample_with(s, logits, n, tx_rng_uniform(seed, stream, counter), ws, out_id);
}
