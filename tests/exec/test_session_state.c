/* Tests for a session's state (exec/session_state.h) on the CPU: the KV
 * caches of a te.ops DotProductAttention in its cache mode, which the
 * session allocates, keeps between runs and lets the op append to.
 *
 *  - a prefill then a decode step through one session equal plain attention
 *    (a second model, no cache mode) over the concatenated keys;
 *  - a cache input fed by the caller, a cache_len past the capacity, a
 *    cache with a symbolic dim and a cache that also feeds another node are
 *    each refused with a status naming it, and the session still works
 *    after a refused run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../import/model_builder.h"
#include "teexec/teexec.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };
enum { B = 2, H = 2, HK = 1, DH = 4, CAP = 8 };

#define OK(expr)                                                                                   \
    do {                                                                                           \
        teexec_status *st_ = (expr);                                                               \
        if (st_) fail_msg("%s: %s", #expr, teexec_status_message(st_));                            \
    } while (0)

/* A model of one DotProductAttention (causal): the cache mode over
 * kv_cache.{key,value} [B, CAP, HK, DH] when `cache`, with the cache dims
 * written as cache_dims, and an Identity reading the key cache when
 * `cache_feeds_more`; else plain attention over k / v of SKV positions. */
static teexec_model *attention_model(bool cache, const char *cache_dims, bool cache_feeds_more)
{
    Onnx__ModelProto *pm = mb_model(8);
    mb_opset(pm, "", 17);
    mb_opset(pm, "te.ops", 1);
    Onnx__GraphProto *g = mb_graph("dpa");
    pm->graph = g;
    char qd[64], kd[64], yd[64];
    snprintf(qd, sizeof qd, "%d,s,%d,%d", B, H, DH);
    snprintf(kd, sizeof kd, "%d,%s,%d,%d", B, cache ? "s" : "skv", HK, DH);
    snprintf(yd, sizeof yd, "%d,s,%d", B, H * DH);
    mb_input(g, "q", F32, qd);
    mb_input(g, "k", F32, kd);
    mb_input(g, "v", F32, kd);
    if (cache) {
        mb_input(g, "kv_cache.0.key", F32, cache_dims);
        mb_input(g, "kv_cache.0.value", F32, cache_dims);
        mb_input(g, "cache_len", I64, "2");
    }
    mb_output(g, "y", F32, yd);
    Onnx__NodeProto *n = mb_node(g, "attn", "DotProductAttention", "te.ops",
                                 cache ? "q,k,v,,kv_cache.0.key,kv_cache.0.value,cache_len"
                                       : "q,k,v",
                                 "y");
    mb_attr_int(n, "causal", 1);
    if (cache_feeds_more) {
        mb_node(g, "peek", "Identity", NULL, "kv_cache.0.key", "peek");
        mb_output(g, "peek", F32, cache_dims);
    }
    size_t size = 0;
    uint8_t *bytes = mb_pack(pm, &size);
    mb_free_all();
    teexec_model *m = NULL;
    teexec_status *st = teexec_model_load_memory(bytes, size, NULL, NULL, &m);
    free(bytes);
    if (st) fail_msg("load: %s", teexec_status_message(st));
    return m;
}

static teexec_session *cpu_session(const teexec_model *m, teexec_status **err)
{
    teexec_session_options *o = NULL;
    OK(teexec_session_options_create(&o));
    OK(teexec_session_options_set_device(o, TEEXEC_DEVICE_CPU));
    teexec_session *s = NULL;
    *err = teexec_session_create(m, o, &s);
    teexec_session_options_destroy(o);
    return s;
}

/* Exactly representable values: multiples of 1/8 in [-1, 1). */
static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)((seed * 2654435761u + i * 40503u) % 16) - 8) / 8.0f;
}

static teexec_tensor *f32(int64_t s, int64_t heads, const float *data)
{
    int64_t d[4] = {B, s, heads, DH};
    teexec_tensor *t = NULL;
    OK(teexec_tensor_create_copy(TEEXEC_DTYPE_FLOAT, 4, d, data,
                                 (size_t)(B * s * heads * DH) * sizeof(float), &t));
    return t;
}

