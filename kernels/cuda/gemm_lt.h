/*
 * gemm_lt.h - the cuBLASLt GEMM layer of the CUDA backend.
 *
 * One call computes, in cuBLAS's column-major terms,
 *     D = epilogue(alpha * op(A) * op(B) + beta * C)
 * with op(A) m x k, op(B) k x n, C and D m x n (column-major, leading
 * dimensions lda/ldb/ldc/ldd; 0 means packed). A row-major caller maps its
 * matrices as Transformer Engine does (te-ops.md section 0): fprop
 * Y[M,N] = X[M,K] W[N,K]^T is m = N, n = M, k = K, A = W with transa = 1,
 * B = X with transb = 0 ("TN"); dgrad dX = dY W is "NN"; wgrad dW = dY^T X
 * is "NT" with A = X, B = dY.
 *
 * Modes (chosen by the operand dtypes and scale modes in tx_gemm_desc):
 *  - BF16 / FP16 operands, FP32 accumulation (CUBLAS_COMPUTE_32F);
 *  - FP32 operands: CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32
 *    only when allow_tf32 is set;
 *  - FP8 per-tensor (E4M3 x E4M3, E4M3 x E5M2, E5M2 x E4M3): scale mode
 *    TENSOR, a/b_scale_inv point at one device FP32 each; optional d_scale
 *    and amax_d for an FP8 output (delayed scaling only, te-ops.md 4.3;
 *    beta must be 0 then, and an E5M2 output needs an E5M2 operand: the
 *    H200's cuBLASLt 13.1 has no E4M3 x E4M3 -> E5M2 algorithm).
 *    On sm_90 (Hopper) cuBLASLt runs FP8 only as "TN" (transa = 1,
 *    transb = 0): other layouts are refused with TEEXEC_ERR_UNSUPPORTED, and
 *    the caller passes the columnwise (transposed) copy instead. FP8 needs
 *    m, k and lda/ldb to be multiples of 16 and A, B, C, D and every scale
 *    and amax pointer 16-byte aligned (INVALID_ARGUMENT otherwise).
 *    fast_accum is the caller's choice: TE turns it on for fprop and off
 *    (split accumulation) for dgrad and wgrad.
 *  - FP8 block scaling (fp8-block recipe): BLOCK_1D (1x128 blocks,
 *    CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) or BLOCK_2D (128x128,
 *    BLK128x128_32F) per operand, not both 2-D; FP32 scale_inv arrays in
 *    Transformer Engine's layout (kernels/cpu/qtensor.h). Runs natively
 *    only where the runtime cuBLASLt (>= 12.9) offers it on the device:
 *    sm_90. Elsewhere TEEXEC_ERR_UNSUPPORTED, and the caller uses the exact
 *    emulation (gemm_emulate.h). TN only, split accumulation forced.
 *  - MXFP8 (VEC32_UE8M0) and NVFP4 (VEC16_UE4M3; alpha_dev from the two
 *    global amaxes, see tx_cuda_nvfp4_gemm_alpha in gemm_emu_prep.h) with
 *    GEMM-swizzled scales: native on sm_100 and newer only (built, not yet
 *    run on such a device); refused with TEEXEC_ERR_UNSUPPORTED on sm_90.
 *    NVFP4 is TN only.
 *
 * Epilogues: NONE; BIAS (bias[m] added to every column); GELU_AUX_BIAS
 * (D = gelu_tanh(AB + bias), aux = AB + bias, the pre-activation backward
 * needs); DGELU_BGRAD (D = AB * gelu_tanh'(aux); bias receives the sum of
 * D over its n columns, length m); BGRADB (bias receives the sum of op(B)
 * over k, length n). aux_ld must be a multiple of 8 and >= m.
 *
 * Heuristic cache: the handle remembers the algorithm chosen for each
 * (shape, leading dims, dtypes, layout, epilogue, scale modes, flags,
 * pointer alignment) key, with its descriptors (key and table:
 * gemm_select.h). The first call per key queries the heuristic (host
 * only); later calls only set the pointer attributes and launch: no
 * cudaMalloc and no host synchronization.
 *
 * Autotuning (off in a new handle; tx_gemm_lt_set_tune): the first call per
 * key that runs outside CUDA-graph capture asks the heuristic for its first
 * `candidates` answers, runs each once and then several times between two
 * CUDA events on the call's stream, with the call's own buffers, in
 * `rounds` passes over all candidates (each keeps its fastest pass), and
 * keeps the fastest (the first answer unless another beats it by more
 * than 1%).
 * That call synchronizes the stream (tuning only ever happens once per
 * key). A call made during stream capture takes the first answer and
 * leaves the key to be tuned by the next uncaptured call; so does a call
 * whose repetition would not leave its outputs as one run does (an output
 * overlapping an input, e.g. C == D with beta != 0). The GPU executor
 * turns tuning on unless TEEXEC_GEMM_AUTOTUNE=0 or the session is
 * deterministic (gemm_select.h): cuBLASLt's reduction schemes are all
 * ordered, so each algorithm is reproducible, but a timing race can pick
 * different algorithms in different runs, and algorithms round
 * differently.
 *
 * Ownership: the handle owns its cuBLASLt handle, descriptors and a 8-byte
 * device constant block allocated at creation. All matrix, scale, bias and
 * aux pointers are device pointers owned by the caller; so is the
 * workspace (at least tx_gemm_lt_workspace_bytes() bytes, 256-byte
 * aligned). Returned statuses are owned by the caller.
 *
 * Thread-safety: a handle is used by one host thread at a time (like a
 * session), with the CUDA device it was created on current; distinct
 * handles are independent. Calls are asynchronous on the
 * given stream (a cudaStream_t; NULL = default stream).
 */
