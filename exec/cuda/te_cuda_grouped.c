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
 * the one weight quantizer. The GEMMs then run on the dequantized operands
 * (tx_cuda_dequantize_to): FPROP x rowwise, w rowwise; DGRAD dy rowwise, w
 * columnwise; WGRAD dy columnwise, x columnwise; dbias from the
 * high-precision dy. The quantized x and weights stay in the node's state
 * from forward to backward (as te_cuda_linear.h's Linear keeps them); dy's
 * quantization lives in the scratch.
 *
 * Operand dtype (DESIGN.md section 3, the exact emulation). The CPU GEMMs
 * the FP32 dequantized values (tx_fused_dequantize). Where those values are
 * q * (a power of two) they are exact in BF16 (8 significant bits, FP32's
 * exponent range) and the tensor-core kernel (grouped_gemm_mma.h: products
 * exact in FP32, FP32 accumulation) differs from the CPU only in the
 * summation order:
 *  - MXFP8: E4M3 (4 significant bits) / E5M2 (3) x E8M0 block scale;
 *  - FP8 block with power_2_scale;
 *  - FP8 per-tensor (delayed / current): the code alone (scale_inv = 1) is
 *    exact; the tensor's scale_inv, not a power of two, is factored out
 *    into the GEMM's per-group device alpha (grouped_gemm.h), FPROP
 *    sx_inv * sw_inv[g], DGRAD sdy_inv * sw_inv[g], WGRAD sdy_inv * sx_inv;
 *  - NVFP4: E2M1 (2 bits) x E4M3 block scale (4 bits) is exact (dequantized
 *    with a unit global amax, gemm_emu_prep.h); the global S_dec of each
 *    operand usage goes into the alpha the same way (the Linear's
 *    emulation and the native NVFP4 GEMM do the same).
 * Factoring the per-tensor scale replaces the FP32 rounding of each
 * dequantized element (q * s) by two per output (the alpha product, then
 * alpha * sum): a few FP32 ulps, far inside DESIGN.md's FP8 / NVFP4
 * tolerances (test_gpu_grouped: at most one bf16 ulp from the CPU). The
 * caveat gemm_emulate.h states holds here too: MXFP8 / pow2-block values
 * under bf16's normal range (E8M0 scales below ~2^-117) lose bits as bf16
 * subnormals. FP8 block WITHOUT power-of-two scales stays
 * on FP32 operands (the FP32-FMA kernel): its scales vary along the
 * reduction dim in 128-wide blocks, so they cannot be factored out of the
 * sum, and q * scale rounded to bf16 would not be the CPU's value.
 *
 * Layout: state = x's operand region, then one region per weight (256-byte
 * aligned). Scratch = dy's region, the dequantized operands (2 bytes an
 * element in bf16, 4 on the FP32 path): x rowwise or columnwise [M, K],
 * every weight [G, N, K], dy rowwise and dy columnwise [M, N] (each present
 * only when its operand is quantized), then the alpha floats: 1.0, the
 * NVFP4 unit amax, the A operand's S_dec and one S_dec per group (present
 * when any operand is quantized).
 */
#include "exec/cuda/te_cuda_grouped.h"

#include "base/checked.h"
#include "exec/cuda/linear_gemm.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/gemm_emu_prep.h"
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
    size_t sc_dy, sc_x, sc_w, sc_dyr, sc_dyc, sc_k, scratch_bytes;
    /* the dtype each quantized operand is dequantized into (BFLOAT16 or
     * FLOAT, dq_dtype) */
    teexec_dtype dq_x, dq_w, dq_dy;
} grouped;

/* Alpha floats in the scratch at sc_k (see the layout above). */
enum { K_ONE, K_UNIT_AMAX, K_SDEC_A, K_SDEC_B, K_FLOATS_FIXED = K_SDEC_B };

