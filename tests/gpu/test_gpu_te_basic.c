/* GPU test: the CUDA te.ops basic ops (exec/cuda/te_cuda_basic.c, through
 * tx_cuda_te_basic_impl) and their fusions (te_cuda_basic_fused.c,
 * tx_cuda_fused_basic_prepare) against the CPU te.ops kernels
 * (tx_te_cpu_forward / backward) on the same inputs, exactly representable
 * in each dtype.
 *
 * Every case runs the op's forward (output, extra outputs, aux) and its
 * backward (dx, parameter grads, extra-input grads) from the GPU's own
 * saved context, and the backward twice to check that the bits repeat
 * (no float atomics). Tolerances (DESIGN.md, GPU float32 math against the
 * CPU's float32-with-double-reductions path):
 *  - exact (bytes): copies, Bias, ConstantScale, AddExtraInput,
 *    MakeExtraOutput, Dropout (mask, y, dx), Embedding (both ways);
 *  - elementwise: fp32 rtol 1.3e-6 + atol 1e-6 (CUDA's expf/tanhf/erff are
 *    within 2 ulp of glibc's, which cancellation in e.g. 1 + tanh can
 *    magnify near zero), bf16 rtol 1.6e-2, fp16 1e-3 (+ atol 1e-5);
 *  - norms (row statistics reduced in FP32 tree order on the GPU, in
 *    double on the CPU): fp32 rtol 2e-5 + atol 2e-6, as test_gpu_norm_act;
 *  - column / row sums over n terms (dbias, dgamma, dbeta, dscales): fp32
 *    atol 6e-7·n (terms below ~5 summed in another order), bf16/fp16 as
 *    above + atol 1e-2.
 * The fused kernels are compared with the unfused CPU ops run one after
 * the other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/cuda/te_cuda.h"
#include "kernels/cpu/te_args.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

#include <cuda_runtime_api.h>

enum { CMP_EXACT, CMP_ELEM, CMP_NORM, CMP_SUM };

typedef struct attr_set {
    int idx;
    int64_t i;
    double f;
} attr_set;

typedef struct op_case {
    const char *name;
    tx_te_op_id op;
    teexec_dtype dt;   /* x and everything else ... */
    teexec_dtype pdt;  /* ... but the parameters and extra inputs when set */
    int rank;
    int64_t dims[4];
    double lo, hi;
    int n_set;
    attr_set set[3];
    int variant;       /* RoPE: 1 = freqs input; Embedding: 1 = int32 ids; Identity: 1 = in place */
} op_case;

#define F32 KU_F32
#define BF16 KU_BF16
#define F16 KU_F16

static const int64_t reshape_to[2] = {-1, 64};

/* ---- helpers ---------------------------------------------------------- */

static tx_tensor dev_of(const tx_tensor *host, bool upload)
{
    tx_tensor d = *host;
    d.owns_data = false;
    d.data = upload ? tg_dev_upload(host->data, host->nbytes) : tg_dev_alloc(host->nbytes);
    return d;
}

static void compare(const char *cname, const char *what, const tx_tensor *ref, const void *dev,
                    int cls, int64_t n_terms)
{
    char label[160];
    snprintf(label, sizeof label, "%s %s", cname, what);
    if (cls == CMP_EXACT) {
        ku_expect_bits(label, ref, dev);
        return;
    }
    double rtol = ku_rtol(ref->dtype), atol = ref->dtype == F32 ? 1e-6 : 1e-5;
    if (cls == CMP_NORM && ref->dtype == F32) {
        rtol = 2e-5;
        atol = 2e-6;
    }
    if (cls == CMP_SUM) atol = ref->dtype == F32 ? 6e-7 * (double)n_terms : 1e-2;
    ku_expect_close(label, ref, dev, rtol, atol);
}

static int out_class(tx_te_op_id op)
{
    switch (op) {
    case TX_TE_IDENTITY: case TX_TE_QUANTIZE: case TX_TE_RESHAPE: case TX_TE_BIAS:
    case TX_TE_CONSTANT_SCALE: case TX_TE_ADD_EXTRA_INPUT: case TX_TE_MAKE_EXTRA_OUTPUT:
    case TX_TE_DROPOUT: case TX_TE_EMBEDDING:
        return CMP_EXACT;
    case TX_TE_LAYER_NORM: case TX_TE_RMS_NORM: return CMP_NORM;
    default: return CMP_ELEM;
    }
}

/* Downloads the device buffer and compares two device runs bit for bit. */
static void expect_same_device(const char *cname, const char *what, const void *a, const void *b,
                               size_t n)
{
    uint8_t *x = malloc(n + 1), *y = malloc(n + 1);
    assert_non_null(x);
    assert_non_null(y);
    tg_download(x, a, n);
    tg_download(y, b, n);
    char label[160];
    snprintf(label, sizeof label, "%s %s repeat", cname, what);
    size_t diff = tg_cmp_bytes(label, x, y, n);
    tg_record(label, diff == 0, diff ? "bits differ between runs" : "identical");
    free(x);
    free(y);
    if (diff) fail_msg("%s: backward is not deterministic", label);
}

/* BackwardAddNorm in bf16/fp16: the unfused CPU path rounds the norm's dx
 * (`partial`) to the dtype before adding the fork's grad; the fused kernel
 * adds in FP32 and rounds once. Where the two nearly cancel, that
 * intermediate rounding (at most half an ulp of |partial|: 2^-8 of it in
 * bf16, 2^-11 in fp16) dominates the result's error, so it is allowed
 * on top of the dtype's tolerance. */
