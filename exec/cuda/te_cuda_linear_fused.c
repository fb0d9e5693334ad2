/* te_cuda_linear_fused.c - the planner's Linear fusions on the GPU
 * (te_cuda.h, tx_cuda_fused_linear_prepare): the Linear's GEMM with the
 * neighbouring ops folded into its epilogue.
 *
 *  FWD_LINEAR_BIAS_ACT   Linear, Bias[, GELU|ReLU]: bias in the epilogue;
 *                        GELU tanh as GELU_AUX_BIAS, whose aux output is
 *                        the Bias's output = the GELU's saved input. Where
 *                        cuBLASLt has no such algorithm (or for GELU erf /
 *                        ReLU) the bias stays in the epilogue and the
 *                        activation runs as its kernel on that tensor.
 *  FWD_LINEAR_BIAS_ADD   Linear[, Bias], AddExtraInput: beta = 1 with the
 *                        residual as C.
 *  FWD_LINEAR_SCALE_ADD  Linear, ConstantScale, AddExtraInput: alpha = s,
 *                        beta = 1 with the residual.
 *  BWD_LINEAR_ADD        MakeExtraOutput, Linear: the dgrad GEMM writes the
 *                        fork's grad, the extra output's grad as C.
 *  BWD_LINEAR_SCALE      Linear, ConstantScale: alpha = s in both grad GEMMs.
 *
 * What each leaves (the unfused backward's needs, te_cuda.h): the saved
 * lists of Bias, ConstantScale, AddExtraInput and MakeExtraOutput are empty
 * and the Linear saves only its inputs, so the forwards write the last op's
 * output and, with an activation, its input (the Bias's output tensor,
 * which must be the activation's input tensor); the Linear's state gets its
 * quantized operands exactly as the unfused forward's. Intermediate values
 * that nothing reads (the Linear's output, a Bias output feeding
 * AddExtraInput) and intermediate grads (the Linear's dy under
 * BWD_LINEAR_SCALE, its dx under BWD_LINEAR_ADD) are not written.
 *
 * The Linear's layout is re-derived from its desc by tx_cuda_linear_init,
 * so it is the one its unfused node has (same desc, same layout) and the
 * fused and unfused kernels share the node's state.
 *
 * When cuBLASLt or the recipe's GEMM turns an epilogue down at run time
 * (TEEXEC_ERR_UNSUPPORTED before anything is queued), the kernel runs that
 * op's own step after the GEMM from then on (bias / scale / add kernels),
 * with the same results up to rounding order.
 */
#include "exec/cuda/te_cuda_linear.h"

#include "kernels/cuda/act.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/scale_bias.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fused_priv {
    tx_fusion_id fusion;
    int n;                 /* ops covered */
    int lin;               /* index of the Linear among them */
    tx_te_op_id ops[3];    /* the covered ops, from their descs */
    tx_cuda_linear l;
    bool has_bias;
    bool has_act;
    tx_cuda_act act;
    bool gelu_epi;         /* try GELU_AUX_BIAS */
    bool epi_ok;           /* the bias / residual / alpha epilogue is usable */
    float alpha;           /* ConstantScale's s; 0: none */
    char name[128];
} fused_priv;

static teexec_status *unsup(const fused_priv *p, const char *why)
{
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s: %s", p->name, why);
}

static bool is_unsupported(teexec_status *st)
{
    return st && teexec_status_code(st) == TEEXEC_ERR_UNSUPPORTED;
}

static teexec_status *fwd_forward(void *priv, const tx_te_fwd_args *const *a,
                                  void *const *states, void *scratch, const tx_cuda_env *env);
static teexec_status *bwd_backward(void *priv, const tx_te_bwd_args *const *a,
                                   void *const *states, void *scratch, const tx_cuda_env *env);

static const tx_cuda_fused_impl fwd_impl = {fwd_forward, NULL, free};
static const tx_cuda_fused_impl bwd_impl = {NULL, bwd_backward, free};

static bool ops_are(const tx_cuda_te_desc *const *d, int n, const tx_te_op_id *want, int nw)
{
    if (n != nw) return false;
    for (int i = 0; i < n; i++)
        if (!d[i] || d[i]->op != want[i]) return false;
    return true;
}

