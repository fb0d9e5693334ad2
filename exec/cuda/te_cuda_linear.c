/* te_cuda_linear.c - te.ops Linear on the GPU under every recipe
 * (te_cuda.h's op-family table; the steps in te_cuda_linear.h).
 * GroupedLinear is te_cuda_grouped.c's. */
#include "exec/cuda/te_cuda_linear.h"
#include "exec/cuda/te_cuda_grouped.h"

#include "base/checked.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_lt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 256u

static size_t align_up(size_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

static bool is_gpu_float(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_BFLOAT16 || dt == TEEXEC_DTYPE_FLOAT16;
}

/* An operand that stays in high precision: nothing is stored for it. */
static void operand_off(tx_cuda_lin_operand *o, size_t rows, size_t cols, unsigned usage)
{
    memset(o, 0, sizeof *o);
    o->rows = rows;
    o->cols = cols;
    o->usage = usage;
    o->row_data = o->row_scales = o->col_data = o->col_scales = o->scalars = SIZE_MAX;
}

static teexec_status *operand_init(tx_cuda_linear *l, tx_cuda_lin_operand *o,
                                   const tx_cuda_operand_q *q, size_t rows, size_t cols,
                                   unsigned usage, int sm, const char *what)
{
    if (!q || !q->on || !usage) {
        operand_off(o, rows, cols, usage);
        return NULL;
    }
    teexec_status *st = tx_cuda_lin_operand_init(o, q, rows, cols, usage, sm);
    return st ? tx_status_prefix(st, "%s: %s", l->name, what) : NULL;
}

static size_t gemm_scratch(tx_lin_gemm kind, const tx_cuda_lin_operand *a, teexec_dtype adt,
                           const tx_cuda_lin_operand *b, teexec_dtype bdt)
{
    if (!a->q.on && !b->q.on) return 0;
    tx_cuda_lin_ref ra = {a, NULL, adt, NULL}, rb = {b, NULL, bdt, NULL};
    return tx_cuda_lin_gemm_scratch(kind, &ra, &rb);
}

teexec_status *tx_cuda_linear_init(tx_cuda_linear *l, const tx_cuda_te_desc *d)
{
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "op %s (Linear)", d->name ? d->name : "?");
    const tx_tensor *x = d->input, *w = d->n_params > 0 ? d->params[0] : NULL, *y = d->output;
    if (!x || !w || !y)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x, weight and y must be given", l->name);
    if (x->rank < 1 || w->rank != 2 || w->dims[1] != x->dims[x->rank - 1])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: weight must be [N, K] with K = the last dim of x", l->name);
    uint64_t t;
    if (!tx_dims_product(x->dims, (size_t)x->rank - 1, &t) || t > SIZE_MAX)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: x's size overflows", l->name);
    l->T = (size_t)t;
    l->N = (size_t)w->dims[0];
    l->K = (size_t)w->dims[1];
    size_t tn;
    if (!tx_mul_size(l->T, l->N, &tn) || y->numel != tn)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: y must be [..., N] with x's leading dims",
                        l->name);
    if (!l->T || !l->N || !l->K)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: an empty GEMM (T=%zu, N=%zu, K=%zu) has no CUDA kernel", l->name,
                        l->T, l->N, l->K);
    l->x_dt = x->dtype;
    l->w_dt = w->dtype;
    l->y_dt = y->dtype;
    if (!is_gpu_float(l->x_dt) || !is_gpu_float(l->w_dt) || !is_gpu_float(l->y_dt))
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: the GPU runs fp32, bf16 and fp16 Linears (x %s, weight %s, y %s); "
                        "fp64 is the CPU's gradient-check path",
                        l->name, teexec_dtype_name(l->x_dt), teexec_dtype_name(l->w_dt),
                        teexec_dtype_name(l->y_dt));
    l->training = d->training;
    l->needs = d->training ? d->needs : 0u;
    const tx_cuda_linear_quant *q = d->quant;
    bool need_dx = (l->needs & TX_TE_FOR_DX) != 0, need_dw = (l->needs & TX_TE_FOR_DPARAMS) != 0;
    unsigned ux = TX_QUSAGE_ROWWISE | (need_dw ? TX_QUSAGE_COLUMNWISE : 0u);
    unsigned uw = TX_QUSAGE_ROWWISE | (need_dx ? TX_QUSAGE_COLUMNWISE : 0u);
    unsigned udy = (need_dx ? TX_QUSAGE_ROWWISE : 0u) | (need_dw ? TX_QUSAGE_COLUMNWISE : 0u);
    TX_TRY(operand_init(l, &l->ox, q ? &q->x : NULL, l->T, l->K, ux, d->sm, "input x"));
    TX_TRY(operand_init(l, &l->ow, q ? &q->w : NULL, l->N, l->K, uw, d->sm, "weight"));
    TX_TRY(operand_init(l, &l->ody, q ? &q->dy : NULL, l->T, l->N, udy, d->sm, "grad_output"));
    /* the CUDA quantizers read fp32 or bf16 (dy has y's dtype) */
    const struct { bool on; teexec_dtype dt; const char *what; } src[3] = {
        {l->ox.q.on, l->x_dt, "x"}, {l->ow.q.on, l->w_dt, "the weight"},
        {l->ody.q.on, l->y_dt, "grad_output"}};
    for (int i = 0; i < 3; i++)
        if (src[i].on && src[i].dt == TEEXEC_DTYPE_FLOAT16)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "%s: %s is float16, and the GPU quantizers read float or bfloat16",
                            l->name, src[i].what);
    /* a GEMM without a quantized operand is one cuBLASLt call on the
     * tensors as they are: one dtype for both operands */
    if (!l->ox.q.on && !l->ow.q.on && l->x_dt != l->w_dt)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "%s: x (%s) and weight (%s) differ in dtype; the GPU GEMM needs one",
                        l->name, teexec_dtype_name(l->x_dt), teexec_dtype_name(l->w_dt));
    if (!l->ox.q.on && !l->ow.q.on && l->y_dt != l->x_dt &&
        !(l->y_dt == TEEXEC_DTYPE_FLOAT && l->x_dt != TEEXEC_DTYPE_FLOAT))
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: a %s GEMM cannot write %s", l->name,
                        teexec_dtype_name(l->x_dt), teexec_dtype_name(l->y_dt));
    size_t wb = align_up(l->ox.bytes);
    l->st_x = 0;
    l->st_w = wb;
    l->state_bytes = l->ow.bytes ? wb + align_up(l->ow.bytes) : wb;
    l->st_dy = SIZE_MAX;
    l->dy_region_bytes = 0;
    l->sc_dy = 0;
    l->sc_gemm = align_up(l->ody.bytes);
    if (l->ody.q.on && l->ody.q.handed_off) {
        /* its own region (tx_te_bwd_args.handoff_region), which the
         * executor keeps only for the backward steps that need it */
        l->st_dy = 0;
        l->dy_region_bytes = align_up(l->ody.bytes);
        l->sc_gemm = 0;
    }
    size_t g = gemm_scratch(TX_LIN_FPROP, &l->ox, l->x_dt, &l->ow, l->w_dt);
    if (need_dx) {
        size_t s = gemm_scratch(TX_LIN_DGRAD, &l->ody, l->y_dt, &l->ow, l->w_dt);
        if (s > g) g = s;
    }
    if (need_dw) {
        size_t s = gemm_scratch(TX_LIN_WGRAD, &l->ody, l->y_dt, &l->ox, l->x_dt);
        if (s > g) g = s;
    }
    l->gemm_scratch = g;
    if (!tx_add_size(l->sc_gemm, align_up(g), &l->scratch_bytes))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: scratch size overflows", l->name);
    return NULL;
}

