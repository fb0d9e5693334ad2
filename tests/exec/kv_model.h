/*
 * kv_model.h - a tiny GPT-style decoder with the Hugging Face / Optimum KV
 * cache convention, built in memory for the generator's tests.
 *
 * Inputs: input_ids [batch, seq] int64, attention_mask [batch, total]
 * int64 (optional, see with_mask), position_ids [batch, seq] int64,
 * past_key_values.{0,1}.{key,value} [batch, 2, past, 4] float. Outputs:
 * logits [batch, seq, 32], present.{0,1}.{key,value} [batch, 2, total, 4].
 * Two pre-LN blocks of width 16: 4 query heads over 2 kv heads (GQA, the
 * grouped heads broadcast in a 5-D MatMul), the new k/v Concat-ed after
 * the past, causal by cache column (key column <= past + query index) and
 * masked by attention_mask, a ReLU MLP of width 32, an untied head.
 * Weights are a fixed hash of (tensor, index), scaled so the logits spread
 * over several units (greedy choices are not near-ties).
 *
 * Header-only, for one test program each (it includes model_builder.h,
 * whose arena is per program). Not thread-safe.
 */
#ifndef TEEXEC_TESTS_KV_MODEL_H
#define TEEXEC_TESTS_KV_MODEL_H

#define MB_MAX 128
#include "../import/model_builder.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#define KV_VOCAB 32
#define KV_HIDDEN 16
#define KV_POSITIONS 64

