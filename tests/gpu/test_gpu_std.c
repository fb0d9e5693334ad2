/* GPU test: the standard ONNX ops on the GPU (exec/cuda/std_cuda.h) against
 * the CPU backend's kernels (exec/cpu_ops.h, forward) and the CPU backward
 * rules (exec/train_internal.h, FP64), in FLOAT, BFLOAT16 and FLOAT16, with
 * broadcasting. Each case is one node built in memory; output shapes come
 * from shape inference (import/shape_infer.h), as the executor gets them.
 * Data movement (reshapes, Transpose, Slice, Split, Concat, Gather, Expand,
 * Where, Cast) must match bit for bit, forward and backward where no sum
 * is involved; arithmetic within DESIGN.md's tolerances (plus an absolute
 * term where a GEMM or a reduction sums signed terms). Broadcast-grad
 * reductions are also checked to be bit-identical over two runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/cpu_ops.h"
#include "exec/cuda/std_cuda.h"
#include "exec/train_internal.h"
#include "import/shape_infer.h"
#include "kernels/cuda/gemm_lt.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/kern_util.h"

#define F (-1) /* the run's float dtype */
#define I64 TEEXEC_DTYPE_INT64
#define I32 TEEXEC_DTYPE_INT32
#define BOOL TEEXEC_DTYPE_BOOL
#define MAXIO 5

enum { IN_RAND, IN_POS, IN_INTS, IN_IDX, IN_BOOL, IN_IRAND, IN_IDXR, IN_ABSENT };
enum { EXACT = 1, NO_BWD = 2, TWICE = 4 };

typedef struct tattr {
    const char *name;
    int ints; /* 1: INTS attribute from v[0..n) */
    int64_t i;
    int64_t v[8];
    int n;
} tattr;

typedef struct tin {
    int dt; /* F or a dtype */
    int rank;
    int64_t dims[6];
    int kind;
    int64_t vals[12];
    int n_vals;
} tin;

typedef struct tcase {
    const char *name;
    const char *op;
    int64_t opset;
    int n_attr;
    tattr attr[3];
    int n_in;
    tin in[MAXIO];
    int n_out;
    int flags;
    double atol32, atol16;
} tcase;

typedef struct trun {
    const tcase *c;
    teexec_dtype dt;
    char name[96];
} trun;

/* ---- building the node --------------------------------------------------- */

typedef struct tnode {
    tx_ir_node n;
    tx_ir_attr attrs[3];
    int32_t ins[MAXIO], outs[MAXIO];
} tnode;

static void make_node(tnode *t, const tcase *c)
{
    memset(t, 0, sizeof *t);
    t->n.name = (char *)c->name;
    t->n.label = (char *)c->name;
    t->n.op_type = (char *)c->op;
    t->n.domain = (char *)"";
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
        x->name = (char *)c->attr[a].name;
        if (c->attr[a].ints) {
            x->type = TX_IR_ATTR_INTS;
            x->ints = c->attr[a].v;
            x->n_ints = (size_t)c->attr[a].n;
        } else {
            x->type = TX_IR_ATTR_INT;
            x->i = c->attr[a].i;
        }
    }
    t->n.attrs = t->attrs;
    t->n.n_attrs = (size_t)c->n_attr;
}

static bool is_f(teexec_dtype dt)
{
    return dt == KU_F32 || dt == KU_BF16 || dt == KU_F16;
}

