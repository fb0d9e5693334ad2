/* test_train_params.c - which initializers a trainer trains
 * (exec/trainable.h) and how it refuses a model it cannot train:
 *  - float initializers of more than one element that reach the loss are
 *    parameters; a scalar (a scale the exporter baked) and an additive mask
 *    (-inf or the dtype's lowest value) are constants of the model;
 *  - --freeze / teexec_train_options.freeze keeps named or matching ones;
 *  - every op on the path to the loss without a backward rule is listed in
 *    one status, each with its nodes;
 *  - a gain or bias read by several norms (what an exporter writes after
 *    merging equal-valued LayerNorm initializers) is trained tied, and the
 *    trainer says so in a warning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "teexec/teexec.h"
#include "../import/model_builder.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static void ok(teexec_status *st)
{
    if (st) {
        fprintf(stderr, "status: %s\n", teexec_status_message(st));
        teexec_status_destroy(st);
        fail();
    }
}

static void set_init(Onnx__GraphProto *g, const char *name, const int64_t *dims, size_t rank,
                     const float *v)
{
    mb_init(g, name, dims, rank);
    Onnx__TensorProto *t = g->initializer[g->n_initializer - 1];
    memcpy(t->raw_data.data, v, t->raw_data.len); /* mb_float_tensor's raw floats */
}

/* y = (x * w + mask) * scale + b: w [4] and b [4] are weights, mask [4]
 * holds -inf and the float32 lowest value, scale is a scalar. */
static teexec_model *params_model(void)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("params");
    m->graph = g;
    mb_input(g, "x", F32, "2,4");
    mb_output(g, "y", F32, "2,4");
    static const int64_t d4[1] = {4}, d1[1] = {1};
    const float w[4] = {0.5f, -1.0f, 2.0f, 0.25f}, b[4] = {0.1f, 0.2f, -0.3f, 0.4f};
    const float mask[4] = {0.0f, -INFINITY, 0.0f, -3.4028234663852886e38f}, scale[1] = {0.5f};
    set_init(g, "w", d4, 1, w);
    set_init(g, "b", d4, 1, b);
    set_init(g, "mask", d4, 1, mask);
    set_init(g, "scale", d1, 1, scale);
    mb_node(g, "mul", "Mul", NULL, "x,w", "xw");
    mb_node(g, "add_mask", "Add", NULL, "xw,mask", "masked");
    mb_node(g, "scale", "Mul", NULL, "masked,scale", "scaled");
    mb_node(g, "bias", "Add", NULL, "scaled,b", "y");
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_model *model;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &model));
    free(bytes);
    mb_free_all();
    return model;
}

static bool trains(const teexec_trainer *t, const char *name)
{
    for (size_t i = 0; i < teexec_trainer_param_count(t); i++)
        if (!strcmp(teexec_trainer_param_name(t, i), name)) return true;
    return false;
}

static void test_constants_are_not_parameters(void **state)
{
    (void)state;
    teexec_model *m = params_model();
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    teexec_trainer *t;
    ok(teexec_trainer_create(m, &o, &t));
    assert_true(trains(t, "w"));
    assert_true(trains(t, "b"));
    assert_false(trains(t, "mask"));
    assert_false(trains(t, "scale"));
    assert_int_equal(teexec_trainer_param_count(t), 2);
    assert_int_equal(teexec_trainer_device_bytes(t), 0); /* a CPU trainer holds none */
    teexec_trainer_destroy(t);

    o.freeze = "w";
    ok(teexec_trainer_create(m, &o, &t));
    assert_false(trains(t, "w"));
    assert_true(trains(t, "b"));
    teexec_trainer_destroy(t);

    o.freeze = "x*,[ab]"; /* patterns; "x*" matches nothing trainable */
    ok(teexec_trainer_create(m, &o, &t));
    assert_true(trains(t, "w"));
    assert_false(trains(t, "b"));
    teexec_trainer_destroy(t);

    /* everything frozen: nothing to train is still a valid trainer on the
     * CPU (the loss is computed, no parameter moves) */
    o.freeze = "*";
    ok(teexec_trainer_create(m, &o, &t));
    assert_int_equal(teexec_trainer_param_count(t), 0);
    teexec_trainer_destroy(t);
    teexec_model_destroy(m);
}

/* y = Ceil(x * w) + Round(x * w) + Ceil(x * w2): two ops without backward
 * rules on the path to the loss, Ceil at two nodes. */
