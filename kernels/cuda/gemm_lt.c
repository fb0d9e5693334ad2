/* gemm_lt.c - cuBLASLt GEMMs with a per-handle heuristic cache (see
 * gemm_lt.h). */
#include "kernels/cuda/gemm_lt.h"

#include "base/status.h"

#include "kernels/cuda/cublaslt_dl.h"
#include <cuda_runtime_api.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Everything the chosen algorithm may depend on. Filled after a memset so
 * that it can be hashed and compared as bytes. */
typedef struct gemm_key {
    int64_t m, n, k, lda, ldb, ldc, ldd, aux_ld;
    int32_t transa, transb;
    int32_t a_type, b_type, c_type, d_type, bias_type;
    int32_t epilogue, a_scale_mode, b_scale_mode;
    int32_t fast_accum, tf32, device_alpha, beta_nonzero;
    int32_t has_d_scale, has_amax_d;
    int32_t align_a, align_b, align_c, align_d, align_bias, align_aux;
} gemm_key;

typedef struct gemm_entry {
    bool used;
    uint64_t hash;
    gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulAlgo_t algo;
} gemm_entry;

struct tx_gemm_lt {
    cublasLtHandle_t lt;
    int device, sm;
    size_t version;
    size_t ws_bytes;
    float *dconst; /* device {0, 1}: beta in device pointer mode */
    gemm_entry *tab;
    size_t cap, count;
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

static teexec_dtype c_type_of(const tx_gemm_desc *d)
{
    if (d->c_type) return d->c_type;
    return is_fp8(d->d_type) ? TEEXEC_DTYPE_BFLOAT16 : d->d_type;
}

static teexec_dtype bias_type_of(const tx_gemm_desc *d)
{
    if (d->bias_type) return d->bias_type;
    if (low_precision(d) && !is_16(d->d_type)) return TEEXEC_DTYPE_BFLOAT16;
    return d->d_type;
}

/* Stored rows of each matrix (its leading dimension when packed). */
static int64_t rows_a(const tx_gemm_desc *d) { return d->transa ? d->k : d->m; }
static int64_t cols_a(const tx_gemm_desc *d) { return d->transa ? d->m : d->k; }
static int64_t rows_b(const tx_gemm_desc *d) { return d->transb ? d->n : d->k; }
static int64_t cols_b(const tx_gemm_desc *d) { return d->transb ? d->k : d->n; }
static int64_t ld_or(int64_t ld, int64_t rows) { return ld ? ld : rows; }
static int64_t aux_ld_of(const tx_gemm_desc *d) { return d->aux_ld ? d->aux_ld : (d->m + 7) / 8 * 8; }

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
    }
    if (e != cudaSuccess) {
        st = cuda_error(e, "allocating the device constants");
        goto fail;
    }
    h->cap = 64;
    h->tab = calloc(h->cap, sizeof *h->tab);
    if (!h->tab) {
        st = tx_oom();
        goto fail;
    }
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
    for (size_t i = 0; h->tab && i < h->cap; i++)
        if (h->tab[i].used) entry_release(&h->tab[i]);
    free(h->tab);
    if (h->dconst) cudaFree(h->dconst);
    if (h->lt) LT(Destroy)(h->lt);
    free(h);
}

size_t tx_gemm_lt_workspace_bytes(const tx_gemm_lt *h) { return h ? h->ws_bytes : 0; }
int tx_gemm_lt_sm(const tx_gemm_lt *h) { return h ? h->sm : 0; }
size_t tx_gemm_lt_cublas_version(const tx_gemm_lt *h) { return h ? h->version : 0; }

tx_gemm_lt_stats tx_gemm_lt_get_stats(const tx_gemm_lt *h)
{
    tx_gemm_lt_stats s = {0, 0, 0};
    if (h) {
        s = h->stats;
        s.cache_entries = h->count;
    }
    return s;
}

/* ---- cache ------------------------------------------------------------ */

static int32_t align_of(const void *p)
{
    if (!p) return 256;
    uintptr_t a = (uintptr_t)p;
    int32_t al = 256;
    while (al > 1 && a % (uintptr_t)al) al /= 2;
    return al;
}

static uint64_t key_hash(const gemm_key *k)
{
    const unsigned char *p = (const unsigned char *)k;
    uint64_t hsh = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof *k; i++) {
        hsh ^= p[i];
        hsh *= 0x100000001b3ull;
    }
    return hsh;
}