static void make_input(tx_tensor *t, const tin *s, teexec_dtype fdt)
{
    teexec_dtype dt = s->dt == F ? fdt : (teexec_dtype)s->dt;
    switch (s->kind) {
    case IN_RAND: ku_make(t, dt, s->rank, s->dims, -2.0, 2.0); break;
    case IN_POS: ku_make(t, dt, s->rank, s->dims, 0.5, 2.0); break;
    case IN_INTS:
    case IN_IDX:
        TG_OK(tx_tensor_alloc(t, dt, s->rank, s->dims));
        assert_int_equal(t->numel, (uint64_t)s->n_vals);
        for (int i = 0; i < s->n_vals; i++) {
            if (is_f(dt)) ku_set(t, (uint64_t)i, (float)s->vals[i]);
            else if (dt == I64) ((int64_t *)t->data)[i] = s->vals[i];
            else ((int32_t *)t->data)[i] = (int32_t)s->vals[i];
        }
        break;
    case IN_IDXR: /* random indices in [-vals[0], vals[0]) */
        TG_OK(tx_tensor_alloc(t, dt, s->rank, s->dims));
        for (uint64_t i = 0; i < t->numel; i++) {
            int64_t v = (int64_t)ku_below(2 * (uint64_t)s->vals[0]) - s->vals[0];
            if (dt == I64) ((int64_t *)t->data)[i] = v;
            else ((int32_t *)t->data)[i] = (int32_t)v;
        }
        break;
    case IN_BOOL:
        TG_OK(tx_tensor_alloc(t, dt, s->rank, s->dims));
        for (uint64_t i = 0; i < t->numel; i++) ((uint8_t *)t->data)[i] = ku_below(2) != 0;
        break;
    case IN_IRAND:
        TG_OK(tx_tensor_alloc(t, dt, s->rank, s->dims));
        for (uint64_t i = 0; i < t->numel; i++) {
            int64_t v = (int64_t)ku_below(2001) - 1000;
            if (dt == I64) ((int64_t *)t->data)[i] = v;
            else if (dt == I32) ((int32_t *)t->data)[i] = (int32_t)v;
            else ((uint8_t *)t->data)[i] = (uint8_t)v;
        }
        break;
    default: break;
    }
}

/* The trainer hands rules every numeric input as double (Where's bool
 * condition too). */
static double *to_f64(const tx_tensor *t)
{
    double *d = calloc(t->numel + 1, sizeof *d);
    assert_non_null(d);
    for (uint64_t i = 0; i < t->numel; i++) {
        if (t->dtype == BOOL) d[i] = ((const uint8_t *)t->data)[i];
        else if (t->dtype == I64) d[i] = (double)((const int64_t *)t->data)[i];
        else if (t->dtype == I32) d[i] = ((const int32_t *)t->data)[i];
        else d[i] = ku_get(t, i);
    }
    return d;
}

/* ---- one case ------------------------------------------------------------- */

static void run_case(void **state)
{
    const trun *r = *state;
    const tcase *c = r->c;
    teexec_dtype dt = r->dt;
    ku_seed((uint64_t)strlen(c->name) * 131 + (uint64_t)c->n_in * 7 + (uint64_t)dt);
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
    tx_op_fn fn = tx_cpu_op_find("", c->op, c->opset);
    assert_non_null(fn);
    tx_op_call call = {.node = node, .n_in = n_in, .in = pin, .n_out = n_out, .out = pout};
    TG_OK(fn(&call));

    /* GPU prepare and forward */
    tx_cuda_std_desc desc = {.node = node, .n_in = n_in, .in = pin, .in_host = phost,
                             .n_out = n_out, .out = (const tx_tensor *const *)pout,
                             .training = true};
    /* bf16 MatMuls borrow a handle with a workspace (counted in the
     * scratch); the others make their own */
    tx_gemm_lt *shared = NULL;
    if (!strcmp(c->op, "MatMul") && dt == KU_BF16) {
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
        dout[j].data = tg_dev_alloc(cout[j].nbytes);
        pdout[j] = &dout[j];
    }
    TG_OK(tx_cuda_std_forward(gn, pdin, pdout, scratch, NULL));
    tg_sync(c->name);
    char what[160];
    for (size_t j = 0; j < n_out; j++) {
        snprintf(what, sizeof what, "%s y%zu", r->name, j);
        if ((c->flags & EXACT) || !is_f(cout[j].dtype))
            ku_expect_bits(what, &cout[j], dout[j].data);
        else
            ku_expect_close(what, &cout[j], dout[j].data, ku_rtol(cout[j].dtype),
                            dt == KU_F32 ? c->atol32 : c->atol16);
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
            if (pin[i] && (is_f(in[i].dtype) || in[i].dtype == BOOL || in[i].dtype == I64 ||
                           in[i].dtype == I32))
                in64[i] = to_f64(&in[i]);
        for (size_t j = 0; j < n_out; j++) {
            out64[j] = to_f64(&cout[j]);
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
            for (uint64_t k = 0; k < in[i].numel; k++) ku_set(&ref[i], k, (float)gin64[i][k]);
            snprintf(what, sizeof what, "%s dx%zu", r->name, i);
            if (c->flags & EXACT)
                ku_expect_bits(what, &ref[i], dgin[i].data);
            else
                ku_expect_close(what, &ref[i], dgin[i].data, ku_rtol(in[i].dtype),
                                dt == KU_F32 ? c->atol32 : c->atol16);
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

/* ---- the cases ------------------------------------------------------------------ */

#define A_INT(nm, val) {.name = nm, .i = val}
#define A_INTS(nm, ...) {.name = nm, .ints = 1, .v = {__VA_ARGS__}, \
                         .n = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}
#define T(r, ...) {.dt = F, .rank = r, .dims = {__VA_ARGS__}, .kind = IN_RAND}
#define TP(r, ...) {.dt = F, .rank = r, .dims = {__VA_ARGS__}, .kind = IN_POS}
#define TD(d, k, r, ...) {.dt = d, .rank = r, .dims = {__VA_ARGS__}, .kind = k}
#define INTS(...) {.dt = I64, .rank = 1, \
                   .dims = {sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}, \
                   .kind = IN_INTS, .vals = {__VA_ARGS__}, \
                   .n_vals = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}
#define IDX(d, r, dim0, dim1, ...) {.dt = d, .rank = r, .dims = {dim0, dim1}, .kind = IN_IDX, \
                   .vals = {__VA_ARGS__}, .n_vals = sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)}