static teexec_status *same_dtype(const fused_priv *p, const char *what, teexec_dtype dt)
{
    if (dt == p->l.y_dt) return NULL;
    char why[160];
    snprintf(why, sizeof why, "%s is %s but the Linear writes %s; the fused epilogue needs one "
             "dtype", what, teexec_dtype_name(dt), teexec_dtype_name(p->l.y_dt));
    return unsup(p, why);
}

/* Fills p for a forward fusion, or refuses. */
static teexec_status *prepare_fwd(fused_priv *p, const tx_cuda_te_desc *const *d, int n)
{
    static const tx_te_op_id lb[] = {TX_TE_LINEAR, TX_TE_BIAS};
    static const tx_te_op_id la[] = {TX_TE_LINEAR, TX_TE_ADD_EXTRA_INPUT};
    static const tx_te_op_id lba[] = {TX_TE_LINEAR, TX_TE_BIAS, TX_TE_ADD_EXTRA_INPUT};
    static const tx_te_op_id lsa[] = {TX_TE_LINEAR, TX_TE_CONSTANT_SCALE, TX_TE_ADD_EXTRA_INPUT};
    switch (p->fusion) {
    case TX_FUSION_FWD_LINEAR_BIAS_ACT:
        if (!(n == 2 && ops_are(d, n, lb, 2)) &&
            !(n == 3 && ops_are(d, 2, lb, 2) && d[2] &&
              (d[2]->op == TX_TE_GELU || d[2]->op == TX_TE_RELU)))
            return unsup(p, "pattern is Linear, Bias[, GELU|ReLU]");
        break;
    case TX_FUSION_FWD_LINEAR_BIAS_ADD:
        if (!ops_are(d, n, la, 2) && !ops_are(d, n, lba, 3))
            return unsup(p, "pattern is Linear[, Bias], AddExtraInput");
        break;
    default:
        if (!ops_are(d, n, lsa, 3)) return unsup(p, "pattern is Linear, ConstantScale, AddExtraInput");
        break;
    }
    TX_TRY(tx_cuda_linear_init(&p->l, d[0]));
    p->lin = 0;
    p->has_bias = d[1]->op == TX_TE_BIAS;
    if (p->has_bias) {
        if (d[1]->n_params < 1 || !d[1]->params[0] || d[1]->params[0]->numel != p->l.N)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: the Bias needs a [N] bias", p->name);
        TX_TRY(same_dtype(p, "the bias", d[1]->params[0]->dtype));
        TX_TRY(same_dtype(p, "the Bias's output", d[1]->output->dtype));
    }
    if (p->fusion == TX_FUSION_FWD_LINEAR_BIAS_ACT && n == 3) {
        p->has_act = true;
        TX_TRY(same_dtype(p, "the activation's output", d[2]->output->dtype));
        if (d[2]->op == TX_TE_RELU) {
            p->act = TX_CUDA_ACT_RELU;
        } else {
            bool tanh = !d[2]->attrs || d[2]->attrs[TX_TE_A_GELU_APPROX].i == TX_TE_GELU_TANH;
            p->act = tanh ? TX_CUDA_ACT_GELU_TANH : TX_CUDA_ACT_GELU_ERF;
            /* cuBLASLt's GELU epilogue is the tanh form; its aux output
             * wants a leading dimension that is a multiple of 8 */
            p->gelu_epi = tanh && p->l.N % 8 == 0;
        }
    }
    if (d[n - 1]->op == TX_TE_ADD_EXTRA_INPUT) {
        const tx_tensor *e = d[n - 1]->n_extra_inputs > 0 && d[n - 1]->extra_inputs
                                 ? d[n - 1]->extra_inputs[0] : NULL;
        if (!e || e->numel != p->l.T * p->l.N)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: AddExtraInput's extra must have the Linear output's shape",
                            p->name);
        TX_TRY(same_dtype(p, "the residual", e->dtype));
        TX_TRY(same_dtype(p, "AddExtraInput's output", d[n - 1]->output->dtype));
        if (p->fusion == TX_FUSION_FWD_LINEAR_BIAS_ADD && p->has_bias)
            TX_TRY(same_dtype(p, "the Bias's output", d[1]->output->dtype));
    }
    if (p->fusion == TX_FUSION_FWD_LINEAR_SCALE_ADD) {
        double s = d[1]->attrs ? d[1]->attrs[TX_TE_A_SCALE].f : 0.0;
        if (s == 0.0 || (float)s == 0.0f)
            return unsup(p, "a scale of 0 is no GEMM alpha (the epilogue reads 0 as 1)");
        p->alpha = (float)s;
        TX_TRY(same_dtype(p, "ConstantScale's output", d[1]->output->dtype));
    }
    return NULL;
}