/* One run of the cache model: y [B, s, H*DH] into out. */
static teexec_status *run_cache(teexec_session *ss, int64_t s, const float *q, const float *k,
                                const float *v, const int64_t *len, float *out)
{
    teexec_tensor *in[4] = {f32(s, H, q), f32(s, HK, k), f32(s, HK, v), NULL};
    int64_t ld[1] = {B};
    OK(teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 1, ld, len, B * sizeof(int64_t), &in[3]));
    const char *names[4] = {"q", "k", "v", "cache_len"};
    teexec_tensor *y = NULL;
    teexec_status *st = teexec_session_run(ss, 4, names, (const teexec_tensor *const *)in, 1,
                                           NULL, &y);
    if (!st) memcpy(out, teexec_tensor_data(y), (size_t)(B * s * H * DH) * sizeof(float));
    teexec_tensor_destroy(y);
    for (int i = 0; i < 4; i++) teexec_tensor_destroy(in[i]);
    return st;
}

/* Plain attention over skv keys: y's last s_q rows into out (row-major
 * [B, s_q, H*DH]). */
static void run_plain(int64_t skv, int64_t s_q, const float *q, const float *k, const float *v,
                      float *out)
{
    teexec_model *m = attention_model(false, NULL, false);
    teexec_status *err = NULL;
    teexec_session *ss = cpu_session(m, &err);
    OK(err);
    /* the queries are the last s_q of skv positions: earlier rows are
     * zeros, their outputs ignored */
    float *qf = calloc((size_t)(B * skv * H * DH), sizeof(float));
    assert_non_null(qf);
    for (int64_t b = 0; b < B; b++)
        memcpy(qf + ((b * skv + skv - s_q) * H * DH), q + b * s_q * H * DH,
               (size_t)(s_q * H * DH) * sizeof(float));
    teexec_tensor *in[3] = {f32(skv, H, qf), f32(skv, HK, k), f32(skv, HK, v)};
    const char *names[3] = {"q", "k", "v"};
    teexec_tensor *y = NULL;
    OK(teexec_session_run(ss, 3, names, (const teexec_tensor *const *)in, 1, NULL, &y));
    const float *yd = teexec_tensor_data(y);
    for (int64_t b = 0; b < B; b++)
        memcpy(out + b * s_q * H * DH, yd + (b * skv + skv - s_q) * H * DH,
               (size_t)(s_q * H * DH) * sizeof(float));
    teexec_tensor_destroy(y);
    for (int i = 0; i < 3; i++) teexec_tensor_destroy(in[i]);
    free(qf);
    teexec_session_destroy(ss);
    teexec_model_destroy(m);
}

static void expect_near(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (fabsf(got[i] - want[i]) > 1e-6f * (1.0f + fabsf(want[i])))
            fail_msg("%s: element %zu is %.9g, plain attention gives %.9g", what, i, got[i], want[i]);
}

/* A 3-token prefill, then a 1-token decode step, through one session: the
 * caches it keeps hold the prefill's keys when the step runs. */