static const tcase cases[] = {
    /* reshapes: copies, exact */
    {"reshape", "Reshape", 14, 0, {{0}}, 2, {T(3, 2, 3, 4), INTS(6, -1)}, 1, EXACT, 0, 0},
    {"flatten", "Flatten", 13, 1, {A_INT("axis", 2)}, 1, {T(4, 2, 3, 4, 5)}, 1, EXACT, 0, 0},
    {"squeeze", "Squeeze", 13, 0, {{0}}, 2, {T(4, 2, 1, 4, 1), INTS(1, -1)}, 1, EXACT, 0, 0},
    {"unsqueeze", "Unsqueeze", 13, 0, {{0}}, 2, {T(2, 3, 4), INTS(0, 3)}, 1, EXACT, 0, 0},
    {"unsqueeze_v11", "Unsqueeze", 11, 1, {A_INTS("axes", 1)}, 1, {T(2, 3, 4)}, 1, EXACT, 0, 0},
    {"identity", "Identity", 16, 0, {{0}}, 1, {T(2, 5, 3)}, 1, EXACT, 0, 0},
    /* transposes */
    {"transpose_0213", "Transpose", 13, 1, {A_INTS("perm", 0, 2, 1, 3)}, 1, {T(4, 2, 3, 4, 5)}, 1, EXACT, 0, 0},
    {"transpose_default", "Transpose", 13, 0, {{0}}, 1, {T(3, 2, 3, 4)}, 1, EXACT, 0, 0},
    {"transpose_rank6", "Transpose", 13, 1, {A_INTS("perm", 5, 3, 1, 0, 2, 4)}, 1,
     {T(6, 2, 3, 1, 4, 2, 3)}, 1, EXACT, 0, 0},
    {"transpose_int64", "Transpose", 13, 1, {A_INTS("perm", 1, 0)}, 1,
     {TD(I64, IN_IRAND, 2, 5, 7)}, 1, EXACT, 0, 0},
    /* Split: input form, attribute form, equal parts */
    {"split_input", "Split", 13, 1, {A_INT("axis", 1)}, 2, {T(3, 2, 6, 3), INTS(2, 3, 1)}, 3, EXACT, 0, 0},
    {"split_attr_v11", "Split", 11, 2, {A_INT("axis", -1), A_INTS("split", 1, 4)}, 1,
     {T(2, 3, 5)}, 2, EXACT, 0, 0},
    {"split_equal", "Split", 13, 1, {A_INT("axis", 0)}, 1, {T(2, 6, 4)}, 3, EXACT, 0, 0},
    /* Slice: steps, negative steps, clamping; the attribute form */
    {"slice_steps", "Slice", 13, 0, {{0}}, 5,
     {T(3, 4, 10, 6), INTS(1, 8, 0), INTS(4, 1, 100), INTS(0, 1, 2), INTS(1, -2, 2)}, 1, EXACT, 0, 0},
    {"slice_neg_axes", "Slice", 13, 0, {{0}}, 4,
     {T(2, 5, 8), INTS(-3), INTS(-1), INTS(-1)}, 1, EXACT, 0, 0},
    {"slice_v9", "Slice", 9, 3,
     {A_INTS("starts", 1, 0), A_INTS("ends", 3, -1), A_INTS("axes", 0, 1)}, 1, {T(2, 4, 6)}, 1, EXACT, 0, 0},
    /* Concat */
    {"concat_last", "Concat", 13, 1, {A_INT("axis", -1)}, 3, {T(3, 2, 3, 1), T(3, 2, 3, 4), T(3, 2, 3, 2)},
     1, EXACT, 0, 0},
    {"concat_axis0", "Concat", 13, 1, {A_INT("axis", 0)}, 2, {T(2, 1, 5), T(2, 3, 5)}, 1, EXACT, 0, 0},
    /* Gather: repeated and negative indices, int64 and int32, axis 0 and 1 */
    {"gather_axis0_i64", "Gather", 13, 1, {A_INT("axis", 0)}, 2,
     {T(2, 7, 5), IDX(I64, 2, 2, 3, 1, 6, 1, -1, 0, 1)}, 1, EXACT, 0, 0},
    {"gather_axis1_i32", "Gather", 13, 1, {A_INT("axis", 1)}, 2,
     {T(3, 2, 6, 4), IDX(I32, 1, 5, 0, 5, 0, 2, -6, 3)}, 1, EXACT, 0, 0},
    {"gather_many_idx", "Gather", 13, 1, {A_INT("axis", 0)}, 2,
     {T(2, 50, 300), {.dt = I64, .rank = 2, .dims = {3, 500}, .kind = IN_IDXR, .vals = {50}}},
     1, EXACT, 0, 0},
    {"gather_scalar_idx", "Gather", 13, 1, {A_INT("axis", 1)}, 2,
     {T(2, 3, 4), IDX(I64, 0, 0, 0, 2)}, 1, EXACT, 0, 0},
    /* Expand */
    {"expand", "Expand", 13, 0, {{0}}, 2, {T(2, 3, 1), INTS(2, 3, 4)}, 1, 0, 1e-6, 1e-2},
    /* broadcasting arithmetic */
    {"add_bcast", "Add", 14, 0, {{0}}, 2, {T(3, 4, 1, 5), T(2, 3, 1)}, 1, TWICE, 1e-6, 1e-2},
    {"add_bias_rows", "Add", 14, 0, {{0}}, 2, {T(2, 600, 24), T(1, 24)}, 1, TWICE, 1e-5, 1e-2},
    {"sub_bcast", "Sub", 14, 0, {{0}}, 2, {T(3, 2, 3, 4), T(1, 4)}, 1, 0, 1e-6, 1e-2},
    {"mul_bcast", "Mul", 14, 0, {{0}}, 2, {T(3, 2, 3, 4), T(3, 2, 1, 4)}, 1, 0, 1e-6, 1e-2},
    {"mul_scalar", "Mul", 14, 0, {{0}}, 2, {T(2, 300, 3), T(0, 0)}, 1, TWICE, 1e-5, 2e-2},
    {"div_bcast", "Div", 14, 0, {{0}}, 2, {T(2, 3, 4), TP(2, 3, 1)}, 1, 0, 1e-6, 1e-2},
    {"pow_square", "Pow", 15, 0, {{0}}, 2,
     {T(2, 3, 4), {.dt = F, .rank = 0, .kind = IN_INTS, .vals = {2}, .n_vals = 1}}, 1, 0, 1e-6, 1e-2},
    {"pow_general", "Pow", 15, 0, {{0}}, 2, {TP(2, 3, 4), T(1, 4)}, 1, 0, 1e-5, 1e-2},
    {"neg", "Neg", 13, 0, {{0}}, 1, {T(2, 3, 5)}, 1, 0, 0, 0},
    {"sqrt", "Sqrt", 13, 0, {{0}}, 1, {TP(2, 3, 5)}, 1, 0, 1e-6, 1e-2},
    {"reciprocal", "Reciprocal", 13, 0, {{0}}, 1, {TP(2, 3, 5)}, 1, 0, 1e-6, 1e-2},
    /* Where: bool condition, broadcasting; int64 data forward */
    {"where_bcast", "Where", 16, 0, {{0}}, 3,
     {TD(BOOL, IN_BOOL, 2, 3, 1), T(2, 3, 4), T(1, 4)}, 1, EXACT, 0, 0},
    {"where_int64", "Where", 16, 0, {{0}}, 3,
     {TD(BOOL, IN_BOOL, 2, 3, 4), TD(I64, IN_IRAND, 1, 4), TD(I64, IN_IRAND, 2, 3, 4)}, 1, EXACT, 0, 0},
    /* Softmax: last axis, a middle axis (strided rows), legacy 2-D, log */
    {"softmax_last", "Softmax", 13, 0, {{0}}, 1, {T(3, 2, 3, 300)}, 1, 0, 1e-6, 1e-2},
    {"softmax_axis1", "Softmax", 13, 1, {A_INT("axis", 1)}, 1, {T(3, 2, 7, 5)}, 1, 0, 1e-6, 1e-2},
    {"softmax_legacy", "Softmax", 11, 1, {A_INT("axis", 1)}, 1, {T(3, 2, 3, 4)}, 1, 0, 1e-6, 1e-2},
    {"logsoftmax", "LogSoftmax", 13, 0, {{0}}, 1, {T(2, 4, 33)}, 1, 0, 1e-6, 1e-2},
    /* MatMul: folded batch, batched, broadcast A (grads summed), 1-D */
    {"matmul_fold", "MatMul", 13, 0, {{0}}, 2, {T(4, 2, 3, 5, 16), T(2, 16, 6)}, 1, 0, 2e-5, 5e-2},
    {"matmul_batched", "MatMul", 13, 0, {{0}}, 2, {T(4, 2, 3, 5, 8), T(4, 2, 3, 8, 6)}, 1, 0, 2e-5, 5e-2},
    {"matmul_bcast_a", "MatMul", 13, 0, {{0}}, 2, {T(2, 5, 8), T(3, 3, 8, 4)}, 1, 0, 2e-5, 5e-2},
    {"matmul_bcast_both", "MatMul", 13, 0, {{0}}, 2, {T(4, 2, 1, 5, 8), T(3, 3, 8, 2)}, 1, 0, 2e-5, 5e-2},
    {"matmul_vec", "MatMul", 13, 0, {{0}}, 2, {T(1, 8), T(2, 8, 3)}, 1, 0, 2e-5, 5e-2},
    {"matmul_vec_b", "MatMul", 13, 0, {{0}}, 2, {T(3, 2, 4, 8), T(1, 8)}, 1, 0, 2e-5, 5e-2},
};

