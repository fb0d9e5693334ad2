/* test_backward_fd.c - the standard-op backward rules against central finite
 * differences in FP64. Each case is a one- or two-node graph built in memory
 * whose float operands are all double graph inputs, so the trainer reports a
 * gradient for every operand (lr 0: nothing moves); the loss is
 * mean((y - target)^2) with a seeded random target. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "../import/model_builder.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#define DBL ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static uint64_t rng = 88172645463325252ull;
static double urand(void) /* [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

static void i64_init(Onnx__GraphProto *g, const char *name, const int64_t *vals, size_t n,
                     const int64_t *dims, size_t rank)
{
    Onnx__TensorProto *t = mb_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(name);
    t->has_data_type = 1;
    t->data_type = I64;
    t->dims = mb_alloc(rank * sizeof(int64_t) + 1);
    t->n_dims = rank;
    memcpy(t->dims, dims, rank * sizeof(int64_t));
    int64_t *v = mb_alloc(n * sizeof(int64_t));
    memcpy(v, vals, n * sizeof(int64_t));
    t->has_raw_data = 1;
    t->raw_data.data = (uint8_t *)v;
    t->raw_data.len = n * sizeof(int64_t);
    g->initializer[g->n_initializer++] = t;
}

static void bool_init(Onnx__GraphProto *g, const char *name, const uint8_t *vals, size_t n,
                      const int64_t *dims, size_t rank)
{
    Onnx__TensorProto *t = mb_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    t->dims = mb_alloc(rank * sizeof(int64_t) + 1);
    t->n_dims = rank;
    memcpy(t->dims, dims, rank * sizeof(int64_t));
    uint8_t *v = mb_alloc(n);
    memcpy(v, vals, n);
    t->has_raw_data = 1;
    t->raw_data.data = v;
    t->raw_data.len = n;
    g->initializer[g->n_initializer++] = t;
}

typedef struct operand {
    const char *name;
    int32_t rank;
    int64_t dims[4];
    bool positive; /* keep away from 0 (Sqrt, Log, Pow base, Relu kinks) */
} operand;

static Onnx__GraphProto *G;
static Onnx__ModelProto *M;

static void begin(int64_t opset)
{
    M = mb_model(8);
    mb_opset(M, "", opset);
    G = mb_graph("fd");
    M->graph = G;
}

static char *dims_str(const operand *o)
{
    char *s = mb_alloc(64);
    for (int32_t k = 0; k < o->rank; k++)
        snprintf(s + strlen(s), 64 - strlen(s), k ? ",%lld" : "%lld", (long long)o->dims[k]);
    return s;
}

static double loss_of(teexec_trainer *tr, size_t n, const char **names, teexec_tensor **ts)
{
    double l;
    ok(teexec_trainer_step(tr, n, names, (const teexec_tensor *const *)ts, &l));
    return l;
}

/* Runs the check for the graph in G/M: ops are the graph inputs, `y` the
 * output with out dims. */
static void check(const operand *ops, size_t n_ops, const operand *out)
{
    for (size_t i = 0; i < n_ops; i++) mb_input(G, ops[i].name, DBL, dims_str(&ops[i]));
    mb_output(G, "y", DBL, dims_str(out));
    size_t size;
    uint8_t *bytes = mb_pack(M, &size);
    teexec_model *m;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m));
    free(bytes);
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0;
    o.weight_decay = 0;
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));

    const char *names[8];
    teexec_tensor *ts[8];
    for (size_t i = 0; i < n_ops; i++) {
        ok(teexec_tensor_create(TEEXEC_DTYPE_DOUBLE, ops[i].rank, ops[i].dims, &ts[i]));
        double *d = teexec_tensor_data(ts[i]);
        for (uint64_t k = 0; k < teexec_tensor_element_count(ts[i]); k++) {
            double v = urand();
            d[k] = ops[i].positive ? 0.5 + fabs(v) : v;
        }
        names[i] = ops[i].name;
    }
    ok(teexec_tensor_create(TEEXEC_DTYPE_DOUBLE, out->rank, out->dims, &ts[n_ops]));
    double *tg = teexec_tensor_data(ts[n_ops]);
    for (uint64_t k = 0; k < teexec_tensor_element_count(ts[n_ops]); k++) tg[k] = urand();
    names[n_ops] = "target";

    loss_of(tr, n_ops + 1, names, ts);
    for (size_t i = 0; i < n_ops; i++) {
        teexec_tensor *g;
        ok(teexec_trainer_grad(tr, ops[i].name, &g));
        const double *ga = teexec_tensor_data_const(g);
        double *x = teexec_tensor_data(ts[i]);
        double num = 0, den = 0;
        for (uint64_t k = 0; k < teexec_tensor_element_count(ts[i]); k++) {
            const double h = 1e-7, x0 = x[k];
            x[k] = x0 + h;
            double lp = loss_of(tr, n_ops + 1, names, ts);
            x[k] = x0 - h;
            double lm = loss_of(tr, n_ops + 1, names, ts);
            x[k] = x0;
            double fd = (lp - lm) / (2 * h);
            if (getenv("TX_FD_VERBOSE")) fprintf(stderr, "  %s[%llu] fd %.12g analytic %.12g\n", ops[i].name, (unsigned long long)k, fd, ga[k]);
            num += (fd - ga[k]) * (fd - ga[k]);
            den += fd * fd;
        }
        double rel = sqrt(num / (den > 0 ? den : 1e-300));
        if (!(rel < 1e-6) || den == 0)
            fprintf(stderr, "%s: operand %s rel error %g (|fd| %g)\n", G->node[G->n_node - 1]->op_type,
                    ops[i].name, rel, sqrt(den));
        assert_true(den > 0);
        assert_true(rel < 1e-6);
        teexec_tensor_destroy(g);
    }
    for (size_t i = 0; i <= n_ops; i++) teexec_tensor_destroy(ts[i]);
    teexec_trainer_destroy(tr);
    teexec_model_destroy(m);
    mb_free_all();
}

