/*
 * gemm_select.h - the host-only half of cuBLASLt algorithm selection
 * (gemm_lt.h holds the half that talks to the device).
 *
 *  - tx_gemm_key: everything the chosen algorithm may depend on (shapes,
 *    leading dims, transposes, dtypes, epilogue, scale modes, flags and the
 *    alignment class of every pointer), built from a tx_gemm_desc and the
 *    call's pointers; compared and hashed as bytes.
 *  - tx_gemm_cache: key -> slot index (the caller keeps the slots), an
 *    open-addressing table that grows; lookups allocate nothing.
 *  - autotuning settings: TEEXEC_GEMM_AUTOTUNE ("0"/"off"/"false"/"no":
 *    take cuBLASLt's first heuristic answer; unset or anything else: time
 *    the first TX_GEMM_TUNE_DEFAULT_CANDIDATES answers in
 *    TX_GEMM_TUNE_DEFAULT_ROUNDS pass (more passes were not measured
 *    faster on the H200, bench/results/gpu_mlp_speed_2026-12-01.md); an
 *    integer N >= 2:
 *    N answers, at most TX_GEMM_TUNE_MAX_CANDIDATES; "NxR": N answers in R
 *    passes, at most TX_GEMM_TUNE_MAX_ROUNDS). Deterministic
 *    executors never time: which algorithm wins a timing race can differ
 *    between runs, and each algorithm rounds differently.
 *  - the choice among timed candidates and the number of timed repeats;
 *  - whether repeating a GEMM for timing leaves its outputs as one run
 *    would (no written range overlaps a read range).
 *
 * No CUDA call and no device access here: pointers are only compared, so
 * the whole file is testable without a GPU.
 *
 * Ownership: a cache owns its table (tx_gemm_cache_destroy frees it); keys
 * and configs are plain values. Returned statuses belong to the caller.
 * Thread-safety: a cache is used by one thread at a time; every other
 * function is pure and thread-safe.
 */
#ifndef TEEXEC_KERNELS_CUDA_GEMM_SELECT_H
#define TEEXEC_KERNELS_CUDA_GEMM_SELECT_H

#include "kernels/cuda/gemm_lt.h" /* tx_gemm_desc, tx_gemm_tune_config: no CUDA types */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- description helpers (shared with gemm_lt.c) ---------------------- */

/* Stored rows / columns of A and B (column-major, before op()). */
int64_t tx_gemm_rows_a(const tx_gemm_desc *d);
int64_t tx_gemm_cols_a(const tx_gemm_desc *d);
int64_t tx_gemm_rows_b(const tx_gemm_desc *d);
int64_t tx_gemm_cols_b(const tx_gemm_desc *d);
/* ld, or `rows` when ld is 0 (packed). */
int64_t tx_gemm_ld_or(int64_t ld, int64_t rows);
/* C's dtype (c_type, or D's; BF16 for an FP8 D), the bias dtype, aux_ld. */
teexec_dtype tx_gemm_c_type(const tx_gemm_desc *d);
teexec_dtype tx_gemm_bias_type(const tx_gemm_desc *d);
int64_t tx_gemm_aux_ld(const tx_gemm_desc *d);

/* ---- key ---------------------------------------------------------------- */

typedef struct tx_gemm_key {
    int64_t m, n, k, lda, ldb, ldc, ldd, aux_ld;
    int32_t transa, transb;
    int32_t a_type, b_type, c_type, d_type, bias_type;
    int32_t epilogue, a_scale_mode, b_scale_mode;
    int32_t fast_accum, tf32, device_alpha, beta_nonzero;
    int32_t has_d_scale, has_amax_d;
    /* largest power of two (<= 256) dividing each pointer (and, batched,
     * each operand's batch stride in bytes); 256 for NULL */
    int32_t align_a, align_b, align_c, align_d, align_bias, align_aux;
    /* strided batch: count (0: one GEMM) and element strides */
    int64_t batch_count, stride_a, stride_b, stride_c, stride_d;
} tx_gemm_key;

/* Fills *k (every byte, padding included: keys compare as bytes). C is
 * the C pointer the GEMM will be given (after aliasing to D). */
