/* std_case.c - see std_case.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/gpu/std_case.h"

#include "base/half.h"
#include "base/numfmt.h"
#include "exec/cpu_ops.h"
#include "exec/cuda/std_cuda.h"
#include "exec/train_internal.h"
#include "import/shape_infer.h"
#include "kernels/cuda/gemm_lt.h"
#include "onnx.pb-c.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXIO SC_MAXIO
#define F SC_F

/* TEEXEC_STD_CASE_PREPARE_ONLY=1: the unit-suite mode (no device): each case
 * is built, inferred, run on the CPU and prepared for the GPU (GEMMs
 * excepted: their cuBLASLt handle needs the device), and the GPU node's
 * grads are checked to be the CPU rule's; nothing is launched. */
static bool prepare_only;

typedef struct trun {
    const tcase *c;
    teexec_dtype dt;
    char name[112];
} trun;

/* ---- elements of any numeric dtype --------------------------------------------- */

static bool is_float_dt(teexec_dtype dt)
{
    return dt == KU_F32 || dt == KU_BF16 || dt == KU_F16 || dt == TEEXEC_DTYPE_DOUBLE;
}

static double sc_get(const tx_tensor *t, uint64_t i)
{
    const void *p = t->data;
    if (tx_numfmt_is_byte_float(t->dtype)) return tx_fp8_to_f32(t->dtype, ((const uint8_t *)p)[i]);
    switch (t->dtype) {
    case TEEXEC_DTYPE_FLOAT4E2M1: return tx_e2m1_to_f32((uint8_t)tx_subbyte_get(p, i, 4));
    case TEEXEC_DTYPE_INT4: return tx_subbyte_sext(tx_subbyte_get(p, i, 4), 4);
    case TEEXEC_DTYPE_UINT4: return tx_subbyte_get(p, i, 4);
    case TEEXEC_DTYPE_INT2: return tx_subbyte_sext(tx_subbyte_get(p, i, 2), 2);
    case TEEXEC_DTYPE_UINT2: return tx_subbyte_get(p, i, 2);
    case TEEXEC_DTYPE_FLOAT: return ((const float *)p)[i];
    case TEEXEC_DTYPE_DOUBLE: return ((const double *)p)[i];
    case TEEXEC_DTYPE_FLOAT16: return tx_f16_to_f32(((const uint16_t *)p)[i]);
    case TEEXEC_DTYPE_BFLOAT16: return tx_bf16_to_f32(((const uint16_t *)p)[i]);
    case TEEXEC_DTYPE_INT8: return ((const int8_t *)p)[i];
    case TEEXEC_DTYPE_INT16: return ((const int16_t *)p)[i];
    case TEEXEC_DTYPE_INT32: return ((const int32_t *)p)[i];
    case TEEXEC_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case TEEXEC_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case TEEXEC_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case TEEXEC_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    default: return ((const uint8_t *)p)[i]; /* UINT8, BOOL */
    }
}

/* Integer dtypes take the value truncated (and wrapped to their width). */
static void sc_set(tx_tensor *t, uint64_t i, double v)
{
    void *p = t->data;
    int64_t iv = isfinite(v) ? (int64_t)v : 0;
    if (tx_numfmt_is_byte_float(t->dtype)) {
        ((uint8_t *)p)[i] = tx_f32_to_fp8(t->dtype, (float)v, 1);
        return;
    }
    switch (t->dtype) {
    case TEEXEC_DTYPE_FLOAT4E2M1: tx_subbyte_set(p, i, 4, tx_f32_to_e2m1((float)v)); return;
    case TEEXEC_DTYPE_INT4:
    case TEEXEC_DTYPE_UINT4: tx_subbyte_set(p, i, 4, (unsigned)iv & 15u); return;
    case TEEXEC_DTYPE_INT2:
    case TEEXEC_DTYPE_UINT2: tx_subbyte_set(p, i, 2, (unsigned)iv & 3u); return;
    case TEEXEC_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case TEEXEC_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)p)[i] = tx_f32_to_f16((float)v); break;
    case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = tx_f32_to_bf16((float)v); break;
    case TEEXEC_DTYPE_INT8:
    case TEEXEC_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)iv; break;
    case TEEXEC_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case TEEXEC_DTYPE_INT16:
    case TEEXEC_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)iv; break;
    case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)iv; break;
    default: ((uint64_t *)p)[i] = (uint64_t)iv; break;
    }
}