static void test_matmul(void **s)
{
    (void)s;
    begin(17);
    mb_node(G, "n", "MatMul", NULL, "a,b", "y");
    operand ops[] = {{"a", 3, {2, 3, 4}, false}, {"b", 2, {4, 5}, false}};
    operand out = {"y", 3, {2, 3, 5}, false};
    check(ops, 2, &out);
    begin(17);
    mb_node(G, "n", "MatMul", NULL, "a,b", "y");
    operand ops2[] = {{"a", 4, {2, 1, 3, 4}, false}, {"b", 3, {3, 4, 2}, false}};
    operand out2 = {"y", 4, {2, 3, 3, 2}, false};
    check(ops2, 2, &out2);
}

static void test_gemm(void **s)
{
    (void)s;
    begin(17);
    Onnx__NodeProto *n = mb_node(G, "n", "Gemm", NULL, "a,b,c", "y");
    mb_attr_int(n, "transA", 1);
    mb_attr_int(n, "transB", 1);
    mb_attr_float(n, "alpha", 0.5f);
    mb_attr_float(n, "beta", 2.0f);
    operand ops[] = {{"a", 2, {4, 3}, false}, {"b", 2, {5, 4}, false}, {"c", 1, {5}, false}};
    operand out = {"y", 2, {3, 5}, false};
    check(ops, 3, &out);
}

static void test_binary(void **s)
{
    (void)s;
    const char *bin[] = {"Add", "Sub", "Mul", "Div", "Pow"};
    for (size_t i = 0; i < 5; i++) {
        begin(17);
        mb_node(G, "n", bin[i], NULL, "a,b", "y");
        bool pos = i >= 3;
        operand ops[] = {{"a", 2, {2, 3}, pos}, {"b", 2, {1, 3}, pos}};
        operand out = {"y", 2, {2, 3}, false};
        check(ops, 2, &out);
    }
}

static void test_unary(void **s)
{
    (void)s;
    const char *un[] = {"Sqrt", "Erf", "Tanh", "Sigmoid", "Relu", "Exp", "Log", "Neg", "Reciprocal"};
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) {
        begin(17);
        mb_node(G, "n", un[i], NULL, "a", "y");
        bool pos = !strcmp(un[i], "Sqrt") || !strcmp(un[i], "Log") || !strcmp(un[i], "Relu") ||
                   !strcmp(un[i], "Reciprocal");
        operand ops[] = {{"a", 2, {3, 4}, pos}};
        operand out = {"y", 2, {3, 4}, false};
        check(ops, 1, &out);
    }
}

static void test_softmax_layernorm(void **s)
{
    (void)s;
    const char *sm[] = {"Softmax", "LogSoftmax"};
    for (size_t i = 0; i < 2; i++) {
        begin(17);
        Onnx__NodeProto *n = mb_node(G, "n", sm[i], NULL, "a", "y");
        mb_attr_int(n, "axis", 1);
        operand ops[] = {{"a", 3, {2, 3, 4}, false}};
        operand out = {"y", 3, {2, 3, 4}, false};
        check(ops, 1, &out);
    }
    begin(17);
    Onnx__NodeProto *n = mb_node(G, "n", "LayerNormalization", NULL, "a,g,b", "y");
    mb_attr_int(n, "axis", -1);
    mb_attr_float(n, "epsilon", 1e-5f);
    operand ops[] = {{"a", 3, {2, 3, 5}, false}, {"g", 1, {5}, false}, {"b", 1, {5}, false}};
    operand out = {"y", 3, {2, 3, 5}, false};
    check(ops, 3, &out);
}

