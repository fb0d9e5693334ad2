/* linear_gemm.c - a Linear's FPROP / DGRAD / WGRAD GEMMs under any recipe
 * (see linear_gemm.h).
 *
 * Two operand layouts reach cuBLASLt (cuBLAS column-major terms; cuBLAS's A
 * is always the second operand of the call, w or x, and B the first):
 *  - "source": the matrices as the caller holds them ([rows, cols] row-major;
 *    columnwise data that is stored transposed is dequantized back to that
 *    shape): FPROP TN (A = w, B = x), DGRAD NN (A = w, B = dy), WGRAD NT
 *    (A = x, B = dy). High precision and native MXFP8 (whose columnwise
 *    data is not transposed) use it; the exact emulation describes its GEMM
 *    this way, and gemm_emulate.h dequantizes into K-major operands and runs
 *    it as TN.
 *  - "TN copies": every GEMM as TN over the stored rowwise data and the
 *    transposed columnwise copies, so both operands are K-major as Hopper's
 *    FP8 GEMM needs: FPROP (w row, x row), DGRAD (w col [K,N], dy row),
 *    WGRAD (x col [K,T], dy col [N,T]). FP8 per-tensor, FP8 block and native
 *    NVFP4 use it.
 */
#include "exec/cuda/linear_gemm.h"

#include "base/checked.h"
#include "base/status.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_emu_prep.h"
#include "kernels/cuda/gemm_emulate.h"
#include "kernels/cuda/quant_block.h"
#include "kernels/cuda/quant_fp8.h"
#include "kernels/cuda/quant_mxfp8.h"
#include "kernels/cuda/quant_nvfp4.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#define ALIGN ((size_t)256)
/* Per-tensor scalars: [0] scale, [16] scale_inv, [32] amax (NVFP4: the
 * rowwise and columnwise global amaxes at [32] and [36]). */
#define SCALARS_BYTES ((size_t)64)
#define SC_SCALE 0
#define SC_SCALE_INV 4
#define SC_AMAX 8

#define WHAT "linear gemm"

/* ---- sizes ------------------------------------------------------------- */

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }
static size_t round_up(size_t a, size_t b) { return ceil_div(a, b) * b; }

static int mul3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t t;
    return tx_mul_size(a, b, &t) && tx_mul_size(t, c, out);
}

/* Appends a part of `bytes` at the next 256-byte boundary. */
static int place(size_t *pos, size_t bytes, size_t *offset)
{
    size_t p;
    if (!tx_add_size(*pos, ALIGN - 1, &p)) return 0;
    p = p / ALIGN * ALIGN;
    *offset = p;
    return tx_add_size(p, bytes, pos);
}

static bool is_fp8_fmt(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT8E4M3FN || t == TEEXEC_DTYPE_FLOAT8E5M2;
}

static teexec_dtype fmt_of(const tx_cuda_lin_operand *o)
{
    if (o->q.cfg.kind == TX_QKIND_NVFP4) return TEEXEC_DTYPE_FLOAT4E2M1;
    return o->q.cfg.fmt;
}

/* The padded compact scale array of one usage (qtensor.h's table): rows and
 * columns in elements; elem: bytes per element. 0 rows: no scale array. */
static void scale_shape(const tx_quant_config *c, size_t M, size_t K, bool col, size_t *rows,
                        size_t *cols, size_t *elem)
{
    *rows = *cols = 0;
    *elem = 1;
    switch (c->kind) {
    case TX_QKIND_FP8_BLOCK:
        *elem = 4;
        if (col) {
            /* the rowwise form of X^T */
            size_t t = M;
            M = K;
            K = t;
        }
        if (c->block_2d) {
            *rows = ceil_div(M, 128);
            *cols = round_up(ceil_div(K, 128), 4);
        } else {
            *rows = ceil_div(K, 128);
            *cols = round_up(M, 4);
        }
        break;
    case TX_QKIND_MXFP8:
        if (col) {
            *rows = round_up(M / 32, 4);
            *cols = round_up(K, 128);
        } else {
            *rows = round_up(M, 128);
            *cols = round_up(K / 32, 4);
        }
        break;
    case TX_QKIND_NVFP4:
        if (col) {
            *rows = round_up(K, 128);
            *cols = round_up(ceil_div(M, 16), 4);
        } else {
            *rows = round_up(M, 128);
            *cols = round_up(ceil_div(K, 16), 4);
        }
        break;
    default: break;
    }
}

static size_t scale_bytes(const tx_cuda_lin_operand *o, bool col)
{
    size_t r, c, e, n = 0;
    scale_shape(&o->q.cfg, o->rows, o->cols, col, &r, &c, &e);
    if (!mul3(r, c, e, &n)) return 0;
    return n;
}

static teexec_status *shape_rule(const tx_cuda_lin_operand *o, const tx_quant_config *c, bool col)
{
    const size_t M = o->rows, K = o->cols;
    switch (c->kind) {
    case TX_QKIND_FP8_TENSOR:
        /* the quantizer wants cols % 8 (rows % 16 for the transpose); the
         * Hopper TN GEMM wants the reduction dim (cols, and rows of the
         * columnwise copy) and the other operand's rows multiples of 16 */
        if (K % 16 || (col && M % 16))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "%s: FP8 per-tensor operands need cols%s to be multiples of 16, got "
                            "[%zu, %zu]", WHAT, col ? " and rows (columnwise copy)" : "", M, K);
        return NULL;
    case TX_QKIND_FP8_BLOCK:
        if (K % 8 || (col && M % 16))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "%s: FP8 block operands need cols %% 8 == 0%s, got [%zu, %zu]", WHAT,
                            col ? " and rows % 16 == 0 (columnwise)" : "", M, K);
        return NULL;
    case TX_QKIND_MXFP8:
        if (M % 32 || K % 32)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "%s: MXFP8 operands need both dims to be multiples of 32, got [%zu, %zu]",
                            WHAT, M, K);
        return NULL;
    case TX_QKIND_NVFP4:
        /* the planner's rule (M, N, K multiples of 16), which the GPU
         * quantizer keeps: cols % 16, rows % 16 where a columnwise or 2-D
         * copy is made (quant_nvfp4.cu) */
        if (K % 16 || ((col || c->block_2d) && M % 16))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "%s: NVFP4 operands need cols%s to be multiples of 16 on the GPU, got "
                            "[%zu, %zu]", WHAT, col || c->block_2d ? " and rows" : "", M, K);
        return NULL;
    }
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: unknown quantization kind %d", WHAT,
                    (int)c->kind);
}