static teexec_status *prepare_bwd(fused_priv *p, const tx_cuda_te_desc *const *d, int n)
{
    static const tx_te_op_id ml[] = {TX_TE_MAKE_EXTRA_OUTPUT, TX_TE_LINEAR};
    static const tx_te_op_id ls[] = {TX_TE_LINEAR, TX_TE_CONSTANT_SCALE};
    if (p->fusion == TX_FUSION_BWD_LINEAR_ADD) {
        if (!ops_are(d, n, ml, 2)) return unsup(p, "pattern is MakeExtraOutput, Linear");
        p->lin = 1;
        TX_TRY(tx_cuda_linear_init(&p->l, d[1]));
        if (d[0]->input && d[0]->input->dtype != p->l.x_dt)
            return unsup(p, "the fork's dtype differs from the Linear's input");
        return NULL;
    }
    if (!ops_are(d, n, ls, 2)) return unsup(p, "pattern is Linear, ConstantScale");
    p->lin = 0;
    TX_TRY(tx_cuda_linear_init(&p->l, d[0]));
    double s = d[1]->attrs ? d[1]->attrs[TX_TE_A_SCALE].f : 0.0;
    if (s == 0.0 || (float)s == 0.0f)
        return unsup(p, "a scale of 0 is no GEMM alpha (the epilogue reads 0 as 1)");
    p->alpha = (float)s;
    if (p->l.ody.q.on)
        return unsup(p, "the Linear's grad_output quantizer must see s·dy, which only the "
                        "unfused ConstantScale writes (quantizing dy and scaling the product "
                        "would change the scale and the recorded amax)");
    return NULL;
}

teexec_status *tx_cuda_fused_linear_prepare(tx_fusion_id fusion, bool backward,
                                            const tx_cuda_te_desc *const *descs,
                                            tx_cuda_te_node *const *nodes, int n,
                                            const tx_cuda_fused_impl **impl, void **priv,
                                            size_t *scratch_bytes)
{
    (void)nodes; /* the Linear's layout comes from its desc (see the top) */
    *impl = NULL;
    *priv = NULL;
    *scratch_bytes = 0;
    bool fwd;
    switch (fusion) {
    case TX_FUSION_FWD_LINEAR_BIAS_ACT:
    case TX_FUSION_FWD_LINEAR_BIAS_ADD:
    case TX_FUSION_FWD_LINEAR_SCALE_ADD: fwd = true; break;
    case TX_FUSION_BWD_LINEAR_ADD:
    case TX_FUSION_BWD_LINEAR_SCALE: fwd = false; break;
    default: return NULL; /* not a Linear fusion */
    }
    const tx_fusion_info *info = tx_fusion_info_of(fusion);
    fused_priv *p = calloc(1, sizeof *p);
    if (!p) return tx_oom();
    p->fusion = fusion;
    p->n = n;
    p->epi_ok = true;
    const char *first = n > 0 && descs && descs[0] && descs[0]->name ? descs[0]->name : "?";
    snprintf(p->name, sizeof p->name, "%s at op %s", info ? info->name : "Linear fusion", first);
    teexec_status *st = NULL;
    if (!descs || n < 2)
        st = unsup(p, "a Linear fusion covers at least two ops");
    else if (fwd == backward)
        st = unsup(p, fwd ? "a forward-only fusion has no backward kernel"
                          : "a backward-only fusion has no forward kernel");
    else
        st = fwd ? prepare_fwd(p, descs, n) : prepare_bwd(p, descs, n);
    if (st) {
        free(p);
        return st;
    }
    for (int i = 0; i < n; i++) p->ops[i] = descs[i]->op;
    *impl = fwd ? &fwd_impl : &bwd_impl;
    *priv = p;
    *scratch_bytes = p->l.scratch_bytes;
    return NULL;
}

/* ---- forward ---------------------------------------------------------------- */

static teexec_status *need_t(const fused_priv *p, const char *what, const tx_tensor *t,
                             size_t numel)
{
    if (t && t->data && t->numel == numel) return NULL;
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s is missing or has %llu elements, not %zu",
                    p->name, what, t ? (unsigned long long)t->numel : 0ull, numel);
}

