/* gpu_compare.c - CPU vs GPU quantizer comparison (see gpu_compare.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/gpu_compare.h"

#include "kernels/cuda/dequant.h"
#include "kernels/cuda/quant_block.h"
#include "kernels/cuda/quant_fp8.h"
#include "kernels/cuda/quant_mxfp8.h"
#include "kernels/cuda/quant_nvfp4.h"
#include "tests/gpu/gpu_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dev_usage {
    uint8_t *data;
    void *scale;
} dev_usage;

static size_t cmp_usage(const char *name, const char *which, const tx_qdata *d, const dev_usage *g)
{
    size_t bad = 0;
    uint8_t *h = malloc(d->data_bytes + d->scale_bytes + 1);
    assert_non_null(h);
    char what[256];
    tg_download(h, g->data, d->data_bytes);
    snprintf(what, sizeof what, "%s %s data", name, which);
    bad += tg_cmp_bytes(what, d->data, h, d->data_bytes);
    if (d->scale) {
        tg_download(h, g->scale, d->scale_bytes);
        snprintf(what, sizeof what, "%s %s scales", name, which);
        bad += tg_cmp_bytes(what, d->scale, h, d->scale_bytes);
    }
    free(h);
    return bad;
}

static size_t cmp_dequant(const tg_case *c, const tx_qtensor *q, unsigned usage, const dev_usage *g,
                          const float *d_scale_inv, const float *d_amax)
{
    const size_t n = c->rows * c->cols;
    const bool col = usage == TX_QUSAGE_COLUMNWISE;
    const tx_qdata *d = col ? &q->col : &q->row;
    float *cpu = malloc(n * sizeof(float) + 1), *gpu = malloc(n * sizeof(float) + 1);
    assert_non_null(cpu);
    assert_non_null(gpu);
    TG_OK(tx_dequantize(q, usage, cpu));
    float *d_out = tg_dev_alloc(n * sizeof(float));
    tx_cuda_dequant_args a;
    memset(&a, 0, sizeof a);
    a.kind = (tx_cuda_qkind)q->kind;
    a.fmt = q->fmt;
    a.columnwise = col;
    a.block_2d = q->block_2d;
    a.swizzled = q->scale_layout == TX_SCALE_SWIZZLED;
    a.rows = c->rows;
    a.cols = c->cols;
    a.data = g->data;
    a.scales = g->scale;
    a.scale_cols = d->scale_cols;
    a.scale_inv = d_scale_inv;
    a.amax = d_amax ? d_amax + (col ? 1 : 0) : NULL;
    a.out = d_out;
    TG_OK(tx_cuda_dequantize(&a, NULL));
    tg_sync("dequantize");
    tg_download(gpu, d_out, n * sizeof(float));
    char what[256];
    snprintf(what, sizeof what, "%s dequantized %s", c->name, col ? "columnwise" : "rowwise");
    size_t bad = tg_cmp_floats(what, cpu, gpu, n);
    tg_dev_free(d_out);
    free(cpu);
    free(gpu);
    return bad;
}

size_t tg_run_case(const tg_case *c)
{
    const size_t n = c->rows * c->cols;
    const size_t esz = c->src == TEEXEC_DTYPE_BFLOAT16 ? 2 : 4;
    void *hx = malloc(n * esz + 1);
    assert_non_null(hx);
    if (c->all_bf16) tg_fill_all_bf16(hx, n);
    else tg_fill(hx, c->src, c->rows, c->cols, c->seed, c->flags);

    tx_qtensor q;
    TG_OK(tx_quantize(hx, c->src, c->rows, c->cols, &c->cfg, &q));
    const bool row = q.usage & TX_QUSAGE_ROWWISE, col = q.usage & TX_QUSAGE_COLUMNWISE;
    const bool swz = q.scale_layout == TX_SCALE_SWIZZLED;

    void *d_x = tg_dev_upload(hx, n * esz);
    dev_usage gr = {0}, gc = {0};
    if (row) {
        gr.data = tg_dev_alloc(q.row.data_bytes);
        if (q.row.scale_bytes) gr.scale = tg_dev_alloc(q.row.scale_bytes);
    }
    if (col) {
        gc.data = tg_dev_alloc(q.col.data_bytes);
        if (q.col.scale_bytes) gc.scale = tg_dev_alloc(q.col.scale_bytes);
    }
    float *d_f = tg_dev_alloc(4 * sizeof(float)); /* scale, scale_inv, amax[2] */
    size_t bad = 0;
    char detail[256];

    switch (c->cfg.kind) {
    case TX_QKIND_FP8_TENSOR: {
        tx_cuda_fp8_args a;
        memset(&a, 0, sizeof a);
        a.x = d_x;
        a.x_dtype = c->src;
        a.rows = c->rows;
        a.cols = c->cols;
        a.fmt = q.fmt;
        a.scale = d_f;
        a.scale_inv = d_f + 1;
        a.amax = d_f + 2;
        a.row_data = gr.data;
        a.col_data = gc.data;
        if (c->cfg.use_given_scale) {
            /* delayed scaling: the scale goes in, the amax slot starts at 0 */
            const float init[4] = {c->cfg.given_scale, 0.0f, 0.0f, 0.0f};
            tg_upload_to(d_f, init, sizeof init);
            TG_OK(tx_cuda_fp8_quantize_delayed(&a, NULL));
        } else {
            TG_OK(tx_cuda_fp8_quantize_current(&a, c->cfg.amax_epsilon, c->cfg.power_2_scale, NULL));
        }
        tg_sync("fp8 quantize");
        float f[4];
        tg_download(f, d_f, sizeof f);
        const float want[3] = {q.scale, q.scale_inv, q.amax};
        bad += tg_cmp_floats("fp8 scale/scale_inv/amax", want, f, 3);
        break;
    }
    case TX_QKIND_FP8_BLOCK: {
        tx_cuda_block_args a;
        memset(&a, 0, sizeof a);
        a.x = d_x;
        a.x_dtype = c->src;
        a.rows = c->rows;
        a.cols = c->cols;
        a.fmt = q.fmt;
        a.two_d = q.block_2d;
        a.amax_eps = c->cfg.amax_epsilon;
        a.pow2 = c->cfg.power_2_scale;
        a.row_data = gr.data;
        a.row_scale_inv = gr.scale;
        a.row_ld = q.row.scale_cols;
        a.row_scale_count = q.row.scale_bytes / 4;
        a.col_data = gc.data;
        a.col_scale_inv = gc.scale;
        a.col_ld = q.col.scale_cols;
        a.col_scale_count = q.col.scale_bytes / 4;
        TG_OK(tx_cuda_block_quantize(&a, NULL));
        tg_sync("block quantize");
        break;
    }
    case TX_QKIND_MXFP8: {
        tx_cuda_mxfp8_args a;
        memset(&a, 0, sizeof a);
        a.x = d_x;
        a.x_dtype = c->src;
        a.rows = c->rows;
        a.cols = c->cols;
        a.fmt = q.fmt;
        a.two_d = q.block_2d;
        a.swizzled = swz;
        a.row_data = gr.data;
        a.row_scales = gr.scale;
        a.row_scale_ld = q.row.scale_cols;
        a.row_scale_bytes = q.row.scale_bytes;
        a.col_data = gc.data;
        a.col_scales = gc.scale;
        a.col_scale_ld = q.col.scale_cols;
        a.col_scale_bytes = q.col.scale_bytes;
        TG_OK(tx_cuda_mxfp8_quantize(&a, NULL));
        tg_sync("mxfp8 quantize");
        break;
    }
    case TX_QKIND_NVFP4: {
        tx_cuda_nvfp4_args a;
        memset(&a, 0, sizeof a);
        a.x = d_x;
        a.x_dtype = c->src;
        a.rows = c->rows;
        a.cols = c->cols;
        a.two_d = q.block_2d;
        a.rht = c->cfg.rht;
        a.stochastic = c->cfg.stochastic_rounding;
        a.seed = c->cfg.seed;
        a.sr_offset = c->cfg.sr_offset;
        a.swizzled = swz;
        a.use_given_amax = c->cfg.use_given_amax;
        a.given_amax_row = c->cfg.given_amax_row;
        a.given_amax_col = c->cfg.given_amax_col;
        a.row_data = gr.data;
        a.row_scales = gr.scale;
        a.row_scale_ld = q.row.scale_cols;
        a.row_scale_bytes = q.row.scale_bytes;
        a.col_data = gc.data;
        a.col_scales = gc.scale;
        a.col_scale_ld = q.col.scale_cols;
        a.col_scale_bytes = q.col.scale_bytes;
        a.amax = d_f + 2;
        TG_OK(tx_cuda_nvfp4_quantize(&a, NULL));
        tg_sync("nvfp4 quantize");
        float f[2];
        tg_download(f, d_f + 2, sizeof f);
        float want[2] = {row ? q.row.amax : f[0], col ? q.col.amax : f[1]};
        bad += tg_cmp_floats("nvfp4 global amax", want, f, 2);
        break;
    }
    }

    if (row) bad += cmp_usage(c->name, "rowwise", &q.row, &gr);
    if (col) bad += cmp_usage(c->name, "columnwise", &q.col, &gc);
    const float *d_sinv = c->cfg.kind == TX_QKIND_FP8_TENSOR ? d_f + 1 : NULL;
    const float *d_amax = c->cfg.kind == TX_QKIND_NVFP4 ? d_f + 2 : NULL;
    if (row) bad += cmp_dequant(c, &q, TX_QUSAGE_ROWWISE, &gr, d_sinv, d_amax);
    if (col) bad += cmp_dequant(c, &q, TX_QUSAGE_COLUMNWISE, &gc, d_sinv, d_amax);

    snprintf(detail, sizeof detail, "%zux%zu %s, %zu differences", c->rows, c->cols,
             c->src == TEEXEC_DTYPE_BFLOAT16 ? "bf16" : "fp32", bad);
    tg_record(c->name, bad == 0, detail);

    tg_dev_free(d_f);
    tg_dev_free(gr.data);
    tg_dev_free(gr.scale);
    tg_dev_free(gc.data);
    tg_dev_free(gc.scale);
    tg_dev_free(d_x);
    tx_qtensor_free(&q);
    free(hx);
    if (bad) fail_msg("%s: %zu differences between the CPU and GPU quantizers", c->name, bad);
    return n;
}