static void test_movement(void **s)
{
    (void)s;
    begin(17);
    Onnx__NodeProto *n = mb_node(G, "n", "Transpose", NULL, "a", "y");
    int64_t perm[] = {2, 0, 1};
    mb_attr_ints(n, "perm", perm, 3);
    operand ops[] = {{"a", 3, {2, 3, 4}, false}};
    operand out = {"y", 3, {4, 2, 3}, false};
    check(ops, 1, &out);

    begin(17);
    int64_t shp[] = {4, -1}, d1[] = {2};
    i64_init(G, "shape", shp, 2, d1, 1);
    mb_node(G, "n", "Reshape", NULL, "a,shape", "y");
    operand out2 = {"y", 2, {4, 6}, false};
    check(ops, 1, &out2);

    begin(17);
    int64_t sp[] = {2, 4};
    i64_init(G, "sp", sp, 2, d1, 1);
    n = mb_node(G, "s", "Split", NULL, "a,sp", "p,q");
    mb_attr_int(n, "axis", 1);
    int64_t shp3[] = {2, -1};
    i64_init(G, "shape", shp3, 2, d1, 1);
    mb_node(G, "r", "Reshape", NULL, "q,shape", "q2");
    n = mb_node(G, "n", "Concat", NULL, "p,q2,p", "y");
    mb_attr_int(n, "axis", 1);
    operand ops3[] = {{"a", 2, {2, 6}, false}};
    operand out3 = {"y", 2, {2, 8}, false};
    check(ops3, 1, &out3);
}

static void test_where_reduce_gather_slice(void **s)
{
    (void)s;
    begin(17);
    uint8_t cv[] = {1, 0, 1};
    int64_t cd[] = {3};
    bool_init(G, "c", cv, 3, cd, 1);
    mb_node(G, "n", "Where", NULL, "c,a,b", "y");
    operand ops[] = {{"a", 2, {2, 3}, false}, {"b", 1, {1}, false}};
    operand out = {"y", 2, {2, 3}, false};
    check(ops, 2, &out);

    begin(17);
    Onnx__NodeProto *n = mb_node(G, "n", "ReduceMean", NULL, "a", "y");
    int64_t ax[] = {1};
    mb_attr_ints(n, "axes", ax, 1);
    mb_attr_int(n, "keepdims", 0);
    operand ops2[] = {{"a", 3, {2, 3, 4}, false}};
    operand out2 = {"y", 2, {2, 4}, false};
    check(ops2, 1, &out2);

    begin(17);
    int64_t d1[] = {1}, axv[] = {-1};
    i64_init(G, "axes", axv, 1, d1, 1);
    mb_node(G, "n", "ReduceSum", NULL, "a,axes", "y");
    operand out3 = {"y", 3, {2, 3, 1}, false};
    check(ops2, 1, &out3);

    begin(17);
    int64_t idx[] = {2, 0, 2, -1}, di[] = {2, 2};
    i64_init(G, "i", idx, 4, di, 2);
    n = mb_node(G, "n", "Gather", NULL, "a,i", "y");
    mb_attr_int(n, "axis", 1);
    operand ops4[] = {{"a", 2, {2, 3}, false}};
    operand out4 = {"y", 3, {2, 2, 2}, false};
    check(ops4, 1, &out4);

    begin(17);
    int64_t st[] = {1, 0}, en[] = {4, 3}, axs[] = {2, 0}, stp[] = {2, 1}, d2[] = {2};
    i64_init(G, "st", st, 2, d2, 1);
    i64_init(G, "en", en, 2, d2, 1);
    i64_init(G, "ax", axs, 2, d2, 1);
    i64_init(G, "sp", stp, 2, d2, 1);
    mb_node(G, "n", "Slice", NULL, "a,st,en,ax,sp", "y");
    operand out5 = {"y", 3, {2, 3, 2}, false};
    check(ops2, 1, &out5);
}

/* Gelu (both approximations, opset 20), Sin and Cos. */
static void test_gelu_trig(void **s)
{
    (void)s;
    const char *approx[] = {"none", "tanh"};
    for (size_t i = 0; i < 2; i++) {
        begin(20);
        Onnx__NodeProto *n = mb_node(G, "n", "Gelu", NULL, "a", "y");
        mb_attr_string(n, "approximate", approx[i]);
        operand ops[] = {{"a", 2, {3, 4}, false}};
        operand out = {"y", 2, {3, 4}, false};
        check(ops, 1, &out);
    }
    const char *trig[] = {"Sin", "Cos"};
    for (size_t i = 0; i < 2; i++) {
        begin(17);
        mb_node(G, "n", trig[i], NULL, "a", "y");
        operand ops[] = {{"a", 2, {3, 4}, false}};
        operand out = {"y", 2, {3, 4}, false};
        check(ops, 1, &out);
    }
}

/* Conv: 2-D with groups, strides, dilations and asymmetric pads; 1-D with
 * auto_pad SAME_LOWER; depthwise with VALID and no bias. */
static void test_conv(void **s)
{
    (void)s;
    begin(17);
    Onnx__NodeProto *n = mb_node(G, "n", "Conv", NULL, "x,w,b", "y");
    int64_t st[] = {2, 1}, dil[] = {1, 2}, pads[] = {1, 0, 0, 1};
    mb_attr_int(n, "group", 2);
    mb_attr_ints(n, "strides", st, 2);
    mb_attr_ints(n, "dilations", dil, 2);
    mb_attr_ints(n, "pads", pads, 4);
    operand ops[] = {{"x", 4, {2, 4, 5, 4}, false}, {"w", 4, {6, 2, 3, 2}, false},
                     {"b", 1, {6}, false}};
    operand out = {"y", 4, {2, 6, 2, 3}, false};
    check(ops, 3, &out);

    begin(17);
    n = mb_node(G, "n", "Conv", NULL, "x,w", "y");
    int64_t st1[] = {2};
    mb_attr_string(n, "auto_pad", "SAME_LOWER");
    mb_attr_ints(n, "strides", st1, 1);
    operand ops1[] = {{"x", 3, {1, 3, 7}, false}, {"w", 3, {2, 3, 4}, false}};
    operand out1 = {"y", 3, {1, 2, 4}, false};
    check(ops1, 2, &out1);

    begin(17);
    n = mb_node(G, "n", "Conv", NULL, "x,w", "y");
    mb_attr_string(n, "auto_pad", "VALID");
    mb_attr_int(n, "group", 3);
    operand ops2[] = {{"x", 4, {1, 3, 4, 4}, false}, {"w", 4, {3, 1, 2, 2}, false}};
    operand out2 = {"y", 4, {1, 3, 3, 3}, false};
    check(ops2, 2, &out2);
}