teexec_status *tx_cuda_lin_operand_init(tx_cuda_lin_operand *o, const tx_cuda_operand_q *q,
                                        size_t rows, size_t cols, unsigned usage, int sm)
{
    if (!o || !q) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL operand or quantizer", WHAT);
    memset(o, 0, sizeof *o);
    o->q = *q;
    o->rows = rows;
    o->cols = cols;
    o->usage = usage & (TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    o->row_data = o->row_scales = o->col_data = o->col_scales = o->scalars = SIZE_MAX;
    if (!q->on) return NULL;
    const tx_quant_config *c = &q->cfg;
    if (!o->usage)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: a quantized operand needs a usage", WHAT);
    if (rows == 0 || cols == 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: empty operand [%zu, %zu]", WHAT, rows, cols);
    if (c->kind != TX_QKIND_NVFP4 && !is_fp8_fmt(c->fmt))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: FP8 format %s is not E4M3 or E5M2", WHAT,
                        teexec_dtype_name(c->fmt));
    if (c->kind == TX_QKIND_NVFP4 && c->fmt != 0 && c->fmt != TEEXEC_DTYPE_FLOAT4E2M1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NVFP4 data is E2M1, not %s", WHAT,
                        teexec_dtype_name(c->fmt));
    const bool row = o->usage & TX_QUSAGE_ROWWISE, col = o->usage & TX_QUSAGE_COLUMNWISE;
    TX_TRY(shape_rule(o, c, col));
    if (c->kind == TX_QKIND_FP8_TENSOR && !q->delayed_scale && c->use_given_scale)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: fp8-delayed on the GPU reads its scale from q.delayed_scale", WHAT);
    o->swizzled = q->native && sm >= 100 &&
                  (c->kind == TX_QKIND_MXFP8 || c->kind == TX_QKIND_NVFP4);
    size_t data, pos = 0;
    if (!tx_mul_size(rows, cols, &data))
        return tx_error(TEEXEC_ERR_LIMIT, "%s: [%zu, %zu] overflows", WHAT, rows, cols);
    if (c->kind == TX_QKIND_NVFP4) data /= 2;
    size_t sr, sc, se;
    int ok = 1;
    if (row) {
        ok = ok && place(&pos, data, &o->row_data);
        scale_shape(c, rows, cols, false, &sr, &sc, &se);
        if (sr) {
            o->row_scale_cols = sc;
            ok = ok && place(&pos, scale_bytes(o, false), &o->row_scales);
        }
    }
    if (col) {
        ok = ok && place(&pos, data, &o->col_data);
        scale_shape(c, rows, cols, true, &sr, &sc, &se);
        if (sr) {
            o->col_scale_cols = sc;
            ok = ok && place(&pos, scale_bytes(o, true), &o->col_scales);
        }
    }
    if (c->kind == TX_QKIND_FP8_TENSOR || c->kind == TX_QKIND_NVFP4)
        ok = ok && place(&pos, SCALARS_BYTES, &o->scalars);
    if (!ok || (c->kind != TX_QKIND_FP8_TENSOR && ((row && !scale_bytes(o, false)) ||
                                                   (col && !scale_bytes(o, true)))))
        return tx_error(TEEXEC_ERR_LIMIT, "%s: operand [%zu, %zu] is too large", WHAT, rows, cols);
    o->bytes = round_up(pos, ALIGN);
    return NULL;
}

/* ---- quantization -------------------------------------------------------- */

static void *at(void *mem, size_t off)
{
    return off == SIZE_MAX || !mem ? NULL : (unsigned char *)mem + off;
}
static const void *cat(const void *mem, size_t off)
{
    return off == SIZE_MAX || !mem ? NULL : (const unsigned char *)mem + off;
}

void tx_cuda_lin_block_dest(const tx_cuda_lin_operand *o, void *mem, tx_cuda_block_args *a)
{
    const bool row = o->usage & TX_QUSAGE_ROWWISE, col = o->usage & TX_QUSAGE_COLUMNWISE;
    memset(a, 0, sizeof *a);
    a->rows = o->rows;
    a->cols = o->cols;
    a->fmt = o->q.cfg.fmt;
    a->two_d = o->q.cfg.block_2d;
    a->amax_eps = o->q.cfg.amax_epsilon;
    a->pow2 = o->q.cfg.power_2_scale;
    if (row) {
        a->row_data = at(mem, o->row_data);
        a->row_scale_inv = at(mem, o->row_scales);
        a->row_ld = o->row_scale_cols;
        a->row_scale_count = scale_bytes(o, false) / 4;
    }
    if (col) {
        a->col_data = at(mem, o->col_data);
        a->col_scale_inv = at(mem, o->col_scales);
        a->col_ld = o->col_scale_cols;
        a->col_scale_count = scale_bytes(o, true) / 4;
    }
}

teexec_status *tx_cuda_lin_quantize(const tx_cuda_lin_operand *o, const void *src,
                                    teexec_dtype src_dtype, void *mem, uint64_t sr_offset,
                                    void *stream)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL operand", WHAT);
    if (!o->q.on) return NULL;
    if (!src || !mem) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL source or region", WHAT);
    if ((uintptr_t)mem % ALIGN)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the operand region must be 256-byte aligned",
                        WHAT);
    if (src_dtype != TEEXEC_DTYPE_FLOAT && src_dtype != TEEXEC_DTYPE_BFLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: the GPU quantizers read float or bfloat16 sources, not %s", WHAT,
                        teexec_dtype_name(src_dtype));
    const tx_quant_config *c = &o->q.cfg;
    const bool row = o->usage & TX_QUSAGE_ROWWISE, col = o->usage & TX_QUSAGE_COLUMNWISE;
    uint8_t *rd = row ? at(mem, o->row_data) : NULL, *cd = col ? at(mem, o->col_data) : NULL;
    uint8_t *rs = row ? at(mem, o->row_scales) : NULL, *cs = col ? at(mem, o->col_scales) : NULL;
    float *sc = at(mem, o->scalars);
    switch (c->kind) {
    case TX_QKIND_FP8_TENSOR: {
        tx_cuda_fp8_args a = {.x = src, .x_dtype = src_dtype, .rows = o->rows, .cols = o->cols,
                              .fmt = c->fmt, .scale_inv = sc + SC_SCALE_INV, .row_data = rd,
                              .col_data = cd};
        if (o->q.delayed_scale) {
            a.scale = o->q.delayed_scale;
            a.amax = o->q.delayed_amax;
            return tx_status_prefix(tx_cuda_fp8_quantize_delayed(&a, stream), WHAT);
        }
        a.scale = sc + SC_SCALE;
        a.amax = sc + SC_AMAX;
        return tx_status_prefix(
            tx_cuda_fp8_quantize_current(&a, c->amax_epsilon, c->power_2_scale, stream), WHAT);
    }
    case TX_QKIND_FP8_BLOCK: {
        tx_cuda_block_args a;
        tx_cuda_lin_block_dest(o, mem, &a);
        a.x = src;
        a.x_dtype = src_dtype;
        return tx_status_prefix(tx_cuda_block_quantize(&a, stream), WHAT);
    }
    case TX_QKIND_MXFP8: {
        tx_cuda_mxfp8_args a = {.x = src, .x_dtype = src_dtype, .rows = o->rows, .cols = o->cols,
                                .fmt = c->fmt, .two_d = c->block_2d, .swizzled = o->swizzled,
                                .row_data = rd, .row_scales = rs,
                                .row_scale_ld = o->row_scale_cols,
                                .row_scale_bytes = row ? scale_bytes(o, false) : 0,
                                .col_data = cd, .col_scales = cs,
                                .col_scale_ld = o->col_scale_cols,
                                .col_scale_bytes = col ? scale_bytes(o, true) : 0};
        return tx_status_prefix(tx_cuda_mxfp8_quantize(&a, stream), WHAT);
    }
    case TX_QKIND_NVFP4: {
        tx_cuda_nvfp4_args a = {.x = src, .x_dtype = src_dtype, .rows = o->rows, .cols = o->cols,
                                .two_d = c->block_2d, .rht = c->rht,
                                .stochastic = c->stochastic_rounding, .seed = c->seed,
                                .sr_offset = sr_offset, .swizzled = o->swizzled,
                                .use_given_amax = c->use_given_amax,
                                .given_amax_row = c->given_amax_row,
                                .given_amax_col = c->given_amax_col, .row_data = rd,
                                .row_scales = rs, .row_scale_ld = o->row_scale_cols,
                                .row_scale_bytes = row ? scale_bytes(o, false) : 0,
                                .col_data = cd, .col_scales = cs,
                                .col_scale_ld = o->col_scale_cols,
                                .col_scale_bytes = col ? scale_bytes(o, true) : 0,
                                .amax = sc + SC_AMAX};
        return tx_status_prefix(tx_cuda_nvfp4_quantize(&a, stream), WHAT);
    }
    }
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: unknown quantization kind %d", WHAT,
                    (int)c->kind);
}

