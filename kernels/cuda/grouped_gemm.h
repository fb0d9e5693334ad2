/*
 * grouped_gemm.h - the GEMMs of te.ops GroupedLinear (MoE experts) on the
 * GPU, with the group boundaries read from a DEVICE split-sizes tensor, so
 * no host synchronization and no per-group launch is needed (a CUDA graph
 * can capture them; the sizes may change between replays).
 *
 * Rows of x / dy ([m, k] / [m, n], row-major) are split in order: group g
 * owns rows [off_g, off_g + s_g) with off_0 = 0, off_{g+1} = off_g + s_g.
 *   FPROP  y_g  = x_g · W_gᵀ (+ bias_g)   one launch over every group's row tiles
 *   DGRAD  dx_g = dy_g · W_g              one launch over every group's row tiles
 *   WGRAD  dW_g = dy_gᵀ · x_g             one launch, one output per group;
 *                                         a group of 0 rows gets dW_g = 0
 *   dbias_g = column sums of dy_g (fp64 accumulation, as the CPU kernel)
 * Each thread block computes its group's prefix sums itself (G <= 64
 * int64 loads), finds its group from its tile index and exits when it is
 * past the last tile.
 *
 * Rows past sum(split_sizes) are written by no GEMM here (y / dx keep what
 * they held); tx_cuda_grouped_zero_tail zeroes them for callers that want
 * the CPU kernel's zeros. Invalid sizes cannot be reported from the device,
 * so they are made safe instead: a negative size counts as 0 and a size
 * running past the rows is cut at the last row (the CPU kernel refuses both
 * with an error; for valid input the two agree).
 *
 * Alpha: out = alpha_g * sum(...) + bias_g, with alpha_g = *alpha_a *
 * *alpha_b[g] (WGRAD: *alpha_a * *alpha_b[0]) read on the DEVICE by the
 * kernel (no host sync: under current scaling the scales are computed on
 * the device), the product rounded once to FP32, a NULL pointer counting
 * as 1. GroupedLinear's quantized recipes factor their per-tensor scales
 * (FP8 scale_inv, NVFP4's global S_dec) out of the operands this way, so
 * the rest is exact in bf16 (exec/cuda/te_cuda_grouped.c).
 *
 * Numbers: FP32 accumulation in a fixed order, each output rounded once to
 * its dtype; deterministic (every output element is computed by one thread
 * block, no atomics). bf16 / fp16 operands of one dtype go through tensor
 * cores: the mma.sync pipeline of grouped_gemm_mma.h when n and k are
 * multiples of 8 and the pointers 16-byte aligned, a simpler WMMA kernel
 * otherwise; anything else (fp32, mixed dtypes) through an FP32-FMA tiled
 * kernel (never TF32).
 *
 * Ownership: every pointer is device memory owned by the caller; nothing is
 * allocated. Asynchronous on `stream` (cudaStream_t). No shared state:
 * thread-safe on distinct buffers.
 */
#ifndef TEEXEC_KERNELS_CUDA_GROUPED_GEMM_H
#define TEEXEC_KERNELS_CUDA_GROUPED_GEMM_H

#include "teexec/teexec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TX_GG_MAX_GROUPS 64

typedef enum tx_gg_kind { TX_GG_FPROP, TX_GG_DGRAD, TX_GG_WGRAD } tx_gg_kind;

typedef struct tx_cuda_grouped_gemm {
    tx_gg_kind kind;
    int groups;                  /* 1..TX_GG_MAX_GROUPS */
    const int64_t *split_sizes;  /* device int64 [groups] */
    size_t m, n, k;              /* x [m, k], W_g [n, k], y / dy [m, n] */
    const void *a;               /* FPROP: x; DGRAD, WGRAD: dy */
    teexec_dtype a_dt;
    /* FPROP, DGRAD: b[g] = W_g; WGRAD: b[0] = x */
    const void *b[TX_GG_MAX_GROUPS];
    teexec_dtype b_dt;
    /* FPROP only: bias_g [n] (NULL: none for that group) */
    const void *bias[TX_GG_MAX_GROUPS];
    teexec_dtype bias_dt;
    /* FPROP: out[0] = y [m, n]; DGRAD: out[0] = dx [m, k]; WGRAD: out[g] = dW_g [n, k] (NULL: skipped) */
    void *out[TX_GG_MAX_GROUPS];
    teexec_dtype out_dt;
    /* device FP32 multipliers (see Alpha above; NULL = 1): one for the
     * first operand, one per group for the second (WGRAD: alpha_b[0]) */
    const float *alpha_a;
    const float *alpha_b[TX_GG_MAX_GROUPS];
    /* 0: the mma.sync kernel wherever it applies (grouped_gemm_mma.h);
     * 1: always the general kernels (tests and benchmarks compare the two) */
    int force_general;
} tx_cuda_grouped_gemm;

/* Dtypes: FLOAT, BFLOAT16, FLOAT16 for every tensor. */
teexec_status *tx_cuda_grouped_gemm_run(const tx_cuda_grouped_gemm *g, void *stream);

/* Which kernel tx_cuda_grouped_gemm_run picks for g: true for the
 * mma.sync path (bf16 / fp16 operands of one dtype, n and k multiples of 8,
 * 16-byte aligned pointers, force_general 0), false for the general
 * (WMMA / FP32-FMA) kernels. Host-only, no device access: tests and
 * benchmarks ask it to say which path a descriptor takes. */
bool tx_cuda_grouped_gemm_uses_mma(const tx_cuda_grouped_gemm *g);

/* dbias[g] [n] (dbias_dt) = column sums of dy's rows of group g; NULL
 * entries are skipped. A group of 0 rows gets zeros. */
teexec_status *tx_cuda_grouped_dbias(const int64_t *split_sizes, int groups, size_t m, size_t n,
                                     const void *dy, teexec_dtype dy_dt, void *const *dbias,
                                     teexec_dtype dbias_dt, void *stream);

/* Zeroes rows [sum(split_sizes) (clamped as above), m) of t [m, cols]. */
teexec_status *tx_cuda_grouped_zero_tail(const int64_t *split_sizes, int groups, size_t m,
                                         size_t cols, void *t, teexec_dtype dt, void *stream);

#ifdef __cplusplus
}
#endif

#endif