void tx_gemm_key_make(const tx_gemm_desc *d, const void *A, const void *B, const void *C,
                      const void *D, tx_gemm_key *k);
uint64_t tx_gemm_key_hash(const tx_gemm_key *k);
bool tx_gemm_key_equal(const tx_gemm_key *a, const tx_gemm_key *b);
/* Alignment class of a pointer as the key records it. */
int32_t tx_gemm_align_of(const void *p);

/* ---- cache ---------------------------------------------------------------- */

typedef struct tx_gemm_cache tx_gemm_cache;

teexec_status *tx_gemm_cache_create(tx_gemm_cache **out);
void tx_gemm_cache_destroy(tx_gemm_cache *c); /* accepts NULL */
/* The slot stored for *k, or -1. */
int64_t tx_gemm_cache_find(const tx_gemm_cache *c, const tx_gemm_key *k);
/* Stores *k -> slot; INVALID_ARGUMENT when *k is already present. */
teexec_status *tx_gemm_cache_insert(tx_gemm_cache *c, const tx_gemm_key *k, uint32_t slot);
size_t tx_gemm_cache_count(const tx_gemm_cache *c);

/* ---- autotuning ------------------------------------------------------------ */

enum {
    TX_GEMM_TUNE_DEFAULT_CANDIDATES = 8,
    TX_GEMM_TUNE_MAX_CANDIDATES = 64,
    TX_GEMM_TUNE_DEFAULT_ROUNDS = 1,
    TX_GEMM_TUNE_MAX_ROUNDS = 16
};

/* tx_gemm_tune_config is declared in gemm_lt.h (the handle takes one). */

/* No tuning: the heuristic's first answer (the default of a new handle). */
tx_gemm_tune_config tx_gemm_tune_off(void);
/* The executor's settings from TEEXEC_GEMM_AUTOTUNE's value (NULL: unset)
 * and its determinism request (see the top of this file). */
tx_gemm_tune_config tx_gemm_tune_from_env(const char *value, bool deterministic);
static inline bool tx_gemm_tune_enabled(const tx_gemm_tune_config *c)
{
    return c && c->candidates > 1;
}

/* Heuristic answers to time for an m x n x k GEMM: c->candidates, and 4x
 * that (at most TX_GEMM_TUNE_MAX_CANDIDATES) for a GEMM of at most
 * TX_GEMM_TUNE_SMALL_MACS multiply-adds (a few tokens through a Linear):
 * those are bound by memory and latency, where the heuristic's ranking is
 * least reliable, and each costs microseconds to time. 1: no tuning. */
#define TX_GEMM_TUNE_SMALL_MACS ((double)(1ull << 31))
int tx_gemm_tune_candidates(const tx_gemm_tune_config *c, int64_t m, int64_t n, int64_t k);

/* Timed repeats for a candidate whose warm-up took first_ms (clamped to
 * [min_reps, max_reps]; min_reps when first_ms is not a positive time). */
int tx_gemm_tune_reps(const tx_gemm_tune_config *c, double first_ms);

/* Index of the candidate to keep among n measured times (ms[i] < 0 or NaN:
 * the candidate failed). Candidate 0 (the heuristic's first answer) stays
 * unless another is faster by more than TX_GEMM_TUNE_MARGIN of its time,
 * so that timing noise does not move the choice. -1 when none ran. */
#define TX_GEMM_TUNE_MARGIN 0.01
int tx_gemm_tune_pick(const double *ms, size_t n);

/* True when running the GEMM several times leaves D (and aux, bias and
 * amax_d where the epilogue writes them) as one run would: nothing it
 * writes overlaps anything it reads (A, B, C when beta != 0, the bias or
 * aux it reads, scale pointers); outputs may overlap each other. Otherwise
 * *why (when why != NULL) names the overlap. C is the pointer the GEMM
 * will be given. Sizes that overflow count as overlapping. */
bool tx_gemm_tune_repeatable(const tx_gemm_desc *d, const void *A, const void *B, const void *C,
                             const void *D, const char **why);

#ifdef __cplusplus
}
#endif

#endif