/* ---- quantized hand-off ---------------------------------------------------- */

teexec_status *tx_cuda_lin_handoff_check(const tx_cuda_operand_q *q)
{
    if (!q || !q->on)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "the consumer's operand is not quantized");
    switch (q->cfg.kind) {
    case TX_QKIND_FP8_TENSOR:
        if (!is_fp8_fmt(q->cfg.fmt))
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "FP8 format %s is not E4M3 or E5M2",
                            teexec_dtype_name(q->cfg.fmt));
        return NULL;
    case TX_QKIND_FP8_BLOCK:
        /* te_cuda_handoff_block.c writes these (tx_cuda_lin_block_dest) */
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "fp8-block operands are handed off through te_cuda_handoff_block.c, not "
                        "the per-tensor amax / cast steps");
    default:
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s operands are emulated on this GPU; the planner hands off only to a "
                        "native GEMM, and the Linear quantizes them itself",
                        q->cfg.kind == TX_QKIND_MXFP8 ? "MXFP8" : "NVFP4");
    }
}

teexec_status *tx_cuda_lin_handoff_begin(const tx_cuda_lin_operand *o, void *mem,
                                         tx_cuda_lin_handoff *t, void *stream)
{
    memset(t, 0, sizeof *t);
    if (!o || !mem) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: hand-off without a region", WHAT);
    TX_TRY(tx_cuda_lin_handoff_check(&o->q));
    float *sc = at(mem, o->scalars);
    t->fmt = o->q.cfg.fmt;
    if (o->q.delayed_scale) {
        t->amax = o->q.delayed_amax ? o->q.delayed_amax : sc + SC_AMAX;
        if (o->usage & TX_QUSAGE_ROWWISE) {
            t->scale = o->q.delayed_scale;
            t->row_data = at(mem, o->row_data);
        }
        return NULL;
    }
    t->amax = sc + SC_AMAX;
    cudaError_t e = cudaMemsetAsync(t->amax, 0, sizeof(float), (cudaStream_t)stream);
    return e == cudaSuccess ? NULL
                            : tx_error(TEEXEC_ERR_DEVICE, "%s: clearing the hand-off amax: %s", WHAT,
                                       cudaGetErrorString(e));
}

