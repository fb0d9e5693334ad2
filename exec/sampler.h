/*
 * sampler.h - choosing the next token from one row of logits: greedy,
 * temperature, top-k and top-p (nucleus), driven by a counter-based random
 * number generator so every draw is a pure function of (seed, stream,
 * counter) and a generation is reproducible whatever the batch it ran in.
 *
 * The order is the one Hugging Face's generate uses: divide by the
 * temperature, keep the k largest, then keep the smallest prefix (largest
 * first) whose probability reaches p, renormalize, draw. Ties are broken by
 * the lower token id everywhere (greedy included), so results do not
 * depend on the sort's stability.
 *
 * Ownership: a tx_sampler_ws owns two scratch arrays grown on demand and
 * freed by tx_sampler_ws_free. Thread-safety: the functions are pure apart
 * from the workspace; one workspace per thread.
 */
#ifndef TEEXEC_EXEC_SAMPLER_H
#define TEEXEC_EXEC_SAMPLER_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tx_sampling {
    double temperature; /* 0: greedy (argmax); else > 0 */
    uint32_t top_k;     /* 0: no limit */
    double top_p;       /* (0, 1]; 1: no limit */
    uint64_t seed;
} tx_sampling;

typedef struct tx_sampler_ws {
    size_t cap;
    uint32_t *idx;
    double *prob;
} tx_sampler_ws;

/* INVALID_ARGUMENT naming the bad field (temperature < 0 or not finite,
 * top_p outside (0, 1]). */
teexec_status *tx_sampling_check(const tx_sampling *s) TX_NODISCARD;

/* 64 well-mixed bits from (seed, stream, counter): a splitmix64-style
 * finalizer applied to the three words in turn. */
uint64_t tx_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter);

/* A uniform double in [0, 1) from the top 53 bits of tx_rng_bits. */
double tx_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter);

/* The distribution the sampler draws from: probs[i] for each of the n
 * tokens, zero for those top-k/top-p removed, summing to 1. Greedy puts 1
 * on the argmax. INVALID_ARGUMENT when n is 0 or a logit is NaN or +inf
 * (-inf is a token of probability 0; all -inf is refused too). */
teexec_status *tx_sample_probs(const tx_sampling *s, const float *logits, size_t n,
                               tx_sampler_ws *ws, double *probs) TX_NODISCARD;

/* Draws one token with the uniform number u in [0, 1): the first token (in
 * the sampler's order, largest probability first) whose cumulative
 * probability exceeds u. Greedy ignores u. */
teexec_status *tx_sample_with(const tx_sampling *s, const float *logits, size_t n, double u,
                              tx_sampler_ws *ws, int64_t *out_id) TX_NODISCARD;

/* tx_sample_with with u = tx_rng_uniform(s->seed, stream, counter). The
 * generator passes the sequence index as the stream and the new token's
 * position in its sequence as the counter. */
teexec_status *tx_sample(const tx_sampling *s, const float *logits, size_t n, uint64_t stream,
                         uint64_t counter, tx_sampler_ws *ws, int64_t *out_id) TX_NODISCARD;

void tx_sampler_ws_free(tx_sampler_ws *ws);

#endif
