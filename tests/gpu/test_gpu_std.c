/* GPU test: the standard ONNX ops on the GPU (exec/cuda/std_cuda.h) that
 * move data, Where, float arithmetic, Softmax, MatMul and Cast, against the
 * CPU backend's kernels (exec/cpu_ops.h, forward) and the CPU backward
 * rules (exec/train_internal.h, FP64), in FLOAT, BFLOAT16 and FLOAT16, with
 * broadcasting (the runner: std_case.h). Data movement (reshapes,
 * Transpose, Slice, Split, Concat, Gather, Expand, Where, Cast) must match
 * bit for bit, forward and backward where no sum is involved; arithmetic
 * within DESIGN.md's tolerances (plus an absolute term where a GEMM or a
 * reduction sums signed terms). Broadcast-grad reductions are also checked
 * to be bit-identical over two runs. The other standard ops:
 * test_gpu_std_math.c, _reduce.c, _shape.c, _linalg.c.
 *
 * Built twice: as test_gpu_std (suite gpu) and with STD_PREPARE_ONLY as
 * test_std_cuda_prepare (suite unit: the prepare-time refusals alone, no
 * device work). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/cuda/std_cuda.h"
#include "import/shape_infer.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/std_case.h"

#include <string.h>

#define F SC_F
#define I64 TEEXEC_DTYPE_INT64
#define I32 TEEXEC_DTYPE_INT32
#define BOOL TEEXEC_DTYPE_BOOL
#define F32 TEEXEC_DTYPE_FLOAT
#define BF16 TEEXEC_DTYPE_BFLOAT16
#define F16 TEEXEC_DTYPE_FLOAT16
#define KU_F32 F32
#define KU_BF16 BF16
#define KU_F16 F16

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
    /* casts: fixed dtypes, run once */
    {"cast_f32_bf16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BFLOAT16)}, 1,
     {TD(KU_F32, IN_RAND, 2, 7, 9)}, 1, ONCE, 1e-6, 1e-2},
    {"cast_bf16_f32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(KU_BF16, IN_RAND, 2, 7, 9)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f16_f32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(KU_F16, IN_RAND, 2, 7, 9)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_i32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_INT32)}, 1,
     {TD(KU_F32, IN_RAND, 2, 7, 9)}, 1, EXACT | ONCE, 0, 0},
    {"cast_i64_f32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(I64, IN_IRAND, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_i64_i32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_INT32)}, 1,
     {TD(I64, IN_IRAND, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_bool_bf16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BFLOAT16)}, 1,
     {TD(BOOL, IN_BOOL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_bool", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BOOL)}, 1,
     {TD(KU_F32, IN_RAND, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    /* casts the GPU now runs in every dtype pair, with convert.c's rules */
    {"cast_special_f32_f16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT16)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_special_f32_bf16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BFLOAT16)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f64_f32", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(TEEXEC_DTYPE_DOUBLE, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f64_bf16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BFLOAT16)}, 1,
     {TD(TEEXEC_DTYPE_DOUBLE, IN_RAND, 1, 64)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_f64", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_DOUBLE)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f64_i8", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_INT8)}, 1,
     {TD(TEEXEC_DTYPE_DOUBLE, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_u16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_UINT16)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_i64_bf16_wide", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_BFLOAT16)}, 1,
     {TD(I64, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_u64_f16", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT16)}, 1,
     {TD(TEEXEC_DTYPE_UINT64, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_i32_u8_wrap", "Cast", 13, 1, {A_INT("to", TEEXEC_DTYPE_UINT8)}, 1,
     {TD(I32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_e4m3", "Cast", 19, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT8E4M3FN)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_e4m3_nosat", "Cast", 19, 2,
     {A_INT("to", TEEXEC_DTYPE_FLOAT8E4M3FN), A_INT("saturate", 0)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_bf16_e5m2", "Cast", 19, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT8E5M2)}, 1,
     {TD(KU_BF16, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_e5m2_nosat", "Cast", 19, 2,
     {A_INT("to", TEEXEC_DTYPE_FLOAT8E5M2), A_INT("saturate", 0)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f16_e4m3fnuz", "Cast", 19, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT8E4M3FNUZ)}, 1,
     {TD(KU_F16, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_e5m2fnuz", "Cast", 19, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT8E5M2FNUZ)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_e4m3_f32", "Cast", 19, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(TEEXEC_DTYPE_FLOAT8E4M3FN, IN_IRAND, 1, 256)}, 1, EXACT | ONCE, 0, 0},
    {"cast_e5m2_bf16", "Cast", 19, 1, {A_INT("to", TEEXEC_DTYPE_BFLOAT16)}, 1,
     {TD(TEEXEC_DTYPE_FLOAT8E5M2, IN_IRAND, 1, 256)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_e8m0", "Cast", 25, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT8E8M0)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_e8m0_nearest", "Cast", 25, 2,
     {A_INT("to", TEEXEC_DTYPE_FLOAT8E8M0), A_STR("round_mode", "nearest")}, 1,
     {TD(KU_F32, IN_RAND, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_fp4", "Cast", 23, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT4E2M1)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 41)}, 1, EXACT | ONCE, 0, 0},
    {"cast_f32_int4", "Cast", 21, 1, {A_INT("to", TEEXEC_DTYPE_INT4)}, 1,
     {TD(KU_F32, IN_SPECIAL, 1, 39)}, 1, EXACT | ONCE, 0, 0},
    {"cast_i32_uint4", "Cast", 21, 1, {A_INT("to", TEEXEC_DTYPE_UINT4)}, 1,
     {TD(I32, IN_SMALL, 1, 40)}, 1, EXACT | ONCE, 0, 0},
    {"cast_int4_f32", "Cast", 21, 1, {A_INT("to", TEEXEC_DTYPE_FLOAT)}, 1,
     {TD(TEEXEC_DTYPE_INT4, IN_SMALL, 1, 33)}, 1, EXACT | ONCE, 0, 0},
    {"castlike_bf16", "CastLike", 19, 0, {{0}}, 2,
     {TD(KU_F32, IN_SPECIAL, 2, 5, 8), TD(KU_BF16, IN_RAND, 1, 1)}, 1, EXACT | ONCE, 0, 0},
};

/* ---- refusals at prepare (no device work) ------------------------------------------ */

/* Prepares one node (no device work); returns the status. */
static teexec_status *prepare_only(const tcase *c, const int *host_known, tx_cuda_std_node **out,
                                   bool training)
{
    static tx_ir_node node;
    static tx_ir_attr attrs[4];
    static int32_t ins[SC_MAXIO], outs[SC_MAXIO];
    static tx_tensor in[SC_MAXIO], o[SC_MAXIO];
    for (int i = 0; i < SC_MAXIO; i++) {
        tx_tensor_release(&in[i]);
        tx_tensor_release(&o[i]);
    }
    memset(&node, 0, sizeof node);
    node.name = node.label = (char *)c->name;
    node.op_type = (char *)c->op;
    node.domain = (char *)"";
    node.overload = (char *)"";
    node.opset = c->opset;
    node.function = -1;
    for (int i = 0; i < c->n_in; i++) ins[i] = c->in[i].kind == IN_ABSENT ? -1 : i;
    for (int j = 0; j < c->n_out; j++) outs[j] = SC_MAXIO + j;
    node.inputs = ins;
    node.n_inputs = (size_t)c->n_in;
    node.outputs = outs;
    node.n_outputs = (size_t)c->n_out;
    for (int a = 0; a < c->n_attr; a++) {
        memset(&attrs[a], 0, sizeof attrs[a]);
        attrs[a].name = (char *)c->attr[a].name;
        attrs[a].type = c->attr[a].type == A_IS ? TX_IR_ATTR_INTS : TX_IR_ATTR_INT;
        attrs[a].i = c->attr[a].i;
        attrs[a].ints = c->attr[a].v;
        attrs[a].n_ints = (size_t)c->attr[a].n;
    }
    node.attrs = attrs;
    node.n_attrs = (size_t)c->n_attr;
    const tx_tensor *pin[SC_MAXIO] = {NULL}, *host[SC_MAXIO] = {NULL}, *pout[SC_MAXIO] = {NULL};
    tx_infer_value iv[SC_MAXIO], ov[SC_MAXIO];
    const tx_infer_value *piv[SC_MAXIO] = {NULL};
    memset(iv, 0, sizeof iv);
    memset(ov, 0, sizeof ov);
    for (int i = 0; i < c->n_in; i++) {
        const tin *s = &c->in[i];
        if (s->kind == IN_ABSENT) continue;
        teexec_dtype dt = s->dt == F ? F32 : (teexec_dtype)s->dt;
        TG_OK(tx_tensor_alloc(&in[i], dt, s->rank, s->dims));
        for (int k = 0; k < s->n_vals && (uint64_t)k < in[i].numel; k++) {
            switch (dt) {
            case I64: ((int64_t *)in[i].data)[k] = s->vals[k]; break;
            case I32: ((int32_t *)in[i].data)[k] = (int32_t)s->vals[k]; break;
            case BOOL: ((uint8_t *)in[i].data)[k] = s->vals[k] != 0; break;
            case F32: ((float *)in[i].data)[k] = (float)s->vals[k]; break;
            default: break;
            }
        }
        pin[i] = &in[i];
        if (host_known[i]) host[i] = &in[i];
        iv[i].dtype = dt;
        iv[i].shape_known = true;
        iv[i].shape = tx_shape_of(&in[i]);
        iv[i].value = host[i];
        piv[i] = &iv[i];
    }
    TG_OK(tx_infer_node(&node, NULL, piv, ov));
    for (int j = 0; j < c->n_out; j++) {
        TG_OK(tx_tensor_alloc(&o[j], ov[j].dtype, ov[j].shape.rank, ov[j].shape.dims));
        pout[j] = &o[j];
        tx_infer_value_clear(&ov[j]);
    }
    tx_cuda_std_desc d = {.node = &node, .n_in = (size_t)c->n_in, .in = pin, .in_host = host,
                          .n_out = (size_t)c->n_out, .out = pout, .training = training};
    *out = NULL;
    return tx_cuda_std_prepare(&d, out);
}

static void expect_refused(const tcase *c, const int *host_known, bool training, const char *why)
{
    tx_cuda_std_node *n = NULL;
    teexec_status *st = prepare_only(c, host_known, &n, training);
    if (!st) fail_msg("%s: prepared, expected a refusal (%s)", c->name, why);
    assert_null(n);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), c->name));
    teexec_status_destroy(st);
}

static tx_cuda_std_node *expect_prepared(const tcase *c, const int *host_known, bool training)
{
    tx_cuda_std_node *n = NULL;
    TG_OK(prepare_only(c, host_known, &n, training));
    assert_non_null(n);
    return n;
}

static void refusals(void **state)
{
    (void)state;
    assert_true(tx_cuda_std_supported("", "Slice"));
    assert_true(tx_cuda_std_supported("ai.onnx", "MatMul"));
    assert_true(tx_cuda_std_supported("", "Einsum"));
    assert_true(tx_cuda_std_supported("", "IsNaN"));
    assert_false(tx_cuda_std_supported("", "NonZero")); /* data-dependent shape */
    assert_false(tx_cuda_std_supported("te.ops", "Add"));
    int none[SC_MAXIO] = {0}, all[SC_MAXIO] = {1, 1, 1, 1, 1};
    /* Slice whose starts are only known at run time; with the value known it prepares */
    tcase sl = {"slice_dynamic", "Slice", 13, 0, {{0}}, 3, {T(1, 8), INTS(1), INTS(4)}, 1, 0, 0, 0};
    int ends_known[SC_MAXIO] = {0, 0, 1};
    expect_refused(&sl, ends_known, false, "starts unknown");
    tx_cuda_std_node *n = expect_prepared(&sl, all, false);
    assert_false(tx_cuda_std_is_alias(n));
    assert_true(tx_cuda_std_differentiable(n, 0));
    assert_false(tx_cuda_std_differentiable(n, 1));
    tx_cuda_std_node_free(n);
    /* integer arithmetic runs (wrapping, as the CPU), without grads */
    tcase ai = {"add_int", "Add", 14, 0, {{0}}, 2, {TD(I64, IN_IRAND, 1, 4), TD(I64, IN_IRAND, 1, 4)}, 1, 0, 0, 0};
    n = expect_prepared(&ai, none, true);
    assert_false(tx_cuda_std_differentiable(n, 0));
    tx_cuda_std_node_free(n);
    /* ... but not on operands of two dtypes (the CPU refuses them too) */
    tcase am = {"add_mixed", "Add", 14, 0, {{0}}, 2, {TD(I64, IN_IRAND, 1, 4), TD(I32, IN_IRAND, 1, 4)}, 1, 0, 0, 0};
    expect_refused(&am, none, false, "mixed integer dtypes");
    /* a float op on an integer dtype the CPU does not take either */
    tcase ex = {"exp_int", "Exp", 13, 0, {{0}}, 1, {TD(I64, IN_IRAND, 1, 4)}, 1, 0, 0, 0};
    expect_refused(&ex, none, false, "Exp of int64");
    /* a reshape aliases and its shape input carries no grad */
    tcase cr = {"reshape_alias", "Reshape", 14, 0, {{0}}, 2, {T(2, 2, 3), INTS(6)}, 1, 0, 0, 0};
    n = expect_prepared(&cr, all, false);
    assert_true(tx_cuda_std_is_alias(n));
    assert_false(tx_cuda_std_differentiable(n, 1));
    tx_cuda_std_node_free(n);
    /* Dropout in training mode is refused unless its ratio is 0 (te.ops
     * Dropout is the one that drops); training_mode must be known */
    tcase dz = {"dropout_ratio0", "Dropout", 13, 0, {{0}}, 3,
                {T(2, 2, 3), SCALAR(F32, 0), SCALAR(BOOL, 1)}, 1, 0, 0, 0};
    n = expect_prepared(&dz, all, true);
    tx_cuda_std_node_free(n);
    tcase dtr = {"dropout_training", "Dropout", 13, 0, {{0}}, 3,
                 {T(2, 2, 3), ABSENT, SCALAR(BOOL, 1)}, 1, 0, 0, 0};
    expect_refused(&dtr, all, true, "training mode with the default ratio");
    tcase du = {"dropout_unknown", "Dropout", 13, 0, {{0}}, 3,
                {T(2, 2, 3), SCALAR(F32, 0), SCALAR(BOOL, 1)}, 1, 0, 0, 0};
    expect_refused(&du, none, true, "training_mode unknown");
    tcase dr = {"dropout_inference", "Dropout", 13, 0, {{0}}, 1, {T(2, 2, 3)}, 1, 0, 0, 0};
    n = expect_prepared(&dr, none, true);
    assert_true(tx_cuda_std_is_alias(n));
    assert_true(tx_cuda_std_differentiable(n, 0));
    tx_cuda_std_node_free(n);
    /* TopK whose K is only known at run time */
    tcase tk = {"topk_dynamic_k", "TopK", 11, 0, {{0}}, 2, {T(2, 3, 8), INTS(3)}, 2, 0, 0, 0};
    expect_refused(&tk, none, false, "K unknown");
    n = expect_prepared(&tk, all, false);
    assert_true(tx_cuda_std_differentiable(n, 0));   /* X: the CPU's rule, the GPU's */
    assert_false(tx_cuda_std_differentiable(n, 1));  /* K */
    tx_cuda_std_node_free(n);
    /* an axis of CumSum must be known */
    tcase cs = {"cumsum_dynamic_axis", "CumSum", 14, 0, {{0}}, 2, {T(2, 3, 8), INTS(1)}, 1, 0, 0, 0};
    expect_refused(&cs, none, false, "axis unknown");
    /* Shape's value is known before running: a literal node */
    tcase sh = {"shape", "Shape", 15, 0, {{0}}, 1, {T(3, 2, 3, 4)}, 1, 0, 0, 0};
    n = expect_prepared(&sh, none, false);
    assert_int_equal(tx_cuda_std_scratch_bytes(n), 0);
    tx_cuda_std_node_free(n);
    /* LayerNormalization: a Scale that broadcasts is not trained on the GPU */
    tcase ln = {"ln_bcast_scale", "LayerNormalization", 17, 0, {{0}}, 2, {T(2, 3, 8), T(1, 1)}, 1, 0, 0, 0};
    expect_refused(&ln, none, true, "broadcast scale in training");
    n = expect_prepared(&ln, none, false);
    tx_cuda_std_node_free(n);
    /* an output the typing pass left without a shape is refused, not read */
    {
        int32_t ri[1] = {0}, ro[1] = {1};
        tx_ir_node rn = {.name = (char *)"relu_unshaped", .label = (char *)"relu_unshaped",
                         .op_type = (char *)"Relu", .domain = (char *)"", .overload = (char *)"",
                         .opset = 14, .function = -1, .inputs = ri, .n_inputs = 1,
                         .outputs = ro, .n_outputs = 1};
        int64_t dims[2] = {2, 3};
        tx_tensor x, y;
        TG_OK(tx_tensor_wrap(&x, TEEXEC_DTYPE_FLOAT, 2, dims, NULL));
        memset(&y, 0, sizeof y);
        y.dtype = TEEXEC_DTYPE_FLOAT;
        y.rank = -2;
        const tx_tensor *rin[1] = {&x}, *rout[1] = {&y};
        tx_cuda_std_desc rd = {.node = &rn, .n_in = 1, .in = rin, .n_out = 1, .out = rout};
        tx_cuda_std_node *rnode = NULL;
        teexec_status *st = tx_cuda_std_prepare(&rd, &rnode);
        assert_non_null(st);
        assert_null(rnode);
        assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
        assert_non_null(strstr(teexec_status_message(st), "no shape"));
        teexec_status_destroy(st);
    }
    tg_record("std refusals", 1, "prepare refuses unknown attributes, dtypes the CPU refuses, "
                                 "training-mode Dropout");
}

int main(void)
{
#ifdef STD_PREPARE_ONLY
    /* the unit suite: prepare-time logic only, no device work */
    const struct CMUnitTest unit[] = {cmocka_unit_test(refusals)};
    return cmocka_run_group_tests(unit, NULL, NULL);
#endif
    return sc_main("test_gpu_std", cases, sizeof cases / sizeof cases[0], refusals, "refusals");
}