teexec_status *tx_cuda_lin_handoff_finish(const tx_cuda_lin_operand *o, const void *src,
                                          teexec_dtype src_dtype, void *mem, void *stream)
{
    if (!o || !mem || !src)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: hand-off without a region", WHAT);
    TX_TRY(tx_cuda_lin_handoff_check(&o->q));
    const bool row = o->usage & TX_QUSAGE_ROWWISE, col = o->usage & TX_QUSAGE_COLUMNWISE;
    float *sc = at(mem, o->scalars);
    tx_cuda_fp8_args a = {.x = src, .x_dtype = src_dtype, .rows = o->rows, .cols = o->cols,
                          .fmt = o->q.cfg.fmt, .scale_inv = sc + SC_SCALE_INV,
                          .col_data = col ? at(mem, o->col_data) : NULL};
    if (o->q.delayed_scale) {
        /* rowwise bytes and amax came from the producer's pass */
        a.scale = o->q.delayed_scale;
        return tx_status_prefix(tx_cuda_fp8_quantize_delayed(&a, stream), WHAT);
    }
    a.row_data = row ? at(mem, o->row_data) : NULL;
    a.scale = sc + SC_SCALE;
    a.amax = sc + SC_AMAX;
    return tx_status_prefix(
        tx_cuda_fp8_quantize_from_amax(&a, o->q.cfg.amax_epsilon, o->q.cfg.power_2_scale, stream),
        WHAT);
}

/* ---- GEMM planning ---------------------------------------------------------- */

static bool quantized(const tx_cuda_lin_ref *r) { return r->op && r->op->q.on; }

/* Which usage of each operand a GEMM reads: a is x or dy, b is w or x. */
static unsigned usage_a(tx_lin_gemm kind)
{
    return kind == TX_LIN_WGRAD ? TX_QUSAGE_COLUMNWISE : TX_QUSAGE_ROWWISE;
}
static unsigned usage_b(tx_lin_gemm kind)
{
    return kind == TX_LIN_FPROP ? TX_QUSAGE_ROWWISE : TX_QUSAGE_COLUMNWISE;
}

/* cuBLAS dims (m, n, k) and the source shapes of a and b. */
typedef struct dims {
    int64_t m, n, k;
    size_t a_rows, a_cols, b_rows, b_cols;
} dims;

static dims dims_of(tx_lin_gemm kind, size_t T, size_t N, size_t K)
{
    dims d;
    switch (kind) {
    case TX_LIN_FPROP:
        d = (dims){(int64_t)N, (int64_t)T, (int64_t)K, T, K, N, K};
        break;
    case TX_LIN_DGRAD:
        d = (dims){(int64_t)K, (int64_t)T, (int64_t)N, T, N, N, K};
        break;
    default:
        d = (dims){(int64_t)K, (int64_t)N, (int64_t)T, T, N, T, K};
        break;
    }
    return d;
}

/* T, N, K from the operands (both must have op set). */
static void tnk_of(tx_lin_gemm kind, const tx_cuda_lin_operand *a, const tx_cuda_lin_operand *b,
                   size_t *T, size_t *N, size_t *K)
{
    *T = a->rows;
    if (kind == TX_LIN_FPROP) {
        *K = a->cols;
        *N = b->rows;
    } else {
        *N = a->cols;
        *K = b->cols;
    }
}

static void source_layout(tx_lin_gemm kind, tx_gemm_desc *g)
{
    g->transa = kind == TX_LIN_FPROP;
    g->transb = kind == TX_LIN_WGRAD;
}

static void deq_args(const tx_cuda_lin_operand *o, const void *mem, unsigned usage,
                     tx_cuda_dequant_args *d)
{
    const bool col = usage == TX_QUSAGE_COLUMNWISE;
    const float *sc = cat(mem, o->scalars);
    memset(d, 0, sizeof *d);
    d->kind = (tx_cuda_qkind)o->q.cfg.kind;
    d->fmt = fmt_of(o);
    d->columnwise = col;
    d->block_2d = o->q.cfg.block_2d;
    d->swizzled = o->swizzled;
    d->rows = o->rows;
    d->cols = o->cols;
    d->data = cat(mem, col ? o->col_data : o->row_data);
    d->scales = cat(mem, col ? o->col_scales : o->row_scales);
    d->scale_cols = col ? o->col_scale_cols : o->row_scale_cols;
    if (!sc) return; /* sizing only */
    if (o->q.cfg.kind == TX_QKIND_FP8_TENSOR) d->scale_inv = sc + SC_SCALE_INV;
    if (o->q.cfg.kind == TX_QKIND_NVFP4) d->amax = sc + SC_AMAX + (col ? 1 : 0);
}

/* Dequantized values fit bf16 exactly (gemm_emulate.h's rule). */
static bool bf16_exact(const tx_cuda_lin_operand *o)
{
    const tx_qkind k = o->q.cfg.kind;
    return k == TX_QKIND_MXFP8 || k == TX_QKIND_NVFP4 ||
           (k == TX_QKIND_FP8_BLOCK && o->q.cfg.power_2_scale);
}