/* TE's Q/DQ ops are in the trt domain. */
static const char *domain_of(const tcase *c) { return strncmp(c->op, "TRT_", 4) ? "" : "trt"; }

/* ---- building the node ---------------------------------------------------------- */

typedef struct tnode {
    tx_ir_node n;
    tx_ir_attr attrs[4];
    int32_t ins[MAXIO], outs[MAXIO];
    Onnx__TensorProto tp[4];
    int64_t tp_dims[4];
    uint8_t tp_raw[4][8];
} tnode;

static void make_node(tnode *t, const tcase *c)
{
    memset(t, 0, sizeof *t);
    t->n.name = (char *)c->name;
    t->n.label = (char *)c->name;
    t->n.op_type = (char *)c->op;
    t->n.domain = (char *)domain_of(c);
    t->n.overload = (char *)"";
    t->n.opset = c->opset;
    t->n.function = -1;
    for (int i = 0; i < c->n_in; i++) t->ins[i] = c->in[i].kind == IN_ABSENT ? -1 : i;
    for (int j = 0; j < c->n_out; j++) t->outs[j] = MAXIO + j;
    t->n.inputs = t->ins;
    t->n.n_inputs = (size_t)c->n_in;
    t->n.outputs = t->outs;
    t->n.n_outputs = (size_t)c->n_out;
    for (int a = 0; a < c->n_attr; a++) {
        tx_ir_attr *x = &t->attrs[a];
        const tattr *s = &c->attr[a];
        x->name = (char *)s->name;
        switch (s->type) {
        case A_IS:
            x->type = TX_IR_ATTR_INTS;
            x->ints = s->v;
            x->n_ints = (size_t)s->n;
            break;
        case A_F:
            x->type = TX_IR_ATTR_FLOAT;
            x->f = s->f;
            break;
        case A_S:
            x->type = TX_IR_ATTR_STRING;
            x->s = (char *)s->s;
            x->s_len = strlen(s->s);
            break;
        case A_T: {
            /* a one-element tensor with raw data */
            Onnx__TensorProto *tp = &t->tp[a];
            Onnx__TensorProto init = ONNX__TENSOR_PROTO__INIT;
            *tp = init;
            tp->data_type = s->t_dtype;
            tp->has_data_type = 1;
            t->tp_dims[a] = 1;
            tp->n_dims = 1;
            tp->dims = &t->tp_dims[a];
            tx_tensor v;
            int64_t one = 1;
            TG_OK(tx_tensor_alloc(&v, (teexec_dtype)s->t_dtype, 1, &one));
            sc_set(&v, 0, is_float_dt((teexec_dtype)s->t_dtype) ? (double)s->f : (double)s->i);
            memcpy(t->tp_raw[a], v.data, v.nbytes);
            tp->has_raw_data = 1;
            tp->raw_data.len = v.nbytes;
            tp->raw_data.data = t->tp_raw[a];
            tx_tensor_release(&v);
            x->type = TX_IR_ATTR_TENSOR;
            x->t = tp;
            break;
        }
        default:
            x->type = TX_IR_ATTR_INT;
            x->i = s->i;
            break;
        }
    }
    t->n.attrs = t->attrs;
    t->n.n_attrs = (size_t)c->n_attr;
}

static const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 0.5, 1.5, 2.5, -0.5,
                                  -2.5, 3.0, 1e30, 1e-30, 65504.0, -7.25, 1.0, -1.0};