/* GatherND scatters back, adding where an index repeats. */
static void test_gather_nd(void **s)
{
    (void)s;
    begin(17);
    int64_t iv[] = {0, 1, 2, -1, 0, 1}, id[] = {3, 2};
    i64_init(G, "i", iv, 6, id, 2);
    mb_node(G, "n", "GatherND", NULL, "a,i", "y");
    operand ops[] = {{"a", 2, {3, 4}, false}};
    operand out = {"y", 1, {3}, false};
    check(ops, 1, &out);

    begin(17);
    int64_t iv2[] = {2, 0, 1, 1}, id2[] = {2, 2, 1};
    i64_init(G, "i", iv2, 4, id2, 3);
    Onnx__NodeProto *n = mb_node(G, "n", "GatherND", NULL, "a,i", "y");
    mb_attr_int(n, "batch_dims", 1);
    operand ops2[] = {{"a", 3, {2, 3, 4}, false}};
    operand out2 = {"y", 3, {2, 2, 4}, false};
    check(ops2, 1, &out2);
}

/* RMSNormalization over the last dim, and over two dims with a scale that
 * broadcasts. */
static void test_rms_norm(void **s)
{
    (void)s;
    begin(23);
    Onnx__NodeProto *n = mb_node(G, "n", "RMSNormalization", NULL, "a,g", "y");
    mb_attr_float(n, "epsilon", 1e-3f);
    operand ops[] = {{"a", 3, {2, 3, 4}, false}, {"g", 1, {4}, false}};
    operand out = {"y", 3, {2, 3, 4}, false};
    check(ops, 2, &out);

    begin(23);
    n = mb_node(G, "n", "RMSNormalization", NULL, "a,g", "y");
    mb_attr_int(n, "axis", 1);
    operand ops2[] = {{"a", 3, {2, 3, 4}, false}, {"g", 2, {3, 1}, false}};
    check(ops2, 2, &out);
}

/* Attention: rank 4 with GQA, causal and a float mask; rank 3 with head
 * counts, a past cache, softcap and a bool mask. */
static void test_attention(void **s)
{
    (void)s;
    begin(23);
    Onnx__NodeProto *n = mb_node(G, "n", "Attention", NULL, "q,k,v,m", "y");
    mb_attr_int(n, "is_causal", 1);
    operand ops[] = {{"q", 4, {1, 4, 3, 2}, false}, {"k", 4, {1, 2, 3, 2}, false},
                     {"v", 4, {1, 2, 3, 3}, false}, {"m", 2, {3, 3}, false}};
    operand out = {"y", 4, {1, 4, 3, 3}, false};
    check(ops, 4, &out);

    begin(23);
    uint8_t mv[] = {1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 1};
    int64_t md[] = {3, 4};
    bool_init(G, "m", mv, 12, md, 2);
    n = mb_node(G, "n", "Attention", NULL, "q,k,v,m,pk,pv", "y");
    mb_attr_int(n, "q_num_heads", 2);
    mb_attr_int(n, "kv_num_heads", 1);
    mb_attr_float(n, "softcap", 1.5f);
    mb_attr_float(n, "scale", 0.8f);
    operand ops2[] = {{"q", 3, {2, 3, 4}, false},    {"k", 3, {2, 2, 2}, false},
                      {"v", 3, {2, 2, 3}, false},    {"pk", 4, {2, 1, 2, 2}, false},
                      {"pv", 4, {2, 1, 2, 3}, false}};
    operand out2 = {"y", 3, {2, 3, 6}, false};
    check(ops2, 5, &out2);
}

static void f64_scalar_init(Onnx__GraphProto *g, const char *name, double v)
{
    Onnx__TensorProto *t = mb_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(name);
    t->has_data_type = 1;
    t->data_type = DBL;
    double *d = mb_alloc(sizeof(double));
    *d = v;
    t->has_raw_data = 1;
    t->raw_data.data = (uint8_t *)d;
    t->raw_data.len = sizeof(double);
    g->initializer[g->n_initializer++] = t;
}

/* Abs, Clip (bounds as inputs and, before opset 11, as attributes),
 * LeakyRelu, Elu, Softplus. */
