/* te_cuda_grouped.c - te.ops GroupedLinear (MoE experts) on the GPU, the
 * te_cuda.h op-family table that tx_cuda_te_linear_impl returns for it.
 *
 * The GEMMs are kernels/cuda/grouped_gemm.h's: one launch per GEMM kind
 * over every group, the group boundaries read from the split-sizes tensor
 * on the device (no host synchronization, so a CUDA graph may capture the
 * node). Output rows past sum(split_sizes) are zeroed on the device, as the
 * CPU kernel leaves them (kernels/cpu/te_grouped_linear.c); sizes the CPU
 * refuses (negative, or past the rows) are clamped instead (grouped_gemm.h).
 *
 * Recipes quantize exactly as the CPU group executor does (exec/group_exec.c
 * lin_prepare / lin_bwd): x and dy as WHOLE tensors (one scale set over all
 * rows, whatever group they belong to), each weight as its own tensor with
 * the one weight quantizer. The GEMMs then run on the dequantized FP32
 * operands (the CPU's tx_fused_dequantize gives FP32 too): FPROP x rowwise,
 * w rowwise; DGRAD dy rowwise, w columnwise; WGRAD dy columnwise, x
 * columnwise; dbias from the high-precision dy. The quantized x and weights
 * stay in the node's state from forward to backward (as te_cuda_linear.h's
 * Linear keeps them); dy's quantization lives in the scratch.
 *
 * Layout: state = x's operand region, then one region per weight (256-byte
 * aligned). Scratch = dy's region, then FP32 dequantizations: x rowwise or
 * columnwise [M, K], every weight [G, N, K], dy rowwise and dy columnwise
 * [M, N] (each present only when its operand is quantized).
 */
#include "exec/cuda/te_cuda_grouped.h"

#include "base/checked.h"
#include "exec/cuda/linear_gemm.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/grouped_gemm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN ((size_t)256)
/* linear_gemm.h's per-tensor scalars: scale_inv 16 bytes in, amax 32 bytes
 * in (NVFP4: the rowwise then the columnwise global amax). */
#define SC_SCALE_INV 4
#define SC_AMAX 8

typedef struct grouped {
    char name[112];
    int G;
    bool has_bias;
    size_t M, N, K;
    teexec_dtype x_dt, w_dt, y_dt;
    unsigned needs;
    tx_cuda_lin_operand ox, ow, ody;
    size_t st_x, st_w, state_bytes;    /* st_w: first weight; weight g at st_w + g * w_stride */
    size_t w_stride;
    size_t sc_dy, sc_x, sc_w, sc_dyr, sc_dyc, scratch_bytes;
} grouped;

static bool is_gpu_float(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_BFLOAT16 || dt == TEEXEC_DTYPE_FLOAT16;
}

static bool add_region(size_t *pos, size_t bytes, size_t *at)
{
    size_t r;
    if (!tx_add_size(bytes, ALIGN - 1, &r)) return false;
    r = r / ALIGN * ALIGN;
    *at = *pos;
    return tx_add_size(*pos, r, pos);
}

static teexec_status *operand(grouped *l, tx_cuda_lin_operand *o, const tx_cuda_operand_q *q,
                              size_t rows, size_t cols, unsigned usage, int sm, const char *what)
{
    memset(o, 0, sizeof *o);
    o->rows = rows;
    o->cols = cols;
    o->usage = usage;
    o->row_data = o->row_scales = o->col_data = o->col_scales = o->scalars = SIZE_MAX;
    if (!q || !q->on || !usage) return NULL;
    /* the emulation dequantizes every operand: the native GEMMs' scale
     * layouts are never needed here */
    tx_cuda_operand_q qq = *q;
    qq.native = false;
    teexec_status *st = tx_cuda_lin_operand_init(o, &qq, rows, cols, usage, sm);
    return st ? tx_status_prefix(st, "%s: %s", l->name, what) : NULL;
}