size_t tx_cuda_linear_dy_region_bytes(const tx_cuda_linear *l) { return l->dy_region_bytes; }

bool tx_cuda_linear_quantized(const tx_cuda_linear *l)
{
    return l->ox.q.on || l->ow.q.on || l->ody.q.on;
}

static void *at(void *base, size_t off) { return base ? (char *)base + off : NULL; }

teexec_status *tx_cuda_linear_quantize_inputs(const tx_cuda_linear *l, const void *x,
                                              const void *w, void *state,
                                              const tx_cuda_env *env)
{
    if (l->ox.q.on && !l->ox.q.handed_off) {
        teexec_status *st = tx_cuda_lin_quantize(&l->ox, x, l->x_dt, at(state, l->st_x),
                                                 env->step, env->stream);
        if (st) return tx_status_prefix(st, "%s: quantizing x", l->name);
    }
    if (l->ow.q.on) {
        teexec_status *st = tx_cuda_lin_quantize(&l->ow, w, l->w_dt, at(state, l->st_w),
                                                 env->step, env->stream);
        if (st) return tx_status_prefix(st, "%s: quantizing the weight", l->name);
    }
    return NULL;
}

/* One high-precision GEMM in the row-major terms of linear_gemm.h: a, b as
 * there (FPROP x, w; DGRAD dy, w; WGRAD dy, x), mapped onto cuBLASLt's
 * column-major call as gemm_lt.h describes. */
