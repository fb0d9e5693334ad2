/* gemm_lt.c - cuBLASLt GEMMs with a per-handle heuristic cache (see
 * gemm_lt.h). */
#include "kernels/cuda/gemm_lt.h"

#include "base/log.h"
#include "base/status.h"

#include "kernels/cuda/cublaslt_dl.h"
#include "kernels/cuda/gemm_select.h"
#include <cuda_runtime_api.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One cached key: its descriptors and the chosen algorithm. Entries live
 * in creation order in a growing array; the key -> index table is
 * gemm_select.h's. */
typedef struct gemm_entry {
    tx_gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulAlgo_t algo;
    bool tune_pending;  /* tuning wanted, not yet possible */
    bool tuned;
    int candidates, chosen;
    double first_ms, chosen_ms;
} gemm_entry;

struct tx_gemm_lt {
    cublasLtHandle_t lt;
    int device, sm;
    size_t version;
    size_t ws_bytes;
    float *dconst; /* device {0, 1}: beta in device pointer mode */
    tx_gemm_cache *cache;
    gemm_entry *ent;
    size_t n_ent, cap_ent;
    tx_gemm_tune_config tune;
    cudaEvent_t ev[2]; /* made by the first tuning */
    tx_gemm_lt_stats stats;
};

/* The loaded cuBLASLt (cublaslt_dl.h): every handle is made by
 * tx_gemm_lt_create, which loads it first. */
#define LT(fn) (tx_cublaslt()->fn)

/* cuBLASLt >= 12.9 added the FP8 block scale modes, >= 12.8 MXFP8/NVFP4. */
#define LT_VERSION_BLOCK 120900u
#define LT_VERSION_MX 120800u

static teexec_status *lt_error(cublasStatus_t s, const char *call)
{
    return tx_error(TEEXEC_ERR_DEVICE, "tx_gemm_lt: %s failed: %s (%s)", call,
                    LT(GetStatusName)(s), LT(GetStatusString)(s));
}

