/*
 * optim.c - SGD with momentum and AdamW with FP32 master weights (optim.h).
 */
#include "kernels/cpu/optim.h"

#include "base/dtype.h"
#include "base/shape.h"
#include "kernels/cpu/te_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tx_optim_config tx_optim_default(tx_optim_kind kind, double lr)
{
    tx_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.lr = lr;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = kind == TX_OPTIM_ADAMW ? 0.01 : 0.0;
    c.grad_scale = 1.0;
    return c;
}

teexec_status *tx_optim_config_check(const tx_optim_config *c)
{
    if (c->kind != TX_OPTIM_SGD && c->kind != TX_OPTIM_ADAMW)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "optimizer: unknown kind %d", (int)c->kind);
    if (!(c->lr >= 0.0) || !isfinite(c->lr))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "optimizer: lr must be >= 0, got %g", c->lr);
    if (!(c->weight_decay >= 0.0) || !isfinite(c->weight_decay))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "optimizer: weight decay must be >= 0, got %g", c->weight_decay);
    if (!isnan(c->grad_scale) && (!(c->grad_scale >= 0.0) || !isfinite(c->grad_scale)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "optimizer: the gradient scale must be finite and >= 0, got %g",
                        c->grad_scale);
    if (c->kind == TX_OPTIM_SGD) {
        if (!(c->momentum >= 0.0) || !(c->dampening >= 0.0 && c->dampening <= 1.0))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "optimizer: SGD momentum must be >= 0 and dampening in [0, 1]");
        if (c->nesterov && (c->momentum <= 0.0 || c->dampening != 0.0))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "optimizer: Nesterov momentum needs momentum > 0 and dampening 0");
    } else {
        if (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "optimizer: AdamW betas must be in [0, 1), got (%g, %g)", c->beta1,
                            c->beta2);
        if (!(c->eps >= 0.0))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "optimizer: eps must be >= 0, got %g", c->eps);
    }
    return NULL;
}

static bool is_low(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_FLOAT16 || dt == TEEXEC_DTYPE_BFLOAT16;
}

teexec_status *tx_optim_slot_init(tx_optim_slot *s, const tx_optim_config *c, const tx_tensor *param)
{
    memset(s, 0, sizeof *s);
    TX_TRY(tx_optim_config_check(c));
    if (!param || !param->data || !tx_dtype_is_real(param->dtype))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "optimizer: parameters must be float32, float16, bfloat16 or float64");
    teexec_dtype state = param->dtype == TEEXEC_DTYPE_DOUBLE ? TEEXEC_DTYPE_DOUBLE : TEEXEC_DTYPE_FLOAT;
    teexec_status *st = NULL;
    if (is_low(param->dtype)) {
        st = tx_tensor_alloc(&s->master, TEEXEC_DTYPE_FLOAT, param->rank, param->dims);
        if (!st) tx_te_convert_copy(&s->master, param);
    }
    bool need_m = c->kind == TX_OPTIM_ADAMW || c->momentum != 0.0;
    if (!st && need_m) st = tx_tensor_alloc(&s->m, state, param->rank, param->dims);
    if (!st && c->kind == TX_OPTIM_ADAMW) st = tx_tensor_alloc(&s->v, state, param->rank, param->dims);
    if (st) tx_optim_slot_release(s);
    return st;
}

void tx_optim_slot_release(tx_optim_slot *s)
{
    if (!s) return;
    tx_tensor_release(&s->master);
    tx_tensor_release(&s->m);
    tx_tensor_release(&s->v);
    s->step = 0;
}

teexec_status *tx_optim_step(tx_optim_slot *s, const tx_optim_config *c, tx_tensor *param,
                             const tx_tensor *grad)
{
    TX_TRY(tx_optim_config_check(c));
    if (!param || !param->data || !grad || !grad->data || !tx_dtype_is_real(grad->dtype) ||
        !tx_dtype_is_real(param->dtype))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "optimizer: parameter and gradient must be float tensors");
    tx_shape ps = tx_shape_of(param);
    if (!tx_tensor_has_shape(grad, &ps))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "optimizer: the gradient's shape differs from the parameter's");
    bool need_m = c->kind == TX_OPTIM_ADAMW || c->momentum != 0.0;
    if ((is_low(param->dtype) && !tx_tensor_has_shape(&s->master, &ps)) ||
        (need_m && !tx_tensor_has_shape(&s->m, &ps)) ||
        (c->kind == TX_OPTIM_ADAMW && !tx_tensor_has_shape(&s->v, &ps)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "optimizer: the slot was not initialised for this parameter and config");
    tx_tensor *w = is_low(param->dtype) ? &s->master : param;
    double *p = NULL, *g = NULL, *m = NULL, *v = NULL;
    teexec_status *st = tx_te_load_f64(w, &p);
    if (!st) st = tx_te_load_f64(grad, &g);
    if (!st && need_m) st = tx_te_load_f64(&s->m, &m);
    if (!st && c->kind == TX_OPTIM_ADAMW) st = tx_te_load_f64(&s->v, &v);
    if (st) goto done;
    s->step++;
    uint64_t n = param->numel;
    if (c->grad_scale != 1.0)
        for (uint64_t i = 0; i < n; i++) g[i] *= c->grad_scale;
    if (c->kind == TX_OPTIM_SGD) {
        for (uint64_t i = 0; i < n; i++) {
            double d = g[i] + c->weight_decay * p[i];
            if (m) {
                m[i] = s->step == 1 ? d : c->momentum * m[i] + (1.0 - c->dampening) * d;
                d = c->nesterov ? d + c->momentum * m[i] : m[i];
            }
            p[i] -= c->lr * d;
        }
    } else {
        double bc1 = 1.0 - pow(c->beta1, (double)s->step);
        double bc2 = 1.0 - pow(c->beta2, (double)s->step);
        double step_size = c->lr / bc1, sq_bc2 = sqrt(bc2);
        for (uint64_t i = 0; i < n; i++) {
            p[i] *= 1.0 - c->lr * c->weight_decay;
            m[i] = c->beta1 * m[i] + (1.0 - c->beta1) * g[i];
            v[i] = c->beta2 * v[i] + (1.0 - c->beta2) * g[i] * g[i];
            p[i] -= step_size * m[i] / (sqrt(v[i]) / sq_bc2 + c->eps);
        }
    }
    tx_te_store_f64(w, p);
    if (w != param) tx_te_convert_copy(param, w);
    if (m) tx_te_store_f64(&s->m, m);
    if (v) tx_te_store_f64(&s->v, v);
done:
    free(p);
    free(g);
    free(m);
    free(v);
    return st;
}