/* The ops one by one after a plain GEMM (an epilogue was turned down):
 * the Linear's output, then the Bias / ConstantScale / AddExtraInput
 * steps on their own tensors. */
static teexec_status *fwd_plain(fused_priv *p, const tx_te_fwd_args *const *a, void *state,
                                void *scratch, const tx_cuda_env *env)
{
    const tx_cuda_linear *l = &p->l;
    size_t n = l->T * l->N;
    tx_tensor *y = a[0]->output;
    TX_TRY(need_t(p, "the Linear's output", y, n));
    TX_TRY(tx_cuda_linear_fprop(l, a[0]->input->data, a[0]->params[0]->data, state, scratch,
                                y->data, y->dtype, NULL, env));
    const tx_tensor *cur = y;
    for (int i = 1; i < p->n; i++) {
        tx_tensor *o = a[i]->output;
        TX_TRY(need_t(p, "an op's output", o, n));
        switch (p->ops[i]) {
        case TX_TE_BIAS:
            TX_TRY(tx_cuda_bias_add(cur->data, cur->dtype, a[i]->params[0]->data,
                                    a[i]->params[0]->dtype, o->data, o->dtype, l->T, l->N,
                                    env->stream));
            break;
        case TX_TE_CONSTANT_SCALE:
            TX_TRY(tx_cuda_scale(cur->data, cur->dtype, p->alpha, o->data, o->dtype, n,
                                 env->stream));
            break;
        case TX_TE_ADD_EXTRA_INPUT:
            TX_TRY(tx_cuda_add(cur->data, cur->dtype, a[i]->extra_inputs[0]->data,
                               a[i]->extra_inputs[0]->dtype, o->data, o->dtype, n, env->stream));
            break;
        default: { /* the activation */
            tx_cuda_act_args aa = {.act = p->act, .rows = l->T, .cols = l->N, .x = cur->data,
                                   .x_dtype = cur->dtype, .y = o->data, .y_dtype = o->dtype};
            TX_TRY(tx_cuda_act_forward(&aa, env->stream));
            break;
        }
        }
        cur = o;
    }
    return NULL;
}

static teexec_status *fwd_forward(void *priv, const tx_te_fwd_args *const *a,
                                  void *const *states, void *scratch, const tx_cuda_env *env)
{
    fused_priv *p = priv;
    const tx_cuda_linear *l = &p->l;
    size_t n = l->T * l->N;
    for (int i = 0; i < p->n; i++)
        if (!a[i]) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: op %d has no args", p->name, i);
    if (a[0]->n_params < 1) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no weight", p->name);
    TX_TRY(need_t(p, "x", a[0]->input, l->T * l->K));
    TX_TRY(need_t(p, "the weight", a[0]->params[0], l->N * l->K));
    if (p->has_bias) TX_TRY(need_t(p, "the bias", a[1]->params[0], l->N));
    const tx_te_fwd_args *last = a[p->n - 1];
    bool add = p->fusion != TX_FUSION_FWD_LINEAR_BIAS_ACT;
    if (add)
        TX_TRY(need_t(p, "the residual",
                      last->n_extra_inputs > 0 && last->extra_inputs ? last->extra_inputs[0] : NULL,
                      n));
    void *state = states ? states[0] : NULL;
    const void *x = a[0]->input->data, *w = a[0]->params[0]->data;
    TX_TRY(tx_cuda_linear_quantize_inputs(l, x, w, state, env));
    if (!p->epi_ok) return fwd_plain(p, a, state, scratch, env);

    tx_cuda_lin_epi epi;
    memset(&epi, 0, sizeof epi);
    if (p->has_bias) {
        epi.bias = a[1]->params[0]->data;
        epi.bias_dtype = a[1]->params[0]->dtype;
    }
    tx_tensor *out = a[p->n - 1]->output;
    TX_TRY(need_t(p, "the output", out, n));
    teexec_status *st;
    if (p->fusion == TX_FUSION_FWD_LINEAR_BIAS_ACT) {
        tx_tensor *pre = a[1]->output; /* the Bias's output: the activation's saved x */
        TX_TRY(need_t(p, "the Bias's output", pre, n));
        if (p->has_act && (!a[2]->input || a[2]->input->data != pre->data))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: the Bias's output and the activation's input must be one tensor",
                            p->name);
        if (p->gelu_epi) {
            tx_cuda_lin_epi e = epi;
            e.gelu_pre = pre->data;
            st = tx_cuda_linear_fprop(l, x, w, state, scratch, out->data, out->dtype, &e, env);
            if (!is_unsupported(st)) return st;
            teexec_status_destroy(st);
            p->gelu_epi = false; /* no such algorithm here: bias epilogue + kernel */
        }
        st = tx_cuda_linear_fprop(l, x, w, state, scratch, pre->data, pre->dtype, &epi, env);
        if (is_unsupported(st)) {
            teexec_status_destroy(st);
            p->epi_ok = false;
            return fwd_plain(p, a, state, scratch, env);
        }
        if (st || !p->has_act) return st;
        tx_cuda_act_args aa = {.act = p->act, .rows = l->T, .cols = l->N, .x = pre->data,
                               .x_dtype = pre->dtype, .y = out->data, .y_dtype = out->dtype};
        return tx_cuda_act_forward(&aa, env->stream);
    }
    /* BIAS_ADD / SCALE_ADD: out = alpha·x·wᵀ (+ bias) + residual */
    epi.residual = last->extra_inputs[0]->data;
    epi.alpha = p->alpha;
    st = tx_cuda_linear_fprop(l, x, w, state, scratch, out->data, out->dtype, &epi, env);
    if (is_unsupported(st)) {
        teexec_status_destroy(st);
        p->epi_ok = false;
        return fwd_plain(p, a, state, scratch, env);
    }
    return st;
}

