/*
 * kcommon.h - what every CPU kernel shares (internal to kernels/cpu):
 * dtype classes, block conversion of elements to and from the compute
 * types (float, double, int64, uint64), and the argument-check errors.
 *
 * Compute types: float16/bfloat16/float32 compute as float ("F32" class),
 * float64 as double, signed ints as int64, unsigned ints and bool as
 * uint64. Loads are exact (except int -> float for huge values); stores
 * round float -> fp16/bf16 to nearest even, and double -> int truncates
 * toward zero with NaN -> 0 and out-of-range values saturated to int64
 * first (never C undefined behaviour), then wrapped to the target width.
 *
 * Pure functions; statuses returned are owned by the caller; thread-safe.
 */
#ifndef TEEXEC_KERNELS_CPU_KCOMMON_H
#define TEEXEC_KERNELS_CPU_KCOMMON_H

#include "base/shape.h"
#include "base/status.h"
#include "base/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GCC's -O2 vectorizes only loops whose trip count is known at compile
 * time (its "very cheap" cost model); the kernels' inner loops are written
 * for the vectorizer, so every kernel file (they all include this header)
 * asks for the usual cost model. no-trapping-math lets it if-convert float
 * compares (we never read the FP exception flags) and no-math-errno lets
 * sqrt be inlined (we never read errno); neither changes any result, unlike
 * -ffast-math, which stays off. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math", \
                     "no-math-errno", "fp-contract=off")
#endif

/* Hot float loops are compiled twice, for AVX2 and for the baseline, and
 * the loader picks one per machine (GCC function multiversioning, which
 * needs glibc's ifunc). With
 * fp-contract off above, both versions give bit-identical results. Not
 * under ThreadSanitizer: the ifunc resolvers run before its runtime is
 * initialized and crash every program at start. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    !defined(__SANITIZE_THREAD__)
#define TX_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TX_SIMD_CLONES
#endif

/* Elements converted per block in the kernels' scratch buffers. */
#define TX_BLOCK 512

typedef enum tx_kclass {
    TX_KC_F32,  /* float, float16, bfloat16 */
    TX_KC_F64,  /* double */
    TX_KC_I64,  /* int8..int64 */
    TX_KC_U64,  /* uint8..uint64 */
    TX_KC_BOOL,
    TX_KC_OTHER /* strings, 8-bit floats, sub-byte types, complex */
} tx_kclass;

tx_kclass tx_kclass_of(teexec_dtype dt);
static inline bool tx_kc_is_float(tx_kclass c) { return c == TX_KC_F32 || c == TX_KC_F64; }
static inline bool tx_kc_is_int(tx_kclass c) { return c == TX_KC_I64 || c == TX_KC_U64; }
/* Float, int or (where numeric means "of a number" in ONNX) not bool. */
static inline bool tx_kc_is_numeric(tx_kclass c) { return tx_kc_is_float(c) || tx_kc_is_int(c); }

/* Block conversions: n elements starting at element `off` of `base`.
 * Any numeric dtype or bool may be loaded as any compute type. */
void tx_load_f32(teexec_dtype dt, const void *base, size_t off, size_t n, float *dst);
void tx_store_f32(teexec_dtype dt, void *base, size_t off, size_t n, const float *src);
void tx_load_f64(teexec_dtype dt, const void *base, size_t off, size_t n, double *dst);
void tx_store_f64(teexec_dtype dt, void *base, size_t off, size_t n, const double *src);
void tx_load_i64(teexec_dtype dt, const void *base, size_t off, size_t n, int64_t *dst);
void tx_store_i64(teexec_dtype dt, void *base, size_t off, size_t n, const int64_t *src);
void tx_load_u64(teexec_dtype dt, const void *base, size_t off, size_t n, uint64_t *dst);
void tx_store_u64(teexec_dtype dt, void *base, size_t off, size_t n, const uint64_t *src);

/* Reads n floats at `off`: a pointer into the tensor itself when it is
 * float32, else converted into tmp (which holds >= n). */
const float *tx_view_f32(teexec_dtype dt, const void *base, size_t off, size_t n, float *tmp);

/* One scalar element as double / int64 (for parameters given as tensors). */
double tx_scalar_f64(const tx_tensor *t, size_t i);
int64_t tx_scalar_i64(const tx_tensor *t, size_t i);

/* double -> int64 without undefined behaviour (see above). */
int64_t tx_f64_to_i64(double v);

/* Errors. */
teexec_status *tx_err_dtype(const char *op, teexec_dtype dt);
teexec_status *tx_err_dtype_mismatch(const char *op, const char *what, teexec_dtype got,
                                     teexec_dtype want);
teexec_status *tx_err_shape(const char *op, const char *what, const tx_tensor *got,
                            const tx_shape *want);
/* NULL when t is non-NULL with allocated storage for its shape. */
teexec_status *tx_check_tensor(const char *op, const char *what, const tx_tensor *t);
/* Checks that y has dtype dt and shape s. */
teexec_status *tx_check_output(const char *op, const tx_tensor *y, teexec_dtype dt,
                               const tx_shape *s);

/* Element byte size of a dtype the data-movement kernels handle (>= 8 bits
 * and not STRING); 0 otherwise. */
size_t tx_movable_size(teexec_dtype dt);

#endif