static void expect_close_after_sum(const char *what, const tx_tensor *ref, const void *dev,
                                   const tx_tensor *partial)
{
    void *host = malloc(ref->nbytes + 1);
    assert_non_null(host);
    tg_download(host, dev, ref->nbytes);
    tx_tensor got = *ref;
    got.data = host;
    got.owns_data = false;
    double rel_half_ulp = ref->dtype == BF16 ? 0x1p-8 : 0x1p-11;
    size_t bad = 0;
    for (uint64_t i = 0; i < ref->numel; i++) {
        double a = ku_get(ref, i), b = ku_get(&got, i);
        double lim = 1e-5 + ku_rtol(ref->dtype) * fabs(a) + rel_half_ulp * fabs(ku_get(partial, i));
        if (fabs(a - b) > lim || isnan(a) != isnan(b)) {
            if (!bad)
                fprintf(stderr, "%s: element %llu cpu %.9g gpu %.9g (partial %.9g)\n", what,
                        (unsigned long long)i, a, b, ku_get(partial, i));
            bad++;
        }
    }
    free(host);
    char detail[128];
    snprintf(detail, sizeof detail, "%zu of %llu outside tolerance (intermediate rounding allowed)",
             bad, (unsigned long long)ref->numel);
    fprintf(stderr, "%s: %s\n", what, detail);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

/* ---- one op, forward and backward -------------------------------------------- */

#define MAXT 4

static void run_op(void **state)
{
    const op_case *c = *state;
    ku_seed((uint64_t)c->op * 977u + (uint64_t)c->dt * 31u + (uint64_t)c->variant + 7u);
    const tx_te_op_schema *s = tx_te_schema(c->op);
    assert_non_null(s);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    for (int i = 0; i < c->n_set; i++) {
        attrs[c->set[i].idx].i = c->set[i].i;
        attrs[c->set[i].idx].f = c->set[i].f;
    }
    if (c->op == TX_TE_RESHAPE) {
        attrs[TX_TE_A_RESHAPE_SHAPE].ints = reshape_to;
        attrs[TX_TE_A_RESHAPE_SHAPE].n_ints = 2;
    }
    teexec_dtype pdt = c->pdt ? c->pdt : c->dt;
    int64_t rows = 1, last = c->dims[c->rank - 1];
    for (int d = 0; d + 1 < c->rank; d++) rows *= c->dims[d];

    /* host inputs */
    tx_tensor x = {0}, ex[MAXT], par[MAXT];
    memset(ex, 0, sizeof ex);
    memset(par, 0, sizeof par);
    const tx_tensor *exp_[MAXT] = {NULL}, *parp[MAXT] = {NULL};
    int n_ex = s->n_extra_inputs, n_par = s->n_params;
    if (c->op == TX_TE_EMBEDDING) {
        int64_t vocab = 50;
        TG_OK(tx_tensor_alloc(&x, c->variant ? TEEXEC_DTYPE_INT32 : TEEXEC_DTYPE_INT64, c->rank,
                              c->dims));
        for (uint64_t i = 0; i < x.numel; i++) {
            int64_t id = ku_below(4) == 0 ? (int64_t)ku_below(3) : (int64_t)ku_below((uint64_t)vocab);
            if (c->variant) ((int32_t *)x.data)[i] = (int32_t)id;
            else ((int64_t *)x.data)[i] = id;
        }
        int64_t wd[2] = {vocab, 48};
        ku_make(&par[0], pdt, 2, wd, -2.0, 2.0);
    } else {
        ku_make(&x, c->dt, c->rank, c->dims, c->lo, c->hi);
    }
    switch (c->op) {
    case TX_TE_BIAS: {
        int64_t bd[1] = {last};
        ku_make(&par[0], pdt, 1, bd, -1.0, 1.0);
        break;
    }
    case TX_TE_LAYER_NORM:
    case TX_TE_RMS_NORM: {
        int64_t wd[1] = {last};
        ku_make(&par[0], pdt, 1, wd, 0.5, 1.5);
        if (c->op == TX_TE_LAYER_NORM) ku_make(&par[1], pdt, 1, wd, -0.5, 0.5);
        break;
    }
    case TX_TE_ADD_EXTRA_INPUT: ku_make(&ex[0], pdt, c->rank, c->dims, -3.0, 3.0); break;
    case TX_TE_SCALED_SWIGLU:
    case TX_TE_SCALED_SRELU: ku_make(&ex[0], pdt, c->rank - 1, c->dims, 0.25, 1.5); break;
    case TX_TE_ROTARY_EMBEDDING:
        if (c->variant) {
            int64_t s_len = c->dims[1], fd[2] = {s_len + 3, c->dims[3] - 8};
            ku_make(&ex[0], pdt, 2, fd, -20.0, 20.0);
        }
        break;
    default: break;
    }
    for (int i = 0; i < n_ex; i++) exp_[i] = ex[i].data ? &ex[i] : NULL;
    for (int i = 0; i < n_par; i++) parp[i] = &par[i];

    /* shapes of the outputs */
    tx_te_tinfo ti_x = {x.dtype, tx_shape_of(&x)}, ti_ex[MAXT], ti_par[MAXT];
    const tx_te_tinfo *ti_exp[MAXT] = {NULL}, *ti_parp[MAXT] = {NULL};
    for (int i = 0; i < n_ex; i++)
        if (exp_[i]) {
            ti_ex[i] = (tx_te_tinfo){ex[i].dtype, tx_shape_of(&ex[i])};
            ti_exp[i] = &ti_ex[i];
        }
    for (int i = 0; i < n_par; i++) {
        ti_par[i] = (tx_te_tinfo){par[i].dtype, tx_shape_of(&par[i])};
        ti_parp[i] = &ti_par[i];
    }
    tx_te_infer_in in = {attrs, &ti_x, ti_exp, n_ex, ti_parp, n_par};
    tx_te_infer_out io;
    TG_OK(tx_te_infer(s, &in, &io));
    tx_tensor y = {0}, eo[MAXT], aux[MAXT];
    memset(eo, 0, sizeof eo);
    memset(aux, 0, sizeof aux);
    TG_OK(tx_tensor_alloc(&y, io.output.dtype, io.output.shape.rank, io.output.shape.dims));
    tx_tensor *eop[MAXT] = {NULL}, *auxp[MAXT] = {NULL};
    for (int i = 0; i < s->n_extra_outputs; i++) {
        TG_OK(tx_tensor_alloc(&eo[i], io.extra_outputs[i].dtype, io.extra_outputs[i].shape.rank,
                              io.extra_outputs[i].shape.dims));
        eop[i] = &eo[i];
    }
    for (int i = 0; i < s->n_aux; i++) {
        TG_OK(tx_tensor_alloc(&aux[i], io.aux[i].dtype, io.aux[i].shape.rank, io.aux[i].shape.dims));
        auxp[i] = &aux[i];
    }

    /* CPU forward */
    tx_te_fwd_args fa = {.op = c->op, .attrs = attrs, .input = &x, .extra_inputs = exp_,
                         .n_extra_inputs = n_ex, .params = parp, .n_params = n_par, .output = &y,
                         .extra_outputs = eop, .n_extra_outputs = s->n_extra_outputs,
                         .aux = auxp, .n_aux = s->n_aux, .training = true, .rng_offset = 12345};
    TG_OK(tx_te_cpu_forward(&fa));

    /* GPU forward */
    tx_tensor dx_in = dev_of(&x, true), d_ex[MAXT], d_par[MAXT], d_y, d_eo[MAXT], d_aux[MAXT];
    const tx_tensor *d_exp[MAXT] = {NULL}, *d_parp[MAXT] = {NULL};
    tx_tensor *d_eop[MAXT] = {NULL}, *d_auxp[MAXT] = {NULL};
    for (int i = 0; i < n_ex; i++)
        if (exp_[i]) {
            d_ex[i] = dev_of(&ex[i], true);
            d_exp[i] = &d_ex[i];
        }
    for (int i = 0; i < n_par; i++) {
        d_par[i] = dev_of(&par[i], true);
        d_parp[i] = &d_par[i];
    }
    bool in_place = c->op == TX_TE_IDENTITY && c->variant == 1;
    d_y = in_place ? dx_in : dev_of(&y, false);
    for (int i = 0; i < s->n_extra_outputs; i++) {
        d_eo[i] = dev_of(&eo[i], false);
        d_eop[i] = &d_eo[i];
    }
    for (int i = 0; i < s->n_aux; i++) {
        d_aux[i] = dev_of(&aux[i], false);
        d_auxp[i] = &d_aux[i];
    }
    tx_cuda_te_desc desc = {.op = c->op, .name = c->name, .attrs = attrs, .input = &dx_in,
                            .extra_inputs = d_exp, .n_extra_inputs = n_ex, .params = d_parp,
                            .n_params = n_par, .output = &d_y,
                            .extra_outputs = (const tx_tensor *const *)d_eop,
                            .n_extra_outputs = s->n_extra_outputs, .training = true,
                            .needs = TX_TE_FOR_ALL, .sm = 90, .deterministic = true};
    const tx_cuda_te_impl *impl = tx_cuda_te_basic_impl(c->op);
    assert_non_null(impl);
    void *priv = NULL;
    size_t state_bytes = 1, scratch_bytes = 0;
    TG_OK(impl->prepare(&desc, &priv, &state_bytes, &scratch_bytes));
    assert_int_equal(state_bytes, 0);
    void *scratch = scratch_bytes ? tg_dev_alloc(scratch_bytes) : NULL;
    tx_cuda_env env = {.stream = NULL, .sm = 90, .deterministic = true};
    tx_te_fwd_args ga = fa;
    ga.input = &dx_in;
    ga.extra_inputs = d_exp;
    ga.params = d_parp;
    ga.output = &d_y;
    ga.extra_outputs = d_eop;
    ga.aux = d_auxp;
    TG_OK(impl->forward(priv, &ga, NULL, scratch, &env));
    tg_sync("forward");
    compare(c->name, "y", &y, d_y.data, out_class(c->op), 0);
    for (int i = 0; i < s->n_extra_outputs; i++) compare(c->name, "extra output", &eo[i], d_eo[i].data, CMP_EXACT, 0);
    for (int i = 0; i < s->n_aux; i++)
        compare(c->name, s->aux[i].name, &aux[i], d_aux[i].data,
                c->op == TX_TE_DROPOUT ? CMP_EXACT : CMP_NORM, 0);

    /* CPU backward */
    const tx_tensor *saved[TX_TE_SAVED_CAP(MAXT)], *d_saved[TX_TE_SAVED_CAP(MAXT)];
    int n_saved = 0, d_n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(MAXT), &n_saved));
    TG_OK(tx_te_setup_context(&ga, TX_TE_FOR_ALL, d_saved, TX_TE_SAVED_CAP(MAXT), &d_n_saved));
    assert_int_equal(n_saved, d_n_saved);
    tx_tensor dy = {0}, dex[MAXT], gx = {0}, gp[MAXT], gex[MAXT];
    memset(dex, 0, sizeof dex);
    memset(gp, 0, sizeof gp);
    memset(gex, 0, sizeof gex);
    ku_make(&dy, y.dtype, y.rank, y.dims, -1.0, 1.0);
    const tx_tensor *dexp[MAXT] = {NULL};
    for (int i = 0; i < s->n_extra_outputs; i++) {
        ku_make(&dex[i], eo[i].dtype, eo[i].rank, eo[i].dims, -1.0, 1.0);
        dexp[i] = &dex[i];
    }
    bool want_dx = c->op != TX_TE_EMBEDDING;
    if (want_dx) TG_OK(tx_tensor_alloc(&gx, x.dtype, x.rank, x.dims));
    tx_tensor *gpp[MAXT] = {NULL}, *gexp[MAXT] = {NULL};
    for (int i = 0; i < n_par; i++) {
        TG_OK(tx_tensor_alloc(&gp[i], par[i].dtype, par[i].rank, par[i].dims));
        gpp[i] = &gp[i];
    }
    for (int i = 0; i < n_ex; i++)
        if (exp_[i] && !(s->extra_inputs[i].flags & TX_TE_PORT_NO_GRAD)) {
            TG_OK(tx_tensor_alloc(&gex[i], ex[i].dtype, ex[i].rank, ex[i].dims));
            gexp[i] = &gex[i];
        }
    tx_te_bwd_args ba = {.op = c->op, .attrs = attrs, .grad_output = &dy,
                         .grad_extra_outputs = dexp, .n_grad_extra_outputs = s->n_extra_outputs,
                         .saved = saved, .n_saved = n_saved, .grad_input = want_dx ? &gx : NULL,
                         .grad_params = gpp, .n_grad_params = n_par, .grad_extra_inputs = gexp,
                         .n_grad_extra_inputs = n_ex};
    TG_OK(tx_te_cpu_backward(&ba));

    /* GPU backward, twice */
    tx_tensor d_dy = dev_of(&dy, true), d_dex[MAXT], d_gx[2], d_gp[2][MAXT], d_gex[2][MAXT];
    const tx_tensor *d_dexp[MAXT] = {NULL};
    for (int i = 0; i < s->n_extra_outputs; i++) {
        d_dex[i] = dev_of(&dex[i], true);
        d_dexp[i] = &d_dex[i];
    }
    for (int run = 0; run < 2; run++) {
        tx_tensor *d_gpp[MAXT] = {NULL}, *d_gexp[MAXT] = {NULL};
        if (want_dx) d_gx[run] = in_place ? d_dy : dev_of(&gx, false);
        for (int i = 0; i < n_par; i++) {
            d_gp[run][i] = dev_of(&gp[i], false);
            d_gpp[i] = &d_gp[run][i];
        }
        for (int i = 0; i < n_ex; i++)
            if (gexp[i]) {
                d_gex[run][i] = dev_of(&gex[i], false);
                d_gexp[i] = &d_gex[run][i];
            }
        tx_te_bwd_args gb = ba;
        gb.grad_output = &d_dy;
        gb.grad_extra_outputs = d_dexp;
        gb.saved = d_saved;
        gb.grad_input = want_dx ? &d_gx[run] : NULL;
        gb.grad_params = d_gpp;
        gb.grad_extra_inputs = d_gexp;
        TG_OK(impl->backward(priv, &gb, NULL, scratch, &env));
        tg_sync("backward");
    }
    int bcls = out_class(c->op);
    if (c->op == TX_TE_BIAS) bcls = CMP_EXACT; /* dx = dy */
    if (want_dx) {
        compare(c->name, "dx", &gx, d_gx[0].data, bcls, 0);
        if (!in_place) expect_same_device(c->name, "dx", d_gx[0].data, d_gx[1].data, gx.nbytes);
    }
    for (int i = 0; i < n_par; i++) {
        int cls = c->op == TX_TE_EMBEDDING ? CMP_EXACT : CMP_SUM;
        compare(c->name, s->params[i].name, &gp[i], d_gp[0][i].data, cls, rows);
        expect_same_device(c->name, s->params[i].name, d_gp[0][i].data, d_gp[1][i].data,
                           gp[i].nbytes);
    }
    for (int i = 0; i < n_ex; i++)
        if (gexp[i]) {
            int cls = c->op == TX_TE_ADD_EXTRA_INPUT ? CMP_EXACT : CMP_SUM;
            compare(c->name, s->extra_inputs[i].name, &gex[i], d_gex[0][i].data, cls,
                    c->op == TX_TE_ADD_EXTRA_INPUT ? 0 : last);
            expect_same_device(c->name, s->extra_inputs[i].name, d_gex[0][i].data,
                               d_gex[1][i].data, gex[i].nbytes);
        }

    /* cleanup */
    impl->free_priv(priv);
    tg_dev_free(scratch);
    for (int run = 0; run < 2; run++) {
        if (want_dx && !in_place) tg_dev_free(d_gx[run].data);
        for (int i = 0; i < n_par; i++) tg_dev_free(d_gp[run][i].data);
        for (int i = 0; i < n_ex; i++)
            if (gexp[i]) tg_dev_free(d_gex[run][i].data);
    }
    tg_dev_free(d_dy.data);
    for (int i = 0; i < s->n_extra_outputs; i++) {
        tg_dev_free(d_dex[i].data);
        tg_dev_free(d_eo[i].data);
    }
    for (int i = 0; i < s->n_aux; i++) tg_dev_free(d_aux[i].data);
    for (int i = 0; i < n_ex; i++)
        if (exp_[i]) tg_dev_free(d_ex[i].data);
    for (int i = 0; i < n_par; i++) tg_dev_free(d_par[i].data);
    if (!in_place) tg_dev_free(d_y.data);
    tg_dev_free(dx_in.data);
    tx_tensor *hs[] = {&x, &y, &dy, &gx};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) tx_tensor_release(hs[i]);
    for (int i = 0; i < MAXT; i++) {
        tx_tensor_release(&ex[i]);
        tx_tensor_release(&par[i]);
        tx_tensor_release(&eo[i]);
        tx_tensor_release(&aux[i]);
        tx_tensor_release(&dex[i]);
        tx_tensor_release(&gp[i]);
        tx_tensor_release(&gex[i]);
    }
}