static teexec_status *hp_gemm(const tx_cuda_linear *l, tx_lin_gemm kind, const void *a,
                              teexec_dtype adt, const void *b, teexec_dtype bdt, void *out,
                              teexec_dtype out_dt, const tx_cuda_lin_epi *epi,
                              const tx_cuda_env *env)
{
    if (adt != bdt)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: GEMM operands are %s and %s", l->name,
                        teexec_dtype_name(adt), teexec_dtype_name(bdt));
    tx_gemm_desc d;
    memset(&d, 0, sizeof d);
    const void *A, *B;
    switch (kind) {
    case TX_LIN_FPROP: /* y = x·wᵀ: "TN", A = w, B = x */
        d.m = (int64_t)l->N, d.n = (int64_t)l->T, d.k = (int64_t)l->K;
        d.transa = 1;
        A = b, B = a;
        break;
    case TX_LIN_DGRAD: /* dx = dy·w: "NN", A = w, B = dy */
        d.m = (int64_t)l->K, d.n = (int64_t)l->T, d.k = (int64_t)l->N;
        A = b, B = a;
        break;
    default: /* dw = dyᵀ·x: "NT", A = x, B = dy */
        d.m = (int64_t)l->K, d.n = (int64_t)l->N, d.k = (int64_t)l->T;
        d.transb = 1;
        A = b, B = a;
        break;
    }
    d.a_type = d.b_type = adt;
    d.d_type = out_dt;
    d.alpha = epi && epi->alpha != 0.0f ? epi->alpha : 1.0f;
    d.allow_tf32 = env->allow_tf32 && adt == TEEXEC_DTYPE_FLOAT;
    const void *C = NULL;
    if (epi && epi->residual) {
        d.beta = 1.0f;
        C = epi->residual;
    }
    if (epi && epi->bias) {
        d.bias = (void *)(uintptr_t)epi->bias;
        d.bias_type = epi->bias_dtype;
        d.epilogue = TX_GEMM_EPI_BIAS;
        if (epi->gelu_pre) {
            d.epilogue = TX_GEMM_EPI_GELU_AUX_BIAS;
            d.aux = epi->gelu_pre;
            d.aux_ld = d.m;
        }
    }
    if (kind == TX_LIN_DGRAD && epi && epi->dgelu_pre) {
        /* the GELU's input is [T, K] row-major like dx: aux_ld = K */
        d.epilogue = TX_GEMM_EPI_DGELU_BGRAD;
        d.aux = epi->dgelu_pre;
        d.aux_ld = d.m;
        d.bias = epi->dbias;
        d.bias_type = out_dt;
    }
    return tx_gemm_lt_run(env->gemm, &d, A, B, C, out, env->gemm_ws, env->stream);
}

teexec_status *tx_cuda_linear_fprop(const tx_cuda_linear *l, const void *x, const void *w,
                                    void *state, void *scratch, void *out, teexec_dtype out_dt,
                                    const tx_cuda_lin_epi *epi, const tx_cuda_env *env)
{
    teexec_status *st;
    if (!l->ox.q.on && !l->ow.q.on) {
        st = hp_gemm(l, TX_LIN_FPROP, x, l->x_dt, w, l->w_dt, out, out_dt, epi, env);
    } else {
        tx_cuda_lin_epi none;
        memset(&none, 0, sizeof none);
        tx_cuda_lin_ref a = {&l->ox, x, l->x_dt, at(state, l->st_x)};
        tx_cuda_lin_ref b = {&l->ow, w, l->w_dt, at(state, l->st_w)};
        st = tx_cuda_lin_gemm(TX_LIN_FPROP, &a, &b, l->T, l->N, l->K, out, out_dt,
                              epi ? epi : &none, at(scratch, l->sc_gemm), l->gemm_scratch, env);
    }
    return st ? tx_status_prefix(st, "%s: forward GEMM", l->name) : NULL;
}