static teexec_status *grouped_init(grouped *l, const tx_cuda_te_desc *d)
{
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "op %s (GroupedLinear)", d->name ? d->name : "?");
    int64_t g = d->attrs ? d->attrs[TX_TE_A_GL_NUM_GROUPS].i : 0;
    l->has_bias = d->attrs && d->attrs[TX_TE_A_GL_BIAS].i != 0;
    if (g < 1 || g > TX_GG_MAX_GROUPS)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: the GPU runs 1 to %d groups, not %lld",
                        l->name, TX_GG_MAX_GROUPS, (long long)g);
    l->G = (int)g;
    const tx_tensor *x = d->input, *y = d->output;
    if (!x || !y || x->rank < 1 || d->n_params != (l->has_bias ? 2 * l->G : l->G))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: x, y and %d parameters (weights%s) must be given", l->name,
                        l->has_bias ? 2 * l->G : l->G, l->has_bias ? " then biases" : "");
    const tx_tensor *ss = d->n_extra_inputs > 0 ? d->extra_inputs[0] : NULL;
    if (!ss || ss->dtype != TEEXEC_DTYPE_INT64 || ss->rank != 1 || ss->dims[0] != g)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: split_sizes must be an int64 tensor of shape [%d]", l->name, l->G);
    uint64_t t;
    if (!tx_dims_product(x->dims, (size_t)x->rank - 1, &t) || t > SIZE_MAX)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x's size overflows", l->name);
    l->M = (size_t)t;
    l->K = (size_t)x->dims[x->rank - 1];
    const tx_tensor *w0 = d->params[0];
    if (!w0 || w0->rank != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: weight_0 must be [N, K]", l->name);
    l->N = (size_t)w0->dims[0];
    l->w_dt = w0->dtype;
    for (int i = 0; i < d->n_params; i++) {
        const tx_tensor *p = d->params[i];
        bool w = i < l->G;
        bool ok = p && (w ? p->rank == 2 && (size_t)p->dims[0] == l->N &&
                                (size_t)p->dims[1] == l->K && p->dtype == l->w_dt
                          : p->rank == 1 && (size_t)p->dims[0] == l->N);
        if (!ok)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: every weight must be [N, K] of one dtype and every bias [N] "
                            "(K = last dim of x); parameter %d is not",
                            l->name, i);
    }
    size_t mn;
    if (!tx_mul_size(l->M, l->N, &mn) || y->numel != mn || y->dims[y->rank - 1] != (int64_t)l->N)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: y must be [..., N] with x's leading dims",
                        l->name);
    if (!l->M || !l->N || !l->K)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: an empty GEMM (M=%zu, N=%zu, K=%zu) has no CUDA kernel", l->name, l->M,
                        l->N, l->K);
    l->x_dt = x->dtype;
    l->y_dt = y->dtype;
    bool bias_ok = true;
    for (int i = l->G; i < d->n_params; i++) bias_ok = bias_ok && is_gpu_float(d->params[i]->dtype);
    if (!is_gpu_float(l->x_dt) || !is_gpu_float(l->w_dt) || !is_gpu_float(l->y_dt) || !bias_ok)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: the GPU runs fp32, bf16 and fp16 GroupedLinears (x %s, weights %s, "
                        "y %s, biases too); fp64 is the CPU's gradient-check path",
                        l->name, teexec_dtype_name(l->x_dt), teexec_dtype_name(l->w_dt),
                        teexec_dtype_name(l->y_dt));
    l->needs = d->training ? d->needs : 0u;
    bool need_dx = (l->needs & TX_TE_FOR_DX) != 0, need_dw = (l->needs & TX_TE_FOR_DPARAMS) != 0;
    unsigned ux = TX_QUSAGE_ROWWISE | (need_dw ? TX_QUSAGE_COLUMNWISE : 0u);
    unsigned uw = TX_QUSAGE_ROWWISE | (need_dx ? TX_QUSAGE_COLUMNWISE : 0u);
    unsigned udy = (need_dx ? TX_QUSAGE_ROWWISE : 0u) | (need_dw ? TX_QUSAGE_COLUMNWISE : 0u);
    const tx_cuda_linear_quant *q = d->quant;
    TX_TRY(operand(l, &l->ox, q ? &q->x : NULL, l->M, l->K, ux, d->sm, "input x"));
    TX_TRY(operand(l, &l->ow, q ? &q->w : NULL, l->N, l->K, uw, d->sm, "weights"));
    TX_TRY(operand(l, &l->ody, q ? &q->dy : NULL, l->M, l->N, udy, d->sm, "grad_output"));
    const struct { bool on; teexec_dtype dt; const char *what; } src[3] = {
        {l->ox.q.on, l->x_dt, "x"}, {l->ow.q.on, l->w_dt, "the weights"},
        {l->ody.q.on, l->y_dt, "grad_output"}};
    for (int i = 0; i < 3; i++)
        if (src[i].on && src[i].dt == TEEXEC_DTYPE_FLOAT16)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "%s: %s is float16, and the GPU quantizers read float or bfloat16",
                            l->name, src[i].what);
    /* state: x, then the weights */
    size_t pos = 0;
    bool ok = add_region(&pos, l->ox.bytes, &l->st_x);
    l->w_stride = 0;
    ok = ok && add_region(&l->w_stride, l->ow.bytes, &(size_t){0});
    size_t wall;
    ok = ok && tx_mul_size(l->w_stride, (size_t)l->G, &wall);
    ok = ok && add_region(&pos, wall, &l->st_w);
    l->state_bytes = pos;
    /* scratch */
    size_t mk, gnk, mn4, mk4, gnk4;
    ok = ok && tx_mul_size(l->M, l->K, &mk) && tx_mul_size(mk, 4, &mk4);
    ok = ok && tx_mul_size(l->N, l->K, &gnk) && tx_mul_size(gnk, (size_t)l->G, &gnk) &&
         tx_mul_size(gnk, 4, &gnk4);
    ok = ok && tx_mul_size(mn, 4, &mn4);
    pos = 0;
    ok = ok && add_region(&pos, l->ody.bytes, &l->sc_dy);
    ok = ok && add_region(&pos, l->ox.q.on ? mk4 : 0, &l->sc_x);
    ok = ok && add_region(&pos, l->ow.q.on ? gnk4 : 0, &l->sc_w);
    ok = ok && add_region(&pos, l->ody.q.on && need_dx ? mn4 : 0, &l->sc_dyr);
    ok = ok && add_region(&pos, l->ody.q.on && need_dw ? mn4 : 0, &l->sc_dyc);
    l->scratch_bytes = pos;
    if (!ok) return tx_error(TEEXEC_ERR_LIMIT, "%s: state or scratch size overflows", l->name);
    return NULL;
}