static void test_unary_attr(void **s)
{
    (void)s;
    operand ops[] = {{"a", 2, {3, 4}, false}};
    operand out = {"y", 2, {3, 4}, false};
    const char *un[] = {"Abs", "LeakyRelu", "Elu", "Softplus"};
    for (size_t i = 0; i < 4; i++) {
        begin(17);
        Onnx__NodeProto *n = mb_node(G, "n", un[i], NULL, "a", "y");
        if (i == 1 || i == 2) mb_attr_float(n, "alpha", 0.3f);
        check(ops, 1, &out);
    }
    begin(17);
    f64_scalar_init(G, "lo", -0.4);
    f64_scalar_init(G, "hi", 0.5);
    mb_node(G, "n", "Clip", NULL, "a,lo,hi", "y");
    check(ops, 1, &out);
    begin(6);
    Onnx__NodeProto *n = mb_node(G, "n", "Clip", NULL, "a", "y");
    mb_attr_float(n, "min", -0.5f);
    check(ops, 1, &out);
}

/* Sum, Mean, Max, Min of three broadcast inputs; ReduceMax and ReduceMin
 * with axes as an attribute and as an input. */
static void test_variadic_extremes(void **s)
{
    (void)s;
    const char *op[] = {"Sum", "Mean", "Max", "Min"};
    for (size_t i = 0; i < 4; i++) {
        begin(17);
        mb_node(G, "n", op[i], NULL, "a,b,c", "y");
        /* big enough that every input holds the extreme somewhere */
        operand ops[] = {{"a", 2, {4, 5}, false}, {"b", 1, {5}, false}, {"c", 2, {4, 1}, false}};
        operand out = {"y", 2, {4, 5}, false};
        check(ops, 3, &out);
    }
    const char *red[] = {"ReduceMax", "ReduceMin"};
    for (size_t i = 0; i < 2; i++) {
        begin(17);
        Onnx__NodeProto *n = mb_node(G, "n", red[i], NULL, "a", "y");
        int64_t ax[] = {1};
        mb_attr_ints(n, "axes", ax, 1);
        mb_attr_int(n, "keepdims", 0);
        operand ops[] = {{"a", 3, {2, 3, 4}, false}};
        operand out = {"y", 2, {2, 4}, false};
        check(ops, 1, &out);
        begin(18);
        int64_t d1[] = {2}, axv[] = {0, -1};
        i64_init(G, "axes", axv, 2, d1, 1);
        mb_node(G, "n", red[i], NULL, "a,axes", "y");
        operand out2 = {"y", 3, {1, 3, 1}, false};
        check(ops, 1, &out2);
    }
}

/* CumSum in all four modes, Tile, GatherElements, Trilu, TopK (with and
 * without its indices output). */
static void test_scan_and_select(void **s)
{
    (void)s;
    operand ops[] = {{"a", 3, {2, 3, 4}, false}};
    for (int mode = 0; mode < 4; mode++) {
        begin(17);
        int64_t d1[] = {1}, axv[] = {mode < 2 ? 1 : -1};
        i64_init(G, "axis", axv, 1, d1, 0);
        Onnx__NodeProto *n = mb_node(G, "n", "CumSum", NULL, "a,axis", "y");
        mb_attr_int(n, "exclusive", mode & 1);
        mb_attr_int(n, "reverse", (mode >> 1) & 1);
        operand out = {"y", 3, {2, 3, 4}, false};
        check(ops, 1, &out);
    }
    begin(17);
    int64_t rep[] = {2, 1, 3}, d3[] = {3};
    i64_init(G, "rep", rep, 3, d3, 1);
    mb_node(G, "n", "Tile", NULL, "a,rep", "y");
    operand out_t = {"y", 3, {4, 3, 12}, false};
    check(ops, 1, &out_t);

    begin(17);
    int64_t iv[] = {2, 0, -1, 2, 1, 1, 0, 2}, id[] = {2, 1, 4};
    i64_init(G, "i", iv, 8, id, 3);
    Onnx__NodeProto *n = mb_node(G, "n", "GatherElements", NULL, "a,i", "y");
    mb_attr_int(n, "axis", 1);
    operand out_g = {"y", 3, {2, 1, 4}, false};
    check(ops, 1, &out_g);

    for (int upper = 0; upper < 2; upper++) {
        begin(17);
        int64_t kv[] = {upper ? 1 : -1}, d0[] = {1};
        i64_init(G, "k", kv, 1, d0, 0);
        n = mb_node(G, "n", "Trilu", NULL, "a,k", "y");
        mb_attr_int(n, "upper", upper);
        operand out = {"y", 3, {2, 3, 4}, false};
        check(ops, 1, &out);
    }
    for (int with_idx = 0; with_idx < 2; with_idx++) {
        begin(17);
        int64_t kv[] = {2}, d1[] = {1};
        i64_init(G, "k", kv, 1, d1, 1);
        n = mb_node(G, "n", "TopK", NULL, "a,k", with_idx ? "y,idx" : "y");
        mb_attr_int(n, "axis", 1);
        mb_attr_int(n, "largest", with_idx);
        operand out = {"y", 3, {2, 2, 4}, false};
        check(ops, 1, &out);
    }
}