#ifndef TEEXEC_KERNELS_CUDA_GEMM_LT_H
#define TEEXEC_KERNELS_CUDA_GEMM_LT_H

#include "teexec/teexec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tx_gemm_lt tx_gemm_lt;

typedef enum tx_gemm_epilogue {
    TX_GEMM_EPI_NONE = 0,
    TX_GEMM_EPI_BIAS = 1,
    TX_GEMM_EPI_GELU_AUX_BIAS = 2,
    TX_GEMM_EPI_DGELU_BGRAD = 3,
    TX_GEMM_EPI_BGRADB = 4
} tx_gemm_epilogue;

/* How an operand's scale pointer is read. NONE for BF16/FP16/FP32
 * operands (and FP8 with an implicit scale of 1). */
typedef enum tx_gemm_scale_mode {
    TX_GEMM_SCALE_NONE = 0,
    TX_GEMM_SCALE_TENSOR = 1,   /* one FP32 */
    TX_GEMM_SCALE_BLOCK_1D = 2, /* FP32 per 1x128 block along k */
    TX_GEMM_SCALE_BLOCK_2D = 3, /* FP32 per 128x128 tile */
    TX_GEMM_SCALE_MXFP8 = 4,    /* E8M0 per 32 along k, swizzled */
    TX_GEMM_SCALE_NVFP4 = 5     /* E4M3 per 16 along k, swizzled */
} tx_gemm_scale_mode;

typedef struct tx_gemm_desc {
    int64_t m, n, k;
    int transa, transb;           /* 1: op(X) = X^T */
    int64_t lda, ldb, ldc, ldd;   /* 0: packed (rows of the stored matrix) */
    teexec_dtype a_type, b_type;  /* FLOAT, FLOAT16, BFLOAT16, FLOAT8E4M3FN,
                                     FLOAT8E5M2, FLOAT4E2M1 */
    teexec_dtype c_type;          /* 0: d_type, or BFLOAT16 for an FP8 D */
    teexec_dtype d_type;
    float alpha, beta;            /* host values */
    /* Device FP32 alpha (NVFP4's global scale); beta must then be 0 or 1. */
    const float *alpha_dev;
    tx_gemm_epilogue epilogue;
    void *bias;                   /* BIAS: read; *_BGRAD*: written */
    teexec_dtype bias_type;       /* 0: d_type (BFLOAT16 for FP8 inputs) */
    void *aux;                    /* GELU_AUX_BIAS: written; DGELU_BGRAD: read */
    int64_t aux_ld;               /* 0: m rounded up to 8 */
    tx_gemm_scale_mode a_scale_mode, b_scale_mode;
    const void *a_scale_inv, *b_scale_inv;
    const float *d_scale;         /* FP8 D only: multiplier into D's range */
    float *amax_d;                /* FP8 operands: max |D| before d_scale (optional) */
    int fast_accum;               /* FP8 per-tensor: 1 for fprop, 0 for grads */
    int allow_tf32;               /* FP32 operands only */
    /* Strided batch (wide operands, epilogue NONE, no scales): batch_count
     * GEMMs in one launch, GEMM i reading A + i * stride_a elements (B,
     * C, D likewise); a stride of 0 repeats the operand (A and B only).
     * 0 or 1: one GEMM, the strides ignored. */
    int64_t batch_count, stride_a, stride_b, stride_c, stride_d;
} tx_gemm_desc;

typedef struct tx_gemm_lt_stats {
    uint64_t runs;               /* successful tx_gemm_lt_run calls */
    uint64_t heuristic_queries;  /* cublasLtMatmulAlgoGetHeuristic calls */
    uint64_t cache_entries;
    uint64_t tuned;              /* entries whose algorithm was chosen by timing */
    uint64_t tune_deferred;      /* tuning postponed (capture, overlapping buffers) */
    uint64_t timed_runs;         /* GEMMs launched only to time a candidate */
    double tune_ms;              /* host wall-clock time spent tuning */
} tx_gemm_lt_stats;