#define LT_TRY(call)                                                  \
    do {                                                              \
        cublasStatus_t lt_st_ = (call);                               \
        if (lt_st_ != CUBLAS_STATUS_SUCCESS) return lt_error(lt_st_, #call); \
    } while (0)

static teexec_status *cuda_error(cudaError_t e, const char *call)
{
    return tx_error(TEEXEC_ERR_DEVICE, "tx_gemm_lt: %s failed: %s (%s)", call,
                    cudaGetErrorName(e), cudaGetErrorString(e));
}

/* ---- dtypes ----------------------------------------------------------- */

static bool is_fp8(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT8E4M3FN || t == TEEXEC_DTYPE_FLOAT8E5M2;
}

static bool is_wide(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT || t == TEEXEC_DTYPE_FLOAT16 || t == TEEXEC_DTYPE_BFLOAT16;
}

static bool is_16(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT16 || t == TEEXEC_DTYPE_BFLOAT16;
}

static int cuda_type(teexec_dtype t)
{
    switch (t) {
    case TEEXEC_DTYPE_FLOAT: return CUDA_R_32F;
    case TEEXEC_DTYPE_FLOAT16: return CUDA_R_16F;
    case TEEXEC_DTYPE_BFLOAT16: return CUDA_R_16BF;
    case TEEXEC_DTYPE_FLOAT8E4M3FN: return CUDA_R_8F_E4M3;
    case TEEXEC_DTYPE_FLOAT8E5M2: return CUDA_R_8F_E5M2;
    case TEEXEC_DTYPE_FLOAT4E2M1: return CUDA_R_4F_E2M1;
    default: return -1;
    }
}

static const char *dtype_name(teexec_dtype t)
{
    switch (t) {
    case TEEXEC_DTYPE_FLOAT: return "fp32";
    case TEEXEC_DTYPE_FLOAT16: return "fp16";
    case TEEXEC_DTYPE_BFLOAT16: return "bf16";
    case TEEXEC_DTYPE_FLOAT8E4M3FN: return "e4m3";
    case TEEXEC_DTYPE_FLOAT8E5M2: return "e5m2";
    case TEEXEC_DTYPE_FLOAT4E2M1: return "e2m1";
    default: return "unsupported dtype";
    }
}

static bool low_precision(const tx_gemm_desc *d)
{
    return is_fp8(d->a_type) || d->a_type == TEEXEC_DTYPE_FLOAT4E2M1;
}

/* The description helpers shared with the key (gemm_select.h). */
static teexec_dtype c_type_of(const tx_gemm_desc *d) { return tx_gemm_c_type(d); }
static teexec_dtype bias_type_of(const tx_gemm_desc *d) { return tx_gemm_bias_type(d); }
static int64_t rows_a(const tx_gemm_desc *d) { return tx_gemm_rows_a(d); }
static int64_t cols_a(const tx_gemm_desc *d) { return tx_gemm_cols_a(d); }
static int64_t rows_b(const tx_gemm_desc *d) { return tx_gemm_rows_b(d); }
static int64_t cols_b(const tx_gemm_desc *d) { return tx_gemm_cols_b(d); }
static int64_t ld_or(int64_t ld, int64_t rows) { return tx_gemm_ld_or(ld, rows); }
static int64_t aux_ld_of(const tx_gemm_desc *d) { return tx_gemm_aux_ld(d); }

static const char *epi_name(tx_gemm_epilogue e)
{
    switch (e) {
    case TX_GEMM_EPI_NONE: return "none";
    case TX_GEMM_EPI_BIAS: return "bias";
    case TX_GEMM_EPI_GELU_AUX_BIAS: return "gelu_aux_bias";
    case TX_GEMM_EPI_DGELU_BGRAD: return "dgelu_bgrad";
    case TX_GEMM_EPI_BGRADB: return "bgradb";
    }
    return "unknown";
}

static bool misaligned(const void *p)
{
    return ((uintptr_t)p) % 16 != 0;
}

#define BAD(...) tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_gemm_lt: " __VA_ARGS__)
#define UNSUP(...) tx_error(TEEXEC_ERR_UNSUPPORTED, "tx_gemm_lt: " __VA_ARGS__)

/* ---- checks ----------------------------------------------------------- */

static teexec_status *check_scales(const tx_gemm_lt *h, const tx_gemm_desc *d)
{
    const tx_gemm_scale_mode sa = d->a_scale_mode, sb = d->b_scale_mode;
    const int sm = h->sm;
    const unsigned long long ver = (unsigned long long)h->version;
    if (is_wide(d->a_type)) {
        if (sa != TX_GEMM_SCALE_NONE || sb != TX_GEMM_SCALE_NONE)
            return BAD("scale modes apply to FP8/FP4 operands only, not %s", dtype_name(d->a_type));
        return NULL;
    }
    if (d->a_type == TEEXEC_DTYPE_FLOAT4E2M1) {
        if (sa != TX_GEMM_SCALE_NVFP4 || sb != TX_GEMM_SCALE_NVFP4)
            return BAD("FP4 operands need the NVFP4 scale mode on both A and B");
    }
    const bool mx = sa == TX_GEMM_SCALE_MXFP8 || sb == TX_GEMM_SCALE_MXFP8;
    const bool nv = sa == TX_GEMM_SCALE_NVFP4 || sb == TX_GEMM_SCALE_NVFP4;
    const bool blk = sa == TX_GEMM_SCALE_BLOCK_1D || sa == TX_GEMM_SCALE_BLOCK_2D ||
                     sb == TX_GEMM_SCALE_BLOCK_1D || sb == TX_GEMM_SCALE_BLOCK_2D;
    if (mx || nv) {
        if (sa != sb) return BAD("MXFP8/NVFP4 scale modes must be the same on A and B");
        if (nv && d->a_type != TEEXEC_DTYPE_FLOAT4E2M1)
            return BAD("the NVFP4 scale mode needs FP4 E2M1 operands");
        if (sm < 100)
            return UNSUP("%s GEMMs run natively only on sm_100 and newer; this device is sm_%d: "
                         "use the exact emulation (gemm_emulate.h)", mx ? "MXFP8" : "NVFP4", sm);
        if (ver < LT_VERSION_MX)
            return UNSUP("%s GEMMs need cuBLASLt >= 12.8, the runtime has %llu",
                         mx ? "MXFP8" : "NVFP4", ver);
        if (!d->a_scale_inv || !d->b_scale_inv) return BAD("block-scaled operands need both scale pointers");
        if (nv && !(d->transa && !d->transb))
            return UNSUP("NVFP4 GEMMs run only as TN (transa=1, transb=0)");
        return NULL;
    }
    if (blk) {
        const bool a_ok = sa == TX_GEMM_SCALE_BLOCK_1D || sa == TX_GEMM_SCALE_BLOCK_2D;
        const bool b_ok = sb == TX_GEMM_SCALE_BLOCK_1D || sb == TX_GEMM_SCALE_BLOCK_2D;
        if (!a_ok || !b_ok) return BAD("FP8 block scaling needs a block scale mode on both A and B");
        if (sa == TX_GEMM_SCALE_BLOCK_2D && sb == TX_GEMM_SCALE_BLOCK_2D)
            return UNSUP("FP8 block scaling: 128x128 x 128x128 GEMMs are not supported (one operand must be 1x128)");
        if (sm != 90)
            return UNSUP("FP8 block scaling runs natively only on sm_90 (this device is sm_%d): "
                         "use the exact emulation (gemm_emulate.h)", sm);
        if (ver < LT_VERSION_BLOCK)
            return UNSUP("FP8 block scaling needs cuBLASLt >= 12.9, the runtime has %llu: "
                         "use the exact emulation (gemm_emulate.h)", ver);
        if (!d->a_scale_inv || !d->b_scale_inv) return BAD("block-scaled operands need both scale pointers");
        if (!(d->transa && !d->transb))
            return UNSUP("FP8 block-scaled GEMMs run only as TN (transa=1, transb=0)");
        if (d->epilogue != TX_GEMM_EPI_NONE && d->epilogue != TX_GEMM_EPI_BIAS)
            return UNSUP("FP8 block-scaled GEMMs take no %s epilogue", epi_name(d->epilogue));
        return NULL;
    }
    /* FP8 per-tensor (or unscaled) */
    if ((sa != TX_GEMM_SCALE_NONE && sa != TX_GEMM_SCALE_TENSOR) ||
        (sb != TX_GEMM_SCALE_NONE && sb != TX_GEMM_SCALE_TENSOR))
        return BAD("unknown scale mode %d / %d", (int)sa, (int)sb);
    if ((sa == TX_GEMM_SCALE_TENSOR && !d->a_scale_inv) || (sb == TX_GEMM_SCALE_TENSOR && !d->b_scale_inv))
        return BAD("the TENSOR scale mode needs a scale_inv pointer");
    if (sm < 89) return UNSUP("FP8 GEMMs need sm_89 or newer; this device is sm_%d", sm);
    if ((sm == 89 || sm == 90 || sm >= 120) && !(d->transa && !d->transb))
        return UNSUP("FP8 GEMMs on sm_%d run only as TN (transa=1, transb=0); got %s%s: pass the "
                     "columnwise (transposed) copy of the operand instead",
                     sm, d->transa ? "T" : "N", d->transb ? "T" : "N");
    return NULL;
}

teexec_status *tx_gemm_lt_check(const tx_gemm_lt *h, const tx_gemm_desc *d)
{
    if (!h || !d) return BAD("NULL handle or description");
    if (d->m < 0 || d->n < 0 || d->k < 1)
        return BAD("bad shape m=%lld n=%lld k=%lld (k must be >= 1)", (long long)d->m,
                   (long long)d->n, (long long)d->k);
    if (cuda_type(d->a_type) < 0 || cuda_type(d->b_type) < 0 || cuda_type(d->d_type) < 0 ||
        cuda_type(c_type_of(d)) < 0)
        return BAD("unsupported dtype (A %d, B %d, C %d, D %d)", (int)d->a_type, (int)d->b_type,
                   (int)c_type_of(d), (int)d->d_type);
    if (d->d_type == TEEXEC_DTYPE_FLOAT4E2M1) return UNSUP("FP4 outputs are not supported");
    /* operand classes */
    if (is_wide(d->a_type) || is_wide(d->b_type)) {
        if (d->a_type != d->b_type)
            return BAD("A (%s) and B (%s) must have the same dtype", dtype_name(d->a_type),
                       dtype_name(d->b_type));
        if (is_fp8(d->d_type)) return UNSUP("FP8 outputs need FP8 operands");
        if (d->a_type == TEEXEC_DTYPE_FLOAT && d->d_type != TEEXEC_DTYPE_FLOAT)
            return UNSUP("FP32 GEMMs write FP32 (D is %s)", dtype_name(d->d_type));
        if (is_16(d->a_type) && d->d_type != d->a_type && d->d_type != TEEXEC_DTYPE_FLOAT)
            return UNSUP("%s GEMMs write %s or fp32, not %s", dtype_name(d->a_type),
                         dtype_name(d->a_type), dtype_name(d->d_type));
    } else if (is_fp8(d->a_type) || is_fp8(d->b_type)) {
        if (!is_fp8(d->a_type) || !is_fp8(d->b_type))
            return BAD("FP8 A (%s) needs an FP8 B (%s)", dtype_name(d->a_type), dtype_name(d->b_type));
        if (d->a_type == TEEXEC_DTYPE_FLOAT8E5M2 && d->b_type == TEEXEC_DTYPE_FLOAT8E5M2)
            return UNSUP("E5M2 x E5M2 GEMMs are not supported by cuBLASLt");
        if (d->m % 16 || d->k % 16 || ld_or(d->lda, rows_a(d)) % 16 || ld_or(d->ldb, rows_b(d)) % 16)
            return UNSUP("FP8 GEMMs need m, k and lda/ldb multiples of 16 (m=%lld k=%lld lda=%lld "
                         "ldb=%lld)", (long long)d->m, (long long)d->k,
                         (long long)ld_or(d->lda, rows_a(d)), (long long)ld_or(d->ldb, rows_b(d)));
    } else if (d->a_type != TEEXEC_DTYPE_FLOAT4E2M1 || d->b_type != TEEXEC_DTYPE_FLOAT4E2M1) {
        return BAD("FP4 A needs an FP4 B");
    } else if (d->k % 32) {
        return UNSUP("NVFP4 GEMMs need k to be a multiple of 32 (k=%lld)", (long long)d->k);
    }
    /* cuBLASLt documents 16-byte alignment for FP8 matrix pointers; scale
     * pointers 4 bytes apart in one buffer failed with NOT_SUPPORTED in
     * cublasLtMatmul on the H200, so they get the same rule. */
    if (misaligned(d->a_scale_inv) || misaligned(d->b_scale_inv) || misaligned(d->d_scale) ||
        misaligned(d->amax_d))
        return BAD("scale and amax pointers must be 16-byte aligned");
    if (!low_precision(d) && (d->d_scale || d->amax_d))
        return BAD("d_scale and amax_d apply to FP8 GEMMs only");
    if (d->d_scale && !is_fp8(d->d_type)) return BAD("d_scale needs an FP8 output");
    if (is_fp8(d->d_type) && d->beta != 0.0f)
        return UNSUP("accumulation (beta != 0) into an FP8 output is not supported");
    if (d->allow_tf32 && d->a_type != TEEXEC_DTYPE_FLOAT) return BAD("allow_tf32 applies to FP32 GEMMs only");
    if (d->alpha_dev && d->beta != 0.0f && d->beta != 1.0f)
        return BAD("with a device alpha, beta must be 0 or 1 (got %g)", (double)d->beta);
    if (d->batch_count > 1) {
        if (!is_wide(d->a_type) || d->epilogue != TX_GEMM_EPI_NONE || d->alpha_dev)
            return UNSUP("a strided batch needs FP32/FP16/BF16 operands, no epilogue and a host alpha");
        if (d->batch_count > INT32_MAX || d->stride_a < 0 || d->stride_b < 0 || d->stride_c <= 0 ||
            d->stride_d <= 0)
            return BAD("bad strided batch (count %lld, strides %lld %lld %lld %lld)",
                       (long long)d->batch_count, (long long)d->stride_a, (long long)d->stride_b,
                       (long long)d->stride_c, (long long)d->stride_d);
    }
    /* leading dimensions */
    if (ld_or(d->lda, rows_a(d)) < rows_a(d) || ld_or(d->ldb, rows_b(d)) < rows_b(d) ||
        ld_or(d->ldc, d->m) < d->m || ld_or(d->ldd, d->m) < d->m)
        return BAD("a leading dimension is smaller than its matrix's rows");
    /* epilogue */
    switch (d->epilogue) {
    case TX_GEMM_EPI_NONE: break;
    case TX_GEMM_EPI_GELU_AUX_BIAS:
    case TX_GEMM_EPI_DGELU_BGRAD: {
        const int64_t ald = aux_ld_of(d);
        if (!d->aux) return BAD("the %s epilogue needs an aux buffer", epi_name(d->epilogue));
        if (ald % 8 || ald < d->m)
            return BAD("aux_ld %lld must be a multiple of 8 and >= m (%lld)", (long long)ald,
                       (long long)d->m);
        if (is_fp8(d->d_type)) return UNSUP("the %s epilogue with an FP8 output is not supported",
                                            epi_name(d->epilogue));
    }
    /* fall through */
    case TX_GEMM_EPI_BIAS:
    case TX_GEMM_EPI_BGRADB:
        if (!d->bias) return BAD("the %s epilogue needs a bias buffer", epi_name(d->epilogue));
        if (cuda_type(bias_type_of(d)) < 0 || !is_wide(bias_type_of(d)))
            return BAD("bias dtype %d is not fp32/fp16/bf16", (int)bias_type_of(d));
        break;
    default: return BAD("unknown epilogue %d", (int)d->epilogue);
    }
    return check_scales(h, d);
}

/* ---- handle ----------------------------------------------------------- */

teexec_status *tx_gemm_lt_create(size_t workspace_bytes, tx_gemm_lt **out)
{
    if (!out) return BAD("NULL out");
    *out = NULL;
    const tx_cublaslt_api *api = NULL;
    TX_TRY(tx_cublaslt_load(&api));
    tx_gemm_lt *h = calloc(1, sizeof *h);
    if (!h) return tx_oom();
    teexec_status *st = NULL;
    int major = 0, minor = 0;
    cudaError_t e = cudaGetDevice(&h->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, h->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, h->device);
    if (e != cudaSuccess) {
        free(h);
        return cuda_error(e, "querying the device");
    }
    h->sm = major * 10 + minor;
    h->version = LT(GetVersion)();
    h->ws_bytes = workspace_bytes;
    cublasStatus_t s = LT(Create)(&h->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(h);
        return lt_error(s, "cublasLtCreate");
    }
    e = cudaMalloc((void **)&h->dconst, 2 * sizeof(float));
    if (e == cudaSuccess) {
        const float c[2] = {0.0f, 1.0f};
        e = cudaMemcpy(h->dconst, c, sizeof c, cudaMemcpyHostToDevice);
        /* a pageable copy may return before its DMA lands, and the GEMMs
         * run on streams that do not wait for the legacy stream */
        if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
    }
    if (e != cudaSuccess) {
        st = cuda_error(e, "allocating the device constants");
        goto fail;
    }
    h->tune = tx_gemm_tune_off();
    st = tx_gemm_cache_create(&h->cache);
    if (st) goto fail;
    *out = h;
    return NULL;
fail:
    tx_gemm_lt_destroy(h);
    return st;
}

static void entry_release(gemm_entry *en)
{
    if (en->op) LT(MatmulDescDestroy)(en->op);
    if (en->la) LT(MatrixLayoutDestroy)(en->la);
    if (en->lb) LT(MatrixLayoutDestroy)(en->lb);
    if (en->lc) LT(MatrixLayoutDestroy)(en->lc);
    if (en->ld) LT(MatrixLayoutDestroy)(en->ld);
    memset(en, 0, sizeof *en);
}

void tx_gemm_lt_destroy(tx_gemm_lt *h)
{
    if (!h) return;
    for (size_t i = 0; i < h->n_ent; i++) entry_release(&h->ent[i]);
    free(h->ent);
    tx_gemm_cache_destroy(h->cache);
    for (int i = 0; i < 2; i++)
        if (h->ev[i]) cudaEventDestroy(h->ev[i]);
    if (h->dconst) cudaFree(h->dconst);
    if (h->lt) LT(Destroy)(h->lt);
    free(h);
}

size_t tx_gemm_lt_workspace_bytes(const tx_gemm_lt *h) { return h ? h->ws_bytes : 0; }
int tx_gemm_lt_sm(const tx_gemm_lt *h) { return h ? h->sm : 0; }
size_t tx_gemm_lt_cublas_version(const tx_gemm_lt *h) { return h ? h->version : 0; }

tx_gemm_lt_stats tx_gemm_lt_get_stats(const tx_gemm_lt *h)
{
    tx_gemm_lt_stats s;
    memset(&s, 0, sizeof s);
    if (h) {
        s = h->stats;
        s.cache_entries = h->n_ent;
    }
    return s;
}

/* ---- descriptors ------------------------------------------------------ */

static int32_t lt_scale_mode(tx_gemm_scale_mode m)
{
    switch (m) {
    case TX_GEMM_SCALE_BLOCK_1D: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case TX_GEMM_SCALE_BLOCK_2D: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    case TX_GEMM_SCALE_MXFP8: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
    case TX_GEMM_SCALE_NVFP4: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
    default: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    }
}

static int32_t lt_epilogue(tx_gemm_epilogue e)
{
    switch (e) {
    case TX_GEMM_EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case TX_GEMM_EPI_GELU_AUX_BIAS: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case TX_GEMM_EPI_DGELU_BGRAD: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case TX_GEMM_EPI_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

#define SET_OP(attr, val)                                                                     \
    LT_TRY(LT(MatmulDescSetAttribute)(en->op, (attr), &(val), sizeof(val)))

/* The per-call pointers: set on every run (the algorithm was chosen for
 * their alignment class, which is part of the key). */
static teexec_status *set_pointers(gemm_entry *en, const tx_gemm_desc *d)
{
    if (d->epilogue != TX_GEMM_EPI_NONE) {
        const void *bias = d->bias;
        SET_OP(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    }
    if (d->epilogue == TX_GEMM_EPI_GELU_AUX_BIAS || d->epilogue == TX_GEMM_EPI_DGELU_BGRAD) {
        const void *aux = d->aux;
        SET_OP(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    }
    if (d->a_scale_mode != TX_GEMM_SCALE_NONE) {
        const void *p = d->a_scale_inv;
        SET_OP(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p);
    }
    if (d->b_scale_mode != TX_GEMM_SCALE_NONE) {
        const void *p = d->b_scale_inv;
        SET_OP(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p);
    }
    if (d->d_scale) {
        const void *p = d->d_scale;
        SET_OP(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, p);
    }
    if (d->amax_d) {
        void *p = d->amax_d;
        SET_OP(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, p);
    }
    return NULL;
}

static teexec_status *build_descs(gemm_entry *en, const tx_gemm_desc *d)
{
    const tx_gemm_key *k = &en->key;
    int32_t compute = CUBLAS_COMPUTE_32F;
    if (d->a_type == TEEXEC_DTYPE_FLOAT && d->allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    LT_TRY(LT(MatmulDescCreate)(&en->op, (cublasComputeType_t)compute, CUDA_R_32F));
    const int32_t ta = k->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    SET_OP(CUBLASLT_MATMUL_DESC_TRANSA, ta);
    SET_OP(CUBLASLT_MATMUL_DESC_TRANSB, tb);
    if (k->device_alpha) {
        const int32_t pm = CUBLASLT_POINTER_MODE_DEVICE;
        SET_OP(CUBLASLT_MATMUL_DESC_POINTER_MODE, pm);
    }
    const int32_t epi = lt_epilogue(d->epilogue);
    SET_OP(CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
    if (d->epilogue != TX_GEMM_EPI_NONE) {
        const int32_t bt = cuda_type(bias_type_of(d));
        SET_OP(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bt);
    }
    if (k->aux_ld) {
        const int64_t ald = k->aux_ld;
        SET_OP(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ald);
    }
    if (low_precision(d)) {
        const int32_t sa = lt_scale_mode(d->a_scale_mode), sb = lt_scale_mode(d->b_scale_mode);
        /* block-scaled modes set the mode; SCALAR_32F is the default */
        if (sa != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) SET_OP(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, sa);
        if (sb != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) SET_OP(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, sb);
        const bool blk = d->a_scale_mode == TX_GEMM_SCALE_BLOCK_1D || d->a_scale_mode == TX_GEMM_SCALE_BLOCK_2D;
        /* block scaling forces split accumulation (te-ops.md 4.5) */
        const int8_t fa = (int8_t)(d->fast_accum && !blk && is_fp8(d->a_type));
        SET_OP(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fa);
    }
    TX_TRY(set_pointers(en, d));
    LT_TRY(LT(MatrixLayoutCreate)(&en->la, (cudaDataType_t)cuda_type(d->a_type),
                                      (uint64_t)rows_a(d), (uint64_t)cols_a(d), k->lda));
    LT_TRY(LT(MatrixLayoutCreate)(&en->lb, (cudaDataType_t)cuda_type(d->b_type),
                                      (uint64_t)rows_b(d), (uint64_t)cols_b(d), k->ldb));
    LT_TRY(LT(MatrixLayoutCreate)(&en->lc, (cudaDataType_t)cuda_type(k->c_type), (uint64_t)d->m,
                                      (uint64_t)d->n, k->ldc));
    LT_TRY(LT(MatrixLayoutCreate)(&en->ld, (cudaDataType_t)cuda_type(d->d_type), (uint64_t)d->m,
                                      (uint64_t)d->n, k->ldd));
    if (k->batch_count > 1) {
        const int32_t count = (int32_t)k->batch_count;
        cublasLtMatrixLayout_t lay[4] = {en->la, en->lb, en->lc, en->ld};
        const int64_t stride[4] = {k->stride_a, k->stride_b, k->stride_c, k->stride_d};
        for (int i = 0; i < 4; i++) {
            LT_TRY(LT(MatrixLayoutSetAttribute)(lay[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                sizeof count));
            LT_TRY(LT(MatrixLayoutSetAttribute)(lay[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride[i], sizeof stride[i]));
        }
    }
    return NULL;
}

/* ---- algorithm choice ----------------------------------------------------- */

/* cuBLASLt's first `want` answers for the entry's descriptors (*found of
 * them, in its order); UNSUPPORTED when it has none. */
static teexec_status *query_algos(tx_gemm_lt *h, gemm_entry *en, const tx_gemm_desc *d, int want,
                                  size_t ws_limit, cublasLtMatmulHeuristicResult_t *res, int *found)
{
    *found = 0;
    cublasLtMatmulPreference_t pref = NULL;
    LT_TRY(LT(MatmulPreferenceCreate)(&pref));
    teexec_status *st = NULL;
    const uint64_t ws = ws_limit < h->ws_bytes ? ws_limit : h->ws_bytes;
    const uint32_t al[4] = {(uint32_t)en->key.align_a, (uint32_t)en->key.align_b,
                            (uint32_t)en->key.align_c, (uint32_t)en->key.align_d};
    cublasStatus_t s = LT(MatmulPreferenceSetAttribute)(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &ws, sizeof ws);
    const cublasLtMatmulPreferenceAttributes_t aa[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
        s = LT(MatmulPreferenceSetAttribute)(pref, aa[i], &al[i], sizeof al[i]);
    if (s != CUBLAS_STATUS_SUCCESS) {
        LT(MatmulPreferenceDestroy)(pref);
        return lt_error(s, "cublasLtMatmulPreferenceSetAttribute");
    }
    memset(res, 0, (size_t)want * sizeof *res);
    h->stats.heuristic_queries++;
    s = LT(MatmulAlgoGetHeuristic)(h->lt, en->op, en->la, en->lb, en->lc, en->ld, pref, want, res,
                                       found);
    LT(MatmulPreferenceDestroy)(pref);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && *found == 0)) {
        st = UNSUP("cuBLASLt (version %zu) has no algorithm on sm_%d for %s x %s -> %s, "
                   "m=%lld n=%lld k=%lld %s%s, epilogue %s, scale modes %d/%d (%s)",
                   h->version, h->sm, dtype_name(d->a_type), dtype_name(d->b_type),
                   dtype_name(d->d_type), (long long)d->m, (long long)d->n, (long long)d->k,
                   d->transa ? "T" : "N", d->transb ? "T" : "N", epi_name(d->epilogue),
                   (int)d->a_scale_mode, (int)d->b_scale_mode, LT(GetStatusName)(s));
    } else if (s != CUBLAS_STATUS_SUCCESS) {
        st = lt_error(s, "cublasLtMatmulAlgoGetHeuristic");
    }
    if (st) *found = 0;
    return st;
}

static cublasStatus_t launch(tx_gemm_lt *h, const gemm_entry *en, const cublasLtMatmulAlgo_t *algo,
                             const tx_gemm_desc *d, const void *A, const void *B, const void *C,
                             void *D, void *workspace, void *stream)
{
    const void *alpha = &d->alpha, *beta = &d->beta;
    if (d->alpha_dev) {
        alpha = d->alpha_dev;
        beta = d->beta != 0.0f ? h->dconst + 1 : h->dconst;
    }
    return LT(Matmul)(h->lt, en->op, alpha, A, en->la, B, en->lb, beta, C, en->lc, D, en->ld, algo,
                      workspace, h->ws_bytes, (cudaStream_t)stream);
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#define CUDA_TRY(call, what)                                      \
    do {                                                          \
        cudaError_t cu_e_ = (call);                               \
        if (cu_e_ != cudaSuccess) return cuda_error(cu_e_, what); \
    } while (0)

/* GPU time of one launch of `algo` (warm-up) and of *reps launches after
 * it (*ms: per launch; -1 when cuBLASLt refused the algorithm). *reps <= 0:
 * the repeat rule of cfg decides from the warm-up, and *reps is set. */
static teexec_status *time_algo(tx_gemm_lt *h, const gemm_entry *en, const cublasLtMatmulAlgo_t *algo,
                                const tx_gemm_desc *d, const void *A, const void *B, const void *C,
                                void *D, void *workspace, void *stream,
                                const tx_gemm_tune_config *cfg, int *reps_io, double *ms)
{
    cudaStream_t s = (cudaStream_t)stream;
    *ms = -1.0;
    float t = 0.0f;
    CUDA_TRY(cudaEventRecord(h->ev[0], s), "timing a GEMM candidate");
    h->stats.timed_runs++;
    if (launch(h, en, algo, d, A, B, C, D, workspace, stream) != CUBLAS_STATUS_SUCCESS) return NULL;
    CUDA_TRY(cudaEventRecord(h->ev[1], s), "timing a GEMM candidate");
    CUDA_TRY(cudaEventSynchronize(h->ev[1]), "timing a GEMM candidate");
    CUDA_TRY(cudaEventElapsedTime(&t, h->ev[0], h->ev[1]), "timing a GEMM candidate");
    if (*reps_io <= 0) *reps_io = tx_gemm_tune_reps(cfg, (double)t);
    const int reps = *reps_io;
    CUDA_TRY(cudaEventRecord(h->ev[0], s), "timing a GEMM candidate");
    for (int r = 0; r < reps; r++) {
        h->stats.timed_runs++;
        if (launch(h, en, algo, d, A, B, C, D, workspace, stream) != CUBLAS_STATUS_SUCCESS) {
            CUDA_TRY(cudaStreamSynchronize(s), "timing a GEMM candidate");
            return NULL;
        }
    }
    CUDA_TRY(cudaEventRecord(h->ev[1], s), "timing a GEMM candidate");
    CUDA_TRY(cudaEventSynchronize(h->ev[1]), "timing a GEMM candidate");
    CUDA_TRY(cudaEventElapsedTime(&t, h->ev[0], h->ev[1]), "timing a GEMM candidate");
    *ms = (double)t / reps;
    return NULL;
}

/* Times found candidates in cfg->rounds interleaved passes (each keeps its
 * fastest pass; ms[i] < 0: refused or over the workspace). */
static teexec_status *time_candidates(tx_gemm_lt *h, const gemm_entry *en,
                                      const cublasLtMatmulHeuristicResult_t *res, int found,
                                      const tx_gemm_desc *d, const void *A, const void *B,
                                      const void *C, void *D, void *workspace, void *stream,
                                      const tx_gemm_tune_config *cfg, double *ms)
{
    int reps[TX_GEMM_TUNE_MAX_CANDIDATES];
    for (int i = 0; i < 2; i++)
        if (!h->ev[i]) CUDA_TRY(cudaEventCreate(&h->ev[i]), "creating the tuning events");
    /* the work queued before this call must not count as the first candidate's */
    CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream), "tuning a GEMM");
    const int rounds = cfg->rounds > 1 ? cfg->rounds : 1;
    for (int i = 0; i < found; i++) {
        ms[i] = -1.0;
        reps[i] = 0;
    }
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < found; i++) {
            if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > h->ws_bytes) continue;
            if (r > 0 && ms[i] < 0.0) continue; /* refused in the first pass */
            double t = -1.0;
            TX_TRY(time_algo(h, en, &res[i].algo, d, A, B, C, D, workspace, stream, cfg, &reps[i], &t));
            if (t >= 0.0 && (ms[i] < 0.0 || t < ms[i])) ms[i] = t;
        }
    }
    return NULL;
}

/* Times the heuristic's first answers with the call's buffers and keeps
 * the fastest (gemm_select.h's rule). Only called outside capture, for a
 * GEMM that may be repeated. */
static teexec_status *tune_entry(tx_gemm_lt *h, gemm_entry *en, const tx_gemm_desc *d, const void *A,
                                 const void *B, const void *C, void *D, void *workspace, void *stream)
{
    cublasLtMatmulHeuristicResult_t res[TX_GEMM_TUNE_MAX_CANDIDATES];
    double ms[TX_GEMM_TUNE_MAX_CANDIDATES];
    const int want = tx_gemm_tune_candidates(&h->tune, d->m, d->n, d->k);
    int found = 0;
    TX_TRY(query_algos(h, en, d, want, h->ws_bytes, res, &found));
    const double t0 = wall_ms();
    TX_TRY(time_candidates(h, en, res, found, d, A, B, C, D, workspace, stream, &h->tune, ms));
    en->tune_pending = false;
    const int pick = tx_gemm_tune_pick(ms, (size_t)found);
    h->stats.tune_ms += wall_ms() - t0;
    if (pick < 0) return NULL; /* none ran: keep the first answer; the real call reports why */
    en->algo = res[pick].algo;
    en->tuned = true;
    en->candidates = found;
    en->chosen = pick;
    en->first_ms = ms[0];
    en->chosen_ms = ms[pick];
    h->stats.tuned++;
    if (tx_log_enabled(TEEXEC_LOG_DEBUG))
        tx_log(TEEXEC_LOG_DEBUG,
               "tx_gemm_lt: tuned %s x %s -> %s m=%lld n=%lld k=%lld %s%s epilogue %s: answer %d of "
               "%d, %.4f ms (first answer %.4f ms)",
               dtype_name(d->a_type), dtype_name(d->b_type), dtype_name(d->d_type),
               (long long)d->m, (long long)d->n, (long long)d->k, d->transa ? "T" : "N",
               d->transb ? "T" : "N", epi_name(d->epilogue), pick, found, ms[pick], ms[0]);
    return NULL;
}

/* Tunes a pending entry now if this call allows it: not during capture
 * (no timing there; the key stays pending), and only for a GEMM whose
 * repetition leaves its outputs as one run does (the same node calls with
 * the same buffers each time, so a refusal is final). */
static teexec_status *maybe_tune(tx_gemm_lt *h, gemm_entry *en, const tx_gemm_desc *d, const void *A,
                                 const void *B, const void *C, void *D, void *workspace, void *stream)
{
    if (!tx_gemm_tune_enabled(&h->tune)) {
        en->tune_pending = false;
        return NULL;
    }
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &cs) != cudaSuccess ||
        cs != cudaStreamCaptureStatusNone) {
        h->stats.tune_deferred++;
        return NULL;
    }
    const char *why = NULL;
    if (!tx_gemm_tune_repeatable(d, A, B, C, D, &why)) {
        en->tune_pending = false;
        h->stats.tune_deferred++;
        if (tx_log_enabled(TEEXEC_LOG_DEBUG))
            tx_log(TEEXEC_LOG_DEBUG, "tx_gemm_lt: m=%lld n=%lld k=%lld not tuned: %s",
                   (long long)d->m, (long long)d->n, (long long)d->k, why);
        return NULL;
    }
    return tune_entry(h, en, d, A, B, C, D, workspace, stream);
}

/* ---- public ------------------------------------------------------------------- */

void tx_gemm_lt_set_tune(tx_gemm_lt *h, const tx_gemm_tune_config *cfg)
{
    if (!h) return;
    h->tune = cfg ? *cfg : tx_gemm_tune_off();
}

int tx_gemm_lt_tuning(const tx_gemm_lt *h)
{
    return h && tx_gemm_tune_enabled(&h->tune);
}

static int32_t algo_attr(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t attr)
{
    /* cuBLASLt wants the exact size: most attributes are 32-bit, the inner
     * and cluster shape ids 16-bit */
    int32_t v = -1;
    size_t written = 0;
    if (LT(MatmulAlgoConfigGetAttribute)(a, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS &&
        written == sizeof v)
        return v;
    uint16_t u = 0;
    if (LT(MatmulAlgoConfigGetAttribute)(a, attr, &u, sizeof u, &written) == CUBLAS_STATUS_SUCCESS &&
        written == sizeof u)
        return u;
    return -1;
}

teexec_status *tx_gemm_lt_sweep(tx_gemm_lt *h, const tx_gemm_desc *d, const void *A, const void *B,
                                const void *C, void *D, void *workspace, size_t ws_limit,
                                void *stream, int want, int rounds, tx_gemm_lt_candidate *out,
                                int *n)
{
    if (!h || !d || !out || !n) return BAD("NULL handle, description or output");
    *n = 0;
    TX_TRY(tx_gemm_lt_check(h, d));
    if (!A || !B || !D || d->m == 0 || d->n == 0) return BAD("a sweep needs A, B, D and m, n > 0");
    if (d->beta != 0.0f && !C) return BAD("beta != 0 needs C");
    if (h->ws_bytes && !workspace) return BAD("NULL workspace");
    if (!C && c_type_of(d) == d->d_type) C = D;
    const char *why = NULL;
    if (!tx_gemm_tune_repeatable(d, A, B, C, D, &why)) return BAD("cannot repeat this GEMM: %s", why);
    if (want < 1) want = 1;
    if (want > TX_GEMM_TUNE_MAX_CANDIDATES) want = TX_GEMM_TUNE_MAX_CANDIDATES;
    gemm_entry en;
    memset(&en, 0, sizeof en);
    tx_gemm_key_make(d, A, B, C, D, &en.key);
    cublasLtMatmulHeuristicResult_t res[TX_GEMM_TUNE_MAX_CANDIDATES];
    double ms[TX_GEMM_TUNE_MAX_CANDIDATES];
    int found = 0;
    teexec_status *st = build_descs(&en, d);
    if (!st) st = query_algos(h, &en, d, want, ws_limit, res, &found);
    tx_gemm_tune_config cfg = h->tune;
    if (cfg.min_reps < 1) cfg = tx_gemm_tune_off(); /* the repeat rule's defaults */
    cfg.rounds = rounds;
    if (!st) st = time_candidates(h, &en, res, found, d, A, B, C, D, workspace, stream, &cfg, ms);
    entry_release(&en);
    if (st) return st;
    for (int i = 0; i < found; i++) {
        tx_gemm_lt_candidate *c = &out[i];
        memset(c, 0, sizeof *c);
        c->ms = ms[i];
        c->workspace = res[i].workspaceSize;
        c->waves = res[i].wavesCount;
        c->algo_id = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_ID);
        c->tile_id = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
        c->stages_id = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
        c->splitk = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
        c->reduction_scheme = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
        c->swizzle = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
        c->custom = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
        c->inner_shape_id = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID);
        c->cluster_shape_id = algo_attr(&res[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
    }
    *n = found;
    return NULL;
}

teexec_status *tx_gemm_lt_choice_at(const tx_gemm_lt *h, size_t i, tx_gemm_lt_choice *out)
{
    if (!h || !out) return BAD("NULL handle or out");
    memset(out, 0, sizeof *out);
    if (i >= h->n_ent) return BAD("choice %zu of %zu cached GEMMs", i, h->n_ent);
    const gemm_entry *en = &h->ent[i];
    const tx_gemm_key *k = &en->key;
    out->m = k->m;
    out->n = k->n;
    out->k = k->k;
    out->transa = k->transa;
    out->transb = k->transb;
    out->a_type = (teexec_dtype)k->a_type;
    out->d_type = (teexec_dtype)k->d_type;
    out->epilogue = (tx_gemm_epilogue)k->epilogue;
    out->tuned = en->tuned;
    out->candidates = en->candidates;
    out->chosen = en->chosen;
    out->first_ms = en->first_ms;
    out->chosen_ms = en->chosen_ms;
    out->algo_id = algo_attr(&en->algo, CUBLASLT_ALGO_CONFIG_ID);
    out->tile_id = algo_attr(&en->algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
    out->splitk = algo_attr(&en->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
    out->reduction_scheme = algo_attr(&en->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
    return NULL;
}

/* Room for one more entry (the table stores indices, so moving is fine). */
static teexec_status *reserve_entry(tx_gemm_lt *h)
{
    if (h->n_ent < h->cap_ent) return NULL;
    const size_t ncap = h->cap_ent ? h->cap_ent * 2 : 16;
    if (ncap > UINT32_MAX || ncap > SIZE_MAX / sizeof(gemm_entry)) return tx_oom();
    gemm_entry *ne = realloc(h->ent, ncap * sizeof *ne);
    if (!ne) return tx_oom();
    h->ent = ne;
    h->cap_ent = ncap;
    return NULL;
}

teexec_status *tx_gemm_lt_run(tx_gemm_lt *h, const tx_gemm_desc *d, const void *A, const void *B,
                              const void *C, void *D, void *workspace, void *stream)
{
    TX_TRY(tx_gemm_lt_check(h, d));
    if (d->m == 0 || d->n == 0) return NULL;
    if (!A || !B || !D) return BAD("NULL A, B or D");
    if (low_precision(d) && (misaligned(A) || misaligned(B) || misaligned(C) || misaligned(D)))
        return BAD("FP8/FP4 GEMMs need 16-byte aligned A, B, C and D");
    if (d->beta != 0.0f && !C) return BAD("beta != 0 needs C");
    if (h->ws_bytes && !workspace) return BAD("NULL workspace (the handle promises %zu bytes)", h->ws_bytes);
    /* C is not read when beta == 0: alias it to D where the layouts agree;
     * with an FP8 D (C typed BF16/FP16) cuBLASLt wants no C at all, as TE
     * passes it (an aliased C of another type is INVALID_VALUE). */
    if (!C && c_type_of(d) == d->d_type) C = D;

    tx_gemm_key key;
    tx_gemm_key_make(d, A, B, C, D, &key);
    const int64_t idx = tx_gemm_cache_find(h->cache, &key);
    gemm_entry *en;
    if (idx < 0) {
        TX_TRY(reserve_entry(h));
        gemm_entry fresh;
        memset(&fresh, 0, sizeof fresh);
        fresh.key = key;
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        teexec_status *st = build_descs(&fresh, d);
        if (!st) st = query_algos(h, &fresh, d, 1, h->ws_bytes, &res, &found);
        if (!st) st = tx_gemm_cache_insert(h->cache, &key, (uint32_t)h->n_ent);
        if (st) {
            entry_release(&fresh);
            return st;
        }
        fresh.algo = res.algo;
        fresh.tune_pending = tx_gemm_tune_enabled(&h->tune);
        h->ent[h->n_ent] = fresh;
        en = &h->ent[h->n_ent++];
    } else {
        en = &h->ent[idx];
        TX_TRY(set_pointers(en, d));
    }
    if (en->tune_pending) TX_TRY(maybe_tune(h, en, d, A, B, C, D, workspace, stream));

    cublasStatus_t s = launch(h, en, &en->algo, d, A, B, C, D, workspace, stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        return tx_error(TEEXEC_ERR_DEVICE,
                        "tx_gemm_lt: cublasLtMatmul failed: %s (%s) for %s x %s -> %s, m=%lld n=%lld "
                        "k=%lld %s%s, epilogue %s",
                        LT(GetStatusName)(s), LT(GetStatusString)(s), dtype_name(d->a_type),
                        dtype_name(d->b_type), dtype_name(d->d_type), (long long)d->m,
                        (long long)d->n, (long long)d->k, d->transa ? "T" : "N", d->transb ? "T" : "N",
                        epi_name(d->epilogue));
    }
    h->stats.runs++;
    return NULL;
}