/* ---- fused: BackwardActivationBias and BackwardAddNorm ------------------------- */

typedef struct fused_case {
    const char *name;
    tx_fusion_id fusion;
    tx_te_op_id op;     /* the activation / the norm */
    int gelu_erf;
    teexec_dtype dt;
    int no_dx;          /* act-bias: the Bias's dx is not wanted (dbias only) */
    int no_extra;       /* add-norm: the fork's extra grad is absent */
} fused_case;

static void run_act_bias(const fused_case *c)
{
    ku_seed(4242u + (uint64_t)c->op * 13u + (uint64_t)c->dt);
    const tx_te_op_schema *bs = tx_te_schema(TX_TE_BIAS), *as = tx_te_schema(c->op);
    tx_te_attr_value battrs[TX_TE_MAX_ATTRS], aattrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(bs, battrs);
    tx_te_attr_defaults(as, aattrs);
    if (c->gelu_erf) aattrs[TX_TE_A_GELU_APPROX].i = TX_TE_GELU_ERF;
    int64_t xd[2] = {150, 200}, bd[1] = {200};
    tx_tensor x = {0}, b = {0}, dy = {0}, dact = {0}, dx = {0}, db = {0};
    ku_make(&x, c->dt, 2, xd, -4.0, 4.0); /* the act's saved input */
    ku_make(&b, c->dt, 1, bd, -1.0, 1.0);
    ku_make(&dy, c->dt, 2, xd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&dact, c->dt, 2, xd));
    TG_OK(tx_tensor_alloc(&dx, c->dt, 2, xd));
    TG_OK(tx_tensor_alloc(&db, c->dt, 1, bd));
    /* CPU, unfused: the activation's backward, then the Bias's */
    const tx_tensor *asaved[1] = {&x};
    tx_te_bwd_args ab = {.op = c->op, .attrs = aattrs, .grad_output = &dy, .saved = asaved,
                         .n_saved = 1, .grad_input = &dact};
    TG_OK(tx_te_cpu_backward(&ab));
    tx_tensor *dbp[1] = {&db};
    tx_te_bwd_args bb = {.op = TX_TE_BIAS, .attrs = battrs, .grad_output = &dact,
                         .grad_input = &dx, .grad_params = dbp, .n_grad_params = 1};
    TG_OK(tx_te_cpu_backward(&bb));

    /* GPU, fused */
    tx_tensor d_x = dev_of(&x, true), d_b = dev_of(&b, true), d_dy = dev_of(&dy, true);
    tx_tensor d_mid = dev_of(&dact, false), d_dx = dev_of(&dx, false), d_db = dev_of(&db, false);
    const tx_tensor *bparams[1] = {&d_b};
    tx_cuda_te_desc bdesc = {.op = TX_TE_BIAS, .name = "bias", .attrs = battrs, .input = &d_x,
                             .params = bparams, .n_params = 1, .output = &d_mid,
                             .training = true, .needs = TX_TE_FOR_ALL, .sm = 90};
    tx_cuda_te_desc adesc = {.op = c->op, .name = "act", .attrs = aattrs, .input = &d_mid,
                             .output = &d_mid, .training = true, .needs = TX_TE_FOR_ALL, .sm = 90};
    const tx_cuda_te_desc *descs[2] = {&bdesc, &adesc};
    const tx_cuda_fused_impl *impl = NULL;
    void *priv = NULL;
    size_t scratch_bytes = 0;
    TG_OK(tx_cuda_fused_basic_prepare(TX_FUSION_BWD_ACT_BIAS, true, descs, NULL, 2, &impl, &priv,
                                      &scratch_bytes));
    assert_non_null(impl);
    void *scratch = tg_dev_alloc(scratch_bytes);
    tx_tensor *d_dbp[1] = {&d_db};
    const tx_tensor *d_asaved[1] = {&d_x};
    tx_te_bwd_args gbias = {.op = TX_TE_BIAS, .attrs = battrs, .grad_output = &d_mid,
                            .grad_input = c->no_dx ? NULL : &d_dx, .grad_params = d_dbp,
                            .n_grad_params = 1};
    tx_te_bwd_args gact = {.op = c->op, .attrs = aattrs, .grad_output = &d_dy, .saved = d_asaved,
                           .n_saved = 1, .grad_input = c->no_dx ? NULL : &d_mid};
    const tx_te_bwd_args *args[2] = {&gbias, &gact};
    void *states[2] = {NULL, NULL};
    tx_cuda_env env = {.stream = NULL, .sm = 90, .deterministic = true};
    TG_OK(impl->backward(priv, args, states, scratch, &env));
    tg_sync("fused act-bias");
    if (!c->no_dx) compare(c->name, "dx", &dx, d_dx.data, CMP_ELEM, 0);
    compare(c->name, "dbias", &db, d_db.data, CMP_SUM, xd[0]);
    impl->free_priv(priv);
    void *bufs[] = {scratch, d_x.data, d_b.data, d_dy.data, d_mid.data, d_dx.data, d_db.data};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
    tx_tensor *hs[] = {&x, &b, &dy, &dact, &dx, &db};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) tx_tensor_release(hs[i]);
}