/* Max of equal inputs splits the gradient evenly (mean-squared-error loss:
 * dL/dy = 2 (y - t) / n; each of two tied inputs gets (y - t) / n, a sole
 * maximum all of it). */
static void test_max_ties(void **s)
{
    (void)s;
    begin(17);
    mb_node(G, "n", "Max", NULL, "a,b", "y");
    mb_input(G, "a", DBL, "4");
    mb_input(G, "b", DBL, "4");
    mb_output(G, "y", DBL, "4");
    size_t size;
    uint8_t *bytes = mb_pack(M, &size);
    teexec_model *m;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m));
    free(bytes);
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0;
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    const int64_t d[] = {4};
    double av[] = {0.5, -1, 2, 0.25}, bv[] = {0.5, -2, 2, 1}, tv[] = {1, 0, 0.5, -1};
    teexec_tensor *ts[3];
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 1, d, av, sizeof av, &ts[0]));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 1, d, bv, sizeof bv, &ts[1]));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 1, d, tv, sizeof tv, &ts[2]));
    const char *names[] = {"a", "b", "target"};
    loss_of(tr, 3, names, ts);
    teexec_tensor *ga, *gb;
    ok(teexec_trainer_grad(tr, "a", &ga));
    ok(teexec_trainer_grad(tr, "b", &gb));
    const double *pa = teexec_tensor_data_const(ga), *pb = teexec_tensor_data_const(gb);
    double want_a[] = {(0.5 - 1) / 4, 2 * (-1 - 0) / 4.0, (2 - 0.5) / 4, 0};
    double want_b[] = {(0.5 - 1) / 4, 0, (2 - 0.5) / 4, 2 * (1 + 1) / 4.0};
    for (int i = 0; i < 4; i++) {
        assert_true(fabs(pa[i] - want_a[i]) < 1e-15);
        assert_true(fabs(pb[i] - want_b[i]) < 1e-15);
    }
    teexec_tensor_destroy(ga);
    teexec_tensor_destroy(gb);
    for (int i = 0; i < 3; i++) teexec_tensor_destroy(ts[i]);
    teexec_trainer_destroy(tr);
    teexec_model_destroy(m);
    mb_free_all();
}

/* Einsum (matmul, batched with a transpose, a diagonal, a broadcast
 * ellipsis, a three-operand contraction) and ReduceProd. */
static void test_einsum_prod(void **s)
{
    (void)s;
    struct {
        const char *eq;
        size_t n;
        operand ops[3];
        operand out;
    } cs[] = {
        {"ij,jk->ik", 2, {{"a", 2, {2, 3}, false}, {"b", 2, {3, 4}, false}},
         {"y", 2, {2, 4}, false}},
        {"bij,bkj->bik", 2, {{"a", 3, {2, 3, 2}, false}, {"b", 3, {2, 4, 2}, false}},
         {"y", 3, {2, 3, 4}, false}},
        {"ii->i", 1, {{"a", 2, {3, 3}, false}}, {"y", 1, {3}, false}},
        {"...ij,j->...i", 2, {{"a", 3, {2, 3, 4}, false}, {"b", 1, {4}, false}},
         {"y", 2, {2, 3}, false}},
        {"ij,jk,k->i", 3, {{"a", 2, {2, 3}, false}, {"b", 2, {3, 2}, false}, {"c", 1, {2}, false}},
         {"y", 1, {2}, false}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        begin(17);
        const char *ins = cs[i].n == 1 ? "a" : cs[i].n == 2 ? "a,b" : "a,b,c";
        Onnx__NodeProto *n = mb_node(G, "n", "Einsum", NULL, ins, "y");
        mb_attr_string(n, "equation", cs[i].eq);
        check(cs[i].ops, cs[i].n, &cs[i].out);
    }
    begin(17);
    Onnx__NodeProto *n = mb_node(G, "n", "ReduceProd", NULL, "a", "y");
    int64_t ax[] = {1};
    mb_attr_ints(n, "axes", ax, 1);
    operand ops[] = {{"a", 3, {2, 3, 4}, false}};
    operand out = {"y", 3, {2, 1, 4}, false};
    check(ops, 1, &out);
}

/* ReduceProd's gradient at zeros: the product of the others at a lone
 * zero, 0 elsewhere in its group, 0 everywhere with two zeros. */
static void test_prod_zeros(void **s)
{
    (void)s;
    begin(17);
    Onnx__NodeProto *n = mb_node(G, "n", "ReduceProd", NULL, "a", "y");
    int64_t ax[] = {1};
    mb_attr_ints(n, "axes", ax, 1);
    mb_attr_int(n, "keepdims", 0);
    mb_input(G, "a", DBL, "3,3");
    mb_output(G, "y", DBL, "3");
    size_t size;
    uint8_t *bytes = mb_pack(M, &size);
    teexec_model *m;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m));
    free(bytes);
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0;
    o.optimizer = TEEXEC_OPTIMIZER_SGD;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    const int64_t da[] = {3, 3}, dy[] = {3};
    double av[] = {2, 0, 3, 0, 0, 5, 1, 2, 4}, tv[] = {1, 1, 2};
    teexec_tensor *ts[2];
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 2, da, av, sizeof av, &ts[0]));
    ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, 1, dy, tv, sizeof tv, &ts[1]));
    const char *names[] = {"a", "target"};
    loss_of(tr, 2, names, ts);
    teexec_tensor *ga;
    ok(teexec_trainer_grad(tr, "a", &ga));
    const double *p = teexec_tensor_data_const(ga);
    /* y = {0, 0, 8}; dL/dy = 2 (y - t) / 3 = {-2/3, -2/3, 4} */
    double want[] = {0, -2.0 / 3 * 6, 0, 0, 0, 0, 4 * 8, 4 * 4, 4 * 2};
    for (int i = 0; i < 9; i++) assert_true(fabs(p[i] - want[i]) < 1e-14);
    teexec_tensor_destroy(ga);
    teexec_tensor_destroy(ts[0]);
    teexec_tensor_destroy(ts[1]);
    teexec_trainer_destroy(tr);
    teexec_model_destroy(m);
    mb_free_all();
}


