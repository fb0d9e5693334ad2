/*
 * qtensor.h - a quantized tensor (FP8 per-tensor, FP8 block, MXFP8, NVFP4)
 * and the CPU reference quantizers / dequantizers that fill and read it.
 *
 * The source is viewed as a row-major 2-D matrix X[M, K]: K is the last
 * dim, M the product of the leading dims. A quantized tensor carries up to
 * two representations, each quantized from X itself (never one from the
 * other), exactly as Transformer Engine stores them (te-ops.md 4.2-4.7):
 *
 *  kind       rowwise data         columnwise data          scales (compact)
 *  FP8_TENSOR [M,K] bytes          [K,M] = transpose of     one FP32 scale_inv shared
 *                                  rowwise, same scale      by both (no scale arrays)
 *  FP8_BLOCK  [M,K] bytes          [K,M] bytes (X^T),       FP32, see below
 *   1-D       1x128 blocks on K    1x128 blocks on M
 *   2-D       128x128 tiles        transpose of rowwise
 *  MXFP8      [M,K] bytes          [M,K] bytes (NOT         E8M0 bytes, see below
 *             1x32 blocks on K     transposed), 32x1 on M
 *   2-D       32x32 tiles          identical to rowwise
 *  NVFP4      [M,K/2] bytes        [K,M/2] bytes (X^T, or   E4M3 bytes + FP32 global
 *             1x16 blocks on K     RHT(X^T)), 1x16 on M     amax per usage
 *   2-D       16x16 tiles          transpose of rowwise
 *
 * Compact scale arrays (row-major, [rows][cols] with the padded shape TE
 * allocates; padding entries are 0):
 *   FP8_BLOCK 1-D rowwise  (ceil(K/128), roundup(M,4)): entry [j][m] is the
 *             scale_inv of row m, K-block j. Columnwise (ceil(M/128),
 *             roundup(K,4)): entry [i][k] for column k, M-block i.
 *   FP8_BLOCK 2-D rowwise  (ceil(M/128), roundup(ceil(K/128),4)): [i][j] for
 *             tile (i,j). Columnwise (ceil(K/128), roundup(ceil(M/128),4)):
 *             [j][i].
 *   MXFP8 rowwise (roundup(M,128), roundup(K/32,4)): [m][j].
 *         columnwise (roundup(M/32,4), roundup(K,128)): [i][k].
 *   NVFP4 rowwise (roundup(M,128), roundup(ceil(K/16),4)): [m][j].
 *         columnwise (roundup(K,128), roundup(ceil(M/16),4)): [k][i].
 * GEMM-swizzled layout (MXFP8 and NVFP4 only; scale_swizzle.c): the cuBLAS
 * 128x4 tiles. Rowwise scales and NVFP4 columnwise scales are swizzled as
 * they are; MXFP8 columnwise scales are swizzled as their transpose (a
 * (roundup(K,128), roundup(M/32,4)) matrix, entry [k][i]).
 * Packed FP4: element 2i in the low nibble of byte i.
 *
 * Numerics (all te-ops.md section 4; see each quant_*.c): amax reductions
 * ignore NaN (fmaxf) and see Inf; NaN elements encode as NaN (FP8) or +6
 * (FP4). Products that TE computes as fl32(a*b) are computed the same way
 * here (no FMA contraction: see the pragma in each quant_*.c).
 *
 * Ownership: tx_qtensor_alloc allocates every array the usage needs (zero
 * filled) and tx_qtensor_free frees them; a tx_qtensor owns its arrays.
 * Not thread-safe to mutate; concurrent reads are fine. The quantizers are
 * pure functions of their inputs (and seed) and thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_QTENSOR_H
#define TEEXEC_KERNELS_CPU_QTENSOR_H

/* The kinds, usages, scale layouts and tx_quant_config are in base/ (the
 * planner names them without depending on these kernels). */
#include "base/quant_config.h"
#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One representation (rowwise or columnwise). */
typedef struct tx_qdata {
    uint8_t *data;        /* bytes; FP4 packed */
    size_t data_bytes;
    uint64_t data_rows;   /* logical element rows/cols of the stored matrix */
    uint64_t data_cols;   /* (columnwise FP8/NVFP4: K rows, M cols) */
    void *scale;          /* float (FP8_BLOCK) or uint8_t (E8M0 / E4M3); NULL for FP8_TENSOR */
    size_t scale_bytes;
    uint64_t scale_rows;  /* padded compact shape (also for the swizzled form) */
    uint64_t scale_cols;
    float amax;           /* NVFP4: the global amax this usage was scaled with */
} tx_qdata;

