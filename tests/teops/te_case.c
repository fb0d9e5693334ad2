/*
 * te_case.c - the TE op test harness (te_case.h).
 */
#include "te_case.h"

#include "base/half.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t next_rand(uint64_t *s)
{
    /* splitmix64: deterministic, good enough for test data */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tc_get(const tx_tensor *t, uint64_t i)
{
    switch (t->dtype) {
    case TEEXEC_DTYPE_DOUBLE: return ((const double *)t->data)[i];
    case TEEXEC_DTYPE_FLOAT: return ((const float *)t->data)[i];
    case TEEXEC_DTYPE_FLOAT16: return tx_f16_to_f32(((const uint16_t *)t->data)[i]);
    case TEEXEC_DTYPE_BFLOAT16: return tx_bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: fail_msg("tc_get: not a float tensor"); return 0;
    }
}

void tc_set(tx_tensor *t, uint64_t i, double v)
{
    switch (t->dtype) {
    case TEEXEC_DTYPE_DOUBLE: ((double *)t->data)[i] = v; break;
    case TEEXEC_DTYPE_FLOAT: ((float *)t->data)[i] = (float)v; break;
    case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)t->data)[i] = tx_f32_to_f16((float)v); break;
    case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)t->data)[i] = tx_f32_to_bf16((float)v); break;
    default: fail_msg("tc_set: not a float tensor");
    }
}

void tc_fill(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims, uint64_t seed,
             double lo, double hi)
{
    tx_tensor_release(t);
    assert_null(tx_tensor_alloc(t, dt, rank, dims));
    uint64_t s = seed;
    for (uint64_t i = 0; i < t->numel; i++) {
        double u = (double)(next_rand(&s) >> 11) / 9007199254740992.0;
        tc_set(t, i, lo + (hi - lo) * u);
    }
}

void tc_init(te_case *c, tx_te_op_id op)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->s = tx_te_schema(op);
    assert_non_null(c->s);
    tx_te_attr_defaults(c->s, c->attrs);
    c->training = true;
}

static void free_outputs(te_case *c)
{
    tx_tensor_release(&c->out);
    for (int i = 0; i < TX_TE_MAX_EXTRA; i++) {
        tx_tensor_release(&c->xo[i]);
        tx_tensor_release(&c->aux[i]);
    }
}

void tc_free(te_case *c)
{
    free_outputs(c);
    tx_tensor_release(&c->in);
    for (int i = 0; i < TX_TE_MAX_EXTRA; i++) {
        tx_tensor_release(&c->ex[i]);
        free(c->wx[i]);
    }
    for (int i = 0; i < TC_MAX_PARAMS; i++) tx_tensor_release(&c->par[i]);
    free(c->wy);
    memset(c, 0, sizeof *c);
}

static tx_te_tinfo info_of(const tx_tensor *t)
{
    tx_te_tinfo i = {t->dtype, tx_shape_of(t)};
    return i;
}