static void run_add_norm(const fused_case *c)
{
    ku_seed(777u + (uint64_t)c->op * 5u + (uint64_t)c->dt);
    bool rms = c->op == TX_TE_RMS_NORM;
    const tx_te_op_schema *ns = tx_te_schema(c->op), *ms = tx_te_schema(TX_TE_MAKE_EXTRA_OUTPUT);
    tx_te_attr_value nattrs[TX_TE_MAX_ATTRS], mattrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(ns, nattrs);
    tx_te_attr_defaults(ms, mattrs);
    int64_t xd[3] = {2, 70, 160}, wd[1] = {160}, rd[2] = {2, 70};
    tx_tensor x = {0}, g = {0}, be = {0}, y = {0}, mu = {0}, rs = {0}, dy = {0}, de = {0},
              dnorm = {0}, dx = {0}, dg = {0}, dbe = {0};
    ku_make(&x, c->dt, 3, xd, -3.0, 5.0);
    ku_make(&g, c->dt, 1, wd, 0.5, 1.5);
    ku_make(&be, c->dt, 1, wd, -0.5, 0.5);
    ku_make(&dy, c->dt, 3, xd, -1.0, 1.0);
    ku_make(&de, c->dt, 3, xd, -1.0, 1.0);
    TG_OK(tx_tensor_alloc(&y, c->dt, 3, xd));
    TG_OK(tx_tensor_alloc(&mu, F32, 2, rd));
    TG_OK(tx_tensor_alloc(&rs, F32, 2, rd));
    TG_OK(tx_tensor_alloc(&dnorm, c->dt, 3, xd));
    TG_OK(tx_tensor_alloc(&dx, c->dt, 3, xd));
    TG_OK(tx_tensor_alloc(&dg, c->dt, 1, wd));
    TG_OK(tx_tensor_alloc(&dbe, c->dt, 1, wd));
    const tx_tensor *params[2] = {&g, &be};
    tx_tensor *aux[2] = {rms ? &rs : &mu, &rs};
    tx_te_fwd_args fa = {.op = c->op, .attrs = nattrs, .input = &x, .params = params,
                         .n_params = rms ? 1 : 2, .output = &y, .aux = aux,
                         .n_aux = rms ? 1 : 2, .training = true};
    TG_OK(tx_te_cpu_forward(&fa));
    const tx_tensor *saved[TX_TE_SAVED_CAP(2)];
    int n_saved = 0;
    TG_OK(tx_te_setup_context(&fa, TX_TE_FOR_ALL, saved, TX_TE_SAVED_CAP(2), &n_saved));
    tx_tensor *gp[2] = {&dg, &dbe};
    tx_te_bwd_args nb = {.op = c->op, .attrs = nattrs, .grad_output = &dy, .saved = saved,
                         .n_saved = n_saved, .grad_input = &dnorm, .grad_params = gp,
                         .n_grad_params = rms ? 1 : 2};
    TG_OK(tx_te_cpu_backward(&nb));
    const tx_tensor *dep[1] = {c->no_extra ? NULL : &de};
    tx_te_bwd_args mb = {.op = TX_TE_MAKE_EXTRA_OUTPUT, .attrs = mattrs, .grad_output = &dnorm,
                         .grad_extra_outputs = dep, .n_grad_extra_outputs = 1, .grad_input = &dx};
    TG_OK(tx_te_cpu_backward(&mb));

    /* GPU, fused, from the CPU's saved statistics */
    tx_tensor d_x = dev_of(&x, true), d_g = dev_of(&g, true), d_be = dev_of(&be, true);
    tx_tensor d_mu = dev_of(&mu, true), d_rs = dev_of(&rs, true), d_dy = dev_of(&dy, true);
    tx_tensor d_de = dev_of(&de, true), d_dx = dev_of(&dx, false), d_dg = dev_of(&dg, false);
    tx_tensor d_dbe = dev_of(&dbe, false), d_y = dev_of(&y, false);
    const tx_tensor *d_params[2] = {&d_g, &d_be};
    const tx_tensor *eo[1] = {&d_x};
    tx_cuda_te_desc mdesc = {.op = TX_TE_MAKE_EXTRA_OUTPUT, .name = "fork", .attrs = mattrs,
                             .input = &d_x, .output = &d_x, .extra_outputs = eo,
                             .n_extra_outputs = 1, .training = true, .needs = TX_TE_FOR_ALL};
    tx_cuda_te_desc ndesc = {.op = c->op, .name = "norm", .attrs = nattrs, .input = &d_x,
                             .params = d_params, .n_params = rms ? 1 : 2, .output = &d_y,
                             .training = true, .needs = TX_TE_FOR_ALL};
    const tx_cuda_te_desc *descs[2] = {&mdesc, &ndesc};
    const tx_cuda_fused_impl *impl = NULL;
    void *priv = NULL;
    size_t scratch_bytes = 0;
    TG_OK(tx_cuda_fused_basic_prepare(TX_FUSION_BWD_ADD_NORM, true, descs, NULL, 2, &impl, &priv,
                                      &scratch_bytes));
    assert_non_null(impl);
    void *scratch = tg_dev_alloc(scratch_bytes ? scratch_bytes : 1);
    const tx_tensor *d_saved[4] = {&d_x, &d_g, rms ? &d_rs : &d_mu, &d_rs};
    tx_tensor *d_gp[2] = {&d_dg, &d_dbe};
    tx_te_bwd_args gn = {.op = c->op, .attrs = nattrs, .grad_output = &d_dy, .saved = d_saved,
                         .n_saved = rms ? 3 : 4, .grad_input = NULL, .grad_params = d_gp,
                         .n_grad_params = rms ? 1 : 2};
    const tx_tensor *d_dep[1] = {c->no_extra ? NULL : &d_de};
    tx_te_bwd_args gm = {.op = TX_TE_MAKE_EXTRA_OUTPUT, .attrs = mattrs, .grad_output = NULL,
                         .grad_extra_outputs = d_dep, .n_grad_extra_outputs = 1,
                         .grad_input = &d_dx};
    const tx_te_bwd_args *args[2] = {&gm, &gn};
    void *states[2] = {NULL, NULL};
    tx_cuda_env env = {.stream = NULL, .sm = 90, .deterministic = true};
    TG_OK(impl->backward(priv, args, states, scratch, &env));
    tg_sync("fused add-norm");
    if (c->dt == F32 || c->no_extra) {
        compare(c->name, "dx", &dx, d_dx.data, CMP_NORM, 0);
    } else {
        char label[160];
        snprintf(label, sizeof label, "%s dx", c->name);
        expect_close_after_sum(label, &dx, d_dx.data, &dnorm);
    }
    compare(c->name, "dgamma", &dg, d_dg.data, CMP_SUM, 140);
    if (!rms) compare(c->name, "dbeta", &dbe, d_dbe.data, CMP_SUM, 140);
    impl->free_priv(priv);
    void *bufs[] = {scratch, d_x.data, d_g.data, d_be.data, d_mu.data, d_rs.data, d_dy.data,
                    d_de.data, d_dx.data, d_dg.data, d_dbe.data, d_y.data};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_dev_free(bufs[i]);
    tx_tensor *hs[] = {&x, &g, &be, &y, &mu, &rs, &dy, &de, &dnorm, &dx, &dg, &dbe};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) tx_tensor_release(hs[i]);
}

