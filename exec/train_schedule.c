/* train_schedule.c - learning-rate schedule and clipping factor shared by the
 * CPU and CUDA trainers (train_schedule.h). */
#include "exec/train_schedule.h"

#include "base/status.h"

#include <math.h>

double tx_train_lr_at(const teexec_train_options *o, int64_t step)
{
    if (step < 0) step = 0;
    if (o->warmup_steps > 0 && step < o->warmup_steps)
        return o->lr * (double)(step + 1) / (double)o->warmup_steps;
    if (o->decay_steps > o->warmup_steps) {
        if (step >= o->decay_steps) return o->min_lr;
        /* nanoGPT's cosine: 1 at the end of the warmup, 0 at decay_steps */
        double frac = (double)(step - o->warmup_steps) / (double)(o->decay_steps - o->warmup_steps);
        double c = 0.5 * (1.0 + cos(M_PI * frac));
        return o->min_lr + c * (o->lr - o->min_lr);
    }
    return o->lr;
}

teexec_status *tx_train_schedule_check(const teexec_train_options *o)
{
    if (o->warmup_steps < 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "warmup_steps must be >= 0, got %lld",
                        (long long)o->warmup_steps);
    if (o->decay_steps < 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "decay_steps must be >= 0, got %lld",
                        (long long)o->decay_steps);
    if (o->decay_steps > 0 && o->decay_steps <= o->warmup_steps)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "decay_steps (%lld) must be past the warmup (%lld steps)",
                        (long long)o->decay_steps, (long long)o->warmup_steps);
    if (o->decay_steps > 0 && (!(o->min_lr >= 0.0) || !(o->min_lr <= o->lr)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "min_lr must be in [0, lr = %g], got %g",
                        o->lr, o->min_lr);
    if (o->decay_steps == 0 && o->min_lr != 0.0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "min_lr (%g) is the end of a decay: it needs decay_steps", o->min_lr);
    if (!(o->clip_grad_norm >= 0.0) || !isfinite(o->clip_grad_norm))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "clip_grad_norm must be finite and >= 0, got %g", o->clip_grad_norm);
    return NULL;
}

double tx_train_clip_coef(double max_norm, double norm)
{
    if (max_norm <= 0.0) return 1.0;
    if (!isfinite(norm)) return NAN;
    double c = max_norm / (norm + 1e-6);
    return c < 1.0 ? c : 1.0;
}