teexec_status *tx_cuda_linear_backward(const tx_cuda_linear *l, const tx_cuda_linear_bwd *b,
                                       void *state, void *scratch, const tx_cuda_env *env)
{
    if (!b->dx && !b->dw) return NULL;
    if (!b->dy) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no grad_output", l->name);
    if ((b->dx && !(l->needs & TX_TE_FOR_DX)) || (b->dw && !(l->needs & TX_TE_FOR_DPARAMS)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: backward asked for a grad the node was not prepared for", l->name);
    tx_cuda_lin_epi epi;
    memset(&epi, 0, sizeof epi);
    epi.alpha = b->alpha;
    if (l->ody.q.on && l->ody.q.handed_off && !b->dy_region)
        return tx_error(TEEXEC_ERR_INTERNAL, "%s: its grad_output is handed off, and no region "
                        "for it was placed", l->name);
    void *dyq = l->ody.q.handed_off ? at(b->dy_region, l->st_dy) : at(scratch, l->sc_dy);
    if (l->ody.q.on && !l->ody.q.handed_off) {
        teexec_status *st = tx_cuda_lin_quantize(&l->ody, b->dy, b->dy_dt, dyq, env->step,
                                                 env->stream);
        if (st) return tx_status_prefix(st, "%s: quantizing grad_output", l->name);
    }
    if (b->dx) {
        teexec_status *st;
        if (!l->ow.q.on && !b->saved_w)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: dx needs the saved weight", l->name);
        if (b->dgelu_pre && (l->ody.q.on || l->ow.q.on || b->dx_add || !b->dbias))
            return tx_error(TEEXEC_ERR_INTERNAL,
                            "%s: the dGELU+dbias epilogue takes high-precision operands, a "
                            "dbias and no fork grad",
                            l->name);
        if (!l->ody.q.on && !l->ow.q.on) {
            tx_cuda_lin_epi e = epi;
            e.residual = b->dx_add; /* beta = 1: the fork's grad accumulates in the GEMM */
            e.dgelu_pre = (void *)(uintptr_t)b->dgelu_pre;
            e.dbias = b->dbias;
            st = hp_gemm(l, TX_LIN_DGRAD, b->dy, b->dy_dt, b->saved_w, l->w_dt, b->dx, b->dx_dt,
                         &e, env);
        } else {
            tx_cuda_lin_ref ra = {&l->ody, b->dy, b->dy_dt, dyq};
            tx_cuda_lin_ref rb = {&l->ow, b->saved_w, l->w_dt, at(state, l->st_w)};
            st = tx_cuda_lin_gemm(TX_LIN_DGRAD, &ra, &rb, l->T, l->N, l->K, b->dx, b->dx_dt, &epi,
                                  at(scratch, l->sc_gemm), l->gemm_scratch, env);
            /* the unfused path rounds the dgrad to dx's dtype before the
             * fork adds its grad, so the add stays a separate pass here */
            if (!st && b->dx_add)
                st = tx_cuda_add(b->dx, b->dx_dt, b->dx_add, b->dx_dt, b->dx, b->dx_dt,
                                 l->T * l->K, env->stream);
        }
        if (st) return tx_status_prefix(st, "%s: dgrad", l->name);
    }
    if (b->dw) {
        teexec_status *st;
        if (!l->ox.q.on && !b->saved_x)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: dweight needs the saved x", l->name);
        if (!l->ody.q.on && !l->ox.q.on) {
            st = hp_gemm(l, TX_LIN_WGRAD, b->dy, b->dy_dt, b->saved_x, l->x_dt, b->dw, b->dw_dt,
                         &epi, env);
        } else {
            tx_cuda_lin_ref ra = {&l->ody, b->dy, b->dy_dt, dyq};
            tx_cuda_lin_ref rb = {&l->ox, b->saved_x, l->x_dt, at(state, l->st_x)};
            st = tx_cuda_lin_gemm(TX_LIN_WGRAD, &ra, &rb, l->T, l->N, l->K, b->dw, b->dw_dt, &epi,
                                  at(scratch, l->sc_gemm), l->gemm_scratch, env);
        }
        if (st) return tx_status_prefix(st, "%s: wgrad", l->name);
    }
    return NULL;
}

/* ---- the unfused node ---------------------------------------------------- */

static teexec_status *check_t(const tx_cuda_linear *l, const char *what, const tx_tensor *t,
                              size_t numel, teexec_dtype dt)
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

static teexec_status *linear_prepare(const tx_cuda_te_desc *d, void **priv, size_t *state_bytes,
                                     size_t *scratch_bytes)
{
    *priv = NULL;
    *state_bytes = *scratch_bytes = 0;
    tx_cuda_linear *l = malloc(sizeof *l);
    if (!l) return tx_oom();
    teexec_status *st = tx_cuda_linear_init(l, d);
    if (st) {
        free(l);
        return st;
    }
    *priv = l;
    *state_bytes = l->state_bytes;
    *scratch_bytes = l->scratch_bytes;
    return NULL;
}

static teexec_status *linear_forward(void *priv, const tx_te_fwd_args *a, void *state,
                                     void *scratch, const tx_cuda_env *env)
{
    const tx_cuda_linear *l = priv;
    if (a->n_params < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no weight given", l->name);
    TX_TRY(check_t(l, "x", a->input, l->T * l->K, l->x_dt));
    TX_TRY(check_t(l, "weight", a->params[0], l->N * l->K, l->w_dt));
    TX_TRY(check_t(l, "y", a->output, l->T * l->N, l->y_dt));
    TX_TRY(tx_cuda_linear_quantize_inputs(l, a->input->data, a->params[0]->data, state, env));
    return tx_cuda_linear_fprop(l, a->input->data, a->params[0]->data, state, scratch,
                                a->output->data, a->output->dtype, NULL, env);
}

/* The backward args of a Linear (unfused, or the Linear inside a fused
 * backward) as tx_cuda_linear_bwd; grads checked against the layout. */
static teexec_status *linear_bwd_of(const tx_cuda_linear *l, const tx_te_bwd_args *a,
                                    tx_cuda_linear_bwd *b)
{
    memset(b, 0, sizeof *b);
    if (a->n_saved != 2)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: expected 2 saved tensors (x, weight), got %d", l->name, a->n_saved);
    tx_tensor *dx = a->grad_input, *dw = a->n_grad_params > 0 ? a->grad_params[0] : NULL;
    if (dx) TX_TRY(check_t(l, "dx", dx, l->T * l->K, dx->dtype));
    if (dw) TX_TRY(check_t(l, "dweight", dw, l->N * l->K, dw->dtype));
    if ((dx || dw) && !a->grad_output)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no grad_output", l->name);
    if (dx || dw) TX_TRY(check_t(l, "dy", a->grad_output, l->T * l->N, a->grad_output->dtype));
    const tx_tensor *sx = a->saved[0], *sw = a->saved[1];
    if (sx) TX_TRY(check_t(l, "saved x", sx, l->T * l->K, l->x_dt));
    if (sw) TX_TRY(check_t(l, "saved weight", sw, l->N * l->K, l->w_dt));
    b->dy = a->grad_output ? a->grad_output->data : NULL;
    b->dy_dt = a->grad_output ? a->grad_output->dtype : l->y_dt;
    b->saved_x = sx ? sx->data : NULL;
    b->saved_w = sw ? sw->data : NULL;
    b->dx = dx ? dx->data : NULL;
    b->dx_dt = dx ? dx->dtype : l->x_dt;
    b->dw = dw ? dw->data : NULL;
    b->dw_dt = dw ? dw->dtype : l->w_dt;
    b->dy_region = a->handoff_region;
    return NULL;
}

static teexec_status *linear_backward(void *priv, const tx_te_bwd_args *a, void *state,
                                      void *scratch, const tx_cuda_env *env)
{
    const tx_cuda_linear *l = priv;
    tx_cuda_linear_bwd b;
    TX_TRY(linear_bwd_of(l, a, &b));
    return tx_cuda_linear_backward(l, &b, state, scratch, env);
}

teexec_status *tx_cuda_linear_bwd_args(const tx_cuda_linear *l, const tx_te_bwd_args *a,
                                       tx_cuda_linear_bwd *b)
{
    return linear_bwd_of(l, a, b);
}

static void linear_free(void *priv) { free(priv); }

static const tx_cuda_te_impl linear_impl = {linear_prepare, linear_forward, linear_backward,
                                            linear_free};

const tx_cuda_te_impl *tx_cuda_te_linear_impl(tx_te_op_id op)
{
    if (op == TX_TE_LINEAR) return &linear_impl;
    if (op == TX_TE_GROUPED_LINEAR) return tx_cuda_te_grouped_impl(); /* te_cuda_grouped.c */
    return NULL;
}
