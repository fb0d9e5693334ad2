/*
 * te_common.h - what the TE op implementations (kernels/cpu/te_*.c) share:
 * argument checks, loading any float tensor into a float / double buffer
 * and storing back with one rounding, GEMM wrappers over OpenBLAS, and the
 * row view of a tensor. Internal to kernels/cpu/te_*.c.
 *
 * Buffers returned by the loaders are malloc'd and owned by the caller
 * (free()). Pure functions, thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_TE_COMMON_H
#define TEEXEC_KERNELS_CPU_TE_COMMON_H

#include "base/shape.h"
#include "base/status.h"
#include "base/tensor.h"
#include "kernels/cpu/te_args.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The op's name for messages. */
const char *tx_te_name(tx_te_op_id op);

/* t is present, has storage and a float dtype (float32/16, bfloat16, float64). */
teexec_status *tx_te_check_real(tx_te_op_id op, const char *what, const tx_tensor *t) TX_NODISCARD;
/* t is present with storage, dtype dt and the given shape. */
teexec_status *tx_te_check_out(tx_te_op_id op, const char *what, const tx_tensor *t,
                               teexec_dtype dt, const tx_shape *shape) TX_NODISCARD;
/* Same as tx_te_check_out but any float dtype. */
teexec_status *tx_te_check_real_shape(tx_te_op_id op, const char *what, const tx_tensor *t,
                                      const tx_shape *shape) TX_NODISCARD;

/* count * elem bytes (at least 1), NULL on overflow or out of memory. */
void *tx_te_malloc(size_t count, size_t elem);
void *tx_te_calloc(size_t count, size_t elem);

/* The whole tensor as float / double (a new buffer of numel entries). */
teexec_status *tx_te_load_f32(const tx_tensor *t, float **out) TX_NODISCARD;
teexec_status *tx_te_load_f64(const tx_tensor *t, double **out) TX_NODISCARD;
/* The whole tensor as float / double without a copy where it already is
 * one: *out is t's own data (read only) and *owned NULL when t's dtype is
 * the type asked for, else a converted copy that *owned holds and the
 * caller frees. */
teexec_status *tx_te_view_f32(const tx_tensor *t, const float **out, float **owned) TX_NODISCARD;
teexec_status *tx_te_view_f64(const tx_tensor *t, const double **out,
                              double **owned) TX_NODISCARD;
/* Whether the bytes of a and b overlap (either may be NULL). */
bool tx_te_overlap(const tx_tensor *a, const tx_tensor *b);
/* Writes numel values into t, rounding once to its dtype. */
void tx_te_store_f32(tx_tensor *t, const float *src);
void tx_te_store_f64(tx_tensor *t, const double *src);

/* dst = src converted to dst's dtype (same numel; exact when widening). */
void tx_te_convert_copy(tx_tensor *dst, const tx_tensor *src);

/* Row-major C = alpha·op(A)·op(B) + beta·C; A is m x k after op, B k x n. */
void tx_te_gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                    float *c, int64_t ldc);
void tx_te_gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                    double *c, int64_t ldc);
/* GEMM dims must fit OpenBLAS's int. */
teexec_status *tx_te_check_blas(tx_te_op_id op, int64_t m, int64_t n, int64_t k) TX_NODISCARD;

/* rows = product of all dims but the last `inner_rank`, inner = the rest. */
void tx_te_rows(const tx_tensor *t, int inner_rank, int64_t *rows, int64_t *inner);

/* The shape of t without its last `drop` dims. */
tx_shape tx_te_leading(const tx_tensor *t, int drop);

#endif