static void prefill_then_step_equal_plain_attention(void **state)
{
    (void)state;
    enum { P = 3, T = P + 1 };
    teexec_model *m = attention_model(true, "2,8,1,4", false);
    teexec_status *err = NULL;
    teexec_session *ss = cpu_session(m, &err);
    OK(err);
    /* the whole sequence, [B, T, ., DH], split into prefill and step */
    float q[B * T * H * DH], k[B * T * HK * DH], v[B * T * HK * DH];
    fill(q, sizeof q / sizeof q[0], 1);
    fill(k, sizeof k / sizeof k[0], 2);
    fill(v, sizeof v / sizeof v[0], 3);
    float qp[B * P * H * DH], kp[B * P * HK * DH], vp[B * P * HK * DH];
    float qs[B * H * DH], ks[B * HK * DH], vs[B * HK * DH];
    for (int b = 0; b < B; b++) {
        memcpy(qp + b * P * H * DH, q + b * T * H * DH, sizeof(float) * P * H * DH);
        memcpy(kp + b * P * HK * DH, k + b * T * HK * DH, sizeof(float) * P * HK * DH);
        memcpy(vp + b * P * HK * DH, v + b * T * HK * DH, sizeof(float) * P * HK * DH);
        memcpy(qs + b * H * DH, q + (b * T + P) * H * DH, sizeof(float) * H * DH);
        memcpy(ks + b * HK * DH, k + (b * T + P) * HK * DH, sizeof(float) * HK * DH);
        memcpy(vs + b * HK * DH, v + (b * T + P) * HK * DH, sizeof(float) * HK * DH);
    }
    float y_pre[B * P * H * DH], y_step[B * H * DH], want_pre[B * P * H * DH], want_step[B * H * DH];
    int64_t zero[B] = {0, 0}, three[B] = {P, P};
    OK(run_cache(ss, P, qp, kp, vp, zero, y_pre));
    OK(run_cache(ss, 1, qs, ks, vs, three, y_step));
    run_plain(P, P, qp, kp, vp, want_pre);
    run_plain(T, 1, qs, k, v, want_step);
    expect_near(y_pre, want_pre, sizeof y_pre / sizeof y_pre[0], "prefill");
    expect_near(y_step, want_step, sizeof y_step / sizeof y_step[0], "decode step");

    /* a length past the capacity is refused, and the session goes on */
    int64_t too_long[B] = {P, CAP};
    teexec_status *st = run_cache(ss, 1, qs, ks, vs, too_long, y_step);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "capacity"));
    teexec_status_destroy(st);
    float again[B * H * DH];
    OK(run_cache(ss, 1, qs, ks, vs, three, again));
    expect_near(again, want_step, sizeof again / sizeof again[0], "the step after a refusal");

    /* the caller may not feed the cache */
    teexec_tensor *in[5] = {f32(1, H, qs), f32(1, HK, ks), f32(1, HK, vs), NULL, NULL};
    int64_t ld[1] = {B}, cd[4] = {B, CAP, HK, DH};
    OK(teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 1, ld, three, sizeof three, &in[3]));
    OK(teexec_tensor_create(TEEXEC_DTYPE_FLOAT, 4, cd, &in[4]));
    const char *names[5] = {"q", "k", "v", "cache_len", "kv_cache.0.key"};
    teexec_tensor *y = NULL;
    st = teexec_session_run(ss, 5, names, (const teexec_tensor *const *)in, 1, NULL, &y);
    assert_non_null(st);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(teexec_status_message(st), "kv_cache.0.key"));
    teexec_status_destroy(st);
    for (int i = 0; i < 5; i++) teexec_tensor_destroy(in[i]);
    teexec_session_destroy(ss);
    teexec_model_destroy(m);
}

/* A cache the session cannot keep: a symbolic dim, or a second reader. */
static void caches_it_cannot_keep_are_refused(void **state)
{
    (void)state;
    struct {
        const char *dims;
        bool more;
        const char *want;
    } cases[] = {{"2,cap,1,4", false, "symbolic dim"}, {"2,8,1,4", true, "feed nothing else"}};
    for (size_t i = 0; i < 2; i++) {
        teexec_model *m = attention_model(true, cases[i].dims, cases[i].more);
        teexec_status *err = NULL;
        teexec_session *ss = cpu_session(m, &err);
        if (!err) fail_msg("case %zu: the session was created", i);
        assert_null(ss);
        assert_int_equal(teexec_status_code(err), TEEXEC_ERR_INVALID_ARGUMENT);
        if (!strstr(teexec_status_message(err), cases[i].want) ||
            !strstr(teexec_status_message(err), "kv_cache.0.key"))
            fail_msg("case %zu: %s", i, teexec_status_message(err));
        teexec_status_destroy(err);
        teexec_model_destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prefill_then_step_equal_plain_attention),
        cmocka_unit_test(caches_it_cannot_keep_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
