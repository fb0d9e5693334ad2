/* matmul.c - MatMul with numpy semantics (1-D promotion, broadcast batch
 * dims). float32/float64 through OpenBLAS; float16/bfloat16 converted to
 * float32 once, one sgemm per matrix, rounded once; integers in plain loops
 * with wrapping 64-bit accumulation. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/iter.h"
#include "kernels/cpu/kcommon.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static bool matmul_dtype_ok(teexec_dtype dt)
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

/* Y[M,N] = A[M,K] B[K,N] on int64 values (wrapping). */
static void imatmul(const int64_t *a, const int64_t *b, int64_t *y, int64_t m, int64_t n,
                    int64_t k)
{
    for (int64_t i = 0; i < m; i++) {
        uint64_t *row = (uint64_t *)(y + i * n);
        for (int64_t j = 0; j < n; j++) row[j] = 0;
        for (int64_t p = 0; p < k; p++) {
            uint64_t av = (uint64_t)a[i * k + p];
            const uint64_t *brow = (const uint64_t *)(b + p * n);
            for (int64_t j = 0; j < n; j++) row[j] += av * brow[j];
        }
    }
}

teexec_status *tx_cpu_matmul(const tx_tensor *a, const tx_tensor *b, tx_tensor *y)
{
    TX_TRY(tx_check_tensor("MatMul", "A", a));
    TX_TRY(tx_check_tensor("MatMul", "B", b));
    if (!matmul_dtype_ok(a->dtype)) return tx_err_dtype("MatMul", a->dtype);
    if (b->dtype != a->dtype) return tx_err_dtype_mismatch("MatMul", "B", b->dtype, a->dtype);
    tx_shape sa = tx_shape_of(a), sb = tx_shape_of(b), so;
    TX_TRY(tx_status_prefix(tx_shape_matmul(&sa, &sb, &so), "MatMul"));
    TX_TRY(tx_check_output("MatMul", y, a->dtype, &so));

    /* Promote to rank >= 2 and split into batch dims and matrix dims. */
    tx_shape pa = sa, pb = sb;
    if (sa.rank == 1) {
        pa.rank = 2;
        pa.dims[0] = 1;
        pa.dims[1] = sa.dims[0];
    }
    if (sb.rank == 1) {
        pb.rank = 2;
        pb.dims[0] = sb.dims[0];
        pb.dims[1] = 1;
    }
    int64_t m = pa.dims[pa.rank - 2], k = pa.dims[pa.rank - 1], n = pb.dims[pb.rank - 1];
    tx_shape ba = pa, bb = pb, bo;
    ba.rank -= 2;
    bb.rank -= 2;
    TX_TRY(tx_shape_broadcast2(&ba, &bb, &bo));
    if (y->numel == 0) return NULL;
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return tx_error(TEEXEC_ERR_LIMIT, "MatMul: a matrix dim exceeds the BLAS int range");

    uint64_t batch_a = 1, batch_b = 1, batch_o = 1;
    for (int32_t i = 0; i < ba.rank; i++) batch_a *= (uint64_t)ba.dims[i];
    for (int32_t i = 0; i < bb.rank; i++) batch_b *= (uint64_t)bb.dims[i];
    for (int32_t i = 0; i < bo.rank; i++) batch_o *= (uint64_t)bo.dims[i];

    /* A's batches against one shared B form a single tall GEMM - the usual
     * case of activations [B, S, H] times weights [H, N]. */
    int64_t mm = m;
    if (batch_b == 1 && batch_a == batch_o && (uint64_t)m * batch_a <= INT_MAX) {
        mm = m * (int64_t)batch_a;
        bo.rank = 0;
        ba.rank = 0;
        bb.rank = 0;
    }

    tx_kclass kc = tx_kclass_of(a->dtype);
    void *fa = NULL, *fb = NULL, *fy = NULL;
    const void *A = a->data, *B = b->data;
    void *Y = y->data;
    if (a->dtype == TEEXEC_DTYPE_FLOAT16 || a->dtype == TEEXEC_DTYPE_BFLOAT16) {
        fa = malloc(a->numel * sizeof(float) + 1);
        fb = malloc(b->numel * sizeof(float) + 1);
        fy = malloc(y->numel * sizeof(float) + 1);
        if (fa && fb && fy) {
            tx_load_f32(a->dtype, a->data, 0, a->numel, fa);
            tx_load_f32(b->dtype, b->data, 0, b->numel, fb);
        }
        A = fa;
        B = fb;
        Y = fy;
    } else if (tx_kc_is_int(kc)) {
        fa = malloc(a->numel * 8 + 1);
        fb = malloc(b->numel * 8 + 1);
        fy = malloc(y->numel * 8 + 1);
        if (fa && fb && fy) {
            tx_load_i64(a->dtype, a->data, 0, a->numel, fa);
            tx_load_i64(b->dtype, b->data, 0, b->numel, fb);
        }
        A = fa;
        B = fb;
        Y = fy;
    }
    if ((A == fa && !fa) || (B == fb && !fb) || (Y == fy && !fy)) {
        free(fa);
        free(fb);
        free(fy);
        return tx_oom();
    }

    /* Walk the output batches; strides are in matrices. */
    int64_t so_[TX_MAX_RANK], sa_[TX_MAX_RANK], sb_[TX_MAX_RANK];
    tx_shape_strides(&bo, so_);
    tx_broadcast_strides(&ba, &bo, sa_);
    tx_broadcast_strides(&bb, &bo, sb_);
    const int64_t *strides[3] = {so_, sa_, sb_};
    tx_iter it;
    tx_iter_init(&it, bo.rank, bo.dims, 3, strides);
    int64_t amat = mm * k, bmat = k * n, ymat = mm * n;
    for (int64_t r = 0; r < it.rows; r++, tx_iter_next(&it)) {
        for (int64_t i = 0; i < it.inner; i++) {
            int64_t ia = (it.off[1] + i * it.inner_stride[1]) * amat;
            int64_t ib = (it.off[2] + i * it.inner_stride[2]) * bmat;
            int64_t iy = (it.off[0] + i * it.inner_stride[0]) * ymat;
            if (kc == TX_KC_F64) {
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mm, (int)n, (int)k,
                            1.0, (const double *)A + ia, (int)(k ? k : 1),
                            (const double *)B + ib, (int)n, 0.0, (double *)Y + iy, (int)n);
            } else if (kc == TX_KC_F32) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mm, (int)n, (int)k,
                            1.0f, (const float *)A + ia, (int)(k ? k : 1),
                            (const float *)B + ib, (int)n, 0.0f, (float *)Y + iy, (int)n);
            } else {
                imatmul((const int64_t *)A + ia, (const int64_t *)B + ib, (int64_t *)Y + iy, mm,
                        n, k);
            }
        }
    }
    /* BLAS leaves C alone when K == 0 on some builds: the sum is zero. */
    if (k == 0 && tx_kc_is_float(kc)) memset(Y, 0, (size_t)y->numel * (kc == TX_KC_F64 ? 8 : 4));
    if (Y == fy) {
        if (tx_kc_is_int(kc))
            tx_store_i64(y->dtype, y->data, 0, y->numel, fy);
        else
            tx_store_f32(y->dtype, y->data, 0, y->numel, fy);
    }
    free(fa);
    free(fb);
    free(fy);
    return NULL;
}