static void make_input(tx_tensor *t, const tin *s, teexec_dtype fdt)
{
    teexec_dtype dt = s->dt == F ? fdt : (teexec_dtype)s->dt;
    bool fl = is_float_dt(dt);
    TG_OK(tx_tensor_alloc(t, dt, s->rank, s->dims));
    for (uint64_t i = 0; i < t->numel; i++) {
        double v = 0;
        switch (s->kind) {
        case IN_RAND: v = fl ? -2.0 + 4.0 * ku_urand() : (double)((int64_t)ku_below(2001) - 1000); break;
        case IN_POS: v = 0.5 + 1.5 * ku_urand(); break;
        case IN_INTS:
        case IN_IDX:
            assert_true((s->n_fvals ? (uint64_t)s->n_fvals : (uint64_t)s->n_vals) == t->numel);
            v = s->n_fvals && fl ? s->fvals[i] : (double)s->vals[i];
            break;
        case IN_BOOL: v = ku_below(2) != 0; break;
        case IN_IRAND:
            if (tx_numfmt_is_byte_float(dt)) {
                /* every bit pattern, in order */
                ((uint8_t *)t->data)[i] = (uint8_t)i;
                continue;
            }
            v = (double)((int64_t)ku_below(2001) - 1000);
            break;
        case IN_IDXR: v = (double)((int64_t)ku_below(2 * (uint64_t)s->vals[0]) - s->vals[0]); break;
        case IN_SMALL: v = (double)((int64_t)ku_below(9) - 4); break;
        case IN_SPECIAL:
            if (fl) {
                size_t ns = sizeof specials / sizeof specials[0];
                v = i < ns ? specials[i] : -3.0 + 6.0 * ku_urand();
            } else {
                unsigned bits = teexec_dtype_bits(dt);
                bool sgn = dt == TEEXEC_DTYPE_INT8 || dt == TEEXEC_DTYPE_INT16 ||
                           dt == TEEXEC_DTYPE_INT32 || dt == TEEXEC_DTYPE_INT64;
                double mx = sgn ? ldexp(1.0, (int)bits - 1) - 1 : ldexp(1.0, (int)bits) - 1;
                double mn = sgn ? -ldexp(1.0, (int)bits - 1) : 0;
                const double e[] = {mn, mx, 0, 1, sgn ? -1 : 2, 7};
                v = i < 6 ? e[i] : (double)((int64_t)ku_below(2001) - 1000);
                if (bits == 64 && i < 2) {
                    /* exact extremes of 64-bit types */
                    if (sgn) ((int64_t *)t->data)[i] = i == 0 ? INT64_MIN : INT64_MAX;
                    else ((uint64_t *)t->data)[i] = i == 0 ? 0 : UINT64_MAX;
                    continue;
                }
            }
            break;
        default: break;
        }
        sc_set(t, i, v);
    }
}

/* The trainer hands rules every input as double. */
static double *to_f64(const tx_tensor *t)
{
    double *d = calloc(t->numel + 1, sizeof *d);
    assert_non_null(d);
    for (uint64_t i = 0; i < t->numel; i++) d[i] = sc_get(t, i);
    return d;
}

/* ---- comparing -------------------------------------------------------------------- */

static double rtol_of(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_DOUBLE ? 1e-12 : ku_rtol(dt);
}