/* Autotuning settings (see the top of this file; rules in gemm_select.h). */
typedef struct tx_gemm_tune_config {
    /* heuristic answers timed per new key; <= 1: take the first, no timing */
    int candidates;
    /* measured time each candidate gets, spread over repeats (ms) */
    double target_ms;
    int min_reps, max_reps;
    /* passes over all candidates; each keeps its fastest pass (<= 1: one).
     * Interleaving the passes keeps a drift of the GPU's clock during
     * tuning from favouring whichever candidate happened to run first. */
    int rounds;
} tx_gemm_tune_config;

/* What the handle chose for one cached key (reports and tests). */
typedef struct tx_gemm_lt_choice {
    int64_t m, n, k;
    int transa, transb;
    teexec_dtype a_type, d_type;
    tx_gemm_epilogue epilogue;
    int tuned;              /* 1: chosen by timing */
    int candidates;         /* heuristic answers timed (0 when not tuned) */
    int chosen;             /* the kept answer's index in the heuristic's order */
    double first_ms;        /* the first answer's time (0 when not tuned) */
    double chosen_ms;       /* the kept answer's time (0 when not tuned) */
    int32_t algo_id, tile_id, splitk, reduction_scheme; /* cuBLASLt's config; -1: unknown */
} tx_gemm_lt_choice;

/* One heuristic answer as tx_gemm_lt_sweep timed it. */
typedef struct tx_gemm_lt_candidate {
    double ms;              /* per launch, the fastest round; < 0: cuBLASLt refused it */
    size_t workspace;       /* bytes the algorithm asked for */
    float waves;            /* cuBLASLt's wavesCount estimate */
    int32_t algo_id, tile_id, stages_id, splitk, reduction_scheme, swizzle, custom;
    int32_t inner_shape_id, cluster_shape_id; /* -1: unknown */
} tx_gemm_lt_candidate;

/* Creates a handle on the current CUDA device. workspace_bytes is the
 * workspace every run will be given (TE uses 32 MiB + 1 KiB on sm_90+;
 * 0 is allowed). Queries the device capability and cublasLtGetVersion
 * once. *out is NULL on failure. */
teexec_status *tx_gemm_lt_create(size_t workspace_bytes, tx_gemm_lt **out);
void tx_gemm_lt_destroy(tx_gemm_lt *h); /* accepts NULL; synchronizes nothing */

size_t tx_gemm_lt_workspace_bytes(const tx_gemm_lt *h);
/* Device compute capability (e.g. 90) and cublasLtGetVersion() (e.g. 130100). */
int tx_gemm_lt_sm(const tx_gemm_lt *h);
size_t tx_gemm_lt_cublas_version(const tx_gemm_lt *h);
tx_gemm_lt_stats tx_gemm_lt_get_stats(const tx_gemm_lt *h);

/* Tuning for keys cached from now on (and keys whose tuning is still
 * pending); NULL: off. Entries already chosen stay. */
void tx_gemm_lt_set_tune(tx_gemm_lt *h, const tx_gemm_tune_config *cfg);
/* True when the handle tunes new keys. */
int tx_gemm_lt_tuning(const tx_gemm_lt *h);

/* The choice for cache entry i (0 <= i < cache_entries, in creation
 * order); INVALID_ARGUMENT outside that range. */
teexec_status *tx_gemm_lt_choice_at(const tx_gemm_lt *h, size_t i, tx_gemm_lt_choice *out);

/* NULL when the handle's device and cuBLASLt can run this description
 * natively, else a TEEXEC_ERR_UNSUPPORTED (or INVALID_ARGUMENT) status
 * saying why. Checks shapes, dtypes and flags only: no CUDA call. */
teexec_status *tx_gemm_lt_check(const tx_gemm_lt *h, const tx_gemm_desc *d);

/* Runs the GEMM. C may be NULL when beta == 0. The first uncaptured call
 * for a key of a tuning handle first times the candidates (see above),
 * which waits for the stream; the GEMM itself is then queued as usual. */
teexec_status *tx_gemm_lt_run(tx_gemm_lt *h, const tx_gemm_desc *d, const void *A, const void *B,
                              const void *C, void *D, void *workspace, void *stream);

/* A study of one description (bench/gpu/gemm_study.c): asks the heuristic
 * for up to `want` answers (at most TX_GEMM_TUNE_MAX_CANDIDATES) allowed
 * ws_limit bytes of workspace (at most the handle's), times each as tuning
 * does (`rounds` interleaved passes of the handle's repeat rule) with the
 * given buffers, and writes them in the heuristic's order to out[0..*n).
 * The buffers must allow repetition (tx_gemm_tune_repeatable). Waits for
 * the stream; leaves the cache as it was. Not for use during capture. */
teexec_status *tx_gemm_lt_sweep(tx_gemm_lt *h, const tx_gemm_desc *d, const void *A, const void *B,
                                const void *C, void *D, void *workspace, size_t ws_limit,
                                void *stream, int want, int rounds, tx_gemm_lt_candidate *out,
                                int *n);

#ifdef __cplusplus
}
#endif

#endif
