/* test_te_optional_inputs.c - a te.ops node may leave out its trailing
 * optional extra inputs (as ONNX allows) when the op has no parameters:
 * DotProductAttention with [q, k, v] runs and trains exactly as with
 * [q, k, v, ""]; leaving out a required one ([q, k]) is refused with a
 * message naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "../import/model_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DBL ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE
#define NE 16 /* [1, 2, 2, 4] */

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

/* Loads a one-node DPA model with the given input list; returns the status
 * of loading (model NULL on failure). */
static teexec_status *load(const char *inputs, teexec_model **model)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    mb_opset(m, "te.ops", 1);
    Onnx__GraphProto *g = mb_graph("dpa");
    m->graph = g;
    Onnx__NodeProto *n = mb_node(g, "attn", "DotProductAttention", "te.ops", inputs, "y");
    mb_attr_int(n, "causal", 1);
    mb_input(g, "q", DBL, "1,2,2,4");
    mb_input(g, "k", DBL, "1,2,2,4");
    mb_input(g, "v", DBL, "1,2,2,4");
    mb_output(g, "y", DBL, "1,2,8");
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_status *st = teexec_model_load_memory(bytes, size, NULL, NULL, model);
    free(bytes);
    mb_free_all();
    return st;
}

typedef struct qkv {
    teexec_tensor *ts[4]; /* q, k, v, target */
    const char *names[4];
} qkv;

static void make_qkv(qkv *d)
{
    static const int64_t dims[4] = {1, 2, 2, 4}, ydims[3] = {1, 2, 8};
    double v[NE];
    for (int t = 0; t < 4; t++) {
        for (int i = 0; i < NE; i++) v[i] = (double)((i * 7 + t * 5) % 11) / 5.0 - 1.0;
        ok(teexec_tensor_create_copy(TEEXEC_DTYPE_DOUBLE, t < 3 ? 4 : 3, t < 3 ? dims : ydims, v,
                                     sizeof v, &d->ts[t]));
    }
    d->names[0] = "q";
    d->names[1] = "k";
    d->names[2] = "v";
    d->names[3] = "target";
}

static void run(const char *inputs, const qkv *d, double y[NE])
{
    teexec_model *m;
    ok(load(inputs, &m));
    teexec_session *sess;
    teexec_session_options *so;
    ok(teexec_session_options_create(&so));
    ok(teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU));
    ok(teexec_session_create(m, so, &sess));
    teexec_session_options_destroy(so);
    teexec_tensor *out;
    ok(teexec_session_run(sess, 3, d->names, (const teexec_tensor *const *)d->ts, 1, NULL, &out));
    assert_int_equal(teexec_tensor_element_count(out), NE);
    memcpy(y, teexec_tensor_data_const(out), sizeof(double) * NE);
    teexec_tensor_destroy(out);
    teexec_session_destroy(sess);
    teexec_model_destroy(m);
}

/* grads of q, k, v after one lr-0 step, in g[3][NE] */
static void train(const char *inputs, const qkv *d, double *loss, double g[3][NE])
{
    teexec_model *m;
    ok(load(inputs, &m));
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.lr = 0;
    o.weight_decay = 0;
    teexec_trainer *tr;
    ok(teexec_trainer_create(m, &o, &tr));
    ok(teexec_trainer_step(tr, 4, d->names, (const teexec_tensor *const *)d->ts, loss));
    for (int i = 0; i < 3; i++) {
        teexec_tensor *t;
        ok(teexec_trainer_grad(tr, d->names[i], &t));
        memcpy(g[i], teexec_tensor_data_const(t), sizeof(double) * NE);
        teexec_tensor_destroy(t);
    }
    teexec_trainer_destroy(tr);
    teexec_model_destroy(m);
}

static void test_trailing_optional_omitted(void **st)
{
    (void)st;
    qkv d;
    make_qkv(&d);
    double a[NE], b[NE];
    run("q,k,v", &d, a);
    run("q,k,v,", &d, b);
    double nz = 0;
    for (int i = 0; i < NE; i++) {
        assert_true(a[i] == b[i]);
        nz += a[i] * a[i];
    }
    assert_true(nz > 0);

    double la, lb, ga[3][NE], gb[3][NE];
    train("q,k,v", &d, &la, ga);
    train("q,k,v,", &d, &lb, gb);
    assert_true(la == lb);
    double gn = 0;
    for (int i = 0; i < 3; i++)
        for (int e = 0; e < NE; e++) {
            assert_true(ga[i][e] == gb[i][e]);
            gn += ga[i][e] * ga[i][e];
        }
    assert_true(gn > 0);
    for (int t = 0; t < 4; t++) teexec_tensor_destroy(d.ts[t]);
}

/* [q, k]: v is required; the refusal names it, wherever it is caught. */
static void test_required_missing(void **st)
{
    (void)st;
    qkv d;
    make_qkv(&d);
    teexec_model *m = NULL;
    teexec_status *e = load("q,k", &m);
    teexec_session *sess = NULL;
    teexec_tensor *out = NULL;
    if (!e) {
        teexec_session_options *so;
        ok(teexec_session_options_create(&so));
        ok(teexec_session_options_set_device(so, TEEXEC_DEVICE_CPU));
        e = teexec_session_create(m, so, &sess);
        teexec_session_options_destroy(so);
    }
    if (!e) e = teexec_session_run(sess, 2, d.names, (const teexec_tensor *const *)d.ts, 1, NULL, &out);
    assert_non_null(e);
    const char *msg = teexec_status_message(e);
    fprintf(stderr, "message: %s\n", msg ? msg : "(none)");
    assert_non_null(msg);
    assert_non_null(strstr(msg, "required extra input 'v'"));
    teexec_status_destroy(e);
    teexec_tensor_destroy(out);
    teexec_session_destroy(sess);
    teexec_model_destroy(m);
    for (int t = 0; t < 4; t++) teexec_tensor_destroy(d.ts[t]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trailing_optional_omitted),
        cmocka_unit_test(test_required_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
