/* Unit test and generator of docs/ops-by-device.md: per standard op (and
 * Q/DQ / trt op), what each device runs - forward, backward, dtypes - read
 * from the code, not written down:
 *   CPU forward   exec/cpu_ops.c's table (tx_cpu_op_at)
 *   CPU backward  exec/backward_std.c's table (tx_bwd_op_at)
 *   CPU dtypes    probed: a small node of the op per dtype, through shape
 *                 inference and the CPU kernel; the dtypes it runs
 *   CUDA          the registry of exec/cuda/std_cuda_ops.h (forward,
 *                 backward, dtypes), and in a CUDA build each probed dtype
 *                 also through the CUDA node's prepare (no device work;
 *                 the cuBLASLt GEMMs excepted, whose handle needs one)
 * It FAILS when the CUDA side lacks an op the CPU runs, a backward the CPU
 * trainer has, or a dtype the CPU accepts; when a CPU op has no probe
 * recipe here; and when docs/ops-by-device.md is not what the code says
 * (regenerate it: test_op_parity --write docs/ops-by-device.md, or
 * `ninja -C build/dev ops-by-device`). te.ops ops are not in the table
 * (exec/cuda/te_cuda.h runs every te.ops op). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/half.h"
#include "base/numfmt.h"
#include "exec/cpu_ops.h"
#include "exec/cuda/std_cuda_ops.h"
#include "exec/train_internal.h"
#include "import/shape_infer.h"
#include "onnx.pb-c.h"
#if TX_PARITY_CUDA
#include "exec/cuda/std_cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- probe recipes ------------------------------------------------------------ */

/* One letter per input:
 *   d  data of the probed dtype [2, 3]    D  data [3, 3]       s  a scalar
 *   S  a scalar known before running (Range's)
 *   c  data [1, 2, 3, 3] (an image)       W  data [2, 2, 2, 2] (its filters)
 *   a  data [1, 1, 2, 2] (Q, K, V)        n  int64 zeros [2, 1] (GatherND's)
 *   u  data [1, 6]                        w  data [2, 32]      x  data [2, 16]
 *   v  data [3] (a per-column parameter)
 *   b  bool [2, 3]                        F  FLOAT scalar 1    f  FLOAT [1]
 *   z  int64 zeros [2, 3]                 e  UINT8 [2, 1] (E8M0 codes 127)
 *   i  int64 1-D from ints[]              k  int64 scalar from ints[]
 *   -  omitted
 * `tensor_attr`: the op takes the value attribute as a one-element tensor of
 * the probed dtype (Constant, ConstantOfShape). */
typedef struct recipe {
    const char *domain, *op;
    int64_t opset;
    const char *ins;
    int64_t ints[3][4]; /* values of the i/k inputs, in order */
    int n_ints[3];
    int n_out;
    const char *attr_s, *attr_sv; /* one string attribute */
    const char *attr_i;
    int64_t attr_iv;              /* one int attribute */
    int tensor_attr;
} recipe;

#define R(op, opset, ins) {"", op, opset, ins, {{0}}, {0}, 1, NULL, NULL, NULL, 0, 0}
#define RI(op, opset, ins, a, b, c) \
    {"", op, opset, ins, {{a}, {b}, {c}}, {1, 1, 1}, 1, NULL, NULL, NULL, 0, 0}
#define RV(op, opset, ins, n0, ...) \
    {"", op, opset, ins, {{__VA_ARGS__}}, {n0}, 1, NULL, NULL, NULL, 0, 0}