/* How a GEMM of two quantized operands runs. (One quantized operand:
 * mixed(); none: hp_gemm().) */
typedef enum path {
    PATH_TN,      /* native over the TN copies (FP8 per-tensor / block, NVFP4) */
    PATH_MX,      /* native MXFP8, source layout */
    PATH_EMULATE  /* exact emulation */
} path;

/* The native path the operands ask for, or PATH_EMULATE. */
static path native_path(tx_lin_gemm kind, const tx_cuda_lin_operand *a,
                        const tx_cuda_lin_operand *b)
{
    const tx_qkind ka = a->q.cfg.kind, kb = b->q.cfg.kind;
    if (ka != kb) return PATH_EMULATE;
    switch (ka) {
    case TX_QKIND_FP8_TENSOR: {
        size_t T, N, K;
        tnk_of(kind, a, b, &T, &N, &K);
        const dims d = dims_of(kind, T, N, K);
        /* TN: m, k (= lda = ldb) multiples of 16 */
        return d.m % 16 || d.k % 16 ? PATH_EMULATE : PATH_TN;
    }
    case TX_QKIND_FP8_BLOCK: return PATH_TN; /* the emulation stands by */
    case TX_QKIND_MXFP8: return a->swizzled && b->swizzled ? PATH_MX : PATH_EMULATE;
    case TX_QKIND_NVFP4: return a->swizzled && b->swizzled ? PATH_TN : PATH_EMULATE;
    }
    return PATH_EMULATE;
}

/* Scratch of the emulation: the helper's part, then an FP32 result when the
 * operand dtype cannot write the output dtype (see emulate()). */
static int emu_scratch(tx_lin_gemm kind, const tx_cuda_lin_ref *a, const tx_cuda_lin_ref *b,
                       teexec_dtype operand_type, size_t *helper, size_t *total)
{
    tx_cuda_dequant_args qa, qb; /* cuBLAS A = b, B = a */
    deq_args(b->op, b->mem, usage_b(kind), &qa);
    deq_args(a->op, a->mem, usage_a(kind), &qb);
    *helper = tx_gemm_emu_scratch_bytes(&qa, &qb, operand_type);
    size_t T, N, K, temp, off;
    tnk_of(kind, a->op, b->op, &T, &N, &K);
    const dims d = dims_of(kind, T, N, K);
    if (!*helper || !mul3((size_t)d.m, (size_t)d.n, 4, &temp)) return 0;
    size_t pos = *helper;
    if (!place(&pos, temp, &off)) return 0;
    *total = round_up(pos, ALIGN);
    return 1;
}

static int mixed_scratch(const tx_cuda_lin_operand *q, teexec_dtype other, size_t *staging,
                         size_t *total)
{
    const size_t esz = other == TEEXEC_DTYPE_FLOAT ? 4 : 2;
    size_t n, conv, pos = 0, off;
    if (!tx_mul_size(q->rows, q->cols, &n)) return 0;
    *staging = 0;
    if (esz != 4 && !tx_mul_size(n, 4, staging)) return 0;
    if (!tx_mul_size(n, esz, &conv)) return 0;
    if (!place(&pos, *staging, &off) || !place(&pos, conv, &off)) return 0;
    *total = round_up(pos, ALIGN);
    return 1;
}

size_t tx_cuda_lin_gemm_scratch(tx_lin_gemm kind, const tx_cuda_lin_ref *a,
                                const tx_cuda_lin_ref *b)
{
    if (!a || !b) return 0;
    const bool qa = quantized(a), qb = quantized(b);
    size_t helper = 0, total = 0;
    if (!qa && !qb) return 0;
    if (qa != qb) {
        const tx_cuda_lin_ref *q = qa ? a : b, *h = qa ? b : a;
        return mixed_scratch(q->op, h->hp_dtype, &helper, &total) ? total : 0;
    }
    const path p = native_path(kind, a->op, b->op);
    if (p == PATH_TN && a->op->q.cfg.kind == TX_QKIND_NVFP4) return ALIGN; /* device alpha */
    if (p == PATH_MX || (p == PATH_TN && a->op->q.cfg.kind == TX_QKIND_FP8_TENSOR)) return 0;
    /* The run picks BFLOAT16 or FLOAT operands (bf16_exact): the larger of
     * the two sizes, each with the FP32 output temporary. */
    size_t total16 = 0;
    if (!emu_scratch(kind, a, b, TEEXEC_DTYPE_FLOAT, &helper, &total)) return 0;
    if (!emu_scratch(kind, a, b, TEEXEC_DTYPE_BFLOAT16, &helper, &total16)) return 0;
    return total > total16 ? total : total16;
}

/* ---- epilogue ---------------------------------------------------------------- */

#define UNSUP(...) tx_error(TEEXEC_ERR_UNSUPPORTED, WHAT ": " __VA_ARGS__)

static const char *kind_name(tx_lin_gemm k)
{
    return k == TX_LIN_FPROP ? "fprop" : k == TX_LIN_DGRAD ? "dgrad" : "wgrad";
}

/* Fills alpha, beta, C and the cuBLASLt epilogue; `fp32_temp`: the GEMM
 * writes an FP32 temporary that is converted afterwards, where only alpha
 * and the residual (added on conversion) are available. */
