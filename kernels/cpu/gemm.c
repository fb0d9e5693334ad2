/* gemm.c - Gemm: Y = alpha op(A) op(B) + beta C, C broadcast to [M, N].
 * float32/float64 through OpenBLAS (C is expanded into Y first and BLAS's
 * beta does the rest); float16/bfloat16 through FP32; integers in loops
 * (alpha and beta are applied in double and truncated, as numpy would after
 * a cast; ONNX's integer Gemm tests use alpha = beta = 1). */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static bool gemm_dtype_ok(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT:
    case TEEXEC_DTYPE_DOUBLE:
    case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_BFLOAT16:
    case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_INT64:
    case TEEXEC_DTYPE_UINT32:
    case TEEXEC_DTYPE_UINT64: return true;
    default: return false;
    }
}

teexec_status *tx_cpu_gemm(const tx_tensor *a, const tx_tensor *b, const tx_tensor *c,
                           float alpha, float beta, bool trans_a, bool trans_b, tx_tensor *y)
{
    TX_TRY(tx_check_tensor("Gemm", "A", a));
    TX_TRY(tx_check_tensor("Gemm", "B", b));
    if (!gemm_dtype_ok(a->dtype)) return tx_err_dtype("Gemm", a->dtype);
    if (b->dtype != a->dtype) return tx_err_dtype_mismatch("Gemm", "B", b->dtype, a->dtype);
    tx_shape sa = tx_shape_of(a), sb = tx_shape_of(b);
    int64_t m, n, k;
    TX_TRY(tx_status_prefix(tx_shape_gemm(&sa, &sb, trans_a, trans_b, &m, &n, &k), "Gemm"));
    tx_shape so = {.rank = 2, .dims = {m, n}};
    TX_TRY(tx_check_output("Gemm", y, a->dtype, &so));
    tx_shape sc;
    if (c) {
        TX_TRY(tx_check_tensor("Gemm", "C", c));
        if (c->dtype != a->dtype) return tx_err_dtype_mismatch("Gemm", "C", c->dtype, a->dtype);
        sc = tx_shape_of(c);
        if (!tx_shape_broadcastable_to(&sc, &so)) return tx_err_shape("Gemm", "C", c, &so);
    }
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "Gemm: a matrix dim exceeds the BLAS int range");
    if (y->numel == 0) return NULL;

    tx_kclass kc = tx_kclass_of(a->dtype);
    size_t total = (size_t)(m * n);
    int lda = (int)(a->dims[1] ? a->dims[1] : 1), ldb = (int)(b->dims[1] ? b->dims[1] : 1);
    /* C's element for (i, j): C broadcast from rank <= 2. */
    int64_t c_si = 0, c_sj = 0;
    if (c) {
        int64_t cm = sc.rank == 2 ? sc.dims[0] : 1;
        int64_t cn = sc.rank >= 1 ? sc.dims[sc.rank - 1] : 1;
        c_si = cm == 1 ? 0 : cn;
        c_sj = cn == 1 ? 0 : 1;
    }
    bool use_c = c && beta != 0.0f;

    if (kc == TX_KC_F64 || kc == TX_KC_F32) {
        bool f64 = kc == TX_KC_F64;
        bool direct = f64 || a->dtype == TEEXEC_DTYPE_FLOAT;
        void *fa = NULL, *fb = NULL, *fy = NULL;
        if (!direct) {
            fa = malloc(a->numel * sizeof(float) + 1);
            fb = malloc(b->numel * sizeof(float) + 1);
            fy = malloc(total * sizeof(float));
            if (!fa || !fb || !fy) {
                free(fa);
                free(fb);
                free(fy);
                return tx_oom();
            }
            tx_load_f32(a->dtype, a->data, 0, a->numel, fa);
            tx_load_f32(b->dtype, b->data, 0, b->numel, fb);
        }
        void *Y = direct ? y->data : fy;
        /* Y = C (broadcast), or 0 */
        for (int64_t i = 0; i < m; i++) {
            if (f64) {
                double *row = (double *)Y + i * n;
                for (int64_t j = 0; j < n; j++)
                    row[j] = use_c ? ((const double *)c->data)[i * c_si + j * c_sj] : 0.0;
            } else {
                float *row = (float *)Y + i * n;
                if (!use_c) {
                    memset(row, 0, (size_t)n * sizeof(float));
                } else if (c_sj) {
                    tx_load_f32(c->dtype, c->data, (size_t)(i * c_si), (size_t)n, row);
                } else {
                    float v;
                    tx_load_f32(c->dtype, c->data, (size_t)(i * c_si), 1, &v);
                    for (int64_t j = 0; j < n; j++) row[j] = v;
                }
            }
        }
        CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
        CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
        if (k == 0) {
            /* BLAS may skip the beta scaling when K == 0: do it here. */
            if (f64)
                for (size_t i = 0; i < total; i++) ((double *)Y)[i] *= (double)beta;
            else
                for (size_t i = 0; i < total; i++) ((float *)Y)[i] *= beta;
        } else if (f64) {
            cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (double)alpha,
                        a->data, lda, b->data, ldb, use_c ? (double)beta : 0.0, Y, (int)n);
        } else {
            cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha,
                        direct ? a->data : fa, lda, direct ? b->data : fb, ldb,
                        use_c ? beta : 0.0f, Y, (int)n);
        }
        if (!direct) tx_store_f32(y->dtype, y->data, 0, total, fy);
        free(fa);
        free(fb);
        free(fy);
        return NULL;
    }

    /* Integers: 64-bit wrapping accumulation, element by element. */
    int64_t *ia = malloc(a->numel * 8 + 1), *ib = malloc(b->numel * 8 + 1);
    int64_t *iy = malloc(total * 8), *ic = c ? malloc(c->numel * 8 + 1) : NULL;
    if (!ia || !ib || !iy || (c && !ic)) {
        free(ia);
        free(ib);
        free(iy);
        free(ic);
        return tx_oom();
    }
    tx_load_i64(a->dtype, a->data, 0, a->numel, ia);
    tx_load_i64(b->dtype, b->data, 0, b->numel, ib);
    if (c) tx_load_i64(c->dtype, c->data, 0, c->numel, ic);
    int64_t as_i = trans_a ? 1 : a->dims[1], as_p = trans_a ? a->dims[1] : 1;
    int64_t bs_p = trans_b ? 1 : b->dims[1], bs_j = trans_b ? b->dims[1] : 1;
    bool unit = alpha == 1.0f && beta == 1.0f;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            uint64_t acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (uint64_t)ia[i * as_i + p * as_p] * (uint64_t)ib[p * bs_p + j * bs_j];
            int64_t cv = c ? ic[i * c_si + j * c_sj] : 0;
            if (unit)
                iy[i * n + j] = (int64_t)(acc + (uint64_t)cv);
            else
                iy[i * n + j] = tx_f64_to_i64((double)alpha * (double)(int64_t)acc +
                                              (double)beta * (double)cv);
        }
    }
    tx_store_i64(y->dtype, y->data, 0, total, iy);
    free(ia);
    free(ib);
    free(iy);
    free(ic);
    return NULL;
}