static const recipe recipes[] = {
    R("Neg", 13, "d"), R("Abs", 13, "d"), R("Sign", 13, "d"), R("Relu", 14, "d"),
    R("Sqrt", 13, "d"), R("Reciprocal", 13, "d"), R("Exp", 13, "d"), R("Log", 13, "d"),
    R("Erf", 13, "d"), R("Tanh", 13, "d"), R("Sigmoid", 13, "d"), R("LeakyRelu", 16, "d"),
    R("Elu", 6, "d"), R("Softplus", 1, "d"), R("Floor", 13, "d"), R("Ceil", 13, "d"),
    R("Round", 11, "d"), R("Gelu", 20, "d"), R("Not", 1, "d"), R("IsNaN", 13, "d"),
    R("IsInf", 10, "d"), R("Clip", 13, "dss"), R("Sin", 7, "d"), R("Cos", 7, "d"),
    R("Add", 14, "dd"), R("Sub", 14, "dd"), R("Mul", 14, "dd"), R("Div", 14, "dd"),
    R("Pow", 15, "dd"), R("Equal", 13, "dd"), R("Less", 13, "dd"), R("LessOrEqual", 16, "dd"),
    R("Greater", 13, "dd"), R("GreaterOrEqual", 16, "dd"), R("And", 7, "dd"), R("Or", 7, "dd"),
    R("Xor", 7, "dd"), R("Min", 13, "dd"), R("Max", 13, "dd"), R("Sum", 13, "dd"),
    R("Mean", 13, "dd"), R("Where", 16, "bdd"), R("MatMul", 13, "DD"), R("Gemm", 13, "DD"),
    {"", "Einsum", 12, "D", {{0}}, {0}, 1, "equation", "ij->ji", NULL, 0, 0},
    R("Softmax", 13, "d"), R("LogSoftmax", 13, "d"), R("LayerNormalization", 17, "dvv"),
    R("ReduceSum", 13, "d"), R("ReduceMean", 13, "d"), R("ReduceMax", 13, "d"),
    R("ReduceMin", 13, "d"), R("ReduceProd", 13, "d"), R("ArgMax", 13, "d"),
    R("ArgMin", 13, "d"), RV("TopK", 11, "di", 1, 2), RI("CumSum", 14, "dk", 1, 0, 0),
    RV("Reshape", 14, "di", 2, 3, 2), RV("Squeeze", 13, "ui", 1, 0), RV("Unsqueeze", 13, "di", 1, 0),
    R("Flatten", 13, "d"), R("Identity", 16, "d"), R("Dropout", 13, "d"), R("Shape", 15, "d"),
    R("Size", 13, "d"),
    {"", "Constant", 13, "", {{0}}, {0}, 1, NULL, NULL, NULL, 0, 1},
    {"", "ConstantOfShape", 9, "i", {{2, 3}}, {2}, 1, NULL, NULL, NULL, 0, 1},
    {"", "Cast", 13, "d", {{0}}, {0}, 1, NULL, NULL, "to", TEEXEC_DTYPE_FLOAT, 0},
    R("CastLike", 15, "df"), R("Transpose", 13, "d"),
    {"", "Concat", 13, "dd", {{0}}, {0}, 1, NULL, NULL, "axis", 0, 0},
    {"", "Split", 13, "d", {{0}}, {0}, 3, NULL, NULL, "axis", 1, 0},
    {"", "Slice", 13, "dii", {{0}, {2}}, {1, 1}, 1, NULL, NULL, NULL, 0, 0},
    RV("Gather", 13, "di", 2, 0, 1),
    R("GatherElements", 13, "dz"), RV("Expand", 13, "di", 2, 2, 3), RV("Tile", 13, "di", 2, 1, 2),
    R("Range", 11, "SSS"), R("Trilu", 14, "D"),
    R("Conv", 11, "cW"), R("GatherND", 13, "dn"), R("RMSNormalization", 23, "dv"),
    R("Attention", 23, "aaa"),
    R("QuantizeLinear", 13, "dF"), R("DequantizeLinear", 13, "dF"),
    {"trt", "TRT_FP8QuantizeLinear", 1, "dF", {{0}}, {0}, 1, NULL, NULL, NULL, 0, 0},
    {"trt", "TRT_FP8DequantizeLinear", 1, "dF", {{0}}, {0}, 1, NULL, NULL, NULL, 0, 0},
    {"trt", "TRT_MXFP8DynamicQuantize", 1, "w", {{0}}, {0}, 2, NULL, NULL, NULL, 0, 0},
    {"trt", "TRT_MXFP8DequantizeLinear", 1, "we", {{0}}, {0}, 1, NULL, NULL, NULL, 0, 0},
    {"trt", "TRT_FP4DynamicQuantize", 1, "xF", {{0}}, {0}, 2, NULL, NULL, NULL, 0, 0},
};