static void run_fused(void **state)
{
    const fused_case *c = *state;
    if (c->fusion == TX_FUSION_BWD_ACT_BIAS) run_act_bias(c);
    else run_add_norm(c);
}

/* ---- refusals ------------------------------------------------------------------ */

static void refuses_fp64(void **state)
{
    (void)state;
    const tx_te_op_schema *s = tx_te_schema(TX_TE_GELU);
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    tx_te_attr_defaults(s, attrs);
    int64_t d[2] = {4, 8};
    tx_tensor x = {0};
    TG_OK(tx_tensor_wrap(&x, TEEXEC_DTYPE_DOUBLE, 2, d, NULL));
    tx_cuda_te_desc desc = {.op = TX_TE_GELU, .name = "g", .attrs = attrs, .input = &x,
                            .output = &x, .training = true};
    void *priv = NULL;
    size_t st_b = 0, sc_b = 0;
    teexec_status *st = tx_cuda_te_basic_impl(TX_TE_GELU)->prepare(&desc, &priv, &st_b, &sc_b);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    const char *msg = teexec_status_message(st);
    assert_non_null(strstr(msg, "op g (GELU)"));
    assert_non_null(strstr(msg, "float64"));
    assert_null(priv);
    tg_record("refuses fp64", 1, msg);
    teexec_status_destroy(st);
    /* ops of other families are not this table's */
    assert_null(tx_cuda_te_basic_impl(TX_TE_LINEAR));
    assert_null(tx_cuda_te_basic_impl(TX_TE_DOT_PRODUCT_ATTENTION));
}