/* Casts: fixed dtypes (the float run dtype is not used). */
static const tcase cast_cases[] = {
    {"cast_f32_bf16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BFLOAT16)}, 1,
     {TD(KU_F32, IN_RAND, 2, 7, 9)}, 1, 0, 1e-6, 1e-2},
    {"cast_bf16_f32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(KU_BF16, IN_RAND, 2, 7, 9)}, 1, EXACT, 0, 0},
    {"cast_f16_f32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(KU_F16, IN_RAND, 2, 7, 9)}, 1, EXACT, 0, 0},
    {"cast_f32_i32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_INT32)}, 1,
     {TD(KU_F32, IN_RAND, 2, 7, 9)}, 1, EXACT, 0, 0},
    {"cast_i64_f32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(I64, IN_IRAND, 1, 40)}, 1, EXACT, 0, 0},
    {"cast_i64_i32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_INT32)}, 1,
     {TD(I64, IN_IRAND, 1, 40)}, 1, EXACT, 0, 0},
    {"cast_bool_bf16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BFLOAT16)}, 1,
     {TD(BOOL, IN_BOOL, 1, 40)}, 1, EXACT, 0, 0},
    {"cast_f32_bool", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BOOL)}, 1,
     {TD(KU_F32, IN_RAND, 1, 40)}, 1, EXACT, 0, 0},
};

/* ---- refusals at prepare (no device work) ------------------------------------------ */

static void refusals(void **state)
{
    (void)state;
    assert_true(tx_cuda_std_supported("", "Slice"));
    assert_true(tx_cuda_std_supported("ai.onnx", "MatMul"));
    assert_false(tx_cuda_std_supported("", "Einsum"));
    assert_false(tx_cuda_std_supported("te.ops", "Add"));
    /* Slice whose starts are only known at run time */
    tcase c = {"slice_dynamic", "Slice", 13, 0, {{0}}, 3, {T(1, 8), INTS(1), INTS(4)}, 1, 0, 0, 0};
    tnode tn;
    make_node(&tn, &c);
    tx_tensor x = {0}, s = {0}, e = {0}, y = {0};
    make_input(&x, &c.in[0], KU_F32);
    make_input(&s, &c.in[1], KU_F32);
    make_input(&e, &c.in[2], KU_F32);
    int64_t yd[1] = {3};
    TG_OK(tx_tensor_alloc(&y, KU_F32, 1, yd));
    const tx_tensor *in[3] = {&x, &s, &e}, *host[3] = {NULL, NULL, &e}, *out[1] = {&y};
    tx_cuda_std_desc d = {.node = &tn.n, .n_in = 3, .in = in, .in_host = host, .n_out = 1,
                          .out = out};
    tx_cuda_std_node *n = NULL;
    teexec_status *st = tx_cuda_std_prepare(&d, &n);
    assert_non_null(st);
    assert_null(n);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "slice_dynamic"));
    teexec_status_destroy(st);
    /* with the value known it prepares */
    host[1] = &s;
    TG_OK(tx_cuda_std_prepare(&d, &n));
    assert_false(tx_cuda_std_is_alias(n));
    assert_true(tx_cuda_std_differentiable(n, 0));
    assert_false(tx_cuda_std_differentiable(n, 1));
    tx_cuda_std_node_free(n);
    /* integer arithmetic is not run on the GPU */
    tcase ca = {"add_int", "Add", 14, 0, {{0}}, 2, {TD(I64, IN_IRAND, 1, 4), TD(I64, IN_IRAND, 1, 4)}, 1, 0, 0, 0};
    make_node(&tn, &ca);
    tx_tensor a = {0}, b = {0}, ya = {0};
    make_input(&a, &ca.in[0], KU_F32);
    make_input(&b, &ca.in[1], KU_F32);
    int64_t d4[1] = {4};
    TG_OK(tx_tensor_alloc(&ya, I64, 1, d4));
    const tx_tensor *ina[2] = {&a, &b}, *outa[1] = {&ya};
    tx_cuda_std_desc da = {.node = &tn.n, .n_in = 2, .in = ina, .n_out = 1, .out = outa};
    st = tx_cuda_std_prepare(&da, &n);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    teexec_status_destroy(st);
    /* a reshape aliases */
    tcase cr = {"reshape_alias", "Reshape", 14, 0, {{0}}, 2, {T(2, 2, 3), INTS(6)}, 1, 0, 0, 0};
    make_node(&tn, &cr);
    int64_t d6[1] = {6};
    tx_tensor yr = {0};
    TG_OK(tx_tensor_alloc(&yr, KU_F32, 1, d6));
    tx_tensor xr = {0}, sr = {0};
    make_input(&xr, &cr.in[0], KU_F32);
    make_input(&sr, &cr.in[1], KU_F32);
    const tx_tensor *inr[2] = {&xr, &sr}, *outr[1] = {&yr};
    tx_cuda_std_desc dr = {.node = &tn.n, .n_in = 2, .in = inr, .n_out = 1, .out = outr};
    TG_OK(tx_cuda_std_prepare(&dr, &n));
    assert_true(tx_cuda_std_is_alias(n));
    assert_false(tx_cuda_std_differentiable(n, 1));
    tx_cuda_std_node_free(n);
    tx_tensor *all[] = {&x, &s, &e, &y, &a, &b, &ya, &yr, &xr, &sr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tx_tensor_release(all[i]);
    tg_record("std refusals", 1, "prepare refuses unknown attributes and integer math");
}

