/*
 * te_common.c - shared helpers of the TE op implementations (te_common.h).
 */
#include "kernels/cpu/te_common.h"

#include "base/checked.h"
#include "base/half.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

const char *tx_te_name(tx_te_op_id op)
{
    const tx_te_op_schema *s = tx_te_schema(op);
    return s ? s->name : "?";
}

static teexec_status *missing(tx_te_op_id op, const char *what)
{
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: %s is missing", tx_te_name(op), what);
}

teexec_status *tx_te_check_real(tx_te_op_id op, const char *what, const tx_tensor *t)
{
    if (!t || !t->data) return missing(op, what);
    if (!tx_dtype_is_real(t->dtype))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: %s has type %s, expected float32, float16, bfloat16 or float64",
                        tx_te_name(op), what, teexec_dtype_name(t->dtype));
    return NULL;
}

static teexec_status *check_shape(tx_te_op_id op, const char *what, const tx_tensor *t,
                                  const tx_shape *shape)
{
    if (tx_tensor_has_shape(t, shape)) return NULL;
    char b1[160], b2[160];
    tx_shape got = tx_shape_of(t);
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: %s has shape %s, expected %s",
                    tx_te_name(op), what, tx_shape_str(&got, b1, sizeof b1),
                    tx_shape_str(shape, b2, sizeof b2));
}

teexec_status *tx_te_check_out(tx_te_op_id op, const char *what, const tx_tensor *t,
                               teexec_dtype dt, const tx_shape *shape)
{
    if (!t || !t->data) return missing(op, what);
    if (t->dtype != dt)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: %s has type %s, expected %s",
                        tx_te_name(op), what, teexec_dtype_name(t->dtype), teexec_dtype_name(dt));
    return check_shape(op, what, t, shape);
}

teexec_status *tx_te_check_real_shape(tx_te_op_id op, const char *what, const tx_tensor *t,
                                      const tx_shape *shape)
{
    TX_TRY(tx_te_check_real(op, what, t));
    return check_shape(op, what, t, shape);
}

void *tx_te_malloc(size_t count, size_t elem)
{
    size_t n;
    if (!tx_mul_size(count, elem, &n)) return NULL;
    return malloc(n ? n : 1);
}

void *tx_te_calloc(size_t count, size_t elem)
{
    if (count == 0 || elem == 0) return calloc(1, 1);
    return calloc(count, elem);
}

/* Loads element i of a float tensor as double (exact for every T). */
static double elem(const tx_tensor *t, size_t i)
{
    switch (t->dtype) {
    case TEEXEC_DTYPE_FLOAT: return ((const float *)t->data)[i];
    case TEEXEC_DTYPE_DOUBLE: return ((const double *)t->data)[i];
    case TEEXEC_DTYPE_FLOAT16: return tx_f16_to_f32(((const uint16_t *)t->data)[i]);
    case TEEXEC_DTYPE_BFLOAT16: return tx_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: return 0.0;
    }
}

teexec_status *tx_te_load_f32(const tx_tensor *t, float **out)
{
    *out = tx_te_malloc((size_t)t->numel, sizeof(float));
    if (!*out) return tx_oom();
    if (t->dtype == TEEXEC_DTYPE_FLOAT) {
        if (t->numel) memcpy(*out, t->data, (size_t)t->numel * sizeof(float));
        return NULL;
    }
    /* Double rounds to float here: the FP32 path's inputs are fp32 values. */
    for (size_t i = 0; i < t->numel; i++) (*out)[i] = (float)elem(t, i);
    return NULL;
}

teexec_status *tx_te_load_f64(const tx_tensor *t, double **out)
{
    *out = tx_te_malloc((size_t)t->numel, sizeof(double));
    if (!*out) return tx_oom();
    for (size_t i = 0; i < t->numel; i++) (*out)[i] = elem(t, i);
    return NULL;
}

teexec_status *tx_te_view_f32(const tx_tensor *t, const float **out, float **owned)
{
    *owned = NULL;
    if (t->dtype == TEEXEC_DTYPE_FLOAT && t->data) {
        *out = t->data;
        return NULL;
    }
    TX_TRY(tx_te_load_f32(t, owned));
    *out = *owned;
    return NULL;
}