/* The operand dtype of a quantized operand (the list at the top). */
static teexec_dtype dq_dtype(const tx_cuda_lin_operand *o)
{
    switch (o->q.cfg.kind) {
    case TX_QKIND_MXFP8:
    case TX_QKIND_NVFP4:
    case TX_QKIND_FP8_TENSOR: return TEEXEC_DTYPE_BFLOAT16;
    case TX_QKIND_FP8_BLOCK:
        /* other scales: q * scale is not exact in bf16, and the per-block
         * scales vary along the reduction dim (no factoring): FP32 */
        return o->q.cfg.power_2_scale ? TEEXEC_DTYPE_BFLOAT16 : TEEXEC_DTYPE_FLOAT;
    default: return TEEXEC_DTYPE_FLOAT;
    }
}

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
    /* scratch: the dequantized operands in their GEMM dtype */
    l->dq_x = dq_dtype(&l->ox);
    l->dq_w = dq_dtype(&l->ow);
    l->dq_dy = dq_dtype(&l->ody);
    size_t mk, gnk, bx, bw, bdy;
    ok = ok && tx_mul_size(l->M, l->K, &mk) && tx_mul_size(mk, tx_dtype_elem_size(l->dq_x), &bx);
    ok = ok && tx_mul_size(l->N, l->K, &gnk) && tx_mul_size(gnk, (size_t)l->G, &gnk) &&
         tx_mul_size(gnk, tx_dtype_elem_size(l->dq_w), &bw);
    ok = ok && tx_mul_size(mn, tx_dtype_elem_size(l->dq_dy), &bdy);
    bool any_q = l->ox.q.on || l->ow.q.on || l->ody.q.on;
    pos = 0;
    ok = ok && add_region(&pos, l->ody.bytes, &l->sc_dy);
    ok = ok && add_region(&pos, l->ox.q.on ? bx : 0, &l->sc_x);
    ok = ok && add_region(&pos, l->ow.q.on ? bw : 0, &l->sc_w);
    ok = ok && add_region(&pos, l->ody.q.on && need_dx ? bdy : 0, &l->sc_dyr);
    ok = ok && add_region(&pos, l->ody.q.on && need_dw ? bdy : 0, &l->sc_dyc);
    ok = ok && add_region(&pos, any_q ? sizeof(float) * (K_FLOATS_FIXED + (size_t)l->G) : 0,
                          &l->sc_k);
    l->scratch_bytes = pos;
    if (!ok) return tx_error(TEEXEC_ERR_LIMIT, "%s: state or scratch size overflows", l->name);
    return NULL;
}

static void *at(void *base, size_t off) { return base ? (char *)base + off : NULL; }
static const void *cat(const void *base, size_t off)
{
    return off == SIZE_MAX || !base ? NULL : (const char *)base + off;
}

/* The scratch's alpha floats (K_*). */
static float *kfl(const grouped *l, void *scratch) { return at(scratch, l->sc_k); }

/* Writes the constants the bf16 dequantizations read: 1.0 (FP8 per-tensor
 * scale_inv with the tensor's scale factored out) and the NVFP4 unit amax
 * (S_dec exactly 1). One tiny launch per forward / backward: the scratch
 * keeps nothing between calls. */
static teexec_status *write_consts(const grouped *l, void *scratch, const tx_cuda_env *env)
{
    float *k = kfl(l, scratch);
    teexec_status *st = tx_cuda_nvfp4_gemm_alpha(NULL, NULL, 1.0f, k + K_ONE, k + K_UNIT_AMAX,
                                                 env->stream);
    return st ? tx_status_prefix(st, "%s: alpha constants", l->name) : NULL;
}

/* One usage of a quantized operand in region `mem` into `out` as `dt`
 * (the operand's dq_dtype). BFLOAT16: the per-tensor factor left out
 * (scale_inv 1 / unit amax read from the scratch constants); FLOAT: the
 * CPU's FP32 values, factor included. */