/* Bits equal (float NaN equal to any NaN). */
static void expect_bits(const char *what, const tx_tensor *ref, const void *dev)
{
    uint8_t *host = malloc(ref->nbytes + 1);
    assert_non_null(host);
    tg_download(host, dev, ref->nbytes);
    size_t es = tx_dtype_elem_size(ref->dtype), bad = 0;
    tx_tensor got = *ref;
    got.data = host;
    got.owns_data = false;
    for (uint64_t i = 0; es && i < ref->numel; i++) {
        if (!memcmp((const uint8_t *)ref->data + i * es, host + i * es, es)) continue;
        if (is_float_dt(ref->dtype) && isnan(sc_get(ref, i)) && isnan(sc_get(&got, i))) continue;
        if (!bad)
            fprintf(stderr, "%s: element %llu cpu %.17g gpu %.17g\n", what, (unsigned long long)i,
                    sc_get(ref, i), sc_get(&got, i));
        bad++;
    }
    if (!es) bad = tg_cmp_bytes(what, ref->data, host, ref->nbytes);
    free(host);
    char detail[96];
    snprintf(detail, sizeof detail, "%zu of %llu elements differ", bad,
             (unsigned long long)ref->numel);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

static void expect_close(const char *what, const tx_tensor *ref, const void *dev, double atol)
{
    uint8_t *host = malloc(ref->nbytes + 1);
    assert_non_null(host);
    tg_download(host, dev, ref->nbytes);
    tx_tensor got = *ref;
    got.data = host;
    got.owns_data = false;
    double rtol = rtol_of(ref->dtype), worst = 0;
    size_t bad = 0, same = 0, es = tx_dtype_elem_size(ref->dtype);
    for (uint64_t i = 0; i < ref->numel; i++) {
        double a = sc_get(ref, i), b = sc_get(&got, i);
        if (!memcmp((const uint8_t *)ref->data + i * es, host + i * es, es)) {
            same++;
            continue;
        }
        bool ok = (isnan(a) && isnan(b)) || a == b ||
                  (!isnan(b) && fabs(a - b) <= atol + rtol * fabs(a));
        if (!ok) {
            if (!bad)
                fprintf(stderr, "%s: element %llu cpu %.9g gpu %.9g\n", what,
                        (unsigned long long)i, a, b);
            bad++;
        }
        if (fabs(a) > 1e-3 && isfinite(a) && fabs(a - b) / fabs(a) > worst) worst = fabs(a - b) / fabs(a);
    }
    free(host);
    char detail[160];
    snprintf(detail, sizeof detail, "%zu of %llu outside tolerance, %zu bit-identical, worst rel %.3g",
             bad, (unsigned long long)ref->numel, same, worst);
    tg_record(what, bad == 0, detail);
    if (bad) fail_msg("%s: %s", what, detail);
}

static void expect(const char *what, const tcase *c, const tx_tensor *ref, const void *dev,
                   teexec_dtype run_dt)
{
    if ((c->flags & EXACT) || !is_float_dt(ref->dtype))
        expect_bits(what, ref, dev);
    else
        expect_close(what, ref, dev, run_dt == KU_F32 || run_dt == TEEXEC_DTYPE_DOUBLE
                                         ? c->atol32 : c->atol16);
}

/* ---- one case ------------------------------------------------------------------------ */

static void run_case(void **state)
{
    const trun *r = *state;
    const tcase *c = r->c;
    teexec_dtype dt = r->dt;
    ku_seed((uint64_t)strlen(c->name) * 131 + (uint64_t)c->n_in * 7 + (uint64_t)dt);
    tx_op_fn fn = tx_cpu_op_find(domain_of(c), c->op, c->opset);
    if (!fn) {
        /* an op the GPU has before the CPU does (Sin, Cos): nothing to compare with */
        fprintf(stderr, "%s: SKIP: no CPU kernel for %s-%lld\n", r->name, c->op,
                (long long)c->opset);
        skip();
    }
    tnode tn;
    make_node(&tn, c);
    const tx_ir_node *node = &tn.n;
    size_t n_in = (size_t)c->n_in, n_out = (size_t)c->n_out;

    tx_tensor in[MAXIO] = {{0}}, cout[MAXIO] = {{0}};
    const tx_tensor *pin[MAXIO] = {NULL}, *phost[MAXIO] = {NULL};
    tx_infer_value iv[MAXIO], ov[MAXIO];
    const tx_infer_value *piv[MAXIO] = {NULL};
    memset(iv, 0, sizeof iv);
    memset(ov, 0, sizeof ov);
    for (size_t i = 0; i < n_in; i++) {
        if (c->in[i].kind == IN_ABSENT) continue;
        make_input(&in[i], &c->in[i], dt);
        pin[i] = &in[i];
        if (c->in[i].kind == IN_INTS) phost[i] = &in[i];
        iv[i].dtype = in[i].dtype;
        iv[i].shape_known = true;
        iv[i].shape = tx_shape_of(&in[i]);
        iv[i].value = phost[i];
        piv[i] = &iv[i];
    }
    TG_OK(tx_infer_node(node, NULL, piv, ov));
    tx_tensor *pout[MAXIO] = {NULL};
    for (size_t j = 0; j < n_out; j++) {
        assert_true(ov[j].shape_known);
        TG_OK(tx_tensor_alloc(&cout[j], ov[j].dtype, ov[j].shape.rank, ov[j].shape.dims));
        pout[j] = &cout[j];
    }

    /* CPU forward */
    tx_op_call call = {.node = node, .n_in = n_in, .in = pin, .n_out = n_out, .out = pout};
    TG_OK(fn(&call));

    if (prepare_only) {
        bool gemm = (!strcmp(c->op, "MatMul") || !strcmp(c->op, "Gemm")) &&
                    (dt == KU_F32 || dt == KU_BF16 || dt == KU_F16) &&
                    (c->in[0].dt == F || c->in[0].dt == KU_F32 || c->in[0].dt == KU_BF16 ||
                     c->in[0].dt == KU_F16);
        if (!gemm) {
            tx_cuda_std_desc pd = {.node = node, .n_in = n_in, .in = pin, .in_host = phost,
                                   .n_out = n_out, .out = (const tx_tensor *const *)pout,
                                   .training = !(c->flags & NO_BWD)};
            tx_cuda_std_node *gn;
            TG_OK(tx_cuda_std_prepare(&pd, &gn));
            /* a node with grads must have the CPU rule to mirror */
            for (size_t i = 0; i < n_in; i++)
                if (tx_cuda_std_differentiable(gn, i)) assert_non_null(tx_bwd_find("", c->op));
            tx_cuda_std_node_free(gn);
        }
        for (size_t i = 0; i < MAXIO; i++) {
            tx_tensor_release(&in[i]);
            tx_tensor_release(&cout[i]);
            tx_infer_value_clear(&ov[i]);
        }
        tg_record(r->name, 1, gemm ? "CPU ran (GEMM: prepare needs the device)" : "CPU ran, GPU prepared");
        return;
    }

    /* GPU prepare and forward */
    tx_cuda_std_desc desc = {.node = node, .n_in = n_in, .in = pin, .in_host = phost,
                             .n_out = n_out, .out = (const tx_tensor *const *)pout,
                             .training = !(c->flags & NO_BWD)};
    /* bf16 GEMMs borrow a handle with a workspace (counted in the scratch);
     * the others make their own */
    tx_gemm_lt *shared = NULL;
    if ((!strcmp(c->op, "MatMul") || !strcmp(c->op, "Gemm")) && dt == KU_BF16) {
        TG_OK(tx_gemm_lt_create((size_t)1 << 20, &shared));
        desc.gemm = shared;
    }
    tx_cuda_std_node *gn;
    TG_OK(tx_cuda_std_prepare(&desc, &gn));
    if (shared) assert_true(tx_cuda_std_scratch_bytes(gn) >= ((size_t)1 << 20));
    size_t scratch_bytes = tx_cuda_std_scratch_bytes(gn);
    void *scratch = scratch_bytes ? tg_dev_alloc(scratch_bytes) : NULL;
    tx_tensor din[MAXIO], dout[MAXIO];
    const tx_tensor *pdin[MAXIO] = {NULL};
    tx_tensor *pdout[MAXIO] = {NULL};
    for (size_t i = 0; i < n_in; i++) {
        if (!pin[i]) continue;
        din[i] = in[i];
        din[i].owns_data = false;
        din[i].data = ku_upload(&in[i]);
        pdin[i] = &din[i];
    }
    for (size_t j = 0; j < n_out; j++) {
        dout[j] = cout[j];
        dout[j].owns_data = false;
        dout[j].data = tg_dev_alloc(cout[j].nbytes); /* poisoned: must be overwritten */
        pdout[j] = &dout[j];
    }
    TG_OK(tx_cuda_std_forward(gn, pdin, pdout, scratch, NULL));
    tg_sync(c->name);
    char what[192];
    for (size_t j = 0; j < n_out; j++) {
        snprintf(what, sizeof what, "%s y%zu", r->name, j);
        expect(what, c, &cout[j], dout[j].data, dt);
    }

    /* backward */
    bool any_f = false;
    for (size_t i = 0; i < n_in; i++) any_f = any_f || tx_cuda_std_differentiable(gn, i);
    if (!(c->flags & NO_BWD) && any_f) {
        tx_bwd_fn bf = tx_bwd_find("", c->op);
        assert_non_null(bf);
        double *in64[MAXIO] = {NULL}, *out64[MAXIO] = {NULL}, *gout64[MAXIO] = {NULL},
               *gin64[MAXIO] = {NULL};
        tx_tensor gout[MAXIO] = {{0}}, dgout[MAXIO], dgin[MAXIO], ref[MAXIO] = {{0}};
        const tx_tensor *pdgout[MAXIO] = {NULL};
        tx_tensor *pdgin[MAXIO] = {NULL};
        for (size_t i = 0; i < n_in; i++)
            if (pin[i]) in64[i] = to_f64(&in[i]);
        for (size_t j = 0; j < n_out; j++) {
            out64[j] = to_f64(&cout[j]);
            /* output grads only for float outputs (an index output has none) */
            if (!is_float_dt(cout[j].dtype)) continue;
            ku_make(&gout[j], cout[j].dtype, cout[j].rank, cout[j].dims, -1.0, 1.0);
            gout64[j] = to_f64(&gout[j]);
            dgout[j] = gout[j];
            dgout[j].owns_data = false;
            dgout[j].data = ku_upload(&gout[j]);
            pdgout[j] = &dgout[j];
        }
        for (size_t i = 0; i < n_in; i++) {
            if (!tx_cuda_std_differentiable(gn, i)) continue;
            gin64[i] = calloc(in[i].numel + 1, sizeof(double));
            assert_non_null(gin64[i]);
            dgin[i] = in[i];
            dgin[i].owns_data = false;
            dgin[i].data = tg_dev_alloc(in[i].nbytes); /* poisoned: must be overwritten */
            pdgin[i] = &dgin[i];
        }
        /* the CPU rule reads only the grads of the outputs that carry one */
        tx_bwd_call bc = {.node = node, .n_in = n_in, .in = pin,
                          .in64 = (const double *const *)in64, .n_out = n_out,
                          .out = (const tx_tensor *const *)pout,
                          .out64 = (const double *const *)out64,
                          .gout = (const double *const *)gout64, .gin = gin64};
        TG_OK(bf(&bc));
        TG_OK(tx_cuda_std_backward(gn, pdin, (const tx_tensor *const *)pdout, pdgout, pdgin,
                                   scratch, NULL));
        tg_sync(c->name);
        for (size_t i = 0; i < n_in; i++) {
            if (!pdgin[i]) continue;
            TG_OK(tx_tensor_alloc(&ref[i], in[i].dtype, in[i].rank, in[i].dims));
            for (uint64_t k = 0; k < in[i].numel; k++) sc_set(&ref[i], k, (float)gin64[i][k]);
            snprintf(what, sizeof what, "%s dx%zu", r->name, i);
            expect(what, c, &ref[i], dgin[i].data, dt);
            if (c->flags & TWICE) {
                /* determinism: the same bits again */
                uint8_t *first = malloc(in[i].nbytes + 1), *second = malloc(in[i].nbytes + 1);
                assert_true(first && second);
                tg_download(first, dgin[i].data, in[i].nbytes);
                TG_OK(tx_cuda_std_backward(gn, pdin, (const tx_tensor *const *)pdout, pdgout,
                                           pdgin, scratch, NULL));
                tg_sync(c->name);
                tg_download(second, dgin[i].data, in[i].nbytes);
                snprintf(what, sizeof what, "%s dx%zu twice", r->name, i);
                size_t diff = tg_cmp_bytes(what, first, second, in[i].nbytes);
                tg_record(what, diff == 0, diff ? "runs differ" : "bit-identical");
                free(first);
                free(second);
                assert_int_equal(diff, 0);
            }
        }
        for (size_t i = 0; i < MAXIO; i++) {
            free(in64[i]);
            free(out64[i]);
            free(gout64[i]);
            free(gin64[i]);
            if (pdgin[i]) tg_dev_free(dgin[i].data);
            if (pdgout[i]) tg_dev_free(dgout[i].data);
            tx_tensor_release(&gout[i]);
            tx_tensor_release(&ref[i]);
        }
    }

    tx_cuda_std_node_free(gn);
    tx_gemm_lt_destroy(shared);
    if (scratch) tg_dev_free(scratch);
    for (size_t i = 0; i < MAXIO; i++) {
        if (pdin[i]) tg_dev_free(din[i].data);
        if (pdout[i]) tg_dev_free(dout[i].data);
        tx_tensor_release(&in[i]);
        tx_tensor_release(&cout[i]);
        tx_infer_value_clear(&ov[i]);
    }
}

int sc_main(const char *program, const tcase *cases, size_t n_cases, void (*extra)(void **),
            const char *extra_name)
{
    const char *po = getenv("TEEXEC_STD_CASE_PREPARE_ONLY");
    prepare_only = po && po[0] == '1';
    if (!prepare_only) tg_require_gpu(program);
    else extra = NULL; /* the refusals run in their own unit test */
    trun *runs = calloc(3 * n_cases + 1, sizeof *runs);
    struct CMUnitTest *tests = calloc(3 * n_cases + 2, sizeof *tests);
    if (!runs || !tests) return 1;
    size_t nt = 0, nr = 0;
    if (extra) tests[nt++] = (struct CMUnitTest){extra_name, extra, NULL, NULL, NULL};
    static const teexec_dtype pass_dt[3] = {KU_F32, KU_BF16, KU_F16};
    static const char *const pass_name[3] = {"f32", "bf16", "f16"};
    for (size_t i = 0; i < n_cases; i++) {
        int passes = (cases[i].flags & ONCE) ? 1 : 3;
        for (int p = 0; p < passes; p++) {
            trun *r = &runs[nr++];
            r->c = &cases[i];
            r->dt = pass_dt[p];
            if (passes == 1) snprintf(r->name, sizeof r->name, "%s", cases[i].name);
            else snprintf(r->name, sizeof r->name, "%s %s", cases[i].name, pass_name[p]);
            tests[nt++] = (struct CMUnitTest){r->name, run_case, NULL, NULL, r};
        }
    }
    int rc = _cmocka_run_group_tests(program, tests, nt, NULL, NULL);
    free(runs);
    free(tests);
    return rc;
}