static void fusions_declined(void **state)
{
    (void)state;
    tx_cuda_te_desc d = {.op = TX_TE_RMS_NORM, .name = "n"};
    const tx_cuda_te_desc *descs[1] = {&d};
    const tx_cuda_fused_impl *impl = NULL;
    void *priv = NULL;
    size_t sb = 0;
    tx_fusion_id no[3] = {TX_FUSION_FWD_NORM_QUANTIZE, TX_FUSION_FWD_ACT_QUANTIZE,
                          TX_FUSION_BWD_BIAS_QUANTIZE};
    for (int i = 0; i < 3; i++) {
        teexec_status *st = tx_cuda_fused_basic_prepare(no[i], i == 2, descs, NULL, 1, &impl,
                                                        &priv, &sb);
        assert_non_null(st);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
        assert_null(impl);
        teexec_status_destroy(st);
    }
    /* a Linear fusion is another family's: no answer, no error */
    TG_OK(tx_cuda_fused_basic_prepare(TX_FUSION_FWD_LINEAR_BIAS_ACT, false, descs, NULL, 1, &impl,
                                      &priv, &sb));
    assert_null(impl);
    /* BackwardActivationBias over a gated activation is declined */
    int64_t xd[2] = {4, 8};
    tx_tensor x = {0}, b = {0};
    TG_OK(tx_tensor_wrap(&x, F32, 2, xd, NULL));
    TG_OK(tx_tensor_wrap(&b, F32, 1, &xd[1], NULL));
    const tx_tensor *bp[1] = {&b};
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS] = {{0}};
    tx_cuda_te_desc bd = {.op = TX_TE_BIAS, .name = "b", .attrs = attrs, .input = &x,
                          .params = bp, .n_params = 1, .output = &x};
    tx_cuda_te_desc ad = {.op = TX_TE_SWIGLU, .name = "a", .attrs = attrs, .input = &x,
                          .output = &x};
    const tx_cuda_te_desc *two[2] = {&bd, &ad};
    teexec_status *st = tx_cuda_fused_basic_prepare(TX_FUSION_BWD_ACT_BIAS, true, two, NULL, 2,
                                                    &impl, &priv, &sb);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "BackwardActivationBias"));
    tg_record("fusions declined", 1, teexec_status_message(st));
    teexec_status_destroy(st);
}

/* ---- the case table ---------------------------------------------------------------- */

#define X3 3, {2, 75, 96, 0}
#define XG 3, {2, 75, 200, 0}   /* gated: 100 output columns */
#define XR 4, {2, 24, 4, 64}    /* RoPE bshd */
#define XE 2, {6, 40, 0, 0}     /* Embedding ids */
#define SET1(a, iv, fv) 1, {{a, iv, fv}}
#define OP(nm, op, dt, shape, lo, hi) {nm, op, dt, 0, shape, lo, hi, 0, {{0}}, 0}
#define OPA(nm, op, dt, shape, lo, hi, sets) {nm, op, dt, 0, shape, lo, hi, sets, 0}
#define OPV(nm, op, dt, shape, lo, hi, v) {nm, op, dt, 0, shape, lo, hi, 0, {{0}}, v}