static void make_key(const tx_gemm_desc *d, const void *A, const void *B, const void *C, void *D,
                     gemm_key *k)
{
    memset(k, 0, sizeof *k);
    k->m = d->m;
    k->n = d->n;
    k->k = d->k;
    k->lda = ld_or(d->lda, rows_a(d));
    k->ldb = ld_or(d->ldb, rows_b(d));
    k->ldc = ld_or(d->ldc, d->m);
    k->ldd = ld_or(d->ldd, d->m);
    k->transa = d->transa != 0;
    k->transb = d->transb != 0;
    k->a_type = d->a_type;
    k->b_type = d->b_type;
    k->c_type = c_type_of(d);
    k->d_type = d->d_type;
    k->epilogue = d->epilogue;
    if (d->epilogue != TX_GEMM_EPI_NONE) k->bias_type = bias_type_of(d);
    if (d->epilogue == TX_GEMM_EPI_GELU_AUX_BIAS || d->epilogue == TX_GEMM_EPI_DGELU_BGRAD)
        k->aux_ld = aux_ld_of(d);
    k->a_scale_mode = d->a_scale_mode;
    k->b_scale_mode = d->b_scale_mode;
    k->fast_accum = d->fast_accum != 0;
    k->tf32 = d->allow_tf32 != 0;
    k->device_alpha = d->alpha_dev != NULL;
    k->beta_nonzero = d->beta != 0.0f;
    k->has_d_scale = d->d_scale != NULL;
    k->has_amax_d = d->amax_d != NULL;
    k->align_a = align_of(A);
    k->align_b = align_of(B);
    k->align_c = align_of(C);
    k->align_d = align_of(D);
    k->align_bias = d->epilogue != TX_GEMM_EPI_NONE ? align_of(d->bias) : 0;
    k->align_aux = k->aux_ld ? align_of(d->aux) : 0;
}

static gemm_entry *cache_find(tx_gemm_lt *h, const gemm_key *k, uint64_t hsh)
{
    for (size_t i = hsh & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
        gemm_entry *en = &h->tab[i];
        if (!en->used) return en; /* the free slot where it would go */
        if (en->hash == hsh && !memcmp(&en->key, k, sizeof *k)) return en;
    }
}

/* Keeps the load under one half, so cache_find always meets a free slot. */
static teexec_status *cache_reserve(tx_gemm_lt *h)
{
    if ((h->count + 1) * 2 <= h->cap) return NULL;
    size_t ncap = h->cap * 2;
    gemm_entry *nt = calloc(ncap, sizeof *nt);
    if (!nt) return tx_oom();
    gemm_entry *old = h->tab;
    size_t ocap = h->cap;
    h->tab = nt;
    h->cap = ncap;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].used) continue;
        gemm_entry *slot = cache_find(h, &old[i].key, old[i].hash);
        *slot = old[i];
    }
    free(old);
    return NULL;
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
    const gemm_key *k = &en->key;
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
    return NULL;
}

static teexec_status *query_algo(tx_gemm_lt *h, gemm_entry *en, const tx_gemm_desc *d)
{
    cublasLtMatmulPreference_t pref = NULL;
    LT_TRY(LT(MatmulPreferenceCreate)(&pref));
    teexec_status *st = NULL;
    const uint64_t ws = h->ws_bytes;
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
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    memset(&res, 0, sizeof res);
    h->stats.heuristic_queries++;
    s = LT(MatmulAlgoGetHeuristic)(h->lt, en->op, en->la, en->lb, en->lc, en->ld, pref, 1, &res,
                                       &found);
    LT(MatmulPreferenceDestroy)(pref);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && found == 0)) {
        st = UNSUP("cuBLASLt (version %zu) has no algorithm on sm_%d for %s x %s -> %s, "
                   "m=%lld n=%lld k=%lld %s%s, epilogue %s, scale modes %d/%d (%s)",
                   h->version, h->sm, dtype_name(d->a_type), dtype_name(d->b_type),
                   dtype_name(d->d_type), (long long)d->m, (long long)d->n, (long long)d->k,
                   d->transa ? "T" : "N", d->transb ? "T" : "N", epi_name(d->epilogue),
                   (int)d->a_scale_mode, (int)d->b_scale_mode, LT(GetStatusName)(s));
    } else if (s != CUBLAS_STATUS_SUCCESS) {
        st = lt_error(s, "cublasLtMatmulAlgoGetHeuristic");
    } else {
        en->algo = res.algo;
    }
    return st;
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

    gemm_key key;
    make_key(d, A, B, C, D, &key);
    const uint64_t hsh = key_hash(&key);
    gemm_entry *en = cache_find(h, &key, hsh);
    if (!en->used) {
        TX_TRY(cache_reserve(h));
        en = cache_find(h, &key, hsh);
        gemm_entry fresh;
        memset(&fresh, 0, sizeof fresh);
        fresh.key = key;
        fresh.hash = hsh;
        teexec_status *st = build_descs(&fresh, d);
        if (!st) st = query_algo(h, &fresh, d);
        if (st) {
            entry_release(&fresh);
            return st;
        }
        fresh.used = true;
        *en = fresh;
        h->count++;
    } else {
        TX_TRY(set_pointers(en, d));
    }

    const void *alpha = &d->alpha, *beta = &d->beta;
    if (d->alpha_dev) {
        alpha = d->alpha_dev;
        beta = d->beta != 0.0f ? h->dconst + 1 : h->dconst;
    }
    cublasStatus_t s = LT(Matmul)(h->lt, en->op, alpha, A, en->la, B, en->lb, beta, C, en->lc, D,
                                      en->ld, &en->algo, workspace, h->ws_bytes, (cudaStream_t)stream);
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