static const teexec_dtype probe_dts[] = {
    TEEXEC_DTYPE_FLOAT,  TEEXEC_DTYPE_FLOAT16, TEEXEC_DTYPE_BFLOAT16, TEEXEC_DTYPE_DOUBLE,
    TEEXEC_DTYPE_INT8,   TEEXEC_DTYPE_INT16,   TEEXEC_DTYPE_INT32,    TEEXEC_DTYPE_INT64,
    TEEXEC_DTYPE_UINT8,  TEEXEC_DTYPE_UINT16,  TEEXEC_DTYPE_UINT32,   TEEXEC_DTYPE_UINT64,
    TEEXEC_DTYPE_BOOL};
#define N_DTS (sizeof probe_dts / sizeof probe_dts[0])

static const recipe *recipe_of(const char *domain, const char *op)
{
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (!strcmp(recipes[i].domain, domain) && !strcmp(recipes[i].op, op)) return &recipes[i];
    return NULL;
}

/* Element k of a probe tensor: small positive values (1 .. 3), which every
 * op takes (logs, square roots, divisions, indices of a 3-wide axis). */
static void fill(tx_tensor *t)
{
    for (uint64_t k = 0; k < t->numel; k++) {
        float v = (float)(k % 3 + 1);
        void *p = t->data;
        switch (t->dtype) {
        case TEEXEC_DTYPE_FLOAT: ((float *)p)[k] = v; break;
        case TEEXEC_DTYPE_DOUBLE: ((double *)p)[k] = v; break;
        case TEEXEC_DTYPE_FLOAT16: ((uint16_t *)p)[k] = tx_f32_to_f16(v); break;
        case TEEXEC_DTYPE_BFLOAT16: ((uint16_t *)p)[k] = tx_f32_to_bf16(v); break;
        case TEEXEC_DTYPE_BOOL: ((uint8_t *)p)[k] = (uint8_t)(k & 1); break;
        default: {
            size_t es = tx_dtype_elem_size(t->dtype);
            uint64_t iv = (uint64_t)v;
            memcpy((char *)p + k * es, &iv, es); /* little-endian */
            break;
        }
        }
    }
}

typedef struct probe_node {
    tx_ir_node n;
    tx_ir_attr attrs[2];
    int32_t ins[4], outs[4];
    tx_tensor in[4], out[4];
    const tx_tensor *pin[4], *phost[4];
    tx_tensor *pout[4];
    size_t n_in;
    Onnx__TensorProto tp;
    int64_t tp_dim;
    uint8_t tp_raw[8];
} probe_node;

static void probe_free(probe_node *p)
{
    for (int i = 0; i < 4; i++) tx_tensor_release(&p->in[i]);
    for (int j = 0; j < 4; j++) tx_tensor_release(&p->out[j]);
}

/* Builds the node for dtype dt and its inputs; infers and allocates the
 * outputs. Returns false when shape inference refuses the dtype. */