static teexec_status *set_epilogue(tx_lin_gemm kind, const tx_cuda_lin_epi *e,
                                   teexec_dtype out_dtype, bool fp32_temp, tx_gemm_desc *g,
                                   const void **C)
{
    g->alpha = e && e->alpha != 0.0f ? e->alpha : 1.0f;
    g->beta = 0.0f;
    *C = NULL;
    if (!e) return NULL;
    const bool bias = e->bias || e->gelu_pre, dgelu = e->dgelu_pre || e->dbias;
    if (bias && kind != TX_LIN_FPROP)
        return UNSUP("a bias / GELU epilogue applies to fprop only, not %s", kind_name(kind));
    if (dgelu && kind != TX_LIN_DGRAD)
        return UNSUP("the dGELU + dbias epilogue applies to dgrad only, not %s", kind_name(kind));
    if (e->gelu_pre && !e->bias) return UNSUP("cuBLASLt has GELU with an aux output only with a bias");
    if (dgelu && !(e->dgelu_pre && e->dbias))
        return UNSUP("cuBLASLt has dGELU only together with the bias gradient");
    if (e->residual && (e->gelu_pre || dgelu))
        return UNSUP("a residual cannot follow a GELU / dGELU epilogue in one GEMM");
    if ((bias || dgelu) && fp32_temp)
        return UNSUP("the emulated GEMM runs in FP32 here (output %s), where bias and GELU "
                     "epilogues are not fused", teexec_dtype_name(out_dtype));
    if (e->gelu_pre || dgelu) {
        if (g->m % 8)
            return UNSUP("the GELU aux tensor needs %lld columns to be a multiple of 8",
                         (long long)g->m);
        g->aux = e->gelu_pre ? e->gelu_pre : e->dgelu_pre;
        g->aux_ld = g->m;
    }
    if (e->bias) {
        g->epilogue = e->gelu_pre ? TX_GEMM_EPI_GELU_AUX_BIAS : TX_GEMM_EPI_BIAS;
        g->bias = (void *)e->bias; /* read only: cuBLASLt takes one pointer for both uses */
        g->bias_type = e->bias_dtype;
    } else if (dgelu) {
        g->epilogue = TX_GEMM_EPI_DGELU_BGRAD;
        g->bias = e->dbias;
        g->bias_type = e->bias_dtype;
    }
    if (e->residual && !fp32_temp) {
        g->beta = 1.0f;
        g->c_type = out_dtype;
        *C = e->residual;
    }
    return NULL;
}

/* ---- the paths ----------------------------------------------------------------- */

static teexec_status *run_lt(const tx_cuda_env *env, const tx_gemm_desc *g, const void *A,
                             const void *B, const void *C, void *D)
{
    return tx_gemm_lt_run(env->gemm, g, A, B, C, D, env->gemm_ws, env->stream);
}

static teexec_status *hp_gemm(tx_lin_gemm kind, const void *A, const void *B, teexec_dtype t,
                              const dims *d, void *out, teexec_dtype out_dtype,
                              const tx_cuda_lin_epi *epi, const tx_cuda_env *env)
{
    tx_gemm_desc g;
    memset(&g, 0, sizeof g);
    g.m = d->m;
    g.n = d->n;
    g.k = d->k;
    source_layout(kind, &g);
    g.a_type = g.b_type = t;
    g.d_type = out_dtype;
    g.allow_tf32 = t == TEEXEC_DTYPE_FLOAT && env->allow_tf32;
    const void *C;
    TX_TRY(set_epilogue(kind, epi, out_dtype, false, &g, &C));
    return run_lt(env, &g, A, B, C, out);
}

static size_t dtype_size(teexec_dtype t)
{
    return t == TEEXEC_DTYPE_FLOAT ? 4 : t == TEEXEC_DTYPE_BFLOAT16 || t == TEEXEC_DTYPE_FLOAT16 ? 2 : 0;
}

static teexec_status *mixed(tx_lin_gemm kind, const tx_cuda_lin_ref *a, const tx_cuda_lin_ref *b,
                            const dims *d, void *out, teexec_dtype out_dtype,
                            const tx_cuda_lin_epi *epi, void *scratch, size_t scratch_bytes,
                            const tx_cuda_env *env)
{
    const bool qa = quantized(a);
    const tx_cuda_lin_ref *q = qa ? a : b, *h = qa ? b : a;
    const teexec_dtype t = h->hp_dtype;
    if (!dtype_size(t))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: operand dtype %s is not float, bf16 or fp16",
                        WHAT, teexec_dtype_name(t));
    if (!h->hp) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL high-precision operand", WHAT);
    size_t staging, total;
    if (!mixed_scratch(q->op, t, &staging, &total))
        return tx_error(TEEXEC_ERR_LIMIT, "%s: operand too large", WHAT);
    if (!scratch || scratch_bytes < total || (uintptr_t)scratch % ALIGN)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: scratch of %zu bytes (256-byte aligned) needed, %zu given", WHAT, total,
                        scratch_bytes);
    unsigned char *base = scratch;
    void *conv = base + round_up(staging, ALIGN);
    tx_cuda_dequant_args da;
    deq_args(q->op, q->mem, qa ? usage_a(kind) : usage_b(kind), &da);
    if (t == TEEXEC_DTYPE_FLOAT16) {
        /* FP32 staging, then the conversion (the direct kernel writes FP32 / BF16) */
        da.out = (float *)base;
        TX_TRY(tx_status_prefix(tx_cuda_dequantize(&da, env->stream), WHAT));
        TX_TRY(tx_status_prefix(tx_cuda_convert(base, TEEXEC_DTYPE_FLOAT, conv, t,
                                                q->op->rows * q->op->cols, env->stream),
                                WHAT));
    } else {
        TX_TRY(tx_status_prefix(tx_cuda_dequantize_to(&da, 0, t, conv, env->stream), WHAT));
    }
    const void *A = qa ? h->hp : conv, *B = qa ? conv : h->hp;
    return hp_gemm(kind, A, B, t, d, out, out_dtype, epi, env);
}