static teexec_status *dequant(const grouped *l, const tx_cuda_lin_operand *o, const void *mem,
                              unsigned usage, teexec_dtype dt, void *out, void *scratch,
                              const tx_cuda_env *env, const char *what)
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
    const float *k = kfl(l, scratch);
    const bool factored = dt == TEEXEC_DTYPE_BFLOAT16;
    if (o->q.cfg.kind == TX_QKIND_FP8_TENSOR)
        d.scale_inv = factored ? k + K_ONE : sc ? sc + SC_SCALE_INV : NULL;
    if (o->q.cfg.kind == TX_QKIND_NVFP4)
        d.amax = factored ? k + K_UNIT_AMAX : sc ? sc + SC_AMAX + (col ? 1 : 0) : NULL;
    if (!d.data) return tx_error(TEEXEC_ERR_INTERNAL, "%s: %s was not quantized for this usage",
                                 l->name, what);
    /* as stored: the grouped GEMMs read every operand in its source layout */
    teexec_status *st = tx_cuda_dequantize_to(&d, 0, dt, out, env->stream);
    return st ? tx_status_prefix(st, "%s: dequantizing %s", l->name, what) : NULL;
}

/* The factor a bf16-dequantized operand usage left out (the top's list),
 * as a device float for the GEMM's alpha, or NULL (none: HP operand, FP32
 * path, or a power-of-two-scaled kind). FP8 per-tensor: the tensor's
 * scale_inv in place; NVFP4: S_dec of the usage's global amax, computed
 * into `slot` (gemm_emu_prep.h's formula, as the quantizer). */