static uint64_t kv_hash(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A float initializer: offset + scale * u, u uniform in [-1, 1) from a hash
 * of (name, index). */
static void kv_weight(Onnx__GraphProto *g, const char *name, int64_t d0, int64_t d1, float offset,
                      float scale)
{
    /* seeded by the name, so both variants of the model share weights */
    uint64_t tensor_no = 1469598103934665603ull;
    for (const char *c = name; *c; c++) tensor_no = (tensor_no ^ (uint8_t)*c) * 1099511628211ull;
    int64_t dims[2] = {d0, d1};
    size_t rank = d1 ? 2 : 1;
    Onnx__TensorProto *t = mb_float_tensor(name, dims, rank);
    float *v = (float *)t->raw_data.data;
    size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    for (size_t i = 0; i < n; i++) {
        double u = (double)(kv_hash(tensor_no * 1000003u + i) >> 11) / 9007199254740992.0;
        v[i] = offset + scale * (float)(2 * u - 1);
    }
    g->initializer[g->n_initializer++] = t;
}

static void kv_const_i64(Onnx__GraphProto *g, const char *name, const int64_t *vals, size_t n,
                         bool scalar)
{
    Onnx__TensorProto *t = mb_alloc(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    if (!scalar) {
        t->dims = mb_alloc(sizeof(int64_t));
        t->dims[0] = (int64_t)n;
        t->n_dims = 1;
    }
    int64_t *d = mb_alloc(n * sizeof(int64_t));
    memcpy(d, vals, n * sizeof(int64_t));
    t->has_raw_data = 1;
    t->raw_data.data = (uint8_t *)d;
    t->raw_data.len = n * sizeof(int64_t);
    g->initializer[g->n_initializer++] = t;
}

static void kv_const_f(Onnx__GraphProto *g, const char *name, float v)
{
    int64_t one = 1;
    Onnx__TensorProto *t = mb_float_tensor(name, &one, 1);
    t->n_dims = 0; /* a scalar */
    *(float *)t->raw_data.data = v;
    g->initializer[g->n_initializer++] = t;
}

static Onnx__NodeProto *kv_n(Onnx__GraphProto *g, const char *op, const char *in, const char *out)
{
    static int no;
    char name[32];
    snprintf(name, sizeof name, "n%d_%s", no++, op);
    return mb_node(g, name, op, "", in, out);
}

static void kv_perm(Onnx__NodeProto *n, const int64_t *p, size_t count)
{
    mb_attr_ints(n, "perm", p, count);
}

/* One block; x is its input value, the output is named out. */
static void kv_block(Onnx__GraphProto *g, int l, const char *x, const char *out)
{
    char b[64][64];
    int k = 0;
#define V(fmt) (snprintf(b[k], 64, "l%d_" fmt, l), b[k++])
    const char *ln_g = V("ln_g"), *ln_b = V("ln_b"), *wq = V("wq"), *wk = V("wk"), *wv = V("wv"),
               *wo = V("wo"), *ln2_g = V("ln2_g"), *ln2_b = V("ln2_b"), *w1 = V("w1"),
               *w2 = V("w2");
    float s16 = 1.5f / sqrtf(16.0f), s32 = 1.5f / sqrtf(32.0f);
    kv_weight(g, ln_g, 16, 0, 1.0f, 0.1f);
    kv_weight(g, ln_b, 16, 0, 0.0f, 0.1f);
    kv_weight(g, wq, 16, 16, 0, s16);
    kv_weight(g, wk, 16, 8, 0, s16);
    kv_weight(g, wv, 16, 8, 0, s16);
    kv_weight(g, wo, 16, 16, 0, s16);
    kv_weight(g, ln2_g, 16, 0, 1.0f, 0.1f);
    kv_weight(g, ln2_b, 16, 0, 0.0f, 0.1f);
    kv_weight(g, w1, 16, 32, 0, s16);
    kv_weight(g, w2, 32, 16, 0, s32);
    char in[256], pk[64], pv[64], prk[64], prv[64];
    snprintf(pk, 64, "past_key_values.%d.key", l);
    snprintf(pv, 64, "past_key_values.%d.value", l);
    snprintf(prk, 64, "present.%d.key", l);
    snprintf(prv, 64, "present.%d.value", l);
#define IN(...) (snprintf(in, sizeof in, __VA_ARGS__), in)
    Onnx__NodeProto *n = kv_n(g, "LayerNormalization", IN("%.60s,%.60s,%.60s", x, ln_g, ln_b), V("ln"));
    mb_attr_float(n, "epsilon", 1e-5f);
    kv_n(g, "MatMul", IN("l%d_ln,%.60s", l, wq), V("q"));
    kv_n(g, "MatMul", IN("l%d_ln,%.60s", l, wk), V("k"));
    kv_n(g, "MatMul", IN("l%d_ln,%.60s", l, wv), V("v"));
    kv_n(g, "Reshape", IN("l%d_q,c_qshape", l), V("qr"));
    kv_perm(kv_n(g, "Transpose", IN("l%d_qr", l), V("qt")), (int64_t[]){0, 2, 3, 1, 4}, 5);
    kv_n(g, "Reshape", IN("l%d_k,c_kshape", l), V("kr"));
    kv_perm(kv_n(g, "Transpose", IN("l%d_kr", l), V("kt")), (int64_t[]){0, 2, 1, 3}, 4);
    kv_n(g, "Reshape", IN("l%d_v,c_kshape", l), V("vr"));
    kv_perm(kv_n(g, "Transpose", IN("l%d_vr", l), V("vt")), (int64_t[]){0, 2, 1, 3}, 4);
    mb_attr_int(kv_n(g, "Concat", IN("%.60s,l%d_kt", pk, l), prk), "axis", 2);
    mb_attr_int(kv_n(g, "Concat", IN("%.60s,l%d_vt", pv, l), prv), "axis", 2);
    kv_n(g, "Unsqueeze", IN("%.60s,c_axis2", prk), V("ku"));
    kv_perm(kv_n(g, "Transpose", IN("l%d_ku", l), V("kT")), (int64_t[]){0, 1, 2, 4, 3}, 5);
    kv_n(g, "Unsqueeze", IN("%.60s,c_axis2", prv), V("vu"));
    kv_n(g, "MatMul", IN("l%d_qt,l%d_kT", l, l), V("sc"));
    kv_n(g, "Mul", IN("l%d_sc,c_scale", l), V("scs"));
    kv_n(g, "Add", IN("l%d_scs,mask", l), V("scm"));
    mb_attr_int(kv_n(g, "Softmax", IN("l%d_scm", l), V("pr")), "axis", -1);
    kv_n(g, "MatMul", IN("l%d_pr,l%d_vu", l, l), V("o"));
    kv_perm(kv_n(g, "Transpose", IN("l%d_o", l), V("ot")), (int64_t[]){0, 3, 1, 2, 4}, 5);
    kv_n(g, "Reshape", IN("l%d_ot,c_oshape", l), V("or"));
    kv_n(g, "MatMul", IN("l%d_or,%.60s", l, wo), V("a"));
    kv_n(g, "Add", IN("%.60s,l%d_a", x, l), V("x1"));
    n = kv_n(g, "LayerNormalization", IN("l%d_x1,%.60s,%.60s", l, ln2_g, ln2_b), V("ln2"));
    mb_attr_float(n, "epsilon", 1e-5f);
    kv_n(g, "MatMul", IN("l%d_ln2,%.60s", l, w1), V("f1"));
    kv_n(g, "Relu", IN("l%d_f1", l), V("f1r"));
    kv_n(g, "MatMul", IN("l%d_f1r,%.60s", l, w2), V("f2"));
    kv_n(g, "Add", IN("l%d_x1,l%d_f2", l, l), out);
#undef IN
#undef V
}

/* The model's bytes (malloc'd; the caller frees them, then mb_free_all). */
static uint8_t *kv_model_bytes(bool with_mask, size_t *size)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("kv_decoder");
    m->graph = g;
    mb_input(g, "input_ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "batch,seq");
    if (with_mask)
        mb_input(g, "attention_mask", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "batch,total");
    mb_input(g, "position_ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, "batch,seq");
    const char *kv_names[] = {"past_key_values.0.key", "past_key_values.0.value",
                              "past_key_values.1.key", "past_key_values.1.value"};
    const char *present[] = {"present.0.key", "present.0.value", "present.1.key",
                             "present.1.value"};
    for (int i = 0; i < 4; i++)
        mb_input(g, kv_names[i], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "batch,2,past,4");
    mb_output(g, "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "batch,seq,32");
    for (int i = 0; i < 4; i++)
        mb_output(g, present[i], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "batch,2,total,4");

    kv_const_i64(g, "c_qshape", (int64_t[]){0, 0, 2, 2, 4}, 5, false);
    kv_const_i64(g, "c_kshape", (int64_t[]){0, 0, 2, 4}, 4, false);
    kv_const_i64(g, "c_oshape", (int64_t[]){0, 0, 16}, 3, false);
    kv_const_i64(g, "c_axis0", (int64_t[]){0}, 1, false);
    kv_const_i64(g, "c_axis1", (int64_t[]){1}, 1, false);
    kv_const_i64(g, "c_axis2", (int64_t[]){2}, 1, false);
    kv_const_i64(g, "c_axes123", (int64_t[]){1, 2, 3}, 3, false);
    kv_const_i64(g, "c_zero", (int64_t[]){0}, 1, true);
    kv_const_i64(g, "c_one", (int64_t[]){1}, 1, true);
    kv_const_f(g, "c_scale", 0.5f); /* 1 / sqrt(head_dim) */
    kv_const_f(g, "c_f1", 1.0f);
    kv_const_f(g, "c_big", 1e9f);

    /* the mask: 0 where a query may attend, -1e9 elsewhere */
    Onnx__NodeProto *n = kv_n(g, "Shape", "past_key_values.0.key", "sh_past");
    mb_attr_int(n, "start", 2);
    mb_attr_int(n, "end", 3);
    n = kv_n(g, "Shape", "input_ids", "sh_t");
    mb_attr_int(n, "start", 1);
    mb_attr_int(n, "end", 2);
    kv_n(g, "Add", "sh_past,sh_t", "sh_s");
    kv_n(g, "Squeeze", "sh_past,c_axis0", "past_s");
    kv_n(g, "Squeeze", "sh_s,c_axis0", "s_s");
    kv_n(g, "Range", "past_s,s_s,c_one", "qcol");
    kv_n(g, "Range", "c_zero,s_s,c_one", "kcol");
    kv_n(g, "Unsqueeze", "qcol,c_axis1", "qcol2");
    kv_n(g, "LessOrEqual", "kcol,qcol2", "causal");
    mb_attr_int(kv_n(g, "Cast", "causal", "causal_f"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    const char *keep = "causal_f";
    if (with_mask) {
        mb_attr_int(kv_n(g, "Cast", "attention_mask", "am_f"), "to",
                    ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
        kv_n(g, "Unsqueeze", "am_f,c_axes123", "am5");
        kv_n(g, "Mul", "causal_f,am5", "keep");
        keep = "keep";
    }
    char in[64];
    snprintf(in, sizeof in, "%s,c_f1", keep);
    kv_n(g, "Sub", in, "keep_m1");
    kv_n(g, "Mul", "keep_m1,c_big", "mask");

    kv_weight(g, "wte", KV_VOCAB, KV_HIDDEN, 0, 1.0f);
    kv_weight(g, "wpe", KV_POSITIONS, KV_HIDDEN, 0, 0.5f);
    kv_n(g, "Gather", "wte,input_ids", "tok");
    kv_n(g, "Gather", "wpe,position_ids", "pe");
    kv_n(g, "Add", "tok,pe", "x0");
    kv_block(g, 0, "x0", "x1");
    kv_block(g, 1, "x1", "x2");
    kv_weight(g, "lnf_g", 16, 0, 1.0f, 0.1f);
    kv_weight(g, "lnf_b", 16, 0, 0.0f, 0.1f);
    kv_weight(g, "w_head", KV_HIDDEN, KV_VOCAB, 0, 3.0f / sqrtf(16.0f));
    n = kv_n(g, "LayerNormalization", "x2,lnf_g,lnf_b", "xf");
    mb_attr_float(n, "epsilon", 1e-5f);
    kv_n(g, "MatMul", "xf,w_head", "logits");
    return mb_pack(m, size);
}

#endif