int main(void)
{
#ifdef STD_PREPARE_ONLY
    /* the unit suite: prepare-time logic only, no device work */
    const struct CMUnitTest unit[] = {cmocka_unit_test(refusals)};
    return cmocka_run_group_tests(unit, NULL, NULL);
#endif
    tg_require_gpu("test_gpu_std");
    enum { NC = sizeof cases / sizeof cases[0], NK = sizeof cast_cases / sizeof cast_cases[0] };
    static trun runs[3 * NC + NK];
    static struct CMUnitTest tests[3 * NC + NK + 1];
    size_t nt = 0;
    tests[nt++] = (struct CMUnitTest){"refusals", refusals, NULL, NULL, NULL};
    size_t nr = 0;
    static const teexec_dtype pass_dt[3] = {KU_F32, KU_BF16, KU_F16};
    static const char *const pass_name[3] = {"f32", "bf16", "f16"};
    for (int pass = 0; pass < 3; pass++)
        for (size_t i = 0; i < NC; i++) {
            trun *r = &runs[nr++];
            r->c = &cases[i];
            r->dt = pass_dt[pass];
            snprintf(r->name, sizeof r->name, "%s %s", cases[i].name, pass_name[pass]);
            tests[nt++] = (struct CMUnitTest){r->name, run_case, NULL, NULL, r};
        }
    for (size_t i = 0; i < NK; i++) {
        trun *r = &runs[nr++];
        r->c = &cast_cases[i];
        r->dt = KU_F32;
        snprintf(r->name, sizeof r->name, "%s", cast_cases[i].name);
        tests[nt++] = (struct CMUnitTest){r->name, run_case, NULL, NULL, r};
    }
    return _cmocka_run_group_tests("test_gpu_std", tests, nt, NULL, NULL);
}