static const op_case op_cases[] = {
    OP("identity f32", TX_TE_IDENTITY, F32, X3, -3, 3),
    OP("identity bf16", TX_TE_IDENTITY, BF16, X3, -3, 3),
    OP("identity f16", TX_TE_IDENTITY, F16, X3, -3, 3),
    OPV("identity in place f32", TX_TE_IDENTITY, F32, X3, -3, 3, 1),
    OP("quantize (no recipe) bf16", TX_TE_QUANTIZE, BF16, X3, -3, 3),
    OP("quantize (no recipe) f16", TX_TE_QUANTIZE, F16, X3, -3, 3),
    OP("reshape f32", TX_TE_RESHAPE, F32, X3, -3, 3),
    OP("reshape bf16", TX_TE_RESHAPE, BF16, X3, -3, 3),
    OP("reshape f16", TX_TE_RESHAPE, F16, X3, -3, 3),
    OP("bias f32", TX_TE_BIAS, F32, X3, -3, 3),
    OP("bias bf16", TX_TE_BIAS, BF16, X3, -3, 3),
    OP("bias f16", TX_TE_BIAS, F16, X3, -3, 3),
    {"bias bf16 x, f32 bias", TX_TE_BIAS, BF16, F32, X3, -3, 3, 0, {{0}}, 0},
    {"bias f16 x, f32 bias", TX_TE_BIAS, F16, F32, X3, -3, 3, 0, {{0}}, 0},
    OPA("constant scale f32", TX_TE_CONSTANT_SCALE, F32, X3, -3, 3, SET1(TX_TE_A_SCALE, 0, 0.3)),
    OPA("constant scale bf16", TX_TE_CONSTANT_SCALE, BF16, X3, -3, 3, SET1(TX_TE_A_SCALE, 0, -1.7)),
    OPA("constant scale f16", TX_TE_CONSTANT_SCALE, F16, X3, -3, 3, SET1(TX_TE_A_SCALE, 0, -1.7)),
    OP("add extra input f32", TX_TE_ADD_EXTRA_INPUT, F32, X3, -3, 3),
    OP("add extra input bf16", TX_TE_ADD_EXTRA_INPUT, BF16, X3, -3, 3),
    OP("add extra input f16", TX_TE_ADD_EXTRA_INPUT, F16, X3, -3, 3),
    OP("make extra output f32", TX_TE_MAKE_EXTRA_OUTPUT, F32, X3, -3, 3),
    OP("make extra output bf16", TX_TE_MAKE_EXTRA_OUTPUT, BF16, X3, -3, 3),
    OP("make extra output f16", TX_TE_MAKE_EXTRA_OUTPUT, F16, X3, -3, 3),
    OP("layernorm f32", TX_TE_LAYER_NORM, F32, X3, -3, 5),
    OP("layernorm bf16", TX_TE_LAYER_NORM, BF16, X3, -3, 5),
    OP("layernorm f16", TX_TE_LAYER_NORM, F16, X3, -3, 5),
    OPA("layernorm zcg f32", TX_TE_LAYER_NORM, F32, X3, -3, 5, SET1(TX_TE_A_NORM_ZCG, 1, 0)),
    {"layernorm bf16 x, f32 params", TX_TE_LAYER_NORM, BF16, F32, X3, -3, 5, 0, {{0}}, 0},
    {"layernorm f16 x, f32 params", TX_TE_LAYER_NORM, F16, F32, X3, -3, 5, 0, {{0}}, 0},
    OP("rmsnorm f32", TX_TE_RMS_NORM, F32, X3, -3, 5),
    OP("rmsnorm bf16", TX_TE_RMS_NORM, BF16, X3, -3, 5),
    OP("rmsnorm f16", TX_TE_RMS_NORM, F16, X3, -3, 5),
    OPA("rmsnorm zcg bf16", TX_TE_RMS_NORM, BF16, X3, -3, 5, SET1(TX_TE_A_NORM_ZCG, 1, 0)),
    OPA("rmsnorm zcg f16", TX_TE_RMS_NORM, F16, X3, -3, 5, SET1(TX_TE_A_NORM_ZCG, 1, 0)),
    OP("gelu tanh f32", TX_TE_GELU, F32, X3, -4, 4),
    OP("gelu tanh bf16", TX_TE_GELU, BF16, X3, -4, 4),
    OP("gelu tanh f16", TX_TE_GELU, F16, X3, -4, 4),
    OPA("gelu erf f32", TX_TE_GELU, F32, X3, -4, 4, SET1(TX_TE_A_GELU_APPROX, TX_TE_GELU_ERF, 0)),
    OPA("gelu erf bf16", TX_TE_GELU, BF16, X3, -4, 4, SET1(TX_TE_A_GELU_APPROX, TX_TE_GELU_ERF, 0)),
    OPA("gelu erf f16", TX_TE_GELU, F16, X3, -4, 4, SET1(TX_TE_A_GELU_APPROX, TX_TE_GELU_ERF, 0)),
    OP("qgelu f32", TX_TE_QGELU, F32, X3, -4, 4),
    OP("qgelu bf16", TX_TE_QGELU, BF16, X3, -4, 4),
    OP("qgelu f16", TX_TE_QGELU, F16, X3, -4, 4),
    OP("relu f32", TX_TE_RELU, F32, X3, -4, 4),
    OP("relu bf16", TX_TE_RELU, BF16, X3, -4, 4),
    OP("relu f16", TX_TE_RELU, F16, X3, -4, 4),
    OP("srelu f32", TX_TE_SRELU, F32, X3, -4, 4),
    OP("srelu bf16", TX_TE_SRELU, BF16, X3, -4, 4),
    OP("srelu f16", TX_TE_SRELU, F16, X3, -4, 4),
    OP("silu f32", TX_TE_SILU, F32, X3, -4, 4),
    OP("silu bf16", TX_TE_SILU, BF16, X3, -4, 4),
    OP("silu f16", TX_TE_SILU, F16, X3, -4, 4),
    OP("glu f32", TX_TE_GLU, F32, XG, -4, 4),
    OP("glu bf16", TX_TE_GLU, BF16, XG, -4, 4),
    OP("glu f16", TX_TE_GLU, F16, XG, -4, 4),
    OP("geglu tanh f32", TX_TE_GEGLU, F32, XG, -4, 4),
    OP("geglu tanh bf16", TX_TE_GEGLU, BF16, XG, -4, 4),
    OP("geglu tanh f16", TX_TE_GEGLU, F16, XG, -4, 4),
    OPA("geglu erf f32", TX_TE_GEGLU, F32, XG, -4, 4, SET1(TX_TE_A_GELU_APPROX, TX_TE_GELU_ERF, 0)),
    OPA("geglu erf bf16", TX_TE_GEGLU, BF16, XG, -4, 4, SET1(TX_TE_A_GELU_APPROX, TX_TE_GELU_ERF, 0)),
    OPA("geglu erf f16", TX_TE_GEGLU, F16, XG, -4, 4, SET1(TX_TE_A_GELU_APPROX, TX_TE_GELU_ERF, 0)),
    OP("qgeglu f32", TX_TE_QGEGLU, F32, XG, -4, 4),
    OP("qgeglu bf16", TX_TE_QGEGLU, BF16, XG, -4, 4),
    OP("qgeglu f16", TX_TE_QGEGLU, F16, XG, -4, 4),
    OP("reglu f32", TX_TE_REGLU, F32, XG, -4, 4),
    OP("reglu bf16", TX_TE_REGLU, BF16, XG, -4, 4),
    OP("reglu f16", TX_TE_REGLU, F16, XG, -4, 4),
    OP("sreglu f32", TX_TE_SREGLU, F32, XG, -4, 4),
    OP("sreglu bf16", TX_TE_SREGLU, BF16, XG, -4, 4),
    OP("sreglu f16", TX_TE_SREGLU, F16, XG, -4, 4),
    OP("swiglu f32", TX_TE_SWIGLU, F32, XG, -4, 4),
    OP("swiglu bf16", TX_TE_SWIGLU, BF16, XG, -4, 4),
    OP("swiglu f16", TX_TE_SWIGLU, F16, XG, -4, 4),
    OP("clamped swiglu f32", TX_TE_CLAMPED_SWIGLU, F32, XG, -10, 10),
    OP("clamped swiglu bf16", TX_TE_CLAMPED_SWIGLU, BF16, XG, -10, 10),
    OP("clamped swiglu f16", TX_TE_CLAMPED_SWIGLU, F16, XG, -10, 10),
    OP("scaled swiglu f32", TX_TE_SCALED_SWIGLU, F32, XG, -4, 4),
    OP("scaled swiglu bf16", TX_TE_SCALED_SWIGLU, BF16, XG, -4, 4),
    OP("scaled swiglu f16", TX_TE_SCALED_SWIGLU, F16, XG, -4, 4),
    OP("scaled srelu f32", TX_TE_SCALED_SRELU, F32, X3, -2, 2),
    OP("scaled srelu bf16", TX_TE_SCALED_SRELU, BF16, X3, -2, 2),
    OP("scaled srelu f16", TX_TE_SCALED_SRELU, F16, X3, -2, 2),
    {"dropout f32", TX_TE_DROPOUT, F32, 0, X3, -3, 3, 2, {{TX_TE_A_DROPOUT_P, 0, 0.3}, {TX_TE_A_DROPOUT_SEED, 99, 0}}, 0},
    {"dropout bf16", TX_TE_DROPOUT, BF16, 0, X3, -3, 3, 2, {{TX_TE_A_DROPOUT_P, 0, 0.1}, {TX_TE_A_DROPOUT_SEED, 7, 0}}, 0},
    {"dropout f16", TX_TE_DROPOUT, F16, 0, X3, -3, 3, 2, {{TX_TE_A_DROPOUT_P, 0, 0.1}, {TX_TE_A_DROPOUT_SEED, 7, 0}}, 0},
    {"dropout f16 odd size", TX_TE_DROPOUT, F16, 0, 2, {13, 37, 0, 0}, -3, 3, 2, {{TX_TE_A_DROPOUT_P, 0, 0.5}, {TX_TE_A_DROPOUT_SEED, 5, 0}}, 0},
    OP("rope bshd f32", TX_TE_ROTARY_EMBEDDING, F32, XR, -2, 2),
    OP("rope bshd bf16", TX_TE_ROTARY_EMBEDDING, BF16, XR, -2, 2),
    OP("rope bshd f16", TX_TE_ROTARY_EMBEDDING, F16, XR, -2, 2),
    {"rope sbhd interleaved f32", TX_TE_ROTARY_EMBEDDING, F32, 0, 4, {24, 2, 4, 64}, -2, 2, 2,
     {{TX_TE_A_ROPE_LAYOUT, TX_TE_LAYOUT_SBHD, 0}, {TX_TE_A_ROPE_INTERLEAVED, 1, 0}}, 0},
    OPV("rope freqs f32", TX_TE_ROTARY_EMBEDDING, F32, XR, -2, 2, 1),
    OPV("rope bf16 freqs (converted)", TX_TE_ROTARY_EMBEDDING, BF16, XR, -2, 2, 1),
    OPV("rope f16 freqs (converted)", TX_TE_ROTARY_EMBEDDING, F16, XR, -2, 2, 1),
    OP("embedding f32 int64 ids", TX_TE_EMBEDDING, F32, XE, 0, 0),
    OPV("embedding bf16 int32 ids", TX_TE_EMBEDDING, BF16, XE, 0, 0, 1),
    OPV("embedding f16 int32 ids", TX_TE_EMBEDDING, F16, XE, 0, 0, 1),
};