/* te.ops nodes train through the registry's backward (LayerNorm -> Linear
 * -> Bias -> GELU(erf) -> residual AddExtraInput). */
static void test_te_ops(void **s)
{
    (void)s;
    begin(17);
    mb_opset(M, "te.ops", 1);
    mb_node(G, "ln", "LayerNorm", "te.ops", "x,g,b", "h1");
    mb_node(G, "fc", "Linear", "te.ops", "h1,w", "h2");
    mb_node(G, "bias", "Bias", "te.ops", "h2,bb", "h3");
    Onnx__NodeProto *n = mb_node(G, "act", "GELU", "te.ops", "h3", "h4");
    mb_attr_string(n, "approximate", "none");
    mb_node(G, "res", "AddExtraInput", "te.ops", "h4,x", "y");
    operand ops[] = {{"x", 2, {3, 4}, false}, {"g", 1, {4}, false}, {"b", 1, {4}, false},
                     {"w", 2, {4, 4}, false}, {"bb", 1, {4}, false}};
    operand out = {"y", 2, {3, 4}, false};
    check(ops, 5, &out);
}


/* The same te.ops graph runs in an inference session (the CPU backend's
 * te.ops dispatch), matching a direct FP64 computation. */
static void test_te_session(void **s)
{
    (void)s;
    begin(17);
    mb_opset(M, "te.ops", 1);
    mb_node(G, "ln", "LayerNorm", "te.ops", "x,g,b", "h1");
    mb_node(G, "fc", "Linear", "te.ops", "h1,w", "h2");
    mb_node(G, "bias", "Bias", "te.ops", "h2,bb", "h3");
    Onnx__NodeProto *n = mb_node(G, "act", "GELU", "te.ops", "h3", "h4");
    mb_attr_string(n, "approximate", "none");
    mb_node(G, "res", "AddExtraInput", "te.ops", "h4,x", "y");
    operand ops[] = {{"x", 2, {3, 4}, false}, {"g", 1, {4}, false}, {"b", 1, {4}, false},
                     {"w", 2, {4, 4}, false}, {"bb", 1, {4}, false}};
    for (size_t i = 0; i < 5; i++) mb_input(G, ops[i].name, DBL, dims_str(&ops[i]));
    mb_output(G, "y", DBL, "3,4");
    size_t size;
    uint8_t *bytes = mb_pack(M, &size);
    teexec_model *m;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m));
    free(bytes);
    teexec_session *sess;
    teexec_session_options *so;
    ok(teexec_session_options_create(&so));
    ok(teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU));
    ok(teexec_session_create(m, so, &sess));
    teexec_session_options_destroy(so);
    double v[5][16];
    const char *names[5];
    teexec_tensor *ts[5];
    for (size_t i = 0; i < 5; i++) {
        for (size_t k = 0; k < 16; k++) v[i][k] = urand();
        uint64_t ne = 1;
        for (int32_t d = 0; d < ops[i].rank; d++) ne *= (uint64_t)ops[i].dims[d];
        ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, ops[i].rank, ops[i].dims, v[i],
                                     ne * sizeof(double), &ts[i]));
        names[i] = ops[i].name;
    }
    teexec_tensor *y;
    ok(teexec_session_run(sess, 5, names, (const teexec_tensor *const *)ts, 1, NULL, &y));
    const double *got = teexec_tensor_data_const(y);
    for (int r = 0; r < 3; r++) {
        const double *x = v[0] + 4 * r;
        double mu = 0, var = 0, h1[4];
        for (int j = 0; j < 4; j++) mu += x[j] / 4;
        for (int j = 0; j < 4; j++) var += (x[j] - mu) * (x[j] - mu) / 4;
        for (int j = 0; j < 4; j++) h1[j] = (x[j] - mu) / sqrt(var + (double)1e-5f) * v[1][j] + v[2][j];
        for (int o = 0; o < 4; o++) {
            double h = v[4][o];
            for (int j = 0; j < 4; j++) h += h1[j] * v[3][o * 4 + j];
            double want = 0.5 * h * (1 + erf(h / sqrt(2.0))) + x[o];
            assert_true(fabs(got[r * 4 + o] - want) < 1e-9 * (1 + fabs(want)));
        }
    }
    teexec_tensor_destroy(y);
    for (size_t i = 0; i < 5; i++) teexec_tensor_destroy(ts[i]);
    teexec_session_destroy(sess);
    teexec_model_destroy(m);
    mb_free_all();
}