static bool probe_build(probe_node *p, const recipe *r, teexec_dtype dt)
{
    memset(p, 0, sizeof *p);
    p->n.name = p->n.label = (char *)r->op;
    p->n.op_type = (char *)r->op;
    p->n.domain = (char *)r->domain;
    p->n.overload = (char *)"";
    p->n.opset = r->opset;
    p->n.function = -1;
    size_t na = 0;
    if (r->attr_s) {
        tx_ir_attr *a = &p->attrs[na++];
        a->name = (char *)r->attr_s;
        a->type = TX_IR_ATTR_STRING;
        a->s = (char *)r->attr_sv;
        a->s_len = strlen(r->attr_sv);
    }
    if (r->attr_i) {
        tx_ir_attr *a = &p->attrs[na++];
        a->name = (char *)r->attr_i;
        a->type = TX_IR_ATTR_INT;
        a->i = r->attr_iv;
    }
    if (r->tensor_attr) {
        Onnx__TensorProto init = ONNX__TENSOR_PROTO__INIT;
        p->tp = init;
        p->tp.data_type = (int32_t)dt;
        p->tp.has_data_type = 1;
        p->tp_dim = 1;
        p->tp.n_dims = 1;
        p->tp.dims = &p->tp_dim;
        tx_tensor v;
        int64_t one = 1;
        if (tx_tensor_alloc(&v, dt, 1, &one)) return false;
        fill(&v);
        memcpy(p->tp_raw, v.data, v.nbytes);
        p->tp.has_raw_data = 1;
        p->tp.raw_data.len = v.nbytes;
        p->tp.raw_data.data = p->tp_raw;
        tx_tensor_release(&v);
        tx_ir_attr *a = &p->attrs[na++];
        a->name = (char *)"value";
        a->type = TX_IR_ATTR_TENSOR;
        a->t = &p->tp;
    }
    p->n.attrs = p->attrs;
    p->n.n_attrs = na;
    p->n_in = strlen(r->ins);
    int n_int = 0;
    tx_infer_value iv[4], ov[4];
    const tx_infer_value *piv[4] = {NULL};
    memset(iv, 0, sizeof iv);
    memset(ov, 0, sizeof ov);
    for (size_t i = 0; i < p->n_in; i++) {
        char c = r->ins[i];
        p->ins[i] = (int32_t)i;
        tx_tensor *t = &p->in[i];
        teexec_dtype tdt = dt;
        int32_t rank = 2;
        int64_t dims[4] = {2, 3, 1, 1};
        bool host = false;
        switch (c) {
        case 'D': dims[0] = 3; break;
        case 's': rank = 0; break;
        case 'S': rank = 0; host = true; break;
        case 'c': rank = 4; dims[0] = 1; dims[1] = 2; dims[2] = dims[3] = 3; break;
        case 'W': rank = 4; dims[0] = dims[1] = dims[2] = dims[3] = 2; break;
        case 'a': rank = 4; dims[0] = dims[1] = 1; dims[2] = dims[3] = 2; break;
        case 'n': tdt = TEEXEC_DTYPE_INT64; dims[1] = 1; break;
        case 'u': dims[0] = 1; dims[1] = 6; break;
        case 'w': dims[1] = 32; break;
        case 'x': dims[1] = 16; break;
        case 'v': rank = 1; dims[0] = 3; break;
        case 'b': tdt = TEEXEC_DTYPE_BOOL; break;
        case 'F': tdt = TEEXEC_DTYPE_FLOAT; rank = 0; break;
        case 'f': tdt = TEEXEC_DTYPE_FLOAT; rank = 1; dims[0] = 1; break;
        case 'z': tdt = TEEXEC_DTYPE_INT64; break;
        case 'e': tdt = TEEXEC_DTYPE_UINT8; dims[1] = 1; break;
        case 'i':
        case 'k': tdt = TEEXEC_DTYPE_INT64; host = true; rank = c == 'k' ? 0 : 1;
                  dims[0] = r->n_ints[n_int]; break;
        default: break;
        }
        if (tx_tensor_alloc(t, tdt, rank, dims)) return false;
        if (c == 'i' || c == 'k') {
            memcpy(t->data, r->ints[n_int], sizeof(int64_t) * t->numel);
            n_int++;
        } else if (c == 'z' || c == 'n') {
            memset(t->data, 0, t->nbytes);
        } else if (c == 'e') {
            memset(t->data, 127, t->nbytes);
        } else {
            fill(t);
        }
        p->pin[i] = t;
        p->phost[i] = host ? t : NULL;
        iv[i].dtype = tdt;
        iv[i].shape_known = true;
        iv[i].shape = tx_shape_of(t);
        iv[i].value = p->phost[i];
        piv[i] = &iv[i];
    }
    p->n.inputs = p->ins;
    p->n.n_inputs = p->n_in;
    for (int j = 0; j < r->n_out; j++) p->outs[j] = 4 + j;
    p->n.outputs = p->outs;
    p->n.n_outputs = (size_t)r->n_out;
    teexec_status *st = tx_infer_node(&p->n, NULL, piv, ov);
    bool ok = !st;
    teexec_status_destroy(st);
    for (int j = 0; j < r->n_out; j++) {
        if (ok && (!ov[j].shape_known ||
                   tx_tensor_alloc(&p->out[j], ov[j].dtype, ov[j].shape.rank, ov[j].shape.dims)))
            ok = false;
        p->pout[j] = &p->out[j];
        tx_infer_value_clear(&ov[j]);
    }
    return ok;
}