static teexec_status *emulate(tx_lin_gemm kind, const tx_cuda_lin_ref *a, const tx_cuda_lin_ref *b,
                              const dims *d, void *out, teexec_dtype out_dtype,
                              const tx_cuda_lin_epi *epi, void *scratch, size_t scratch_bytes,
                              const tx_cuda_env *env)
{
    const bool exact16 = bf16_exact(a->op) && bf16_exact(b->op);
    const teexec_dtype op_type = exact16 ? TEEXEC_DTYPE_BFLOAT16 : TEEXEC_DTYPE_FLOAT;
    /* cuBLASLt: FP32 GEMMs write FP32, BF16 GEMMs BF16 or FP32 */
    const bool temp = out_dtype != TEEXEC_DTYPE_FLOAT &&
                      !(op_type == TEEXEC_DTYPE_BFLOAT16 && out_dtype == TEEXEC_DTYPE_BFLOAT16);
    size_t helper, total;
    if (!emu_scratch(kind, a, b, op_type, &helper, &total))
        return tx_error(TEEXEC_ERR_LIMIT, "%s: operands too large", WHAT);
    if (!temp) total = helper;
    if (!scratch || scratch_bytes < total || (uintptr_t)scratch % ALIGN)
        return UNSUP("the emulated %s GEMM needs %zu bytes of scratch (256-byte aligned), %zu given",
                     kind_name(kind), total, scratch_bytes);
    tx_gemm_desc g;
    memset(&g, 0, sizeof g);
    g.m = d->m;
    g.n = d->n;
    g.k = d->k;
    source_layout(kind, &g);
    g.d_type = temp ? TEEXEC_DTYPE_FLOAT : out_dtype;
    const void *C;
    TX_TRY(set_epilogue(kind, epi, out_dtype, temp, &g, &C));
    tx_cuda_dequant_args qa, qb; /* cuBLAS A = b, B = a */
    deq_args(b->op, b->mem, usage_b(kind), &qa);
    deq_args(a->op, a->mem, usage_a(kind), &qb);
    void *D = temp ? (unsigned char *)scratch + round_up(helper, ALIGN) : out;
    TX_TRY(tx_status_prefix(tx_gemm_emulate(env->gemm, &g, &qa, &qb, op_type, scratch, helper, C, D,
                                            env->gemm_ws, env->stream),
                            WHAT));
    if (!temp) return NULL;
    const size_t n = (size_t)d->m * (size_t)d->n;
    if (epi && epi->residual)
        return tx_status_prefix(tx_cuda_add(D, TEEXEC_DTYPE_FLOAT, epi->residual, out_dtype, out,
                                            out_dtype, n, env->stream),
                                WHAT);
    return tx_status_prefix(tx_cuda_convert(D, TEEXEC_DTYPE_FLOAT, out, out_dtype, n, env->stream),
                            WHAT);
}

static tx_gemm_scale_mode scale_mode(const tx_cuda_lin_operand *o)
{
    switch (o->q.cfg.kind) {
    case TX_QKIND_FP8_TENSOR: return TX_GEMM_SCALE_TENSOR;
    case TX_QKIND_FP8_BLOCK: return o->q.cfg.block_2d ? TX_GEMM_SCALE_BLOCK_2D : TX_GEMM_SCALE_BLOCK_1D;
    case TX_QKIND_MXFP8: return TX_GEMM_SCALE_MXFP8;
    case TX_QKIND_NVFP4: return TX_GEMM_SCALE_NVFP4;
    }
    return TX_GEMM_SCALE_NONE;
}

/* The native GEMM's description and operand pointers. */
static void native_desc(tx_lin_gemm kind, path p, const tx_cuda_lin_ref *a,
                        const tx_cuda_lin_ref *b, const dims *d, teexec_dtype out_dtype,
                        tx_gemm_desc *g, const void **A, const void **B)
{
    memset(g, 0, sizeof *g);
    g->m = d->m;
    g->n = d->n;
    g->k = d->k;
    if (p == PATH_TN) {
        g->transa = 1;
        g->transb = 0;
    } else {
        source_layout(kind, g);
    }
    const unsigned ua = usage_b(kind), ub = usage_a(kind); /* cuBLAS A = b, B = a */
    const tx_cuda_lin_operand *oa = b->op, *ob = a->op;
    g->a_type = fmt_of(oa);
    g->b_type = fmt_of(ob);
    g->d_type = out_dtype;
    g->a_scale_mode = scale_mode(oa);
    g->b_scale_mode = scale_mode(ob);
    if (oa->q.cfg.kind == TX_QKIND_FP8_TENSOR) {
        g->a_scale_inv = (const float *)cat(b->mem, oa->scalars) + SC_SCALE_INV;
        g->b_scale_inv = (const float *)cat(a->mem, ob->scalars) + SC_SCALE_INV;
        /* TE: fast accumulation in fprop, split accumulation for the grads */
        g->fast_accum = kind == TX_LIN_FPROP;
    } else {
        g->a_scale_inv = cat(b->mem, ua == TX_QUSAGE_COLUMNWISE ? oa->col_scales : oa->row_scales);
        g->b_scale_inv = cat(a->mem, ub == TX_QUSAGE_COLUMNWISE ? ob->col_scales : ob->row_scales);
    }
    *A = cat(b->mem, ua == TX_QUSAGE_COLUMNWISE ? oa->col_data : oa->row_data);
    *B = cat(a->mem, ub == TX_QUSAGE_COLUMNWISE ? ob->col_data : ob->row_data);
}