/* Cross-entropy over logits [4, 5] with int64 labels, one of them the
 * ignore index: gradients against finite differences of the loss. */
static void test_cross_entropy(void **s)
{
    (void)s;
    begin(17);
    mb_node(G, "n", "MatMul", NULL, "a,b", "y");
    mb_input(G, "a", DBL, "4,3");
    mb_input(G, "b", DBL, "3,5");
    mb_output(G, "y", DBL, "4,5");
    size_t size;
    uint8_t *bytes = mb_pack(M, &size);
    teexec_model *m;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m));
    free(bytes);
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0;
    o.loss = TEEXEC_LOSS_CROSS_ENTROPY;
    o.ignore_index = 7;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    const int64_t da[] = {4, 3}, db[] = {3, 5}, dl[] = {4};
    teexec_tensor *ts[3];
    ok(teexec_tensor_create(TEEXEC_DTYPE_DOUBLE, 2, da, &ts[0]));
    ok(teexec_tensor_create(TEEXEC_DTYPE_DOUBLE, 2, db, &ts[1]));
    ok(teexec_tensor_create(TEEXEC_DTYPE_INT64, 1, dl, &ts[2]));
    for (int i = 0; i < 2; i++) {
        double *d = teexec_tensor_data(ts[i]);
        for (uint64_t k = 0; k < teexec_tensor_element_count(ts[i]); k++) d[k] = urand();
    }
    int64_t *lab = teexec_tensor_data(ts[2]);
    lab[0] = 4; lab[1] = 7; lab[2] = 0; lab[3] = 2;
    const char *names[3] = {"a", "b", "labels"};
    double l0 = loss_of(tr, 3, names, ts);
    assert_true(isfinite(l0) && l0 > 0);
    for (int i = 0; i < 2; i++) {
        teexec_tensor *g;
        ok(teexec_trainer_grad(tr, names[i], &g));
        const double *ga = teexec_tensor_data_const(g);
        double *x = teexec_tensor_data(ts[i]);
        double num = 0, den = 0;
        for (uint64_t k = 0; k < teexec_tensor_element_count(ts[i]); k++) {
            const double h = 1e-7, x0 = x[k];
            x[k] = x0 + h;
            double lp = loss_of(tr, 3, names, ts);
            x[k] = x0 - h;
            double lm = loss_of(tr, 3, names, ts);
            x[k] = x0;
            double fd = (lp - lm) / (2 * h);
            num += (fd - ga[k]) * (fd - ga[k]);
            den += fd * fd;
        }
        assert_true(den > 0);
        assert_true(sqrt(num / den) < 1e-6);
        teexec_tensor_destroy(g);
    }
    /* the ignored row (label 7) contributes nothing: a's row 1 has zero grad */
    teexec_tensor *g;
    ok(teexec_trainer_grad(tr, "a", &g));
    const double *ga = teexec_tensor_data_const(g);
    assert_true(ga[3] == 0 && ga[4] == 0 && ga[5] == 0);
    teexec_tensor_destroy(g);
    for (int i = 0; i < 3; i++) teexec_tensor_destroy(ts[i]);
    teexec_trainer_destroy(tr);
    teexec_model_destroy(m);
    mb_free_all();
}

/* An op on the path without a backward rule fails creation, naming it. */
static void test_missing_rule(void **s)
{
    (void)s;
    begin(17);
    mb_node(G, "the_floor", "Floor", NULL, "a", "y");
    mb_input(G, "a", DBL, "3");
    mb_output(G, "y", DBL, "3");
    size_t size;
    uint8_t *bytes = mb_pack(M, &size);
    teexec_model *m;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m));
    free(bytes);
    teexec_trainer *tr = (teexec_trainer *)1;
    teexec_status *st = teexec_trainer_create(m, NULL, &tr);
    assert_non_null(st);
    assert_null(tr);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    assert_non_null(strstr(teexec_status_message(st), "Floor"));
    assert_string_equal(teexec_status_node(st), "the_floor");
    teexec_status_destroy(st);
    teexec_model_destroy(m);
    mb_free_all();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),  cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_binary),  cmocka_unit_test(test_unary),
        cmocka_unit_test(test_softmax_layernorm), cmocka_unit_test(test_movement),
        cmocka_unit_test(test_where_reduce_gather_slice), cmocka_unit_test(test_missing_rule),
        cmocka_unit_test(test_te_ops),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_te_session),
        cmocka_unit_test(test_gelu_trig), cmocka_unit_test(test_conv),
        cmocka_unit_test(test_gather_nd), cmocka_unit_test(test_rms_norm),
        cmocka_unit_test(test_attention), cmocka_unit_test(test_unary_attr),
        cmocka_unit_test(test_variadic_extremes), cmocka_unit_test(test_scan_and_select),
        cmocka_unit_test(test_max_ties), cmocka_unit_test(test_einsum_prod),
        cmocka_unit_test(test_prod_zeros),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