static const fused_case fused_cases[] = {
    {"act-bias gelu f32", TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, 0, F32, 0, 0},
    {"act-bias gelu erf bf16", TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, 1, BF16, 0, 0},
    {"act-bias qgelu f32", TX_FUSION_BWD_ACT_BIAS, TX_TE_QGELU, 0, F32, 0, 0},
    {"act-bias qgelu bf16 dbias only", TX_FUSION_BWD_ACT_BIAS, TX_TE_QGELU, 0, BF16, 1, 0},
    {"act-bias relu bf16", TX_FUSION_BWD_ACT_BIAS, TX_TE_RELU, 0, BF16, 0, 0},
    {"act-bias srelu f32", TX_FUSION_BWD_ACT_BIAS, TX_TE_SRELU, 0, F32, 0, 0},
    {"act-bias silu bf16", TX_FUSION_BWD_ACT_BIAS, TX_TE_SILU, 0, BF16, 0, 0},
    {"act-bias silu f32 dbias only", TX_FUSION_BWD_ACT_BIAS, TX_TE_SILU, 0, F32, 1, 0},
    {"add-norm layernorm f32", TX_FUSION_BWD_ADD_NORM, TX_TE_LAYER_NORM, 0, F32, 0, 0},
    {"add-norm layernorm bf16", TX_FUSION_BWD_ADD_NORM, TX_TE_LAYER_NORM, 0, BF16, 0, 0},
    {"add-norm rmsnorm f32", TX_FUSION_BWD_ADD_NORM, TX_TE_RMS_NORM, 0, F32, 0, 0},
    {"add-norm rmsnorm f16", TX_FUSION_BWD_ADD_NORM, TX_TE_RMS_NORM, 0, F16, 0, 0},
    {"add-norm rmsnorm bf16 no extra grad", TX_FUSION_BWD_ADD_NORM, TX_TE_RMS_NORM, 0, BF16, 0, 1},
    {"act-bias gelu f16", TX_FUSION_BWD_ACT_BIAS, TX_TE_GELU, 0, F16, 0, 0},
    {"act-bias qgelu f16", TX_FUSION_BWD_ACT_BIAS, TX_TE_QGELU, 0, F16, 0, 0},
    {"act-bias relu f16 dbias only", TX_FUSION_BWD_ACT_BIAS, TX_TE_RELU, 0, F16, 1, 0},
    {"act-bias srelu f16", TX_FUSION_BWD_ACT_BIAS, TX_TE_SRELU, 0, F16, 0, 0},
    {"act-bias silu f16", TX_FUSION_BWD_ACT_BIAS, TX_TE_SILU, 0, F16, 0, 0},
    {"add-norm layernorm f16", TX_FUSION_BWD_ADD_NORM, TX_TE_LAYER_NORM, 0, F16, 0, 0},
};

int main(void)
{
    tg_require_gpu("test_gpu_te_basic");
    enum { NO = sizeof op_cases / sizeof op_cases[0], NF = sizeof fused_cases / sizeof fused_cases[0] };
    struct CMUnitTest tests[NO + NF + 2];
    size_t n = 0;
    for (size_t i = 0; i < NO; i++) {
        struct CMUnitTest t = {op_cases[i].name, run_op, NULL, NULL, (void *)&op_cases[i]};
        tests[n++] = t;
    }
    for (size_t i = 0; i < NF; i++) {
        struct CMUnitTest t = {fused_cases[i].name, run_fused, NULL, NULL, (void *)&fused_cases[i]};
        tests[n++] = t;
    }
    struct CMUnitTest r1 = cmocka_unit_test(refuses_fp64), r2 = cmocka_unit_test(fusions_declined);
    tests[n++] = r1;
    tests[n++] = r2;
    return _cmocka_run_group_tests("test_gpu_te_basic", tests, n, NULL, NULL);
}