static void *at(void *base, size_t off) { return base ? (char *)base + off : NULL; }
static const void *cat(const void *base, size_t off)
{
    return off == SIZE_MAX || !base ? NULL : (const char *)base + off;
}

/* One usage of a quantized operand in region `mem` into FP32 `out`. */
static teexec_status *dequant(const grouped *l, const tx_cuda_lin_operand *o, const void *mem,
                              unsigned usage, float *out, const tx_cuda_env *env, const char *what)
{
    const bool col = usage == TX_QUSAGE_COLUMNWISE;
    tx_cuda_dequant_args d;
    memset(&d, 0, sizeof d);
    d.kind = (tx_cuda_qkind)o->q.cfg.kind;
    d.fmt = o->q.cfg.kind == TX_QKIND_NVFP4 ? TEEXEC_DTYPE_FLOAT4E2M1 : o->q.cfg.fmt;
    d.columnwise = col;
    d.block_2d = o->q.cfg.block_2d;
    d.swizzled = o->swizzled;
    d.rows = o->rows;
    d.cols = o->cols;
    d.data = cat(mem, col ? o->col_data : o->row_data);
    d.scales = cat(mem, col ? o->col_scales : o->row_scales);
    d.scale_cols = col ? o->col_scale_cols : o->row_scale_cols;
    const float *sc = cat(mem, o->scalars);
    if (o->q.cfg.kind == TX_QKIND_FP8_TENSOR) d.scale_inv = sc ? sc + SC_SCALE_INV : NULL;
    if (o->q.cfg.kind == TX_QKIND_NVFP4) d.amax = sc ? sc + SC_AMAX + (col ? 1 : 0) : NULL;
    d.out = out;
    if (!d.data) return tx_error(TEEXEC_ERR_INTERNAL, "%s: %s was not quantized for this usage",
                                 l->name, what);
    teexec_status *st = tx_cuda_dequantize(&d, env->stream);
    return st ? tx_status_prefix(st, "%s: dequantizing %s", l->name, what) : NULL;
}