teexec_status *tc_forward(te_case *c)
{
    free_outputs(c);
    const tx_te_op_schema *s = c->s;
    tx_te_tinfo in = info_of(&c->in), ex[TX_TE_MAX_EXTRA], par[TC_MAX_PARAMS];
    const tx_te_tinfo *exp[TX_TE_MAX_EXTRA] = {0}, *parp[TC_MAX_PARAMS] = {0};
    for (int i = 0; i < s->n_extra_inputs; i++)
        if (c->ex_present[i]) {
            ex[i] = info_of(&c->ex[i]);
            exp[i] = &ex[i];
        }
    for (int i = 0; i < c->n_par; i++) {
        par[i] = info_of(&c->par[i]);
        parp[i] = &par[i];
    }
    tx_te_infer_in ii = {c->attrs, &in, exp, s->n_extra_inputs, parp, c->n_par};
    tx_te_infer_out io;
    TX_TRY(tx_te_infer(s, &ii, &io));
    assert_null(tx_tensor_alloc(&c->out, io.output.dtype, io.output.shape.rank, io.output.shape.dims));
    for (int i = 0; i < s->n_extra_outputs; i++)
        assert_null(tx_tensor_alloc(&c->xo[i], io.extra_outputs[i].dtype,
                                    io.extra_outputs[i].shape.rank, io.extra_outputs[i].shape.dims));
    for (int i = 0; i < s->n_aux; i++)
        assert_null(tx_tensor_alloc(&c->aux[i], io.aux[i].dtype, io.aux[i].shape.rank,
                                    io.aux[i].shape.dims));
    const tx_tensor *exv[TX_TE_MAX_EXTRA] = {0}, *parv[TC_MAX_PARAMS] = {0};
    tx_tensor *xov[TX_TE_MAX_EXTRA] = {0}, *auxv[TX_TE_MAX_EXTRA] = {0};
    for (int i = 0; i < s->n_extra_inputs; i++) exv[i] = c->ex_present[i] ? &c->ex[i] : NULL;
    for (int i = 0; i < c->n_par; i++) parv[i] = &c->par[i];
    for (int i = 0; i < s->n_extra_outputs; i++) xov[i] = &c->xo[i];
    for (int i = 0; i < s->n_aux; i++) auxv[i] = &c->aux[i];
    tx_te_fwd_args a = {c->op, c->attrs, &c->in, exv, s->n_extra_inputs, parv, c->n_par,
                        &c->out, xov, s->n_extra_outputs, auxv, s->n_aux, c->training,
                        c->rng_offset};
    return tx_te_cpu_forward(&a);
}