static teexec_status *native(tx_lin_gemm kind, path p, const tx_cuda_lin_ref *a,
                             const tx_cuda_lin_ref *b, const dims *d, void *out,
                             teexec_dtype out_dtype, const tx_cuda_lin_epi *epi, void *scratch,
                             size_t scratch_bytes, const tx_cuda_env *env, bool *refused)
{
    *refused = false;
    tx_gemm_desc g;
    const void *A, *B, *C;
    native_desc(kind, p, a, b, d, out_dtype, &g, &A, &B);
    TX_TRY(set_epilogue(kind, epi, out_dtype, false, &g, &C));
    const bool nv = a->op->q.cfg.kind == TX_QKIND_NVFP4;
    if (nv) {
        if (!scratch || scratch_bytes < ALIGN || (uintptr_t)scratch % ALIGN)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: native NVFP4 needs 256 bytes of scratch for its alpha", WHAT);
        g.alpha_dev = scratch;
    }
    teexec_status *st = tx_gemm_lt_check(env->gemm, &g);
    if (st) {
        *refused = teexec_status_code(st) == TEEXEC_ERR_UNSUPPORTED;
        return tx_status_prefix(st, WHAT);
    }
    if (nv) {
        const float *amax_a = (const float *)cat(b->mem, b->op->scalars) + SC_AMAX +
                              (usage_b(kind) == TX_QUSAGE_COLUMNWISE);
        const float *amax_b = (const float *)cat(a->mem, a->op->scalars) + SC_AMAX +
                              (usage_a(kind) == TX_QUSAGE_COLUMNWISE);
        TX_TRY(tx_status_prefix(
            tx_cuda_nvfp4_gemm_alpha(amax_a, amax_b, g.alpha, scratch, NULL, env->stream), WHAT));
        g.alpha = 1.0f;
    }
    st = run_lt(env, &g, A, B, C, out);
    /* no algorithm for this combination: nothing was launched */
    if (st) *refused = teexec_status_code(st) == TEEXEC_ERR_UNSUPPORTED;
    return tx_status_prefix(st, WHAT);
}

/* ---- entry point ------------------------------------------------------------ */

static teexec_status *check_ref(const char *name, const tx_cuda_lin_ref *r, unsigned usage,
                                size_t rows, size_t cols)
{
    if (!r) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL operand %s", WHAT, name);
    if (r->op && (r->op->rows != rows || r->op->cols != cols))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: operand %s is [%zu, %zu], the GEMM needs [%zu, %zu]", WHAT, name,
                        r->op->rows, r->op->cols, rows, cols);
    if (quantized(r)) {
        if (!r->mem) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: operand %s has no region", WHAT, name);
        if (!(r->op->usage & usage))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: operand %s was not quantized %s", WHAT,
                            name, usage == TX_QUSAGE_ROWWISE ? "rowwise" : "columnwise");
    } else if (!r->hp) {
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: operand %s has no data", WHAT, name);
    }
    return NULL;
}

teexec_status *tx_cuda_lin_gemm(tx_lin_gemm kind, const tx_cuda_lin_ref *a,
                                const tx_cuda_lin_ref *b, size_t T, size_t N, size_t K,
                                void *out, teexec_dtype out_dtype, const tx_cuda_lin_epi *epi,
                                void *scratch, size_t scratch_bytes, const tx_cuda_env *env)
{
    if (!env || !env->gemm || !out)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: NULL environment, handle or output", WHAT);
    if (kind != TX_LIN_FPROP && kind != TX_LIN_DGRAD && kind != TX_LIN_WGRAD)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: unknown GEMM kind %d", WHAT, (int)kind);
    if (!dtype_size(out_dtype))
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: output dtype %s is not float, bf16 or fp16", WHAT,
                        teexec_dtype_name(out_dtype));
    if (T == 0 || N == 0 || K == 0 || T > INT64_MAX || N > INT64_MAX || K > INT64_MAX)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: bad shape T=%zu N=%zu K=%zu", WHAT, T, N, K);
    const dims d = dims_of(kind, T, N, K);
    TX_TRY(check_ref("a", a, usage_a(kind), d.a_rows, d.a_cols));
    TX_TRY(check_ref("b", b, usage_b(kind), d.b_rows, d.b_cols));
    const bool qa = quantized(a), qb = quantized(b);
    if (!qa && !qb) {
        if (a->hp_dtype != b->hp_dtype)
            return UNSUP("%s operands in %s and %s: one dtype needed", kind_name(kind),
                         teexec_dtype_name(a->hp_dtype), teexec_dtype_name(b->hp_dtype));
        if (!dtype_size(a->hp_dtype))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: operand dtype %s is not float, bf16 or "
                            "fp16", WHAT, teexec_dtype_name(a->hp_dtype));
        return hp_gemm(kind, b->hp, a->hp, a->hp_dtype, &d, out, out_dtype, epi, env);
    }
    if (qa != qb) return mixed(kind, a, b, &d, out, out_dtype, epi, scratch, scratch_bytes, env);
    const path p = native_path(kind, a->op, b->op);
    if (p == PATH_TN || p == PATH_MX) {
        bool refused;
        teexec_status *st = native(kind, p, a, b, &d, out, out_dtype, epi, scratch, scratch_bytes,
                                   env, &refused);
        /* FP8 block: cuBLASLt refuses some (2-D x 2-D, epilogues, off sm_90);
         * NVFP4: its FP4 GEMM wants k % 32, the format k % 16. The exact
         * emulation runs those. */
        if (!st || !refused ||
            (a->op->q.cfg.kind != TX_QKIND_FP8_BLOCK && a->op->q.cfg.kind != TX_QKIND_NVFP4))
            return st;
        teexec_status_destroy(st);
    }
    return emulate(kind, a, b, &d, out, out_dtype, epi, scratch, scratch_bytes, env);
}