static teexec_status *check_t(const grouped *l, const char *what, const tx_tensor *t, size_t numel,
                              teexec_dtype dt)
{
    if (!t || !t->data)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s is missing", l->name, what);
    if (t->numel != numel || t->dtype != dt)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: %s is %s with %llu elements, prepared for %s with %zu", l->name, what,
                        teexec_dtype_name(t->dtype), (unsigned long long)t->numel,
                        teexec_dtype_name(dt), numel);
    return NULL;
}

static teexec_status *check_split(const grouped *l, const tx_tensor *ss)
{
    if (!ss || !ss->data || ss->dtype != TEEXEC_DTYPE_INT64 || ss->numel != (uint64_t)l->G)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: split_sizes must be an int64 tensor of %d elements", l->name, l->G);
    return NULL;
}

static teexec_status *grouped_prepare(const tx_cuda_te_desc *d, void **priv, size_t *state_bytes,
                                      size_t *scratch_bytes)
{
    *priv = NULL;
    *state_bytes = *scratch_bytes = 0;
    grouped *l = malloc(sizeof *l);
    if (!l) return tx_oom();
    teexec_status *st = grouped_init(l, d);
    if (st) {
        free(l);
        return st;
    }
    *priv = l;
    *state_bytes = l->state_bytes;
    *scratch_bytes = l->scratch_bytes;
    return NULL;
}