static void test_missing_backward_rules_listed_at_once(void **state)
{
    (void)state;
    Onnx__ModelProto *mp = mb_model(8);
    mb_opset(mp, "", 17);
    Onnx__GraphProto *g = mb_graph("gaps");
    mp->graph = g;
    mb_input(g, "x", F32, "2,4");
    mb_output(g, "y", F32, "2,4");
    static const int64_t d4[1] = {4};
    const float w[4] = {0.5f, -1.0f, 2.0f, 0.25f};
    set_init(g, "w", d4, 1, w);
    set_init(g, "w2", d4, 1, w);
    mb_node(g, "mul", "Mul", NULL, "x,w", "xw");
    mb_node(g, "mul2", "Mul", NULL, "x,w2", "xw2");
    mb_node(g, "ceil_a", "Ceil", NULL, "xw", "c1");
    mb_node(g, "round_a", "Round", NULL, "xw", "r1");
    mb_node(g, "ceil_b", "Ceil", NULL, "xw2", "c2");
    mb_node(g, "add1", "Add", NULL, "c1,r1", "s1");
    mb_node(g, "add2", "Add", NULL, "s1,c2", "y");
    size_t size;
    uint8_t *bytes = mb_pack(mp, &size);
    teexec_model *m;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &m));
    free(bytes);
    mb_free_all();
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    teexec_trainer *t = (teexec_trainer *)1;
    teexec_status *st = teexec_trainer_create(m, &o, &t);
    assert_null(t);
    assert_int_equal(teexec_status_code(st), TEEXEC_ERR_UNSUPPORTED);
    const char *msg = teexec_status_message(st);
    fprintf(stderr, "# %s\n", msg);
    assert_non_null(strstr(msg, "op Ceil (domain \"\") is on the path to the loss and has no "
                                "backward rule at nodes ceil_a, ceil_b"));
    assert_non_null(strstr(msg, "op Round (domain \"\") is on the path to the loss and has no "
                                "backward rule at node round_a"));
    teexec_status_destroy(st);
    teexec_model_destroy(m);
}

/* y = LN(LN(x; gamma_a, beta_a); gamma_b, beta_b) with the second norm's
 * gain and bias either its own or the first's (the merged export). */
static teexec_model *two_norms_model(bool shared)
{
    Onnx__ModelProto *m = mb_model(8);
    mb_opset(m, "", 17);
    Onnx__GraphProto *g = mb_graph("norms");
    m->graph = g;
    mb_input(g, "x", F32, "2,4");
    mb_output(g, "y", F32, "2,4");
    static const int64_t d4[1] = {4};
    const float ga[4] = {1, 1, 1, 1}, be[4] = {0, 0, 0, 0};
    const float gb[4] = {1.5f, 1, 1, 1}, bb[4] = {0.25f, 0, 0, 0};
    set_init(g, "gamma_a", d4, 1, ga);
    set_init(g, "beta_a", d4, 1, be);
    if (!shared) {
        set_init(g, "gamma_b", d4, 1, gb);
        set_init(g, "beta_b", d4, 1, bb);
    }
    mb_node(g, "ln_a", "LayerNormalization", NULL, "x,gamma_a,beta_a", "h");
    mb_node(g, "ln_b", "LayerNormalization", NULL,
            shared ? "h,gamma_a,beta_a" : "h,gamma_b,beta_b", "y");
    size_t size;
    uint8_t *bytes = mb_pack(m, &size);
    teexec_model *model;
    ok(teexec_model_load_memory(bytes, size, NULL, NULL, &model));
    free(bytes);
    mb_free_all();
    return model;
}

static char warned[1024];
static size_t n_warnings;

static void keep_warning(void *user, teexec_log_level level, const char *message)
{
    (void)user;
    if (level != TEEXEC_LOG_WARNING || !strstr(message, "shared by")) return;
    n_warnings++;
    snprintf(warned, sizeof warned, "%s", message);
}

static void test_shared_norm_parameters_warned(void **state)
{
    (void)state;
    teexec_train_options o;
    teexec_train_options_init(&o);
    o.device = TEEXEC_DEVICE_CPU;
    teexec_set_log_callback(keep_warning, NULL, TEEXEC_LOG_WARNING);
    for (int shared = 0; shared < 2; shared++) {
        n_warnings = 0;
        warned[0] = 0;
        teexec_model *m = two_norms_model(shared);
        teexec_trainer *t;
        ok(teexec_trainer_create(m, &o, &t));
        assert_int_equal(teexec_trainer_param_count(t), shared ? 2 : 4);
        /* the merged gain and bias: one warning each, naming it */
        assert_int_equal(n_warnings, shared ? 2 : 0);
        if (shared) {
            assert_non_null(strstr(warned, "\"beta_a\" is shared by 2 norms"));
        }
        teexec_trainer_destroy(t);
        teexec_model_destroy(m);
    }
    teexec_set_log_callback(NULL, NULL, TEEXEC_LOG_WARNING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constants_are_not_parameters),
        cmocka_unit_test(test_missing_backward_rules_listed_at_once),
        cmocka_unit_test(test_shared_norm_parameters_warned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
