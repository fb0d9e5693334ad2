/* qtensor.c - quantized tensor storage, the quantize/dequantize dispatch,
 * and the numerics every recipe shares (amax, scale from amax). */
#include "kernels/cpu/qtensor.h"

#include "base/checked.h"
#include "base/half.h"
#include "base/numfmt.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/scale_swizzle.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }
static uint64_t round_up(uint64_t a, uint64_t m) { return ceil_div(a, m) * m; }

float tx_amax_f32(const float *x, uint64_t n)
{
    float m = 0.0f;
    for (uint64_t i = 0; i < n; i++) m = tx_amax_step(m, x[i]);
    return m;
}

float tx_scale_from_amax(float amax, float fmt_max, bool power_2, float epsilon,
                         float value_for_inf)
{
    if (amax < epsilon) amax = epsilon;
    if (amax == 0.0f || isinf(amax) || isnan(amax)) return 1.0f;
    float scale = fmt_max / amax;
    if (isinf(scale)) scale = value_for_inf;
    if (power_2) scale = tx_bits_f32(tx_f32_bits(scale) & 0xff800000u);
    return scale;
}

static teexec_status *alloc_bytes(void **p, size_t *nbytes, uint64_t rows, uint64_t cols,
                                  uint64_t elem)
{
    uint64_t n;
    if (!tx_mul_u64(rows, cols, &n) || !tx_mul_u64(n, elem, &n) || n > SIZE_MAX - 1)
        return tx_error(TEEXEC_ERR_LIMIT, "quantize: %llu x %llu buffer overflows",
                        (unsigned long long)rows, (unsigned long long)cols);
    *p = calloc((size_t)n + 1, 1); /* +1: never a zero-size allocation */
    if (!*p) return tx_oom();
    *nbytes = (size_t)n;
    return NULL;
}

static teexec_status *check_config(const tx_quant_config *cfg, uint64_t rows, uint64_t cols,
                                   teexec_dtype *fmt, unsigned *usage)
{
    *usage = cfg->usage ? cfg->usage : (TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    if (*usage & ~(unsigned)(TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "quantize: bad usage flags 0x%x", *usage);
    *fmt = cfg->fmt;
    bool row = *usage & TX_QUSAGE_ROWWISE, col = *usage & TX_QUSAGE_COLUMNWISE;
    switch (cfg->kind) {
    case TX_QKIND_FP8_TENSOR:
    case TX_QKIND_FP8_BLOCK:
    case TX_QKIND_MXFP8:
        if (*fmt == 0) *fmt = TEEXEC_DTYPE_FLOAT8E4M3FN;
        if (*fmt != TEEXEC_DTYPE_FLOAT8E4M3FN && *fmt != TEEXEC_DTYPE_FLOAT8E5M2)
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "quantize: FP8 recipes store E4M3 or E5M2, not %s",
                            teexec_dtype_name(*fmt));
        if (cfg->kind == TX_QKIND_MXFP8 && (rows % 32u != 0 || cols % 32u != 0))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "quantize: MXFP8 needs both dims of the 2-D view to be multiples of 32 "
                            "(got %llu x %llu)", (unsigned long long)rows, (unsigned long long)cols);
        break;
    case TX_QKIND_NVFP4:
        if (*fmt == 0) *fmt = TEEXEC_DTYPE_FLOAT4E2M1;
        if (*fmt != TEEXEC_DTYPE_FLOAT4E2M1)
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "quantize: NVFP4 stores FLOAT4E2M1, not %s",
                            teexec_dtype_name(*fmt));
        if ((row && cols % 2u) || (col && rows % 2u) || (cfg->block_2d && (rows % 16u || cols % 16u)))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "quantize: NVFP4 needs an even packed dim (16x16 blocks: both dims "
                            "multiples of 16), got %llu x %llu",
                            (unsigned long long)rows, (unsigned long long)cols);
        if (col && cfg->rht && rows % 16u)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "quantize: NVFP4 Hadamard transform needs rows %% 16 == 0, got %llu",
                            (unsigned long long)rows);
        break;
    default:
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "quantize: unknown recipe kind %d", (int)cfg->kind);
    }
    if (cfg->scale_layout == TX_SCALE_SWIZZLED && cfg->kind != TX_QKIND_MXFP8 &&
        cfg->kind != TX_QKIND_NVFP4)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "quantize: the swizzled scale layout exists for MXFP8 and NVFP4 only");
    return NULL;
}