/* The dtypes the CPU kernel runs the op in. */
static uint32_t cpu_dtypes(const recipe *r, tx_op_fn fn)
{
    uint32_t set = 0;
    for (size_t d = 0; d < N_DTS; d++) {
        probe_node p;
        if (probe_build(&p, r, probe_dts[d])) {
            tx_op_call call = {.node = &p.n, .n_in = p.n_in, .in = p.pin,
                               .n_out = (size_t)r->n_out, .out = p.pout};
            teexec_status *st = fn(&call);
            if (!st) set |= UINT32_C(1) << probe_dts[d];
            teexec_status_destroy(st);
        }
        probe_free(&p);
    }
    return set;
}

#if TX_PARITY_CUDA
/* The probed dtypes the CUDA node refuses at prepare; GEMMs on cuBLASLt
 * types are not prepared here (their handle needs a device). */
static uint32_t cuda_refused(const recipe *r, uint32_t set, char *why, size_t wsz)
{
    uint32_t bad = 0;
    why[0] = 0;
    for (size_t d = 0; d < N_DTS; d++) {
        teexec_dtype dt = probe_dts[d];
        if (!(set & (UINT32_C(1) << dt))) continue;
        bool gemm = (!strcmp(r->op, "MatMul") || !strcmp(r->op, "Gemm")) &&
                    (dt == TEEXEC_DTYPE_FLOAT || dt == TEEXEC_DTYPE_FLOAT16 ||
                     dt == TEEXEC_DTYPE_BFLOAT16);
        probe_node p;
        if (!gemm && probe_build(&p, r, dt)) {
            tx_cuda_std_desc desc = {.node = &p.n, .n_in = p.n_in, .in = p.pin,
                                     .in_host = p.phost, .n_out = (size_t)r->n_out,
                                     .out = (const tx_tensor *const *)p.pout};
            tx_cuda_std_node *n = NULL;
            teexec_status *st = tx_cuda_std_prepare(&desc, &n);
            if (st) {
                bad |= UINT32_C(1) << dt;
                if (!why[0]) snprintf(why, wsz, "%s", teexec_status_message(st));
            }
            teexec_status_destroy(st);
            tx_cuda_std_node_free(n);
        }
        if (!gemm) probe_free(&p);
    }
    return bad;
}
#endif

/* ---- the table --------------------------------------------------------------- */

typedef struct row {
    const char *domain, *op;
    bool cpu_fwd, cpu_bwd, cuda_fwd, cuda_bwd, has_recipe;
    uint32_t cpu_dts, cuda_dts, cuda_refused;
    char refuse_why[256];
} row;