static void make_weights(te_case *c)
{
    if (!c->wy) {
        uint64_t s = 0xC0FFEEull + (uint64_t)c->op;
        c->wy = malloc((size_t)(c->out.numel ? c->out.numel : 1) * sizeof(double));
        assert_non_null(c->wy);
        for (uint64_t i = 0; i < c->out.numel; i++)
            c->wy[i] = (double)(next_rand(&s) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        for (int j = 0; j < c->s->n_extra_outputs; j++) {
            c->wx[j] = malloc((size_t)(c->xo[j].numel ? c->xo[j].numel : 1) * sizeof(double));
            assert_non_null(c->wx[j]);
            for (uint64_t i = 0; i < c->xo[j].numel; i++)
                c->wx[j][i] = (double)(next_rand(&s) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        }
    }
}

double tc_loss(te_case *c)
{
    teexec_status *st = tc_forward(c);
    if (st) fail_msg("forward failed: %s", teexec_status_message(st));
    make_weights(c);
    double l = 0.0;
    for (uint64_t i = 0; i < c->out.numel; i++) l += c->wy[i] * tc_get(&c->out, i);
    for (int j = 0; j < c->s->n_extra_outputs; j++)
        for (uint64_t i = 0; i < c->xo[j].numel; i++) l += c->wx[j][i] * tc_get(&c->xo[j], i);
    return l;
}

static void weights_tensor(tx_tensor *t, const tx_tensor *like, const double *w)
{
    tx_shape s = tx_shape_of(like);
    assert_null(tx_tensor_alloc(t, like->dtype, s.rank, s.dims));
    for (uint64_t i = 0; i < t->numel; i++) tc_set(t, i, w[i]);
}

static bool takes_grad(const tx_te_port *p, const tx_tensor *t)
{
    return !(p->flags & TX_TE_PORT_NO_GRAD) && tx_dtype_is_real(t->dtype);
}

/* Compares an analytic gradient with central differences of the loss. */
static void check_one(te_case *c, tx_tensor *src, const tx_tensor *grad, double tol, const char *what)
{
    const double h = 1e-6;
    double num = 0.0, den = 0.0;
    uint64_t worst = 0;
    double worst_err = -1.0;
    for (uint64_t i = 0; i < src->numel; i++) {
        double v = tc_get(src, i);
        tc_set(src, i, v + h);
        double lp = tc_loss(c);
        tc_set(src, i, v - h);
        double lm = tc_loss(c);
        tc_set(src, i, v);
        double fd = (lp - lm) / (2 * h), an = tc_get(grad, i);
        num += (an - fd) * (an - fd);
        den += fd * fd;
        if (fabs(an - fd) > worst_err) {
            worst_err = fabs(an - fd);
            worst = i;
        }
    }
    double rel = sqrt(num) / fmax(sqrt(den), 1e-3);
    if (getenv("TC_VERBOSE"))
        fprintf(stderr, "%-20s %-12s |fd| %.3e  rel err %.3e\n", c->s->name, what, sqrt(den), rel);
    if (!(rel <= tol))
        fail_msg("%s: gradient of %s: relative error %.3g > %.3g (worst element %llu, |diff| %.3g)",
                 c->s->name, what, rel, tol, (unsigned long long)worst, worst_err);
}

void tc_gradcheck(te_case *c, double tol)
{
    const tx_te_op_schema *s = c->s;
    (void)tc_loss(c); /* forward + weights */
    const tx_tensor *exv[TX_TE_MAX_EXTRA] = {0}, *parv[TC_MAX_PARAMS] = {0};
    for (int i = 0; i < s->n_extra_inputs; i++) exv[i] = c->ex_present[i] ? &c->ex[i] : NULL;
    for (int i = 0; i < c->n_par; i++) parv[i] = &c->par[i];
    tx_tensor *xov[TX_TE_MAX_EXTRA] = {0}, *auxv[TX_TE_MAX_EXTRA] = {0};
    for (int i = 0; i < s->n_extra_outputs; i++) xov[i] = &c->xo[i];
    for (int i = 0; i < s->n_aux; i++) auxv[i] = &c->aux[i];
    tx_te_fwd_args fa = {c->op, c->attrs, &c->in, exv, s->n_extra_inputs, parv, c->n_par,
                         &c->out, xov, s->n_extra_outputs, auxv, s->n_aux, c->training,
                         c->rng_offset};
    const tx_tensor *saved[TX_TE_SAVED_CAP(TC_MAX_PARAMS)];
    int n_saved = 0;
    assert_null(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(TC_MAX_PARAMS),
                                    &n_saved));

    tx_tensor dy = {0}, dxo[TX_TE_MAX_EXTRA] = {{0}}, dx = {0}, dpar[TC_MAX_PARAMS] = {{0}},
              dex[TX_TE_MAX_EXTRA] = {{0}};
    weights_tensor(&dy, &c->out, c->wy);
    const tx_tensor *dxov[TX_TE_MAX_EXTRA] = {0};
    for (int j = 0; j < s->n_extra_outputs; j++) {
        weights_tensor(&dxo[j], &c->xo[j], c->wx[j]);
        dxov[j] = &dxo[j];
    }
    bool want_dx = takes_grad(&s->input, &c->in);
    if (want_dx) {
        tx_shape sh = tx_shape_of(&c->in);
        assert_null(tx_tensor_alloc(&dx, c->in.dtype, sh.rank, sh.dims));
    }
    tx_tensor *dparv[TC_MAX_PARAMS] = {0}, *dexv[TX_TE_MAX_EXTRA] = {0};
    for (int i = 0; i < c->n_par; i++) {
        tx_shape sh = tx_shape_of(&c->par[i]);
        assert_null(tx_tensor_alloc(&dpar[i], c->par[i].dtype, sh.rank, sh.dims));
        dparv[i] = &dpar[i];
    }
    for (int i = 0; i < s->n_extra_inputs; i++)
        if (c->ex_present[i] && takes_grad(&s->extra_inputs[i], &c->ex[i])) {
            tx_shape sh = tx_shape_of(&c->ex[i]);
            assert_null(tx_tensor_alloc(&dex[i], c->ex[i].dtype, sh.rank, sh.dims));
            dexv[i] = &dex[i];
        }
    tx_te_bwd_args ba = {c->op, c->attrs, &dy, dxov, s->n_extra_outputs, saved, n_saved,
                         want_dx ? &dx : NULL, dparv, c->n_par, dexv, s->n_extra_inputs, NULL};
    teexec_status *st = tx_te_cpu_backward(&ba);
    if (st) fail_msg("%s backward failed: %s", s->name, teexec_status_message(st));

    /* The saved pointers refer to c's tensors, which tc_loss rewrites: the
     * backward has already run, so that is fine from here on. */
    if (want_dx) check_one(c, &c->in, &dx, tol, s->input.name);
    for (int i = 0; i < c->n_par; i++) {
        char what[64];
        snprintf(what, sizeof what, "parameter %d", i);
        check_one(c, &c->par[i], &dpar[i], tol, what);
    }
    for (int i = 0; i < s->n_extra_inputs; i++)
        if (dexv[i]) check_one(c, &c->ex[i], &dex[i], tol, s->extra_inputs[i].name);

    tx_tensor_release(&dy);
    tx_tensor_release(&dx);
    for (int j = 0; j < TX_TE_MAX_EXTRA; j++) {
        tx_tensor_release(&dxo[j]);
        tx_tensor_release(&dex[j]);
    }
    for (int i = 0; i < TC_MAX_PARAMS; i++) tx_tensor_release(&dpar[i]);
}

static void clone_as(const tx_tensor *src, tx_tensor *dst, teexec_dtype dt)
{
    if (!src->data) return;
    if (!tx_dtype_is_real(src->dtype)) {
        assert_null(tx_tensor_clone(src, dst));
        return;
    }
    tx_shape s = tx_shape_of(src);
    assert_null(tx_tensor_alloc(dst, dt, s.rank, s.dims));
    for (uint64_t i = 0; i < src->numel; i++) tc_set(dst, i, tc_get(src, i));
}

void tc_clone_as(const te_case *c, te_case *dst, teexec_dtype dt)
{
    tc_init(dst, c->op);
    memcpy(dst->attrs, c->attrs, sizeof c->attrs);
    memcpy(dst->ints, c->ints, sizeof c->ints);
    for (int i = 0; i < TX_TE_MAX_ATTRS; i++)
        if (c->attrs[i].ints == c->ints) dst->attrs[i].ints = dst->ints;
    dst->training = c->training;
    dst->rng_offset = c->rng_offset;
    clone_as(&c->in, &dst->in, dt);
    for (int i = 0; i < TX_TE_MAX_EXTRA; i++) {
        dst->ex_present[i] = c->ex_present[i];
        if (c->ex_present[i]) clone_as(&c->ex[i], &dst->ex[i], dt);
    }
    dst->n_par = c->n_par;
    for (int i = 0; i < c->n_par; i++) clone_as(&c->par[i], &dst->par[i], dt);
}

static void round_to(tx_tensor *t, teexec_dtype dt)
{
    if (!t->data || t->dtype != TEEXEC_DTYPE_DOUBLE) return;
    for (uint64_t i = 0; i < t->numel; i++) {
        double v = tc_get(t, i);
        float f = (float)v;
        if (dt == TEEXEC_DTYPE_BFLOAT16) f = tx_bf16_to_f32(tx_f32_to_bf16(f));
        if (dt == TEEXEC_DTYPE_FLOAT16) f = tx_f16_to_f32(tx_f32_to_f16(f));
        tc_set(t, i, f);
    }
}

void tc_round_to(te_case *c, teexec_dtype dt)
{
    round_to(&c->in, dt);
    for (int i = 0; i < TX_TE_MAX_EXTRA; i++)
        if (c->ex_present[i]) round_to(&c->ex[i], dt);
    for (int i = 0; i < c->n_par; i++) round_to(&c->par[i], dt);
}

void tc_assert_close(const tx_tensor *got, const tx_tensor *want, double rtol, double atol,
                     const char *what)
{
    assert_int_equal(got->numel, want->numel);
    for (uint64_t i = 0; i < got->numel; i++) {
        double g = tc_get(got, i), w = tc_get(want, i);
        if (!(fabs(g - w) <= atol + rtol * fabs(w)))
            fail_msg("%s: element %llu is %.9g, expected %.9g (rtol %g, atol %g)", what,
                     (unsigned long long)i, g, w, rtol, atol);
    }
}