/* Scale array shape and element size per kind and usage (see qtensor.h). */
static void scale_shape(const tx_qtensor *q, bool col, uint64_t *sr, uint64_t *sc, uint64_t *es)
{
    uint64_t M = q->rows, K = q->cols;
    *sr = *sc = 0;
    *es = 1;
    switch (q->kind) {
    case TX_QKIND_FP8_BLOCK:
        *es = 4;
        if (!q->block_2d) {
            *sr = col ? ceil_div(M, 128) : ceil_div(K, 128);
            *sc = col ? round_up(K, 4) : round_up(M, 4);
        } else {
            *sr = col ? ceil_div(K, 128) : ceil_div(M, 128);
            *sc = round_up(col ? ceil_div(M, 128) : ceil_div(K, 128), 4);
        }
        break;
    case TX_QKIND_MXFP8:
        *sr = col ? round_up(M / 32u, 4) : round_up(M, 128);
        *sc = col ? round_up(K, 128) : round_up(K / 32u, 4);
        break;
    case TX_QKIND_NVFP4:
        *sr = col ? round_up(K, 128) : round_up(M, 128);
        *sc = round_up(ceil_div(col ? M : K, 16), 4);
        break;
    default:
        break;
    }
}

static teexec_status *alloc_usage(tx_qtensor *q, bool col)
{
    tx_qdata *d = col ? &q->col : &q->row;
    bool transposed = col && q->kind != TX_QKIND_MXFP8;
    d->data_rows = transposed ? q->cols : q->rows;
    d->data_cols = transposed ? q->rows : q->cols;
    uint64_t data_bytes_cols = q->kind == TX_QKIND_NVFP4 ? d->data_cols / 2u : d->data_cols;
    void *p = NULL;
    TX_TRY(alloc_bytes(&p, &d->data_bytes, d->data_rows, data_bytes_cols, 1));
    d->data = p;
    uint64_t es;
    scale_shape(q, col, &d->scale_rows, &d->scale_cols, &es);
    if (d->scale_rows && d->scale_cols)
        TX_TRY(alloc_bytes(&d->scale, &d->scale_bytes, d->scale_rows, d->scale_cols, es));
    return NULL;
}

void tx_qtensor_drop_usage(tx_qtensor *q, unsigned usage)
{
    if (!q) return;
    if (usage & TX_QUSAGE_ROWWISE) {
        free(q->row.data);
        free(q->row.scale);
        memset(&q->row, 0, sizeof q->row);
    }
    if (usage & TX_QUSAGE_COLUMNWISE) {
        free(q->col.data);
        free(q->col.scale);
        memset(&q->col, 0, sizeof q->col);
    }
    q->usage &= ~usage;
}

void tx_qtensor_free(tx_qtensor *q)
{
    if (!q) return;
    tx_qtensor_drop_usage(q, TX_QUSAGE_ROWWISE | TX_QUSAGE_COLUMNWISE);
    memset(q, 0, sizeof *q);
}

teexec_status *tx_qtensor_alloc(tx_qtensor *q, uint64_t rows, uint64_t cols,
                                const tx_quant_config *cfg)
{
    memset(q, 0, sizeof *q);
    if (!cfg) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "quantize: no config");
    teexec_dtype fmt = TEEXEC_DTYPE_UNDEFINED;
    unsigned usage = 0;
    TX_TRY(check_config(cfg, rows, cols, &fmt, &usage));
    q->kind = cfg->kind;
    q->fmt = fmt;
    q->block_2d = cfg->block_2d && cfg->kind != TX_QKIND_FP8_TENSOR;
    q->rht = cfg->kind == TX_QKIND_NVFP4 && cfg->rht && (usage & TX_QUSAGE_COLUMNWISE);
    q->scale_layout = cfg->scale_layout;
    q->rows = rows;
    q->cols = cols;
    q->usage = usage;
    q->scale = q->scale_inv = 1.0f;
    teexec_status *st = NULL;
    if (usage & TX_QUSAGE_ROWWISE) st = alloc_usage(q, false);
    if (!st && (usage & TX_QUSAGE_COLUMNWISE)) st = alloc_usage(q, true);
    if (st) tx_qtensor_free(q);
    return st;
}