static size_t build_rows(row *rows, size_t cap)
{
    size_t n = 0;
    const char *dom, *op;
    int64_t min_opset;
    for (size_t i = 0; tx_cpu_op_at(i, &dom, &op, &min_opset) && n < cap; i++) {
        row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        r->domain = dom;
        r->op = op;
        r->cpu_fwd = true;
        r->cpu_bwd = !dom[0] && tx_bwd_find("", op) != NULL;
        const recipe *rc = recipe_of(dom, op);
        r->has_recipe = rc != NULL;
        if (rc) r->cpu_dts = cpu_dtypes(rc, tx_cpu_op_find(dom, op, rc->opset));
        const tx_cuda_std_op *c = tx_cuda_std_op_find(dom, op);
        if (c) {
            r->cuda_fwd = true;
            r->cuda_bwd = c->backward;
            r->cuda_dts = c->dtypes;
        }
#if TX_PARITY_CUDA
        if (rc && c) r->cuda_refused = cuda_refused(rc, r->cpu_dts, r->refuse_why, sizeof r->refuse_why);
#endif
    }
    /* ops only the GPU has (waiting for their CPU kernels) */
    for (size_t i = 0; i < tx_cuda_std_op_count() && n < cap; i++) {
        const tx_cuda_std_op *c = tx_cuda_std_op_at(i);
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = !strcmp(rows[k].domain, c->domain) && !strcmp(rows[k].op, c->op);
        if (seen) continue;
        row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        r->domain = c->domain;
        r->op = c->op;
        r->cuda_fwd = true;
        r->cuda_bwd = c->backward;
        r->cuda_dts = c->dtypes;
    }
    return n;
}

/* "f32 f16 bf16 f64 i8 ..." over the probed dtypes. */
static void dts_text(uint32_t set, char *buf, size_t size)
{
    static const char *const names[] = {"f32", "f16", "bf16", "f64", "i8", "i16", "i32",
                                        "i64", "u8",  "u16", "u32",  "u64", "bool"};
    size_t len = 0;
    buf[0] = 0;
    for (size_t d = 0; d < N_DTS; d++)
        if (set & (UINT32_C(1) << probe_dts[d]))
            len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%s",
                                    len ? " " : "", names[d]);
    if (!len) snprintf(buf, size, "-");
}

static uint32_t probed_mask(void)
{
    uint32_t m = 0;
    for (size_t d = 0; d < N_DTS; d++) m |= UINT32_C(1) << probe_dts[d];
    return m;
}

/* The document: a header, the counts, one line per op. */
static char *render(const row *rows, size_t n)
{
    size_t cap = 64 * 1024, len = 0;
    char *out = malloc(cap);
    assert_non_null(out);
#define P(...) len += (size_t)snprintf(out + len, cap - len, __VA_ARGS__)
    size_t cpu_f = 0, cpu_b = 0, cuda_f = 0, cuda_b = 0, both_f = 0, both_b = 0;
    for (size_t i = 0; i < n; i++) {
        cpu_f += rows[i].cpu_fwd;
        cpu_b += rows[i].cpu_bwd;
        cuda_f += rows[i].cuda_fwd;
        cuda_b += rows[i].cuda_bwd;
        both_f += rows[i].cpu_fwd && rows[i].cuda_fwd;
        both_b += rows[i].cpu_bwd && rows[i].cuda_bwd;
    }
    P("# Standard ops by device\n\n"
      "Generated by `tests/exec/test_op_parity.c` from the code (regenerate with\n"
      "`ninja -C build/dev ops-by-device`); the unit test fails when this page is stale, or when\n"
      "the CUDA backend lacks an op, a backward or a dtype the CPU backend has.\n\n"
      "- CPU forward: `exec/cpu_ops.c`'s table; CPU backward: the trainer's rules\n"
      "  (`exec/backward_std.c`); CPU dtypes: probed, a small node per dtype through the CPU kernel.\n"
      "- CUDA: the registry `exec/cuda/std_cuda_ops.c` (forward, backward, dtypes), which the CUDA\n"
      "  node's prepare enforces; in a CUDA build the test also prepares every probed dtype.\n"
      "- Backward: the CPU trainer computes every rule in FP64 for FLOAT, FLOAT16, BFLOAT16 and\n"
      "  DOUBLE values; the CUDA backward kernels take FLOAT, FLOAT16 and BFLOAT16 (the CUDA\n"
      "  trainer has no DOUBLE parameters). te.ops ops run on both devices\n"
      "  (`exec/cpu_te_ops.h`, `exec/cuda/te_cuda.h`) and are not listed.\n"
      "- Dtypes listed are those probed (f32 f16 bf16 f64, signed and unsigned integers, bool);\n"
      "  the data-movement ops and Cast also move FP8 and sub-byte types on both devices.\n\n"
      "Forward: CPU %zu, CUDA %zu (%zu of the CPU's). Backward: CPU %zu, CUDA %zu (%zu of the "
      "CPU's).\n\n",
      cpu_f, cuda_f, both_f, cpu_b, cuda_b, both_b);
    P("| op | CPU fwd | CPU bwd | CUDA fwd | CUDA bwd | CPU dtypes | CUDA dtypes |\n");
    P("|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        char cd[160], gd[160];
        if (r->has_recipe) dts_text(r->cpu_dts, cd, sizeof cd);
        else snprintf(cd, sizeof cd, "%s", r->cpu_fwd ? "(no probe)" : "-");
        dts_text(r->cuda_dts & probed_mask() & ~r->cuda_refused, gd, sizeof gd);
        if (!r->cuda_fwd) snprintf(gd, sizeof gd, "-");
        P("| %s%s%s | %s | %s | %s | %s | %s | %s |\n", r->domain[0] ? r->domain : "",
          r->domain[0] ? "." : "", r->op, r->cpu_fwd ? "yes" : "-", r->cpu_bwd ? "yes" : "-",
          r->cuda_fwd ? "yes" : "**no**", r->cuda_bwd ? "yes" : (r->cpu_bwd ? "**no**" : "-"),
          cd, gd);
        assert_true(len < cap - 512);
    }
#undef P
    return out;
}