/* ---- backward --------------------------------------------------------------- */

static teexec_status *bwd_backward(void *priv, const tx_te_bwd_args *const *a,
                                   void *const *states, void *scratch, const tx_cuda_env *env)
{
    fused_priv *p = priv;
    const tx_cuda_linear *l = &p->l;
    for (int i = 0; i < p->n; i++)
        if (!a[i]) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: op %d has no args", p->name, i);
    const tx_te_bwd_args *al = a[p->lin];
    void *state = states ? states[p->lin] : NULL;
    tx_cuda_linear_bwd b;
    if (p->fusion == TX_FUSION_BWD_LINEAR_ADD) {
        /* the Linear's dgrad goes straight into the fork's grad, with the
         * extra output's grad added (beta = 1) */
        const tx_te_bwd_args *am = a[0];
        tx_te_bwd_args lin = *al;
        lin.grad_input = NULL;
        TX_TRY(tx_cuda_linear_bwd_args(l, &lin, &b));
        tx_tensor *dx = am->grad_input;
        const tx_tensor *de = am->n_grad_extra_outputs > 0 && am->grad_extra_outputs
                                  ? am->grad_extra_outputs[0] : NULL;
        if (dx) {
            TX_TRY(need_t(p, "the fork's grad", dx, l->T * l->K));
            if (de) TX_TRY(need_t(p, "the extra output's grad", de, l->T * l->K));
            if (de && de->dtype != dx->dtype)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "%s: the extra output's grad (%s) and the fork's grad (%s) differ "
                                "in dtype", p->name, teexec_dtype_name(de->dtype),
                                teexec_dtype_name(dx->dtype));
            if (!b.dy) {
                TX_TRY(need_t(p, "dy", al->grad_output, l->T * l->N));
                b.dy = al->grad_output->data;
                b.dy_dt = al->grad_output->dtype;
            }
            if (!b.saved_w && !l->ow.q.on)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: no saved weight", p->name);
            b.dx = dx->data;
            b.dx_dt = dx->dtype;
            b.dx_add = de ? de->data : NULL;
        }
        return tx_cuda_linear_backward(l, &b, state, scratch, env);
    }
    /* BWD_LINEAR_SCALE: the Linear's grads from ConstantScale's incoming
     * dy with alpha = s (its s·dy is never formed) */
    const tx_te_bwd_args *as = a[1];
    TX_TRY(need_t(p, "ConstantScale's dy", as->grad_output, l->T * l->N));
    tx_te_bwd_args lin = *al;
    lin.grad_output = as->grad_output;
    TX_TRY(tx_cuda_linear_bwd_args(l, &lin, &b));
    b.alpha = p->alpha;
    return tx_cuda_linear_backward(l, &b, state, scratch, env);
}