/* Swizzles (to_swizzled) or unswizzles one usage's scales in place. */
static teexec_status *reswizzle(tx_qtensor *q, bool col, bool to_swizzled)
{
    tx_qdata *d = col ? &q->col : &q->row;
    if (!d->scale) return NULL;
    uint8_t *tmp = malloc(d->scale_bytes + 1);
    if (!tmp) return tx_oom();
    bool transposed = col && q->kind == TX_QKIND_MXFP8;
    teexec_status *st = to_swizzled
        ? tx_scale_swizzle(d->scale, tmp, d->scale_rows, d->scale_cols, transposed)
        : tx_scale_unswizzle(d->scale, tmp, d->scale_rows, d->scale_cols, transposed);
    if (!st) memcpy(d->scale, tmp, d->scale_bytes);
    free(tmp);
    return st;
}

teexec_status *tx_quantize(const void *src, teexec_dtype src_type, uint64_t rows, uint64_t cols,
                           const tx_quant_config *cfg, tx_qtensor *q)
{
    memset(q, 0, sizeof *q);
    if (src_type != TEEXEC_DTYPE_FLOAT && src_type != TEEXEC_DTYPE_BFLOAT16 &&
        src_type != TEEXEC_DTYPE_FLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "quantize: source must be float, bfloat16 or float16, not %s",
                        teexec_dtype_name(src_type));
    uint64_t n, staging;
    if (!tx_mul_u64(rows, cols, &n) || !tx_mul_u64(n, sizeof(float), &staging) || staging > SIZE_MAX - 1)
        return tx_error(TEEXEC_ERR_LIMIT, "quantize: %llu x %llu elements overflow",
                        (unsigned long long)rows, (unsigned long long)cols);
    TX_TRY(tx_qtensor_alloc(q, rows, cols, cfg));
    float *x = NULL;
    teexec_status *st = NULL;
    if (src_type == TEEXEC_DTYPE_FLOAT) {
        x = (float *)src;
    } else {
        x = malloc((size_t)n * sizeof(float) + 1);
        if (!x) st = tx_oom();
        else st = tx_convert_to_f32(src, src_type, x, n);
    }
    if (!st && n && !src) st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "quantize: NULL source");
    if (!st) {
        switch (cfg->kind) {
        case TX_QKIND_FP8_TENSOR: st = tx_quant_fp8_tensor(x, rows, cols, src_type, cfg, q); break;
        case TX_QKIND_FP8_BLOCK: st = tx_quant_fp8_block(x, rows, cols, src_type, cfg, q); break;
        case TX_QKIND_MXFP8: st = tx_quant_mxfp8(x, rows, cols, cfg, q); break;
        default: st = tx_quant_nvfp4(x, rows, cols, src_type, cfg, q); break;
        }
    }
    if (!st && q->scale_layout == TX_SCALE_SWIZZLED) {
        st = reswizzle(q, false, true);
        if (!st) st = reswizzle(q, true, true);
    }
    if (x != src) free(x);
    if (st) tx_qtensor_free(q);
    return st;
}

teexec_status *tx_dequantize(const tx_qtensor *q, unsigned usage, float *out)
{
    if (usage != TX_QUSAGE_ROWWISE && usage != TX_QUSAGE_COLUMNWISE)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dequantize: pick exactly one usage");
    if (!(q->usage & usage))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dequantize: the tensor has no %s data",
                        usage == TX_QUSAGE_ROWWISE ? "rowwise" : "columnwise");
    tx_qtensor view = *q;
    uint8_t *compact = NULL;
    const tx_qdata *d = usage == TX_QUSAGE_ROWWISE ? &q->row : &q->col;
    if (q->scale_layout == TX_SCALE_SWIZZLED && d->scale) {
        compact = malloc(d->scale_bytes + 1);
        if (!compact) return tx_oom();
        bool transposed = usage == TX_QUSAGE_COLUMNWISE && q->kind == TX_QKIND_MXFP8;
        teexec_status *st = tx_scale_unswizzle(d->scale, compact, d->scale_rows, d->scale_cols, transposed);
        if (st) {
            free(compact);
            return st;
        }
        if (usage == TX_QUSAGE_ROWWISE) view.row.scale = compact;
        else view.col.scale = compact;
        view.scale_layout = TX_SCALE_COMPACT;
    }
    switch (q->kind) {
    case TX_QKIND_FP8_TENSOR: tx_dequant_fp8_tensor(&view, usage, out); break;
    case TX_QKIND_FP8_BLOCK: tx_dequant_fp8_block(&view, usage, out); break;
    case TX_QKIND_MXFP8: tx_dequant_mxfp8(&view, usage, out); break;
    case TX_QKIND_NVFP4: tx_dequant_nvfp4(&view, usage, out); break;
    default: break;
    }
    free(compact);
    return NULL;
}