typedef struct tx_qtensor {
    tx_qkind kind;
    teexec_dtype fmt;     /* FLOAT8E4M3FN, FLOAT8E5M2 or FLOAT4E2M1 */
    bool block_2d;
    bool rht;             /* NVFP4: columnwise holds RHT(X^T) */
    tx_scale_layout scale_layout;
    uint64_t rows, cols;  /* M, K */
    unsigned usage;       /* TX_QUSAGE_* bits present */
    tx_qdata row, col;
    /* FP8_TENSOR: the multiplier used, its reciprocal (stored "scale_inv",
     * shared by both usages) and the amax of X (NaN ignored). */
    float scale, scale_inv, amax;
} tx_qtensor;


/* Allocates the arrays for a (rows x cols) source under cfg (shapes from
 * the table above), zero-filled; checks the shape rules (MXFP8: rows and
 * cols multiples of 32; NVFP4: even K for rowwise, even M for columnwise,
 * M % 16 == 0 with RHT; 2-D NVFP4 both multiples of 16). Overflow-checked. */
teexec_status *tx_qtensor_alloc(tx_qtensor *q, uint64_t rows, uint64_t cols,
                                const tx_quant_config *cfg) TX_NODISCARD;
void tx_qtensor_free(tx_qtensor *q);

/* Drops a usage (frees its arrays). */
void tx_qtensor_drop_usage(tx_qtensor *q, unsigned usage);

/* Quantizes src (FLOAT or BFLOAT16, rows x cols row-major) into q, which
 * this allocates (free with tx_qtensor_free; on failure q is empty). */
teexec_status *tx_quantize(const void *src, teexec_dtype src_type, uint64_t rows, uint64_t cols,
                           const tx_quant_config *cfg, tx_qtensor *q) TX_NODISCARD;

/* Dequantizes one usage to float, written as an [M,K] row-major matrix
 * (columnwise data is transposed back; with NVFP4 RHT the values are those
 * of RHT(X^T), transposed back to [M,K]). */
teexec_status *tx_dequantize(const tx_qtensor *q, unsigned usage, float *out) TX_NODISCARD;

/* ---- per-kind entry points (used by tx_quantize; q already allocated) ---- */
teexec_status *tx_quant_fp8_tensor(const float *x, uint64_t rows, uint64_t cols,
                                   teexec_dtype src_type, const tx_quant_config *cfg,
                                   tx_qtensor *q) TX_NODISCARD;
teexec_status *tx_quant_fp8_block(const float *x, uint64_t rows, uint64_t cols,
                                  teexec_dtype src_type, const tx_quant_config *cfg,
                                  tx_qtensor *q) TX_NODISCARD;
teexec_status *tx_quant_mxfp8(const float *x, uint64_t rows, uint64_t cols,
                              const tx_quant_config *cfg, tx_qtensor *q) TX_NODISCARD;
teexec_status *tx_quant_nvfp4(const float *x, uint64_t rows, uint64_t cols,
                              teexec_dtype src_type, const tx_quant_config *cfg,
                              tx_qtensor *q) TX_NODISCARD;
void tx_dequant_fp8_tensor(const tx_qtensor *q, unsigned usage, float *out);
void tx_dequant_fp8_block(const tx_qtensor *q, unsigned usage, float *out);
void tx_dequant_mxfp8(const tx_qtensor *q, unsigned usage, float *out);
void tx_dequant_nvfp4(const tx_qtensor *q, unsigned usage, float *out);

/* ---- shared numerics ---------------------------------------------------- */

/* TE's compute_scale_from_amax (te-ops.md 4.4): amax = max(amax, eps);
 * amax 0, Inf or NaN -> 1; else fmt_max / amax (RN division), Inf ->
 * value_for_inf; power_2 keeps only sign and exponent (round down). */
float tx_scale_from_amax(float amax, float fmt_max, bool power_2, float epsilon,
                         float value_for_inf);

/* max(m, |v|) with every NaN v ignored, signaling NaNs included: glibc's
 * fmaxf returns NaN when an operand is a signaling NaN (IEEE 754-2008
 * maxNum), while CUDA's fmaxf, and so TE's amax reductions, drop any NaN.
 * m is never NaN. */
static inline float tx_amax_step(float m, float v)
{
    float a = v < 0.0f ? -v : v;
    return a > m ? a : m;
}

/* max |x| over n floats, NaN ignored (as CUDA's fmaxf). */
float tx_amax_f32(const float *x, uint64_t n);

#endif