teexec_status *tx_te_view_f64(const tx_tensor *t, const double **out, double **owned)
{
    *owned = NULL;
    if (t->dtype == TEEXEC_DTYPE_DOUBLE && t->data) {
        *out = t->data;
        return NULL;
    }
    TX_TRY(tx_te_load_f64(t, owned));
    *out = *owned;
    return NULL;
}

bool tx_te_overlap(const tx_tensor *a, const tx_tensor *b)
{
    if (!a || !b || !a->data || !b->data || !a->nbytes || !b->nbytes) return false;
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    return a0 < b0 + b->nbytes && b0 < a0 + a->nbytes;
}

void tx_te_store_f32(tx_tensor *t, const float *src)
{
    size_t n = (size_t)t->numel;
    switch (t->dtype) {
    case TEEXEC_DTYPE_FLOAT: memcpy(t->data, src, n * sizeof(float)); break;
    case TEEXEC_DTYPE_DOUBLE:
        for (size_t i = 0; i < n; i++) ((double *)t->data)[i] = src[i];
        break;
    case TEEXEC_DTYPE_FLOAT16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = tx_f32_to_f16(src[i]);
        break;
    case TEEXEC_DTYPE_BFLOAT16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = tx_f32_to_bf16(src[i]);
        break;
    default: break;
    }
}

void tx_te_store_f64(tx_tensor *t, const double *src)
{
    size_t n = (size_t)t->numel;
    switch (t->dtype) {
    case TEEXEC_DTYPE_DOUBLE: memcpy(t->data, src, n * sizeof(double)); break;
    case TEEXEC_DTYPE_FLOAT:
        for (size_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)src[i];
        break;
    /* Through float: a double -> half rounding in two steps can differ
     * from a direct one only on exact ties, and the FP64 path is for tests. */
    case TEEXEC_DTYPE_FLOAT16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = tx_f32_to_f16((float)src[i]);
        break;
    case TEEXEC_DTYPE_BFLOAT16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = tx_f32_to_bf16((float)src[i]);
        break;
    default: break;
    }
}

void tx_te_convert_copy(tx_tensor *dst, const tx_tensor *src)
{
    size_t n = (size_t)src->numel;
    if (dst->dtype == src->dtype) {
        if (n) memcpy(dst->data, src->data, n * tx_dtype_elem_size(src->dtype));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double v = elem(src, i);
        switch (dst->dtype) {
        case TEEXEC_DTYPE_FLOAT: ((float *)dst->data)[i] = (float)v; break;
        case TEEXEC_DTYPE_DOUBLE: ((double *)dst->data)[i] = v; break;
        case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)dst->data)[i] = tx_f32_to_f16((float)v); break;
        case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)dst->data)[i] = tx_f32_to_bf16((float)v); break;
        default: break;
        }
    }
}

void tx_te_gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                    const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                    float *c, int64_t ldc)
{
    if (m == 0 || n == 0) return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)(lda ? lda : 1), b, (int)(ldb ? ldb : 1),
                beta, c, (int)(ldc ? ldc : 1));
}

void tx_te_gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                    double *c, int64_t ldc)
{
    if (m == 0 || n == 0) return;
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)(lda ? lda : 1), b, (int)(ldb ? ldb : 1),
                beta, c, (int)(ldc ? ldc : 1));
}

teexec_status *tx_te_check_blas(tx_te_op_id op, int64_t m, int64_t n, int64_t k)
{
    if (m <= INT_MAX && n <= INT_MAX && k <= INT_MAX) return NULL;
    return tx_error(TEEXEC_ERR_UNSUPPORTED,
                    "te.ops %s: GEMM dims %lld x %lld x %lld exceed the CPU BLAS limit",
                    tx_te_name(op), (long long)m, (long long)n, (long long)k);
}

void tx_te_rows(const tx_tensor *t, int inner_rank, int64_t *rows, int64_t *inner)
{
    int64_t r = 1, c = 1;
    for (int d = 0; d < t->rank; d++) {
        if (d < t->rank - inner_rank) r *= t->dims[d];
        else c *= t->dims[d];
    }
    *rows = r;
    *inner = c;
}

tx_shape tx_te_leading(const tx_tensor *t, int drop)
{
    tx_shape s = tx_shape_of(t);
    s.rank = t->rank >= drop ? t->rank - drop : 0;
    return s;
}