static teexec_status *grouped_forward(void *priv, const tx_te_fwd_args *a, void *state,
                                      void *scratch, const tx_cuda_env *env)
{
    const grouped *l = priv;
    if (a->n_params != (l->has_bias ? 2 * l->G : l->G) || a->n_extra_inputs < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: parameters or split_sizes missing",
                        l->name);
    const tx_tensor *ss = a->extra_inputs[0];
    TX_TRY(check_split(l, ss));
    TX_TRY(check_t(l, "x", a->input, l->M * l->K, l->x_dt));
    TX_TRY(check_t(l, "y", a->output, l->M * l->N, l->y_dt));
    for (int g = 0; g < a->n_params; g++) {
        const tx_tensor *p = a->params[g];
        TX_TRY(check_t(l, g < l->G ? "a weight" : "a bias", p, g < l->G ? l->N * l->K : l->N,
                       g < l->G ? l->w_dt : (p ? p->dtype : l->w_dt)));
    }
    if ((l->ox.q.on || l->ow.q.on) && (!scratch || (l->ox.q.on && !state) ||
                                       (l->ow.q.on && !state)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: state and scratch must be given", l->name);
    tx_cuda_grouped_gemm gg;
    memset(&gg, 0, sizeof gg);
    gg.kind = TX_GG_FPROP;
    gg.groups = l->G;
    gg.split_sizes = ss->data;
    gg.m = l->M, gg.n = l->N, gg.k = l->K;
    gg.a = a->input->data;
    gg.a_dt = l->x_dt;
    if (l->ox.q.on) {
        void *mem = at(state, l->st_x);
        teexec_status *st = tx_cuda_lin_quantize(&l->ox, a->input->data, l->x_dt, mem, env->step,
                                                 env->stream);
        if (st) return tx_status_prefix(st, "%s: quantizing x", l->name);
        float *xf = at(scratch, l->sc_x);
        TX_TRY(dequant(l, &l->ox, mem, TX_QUSAGE_ROWWISE, xf, env, "x"));
        gg.a = xf;
        gg.a_dt = TEEXEC_DTYPE_FLOAT;
    }
    gg.b_dt = l->ow.q.on ? TEEXEC_DTYPE_FLOAT : l->w_dt;
    for (int g = 0; g < l->G; g++) {
        gg.b[g] = a->params[g]->data;
        if (l->ow.q.on) {
            void *mem = at(state, l->st_w + (size_t)g * l->w_stride);
            teexec_status *st = tx_cuda_lin_quantize(&l->ow, a->params[g]->data, l->w_dt, mem,
                                                     env->step, env->stream);
            if (st) return tx_status_prefix(st, "%s: quantizing weight %d", l->name, g);
            float *wf = (float *)at(scratch, l->sc_w) + (size_t)g * l->N * l->K;
            TX_TRY(dequant(l, &l->ow, mem, TX_QUSAGE_ROWWISE, wf, env, "a weight"));
            gg.b[g] = wf;
        }
        if (l->has_bias) {
            gg.bias[g] = a->params[l->G + g]->data;
            gg.bias_dt = a->params[l->G + g]->dtype;
        }
    }
    if (l->has_bias)
        for (int g = 1; g < l->G; g++)
            if (a->params[l->G + g]->dtype != gg.bias_dt)
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: the biases differ in dtype", l->name);
    gg.out[0] = a->output->data;
    gg.out_dt = l->y_dt;
    teexec_status *st = tx_cuda_grouped_gemm_run(&gg, env->stream);
    if (!st)
        st = tx_cuda_grouped_zero_tail(ss->data, l->G, l->M, l->N, a->output->data, l->y_dt,
                                       env->stream);
    return st ? tx_status_prefix(st, "%s: forward", l->name) : NULL;
}

/* A backward grouped GEMM over all groups whose A operand is dy: as
 * stored, or (quantized) dequantized to FP32 into `dy_f` in the usage
 * the GEMM reduces over (rowwise for DGRAD, columnwise for WGRAD). */
static teexec_status *bwd_gemm_begin(const grouped *l, tx_gg_kind kind, int G,
                                     const tx_tensor *ss, const tx_tensor *dy, const void *dyq,
                                     float *dy_f, const tx_cuda_env *env,
                                     tx_cuda_grouped_gemm *gg)
{
    memset(gg, 0, sizeof *gg);
    gg->kind = kind;
    gg->groups = G;
    gg->split_sizes = ss->data;
    gg->m = l->M, gg->n = l->N, gg->k = l->K;
    gg->a = dy->data;
    gg->a_dt = dy->dtype;
    if (!l->ody.q.on) return NULL;
    unsigned usage = kind == TX_GG_DGRAD ? TX_QUSAGE_ROWWISE : TX_QUSAGE_COLUMNWISE;
    TX_TRY(dequant(l, &l->ody, dyq, usage, dy_f, env, "grad_output"));
    gg->a = dy_f;
    gg->a_dt = TEEXEC_DTYPE_FLOAT;
    return NULL;
}

static teexec_status *grouped_backward(void *priv, const tx_te_bwd_args *a, void *state,
                                       void *scratch, const tx_cuda_env *env)
{
    const grouped *l = priv;
    const int G = l->G, np = l->has_bias ? 2 * G : G;
    if (a->n_saved != 2 + np)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: expected %d saved tensors, got %d",
                        l->name, 2 + np, a->n_saved);
    tx_tensor *dx = a->grad_input;
    bool any_dw = false, any_db = false;
    for (int i = 0; i < a->n_grad_params && i < np; i++) {
        tx_tensor *p = a->grad_params[i];
        if (!p) continue;
        if (i < G) any_dw = true;
        else any_db = true;
        TX_TRY(check_t(l, i < G ? "a weight grad" : "a bias grad", p, i < G ? l->N * l->K : l->N,
                       p->dtype));
    }
    if (!dx && !any_dw && !any_db) return NULL;
    if ((dx && !(l->needs & TX_TE_FOR_DX)) || ((any_dw || any_db) && !(l->needs & TX_TE_FOR_DPARAMS)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: backward asked for a grad the node was not prepared for", l->name);
    const tx_tensor *ss = a->saved[0], *dy = a->grad_output;
    TX_TRY(check_split(l, ss));
    TX_TRY(check_t(l, "dy", dy, l->M * l->N, dy ? dy->dtype : l->y_dt));
    if (dx) TX_TRY(check_t(l, "dx", dx, l->M * l->K, dx->dtype));
    if (l->ox.q.on || l->ow.q.on || l->ody.q.on)
        if (!scratch || ((l->ox.q.on || l->ow.q.on) && !state))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: state and scratch must be given",
                            l->name);
    void *dyq = at(scratch, l->sc_dy);
    if (l->ody.q.on) {
        teexec_status *st = tx_cuda_lin_quantize(&l->ody, dy->data, dy->dtype, dyq, env->step,
                                                 env->stream);
        if (st) return tx_status_prefix(st, "%s: quantizing grad_output", l->name);
    }
    teexec_status *st = NULL;
    if (dx) {
        tx_cuda_grouped_gemm gg;
        TX_TRY(bwd_gemm_begin(l, TX_GG_DGRAD, G, ss, dy, dyq, at(scratch, l->sc_dyr), env, &gg));
        gg.b_dt = l->ow.q.on ? TEEXEC_DTYPE_FLOAT : l->w_dt;
        for (int g = 0; g < G; g++) {
            if (l->ow.q.on) {
                float *wf = (float *)at(scratch, l->sc_w) + (size_t)g * l->N * l->K;
                TX_TRY(dequant(l, &l->ow, at(state, l->st_w + (size_t)g * l->w_stride),
                               TX_QUSAGE_COLUMNWISE, wf, env, "a weight"));
                gg.b[g] = wf;
            } else {
                const tx_tensor *w = a->saved[2 + g];
                TX_TRY(check_t(l, "a saved weight", w, l->N * l->K, l->w_dt));
                gg.b[g] = w->data;
            }
        }
        gg.out[0] = dx->data;
        gg.out_dt = dx->dtype;
        st = tx_cuda_grouped_gemm_run(&gg, env->stream);
        if (!st)
            st = tx_cuda_grouped_zero_tail(ss->data, G, l->M, l->K, dx->data, dx->dtype,
                                           env->stream);
        if (st) return tx_status_prefix(st, "%s: dgrad", l->name);
    }
    if (any_dw) {
        tx_cuda_grouped_gemm gg;
        TX_TRY(bwd_gemm_begin(l, TX_GG_WGRAD, G, ss, dy, dyq, at(scratch, l->sc_dyc), env, &gg));
        if (l->ox.q.on) {
            float *xf = at(scratch, l->sc_x);
            TX_TRY(dequant(l, &l->ox, at(state, l->st_x), TX_QUSAGE_COLUMNWISE, xf, env, "x"));
            gg.b[0] = xf;
            gg.b_dt = TEEXEC_DTYPE_FLOAT;
        } else {
            const tx_tensor *x = a->saved[1];
            TX_TRY(check_t(l, "saved x", x, l->M * l->K, l->x_dt));
            gg.b[0] = x->data;
            gg.b_dt = l->x_dt;
        }
        teexec_dtype dw_dt = TEEXEC_DTYPE_UNDEFINED;
        for (int g = 0; g < G; g++) {
            tx_tensor *p = g < a->n_grad_params ? a->grad_params[g] : NULL;
            if (!p) continue;
            if (dw_dt != TEEXEC_DTYPE_UNDEFINED && p->dtype != dw_dt)
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: the weight grads differ in dtype",
                                l->name);
            dw_dt = p->dtype;
            gg.out[g] = p->data;
        }
        gg.out_dt = dw_dt;
        st = tx_cuda_grouped_gemm_run(&gg, env->stream);
        if (st) return tx_status_prefix(st, "%s: wgrad", l->name);
    }
    if (any_db) {
        void *db[TX_GG_MAX_GROUPS] = {0};
        teexec_dtype db_dt = TEEXEC_DTYPE_UNDEFINED;
        for (int g = 0; g < G; g++) {
            tx_tensor *p = G + g < a->n_grad_params ? a->grad_params[G + g] : NULL;
            if (!p) continue;
            if (db_dt != TEEXEC_DTYPE_UNDEFINED && p->dtype != db_dt)
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: the bias grads differ in dtype",
                                l->name);
            db_dt = p->dtype;
            db[g] = p->data;
        }
        st = tx_cuda_grouped_dbias(ss->data, G, l->M, l->N, dy->data, dy->dtype, db, db_dt,
                                   env->stream);
        if (st) return tx_status_prefix(st, "%s: dbias", l->name);
    }
    return NULL;
}

static void grouped_free(void *priv) { free(priv); }

static const tx_cuda_te_impl grouped_impl = {grouped_prepare, grouped_forward, grouped_backward,
                                             grouped_free};

const tx_cuda_te_impl *tx_cuda_te_grouped_impl(void) { return &grouped_impl; }