static row rows_[256];
static size_t n_rows_;

static void parity(void **state)
{
    (void)state;
    size_t fails = 0;
    for (size_t i = 0; i < n_rows_; i++) {
        const row *r = &rows_[i];
        if (!r->cpu_fwd) continue;
        const char *d = r->domain[0] ? r->domain : "ai.onnx";
        if (!r->has_recipe) {
            fprintf(stderr, "%s %s: the CPU runs it and this test has no probe recipe for it\n", d, r->op);
            fails++;
        }
        if (!r->cuda_fwd) {
            fprintf(stderr, "%s %s: the CPU runs it, the CUDA backend does not\n", d, r->op);
            fails++;
            continue;
        }
        if (r->cpu_bwd && !r->cuda_bwd) {
            fprintf(stderr, "%s %s: the CPU trainer has a backward, the CUDA backend none\n", d, r->op);
            fails++;
        }
        uint32_t missing = r->cpu_dts & ~(r->cuda_dts & ~r->cuda_refused);
        if (missing) {
            char t[160];
            dts_text(missing, t, sizeof t);
            fprintf(stderr, "%s %s: the CPU runs %s, the CUDA backend does not%s%s\n", d, r->op, t,
                    r->refuse_why[0] ? ": " : "", r->refuse_why);
            fails++;
        }
    }
    assert_int_equal(fails, 0);
}

/* docs/ops-by-device.md must be what the code says. */
static void doc_current(void **state)
{
    (void)state;
    const char *src = getenv("TEEXEC_SOURCE_ROOT");
    if (!src) skip();
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/ops-by-device.md", src);
    char *want = render(rows_, n_rows_);
    FILE *f = fopen(path, "rb");
    size_t cap = strlen(want) + 2, got_len = 0;
    char *got = calloc(cap, 1);
    assert_non_null(got);
    if (f) {
        got_len = fread(got, 1, cap - 1, f);
        fclose(f);
    }
    bool same = f && got_len == strlen(want) && !memcmp(got, want, got_len);
    if (!same)
        fprintf(stderr, "%s is stale: regenerate it with `ninja -C build/dev ops-by-device`\n", path);
    free(got);
    free(want);
    assert_true(same);
}

int main(int argc, char **argv)
{
    n_rows_ = build_rows(rows_, sizeof rows_ / sizeof rows_[0]);
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        char *doc = render(rows_, n_rows_);
        FILE *f = fopen(argv[2], "wb");
        if (!f || fwrite(doc, 1, strlen(doc), f) != strlen(doc)) {
            fprintf(stderr, "test_op_parity: cannot write %s\n", argv[2]);
            return 1;
        }
        fclose(f);
        free(doc);
        return 0;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(parity), cmocka_unit_test(doc_current)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