static teexec_status *factor(const grouped *l, const tx_cuda_lin_operand *o, const void *mem,
                             unsigned usage, teexec_dtype dt, float *slot,
                             const tx_cuda_env *env, const float **out)
{
    *out = NULL;
    const tx_qkind kind = o->q.cfg.kind;
    if (!o->q.on || dt != TEEXEC_DTYPE_BFLOAT16 ||
        (kind != TX_QKIND_FP8_TENSOR && kind != TX_QKIND_NVFP4))
        return NULL; /* MXFP8, pow2 FP8 block: nothing factored, no per-tensor scalars */
    const float *sc = cat(mem, o->scalars);
    if (!sc) return tx_error(TEEXEC_ERR_INTERNAL, "%s: an operand's scalars are missing", l->name);
    if (kind == TX_QKIND_FP8_TENSOR) {
        *out = sc + SC_SCALE_INV;
    } else if (o->q.cfg.kind == TX_QKIND_NVFP4) {
        const float *amax = sc + SC_AMAX + (usage == TX_QUSAGE_COLUMNWISE ? 1 : 0);
        TX_TRY(tx_cuda_nvfp4_gemm_alpha(amax, NULL, 1.0f, slot, NULL, env->stream));
        *out = slot;
    }
    return NULL;
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
    if (l->ox.q.on || l->ow.q.on) TX_TRY(write_consts(l, scratch, env));
    float *k = kfl(l, scratch);
    if (l->ox.q.on) {
        void *mem = at(state, l->st_x);
        teexec_status *st = tx_cuda_lin_quantize(&l->ox, a->input->data, l->x_dt, mem, env->step,
                                                 env->stream);
        if (st) return tx_status_prefix(st, "%s: quantizing x", l->name);
        void *xq = at(scratch, l->sc_x);
        TX_TRY(dequant(l, &l->ox, mem, TX_QUSAGE_ROWWISE, l->dq_x, xq, scratch, env, "x"));
        TX_TRY(factor(l, &l->ox, mem, TX_QUSAGE_ROWWISE, l->dq_x, k + K_SDEC_A, env, &gg.alpha_a));
        gg.a = xq;
        gg.a_dt = l->dq_x;
    }
    gg.b_dt = l->ow.q.on ? l->dq_w : l->w_dt;
    const size_t w_elems = l->N * l->K, w_es = tx_dtype_elem_size(l->dq_w);
    for (int g = 0; g < l->G; g++) {
        gg.b[g] = a->params[g]->data;
        if (l->ow.q.on) {
            void *mem = at(state, l->st_w + (size_t)g * l->w_stride);
            teexec_status *st = tx_cuda_lin_quantize(&l->ow, a->params[g]->data, l->w_dt, mem,
                                                     env->step, env->stream);
            if (st) return tx_status_prefix(st, "%s: quantizing weight %d", l->name, g);
            void *wq = at(scratch, l->sc_w + (size_t)g * w_elems * w_es);
            TX_TRY(dequant(l, &l->ow, mem, TX_QUSAGE_ROWWISE, l->dq_w, wq, scratch, env,
                           "a weight"));
            TX_TRY(factor(l, &l->ow, mem, TX_QUSAGE_ROWWISE, l->dq_w, k + K_SDEC_B + g, env,
                          &gg.alpha_b[g]));
            gg.b[g] = wq;
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
 * stored, or (quantized) dequantized into `dy_d` (dq_dy) in the usage the
 * GEMM reduces over (rowwise for DGRAD, columnwise for WGRAD), its factor
 * into alpha_a. */
static teexec_status *bwd_gemm_begin(const grouped *l, tx_gg_kind kind, int G,
                                     const tx_tensor *ss, const tx_tensor *dy, const void *dyq,
                                     void *dy_d, void *scratch, const tx_cuda_env *env,
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
    TX_TRY(dequant(l, &l->ody, dyq, usage, l->dq_dy, dy_d, scratch, env, "grad_output"));
    TX_TRY(factor(l, &l->ody, dyq, usage, l->dq_dy, kfl(l, scratch) + K_SDEC_A, env,
                  &gg->alpha_a));
    gg->a = dy_d;
    gg->a_dt = l->dq_dy;
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
    if (l->ox.q.on || l->ow.q.on || l->ody.q.on) TX_TRY(write_consts(l, scratch, env));
    float *k = kfl(l, scratch);
    const size_t w_elems = l->N * l->K, w_es = tx_dtype_elem_size(l->dq_w);
    if (l->ody.q.on) {
        teexec_status *st = tx_cuda_lin_quantize(&l->ody, dy->data, dy->dtype, dyq, env->step,
                                                 env->stream);
        if (st) return tx_status_prefix(st, "%s: quantizing grad_output", l->name);
    }
    teexec_status *st = NULL;
    if (dx) {
        tx_cuda_grouped_gemm gg;
        TX_TRY(bwd_gemm_begin(l, TX_GG_DGRAD, G, ss, dy, dyq, at(scratch, l->sc_dyr), scratch,
                              env, &gg));
        gg.b_dt = l->ow.q.on ? l->dq_w : l->w_dt;
        for (int g = 0; g < G; g++) {
            if (l->ow.q.on) {
                void *wq = at(scratch, l->sc_w + (size_t)g * w_elems * w_es);
                const void *mem = at(state, l->st_w + (size_t)g * l->w_stride);
                TX_TRY(dequant(l, &l->ow, mem, TX_QUSAGE_COLUMNWISE, l->dq_w, wq, scratch, env,
                               "a weight"));
                TX_TRY(factor(l, &l->ow, mem, TX_QUSAGE_COLUMNWISE, l->dq_w, k + K_SDEC_B + g,
                              env, &gg.alpha_b[g]));
                gg.b[g] = wq;
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
        TX_TRY(bwd_gemm_begin(l, TX_GG_WGRAD, G, ss, dy, dyq, at(scratch, l->sc_dyc), scratch,
                              env, &gg));
        if (l->ox.q.on) {
            void *xq = at(scratch, l->sc_x);
            const void *mem = at(state, l->st_x);
            TX_TRY(dequant(l, &l->ox, mem, TX_QUSAGE_COLUMNWISE, l->dq_x, xq, scratch, env, "x"));
            /* WGRAD's one B operand: its factor in alpha_b[0] */
            TX_TRY(factor(l, &l->ox, mem, TX_QUSAGE_COLUMNWISE, l->dq_x, k + K_SDEC_B, env,
                          &gg.alpha_b[0]));
            gg.b[0] = xq;
            gg.b_dt = l->dq_x;
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
